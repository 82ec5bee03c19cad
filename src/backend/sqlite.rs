//! `sqlite`: every object is a BLOB inside its row of one SQLite table (E1's "inline" case).
//!
//! Table `objects(key TEXT PRIMARY KEY, size_bytes INTEGER, body BLOB)` in `objects.db` inside the
//! namespace. A put is one `BEGIN IMMEDIATE` transaction: values up to `blob_io_threshold` are
//! bound whole; larger ones are inserted as `zeroblob(len)` and filled through SQLite's incremental
//! blob I/O in bounded chunks, and a get streams them back the same way, so a 900 MB value never
//! sits in memory. An overwrite replaces row and body in that one transaction: readers see the old
//! value or the new one, never a mix. This backend must never hold more than one chunk (or one
//! value up to the threshold) in memory, and never write outside its database files.

pub(crate) mod connection;

use self::connection::{begin_write, database_files, remove_database, unsigned, SqlContext, Tuning, DATABASE_FILE};
use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::ByteSize;
use rusqlite::blob::ZeroBlob;
use rusqlite::{params, Connection, OptionalExtension, MAIN_DB};
use std::io::{Read, Write};
use std::path::PathBuf;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sqlite",
    summary: "each object a BLOB in its row of one SQLite table (large values through incremental blob I/O)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
};

const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "path", default: "<run directory>", help: "directory under which the run's namespace directory is created" },
    OptionDoc {
        name: "blob_io_threshold",
        default: "1MiB",
        help: "values up to this size are bound whole (held in memory once); larger ones stream through incremental blob I/O",
    },
    connection::JOURNAL_MODE_OPTION,
    connection::SYNCHRONOUS_OPTION,
    connection::PAGE_SIZE_OPTION,
    connection::CACHE_SIZE_OPTION,
    connection::BUSY_TIMEOUT_OPTION,
];

/// SQLite's compiled-in SQLITE_MAX_LENGTH, in bytes: it bounds a whole row, not only the BLOB.
pub const SQLITE_MAX_LENGTH_BYTES: u64 = 1_000_000_000;

/// Upper bound of a row's record header plus its `size_bytes` column, in bytes (really ≤ 19).
const ROW_OVERHEAD_BYTES: u64 = 40;

/// Key length the advertised limit leaves room for, in bytes; longer keys lower the limit by
/// their extra length (the put says so).
pub const KEY_BYTES_AT_LIMIT: u64 = 960;

/// Largest value this backend accepts with a key of up to `KEY_BYTES_AT_LIMIT` bytes, in bytes:
/// SQLITE_MAX_LENGTH minus the rest of the row.
pub const MAX_OBJECT_BYTES: u64 = SQLITE_MAX_LENGTH_BYTES - ROW_OVERHEAD_BYTES - KEY_BYTES_AT_LIMIT;

const LIMIT_HINT: &str = "SQLite limits a whole row (key, size and BLOB) to 1,000,000,000 bytes (SQLITE_MAX_LENGTH); \
                          use backend \"sqlite-file\" (row in SQLite, content in a file) for larger objects";

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS objects(
    key TEXT PRIMARY KEY NOT NULL,
    size_bytes INTEGER NOT NULL,
    body BLOB NOT NULL
)";

/// `body` must stay the last column: SQLite keeps a trailing zeroblob as a count instead of
/// expanding it in memory, which is what lets a 900 MB insert run in bounded memory.
const UPSERT: &str = "INSERT INTO objects(key, size_bytes, body) VALUES (?1, ?2, ?3)
    ON CONFLICT(key) DO UPDATE SET size_bytes = excluded.size_bytes, body = excluded.body
    RETURNING rowid";

/// The sqlite backend for one case.
pub struct SqliteBackend {
    db: PathBuf,
    /// Where the database lives; released (a `path` option's directory removed) on cleanup.
    data: super::fs::DataNamespace,
    tuning: Tuning,
    blob_io_threshold_bytes: u64,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("sqlite", OPTIONS)?;
    let data = super::fs::DataNamespace::new(options, ns)?;
    let ns = data.ns.clone();
    let blob_io_threshold_bytes = options.size("blob_io_threshold", ByteSize(1 << 20))?.0;
    if blob_io_threshold_bytes > MAX_OBJECT_BYTES {
        return Err(format!(
            "target \"{}\": option \"blob_io_threshold\" is {blob_io_threshold_bytes} bytes, above the largest value SQLite stores ({MAX_OBJECT_BYTES})",
            options.target
        ));
    }
    Ok(Box::new(SqliteBackend {
        db: ns.dir.join(DATABASE_FILE),
        data,
        tuning: Tuning::from_options(options)?,
        blob_io_threshold_bytes,
        options: options.clone(),
    }))
}

impl Backend for SqliteBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_object_bytes: Some(MAX_OBJECT_BYTES),
            max_object_hint: Some(LIMIT_HINT.into()),
            // SQLite admits one writer at a time; others wait in its busy handler (see wait_ns).
            concurrent_writers: false,
            ..Capabilities::default()
        }
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        self.tuning.record(&mut options);
        if let Some(map) = options.as_object_mut() {
            map.insert("blob_io_threshold".into(), ByteSize(self.blob_io_threshold_bytes).label().into());
        }
        BackendInfo {
            backend: "sqlite".into(),
            versions: [("sqlite".to_string(), rusqlite::version().to_string())].into_iter().collect(),
            options,
            durability: format!("one transaction per put (BEGIN IMMEDIATE … COMMIT); {}", self.tuning.durability()),
            data_paths: vec![self.db.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        self.tuning.prepare_database(&self.db, SCHEMA)
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        Ok(Box::new(SqliteSession {
            conn: self.tuning.open(&self.db)?,
            blob_io_threshold_bytes: self.blob_io_threshold_bytes,
            small_value: Vec::new(),
            wait_ns: 0,
            last_get_was_large: false,
        }))
    }

    /// Allocated and apparent bytes of `objects.db` plus its `-wal`, `-shm` and `-journal` files
    /// as they are on disk now (no checkpoint first: a WAL that has grown is space in use).
    fn disk_usage(&self) -> BResult<DiskUsage> {
        super::fs::disk_usage_of(&database_files(&self.db))
    }

    fn cleanup(&self) -> BResult<()> {
        remove_database(&self.db)?;
        self.data.release()
    }
}

/// Writes column `idx` of `row` (a value read whole) to `sink`, checking it has `size_bytes`.
fn write_body(row: &rusqlite::Row<'_>, idx: usize, key: &str, size_bytes: u64, sink: &mut dyn Write) -> BResult<()> {
    let body = row.get_ref(idx).and_then(|v| Ok(v.as_blob()?)).context("get: read body")?;
    check_length(key, size_bytes, body.len() as u64)?;
    sink.write_all(body)?;
    Ok(())
}

struct SqliteSession {
    conn: Connection,
    blob_io_threshold_bytes: u64,
    /// Reused buffer for values bound whole (at most `blob_io_threshold_bytes`).
    small_value: Vec<u8>,
    wait_ns: u64,
    /// Whether the last value read was above the threshold: the next get then goes straight to
    /// blob I/O instead of first asking for the value whole (sizes rarely change within a case).
    last_get_was_large: bool,
}

/// Refuses, before any byte is read or written, a value above the declared limit (whatever the key,
/// so the capability is exact) or one whose row would exceed SQLITE_MAX_LENGTH (a key longer than
/// `KEY_BYTES_AT_LIMIT`).
fn check_row_fits(key: &str, len: u64) -> BResult<()> {
    let row_bytes = len.saturating_add(key.len() as u64).saturating_add(ROW_OVERHEAD_BYTES);
    if len > MAX_OBJECT_BYTES || row_bytes > SQLITE_MAX_LENGTH_BYTES {
        return Err(BackendError::new(
            ErrorKind::TooLarge,
            format!(
                "a {len}-byte value with a {}-byte key does not fit in one SQLite row (at most {MAX_OBJECT_BYTES} bytes with keys up to \
                 {KEY_BYTES_AT_LIMIT} bytes). {LIMIT_HINT}",
                key.len()
            ),
        ));
    }
    Ok(())
}

impl Session for SqliteSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        check_row_fits(key, len)?;
        let whole = len <= self.blob_io_threshold_bytes;
        if whole {
            // Read before taking the write lock, so the lock is held only for SQLite's own work.
            self.small_value.clear();
            super::copy_exact(body, &mut self.small_value, len)?;
        }
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let rowid: i64 = {
            let mut upsert = tx.prepare_cached(UPSERT).context("put: prepare")?;
            if whole {
                upsert.query_row(params![key, len as i64, &self.small_value[..]], |row| row.get(0))
            } else {
                upsert.query_row(params![key, len as i64, ZeroBlob(len)], |row| row.get(0))
            }
            .context("put: insert row")?
        };
        if !whole {
            let mut blob = tx.blob_open(MAIN_DB, "objects", "body", rowid, false).context("put: open blob")?;
            super::copy_exact(body, &mut blob, len)?;
            blob.close().context("put: close blob")?;
        }
        // Any error above drops `tx`, which rolls back: the previous value stays as it was.
        tx.commit().context("put: commit")
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        // A value up to the threshold comes whole in one statement (its own read transaction: SQLite
        // makes one statement consistent), so a small get costs one lookup, not BEGIN, two SELECTs
        // and COMMIT. Larger values stream through blob I/O inside one explicit transaction, so the
        // row found and the blob read are the same version.
        if !self.last_get_was_large {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT size_bytes, CASE WHEN size_bytes <= ?2 THEN body END FROM objects WHERE key = ?1")
                .context("get: prepare")?;
            let threshold = i64::try_from(self.blob_io_threshold_bytes).unwrap_or(i64::MAX);
            let mut rows = stmt.query(rusqlite::params![key, threshold]).context("get: find row")?;
            let row = rows.next().context("get: find row")?.ok_or_else(|| BackendError::not_found(key))?;
            let size_bytes = unsigned(row, 0).context("get: read size")?;
            if size_bytes <= self.blob_io_threshold_bytes {
                write_body(row, 1, key, size_bytes, sink)?;
                return Ok(size_bytes);
            }
        }
        self.last_get_was_large = true;
        let tx = self.conn.transaction().context("get: begin")?;
        let found: Option<(i64, u64)> = tx
            .prepare_cached("SELECT rowid, size_bytes FROM objects WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| Ok((row.get(0)?, unsigned(row, 1)?))).optional())
            .context("get: find row")?;
        let (rowid, size_bytes) = found.ok_or_else(|| BackendError::not_found(key))?;
        if size_bytes <= self.blob_io_threshold_bytes {
            // Small again: read it whole in this transaction, and take the one-statement path next.
            self.last_get_was_large = false;
            let mut stmt = tx.prepare_cached("SELECT body FROM objects WHERE rowid = ?1").context("get: prepare")?;
            let mut rows = stmt.query([rowid]).context("get: read body")?;
            let row = rows.next().context("get: read body")?.ok_or_else(|| BackendError::not_found(key))?;
            write_body(row, 0, key, size_bytes, sink)?;
            drop(rows);
            drop(stmt);
            tx.commit().context("get: end")?;
            return Ok(size_bytes);
        }
        let mut blob = tx.blob_open(MAIN_DB, "objects", "body", rowid, true).context("get: open blob")?;
        check_length(key, size_bytes, blob.len() as u64)?;
        super::copy_exact(&mut blob, sink, size_bytes)?;
        drop(blob);
        tx.commit().context("get: end")?;
        Ok(size_bytes)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let deleted = tx.execute("DELETE FROM objects WHERE key = ?1", [key]).context("delete")?;
        tx.commit().context("delete: commit")?;
        if deleted == 0 {
            return Err(BackendError::not_found(key));
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.conn
            .prepare_cached("SELECT size_bytes FROM objects WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| unsigned(row, 0)).optional())
            .context("head")?
            .ok_or_else(|| BackendError::not_found(key))
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}

/// The stored BLOB must be as long as the row says; anything else is corruption, not a short read.
fn check_length(key: &str, size_bytes: u64, stored_bytes: u64) -> BResult<()> {
    if stored_bytes != size_bytes {
        return Err(BackendError::new(
            ErrorKind::Corrupt,
            format!("key \"{key}\": row says {size_bytes} bytes but its BLOB holds {stored_bytes}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_limit_is_exactly_where_sqlite_puts_it() {
        // Lower SQLite's length limit to 1 MB and check our accounting of the row against it.
        let conn = Connection::open_in_memory().unwrap();
        // SAFETY: a valid open handle; sqlite3_limit only lowers a per-connection limit.
        unsafe { rusqlite::ffi::sqlite3_limit(conn.handle(), rusqlite::ffi::SQLITE_LIMIT_LENGTH, 1_000_000) };
        conn.execute_batch(SCHEMA).unwrap();
        let key = "k".repeat(KEY_BYTES_AT_LIMIT as usize);
        let max = 1_000_000 - ROW_OVERHEAD_BYTES - KEY_BYTES_AT_LIMIT;
        conn.query_row(UPSERT, params![key, max as i64, ZeroBlob(max)], |r| r.get::<_, i64>(0)).unwrap();
        let too_big = 1_000_000 - key.len() as u64;
        let err = conn.query_row(UPSERT, params![key, too_big as i64, ZeroBlob(too_big)], |r| r.get::<_, i64>(0)).unwrap_err();
        assert_eq!(connection::sql_error(err, "put").kind, ErrorKind::TooLarge);
        assert!(check_row_fits(&key, MAX_OBJECT_BYTES).is_ok());
        assert_eq!(check_row_fits(&key, MAX_OBJECT_BYTES + 1).unwrap_err().kind, ErrorKind::TooLarge);
        assert_eq!(check_row_fits("k", MAX_OBJECT_BYTES + 1).unwrap_err().kind, ErrorKind::TooLarge, "short keys too");
        assert_eq!(check_row_fits(&format!("{key}k"), MAX_OBJECT_BYTES).unwrap_err().kind, ErrorKind::TooLarge, "longer keys");
    }
}
