//! The canonical report: what a run measured and under which conditions, as versioned JSON.
//!
//! Field names carry their unit last (`_ns`, `_bytes`, `_per_s`). Every reporter (table, CSV,
//! JSON) renders from these structures, and `stowbench report FILE` reads them back, so they
//! derive both Serialize and Deserialize. `schema/report.schema.json` describes the same shape and
//! tests validate real output against it: change both together and bump `SCHEMA_VERSION`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Version of this report format.
pub const SCHEMA_VERSION: u32 = 2;

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    /// Version of the report format.
    pub schema_version: u32,
    /// "stowbench".
    pub tool: String,
    /// stowbench's version.
    pub tool_version: String,
    /// Unique id of the run (also in namespace markers).
    pub run_id: String,
    /// "running" while cases are still being added, then "complete", "interrupted", "failed" or
    /// "timed_out" (the run's `--timeout` ended it).
    pub status: RunStatus,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// End time, RFC 3339 UTC, once finished.
    pub finished_at: Option<String>,
    /// The command line, as given.
    pub command: Vec<String>,
    /// Run name from the job.
    pub name: String,
    /// Where the job came from.
    pub job_source: String,
    /// Seed for keys, sizes and payloads.
    pub seed: u64,
    /// The resolved plan: targets, workloads and case ids.
    pub plan: serde_json::Value,
    /// The machine and software the run used.
    pub environment: Environment,
    /// A multi-host run (MPI, docs/multi-host.md): every rank, its host and how its clock was
    /// related to the first rank's. Absent from single-host runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<RankInfo>>,
    /// Sizes at which one target overtakes another (`report::breakeven`), per workload, phase,
    /// thread count and operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub break_even: Vec<super::breakeven::BreakEven>,
    /// The table's rows as data (`report::table::headlines`): per workload, phase, thread count
    /// and size, each target's mean over its repeats with spread and 95 % interval, and whether
    /// the winner's margin is beyond that spread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headlines: Vec<Headline>,
    /// Set when the run is a built-in recipe (`stowbench recipe run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<RecipeRun>,
    /// Finished cases, in run order.
    pub cases: Vec<CaseResult>,
    /// Finished fio cases, in run order.
    #[serde(default)]
    pub fio_cases: Vec<crate::fio::FioCaseResult>,
    /// fio cases that failed: case id and why.
    #[serde(default)]
    pub fio_failures: Vec<FioFailure>,
    /// Cautions about the numbers, each with its kind, cases and advice.
    pub warnings: Vec<super::warnings::Warning>,
}

/// Where a run stands; serialized as the snake_case names of the schema (`running`, `complete`,
/// `interrupted`, `failed`, `timed_out`), the strings reports have always carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Cases are still being added (the report is rewritten after each).
    Running,
    /// Every case ran and passed.
    Complete,
    /// Ctrl-C ended it; the finished cases are kept.
    Interrupted,
    /// Some case failed.
    Failed,
    /// The run's `--timeout` ended it.
    TimedOut,
}

impl RunStatus {
    /// The name reports and tables show.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
        }
    }

    /// What a reader of a saved report should know about this status, when there is something:
    /// a report still "running" was last written mid-run, and if that run is over, it ended
    /// before its final write.
    pub fn caveat(self) -> Option<&'static str> {
        (self == RunStatus::Running).then_some(
            "this report was written while the run was in progress and holds the cases finished by then; if that run is over, \
             it ended before its final write (a full disk, a kill -9, a lost machine)",
        )
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How one case ended; serialized as `ok`, `failed` or `skipped`, as reports always carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    /// It ran and passed: its figures count.
    Ok,
    /// An error, the error budget, verification or a deadline failed it (`failure` says which).
    Failed,
    /// It did not run (in reports of versions that skipped cases).
    Skipped,
}

impl CaseStatus {
    /// The name reports and tables show.
    pub fn name(self) -> &'static str {
        match self {
            CaseStatus::Ok => "ok",
            CaseStatus::Failed => "failed",
            CaseStatus::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for CaseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A fio case that did not produce a result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FioFailure {
    /// The fio case id.
    pub case_id: String,
    /// What went wrong.
    pub message: String,
}

/// A run of a built-in recipe: which one, at what scale, and which targets it left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RecipeRun {
    /// Recipe name (`stowbench recipe list`).
    pub name: String,
    /// Factor applied to every count, size and duration; 1 is the published size.
    pub scale: f64,
    /// Targets not run, with the reason.
    pub skipped_targets: Vec<SkippedTarget>,
}

/// A target a recipe did not run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SkippedTarget {
    /// Target name.
    pub target: String,
    /// Why it was left out.
    pub reason: String,
    /// What would enable it.
    pub enable: String,
}

/// The machine, kernel and software behind the numbers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// Operating system name and version.
    pub os: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Logical CPUs.
    pub cpu_count: u32,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Whether stowbench ran as root (needed for cold-cache runs).
    pub is_root: bool,
    /// SQLite library version compiled into stowbench.
    pub sqlite_version: String,
    /// Where the run stored data.
    pub work_dir: String,
    /// Filesystem facts of the work directory.
    pub work_dir_filesystem: Option<FilesystemInfo>,
    /// Proactive reclaim that evicts memory (page cache included) nobody touched for a while,
    /// e.g. "DAMON pageout: memory idle for 30 s or more is paged out". `None`: none found. A
    /// "warm" read of data idle longer than that may come from disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_reclaim: Option<String>,
    /// The clock that timed real backends' operations (`None` in reports before session 21, and
    /// in runs refused before they started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
}

/// The clock behind every latency and throughput of a run (`stowbench run --clock`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClockInfo {
    /// "tsc" (the CPU's time-stamp counter read directly, as fio's `clocksource=cpu`) or
    /// "clock_gettime" (CLOCK_MONOTONIC).
    pub source: String,
    /// Its rate, and why it was chosen.
    pub detail: String,
    /// TSC only: how far its time ran from CLOCK_MONOTONIC over the run, in parts per million
    /// (a check that its calibration held).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ppm: Option<f64>,
}

/// The filesystem a path lives on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FilesystemInfo {
    /// The path asked about.
    pub path: String,
    /// Mount point containing it.
    pub mount_point: String,
    /// Filesystem type, e.g. "ext4".
    pub fs_type: String,
    /// Mount source (device).
    pub source: String,
    /// Mount options in effect, the mount's then the filesystem's own, as `mount` lists them:
    /// e.g. "rw,relatime,discard" (reports before session 19 hold the mount's alone).
    pub mount_options: String,
    /// ext4 only: whether it has a journal (`/sys/fs/ext4/DEV/journal_task`). Without one, fsync
    /// writes metadata in place, and creating files soon after many were deleted is slow (the
    /// inode allocator steps over recently deleted inodes for a minute or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<bool>,
}

impl FilesystemInfo {
    /// For people: "ext4 (rw,relatime), no journal".
    pub fn summary(&self) -> String {
        format!("{} ({}){}", self.fs_type, self.mount_options, if self.journal == Some(false) { ", no journal" } else { "" })
    }

    /// Whether `other` is the same mounted filesystem.
    pub fn same_mount(&self, other: &FilesystemInfo) -> bool {
        self.mount_point == other.mount_point && self.source == other.source
    }
}

impl RunReport {
    /// Each target whose data lived on another filesystem than the work directory's (a `path`
    /// option), with that filesystem, once per target and mount: the work directory's filesystem
    /// alone would misstate where those numbers were measured.
    pub fn data_filesystems_elsewhere(&self) -> Vec<(&str, &FilesystemInfo)> {
        let work = self.environment.work_dir_filesystem.as_ref();
        let mut found: Vec<(&str, &FilesystemInfo)> = Vec::new();
        for c in &self.cases {
            let Some(f) = c.filesystem.as_ref() else { continue };
            if work.is_none_or(|w| !w.same_mount(f)) && !found.iter().any(|(t, g)| *t == c.target && g.same_mount(f)) {
                found.push((&c.target, f));
            }
        }
        found
    }
}

/// One case: a target × workload × size × threads × repeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    /// Stable case id.
    pub case_id: String,
    /// "ok", "failed" (error, error budget or verification) or "skipped".
    pub status: CaseStatus,
    /// Why it failed, if it did.
    pub failure: Option<String>,
    /// Target name.
    pub target: String,
    /// Backend registry name.
    pub backend: String,
    /// Whether the backend is a test tool (sim) rather than a real store.
    pub backend_is_test_tool: bool,
    /// Workload name.
    pub workload: String,
    /// Size label, e.g. "94kB".
    pub size_label: String,
    /// Largest object size in bytes.
    pub size_bytes_max: u64,
    /// Distinct keys.
    pub objects: u64,
    /// Worker threads.
    pub threads: u32,
    /// Repeat number, from 1.
    pub repeat: u32,
    /// Backend versions, effective options and durability.
    pub backend_info: serde_json::Value,
    /// What a successful put guarantees.
    pub durability: String,
    /// "warm" (page cache kept), "cold" (dropped before read phases) or "direct" (the backend
    /// reads and writes around the page cache: O_DIRECT). Each phase says its own.
    pub cache_state: String,
    /// Filesystem of the backend's data, where local.
    pub filesystem: Option<FilesystemInfo>,
    /// Time for each worker to open its session, in nanoseconds.
    pub connect_ns: Vec<u64>,
    /// The untimed preload, if any.
    pub preload: Option<PreloadResult>,
    /// Measured phases in order.
    pub phases: Vec<PhaseResult>,
    /// CPU and memory of stowbench and of the server, during the case.
    pub resources: Resources,
    /// Space occupied after the load.
    pub disk: DiskResult,
    /// Read-back checks.
    pub verification: Verification,
    /// Wall time of the whole case (prepare to cleanup), in nanoseconds.
    pub wall_ns: u64,
    /// Share of the workers' time in the measured phases that went to stowbench's own payload
    /// work (making bodies, checking reads): 0.0–1.0. That time is kept out of every latency and
    /// window, but a high share means the client, not the storage, may have been the limit.
    /// Absent from reports before 0.2.
    #[serde(default)]
    pub own_work_share: Option<f64>,
    /// File-server workloads (upload, download): the catalog and its after-run audit. Absent
    /// for other workloads and from reports before 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_server: Option<FileServerResult>,
    /// A multi-host run: what each rank did (the case's figures above are all ranks merged).
    /// Absent from single-host runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_rank: Option<Vec<RankCase>>,
    /// A multi-host run: the ranks of each host together (several ranks on one host share its
    /// server and its cores). Absent from single-host runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_host: Option<Vec<HostCase>>,
}

/// What the ranks on one host did in a case of a multi-host run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostCase {
    /// The host (MPI's processor name).
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<u32>,
    /// Its ranks' workers.
    pub threads: u32,
    /// Client CPU and memory summed over its ranks' processes (a sum of peaks: at most the
    /// host's peak, since the ranks' peaks need not coincide); the server on the host once, as
    /// its first rank sampled it (every rank there samples the same server).
    pub resources: Resources,
    /// Its ranks' share of each measured phase.
    pub phases: Vec<HostPhase>,
}

/// One host's share of a phase: its ranks' operations together.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostPhase {
    /// Phase label.
    pub phase: String,
    /// Successful operations of its ranks, all kinds.
    pub count: u64,
    /// Bytes moved by them.
    pub bytes: u64,
    /// Failed operations of its ranks.
    pub errors: u64,
    /// Its share of the phase's successful operations over all hosts, 0 to 1.
    pub count_share: f64,
    /// Its share of the phase's bytes over all hosts, 0 to 1 (0 when the phase moved none).
    pub bytes_share: f64,
}

/// One rank (process) of a multi-host run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RankInfo {
    /// MPI rank, from 0.
    pub rank: u32,
    /// The host it ran on (MPI's processor name).
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// Its clock minus rank 0's, in nanoseconds, from the ping-pong round with the smallest
    /// round trip; subtracted from its timestamps before windows are computed.
    pub clock_offset_ns: i64,
    /// That round's round-trip time: the offset is known to within half of it.
    pub clock_rtt_ns: u64,
}

/// What one rank did in a case of a multi-host run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankCase {
    /// MPI rank.
    pub rank: u32,
    /// Its host.
    pub host: String,
    /// "ok" or "failed" (this rank's own verdict; the case fails if any rank's does).
    pub status: String,
    /// Why this rank failed, if it did.
    pub failure: Option<String>,
    /// Its workers.
    pub threads: u32,
    /// Its distinct keys.
    pub objects: u64,
    /// Its share of each measured phase.
    pub phases: Vec<RankPhase>,
    /// CPU and memory of this rank's process (and of a server on its host) during the case.
    pub resources: Resources,
    /// Space its data occupied.
    pub disk: DiskResult,
    /// Wall time of its case, in nanoseconds.
    pub wall_ns: u64,
}

/// One rank's share of a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankPhase {
    /// Phase label.
    pub phase: String,
    /// Its first worker's start to its last worker's end, on rank 0's clock.
    pub window_total_ns: u64,
    /// Its operations and bytes over that window.
    pub throughput_total: Throughput,
    /// Per operation kind.
    pub ops: BTreeMap<String, RankOp>,
}

/// One rank's operations of one kind in a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RankOp {
    /// Successful operations.
    pub count: u64,
    /// Bytes moved by them.
    pub bytes: u64,
    /// Failed operations.
    pub errors: u64,
    /// Its latency percentiles.
    pub latency: LatencySummary,
    /// Its latency histogram: base64 of HdrHistogram's compressed V2 encoding (as in
    /// HdrHistogram interval logs), so the merged percentiles can be checked or recombined.
    pub histogram: String,
}

impl CaseResult {
    /// `own_work_share` from the phases: own time over own plus storage time, all workers.
    pub fn compute_own_work_share(&self) -> Option<f64> {
        let own: u64 = self.phases.iter().map(|p| p.payload_generation_ns + p.verification_ns + p.bookkeeping_ns).sum();
        let storage: u64 = self.phases.iter().map(|p| p.window_total_ns * self.threads as u64).sum();
        (own + storage > 0).then(|| own as f64 / (own + storage) as f64)
    }
}

/// The untimed load before the first phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreloadResult {
    /// Objects put.
    pub ops: u64,
    /// Bytes put.
    pub bytes: u64,
    /// Time taken, in nanoseconds.
    pub elapsed_ns: u64,
    /// Failed puts.
    pub errors: u64,
    /// The first failures, as in `OpResult::first_errors`: why the preload failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_errors: Vec<String>,
}

/// One measured phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Phase label: "put", "get", "mix get90 put10".
    pub phase: String,
    /// Per operation kind ("put", "get", ...).
    pub ops: BTreeMap<String, OpResult>,
    /// From the first worker's start to the last worker's end, in nanoseconds.
    pub window_total_ns: u64,
    /// While every worker was running: last start to first end, in nanoseconds.
    pub window_all_active_ns: u64,
    /// Throughput over the total window.
    pub throughput_total: Throughput,
    /// Throughput while all workers were active (steady state), when that window is long enough.
    pub throughput_all_active: Option<Throughput>,
    /// Per-second series (all operations together).
    pub timeline_per_second: Vec<SecondPoint>,
    /// Latency by operation index: how it changed as the store filled.
    pub timeline_by_op_index: Vec<IndexPoint>,
    /// Operations per index bucket.
    pub op_index_bucket_ops: u64,
    /// Mean latency of the last 10% of operations over the first 10% (1.0 = no growth).
    pub growth_ratio: Option<f64>,
    /// Nanoseconds sessions waited for an exclusive writer lock inside the backend.
    pub lock_wait_ns: u64,
    /// stowbench's own time making put bodies, summed over workers; kept out of every latency
    /// and throughput window. Absent from reports before 0.2.
    #[serde(default)]
    pub payload_generation_ns: u64,
    /// stowbench's own time hashing and checking gets, summed over workers; kept out of every
    /// latency and throughput window. Absent from reports before 0.2.
    #[serde(default)]
    pub verification_ns: u64,
    /// stowbench's own bookkeeping between operations (recording one, choosing and naming the
    /// next key), summed over workers; kept out of every throughput window in closed-loop
    /// phases (latencies never held it). Absent when 0 (open-loop phases, older reports).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bookkeeping_ns: u64,
    /// The page cache as this phase met it: "warm" (whatever earlier phases left in it),
    /// "cold" (dropped just before the phase) or "direct" (the backend bypasses it). Absent from
    /// reports before 0.3.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cache_state: String,
    /// Cold phases of a server started by scripts/services.sh: the server was restarted just
    /// before, so its own cache (shared buffers, buffer pool) was empty too. A server stowbench
    /// did not start is never restarted: its cache stays warm (a `server_cache_warm` warning).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_restarted: bool,
    /// Bytes fetched from the storage layer during the measured part of the phase, by the
    /// client process and the server's processes (`read_bytes` of /proc/PID/io: page-cache
    /// misses and their readahead): how much of a "cold" phase really came from the device.
    /// Absent where the kernel does not say, and in multi-process runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_read_bytes: Option<u64>,
    /// Workers that stopped early because every operation they tried failed for the workload's
    /// `give_up_after` (a dead server); the phase ended when all had stopped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gave_up_workers: u32,
    /// Workers that had no operation to do (more threads than the phase's operations): the
    /// phase ran on fewer threads than the case names (an `idle_threads` warning). Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_workers: u32,
    /// Why the store could not be brought to rest before this phase (`Backend::settle`: SQLite's
    /// WAL checkpoint failed, e.g. on an I/O error; or the filesystem reported a failed write-back
    /// of dirty pages, `writeback_settle`): the phase ran anyway, so that acknowledged
    /// data is still read and checked, but it may carry work the previous phase left deferred
    /// (a `store_not_at_rest` warning). Absent when the store came to rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_at_rest: Option<String>,
    /// The dirty pages written back just before this phase, untimed (workload key
    /// `settle_writeback`): how much there was and how long it took. Absent when the workload
    /// turned it off, when nothing on this machine holds the data (a remote server or `sim`),
    /// and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback_settle: Option<WritebackSettle>,
    /// Open-loop phases (`rate`): the schedule and how well it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
}

/// The write-back of dirty pages before a phase (`settle_writeback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WritebackSettle {
    /// "filesystems" (syncfs of each filesystem holding the case's data) or "all" (sync: a server
    /// on this machine keeps its files where stowbench does not know; a fio case on a made
    /// filesystem or a raw device).
    pub scope: String,
    /// For "filesystems": one directory on each filesystem written back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<PathBuf>,
    /// The machine's dirty and under-writeback memory just before (Dirty + Writeback of
    /// /proc/meminfo), whichever program left it.
    pub dirty_bytes_before: u64,
    /// How long the write-back took, in nanoseconds; outside every window.
    pub ns: u64,
    /// What the filesystem reported when the write-back failed (the phase ran anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How an open-loop phase kept to its schedule.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Scheduled operations per second, all threads together.
    pub rate_per_s: f64,
    /// "uniform" (evenly spaced starts) or "poisson" (exponential gaps).
    pub arrivals: String,
    /// Operations started on the schedule.
    pub started: u64,
    /// Mean delay of an actual start behind its intended start, in nanoseconds.
    pub mean_lag_ns: f64,
    /// Largest such delay, in nanoseconds.
    pub max_lag_ns: u64,
    /// How far behind its schedule the latest worker's last start was, in nanoseconds.
    pub end_lag_ns: u64,
    /// Whether the backend kept up: the end lag is within two of a worker's gaps (or 10 ms).
    pub kept_up: bool,
}

/// One row of the table: the targets at one size of one workload, phase and thread count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Headline {
    /// Workload name.
    pub workload: String,
    /// Phase label.
    pub phase: String,
    /// Worker threads.
    pub threads: u32,
    /// Object size as written in the job.
    pub size_label: String,
    /// Largest object size, in bytes (0: empty objects, ranked by operations per second).
    pub size_bytes: u64,
    /// What `mean` and the interval measure: "bytes_per_s" or "ops_per_s".
    pub metric: String,
    /// Over which span: "steady_state_window" (the all-active window, which every phase of this
    /// workload, phase and thread count had) or "whole_phase" (one of them was too short for a
    /// window, so every figure of the block is its whole phase's). Empty in reports from before
    /// it was recorded, whose figures mixed the two.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub measure: String,
    /// Each target, highest mean first.
    pub figures: Vec<HeadlineFigure>,
    /// The target with the highest mean.
    pub winner: Option<String>,
    /// The second highest.
    pub runner_up: Option<String>,
    /// Winner's mean over the runner-up's.
    pub ratio: Option<f64>,
    /// "clear" (the winner's 95 % interval lies above the runner-up's), "tie" (they overlap),
    /// "unjudged" (one of them ran once), "only_result", "no_result" or "too_short" (a target's
    /// phase was too short to measure: no ranking).
    pub verdict: String,
}

/// One target's figure in a headline row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeadlineFigure {
    /// Target name.
    pub target: String,
    /// Repeats that finished.
    pub repeats: usize,
    /// Repeats that failed (left out).
    pub failed: usize,
    /// Mean over the repeats, in the row's metric.
    pub mean: Option<f64>,
    /// Coefficient of variation (sample standard deviation over the mean), two or more repeats.
    pub cv: Option<f64>,
    /// 95 % confidence interval of the mean (Student's t), two or more repeats; its lower end is
    /// cut at zero (a rate is never negative; a few noisy repeats can put the t interval below).
    pub ci95_low: Option<f64>,
    /// Its upper end.
    pub ci95_high: Option<f64>,
    /// Median of the repeats' p99 latencies, in nanoseconds (open loop: from intended starts).
    pub p99_ns_median: Option<f64>,
    /// The fewest latency samples one repeat's p99 came from, when under `FEW_SAMPLES_FOR_P99`
    /// (100): below that the p99 is the largest sample, and every format calls it "max".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_from_samples: Option<u64>,
    /// In a phase of more than one kind of operation (a mix), the operation whose p99 that is:
    /// each repeat's slowest by p99; several joined by "/" when the slowest differed between
    /// repeats. Absent in a phase of one kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_op: Option<String>,
    /// Open loop: the median of the repeats' p99 service times (from each operation's actual
    /// start) of the same operation as `p99_ns_median`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_p99_ns_median: Option<f64>,
    /// The share of the repeats' operations that found no object (misses: no errors, but no
    /// object read either), when any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_share: Option<f64>,
    /// Repeats in which no operation succeeded (every one a miss): nothing to rank.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub without_success: usize,
    /// Open-loop repeats that fell behind their schedule.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub behind_schedule: usize,
    /// Repeats whose phase did its operations within one tick of the clock (0 ns): too short to
    /// measure a rate, left out of `mean`; the row then ranks no one (verdict `too_short`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub too_short: usize,
}

/// Fewer latency samples than this make a p99 the largest sample (HDR's 99th percentile of n
/// samples is the ⌈0.99 n⌉-th; at 100 it is the second largest): the table then prints it as
/// "max".
pub const FEW_SAMPLES_FOR_P99: u64 = 100;

/// The fewest latency samples that give a percentile (99.9 for p99.9) other than the largest
/// sample: the q-quantile of n samples is the ⌈q·n⌉-th smallest, which is the largest until n
/// reaches 1 / (1 − q): 2 for p50, 10 for p90, 100 for p99, 1000 for p99.9. From fewer, the
/// table, the page and the charts show no such percentile, as it would only repeat the max.
pub fn samples_for_percentile(percentile: f64) -> u64 {
    // Rounded: 100 / (100 − 99.9) is 1000.0000000000009 in floating point.
    (100.0 / (100.0 - percentile)).round() as u64
}

/// Whether `samples` latency samples give a `percentile` (99.9 for p99.9) other than their
/// largest (`samples_for_percentile`).
pub fn supports_percentile(samples: u64, percentile: f64) -> bool {
    samples >= samples_for_percentile(percentile)
}

/// For `skip_serializing_if`: a count or duration of zero is left out of the JSON.
fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// Results for one operation kind in a phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpResult {
    /// Successful operations.
    pub count: u64,
    /// Bytes moved by successful operations.
    pub bytes: u64,
    /// Failed operations by error kind (after retries).
    pub errors: BTreeMap<String, u64>,
    /// Operations that found no object where none was owed (not errors): the key was absent, or
    /// another worker was deleting it at the same time (see `raced_misses`).
    pub misses: u64,
    /// Of `misses`, those of a key that was present but that a concurrent delete (or a failed put
    /// or delete, whose outcome is unknown) may have removed. Absent from reports before 0.2.
    #[serde(default)]
    pub raced_misses: u64,
    /// Retried attempts.
    pub retries: u64,
    /// Latency of successful operations (including retries), in nanoseconds: from the actual
    /// start (service time).
    pub latency: LatencySummary,
    /// Latency of the misses (operations that found no object), in nanoseconds, apart from the
    /// successes': their time counts in the phase's window like any operation's. Absent when
    /// nothing missed, and from reports of earlier versions (which left the misses' time out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_latency: Option<LatencySummary>,
    /// Open-loop phases: latency of successful operations from their intended start, which
    /// includes the time an operation waited behind a late schedule (coordinated-omission safe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_latency: Option<LatencySummary>,
    /// The first failures (after retries), at most `ERRORS_LISTED`, each as "<op> <key>: <the
    /// backend's message>", which says which call failed on what. Absent when nothing failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_errors: Vec<String>,
}

/// Most failures listed per operation and phase in `OpResult::first_errors`.
pub const ERRORS_LISTED: usize = 10;

/// Latency distribution, from merged per-worker HDR histograms (3 significant digits).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub samples: u64,
    /// Mean, in nanoseconds.
    pub mean_ns: f64,
    /// Standard deviation, in nanoseconds.
    pub stddev_ns: f64,
    /// Minimum, in nanoseconds.
    pub min_ns: u64,
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub p90_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: u64,
    /// 99.9th percentile, in nanoseconds.
    pub p999_ns: u64,
    /// Maximum, in nanoseconds.
    pub max_ns: u64,
}

/// Operations and bytes per second over a window.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Throughput {
    /// The window, in nanoseconds.
    pub window_ns: u64,
    /// Successful operations per second.
    pub ops_per_s: f64,
    /// Bytes per second (decimal: 1 MB/s = 1,000,000 bytes per second).
    pub bytes_per_s: f64,
}

/// One second of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecondPoint {
    /// Seconds since the phase started.
    pub second: u64,
    /// Operations completed in this second.
    pub ops: u64,
    /// Bytes moved in this second.
    pub bytes: u64,
    /// Failed operations in this second.
    pub errors: u64,
    /// Mean latency of operations completed in this second, in nanoseconds.
    pub mean_ns: f64,
    /// Largest latency in this second, in nanoseconds.
    pub max_ns: u64,
}

/// Latency of a range of operation indexes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexPoint {
    /// Index of the first operation in the bucket (operations already issued before it).
    pub first_op_index: u64,
    /// Operations in the bucket.
    pub ops: u64,
    /// Mean latency, in nanoseconds.
    pub mean_ns: f64,
    /// Largest latency, in nanoseconds.
    pub max_ns: u64,
}

/// CPU and memory during a case.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Resources {
    /// stowbench's user CPU time, in nanoseconds.
    pub client_cpu_user_ns: u64,
    /// stowbench's system CPU time, in nanoseconds.
    pub client_cpu_system_ns: u64,
    /// stowbench's resident memory when the case started, in bytes.
    pub client_rss_start_bytes: u64,
    /// stowbench's peak resident memory during the case, in bytes.
    pub client_rss_peak_bytes: u64,
    /// Server process tree: CPU time, in nanoseconds (None without a local server).
    pub server_cpu_ns: Option<u64>,
    /// Server process tree: peak of its summed memory, in bytes: each process's proportional
    /// set size (shared pages divided among the processes mapping them, so PostgreSQL's shared
    /// buffers count once), or its resident memory where that cannot be read. Reports before
    /// session 19 summed resident memory, counting shared memory once per process. Read at the
    /// case's start and end and once a second between, sooner when the resident memory grows by
    /// an eighth (each reading walks the server's page tables); before session 34, every 50 ms.
    pub server_rss_peak_bytes: Option<u64>,
    /// Server processes sampled.
    pub server_pids: Vec<u32>,
    /// Sampled server processes that ended during the case without stowbench restarting them
    /// (killed, or restarted by someone else): their CPU time since the case began is gone with
    /// them, so `server_cpu_ns` is None, and the memory peak covers only the time before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_pids_lost: Vec<u32>,
}

impl Resources {
    /// How far the case raised the client's resident memory above what it held when the case
    /// began: every case runs in one process, so its absolute peak carries what earlier cases
    /// left held.
    pub fn client_rss_growth_bytes(&self) -> u64 {
        self.client_rss_peak_bytes.saturating_sub(self.client_rss_start_bytes)
    }
}

/// Space occupied after the load.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DiskResult {
    /// Bytes of live objects the workload stored (what a user would call "the data").
    pub logical_bytes: u64,
    /// Bytes allocated on disk under the backend's local data paths.
    pub allocated_bytes: u64,
    /// Sum of file lengths under those paths.
    pub apparent_bytes: u64,
    /// Files under those paths.
    pub files: u64,
    /// Bytes as the server accounts them, where there is a server.
    pub server_reported_bytes: Option<u64>,
    /// allocated_bytes / logical_bytes (None when nothing was stored, or allocation is unknown).
    pub amplification: Option<f64>,
    /// The allocated bytes could not be measured: the server's data directory is not on this
    /// machine or was not found (give the target `data_dir`). `allocated_bytes` is then 0 and
    /// means nothing; `server_reported_bytes` may still say what the server counts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allocated_unknown: bool,
}

/// What a file-server case stored and registered, and what the audit after the run found.
/// The audit reads the catalog itself and checks every stored object through the backend: a
/// retried upload must never leave a second row or a second copy behind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FileServerResult {
    /// Where the catalog lives and how it commits.
    pub catalog: String,
    /// The content hash the uploads compute ("blake3").
    pub hash: String,
    /// Requested fraction of duplicate uploads.
    pub duplicates_fraction: f64,
    /// Uploads that ended well (all phases).
    pub uploads: u64,
    /// Of those, duplicates: registered without storing the content again.
    pub duplicate_uploads: u64,
    /// Uploads that wrote a content of their own (the one whose row they inserted).
    pub contents_written: u64,
    /// Uploads that needed a retry.
    pub retried_uploads: u64,
    /// Uploads that failed after their retries.
    pub failed_uploads: u64,
    /// Rows in the catalog's `files` table (distinct contents).
    pub catalog_files: u64,
    /// Rows in the catalog's `names` table.
    pub catalog_names: u64,
    /// `files` rows never marked stored (a failed upload's registration).
    pub unfinished_files: u64,
    /// `names` rows pointing at no `files` row.
    pub dangling_names: u64,
    /// Stored objects checked through the backend (one per `files` row marked stored).
    pub objects_checked: u64,
    /// Of those, missing from the store.
    pub objects_missing: u64,
    /// Of those, present with another size than the catalog records.
    pub objects_wrong_size: u64,
    /// Bytes of distinct stored content (what `disk` is compared against).
    pub content_bytes: u64,
    /// Bytes the catalog occupies, where known.
    pub catalog_bytes: Option<u64>,
    /// What the audit found wrong, in words; empty when all is well.
    pub problems: Vec<String>,
}

/// Objects listed in `Verification::mismatched` per case (and kept per worker): enough to see
/// a pattern, bounded so a store that lost everything does not make a report of gigabytes.
pub const MISMATCHES_LISTED: usize = 100;

/// Read-back checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Verification {
    /// Whether gets were checked. When false nothing that was read was compared with what was
    /// put, and the report says so (warning `not_verified`).
    pub enabled: bool,
    /// Gets checked.
    pub checked: u64,
    /// Checked gets whose content differed from what was put.
    pub mismatches: u64,
    /// The first difference found: key, byte offset, kind and what differed.
    pub first_mismatch: Option<crate::workload::payload::Mismatch>,
    /// Every differing get, in the order found, up to `MISMATCHES_LISTED` (then
    /// `mismatched_cut` is true and `mismatches` has the full count). Absent in reports written
    /// before it existed, and when nothing differed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatched: Vec<crate::workload::payload::Mismatch>,
    /// Whether `mismatched` stops at `MISMATCHES_LISTED` and more objects differed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mismatched_cut: bool,
}

impl Verification {
    /// Adds one worker's checks.
    pub fn add(&mut self, checked: u64, mismatches: u64, mismatched: &[crate::workload::payload::Mismatch]) {
        self.checked += checked;
        self.mismatches += mismatches;
        let room = MISMATCHES_LISTED.saturating_sub(self.mismatched.len());
        self.mismatched.extend(mismatched.iter().take(room).cloned());
        self.mismatched_cut = self.mismatches > self.mismatched.len() as u64;
        if self.first_mismatch.is_none() {
            self.first_mismatch = self.mismatched.first().cloned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::payload::Mismatch;

    /// Typed statuses are the strings reports have always carried, both ways: a report written
    /// before they were typed reads back, and a new one says the same words.
    #[test]
    fn statuses_serialize_to_the_strings_reports_always_carried() {
        use RunStatus::*;
        for status in [Running, Complete, Interrupted, Failed, TimedOut] {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.name()));
            assert_eq!(serde_json::from_str::<RunStatus>(&json).unwrap(), status);
        }
        for (status, name) in [(CaseStatus::Ok, "ok"), (CaseStatus::Failed, "failed"), (CaseStatus::Skipped, "skipped")] {
            assert_eq!(serde_json::to_string(&status).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<CaseStatus>(&format!("\"{name}\"")).unwrap(), status);
            assert_eq!(status.to_string(), name);
        }
        let unknown = serde_json::from_str::<RunStatus>("\"paused\"").unwrap_err().to_string();
        assert!(unknown.contains("paused") && unknown.contains("timed_out"), "names the value and the allowed ones: {unknown}");
    }

    #[test]
    fn the_list_of_damaged_objects_is_bounded_and_says_when_it_is_cut() {
        let m = |i: u64| Mismatch::other(&crate::workload::keys::key_name(i), i, "damaged".into());
        let (first, second): (Vec<Mismatch>, Vec<Mismatch>) = ((0..60).map(m).collect(), (60..100).map(m).collect());
        let mut v = Verification::default();
        v.add(200, 60, &first);
        assert!(!v.mismatched_cut);
        // The second worker found 90 but kept only its first 40 (its own bound is the same).
        v.add(200, 90, &second);
        assert_eq!((v.mismatches, v.mismatched.len(), v.mismatched_cut), (150, MISMATCHES_LISTED, true));
        assert_eq!(v.first_mismatch.as_ref().map(|m| m.offset_bytes), Some(0));
        assert_eq!(v.mismatched.last().map(|m| m.offset_bytes), Some(99), "in the order found");
    }

    #[test]
    fn a_percentile_needs_enough_samples_not_to_be_the_max() {
        let needed: Vec<u64> = [50.0, 90.0, 99.0, 99.9, 99.99].map(samples_for_percentile).to_vec();
        assert_eq!(needed, [2, 10, FEW_SAMPLES_FOR_P99, 1000, 10_000]);
        assert!(!supports_percentile(999, 99.9) && supports_percentile(1000, 99.9) && supports_percentile(100, 99.0));
    }
}
