//! The group of processes running one job: one process on a single host (`Solo`), or N MPI
//! ranks on many (`crate::mpi`, cargo feature `mpi`; see docs/multi-host.md).
//!
//! The runner calls these hooks at the same points whatever the group is; with one process they
//! cost nothing and change nothing. With several ranks every hook is a collective call that every
//! rank makes in the same order, which is how ranks start each phase together, see every rank's
//! workers' statistics (and so take the same decisions and write the same merged report), and
//! learn that another rank failed.

use super::keytable::{KeySpace, KeyTable};
use crate::clock::Clock;
use crate::error::Error;
use crate::job::{CasePlan, Plan};
use crate::report::model::{CaseResult, RunReport};
use crate::stats::WorkerStats;

/// What ended, or should end, the run on some rank: combined over all ranks at each case's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stops {
    /// Ctrl-C (or mpirun forwarding a signal).
    pub interrupted: bool,
    /// The run's `--timeout` passed.
    pub timed_out: bool,
}

/// The processes that run one job together. Every method is called by every rank at the same
/// point of the run (the single-process implementations are the identity).
pub trait Ranks {
    /// This process's rank, 0 for a single process.
    fn rank(&self) -> usize {
        0
    }
    /// How many ranks run the job.
    fn size(&self) -> usize {
        1
    }
    /// Whether this rank writes the report and prints it (rank 0).
    fn is_lead(&self) -> bool {
        self.rank() == 0
    }
    /// The plan this rank runs: its share of every case's workers, keys and counts. Every rank
    /// computes every share, so a plan that cannot be shared fails on every rank alike.
    /// On one host that is all of it, run as rank 0 would: a job written for several hosts (a
    /// `{rank}` in a path) runs here as it does there, and as `validate` checks it.
    fn local_plan(&self, plan: &Plan) -> Result<Plan, String> {
        let mut local = plan.clone();
        local.work_dir = plan.work_dir.as_deref().map(|d| crate::backend::options::with_rank(d, 0));
        for target in &mut local.targets {
            target.options.expand_rank(0);
        }
        Ok(local)
    }
    /// The directory name and namespace name of this rank's run directory.
    fn run_directory(&self, run_id: &str) -> (String, String) {
        (format!("stowbench-{run_id}"), "sb".into())
    }
    /// Agrees on rank 0's run id and on every rank's preflight; the error names the failing rank.
    fn start_run(&self, run_id: String, _clock: &dyn Clock) -> String {
        run_id
    }
    /// Every rank's preflight verdict; the error names each rank that refused.
    fn preflight(&self, verdict: Result<(), Error>) -> Result<(), Error> {
        verdict
    }
    /// Whether to stop before the next case (every rank stops if any was interrupted).
    fn stop_before_case(&self, interrupted: bool) -> bool {
        interrupted
    }
    /// The start barrier of a phase: the phase's time origin in this process's clock (None: take
    /// the clock's now), or why the case is over on every rank (another rank failed).
    fn phase_start(&self, _clock: &dyn Clock) -> Result<Option<u64>, String> {
        Ok(None)
    }
    /// After a phase: every rank's workers' statistics (on the first rank's clock), to merge as
    /// if one process had run them all, and every rank's writer-lock wait summed; or why the case
    /// is over on every rank.
    fn phase_end(&self, _label: &str, workers: Vec<WorkerStats>, lock_wait_ns: u64) -> Result<(Vec<WorkerStats>, u64), String> {
        Ok((workers, lock_wait_ns))
    }
    /// The end of a case: this rank's result in, the case's result for the report out (every
    /// rank's disk, connections and resources added, its failure named); the stops combined.
    fn case_end(&self, _case: &CasePlan, local: CaseResult, stops: Stops) -> (CaseResult, Stops) {
        (local, stops)
    }
    /// Adds what the group knows about itself (ranks, hosts, clock offsets) to the report.
    fn describe(&self, _report: &mut RunReport) {}
    /// Whether this rank counts its host's servers in figures summed over the ranks (the bytes
    /// they fetch from the device): every rank on a host sees the same servers, so only the
    /// host's first rank does.
    fn counts_host_servers(&self) -> bool {
        true
    }

    // Shared keys (`[mpi] keys = "shared"`): one namespace and key space for every rank.

    /// Whether every rank works in one namespace: the lead makes, prepares and removes it, and
    /// the others use it between.
    fn shares_namespace(&self) -> bool {
        false
    }
    /// Runs `step` on the lead first and then, once it is done, on the other ranks (a run
    /// directory the lead must make before the others look for it); with one namespace per
    /// rank, on every rank at once.
    fn lead_first(&self, step: &mut dyn FnMut()) {
        step()
    }
    /// Why this rank cannot share `plan`'s stores with the other ranks, if it cannot.
    fn refuse_sharing(&self, _plan: &Plan) -> Result<(), String> {
        Ok(())
    }
    /// The keys this rank's share of `case` (from `local_plan`) writes and reads.
    fn key_space(&self, case: &CasePlan) -> KeySpace {
        KeySpace::own(case.objects)
    }
    /// The seed payloads are made from: one for every rank when keys are shared, so any rank can
    /// check a get against what its writer put.
    fn payload_seed(&self, local_seed: u64) -> u64 {
        local_seed
    }
    /// With one namespace: the lead has prepared the case's store (the lead calls this after
    /// preparing it, the others before opening it); or why the case is over on every rank.
    fn store_ready(&self) -> Result<(), String> {
        Ok(())
    }
    /// After a phase that wrote: every rank's state of the keys it writes, taken into `keys`, so
    /// each rank verifies a get of any key against what that key's writer stored.
    fn share_keys(&self, _keys: &KeyTable, _space: KeySpace, _objects: u64) -> Result<(), String> {
        Ok(())
    }
    /// This rank is done with the case's store (measured, or failed): with one namespace, the
    /// lead removes it only after every rank has said so.
    fn leave_case(&self) {}

    // Ending a phase early on every rank.

    /// Tells the other ranks to end the current phase now: this rank's share of it ended early
    /// (a worker panicked, or it was interrupted). Without it they would learn only at the end of
    /// their own share, which for a `duration` phase can be the whole duration.
    fn request_stop(&self) {}
    /// Whether another rank asked to end the current phase (polled while the phase runs).
    fn stop_requested(&self) -> bool {
        false
    }
}

/// One process: the single-host run.
pub struct Solo;

impl Ranks for Solo {}
