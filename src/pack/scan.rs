//! Recovery scan of one pack data file: finds every complete, checksummed record, steps over
//! damaged spans, and reports where the last record ends so a torn tail can be cut off.
//!
//! The scan only reads. It must never accept a record whose header checksum, stored offset or
//! body hash does not match: anything it returns is exactly what a writer once wrote.

use super::record::{RecordHeader, RecordKind, RECORD_HEADER_BYTES, RECORD_MAGIC};
use crate::hash::Xxh3;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Bytes read at a time while hashing bodies and searching for the next record.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// One valid record found by the scan.
#[derive(Debug, Clone)]
pub struct FoundRecord {
    /// The record's checked header.
    pub header: RecordHeader,
    /// The record's key.
    pub key: String,
}

/// What a scan of one file found.
#[derive(Debug, Default)]
pub struct ScanOutcome {
    /// Valid records in file order.
    pub records: Vec<FoundRecord>,
    /// Offset just past the last record whose header checks and that lies whole in the file,
    /// whether its body checks or not (where the scan began if there is none), in bytes. What
    /// lies beyond holds no record: a torn tail, or zeros written ahead.
    pub good_end_bytes: u64,
    /// Bytes before `good_end_bytes` that belong to no valid record: damage, in bytes. A last
    /// record whose body fails its hash is damage too, kept in place and never cut as a torn
    /// tail: a whole record that rotted may be a key's only copy.
    pub damaged_bytes: u64,
}

/// Scans `file` (of `file_len` bytes, records checksummed with `salt`) from offset `from` (the
/// first record, or where a persisted index stops) on.
pub fn scan(file: &File, salt: u64, from: u64, file_len: u64) -> io::Result<ScanOutcome> {
    let mut outcome = ScanOutcome { good_end_bytes: from, ..Default::default() };
    let mut buf = vec![0u8; SCAN_CHUNK_BYTES];
    let mut valid_bytes = 0u64;
    let mut pos = from;
    while pos < file_len {
        let Some(header) = header_at(file, salt, pos, file_len)? else {
            match next_header(file, salt, pos + 1, file_len, &mut buf)? {
                Some(next) => {
                    pos = next;
                    continue;
                }
                None => break,
            }
        };
        // The header checksum vouches for the lengths, so a bad body is skipped, not searched.
        if let Some(key) = verified_key(file, &header, &mut buf)? {
            outcome.records.push(FoundRecord { header, key });
            valid_bytes += header.total_bytes();
        }
        pos += header.total_bytes();
        outcome.good_end_bytes = pos;
    }
    outcome.damaged_bytes = outcome.good_end_bytes - from - valid_bytes;
    Ok(outcome)
}

/// The record header at `pos`, if one is there and the whole record fits in the file.
pub fn header_at(file: &File, salt: u64, pos: u64, file_len: u64) -> io::Result<Option<RecordHeader>> {
    if pos.saturating_add(RECORD_HEADER_BYTES) > file_len {
        return Ok(None);
    }
    let mut bytes = [0u8; RECORD_HEADER_BYTES as usize];
    file.read_exact_at(&mut bytes, pos)?;
    Ok(RecordHeader::decode(&bytes, salt, pos).filter(|h| pos.checked_add(h.total_bytes()).is_some_and(|end| end <= file_len)))
}

/// Streams the value of `header` from `file` into `sink` through `buf`, and returns the body hash
/// of `key` + value: the one loop both the recovery scan and reads use.
pub fn stream_value(file: &File, header: &RecordHeader, key: &[u8], buf: &mut [u8], sink: &mut dyn io::Write) -> io::Result<u64> {
    let mut hasher = Xxh3::new();
    hasher.update(key);
    let streamed = crate::backend::stream_range(file, header.value_offset(), header.value_len, buf, sink, |chunk| hasher.update(chunk))?;
    if streamed < header.value_len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the file ends {streamed} bytes into the record's {}-byte value (the pack file was cut short)", header.value_len),
        ));
    }
    Ok(hasher.digest())
}

/// Reads the key and value of `header` and checks the body hash; the key if all is well.
fn verified_key(file: &File, header: &RecordHeader, buf: &mut [u8]) -> io::Result<Option<String>> {
    let mut key = vec![0u8; header.key_len as usize];
    file.read_exact_at(&mut key, header.offset + RECORD_HEADER_BYTES)?;
    let digest = stream_value(file, header, &key, buf, &mut io::sink())?;
    if digest != header.body_hash || (header.kind == RecordKind::Tombstone && header.value_len != 0) {
        return Ok(None);
    }
    Ok(String::from_utf8(key).ok())
}

/// The offset of the next valid record header at or after `from`, searching byte by byte.
fn next_header(file: &File, salt: u64, from: u64, file_len: u64, buf: &mut [u8]) -> io::Result<Option<u64>> {
    let mut chunk_start = from;
    while chunk_start < file_len {
        let n = buf.len().min((file_len - chunk_start) as usize);
        file.read_exact_at(&mut buf[..n], chunk_start)?;
        for i in 0..n.saturating_sub(RECORD_MAGIC.len() - 1) {
            if buf[i..i + RECORD_MAGIC.len()] == RECORD_MAGIC {
                let candidate = chunk_start + i as u64;
                if header_at(file, salt, candidate, file_len)?.is_some() {
                    return Ok(Some(candidate));
                }
            }
        }
        // Overlap by the magic's length minus one so a magic split across chunks is still seen.
        chunk_start += (n as u64).saturating_sub(RECORD_MAGIC.len() as u64 - 1).max(1);
    }
    Ok(None)
}
