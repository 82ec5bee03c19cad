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
//! The file side (both orders, undo, reads) is `row_file`, shared with `mariadb`'s file mode.
//!
//! Delete commits the row's removal, then removes the file. No SQLite size limit applies to the
//! content, only the filesystem's. Outside `cleanup` (which removes `files/` whole, orphans
//! included) this backend must never delete a file that no row of its own named, and it never
//! writes outside its namespace.

use super::options::{OptionDoc, Options};
use super::row_file::{ContentFiles, Order, Row, RowFileSession, Rows};
use super::sqlite::connection::{self, begin_write, database_files, naming_full_database, remove_database, unsigned, SqlContext, Tuning, DATABASE_FILE};
use super::{BResult, Backend, BackendInfo, BackendKind, Capabilities, DiskUsage, Namespace, Session};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::PathBuf;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sqlite-file",
    summary: "row in SQLite, content in a file beside the database (the FILESTREAM pattern)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] = crate::options_list!(
    super::namespace::DataPath::DOCS,
    super::row_file::OrderOption::DOCS,
    SqliteFileOptions::DOCS,
    super::row_file::DirectOption::DOCS,
    connection::TuningOptions::DOCS
);

crate::backend_options! {
    /// sqlite-file's own option (the others are shared blocks).
    struct SqliteFileOptions {
        fsync: bool = false => "fsync each content file before its rename and its directory after it",
    }
}

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS objects(
    key TEXT PRIMARY KEY NOT NULL,
    size_bytes INTEGER NOT NULL,
    path TEXT NOT NULL,
    created_ns INTEGER NOT NULL
)";

const UPSERT: &str = "INSERT INTO objects(key, size_bytes, path, created_ns) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT(key) DO UPDATE SET size_bytes = excluded.size_bytes, path = excluded.path, created_ns = excluded.created_ns";

/// The sqlite-file backend for one case.
pub struct SqliteFileBackend {
    db: PathBuf,
    /// Where the database and files live; released (a `path` option's directory removed) on cleanup.
    data: super::namespace::DataNamespace,
    files: PathBuf,
    tuning: Tuning,
    order: Order,
    mode: super::fs::WriteMode,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("sqlite-file", OPTIONS)?;
    let data = super::namespace::DataNamespace::new(options, ns)?;
    let ns = data.ns.clone();
    let order = super::row_file::OrderOption::read(options)?.order;
    let files = ns.dir.join("files");
    Ok(Box::new(SqliteFileBackend {
        db: ns.dir.join(DATABASE_FILE),
        data,
        mode: super::row_file::content_mode(options, SqliteFileOptions::read(options)?.fsync, &files)?,
        files,
        tuning: Tuning::from_options(options)?,
        order,
        options: options.clone(),
    }))
}

impl SqliteFileBackend {
    fn durability(&self) -> String {
        format!("{}; row: {}", super::row_file::durability(self.order, self.mode), self.tuning.durability())
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
            map.insert("order".into(), self.order.as_str().into());
            map.insert("fsync".into(), self.mode.fsync.into());
            map.insert("direct".into(), self.mode.direct.into());
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
        super::fs::mkdir_all(&self.files)?;
        self.tuning.prepare_database(&self.db, SCHEMA)
    }

    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(RowFileSession {
            rows: SqliteRows { conn: self.tuning.open(&self.db)?, wait_ns: 0 },
            content: ContentFiles::new(self.files.clone(), self.order, self.mode, worker),
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

    fn settle(&self) -> BResult<()> {
        self.tuning.checkpoint(&self.db)
    }
}

/// The row side: one connection, and how long it waited for SQLite's write lock.
struct SqliteRows {
    conn: Connection,
    wait_ns: u64,
}

/// `key`'s row, if there is one (inside a transaction, the transaction's view of it).
fn read_row(conn: &Connection, key: &str) -> BResult<Option<Row>> {
    conn.prepare_cached("SELECT size_bytes, path, created_ns FROM objects WHERE key = ?1")
        .and_then(|mut stmt| stmt.query_row([key], |r| Ok(Row { size_bytes: unsigned(r, 0)?, path: r.get(1)?, created_ns: r.get(2)? })).optional())
        .context("read row")
}

impl Rows for SqliteRows {
    fn read_row(&mut self, key: &str) -> BResult<Option<Row>> {
        read_row(&self.conn, key)
    }

    fn commit_row(&mut self, key: &str, row: &Row) -> BResult<Option<Row>> {
        let commit = |conn: &mut Connection, wait_ns: &mut u64| -> BResult<Option<Row>> {
            let tx = begin_write(conn, wait_ns)?;
            let old = read_row(&tx, key)?;
            tx.prepare_cached(UPSERT)
                .and_then(|mut stmt| stmt.execute(params![key, row.size_bytes as i64, row.path, row.created_ns]))
                .context("put: write row")?;
            tx.commit().context("put: commit")?;
            Ok(old)
        };
        commit(&mut self.conn, &mut self.wait_ns).map_err(|e| naming_full_database(&self.conn, e))
    }

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

    fn delete_row(&mut self, key: &str) -> BResult<Option<String>> {
        let delete = |conn: &mut Connection, wait_ns: &mut u64| -> BResult<Option<String>> {
            let tx = begin_write(conn, wait_ns)?;
            let path: Option<String> = tx
                .prepare_cached("DELETE FROM objects WHERE key = ?1 RETURNING path")
                .and_then(|mut stmt| stmt.query_row([key], |r| r.get(0)).optional())
                .context("delete")?;
            tx.commit().context("delete: commit")?;
            Ok(path)
        };
        delete(&mut self.conn, &mut self.wait_ns).map_err(|e| naming_full_database(&self.conn, e))
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ErrorKind;
    use std::io::Read;
    use std::path::Path;

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
