//! The runner, statistics and reports, tested deterministically with the `sim` backend's
//! virtual clock: every expected number below is computed by hand from the sim's settings.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use stowbench::report::model::{CaseStatus, RunReport};
use stowbench::runner::{self, RunOptions};

struct Run {
    report: RunReport,
    exit_code: i32,
    _dir: tempfile::TempDir,
}

fn run_job(job: &str) -> Result<Run, stowbench::error::Error> {
    let dir = tempfile::tempdir().unwrap();
    let plan = stowbench::job::load_text(job, "test.toml").map_err(stowbench::error::Error::bad_input)?;
    let opts = RunOptions { report_path: dir.path().join("out/report.json"), work_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let outcome = runner::run(&plan, &opts, &AtomicBool::new(false))?;
    common::assert_valid_report(&opts.report_path);
    Ok(Run { report: outcome.report, exit_code: outcome.exit_code, _dir: dir })
}

fn sim_job(sim_options: &str, workload: &str) -> String {
    format!("version = 1\n[[target]]\nbackend = \"sim\"\n{sim_options}\n[[workload]]\nname = \"w\"\n{workload}\n")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 0.001
}

#[test]
fn latency_and_throughput_are_exact_with_the_virtual_clock() {
    let run = run_job(&sim_job("latency = \"2ms\"", "sizes = [\"1MiB\"]\nthreads = [1, 4]\nobjects = 400\nphases = [\"put\", \"get\"]")).unwrap();
    assert_eq!(run.exit_code, 0);
    for case in &run.report.cases {
        let threads = case.threads as f64;
        for phase in &case.phases {
            let op = &phase.ops[&phase.phase];
            assert_eq!(op.count, 400);
            assert_eq!(op.bytes, 400 << 20);
            assert!(close(op.latency.p50_ns as f64, 2e6) && close(op.latency.p99_ns as f64, 2e6), "{:?}", op.latency);
            assert_eq!(phase.window_total_ns, (400.0 / threads * 2e6) as u64);
            let steady = phase.throughput_all_active.as_ref().expect("a 200 ms+ window is long enough");
            assert!(close(steady.ops_per_s, 500.0 * threads), "{} threads: {}", threads, steady.ops_per_s);
            assert!(close(steady.bytes_per_s, 500.0 * threads * (1 << 20) as f64));
        }
        assert_eq!(case.verification.checked, 400);
        assert_eq!(case.disk.logical_bytes, 400 << 20);
    }
}

/// Every phase's timeline starts at its own second 0. A lone worker runs on the runner's thread,
/// whose virtual clock goes on from phase to phase: until session 48 the get phase's timeline
/// began with the put phase's 2.5 s of zeros ([0, 0, 500, 1000, 1000]).
#[test]
fn per_second_timeline_counts_every_operation() {
    let run = run_job(&sim_job("latency = \"1ms\"", "sizes = [100]\nobjects = 2500\nthreads = [1, 2]\nphases = [\"put\", \"get\"]")).unwrap();
    for case in &run.report.cases {
        for phase in &case.phases {
            let ops: Vec<u64> = phase.timeline_per_second.iter().map(|s| s.ops).collect();
            let expected = if case.threads == 1 { vec![1000, 1000, 500] } else { vec![2000, 500] };
            assert_eq!(ops, expected, "{} {}", case.case_id, phase.phase);
            assert_eq!(phase.timeline_by_op_index.len(), 100);
            assert_eq!(phase.op_index_bucket_ops, 25);
            let steady = phase.throughput_all_active.as_ref().expect("a window");
            assert!(close(steady.ops_per_s, 1000.0 * case.threads as f64), "{} {}: {}", case.case_id, phase.phase, steady.ops_per_s);
        }
    }
}

#[test]
fn growth_ratio_compares_the_last_tenth_of_puts_with_the_first() {
    let run = run_job(&sim_job("latency = \"1ms\"\ngrowth_per_object = \"10us\"", "sizes = [10]\nobjects = 100\nphases = [\"put\"]")).unwrap();
    let growth = run.report.cases[0].phases[0].growth_ratio.unwrap();
    // put i takes 1 ms + i × 10 µs: first tenth averages 1.045 ms, last tenth 1.945 ms.
    assert!((growth - 1.945 / 1.045).abs() < 0.005, "{growth}");
}

#[test]
fn injected_faults_are_counted_by_kind_and_fail_the_error_budget() {
    let run = run_job(&sim_job("fail_every = 10\nfail_kind = \"timeout\"", "sizes = [10]\nobjects = 100\nphases = [\"put\"]\npreload = false")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    assert_eq!(case.status, CaseStatus::Failed);
    assert!(case.failure.as_ref().unwrap().contains("10 of 100 operations failed"), "{:?}", case.failure);
    let put = &case.phases[0].ops["put"];
    assert_eq!((put.count, put.errors["timeout"]), (90, 10));

    let tolerant = run_job(&sim_job("fail_every = 10", "sizes = [10]\nobjects = 100\nphases = [\"put\"]\nmax_error_ratio = 0.1")).unwrap();
    assert_eq!(tolerant.exit_code, 0);

    let retried = run_job(&sim_job("fail_every = 10", "sizes = [10]\nobjects = 100\nphases = [\"put\"]\nretries = 1")).unwrap();
    let put = &retried.report.cases[0].phases[0].ops["put"];
    assert_eq!((retried.exit_code, put.count, put.retries), (0, 100, 11));
    assert!(put.errors.is_empty());
}

/// A failed preload is the cause of whatever the measured phases then miss, so the case's
/// failure says so first, with how many objects and the first error.
#[test]
fn a_failed_preload_names_itself_and_its_first_error() {
    let run = run_job(&sim_job("fail_every = 4\nfail_kind = \"io\"", "sizes = [10]\nobjects = 20\nphases = [\"get\"]")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    let preload = case.preload.as_ref().unwrap();
    assert_eq!((preload.ops, preload.errors), (15, 5));
    assert_eq!(preload.first_errors[0], "put obj-0000000003: injected fault on operation 4");
    let failure = case.failure.as_deref().unwrap();
    assert_eq!(
        failure,
        "preload failed: 5 of 20 objects could not be stored before the measured phases; first: put obj-0000000003: injected fault on operation 4"
    );
}

/// A store where every operation fails (a dead server) ends the case after `give_up_after`,
/// instead of spinning through errors for the phase's whole duration; a store that fails every
/// other operation is slow, not dead, and runs its course.
#[test]
fn workers_give_up_after_nothing_but_failures_and_the_case_ends() {
    let phases = "[[workload.phase]]\nmix = { put = 1 }\nduration = \"60s\"\n[[workload.phase]]\nmix = { get = 1 }\nduration = \"60s\"\n";
    let workload = format!("sizes = [10]\nobjects = 100\nthreads = [2]\ngive_up_after = \"2s\"\npreload = false\n{phases}");
    let dead = run_job(&sim_job("fail_every = 1\nfail_kind = \"connection\"", &workload)).unwrap();
    assert_eq!(dead.exit_code, 1);
    let case = &dead.report.cases[0];
    assert_eq!(case.phases.len(), 1, "the get phase is skipped once every worker gave up");
    let put = &case.phases[0];
    assert_eq!(put.gave_up_workers, 2);
    // 1 ms per failed put: the 2000th ends 2 s after the start, and the worker stops there.
    assert_eq!(put.ops["put"].errors["connection"], 2 * 2000, "{:?}", put.ops["put"].errors);
    let failure = case.failure.as_deref().unwrap();
    assert!(failure.starts_with("gave up in phase put: 2 of 2 workers saw nothing but failures for 2 s"), "{failure}");
    assert!(failure.contains("error budget exceeded: 4000 of 4000"), "{failure}");

    let slow = run_job(&sim_job("fail_every = 2", &workload.replace("duration = \"60s\"", "duration = \"5s\""))).unwrap();
    let case = &slow.report.cases[0];
    assert_eq!(case.phases.len(), 2);
    assert!(case.phases.iter().all(|p| p.gave_up_workers == 0));
    assert!(!case.failure.as_deref().unwrap_or("").contains("gave up"), "{:?}", case.failure);

    let patient = run_job(&sim_job("fail_every = 1", &workload.replace("give_up_after = \"2s\"", "give_up_after = \"0s\"").replace("60s", "3s"))).unwrap();
    assert_eq!(patient.report.cases[0].phases.len(), 2, "give_up_after = \"0s\" never gives up");
}

#[test]
fn a_corrupt_read_names_the_key_and_offset_and_fails_the_run() {
    let run = run_job(&sim_job("corrupt_every = 7", "sizes = [\"10kB\"]\nobjects = 50\nphases = [\"put\", \"get\"]")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    assert_eq!(case.verification.mismatches, 7);
    let m = case.verification.first_mismatch.as_ref().unwrap();
    assert_eq!((m.offset_bytes, m.kind), (5000, stowbench::workload::payload::DamageKind::Flipped));
    assert!(m.key.starts_with("obj-"));
    assert_eq!(case.verification.mismatched.len(), 7, "every damaged object is listed");
    assert!(case.verification.mismatched.iter().all(|m| m.offset_bytes == 5000 && m.kind == stowbench::workload::payload::DamageKind::Flipped));
    assert!(case.failure.as_ref().unwrap().contains("at byte 5000"));
    assert_eq!(case.phases[1].ops["get"].errors["corrupt"], 7);
}

#[test]
fn damage_in_transfer_is_caught_and_told_apart_from_damage_at_rest() {
    let run = run_job(&sim_job("garble_every = 10", "sizes = [\"10kB\"]\nobjects = 50\nphases = [\"put\", \"get\"]")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    // The session's gets 10, 20, 30, 40 and 50 are garbled, each the first read of an object; the
    // second read of each (the session's next get) is clean, so 5 of the 50 objects mismatch.
    assert_eq!(case.verification.mismatches, 5, "{:?}", case.verification);
    assert_eq!(case.phases[1].ops["get"].errors["corrupt"], 5);
    let m = case.verification.first_mismatch.as_ref().unwrap();
    assert!(m.detail.contains("second read matched"), "{m:?}");
}

#[test]
fn sizes_beyond_a_backend_limit_are_refused_before_any_data_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let plan = stowbench::job::load_text(&sim_job("max_object_bytes = \"1kB\"", "sizes = [100, \"2kB\"]\nobjects = 5\nphases = [\"put\"]"), "t.toml").unwrap();
    let opts = RunOptions { report_path: dir.path().join("r/report.json"), work_dir: Some(dir.path().join("work")), ..Default::default() };
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let err = runner::run(&plan, &opts, &AtomicBool::new(false)).err().unwrap();
    assert_eq!(err.kind, stowbench::error::Kind::BadInput, "{err}");
    assert!(err.message.contains("limit of 1000 bytes") && err.message.contains("workload \"w\" size 2kB"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path().join("work")).unwrap().count(), 0, "nothing was left in the work dir");
}

#[test]
fn mixed_phases_with_zipf_keys_and_duration_stops() {
    let job = sim_job(
        "latency = \"1ms\"",
        "sizes = [\"4KiB\"]\nobjects = 1000\nthreads = [2]\n[[workload.phase]]\nmix = { get = 80, put = 15, delete = 5 }\nduration = \"3s\"\nkey_order = \"zipf\"",
    );
    let run = run_job(&job).unwrap();
    assert_eq!(run.exit_code, 0, "{:?}", run.report.cases[0].failure);
    let case = &run.report.cases[0];
    assert!(case.preload.as_ref().is_some_and(|p| p.ops == 1000), "a get-first workload preloads every object");
    let phase = &case.phases[0];
    assert_eq!(phase.phase, "mix delete5 get80 put15");
    let total: u64 = phase.ops.values().map(|o| o.count + o.misses).sum();
    assert_eq!(total, 6000, "two workers × 3 s at 1 ms per operation");
    let get = &phase.ops["get"];
    assert!((4500..5100).contains(&(get.count + get.misses)), "about 80% gets: {}", get.count + get.misses);
    assert!((750..1050).contains(&phase.ops["put"].count), "about 15% puts");
    assert!(get.misses > 0, "deletes of hot keys make later gets miss, counted apart from errors");
    assert!(phase.ops.values().all(|o| o.errors.is_empty()), "a get or delete racing a delete is a miss, never an error: {:?}", phase.ops);
    assert!(phase.ops.values().all(|o| o.raced_misses <= o.misses));
}

#[test]
fn repeats_run_on_fresh_stores_and_report_spread() {
    let run = run_job(&sim_job("", "sizes = [10]\nobjects = 20\nrepeats = 3\nphases = [\"get\"]")).unwrap();
    assert_eq!(run.report.cases.len(), 3);
    assert!(run.report.cases.iter().all(|c| c.preload.as_ref().unwrap().ops == 20 && c.phases[0].ops["get"].misses == 0));
    let table = stowbench::report::table::render(&run.report);
    assert!(table.contains("sim (only result)"), "{table}");
}

#[test]
fn an_interrupt_keeps_every_finished_case() {
    let dir = tempfile::tempdir().unwrap();
    let job = sim_job("clock = \"real\"\nlatency = \"20ms\"", "sizes = [10]\nobjects = 10\nrepeats = 50\nphases = [\"put\"]");
    let plan = stowbench::job::load_text(&job, "t.toml").unwrap();
    let opts = RunOptions { report_path: dir.path().join("report.json"), work_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let flag = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            common::wait_for_finished_cases(dir.path(), 1);
            flag.store(true, Ordering::SeqCst);
        });
        runner::run(&plan, &opts, &flag).unwrap()
    });
    assert_eq!(outcome.exit_code, 130);
    let saved = common::assert_valid_report(&opts.report_path);
    assert_eq!(saved["status"], "interrupted");
    let kept = saved["cases"].as_array().unwrap().len();
    assert!((1..50).contains(&kept), "{kept} cases kept");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-")).collect();
    assert!(leftovers.is_empty(), "the run's namespace is removed even after an interrupt");
}

#[test]
fn a_panicking_backend_fails_its_case_not_the_run() {
    let job = "version = 1\n[[target]]\nname = \"buggy\"\nbackend = \"sim\"\npanic_at = 5\n[[target]]\nbackend = \"sim\"\n\
        [[workload]]\nname = \"w\"\nsizes = [10]\nobjects = 20\nphases = [\"put\"]\n";
    let run = run_job(job).unwrap();
    assert_eq!(run.exit_code, 1);
    let buggy = &run.report.cases[0];
    assert_eq!(buggy.status, CaseStatus::Failed);
    assert!(buggy.failure.as_ref().unwrap().contains("injected panic at operation 5"), "{:?}", buggy.failure);
    assert_eq!(run.report.cases[1].status, CaseStatus::Ok, "the next case still runs");
}

/// E5's rule: however often an upload is retried, each content ends with one catalog row and one
/// stored copy, and each name with one mapping. Every third sim operation fails, so uploads fail
/// after registering (their content write fails) and are retried from the registration.
#[test]
fn retried_uploads_leave_one_row_and_one_copy_per_content() {
    let workload = "sizes = [1000]\nobjects = 60\nthreads = [1, 3]\nretries = 3\nduplicates = 0.25\nphases = [\"upload\", \"download\"]";
    let run = run_job(&sim_job("fail_every = 3", workload)).unwrap();
    assert_eq!(run.exit_code, 0, "{:?}", run.report.cases.iter().map(|c| &c.failure).collect::<Vec<_>>());
    for case in &run.report.cases {
        let f = case.file_server.as_ref().expect("a file-server case reports its catalog");
        assert!(f.problems.is_empty(), "{:?}", f.problems);
        assert!(f.catalog.contains("catalog.sqlite"), "{}", f.catalog);
        assert_eq!((f.uploads, f.failed_uploads, f.catalog_names), (60, 0, 60));
        assert!(f.retried_uploads > 0 && f.duplicate_uploads > 0, "{f:?}");
        assert_eq!(f.catalog_files, 60 - f.duplicate_uploads, "one row per distinct content");
        assert_eq!((f.contents_written, f.unfinished_files, f.objects_checked, f.objects_missing), (f.catalog_files, 0, f.catalog_files, 0));
        assert_eq!(case.disk.files, f.catalog_files, "one stored copy per content");
        assert_eq!(case.disk.logical_bytes, f.catalog_files * 1000);
        let upload = &case.phases[0];
        assert_eq!((upload.ops["upload"].count, upload.ops["register"].count, upload.ops["put"].count), (60, 60, f.contents_written));
        let download = &case.phases[1];
        assert_eq!((download.ops["download"].count, download.ops["lookup"].count, download.ops["get"].count), (60, 60, 60));
        assert_eq!((case.verification.checked, case.verification.mismatches), (60, 0));
    }
}

/// Without retries a failed upload stays failed: its registration is left unfinished (reported,
/// never served to a download) and the case fails its error budget.
#[test]
fn a_failed_upload_leaves_an_unfinished_registration_that_downloads_never_serve() {
    let run = run_job(&sim_job("fail_every = 3", "sizes = [100]\nobjects = 30\nphases = [\"upload\", \"download\"]")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    let f = case.file_server.as_ref().unwrap();
    assert!(f.failed_uploads > 0 && f.problems.is_empty(), "{f:?}");
    assert_eq!(f.unfinished_files, f.failed_uploads, "each failed content write leaves its row unfinished");
    assert_eq!(f.catalog_files, 30);
    let download = &case.phases[1].ops["download"];
    assert_eq!(download.misses, f.failed_uploads, "a file whose content was never stored is absent, not corrupt");
    assert!(case.failure.as_ref().unwrap().contains("error budget"), "{:?}", case.failure);
}

#[test]
fn a_download_of_damaged_content_fails_verification() {
    let run = run_job(&sim_job("corrupt_every = 4", "sizes = [1000]\nobjects = 20\nphases = [\"upload\", \"download\"]")).unwrap();
    assert_eq!(run.exit_code, 1);
    let case = &run.report.cases[0];
    assert_eq!(case.verification.mismatches, 5);
    assert!(case.failure.as_ref().unwrap().contains("verification failed"), "{:?}", case.failure);
    // Each damaged file is named, with where and how its content differs (the sim flips the
    // middle byte of a stored copy).
    for m in &case.verification.mismatched {
        assert!(m.key.starts_with("file-"), "{m:?}");
        assert_eq!((m.kind, m.offset_bytes), (stowbench::workload::payload::DamageKind::Flipped, 500), "{m:?}");
    }
}

/// Nearest-rank percentile of `sorted` (what an HDR histogram reports, to its precision).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1]
}

/// Open-loop load is coordinated-omission safe: a 100 ms stall at 1000 puts/s delays the ~110
/// puts scheduled during it, and the latency from each intended start shows them all, while the
/// closed-loop run of the same work (and the open-loop service time) shows one slow put.
#[test]
fn an_open_loop_stall_shows_in_the_latency_from_the_intended_start() {
    let sim = "latency = \"100us\"\nstall_at = 501\nstall = \"100ms\"";
    let phase = |rate: &str| format!("sizes = [100]\nobjects = 1000\n[[workload.phase]]\nmix = {{ put = 1 }}\ncount = 1000\n{rate}");
    let open = run_job(&sim_job(sim, &phase("rate = \"1000/s\"\n"))).unwrap();
    assert_eq!(open.exit_code, 0);
    let p = &open.report.cases[0].phases[0];
    assert_eq!(p.phase, "put @ 1000/s");
    // Put k is meant to start at k ms and takes 0.1 ms; put 500 (the session's 501st) takes
    // 100.1 ms, so puts 501..=611 start late, each when the one before it ends.
    let (mut responses, mut lags, mut end) = (Vec::new(), Vec::new(), 0.0f64);
    for k in 0..1000 {
        let intended = k as f64;
        let start = end.max(intended);
        end = start + if k == 500 { 100.1 } else { 0.1 };
        responses.push((end - intended) * 1e6);
        lags.push((start - intended) * 1e6);
    }
    responses.sort_by(f64::total_cmp);
    let put = &p.ops["put"];
    let response = put.response_latency.as_ref().expect("an open-loop phase has latency from the intended start");
    for (q, got) in [(0.5, response.p50_ns), (0.9, response.p90_ns), (0.99, response.p99_ns)] {
        assert!(close(got as f64, percentile(&responses, q)), "p{}: {got} ns, want {} ns", q * 100.0, percentile(&responses, q));
    }
    assert!(close(response.p99_ns as f64, 91.1e6), "the worked example: {}", response.p99_ns);
    assert!(close(put.latency.p99_ns as f64, 0.1e6) && close(put.latency.max_ns as f64, 100.1e6), "service time: one slow put {:?}", put.latency);
    let schedule = p.open_loop.as_ref().expect("open-loop figures");
    assert_eq!(schedule.started, 1000);
    assert!(close(schedule.max_lag_ns as f64, 99.1e6), "put 501 started 99.1 ms late: {}", schedule.max_lag_ns);
    assert!(close(schedule.mean_lag_ns, lags.iter().sum::<f64>() / 1000.0), "{}", schedule.mean_lag_ns);
    assert!(schedule.kept_up && schedule.end_lag_ns == 0, "it caught up after the stall: {schedule:?}");

    let closed = run_job(&sim_job(sim, &phase(""))).unwrap();
    let put = &closed.report.cases[0].phases[0].ops["put"];
    assert!(put.response_latency.is_none() && closed.report.cases[0].phases[0].open_loop.is_none());
    assert!(close(put.latency.p99_ns as f64, 0.1e6), "closed loop hides the stall below p99.9: {:?}", put.latency);
}

#[test]
fn an_open_loop_rate_the_backend_cannot_keep_is_reported_as_behind() {
    // 20,000 puts/s scheduled, at most 10,000/s served: put k is meant to start at 50 µs · k and
    // starts at 100 µs · k, so the last one (k = 999) starts 49.95 ms late.
    let run = run_job(&sim_job("latency = \"100us\"", "sizes = [100]\nobjects = 1000\n[[workload.phase]]\nmix = { put = 1 }\nrate = \"20k/s\"\n")).unwrap();
    let p = &run.report.cases[0].phases[0];
    let schedule = p.open_loop.as_ref().unwrap();
    assert_eq!((schedule.end_lag_ns, schedule.max_lag_ns, schedule.kept_up), (49_950_000, 49_950_000, false), "{schedule:?}");
    let behind = run.report.warnings.iter().find(|w| w.kind == stowbench::report::warnings::WarningKind::BehindSchedule);
    let behind = behind.unwrap_or_else(|| panic!("no behind_schedule warning in {:?}", run.report.warnings));
    assert!(behind.message.contains("could not keep the rate of 20000/s") && behind.message.contains("ended 50.0 ms behind"), "{behind:?}");
    assert!(behind.phase.as_deref().is_some_and(|p| p.starts_with("put")), "{behind:?}");
    assert_eq!(behind.case_ids.len(), 1, "{behind:?}");
    let table = stowbench::report::table::render(&run.report);
    assert!(table.contains("behind schedule in 1 of 1") && table.contains("svc"), "{table}");
}

/// The retry policy against a backend that always fails: each put gets its 5 retries until the
/// worker's budget (100, plus one per 5 successful operations: none here) is spent, then fails
/// at once; the backoff shows in the latency, as a client would wait it.
#[test]
fn retries_stop_when_the_budget_is_spent_and_their_backoff_is_part_of_the_latency() {
    let run =
        run_job(&sim_job("fail_every = 1\nlatency = \"1ms\"", "sizes = [100]\nobjects = 50\nretries = 5\nmax_error_ratio = 1\nphases = [\"put\"]")).unwrap();
    let put = &run.report.cases[0].phases[0].ops["put"];
    assert_eq!(put.errors.get("timeout"), Some(&50), "{put:?}");
    // Puts 1–20 retry 5 times each, then the budget of 100 is spent: nothing succeeds to refill it.
    assert_eq!(put.retries, 100, "{put:?}");
    // Every second attempt fails: a retried put takes two attempts of 1 ms plus a backoff of up
    // to 10 ms (the first ceiling); the others one attempt.
    let s = run_job(&sim_job("fail_every = 2\nlatency = \"1ms\"", "sizes = [100]\nobjects = 50\nretries = 1\nphases = [\"put\"]")).unwrap();
    let put = &s.report.cases[0].phases[0].ops["put"];
    assert!(put.errors.is_empty() && put.retries > 0, "{put:?}");
    assert!(close(put.latency.min_ns as f64, 1e6), "one attempt (histogram precision): {put:?}");
    assert!(put.latency.max_ns > 2_000_000 && put.latency.max_ns <= 12_000_000, "two attempts and a backoff: {put:?}");
}

/// Capabilities are contracts: a job asking a backend for what it does not declare is refused
/// before any data is written, as bad input naming the job file, the target, the workload and the
/// fix — whatever the rest of the job would have run.
#[test]
fn undeclared_capabilities_are_refused_before_any_data_is_written() {
    let refusals = [
        ("delete = false", "sizes = [10]\nobjects = 5\nphases = [\"put\", \"delete\"]", "cannot delete, and workload \"w\" phase \"delete\" deletes"),
        (
            "overwrite = false",
            "sizes = [10]\nobjects = 5\nphases = [\"put\"]\npreload = true",
            "cannot replace a stored object, and workload \"w\" puts in phase \"put\"",
        ),
        ("overwrite = false", "sizes = [10]\nobjects = 5\nphases = [\"put\", \"put\"]\npreload = false", "earlier put or the preload stored"),
        (
            "overwrite = false",
            "sizes = [10]\nobjects = 5\nkey_order = \"uniform\"\nphases = [\"put\"]\npreload = false",
            "phase \"put\" may put the same key twice",
        ),
        ("", "sizes = [10]\nobjects = 5\nphases = [\"put\"]\nop_timeout = \"1s\"", "cannot honour op_timeout"),
    ];
    for (sim, workload, expected) in refusals {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        let plan = stowbench::job::load_text(&sim_job(sim, workload), "caps.toml").unwrap_or_else(|e| panic!("{sim} / {workload}: {e}"));
        let opts = RunOptions { report_path: dir.path().join("r/report.json"), work_dir: Some(dir.path().join("work")), ..Default::default() };
        let err = runner::run(&plan, &opts, &AtomicBool::new(false)).err().unwrap_or_else(|| panic!("{sim} / {workload}: must be refused"));
        assert_eq!(err.kind, stowbench::error::Kind::BadInput, "{err}");
        assert!(err.message.contains(expected), "{sim} / {workload}: expected {expected:?} in: {err}");
        // Refused at the target's line, or at the line of the key to remove (op_timeout).
        let at = if expected.contains("op_timeout") { "caps.toml:10:1" } else { "caps.toml:2" };
        assert!(err.message.starts_with(&format!("{at}: target \"sim\" (backend sim)")) && err.message.contains("Nothing was written"), "{err}");
        assert!(!dir.path().join("r").exists(), "no report for a refused run");
        assert_eq!(std::fs::read_dir(dir.path().join("work")).unwrap().count(), 0, "nothing was left in the work dir");
    }
    // Writing each key once is what a backend without overwrite can do, and it runs.
    let once = run_job(&sim_job("overwrite = false\ndelete = false", "sizes = [10]\nobjects = 5\nphases = [\"put\", \"get\"]\npreload = false")).unwrap();
    assert_eq!((once.exit_code, once.report.cases[0].phases[0].ops["put"].count), (0, 5));
}

/// `concurrent_writers = false` is no refusal: writes queue inside the backend. The report says
/// so — the declared capabilities in `backend_info` and a `serialized_writes` warning naming the
/// lock wait — rather than presenting the queue as the store's speed.
#[test]
fn a_single_writer_backend_is_reported_not_refused() {
    let run =
        run_job(&sim_job("concurrent_writers = false\nclock = \"real\"\nlatency = \"2ms\"", "sizes = [10]\nobjects = 40\nthreads = [4]\nphases = [\"put\"]"))
            .unwrap();
    assert_eq!(run.exit_code, 0);
    let case = &run.report.cases[0];
    assert_eq!(case.backend_info["capabilities"]["concurrent_writers"], false, "{}", case.backend_info);
    // Four writers, one at a time, each holding the lock for 2 ms a put: the others waited.
    assert!(case.phases[0].lock_wait_ns > 0, "{:?}", case.phases[0].lock_wait_ns);
    let warning = run.report.warnings.iter().find(|w| w.kind == stowbench::report::warnings::WarningKind::SerializedWrites);
    let warning = warning.unwrap_or_else(|| panic!("no serialized_writes warning: {:?}", run.report.warnings));
    assert_eq!(warning.case_ids, std::slice::from_ref(&case.case_id));
    assert!(warning.message.contains("single-writer lock") && warning.message.contains("4 threads"), "{}", warning.message);
}

/// More threads than a phase has operations: the idle threads are counted per phase and the
/// report warns that the figures are those of fewer threads (sim's strided shares make it exact:
/// 3 objects on 4 threads leave worker 3 without work in both phases).
#[test]
fn threads_without_an_operation_are_counted_and_warned_about() {
    let run = run_job(&sim_job("latency = \"1ms\"", "sizes = [100]\nthreads = [4]\nobjects = 3\nphases = [\"put\", \"get\"]")).unwrap();
    let case = &run.report.cases[0];
    assert_eq!(case.phases.iter().map(|p| p.idle_workers).collect::<Vec<_>>(), [1, 1]);
    let warning = run.report.warnings.iter().find(|w| w.kind == stowbench::report::warnings::WarningKind::IdleThreads);
    let warning = warning.unwrap_or_else(|| panic!("no idle_threads warning: {:?}", run.report.warnings));
    assert!(warning.message.contains("1 of its 4 threads did nothing in put, so its figures are those of 3 thread(s)"), "{}", warning.message);
    let enough = run_job(&sim_job("latency = \"1ms\"", "sizes = [100]\nthreads = [4]\nobjects = 4\nphases = [\"put\", \"get\"]")).unwrap();
    assert!(enough.report.cases[0].phases.iter().all(|p| p.idle_workers == 0));
    assert!(!enough.report.warnings.iter().any(|w| w.kind == stowbench::report::warnings::WarningKind::IdleThreads));
}

/// A store that cannot be brought to rest before a phase (a checkpoint on a failing disk) still
/// runs the phase, so the data acknowledged so far is read and checked; the phase says why it
/// was not at rest and the report warns.
#[test]
fn a_phase_runs_and_is_flagged_when_the_store_cannot_come_to_rest() {
    let run = run_job(&sim_job("latency = \"1ms\"\nsettle_fails = true", "sizes = [100]\nthreads = [1]\nobjects = 5\nphases = [\"put\", \"get\"]")).unwrap();
    let case = &run.report.cases[0];
    assert_eq!(case.status, stowbench::report::model::CaseStatus::Ok, "{:?}", case.failure);
    assert_eq!(case.verification.checked, 5, "the get phase ran and checked every put");
    for phase in &case.phases {
        let why = phase.not_at_rest.as_deref().unwrap_or_else(|| panic!("phase {} is not flagged", phase.phase));
        assert!(why.contains("settle_fails"), "{why}");
    }
    let warning = run.report.warnings.iter().find(|w| w.kind == stowbench::report::warnings::WarningKind::StoreNotAtRest);
    let warning = warning.unwrap_or_else(|| panic!("no store_not_at_rest warning: {:?}", run.report.warnings));
    assert!(warning.message.contains("before put") && warning.message.contains("settle_fails"), "{}", warning.message);
    let at_rest = run_job(&sim_job("latency = \"1ms\"", "sizes = [100]\nthreads = [1]\nobjects = 5\nphases = [\"put\", \"get\"]")).unwrap();
    assert!(at_rest.report.cases[0].phases.iter().all(|p| p.not_at_rest.is_none()));
    assert!(!at_rest.report.warnings.iter().any(|w| w.kind == stowbench::report::warnings::WarningKind::StoreNotAtRest));
}

/// A `read_recent` beyond what each worker puts runs (no memory reserved for it: 2^64 − 1 used
/// to abort the process) and is warned about: its gets read each worker's oldest put.
#[test]
fn a_read_recent_beyond_the_puts_runs_and_is_warned_about() {
    let workload = |n: &str| format!("sizes = [100]\nthreads = [2]\nobjects = 10\n[[workload.phase]]\nsequence = [\"put\", \"get\"]\nread_recent = {n}");
    let run = run_job(&sim_job("latency = \"1ms\"", &workload("18446744073709551615"))).unwrap();
    assert_eq!(run.exit_code, 0);
    let kind = stowbench::report::warnings::WarningKind::ReadRecentShort;
    let warning = run.report.warnings.iter().find(|w| w.kind == kind).unwrap_or_else(|| panic!("no warning: {:?}", run.report.warnings));
    assert!(warning.message.contains("each of its 2 worker(s) put about 5"), "{}", warning.message);
    let fits = run_job(&sim_job("latency = \"1ms\"", &workload("5"))).unwrap();
    assert!(!fits.report.warnings.iter().any(|w| w.kind == kind), "5 puts per worker reach the 5th newest");
}

/// A miss is work the storage did: its time counts in the phase's window as a success's does,
/// and its latency is reported apart. (Misses after the last success once fell outside the window:
/// 380 misses of 2 ms each after 20 hits read as a 40 ms phase.)
#[test]
fn misses_count_in_the_window_and_report_their_own_latency() {
    let workload = "sizes = [100]\nthreads = [1]\nobjects = 400\n[[workload.phase]]\nmix = { put = 1 }\ncount = 20\n\
                    [[workload.phase]]\nmix = { get = 1 }\nkey_order = \"sequential\"\ncount = 400";
    let run = run_job(&sim_job("latency = \"2ms\"", workload)).unwrap();
    assert_eq!(run.exit_code, 0);
    let get = &run.report.cases[0].phases[1];
    let op = &get.ops["get"];
    assert_eq!((op.count, op.misses), (20, 380));
    assert_eq!(get.window_total_ns, 400 * 2_000_000, "hits and misses alike");
    assert!(close(get.throughput_total.ops_per_s, 20.0 / 0.8), "successes over the whole phase: {}", get.throughput_total.ops_per_s);
    let missed = op.miss_latency.as_ref().expect("the misses' latency");
    assert_eq!(missed.samples, 380);
    assert!(close(missed.p50_ns as f64, 2e6), "{missed:?}");
    assert_eq!(op.latency.samples, 20, "the successes' latency holds no miss");
    assert!(get.idle_workers == 0);
}
