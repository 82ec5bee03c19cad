//! The terminal table: for each workload, phase and thread count, one row per size and one column
//! per target, with throughput and p99 latency, and which target wins by what ratio.
//!
//! A pure function of the report: `stowbench report FILE` prints exactly what the run printed.

use super::breakeven::BreakEven;
use super::model::{
    supports_percentile, CaseResult, CaseStatus, Headline, HeadlineFigure, LatencySummary, OpResult, PhaseResult, RunReport, WritebackSettle,
    FEW_SAMPLES_FOR_P99,
};
use super::spread::{verdict, Spread, Verdict};
use crate::units::{format_bytes, format_nanos, format_rate_bytes, three_digits, ByteSize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Median of the values (mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 })
}

/// Coefficient of variation (stddev / mean) of the values, for two or more.
pub fn coefficient_of_variation(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    (mean > 0.0).then(|| var.sqrt() / mean)
}

/// The throughput of one phase on its own (the operations table, a case's spread): the
/// all-active (steady-state) window when it exists, else the whole phase.
pub fn headline_throughput(p: &PhaseResult) -> (f64, f64) {
    let t = p.throughput_all_active.as_ref().unwrap_or(&p.throughput_total);
    (t.bytes_per_s, t.ops_per_s)
}

/// Which throughput a block of the table compares. One measure for every cell of a block: a
/// row that ranked one target's steady-state window against another's whole phase (or averaged
/// the two over repeats) would compare different things.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Measure {
    /// The all-active window, which every phase of the block has.
    #[default]
    #[serde(rename = "steady_state_window")]
    SteadyState,
    /// The whole phase: some phase of the block was too short for a window (under 100 ms).
    #[serde(rename = "whole_phase")]
    WholePhase,
}

impl Measure {
    /// The name report.json's headlines give it.
    pub fn name(self) -> &'static str {
        match self {
            Measure::SteadyState => "steady_state_window",
            Measure::WholePhase => "whole_phase",
        }
    }

    /// What a block's header says its throughput is.
    pub fn said(self) -> &'static str {
        match self {
            Measure::SteadyState => "throughput in the steady-state window",
            Measure::WholePhase => "throughput over the whole phase, as some phase here was too short for a steady-state window",
        }
    }
}

/// One table cell: the repeats of one target at one size.
#[derive(Default)]
struct Cell {
    bytes_per_s: Vec<f64>,
    ops_per_s: Vec<f64>,
    p99_ns: Vec<f64>,
    /// The latency samples each repeat's p99 came from.
    p99_samples: Vec<u64>,
    /// In a phase of more than one kind of operation, the operation each repeat's p99 is of (its
    /// slowest): a mix's p99 names it, and its service time is that operation's.
    p99_ops: Vec<String>,
    /// Open-loop phases: p99 of the service time (from the actual start); `p99_ns` is then
    /// measured from the intended start.
    service_p99_ns: Vec<f64>,
    /// Open-loop repeats that fell behind their schedule.
    behind: usize,
    failed: usize,
    /// Repeats whose phase finished without one successful operation (every one a miss): no
    /// figure to rank, and no latency to show.
    nothing_done: usize,
    /// Repeats whose phase did its operations within one tick of the clock (a span of 0 ns): no
    /// rate can be computed, and a rate of 0 would rank them slowest.
    too_short: usize,
    /// Operations over the repeats, successful ones and misses: what the missed share is of.
    attempted: u64,
    misses: u64,
    /// Each finished repeat's (bytes/s, ops/s) in its steady-state window, if it had one, and
    /// over its whole phase: `bytes_per_s` and `ops_per_s` take one of them for the whole block.
    windows: Vec<Option<(f64, f64)>>,
    totals: Vec<(f64, f64)>,
    /// The measure `bytes_per_s` and `ops_per_s` hold, the same for every cell of a block.
    measure: Measure,
    /// A test tool's cell (null, sim): shown, but never ranked against a real backend.
    test_tool: bool,
    /// Per operation that missed: its misses over the repeats and their latency.
    missed: BTreeMap<String, Missed>,
}

/// The misses of one operation in a cell, over its repeats: how many, and their latency (kept
/// apart from the successes', which the cell's p99 is of).
#[derive(Default)]
struct Missed {
    count: u64,
    /// Each repeat's p50 and p99 of its misses' latency, in nanoseconds.
    p50_ns: Vec<f64>,
    p99_ns: Vec<f64>,
    /// The latency samples of each repeat's misses.
    samples: Vec<u64>,
    /// Repeats whose report has no latency of its misses (written before it was recorded).
    unrecorded: usize,
}

impl Missed {
    /// "20 missed: p50 1.00 ms, p99 1.20 ms", with the rules of the cells' p99: "max" where a
    /// repeat had too few misses for a p99, and no p50 where one had a single miss.
    fn text(&self) -> String {
        let mut text = format!("{} missed", self.count);
        let fewest = self.samples.iter().copied().min().unwrap_or(0);
        if let (Some(p50), Some(p99)) = (median(&mut self.p50_ns.clone()), median(&mut self.p99_ns.clone())) {
            let p50 = if supports_percentile(fewest, 50.0) { format!("p50 {}, ", format_nanos(p50 as u64)) } else { String::new() };
            let few = (fewest < FEW_SAMPLES_FOR_P99).then_some(fewest);
            let _ = write!(text, ": {p50}{} {}", p99_word(few), format_nanos(p99 as u64));
        }
        if self.unrecorded > 0 {
            text += " (latency not recorded: a report of an earlier version)";
        }
        text
    }
}

/// What a cell's p99 figure is called: "max" when a repeat had too few samples for a 99th
/// percentile other than its largest sample.
fn p99_word(from_samples: Option<u64>) -> &'static str {
    if from_samples.is_some() {
        "max"
    } else {
        "p99"
    }
}

impl Cell {
    /// The fewest samples a repeat's p99 came from, when too few for a percentile.
    fn p99_from_few_samples(&self) -> Option<u64> {
        self.p99_samples.iter().copied().filter(|&n| n > 0).min().filter(|&n| n < FEW_SAMPLES_FOR_P99)
    }

    /// The operation a mixed phase's p99 is of; several joined by "/" when the repeats' slowest
    /// differed.
    fn p99_op(&self) -> Option<String> {
        let mut ops = self.p99_ops.clone();
        ops.sort();
        ops.dedup();
        (!ops.is_empty()).then(|| ops.join("/"))
    }

    /// Adds the misses of one repeat's phase, operation by operation.
    fn add_misses(&mut self, p: &PhaseResult) {
        for (op, result) in p.ops.iter().filter(|(_, r)| r.misses > 0) {
            let missed = self.missed.entry(op.clone()).or_default();
            missed.count += result.misses;
            match &result.miss_latency {
                Some(l) => {
                    missed.p50_ns.push(l.p50_ns as f64);
                    missed.p99_ns.push(l.p99_ns as f64);
                    missed.samples.push(l.samples);
                }
                None => missed.unrecorded += 1,
            }
        }
    }

    /// The share of the repeats' operations that missed, when any did.
    fn missed_share(&self) -> Option<f64> {
        (self.misses > 0).then(|| self.misses as f64 / self.attempted.max(1) as f64)
    }

    /// Whether the row ranks its targets by operations a second: objects of no bytes, or a phase
    /// that moves none (head, delete), whose bytes a second are 0 for everyone.
    fn rows_by_ops(size_bytes: u64, cells: &BTreeMap<String, Cell>) -> bool {
        size_bytes == 0 || cells.values().all(|c| c.bytes_per_s.iter().all(|b| *b == 0.0))
    }
}

type GroupKey = (String, String, u32); // workload, phase, threads
/// Rows of one group: (size in bytes, size label) → target → cell.
type Rows = BTreeMap<(u64, String), BTreeMap<String, Cell>>;

/// An operation's latency as its p99 is shown: from the intended start in an open-loop phase.
fn response(op: &OpResult) -> &LatencySummary {
    op.response_latency.as_ref().unwrap_or(&op.latency)
}

/// The table's groups, in the order they first appear: (workload, phase, threads) → rows.
fn groups(report: &RunReport) -> BTreeMap<(usize, GroupKey), Rows> {
    let mut groups: BTreeMap<(usize, GroupKey), Rows> = BTreeMap::new();
    let mut group_order: Vec<GroupKey> = Vec::new();
    for case in &report.cases {
        let mut phases: Vec<String> = case.phases.iter().map(|p| p.phase.clone()).collect();
        // A case that failed before some of its phases is "failed" in each of them, so its row
        // reads failed where it would have run, not "-" (and no "(no phase)" block of its own).
        if case.status != CaseStatus::Ok {
            let planned = planned_phases(report, &case.workload);
            if planned.len() > phases.len() && planned.starts_with(&phases) {
                phases = planned;
            }
        }
        if phases.is_empty() {
            phases.push("(no phase)".into());
        }
        for (i, label) in phases.iter().enumerate() {
            let key = (case.workload.clone(), label.clone(), case.threads);
            let pos = group_order.iter().position(|k| *k == key).unwrap_or_else(|| {
                group_order.push(key.clone());
                group_order.len() - 1
            });
            let cell = groups
                .entry((pos, key))
                .or_default()
                .entry((case.size_bytes_max, case.size_label.clone()))
                .or_default()
                .entry(case.target.clone())
                .or_default();
            cell.test_tool = case.backend_is_test_tool;
            match (case.status, case.phases.get(i)) {
                (CaseStatus::Ok, Some(p)) if p.ops.values().all(|op| op.count == 0) => {
                    cell.add_misses(p);
                    let misses: u64 = p.ops.values().map(|op| op.misses).sum();
                    cell.nothing_done += 1;
                    (cell.misses, cell.attempted) = (cell.misses + misses, cell.attempted + misses);
                }
                (CaseStatus::Ok, Some(p)) if p.window_total_ns == 0 => {
                    cell.add_misses(p);
                    let misses: u64 = p.ops.values().map(|op| op.misses).sum();
                    cell.too_short += 1;
                    cell.misses += misses;
                    cell.attempted += misses + p.ops.values().map(|op| op.count).sum::<u64>();
                }
                (CaseStatus::Ok, Some(p)) => {
                    cell.add_misses(p);
                    let misses: u64 = p.ops.values().map(|op| op.misses).sum();
                    cell.misses += misses;
                    cell.attempted += misses + p.ops.values().map(|op| op.count).sum::<u64>();
                    cell.windows.push(p.throughput_all_active.as_ref().map(|t| (t.bytes_per_s, t.ops_per_s)));
                    cell.totals.push((p.throughput_total.bytes_per_s, p.throughput_total.ops_per_s));
                    let slowest = p.ops.iter().max_by_key(|(_, op)| response(op).p99_ns);
                    cell.p99_ns.push(slowest.map_or(0, |(_, op)| response(op).p99_ns) as f64);
                    cell.p99_samples.push(slowest.map_or(0, |(_, op)| response(op).samples));
                    if let Some((name, _)) = slowest.filter(|_| p.ops.len() > 1) {
                        cell.p99_ops.push(name.clone());
                    }
                    if let Some(schedule) = &p.open_loop {
                        // The service time of the operation the p99 is of, not the slowest
                        // service time of any (which may be another operation's).
                        cell.service_p99_ns.push(slowest.map_or(0, |(_, op)| op.latency.p99_ns) as f64);
                        cell.behind += usize::from(!schedule.kept_up);
                    }
                }
                _ => cell.failed += 1,
            }
        }
    }
    for rows in groups.values_mut() {
        let cells = || rows.values().flat_map(|by_target| by_target.values());
        let measure = if cells().all(|c| c.windows.iter().all(Option::is_some)) { Measure::SteadyState } else { Measure::WholePhase };
        for cell in rows.values_mut().flat_map(|by_target| by_target.values_mut()) {
            let figures: Vec<(f64, f64)> = match measure {
                Measure::SteadyState => cell.windows.iter().flatten().copied().collect(),
                Measure::WholePhase => cell.totals.clone(),
            };
            (cell.bytes_per_s, cell.ops_per_s) = figures.into_iter().unzip();
            cell.measure = measure;
        }
    }
    groups
}

/// The measure a block's cells hold.
fn measure_of(rows: &Rows) -> Measure {
    rows.values().flat_map(|by_target| by_target.values()).next().map(|c| c.measure).unwrap_or_default()
}

/// The phase labels the plan gave workload `name` (none in a report without its plan).
fn planned_phases(report: &RunReport, name: &str) -> Vec<String> {
    let workloads = report.plan.get("workloads").and_then(|w| w.as_array());
    let workload = workloads.into_iter().flatten().find(|w| w.get("name").and_then(|n| n.as_str()) == Some(name));
    let phases = workload.and_then(|w| w.get("phases")).and_then(|p| p.as_array());
    phases.into_iter().flatten().filter_map(|p| p.get("label").and_then(|l| l.as_str()).map(str::to_string)).collect()
}

/// Every row of the table as data: each target's mean, spread and interval, and the verdict.
pub fn headlines(report: &RunReport) -> Vec<Headline> {
    let mut out = Vec::new();
    for ((_, (workload, phase, threads)), rows) in groups(report) {
        let measure = measure_of(&rows);
        for ((size_bytes, size_label), cells) in rows {
            let by_ops = Cell::rows_by_ops(size_bytes, &cells);
            let mut figures: Vec<HeadlineFigure> = cells
                .iter()
                .map(|(target, cell)| {
                    let spread = Spread::of(if by_ops { &cell.ops_per_s } else { &cell.bytes_per_s });
                    HeadlineFigure {
                        target: target.clone(),
                        repeats: spread.map_or(0, |s| s.n),
                        failed: cell.failed,
                        mean: spread.map(|s| s.mean),
                        cv: spread.and_then(|s| s.cv),
                        // A rate is never below zero: the t interval of two or three repeats
                        // can reach below it, and every format shows it cut at zero.
                        ci95_low: spread.and_then(|s| s.ci95).map(|c| c.0.max(0.0)),
                        ci95_high: spread.and_then(|s| s.ci95).map(|c| c.1),
                        p99_ns_median: median(&mut cell.p99_ns.clone()),
                        p99_from_samples: cell.p99_from_few_samples(),
                        p99_op: cell.p99_op(),
                        service_p99_ns_median: median(&mut cell.service_p99_ns.clone()),
                        missed_share: cell.missed_share(),
                        without_success: cell.nothing_done,
                        behind_schedule: cell.behind,
                        too_short: cell.too_short,
                    }
                })
                .collect();
            figures.sort_by(|a, b| b.mean.unwrap_or(-1.0).total_cmp(&a.mean.unwrap_or(-1.0)));
            let (winner, runner_up, ratio, verdict) = match ranked(&cells, by_ops).as_slice() {
                _ if !too_short_to_rank(&cells).is_empty() => (None, None, None, "too_short"),
                [(best, name), (second, other), ..] if second.mean > 0.0 => {
                    (Some(name.to_string()), Some(other.to_string()), Some(best.mean / second.mean), verdict(best, second).name())
                }
                [(_, name), ..] => (Some(name.to_string()), None, None, "only_result"),
                [] => (None, None, None, "no_result"),
            };
            out.push(Headline {
                workload: workload.clone(),
                phase: phase.clone(),
                threads,
                size_label,
                size_bytes,
                metric: if by_ops { "ops_per_s" } else { "bytes_per_s" }.into(),
                measure: measure.name().into(),
                figures,
                winner,
                runner_up,
                ratio,
                verdict: verdict.into(),
            });
        }
    }
    out
}

/// Renders the report as text tables.
pub fn render(report: &RunReport) -> String {
    let mut out = String::new();
    header(report, &mut out);
    let targets: Vec<String> = ordered_targets(&report.cases);
    let groups = groups(report);
    let break_evens = super::breakeven::compute(report);
    for ((_, (workload, phase, threads)), rows) in &groups {
        let thread_word = if *threads == 1 { "thread" } else { "threads" };
        let latency = if phase.contains(" @ ") {
            "open loop: p99 latency from each operation's intended start, svc = from its actual start (service time)"
        } else {
            "p99 latency"
        };
        let few = rows.values().flat_map(|by_target| by_target.values()).any(|c| c.p99_from_few_samples().is_some());
        let max_instead = if few { format!(" (max where a repeat had fewer than {FEW_SAMPLES_FOR_P99} samples)") } else { String::new() };
        let mixed = rows.values().flat_map(|by_target| by_target.values()).any(|c| c.p99_op().is_some());
        let of_which = if mixed { "; in this mix, each p99 that of the slowest operation, named" } else { "" };
        let _ = writeln!(
            out,
            "\n{phase} · {threads} {thread_word} · workload {workload}   ({}: mean of repeats ±CV (95% CI of the mean); {latency}{of_which}{max_instead}: median of repeats)",
            measure_of(rows).said()
        );
        render_group(&targets, rows, &mut out);
        miss_lines(&targets, rows, &mut out);
        if let Some(ops) = phase.strip_prefix("sequence ") {
            sequence_times(report, (workload, phase, *threads), &ops.split('-').collect::<Vec<_>>(), &targets, &mut out);
        }
        file_server_times(report, (workload, phase, *threads), &targets, &mut out);
        let crossings: Vec<&BreakEven> = break_evens.iter().filter(|b| b.workload == *workload && b.phase == *phase && b.threads == *threads).collect();
        break_even_lines(&crossings, &mut out);
    }
    footer(report, &mut out);
    fio_section(report, &mut out);
    out
}

/// fio cases: a table of every case, then IOPS and MB/s against outstanding I/O per block size,
/// at one thread count (`series::chart_threads`; the published charts' layout).
fn fio_section(report: &RunReport, out: &mut String) {
    use crate::fio::series;
    if report.fio_cases.is_empty() && report.fio_failures.is_empty() {
        return;
    }
    let mixed = report.fio_cases.iter().any(|c| c.read.is_some() && c.write.is_some());
    let order = if mixed { "; latencies read / write for mixed patterns" } else { "" };
    // How the I/O was done belongs beside its numbers: buffered and O_DIRECT, or libaio and
    // psync, print the same columns.
    let engines = dedup(report.fio_cases.iter().map(|c| c.ioengine.as_str())).join(" and ");
    let modes = dedup(report.fio_cases.iter().map(|c| if c.direct { "direct (O_DIRECT)" } else { "buffered" })).join(" and ");
    let how = if report.fio_cases.is_empty() { String::new() } else { format!("; ioengine {engines}, {modes}") };
    let _ = writeln!(out, "\nfio cases ({}{how}{order}):", report.fio_cases.first().map(|c| c.fio_version.as_str()).unwrap_or("fio"));
    if !report.fio_cases.is_empty() {
        let table = series::render_table(&report.fio_cases);
        let _ = writeln!(out, "{table}");
        if table.contains(series::TOO_FEW_IOS) {
            let _ = writeln!(out, "  {}\n", series::TOO_FEW_IOS_NOTE);
        }
        let threads = series::chart_threads(&report.fio_cases, report.environment.cpu_count);
        let _ = writeln!(out, "{}", series::render_charts(&series::iops_vs_iodepth(&report.fio_cases, threads)));
    }
    let settles: Vec<&WritebackSettle> = report.fio_cases.iter().filter_map(|c| c.writeback_settle.as_ref()).collect();
    if let Some(line) = settle_summary(&settles, "case", unsettled_names(report, "fio"), "sweep") {
        let _ = writeln!(out, "  {line}");
    }
    for f in &report.fio_failures {
        let _ = writeln!(out, "  fio case {} failed: {}", f.case_id, f.message);
    }
}

fn ordered_targets(cases: &[CaseResult]) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for c in cases {
        if !targets.contains(&c.target) {
            targets.push(c.target.clone());
        }
    }
    targets
}

/// "12 cases", or "2 of 8 cases" (with the first few not run) for a run that stopped early.
pub fn cases_of_planned(report: &RunReport) -> String {
    let planned: Vec<&str> = report.plan.get("cases").and_then(|c| c.as_array()).into_iter().flatten().filter_map(|c| c.get("id")?.as_str()).collect();
    let done = report.cases.len();
    if planned.len() <= done {
        return format!("{done} cases");
    }
    let missing: Vec<&str> = planned.iter().copied().filter(|id| !report.cases.iter().any(|c| c.case_id == *id)).collect();
    let more = if missing.len() > 3 { format!(" and {} more", missing.len() - 3) } else { String::new() };
    format!("{done} of {} planned cases (not run: {}{more})", planned.len(), missing.iter().take(3).copied().collect::<Vec<_>>().join(", "))
}

fn header(report: &RunReport, out: &mut String) {
    let fio = if report.fio_cases.is_empty() { String::new() } else { format!(", {} fio cases", report.fio_cases.len()) };
    let _ = writeln!(out, "stowbench {} — run {} ({}), {}{fio}, seed {}", report.name, report.run_id, report.status, cases_of_planned(report), report.seed);
    if let Some(caveat) = report.status.caveat() {
        let _ = writeln!(out, "  {}: {caveat}", report.status);
    }
    for (i, line) in condition_lines(report).iter().enumerate() {
        let _ = writeln!(out, "{}{line}", if i == 0 { "" } else { "  " });
    }
}

/// The conditions behind every number, shortest first, as the top of the table and of the HTML
/// page state them: the machine, where the data was and its page cache, the recipe, each
/// target's durability, and what verification found.
pub fn condition_lines(report: &RunReport) -> Vec<String> {
    let env = &report.environment;
    let mut lines = Vec::new();
    let machine = format!("{} CPUs, {} RAM, kernel {}", env.cpu_count, format_bytes(env.memory_bytes), env.kernel);
    if report.cases.is_empty() {
        // fio alone: where its data lived is in the fio table, per target.
        lines.push(machine);
    } else {
        let fs = env.work_dir_filesystem.as_ref().map(|f| f.summary()).unwrap_or_else(|| "unknown filesystem".into());
        let cache: Vec<&str> = dedup(report.cases.iter().map(|c| match c.cache_state.as_str() {
            "cold" => "cold (dropped before reads)",
            "direct" => "bypassed (direct I/O)",
            other => other,
        }));
        let restarted = report.cases.iter().any(|c| c.phases.iter().any(|p| p.server_restarted));
        let servers = if restarted { "; servers restarted before cold reads (their caches empty too)" } else { "" };
        lines.push(format!("data in {} on {fs}; page cache {}{servers}; {machine}", env.work_dir, cache.join("/")));
        for (target, f) in report.data_filesystems_elsewhere() {
            lines.push(format!("data of {target} under {} on {} at {}", data_location(&f.path), f.summary(), f.mount_point));
        }
    }
    if let Some(recipe) = &report.recipe {
        let size = if recipe.scale == 1.0 { "the published size".to_string() } else { format!("×{} of the published size", recipe.scale) };
        lines.push(format!("recipe {} at scale {} ({size})", recipe.name, recipe.scale));
        for s in &recipe.skipped_targets {
            lines.push(format!("skipped target {}: {}; to run it: {}", s.target, s.reason, s.enable));
        }
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    for c in &report.cases {
        if !c.durability.is_empty() && !seen.iter().any(|(t, _)| *t == c.target) {
            seen.push((c.target.clone(), c.durability.clone()));
        }
    }
    lines.extend(seen.into_iter().map(|(target, durability)| format!("durability of {target}: {durability}")));
    lines.extend(phase_condition_lines(report));
    lines.extend(writeback_line(report));
    lines.extend(verification_line(report));
    lines
}

/// Whether the phases started with the dirty pages written back (`settle_writeback`), and what
/// that took: buffered writes left by one phase or case otherwise slow the next.
fn writeback_line(report: &RunReport) -> Option<String> {
    let settles: Vec<&WritebackSettle> = report.cases.iter().flat_map(|c| &c.phases).filter_map(|p| p.writeback_settle.as_ref()).collect();
    settle_summary(&settles, "phase", unsettled_names(report, "workloads"), "workload")
}

/// The names of the plan's `section` entries (workloads, fio sweeps) with `settle_writeback = false`.
fn unsettled_names<'a>(report: &'a RunReport, section: &str) -> Vec<&'a str> {
    let entries = report.plan.get(section).and_then(|w| w.as_array()).map_or(&[][..], Vec::as_slice);
    entries
        .iter()
        .filter(|w| w.get("settle_writeback").and_then(|s| s.as_bool()) == Some(false))
        .filter_map(|w| w.get("name").and_then(|n| n.as_str()))
        .collect()
}

/// One line: how long the write-backs before each `step` took and how much was dirty, and which
/// `owner`s (workloads, sweeps) turned them off.
fn settle_summary(settles: &[&WritebackSettle], step: &str, unsettled: Vec<&str>, owner: &str) -> Option<String> {
    let mut parts = Vec::new();
    if !settles.is_empty() {
        let mut ns: Vec<u64> = settles.iter().map(|s| s.ns).collect();
        ns.sort_unstable();
        let dirtiest = settles.iter().map(|s| s.dirty_bytes_before).max().unwrap_or(0);
        parts.push(format!(
            "dirty pages written back before each {step}, untimed (settle_writeback): {} median, {} at most, with up to {} dirty",
            format_nanos(ns[ns.len() / 2]),
            format_nanos(ns[ns.len() - 1]),
            format_bytes(dirtiest)
        ));
    }
    if !unsettled.is_empty() {
        parts.push(format!(
            "{owner} {} left the writeback as it was (settle_writeback = false): a {step} may pay for the writes of the one before",
            unsettled.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The phases' `before` commands and minimum durations, a line each: a command can drop caches,
/// damage data or read files back, and a minimum decides how often each object was read, so what
/// a phase measured depends on them as much as on the durability setting.
fn phase_condition_lines(report: &RunReport) -> Vec<String> {
    fn array(v: Option<&serde_json::Value>) -> &[serde_json::Value] {
        v.and_then(|v| v.as_array()).map_or(&[], Vec::as_slice)
    }
    let mut lines = Vec::new();
    for workload in array(report.plan.get("workloads")) {
        let name = workload.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        for phase in array(workload.get("phases")) {
            let label = phase.get("label").and_then(|l| l.as_str()).unwrap_or("?");
            let stop = phase.get("stop");
            let set = |field: &str| stop.and_then(|s| s.get(field)).is_some_and(|v| !v.is_null());
            // With a duration and neither count nor bytes, the phase runs its duration: no floor.
            let floored = set("count") || set("bytes") || !set("duration_ns");
            if let Some(min) = stop.and_then(|s| s.get("min_duration_ns")).and_then(|n| n.as_u64()).filter(|_| floored) {
                let first = if set("count") || set("bytes") { "its count or bytes" } else { "one pass over the objects" };
                lines.push(format!(
                    "phase {label} of workload {name}: {first}, then on over the same keys until {} had passed in each thread (min_duration)",
                    crate::units::format_nanos(min)
                ));
            }
            let words: Vec<String> = array(phase.get("before")).iter().filter_map(|w| w.as_str().map(str::to_string)).collect();
            if !words.is_empty() {
                lines.push(format!("before phase {label} of workload {name}, once per case, untimed, ahead of its warm-up: {}", shell_words(&words)));
            }
        }
    }
    lines
}

/// `words` as one line a POSIX shell reads back as the same words: plain words as they are, any
/// other in single quotes (a quote inside as '\''), so the command can be pasted and run.
fn shell_words(words: &[String]) -> String {
    let plain = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    words.iter().map(|w| if plain(w) { w.clone() } else { format!("'{}'", w.replace('\'', "'\\''")) }).collect::<Vec<_>>().join(" ")
}

/// What the read-back checks found over the run, when any get was checked: a reader should not
/// have to infer from the absence of a warning that the data came back right.
fn verification_line(report: &RunReport) -> Option<String> {
    let checked: u64 = report.cases.iter().map(|c| c.verification.checked).sum();
    let differed: u64 = report.cases.iter().map(|c| c.verification.mismatches).sum();
    let unchecked = report.cases.iter().filter(|c| !c.verification.enabled && c.status != CaseStatus::Skipped).count();
    let off = if unchecked > 0 { format!("; {unchecked} case(s) not verified (verify = false)") } else { String::new() };
    match (checked, differed) {
        (0, _) => None,
        (_, 0) => Some(format!("verified: {checked} gets, each whole object compared with what was put (xxh3 digest); none differed{off}")),
        _ => Some(format!("verification FAILED: {differed} of {checked} gets differed from what was put (see the warnings){off}")),
    }
}

/// Where a target's data was, as the user knows it: for a local backend the directory holding
/// the run's own `stowbench-…` directory (the target's `path`, as written), which the run removed;
/// for a server, its data directory itself.
pub(super) fn data_location(path: &str) -> &str {
    let p = std::path::Path::new(path);
    let ours = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("stowbench-"));
    if ours {
        p.parent().and_then(|p| p.to_str()).unwrap_or(path)
    } else {
        path
    }
}

fn dedup<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for i in items {
        if !v.contains(&i) {
            v.push(i);
        }
    }
    v
}

fn render_group(targets: &[String], rows: &Rows, out: &mut String) {
    let present: Vec<&String> = targets.iter().filter(|t| rows.values().any(|r| r.contains_key(*t))).collect();
    let mut lines: Vec<Vec<String>> = vec![std::iter::once("size".to_string()).chain(present.iter().map(|t| t.to_string())).chain(["winner".into()]).collect()];
    for ((size_bytes, label), cells) in rows {
        let mut line = vec![label.clone()];
        let by_ops = Cell::rows_by_ops(*size_bytes, cells);
        for target in &present {
            line.push(cells.get(*target).map_or_else(|| "-".to_string(), |cell| cell_text(cell, by_ops)));
        }
        let ranked = ranked(cells, by_ops);
        let too_short = too_short_to_rank(cells);
        if !too_short.is_empty() {
            line.push(format!("no ranking: {} too short to measure", too_short.join(", ")));
            lines.push(line);
            continue;
        }
        let mut winner = winner_text(&ranked);
        // Test tools left out for being test tools: one with no figure (failed, too short, all
        // misses) was left out for that, which its own cell says.
        let has_figure = |c: &Cell| !(if by_ops { &c.ops_per_s } else { &c.bytes_per_s }).is_empty();
        let left_out: Vec<&str> =
            cells.iter().filter(|(t, c)| c.test_tool && has_figure(c) && !ranked.iter().any(|(_, r)| r == t)).map(|(t, _)| t.as_str()).collect();
        if !left_out.is_empty() && !ranked.is_empty() {
            let tools = format!("{}: test tool, not ranked", left_out.join(", "));
            winner = match winner.strip_suffix(" (only result)") {
                Some(name) => format!("{name} (only storage result; {tools})"),
                None => format!("{winner} ({tools})"),
            };
        }
        line.push(winner);
        lines.push(line);
    }
    write_columns(&lines, out);
}

/// Under a block whose phase missed: the misses' latency, which the cells' p99 leaves out (it is
/// the successes'), one row per size with misses and one column per target, so that no cell of
/// the block itself grows for it.
fn miss_lines(targets: &[String], rows: &Rows, out: &mut String) {
    let missing = |cells: &BTreeMap<String, Cell>| cells.values().any(|c| !c.missed.is_empty());
    let present: Vec<&String> = targets.iter().filter(|t| rows.values().any(|cells| cells.get(*t).is_some_and(|c| !c.missed.is_empty()))).collect();
    if present.is_empty() {
        return;
    }
    let repeats = rows.values().flat_map(BTreeMap::values).flat_map(|c| c.missed.values()).map(|m| m.samples.len() + m.unrecorded).max().unwrap_or(0);
    let of_repeats = if repeats > 1 { ", summed over the repeats, with their own latency (the median of the repeats')" } else { ", with their own latency" };
    let _ = writeln!(out, "  misses (operations that found no object: not errors, and not in the latency above){of_repeats}:");
    let mut lines: Vec<Vec<String>> = vec![std::iter::once("size".to_string()).chain(present.iter().map(|t| t.to_string())).collect()];
    for ((_, label), cells) in rows.iter().filter(|(_, cells)| missing(cells)) {
        let mut line = vec![label.clone()];
        for target in &present {
            let missed = cells.get(*target).map(|c| c.missed.iter().map(|(op, m)| format!("{op} {}", m.text())).collect::<Vec<_>>().join("; "));
            line.push(missed.filter(|t| !t.is_empty()).unwrap_or_else(|| "-".into()));
        }
        lines.push(line);
    }
    write_columns(&lines, out);
}

/// The targets of a row that have results, highest mean first. A test tool (null's "376 GB/s"
/// puts) is no contender beside a real backend: it ranks only among test tools.
fn ranked(cells: &BTreeMap<String, Cell>, by_ops: bool) -> Vec<(Spread, &str)> {
    let any_real = cells.values().any(|c| !c.test_tool);
    let mut ranked: Vec<(Spread, &str)> = cells
        .iter()
        .filter(|(_, c)| !(any_real && c.test_tool))
        .filter_map(|(t, c)| Spread::of(if by_ops { &c.ops_per_s } else { &c.bytes_per_s }).map(|s| (s, t.as_str())))
        .collect();
    ranked.sort_by(|a, b| b.0.mean.total_cmp(&a.0.mean));
    ranked
}

/// The targets a row would rank that had a repeat too short to measure: the row then ranks no
/// one, as their rate is unknown (all their repeats) or the mean of their slower repeats only.
fn too_short_to_rank(cells: &BTreeMap<String, Cell>) -> Vec<&str> {
    let any_real = cells.values().any(|c| !c.test_tool);
    cells.iter().filter(|(_, c)| !(any_real && c.test_tool) && c.too_short > 0).map(|(t, _)| t.as_str()).collect()
}

/// The winner column: a ratio only when the margin is beyond the spread of the repeats.
fn winner_text(ranked: &[(Spread, &str)]) -> String {
    match ranked {
        [(best, name), (second, other), ..] if second.mean > 0.0 => {
            let ratio = three_digits(best.mean / second.mean);
            match verdict(best, second) {
                Verdict::Clear => format!("{name} ×{ratio} over {other}"),
                Verdict::Tie => format!("tie: {name} ≈ {other} (×{ratio}, inside the spread)"),
                Verdict::Unjudged => format!("{name} ×{ratio} over {other} (one run: no spread)"),
            }
        }
        [(_, name), ..] => format!("{name} (only result)"),
        [] => "-".into(),
    }
}

/// The break-even sizes of one table group. A pair of targets whose faster one changes once has
/// a break-even; a pair that changes places several times is within its noise there, and is only
/// counted (report.json keeps every crossing).
pub(crate) fn break_even_lines(crossings: &[&BreakEven], out: &mut String) {
    let mut by_pair: BTreeMap<(String, String, String), Vec<&BreakEven>> = BTreeMap::new();
    for b in crossings {
        let mut pair = [b.faster_below.clone(), b.faster_above.clone()];
        pair.sort();
        let [first, second] = pair;
        by_pair.entry((b.op.clone(), first, second)).or_default().push(b);
    }
    let (single, tangled): (Vec<_>, Vec<_>) = by_pair.into_iter().partition(|(_, list)| list.len() == 1);
    if single.is_empty() && tangled.is_empty() {
        return;
    }
    let _ = writeln!(out, "  break-even sizes (mean time per operation, interpolated in log-size between the two measured sizes):");
    for (_, list) in &single {
        let b = list[0];
        // The measured sizes as the table's rows name them; the interpolated one is approximate.
        let (below, above) = (ByteSize(b.bracket_bytes[0]).label(), ByteSize(b.bracket_bytes[1]).label());
        let size = format_bytes(b.size_bytes as u64);
        let doubt = if b.within_spread { "; inside the spread at both sizes, so it may be noise" } else { "" };
        let _ = writeln!(out, "    {:<9}  {} faster below ~{size}, {} above (between {below} and {above}{doubt})", b.op, b.faster_below, b.faster_above);
    }
    if !tangled.is_empty() {
        let pairs: Vec<String> = tangled
            .iter()
            .map(|((op, a, b), list)| {
                let doubt = if list.iter().all(|c| c.within_spread) { ", each inside the spread" } else { "" };
                format!("{op} {a}/{b} ({}×{doubt})", list.len())
            })
            .collect();
        let _ = writeln!(out, "    no single break-even (the faster one changes more than once): {}", pairs.join(", "));
    }
}

/// For a sequence phase, the published E1 layout: mean time of each operation of the sequence
/// and of the whole iteration, one row per operation, one column per target (median of repeats).
fn sequence_times(report: &RunReport, group: (&str, &str, u32), ops: &[&str], targets: &[String], out: &mut String) {
    let mut rows: Vec<(String, RowValue)> = ops.iter().map(|op| (op.to_string(), mean_of(op))).collect();
    let parts: Vec<String> = ops.iter().map(|s| s.to_string()).collect();
    rows.push(("total".into(), Box::new(move |p: &PhaseResult| Some(parts.iter().map(|op| mean_of(op)(p).unwrap_or(0.0)).sum()))));
    let title = format!("mean time per operation and per iteration ({})", ops.join(", then "));
    step_times(report, group, (&title, "op"), &rows, targets, out);
}

/// For an upload or download phase, the published E5 layout: the mean time of each step per
/// file (the hash, the catalog registration and the content write; the catalog lookup and the
/// content read), of the whole operation, and the phase's wall time.
fn file_server_times(report: &RunReport, group: (&str, &str, u32), targets: &[String], out: &mut String) {
    let (whole, steps): (&str, &[(&str, &str)]) = match group.1 {
        "upload" => ("upload", &[("hash", "hash"), ("register", "register"), ("write", "put")]),
        "download" => ("download", &[("lookup", "lookup"), ("read", "get")]),
        _ => return,
    };
    let mut rows: Vec<(String, RowValue)> = Vec::new();
    for (label, op) in steps {
        let op = op.to_string();
        // Per file, duplicates included: a duplicate upload writes nothing.
        rows.push((label.to_string(), Box::new(move |p: &PhaseResult| per_operation(p, &op, whole))));
    }
    rows.push((whole.to_string(), mean_of(whole)));
    rows.push(("phase time".into(), Box::new(|p: &PhaseResult| Some(p.window_total_ns as f64))));
    let title = format!("mean time per file and step ({whole}s), and the phase's wall time");
    step_times(report, group, (&title, "step"), &rows, targets, out);
}

/// How a row of a step table reads its value (nanoseconds) from one case's phase.
type RowValue = Box<dyn Fn(&PhaseResult) -> Option<f64>>;

fn mean_of(op: &str) -> RowValue {
    let op = op.to_string();
    Box::new(move |p: &PhaseResult| Some(p.ops.get(&op).map(|o| o.latency.mean_ns).unwrap_or(0.0)))
}

/// The time step `op` took per `whole` operation, in nanoseconds.
fn per_operation(p: &PhaseResult, op: &str, whole: &str) -> Option<f64> {
    let wholes = p.ops.get(whole).map(|o| o.count).filter(|n| *n > 0)?;
    Some(p.ops.get(op).map(|o| o.latency.mean_ns * o.count as f64).unwrap_or(0.0) / wholes as f64)
}

/// Each target's values, one per repeat.
type RepeatsByTarget = BTreeMap<String, Vec<f64>>;

/// A table of times: one row per entry of `rows`, one column per target, per size; each cell
/// the median over repeats.
fn step_times(
    report: &RunReport,
    (workload, phase, threads): (&str, &str, u32),
    (title, row_header): (&str, &str),
    rows: &[(String, RowValue)],
    targets: &[String],
    out: &mut String,
) {
    // (size bytes, label) → row → target → value of each repeat, in ns.
    let mut values: BTreeMap<(u64, String), BTreeMap<&str, RepeatsByTarget>> = BTreeMap::new();
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Ok && c.workload == workload && c.threads == threads) {
        let Some(result) = case.phases.iter().find(|p| p.phase == phase) else { continue };
        let by_row = values.entry((case.size_bytes_max, case.size_label.clone())).or_default();
        for (name, value) in rows {
            if let Some(v) = value(result) {
                by_row.entry(name.as_str()).or_default().entry(case.target.clone()).or_default().push(v);
            }
        }
    }
    if values.is_empty() {
        return;
    }
    let present: Vec<&String> = targets.iter().filter(|t| values.values().any(|r| r.values().any(|c| c.contains_key(*t)))).collect();
    // Every cell is a median over the repeats: said, since the "across repeats" block gives means.
    let repeats = values.values().flat_map(|r| r.values()).flat_map(|t| t.values()).map(Vec::len).max().unwrap_or(1);
    let of_repeats = if repeats > 1 { format!(" (each the median of {repeats} repeats)") } else { String::new() };
    let _ = writeln!(out, "  {title}{of_repeats}:");
    let mut lines: Vec<Vec<String>> = vec![["size", row_header].iter().map(|s| s.to_string()).chain(present.iter().map(|t| t.to_string())).collect()];
    for ((_, label), by_row) in &values {
        for (i, (name, _)) in rows.iter().enumerate() {
            let mut line = vec![if i == 0 { label.clone() } else { String::new() }, name.clone()];
            for target in &present {
                let mut repeats = by_row.get(name.as_str()).and_then(|r| r.get(*target)).cloned().unwrap_or_default();
                line.push(median(&mut repeats).map(|ns| format_nanos(ns as u64)).unwrap_or_else(|| "-".into()));
            }
            lines.push(line);
        }
    }
    write_columns(&lines, out);
}

/// Writes rows as left-aligned columns, two spaces apart, indented by two (`columns::aligned`).
pub(super) fn write_columns(lines: &[Vec<String>], out: &mut String) {
    out.push_str(&crate::columns::aligned(lines, "  ", false));
}

/// The cell text and the score used to rank it (bytes/s, or ops/s for rows that move no bytes).
fn cell_text(cell: &Cell, by_ops: bool) -> String {
    let scores = if by_ops { &cell.ops_per_s } else { &cell.bytes_per_s };
    let Some(spread) = Spread::of(scores) else {
        return if cell.too_short > 0 {
            "too short to measure (0 ns)".into()
        } else if cell.nothing_done > 0 {
            format!("no successful operation ({} misses)", cell.misses)
        } else {
            "failed".into()
        };
    };
    let mut text = if by_ops { format!("{} op/s", three_digits(spread.mean)) } else { format_rate_bytes(spread.mean) };
    if let (Some(cv), Some((low, high))) = (spread.cv, spread.ci95) {
        // The interval in the headline's unit, which it does not repeat: "(11.0–19.8)".
        let scale = if by_ops { 1.0 } else { [1e9, 1e6, 1e3].into_iter().find(|s| spread.mean >= *s).unwrap_or(1.0) };
        let _ = write!(text, " ±{}% ({}–{})", three_digits(cv * 100.0), three_digits(low.max(0.0) / scale), three_digits(high / scale));
    }
    if !by_ops {
        let ops = cell.ops_per_s.iter().sum::<f64>() / cell.ops_per_s.len() as f64;
        let _ = write!(text, " {} op/s", three_digits(ops));
    }
    let p99 = median(&mut cell.p99_ns.clone()).unwrap_or(0.0);
    let op = cell.p99_op().map(|op| format!(" {op}")).unwrap_or_default();
    let _ = write!(text, " {}{op} {}", p99_word(cell.p99_from_few_samples()), format_nanos(p99 as u64));
    if let Some(service) = median(&mut cell.service_p99_ns.clone()) {
        let _ = write!(text, " svc {}", format_nanos(service as u64));
    }
    for note in figure_notes(cell.missed_share(), cell.nothing_done, cell.failed, (cell.behind, cell.service_p99_ns.len()))
        .into_iter()
        .chain(too_short_note(cell.too_short))
    {
        let _ = write!(text, " ({note})");
    }
    text
}

/// A figure some of whose repeats were too short to measure is the mean of the others.
pub(super) fn too_short_note(too_short: usize) -> Option<String> {
    (too_short > 0).then(|| format!("too short to measure in {too_short} repeat(s), left out"))
}

/// What qualifies a figure, in the table's and the HTML headlines' words: the share of misses
/// (no errors, but a rate half made of them is not the rate of reading objects), repeats with
/// nothing done or failed, and open-loop repeats behind schedule (of how many).
pub(super) fn figure_notes(missed_share: Option<f64>, without_success: usize, failed: usize, (behind, of): (usize, usize)) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(share) = missed_share {
        notes.push(format!("{}% missed", three_digits(share * 100.0)));
    }
    if without_success > 0 {
        notes.push(format!("no successful operation in {without_success} repeat(s)"));
    }
    if failed > 0 {
        notes.push(format!("{failed} failed"));
    }
    if behind > 0 {
        notes.push(format!("behind schedule in {behind} of {of}"));
    }
    notes
}

/// The per-case table under the groups: header row first, then one row per finished case (put
/// phase time, growth, lock wait, disk allocated and stored, own-work share). The HTML page
/// shows the same rows.
pub fn case_rows(report: &RunReport) -> Vec<Vec<String>> {
    let mut lines: Vec<Vec<String>> =
        vec![["case", "puts", "put time", "growth", "put lock wait", "on disk", "stored", "×", "own work"].map(String::from).to_vec()];
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        let put = c.phases.iter().find(|p| p.ops.contains_key("put"));
        let cell = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        lines.push(vec![
            c.case_id.clone(),
            cell(put.map(|p| p.ops["put"].count.to_string())),
            cell(put.map(|p| format_nanos(p.window_total_ns))),
            cell(put.and_then(|p| p.growth_ratio).map(|g| format!("×{}", three_digits(g)))),
            // The put phase's, as the columns beside it: other phases wait too (a get of a
            // store with one handle), but are not this row's.
            match put.map_or(0, |p| p.lock_wait_ns) {
                0 => "-".into(),
                wait => format_nanos(wait),
            },
            // Unknown (a server's data directory not on this machine) is not "0 B".
            if c.disk.allocated_unknown { "not measured".into() } else { format_bytes(c.disk.allocated_bytes) },
            format_bytes(c.disk.logical_bytes),
            cell(c.disk.amplification.map(three_digits)),
            cell(c.own_work_share.map(|s| format!("{:.1}%", s * 100.0))),
        ]);
    }
    lines
}

fn footer(report: &RunReport, out: &mut String) {
    let failed: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status != CaseStatus::Ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\nfailed cases:");
        for c in failed {
            let _ = writeln!(out, "  {}: {}", c.case_id, c.failure.clone().unwrap_or_default());
        }
    }
    let lines = case_rows(report);
    if lines.len() > 1 {
        let _ = writeln!(out, "\nper case: put phase time (its operations' time, with stowbench's own work taken out: not wall time), growth (mean latency of the last 10% of puts over the first 10%), time sessions waited for a single-writer lock (all threads), disk space allocated vs stored, share of worker time in stowbench's own work (making and checking payloads, bookkeeping between operations; kept out of every number above)");
        write_columns(&lines, out);
    }
    super::repeats::write(report, out);
    let ranks = super::ranks::rank_rows(report);
    if !ranks.is_empty() {
        let hosts = dedup(report.ranks.iter().flatten().map(|r| r.host.as_str())).len();
        let _ = writeln!(
            out,
            "\nranks: {} on {hosts} host(s) (mpirun); the figures above are all ranks merged (histograms added, windows on rank 0's clock)",
            ranks.len() - 1
        );
        write_columns(&ranks, out);
        let breakdown = super::ranks::breakdown_rows(report);
        if !breakdown.is_empty() {
            let _ = writeln!(out, "\nper rank: each rank's own share (throughput over its own window, percentiles from its own histogram)");
            write_columns(&breakdown, out);
        }
        let hosts = super::ranks::host_rows(report);
        if !hosts.is_empty() {
            let _ = writeln!(out, "\nper host: its ranks together (client CPU and memory summed over its ranks, its server once) and its share of each phase");
            write_columns(&hosts, out);
        }
    }
    let unchecked: Vec<&str> = report.cases.iter().filter(|c| !c.verification.enabled && c.status != CaseStatus::Skipped).map(|c| c.case_id.as_str()).collect();
    if !unchecked.is_empty() {
        let _ = writeln!(out, "\ndata not verified (verify = false): {}", unchecked.join(", "));
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings:");
        for line in super::warnings::lines_for_people(&report.warnings) {
            let _ = writeln!(out, "  - {line}");
        }
    }
}
