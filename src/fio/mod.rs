//! fio: the standard raw-I/O engine. stowbench drives it — it does not reimplement it.
//!
//! A `[[fio]]` table (`FioSweep`) expands into cases; each case renders one exact job file (plain
//! integer byte counts, checked by `fio --parse-only`), runs fio on a prepared target (an existing
//! directory, a filesystem made for the run on a loop device or tmpfs, or a confirmed raw device),
//! and reads fio's JSON into a `FioCaseResult` that carries fio's version, the job file and the
//! target's conditions. `series` turns results into the published study's charts and tables.
//!
//! This module must never write outside the namespaces it creates, never touch a device that is
//! mounted or in use, and never leave a mount or loop device behind without saying so.

pub mod case;
pub mod cli;
pub mod device;
pub mod error;
pub mod parse;
pub mod registry;
pub mod render;
pub mod result;
pub mod run;
pub mod series;
pub mod spec;
pub mod sys;
pub mod target;
mod validate;

pub use case::{expand, FioCase};
pub use error::FioError;
pub use render::render_job;
pub use result::FioCaseResult;
pub use run::{run_case, run_sweep, RunOptions};
pub use series::Chart;
pub use spec::{FioSweep, FsKind, IoEngine, RwMode, RwPattern, TargetSpec};
pub use target::{prepare_target, PreparedTarget, TargetFacts};
