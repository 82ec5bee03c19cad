//! `sqlite`: every object is a BLOB inside its row of one SQLite table (E1's "inline" case).
//!
//! Table `objects(key TEXT PRIMARY KEY, size_bytes INTEGER, body BLOB)` in `objects.db` inside the
//! namespace, or with `schema = "rowid"` the same columns under an integer primary key derived
//! from the key (see `schema`); with `files = K` the table is spread over K database files by key
//! (see `files`). A put is one `BEGIN IMMEDIATE` transaction: values up to
//! `blob_io_threshold` are bound whole; larger ones are inserted as `zeroblob(len)` and filled
//! through SQLite's incremental blob I/O in bounded chunks, and a get streams them back the same
//! way, so a 900 MB value never sits in memory. An overwrite replaces row and body in that one
//! transaction: readers see the old value or the new one, never a mix. With
//! `blob_handle = "per-session"` a session keeps its read handle (and so its read snapshot) across
//! gets for up to `SNAPSHOT_MAX_AGE`. This backend must never hold more than one chunk (or one
//! value up to the threshold) in memory, and never write outside its database files.

pub(crate) mod connection;
mod files;
mod held_stmt;
mod read_blob;
mod schema;

use self::connection::{begin_write, database_files, remove_database, unsigned, SqlContext, Tuning};
use self::held_stmt::HeldStatement;
use self::read_blob::ReadBlob;
pub use self::schema::{numbered_index, row_id_of};
use self::schema::{RowKey, Schema};
use super::options::{OptionDoc, Options};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::ByteSize;
use rusqlite::blob::ZeroBlob;
use rusqlite::{params, Connection, OptionalExtension, MAIN_DB};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sqlite",
    summary: "each object a BLOB in its row of one SQLite table (large values through incremental blob I/O)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] =
    crate::options_list!(super::namespace::DataPath::DOCS, SqliteOptions::DOCS, connection::TuningOptions::DOCS, files::FilesOption::DOCS);

crate::backend_options! {
    /// sqlite's own options (the tuning and `files` blocks are shared with sqlite-file).
    struct SqliteOptions {
        blob_io_threshold: ByteSize = "1MiB" => "values up to this size are bound whole (held in memory once); larger ones stream through incremental blob I/O",
        schema: Schema = "text-key" => "text-key: objects(key TEXT PRIMARY KEY, ...), found through the key's index; rowid: keyed by an integer (one B-tree search per lookup): stowbench's numbered keys obj-N under N itself, in key order, other keys under a negative id from the xxh3-64 of the key (stored and checked; a hash collision fails the put)",
        blob_handle: BlobHandle = "per-get" => "per-get: each get reading through blob I/O opens its own handle and read transaction; per-session: one handle per session, moved row to row (sqlite3_blob_reopen), whose snapshot gets read for up to 100ms (wal only)",
    }
}

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

crate::option_choice! {
    /// How gets that read through blob I/O hold their BLOB handle (option `blob_handle`).
    /// `PerGet`: each get opens a handle and closes it, one read transaction per get.
    /// `PerSession`: each session keeps one handle and moves it from row to row
    /// (`sqlite3_blob_reopen`), as kvtest --blob-api does; the session's read transaction then
    /// spans gets (see `SNAPSHOT_MAX_AGE`).
    enum BlobHandle { PerGet = "per-get", PerSession = "per-session" }
}

/// With `blob_handle = "per-session"`, the longest a session keeps the snapshot its handle holds;
/// the first get or head after that closes the handle and starts a new one. Bounds how stale a
/// get can be, and how long the WAL cannot be reset behind the reader.
const SNAPSHOT_MAX_AGE: Duration = Duration::from_millis(100);

/// The sqlite backend for one case.
pub struct SqliteBackend {
    /// The database files the table is spread over (one unless option `files` says more), in
    /// `files::paths` order.
    dbs: Vec<PathBuf>,
    /// Where the database lives; released (a `path` option's directory removed) on cleanup.
    data: super::namespace::DataNamespace,
    tuning: Tuning,
    schema: Schema,
    blob_handle: BlobHandle,
    blob_io_threshold_bytes: u64,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    Ok(Box::new(SqliteBackend::new(options, ns)?))
}

impl SqliteBackend {
    /// Reads and checks the options (nothing is created before `prepare`).
    fn new(options: &Options, ns: &Namespace) -> Result<SqliteBackend, String> {
        options.check_known("sqlite", OPTIONS)?;
        let data = super::namespace::DataNamespace::new(options, ns)?;
        let ns = data.ns.clone();
        let own = SqliteOptions::read(options)?;
        let blob_io_threshold_bytes = own.blob_io_threshold.0;
        if blob_io_threshold_bytes > MAX_OBJECT_BYTES {
            return Err(format!(
                "target \"{}\": option \"blob_io_threshold\" is {blob_io_threshold_bytes} bytes, \
                 above the largest value SQLite stores ({MAX_OBJECT_BYTES})",
                options.target
            ));
        }
        let tuning = Tuning::from_options(options)?;
        let blob_handle = own.blob_handle;
        if blob_handle == BlobHandle::PerSession && tuning.journal_mode != "wal" {
            // Outside WAL a reader's lock keeps every writer from committing for as long as it is held.
            return Err(format!(
                "target \"{}\": option \"blob_handle\" = \"per-session\" needs journal_mode = \"wal\" \
                 (with \"{}\" the read lock each session holds between gets would block every writer)",
                options.target, tuning.journal_mode
            ));
        }
        Ok(SqliteBackend {
            dbs: files::paths(&ns.dir, files::from_options(options)?),
            data,
            tuning,
            schema: own.schema,
            blob_handle,
            blob_io_threshold_bytes,
            options: options.clone(),
        })
    }

    /// One session on database file `db`: its own connection, no BLOB handle held yet.
    fn new_session(&self, db: &Path) -> BResult<SqliteSession> {
        Ok(SqliteSession {
            held_blob: None,
            small_gets: [None, None],
            conn: self.tuning.open(db)?,
            schema: self.schema,
            blob_handle: self.blob_handle,
            snapshot_max_age: SNAPSHOT_MAX_AGE,
            blob_io_threshold_bytes: self.blob_io_threshold_bytes,
            small_value: Vec::new(),
            wait_ns: 0,
            last_get_was_large: false,
        })
    }
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
            map.insert("schema".into(), self.schema.as_str().into());
            map.insert("blob_handle".into(), self.blob_handle.as_str().into());
            map.insert("files".into(), self.dbs.len().into());
        }
        let spread = match self.dbs.len() {
            1 => String::new(),
            k => format!("; rows spread over {k} database files by key, each put committed in its key's file alone"),
        };
        BackendInfo {
            backend: "sqlite".into(),
            versions: [("sqlite".to_string(), rusqlite::version().to_string())].into_iter().collect(),
            options,
            durability: format!("one transaction per put (BEGIN IMMEDIATE … COMMIT){spread}; {}", self.tuning.durability()),
            data_paths: self.dbs.clone(),
        }
    }

    fn prepare(&self) -> BResult<()> {
        for db in &self.dbs {
            self.tuning.prepare_database(db, self.schema.create_table())?;
            self.schema.check_database(&self.tuning.open(db)?, db)?;
        }
        Ok(())
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        if let [db] = &self.dbs[..] {
            return Ok(Box::new(self.new_session(db)?));
        }
        let parts = self.dbs.iter().map(|db| self.new_session(db)).collect::<BResult<Vec<_>>>()?;
        Ok(Box::new(files::SpreadSession { parts }))
    }

    /// Allocated and apparent bytes of every database file plus its `-wal`, `-shm` and `-journal`
    /// files as they are on disk now (no checkpoint first: a WAL that has grown is space in use).
    fn disk_usage(&self) -> BResult<DiskUsage> {
        let all: Vec<PathBuf> = self.dbs.iter().flat_map(|db| database_files(db)).collect();
        super::fs::disk_usage_of(&all)
    }

    fn cleanup(&self) -> BResult<()> {
        for db in &self.dbs {
            remove_database(db)?;
        }
        self.data.release()
    }

    fn settle(&self) -> BResult<()> {
        self.dbs.iter().try_for_each(|db| self.tuning.checkpoint(db))
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
    /// The BLOB handle kept between gets (`blob_handle = "per-session"`), holding the session's
    /// read transaction open. Declared before `conn` so that it is closed first.
    held_blob: Option<ReadBlob>,
    /// The small get's statement (`Schema::select_small`), prepared on first use and kept: index 0
    /// compares the key, index 1 is for ids that name their key alone (`RowKey::exact`). Declared
    /// before `conn` so that they are finalized first.
    small_gets: [Option<HeldStatement>; 2],
    conn: Connection,
    schema: Schema,
    blob_handle: BlobHandle,
    /// How long `held_blob` may keep its snapshot (`SNAPSHOT_MAX_AGE`; shorter in tests).
    snapshot_max_age: Duration,
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

impl SqliteSession {
    /// Deletes `key`'s row in one transaction (a delete writes too: its WAL frames can fill a
    /// disk); returns how many rows went.
    fn delete_row(&mut self, row: RowKey, key: &str) -> BResult<usize> {
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let deleted = tx.execute(self.schema.delete(row), params![row.id, key]).context("delete")?;
        tx.commit().context("delete: commit")?;
        Ok(deleted)
    }

    /// Writes `key`'s row and value in one transaction.
    fn put_row(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        check_row_fits(key, len)?;
        self.release_snapshot();
        let whole = len <= self.blob_io_threshold_bytes;
        if whole {
            // Read before taking the write lock, so the lock is held only for SQLite's own work.
            self.small_value.clear();
            super::copy_exact(body, &mut self.small_value, len)?;
        }
        let id = self.schema.row_key(key).id;
        let tx = begin_write(&mut self.conn, &mut self.wait_ns)?;
        let rowid: Option<i64> = {
            let mut upsert = tx.prepare_cached(self.schema.upsert()).context("put: prepare")?;
            if whole {
                upsert.query_row(params![id, key, len as i64, &self.small_value[..]], |row| row.get(0))
            } else {
                upsert.query_row(params![id, key, len as i64, ZeroBlob(len)], |row| row.get(0))
            }
            .optional()
            .context("put: insert row")?
        };
        // No row back: the rowid upsert found another key under this key's id and left it alone.
        let rowid = rowid.ok_or_else(|| Schema::collision(&tx, key, id))?;
        if !whole {
            let mut blob = tx.blob_open(MAIN_DB, "objects", "body", rowid, false).context("put: open blob")?;
            super::copy_exact(body, &mut blob, len)?;
            blob.close().context("put: close blob")?;
        }
        // Any error above drops `tx`, which rolls back: the previous value stays as it was.
        tx.commit().context("put: commit")
    }

    /// Ends the read transaction a held BLOB handle keeps open. A write must not start inside it
    /// (in WAL an old snapshot cannot become a write transaction), and the session's next get must
    /// see what it wrote.
    fn release_snapshot(&mut self) {
        self.held_blob = None;
    }

    /// Releases the held snapshot once it is older than `snapshot_max_age`.
    fn release_old_snapshot(&mut self) {
        if self
            .held_blob
            .as_ref()
            .is_some_and(|held| crate::clock::coarse_monotonic_ns().saturating_sub(held.opened_at_ns) >= self.snapshot_max_age.as_nanos() as u64)
        {
            self.held_blob = None;
        }
    }

    /// The held statement of a small get of `row` (prepared on first use).
    fn small_get_statement(&mut self, row: RowKey) -> BResult<&mut HeldStatement> {
        let slot = &mut self.small_gets[usize::from(row.exact)];
        if slot.is_none() {
            // SAFETY: kept in `self.small_gets`, declared before `self.conn`, so finalized first.
            let stmt = unsafe { HeldStatement::prepare(&self.conn, self.schema.select_small(row)) }.context("get: prepare")?;
            *slot = Some(stmt);
        }
        Ok(slot.as_mut().expect("prepared just above"))
    }

    /// A get of a value above the threshold (or one that was, last time): finds the row, then
    /// streams its BLOB in chunks. A key whose id names it alone skips the lookup (`read_exact_row`).
    fn get_through_blob(&mut self, row: RowKey, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        if row.exact {
            if let Some(len) = self.read_exact_row(row.id, sink)? {
                return Ok(len);
            }
        }
        let id = row.id;
        let mut find = self.conn.prepare_cached(self.schema.find_row(row)).context("get: prepare")?;
        let mut rows = find.query(params![id, key]).context("get: find row")?;
        let row = rows.next().context("get: find row")?.ok_or_else(|| BackendError::not_found(key))?;
        let rowid: i64 = row.get(0).context("get: read rowid")?;
        let size_bytes = unsigned(row, 1).context("get: read size")?;
        if size_bytes <= self.blob_io_threshold_bytes {
            // Small again: read it whole while `rows` keeps this read transaction open, and take
            // the one-statement path next time.
            self.last_get_was_large = false;
            let mut stmt = self.conn.prepare_cached("SELECT body FROM objects WHERE rowid = ?1").context("get: prepare")?;
            let mut body_rows = stmt.query([rowid]).context("get: read body")?;
            let row = body_rows.next().context("get: read body")?.ok_or_else(|| BackendError::not_found(key))?;
            write_body(row, 0, key, size_bytes, sink)?;
            return Ok(size_bytes);
        }
        // `rows` is not reset yet, so the lookup's read transaction is still open: the handle opens
        // (or moves) inside it and reads the version of the row just found, then keeps that
        // transaction open by itself until it is closed. No BEGIN … COMMIT needed (two statements
        // SQLite would have to prepare per get).
        let mut blob = match self.held_blob.take() {
            Some(mut held) => {
                held.reopen(rowid).context("get: move blob handle")?;
                held
            }
            // SAFETY: the handle ends in `self.held_blob`, declared before `self.conn` (so dropped
            // first), or is dropped at the end of this get.
            None => unsafe { ReadBlob::open(&self.conn, c"objects", c"body", rowid) }.context("get: open blob")?,
        };
        drop(rows);
        drop(find);
        check_length(key, size_bytes, blob.len_bytes())?;
        super::copy_exact(&mut blob, sink, size_bytes)?;
        if self.blob_handle == BlobHandle::PerSession {
            self.held_blob = Some(blob);
        }
        Ok(size_bytes)
    }

    /// Reads the BLOB under `id` without looking the row up first, as kvtest --blob-api does: only
    /// for an id that names one key alone (`RowKey::exact`: the table refuses any other key under
    /// it), so the row found is the requested key's. The handle (opened, or moved with
    /// `sqlite3_blob_reopen`) is itself the read transaction, so the value is one committed version.
    /// `None` when there is no such row or the handle fails: then nothing was written to `sink`,
    /// the handle is dropped, and the caller's lookup says why (`not_found`, or SQLite's error).
    /// The row's `size_bytes` is not read here: the value is as long as its BLOB, and the runner's
    /// verification checks length and content.
    fn read_exact_row(&mut self, id: i64, sink: &mut dyn Write) -> BResult<Option<u64>> {
        let mut blob = match self.held_blob.take() {
            Some(mut held) => match held.reopen(id) {
                Ok(()) => held,
                Err(_) => return Ok(None),
            },
            // SAFETY: as in `get_through_blob`.
            None => match unsafe { ReadBlob::open(&self.conn, c"objects", c"body", id) } {
                Ok(blob) => blob,
                Err(_) => return Ok(None),
            },
        };
        let len = blob.len_bytes();
        // Small again: the next get asks for the value whole first.
        self.last_get_was_large = len > self.blob_io_threshold_bytes;
        super::copy_exact(&mut blob, sink, len)?;
        if self.blob_handle == BlobHandle::PerSession {
            self.held_blob = Some(blob);
        }
        Ok(Some(len))
    }
}

impl Session for SqliteSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.put_row(key, body, len).map_err(|e| connection::naming_full_database(&self.conn, e))
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.release_old_snapshot();
        let row = self.schema.row_key(key);
        // A value up to the threshold comes whole in one statement (its own read transaction: SQLite
        // makes one statement consistent), so a small get costs one lookup, not two statements.
        if !self.last_get_was_large {
            let threshold_bytes = self.blob_io_threshold_bytes;
            let threshold = i64::try_from(threshold_bytes).unwrap_or(i64::MAX);
            let stmt = self.small_get_statement(row)?;
            let found = stmt.query(row.id, (!row.exact).then_some(key), threshold).context("get: find row")?;
            let found = found.ok_or_else(|| BackendError::not_found(key))?;
            let size_bytes =
                found.integer(0).and_then(|n| u64::try_from(n).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, n))).context("get: read size")?;
            if size_bytes <= threshold_bytes {
                let body = found.blob(1).context("get: read body")?;
                check_length(key, size_bytes, body.len() as u64)?;
                sink.write_all(body)?;
                return Ok(size_bytes);
            }
        }
        self.last_get_was_large = true;
        self.get_through_blob(row, key, sink)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.release_snapshot();
        let row = self.schema.row_key(key);
        let deleted = self.delete_row(row, key).map_err(|e| connection::naming_full_database(&self.conn, e))?;
        if deleted == 0 {
            return Err(BackendError::not_found(key));
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.release_old_snapshot();
        let row = self.schema.row_key(key);
        self.conn
            .prepare_cached(self.schema.head(row))
            .and_then(|mut stmt| stmt.query_row(params![row.id, key], |r| unsigned(r, 0)).optional())
            .context("head")?
            .ok_or_else(|| BackendError::not_found(key))
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }

    fn settle(&mut self) {
        self.release_snapshot();
    }
}

/// The stored BLOB must be as long as the row says; anything else is corruption, not a short read.
fn check_length(key: &str, size_bytes: u64, stored_bytes: u64) -> BResult<()> {
    if stored_bytes != size_bytes {
        return Err(BackendError::new(ErrorKind::Corrupt, format!("key \"{key}\": row says {size_bytes} bytes but its BLOB holds {stored_bytes}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_limit_is_exactly_where_sqlite_puts_it() {
        for schema in [Schema::TextKey, Schema::Rowid] {
            // Lower SQLite's length limit to 1 MB and check our accounting of the row against it.
            let conn = Connection::open_in_memory().unwrap();
            // SAFETY: a valid open handle; sqlite3_limit only lowers a per-connection limit.
            unsafe { rusqlite::ffi::sqlite3_limit(conn.handle(), rusqlite::ffi::SQLITE_LIMIT_LENGTH, 1_000_000) };
            conn.execute_batch(schema.create_table()).unwrap();
            let key = "k".repeat(KEY_BYTES_AT_LIMIT as usize);
            let id = schema.row_key(&key).id;
            let max = 1_000_000 - ROW_OVERHEAD_BYTES - KEY_BYTES_AT_LIMIT;
            conn.query_row(schema.upsert(), params![id, key, max as i64, ZeroBlob(max)], |r| r.get::<_, i64>(0)).unwrap();
            let too_big = 1_000_000 - key.len() as u64;
            let err = conn.query_row(schema.upsert(), params![id, key, too_big as i64, ZeroBlob(too_big)], |r| r.get::<_, i64>(0)).unwrap_err();
            assert_eq!(connection::sql_error(err, "put").kind, ErrorKind::TooLarge, "{schema:?}");
        }
        assert!(check_row_fits(&"k".repeat(KEY_BYTES_AT_LIMIT as usize), MAX_OBJECT_BYTES).is_ok());
        let key = "k".repeat(KEY_BYTES_AT_LIMIT as usize);
        assert_eq!(check_row_fits(&key, MAX_OBJECT_BYTES + 1).unwrap_err().kind, ErrorKind::TooLarge);
        assert_eq!(check_row_fits("k", MAX_OBJECT_BYTES + 1).unwrap_err().kind, ErrorKind::TooLarge, "short keys too");
        assert_eq!(check_row_fits(&format!("{key}k"), MAX_OBJECT_BYTES).unwrap_err().kind, ErrorKind::TooLarge, "longer keys");
    }

    /// A prepared backend with `options` in a temporary namespace.
    fn backend(tmp: &tempfile::TempDir, options: &str) -> SqliteBackend {
        let ns = Namespace::create(&tmp.path().join("ns"), "test", "case").unwrap();
        let options = Options::new("t", "", toml::from_str(options).unwrap());
        let backend = SqliteBackend::new(&options, &ns).unwrap();
        backend.prepare().unwrap();
        backend
    }

    fn put(session: &mut SqliteSession, key: &str, value: &[u8]) {
        session.put(key, &mut &value[..], value.len() as u64).unwrap();
    }

    fn get(session: &mut SqliteSession, key: &str) -> Vec<u8> {
        let mut value = Vec::new();
        session.get(key, &mut value).unwrap();
        value
    }

    /// Exactly what docs/backends/sqlite.md promises for `blob_handle = "per-session"`: a session's
    /// gets read one snapshot until its own next write or until the snapshot is too old.
    #[test]
    fn a_held_blob_handle_reads_one_snapshot_until_a_write_or_its_age_ends_it() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = backend(&tmp, "schema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\"");
        let mut writer = backend.new_session(&backend.dbs[0]).unwrap();
        let mut reader = backend.new_session(&backend.dbs[0]).unwrap();
        reader.snapshot_max_age = Duration::from_secs(3600);
        put(&mut writer, "a", b"old a");
        put(&mut writer, "b", b"old b");
        assert_eq!(get(&mut reader, "a"), b"old a");
        put(&mut writer, "b", b"new b");
        assert_eq!(get(&mut reader, "b"), b"old b", "inside the held snapshot another session's commit is not seen");
        assert_eq!(reader.head("b").unwrap(), 5);
        put(&mut reader, "c", b"reader's own");
        assert_eq!(get(&mut reader, "b"), b"new b", "a write of the session ends its snapshot");
        assert_eq!(get(&mut reader, "c"), b"reader's own");
        put(&mut writer, "a", b"newer a");
        reader.snapshot_max_age = Duration::ZERO;
        assert_eq!(get(&mut reader, "a"), b"newer a", "an old snapshot is released before the next get");
        let mut per_get = backend.new_session(&backend.dbs[0]).unwrap();
        per_get.blob_handle = BlobHandle::PerGet;
        assert_eq!(get(&mut per_get, "a"), b"newer a");
        assert!(per_get.held_blob.is_none(), "per-get closes its handle (and read transaction) at the end of every get");
    }

    fn wal_bytes(backend: &SqliteBackend) -> u64 {
        std::fs::metadata(format!("{}-wal", backend.dbs[0].display())).map(|m| m.len()).unwrap_or(0)
    }

    /// Before a phase the WAL is copied into the database file and truncated (unless the option
    /// says no), once the sessions let go of their snapshots; a snapshot held elsewhere past
    /// busy_timeout fails the step with a message naming the option, instead of measuring a
    /// phase that reads through the WAL.
    #[test]
    fn settling_empties_the_wal_once_the_sessions_let_go_of_their_snapshots() {
        let tmp = tempfile::tempdir().unwrap();
        let options = "schema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\"\nbusy_timeout = \"100ms\"";
        let backend = backend(&tmp, options);
        let mut session = backend.new_session(&backend.dbs[0]).unwrap();
        session.snapshot_max_age = Duration::from_secs(3600);
        for i in 0..20 {
            put(&mut session, &format!("obj-{i:010}"), &[i as u8; 10_000]);
        }
        assert_eq!(get(&mut session, "obj-0000000003"), vec![3u8; 10_000]);
        assert!(session.held_blob.is_some(), "the session holds a snapshot");
        assert!(wal_bytes(&backend) > 0, "the puts left frames in the WAL");
        let refused = backend.settle().unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Conflict, "{refused:?}");
        assert!(refused.message.contains("checkpoint_before_phases = false"), "{}", refused.message);
        session.settle();
        backend.settle().unwrap();
        assert_eq!(wal_bytes(&backend), 0, "the WAL is empty: every frame is in the database file");
        assert_eq!(get(&mut session, "obj-0000000019"), vec![19u8; 10_000]);

        let tmp = tempfile::tempdir().unwrap();
        let left_alone = self::backend(&tmp, &format!("{options}\ncheckpoint_before_phases = false"));
        let mut session = left_alone.new_session(&left_alone.dbs[0]).unwrap();
        put(&mut session, "obj-0000000001", &[1u8; 10_000]);
        let before = wal_bytes(&left_alone);
        session.settle();
        left_alone.settle().unwrap();
        assert!(before > 0 && wal_bytes(&left_alone) == before, "with the option off the WAL stays as it was");
        assert_eq!(left_alone.describe().options["checkpoint_before_phases"], false);
    }

    /// A numbered key's blob get reads at its id with no lookup; a missing row gives None with
    /// nothing written (the caller's lookup then says `not_found`) and drops the failed handle.
    #[test]
    fn a_numbered_key_is_read_at_its_id_without_a_lookup() {
        let tmp = tempfile::tempdir().unwrap();
        let backend = backend(&tmp, "schema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\"");
        let mut session = backend.new_session(&backend.dbs[0]).unwrap();
        put(&mut session, "obj-0000000007", b"seven");
        put(&mut session, "obj-7", b"not numbered");
        let mut sink = Vec::new();
        assert_eq!(session.read_exact_row(7, &mut sink).unwrap(), Some(5));
        assert_eq!(sink, b"seven");
        assert!(session.held_blob.is_some(), "per-session keeps the handle");
        sink.clear();
        assert_eq!(session.read_exact_row(8, &mut sink).unwrap(), None);
        assert!(sink.is_empty() && session.held_blob.is_none(), "nothing written, the failed handle dropped");
        assert_eq!(session.get("obj-0000000008", &mut sink).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(get(&mut session, "obj-0000000007"), b"seven");
        assert_eq!(get(&mut session, "obj-7"), b"not numbered", "a hashed key takes the checked path");
    }

    #[test]
    fn a_held_blob_handle_is_refused_outside_wal() {
        let tmp = tempfile::tempdir().unwrap();
        let ns = Namespace::create(&tmp.path().join("ns"), "test", "case").unwrap();
        let options = Options::new("t", "", toml::from_str("blob_handle = \"per-session\"\njournal_mode = \"delete\"").unwrap());
        let err = SqliteBackend::new(&options, &ns).err().expect("refused");
        assert!(err.contains("\"blob_handle\"") && err.contains("wal"), "{err}");
    }
}
