//! The run's own deadline (`stowbench run --timeout 10m`), as fio's `--timeout`.
//!
//! At the deadline the case running then is stopped like an interrupt (its workers finish their
//! current operation), reported as failed, and no other case starts; the run exits with 1 and
//! status `timed_out`. An operation can only be abandoned where `op_timeout` can cut it: if a
//! worker is still blocked `GRACE` after the deadline (a silent server and no `op_timeout`), the
//! process exits anyway, leaving the report of every finished case marked `timed_out` — the run
//! ends within its deadline plus the grace, whatever the storage does.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the current case may take to stop after the deadline before the process exits.
pub const GRACE: Duration = Duration::from_secs(10);

/// The failure of the case the deadline stopped.
pub fn cut_short(timeout: Option<Duration>) -> String {
    format!("the run's --timeout of {} ended it before it finished", seconds(timeout.unwrap_or_default()))
}

fn seconds(d: Duration) -> String {
    crate::units::format_nanos(d.as_nanos() as u64)
}

/// Waits for the run to end (`finished`); at `timeout` stops it, and past the grace exits.
pub fn watch(timeout: Duration, report: &Path, finished: &AtomicBool, timed_out: &AtomicBool, interrupted: &AtomicBool) {
    // Off the workers' file table (see crate::threads): it opens only files of its own.
    crate::threads::leave_file_table(&[]);
    let start = Instant::now();
    if !wait_until(finished, start + timeout) {
        return;
    }
    timed_out.store(true, Ordering::Relaxed);
    interrupted.store(true, Ordering::Relaxed);
    crate::say!("stowbench: the run's --timeout of {} passed; stopping the current case", seconds(timeout));
    if !wait_until(finished, start + timeout + GRACE) {
        return;
    }
    let dir = mark_timed_out(report);
    // Blocked before the first report was written (a target that never answered its first
    // connection), there is no report to point at.
    let kept = match report.exists() {
        true => format!("{} keeps every finished case", report.display()),
        false => "no case had finished, so no report was written".to_string(),
    };
    crate::say!(
        "stowbench: an operation is still blocked {} after the run's --timeout (a storage that does not answer; \
         op_timeout bounds each operation of a server backend); exiting. {kept}{}",
        seconds(GRACE),
        dir.map(|d| format!("; `stowbench cleanup {d}` removes the data left behind")).unwrap_or_default()
    );
    std::process::exit(1);
}

/// Sleeps until `at`; false when `finished` came first.
fn wait_until(finished: &AtomicBool, at: Instant) -> bool {
    loop {
        if finished.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(20)));
    }
}

/// Marks the report on disk as timed out (it holds every finished case); returns the run's data
/// directory for the cleanup hint.
fn mark_timed_out(report: &Path) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).ok()?).ok()?;
    value["status"] = crate::report::model::RunStatus::TimedOut.name().into();
    value["finished_at"] = crate::report::rfc3339(std::time::SystemTime::now()).into();
    let text = serde_json::to_string_pretty(&value).ok()? + "\n";
    if let Err(e) = crate::report::replace_atomically(report, &text) {
        crate::say!("stowbench: {e}");
    }
    value["environment"]["work_dir"].as_str().map(str::to_string)
}
