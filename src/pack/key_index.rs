//! The in-memory index of an open pack: key → newest record, in half the memory of a
//! `HashMap<String, _>`.
//!
//! A `HashMap<String, Entry>` costs, per key, a 24-byte `String` and a separate allocation for its
//! bytes, beside an entry that repeats the record header, and the table's spare buckets are as
//! large as full ones: about 170 bytes a key at a million keys (examples/pack_open.rs). Here
//! every key's bytes go one after another into an arena, each key's record is a 48-byte slot in a
//! dense array, and the hash table holds only 4-byte slot numbers, so its spare room costs 5
//! bytes a bucket. The arena and the slots grow in fixed chunks rather than by doubling one
//! vector, which would leave up to half of it unused (and copy it). Keys are never removed one
//! by one: a delete is a tombstone slot (it keeps the seq that later puts are ordered against),
//! and only `retain` — run once, after recovery — drops slots and rebuilds everything.

use super::record::{RecordHeader, RecordKind};
use super::store::Location;
use hashbrown::HashTable;

/// The newest record seen for one key; `live` is `None` for a tombstone.
#[derive(Debug, Clone, Copy)]
pub struct IndexEntry {
    /// Sequence number of that record.
    pub seq: u64,
    /// Where its value is, unless it is a tombstone.
    pub live: Option<Location>,
}

/// One key's slot: where its bytes are in the arena, and its record (the header's fields that
/// the key and `live` do not already say).
#[derive(Clone, Copy)]
struct Slot {
    key_at: u64,
    seq: u64,
    offset: u64,
    value_len: u64,
    body_hash: u64,
    stripe_slot: u32,
    key_len: u16,
    live: bool,
}

/// Slots per chunk of the slot array: 768 KiB.
const SLOTS_PER_CHUNK: usize = 1 << 14;
/// Bytes per chunk of the key arena; a key (at most 65,535 bytes) never straddles two chunks.
const ARENA_CHUNK_BYTES: usize = 1 << 20;

/// Key → newest record.
#[derive(Default)]
pub struct KeyIndex {
    /// Slot numbers, found by the hash of their key.
    table: HashTable<u32>,
    /// The slots, `SLOTS_PER_CHUNK` to a chunk: slot n is `slots[n / SLOTS_PER_CHUNK][n % …]`.
    slots: Vec<Vec<Slot>>,
    /// Every key's bytes; a slot's `key_at` is chunk × `ARENA_CHUNK_BYTES` + offset in the chunk.
    arena: Vec<Vec<u8>>,
}

fn hash_of(key: &[u8]) -> u64 {
    crate::hash::xxh3_64(key)
}

impl KeyIndex {
    /// An empty index.
    pub fn new() -> KeyIndex {
        KeyIndex::default()
    }

    /// Number of keys, tombstones included.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    fn slot(&self, number: u32) -> &Slot {
        slot_in(&self.slots, number)
    }

    fn key(&self, slot: &Slot) -> &[u8] {
        key_in(&self.arena, slot)
    }

    /// Whether the index holds no key.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The newest record of `key`, if the index has one.
    pub fn get(&self, key: &str) -> Option<IndexEntry> {
        let key = key.as_bytes();
        let &number = self.table.find(hash_of(key), |&n| self.key(self.slot(n)) == key)?;
        Some(entry_of(self.slot(number)))
    }

    /// Records `entry` as `key`'s newest record unless the index already holds one with a higher
    /// seq (two puts of one key: the one that took the higher seq wins, whatever order they end in).
    pub fn keep_newest(&mut self, key: &str, entry: IndexEntry) {
        let bytes = key.as_bytes();
        let hash = hash_of(bytes);
        if let Some(&number) = self.table.find(hash, |&n| self.key(self.slot(n)) == bytes) {
            let (chunk, at) = chunk_of(number);
            let slot = &mut self.slots[chunk][at];
            if slot.seq <= entry.seq {
                *slot = slot_of(slot.key_at, slot.key_len, entry);
            }
            return;
        }
        // Keys are at most MAX_KEY_BYTES (65,535), checked before any record is written or read.
        let key_len = u16::try_from(bytes.len()).expect("pack keys fit 16 bits");
        let key_at = self.store_key(bytes);
        let number = u32::try_from(self.table.len()).expect("fewer than 2^32 keys in one pack");
        if self.slots.last().is_none_or(|chunk| chunk.len() == SLOTS_PER_CHUNK) {
            self.slots.push(Vec::with_capacity(SLOTS_PER_CHUNK));
        }
        self.slots.last_mut().expect("a chunk with room").push(slot_of(key_at, key_len, entry));
        let KeyIndex { table, slots, arena } = self;
        table.insert_unique(hash, number, |&n| hash_of(key_in(arena, slot_in(slots, n))));
    }

    /// Appends `bytes` to the arena's last chunk (a new one if they do not fit); their `key_at`.
    fn store_key(&mut self, bytes: &[u8]) -> u64 {
        if self.arena.last().is_none_or(|chunk| chunk.len() + bytes.len() > ARENA_CHUNK_BYTES) {
            self.arena.push(Vec::with_capacity(ARENA_CHUNK_BYTES));
        }
        let chunk_number = self.arena.len() - 1;
        let chunk = self.arena.last_mut().expect("a chunk with room");
        let key_at = (chunk_number * ARENA_CHUNK_BYTES + chunk.len()) as u64;
        chunk.extend_from_slice(bytes);
        key_at
    }

    /// Every key with its newest record, in the order the keys first came.
    pub fn iter(&self) -> impl Iterator<Item = (&str, IndexEntry)> + '_ {
        self.slots.iter().flatten().map(|slot| {
            // Only whole keys of valid UTF-8 go in (`keep_newest` takes a `&str`).
            let key = std::str::from_utf8(self.key(slot)).expect("index keys are UTF-8");
            (key, entry_of(slot))
        })
    }

    /// Keeps only the keys whose record passes `keep` (rebuilding the index, and only if some
    /// key goes).
    pub fn retain(&mut self, mut keep: impl FnMut(&IndexEntry) -> bool) {
        if self.iter().all(|(_, entry)| keep(&entry)) {
            return;
        }
        let old = std::mem::take(self);
        for (key, entry) in old.iter().filter(|(_, entry)| keep(entry)) {
            self.keep_newest(key, entry);
        }
    }

    /// Bytes of memory the index holds: its table (with its spare room), slots and arena.
    pub fn allocated_bytes(&self) -> usize {
        // hashbrown fills at most 7 of every 8 buckets, and keeps a control byte per bucket.
        let buckets = (self.table.capacity() * 8).div_ceil(7);
        buckets * (std::mem::size_of::<u32>() + 1) + self.slots.len() * SLOTS_PER_CHUNK * std::mem::size_of::<Slot>() + self.arena.len() * ARENA_CHUNK_BYTES
    }
}

/// The chunk of the slot array that holds slot `number`, and its place there.
fn chunk_of(number: u32) -> (usize, usize) {
    (number as usize / SLOTS_PER_CHUNK, number as usize % SLOTS_PER_CHUNK)
}

fn slot_in(slots: &[Vec<Slot>], number: u32) -> &Slot {
    let (chunk, at) = chunk_of(number);
    &slots[chunk][at]
}

fn key_in<'a>(arena: &'a [Vec<u8>], slot: &Slot) -> &'a [u8] {
    let (chunk, at) = (slot.key_at as usize / ARENA_CHUNK_BYTES, slot.key_at as usize % ARENA_CHUNK_BYTES);
    &arena[chunk][at..at + slot.key_len as usize]
}

fn slot_of(key_at: u64, key_len: u16, entry: IndexEntry) -> Slot {
    let mut slot = Slot { key_at, key_len, seq: entry.seq, offset: 0, value_len: 0, body_hash: 0, stripe_slot: 0, live: false };
    if let Some(location) = entry.live {
        slot.live = true;
        slot.stripe_slot = u32::try_from(location.stripe_slot).expect("fewer than 2^32 stripes");
        (slot.offset, slot.value_len, slot.body_hash) = (location.header.offset, location.header.value_len, location.header.body_hash);
    }
    slot
}

fn entry_of(slot: &Slot) -> IndexEntry {
    let live = slot.live.then_some(Location {
        stripe_slot: slot.stripe_slot as usize,
        header: RecordHeader {
            kind: RecordKind::Put,
            key_len: slot.key_len as u32,
            value_len: slot.value_len,
            seq: slot.seq,
            offset: slot.offset,
            body_hash: slot.body_hash,
        },
    });
    IndexEntry { seq: slot.seq, live }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(seq: u64, offset: u64) -> IndexEntry {
        let header = RecordHeader { kind: RecordKind::Put, key_len: 1, value_len: 10, seq, offset, body_hash: seq * 7 };
        IndexEntry { seq, live: Some(Location { stripe_slot: 2, header }) }
    }

    #[test]
    fn the_highest_seq_wins_and_retain_keeps_keys_readable() {
        let mut index = KeyIndex::new();
        for i in 0..10_000u64 {
            index.keep_newest(&format!("k{i}"), put(i + 1, i * 100));
        }
        index.keep_newest("k5", put(3, 1)); // older than what is there: ignored
        assert_eq!(index.get("k5").unwrap().live.unwrap().header.offset, 500);
        index.keep_newest("k5", IndexEntry { seq: 20_000, live: None }); // a newer tombstone
        assert!(index.get("k5").unwrap().live.is_none());
        let header = index.get("k7").unwrap().live.unwrap().header;
        assert_eq!((header.key_len, header.seq, header.body_hash, header.kind), (2, 8, 56, RecordKind::Put));
        assert!(index.get("nope").is_none());
        index.retain(|e| e.live.is_some());
        assert_eq!(index.len(), 9_999);
        assert!(index.get("k5").is_none());
        assert_eq!(index.get("k9999").unwrap().live.unwrap().header.offset, 999_900);
        assert_eq!(index.iter().filter(|(k, _)| k.starts_with("k99")).count(), 111);
        // One chunk of slots (768 KiB), one of keys (1 MiB), 16,384 buckets of 5 bytes.
        assert_eq!(index.allocated_bytes(), (768 << 10) + (1 << 20) + 16_384 * 5);
    }

    #[test]
    fn keys_and_slots_cross_chunk_boundaries_intact() {
        let mut index = KeyIndex::new();
        // 40,000 slots (three chunks) and 200-byte keys: 8 MB of keys over 8 arena chunks, each
        // of which ends with room too small for the next key.
        let key = |i: u64| format!("{i:0>200}");
        for i in 0..40_000u64 {
            index.keep_newest(&key(i), put(i + 1, i));
        }
        assert_eq!(index.len(), 40_000);
        for i in (0..40_000u64).step_by(997) {
            assert_eq!(index.get(&key(i)).unwrap().live.unwrap().header.offset, i, "key {i}");
        }
        assert_eq!(index.iter().map(|(k, e)| (k.to_string(), e.seq)).last(), Some((key(39_999), 40_000)));
    }

    #[test]
    fn a_key_costs_under_100_bytes_at_any_count() {
        // Between 2^k × 7/8 keys (a full table) and just past it (the table has doubled): the
        // worst and best points of the table's growth, with keys of 17 bytes as
        // examples/pack_open.rs writes them.
        for count in [229_376u64, 229_377, 500_000] {
            let mut index = KeyIndex::new();
            for i in 0..count {
                index.keep_newest(&format!("object-{i:010}"), put(i + 1, i));
            }
            let per_key = index.allocated_bytes() as f64 / count as f64;
            assert!(per_key < 100.0, "{count} keys: {per_key:.1} bytes a key");
        }
    }
}
