//! Chart-ready series and plain-text tables from fio results, shaped like the published study:
//! IOPS and MB/s against outstanding I/O per thread, one series per (filesystem, rw), one chart per
//! block size, at a chosen thread count. Pure functions returning data or text; no I/O.

use super::result::FioCaseResult;
use crate::report::model::supports_percentile;
use crate::units::{format_nanos, format_rate_bytes, ByteSize};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One chart: all series for one block size at one thread count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// Title, e.g. "bs 8KiB, 4 threads".
    pub title: String,
    /// Block size of every point (bytes).
    pub bs_bytes: u64,
    /// Thread count of every point (fio numjobs).
    pub numjobs: u32,
    /// One line per (target, rw) — and per size and file count when those vary.
    pub series: Vec<Series>,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// Legend text, e.g. "xfs randread".
    pub name: String,
    /// Target label.
    pub target_label: String,
    /// Filesystem type (or target kind).
    pub fs: String,
    /// Access pattern label.
    pub rw: String,
    /// File data per thread (bytes).
    pub size_bytes: u64,
    /// Files per thread.
    pub nrfiles: u32,
    /// Points in ascending iodepth.
    pub points: Vec<Point>,
}

/// One point: the mean over the repeats of one combination, with their spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Outstanding I/O per thread (x axis).
    pub iodepth: u32,
    /// Outstanding I/O over all threads.
    pub outstanding_io_total: u64,
    /// Runs behind the point (count).
    pub repeats: u32,
    /// Mean operations per second (read + write) over the repeats.
    pub iops: f64,
    /// Lowest run's operations per second.
    pub iops_min: f64,
    /// Highest run's operations per second.
    pub iops_max: f64,
    /// Mean bytes per second (read + write) over the repeats.
    pub bw_bytes_per_s: u64,
    /// Worst 99th percentile latency among the repeats and, for a mixed pattern, of both
    /// directions (nanoseconds): a mix's slow writes must not vanish behind its reads.
    pub lat_ns_p99: Option<u64>,
}

type SeriesKey = (String, String, u64, u32);

/// The thread count charts are drawn at when none is asked for: the machine's CPU count (the
/// run's, from its report) if the sweep ran it, else the thread count with the most cases (the
/// larger on a tie).
pub fn chart_threads(results: &[FioCaseResult], cpu_count: u32) -> u32 {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for r in results {
        *counts.entry(r.numjobs).or_default() += 1;
    }
    if counts.contains_key(&cpu_count) {
        return cpu_count;
    }
    counts.iter().max_by_key(|(n, count)| (**count, **n)).map(|(n, _)| *n).unwrap_or(1)
}

/// Charts of IOPS and bandwidth against iodepth at `numjobs` threads, one per block size.
pub fn iops_vs_iodepth(results: &[FioCaseResult], numjobs: u32) -> Vec<Chart> {
    let chosen: Vec<&FioCaseResult> = results.iter().filter(|r| r.numjobs == numjobs).collect();
    let mut by_bs: BTreeMap<u64, BTreeMap<SeriesKey, Vec<&FioCaseResult>>> = BTreeMap::new();
    for r in &chosen {
        let key = (r.target_label.clone(), r.rw.clone(), r.size_bytes, r.nrfiles);
        by_bs.entry(r.bs_bytes).or_default().entry(key).or_default().push(r);
    }
    let sizes_vary = distinct(chosen.iter().map(|r| r.size_bytes)) > 1;
    let files_vary = distinct(chosen.iter().map(|r| r.nrfiles)) > 1;
    by_bs
        .into_iter()
        .map(|(bs, groups)| Chart {
            title: format!("bs {}, {numjobs} thread{}", ByteSize(bs), if numjobs == 1 { "" } else { "s" }),
            bs_bytes: bs,
            numjobs,
            series: groups.into_values().map(|members| make_series(&members, sizes_vary, files_vary)).collect(),
        })
        .collect()
}

fn distinct<T: Ord>(values: impl Iterator<Item = T>) -> usize {
    values.collect::<std::collections::BTreeSet<T>>().len()
}

fn make_series(members: &[&FioCaseResult], sizes_vary: bool, files_vary: bool) -> Series {
    let first = members[0];
    let fs = first.fs_label();
    let mut name = if first.target_label == fs { fs.clone() } else { format!("{} ({fs})", first.target_label) };
    name = format!("{name} {}", first.rw);
    if sizes_vary {
        name = format!("{name} {}", ByteSize(first.size_bytes));
    }
    if files_vary {
        name = format!("{name} {} file{}", first.nrfiles, if first.nrfiles == 1 { "" } else { "s" });
    }
    let mut by_depth: BTreeMap<u32, Vec<&FioCaseResult>> = BTreeMap::new();
    for r in members {
        by_depth.entry(r.iodepth).or_default().push(r);
    }
    let points: Vec<Point> = by_depth.into_iter().map(|(iodepth, runs)| make_point(iodepth, &runs)).collect();
    Series { name, target_label: first.target_label.clone(), fs, rw: first.rw.clone(), size_bytes: first.size_bytes, nrfiles: first.nrfiles, points }
}

fn make_point(iodepth: u32, runs: &[&FioCaseResult]) -> Point {
    let n = runs.len() as f64;
    let iops: Vec<f64> = runs.iter().map(|r| r.iops).collect();
    Point {
        iodepth,
        outstanding_io_total: runs[0].outstanding_io_total,
        repeats: runs.len() as u32,
        iops: iops.iter().sum::<f64>() / n,
        iops_min: iops.iter().copied().fold(f64::INFINITY, f64::min),
        iops_max: iops.iter().copied().fold(0.0, f64::max),
        bw_bytes_per_s: (runs.iter().map(|r| r.bw_bytes_per_s as f64).sum::<f64>() / n).round() as u64,
        lat_ns_p99: runs.iter().flat_map(|r| [r.read.as_ref(), r.write.as_ref()]).flatten().filter_map(|d| d.lat_ns_p99).max(),
    }
}

/// The columns of the fio table.
pub const TABLE_HEADER: [&str; 14] = ["target", "fs", "rw", "bs", "jobs", "qd", "files", "size", "run", "IOPS", "bandwidth", "lat p50", "lat p99", "lat p99.9"];

/// A plain-text table of results, one row per case, columns aligned.
pub fn render_table(results: &[FioCaseResult]) -> String {
    let rows: Vec<Vec<String>> = results.iter().map(table_row).collect();
    align(&TABLE_HEADER, &rows)
}

/// A latency cell of a direction with too few I/Os for its percentile (`TOO_FEW_IOS_NOTE`).
pub const TOO_FEW_IOS: &str = "—";

/// What `TOO_FEW_IOS` means, for a note under the table.
pub const TOO_FEW_IOS_NOTE: &str =
    "—: too few I/Os for that percentile (p50: 2, p99: 100, p99.9: 1000); from fewer it would be the slowest I/O, not a percentile";

/// One result's cells, in `TABLE_HEADER`'s order (latencies "read / write" for mixes; a
/// percentile of a direction with too few I/Os for it is `TOO_FEW_IOS`).
pub fn table_row(r: &FioCaseResult) -> Vec<String> {
    let lat = |pick: fn(&super::parse::DirectionStats) -> Option<u64>, percentile: f64| {
        let parts: Vec<String> = [r.read.as_ref(), r.write.as_ref()]
            .into_iter()
            .flatten()
            .map(|d| match pick(d) {
                Some(_) if !supports_percentile(d.total_ios, percentile) => TOO_FEW_IOS.into(),
                Some(ns) => format_nanos(ns),
                None => "-".into(),
            })
            .collect();
        parts.join(" / ")
    };
    vec![
        r.target_label.clone(),
        r.fs_label(),
        r.rw.clone(),
        ByteSize(r.bs_bytes).label(),
        r.numjobs.to_string(),
        r.iodepth.to_string(),
        r.nrfiles.to_string(),
        ByteSize(r.size_bytes).label(),
        r.repeat_index.to_string(),
        format!("{:.0}", r.iops),
        format_rate_bytes(r.bw_bytes_per_s as f64),
        lat(|d| d.lat_ns_p50, 50.0),
        lat(|d| d.lat_ns_p99, 99.0),
        lat(|d| d.lat_ns_p99_9, 99.9),
    ]
}

/// Charts as text: per chart, rows are iodepths and columns the series, cells "IOPS (MB/s)".
pub fn render_charts(charts: &[Chart]) -> String {
    let mut out = String::new();
    for chart in charts {
        let _ = writeln!(out, "IOPS (bandwidth) against outstanding I/O per thread — {}", chart.title);
        let mut depths: Vec<u32> = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.iodepth)).collect();
        depths.sort_unstable();
        depths.dedup();
        let mut header = vec!["qd".to_string()];
        header.extend(chart.series.iter().map(|s| s.name.clone()));
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = depths
            .iter()
            .map(|depth| {
                let mut row = vec![depth.to_string()];
                row.extend(chart.series.iter().map(|s| match s.points.iter().find(|p| p.iodepth == *depth) {
                    Some(p) if p.repeats > 1 => format!("{:.0} [{:.0}–{:.0}] ({})", p.iops, p.iops_min, p.iops_max, format_rate_bytes(p.bw_bytes_per_s as f64)),
                    Some(p) => format!("{:.0} ({})", p.iops, format_rate_bytes(p.bw_bytes_per_s as f64)),
                    None => "-".into(),
                }));
                row
            })
            .collect();
        out.push_str(&align(&header_refs, &rows));
        out.push('\n');
    }
    out
}

/// Charts as CSV (one row per point) for spreadsheets and plotting tools.
pub fn charts_csv(charts: &[Chart]) -> String {
    let mut out = String::from(
        "bs_bytes,numjobs,series,target,fs,rw,size_bytes,nrfiles,iodepth,outstanding_io_total,repeats,iops,iops_min,iops_max,bw_bytes_per_s,lat_ns_p99\n",
    );
    for chart in charts {
        for s in &chart.series {
            for p in &s.points {
                let p99 = p.lat_ns_p99.map(|v| v.to_string()).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{},{},\"{}\",{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{},{}",
                    chart.bs_bytes,
                    chart.numjobs,
                    s.name,
                    s.target_label,
                    s.fs,
                    s.rw,
                    s.size_bytes,
                    s.nrfiles,
                    p.iodepth,
                    p.outstanding_io_total,
                    p.repeats,
                    p.iops,
                    p.iops_min,
                    p.iops_max,
                    p.bw_bytes_per_s,
                    p99
                );
            }
        }
    }
    out
}

/// Left-aligns text columns and right-aligns columns that hold numbers (`columns::aligned`).
fn align(header: &[&str], rows: &[Vec<String>]) -> String {
    let all: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| h.to_string()).collect()).chain(rows.iter().cloned()).collect();
    crate::columns::aligned(&all, "", true)
}
