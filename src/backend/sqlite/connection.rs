//! Tuned SQLite connections, shared by `sqlite` and `sqlite-file`: durability options, busy
//! timeout, write transactions, error kinds and the database's files on disk.
//!
//! Both backends read the same options through this one module, so "synchronous = normal" means
//! the same thing in every report. It must never leave a setting unverified (a pragma SQLite
//! silently ignores would make the report lie) and never touch files other than the database's own.

use crate::backend::options::Options;
use crate::backend::{BResult, BackendError, ErrorKind};
use crate::units::{ByteSize, Nanos};
use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};

crate::option_choice! {
    /// Journal modes offered. `memory` and `off` are left out on purpose: with them a crash in
    /// the middle of a write can corrupt the database, and stowbench never risks the data it measures.
    pub(crate) enum JournalMode { Wal = "wal", Delete = "delete", Truncate = "truncate", Persist = "persist" }
}

crate::option_choice! {
    /// Values of SQLite's `synchronous` pragma, weakest first.
    pub(crate) enum Synchronous { Off = "off", Normal = "normal", Full = "full", Extra = "extra" }
}

crate::backend_options! {
    /// The durability and tuning options of `sqlite` and `sqlite-file` (one block, so the two
    /// mean the same thing).
    pub(crate) struct TuningOptions {
        journal_mode: JournalMode = "wal" => "wal, delete, truncate or persist (memory and off are refused: a crash could corrupt the database)",
        synchronous: Synchronous = "normal" => "when SQLite syncs its files (fdatasync): off, normal, full or extra (with wal, normal can lose the last commits on power loss)",
        page_size: u64 = 4096 => "database page size in bytes (power of two, 512 to 65536; SQLite's default); fixed when the database is created",
        cache_size: ByteSize = "2000KiB" => "page cache of each connection, a whole number of KiB (SQLite's default: 2000KiB)",
        busy_timeout: Nanos = "30s" => "how long a session waits for a lock held by another before failing with a conflict",
        checkpoint_before_phases: bool = true => "wal: before each phase and its warm-up, untimed, checkpoint the WAL into the database file and truncate it (as SQLite does when the last connection closes), so a phase reads the database file, not the WAL frames the previous phase left (as many as its puts happened to write since SQLite's last automatic checkpoint); false leaves the WAL as it is",
    }
}

/// The name of the database file inside a backend's namespace directory.
pub(crate) const DATABASE_FILE: &str = "objects.db";

/// The SQLite settings of one backend, validated; every connection it opens uses them.
#[derive(Debug, Clone)]
pub(crate) struct Tuning {
    /// A `JournalMode` word.
    pub journal_mode: String,
    /// A `Synchronous` word.
    pub synchronous: String,
    /// Page size of a new database, in bytes.
    pub page_size_bytes: u64,
    /// Page cache per connection, in bytes (a multiple of 1024).
    pub cache_size_bytes: u64,
    /// Lock wait before SQLITE_BUSY, in nanoseconds (a whole number of milliseconds).
    pub busy_timeout_ns: u64,
    /// Whether `checkpoint` empties the WAL before each phase.
    pub checkpoint_before_phases: bool,
}

impl Tuning {
    /// Reads and checks the durability and tuning options; the message names the option and the fix.
    pub fn from_options(options: &Options) -> Result<Tuning, String> {
        let bad = |name: &str, why: String| format!("target \"{}\": option \"{name}\": {why}", options.target);
        let own = TuningOptions::read(options)?;
        let page_size_bytes = own.page_size;
        if !(512..=65536).contains(&page_size_bytes) || !page_size_bytes.is_power_of_two() {
            return Err(bad("page_size", format!("{page_size_bytes} is not a power of two from 512 to 65536")));
        }
        let cache_size_bytes = own.cache_size.0;
        if cache_size_bytes % 1024 != 0 || cache_size_bytes / 1024 > i32::MAX as u64 {
            return Err(bad("cache_size", format!("{cache_size_bytes} bytes is not a whole number of KiB (SQLite counts it in KiB)")));
        }
        let busy_timeout_ns = own.busy_timeout.0;
        if busy_timeout_ns % 1_000_000 != 0 || busy_timeout_ns / 1_000_000 > i32::MAX as u64 {
            return Err(bad("busy_timeout", "SQLite takes a whole number of milliseconds up to 24 days; write e.g. 30s or 250ms".into()));
        }
        Ok(Tuning {
            journal_mode: own.journal_mode.as_str().to_string(),
            synchronous: own.synchronous.as_str().to_string(),
            page_size_bytes,
            cache_size_bytes,
            busy_timeout_ns,
            checkpoint_before_phases: own.checkpoint_before_phases,
        })
    }

    /// Adds the effective values (defaults filled in) to a backend's options for the report.
    pub fn record(&self, options: &mut serde_json::Value) {
        if let Some(map) = options.as_object_mut() {
            map.insert("journal_mode".into(), self.journal_mode.clone().into());
            map.insert("synchronous".into(), self.synchronous.clone().into());
            map.insert("page_size".into(), self.page_size_bytes.into());
            map.insert("cache_size".into(), ByteSize(self.cache_size_bytes).label().into());
            // Whole milliseconds (checked), written so it parses back as the option.
            map.insert("busy_timeout".into(), format!("{}ms", self.busy_timeout_ns / 1_000_000).into());
            map.insert("checkpoint_before_phases".into(), self.checkpoint_before_phases.into());
        }
    }

    /// Before a phase (`Backend::settle`): with WAL and `checkpoint_before_phases`, copies every
    /// frame of `db`'s WAL into the database file and truncates the WAL. Why: a reader looks
    /// every page up in the WAL's hash tables while the WAL holds frames not yet copied back, and
    /// how many it holds after a put phase depends on where SQLite's last automatic checkpoint
    /// fell (every 1,000 pages), not on the work being measured; kvtest's reads, like any reader
    /// of a database whose last connection closed, find none (docs/performance/sqlite-vs-kvtest.md, session 23).
    pub fn checkpoint(&self, db: &Path) -> BResult<()> {
        if self.journal_mode != "wal" || !self.checkpoint_before_phases {
            return Ok(());
        }
        let conn = self.open(db)?;
        // (busy, frames in the WAL, frames copied): busy once the busy handler gave up on a
        // reader still using the WAL or a writer.
        let (busy, frames, copied): (i64, i64, i64) =
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).context("checkpoint the WAL")?;
        if busy != 0 {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "the WAL of {} could not be checkpointed before the phase ({copied} of {frames} frames copied): another connection kept \
                     reading or writing for busy_timeout; set checkpoint_before_phases = false to leave the WAL as it is",
                    db.display()
                ),
            ));
        }
        Ok(())
    }

    /// What a committed transaction survives with these settings, in words (from SQLite's docs).
    /// The sync call is named: this build's SQLite syncs with fdatasync, as distributions' builds
    /// do (`LIBSQLITE3_FLAGS` in .cargo/config.toml; tests/io_faults.rs checks it).
    pub fn durability(&self) -> String {
        let wal = self.journal_mode == "wal";
        let settings = format!("journal_mode={}, synchronous={}", self.journal_mode, self.synchronous);
        let meaning = match (self.synchronous.as_str(), wal) {
            ("off", _) => "SQLite never syncs its files: a commit survives a process crash, but a power cut can lose it or corrupt the database",
            ("normal", true) => {
                "the WAL is synced (fdatasync) only at checkpoints: a commit survives a process crash, but a power cut can lose the last commits (the database stays consistent)"
            }
            ("normal", false) => {
                "files synced (fdatasync) at the critical moments only: a commit survives a power cut, except for the very small chance of corruption on older filesystems that SQLite documents"
            }
            (_, true) => "the WAL is synced (fdatasync) at every commit: a committed put survives a power cut",
            ("full", false) => "journal and database are synced (fdatasync) at every commit: a committed put survives a power cut",
            _ => "journal and database are synced (fdatasync) at every commit, and the directory after the journal is removed: a committed put survives a power cut",
        };
        format!("{settings}: {meaning}")
    }

    /// Creates (or re-opens) the database at `path`, fixes its page size, runs `schema` and checks
    /// that SQLite kept the page size; harmless to call twice.
    pub fn prepare_database(&self, path: &Path, schema: &str) -> BResult<()> {
        if let Some(dir) = path.parent() {
            crate::backend::fs::mkdir_all(dir)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).context(&format!("create {}", path.display()))?;
        refuse_read_only(&conn, path)?;
        // Only effective before the first page is written (and never once in WAL mode): set it first.
        conn.pragma_update(None, "page_size", self.page_size_bytes as i64).context("set page_size")?;
        self.apply(&conn)?;
        conn.execute_batch(schema).context("create the table")?;
        let actual = conn.pragma_query_value(None, "page_size", |row| unsigned(row, 0)).context("read page_size")?;
        if actual != self.page_size_bytes {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "{} already exists with page_size {actual}, not {}; SQLite cannot change it in place. \
                     Use a new namespace or the same page_size.",
                    path.display(),
                    self.page_size_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Opens one session's connection to an existing (prepared) database.
    pub fn open(&self, path: &Path) -> BResult<Connection> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(crate::backend::fs::call_error("stat", path, e)),
            _ => return Err(BackendError::new(ErrorKind::Other, format!("{} does not exist: prepare() must run first", path.display()))),
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).context(&format!("open {}", path.display()))?;
        refuse_read_only(&conn, path)?;
        self.apply(&conn)?;
        Ok(conn)
    }

    /// Sets the per-connection settings and checks that the journal mode really took effect.
    fn apply(&self, conn: &Connection) -> BResult<()> {
        conn.busy_timeout(Nanos(self.busy_timeout_ns).duration()).context("set busy_timeout")?;
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", &self.journal_mode, |row| row.get(0)).context("set journal_mode")?;
        if !mode.eq_ignore_ascii_case(&self.journal_mode) {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!("SQLite kept journal_mode \"{mode}\" instead of \"{}\" (WAL needs shared memory, which some filesystems lack)", self.journal_mode),
            ));
        }
        conn.pragma_update(None, "synchronous", &self.synchronous).context("set synchronous")?;
        // A negative cache_size is in KiB; the checked option is a whole number of KiB.
        conn.pragma_update(None, "cache_size", -((self.cache_size_bytes / 1024) as i64)).context("set cache_size")?;
        Ok(())
    }
}

/// SQLite opens a database read-only when opening it for writing fails (a read-only file, or an
/// open that failed with an I/O error), and says so only at the first write. A backend must
/// write: fail at once, naming the call.
fn refuse_read_only(conn: &Connection, path: &Path) -> BResult<()> {
    match conn.is_readonly(rusqlite::MAIN_DB) {
        Ok(false) => Ok(()),
        Ok(true) => Err(BackendError::new(ErrorKind::Io, format!("sqlite: open of {} for writing failed (SQLite fell back to read-only)", path.display()))),
        Err(e) => Err(sql_error(e, &format!("open {}", path.display()))),
    }
}

/// Reads a non-negative integer column (sizes; rusqlite reads no u64 without a feature flag).
pub(crate) fn unsigned(row: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.get(idx)?;
    u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(idx, value))
}

/// Begins a write transaction that takes the write lock at once (BEGIN IMMEDIATE), so a waiting
/// writer goes through the busy timeout instead of failing on a lock upgrade; adds the time spent
/// acquiring it to `wait_ns` (the session's reported lock wait).
pub(crate) fn begin_write<'c>(conn: &'c mut Connection, wait_ns: &mut u64) -> BResult<Transaction<'c>> {
    crate::backend::waiting_for_lock(wait_ns, || conn.transaction_with_behavior(TransactionBehavior::Immediate).context("begin immediate"))
}

/// The database file and the journal files SQLite keeps beside it (`-wal`, `-shm`, `-journal`).
pub(crate) fn database_files(db: &Path) -> Vec<PathBuf> {
    let name = db.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let mut files = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        files.push(db.with_file_name(format!("{name}{suffix}")));
    }
    files
}

/// Removes the database and its journal files (only those names); missing files are fine.
pub(crate) fn remove_database(db: &Path) -> BResult<()> {
    for file in database_files(db) {
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(crate::backend::fs::call_error("unlink", &file, e)),
            _ => {}
        }
    }
    Ok(())
}

/// Maps a SQLite error to the kind the runner counts, keeping SQLite's message.
pub(crate) fn sql_error(e: rusqlite::Error, doing: &str) -> BackendError {
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => ErrorKind::Conflict,
        Some(ErrorCode::TooBig) => ErrorKind::TooLarge,
        Some(ErrorCode::DiskFull) => ErrorKind::NoSpace,
        Some(
            ErrorCode::SystemIoFailure
            | ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::NoLargeFileSupport
            | ErrorCode::FileLockingProtocolFailed,
        ) => ErrorKind::Io,
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => ErrorKind::Corrupt,
        _ => ErrorKind::Other,
    };
    let call = match &e {
        rusqlite::Error::SqliteFailure(f, _) => failing_call(f.extended_code).map(|c| format!(" (the failing call: {c})")),
        _ => None,
    };
    // SQLite's "database is locked" does not say that it waited, nor for how long.
    let waited = match kind {
        ErrorKind::Conflict => " (another connection held the lock for longer than this one's busy_timeout)",
        _ => "",
    };
    BackendError::new(kind, format!("sqlite: {doing}: {e}{waited}{}", call.unwrap_or_default()))
}

/// The system call behind an SQLite I/O error, from its extended result code: SQLite's message
/// alone ("disk I/O error") does not say whether a read, a write or an fsync failed.
fn failing_call(extended_code: std::os::raw::c_int) -> Option<&'static str> {
    use rusqlite::ffi;
    Some(match extended_code {
        ffi::SQLITE_IOERR_READ | ffi::SQLITE_IOERR_SHORT_READ => "read",
        ffi::SQLITE_IOERR_WRITE => "write",
        ffi::SQLITE_IOERR_FSYNC => "fsync",
        ffi::SQLITE_IOERR_DIR_FSYNC => "fsync of the directory",
        ffi::SQLITE_IOERR_TRUNCATE => "truncate",
        ffi::SQLITE_IOERR_FSTAT => "fstat",
        ffi::SQLITE_IOERR_ACCESS => "access (stat)",
        ffi::SQLITE_IOERR_DELETE => "unlink",
        ffi::SQLITE_IOERR_CLOSE | ffi::SQLITE_IOERR_DIR_CLOSE => "close",
        ffi::SQLITE_IOERR_LOCK | ffi::SQLITE_IOERR_RDLOCK | ffi::SQLITE_IOERR_UNLOCK | ffi::SQLITE_IOERR_CHECKRESERVEDLOCK => "lock (fcntl)",
        ffi::SQLITE_IOERR_SHMOPEN => "open of the -shm file (open, fstat or ftruncate)",
        ffi::SQLITE_IOERR_SHMSIZE => "size of the -shm file (fstat, ftruncate or write)",
        ffi::SQLITE_IOERR_SHMLOCK => "lock of the -shm file",
        ffi::SQLITE_IOERR_SHMMAP => "mmap of the -shm file",
        ffi::SQLITE_IOERR_SEEK => "seek",
        ffi::SQLITE_IOERR_MMAP => "mmap",
        ffi::SQLITE_IOERR_NOMEM => "allocation",
        ffi::SQLITE_IOERR_GETTEMPPATH => "temporary directory lookup",
        // SQLite turns a read failing with EIO (or ENXIO, ERANGE) into this, and from there often
        // into SQLITE_CORRUPT ("database disk image is malformed") below.
        ffi::SQLITE_IOERR_CORRUPTFS => "read (it failed with EIO, which SQLite reports as a damaged filesystem)",
        ffi::SQLITE_CORRUPT => "none named: SQLite also reports a read that failed with EIO this way",
        ffi::SQLITE_FULL => "a write or a file extension that found the disk full (or the database at its max_page_count)",
        ffi::SQLITE_CANTOPEN | ffi::SQLITE_CANTOPEN_ISDIR | ffi::SQLITE_CANTOPEN_FULLPATH | ffi::SQLITE_CANTOPEN_NOTEMPDIR => "open",
        ffi::SQLITE_IOERR => "an unnamed I/O call",
        _ => return None,
    })
}

/// SQLite's "database or disk is full" names no file: a user with several disks needs to know
/// which one filled, as the file stores' errors say.
pub(crate) fn naming_full_database(conn: &Connection, mut e: BackendError) -> BackendError {
    if e.kind == ErrorKind::NoSpace {
        if let Some(path) = conn.path().filter(|p| !p.is_empty()) {
            e.message = format!("{} (the database {path}, or its -wal file beside it)", e.message);
        }
    }
    e
}

/// Attaches what was being done to a SQLite error and maps its kind.
pub(crate) trait SqlContext<T> {
    /// The result with a `BackendError` that says what was being done.
    fn context(self, doing: &str) -> BResult<T>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn context(self, doing: &str) -> BResult<T> {
        self.map_err(|e| sql_error(e, doing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(text: &str) -> Options {
        Options::new("t", "", toml::from_str(text).unwrap())
    }

    #[test]
    fn bad_options_name_the_option() {
        for (text, name) in [
            ("page_size = 1000", "page_size"),
            ("cache_size = \"1500B\"", "cache_size"),
            ("busy_timeout = \"1500us\"", "busy_timeout"),
            ("journal_mode = \"memory\"", "journal_mode"),
            ("synchronous = \"fast\"", "synchronous"),
        ] {
            let err = Tuning::from_options(&options(text)).unwrap_err();
            assert!(err.contains(&format!("\"{name}\"")), "{text}: {err}");
        }
    }

    #[test]
    fn settings_take_effect_and_busy_maps_to_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join(DATABASE_FILE);
        let tuning = Tuning::from_options(&options("page_size = 8192\nsynchronous = \"full\"\nbusy_timeout = \"10ms\"")).unwrap();
        tuning.prepare_database(&db, "CREATE TABLE IF NOT EXISTS t(x)").unwrap();
        tuning.prepare_database(&db, "CREATE TABLE IF NOT EXISTS t(x)").unwrap();
        let mut first = tuning.open(&db).unwrap();
        let mut second = tuning.open(&db).unwrap();
        let sync: i64 = first.pragma_query_value(None, "synchronous", |r| r.get(0)).unwrap();
        assert_eq!(sync, 2, "full");
        let mut wait_ns = 0;
        let _held = begin_write(&mut first, &mut wait_ns).unwrap();
        let err = begin_write(&mut second, &mut wait_ns).expect_err("second writer must wait and fail");
        assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
        assert!(err.message.contains("database is locked (another connection held the lock for longer than this one's busy_timeout)"), "{err}");
        assert!(wait_ns >= 10_000_000, "waited {wait_ns} ns");
        let other = Tuning::from_options(&options("page_size = 4096")).unwrap();
        assert!(other.prepare_database(&db, "SELECT 1").unwrap_err().message.contains("page_size 8192"));
    }
}
