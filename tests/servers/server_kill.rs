//! `kill -9` of each server in the middle of a run with 20 workers: PostgreSQL (bytea and large
//! objects), MariaDB, MinIO and FerretDB. The run does not hang, every failed operation is
//! counted by kind, retries stay within the policy's bounds, the run exits 1 with one clear line
//! for the failed case, and what was measured before the kill is kept.
//!
//! The kill is the read phase's `before` command, so it lands at the same point on any machine:
//! after 20 workers wrote every object, with their connections open. It kills the server and its
//! children in one `kill`: a PostgreSQL backend outlives its postmaster until it notices, and
//! would serve a few more reads in some runs.
//!
//! The case could not remove its objects from the dead server, so the run keeps its directory with
//! the record of them: `stowbench cleanup` fails (exit 1, naming the server) while the server is
//! down, and once it is back (`scripts/services.sh restart` starts a killed service again on its
//! port, with its data) removes every row, large object, S3 object and multipart upload and GridFS
//! chunk of the run — the test looks at the server itself to see that none is left.

use super::cold_restart::{script, PrivateServices};
use crate::common;
use std::path::Path;
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
        std::fs::create_dir(work.path().join("work")).unwrap();
        let pid_var = format!("STOWBENCH_{}_PID", t.service.to_uppercase());
        let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
        command.args(["run", "job.toml", "--no-progress", "--work-dir", "work", "--out", "out"]).env("SERVER_PID", services.value(t.service, &pid_var));
        command.env_remove("STOWBENCH_SERVICES_DIR").current_dir(work.path());
        private_env(&mut command, &services, t.service);
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
        assert_eq!(
            (put["count"].as_u64(), put["errors"].as_object().map(|e| e.len())),
            (Some(t.objects), Some(0)),
            "{what}: the puts before the kill are kept: {put}"
        );
        let errors = get["errors"].as_object().unwrap();
        let failed: u64 = errors.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!((get["count"].as_u64(), failed), (Some(0), t.objects), "{what}: every get failed and is counted by kind: {get}");
        assert!(errors.keys().all(|kind| kind == "connection" || kind == "timeout"), "{what}: a dead server is a connection error or a time-out: {get}");
        assert!(get["retries"].as_u64().unwrap() <= 3 * failed, "{what}: at most `retries` per failed get: {get}");
        // The killed server took its CPU counters with it: unknown, not 0, and said so.
        let resources = &case["resources"];
        assert!(resources["server_cpu_ns"].is_null() && !resources["server_pids_lost"].as_array().unwrap().is_empty(), "{what}: {resources}");
        assert!(report["warnings"].as_array().unwrap().iter().any(|w| w["kind"] == "server_lost"), "{what}: {}", report["warnings"]);
        clean_up_once_the_server_is_back(t, &services, work.path());
    }
}

/// The private service's variables (its URI and, for MinIO, its own secret) for stowbench.
fn private_env(command: &mut Command, services: &PrivateServices, service: &str) {
    command.env(uri_var(service), services.value(service, uri_var(service)));
    if service == "s3" {
        for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "STOWBENCH_S3_BUCKET", "STOWBENCH_S3_REGION"] {
            command.env(var, services.value("s3", var));
        }
    }
}

fn cleanup(t: &Target, services: &PrivateServices, work: &Path) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    command.args(["cleanup", "work"]).current_dir(work).env_remove("STOWBENCH_SERVICES_DIR");
    private_env(&mut command, services, t.service);
    let out = command.output().unwrap();
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn clean_up_once_the_server_is_back(t: &Target, services: &PrivateServices, work: &Path) {
    let what = format!("{} {}", t.backend, t.options);
    let run = std::fs::read_dir(work.join("work")).unwrap().flatten().map(|e| e.path()).next().expect("the run kept its directory");
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("case-0000/.stowbench-server.json")).unwrap()).unwrap();
    let owned = record["owns"]["owned_name"].as_str().unwrap().to_string();

    let (code, text) = cleanup(t, services, work);
    assert_eq!(code, Some(1), "{what}: the server is still down: {text}");
    assert!(text.contains("cannot clean up") && text.contains("kept") && run.exists(), "{what}: {text}");
    // The URI is the variable's (it names the recorded server), and the message says so.
    assert!(text.contains(&format!("(env {})", uri_var(t.service))) && !text.contains("option uri"), "{what}: {text}");
    assert!(text.contains("answers\n"), "{what}: try again once the server answers: {text}");

    let out = Command::new(script()).args(["restart", "--only", t.service]).arg(services.dir.path()).output().unwrap();
    assert!(out.status.success(), "{what}: services.sh restart: {}", String::from_utf8_lossy(&out.stderr));
    let left = leftovers(t.service, services, &owned);
    assert!(left.iter().any(|(_, n)| *n > 0), "{what}: the run's objects are on the server: {left:?}");

    let (code, text) = cleanup(t, services, work);
    assert_eq!(code, Some(0), "{what}: {text}");
    assert!(text.contains("removed ") && !run.exists(), "{what}: {text}");
    let left = leftovers(t.service, services, &owned);
    assert!(left.iter().all(|(_, n)| *n == 0), "{what}: nothing of the run is left: {left:?}");
}

/// What the private server holds of the run, looked at directly: (what, how many).
fn leftovers(service: &str, services: &PrivateServices, owned: &str) -> Vec<(&'static str, u64)> {
    let uri = services.value(service, uri_var(service));
    let like = format!("{owned}%");
    match service {
        "pg" => {
            let mut c = postgres::Client::connect(&uri, postgres::NoTls).unwrap();
            let mut n = |sql: &str, p: &[&(dyn postgres::types::ToSql + Sync)]| c.query_one(sql, p).unwrap().get::<_, i64>(0) as u64;
            let tables = n("SELECT count(*) FROM pg_class WHERE relname LIKE $1", &[&like]);
            // The private server holds nothing else: every large object there would be an orphan.
            vec![("tables", tables), ("large objects", n("SELECT count(*) FROM pg_largeobject_metadata", &[]))]
        }
        "mariadb" => {
            use mysql::prelude::Queryable;
            let mut c = mysql::Conn::new(mysql::Opts::from_url(&uri).unwrap()).unwrap();
            let sql = "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE ?";
            vec![("tables", c.exec_first::<u64, _, _>(sql, (like.as_str(),)).unwrap().unwrap_or(0))]
        }
        "s3" => {
            use futures_util::StreamExt;
            use object_store::ObjectStore;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let store = object_store::aws::AmazonS3Builder::new()
                .with_endpoint(&uri)
                .with_bucket_name(services.value("s3", "STOWBENCH_S3_BUCKET"))
                .with_region(services.value("s3", "STOWBENCH_S3_REGION"))
                .with_access_key_id(services.value("s3", "AWS_ACCESS_KEY_ID"))
                .with_secret_access_key(services.value("s3", "AWS_SECRET_ACCESS_KEY"))
                .with_allow_http(true)
                .build()
                .unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let prefix = object_store::path::Path::from(owned);
            let objects = rt.block_on(async { store.list(Some(&prefix)).collect::<Vec<_>>().await.len() as u64 });
            // MinIO keeps an incomplete upload's parts under .minio.sys/multipart.
            let multipart = Path::new(&services.value("s3", "STOWBENCH_S3_DATA")).join(".minio.sys/multipart");
            let files = walk_files(&multipart);
            vec![("objects", objects), ("multipart upload files", files)]
        }
        _ => {
            let db = mongodb::sync::Client::with_uri_str(&uri).unwrap().database("stowbench");
            let ours: Vec<String> = db.list_collection_names().run().unwrap().into_iter().filter(|n| n.starts_with(owned)).collect();
            let chunks: u64 = ours
                .iter()
                .filter(|n| n.ends_with(".chunks"))
                .map(|n| db.collection::<mongodb::bson::Document>(n).count_documents(mongodb::bson::doc! {}).run().unwrap())
                .sum();
            vec![("collections", ours.len() as u64), ("chunks", chunks)]
        }
    }
}

fn walk_files(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().map(|e| if e.file_type().is_ok_and(|t| t.is_dir()) { walk_files(&e.path()) } else { 1 }).sum()
}
