//! The machine and software behind the numbers, read once per run from /proc and /etc.

use super::model::Environment;
use std::path::Path;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

fn os_name() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|v| v.trim_matches('"').to_string()).unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// Reads the environment; `work_dir` is where the run stores data.
pub fn capture(work_dir: &Path) -> Environment {
    Environment {
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        os: os_name(),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpu_model: crate::host::cpu_model(),
        cpu_count: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        memory_bytes: crate::host::memory_bytes(),
        is_root: crate::host::is_root(),
        sqlite_version: rusqlite::version().to_string(),
        work_dir: work_dir.display().to_string(),
        work_dir_filesystem: crate::host::filesystem_of(work_dir),
        page_cache_reclaim: damon_pageout(Path::new(DAMON_ADMIN)),
        // Set by the runner once it has chosen the clock.
        clock: None,
    }
}

/// Where the kernel's DAMON sysfs interface lives.
const DAMON_ADMIN: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// A running DAMON scheme that pages out memory idle for a while (some VMs run one to give
/// memory back to the host): it evicts page cache too, so "warm" data can be cold again after
/// that time. DAMON counts age in aggregation intervals.
fn damon_pageout(admin: &Path) -> Option<String> {
    let read = |p: &Path| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let entries = |p: &Path| {
        let mut dirs: Vec<_> = std::fs::read_dir(p).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        dirs.sort();
        dirs
    };
    for kdamond in entries(admin) {
        if read(&kdamond.join("state")) != "on" {
            continue;
        }
        for context in entries(&kdamond.join("contexts")) {
            let aggregation_us: u64 = read(&context.join("monitoring_attrs/intervals/aggr_us")).parse().ok()?;
            for scheme in entries(&context.join("schemes")) {
                if read(&scheme.join("action")) != "pageout" {
                    continue;
                }
                let min_age: u64 = read(&scheme.join("access_pattern/age/min")).parse().unwrap_or(0);
                let idle_s = (min_age * aggregation_us) as f64 / 1e6;
                return Some(format!("DAMON pageout: memory idle for {idle_s} s or more is paged out"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_pageout_scheme_is_described_with_its_idle_time() {
        let tmp = tempfile::tempdir().unwrap();
        let context = tmp.path().join("0/contexts/0");
        let scheme = context.join("schemes/0");
        for (file, text) in [
            (tmp.path().join("0/state"), "on\n"),
            (context.join("monitoring_attrs/intervals/aggr_us"), "5000000\n"),
            (scheme.join("action"), "pageout\n"),
            (scheme.join("access_pattern/age/min"), "6\n"),
        ] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        assert_eq!(damon_pageout(tmp.path()).as_deref(), Some("DAMON pageout: memory idle for 30 s or more is paged out"));
        std::fs::write(scheme.join("action"), "stat\n").unwrap();
        assert_eq!(damon_pageout(tmp.path()), None, "only pageout evicts");
        std::fs::write(scheme.join("action"), "pageout\n").unwrap();
        std::fs::write(tmp.path().join("0/state"), "off\n").unwrap();
        assert_eq!(damon_pageout(tmp.path()), None, "a stopped kdamond evicts nothing");
        assert_eq!(damon_pageout(&tmp.path().join("missing")), None);
    }
}
