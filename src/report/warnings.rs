//! Cautions printed under the numbers, in the spirit of hyperfine's: what makes a figure weak and
//! what to do about it.

use super::model::RunReport;
use super::table::{coefficient_of_variation, headline_throughput};
use std::collections::BTreeMap;

/// Fewer latency samples than this make tail percentiles guesswork.
const FEW_SAMPLES: u64 = 30;
/// Spread across repeats above this (coefficient of variation) deserves a warning.
const HIGH_CV: f64 = 0.10;

/// Warnings for a finished report.
pub fn for_report(report: &RunReport) -> Vec<String> {
    let mut warnings = Vec::new();
    if report.cases.iter().any(|c| c.backend_is_test_tool) {
        warnings.push("the sim backend is a test tool with simulated latency; its numbers are not a result".into());
    }
    let few: Vec<&str> = report
        .cases
        .iter()
        .filter(|c| c.phases.iter().any(|p| p.ops.values().any(|o| o.latency.samples > 0 && o.latency.samples < FEW_SAMPLES)))
        .map(|c| c.case_id.as_str())
        .collect();
    if !few.is_empty() {
        warnings.push(format!(
            "{} case(s) have fewer than {FEW_SAMPLES} samples per operation (e.g. {}); p99 there is close to the max. Raise objects or dataset",
            few.len(),
            few[0]
        ));
    }
    let mut spread: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for c in report.cases.iter().filter(|c| c.status == "ok") {
        for p in &c.phases {
            let base = c.case_id.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap_or_default();
            spread.entry((base, p.phase.clone())).or_default().push(headline_throughput(p).1);
        }
    }
    for ((case, phase), values) in spread {
        if let Some(cv) = coefficient_of_variation(&values).filter(|cv| *cv > HIGH_CV) {
            warnings.push(format!("{case} {phase}: throughput varies by {:.0}% across repeats; close other programs or add repeats", cv * 100.0));
        }
    }
    let warm_reads = report.cases.iter().any(|c| c.cache_state == "warm" && c.phases.iter().any(|p| p.ops.contains_key("get")));
    if warm_reads {
        warnings.push("reads ran with a warm page cache: data just written is likely served from memory. Use cache = \"cold\" (root) to read from disk".into());
    }
    let failed = report.cases.iter().filter(|c| c.status != "ok").count();
    if failed > 0 {
        warnings.push(format!("{failed} case(s) failed; their numbers are left out of the comparison"));
    }
    warnings
}
