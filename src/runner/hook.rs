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

/// Runs `command` with `env`; `Err` says what failed, for the case's failure.
pub fn run(command: &[String], env: &[(&'static str, String)], phase: &str) -> Result<(), String> {
    let shown = format!("{command:?}");
    let (program, args) = command.split_first().ok_or_else(|| format!("phase \"{phase}\": before is empty"))?;
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("phase \"{phase}\": before command {shown} could not start: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut cut = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    while !stderr.is_char_boundary(cut) {
        cut += 1;
    }
    let tail = &stderr[cut..];
    Err(format!("phase \"{phase}\": before command {shown} failed ({}); its stderr: {}", output.status, tail.trim()))
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
        assert_eq!(run(&sh("test \"$STOWBENCH_CASE_ID\" = c/1"), &env, "get"), Ok(()));
        let e = run(&sh("echo broken >&2; exit 3"), &env, "get").unwrap_err();
        assert!(e.contains("phase \"get\"") && e.contains("exit status: 3") && e.contains("broken"), "{e}");
        let e = run(&["/nonexistent/program".to_string()], &env, "get").unwrap_err();
        assert!(e.contains("could not start"), "{e}");
    }
}
