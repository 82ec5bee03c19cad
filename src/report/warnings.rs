//! Cautions under the numbers, in the spirit of hyperfine's: what makes a figure weak and what to
//! do about it. They are data (`RunReport.warnings`): each has a kind a script can filter on, the
//! cases it concerns, and its advice, so the table, the CSV reader and the HTML page all say the
//! same thing.

use super::model::{CaseResult, CaseStatus, FilesystemInfo, Headline, RunReport, FEW_SAMPLES_FOR_P99};
use super::table::coefficient_of_variation;
use crate::workload::op::Op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spread across repeats above this (coefficient of variation) deserves a warning.
const HIGH_CV: f64 = 0.10;
/// A share of worker time in stowbench's own work above this deserves a warning.
const HIGH_OWN_WORK: f64 = 0.10;
/// Client CPU above this fraction of the cores its threads could use means the client was busy.
const CLIENT_BUSY: f64 = 0.90;
/// How far (parts per million) the TSC clock may run from CLOCK_MONOTONIC over a run before the
/// report warns: calibration over 20 ms is good to a few ppm, an NTP slew is up to 500.
const CLOCK_DRIFT_PPM: f64 = 100.0;

/// What a warning is about. Names are stable: scripts and the HTML page key on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The sim backend's numbers are simulated.
    TestTool,
    /// Too few latency samples for the percentile the table shows.
    FewSamples,
    /// Some threads had no operation to do: a phase ran on fewer threads than its case names.
    IdleThreads,
    /// The store could not be brought to rest before a phase (SQLite's WAL checkpoint failed).
    StoreNotAtRest,
    /// A phase's `read_recent` exceeded the puts each worker made: its gets read the oldest put.
    ReadRecentShort,
    /// Throughput varies a lot across repeats.
    HighSpread,
    /// fio cases measured for too short a time to give a stable rate.
    ShortRuntime,
    /// A winner's margin lies inside the spread of the repeats (the table says "tie").
    MarginInsideSpread,
    /// Much of the workers' time went to stowbench's own work (payloads, checks, bookkeeping).
    OwnWork,
    /// The client process kept every core its threads could use busy.
    ClientCpuBound,
    /// Several threads wrote to a backend that admits one writer at a time: its write figures
    /// measure that queue.
    SerializedWrites,
    /// Several threads read from a backend that admits one reader at a time (cfb): its read
    /// figures measure that queue.
    SerializedReads,
    /// An open-loop phase could not keep its rate.
    BehindSchedule,
    /// Reads were served by a warm page cache.
    WarmCache,
    /// Cold read phases on a server stowbench did not start: its own cache stayed warm.
    ServerCacheWarm,
    /// A cold read phase fetched less than half of what it read from the storage layer.
    ColdReadsFromMemory,
    /// The machine evicts idle memory, page cache included.
    IdleMemoryEviction,
    /// ext4 without a journal slows file creation after mass deletion.
    Ext4NoJournal,
    /// The TSC clock's time ran away from CLOCK_MONOTONIC over the run: its durations are off.
    ClockDrift,
    /// A sampled server process ended during a case (killed, or restarted outside stowbench):
    /// its CPU time is unknown.
    ServerLost,
    /// Operations failed or were retried.
    ErrorsOrRetries,
    /// Objects read back differed from what was put (each is listed in `verification.mismatched`).
    DataMismatch,
    /// Gets were not compared with what was put (verify = false): the data was not verified.
    NotVerified,
    /// Whole cases failed.
    FailedCases,
    /// A warning from a report written before warnings had kinds (schema version 1).
    Unclassified,
}

/// One caution about the numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// What it is about.
    pub kind: WarningKind,
    /// What was seen, with the figures.
    pub message: String,
    /// What to do about it ("" when there is nothing to do).
    pub advice: String,
    /// The cases it concerns (all of them; the message names at most a few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub case_ids: Vec<String>,
    /// The phase it concerns, when it is about one phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl Warning {
    fn new(kind: WarningKind, message: String, advice: &str) -> Warning {
        Warning { kind, message, advice: advice.into(), case_ids: Vec::new(), phase: None }
    }

    fn cases(mut self, case_ids: Vec<String>) -> Warning {
        self.case_ids = case_ids;
        self
    }

    fn phase(mut self, phase: &str) -> Warning {
        self.phase = Some(phase.into());
        self
    }

    /// One line for people: the message, then the advice.
    pub fn line(&self) -> String {
        if self.advice.is_empty() {
            self.message.clone()
        } else {
            format!("{}. {}", self.message, self.advice)
        }
    }
}

/// Warnings for a finished report (headlines already computed: the tie warning reads them).
pub fn for_report(report: &RunReport) -> Vec<Warning> {
    let mut warnings = Vec::new();
    // Each test tool says what it is: sim's numbers are made up, null's are stowbench's own cost.
    for (backend, what) in [
        ("sim", "the sim backend is a test tool with simulated latency; its numbers are not a result"),
        ("null", "the null backend stores nothing: its numbers are stowbench's own ceiling (the harness alone), not a storage result"),
    ] {
        let test_tool = ids(report.cases.iter().filter(|c| c.backend_is_test_tool && c.backend == backend));
        if !test_tool.is_empty() {
            warnings.push(Warning::new(WarningKind::TestTool, what.into(), "").cases(test_tool));
        }
    }
    warnings.extend(few_samples(report));
    warnings.extend(idle_threads(report));
    warnings.extend(not_at_rest(report));
    warnings.extend(fio_not_at_rest(report));
    warnings.extend(read_recent_short(report));
    warnings.extend(high_spread(report));
    warnings.extend(fio_high_spread(report));
    warnings.extend(fio_short_runtime(report));
    warnings.extend(margins_inside_spread(&report.headlines));
    warnings.extend(client_limits(report));
    warnings.extend(serialized_writes(report));
    warnings.extend(serialized_reads(report));
    warnings.extend(behind_schedule(report));
    warnings.extend(server_lost(report));
    warnings.extend(errors_or_retries(report));
    warnings.extend(conditions(report));
    warnings.extend(verification(report));
    let failed = ids(report.cases.iter().filter(|c| c.status != CaseStatus::Ok));
    if !failed.is_empty() {
        warnings.push(
            Warning::new(
                WarningKind::FailedCases,
                format!("{} case(s) failed (e.g. {}); their numbers are left out of the comparison", failed.len(), failed[0]),
                "Read each case's failure in the report",
            )
            .cases(failed),
        );
    }
    warnings
}

fn ids<'a>(cases: impl Iterator<Item = &'a CaseResult>) -> Vec<String> {
    cases.map(|c| c.case_id.clone()).collect()
}

/// The cases in which `find` finds something, and what it found in the first of them, for a
/// warning that counts the cases and gives the first as its example; None when it finds nothing.
fn cases_where<'a, T>(cases: impl Iterator<Item = &'a CaseResult>, find: impl Fn(&CaseResult) -> Option<T>) -> Option<(Vec<&'a CaseResult>, T)> {
    let mut found = cases.filter_map(|c| find(c).map(|t| (c, t)));
    let (first, t) = found.next()?;
    Some((std::iter::once(first).chain(found.map(|(c, _)| c)).collect(), t))
}

fn few_samples(report: &RunReport) -> Option<Warning> {
    let few =
        ids(report.cases.iter().filter(|c| c.phases.iter().any(|p| p.ops.values().any(|o| o.latency.samples > 0 && o.latency.samples < FEW_SAMPLES_FOR_P99))));
    (!few.is_empty()).then(|| {
        Warning::new(
            WarningKind::FewSamples,
            format!(
                "{} case(s) have fewer than {FEW_SAMPLES_FOR_P99} latency samples for an operation (e.g. {}): their p99 is the largest \
                 sample, not a percentile, and the table shows it as max",
                few.len(),
                few[0]
            ),
            "Raise objects or dataset for a p99 (its p50 stands from 2 samples; its p99.9 needs 1000)",
        )
        .cases(few)
    })
}

/// Phases with fewer operations than threads: the case says "4 threads" of figures that fewer
/// threads made.
fn idle_threads(report: &RunReport) -> Option<Warning> {
    let idle = |c: &CaseResult| c.phases.iter().find(|p| p.idle_workers > 0).map(|p| (p.phase.clone(), p.idle_workers));
    let (cases, (phase, workers)) = cases_where(report.cases.iter(), idle)?;
    let first = cases[0];
    Some(
        Warning::new(
            WarningKind::IdleThreads,
            format!(
                "{} case(s) had threads with no operation to do, e.g. {}: {workers} of its {} threads did nothing in {phase}, so its figures \
                 are those of {} thread(s)",
                cases.len(),
                first.case_id,
                first.threads,
                first.threads.saturating_sub(workers)
            ),
            "Give every phase more operations than threads can drain before all of them run (raise objects, dataset or count, or set a duration), use split = \"even\", or lower threads",
        )
        .cases(ids(cases.into_iter())),
    )
}

/// Phases that ran without the store at rest: the step before them failed (SQLite's WAL
/// checkpoint, on an I/O error), so they may carry work the previous phase left deferred.
fn not_at_rest(report: &RunReport) -> Option<Warning> {
    let first_of = |c: &CaseResult| c.phases.iter().find_map(|p| p.not_at_rest.as_ref().map(|why| (p.phase.clone(), why.clone())));
    let (cases, (phase, why)) = cases_where(report.cases.iter(), first_of)?;
    let first = cases[0];
    Some(
        Warning::new(
            WarningKind::StoreNotAtRest,
            format!(
                "{} case(s) ran a phase without the store at rest, e.g. {} before {phase}: {why}; that phase may carry work the one before it left (WAL frames SQLite would have checkpointed, dirty pages not written back)",
                cases.len(),
                first.case_id
            ),
            "The phase's not_at_rest says why: a failing disk, or another connection holding the database; checkpoint_before_phases = false (sqlite) and settle_writeback = false (the workload) skip the steps",
        )
        .cases(ids(cases.into_iter())),
    )
}

/// fio cases whose write-back before them failed: they ran anyway and may carry the writes the
/// case before left.
fn fio_not_at_rest(report: &RunReport) -> Option<Warning> {
    let failed: Vec<(&str, &str)> =
        report.fio_cases.iter().filter_map(|c| Some((c.case_id.as_str(), c.writeback_settle.as_ref()?.error.as_deref()?))).collect();
    let (first, why) = *failed.first()?;
    Some(
        Warning::new(
            WarningKind::StoreNotAtRest,
            format!("{} fio case(s) ran without the dirty pages written back, e.g. {first}: {why}; such a case may carry the writes the one before it left", failed.len()),
            "A failed write-back is the filesystem reporting data it could not write: check the device; settle_writeback = false in the [[fio]] table skips the step",
        )
        .cases(failed.iter().map(|(id, _)| id.to_string()).collect()),
    )
}

/// Phases whose `read_recent = n` asks for a put further back than any worker got: until a worker
/// has put n objects its gets read its oldest put, so if it never does, no get read what was
/// asked. Known only for phases stopped by a count (or one pass over the objects).
fn read_recent_short(report: &RunReport) -> Option<Warning> {
    let workloads = report.plan.get("workloads")?.as_array()?;
    let short = |c: &CaseResult| -> Option<(String, u64, u64)> {
        let workload = workloads.iter().find(|w| w.get("name").and_then(|n| n.as_str()) == Some(c.workload.as_str()))?;
        workload.get("phases")?.as_array()?.iter().find_map(|p| {
            let wanted = p.get("read_recent")?.as_u64()?;
            let stop = p.get("stop")?;
            let set = |field: &str| !stop.get(field).is_none_or(|v| v.is_null());
            if set("duration_ns") || set("min_duration_ns") || set("bytes") {
                return None; // how many puts a timed phase makes is not known ahead
            }
            let iterations = stop.get("count").and_then(|n| n.as_u64()).unwrap_or(c.objects);
            let mix = p.get("mix")?.as_array()?;
            let weight = |puts: bool| -> u64 {
                mix.iter()
                    .filter(|m| !puts || m.get(0).and_then(|o| o.as_str()).and_then(Op::from_name).is_some_and(Op::writes))
                    .filter_map(|m| m.get(1)?.as_u64())
                    .sum()
            };
            // A sequence puts once per iteration; a mix, its put share of the operations.
            let sequence = p.get("sequence").and_then(|s| s.as_bool()) == Some(true);
            let puts = if sequence { iterations } else { iterations * weight(true) / weight(false).max(1) };
            let per_worker = puts / u64::from(c.threads.max(1));
            (per_worker < wanted).then(|| (p.get("label").and_then(|l| l.as_str()).unwrap_or("").to_string(), wanted, per_worker))
        })
    };
    let (cases, (phase, wanted, per_worker)) = cases_where(report.cases.iter().filter(|c| c.status == CaseStatus::Ok), short)?;
    let first = cases[0];
    Some(
        Warning::new(
            WarningKind::ReadRecentShort,
            format!(
                "{} case(s) read with read_recent further back than their workers put, e.g. {} in {phase}: read_recent = {wanted}, but \
                 each of its {} worker(s) put about {per_worker}, so its gets read each worker's oldest put, not the {wanted}th newest",
                cases.len(),
                first.case_id,
                first.threads
            ),
            "Raise objects or count to more than read_recent × threads, or lower read_recent",
        )
        .cases(ids(cases.into_iter())),
    )
}

fn high_spread(report: &RunReport) -> Vec<Warning> {
    // Repeats of one case share its id up to the last "/".
    // Each repeat's (window, whole phase) ops/s: the spread is of one measure, the window only
    // when every repeat has one (as the table's cells).
    type Repeats = (Vec<(Option<f64>, f64)>, Vec<String>);
    let mut spread: BTreeMap<(String, String), Repeats> = BTreeMap::new();
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        let base = c.case_id.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or_default();
        for p in &c.phases {
            let entry = spread.entry((base.clone(), p.phase.clone())).or_default();
            entry.0.push((p.throughput_all_active.as_ref().map(|t| t.ops_per_s), p.throughput_total.ops_per_s));
            entry.1.push(c.case_id.clone());
        }
    }
    spread
        .into_iter()
        .filter_map(|((case, phase), (repeats, case_ids))| {
            let windows: Option<Vec<f64>> = repeats.iter().map(|r| r.0).collect();
            let values = windows.unwrap_or_else(|| repeats.iter().map(|r| r.1).collect());
            let cv = coefficient_of_variation(&values).filter(|cv| *cv > HIGH_CV)?;
            Some(
                Warning::new(
                    WarningKind::HighSpread,
                    format!("{case} {phase}: throughput varies by {:.0}% (CV) across {} repeats", cv * 100.0, values.len()),
                    "Close other programs, sync and let writeback settle, or add repeats",
                )
                .cases(case_ids)
                .phase(&phase),
            )
        })
        .collect()
}

/// fio's repeats of one combination whose IOPS vary by more than `HIGH_CV`, one warning each
/// (worded as the object cases' are, so the table folds them alike).
fn fio_high_spread(report: &RunReport) -> Vec<Warning> {
    let mut repeats: BTreeMap<&str, (Vec<f64>, Vec<String>)> = BTreeMap::new();
    for c in &report.fio_cases {
        let base = c.case_id.rsplit_once('/').map_or(c.case_id.as_str(), |(base, _)| base);
        let entry = repeats.entry(base).or_default();
        entry.0.push(c.iops);
        entry.1.push(c.case_id.clone());
    }
    repeats
        .into_iter()
        .filter_map(|(case, (iops, case_ids))| {
            let cv = coefficient_of_variation(&iops).filter(|cv| *cv > HIGH_CV)?;
            let message = format!("{case}: IOPS varies by {:.0}% (CV) across {} repeats", cv * 100.0, iops.len());
            Some(Warning::new(WarningKind::HighSpread, message, "Close other programs, give each case a longer runtime, or add repeats").cases(case_ids))
        })
        .collect()
}

/// Below this a fio case's measured time is mostly its start: the first I/Os' cache misses and
/// queue filling, and the scheduling of fio's threads. (A recipe's `--scale` shortens runtime.)
const FIO_SHORT_RUNTIME_NS: u64 = 1_000_000_000;

fn fio_short_runtime(report: &RunReport) -> Option<Warning> {
    let short: Vec<&crate::fio::FioCaseResult> = report.fio_cases.iter().filter(|c| c.runtime_requested_ns < FIO_SHORT_RUNTIME_NS).collect();
    let first = short.first()?;
    Some(
        Warning::new(
            WarningKind::ShortRuntime,
            format!(
                "{} fio case(s) measured for less than {} (e.g. {}: runtime = {}): so short a run is mostly its start (cache misses, \
                 queues filling), and its repeats vary widely",
                short.len(),
                crate::units::Nanos(FIO_SHORT_RUNTIME_NS),
                first.case_id,
                crate::units::Nanos(first.runtime_requested_ns)
            ),
            "Give runtime = \"1s\" or more in the [[fio]] table (or a recipe a --scale that keeps it so)",
        )
        .cases(short.iter().map(|c| c.case_id.clone()).collect()),
    )
}

fn server_lost(report: &RunReport) -> Option<Warning> {
    let (cases, pids) = cases_where(report.cases.iter(), |c| (!c.resources.server_pids_lost.is_empty()).then(|| c.resources.server_pids_lost.clone()))?;
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    Some(
        Warning::new(
            WarningKind::ServerLost,
            format!(
                "the server's process ended during {} case(s) (e.g. {}: pid {}), killed or restarted outside stowbench: the server's \
                 CPU time of such a case is unknown (left empty), and its memory peak covers only the time before",
                cases.len(),
                cases[0].case_id,
                pids.join(", ")
            ),
            "Keep the server running through the run (a cold read phase restarts it itself, and follows it)",
        )
        .cases(ids(cases.into_iter())),
    )
}

/// The lines a person reads: the warnings in order, except that more than `SPREAD_LISTED`
/// cells of high spread fold into one line naming the widest (a quick run on a busy machine
/// gives dozens; each stays in the report's JSON and page).
pub fn lines_for_people(warnings: &[Warning]) -> Vec<String> {
    const SPREAD_LISTED: usize = 3;
    let mut spread: Vec<(f64, &Warning)> = warnings.iter().filter(|w| w.kind == WarningKind::HighSpread).map(|w| (spread_percent(w), w)).collect();
    if spread.len() <= SPREAD_LISTED {
        return warnings.iter().map(Warning::line).collect();
    }
    spread.sort_by(|a, b| b.0.total_cmp(&a.0));
    let widest: Vec<String> =
        spread[..SPREAD_LISTED].iter().map(|(percent, w)| format!("{} {percent:.0}%", w.message.split(':').next().unwrap_or_default())).collect();
    let folded = format!(
        "{} cells' throughput varies by more than {:.0}% (CV) across their repeats; the widest: {}, … (each is listed in the report's warnings). {}",
        spread.len(),
        HIGH_CV * 100.0,
        widest.join(", "),
        spread[0].1.advice
    );
    let first = warnings.iter().position(|w| w.kind == WarningKind::HighSpread).unwrap_or(0);
    let mut lines: Vec<String> = warnings.iter().filter(|w| w.kind != WarningKind::HighSpread).map(Warning::line).collect();
    lines.insert(first.min(lines.len()), folded);
    lines
}

/// The percentage a high-spread warning's message states (`high_spread` writes it).
fn spread_percent(w: &Warning) -> f64 {
    let after = w.message.split("varies by ").nth(1).unwrap_or_default();
    after.split('%').next().and_then(|p| p.parse().ok()).unwrap_or(0.0)
}

fn margins_inside_spread(headlines: &[Headline]) -> Option<Warning> {
    let ties: Vec<&Headline> = headlines.iter().filter(|h| h.verdict == super::spread::Verdict::Tie.name()).collect();
    let first = ties.first()?;
    Some(Warning::new(
        WarningKind::MarginInsideSpread,
        format!(
            "{} table row(s) have a winner's margin inside the spread of the repeats (e.g. {} · {} · {} thread{} · {}: {} over {}, shown as a tie)",
            ties.len(),
            first.workload,
            first.phase,
            first.threads,
            if first.threads == 1 { "" } else { "s" },
            first.size_label,
            first.winner.as_deref().unwrap_or("?"),
            first.runner_up.as_deref().unwrap_or("?")
        ),
        "Add repeats or lengthen the phases before reading a ratio there",
    ))
}

/// Cases where the client, not the storage, may have been the limit: much of the workers' time
/// went to stowbench's own work (payloads, checks, bookkeeping between operations), or (with a
/// server doing the storing) the client process kept every core it could use busy.
fn client_limits(report: &RunReport) -> Vec<Warning> {
    // The recorded machine, not this one: warnings must come out the same when a report is read back.
    let cores = f64::from(report.environment.cpu_count.max(1));
    let mut warnings = Vec::new();
    // One warning for every case over the threshold: in a default run that can be most of them.
    let busy: Vec<(&str, f64)> = report
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Ok)
        .filter_map(|c| Some((c.case_id.as_str(), c.own_work_share.filter(|s| *s > HIGH_OWN_WORK)?)))
        .collect();
    if let Some(&(worst_case, worst)) = busy.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        warnings.push(
            Warning::new(
                WarningKind::OwnWork,
                format!(
                    "{} case(s) spent more than {:.0}% of the workers' time in stowbench's own work (payloads, checks, bookkeeping; \
                     up to {:.0}% in {worst_case}); it is kept out of the numbers, but the client may have been the limit",
                    busy.len(),
                    HIGH_OWN_WORK * 100.0,
                    worst * 100.0
                ),
                "Try verify = false to compare",
            )
            .cases(busy.iter().map(|(id, _)| id.to_string()).collect()),
        );
    }
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        let measured_ns: u64 = c.phases.iter().map(|p| p.window_total_ns).sum();
        let client_ns = (c.resources.client_cpu_user_ns + c.resources.client_cpu_system_ns) as f64;
        let usable = (c.threads as f64).min(cores) * c.wall_ns.max(measured_ns) as f64;
        if c.resources.server_cpu_ns.is_some() && usable > 0.0 && client_ns / usable > CLIENT_BUSY {
            warnings.push(
                Warning::new(
                    WarningKind::ClientCpuBound,
                    format!("{}: the client used {:.0}% of the CPU its threads could use", c.case_id, client_ns / usable * 100.0),
                    "The client, not the server, may have been the limit: run the client on another machine or with fewer threads",
                )
                .cases(vec![c.case_id.clone()]),
            );
        }
    }
    warnings
}

/// Cases that wrote from several threads to a backend declaring `concurrent_writers = false`
/// (in `backend_info.capabilities`, absent from reports before it existed): the writes waited for
/// each other inside the backend, which is not refused but must not pass for the store's speed.
fn serialized_writes(report: &RunReport) -> Option<Warning> {
    // A backend that admits one writer, or one whose writes also pass a single-writer lock (the
    // row + file backends commit their rows through SQLite's): both measured a queue.
    let single_writer = |c: &&CaseResult| {
        c.backend_info.pointer("/capabilities/concurrent_writers").and_then(|v| v.as_bool()) == Some(false) || c.phases.iter().any(|p| p.lock_wait_ns > 0)
    };
    let writes = |c: &&CaseResult| c.phases.iter().flat_map(|p| p.ops.iter()).any(|(name, o)| o.count > 0 && Op::from_name(name).is_some_and(Op::writes));
    let cases: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status == CaseStatus::Ok && c.threads > 1).filter(single_writer).filter(writes).collect();
    let first = cases.first()?;
    let waited: u64 = first.phases.iter().map(|p| p.lock_wait_ns).sum();
    Some(
        Warning::new(
            WarningKind::SerializedWrites,
            format!(
                "{} case(s) wrote from several threads through a single-writer lock (a backend with concurrent_writers = false, \
                 or writes that wait on one), e.g. {} ({}) with {} threads, which waited {} for the writer lock in all",
                cases.len(),
                first.case_id,
                first.backend,
                first.threads,
                crate::units::format_nanos(waited)
            ),
            "Its write figures measure that queue (lock_wait_ns per phase); compare with threads = 1, or with a backend that writes concurrently",
        )
        .cases(ids(cases.into_iter())),
    )
}

/// Cases that read from several threads through a backend declaring `concurrent_readers =
/// false`: each get waited for the others', so the figures are one reader's, shared out.
fn serialized_reads(report: &RunReport) -> Option<Warning> {
    let single_reader = |c: &&CaseResult| c.backend_info.pointer("/capabilities/concurrent_readers").and_then(|v| v.as_bool()) == Some(false);
    let reads = |c: &&CaseResult| c.phases.iter().any(|p| p.ops.get("get").is_some_and(|o| o.count > 0));
    let cases: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status == CaseStatus::Ok && c.threads > 1).filter(single_reader).filter(reads).collect();
    let first = cases.first()?;
    Some(
        Warning::new(
            WarningKind::SerializedReads,
            format!(
                "{} case(s) read from several threads through a backend that admits one reader at a time (concurrent_readers = false), \
                 e.g. {} ({}) with {} threads",
                cases.len(),
                first.case_id,
                first.backend,
                first.threads
            ),
            "Its read figures measure that queue (lock_wait_ns per phase); compare with threads = 1",
        )
        .cases(ids(cases.into_iter())),
    )
}

/// Open-loop phases whose backend could not keep the rate: their latencies from the intended
/// start grow with the run's length, not with any property of the storage.
fn behind_schedule(report: &RunReport) -> Vec<Warning> {
    let mut out = Vec::new();
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        for p in &c.phases {
            let Some(s) = p.open_loop.as_ref().filter(|s| !s.kept_up) else { continue };
            out.push(
                Warning::new(
                    WarningKind::BehindSchedule,
                    format!(
                        "{} {}: could not keep the rate of {}/s: achieved {:.0}/s and ended {} behind the schedule; latencies from the \
                         intended start include that wait",
                        c.case_id,
                        p.phase,
                        crate::units::three_digits(s.rate_per_s),
                        p.throughput_total.ops_per_s,
                        crate::units::format_nanos(s.end_lag_ns)
                    ),
                    "Lower the rate to find what it sustains",
                )
                .cases(vec![c.case_id.clone()])
                .phase(&p.phase),
            );
        }
    }
    out
}

fn errors_or_retries(report: &RunReport) -> Option<Warning> {
    let (mut errors, mut retries) = (0u64, 0u64);
    let mut cases = Vec::new();
    for c in &report.cases {
        let ops = c.phases.iter().flat_map(|p| p.ops.values());
        let (e, r) = ops.fold((0, 0), |(e, r), o| (e + o.errors.values().sum::<u64>(), r + o.retries));
        if e + r > 0 {
            errors += e;
            retries += r;
            cases.push(c.case_id.clone());
        }
    }
    (!cases.is_empty()).then(|| {
        Warning::new(
            WarningKind::ErrorsOrRetries,
            format!("{errors} operation error(s) and {retries} retry(ies) in {} case(s) (e.g. {})", cases.len(), cases[0]),
            "Failed operations are left out of throughput and latency; read errors by kind per operation in the report",
        )
        .cases(cases)
    })
}

/// Objects that came back damaged, and cases whose reads were never checked.
fn verification(report: &RunReport) -> Vec<Warning> {
    let mut out = Vec::new();
    let damaged: Vec<&CaseResult> = report.cases.iter().filter(|c| c.verification.mismatches > 0).collect();
    if !damaged.is_empty() {
        let total: u64 = damaged.iter().map(|c| c.verification.mismatches).sum();
        let some: Vec<String> = damaged.iter().flat_map(|c| &c.verification.mismatched).take(3).map(|m| m.short()).collect();
        let shown = if some.is_empty() { String::new() } else { format!(": {}", some.join(", ")) };
        out.push(
            Warning::new(
                WarningKind::DataMismatch,
                format!("{total} object(s) read back differ from what was put, in {} case(s){shown}", damaged.len()),
                "Each damaged object is listed with its offset and kind in verification.mismatched of the report",
            )
            .cases(ids(damaged.into_iter())),
        );
    }
    // A case that read nothing has nothing to verify; one that read with verify = false does.
    let reads = |c: &&CaseResult| c.phases.iter().any(|p| ["get", "download"].iter().any(|op| p.ops.contains_key(*op)));
    let unchecked = ids(report.cases.iter().filter(|c| !c.verification.enabled && c.status != CaseStatus::Skipped).filter(reads));
    if !unchecked.is_empty() {
        out.push(
            Warning::new(
                WarningKind::NotVerified,
                format!(
                    "the data was not verified: {} case(s) read with verify = false (e.g. {}), so damaged or wrong objects would pass unseen",
                    unchecked.len(),
                    unchecked[0]
                ),
                "Leave verify on (the default) to check every get; its cost is kept out of the timings",
            )
            .cases(unchecked),
        );
    }
    out
}

/// Conditions of the machine and cache that colour every number.
fn conditions(report: &RunReport) -> Vec<Warning> {
    let mut out = Vec::new();
    // The sim backend has no page cache to be warm.
    let warm = ids(report.cases.iter().filter(|c| !c.backend_is_test_tool && c.cache_state == "warm" && c.phases.iter().any(|p| p.ops.contains_key("get"))));
    if !warm.is_empty() {
        out.push(
            Warning::new(
                WarningKind::WarmCache,
                "reads ran with a warm page cache: data just written is likely served from memory".into(),
                "Use cache = \"cold\" (root) to read from disk, or direct = true where the backend has it",
            )
            .cases(warm),
        );
    }
    let server_warm = ids(report
        .cases
        .iter()
        .filter(|c| crate::backend::server::is_server_backend(&c.backend) && c.phases.iter().any(|p| p.cache_state == "cold" && !p.server_restarted)));
    if !server_warm.is_empty() {
        out.push(
            Warning::new(
                WarningKind::ServerCacheWarm,
                format!(
                    "{} case(s) read \"cold\" from a server stowbench's scripts did not start (e.g. {}): the page cache was dropped, but \
                     the server's own cache (shared buffers, buffer pool) stayed warm",
                    server_warm.len(),
                    server_warm[0]
                ),
                "Restart the server before the read phase yourself, or start it with scripts/services.sh so stowbench restarts it",
            )
            .cases(server_warm),
        );
    }
    // Too little for the page cache's granularity and readahead to say anything below this.
    const COLD_CHECK_MIN_BYTES: u64 = 1 << 20;
    let mut from_memory: Vec<String> = Vec::new();
    let mut example = String::new();
    for c in &report.cases {
        let fetched_little = |p: &&super::model::PhaseResult| {
            let got = p.ops.get("get").map_or(0, |o| o.bytes);
            p.cache_state == "cold" && got >= COLD_CHECK_MIN_BYTES && p.device_read_bytes.is_some_and(|read| read < got / 2)
        };
        if let Some(p) = c.phases.iter().find(fetched_little) {
            if example.is_empty() {
                let got = p.ops.get("get").map_or(0, |o| o.bytes);
                example = format!(
                    "{} {}: {} of {}",
                    c.case_id,
                    p.phase,
                    crate::units::format_bytes(p.device_read_bytes.unwrap_or(0)),
                    crate::units::format_bytes(got)
                );
            }
            from_memory.push(c.case_id.clone());
        }
    }
    if !from_memory.is_empty() {
        out.push(
            Warning::new(
                WarningKind::ColdReadsFromMemory,
                format!(
                    "{} case(s) read \"cold\" but fetched less than half of what they got from the storage layer (e.g. {}): the rest \
                     came from memory",
                    from_memory.len(),
                    example
                ),
                "Check where the data lives (tmpfs has no device) and whether a cache stowbench cannot empty served it (a server it did \
                 not start)",
            )
            .cases(from_memory),
        );
    }
    if let Some(reclaim) = &report.environment.page_cache_reclaim {
        out.push(Warning::new(
            WarningKind::IdleMemoryEviction,
            format!(
                "this machine evicts idle memory ({reclaim}): page cache idle that long is evicted too, so \"warm\" reads after a \
                 pause may come from disk and vary from run to run"
            ),
            "Keep phases back to back, or measure cold reads on purpose",
        ));
    }
    if let Some(clock) = &report.environment.clock {
        if let Some(ppm) = clock.drift_ppm.filter(|ppm| ppm.abs() > CLOCK_DRIFT_PPM) {
            out.push(Warning::new(
                WarningKind::ClockDrift,
                format!(
                    "the TSC that timed this run ran {ppm:+.0} ppm off CLOCK_MONOTONIC by its end (its calibration is good to a few): \
                     durations and rates may be off by that much"
                ),
                "Run again with --clock monotonic",
            ));
        }
    }
    // Where the data lived: each case's own filesystem (a target's path may put it on another
    // one than the work directory's), or the work directory's when no case says. Not for fio's
    // cases: fio lays its files out before it starts timing, and its target may be a filesystem
    // of its own, so a run of fio alone has nothing this warning is about.
    let case_filesystems: Vec<&FilesystemInfo> = report.cases.iter().filter_map(|c| c.filesystem.as_ref()).collect();
    let data_filesystems = match (case_filesystems.is_empty(), report.cases.is_empty()) {
        (false, _) => case_filesystems,
        (true, false) => report.environment.work_dir_filesystem.iter().collect(),
        (true, true) => Vec::new(),
    };
    if data_filesystems.iter().any(|f| f.journal == Some(false)) {
        out.push(Warning::new(
            WarningKind::Ext4NoJournal,
            "the data directory's ext4 has no journal: creating files within a minute or more of deleting many (a previous case's \
             cleanup) is slower, because the inode allocator steps over recently deleted inodes"
                .into(),
            "Compare file-creating cases from separate runs, or use a filesystem with a journal",
        ));
    }
    out
}

/// A report of schema version 1 held its warnings as plain strings.
pub fn from_v1(lines: Vec<String>) -> Vec<Warning> {
    lines.into_iter().map(|message| Warning::new(WarningKind::Unclassified, message, "")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> RunReport {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(format!("{name}.json"));
        crate::report::read(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn fio_cases_are_warned_of_their_spread_and_of_a_short_runtime() {
        let mut fio = fixture("fio-a");
        let warnings = for_report(&fio);
        let spread: Vec<&Warning> = warnings.iter().filter(|w| w.kind == WarningKind::HighSpread).collect();
        // randread qd1: 6.33 and 3.88 M IOPS over its two repeats.
        let qd1 = spread.iter().find(|w| w.message.starts_with("fio/fa/dir/randread/bs4KiB/j1/qd1/f1/s1MiB: IOPS varies by 34% (CV) across 2 repeats"));
        assert!(qd1.is_some_and(|w| w.case_ids.len() == 2), "{spread:#?}");
        let short = warnings.iter().find(|w| w.kind == WarningKind::ShortRuntime).expect("a runtime of 300 ms is short");
        assert!(
            short.message.starts_with("8 fio case(s) measured for less than 1.00 s (e.g. fio/fa/dir/randread/bs4KiB/j1/qd1/f1/s1MiB/r1: runtime = 300 ms)"),
            "{}",
            short.message
        );
        for case in &mut fio.fio_cases {
            case.runtime_requested_ns = 1_000_000_000;
            case.iops = 1000.0 + f64::from(case.repeat_index);
        }
        let warnings = for_report(&fio);
        assert!(!warnings.iter().any(|w| matches!(w.kind, WarningKind::ShortRuntime | WarningKind::HighSpread)), "{warnings:#?}");
    }

    #[test]
    fn a_case_whose_server_ended_says_its_server_cpu_is_unknown() {
        let mut report = fixture("objects-a");
        assert!(!for_report(&report).iter().any(|w| w.kind == WarningKind::ServerLost));
        report.cases[1].resources.server_pids_lost = vec![4242];
        let lost: Vec<Warning> = for_report(&report).into_iter().filter(|w| w.kind == WarningKind::ServerLost).collect();
        assert_eq!(lost.len(), 1);
        assert!(lost[0].message.contains(&format!("1 case(s) (e.g. {}: pid 4242)", report.cases[1].case_id)), "{}", lost[0].message);
        assert_eq!(lost[0].case_ids, vec![report.cases[1].case_id.clone()]);
    }

    #[test]
    fn a_run_of_fio_alone_is_not_warned_about_the_work_directorys_missing_journal() {
        let no_journal = |r: &RunReport| for_report(r).iter().any(|w| w.kind == WarningKind::Ext4NoJournal);
        let fio = fixture("fio-a");
        assert!(fio.cases.is_empty() && !fio.fio_cases.is_empty());
        assert_eq!(fio.environment.work_dir_filesystem.as_ref().and_then(|f| f.journal), Some(false));
        assert!(!no_journal(&fio), "fio lays its files out before it times anything");
        // Cases that do not say where their data lived are still judged by the work directory.
        let mut objects = fixture("objects-a");
        objects.cases.iter_mut().for_each(|c| c.filesystem = None);
        objects.environment.work_dir_filesystem = fio.environment.work_dir_filesystem.clone();
        assert!(no_journal(&objects));
    }

    fn spread(case: &str, percent: u32) -> Warning {
        Warning::new(WarningKind::HighSpread, format!("{case} get: throughput varies by {percent}% (CV) across 3 repeats"), "Add repeats")
    }

    #[test]
    fn more_than_three_spread_warnings_fold_into_one_line_naming_the_widest() {
        let few = Warning::new(WarningKind::FewSamples, "2 case(s) have few samples".into(), "Raise objects");
        let last = Warning::new(WarningKind::Unclassified, "the last".into(), "");
        let mut warnings = vec![few.clone(), spread("a/w/4KiB/t1", 12), spread("b/w/4KiB/t1", 33), spread("c/w/4KiB/t1", 27)];
        let listed = lines_for_people(&[warnings.clone(), vec![last.clone()]].concat());
        assert_eq!(listed.len(), 5, "three are listed one by one: {listed:?}");

        warnings.extend([spread("d/w/4KiB/t1", 15), last]);
        let folded = lines_for_people(&warnings);
        assert_eq!(folded.len(), 3, "{folded:?}");
        assert_eq!(folded[0], few.line());
        assert_eq!(
            folded[1],
            "4 cells' throughput varies by more than 10% (CV) across their repeats; the widest: b/w/4KiB/t1 get 33%, c/w/4KiB/t1 get 27%, \
             d/w/4KiB/t1 get 15%, … (each is listed in the report's warnings). Add repeats"
        );
        assert_eq!(folded[2], "the last");
    }
}
