//! The pack on-disk format, version 1: the file header and the record header, byte by byte.
//!
//! This module only encodes and validates fixed-size headers; it never touches files. Every
//! multi-byte integer is little-endian. `docs/formats/pack.md` is the human description of the
//! same layout; the two must change together (and `FORMAT_VERSION` with them).

use crate::hash::{xxh3_64, xxh3_64_with_seed};

/// First 8 bytes of every pack data file.
pub const FILE_MAGIC: [u8; 8] = *b"STOWPACK";
/// Version of the layout below; a reader refuses any other version.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the file header, in bytes; the first record starts at this offset.
pub const FILE_HEADER_BYTES: u64 = 64;
/// First 4 bytes of every record header.
pub const RECORD_MAGIC: [u8; 4] = *b"SREC";
/// Size of a record header, in bytes; the key follows it, then the value.
pub const RECORD_HEADER_BYTES: u64 = 56;
/// Longest key accepted, in bytes (UTF-8).
pub const MAX_KEY_BYTES: u32 = 65_535;

/// The header at offset 0 of a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Stripe number (which writer slot appends to this file), also in the file name.
    pub stripe: u32,
    /// Generation: bumped by every compaction; also in the file name.
    pub generation: u64,
    /// Random per-file value that seeds every record header checksum in this file, so a record
    /// copied from another file (or stored as a value) never validates here.
    pub salt: u64,
}

impl FileHeader {
    /// The 64 header bytes: magic, version, stripe, generation, salt, zero padding, checksum.
    pub fn encode(&self) -> [u8; FILE_HEADER_BYTES as usize] {
        let mut b = [0u8; FILE_HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&FILE_MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.stripe.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.salt.to_le_bytes());
        let check = xxh3_64(&b[0..56]);
        b[56..64].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// Parses and checks a file header; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<FileHeader, String> {
        if b.len() < FILE_HEADER_BYTES as usize {
            return Err(format!("file is {} bytes, shorter than the {FILE_HEADER_BYTES}-byte header", b.len()));
        }
        if b[0..8] != FILE_MAGIC {
            return Err("not a stowbench pack file (magic bytes differ)".into());
        }
        if u64_at(b, 56) != xxh3_64(&b[0..56]) {
            return Err("file header checksum does not match (damaged header)".into());
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION {
            return Err(format!("pack format version {version}; this stowbench reads version {FORMAT_VERSION}"));
        }
        Ok(FileHeader { stripe: u32_at(b, 12), generation: u64_at(b, 16), salt: u64_at(b, 24) })
    }
}

/// What a record says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// The key now has the value that follows the key.
    Put = 1,
    /// The key is deleted; the record has no value bytes.
    Tombstone = 2,
}

/// The fixed part of one record. On disk: header, then `key_len` key bytes, then `value_len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Put or tombstone.
    pub kind: RecordKind,
    /// Key length in bytes.
    pub key_len: u32,
    /// Value length in bytes (0 for tombstones).
    pub value_len: u64,
    /// Store-wide sequence number: for one key, the record with the highest seq wins.
    pub seq: u64,
    /// Byte offset of this header in its file; a header found anywhere else is not a record.
    pub offset: u64,
    /// xxh3-64 (seed 0) of the key bytes followed by the value bytes.
    pub body_hash: u64,
}

impl RecordHeader {
    /// The 56 header bytes; the last 8 are xxh3-64 of the first 48 seeded with the file's salt.
    pub fn encode(&self, salt: u64) -> [u8; RECORD_HEADER_BYTES as usize] {
        let mut b = [0u8; RECORD_HEADER_BYTES as usize];
        b[0..4].copy_from_slice(&RECORD_MAGIC);
        b[4] = self.kind as u8;
        b[8..12].copy_from_slice(&self.key_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.value_len.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.body_hash.to_le_bytes());
        let check = xxh3_64_with_seed(&b[0..48], salt);
        b[48..56].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// Parses a header read at `offset` of a file with `salt`; `None` unless every check passes
    /// (magic, kind, zero padding, checksum, stored offset == `offset`, key length limit).
    pub fn decode(b: &[u8], salt: u64, offset: u64) -> Option<RecordHeader> {
        if b.len() < RECORD_HEADER_BYTES as usize || b[0..4] != RECORD_MAGIC {
            return None;
        }
        if u64_at(b, 48) != xxh3_64_with_seed(&b[0..48], salt) {
            return None;
        }
        let kind = match b[4] {
            1 => RecordKind::Put,
            2 => RecordKind::Tombstone,
            _ => return None,
        };
        if b[5..8] != [0, 0, 0] || b[12..16] != [0, 0, 0, 0] {
            return None;
        }
        let header =
            RecordHeader { kind, key_len: u32_at(b, 8), value_len: u64_at(b, 16), seq: u64_at(b, 24), offset: u64_at(b, 32), body_hash: u64_at(b, 40) };
        let sane = header.offset == offset
            && header.key_len <= MAX_KEY_BYTES
            && (kind == RecordKind::Put || header.value_len == 0)
            && header.value_len.checked_add(RECORD_HEADER_BYTES + header.key_len as u64).is_some();
        sane.then_some(header)
    }

    /// Bytes the whole record occupies: header + key + value.
    pub fn total_bytes(&self) -> u64 {
        RECORD_HEADER_BYTES + self.key_len as u64 + self.value_len
    }

    /// Offset of the first value byte.
    pub fn value_offset(&self) -> u64 {
        self.offset + RECORD_HEADER_BYTES + self.key_len as u64
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_reject_any_changed_byte() {
        let h = RecordHeader { kind: RecordKind::Put, key_len: 3, value_len: 10, seq: 7, offset: 64, body_hash: 99 };
        let bytes = h.encode(42);
        assert_eq!(RecordHeader::decode(&bytes, 42, 64), Some(h));
        assert_eq!(RecordHeader::decode(&bytes, 43, 64), None, "other salt");
        assert_eq!(RecordHeader::decode(&bytes, 42, 65), None, "other offset");
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert_eq!(RecordHeader::decode(&bad, 42, 64), None, "flip at {i}");
        }
        let f = FileHeader { stripe: 2, generation: 5, salt: 77 };
        assert_eq!(FileHeader::decode(&f.encode()), Ok(f));
        let mut bad = f.encode();
        bad[20] ^= 1;
        assert!(FileHeader::decode(&bad).is_err());
        assert!(FileHeader::decode(&[0u8; 64]).is_err());
    }
}
