//! Says where and how a read-back object differs from what was put: the slow path of
//! verification, taken only when a get's digest did not match.
//!
//! The `Verifier` is a `Write` sink that regenerates the expected bytes block by block and
//! compares as the object streams in, so it never holds an object (a 1 GiB get costs one 4 KiB
//! buffer). It keeps only what naming the damage needs — the first header, the first and last
//! differing offsets, whether every differing byte read as zero, the length — and reads on past
//! the first difference to the end, because "one byte flipped" and "a range zeroed" can only be
//! told apart by what follows.
//!
//! It must never decide from less than what was read: a kind is given only when the bytes show
//! it, and anything else is `Other` with the facts in words.

use super::keys::key_name;
use super::payload::{PayloadSpec, BLOCK_BYTES, HEADER_BYTES};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// What kind of damage an object shows. Names are stable: reports and scripts key on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DamageKind {
    /// Same length as put; some bytes differ (and not all of them read as zero).
    Flipped,
    /// Shorter than put; every byte that arrived is right.
    Truncated,
    /// Longer than put; every byte of the object that was put is right.
    Extended,
    /// Same length as put; every differing byte reads as zero (a zero-filled range).
    Zeroed,
    /// The content is, byte for byte, another key's object (`Mismatch::other_key`).
    Swapped,
    /// Anything else (wrong length and wrong bytes, a second read that matched, a failed re-read);
    /// the detail says what was seen. Reports written before kinds existed read as this.
    #[default]
    Other,
}

impl DamageKind {
    /// The stable name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            DamageKind::Flipped => "flipped",
            DamageKind::Truncated => "truncated",
            DamageKind::Extended => "extended",
            DamageKind::Zeroed => "zeroed",
            DamageKind::Swapped => "swapped",
            DamageKind::Other => "other",
        }
    }
}

/// Where and how a read-back object differs from what was put.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Key name.
    pub key: String,
    /// First differing byte offset (for `truncated` the length that arrived, for `extended` the
    /// length that was put, for `swapped` 0).
    pub offset_bytes: u64,
    /// What differed, in words.
    pub detail: String,
    /// What kind of damage.
    #[serde(default)]
    pub kind: DamageKind,
    /// Length in bytes of the object that was put, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_bytes: Option<u64>,
    /// Length in bytes of what the get returned, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_bytes: Option<u64>,
    /// `swapped`: the key whose object was found instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_key: Option<String>,
}

impl Mismatch {
    /// A mismatch of kind `other` with no lengths known.
    pub fn other(key: &str, offset_bytes: u64, detail: String) -> Mismatch {
        Mismatch { key: key.into(), offset_bytes, detail, kind: DamageKind::Other, expected_bytes: None, actual_bytes: None, other_key: None }
    }

    /// One line: key, kind, offset and detail.
    pub fn line(&self) -> String {
        format!("{}: {}", self.short(), self.detail)
    }

    /// Key, kind and offset: "obj-0000000001 flipped at byte 5000".
    pub fn short(&self) -> String {
        format!("{} {} at byte {}", self.key, self.kind.name(), self.offset_bytes)
    }
}

/// The object the bytes are compared against.
#[derive(Debug, Clone, Copy)]
struct Expected {
    key: u64,
    generation: u32,
    len: u64,
}

/// Byte-by-byte verification of one object against a regenerated copy; keeps nothing but a few
/// counters.
pub struct Verifier<'s> {
    spec: &'s PayloadSpec,
    key: u64,
    generation_hint: u32,
    head: Vec<u8>,
    expected: Option<Expected>,
    /// Bytes received, all of them (also past the expected length).
    seen: u64,
    /// First differing offset with the expected and received byte there.
    first: Option<(u64, u8, u8)>,
    /// Last differing offset.
    last: u64,
    /// Differing bytes within the expected length.
    differing: u64,
    /// Whether every differing byte read as zero.
    all_zero: bool,
}

impl<'s> Verifier<'s> {
    /// A checker for `key`; `generation_hint` (the version recorded at put time) is compared
    /// against when the object does not carry a readable header of its own.
    pub fn new(spec: &'s PayloadSpec, key: u64, generation_hint: u32) -> Self {
        Verifier {
            spec,
            key,
            generation_hint,
            head: Vec::with_capacity(HEADER_BYTES),
            expected: None,
            seen: 0,
            first: None,
            last: 0,
            differing: 0,
            all_zero: true,
        }
    }

    /// Decides what to compare against once the header (or the whole small object) is in: this
    /// key's version named by the header, another key's object whose header it carries (a swap
    /// is then confirmed byte by byte), or, for a damaged header, the version recorded at put.
    fn start(&mut self) {
        let mut expected = Expected { key: self.key, generation: self.generation_hint, len: 0 };
        if self.head.len() >= HEADER_BYTES {
            let claimed = u64::from_le_bytes(self.head[..8].try_into().expect("8 bytes"));
            if let Some(g) = self.spec.generation_in(self.key, &self.head) {
                expected.generation = g;
            } else if let Some(g) = self.spec.generation_in(claimed, &self.head).filter(|_| claimed != self.key) {
                expected = Expected { key: claimed, generation: g, len: 0 };
            }
        }
        expected.len = self.spec.size_of(expected.key, expected.generation);
        self.expected = Some(expected);
        let head = std::mem::take(&mut self.head);
        self.compare(&head);
    }

    fn compare(&mut self, data: &[u8]) {
        let Some(e) = self.expected else { return };
        let mut want = [0u8; BLOCK_BYTES];
        let mut done = 0;
        while done < data.len() {
            let offset = self.seen;
            if offset >= e.len {
                self.seen += (data.len() - done) as u64; // past the end: only the length matters
                return;
            }
            let n = (data.len() - done).min(BLOCK_BYTES).min((e.len - offset) as usize);
            self.spec.fill_at(e.key, e.generation, offset, &mut want[..n]);
            let got = &data[done..done + n];
            if want[..n] != *got {
                for i in (0..n).filter(|&i| want[i] != got[i]) {
                    let at = offset + i as u64;
                    self.first.get_or_insert((at, want[i], got[i]));
                    self.last = at;
                    self.differing += 1;
                    self.all_zero &= got[i] == 0;
                }
            }
            done += n;
            self.seen += n as u64;
        }
    }

    /// Ends the object: names the damage, if any.
    pub fn finish(mut self) -> Result<(), Mismatch> {
        if self.expected.is_none() {
            self.start();
        }
        let e = self.expected.expect("started");
        let (seen, name) = (self.seen, key_name(self.key));
        let mut m = Mismatch::other(&name, 0, String::new());
        (m.expected_bytes, m.actual_bytes) = (Some(e.len), Some(seen));
        if e.key != self.key {
            // The length this key was put with, not the other key's.
            m.expected_bytes = Some(self.spec.size_of(self.key, self.generation_hint));
            let other = key_name(e.key);
            if self.first.is_none() && seen == e.len {
                m.kind = DamageKind::Swapped;
                m.detail = format!("holds the object of key {other} (version {}), byte for byte", e.generation);
                m.other_key = Some(other);
            } else {
                m.detail = format!("starts with the header of key {other}, but is not that object either ({seen} bytes, {} expected)", e.len);
            }
            return Err(m);
        }
        match (self.first, seen.cmp(&e.len)) {
            (None, std::cmp::Ordering::Equal) => return Ok(()),
            (None, std::cmp::Ordering::Less) => {
                (m.kind, m.offset_bytes) = (DamageKind::Truncated, seen);
                m.detail = format!("object is {seen} bytes, {} were put; the bytes that arrived are right", e.len);
            }
            (None, std::cmp::Ordering::Greater) => {
                (m.kind, m.offset_bytes) = (DamageKind::Extended, e.len);
                m.detail = format!("object is {seen} bytes, {} were put; the first {} are right", e.len, e.len);
            }
            (Some((at, want, got)), length) => {
                m.offset_bytes = at;
                let span = format!("{} byte(s) differ in bytes {at}..={}", self.differing, self.last);
                m.detail = if length != std::cmp::Ordering::Equal {
                    format!("object is {seen} bytes, {} were put, and {span}", e.len)
                } else if self.all_zero && self.differing > 1 {
                    m.kind = DamageKind::Zeroed;
                    format!("{span}, every one of them read as zero")
                } else {
                    m.kind = DamageKind::Flipped;
                    format!("{span}; the first: expected {want:#04x}, got {got:#04x}")
                };
            }
        }
        Err(m)
    }
}

impl Write for Verifier<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        if self.expected.is_none() {
            let take = (HEADER_BYTES - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.head.len() == HEADER_BYTES {
                self.start();
            }
        }
        self.compare(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::size::SizeSpec;
    use std::io::Read;

    fn object(s: &PayloadSpec, key: u64) -> Vec<u8> {
        let mut out = Vec::new();
        s.reader(key, 0).read_to_end(&mut out).unwrap();
        out
    }

    fn check(s: &PayloadSpec, key: u64, data: &[u8]) -> Mismatch {
        let mut v = s.verifier(key, 0);
        for chunk in data.chunks(1000) {
            v.write_all(chunk).unwrap();
        }
        v.finish().unwrap_err()
    }

    #[test]
    fn names_each_kind_of_damage_with_its_offset() {
        let s = PayloadSpec::new(3, 0.0, SizeSpec::Fixed { bytes: 20_000 });
        let good = object(&s, 7);

        let mut flipped = good.clone();
        flipped[5000] ^= 0xff;
        let m = check(&s, 7, &flipped);
        assert_eq!((m.kind, m.offset_bytes, m.key.as_str()), (DamageKind::Flipped, 5000, "obj-0000000007"), "{m:?}");

        let m = check(&s, 7, &good[..12_345]);
        assert_eq!((m.kind, m.offset_bytes, m.expected_bytes, m.actual_bytes), (DamageKind::Truncated, 12_345, Some(20_000), Some(12_345)));

        let mut zeroed = good.clone();
        zeroed[100..4196].fill(0);
        let m = check(&s, 7, &zeroed);
        assert_eq!((m.kind, m.offset_bytes), (DamageKind::Zeroed, 100), "{m:?}");

        let m = check(&s, 7, &object(&s, 9));
        assert_eq!((m.kind, m.offset_bytes, m.other_key.as_deref()), (DamageKind::Swapped, 0, Some("obj-0000000009")), "{m:?}");

        let mut longer = good.clone();
        longer.extend_from_slice(b"tail");
        assert_eq!(check(&s, 7, &longer).kind, DamageKind::Extended);

        let mut header = good.clone();
        header[3] ^= 1; // a damaged header is compared against the recorded version, not given up on
        assert_eq!((check(&s, 7, &header).kind, check(&s, 7, &header).offset_bytes), (DamageKind::Flipped, 3));

        let mut both = good[..15_000].to_vec();
        both[10] ^= 1;
        assert_eq!(check(&s, 7, &both).kind, DamageKind::Other, "wrong length and wrong bytes is not one kind");
        let mut swapped_and_flipped = object(&s, 9);
        swapped_and_flipped[900] ^= 1;
        assert_eq!(check(&s, 7, &swapped_and_flipped).kind, DamageKind::Other);
    }

    #[test]
    fn small_objects_and_empty_reads_are_named_too() {
        let s = PayloadSpec::new(3, 0.0, SizeSpec::Fixed { bytes: 10 });
        let good = object(&s, 1);
        assert_eq!(s.verify(1, 0, &good), Ok(()));
        assert_eq!(check(&s, 1, &[]).kind, DamageKind::Truncated);
        assert_eq!(check(&s, 1, &good[..4]).offset_bytes, 4);
    }
}
