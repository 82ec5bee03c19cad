//! Crash and damage tests for the pack format: torn tails at hundreds of offsets, random byte
//! flips and garbage, zero-filled holes, compaction and its interruption, the directory lock, the
//! persisted index (used, resumed after a crash, ignored when it does not fit) and the zeros a
//! durable writer writes ahead of its tail.
//! The rule under test: opening never panics, and a get returns exactly bytes that were put for
//! that key — or NotFound — never anything else.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use stowbench::backend::ErrorKind;
use stowbench::pack::record::FILE_HEADER_BYTES;
use stowbench::pack::{compact, compact_with, CompactOptions, PackStore};

const DATA_FILE: &str = "g000001-s0000.pack";
const INDEX_FILE: &str = "g000001.index";

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len).map(|_| (rng.next() >> 56) as u8).collect()
}

/// One operation as written: the key, the value (None = delete) and the record's byte range.
#[derive(Clone)]
struct Op {
    key: String,
    value: Option<Vec<u8>>,
    start: u64,
    end: u64,
}

/// Writes a pack of puts, overwrites and deletes through one writer; returns the operations.
fn build_pack(dir: &Path, ops_count: usize, seed: u64) -> Vec<Op> {
    let store = PackStore::open(dir, false).unwrap();
    let mut lease = store.lease().unwrap();
    let mut rng = Rng(seed | 1);
    let mut live: HashMap<String, bool> = HashMap::new();
    let mut ops = Vec::new();
    for i in 0..ops_count {
        let key = format!("k{}", rng.below(12));
        let start = store.stripe(0).tail_bytes();
        let value = if live.get(&key).copied().unwrap_or(false) && rng.below(6) == 0 {
            lease.delete(&key).unwrap();
            live.insert(key.clone(), false);
            None
        } else {
            let len = if rng.below(10) == 0 { 0 } else { rng.below(4000) as usize };
            let value = payload(seed * 1000 + i as u64, len);
            lease.put(&key, &mut Cursor::new(&value), len as u64).unwrap();
            live.insert(key.clone(), true);
            Some(value)
        };
        ops.push(Op { key, value, start, end: store.stripe(0).tail_bytes() });
    }
    ops
}

/// What each key must hold after replaying the operations whose records end at or before `cut`.
fn expected_at(ops: &[Op], cut: u64) -> HashMap<String, Option<Vec<u8>>> {
    let mut state = HashMap::new();
    for op in ops.iter().filter(|op| op.end <= cut) {
        state.insert(op.key.clone(), op.value.clone());
    }
    state
}

fn all_keys(ops: &[Op]) -> Vec<String> {
    let mut keys: Vec<String> = ops.iter().map(|op| op.key.clone()).collect();
    keys.sort();
    keys.dedup();
    keys
}

fn get(store: &PackStore, key: &str) -> Result<Vec<u8>, ErrorKind> {
    let mut out = Vec::new();
    store.get(key, &mut out).map(|_| out).map_err(|e| e.kind)
}

/// A fresh pack directory holding `bytes` as its only data file.
fn pack_with_bytes(root: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(DATA_FILE), bytes).unwrap();
    dir
}

fn assert_state(store: &PackStore, ops: &[Op], expected: &HashMap<String, Option<Vec<u8>>>, context: &str) {
    for key in all_keys(ops) {
        match expected.get(&key).cloned().flatten() {
            Some(value) => assert!(get(store, &key).as_ref() == Ok(&value), "{context}: {key} differs"),
            None => assert_eq!(get(store, &key), Err(ErrorKind::NotFound), "{context}: {key} should be absent"),
        }
    }
}

#[test]
fn truncation_at_hundreds_of_offsets_keeps_exactly_the_complete_records() {
    let tmp = tempfile::tempdir().unwrap();
    let ops = build_pack(&tmp.path().join("orig"), 80, 7);
    let original = std::fs::read(tmp.path().join("orig").join(DATA_FILE)).unwrap();
    let len = original.len() as u64;
    let mut rng = Rng(99);
    let mut cuts: Vec<u64> = (0..300).map(|_| rng.below(len + 1)).collect();
    for op in &ops {
        cuts.extend([op.start + 1, op.end - 1, op.end, op.start + 57]);
    }
    cuts.extend([0, 1, FILE_HEADER_BYTES - 1, FILE_HEADER_BYTES, len]);
    for (i, cut) in cuts.into_iter().filter(|c| *c <= len).enumerate() {
        let dir = pack_with_bytes(tmp.path(), &format!("cut-{i}"), &original[..cut as usize]);
        let opened = PackStore::open(&dir, false);
        if cut < FILE_HEADER_BYTES {
            // A file without its complete header is refused, and left exactly as it was.
            assert_eq!(opened.err().expect("must refuse").kind, ErrorKind::Corrupt, "cut {cut}");
            assert_eq!(std::fs::metadata(dir.join(DATA_FILE)).unwrap().len(), cut);
            continue;
        }
        let store = opened.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let good_end = ops.iter().map(|op| op.end).filter(|end| *end <= cut).max().unwrap_or(FILE_HEADER_BYTES);
        assert_eq!(std::fs::metadata(dir.join(DATA_FILE)).unwrap().len(), good_end, "cut {cut}: torn tail not cut");
        assert_eq!(store.recovery().cut_tail_bytes, cut - good_end);
        assert_state(&store, &ops, &expected_at(&ops, cut), &format!("cut {cut}"));
        if i % 10 == 0 {
            // Appending after a repaired tail works and survives another reopen.
            store.lease().unwrap().put("after", &mut Cursor::new(b"fresh"), 5).unwrap();
            drop(store);
            let store = PackStore::open(&dir, false).unwrap();
            assert_eq!(get(&store, "after").unwrap(), b"fresh");
            assert_state(&store, &ops, &expected_at(&ops, cut), &format!("cut {cut}, reopened"));
        }
    }
}

#[test]
fn random_flips_and_garbage_never_yield_wrong_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let ops = build_pack(&tmp.path().join("orig"), 60, 11);
    let original = std::fs::read(tmp.path().join("orig").join(DATA_FILE)).unwrap();
    let expected = expected_at(&ops, u64::MAX);
    let mut history: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
    for op in &ops {
        if let Some(v) = &op.value {
            history.entry(op.key.clone()).or_default().push(v.clone());
        }
    }
    let mut rng = Rng(2024);
    for round in 0..400 {
        let mut bytes = original.clone();
        let mut flips = Vec::new();
        let mode = rng.below(3);
        if mode != 1 {
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] ^= 1 << rng.below(8);
                flips.push(at as u64);
            }
        }
        if mode != 0 {
            // Garbage: random bytes, zeros, or a stale copy of real records from elsewhere.
            let n = 1 + rng.below(3000) as usize;
            match rng.below(3) {
                0 => bytes.extend(payload(round, n)),
                1 => bytes.extend(std::iter::repeat_n(0u8, n)),
                _ => {
                    let from = FILE_HEADER_BYTES as usize + rng.below(original.len() as u64 / 2) as usize;
                    bytes.extend_from_slice(&original[from..(from + n).min(original.len())]);
                }
            }
        }
        let dir = pack_with_bytes(tmp.path(), &format!("fuzz-{round}"), &bytes);
        let store = match PackStore::open(&dir, false) {
            Ok(store) => store,
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Corrupt, "round {round}: {e}");
                assert!(flips.iter().any(|at| *at < FILE_HEADER_BYTES), "round {round}: refused without header damage: {e}");
                continue;
            }
        };
        for key in all_keys(&ops) {
            let touched = ops.iter().any(|op| op.key == key && flips.iter().any(|at| (op.start..op.end).contains(at)));
            match get(&store, &key) {
                Ok(v) if !touched => assert!(expected[&key].as_ref() == Some(&v), "round {round}: {key} differs"),
                Ok(v) => assert!(history[&key].contains(&v), "round {round}: {key} returned bytes never put"),
                Err(ErrorKind::NotFound) => assert!(touched || expected[&key].is_none(), "round {round}: {key} lost"),
                Err(kind) => panic!("round {round}: {key}: {kind:?} after a successful open"),
            }
        }
        if round % 20 == 0 {
            store.lease().unwrap().put("after", &mut Cursor::new(b"ok"), 2).unwrap();
            drop(store);
            assert_eq!(get(&PackStore::open(&dir, false).unwrap(), "after").unwrap(), b"ok", "round {round}");
        }
    }
}

#[test]
fn zero_filled_regions_are_skipped_or_cut_never_returned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, false).unwrap();
    let mut lease = store.lease().unwrap();
    let mut ranges = Vec::new();
    for (i, key) in ["one", "two", "three"].iter().enumerate() {
        let start = store.stripe(0).tail_bytes();
        lease.put(key, &mut Cursor::new(payload(i as u64, 5000)), 5000).unwrap();
        ranges.push((start, store.stripe(0).tail_bytes()));
    }
    drop(lease);
    drop(store);
    let mut bytes = std::fs::read(dir.join(DATA_FILE)).unwrap();
    // "two" was reserved but its writer died before writing: its bytes are zeros. Then a
    // writer extended the file without writing: 4096 zeros at the end.
    bytes[ranges[1].0 as usize..ranges[1].1 as usize].fill(0);
    bytes.extend([0u8; 4096]);
    std::fs::write(dir.join(DATA_FILE), &bytes).unwrap();
    // The index written at the clean close still points at "two": reading it reports the damage.
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(store.recovery().indexed_records, 3);
    assert_eq!(get(&store, "two"), Err(ErrorKind::Corrupt));
    assert_eq!(get(&store, "three").unwrap(), payload(2, 5000));
    drop(store);
    // Without an index (a crash before any clean close), the scan skips "two" and cuts the zeros.
    std::fs::remove_file(dir.join(INDEX_FILE)).unwrap();
    std::fs::write(dir.join(DATA_FILE), &bytes).unwrap();
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(store.recovery().indexed_records, 0);
    assert_eq!(get(&store, "one").unwrap(), payload(0, 5000));
    assert_eq!(get(&store, "two"), Err(ErrorKind::NotFound));
    assert_eq!(get(&store, "three").unwrap(), payload(2, 5000));
    assert_eq!(store.recovery().damaged_bytes, ranges[1].1 - ranges[1].0);
    assert_eq!(store.recovery().cut_tail_bytes, 4096);
    assert_eq!(std::fs::metadata(dir.join(DATA_FILE)).unwrap().len(), ranges[2].1);
}

#[test]
fn compaction_keeps_live_records_and_reclaims_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let ops = build_pack(&dir, 120, 5);
    {
        // A second writer adds a second stripe file.
        let store = PackStore::open(&dir, false).unwrap();
        let _first = store.lease().unwrap();
        let mut second = store.lease().unwrap();
        second.put("stripe-two", &mut Cursor::new(b"2"), 1).unwrap();
    }
    let report = compact(&dir).unwrap();
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    assert_eq!(report.generation, 2);
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.iter().filter(|n| n.ends_with(".pack")).count(), 1, "{names:?}");
    let store = PackStore::open(&dir, false).unwrap();
    assert_state(&store, &ops, &expected_at(&ops, u64::MAX), "after compaction");
    assert_eq!(get(&store, "stripe-two").unwrap(), b"2");
    assert_eq!(store.live_keys() as u64, report.live_records);
    // Writes continue in the new generation and survive another compaction.
    let mut lease = store.lease().unwrap();
    lease.put("later", &mut Cursor::new(b"l"), 1).unwrap();
    lease.put("later", &mut Cursor::new(b"L"), 1).unwrap(); // the first value is dead
    drop(lease);
    drop(store);
    assert_eq!(compact(&dir).unwrap().generation, 3);
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(get(&store, "later").unwrap(), b"L");
    assert_state(&store, &ops, &expected_at(&ops, u64::MAX), "after second compaction");
}

/// Damage the open finds by its scan (no index: here, a pack compacted before) stops a
/// compaction with every file as it was: the old file is the last copy of those bytes. Only
/// `drop_damaged` compacts it, and says how much it dropped.
#[test]
fn compaction_refuses_a_pack_with_damaged_records_unless_told_to_drop_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let values: Vec<(String, Vec<u8>)> = (0..10u64).map(|i| (format!("k{i}"), payload(i, 3000))).collect();
    {
        let store = PackStore::open(&dir, false).unwrap();
        let mut lease = store.lease().unwrap();
        for (key, value) in &values {
            lease.put(key, &mut Cursor::new(value), value.len() as u64).unwrap();
        }
        // Something dead, so that there is something to compact.
        lease.put("scratch", &mut Cursor::new(b"s"), 1).unwrap();
        lease.delete("scratch").unwrap();
    }
    compact(&dir).unwrap();
    let data = dir.join("g000002-s0000.pack");
    assert!(!dir.join("g000002.index").exists(), "a compacted pack is opened by a scan");
    let mut bytes = std::fs::read(&data).unwrap();
    let middle = FILE_HEADER_BYTES as usize + 4 * 3100;
    bytes[middle..middle + 7].copy_from_slice(b"XXXXXXX");
    std::fs::write(&data, &bytes).unwrap();

    let refused = compact(&dir).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Corrupt, "{refused}");
    assert!(refused.message.contains("damaged") && refused.message.contains("nothing removed") && refused.message.contains("--drop-damaged"), "{refused}");
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    assert!(names(&dir).iter().any(|n| n == "g000002-s0000.pack") && !names(&dir).iter().any(|n| n.starts_with("g000003")), "{:?}", names(&dir));
    assert_eq!(std::fs::read(&data).unwrap(), bytes, "the damaged file is as it was");
    // The refused open wrote an index on closing; it carries the damage, so asking again, or
    // opening in between, does not make the damage forgotten.
    drop(PackStore::open(&dir, false).unwrap());
    assert!(dir.join("g000002.index").exists());
    assert_eq!(compact(&dir).unwrap_err().kind, ErrorKind::Corrupt);

    let report = compact_with(&dir, CompactOptions { drop_damaged: true }).unwrap();
    assert!(report.dropped_damaged_bytes > 0 && report.live_records == 9, "{report:?}");
    let store = PackStore::open(&dir, false).unwrap();
    let lost = values.iter().filter(|(key, _)| get(&store, key) == Err(ErrorKind::NotFound)).count();
    assert_eq!(lost, 1, "only the damaged record is gone");
    for (key, value) in values.iter().filter(|(key, _)| get(&store, key).is_ok()) {
        assert_eq!(&get(&store, key).unwrap(), value);
    }
}

/// Damage compaction must not settle alone, wherever it lies: a rotted last record (no index:
/// the state after a crash), a rotted live record the clean close's index vouched for, bytes
/// after the last record that are not zeros. Each is refused with the files byte for byte as
/// they were; `--drop-damaged` leaves out exactly the damaged record. (The open used to cut a
/// rotted last record off as a torn tail before compaction looked, and a rotted record found
/// through the index stopped even `--drop-damaged`.)
#[test]
fn compaction_refuses_damage_at_the_end_or_behind_the_index_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let values: Vec<(String, Vec<u8>)> = (0..6u64).map(|i| (format!("k{i}"), payload(i, 3000))).collect();
    let orig = tmp.path().join("orig");
    {
        let store = PackStore::open(&orig, false).unwrap();
        let mut lease = store.lease().unwrap();
        for (key, value) in &values {
            lease.put(key, &mut Cursor::new(value), value.len() as u64).unwrap();
        }
    }
    let clean = std::fs::read(orig.join(DATA_FILE)).unwrap();
    let mut last_rotted = clean.clone();
    let at = clean.len() - 100;
    last_rotted[at] ^= 0x40;
    let mut garbage_tail = clean.clone();
    garbage_tail.extend(payload(99, 500));
    for (name, bytes, with_index) in [("last-rotted", &last_rotted, false), ("behind-index", &last_rotted, true), ("garbage-tail", &garbage_tail, false)] {
        let dir = pack_with_bytes(tmp.path(), name, bytes);
        if with_index {
            std::fs::copy(orig.join(INDEX_FILE), dir.join(INDEX_FILE)).unwrap();
        }
        let refused = compact(&dir).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Corrupt, "{name}: {refused}");
        assert!(refused.message.contains("nothing removed") && refused.message.contains("--drop-damaged"), "{name}: {refused}");
        assert_eq!(&std::fs::read(dir.join(DATA_FILE)).unwrap(), bytes, "{name}: the refused compaction changed the data file");
        let report = compact_with(&dir, CompactOptions { drop_damaged: true }).unwrap();
        let store = PackStore::open(&dir, false).unwrap();
        let lost: Vec<&str> = values.iter().filter(|(k, _)| get(&store, k) == Err(ErrorKind::NotFound)).map(|(k, _)| k.as_str()).collect();
        if name == "garbage-tail" {
            assert!(lost.is_empty() && report.dropped_damaged_bytes == 500, "{name}: {lost:?} {report:?}");
        } else {
            assert_eq!(lost, ["k5"], "{name}: only the damaged record is left out");
            assert!(report.dropped_damaged_bytes > 3000, "{name}: {report:?}");
        }
        for (key, value) in values.iter().filter(|(k, _)| !lost.contains(&k.as_str())) {
            assert_eq!(&get(&store, key).unwrap(), value, "{name}: {key}");
        }
    }
    // An ordinary open keeps a rotted last record in place as damage, never cutting it off.
    let dir = pack_with_bytes(tmp.path(), "reopened", &last_rotted);
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(store.recovery().cut_tail_bytes, 0);
    assert!(store.recovery().damaged_bytes > 3000);
    drop(store);
    assert_eq!(std::fs::metadata(dir.join(DATA_FILE)).unwrap().len(), last_rotted.len() as u64);
}

/// `stowbench compact` given the wrong directory: refused, and nothing is written there.
#[test]
fn compaction_refuses_a_directory_that_is_not_a_pack() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"not a pack").unwrap();
    let refused = compact(tmp.path()).unwrap_err().to_string();
    assert!(refused.contains("is not a pack directory") && refused.contains("nothing was written"), "{refused}");
    let names: Vec<String> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["notes.txt"]);
    assert!(compact(&tmp.path().join("absent")).unwrap_err().to_string().contains("does not exist"));
}

/// A pack that is one file of live records only is what compaction would write: it is left as
/// it is (a large store rewritten byte for byte costs its size in writes for nothing). A
/// directory that only looks like a pack (a data file's name, not its bytes) is refused, and the
/// lock file the attempt made is gone again.
#[test]
fn an_already_compact_pack_is_not_rewritten_and_a_failed_attempt_leaves_no_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    build_pack(&dir, 40, 11);
    let first = compact(&dir).unwrap();
    assert!(!first.already_compact && first.generation == 2, "{first:?}");
    let data = dir.join("g000002-s0000.pack");
    let bytes = std::fs::read(&data).unwrap();
    let modified = std::fs::metadata(&data).unwrap().modified().unwrap();
    let again = compact(&dir).unwrap();
    assert!(again.already_compact && again.generation == 2 && again.bytes_after == again.bytes_before, "{again:?}");
    assert_eq!(again.live_records, first.live_records);
    assert_eq!(std::fs::read(&data).unwrap(), bytes);
    assert_eq!(std::fs::metadata(&data).unwrap().modified().unwrap(), modified, "the data file was rewritten");

    let bogus = tmp.path().join("bogus");
    std::fs::create_dir(&bogus).unwrap();
    std::fs::write(bogus.join(DATA_FILE), b"named like a pack, but not one").unwrap();
    assert!(compact(&bogus).is_err());
    let names: Vec<String> = std::fs::read_dir(&bogus).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, [DATA_FILE], "the refused attempt left files behind");
}

#[test]
fn interrupted_compaction_leftovers_are_resolved_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let ops = build_pack(&dir, 30, 3);
    let old = std::fs::read(dir.join(DATA_FILE)).unwrap();
    // Crash before the rename: a temporary next-generation file is ignored and removed.
    std::fs::write(dir.join("g000002-s0000.pack.tmp"), b"half a compaction").unwrap();
    let store = PackStore::open(&dir, false).unwrap();
    assert!(!dir.join("g000002-s0000.pack.tmp").exists());
    assert_state(&store, &ops, &expected_at(&ops, u64::MAX), "tmp leftover");
    drop(store);
    // Crash after the rename, before the old files were removed: the new generation wins.
    compact(&dir).unwrap();
    std::fs::write(dir.join(DATA_FILE), &old).unwrap();
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(store.recovery().stale_files_removed, 1);
    assert!(!dir.join(DATA_FILE).exists());
    assert_state(&store, &ops, &expected_at(&ops, u64::MAX), "stale generation");
}

#[test]
fn a_pack_is_opened_by_one_owner_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let store = PackStore::open(tmp.path(), false).unwrap();
    assert_eq!(PackStore::open(tmp.path(), false).err().unwrap().kind, ErrorKind::Conflict);
    assert_eq!(compact(tmp.path()).err().unwrap().kind, ErrorKind::Conflict);
    drop(store);
    PackStore::open(tmp.path(), false).unwrap();
}

#[test]
fn a_failed_body_leaves_no_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let store = PackStore::open(tmp.path(), false).unwrap();
    let mut lease = store.lease().unwrap();
    lease.put("k", &mut Cursor::new(b"old"), 3).unwrap();
    let before = store.stripe(0).tail_bytes();
    // The body promises 10 bytes and delivers 4.
    assert!(lease.put("k", &mut Cursor::new(b"part"), 10).is_err());
    assert_eq!(store.stripe(0).tail_bytes(), before);
    assert_eq!(get(&store, "k").unwrap(), b"old");
    drop(lease);
    drop(store);
    assert_eq!(get(&PackStore::open(tmp.path(), false).unwrap(), "k").unwrap(), b"old");
}

/// Copies every file of a pack directory, as a crash would leave them (the store stays open).
fn crash_image(dir: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_clean_close_persists_the_index_and_the_next_open_scans_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let ops = build_pack(&dir, 200, 13);
    assert!(dir.join(INDEX_FILE).exists(), "closing wrote no index");
    let store = PackStore::open(&dir, false).unwrap();
    let recovery = store.recovery().clone();
    assert_eq!(recovery.index_ignored, None);
    assert_eq!(recovery.scanned_bytes, 0, "{recovery:?}");
    assert_eq!(recovery.indexed_records, store.live_keys() as u64);
    assert_state(&store, &ops, &expected_at(&ops, u64::MAX), "opened from the index");
    // Sequence numbers continue above the index's: a new put of an old key wins.
    let key = &ops[0].key;
    store.lease().unwrap().put(key, &mut Cursor::new(b"newest"), 6).unwrap();
    drop(store);
    assert_eq!(get(&PackStore::open(&dir, false).unwrap(), key).unwrap(), b"newest");
}

#[test]
fn records_appended_after_the_index_are_found_by_scanning_only_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut ops = build_pack(&dir, 100, 17);
    let store = PackStore::open(&dir, false).unwrap();
    let indexed_end = store.stripe(0).tail_bytes();
    let mut lease = store.lease().unwrap();
    let live_key = expected_at(&ops, u64::MAX).into_iter().find(|(_, v)| v.is_some()).unwrap().0;
    for (key, value) in [("brand-new", Some(b"N".to_vec())), (live_key.as_str(), None), ("k1", Some(b"over".to_vec()))] {
        let start = store.stripe(0).tail_bytes();
        match &value {
            Some(v) => lease.put(key, &mut Cursor::new(v), v.len() as u64).unwrap(),
            None => lease.delete(key).unwrap(),
        }
        ops.push(Op { key: key.to_string(), value, start, end: store.stripe(0).tail_bytes() });
    }
    let appended = store.stripe(0).tail_bytes() - indexed_end;
    // A crash now leaves the index of the last clean close and three records after it.
    crash_image(&dir, &tmp.path().join("crashed"));
    let crashed = PackStore::open(&tmp.path().join("crashed"), false).unwrap();
    assert_eq!(crashed.recovery().scanned_bytes, appended, "{:?}", crashed.recovery());
    assert_state(&crashed, &ops, &expected_at(&ops, u64::MAX), "index + tail scan");
}

#[test]
fn an_index_that_does_not_fit_the_data_files_is_ignored_for_a_full_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let ops = build_pack(&tmp.path().join("orig"), 60, 19);
    let original = std::fs::read(tmp.path().join("orig").join(DATA_FILE)).unwrap();
    let index = std::fs::read(tmp.path().join("orig").join(INDEX_FILE)).unwrap();
    let other = tmp.path().join("other");
    build_pack(&other, 5, 23);
    let cut = ops[30].end;
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, u64)> = vec![
        (
            "flipped index byte",
            original.clone(),
            {
                let mut i = index.clone();
                i[100] ^= 4;
                i
            },
            u64::MAX,
        ),
        ("truncated index", original.clone(), index[..index.len() - 3].to_vec(), u64::MAX),
        ("data file shorter than indexed", original[..cut as usize].to_vec(), index.clone(), cut),
        ("index of another pack", original.clone(), std::fs::read(other.join(INDEX_FILE)).unwrap(), u64::MAX),
    ];
    for (name, data, index_bytes, cut) in cases {
        let dir = pack_with_bytes(tmp.path(), &name.replace(' ', "-"), &data);
        std::fs::write(dir.join(INDEX_FILE), index_bytes).unwrap();
        let store = PackStore::open(&dir, false).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(store.recovery().index_ignored.is_some(), "{name}: index used: {:?}", store.recovery());
        assert_eq!(store.recovery().scanned_bytes, data.len() as u64 - FILE_HEADER_BYTES, "{name}");
        assert_state(&store, &ops, &expected_at(&ops, cut), name);
    }
}

#[test]
fn zeros_a_durable_writer_wrote_ahead_are_cut_after_a_crash_and_trimmed_on_close() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, true).unwrap();
    let mut lease = store.lease().unwrap();
    for i in 0..20u64 {
        lease.put(&format!("d{i}"), &mut Cursor::new(payload(i, 3000)), 3000).unwrap();
    }
    let tail = store.stripe(0).tail_bytes();
    let file_len = std::fs::metadata(dir.join(DATA_FILE)).unwrap().len();
    assert!(file_len > tail, "a durable writer writes zeros ahead of its tail ({file_len} <= {tail})");
    crash_image(&dir, &tmp.path().join("crashed"));
    let crashed = PackStore::open(&tmp.path().join("crashed"), false).unwrap();
    assert_eq!(crashed.recovery().cut_tail_bytes, file_len - tail);
    assert_eq!(crashed.recovery().damaged_bytes, 0);
    for i in 0..20u64 {
        assert_eq!(get(&crashed, &format!("d{i}")).unwrap(), payload(i, 3000));
    }
    drop(lease);
    drop(store);
    assert_eq!(std::fs::metadata(dir.join(DATA_FILE)).unwrap().len(), tail, "closing left the zeros in place");
}

#[test]
fn read_checks_catch_damage_and_can_be_turned_off_to_read_as_a_file_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, false).unwrap();
    let start = FILE_HEADER_BYTES;
    store.lease().unwrap().put("k", &mut Cursor::new(payload(1, 5000)), 5000).unwrap();
    drop(store);
    // Damage one value byte after the clean close: the index still points at the record.
    let mut bytes = std::fs::read(dir.join(DATA_FILE)).unwrap();
    bytes[start as usize + 56 + 1 + 100] ^= 0xff;
    std::fs::write(dir.join(DATA_FILE), &bytes).unwrap();
    let store = PackStore::open(&dir, false).unwrap();
    assert_eq!(get(&store, "k"), Err(ErrorKind::Corrupt), "checked reads report the damage");
    store.set_read_checks(false);
    let unchecked = get(&store, "k").expect("unchecked reads trust the disk");
    assert_eq!(unchecked.len(), 5000);
    assert_ne!(unchecked, payload(1, 5000), "and return what it holds, damage included");
}

/// With mapped reads on, checked gets of large values read the stripe's mapping (src/pack/view.rs): values appended
/// after the mapping was made read back right, a flipped byte is still `Corrupt`, and a file cut
/// short behind the open store's back is read through `pread` (which says how much survived)
/// instead of touching mapped pages past the end of the file (SIGBUS).
#[test]
fn large_values_read_through_the_mapping_are_checked_and_a_cut_file_is_not_touched() {
    const LARGE: usize = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, false).unwrap();
    store.set_mapped_reads(true);
    let mut lease = store.lease().unwrap();
    lease.put("a", &mut Cursor::new(payload(1, LARGE)), LARGE as u64).unwrap();
    assert_eq!(get(&store, "a").unwrap(), payload(1, LARGE), "first get maps the file");
    lease.put("b", &mut Cursor::new(payload(2, LARGE)), LARGE as u64).unwrap();
    assert_eq!(get(&store, "b").unwrap(), payload(2, LARGE), "a record appended after the mapping");

    // One value byte of "a" flipped in place, the store still open.
    let file = flip_byte(&dir.join(DATA_FILE), FILE_HEADER_BYTES + 56 + 1 + 300_000);
    assert_eq!(get(&store, "a"), Err(ErrorKind::Corrupt), "the mapped read checks the hash");

    // "b" cut in half behind the store's back: reading it must not touch the lost pages.
    let b_value_start = FILE_HEADER_BYTES + 2 * (56 + 1) + LARGE as u64;
    file.set_len(b_value_start + LARGE as u64 / 2).unwrap();
    let mut out = Vec::new();
    let e = store.get("b", &mut out).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Corrupt, "{e:?}");
    assert_eq!(out, payload(2, LARGE)[..LARGE / 2], "what survived was streamed, read with pread: {}", e.message);
}

/// The mapping starts at 16 KiB values (session 31: from there a mapped get beat `pread` and a
/// hash): a 4 KiB value is read with `pread` and maps nothing, a 16 KiB one maps the file, reads
/// back right, and a flipped byte in it is still `Corrupt`.
#[test]
fn values_from_16_kib_read_through_the_mapping_and_are_checked() {
    const SMALL: usize = 4 << 10;
    const MAPPED: usize = 16 << 10;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, false).unwrap();
    store.set_mapped_reads(true);
    let mut lease = store.lease().unwrap();
    lease.put("small", &mut Cursor::new(payload(1, SMALL)), SMALL as u64).unwrap();
    lease.put("mapped", &mut Cursor::new(payload(2, MAPPED)), MAPPED as u64).unwrap();
    assert_eq!(get(&store, "small").unwrap(), payload(1, SMALL));
    assert_eq!(mapped_resident_bytes(&dir.join(DATA_FILE)), 0, "a 4 KiB value is read with pread");
    assert_eq!(get(&store, "mapped").unwrap(), payload(2, MAPPED));
    assert!(mapped_resident_bytes(&dir.join(DATA_FILE)) > 0, "a 16 KiB value is read through the mapping");

    flip_byte(&dir.join(DATA_FILE), FILE_HEADER_BYTES + (56 + 5) + SMALL as u64 + (56 + 6) + 9_000);
    assert_eq!(get(&store, "mapped"), Err(ErrorKind::Corrupt), "the mapped read checks the hash");
}

/// Flips every bit of the byte at `at` of `path` in place (an open store's file, as a bad disk
/// would), and returns the file, open for reading and writing.
fn flip_byte(path: &Path, at: u64) -> std::fs::File {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut byte, at).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[byte[0] ^ 0xff], at).unwrap();
    file
}

/// Resident bytes of this process's mapping of `file` (the "Rss:" of its /proc/self/smaps entry),
/// 0 if it is not mapped.
fn mapped_resident_bytes(file: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps (Linux only)");
    let name = file.to_str().unwrap();
    let mut in_file = false;
    let mut kib = 0;
    for line in smaps.lines() {
        if line.split_whitespace().nth(1).is_some_and(|perms| perms.len() == 4) && line.contains('-') && !line.ends_with(" kB") {
            in_file = line.ends_with(name);
        } else if in_file && line.starts_with("Rss:") {
            kib += line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap();
        }
    }
    kib * 1024
}

/// Mapped gets leave the pages they read in the process only until the budget is read: reading
/// one and a half budgets of values through the mapping leaves at most a budget resident (all
/// of it would stay without the release), and every value still reads back right.
#[test]
fn mapped_gets_keep_at_most_the_budget_of_pages_resident() {
    const LARGE: usize = 1 << 20;
    let values = (stowbench::pack::MAPPED_RESIDENT_BUDGET_BYTES as usize * 3 / 2) / LARGE;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let store = PackStore::open(&dir, false).unwrap();
    let mut lease = store.lease().unwrap();
    for i in 0..values {
        lease.put(&format!("k{i}"), &mut Cursor::new(payload(i as u64, LARGE)), LARGE as u64).unwrap();
    }
    let mut most = 0;
    for i in 0..values {
        assert_eq!(get(&store, &format!("k{i}")).unwrap(), payload(i as u64, LARGE), "value {i}");
        most = most.max(mapped_resident_bytes(&dir.join(DATA_FILE)));
    }
    assert!(most > LARGE as u64, "the gets read through the mapping (at most {most} bytes of it were resident)");
    assert!(most <= stowbench::pack::MAPPED_RESIDENT_BUDGET_BYTES, "{most} bytes of the mapping resident, over the budget");
}
