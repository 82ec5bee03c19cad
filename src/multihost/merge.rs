//! Merging what the ranks of a multi-host run measured. Phases are merged from every rank's
//! workers by `stats::merge` itself (histograms added, counts summed, windows from the
//! timestamps on rank 0's clock); here: each rank's own share of a phase, for the per-rank
//! breakdown, and the case-level figures only each rank knows (its connections, disk, resources,
//! and whether it failed).

use super::ENDED_BY_ANOTHER;
use crate::job::CasePlan;
use crate::report::model::{CaseResult, CaseStatus, DiskResult, RankCase, RankInfo, RankOp, RankPhase};
use crate::stats::WorkerStats;
use std::collections::BTreeMap;

/// One rank's share of a phase, from its workers (already on rank 0's clock).
pub fn rank_phase(label: &str, workers: Vec<WorkerStats>) -> RankPhase {
    let mut histograms: BTreeMap<&'static str, hdrhistogram::Histogram<u64>> = BTreeMap::new();
    for (op, h) in workers.iter().flat_map(|w| w.histograms()) {
        match histograms.get_mut(op.name()) {
            Some(sum) => sum.add(h).expect("worker histograms share bounds"),
            None => {
                histograms.insert(op.name(), h.clone());
            }
        }
    }
    let merged = crate::stats::merge(label, workers, 0);
    let ops = merged
        .ops
        .iter()
        .map(|(name, o)| {
            let histogram = histograms.get(name.as_str()).map(crate::stats::wire::histogram_base64).unwrap_or_default();
            let op = RankOp { count: o.count, bytes: o.bytes, errors: o.errors.values().sum(), latency: o.latency.clone(), histogram };
            (name.clone(), op)
        })
        .collect();
    RankPhase { phase: merged.phase, window_total_ns: merged.window_total_ns, throughput_total: merged.throughput_total, ops }
}

/// The case's result from every rank's (in rank order). Every rank merged the same phases from
/// the same workers, so rank 0's phases, verification and verdict stand for all; added here:
/// every rank's connections and disk (one namespace's once, when `shared` by every rank), the
/// case's full worker and key counts, and each rank's own failure, named by rank and host.
pub fn case(case: &CasePlan, results: Vec<CaseResult>, infos: &[RankInfo], phases: Vec<(String, Vec<RankPhase>)>, shared: bool) -> CaseResult {
    let mut merged = results[0].clone();
    merged.objects = case.objects;
    merged.threads = case.threads;
    merged.connect_ns = results.iter().flat_map(|r| r.connect_ns.iter().copied()).collect();
    merged.wall_ns = results.iter().map(|r| r.wall_ns).max().unwrap_or(0);
    // Every rank of a shared namespace measured the same store, and knows every key.
    merged.disk = if shared { results[0].disk.clone() } else { disk(results.iter().map(|r| &r.disk)) };
    merged.own_work_share = merged.compute_own_work_share();
    let failures = failures(&results, infos);
    if !failures.is_empty() {
        merged.status = CaseStatus::Failed;
        merged.failure = Some(failures.join("; "));
    }
    let host = |rank: usize| infos.get(rank).map(|i| i.host.clone()).unwrap_or_default();
    merged.per_rank = Some(
        results
            .into_iter()
            .enumerate()
            .map(|(rank, r)| RankCase {
                rank: rank as u32,
                host: host(rank),
                status: r.status.name().to_string(),
                failure: r.failure,
                threads: r.threads,
                objects: r.objects,
                // The measured phases the case reports (not a preload or a phase cut short).
                phases: phases
                    .iter()
                    .filter(|(label, _)| merged.phases.iter().any(|p| &p.phase == label))
                    .filter_map(|(_, ranks)| ranks.get(rank).cloned())
                    .collect(),
                resources: r.resources,
                disk: r.disk,
                wall_ns: r.wall_ns,
            })
            .collect(),
    );
    merged
}

/// The case's failures: one verdict reached by every rank from the merged figures is told once;
/// a rank's own failure is told with its rank and host; a rank that only ended the case because
/// another left it is not a failure of its own.
fn failures(results: &[CaseResult], infos: &[RankInfo]) -> Vec<String> {
    let failed: Vec<(usize, &str)> =
        results.iter().enumerate().filter(|(_, r)| r.status != CaseStatus::Ok).map(|(rank, r)| (rank, r.failure.as_deref().unwrap_or("failed"))).collect();
    if failed.is_empty() {
        return Vec::new();
    }
    if failed.len() == results.len() && failed.iter().all(|(_, f)| *f == failed[0].1) {
        return vec![failed[0].1.to_string()];
    }
    let own: Vec<&(usize, &str)> = failed.iter().filter(|(_, f)| !f.starts_with(ENDED_BY_ANOTHER)).collect();
    let told = if own.is_empty() { failed.iter().collect() } else { own };
    let host = |rank: usize| infos.get(rank).map(|i| i.host.as_str()).unwrap_or("?");
    told.iter().map(|(rank, f)| format!("rank {rank} ({}): {f}", host(*rank))).collect()
}

/// Every rank's data together (each rank writes in a namespace of its own).
fn disk<'a>(all: impl Iterator<Item = &'a DiskResult>) -> DiskResult {
    let mut sum = DiskResult::default();
    for d in all {
        sum.logical_bytes += d.logical_bytes;
        sum.allocated_bytes += d.allocated_bytes;
        sum.apparent_bytes += d.apparent_bytes;
        sum.files += d.files;
        if let Some(server) = d.server_reported_bytes {
            *sum.server_reported_bytes.get_or_insert(0) += server;
        }
    }
    sum.amplification = (sum.logical_bytes > 0).then(|| sum.allocated_bytes as f64 / sum.logical_bytes as f64);
    sum
}
