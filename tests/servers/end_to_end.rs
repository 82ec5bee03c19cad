//! Whole runs against the real servers: reports validate against the schema and carry the server
//! figures; size limits stop a run before any data; secrets appear in no output at all.

use super::{available, env, fixture, put, Server};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use stowbench::runner::{self, RunOptions};

fn job(target: &str) -> String {
    format!(
        "version = 1\n[[target]]\nname = \"t\"\n{target}\n[[workload]]\nname = \"w\"\nsizes = [\"94kB\", \"2.6MB\"]\n\
         objects = 12\nthreads = [1, 4]\nphases = [\"put\", \"get\"]\n"
    )
}

fn run_in_process(target: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let plan = stowbench::job::load_text(&job(target), "servers.toml").unwrap();
    let opts = RunOptions { report_path: dir.path().join("out/report.json"), work_dir: Some(dir.path().to_path_buf()), ..Default::default() };
    let outcome = runner::run(&plan, &opts, &AtomicBool::new(false)).unwrap_or_else(|e| panic!("{target}: {e}"));
    assert_eq!(outcome.exit_code, 0, "{target}: {:?}", outcome.report.cases.iter().map(|c| &c.failure).collect::<Vec<_>>());
    crate::common::assert_valid_report(&opts.report_path)
}

fn assert_server_figures(report: &serde_json::Value, what: &str) {
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4, "{what}: 2 sizes × 2 thread counts");
    for c in cases {
        let id = c["case_id"].as_str().unwrap();
        assert_eq!(c["status"], "ok", "{id}: {}", c["failure"]);
        let r = &c["resources"];
        assert!(r["server_rss_peak_bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{id}: server_rss_peak_bytes {}", r["server_rss_peak_bytes"]);
        assert!(r["server_cpu_ns"].as_u64().is_some(), "{id}: server_cpu_ns missing");
        assert!(!r["server_pids"].as_array().unwrap().is_empty(), "{id}: no server pid found");
        let logical = c["disk"]["logical_bytes"].as_u64().unwrap();
        let reported = c["disk"]["server_reported_bytes"].as_u64().unwrap_or(0);
        assert!(reported > 0, "{id}: server_reported_bytes {reported}");
        assert!(c["disk"]["allocated_bytes"].as_u64().unwrap() > 0, "{id}: allocated bytes of the local data directory");
        let versions = c["backend_info"]["versions"].as_object().unwrap();
        assert!(versions.len() >= 2, "{id}: server and client versions: {versions:?}");
        assert!(!c["durability"].as_str().unwrap().is_empty());
        assert_eq!(c["phases"][1]["ops"]["get"]["count"].as_u64(), Some(12), "{id}: every object read back");
        let _ = logical;
    }
}

macro_rules! end_to_end {
    ($name:ident, $server:expr, $target:expr) => {
        #[test]
        fn $name() {
            if available($server.env()) {
                assert_server_figures(&run_in_process($target), $target);
            }
        }
    };
}

end_to_end!(end_to_end_postgres_bytea, Server::Pg, "backend = \"postgres\"\nmode = \"bytea\"");
end_to_end!(end_to_end_postgres_lo, Server::Pg, "backend = \"postgres\"\nmode = \"lo\"");
end_to_end!(end_to_end_postgres_file, Server::Pg, "backend = \"postgres\"\nmode = \"file\"");
end_to_end!(end_to_end_mariadb, Server::Maria, "backend = \"mariadb\"");
end_to_end!(end_to_end_mariadb_file, Server::Maria, "backend = \"mariadb\"\nmode = \"file\"");
end_to_end!(end_to_end_s3, Server::S3, "backend = \"s3\"");
end_to_end!(end_to_end_gridfs, Server::Mongo, "backend = \"gridfs\"");

/// A size over a backend's limit stops the run in preflight with a message naming what to use.
#[test]
fn limits_stop_the_run_before_any_data() {
    let cases = [(Server::Pg, "backend = \"postgres\"\nmode = \"bytea\"", "mode = \\\"lo\\\""), (Server::Maria, "backend = \"mariadb\"", "max_allowed_packet")];
    for (server, target, hint) in cases {
        if !available(server.env()) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let text = job(target).replace("[\"94kB\", \"2.6MB\"]", "[\"2GB\"]");
        let plan = stowbench::job::load_text(&text, "limits.toml").unwrap();
        let opts = RunOptions { report_path: dir.path().join("report.json"), work_dir: Some(dir.path().to_path_buf()), ..Default::default() };
        let err = runner::run(&plan, &opts, &AtomicBool::new(false)).err().unwrap_or_else(|| panic!("{target}: 2 GB must be refused"));
        assert_eq!(err.kind, stowbench::error::Kind::BadInput, "{target}: a size over the limit is the job's to fix: {err}");
        assert!(err.message.contains("Nothing was written") && err.message.contains(&hint.replace("\\\"", "\"")), "{target}: {err}");
    }
}

/// Overwrite and delete unlink the large object they replace: no orphans.
#[test]
fn postgres_lo_leaves_no_orphans() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    let f = fixture("postgres", "mode = \"lo\"");
    let table = format!("{}_lo", f.owned());
    let mut s = f.session(0);
    put(&mut *s, "k", 1, 300_000);
    let first = super::inspect::pg_loid(&table, "k");
    put(&mut *s, "k", 2, 10);
    let second = super::inspect::pg_loid(&table, "k");
    assert!(first != second && !super::inspect::pg_lo_exists(first), "the overwritten large object {first} must be unlinked");
    s.delete("k").unwrap();
    assert!(!super::inspect::pg_lo_exists(second), "the deleted key's large object {second} must be unlinked");
    put(&mut *s, "left", 3, 5000);
    let third = super::inspect::pg_loid(&table, "left");
    drop(s);
    f.backend.cleanup().unwrap();
    assert!(!super::inspect::pg_lo_exists(third), "cleanup must unlink every large object of the table");
}

fn stowbench(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(args).current_dir(dir).output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A canary password (in a real PostgreSQL role's URI) and the S3 secret key (from the
/// environment) must appear in no output: stdout, stderr, report.json, CSV, error messages.
#[test]
fn secrets_never_reach_any_output() {
    if !available("STOWBENCH_PG_URI") || !available("STOWBENCH_S3_ENDPOINT") {
        return;
    }
    const CANARY: &str = "canary-7f3a91c2e4";
    let pg = super::inspect::pg_role_uri("stowbench_canary", CANARY);
    let secret = env("AWS_SECRET_ACCESS_KEY");
    let dir = tempfile::tempdir().unwrap();
    let job = format!(
        "version = 1\n[[target]]\nname = \"pg\"\nbackend = \"postgres\"\nuri = \"{pg}\"\n[[target]]\nname = \"s3\"\nbackend = \"s3\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"10kB\"]\nobjects = 5\nphases = [\"put\", \"get\"]\n"
    );
    std::fs::write(dir.path().join("job.toml"), &job).unwrap();
    let mut outputs = vec![stowbench(dir.path(), &["run", "job.toml", "--no-progress", "--format", "json"])];
    let report = std::fs::read_dir(dir.path().join("stowbench-results")).unwrap().next().unwrap().unwrap().path().join("report.json");
    outputs.push(std::fs::read_to_string(&report).unwrap());
    assert!(outputs[1].contains("stowbench_canary:<redacted>@"), "the report shows the redacted URI");
    outputs.push(stowbench(dir.path(), &["report", report.to_str().unwrap(), "--format", "csv"]));
    outputs.push(stowbench(dir.path(), &["report", report.to_str().unwrap()]));
    // Failures print their messages: an unreachable server, in validate, run and backends.
    let dead = pg.replace(&format!(":{}/", super::inspect_port(&pg)), ":1/");
    std::fs::write(dir.path().join("dead.toml"), job.replace(&pg, &dead)).unwrap();
    outputs.push(stowbench(dir.path(), &["validate", "dead.toml"]));
    outputs.push(stowbench(dir.path(), &["run", "dead.toml", "--no-progress"]));
    outputs.push(stowbench(dir.path(), &["backends", "--uri", &dead]));
    outputs.push(stowbench(dir.path(), &["backends", "--uri", &pg]));
    for (i, text) in outputs.iter().enumerate() {
        assert!(!text.contains(CANARY), "output {i} leaks the PostgreSQL password:\n{text}");
        assert!(!text.contains(&secret), "output {i} leaks the S3 secret key");
    }
    assert!(outputs[4].contains("<redacted>") && outputs[6].contains("UNREACHABLE"), "{}\n{}", outputs[4], outputs[6]);
}

/// `stowbench backends` says which server answers and its version.
#[test]
fn backends_lists_reachable_servers_with_versions() {
    let dir = tempfile::tempdir().unwrap();
    let text = stowbench(dir.path(), &["backends"]);
    for (server, version) in [(Server::Pg, "PostgreSQL 1"), (Server::Maria, "MariaDB"), (Server::S3, "S3 endpoint answers"), (Server::Mongo, "wire protocol")] {
        if available(server.env()) {
            assert!(text.contains(version), "{version} missing:\n{text}");
        }
    }
    assert!(text.contains("multipart_threshold") && text.contains("max_allowed_packet") && text.contains("chunk_size"), "{text}");
}

/// A server that answers and refuses (a wrong password, a missing database, an option its driver
/// does not know) is a mistake in the job: exit 2, each at its target's `uri` line, in the
/// server's own words — no driver debug dump (`MySqlError { … }`, `labels: {…}`) and no claim that
/// the server is down. A target whose server does not answer is counted apart.
#[test]
fn a_server_that_refuses_is_the_jobs_mistake_in_the_servers_words() {
    if !available("STOWBENCH_PG_URI") || !available("STOWBENCH_MARIADB_URI") || !available("STOWBENCH_MONGO_URI") {
        return;
    }
    let pg = env("STOWBENCH_PG_URI");
    let pg_nodb = format!("{}/no_such_database", &pg[..pg.rfind('/').unwrap()]);
    let maria = env("STOWBENCH_MARIADB_URI").replacen("mysql://root@", "mysql://root:wrong-password@", 1);
    let mongo = format!("{}?noSuchOption=1", env("STOWBENCH_MONGO_URI"));
    let targets = [("postgres", pg_nodb.as_str()), ("mariadb", &maria), ("gridfs", &mongo), ("gridfs", "mongodb://127.0.0.1:1/")];
    let mut job = String::from("version = 1\n");
    for (i, (backend, uri)) in targets.iter().enumerate() {
        job += &format!("[[target]]\nname = \"t{i}\"\nbackend = \"{backend}\"\nuri = \"{uri}\"\nconnect_timeout = \"2s\"\n");
    }
    job += "[[workload]]\nname = \"w\"\nsizes = [100]\nobjects = 5\nphases = [\"put\"]\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["validate", "job.toml"]).current_dir(dir.path()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 5, "{said}");
    for (i, says) in
        ["\"no_such_database\" does not exist", "ERROR 1045 (28000): Access denied", "nosuchoption is an invalid option", "nothing answers at 127.0.0.1:1"]
            .iter()
            .enumerate()
    {
        let line = lines[i];
        assert!(line.contains(&format!("job.toml:{}:1: target \"t{i}\"", 5 * i + 5)) && line.to_lowercase().contains(&says.to_lowercase()), "{line}");
        assert_eq!(line.contains("nothing answers"), i == 3, "{line}");
    }
    for dump in ["MySqlError {", "DriverError {", "labels:", "source: None", "Kind:", "wrong-password"] {
        assert!(!said.contains(dump), "{dump}: {said}");
    }
    assert_eq!(lines[4], "3 mistakes in job.toml; 1 target's server does not answer");
}
