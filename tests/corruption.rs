//! Issue 14's data-integrity line, end to end through the `stowbench` binary: objects damaged
//! behind stowbench's back, in each backend's real storage, are each reported with key, offset
//! and kind of damage, and the run exits 1; with verify = false the report says the data was
//! not verified.
//!
//! How the damage gets in: the get phase's `before` command (the job-file hook, nothing
//! test-only in the binary) runs this test binary again as `corrupt_hook`, which reads the case's
//! storage from the `STOWBENCH_*` variables the hook sets and rewrites objects with the store's
//! own means (a file, an SQL UPDATE, a large object, an S3 put, GridFS chunks, bytes inside a
//! container file: see `stores`). Everything is sequential and counted: no timing.
//!
//! pack and zip get every damage but the cut: an entry's length lives in the container's own
//! record or directory, so shortening the file would damage the next entry, not truncate this
//! one. What truncation means for them — the file cut short, a torn tail — is checked apart, cut
//! inside the last entry put (zip's central directory, which follows it, goes too). pack and zip
//! check a checksum themselves after streaming a value: the report still names the kind from the
//! bytes (see docs/reports.md, Verification). cfb's streams are cut through the cfb crate, which
//! shortens the stream's directory entry: the truncation a compound file can suffer without
//! losing its directory.
//!
//! Server backends skip loudly without their service, and fail with CI=true, as tests/servers.rs.
//! Run: `eval "$(scripts/services.sh env)"; cargo test --release --test corruption`.

mod common;
#[path = "corruption/stores.rs"]
mod stores;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Objects per case and their size: 20 kB spans five 4 KiB payload blocks, so damage can sit
/// past the first block's header.
const OBJECTS: u64 = 8;
const SIZE_BYTES: u64 = 20_000;

/// Where each damage goes: the key index and what the report must say about it.
const FLIPPED: (u64, u64) = (1, 5000); // byte 5000 XOR 0xff
const TRUNCATED: (u64, u64) = (2, 12_345); // cut to 12,345 bytes
const ZEROED: (u64, u64) = (3, 8192); // bytes 8192..12000 zeroed; 8192 is block 2's header, key 3 ≠ 0
const SWAPPED: (u64, u64) = (5, 6); // objects 5 and 6 trade places
const ZERO_END: usize = 12_000;

fn key(i: u64) -> String {
    stowbench::workload::keys::key_name(i)
}

/// The hook: does the damage when stowbench runs it (STOWBENCH_CASE_ID set), else nothing (so a
/// run of ignored tests is harmless).
#[test]
#[ignore = "run by stowbench as a phase's before command"]
fn corrupt_hook() {
    if std::env::var("STOWBENCH_CASE_ID").is_err() {
        return;
    }
    let info: Value = serde_json::from_str(&std::env::var("STOWBENCH_BACKEND_INFO").unwrap()).unwrap();
    let mut store = stores::open(&info);
    if std::env::var("CORRUPTION_CUT_FILE").is_ok() {
        assert!(store.cut_file_in(&key(OBJECTS - 1), TRUNCATED.1), "the last object's entry ends its container file");
        return;
    }
    let mut flipped = store.read(&key(FLIPPED.0));
    flipped[FLIPPED.1 as usize] ^= 0xff;
    store.write(&key(FLIPPED.0), &flipped);
    if store.can_truncate() {
        let whole = store.read(&key(TRUNCATED.0));
        store.write(&key(TRUNCATED.0), &whole[..TRUNCATED.1 as usize]);
    }
    let mut zeroed = store.read(&key(ZEROED.0));
    zeroed[ZEROED.1 as usize..ZERO_END].fill(0);
    store.write(&key(ZEROED.0), &zeroed);
    let (a, b) = (store.read(&key(SWAPPED.0)), store.read(&key(SWAPPED.1)));
    store.write(&key(SWAPPED.0), &b);
    store.write(&key(SWAPPED.1), &a);
}

/// A job: put every object, then get each once after the hook.
fn job(target: &str, verify: bool) -> String {
    let exe = std::env::current_exe().unwrap();
    let hook = [exe.to_str().unwrap(), "corrupt_hook", "--exact", "--ignored", "--test-threads=1"];
    let hook: Vec<String> = hook.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "version = 1\nseed = 14\n[[target]]\n{target}\n[[workload]]\nname = \"w\"\nsizes = [{SIZE_BYTES}]\nobjects = {OBJECTS}\nverify = {verify}\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\nbefore = [{}]\n",
        hook.join(", ")
    )
}

/// Runs `job` with the binary (and `env`, which the hook inherits); returns the exit code, the
/// output and the report.
fn run(job: &str, env: &[(&str, &str)]) -> (Option<i32>, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    let out = command.args(["run", "job.toml", "--no-progress"]).envs(env.iter().copied()).current_dir(dir.path()).output().unwrap();
    let stdout = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = find_report(&dir.path().join("stowbench-results")).unwrap_or_else(|| panic!("no report; output:\n{stdout}"));
    common::assert_valid_report(&report);
    (out.status.code(), stdout, serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap())
}

fn find_report(results: &Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(results).ok()?.flatten().map(|e| e.path().join("report.json")).find(|p| p.exists())
}

/// What a backend's storage lets the hook do to an object's length, and what the report says.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// The object is cut short: `truncated` at the new length.
    Truncated,
    /// The bytes are cut but the length the backend records is not: the backend's own check
    /// refuses the object before sending a byte, reported as `other` at offset 0.
    RefusedByBackend,
    /// A container: its record keeps its length, nothing is cut.
    NotDone,
}

/// The damage the report must list, as (key, kind, offset, other key), sorted.
fn expected(cut: Cut) -> Vec<(String, String, u64, Option<String>)> {
    let mut want = vec![
        (key(FLIPPED.0), "flipped".to_string(), FLIPPED.1, None),
        (key(ZEROED.0), "zeroed".to_string(), ZEROED.1, None),
        (key(SWAPPED.0), "swapped".to_string(), 0, Some(key(SWAPPED.1))),
        (key(SWAPPED.1), "swapped".to_string(), 0, Some(key(SWAPPED.0))),
    ];
    match cut {
        Cut::Truncated => want.push((key(TRUNCATED.0), "truncated".to_string(), TRUNCATED.1, None)),
        Cut::RefusedByBackend => want.push((key(TRUNCATED.0), "other".to_string(), 0, None)),
        Cut::NotDone => {}
    }
    want.sort();
    want
}

/// Runs the corrupting job on `target` and checks the report lists exactly the damage done.
fn damage_is_reported(target: &str, cut: Cut) {
    let env: &[(&str, &str)] = if cut == Cut::RefusedByBackend { &[("CORRUPTION_KEEP_LENGTH", "1")] } else { &[] };
    let (code, output, report) = run(&job(target, true), env);
    let case = &report["cases"][0];
    let v = &case["verification"];
    let mut listed: Vec<(String, String, u64, Option<String>)> = v["mismatched"]
        .as_array()
        .unwrap_or_else(|| panic!("no verification.mismatched: {v}\n{output}"))
        .iter()
        .map(|m| {
            (
                m["key"].as_str().unwrap().into(),
                m["kind"].as_str().unwrap().into(),
                m["offset_bytes"].as_u64().unwrap(),
                m["other_key"].as_str().map(String::from),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(listed, expected(cut), "report: {v:#}\n{output}");
    assert_eq!(v["mismatches"].as_u64(), Some(listed.len() as u64));
    assert_eq!(v["checked"].as_u64(), Some(OBJECTS), "every get was checked: {v}");
    if cut == Cut::Truncated {
        let t = v["mismatched"].as_array().unwrap().iter().find(|m| m["kind"] == "truncated").unwrap();
        assert_eq!((t["expected_bytes"].as_u64(), t["actual_bytes"].as_u64()), (Some(SIZE_BYTES), Some(TRUNCATED.1)), "{t}");
    }
    assert_eq!(code, Some(1), "a mismatch fails the run\n{output}");
    assert_eq!(case["status"], "failed");
    let flipped = format!("{} flipped at byte {}", key(FLIPPED.0), FLIPPED.1);
    assert!(output.contains(&flipped), "the table names the objects:\n{output}");
    let parsed: stowbench::report::model::RunReport = serde_json::from_value(report.clone()).unwrap();
    let csv = stowbench::report::csv::render(&parsed);
    assert!(csv.lines().next().unwrap().contains("verification.mismatched") && csv.contains(&flipped), "the CSV names the objects:\n{csv}");
    let kinds: Vec<&str> = report["warnings"].as_array().unwrap().iter().filter_map(|w| w["kind"].as_str()).collect();
    assert!(kinds.contains(&"data_mismatch"), "{kinds:?}");
}

/// A container file cut short in the middle of its last entry (a torn tail): the object reads
/// back truncated at the cut, named with the bytes that survived, and nothing else is listed.
#[test]
fn a_pack_file_cut_short_reports_the_object_truncated() {
    container_cut_short("backend = \"pack\"");
}

/// The cut takes the archive's central directory with it; the backend still knows its entries.
#[test]
fn a_zip_file_cut_short_reports_the_object_truncated() {
    container_cut_short("backend = \"zip\"");
}

fn container_cut_short(target: &str) {
    let (code, output, report) = run(&job(target, true), &[("CORRUPTION_CUT_FILE", "1")]);
    let v = &report["cases"][0]["verification"];
    let listed = v["mismatched"].as_array().unwrap_or_else(|| panic!("no verification.mismatched: {v}\n{output}"));
    assert_eq!(listed.len(), 1, "{v:#}\n{output}");
    let m = &listed[0];
    assert_eq!(
        (m["key"].as_str(), m["kind"].as_str(), m["offset_bytes"].as_u64()),
        (Some(key(OBJECTS - 1).as_str()), Some("truncated"), Some(TRUNCATED.1)),
        "{m}"
    );
    assert_eq!((m["expected_bytes"].as_u64(), m["actual_bytes"].as_u64()), (Some(SIZE_BYTES), Some(TRUNCATED.1)), "{m}");
    assert_eq!(v["checked"].as_u64(), Some(OBJECTS), "{v}");
    assert_eq!(code, Some(1), "{output}");
}

#[test]
fn fs_damage_is_reported() {
    damage_is_reported("backend = \"fs\"", Cut::Truncated);
}

#[test]
fn sqlite_damage_is_reported() {
    damage_is_reported("backend = \"sqlite\"", Cut::Truncated);
}

#[test]
fn sqlite_file_damage_is_reported() {
    damage_is_reported("backend = \"sqlite-file\"", Cut::Truncated);
}

#[test]
fn pack_damage_is_reported() {
    damage_is_reported("backend = \"pack\"", Cut::NotDone);
}

#[test]
fn zip_damage_is_reported() {
    damage_is_reported("backend = \"zip\"", Cut::NotDone);
}

#[test]
fn cfb_damage_is_reported() {
    damage_is_reported("backend = \"cfb\"", Cut::Truncated);
}

/// A backend on a server: skipped loudly without its service (failed with CI=true).
macro_rules! server_test {
    ($name:ident, $service:literal, $target:literal) => {
        #[test]
        fn $name() {
            if common::available($service) {
                damage_is_reported($target, Cut::Truncated);
            }
        }
    };
}

server_test!(postgres_bytea_damage_is_reported, "STOWBENCH_PG_URI", "backend = \"postgres\"\nmode = \"bytea\"");
server_test!(postgres_lo_damage_is_reported, "STOWBENCH_PG_URI", "backend = \"postgres\"\nmode = \"lo\"");
server_test!(postgres_file_damage_is_reported, "STOWBENCH_PG_URI", "backend = \"postgres\"\nmode = \"file\"");
server_test!(mariadb_inline_damage_is_reported, "STOWBENCH_MARIADB_URI", "backend = \"mariadb\"");
server_test!(mariadb_file_damage_is_reported, "STOWBENCH_MARIADB_URI", "backend = \"mariadb\"\nmode = \"file\"");
server_test!(s3_damage_is_reported, "STOWBENCH_S3_ENDPOINT", "backend = \"s3\"");
server_test!(gridfs_damage_is_reported, "STOWBENCH_MONGO_URI", "backend = \"gridfs\"");

#[test]
fn a_truncation_the_backend_itself_catches_still_names_the_key() {
    damage_is_reported("backend = \"sqlite\"", Cut::RefusedByBackend);
}

#[test]
fn without_verification_the_report_says_the_data_was_not_verified() {
    let (code, output, report) = run(&job("backend = \"fs\"", false), &[]);
    let case = &report["cases"][0];
    assert_eq!(case["verification"]["enabled"], false);
    assert_eq!(case["verification"]["checked"], 0);
    assert_eq!(code, Some(0), "nothing was checked, so nothing failed\n{output}");
    let warning = report["warnings"].as_array().unwrap().iter().find(|w| w["kind"] == "not_verified").unwrap_or_else(|| panic!("{report:#}"));
    assert!(warning["message"].as_str().unwrap().contains("the data was not verified"), "{warning}");
    assert!(output.contains("data not verified (verify = false): fs/w/20kB/t1/r1"), "{output}");
}

#[test]
fn a_before_command_that_fails_fails_the_case_with_its_message() {
    let job = job("backend = \"fs\"", true);
    let job = job
        .lines()
        .map(|l| if l.starts_with("before") { "before = [\"sh\", \"-c\", \"echo no disk >&2; exit 4\"]".to_string() } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n");
    let (code, output, report) = run(&job, &[]);
    assert_eq!(code, Some(1), "{output}");
    let failure = report["cases"][0]["failure"].as_str().unwrap();
    assert!(failure.contains("before command") && failure.contains("exit status: 4") && failure.contains("no disk"), "{failure}");
}

#[test]
fn a_before_command_that_does_not_exist_is_refused_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let job = job("backend = \"fs\"", true);
    let job = job
        .lines()
        .map(|l| if l.starts_with("before") { "before = [\"./no-such-script.sh\"]".to_string() } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("job.toml"), &job).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["validate", "job.toml"]).current_dir(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    let line = job.lines().position(|l| l.starts_with("before")).unwrap() + 1;
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("job.toml:{line}")) && text.contains("workload \"w\", field \"before\"") && text.contains("no-such-script.sh\" was not found"),
        "{text}"
    );
    // A file that is not executable, and a directory, are said for what they are.
    std::fs::write(dir.path().join("plain.sh"), "#!/bin/sh\n").unwrap();
    for (program, says) in [("./plain.sh", "\"./plain.sh\" is not executable (mode 644)"), ("/tmp", "\"/tmp\" is a directory")] {
        let job = job.replace("./no-such-script.sh", program);
        std::fs::write(dir.path().join("job.toml"), &job).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["validate", "job.toml"]).current_dir(dir.path()).output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains(says), "{text}");
    }
}
