//! Reading fio's JSON (`--output-format=json` or `json+`) into typed numbers with units in names.
//!
//! Written against fio 3.33 and tolerant by design: unknown fields are ignored, missing ones read
//! as absent or zero, integers and floats are both accepted, and text before the JSON (fio can
//! print warnings there) is skipped. It must never guess a unit: fio's `bw` (KiB/s) is ignored in
//! favour of `bw_bytes`, and every latency is read from a `*_ns` object.

use serde::Serialize;
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The parts of one fio run that stowbench reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FioOutput {
    /// fio's version string, e.g. "fio-3.33".
    pub fio_version: String,
    /// When fio finished, Unix time in milliseconds (absent in very old fio).
    pub timestamp_unix_ms: Option<u64>,
    /// One entry per reported job (one with `group_reporting`).
    pub jobs: Vec<FioJob>,
    /// Device utilisation fio measured (absent for tmpfs, the null engine and some containers).
    pub disk_util: Vec<DiskUtil>,
    /// fio's `jobs` array with the histogram bins removed (kept for the report when small).
    pub raw_jobs_without_bins: Value,
}

/// One job (or group) of a fio run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FioJob {
    /// fio's job name.
    pub jobname: String,
    /// fio's error code for the job (0 = none).
    pub error: i64,
    /// CPU time in user mode, percent of one CPU over the job's runtime.
    pub usr_cpu_percent: f64,
    /// CPU time in kernel mode, percent of one CPU over the job's runtime.
    pub sys_cpu_percent: f64,
    /// Context switches (count).
    pub context_switches: u64,
    /// Read direction.
    pub read: DirectionStats,
    /// Write direction.
    pub write: DirectionStats,
}

/// Measurements of one direction (read or write) of a job.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, Default)]
pub struct DirectionStats {
    /// I/O operations per second over the measured runtime.
    pub iops: f64,
    /// Standard deviation of per-interval IOPS samples (operations per second).
    pub iops_stddev: f64,
    /// Bytes per second over the measured runtime (fio `bw_bytes`).
    pub bw_bytes_per_s: u64,
    /// Bytes transferred (fio `io_bytes`).
    pub io_bytes: u64,
    /// Completed I/O operations (count).
    pub total_ios: u64,
    /// Measured runtime of this direction (nanoseconds; fio reports whole milliseconds).
    pub runtime_ns: u64,
    /// Smallest total latency (nanoseconds).
    pub lat_ns_min: u64,
    /// Largest total latency (nanoseconds).
    pub lat_ns_max: u64,
    /// Mean total latency (nanoseconds).
    pub lat_ns_mean: f64,
    /// Standard deviation of total latency (nanoseconds).
    pub lat_ns_stddev: f64,
    /// Mean submission latency (nanoseconds).
    pub slat_ns_mean: f64,
    /// Mean completion latency (nanoseconds).
    pub clat_ns_mean: f64,
    /// Which latency the percentiles describe: "lat" (total), "clat" (completion only) or "none"
    /// (no I/O in this direction).
    pub percentiles_of: String,
    /// Median latency (nanoseconds), of the kind named by `percentiles_of`.
    pub lat_ns_p50: Option<u64>,
    /// 90th percentile latency (nanoseconds).
    pub lat_ns_p90: Option<u64>,
    /// 99th percentile latency (nanoseconds).
    pub lat_ns_p99: Option<u64>,
    /// 99.9th percentile latency (nanoseconds).
    pub lat_ns_p99_9: Option<u64>,
    /// 99.99th percentile latency (nanoseconds).
    pub lat_ns_p99_99: Option<u64>,
    /// All latency percentiles fio reported (nanoseconds), keyed by percentile ("50", "99", "99.9")
    /// in ascending order of the percentile.
    pub percentiles_ns: BTreeMap<Percentile, u64>,
    /// json+ only: latency histogram bins, ascending (bin value in nanoseconds, count).
    pub histogram_ns: Option<Vec<HistogramBin>>,
}

/// A percentile as fio names it, normalised ("5", "99.9"), ordered by its value. Ordered as
/// text, "10" came before "5" and "99.9" before "99.95" only by accident of the digits: the
/// report.json keys and the CSV columns made from them read out of order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Percentile(String);

impl Percentile {
    /// The percentile fio names `key` ("99.900000" and "99.9" are the same one).
    pub fn new(key: &str) -> Percentile {
        Percentile(percentile_key(key))
    }

    /// Its name, as the report's keys give it ("99.9").
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its value, for ordering; a key that is no number (never written by fio) sorts last.
    fn value(&self) -> f64 {
        self.0.parse().unwrap_or(f64::INFINITY)
    }
}

impl Ord for Percentile {
    fn cmp(&self, other: &Self) -> Ordering {
        // The text breaks ties so that only equal keys compare equal, as `Eq` says.
        self.value().total_cmp(&other.value()).then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Percentile {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One json+ histogram bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct HistogramBin {
    /// Representative latency of the bin (nanoseconds).
    pub lat_ns: u64,
    /// I/O operations that fell in the bin (count).
    pub count: u64,
}

/// Utilisation of one block device during the run, as fio measured it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct DiskUtil {
    /// Device name, e.g. "loop0".
    pub name: String,
    /// Read operations issued to the device (count).
    pub read_ios: u64,
    /// Write operations issued to the device (count).
    pub write_ios: u64,
    /// Busy time, percent of the run.
    pub util_percent: f64,
}

/// Parses fio's JSON output; text before the first line starting with `{` is skipped.
pub fn parse_fio_json(text: &str) -> Result<FioOutput, String> {
    let start = json_start(text).ok_or("no JSON object found in fio's output")?;
    let value: Value = serde_json::from_str(&text[start..]).map_err(|e| format!("invalid JSON: {e}"))?;
    if !value.is_object() {
        return Err("fio's output is not a JSON object".into());
    }
    let jobs_value = value.get("jobs").and_then(Value::as_array).ok_or("fio's output has no `jobs` array")?;
    let jobs = jobs_value.iter().map(parse_job).collect();
    let disk_util = value.get("disk_util").and_then(Value::as_array).map(|list| list.iter().map(parse_disk_util).collect()).unwrap_or_default();
    let mut raw_jobs = Value::Array(jobs_value.clone());
    strip_bins(&mut raw_jobs);
    Ok(FioOutput {
        fio_version: value.get("fio version").and_then(Value::as_str).unwrap_or("unknown").to_string(),
        timestamp_unix_ms: value.get("timestamp_ms").and_then(as_u64),
        jobs,
        disk_util,
        raw_jobs_without_bins: raw_jobs,
    })
}

fn json_start(text: &str) -> Option<usize> {
    if text.starts_with('{') {
        return Some(0);
    }
    text.match_indices("\n{").next().map(|(i, _)| i + 1)
}

fn parse_job(job: &Value) -> FioJob {
    FioJob {
        jobname: job.get("jobname").and_then(Value::as_str).unwrap_or("").to_string(),
        error: job.get("error").and_then(Value::as_i64).unwrap_or(0),
        usr_cpu_percent: number(job, "usr_cpu"),
        sys_cpu_percent: number(job, "sys_cpu"),
        context_switches: job.get("ctx").and_then(as_u64).unwrap_or(0),
        read: job.get("read").map(parse_direction).unwrap_or_default(),
        write: job.get("write").map(parse_direction).unwrap_or_default(),
    }
}

fn parse_direction(dir: &Value) -> DirectionStats {
    let lat = dir.get("lat_ns");
    let clat = dir.get("clat_ns");
    let slat = dir.get("slat_ns");
    // With lat_percentiles=1 fio puts percentiles (and json+ bins) under lat_ns; by default under clat_ns.
    let has_percentiles = |v: Option<&Value>| v.and_then(|l| l.get("percentile")).is_some();
    let (source_name, source) = if has_percentiles(lat) {
        ("lat", lat)
    } else if has_percentiles(clat) {
        ("clat", clat)
    } else {
        ("none", None)
    };
    let percentiles_ns: BTreeMap<Percentile, u64> = source.and_then(|s| s.get("percentile")).map(parse_percentiles).unwrap_or_default();
    let pick = |key: &str| percentiles_ns.get(&Percentile::new(key)).copied();
    DirectionStats {
        lat_ns_p50: pick("50"),
        lat_ns_p90: pick("90"),
        lat_ns_p99: pick("99"),
        lat_ns_p99_9: pick("99.9"),
        lat_ns_p99_99: pick("99.99"),
        iops: number(dir, "iops"),
        iops_stddev: number(dir, "iops_stddev"),
        bw_bytes_per_s: dir.get("bw_bytes").and_then(as_u64).unwrap_or(0),
        io_bytes: dir.get("io_bytes").and_then(as_u64).unwrap_or(0),
        total_ios: dir.get("total_ios").and_then(as_u64).unwrap_or(0),
        runtime_ns: dir.get("runtime").and_then(as_u64).unwrap_or(0).saturating_mul(1_000_000),
        lat_ns_min: lat.and_then(|l| l.get("min")).and_then(as_u64).unwrap_or(0),
        lat_ns_max: lat.and_then(|l| l.get("max")).and_then(as_u64).unwrap_or(0),
        lat_ns_mean: lat.map(|l| number(l, "mean")).unwrap_or(0.0),
        lat_ns_stddev: lat.map(|l| number(l, "stddev")).unwrap_or(0.0),
        slat_ns_mean: slat.map(|l| number(l, "mean")).unwrap_or(0.0),
        clat_ns_mean: clat.map(|l| number(l, "mean")).unwrap_or(0.0),
        percentiles_of: source_name.to_string(),
        percentiles_ns,
        histogram_ns: source.and_then(|s| s.get("bins")).map(parse_bins),
    }
}

/// fio writes percentile keys like "99.900000"; they become "99.9".
fn parse_percentiles(map: &Value) -> BTreeMap<Percentile, u64> {
    let Some(map) = map.as_object() else { return BTreeMap::new() };
    map.iter().filter_map(|(key, value)| Some((Percentile::new(key), as_u64(value)?))).collect()
}

/// Normalises a percentile key: "99.900000" → "99.9", "50.000000" → "50".
pub fn percentile_key(key: &str) -> String {
    if key.contains('.') {
        key.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        key.to_string()
    }
}

fn parse_bins(bins: &Value) -> Vec<HistogramBin> {
    let mut out: Vec<HistogramBin> = bins
        .as_object()
        .map(|map| map.iter().filter_map(|(k, v)| Some(HistogramBin { lat_ns: k.parse().ok()?, count: as_u64(v)? })).collect())
        .unwrap_or_default();
    out.sort_by_key(|b| b.lat_ns);
    out
}

fn parse_disk_util(value: &Value) -> DiskUtil {
    DiskUtil {
        name: value.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
        read_ios: value.get("read_ios").and_then(as_u64).unwrap_or(0),
        write_ios: value.get("write_ios").and_then(as_u64).unwrap_or(0),
        util_percent: number(value, "util"),
    }
}

fn strip_bins(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("bins");
            map.values_mut().for_each(strip_bins);
        }
        Value::Array(list) => list.iter_mut().for_each(strip_bins),
        _ => {}
    }
}

/// A number field as f64 (0 when absent).
fn number(value: &Value, key: &str) -> f64 {
    value.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Integers as u64; fio sometimes writes counts as floats ("N" : 12.000000), and those are accepted
/// when whole and non-negative.
fn as_u64(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_keys_are_normalised() {
        assert_eq!(percentile_key("99.900000"), "99.9");
        assert_eq!(percentile_key("50.000000"), "50");
        assert_eq!(percentile_key("99.990000"), "99.99");
    }

    /// As text, "10" sorted before "5" and "99.9" after "99.5" only by luck of the digits.
    #[test]
    fn percentiles_are_ordered_by_value_not_as_text() {
        let mut keys: Vec<Percentile> = ["99.99", "10", "5", "99.9", "1", "99.95", "99", "50", "99.5"].map(Percentile::new).to_vec();
        keys.sort();
        assert_eq!(keys.iter().map(Percentile::as_str).collect::<Vec<_>>(), ["1", "5", "10", "50", "99", "99.5", "99.9", "99.95", "99.99"]);
        assert_eq!(Percentile::new("99.900000"), Percentile::new("99.9"));
    }

    #[test]
    fn warnings_before_json_are_skipped() {
        let text = "fio: warning {x}\n{\"fio version\":\"fio-9.1\",\"jobs\":[{\"jobname\":\"a\",\"read\":{\"iops\":5,\"new_field\":1}}],\"new\":[]}";
        let out = parse_fio_json(text).unwrap();
        assert_eq!(out.fio_version, "fio-9.1");
        assert_eq!(out.jobs[0].read.iops, 5.0);
        assert!(out.disk_util.is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_fio_json("fio: engine libaio not loadable").is_err());
        assert!(parse_fio_json("{\"fio version\":\"x\"}").unwrap_err().contains("jobs"));
    }
}
