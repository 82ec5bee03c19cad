//! The validated `Plan` a job file becomes: operations, phases, sizes, targets and the cases of the
//! matrix targets × workloads × sizes × threads × repeats, with stable ids, and the limits a job
//! must keep. `check.rs` builds it from a parsed `JobSpec`. This module never touches a backend's
//! data: option checks against a backend happen when the backend is constructed.

use crate::backend::options::Options;
use crate::workload::keys::KeyOrder;
use crate::workload::op::Op;
use crate::workload::size::SizeSpec;
use serde::Serialize;
use std::sync::Arc;

/// Open-loop load: when operations are meant to start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    /// Operations per second, all threads together.
    pub per_s: f64,
    /// Gaps between starts: evenly spaced, or exponentially distributed (Poisson arrivals).
    pub arrivals: Arrivals,
}

/// How an open-loop schedule spaces its starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Every 1/rate seconds.
    Uniform,
    /// Exponential gaps with mean 1/rate: independent clients.
    Poisson,
}

impl Arrivals {
    /// The name used in job files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Uniform => "uniform",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// Slowest open-loop rate: one start every 1000 s. Slower schedules would wait past any run.
pub const MIN_RATE_PER_S: f64 = 0.001;
/// Fastest open-loop rate: one start per nanosecond, the schedule's resolution.
pub const MAX_RATE_PER_S: f64 = 1e9;

/// Parses "500/s", "2.5k/s" or "1M/s" into operations per second, from `MIN_RATE_PER_S` to
/// `MAX_RATE_PER_S`.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let fix = "write the rate as operations per second, e.g. rate = \"500/s\" or \"2.5k/s\"";
    let number = text.trim().strip_suffix("/s").ok_or_else(|| format!("rate \"{text}\" has no \"/s\": {fix}"))?.trim();
    let (digits, scale) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 1e3),
        Some('M') => (&number[..number.len() - 1], 1e6),
        _ => (number, 1.0),
    };
    match digits.parse::<f64>().map(|v| v * scale) {
        // The product, not the digits, is checked: "1e308k/s" overflows to infinity only after scaling.
        Ok(v) if (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&v) => Ok(v),
        Ok(v) if v.is_finite() && v > 0.0 => Err(format!("rate \"{text}\" is out of range; use {MIN_RATE_PER_S}/s to {}/s", MAX_RATE_PER_S as u64)),
        _ => Err(format!("rate \"{text}\" is not a positive number per second: {fix}")),
    }
}

/// When a phase stops: whichever limit comes first.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Stop {
    /// After this many operations, all threads together.
    pub count: Option<u64>,
    /// After this many nanoseconds.
    pub duration_ns: Option<u64>,
    /// After this many bytes moved.
    pub bytes: Option<u64>,
    /// Not before this many nanoseconds: a count or bytes stop reached sooner waits for it, the
    /// phase going over its keys again meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_duration_ns: Option<u64>,
}

/// One validated phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhasePlan {
    /// Label in reports: "put", "get" or "mix get90 put10".
    pub label: String,
    /// Operations with their weights.
    pub mix: Vec<(Op, u32)>,
    /// When the measurement stops.
    pub stop: Stop,
    /// Key order.
    pub key_order: KeyOrder,
    /// Untimed operations first, if any.
    pub warmup: Option<Stop>,
    /// The operations of `mix` run in order, each once per iteration (weights are 1), instead of
    /// being drawn at random; `stop.count` counts iterations.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sequence: bool,
    /// Gets and heads read the key of the worker's N-th most recent put in this phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_recent: Option<u64>,
    /// Each worker does an equal share of `stop.count` (worker w does operations w, w + threads,
    /// …) instead of taking operations from a shared counter.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub even_split: bool,
    /// Open-loop: operations start on this schedule, and latency is also measured from each
    /// operation's intended start. None: closed-loop (each thread starts its next operation as
    /// soon as one ends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// A command and its arguments run before the phase (`runner::hook`); empty: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
}

impl PhasePlan {
    /// A phase of one operation on keys in `key_order`, stopped by the workload's defaults.
    pub fn single(op: Op, key_order: KeyOrder) -> PhasePlan {
        PhasePlan {
            label: op.name().into(),
            mix: vec![(op, 1)],
            stop: Stop::default(),
            key_order,
            warmup: None,
            sequence: false,
            read_recent: None,
            even_split: false,
            rate: None,
            before: Vec::new(),
        }
    }

    /// Whether every read of this phase reads a key the phase itself put before (a sequence that
    /// starts with a put and reads only recent puts): such a phase needs no preload.
    pub fn reads_only_its_own_puts(&self) -> bool {
        self.sequence
            && self.read_recent.is_some()
            && self.mix.first().is_some_and(|(op, _)| op.writes())
            && self.mix.iter().all(|(op, _)| op.writes() || op.reads())
    }
}

/// One validated workload (shared by its cases).
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadPlan {
    /// Name from the job file.
    pub name: String,
    /// Phases in order.
    pub phases: Vec<PhasePlan>,
    /// Check every get against what was put.
    pub verify: bool,
    /// Fraction of each 4 KiB payload block that is zeros.
    pub compressibility: f64,
    /// Drop the page cache before read phases.
    pub cold_cache: bool,
    /// Write back dirty pages before each phase, untimed.
    pub settle_writeback: bool,
    /// Retries before an operation counts as failed.
    pub retries: u32,
    /// Largest tolerated failed / attempted ratio.
    pub max_error_ratio: f64,
    /// A worker stops after failing without a single success for this long (0: never).
    pub give_up_after_ns: u64,
    /// An operation (with its retries) still running after this long fails as a timeout (0: never).
    pub op_timeout_ns: u64,
    /// Where `op_timeout` is written ("job.toml:12:1"), so a backend that cannot honour it is
    /// refused at that line; None when it is not given.
    #[serde(skip)]
    pub op_timeout_at: Option<String>,
    /// Put every object before the first phase, untimed.
    pub preload: bool,
    /// Whether the phases are file-server operations (upload, download), which need a catalog.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub file_server: bool,
    /// File server: the fraction of uploads whose content repeats an earlier upload of the same
    /// worker (they are registered, not stored again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<f64>,
}

/// One validated target.
#[derive(Debug, Clone, Serialize)]
pub struct TargetPlan {
    /// Name in reports.
    pub name: String,
    /// Registry name of the backend.
    pub backend: String,
    /// Options for the backend (checked in preflight).
    #[serde(skip)]
    pub options: Options,
    /// The options as given, secrets redacted, for the report.
    pub options_json: serde_json::Value,
    /// Retries of a failed operation on this target, overriding the workload's `retries`
    /// (target key `retries`, read by the runner, not the backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct CasePlan {
    /// Stable id: target/workload/size/tN/rN.
    pub id: String,
    /// Position in the plan, from 0.
    pub index: usize,
    /// Index into `Plan::targets`.
    pub target: usize,
    /// The workload.
    #[serde(skip)]
    pub workload: Arc<WorkloadPlan>,
    /// Workload name, for the report.
    pub workload_name: String,
    /// Object sizes.
    pub size: SizeSpec,
    /// Distinct keys.
    pub objects: u64,
    /// Worker threads.
    pub threads: u32,
    /// Repeat number, from 1.
    pub repeat: u32,
}

/// A validated, expanded job.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// Run name.
    pub name: String,
    /// What the run is for.
    pub description: Option<String>,
    /// Where the job came from (a path or "built-in: quick").
    pub source: String,
    /// Seed for keys, sizes and payloads.
    pub seed: u64,
    /// Where backends store data, if not a fresh temporary directory.
    pub work_dir: Option<String>,
    /// Where the job file sets `work_dir` ("SOURCE:LINE:COL"), for the message when it does not
    /// exist on this host (only the run can tell: a multi-host rank's `{rank}` path is its own).
    #[serde(skip)]
    pub work_dir_at: Option<String>,
    /// Targets in job order.
    pub targets: Vec<TargetPlan>,
    /// Workloads in job order.
    pub workloads: Vec<Arc<WorkloadPlan>>,
    /// Every case, in run order.
    pub cases: Vec<CasePlan>,
    /// fio sweeps, run after the object cases.
    pub fio: Vec<crate::fio::FioSweep>,
    /// Set for a built-in recipe: its name, scale and skipped targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe: Option<crate::report::model::RecipeRun>,
    /// How the ranks of a multi-host run share each case's keys (`[mpi] keys`); absent from
    /// the report's plan when partitioned, the default, so single-host reports are unchanged.
    #[serde(skip_serializing_if = "KeySharing::is_partitioned")]
    pub mpi_keys: KeySharing,
}

/// How the ranks of a multi-host run share a case's keys (docs/multi-host.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeySharing {
    /// Every rank writes and reads its own keys in a namespace of its own.
    #[default]
    Partitioned,
    /// One namespace and key space: each key is written by one rank, and read by every rank.
    Shared,
}

impl KeySharing {
    /// Whether the keys are partitioned (the default).
    pub fn is_partitioned(&self) -> bool {
        *self == KeySharing::Partitioned
    }
}

/// Default seed, so two runs of the same job write the same bytes unless asked otherwise.
pub const DEFAULT_SEED: u64 = 42;
/// Most objects a case may have (the runner keeps 12 bytes of state per object).
pub const MAX_OBJECTS: u64 = 100_000_000;
/// Most retries of one operation a job may ask for.
pub const MAX_RETRIES: u32 = 100;
/// Most threads a case may have.
pub const MAX_THREADS: u32 = 1024;
/// Most cases a job may expand to: a plan keeps every case in memory, and a bigger matrix is a
/// slip (a long list multiplied by repeats), not a run anyone waits for.
pub const MAX_CASES: u64 = 100_000;

impl Plan {
    /// A plan of one fio sweep and nothing else (`stowbench fio`), so fio runs through the same
    /// runner and report as a job file.
    pub fn fio_only(sweep: crate::fio::FioSweep, source: &str) -> Plan {
        Plan {
            name: sweep.name.clone(),
            description: None,
            source: source.to_string(),
            seed: DEFAULT_SEED,
            work_dir: None,
            work_dir_at: None,
            targets: Vec::new(),
            workloads: Vec::new(),
            cases: Vec::new(),
            fio: vec![sweep],
            recipe: None,
            mpi_keys: KeySharing::Partitioned,
        }
    }

    /// Keeps only the named targets (from `--targets`), renumbering cases; unknown names are errors.
    pub fn retain_targets(&mut self, names: &[String]) -> Result<(), String> {
        let known: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        // "fs, sqlite" as a shell user types it: the spaces are not part of the names.
        let names: Vec<String> = names.iter().map(|n| n.trim().to_string()).collect();
        if names.iter().any(String::is_empty) {
            return Err(format!("--targets: an empty name; give target names separated by commas, e.g. --targets {}", known.join(",")));
        }
        // A recipe's targets left out for want of a server are names too: asked for, each says
        // why it cannot run; and a name of neither kind is suggested among them all.
        let skipped: &[crate::report::model::SkippedTarget] = self.recipe.as_ref().map_or(&[], |r| &r.skipped_targets);
        for name in &names {
            if known.contains(&name.as_str()) {
                continue;
            }
            if let Some(s) = skipped.iter().find(|s| s.target == *name) {
                // A server that is not configured is the job's (or its variables') to fix, as in a run.
                return Err(format!("--targets: target \"{}\" cannot run: {}; to run it: {}", s.target, s.reason, s.enable));
            }
            let every: Vec<&str> = known.iter().copied().chain(skipped.iter().map(|s| s.target.as_str())).collect();
            let hint = crate::suggest::did_you_mean(name, &every).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
            return Err(match &self.recipe {
                Some(recipe) if !skipped.is_empty() => format!(
                    "--targets: recipe {} has no target named \"{name}\".{hint} Its targets: {}; without their servers: {}",
                    recipe.name,
                    known.join(", "),
                    skipped.iter().map(|s| s.target.as_str()).collect::<Vec<_>>().join(", ")
                ),
                _ => format!("--targets: no target named \"{name}\".{hint} Targets: {}", known.join(", ")),
            });
        }
        // The targets left out now were left out by the user, whatever their servers.
        if let Some(recipe) = self.recipe.as_mut() {
            recipe.skipped_targets.clear();
        }
        let keep: Vec<usize> = (0..self.targets.len()).filter(|i| names.contains(&self.targets[*i].name)).collect();
        self.targets = keep.iter().map(|i| self.targets[*i].clone()).collect();
        self.cases.retain(|c| keep.contains(&c.target));
        for (index, case) in self.cases.iter_mut().enumerate() {
            case.index = index;
            case.target = keep.iter().position(|k| *k == case.target).expect("kept");
        }
        Ok(())
    }
}
