//! Disk space on a real small filesystem (a 4 MiB tmpfs mounted by the test, root only): a job
//! that cannot fit is refused before any data, naming the figures; with the check overridden, the
//! filesystem filling mid-case ends the run with the figures, keeps a valid report and leaves
//! nothing behind.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted in a temporary directory, unmounted when dropped.
struct SmallFilesystem {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl SmallFilesystem {
    fn mount(size: &str) -> SmallFilesystem {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("small");
        std::fs::create_dir(&mount).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&mount).output().unwrap();
        assert!(out.status.success(), "mount tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        SmallFilesystem { _dir: dir, mount }
    }

    fn entries(&self) -> Vec<String> {
        walk(&self.mount).into_iter().map(|p| p.strip_prefix(&self.mount).unwrap().display().to_string()).collect()
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(entry.path());
        if entry.path().is_dir() {
            out.extend(walk(&entry.path()));
        }
    }
    out
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).output();
    }
}

/// Whether this process may mount the test's tmpfs (root); outside CI a test without it skips, saying so.
fn can_mount() -> bool {
    if stowbench::host::is_root() {
        return true;
    }
    assert!(!common::in_ci(), "mounting a small tmpfs needs root, and CI=true");
    eprintln!("SKIPPED: mounting a small tmpfs needs root");
    false
}

/// 40 objects of 256 KiB (10 MiB) do not fit in 4 MiB; a second workload would.
const JOB: &str = "version = 1\n[[target]]\nname = \"fs\"\nbackend = \"fs\"\n\
    [[workload]]\nname = \"big\"\nsizes = [\"256KiB\"]\nobjects = 40\nphases = [\"put\", \"get\"]\n\
    [[workload]]\nname = \"small\"\nsizes = [\"4KiB\"]\nobjects = 10\nphases = [\"put\", \"get\"]\n";

/// Writes `job` to job.toml in a fresh directory and runs it there, its work directory on
/// `small`; returns the directory (the report goes to its `out/`), the exit code and the output.
fn run_job(small: &SmallFilesystem, job: &str, extra: &[&str]) -> (tempfile::TempDir, Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "job.toml", "--no-progress", "--out", "out", "--work-dir"])
        .arg(&small.mount)
        .args(extra)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let (code, text) = exit_and_text(&out);
    (dir, code, text)
}

/// The exit code and everything printed.
fn exit_and_text(out: &std::process::Output) -> (Option<i32>, String) {
    (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The valid report the run in `dir` wrote under `out/`.
fn report_in(dir: &Path) -> serde_json::Value {
    let report_path = walk(&dir.join("out")).into_iter().find(|p| p.ends_with("report.json")).expect("a report");
    common::assert_valid_report(&report_path)
}

#[test]
fn a_job_that_cannot_fit_is_refused_and_a_disk_that_fills_ends_the_run_with_the_figures() {
    if !can_mount() {
        return;
    }
    let small = SmallFilesystem::mount("4m");
    let (dir, code, text) = run_job(&small, JOB, &[]);
    // Not the job's mistake but this machine's: the environment's exit code.
    assert_eq!(code, Some(3), "{text}");
    let expected = "not enough disk space: case fs/big/256KiB/t1/r1 stores about 10.0 MiB (40 objects of 256 KiB) in the tmpfs filesystem mounted at";
    assert!(text.contains(expected) && text.contains("which has 4.00 MiB free (of 4.00 MiB)") && text.contains("--no-space-check"), "{text}");
    assert!(!dir.path().join("out").exists(), "a refused run writes no report: {text}");
    assert_eq!(small.entries(), Vec::<String>::new(), "nothing written");

    let (dir, code, text) = run_job(&small, JOB, &["--no-space-check"]);
    assert_eq!(code, Some(1), "{text}");
    let report = report_in(dir.path());
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1, "the run stopped at the case that filled the disk: {text}");
    let failure = cases[0]["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("ran out of space during case fs/big/256KiB/t1/r1") && failure.contains("free of 4.00 MiB"), "{failure}");
    assert!(cases[0]["phases"][0]["ops"]["put"]["errors"]["no_space"].as_u64().unwrap_or(0) > 0, "{}", cases[0]["phases"][0]["ops"]["put"]);
    assert_eq!(report["status"], "failed");
    assert_eq!(small.entries(), Vec::<String>::new(), "cleanup removed every file of the run, half-written ones included");
}

/// A made filesystem's loop image is sparse, but the filesystem in it can fill it: on a disk
/// with less free space, mkfs or fio met I/O errors halfway ("mkfs.ext4: Input/output error" was
/// all a user saw). Both ways of asking for one are refused first, and nothing is made: not the
/// image, not `stowbench fio`'s default work directory.
#[test]
fn a_made_filesystem_whose_image_cannot_fit_is_refused_before_anything_is_made() {
    if !can_mount() {
        return;
    }
    let small = SmallFilesystem::mount("4m");
    let refused = |text: &str, sweep: &str| {
        let expected = format!("not enough disk space: fio sweep \"{sweep}\" makes its ext4 filesystem of 1.00 GiB on a loop image");
        text.contains(&expected) && text.contains("which has 4.00 MiB free") && text.contains("--fs-size") && text.contains("--no-space-check")
    };

    // In the filesystem itself: without --work-dir, `stowbench fio` makes its default one there.
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["fio", "--fs", "ext4", "--fs-size", "1GiB", "--runtime", "1s", "--ramp-time", "0s", "--no-progress"])
        .current_dir(&small.mount)
        .output()
        .unwrap();
    let (code, text) = exit_and_text(&out);
    assert_eq!(code, Some(3), "{text}");
    assert!(refused(&text, "cli"), "{text}");
    assert_eq!(small.entries(), Vec::<String>::new(), "the default --work-dir is not made for a refused run");

    let job = "version = 1\n[[fio]]\nname = \"layout\"\ntarget = [{ fs = \"ext4\", size = \"1GiB\" }]\nrw = [\"read\"]\nbs = [\"4KiB\"]\nsize = \"1MiB\"\nruntime = \"1s\"\n";
    let (dir, code, text) = run_job(&small, job, &[]);
    assert_eq!(code, Some(3), "{text}");
    assert!(refused(&text, "layout"), "{text}");
    assert!(!dir.path().join("out").exists(), "a refused run writes no report: {text}");
    assert_eq!(small.entries(), Vec::<String>::new(), "nothing written");
}

/// When a file store fills the disk, its error names the file that could not grow, not only
/// "No space left on device" (zip and cfb said nothing more, SQLite "database or disk is full"),
/// and the run leaves nothing behind.
#[test]
fn a_full_disk_names_the_file_the_store_could_not_write() {
    if !can_mount() {
        return;
    }
    let small = SmallFilesystem::mount("4m");
    for backend in ["fs", "sqlite", "sqlite-file", "pack", "zip", "cfb"] {
        let job = JOB.replace("backend = \"fs\"", &format!("backend = \"{backend}\""));
        let (dir, code, text) = run_job(&small, &job, &["--no-space-check"]);
        assert_eq!(code, Some(1), "{backend}: {text}");
        let report = report_in(dir.path());
        let failure = report["cases"][0]["failure"].as_str().unwrap_or_default().to_string();
        let store = format!("{}/stowbench-", small.mount.display());
        // SQLite says only "database or disk is full"; stowbench adds the database's path.
        let full = if backend == "sqlite" { "database or disk is full" } else { "No space left on device" };
        assert!(failure.contains(&store) && failure.contains(full), "{backend}: {failure}");
        assert_eq!(small.entries(), Vec::<String>::new(), "{backend}: cleanup removed every file of the run");
    }
}
