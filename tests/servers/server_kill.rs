//! `kill -9` of PostgreSQL in the middle of a run with 20 workers, bytea and large objects: the
//! run does not hang, every failed operation is counted by kind, retries stay within the policy's
//! bounds, the run exits 1 with one clear line per failed case, and what was measured before the
//! kill is kept. The kill is the read phase's `before` command, so it lands at the same point on
//! any machine: after 20 workers wrote every object, with their connections open. It kills the
//! postmaster and its backends in one `kill`: a backend alone outlives its postmaster until it
//! notices, and would serve a few more reads, some runs.

use super::cold_restart::PrivateServices;
use crate::common;
use std::process::Command;

fn job(uri: &str, mode: &str) -> String {
    format!(
        "version = 1\n[[target]]\nname = \"pg-{mode}\"\nbackend = \"postgres\"\nmode = \"{mode}\"\nuri = \"{uri}\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"64KiB\"]\nobjects = 400\nthreads = [20]\nretries = 3\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\ncount = 400\n\
         [[workload.phase]]\nmix = {{ get = 1 }}\ncount = 400\nbefore = [\"sh\", \"-c\", \"kill -9 $PG_PID $(pgrep -P $PG_PID)\"]\n"
    )
}

#[test]
fn killing_postgres_mid_run_fails_fast_counts_every_error_and_keeps_what_was_measured() {
    if !super::available("STOWBENCH_PG_URI") {
        return;
    }
    for mode in ["bytea", "lo"] {
        let services = PrivateServices::start("pg");
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("job.toml"), job(&services.value("pg", "STOWBENCH_PG_URI"), mode)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(["run", "job.toml", "--no-progress", "--out", "out"])
            .env("PG_PID", services.value("pg", "STOWBENCH_PG_PID"))
            .env_remove("STOWBENCH_SERVICES_DIR")
            .current_dir(work.path())
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{mode}: {table}{}", String::from_utf8_lossy(&out.stderr));
        let summary: Vec<&str> = table.lines().skip_while(|l| *l != "failed cases:").skip(1).take_while(|l| !l.is_empty()).collect();
        assert_eq!(summary.len(), 1, "{mode}: one line for the one failed case: {table}");
        assert!(summary[0].contains("error budget exceeded") && summary[0].contains("400 of 800 operations failed"), "{mode}: {}", summary[0]);

        let report_path = std::fs::read_dir(work.path().join("out")).unwrap().flatten().next().unwrap().path().join("report.json");
        let report = common::assert_valid_report(&report_path);
        let case = &report["cases"][0];
        let (put, get) = (&case["phases"][0]["ops"]["put"], &case["phases"][1]["ops"]["get"]);
        assert_eq!((put["count"].as_u64(), put["errors"].as_object().map(|e| e.len())), (Some(400), Some(0)), "{mode}: the puts before the kill are kept: {put}");
        let failed: u64 = get["errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!((get["count"].as_u64(), failed), (Some(0), 400), "{mode}: every get failed and is counted by kind: {get}");
        assert!(get["errors"]["connection"].as_u64().unwrap_or(0) > 0, "{mode}: a dead server is a connection error: {get}");
        assert!(get["retries"].as_u64().unwrap() <= 3 * failed, "{mode}: at most `retries` per failed get: {get}");
    }
}
