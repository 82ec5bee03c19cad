//! O_DIRECT file I/O (`direct = true`): reads and writes that bypass the page cache, so a get
//! measures the device rather than memory, as fio's `direct=1` does.
//!
//! O_DIRECT wants the buffer, the file offset and the length aligned to the device's logical
//! block. Writes therefore go out in whole aligned blocks from an aligned buffer; an object whose
//! length is not a multiple of the block gets its last block padded with zeros, and the file is
//! then cut back to the object's length (ftruncate), so what is stored is exactly the object.
//! Reads ask for whole blocks and take what the file holds.

use super::{BResult, BackendError, ErrorKind};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Alignment of buffers, offsets and lengths: 4096 bytes covers the logical block of every
/// device Linux runs on today (512 or 4096).
pub const ALIGN: usize = 4096;

// The thread's copy buffer starts on a 4 KiB boundary (`io_buffer`), which is what `O_DIRECT`
// asks of a buffer: reads and writes here go through it.
const _: () = assert!(super::io_buffer::ALIAS_BYTES % ALIGN == 0);

/// Adds O_DIRECT to `options`.
pub fn direct(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(libc::O_DIRECT)
}

/// Checks that the filesystem holding `dir` accepts O_DIRECT (tmpfs, for one, does not), with a
/// message that names the directory and the fix.
pub fn check_supported(dir: &Path, target: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("target \"{target}\": cannot create {}: {e}", dir.display()))?;
    let probe = dir.join(".stowbench-direct-probe");
    let opened = direct(OpenOptions::new().write(true).create(true).truncate(true)).open(&probe);
    let written = opened.and_then(|file| super::with_copy_buffer(|buf| file.write_all_at(&buf[..ALIGN], 0)));
    let _ = std::fs::remove_file(&probe);
    written.map_err(|e| {
        format!(
            "target \"{target}\": option \"direct\" = true needs O_DIRECT, which the filesystem holding {} refused ({e}); \
             use direct = false, or a path on a filesystem that supports it (ext4, xfs, btrfs)",
            dir.display()
        )
    })
}

/// Writes `len` bytes from `body` to the start of `file` (opened with O_DIRECT and empty).
pub fn write_all(file: &File, body: &mut dyn Read, len: u64) -> BResult<()> {
    super::with_copy_buffer(|buf| {
        let mut at = 0u64;
        while at < len {
            let want = (len - at).min(buf.len() as u64) as usize;
            body.read_exact(&mut buf[..want]).map_err(|e| BackendError::new(ErrorKind::Io, format!("body ended early: {e}")))?;
            let whole = want.next_multiple_of(ALIGN);
            buf[want..whole].fill(0);
            file.write_all_at(&buf[..whole], at)?;
            at += want as u64;
        }
        if len % ALIGN as u64 != 0 {
            file.set_len(len)?; // drop the padding of the last block
        }
        Ok(())
    })
}

/// Streams `len` bytes of `file` (opened with O_DIRECT) into `sink`.
pub fn read_all(file: &File, len: u64, sink: &mut dyn Write) -> BResult<()> {
    super::with_copy_buffer(|buf| {
        let mut at = 0u64;
        while at < len {
            let want = ((len - at) as usize).min(buf.len());
            let n = file.read_at(&mut buf[..want.next_multiple_of(ALIGN)], at)?;
            if n == 0 {
                return Err(BackendError::new(ErrorKind::Corrupt, format!("the file ended {} bytes early", len - at)));
            }
            let n = n.min(want);
            sink.write_all(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages_in_cache(path: &Path) -> usize {
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a read-only shared mapping of a file we keep open for the mapping's lifetime;
        // mincore only reports residency.
        unsafe {
            let map = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, std::os::fd::AsRawFd::as_raw_fd(&file), 0);
            assert_ne!(map, libc::MAP_FAILED);
            let mut resident = vec![0u8; len.div_ceil(4096)];
            assert_eq!(libc::mincore(map, len, resident.as_mut_ptr()), 0);
            libc::munmap(map, len);
            resident.iter().filter(|r| **r & 1 == 1).count()
        }
    }

    #[test]
    fn objects_of_any_length_go_round_and_bypass_the_page_cache() {
        // Cargo's target directory is on the build machine's disk (not tmpfs), which must take O_DIRECT.
        let dir = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
        check_supported(dir.path(), "test").unwrap();
        for len in [0u64, 1, 4095, 4096, 4097, 300_000, crate::backend::COPY_BUFFER_BYTES as u64 + 1] {
            let path = dir.path().join(format!("o{len}"));
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let file = direct(OpenOptions::new().write(true).create(true).truncate(true)).open(&path).unwrap();
            write_all(&file, &mut data.as_slice(), len).unwrap();
            drop(file);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "padding cut back");
            if len >= ALIGN as u64 {
                assert_eq!(pages_in_cache(&path), 0, "{len} bytes written around the page cache");
            }
            let mut back = Vec::new();
            read_all(&direct(OpenOptions::new().read(true)).open(&path).unwrap(), len, &mut back).unwrap();
            assert!(back == data, "{len} bytes read back");
        }
    }

    /// Which filesystems refuse O_DIRECT depends on the kernel (tmpfs takes it since Linux 6.6),
    /// so the refusal is shown where no file can be made at all: the message is the same.
    #[test]
    fn a_refusal_names_the_directory_and_the_fix() {
        let err = check_supported(Path::new("/proc/self"), "t").unwrap_err();
        assert!(err.contains("target \"t\"") && err.contains("/proc/self") && err.contains("O_DIRECT") && err.contains("direct = false"), "{err}");
    }
}
