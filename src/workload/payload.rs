//! Seeded payloads: every object's bytes are a function of (seed, key, generation), so a get can be
//! checked against what was put without keeping anything in memory.
//!
//! Layout: the first 16 bytes are a header (key index, generation, check word) so a reader can tell
//! which version it got even when puts and gets race; the rest is generated in 4 KiB blocks, each
//! `1 - compressibility` random bytes followed by zeros. Objects under 16 bytes hold a prefix of
//! the header. This module never allocates more than one block per stream.

use crate::job::SizeSpec;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::io::{Read, Write};
use xxhash_rust::xxh3::xxh3_64;

/// Bytes of the version header at the start of every object.
pub const HEADER_BYTES: usize = 16;
/// Bytes per generated block (the unit of compressibility).
pub const BLOCK_BYTES: usize = 4096;

/// How a case's payloads are made.
#[derive(Debug, Clone, Copy)]
pub struct PayloadSpec {
    /// Seed of the run.
    pub seed: u64,
    /// Fraction of each block that is zeros.
    pub compressibility: f64,
    /// Object sizes.
    pub size: SizeSpec,
}

/// Where and how a read-back object differs from what was put.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Mismatch {
    /// Key name.
    pub key: String,
    /// First differing byte offset.
    pub offset_bytes: u64,
    /// What differed.
    pub detail: String,
}

fn mix(parts: &[u64]) -> u64 {
    let bytes: Vec<u8> = parts.iter().flat_map(|p| p.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

impl PayloadSpec {
    /// Size in bytes of version `generation` of object `key`.
    pub fn size_of(&self, key: u64, generation: u32) -> u64 {
        match self.size {
            SizeSpec::Fixed { bytes } => bytes,
            SizeSpec::Uniform { min_bytes, max_bytes } => {
                min_bytes + mix(&[self.seed, key, generation as u64, 0x5172]) % (max_bytes - min_bytes + 1)
            }
            SizeSpec::LogUniform { min_bytes, max_bytes } => {
                let u = (mix(&[self.seed, key, generation as u64, 0x5172]) >> 11) as f64 / (1u64 << 53) as f64;
                let (lo, hi) = ((min_bytes.max(1)) as f64, (max_bytes.max(1)) as f64);
                ((lo.ln() + u * (hi.ln() - lo.ln())).exp() as u64).clamp(min_bytes, max_bytes)
            }
        }
    }

    fn header(&self, key: u64, generation: u32) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[..8].copy_from_slice(&key.to_le_bytes());
        h[8..12].copy_from_slice(&generation.to_le_bytes());
        h[12..].copy_from_slice(&(mix(&[self.seed, key, generation as u64]) as u32).to_le_bytes());
        h
    }

    /// A reader producing version `generation` of object `key`.
    pub fn reader(&self, key: u64, generation: u32) -> PayloadReader {
        let len = self.size_of(key, generation);
        PayloadReader {
            rng: Xoshiro256PlusPlus::seed_from_u64(mix(&[self.seed, key, generation as u64, 0xB0D7])),
            header: self.header(key, generation),
            random_per_block: ((1.0 - self.compressibility) * BLOCK_BYTES as f64).round() as usize,
            block: Box::new([0u8; BLOCK_BYTES]),
            block_len: 0,
            block_pos: 0,
            pos: 0,
            len,
        }
    }

    /// Checks a complete object read back for `key`; `generation_hint` is used for objects too
    /// small to carry a whole header.
    pub fn verify(&self, key: u64, generation_hint: u32, data: &[u8]) -> Result<(), Mismatch> {
        let mut v = self.verifier(key, generation_hint);
        v.write_all(data).expect("the verifier never fails a write");
        v.finish()
    }

    /// A streaming checker for `key` (a `Write` sink that keeps nothing).
    pub fn verifier(&self, key: u64, generation_hint: u32) -> Verifier {
        Verifier { spec: *self, key, generation_hint, head: Vec::with_capacity(HEADER_BYTES), expected: None, seen: 0, mismatch: None }
    }
}

/// Generates one object's bytes on the fly.
pub struct PayloadReader {
    rng: Xoshiro256PlusPlus,
    header: [u8; HEADER_BYTES],
    random_per_block: usize,
    block: Box<[u8; BLOCK_BYTES]>,
    block_len: usize,
    block_pos: usize,
    pos: u64,
    len: u64,
}

impl PayloadReader {
    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn next_block(&mut self) {
        let block_start = self.pos;
        let n = (self.len - block_start).min(BLOCK_BYTES as u64) as usize;
        let random = self.random_per_block.min(n);
        self.rng.fill_bytes(&mut self.block[..random]);
        self.block[random..n].fill(0);
        if block_start == 0 {
            let h = HEADER_BYTES.min(n);
            self.block[..h].copy_from_slice(&self.header[..h]);
        }
        self.block_len = n;
        self.block_pos = 0;
    }
}

impl Read for PayloadReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut written = 0;
        while written < buf.len() && self.pos < self.len {
            if self.block_pos == self.block_len {
                self.next_block();
            }
            let n = (self.block_len - self.block_pos).min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
            self.block_pos += n;
            self.pos += n as u64;
            written += n;
        }
        Ok(written)
    }
}

/// Streaming verification of one object: compares against a regenerated copy, keeps nothing.
pub struct Verifier {
    spec: PayloadSpec,
    key: u64,
    generation_hint: u32,
    head: Vec<u8>,
    expected: Option<PayloadReader>,
    seen: u64,
    mismatch: Option<Mismatch>,
}

impl Verifier {
    fn fail(&mut self, offset: u64, detail: String) {
        if self.mismatch.is_none() {
            self.mismatch = Some(Mismatch { key: super::keys::key_name(self.key), offset_bytes: offset, detail });
        }
    }

    /// Decides which version to compare against once the header (or the whole small object) is in.
    fn start(&mut self, complete: bool) {
        let generation = if self.head.len() >= HEADER_BYTES {
            let key = u64::from_le_bytes(self.head[..8].try_into().expect("8 bytes"));
            let generation = u32::from_le_bytes(self.head[8..12].try_into().expect("4 bytes"));
            if self.spec.header(key, generation)[12..] != self.head[12..HEADER_BYTES] {
                // A damaged header: point at the first byte that differs from the version we expected.
                let hinted = self.spec.header(self.key, self.generation_hint);
                let at = (0..HEADER_BYTES).find(|&i| hinted[i] != self.head[i]).unwrap_or(12);
                self.fail(at as u64, "the version header is damaged".into());
                return;
            }
            if key != self.key {
                self.fail(0, format!("object holds the header of key index {key}, not {}", self.key));
                return;
            }
            generation
        } else if complete {
            self.generation_hint
        } else {
            return;
        };
        let mut reader = self.spec.reader(self.key, generation);
        let head = std::mem::take(&mut self.head);
        self.compare(&mut reader, &head, 0);
        self.seen = head.len() as u64;
        self.expected = Some(reader);
    }

    fn compare(&mut self, reader: &mut PayloadReader, data: &[u8], offset: u64) {
        let mut expected = [0u8; BLOCK_BYTES];
        let mut done = 0;
        while done < data.len() {
            let want = (data.len() - done).min(BLOCK_BYTES);
            let got = reader.read(&mut expected[..want]).expect("generation never fails");
            if got == 0 {
                self.fail(offset + done as u64, format!("object is longer than the {} bytes that were put", reader.len()));
                return;
            }
            if let Some(i) = (0..got).find(|&i| expected[i] != data[done + i]) {
                self.fail(offset + (done + i) as u64, format!("byte differs: expected {:#04x}, got {:#04x}", expected[i], data[done + i]));
                return;
            }
            done += got;
        }
    }

    /// Ends the object: checks its length and returns the first mismatch, if any.
    pub fn finish(mut self) -> Result<(), Mismatch> {
        if self.expected.is_none() && self.mismatch.is_none() {
            self.start(true);
        }
        if let (Some(reader), None) = (&self.expected, &self.mismatch) {
            if self.seen < reader.len() {
                let (seen, len) = (self.seen, reader.len());
                self.fail(seen, format!("object is {seen} bytes, {len} were put"));
            }
        }
        self.mismatch.map_or(Ok(()), Err)
    }
}

impl Write for Verifier {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.mismatch.is_some() {
            return Ok(buf.len());
        }
        let mut rest = buf;
        if self.expected.is_none() {
            let take = (HEADER_BYTES - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            self.start(false);
        }
        if let Some(mut reader) = self.expected.take() {
            let offset = self.seen;
            self.compare(&mut reader, rest, offset);
            self.seen += rest.len() as u64;
            self.expected = Some(reader);
        }
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
        PayloadSpec { seed: 9, compressibility, size: SizeSpec::Fixed { bytes } }
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
        assert!(s.verify(6, 2, &generate(&s, 5, 2)).unwrap_err().detail.contains("key index 5"));
        assert_eq!(s.verify(5, 0, &generate(&s, 5, 3)), Ok(()), "the header says which version it is");
    }

    #[test]
    fn compressibility_zeroes_part_of_each_block() {
        let data = generate(&spec(8192, 0.5), 1, 0);
        assert!(data[2048..4096].iter().all(|&b| b == 0) && data[6144..].iter().all(|&b| b == 0));
        assert!(data[4096..6144].iter().filter(|&&b| b == 0).count() < 100);
    }

    #[test]
    fn streaming_in_odd_chunks_matches() {
        let s = spec(100_003, 0.25);
        let data = generate(&s, 3, 1);
        let mut v = s.verifier(3, 0);
        for chunk in data.chunks(7) {
            v.write_all(chunk).unwrap();
        }
        assert_eq!(v.finish(), Ok(()));
    }

    #[test]
    fn sizes_from_distributions_stay_in_range() {
        let s = PayloadSpec { seed: 1, compressibility: 0.0, size: SizeSpec::LogUniform { min_bytes: 1000, max_bytes: 1_000_000 } };
        let sizes: Vec<u64> = (0..1000).map(|k| s.size_of(k, 0)).collect();
        assert!(sizes.iter().all(|&b| (1000..=1_000_000).contains(&b)));
        assert!(sizes.iter().filter(|&&b| b < 10_000).count() > 250, "a third of a log-uniform spread is below 10 kB");
    }
}
