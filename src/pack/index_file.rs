//! The persisted index of a pack: written when a store closes cleanly, so the next open reads one
//! compact file instead of scanning (and hashing) every record of every data file.
//!
//! The file is a snapshot: every live key's record location, and for each data file the salt and
//! the length it had when the snapshot was taken. Data files only ever grow at their tail, so the
//! snapshot stays true for everything before those lengths; opening reads the snapshot and scans
//! only what was appended after it (after a crash, say). A snapshot that fails any check — its
//! checksum, a data file whose salt differs or that is now shorter — is ignored, and the open
//! falls back to the full scan: the file is a shortcut, never the truth. Layout:
//! `docs/formats/pack.md`.

use super::record::{RecordHeader, RecordKind, MAX_KEY_BYTES};
use crate::hash::Xxh3;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// First 8 bytes of an index file.
pub const INDEX_MAGIC: [u8; 8] = *b"STOWPIDX";
/// Version of the index layout; a reader ignores (and the next close rewrites) any other.
pub const INDEX_VERSION: u32 = 1;
const HEADER_BYTES: usize = 64;
const STRIPE_BYTES: usize = 24;
const RECORD_BYTES: usize = 40;

/// The index file of generation `generation`.
pub fn index_file_name(generation: u64) -> String {
    format!("g{generation:06}.index")
}

/// Parses `g{generation}.index`.
pub fn parse_index_file_name(name: &str) -> Option<u64> {
    name.strip_prefix('g')?.strip_suffix(".index")?.parse().ok()
}

/// What the snapshot knew about one data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StripeMark {
    /// Stripe number.
    pub id: u32,
    /// The file's salt (from its header): a file with another salt is another file.
    pub salt: u64,
    /// The file's valid length when the snapshot was taken, in bytes.
    pub tail_bytes: u64,
}

/// The header and stripe table of a snapshot; its records go to the caller one by one.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Sequence number the store would have handed out next.
    pub next_seq: u64,
    /// One mark per data file.
    pub stripes: Vec<StripeMark>,
    /// Damaged bytes the scans found in the indexed part of the data files and left in place: the
    /// index lists no record there, so without this a later open (and compaction) would not know.
    /// Written at header bytes 40..48, zero in indexes of earlier builds.
    pub damaged_bytes: u64,
}

/// Writes the snapshot of generation `generation` atomically (temporary file, fsync, rename,
/// directory fsync): a file under the final name is always complete.
pub fn write<'a>(dir: &Path, generation: u64, snapshot: &Snapshot, records: impl ExactSizeIterator<Item = (&'a str, u32, RecordHeader)>) -> io::Result<()> {
    let final_path = dir.join(index_file_name(generation));
    let tmp = PathBuf::from(format!("{}.tmp", final_path.display()));
    let result = write_to(&tmp, generation, snapshot, records).and_then(|()| fs::rename(&tmp, &final_path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    File::open(dir)?.sync_all()
}

fn write_to<'a>(path: &Path, generation: u64, snapshot: &Snapshot, records: impl ExactSizeIterator<Item = (&'a str, u32, RecordHeader)>) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
    let mut out = HashingWriter { inner: BufWriter::with_capacity(1 << 20, file), hasher: Xxh3::new() };
    let mut head = [0u8; HEADER_BYTES];
    head[0..8].copy_from_slice(&INDEX_MAGIC);
    head[8..12].copy_from_slice(&INDEX_VERSION.to_le_bytes());
    head[12..16].copy_from_slice(&(snapshot.stripes.len() as u32).to_le_bytes());
    head[16..24].copy_from_slice(&generation.to_le_bytes());
    head[24..32].copy_from_slice(&(records.len() as u64).to_le_bytes());
    head[32..40].copy_from_slice(&snapshot.next_seq.to_le_bytes());
    head[40..48].copy_from_slice(&snapshot.damaged_bytes.to_le_bytes());
    out.write_all(&head)?;
    for mark in &snapshot.stripes {
        let mut b = [0u8; STRIPE_BYTES];
        b[0..4].copy_from_slice(&mark.id.to_le_bytes());
        b[8..16].copy_from_slice(&mark.salt.to_le_bytes());
        b[16..24].copy_from_slice(&mark.tail_bytes.to_le_bytes());
        out.write_all(&b)?;
    }
    for (key, stripe_id, header) in records {
        let mut b = [0u8; RECORD_BYTES];
        b[0..4].copy_from_slice(&stripe_id.to_le_bytes());
        b[4..8].copy_from_slice(&header.key_len.to_le_bytes());
        b[8..16].copy_from_slice(&header.value_len.to_le_bytes());
        b[16..24].copy_from_slice(&header.seq.to_le_bytes());
        b[24..32].copy_from_slice(&header.offset.to_le_bytes());
        b[32..40].copy_from_slice(&header.body_hash.to_le_bytes());
        out.write_all(&b)?;
        out.write_all(key.as_bytes())?;
    }
    let check = out.hasher.digest();
    let mut inner = out.inner;
    inner.write_all(&check.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// Reads the snapshot of generation `generation` in `dir`, handing each record to `on_record`
/// (key, stripe id, header) as it goes. `Ok(None)`: there is no index file. `Err(reason)`: the
/// file is unusable, and everything handed out must be thrown away (the checksum is checked last).
pub fn read(dir: &Path, generation: u64, mut on_record: impl FnMut(&str, u32, RecordHeader)) -> Result<Option<Snapshot>, String> {
    let path = dir.join(index_file_name(generation));
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut input = HashingReader { inner: BufReader::with_capacity(1 << 20, file), hasher: Xxh3::new() };
    let fail = |what: &str| format!("{}: {what}", path.display());
    let io_fail = |e: io::Error| format!("{}: {e} (truncated?)", path.display());
    let mut head = [0u8; HEADER_BYTES];
    input.read_exact(&mut head).map_err(io_fail)?;
    if head[0..8] != INDEX_MAGIC {
        return Err(fail("not a pack index (magic bytes differ)"));
    }
    if le_u32(&head, 8) != INDEX_VERSION {
        return Err(fail(&format!("index version {}; this stowbench writes {INDEX_VERSION}", le_u32(&head, 8))));
    }
    if le_u64(&head, 16) != generation {
        return Err(fail("index of another generation"));
    }
    let stripe_count = le_u32(&head, 12) as usize;
    let record_count = le_u64(&head, 24);
    let next_seq = le_u64(&head, 32);
    let damaged_bytes = le_u64(&head, 40);
    let mut stripes = Vec::with_capacity(stripe_count.min(1 << 16));
    for _ in 0..stripe_count {
        let mut b = [0u8; STRIPE_BYTES];
        input.read_exact(&mut b).map_err(io_fail)?;
        stripes.push(StripeMark { id: le_u32(&b, 0), salt: le_u64(&b, 8), tail_bytes: le_u64(&b, 16) });
    }
    let mut key = Vec::new();
    for _ in 0..record_count {
        let mut b = [0u8; RECORD_BYTES];
        input.read_exact(&mut b).map_err(io_fail)?;
        let stripe_id = le_u32(&b, 0);
        let header = RecordHeader {
            kind: RecordKind::Put,
            key_len: le_u32(&b, 4),
            value_len: le_u64(&b, 8),
            seq: le_u64(&b, 16),
            offset: le_u64(&b, 24),
            body_hash: le_u64(&b, 32),
        };
        let mark = stripes.iter().find(|m| m.id == stripe_id).ok_or_else(|| fail("record in a stripe the index does not list"))?;
        let inside = header.key_len <= MAX_KEY_BYTES && header.offset.checked_add(header.total_bytes()).is_some_and(|end| end <= mark.tail_bytes);
        if !inside {
            return Err(fail("record beyond its stripe's indexed length"));
        }
        key.resize(header.key_len as usize, 0);
        input.read_exact(&mut key).map_err(io_fail)?;
        let key = std::str::from_utf8(&key).map_err(|_| fail("key is not UTF-8"))?;
        on_record(key, stripe_id, header);
    }
    let expected = input.hasher.digest();
    let mut trailer = [0u8; 8];
    input.inner.read_exact(&mut trailer).map_err(io_fail)?;
    if u64::from_le_bytes(trailer) != expected {
        return Err(fail("checksum does not match (damaged)"));
    }
    if input.inner.read(&mut [0u8; 1]).map_err(io_fail)? != 0 {
        return Err(fail("bytes after the checksum"));
    }
    Ok(Some(Snapshot { next_seq, stripes, damaged_bytes }))
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

struct HashingWriter<W> {
    inner: W,
    hasher: Xxh3,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        self.hasher.update(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct HashingReader<R> {
    inner: R,
    hasher: Xxh3,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}
