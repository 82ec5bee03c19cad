//! Clocks for the runner: the monotonic clock for real backends, a virtual one for `sim`.
//!
//! The virtual clock keeps one time per thread, advanced only by the `sim` backend, so tests of
//! the runner, statistics and reports are exact and repeatable whatever the machine is doing.

use std::cell::Cell;
use std::sync::OnceLock;

/// A source of nanosecond timestamps; only differences between readings are meaningful.
pub trait Clock: Send + Sync {
    /// Nanoseconds since an arbitrary origin, never decreasing on one thread.
    fn now_ns(&self) -> u64;
    /// Whether time is virtual (sim) rather than measured.
    fn is_virtual(&self) -> bool {
        false
    }
    /// Lets `ns` nanoseconds pass on this thread (an open-loop worker waiting for its next start).
    fn sleep_ns(&self, ns: u64) {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
}

/// The operating system's monotonic clock.
pub struct MonotonicClock;

/// CLOCK_MONOTONIC in nanoseconds. Read directly rather than through `Instant::elapsed`, whose
/// checked subtraction and u128 conversion cost a third of a reading, and the runner reads the
/// clock several times per operation (callgrind: 520 instructions per operation before).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the local we pass; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds: the time of the last timer tick (a few milliseconds
/// behind), read without the TSC. For ages measured in tenths of a second on every operation,
/// where a full reading would cost as much as the runner's own (sqlite's held snapshot).
pub fn coarse_monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `monotonic_ns`; CLOCK_MONOTONIC_COARSE exists on Linux since 2.6.32.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The first reading, so timestamps start near zero.
fn origin_ns() -> u64 {
    static ORIGIN: OnceLock<u64> = OnceLock::new();
    *ORIGIN.get_or_init(monotonic_ns)
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        // Never below the origin: CLOCK_MONOTONIC does not go back.
        monotonic_ns().saturating_sub(origin_ns())
    }
}

thread_local! {
    static VIRTUAL_NS: Cell<u64> = const { Cell::new(0) };
}

/// Virtual time, one counter per thread, starting at zero on every new thread.
pub struct VirtualClock;

impl VirtualClock {
    /// Advances this thread's virtual time by `ns`.
    pub fn advance(ns: u64) {
        VIRTUAL_NS.with(|t| t.set(t.get() + ns));
    }
}

impl Clock for VirtualClock {
    fn now_ns(&self) -> u64 {
        VIRTUAL_NS.with(|t| t.get())
    }
    fn is_virtual(&self) -> bool {
        true
    }
    fn sleep_ns(&self, ns: u64) {
        VirtualClock::advance(ns);
    }
}
