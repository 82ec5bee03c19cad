//! The file side of the row + file (FILESTREAM) pattern, shared by `sqlite-file` and `mariadb`'s
//! `mode = "file"` so both have exactly the same order, crash and failure semantics; only the row
//! store differs (the `Rows` trait). What the two orders promise is described in sqlite_file.rs
//! and docs/backends/sqlite-file.md.
//!
//! Content files sit under one directory in the same fan-out directories as `fs`, always written
//! to a temporary name and renamed (`fs::write_file_atomically`), so no reader ever sees a
//! half-written file. A row names its file by a path relative to that directory.

use super::fs::WriteMode;
use super::options::Options;
use super::{BResult, BackendError, ErrorKind};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Levels of 256-way hashed directories for content files (the `fs` default).
const FANOUT_LEVELS: u32 = 2;

/// How often a get re-reads the row when a concurrent overwrite removed the file it named.
const GET_ATTEMPTS: usize = 8;

crate::option_choice! {
    /// Which of a put's two writes comes first (option `order`).
    pub enum Order { FileThenRow = "file-then-row", RowThenFile = "row-then-file" }
}

crate::backend_options! {
    /// Option `order` of the row + file backends that offer both orders (sqlite-file, mariadb).
    pub struct OrderOption {
        order: Order = "file-then-row" => "file-then-row (a crash leaves at worst an orphan file) or row-then-file (a row can point at a missing file)",
    }
}

crate::backend_options! {
    /// Option `direct` of every backend with content files (sqlite-file, mariadb and postgres in file mode).
    pub struct DirectOption {
        direct: bool = false => "read and write content files with O_DIRECT, around the page cache (as fs's direct): gets measure the device; refused before any data where the filesystem lacks O_DIRECT. The report's cache state is direct",
    }
}

/// How content files are written and read, from the backend's `fsync` and option `direct`; `direct` is tried
/// in `files` first, so a filesystem without O_DIRECT is refused before any data.
pub fn content_mode(options: &Options, fsync: bool, files: &Path) -> Result<WriteMode, String> {
    let mode = WriteMode { fsync, fsync_dirs: fsync, direct: DirectOption::read(options)?.direct };
    if mode.direct {
        super::direct::check_supported(files, &options.target)?;
    }
    Ok(mode)
}

/// The file side of a durability line: which comes first and what is fsynced.
pub fn durability(order: Order, mode: WriteMode) -> String {
    let file = match (mode.fsync, mode.direct) {
        (true, _) => "content file fsynced before its rename, directory after",
        (false, false) => "content file not fsynced (page cache; a power cut can lose it even after the row commits)",
        // O_DIRECT skips the page cache, not the device's cache, and the file's metadata and
        // directory entry still wait for writeback.
        (false, true) => {
            "content file written with O_DIRECT but not fsynced (device cache and metadata unflushed; a power cut can lose it even after the row commits)"
        }
    };
    let order = match order {
        Order::FileThenRow => "file written, then row committed",
        Order::RowThenFile => "row committed, then file written",
    };
    format!("{order}; {file}")
}

/// A row as stored: size, content path relative to the files directory, creation time.
#[derive(Debug, Clone)]
pub struct Row {
    pub size_bytes: u64,
    pub path: String,
    pub created_ns: i64,
}

/// The row side, implemented by each database.
pub trait Rows {
    /// `key`'s row, if there is one.
    fn read_row(&mut self, key: &str) -> BResult<Option<Row>>;
    /// Replaces `key`'s row with `row` in one transaction that also reads the row it replaces
    /// (no other put of the key can commit in between); returns that row.
    fn commit_row(&mut self, key: &str, row: &Row) -> BResult<Option<Row>>;
    /// Best effort after a failed row-then-file write: restore `old` (or remove the new row when
    /// there was none), but only if the row is still `ours` — another put may have replaced it.
    fn undo_row(&mut self, key: &str, ours: &Row, old: Option<Row>);
    /// Removes `key`'s row and commits; returns the path it named (`None`: there was no row).
    fn delete_row(&mut self, key: &str) -> BResult<Option<String>>;
    /// Total nanoseconds spent waiting for the database's writer lock (see `Session::wait_ns`).
    fn wait_ns(&self) -> u64 {
        0
    }
    /// See `Session::cut_handle`: a server database's connection.
    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        None
    }
}

/// A row + file session: the database's rows and this worker's content files, whichever the
/// database (`sqlite-file`, `mariadb` in file mode).
pub struct RowFileSession<R> {
    /// The row side.
    pub rows: R,
    /// The content side.
    pub content: ContentFiles,
}

impl<R: Rows + Send> super::Session for RowFileSession<R> {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.content.put(&mut self.rows, key, body, len)
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.content.get(&mut self.rows, key, sink)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.content.delete(&mut self.rows, key)
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.content.head(&mut self.rows, key)
    }

    fn wait_ns(&self) -> u64 {
        self.rows.wait_ns()
    }

    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        self.rows.cut_handle()
    }
}

/// One session's content files.
pub struct ContentFiles {
    files: PathBuf,
    order: Order,
    mode: WriteMode,
    worker: usize,
    /// Puts so far, part of each file-then-row file name so names never repeat.
    puts: u64,
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Content path of `key` relative to the files directory (hashed fan-out + percent-encoded key, as `fs`).
fn key_path(key: &str) -> String {
    super::fs::fanout_path(Path::new(""), key, FANOUT_LEVELS).to_string_lossy().into_owned()
}

/// Removes a content file; one that is already gone is fine (a crash or a racing delete).
fn remove_content(path: &Path) -> BResult<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(super::fs::call_error("unlink", path, e)),
        _ => Ok(()),
    }
}

impl ContentFiles {
    /// Content files of worker `worker` under `files`.
    pub fn new(files: PathBuf, order: Order, mode: WriteMode, worker: usize) -> ContentFiles {
        ContentFiles { files, order, mode, worker, puts: 0 }
    }

    /// Stores `len` bytes of `body` under `key` in the configured order.
    pub fn put(&mut self, rows: &mut dyn Rows, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        match self.order {
            Order::FileThenRow => self.put_file_then_row(rows, key, body, len),
            Order::RowThenFile => self.put_row_then_file(rows, key, body, len),
        }
    }

    /// file-then-row: a new uniquely named file, then the row, then the replaced file goes.
    fn put_file_then_row(&mut self, rows: &mut dyn Rows, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.puts += 1;
        let created_ns = now_ns();
        // '~' never occurs in an encoded key, so versioned names cannot collide with other keys.
        let path = format!("{}~{:x}-{:x}-{:x}", key_path(key), self.worker, created_ns, self.puts);
        let absolute = self.files.join(&path);
        super::fs::write_file_atomically(&absolute, body, len, self.mode, self.worker)?;
        let row = Row { size_bytes: len, path: path.clone(), created_ns };
        let old = match rows.commit_row(key, &row) {
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
                let why = format!("the put committed, but removing the replaced file {} failed: {}", old.path, e.message);
                BackendError::new(e.kind, why)
            }),
            _ => Ok(()),
        }
    }

    /// row-then-file: the row first, then the key's file; a failed write puts the old row back.
    fn put_row_then_file(&mut self, rows: &mut dyn Rows, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let row = Row { size_bytes: len, path: key_path(key), created_ns: now_ns() };
        let old = rows.commit_row(key, &row)?;
        if let Err(e) = super::fs::write_file_atomically(&self.files.join(&row.path), body, len, self.mode, self.worker) {
            // A crash instead of an error leaves the row without (or with the previous) content.
            rows.undo_row(key, &row, old);
            return Err(e);
        }
        self.remove_replaced(old, &row.path)
    }

    /// The row first (no row, no object), then the file it names, streamed into `sink`.
    pub fn get(&self, rows: &mut dyn Rows, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let mut missing: Option<String> = None;
        for _ in 0..GET_ATTEMPTS {
            let row = rows.read_row(key)?.ok_or_else(|| BackendError::not_found(key))?;
            let path = self.files.join(&row.path);
            match super::fs::open_to_read(&path, self.mode) {
                Ok(mut file) => {
                    // An open file stays readable even if an overwrite removes its name now.
                    let len = file.metadata().map_err(|e| super::fs::call_error("fstat", &path, e))?.len();
                    if self.order == Order::FileThenRow && len != row.size_bytes {
                        return Err(BackendError::new(
                            ErrorKind::Corrupt,
                            format!("key \"{key}\": row says {} bytes, file {} holds {len}", row.size_bytes, row.path),
                        ));
                    }
                    super::fs::read_whole(&mut file, &path, len, sink, self.mode)?;
                    return Ok(len);
                }
                // The same row twice with its file missing: not a race with an overwrite.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing.as_deref() != Some(row.path.as_str()) => {
                    missing = Some(row.path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(self.missing_file(key, &row.path)),
                Err(e) => return Err(super::fs::call_error("open", &path, e)),
            }
        }
        Err(BackendError::new(ErrorKind::Conflict, format!("key \"{key}\": replaced {GET_ATTEMPTS} times while being read")))
    }

    /// The row's size (the row alone answers).
    pub fn head(&self, rows: &mut dyn Rows, key: &str) -> BResult<u64> {
        Ok(rows.read_row(key)?.ok_or_else(|| BackendError::not_found(key))?.size_bytes)
    }

    /// Commits the row's removal, then removes the file it named.
    pub fn delete(&self, rows: &mut dyn Rows, key: &str) -> BResult<()> {
        let path = rows.delete_row(key)?.ok_or_else(|| BackendError::not_found(key))?;
        remove_content(&self.files.join(path))
    }

    /// The error for a row whose file is missing: expected in flight with row-then-file, a broken
    /// promise with file-then-row.
    fn missing_file(&self, key: &str, path: &str) -> BackendError {
        match self.order {
            Order::RowThenFile => BackendError::new(
                ErrorKind::NotFound,
                format!(
                    "key \"{key}\": its row exists but file {path} does not \
                     (order = row-then-file: written after the commit, or lost in a crash)"
                ),
            ),
            Order::FileThenRow => BackendError::new(ErrorKind::Corrupt, format!("key \"{key}\": its row names file {path}, which is missing")),
        }
    }
}
