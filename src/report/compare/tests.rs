//! Comparisons of small hand-made reports: pairing, ratios, verdicts and the gate's decisions.

use super::*;
use crate::report::model::{CaseResult, CaseStatus, LatencySummary, OpResult, PhaseResult, Throughput};
use std::collections::BTreeMap;

/// An ok case `target/w/4KiB/t1/rN` with one put phase at `ops_per_s` (4 KiB objects), a put
/// latency of 1 s / ops_per_s, and no disk figures.
fn case(target: &str, repeat: u32, ops_per_s: f64) -> CaseResult {
    let latency_ns = 1e9 / ops_per_s;
    let latency = LatencySummary { samples: 100, mean_ns: latency_ns, p50_ns: latency_ns as u64, p99_ns: latency_ns as u64, ..Default::default() };
    let op = OpResult {
        count: 100,
        bytes: 409_600,
        errors: BTreeMap::new(),
        misses: 0,
        raced_misses: 0,
        retries: 0,
        latency,
        miss_latency: None,
        response_latency: None,
        first_errors: Vec::new(),
    };
    let phase = PhaseResult {
        phase: "put".into(),
        ops: BTreeMap::from([("put".to_string(), op)]),
        window_total_ns: 1_000_000_000,
        window_all_active_ns: 0,
        throughput_total: Throughput { window_ns: 1_000_000_000, ops_per_s, bytes_per_s: ops_per_s * 4096.0 },
        throughput_all_active: None,
        timeline_per_second: Vec::new(),
        timeline_by_op_index: Vec::new(),
        op_index_bucket_ops: 0,
        growth_ratio: None,
        lock_wait_ns: 0,
        payload_generation_ns: 0,
        verification_ns: 0,
        bookkeeping_ns: 0,
        cache_state: "warm".into(),
        server_restarted: false,
        device_read_bytes: None,
        gave_up_workers: 0,
        idle_workers: 0,
        not_at_rest: None,
        writeback_settle: None,
        open_loop: None,
    };
    // A real job's case, so the identity fields are what a run would write.
    let job = format!(
        "version = 1\n[[target]]\nname = \"{target}\"\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 100\nrepeats = {repeat}\nphases = [\"put\"]\n"
    );
    let plan = crate::job::load_text(&job, "test.toml").unwrap();
    let mut result = crate::report::empty_case(plan.cases.last().unwrap(), &plan);
    result.status = CaseStatus::Ok;
    result.phases = vec![phase];
    result
}

fn report(cases: Vec<CaseResult>) -> RunReport {
    let mut value = serde_json::json!({
        "schema_version": 1, "tool": "stowbench", "tool_version": "0.1.0", "run_id": "r", "status": "complete",
        "started_at": "2026-11-23T10:00:00Z", "finished_at": null, "command": [], "name": "t", "job_source": "test",
        "seed": 42, "plan": {}, "environment": {}, "cases": [], "warnings": [],
    });
    value["environment"] = serde_json::to_value(crate::report::model::Environment::default()).unwrap();
    let mut report: RunReport = serde_json::from_value(value).unwrap();
    report.cases = cases;
    report
}

fn repeats(target: &str, ops: &[f64]) -> Vec<CaseResult> {
    ops.iter().enumerate().map(|(i, &o)| case(target, i as u32 + 1, o)).collect()
}

fn run(baseline: &RunReport, candidate: &RunReport, options: &Options) -> Comparison {
    compare(("a.json", baseline), &[("b.json", candidate)], options).unwrap()
}

fn gated(percent: f64) -> Options {
    Options { metrics: Vec::new(), fail_if_slower_percent: Some(percent) }
}

fn row<'c>(c: &'c Comparison, metric: &str) -> &'c MetricRow {
    c.rows.iter().find(|r| r.metric == metric).unwrap_or_else(|| panic!("no {metric} row"))
}

#[test]
fn a_significant_slowdown_fails_the_gate_only_beyond_its_threshold() {
    let (a, b) = (report(repeats("sim", &[100.0, 102.0, 98.0])), report(repeats("sim", &[80.0, 81.0, 79.0])));
    let c = run(&a, &b, &gated(10.0));
    let ops = row(&c, "ops_per_s");
    assert_eq!((ops.case.as_str(), ops.phase.as_deref(), ops.op.as_deref()), ("sim/w/4KiB/t1", Some("put"), None));
    assert_eq!(ops.matched_by, MatchedBy::Id);
    assert!((ops.ratio.unwrap() - 0.8).abs() < 1e-12 && (ops.change_percent.unwrap() - 20.0).abs() < 1e-9);
    assert_eq!((ops.change, ops.verdict), (Change::Slower, Verdict::Significant));
    // Variances 4 and 1 over 3 values each: se² = 4/3 + 1/3 = 5/3, t = −20 / √(5/3),
    // df = (5/3)² / ((4/3)²/2 + (1/3)²/2) = (25/9) / (17/18) = 50/17.
    let w = ops.welch.unwrap();
    assert!((w.t.unwrap() + 20.0 / (5.0f64 / 3.0).sqrt()).abs() < 1e-9 && (w.df - 50.0 / 17.0).abs() < 1e-9, "{w:?}");
    // Latency rose: slower too, and a latency figure is never a throughput figure for the gate.
    assert_eq!(row(&c, "mean_ns").change, Change::Slower);
    let gate = c.gate.as_ref().unwrap();
    assert!(!gate.passed);
    let failed: Vec<&str> = gate.failures.iter().map(|f| c.rows[f.row].metric.as_str()).collect();
    assert_eq!(failed, ["ops_per_s", "bytes_per_s"]);
    assert!(run(&a, &b, &gated(25.0)).gate.unwrap().passed, "20 % slower passes a 25 % gate");
    assert!(run(&b, &a, &gated(10.0)).gate.unwrap().passed, "faster never fails");
}

#[test]
fn a_slowdown_within_the_noise_passes_the_gate() {
    let (a, b) = (report(repeats("sim", &[100.0, 140.0, 60.0])), report(repeats("sim", &[80.0, 120.0, 40.0])));
    let c = run(&a, &b, &gated(10.0));
    let ops = row(&c, "ops_per_s");
    assert_eq!((ops.change, ops.verdict), (Change::Slower, Verdict::NotSignificant));
    assert!(ops.change_percent.unwrap() > 10.0);
    assert!(c.gate.unwrap().passed);
}

#[test]
fn without_repeats_the_gate_judges_the_single_values() {
    let a = report(repeats("sim", &[100.0]));
    let c = run(&a, &report(repeats("sim", &[85.0])), &gated(10.0));
    assert_eq!(row(&c, "ops_per_s").verdict, Verdict::NotEnoughRepeats);
    assert!(row(&c, "ops_per_s").welch.is_none());
    let gate = c.gate.unwrap();
    assert!(!gate.passed && gate.failures.iter().all(|f| f.without_repeats));
    assert_eq!(gate.judged_without_repeats, 2, "ops/s and bytes/s");
    assert!(run(&a, &report(repeats("sim", &[95.0])), &gated(10.0)).gate.unwrap().passed, "5 % slower is within 10 %");
    // Two repeats on one side are not enough either.
    let c = run(&report(repeats("sim", &[100.0, 101.0])), &report(repeats("sim", &[85.0])), &gated(10.0));
    assert_eq!(row(&c, "ops_per_s").verdict, Verdict::NotEnoughRepeats);
}

#[test]
fn cases_pair_by_conditions_when_ids_differ_and_the_rest_are_listed() {
    let mut b_cases = repeats("sim", &[100.0, 100.0]);
    for c in &mut b_cases {
        c.case_id = c.case_id.replace("/w/", "/w-renamed-job/");
    }
    b_cases.extend(repeats("extra", &[1.0]));
    let c = run(&report(repeats("sim", &[100.0, 100.0]).into_iter().chain(repeats("old", &[5.0])).collect()), &report(b_cases), &Options::default());
    let ops = row(&c, "ops_per_s");
    assert_eq!((ops.matched_by, ops.candidate_case.as_str()), (MatchedBy::Conditions, "sim/w-renamed-job/4KiB/t1"));
    assert_eq!((ops.change, ops.verdict), (Change::Same, Verdict::NotSignificant));
    let unmatched: Vec<(&str, &str, &str)> = c.unmatched.iter().map(|u| (u.file.as_str(), u.case.as_str(), u.reason.as_str())).collect();
    assert_eq!(unmatched, [("a.json", "old/w/4KiB/t1", "only in the baseline"), ("b.json", "extra/w/4KiB/t1", "only in the candidate")]);
    assert!(c.rows.iter().all(|r| r.metric != "disk_allocated_bytes"), "zero on both sides: nothing to compare");
}

#[test]
fn bad_options_and_unrelated_runs_are_refused_with_the_fix() {
    let a = report(repeats("sim", &[100.0]));
    let other = report(repeats("elsewhere", &[100.0]));
    let err = compare(("a.json", &a), &[("b.json", &other)], &Options::default()).unwrap_err();
    assert!(err.contains("b.json shares no case with the baseline a.json"), "{err}");
    let only_latency = Options { metrics: vec!["p99_ns".into()], fail_if_slower_percent: Some(5.0) };
    assert!(compare(("a.json", &a), &[("b.json", &a)], &only_latency).unwrap_err().contains("add ops_per_s or bytes_per_s"));
    let negative = Options { metrics: Vec::new(), fail_if_slower_percent: Some(-1.0) };
    assert!(compare(("a.json", &a), &[("b.json", &a)], &negative).unwrap_err().contains("not a percentage"));
    let never = Options { metrics: Vec::new(), fail_if_slower_percent: Some(100.0) };
    assert!(compare(("a.json", &a), &[("b.json", &a)], &never).unwrap_err().contains("100 % would never fail"));
    let selected = Options { metrics: vec!["p99_ns".into()], fail_if_slower_percent: None };
    let c = compare(("a.json", &a), &[("b.json", &a)], &selected).unwrap();
    assert!(!c.rows.is_empty() && c.rows.iter().all(|r| r.metric == "p99_ns"));
}

/// The CSV header is every field's column in the struct's order, whichever fields the rows leave
/// empty (a case figure has no op; one repeat has no Welch test): a script reads by position.
#[test]
fn the_comparison_csv_header_never_moves() {
    let header = |c: &Comparison| super::render::csv(c).lines().next().unwrap().to_string();
    let one = report(repeats("sim", &[100.0]));
    let three = report(repeats("sim", &[100.0, 101.0, 99.0]));
    let single = compare(("a.json", &one), &[("b.json", &one)], &Options::default()).unwrap();
    let welch = compare(("a.json", &three), &[("b.json", &three)], &Options::default()).unwrap();
    let p99 = compare(("a.json", &three), &[("b.json", &three)], &Options { metrics: vec!["p99_ns".into()], fail_if_slower_percent: None }).unwrap();
    assert_eq!(header(&single), header(&welch));
    assert_eq!(header(&single), header(&p99));
    assert!(header(&single).starts_with("candidate,candidate_file,case,candidate_case,matched_by,phase,op,metric,"), "{}", header(&single));
    assert!(header(&single).ends_with("verdict,welch.t,welch.df,welch.p"), "{}", header(&single));
}

/// A gate passes only over what was measured: a candidate whose case failed, which lacks a
/// baseline case, or which did not complete fails it, and each reason is said; the failed case is
/// listed, not silently left out.
#[test]
fn the_gate_fails_on_what_the_candidate_did_not_measure() {
    let base = report([repeats("sim", &[100.0, 101.0]), repeats("other", &[50.0, 51.0])].concat());
    let mut failed = repeats("sim", &[100.0, 101.0]);
    for c in &mut failed {
        c.status = CaseStatus::Failed;
        c.failure = Some("error budget exceeded".into());
    }
    let candidate = report([failed, repeats("other", &[50.0, 51.0])].concat());
    let c = run(&base, &candidate, &gated(10.0));
    let gate = c.gate.as_ref().unwrap();
    assert!(!gate.passed && gate.failures.is_empty(), "{gate:?}");
    assert_eq!(gate.unjudged, ["candidate 1 b.json: sim/w/4KiB/t1 failed"]);
    let listed = c.unmatched.iter().find(|u| u.case == "sim/w/4KiB/t1").expect("the failed case is listed");
    assert!(listed.reason.starts_with("failed in the candidate (2 of 2 repeat(s)): error budget exceeded"), "{}", listed.reason);

    let mut interrupted = report(repeats("sim", &[100.0, 101.0]));
    interrupted.status = crate::report::model::RunStatus::Interrupted;
    let c = run(&base, &interrupted, &gated(10.0));
    let gate = c.gate.as_ref().unwrap();
    assert!(!gate.passed);
    assert_eq!(
        gate.unjudged,
        ["candidate 1 b.json: the run did not complete (status interrupted)", "candidate 1 b.json: other/w/4KiB/t1 is missing (only in the baseline)"]
    );
    assert!(super::render::table(&c).contains("(interrupted, started"), "the status is on the run's line");

    assert!(run(&base, &base, &gated(10.0)).gate.unwrap().passed, "the same complete run passes");

    // Killed before its first case: nothing in common, yet no wrong file. The gate fails.
    let mut killed = report(Vec::new());
    killed.status = crate::report::model::RunStatus::Running;
    let c = run(&base, &killed, &gated(10.0));
    let gate = c.gate.as_ref().unwrap();
    assert!(!gate.passed && gate.unjudged[0] == "candidate 1 b.json: the run did not complete (status running)", "{gate:?}");
    assert_eq!(c.unmatched.len(), 2, "both baseline cases are listed: {:?}", c.unmatched);
    let mut finished_empty = report(Vec::new());
    finished_empty.status = crate::report::model::RunStatus::Complete;
    assert!(compare(("a.json", &base), &[("b.json", &finished_empty)], &gated(10.0)).is_err(), "a complete run with nothing in common is the wrong file");
}

/// A case whose put phase also had a steady-state window, at `window_ops` op/s.
fn windowed(mut case: CaseResult, window_ops: f64) -> CaseResult {
    let phase = &mut case.phases[0];
    phase.window_all_active_ns = 500_000_000;
    phase.throughput_all_active = Some(Throughput { window_ns: 500_000_000, ops_per_s: window_ops, bytes_per_s: window_ops * 4096.0 });
    case
}

#[test]
fn throughput_is_compared_on_one_measure_on_both_sides() {
    // Both sides have windows in every repeat: the windows are compared.
    let base = report(vec![windowed(case("sim", 1, 1000.0), 2000.0), windowed(case("sim", 2, 1000.0), 2000.0)]);
    let both = report(vec![windowed(case("sim", 1, 1000.0), 1000.0), windowed(case("sim", 2, 1000.0), 1000.0)]);
    let c = run(&base, &both, &Options::default());
    let ops = row(&c, "ops_per_s");
    assert_eq!(ops.measure, Some(Measure::SteadyState));
    assert_eq!((ops.baseline.mean, ops.candidate_sample.mean), (2000.0, 1000.0));

    // One candidate repeat lacks a window: both sides fall back to the whole phase, which the
    // table marks. Mixing would have compared the baseline's 2000 window with a 1000 total.
    let mixed = report(vec![windowed(case("sim", 1, 1000.0), 1000.0), case("sim", 2, 1000.0)]);
    let c = run(&base, &mixed, &Options::default());
    let ops = row(&c, "ops_per_s");
    assert_eq!(ops.measure, Some(Measure::WholePhase));
    assert_eq!((ops.baseline.values.clone(), ops.candidate_sample.values.clone()), (vec![1000.0, 1000.0], vec![1000.0, 1000.0]));
    assert!(render::table(&c).contains("throughput (ops, whole phase)"), "{}", render::table(&c));

    // Latency and per-case figures have no measure.
    assert_eq!(row(&c, "p99_ns").measure, None);
}

#[test]
fn client_memory_is_compared_above_each_case_start() {
    // Cases share a process: the second starts where the first left memory. What it used is
    // its peak above its start.
    let with_memory = |start: u64, peak: u64| {
        let mut c = case("sim", 1, 1000.0);
        (c.resources.client_rss_start_bytes, c.resources.client_rss_peak_bytes) = (start, peak);
        c
    };
    let c = run(&report(vec![with_memory(10 << 20, 12 << 20)]), &report(vec![with_memory(50 << 20, 52 << 20)]), &Options::default());
    let memory = row(&c, "client_rss_peak_bytes");
    assert_eq!((memory.baseline.mean, memory.candidate_sample.mean), ((2 << 20) as f64, (2 << 20) as f64));
}

/// A phase whose definition changed between the runs (the quick run's get phase before and after
/// `min_duration`) is named above the rows: one label, other work. Equal plans, and a field one
/// report writes as null and the other leaves out, say nothing.
#[test]
fn phases_defined_differently_are_named() {
    let plan = |stop: serde_json::Value| {
        serde_json::json!({ "workloads": [{ "name": "w", "phases": [
            { "label": "put", "mix": [["put", 1]], "stop": { "count": null }, "key_order": { "kind": "sequential" } },
            { "label": "get", "mix": [["get", 1]], "stop": stop, "key_order": { "kind": "sequential" } },
        ] }] })
    };
    let mut old = report(repeats("sim", &[100.0, 100.0]));
    old.plan = plan(serde_json::json!({ "count": null, "duration_ns": null }));
    let mut held = report(repeats("sim", &[100.0, 100.0]));
    held.plan = plan(serde_json::json!({ "min_duration_ns": 100_000_000u64 }));
    let c = run(&old, &held, &Options::default());
    let d: Vec<(&str, &str, &str, &str)> =
        c.plan_differences.iter().map(|d| (d.phase.as_str(), d.field.as_str(), d.baseline.as_str(), d.candidate_value.as_str())).collect();
    assert_eq!(d, [("get", "stop", "{}", "{\"min_duration_ns\":100000000}")]);
    let table = super::render::table(&c);
    assert!(table.contains("defined differently: workload w, phase get, stop: {} in the baseline, {\"min_duration_ns\":100000000} here"), "{table}");
    assert!(super::render::html_fragment(&c).contains("defined differently"));
    let same = run(&old, &old, &Options::default());
    assert!(same.plan_differences.is_empty());
    assert!(!serde_json::to_string(&same).unwrap().contains("plan_differences"), "absent when there are none");
}

/// A target's option, a workload's setting or the run's data directory that changed between the
/// runs is named above the rows, by where it lives; a target or workload in one plan alone, the
/// seed, and a field one report leaves out where the other writes its default say nothing.
#[test]
fn settings_given_differently_are_named_by_where_they_live() {
    let plan = |fsync: bool, verify: bool, work_dir: Option<&str>, extra_target: bool| {
        let mut targets = vec![serde_json::json!({ "name": "fs", "backend": "fs", "options_json": { "fsync": fsync } })];
        if extra_target {
            targets.push(serde_json::json!({ "name": "other", "backend": "sqlite", "options_json": {} }));
        }
        serde_json::json!({
            "seed": if extra_target { 7 } else { 42 }, "work_dir": work_dir, "targets": targets,
            "workloads": [{ "name": "w", "verify": verify, "compressibility": 0.0, "preload": false, "phases": [] }],
        })
    };
    let with_plan = |plan: serde_json::Value| {
        let mut r = report(repeats("sim", &[100.0, 100.0]));
        r.plan = plan;
        r
    };
    let base = with_plan(plan(false, true, None, false));
    let c = run(&base, &with_plan(plan(true, false, Some("/mnt/xfs"), true)), &Options::default());
    let d: Vec<(&str, &str, &str, &str, &str)> =
        c.setting_differences.iter().map(|d| (d.scope.as_str(), d.name.as_str(), d.field.as_str(), d.baseline.as_str(), d.candidate_value.as_str())).collect();
    assert_eq!(d, [("run", "", "work_dir", "null", "\"/mnt/xfs\""), ("workload", "w", "verify", "true", "false"), ("target", "fs", "fsync", "false", "true")]);
    let table = super::render::table(&c);
    assert!(table.contains("set differently: target fs, fsync: false in the baseline, true here; the figures of its cases measure other work"), "{table}");
    assert!(table.contains("set differently: run, work_dir: null in the baseline, \"/mnt/xfs\" here"), "{table}");
    assert!(super::render::html_fragment(&c).contains("set differently: workload w, verify"));

    // An older report without `preload` (absent reads as its default, false) and the seed alone.
    let mut older = plan(false, true, None, false);
    older["workloads"][0].as_object_mut().unwrap().remove("preload");
    older["seed"] = serde_json::json!(9);
    let same = run(&base, &with_plan(older), &Options::default());
    assert!(same.setting_differences.is_empty(), "{:?}", same.setting_differences);
    assert!(!serde_json::to_string(&same).unwrap().contains("setting_differences"), "absent when there are none");

    // A target's option written `false` where the other leaves it to a default that may be true.
    let mut explicit = plan(false, true, None, false);
    explicit["targets"][0]["options_json"] = serde_json::json!({ "fsync": false, "mmap": false });
    let c = run(&base, &with_plan(explicit), &Options::default());
    let d: Vec<(&str, &str, &str)> = c.setting_differences.iter().map(|d| (d.field.as_str(), d.baseline.as_str(), d.candidate_value.as_str())).collect();
    assert_eq!(d, [("mmap", "null", "false")]);
}

/// Another kernel, CPU count, filesystem, clock or memory size is named above the rows; memory within 1 %, the
/// data directory's path and a fact one report does not record (an older report) say nothing.
#[test]
fn an_environment_that_differs_is_named_above_the_rows() {
    use crate::report::model::{ClockInfo, FilesystemInfo};
    let environment = |kernel: &str, cpus: u32, memory: u64, fs_type: &str, path: &str, clock: Option<&str>| Environment {
        hostname: "vm".into(),
        kernel: kernel.into(),
        cpu_count: cpus,
        memory_bytes: memory,
        work_dir_filesystem: Some(FilesystemInfo { path: path.into(), fs_type: fs_type.into(), journal: Some(false), ..Default::default() }),
        clock: clock.map(|source| ClockInfo { source: source.into(), detail: format!("{source} at a rate of this run"), drift_ppm: Some(1.5) }),
        ..Default::default()
    };
    let with = |e: Environment| {
        let mut r = report(repeats("sim", &[100.0, 100.0]));
        r.environment = e;
        r
    };
    let base = with(environment("6.1.0", 2, 24_000_000_000, "ext4", "/var/tmp/a", Some("tsc")));
    let elsewhere = with(environment("6.18.44", 4, 24_100_000_000, "xfs", "/var/tmp/b", Some("clock_gettime")));
    let c = run(&base, &elsewhere, &Options::default());
    let d: Vec<(&str, &str, &str)> = c.environment_differences.iter().map(|d| (d.field.as_str(), d.baseline.as_str(), d.candidate_value.as_str())).collect();
    assert_eq!(
        d,
        [
            ("kernel", "\"6.1.0\"", "\"6.18.44\""),
            ("cpu_count", "2", "4"),
            ("work_dir_filesystem.fs_type", "\"ext4\"", "\"xfs\""),
            ("clock.source", "\"tsc\"", "\"clock_gettime\""),
        ]
    );
    let table = super::render::table(&c);
    assert!(table.contains("environment differs: kernel: \"6.1.0\" in the baseline, \"6.18.44\" here; every figure compares the environments"), "{table}");
    assert!(super::render::html_fragment(&c).contains("environment differs: cpu_count: 2 in the baseline, 4 here"));

    // The same machine on another day, and an older report that recorded no clock.
    let again = with(environment("6.1.0", 2, 24_000_016_384, "ext4", "/var/tmp/c", None));
    let same = run(&base, &again, &Options::default());
    assert!(same.environment_differences.is_empty(), "{:?}", same.environment_differences);
    assert!(!serde_json::to_string(&same).unwrap().contains("environment_differences"), "absent when there are none");

    // Memory beyond 1 % is another machine's.
    let larger = with(environment("6.1.0", 2, 32_000_000_000, "ext4", "/var/tmp/d", Some("tsc")));
    let fields: Vec<String> = run(&base, &larger, &Options::default()).environment_differences.into_iter().map(|d| d.field).collect();
    assert_eq!(fields, ["memory_bytes"]);
}

/// A phase on one side only, or one without a successful operation (every get a miss), gave no
/// row and was left out without a word, and a gate passed over it. Each is listed under "not
/// compared" with its reason; a candidate's phase that measured nothing is unjudged by the gate.
#[test]
fn phases_on_one_side_or_without_success_are_listed_as_not_compared() {
    let with_phase = |cases: Vec<CaseResult>, label: &str, all_missed: bool| -> Vec<CaseResult> {
        cases
            .into_iter()
            .map(|mut c| {
                let mut phase = c.phases[0].clone();
                phase.phase = label.into();
                if all_missed {
                    let op = phase.ops.get_mut("put").unwrap();
                    (op.misses, op.count, op.bytes, op.latency) = (op.count, 0, 0, LatencySummary::default());
                    phase.throughput_total = Throughput { window_ns: 1_000_000_000, ops_per_s: 0.0, bytes_per_s: 0.0 };
                }
                c.phases.push(phase);
                c
            })
            .collect()
    };
    let a = report(with_phase(with_phase(repeats("sim", &[100.0, 101.0]), "head", false), "get", true));
    let b = report(with_phase(with_phase(repeats("sim", &[100.0, 101.0]), "delete", false), "get", true));
    let c = run(&a, &b, &gated(10.0));
    let listed: Vec<(&str, &str, &str)> = c.unmatched.iter().map(|u| (u.file.as_str(), u.case.as_str(), u.reason.as_str())).collect();
    assert_eq!(
        listed,
        [
            ("a.json", "sim/w/4KiB/t1 phase head", "phase only in the baseline"),
            ("b.json", "sim/w/4KiB/t1 phase get", "no successful operation on either side (200 and 200 misses): nothing to compare"),
            ("b.json", "sim/w/4KiB/t1 phase delete", "phase only in the candidate"),
        ]
    );
    assert!(c.rows.iter().all(|r| r.phase.as_deref() == Some("put") || r.phase.is_none()), "{:?}", c.rows);
    let gate = c.gate.unwrap();
    assert!(!gate.passed && gate.unjudged.len() == 2, "the candidate measured neither head nor get: {:?}", gate.unjudged);
}

/// Session 47 noticed: compare ranked p99s read from fewer than 100 samples, which are each
/// repeat's largest sample: two outliers compared, with a verdict.
#[test]
fn a_p99_from_too_few_samples_is_listed_not_compared() {
    let few = |cases: Vec<CaseResult>| -> Vec<CaseResult> {
        cases
            .into_iter()
            .map(|mut c| {
                c.phases[0].ops.get_mut("put").unwrap().latency.samples = 99;
                c
            })
            .collect()
    };
    let enough = report(repeats("sim", &[100.0, 102.0, 98.0]));
    let c = run(&enough, &report(repeats("sim", &[80.0, 81.0, 79.0])), &gated(10.0));
    assert!(c.rows.iter().any(|r| r.metric == "p99_ns") && c.unmatched.is_empty(), "100 samples give a p99: {:?}", c.unmatched);
    // One repeat on one side short of 100 samples is enough to leave the figure out.
    let mut short = repeats("sim", &[80.0, 81.0, 79.0]);
    short[1] = few(vec![short[1].clone()]).remove(0);
    for candidate in [report(short), report(few(repeats("sim", &[80.0, 81.0, 79.0])))] {
        let c = run(&enough, &candidate, &gated(10.0));
        assert!(!c.rows.iter().any(|r| r.metric == "p99_ns"), "{:?}", c.rows);
        assert!(c.rows.iter().any(|r| r.metric == "p50_ns") && c.rows.iter().any(|r| r.metric == "ops_per_s"));
        let listed: Vec<(&str, &str)> = c.unmatched.iter().map(|u| (u.case.as_str(), u.reason.as_str())).collect();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].0, "sim/w/4KiB/t1 phase put, put");
        assert!(listed[0].1.starts_with("p99 latency not compared: a repeat had fewer than 100 latency samples"), "{}", listed[0].1);
        assert!(!c.gate.unwrap().passed, "the gate still judges throughput");
    }
    // Asked for p99 alone, the pair is not called "no figure of the chosen metrics" as well.
    let only_p99 = Options { metrics: vec!["p99_ns".into()], fail_if_slower_percent: None };
    let c = run(&enough, &report(few(repeats("sim", &[80.0, 81.0, 79.0]))), &only_p99);
    assert!(c.rows.is_empty() && c.unmatched.len() == 1, "{:?}", c.unmatched);
}
