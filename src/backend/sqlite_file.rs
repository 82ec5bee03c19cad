//! `sqlite-file`: the FILESTREAM pattern — a row in SQLite, the content in a file beside it.
//!
//! Table `objects(key TEXT PRIMARY KEY, size_bytes, path, created_ns)` in `objects.db`; content
//! files under `files/` in the same fan-out directories as `fs`, always written to a temporary
//! name and renamed, so no reader ever sees a half-written file. `order` says which comes first:
//!
//! - `file-then-row` (default): each put writes a new, uniquely named file (fsynced with
//!   `fsync = true`), then commits the row naming it, then removes the file it replaced. A crash
//!   leaves at worst an orphan file, never a row pointing at missing or partial data.
//! - `row-then-file`: commits the row, then writes the key's file (one fixed name per key). This is
//!   the order many applications use; between the commit and the rename a reader finds the row but
//!   no file (or the previous one), and a crash there leaves a row without its content. The option
//!   exists so that cost can be measured, not recommended.
//!
//! Delete commits the row's removal, then removes the file. No SQLite size limit applies to the
//! content, only the filesystem's. Outside `cleanup` (which removes `files/` whole, orphans
//! included) this backend must never delete a file that no row of its own named, and it never
//! writes outside its namespace.

use super::options::{OptionDoc, Options};
use super::sqlite::connection::{self, begin_write, database_files, remove_database, unsigned, SqlContext, Tuning, DATABASE_FILE};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use rusqlite::{params, Connection, OptionalExtension};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sqlite-file",
    summary: "row in SQLite, content in a file beside the database (the FILESTREAM pattern)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
};

const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "path", default: "<run directory>", help: "directory under which the run's namespace directory is created" },
    OptionDoc {
        name: "order",
        default: "file-then-row",
        help: "file-then-row (a crash leaves at worst an orphan file) or row-then-file (a row can point at a missing file)",
    },
    OptionDoc { name: "fsync", default: "false", help: "fsync each content file before its rename and its directory after it" },
    connection::JOURNAL_MODE_OPTION,
    connection::SYNCHRONOUS_OPTION,
    connection::PAGE_SIZE_OPTION,
    connection::CACHE_SIZE_OPTION,
    connection::BUSY_TIMEOUT_OPTION,
];

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS objects(
    key TEXT PRIMARY KEY NOT NULL,
    size_bytes INTEGER NOT NULL,
    path TEXT NOT NULL,
    created_ns INTEGER NOT NULL
)";

const UPSERT: &str = "INSERT INTO objects(key, size_bytes, path, created_ns) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT(key) DO UPDATE SET size_bytes = excluded.size_bytes, path = excluded.path, created_ns = excluded.created_ns";

/// Levels of 256-way hashed directories for content files (the `fs` default).
const FANOUT_LEVELS: u32 = 2;

/// How often a get re-reads the row when a concurrent overwrite removed the file it named.
const GET_ATTEMPTS: usize = 8;

/// Which of content file and row is made durable first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    FileThenRow,
    RowThenFile,
}

/// The sqlite-file backend for one case.
pub struct SqliteFileBackend {
    db: PathBuf,
    /// Where the database and files live; released (a `path` option's directory removed) on cleanup.
    data: super::fs::DataNamespace,
    files: PathBuf,
    tuning: Tuning,
    order: Order,
    fsync: bool,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("sqlite-file", OPTIONS)?;
    let data = super::fs::DataNamespace::new(options, ns)?;
    let ns = data.ns.clone();
    let order = match options.choice("order", &["file-then-row", "row-then-file"], "file-then-row")?.as_str() {
        "file-then-row" => Order::FileThenRow,
        _ => Order::RowThenFile,
    };
    Ok(Box::new(SqliteFileBackend {
        db: ns.dir.join(DATABASE_FILE),
        data,
        files: ns.dir.join("files"),
        tuning: Tuning::from_options(options)?,
        order,
        fsync: options.bool("fsync", false)?,
        options: options.clone(),
    }))
}

impl SqliteFileBackend {
    fn durability(&self) -> String {
        let file = if self.fsync {
            "content file fsynced before its rename, directory after"
        } else {
            "content file not fsynced (page cache; a power cut can lose it even after the row commits)"
        };
        let order = match self.order {
            Order::FileThenRow => "file written, then row committed",
            Order::RowThenFile => "row committed, then file written",
        };
        format!("{order}; {file}; row: {}", self.tuning.durability())
    }
}

impl Backend for SqliteFileBackend {
    fn capabilities(&self) -> Capabilities {
        // Content files are written in parallel; only the short row commit takes SQLite's lock.
        Capabilities::default()
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        self.tuning.record(&mut options);
        if let Some(map) = options.as_object_mut() {
            let order = if self.order == Order::FileThenRow { "file-then-row" } else { "row-then-file" };
            map.insert("order".into(), order.into());
            map.insert("fsync".into(), self.fsync.into());
        }
        BackendInfo {
            backend: "sqlite-file".into(),
            versions: [("sqlite".to_string(), rusqlite::version().to_string())].into_iter().collect(),
            options,
            durability: self.durability(),
            data_paths: vec![self.db.clone(), self.files.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        fs::create_dir_all(&self.files)?;
        self.tuning.prepare_database(&self.db, SCHEMA)
    }

    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(SqliteFileSession {
            conn: self.tuning.open(&self.db)?,
            files: self.files.clone(),
            order: self.order,
            fsync: self.fsync,
            worker,
            puts: 0,
            wait_ns: 0,
        }))
    }

    /// The database with its `-wal`, `-shm` and `-journal` files, plus every file under `files/`
    /// (content, and orphans or temporaries a crash may have left), as they are on disk now.
    fn disk_usage(&self) -> BResult<DiskUsage> {
        let mut paths = database_files(&self.db);
        paths.push(self.files.clone());
        super::fs::disk_usage_of(&paths)
    }

    fn cleanup(&self) -> BResult<()> {
        remove_database(&self.db)?;
        super::fs::remove_dir_if_present(&self.files)?;
        self.data.release()
    }
}

struct SqliteFileSession {
    conn: Connection,
    files: PathBuf,
    order: Order,
    fsync: bool,
    worker: usize,
    /// Puts so far, part of each file-then-row file name so names never repeat.
    puts: u64,
    wait_ns: u64,
}

/// A row as stored: size, content path relative to `files/`, creation time.
#[derive(Debug, Clone)]
struct Row {
    size_bytes: u64,
    path: String,
    created_ns: i64,
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Content path of `key` relative to `files/` (hashed fan-out + percent-encoded key, as `fs`).
fn key_path(key: &str) -> String {
    super::fs::fanout_path(Path::new(""), key, FANOUT_LEVELS).to_string_lossy().into_owned()
}

/// `key`'s row, if there is one (inside a transaction, the transaction's view of it).
fn read_row(conn: &Connection, key: &str) -> BResult<Option<Row>> {
    conn.prepare_cached("SELECT size_bytes, path, created_ns FROM objects WHERE key = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([key], |r| Ok(Row { size_bytes: unsigned(r, 0)?, path: r.get(1)?, created_ns: r.get(2)? })).optional()
        })
        .context("read row")
}

/// Removes a content file; one that is already gone is fine (a crash or a racing delete).
fn remove_content(path: &Path) -> BResult<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

impl SqliteFileSession {

    /// Replaces `key`'s row with `row` in one write transaction; returns the row it replaced.
    fn commit_row(&mut self, key: &str, row: &Row) -> BResult<Option<Row>> {
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let old = read_row(&tx, key)?;
        tx.prepare_cached(UPSERT)
            .and_then(|mut stmt| stmt.execute(params![key, row.size_bytes as i64, row.path, row.created_ns]))
            .context("put: write row")?;
        tx.commit().context("put: commit")?;
        Ok(old)
    }

    /// file-then-row: a new uniquely named file, then the row, then the replaced file goes.
    fn put_file_then_row(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.puts += 1;
        let created_ns = now_ns();
        // '~' never occurs in an encoded key, so versioned names cannot collide with other keys.
        let path = format!("{}~{:x}-{:x}-{:x}", key_path(key), self.worker, created_ns, self.puts);
        let absolute = self.files.join(&path);
        super::fs::write_file_atomically(&absolute, body, len, self.fsync, self.worker)?;
        let row = Row { size_bytes: len, path: path.clone(), created_ns };
        let old = match self.commit_row(key, &row) {
            Ok(old) => old,
            Err(e) => {
                // No row names the new file: it is ours to remove, and nothing else changed.
                let _ = remove_content(&absolute);
                return Err(e);
            }
        };
        self.remove_replaced(old, &path)
    }

    /// After a committed overwrite, removes the file the old row named (unless it is reused).
    fn remove_replaced(&self, old: Option<Row>, new_path: &str) -> BResult<()> {
        match old {
            Some(old) if old.path != new_path => remove_content(&self.files.join(&old.path)).map_err(|e| {
                BackendError::new(e.kind, format!("the put committed, but removing the replaced file {} failed: {}", old.path, e.message))
            }),
            _ => Ok(()),
        }
    }

    /// row-then-file: the row first, then the key's file; a failed write puts the old row back.
    fn put_row_then_file(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let row = Row { size_bytes: len, path: key_path(key), created_ns: now_ns() };
        let old = self.commit_row(key, &row)?;
        if let Err(e) = super::fs::write_file_atomically(&self.files.join(&row.path), body, len, self.fsync, self.worker) {
            self.undo_row(key, &row, old);
            return Err(e);
        }
        self.remove_replaced(old, &row.path)
    }

    /// Best effort after a failed row-then-file write: restore the previous row (or remove the new
    /// one) if nobody changed it since. A crash instead of an error leaves the dangling row.
    fn undo_row(&mut self, key: &str, ours: &Row, old: Option<Row>) {
        let undo = |conn: &mut Connection, wait_ns: &mut u64| -> BResult<()> {
            let tx = begin_write(conn, wait_ns)?;
            let mine = "key = ?1 AND path = ?2 AND created_ns = ?3";
            match &old {
                None => tx.execute(&format!("DELETE FROM objects WHERE {mine}"), params![key, ours.path, ours.created_ns]),
                Some(o) => tx.execute(
                    &format!("UPDATE objects SET size_bytes = ?4, path = ?5, created_ns = ?6 WHERE {mine}"),
                    params![key, ours.path, ours.created_ns, o.size_bytes as i64, o.path, o.created_ns],
                ),
            }
            .context("undo row")?;
            tx.commit().context("undo row: commit")
        };
        let _ = undo(&mut self.conn, &mut self.wait_ns);
    }
}

impl Session for SqliteFileSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        match self.order {
            Order::FileThenRow => self.put_file_then_row(key, body, len),
            Order::RowThenFile => self.put_row_then_file(key, body, len),
        }
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let mut missing: Option<String> = None;
        for _ in 0..GET_ATTEMPTS {
            let row = read_row(&self.conn, key)?.ok_or_else(|| BackendError::not_found(key))?;
            match File::open(self.files.join(&row.path)) {
                Ok(mut file) => {
                    // An open file stays readable even if an overwrite removes its name now.
                    let len = file.metadata()?.len();
                    if self.order == Order::FileThenRow && len != row.size_bytes {
                        return Err(BackendError::new(
                            ErrorKind::Corrupt,
                            format!("key \"{key}\": row says {} bytes, file {} holds {len}", row.size_bytes, row.path),
                        ));
                    }
                    super::copy_exact(&mut file, sink, len)?;
                    return Ok(len);
                }
                // The same row twice with its file missing: not a race with an overwrite.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing.as_deref() != Some(row.path.as_str()) => {
                    missing = Some(row.path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.missing_file(key, &row.path)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(BackendError::new(ErrorKind::Conflict, format!("key \"{key}\": replaced {GET_ATTEMPTS} times while being read")))
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let path: Option<String> = tx
            .prepare_cached("DELETE FROM objects WHERE key = ?1 RETURNING path")
            .and_then(|mut stmt| stmt.query_row([key], |r| r.get(0)).optional())
            .context("delete")?;
        tx.commit().context("delete: commit")?;
        let path = path.ok_or_else(|| BackendError::not_found(key))?;
        remove_content(&self.files.join(path))
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        Ok(read_row(&self.conn, key)?.ok_or_else(|| BackendError::not_found(key))?.size_bytes)
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}

impl SqliteFileSession {
    /// The error for a row whose file is missing: expected in flight with row-then-file, a broken
    /// promise with file-then-row.
    fn missing_file(&self, key: &str, path: &str) -> BackendError {
        match self.order {
            Order::RowThenFile => BackendError::new(
                ErrorKind::NotFound,
                format!("key \"{key}\": its row exists but file {path} does not (order = row-then-file: written after the commit, or lost in a crash)"),
            ),
            Order::FileThenRow => BackendError::new(ErrorKind::Corrupt, format!("key \"{key}\": its row names file {path}, which is missing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that gives `left` bytes and then takes the process down with it (a panic stands in
    /// for a crash: nothing after the write in progress runs).
    struct CrashingBody {
        left: u64,
    }

    impl Read for CrashingBody {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            assert!(self.left > 0, "simulated crash in the middle of a put");
            let n = buf.len().min(self.left as usize);
            buf[..n].fill(b'x');
            self.left -= n as u64;
            Ok(n)
        }
    }

    fn backend(order: &str, tmp: &Path) -> Box<dyn Backend> {
        let ns = Namespace::create(&tmp.join("ns"), "t", "t").unwrap();
        let options = Options::new("t", "", toml::from_str(&format!("order = \"{order}\"")).unwrap());
        let backend = construct(&options, &ns).unwrap();
        backend.prepare().unwrap();
        backend
    }

    fn crash_mid_put(backend: &dyn Backend, key: &str) {
        let mut session = backend.open_session(0).unwrap();
        let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = session.put(key, &mut CrashingBody { left: 300_000 }, 1_000_000);
        }));
        assert!(crashed.is_err(), "the body must have crashed the put");
    }

    #[test]
    fn a_crash_mid_put_with_file_then_row_leaves_only_an_orphan_file() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = backend("file-then-row", tmp.path());
        backend.open_session(0).unwrap().put("k", &mut &b"old value"[..], 9).unwrap();
        crash_mid_put(&*backend, "k");
        crash_mid_put(&*backend, "new");
        let mut session = backend.open_session(1).unwrap();
        let mut value = Vec::new();
        session.get("k", &mut value).unwrap();
        assert_eq!(value, b"old value");
        assert_eq!(session.head("new").unwrap_err().kind, ErrorKind::NotFound);
        // The old content plus two partial temporary files: counted by disk_usage, gone after cleanup.
        let content = || super::super::fs::disk_usage_of(&[tmp.path().join("ns/files")]).unwrap().files;
        assert_eq!(content(), 3);
        backend.cleanup().unwrap();
        assert_eq!(content(), 0);
    }

    #[test]
    fn a_crash_mid_put_with_row_then_file_leaves_a_row_without_content() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = backend("row-then-file", tmp.path());
        crash_mid_put(&*backend, "new");
        let mut session = backend.open_session(1).unwrap();
        assert_eq!(session.head("new").unwrap(), 1_000_000, "the row committed before the file");
        let err = session.get("new", &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
        assert!(err.message.contains("row-then-file"), "{err}");
        backend.cleanup().unwrap();
    }
}
