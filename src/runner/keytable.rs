//! What the run knows about every key: which version was last stored and its size.
//!
//! 12 bytes per object, lock-free. Puts claim a new generation number first, so racing writers
//! of one key write different, self-identifying versions (see `workload::payload`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const PRESENT: u64 = 1 << 63;
const SIZE_BITS: u32 = 40;
const SIZE_MASK: u64 = (1 << SIZE_BITS) - 1;
const GENERATION_MASK: u64 = (1 << 23) - 1;

/// Per-key state for one case.
pub struct KeyTable {
    generations: Vec<AtomicU32>,
    state: Vec<AtomicU64>,
}

impl KeyTable {
    /// A table for `objects` keys, all absent.
    pub fn new(objects: u64) -> Self {
        KeyTable {
            generations: (0..objects).map(|_| AtomicU32::new(0)).collect(),
            state: (0..objects).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Claims the generation number for the next put of `key`.
    pub fn next_generation(&self, key: u64) -> u32 {
        self.generations[key as usize].fetch_add(1, Ordering::Relaxed)
    }

    /// Records that `generation` of `key` with `size` bytes was stored.
    pub fn stored(&self, key: u64, generation: u32, size: u64) {
        let value = PRESENT | ((generation as u64 & GENERATION_MASK) << SIZE_BITS) | (size & SIZE_MASK);
        self.state[key as usize].store(value, Ordering::Relaxed);
    }

    /// Records that `key` was deleted.
    pub fn deleted(&self, key: u64) {
        self.state[key as usize].store(0, Ordering::Relaxed);
    }

    /// The last stored (generation, size) of `key`, if present.
    pub fn get(&self, key: u64) -> Option<(u32, u64)> {
        let v = self.state[key as usize].load(Ordering::Relaxed);
        (v & PRESENT != 0).then_some((((v >> SIZE_BITS) & GENERATION_MASK) as u32, v & SIZE_MASK))
    }

    /// Bytes of all present objects.
    pub fn live_bytes(&self) -> u64 {
        (0..self.state.len() as u64).filter_map(|k| self.get(k)).map(|(_, s)| s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_versions_and_sizes() {
        let t = KeyTable::new(3);
        assert_eq!(t.next_generation(1), 0);
        assert_eq!(t.next_generation(1), 1);
        t.stored(1, 1, 900_000_000);
        t.stored(2, 0, 5);
        assert_eq!(t.get(1), Some((1, 900_000_000)));
        assert_eq!(t.live_bytes(), 900_000_005);
        t.deleted(1);
        assert_eq!(t.get(1), None);
    }
}
