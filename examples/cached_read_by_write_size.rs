//! How fast a file in the page cache reads back, depending on the size of the writes that made it.
//!
//!     cargo run --release --example cached_read_by_write_size [DIR]
//!
//! Why this exists: the page cache keeps a file in folios whose size follows the writes that
//! created them (ext4 and XFS have large folios since Linux 6.x), and copying out of many small
//! folios costs far more than out of a few large ones. pack once wrote each large value from an
//! unaligned offset, its cache ended up in small folios, and its gets ran a fifth slower than fs's
//! reads of the same bytes (docs/performance/pack-durable.md, "Where pack's pread gap came from").
//!
//! For each write size it writes 256 MiB into a new file under DIR (default: the current
//! directory), reads it back twice with 256 KiB `pread`s from a buffer at a page-aligned address,
//! and prints the faster read's GB/s. The file is removed afterwards.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Instant;

const FILE_BYTES: usize = 256 << 20;
const READ_BYTES: usize = 256 << 10;

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let data: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 7 + i / 4096) as u8).collect();
    println!("write size  read back (GB/s)");
    for write_bytes in [1 << 20, 256 << 10, 64 << 10, 4096, 1000] {
        let path = std::path::Path::new(&dir).join(format!("cached-read-{write_bytes}.tmp"));
        let mut file = File::create(&path).expect("create the test file");
        let mut written = 0;
        while written < FILE_BYTES {
            let n = write_bytes.min(FILE_BYTES - written);
            file.write_all(&data[..n]).expect("write");
            written += n;
        }
        let best = (0..2).map(|_| read_back(&path)).fold(0.0, f64::max);
        println!("{write_bytes:>10}  {best:.1}");
        std::fs::remove_file(&path).expect("remove the test file");
    }
}

/// Reads the whole file at `path` with `pread`s of `READ_BYTES`; returns GB/s.
fn read_back(path: &std::path::Path) -> f64 {
    let file = File::open(path).expect("open");
    let mut buffer = stowbench::backend::io_buffer::IoBuffer::new(READ_BYTES);
    let buf = buffer.aligned();
    let started = Instant::now();
    let mut at = 0;
    while at < FILE_BYTES {
        at += file.read_at(buf, at as u64).expect("read");
    }
    FILE_BYTES as f64 / started.elapsed().as_secs_f64() / 1e9
}
