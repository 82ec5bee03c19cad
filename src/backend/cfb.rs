//! `cfb`: every object is a stream in one Compound File Binary ("structured storage") file,
//! written and read through the maintained `cfb` crate.
//!
//! This re-runs E2: the authors kept ~1000 objects in one structured-storage file and found it
//! ~11× slower than one file per object. The crate allows one writer per file, so every
//! operation (reads too: they move the shared handle's sector caches) goes through one mutex;
//! the time each session waits for it is reported through `Session::wait_ns`, never hidden.
//! Keys map reversibly to stream paths (see `stream_path`), because CFB names are at most 31
//! UTF-16 units, may not contain `/ \ : !` and compare case-insensitively. The crate writes every
//! sector change through to the file as it happens (its `flush` only flushes the OS handle), so
//! the one durability choice is `fsync`. CFB has no journal: a crash in the middle of a put can
//! leave the file damaged. That is a property of the format, stated in `docs/backends/cfb.md`.

use super::options::{OptionDoc, Options};
use super::{copy_exact, BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use cfb::CompoundFile;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "cfb",
    summary: "one stream per object in a single Compound File Binary (structured storage) file; one writer at a time",
    options: OPTIONS,
    construct,
    is_test_tool: false,
};

const OPTIONS: &[OptionDoc] = &[
    OptionDoc { name: "path", default: "<run directory>", help: "directory under which the run's namespace directory is created" },
    OptionDoc { name: "fsync", default: "false", help: "fdatasync the compound file after each put and delete" },
];

/// Hex digits of a key per storage or stream name (names carry a one-character prefix: 31 total).
const HEX_PER_NAME: usize = 30;
/// Version string of the cfb crate we build against (from Cargo.toml).
const CFB_CRATE_VERSION: &str = "0.16";

/// The shared handle: the crate's `CompoundFile` plus a second descriptor used for fdatasync.
struct Handle {
    file: CompoundFile<File>,
    sync_file: File,
}

type Shared = Arc<Mutex<Option<Handle>>>;

/// The cfb backend for one case.
pub struct CfbBackend {
    dir: PathBuf,
    fsync: bool,
    options: Options,
    shared: Shared,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("cfb", OPTIONS)?;
    let ns = match options.opt_string("path")? {
        Some(path) => Namespace::create(&PathBuf::from(path).join(format!("stowbench-{}", ns.name)), &ns.run_id, &ns.name)?,
        None => ns.clone(),
    };
    Ok(Box::new(CfbBackend {
        dir: ns.dir.join("cfb"),
        fsync: options.bool("fsync", false)?,
        options: options.clone(),
        shared: Arc::new(Mutex::new(None)),
    }))
}

/// The stream path of `key`: `/<fan>/+<30 hex>/…/=<≤30 hex>`. The key's UTF-8 bytes in lowercase
/// hex are cut into 30-digit pieces; every piece but the last names a storage (prefix `+`), the
/// last names the stream (prefix `=`), so a stream can never collide with a storage and
/// case-insensitive comparison cannot merge two keys. `<fan>` is the low byte of the key's xxh3
/// in hex: 256 top-level storages keep each directory tree small. The mapping is reversible.
pub fn stream_path(key: &str) -> String {
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    let fan = xxhash_rust::xxh3::xxh3_64(key.as_bytes()) & 0xff;
    let mut path = format!("/{fan:02x}");
    let mut rest = hex.as_str();
    while rest.len() > HEX_PER_NAME {
        path.push_str("/+");
        path.push_str(&rest[..HEX_PER_NAME]);
        rest = &rest[HEX_PER_NAME..];
    }
    path.push_str("/=");
    path.push_str(rest);
    path
}

/// The key of a stream path made by `stream_path`, if it is one.
pub fn key_of(path: &str) -> Option<String> {
    let mut hex = String::new();
    for part in path.split('/').skip(2) {
        hex.push_str(part.strip_prefix('+').or_else(|| part.strip_prefix('='))?);
    }
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

fn parent_of(path: &str) -> &str {
    &path[..path.rfind('/').expect("stream paths contain '/'")]
}

impl CfbBackend {
    /// Path of the compound file.
    fn file_path(&self) -> PathBuf {
        self.dir.join("store.cfb")
    }

    /// Opens the compound file (creating it if missing) unless it is open already.
    fn ensure_open(&self) -> BResult<()> {
        let mut guard = lock(&self.shared)?;
        if guard.is_some() {
            return Ok(());
        }
        let path = self.file_path();
        let file = if path.exists() {
            cfb::open_rw(&path).map_err(|e| cfb_error(e, &format!("cannot open {}", path.display())))?
        } else {
            fs::create_dir_all(&self.dir)?;
            let mut created = cfb::create(&path).map_err(|e| cfb_error(e, &format!("cannot create {}", path.display())))?;
            created.flush()?;
            created
        };
        let sync_file = fs::OpenOptions::new().read(true).write(true).open(&path)?;
        *guard = Some(Handle { file, sync_file });
        Ok(())
    }
}

fn lock(shared: &Shared) -> BResult<MutexGuard<'_, Option<Handle>>> {
    shared.lock().map_err(|_| BackendError::new(ErrorKind::Other, "cfb handle unusable: an earlier operation panicked while holding it"))
}

fn cfb_error(e: std::io::Error, context: &str) -> BackendError {
    let mut err = BackendError::from(e);
    err.message = format!("{context}: {}", err.message);
    err
}

impl Backend for CfbBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities { concurrent_writers: false, ..Capabilities::default() }
    }

    fn describe(&self) -> BackendInfo {
        let mut options = self.options.redacted_json();
        if let Some(map) = options.as_object_mut() {
            map.insert("fsync".into(), self.fsync.into());
        }
        BackendInfo {
            backend: "cfb".into(),
            versions: [("cfb_crate".to_string(), CFB_CRATE_VERSION.to_string()), ("cfb_format".to_string(), "4 (4096-byte sectors)".to_string())]
                .into_iter()
                .collect(),
            options,
            durability: if self.fsync {
                "fdatasync of the compound file after each put and delete; no journal: a crash mid-put can damage the file".into()
            } else {
                "none: sectors reach the page cache as written; no journal: a crash mid-put can damage the file".into()
            },
            data_paths: vec![self.dir.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        self.ensure_open()
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        self.ensure_open()?;
        Ok(Box::new(CfbSession { shared: self.shared.clone(), fsync: self.fsync, wait_ns: 0 }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        super::fs::disk_usage_of(std::slice::from_ref(&self.dir))
    }

    fn cleanup(&self) -> BResult<()> {
        lock(&self.shared)?.take();
        match fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

struct CfbSession {
    shared: Shared,
    fsync: bool,
    wait_ns: u64,
}

impl CfbSession {
    /// Takes the single-writer lock, adding the time spent waiting to `wait_ns`.
    fn handle(&mut self) -> BResult<MutexGuard<'_, Option<Handle>>> {
        let started = Instant::now();
        let guard = lock(&self.shared)?;
        self.wait_ns += started.elapsed().as_nanos() as u64;
        if guard.is_none() {
            return Err(BackendError::new(ErrorKind::Other, "cfb backend was cleaned up; open a new session"));
        }
        Ok(guard)
    }

    fn sync(fsync: bool, handle: &mut Handle) -> BResult<()> {
        handle.file.flush()?;
        if fsync {
            handle.sync_file.sync_data()?;
        }
        Ok(())
    }
}

fn not_found_or(e: std::io::Error, key: &str) -> BackendError {
    if e.kind() == std::io::ErrorKind::NotFound {
        BackendError::not_found(key)
    } else {
        e.into()
    }
}

impl Session for CfbSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let path = stream_path(key);
        let fsync = self.fsync;
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        handle.file.create_storage_all(parent_of(&path))?;
        let mut stream = handle.file.create_stream(&path)?;
        let copied = copy_exact(body, &mut stream, len).and_then(|()| Ok(stream.flush()?));
        drop(stream);
        if let Err(e) = copied {
            // The stream was rewritten in place (CFB has no rename): remove it rather than leave
            // a half-written value visible.
            let _ = handle.file.remove_stream(&path);
            return Err(BackendError::new(e.kind, format!("{}; the key was removed (its old value was already truncated)", e.message)));
        }
        Self::sync(fsync, handle)
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let path = stream_path(key);
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        let mut stream = handle.file.open_stream(&path).map_err(|e| not_found_or(e, key))?;
        let len = stream.len();
        copy_exact(&mut stream, sink, len)?;
        Ok(len)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let path = stream_path(key);
        let fsync = self.fsync;
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        handle.file.remove_stream(&path).map_err(|e| not_found_or(e, key))?;
        Self::sync(fsync, handle)
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let path = stream_path(key);
        let guard = self.handle()?;
        let entry = guard.as_ref().expect("handle() checked").file.entry(&path).map_err(|e| not_found_or(e, key))?;
        Ok(entry.len())
    }

    fn wait_ns(&self) -> u64 {
        self.wait_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_paths_are_valid_reversible_and_distinct() {
        let long = "k".repeat(100);
        for key in ["", "a", "A", "a/b", "../x", "ключ с пробелом", "with space", long.as_str(), "x:y!z\\"] {
            let path = stream_path(key);
            for name in path.split('/').skip(1) {
                assert!(name.encode_utf16().count() <= 31 && !name.contains([':', '!', '\\']), "{key:?} -> {path}");
            }
            assert_eq!(key_of(&path).as_deref(), Some(key), "{path}");
        }
        assert_ne!(stream_path("a").to_uppercase(), stream_path("A").to_uppercase());
    }
}
