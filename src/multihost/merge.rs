//! Merging what the ranks of a multi-host run measured. Phases are merged from every rank's
//! workers by `stats::merge` itself (histograms added, counts summed, windows from the
//! timestamps on rank 0's clock); here: each rank's own share of a phase, for the per-rank
//! breakdown, and the case-level figures only each rank knows (its connections, disk, resources,
//! and whether it failed).

use super::ENDED_BY_ANOTHER;
use crate::job::CasePlan;
use crate::report::model::{CaseResult, CaseStatus, DiskResult, HostCase, HostPhase, RankCase, RankInfo, RankOp, RankPhase, Resources};
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
    for (at, phase) in merged.phases.iter_mut().enumerate() {
        phase.device_read_bytes = device_read_bytes(&results, at, &phase.phase);
    }
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
    merged.per_host = merged.per_rank.as_deref().map(hosts);
    merged
}

/// The ranks of each host together, hosts in order of their first rank: the ranks' client CPU
/// and memory summed, the host's server once (every rank on a host samples the same server), and
/// each measured phase's operations with the host's share of the phase.
pub fn hosts(ranks: &[RankCase]) -> Vec<HostCase> {
    let mut hosts: Vec<HostCase> = Vec::new();
    for r in ranks {
        let at = match hosts.iter().position(|h| h.host == r.host) {
            Some(at) => at,
            None => {
                let server =
                    Resources { client_cpu_user_ns: 0, client_cpu_system_ns: 0, client_rss_start_bytes: 0, client_rss_peak_bytes: 0, ..r.resources.clone() };
                hosts.push(HostCase { host: r.host.clone(), resources: server, ..HostCase::default() });
                hosts.len() - 1
            }
        };
        let host = &mut hosts[at];
        host.ranks.push(r.rank);
        host.threads += r.threads;
        let (sum, one) = (&mut host.resources, &r.resources);
        sum.client_cpu_user_ns += one.client_cpu_user_ns;
        sum.client_cpu_system_ns += one.client_cpu_system_ns;
        sum.client_rss_start_bytes += one.client_rss_start_bytes;
        sum.client_rss_peak_bytes += one.client_rss_peak_bytes;
        for phase in &r.phases {
            let at = host.phases.iter().position(|p| p.phase == phase.phase).unwrap_or_else(|| {
                host.phases.push(HostPhase { phase: phase.phase.clone(), ..HostPhase::default() });
                host.phases.len() - 1
            });
            let sum = &mut host.phases[at];
            sum.count += phase.ops.values().map(|o| o.count).sum::<u64>();
            sum.bytes += phase.ops.values().map(|o| o.bytes).sum::<u64>();
            sum.errors += phase.ops.values().map(|o| o.errors).sum::<u64>();
        }
    }
    // Each phase's operations and bytes over every host, beside each host's own.
    let whole: Vec<Vec<(u64, u64)>> = hosts
        .iter()
        .map(|h| {
            let total = |label: &str, figure: fn(&HostPhase) -> u64| hosts.iter().flat_map(|h| &h.phases).filter(|q| q.phase == label).map(figure).sum();
            h.phases.iter().map(|p| (total(&p.phase, |q| q.count), total(&p.phase, |q| q.bytes))).collect()
        })
        .collect();
    let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
    for (host, whole) in hosts.iter_mut().zip(whole) {
        for (p, (count, bytes)) in host.phases.iter_mut().zip(whole) {
            (p.count_share, p.bytes_share) = (share(p.count, count), share(p.bytes, bytes));
        }
    }
    hosts
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

/// The bytes every rank (and each host's servers, counted by one rank of the host) fetched from
/// the device in the case's phase `at`, labelled `label`; None when a rank could not count them
/// or did not run that phase.
fn device_read_bytes(results: &[CaseResult], at: usize, label: &str) -> Option<u64> {
    results.iter().map(|r| r.phases.get(at).filter(|p| p.phase == label).and_then(|p| p.device_read_bytes)).sum()
}

/// Every rank's data together (each rank writes in a namespace of its own).
fn disk<'a>(all: impl Iterator<Item = &'a DiskResult>) -> DiskResult {
    let mut sum = DiskResult::default();
    for d in all {
        sum.logical_bytes += d.logical_bytes;
        sum.allocated_bytes += d.allocated_bytes;
        sum.allocated_unknown |= d.allocated_unknown;
        sum.apparent_bytes += d.apparent_bytes;
        sum.files += d.files;
        if let Some(server) = d.server_reported_bytes {
            *sum.server_reported_bytes.get_or_insert(0) += server;
        }
    }
    sum.amplification = (sum.logical_bytes > 0 && !sum.allocated_unknown).then(|| sum.allocated_bytes as f64 / sum.logical_bytes as f64);
    sum
}
