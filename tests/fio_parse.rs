//! fio JSON → typed results, on output captured from fio 3.33 (see tests/fixtures/fio/README.md),
//! plus the chart series and table built from those results.

mod fio_support;

use fio_support::fixture;
use serde_json::Value;
use std::path::PathBuf;
use stowbench::fio::parse::{parse_fio_json, Percentile};
use stowbench::fio::result::{FioCaseResult, RunRecord};
use stowbench::fio::series::{chart_threads, charts_csv, iops_vs_iodepth, render_charts, render_table};
use stowbench::fio::{expand, FioCase, FioSweep, FsKind, RwMode, TargetFacts, TargetSpec};
use stowbench::units::{ByteSize, Nanos};

#[test]
fn null_engine_json_reads_percentiles_from_lat_ns() {
    let out = parse_fio_json(&fixture("null-randread-j2-qd4.json")).unwrap();
    assert_eq!(out.fio_version, "fio-3.33");
    assert_eq!(out.jobs.len(), 1, "group_reporting folds the two jobs into one");
    let read = &out.jobs[0].read;
    assert!(read.iops > 100_000.0, "null engine IOPS {}", read.iops);
    assert_eq!(read.percentiles_of, "lat");
    assert_eq!(read.percentiles_ns.len(), 13, "all requested percentiles: {:?}", read.percentiles_ns.keys());
    assert!(read.percentiles_ns.contains_key(&Percentile::new("99.95")) && read.percentiles_ns.contains_key(&Percentile::new("1")));
    let (p50, p99, p999) = (read.lat_ns_p50.unwrap(), read.lat_ns_p99.unwrap(), read.lat_ns_p99_9.unwrap());
    assert!(p50 <= p99 && p99 <= p999 && p999 <= read.lat_ns_max);
    assert!(read.histogram_ns.is_none(), "plain json has no bins");
    assert!(out.disk_util.is_empty(), "the null engine touches no disk");
    assert_eq!(out.jobs[0].write.total_ios, 0);
}

#[test]
fn json_plus_bins_count_every_io() {
    for name in ["file-randrw70-j2-qd4-f2.jsonplus.json", "xfs-randwrite-j1-qd8.jsonplus.json"] {
        let out = parse_fio_json(&fixture(name)).unwrap();
        let job = &out.jobs[0];
        for dir in [&job.read, &job.write] {
            if dir.total_ios == 0 {
                assert_eq!(dir.percentiles_of, "none");
                continue;
            }
            let bins = dir.histogram_ns.as_ref().expect("json+ has bins");
            let counted: u64 = bins.iter().map(|b| b.count).sum();
            assert_eq!(counted, dir.total_ios, "{name}: bins must add up to total_ios");
            assert!(bins.windows(2).all(|w| w[0].lat_ns < w[1].lat_ns), "{name}: bins ascending");
            // Bandwidth in bytes is what fio measured, never the KiB/s `bw` field.
            let raw: Value = serde_json::from_str(&fixture(name)).unwrap();
            let key = if std::ptr::eq(dir, &job.read) { "read" } else { "write" };
            assert_eq!(dir.bw_bytes_per_s, raw["jobs"][0][key]["bw_bytes"].as_u64().unwrap());
            assert_eq!(dir.runtime_ns, raw["jobs"][0][key]["runtime"].as_u64().unwrap() * 1_000_000);
        }
        assert!(!out.disk_util.is_empty(), "{name}: fio measured the device");
        let raw = serde_json::to_string(&out.raw_jobs_without_bins).unwrap();
        assert!(!raw.contains("\"bins\""), "bins are stripped from the kept raw summary");
    }
}

#[test]
fn mixed_run_reports_both_directions_in_the_ratio_asked_for() {
    let out = parse_fio_json(&fixture("file-randrw70-j2-qd4-f2.jsonplus.json")).unwrap();
    let job = &out.jobs[0];
    let share = job.read.total_ios as f64 / (job.read.total_ios + job.write.total_ios) as f64;
    assert!((0.65..0.75).contains(&share), "rwmixread=70 gave {share:.3} reads");
}

#[test]
fn default_fio_percentiles_fall_back_to_clat() {
    let out = parse_fio_json(&fixture("default-clat-null.json")).unwrap();
    let read = &out.jobs[0].read;
    assert_eq!(read.percentiles_of, "clat");
    assert_eq!(read.lat_ns_p99, Some(185));
    assert_eq!(read.percentiles_ns[&Percentile::new("99.99")], 2192);
}

#[test]
fn newer_fio_with_unknown_fields_and_leading_warnings_still_parses() {
    let mut value: Value = serde_json::from_str(&fixture("xfs-randwrite-j1-qd8.jsonplus.json")).unwrap();
    value["fio version"] = "fio-3.99".into();
    value["new_top_level"] = serde_json::json!({"nested": [1, 2, 3]});
    value["jobs"][0]["write"]["new_metric"] = 12.5.into();
    value["jobs"][0]["write"]["lat_ns"]["N"] = 39328.0.into();
    value["jobs"][0].as_object_mut().unwrap().remove("sync");
    let text = format!("fio: some warning about something\n{}", serde_json::to_string_pretty(&value).unwrap());
    let out = parse_fio_json(&text).unwrap();
    assert_eq!(out.fio_version, "fio-3.99");
    assert_eq!(out.jobs[0].write.total_ios, 39328);
    assert!(out.jobs[0].write.lat_ns_p99.is_some());
}

#[test]
fn broken_output_is_an_error_not_a_zero() {
    assert!(parse_fio_json("").is_err());
    assert!(parse_fio_json("fio: pid=1, err=22/file:filesetup.c").is_err());
    let truncated = &fixture("null-randread-j2-qd4.json")[..2000];
    assert!(parse_fio_json(truncated).unwrap_err().contains("invalid JSON"));
}

/// A result built from a fixture as if the case had run on `fs` at `iodepth`.
fn result_from_fixture(name: &str, fs: FsKind, rw: &str, iodepth: u32, numjobs: u32) -> FioCaseResult {
    let sweep = FioSweep {
        name: "t".into(),
        target: vec![TargetSpec::fs(fs, ByteSize(1 << 30))],
        rw: vec![RwMode::parse(rw).unwrap()],
        bs: vec![ByteSize(8192)],
        numjobs: vec![numjobs],
        iodepth: vec![iodepth],
        nrfiles: vec![1],
        size: vec![ByteSize(64 << 20)],
        runtime: Nanos(1_000_000_000),
        ramp_time: Nanos(0),
        direct: true,
        time_based: true,
        ioengine: stowbench::fio::IoEngine::Libaio,
        rwmixread: 50,
        share_files: false,
        repeat: 1,
        extra: Default::default(),
        settle_writeback: true,
    };
    let case: FioCase = expand(&sweep).remove(0);
    let facts = TargetFacts {
        kind: "fs".into(),
        label: fs.name().into(),
        fs_type: Some(fs.name().into()),
        data_path: PathBuf::from("/x"),
        made_by_stowbench: true,
        device: Some("/dev/loop9".into()),
        backing_file: None,
        loop_direct_io: Some(true),
        mkfs_command: Some(format!("mkfs.{fs} -q /dev/loop9")),
        mkfs_options: Some(String::new()),
        mount_options_requested: Some(String::new()),
        mount_options_effective: None,
        size_bytes: Some(1 << 30),
        raw_device: None,
    };
    let record = RunRecord { job_file: "; job".into(), command: "fio".into(), messages: String::new(), wall_ns: 1, writeback_settle: None };
    FioCaseResult::build(&case, &facts, parse_fio_json(&fixture(name)).unwrap(), record).unwrap()
}

#[test]
fn results_keep_only_the_directions_the_pattern_uses() {
    let write_only = result_from_fixture("xfs-randwrite-j1-qd8.jsonplus.json", FsKind::Xfs, "randwrite", 8, 1);
    assert!(write_only.read.is_none() && write_only.write.is_some());
    assert_eq!(write_only.iops, write_only.write.as_ref().unwrap().iops);
    let mixed = result_from_fixture("file-randrw70-j2-qd4-f2.jsonplus.json", FsKind::Ext4, "randrw:70", 4, 2);
    assert_eq!(mixed.rw, "randrw70");
    let both = mixed.read.as_ref().unwrap().bw_bytes_per_s + mixed.write.as_ref().unwrap().bw_bytes_per_s;
    assert_eq!(mixed.bw_bytes_per_s, both);
    assert_eq!(mixed.outstanding_io_total, 8);
    assert!(mixed.fio_jobs_json.is_some(), "small raw summaries are kept");
    let json = serde_json::to_value(&mixed).unwrap();
    assert_eq!(json["fio_version"], "fio-3.33");
    assert_eq!(json["target"]["mkfs_command"], "mkfs.ext4 -q /dev/loop9");
    assert!(json["read"]["lat_ns_p99"].is_u64());
}

#[test]
fn charts_group_by_block_size_with_one_series_per_fs_and_rw() {
    let results = vec![
        result_from_fixture("xfs-randwrite-j1-qd8.jsonplus.json", FsKind::Xfs, "randwrite", 8, 4),
        result_from_fixture("null-randread-j2-qd4.json", FsKind::Xfs, "randread", 4, 4),
        result_from_fixture("null-randread-j2-qd4.json", FsKind::Ext4, "randread", 1, 4),
        result_from_fixture("null-randread-j2-qd4.json", FsKind::Ext4, "randread", 16, 4),
        result_from_fixture("null-randread-j2-qd4.json", FsKind::Ext4, "randread", 16, 2),
    ];
    // Four cases at 4 threads, one at 2: the CPU count wins when swept, else the most cases.
    assert_eq!((chart_threads(&results, 2), chart_threads(&results, 8), chart_threads(&results[..1], 2)), (2, 4, 4));
    let charts = iops_vs_iodepth(&results, 4);
    assert_eq!(charts.len(), 1, "one block size, one chart");
    let names: Vec<&str> = charts[0].series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ext4 randread", "xfs randread", "xfs randwrite"]);
    let ext4 = &charts[0].series[0];
    assert_eq!(ext4.points.iter().map(|p| p.iodepth).collect::<Vec<_>>(), [1, 16], "numjobs=2 is left out");
    assert_eq!(ext4.points[1].outstanding_io_total, 64);
    let table = render_table(&results);
    assert_eq!(table.lines().count(), 1 + results.len());
    assert!(table.lines().next().unwrap().starts_with("target"));
    let text = render_charts(&charts);
    assert!(text.contains("bs 8KiB, 4 threads") && text.contains("xfs randwrite"));
    let csv = charts_csv(&charts);
    assert_eq!(csv.lines().count(), 1 + 4);
    assert!(csv.lines().nth(1).unwrap().starts_with("8192,4,\"ext4 randread\",ext4,ext4,randread,67108864,1,1,4,"));
}

#[test]
fn repeats_become_one_point_with_mean_and_range() {
    let first = result_from_fixture("null-randread-j2-qd4.json", FsKind::Xfs, "randread", 4, 4);
    let mut second = first.clone();
    second.repeat_index = 2;
    second.iops = first.iops / 2.0;
    let charts = iops_vs_iodepth(&[first.clone(), second.clone()], 4);
    let point = &charts[0].series[0].points[0];
    assert_eq!(point.repeats, 2);
    assert!((point.iops - first.iops * 0.75).abs() < 1e-6);
    assert_eq!((point.iops_min, point.iops_max), (second.iops, first.iops));
    assert!(render_charts(&charts).contains('['), "the range is shown when there are repeats");
}

/// A direction of too few I/Os for a percentile showed one anyway (a p99.9 of 400 I/Os is the
/// slowest of them): the table shows "—" there, and the report's table says why under it.
#[test]
fn the_table_shows_no_latency_percentile_of_too_few_ios() {
    use stowbench::fio::series::{table_row, TOO_FEW_IOS, TOO_FEW_IOS_NOTE};
    let mut mixed = result_from_fixture("file-randrw70-j2-qd4-f2.jsonplus.json", FsKind::Ext4, "randrw:70", 4, 2);
    let (read, write) = (mixed.read.as_mut().unwrap(), mixed.write.as_mut().unwrap());
    assert!(read.total_ios >= 1000 && write.total_ios >= 1000, "the fixture has enough I/Os for every column");
    let columns = |r: &FioCaseResult| table_row(r)[11..].to_vec(); // lat p50, lat p99, lat p99.9
    assert!(columns(&mixed).iter().all(|c| !c.contains(TOO_FEW_IOS)), "{:?}", columns(&mixed));
    mixed.write.as_mut().unwrap().total_ios = 400;
    let cells = columns(&mixed);
    let (p50, p99, p999) = (&cells[0], &cells[1], &cells[2]);
    assert!(!p50.contains(TOO_FEW_IOS) && !p99.contains(TOO_FEW_IOS), "{cells:?}");
    let (read_p999, write_p999) = p999.split_once(" / ").unwrap();
    assert!(read_p999.ends_with('s') && write_p999 == TOO_FEW_IOS, "only the write direction's p99.9: {cells:?}");

    let mut report: stowbench::report::model::RunReport =
        serde_json::from_str(&std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/fio-a.json")).unwrap())
            .unwrap();
    let text = stowbench::report::table::render(&report);
    assert!(!text.contains(TOO_FEW_IOS_NOTE), "{text}");
    report.fio_cases[0].read.as_mut().unwrap().total_ios = 50;
    let text = stowbench::report::table::render(&report);
    assert!(text.contains(TOO_FEW_IOS_NOTE), "{text}");
    let html = stowbench::report::reporters::for_report("html").unwrap()(&report);
    assert!(html.contains(TOO_FEW_IOS_NOTE) && html.contains("<td class=\"num\">—</td>"), "the page's fio table too");
}
