//! Expanding a sweep into cases: one fio invocation each, with a stable id.
//!
//! The loop order puts the things that change the files on disk outermost (target, size, file
//! count), so consecutive cases reuse the files fio laid out. This module must never touch the disk.

use super::spec::{FioSweep, IoEngine, RwMode, TargetSpec};
use crate::units::{ByteSize, Nanos};
use serde::Serialize;
use std::collections::BTreeMap;

/// One combination of the sweep: exactly one fio run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FioCase {
    /// Stable id, e.g. `fio/e3/xfs/randread/bs8KiB/j4/qd16/f1/s64MiB`.
    pub id: String,
    /// The sweep's name.
    pub sweep_name: String,
    /// Where the I/O goes.
    pub target: TargetSpec,
    /// Access pattern.
    pub rw: RwMode,
    /// Read percentage of a mixed pattern (fio `rwmixread`); None for pure reads or writes.
    pub rwmixread_percent: Option<u8>,
    /// Block size (bytes).
    pub bs: ByteSize,
    /// Threads (fio `numjobs`).
    pub numjobs: u32,
    /// Outstanding I/O per thread (fio `iodepth`).
    pub iodepth: u32,
    /// Files per thread (or shared by all threads with `share_files`).
    pub nrfiles: u32,
    /// Bytes of file data per thread (or in total with `share_files`), split over `nrfiles` files.
    pub size: ByteSize,
    /// Measured time (nanoseconds).
    pub runtime: Nanos,
    /// Warm-up before measuring (nanoseconds).
    pub ramp_time: Nanos,
    /// O_DIRECT.
    pub direct: bool,
    /// Run for the whole runtime even after covering the files.
    pub time_based: bool,
    /// fio I/O engine.
    pub ioengine: IoEngine,
    /// All threads share one set of files.
    pub share_files: bool,
    /// Extra raw fio options.
    pub extra: BTreeMap<String, String>,
    /// Which run of this combination (1-based; 1 when the sweep does not repeat).
    pub repeat_index: u32,
    /// Write back the dirty pages before the case, untimed.
    pub settle_writeback: bool,
}

impl FioCase {
    /// Bytes of files this case needs on its target.
    pub fn data_bytes(&self) -> u64 {
        let copies = if self.share_files { 1 } else { u64::from(self.numjobs) };
        self.size.bytes().saturating_mul(copies)
    }

    /// Identifies the set of files the case uses: cases with equal keys reuse the same files.
    pub fn dataset_key(&self) -> String {
        let sharing = if self.share_files { "shared" } else { "per-job" };
        format!("size={} nrfiles={} {sharing}", self.size.bytes(), self.nrfiles)
    }

    /// The fio job name: the case id with characters fio and file systems dislike replaced.
    pub fn job_name(&self) -> String {
        self.id.trim_start_matches("fio/").replace('/', "-")
    }
}

/// Expands a sweep into its cases, in a stable order; call `validate` first.
pub fn expand(sweep: &FioSweep) -> Vec<FioCase> {
    let mut cases = Vec::new();
    for target in &sweep.target {
        for repeat_index in 1..=sweep.repeat.max(1) {
            for &size in &sweep.size {
                for &nrfiles in &sweep.nrfiles {
                    for &bs in &sweep.bs {
                        for &rw in &sweep.rw {
                            for &numjobs in &sweep.numjobs {
                                for &iodepth in &sweep.iodepth {
                                    let axes = Axes { size, nrfiles, bs, rw, numjobs, iodepth, repeat_index };
                                    cases.push(make_case(sweep, target, axes));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    cases
}

/// One point of the matrix.
struct Axes {
    size: ByteSize,
    nrfiles: u32,
    bs: ByteSize,
    rw: RwMode,
    numjobs: u32,
    iodepth: u32,
    repeat_index: u32,
}

fn make_case(sweep: &FioSweep, target: &TargetSpec, axes: Axes) -> FioCase {
    let Axes { size, nrfiles, bs, rw, numjobs, iodepth, repeat_index } = axes;
    let mut id =
        format!("fio/{}/{}/{}/bs{}/j{numjobs}/qd{iodepth}/f{nrfiles}/s{}", sweep.name, target.label(), rw.label(sweep.rwmixread), bs.label(), size.label());
    if sweep.repeat > 1 {
        id.push_str(&format!("/r{repeat_index}"));
    }
    FioCase {
        id,
        sweep_name: sweep.name.clone(),
        target: target.clone(),
        rw,
        rwmixread_percent: rw.pattern.is_mixed().then(|| rw.read_percent.unwrap_or(sweep.rwmixread)),
        bs,
        numjobs,
        iodepth,
        nrfiles,
        size,
        runtime: sweep.runtime,
        ramp_time: sweep.ramp_time,
        direct: sweep.direct,
        time_based: sweep.time_based,
        ioengine: sweep.ioengine,
        share_files: sweep.share_files,
        extra: sweep.extra.clone(),
        repeat_index,
        settle_writeback: sweep.settle_writeback,
    }
}
