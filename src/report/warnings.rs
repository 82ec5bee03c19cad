//! Cautions printed under the numbers, in the spirit of hyperfine's: what makes a figure weak and
//! what to do about it.

use super::model::RunReport;
use super::table::{coefficient_of_variation, headline_throughput};
use std::collections::BTreeMap;

/// Fewer latency samples than this make tail percentiles guesswork.
const FEW_SAMPLES: u64 = 30;
/// Spread across repeats above this (coefficient of variation) deserves a warning.
const HIGH_CV: f64 = 0.10;
/// A share of worker time in stowbench's own payload work above this deserves a warning.
const HIGH_OWN_WORK: f64 = 0.10;
/// Client CPU above this fraction of the cores its threads could use means the client was busy.
const CLIENT_BUSY: f64 = 0.90;

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
    warnings.extend(client_limits(report));
    warnings.extend(behind_schedule(report));
    let warm_reads = report.cases.iter().any(|c| c.cache_state == "warm" && c.phases.iter().any(|p| p.ops.contains_key("get")));
    if warm_reads {
        warnings.push("reads ran with a warm page cache: data just written is likely served from memory. Use cache = \"cold\" (root) to read from disk".into());
    }
    if let Some(reclaim) = &report.environment.page_cache_reclaim {
        warnings.push(format!(
            "this machine evicts idle memory ({reclaim}): page cache idle that long is evicted too, so \"warm\" reads \
             after a pause may come from disk and vary from run to run"
        ));
    }
    if report.environment.work_dir_filesystem.as_ref().is_some_and(|f| f.journal == Some(false)) {
        warnings.push(
            "the data directory's ext4 has no journal: creating files within a minute or more of deleting many (a previous \
             case's cleanup) is slower, because the inode allocator steps over recently deleted inodes"
                .into(),
        );
    }
    let failed = report.cases.iter().filter(|c| c.status != "ok").count();
    if failed > 0 {
        warnings.push(format!("{failed} case(s) failed; their numbers are left out of the comparison"));
    }
    warnings
}

/// Cases where the client, not the storage, may have been the limit: much of the workers' time
/// went to stowbench's own payload work, or (with a server doing the storing) the client
/// process kept every core it could use busy.
fn client_limits(report: &RunReport) -> Vec<String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let mut warnings = Vec::new();
    for c in report.cases.iter().filter(|c| c.status == "ok") {
        if let Some(share) = c.own_work_share.filter(|s| *s > HIGH_OWN_WORK) {
            warnings.push(format!(
                "{}: {:.0}% of the workers' time went to stowbench's own payload work (generating, checking); it is kept out of the numbers, but the client may have been the limit. Try verify = false to compare",
                c.case_id,
                share * 100.0
            ));
        }
        let measured_ns: u64 = c.phases.iter().map(|p| p.window_total_ns).sum();
        let client_ns = (c.resources.client_cpu_user_ns + c.resources.client_cpu_system_ns) as f64;
        let usable = (c.threads as f64).min(cores) * c.wall_ns.max(measured_ns) as f64;
        if c.resources.server_cpu_ns.is_some() && usable > 0.0 && client_ns / usable > CLIENT_BUSY {
            warnings.push(format!(
                "{}: the client used {:.0}% of the CPU its threads could use; the client, not the server, may have been the limit",
                c.case_id,
                client_ns / usable * 100.0
            ));
        }
    }
    warnings
}

/// Open-loop phases whose backend could not keep the rate: their latencies from the intended
/// start grow with the run's length, not with any property of the storage.
fn behind_schedule(report: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    for c in report.cases.iter().filter(|c| c.status == "ok") {
        for p in &c.phases {
            let Some(s) = p.open_loop.as_ref().filter(|s| !s.kept_up) else { continue };
            let achieved = p.throughput_total.ops_per_s;
            out.push(format!(
                "{} {}: could not keep the rate of {}/s: achieved {:.0}/s and ended {} behind the schedule; latencies from the intended start \
                 include that wait. Lower the rate to find what it sustains",
                c.case_id,
                p.phase,
                crate::units::three_digits(s.rate_per_s),
                achieved,
                crate::units::format_nanos(s.end_lag_ns)
            ));
        }
    }
    out
}
