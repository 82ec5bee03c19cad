//! Ctrl-C, SIGTERM and SIGHUP (what `timeout`, systemd, `docker stop`, CI cancellation and
//! mpirun send): each one runs a handler on a thread of its own, as the `ctrlc` crate does, but
//! that thread keeps its own file table (see `threads`), so a lone worker's system calls stay on
//! the kernel's fast path.
//!
//! Each signal reaches the handler with the time it arrived, so that one request delivered twice
//! can be told from two requests: `timeout` sends its signal to its child and then to its whole
//! process group, which holds the child too.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// The pipe's write end, for the signal handler; -1 before `on_termination`.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// The signals that stop a run. Helper threads block them (`threads::leave_file_table`), so the
/// handler always runs on a thread that holds the pipe's write end.
pub const TERMINATION: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(_signal: libc::c_int) {
    // Async-signal-safe only: the arrival time (CLOCK_MONOTONIC, in ns) into a non-blocking pipe
    // as one write of 8 bytes, which a pipe keeps whole (a full pipe already holds wake-ups),
    // with errno kept for the code the signal interrupted.
    // SAFETY: clock_gettime(2), write(2) and errno access are async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let mut now: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
        let arrived_ns = (now.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(now.tv_nsec as u64).to_ne_bytes();
        libc::write(WAKE.load(Ordering::Relaxed), arrived_ns.as_ptr().cast(), arrived_ns.len());
        *libc::__errno_location() = errno;
    }
}

/// Runs `handler` on the `stowbench-sigs` thread once for every SIGINT, SIGTERM or SIGHUP, with
/// the time the signal arrived (`CLOCK_MONOTONIC`, in ns): the handler may have run long for the
/// one before. Called once, at start; a second call fails.
pub fn on_termination(mut handler: impl FnMut(u64) + Send + 'static) -> std::io::Result<()> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read, write] = fds;
    if WAKE.compare_exchange(-1, write, Ordering::SeqCst, Ordering::SeqCst).is_err() {
        // SAFETY: both are ours, just made.
        unsafe {
            libc::close(read);
            libc::close(write);
        }
        return Err(std::io::Error::other("signal handlers are already installed"));
    }
    // The read end blocks: the thread sleeps until a signal comes.
    // SAFETY: F_SETFL on our own descriptor.
    unsafe { libc::fcntl(read, libc::F_SETFL, 0) };
    std::thread::Builder::new().spawn(move || {
        crate::threads::leave_file_table(&[read]);
        crate::threads::name_current_thread("stowbench-sigs");
        let mut arrived_ns = [0u8; 8];
        loop {
            // SAFETY: reads at most 8 bytes into a local of 8. Every write was 8 bytes, and a pipe
            // hands each write of up to PIPE_BUF bytes out whole.
            match unsafe { libc::read(read, arrived_ns.as_mut_ptr().cast(), arrived_ns.len()) } {
                8 => handler(u64::from_ne_bytes(arrived_ns)),
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => return,
            }
        }
    })?;
    for signal in TERMINATION {
        // SAFETY: a zeroed sigaction with our handler, an empty mask and SA_RESTART (a system
        // call a signal interrupts is restarted, not failed with EINTR).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}
