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
//! the one durability choice is `fsync`. CFB has no rename, so a put never writes over the current
//! value: each key has two stream slots, a put fills the one not holding the value and commits it
//! by its state bits (see `slot_paths`); a failed put leaves the old value as it was. CFB has no
//! journal either: a power loss in the middle of a put can leave the file damaged. That is a
//! property of the format, stated in `docs/backends/cfb.md`. This module must never truncate or
//! write into the stream that holds a key's current value.

use super::options::{OptionDoc, Options};
use super::{copy_exact, BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use cfb::CompoundFile;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "cfb",
    summary: "one stream per object in a single Compound File Binary (structured storage) file; one writer at a time",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: None,
};

const OPTIONS: &[OptionDoc] = crate::options_list!(super::namespace::DataPath::DOCS, CfbOptions::DOCS);

crate::backend_options! {
    /// cfb's own options.
    pub struct CfbOptions {
        fsync: bool = false => "fdatasync the compound file after each put and delete",
    }
}

/// Hex digits of a key per storage or stream name (names carry a one-character prefix: 31 total).
const HEX_PER_NAME: usize = 30;
/// Version string of the cfb crate we build against (from Cargo.toml).
const CFB_CRATE_VERSION: &str = "0.16";

/// The shared handle: the crate's `CompoundFile` plus a second descriptor used for fdatasync.
struct Handle {
    file: CompoundFile<File>,
    sync_file: File,
    /// The compound file's path, named in a failed write ("no space left" says where).
    path: PathBuf,
}

type Shared = Arc<Mutex<Option<Handle>>>;

/// The cfb backend for one case.
pub struct CfbBackend {
    /// Where the files live (the run\'s namespace, or the `path` option\'s per-run directory).
    data: super::namespace::DataNamespace,
    dir: PathBuf,
    fsync: bool,
    options: Options,
    shared: Shared,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("cfb", OPTIONS)?;
    // The one per-run namespace mechanism (`namespace::DataNamespace`): with `path`, a marked directory
    // named after the run, removed by cleanup.
    let data = super::namespace::DataNamespace::new(options, ns)?;
    Ok(Box::new(CfbBackend {
        dir: data.ns.dir.join("cfb"),
        data,
        fsync: CfbOptions::read(options)?.fsync,
        options: options.clone(),
        shared: Arc::new(Mutex::new(None)),
    }))
}

/// The stream path of `key` (its slot A): `/<fan>/+<30 hex>/…/=<≤30 hex>`. The key's UTF-8
/// bytes in lowercase hex are cut into 30-digit pieces; every piece but the last names a storage
/// (prefix `+`), the last names the stream (prefix `=`; `#` for slot B, see `slot_paths`), so a
/// stream can never collide with a storage and case-insensitive comparison cannot merge two keys.
/// `<fan>` is the low byte of the key's xxh3 in hex: 256 top-level storages keep each directory
/// tree small. The mapping is reversible.
pub fn stream_path(key: &str) -> String {
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    let fan = crate::hash::xxh3_64(key.as_bytes()) & 0xff;
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

/// The two stream paths (slot A, slot B) that can hold `key`'s value: `stream_path(key)` and the
/// same with the stream's prefix `=` replaced by `#`. A slot's state bits say what it holds: 0 =
/// an uncommitted (interrupted or failed) put, ignored; otherwise the put's generation (1, 2, …
/// per key). The committed slot with the newer generation is the value; see `docs/backends/cfb.md`.
pub fn slot_paths(key: &str) -> [String; 2] {
    let a = stream_path(key);
    let cut = a.rfind("/=").expect("stream_path ends in a '=' stream name");
    let b = format!("{}/#{}", &a[..cut], &a[cut + 2..]);
    [a, b]
}

/// The key of a stream path made by `stream_path` or `slot_paths`, if it is one.
pub fn key_of(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').skip(2).collect();
    let (stream, storages) = parts.split_last()?;
    let mut hex = String::new();
    for storage in storages {
        hex.push_str(storage.strip_prefix('+')?);
    }
    hex.push_str(stream.strip_prefix('=').or_else(|| stream.strip_prefix('#'))?);
    let bytes: Option<Vec<u8>> = (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

/// What one slot's directory entry says: the put generation (state bits; 0 = uncommitted) and
/// the stream's length in bytes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    generation: u32,
    len_bytes: u64,
}

/// Both slots of a key, as found in the directory (`None`: no such stream).
fn read_slots(file: &CompoundFile<File>, paths: &[String; 2]) -> BResult<[Option<Slot>; 2]> {
    let read = |path: &String| match file.entry(path) {
        Ok(entry) if entry.is_stream() => Ok(Some(Slot { generation: entry.state_bits(), len_bytes: entry.len() })),
        Ok(_) => Err(BackendError::new(ErrorKind::Corrupt, format!("{path} is a storage where stowbench keeps a stream"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    };
    Ok([read(&paths[0])?, read(&paths[1])?])
}

/// Which slot holds the current value: the committed one, or of two committed (a crash between
/// a put's commit and its removal of the old slot) the newer.
fn current_slot(slots: &[Option<Slot>; 2]) -> Option<usize> {
    let committed = |i: usize| slots[i].filter(|slot| slot.generation != 0);
    match (committed(0), committed(1)) {
        (Some(a), Some(b)) => Some(if is_newer(b.generation, a.generation) { 1 } else { 0 }),
        (Some(_), None) => Some(0),
        (None, Some(_)) => Some(1),
        (None, None) => None,
    }
}

/// The generation after `previous`: +1, wrapping from `u32::MAX` to 1 (0 means uncommitted).
fn next_generation(previous: u32) -> u32 {
    previous.checked_add(1).unwrap_or(1)
}

/// Whether generation `a` is newer than `b`. Serial-number arithmetic (RFC 1982) rather than
/// `a > b`, so the order survives the wrap after 2^32 - 1 puts to one key; the two slots' numbers
/// are never more than one apart.
fn is_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
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
        *guard = Some(self.open_handle()?);
        Ok(())
    }

    fn open_handle(&self) -> BResult<Handle> {
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
        Ok(Handle { file, sync_file, path })
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
        Capabilities { concurrent_writers: false, concurrent_readers: false, ..Capabilities::default() }
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
                "fdatasync of the compound file after each put and delete; a put commits a second stream slot, so a failed put keeps the old value; no journal: a power loss mid-put can damage the file".into()
            } else {
                "none: sectors reach the page cache as written; a put commits a second stream slot, so a failed put keeps the old value; no journal: a power loss mid-put can damage the file".into()
            },
            data_paths: vec![self.dir.clone()],
        }
    }

    fn prepare(&self) -> BResult<()> {
        self.ensure_open()
    }

    /// The crate reads the directory and allocation tables once, at open: a stream another
    /// process shortened would still be read at its old length. Every write of ours is already
    /// in the file (the crate writes through), so closing and opening again loses nothing.
    fn reread_storage(&self) -> BResult<()> {
        let mut guard = lock(&self.shared)?;
        if let Some(mut old) = guard.take() {
            old.file.flush()?;
            *guard = Some(self.open_handle()?);
        }
        Ok(())
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
        super::fs::remove_dir_if_present(&self.dir)?;
        self.data.release()
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
        let shared = &self.shared;
        let guard = super::waiting_for_lock(&mut self.wait_ns, || lock(shared))?;
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

impl Session for CfbSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let paths = slot_paths(key);
        let fsync = self.fsync;
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        handle.file.create_storage_all(parent_of(&paths[0]))?;
        let slots = read_slots(&handle.file, &paths)?;
        let current = current_slot(&slots);
        let target = if current == Some(0) { 1 } else { 0 };
        // The target never holds the current value: at most an interrupted put's leftover or,
        // after a crash between commit and cleanup, the older of two committed values.
        if slots[target].is_some() {
            handle.file.remove_stream(&paths[target])?;
        }
        let mut stream = handle.file.create_new_stream(&paths[target])?; // state bits 0: uncommitted
        let copied = copy_exact(body, &mut stream, len).and_then(|()| Ok(stream.flush()?));
        drop(stream);
        if let Err(e) = copied {
            let cleanup = match handle.file.remove_stream(&paths[target]) {
                Ok(()) => String::new(),
                Err(r) => format!("; its partial stream could not be removed ({r}) and stays, marked uncommitted and ignored"),
            };
            let at = handle.path.display();
            return Err(BackendError::new(e.kind, format!("{at}, stream {}: {}; the old value is untouched{cleanup}", paths[target], e.message)));
        }
        let generation = next_generation(current.and_then(|i| slots[i]).map_or(0, |slot| slot.generation));
        handle.file.set_state_bits(&paths[target], generation)?;
        if let Some(old) = current {
            handle.file.remove_stream(&paths[old]).map_err(|e| cfb_error(e, "the new value is committed, but removing the old one failed"))?;
        }
        Self::sync(fsync, handle)
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let paths = slot_paths(key);
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        let current = current_slot(&read_slots(&handle.file, &paths)?).ok_or_else(|| BackendError::not_found(key))?;
        let mut stream = handle.file.open_stream(&paths[current])?;
        let len = stream.len();
        copy_exact(&mut stream, sink, len)?;
        Ok(len)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let paths = slot_paths(key);
        let fsync = self.fsync;
        let mut guard = self.handle()?;
        let handle = guard.as_mut().expect("handle() checked");
        let slots = read_slots(&handle.file, &paths)?;
        let current = current_slot(&slots).ok_or_else(|| BackendError::not_found(key))?;
        // The other slot first: if this stops half-way, the value is still whole or gone.
        let other = 1 - current;
        if slots[other].is_some() {
            handle.file.remove_stream(&paths[other])?;
        }
        handle.file.remove_stream(&paths[current])?;
        Self::sync(fsync, handle)
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let paths = slot_paths(key);
        let guard = self.handle()?;
        let slots = read_slots(&guard.as_ref().expect("handle() checked").file, &paths)?;
        current_slot(&slots).and_then(|i| slots[i]).map(|slot| slot.len_bytes).ok_or_else(|| BackendError::not_found(key))
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
            let [a, b] = slot_paths(key);
            assert_eq!(a, path);
            assert_ne!(a.to_uppercase(), b.to_uppercase(), "the two slots must not compare equal");
            assert!(b.rsplit('/').next().is_some_and(|name| name.starts_with('#') && name.encode_utf16().count() <= 31), "{b}");
            assert_eq!(key_of(&b).as_deref(), Some(key), "{b}");
        }
        assert_ne!(stream_path("a").to_uppercase(), stream_path("A").to_uppercase());
        assert_eq!(key_of("/00/=61/=62"), None, "only the last name may be a stream");
    }

    #[test]
    fn the_newer_committed_slot_wins_and_uncommitted_ones_are_ignored() {
        let slot = |generation| Some(Slot { generation, len_bytes: 1 });
        assert_eq!(current_slot(&[None, None]), None);
        assert_eq!(current_slot(&[slot(0), slot(0)]), None);
        assert_eq!(current_slot(&[slot(0), slot(4)]), Some(1));
        assert_eq!(current_slot(&[slot(4), slot(0)]), Some(0));
        assert_eq!(current_slot(&[slot(4), slot(5)]), Some(1));
        assert_eq!(current_slot(&[slot(6), slot(5)]), Some(0));
        // Across the wrap: u32::MAX is followed by 1, never by 0 (uncommitted).
        assert_eq!(next_generation(u32::MAX), 1);
        assert_eq!(next_generation(0), 1);
        assert_eq!(current_slot(&[slot(u32::MAX), slot(1)]), Some(1));
        assert_eq!(current_slot(&[slot(1), slot(u32::MAX)]), Some(0));
    }
}
