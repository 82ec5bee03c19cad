//! The two plug-in traits every storage backend implements, their error kinds, and the registry.
//!
//! A `Backend` is shared by all workers of one case; a `Session` belongs to one worker thread and
//! owns its connection or file handles. Backends never time, log or retry: the runner does all
//! three, so every backend is measured the same way. Bodies stream in both directions through
//! `Read`/`Write`, so no backend ever needs a whole object in memory.

#[cfg(feature = "gridfs")]
pub mod abandon;
pub mod catalog;
pub mod cfb;
pub mod direct;
pub mod fs;
#[cfg(feature = "gridfs")]
pub mod gridfs;
pub mod io_buffer;
#[cfg(feature = "mariadb")]
pub mod mariadb;
pub mod namespace;
pub mod null;
pub mod options;
pub mod pack;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod registry;
pub use registry::{find, registry, BackendKind, Constructor};
pub mod record;
pub mod restart;
pub(crate) mod row_file;
#[cfg(feature = "s3")]
pub mod s3;
pub mod server;
pub mod sim;
pub mod sockets;
pub mod sqlite;
pub mod sqlite_file;
pub mod zip;

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;

pub use namespace::Namespace;

/// What went wrong in one backend operation; the runner counts errors by this kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The key does not exist.
    NotFound,
    /// The object is larger than the backend or its configuration allows.
    TooLarge,
    /// The operation or a lock wait timed out.
    Timeout,
    /// A concurrent writer got in the way (SQLITE_BUSY, serialization failure, ...).
    Conflict,
    /// The connection to a server failed or was lost.
    Connection,
    /// A local I/O error (permission, a failing device, ...).
    Io,
    /// The filesystem (or quota) holding the data is full.
    NoSpace,
    /// Data read back was not what was written (detected by the backend or by verification).
    Corrupt,
    /// The backend does not support this operation.
    Unsupported,
    /// Anything else; the message says what.
    Other,
}

impl ErrorKind {
    /// The snake_case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Connection => "connection",
            ErrorKind::Io => "io",
            ErrorKind::NoSpace => "no_space",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Other => "other",
        }
    }
}

/// An error from a backend: a kind for counting and a message for people (never a secret).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct BackendError {
    /// What kind of failure this is.
    pub kind: ErrorKind,
    /// What happened, for people; must not contain secrets.
    pub message: String,
}

impl BackendError {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        BackendError { kind, message: message.into() }
    }

    /// The key does not exist.
    pub fn not_found(key: &str) -> Self {
        BackendError::new(ErrorKind::NotFound, format!("key \"{key}\" not found"))
    }
}

impl From<std::io::Error> for BackendError {
    fn from(e: std::io::Error) -> Self {
        BackendError::new(io_kind(e.kind()), e.to_string())
    }
}

/// The kind a local I/O error counts as.
pub fn io_kind(kind: std::io::ErrorKind) -> ErrorKind {
    {
        match kind {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => ErrorKind::Corrupt,
            std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => ErrorKind::Connection,
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => ErrorKind::NoSpace,
            _ => ErrorKind::Io,
        }
    }
}

/// Shorthand for backend results.
pub type BResult<T> = Result<T, BackendError>;

/// What a backend claims it can do: a contract on both sides. The runner refuses, before any
/// data is written, a job that asks for something undeclared (`runner::contract`); a session asked
/// for it anyway answers `ErrorKind::Unsupported`; the conformance suite runs each behaviour where
/// it is declared and checks the refusal where it is not.
#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    /// Largest object it accepts, in bytes; larger sizes are refused before any data is written.
    pub max_object_bytes: Option<u64>,
    /// Why that limit exists and what to use instead, quoted in the refusal.
    pub max_object_hint: Option<String>,
    /// Whether several sessions may write at the same time (false: writes are serialized inside the
    /// backend and the wait is reported through `Session::wait_ns`).
    pub concurrent_writers: bool,
    /// Whether several sessions may read at the same time (false: gets queue on the same lock
    /// as writes, with the wait in `Session::wait_ns`: cfb, whose reads move shared state).
    pub concurrent_readers: bool,
    /// Whether `delete` is supported (false: a delete is `Unsupported`).
    pub delete: bool,
    /// Whether a put on an existing key replaces it (false: such a put is `Unsupported` and the
    /// stored value stays).
    pub overwrite: bool,
    /// Whether an operation can be abandoned when it overruns the workload's `op_timeout`: every
    /// session has a connection to cut (`Session::cut_handle`). Local calls cannot be abandoned.
    pub operation_deadline: bool,
    /// Whether a replaced or deleted value's bytes stay in the store until it is compacted (an
    /// append-only file: pack, zip): the store then grows with every put, not with the keys, and
    /// the space check counts puts.
    pub keeps_replaced_values: bool,
}

impl Default for Capabilities {
    /// A local store: any object size, concurrent writers, delete and overwrite, no operation
    /// deadline (server backends declare `operation_deadline`).
    fn default() -> Self {
        Capabilities {
            max_object_bytes: None,
            max_object_hint: None,
            concurrent_writers: true,
            concurrent_readers: true,
            delete: true,
            overwrite: true,
            operation_deadline: false,
            keeps_replaced_values: false,
        }
    }
}

/// How a backend describes itself in the report: versions, effective options, durability.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BackendInfo {
    /// Registry name, e.g. "fs".
    pub backend: String,
    /// Versions of the library, server and format involved, e.g. {"sqlite": "3.50.1"}.
    pub versions: BTreeMap<String, String>,
    /// Every option with the value in effect (defaults filled in), secrets redacted.
    pub options: serde_json::Value,
    /// What a successful put guarantees, in words, e.g. "fsync file and directory".
    pub durability: String,
    /// Local paths holding this backend's data (used for filesystem facts and disk usage).
    pub data_paths: Vec<PathBuf>,
}

/// Space a backend occupies after a load.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DiskUsage {
    /// Bytes actually allocated on disk (st_blocks × 512) under the backend's local data paths.
    pub allocated_bytes: u64,
    /// Sum of file lengths under the backend's local data paths.
    pub apparent_bytes: u64,
    /// Number of files under the backend's local data paths.
    pub files: u64,
    /// Bytes as the server accounts them (relation sizes, bucket bytes), where there is a server.
    pub server_reported_bytes: Option<u64>,
    /// No local data path could be measured (a server whose data directory is not on this
    /// machine, or not found): `allocated_bytes` is then unknown, not zero.
    pub allocated_unknown: bool,
}

impl DiskUsage {
    /// Adds the files of another of the backend's local data paths (a row + file backend's content
    /// directory, our part of a shared catalog): allocated and apparent bytes and the file count.
    pub fn add_files(&mut self, more: &DiskUsage) {
        self.allocated_bytes += more.allocated_bytes;
        self.apparent_bytes += more.apparent_bytes;
        self.files += more.files;
    }
}

/// One storage backend for one case; shared by all worker threads.
pub trait Backend: Send + Sync {
    /// Capabilities and limits.
    fn capabilities(&self) -> Capabilities;
    /// Versions, effective options, durability; secrets redacted.
    fn describe(&self) -> BackendInfo;
    /// Creates the backend's structures inside its namespace; calling it twice is harmless.
    fn prepare(&self) -> BResult<()>;
    /// Opens one session for worker `worker` (its own connection or handles).
    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>>;
    /// Space occupied now.
    fn disk_usage(&self) -> BResult<DiskUsage>;
    /// Removes everything this backend created in its namespace, and nothing else.
    fn cleanup(&self) -> BResult<()>;
    /// What `cleanup` would remove on a server, one line per table, tablespace, collection or
    /// group of objects (`stowbench cleanup --dry-run`); empty for backends without a server.
    /// Reads only: it never changes the server.
    fn server_objects(&self) -> BResult<Vec<String>> {
        Ok(Vec::new())
    }
    /// Tells the backend how many keys (`obj-%010d`, see `runner::hook::KEY_FORMAT`) the case
    /// uses, for servers that can only find some leftovers key by key (MinIO lists incomplete
    /// multipart uploads only per object name). Ignored by every other backend.
    fn note_keys(&self, _keys: u64) {}
    /// Tells the backend that other processes put in its namespace too (every rank of a
    /// multi-host run with shared keys), so what their puts left is not among what this process
    /// saw, and cleanup must look key by key where it otherwise looks only at its own leftovers.
    fn note_other_writers(&self) {}
    /// Server process ids whose process trees should be sampled (empty for embedded backends).
    fn server_pids(&self) -> Vec<u32> {
        Vec::new()
    }
    /// The server behind this backend when scripts/services.sh started it, so that a cold read
    /// phase may restart it to empty its own cache (see `restart`).
    fn script_service(&self) -> Option<&restart::ScriptService> {
        None
    }
    /// Hands the case's payload generator to a backend that fabricates reads instead of storing
    /// them (`null`); every other backend ignores it.
    fn attach_payload(&self, _payload: &crate::workload::payload::PayloadSpec) {}
    /// Opens worker `worker`'s connection to the file-server catalog (upload and download phases,
    /// see `catalog`). By default it is a SQLite file in `beside` (the case's own directory);
    /// backends that are databases keep it in their own database instead.
    fn open_catalog(&self, _worker: usize, beside: &std::path::Path) -> BResult<Box<dyn catalog::Catalog>> {
        Ok(Box::new(catalog::sqlite::SqliteCatalog::open(&beside.join(catalog::sqlite::BESIDE_FILE), "")?))
    }
    /// A phase's `before` command has run and may have changed the stored data behind the
    /// backend's back (the corruption tests truncate a stream that way): a backend that keeps a
    /// view of its storage in memory — cfb's directory and allocation tables — reads it again, so
    /// the phase sees what is on disk rather than what the backend remembers.
    fn reread_storage(&self) -> BResult<()> {
        Ok(())
    }
    /// A cold phase is about to start and every session is closed: a backend that keeps stored
    /// data in this process beyond its sessions — pack's mapped data files, whose pages the
    /// kernel's cache drop cannot evict while they are mapped — lets it go, so that the phase
    /// reads from the device.
    fn release_cached_data(&self) -> BResult<()> {
        Ok(())
    }
    /// Brings the store to rest before a phase, untimed, once every session has settled
    /// (`Session::settle`), so that the phase does not pay for work the previous one left
    /// deferred: SQLite checkpoints its WAL into the database file, as the last connection's close
    /// does. Nothing by default.
    fn settle(&self) -> BResult<()> {
        Ok(())
    }
    /// A virtual clock, for the `sim` backend only; real backends use the monotonic clock.
    fn clock(&self) -> Option<std::sync::Arc<dyn crate::clock::Clock>> {
        None
    }
}

/// One worker's connection to a backend. No timing, logging or retrying inside.
pub trait Session: Send {
    /// Stores exactly `len` bytes read from `body` under `key`, replacing any previous value.
    /// The value must not become visible half-written.
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()>;
    /// Streams the value of `key` into `sink`; returns the number of bytes written.
    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64>;
    /// Removes `key`; a missing key is a `NotFound` error.
    fn delete(&mut self, key: &str) -> BResult<()>;
    /// Returns the size in bytes of `key`'s value; a missing key is `NotFound`.
    fn head(&mut self, key: &str) -> BResult<u64>;
    /// Total nanoseconds this session has waited for an exclusive writer lock inside the backend
    /// (single-writer formats); reported, never hidden in latency without a trace.
    fn wait_ns(&self) -> u64 {
        0
    }
    /// A handle that cuts this session's connections from another thread, so that a call blocked
    /// on a silent server returns with an error (the runner's `op_timeout` watchdog). None when
    /// the backend has no connection to cut (local files: a blocked system call cannot be undone).
    fn cut_handle(&self) -> Option<sockets::CutHandle> {
        None
    }
    /// Lets go of what the session holds between operations that would keep `Backend::settle`
    /// from finishing (a read snapshot SQLite's checkpoint would have to wait for). Nothing by
    /// default.
    fn settle(&mut self) {}
}

/// Streams the `len` bytes at `offset` of a container file into `sink` through `buf`, showing each
/// chunk to `seen` first (a checksum); returns how many bytes it streamed. A file that ends early
/// (cut short, a torn tail) still sends what it holds, so a reader checking the bytes sees exactly
/// how much survived; the caller, seeing fewer than `len`, says where its entry stops.
pub fn stream_range(file: &std::fs::File, offset: u64, len: u64, buf: &mut [u8], sink: &mut dyn Write, mut seen: impl FnMut(&[u8])) -> std::io::Result<u64> {
    let mut sent = 0;
    while sent < len {
        let n = buf.len().min((len - sent) as usize);
        let got = read_up_to(file, &mut buf[..n], offset + sent)?;
        seen(&buf[..got]);
        sink.write_all(&buf[..got])?;
        sent += got as u64;
        if got < n {
            break;
        }
    }
    Ok(sent)
}

/// Reads into `buf` at `at` until it is full or the file ends; returns the bytes read.
fn read_up_to(file: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], at + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Runs `take` (which takes a single-writer lock: a mutex, SQLite's write lock) and adds the time
/// it waited to `wait_ns`, the lock wait a session reports (`Session::wait_ns`).
pub fn waiting_for_lock<T>(wait_ns: &mut u64, take: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let taken = take();
    *wait_ns += started.elapsed().as_nanos() as u64;
    taken
}

/// Copies `len` bytes from `body` to `sink` through a bounded buffer; errors if `body` ends early.
/// For a `sink` or `body` that is a file from its start (see `copy_exact_at`).
pub fn copy_exact(body: &mut dyn Read, sink: &mut dyn Write, len: u64) -> BResult<()> {
    copy_exact_at(body, sink, len, 0)
}

/// `copy_exact` for a file read or written from `file_offset` on: the buffer agrees with that
/// offset modulo 4 KiB, where the kernel copies fastest (`io_buffer`).
pub fn copy_exact_at(body: &mut dyn Read, sink: &mut dyn Write, len: u64, file_offset: u64) -> BResult<()> {
    io_buffer::with_io_buffer(|buf| {
        let buf = buf.for_offset(file_offset);
        let mut left = len;
        while left > 0 {
            let want = buf.len().min(left as usize);
            let n = body.read(&mut buf[..want])?;
            if n == 0 {
                return Err(BackendError::new(ErrorKind::Io, format!("body ended {left} bytes early")));
            }
            sink.write_all(&buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    })
}

/// Runs `work` with the calling thread's buffer of `COPY_BUFFER_BYTES`, starting on a 4 KiB
/// boundary: a file read or written from its start in pieces of this size then lines up with the
/// page cache, where the kernel copies fastest (`io_buffer`).
pub fn with_copy_buffer<T>(work: impl FnOnce(&mut [u8]) -> T) -> T {
    io_buffer::with_io_buffer(|buf| work(buf.aligned()))
}

/// Size of the bounded buffer streaming copies use, in bytes.
pub const COPY_BUFFER_BYTES: usize = 256 * 1024;
