//! `kill -9` of each server in the middle of a run with 20 workers: PostgreSQL (bytea and large
//! objects), MariaDB, MinIO and FerretDB. The run does not hang, every failed operation is
//! counted by kind, retries stay within the policy's bounds, the run exits 1 with one clear line
//! for the failed case, and what was measured before the kill is kept.
//!
//! The kill is the read phase's `before` command, so it lands at the same point on any machine:
//! after 20 workers wrote every object, with their connections open. It kills the server and its
//! children in one `kill`: a PostgreSQL backend outlives its postmaster until it notices, and
//! would serve a few more reads in some runs.

use super::cold_restart::PrivateServices;
use crate::common;
use std::process::Command;

/// One target: the script's service, the backend and its options, how many objects (FerretDB's
/// driver waits its whole server-selection time-out per attempt, so it gets fewer).
struct Target {
    service: &'static str,
    backend: &'static str,
    options: &'static str,
    objects: u64,
}

const TARGETS: &[Target] = &[
    Target { service: "pg", backend: "postgres", options: "mode = \"bytea\"", objects: 400 },
    Target { service: "pg", backend: "postgres", options: "mode = \"lo\"", objects: 400 },
    Target { service: "mariadb", backend: "mariadb", options: "", objects: 400 },
    Target { service: "s3", backend: "s3", options: "", objects: 400 },
    Target { service: "mongo", backend: "gridfs", options: "connect_timeout = \"500ms\"", objects: 40 },
];

fn uri_var(service: &str) -> &'static str {
    match service {
        "pg" => "STOWBENCH_PG_URI",
        "mariadb" => "STOWBENCH_MARIADB_URI",
        "s3" => "STOWBENCH_S3_ENDPOINT",
        _ => "STOWBENCH_MONGO_URI",
    }
}

fn job(t: &Target, uri: &str) -> String {
    format!(
        "version = 1\n[[target]]\nname = \"victim\"\nbackend = \"{}\"\n{}\nuri = \"{uri}\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"64KiB\"]\nobjects = {n}\nthreads = [20]\nretries = 3\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\ncount = {n}\n\
         [[workload.phase]]\nmix = {{ get = 1 }}\ncount = {n}\nbefore = [\"sh\", \"-c\", \"kill -9 $SERVER_PID $(pgrep -P $SERVER_PID)\"]\n",
        t.backend,
        t.options,
        n = t.objects
    )
}

#[test]
fn killing_a_server_mid_run_fails_fast_counts_every_error_and_keeps_what_was_measured() {
    if !["STOWBENCH_PG_URI", "STOWBENCH_MARIADB_URI", "STOWBENCH_S3_ENDPOINT", "STOWBENCH_MONGO_URI"].iter().all(|v| super::available(v)) {
        return;
    }
    for t in TARGETS {
        let what = format!("{} {}", t.backend, t.options);
        let services = PrivateServices::start(t.service);
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("job.toml"), job(t, &services.value(t.service, uri_var(t.service)))).unwrap();
        let pid_var = format!("STOWBENCH_{}_PID", t.service.to_uppercase());
        let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
        command.args(["run", "job.toml", "--no-progress", "--out", "out"]).env("SERVER_PID", services.value(t.service, &pid_var));
        command.env_remove("STOWBENCH_SERVICES_DIR").current_dir(work.path());
        if t.service == "s3" {
            // The private MinIO has a secret of its own.
            for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "STOWBENCH_S3_BUCKET", "STOWBENCH_S3_REGION"] {
                command.env(var, services.value("s3", var));
            }
        }
        let out = command.output().unwrap();
        let table = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{what}: {table}{}", String::from_utf8_lossy(&out.stderr));
        let summary: Vec<&str> = table.lines().skip_while(|l| *l != "failed cases:").skip(1).take_while(|l| !l.is_empty()).collect();
        assert_eq!(summary.len(), 1, "{what}: one line for the one failed case: {table}");
        let expected = format!("{n} of {} operations failed", 2 * t.objects, n = t.objects);
        assert!(summary[0].contains("error budget exceeded") && summary[0].contains(&expected), "{what}: {}", summary[0]);

        let report_path = std::fs::read_dir(work.path().join("out")).unwrap().flatten().next().unwrap().path().join("report.json");
        let report = common::assert_valid_report(&report_path);
        let case = &report["cases"][0];
        let (put, get) = (&case["phases"][0]["ops"]["put"], &case["phases"][1]["ops"]["get"]);
        assert_eq!((put["count"].as_u64(), put["errors"].as_object().map(|e| e.len())), (Some(t.objects), Some(0)), "{what}: the puts before the kill are kept: {put}");
        let errors = get["errors"].as_object().unwrap();
        let failed: u64 = errors.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!((get["count"].as_u64(), failed), (Some(0), t.objects), "{what}: every get failed and is counted by kind: {get}");
        assert!(errors.keys().all(|kind| kind == "connection" || kind == "timeout"), "{what}: a dead server is a connection error or a time-out: {get}");
        assert!(get["retries"].as_u64().unwrap() <= 3 * failed, "{what}: at most `retries` per failed get: {get}");
    }
}
