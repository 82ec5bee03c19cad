//! How long opening a pack takes with its persisted index and without it (the recovery scan that
//! reads and hashes every record). Writes N objects of S bytes through one writer, closes the
//! pack (which writes the index), then times: open with the index, and open after the index file
//! is removed. Prints seconds and the client's peak RSS growth per step.
//!
//! Run: `cargo run --release --example pack_open -- [DIR] [--objects N] [--size BYTES]`
//! (defaults: a temporary directory under /var/tmp, 1,000,000 objects of 1024 bytes).

use std::io::Cursor;
use std::path::PathBuf;
use std::time::Instant;
use stowbench::pack::index_file::index_file_name;
use stowbench::pack::PackStore;

fn main() {
    let mut dir: Option<PathBuf> = None;
    let (mut objects, mut size) = (1_000_000u64, 1024usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--objects" => objects = args.next().and_then(|v| v.parse().ok()).expect("--objects N"),
            "--size" => size = args.next().and_then(|v| v.parse().ok()).expect("--size BYTES"),
            other => dir = Some(PathBuf::from(other)),
        }
    }
    let base = dir.unwrap_or_else(|| PathBuf::from("/var/tmp"));
    let tmp = tempfile_dir(&base);
    let pack = tmp.join("pack");
    let value: Vec<u8> = (0..size).map(|i| (i * 131 % 251) as u8).collect();

    let started = Instant::now();
    {
        let store = PackStore::open(&pack, false).expect("open new pack");
        let mut lease = store.lease().expect("lease");
        for i in 0..objects {
            lease.put(&format!("object-{i:010}"), &mut Cursor::new(&value), size as u64).expect("put");
        }
        drop(lease);
        let closing = Instant::now();
        drop(store);
        println!(
            "wrote {objects} objects of {size} B in {:.2} s; close (sync + index) {:.2} s",
            started.elapsed().as_secs_f64(),
            closing.elapsed().as_secs_f64()
        );
    }
    let index_bytes = std::fs::metadata(pack.join(index_file_name(1))).map(|m| m.len()).unwrap_or(0);
    println!("index file: {:.1} MiB ({:.1} B per object)", index_bytes as f64 / 1048576.0, index_bytes as f64 / objects as f64);
    for with_index in [true, false] {
        if !with_index {
            std::fs::remove_file(pack.join(index_file_name(1))).expect("remove index");
        }
        let rss_before = rss_kib();
        let opening = Instant::now();
        let store = PackStore::open(&pack, false).expect("reopen");
        let seconds = opening.elapsed().as_secs_f64();
        let recovery = store.recovery().clone();
        println!(
            "open {}: {seconds:.3} s, {} records from the index, {:.1} MiB scanned, RSS +{:.0} MiB (the in-memory index: {:.1} MiB, {:.0} B per object)",
            if with_index { "with index   " } else { "without index" },
            recovery.indexed_records,
            recovery.scanned_bytes as f64 / 1048576.0,
            (rss_kib().saturating_sub(rss_before)) as f64 / 1024.0,
            store.index_bytes() as f64 / 1048576.0,
            store.index_bytes() as f64 / objects as f64
        );
        store.close_without_index();
    }
    std::fs::remove_dir_all(&tmp).expect("remove the example's directory");
}

/// A fresh directory for this run inside `base` (removed at the end).
fn tempfile_dir(base: &std::path::Path) -> PathBuf {
    let dir = base.join(format!("stowbench-pack-open-{}", std::process::id()));
    std::fs::create_dir(&dir).expect("create the example's directory (it must not exist yet)");
    dir
}

/// Current resident set size, in KiB (Linux).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}
