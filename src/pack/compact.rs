//! Compaction: rewrite a pack's live records into one new data file and swap it in atomically.
//!
//! The new file is written under a temporary name, checked, fsynced and renamed to the next
//! generation's name; only then are the old generation's files removed. A crash at any point
//! leaves either the old generation (the temporary file is removed on the next open) or the new
//! one (older files are removed on the next open) — never a mix, never a lost record. It must
//! never run while anything else has the pack open (the pack's lock guarantees that).

use super::index_file::index_file_name;
use super::record::FILE_HEADER_BYTES;
use super::store::{create_unpublished_stripe, data_file_name, parse_data_file_name, sync_dir, write_record, PackStore, LOCK_FILE};
use crate::backend::{BResult, BackendError, ErrorKind};
use std::fs;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// What a compaction did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CompactReport {
    /// Live records copied into the new file.
    pub live_records: u64,
    /// Data bytes before (sum of the old generation's files), in bytes.
    pub bytes_before: u64,
    /// Data bytes after (the new file), in bytes.
    pub bytes_after: u64,
    /// Generation of the new data file.
    pub generation: u64,
    /// Bytes found damaged (holding no record that checks: in the middle of a file, after its
    /// last record, or a live record whose body no longer matches its hash) and left out: only
    /// with `drop_damaged`, else it refuses.
    pub dropped_damaged_bytes: u64,
    /// Bytes of zeros after a file's last record (space a durable writer wrote ahead), left out.
    pub cut_tail_bytes: u64,
    /// The pack was one file of live records only: nothing was written.
    pub already_compact: bool,
}

/// How `compact_with` treats damage the open found.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactOptions {
    /// Compact a pack whose data files hold damaged bytes, leaving them out of the new file (for
    /// good: the old files are removed). Off, such a pack is refused and no record changes.
    pub drop_damaged: bool,
}

/// Compacts the pack in `pack_dir` with the default options: a pack with damaged records is
/// refused (see `compact_with`).
pub fn compact(pack_dir: &Path) -> BResult<CompactReport> {
    compact_with(pack_dir, CompactOptions::default())
}

/// Compacts the pack in `pack_dir`: live records only, one data file, old files removed.
/// Fails with `Conflict` if the pack is open elsewhere; on any failure the old files stay. When
/// the open finds damaged bytes (a record whose header or body no longer checks), which may
/// have held a key's only or newest version, it fails with `Corrupt` and changes nothing, unless
/// `options.drop_damaged`: the old files are the last copy of those bytes.
pub fn compact_with(pack_dir: &Path, options: CompactOptions) -> BResult<CompactReport> {
    // Opening makes a store's files: a directory with neither a data file nor the lock of a
    // store (one opened before it wrote anything, perhaps open now) is refused before that, so
    // compaction never writes into something that was not a pack.
    if !pack_dir.is_dir() {
        let what = if pack_dir.exists() { "is not a directory" } else { "does not exist" };
        return Err(BackendError::new(
            ErrorKind::NotFound,
            format!("{} {what}; give the directory a pack target stored its files in (the report's data_paths, kept with --keep)", pack_dir.display()),
        ));
    }
    let holds_data_file =
        fs::read_dir(pack_dir).map(|entries| entries.flatten().any(|e| e.file_name().to_str().and_then(parse_data_file_name).is_some())).unwrap_or(false);
    if !holds_data_file && !pack_dir.join(LOCK_FILE).is_file() {
        return Err(BackendError::new(
            ErrorKind::NotFound,
            format!(
                "{} is not a pack directory: it holds no pack data file ({}); nothing was written. Give the directory a pack target \
                 stored its files in (the report's data_paths, kept with --keep)",
                pack_dir.display(),
                data_file_name(1, 0)
            ),
        ));
    }
    let lock_existed = pack_dir.join(LOCK_FILE).exists();
    let store = match PackStore::open_keeping_tails(pack_dir) {
        Ok(store) => store,
        Err(e) => {
            // The open made the lock file before it found the directory was no pack it could
            // read: leave the directory as it was.
            if !lock_existed {
                remove_unheld_lock(pack_dir);
            }
            return Err(e);
        }
    };
    let found = store.recovery();
    let damaged = found.damaged_bytes + found.kept_tail_bytes;
    if damaged > 0 && !options.drop_damaged {
        return Err(BackendError::new(
            ErrorKind::Corrupt,
            format!(
                "{damaged} byte(s) of its data files hold no record that checks (a record whose header or body hash fails, or \
                 bytes after the last record: damage, or a write a crash left unfinished); compaction stopped, nothing removed: \
                 it would drop them for good, and they may hold a key's only or newest version. {DAMAGE_ADVICE}"
            ),
        ));
    }
    let old_files: Vec<_> = (0..store.recovery().files).map(|slot| store.stripe(slot).path.clone()).collect();
    let bytes_before = store.data_bytes();
    // One file holding only live records already is what compaction would write: rewriting a
    // large store byte for byte would cost its size in writes for nothing.
    let live = store.live_locations();
    let live_bytes = FILE_HEADER_BYTES + live.iter().map(|(_, loc)| loc.header.total_bytes()).sum::<u64>();
    let single_file_of_live_records = damaged == 0 && found.cut_tail_bytes == 0 && old_files.len() == 1 && live_bytes == bytes_before;
    // Every record is read and checked, as copying would: a record the index vouched for may
    // have rotted since, and then the copy below refuses (or drops it) as it would have.
    if single_file_of_live_records && live.iter().all(|(key, loc)| record_checks(&store, key, loc)) {
        let generation = store.generation();
        return Ok(CompactReport {
            live_records: live.len() as u64,
            bytes_before,
            bytes_after: bytes_before,
            generation,
            already_compact: true,
            ..Default::default()
        });
    }
    drop(live);
    let generation = store.generation() + 1;
    let target = create_unpublished_stripe(pack_dir, generation, 0)?;
    let mut report = CompactReport { bytes_before, generation, dropped_damaged_bytes: damaged, cut_tail_bytes: found.cut_tail_bytes, ..Default::default() };
    let copied = copy_live_records(&store, &target, options, &mut report.dropped_damaged_bytes);
    let tmp_path = target.path.clone();
    let finish = copied.and_then(|(records, end)| {
        // A damaged last record was written and then left out: the file ends at the last good one.
        target.file.set_len(end)?;
        target.file.sync_all()?;
        fs::rename(&tmp_path, pack_dir.join(data_file_name(generation, 0)))?;
        sync_dir(pack_dir)?;
        report.live_records = records;
        report.bytes_after = end;
        Ok(())
    });
    if let Err(e) = finish {
        let _ = fs::remove_file(&tmp_path);
        return Err(e);
    }
    // The new generation is in place: the old files are now superseded leftovers.
    store.close_without_index();
    for path in old_files {
        fs::remove_file(&path)?;
    }
    match fs::remove_file(pack_dir.join(index_file_name(generation - 1))) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    sync_dir(pack_dir)?;
    Ok(report)
}

/// Whether the record at `loc` still holds the bytes its hash says.
fn record_checks(store: &PackStore, key: &str, loc: &super::store::Location) -> bool {
    super::store::copy_verified(&store.stripe(loc.stripe_slot).file, &loc.header, key, &mut std::io::sink()).is_ok()
}

/// Removes the lock file of `dir` if no one holds it: taken first, so that a process that has
/// it open keeps its lock (a lock file removed from under its holder would let a second writer in).
fn remove_unheld_lock(dir: &Path) {
    let path = dir.join(LOCK_FILE);
    let Ok(file) = fs::File::open(&path) else { return };
    if super::store::try_lock_exclusive(&file) {
        let _ = fs::remove_file(&path);
    }
}

/// What to do about damage compaction must not decide alone.
const DAMAGE_ADVICE: &str = "Copy the directory aside to keep what the damaged bytes hold, then compact with --drop-damaged to leave them out";

/// Copies every live record (same key, value and seq) into `target`; returns (records, end
/// offset). A record whose body no longer matches its hash stops the copy, or with
/// `drop_damaged` is left out and its bytes added to `dropped`.
fn copy_live_records(store: &PackStore, target: &super::store::Stripe, options: CompactOptions, dropped: &mut u64) -> BResult<(u64, u64)> {
    let mut offset = FILE_HEADER_BYTES;
    let mut records = 0;
    for (key, loc) in store.live_locations() {
        let source = store.stripe(loc.stripe_slot);
        let old = loc.header;
        let mut body = RangeReader { file: &source.file, pos: old.value_offset(), left: old.value_len };
        let new = write_record(target, offset, old.kind, old.seq, &key, &mut body, old.value_len)?;
        // Same key and value bytes must give the same hash; anything else is damage in the source.
        if new.body_hash != old.body_hash {
            if options.drop_damaged {
                // The next record overwrites the copy (or the file is cut back after the last).
                *dropped += old.total_bytes();
                continue;
            }
            return Err(BackendError::new(
                ErrorKind::Corrupt,
                format!(
                    "the record of key \"{key}\" at offset {} of {} is damaged (its bytes no longer match its hash); compaction \
                     stopped, nothing removed. {DAMAGE_ADVICE}",
                    old.offset,
                    source.path.display()
                ),
            ));
        }
        offset += new.total_bytes();
        records += 1;
    }
    Ok((records, offset))
}

/// Reads a byte range of a file with positioned reads.
struct RangeReader<'a> {
    file: &'a fs::File,
    pos: u64,
    left: u64,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(self.left as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}
