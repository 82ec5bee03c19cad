//! The result of one fio case as stowbench reports it: the numbers (units last in every name), the
//! exact job file, fio's version and the target's conditions. Pure data; never touches the disk.

use super::case::FioCase;
use super::parse::{DirectionStats, DiskUtil, FioOutput};
use super::target::TargetFacts;
use crate::report::model::WritebackSettle;
use serde::{Deserialize, Serialize};

/// Largest raw `jobs` JSON (bytes, serialized) kept in a result; larger summaries are left out.
pub const RAW_JOBS_LIMIT_BYTES: usize = 64 * 1024;

/// One finished fio case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FioCaseResult {
    /// Stable case id, e.g. `fio/e3/xfs/randread/bs8KiB/j4/qd16/f1/s64MiB`.
    pub case_id: String,
    /// Name of the sweep the case came from.
    pub sweep_name: String,
    /// Target label (filesystem name for made filesystems).
    pub target_label: String,
    /// Access pattern label, e.g. "randread" or "randrw70".
    pub rw: String,
    /// fio `rw` value.
    pub rw_pattern: String,
    /// Read percentage of a mixed pattern.
    pub rwmixread_percent: Option<u8>,
    /// Block size (bytes).
    pub bs_bytes: u64,
    /// Threads (fio `numjobs`).
    pub numjobs: u32,
    /// Outstanding I/O per thread (fio `iodepth`).
    pub iodepth: u32,
    /// Outstanding I/O over all threads (numjobs × iodepth), the x axis of the published charts.
    pub outstanding_io_total: u64,
    /// Files per thread (or shared).
    pub nrfiles: u32,
    /// Bytes of file data per thread (or in total when shared).
    pub size_bytes: u64,
    /// Whether all threads shared one set of files.
    pub share_files: bool,
    /// Which run of this combination (1-based).
    pub repeat_index: u32,
    /// Requested measured time (nanoseconds).
    pub runtime_requested_ns: u64,
    /// Requested warm-up time (nanoseconds).
    pub ramp_time_ns: u64,
    /// O_DIRECT.
    pub direct: bool,
    /// fio `time_based`.
    pub time_based: bool,
    /// fio I/O engine.
    pub ioengine: String,
    /// Read plus write operations per second.
    pub iops: f64,
    /// Read plus write bytes per second.
    pub bw_bytes_per_s: u64,
    /// Read direction (None when the pattern does not read).
    pub read: Option<DirectionStats>,
    /// Write direction (None when the pattern does not write).
    pub write: Option<DirectionStats>,
    /// fio's CPU time in user mode, percent of one CPU.
    pub usr_cpu_percent: f64,
    /// fio's CPU time in kernel mode, percent of one CPU.
    pub sys_cpu_percent: f64,
    /// Device utilisation fio measured.
    pub disk_util: Vec<DiskUtil>,
    /// fio's version string, e.g. "fio-3.33".
    pub fio_version: String,
    /// fio's completion time, Unix milliseconds.
    pub fio_timestamp_unix_ms: Option<u64>,
    /// The command line that ran fio.
    pub fio_command: String,
    /// The exact job file fio ran.
    pub job_file: String,
    /// Anything fio printed besides its JSON (warnings), trimmed.
    pub fio_messages: String,
    /// Wall time of the fio process, including laying out files (nanoseconds).
    pub wall_ns: u64,
    /// The target's conditions (filesystem, mkfs command, mount options, device).
    pub target: TargetFacts,
    /// The dirty pages written back just before fio started, untimed (the sweep's
    /// `settle_writeback`). Absent when the sweep turned it off, for the `null` engine, and in
    /// older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback_settle: Option<WritebackSettle>,
    /// fio's own `jobs` JSON without histogram bins, when under `RAW_JOBS_LIMIT_BYTES`.
    pub fio_jobs_json: Option<serde_json::Value>,
}

/// How the run went, besides fio's JSON.
pub struct RunRecord {
    /// The exact job file.
    pub job_file: String,
    /// The fio command line.
    pub command: String,
    /// fio's non-JSON output.
    pub messages: String,
    /// Wall time (nanoseconds).
    pub wall_ns: u64,
    /// The write-back before fio started.
    pub writeback_settle: Option<WritebackSettle>,
}

impl FioCaseResult {
    /// Assembles a result; `output` must hold exactly one (group-reported) job.
    pub fn build(case: &FioCase, facts: &TargetFacts, output: FioOutput, record: RunRecord) -> Result<FioCaseResult, String> {
        let [job] = output.jobs.as_slice() else {
            return Err(format!("expected one job in fio's output (group_reporting), found {}", output.jobs.len()));
        };
        let reads = !matches!(case.rw.pattern.name(), "write" | "randwrite");
        let writes = !matches!(case.rw.pattern.name(), "read" | "randread");
        let read = reads.then(|| job.read.clone());
        let write = writes.then(|| job.write.clone());
        let iops = read.iter().chain(write.iter()).map(|d| d.iops).sum();
        let bw_bytes_per_s = read.iter().chain(write.iter()).map(|d| d.bw_bytes_per_s).sum();
        let raw_size = serde_json::to_string(&output.raw_jobs_without_bins).map(|t| t.len()).unwrap_or(usize::MAX);
        Ok(FioCaseResult {
            case_id: case.id.clone(),
            sweep_name: case.sweep_name.clone(),
            target_label: case.target.label().to_string(),
            rw: case.rw.label(case.rwmixread_percent.unwrap_or(50)),
            rw_pattern: case.rw.pattern.name().to_string(),
            rwmixread_percent: case.rwmixread_percent,
            bs_bytes: case.bs.bytes(),
            numjobs: case.numjobs,
            iodepth: case.iodepth,
            outstanding_io_total: u64::from(case.numjobs) * u64::from(case.iodepth),
            nrfiles: case.nrfiles,
            size_bytes: case.size.bytes(),
            share_files: case.share_files,
            repeat_index: case.repeat_index,
            runtime_requested_ns: case.runtime.0,
            ramp_time_ns: case.ramp_time.0,
            direct: case.direct,
            time_based: case.time_based,
            ioengine: case.ioengine.name().to_string(),
            iops,
            bw_bytes_per_s,
            read,
            write,
            usr_cpu_percent: job.usr_cpu_percent,
            sys_cpu_percent: job.sys_cpu_percent,
            disk_util: output.disk_util.clone(),
            fio_version: output.fio_version.clone(),
            fio_timestamp_unix_ms: output.timestamp_unix_ms,
            fio_command: record.command,
            job_file: record.job_file,
            fio_messages: record.messages,
            wall_ns: record.wall_ns,
            target: facts.clone(),
            writeback_settle: record.writeback_settle,
            fio_jobs_json: (raw_size <= RAW_JOBS_LIMIT_BYTES).then_some(output.raw_jobs_without_bins),
        })
    }

    /// The filesystem (or target kind) the series and tables group by.
    pub fn fs_label(&self) -> String {
        self.target.fs_type.clone().unwrap_or_else(|| self.target.kind.clone())
    }
}
