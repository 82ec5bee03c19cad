//! The machine and software behind the numbers, read once per run from /proc and /etc.

use super::model::Environment;
use std::path::Path;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

fn cpu_model() -> String {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

fn memory_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn os_name() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// Reads the environment; `work_dir` is where the run stores data.
pub fn capture(work_dir: &Path) -> Environment {
    Environment {
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        os: os_name(),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpu_model: cpu_model(),
        cpu_count: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        memory_bytes: memory_bytes(),
        is_root: crate::sampler::is_root(),
        sqlite_version: rusqlite::version().to_string(),
        work_dir: work_dir.display().to_string(),
        work_dir_filesystem: crate::sampler::filesystem_of(work_dir),
    }
}
