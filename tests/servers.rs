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

use common::available;

use stowbench::backend::options::Options;
use stowbench::backend::server::owned_name;
use stowbench::backend::{Backend, ErrorKind, Namespace, Session};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"))
}

// ---- fixtures ----

struct Fixture {
    backend: Box<dyn Backend>,
    ns: Namespace,
    _tmp: Option<tempfile::TempDir>,
}

/// Cleans up before the temporary directory goes: a server must never lose a tablespace
/// directory it still uses (cleanup is harmless a second time).
impl Drop for Fixture {
    fn drop(&mut self) {
        if let Err(e) = self.backend.cleanup() {
            eprintln!("fixture cleanup failed: {e}");
        }
    }
}

fn options(text: &str) -> Options {
    Options::new("servers-test", "tests/servers.rs", toml::from_str(text).expect("test options are TOML"))
}

fn fixture(backend: &str, opts: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = fixture_in(backend, opts, tmp.path());
    f._tmp = Some(tmp);
    f
}

/// A fixture whose namespace is made in `parent` (which the caller keeps).
fn fixture_in(backend: &str, opts: &str, parent: &std::path::Path) -> Fixture {
    let run_id = format!("servers-{}-{:?}", std::process::id(), std::time::Instant::now());
    let ns = Namespace::create(&parent.join("ns"), &run_id, "case").unwrap();
    let kind = stowbench::backend::find(backend).unwrap();
    let b = (kind.construct)(&options(opts), &ns).unwrap_or_else(|e| panic!("construct {backend}: {e}"));
    b.prepare().unwrap_or_else(|e| panic!("prepare {backend}: {e}"));
    Fixture { backend: b, ns, _tmp: None }
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
cleanup_check!(mariadb_file_cleanup, "mariadb", "mode = \"file\"", Server::Maria);
cleanup_check!(mariadb_file_row_then_file_cleanup, "mariadb", "mode = \"file\"\norder = \"row-then-file\"", Server::Maria);
cleanup_check!(s3_cleanup, "s3", "", Server::S3);
cleanup_check!(s3_multipart_cleanup, "s3", "multipart_threshold = \"1MiB\"\npart_size = \"5MiB\"", Server::S3);
cleanup_check!(gridfs_cleanup, "gridfs", "", Server::Mongo);

/// Puts 2 MiB of random bytes through `ours` and 8 MiB through `theirs` (a neighbour on the same
/// server), then checks that `ours` counts only its own part of what the server allocated: the
/// 2 MiB with the server's overhead on them (under 4 MiB), nothing of `theirs` nor of what earlier
/// namespaces dropped. `overhead` says what the server adds, for the failure message.
fn allocated_bytes_are_ours_alone(ours: &Fixture, theirs: &Fixture, overhead: &str) {
    const MIB: u64 = 1 << 20;
    for (fixture, name, objects) in [(ours, "ours", 2), (theirs, "theirs", 8)] {
        let mut s = fixture.session(0);
        for i in 0..objects {
            put(&mut *s, &format!("{name}/{i}"), 50 + i, MIB);
        }
    }
    let usage = ours.backend.disk_usage().expect("disk usage");
    assert!(!usage.allocated_unknown, "the tests' server has a local data directory (scripts/services.sh env sets it)");
    assert!(
        (2 * MIB..4 * MIB).contains(&usage.allocated_bytes),
        "allocated {} bytes for 2 MiB ({overhead}); a neighbour's 8 MiB and earlier cases' dropped data must not count",
        usage.allocated_bytes
    );
}

/// In lo mode the large objects live in `pg_largeobject`, which every large object of the
/// database shares: a case's allocated bytes must be its own part of it, not the whole catalog
/// with everyone else's objects and the dead pages of earlier cases.
#[test]
fn postgres_lo_allocated_bytes_count_our_large_objects_only() {
    if available(Server::Pg.env()) {
        let overhead = "pg_largeobject keeps 2 kB of a value per row, three rows to an 8 kB page: about 2.7 MiB";
        allocated_bytes_are_ours_alone(&fixture("postgres", "mode = \"lo\""), &fixture("postgres", "mode = \"lo\""), overhead);
    }
}

/// A GridFS bucket's allocated bytes are its own collections' pages: on FerretDB/SQLite the
/// database file also holds other buckets and the free pages that dropped ones left (the file
/// never shrinks), and neither may count.
#[test]
fn gridfs_allocated_bytes_count_our_bucket_only() {
    if available(Server::Mongo.env()) {
        let dropped = fixture("gridfs", "");
        allocated_bytes_are_ours_alone(&dropped, &fixture("gridfs", ""), "setting up the dropped bucket");
        dropped.backend.cleanup().expect("cleanup");
        let overhead = "FerretDB keeps documents as JSON, binary data in base64: about 2.7 MiB";
        allocated_bytes_are_ours_alone(&fixture("gridfs", ""), &fixture("gridfs", ""), overhead);
    }
}

// ---- mariadb file mode: sqlite-file's crash and cleanup claims, with the row on a server ----

/// A body that gives `left` bytes and then panics: the panic stands in for a crash (nothing after
/// the write in progress runs, not even the undo of a failed put).
struct CrashingBody {
    left: u64,
}

impl std::io::Read for CrashingBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        assert!(self.left > 0, "simulated crash in the middle of a put");
        let n = buf.len().min(self.left as usize);
        buf[..n].fill(b'x');
        self.left -= n as u64;
        Ok(n)
    }
}

fn crash_mid_put(f: &Fixture, key: &str) {
    let mut s = f.session(0);
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = s.put(key, &mut CrashingBody { left: 300_000 }, 1_000_000);
    }));
    assert!(crashed.is_err(), "the body must have crashed the put");
}

/// Files (content, orphans, temporaries) under a file-mode backend's files directory.
fn content_files(f: &Fixture) -> u64 {
    let files = f.backend.describe().data_paths[0].clone();
    assert!(files.ends_with("files"), "data_paths[0] is the files directory: {}", files.display());
    stowbench::backend::fs::disk_usage_of(&[files]).unwrap().files
}

#[test]
fn mariadb_file_crash_mid_put_with_file_then_row_leaves_only_an_orphan_file() {
    if !available(Server::Maria.env()) {
        return;
    }
    let f = fixture("mariadb", "mode = \"file\"");
    put(&mut *f.session(0), "k", 1, 9);
    crash_mid_put(&f, "k");
    crash_mid_put(&f, "new");
    let mut s = f.session(1);
    let mut value = common::VerifyingSink::new(1);
    assert_eq!(s.get("k", &mut value).unwrap(), 9);
    value.check(9).unwrap();
    assert_eq!(s.head("new").unwrap_err().kind, ErrorKind::NotFound);
    // The old content plus two partial temporary files: counted by disk_usage, gone after cleanup.
    assert_eq!(content_files(&f), 3);
    assert!(f.backend.disk_usage().unwrap().files >= 3);
    drop(s);
    f.backend.cleanup().unwrap();
    assert_eq!(content_files(&f), 0);
}

#[test]
fn mariadb_file_crash_mid_put_with_row_then_file_leaves_a_row_without_content() {
    if !available(Server::Maria.env()) {
        return;
    }
    let f = fixture("mariadb", "mode = \"file\"\norder = \"row-then-file\"");
    crash_mid_put(&f, "new");
    let mut s = f.session(1);
    assert_eq!(s.head("new").unwrap(), 1_000_000, "the row committed before the file");
    let err = s.get("new", &mut Vec::new()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("row-then-file"), "{err}");
    drop(s);
    f.backend.cleanup().unwrap();
}

/// With a `path` option, cleanup drops the table and removes every file the backend wrote there
/// (a crashed put's temporary file included) with the run's directory, and leaves a foreign file
/// and a foreign stowbench-named directory beside it, a foreign file in the runner's namespace and
/// the foreign tables alone.
#[test]
fn mariadb_file_cleanup_removes_its_files_and_only_those() {
    if !available(Server::Maria.env()) {
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("keep.txt"), "keep").unwrap();
    std::fs::create_dir(shared.path().join("stowbench-keep")).unwrap();
    std::fs::write(shared.path().join("stowbench-keep/files"), "keep").unwrap();
    let f = fixture("mariadb", &format!("mode = \"file\"\npath = \"{}\"", shared.path().display()));
    std::fs::write(f.ns.dir.join("keep.txt"), "keep").unwrap();
    let owned = f.owned();
    let foreign = Server::Maria.make_foreign(&owned);
    let mut s = f.session(0);
    for (i, len) in [0u64, 10, 1_048_577, 3_000_000].into_iter().enumerate() {
        put(&mut *s, &format!("c/{i}"), 30 + i as u64, len);
    }
    put(&mut *s, "c/1", 40, 20); // the overwrite removed the file it replaced
    drop(s);
    crash_mid_put(&f, "orphan");
    assert!(f.backend.describe().data_paths[0].starts_with(shared.path()), "the files live under the path option");
    assert_eq!(content_files(&f), 5, "4 objects and the crashed put's temporary file");
    assert!(!Server::Maria.ours(&owned).is_empty(), "the test must see our table before cleanup");
    f.backend.cleanup().expect("cleanup");
    assert_eq!(Server::Maria.ours(&owned), Vec::<String>::new(), "cleanup left our table behind");
    assert!(Server::Maria.foreign_alive(&foreign), "cleanup touched tables it did not create: {foreign:?}");
    Server::Maria.drop_foreign(&foreign);
    let names = |dir: &std::path::Path| {
        let entries = std::fs::read_dir(dir).unwrap();
        let mut names: Vec<String> = entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(names(shared.path()), ["keep.txt", "stowbench-keep"], "cleanup removes its own directory under the path, only it");
    assert_eq!(std::fs::read_to_string(shared.path().join("stowbench-keep/files")).unwrap(), "keep");
    assert_eq!(names(&f.ns.dir), [stowbench::backend::namespace::MARKER_FILE, "keep.txt"]);
    f.backend.cleanup().expect("a second cleanup is harmless");
}

#[path = "servers/inspect.rs"]
mod inspect;
use inspect::Server;

#[path = "servers/end_to_end.rs"]
mod end_to_end;

#[path = "servers/pg_layout.rs"]
mod pg_layout;

#[path = "servers/timeouts.rs"]
mod timeouts;

#[path = "servers/cold_restart.rs"]
mod cold_restart;

#[path = "servers/server_kill.rs"]
mod server_kill;

#[path = "servers/proxy_faults.rs"]
mod proxy_faults;

#[path = "servers/kill_cleanup.rs"]
mod kill_cleanup;

#[path = "servers/uri_checks.rs"]
mod uri_checks;

/// The port of a URI like scheme://user@host:PORT/db.
fn inspect_port(uri: &str) -> u16 {
    stowbench::backend::server::host_port(uri, 0).expect("URI with a port").1
}

// ---- recipes against the real servers ----

/// E1 at a tiny scale on PostgreSQL (bytea, large objects, row + file) and MariaDB (row, row +
/// file): every server target runs (none skipped), each case is E1's put-then-read sequence, and
/// the report carries the published layout's mean times.
#[test]
fn e1_recipe_runs_every_server_target_at_a_tiny_scale() {
    if !available("STOWBENCH_PG_URI") || !available("STOWBENCH_MARIADB_URI") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let targets = "postgres-bytea,postgres-lo,postgres-file,mariadb,mariadb-file";
    let args = ["recipe", "run", "e1-filestream", "--scale", "0.01", "--targets", targets, "--no-progress", "--format", "json"];
    let (code, report, text) = run_stowbench(dir.path(), &args);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(report["recipe"]["skipped_targets"].as_array().map(Vec::len), Some(0), "{text}");
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5 * 11, "5 server targets × 11 sizes");
    for case in cases {
        assert_eq!(case["status"], "ok", "{case}");
        let phase = &case["phases"][0];
        assert_eq!(phase["phase"], "sequence put-get");
        assert_eq!(phase["ops"]["put"]["count"], phase["ops"]["get"]["count"], "one read back per insert: {case}");
    }
}

/// Runs the stowbench binary in `dir` (where its results go); returns the exit code, the JSON
/// report on stdout and everything printed (for messages).
fn run_stowbench(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench")).args(args).current_dir(dir).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {text}"));
    (out.status.code(), report, text)
}

fn every_server_is_available() -> bool {
    ["STOWBENCH_PG_URI", "STOWBENCH_MARIADB_URI", "STOWBENCH_S3_ENDPOINT", "STOWBENCH_MONGO_URI"].iter().all(|env| available(env))
}

/// E5 at a tiny scale (10 files of 100 kB) on every target: none skipped, every case uploads and
/// downloads every file with each step timed, and the catalog sits where the recipe says — in
/// the database for postgres, mariadb and GridFS, in SQLite beside the content otherwise.
#[test]
fn e5_recipe_runs_every_target_at_a_tiny_scale() {
    if !every_server_is_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, report, text) = run_stowbench(dir.path(), &["recipe", "run", "e5-file-server", "--scale", "0.01", "--no-progress", "--format", "json"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(report["recipe"]["skipped_targets"].as_array().map(Vec::len), Some(0), "{text}");
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 7 * 2 * 5, "7 targets × 2 workloads × 5 repeats");
    for case in cases {
        assert_eq!(case["status"], "ok", "{case}");
        let files = &case["file_server"];
        assert_eq!((files["uploads"].as_u64(), files["catalog_files"].as_u64(), files["catalog_names"].as_u64()), (Some(10), Some(10), Some(10)), "{files}");
        assert_eq!(files["problems"].as_array().map(Vec::len), Some(0), "{files}");
        let where_ = files["catalog"].as_str().unwrap();
        let expected = match case["backend"].as_str().unwrap() {
            "postgres" => "postgres tables",
            "mariadb" => "mariadb tables",
            "gridfs" => "beside the GridFS bucket",
            _ => "catalog.sqlite",
        };
        assert!(where_.contains(expected), "{}: {where_}", case["case_id"]);
        let (upload, download) = (&case["phases"][0], &case["phases"][1]);
        for step in ["upload", "hash", "register", "put"] {
            assert_eq!(upload["ops"][step]["count"], 10, "{step}: {upload}");
        }
        assert_eq!(download["ops"]["download"]["count"], 10, "{download}");
        assert_eq!(download["ops"]["lookup"]["count"], 10, "{download}");
    }
}

/// Duplicate uploads against the real servers: a repeated content is registered under its new
/// name but stored once, in every catalog (SQLite beside fs, postgres, mariadb, GridFS).
#[test]
fn duplicate_uploads_are_registered_but_stored_once_in_every_catalog() {
    if !every_server_is_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("dups.toml");
    let text = "version = 1\n\
        [[target]]\nbackend = \"fs\"\n[[target]]\nbackend = \"postgres\"\n[[target]]\nbackend = \"mariadb\"\n[[target]]\nbackend = \"gridfs\"\n\
        [[workload]]\nname = \"dups\"\nsizes = [\"20kB\"]\nobjects = 40\nthreads = [2]\nduplicates = 0.4\nphases = [\"upload\", \"download\"]\n";
    std::fs::write(&job, text).unwrap();
    let (code, report, out) = run_stowbench(dir.path(), &["run", job.to_str().unwrap(), "--no-progress", "--format", "json"]);
    assert_eq!(code, Some(0), "{out}");
    for case in report["cases"].as_array().unwrap() {
        let files = &case["file_server"];
        let n = |k: &str| files[k].as_u64().unwrap();
        assert!(n("duplicate_uploads") > 0, "{files}");
        assert_eq!(n("catalog_files"), 40 - n("duplicate_uploads"), "{}: {files}", case["case_id"]);
        assert_eq!((n("catalog_names"), n("objects_checked"), n("objects_missing")), (40, n("catalog_files"), 0), "{files}");
        assert_eq!(case["verification"]["checked"], 40, "every download checked: {case}");
    }
}

/// E4 at a tiny scale on SQLite and PostgreSQL: every database target runs (none skipped), 5
/// repeats of 16 writers inserting each key once, each PostgreSQL case with its tablespaces and
/// sampled writer wait in the report, and the table summarizes the repeats per data-file count.
#[test]
fn e4_recipe_runs_sqlite_and_postgres_at_a_tiny_scale() {
    if !available("STOWBENCH_PG_URI") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, report, text) = run_stowbench(dir.path(), &["recipe", "run", "e4-data-files", "--scale", "0.01", "--no-progress", "--format", "json"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(report["recipe"]["skipped_targets"].as_array().map(Vec::len), Some(0), "{text}");
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 10 * 5, "10 database targets × 5 repeats");
    for case in cases {
        assert_eq!(case["status"], "ok", "{case}");
        let (target, options) = (case["target"].as_str().unwrap(), &case["backend_info"]["options"]);
        let k: u64 = target.rsplit("-k").next().unwrap().parse().unwrap();
        let phase = &case["phases"][0];
        assert_eq!(case["threads"], 16);
        assert_eq!(phase["ops"]["put"]["count"], case["objects"], "every key inserted once: {case}");
        if target.starts_with("postgres") {
            assert_eq!((&options["tablespaces"], &options["partitions"]), (&k.into(), &16.into()), "{case}");
            assert_eq!(options["wait_sample"], "10ms");
        } else {
            assert_eq!(options["files"], k, "{case}");
        }
    }
    let repeats: Vec<u64> = cases.iter().filter(|c| c["target"] == "postgres-k8").map(|c| c["repeat"].as_u64().unwrap()).collect();
    assert_eq!(repeats, [1, 2, 3, 4, 5]);
    assert_eq!(report["fio_cases"].as_array().map(Vec::len), Some(25), "the raw-I/O curve beside the database one: 5 file counts × 5 runs");
    let runs = std::fs::read_dir(dir.path().join("stowbench-results")).unwrap().flatten().map(|e| e.path()).next().unwrap();
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_stowbench")).arg("report").arg(runs.join("report.json")).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("across repeats"), "{table}");
    for target in ["sqlite-k1", "sqlite-k16", "postgres-k1", "postgres-k16"] {
        let summary = |l: &&str| l.trim_start().starts_with(&format!("{target}/e4-insert/")) && l.contains(" put ");
        let row = table.lines().find(summary).unwrap_or_else(|| panic!("no repeats summary of {target}: {table}"));
        assert!(row.contains(" 5 ") && row.contains('–') && row.contains('%'), "repeats, min–max and CV: {row}");
    }
}
