//! Twenty SQLite writers for a minute with default settings: SQLite has one writer lock per
//! database, so nineteen always wait. None may fail with "database is locked" (every wait ends in
//! the lock, however long the queue), the time they waited is reported, and the database passes
//! `PRAGMA integrity_check` afterwards. Nothing here depends on speed: the run's length is the
//! condition, not the measurement.

use std::process::Command;

const JOB: &str = "version = 1\n[[target]]\nname = \"sqlite\"\nbackend = \"sqlite\"\n\
    [[workload]]\nname = \"writers\"\nsizes = [\"4KiB\"]\nobjects = 5000\nthreads = [20]\n\
    [[workload.phase]]\nmix = { put = 1 }\nduration = \"60s\"\n";

#[test]
fn twenty_sqlite_writers_for_a_minute_never_fail_locked_and_leave_an_intact_database() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.toml"), JOB).unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "job.toml", "--no-progress", "--keep", "--format", "json", "--out", "out", "--work-dir", "work"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let case = &report["cases"][0];
    let phase = &case["phases"][0];
    let put = &phase["ops"]["put"];
    assert_eq!(case["status"], "ok", "{}", case["failure"]);
    assert_eq!(put["errors"], serde_json::json!({}), "no operation failed, \"database is locked\" included");
    assert!(put["count"].as_u64().unwrap() > 0);
    let window = phase["window_total_ns"].as_u64().unwrap();
    assert!(window >= 59_000_000_000, "about a minute of writing (the window runs from the first start to the last end): {window} ns");
    assert!(phase["lock_wait_ns"].as_u64().unwrap() > 0, "the writers' wait for the lock is reported");

    let db = case["backend_info"]["data_paths"][0].as_str().expect("the database path");
    let conn = rusqlite::Connection::open(dir.path().join(db)).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(conn);

    let cleanup = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["cleanup", "work"]).current_dir(dir.path()).output().unwrap();
    assert!(cleanup.status.success(), "{}", String::from_utf8_lossy(&cleanup.stderr));
    assert_eq!(std::fs::read_dir(dir.path().join("work")).unwrap().count(), 0, "cleanup removed the kept run");
}
