//! A read-only shared mapping of one stripe file, for checked gets of large values.
//!
//! A checked get must read every byte of a value to hash it. Through `pread`, that is two passes:
//! the kernel copies the page cache into a buffer, then the hash reads the buffer. Through a
//! mapping, the hash reads the page cache itself, one pass, and the value reaches the caller as
//! the mapped bytes (as LMDB hands out values): measured in docs/performance/pack-durable.md. Unchecked gets
//! keep `pread`, so that a get still moves every byte rather than just handing out an address.
//! Pages read stay mapped until the store takes them out again (`release_pages`, every
//! `MAPPED_RESIDENT_BUDGET_BYTES` read), which keeps the process's resident memory bounded.
//!
//! The mapping is made once per stripe, larger than the file will ever be here (`VIEW_BYTES`):
//! pages past the end of the file are never touched, and the file may grow underneath without
//! remapping, since a shared mapping shows the file's page cache as it is now. Touching a mapped
//! page past the end of the file raises SIGBUS, so every read first checks, with `fstat`, that
//! the value lies inside the file as it is now; a file cut short behind stowbench's back is read
//! through `pread` instead, which reports how much survived. (A file cut *during* a get could
//! still raise SIGBUS; nothing in stowbench cuts a file that has readers.)

use std::fs::File;
use std::os::unix::io::AsRawFd;

/// Bytes of address space one view covers; records ending beyond are read through `pread`.
/// 64 GiB per stripe leaves room for a thousand stripes in a 47-bit address space.
pub const VIEW_BYTES: u64 = 64 << 30;

/// A `PROT_READ`, `MAP_SHARED` mapping of the first `VIEW_BYTES` of a file.
pub struct View {
    base: *const u8,
}

// The mapping is read-only and lives as long as the `View`: any thread may read through it.
unsafe impl Send for View {}
unsafe impl Sync for View {}

impl View {
    /// Maps `file`; `None` if the system refuses (the caller reads through `pread` then).
    pub fn map(file: &File) -> Option<View> {
        // SAFETY: a fresh mapping at an address the kernel picks; nothing else is affected.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), VIEW_BYTES as usize, libc::PROT_READ, libc::MAP_SHARED | libc::MAP_NORESERVE, file.as_raw_fd(), 0) };
        (base != libc::MAP_FAILED).then_some(View { base: base as *const u8 })
    }

    /// The `len` bytes at `offset`, if they lie inside both the view and `file` as it is now.
    pub fn bytes(&self, file: &File, offset: u64, len: u64) -> Option<&[u8]> {
        let end = offset.checked_add(len).filter(|&end| end <= VIEW_BYTES)?;
        let file_bytes = file.metadata().ok()?.len();
        if end > file_bytes {
            return None;
        }
        // SAFETY: the range is inside the mapping and inside the file (checked just above), and
        // the bytes there are a record's, which are never rewritten while it is in the index.
        Some(unsafe { std::slice::from_raw_parts(self.base.add(offset as usize), len as usize) })
    }
}

impl View {
    /// Takes the mapped pages of the first `file_bytes` out of this process (`MADV_DONTNEED`):
    /// they stay in the page cache, where a cache drop can now evict them, and the next read
    /// through the view faults them in again from the file. The mapping itself stays, and reads
    /// through it still see the file. (Only the file's extent: nothing past it was ever touched,
    /// and the kernel need not walk the rest of the 64 GiB.)
    pub fn release_pages(&self, file_bytes: u64) {
        let page = page_bytes();
        let len = file_bytes.min(VIEW_BYTES).div_ceil(page) * page;
        // SAFETY: the range is the start of this mapping, page-aligned and inside it. For a
        // shared file mapping, DONTNEED only drops page-table entries; the bytes a live slice
        // (another thread's get) points at read the same afterwards, faulted in again.
        unsafe {
            libc::madvise(self.base as *mut libc::c_void, len as usize, libc::MADV_DONTNEED);
        }
    }
}

/// The system's page size (the unit of `madvise`).
fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no slice of it outlives `&self`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, VIEW_BYTES as usize);
        }
    }
}
