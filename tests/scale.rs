//! Issue 10's scale line, in the suite where it is cheap enough: a million objects through
//! `pack`, and 64 threads on `fs`, complete with bounded client memory. Each runs the
//! `stowbench` binary and reads the case's client memory from its report (`resources`: the peak
//! resident memory during the case against what it was when the case started).
//!
//! The slower scale checks stay in `bench/scale.sh`: a million objects through `fs` and `sqlite`
//! (minutes here) and objects of 1 GiB through every backend; `tests/streaming_memory.rs` covers
//! 1 GB objects through fs and sqlite. Data goes under Cargo's target tmp dir (a real disk:
//! tmpfs would count a million objects as memory of the machine, if not of the process).

mod common;

use serde_json::Value;
use std::process::Command;

/// Runs `job` and returns its one case, after checking it finished and verified every get.
fn run_one_case(name: &str, job: &str) -> Value {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "job.toml", "--no-progress", "--out", "results", "--work-dir", "."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{name}: {output}");
    let run = std::fs::read_dir(dir.path().join("results")).unwrap().flatten().next().expect("a run directory").path();
    let report = common::assert_valid_report(&run.join("report.json"));
    let case = report["cases"][0].clone();
    assert_eq!(case["status"], "ok", "{name}: {case:#}");
    let verification = &case["verification"];
    assert_eq!(verification["mismatches"].as_u64(), Some(0), "{name}: {verification}");
    case
}

/// A job that puts `objects` objects of `size` through `backend` with `threads` workers, then
/// makes `gets` verified gets.
fn put_then_get(backend: &str, size: &str, objects: u64, threads: u32, gets: u64) -> String {
    format!(
        "version = 1\n[[target]]\nname = \"{backend}\"\nbackend = \"{backend}\"\n\
         [[workload]]\nname = \"scale\"\nsizes = [\"{size}\"]\nobjects = {objects}\nthreads = [{threads}]\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\ncount = {gets}\n"
    )
}

/// How far the client's resident memory rose during the case, in MiB.
fn client_growth_mib(case: &Value) -> u64 {
    let resources = &case["resources"];
    let start = resources["client_rss_start_bytes"].as_u64().expect("client_rss_start_bytes");
    let peak = resources["client_rss_peak_bytes"].as_u64().expect("client_rss_peak_bytes");
    peak.saturating_sub(start) >> 20
}

/// A million 1 KiB objects through pack: its in-memory index (src/pack/key_index.rs) and the
/// runner's key table grow with the object count, and nothing else may. Measured here: +89 MiB
/// (the index alone is 77 bytes a key). With the `HashMap<String, _>` index it replaced it was
/// +262 MiB (docs/performance.md, Scale and memory), which this bound refuses.
#[test]
fn a_million_objects_through_pack_stay_within_160_mib() {
    let case = run_one_case("pack, a million objects", &put_then_get("pack", "1KiB", 1_000_000, 4, 1_000_000));
    assert_eq!(case["verification"]["checked"].as_u64(), Some(1_000_000), "every get was checked");
    let growth = client_growth_mib(&case);
    assert!(growth < 160, "pack with a million objects: client memory rose by {growth} MiB");
}

/// 64 workers on fs: each has a stack and a 256 KiB copy buffer, and nothing may grow with the
/// operations. Measured here: +35 MiB.
#[test]
fn sixty_four_threads_on_fs_stay_within_96_mib() {
    let case = run_one_case("fs, 64 threads", &put_then_get("fs", "4KiB", 6400, 64, 64_000));
    assert_eq!(case["threads"].as_u64(), Some(64), "{case:#}");
    let growth = client_growth_mib(&case);
    assert!(growth < 96, "fs with 64 threads: client memory rose by {growth} MiB");
}
