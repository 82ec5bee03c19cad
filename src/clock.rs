//! Clocks for the runner: the monotonic clock for real backends, a virtual one for `sim`.
//!
//! The virtual clock keeps one time per thread, advanced only by the `sim` backend, so tests of
//! the runner, statistics and reports are exact and repeatable whatever the machine is doing.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

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

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        origin().elapsed().as_nanos() as u64
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
