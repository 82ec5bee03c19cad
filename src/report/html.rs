//! The run report as one self-contained HTML page: the headlines (every table row with its spread
//! and verdict), break-even sizes, the charts (`report::charts`, drawn by `report::svg`, each with
//! a "download SVG" link), the detail tables, the conditions and every warning.
//!
//! The page loads nothing (no script, font, style sheet or image from anywhere) and needs no
//! JavaScript. A pure function of the report, like every renderer: it must never read the clock,
//! the machine or the disk. Every string from the report is escaped.

use super::charts::{self, ChartGroup};
use super::compare::render::{escape, page};
use super::model::{supports_percentile, CaseStatus, Headline, HeadlineFigure, LatencySummary, RunReport};
use super::svg;
use crate::units::{format_bytes, format_nanos, format_rate_bytes, three_digits};
use std::fmt::Write;

/// Renders the report as a self-contained HTML page.
pub fn render(report: &RunReport) -> String {
    let groups = charts::all(report);
    let mut body = summary(report);
    body += &contents(&groups);
    body += &headlines_section(report);
    body += &break_even_section(report);
    for (index, group) in groups.iter().enumerate() {
        body += &chart_section(index, group);
    }
    body += &tables_section(report);
    body += &conditions_section(report);
    body += &warnings_section(report);
    page(&format!("stowbench report: {}", report.name), &format!("stowbench run report: {}", report.name), STYLE, &body)
}

const STYLE: &str = "body { font-family: sans-serif; margin: 1.5em; max-width: 80em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; text-align: left; border-bottom: 1px solid #ddd; vertical-align: top; white-space: nowrap; }
table.wrap td, td.wrap { white-space: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure.chart { margin: 1em 0 2em; }
figure.chart svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; max-width: 760px; }
.verdict-clear { font-weight: bold; }
.absent, .note { color: #555; font-style: italic; }
.warning-count { font-weight: bold; }
ul.warnings li { margin: 0.3em 0; }
.scope { color: #555; font-size: 0.9em; }
nav ul { columns: 2; }
";

/// The section id of a heading: lower case, words joined by dashes.
fn anchor(heading: &str) -> String {
    heading.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-")
}

fn summary(report: &RunReport) -> String {
    let finished = report.finished_at.as_deref().map(|f| format!(", finished {f}")).unwrap_or_default();
    let fio = if report.fio_cases.is_empty() { String::new() } else { format!(", {} fio cases", report.fio_cases.len()) };
    let line = format!(
        "Run {} ({}), started {}{finished}; {}{fio}; seed {}; stowbench {}.",
        report.run_id,
        report.status,
        report.started_at,
        super::table::cases_of_planned(report),
        report.seed,
        report.tool_version
    );
    let mut out = format!("<p class=\"summary\">{}</p>\n<p>Command: <code>{}</code></p>\n", escape(&line), escape(&report.command.join(" ")));
    if let Some(caveat) = report.status.caveat() {
        let _ = writeln!(out, "<p class=\"caveat\">{}: {}.</p>", report.status, escape(caveat));
    }
    // The conditions behind every number, before any number (the whole list is further down).
    out += "<ul class=\"conditions-brief\">\n";
    for line in super::table::condition_lines(report) {
        let _ = writeln!(out, "<li>{}</li>", escape(&line));
    }
    out += "<li><a href=\"#conditions\">every condition</a></li>\n</ul>\n";
    // The list is at the end of a long page; its size belongs at the top, where people start.
    if !report.warnings.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"warning-count\"><a href=\"#warnings\">{} warning(s)</a> about these numbers, listed at the end.</p>",
            report.warnings.len()
        );
    }
    out
}

const FIXED_SECTIONS: [&str; 2] = ["Headlines", "Break-even sizes"];
const LATER_SECTIONS: [&str; 3] = ["Tables", "Conditions", "Warnings"];

fn contents(groups: &[ChartGroup]) -> String {
    let headings = FIXED_SECTIONS.iter().copied().chain(groups.iter().map(|g| g.heading)).chain(LATER_SECTIONS);
    let items: String = headings.map(|h| format!("<li><a href=\"#{}\">{}</a></li>", anchor(h), escape(h))).collect();
    format!("<nav>\n<ul>{items}</ul>\n</nav>\n")
}

fn heading(text: &str) -> String {
    format!("<h2 id=\"{}\">{}</h2>\n", anchor(text), escape(text))
}

/// An HTML table from rows of text, the first row the header; cells that hold a number align
/// right. Cells keep to one line; a table wider than the page scrolls on its own.
fn table(rows: &[Vec<String>]) -> String {
    table_of(rows, "")
}

/// `table` with a class on the `<table>` ("wrap": a table of prose, whose cells may break lines
/// and all align left).
fn table_of(rows: &[Vec<String>], class: &str) -> String {
    let Some((header, body)) = rows.split_first() else { return String::new() };
    let mut out = format!("<div class=\"scroll\"><table{}>\n<thead><tr>", if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") });
    for cell in header {
        let _ = write!(out, "<th>{}</th>", escape(cell));
    }
    out += "</tr></thead>\n<tbody>\n";
    for row in body {
        out += "<tr>";
        for cell in row {
            // A percentile left out ("—") stands in a column of figures, aligned with them.
            let numeric = class != "wrap" && cell.starts_with(|c: char| c.is_ascii_digit() || c == '×' || c == '—');
            let _ = write!(out, "<td{}>{}</td>", if numeric { " class=\"num\"" } else { "" }, escape(cell));
        }
        out += "</tr>\n";
    }
    out + "</tbody>\n</table></div>\n"
}

fn headline_value(h: &Headline, value: f64) -> String {
    if h.metric == "ops_per_s" {
        format!("{} op/s", three_digits(value))
    } else {
        format_rate_bytes(value)
    }
}

/// The winner column in words: a ratio stands as a win only when the intervals do not overlap.
fn verdict_text(h: &Headline) -> String {
    let (winner, runner_up, ratio) = (h.winner.as_deref().unwrap_or("-"), h.runner_up.as_deref().unwrap_or("-"), h.ratio.map(three_digits).unwrap_or_default());
    match h.verdict.as_str() {
        "clear" => format!("clear: {winner} ×{ratio} over {runner_up}"),
        "tie" => format!("tie: {winner} ≈ {runner_up} (×{ratio}, inside the spread)"),
        "unjudged" => format!("unjudged: {winner} ×{ratio} over {runner_up} (one run: no spread)"),
        "only_result" => format!("{winner} (only result)"),
        "too_short" => {
            let short: Vec<&str> = h.figures.iter().filter(|f| f.too_short > 0).map(|f| f.target.as_str()).collect();
            format!("no ranking: {} too short to measure", short.join(", "))
        }
        other => other.replace('_', " "),
    }
}

fn figure_cells(h: &Headline, f: &HeadlineFigure) -> Vec<String> {
    let dash = || "-".to_string();
    let repeats = if f.failed > 0 { format!("{} ({} failed)", f.repeats, f.failed) } else { f.repeats.to_string() };
    // Failed repeats are in the repeats column already.
    let notes = super::table::figure_notes(f.missed_share, f.without_success, 0, (f.behind_schedule, f.repeats))
        .into_iter()
        .chain(super::table::too_short_note(f.too_short).filter(|_| f.mean.is_some()))
        .collect::<Vec<_>>()
        .join("; ");
    vec![
        f.target.clone(),
        f.mean.map(|m| headline_value(h, m)).unwrap_or_else(|| no_figure(f)),
        f.cv.map(|cv| format!("±{}%", three_digits(cv * 100.0))).unwrap_or_else(dash),
        f.ci95_low
            .zip(f.ci95_high)
            .map(|(low, high)| format!("{} – {}", if low > 0.0 { headline_value(h, low) } else { "0".into() }, headline_value(h, high)))
            .unwrap_or_else(dash),
        repeats,
        f.p99_ns_median.map(|p| p99_text(f, p)).unwrap_or_else(dash),
        notes,
    ]
}

/// Why a figure has no mean, in the terminal table's words: its phases were too short to measure,
/// its repeats found no object (every operation a miss: a healthy case with nothing to rank), or
/// they failed.
fn no_figure(f: &HeadlineFigure) -> String {
    if f.too_short > 0 {
        "too short to measure (0 ns)".into()
    } else if f.without_success > 0 {
        "no successful operation".into()
    } else {
        "failed".into()
    }
}

/// A headline's p99, or its largest sample where a repeat had too few samples for a percentile;
/// in a mix, named with the operation it is of; in an open loop, with that operation's service
/// time, as the terminal table gives them.
fn p99_text(f: &HeadlineFigure, p99_ns: f64) -> String {
    let op = f.p99_op.as_ref().map(|op| format!("{op} ")).unwrap_or_default();
    let mut text = match f.p99_from_samples {
        Some(n) => format!("max {op}{} ({n} samples)", format_nanos(p99_ns as u64)),
        None => format!("{op}{}", format_nanos(p99_ns as u64)),
    };
    if let Some(service) = f.service_p99_ns_median {
        let _ = write!(text, " svc {}", format_nanos(service as u64));
    }
    text
}

fn headlines_section(report: &RunReport) -> String {
    let mut out = heading("Headlines");
    let rows = charts::headlines(report);
    if rows.is_empty() {
        return out + "<p class=\"absent\">No object-store case in this run.</p>\n";
    }
    out += "<p>Throughput in each case's steady-state window, or over the whole phase in the groups marked so, where some phase was too short for a window (bytes per second; operations per second for empty objects): the mean over the repeats, its coefficient of variation, and the 95 % confidence interval of the mean (Student's t). The winner stands clear only when its interval lies above the runner-up's; overlapping intervals are a tie. p99: the median of the repeats' p99 latencies (open loop: from each operation's intended start, and svc from its actual start: the service time); in a phase that mixes operations, of its slowest operation, named; &ldquo;max&rdquo; where a repeat had fewer than 100 samples, whose 99th percentile is its largest sample.</p>\n";
    out += "<div class=\"scroll\"><table class=\"headlines\">\n<thead><tr><th>workload · phase · threads</th><th>size</th><th>target</th><th>mean</th><th>CV</th><th>95 % CI of the mean</th><th>repeats</th><th>p99</th><th>notes</th><th>verdict</th></tr></thead>\n<tbody>\n";
    for h in &rows {
        let span = h.figures.len().max(1);
        let whole = if h.measure == super::table::Measure::WholePhase.name() { " (whole phase)" } else { "" };
        let group = format!("{} · {} · {} thread{}{whole}", h.workload, h.phase, h.threads, if h.threads == 1 { "" } else { "s" });
        let _ = write!(out, "<tr><td rowspan=\"{span}\">{}</td><td rowspan=\"{span}\">{}</td>", escape(&group), escape(&h.size_label));
        for (i, f) in h.figures.iter().enumerate() {
            if i > 0 {
                out += "<tr>";
            }
            let cells = figure_cells(h, f);
            for (column, cell) in cells.iter().enumerate() {
                // The target and the notes are words; the rest are figures.
                let class = if column == 0 {
                    ""
                } else if column + 1 == cells.len() {
                    " class=\"wrap\""
                } else {
                    " class=\"num\""
                };
                let _ = write!(out, "<td{class}>{}</td>", escape(cell));
            }
            if i == 0 {
                let _ = write!(out, "<td rowspan=\"{span}\" class=\"wrap verdict-{}\">{}</td>", escape(&h.verdict), escape(&verdict_text(h)));
            }
            out += "</tr>\n";
        }
    }
    out + "</tbody>\n</table></div>\n"
}

fn break_even_section(report: &RunReport) -> String {
    let mut out = heading("Break-even sizes");
    let all = if report.break_even.is_empty() { super::breakeven::compute(report) } else { report.break_even.clone() };
    if all.is_empty() {
        return out + "<p class=\"absent\">None: a break-even needs two targets measured at three or more common fixed sizes, with the faster one changing between two of them.</p>\n";
    }
    out += "<p>Where one target overtakes another as objects grow, by mean time per operation, interpolated in log-size between the two measured sizes that bracket it.</p>\n<ul class=\"break-even\">\n";
    let mut groups: Vec<(String, String, u32)> = all.iter().map(|b| (b.workload.clone(), b.phase.clone(), b.threads)).collect();
    groups.dedup();
    for (workload, phase, threads) in groups {
        let crossings: Vec<_> = all.iter().filter(|b| b.workload == workload && b.phase == phase && b.threads == threads).collect();
        let mut text = String::new();
        super::table::break_even_lines(&crossings, &mut text);
        // The table's lines after its heading line, one list item each.
        for line in text.lines().skip(1) {
            let _ = writeln!(
                out,
                "<li>workload {} · {phase} · {threads} thread{}: {}</li>",
                escape(&workload),
                if threads == 1 { "" } else { "s" },
                escape(&line.split_whitespace().collect::<Vec<_>>().join(" "))
            );
        }
    }
    out + "</ul>\n"
}

fn chart_section(index: usize, group: &ChartGroup) -> String {
    let mut out = heading(group.heading);
    if group.figures.is_empty() {
        let _ = writeln!(out, "<p class=\"absent\">{}</p>", escape(&group.absent));
    }
    for note in &group.notes {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(note));
    }
    for (n, figure) in group.figures.iter().enumerate() {
        let svg = svg::render(&figure.chart);
        let file = format!("stowbench-chart-{}-{}.svg", index + 1, n + 1);
        let _ = write!(
            out,
            "<figure class=\"chart\">\n{svg}<figcaption>{} <a download=\"{file}\" href=\"{}\">download SVG</a></figcaption>\n</figure>\n",
            escape(&figure.caption),
            svg::data_uri(&svg)
        );
    }
    out
}

fn tables_section(report: &RunReport) -> String {
    let mut out = heading("Tables");
    let operations = operation_rows(report);
    let _ = writeln!(
        out,
        "<h3>Operations</h3>\n<p>Each case, phase and operation: successful operations, failures, latency from each operation's start (open loop: also from its intended start), and the phase's steady-state throughput.{}</p>",
        too_few_samples_note(&operations)
    );
    out += &table(&operations);
    let misses = miss_rows(report);
    if misses.len() > 1 {
        let _ = writeln!(
            out,
            "<h3>Misses</h3>\n<p>Operations that found no object (not errors): how many, of them how many raced a concurrent delete, and their latency from each one's start, kept apart from the successes' above (their time counts in the phase's window like any operation's).{}</p>",
            too_few_samples_note(&misses)
        );
        out += &table(&misses);
    }
    let cases = super::table::case_rows(report);
    if cases.len() > 1 {
        out += "<h3>Cases</h3>\n<p>Put phase time (its operations' time, with stowbench's own work taken out: not wall time); growth (mean latency of the last 10 % of puts over the first 10 %); time sessions waited for a single-writer lock (all threads); disk space allocated and stored; share of worker time in stowbench's own work (making and checking payloads, bookkeeping between operations; kept out of every number).</p>\n";
        out += &table(&cases);
    }
    let repeats = super::repeats::rows(report);
    if repeats.len() > 1 {
        out += "<h3>Across repeats</h3>\n<p>Each phase's whole time (own work taken out) over the repeats (mean, min–max, coefficient of variation) and the mean time sessions waited for a single-writer (or, for cfb, single-reader) lock.</p>\n";
        out += &table(&repeats);
    }
    let failed: Vec<Vec<String>> = report
        .cases
        .iter()
        .filter(|c| c.status != CaseStatus::Ok)
        .map(|c| vec![c.case_id.clone(), c.status.to_string(), c.failure.clone().unwrap_or_default()])
        .collect();
    if !failed.is_empty() {
        out += "<h3>Failed cases</h3>\n";
        out += &table_of(&[vec!["case".to_string(), "status".into(), "why".into()]].into_iter().chain(failed).collect::<Vec<_>>(), "wrap");
    }
    let ranks = super::ranks::rank_rows(report);
    if !ranks.is_empty() {
        out += "<h3>Ranks</h3>\n<p>A multi-host run (mpirun): every figure above is all ranks merged — histograms added, windows from the ranks' timestamps on rank 0's clock, corrected by each rank's measured offset.</p>\n";
        out += &table(&ranks);
        let breakdown = super::ranks::breakdown_rows(report);
        if !breakdown.is_empty() {
            out += "<h3>Per rank</h3>\n<p>Each rank's own share: its throughput over its own window, percentiles from its own histogram.</p>\n";
            out += &table_of(&breakdown, "wrap");
        }
        let hosts = super::ranks::host_rows(report);
        if !hosts.is_empty() {
            out += "<h3>Per host</h3>\n<p>Each host's ranks together: client CPU and memory summed over its ranks (memory as a sum of peaks), the host's server once, and its share of each phase's operations and bytes.</p>\n";
            out += &table_of(&hosts, "wrap");
        }
    }
    if !report.fio_cases.is_empty() {
        use crate::fio::series;
        let header = series::TABLE_HEADER.map(String::from).to_vec();
        let rows: Vec<Vec<String>> = std::iter::once(header).chain(report.fio_cases.iter().map(series::table_row)).collect();
        let few = if rows.iter().flatten().any(|cell| cell.contains(series::TOO_FEW_IOS)) { format!(" {}.", series::TOO_FEW_IOS_NOTE) } else { String::new() };
        let _ = writeln!(
            out,
            "<h3>fio cases</h3>\n<p>{}; latencies read / write for mixed patterns.{}</p>",
            escape(&report.fio_cases[0].fio_version),
            escape(&few)
        );
        out += &table(&rows);
    }
    if !report.fio_failures.is_empty() {
        out += "<h3>Failed fio cases</h3>\n";
        let rows = report.fio_failures.iter().map(|f| vec![f.case_id.clone(), f.message.clone()]);
        out += &table_of(&std::iter::once(vec!["case".to_string(), "why".into()]).chain(rows).collect::<Vec<_>>(), "wrap");
    }
    out
}

/// A percentile cell whose samples are too few for it.
const TOO_FEW_SAMPLES: &str = "—";

/// The `percentile` (99.9 for p99.9) of `l`, whose value is `ns`, or `TOO_FEW_SAMPLES`.
fn percentile_cell(l: &LatencySummary, percentile: f64, ns: u64) -> String {
    if supports_percentile(l.samples, percentile) {
        format_nanos(ns)
    } else {
        TOO_FEW_SAMPLES.into()
    }
}

/// What `TOO_FEW_SAMPLES` means, for the paragraph over a table that has one; said once per
/// table, and only where a percentile was left out.
fn too_few_samples_note(rows: &[Vec<String>]) -> String {
    if rows.iter().flatten().any(|cell| cell == TOO_FEW_SAMPLES) {
        format!(" {TOO_FEW_SAMPLES}: too few samples for that percentile (p50: 2, p99: 100, p99.9: 1000); from fewer it would be the largest sample again, which the max column gives.")
    } else {
        String::new()
    }
}

fn operation_rows(report: &RunReport) -> Vec<Vec<String>> {
    let header = [
        "case",
        "phase",
        "op",
        "count",
        "errors",
        "misses",
        "mean",
        "p50",
        "p99",
        "p99.9",
        "max",
        "p99 from intended start",
        "phase throughput (window unless marked)",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        for phase in &case.phases {
            let (bytes_per_s, ops_per_s) = super::table::headline_throughput(phase);
            let whole = if phase.throughput_all_active.is_none() { ", whole phase" } else { "" };
            for (op, r) in &phase.ops {
                let l = &r.latency;
                rows.push(vec![
                    case.case_id.clone(),
                    phase.phase.clone(),
                    op.clone(),
                    r.count.to_string(),
                    r.errors.values().sum::<u64>().to_string(),
                    r.misses.to_string(),
                    format_nanos(l.mean_ns as u64),
                    percentile_cell(l, 50.0, l.p50_ns),
                    percentile_cell(l, 99.0, l.p99_ns),
                    percentile_cell(l, 99.9, l.p999_ns),
                    format_nanos(l.max_ns),
                    r.response_latency.as_ref().map(|rl| percentile_cell(rl, 99.0, rl.p99_ns)).unwrap_or_else(|| "-".into()),
                    format!("{} ({} op/s{whole})", format_rate_bytes(bytes_per_s), three_digits(ops_per_s)),
                ]);
            }
        }
    }
    rows
}

/// One row per case, phase and operation that missed: the misses and their latency (a report of
/// an earlier version, which did not record it, says so).
fn miss_rows(report: &RunReport) -> Vec<Vec<String>> {
    let mut rows = vec![["case", "phase", "op", "misses", "raced", "mean", "p50", "p99", "max"].map(String::from).to_vec()];
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        for phase in &case.phases {
            for (op, r) in phase.ops.iter().filter(|(_, r)| r.misses > 0) {
                let mut row = vec![case.case_id.clone(), phase.phase.clone(), op.clone(), r.misses.to_string(), r.raced_misses.to_string()];
                match &r.miss_latency {
                    Some(l) => row.extend([
                        format_nanos(l.mean_ns as u64),
                        percentile_cell(l, 50.0, l.p50_ns),
                        percentile_cell(l, 99.0, l.p99_ns),
                        format_nanos(l.max_ns),
                    ]),
                    None => row.push("not recorded (a report of an earlier version)".into()),
                }
                rows.push(row);
            }
        }
    }
    rows
}

fn conditions_section(report: &RunReport) -> String {
    let env = &report.environment;
    let mut out = heading("Conditions");
    let fs = env.work_dir_filesystem.as_ref().map(|f| {
        let journal = match f.journal {
            Some(true) => ", journal",
            Some(false) => ", no journal",
            None => "",
        };
        format!("{} on {} at {} ({}{journal})", f.fs_type, f.source, f.mount_point, f.mount_options)
    });
    let mut facts: Vec<Vec<String>> = vec![vec!["what".into(), "value".into()]];
    let mut fact = |name: &str, value: String| facts.push(vec![name.into(), value]);
    fact("host", format!("{} — {}, kernel {}", env.hostname, env.os, env.kernel));
    fact("CPU", format!("{} × {}", env.cpu_count, env.cpu_model));
    fact("memory", format_bytes(env.memory_bytes));
    fact("ran as root", if env.is_root { "yes" } else { "no" }.into());
    fact("work directory", env.work_dir.clone());
    fact("its filesystem", fs.unwrap_or_else(|| "unknown".into()));
    for (target, f) in report.data_filesystems_elsewhere() {
        fact(&format!("data of {target}"), format!("under {}: {} on {} at {}", super::table::data_location(&f.path), f.summary(), f.source, f.mount_point));
    }
    fact("idle-memory reclaim", env.page_cache_reclaim.clone().unwrap_or_else(|| "none found".into()));
    fact("SQLite library", env.sqlite_version.clone());
    if let Some(clock) = &env.clock {
        // Rounded first, then + 0.0: a drift of -0.04 ppm reads "+0.0", not "-0.0".
        let shown_ppm = |ppm: f64| (ppm * 10.0).round() / 10.0 + 0.0;
        let drift = clock.drift_ppm.map(|ppm| format!("; {:+.1} ppm off CLOCK_MONOTONIC by the run's end", shown_ppm(ppm))).unwrap_or_default();
        fact("clock", format!("{}: {}{drift}", clock.source, clock.detail));
    }
    fact("job", report.job_source.clone());
    fact("seed", report.seed.to_string());
    if let Some(recipe) = &report.recipe {
        fact("recipe", format!("{} at scale {}", recipe.name, recipe.scale));
        for s in &recipe.skipped_targets {
            fact("skipped target", format!("{}: {}; to run it: {}", s.target, s.reason, s.enable));
        }
    }
    out += &table_of(&facts, "wrap");
    out += "<h3>Targets</h3>\n";
    let mut targets: Vec<Vec<String>> = vec![["target", "backend", "versions", "durability"].map(String::from).to_vec()];
    for case in &report.cases {
        if !targets.iter().any(|row| row[0] == case.target) {
            let versions = case.backend_info.get("versions").and_then(|v| v.as_object()).filter(|o| !o.is_empty()).map_or_else(
                || "-".to_string(),
                |o| o.iter().map(|(name, v)| format!("{name} {}", v.as_str().map_or_else(|| v.to_string(), String::from))).collect::<Vec<_>>().join(", "),
            );
            targets.push(vec![case.target.clone(), case.backend.clone(), versions, case.durability.clone()]);
        }
    }
    out += &table_of(&targets, "wrap");
    out += "<h3>Cache state per phase</h3>\n<p>warm: whatever earlier phases left in the page cache; cold: dropped just before the phase; direct: the backend bypasses it.</p>\n";
    out += &table(&cache_rows(report));
    if !report.fio_cases.is_empty() {
        out += "<h3>fio targets</h3>\n";
        let mut rows: Vec<Vec<String>> = vec![["target", "kind", "filesystem", "mount options", "device", "ioengine", "O_DIRECT"].map(String::from).to_vec()];
        for r in &report.fio_cases {
            let t = &r.target;
            let row = vec![
                r.target_label.clone(),
                t.kind.clone(),
                r.fs_label(),
                t.mount_options_effective.clone().unwrap_or_else(|| "-".into()),
                t.device.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "-".into()),
                r.ioengine.clone(),
                if r.direct { "yes" } else { "no" }.into(),
            ];
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        out += &table(&rows);
    }
    out
}

/// One row per case and phase: its cache state and, for open-loop phases, how the schedule held.
fn cache_rows(report: &RunReport) -> Vec<Vec<String>> {
    let mut rows = vec![["case", "phase", "cache", "schedule (open loop)"].map(String::from).to_vec()];
    for case in &report.cases {
        for phase in &case.phases {
            let cache = if phase.cache_state.is_empty() { case.cache_state.clone() } else { phase.cache_state.clone() };
            let schedule = phase.open_loop.as_ref().map_or_else(
                || "-".to_string(),
                |o| {
                    let kept = if o.kept_up { "kept up" } else { "fell behind" };
                    format!(
                        "{} arrivals at {} op/s, {kept}; end lag {}, max lag {}",
                        o.arrivals,
                        three_digits(o.rate_per_s),
                        format_nanos(o.end_lag_ns),
                        format_nanos(o.max_lag_ns)
                    )
                },
            );
            rows.push(vec![case.case_id.clone(), phase.phase.clone(), cache, schedule]);
        }
    }
    rows
}

/// Every warning of the report, as a list: its kind, what was seen, what to do, and the cases and
/// phase it concerns. The one place warnings become HTML.
fn warnings_section(report: &RunReport) -> String {
    let mut out = heading("Warnings");
    if report.warnings.is_empty() {
        return out + "<p>None.</p>\n";
    }
    out += "<ul class=\"warnings\">\n";
    for warning in &report.warnings {
        let kind = serde_json::to_value(warning.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        // Reports before warnings had kinds: the message alone, no "unclassified" label.
        let label = if kind == "unclassified" { String::new() } else { format!("<strong>{}</strong>: ", escape(&kind.replace('_', " "))) };
        let _ = write!(out, "<li class=\"{}\">{label}{}", escape(&kind), escape(&warning.message));
        if !warning.advice.is_empty() {
            let _ = write!(out, ". <em>{}</em>", escape(&warning.advice));
        }
        let mut scope: Vec<String> = warning.phase.iter().map(|p| format!("phase {p}")).collect();
        if !warning.case_ids.is_empty() {
            scope.push(format!("{} case(s): {}", warning.case_ids.len(), warning.case_ids.join(", ")));
        }
        if !scope.is_empty() {
            let _ = write!(out, " <span class=\"scope\">({})</span>", escape(&scope.join("; ")));
        }
        out += "</li>\n";
    }
    out + "</ul>\n"
}
