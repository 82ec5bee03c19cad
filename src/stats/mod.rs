//! Measurements per worker, merged at the end of a phase: HDR histograms (merged, never averaged
//! percentiles), a fine completion-time timeline (for the all-active window and per-second series)
//! and an operation-index timeline (latency as the store fills).
//!
//! Workers record into their own `WorkerStats` without locks; `merge` runs once per phase.

use crate::backend::ErrorKind;
use crate::job::Arrivals;
use crate::report::model::{IndexPoint, LatencySummary, OpResult, OpenLoop, PhaseResult, SecondPoint, Throughput, ERRORS_LISTED};
use crate::workload::op::Op;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

#[cfg(feature = "mpi")]
pub mod wire;

/// Finest timeline resolution, in nanoseconds.
pub const TIMELINE_RESOLUTION_NS: u64 = 10_000_000;
/// Most fine timeline buckets kept per worker before the resolution doubles.
const MAX_TIMELINE_BUCKETS: usize = 100_000;
/// Most operation-index buckets a worker keeps before their width doubles.
const MAX_INDEX_BUCKETS: usize = 100_000;
/// Most points of a phase's latency-by-operation-index series in the report: a phase that ran
/// far past its count (a `duration` or `min_duration`) gets wider buckets, not a huge report.
const MAX_INDEX_POINTS: usize = 1_000;
/// Largest latency the histograms hold exactly; longer ones saturate there (one hour).
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;
/// The all-active window is used for throughput only when at least this long.
const MIN_ALL_ACTIVE_NS: u64 = 100_000_000;

/// One operation kind, one worker.
pub struct OpStats {
    hist: Histogram<u64>,
    /// Open-loop phases: latency from each operation's intended start.
    response: Option<Histogram<u64>>,
    count: u64,
    bytes: u64,
    errors: BTreeMap<ErrorKind, u64>,
    misses: u64,
    raced_misses: u64,
    /// The misses' latencies, apart from the successes' (a lookup that finds nothing may be far
    /// faster or slower than a read); made on the first miss.
    miss_hist: Option<Histogram<u64>>,
    retries: u64,
    /// The first failures' messages ("<op> <key>: <message>"), at most `ERRORS_LISTED`.
    first_errors: Vec<String>,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            hist: new_histogram(),
            response: None,
            count: 0,
            bytes: 0,
            errors: BTreeMap::new(),
            misses: 0,
            raced_misses: 0,
            miss_hist: None,
            retries: 0,
            first_errors: Vec::new(),
        }
    }
}

/// Each operation kind's statistics, in a slot per kind (`Op::slot`): recording an operation
/// finds its entry without a map search (a `BTreeMap` search was about 40 instructions of every
/// operation's bookkeeping). Iterates in `Op`'s order, as a map would.
struct OpTable([Option<OpStats>; Op::KINDS]);

impl OpTable {
    fn new() -> Self {
        OpTable([const { None }; Op::KINDS])
    }

    /// The kind's statistics, made on its first use.
    fn of(&mut self, op: Op) -> &mut OpStats {
        self.0[op.slot()].get_or_insert_with(OpStats::new)
    }

    #[cfg(feature = "mpi")]
    fn insert(&mut self, op: Op, stats: OpStats) {
        self.0[op.slot()] = Some(stats);
    }

    #[cfg(feature = "mpi")]
    fn iter(&self) -> impl Iterator<Item = (Op, &OpStats)> {
        Op::EVERY.into_iter().zip(&self.0).filter_map(|(op, s)| Some((op, s.as_ref()?)))
    }

    fn values(&self) -> impl Iterator<Item = &OpStats> {
        self.0.iter().flatten()
    }

    fn into_iter(self) -> impl Iterator<Item = (Op, OpStats)> {
        Op::EVERY.into_iter().zip(self.0).filter_map(|(op, s)| Some((op, s?)))
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("valid histogram bounds")
}

/// How an open-loop worker kept to its schedule (see `runner::schedule`).
#[derive(Debug, Clone, Copy)]
pub struct ScheduleTally {
    /// The phase's rate, all workers together.
    pub rate_per_s: f64,
    /// How its starts are spaced.
    pub arrivals: Arrivals,
    /// Operations started on the schedule.
    pub started: u64,
    /// Sum and largest of how late each start was, in nanoseconds.
    pub lag_sum_ns: u64,
    /// Largest lag.
    pub max_lag_ns: u64,
    /// How late the worker's last start was.
    pub last_lag_ns: u64,
}

impl Default for ScheduleTally {
    fn default() -> Self {
        ScheduleTally { rate_per_s: 0.0, arrivals: Arrivals::Uniform, started: 0, lag_sum_ns: 0, max_lag_ns: 0, last_lag_ns: 0 }
    }
}

impl ScheduleTally {
    /// Records a start `lag_ns` after its intended time.
    pub fn started(&mut self, lag_ns: u64) {
        self.started += 1;
        self.lag_sum_ns += lag_ns;
        self.max_lag_ns = self.max_lag_ns.max(lag_ns);
        self.last_lag_ns = lag_ns;
    }
}

#[derive(Clone, Copy, Default)]
struct Bucket {
    /// Operations that completed in the bucket, their bytes, failures, latencies.
    ops: u64,
    bytes: u64,
    errors: u64,
    latency_sum_ns: u64,
    latency_max_ns: u64,
    /// The share of successful operations' work done during the bucket: each operation counts
    /// as one operation and its bytes, spread over the buckets it ran in by the time it ran there.
    work_ops: f64,
    work_bytes: f64,
}

impl Bucket {
    fn add(&mut self, other: &Bucket) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.errors += other.errors;
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
        self.work_ops += other.work_ops;
        self.work_bytes += other.work_bytes;
    }
}

/// Everything one worker measured in one phase.
pub struct WorkerStats {
    ops: OpTable,
    origin_ns: u64,
    resolution_ns: u64,
    timeline: Vec<Bucket>,
    /// The timeline bucket the last operation ended in, as (its first offset from the origin, its
    /// index), for the common case of the next one running wholly inside it: no divisions then.
    recent_bucket: Option<(u64, usize)>,
    index_width: u64,
    by_index: Vec<Bucket>,
    /// The operation-index bucket the last operation counted in, as (its first index, its place).
    recent_index_bucket: Option<(u64, usize)>,
    /// When this worker started measuring, in clock nanoseconds.
    pub start_ns: u64,
    /// When this worker stopped, in clock nanoseconds.
    pub end_ns: u64,
    /// Its own time (generation, verification, bookkeeping) by the end of its last operation:
    /// `end_ns` plus this is when that operation ended in real time.
    pub end_own_ns: u64,
    /// The closed-loop pool of operations it drew from (a process's shared index counter; a
    /// multi-host merge numbers them by rank), or none when its share was fixed (strided) or
    /// its operations ran on a schedule. Workers of one pool end together in real time.
    pub pool: Option<u32>,
    /// Nanoseconds spent making put bodies (taken out of latencies and timestamps).
    pub generation_ns: u64,
    /// Nanoseconds spent hashing and checking gets (taken out of latencies and timestamps).
    pub verification_ns: u64,
    /// Nanoseconds of bookkeeping between operations (taken out of timestamps; closed loop).
    pub bookkeeping_ns: u64,
    /// Gets whose content was checked.
    pub verified: u64,
    /// Checked gets whose content differed from what was put.
    pub mismatches: u64,
    /// The first `report::model::MISMATCHES_LISTED` of those, with where and how each differed.
    pub mismatched: Vec<crate::workload::payload::Mismatch>,
    /// File-server outcomes (upload and download phases).
    pub files: FileTally,
    /// Open-loop phases: how the worker kept to its schedule.
    pub schedule: Option<ScheduleTally>,
    /// Whether it stopped early because every operation failed for `give_up_after`.
    pub gave_up: bool,
}

/// What a worker's uploads did, for the after-run audit of the catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileTally {
    /// Uploads that ended well.
    pub uploads: u64,
    /// Of those, duplicates: registered without writing the content.
    pub duplicates: u64,
    /// Of those, the ones that wrote a content of their own: one whose row an attempt of theirs
    /// inserted (an upload that stored again what another upload was storing at the same time
    /// wrote the same object, not a new content).
    pub contents_written: u64,
    /// Uploads that needed at least one retry.
    pub retried: u64,
    /// Uploads that failed after their retries.
    pub failed: u64,
}

impl FileTally {
    /// Adds another worker's tally.
    pub fn add(&mut self, o: &FileTally) {
        self.uploads += o.uploads;
        self.duplicates += o.duplicates;
        self.contents_written += o.contents_written;
        self.retried += o.retried;
        self.failed += o.failed;
    }
}

impl WorkerStats {
    /// Whether it tried no operation at all (more threads than the phase had operations). A
    /// miss is an operation tried: a worker whose gets all found no object was not idle, and its
    /// misses' time ends its part of the phase as any operation's does.
    fn tried_nothing(&self) -> bool {
        self.ops.values().all(|s| s.count == 0 && s.errors.is_empty() && s.misses == 0)
    }

    /// Stats for a worker whose phase began at `origin_ns`; `index_width` operations per index bucket.
    pub fn new(origin_ns: u64, index_width: u64) -> Self {
        WorkerStats {
            ops: OpTable::new(),
            origin_ns,
            resolution_ns: TIMELINE_RESOLUTION_NS,
            timeline: Vec::new(),
            recent_bucket: None,
            index_width: index_width.max(1),
            by_index: Vec::new(),
            recent_index_bucket: None,
            start_ns: origin_ns,
            end_ns: origin_ns,
            end_own_ns: 0,
            pool: None,
            generation_ns: 0,
            verification_ns: 0,
            bookkeeping_ns: 0,
            verified: 0,
            mismatches: 0,
            mismatched: Vec::new(),
            files: FileTally::default(),
            schedule: None,
            gave_up: false,
        }
    }

    /// The index of the bucket (k·res, (k+1)·res] holding an operation that ended at `end_ns`
    /// (an operation ending exactly on a boundary belongs to the window it completed in), made to
    /// exist; the resolution coarsens first if the timeline would grow too long.
    fn bucket_index(&mut self, end_ns: u64) -> usize {
        let offset = end_ns.saturating_sub(self.origin_ns).saturating_sub(1);
        let mut i = (offset / self.resolution_ns) as usize;
        while i >= MAX_TIMELINE_BUCKETS {
            self.timeline = coarsen(&self.timeline);
            self.resolution_ns *= 2;
            self.recent_bucket = None;
            i = (offset / self.resolution_ns) as usize;
        }
        if self.timeline.len() <= i {
            self.timeline.resize(i + 1, Bucket::default());
        }
        i
    }

    /// Adds one successful operation that ran for `latency_ns` up to `end_ns`: its completion to
    /// the bucket it ended in, its work to the buckets it ran in, each its share by time.
    ///
    /// Why the work is spread: the all-active window counts whole buckets between the last
    /// worker's start and the first worker's end. Counted by completions, it missed the work of
    /// operations still running when it closed, and the first worker's own last operation (which
    /// ends the window, in a bucket only partly inside it): with four 64 MiB fsync puts per worker,
    /// it read 0.80–0.88 of the bytes per second that the whole phase and fio measured.
    fn add_to_timeline(&mut self, end_ns: u64, latency_ns: u64, mut one: Bucket) {
        let end = end_ns.saturating_sub(self.origin_ns);
        let start = end.saturating_sub(latency_ns);
        // The bucket (lo, lo + res] holds the ends it would compute; the operation ran wholly in
        // it when it also started at lo or later (as the general case below decides).
        if let Some((lo, i)) = self.recent_bucket {
            if end > lo && end - lo <= self.resolution_ns && start >= lo {
                one.work_ops = 1.0;
                one.work_bytes = one.bytes as f64;
                self.timeline[i].add(&one);
                return;
            }
        }
        let last = self.bucket_index(end_ns);
        let res = self.resolution_ns;
        self.recent_bucket = Some((last as u64 * res, last));
        let first = ((start / res) as usize).min(last);
        if first == last || latency_ns == 0 {
            one.work_ops = 1.0;
            one.work_bytes = one.bytes as f64;
            self.timeline[last].add(&one);
            return;
        }
        self.timeline[last].add(&one);
        for (k, bucket) in self.timeline[first..=last].iter_mut().enumerate() {
            let from = ((first + k) as u64 * res).max(start);
            let to = ((first + k + 1) as u64 * res).min(end);
            let share = to.saturating_sub(from) as f64 / latency_ns as f64;
            bucket.work_ops += share;
            bucket.work_bytes += share * one.bytes as f64;
        }
    }

    /// Records a successful operation that ended at `end_ns` and took `latency_ns`.
    pub fn success(&mut self, op: Op, op_index: u64, end_ns: u64, latency_ns: u64, bytes: u64, retries: u32) {
        let s = self.ops.of(op);
        s.hist.saturating_record(latency_ns.max(1));
        s.count += 1;
        s.bytes += bytes;
        s.retries += retries as u64;
        let one = Bucket { ops: 1, bytes, latency_sum_ns: latency_ns, latency_max_ns: latency_ns, ..Bucket::default() };
        self.add_to_timeline(end_ns, latency_ns, one);
        if let Some((lo, i)) = self.recent_index_bucket {
            if op_index >= lo && op_index - lo < self.index_width {
                self.by_index[i].add(&one);
                return;
            }
        }
        let mut i = (op_index / self.index_width) as usize;
        while i >= MAX_INDEX_BUCKETS {
            self.by_index = coarsen(&self.by_index);
            self.index_width *= 2;
            i = (op_index / self.index_width) as usize;
        }
        if self.by_index.len() <= i {
            self.by_index.resize(i + 1, Bucket::default());
        }
        self.by_index[i].add(&one);
        self.recent_index_bucket = Some((i as u64 * self.index_width, i));
    }

    /// Records the latency of a successful operation of an open-loop phase measured from its
    /// intended start (its service time went to `success`).
    pub fn response(&mut self, op: Op, from_intended_start_ns: u64) {
        let s = self.ops.of(op);
        s.response.get_or_insert_with(new_histogram).saturating_record(from_intended_start_ns.max(1));
    }

    /// Records a step of a composite operation (an upload's hash, register and put; a download's
    /// lookup and get): its latency and bytes, but not in the timeline or the phase's totals,
    /// which count the composite operation once.
    pub fn step(&mut self, op: Op, latency_ns: u64, bytes: u64) {
        let s = self.ops.of(op);
        s.hist.saturating_record(latency_ns.max(1));
        s.count += 1;
        s.bytes += bytes;
    }

    /// Records a failed operation (after its retries); `message` says what failed ("<op> <key>:
    /// <the backend's message>"), and is kept while fewer than `ERRORS_LISTED` are.
    pub fn failure(&mut self, op: Op, end_ns: u64, kind: ErrorKind, retries: u32, message: impl FnOnce() -> String) {
        let s = self.ops.of(op);
        if s.first_errors.len() < ERRORS_LISTED {
            s.first_errors.push(message());
        }
        *s.errors.entry(kind).or_insert(0) += 1;
        s.retries += retries as u64;
        let i = self.bucket_index(end_ns);
        self.timeline[i].errors += 1;
    }

    /// Records an operation that found no object after `latency_ns`: of a key known to be
    /// absent, or (`raced`) of one a concurrent delete may have removed (see `runner::keytable`).
    /// The caller moves the worker's end to the miss's, as for any operation.
    pub fn miss(&mut self, op: Op, raced: bool, latency_ns: u64) {
        let s = self.ops.of(op);
        s.misses += 1;
        s.raced_misses += raced as u64;
        s.miss_hist.get_or_insert_with(new_histogram).saturating_record(latency_ns.max(1));
    }

    /// Reads of absent keys so far.
    pub fn misses(&self) -> u64 {
        self.ops.values().map(|s| s.misses).sum()
    }

    /// Successful plus failed operations so far.
    pub fn attempted(&self) -> u64 {
        self.ops.values().map(|s| s.count + s.errors.values().sum::<u64>()).sum()
    }

    /// The summed latency of the successful operations recorded, to the nanosecond.
    #[cfg(test)]
    pub(crate) fn latency_sum_ns(&self) -> u64 {
        self.timeline.iter().map(|b| b.latency_sum_ns).sum()
    }
}

fn coarsen(buckets: &[Bucket]) -> Vec<Bucket> {
    buckets
        .chunks(2)
        .map(|pair| {
            let mut b = pair[0];
            if let Some(second) = pair.get(1) {
                b.add(second);
            }
            b
        })
        .collect()
}

/// Merges every worker's stats of a phase into its report entry.
pub fn merge(label: &str, workers: Vec<WorkerStats>, lock_wait_ns: u64) -> PhaseResult {
    let start = workers.iter().map(|w| w.start_ns).min().unwrap_or(0);
    let end = workers.iter().map(|w| w.end_ns).max().unwrap_or(start);
    let last_start = workers.iter().map(|w| w.start_ns).max().unwrap_or(0);
    let first_end = workers.iter().map(|w| w.end_ns).min().unwrap_or(0);
    let origin = workers.first().map(|w| w.origin_ns).unwrap_or(0);
    let resolution = workers.iter().map(|w| w.resolution_ns).max().unwrap_or(TIMELINE_RESOLUTION_NS);
    // Workers' index buckets start equal and double on their own: merge at the widest.
    let mut index_width = workers.iter().map(|w| w.index_width).max().unwrap_or(1);
    let payload_generation_ns = workers.iter().map(|w| w.generation_ns).sum();
    let verification_ns = workers.iter().map(|w| w.verification_ns).sum();
    let bookkeeping_ns = workers.iter().map(|w| w.bookkeeping_ns).sum();
    let open_loop = open_loop(&workers);
    let window_total_ns = pooled_span(&workers, start).unwrap_or(end - start);
    let gave_up_workers = workers.iter().filter(|w| w.gave_up).count() as u32;
    // A worker that tried nothing (more threads than the phase had operations): the phase's
    // figures are those of fewer threads than the case names.
    let idle_workers = workers.iter().filter(|w| w.tried_nothing()).count() as u32;

    let mut ops: BTreeMap<Op, OpStats> = BTreeMap::new();
    let mut timeline: Vec<Bucket> = Vec::new();
    let mut by_index: Vec<Bucket> = Vec::new();
    for w in workers {
        let mut fine = w.timeline;
        let mut res = w.resolution_ns;
        while res < resolution {
            fine = coarsen(&fine);
            res *= 2;
        }
        add_buckets(&mut timeline, &fine);
        let (mut by_w, mut width) = (w.by_index, w.index_width);
        while width < index_width {
            by_w = coarsen(&by_w);
            width *= 2;
        }
        add_buckets(&mut by_index, &by_w);
        for (op, s) in w.ops.into_iter() {
            let into = ops.entry(op).or_insert_with(OpStats::new);
            into.hist.add(&s.hist).expect("histograms share bounds");
            into.count += s.count;
            into.bytes += s.bytes;
            into.misses += s.misses;
            into.raced_misses += s.raced_misses;
            if let Some(missed) = &s.miss_hist {
                into.miss_hist.get_or_insert_with(new_histogram).add(missed).expect("histograms share bounds");
            }
            into.retries += s.retries;
            if let Some(response) = &s.response {
                into.response.get_or_insert_with(new_histogram).add(response).expect("histograms share bounds");
            }
            for (k, n) in s.errors {
                *into.errors.entry(k).or_insert(0) += n;
            }
            let room = ERRORS_LISTED.saturating_sub(into.first_errors.len());
            into.first_errors.extend(s.first_errors.into_iter().take(room));
        }
    }
    // In a file-server phase the steps (hash, register, put, lookup, get) are parts of the
    // uploads and downloads, which alone make the totals.
    let file_server = ops.keys().any(|op| op.is_file_server());
    let total_ops: u64 = ops.iter().filter(|(op, _)| op.counts_in_totals(file_server)).map(|(_, s)| s.count).sum();
    let total_bytes: u64 = ops.iter().filter(|(op, _)| op.counts_in_totals(file_server)).map(|(_, s)| s.bytes).sum();
    while by_index.len() > MAX_INDEX_POINTS {
        by_index = coarsen(&by_index);
        index_width *= 2;
    }
    let window_all_active_ns = first_end.saturating_sub(last_start);
    PhaseResult {
        phase: label.to_string(),
        ops: ops.iter().map(|(op, s)| (op.name().to_string(), op_result(s))).collect(),
        window_total_ns,
        window_all_active_ns,
        throughput_total: throughput(window_total_ns, total_ops, total_bytes),
        throughput_all_active: all_active(
            &timeline,
            resolution,
            (last_start.saturating_sub(origin), first_end.saturating_sub(origin)),
            (start.saturating_sub(origin), end.saturating_sub(origin)),
        ),
        timeline_per_second: per_second(&timeline, resolution),
        op_index_bucket_ops: index_width,
        growth_ratio: growth(&by_index),
        timeline_by_op_index: by_index
            .iter()
            .enumerate()
            .filter(|(_, b)| b.ops > 0)
            .map(|(i, b)| IndexPoint {
                first_op_index: i as u64 * index_width,
                ops: b.ops,
                mean_ns: b.latency_sum_ns as f64 / b.ops as f64,
                max_ns: b.latency_max_ns,
            })
            .collect(),
        lock_wait_ns,
        payload_generation_ns,
        verification_ns,
        bookkeeping_ns,
        cache_state: String::new(), // the runner knows it
        server_restarted: false,
        device_read_bytes: None, // the runner reads it
        gave_up_workers,
        idle_workers,
        not_at_rest: None,      // the runner knows it
        writeback_settle: None, // so does it
        open_loop,
    }
}

/// The phase's span with stowbench's own work taken out, for workers that drew their operations
/// from shared pools; `None` when any did not (a fixed share, a schedule).
///
/// Each worker's timestamps are its real time less its own work, so with workers whose own
/// time differs (on shared cores, one is descheduled while it hashes, another while it reads) the
/// latest end on those clocks belongs to the worker with the least own time, and the span
/// `max(end) − min(start)` takes out only that least. But workers of one pool end together in
/// real time: without the own work, the pool's operations would have been shared out again and
/// every worker would have ended earlier by the pool's **mean** own time. So a pool ends at its
/// last real end less its workers' mean own time (its real tail, as fio's runtime keeps,
/// included); the phase at the latest pool's end (docs/performance/fs-vs-fio.md, session 40, has what the
/// plain span did to four verifying workers on two cores). A lone worker's span is the same
/// either way, and so is that of workers whose own times are equal.
/// Workers that tried nothing are no part of a pool.
fn pooled_span(workers: &[WorkerStats], start: u64) -> Option<u64> {
    let mut pools: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new(); // (last real end, own sum, workers)
    for w in workers.iter().filter(|w| !w.tried_nothing()) {
        let pool = pools.entry(w.pool?).or_insert((0, 0, 0));
        pool.0 = pool.0.max(w.end_ns + w.end_own_ns);
        pool.1 += w.end_own_ns;
        pool.2 += 1;
    }
    pools.values().map(|&(real_end, own_sum, n)| (real_end - own_sum / n).saturating_sub(start)).max()
}

/// Slack before an open-loop phase counts as not keeping up: its workers' last starts may lag by
/// two of their own gaps (Poisson bursts, a sleep's wake-up) or 10 ms, whichever is more.
const KEPT_UP_GAPS: f64 = 2.0;
const KEPT_UP_MIN_NS: u64 = 10_000_000;

/// The schedule figures of an open-loop phase.
fn open_loop(workers: &[WorkerStats]) -> Option<OpenLoop> {
    let tallies: Vec<&ScheduleTally> = workers.iter().filter_map(|w| w.schedule.as_ref()).collect();
    let first = tallies.first()?;
    let started: u64 = tallies.iter().map(|t| t.started).sum();
    let end_lag_ns = tallies.iter().map(|t| t.last_lag_ns).max().unwrap_or(0);
    let worker_gap_ns = tallies.len() as f64 * 1e9 / first.rate_per_s;
    Some(OpenLoop {
        rate_per_s: first.rate_per_s,
        arrivals: first.arrivals.name().to_string(),
        started,
        mean_lag_ns: if started > 0 { tallies.iter().map(|t| t.lag_sum_ns).sum::<u64>() as f64 / started as f64 } else { 0.0 },
        max_lag_ns: tallies.iter().map(|t| t.max_lag_ns).max().unwrap_or(0),
        end_lag_ns,
        kept_up: end_lag_ns as f64 <= (KEPT_UP_GAPS * worker_gap_ns).max(KEPT_UP_MIN_NS as f64),
    })
}

fn add_buckets(into: &mut Vec<Bucket>, from: &[Bucket]) {
    if into.len() < from.len() {
        into.resize(from.len(), Bucket::default());
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.add(b);
    }
}

fn throughput(window_ns: u64, ops: u64, bytes: u64) -> Throughput {
    let secs = window_ns as f64 / 1e9;
    if window_ns == 0 {
        return Throughput { window_ns, ops_per_s: 0.0, bytes_per_s: 0.0 };
    }
    Throughput { window_ns, ops_per_s: ops as f64 / secs, bytes_per_s: bytes as f64 / secs }
}

/// Throughput over the all-active `window` (offsets from origin): the work done inside it (see
/// `WorkerStats::add_to_timeline`) over its length. A bucket the window covers in part counts
/// the part of its work that the covered time is of the bucket's *active* time (inside the
/// `phase`): the last bucket of a phase is active only until the phase ends, so its work all lies
/// in the window when the window ends there too. Whole buckets alone, as before session 19, cut
/// up to two buckets (20 ms) of work and time from every phase; with one worker, whose window is
/// its whole phase, that read 0.86–0.95 of the phase's own rate when the ends ran faster.
fn all_active(timeline: &[Bucket], resolution: u64, window: (u64, u64), phase: (u64, u64)) -> Option<Throughput> {
    let (from, to) = window;
    if to <= from || to - from < MIN_ALL_ACTIVE_NS {
        return None;
    }
    let (mut ops, mut bytes) = (0.0, 0.0);
    for (i, bucket) in timeline.iter().enumerate() {
        let (b0, b1) = (i as u64 * resolution, (i as u64 + 1) * resolution);
        let (active0, active1) = (b0.max(phase.0), b1.min(phase.1));
        let (covered0, covered1) = (b0.max(from), b1.min(to));
        if covered1 <= covered0 || active1 <= active0 {
            continue;
        }
        let share = ((covered1 - covered0) as f64 / (active1 - active0) as f64).min(1.0);
        ops += bucket.work_ops * share;
        bytes += bucket.work_bytes * share;
    }
    let window_ns = to - from;
    let secs = window_ns as f64 / 1e9;
    Some(Throughput { window_ns, ops_per_s: ops / secs, bytes_per_s: bytes / secs })
}

fn per_second(timeline: &[Bucket], resolution: u64) -> Vec<SecondPoint> {
    let per = (1_000_000_000 / resolution).max(1) as usize;
    timeline
        .chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let mut b = Bucket::default();
            chunk.iter().for_each(|x| b.add(x));
            SecondPoint {
                second: (i * per) as u64 * resolution / 1_000_000_000,
                ops: b.ops,
                bytes: b.bytes,
                errors: b.errors,
                mean_ns: if b.ops > 0 { b.latency_sum_ns as f64 / b.ops as f64 } else { 0.0 },
                max_ns: b.latency_max_ns,
            }
        })
        .collect()
}

/// Operations each tenth needs for a growth figure: with one put per tenth, the first is the
/// one that created the table or file, and the ratio (×0.00 at small `--scale`) said nothing
/// about the store filling.
const GROWTH_MIN_OPS_PER_TENTH: u64 = 10;

/// Mean latency of the last 10% of operations over the first 10% (by operation index); none
/// with fewer than `GROWTH_MIN_OPS_PER_TENTH` operations in either.
fn growth(by_index: &[Bucket]) -> Option<f64> {
    let filled: Vec<&Bucket> = by_index.iter().filter(|b| b.ops > 0).collect();
    if filled.len() < 10 {
        return None;
    }
    let tenth = filled.len().div_ceil(10);
    let mean = |bs: &[&Bucket]| {
        let (sum, n) = bs.iter().fold((0u64, 0u64), |(s, n), b| (s + b.latency_sum_ns, n + b.ops));
        (n >= GROWTH_MIN_OPS_PER_TENTH).then(|| sum as f64 / n as f64)
    };
    let (first, last) = (mean(&filled[..tenth])?, mean(&filled[filled.len() - tenth..])?);
    (first > 0.0).then(|| last / first)
}

fn op_result(s: &OpStats) -> OpResult {
    OpResult {
        count: s.count,
        bytes: s.bytes,
        errors: s.errors.iter().map(|(k, n)| (k.name().to_string(), *n)).collect(),
        misses: s.misses,
        raced_misses: s.raced_misses,
        retries: s.retries,
        latency: summarize(&s.hist),
        miss_latency: s.miss_hist.as_ref().map(summarize),
        response_latency: s.response.as_ref().map(summarize),
        first_errors: s.first_errors.clone(),
    }
}

/// Percentiles and moments of a histogram.
pub fn summarize(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    LatencySummary {
        samples: h.len(),
        mean_ns: h.mean(),
        stddev_ns: h.stdev(),
        min_ns: h.min(),
        p50_ns: h.value_at_quantile(0.50),
        p90_ns: h.value_at_quantile(0.90),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcuts for an operation inside the last one's bucket (timeline and operation index)
    /// give the buckets the general computation gives: operations short and long, ending on
    /// bucket boundaries and beside them, with failures between and the timeline coarsening.
    #[test]
    fn recording_in_the_last_bucket_matches_the_general_case() {
        let origin = 5_000;
        let mut fast = WorkerStats::new(origin, 7);
        let mut slow = WorkerStats::new(origin, 7);
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut end = origin;
        for index in 0..300_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Mostly steps far below the 10 ms resolution, some landing on a boundary, a few long
            // jumps: the run passes the finest timeline's length, so it coarsens on the way.
            end += match rng % 100 {
                0 => TIMELINE_RESOLUTION_NS * ((rng >> 40) % 200),
                1 => TIMELINE_RESOLUTION_NS - (end - origin) % TIMELINE_RESOLUTION_NS,
                2 => 0,
                _ => (rng >> 20) % 20_000,
            };
            let latency = match (rng >> 8) % 10 {
                0 => 0,
                1 => (rng >> 30) % (3 * TIMELINE_RESOLUTION_NS),
                _ => (rng >> 30) % 30_000,
            };
            let op_index = if (rng >> 4) % 50 == 0 { (rng >> 24) % 1_000_000 } else { index };
            if (rng >> 12) % 1000 == 0 {
                fast.failure(Op::Get, end, ErrorKind::Timeout, 0, String::new);
                slow.failure(Op::Get, end, ErrorKind::Timeout, 0, String::new);
            }
            fast.success(Op::Get, op_index, end, latency, 4096, 0);
            slow.recent_bucket = None;
            slow.recent_index_bucket = None;
            slow.success(Op::Get, op_index, end, latency, 4096, 0);
        }
        assert!(fast.resolution_ns > TIMELINE_RESOLUTION_NS, "the run should coarsen its timeline");
        assert_eq!(fast.resolution_ns, slow.resolution_ns);
        let same = |a: &[Bucket], b: &[Bucket]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    (x.ops, x.bytes, x.errors, x.latency_sum_ns, x.latency_max_ns) == (y.ops, y.bytes, y.errors, y.latency_sum_ns, y.latency_max_ns)
                        && (x.work_ops - y.work_ops).abs() < 1e-6
                        && (x.work_bytes - y.work_bytes).abs() < 1e-3
                })
        };
        assert!(same(&fast.timeline, &slow.timeline), "timeline differs");
        assert!(same(&fast.by_index, &slow.by_index), "operation-index buckets differ");
    }

    #[test]
    fn percentiles_come_from_merged_histograms_not_averages() {
        let mut a = WorkerStats::new(0, 1);
        let mut b = WorkerStats::new(0, 1);
        for i in 0..99 {
            a.success(Op::Put, i, (i + 1) * 1_000_000, 1_000_000, 10, 0);
        }
        b.success(Op::Put, 99, 100_000_000, 100_000_000, 10, 0);
        a.end_ns = 99_000_000;
        b.end_ns = 100_000_000;
        let r = merge("put", vec![a, b], 0);
        let put = &r.ops["put"];
        assert_eq!(put.count, 100);
        assert!((put.latency.p50_ns as f64 - 1e6).abs() / 1e6 < 0.001);
        assert!((put.latency.max_ns as f64 - 1e8).abs() / 1e8 < 0.001, "one slow op in the other worker shows in the max");
        assert_eq!(r.window_total_ns, 100_000_000);
        assert_eq!(r.window_all_active_ns, 99_000_000);
    }

    /// A worker of `pool` that started at 0 and did one 10 ms put ending at `real_end_ns` in real
    /// time, with `own_ns` of its own work by then (so at `real_end_ns - own_ns` on its clock).
    fn ended(pool: Option<u32>, real_end_ns: u64, own_ns: u64) -> WorkerStats {
        let mut s = WorkerStats::new(0, 1);
        let end = real_end_ns - own_ns;
        s.success(Op::Get, 0, end, 10_000_000, 1 << 20, 0);
        (s.end_ns, s.end_own_ns, s.pool) = (end, own_ns, pool);
        s
    }

    /// Workers drawing from one counter end together in real time; with their own work out, they
    /// would have shared the operations again and ended earlier by their mean own time, not by
    /// the least of them (which the latest end on their clocks gives).
    #[test]
    fn a_pools_span_takes_out_its_workers_mean_own_time() {
        let r = merge("get", vec![ended(Some(0), 200_000_000, 20_000_000), ended(Some(0), 199_000_000, 60_000_000)], 0);
        assert_eq!(r.window_total_ns, 200_000_000 - 40_000_000, "last real end less the mean own time");
        // The same workers with fixed shares: each one's clock is right on its own, and the
        // phase lasts until the latest of them.
        let r = merge("get", vec![ended(None, 200_000_000, 20_000_000), ended(None, 199_000_000, 60_000_000)], 0);
        assert_eq!(r.window_total_ns, 180_000_000);
        // A lone worker, or workers with equal own times: the same either way.
        assert_eq!(merge("get", vec![ended(Some(0), 200_000_000, 30_000_000)], 0).window_total_ns, 170_000_000);
        let even = |pool| merge("get", vec![ended(pool, 200_000_000, 30_000_000), ended(pool, 190_000_000, 30_000_000)], 0).window_total_ns;
        assert_eq!(even(Some(0)), even(None));
    }

    /// Ranks of a multi-host run count their operations apart: each rank's workers are a pool,
    /// and the phase lasts until the latest pool's end. A worker that did nothing is no part of it.
    #[test]
    fn pools_end_apart_and_idle_workers_do_not_count() {
        let workers = vec![
            ended(Some(0), 200_000_000, 20_000_000),
            ended(Some(0), 200_000_000, 40_000_000),
            ended(Some(1), 230_000_000, 50_000_000),
            ended(Some(1), 225_000_000, 10_000_000),
        ];
        assert_eq!(merge("get", workers, 0).window_total_ns, 230_000_000 - 30_000_000);
        let idle = WorkerStats { pool: Some(0), ..WorkerStats::new(0, 1) };
        let r = merge("get", vec![ended(Some(0), 200_000_000, 20_000_000), ended(Some(0), 200_000_000, 40_000_000), idle], 0);
        assert_eq!(r.window_total_ns, 170_000_000);
        assert_eq!(r.idle_workers, 1);
    }

    /// A worker whose gets all missed issued its share of the phase: it is not idle (it was
    /// counted so, and the report warned the phase's figures were those of fewer threads).
    #[test]
    fn a_worker_whose_operations_all_missed_is_not_idle() {
        let all_missed = || {
            let mut s = WorkerStats::new(0, 1);
            for _ in 0..200 {
                s.miss(Op::Get, false, 1_000);
            }
            s
        };
        let r = merge("get", vec![all_missed(), all_missed()], 0);
        assert_eq!(r.idle_workers, 0);
        assert_eq!(r.ops["get"].misses, 400);
        assert_eq!(r.ops["get"].miss_latency.as_ref().map(|l| l.samples), Some(400));
        let r = merge("get", vec![all_missed(), WorkerStats::new(0, 1)], 0);
        assert_eq!(r.idle_workers, 1, "the worker that issued nothing still is");
    }

    /// `workers` closed-loop workers, worker w starting at w × `stagger_ns`, each running `ops`
    /// operations of `op_ns` back to back, `bytes` each; the merged phase.
    fn back_to_back(workers: u64, ops: u64, op_ns: u64, stagger_ns: u64, bytes: u64) -> PhaseResult {
        let stats = (0..workers)
            .map(|w| {
                let mut s = WorkerStats::new(0, 1);
                s.start_ns = w * stagger_ns;
                for i in 0..ops {
                    s.success(Op::Put, i, s.start_ns + (i + 1) * op_ns, op_ns, bytes, 0);
                }
                s.end_ns = s.start_ns + ops * op_ns;
                s
            })
            .collect();
        merge("put", stats, 0)
    }

    /// Four workers each doing four 80 ms operations: the work done in the all-active window is
    /// the true rate (4 workers × 64 MiB / 80 ms), not the 0.75–0.9 of it that completions inside
    /// the window gave (the first worker's last operation, and the others' running ones, fell
    /// outside it). Short operations measure the same as before.
    #[test]
    fn the_all_active_window_counts_the_work_done_inside_it() {
        let true_rate = 4.0 * (64 << 20) as f64 / 0.080;
        for stagger_ns in [0, 3_000_000, 7_000_000] {
            let r = back_to_back(4, 4, 80_000_000, stagger_ns, 64 << 20);
            let t = r.throughput_all_active.expect("a window of 230 ms or more");
            assert!((t.bytes_per_s / true_rate - 1.0).abs() < 0.01, "stagger {stagger_ns}: {} of the true rate", t.bytes_per_s / true_rate);
            assert!((t.ops_per_s / 50.0 - 1.0).abs() < 0.01, "stagger {stagger_ns}: {} op/s, not 50", t.ops_per_s);
        }
        let r = back_to_back(4, 1000, 1_000_000, 300_000, 4096);
        let t = r.throughput_all_active.unwrap();
        assert!((t.ops_per_s / 4000.0 - 1.0).abs() < 0.01, "{} op/s, not 4000", t.ops_per_s);
    }

    /// One worker has no ramp: its window is its whole phase, and the rate is the phase's own
    /// even when its first and last operations ran faster than the middle ones (whole buckets
    /// cut the fast ends off and read ~0.9 of it).
    #[test]
    fn one_workers_window_is_its_whole_phase() {
        let mut s = WorkerStats::new(0, 1);
        let mut t = 3_000_000; // started 3 ms into the first bucket
        s.start_ns = t;
        for i in 0..300u64 {
            let op_ns = if (20..280).contains(&i) { 600_000 } else { 100_000 };
            t += op_ns;
            s.success(Op::Put, i, t, op_ns, 4096, 0);
        }
        s.end_ns = t;
        let r = merge("put", vec![s], 0);
        let window = r.throughput_all_active.expect("a phase of 160 ms");
        assert_eq!(window.window_ns, r.window_total_ns);
        assert!((window.ops_per_s / r.throughput_total.ops_per_s - 1.0).abs() < 1e-9, "{} against {}", window.ops_per_s, r.throughput_total.ops_per_s);
        assert!((window.bytes_per_s / r.throughput_total.bytes_per_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn growth_ratio_compares_last_and_first_tenth() {
        let mut w = WorkerStats::new(0, 1);
        for i in 0..100u64 {
            w.success(
                Op::Put,
                i,
                i * 10,
                if i < 10 {
                    100
                } else if i >= 90 {
                    300
                } else {
                    200
                },
                1,
                0,
            );
        }
        let r = merge("put", vec![w], 0);
        assert!((r.growth_ratio.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(r.timeline_by_op_index.len(), 100);

        // Ten puts, one a tenth: the first created the store. No figure rather than ×0.04.
        let mut w = WorkerStats::new(0, 1);
        for i in 0..10u64 {
            w.success(Op::Put, i, i * 10, if i == 0 { 5000 } else { 200 }, 1, 0);
        }
        assert_eq!(merge("put", vec![w], 0).growth_ratio, None);
    }

    /// A phase that runs far past the count its index buckets were sized for (a `min_duration`)
    /// keeps every operation in the series, in wider buckets, and the report stays small; two
    /// workers whose buckets widened apart are merged at the wider width.
    #[test]
    fn operations_far_past_the_count_widen_the_index_buckets() {
        let (mut long, mut short) = (WorkerStats::new(0, 1), WorkerStats::new(0, 1));
        for i in 0..250_000u64 {
            let latency = match i {
                0..25_000 => 100,
                225_000.. => 300,
                _ => 200,
            };
            long.success(Op::Get, i, i + 1, latency, 1, 0);
        }
        for i in 0..10u64 {
            short.success(Op::Get, i, i + 1, 100, 1, 0);
        }
        assert_eq!(long.index_width, 4, "250,000 operations in at most 100,000 buckets");
        let r = merge("get", vec![long, short], 0);
        assert!(r.timeline_by_op_index.len() <= MAX_INDEX_POINTS, "{} points", r.timeline_by_op_index.len());
        assert_eq!(r.op_index_bucket_ops, 256);
        assert_eq!(r.timeline_by_op_index.iter().map(|p| p.ops).sum::<u64>(), 250_010);
        assert_eq!(r.timeline_by_op_index[0].ops, 256 + 10, "the short worker's operations in the first bucket");
        assert!((r.growth_ratio.unwrap() - 3.0).abs() < 0.02, "{:?}", r.growth_ratio);
    }
}
