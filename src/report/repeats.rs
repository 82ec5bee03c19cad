//! The repeats summary of the terminal table: for cases that differ only in their repeat, each
//! phase's time (the whole phase, "time for the test") as mean, min–max and coefficient of
//! variation, and the mean lock wait — E4's "time-for-test mean and spread per data-file count".
//!
//! A pure function of the report, like the rest of the table; it adds no number that the cases
//! do not already hold, only their summary across repeats.

use super::model::{CaseStatus, RunReport};
use super::table::{coefficient_of_variation, write_columns};
use crate::units::format_nanos;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Phase times and lock waits of the repeats of one case, in ns, keyed in first-seen order.
type Groups = BTreeMap<(usize, String), (String, Vec<u64>, Vec<u64>)>;

/// Writes the summary when some case ran more than once; nothing otherwise.
pub fn write(report: &RunReport, out: &mut String) {
    let lines = rows(report);
    if lines.len() > 1 {
        let _ = writeln!(out, "\nacross repeats: each phase's whole time, own work taken out (mean, min–max, coefficient of variation) and the time sessions waited for a single-writer (or, for cfb, single-reader) lock (mean, all threads)");
        write_columns(&lines, out);
    }
}

/// The summary's header row, then one row per case and phase that ran more than once.
pub fn rows(report: &RunReport) -> Vec<Vec<String>> {
    let mut groups: Groups = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for c in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        let case = format!("{}/{}/{}/t{}", c.target, c.workload, c.size_label, c.threads);
        let index = order.iter().position(|o| *o == case).unwrap_or_else(|| {
            order.push(case.clone());
            order.len() - 1
        });
        for p in &c.phases {
            let entry = groups.entry((index, p.phase.clone())).or_insert_with(|| (case.clone(), Vec::new(), Vec::new()));
            entry.1.push(p.window_total_ns);
            entry.2.push(p.lock_wait_ns);
        }
    }
    let mut lines = vec![["case", "phase", "repeats", "mean time", "min–max", "spread (CV)", "mean lock wait"].map(String::from).to_vec()];
    for ((_, phase), (case, times, waits)) in groups.iter().filter(|(_, (_, times, _))| times.len() > 1) {
        let mean = |v: &[u64]| v.iter().sum::<u64>() / v.len() as u64;
        let as_f64: Vec<f64> = times.iter().map(|&t| t as f64).collect();
        lines.push(vec![
            case.clone(),
            phase.clone(),
            times.len().to_string(),
            format_nanos(mean(times)),
            format!("{}–{}", format_nanos(*times.iter().min().unwrap_or(&0)), format_nanos(*times.iter().max().unwrap_or(&0))),
            coefficient_of_variation(&as_f64).map(|cv| format!("{:.1}%", cv * 100.0)).unwrap_or_else(|| "-".into()),
            match mean(waits) {
                0 => "-".into(),
                wait => format_nanos(wait),
            },
        ]);
    }
    lines
}
