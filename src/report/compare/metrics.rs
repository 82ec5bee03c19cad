//! What `stowbench compare` compares: the metrics (name, unit, which way is better) and how each
//! is read from a case of a report — an object-store case or a fio case.

use super::matching::Measured;
use crate::fio::parse::DirectionStats;
use crate::fio::FioCaseResult;
use crate::report::model::{CaseResult, CaseStatus};

/// How a metric's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Operations per second.
    OpsPerSecond,
    /// Bytes per second (decimal units).
    BytesPerSecond,
    /// Nanoseconds.
    Nanos,
    /// Bytes (binary units).
    Bytes,
    /// Percent of one CPU.
    Percent,
}

/// One comparable figure.
#[derive(Debug)]
pub struct Metric {
    /// Name, as `--metric` takes it; the unit is last, as in the report.
    pub name: &'static str,
    /// What it is, for tables.
    pub label: &'static str,
    /// Whether a larger value is better (throughput) or worse (latency, CPU, memory, disk).
    pub higher_is_better: bool,
    /// Whether it is a throughput, the figures `--fail-if-slower` judges.
    pub throughput: bool,
    /// Whether a change is a speed ("faster", "slower") rather than an amount ("less", "more").
    pub speed: bool,
    /// How values are written.
    pub unit: Unit,
}

const fn metric(name: &'static str, label: &'static str, unit: Unit, higher_is_better: bool, speed: bool) -> Metric {
    Metric { name, label, higher_is_better, throughput: higher_is_better, speed, unit }
}

/// Every metric, in the order tables list them.
pub static METRICS: &[Metric] = &[
    metric("ops_per_s", "throughput (ops)", Unit::OpsPerSecond, true, true),
    metric("bytes_per_s", "throughput (bytes)", Unit::BytesPerSecond, true, true),
    metric("mean_ns", "mean latency", Unit::Nanos, false, true),
    metric("p50_ns", "p50 latency", Unit::Nanos, false, true),
    metric("p99_ns", "p99 latency", Unit::Nanos, false, true),
    metric("client_cpu_ns", "client CPU", Unit::Nanos, false, false),
    metric("server_cpu_ns", "server CPU", Unit::Nanos, false, false),
    // Above the case's start: every case of a run shares one process, so its absolute peak
    // carries what the cases before it left resident.
    metric("client_rss_peak_bytes", "client peak above case start", Unit::Bytes, false, false),
    metric("server_rss_peak_bytes", "server peak memory", Unit::Bytes, false, false),
    metric("disk_allocated_bytes", "disk allocated", Unit::Bytes, false, false),
    metric("fio_cpu_percent", "fio CPU (usr+sys)", Unit::Percent, false, false),
];

/// The metric named `name`; an unknown name gets a suggestion and the list.
pub fn find(name: &str) -> Result<&'static Metric, String> {
    METRICS.iter().find(|m| m.name == name).ok_or_else(|| {
        let names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        let hint = crate::suggest::did_you_mean(name, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("--metric: no metric \"{name}\".{hint} Metrics: {}", names.join(", "))
    })
}

/// One value of one metric in one case: where in the case it was measured, and the value.
#[derive(Debug)]
pub struct Figure {
    /// The phase (object-store cases), or `None` for figures of the whole case and for fio.
    pub phase: Option<String>,
    /// The operation or fio direction, or `None` for a phase's or case's figures.
    pub op: Option<String>,
    /// Which metric.
    pub metric: &'static Metric,
    /// The value, in the metric's unit; for a phase's throughput, over the whole phase.
    pub value: f64,
    /// A phase's throughput in its steady-state window, when the phase had one.
    pub window: Option<f64>,
    /// A percentile read from too few samples to give one: the largest sample (a p99 of fewer
    /// than 100). Comparing two such maxima would rank outliers, so compare leaves it out.
    pub too_few_samples: bool,
}

fn by_name(name: &str) -> &'static Metric {
    METRICS.iter().find(|m| m.name == name).expect("every name used here is in METRICS")
}

/// Every figure of a case; nothing for a case that did not finish well.
pub fn figures(case: &Measured) -> Vec<Figure> {
    match case {
        Measured::Object(c) if c.status == CaseStatus::Ok => object_figures(c),
        Measured::Object(_) => Vec::new(),
        Measured::Fio(c) => fio_figures(c),
    }
}

fn figure(phase: Option<&str>, op: Option<&str>, name: &str, value: f64) -> Figure {
    Figure { phase: phase.map(str::to_string), op: op.map(str::to_string), metric: by_name(name), value, window: None, too_few_samples: false }
}

/// A p99 from `samples` latency samples: marked when they are too few to give one.
fn p99_figure(phase: Option<&str>, op: Option<&str>, value: f64, samples: u64) -> Figure {
    let too_few_samples = !crate::report::model::supports_percentile(samples, 99.0);
    Figure { too_few_samples, ..figure(phase, op, "p99_ns", value) }
}

fn object_figures(case: &CaseResult) -> Vec<Figure> {
    let mut out = Vec::new();
    for p in &case.phases {
        let phase = Some(p.phase.as_str());
        let window = p.throughput_all_active.as_ref();
        out.push(Figure { window: window.map(|w| w.ops_per_s), ..figure(phase, None, "ops_per_s", p.throughput_total.ops_per_s) });
        out.push(Figure { window: window.map(|w| w.bytes_per_s), ..figure(phase, None, "bytes_per_s", p.throughput_total.bytes_per_s) });
        for (op, result) in p.ops.iter().filter(|(_, r)| r.latency.samples > 0) {
            let latency = &result.latency;
            out.push(figure(phase, Some(op), "mean_ns", latency.mean_ns));
            out.push(figure(phase, Some(op), "p50_ns", latency.p50_ns as f64));
            out.push(p99_figure(phase, Some(op), latency.p99_ns as f64, latency.samples));
        }
    }
    let r = &case.resources;
    out.push(figure(None, None, "client_cpu_ns", (r.client_cpu_user_ns + r.client_cpu_system_ns) as f64));
    if let Some(server_cpu_ns) = r.server_cpu_ns {
        out.push(figure(None, None, "server_cpu_ns", server_cpu_ns as f64));
    }
    out.push(figure(None, None, "client_rss_peak_bytes", r.client_rss_growth_bytes() as f64));
    if let Some(server_rss) = r.server_rss_peak_bytes {
        out.push(figure(None, None, "server_rss_peak_bytes", server_rss as f64));
    }
    if !case.disk.allocated_unknown {
        out.push(figure(None, None, "disk_allocated_bytes", case.disk.allocated_bytes as f64));
    }
    out
}

fn fio_figures(case: &FioCaseResult) -> Vec<Figure> {
    let mut out = Vec::new();
    let directions: [(&str, &Option<DirectionStats>); 2] = [("read", &case.read), ("write", &case.write)];
    for (direction, stats) in directions {
        let Some(s) = stats else { continue };
        let op = Some(direction);
        out.push(figure(None, op, "ops_per_s", s.iops));
        out.push(figure(None, op, "bytes_per_s", s.bw_bytes_per_s as f64));
        if s.total_ios > 0 {
            out.push(figure(None, op, "mean_ns", s.lat_ns_mean));
            out.extend(s.lat_ns_p50.map(|v| figure(None, op, "p50_ns", v as f64)));
            out.extend(s.lat_ns_p99.map(|v| p99_figure(None, op, v as f64, s.total_ios)));
        }
    }
    out.push(figure(None, None, "fio_cpu_percent", case.usr_cpu_percent + case.sys_cpu_percent));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_carry_their_unit_and_throughput_is_what_is_better_higher() {
        for m in METRICS {
            let unit_suffix = match m.unit {
                Unit::OpsPerSecond | Unit::BytesPerSecond => "_per_s",
                Unit::Nanos => "_ns",
                Unit::Bytes => "_bytes",
                Unit::Percent => "_percent",
            };
            assert!(m.name.ends_with(unit_suffix), "{}", m.name);
            assert_eq!(m.throughput, m.name.ends_with("_per_s"), "{}", m.name);
        }
        assert!(find("p99_ms").unwrap_err().contains("Did you mean \"p99_ns\""));
    }
}
