//! The retry policy: how a failed operation is tried again.
//!
//! - **Bounded attempts**: at most the workload's (or target's) `retries`, and only for failures
//!   that may pass — time-outs, conflicts, lost connections, local I/O errors and unclassified
//!   ones; never a missing key, an object too large, corrupt data, a full disk or an unsupported
//!   operation, which would fail the same way again.
//! - **Backoff with full jitter**: before retry n the worker waits a uniformly random time between
//!   0 and min(1 s, 10 ms × 2ⁿ⁻¹), as AWS's SDKs do, so twenty workers that failed together (a
//!   server restart) do not hammer it together. The wait is part of the operation's latency, as
//!   a client would see it.
//! - **A retry budget** per worker, like the AWS SDKs' retry quota: 100 retries, plus one for
//!   every 5 operations that succeeded (a sustained retry rate of at most 20 %). When a server is
//!   down nothing succeeds, so every operation fails fast once the budget is spent instead of
//!   multiplying the load (and the run's length) by `retries`.
//!
//! A retry redoes the whole operation — a put writes and syncs a new file or row — never just
//! the call that failed, so a failed fsync is never retried into a reported success.

use crate::backend::ErrorKind;
use crate::clock::Clock;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// First backoff ceiling.
const BASE_NS: u64 = 10_000_000;
/// Largest backoff ceiling.
const CAP_NS: u64 = 1_000_000_000;
/// Retries a worker may spend before any operation succeeded.
const BUDGET_START: u64 = 100;
/// One more retry per this many successful operations.
const OPS_PER_RETRY: u64 = 5;

/// Whether a failure of this kind may pass on a second attempt.
pub fn retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Timeout | ErrorKind::Conflict | ErrorKind::Connection | ErrorKind::Io | ErrorKind::Other)
}

/// One worker's retry state: its jitter and its budget.
pub struct Retrier {
    rng: Xoshiro256PlusPlus,
    spent: u64,
    succeeded: u64,
}

impl Retrier {
    /// Worker `worker`'s retrier; the jitter is the same on every run with one seed.
    pub fn new(seed: u64, worker: u64) -> Retrier {
        Retrier { rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ worker.rotate_left(17) ^ 0x7265_7472_7921), spent: 0, succeeded: 0 }
    }

    /// After a failure of `kind` with `retries` retries done out of `allowed`: whether to try
    /// again. When so, the backoff has been waited on `clock`.
    pub fn again(&mut self, kind: ErrorKind, retries: u32, allowed: u32, clock: &dyn Clock) -> bool {
        if retries >= allowed || !retryable(kind) || self.spent >= BUDGET_START + self.succeeded / OPS_PER_RETRY {
            return false;
        }
        self.spent += 1;
        let ceiling = (BASE_NS << retries.min(20)).min(CAP_NS);
        clock.sleep_ns(self.rng.next_u64() % (ceiling + 1));
        true
    }

    /// Counts a successful operation toward the budget.
    pub fn succeeded(&mut self) {
        self.succeeded += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;

    #[test]
    fn retries_stop_at_the_count_the_kind_and_the_budget() {
        let clock = VirtualClock;
        let mut r = Retrier::new(1, 0);
        assert!(!r.again(ErrorKind::NotFound, 0, 3, &clock), "a missing key stays missing");
        assert!(!r.again(ErrorKind::NoSpace, 0, 3, &clock), "a full disk stays full");
        assert!(!r.again(ErrorKind::Timeout, 3, 3, &clock), "three retries allowed, three done");
        let granted = (0..100).filter(|_| r.again(ErrorKind::Timeout, 0, 3, &clock)).count();
        assert_eq!(granted as u64, BUDGET_START, "the starting budget");
        (0..OPS_PER_RETRY).for_each(|_| r.succeeded());
        assert!(r.again(ErrorKind::Connection, 0, 3, &clock) && !r.again(ErrorKind::Connection, 0, 3, &clock), "one more per 5 successes");
    }

    #[test]
    fn backoff_waits_up_to_the_doubling_ceiling_on_the_clock() {
        let clock = VirtualClock;
        let mut r = Retrier::new(7, 3);
        for retries in 0..8u32 {
            let before = clock.now_ns();
            assert!(r.again(ErrorKind::Timeout, retries, 10, &clock));
            let waited = clock.now_ns() - before;
            assert!(waited <= (BASE_NS << retries).min(CAP_NS), "retry {retries} waited {waited} ns");
        }
    }
}
