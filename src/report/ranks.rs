//! The per-rank breakdown of a multi-host run (docs/multi-host.md), as rows the table and the
//! HTML page both print: the ranks with their hosts and clocks, then each case's phases as each
//! rank ran them, and each host's ranks together. Nothing for a single-host run.

use super::model::RunReport;
use crate::units::{format_bytes, format_nanos, format_rate_bytes, three_digits};

/// The ranks: rank, host, pid, clock offset to rank 0 and the round trip it was measured with.
pub fn rank_rows(report: &RunReport) -> Vec<Vec<String>> {
    let Some(ranks) = &report.ranks else { return Vec::new() };
    let header = ["rank", "host", "pid", "clock − rank 0's", "measured with round trip"].map(String::from).to_vec();
    let offset = |ns: i64| if ns < 0 { format!("−{}", format_nanos(ns.unsigned_abs())) } else { format_nanos(ns as u64) };
    std::iter::once(header)
        .chain(ranks.iter().map(|r| {
            // Rank 0's clock is the reference: it has no offset to measure.
            let (offset, rtt) = if r.rank == 0 { ("reference".into(), "-".into()) } else { (offset(r.clock_offset_ns), format_nanos(r.clock_rtt_ns)) };
            vec![r.rank.to_string(), r.host.clone(), r.pid.to_string(), offset, rtt]
        }))
        .collect()
}

/// Each case's phases and operations per rank: the rank's own counts, throughput over its own
/// window and percentiles from its own histogram (the case's figures are all ranks merged).
pub fn breakdown_rows(report: &RunReport) -> Vec<Vec<String>> {
    let header = ["case", "rank", "host", "status", "threads", "phase", "op", "count", "errors", "bytes", "ops/s", "bytes/s", "p50", "p99"];
    let mut rows = vec![header.map(String::from).to_vec()];
    for case in &report.cases {
        for r in case.per_rank.iter().flatten() {
            // The whole message is in the failed cases' list (and the JSON); a glimpse says whose.
            let status = match &r.failure {
                Some(why) if r.status != "ok" && why.chars().count() > 48 => format!("{}: {}…", r.status, why.chars().take(47).collect::<String>()),
                Some(why) if r.status != "ok" => format!("{}: {why}", r.status),
                _ => r.status.clone(),
            };
            if r.phases.is_empty() {
                rows.push(vec![case.case_id.clone(), r.rank.to_string(), r.host.clone(), status.clone(), r.threads.to_string()]);
                rows.last_mut().expect("just pushed").resize(header.len(), String::new());
            }
            for phase in &r.phases {
                for (op, o) in &phase.ops {
                    rows.push(vec![
                        case.case_id.clone(),
                        r.rank.to_string(),
                        r.host.clone(),
                        status.clone(),
                        r.threads.to_string(),
                        phase.phase.clone(),
                        op.clone(),
                        o.count.to_string(),
                        o.errors.to_string(),
                        format_bytes(o.bytes),
                        three_digits(phase.throughput_total.ops_per_s),
                        format_rate_bytes(phase.throughput_total.bytes_per_s),
                        format_nanos(o.latency.p50_ns),
                        format_nanos(o.latency.p99_ns),
                    ]);
                }
            }
        }
    }
    if rows.len() == 1 {
        rows.clear();
    }
    rows
}

/// Each case's hosts: their ranks, their ranks' client CPU and memory summed, the host's server
/// once, and per phase the host's operations and bytes with its share of the phase's.
pub fn host_rows(report: &RunReport) -> Vec<Vec<String>> {
    let header = [
        "case",
        "host",
        "ranks",
        "threads",
        "client CPU",
        "client memory (sum of peaks)",
        "server CPU",
        "server memory",
        "phase",
        "ops",
        "bytes",
        "share of ops",
        "share of bytes",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    let or_dash = |figure: Option<String>| figure.unwrap_or_else(|| "-".into());
    let percent = |share: f64| format!("{:.1}%", share * 100.0);
    for case in &report.cases {
        for h in case.per_host.iter().flatten() {
            let r = &h.resources;
            let ranks: Vec<String> = h.ranks.iter().map(u32::to_string).collect();
            let host = vec![
                case.case_id.clone(),
                h.host.clone(),
                ranks.join(" "),
                h.threads.to_string(),
                format_nanos(r.client_cpu_user_ns + r.client_cpu_system_ns),
                format_bytes(r.client_rss_peak_bytes),
                or_dash(r.server_cpu_ns.map(format_nanos)),
                or_dash(r.server_rss_peak_bytes.map(format_bytes)),
            ];
            if h.phases.is_empty() {
                rows.push([host.clone(), vec![String::new(); 5]].concat());
            }
            for p in &h.phases {
                let shares = [p.phase.clone(), p.count.to_string(), format_bytes(p.bytes), percent(p.count_share), percent(p.bytes_share)];
                rows.push([host.clone(), shares.to_vec()].concat());
            }
        }
    }
    if rows.len() == 1 {
        rows.clear();
    }
    rows
}
