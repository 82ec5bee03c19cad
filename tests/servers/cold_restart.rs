//! Cold read phases restart the servers scripts/services.sh started, so their own caches are
//! empty too, and never touch a server stowbench did not start. The test starts private
//! services (PostgreSQL, MariaDB and MinIO in a directory of its own): restarting the shared
//! ones would cut every other test's connections.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/services.sh")
}

/// Services in a directory of their own, stopped (by their recorded pids) when dropped.
pub struct PrivateServices {
    pub dir: tempfile::TempDir,
}

impl PrivateServices {
    /// Starts the services listed in `only` ("pg,mariadb").
    pub fn start(only: &str) -> PrivateServices {
        let dir = tempfile::tempdir().unwrap();
        // The postgres and mysql users must reach their data directories.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let out = Command::new(script()).args(["start", "--only", only]).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "services.sh start: {}", String::from_utf8_lossy(&out.stderr));
        PrivateServices { dir }
    }

    /// A value from the script's env fragment of `service`.
    pub fn value(&self, service: &str, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{service}.env"))).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap_or_else(|| panic!("{name} in {text}"));
        line.to_string()
    }

    fn pids(&self) -> (String, String) {
        (self.value("pg", "STOWBENCH_PG_PID"), self.value("mariadb", "STOWBENCH_MARIADB_PID"))
    }
}

impl Drop for PrivateServices {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).output();
    }
}

/// Runs a put-then-cold-get job on both private servers; `script_env` says whether stowbench is
/// told where the script's services are.
fn run_cold(services: &PrivateServices, script_env: bool) -> (serde_json::Value, String) {
    let work = tempfile::tempdir().unwrap();
    let job = format!(
        "version = 1\n\
         [[target]]\nname = \"pg\"\nbackend = \"postgres\"\nuri = \"{}\"\n\
         [[target]]\nname = \"maria\"\nbackend = \"mariadb\"\nuri = \"{}\"\n\
         [[target]]\nname = \"s3\"\nbackend = \"s3\"\nuri = \"{}\"\nbucket = \"{}\"\n\
         [[workload]]\nname = \"w\"\nsizes = [\"64KiB\"]\nobjects = 50\nphases = [\"put\", \"get\"]\ncache = \"cold\"\n",
        services.value("pg", "STOWBENCH_PG_URI"),
        services.value("mariadb", "STOWBENCH_MARIADB_URI"),
        services.value("s3", "STOWBENCH_S3_ENDPOINT"),
        services.value("s3", "STOWBENCH_S3_BUCKET"),
    );
    std::fs::write(work.path().join("job.toml"), job).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    command.args(["run", "job.toml", "--no-progress", "--format", "json"]).current_dir(work.path());
    command.env_remove("STOWBENCH_SERVICES_DIR").env_remove("STOWBENCH_SERVICES_SCRIPT");
    // The private MinIO's own credentials, not the shared one's.
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        command.env(name, services.value("s3", name));
    }
    if script_env {
        command.env("STOWBENCH_SERVICES_DIR", services.dir.path()).env("STOWBENCH_SERVICES_SCRIPT", script());
    }
    let out = command.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    (serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {text}")), text)
}

#[test]
fn a_cold_read_phase_restarts_a_script_started_server_and_leaves_any_other_alone() {
    if !super::available("STOWBENCH_PG_URI") || !super::available("STOWBENCH_MARIADB_URI") {
        return;
    }
    if !stowbench::host::is_root() {
        assert!(!common::in_ci(), "cache = \"cold\" needs root, and CI=true");
        eprintln!("SKIPPED: cache = \"cold\" needs root");
        return;
    }
    // MinIO too: its client's pooled connections die with the restart, and the disk-usage
    // listing after the cold phase once failed on one ("error sending request").
    let services = PrivateServices::start("pg,mariadb,s3");
    let before = services.pids();

    let (report, text) = run_cold(&services, true);
    let after = services.pids();
    assert!(after.0 != before.0 && after.1 != before.1, "both servers were restarted: {before:?} → {after:?}");
    for case in report["cases"].as_array().unwrap() {
        assert_eq!(case["status"], "ok", "{case}");
        let phases = case["phases"].as_array().unwrap();
        assert_eq!((phases[0]["cache_state"].as_str(), phases[0].get("server_restarted")), (Some("warm"), None), "puts are not restarted for");
        assert_eq!((phases[1]["cache_state"].as_str(), phases[1]["server_restarted"].as_bool()), (Some("cold"), Some(true)), "{text}");
        // Every object written before the restart reads back intact from the restarted server.
        let checked = case["verification"]["checked"].as_u64().unwrap_or(0);
        assert!(checked >= 50 && case["verification"]["mismatches"] == 0, "{}", case["verification"]);
        // Server figures follow the new processes: the old and the new pid are both named.
        assert_eq!(case["resources"]["server_pids"].as_array().map(Vec::len), Some(2), "{}", case["resources"]);
        // A restart stowbench made is followed: the server's CPU is known, and nothing was lost.
        assert!(case["resources"]["server_cpu_ns"].is_u64() && case["resources"].get("server_pids_lost").is_none(), "{}", case["resources"]);
    }
    assert!(!text.contains("server_cache_warm"), "{text}");

    // Without the script's directory the same servers are not ours to restart: only the page
    // cache is dropped, and a warning says the server's cache stayed warm.
    let (report, _) = run_cold(&services, false);
    assert_eq!(services.pids(), after, "a server stowbench was not told it started is never restarted");
    for case in report["cases"].as_array().unwrap() {
        assert_eq!(case["phases"][1]["cache_state"], "cold");
        assert!(case["phases"][1].get("server_restarted").is_none(), "{case}");
    }
    let warning = report["warnings"].as_array().unwrap().iter().find(|w| w["kind"] == "server_cache_warm").cloned();
    assert_eq!(warning.map(|w| w["case_ids"].as_array().map(Vec::len)), Some(Some(3)), "{}", report["warnings"]);
}
