//! Conformance: one set of behaviours, run against every backend (OpenDAL-style behaviour tests).
//!
//! Each `conformance!(module, "backend", "toml options")` line expands every behaviour below into
//! its own #[test], so a failure names backend, configuration and behaviour, and a new backend
//! joins with one line. Payloads are seeded and never all zeros (see `common`), so truncation,
//! misordering and mixed values fail. Backends are built through the registry, exactly as a run
//! builds them, inside a fresh namespace under a temporary directory.
//!
//! Capabilities are contracts: a behaviour that needs one (delete, overwrite) runs where the
//! backend declares it, and where it does not, `undeclared_capabilities_are_refused` checks that
//! the session answers `Unsupported` and changes nothing. The describe and `path` checks run for
//! every configuration.

mod common;

use common::{identify, PayloadReader, VerifyingSink};
use std::path::{Path, PathBuf};
use stowbench::backend::namespace::MARKER_FILE;
use stowbench::backend::options::Options;
use stowbench::backend::{Backend, ErrorKind, Namespace, Session};

/// A prepared backend in its own namespace; the temporary directory goes when it drops.
struct Fixture {
    name: &'static str,
    /// The options as written in the conformance line.
    options: &'static str,
    backend: Box<dyn Backend>,
    /// The directory that holds the namespace directory and nothing else.
    outer: PathBuf,
    ns_dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Fixture {
    fn new(name: &'static str, options_text: &'static str) -> Fixture {
        let tmp = tempfile::Builder::new().prefix("stowbench-conformance-").tempdir().expect("temporary directory");
        // Readable by others, as a run's work directory is: a local server running as its own user
        // must reach the tablespace directories made inside the namespace.
        std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod 755");
        let outer = tmp.path().join("outer");
        let ns_dir = outer.join("ns");
        let ns = Namespace::create(&ns_dir, "conformance", "case").expect("namespace");
        let table: toml::Table = toml::from_str(options_text).expect("test options are valid TOML");
        let options = Options::new("conformance", "tests/conformance.rs", table);
        let kind = stowbench::backend::find(name).expect("registered backend");
        let backend = (kind.construct)(&options, &ns).unwrap_or_else(|e| panic!("construct {name}: {e}"));
        backend.prepare().unwrap_or_else(|e| panic!("prepare {name}: {e}"));
        Fixture { name, options: options_text, backend, outer, ns_dir, _tmp: tmp }
    }

    fn session(&self, worker: usize) -> Box<dyn Session> {
        self.backend.open_session(worker).unwrap_or_else(|e| panic!("open_session {}: {e}", self.name))
    }
}

/// Cleans up before the temporary directory goes: a server must never lose a tablespace
/// directory it still uses, and no test should leave tables on a server.
impl Drop for Fixture {
    fn drop(&mut self) {
        if let Err(e) = self.backend.cleanup() {
            eprintln!("cleanup of {} ({}) failed: {e}", self.name, self.options);
        }
    }
}

fn put(session: &mut dyn Session, key: &str, seed: u64, len: u64) {
    session.put(key, &mut PayloadReader::new(seed, len), len).unwrap_or_else(|e| panic!("put {key:?} ({len} bytes): {e}"));
}

/// Gets `key` and checks it is exactly payload `seed` of `len` bytes.
fn assert_value(session: &mut dyn Session, key: &str, seed: u64, len: u64) {
    let mut sink = VerifyingSink::new(seed);
    let returned = session.get(key, &mut sink).unwrap_or_else(|e| panic!("get {key:?}: {e}"));
    assert_eq!(returned, len, "get {key:?} returned a wrong length");
    sink.check(len).unwrap_or_else(|e| panic!("get {key:?}: {e}"));
    assert_eq!(session.head(key).unwrap_or_else(|e| panic!("head {key:?}: {e}")), len, "head {key:?}");
}

fn assert_kind<T: std::fmt::Debug>(result: Result<T, stowbench::backend::BackendError>, kind: ErrorKind, what: &str) {
    match result {
        Err(e) => assert_eq!(e.kind, kind, "{what}: {e}"),
        Ok(v) => panic!("{what}: expected {kind:?}, got Ok({v:?})"),
    }
}

/// Sizes around every internal boundary: empty, one byte, the 256 KiB copy buffer, SQLite's 1 MiB
/// default blob threshold, and 3 MiB + 7 (a multiple of no buffer size).
const ROUND_TRIP_SIZES: &[u64] = &[0, 1, 7, 4096, 262_143, 262_145, 1_048_576, 1_048_577, 3 * 1_048_576 + 7];

fn round_trip_is_byte_exact(f: &Fixture) {
    let mut s = f.session(0);
    for (i, &len) in ROUND_TRIP_SIZES.iter().enumerate() {
        put(&mut *s, &format!("size-{len}"), 0x5EED_0000 + i as u64, len);
    }
    for (i, &len) in ROUND_TRIP_SIZES.iter().enumerate() {
        assert_value(&mut *s, &format!("size-{len}"), 0x5EED_0000 + i as u64, len);
    }
}

fn overwrite_returns_the_new_value(f: &Fixture) {
    if !f.backend.capabilities().overwrite {
        return; // undeclared: undeclared_capabilities_are_refused checks the refusal
    }
    let mut s = f.session(0);
    let steps = [(1, 2 * 1_048_576 + 3), (2, 100), (3, 0), (4, 1_500_001), (5, 1_500_001)];
    for (seed, len) in steps {
        put(&mut *s, "k", seed, len);
        assert_value(&mut *s, "k", seed, len);
    }
    // A second session sees the last value too (nothing is cached per session).
    assert_value(&mut *f.session(1), "k", 5, 1_500_001);
}

fn missing_keys_are_not_found(f: &Fixture) {
    let mut s = f.session(0);
    assert_kind(s.get("never-written", &mut Vec::new()), ErrorKind::NotFound, "get of a missing key");
    assert_kind(s.head("never-written"), ErrorKind::NotFound, "head of a missing key");
    if f.backend.capabilities().delete {
        assert_kind(s.delete("never-written"), ErrorKind::NotFound, "delete of a missing key");
    }
}

fn delete_twice_is_not_found_the_second_time(f: &Fixture) {
    if !f.backend.capabilities().delete {
        return;
    }
    let mut s = f.session(0);
    for len in [10, 1_048_577] {
        put(&mut *s, "doomed", 7, len);
        s.delete("doomed").expect("first delete");
        assert_kind(s.delete("doomed"), ErrorKind::NotFound, "second delete");
        assert_kind(s.get("doomed", &mut Vec::new()), ErrorKind::NotFound, "get after delete");
        assert_kind(s.head("doomed"), ErrorKind::NotFound, "head after delete");
    }
}

fn a_failed_put_changes_nothing(f: &Fixture) {
    let mut s = f.session(0);
    put(&mut *s, "kept", 11, 5000);
    for claimed in [4000u64, 2 * 1_048_576 + 5] {
        // The body ends after half of what the put was promised.
        let mut short = PayloadReader::new(12, claimed / 2);
        assert!(s.put("kept", &mut short, claimed).is_err(), "a put whose body ends early must fail");
        assert!(s.put("fresh", &mut PayloadReader::new(12, claimed / 2), claimed).is_err());
    }
    assert_value(&mut *s, "kept", 11, 5000);
    assert_kind(s.head("fresh"), ErrorKind::NotFound, "head of a key whose only put failed");
}

fn disjoint_keys_from_four_sessions(f: &Fixture) {
    std::thread::scope(|scope| {
        for worker in 0..4u64 {
            scope.spawn(move || {
                let mut s = f.session(worker as usize);
                let len = |j: u64| if j % 5 == 4 { 1_048_577 + j } else { 1 + j * 9_973 };
                for j in 0..15 {
                    put(&mut *s, &format!("w{worker}-{j}"), worker << 32 | j, len(j));
                }
                for j in 0..15 {
                    assert_value(&mut *s, &format!("w{worker}-{j}"), worker << 32 | j, len(j));
                }
            });
        }
    });
}

/// Length of shared-key payload `seed`, crossing SQLite's blob threshold; a truncated value then
/// has the wrong length for the seed it starts with.
fn shared_len(seed: u64) -> u64 {
    [100, 70_001, 1_048_577, 1_600_003][(seed % 4) as usize]
}

fn shared_keys_always_read_one_whole_value(f: &Fixture) {
    if !f.backend.capabilities().overwrite {
        return; // every put here replaces a value
    }
    const KEYS: u64 = 3;
    let mut s = f.session(0);
    for k in 0..KEYS {
        put(&mut *s, &format!("shared-{k}"), 99 << 32 | k, shared_len(99 << 32 | k));
    }
    std::thread::scope(|scope| {
        for worker in 0..4u64 {
            scope.spawn(move || {
                let mut s = f.session(worker as usize);
                for i in 0..24u64 {
                    let seed = worker << 32 | i;
                    put(&mut *s, &format!("shared-{}", i % KEYS), seed, shared_len(seed));
                    let key = format!("shared-{}", (i + worker) % KEYS);
                    let mut value = Vec::new();
                    s.get(&key, &mut value).unwrap_or_else(|e| panic!("get {key}: {e}"));
                    let found = identify(&value).unwrap_or_else(|| panic!("{key}: {} bytes that are no single put's value", value.len()));
                    assert_eq!(value.len() as u64, shared_len(found), "{key}: value of put {found:#x} has the wrong length");
                    assert!(found >> 32 == 99 || found >> 32 < 4, "{key}: value {found:#x} was never written");
                }
            });
        }
    });
}

fn prepare_twice_keeps_the_data(f: &Fixture) {
    let mut s = f.session(0);
    put(&mut *s, "survivor", 21, 1_048_600);
    drop(s);
    f.backend.prepare().expect("second prepare");
    assert_value(&mut *f.session(0), "survivor", 21, 1_048_600);
}

fn cleanup_leaves_only_the_marker(f: &Fixture) {
    let mut s = f.session(0);
    for (i, len) in [0u64, 10, 1_048_577, 3_000_000].into_iter().enumerate() {
        put(&mut *s, &format!("c/{i}"), 30 + i as u64, len);
    }
    if f.backend.capabilities().delete {
        s.delete("c/1").expect("delete");
    }
    drop(s);
    f.backend.cleanup().expect("cleanup");
    let left: Vec<String> = std::fs::read_dir(&f.ns_dir).expect("namespace dir").map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec![MARKER_FILE.to_string()], "cleanup left files behind");
    f.backend.cleanup().expect("a second cleanup is harmless");
}

/// Keys that look like paths, traversal, unicode, whitespace and encodings of each other.
const ODD_KEYS: &[&str] = &[
    "a/b",
    "a%2Fb",
    "a_b",
    "../x",
    "../../etc/passwd",
    "/abs",
    ".",
    "..",
    "",
    " ",
    "with space",
    "tab\tkey",
    "new\nline",
    "ünïcødé-キー-🙂",
    "%",
    "%25",
    "a~1",
    ".tmp-0-x",
    "NUL\u{0}byte",
];

fn odd_keys_round_trip_and_stay_inside(f: &Fixture) {
    let mut s = f.session(0);
    for (i, key) in ODD_KEYS.iter().enumerate() {
        put(&mut *s, key, 500 + i as u64, 100 + i as u64);
    }
    for (i, key) in ODD_KEYS.iter().enumerate() {
        assert_value(&mut *s, key, 500 + i as u64, 100 + i as u64);
    }
    assert_no_file_outside(&f.outer, &f.ns_dir);
    if f.backend.capabilities().delete {
        for key in ODD_KEYS {
            s.delete(key).unwrap_or_else(|e| panic!("delete {key:?}: {e}"));
        }
    }
}

/// What a backend does not declare, its sessions refuse as `Unsupported`, changing nothing: the
/// runner refuses such a job before it starts (`runner::contract`), and a backend asked anyway
/// must not half-do it.
fn undeclared_capabilities_are_refused(f: &Fixture) {
    let caps = f.backend.capabilities();
    let mut s = f.session(0);
    put(&mut *s, "declared", 61, 2000);
    if !caps.delete {
        assert_kind(s.delete("declared"), ErrorKind::Unsupported, "delete where delete is not declared");
        assert_kind(s.delete("never-written"), ErrorKind::Unsupported, "delete of a missing key where delete is not declared");
    }
    if !caps.overwrite {
        let mut body = PayloadReader::new(62, 3000);
        assert_kind(s.put("declared", &mut body, 3000), ErrorKind::Unsupported, "put onto a stored key where overwrite is not declared");
        assert_kind(f.session(1).put("declared", &mut PayloadReader::new(63, 10), 10), ErrorKind::Unsupported, "the same from another session");
    }
    assert_value(&mut *s, "declared", 61, 2000);
}

/// `operation_deadline` is declared exactly where every session has a connection to cut, which
/// the watchdog of `op_timeout` needs. (Cutting one here would also cut the other tests' S3
/// connections, whose cut reaches every connection to the server's port: what a cut does is
/// proven in tests/servers/proxy_faults.rs.)
fn operation_deadline_is_real(f: &Fixture) {
    let declared = f.backend.capabilities().operation_deadline;
    for worker in 0..2 {
        let can_cut = f.session(worker).cut_handle().is_some();
        assert_eq!(declared, can_cut, "{}: operation_deadline = {declared}, but session {worker} has a connection to cut: {can_cut}", f.name);
    }
}

/// `keeps_replaced_values` (which the space check counts puts by) is declared exactly where
/// overwritten values pile up in the local files: 200 overwrites of 64 KiB leave at least their
/// 12.5 MiB in an append-only store, and under half of that where a put replaces (SQLite's WAL
/// holds up to its 4 MiB checkpoint). A server's store is not judged here: its MVCC or purge
/// keeps replaced rows until its own vacuum (PostgreSQL, MariaDB, FerretDB all grew by the
/// 12.5 MiB), which no count of puts predicts, and the space check does not cover.
fn keeps_replaced_values_is_real(f: &Fixture) {
    if stowbench::backend::server::is_server_backend(f.name) || f.backend.describe().data_paths.is_empty() {
        return;
    }
    const LEN: u64 = 64 << 10;
    const PUTS: u64 = 200;
    let mut s = f.session(0);
    for seed in 0..PUTS {
        put(&mut *s, "replaced", 500 + seed, LEN);
    }
    assert_value(&mut *s, "replaced", 500 + PUTS - 1, LEN);
    let apparent = f.backend.disk_usage().unwrap().apparent_bytes;
    let declared = f.backend.capabilities().keeps_replaced_values;
    let holds = if declared { apparent >= PUTS * LEN } else { apparent < PUTS * LEN / 2 };
    assert!(holds, "{}: keeps_replaced_values = {declared}, but {PUTS} puts of {LEN} bytes to one key left {apparent} bytes of files", f.name);
}

/// Reports state the conditions: describe() names the backend, what a put guarantees, and every
/// option the configuration set, with its value in effect; no secret of the URI shows.
fn describe_states_the_options_in_effect(f: &Fixture) {
    let info = f.backend.describe();
    assert_eq!(info.backend, f.name);
    assert!(!info.durability.is_empty(), "{}: durability must be stated", f.name);
    let given: toml::Table = toml::from_str(f.options).unwrap();
    for option in given.keys() {
        assert!(info.options.get(option).is_some(), "{} ({}): describe() lacks option {option}", f.name, f.options);
    }
    let shown = info.options.to_string();
    for env in ["STOWBENCH_PG_URI", "STOWBENCH_MARIADB_URI", "STOWBENCH_MONGO_URI"] {
        let password = std::env::var(env).ok().and_then(|uri| Some(uri.split_once("://")?.1.split_once('@')?.0.split_once(':')?.1.to_string()));
        if let Some(password) = password.filter(|p| !p.is_empty()) {
            assert!(!shown.contains(&password), "{}: describe() shows the password of {env}", f.name);
        }
    }
}

/// With a `path` option, all data lives in a marked directory named after the run under that
/// path, and cleanup removes it and nothing else: every backend that takes one, in every
/// configuration.
fn path_option_is_honoured(f: &Fixture) {
    let kind = stowbench::backend::find(f.name).unwrap();
    if !kind.options.iter().any(|o| o.name == "path") {
        return;
    }
    let tmp = tempfile::Builder::new().prefix("stowbench-conformance-path-").tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let user_dir = tmp.path().join("user-chosen");
    std::fs::create_dir(&user_dir).unwrap();
    let ns = Namespace::create(&tmp.path().join("run"), "conformance", "path").unwrap();
    let mut table: toml::Table = toml::from_str(f.options).unwrap();
    table.insert("path".into(), user_dir.to_string_lossy().into_owned().into());
    let backend = match (kind.construct)(&Options::new("t", "", table), &ns) {
        Ok(backend) => backend,
        // A configuration the option does not apply to must say so, naming it (mariadb's rows).
        Err(e) if e.contains("option \"path\" applies only to") => return,
        Err(e) => panic!("{} with path: {e}", f.name),
    };
    backend.prepare().unwrap();
    put(&mut *backend.open_session(0).unwrap(), "k", 1, 10);
    let info = backend.describe();
    assert_eq!(info.options.get("path").and_then(|p| p.as_str()), Some(&*user_dir.to_string_lossy()), "{}: describe() states the path", f.name);
    let ours = user_dir.join("stowbench-conformance-path");
    if ours.exists() {
        assert!(ours.join(MARKER_FILE).is_file(), "{}: the directory under the path option is not marked", f.name);
    }
    for path in info.data_paths.iter().filter(|p| p.starts_with(&user_dir)) {
        assert!(path.starts_with(&ours), "{}: data path {} is outside {}", f.name, path.display(), ours.display());
    }
    assert_no_file_outside(&user_dir, &ours);
    backend.cleanup().unwrap();
    assert_eq!(std::fs::read_dir(&user_dir).unwrap().count(), 0, "{}: cleanup leaves nothing under the path option", f.name);
}

/// Everything under `outer` must be inside `inside` (the namespace).
fn assert_no_file_outside(outer: &Path, inside: &Path) {
    let mut stack = vec![outer.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            assert!(path.starts_with(inside), "{} was written outside the namespace", path.display());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
}

/// The limit each real backend must declare; None means "no limit of its own".
fn declared_limit(name: &str, options: &str) -> Option<Option<u64>> {
    match name {
        "fs" | "sqlite-file" => Some(None),
        // File mode's content never travels in a packet: max_allowed_packet must not apply.
        "mariadb" if options.contains("mode = \"file\"") => Some(None),
        "sqlite" => Some(Some(stowbench::backend::sqlite::MAX_OBJECT_BYTES)),
        _ => None, // test tools declare what their options say
    }
}

fn max_object_bytes_is_real(f: &Fixture) {
    let caps = f.backend.capabilities();
    if let Some(expected) = declared_limit(f.name, f.options) {
        assert_eq!(caps.max_object_bytes, expected, "declared max_object_bytes");
    }
    let Some(max) = caps.max_object_bytes else { return };
    let hint = caps.max_object_hint.expect("a declared limit comes with a hint");
    if f.name == "sqlite" {
        assert!((999_999_000..1_000_000_000).contains(&max), "{max}");
        assert!(hint.contains("sqlite-file"), "the hint must name the backend to use instead: {hint}");
    }
    // One byte over is refused before a single byte of the body is read.
    let mut s = f.session(0);
    let mut body = PayloadReader::new(41, max + 1);
    assert_kind(s.put("too-big", &mut body, max + 1), ErrorKind::TooLarge, "put of max_object_bytes + 1");
    assert_eq!(body.pos, 0, "the refusal must come before any data is read");
    assert_kind(s.head("too-big"), ErrorKind::NotFound, "nothing stored after the refusal");
    // Exactly the limit is accepted where that is cheap to check here (the large limits are
    // proven in tests/streaming_memory.rs).
    if max <= 64 << 20 {
        put(&mut *s, "at-limit", 42, max);
        assert_value(&mut *s, "at-limit", 42, max);
    }
}

/// Whether the server a configuration needs is configured (`env` names its URI variable; "" for
/// local backends). With CI=true a missing service fails the test; elsewhere it is skipped loudly.
fn service_ready(env: &str) -> bool {
    if env.is_empty() || std::env::var(env).is_ok_and(|v| !v.trim().is_empty()) {
        return true;
    }
    assert!(!common::in_ci(), "{env} is not set and CI=true: scripts/test.sh starts the services");
    eprintln!("SKIPPED: {env} is not set; start the services (scripts/services.sh start; eval \"$(scripts/services.sh env)\")");
    false
}

macro_rules! conformance {
    ($module:ident, $backend:expr, $options:expr) => {
        conformance!($module, $backend, $options, requires = "");
    };
    ($module:ident, $backend:expr, $options:expr, requires = $env:expr) => {
        mod $module {
            fn fixture() -> Option<super::Fixture> {
                super::service_ready($env).then(|| super::Fixture::new($backend, $options))
            }
            #[test]
            fn round_trip_is_byte_exact() {
                if let Some(f) = fixture() {
                    super::round_trip_is_byte_exact(&f)
                }
            }
            #[test]
            fn overwrite_returns_the_new_value() {
                if let Some(f) = fixture() {
                    super::overwrite_returns_the_new_value(&f)
                }
            }
            #[test]
            fn missing_keys_are_not_found() {
                if let Some(f) = fixture() {
                    super::missing_keys_are_not_found(&f)
                }
            }
            #[test]
            fn delete_twice_is_not_found_the_second_time() {
                if let Some(f) = fixture() {
                    super::delete_twice_is_not_found_the_second_time(&f)
                }
            }
            #[test]
            fn a_failed_put_changes_nothing() {
                if let Some(f) = fixture() {
                    super::a_failed_put_changes_nothing(&f)
                }
            }
            #[test]
            fn disjoint_keys_from_four_sessions() {
                if let Some(f) = fixture() {
                    super::disjoint_keys_from_four_sessions(&f)
                }
            }
            #[test]
            fn shared_keys_always_read_one_whole_value() {
                if let Some(f) = fixture() {
                    super::shared_keys_always_read_one_whole_value(&f)
                }
            }
            #[test]
            fn prepare_twice_keeps_the_data() {
                if let Some(f) = fixture() {
                    super::prepare_twice_keeps_the_data(&f)
                }
            }
            #[test]
            fn cleanup_leaves_only_the_marker() {
                if let Some(f) = fixture() {
                    super::cleanup_leaves_only_the_marker(&f)
                }
            }
            #[test]
            fn odd_keys_round_trip_and_stay_inside() {
                if let Some(f) = fixture() {
                    super::odd_keys_round_trip_and_stay_inside(&f)
                }
            }
            #[test]
            fn max_object_bytes_is_real() {
                if let Some(f) = fixture() {
                    super::max_object_bytes_is_real(&f)
                }
            }
            #[test]
            fn undeclared_capabilities_are_refused() {
                if let Some(f) = fixture() {
                    super::undeclared_capabilities_are_refused(&f)
                }
            }
            #[test]
            fn operation_deadline_is_real() {
                if let Some(f) = fixture() {
                    super::operation_deadline_is_real(&f)
                }
            }
            #[test]
            fn keeps_replaced_values_is_real() {
                if let Some(f) = fixture() {
                    super::keeps_replaced_values_is_real(&f)
                }
            }
            #[test]
            fn describe_states_the_options_in_effect() {
                if let Some(f) = fixture() {
                    super::describe_states_the_options_in_effect(&f)
                }
            }
            #[test]
            fn path_option_is_honoured() {
                if let Some(f) = fixture() {
                    super::path_option_is_honoured(&f)
                }
            }
        }
    };
}

conformance!(fs_default, "fs", "");
conformance!(fs_fsync, "fs", "fsync = true");
conformance!(fs_flat, "fs", "fanout_levels = 0");
conformance!(fs_direct, "fs", "direct = true");
conformance!(fs_direct_fsync_flat, "fs", "direct = true\nfsync = true\nfanout_levels = 0");
conformance!(fs_fsync_file_only, "fs", "fsync = true\nfsync_dir = false");

/// `write_mode = "in-place"` gives up atomic visibility on purpose (a failed put leaves a partial
/// object, a racing reader can see one), so it joins every behaviour but those two.
#[test]
fn fs_in_place_keeps_every_behaviour_but_atomic_visibility() {
    for options in ["write_mode = \"in-place\"", "write_mode = \"in-place\"\nfsync = true", "write_mode = \"in-place\"\nfsync = true\nfsync_dir = false"] {
        let f = Fixture::new("fs", options);
        round_trip_is_byte_exact(&f);
        overwrite_returns_the_new_value(&f);
        missing_keys_are_not_found(&f);
        delete_twice_is_not_found_the_second_time(&f);
        disjoint_keys_from_four_sessions(&f);
        odd_keys_round_trip_and_stay_inside(&f);
        prepare_twice_keeps_the_data(&f);
        cleanup_leaves_only_the_marker(&f);
        let info = f.backend.describe();
        assert_eq!(info.options["write_mode"], "in-place");
        assert!(info.durability.contains("partial object"), "{}", info.durability);
    }
}
conformance!(sqlite_default, "sqlite", "");
conformance!(sqlite_blob_io_always, "sqlite", "blob_io_threshold = 0");
conformance!(sqlite_rollback_journal, "sqlite", "journal_mode = \"delete\"\nsynchronous = \"full\"");
conformance!(sqlite_held_blob_handle, "sqlite", "blob_handle = \"per-session\"");
conformance!(sqlite_rowid, "sqlite", "schema = \"rowid\"");
conformance!(sqlite_rowid_blob_io_always, "sqlite", "schema = \"rowid\"\nblob_io_threshold = 0");
conformance!(sqlite_rowid_rollback_journal, "sqlite", "schema = \"rowid\"\njournal_mode = \"delete\"\nsynchronous = \"full\"");
conformance!(sqlite_rowid_held_blob_handle, "sqlite", "schema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\"");
conformance!(sqlite_three_files, "sqlite", "files = 3");
conformance!(sqlite_rowid_three_files_held_blob_handle, "sqlite", "files = 3\nschema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\"");

/// `schema = "rowid"` keeps a key that is not numbered under the xxh3-64 of the key with the top
/// bit set. Two keys that share an id must never see each other's value: a row of another key is
/// planted under the id of "victim" (a real collision cannot be found by search), and every
/// operation on "victim" must refuse it. Under a numbered key's id the table itself refuses any
/// other key, so no such row can be planted there.
#[test]
fn sqlite_rowid_never_mixes_up_keys_that_share_a_row_id() {
    let id = stowbench::backend::sqlite::row_id_of("victim");
    assert_eq!(id, (stowbench::hash::xxh3_64(b"victim") | 1 << 63) as i64, "the mapping is on disk: it must not change");
    assert_eq!(stowbench::backend::sqlite::row_id_of("obj-0000000042"), 42, "numbered keys sit under their number");
    let planted = common::bytes(77, 2000);
    for options in ["schema = \"rowid\"", "schema = \"rowid\"\nblob_io_threshold = 0\nblob_handle = \"per-session\""] {
        let f = Fixture::new("sqlite", options);
        let conn = rusqlite::Connection::open(f.ns_dir.join("objects.db")).unwrap();
        let plant = "INSERT INTO objects(id, key, size_bytes, body) VALUES (?1, 'intruder', 2000, ?2)";
        conn.execute(plant, rusqlite::params![id, planted]).unwrap();
        let mut s = f.session(0);
        let mut sink = Vec::new();
        assert_kind(s.get("victim", &mut sink), ErrorKind::NotFound, "get of a key whose id holds another key");
        assert!(sink.is_empty(), "{options}: get wrote {} bytes of another key's value", sink.len());
        assert_kind(s.head("victim"), ErrorKind::NotFound, "head of a key whose id holds another key");
        assert_kind(s.delete("victim"), ErrorKind::NotFound, "delete of a key whose id holds another key");
        for len in [10, 1_048_577] {
            let err = s.put("victim", &mut PayloadReader::new(5, len), len).expect_err("a put onto another key's id must fail");
            assert_eq!(err.kind, ErrorKind::Unsupported, "{options}: {err}");
            assert!(err.message.contains("\"victim\"") && err.message.contains("\"intruder\""), "name both keys: {err}");
        }
        let (key, body): (String, Vec<u8>) = conn.query_row("SELECT key, body FROM objects WHERE id = ?1", [id], |row| Ok((row.get(0)?, row.get(1)?))).unwrap();
        assert_eq!((key.as_str(), body == planted), ("intruder", true), "{options}: the other key's row must stay as it was");
        put(&mut *s, "bystander", 6, 100);
        assert_value(&mut *s, "bystander", 6, 100);
        put(&mut *s, "obj-0000000042", 7, 100);
        for intruder in ["intruder", "obj-42", "obj-0000000043"] {
            let err = conn.execute(plant.replace("'intruder'", "?3").as_str(), rusqlite::params![42, planted, intruder]);
            assert!(err.is_err(), "{options}: {intruder:?} planted under a numbered key's id");
            let err = conn.execute(plant.replace("'intruder'", "?3").as_str(), rusqlite::params![41, planted, intruder]);
            assert!(err.unwrap_err().to_string().contains("CHECK"), "{options}: {intruder:?} planted under a free numbered id");
        }
        assert_value(&mut *s, "obj-0000000042", 7, 100);
        assert_kind(s.get("obj-0000000041", &mut sink), ErrorKind::NotFound, "get of a free numbered id");
        assert!(sink.is_empty());
    }
}

/// Numbered keys (the runner's `obj-NNNNNNNNNN`, under their number without a key check) and
/// every other key (hashed below zero, checked) side by side, in every read path of the `rowid`
/// layout: values bound whole and read by SQL, through blob I/O with a handle per get and with one
/// held per session, and values that cross the threshold between gets.
#[test]
fn sqlite_rowid_numbered_keys_and_other_keys_side_by_side() {
    let keys = ["obj-0000000000", "obj-0000000001", "obj-1", "obj-00000000001", "obj-12345678901", "file.txt", "obj-9223372036854775807"];
    for options in [
        "schema = \"rowid\"",
        "schema = \"rowid\"\nblob_io_threshold = 0",
        "schema = \"rowid\"\nblob_io_threshold = \"1KiB\"\nblob_handle = \"per-session\"",
        "schema = \"rowid\"\nblob_io_threshold = \"1KiB\"\nfiles = 3",
    ] {
        let f = Fixture::new("sqlite", options);
        let mut s = f.session(0);
        let len = |i: usize| [10, 3000, 100, 1_048_577][i % 4];
        for (i, key) in keys.iter().enumerate() {
            put(&mut *s, key, 100 + i as u64, len(i));
        }
        for _twice in 0..2 {
            for (i, key) in keys.iter().enumerate() {
                assert_value(&mut *s, key, 100 + i as u64, len(i));
                assert_eq!(s.head(key).unwrap(), len(i), "{options}: head {key}");
            }
        }
        // Overwrite with a size on the other side of the threshold, then read in reverse order.
        for (i, key) in keys.iter().enumerate() {
            put(&mut *s, key, 200 + i as u64, len(i + 1));
        }
        for (i, key) in keys.iter().enumerate().rev() {
            assert_value(&mut *s, key, 200 + i as u64, len(i + 1));
        }
        let mut sink = Vec::new();
        for missing in ["obj-0000000002", "obj-2", "obj-9223372036854775806"] {
            assert_kind(s.get(missing, &mut sink), ErrorKind::NotFound, missing);
            assert_kind(s.head(missing), ErrorKind::NotFound, missing);
            assert_kind(s.delete(missing), ErrorKind::NotFound, missing);
        }
        assert!(sink.is_empty(), "{options}: a missing key wrote bytes");
        for key in keys {
            s.delete(key).unwrap_or_else(|e| panic!("{options}: delete {key}: {e}"));
            assert_kind(s.get(key, &mut sink), ErrorKind::NotFound, key);
            assert_kind(s.delete(key), ErrorKind::NotFound, key);
        }
        // A key deleted by another session is gone for this one after its own next write.
        put(&mut *s, "obj-0000000005", 5, 3000);
        assert_value(&mut *s, "obj-0000000005", 5, 3000);
        f.session(1).delete("obj-0000000005").unwrap();
        put(&mut *s, "other", 6, 10);
        assert_kind(s.get("obj-0000000005", &mut sink), ErrorKind::NotFound, "deleted by another session");
        assert!(sink.is_empty());
    }
}

/// `CREATE TABLE IF NOT EXISTS` keeps a table of the other layout; prepare must refuse it, naming
/// the file and the option, and leave the data alone.
#[test]
fn sqlite_refuses_a_database_made_with_the_other_schema() {
    for (made_with, asked) in [("", "schema = \"rowid\""), ("schema = \"rowid\"", "schema = \"text-key\"")] {
        let f = Fixture::new("sqlite", made_with);
        put(&mut *f.session(0), "kept", 8, 300);
        let ns = Namespace::create(&f.ns_dir, "conformance", "case").unwrap();
        let options = Options::new("conformance", "", toml::from_str(asked).unwrap());
        let other = (stowbench::backend::find("sqlite").unwrap().construct)(&options, &ns).unwrap();
        let err = other.prepare().expect_err("a database of the other schema must be refused");
        let db = f.ns_dir.join("objects.db");
        assert!(err.message.contains(&db.display().to_string()) && err.message.contains(asked), "name file and option: {err}");
        assert_value(&mut *f.session(0), "kept", 8, 300);
    }
}

conformance!(sqlite_file_then_row, "sqlite-file", "");
conformance!(sqlite_file_row_then_file, "sqlite-file", "order = \"row-then-file\"");
conformance!(sqlite_file_fsync_rollback, "sqlite-file", "fsync = true\njournal_mode = \"truncate\"");
conformance!(sqlite_file_direct, "sqlite-file", "direct = true");
conformance!(sqlite_file_row_then_file_direct_fsync, "sqlite-file", "order = \"row-then-file\"\ndirect = true\nfsync = true");
conformance!(pack_default, "pack", "");
conformance!(pack_fsync, "pack", "fsync = true");
conformance!(pack_unchecked_reads, "pack", "read_checks = false");
conformance!(cfb_default, "cfb", "");
conformance!(zip_default, "zip", "");
conformance!(zip_flush_none, "zip", "flush = \"none\"");
conformance!(postgres_bytea, "postgres", "mode = \"bytea\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_bytea_default_storage, "postgres", "mode = \"bytea\"\nstorage = \"default\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_lo, "postgres", "mode = \"lo\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_lo_small_chunks, "postgres", "mode = \"lo\"\nchunk_size = \"8KiB\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_file, "postgres", "mode = \"file\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_file_direct, "postgres", "mode = \"file\"\ndirect = true", requires = "STOWBENCH_PG_URI");
conformance!(postgres_bytea_two_tablespaces, "postgres", "tablespaces = 2\npartitions = 3\nwait_sample = \"5ms\"", requires = "STOWBENCH_PG_URI");
conformance!(postgres_file_partitions, "postgres", "mode = \"file\"\npartitions = 4", requires = "STOWBENCH_PG_URI");
conformance!(mariadb_default, "mariadb", "", requires = "STOWBENCH_MARIADB_URI");
conformance!(mariadb_file, "mariadb", "mode = \"file\"", requires = "STOWBENCH_MARIADB_URI");
conformance!(mariadb_file_row_then_file, "mariadb", "mode = \"file\"\norder = \"row-then-file\"", requires = "STOWBENCH_MARIADB_URI");
conformance!(mariadb_file_fsync, "mariadb", "mode = \"file\"\nfsync = true", requires = "STOWBENCH_MARIADB_URI");
conformance!(mariadb_file_direct_row_then_file, "mariadb", "mode = \"file\"\ndirect = true\norder = \"row-then-file\"", requires = "STOWBENCH_MARIADB_URI");
conformance!(s3_default, "s3", "", requires = "STOWBENCH_S3_ENDPOINT");
conformance!(s3_multipart, "s3", "multipart_threshold = \"1MiB\"\npart_size = \"5MiB\"", requires = "STOWBENCH_S3_ENDPOINT");
conformance!(s3_whole_payload, "s3", "payload_signing = \"whole\"\nmultipart_threshold = \"5MiB\"\npart_size = \"5MiB\"", requires = "STOWBENCH_S3_ENDPOINT");
conformance!(
    s3_unsigned_payload,
    "s3",
    "payload_signing = \"unsigned\"\nmultipart_threshold = \"5MiB\"\npart_size = \"5MiB\"",
    requires = "STOWBENCH_S3_ENDPOINT"
);
conformance!(gridfs_default, "gridfs", "", requires = "STOWBENCH_MONGO_URI");
conformance!(gridfs_small_chunks, "gridfs", "chunk_size = \"64KiB\"", requires = "STOWBENCH_MONGO_URI");
conformance!(sim_default, "sim", "");
// A backend that declares less: every behaviour still holds where declared, and the undeclared
// ones are refused.
conformance!(sim_no_delete_no_overwrite, "sim", "delete = false\noverwrite = false");
conformance!(sim_single_writer, "sim", "concurrent_writers = false");

/// `null` fabricates only stowbench's own payloads, so the byte-pattern behaviours cannot meet
/// it; the checks that need no stored value still do.
#[test]
fn null_states_its_conditions_and_declares_no_deadline() {
    let f = Fixture::new("null", "");
    describe_states_the_options_in_effect(&f);
    path_option_is_honoured(&f);
    assert!(f.session(0).cut_handle().is_none() && !f.backend.capabilities().operation_deadline);
}

/// Every registered backend meets the shared behaviours (describe and `path` included) through a
/// `conformance!` line of this file, or the test above.
#[test]
fn every_registered_backend_has_a_conformance_line() {
    let source = include_str!("conformance.rs");
    for kind in stowbench::backend::registry().iter().filter(|k| k.name != "null") {
        assert!(source.contains(&format!(", \"{}\", ", kind.name)), "backend {} has no conformance! line", kind.name);
    }
}

/// A limit small enough to write exactly: the claim is checked at max + 1 and at max itself.
/// (Not a `conformance!` line: the other behaviours use values above this limit.)
#[test]
fn sim_limit_is_real_at_both_sides() {
    max_object_bytes_is_real(&Fixture::new("sim", "max_object_bytes = 1000"));
}

/// Reports state the conditions: every declared option appears in `describe()` with its effective
/// value, and with a `path` option all data lives in a marked directory (named after the run, so
/// two runs never share it) under that path, which cleanup removes.
#[test]
fn real_backends_describe_every_option_and_honour_path() {
    for name in ["fs", "sqlite", "sqlite-file"] {
        let tmp = tempfile::tempdir().unwrap();
        let user_dir = tmp.path().join("user-chosen");
        std::fs::create_dir(&user_dir).unwrap();
        let ns = Namespace::create(&tmp.path().join("run"), "conformance", "case").unwrap();
        let mut table = toml::Table::new();
        table.insert("path".into(), user_dir.to_string_lossy().into_owned().into());
        let backend = (stowbench::backend::find(name).unwrap().construct)(&Options::new("t", "", table), &ns).unwrap();
        backend.prepare().unwrap();
        put(&mut *backend.open_session(0).unwrap(), "k", 1, 10);
        let info = backend.describe();
        assert_eq!(info.backend, name);
        assert!(!info.durability.is_empty());
        for option in stowbench::backend::find(name).unwrap().options {
            assert!(info.options.get(option.name).is_some(), "{name}: describe() lacks option {}", option.name);
        }
        let ours = user_dir.join("stowbench-conformance-case");
        assert!(ours.join(MARKER_FILE).is_file(), "{name}: no marked directory under the path option");
        for path in &info.data_paths {
            assert!(path.starts_with(&ours), "{name}: data path {} is outside {}", path.display(), ours.display());
        }
        assert_no_file_outside(&user_dir, &ours);
        if name != "fs" {
            assert_eq!(info.versions.get("sqlite").map(String::as_str), Some(rusqlite::version()));
            assert!(info.durability.contains("synchronous=normal"), "{}", info.durability);
        }
        backend.cleanup().unwrap();
        assert_eq!(std::fs::read_dir(&user_dir).unwrap().count(), 0, "{name}: cleanup leaves nothing under the path option");
        backend.cleanup().expect("a second cleanup is harmless");
    }
}

/// Every backend that writes files under a `path` option uses the one per-run namespace: two runs
/// sharing a path get two marked `stowbench-<run id>-<case>` directories, and each run's cleanup
/// removes its own and leaves the other's data alone. Backends with a server are covered where
/// they need it (postgres and mariadb file mode put their content files through the same helper).
#[test]
fn the_path_option_makes_one_directory_per_run_and_cleanup_removes_only_it() {
    let local: Vec<&stowbench::backend::BackendKind> =
        stowbench::backend::registry().iter().filter(|k| k.options.iter().any(|o| o.name == "path") && !["postgres", "mariadb"].contains(&k.name)).collect();
    let names: Vec<&str> = local.iter().map(|k| k.name).collect();
    assert_eq!(names, ["fs", "sqlite", "sqlite-file", "pack", "cfb", "zip"], "every local backend with a path option is checked");
    for kind in local {
        let tmp = tempfile::tempdir().unwrap();
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        let table: toml::Table = toml::from_str(&format!("path = {:?}", shared.display().to_string())).unwrap();
        let options = Options::new("path-test", "tests/conformance.rs", table);
        let runs: Vec<(String, Box<dyn Backend>)> = ["run-a", "run-b"]
            .into_iter()
            .map(|run| {
                let ns = Namespace::create(&tmp.path().join(run), run, "case").unwrap();
                let backend = (kind.construct)(&options, &ns).unwrap_or_else(|e| panic!("{}: {e}", kind.name));
                backend.prepare().unwrap();
                let mut s = backend.open_session(0).unwrap();
                s.put("k", &mut &b"value"[..], 5).unwrap_or_else(|e| panic!("{}: put: {e}", kind.name));
                (run.to_string(), backend)
            })
            .collect();
        let mut dirs: Vec<String> = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        dirs.sort();
        assert_eq!(dirs, ["stowbench-run-a-case", "stowbench-run-b-case"], "{}: one directory per run", kind.name);
        assert!(dirs.iter().all(|d| shared.join(d).join(stowbench::backend::namespace::MARKER_FILE).exists()), "{}: marked", kind.name);
        runs[0].1.cleanup().unwrap();
        let left: Vec<String> = std::fs::read_dir(&shared).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left, ["stowbench-run-b-case"], "{}: run a's cleanup removes its directory only", kind.name);
        let mut got = Vec::new();
        runs[1].1.open_session(0).unwrap().get("k", &mut got).unwrap();
        assert_eq!(got, b"value", "{}: the other run's data is intact", kind.name);
        runs[1].1.cleanup().unwrap();
        assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0, "{}: nothing left", kind.name);
    }
}
