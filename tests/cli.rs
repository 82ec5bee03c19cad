//! The `stowbench` binary end to end: exit codes, messages, files written, signals.

mod common;

use std::path::Path;
use std::process::{Command, Output};

fn stowbench(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowbench")).args(args).current_dir(dir).output().expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

const SIM_JOB: &str =
    "version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"94kB\"]\nobjects = 50\nphases = [\"put\", \"get\"]\n";

#[test]
fn validate_lists_cases_or_locates_the_mistake() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.toml"), SIM_JOB).unwrap();
    let out = stowbench(dir.path(), &["validate", "ok.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("sim/w/94kB/t1/r1"));

    std::fs::write(dir.path().join("typo.toml"), SIM_JOB.replace("objects", "objcts")).unwrap();
    let out = stowbench(dir.path(), &["validate", "typo.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("typo.toml:7:1") && text(&out).contains("Did you mean \"objects\""), "{}", text(&out));

    std::fs::write(dir.path().join("size.toml"), SIM_JOB.replace("\"94kB\"", "\"-94kB\"")).unwrap();
    let out = stowbench(dir.path(), &["validate", "size.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("size.toml:6") && text(&out).contains("\"-94kB\" is negative"), "{}", text(&out));

    std::fs::write(dir.path().join("opt.toml"), SIM_JOB.replace("backend = \"sim\"", "backend = \"sim\"\nlatncy = \"1ms\"")).unwrap();
    let out = stowbench(dir.path(), &["validate", "opt.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("opt.toml:4:1") && text(&out).contains("Did you mean \"latency\""), "{}", text(&out));

    // Options that cancel out are refused, not reported as if both applied.
    let pack = SIM_JOB.replace("backend = \"sim\"", "backend = \"pack\"\nmmap = true\nread_checks = false");
    std::fs::write(dir.path().join("pack.toml"), pack).unwrap();
    let out = stowbench(dir.path(), &["validate", "pack.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("option \"mmap\"") && text(&out).contains("would do nothing"), "{}", text(&out));
}

/// Issue 14: every mistake of a job file at once, in file order, each with line and column, then
/// the count; parsing mistakes, meaning mistakes and backend option mistakes together.
#[test]
fn validate_reports_every_mistake_with_line_and_column_in_file_order() {
    let job = "version = 1
seeed = 3

[[target]]
backend = \"sqlit\"

[[target]]
name = \"f\"
backend = \"sim\"
latncy = \"1ms\"

[[workload]]
name = \"w\"
sizes = [\"4KiB\", \"2.6XB\"]
objcts = 10
threads = [0]
phases = [\"put\", \"gte\"]
";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), job).unwrap();
    for command in ["validate", "run"] {
        let out = stowbench(dir.path(), &[command, "bad.toml", "--no-progress"][..if command == "run" { 3 } else { 2 }]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let lines: Vec<&str> = stderr.lines().map(|l| l.strip_prefix("stowbench: ").unwrap_or(l)).collect();
        let mut expected = vec![
            ("bad.toml:2:1: ", "unknown key \"seeed\". Did you mean \"seed\"?"),
            ("bad.toml:5:1: ", "target \"sqlit\", field \"backend\": unknown backend \"sqlit\". Did you mean \"sqlite\"?"),
            ("bad.toml:10:1: ", "unknown option \"latncy\" for backend sim. Did you mean \"latency\"?"),
            ("bad.toml:14:18: ", "field \"sizes\": size \"2.6XB\" has an unknown unit \"XB\""),
            ("bad.toml:15:1: ", "unknown key \"objcts\". Did you mean \"objects\"?"),
            ("bad.toml:16:1: ", "workload \"w\", field \"threads\": 0 is out of range; use 1 to 1024"),
            ("bad.toml:17:1: ", "workload \"w\", field \"phases\": \"gte\" is not an operation"),
        ];
        // Backend options are checked by constructing the backend: validate does, run leaves it
        // to the runner's preflight after the loader's mistakes are fixed.
        if command == "run" {
            expected.remove(2);
        }
        assert_eq!(lines.len(), expected.len() + 1, "{command}: one line per mistake and the count:\n{stderr}");
        for (line, (at, says)) in lines.iter().zip(&expected) {
            assert!(line.starts_with(at) && line.contains(says), "{command}: expected {at}…{says}, got {line}\n{stderr}");
        }
        assert_eq!(lines[expected.len()], format!("{} mistakes in bad.toml", expected.len()), "{command}");
    }
}

#[test]
fn run_writes_a_valid_report_that_re_renders_identically() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), SIM_JOB).unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let results = dir.path().join("stowbench-results");
    let run_dir = std::fs::read_dir(&results).unwrap().next().unwrap().unwrap().path();
    let report = run_dir.join("report.json");
    common::assert_valid_report(&report);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.contains("winner") && table.contains("put · 1 thread"), "{table}");
    let again = stowbench(dir.path(), &["report", report.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), table);
    let csv = stowbench(dir.path(), &["report", report.to_str().unwrap(), "--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout).to_string();
    assert_eq!(csv.lines().count(), 1 + 2 * 2, "header + 2 sizes × 2 phases");
    assert!(csv.starts_with("run_id,case_id,phase,op,status"), "{csv}");
    // The run's directory stands for its report; the results directory above it names one.
    let by_dir = stowbench(dir.path(), &["report", run_dir.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&by_dir.stdout), table);
    let above = stowbench(dir.path(), &["report", "stowbench-results"]);
    assert_eq!(above.status.code(), Some(2), "{}", text(&above));
    assert!(
        text(&above).contains(&format!(
            "holding 1 run report(s), not one report; give one, e.g. the newest: {}",
            report.display().to_string().replace(&format!("{}/", dir.path().display()), "")
        )),
        "{}",
        text(&above)
    );
}

/// Each phase of a local backend starts with its filesystem's dirty pages written back, untimed,
/// and the report says how long that took; `settle_writeback = false` leaves them, and the table
/// says that instead.
#[test]
fn phases_start_with_the_dirty_pages_written_back_unless_the_workload_says_not_to() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"fs\"\n\
               [[workload]]\nname = \"settled\"\nsizes = [\"64KiB\"]\nobjects = 8\nphases = [\"put\", \"get\"]\n\
               [[workload]]\nname = \"as-left\"\nsizes = [\"64KiB\"]\nobjects = 8\nphases = [\"put\", \"get\"]\nsettle_writeback = false\n";
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--work-dir", ".", "--out", "res", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for case in report["cases"].as_array().unwrap() {
        let settled = case["workload"] == "settled";
        for phase in case["phases"].as_array().unwrap() {
            let w = &phase["writeback_settle"];
            if settled {
                assert_eq!(w["scope"], "filesystems", "{}: {phase}", case["case_id"]);
                let synced = w["filesystems"][0].as_str().unwrap();
                assert!(Path::new(synced).starts_with(dir.path()), "{synced} is not under the run's work directory");
                assert!(w["ns"].as_u64().is_some() && w["dirty_bytes_before"].as_u64().is_some() && w.get("error").is_none(), "{w}");
            } else {
                assert!(w.is_null(), "{}: {phase}", case["case_id"]);
            }
        }
    }
    let run_dir = std::fs::read_dir(dir.path().join("res")).unwrap().next().unwrap().unwrap().path();
    let table = text(&stowbench(dir.path(), &["report", run_dir.to_str().unwrap()]));
    assert!(table.contains("dirty pages written back before each phase, untimed (settle_writeback): "), "{table}");
    assert!(table.contains("workload as-left left the writeback as it was (settle_writeback = false)"), "{table}");
}

/// A report fixture (tests/fixtures/reports/), by name.
fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(format!("{name}.json")).display().to_string()
}

#[test]
fn compare_exits_1_when_its_gate_fails_and_0_when_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (fixture("objects-a"), fixture("objects-b"));
    let out = stowbench(dir.path(), &["compare", &a, &b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("20.0% slower  3/3      significant"), "{}", text(&out));
    // sim is 20 % slower, significantly; fs differs within its noise.
    let out = stowbench(dir.path(), &["compare", &a, &b, "--fail-if-slower", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("gate --fail-if-slower 10%: FAILED — 8 throughput figure(s)"), "{}", text(&out));
    let out = stowbench(dir.path(), &["compare", &a, &b, "--fail-if-slower", "25", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["gate"]["passed"], true);
    common::assert_matches_schema(&json, "compare.schema.json", "compare --format json");
    // fio-b ran once: its single values decide, 13.1 % slower at qd 4.
    let (fa, fb) = (fixture("fio-a"), fixture("fio-b"));
    assert_eq!(stowbench(dir.path(), &["compare", &fa, &fb, "--fail-if-slower", "20"]).status.code(), Some(0));
    // The JSON's shape, for objects and fio, with failures, unmatched cases, single values and no gate.
    for (base, candidate, gate) in [(&a, &b, &["--fail-if-slower", "10"][..]), (&fa, &fb, &["--fail-if-slower", "10"]), (&b, &a, &[])] {
        let out = stowbench(dir.path(), &[&["compare", base.as_str(), candidate.as_str(), "--format", "json"][..], gate].concat());
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        common::assert_matches_schema(&json, "compare.schema.json", &format!("compare {base} {candidate} {gate:?}"));
    }
    let out = stowbench(dir.path(), &["compare", &fa, &fb, "--fail-if-slower", "10", "--metric", "ops_per_s"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("judged on the single values"), "{}", text(&out));
    let out = stowbench(dir.path(), &["compare", &a, &b, "--format", "html"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!DOCTYPE html>"), "{}", text(&out));
    // The fixtures' sim targets differ in their latency option, which is why b is slower.
    let out = stowbench(dir.path(), &["compare", &a, &b]);
    assert!(text(&out).contains("set differently: target sim, latency: \"1ms\" in the baseline, \"1.25ms\" here"), "{}", text(&out));
    // A candidate whose get phase was held open (min_duration): named above its rows, and in the JSON.
    let mut held: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    held["plan"]["workloads"][0]["phases"][1]["stop"]["min_duration_ns"] = serde_json::json!(100_000_000u64);
    let held_path = dir.path().join("held.json");
    std::fs::write(&held_path, serde_json::to_string(&held).unwrap()).unwrap();
    let out = stowbench(dir.path(), &["compare", &a, held_path.to_str().unwrap()]);
    assert!(text(&out).contains("defined differently: workload "), "{}", text(&out));
    let out = stowbench(dir.path(), &["compare", &a, held_path.to_str().unwrap(), "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(json["plan_differences"][0]["field"], "stop", "{json}");
    common::assert_matches_schema(&json, "compare.schema.json", "compare with a phase defined differently");
}

#[test]
fn compare_refuses_bad_input_with_exit_2_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("objects-a");
    let mut report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    report["schema_version"] = 99.into();
    std::fs::write(dir.path().join("future.json"), report.to_string()).unwrap();
    std::fs::write(dir.path().join("other.json"), "{\"schema\": \"stowbench-fio-results/1\"}").unwrap();
    std::fs::write(dir.path().join("broken.json"), "{ not json").unwrap();
    std::fs::write(dir.path().join("job.toml"), "version = 1\n[[target]]\nbackend = \"fs\"\n").unwrap();
    let fio = fixture("fio-a");
    let cases: [(&[&str], &str); 9] = [
        (&["compare", &a, "missing.json"], "cannot read report missing.json"),
        (&["compare", &a, "broken.json"], "broken.json is not JSON"),
        (&["compare", &a, "job.toml"], "job.toml is a job file, not a report: run it with `stowbench run job.toml`"),
        (&["report", "job.toml"], "job.toml is a job file, not a report"),
        (&["compare", &a, "future.json"], "future.json has report schema_version 99; this stowbench reads versions 1 to 2"),
        (&["compare", &a, "other.json"], "other.json has no schema_version: it is not a stowbench report"),
        (&["compare", &a, &fio], "shares no case with the baseline"),
        (&["compare", &a, &a, "--metric", "p99_ms"], "Did you mean \"p99_ns\""),
        (&["compare", &a], "2 values required by '<REPORT> <REPORT>...'"),
    ];
    for (args, message) in cases {
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(message), "{args:?}: expected \"{message}\" in {}", text(&out));
    }
}

#[test]
fn cleanup_removes_only_marked_directories() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("precious");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("data.txt"), "keep").unwrap();
    let out = stowbench(dir.path(), &["cleanup", "precious"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(foreign.join("data.txt").exists());

    let ours = dir.path().join("stowbench-old-run");
    stowbench::backend::Namespace::create(&ours, "old", "old").unwrap();
    std::fs::write(ours.join("leftover"), "x").unwrap();
    let also_ours = dir.path().join("stowbench-older-run");
    stowbench::backend::Namespace::create(&also_ours, "older", "older").unwrap();
    let unmarked = dir.path().join("stowbench-not-ours");
    std::fs::create_dir(&unmarked).unwrap();
    // A dry run lists exactly what the real cleanup then removes, and touches nothing.
    let dry = stowbench(dir.path(), &["cleanup", ".", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(ours.exists() && also_ours.exists(), "a dry run removes nothing");
    let out = stowbench(dir.path(), &["cleanup", "."]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let listed = String::from_utf8_lossy(&dry.stdout).replace("would remove ", "");
    let removed = String::from_utf8_lossy(&out.stdout).replace("removed ", "");
    assert_eq!(listed, removed, "the dry run's list is the real cleanup's");
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(!ours.exists() && !also_ours.exists() && unmarked.exists() && foreign.join("data.txt").exists());
}

/// `--targets "a, b"` as typed in a shell names a and b; an empty name is refused with an example.
#[test]
fn targets_are_trimmed_and_an_empty_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let job = SIM_JOB.replace("[[workload]]", "[[target]]\nbackend = \"null\"\n[[workload]]");
    std::fs::write(dir.path().join("two.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "two.toml", "--targets", "sim, null", "--out", "out", "--no-progress", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["cases"].as_array().unwrap().len(), 4, "both targets at both sizes");
    let out = stowbench(dir.path(), &["run", "two.toml", "--targets", "sim,", "--out", "out", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--targets: an empty name") && text(&out).contains("--targets sim,null"), "{}", text(&out));
}

/// A link named like a run's directory is not followed (removing through it emptied a kept run
/// outside DIR), and a directory a live run holds is kept, not pulled from under it.
#[test]
fn cleanup_never_deletes_through_a_link_nor_under_a_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("kept");
    std::fs::create_dir(&elsewhere).unwrap();
    let run = elsewhere.join("stowbench-kept-run");
    stowbench::backend::Namespace::create(&run, "kept", "kept").unwrap();
    std::fs::write(run.join("data"), "x").unwrap();
    let parent = dir.path().join("results");
    std::fs::create_dir(&parent).unwrap();
    std::os::unix::fs::symlink(&run, parent.join("stowbench-kept-run")).unwrap();
    for args in [&["cleanup", "results"][..], &["cleanup", "results", "--dry-run"], &["cleanup", "results/stowbench-kept-run"]] {
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(run.join("data").exists(), "{args:?} deleted through the link");
    }
    assert!(text(&stowbench(dir.path(), &["cleanup", "results/stowbench-kept-run"])).contains("symbolic link"));

    let live = dir.path().join("stowbench-live-run");
    let held = stowbench::backend::Namespace::create(&live, "live", "live").unwrap();
    std::fs::write(live.join("data"), "x").unwrap();
    for args in [&["cleanup", "."][..], &["cleanup", "stowbench-live-run"], &["cleanup", "stowbench-live-run", "--dry-run"]] {
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("a stowbench run is still using it"), "{}", text(&out));
        assert!(live.join("data").exists(), "{args:?} removed a live run's data");
    }
    drop(held);
    let out = stowbench(dir.path(), &["cleanup", "stowbench-live-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!live.exists());
}

#[test]
fn backends_lists_every_backend_with_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let out = stowbench(dir.path(), &["backends"]);
    let listing = text(&out);
    for kind in stowbench::backend::registry() {
        assert!(listing.contains(kind.name), "{listing}");
        for o in kind.options {
            assert!(listing.contains(o.name), "{} option {} missing", kind.name, o.name);
        }
    }
    // Every option's default starts in one column, however long the longest option name.
    let columns: std::collections::BTreeSet<usize> =
        listing.lines().filter(|l| l.starts_with("    ") && !l.trim_start().starts_with("server:")).filter_map(|l| l.find(" default ")).collect();
    assert_eq!(columns.len(), 1, "defaults start in columns {columns:?}:\n{listing}");
}

#[test]
fn backends_with_names_lists_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let listing = text(&stowbench(dir.path(), &["backends", "sim", "pack"]));
    let headers: Vec<&str> = listing.lines().filter(|l| !l.starts_with(' ')).map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(headers, ["sim [test tool]", "pack"], "{listing}");
    let refused = stowbench(dir.path(), &["backends", "sqlit"]);
    assert!(!refused.status.success() && text(&refused).contains("sqlite"), "{}", text(&refused));
}

/// Each backend's page carries its options table exactly as the declarations generate it (the
/// defaults are written once, in the code), and `--markdown` prints that table.
#[test]
fn every_backend_page_carries_its_generated_options_table() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/backends");
    let dir = tempfile::tempdir().unwrap();
    for kind in stowbench::backend::registry() {
        let page = docs.join(format!("{}.md", kind.name));
        if kind.is_test_tool && !page.exists() {
            continue;
        }
        let text_of_page = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}; every backend has a page", page.display()));
        let table = stowbench::cli::options_markdown(kind);
        assert!(
            text_of_page.contains(&table),
            "{} does not carry the generated options table; replace it with the output of `stowbench backends --markdown {}`",
            page.display(),
            kind.name
        );
        let printed = stowbench(dir.path(), &["backends", "--markdown", kind.name]);
        assert_eq!(text(&printed), table);
    }
}

#[test]
fn sigint_exits_130_and_keeps_finished_cases() {
    // SIGTERM (timeout, systemd, docker stop, CI cancellation) and SIGHUP stop a run as Ctrl-C does.
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let job = "version = 1\n[[target]]\nbackend = \"sim\"\nclock = \"real\"\nlatency = \"20ms\"\n[[workload]]\nname = \"w\"\nsizes = [10]\nobjects = 10\nrepeats = 50\nphases = [\"put\"]\n";
        std::fs::write(dir.path().join("slow.toml"), job).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(["run", "slow.toml", "--out", "res", "--work-dir", "."])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        common::wait_for_finished_cases(&dir.path().join("res"), 1);
        // Twice back to back, as `timeout` sends it (to its child, then to its process group):
        // one request, which ends the run as one signal does.
        for _ in 0..2 {
            // SAFETY: sending a signal to our own child process.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(130), "signal {signal}: {}", text(&out));
        assert!(!text(&out).contains("interrupted twice"), "signal {signal}: {}", text(&out));
        let run_dir = std::fs::read_dir(dir.path().join("res")).unwrap().next().unwrap().unwrap().path();
        let report = common::assert_valid_report(&run_dir.join("report.json"));
        assert_eq!(report["status"], "interrupted");
        let kept = report["cases"].as_array().unwrap().len();
        assert!((1..50).contains(&kept), "{kept}");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-")).count();
        assert_eq!(leftovers, 0, "signal {signal}: the run's data directory is removed after an interrupt");
    }
}

/// A second Ctrl-C exits at once, and says what it left behind and how to remove it.
#[test]
fn a_second_ctrl_c_names_the_data_it_leaves_and_the_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    // The first put stalls for a minute, so the first Ctrl-C cannot end the run before the second.
    let child = start_a_run_whose_first_put_stalls(dir.path());
    let started = std::time::Instant::now();
    let run_dir =
        || std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with("stowbench-"));
    while !(run_dir().is_some_and(|d| d.join("case-0000").exists()) || started.elapsed() > std::time::Duration::from_secs(30)) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let run_dir = run_dir().expect("the run made its directory");
    // The first Ctrl-C must come once the stalled put is under way: before it, the run would end
    // at once with nothing to wait for.
    wait_for_the_stalled_put(child.id(), started);
    // 600 ms apart: a second signal within 250 ms of the first counts as the same one.
    for _ in 0..2 {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(600));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("interrupted twice, exiting now") && said.contains(&format!("stowbench cleanup {}", run_dir.display())), "{said}");
    assert!(run_dir.exists(), "a hard exit leaves the data, as it says");
    let cleaned = stowbench(dir.path(), &["cleanup", run_dir.to_str().unwrap()]);
    assert!(cleaned.status.success() && !run_dir.exists(), "{}", text(&cleaned));
}

/// Starts `stowbench run` in `dir` on one sim worker whose first put sleeps for a minute (output
/// piped, results in `dir/res`, data in `dir`).
fn start_a_run_whose_first_put_stalls(dir: &Path) -> std::process::Child {
    let job = "version = 1\n[[target]]\nbackend = \"sim\"\nclock = \"real\"\nstall_at = 1\nstall = \"60s\"\n[[workload]]\nname = \"w\"\nsizes = [10]\nobjects = 10\nphases = [\"put\"]\n";
    std::fs::write(dir.join("stall.toml"), job).unwrap();
    Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "stall.toml", "--out", "res", "--work-dir", ".", "--no-progress"])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the lone worker of `pid`, which runs on its main thread, sleeps in the sim's
/// 60 s stall. Seen twice 200 ms apart: the main thread's other sleeps last 50 ms at most.
fn wait_for_the_stalled_put(pid: u32, started: std::time::Instant) {
    let sleeping = || std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan")).unwrap_or_default().contains("nanosleep");
    loop {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the put never stalled");
        if sleeping() {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if sleeping() {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A lone worker runs on the main thread, and stowbench's helper threads (signals, sampler) keep
/// file tables of their own: no thread shares the worker's, so the kernel takes no reference
/// on the file of each system call, as for fio's and kvtest's single-threaded processes.
#[test]
fn a_lone_worker_shares_its_file_table_with_no_other_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_a_run_whose_first_put_stalls(dir.path());
    let pid = child.id();
    let started = std::time::Instant::now();
    let names = || -> Vec<(i32, String)> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|t| (t.file_name().to_string_lossy().parse().unwrap(), std::fs::read_to_string(t.path().join("comm")).unwrap_or_default().trim().to_string()))
            .collect()
    };
    // Helpers name themselves once they have left the table: both named means both left.
    while !["stowbench-sigs", "stowbench-sampl"].iter().all(|n| names().iter().any(|(_, name)| name == n)) {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "the helpers never started: {:?}", names());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    wait_for_the_stalled_put(pid, started);
    let threads = names();
    let mut shared = Vec::new();
    for (i, (a, name_a)) in threads.iter().enumerate() {
        for (b, name_b) in &threads[i + 1..] {
            shared.push((name_a.clone(), name_b.clone(), stowbench::threads::share_file_table(*a, *b)));
        }
    }
    // A thread outside the table must never run the Ctrl-C handler (the handler's pipe is not in
    // its table): each blocks the termination signals, which the main thread takes.
    let blocked = |tid: i32| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("SigBlk:")).map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap()).unwrap()
    };
    let termination = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].iter().fold(0u64, |bits, s| bits | 1 << (s - 1));
    let masks: Vec<(String, bool)> = threads.iter().map(|(tid, name)| (name.clone(), blocked(*tid) & termination == termination)).collect();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(threads.len(), 3, "the main thread (the worker), the signal thread and the sampler: {threads:?}");
    assert!(shared.iter().all(|(_, _, s)| *s == Some(false)), "threads that share a file table (or could not be compared): {shared:?}");
    for ((tid, _), (name, blocks)) in threads.iter().zip(&masks) {
        assert_eq!(*blocks, *tid != pid as i32, "{name}: the helpers block SIGINT, SIGTERM and SIGHUP, the main thread does not: {masks:?}");
    }
}

#[test]
fn the_default_run_compares_fs_and_sqlite_with_no_job_file() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = stowbench(dir.path(), &["run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    for needle in ["fs", "sqlite", "sqlite-file", "4KiB", "94kB", "1MiB", "2.6MB", "16MiB", "put · 4 threads", "get · 1 thread", "winner", "×"] {
        assert!(table.contains(needle), "the default table lacks {needle}:\n{table}");
    }
    let run_dir = std::fs::read_dir(dir.path().join("stowbench-results")).unwrap().next().unwrap().unwrap().path();
    let report = common::assert_valid_report(&run_dir.join("report.json"));
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3 * 5 * 2 * 3, "3 targets × 5 sizes × 2 thread counts, 3 repeats each");
    assert!(cases.iter().all(|c| c["status"] == "ok"), "every default case passes");
    // Every row of the table is in the report with its spread and a verdict on the winner.
    let headlines = report["headlines"].as_array().unwrap();
    assert_eq!(headlines.len(), 2 * 2 * 5, "put and get × 2 thread counts × 5 sizes");
    for h in headlines {
        assert!(["clear", "tie"].contains(&h["verdict"].as_str().unwrap()), "{h}");
        for f in h["figures"].as_array().unwrap() {
            assert_eq!(f["repeats"], 3, "{f}");
            assert!(f["ci95_low"].as_f64().unwrap() <= f["mean"].as_f64().unwrap() && f["mean"].as_f64() <= f["ci95_high"].as_f64(), "{f}");
        }
    }
    assert!(table.contains("95% CI of the mean"), "the table says what its spread is:\n{table}");
    // The clock behind every number is named, and a TSC's calibration held over the run.
    let clock = &report["environment"]["clock"];
    match clock["source"].as_str() {
        Some("tsc") => assert!(clock["drift_ppm"].as_f64().is_some_and(|d| d.abs() < 100.0), "{clock}"),
        Some("clock_gettime") => assert!(clock["drift_ppm"].is_null(), "{clock}"),
        _ => panic!("no clock named: {clock}"),
    }
    eprintln!("the default run took {:.1} s", started.elapsed().as_secs_f64());
}

/// The published file-server test died of a client holding every row: a 1 GiB object through fs
/// and a 900 MB one through sqlite must stream through bounded buffers in the real runner too.
#[test]
fn huge_objects_stream_through_the_runner_in_bounded_memory() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for (backend, size) in [("fs", "1GiB"), ("sqlite", "900MB")] {
        let job = format!(
            "version = 1\n[[target]]\nbackend = \"{backend}\"\n[[workload]]\nname = \"huge\"\nsizes = [\"{size}\"]\nobjects = 1\nphases = [\"put\", \"get\"]\n"
        );
        std::fs::write(dir.path().join("huge.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["run", "huge.toml", "--work-dir", ".", "--no-progress", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let case = &report["cases"][0];
        let start = case["resources"]["client_rss_start_bytes"].as_u64().unwrap();
        let peak = case["resources"]["client_rss_peak_bytes"].as_u64().unwrap();
        let growth_mib = peak.saturating_sub(start) as f64 / (1 << 20) as f64;
        eprintln!("{backend} {size}: peak RSS {growth_mib:.1} MiB above the start of the case");
        assert!(growth_mib < 64.0, "{backend} {size}: peak RSS grew by {growth_mib:.1} MiB");
        assert_eq!(case["verification"]["checked"], 1);
        assert_eq!(case["disk"]["logical_bytes"], stowbench::units::ByteSize::parse(size).unwrap().0);
    }
}

/// fio cases and blob cases land in one report, with fio's version and the exact job file; each
/// fio case starts with the dirty pages written back unless its sweep says not to.
#[test]
fn fio_sweeps_in_a_job_file_land_in_the_same_report() {
    if std::process::Command::new("fio").arg("--version").output().is_err() {
        assert!(!common::in_ci(), "fio is missing in CI: scripts/services.sh install provides it");
        eprintln!("SKIPPED: fio is not installed");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let job = format!(
        "{SIM_JOB}[[fio]]\nname = \"tiny\"\ntarget = \"{0}\"\nrw = [\"randread\"]\nbs = [\"4KiB\"]\niodepth = [1]\nnumjobs = [1]\nsize = [\"8MiB\"]\nruntime = \"500ms\"\nramp_time = \"0s\"\nioengine = \"psync\"\n\
         [[fio]]\nname = \"unsettled\"\ntarget = \"{0}\"\nrw = [\"write\"]\nbs = [\"4KiB\"]\nsize = [\"1MiB\"]\nruntime = \"300ms\"\nramp_time = \"0s\"\nioengine = \"psync\"\ndirect = false\nsettle_writeback = false\n",
        dir.path().display()
    );
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let run_dir = std::fs::read_dir(dir.path().join("stowbench-results")).unwrap().next().unwrap().unwrap().path();
    let report = common::assert_valid_report(&run_dir.join("report.json"));
    assert_eq!(report["cases"].as_array().unwrap().len(), 2);
    let fio = &report["fio_cases"][0];
    assert!(fio["fio_version"].as_str().unwrap().starts_with("fio-"));
    assert!(fio["job_file"].as_str().unwrap().contains("bs=4096"), "plain integer byte counts: {}", fio["job_file"]);
    assert!(fio["iops"].as_f64().unwrap() > 0.0);
    let settled = &fio["writeback_settle"];
    assert_eq!(settled["scope"], "filesystems", "{fio}");
    let synced = settled["filesystems"][0].as_str().unwrap();
    assert!(synced.starts_with(&dir.path().display().to_string()) && fio["job_file"].as_str().unwrap().contains(synced), "{synced}: {fio}");
    assert!(settled["error"].is_null(), "{settled}");
    assert!(report["fio_cases"][1]["writeback_settle"].is_null(), "settle_writeback = false: {}", report["fio_cases"][1]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fio cases (fio-"));
    assert!(stdout.contains("dirty pages written back before each case, untimed (settle_writeback)"), "{stdout}");
    assert!(stdout.contains("sweep unsettled left the writeback as it was (settle_writeback = false)"), "{stdout}");
}

/// `stowbench fio` runs through the run's preflight: a refused device is bad input (exit 2)
/// before any case runs.
#[test]
fn fio_refuses_a_device_that_is_not_one_before_running() {
    if std::process::Command::new("fio").arg("--version").output().is_err() {
        assert!(!common::in_ci(), "fio is missing in CI: scripts/services.sh install provides it");
        eprintln!("SKIPPED: fio is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = stowbench(dir.path(), &["fio", "--device", "/dev/null", "--confirm-device", "/dev/null", "--work-dir", ".", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a block device"), "{}", text(&out));
    // A dry run refuses it too (it printed the job files as if the device were one).
    let out = stowbench(dir.path(), &["fio", "--device", "/dev/null", "--confirm-device", "/dev/null", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a block device") && out.stdout.is_empty(), "{}", text(&out));
}

#[test]
fn every_shipped_recipe_validates() {
    let dir = tempfile::tempdir().unwrap();
    let recipes = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let mut seen = 0;
    for entry in std::fs::read_dir(&recipes).unwrap().flatten() {
        let out = stowbench(dir.path(), &["validate", entry.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}: {}", entry.path().display(), text(&out));
        seen += 1;
    }
    assert!(seen >= 4);
}

/// Ctrl-C during `stowbench fio` on a filesystem made for the run: exit 130, and the mount, the
/// loop device and the marked directory are all gone.
#[test]
fn sigint_during_fio_on_a_made_filesystem_leaves_nothing_mounted() {
    let root = stowbench::host::is_root();
    let fio = std::process::Command::new("fio").arg("--version").output().is_ok();
    if !(root && fio) {
        assert!(!common::in_ci(), "CI runs as root with fio installed (scripts/services.sh install)");
        eprintln!("SKIPPED: needs root and fio");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let work = dir.path().to_str().unwrap().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["fio", "--fs", "ext4", "--fs-size", "128MiB", "--size", "32MiB", "--runtime", "60s", "--ramp-time", "0s", "--work-dir", &work])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mounted = || std::fs::read_to_string("/proc/mounts").unwrap().lines().any(|l| l.contains(&work));
    let started = std::time::Instant::now();
    while !mounted() && started.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(mounted(), "the ext4 filesystem was mounted under the work dir");
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(!mounted(), "nothing stays mounted");
    let loops = Command::new("losetup").args(["--list", "--noheadings", "--output", "BACK-FILE"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&loops.stdout).contains(&work), "no loop device stays attached: {}", text(&out));
    let leftovers = std::fs::read_dir(dir.path()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-fio")).count();
    assert_eq!(leftovers, 0, "the marked target directory is removed");
}

#[test]
fn recipes_are_listed_shown_and_run_at_a_tiny_scale_with_unconfigured_servers_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let out = stowbench(dir.path(), &["recipe", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for name in ["quick", "e1-filestream", "e2-container-growth", "e3-fio-filesystems", "e4-data-files", "e5-file-server"] {
        assert!(text(&out).contains(name), "{name} missing from the list: {}", text(&out));
    }
    let shown = stowbench(dir.path(), &["recipe", "show", "e1-filestream"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("read_recent = 5"), "{}", text(&shown));
    let typo = stowbench(dir.path(), &["recipe", "show", "e1-filestraem"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(text(&typo).contains("Did you mean \"e1-filestream\""), "{}", text(&typo));

    // No server configured: the postgres and mariadb targets are skipped, each with its fix.
    let without_servers = |extra: &[&str]| {
        let args = ["recipe", "run", "e1-filestream", "--scale", "0.01", "--no-progress", "--format", "json"];
        let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
        command.args(args).args(extra).current_dir(dir.path()).env_remove("STOWBENCH_PG_URI").env_remove("STOWBENCH_MARIADB_URI");
        command.output().unwrap()
    };
    let out = without_servers(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["recipe"]["name"], "e1-filestream");
    assert_eq!(report["recipe"]["scale"], 0.01);
    let skipped: Vec<&str> = report["recipe"]["skipped_targets"].as_array().unwrap().iter().map(|s| s["target"].as_str().unwrap()).collect();
    assert_eq!(skipped, ["postgres-bytea", "postgres-lo", "postgres-file", "mariadb", "mariadb-file"]);
    assert!(text(&out).contains("STOWBENCH_PG_URI is not set"), "{}", text(&out));
    // E1's shape: every case is a put-then-read sequence on sqlite or sqlite-file, 94 kB scaled to 940 B.
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2 * (2 + 1 + 8), "2 targets × (2 published sizes + 54 MB + 8 sweep sizes)");
    assert!(cases.iter().all(|c| c["status"] == "ok" && c["phases"][0]["phase"] == "sequence put-get"));
    assert!(cases.iter().any(|c| c["size_label"] == "940B"), "94 kB at scale 0.01");
    common::assert_valid_report(Path::new(&find_report(dir.path())));
    let table = stowbench(dir.path(), &["report", &find_report(dir.path())]);
    let table = text(&table);
    assert!(table.contains("recipe e1-filestream at scale 0.01") && table.contains("mean time per operation"), "{table}");
    assert!(table.contains("skipped target postgres-lo"), "{table}");

    // A skipped target asked for by name is an error that says why.
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["recipe", "run", "e1-filestream", "--scale", "0.01", "--targets", "mariadb"])
        .current_dir(dir.path())
        .env_remove("STOWBENCH_MARIADB_URI")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("STOWBENCH_MARIADB_URI is not set"), "{}", text(&out));
    // A name the recipe lacks is checked against every target of it, the skipped ones included.
    let out = without_servers(&["--targets", "mariadb-fil"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(
            "recipe e1-filestream has no target named \"mariadb-fil\". Did you mean \"mariadb-file\"? Its targets: sqlite, sqlite-file; \
             without their servers: postgres-bytea, postgres-lo, postgres-file, mariadb, mariadb-file"
        ),
        "{}",
        text(&out)
    );

    // Targets the user left out with --targets were not skipped for want of a server.
    let out = without_servers(&["--targets", "sqlite"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["recipe"]["skipped_targets"].as_array().is_none_or(|s| s.is_empty()), "{}", report["recipe"]);
    assert!(!text(&out).contains("skipping target"), "{}", text(&out));
}

/// The newest report.json under DIR/stowbench-results.
fn find_report(dir: &Path) -> String {
    let mut runs: Vec<_> = std::fs::read_dir(dir.join("stowbench-results")).unwrap().flatten().map(|e| e.path()).collect();
    runs.sort();
    runs.last().unwrap().join("report.json").display().to_string()
}

/// `stowbench … | head`: a reader that has gone ends the output quietly with status 141, as for
/// other Unix tools, never a panic message.
#[test]
fn a_closed_stdout_ends_quietly_with_status_141() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // every write now fails with EPIPE, however fast the process is
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench")).arg("backends").stdout(writer).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}

/// Each exit code means one thing (src/error.rs): 2 the input is wrong, 3 the environment failed
/// valid input, 1 the run failed. Each is proven here through the binary.
#[test]
fn a_refused_capability_is_bad_input_naming_target_workload_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "backend = \"sim\"\ndelete = false",
            "phases = [\"put\", \"delete\"]",
            "caps.toml:2: target \"sim\" (backend sim) cannot delete, and workload \"w\" phase \"delete\" deletes",
        ),
        // At the op_timeout line, the one to remove.
        ("backend = \"fs\"", "phases = [\"put\", \"get\"]\nop_timeout = \"2s\"", "caps.toml:9:1: target \"fs\" (backend fs) cannot honour op_timeout"),
    ];
    for (target, workload, expected) in cases {
        let job = format!("version = 1\n[[target]]\n{target}\n[[workload]]\nname = \"w\"\nsizes = [100]\nobjects = 5\n{workload}\n");
        std::fs::write(dir.path().join("caps.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["run", "caps.toml", "--no-progress", "--work-dir", "."]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(expected) && text(&out).contains("Nothing was written"), "{}", text(&out));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["caps.toml"], "no report, no run directory");
        let out = stowbench(dir.path(), &["validate", "caps.toml"]);
        assert_eq!(out.status.code(), Some(2), "validate refuses what the run would: {}", text(&out));
        assert!(text(&out).contains(expected) && text(&out).contains("1 mistake in caps.toml"), "{}", text(&out));
    }
}

/// A server that does not answer is the environment (3), not a mistake in the job (2): the same
/// target with a URI that is not a URI is bad input, and so is one where something answers and
/// refuses (here a listener that hangs up at once, as a server refusing a login would): each
/// message is located at the target's `uri` line.
#[test]
fn an_unreachable_server_exits_3_and_a_malformed_or_refused_uri_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || listener.incoming().for_each(drop));
    let refused = format!("postgres://stowbench@127.0.0.1:{port}/none");
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    for (uri, code, expected) in [
        ("postgres://stowbench@127.0.0.1:1/none", 3, "(nothing answers at 127.0.0.1:1; start the server"),
        ("not a uri", 2, "postgres"),
        (&refused, 2, "cannot connect"),
    ] {
        let job = format!(
            "version = 1\n[[target]]\nbackend = \"postgres\"\nuri = \"{uri}\"\nconnect_timeout = \"2s\"\n[[workload]]\nname = \"w\"\nsizes = [100]\nobjects = 5\nphases = [\"put\"]\n"
        );
        std::fs::write(dir.path().join("server.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["run", "server.toml", "--no-progress", "--work-dir", "."]);
        assert_eq!(out.status.code(), Some(code), "{uri}: {}", text(&out));
        assert!(text(&out).contains(expected) && text(&out).contains("server.toml:4:1: target \"postgres\""), "{uri}: {}", text(&out));
        assert!(!text(&out).contains("nothing answers") || code == 3, "{uri}: {}", text(&out));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, ["server.toml"], "{uri}: no report, no run directory");
        let out = stowbench(dir.path(), &["validate", "server.toml"]);
        assert_eq!(out.status.code(), Some(code), "validate tells the same apart: {uri}: {}", text(&out));
        let tail = if code == 3 { "no mistakes in server.toml, but 1 target's server does not answer" } else { "1 mistake in server.toml" };
        assert!(text(&out).trim_end().ends_with(tail), "{uri}: {}", text(&out));
    }
}

/// A report that cannot be written is the environment (3). Before the first case: nothing runs.
/// Mid-run (its directory replaced by a file after the first case, as a disk or a mount going
/// away would): no further case starts, what finished is printed, the run's data is removed.
#[test]
fn a_report_that_cannot_be_written_exits_3_before_or_during_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), SIM_JOB).unwrap();
    std::fs::write(dir.path().join("not-a-dir"), "").unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--out", "not-a-dir", "--work-dir", "."]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("cannot create the report directory not-a-dir/"), "{}", text(&out));
    assert!(!std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e.file_name().to_string_lossy().starts_with("stowbench-")), "no run directory left");

    // The get phase's `before` command of the second case (the first finished and was written)
    // turns the report's directory into a file.
    let out_dir = dir.path().join("out");
    let breaker = format!(
        "if [ -e {marker} ]; then d=$(ls -d {out}/*); rm -rf \"$d\" && touch \"$d\"; else touch {marker}; fi",
        marker = dir.path().join("first-case-done").display(),
        out = out_dir.display()
    );
    let job = format!(
        "version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [100, 200, 300]\nobjects = 5\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\nbefore = [\"sh\", \"-c\", {breaker:?}]\n"
    );
    std::fs::write(dir.path().join("breaks.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "breaks.toml", "--no-progress", "--out", "out", "--work-dir", ".", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the report could not be written") && stderr.contains("the only copy of the 2 finished case(s)"), "{stderr}");
    assert!(stderr.contains("Not a directory"), "the OS error is named: {stderr}");
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.contains("sim/w/100B/t1/r1") && csv.contains("sim/w/200B/t1/r1") && !csv.contains("sim/w/300B"), "{csv}");
    assert!(!std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| e.file_name().to_string_lossy().starts_with("stowbench-")), "the run's data is removed");
}

/// A target's `path` that does not exist is refused, located, before anything is written: it
/// was made (with every missing parent) and left behind after the run. `validate` checks a
/// multi-host `{rank}` path as rank 0 uses it.
#[test]
fn a_missing_path_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let job = |path: &str| {
        format!("version = 1\n[[target]]\nbackend = \"fs\"\npath = {path:?}\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\n")
    };
    std::fs::write(dir.path().join("typo.toml"), job(&dir.path().join("no/such/dir").display().to_string())).unwrap();
    for command in ["validate", "run"] {
        let args: &[&str] = if command == "run" { &["run", "typo.toml", "--no-progress", "--work-dir", "."] } else { &["validate", "typo.toml"] };
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", text(&out));
        assert!(
            text(&out).contains("typo.toml:4:1: target \"fs\": option \"path\": ") && text(&out).contains("is not an existing directory"),
            "{}",
            text(&out)
        );
        assert!(!dir.path().join("no").exists(), "{command} made nothing");
    }
    std::fs::create_dir(dir.path().join("d0")).unwrap();
    std::fs::write(dir.path().join("ranks.toml"), job(&dir.path().join("d{rank}").display().to_string())).unwrap();
    let out = stowbench(dir.path(), &["validate", "ranks.toml"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_dir(dir.path().join("d0")).unwrap().count(), 0, "validate left nothing in the path");
}

/// Rows that move no bytes (head, delete) are ranked by operations a second, and a phase that
/// found nothing (every get a miss) says so instead of a rate and a latency of zero.
#[test]
fn head_and_delete_rows_rank_by_operations_and_a_phase_of_misses_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let job =
        "version = 1\n[[target]]\nname = \"quick\"\nbackend = \"sim\"\nlatency = \"1ms\"\n[[target]]\nname = \"slow\"\nbackend = \"sim\"\nlatency = \"4ms\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 20\nphases = [\"put\", \"head\", \"delete\", \"get\"]\n";
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--work-dir", "."]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |phase: &str| {
        let at = table.find(&format!("\n{phase} · ")).unwrap_or_else(|| panic!("no {phase} group:\n{table}"));
        table[at..].lines().nth(3).unwrap().to_string()
    };
    for phase in ["head", "delete"] {
        let line = row(phase);
        assert!(line.contains("1000 op/s") && line.contains("250 op/s") && !line.contains("B/s"), "{phase}: {line}");
        assert!(line.contains("quick ×4.00 over slow"), "{phase}: {line}");
    }
    let get = row("get");
    assert!(get.matches("no successful operation (20 misses)").count() == 2 && !get.contains("0.00 ns"), "{get}");
    assert!(get.trim_end().ends_with('-'), "no winner among targets that read nothing: {get}");
}

/// `stowbench fio --target DIR` with no such directory is bad input (exit 2), in a dry run as in
/// a run, and the run writes no report.
#[test]
fn fio_refuses_a_target_directory_that_does_not_exist_before_running() {
    let dir = tempfile::tempdir().unwrap();
    for dry in [true, false] {
        let mut args = vec!["fio", "--target", "no/such/dir", "--size", "1MiB", "--runtime", "200ms", "--ramp-time", "0s", "--no-progress", "--out", "res"];
        if dry {
            args.push("--dry-run");
        }
        let out = stowbench(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "dry run {dry}: {}", text(&out));
        assert!(text(&out).contains("no/such/dir is not an existing directory"), "{}", text(&out));
        assert!(!dir.path().join("res").exists() && !dir.path().join("no").exists(), "nothing was made");
        assert!(!dir.path().join("stowbench-results").exists(), "not even the default --work-dir");
    }
    // In a job file, validate says so with the line and field; a file is not a directory either.
    std::fs::write(dir.path().join("afile"), b"").unwrap();
    for (target, said) in [("no/such/dir", "is not an existing directory"), ("afile", "afile is not a directory")] {
        let job = format!("version = 1\n[[fio]]\nname = \"x\"\ntarget = \"{target}\"\nrw = [\"randread\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"\n");
        std::fs::write(dir.path().join("fio.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["validate", "fio.toml"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("fio.toml:4:1: fio sweep \"x\", field \"target\": ") && text(&out).contains(said), "{}", text(&out));
    }
}

/// Flags are checked before the sweep runs (a chart thread count no case has, a --csv in a
/// missing directory, a raw --fio-option fio refuses), and a directory target leaves nothing in the working
/// directory: the default --work-dir is made only for made filesystems.
#[test]
fn fio_checks_its_output_flags_first_and_leaves_no_work_dir_for_a_directory_target() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("t")).unwrap();
    let base = ["fio", "--target", "t", "--size", "1MiB", "--runtime", "200ms", "--ramp-time", "0s", "--no-progress", "--out", "res"];
    for (extra, says) in [
        (&["--thread-count-for-charts", "7", "--numjobs", "1,2"][..], "--thread-count-for-charts 7: no case runs 7 thread(s); the sweep's --numjobs are 1, 2"),
        (&["--csv", "no/such/x.csv"][..], "--csv no/such/x.csv: no/such is not an existing directory"),
        (&["--fio-option", "bogus=1", "--iodepth", "1,2"][..], "Bad option <bogus=1>"),
        // A negative number reaches the sweep's own check, not clap's "unexpected argument '-1'".
        (&["--iodepth", "-1"][..], "field `--iodepth`: \"-1\" is not a count; use whole numbers of 1 or more"),
        (&["--repeat", "-1"][..], "-1 is not in 1..=100"),
        (&["--timeout", "0s", "--dry-run"][..], "--timeout: 0 s leaves no time to run"),
        // Negative durations and empty list items are our own checks' too.
        (&["--fs-size", "-1GiB", "--fs", "tmpfs"][..], "field `--fs-size`: size \"-1GiB\" is negative"),
        (&["--bs", "4KiB,,8KiB"][..], "field `--bs`: \"4KiB,,8KiB\" has an empty item"),
        (&["--csv", "t"][..], "--csv t: is a directory; give a file name"),
    ] {
        let out = stowbench(dir.path(), &[&base[..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{}", text(&out));
        assert_eq!(text(&out).matches(says).count(), 1, "said once, not once per case: {}", text(&out));
        assert!(!dir.path().join("res").exists(), "refused before the sweep ran");
    }
    let out = stowbench(dir.path(), &base);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!dir.path().join("stowbench-results").exists(), "no default work directory for a directory target");
    assert_eq!(std::fs::read_dir(dir.path().join("t")).unwrap().count(), 0, "the target is left as it was");
}

/// Every backend option mistake of a target is listed at once, each at its own line, by
/// `validate` and by `run` alike (a backend used to stop at its first).
#[test]
fn every_backend_option_mistake_is_listed_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"sqlite\"\nsynchronous = \"fulll\"\njournal_mode = \"memory\"\npage_size = 3000\n\
               files = 0\nsynchronus = 1\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 2\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("opts.toml"), job).unwrap();
    for args in [&["validate", "opts.toml"][..], &["run", "opts.toml", "--no-progress", "--work-dir", "."]] {
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = text(&out);
        let lines: Vec<usize> =
            said.lines().filter_map(|l| l.trim_start_matches("stowbench: ").strip_prefix("opts.toml:")?.split(':').next()?.parse().ok()).collect();
        assert_eq!(lines, [4, 5, 6, 7, 8], "{args:?}: {said}");
        assert!(said.contains("5 mistakes in opts.toml") && said.contains("unknown option \"synchronus\"") && said.contains("page_size"), "{said}");
    }
}

/// `cleanup` given a file or a missing path is bad input (exit 2), named as such.
#[test]
fn cleanup_of_a_file_or_a_missing_path_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), "version = 1\n").unwrap();
    for (path, says) in [("job.toml", "is not a directory"), ("gone", "does not exist")] {
        let out = stowbench(dir.path(), &["cleanup", path]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(&format!("{path} {says}")), "{}", text(&out));
    }
    assert!(dir.path().join("job.toml").exists());
}

/// `run`'s values that start with '-' reach stowbench's own checks, in its words, not clap's
/// "unexpected argument" or "invalid digit found in string"; nothing runs.
#[test]
fn run_says_what_is_wrong_with_a_negative_timeout_a_seed_or_a_clock() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["--timeout", "-5s"][..], "--timeout: duration \"-5s\" is negative"),
        (&["--timeout", "--no-progress"][..], "--timeout: duration \"--no-progress\" does not start with a number"),
        (&["--seed", "-1"][..], "\"-1\" is negative; a seed is a whole number from 0 to 18446744073709551615"),
        (&["--seed", "x1"][..], "\"x1\" is not a whole number"),
        (&["--clock", "cpu"][..], "\"cpu\" is not a clock; use auto, tsc or monotonic"),
    ] {
        let out = stowbench(dir.path(), &[&["run", "--out", "res"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
        assert!(!dir.path().join("res").exists(), "{args:?}: nothing ran");
    }
}

/// `backends --uri`: a URI no listed backend takes is refused (exit 2) without being echoed,
/// and a server that does not answer gives exit 1, for scripts that check before a run.
#[test]
fn backends_uri_refuses_what_it_cannot_check_and_fails_when_the_server_is_down() {
    let dir = tempfile::tempdir().unwrap();
    for uri in ["host=127.0.0.1 port=1 user=bob password=S3cretPW dbname=db", "bob:S3cretPW@host", "ftp://bob:S3cretPW@x/"] {
        let out = stowbench(dir.path(), &["backends", "postgres", "--uri", uri]);
        assert_eq!(out.status.code(), Some(2), "{uri}: {}", text(&out));
        assert!(text(&out).contains("no backend listed here takes that URI") && !text(&out).contains("S3cretPW"), "{}", text(&out));
    }
    let out = stowbench(dir.path(), &["backends", "postgres", "mariadb", "--uri", "postgres://bob:S3cretPW@127.0.0.1:1/db"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("server: UNREACHABLE at postgres://bob:<redacted>@127.0.0.1:1/db (--uri)"), "{}", text(&out));
    assert!(text(&out).contains("server: not checked: --uri is not a mariadb URI") && !text(&out).contains("S3cretPW"), "{}", text(&out));
    // A URI whose host or port cannot be read is bad input (2), not a server that is down (1).
    for uri in ["postgres://bob:S3cretPW@[::1/db", "postgres://bob:S3cretPW@127.0.0.1:99999/db"] {
        let out = stowbench(dir.path(), &["backends", "postgres", "--uri", uri]);
        assert_eq!(out.status.code(), Some(2), "{uri}: {}", text(&out));
        assert!(text(&out).contains("server: INVALID URI postgres://bob:<redacted>@") && !text(&out).contains("S3cretPW"), "{}", text(&out));
        assert!(text(&out).contains("give postgres://user@host:port/..."), "{}", text(&out));
    }
    // A scheme the driver here cannot use is refused as such, on the command line and in a job.
    let out = stowbench(dir.path(), &["backends", "gridfs", "--uri", "mongodb+srv://bob:S3cretPW@cluster.example.com/db"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("give one starting with mongodb://") && !text(&out).contains("S3cretPW"), "{}", text(&out));
    let job = "version = 1\n[[target]]\nbackend = \"gridfs\"\nuri = \"mongodb+srv://bob:S3cretPW@cluster.example.com/db\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("srv.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["validate", "srv.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("srv.toml:4:1: target \"gridfs\": option \"uri\": mongodb+srv:// needs DNS SRV lookups"), "{}", text(&out));
    assert!(!text(&out).contains("S3cretPW"), "{}", text(&out));
    let out = stowbench(dir.path(), &["backends", "gridfs", "--uri", "mongodb://bob:S3cretPW@/db"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("server: INVALID URI mongodb://bob:<redacted>@/db") && !text(&out).contains("S3cretPW"), "{}", text(&out));
    // A URI the driver cannot use (no host for postgres, a parameter the MySQL driver does not
    // know) is bad input before any connection: the same whether or not a server runs there.
    let unusable = [
        ("postgres", "postgres://bob:S3cretPW@/db", "it names no host; give postgres://user@HOST:5432/db"),
        ("mariadb", "mysql://bob:S3cretPW@127.0.0.1:1/db?ssl-mode=REQUIRED", "Unknown URL parameter `ssl-mode'"),
    ];
    for (backend, uri, why) in unusable {
        let out = stowbench(dir.path(), &["backends", backend, "--uri", uri]);
        assert_eq!(out.status.code(), Some(2), "{uri}: {}", text(&out));
        assert!(text(&out).contains("server: INVALID URI ") && text(&out).contains(why) && !text(&out).contains("S3cretPW"), "{}", text(&out));
        let job = format!(
            "version = 1\n[[target]]\nbackend = \"{backend}\"\nuri = \"{uri}\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n"
        );
        std::fs::write(dir.path().join("unusable.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["validate", "unusable.toml"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(&format!("unusable.toml:4:1: target \"{backend}\": option \"uri\": ")), "{}", text(&out));
        assert!(text(&out).contains("is not a usable URI") && text(&out).contains(why) && !text(&out).contains("S3cretPW"), "{}", text(&out));
    }
    // Another backend's URI is named as such, not in the driver's words.
    let job = "version = 1\n[[target]]\nbackend = \"postgres\"\nuri = \"mysql://bob:S3cretPW@127.0.0.1:1/db\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("scheme.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["validate", "scheme.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = "scheme.toml:4:1: target \"postgres\": option \"uri\": a mysql:// URI is not a postgres URI; give one starting with postgres://";
    assert!(text(&out).contains(said) && !text(&out).contains("S3cretPW"), "{}", text(&out));
    // A layout mistake shows while the server is down too: it is checked before connecting.
    let job = "version = 1\n[[target]]\nbackend = \"postgres\"\nuri = \"postgres://bob@127.0.0.1:1/db\"\npartitions = 2000\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("layout.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["validate", "layout.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("layout.toml:5:1: target \"postgres\": option \"partitions\": 2000 is too many"), "{}", text(&out));
}

/// A case that failed before some of its phases reads "failed" in each of them, in their own
/// blocks (there was a "(no phase)" block of its own, and "-" where it would have run).
#[test]
fn a_case_that_failed_early_is_failed_in_each_phase_it_would_have_run() {
    let dir = tempfile::tempdir().unwrap();
    let job = "version = 1\n[[target]]\nname = \"broken\"\nbackend = \"sim\"\npanic_at = 1\n[[target]]\nbackend = \"sim\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\", \"get\"]\n";
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--work-dir", "."]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!table.contains("(no phase)"), "{table}");
    for phase in ["put", "get"] {
        let at = table.find(&format!("\n{phase} · ")).unwrap_or_else(|| panic!("no {phase} block:\n{table}"));
        let row = table[at..].lines().nth(3).unwrap();
        assert!(row.contains("failed"), "{phase}: {row}");
    }
}

#[test]
fn a_missing_work_dir_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let job = |work_dir: &str| {
        format!("version = 1\nwork_dir = {work_dir:?}\n[[target]]\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\n")
    };
    std::fs::write(dir.path().join("typo.toml"), job(&dir.path().join("no/such/dir").display().to_string())).unwrap();
    for args in [&["validate", "typo.toml"][..], &["run", "typo.toml", "--no-progress"]] {
        let out = stowbench(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("typo.toml:2:1: work_dir: ") && text(&out).contains("is not an existing directory"), "{}", text(&out));
        assert!(!dir.path().join("no").exists(), "{args:?} made nothing");
    }
    let out = stowbench(dir.path(), &["run", "typo.toml", "--no-progress", "--work-dir", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--work-dir no/such/dir: not an existing directory"), "{}", text(&out));
    assert!(!dir.path().join("no").exists() && !dir.path().join("stowbench-results").exists(), "a refused run made nothing, not even its report");

    // A job written for several hosts runs on one as rank 0: its data goes under d0.
    std::fs::create_dir(dir.path().join("d0")).unwrap();
    std::fs::write(dir.path().join("ranks.toml"), job(&dir.path().join("d{rank}").display().to_string())).unwrap();
    let out = stowbench(dir.path(), &["validate", "ranks.toml"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = stowbench(dir.path(), &["run", "ranks.toml", "--no-progress", "--format", "json", "--keep"]);
    assert!(out.status.success(), "{}", text(&out));
    let runs: Vec<_> = std::fs::read_dir(dir.path().join("d0")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(runs.len() == 1 && runs[0].starts_with("stowbench-"), "the kept run is in d0: {runs:?}");
    assert!(!dir.path().join("d{rank}").exists());
}

/// A default build started by mpirun would run the whole job once per rank, each alone with a
/// share of the cores: it refuses and says how to build for it. A world of one is one run.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_several_ranks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), SIM_JOB).unwrap();
    let run = |size: &str| {
        Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(["run", "job.toml", "--no-progress", "--work-dir", "."])
            .env("OMPI_COMM_WORLD_SIZE", size)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let refused = run("2");
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("built without the mpi feature") && text(&refused).contains("--features mpi"), "{}", text(&refused));
    assert!(!dir.path().join("stowbench-results").exists(), "a refused run leaves no results directory");
    assert_eq!(run("1").status.code(), Some(0));
}

/// A reader that went away (`stowbench … 2>&1 | head -3`) is not stowbench's failure: what it
/// says on stderr is lost, but it never panics (exit 101), and exits as it would have.
#[test]
fn a_closed_stderr_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\n").unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["validate", "bad.toml"]).current_dir(dir.path()).stderr(writer).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
}

/// `validate` refuses what every rank of an mpirun start would: a store one process keeps,
/// shared by all ranks' keys.
#[test]
fn validate_refuses_shared_keys_on_a_store_one_process_keeps() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, code) in [("pack", 2), ("fs", 0)] {
        let job = format!("version = 1\n[mpi]\nkeys = \"shared\"\n[[target]]\nbackend = \"{backend}\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 10\nphases = [\"put\"]\n");
        std::fs::write(dir.path().join("m.toml"), job).unwrap();
        let out = stowbench(dir.path(), &["validate", "m.toml"]);
        assert_eq!(out.status.code(), Some(code), "{backend}: {}", text(&out));
        if code == 2 {
            assert!(
                text(&out).contains("backend pack cannot be shared by several processes") && text(&out).contains("keys = \"partitioned\""),
                "{}",
                text(&out)
            );
        }
    }
}

/// A relative `path` option is taken from the current directory (as fio's `directory`): a missing
/// one is named with the directory it was looked for in, and the report gives the data's place in
/// full, not relative to a directory the reader cannot know.
#[test]
fn a_relative_path_option_is_taken_from_the_current_directory_and_reported_in_full() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"fs\"\npath = \"data\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("sub/job.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["validate", "sub/job.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let cwd = dir.path().canonicalize().unwrap();
    let said = format!("\"data\" (taken from the current directory: {}) is not an existing directory", cwd.join("data").display());
    assert!(text(&out).contains(&said), "{}", text(&out));
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let out = stowbench(&cwd, &["run", "sub/job.toml", "--no-progress", "--out", "res", "--work-dir", "."]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report_dir = std::fs::read_dir(dir.path().join("res")).unwrap().next().unwrap().unwrap().path();
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    let place = report["cases"][0]["filesystem"]["path"].as_str().unwrap();
    assert!(place.starts_with(&cwd.join("data/stowbench-").display().to_string()), "{place}");
}

/// A listener that accepts connections and never answers (a wrong port, a hung server) held
/// `validate` and `backends --uri` in the driver's handshake forever. Now each gives up after
/// connect_timeout, as the machine's trouble (exit 3 for validate, 1 for backends), with no
/// secret shown — also for a password with an unescaped `/`.
#[test]
fn a_listener_that_never_answers_ends_after_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold every connection, answering nothing, for the test's lifetime.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let dir = tempfile::tempdir().unwrap();
    let job = format!(
        "version = 1\n[[target]]\nbackend = \"postgres\"\nuri = \"postgres://bob:S3cret/PW@127.0.0.1:{port}/db\"\nconnect_timeout = \"1s\"\n\
         [[target]]\nname = \"m\"\nbackend = \"mariadb\"\nuri = \"mysql://bob:S3cretPW@127.0.0.1:{port}/db\"\nconnect_timeout = \"1s\"\n\
         [[target]]\nname = \"g\"\nbackend = \"gridfs\"\nuri = \"mongodb://bob:S3cretPW@127.0.0.1:{port}/db\"\nconnect_timeout = \"1s\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n"
    );
    std::fs::write(dir.path().join("silent.toml"), job).unwrap();
    let finished = |mut child: std::process::Child| {
        // A generous bound: it used to never end.
        for _ in 0..600 {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = child.kill();
        panic!("still waiting after 60 s: {}", text(&child.wait_with_output().unwrap()));
    };
    let spawn = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(args)
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let out = finished(spawn(&["validate", "silent.toml"]));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(text(&out).matches("accepted the connection but did not answer within 1.00 s").count(), 3, "{}", text(&out));
    assert!(!text(&out).contains("S3cret"), "{}", text(&out));
    let uri = format!("postgres://bob:S3cretPW@127.0.0.1:{port}/db");
    let out = finished(spawn(&["backends", "postgres", "--uri", &uri]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("server: NOT ANSWERING at postgres://bob:<redacted>@127.0.0.1:"), "{}", text(&out));
}

/// `validate` makes its probe directory inside a target's `path` under a name of its own: a
/// directory someone else has there under the name it once always used is neither refused nor
/// touched.
#[test]
fn validate_probes_a_path_under_a_name_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("data/stowbench-validate-validate_fs");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep").unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"fs\"\npath = \"data\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 3\nphases = [\"put\"]\n";
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    for _ in 0..2 {
        let out = stowbench(dir.path(), &["validate", "job.toml"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(foreign.join("precious.txt")).unwrap(), "keep");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("data")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "validate removed its own probe directories: {left:?}");
}

/// Empty files all have one content. Uploads of it on several threads, one storing it while
/// another finds its row unfinished and stores it again, failed the catalog audit ("1 files rows
/// but the uploads wrote 2 contents") in most runs. A second write of one object under its one
/// key is not a second content. Whatever the interleaving, the audit now passes.
#[test]
fn concurrent_uploads_of_one_content_pass_the_catalog_audit() {
    let dir = tempfile::tempdir().unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"sqlite\"\n[[workload]]\nname = \"w\"\nsizes = [\"0\"]\nobjects = 8\nthreads = [4]\n\
               phases = [\"upload\", \"download\"]\n";
    std::fs::write(dir.path().join("empty.toml"), job).unwrap();
    for _ in 0..5 {
        let out = stowbench(dir.path(), &["run", "empty.toml", "--no-progress", "--work-dir", ".", "--out", "res"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
}

/// `cache = "cold"` reads from the device: the cache is emptied after the phase's warm-up (which
/// fills it again), and no cache inside the process survives — a SQLite connection's own page
/// cache, pack's mapped data files. Checked with the kernel's own count of bytes fetched from the
/// storage layer (`device_read_bytes`), not with timings. Before the fix the warm-up refilled the
/// page cache, pack's mapped pages stayed, and SQLite's connection served 1.25 MiB from its own
/// 2000 KiB cache: each fetched almost nothing.
#[test]
fn a_cold_phase_reads_from_the_device_after_its_warm_up_and_with_no_cache_in_the_process() {
    if !stowbench::host::is_root() {
        assert!(!common::in_ci(), "cache = \"cold\" needs root, and CI=true");
        eprintln!("SKIPPED: cache = \"cold\" needs root");
        return;
    }
    // Under the target directory: on the disk the repository is on, not a tmpfs /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let job = "version = 1\n\
               [[target]]\nbackend = \"fs\"\n\
               [[target]]\nbackend = \"sqlite\"\n\
               [[target]]\nname = \"pack-mmap\"\nbackend = \"pack\"\nmmap = true\n\
               [[workload]]\nname = \"w\"\nsizes = [\"256KiB\"]\nobjects = 24\ncache = \"cold\"\n\
               [[workload.phase]]\nmix = { put = 1 }\ncount = 24\n\
               [[workload.phase]]\nmix = { get = 1 }\ncount = 24\nkey_order = \"sequential\"\nwarmup_count = 24\n\
               [[workload]]\nname = \"fits-sqlite-cache\"\nsizes = [\"64KiB\"]\nobjects = 20\ncache = \"cold\"\n\
               [[workload.phase]]\nmix = { put = 1 }\ncount = 20\n\
               [[workload.phase]]\nmix = { get = 1 }\ncount = 20\nkey_order = \"sequential\"\n";
    std::fs::write(dir.path().join("cold.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "cold.toml", "--no-progress", "--work-dir", ".", "--out", "res", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for case in report["cases"].as_array().unwrap() {
        let get = &case["phases"][1];
        assert_eq!(get["cache_state"], "cold", "{get}");
        let got = get["ops"]["get"]["bytes"].as_u64().unwrap();
        let fetched = get["device_read_bytes"].as_u64().unwrap_or_else(|| panic!("{}: no device_read_bytes", case["case_id"]));
        assert!(
            fetched as f64 >= 0.9 * got as f64,
            "{}: fetched {fetched} bytes from the storage layer for {got} read (filesystem {})",
            case["case_id"],
            case["filesystem"]
        );
    }
    let warnings = report["warnings"].as_array().unwrap();
    assert!(!warnings.iter().any(|w| w["kind"] == "cold_reads_from_memory"), "{warnings:?}");
}

/// The null backend's "hundreds of GB/s" are stowbench's own ceiling, not a storage result: beside
/// a real backend it is shown but never named the winner, in the table or in the headlines.
#[test]
fn a_test_tool_is_shown_but_never_ranked_against_a_real_backend() {
    let dir = tempfile::tempdir().unwrap();
    let job = "version = 1\n[[target]]\nbackend = \"null\"\n[[target]]\nbackend = \"fs\"\n\
               [[workload]]\nname = \"w\"\nsizes = [\"64KiB\", \"1MiB\"]\nobjects = 10\nphases = [\"put\", \"get\"]\n";
    std::fs::write(dir.path().join("null.toml"), job).unwrap();
    let out = stowbench(dir.path(), &["run", "null.toml", "--no-progress", "--work-dir", ".", "--out", "res"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("  64KiB") || l.starts_with("  1MiB")).collect();
    assert_eq!(rows.len(), 4, "{table}");
    for row in rows {
        assert!(row.ends_with("fs (only storage result; null: test tool, not ranked)"), "{row}");
    }
    let report = std::fs::read_dir(dir.path().join("res")).unwrap().next().unwrap().unwrap().path().join("report.json");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    for headline in report["headlines"].as_array().unwrap() {
        assert_eq!(headline["winner"], "fs", "{headline}");
    }
}

/// `--version` (and so every report's `tool_version`) names the build: the package version and,
/// built from a git checkout as CI's is, the commit checked out (build.rs).
#[test]
fn version_names_the_commit_it_was_built_from() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let out = stowbench(Path::new(dir), &["--version"]);
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let package = format!("stowbench {}", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&package), "{line:?} does not start with {package:?}");
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(dir).output();
    match head {
        Ok(head) if head.status.success() => {
            let commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
            assert!(line.starts_with(&format!("{package} (commit {commit}")), "{line:?} does not name commit {commit}");
        }
        // A source archive: no commit to name, and none may be made up.
        _ => assert_eq!(line, package),
    }
}
