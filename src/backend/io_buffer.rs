//! The buffers stowbench's file I/O copies through, placed where the kernel copies them fast.
//!
//! A `read`/`pread` copies from the page cache into the buffer, a `write`/`pwrite` the other way,
//! and on CPUs with fast short `rep movsb` (FSRM) Linux makes that copy with `rep movsb`. On the
//! AMD EPYC (Zen 3) machines this project measures on, that instruction runs 4–6× slower when the
//! destination lies 1–31 bytes past the source, counted modulo 4 KiB: 256 KiB `pread`s of a cached
//! file ran at 2.5 GB/s into a buffer 16 bytes past a page boundary and at 12–13 GB/s into one on
//! it, and `pwrite`s from a buffer 16 bytes *before* one ran at 2 GB/s against 9 (`cargo run
//! --release --example copy_distance -- /var/tmp`; docs/performance/harness.md, "Where a buffer sits").
//! glibc's `memcpy` steps around that case in user space; the kernel's copy does not.
//!
//! A buffer from `malloc` sits wherever the allocator's history puts it — 16 bytes past a page
//! boundary whenever it was `mmap`ed — so a case could run several times slower than the same
//! case in another run, for no reason of the storage's. fio's buffers are page aligned and its
//! offsets block aligned, so it never meets the slow case. An `IoBuffer` hands out a slice whose
//! address agrees with the file offset about to be read or written, modulo 4 KiB: the kernel
//! then copies page to page, as for fio, whatever the offset (a pack record starts anywhere).

use std::alloc::Layout;

/// The span over which the copy's source and destination addresses are compared (the L1 cache's
/// 4 KiB aliasing), and the alignment of every `IoBuffer`, which also suits `O_DIRECT`.
pub const ALIAS_BYTES: usize = 4096;

/// A zeroed heap buffer, `ALIAS_BYTES`-aligned, with `ALIAS_BYTES` to spare beyond its usable
/// length so that a slice of that length can start at any offset within the first 4 KiB.
pub struct IoBuffer {
    ptr: *mut u8,
    usable: usize,
}

// The buffer is owned memory like a `Vec<u8>`'s: it may move to another thread.
unsafe impl Send for IoBuffer {}

impl IoBuffer {
    /// A buffer that hands out slices of `usable` bytes.
    pub fn new(usable: usize) -> IoBuffer {
        let layout = Self::layout(usable);
        // SAFETY: the layout has a non-zero size (ALIAS_BYTES at least).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        IoBuffer { ptr, usable }
    }

    fn layout(usable: usize) -> Layout {
        Layout::from_size_align(usable + ALIAS_BYTES, ALIAS_BYTES).expect("a valid aligned layout")
    }

    /// `usable` bytes starting on a 4 KiB boundary: for files read or written from offset 0 in
    /// pieces of a multiple of 4 KiB (fs's files), and for `O_DIRECT`.
    pub fn aligned(&mut self) -> &mut [u8] {
        self.for_offset(0)
    }

    /// `usable` bytes whose address agrees with `file_offset` modulo 4 KiB: for a read or write
    /// at `file_offset`, and for the pieces after it when each is a multiple of 4 KiB long.
    pub fn for_offset(&mut self, file_offset: u64) -> &mut [u8] {
        let skip = (file_offset % ALIAS_BYTES as u64) as usize;
        // SAFETY: `ptr` holds `usable + ALIAS_BYTES` initialised bytes that only this buffer
        // refers to, and `skip + usable` stays within them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(skip), self.usable) }
    }
}

impl Drop for IoBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout(self.usable)) }
    }
}

/// Runs `work` with the calling thread's `IoBuffer` of `COPY_BUFFER_BYTES`, made on first use and
/// reused: allocating and zeroing 256 KiB for every operation would cost a measurable share of a
/// fast get.
pub fn with_io_buffer<T>(work: impl FnOnce(&mut IoBuffer) -> T) -> T {
    thread_local! {
        static BUFFER: std::cell::RefCell<Option<IoBuffer>> = const { std::cell::RefCell::new(None) };
    }
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => work(slot.get_or_insert_with(|| IoBuffer::new(super::COPY_BUFFER_BYTES))),
        // A body or sink that itself copies through this (never ours) finds it taken: a fresh one.
        Err(_) => work(&mut IoBuffer::new(super::COPY_BUFFER_BYTES)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_agrees_with_its_file_offset_modulo_4_kib() {
        let mut buf = IoBuffer::new(8192);
        assert!(buf.for_offset(4095).iter().all(|&b| b == 0), "zeroed to the end of the spare bytes");
        for offset in [0u64, 1, 16, 4095, 4096, 4097, 70_001, (1 << 40) + 31] {
            let slice = buf.for_offset(offset);
            assert_eq!(slice.len(), 8192);
            assert_eq!(slice.as_ptr() as u64 % 4096, offset % 4096, "offset {offset}");
            slice.fill(7); // every byte of the slice is the buffer's own to write
        }
        assert_eq!(buf.aligned().as_ptr() as usize % ALIAS_BYTES, 0);
    }

    #[test]
    fn the_thread_buffer_is_page_aligned_and_a_nested_caller_gets_its_own() {
        with_io_buffer(|outer| {
            let outer_at = outer.aligned().as_ptr() as usize;
            assert_eq!(outer_at % ALIAS_BYTES, 0);
            assert_eq!(outer.aligned().len(), super::super::COPY_BUFFER_BYTES);
            with_io_buffer(|inner| {
                assert_eq!(inner.aligned().as_ptr() as usize % ALIAS_BYTES, 0);
                assert_ne!(inner.aligned().as_ptr() as usize, outer_at);
            });
        });
    }
}
