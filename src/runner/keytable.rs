//! What the run knows about every key: which version was last stored, its size, and whether a put
//! or delete of it is in flight — so a read that misses can be told apart as an ordinary miss, a
//! miss caused by a concurrent delete, or lost data.
//!
//! 32 bytes per object, lock-free. Puts claim a new generation number first, so racing writers of
//! one key write different, self-identifying versions (see `workload::payload`).
//!
//! ## What a concurrent delete means (docs/concurrency.md says the same for users)
//! - A get or head of a key that was present when it started, and that finds nothing, is a
//!   **raced miss** when a delete of that key was in flight when it started or began before it
//!   ended; otherwise it is a `not_found` **error**: the object was lost.
//! - A delete that finds nothing is a raced miss when another delete of the key overlapped it.
//! - A put and a delete of the same key that overlap leave the key **unsettled**: either outcome is
//!   correct, so a later miss on it is a raced miss, and a later hit is verified as usual. A put
//!   or delete that failed (its outcome unknown: it may have committed) leaves the key unsettled
//!   the same way. The next put or delete that overlaps nothing settles it again.
//! - A put never races into an error: two puts of one key are both correct; the reader checks
//!   whichever version it finds by its header.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which keys one process's operations address. On one host, and with partitioned keys, that is
/// all of the case's keys and they are this process's alone. With shared keys
/// (docs/multi-host.md) the table holds the whole case's keys: this rank writes (puts, deletes)
/// only its own range, so every key has one writer, and reads every key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpace {
    /// The first key this rank writes; its range is `first..first + objects` (its share).
    pub first: u64,
    /// The case's keys, over all ranks.
    pub all: u64,
    /// Where this rank's sequential reads of all keys start: the next rank's first key, so a
    /// one-pass read reads what another rank wrote (as IOR's reorderTasks does, against the
    /// client's cache).
    pub reads_from: u64,
}

impl KeySpace {
    /// `objects` keys of this process's own.
    pub fn own(objects: u64) -> KeySpace {
        KeySpace { first: 0, all: objects, reads_from: 0 }
    }

    /// Whether reads address more keys than this process writes (shared keys, several ranks).
    pub fn is_shared(&self, own_objects: u64) -> bool {
        self.all != own_objects
    }
}

/// Bytes per key of `KeyTable::export`: its state word and its digest word.
const EXPORTED_BYTES: usize = 16;

const PRESENT: u64 = 1 << 63;
const UNSETTLED: u64 = 1 << 62;
const SIZE_BITS: u32 = 40;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;
const GENERATION_MASK: u64 = (1 << 22) - 1;

/// Activity words: operations started in the high 32 bits (wrapping), in flight in the low 32.
const STARTED: u64 = 1 << 32;
const IN_FLIGHT_MASK: u64 = STARTED - 1;

fn overlapped(before: u64, after: u64, own_starts: u64) -> bool {
    before & IN_FLIGHT_MASK > 0 || (after >> 32).wrapping_sub(before >> 32) & 0xffff_ffff > own_starts
}

/// Per-key state for one case.
pub struct KeyTable {
    /// Puts of each key: started (the next generation number) and in flight.
    puts: Vec<AtomicU64>,
    /// Deletes of each key: started and in flight.
    deletes: Vec<AtomicU64>,
    /// Last recorded outcome: present, unsettled, generation, size.
    state: Vec<AtomicU64>,
    /// Digest of the last stored version: `RECORDED`, its generation's low 15 bits, then 48 bits of xxh3.
    digests: Vec<AtomicU64>,
}

const DIGEST_BITS: u32 = 48;
const DIGEST_MASK: u64 = (1 << DIGEST_BITS) - 1;

/// Set in every recorded digest word: a word of zeros means no version was recorded yet, never
/// "generation 0 with digest 0" (which made the first get after a failed first put a mismatch).
const RECORDED: u64 = 1 << 63;

fn pack_digest(generation: u32, digest: u64) -> u64 {
    RECORDED | ((generation as u64 & 0x7fff) << DIGEST_BITS) | (digest & DIGEST_MASK)
}

/// What a read or delete knew about its key when it started.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    key: u64,
    state: u64,
    deletes: u64,
    puts: u64,
}

impl Snapshot {
    /// The last stored (generation, size), if the key was present (or possibly present).
    pub fn known(&self) -> Option<(u32, u64)> {
        decode(self.state)
    }
}

/// A put in flight.
#[derive(Debug, Clone, Copy)]
pub struct PutTicket {
    key: u64,
    /// The version this put writes.
    pub generation: u32,
    deletes: u64,
}

/// How a read or delete that found nothing is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// The key was absent when the operation started: an ordinary miss.
    Absent,
    /// The key was present, but a concurrent (or failed) delete or put left it unsettled.
    Raced,
    /// The key was present and nothing could have removed it: lost data, an error.
    Lost,
}

fn decode(v: u64) -> Option<(u32, u64)> {
    (v & PRESENT != 0).then_some((((v >> SIZE_BITS) & GENERATION_MASK) as u32, v & SIZE_MASK))
}

impl KeyTable {
    /// A table for `objects` keys, all absent.
    pub fn new(objects: u64) -> Self {
        let words = || (0..objects).map(|_| AtomicU64::new(0)).collect();
        KeyTable { puts: words(), deletes: words(), state: words(), digests: words() }
    }

    /// Starts a put of `key`: claims its generation number.
    pub fn begin_put(&self, key: u64) -> PutTicket {
        let before = self.puts[key as usize].fetch_add(STARTED + 1, Ordering::SeqCst);
        PutTicket { key, generation: (before >> 32) as u32, deletes: self.deletes[key as usize].load(Ordering::SeqCst) }
    }

    /// Ends a put: `stored` holds the size and xxh3 digest when the backend acknowledged it.
    pub fn end_put(&self, t: PutTicket, stored: Option<(u64, u64)>) {
        let i = t.key as usize;
        let raced = overlapped(t.deletes, self.deletes[i].load(Ordering::SeqCst), 0);
        match stored {
            Some((size, digest)) => {
                self.digests[i].store(pack_digest(t.generation, digest), Ordering::SeqCst);
                let flag = if raced { UNSETTLED } else { 0 };
                let value = PRESENT | flag | ((t.generation as u64 & GENERATION_MASK) << SIZE_BITS) | (size & SIZE_MASK);
                self.state[i].store(value, Ordering::SeqCst);
            }
            None => {
                self.state[i].fetch_or(UNSETTLED, Ordering::SeqCst);
            }
        }
        self.puts[i].fetch_sub(1, Ordering::SeqCst);
    }

    /// Ends a put that never reached the backend (a bytes stop ended the phase first).
    pub fn abandon_put(&self, t: PutTicket) {
        self.puts[t.key as usize].fetch_sub(1, Ordering::SeqCst);
    }

    /// What a get or head of `key` knows before it starts.
    pub fn snapshot(&self, key: u64) -> Snapshot {
        let i = key as usize;
        Snapshot {
            key,
            deletes: self.deletes[i].load(Ordering::SeqCst),
            puts: self.puts[i].load(Ordering::SeqCst),
            state: self.state[i].load(Ordering::SeqCst),
        }
    }

    /// Starts a delete of `key`.
    pub fn begin_delete(&self, key: u64) -> Snapshot {
        let i = key as usize;
        let deletes = self.deletes[i].fetch_add(STARTED + 1, Ordering::SeqCst);
        Snapshot { key, deletes, puts: self.puts[i].load(Ordering::SeqCst), state: self.state[i].load(Ordering::SeqCst) }
    }

    /// Ends a delete: `removed` when the backend acknowledged it, `None` when it failed with an
    /// unknown outcome, `Some(false)` when it found nothing.
    pub fn end_delete(&self, s: &Snapshot, removed: Option<bool>) {
        let i = s.key as usize;
        let put_raced = overlapped(s.puts, self.puts[i].load(Ordering::SeqCst), 0);
        match removed {
            Some(true) if !put_raced => self.state[i].store(0, Ordering::SeqCst),
            Some(false) => {}
            _ => {
                self.state[i].fetch_or(UNSETTLED, Ordering::SeqCst);
            }
        }
        self.deletes[i].fetch_sub(1, Ordering::SeqCst);
    }

    /// How a get or head that started with `s` and found nothing counts.
    pub fn classify_read_miss(&self, s: &Snapshot) -> Miss {
        self.classify(s, 0)
    }

    /// How a delete that started with `s` (from `begin_delete`) and found nothing counts.
    pub fn classify_delete_miss(&self, s: &Snapshot) -> Miss {
        self.classify(s, 1)
    }

    fn classify(&self, s: &Snapshot, own_deletes: u64) -> Miss {
        if s.state & PRESENT == 0 {
            return Miss::Absent;
        }
        let now = self.deletes[s.key as usize].load(Ordering::SeqCst);
        if s.state & UNSETTLED != 0 || overlapped(s.deletes, now, own_deletes) {
            Miss::Raced
        } else {
            Miss::Lost
        }
    }

    /// How a put that failed with `NotFound` counts (a backend whose overwrite updates a row that
    /// a concurrent delete removed): raced when a delete overlapped it, lost otherwise.
    pub fn classify_put_miss(&self, t: &PutTicket) -> Miss {
        if overlapped(t.deletes, self.deletes[t.key as usize].load(Ordering::SeqCst), 0) {
            Miss::Raced
        } else {
            Miss::Lost
        }
    }

    /// Whether `digest` is the one recorded when `generation` of `key` was stored; `None` when the
    /// last recorded digest is of another version (racing puts), so it cannot tell.
    pub fn digest_matches(&self, key: u64, generation: u32, digest: u64) -> Option<bool> {
        let recorded = self.digests[key as usize].load(Ordering::SeqCst);
        let mine = pack_digest(generation, 0) >> DIGEST_BITS;
        (recorded >> DIGEST_BITS == mine).then_some(recorded & DIGEST_MASK == digest & DIGEST_MASK)
    }

    /// The last stored (generation, size) of `key`, if present (or possibly present).
    pub fn get(&self, key: u64) -> Option<(u32, u64)> {
        decode(self.state[key as usize].load(Ordering::SeqCst))
    }

    /// The recorded state (presence, generation, size, digest) of `keys`, as bytes for the other
    /// ranks of a shared key space (`import`). Called between phases, when nothing is in flight.
    pub fn export(&self, keys: Range<u64>) -> Vec<u8> {
        let mut out = Vec::with_capacity((keys.end - keys.start) as usize * EXPORTED_BYTES);
        for k in keys {
            out.extend_from_slice(&self.state[k as usize].load(Ordering::SeqCst).to_le_bytes());
            out.extend_from_slice(&self.digests[k as usize].load(Ordering::SeqCst).to_le_bytes());
        }
        out
    }

    /// Takes the state of the keys from `first` on that another rank `export`ed: what its
    /// writer stored, so a get of them here is verified and a miss classified as on the writer.
    pub fn import(&self, first: u64, bytes: &[u8]) -> Result<(), String> {
        let keys = (bytes.len() / EXPORTED_BYTES) as u64;
        if bytes.len() % EXPORTED_BYTES != 0 || first + keys > self.state.len() as u64 {
            return Err(format!("a rank sent the state of keys {first}..{} of a table of {}", first + keys, self.state.len()));
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        for i in 0..keys as usize {
            let k = first as usize + i;
            self.state[k].store(word(i * EXPORTED_BYTES), Ordering::SeqCst);
            self.digests[k].store(word(i * EXPORTED_BYTES + 8), Ordering::SeqCst);
        }
        Ok(())
    }

    /// Number of present (or possibly present) keys.
    pub fn present(&self) -> u64 {
        (0..self.state.len() as u64).filter(|k| self.get(*k).is_some()).count() as u64
    }

    /// Bytes of all present (or possibly present) objects.
    pub fn live_bytes(&self) -> u64 {
        (0..self.state.len() as u64).filter_map(|k| self.get(k)).map(|(_, s)| s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(t: &KeyTable, key: u64, size: u64) -> u32 {
        let p = t.begin_put(key);
        t.end_put(p, Some((size, 0xabcd)));
        p.generation
    }

    #[test]
    fn a_key_whose_first_put_failed_has_no_digest_to_match() {
        let t = KeyTable::new(1);
        let p = t.begin_put(0);
        t.end_put(p, None);
        // Its value may still be on disk (a put that failed after the rename): a get of version
        // 0 must be checked byte by byte, not compared with a digest nobody recorded.
        assert_eq!(t.digest_matches(0, 0, 0), None);
        let g = stored(&t, 0, 10);
        assert_eq!((t.digest_matches(0, g, 0xabcd), t.digest_matches(0, g, 1)), (Some(true), Some(false)));
    }

    #[test]
    fn an_exported_range_imports_into_another_table_for_verification() {
        let writer = KeyTable::new(6);
        stored(&writer, 3, 10);
        let g = stored(&writer, 4, 20);
        let reader = KeyTable::new(6);
        reader.import(3, &writer.export(3..5)).unwrap();
        assert_eq!((reader.get(3), reader.get(4), reader.get(2)), (Some((0, 10)), Some((g, 20)), None));
        assert_eq!(reader.digest_matches(4, g, 0xabcd), Some(true), "the writer's digest, checked on the reader");
        assert_eq!(reader.classify_read_miss(&reader.snapshot(4)), Miss::Lost, "present on the writer, missing: lost");
        assert!(reader.import(5, &writer.export(3..5)).is_err(), "past the table's end");
    }

    #[test]
    fn tracks_versions_and_sizes() {
        let t = KeyTable::new(3);
        assert_eq!(stored(&t, 1, 5), 0);
        assert_eq!(stored(&t, 1, 900_000_000), 1);
        stored(&t, 2, 5);
        assert_eq!(t.get(1), Some((1, 900_000_000)));
        assert_eq!(t.live_bytes(), 900_000_005);
        let d = t.begin_delete(1);
        t.end_delete(&d, Some(true));
        assert_eq!(t.get(1), None);
    }

    #[test]
    fn a_read_miss_is_absent_raced_or_lost() {
        let t = KeyTable::new(4);
        assert_eq!(t.classify_read_miss(&t.snapshot(0)), Miss::Absent, "never stored");

        stored(&t, 1, 10);
        assert_eq!(t.classify_read_miss(&t.snapshot(1)), Miss::Lost, "present, nothing deleted it");

        // A delete that starts after the read began.
        let read = t.snapshot(1);
        let d = t.begin_delete(1);
        assert_eq!(t.classify_read_miss(&read), Miss::Raced);
        t.end_delete(&d, Some(true));
        assert_eq!(t.classify_read_miss(&read), Miss::Raced, "still raced after the delete ended");

        // A delete already in flight when the read began (the table still says present).
        stored(&t, 2, 10);
        let d = t.begin_delete(2);
        let read = t.snapshot(2);
        assert_eq!(t.classify_read_miss(&read), Miss::Raced);
        t.end_delete(&d, Some(true));
        assert_eq!(t.classify_read_miss(&t.snapshot(2)), Miss::Absent, "after the delete: absent");

        // A delete that finished before the read began is no excuse.
        stored(&t, 3, 10);
        let d = t.begin_delete(3);
        t.end_delete(&d, Some(true));
        stored(&t, 3, 10);
        assert_eq!(t.classify_read_miss(&t.snapshot(3)), Miss::Lost, "re-put after an old delete, then lost");
    }

    #[test]
    fn overlapping_put_and_delete_leave_the_key_unsettled_until_a_clean_write() {
        let t = KeyTable::new(1);
        stored(&t, 0, 10);
        let p = t.begin_put(0);
        let d = t.begin_delete(0);
        t.end_delete(&d, Some(true));
        t.end_put(p, Some((10, 1)));
        assert_eq!(t.classify_read_miss(&t.snapshot(0)), Miss::Raced, "either outcome is correct");
        stored(&t, 0, 10);
        assert_eq!(t.classify_read_miss(&t.snapshot(0)), Miss::Lost, "a clean put settles the key");

        // The other order: the put ends first, then the delete.
        let p = t.begin_put(0);
        let d = t.begin_delete(0);
        t.end_put(p, Some((10, 1)));
        t.end_delete(&d, Some(true));
        assert!(t.get(0).is_some(), "kept as possibly present");
        assert_eq!(t.classify_read_miss(&t.snapshot(0)), Miss::Raced);
    }

    #[test]
    fn deletes_racing_deletes_and_failed_writes() {
        let t = KeyTable::new(2);
        stored(&t, 0, 10);
        let first = t.begin_delete(0);
        let second = t.begin_delete(0);
        t.end_delete(&first, Some(true));
        assert_eq!(t.classify_delete_miss(&second), Miss::Raced);
        t.end_delete(&second, Some(false));
        let absent = t.begin_delete(1);
        assert_eq!(t.classify_delete_miss(&absent), Miss::Absent);
        t.end_delete(&absent, Some(false));

        stored(&t, 1, 10);
        let lone = t.begin_delete(1);
        assert_eq!(t.classify_delete_miss(&lone), Miss::Lost, "no other delete: the object was lost");
        t.end_delete(&lone, None);
        assert_eq!(t.classify_read_miss(&t.snapshot(1)), Miss::Raced, "a failed delete may have committed");

        let p = t.begin_put(1);
        assert_eq!(t.classify_put_miss(&p), Miss::Lost);
        let d = t.begin_delete(1);
        assert_eq!(t.classify_put_miss(&p), Miss::Raced);
        t.end_delete(&d, Some(true));
        t.end_put(p, None);
        assert_eq!(t.classify_read_miss(&t.snapshot(1)), Miss::Raced);
    }
}
