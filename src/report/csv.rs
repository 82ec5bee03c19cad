//! CSV: one row per case, phase and operation, with the conditions repeated on every row so a
//! spreadsheet filter never separates a number from what it means.

use super::model::RunReport;

const COLUMNS: &[&str] = &[
    "run_id", "case_id", "status", "target", "backend", "workload", "size_label", "size_bytes_max", "objects", "threads", "repeat",
    "phase", "op", "count", "bytes", "errors", "retries", "window_ns", "ops_per_s", "bytes_per_s", "latency_mean_ns", "latency_p50_ns",
    "latency_p90_ns", "latency_p99_ns", "latency_p999_ns", "latency_max_ns", "growth_ratio", "client_cpu_ns", "client_rss_peak_bytes",
    "disk_allocated_bytes", "disk_logical_bytes", "durability", "cache_state",
];

/// Quotes a field when it contains a comma, quote or newline (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Renders the report as CSV with a header row.
pub fn render(report: &RunReport) -> String {
    let mut out = COLUMNS.join(",") + "\n";
    for c in &report.cases {
        for p in &c.phases {
            let t = p.throughput_all_active.as_ref().unwrap_or(&p.throughput_total);
            for (op, r) in &p.ops {
                let l = &r.latency;
                let row: Vec<String> = vec![
                    report.run_id.clone(), c.case_id.clone(), c.status.clone(), c.target.clone(), c.backend.clone(), c.workload.clone(),
                    c.size_label.clone(), c.size_bytes_max.to_string(), c.objects.to_string(), c.threads.to_string(), c.repeat.to_string(),
                    p.phase.clone(), op.clone(), r.count.to_string(), r.bytes.to_string(), r.errors.values().sum::<u64>().to_string(),
                    r.retries.to_string(), t.window_ns.to_string(), format!("{:.3}", t.ops_per_s), format!("{:.1}", t.bytes_per_s),
                    format!("{:.1}", l.mean_ns), l.p50_ns.to_string(), l.p90_ns.to_string(), l.p99_ns.to_string(), l.p999_ns.to_string(),
                    l.max_ns.to_string(), p.growth_ratio.map(|g| format!("{g:.4}")).unwrap_or_default(),
                    (c.resources.client_cpu_user_ns + c.resources.client_cpu_system_ns).to_string(), c.resources.client_rss_peak_bytes.to_string(),
                    c.disk.allocated_bytes.to_string(), c.disk.logical_bytes.to_string(), c.durability.clone(), c.cache_state.clone(),
                ];
                out += &row.iter().map(|f| field(f)).collect::<Vec<_>>().join(",");
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(super::field("plain"), "plain");
        assert_eq!(super::field("a, \"b\""), "\"a, \"\"b\"\"\"");
    }
}
