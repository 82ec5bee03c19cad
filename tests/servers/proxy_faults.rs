//! A fault-injecting TCP proxy between stowbench and each server: replies delayed past the
//! operation deadline, connections reset, a black hole. Each operation fails within its
//! `op_timeout`, the run within its `--timeout`; and a put whose reply is lost after it committed
//! is retried without leaving a duplicate.
//!
//! The proxy runs in the test process; the job switches its fault with a phase's `before`
//! command, which writes the fault's name into a file the proxy watches. So the fault starts at
//! the same point on any machine: after the puts, before the gets.

use crate::common;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PASS: u8 = 0;
const DELAY: u8 = 1;
const BLACK_HOLE: u8 = 2;
const RESET: u8 = 3;
/// Forward a request holding the marker, then lose the server's reply and reset the client:
/// the write committed, the client cannot know.
const LOSE_REPLY: u8 = 4;

/// How long a delayed reply waits: well past the jobs' op_timeout of 1 s.
const REPLY_DELAY: Duration = Duration::from_secs(4);

struct Proxy {
    port: u16,
    mode_file: PathBuf,
    stop: Arc<AtomicBool>,
    /// Replies lost in LOSE_REPLY mode.
    lost: Arc<AtomicU32>,
}

struct Shared {
    mode: AtomicU8,
    marker: Vec<u8>,
    /// LOSE_REPLY: how many replies to lose (then it passes).
    to_lose: AtomicU32,
    lost: Arc<AtomicU32>,
}

impl Proxy {
    /// A proxy to 127.0.0.1:`upstream`, watching `dir/fault` for its mode ("pass", "delay",
    /// "black-hole", "reset", "lose-reply"); `marker` names the requests whose replies
    /// "lose-reply" loses (`lose` of them).
    fn start(upstream: u16, dir: &Path, marker: &[u8], lose: u32) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode_file = dir.join("fault");
        std::fs::write(&mode_file, "pass").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicU32::new(0));
        let shared = Arc::new(Shared { mode: AtomicU8::new(PASS), marker: marker.to_vec(), to_lose: AtomicU32::new(lose), lost: lost.clone() });
        let (watched, watcher_stop, file) = (shared.clone(), stop.clone(), mode_file.clone());
        std::thread::spawn(move || {
            while !watcher_stop.load(Ordering::Relaxed) {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                let mode = match text.trim() {
                    "delay" => DELAY,
                    "black-hole" => BLACK_HOLE,
                    "reset" => RESET,
                    "lose-reply" => LOSE_REPLY,
                    _ => PASS,
                };
                watched.mode.store(mode, Ordering::Relaxed);
                // The job's hook waits for this: the fault is on before its phase starts.
                let ack = file.with_extension("ack");
                if std::fs::read_to_string(&ack).unwrap_or_default() != text {
                    std::fs::write(&ack, &text).unwrap();
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let accept_stop = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accept_stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || relay(client, upstream, shared));
            }
        });
        Proxy { port, mode_file, stop, lost }
    }

    fn set(&self, mode: &str) {
        std::fs::write(&self.mode_file, mode).unwrap();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
    }
}

/// Sends a TCP reset instead of a FIN when `stream` is closed.
fn reset_on_close(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt with a valid fd and a correctly sized value.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    };
}

fn relay(client: TcpStream, upstream: u16, shared: Arc<Shared>) {
    match shared.mode.load(Ordering::Relaxed) {
        RESET => return reset_on_close(&client),
        BLACK_HOLE => return swallow(client),
        _ => {}
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { return reset_on_close(&client) };
    let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    // Set when a request with the marker went up in LOSE_REPLY mode: its reply must not come back.
    let armed = Arc::new(AtomicBool::new(false));
    let (up_armed, up_shared) = (armed.clone(), shared.clone());
    let up = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            match up_shared.mode.load(Ordering::Relaxed) {
                BLACK_HOLE => continue,
                RESET => break,
                LOSE_REPLY
                    if carries(&buf[..n], &up_shared.marker)
                        && up_shared.to_lose.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).is_ok() =>
                {
                    up_armed.store(true, Ordering::Relaxed);
                }
                _ => {}
            }
            if to_server.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(Shutdown::Both);
    });
    let (mut from_server, mut to_client) = (server, client);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from_server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match shared.mode.load(Ordering::Relaxed) {
            BLACK_HOLE => continue,
            RESET => break,
            DELAY => std::thread::sleep(REPLY_DELAY),
            _ if armed.load(Ordering::Relaxed) => {
                shared.lost.fetch_add(1, Ordering::Relaxed);
                break;
            }
            _ => {}
        }
        if to_client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    reset_on_close(&to_client);
    let _ = to_client.shutdown(Shutdown::Read); // ends the other direction's read
    let _ = from_server.shutdown(Shutdown::Both);
    let _ = up.join();
}

/// Whether a request carries the marker; an empty marker means a request of at least 4 KiB (a
/// put's value, for protocols whose committing message has no fixed text).
fn carries(request: &[u8], marker: &[u8]) -> bool {
    if marker.is_empty() {
        request.len() >= 4096
    } else {
        request.windows(marker.len()).any(|w| w == marker)
    }
}

/// A black hole: the connection stays open, whatever comes in vanishes, nothing comes back.
fn swallow(mut client: TcpStream) {
    let mut buf = [0u8; 64 * 1024];
    while matches!(client.read(&mut buf), Ok(n) if n > 0) {}
}

/// One server target behind the proxy.
struct Target {
    backend: &'static str,
    options: &'static str,
    uri_var: &'static str,
    default_port: u16,
    /// Bytes that only a put's committing request carries (for "lose-reply").
    commit_marker: &'static [u8],
}

const TARGETS: &[Target] = &[
    Target { backend: "postgres", options: "mode = \"bytea\"", uri_var: "STOWBENCH_PG_URI", default_port: 5432, commit_marker: b"COMMIT" },
    Target { backend: "postgres", options: "mode = \"lo\"", uri_var: "STOWBENCH_PG_URI", default_port: 5432, commit_marker: b"COMMIT" },
    Target { backend: "mariadb", options: "", uri_var: "STOWBENCH_MARIADB_URI", default_port: 3306, commit_marker: b"" }, // a prepared INSERT's execution carries the value, not the SQL
    Target { backend: "s3", options: "", uri_var: "STOWBENCH_S3_ENDPOINT", default_port: 80, commit_marker: b"PUT /" },
    Target { backend: "gridfs", options: "", uri_var: "STOWBENCH_MONGO_URI", default_port: 27017, commit_marker: b".files\0" },
];

/// A MongoDB URI whose driver checks the server every 500 ms (its least) instead of every 10 s, so
/// a healed network is noticed within the test's phase; other URIs as they are.
fn monitored(t: &Target, uri: String) -> String {
    if t.backend != "gridfs" {
        return uri;
    }
    let after_scheme = uri.find("://").map_or(0, |i| i + 3);
    let separator = if uri.contains('?') {
        "&"
    } else if uri[after_scheme..].contains('/') {
        "?"
    } else {
        "/?"
    };
    format!("{uri}{separator}heartbeatFrequencyMS=500")
}

/// The target's URI with its port replaced by the proxy's.
fn proxied(uri: &str, default_port: u16, proxy_port: u16) -> String {
    let (_, port) = stowbench::backend::server::host_port(uri, default_port).unwrap();
    let needle = format!(":{port}");
    assert_eq!(uri.matches(&needle).count(), 1, "the port appears once in the test URI");
    uri.replace(&needle, &format!(":{proxy_port}"))
}

fn job(t: &Target, uri: &str, workload: &str) -> String {
    format!("version = 1\n[[target]]\nname = \"t\"\nbackend = \"{}\"\n{}\nuri = \"{uri}\"\n[[workload]]\nname = \"w\"\n{workload}", t.backend, t.options)
}

struct Outcome {
    code: Option<i32>,
    report: serde_json::Value,
    output: String,
    wall: Duration,
}

fn run(dir: &Path, job_text: &str, extra: &[&str]) -> Outcome {
    std::fs::write(dir.join("job.toml"), job_text).unwrap();
    let started = Instant::now();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench"));
    std::fs::create_dir_all(dir.join("work")).unwrap();
    command.args(["run", "job.toml", "--no-progress", "--out", "out", "--work-dir", "work"]).args(extra).current_dir(dir);
    command.env_remove("STOWBENCH_SERVICES_DIR");
    let out = command.output().unwrap();
    let wall = started.elapsed();
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report_dir = std::fs::read_dir(dir.join("out")).unwrap().flatten().max_by_key(|e| e.file_name()).unwrap().path();
    let report = common::assert_valid_report(&report_dir.join("report.json"));
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    Outcome { code: out.status.code(), report, output, wall }
}

/// A phase's `before` key that switches the proxy to `mode` and waits until it has.
fn set_fault(mode: &str, mode_file: &Path) -> String {
    let (file, ack) = (mode_file.display(), mode_file.with_extension("ack").display().to_string());
    format!("before = [\"sh\", \"-c\", \"echo {mode} > {file}; until [ \\\"$(cat {ack})\\\" = {mode} ]; do sleep 0.01; done\"]")
}

/// Puts 8 objects through a healthy proxy, then 4 gets (2 per worker) under `fault`, then heals
/// the proxy for a last phase of 20 heads (reconnecting) so the case's cleanup reaches the server.
fn fault_workload(fault: &str, mode_file: &Path) -> String {
    let set = |mode: &str| set_fault(mode, mode_file);
    format!(
        "sizes = [\"4KiB\"]\nobjects = 8\nthreads = [2]\nop_timeout = \"1s\"\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\ncount = 8\n\
         [[workload.phase]]\nmix = {{ get = 1 }}\ncount = 4\nsplit = \"even\"\n{}\n\
         [[workload.phase]]\nmix = {{ head = 1 }}\ncount = 20\nsplit = \"even\"\n{}\n",
        set(fault),
        set("pass")
    )
}

#[test]
fn every_operation_fails_within_its_deadline_behind_a_faulty_network() {
    if !TARGETS.iter().all(|t| super::available(t.uri_var)) {
        return;
    }
    for t in TARGETS {
        let uri = std::env::var(t.uri_var).unwrap();
        let (_, upstream) = stowbench::backend::server::host_port(&uri, t.default_port).unwrap();
        for fault in ["delay", "black-hole", "reset"] {
            let what = format!("{} {} behind a {fault} proxy", t.backend, t.options);
            let dir = tempfile::tempdir().unwrap();
            let proxy = Proxy::start(upstream, dir.path(), b"", 0);
            let text = job(t, &monitored(t, proxied(&uri, t.default_port, proxy.port)), &fault_workload(fault, &proxy.mode_file));
            let outcome = run(dir.path(), &text, &["--timeout", "60s"]);
            assert_eq!(outcome.code, Some(1), "{what}: {}", outcome.output);
            let phases = &outcome.report["cases"][0]["phases"];
            let (put, get, head) = (&phases[0]["ops"]["put"], &phases[1]["ops"]["get"], &phases[2]["ops"]["head"]);
            assert_eq!(put["count"].as_u64(), Some(8), "{what}: the puts went through: {put}");
            let errors = get["errors"].as_object().unwrap_or_else(|| panic!("{what}: no get errors: {get}"));
            assert_eq!(errors.values().map(|v| v.as_u64().unwrap()).sum::<u64>(), 4, "{what}: every get failed: {get}");
            // S3's cut reaches every connection to the server, so a neighbour's operation in
            // flight may end as a lost connection instead of its own time-out. (GridFS abandons
            // only the overdue session's operation.)
            let pooled = t.backend == "s3";
            let expected = if fault == "reset" || pooled { ["connection", "timeout"].as_slice() } else { ["timeout"].as_slice() };
            assert!(errors.keys().all(|k| expected.contains(&k.as_str())), "{what}: failures by kind {expected:?}: {get}");
            // Two gets per worker, each cut at 1 s: the phase ends within 2 × (1 s + slack).
            let window = phases[1]["window_total_ns"].as_u64().unwrap() as f64 / 1e9;
            assert!(window < 2.0 * 2.5, "{what}: the gets took {window} s against an op_timeout of 1 s");
            if fault != "reset" {
                assert!(window >= 0.9, "{what}: a silent server is waited for up to the deadline, not {window} s");
            }
            // A client notices the healed network on its own schedule (the MongoDB driver's monitor
            // checks every 500 ms here): some heads may still fail, each within op_timeout.
            assert!(head["count"].as_u64().unwrap_or(0) >= 1, "{what}: the sessions reconnect once the network heals: {head}");
            assert!(outcome.wall < Duration::from_secs(60), "{what}: the run took {:?}", outcome.wall);
        }
    }
}

/// PostgreSQL (bytea) behind a proxy of its own, in a directory of its own; None (after saying
/// why) without the service.
fn postgres_behind_a_proxy() -> Option<(&'static Target, String, tempfile::TempDir, Proxy)> {
    if !super::available("STOWBENCH_PG_URI") {
        return None;
    }
    let t = &TARGETS[0];
    let uri = std::env::var(t.uri_var).unwrap();
    let (_, upstream) = stowbench::backend::server::host_port(&uri, t.default_port).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(upstream, dir.path(), b"", 0);
    Some((t, uri, dir, proxy))
}

/// Without op_timeout, a black-holed PostgreSQL connection would hold its worker for ever; the
/// run's own --timeout still ends the run, with the report of what finished.
#[test]
fn the_run_ends_within_its_own_deadline_when_an_operation_never_returns() {
    let Some((t, uri, dir, proxy)) = postgres_behind_a_proxy() else { return };
    let workload = fault_workload("black-hole", &proxy.mode_file).replace("op_timeout = \"1s\"\n", "");
    let outcome = run(dir.path(), &job(t, &proxied(&uri, t.default_port, proxy.port), &workload), &["--timeout", "3s"]);
    assert_eq!(outcome.code, Some(1), "{}", outcome.output);
    assert_eq!(outcome.report["status"], "timed_out", "{}", outcome.output);
    assert!(outcome.output.contains("--timeout"), "{}", outcome.output);
    // 3 s, then the grace for blocked operations (10 s), then exit: well under a minute.
    assert!(outcome.wall < Duration::from_secs(3 + 10 + 10), "the run took {:?}", outcome.wall);
    // What the ended process left (its table behind the proxy, the case's directory) is what
    // `stowbench cleanup` is for, once the network heals.
    heal_and_clean_up(&proxy, dir.path(), &outcome.output);
}

/// Heals the proxy and runs `stowbench cleanup` on the run's data, as the run's message says.
fn heal_and_clean_up(proxy: &Proxy, dir: &Path, output: &str) {
    proxy.set("pass");
    while std::fs::read_to_string(proxy.mode_file.with_extension("ack")).unwrap_or_default() != "pass" {
        std::thread::sleep(Duration::from_millis(5));
    }
    let work = dir.join("work");
    assert!(output.contains("stowbench cleanup"), "the run says how to remove what it left: {output}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["cleanup"]).arg(&work).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("removed"), "{text}");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "nothing of the run is left in {}: {text}", work.display());
}

/// The put's committing request reaches the server, its reply is lost and the connection reset:
/// the client retries a put that is already stored. Afterwards every key has exactly one
/// object on the server and every get verifies.
#[test]
fn a_retried_put_whose_first_attempt_committed_leaves_no_duplicate() {
    if !TARGETS.iter().all(|t| super::available(t.uri_var)) {
        return;
    }
    for t in TARGETS {
        let what = format!("{} {}", t.backend, t.options);
        let uri = std::env::var(t.uri_var).unwrap();
        let (_, upstream) = stowbench::backend::server::host_port(&uri, t.default_port).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let proxy = Proxy::start(upstream, dir.path(), t.commit_marker, 3);
        let set = set_fault("lose-reply", &proxy.mode_file);
        let workload = format!(
            "sizes = [\"4KiB\"]\nobjects = 12\nthreads = [1]\nretries = 3\nop_timeout = \"5s\"\n\
             [[workload.phase]]\nmix = {{ put = 1 }}\ncount = 12\n{set}\n\
             [[workload.phase]]\nmix = {{ get = 1 }}\ncount = 12\n"
        );
        let outcome = run(dir.path(), &job(t, &proxied(&uri, t.default_port, proxy.port), &workload), &["--keep"]);
        let case = &outcome.report["cases"][0];
        if outcome.code != Some(0) {
            count_and_remove_kept(t, case);
        }
        assert_eq!(outcome.code, Some(0), "{what}: {}", outcome.output);
        assert_eq!(proxy.lost.load(Ordering::Relaxed), 3, "{what}: the proxy lost three committed replies");
        let put = &case["phases"][0]["ops"]["put"];
        assert!(put["retries"].as_u64().unwrap() >= 3, "{what}: each lost reply was retried: {put}");
        assert_eq!(case["phases"][1]["ops"]["get"]["count"].as_u64(), Some(12), "{what}");
        assert_eq!(case["verification"]["mismatches"].as_u64(), Some(0), "{what}");
        // One object per key on the server, none left over from a first attempt.
        assert_eq!(count_and_remove_kept(t, case), 12, "{what}: objects on the server for 12 keys");
    }
}

/// How many objects a kept case holds on its server (rows, S3 objects, GridFS files); then
/// removes them, as the case's cleanup would have.
fn count_and_remove_kept(t: &Target, case: &serde_json::Value) -> u64 {
    use super::inspect;
    use mysql::prelude::Queryable;
    let opts = &case["backend_info"]["options"];
    let text = |key: &str| opts[key].as_str().unwrap_or_else(|| panic!("backend_info has {key}: {opts}")).to_string();
    match t.backend {
        "postgres" => {
            let table = text("table");
            let mut pg = inspect::pg();
            let n: i64 = pg.query_one(&format!("SELECT count(*) FROM {table}"), &[]).unwrap().get(0);
            let unlink = if t.options.contains("lo") { format!("SELECT lo_unlink(loid) FROM {table}; ") } else { String::new() };
            pg.batch_execute(&format!("{unlink}DROP TABLE {table}")).unwrap();
            n as u64
        }
        "mariadb" => {
            let table = text("table");
            let (db, name) = table.split_once('.').unwrap();
            let mut maria = inspect::maria();
            let n: u64 = maria.query_first(format!("SELECT COUNT(*) FROM `{db}`.`{name}`")).unwrap().unwrap();
            maria.query_drop(format!("DROP TABLE `{db}`.`{name}`")).unwrap();
            n
        }
        "s3" => {
            use futures_util::StreamExt;
            use object_store::{ObjectStore, ObjectStoreExt};
            let prefix = object_store::path::Path::from(text("prefix").trim_end_matches('/'));
            let (rt, store) = inspect::s3();
            rt.block_on(async {
                let names: Vec<_> = store.list(Some(&prefix)).map(|m| m.unwrap().location).collect().await;
                for name in &names {
                    store.delete(name).await.unwrap();
                }
                names.len() as u64
            })
        }
        _ => {
            let bucket = text("bucket");
            let client = mongodb::sync::Client::with_uri_str(std::env::var(t.uri_var).unwrap()).unwrap();
            let db = client.database(&text("database"));
            let files = db.collection::<mongodb::bson::Document>(&format!("{bucket}.files"));
            let n = files.count_documents(mongodb::bson::doc! {}).run().unwrap();
            files.drop().run().unwrap();
            db.collection::<mongodb::bson::Document>(&format!("{bucket}.chunks")).drop().run().unwrap();
            n
        }
    }
}

/// A server that refuses every connection for good (the proxy resets them all): a 60 s phase
/// ends once every worker has seen nothing but failures for `give_up_after`, instead of
/// spinning through connection errors for a minute.
#[test]
fn workers_give_up_on_a_server_that_refuses_everything() {
    let Some((t, uri, dir, proxy)) = postgres_behind_a_proxy() else { return };
    let workload = format!(
        "sizes = [\"4KiB\"]\nobjects = 8\nthreads = [2]\ngive_up_after = \"2s\"\nretries = 2\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\ncount = 8\n\
         [[workload.phase]]\nmix = {{ get = 1 }}\nduration = \"60s\"\n{}\n\
         [[workload.phase]]\nmix = {{ get = 1 }}\ncount = 8\n",
        set_fault("reset", &proxy.mode_file)
    );
    let started = Instant::now();
    let outcome = run(dir.path(), &job(t, &proxied(&uri, t.default_port, proxy.port), &workload), &[]);
    assert_eq!(outcome.code, Some(1), "{}", outcome.output);
    let case = &outcome.report["cases"][0];
    let phases = case["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "the phase after the one every worker gave up in is skipped");
    assert_eq!(phases[1]["gave_up_workers"].as_u64(), Some(2), "{}", phases[1]);
    let failure = case["failure"].as_str().unwrap();
    assert!(failure.starts_with("gave up in phase"), "{failure}");
    assert!(started.elapsed() < Duration::from_secs(30), "the run took {:?}", started.elapsed());
    // The case's own cleanup could not reach the server either (it says so after the verdict):
    // the run keeps the case's directory for `stowbench cleanup`.
    assert!(failure.contains("cleanup failed"), "{failure}");
    heal_and_clean_up(&proxy, dir.path(), &outcome.output);
}

/// The file server (E5) over a server behind a black hole: an upload or download spans the
/// catalog's connection and the store's, and op_timeout cuts both, so each download fails as a
/// time-out within its deadline; once the network heals the same sessions download again.
#[test]
fn file_server_operations_fail_within_their_deadline_behind_a_black_hole() {
    if !TARGETS.iter().all(|t| super::available(t.uri_var)) {
        return;
    }
    for t in TARGETS.iter().filter(|t| t.options != "mode = \"lo\"") {
        let what = format!("the file server on {} behind a black hole", t.backend);
        let uri = std::env::var(t.uri_var).unwrap();
        let (_, upstream) = stowbench::backend::server::host_port(&uri, t.default_port).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let proxy = Proxy::start(upstream, dir.path(), b"", 0);
        let workload = format!(
            "sizes = [\"4KiB\"]\nobjects = 8\nthreads = [2]\nop_timeout = \"1s\"\n\
             [[workload.phase]]\nmix = {{ upload = 1 }}\ncount = 8\n\
             [[workload.phase]]\nmix = {{ download = 1 }}\ncount = 4\nsplit = \"even\"\n{}\n\
             [[workload.phase]]\nmix = {{ download = 1 }}\ncount = 20\nsplit = \"even\"\n{}\n",
            set_fault("black-hole", &proxy.mode_file),
            set_fault("pass", &proxy.mode_file)
        );
        let outcome = run(dir.path(), &job(t, &monitored(t, proxied(&uri, t.default_port, proxy.port)), &workload), &["--timeout", "60s"]);
        assert_eq!(outcome.code, Some(1), "{what}: {}", outcome.output);
        let phases = &outcome.report["cases"][0]["phases"];
        let (upload, download, healed) = (&phases[0]["ops"]["upload"], &phases[1]["ops"]["download"], &phases[2]["ops"]["download"]);
        assert_eq!(upload["count"].as_u64(), Some(8), "{what}: the uploads went through: {upload}");
        let errors = download["errors"].as_object().unwrap_or_else(|| panic!("{what}: no download errors: {download}"));
        assert_eq!(errors.values().map(|v| v.as_u64().unwrap()).sum::<u64>(), 4, "{what}: every download failed: {download}");
        let pooled = t.backend == "s3"; // as in every_operation_fails_within_its_deadline_behind_a_faulty_network
        let expected = if pooled { ["connection", "timeout"].as_slice() } else { ["timeout"].as_slice() };
        assert!(errors.keys().all(|k| expected.contains(&k.as_str())), "{what}: failures by kind {expected:?}: {download}");
        let window = phases[1]["window_total_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!((0.9..2.0 * 2.5).contains(&window), "{what}: two downloads per worker, each cut at 1 s, took {window} s");
        assert!(healed["count"].as_u64().unwrap_or(0) >= 1, "{what}: the catalog and store reconnect once the network heals: {healed}");
        assert!(outcome.wall < Duration::from_secs(60), "{what}: the run took {:?}", outcome.wall);
    }
}
