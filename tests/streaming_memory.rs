//! Streaming proof: objects of about 1 GB go through `fs`, `sqlite` (both schemas), `sqlite-file` and `pack`
//! while this process's peak resident memory stays within 64 MiB of where it started.
//!
//! This file holds exactly one #[test], so nothing else runs in the process while the peak is
//! measured. The peak (VmHWM) is reset through /proc/self/clear_refs before each backend (Linux).
//! Payloads are generated while being read and verified while being written, never stored. Data
//! goes under Cargo's target tmp dir (a real disk, not tmpfs, which would count as memory). The
//! sqlite object is exactly the declared `max_object_bytes` with the longest key that limit
//! allows, so this also proves the limit is reachable; one byte more is refused (by the backend
//! before any data is read, and by the runner from the capability).

mod common;

use common::{PayloadReader, VerifyingSink};
use std::time::Instant;
use stowbench::backend::options::Options;
use stowbench::backend::sqlite::{KEY_BYTES_AT_LIMIT, MAX_OBJECT_BYTES};
use stowbench::backend::{ErrorKind, Namespace};

/// How far peak RSS may rise above the RSS before a put + get, in bytes.
const ALLOWED_GROWTH_BYTES: u64 = 64 << 20;

/// A field of /proc/self/status such as "VmRSS" or "VmHWM", in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux only)");
    let line = status.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("no {field} line"));
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad line {line:?}"));
    kib * 1024
}

/// Resets the peak RSS (VmHWM) to the current RSS; "5" is the kernel's reset-peak command.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("write /proc/self/clear_refs to reset VmHWM");
}

/// Puts and gets one object of `len` bytes through backend `name` with `options` (TOML); returns
/// (put, get) seconds.
fn stream_one(name: &str, options: &str, key: &str, len: u64, dir: &std::path::Path) -> (f64, f64) {
    let backend = &format!("{name} {}", options.replace('\n', ", ")).trim().to_string(); // for messages
    let ns_dir = dir.join(stowbench::backend::namespace::safe_name(backend));
    let ns = Namespace::create(&ns_dir, "streaming", name).expect("namespace");
    let kind = stowbench::backend::find(name).expect("registered");
    let options = Options::new(name, "tests/streaming_memory.rs", toml::from_str(options).expect("valid TOML"));
    let target = (kind.construct)(&options, &ns).expect("construct");
    target.prepare().expect("prepare");
    let mut session = target.open_session(0).expect("session");

    reset_peak();
    let rss_before = status_bytes("VmRSS");
    let started = Instant::now();
    session.put(key, &mut PayloadReader::new(0xB16_0B1EC7, len), len).unwrap_or_else(|e| panic!("{backend}: put: {e}"));
    let put_s = started.elapsed().as_secs_f64();
    let usage = target.disk_usage().expect("disk usage");
    eprintln!("{backend}: after the put: {} bytes allocated, {} apparent, {} files", usage.allocated_bytes, usage.apparent_bytes, usage.files);
    assert!(usage.apparent_bytes >= len, "{backend}: disk usage must count the object");
    let started = Instant::now();
    let mut sink = VerifyingSink::new(0xB16_0B1EC7);
    let returned = session.get(key, &mut sink).unwrap_or_else(|e| panic!("{backend}: get: {e}"));
    let get_s = started.elapsed().as_secs_f64();
    let peak = status_bytes("VmHWM");

    assert_eq!(returned, len, "{backend}: get returned a wrong length");
    sink.check(len).unwrap_or_else(|e| panic!("{backend}: {e}"));
    let growth = peak.saturating_sub(rss_before);
    eprintln!(
        "{backend}: {len} bytes, put {put_s:.1} s, get {get_s:.1} s, RSS before {} MiB, peak {} MiB (+{} MiB)",
        rss_before >> 20,
        peak >> 20,
        growth >> 20
    );
    assert!(growth <= ALLOWED_GROWTH_BYTES, "{backend}: peak RSS rose {growth} bytes during a {len}-byte put + get");
    if name == "sqlite" {
        // One byte over the claim is refused before the body is touched.
        let mut body = PayloadReader::new(1, len + 1);
        let err = session.put(key, &mut body, len + 1).expect_err("a value over max_object_bytes must be refused");
        assert_eq!((err.kind, body.pos), (ErrorKind::TooLarge, 0), "{err}");
    }
    drop(session);
    target.cleanup().expect("cleanup");
    (put_s, get_s)
}

#[test]
fn about_one_gigabyte_streams_through_bounded_memory() {
    let tmp = tempfile::Builder::new().prefix("streaming-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmp under target/");

    let sqlite = stowbench::backend::find("sqlite").unwrap();
    let ns = Namespace::create(&tmp.path().join("caps"), "streaming", "caps").unwrap();
    let caps = (sqlite.construct)(&Options::default(), &ns).unwrap().capabilities();
    assert_eq!(caps.max_object_bytes, Some(MAX_OBJECT_BYTES));
    const { assert!(MAX_OBJECT_BYTES >= 900_000_000 && MAX_OBJECT_BYTES < 1_000_000_001, "the runner refuses 1,000,000,001 bytes") };
    assert!(caps.max_object_hint.unwrap_or_default().contains("sqlite-file"));

    let started = Instant::now();
    let longest_key = "k".repeat(KEY_BYTES_AT_LIMIT as usize);
    stream_one("fs", "", "one-gib", 1 << 30, tmp.path());
    stream_one("sqlite", "", &longest_key, MAX_OBJECT_BYTES, tmp.path());
    stream_one("sqlite", "schema = \"rowid\"\nblob_handle = \"per-session\"", &longest_key, MAX_OBJECT_BYTES, tmp.path());
    stream_one("sqlite-file", "", "one-gib", 1 << 30, tmp.path());
    // pack with its defaults: the checked get hashes the record through the file's mapping, whose
    // pages count here until the 32 MiB budget takes them out again; then with pread's one
    // reused copy buffer.
    stream_one("pack", "", "one-gib", 1 << 30, tmp.path());
    stream_one("pack", "mmap = false", "one-gib", 1 << 30, tmp.path());
    eprintln!("streaming test total: {:.1} s", started.elapsed().as_secs_f64());
}
