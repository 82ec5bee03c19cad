//! Open-loop load (`rate = "500/s"`): each worker starts its operations on a schedule instead of
//! as soon as the previous one ends, and every operation is also timed from its *intended* start.
//!
//! Why: a closed-loop client that meets a stall simply stops sending, so the stall shows up as one
//! slow operation — the requests that real clients would have sent meanwhile are never made
//! ("coordinated omission"). Timing from the intended start charges each of them the wait it
//! would have had, as wrk2 and YCSB do. The time from the actual start (service time) is kept
//! beside it.
//!
//! The schedule runs on the worker's storage clock (real time minus stowbench's own payload work),
//! like every other timestamp of the runner, so making bodies never makes the storage look late.

use crate::job::{Arrivals, Rate};
use crate::stats::ScheduleTally;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// One worker's share of an open-loop schedule.
pub struct Schedule {
    rate: Rate,
    start_ns: u64,
    /// This worker's position: its k-th start is the (w + k·workers)-th of the whole schedule.
    worker: u64,
    workers: u64,
    started: u64,
    /// Poisson arrivals: the previous intended start, and the gap generator.
    last_ns: f64,
    rng: Xoshiro256PlusPlus,
    /// How much later than asked a sleep of this thread usually ends (a running mean), so the
    /// worker can wake that much early and spin the rest.
    oversleep_ns: u64,
}

impl Schedule {
    /// Worker `w` of `workers`, whose phase started at `start_ns` (storage clock); `stream` seeds
    /// its random gaps.
    pub fn new(rate: Rate, w: u64, workers: u64, start_ns: u64, stream: u64) -> Schedule {
        Schedule {
            rate,
            start_ns,
            worker: w,
            workers,
            started: 0,
            last_ns: start_ns as f64,
            rng: Xoshiro256PlusPlus::seed_from_u64(stream ^ 0x6f70_656e_6c6f_6f70),
            oversleep_ns: 0,
        }
    }

    /// The intended start of this worker's next operation.
    pub fn next_start_ns(&mut self) -> u64 {
        let k = self.started;
        self.started += 1;
        match self.rate.arrivals {
            // Worker w takes every workers-th slot of one evenly spaced schedule, so the threads
            // together start operations evenly too. Computed from k, never accumulated: no drift.
            Arrivals::Uniform => self.start_ns + ((self.worker + k * self.workers) as f64 * 1e9 / self.rate.per_s) as u64,
            // Each worker is an independent Poisson source of rate/workers; their sum is a Poisson
            // source of the whole rate.
            Arrivals::Poisson => {
                let mean_gap_ns = self.workers as f64 * 1e9 / self.rate.per_s;
                let u = crate::workload::keys::unit(&mut self.rng); // [0, 1): 1 - u is never 0
                self.last_ns += -(1.0 - u).ln() * mean_gap_ns;
                self.last_ns as u64
            }
        }
    }

    /// How long before a start the worker should wake (at most 1 ms).
    pub fn wake_early_ns(&self) -> u64 {
        self.oversleep_ns.min(1_000_000)
    }

    /// Learns from a sleep that ended `overslept_ns` later than asked.
    pub fn learn_oversleep(&mut self, overslept_ns: u64) {
        self.oversleep_ns = (self.oversleep_ns * 7 + overslept_ns.min(10_000_000)) / 8;
    }

    /// A new tally for this schedule's worker.
    pub fn tally(&self) -> ScheduleTally {
        ScheduleTally { rate_per_s: self.rate.per_s, arrivals: self.rate.arrivals, ..ScheduleTally::default() }
    }
}

/// Asks the kernel to wake sleeping threads of this process's caller precisely: the default 50 µs
/// timer slack would make every scheduled start up to 50 µs late.
pub fn precise_sleeps() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_workers_interleave_into_one_even_schedule() {
        let rate = Rate { per_s: 1000.0, arrivals: Arrivals::Uniform };
        let mut a = Schedule::new(rate, 0, 2, 5_000, 1);
        let mut b = Schedule::new(rate, 1, 2, 5_000, 2);
        let starts: Vec<u64> = (0..3).flat_map(|_| [a.next_start_ns(), b.next_start_ns()]).collect();
        assert_eq!(starts, [5_000, 1_005_000, 2_005_000, 3_005_000, 4_005_000, 5_005_000]);
    }

    #[test]
    fn poisson_gaps_average_the_rate_and_repeat_with_the_seed() {
        let rate = Rate { per_s: 1000.0, arrivals: Arrivals::Poisson };
        let mut s = Schedule::new(rate, 0, 4, 0, 7);
        let starts: Vec<u64> = (0..100_000).map(|_| s.next_start_ns()).collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "starts never go back");
        let mean_gap = *starts.last().unwrap() as f64 / starts.len() as f64;
        assert!((mean_gap / 4e6 - 1.0).abs() < 0.02, "a quarter of 1000/s: 4 ms apart on average, got {mean_gap} ns");
        let mut again = Schedule::new(rate, 0, 4, 0, 7);
        assert!(starts.iter().take(100).all(|&t| t == again.next_start_ns()), "the same seed gives the same schedule");
    }
}
