//! Shared helpers for the fio tests: gates that skip locally but FAIL with CI=true, because a test
//! whose tool is missing must not pass silently in CI.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether we run in CI (CI=true), where missing tools and privileges are failures.
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}

/// True when fio can run; without it: skip locally, panic in CI.
pub fn fio_available(test: &str) -> bool {
    let ok = Command::new("fio").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        assert!(!in_ci(), "{test}: fio is not installed but CI=true; install it with apt-get install -y fio");
        eprintln!("{test}: skipped, fio is not installed (apt-get install -y fio)");
    }
    ok
}

/// True when running as root (loop devices, mkfs, mount); otherwise skip locally, panic in CI.
pub fn root_available(test: &str) -> bool {
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        assert!(!in_ci(), "{test}: needs root (CI runs as root) for loop devices and mounts");
        eprintln!("{test}: skipped, needs root for loop devices and mounts");
    }
    ok
}

/// Loop devices whose backing file lies under `dir` (should be none after cleanup).
pub fn loops_backed_under(dir: &Path) -> Vec<String> {
    let out = Command::new("losetup").args(["--list", "--noheadings", "--output", "NAME,BACK-FILE"]).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.lines().filter(|l| l.contains(&*dir.to_string_lossy())).map(str::to_string).collect()
}

/// Mount points under `dir` (should be none after cleanup).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    stowbench::host::mounts().into_iter().map(|m| m.mount_point).filter(|m| m.starts_with(dir)).collect()
}

/// Reads a fixture file.
pub fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fio").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
