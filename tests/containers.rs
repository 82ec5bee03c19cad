//! Behaviour tests for the container backends (pack, cfb, zip) against real files in temporary
//! directories. One body per behaviour, expanded for each backend by `container_tests!` — the
//! same shape as the shared conformance suite, so each line can move there unchanged.

use std::io::Cursor;
use std::path::Path;
use stowbench::backend::namespace::MARKER_FILE;
use stowbench::backend::options::Options;
use stowbench::backend::{find, Backend, ErrorKind, Namespace, Session};

/// Builds backend `name` with options written as TOML, in namespace directory `dir`.
fn make(name: &str, options_toml: &str, dir: &Path) -> Box<dyn Backend> {
    let ns = Namespace::create(dir, "test-run", "containers").expect("namespace");
    let table: toml::Table = toml::from_str(options_toml).expect("options TOML");
    let options = Options::new(name, "tests/containers.rs", table);
    let backend = (find(name).expect("registered").construct)(&options, &ns).expect("construct");
    backend.prepare().expect("prepare");
    backend
}

/// Deterministic bytes that differ per seed (xorshift64*).
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn put(s: &mut dyn Session, key: &str, value: &[u8]) {
    s.put(key, &mut Cursor::new(value), value.len() as u64).unwrap_or_else(|e| panic!("put {key:?}: {e}"));
}

fn get(s: &mut dyn Session, key: &str) -> Result<Vec<u8>, ErrorKind> {
    let mut out = Vec::new();
    match s.get(key, &mut out) {
        Ok(n) => {
            assert_eq!(n, out.len() as u64, "get {key:?} reported {n} bytes");
            Ok(out)
        }
        Err(e) => Err(e.kind),
    }
}

pub fn round_trip_exact_sizes(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make(name, opts, tmp.path());
    let mut s = backend.open_session(0).unwrap();
    for (i, len) in [0usize, 1, 3 * 1024 * 1024 + 7].into_iter().enumerate() {
        let key = format!("size-{len}");
        let value = payload(i as u64, len);
        put(s.as_mut(), &key, &value);
        assert_eq!(s.head(&key).unwrap(), len as u64);
        assert!(get(s.as_mut(), &key).unwrap() == value, "{name}: {len} bytes differ");
    }
}

pub fn overwrite_replaces(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make(name, opts, tmp.path());
    let mut s = backend.open_session(0).unwrap();
    put(s.as_mut(), "k", &payload(1, 100_000));
    put(s.as_mut(), "k", &payload(2, 10));
    assert_eq!(get(s.as_mut(), "k").unwrap(), payload(2, 10));
    assert_eq!(s.head("k").unwrap(), 10);
    put(s.as_mut(), "k", &payload(3, 5000));
    assert_eq!(get(s.as_mut(), "k").unwrap(), payload(3, 5000));
}

pub fn missing_keys_and_double_delete(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make(name, opts, tmp.path());
    let mut s = backend.open_session(0).unwrap();
    assert_eq!(get(s.as_mut(), "nope"), Err(ErrorKind::NotFound));
    assert_eq!(s.head("nope").unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s.delete("nope").unwrap_err().kind, ErrorKind::NotFound);
    put(s.as_mut(), "gone", b"x");
    s.delete("gone").unwrap();
    assert_eq!(s.delete("gone").unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(get(s.as_mut(), "gone"), Err(ErrorKind::NotFound));
    assert_eq!(s.head("gone").unwrap_err().kind, ErrorKind::NotFound);
    put(s.as_mut(), "gone", b"back");
    assert_eq!(get(s.as_mut(), "gone").unwrap(), b"back");
}

pub fn odd_keys(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make(name, opts, tmp.path());
    let mut s = backend.open_session(0).unwrap();
    let long = "long/".repeat(60);
    let mut keys = vec!["a/b", "../x", "..", ".", "ключ-ü-😀", "with spaces", "A", "a", "x:y!z\\w%41", ""];
    // fs turns a key into one file name, so keys over ~255 encoded bytes fail there (ENAMETOOLONG);
    // the containers have no such limit.
    if name != "fs" {
        keys.push(long.as_str());
    }
    for (i, key) in keys.iter().enumerate() {
        put(s.as_mut(), key, &payload(100 + i as u64, 1000 + i));
    }
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(get(s.as_mut(), key).unwrap(), payload(100 + i as u64, 1000 + i), "{name}: key {key:?}");
    }
    // Nothing may escape the namespace directory ("../x" must not create a file next to it).
    let parent_entries: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(parent_entries.iter().all(|n| n == MARKER_FILE || !n.to_string_lossy().contains('x')), "{parent_entries:?}");
}

/// Four sessions at once: disjoint keys must round-trip exactly; shared keys must end holding one
/// complete value that some session wrote (never a mix), and reads during writes see whole values.
pub fn four_concurrent_sessions(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make(name, opts, tmp.path());
    let candidates = |k: usize| -> Vec<Vec<u8>> { (0..4).map(|t| payload(1000 + (k * 10 + t) as u64, 20_000 + t * 3)).collect() };
    let waits: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let backend = &backend;
                scope.spawn(move || {
                    let mut s = backend.open_session(t).unwrap();
                    for i in 0..15 {
                        let key = format!("own-{t}-{i}");
                        put(s.as_mut(), &key, &payload((t * 100 + i) as u64, 1000 * i + t));
                        for k in 0..3 {
                            let shared = format!("shared-{k}");
                            put(s.as_mut(), &shared, &candidates(k)[t]);
                            match get(s.as_mut(), &shared) {
                                Ok(v) => assert!(candidates(k).contains(&v), "{name}: torn value of {shared}"),
                                Err(kind) => panic!("{name}: {shared}: {kind:?}"),
                            }
                        }
                    }
                    for i in 0..15 {
                        let key = format!("own-{t}-{i}");
                        assert_eq!(get(s.as_mut(), &key).unwrap(), payload((t * 100 + i) as u64, 1000 * i + t), "{name}: {key}");
                    }
                    s.wait_ns()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    let mut s = backend.open_session(9).unwrap();
    for k in 0..3 {
        assert!(candidates(k).contains(&get(s.as_mut(), &format!("shared-{k}")).unwrap()));
    }
    if !backend.capabilities().concurrent_writers {
        assert!(waits.iter().sum::<u64>() > 0, "{name}: a single-writer backend must report lock waits");
    }
}

pub fn prepare_is_idempotent_and_cleanup_leaves_only_the_marker(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ns");
    let backend = make(name, opts, &dir);
    backend.prepare().unwrap();
    let mut s = backend.open_session(0).unwrap();
    put(s.as_mut(), "k", b"v");
    backend.prepare().unwrap();
    assert_eq!(get(s.as_mut(), "k").unwrap(), b"v");
    assert!(backend.disk_usage().unwrap().allocated_bytes > 0);
    drop(s);
    backend.cleanup().unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, vec![MARKER_FILE.to_string()], "{name}");
    backend.cleanup().unwrap();
}

pub fn data_persists_after_reopen(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    {
        let backend = make(name, opts, tmp.path());
        let mut s = backend.open_session(0).unwrap();
        for i in 0..20u64 {
            put(s.as_mut(), &format!("k{i}"), &payload(i, 3000 * i as usize));
        }
        put(s.as_mut(), "k3", b"new");
        s.delete("k4").unwrap();
    }
    for round in 0..2 {
        let backend = make(name, opts, tmp.path());
        let mut s = backend.open_session(0).unwrap();
        for i in 0..20u64 {
            let got = get(s.as_mut(), &format!("k{i}"));
            match i {
                3 => assert_eq!(got.unwrap(), b"new"),
                4 => assert_eq!(got, Err(ErrorKind::NotFound)),
                _ => assert!(got.unwrap() == payload(i, 3000 * i as usize), "{name} round {round}: k{i}"),
            }
        }
        // Writing after a reopen must not damage what was there.
        put(s.as_mut(), &format!("after-{round}"), &payload(77, 4096));
        assert_eq!(get(s.as_mut(), "after-0").unwrap(), payload(77, 4096));
    }
}

/// A put whose body ends early keeps the old value, also once the backend is closed and reopened
/// (for zip with flush = "none", closing is when the central directory is written).
pub fn failed_overwrite_survives_reopen(name: &str, opts: &str) {
    let tmp = tempfile::tempdir().unwrap();
    {
        let backend = make(name, opts, tmp.path());
        let mut s = backend.open_session(0).unwrap();
        put(s.as_mut(), "k", &payload(1, 300_000));
        put(s.as_mut(), "other", &payload(2, 1000));
        for claimed in [4000u64, 2 * 1024 * 1024 + 5] {
            let short = payload(3, claimed as usize / 2);
            assert!(s.put("k", &mut Cursor::new(&short), claimed).is_err(), "{name}: a short body must fail");
            assert!(s.put("fresh", &mut Cursor::new(&short), claimed).is_err(), "{name}: a short body must fail");
            assert!(get(s.as_mut(), "k").unwrap() == payload(1, 300_000), "{name}: old value lost");
        }
    }
    let mut expected = payload(1, 300_000);
    for round in 0..2u64 {
        let backend = make(name, opts, tmp.path());
        let mut s = backend.open_session(0).unwrap();
        assert!(get(s.as_mut(), "k").unwrap() == expected, "{name} round {round}: old value lost after reopen");
        assert_eq!(s.head("k").unwrap(), expected.len() as u64);
        assert_eq!(get(s.as_mut(), "other").unwrap(), payload(2, 1000));
        assert_eq!(get(s.as_mut(), "fresh"), Err(ErrorKind::NotFound), "{name}: a failed put left a value");
        expected = payload(10 + round, 5000);
        put(s.as_mut(), "k", &expected);
    }
}

macro_rules! container_tests {
    ($module:ident, $name:expr, $options:expr) => {
        mod $module {
            #[test]
            fn round_trip_exact_sizes() {
                super::round_trip_exact_sizes($name, $options)
            }
            #[test]
            fn overwrite_replaces() {
                super::overwrite_replaces($name, $options)
            }
            #[test]
            fn missing_keys_and_double_delete() {
                super::missing_keys_and_double_delete($name, $options)
            }
            #[test]
            fn odd_keys() {
                super::odd_keys($name, $options)
            }
            #[test]
            fn four_concurrent_sessions() {
                super::four_concurrent_sessions($name, $options)
            }
            #[test]
            fn prepare_is_idempotent_and_cleanup_leaves_only_the_marker() {
                super::prepare_is_idempotent_and_cleanup_leaves_only_the_marker($name, $options)
            }
            #[test]
            fn data_persists_after_reopen() {
                super::data_persists_after_reopen($name, $options)
            }
            #[test]
            fn failed_overwrite_survives_reopen() {
                super::failed_overwrite_survives_reopen($name, $options)
            }
        }
    };
}

container_tests!(pack, "pack", "");
container_tests!(pack_fsync, "pack", "fsync = true");
container_tests!(cfb, "cfb", "");
container_tests!(cfb_fsync, "cfb", "fsync = true");
container_tests!(zip, "zip", "");
container_tests!(zip_unflushed, "zip", "flush = \"none\"");
container_tests!(fs_reference, "fs", "");

#[test]
fn single_writer_backends_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, concurrent) in [("pack", true), ("cfb", false), ("zip", false)] {
        let backend = make(name, "", &tmp.path().join(name));
        assert_eq!(backend.capabilities().concurrent_writers, concurrent, "{name}");
        assert!(!backend.describe().durability.is_empty());
    }
}

#[test]
fn unknown_options_are_refused_with_a_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    let ns = Namespace::create(tmp.path(), "r", "x").unwrap();
    for name in ["pack", "cfb", "zip"] {
        let options = Options::new("t", "job.toml line 3", toml::from_str("fsynk = true").unwrap());
        let err = (find(name).unwrap().construct)(&options, &ns).err().expect("refused");
        assert!(err.contains("fsynk") && err.contains("Did you mean \"fsync\""), "{name}: {err}");
    }
    let options = Options::new("t", "job.toml", toml::from_str("flush = \"sometimes\"").unwrap());
    assert!((find("zip").unwrap().construct)(&options, &ns).err().unwrap().contains("per-put"));
}

#[test]
fn zip_archive_is_readable_by_the_standard_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make("zip", "", tmp.path());
    let mut s = backend.open_session(0).unwrap();
    put(s.as_mut(), "a/b", &payload(1, 5000));
    put(s.as_mut(), "a/b", &payload(2, 7000));
    put(s.as_mut(), "c", &payload(3, 10));
    s.delete("c").unwrap();
    // A failed overwrite: the old value comes back as a fresh entry, and the aborted body's
    // megabyte is cut off rather than left trailing the central directory.
    let short = payload(4, 1024 * 1024);
    assert!(s.put("a/b", &mut Cursor::new(&short), 2 * 1024 * 1024).is_err());
    let archive_bytes = std::fs::metadata(tmp.path().join("zip/store.zip")).unwrap().len();
    assert!(archive_bytes < 64 * 1024, "{archive_bytes} bytes: the aborted body was left in the archive");
    // With flush = per-put the file is a complete archive after every operation, failed ones too.
    let mut archive = ::zip::ZipArchive::new(std::fs::File::open(tmp.path().join("zip/store.zip")).unwrap()).unwrap();
    assert_eq!(archive.len(), 1);
    let mut entry = archive.by_name(&stowbench::backend::zip::entry_name("a/b")).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
    assert_eq!(bytes, payload(2, 7000));
}

#[test]
fn cfb_file_is_a_valid_compound_file() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make("cfb", "", tmp.path());
    let mut s = backend.open_session(0).unwrap();
    put(s.as_mut(), "a/b", &payload(1, 50_000));
    put(s.as_mut(), "small", &payload(2, 100));
    drop(s);
    drop(backend);
    // A strict open checks the file against the MS-CFB rules.
    let file = std::fs::File::open(tmp.path().join("cfb/store.cfb")).unwrap();
    let mut cfb = ::cfb::CompoundFile::open_strict(file).unwrap();
    let mut stream = cfb.open_stream(stowbench::backend::cfb::stream_path("a/b")).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut bytes).unwrap();
    assert_eq!(bytes, payload(1, 50_000));
}

/// If a failed overwrite cannot bring the old value back (here its bytes were damaged on disk, so
/// the copy fails its CRC-32), the error says so and the key is gone rather than half-restored.
#[test]
fn zip_failed_restore_is_reported_and_removes_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let backend = make("zip", "", tmp.path());
    let mut s = backend.open_session(0).unwrap();
    let old = payload(1, 5000);
    put(s.as_mut(), "k", &old);
    let path = tmp.path().join("zip/store.zip");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(old.len()).position(|w| w == old.as_slice()).expect("stored entries hold the bytes as they are");
    bytes[at + 100] ^= 0xFF;
    std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&path).unwrap(), &bytes[at + 100..at + 101], (at + 100) as u64)
        .unwrap();
    let err = s.put("k", &mut Cursor::new(payload(2, 10)), 20).unwrap_err();
    assert!(err.message.contains("restoring the old value failed") && err.message.contains("CRC-32"), "{err}");
    assert_eq!(s.head("k").unwrap_err().kind, ErrorKind::NotFound);
    put(s.as_mut(), "k", b"again");
    assert_eq!(get(s.as_mut(), "k").unwrap(), b"again");
    drop(s);
    drop(backend);
    let backend = make("zip", "", tmp.path());
    assert_eq!(get(backend.open_session(0).unwrap().as_mut(), "k").unwrap(), b"again");
}

/// The crash window of cfb's two-slot put: a newer value committed in slot B while slot A still
/// holds the older one, plus an interrupted put (uncommitted slot) for another key. After a
/// reopen the newer committed value is read, the uncommitted one ignored, and the next puts
/// reuse the stale slots and leave one slot per key.
#[test]
fn cfb_reads_the_newer_committed_slot_after_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let file_path = tmp.path().join("cfb/store.cfb");
    {
        let backend = make("cfb", "", tmp.path());
        let mut s = backend.open_session(0).unwrap();
        put(s.as_mut(), "k", &payload(1, 10_000)); // slot A, generation 1
        put(s.as_mut(), "u", &payload(2, 300));
    }
    {
        // What a process killed mid-put leaves behind, written with the crate directly.
        let mut cfb = ::cfb::open_rw(&file_path).unwrap();
        let [_, k_b] = stowbench::backend::cfb::slot_paths("k");
        std::io::Write::write_all(&mut cfb.create_new_stream(&k_b).unwrap(), &payload(3, 7000)).unwrap();
        cfb.set_state_bits(&k_b, 2).unwrap(); // committed, but slot A not yet removed
        let [_, u_b] = stowbench::backend::cfb::slot_paths("u");
        std::io::Write::write_all(&mut cfb.create_new_stream(&u_b).unwrap(), &payload(4, 100)).unwrap(); // never committed
        cfb.flush().unwrap();
    }
    let backend = make("cfb", "", tmp.path());
    let mut s = backend.open_session(0).unwrap();
    assert_eq!(get(s.as_mut(), "k").unwrap(), payload(3, 7000), "the newer committed slot must win");
    assert_eq!(s.head("k").unwrap(), 7000);
    assert_eq!(get(s.as_mut(), "u").unwrap(), payload(2, 300), "an uncommitted slot must be ignored");
    assert_eq!(s.head("u").unwrap(), 300);
    put(s.as_mut(), "k", &payload(5, 20_000));
    put(s.as_mut(), "u", &payload(6, 50));
    assert_eq!(get(s.as_mut(), "k").unwrap(), payload(5, 20_000));
    assert_eq!(get(s.as_mut(), "u").unwrap(), payload(6, 50));
    drop(s);
    drop(backend);
    let cfb = ::cfb::CompoundFile::open_strict(std::fs::File::open(&file_path).unwrap()).unwrap();
    for key in ["k", "u"] {
        let left: Vec<_> = stowbench::backend::cfb::slot_paths(key).into_iter().filter(|path| cfb.exists(path)).collect();
        assert_eq!(left.len(), 1, "{key}: one slot must remain, found {left:?}");
        assert!(cfb.entry(&left[0]).unwrap().state_bits() != 0, "{key}: the remaining slot must be committed");
    }
}

/// A container file cut short (a crash mid-put) is refused with an error naming the file; no panic.
#[test]
fn damaged_container_files_are_refused_by_name() {
    for (name, file) in [("zip", "zip/store.zip"), ("cfb", "cfb/store.cfb")] {
        let tmp = tempfile::tempdir().unwrap();
        {
            let backend = make(name, "", tmp.path());
            let mut s = backend.open_session(0).unwrap();
            for i in 0..5 {
                put(s.as_mut(), &format!("k{i}"), &payload(i, 20_000));
            }
        }
        let path = tmp.path().join(file);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
        let ns = Namespace::create(tmp.path(), "test-run", "containers").unwrap();
        let backend = (find(name).unwrap().construct)(&Options::new(name, "t", toml::Table::new()), &ns).unwrap();
        let err = backend.prepare().expect_err("a torn container must be refused");
        assert!(err.message.contains("store."), "{name}: {err}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len / 2, "{name}: the damaged file must be left as it is");
    }
}
