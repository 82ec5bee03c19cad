//! The measurement behind pack's layout choice (docs/formats/pack.md): T threads append records
//! of S bytes either to ONE shared file (space reserved with an atomic fetch_add on the file end,
//! positioned writes) or each to its OWN file (striped by writer). Prints MB/s per layout.
//!
//! Run: `cargo run --release --example pack_stripe_choice -- [DIR] [--fsync]`

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const RECORDS_PER_THREAD: u64 = 200;
const RECORD_BYTES: u64 = 480_000;

fn create(path: &Path) -> File {
    OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).expect("create test file")
}

/// Returns MB/s for `threads` writers, shared file or one file each.
fn run(dir: &Path, threads: usize, shared: bool, fsync: bool) -> f64 {
    let files: Vec<File> = (0..if shared { 1 } else { threads }).map(|i| create(&dir.join(format!("stripe-{i}")))).collect();
    let ends: Vec<AtomicU64> = files.iter().map(|_| AtomicU64::new(0)).collect();
    let body = vec![0xA5u8; RECORD_BYTES as usize];
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let slot = if shared { 0 } else { t };
            let (file, end, body) = (&files[slot], &ends[slot], &body);
            scope.spawn(move || {
                for _ in 0..RECORDS_PER_THREAD {
                    let at = end.fetch_add(RECORD_BYTES, Ordering::AcqRel);
                    file.write_all_at(body, at).expect("write");
                    if fsync {
                        file.sync_data().expect("fdatasync");
                    }
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    for i in 0..files.len() {
        let _ = std::fs::remove_file(dir.join(format!("stripe-{i}")));
    }
    (threads as u64 * RECORDS_PER_THREAD * RECORD_BYTES) as f64 / seconds / 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fsync = args.iter().any(|a| a == "--fsync");
    let base = args.iter().find(|a| !a.starts_with("--")).map(Into::into).unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("pack-stripe-choice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create directory");
    println!("{RECORDS_PER_THREAD} records of {RECORD_BYTES} bytes per thread, fsync={fsync}, in {}", dir.display());
    for threads in [1, 2, 4] {
        let mut shared = Vec::new();
        let mut striped = Vec::new();
        for _ in 0..3 {
            shared.push(run(&dir, threads, true, fsync));
            striped.push(run(&dir, threads, false, fsync));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[1]
        };
        println!("threads {threads}: shared file {:>7.0} MB/s   one file per writer {:>7.0} MB/s   (median of 3)", median(&mut shared), median(&mut striped));
    }
    let _ = std::fs::remove_dir(&dir);
}
