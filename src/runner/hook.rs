//! A phase's `before` command (fio's exec_prerun): run once per case, before the phase's warm-up
//! and cache drop, untimed, with the case's storage named in environment variables, so a script
//! can inspect or change what stowbench stored — corrupt it to test verification, snapshot it,
//! restart a server by hand.
//!
//! The command inherits stowbench's own environment (server URIs included, which is how it
//! reaches a server: nothing secret is added here; `STOWBENCH_BACKEND_INFO` is redacted). Its
//! output is captured: stdout is dropped so it cannot interleave with stowbench's table, the end
//! of stderr goes into the failure message. It must never be run by a case that did not ask.

use crate::backend::BackendInfo;
use crate::job::{CasePlan, PhasePlan};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// Ends a `before` command's process group: SIGTERM, then SIGKILL to whatever is left once the
/// command has ended or a second has passed (what it started may ignore SIGTERM).
fn end_group(group: libc::pid_t, child: &mut std::process::Child) {
    // SAFETY: kill(2) on the process group `run` made for the command; no memory is involved.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
}

/// Bytes of the command's stderr kept in a failure message.
const STDERR_TAIL_BYTES: usize = 2000;

/// The key names' printf format: key `i` (0 ≤ i < objects) is `printf(KEY_FORMAT, i)`; kept
/// equal to `workload::keys::write_key_name` by a test.
pub const KEY_FORMAT: &str = "obj-%010d";

/// The environment a `before` command gets, besides stowbench's own.
pub fn environment(case: &CasePlan, phase: &PhasePlan, info: &BackendInfo, case_dir: &Path, seed: u64) -> Vec<(&'static str, String)> {
    let paths: Vec<String> = info.data_paths.iter().map(|p| p.display().to_string()).collect();
    vec![
        ("STOWBENCH_CASE_ID", case.id.clone()),
        ("STOWBENCH_CASE_DIR", case_dir.display().to_string()),
        ("STOWBENCH_PHASE", phase.label.clone()),
        ("STOWBENCH_BACKEND", info.backend.clone()),
        // Effective options, table, bucket, prefix and data paths, secrets redacted.
        ("STOWBENCH_BACKEND_INFO", serde_json::to_string(info).unwrap_or_default()),
        ("STOWBENCH_DATA_PATHS", std::env::join_paths(&paths).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()),
        ("STOWBENCH_OBJECTS", case.objects.to_string()),
        ("STOWBENCH_KEY_FORMAT", KEY_FORMAT.into()),
        ("STOWBENCH_SEED", seed.to_string()),
    ]
}

/// Runs `command` with `env`; `Err` says what failed, for the case's failure. When `stop` is
/// set while it runs (Ctrl-C, the run's --timeout), the command and everything it started are
/// ended (it runs in a process group of its own), so that no hook outlives the run.
pub fn run(command: &[String], env: &[(&'static str, String)], phase: &str, stop: &AtomicBool) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let shown = format!("{command:?}");
    let (program, args) = command.split_first().ok_or_else(|| format!("phase \"{phase}\": before is empty"))?;
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("phase \"{phase}\": before command {shown} could not start: {e}"))?;
    // stderr is read on a thread of its own: a command writing more than a pipe holds would
    // otherwise wait for us while we wait for it.
    let mut pipe = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut pipe, &mut bytes);
        bytes
    });
    let group = child.id() as libc::pid_t;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if stop.load(Ordering::Relaxed) => {
                end_group(group, &mut child);
                break Err(format!("phase \"{phase}\": before command {shown} was still running when the run was stopped; it was ended"));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(e) => break Err(format!("phase \"{phase}\": waiting for before command {shown} failed: {e}")),
        }
    };
    // A command that ended by itself keeps what it started (a hook may restart a server by
    // hand); only a stopped run ends the whole group, above.
    let stderr_bytes = reader.join().unwrap_or_default();
    let status = status?;
    if status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&stderr_bytes);
    let mut cut = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    while !stderr.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &stderr[cut..];
    Err(format!("phase \"{phase}\": before command {shown} failed ({status}); its stderr: {}", tail.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_format_is_the_key_naming() {
        let printed = KEY_FORMAT.replace("%010d", &format!("{:010}", 42));
        assert_eq!(printed, crate::workload::keys::key_name(42));
    }

    #[test]
    fn a_failing_command_fails_with_its_status_and_stderr() {
        let env = vec![("STOWBENCH_CASE_ID", "c/1".to_string())];
        let sh = |script: &str| vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let go = AtomicBool::new(false);
        assert_eq!(run(&sh("test \"$STOWBENCH_CASE_ID\" = c/1"), &env, "get", &go), Ok(()));
        let e = run(&sh("echo broken >&2; exit 3"), &env, "get", &go).unwrap_err();
        assert!(e.contains("phase \"get\"") && e.contains("exit status: 3") && e.contains("broken"), "{e}");
        let e = run(&["/nonexistent/program".to_string()], &env, "get", &go).unwrap_err();
        assert!(e.contains("could not start"), "{e}");
    }

    /// A hung command, and the process it started, are ended when the run stops (they were left
    /// running after the run's --timeout, orphaned).
    #[test]
    fn a_stopped_run_ends_its_command_and_what_the_command_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
        let stop = AtomicBool::new(false);
        let pid_of = || std::fs::read_to_string(&pid_file).ok().and_then(|t| t.trim().parse::<i32>().ok());
        let e = std::thread::scope(|scope| {
            // The run stops once the command has started its own child, whenever that is.
            scope.spawn(|| {
                while pid_of().is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                stop.store(true, Ordering::Relaxed);
            });
            run(&["sh".to_string(), "-c".to_string(), script], &[], "get", &stop).unwrap_err()
        });
        assert!(e.contains("was still running when the run was stopped; it was ended"), "{e}");
        let pid = pid_of().unwrap();
        // Killed, it is reaped by init: gone, or for a moment a zombie.
        let alive = || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        for _ in 0..500 {
            if !alive() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!alive(), "the command's own child {pid} outlived the run");
    }
}
