//! xxh3-64, the one fast hash stowbench uses for payload digests, pack records and key spreading.
//!
//! Why this module: the digest runs over every byte a get or a checked pack read moves, so its
//! speed is part of what a large get costs. `twox-hash` picks AVX2 at run time (55 GB/s on the
//! build machine's EPYC against 25 GB/s for the SSE2 code a portable build of `xxhash-rust`
//! compiles to), and gives the same values: XXH3 is one algorithm, so pack files and recorded
//! digests do not change. The streaming hasher uses the default secret in place, so making one
//! allocates nothing (a get of a 4 KiB object makes one).

use std::hash::Hasher as _;
use twox_hash::xxhash3_64::{RawHasher, SecretBuffer};

/// Streaming xxh3-64 with seed 0 and the default secret.
#[derive(Clone)]
pub struct Xxh3(RawHasher<&'static [u8; twox_hash::xxhash3_64::DEFAULT_SECRET_LENGTH]>);

impl Xxh3 {
    /// A hasher that has seen nothing.
    pub fn new() -> Xxh3 {
        Xxh3(RawHasher::new(SecretBuffer::default()))
    }

    /// Feeds `bytes`.
    ///
    /// Never inlined, so the AVX2 loop inside is compiled once, in one place. Inlined, it was
    /// compiled anew in whichever codegen unit called it, and in some of those copies LLVM kept
    /// the accumulators in memory instead of registers: an unrelated change elsewhere once made
    /// pack's checked gets 1.6× slower (the `perf annotate` showed loads and stores of the
    /// accumulators in the loop). A call per update costs nothing next to hashing its bytes.
    #[inline(never)]
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The digest of everything fed so far (the hasher can go on).
    pub fn digest(&self) -> u64 {
        self.0.finish()
    }
}

impl Default for Xxh3 {
    fn default() -> Xxh3 {
        Xxh3::new()
    }
}

/// xxh3-64 of `bytes`, seed 0.
#[inline]
pub fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// xxh3-64 of `bytes` with `seed`.
#[inline]
pub fn xxh3_64_with_seed(bytes: &[u8], seed: u64) -> u64 {
    twox_hash::XxHash3_64::oneshot_with_seed(seed, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference implementation (xxhsum -H3 and XXH3_64bits_withSeed), so a
    /// change of crate can never silently change what pack files and recorded digests hold.
    #[test]
    fn matches_the_reference_values() {
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(xxh3_64(b"a"), 0xE6C6_32B6_1E96_4E1F);
        assert_eq!(xxh3_64_with_seed(b"", 1), 0x4DC5_B0CC_826F_6703);
    }

    #[test]
    fn streaming_in_any_pieces_equals_one_shot() {
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        for piece in [1usize, 7, 64, 240, 4096, 262_144] {
            let mut h = Xxh3::new();
            data.chunks(piece).for_each(|c| h.update(c));
            assert_eq!(h.digest(), xxh3_64(&data), "pieces of {piece}");
        }
        assert_eq!(Xxh3::new().digest(), xxh3_64(b""));
    }
}
