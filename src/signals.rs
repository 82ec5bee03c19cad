//! Ctrl-C, SIGTERM and SIGHUP (what `timeout`, systemd, `docker stop`, CI cancellation and
//! mpirun send): each one runs a handler on a thread of its own, as the `ctrlc` crate does, but
//! that thread keeps its own file table (see `threads`), so a lone worker's system calls stay on
//! the kernel's fast path.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// The pipe's write end, for the signal handler; -1 before `on_termination`.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// The signals that stop a run. Helper threads block them (`threads::leave_file_table`), so the
/// handler always runs on a thread that holds the pipe's write end.
pub const TERMINATION: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(_signal: libc::c_int) {
    // Async-signal-safe only: one byte into a non-blocking pipe (a full pipe already holds a
    // wake-up), with errno kept for the code the signal interrupted.
    // SAFETY: write(2) and errno access are async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let byte = 1u8;
        libc::write(WAKE.load(Ordering::Relaxed), (&byte as *const u8).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Runs `handler` on the `stowbench-sigs` thread once for every SIGINT, SIGTERM or SIGHUP.
/// Called once, at start; a second call fails.
pub fn on_termination(mut handler: impl FnMut() + Send + 'static) -> std::io::Result<()> {
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
        let mut byte = 0u8;
        loop {
            // SAFETY: reads one byte into a local.
            match unsafe { libc::read(read, (&mut byte as *mut u8).cast(), 1) } {
                1 => handler(),
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
