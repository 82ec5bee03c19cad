//! Server backends (postgres, mariadb, s3, gridfs) against the real servers started by
//! scripts/services.sh. The shared behaviours run in tests/conformance.rs like every backend's;
//! this file checks what only a server can get wrong —
//! cleanup leaves none of our tables, large objects, objects or GridFS files on the server and
//! never touches anyone else's; size limits are refused before any data; an end-to-end run fills
//! the server figures; and no secret ever reaches an output.
//!
//! A service whose environment variable is missing skips its tests with a loud message; with
//! CI=true it fails them. Run: `eval "$(scripts/services.sh env)"; cargo test --release --test servers`.

mod common;

use stowbench::backend::options::Options;
use stowbench::backend::server::owned_name;
use stowbench::backend::{Backend, Namespace, Session};

/// Whether the service behind `env` is configured; fails in CI, skips loudly elsewhere.
fn available(env: &str) -> bool {
    if std::env::var(env).is_ok_and(|v| !v.trim().is_empty()) {
        return true;
    }
    assert!(!common::in_ci(), "{env} is not set and CI=true: run scripts/services.sh start and eval \"$(scripts/services.sh env)\"");
    eprintln!("SKIPPED: {env} is not set — start the services (scripts/services.sh start; eval \"$(scripts/services.sh env)\") to run this test");
    false
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"))
}


// ---- fixtures ----

struct Fixture {
    backend: Box<dyn Backend>,
    ns: Namespace,
    _tmp: tempfile::TempDir,
}

fn options(text: &str) -> Options {
    Options::new("servers-test", "tests/servers.rs", toml::from_str(text).expect("test options are TOML"))
}

fn fixture(backend: &str, opts: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let run_id = format!("servers-{}-{:?}", std::process::id(), std::time::Instant::now());
    let ns = Namespace::create(&tmp.path().join("ns"), &run_id, "case").unwrap();
    let kind = stowbench::backend::find(backend).unwrap();
    let b = (kind.construct)(&options(opts), &ns).unwrap_or_else(|e| panic!("construct {backend}: {e}"));
    b.prepare().unwrap_or_else(|e| panic!("prepare {backend}: {e}"));
    Fixture { backend: b, ns, _tmp: tmp }
}

impl Fixture {
    fn session(&self, worker: usize) -> Box<dyn Session> {
        self.backend.open_session(worker).unwrap_or_else(|e| panic!("open_session: {e}"))
    }
    fn owned(&self) -> String {
        owned_name(&self.ns)
    }
}

fn put(s: &mut dyn Session, key: &str, seed: u64, len: u64) {
    s.put(key, &mut common::PayloadReader::new(seed, len), len).unwrap_or_else(|e| panic!("put {key:?} ({len} bytes): {e}"));
}

// ---- what only a server can get wrong ----

fn cleanup_removes_ours_and_only_ours(f: &Fixture, server: Server) {
    let owned = f.owned();
    let foreign = server.make_foreign(&owned);
    let mut s = f.session(0);
    for (i, len) in [0u64, 10, 1_048_577, 3_000_000].into_iter().enumerate() {
        put(&mut *s, &format!("c/{i}"), 30 + i as u64, len);
    }
    put(&mut *s, "c/1", 40, 20); // an overwrite leaves no orphan either
    drop(s);
    assert!(!server.ours(&owned).is_empty(), "the test must see our server-side objects before cleanup");
    f.backend.cleanup().expect("cleanup");
    assert_eq!(server.ours(&owned), Vec::<String>::new(), "cleanup left server-side objects behind");
    assert!(server.foreign_alive(&foreign), "cleanup touched objects it did not create: {foreign:?}");
    server.drop_foreign(&foreign);
    f.backend.cleanup().expect("a second cleanup is harmless");
    let left: Vec<String> = std::fs::read_dir(&f.ns.dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec![stowbench::backend::namespace::MARKER_FILE.to_string()], "cleanup left local files behind");
}

/// One cleanup check per configuration (the other behaviours are in tests/conformance.rs).
macro_rules! cleanup_check {
    ($module:ident, $backend:expr, $options:expr, $server:expr) => {
        #[test]
        fn $module() {
            if available($server.env()) {
                cleanup_removes_ours_and_only_ours(&fixture($backend, $options), $server);
            }
        }
    };
}

cleanup_check!(postgres_bytea_cleanup, "postgres", "mode = \"bytea\"", Server::Pg);
cleanup_check!(postgres_lo_cleanup, "postgres", "mode = \"lo\"", Server::Pg);
cleanup_check!(postgres_file_cleanup, "postgres", "mode = \"file\"", Server::Pg);
cleanup_check!(mariadb_cleanup, "mariadb", "", Server::Maria);
cleanup_check!(s3_cleanup, "s3", "", Server::S3);
cleanup_check!(s3_multipart_cleanup, "s3", "multipart_threshold = \"1MiB\"\npart_size = \"5MiB\"", Server::S3);
cleanup_check!(gridfs_cleanup, "gridfs", "", Server::Mongo);

#[path = "servers/inspect.rs"]
mod inspect;
use inspect::Server;

#[path = "servers/end_to_end.rs"]
mod end_to_end;

/// The port of a URI like scheme://user@host:PORT/db.
fn inspect_port(uri: &str) -> u16 {
    stowbench::backend::server::host_port(uri, 0).expect("URI with a port").1
}

// ---- recipes against the real servers ----

/// E1 at a tiny scale on PostgreSQL (bytea, large objects, row + file) and MariaDB: every
/// server target runs (none skipped), each case is E1's put-then-read sequence, and the report
/// carries the published layout's mean times.
#[test]
fn e1_recipe_runs_every_server_target_at_a_tiny_scale() {
    if !available("STOWBENCH_PG_URI") || !available("STOWBENCH_MARIADB_URI") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let targets = "postgres-bytea,postgres-lo,postgres-file,mariadb";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["recipe", "run", "e1-filestream", "--scale", "0.01", "--targets", targets, "--no-progress", "--format", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["recipe"]["skipped_targets"].as_array().map(Vec::len), Some(0), "{text}");
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4 * 11, "4 server targets × 11 sizes");
    for case in cases {
        assert_eq!(case["status"], "ok", "{case}");
        let phase = &case["phases"][0];
        assert_eq!(phase["phase"], "sequence put-get");
        assert_eq!(phase["ops"]["put"]["count"], phase["ops"]["get"]["count"], "one read back per insert: {case}");
    }
}
