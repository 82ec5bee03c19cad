//! `kill -9` of stowbench at many points while it writes: whatever the moment, the report file is
//! valid (written by rename, never in place) and holds at least every case that had finished,
//! and `stowbench cleanup` removes that run's data and nothing else.
//!
//! Where each kill lands depends on the machine's speed, so nothing here asserts *where*: every
//! assertion holds at any kill point. The kill points are spread by waiting for 0–3 finished
//! cases plus a seeded extra delay.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Four local backends, each writing files of its own kind (files, a database, a database and
/// files, a pack), one case each.
const JOB: &str = "version = 1\n\
    [[target]]\nname = \"fs\"\nbackend = \"fs\"\n\
    [[target]]\nname = \"sqlite\"\nbackend = \"sqlite\"\n\
    [[target]]\nname = \"sqlite-file\"\nbackend = \"sqlite-file\"\n\
    [[target]]\nname = \"pack\"\nbackend = \"pack\"\n\
    [[workload]]\nname = \"w\"\nsizes = [\"64KiB\"]\nobjects = 300\nphases = [\"put\", \"get\"]\n";

fn reports_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().map(|e| e.path().join("report.json")).filter(|p| p.exists()).collect()
}

fn names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn kill_9_at_any_point_leaves_a_valid_report_and_cleanup_removes_only_that_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), JOB).unwrap();
    let work = dir.path().join("work");
    // Someone else's things beside the runs: cleanup must never touch them, even one named like ours.
    std::fs::create_dir_all(work.join("stowbench-not-ours")).unwrap();
    std::fs::write(work.join("stowbench-not-ours/data"), b"keep me").unwrap();
    std::fs::write(work.join("notes.txt"), b"keep me too").unwrap();
    let foreign = names(&work);

    for round in 0..8u64 {
        let out = dir.path().join(format!("out-{round}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_stowbench"))
            .args(["run", "job.toml", "--no-progress", "--format", "json", "--work-dir", "work", "--out"])
            .arg(&out)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let finished_before_kill = (round % 4) as usize;
        if finished_before_kill > 0 {
            common::wait_for_finished_cases(&out, finished_before_kill);
        }
        std::thread::sleep(std::time::Duration::from_millis(round * 37 % 50));
        child.kill().unwrap(); // SIGKILL: no handler runs, nothing is flushed or removed
        child.wait().unwrap();

        for report_path in reports_under(&out) {
            let report = common::assert_valid_report(&report_path);
            let cases = report["cases"].as_array().map_or(0, Vec::len);
            assert!(cases >= finished_before_kill, "round {round}: {cases} cases kept, {finished_before_kill} had finished");
            if report["status"] == "running" {
                assert!(cases < 4, "a run that finished every case would have said so");
                // Written mid-run with its derived parts: headlines and warnings (warm reads here).
                let listed = |key: &str| report[key].as_array().map_or(0, Vec::len);
                assert!(cases == 0 || (listed("headlines") > 0 && listed("warnings") > 0), "round {round}: {report}");
            }
        }
        let stray: Vec<String> = names(&out).iter().flat_map(|run| names(&out.join(run))).filter(|n| n.ends_with(".tmp")).collect();
        assert!(stray.len() <= 1, "round {round}: at most the one report being written when killed: {stray:?}");

        let cleanup = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["cleanup", "work"]).current_dir(dir.path()).output().unwrap();
        // Killed before its directory existed, the run left nothing, and cleanup says so.
        let said = String::from_utf8_lossy(&cleanup.stderr);
        assert!(cleanup.status.success() || said.contains("nothing was removed"), "round {round}: {said}");
        assert_eq!(names(&work), foreign, "round {round}: cleanup removed the killed run's data and nothing else");
        assert_eq!(std::fs::read(work.join("stowbench-not-ours/data")).unwrap(), b"keep me");
    }
}
