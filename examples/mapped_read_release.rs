//! What keeping a mapped read's memory bounded costs: hashing 1 MiB values of a file in the page
//! cache through a shared mapping whose pages are kept, released every 32 MiB read, or released
//! after every value, against `pread` into a buffer (the copy fs's get makes), with and without
//! hashing the copy.
//!
//!     cargo run --release --example mapped_read_release [DIR] [VALUE_BYTES]
//!
//! Why this exists: pack's checked gets of large values hash a mapping of the data file in
//! place (src/pack/view.rs), and the pages they touch count in the process's resident memory
//! until released (`madvise(MADV_DONTNEED)`); every page released is faulted in again by the next
//! read. This separates that cost from stowbench's runner (docs/performance/pack-durable.md, session 20).
//!
//! It writes 512 MiB into a new file under DIR (default: the current directory) in 256 KiB
//! writes, as pack does, and lays values out as pack's records do (a 64-byte file header, then
//! 70 bytes of record header and key before each value). Each way has its own mapping. One
//! untimed pass, then five timed passes, the ways interleaved within each; it prints each way's
//! median pass in GB/s. The file is removed afterwards.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::time::Instant;

const FILE_BYTES: usize = 512 << 20;
const WRITE_BYTES: usize = 256 << 10;
const BUDGET_BYTES: usize = 32 << 20;
/// pack's file header, and a record's header and 14-byte key, before each value.
const FIRST_VALUE_AT: usize = 64 + 70;
const BETWEEN_VALUES: usize = 70;

#[derive(Clone, Copy, PartialEq)]
enum Way {
    PreadOnly,
    PreadHash,
    MappedKept,
    MappedBudget,
    MappedEachValue,
}

const WAYS: [(Way, &str); 5] = [
    (Way::PreadOnly, "pread only (fs's get)"),
    (Way::PreadHash, "pread, then hash the copy"),
    (Way::MappedKept, "mapped, pages kept"),
    (Way::MappedBudget, "mapped, released every 32 MiB"),
    (Way::MappedEachValue, "mapped, released every value"),
];

/// A read-only shared mapping of a whole file.
struct Mapping {
    base: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(file: &File, len: usize) -> Mapping {
        // SAFETY: a fresh read-only mapping at an address the kernel picks.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        assert!(base != libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        Mapping { base, len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping covers `len` bytes of a file at least that long, which nothing writes.
        unsafe { std::slice::from_raw_parts(self.base as *const u8, self.len) }
    }

    fn release(&self) {
        // SAFETY: exactly this mapping; for a shared file mapping DONTNEED only drops page-table entries.
        unsafe { libc::madvise(self.base, self.len, libc::MADV_DONTNEED) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no slice of it outlives `&self`.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Reads every value once the given way; returns GB/s and a digest of what was read.
fn pass(way: Way, file: &File, mapping: Option<&Mapping>, value_bytes: usize, buf: &mut [u8]) -> (f64, u64) {
    let values = (FILE_BYTES - FIRST_VALUE_AT) / (value_bytes + BETWEEN_VALUES);
    let mut digest = 0u64;
    let mut unreleased = 0;
    let started = Instant::now();
    for v in 0..values {
        let at = FIRST_VALUE_AT + v * (value_bytes + BETWEEN_VALUES);
        let mut hasher = stowbench::hash::Xxh3::new();
        match mapping {
            None => {
                for off in (0..value_bytes).step_by(WRITE_BYTES) {
                    let n = WRITE_BYTES.min(value_bytes - off);
                    file.read_exact_at(&mut buf[..n], (at + off) as u64).expect("pread");
                    if way == Way::PreadHash {
                        hasher.update(&buf[..n]);
                    } else {
                        digest ^= buf[n - 1] as u64;
                    }
                }
            }
            Some(mapping) => {
                for chunk in mapping.bytes()[at..at + value_bytes].chunks(WRITE_BYTES) {
                    hasher.update(chunk);
                }
                unreleased += value_bytes;
                if way == Way::MappedEachValue || (way == Way::MappedBudget && unreleased >= BUDGET_BYTES) {
                    mapping.release();
                    unreleased = 0;
                }
            }
        }
        digest ^= hasher.digest();
    }
    ((values * value_bytes) as f64 / started.elapsed().as_secs_f64() / 1e9, digest)
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let value_bytes: usize = std::env::args().nth(2).map(|v| v.parse().expect("VALUE_BYTES: a number of bytes")).unwrap_or(1 << 20);
    assert!(value_bytes > 0 && value_bytes < FILE_BYTES / 2, "VALUE_BYTES: 1 byte to 256 MiB");
    let path = std::path::Path::new(&dir).join("mapped-read-release.tmp");
    let mut file = File::create(&path).expect("create the test file");
    let data: Vec<u8> = (0..WRITE_BYTES).map(|i| (i * 7 + i / 4096) as u8).collect();
    for _ in 0..FILE_BYTES / WRITE_BYTES {
        file.write_all(&data).expect("write the test file");
    }
    file.sync_all().expect("sync the test file");
    let file = File::open(&path).expect("open the test file");
    let mappings: Vec<Option<Mapping>> = WAYS
        .iter()
        .map(|(way, _)| matches!(way, Way::MappedKept | Way::MappedBudget | Way::MappedEachValue).then(|| Mapping::new(&file, FILE_BYTES)))
        .collect();
    let mut buf = vec![0u8; WRITE_BYTES];
    let mut rates = vec![Vec::new(); WAYS.len()];
    let mut digests = vec![0u64; WAYS.len()];
    for round in 0..6 {
        for (i, (way, _)) in WAYS.iter().enumerate() {
            let (gbps, digest) = pass(*way, &file, mappings[i].as_ref(), value_bytes, &mut buf);
            if round > 0 {
                rates[i].push(gbps);
            }
            digests[i] = digest;
        }
    }
    println!("{value_bytes}-byte values, median of 5 passes over 512 MiB in the page cache");
    for ((_, name), mut r) in WAYS.iter().zip(rates) {
        r.sort_by(f64::total_cmp);
        println!("{name:32} {:6.2} GB/s  (passes {:.2}–{:.2})", r[2], r[0], r[4]);
    }
    // The hashed ways read the same bytes, so they agree (the pread-only way folds in other bytes).
    assert!(digests[2..].iter().all(|&d| d == digests[1]), "every hashed way read the same bytes");
    drop(mappings);
    drop(file);
    std::fs::remove_file(&path).expect("remove the test file");
}
