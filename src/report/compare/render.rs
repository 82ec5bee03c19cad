//! Renderers of a `Comparison`: a text table, CSV (one row per metric row) and HTML (a fragment
//! the run report's page can embed, and a self-contained page around it). Pure functions of the
//! comparison; the table and the HTML share every cell's text.

use super::metrics::{self, Unit};
use super::{Change, Comparison, MetricRow, Verdict};
use crate::report::table::write_columns;
use crate::units::{format_bytes, format_nanos, format_rate_bytes, three_digits};
use std::fmt::Write;

const COLUMNS: [&str; 10] = ["case", "phase", "op", "metric", "baseline", "candidate", "ratio", "change", "repeats", "significance"];

/// The comparison as text tables, one per candidate, then what was not compared and the gate.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    for line in runs(c) {
        let _ = writeln!(out, "{line}");
    }
    for index in 0..c.candidates.len() {
        let _ = writeln!(out, "\n{}", heading(c, index));
        for line in notes_before_rows(c, index + 1) {
            let _ = writeln!(out, "  {line}");
        }
        let mut lines: Vec<Vec<String>> = vec![COLUMNS.map(String::from).to_vec()];
        let mut previous_case = "";
        for row in c.rows.iter().filter(|r| r.candidate == index + 1) {
            let mut cells = cells(row);
            if row.case == previous_case {
                cells[0] = String::new(); // the case once per block is easier to read
            }
            previous_case = &row.case;
            lines.push(cells);
        }
        write_columns(&lines, &mut out);
    }
    let unmatched = unmatched_lines(c);
    if !unmatched.is_empty() {
        let _ = writeln!(out, "\nnot compared:");
        for line in unmatched {
            let _ = writeln!(out, "  {line}");
        }
    }
    let gate = gate_lines(c);
    if !gate.is_empty() {
        let _ = writeln!(out);
        for line in gate {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// The metric rows as CSV, one column per field of `MetricRow` (values of repeats space-separated).
/// The header is the same for every comparison: every field's column, in the struct's order.
pub fn csv(c: &Comparison) -> String {
    use super::{Change, MatchedBy, MetricRow, Sample, Verdict};
    let sample = || Sample { values: vec![0.0], mean: 0.0 };
    let template = MetricRow {
        candidate: 1,
        candidate_file: String::new(),
        case: String::new(),
        candidate_case: String::new(),
        matched_by: MatchedBy::Id,
        phase: Some(String::new()),
        op: Some(String::new()),
        metric: String::new(),
        measure: Some(crate::report::table::Measure::SteadyState),
        higher_is_better: true,
        baseline: sample(),
        candidate_sample: sample(),
        ratio: Some(0.0),
        change: Change::Same,
        change_percent: Some(0.0),
        verdict: Verdict::Significant,
        welch: Some(super::welch::Welch { t: Some(0.0), df: 0.0, p: 0.0 }),
    };
    crate::report::csv::render_records_like(&template, &c.rows)
}

/// The comparison as an HTML fragment (a `<section>`), for a page that embeds it.
pub fn html_fragment(c: &Comparison) -> String {
    let mut out = String::from("<section class=\"stowbench-compare\">\n");
    for line in runs(c) {
        let _ = writeln!(out, "<p>{}</p>", escape(&line));
    }
    for index in 0..c.candidates.len() {
        let _ = writeln!(out, "<h2>{}</h2>", escape(&heading(c, index)));
        for line in notes_before_rows(c, index + 1) {
            let _ = writeln!(out, "<p>{}</p>", escape(&line));
        }
        out += "<div class=\"scroll\"><table>\n<thead><tr>";
        for column in COLUMNS {
            let _ = write!(out, "<th>{column}</th>");
        }
        out += "</tr></thead>\n<tbody>\n";
        for row in c.rows.iter().filter(|r| r.candidate == index + 1) {
            let class = format!("{} {}", snake(&row.change), snake(&row.verdict));
            let _ = write!(out, "<tr class=\"{}\">", class.replace('_', "-"));
            for cell in cells(row) {
                let _ = write!(out, "<td>{}</td>", escape(&cell));
            }
            out += "</tr>\n";
        }
        out += "</tbody>\n</table></div>\n";
    }
    let unmatched = unmatched_lines(c);
    if !unmatched.is_empty() {
        out += "<h2>Not compared</h2>\n<ul>\n";
        for line in unmatched {
            let _ = writeln!(out, "<li>{}</li>", escape(&line));
        }
        out += "</ul>\n";
    }
    if let Some(gate) = &c.gate {
        let _ = writeln!(out, "<div class=\"gate {}\">", if gate.passed { "passed" } else { "failed" });
        for line in gate_lines(c) {
            let _ = writeln!(out, "<p>{}</p>", escape(line.trim_start()));
        }
        out += "</div>\n";
    }
    out + "</section>\n"
}

/// A self-contained HTML page (no scripts, fonts or links to load) holding `html_fragment`.
pub fn html_page(c: &Comparison) -> String {
    page(&format!("stowbench compare: {}", c.baseline.file), "stowbench compare", STYLE, &html_fragment(c))
}

/// The page around a body: title, heading, inline style. Its Content-Security-Policy allows
/// nothing but inline styles, so a page that tried to load anything (a font, a script, an image
/// from the network) would fail loudly in a browser instead of silently needing the network.
pub fn page(title: &str, heading: &str, style: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n<title>{}</title>\n<style>\n{style}{FOR_EVERY_PAGE}</style>\n</head>\n<body>\n<h1>{}</h1>\n{body}</body>\n</html>\n",
        escape(title),
        escape(heading)
    )
}

/// Layout rules every page shares. Narrow screens keep charts legible (a chart scrolls instead of
/// shrinking its 11 px labels to 5 px) and paper keeps every column (a table that scrolls on
/// screen would be cut at the page's edge, so on paper its cells wrap).
const FOR_EVERY_PAGE: &str = "div.scroll { overflow-x: auto; }
@media (max-width: 40em) { body { margin: 0.5em; } figure.chart { overflow-x: auto; } figure.chart svg { min-width: 36em; } }
@media print { body { margin: 0; max-width: none; } div.scroll { overflow: visible; } table { font-size: 0.7em; } th, td { white-space: normal; padding: 0.1em 0.3em; } figure.chart { break-inside: avoid; } }
";

const STYLE: &str = "body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; }
th, td { padding: 0.2em 0.6em; text-align: left; border-bottom: 1px solid #ddd; white-space: nowrap; }
tr.slower.significant td, tr.more.significant td { background: #fde2e2; }
tr.faster.significant td, tr.less.significant td { background: #e2f5e2; }
.gate.failed { color: #a00; font-weight: bold; }
";

/// `<`, `>`, `&` and quotes as HTML entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '&' => out += "&amp;",
            '"' => out += "&quot;",
            '\'' => out += "&#39;",
            other => out.push(other),
        }
    }
    out
}

fn snake<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

fn runs(c: &Comparison) -> Vec<String> {
    let describe = |r: &super::RunRef| {
        let status = if r.status.is_empty() { String::new() } else { format!("{}, ", r.status) };
        format!("{}: run {} \"{}\" ({status}started {}, stowbench {})", r.file, r.run_id, r.name, r.started_at, r.tool_version)
    };
    let mut lines = vec![format!("baseline {}", describe(&c.baseline))];
    lines.extend(c.candidates.iter().enumerate().map(|(i, r)| format!("candidate {} {}", i + 1, describe(r))));
    lines
}

fn heading(c: &Comparison, index: usize) -> String {
    let candidate = &c.candidates[index].file;
    // fio's figures are its own; the clause is for object-store phases, which have two measures.
    let phases = c.rows.iter().any(|r| r.candidate == index + 1 && r.measure.is_some());
    let measure = if phases { "; a phase's throughput is its steady-state window unless marked (whole phase)" } else { "" };
    format!(
        "{candidate} against {}: candidate ÷ baseline, means of the repeats; significance by Welch's t-test on the repeats ({:.0} %){measure}",
        c.baseline.file,
        c.confidence * 100.0
    )
}

/// What a reader must know before the candidate's rows: the environment the two runs differ in,
/// settings and phases whose one name covers other work in the two runs, and cases paired by
/// their conditions.
fn notes_before_rows(c: &Comparison, candidate: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for d in c.environment_differences.iter().filter(|d| d.candidate == candidate) {
        lines.push(format!(
            "environment differs: {}: {} in the baseline, {} here; every figure compares the environments as well as the work",
            d.field, d.baseline, d.candidate_value
        ));
    }
    for d in c.setting_differences.iter().filter(|d| d.candidate == candidate) {
        let place = if d.name.is_empty() { d.scope.clone() } else { format!("{} {}", d.scope, d.name) };
        lines.push(format!(
            "set differently: {place}, {}: {} in the baseline, {} here; the figures of its cases measure other work",
            d.field, d.baseline, d.candidate_value
        ));
    }
    for d in c.plan_differences.iter().filter(|d| d.candidate == candidate) {
        lines.push(format!(
            "defined differently: workload {}, phase {}, {}: {} in the baseline, {} here; its figures measure other work",
            d.workload, d.phase, d.field, d.baseline, d.candidate_value
        ));
    }
    for row in c.rows.iter().filter(|r| r.candidate == candidate && r.case != r.candidate_case) {
        let line = format!("paired by what they measured (ids differ): {} = {}", row.case, row.candidate_case);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// The text of each column of a row (`COLUMNS`).
fn cells(row: &MetricRow) -> Vec<String> {
    let metric = metrics::find(&row.metric).ok();
    let value = |v: f64| metric.map_or_else(|| v.to_string(), |m| format_value(m.unit, v));
    vec![
        row.case.clone(),
        row.phase.clone().unwrap_or_else(|| "-".into()),
        row.op.clone().unwrap_or_else(|| "-".into()),
        metric_label(row),
        value(row.baseline.mean),
        value(row.candidate_sample.mean),
        row.ratio.map_or_else(|| "-".into(), |r| format!("×{}", ratio_digits(r))),
        change_text(row),
        format!("{}/{}", row.baseline.values.len(), row.candidate_sample.values.len()),
        significance_text(row),
    ]
}

/// The metric's label; a throughput over the whole phase says so (unmarked is the window).
fn metric_label(row: &MetricRow) -> String {
    let label = metrics::find(&row.metric).map_or(row.metric.as_str(), |m| m.label);
    match row.measure {
        Some(crate::report::table::Measure::WholePhase) => match label.strip_suffix(')') {
            Some(open) => format!("{open}, whole phase)"),
            None => format!("{label} (whole phase)"),
        },
        _ => label.to_string(),
    }
}

/// Ratios near 1 need more than three digits to show a small change; tiny ones keep two
/// significant digits.
fn ratio_digits(ratio: f64) -> String {
    if ratio >= 10.0 {
        three_digits(ratio)
    } else if ratio >= 0.01 {
        format!("{ratio:.3}")
    } else if ratio == 0.0 {
        "0".into()
    } else {
        format!("{ratio:.1e}")
    }
}

fn format_value(unit: Unit, value: f64) -> String {
    match unit {
        Unit::OpsPerSecond => format!("{} op/s", three_digits(value)),
        Unit::BytesPerSecond => format_rate_bytes(value),
        Unit::Nanos => format_nanos(value.round() as u64),
        Unit::Bytes => format_bytes(value.round() as u64),
        Unit::Percent => format!("{value:.1}%"),
    }
}

fn change_text(row: &MetricRow) -> String {
    let word = match row.change {
        Change::Faster => "faster",
        Change::Slower => "slower",
        Change::Less => "less",
        Change::More => "more",
        Change::Same => return "same".into(),
    };
    match row.change_percent {
        Some(percent) => format!("{percent:.1}% {word}"),
        None => format!("{word} (baseline 0)"),
    }
}

fn p_text(p: f64) -> String {
    if p < 0.0001 {
        "p < 0.0001".into()
    } else {
        format!("p = {p:.4}")
    }
}

fn significance_text(row: &MetricRow) -> String {
    match (row.verdict, row.welch) {
        (Verdict::Significant, Some(w)) => format!("significant ({})", p_text(w.p)),
        (Verdict::NotSignificant, Some(w)) => format!("not significant ({})", p_text(w.p)),
        _ => "not enough repeats".into(),
    }
}

fn unmatched_lines(c: &Comparison) -> Vec<String> {
    // With several candidates, each line says which pairing it is from.
    let which = |u: &super::Unmatched| if c.candidates.len() > 1 { format!("candidate {}: ", u.candidate) } else { String::new() };
    // Cases left out for one reason share its line (eight p99s of too few samples were eight
    // lines saying the same).
    let mut groups: Vec<(&super::Unmatched, Vec<&str>)> = Vec::new();
    for u in &c.unmatched {
        match groups.iter_mut().find(|(first, _)| (first.candidate, &first.file, &first.reason) == (u.candidate, &u.file, &u.reason)) {
            Some((_, cases)) => cases.push(&u.case),
            None => groups.push((u, vec![&u.case])),
        }
    }
    groups.iter().map(|(u, cases)| format!("{}{}: {} — {}", which(u), u.file, cases.join("; "), u.reason)).collect()
}

/// The gate's outcome in words; empty without a gate.
fn gate_lines(c: &Comparison) -> Vec<String> {
    let Some(gate) = &c.gate else { return Vec::new() };
    let threshold = format!("{}%", gate.slower_percent);
    let mut lines = Vec::new();
    if gate.passed {
        lines
            .push(format!("gate --fail-if-slower {threshold}: passed — no throughput figure is slower by more than {threshold} with a significant difference"));
    } else if gate.failures.is_empty() {
        lines.push(format!("gate --fail-if-slower {threshold}: FAILED — what was to be judged was not all measured:"));
    } else {
        lines.push(format!("gate --fail-if-slower {threshold}: FAILED — {} throughput figure(s) slower by more than {threshold}:", gate.failures.len()));
        for failure in &gate.failures {
            let row = &c.rows[failure.row];
            let how = if failure.without_repeats { "not enough repeats to test: judged on the single values".to_string() } else { significance_text(row) };
            let metric = metric_label(row);
            let place = [Some(row.case.as_str()), row.phase.as_deref(), row.op.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
            lines.push(format!("  {} {place} {metric}: {:.1}% slower, {how}", row.candidate_file, failure.slower_percent));
        }
    }
    lines.extend(gate.unjudged.iter().map(|why| format!("  {why}")));
    if gate.judged_without_repeats > 0 {
        lines.push(format!(
            "  {} throughput figure(s) had fewer than 2 repeats on a side and were judged on their single values; repeats = 3 or more in the job lets the gate tell noise from change",
            gate.judged_without_repeats
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_character_html_gives_meaning() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }

    #[test]
    fn small_ratios_keep_enough_digits_to_show_the_change() {
        assert_eq!(ratio_digits(0.9984), "0.998");
        assert_eq!(ratio_digits(12.34), "12.3");
        assert_eq!(ratio_digits(0.0384), "0.038");
        assert_eq!(ratio_digits(0.00123), "1.2e-3");
        assert_eq!(ratio_digits(0.0), "0", "not 0.0e0");
    }
}
