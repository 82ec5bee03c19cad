//! stowbench's helper threads (signals, resource sampling, the run's --timeout, the progress
//! bar's ticker) each keep a file table of their own, so that while one worker runs a phase it is
//! the only thread using the process's file table.
//!
//! Why: Linux takes a reference on the file behind every descriptor a system call is passed
//! (`pread`, `pwrite`, `fsync`, …) unless the calling thread's file table is used by it alone
//! (`__fget_light`). fio's jobs are processes and SQLite's kvtest is one thread, so they never
//! pay it; a stowbench worker sharing its table with idle helper threads did, on every call. A
//! worker forked into a process of its own read 10,000-byte SQLite blobs 6 % faster (median of
//! eight paired runs, docs/performance/sqlite-vs-kvtest.md).
//!
//! A helper leaves the table by copying it (`unshare(CLONE_FILES)`) and closing, in its copy,
//! every descriptor but the standard three and the ones it keeps. The closed copies never touch
//! the process's own: what the rest of stowbench opens and closes is unaffected, and the helper
//! holds no file, lock or mount open behind the run's back. A helper may then open and close
//! files of its own, but must never use a descriptor the rest of the process opened after it
//! left (its table does not have it, or has another file under that number).

use std::os::fd::RawFd;

/// Gives the calling thread a file table of its own holding only descriptors 0–2 and `keep`.
/// Best effort: where the kernel refuses, the thread goes on sharing the table (slower
/// system calls for a lone worker, nothing worse).
///
/// The thread first blocks SIGINT, SIGTERM and SIGHUP for good. Their handler (`signals`) runs
/// on whichever thread the kernel picks and writes one byte to a pipe whose write end the
/// private table no longer holds: on a helper the byte, and the Ctrl-C, would be lost. The
/// kernel picks another thread whenever the main thread has these signals blocked, as glibc's
/// `pthread_create` does for a moment each time a case starts its sampler; a Ctrl-C then waits
/// pending those microseconds for the main thread instead.
pub fn leave_file_table(keep: &[RawFd]) {
    // SAFETY: pthread_sigmask changes only the calling thread's mask; the set is built here.
    unsafe {
        let mut termination: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut termination);
        for signal in crate::signals::TERMINATION {
            libc::sigaddset(&mut termination, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &termination, std::ptr::null_mut());
    }
    // SAFETY: unshare affects only the calling thread's file table.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return;
    }
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd > 2).collect();
    keep.sort_unstable();
    let mut from: u32 = 3;
    for fd in keep.into_iter().map(|fd| fd as u32).chain(std::iter::once(u32::MAX)) {
        if fd > from {
            // SAFETY: closes descriptors of this thread's private copy only (see above).
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        if fd == u32::MAX {
            break;
        }
        from = fd.saturating_add(1).max(from);
    }
}

/// Names the calling thread as `top -H`, perf and /proc show it (at most 15 bytes kept). Helpers
/// name themselves after leaving the file table, so a named helper is known to have left it.
pub fn name_current_thread(name: &str) {
    let mut bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    bytes.push(0);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, bytes.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Whether two threads (by task id) use one file table; None when the kernel cannot tell
/// (`kcmp` refused, or a thread has ended).
pub fn share_file_table(a: libc::pid_t, b: libc::pid_t) -> Option<bool> {
    /// `enum kcmp_type` of <linux/kcmp.h> (not in the libc crate).
    const KCMP_FILES: libc::c_int = 2;
    // SAFETY: kcmp only compares kernel objects of the two tasks.
    match unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_FILES, 0u64, 0u64) } {
        0 => Some(true),
        r if r > 0 => Some(false),
        _ => None,
    }
}

/// The calling thread's task id.
pub fn current_tid() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_thread_that_left_has_its_own_table_without_the_process_s_files() {
        let file = std::fs::File::open("/proc/self/stat").expect("open a file");
        let kept = std::fs::File::open("/proc/self/status").expect("open a file");
        let (fd, kept_fd) = (file.as_raw_fd(), kept.as_raw_fd());
        let here = current_tid();
        let (shared_before, shared_after, has_file, has_kept) = std::thread::spawn(move || {
            let before = share_file_table(here, current_tid());
            leave_file_table(&[kept_fd]);
            let after = share_file_table(here, current_tid());
            // SAFETY: F_GETFD only asks whether the descriptor is open in this thread's table.
            let open = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
            (before, after, open(fd), open(kept_fd))
        })
        .join()
        .expect("the helper thread ran");
        assert_eq!(shared_before, Some(true), "a new thread starts on the process's table");
        assert_eq!(shared_after, Some(false), "after leaving, its table is its own");
        assert!(!has_file, "the helper's copy closed the process's file");
        assert!(has_kept, "the helper's copy kept the descriptor it asked for");
        // The process's own table still has both: the helper closed its copies only.
        let mut first = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &file, &mut first).expect("the file is still open here"), 1);
        assert!(std::fs::metadata(format!("/proc/self/fd/{kept_fd}")).is_ok());
    }

    #[test]
    fn a_thread_names_itself_in_proc() {
        let name = std::thread::spawn(|| {
            name_current_thread("stowbench-a-long-name");
            std::fs::read_to_string(format!("/proc/self/task/{}/comm", current_tid())).expect("read comm")
        })
        .join()
        .expect("the thread ran");
        assert_eq!(name.trim_end(), "stowbench-a-lon");
    }
}
