//! How fast the kernel copies between a cached file and a buffer, depending on where the buffer
//! sits relative to the file offset, modulo 4 KiB.
//!
//!     cargo run --release --example copy_distance [DIR]
//!
//! Why this exists: Linux copies a `pread` or `pwrite` with `rep movsb` on CPUs with fast short
//! `rep movsb`, and on AMD Zen 3 that instruction slows down several times when the destination
//! lies a few bytes past the source modulo 4 KiB. A buffer from `malloc` sits wherever the
//! allocator puts it (16 bytes past a page boundary when it was `mmap`ed), so stowbench copies
//! through buffers that agree with the file offset instead (`src/backend/io_buffer.rs`;
//! docs/performance/harness.md, "Where a buffer sits").
//!
//! It writes a 64 MiB file under DIR (default: the current directory), then, for each distance
//! (the buffer's address minus the file offset, modulo 4096), reads the file with 256 KiB
//! `pread`s into the buffer and writes it back in place with 256 KiB `pwrite`s from it, eight
//! passes each, and prints the better GB/s of two rounds. The file is removed afterwards.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

const FILE_BYTES: usize = 64 << 20;
const PIECE_BYTES: usize = 256 << 10;
const PASSES: usize = 8;

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let path = std::path::Path::new(&dir).join("copy-distance.tmp");
    let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i * 7 + i / 4096) as u8).collect();
    let file = File::options().read(true).write(true).create_new(true).open(&path).expect("create the test file (is it left from an earlier run?)");
    file.write_all_at(&data, 0).expect("write the test file");
    let mut buffer = stowbench::backend::io_buffer::IoBuffer::new(PIECE_BYTES);
    println!("distance  pread GB/s  pwrite GB/s");
    for distance in [0u64, 4, 16, 28, 32, 64, 2048, 4064, 4080, 4092] {
        let best = |f: &mut dyn FnMut() -> f64| (0..2).map(|_| f()).fold(0.0, f64::max);
        // `for_offset(d)` starts d bytes past a 4 KiB boundary; every piece starts on one in the file.
        let read = best(&mut || passes(|at| file.read_exact_at(buffer.for_offset(distance), at).expect("pread")));
        let wrote = best(&mut || passes(|at| file.write_all_at(buffer.for_offset(distance), at).expect("pwrite")));
        println!("{distance:>8}  {read:>10.2}  {wrote:>11.2}");
    }
    std::fs::remove_file(&path).expect("remove the test file");
}

/// GB/s of `PASSES` passes over the file, calling `piece` at each piece's offset.
fn passes(mut piece: impl FnMut(u64)) -> f64 {
    let started = Instant::now();
    for _ in 0..PASSES {
        for at in (0..FILE_BYTES).step_by(PIECE_BYTES) {
            piece(at as u64);
        }
    }
    (PASSES * FILE_BYTES) as f64 / started.elapsed().as_secs_f64() / 1e9
}
