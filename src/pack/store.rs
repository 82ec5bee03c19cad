//! An open pack: its stripe files, the in-memory index, and the append, read and delete paths.
//!
//! Writers never share a file: each writer leases a stripe (one append-only data file) for as
//! long as it lives, so appends need no lock and no space reservation, and a crash can only tear
//! the tail of a stripe. A record becomes visible (enters the index) only after all its bytes are
//! written, and after `fdatasync` when `fsync` is on. The store holds an exclusive `flock` on the
//! pack directory's LOCK file, so two processes (or two backends) never append to the same pack.
//! It must never return bytes whose hash it has not checked, and never delete files it did not name.

use super::record::{FileHeader, RecordHeader, RecordKind, FILE_HEADER_BYTES, MAX_KEY_BYTES, RECORD_HEADER_BYTES};
use super::scan::{scan, FoundRecord};
use crate::backend::{copy_exact, BResult, BackendError, ErrorKind, COPY_BUFFER_BYTES};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use xxhash_rust::xxh3::Xxh3;

/// Name of the lock file inside a pack directory.
pub const LOCK_FILE: &str = "LOCK";

/// One append-only data file, written by at most one writer at a time.
pub struct Stripe {
    /// Stripe number (in the file name and header).
    pub id: u32,
    /// The data file, opened read-write.
    pub file: File,
    /// The file's salt (from its header).
    pub salt: u64,
    /// Where the file is.
    pub path: PathBuf,
    /// Offset where the next record goes, in bytes; only the leaseholder moves it.
    tail_bytes: AtomicU64,
}

impl Stripe {
    /// Current length of the valid part of the file, in bytes.
    pub fn tail_bytes(&self) -> u64 {
        self.tail_bytes.load(Ordering::Acquire)
    }
}

/// Where a live value lives.
#[derive(Debug, Clone, Copy)]
pub struct Location {
    /// Index of the stripe in `PackStore::stripes`.
    pub stripe_slot: usize,
    /// The record's header (offset, lengths, body hash).
    pub header: RecordHeader,
}

/// The newest record seen for one key; `live` is `None` for a tombstone.
#[derive(Debug, Clone, Copy)]
struct IndexEntry {
    seq: u64,
    live: Option<Location>,
}

/// What opening a pack found and repaired.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// Data files of the current generation.
    pub files: usize,
    /// Valid records found.
    pub records: u64,
    /// Bytes cut off torn tails (incomplete or unverifiable records at the end of a file).
    pub cut_tail_bytes: u64,
    /// Bytes in the middle of files that hold no valid record (left in place, never returned).
    pub damaged_bytes: u64,
    /// Files of older generations removed (left behind by a compaction that was interrupted
    /// after its new file was in place).
    pub stale_files_removed: usize,
}

/// An open pack directory.
pub struct PackStore {
    dir: PathBuf,
    generation: u64,
    fsync: bool,
    _lock: File,
    stripes: RwLock<Vec<Arc<Stripe>>>,
    free_slots: Mutex<Vec<usize>>,
    index: RwLock<HashMap<String, IndexEntry>>,
    next_seq: AtomicU64,
    recovery: Recovery,
}

/// Parses `g{generation}-s{stripe}.pack`.
pub fn parse_data_file_name(name: &str) -> Option<(u64, u32)> {
    let rest = name.strip_prefix('g')?.strip_suffix(".pack")?;
    let (generation, stripe) = rest.split_once("-s")?;
    Some((generation.parse().ok()?, stripe.parse().ok()?))
}

/// The file name of stripe `stripe` of generation `generation`.
pub fn data_file_name(generation: u64, stripe: u32) -> String {
    format!("g{generation:06}-s{stripe:04}.pack")
}

impl PackStore {
    /// Opens (creating if needed) the pack in `dir`: locks it, recovers every data file, builds
    /// the index. `fsync`: fdatasync each record before it becomes visible.
    pub fn open(dir: &Path, fsync: bool) -> BResult<Arc<PackStore>> {
        fs::create_dir_all(dir)?;
        let lock = lock_directory(dir)?;
        let mut recovery = Recovery::default();
        let (generation, names) = current_generation(dir, &mut recovery)?;
        let mut stripes = Vec::new();
        let mut found = Vec::new();
        for (stripe_id, path) in names {
            let (stripe, records) = open_stripe(&path, generation, stripe_id, &mut recovery)?;
            found.push(records);
            stripes.push(Arc::new(stripe));
        }
        recovery.files = stripes.len();
        let (index, max_seq) = build_index(found);
        recovery.records = index.len() as u64;
        Ok(Arc::new(PackStore {
            dir: dir.to_path_buf(),
            generation,
            fsync,
            _lock: lock,
            free_slots: Mutex::new((0..stripes.len()).rev().collect()),
            stripes: RwLock::new(stripes),
            index: RwLock::new(index),
            next_seq: AtomicU64::new(max_seq + 1),
            recovery,
        }))
    }

    /// What opening found and repaired.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The pack directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current generation (bumped by each compaction).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of live keys.
    pub fn live_keys(&self) -> usize {
        self.index.read().expect("pack index lock").values().filter(|e| e.live.is_some()).count()
    }

    /// Every live key with its location, ordered by file and offset (for sequential copying).
    pub fn live_locations(&self) -> Vec<(String, Location)> {
        let index = self.index.read().expect("pack index lock");
        let mut live: Vec<(String, Location)> =
            index.iter().filter_map(|(k, e)| e.live.map(|loc| (k.clone(), loc))).collect();
        live.sort_by_key(|(_, loc)| (loc.stripe_slot, loc.header.offset));
        live
    }

    /// The stripe in `slot`.
    pub fn stripe(&self, slot: usize) -> Arc<Stripe> {
        self.stripes.read().expect("pack stripes lock")[slot].clone()
    }

    /// Sum of stripe lengths, in bytes.
    pub fn data_bytes(&self) -> u64 {
        self.stripes.read().expect("pack stripes lock").iter().map(|s| s.tail_bytes()).sum()
    }

    /// Takes a stripe for one writer (a free one, or a new file) until the lease is dropped.
    pub fn lease(self: &Arc<Self>) -> BResult<StripeLease> {
        if let Some(slot) = self.free_slots.lock().expect("pack free list lock").pop() {
            return Ok(StripeLease { store: self.clone(), slot, stripe: self.stripe(slot), buf: Vec::new() });
        }
        let mut stripes = self.stripes.write().expect("pack stripes lock");
        let id = stripes.iter().map(|s| s.id + 1).max().unwrap_or(0);
        let stripe = Arc::new(create_stripe(&self.dir, self.generation, id)?);
        stripes.push(stripe.clone());
        Ok(StripeLease { store: self.clone(), slot: stripes.len() - 1, stripe, buf: Vec::new() })
    }

    fn location(&self, key: &str) -> BResult<Location> {
        let index = self.index.read().expect("pack index lock");
        index.get(key).and_then(|e| e.live).ok_or_else(|| BackendError::not_found(key))
    }

    /// Size in bytes of `key`'s value.
    pub fn head(&self, key: &str) -> BResult<u64> {
        Ok(self.location(key)?.header.value_len)
    }

    /// Streams `key`'s value into `sink`, checking its hash; a mismatch is a `Corrupt` error.
    pub fn get(&self, key: &str, sink: &mut dyn Write, buf: &mut Vec<u8>) -> BResult<u64> {
        let loc = self.location(key)?;
        let stripe = self.stripe(loc.stripe_slot);
        let header = loc.header;
        copy_verified(&stripe.file, &header, key, sink, buf)?;
        Ok(header.value_len)
    }

    /// Makes a written record visible unless a newer record for the key is already visible.
    fn publish(&self, key: &str, seq: u64, live: Option<Location>) {
        let mut index = self.index.write().expect("pack index lock");
        match index.get_mut(key) {
            Some(entry) if entry.seq > seq => {}
            Some(entry) => *entry = IndexEntry { seq, live },
            None => {
                index.insert(key.to_string(), IndexEntry { seq, live });
            }
        }
    }
}

/// Streams the value of the record `header` (of `key`) from `file` into `sink`, verifying the hash.
pub fn copy_verified(file: &File, header: &RecordHeader, key: &str, sink: &mut dyn Write, buf: &mut Vec<u8>) -> BResult<()> {
    buf.resize(COPY_BUFFER_BYTES, 0);
    if super::scan::stream_value(file, header, key.as_bytes(), buf, sink)? != header.body_hash {
        return Err(BackendError::new(
            ErrorKind::Corrupt,
            format!("pack record of key \"{key}\" at offset {} fails its checksum (the bytes already streamed are wrong)", header.offset),
        ));
    }
    Ok(())
}

/// A writer's exclusive hold on one stripe; returned to the free list when dropped.
pub struct StripeLease {
    store: Arc<PackStore>,
    slot: usize,
    stripe: Arc<Stripe>,
    buf: Vec<u8>,
}

impl Drop for StripeLease {
    fn drop(&mut self) {
        if let Ok(mut free) = self.store.free_slots.lock() {
            free.push(self.slot);
        }
    }
}

impl StripeLease {
    /// The store this lease writes to.
    pub fn store(&self) -> &Arc<PackStore> {
        &self.store
    }

    /// Appends a put record for `key` with `len` bytes from `body`, then publishes it.
    pub fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let seq = self.store.next_seq.fetch_add(1, Ordering::AcqRel);
        let header = self.append(RecordKind::Put, seq, key, body, len)?;
        self.store.publish(key, seq, Some(Location { stripe_slot: self.slot, header }));
        Ok(())
    }

    /// Appends a tombstone for `key`; a key that is not live is `NotFound` and writes nothing.
    pub fn delete(&mut self, key: &str) -> BResult<()> {
        self.store.location(key)?;
        let seq = self.store.next_seq.fetch_add(1, Ordering::AcqRel);
        self.append(RecordKind::Tombstone, seq, key, &mut std::io::empty(), 0)?;
        self.store.publish(key, seq, None);
        Ok(())
    }

    /// Streams `key`'s value into `sink` (reads go straight to the store).
    pub fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.store.get(key, sink, &mut self.buf)
    }

    /// Writes one complete record at the stripe's tail; on any failure cuts the file back.
    fn append(&mut self, kind: RecordKind, seq: u64, key: &str, body: &mut dyn Read, len: u64) -> BResult<RecordHeader> {
        check_key(key)?;
        let start = self.stripe.tail_bytes();
        let written = write_record(&self.stripe, start, kind, seq, key, body, len)
            .and_then(|header| if self.store.fsync { Ok(self.stripe.file.sync_data().map(|_| header)?) } else { Ok(header) });
        match written {
            Ok(header) => {
                self.stripe.tail_bytes.store(start + header.total_bytes(), Ordering::Release);
                Ok(header)
            }
            Err(e) => {
                // Nothing was published; cut the partial record so it can never be recovered.
                let _ = self.stripe.file.set_len(start);
                Err(e)
            }
        }
    }
}

fn check_key(key: &str) -> BResult<()> {
    if key.len() > MAX_KEY_BYTES as usize {
        return Err(BackendError::new(
            ErrorKind::Other,
            format!("key is {} bytes; pack keys are at most {MAX_KEY_BYTES} bytes", key.len()),
        ));
    }
    Ok(())
}

/// Writes key and value after the header slot, then the header last, so a header on disk whose
/// body is incomplete fails the body hash. Returns the header written.
pub fn write_record(
    stripe: &Stripe,
    offset: u64,
    kind: RecordKind,
    seq: u64,
    key: &str,
    body: &mut dyn Read,
    len: u64,
) -> BResult<RecordHeader> {
    let mut writer = PositionedWriter { file: &stripe.file, pos: offset + RECORD_HEADER_BYTES, hasher: Xxh3::new() };
    writer.write_all(key.as_bytes())?;
    copy_exact(body, &mut writer, len)?;
    let header = RecordHeader { kind, key_len: key.len() as u32, value_len: len, seq, offset, body_hash: writer.hasher.digest() };
    stripe.file.write_all_at(&header.encode(stripe.salt), offset)?;
    Ok(header)
}

/// A `Write` that appends with positioned writes and hashes what passes through.
struct PositionedWriter<'a> {
    file: &'a File,
    pos: u64,
    hasher: Xxh3,
}

impl Write for PositionedWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.file.write_all_at(data, self.pos)?;
        self.hasher.update(data);
        self.pos += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Takes the exclusive lock of a pack directory, or says who to close.
fn lock_directory(dir: &Path) -> BResult<File> {
    let lock = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join(LOCK_FILE))?;
    // SAFETY: flock on a file descriptor we own; it is released when `lock` is closed.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(BackendError::new(
            ErrorKind::Conflict,
            format!("pack {} is open in another stowbench process or backend; close that first", dir.display()),
        ));
    }
    Ok(lock)
}

/// Finds the newest generation, removes leftovers (temporary files, older generations) and
/// returns the current generation's data files by stripe.
fn current_generation(dir: &Path, recovery: &mut Recovery) -> BResult<(u64, Vec<(u32, PathBuf)>)> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".pack.tmp") && parse_data_file_name(name.trim_end_matches(".tmp")).is_some() {
            fs::remove_file(dir.join(&name))?;
        } else if let Some((generation, stripe)) = parse_data_file_name(&name) {
            files.push((generation, stripe, dir.join(name)));
        }
    }
    let generation = files.iter().map(|f| f.0).max().unwrap_or(1);
    let mut current = Vec::new();
    for (file_generation, stripe, path) in files {
        if file_generation < generation {
            fs::remove_file(&path)?;
            recovery.stale_files_removed += 1;
        } else {
            current.push((stripe, path));
        }
    }
    if recovery.stale_files_removed > 0 {
        sync_dir(dir)?;
    }
    current.sort();
    Ok((generation, current))
}

/// Opens one data file, checks its header, scans it and cuts a torn tail.
fn open_stripe(path: &Path, generation: u64, id: u32, recovery: &mut Recovery) -> BResult<(Stripe, Vec<FoundRecord>)> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let mut head = vec![0u8; FILE_HEADER_BYTES.min(len) as usize];
    file.read_exact_at(&mut head, 0)?;
    let damaged = |why: String| {
        BackendError::new(
            ErrorKind::Corrupt,
            format!("{}: {why}. stowbench will not guess at its contents; move the file aside to open the rest", path.display()),
        )
    };
    let header = FileHeader::decode(&head).map_err(damaged)?;
    if header.generation != generation || header.stripe != id {
        return Err(damaged(format!("header says generation {} stripe {}, the name says otherwise", header.generation, header.stripe)));
    }
    let outcome = scan(&file, header.salt, len)?;
    if outcome.good_end_bytes < len {
        file.set_len(outcome.good_end_bytes)?;
        file.sync_all()?;
        recovery.cut_tail_bytes += len - outcome.good_end_bytes;
    }
    recovery.damaged_bytes += outcome.damaged_bytes;
    let stripe =
        Stripe { id, file, salt: header.salt, path: path.to_path_buf(), tail_bytes: AtomicU64::new(outcome.good_end_bytes) };
    Ok((stripe, outcome.records))
}

/// Keeps the highest-seq record per key; tombstones are dropped once they have shadowed.
fn build_index(found: Vec<Vec<FoundRecord>>) -> (HashMap<String, IndexEntry>, u64) {
    let mut index: HashMap<String, IndexEntry> = HashMap::new();
    let mut max_seq = 0;
    for (slot, records) in found.into_iter().enumerate() {
        for record in records {
            max_seq = max_seq.max(record.header.seq);
            let live = (record.header.kind == RecordKind::Put).then_some(Location { stripe_slot: slot, header: record.header });
            let entry = IndexEntry { seq: record.header.seq, live };
            match index.get_mut(&record.key) {
                Some(existing) if existing.seq > entry.seq => {}
                Some(existing) => *existing = entry,
                None => {
                    index.insert(record.key, entry);
                }
            }
        }
    }
    index.retain(|_, e| e.live.is_some());
    (index, max_seq)
}

/// Creates a new data file with its header, durably (write to .tmp, fsync, rename, fsync dir),
/// so a stripe file that exists under its final name always has a complete header.
pub fn create_stripe(dir: &Path, generation: u64, id: u32) -> BResult<Stripe> {
    let mut stripe = create_unpublished_stripe(dir, generation, id)?;
    let path = dir.join(data_file_name(generation, id));
    fs::rename(&stripe.path, &path)?;
    sync_dir(dir)?;
    stripe.path = path;
    Ok(stripe)
}

/// Creates a data file with its header under its temporary name (`<final name>.tmp`), fsynced.
/// Until it is renamed, opening the pack ignores and removes it.
pub fn create_unpublished_stripe(dir: &Path, generation: u64, id: u32) -> BResult<Stripe> {
    let tmp = dir.join(format!("{}.tmp", data_file_name(generation, id)));
    let salt = new_salt(&tmp);
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
    file.write_all_at(&FileHeader { stripe: id, generation, salt }.encode(), 0)?;
    file.sync_all()?;
    Ok(Stripe { id, file, salt, path: tmp, tail_bytes: AtomicU64::new(FILE_HEADER_BYTES) })
}

/// fsyncs a directory so renames and removals in it survive a power cut.
pub fn sync_dir(dir: &Path) -> BResult<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// A per-file salt: not secret, only different from every other file's.
fn new_salt(path: &Path) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let text = format!("{nanos}:{}:{}:{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), path.display());
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}
