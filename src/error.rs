//! The one error a command ends with: a kind that decides the exit code, and a message for people.
//!
//! The kind says whose move it is. Bad input (exit 2): the job file, an option or the command line
//! is wrong wherever it runs, so the fix is to edit it. Environment (exit 3): the input is fine
//! but this machine or its servers cannot serve it now — a server that does not answer, too
//! little disk space, a report or work directory that cannot be written, a missing tool or
//! privilege — so the fix is outside stowbench. Run failed (exit 1): the run happened and a case
//! failed. Interrupted (exit 130): Ctrl-C. Leaf helpers may still return `String`; each such
//! message is given its kind where it crosses into a command, never by default.

/// Exit code: every case ran and passed.
pub const EXIT_OK: i32 = 0;
/// Exit code: the run happened and a case failed (or a gate, such as `compare --fail-if-slower`).
pub const EXIT_RUN_FAILED: i32 = 1;
/// Exit code: bad input or usage (job file, options, command line); nothing was written.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code: the environment failed stowbench (a server that does not answer, disk space, a
/// directory or report file that cannot be written, a missing tool or privilege).
pub const EXIT_ENVIRONMENT: i32 = 3;
/// Exit code: interrupted (Ctrl-C), as a shell reports a process ended by SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Whose move it is after a failure; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The input (job file, option, command line, a file named on it) is wrong: edit it.
    BadInput,
    /// The run happened and failed: a case, a gate.
    RunFailed,
    /// The user interrupted the run.
    Interrupted,
    /// This machine, its filesystems or its servers could not do what valid input asked.
    Environment,
}

impl Kind {
    /// The process exit code for this kind.
    pub fn exit_code(self) -> i32 {
        match self {
            Kind::BadInput => EXIT_BAD_INPUT,
            Kind::RunFailed => EXIT_RUN_FAILED,
            Kind::Interrupted => EXIT_INTERRUPTED,
            Kind::Environment => EXIT_ENVIRONMENT,
        }
    }
}

/// A failure that ends a command: its kind and what to tell the user (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// Whose move it is; decides the exit code.
    pub kind: Kind,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl Error {
    /// An error of `kind`.
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }

    /// The input is wrong (exit 2).
    pub fn bad_input(message: impl Into<String>) -> Error {
        Error::new(Kind::BadInput, message)
    }

    /// The machine or a server failed valid input (exit 3).
    pub fn environment(message: impl Into<String>) -> Error {
        Error::new(Kind::Environment, message)
    }

    /// The exit code this error ends the process with.
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
}

/// Shorthand for results that end a command.
pub type Result<T> = std::result::Result<T, Error>;

/// A fio failure keeps its own meaning: a bad flag is input, a missing tool or privilege is the
/// environment, fio failing a case is a failed run.
impl From<crate::fio::FioError> for Error {
    fn from(e: crate::fio::FioError) -> Error {
        use crate::fio::FioError as F;
        let kind = match &e {
            // A job file fio refuses is the sweep's options (raw --fio-option pairs above all).
            F::Invalid { .. } | F::DeviceRefused { .. } | F::ParseOnly { .. } => Kind::BadInput,
            F::Interrupted { .. } => Kind::Interrupted,
            F::FioMissing { .. }
            | F::NotRoot { .. }
            | F::ToolMissing { .. }
            | F::Command { .. }
            | F::DirectUnsupported { .. }
            | F::NoSpace { .. }
            | F::Io { .. }
            | F::Cleanup { .. } => Kind::Environment,
            F::FioFailed { .. } | F::Output { .. } | F::Timeout { .. } => Kind::RunFailed,
        };
        Error::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_documented_exit_code() {
        let codes: Vec<i32> = [Kind::BadInput, Kind::RunFailed, Kind::Interrupted, Kind::Environment].iter().map(|k| k.exit_code()).collect();
        assert_eq!(codes, [2, 1, 130, 3]);
    }

    #[test]
    fn fio_failures_keep_their_meaning() {
        use crate::fio::FioError;
        let not_root = FioError::NotRoot { what: "making the ext4 filesystem for the run".into() };
        assert_eq!((Error::from(not_root.clone()).kind, not_root.exit_code()), (Kind::Environment, 3));
        let bad_flag = FioError::Invalid { sweep: "s".into(), field: "--bs".into(), message: "\"2.6m\" is no size".into() };
        assert_eq!(Error::from(bad_flag).exit_code(), 2);
    }
}
