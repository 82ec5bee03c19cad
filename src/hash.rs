//! xxh3-64, the one fast hash stowbench uses for payload digests, pack records and key spreading.
//!
//! Why this module: the digest runs over every byte a get or a checked pack read moves, so its
//! speed is part of what a large get costs. One-shot hashes come from `twox-hash`, which picks
//! AVX2 at run time and gives the reference values (XXH3 is one algorithm, so pack files and
//! recorded digests never change with the code that computes them).
//!
//! The streaming hasher is our own: XXH3's long-input loop over the accumulators, with the same
//! run-time choice of AVX2. `twox-hash`'s streaming hasher keeps its eight accumulators in the
//! hasher and works one 64-byte stripe per call; whether LLVM then holds them in registers
//! across the loop depended on how the crate happened to be compiled. In stowbench's binary it
//! did not (`perf annotate`: a load and a store of the accumulators per stripe), and a checked
//! pack get of 1 MiB values hashed the page cache at about 60 % of the speed the same library
//! reached in an example program built beside it (docs/performance/pack-durable.md, session 20). Here the
//! loop loads the accumulators into two AVX2 registers once per call and stores them once at
//! its end, so no compiler choice can put them back in memory.
//!
//! Short inputs (240 bytes or less) use XXH3's other algorithm; the hasher keeps them whole
//! in its buffer and hands them to the one-shot hash when asked for the digest.

/// XXH3's default secret (`kSecret` in the reference xxhash.h).
const SECRET: [u8; 192] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, //
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, //
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, //
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, //
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, //
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, //
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, //
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, //
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, //
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, //
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, //
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e, //
];
const STRIPE: usize = 64;
/// Stripes per block: after each block the accumulators are scrambled.
const STRIPES_PER_BLOCK: usize = (SECRET.len() - STRIPE) / 8;
/// Inputs up to this long use XXH3's short-input algorithm.
const SHORT_MAX: usize = 240;
/// Bytes the hasher holds back: more than `SHORT_MAX`, a whole number of stripes.
const BUFFER: usize = 4 * STRIPE;
const PRIME32_1: u64 = 0x9E37_79B1;
const PRIME32_2: u64 = 0x85EB_CA77;
const PRIME32_3: u64 = 0xC2B2_AE3D;
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;
const PRIME_MX1: u64 = 0x1656_6791_9E37_79F9;
const INITIAL_ACCUMULATORS: [u64; 8] = [PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1];

/// Streaming xxh3-64 with seed 0 and the default secret; making one allocates nothing (a get of
/// a 4 KiB object makes one).
#[derive(Clone)]
pub struct Xxh3 {
    acc: [u64; 8],
    /// Stripes of the current block already accumulated.
    stripe_in_block: usize,
    /// The latest bytes, not yet accumulated: while the input is `SHORT_MAX` bytes or less, all
    /// of it. A stripe is accumulated only once a byte after it has arrived, because XXH3 treats
    /// the input's last stripe apart.
    buffer: [u8; BUFFER],
    buffered: usize,
    /// The 64 bytes accumulated last, which end where `buffer` starts: the input's last stripe
    /// takes bytes from here when fewer than 64 are buffered.
    before_buffer: [u8; STRIPE],
    total: u64,
}

impl Xxh3 {
    /// A hasher that has seen nothing.
    pub fn new() -> Xxh3 {
        Xxh3 { acc: INITIAL_ACCUMULATORS, stripe_in_block: 0, buffer: [0; BUFFER], buffered: 0, before_buffer: [0; STRIPE], total: 0 }
    }

    /// Starts over, as `new` would, without clearing the buffers: a byte of them is read only
    /// after it was written again. Cheaper than a new hasher (no 400-byte copy), which matters to
    /// the runner: it resets one per get, inside the get's timed window when a get is retried.
    pub fn reset(&mut self) {
        self.acc = INITIAL_ACCUMULATORS;
        self.stripe_in_block = 0;
        self.buffered = 0;
        self.total = 0;
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.buffered > 0 || self.total <= SHORT_MAX as u64 {
            let take = bytes.len().min(BUFFER - self.buffered);
            self.buffer[self.buffered..self.buffered + take].copy_from_slice(&bytes[..take]);
            self.buffered += take;
            bytes = &bytes[take..];
            if bytes.is_empty() {
                return;
            }
            // The buffer is full (more than SHORT_MAX bytes) and more input follows.
            let full = self.buffer;
            accumulate_stripes(&mut self.acc, &mut self.stripe_in_block, &full);
            self.before_buffer.copy_from_slice(&full[BUFFER - STRIPE..]);
            self.buffered = 0;
        }
        // Nothing buffered, and the input is past the short algorithm: accumulate in place every
        // stripe that has at least one byte after it, and buffer the rest (1 to 64 bytes).
        if bytes.len() > STRIPE {
            let in_place = (bytes.len() - 1) / STRIPE * STRIPE;
            accumulate_stripes(&mut self.acc, &mut self.stripe_in_block, &bytes[..in_place]);
            self.before_buffer.copy_from_slice(&bytes[in_place - STRIPE..in_place]);
            bytes = &bytes[in_place..];
        }
        self.buffer[..bytes.len()].copy_from_slice(bytes);
        self.buffered = bytes.len();
    }

    /// The digest of everything fed so far (the hasher can go on).
    pub fn digest(&self) -> u64 {
        if self.total <= SHORT_MAX as u64 {
            return xxh3_64(&self.buffer[..self.buffered]);
        }
        let mut acc = self.acc;
        let mut stripe_in_block = self.stripe_in_block;
        let pending = &self.buffer[..self.buffered];
        // Every buffered stripe but the last, which is the input's last stripe below.
        let before_last = (pending.len() - 1) / STRIPE * STRIPE;
        accumulate_stripes(&mut acc, &mut stripe_in_block, &pending[..before_last]);
        let mut last = [0u8; STRIPE];
        if pending.len() >= STRIPE {
            last.copy_from_slice(&pending[pending.len() - STRIPE..]);
        } else {
            let from_before = STRIPE - pending.len();
            last[..from_before].copy_from_slice(&self.before_buffer[pending.len()..]);
            last[from_before..].copy_from_slice(pending);
        }
        accumulate_scalar(&mut acc, &last, SECRET[SECRET.len() - STRIPE - 7..].first_chunk().expect("the secret is long enough"));
        let mut result = self.total.wrapping_mul(PRIME64_1);
        let merge = &SECRET[11..11 + STRIPE];
        for i in 0..4 {
            let a = (acc[2 * i] ^ le_u64(merge, 2 * i)) as u128;
            let b = (acc[2 * i + 1] ^ le_u64(merge, 2 * i + 1)) as u128;
            let product = a.wrapping_mul(b);
            result = result.wrapping_add(product as u64 ^ (product >> 64) as u64);
        }
        avalanche(result)
    }
}

impl Default for Xxh3 {
    fn default() -> Xxh3 {
        Xxh3::new()
    }
}

/// The `i`th little-endian u64 of `bytes`.
fn le_u64(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(*bytes[8 * i..].first_chunk().expect("inside the secret or a stripe"))
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(PRIME_MX1);
    h ^ (h >> 32)
}

/// Accumulates whole stripes of `data` (a multiple of 64 bytes), scrambling after each block.
fn accumulate_stripes(acc: &mut [u64; 8], stripe_in_block: &mut usize, data: &[u8]) {
    debug_assert_eq!(data.len() % STRIPE, 0);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just checked).
        unsafe { avx2::accumulate_stripes(acc, stripe_in_block, data) };
        return;
    }
    accumulate_stripes_scalar(acc, stripe_in_block, data);
}

fn accumulate_stripes_scalar(acc: &mut [u64; 8], stripe_in_block: &mut usize, data: &[u8]) {
    let mut local = *acc;
    for stripe in data.chunks_exact(STRIPE) {
        let secret = SECRET[*stripe_in_block * 8..].first_chunk().expect("a block's stripes fit the secret");
        accumulate_scalar(&mut local, stripe.try_into().expect("64 bytes"), secret);
        *stripe_in_block += 1;
        if *stripe_in_block == STRIPES_PER_BLOCK {
            let secret_end = &SECRET[SECRET.len() - STRIPE..];
            for (i, a) in local.iter_mut().enumerate() {
                *a = (*a ^ (*a >> 47) ^ le_u64(secret_end, i)).wrapping_mul(PRIME32_1);
            }
            *stripe_in_block = 0;
        }
    }
    *acc = local;
}

fn accumulate_scalar(acc: &mut [u64; 8], stripe: &[u8; STRIPE], secret: &[u8; STRIPE]) {
    for i in 0..8 {
        let data = le_u64(stripe, i);
        let keyed = data ^ le_u64(secret, i);
        acc[i ^ 1] = acc[i ^ 1].wrapping_add(data);
        acc[i] = acc[i].wrapping_add((keyed & 0xFFFF_FFFF) * (keyed >> 32));
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{PRIME32_1, SECRET, STRIPE, STRIPES_PER_BLOCK};
    use std::arch::x86_64::*;

    /// How far ahead of the stripe being hashed the loop asks for data: one 4 KiB page.
    /// A checked pack get hashes values straight out of a file mapping (src/pack/view.rs), whose
    /// pages are 4 KiB apart in physical memory and each its own TLB entry; the CPU's own
    /// prefetchers do not run ahead across a page boundary, so without this each new page started
    /// cold. Asking a page ahead took 1 MiB checked pack gets from 0.87× fs's `pread` to 1.26×
    /// (distances of 0, 512 B … 8 KiB measured: docs/performance/pack-durable.md, session 31).
    const PREFETCH_DISTANCE: usize = 4096;

    /// `super::accumulate_stripes` with the accumulators in two AVX2 registers throughout.
    /// Prefetches only inside `data`: a short input hashed from the cache must not pull in the
    /// memory after it.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn accumulate_stripes(acc: &mut [u64; 8], stripe_in_block: &mut usize, data: &[u8]) {
        let (ahead, rest) = data.split_at(data.len().saturating_sub(PREFETCH_DISTANCE));
        // SAFETY: the CPU has AVX2 (the caller's promise); both parts are whole stripes, since
        // `data` and the distance are.
        unsafe {
            accumulate::<true>(acc, stripe_in_block, ahead);
            accumulate::<false>(acc, stripe_in_block, rest);
        }
    }

    /// The loop itself, asking for the data `PREFETCH_DISTANCE` ahead when `PREFETCH`.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn accumulate<const PREFETCH: bool>(acc: &mut [u64; 8], stripe_in_block: &mut usize, data: &[u8]) {
        // SAFETY (all the loads and stores below): unaligned loads of 32 bytes inside `data`'s
        // stripes and the 192-byte secret (a block's last stripe secret ends at byte 120 + 64),
        // and of `acc`'s 64 bytes; the CPU has AVX2 (the caller's promise).
        unsafe {
            let acc_ptr = acc.as_mut_ptr().cast::<__m256i>();
            let (mut a0, mut a1) = (_mm256_loadu_si256(acc_ptr), _mm256_loadu_si256(acc_ptr.add(1)));
            let secret = SECRET.as_ptr();
            let scramble0 = _mm256_loadu_si256(secret.add(SECRET.len() - STRIPE).cast());
            let scramble1 = _mm256_loadu_si256(secret.add(SECRET.len() - STRIPE + 32).cast());
            let prime = _mm256_set1_epi32(PRIME32_1 as i32);
            let mut n = *stripe_in_block;
            for stripe in data.chunks_exact(STRIPE) {
                if PREFETCH {
                    // A hint only: it never faults, and the address is inside `data`.
                    _mm_prefetch::<_MM_HINT_T0>(stripe.as_ptr().wrapping_add(PREFETCH_DISTANCE).cast());
                }
                let d0 = _mm256_loadu_si256(stripe.as_ptr().cast());
                let d1 = _mm256_loadu_si256(stripe.as_ptr().add(32).cast());
                let k0 = _mm256_xor_si256(d0, _mm256_loadu_si256(secret.add(n * 8).cast()));
                let k1 = _mm256_xor_si256(d1, _mm256_loadu_si256(secret.add(n * 8 + 32).cast()));
                // acc[i ^ 1] += data[i]: swap the two u64 of each 128-bit lane.
                a0 = _mm256_add_epi64(a0, _mm256_shuffle_epi32::<0b01_00_11_10>(d0));
                a1 = _mm256_add_epi64(a1, _mm256_shuffle_epi32::<0b01_00_11_10>(d1));
                // acc[i] += low32(keyed) * high32(keyed)
                a0 = _mm256_add_epi64(a0, _mm256_mul_epu32(k0, _mm256_srli_epi64::<32>(k0)));
                a1 = _mm256_add_epi64(a1, _mm256_mul_epu32(k1, _mm256_srli_epi64::<32>(k1)));
                n += 1;
                if n == STRIPES_PER_BLOCK {
                    a0 = scramble(a0, scramble0, prime);
                    a1 = scramble(a1, scramble1, prime);
                    n = 0;
                }
            }
            *stripe_in_block = n;
            _mm256_storeu_si256(acc_ptr, a0);
            _mm256_storeu_si256(acc_ptr.add(1), a1);
        }
    }

    /// acc = (acc ^ (acc >> 47) ^ secret) * PRIME32_1, in 64 bits, from 32×32-bit products.
    #[target_feature(enable = "avx2")]
    fn scramble(acc: __m256i, secret: __m256i, prime: __m256i) -> __m256i {
        let keyed = _mm256_xor_si256(_mm256_xor_si256(acc, _mm256_srli_epi64::<47>(acc)), secret);
        let low = _mm256_mul_epu32(keyed, prime);
        let high = _mm256_mul_epu32(_mm256_srli_epi64::<32>(keyed), prime);
        _mm256_add_epi64(low, _mm256_slli_epi64::<32>(high))
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

    /// Every length up to eight blocks and a half, split at every kind of boundary the hasher
    /// has (the short-input limit, its buffer, stripes, blocks), gives the one-shot hash.
    #[test]
    fn every_length_in_every_split_equals_one_shot() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let mut reused = Xxh3::new();
        reused.update(&data[1000..5321]);
        for len in 0..=data.len() {
            let whole = xxh3_64(&data[..len]);
            let splits = [
                vec![len],
                vec![1, len],
                vec![63, 1, 64, len],
                vec![240, 1, len],
                vec![241, len],
                vec![256, len],
                vec![100, 200, 300, len],
                vec![1024, 1, 1023, len],
            ];
            for split in splits {
                // A new hasher, and one reset after hashing other input (the runner reuses one).
                let mut h = Xxh3::new();
                reused.reset();
                let mut at = 0;
                for cut in split {
                    let to = cut.clamp(at, len);
                    h.update(&data[at..to]);
                    reused.update(&data[at..to]);
                    at = to;
                }
                h.update(&data[at..len]);
                reused.update(&data[at..len]);
                assert_eq!(h.digest(), whole, "length {len}");
                assert_eq!(reused.digest(), whole, "length {len}, after a reset");
            }
        }
    }

    /// The AVX2 loop and the portable one give the same accumulators (a machine without AVX2
    /// takes the portable one). 12,800 bytes: longer than the prefetch distance, so both the
    /// prefetching part of the AVX2 loop and its tail run.
    #[test]
    fn the_avx2_and_portable_loops_agree() {
        let data: Vec<u8> = (0..64 * 200u32).map(|i| (i.wrapping_mul(0x9E37_79B1) >> 7) as u8).collect();
        for start_stripe in [0, 5, 15] {
            let (mut a, mut na) = (INITIAL_ACCUMULATORS, start_stripe);
            let (mut b, mut nb) = (INITIAL_ACCUMULATORS, start_stripe);
            accumulate_stripes(&mut a, &mut na, &data);
            accumulate_stripes_scalar(&mut b, &mut nb, &data);
            assert_eq!((a, na), (b, nb), "from stripe {start_stripe} of a block");
        }
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
