//! Server backends (postgres, mariadb, s3, gridfs) against the real servers started by
//! scripts/services.sh: the conformance behaviours, plus what only a server can get wrong —
//! cleanup leaves none of our tables, large objects, objects or GridFS files on the server and
//! never touches anyone else's; size limits are refused before any data; an end-to-end run fills
//! the server figures; and no secret ever reaches an output.
//!
//! A service whose environment variable is missing skips its tests with a loud message; with
//! CI=true it fails them. Run: `eval "$(scripts/services.sh env)"; cargo test --release --test servers`.

mod common;

use std::io::Read;
use stowbench::backend::options::Options;
use stowbench::backend::server::owned_name;
use stowbench::backend::{Backend, ErrorKind, Namespace, Session};

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

// ---- seeded payloads: every byte depends on seed and position, so mixes and truncations show ----

fn block(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn byte_at(seed: u64, pos: u64) -> u8 {
    (block(seed, pos / 8) >> (8 * (pos % 8))) as u8
}

fn payload(seed: u64, len: u64) -> Vec<u8> {
    (0..len).map(|p| byte_at(seed, p)).collect()
}

/// A body that yields payload `seed` and counts what was read.
struct Body {
    seed: u64,
    len: u64,
    pos: u64,
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min((self.len - self.pos) as usize);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = byte_at(self.seed, self.pos + i as u64);
        }
        self.pos += n as u64;
        Ok(n)
    }
}

fn body(seed: u64, len: u64) -> Body {
    Body { seed, len, pos: 0 }
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
    s.put(key, &mut body(seed, len), len).unwrap_or_else(|e| panic!("put {key:?} ({len} bytes): {e}"));
}

fn assert_value(s: &mut dyn Session, key: &str, seed: u64, len: u64) {
    let mut got = Vec::new();
    let n = s.get(key, &mut got).unwrap_or_else(|e| panic!("get {key:?}: {e}"));
    assert_eq!(n, len, "get {key:?} length");
    assert!(got == payload(seed, len), "get {key:?}: bytes differ from what was put");
    assert_eq!(s.head(key).unwrap_or_else(|e| panic!("head {key:?}: {e}")), len, "head {key:?}");
}

fn assert_kind<T: std::fmt::Debug>(r: Result<T, stowbench::backend::BackendError>, kind: ErrorKind, what: &str) {
    match r {
        Err(e) => assert_eq!(e.kind, kind, "{what}: {e}"),
        Ok(v) => panic!("{what}: expected {kind:?}, got Ok({v:?})"),
    }
}

// ---- behaviours ----

fn round_trip_is_byte_exact(f: &Fixture) {
    let mut s = f.session(0);
    let sizes = [0u64, 1, 7, 262_145, 1_048_577, 3 * 1_048_576 + 7];
    for (i, len) in sizes.iter().enumerate() {
        put(&mut *s, &format!("size-{len}"), 100 + i as u64, *len);
    }
    for (i, len) in sizes.iter().enumerate() {
        assert_value(&mut *s, &format!("size-{len}"), 100 + i as u64, *len);
    }
}

fn overwrite_shorter_after_longer(f: &Fixture) {
    let mut s = f.session(0);
    for (seed, len) in [(1u64, 2 * 1_048_576 + 3), (2, 100), (3, 0), (4, 1_500_001)] {
        put(&mut *s, "k", seed, len);
        assert_value(&mut *s, "k", seed, len);
    }
    assert_value(&mut *f.session(1), "k", 4, 1_500_001);
}

fn missing_keys_are_not_found(f: &Fixture) {
    let mut s = f.session(0);
    assert_kind(s.get("never-written", &mut Vec::new()), ErrorKind::NotFound, "get of a missing key");
    assert_kind(s.head("never-written"), ErrorKind::NotFound, "head of a missing key");
    assert_kind(s.delete("never-written"), ErrorKind::NotFound, "delete of a missing key");
}

fn delete_twice(f: &Fixture) {
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
        assert!(s.put("kept", &mut body(12, claimed / 2), claimed).is_err(), "a put whose body ends early must fail");
        assert!(s.put("fresh", &mut body(12, claimed / 2), claimed).is_err());
    }
    assert_value(&mut *s, "kept", 11, 5000);
    assert_kind(s.head("fresh"), ErrorKind::NotFound, "head of a key whose only put failed");
}

fn disjoint_keys_from_four_sessions(f: &Fixture) {
    std::thread::scope(|scope| {
        for w in 0..4u64 {
            scope.spawn(move || {
                let mut s = f.session(w as usize);
                let len = |j: u64| if j % 4 == 3 { 1_048_577 + j } else { 1 + j * 9_973 };
                for j in 0..8 {
                    put(&mut *s, &format!("w{w}-{j}"), w << 32 | j, len(j));
                }
                for j in 0..8 {
                    assert_value(&mut *s, &format!("w{w}-{j}"), w << 32 | j, len(j));
                }
            });
        }
    });
}

fn shared_len(seed: u64) -> u64 {
    [100, 70_001, 1_048_577, 1_600_003][(seed % 4) as usize]
}

/// Which put wrote `value`, among the seeds this test uses (None: a mix or a truncation).
fn identify(value: &[u8]) -> Option<u64> {
    let seeds = (0..3u64).map(|k| 99 << 32 | k).chain((0..4u64).flat_map(|w| (0..10u64).map(move |i| w << 32 | i)));
    seeds.filter(|s| shared_len(*s) == value.len() as u64).find(|s| payload(*s, value.len() as u64) == value)
}

fn shared_keys_never_mixed(f: &Fixture) {
    let mut s = f.session(0);
    for k in 0..3u64 {
        put(&mut *s, &format!("shared-{k}"), 99 << 32 | k, shared_len(99 << 32 | k));
    }
    std::thread::scope(|scope| {
        for w in 0..4u64 {
            scope.spawn(move || {
                let mut s = f.session(w as usize);
                for i in 0..10u64 {
                    let seed = w << 32 | i;
                    put(&mut *s, &format!("shared-{}", i % 3), seed, shared_len(seed));
                    let key = format!("shared-{}", (i + w) % 3);
                    let mut value = Vec::new();
                    match s.get(&key, &mut value) {
                        Ok(_) => assert!(identify(&value).is_some(), "{key}: {} bytes that are no single put's value", value.len()),
                        // GridFS: a concurrent overwrite may delete the revision being read; that
                        // is a reported conflict, never a mixed value.
                        Err(e) => assert_eq!(e.kind, ErrorKind::Conflict, "get {key}: {e}"),
                    }
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

const ODD_KEYS: &[&str] = &["a/b", "a%2Fb", "../x", "/abs", ".", "..", "", " ", "with space", "new\nline", "ünïcødé-キー-🙂", "%", "~", "~7E", "NUL\u{0}byte", "'; DROP TABLE x; --"];

fn odd_keys_round_trip(f: &Fixture) {
    let mut s = f.session(0);
    for (i, key) in ODD_KEYS.iter().enumerate() {
        put(&mut *s, key, 500 + i as u64, 100 + i as u64);
    }
    for (i, key) in ODD_KEYS.iter().enumerate() {
        assert_value(&mut *s, key, 500 + i as u64, 100 + i as u64);
    }
    for key in ODD_KEYS {
        s.delete(key).unwrap_or_else(|e| panic!("delete {key:?}: {e}"));
    }
}

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

fn too_large_is_refused_before_reading(f: &Fixture) {
    let caps = f.backend.capabilities();
    let Some(max) = caps.max_object_bytes else { return };
    assert!(caps.max_object_hint.is_some_and(|h| !h.is_empty()), "a limit comes with a hint");
    let mut s = f.session(0);
    let mut b = body(41, max + 1);
    assert_kind(s.put("too-big", &mut b, max + 1), ErrorKind::TooLarge, "put of max_object_bytes + 1");
    assert_eq!(b.pos, 0, "the refusal must come before any data is read");
    assert_kind(s.head("too-big"), ErrorKind::NotFound, "nothing stored after the refusal");
}

macro_rules! server_suite {
    ($module:ident, $backend:expr, $options:expr, $server:expr) => {
        mod $module {
            use super::*;
            fn run(behaviour: fn(&Fixture)) {
                if available($server.env()) {
                    behaviour(&fixture($backend, $options));
                }
            }
            #[test]
            fn round_trip_is_byte_exact() {
                run(super::round_trip_is_byte_exact)
            }
            #[test]
            fn overwrite_shorter_after_longer() {
                run(super::overwrite_shorter_after_longer)
            }
            #[test]
            fn missing_keys_are_not_found() {
                run(super::missing_keys_are_not_found)
            }
            #[test]
            fn delete_twice() {
                run(super::delete_twice)
            }
            #[test]
            fn a_failed_put_changes_nothing() {
                run(super::a_failed_put_changes_nothing)
            }
            #[test]
            fn disjoint_keys_from_four_sessions() {
                run(super::disjoint_keys_from_four_sessions)
            }
            #[test]
            fn shared_keys_never_mixed() {
                run(super::shared_keys_never_mixed)
            }
            #[test]
            fn prepare_twice_keeps_the_data() {
                run(super::prepare_twice_keeps_the_data)
            }
            #[test]
            fn odd_keys_round_trip() {
                run(super::odd_keys_round_trip)
            }
            #[test]
            fn too_large_is_refused_before_reading() {
                run(super::too_large_is_refused_before_reading)
            }
            #[test]
            fn cleanup_removes_ours_and_only_ours() {
                if available($server.env()) {
                    super::cleanup_removes_ours_and_only_ours(&fixture($backend, $options), $server);
                }
            }
        }
    };
}

server_suite!(postgres_bytea, "postgres", "mode = \"bytea\"", Server::Pg);
server_suite!(postgres_bytea_default_storage, "postgres", "mode = \"bytea\"\nstorage = \"default\"", Server::Pg);
server_suite!(postgres_lo, "postgres", "mode = \"lo\"", Server::Pg);
server_suite!(postgres_lo_small_chunks, "postgres", "mode = \"lo\"\nchunk_size = \"8KiB\"", Server::Pg);
server_suite!(postgres_file, "postgres", "mode = \"file\"", Server::Pg);
server_suite!(mariadb_default, "mariadb", "", Server::Maria);
server_suite!(s3_default, "s3", "", Server::S3);
server_suite!(s3_multipart, "s3", "multipart_threshold = \"1MiB\"\npart_size = \"5MiB\"", Server::S3);
server_suite!(gridfs_default, "gridfs", "", Server::Mongo);
server_suite!(gridfs_small_chunks, "gridfs", "chunk_size = \"64KiB\"", Server::Mongo);

#[path = "servers/inspect.rs"]
mod inspect;
use inspect::Server;

#[path = "servers/end_to_end.rs"]
mod end_to_end;

/// The port of a URI like scheme://user@host:PORT/db.
fn inspect_port(uri: &str) -> u16 {
    stowbench::backend::server::host_port(uri, 0).expect("URI with a port").1
}
