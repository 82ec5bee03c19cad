//! Operation deadlines (workload key `op_timeout`): a watchdog thread per phase that cuts the
//! connection of any worker whose operation outlives its deadline.
//!
//! A client library blocked on a silent server (a black hole, a server stopped with SIGSTOP, a
//! dead network path) may wait for ever: PostgreSQL's client has no client-side deadline, the
//! others only per-request ones. The watchdog makes `op_timeout` hold whatever the library: at the
//! deadline it shuts the worker's sockets down (`backend::sockets`), again on every tick until
//! the call returns with an error, and the worker books a `timeout`. The session reconnects on its next operation.
//!
//! The deadline covers the whole operation, retries and backoff included, as a caller's would.

use crate::backend::sockets::CutHandle;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the watchdog looks: the cut comes at most this late.
const TICK: Duration = Duration::from_millis(2);

/// One worker's deadline.
struct Slot {
    state: Mutex<SlotState>,
    cut: CutHandle,
}

#[derive(Default)]
struct SlotState {
    deadline: Option<Instant>,
    fired: bool,
}

/// The deadlines of one phase's workers.
pub struct Watchdog {
    timeout: Duration,
    slots: Vec<Slot>,
    done: AtomicBool,
}

impl Watchdog {
    /// A watchdog over workers whose connections `cuts` cut, one per worker.
    pub fn new(timeout_ns: u64, cuts: Vec<CutHandle>) -> Watchdog {
        let slots = cuts.into_iter().map(|cut| Slot { state: Mutex::default(), cut }).collect();
        Watchdog { timeout: Duration::from_nanos(timeout_ns), slots, done: AtomicBool::new(false) }
    }

    /// Worker `w` starts an operation.
    pub fn arm(&self, w: usize) {
        *self.lock(w) = SlotState { deadline: Some(Instant::now() + self.timeout), fired: false };
    }

    /// Worker `w`'s operation ended; returns whether its deadline passed and its connection
    /// was cut meanwhile.
    pub fn disarm(&self, w: usize) -> bool {
        std::mem::take(&mut *self.lock(w)).fired
    }

    /// Whether worker `w`'s current operation was cut (it must not be retried).
    pub fn fired(&self, w: usize) -> bool {
        self.lock(w).fired
    }

    /// Watches until `stop`: run on its own thread while the phase's workers run.
    pub fn watch(&self) {
        while !self.done.load(Ordering::Relaxed) {
            let now = Instant::now();
            for slot in &self.slots {
                let mut state = slot.state.lock().unwrap_or_else(|p| p.into_inner());
                // Cut again on every tick until the operation returns: a session that was
                // waiting for the connect lock at the deadline starts its connect later.
                if state.deadline.is_some_and(|d| now >= d) {
                    state.fired = true;
                    // Under the slot's lock: the worker cannot disarm and move on to its next
                    // operation while its connection is being cut.
                    (slot.cut)();
                }
            }
            std::thread::sleep(TICK);
        }
    }

    /// Ends `watch`.
    pub fn stop(&self) {
        self.done.store(true, Ordering::Relaxed);
    }

    fn lock(&self, w: usize) -> std::sync::MutexGuard<'_, SlotState> {
        self.slots[w].state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    fn counting_cut() -> (Arc<AtomicU32>, CutHandle) {
        let cuts = Arc::new(AtomicU32::new(0));
        let counter = cuts.clone();
        (
            cuts,
            Arc::new(move || {
                counter.fetch_add(1, Ordering::Relaxed);
            }),
        )
    }

    #[test]
    fn an_operation_within_its_deadline_is_not_cut() {
        let (cuts, cut) = counting_cut();
        let dog = Watchdog::new(3_600_000_000_000, vec![cut]);
        std::thread::scope(|s| {
            s.spawn(|| dog.watch());
            dog.arm(0);
            assert!(!dog.disarm(0));
            dog.stop();
        });
        assert_eq!(cuts.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_operation_past_its_deadline_is_cut_until_it_returns() {
        let (cuts, cut) = counting_cut();
        let dog = Watchdog::new(1_000_000, vec![cut]);
        std::thread::scope(|s| {
            s.spawn(|| dog.watch());
            dog.arm(0);
            // Waits for the cut itself, not for a length of time: no dependence on speed.
            while !dog.fired(0) {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(dog.disarm(0));
            let after = cuts.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
            assert_eq!(cuts.load(Ordering::Relaxed), after, "no cut once the operation returned");
            dog.stop();
        });
        assert!(cuts.load(Ordering::Relaxed) >= 1);
    }
}
