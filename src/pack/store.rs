//! An open pack: its stripe files, the in-memory index, and the append, read and delete paths.
//!
//! Writers never share a file: each writer leases a stripe (one append-only data file) for as
//! long as it lives, so appends need no lock and no space reservation, and a crash can only tear
//! the tail of a stripe. A record becomes visible (enters the index) only after all its bytes are
//! written, and after `fdatasync` when `fsync` is on. The store holds an exclusive `flock` on the
//! pack directory's LOCK file, so two processes (or two backends) never append to the same pack.
//! It must never return bytes whose hash it has not checked, and never delete files it did not name.

use super::index_file::{self, parse_index_file_name, Snapshot, StripeMark};
use super::key_index::{IndexEntry, KeyIndex};
use super::record::{FileHeader, RecordHeader, RecordKind, FILE_HEADER_BYTES, MAX_KEY_BYTES, RECORD_HEADER_BYTES};
use super::scan::{scan, FoundRecord};
use super::view::View;
use crate::backend::io_buffer::with_io_buffer;
use crate::backend::{BResult, BackendError, ErrorKind, COPY_BUFFER_BYTES};
use crate::hash::Xxh3;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

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
    /// Length of the file, in bytes: at least `tail_bytes`; beyond the tail, zeros written ahead
    /// of time by a durable writer (see `StripeLease::prepare`). Only the leaseholder moves it.
    file_bytes: AtomicU64,
    /// The file mapped for checked gets of large values, made by the first such get (`None`
    /// inside if the system refused the mapping).
    view: std::sync::OnceLock<Option<View>>,
}

impl Stripe {
    fn new(id: u32, file: File, salt: u64, path: PathBuf, tail_bytes: u64) -> Stripe {
        Stripe { id, file, salt, path, tail_bytes: AtomicU64::new(tail_bytes), file_bytes: AtomicU64::new(tail_bytes), view: std::sync::OnceLock::new() }
    }

    /// The `len` bytes at `offset`, through the file's mapping, if they can be read that way.
    fn mapped(&self, offset: u64, len: u64) -> Option<&[u8]> {
        self.view.get_or_init(|| View::map(&self.file)).as_ref()?.bytes(&self.file, offset, len)
    }

    /// Current length of the valid part of the file, in bytes.
    pub fn tail_bytes(&self) -> u64 {
        self.tail_bytes.load(Ordering::Acquire)
    }

    /// Cuts the file back to `len` bytes (a failed record, or zeros written ahead and not used).
    fn cut_to(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.file_bytes.store(len, Ordering::Release);
        Ok(())
    }
}

/// A durable writer writes zeros ahead of its tail in steps of a 16th of the file, at least this
/// much, so that most records land in blocks the file already owns.
const PREPARE_MIN_BYTES: u64 = 1 << 20;
/// ... and at most this much, which bounds the unused space a stripe carries while open.
const PREPARE_MAX_BYTES: u64 = 64 << 20;
/// Records up to this size are assembled in memory and written with one positioned write; larger
/// ones stream through the copy buffer (key and value first, header last).
const ONE_WRITE_RECORD_BYTES: u64 = crate::backend::COPY_BUFFER_BYTES as u64;
/// Larger records are written in pieces that end on multiples of this in the file (`write_record`).
const ALIGNED_WRITE_BYTES: u64 = crate::backend::COPY_BUFFER_BYTES as u64;
/// With mapped reads on, checked gets of values this large read the stripe's mapping (`view`),
/// hashing the page cache in place instead of copying it first. Was 256 KiB until session 31:
/// once the hash asked for its data a page ahead (src/hash.rs), mapped gets of 16 and 64 KiB
/// values read 1.3–1.5× as many a second as `pread` and a hash; at 4 KiB the two were alike
/// within the noise, and smaller values keep the one `pread` (docs/performance/pack-durable.md, session 31).
const MAPPED_READ_MIN_BYTES: u64 = 16 << 10;
/// Pages a mapped get read stay mapped, and count in the process's resident memory, until they
/// are taken out again. Once this many bytes have been read through the mappings since the last
/// release, the reader that crosses it takes every stripe's pages out (`View::release_pages`):
/// the client's resident memory stays within about this much whatever it reads, a 1 GiB value
/// included. One release per budget rather than one per get: each release is a system call that
/// interrupts the other cores to flush their TLBs, and releasing after every 1 MiB value read
/// 12–14 % slower (examples/mapped_read_release.rs; docs/performance/pack-durable.md, session 20). Every page
/// is faulted in again after a release: that is the price of the bound.
pub const MAPPED_RESIDENT_BUDGET_BYTES: u64 = 32 << 20;
/// A mapped get counts what it read toward the budget after each window of this many bytes, so
/// a value larger than the budget is released part-way through.
const MAPPED_WINDOW_BYTES: usize = 4 << 20;

/// Where a live value lives.
#[derive(Debug, Clone, Copy)]
pub struct Location {
    /// Index of the stripe in `PackStore::stripes`.
    pub stripe_slot: usize,
    /// The record's header (offset, lengths, body hash).
    pub header: RecordHeader,
}

/// What opening a pack found and repaired.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// Data files of the current generation.
    pub files: usize,
    /// Valid records found.
    pub records: u64,
    /// Bytes cut off torn tails (what follows a file's last record: an unfinished record, or
    /// zeros written ahead).
    pub cut_tail_bytes: u64,
    /// Bytes after a file's last record that are not all zeros, left in place by an open for
    /// compaction (`open_keeping_tails`): the old files are the last copy of whatever they held.
    pub kept_tail_bytes: u64,
    /// Bytes in the middle of files that hold no valid record (left in place, never returned):
    /// found by this open's scan, or by an earlier one as the persisted index records.
    pub damaged_bytes: u64,
    /// Files of older generations removed (left behind by a compaction that was interrupted
    /// after its new file was in place).
    pub stale_files_removed: usize,
    /// Live records taken from the persisted index (`index_file`) instead of a scan.
    pub indexed_records: u64,
    /// Bytes of data files read and verified by the recovery scan (everything when there is no
    /// usable index; only what was appended after the index was written when there is one).
    pub scanned_bytes: u64,
    /// Why an index file that was there was not used (the open scanned everything instead).
    pub index_ignored: Option<String>,
}

/// An open pack directory.
pub struct PackStore {
    dir: PathBuf,
    generation: u64,
    fsync: bool,
    _lock: File,
    stripes: RwLock<Vec<Arc<Stripe>>>,
    free_slots: Mutex<Vec<usize>>,
    index: RwLock<KeyIndex>,
    next_seq: AtomicU64,
    recovery: Recovery,
    /// Set once the files are replaced (compaction) or about to be removed: closing writes no index.
    superseded: std::sync::atomic::AtomicBool,
    /// Whether gets check each record's body hash (the default); see `set_read_checks`.
    read_checks: std::sync::atomic::AtomicBool,
    /// Whether checked gets of large values read the stripe's mapping; see `set_mapped_reads`.
    mapped_reads: std::sync::atomic::AtomicBool,
    /// Bytes read through the mappings since their pages were last released (see
    /// `MAPPED_RESIDENT_BUDGET_BYTES`).
    mapped_unreleased_bytes: AtomicU64,
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
    /// Opens (creating if needed) the pack in `dir`: locks it, loads the persisted index if there
    /// is a usable one, recovers every data file (scanning what the index does not cover), builds
    /// the in-memory index. `fsync`: fdatasync each record before it becomes visible.
    pub fn open(dir: &Path, fsync: bool) -> BResult<Arc<PackStore>> {
        PackStore::open_with(dir, fsync, true)
    }

    /// Opens the pack for compaction, which writes nothing into the old files: a tail after a
    /// file's last record is cut only if it is all zeros, and otherwise left and counted
    /// (`Recovery::kept_tail_bytes`), so that refusing a damaged pack changes nothing on disk.
    pub fn open_keeping_tails(dir: &Path) -> BResult<Arc<PackStore>> {
        PackStore::open_with(dir, true, false)
    }

    fn open_with(dir: &Path, fsync: bool, cut_tails: bool) -> BResult<Arc<PackStore>> {
        crate::backend::fs::mkdir_all(dir)?;
        let lock = lock_directory(dir)?;
        let mut recovery = Recovery::default();
        let (generation, names) = current_generation(dir, &mut recovery)?;
        let mut files = Vec::new();
        for (stripe_id, path) in names {
            files.push(open_data_file(&path, generation, stripe_id)?);
        }
        let (mut index, resume_at, indexed_max_seq) = load_index(dir, generation, &files, &mut recovery);
        let mut stripes = Vec::new();
        let mut found = Vec::new();
        for (data_file, resume_at) in files.into_iter().zip(resume_at) {
            let (stripe, records) = recover_stripe(data_file, resume_at.unwrap_or(FILE_HEADER_BYTES), cut_tails, &mut recovery)?;
            found.push(records);
            stripes.push(Arc::new(stripe));
        }
        recovery.files = stripes.len();
        let max_seq = merge_found(&mut index, found).max(indexed_max_seq);
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
            superseded: std::sync::atomic::AtomicBool::new(false),
            read_checks: std::sync::atomic::AtomicBool::new(true),
            mapped_reads: std::sync::atomic::AtomicBool::new(true),
            mapped_unreleased_bytes: AtomicU64::new(0),
        }))
    }

    /// Whether checked gets of values of `MAPPED_READ_MIN_BYTES` or more hash them in place, from
    /// the stripe's mapping (src/pack/view.rs): one pass over the page cache instead of `pread`'s
    /// copy and the hash's pass over the copy. On by default; the pages read are taken out of
    /// the process again every `MAPPED_RESIDENT_BUDGET_BYTES`, so resident memory stays bounded.
    pub fn set_mapped_reads(&self, on: bool) {
        self.mapped_reads.store(on, Ordering::Release);
    }

    /// Takes every stripe's mapped pages out of the process (a cold phase is next: see
    /// `View::release_pages`); a no-op for stripes never mapped.
    pub fn release_mapped_pages(&self) {
        for stripe in self.stripes.read().expect("pack stripes lock").iter() {
            if let Some(Some(view)) = stripe.view.get() {
                view.release_pages(stripe.file_bytes.load(Ordering::Acquire));
            }
        }
    }

    /// Counts `bytes` just read through a mapping; the read that crosses the budget releases
    /// every stripe's mapped pages (`MAPPED_RESIDENT_BUDGET_BYTES`).
    fn count_mapped_read(&self, bytes: u64) {
        let unreleased = self.mapped_unreleased_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
        // `swap` lets one of several readers crossing together do the release.
        let budget = MAPPED_RESIDENT_BUDGET_BYTES;
        if unreleased >= budget && self.mapped_unreleased_bytes.swap(0, Ordering::AcqRel) >= budget {
            self.release_mapped_pages();
        }
    }

    /// Whether gets check each record's body hash. On (the default), a get streams only bytes
    /// it hashes and fails with `Corrupt` on a mismatch: with `pread`, one more pass over the
    /// data than an unchecked get (see `set_mapped_reads` for one pass). Off, a get trusts the disk and
    /// the filesystem as a plain file read does; opening and compaction still check every record
    /// they read.
    pub fn set_read_checks(&self, on: bool) {
        self.read_checks.store(on, Ordering::Release);
    }

    /// Closing will write no index: the files are about to be replaced (compaction) or removed.
    pub fn close_without_index(&self) {
        self.superseded.store(true, Ordering::Release);
    }

    /// Writes the persisted index: first makes every data file durable up to its tail (so the
    /// index never points at bytes a power cut could take back), then the snapshot.
    fn write_index(&self) -> BResult<()> {
        let stripes = self.stripes.read().expect("pack stripes lock");
        let mut marks = Vec::with_capacity(stripes.len());
        for stripe in stripes.iter() {
            stripe.file.sync_data()?;
            marks.push(StripeMark { id: stripe.id, salt: stripe.salt, tail_bytes: stripe.tail_bytes() });
        }
        let index = self.index.read().expect("pack index lock");
        let live: Vec<(&str, u32, RecordHeader)> =
            index.iter().filter_map(|(key, entry)| entry.live.map(|loc| (key, stripes[loc.stripe_slot].id, loc.header))).collect();
        let snapshot = Snapshot { next_seq: self.next_seq.load(Ordering::Acquire), stripes: marks, damaged_bytes: self.recovery.damaged_bytes };
        index_file::write(&self.dir, self.generation, &snapshot, live.into_iter())?;
        Ok(())
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
        self.index.read().expect("pack index lock").iter().filter(|(_, e)| e.live.is_some()).count()
    }

    /// Every live key with its location, ordered by file and offset (for sequential copying).
    pub fn live_locations(&self) -> Vec<(String, Location)> {
        let index = self.index.read().expect("pack index lock");
        let mut live: Vec<(String, Location)> = index.iter().filter_map(|(k, e)| e.live.map(|loc| (k.to_string(), loc))).collect();
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
            return Ok(StripeLease { store: self.clone(), slot, stripe: self.stripe(slot) });
        }
        let mut stripes = self.stripes.write().expect("pack stripes lock");
        let id = stripes.iter().map(|s| s.id + 1).max().unwrap_or(0);
        let stripe = Arc::new(create_stripe(&self.dir, self.generation, id)?);
        stripes.push(stripe.clone());
        Ok(StripeLease { store: self.clone(), slot: stripes.len() - 1, stripe })
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
    pub fn get(&self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let loc = self.location(key)?;
        let stripe = self.stripe(loc.stripe_slot);
        let header = loc.header;
        let checked = self.read_checks.load(Ordering::Relaxed);
        let mappable = checked && header.value_len >= MAPPED_READ_MIN_BYTES && self.mapped_reads.load(Ordering::Relaxed);
        let mapped = mappable.then(|| stripe.mapped(header.value_offset(), header.value_len)).flatten();
        let read = if let Some(value) = mapped {
            self.send_verified(value, &header, key, sink)
        } else if checked {
            copy_verified(&stripe.file, &header, key, sink)
        } else {
            copy_range(&stripe.file, header.value_offset(), header.value_len, sink)
        };
        // A read that failed says so and where; a record whose bytes are wrong (corrupt) already says what.
        read.map_err(|e| if e.kind == ErrorKind::Corrupt { e } else { failed_call(e, "read", &stripe.path, header.offset) })?;
        Ok(header.value_len)
    }

    /// Sends the mapped `value` of the record `header` (of `key`) into `sink` a chunk at a time,
    /// hashing each chunk just before sending it, so the sink reads it from the CPU's cache.
    fn send_verified(&self, value: &[u8], header: &RecordHeader, key: &str, sink: &mut dyn Write) -> BResult<()> {
        let mut hasher = Xxh3::new();
        hasher.update(key.as_bytes());
        for window in value.chunks(MAPPED_WINDOW_BYTES) {
            for chunk in window.chunks(COPY_BUFFER_BYTES) {
                hasher.update(chunk);
                sink.write_all(chunk)?;
            }
            self.count_mapped_read(window.len() as u64);
        }
        check_body_hash(hasher.digest(), header, key)
    }

    /// Makes a written record visible unless a newer record for the key is already visible.
    fn publish(&self, key: &str, seq: u64, live: Option<Location>) {
        self.index.write().expect("pack index lock").keep_newest(key, IndexEntry { seq, live });
    }

    /// Bytes of memory the in-memory index holds.
    pub fn index_bytes(&self) -> usize {
        self.index.read().expect("pack index lock").allocated_bytes()
    }
}

impl Drop for PackStore {
    /// Gives back the zeros durable writers wrote ahead of their tails, so a closed pack holds
    /// only records. (After a crash, the next open cuts them off as a torn tail.)
    /// Also writes the persisted index, so the next open need not scan. Both are best effort: a
    /// pack closed without them (a crash, an I/O error here) is recovered by the scan.
    fn drop(&mut self) {
        if let Ok(stripes) = self.stripes.read() {
            for stripe in stripes.iter() {
                if stripe.file_bytes.load(Ordering::Acquire) > stripe.tail_bytes() {
                    let _ = stripe.cut_to(stripe.tail_bytes());
                }
            }
        }
        if !self.superseded.load(Ordering::Acquire) && !std::thread::panicking() {
            let _ = self.write_index();
        }
    }
}

/// Names the call that failed on the record at `offset` of `path` in `e`'s message.
fn failed_call(e: BackendError, call: &str, path: &Path, offset: u64) -> BackendError {
    BackendError::new(e.kind, format!("{call} of {} (record at offset {offset}) failed: {}", path.display(), e.message))
}

/// Streams `len` bytes at `offset` of `file` into `sink`, unchecked.
fn copy_range(file: &File, offset: u64, len: u64, sink: &mut dyn Write) -> BResult<()> {
    // The buffer agrees with the value's offset modulo 4 KiB, where the kernel copies fastest.
    let sent = with_io_buffer(|buf| crate::backend::stream_range(file, offset, len, buf.for_offset(offset), sink, |_| {}))?;
    if sent < len {
        let why = format!("pack value at offset {offset}: the file ends {sent} bytes into its {len} bytes (the pack file was cut short)");
        return Err(BackendError::new(ErrorKind::Corrupt, why));
    }
    Ok(())
}

/// Streams the value of the record `header` (of `key`) from `file` into `sink`, verifying the hash.
pub fn copy_verified(file: &File, header: &RecordHeader, key: &str, sink: &mut dyn Write) -> BResult<()> {
    let streamed = with_io_buffer(|buf| super::scan::stream_value(file, header, key.as_bytes(), buf.for_offset(header.value_offset()), sink));
    let digest = streamed.map_err(|e| match e.kind() {
        // The record is in the index but the file no longer holds all of it: damage at rest.
        std::io::ErrorKind::UnexpectedEof => BackendError::new(ErrorKind::Corrupt, format!("pack record of key \"{key}\" at offset {}: {e}", header.offset)),
        _ => BackendError::new(ErrorKind::Io, format!("pack record of key \"{key}\" at offset {}: {e}", header.offset)),
    })?;
    check_body_hash(digest, header, key)
}

/// A `Corrupt` error unless `digest` (of the key and the value just streamed) is the record's.
fn check_body_hash(digest: u64, header: &RecordHeader, key: &str) -> BResult<()> {
    if digest != header.body_hash {
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
        self.store.get(key, sink)
    }

    /// Writes one complete record at the stripe's tail; on any failure cuts the file back.
    fn append(&mut self, kind: RecordKind, seq: u64, key: &str, body: &mut dyn Read, len: u64) -> BResult<RecordHeader> {
        check_key(key)?;
        let start = self.stripe.tail_bytes();
        let record_bytes = RECORD_HEADER_BYTES + key.len() as u64 + len;
        let path = self.stripe.path.clone();
        let written = self
            .prepare(start + record_bytes)
            .and_then(|()| {
                let header = if record_bytes <= ONE_WRITE_RECORD_BYTES {
                    write_small_record(&self.stripe, start, kind, seq, key, body, len)
                } else {
                    write_record(&self.stripe, start, kind, seq, key, body, len)
                };
                header.map_err(|e| failed_call(e, "write", &path, start))
            })
            .and_then(|header| {
                if self.store.fsync {
                    // A failed fdatasync fails the put: the record is cut below and never published.
                    self.stripe.file.sync_data().map_err(|e| failed_call(e.into(), "fdatasync", &path, start))?;
                }
                Ok(header)
            });
        match written {
            Ok(header) => {
                let end = start + header.total_bytes();
                self.stripe.tail_bytes.store(end, Ordering::Release);
                self.stripe.file_bytes.fetch_max(end, Ordering::AcqRel);
                Ok(header)
            }
            Err(e) => {
                // Nothing was published; cut the partial record so it can never be recovered.
                let _ = self.stripe.cut_to(start);
                Err(e)
            }
        }
    }

    /// With `fsync = true`, makes sure a small record ending at `end` lands in blocks the file
    /// already owns, by writing zeros ahead of the tail (and syncing them) once in a while. Then
    /// the fdatasync after each record flushes only data: appending to the end of a file would
    /// also commit the new size and block map to the filesystem journal on every put, which
    /// measured at less than half the rate here (docs/performance/pack-durable.md). Large records are not
    /// prepared: writing their blocks twice would cost more than the journal commit they save.
    fn prepare(&mut self, end: u64) -> BResult<()> {
        let file_bytes = self.stripe.file_bytes.load(Ordering::Acquire);
        let start = self.stripe.tail_bytes();
        if !self.store.fsync || end <= file_bytes || end - start > ONE_WRITE_RECORD_BYTES {
            return Ok(());
        }
        let step = (file_bytes / 16).clamp(PREPARE_MIN_BYTES, PREPARE_MAX_BYTES);
        let target = (end + step).next_multiple_of(4096);
        let zeros = vec![0u8; COPY_BUFFER_BYTES.min((target - file_bytes) as usize)];
        let mut at = file_bytes;
        let path = &self.stripe.path;
        while at < target {
            let n = zeros.len().min((target - at) as usize);
            self.stripe.file.write_all_at(&zeros[..n], at).map_err(|e| crate::backend::fs::call_error("write (zeros ahead of the tail)", path, e))?;
            at += n as u64;
        }
        self.stripe.file.sync_data().map_err(|e| crate::backend::fs::call_error("fdatasync (zeros ahead of the tail)", path, e))?;
        self.stripe.file_bytes.store(target, Ordering::Release);
        Ok(())
    }
}

fn check_key(key: &str) -> BResult<()> {
    if key.len() > MAX_KEY_BYTES as usize {
        return Err(BackendError::new(ErrorKind::Other, format!("key is {} bytes; pack keys are at most {MAX_KEY_BYTES} bytes", key.len())));
    }
    Ok(())
}

/// Writes key and value after the header slot, then the header last, so a header on disk whose
/// body is incomplete fails the body hash. Returns the header written.
///
/// The writes end on `ALIGNED_WRITE_BYTES` boundaries of the file (the first one holds zeros where
/// the header goes, the key and the value's first bytes): the page cache then holds the value in
/// large folios, as it holds a file written from its start. Written from an unaligned offset,
/// each 256 KiB write split the cache into small folios, and every later get copied out of them
/// a fifth slower than fs read its files (docs/performance/pack-durable.md, "Where pack's pread gap came from").
pub fn write_record(stripe: &Stripe, offset: u64, kind: RecordKind, seq: u64, key: &str, body: &mut dyn Read, len: u64) -> BResult<RecordHeader> {
    let mut hasher = Xxh3::new();
    hasher.update(key.as_bytes());
    let end = offset + RECORD_HEADER_BYTES + key.len() as u64 + len;
    // What goes before the value: zeros where the header goes (written last), then the key.
    let mut prefix = vec![0u8; RECORD_HEADER_BYTES as usize];
    prefix.extend_from_slice(key.as_bytes());
    with_io_buffer(|buf| {
        let mut at = offset;
        while at < end {
            let chunk_end = ((at / ALIGNED_WRITE_BYTES + 1) * ALIGNED_WRITE_BYTES).min(end);
            // At an address that agrees with `at` modulo 4 KiB, where the kernel copies fastest.
            let chunk = &mut buf.for_offset(at)[..(chunk_end - at) as usize];
            // The prefix may end in this chunk, or (a record starting just before a boundary) later.
            let prefix_left = prefix.len().saturating_sub((at - offset) as usize);
            let from_prefix = prefix_left.min(chunk.len());
            chunk[..from_prefix].copy_from_slice(&prefix[prefix.len() - prefix_left..][..from_prefix]);
            let value = &mut chunk[from_prefix..];
            body.read_exact(value).map_err(|e| body_error(e, end - at))?;
            hasher.update(value);
            stripe.file.write_all_at(chunk, at)?;
            at = chunk_end;
        }
        Ok::<(), BackendError>(())
    })?;
    let header = RecordHeader { kind, key_len: key.len() as u32, value_len: len, seq, offset, body_hash: hasher.digest() };
    stripe.file.write_all_at(&header.encode(stripe.salt), offset)?;
    Ok(header)
}

/// A body that ended early is an I/O error, as `copy_exact` makes it; `left` is what the record
/// still lacked when the piece being filled began.
fn body_error(e: std::io::Error, left: u64) -> BackendError {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => BackendError::new(ErrorKind::Io, format!("body ended early: {left} bytes of the record were still to write")),
        _ => e.into(),
    }
}

/// Writes a record that fits in memory with one positioned write: header, key and value
/// assembled in the thread's copy buffer, at an address that agrees with `offset` modulo 4 KiB
/// (where the kernel copies fastest). A crash that tears it leaves a header whose body hash
/// fails, as with `write_record`. Returns the header written.
fn write_small_record(stripe: &Stripe, offset: u64, kind: RecordKind, seq: u64, key: &str, body: &mut dyn Read, len: u64) -> BResult<RecordHeader> {
    let header_bytes = RECORD_HEADER_BYTES as usize;
    let value_at = header_bytes + key.len();
    let record_bytes = value_at + len as usize;
    with_io_buffer(|buf| {
        let record = &mut buf.for_offset(offset)[..record_bytes];
        record[header_bytes..value_at].copy_from_slice(key.as_bytes());
        body.read_exact(&mut record[value_at..]).map_err(|e| body_error(e, record_bytes as u64))?;
        let body_hash = crate::hash::xxh3_64(&record[header_bytes..]);
        let header = RecordHeader { kind, key_len: key.len() as u32, value_len: len, seq, offset, body_hash };
        record[..header_bytes].copy_from_slice(&header.encode(stripe.salt));
        stripe.file.write_all_at(record, offset)?;
        Ok(header)
    })
}

/// Takes `file`'s exclusive flock without waiting; false when another holds it. Released when
/// the file is closed.
pub(super) fn try_lock_exclusive(file: &File) -> bool {
    // SAFETY: flock on a file descriptor the caller owns.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Takes the exclusive lock of a pack directory, or says who to close.
fn lock_directory(dir: &Path) -> BResult<File> {
    let path = dir.join(LOCK_FILE);
    let lock =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(|e| crate::backend::fs::call_error("open", &path, e))?;
    if !try_lock_exclusive(&lock) {
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
    let mut indexes = Vec::new();
    let listing = |e| crate::backend::fs::call_error("listing (open, readdir)", dir, e);
    for entry in fs::read_dir(dir).map_err(listing)? {
        let name = entry.map_err(listing)?.file_name().to_string_lossy().into_owned();
        let leftover_tmp = name.strip_suffix(".tmp").is_some_and(|stem| parse_data_file_name(stem).is_some() || parse_index_file_name(stem).is_some());
        if leftover_tmp {
            fs::remove_file(dir.join(&name))?;
        } else if let Some(generation) = parse_index_file_name(&name) {
            indexes.push((generation, dir.join(name)));
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
    for (index_generation, path) in indexes {
        if index_generation != generation {
            // An index of an older generation describes files that are gone.
            fs::remove_file(&path)?;
        }
    }
    if recovery.stale_files_removed > 0 {
        sync_dir(dir)?;
    }
    current.sort();
    Ok((generation, current))
}

/// A data file whose header has been read and checked, not yet scanned.
struct DataFile {
    id: u32,
    path: PathBuf,
    file: File,
    salt: u64,
    len: u64,
}

/// Opens one data file and checks its header against its name.
fn open_data_file(path: &Path, generation: u64, id: u32) -> BResult<DataFile> {
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
    Ok(DataFile { id, path: path.to_path_buf(), file, salt: header.salt, len })
}

/// Scans a data file from `from` (where the persisted index stops, or the first record) to its
/// end and cuts a torn tail (with `cut_tails` false, only one of zeros).
fn recover_stripe(data: DataFile, from: u64, cut_tails: bool, recovery: &mut Recovery) -> BResult<(Stripe, Vec<FoundRecord>)> {
    let outcome = scan(&data.file, data.salt, from, data.len)?;
    recovery.scanned_bytes += data.len - from;
    if outcome.good_end_bytes < data.len {
        if cut_tails || all_zeros(&data.file, outcome.good_end_bytes, data.len)? {
            data.file.set_len(outcome.good_end_bytes)?;
            data.file.sync_all()?;
            recovery.cut_tail_bytes += data.len - outcome.good_end_bytes;
        } else {
            recovery.kept_tail_bytes += data.len - outcome.good_end_bytes;
        }
    }
    recovery.damaged_bytes += outcome.damaged_bytes;
    let stripe = Stripe::new(data.id, data.file, data.salt, data.path, outcome.good_end_bytes);
    Ok((stripe, outcome.records))
}

/// Whether the bytes of `file` from `start` to `end` are all zeros.
fn all_zeros(file: &File, start: u64, end: u64) -> BResult<bool> {
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    let mut pos = start;
    while pos < end {
        let n = buf.len().min((end - pos) as usize);
        file.read_exact_at(&mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

/// The persisted index, if there is one that fits the data files: its entries, where each data
/// file's scan resumes (`None`: from the first record), and the highest seq it knew. When the
/// index is missing or does not fit, there are no entries and every file is scanned whole.
fn load_index(dir: &Path, generation: u64, files: &[DataFile], recovery: &mut Recovery) -> (KeyIndex, Vec<Option<u64>>, u64) {
    let full_scan = || (KeyIndex::new(), vec![None; files.len()], 0);
    let slot_of: HashMap<u32, usize> = files.iter().enumerate().map(|(slot, f)| (f.id, slot)).collect();
    let mut index = KeyIndex::new();
    let loaded = index_file::read(dir, generation, |key, stripe_id, header| {
        if let Some(&stripe_slot) = slot_of.get(&stripe_id) {
            index.keep_newest(key, IndexEntry { seq: header.seq, live: Some(Location { stripe_slot, header }) });
        }
    });
    let snapshot = match loaded {
        Ok(Some(snapshot)) => snapshot,
        Ok(None) => return full_scan(),
        Err(why) => {
            recovery.index_ignored = Some(why);
            return full_scan();
        }
    };
    let mut resume_at = vec![None; files.len()];
    for mark in &snapshot.stripes {
        match slot_of.get(&mark.id).filter(|&&slot| files[slot].salt == mark.salt && files[slot].len >= mark.tail_bytes) {
            Some(&slot) => resume_at[slot] = Some(mark.tail_bytes),
            None => {
                recovery.index_ignored = Some(format!("the data file of stripe {} is missing, replaced or shorter than the index says", mark.id));
                return full_scan();
            }
        }
    }
    recovery.indexed_records = index.len() as u64;
    recovery.damaged_bytes += snapshot.damaged_bytes;
    (index, resume_at, snapshot.next_seq.saturating_sub(1))
}

/// Applies the records found by the scans to `index` (the highest seq per key wins; tombstones are
/// dropped once they have shadowed); returns the highest seq found.
fn merge_found(index: &mut KeyIndex, found: Vec<Vec<FoundRecord>>) -> u64 {
    let mut max_seq = 0;
    for (slot, records) in found.into_iter().enumerate() {
        for record in records {
            max_seq = max_seq.max(record.header.seq);
            let live = (record.header.kind == RecordKind::Put).then_some(Location { stripe_slot: slot, header: record.header });
            index.keep_newest(&record.key, IndexEntry { seq: record.header.seq, live });
        }
    }
    index.retain(|e| e.live.is_some());
    max_seq
}

/// Creates a new data file with its header, durably (write to .tmp, fsync, rename, fsync dir),
/// so a stripe file that exists under its final name always has a complete header.
pub fn create_stripe(dir: &Path, generation: u64, id: u32) -> BResult<Stripe> {
    let mut stripe = create_unpublished_stripe(dir, generation, id)?;
    let path = dir.join(data_file_name(generation, id));
    if let Err(e) = fs::rename(&stripe.path, &path) {
        let _ = fs::remove_file(&stripe.path);
        return Err(crate::backend::fs::call_error("rename", &stripe.path, e));
    }
    sync_dir(dir)?;
    stripe.path = path;
    Ok(stripe)
}

/// Creates a data file with its header under its temporary name (`<final name>.tmp`), fsynced.
/// Until it is renamed, opening the pack ignores and removes it.
pub fn create_unpublished_stripe(dir: &Path, generation: u64, id: u32) -> BResult<Stripe> {
    let tmp = dir.join(format!("{}.tmp", data_file_name(generation, id)));
    let salt = new_salt(&tmp);
    use crate::backend::fs::call_error;
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp).map_err(|e| call_error("open", &tmp, e))?;
    let header = file.write_all_at(&FileHeader { stripe: id, generation, salt }.encode(), 0).map_err(|e| call_error("write", &tmp, e));
    if let Err(e) = header.and_then(|()| file.sync_all().map_err(|e| call_error("fsync", &tmp, e))) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(Stripe::new(id, file, salt, tmp, FILE_HEADER_BYTES))
}

/// fsyncs a directory so renames and removals in it survive a power cut.
pub fn sync_dir(dir: &Path) -> BResult<()> {
    use crate::backend::fs::call_error;
    let handle = File::open(dir).map_err(|e| call_error("open (to fsync the directory)", dir, e))?;
    handle.sync_all().map_err(|e| call_error("fsync (directory)", dir, e))
}

/// A per-file salt: not secret, only different from every other file's.
fn new_salt(path: &Path) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let text = format!("{nanos}:{}:{}:{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), path.display());
    crate::hash::xxh3_64(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A payload whose bytes depend on `seed` and their place, so a shifted or swapped piece shows.
    fn payload(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[1] ^ seed).collect()
    }

    /// Large records are written in pieces that end on aligned offsets; whatever the record's start
    /// (its header and key may cross a boundary, or end exactly on one), every value reads back
    /// whole, checked, from the open store and after a reopening that scans the records.
    #[test]
    fn large_records_read_back_whatever_their_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut expected = Vec::new();
        {
            let store = PackStore::open(dir.path(), false).unwrap();
            let mut lease = store.lease().unwrap();
            for (n, before_boundary) in [1u64, 30, 56, 57, 69, 70, 71, 200, 4096, ALIGNED_WRITE_BYTES].into_iter().enumerate() {
                // A small filler record moves the tail to `before_boundary` bytes short of a boundary.
                let tail = lease.stripe.tail_bytes();
                let overhead = RECORD_HEADER_BYTES + 6;
                let mut target = (tail / ALIGNED_WRITE_BYTES + 1) * ALIGNED_WRITE_BYTES - before_boundary;
                while target < tail + overhead {
                    target += ALIGNED_WRITE_BYTES;
                }
                let filler = vec![7u8; (target - tail - overhead) as usize];
                lease.put(&format!("fill{n:02}"), &mut filler.as_slice(), filler.len() as u64).unwrap();
                assert_eq!(lease.stripe.tail_bytes(), target);
                let key = format!("large-{n}-{}", "k".repeat(n * 9));
                let value = payload(n as u8, 600 * 1024 + n * 13);
                lease.put(&key, &mut value.as_slice(), value.len() as u64).unwrap();
                expected.push((key, value));
            }
            for (key, value) in &expected {
                let mut got = Vec::new();
                lease.get(key, &mut got).unwrap();
                assert!(got == *value, "{key} read back different bytes");
            }
        }
        // Without the persisted index, reopening scans the records: it reads every key from the file.
        let indexes: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "index")).collect();
        assert_eq!(indexes.len(), 1, "closing the pack writes its index");
        fs::remove_file(&indexes[0]).unwrap();
        let store = PackStore::open(dir.path(), false).unwrap();
        for (key, value) in &expected {
            let mut got = Vec::new();
            store.get(key, &mut got).unwrap();
            assert!(got == *value, "{key} read back different bytes after reopening");
        }
    }
}
