//! Key names and key choosers: sequential, uniform and Zipf (YCSB's generator, scrambled so the
//! hot keys are spread over the key space instead of all being the first few).

use serde::Serialize;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The key name of object `index`: fixed width so names sort like indexes.
pub fn key_name(index: u64) -> String {
    let mut name = String::new();
    write_key_name(&mut name, index);
    name
}

/// Writes the key name of object `index` into `out`, replacing what it held (the runner's hot
/// loop reuses one buffer).
pub fn write_key_name(out: &mut String, index: u64) {
    // By hand rather than `write!(out, "obj-{index:010}")`: the formatter took ~600 instructions
    // per operation of the runner's loop (callgrind), this takes a few dozen, two digits a step.
    // At least ten digits, zero-padded, as the format would.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                                2021222324252627282930313233343536373839\
                                4041424344454647484950515253545556575859\
                                6061626364656667686970717273747576777879\
                                8081828384858687888990919293949596979899";
    let mut digits = [b'0'; 20];
    let (mut rest, mut first) = (index, digits.len());
    while rest >= 10 {
        let pair = (rest % 100) as usize * 2;
        rest /= 100;
        first -= 2;
        digits[first..first + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if rest > 0 || first == digits.len() {
        first -= 1;
        digits[first] = b'0' + rest as u8;
    }
    out.clear();
    out.push_str("obj-");
    // SAFETY: every byte of `digits` is an ASCII digit (from PAIRS or b'0' + a value below 10), so
    // valid UTF-8; the checked conversion cost about 120 instructions a key (callgrind).
    out.push_str(unsafe { std::str::from_utf8_unchecked(&digits[first.min(digits.len() - 10)..]) });
}

/// Precomputed constants of a Zipf distribution over `n` items.
#[derive(Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// Constants for `n` items and exponent `theta`; cached because zeta(n) costs O(n).
    pub fn shared(n: u64, theta: f64) -> Arc<Zipf> {
        type Cache = Mutex<HashMap<(u64, u64), Arc<Zipf>>>; // (n, theta bits) → constants
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (n, theta.to_bits());
        if let Some(z) = cache.lock().expect("zipf cache").get(&key) {
            return z.clone();
        }
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let eta = if n <= 1 { 0.0 } else { (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan) };
        let z = Arc::new(Zipf { n, theta, alpha: 1.0 / (1.0 - theta), zetan, eta });
        cache.lock().expect("zipf cache").insert(key, z.clone());
        z
    }

    /// The rank (0 = hottest) for a uniform draw `u` in [0, 1).
    pub fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 || self.n <= 1 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Chooses keys for one worker in one phase.
pub enum KeyChooser {
    /// Key = operation index modulo the key space.
    Sequential,
    /// Uniformly random keys.
    Uniform(Xoshiro256PlusPlus),
    /// Zipf-distributed ranks, scrambled over the key space.
    Zipf(Xoshiro256PlusPlus, Arc<Zipf>),
}

impl KeyChooser {
    /// A chooser for `order`; `stream` separates the random streams of workers and phases.
    pub fn new(order: KeyOrder, objects: u64, seed: u64, stream: u64) -> Self {
        let rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        match order {
            KeyOrder::Sequential => KeyChooser::Sequential,
            KeyOrder::Uniform => KeyChooser::Uniform(rng),
            KeyOrder::Zipf { theta } => KeyChooser::Zipf(rng, Zipf::shared(objects, theta)),
        }
    }

    /// The key index for the operation with global index `op_index`.
    pub fn next(&mut self, op_index: u64, objects: u64) -> u64 {
        match self {
            KeyChooser::Sequential => op_index % objects,
            KeyChooser::Uniform(rng) => rng.next_u64() % objects,
            KeyChooser::Zipf(rng, zipf) => {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let rank = zipf.rank(u);
                crate::hash::xxh3_64(&rank.to_le_bytes()) % objects
            }
        }
    }
}

/// A uniform draw in [0, 1) from a worker's generator, for choosing operations in a mix.
pub fn unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Order in which keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeyOrder {
    /// Key i for the i-th operation (wrapping around).
    Sequential,
    /// Uniformly random keys.
    Uniform,
    /// Zipf-distributed keys (a few hot keys), with exponent theta.
    Zipf {
        /// Exponent in (0, 1); 0.99 is YCSB's default.
        theta: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let mut chooser = KeyChooser::new(KeyOrder::Zipf { theta: 0.99 }, 1000, 7, 0);
        let mut counts = vec![0u32; 1000];
        for i in 0..100_000 {
            counts[chooser.next(i, 1000) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top10: u32 = counts[..10].iter().sum();
        assert!(top10 > 25_000, "the 10 hottest of 1000 keys get over a quarter of accesses: {top10}");
    }

    #[test]
    fn sequential_wraps() {
        let mut c = KeyChooser::new(KeyOrder::Sequential, 10, 1, 0);
        assert_eq!((0..12).map(|i| c.next(i, 10)).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
        assert_eq!(key_name(42), "obj-0000000042");
        let powers = (0..20).flat_map(|p| {
            let n = 10u64.pow(p);
            [n - 1, n, n + 1, n.saturating_mul(5) + 5]
        });
        for n in [7, 42, 99, 100, 105, 9_999_999_999, 10_000_000_000, 123_456_789_012, u64::MAX].into_iter().chain(powers).chain(0..2_000) {
            assert_eq!(key_name(n), format!("obj-{n:010}"), "the hand-written digits match the format for {n}");
        }
    }
}
