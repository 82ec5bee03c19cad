//! Multi-host runs (cargo feature `mpi`, docs/multi-host.md), on one machine:
//! `mpirun --oversubscribe -np 4 stowbench run JOB` against fs, sqlite-file and s3. The merged
//! report must be the sum of the ranks' shares (counts, bytes, errors) with percentiles from the
//! sum of their histograms, and must leave nothing behind; a rank that fails ends the case on
//! every rank, with its own error in the report.
//!
//! Needs Open MPI's `mpirun` (Debian: openmpi-bin); with CI=true a missing mpirun fails.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use stowbench::stats::wire::histogram_from_base64;

/// `mpirun`, or None (skipped loudly) when it is not installed outside CI.
fn mpirun() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("mpirun")).find(|p| p.is_file()));
    if found.is_none() {
        assert!(!common::in_ci(), "mpirun is not installed and CI=true: apt-get install openmpi-bin libopenmpi-dev (scripts/services.sh install does)");
        eprintln!("SKIPPED: mpirun is not installed (apt-get install openmpi-bin)");
    }
    found
}

/// mpirun with what a test on one machine needs: as many ranks as asked on 2 cores, and root.
fn mpirun_command(mpirun: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(mpirun);
    cmd.current_dir(dir).env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").arg("--oversubscribe");
    cmd
}

fn stowbench_run_args(job: &Path, dir: &Path) -> Vec<String> {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    [
        env!("CARGO_BIN_EXE_stowbench"),
        "run",
        job.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
        "--no-progress",
        "--work-dir",
        work.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// Writes `job` to a fresh directory and runs it as `ranks` ranks: the directory (the report and
/// the work directory are in it) and what mpirun returned.
fn run_job(mpirun: &Path, job: &str, ranks: u32) -> (tempfile::TempDir, Output) {
    run_job_in(&std::env::temp_dir(), mpirun, job, ranks)
}

/// `run_job` in a directory made under `parent`.
fn run_job_in(parent: &Path, mpirun: &Path, job: &str, ranks: u32) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir_in(parent).unwrap();
    let path = dir.path().join("job.toml");
    std::fs::write(&path, job).unwrap();
    let out = mpirun_command(mpirun, dir.path()).arg("-np").arg(ranks.to_string()).args(stowbench_run_args(&path, dir.path())).output().unwrap();
    (dir, out)
}

/// The report the run wrote (checked against the schema).
fn report(dir: &Path) -> Value {
    let out = dir.join("out");
    let run = std::fs::read_dir(&out).unwrap_or_else(|e| panic!("no report under {}: {e}", out.display())).flatten().next().expect("one run directory");
    common::assert_valid_report(&run.path().join("report.json"))
}

fn text(o: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// What the run left in its work directory (nothing, once it has cleaned up).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("work")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
}

/// Runs `target` (a [[target]] table) with 4 ranks of one worker each, a put phase then a mixed
/// phase, and checks the merge against the per-rank breakdown.
fn four_ranks_merge_to_the_sum_of_their_shares(target: &str) {
    let Some(mpirun) = mpirun() else { return };
    let (dir, out) = run_job(
        &mpirun,
        &format!(
            "version = 1\nname = \"mpi\"\n{target}\n[[workload]]\nname = \"w\"\nsizes = [\"8KiB\"]\nthreads = [4]\nobjects = 200\n\
             [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 80, head = 20 }}\ncount = 600\nkey_order = \"uniform\"\n"
        ),
        4,
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("stowbench mpi — run").count(), 1, "only rank 0 prints the table:\n{stdout}");
    assert!(
        stdout.contains("ranks: 4 on 1 host(s)") && stdout.contains("per rank:") && stdout.contains("per host:"),
        "the table lists the ranks, their shares and their host:\n{stdout}"
    );
    let report = report(dir.path());
    check_breakdown_in_csv_and_html(dir.path(), &report);
    let ranks = report["ranks"].as_array().expect("a multi-host report lists its ranks");
    assert_eq!(ranks.len(), 4);
    assert!(ranks.iter().all(|r| r["clock_rtt_ns"].as_u64().is_some()), "{ranks:?}");
    let case = &report["cases"][0];
    assert_eq!(case["status"], "ok", "{case}");
    assert_eq!((case["threads"].as_u64(), case["objects"].as_u64()), (Some(4), Some(200)), "the case is the whole job, not one rank's share");
    let per_rank = case["per_rank"].as_array().expect("a per-rank breakdown");
    assert_eq!(per_rank.len(), 4);
    check_per_host(case);
    assert_eq!(per_rank.iter().map(|r| r["objects"].as_u64().unwrap()).sum::<u64>(), 200);
    let phases = case["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2);
    for (i, phase) in phases.iter().enumerate() {
        let label = phase["phase"].as_str().unwrap();
        for (op, merged) in phase["ops"].as_object().unwrap() {
            let shares: Vec<&Value> = per_rank.iter().map(|r| &r["phases"][i]["ops"][op]).collect();
            assert!(shares.iter().all(|s| s.is_object()), "every rank has {label}/{op}");
            let sum = |field: &str| shares.iter().map(|s| s[field].as_u64().unwrap()).sum::<u64>();
            assert_eq!(merged["count"].as_u64().unwrap(), sum("count"), "{label}/{op} count");
            assert_eq!(merged["bytes"].as_u64().unwrap(), sum("bytes"), "{label}/{op} bytes");
            let merged_errors: u64 = merged["errors"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
            assert_eq!(merged_errors, sum("errors"), "{label}/{op} errors");
            // The merged percentiles are the combined histogram's, never an average of the ranks'.
            let mut combined = histogram_from_base64(shares[0]["histogram"].as_str().unwrap()).unwrap();
            for s in &shares[1..] {
                combined.add(histogram_from_base64(s["histogram"].as_str().unwrap()).unwrap()).unwrap();
            }
            let latency = &merged["latency"];
            assert_eq!(latency["samples"].as_u64().unwrap(), combined.len(), "{label}/{op} samples");
            for (field, q) in [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p999_ns", 0.999)] {
                assert_eq!(latency[field].as_u64().unwrap(), combined.value_at_quantile(q), "{label}/{op} {field}");
            }
            assert_eq!((latency["min_ns"].as_u64().unwrap(), latency["max_ns"].as_u64().unwrap()), (combined.min(), combined.max()), "{label}/{op}");
        }
        // The merged window spans every rank's: from the first start to the last end.
        let window = phase["window_total_ns"].as_u64().unwrap();
        assert!(per_rank.iter().all(|r| r["phases"][i]["window_total_ns"].as_u64().unwrap() <= window), "{label}: a rank's window outlasts the merged one");
    }
    assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "every rank removed its run directory (and its server objects before it)");
}

/// The CSV has a row per rank, phase and operation beside the merged rows, and the page a
/// per-rank table.
fn check_breakdown_in_csv_and_html(dir: &Path, report: &Value) {
    let file = std::fs::read_dir(dir.join("out")).unwrap().flatten().next().unwrap().path().join("report.json");
    let render = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["report", file.to_str().unwrap(), "--format", format]).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let csv = render("csv");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let rank_column = header.iter().position(|c| *c == "rank").expect("a rank column");
    let merged_rows: usize = report["cases"][0]["phases"].as_array().unwrap().iter().map(|p| p["ops"].as_object().unwrap().len()).sum();
    let rank_rows = csv.lines().skip(1).filter(|l| !l.split(',').nth(rank_column).unwrap_or("").is_empty()).count();
    let phases = report["cases"][0]["phases"].as_array().unwrap().len();
    assert_eq!(csv.lines().count() - 1, merged_rows * 5 + phases, "merged rows, 4 ranks' rows and the one host's row per phase:\n{csv}");
    assert_eq!(rank_rows, merged_rows * 4);
    let ranks_column = header.iter().position(|c| *c == "ranks").expect("a ranks column (the host rows')");
    let host_rows: Vec<&str> = csv.lines().skip(1).filter(|l| l.split(',').nth(ranks_column) == Some("0 1 2 3")).collect();
    assert_eq!(host_rows.len(), phases, "{csv}");
    let html = render("html");
    assert!(html.contains("<h3>Per rank</h3>") && html.contains("<h3>Ranks</h3>") && html.contains("<h3>Per host</h3>"));
}

/// The one host of 4 ranks: its ranks' client figures summed, its server once, all of each phase.
fn check_per_host(case: &Value) {
    let per_rank = case["per_rank"].as_array().unwrap();
    let hosts = case["per_host"].as_array().expect("a per-host breakdown");
    assert_eq!(hosts.len(), 1, "4 ranks on one machine: {hosts:?}");
    let host = &hosts[0];
    assert_eq!(host["ranks"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(host["threads"].as_u64(), Some(4));
    let sum = |field: &str| per_rank.iter().map(|r| r["resources"][field].as_u64().unwrap()).sum::<u64>();
    for field in ["client_cpu_user_ns", "client_cpu_system_ns", "client_rss_peak_bytes"] {
        assert_eq!(host["resources"][field].as_u64(), Some(sum(field)), "{field}: summed over the host's ranks");
    }
    assert_eq!(host["resources"]["server_cpu_ns"], per_rank[0]["resources"]["server_cpu_ns"], "the host's server counted once, not once per rank");
    for (i, phase) in host["phases"].as_array().unwrap().iter().enumerate() {
        let ops: u64 = per_rank.iter().flat_map(|r| r["phases"][i]["ops"].as_object().unwrap().values()).map(|o| o["count"].as_u64().unwrap()).sum();
        assert_eq!(phase["count"].as_u64(), Some(ops), "{phase}");
        assert_eq!((phase["count_share"].as_f64(), phase["bytes_share"].as_f64()), (Some(1.0), Some(1.0)), "{phase}");
    }
}

#[test]
fn fs_four_ranks_merge_to_the_sum_of_their_shares() {
    four_ranks_merge_to_the_sum_of_their_shares("[[target]]\nname = \"fs\"\nbackend = \"fs\"\n");
}

#[test]
fn sqlite_file_four_ranks_merge_to_the_sum_of_their_shares() {
    four_ranks_merge_to_the_sum_of_their_shares("[[target]]\nname = \"sqlite-file\"\nbackend = \"sqlite-file\"\n");
}

#[test]
fn s3_four_ranks_merge_to_the_sum_of_their_shares() {
    if !common::available("STOWBENCH_S3_ENDPOINT") {
        return;
    }
    four_ranks_merge_to_the_sum_of_their_shares("[[target]]\nname = \"s3\"\nbackend = \"s3\"\n");
}

/// A cold phase's `device_read_bytes` is every rank's (each reads its own share of the objects),
/// so the cold-read check holds in a multi-host run as in one process.
#[test]
fn a_cold_phase_counts_every_ranks_device_reads() {
    let Some(mpirun) = mpirun() else { return };
    if !stowbench::host::is_root() {
        assert!(!common::in_ci(), "cache = \"cold\" needs root, and CI=true");
        eprintln!("SKIPPED: cache = \"cold\" needs root");
        return;
    }
    let job = "version = 1\nname = \"mpi\"\n[[target]]\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"256KiB\"]\nthreads = [2]\nobjects = 24\ncache = \"cold\"\n\
               [[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = 1 }\ncount = 24\nkey_order = \"sequential\"\n";
    // Under the target directory: on the disk the repository is on, not a tmpfs /tmp.
    let (dir, out) = run_job_in(Path::new(env!("CARGO_TARGET_TMPDIR")), &mpirun, job, 2);
    assert!(out.status.success(), "{}", text(&out));
    let report = report(dir.path());
    let get = &report["cases"][0]["phases"][1];
    assert_eq!(get["cache_state"], "cold", "{get}");
    let got = get["ops"]["get"]["bytes"].as_u64().unwrap();
    let fetched = get["device_read_bytes"].as_u64().unwrap_or_else(|| panic!("no device_read_bytes in a multi-host run: {get}"));
    assert!(fetched as f64 >= 0.9 * got as f64, "fetched {fetched} bytes from the storage layer for {got} read by both ranks");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(!warnings.iter().any(|w| w["kind"] == "cold_reads_from_memory"), "{warnings:?}");
}

/// A job whose get phase starts with a command that fails on rank 2 only (a real failure of that
/// rank's case, as an unreachable store would be): every rank ends the case there, the report
/// names rank 2 and its error, and nothing is left behind.
#[test]
fn a_rank_that_fails_ends_the_case_on_every_rank() {
    let Some(mpirun) = mpirun() else { return };
    let (dir, out) = run_job(
        &mpirun,
        "version = 1\nname = \"mpi\"\n[[target]]\nname = \"fs\"\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 100\n\
         [[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = 1 }\n\
         before = [\"sh\", \"-c\", \"[ \\\"$OMPI_COMM_WORLD_RANK\\\" != 2 ] || { echo 'rank 2 lost its mount' >&2; exit 3; }\"]\n\
         [[workload]]\nname = \"after\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 100\nphases = [\"put\"]\n",
        4,
    );
    assert_eq!(out.status.code(), Some(1), "a failed case fails the run: {}", text(&out));
    let report = report(dir.path());
    let failed = &report["cases"][0];
    assert_eq!(failed["status"], "failed");
    let why = failed["failure"].as_str().unwrap();
    assert!(why.starts_with("rank 2 (") && why.contains("rank 2 lost its mount"), "the failing rank and its own error: {why}");
    let phases: Vec<&str> = failed["phases"].as_array().unwrap().iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, ["put"], "no rank ran the get phase");
    let per_rank = failed["per_rank"].as_array().unwrap();
    assert!(
        per_rank.iter().filter(|r| r["rank"] != 2).all(|r| r["failure"].as_str().unwrap().starts_with(stowbench::multihost::ENDED_BY_ANOTHER)),
        "{per_rank:?}"
    );
    // The next case runs on every rank, as after any failed case.
    assert_eq!(report["cases"][1]["status"], "ok", "{}", report["cases"][1]);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// A failure in the middle of a phase ends the phase on every rank at once, not at the end of
/// their own share: rank 0's worker panics at once (its sim store answers instantly), while the
/// other ranks' stores take 100–300 ms an operation and would reach the panic only after the
/// 60 s phase. The case fails with rank 0's error within seconds, and the next case runs.
#[test]
fn a_failure_mid_phase_ends_the_phase_on_every_rank_promptly() {
    let Some(mpirun) = mpirun() else { return };
    let started = std::time::Instant::now();
    let (dir, out) = run_job(
        &mpirun,
        "version = 1\n[[target]]\nname = \"sim\"\nbackend = \"sim\"\nclock = \"real\"\nlatency = \"{rank}00ms\"\npanic_at = 1000\n\
         [[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 100\n[[workload.phase]]\nmix = { put = 1 }\nduration = \"60s\"\n\
         [[workload]]\nname = \"after\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 4\nphases = [\"put\"]\n",
        4,
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "a failed case fails the run: {}", text(&out));
    // Generous for a loaded machine, and far below the 60 s the other ranks' shares would take.
    assert!(took < std::time::Duration::from_secs(20), "the run took {took:?}: the other ranks ran out their share of the phase");
    let report = report(dir.path());
    let failed = &report["cases"][0];
    let why = failed["failure"].as_str().unwrap();
    assert!(why.starts_with("rank 0 (") && why.contains("panicked in phase put"), "{why}");
    let per_rank = failed["per_rank"].as_array().unwrap();
    assert!(per_rank[1..].iter().all(|r| r["failure"].as_str().unwrap().starts_with(stowbench::multihost::ENDED_BY_ANOTHER)), "{per_rank:?}");
    assert_eq!(report["cases"][1]["status"], "ok", "{}", report["cases"][1]);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// A store only rank 2 cannot use (its `path` is a file): every rank refuses before writing
/// anything, with rank 2's reason.
#[test]
fn a_target_one_rank_cannot_use_is_refused_by_every_rank() {
    let Some(mpirun) = mpirun() else { return };
    let dir = tempfile::tempdir().unwrap();
    for rank in [0, 1, 3] {
        std::fs::create_dir(dir.path().join(format!("data-{rank}"))).unwrap();
    }
    std::fs::write(dir.path().join("data-2"), "not a directory").unwrap();
    let job = dir.path().join("job.toml");
    let data = dir.path().join("data-{rank}");
    std::fs::write(
        &job,
        format!(
            "version = 1\n[[target]]\nname = \"fs\"\nbackend = \"fs\"\npath = \"{}\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 100\nphases = [\"put\"]\n",
            data.display()
        ),
    )
    .unwrap();
    let out = mpirun_command(&mpirun, dir.path()).arg("-np").arg("4").args(stowbench_run_args(&job, dir.path())).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rank 2 (") && stderr.contains("data-2"), "{stderr}");
    assert_eq!(stderr.matches("rank 2 (").count(), 1, "only rank 0 says it:\n{stderr}");
    assert!(!dir.path().join("out").exists(), "no report for a run that never started");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    for rank in [0, 1, 3] {
        assert_eq!(std::fs::read_dir(dir.path().join(format!("data-{rank}"))).unwrap().count(), 0, "rank {rank}'s data directory is as it was");
    }
}

/// Ctrl-C on mpirun: mpirun sends the ranks SIGTERM (after `odls_base_sigkill_timeout`, then
/// SIGKILL as long again), which stops each rank as Ctrl-C stops one process. The report keeps
/// every finished case, says the run was interrupted, and every rank removes its data.
#[test]
fn ctrl_c_on_mpirun_keeps_finished_cases() {
    let Some(mpirun) = mpirun() else { return };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.toml");
    std::fs::write(
        &job,
        "version = 1\nname = \"mpi\"\n[[target]]\nname = \"fs\"\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nthreads = [4]\nobjects = 100\nrepeats = 50\n\
         [[workload.phase]]\nmix = { put = 1 }\nduration = \"1s\"\n",
    )
    .unwrap();
    // Five seconds from SIGTERM to SIGKILL: ample for a rank to finish its operation, tell the
    // others, write the report and remove its data (milliseconds), on a loaded machine too.
    let child = mpirun_command(&mpirun, dir.path())
        .args(["--mca", "odls_base_sigkill_timeout", "5", "-np", "4"])
        .args(stowbench_run_args(&job, dir.path()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_finished_cases(&dir.path().join("out"), 1);
    // SAFETY: kill(2) on the pid of the child this test started and has not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let report = report(dir.path());
    let cases = report["cases"].as_array().unwrap();
    assert!(!cases.is_empty() && cases.len() < 50, "{} cases", cases.len());
    assert!(cases.iter().all(|c| c["status"] == "ok"), "a case cut short is not a result");
    assert_eq!(report["status"], "interrupted", "{}", text(&out));
    assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "every rank removed its data");
}

/// Shared keys (`[mpi] keys = "shared"`) on 4 ranks of one worker each: 200 keys, 50 written by
/// each rank; a sequential get pass in which each rank reads the next rank's 50 keys (only keys
/// another rank put), then uniform gets over all 200. Every get must find its key and verify
/// against what its writer put; the store is measured once and removed once, by rank 0.
fn four_ranks_share_one_key_space(target: &str) -> (tempfile::TempDir, Value) {
    let Some(mpirun) = mpirun() else { panic!("checked by the caller") };
    let (dir, out) = run_job(
        &mpirun,
        &format!(
            "version = 1\nname = \"mpi\"\n[mpi]\nkeys = \"shared\"\n{target}\n[[workload]]\nname = \"w\"\nsizes = [\"8KiB\"]\nthreads = [4]\nobjects = 200\n\
             [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\n\
             [[workload.phase]]\nmix = {{ get = 80, head = 20 }}\ncount = 800\nkey_order = \"uniform\"\n"
        ),
        4,
    );
    assert!(out.status.success(), "{}", text(&out));
    let report = report(dir.path());
    let case = report["cases"][0].clone();
    assert_eq!(case["status"], "ok", "{case}");
    assert_eq!(report["plan"]["mpi_keys"], "shared");
    let phases = case["phases"].as_array().unwrap();
    let (one_pass, uniform) = (&phases[1]["ops"]["get"], &phases[2]["ops"]);
    assert_eq!((one_pass["count"].as_u64(), one_pass["misses"].as_u64()), (Some(200), Some(0)), "each rank read its neighbour's 50 keys: {one_pass}");
    for op in ["get", "head"] {
        assert_eq!(uniform[op]["misses"].as_u64(), Some(0), "{op}: every key any rank put is found by every rank");
        assert!(uniform[op]["errors"].as_object().unwrap().is_empty(), "{op}: {}", uniform[op]);
    }
    let v = &case["verification"];
    assert_eq!((v["checked"].as_u64(), v["mismatches"].as_u64()), (Some(200 + uniform["get"]["count"].as_u64().unwrap()), Some(0)), "{v}");
    for r in case["per_rank"].as_array().unwrap() {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["phases"][1]["ops"]["get"]["count"].as_u64(), Some(50), "rank {}: its one pass is its share", r["rank"]);
    }
    assert_eq!(case["disk"]["logical_bytes"].as_u64(), Some(200 * 8192), "one store, counted once: {}", case["disk"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("cleanup") && !stderr.contains("kept"), "no rank removed the store under another, nor left it:\n{stderr}");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "rank 0 removed the one run directory");
    (dir, report)
}

#[test]
fn fs_shared_keys_are_read_by_every_rank_and_removed_once() {
    if mpirun().is_none() {
        return;
    }
    let (_dir, report) = four_ranks_share_one_key_space("[[target]]\nname = \"fs\"\nbackend = \"fs\"\n");
    assert_eq!(report["cases"][0]["disk"]["files"].as_u64(), Some(200), "one file per key, in one store");
}

#[test]
fn s3_shared_keys_are_read_by_every_rank_and_removed_once() {
    if mpirun().is_none() || !common::available("STOWBENCH_S3_ENDPOINT") {
        return;
    }
    let (dir, report) = four_ranks_share_one_key_space("[[target]]\nname = \"s3\"\nbackend = \"s3\"\n");
    assert_eq!(report["cases"][0]["disk"]["server_reported_bytes"].as_u64(), Some(200 * 8192), "the server holds one copy of each key");
    // The one namespace every rank used: nothing of it is left on the server.
    let run_id = report["run_id"].as_str().unwrap().to_string();
    let ns = stowbench::backend::Namespace::unheld(&run_id, dir.path(), "sb_case_0000");
    let options = stowbench::backend::options::Options::new("s3", "test", toml::Table::new());
    let s3 = (stowbench::backend::find("s3").unwrap().construct)(&options, &ns).unwrap();
    assert_eq!(s3.server_objects().unwrap(), Vec::<String>::new());
}

/// With shared keys a damaged object is reported by the rank that read it: rank 0's `before`
/// command damages key 60, which rank 1 wrote and rank 0 alone reads (each rank's sequential
/// pass reads the next rank's keys).
#[test]
fn a_damaged_shared_object_is_reported_by_the_rank_that_read_it() {
    let Some(mpirun) = mpirun() else { return };
    let damage = "[ \\\"$OMPI_COMM_WORLD_RANK\\\" != 0 ] || printf XXXX | dd of=$(find \\\"$STOWBENCH_DATA_PATHS\\\" -name obj-0000000060) bs=1 seek=100 conv=notrunc 2>/dev/null";
    let (dir, out) = run_job(
        &mpirun,
        &format!(
            "version = 1\nname = \"mpi\"\n[mpi]\nkeys = \"shared\"\n[[target]]\nname = \"fs\"\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"8KiB\"]\nthreads = [4]\nobjects = 200\n\
             [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\nbefore = [\"sh\", \"-c\", \"{damage}\"]\n"
        ),
        4,
    );
    assert_eq!(out.status.code(), Some(1), "a damaged object fails the run: {}", text(&out));
    let report = report(dir.path());
    let case = &report["cases"][0];
    let v = &case["verification"];
    assert_eq!((v["checked"].as_u64(), v["mismatches"].as_u64()), (Some(200), Some(1)), "{v}");
    assert!(case["failure"].as_str().unwrap().contains("obj-0000000060"), "{}", case["failure"]);
    let errors: Vec<u64> = case["per_rank"].as_array().unwrap().iter().map(|r| r["phases"][1]["ops"]["get"]["errors"].as_u64().unwrap()).collect();
    assert_eq!(errors, [1, 0, 0, 0], "rank 0 read the damaged object, and only it");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

/// A store that one process keeps (pack's index lives in the process that writes it) is refused
/// under shared keys before anything is written, with the fix.
#[test]
fn shared_keys_refuse_a_store_only_one_process_can_open() {
    let Some(mpirun) = mpirun() else { return };
    let (dir, out) = run_job(
        &mpirun,
        "version = 1\n[mpi]\nkeys = \"shared\"\n[[target]]\nname = \"p\"\nbackend = \"pack\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nthreads = [2]\nobjects = 10\nphases = [\"put\"]\n",
        2,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("backend pack cannot be shared by several processes") && stderr.contains("keys = \"partitioned\""), "{stderr}");
    assert!(!dir.path().join("out").exists(), "no report for a run that never started");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

#[test]
fn an_unknown_way_to_share_keys_is_refused_at_its_line() {
    let job = "version = 1\n[mpi]\nkeys = \"sharded\"\n[[target]]\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nphases = [\"put\"]\n";
    let err = stowbench::job::load_text(job, "job.toml").unwrap_err();
    assert!(err.contains("job.toml:3:1: [mpi], field \"keys\": \"sharded\" is not a way to share keys; use \"partitioned\""), "{err}");
    let typo = stowbench::job::load_text(&job.replace("keys = \"sharded\"", "key = \"shared\""), "job.toml").unwrap_err();
    assert!(typo.contains("job.toml:3:1: unknown key \"key\""), "{typo}");
}

// The parts of a multi-host run that need no mpirun: worker statistics as bytes, and the shares.

use stowbench::backend::ErrorKind;
use stowbench::job::Plan;
use stowbench::multihost::share::{local_plan, portion, workers_of};
use stowbench::stats::wire::histogram_base64;
use stowbench::stats::WorkerStats;
use stowbench::workload::op::Op;

/// Ranks 0 and 2 on host a, rank 1 on host b: a host's client figures are its ranks' summed,
/// its server is counted once, and its share of a phase is its ranks' operations over all.
#[test]
fn hosts_group_their_ranks() {
    use stowbench::report::model::{RankCase, RankOp, RankPhase, Resources};
    let rank = |rank: u32, host: &str, puts: u64, cpu: u64| {
        let op = RankOp { count: puts, bytes: puts * 10, ..RankOp::default() };
        let phase = RankPhase { phase: "put".into(), ops: [("put".to_string(), op)].into(), ..RankPhase::default() };
        let resources = Resources { client_cpu_user_ns: cpu, server_cpu_ns: Some(1000), server_rss_peak_bytes: Some(5), ..Resources::default() };
        RankCase { rank, host: host.into(), threads: 2, phases: vec![phase], resources, ..RankCase::default() }
    };
    let hosts = stowbench::multihost::merge::hosts(&[rank(0, "a", 30, 7), rank(1, "b", 20, 11), rank(2, "a", 50, 13)]);
    let names: Vec<(&str, &[u32])> = hosts.iter().map(|h| (h.host.as_str(), h.ranks.as_slice())).collect();
    assert_eq!(names, [("a", &[0, 2][..]), ("b", &[1][..])]);
    let a = &hosts[0];
    assert_eq!((a.threads, a.resources.client_cpu_user_ns, a.resources.server_cpu_ns), (4, 20, Some(1000)), "server once, client summed");
    assert_eq!((a.phases[0].count, a.phases[0].bytes, a.phases[0].count_share, a.phases[0].bytes_share), (80, 800, 0.8, 0.8));
    assert_eq!(hosts[1].phases[0].count_share, 0.2);
}

/// A case's bytes fetched from the device are every rank's summed (each rank counts itself, and
/// one rank of each host that host's servers); unknown when any rank could not count them.
#[test]
fn a_cases_device_reads_are_every_ranks_summed() {
    use stowbench::report::model::{CaseResult, RankInfo};
    let job = "version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 10\n\
               [[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = 1 }\n";
    let plan = stowbench::job::load_text(job, "test.toml").unwrap();
    let case = &plan.cases[0];
    let result = |put_reads: Option<u64>, get_reads: Option<u64>| -> CaseResult {
        let mut r = stowbench::report::empty_case(case, &plan);
        r.phases = [("put", put_reads), ("get", get_reads)]
            .into_iter()
            .map(|(label, reads)| {
                let mut p = stowbench::stats::merge(label, vec![WorkerStats::new(0, 1)], 0);
                p.device_read_bytes = reads;
                p
            })
            .collect();
        r
    };
    let infos: Vec<RankInfo> = (0..3).map(|rank| RankInfo { rank, host: "a".into(), ..RankInfo::default() }).collect();
    let reads = |results: Vec<CaseResult>| -> Vec<Option<u64>> {
        stowbench::multihost::merge::case(case, results, &infos, Vec::new(), false).phases.iter().map(|p| p.device_read_bytes).collect()
    };
    assert_eq!(reads(vec![result(Some(0), Some(100)), result(Some(1), Some(20)), result(Some(2), Some(3))]), [Some(3), Some(123)]);
    assert_eq!(reads(vec![result(Some(0), Some(100)), result(Some(1), None), result(Some(2), Some(3))]), [Some(3), None]);
}

#[test]
fn worker_statistics_survive_the_round_trip_and_merge_the_same() {
    let mut w = WorkerStats::new(1_000, 7);
    for i in 0..500u64 {
        w.success(Op::Put, i, 1_000 + i * 30_000, 10_000 + i * 997, 4096, (i % 3) as u32);
    }
    w.failure(Op::Get, 20_000_000, ErrorKind::Io, 2, || "get obj-3: broken".into());
    w.miss(Op::Get, true, 70_000);
    w.end_ns = 16_000_000;
    let copy = WorkerStats::from_bytes(&w.to_bytes()).unwrap();
    let (a, b) = (stowbench::stats::merge("put", vec![w], 5), stowbench::stats::merge("put", vec![copy], 5));
    assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
}

#[test]
fn a_shifted_clock_moves_start_and_end_together() {
    let mut w = WorkerStats::new(5_000, 1);
    w.start_ns = 6_000;
    w.end_ns = 9_000;
    w.shift_clock(1_000);
    assert_eq!((w.start_ns, w.end_ns), (5_000, 8_000));
    w.shift_clock(-500);
    assert_eq!((w.start_ns, w.end_ns), (5_500, 8_500));
}

#[test]
fn base64_histograms_read_back_exactly() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for v in [1u64, 10, 1000, 123_456_789] {
        h.record(v).unwrap();
    }
    let back = histogram_from_base64(&histogram_base64(&h)).unwrap();
    assert_eq!((back.len(), back.max(), back.value_at_quantile(0.5)), (h.len(), h.max(), h.value_at_quantile(0.5)));
}

#[test]
fn shares_add_up_to_the_whole() {
    for (threads, size) in [(4u64, 4u64), (5, 2), (7, 3), (64, 5)] {
        let mut workers = 0;
        let mut objects = 0;
        for rank in 0..size {
            let (before, mine) = workers_of(threads, rank, size);
            assert_eq!(before, workers, "ranks take consecutive workers");
            assert!(mine >= threads / size && mine <= threads / size + 1);
            workers += mine;
            objects += portion(1001, before, mine, threads);
        }
        assert_eq!((workers, objects), (threads, 1001), "{threads} workers on {size} ranks");
    }
}

#[test]
fn a_case_is_shared_by_workers_and_refused_when_a_rank_would_have_none() {
    let job = "version = 1\n[[target]]\nname = \"s\"\nbackend = \"sim\"\npath = \"/x/{rank}\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 1000\nthreads = [3]\n[[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = 1 }\ncount = 10\n";
    let plan = stowbench::job::load_text(job, "test.toml").unwrap();
    let shares: Vec<Plan> = (0..2).map(|r| local_plan(&plan, r, 2).unwrap()).collect();
    let case = |r: usize| &shares[r].cases[0];
    assert_eq!((case(0).threads, case(1).threads), (2, 1));
    assert_eq!(case(0).objects + case(1).objects, 1000);
    let count = |r: usize| case(r).workload.phases[1].stop.count.unwrap();
    assert_eq!((count(0), count(1)), (6, 4), "counts follow the workers: 2/3 of 10 rounded down, and the rest");
    assert_eq!(shares[1].targets[0].options.table["path"].as_str(), Some("/x/1"));
    assert_ne!(shares[0].seed, shares[1].seed);
    assert_eq!(shares[0].seed, plan.seed);
    let err = local_plan(&plan, 0, 4).unwrap_err();
    assert!(err.contains("3 worker(s) cannot be shared by 4 ranks"), "{err}");
}
