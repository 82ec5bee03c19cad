//! stowbench: where should the files live? One workload language run against many storage
//! backends, measured the same way, with reports that state the conditions behind every number.
//!
//! The library does all the work; `main.rs` only parses arguments and maps errors to exit codes.

/// `eprintln!` that never panics: stderr closed under a running stowbench (`2>&1 | head`) must
/// not end the run before it removes its data and writes its report. What could not be said is
/// lost; the report keeps everything.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see `say!`).
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod atomic_file;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod columns;
pub mod error;
pub mod fio;
pub mod hash;
pub mod host;
pub mod job;
#[cfg(feature = "mpi")]
pub mod multihost;
pub mod pack;
pub mod report;
pub mod runner;
pub mod sampler;
pub mod signals;
pub mod stats;
pub mod suggest;
pub mod threads;
pub mod units;
pub mod workload;

/// This build: the package version and, when built from a git checkout, its commit (build.rs).
pub const BUILD: &str = env!("STOWBENCH_BUILD");
