//! Errors of the fio module: each message says what happened, where, and how to fix it.
//!
//! This module only describes failures; it must never hide one (a failed cleanup is an error the
//! user sees, with the exact commands that would finish the job by hand).

/// Everything that can go wrong while validating, preparing, running or parsing a fio case.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FioError {
    /// The `fio` program could not be started.
    #[error(
        "fio was not found or could not be started ({detail}). stowbench drives fio for raw I/O \
         instead of reimplementing it: install it with `apt-get install -y fio` (Debian/Ubuntu) or \
         `dnf install fio` (Fedora), or put it on PATH"
    )]
    FioMissing {
        /// What the operating system said.
        detail: String,
    },
    /// A field of a `[[fio]]` table (or a command-line flag) is invalid.
    #[error("fio sweep \"{sweep}\": field `{field}`: {message}")]
    Invalid {
        /// The sweep's `name`.
        sweep: String,
        /// The offending field, as written in the job file.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// `fio --parse-only` refused a generated job file.
    #[error("fio --parse-only refused the job file of case {case_id}:\n{message}\n--- job file ---\n{job_file}")]
    ParseOnly {
        /// The case whose job file was refused.
        case_id: String,
        /// The exact job file text.
        job_file: String,
        /// fio's own message.
        message: String,
    },
    /// fio ran but exited with an error.
    #[error("fio failed for case {case_id} ({status}):\n{stderr}\n--- job file ---\n{job_file}")]
    FioFailed {
        /// The case that failed.
        case_id: String,
        /// Exit status as text.
        status: String,
        /// fio's stderr (and stdout), trimmed.
        stderr: String,
        /// The exact job file text.
        job_file: String,
    },
    /// fio's JSON output could not be read.
    #[error("cannot read fio's JSON output for case {case_id} ({path}): {message}")]
    Output {
        /// The case whose output is broken.
        case_id: String,
        /// Where the output was written.
        path: String,
        /// The parse error.
        message: String,
    },
    /// fio ran longer than its time limit and was stopped.
    #[error(
        "fio ran past its time limit of {limit_s} s for case {case_id} and was stopped; \
         the limit covers ramp time, runtime and laying out the files. Raise it with a larger \
         timeout or use smaller files"
    )]
    Timeout {
        /// The case that timed out.
        case_id: String,
        /// The limit that was exceeded, in whole seconds.
        limit_s: u64,
    },
    /// The run was interrupted (Ctrl-C); fio was stopped.
    #[error("interrupted during case {case_id}; fio was stopped and the target cleaned up")]
    Interrupted {
        /// The case that was running.
        case_id: String,
    },
    /// A made filesystem or raw device needs root.
    #[error(
        "{what} needs root (losetup, mkfs and mount are privileged); run stowbench as root, \
         or point fio at an existing directory with `--target DIR` (job file: target = \"/path\")"
    )]
    NotRoot {
        /// What needed root, e.g. "making an xfs filesystem on a loop device".
        what: String,
    },
    /// An external tool needed for a target is not installed.
    #[error("`{tool}` was not found; install it with `apt-get install -y {package}`")]
    ToolMissing {
        /// The program, e.g. "mkfs.xfs".
        tool: String,
        /// The Debian package that provides it.
        package: String,
    },
    /// An external command (losetup, mkfs, mount, umount) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line, as run.
        command: String,
        /// Exit status as text.
        status: String,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// A raw block device target was refused for safety.
    #[error("refusing raw device {device}: {reason}")]
    DeviceRefused {
        /// The device path as given.
        device: String,
        /// Why, and what would make it acceptable.
        reason: String,
    },
    /// The target filesystem does not accept O_DIRECT.
    #[error(
        "target {target} does not support direct I/O (O_DIRECT): {detail}. Set `direct = false` for \
         this sweep (`--no-direct`), or put this target in its own [[fio]] table"
    )]
    DirectUnsupported {
        /// The target label.
        target: String,
        /// What the kernel said.
        detail: String,
    },
    /// The target has not enough free space for the case's files.
    #[error(
        "not enough space in {dir}: case {case_id} needs {needed_bytes} bytes of files but only \
         {available_bytes} bytes are free; use a smaller `size`, fewer `numjobs`, `share_files = true`, \
         or a bigger target"
    )]
    NoSpace {
        /// The case that would not fit.
        case_id: String,
        /// The data directory.
        dir: String,
        /// Bytes the case's files need.
        needed_bytes: u64,
        /// Bytes free on the target.
        available_bytes: u64,
    },
    /// A local file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory involved.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// Cleanup could not remove everything stowbench created.
    #[error("cleanup left things behind: {message}")]
    Cleanup {
        /// What is left and the commands that would remove it.
        message: String,
    },
}

impl FioError {
    /// An I/O error about `path`.
    pub fn io(path: &std::path::Path, err: impl std::fmt::Display) -> FioError {
        FioError::Io { path: path.display().to_string(), message: err.to_string() }
    }

    /// The exit code the CLI uses for it (`crate::error` decides: 2 bad input, 3 the
    /// environment, 130 an interrupt, 1 a failed fio case).
    pub fn exit_code(&self) -> i32 {
        crate::error::Error::from(self.clone()).exit_code()
    }
}
