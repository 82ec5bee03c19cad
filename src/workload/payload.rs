//! Seeded payloads made at memory speed: every object's bytes are a pure function of
//! (seed, key, generation), so a get can be checked without keeping anything in memory.
//!
//! Layout, as fio's verify headers: the object is cut into 4 KiB blocks; each block starts with a
//! 16-byte header (key index, generation, a check word unique to the block) and continues with
//! bytes copied from a 4 MiB random pool at an offset chosen by that block's hash, then zeros for
//! the compressible fraction. Making a block is a memory copy, so generation costs far less than
//! the storage it feeds; every block is unique (no two blocks of a run dedupe) and, at
//! compressibility 0, incompressible to block compressors. Objects under 16 bytes hold a prefix
//! of the header. The first block's header says which version a reader got, so racing puts and
//! gets verify correctly.
//!
//! Reads are checked fast: the put records the object's xxh3 digest (`PayloadReader::digest`),
//! the get hashes what it receives (`DigestSink`) and compares. Only a mismatch, or a reader that
//! got a version other than the one recorded, regenerates the expected bytes (`Verifier`), which
//! also tells at which byte and how the object differs (`verify`).

pub use super::verify::{DamageKind, Mismatch, Verifier};
use crate::hash::{xxh3_64, Xxh3};
use crate::workload::size::SizeSpec;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes of the header at the start of every block.
pub const HEADER_BYTES: usize = 16;
/// Bytes per generated block (the unit of headers and of compressibility).
pub const BLOCK_BYTES: usize = 4096;
/// Bytes of random data blocks are copied from, per seed.
const POOL_BYTES: usize = 4 << 20;

/// How a case's payloads are made.
#[derive(Debug, Clone)]
pub struct PayloadSpec {
    /// Seed of the run.
    pub seed: u64,
    /// Fraction of each block that is zeros.
    pub compressibility: f64,
    /// Object sizes.
    pub size: SizeSpec,
    /// Random bytes blocks are copied from: `POOL_BYTES` plus one block, so any offset below
    /// `POOL_BYTES` has a whole block after it.
    pool: Arc<[u8]>,
}

fn mix(a: u64, b: u64, c: u64, d: u64) -> u64 {
    let mut bytes = [0u8; 32];
    for (i, word) in [a, b, c, d].iter().enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
    xxh3_64(&bytes)
}

/// The random pool of `seed`, made once per process.
fn pool(seed: u64) -> Arc<[u8]> {
    static POOLS: OnceLock<Mutex<HashMap<u64, Arc<[u8]>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().expect("payload pool lock");
    pools
        .entry(seed)
        .or_insert_with(|| {
            let mut bytes = vec![0u8; POOL_BYTES + BLOCK_BYTES];
            Xoshiro256PlusPlus::seed_from_u64(mix(seed, 0x506F_6F6C, 0, 0)).fill_bytes(&mut bytes);
            bytes.into()
        })
        .clone()
}

impl PayloadSpec {
    /// The payloads of a run with `seed`.
    pub fn new(seed: u64, compressibility: f64, size: SizeSpec) -> Self {
        PayloadSpec { seed, compressibility, size, pool: pool(seed) }
    }

    /// Size in bytes of version `generation` of object `key`.
    pub fn size_of(&self, key: u64, generation: u32) -> u64 {
        match self.size {
            SizeSpec::Fixed { bytes } => bytes,
            SizeSpec::Uniform { min_bytes, max_bytes } => min_bytes + mix(self.seed, key, generation as u64, 0x5172) % (max_bytes - min_bytes + 1),
            SizeSpec::LogUniform { min_bytes, max_bytes } => {
                let u = (mix(self.seed, key, generation as u64, 0x5172) >> 11) as f64 / (1u64 << 53) as f64;
                let (lo, hi) = ((min_bytes.max(1)) as f64, (max_bytes.max(1)) as f64);
                ((lo.ln() + u * (hi.ln() - lo.ln())).exp() as u64).clamp(min_bytes, max_bytes)
            }
        }
    }

    /// Bytes of each block taken from the pool (the rest are zeros); at least the header.
    fn random_per_block(&self) -> usize {
        (((1.0 - self.compressibility) * BLOCK_BYTES as f64).round() as usize).clamp(HEADER_BYTES, BLOCK_BYTES)
    }

    /// Header of `block` of version `generation` of `key`, and the pool offset of its body.
    pub(super) fn block_header(&self, key: u64, generation: u32, block: u64) -> ([u8; HEADER_BYTES], usize) {
        let h = mix(self.seed, key, generation as u64, block);
        let mut header = [0u8; HEADER_BYTES];
        header[..8].copy_from_slice(&key.to_le_bytes());
        header[8..12].copy_from_slice(&generation.to_le_bytes());
        header[12..].copy_from_slice(&(h as u32).to_le_bytes());
        (header, ((h >> 32) as usize) % POOL_BYTES)
    }

    /// Writes bytes `offset..offset + out.len()` of version `generation` of `key` into `out`
    /// (the caller keeps the range inside the object).
    pub fn fill_at(&self, key: u64, generation: u32, offset: u64, out: &mut [u8]) {
        let random = self.random_per_block();
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let block = at / BLOCK_BYTES as u64;
            let within = (at % BLOCK_BYTES as u64) as usize;
            let n = (BLOCK_BYTES - within).min(out.len() - done);
            let (header, pool_at) = self.block_header(key, generation, block);
            let dst = &mut out[done..done + n];
            for (i, byte) in dst.iter_mut().enumerate() {
                let pos = within + i;
                if pos >= HEADER_BYTES {
                    // Past the header: one copy of the random part, one fill of the zero part.
                    let rand_end = random.saturating_sub(within).min(n);
                    if i < rand_end {
                        dst[i..rand_end].copy_from_slice(&self.pool[pool_at + pos..pool_at + within + rand_end]);
                    }
                    dst[rand_end.max(i)..].fill(0);
                    break;
                }
                *byte = header[pos];
            }
            done += n;
        }
    }

    /// A reader producing version `generation` of object `key`, hashing what it produces.
    pub fn reader(&self, key: u64, generation: u32) -> PayloadReader<'_> {
        PayloadReader { spec: self, key, generation, len: self.size_of(key, generation), pos: 0, hasher: Xxh3::new() }
    }

    /// The xxh3 digest of version `generation` of `key`, regenerated (the slow path, for a reader
    /// that got a version other than the one whose digest was recorded).
    pub fn digest_of(&self, key: u64, generation: u32) -> u64 {
        let mut reader = self.reader(key, generation);
        std::io::copy(&mut reader, &mut std::io::sink()).expect("generation never fails");
        reader.digest().expect("read to the end")
    }

    /// The version an object says it is, from its first bytes: `None` when fewer than a header's
    /// bytes arrived, or when the header is not one this run wrote for `key`.
    pub fn generation_in(&self, key: u64, head: &[u8]) -> Option<u32> {
        let head: &[u8; HEADER_BYTES] = head.get(..HEADER_BYTES)?.try_into().ok()?;
        let generation = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        (self.block_header(key, generation, 0).0 == *head).then_some(generation)
    }

    /// Checks a complete object read back for `key` byte by byte; `generation_hint` is used for
    /// objects too small to carry a whole header.
    pub fn verify(&self, key: u64, generation_hint: u32, data: &[u8]) -> Result<(), Mismatch> {
        let mut v = self.verifier(key, generation_hint);
        v.write_all(data).expect("the verifier never fails a write");
        v.finish()
    }

    /// A streaming byte-by-byte checker for `key` (a `Write` sink that keeps nothing), which says
    /// where and how an object differs.
    pub fn verifier(&self, key: u64, generation_hint: u32) -> Verifier<'_> {
        Verifier::new(self, key, generation_hint)
    }
}

/// Generates one object's bytes on the fly and hashes them as it goes.
pub struct PayloadReader<'s> {
    spec: &'s PayloadSpec,
    key: u64,
    generation: u32,
    len: u64,
    pos: u64,
    hasher: Xxh3,
}

impl PayloadReader<'_> {
    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The xxh3 digest of the whole object, once every byte has been read.
    pub fn digest(&self) -> Option<u64> {
        (self.pos == self.len).then(|| self.hasher.digest())
    }
}

impl Read for PayloadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len - self.pos).min(buf.len() as u64) as usize;
        self.spec.fill_at(self.key, self.generation, self.pos, &mut buf[..n]);
        self.hasher.update(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

/// What a get delivered, as far as checking needs: length, digest and the first header's bytes.
pub struct DigestSink {
    hasher: Xxh3,
    len: u64,
    head: [u8; HEADER_BYTES],
}

impl Default for DigestSink {
    fn default() -> Self {
        DigestSink { hasher: Xxh3::new(), len: 0, head: [0; HEADER_BYTES] }
    }
}

impl DigestSink {
    /// Forgets what was received, as a new sink would.
    pub fn reset(&mut self) {
        self.hasher.reset();
        self.len = 0;
    }

    /// Bytes received.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The xxh3 digest of everything received.
    pub fn digest(&self) -> u64 {
        self.hasher.digest()
    }

    /// The first bytes received (up to a header).
    pub fn head(&self) -> &[u8] {
        &self.head[..(self.len as usize).min(HEADER_BYTES)]
    }
}

impl Write for DigestSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.len < HEADER_BYTES as u64 {
            let at = self.len as usize;
            let n = (HEADER_BYTES - at).min(buf.len());
            self.head[at..at + n].copy_from_slice(&buf[..n]);
        }
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bytes: u64, compressibility: f64) -> PayloadSpec {
        PayloadSpec::new(9, compressibility, SizeSpec::Fixed { bytes })
    }

    fn generate(s: &PayloadSpec, key: u64, generation: u32) -> Vec<u8> {
        let mut out = Vec::new();
        s.reader(key, generation).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn round_trips_and_catches_every_kind_of_damage() {
        for size in [0u64, 1, 15, 16, 17, 4095, 4096, 10_000, 3 * (1 << 20) + 7] {
            let s = spec(size, 0.0);
            let data = generate(&s, 5, 2);
            assert_eq!(data.len() as u64, size);
            assert_eq!(s.verify(5, 2, &data), Ok(()), "size {size}");
            if size > 0 {
                let mut flipped = data.clone();
                let at = data.len() / 2;
                flipped[at] ^= 1;
                assert_eq!(s.verify(5, 2, &flipped).unwrap_err().offset_bytes, at as u64);
                assert!(s.verify(5, 2, &data[..data.len() - 1]).is_err(), "truncation at {size}");
            }
            let mut longer = data.clone();
            longer.push(7);
            assert!(s.verify(5, 2, &longer).is_err(), "extension at {size}");
        }
        let s = spec(100, 0.0);
        assert_eq!(s.verify(6, 2, &generate(&s, 5, 2)).unwrap_err().other_key.as_deref(), Some("obj-0000000005"));
        assert_eq!(s.verify(5, 0, &generate(&s, 5, 3)), Ok(()), "the header says which version it is");
    }

    #[test]
    fn every_block_is_unique_and_random_at_compressibility_zero() {
        let s = spec(1 << 20, 0.0);
        let data = generate(&s, 1, 0);
        let mut seen = std::collections::HashSet::new();
        for block in data.chunks(BLOCK_BYTES) {
            assert!(seen.insert(xxh3_64(block)), "a block repeats");
            assert!(block[HEADER_BYTES..].iter().filter(|&&b| b == 0).count() < 64, "no runs of zeros");
        }
        let other = generate(&s, 2, 0);
        assert!(other.chunks(BLOCK_BYTES).all(|b| !seen.contains(&xxh3_64(b))), "no block of another object dedupes");
    }

    #[test]
    fn compressibility_zeroes_part_of_each_block() {
        let data = generate(&spec(8192, 0.5), 1, 0);
        assert!(data[2048..4096].iter().all(|&b| b == 0) && data[6144..].iter().all(|&b| b == 0));
        assert!(data[4096 + HEADER_BYTES..6144].iter().filter(|&&b| b == 0).count() < 100);
    }

    #[test]
    fn reads_in_any_chunking_give_the_same_bytes_and_digest() {
        let s = spec(100_003, 0.25);
        let whole = generate(&s, 3, 1);
        let mut chunked = Vec::new();
        let mut reader = s.reader(3, 1);
        let mut buf = [0u8; 7];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            chunked.extend_from_slice(&buf[..n]);
        }
        assert_eq!(chunked, whole);
        assert_eq!(reader.digest(), Some(xxh3_64(&whole)));
        assert_eq!(s.digest_of(3, 1), xxh3_64(&whole));

        let mut sink = DigestSink::default();
        for chunk in whole.chunks(1000) {
            sink.write_all(chunk).unwrap();
        }
        assert_eq!((sink.len(), sink.digest()), (whole.len() as u64, xxh3_64(&whole)));
        assert_eq!(s.generation_in(3, sink.head()), Some(1));
        assert_eq!(s.generation_in(4, sink.head()), None, "another key's header is not this key's");

        let mut v = s.verifier(3, 0);
        for chunk in whole.chunks(7) {
            v.write_all(chunk).unwrap();
        }
        assert_eq!(v.finish(), Ok(()));
    }

    #[test]
    fn sizes_from_distributions_stay_in_range() {
        let s = PayloadSpec::new(1, 0.0, SizeSpec::LogUniform { min_bytes: 1000, max_bytes: 1_000_000 });
        let sizes: Vec<u64> = (0..1000).map(|k| s.size_of(k, 0)).collect();
        assert!(sizes.iter().all(|&b| (1000..=1_000_000).contains(&b)));
        assert!(sizes.iter().filter(|&&b| b < 10_000).count() > 250, "a third of a log-uniform spread is below 10 kB");
    }
}
