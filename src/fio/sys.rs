//! Running the tools fio needs: run a command, find a program, free space as a fio error. (What
//! the machine is — mounts, root, memory — is `crate::host`'s.) `run_tool` runs exactly the
//! command it is given (never through a shell).

use super::error::FioError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs `program args…` with no stdin and returns its stdout; a failure carries stderr.
pub fn run_tool(program: &str, args: &[&str]) -> Result<String, FioError> {
    let command_line = command_line(program, args);
    let output = Command::new(program).args(args).stdin(Stdio::null()).output().map_err(|e| FioError::Command {
        command: command_line.clone(),
        status: "not started".into(),
        stderr: e.to_string(),
    })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if stderr.is_empty() {
            stderr = String::from_utf8_lossy(&output.stdout).trim().to_string();
        }
        Err(FioError::Command { command: command_line, status: output.status.to_string(), stderr })
    }
}

/// The command as a person would type it (for reports and error messages).
pub fn command_line(program: &str, args: &[&str]) -> String {
    std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ")
}

/// Finds `program` on PATH or in the sbin directories root's PATH usually has.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Free bytes for unprivileged users on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Result<u64, FioError> {
    crate::host::filesystem_space(path).map(|s| s.free_bytes).map_err(|e| FioError::io(path, e))
}
