//! From a parsed `JobSpec` to a validated `Plan`: defaults filled in, meanings checked, and the
//! matrix targets × workloads × sizes × threads × repeats expanded into cases with stable ids.
//!
//! Every error names the file, the line of the table at fault, the field, and the fix. This module
//! never touches a backend's data: option checks against a backend happen in the runner's preflight.

use super::spec::{line_col, JobSpec, PhaseSpec, WorkloadSpec};
use crate::backend::options::Options;
use crate::units::ByteSize;
use serde::Serialize;
use std::sync::Arc;

/// The operations a workload can issue, and the steps a file-server operation is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Store an object.
    Put,
    /// Read an object back.
    Get,
    /// Remove an object.
    Delete,
    /// Ask for an object's size.
    Head,
    /// File server: hash a file, register it in the catalog (a duplicate is only registered),
    /// then store its content (a `put` step) — E5's upload.
    Upload,
    /// File server: find a file's stored object by its name in the catalog (a `lookup` step),
    /// then read it (a `get` step).
    Download,
    /// Step of an upload: hashing the content (the client's work, as a file server does it).
    Hash,
    /// Step of an upload: the duplicate lookup and the catalog rows (and, after the content is
    /// stored, marking it stored).
    Register,
    /// Step of a download: resolving the name to the stored object.
    Lookup,
}

impl Op {
    /// The operations a job file may name, in report order.
    pub const ALL: [Op; 6] = [Op::Put, Op::Get, Op::Delete, Op::Head, Op::Upload, Op::Download];

    /// Lower-case name used in job files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::Delete => "delete",
            Op::Head => "head",
            Op::Upload => "upload",
            Op::Download => "download",
            Op::Hash => "hash",
            Op::Register => "register",
            Op::Lookup => "lookup",
        }
    }

    /// Whether this operation stores an object (`read_recent` follows these).
    pub fn writes(self) -> bool {
        matches!(self, Op::Put | Op::Upload)
    }

    /// Whether this operation reads an object (`read_recent` applies to these).
    pub fn reads(self) -> bool {
        matches!(self, Op::Get | Op::Head | Op::Download)
    }

    /// Whether this is a file-server operation (it needs a catalog).
    pub fn is_file_server(self) -> bool {
        matches!(self, Op::Upload | Op::Download)
    }

    /// Whether this operation's count and bytes go into a phase's totals: in a file-server phase
    /// only the uploads and downloads do, the others being their steps.
    pub fn counts_in_totals(self, file_server_phase: bool) -> bool {
        !file_server_phase || self.is_file_server()
    }

    /// The operation or step a report names `name`.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.into_iter().chain([Op::Hash, Op::Register, Op::Lookup]).find(|op| op.name() == name)
    }

    /// An operation a job file may name.
    fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }
}

/// Order in which keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeyOrder {
    /// Key i for the i-th operation (wrapping around).
    Sequential,
    /// Uniformly random keys.
    Uniform,
    /// Zipf-distributed keys (a few hot keys), with exponent theta.
    Zipf {
        /// Exponent in (0, 1); 0.99 is YCSB's default.
        theta: f64,
    },
}

/// Open-loop load: when operations are meant to start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    /// Operations per second, all threads together.
    pub per_s: f64,
    /// Gaps between starts: evenly spaced, or exponentially distributed (Poisson arrivals).
    pub arrivals: Arrivals,
}

/// How an open-loop schedule spaces its starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// Parses "500/s", "2.5k/s" or "1M/s" into operations per second.
fn parse_rate(text: &str) -> Result<f64, String> {
    let fix = "write the rate as operations per second, e.g. rate = \"500/s\" or \"2.5k/s\"";
    let number = text.trim().strip_suffix("/s").ok_or_else(|| format!("rate \"{text}\" has no \"/s\": {fix}"))?.trim();
    let (digits, scale) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 1e3),
        Some('M') => (&number[..number.len() - 1], 1e6),
        _ => (number, 1.0),
    };
    match digits.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale > 0.0 => Ok(v * scale),
        _ => Err(format!("rate \"{text}\" is not a positive number per second: {fix}")),
    }
}

/// How object sizes are chosen in one case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SizeSpec {
    /// Every object has this size.
    Fixed {
        /// Size in bytes.
        bytes: u64,
    },
    /// Uniform between min and max, inclusive.
    Uniform {
        /// Smallest size in bytes.
        min_bytes: u64,
        /// Largest size in bytes.
        max_bytes: u64,
    },
    /// Log-uniform between min and max, inclusive: as many small as large orders of magnitude.
    LogUniform {
        /// Smallest size in bytes.
        min_bytes: u64,
        /// Largest size in bytes.
        max_bytes: u64,
    },
}

impl SizeSpec {
    /// Largest size this spec can produce, in bytes.
    pub fn max_bytes(&self) -> u64 {
        match *self {
            SizeSpec::Fixed { bytes } => bytes,
            SizeSpec::Uniform { max_bytes, .. } | SizeSpec::LogUniform { max_bytes, .. } => max_bytes,
        }
    }

    /// Mean size in bytes (for deriving object counts).
    pub fn mean_bytes(&self) -> u64 {
        match *self {
            SizeSpec::Fixed { bytes } => bytes,
            SizeSpec::Uniform { min_bytes, max_bytes } => (min_bytes + max_bytes) / 2,
            SizeSpec::LogUniform { min_bytes, max_bytes } => {
                let (lo, hi) = ((min_bytes.max(1)) as f64, (max_bytes.max(1)) as f64);
                if hi <= lo { lo as u64 } else { ((hi - lo) / (hi / lo).ln()) as u64 }
            }
        }
    }

    /// Label for case ids and tables: "94kB" or "uniform-1KiB-1MiB".
    pub fn label(&self) -> String {
        match *self {
            SizeSpec::Fixed { bytes } => ByteSize(bytes).label(),
            SizeSpec::Uniform { min_bytes, max_bytes } => format!("uniform-{}-{}", ByteSize(min_bytes), ByteSize(max_bytes)),
            SizeSpec::LogUniform { min_bytes, max_bytes } => format!("loguniform-{}-{}", ByteSize(min_bytes), ByteSize(max_bytes)),
        }
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
        self.sequence && self.read_recent.is_some() && self.mix.first().is_some_and(|(op, _)| op.writes())
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
    /// Retries before an operation counts as failed.
    pub retries: u32,
    /// Largest tolerated failed / attempted ratio.
    pub max_error_ratio: f64,
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
}

/// Default seed, so two runs of the same job write the same bytes unless asked otherwise.
pub const DEFAULT_SEED: u64 = 42;
/// Most objects a case may have (the runner keeps 12 bytes of state per object).
pub const MAX_OBJECTS: u64 = 100_000_000;
/// Most retries of one operation a job may ask for.
pub const MAX_RETRIES: u32 = 100;
/// Most threads a case may have.
pub const MAX_THREADS: u32 = 1024;

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
            targets: Vec::new(),
            workloads: Vec::new(),
            cases: Vec::new(),
            fio: vec![sweep],
            recipe: None,
        }
    }

    /// Keeps only the named targets (from `--targets`), renumbering cases; unknown names are errors.
    pub fn retain_targets(&mut self, names: &[String]) -> Result<(), String> {
        let known: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        for name in names {
            if !known.contains(&name.as_str()) {
                let hint = crate::suggest::did_you_mean(name, &known).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
                return Err(format!("--targets: no target named \"{name}\".{hint} Targets: {}", known.join(", ")));
            }
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

struct Ctx<'a> {
    source: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at(&self, span_start: usize, what: &str, message: impl std::fmt::Display) -> String {
        let (line, _) = line_col(self.text, span_start);
        format!("{}:{line}: {what}: {message}", self.source)
    }
}

/// Validates a parsed job and expands its matrix. `source` names the file in messages.
pub fn build(job: &JobSpec, source: &str, text: &str) -> Result<Plan, String> {
    let ctx = Ctx { source, text };
    if job.version != super::spec::JOB_VERSION {
        return Err(format!("{source}: version = {} is not supported; this stowbench reads version {}", job.version, super::spec::JOB_VERSION));
    }
    let mut fio = Vec::new();
    for spanned in &job.fio {
        let sweep = spanned.get_ref();
        sweep.validate().map_err(|e| ctx.at(spanned.span().start, "fio", e))?;
        fio.push(sweep.clone());
    }
    if job.targets.is_empty() && job.workloads.is_empty() && !fio.is_empty() {
        return Ok(Plan {
            name: job.name.clone().unwrap_or_else(|| "job".into()),
            description: job.description.clone(),
            source: source.to_string(),
            seed: job.seed.unwrap_or(DEFAULT_SEED),
            work_dir: job.work_dir.clone(),
            targets: Vec::new(),
            workloads: Vec::new(),
            cases: Vec::new(),
            fio,
            recipe: None,
        });
    }
    if job.targets.is_empty() {
        return Err(format!("{source}: no [[target]] table; add one, e.g.\n[[target]]\nbackend = \"fs\""));
    }
    if job.workloads.is_empty() {
        return Err(format!("{source}: no [[workload]] table; add one with a name, sizes and phases"));
    }
    let targets = build_targets(job, &ctx)?;
    let mut workloads = Vec::new();
    let mut cases = Vec::new();
    for spanned in &job.workloads {
        let w = spanned.get_ref();
        let start = spanned.span().start;
        for (i, phase) in w.phase_tables.iter().enumerate() {
            if let Some(before) = &phase.before {
                check_before(before.get_ref()).map_err(|m| ctx.at(before.span().start, &format!("workload \"{}\", phase {}, before", w.name, i + 1), m))?;
            }
        }
        let plan = Arc::new(build_workload(w, |field, msg| ctx.at(start, &format!("workload \"{}\", {field}", w.name), msg))?);
        if workloads.iter().any(|p: &Arc<WorkloadPlan>| p.name == plan.name) {
            return Err(ctx.at(start, "workload", format!("the name \"{}\" is used twice; names must be unique", w.name)));
        }
        let sizes = sizes_of(w, |field, msg| ctx.at(start, &format!("workload \"{}\", {field}", w.name), msg))?;
        let threads = if w.threads.is_empty() { vec![1] } else { w.threads.clone() };
        for t in &threads {
            if *t == 0 || *t > MAX_THREADS {
                return Err(ctx.at(start, &format!("workload \"{}\", threads", w.name), format!("{t} is out of range; use 1 to {MAX_THREADS}")));
            }
        }
        let repeats = w.repeats.unwrap_or(1);
        if repeats == 0 || repeats > 1000 {
            return Err(ctx.at(start, &format!("workload \"{}\", repeats", w.name), format!("{repeats} is out of range; use 1 to 1000")));
        }
        for (ti, target) in targets.iter().enumerate() {
            for size in &sizes {
                let objects = objects_for(w, size, |field, msg| ctx.at(start, &format!("workload \"{}\", {field}", w.name), msg))?;
                for &threads in &threads {
                    for repeat in 1..=repeats {
                        cases.push(CasePlan {
                            id: format!("{}/{}/{}/t{threads}/r{repeat}", target.name, plan.name, size.label()),
                            index: cases.len(),
                            target: ti,
                            workload: plan.clone(),
                            workload_name: plan.name.clone(),
                            size: *size,
                            objects,
                            threads,
                            repeat,
                        });
                    }
                }
            }
        }
        workloads.push(plan);
    }
    Ok(Plan {
        name: job.name.clone().unwrap_or_else(|| "job".into()),
        description: job.description.clone(),
        source: source.to_string(),
        seed: job.seed.unwrap_or(DEFAULT_SEED),
        work_dir: job.work_dir.clone(),
        targets,
        workloads,
        cases,
        fio,
        recipe: None,
    })
}

fn build_targets(job: &JobSpec, ctx: &Ctx) -> Result<Vec<TargetPlan>, String> {
    let mut targets: Vec<TargetPlan> = Vec::new();
    for spanned in &job.targets {
        let t = spanned.get_ref();
        let start = spanned.span().start;
        crate::backend::find(&t.backend).map_err(|e| ctx.at(start, "target, backend", e))?;
        let name = t.name.clone().unwrap_or_else(|| t.backend.clone());
        if name.is_empty() || name.contains('/') {
            return Err(ctx.at(start, "target, name", format!("\"{name}\" is not a usable name; use letters, digits, - or _")));
        }
        if targets.iter().any(|p| p.name == name) {
            return Err(ctx.at(start, "target, name", format!("\"{name}\" is used twice; give each [[target]] a distinct name = \"...\"")));
        }
        let (line, _) = line_col(ctx.text, start);
        let mut table = t.options.clone();
        let retries = match table.remove("retries") {
            None => None,
            Some(toml::Value::Integer(n)) if (0..=MAX_RETRIES as i64).contains(&n) => Some(n as u32),
            Some(other) => {
                return Err(ctx.at(start, &format!("target \"{name}\", retries"), format!("{other} is not a retry count; use a whole number from 0 to {MAX_RETRIES}")))
            }
        };
        let mut options = Options::new(&name, &format!("{}:{line}", ctx.source), table);
        options.key_origins = key_positions(ctx, spanned.span(), t.options.keys());
        targets.push(TargetPlan { options_json: options.redacted_json(), name, backend: t.backend.clone(), options, retries });
    }
    Ok(targets)
}

/// Where each of `keys` is written inside the table at `span`: "file:line:column".
fn key_positions<'k>(ctx: &Ctx, span: std::ops::Range<usize>, keys: impl Iterator<Item = &'k String>) -> std::collections::BTreeMap<String, String> {
    // The span of an array-of-tables entry may cover only its header: search from the header to
    // the next table header instead.
    let start = span.start.min(ctx.text.len());
    let rest = &ctx.text[start..];
    let header_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
    let body_end = rest[header_end..].find("\n[").map_or(rest.len(), |i| header_end + i + 1);
    let table = &rest[..body_end.max(span.end.saturating_sub(start).min(rest.len()))];
    let mut positions = std::collections::BTreeMap::new();
    for key in keys {
        let mut offset = 0;
        for line in table.split_inclusive('\n') {
            let trimmed = line.trim_start();
            let written = trimmed.strip_prefix(key.as_str()).is_some_and(|rest| rest.trim_start().starts_with('='));
            if written {
                let (l, c) = line_col(ctx.text, span.start + offset + (line.len() - trimmed.len()));
                positions.insert(key.clone(), format!("{}:{l}:{c}", ctx.source));
                break;
            }
            offset += line.len();
        }
    }
    positions
}

fn parse_key_order(name: &str, theta: f64) -> Result<KeyOrder, String> {
    match name {
        "sequential" => Ok(KeyOrder::Sequential),
        "uniform" => Ok(KeyOrder::Uniform),
        "zipf" => Ok(KeyOrder::Zipf { theta }),
        other => {
            let hint = crate::suggest::did_you_mean(other, &["sequential", "uniform", "zipf"]).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
            Err(format!("\"{other}\" is not a key order; use sequential, uniform or zipf.{hint}"))
        }
    }
}

fn build_workload(w: &WorkloadSpec, err: impl Fn(&str, String) -> String) -> Result<WorkloadPlan, String> {
    if w.name.is_empty() || w.name.contains('/') {
        return Err(err("name", format!("\"{}\" is not a usable name; use letters, digits, - or _", w.name)));
    }
    let theta = w.zipf_theta.unwrap_or(0.99);
    if !(theta > 0.0 && theta < 1.0) {
        return Err(err("zipf_theta", format!("{theta} is out of range; use a value between 0 and 1 exclusive, e.g. 0.99")));
    }
    let default_order = parse_key_order(w.key_order.as_deref().unwrap_or("sequential"), theta).map_err(|m| err("key_order", m))?;
    let phases = match (w.phases.is_empty(), w.phase_tables.is_empty()) {
        (false, false) => return Err(err("phases", "use either phases = [...] or [[workload.phase]] tables, not both".into())),
        (true, true) => return Err(err("phases", "no phases; add e.g. phases = [\"put\", \"get\"]".into())),
        (false, true) => w.phases.iter().map(|name| simple_phase(name, default_order)).collect::<Result<Vec<_>, _>>(),
        (true, false) => w.phase_tables.iter().map(|p| table_phase(p, default_order, theta)).collect(),
    }
    .map_err(|m| err("phases", m))?;
    let compressibility = w.compressibility.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&compressibility) {
        return Err(err("compressibility", format!("{compressibility} is out of range; use 0 (random) to 1 (all zeros)")));
    }
    let cold_cache = match w.cache.as_deref().unwrap_or("warm") {
        "warm" => false,
        "cold" => true,
        other => return Err(err("cache", format!("\"{other}\" is not a cache state; use \"warm\" or \"cold\""))),
    };
    let max_error_ratio = w.max_error_ratio.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&max_error_ratio) {
        return Err(err("max_error_ratio", format!("{max_error_ratio} is out of range; use 0 to 1")));
    }
    let first_is_put =
        phases.first().map(|p| p.mix.iter().all(|(op, _)| *op == Op::Put) || p.reads_only_its_own_puts()).unwrap_or(true);
    let file_server = file_server_rules(w, &phases).map_err(|(field, m)| err(field, m))?;
    Ok(WorkloadPlan {
        name: w.name.clone(),
        phases,
        verify: w.verify.unwrap_or(true),
        compressibility,
        cold_cache,
        retries: match w.retries.unwrap_or(0) {
            n if n > MAX_RETRIES => return Err(err("retries", format!("{n} is too many; use 0 to {MAX_RETRIES}"))),
            n => n,
        },
        max_error_ratio,
        preload: w.preload.unwrap_or(!first_is_put && !file_server),
        file_server,
        duplicates: file_server.then(|| w.duplicates.unwrap_or(0.0)),
    })
}

/// Checks how a workload uses the file-server operations; returns whether it is a file-server
/// workload. Uploads and downloads keep their own catalog of names, so they cannot share a
/// workload with plain puts and gets of the same keys, and a download needs an upload before it.
fn file_server_rules(w: &WorkloadSpec, phases: &[PhasePlan]) -> Result<bool, (&'static str, String)> {
    let uses = |pred: fn(Op) -> bool| phases.iter().any(|p| p.mix.iter().any(|(op, _)| pred(*op)));
    let file_server = uses(Op::is_file_server);
    if !file_server {
        if w.duplicates.is_some() {
            return Err(("duplicates", "applies to upload phases only; add phases = [\"upload\", \"download\"] or remove it".into()));
        }
        return Ok(false);
    }
    if uses(|op| !op.is_file_server()) {
        return Err((
            "phases",
            "upload and download keep a catalog of file names and cannot be mixed with put, get, delete or head in one workload; \
             use two workloads"
                .into(),
        ));
    }
    let first_upload = phases.iter().position(|p| p.mix.iter().any(|(op, _)| *op == Op::Upload));
    let first_download = phases.iter().position(|p| p.mix.iter().any(|(op, _)| *op == Op::Download));
    if let Some(d) = first_download {
        if first_upload.is_none_or(|u| u > d) {
            return Err(("phases", "a download reads files an upload registered: put an upload phase first, e.g. phases = [\"upload\", \"download\"]".into()));
        }
    }
    if w.preload == Some(true) {
        return Err(("preload", "file-server workloads fill their store with an upload phase; remove preload = true".into()));
    }
    if let Some(d) = w.duplicates {
        if !(0.0..1.0).contains(&d) {
            return Err(("duplicates", format!("{d} is out of range; use 0 (every file new) up to, not including, 1")));
        }
    }
    Ok(true)
}

/// Checks a phase's `before` command: present, and a program that can be found now (a typo
/// should fail `stowbench validate`, not the first case after minutes of loading).
fn check_before(command: &[String]) -> Result<(), String> {
    let example = "e.g. before = [\"./corrupt.sh\", \"--flip\"]";
    let Some(program) = command.first().filter(|p| !p.trim().is_empty()) else {
        return Err(format!("the command is empty; give the program and its arguments, {example}, or remove before"));
    };
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    };
    if !found {
        let where_ = if program.contains('/') { "relative to the directory stowbench runs in" } else { "in PATH" };
        return Err(format!("program \"{program}\" was not found ({where_}); give its path, {example}"));
    }
    Ok(())
}

fn simple_phase(name: &str, key_order: KeyOrder) -> Result<PhasePlan, String> {
    let op = Op::parse(name).ok_or_else(|| {
        let names = Op::ALL.map(Op::name);
        let hint = crate::suggest::did_you_mean(name, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("\"{name}\" is not an operation; use put, get, delete, head, upload or download.{hint}")
    })?;
    Ok(PhasePlan::single(op, key_order))
}

fn table_phase(p: &PhaseSpec, default_order: KeyOrder, theta: f64) -> Result<PhasePlan, String> {
    let sequence = !p.sequence.is_empty();
    let mut mix = Vec::new();
    match (p.mix.is_empty(), sequence) {
        (false, true) => return Err("use either mix = {...} or sequence = [...] in a phase, not both".into()),
        (true, false) => {
            return Err("a phase needs mix = { get = 90, put = 10 } (drawn at random) or sequence = [\"put\", \"get\"] (in order)".into())
        }
        (false, false) => {
            for (name, weight) in &p.mix {
                let op = simple_phase(name, default_order)?.mix[0].0;
                if *weight > 0 {
                    mix.push((op, *weight));
                }
            }
            if mix.is_empty() {
                return Err("a phase's mix has no operation with a weight above 0; e.g. mix = { get = 90, put = 10 }".into());
            }
        }
        (true, true) => {
            for name in &p.sequence {
                mix.push((simple_phase(name, default_order)?.mix[0].0, 1));
            }
        }
    }
    match p.read_recent {
        Some(0) => return Err("read_recent counts from 1 (the newest put); e.g. read_recent = 5 reads the 5th newest".into()),
        Some(_) if !mix.iter().any(|(op, _)| op.writes()) || !mix.iter().any(|(op, _)| op.reads()) => {
            return Err("read_recent makes gets, heads and downloads read what this phase put or uploaded: \
                        the phase needs a put and a get or head (or an upload and a download)"
                .into())
        }
        _ => {}
    }
    let key_order = match &p.key_order {
        Some(name) => parse_key_order(name, theta)?,
        None => default_order,
    };
    let label = if sequence {
        let names: Vec<&str> = mix.iter().map(|(op, _)| op.name()).collect();
        format!("sequence {}", names.join("-"))
    } else if mix.len() == 1 {
        mix[0].0.name().to_string()
    } else {
        let parts: Vec<String> = mix.iter().map(|(op, w)| format!("{}{w}", op.name())).collect();
        format!("mix {}", parts.join(" "))
    };
    let stop = Stop { count: p.count, duration_ns: p.duration.map(|d| d.0), bytes: p.bytes.map(|b| b.0) };
    if stop.count == Some(0) || stop.duration_ns == Some(0) || stop.bytes == Some(0) {
        return Err("a stop condition of 0 would measure nothing; remove it or give a positive value".into());
    }
    let warmup = match (p.warmup_count, p.warmup) {
        (None, None) => None,
        (count, duration) => Some(Stop { count, duration_ns: duration.map(|d| d.0), bytes: None }),
    };
    let even_split = match p.split.as_deref() {
        None | Some("shared") => false,
        Some("even") if stop.duration_ns.is_some() || stop.bytes.is_some() => {
            return Err("split = \"even\" gives every thread count ÷ threads operations, so it needs a count stop, not duration or bytes; \
                        remove duration/bytes (the default count is one pass over the objects) or use split = \"shared\""
                .into())
        }
        Some("even") => true,
        Some(other) => return Err(format!("split = \"{other}\" is not known; use \"shared\" (one counter, the default) or \"even\" (count ÷ threads each)")),
    };
    let rate = match (&p.rate, p.arrivals.as_deref()) {
        (None, None) => None,
        (None, Some(_)) => return Err("arrivals needs a rate, e.g. rate = \"500/s\" with arrivals = \"poisson\"".into()),
        (Some(_), _) if sequence => {
            return Err("rate schedules single operations; a sequence phase runs its operations back to back (closed-loop): remove rate, or use mix".into())
        }
        (Some(text), arrivals) => {
            let arrivals = match arrivals.unwrap_or("uniform") {
                "uniform" => Arrivals::Uniform,
                "poisson" => Arrivals::Poisson,
                other => return Err(format!("arrivals = \"{other}\" is not known; use \"uniform\" (evenly spaced) or \"poisson\" (random gaps)")),
            };
            Some(Rate { per_s: parse_rate(text)?, arrivals })
        }
    };
    // An open-loop phase is another measurement than a closed-loop one of the same operations:
    // its label says so, so reports never put the two in one row.
    let label = match (&p.rate, rate) {
        (Some(text), Some(Rate { arrivals: Arrivals::Poisson, .. })) => format!("{label} @ {} poisson", text.trim()),
        (Some(text), Some(_)) => format!("{label} @ {}", text.trim()),
        _ => label,
    };
    let before = p.before.as_ref().map(|b| b.get_ref().clone()).unwrap_or_default();
    Ok(PhasePlan { label, mix, stop, key_order, warmup, sequence, read_recent: p.read_recent, even_split, rate, before })
}

fn sizes_of(w: &WorkloadSpec, err: impl Fn(&str, String) -> String) -> Result<Vec<SizeSpec>, String> {
    match (&w.size_dist, w.sizes.is_empty()) {
        (Some(_), false) => Err(err("sizes", "use either sizes = [...] or size_dist = {...}, not both".into())),
        (None, true) => Err(err("sizes", "no sizes; add e.g. sizes = [\"4KiB\", \"1MiB\"]".into())),
        (None, false) => Ok(w.sizes.iter().map(|s| SizeSpec::Fixed { bytes: s.0 }).collect()),
        (Some(d), true) => {
            if d.min > d.max {
                return Err(err("size_dist", format!("min {} is larger than max {}", d.min, d.max)));
            }
            match d.kind.as_str() {
                "uniform" => Ok(vec![SizeSpec::Uniform { min_bytes: d.min.0, max_bytes: d.max.0 }]),
                "log-uniform" => Ok(vec![SizeSpec::LogUniform { min_bytes: d.min.0, max_bytes: d.max.0 }]),
                other => Err(err("size_dist.kind", format!("\"{other}\" is not a distribution; use \"uniform\" or \"log-uniform\""))),
            }
        }
    }
}

fn objects_for(w: &WorkloadSpec, size: &SizeSpec, err: impl Fn(&str, String) -> String) -> Result<u64, String> {
    let objects = match (w.objects, w.dataset) {
        (Some(_), Some(_)) => return Err(err("objects", "use either objects or dataset, not both".into())),
        (Some(n), None) => n,
        (None, Some(dataset)) => {
            let lo = w.min_objects.unwrap_or(16);
            let hi = w.max_objects.unwrap_or(100_000);
            if lo > hi {
                return Err(err("min_objects", format!("min_objects {lo} is above max_objects {hi}")));
            }
            (dataset.0 / size.mean_bytes().max(1)).clamp(lo, hi)
        }
        (None, None) => return Err(err("objects", "say how many objects: objects = 1000, or dataset = \"64MiB\"".into())),
    };
    if objects == 0 || objects > MAX_OBJECTS {
        return Err(err("objects", format!("{objects} is out of range; use 1 to {MAX_OBJECTS}")));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, String> {
        let job = super::super::spec::parse(text).map_err(|e| e.message)?;
        build(&job, "job.toml", text)
    }

    const BASE: &str = "version = 1\n[[target]]\nbackend = \"sim\"\n[[target]]\nname = \"fs2\"\nbackend = \"fs\"\n";

    #[test]
    fn matrix_expands_with_stable_ids() {
        let p = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"2.6MB\"]\nthreads = [1, 4]\nrepeats = 2\nobjects = 10\nphases = [\"put\", \"get\"]\n")).unwrap();
        assert_eq!(p.cases.len(), 2 * 2 * 2 * 2);
        assert_eq!(p.cases[0].id, "sim/w/4KiB/t1/r1");
        assert_eq!(p.cases[15].id, "fs2/w/2.6MB/t4/r2");
        assert!(!p.workloads[0].preload);
    }

    #[test]
    fn dataset_derives_clamped_object_counts() {
        let p = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"16MiB\"]\ndataset = \"64MiB\"\nmax_objects = 1000\nphases = [\"get\"]\n")).unwrap();
        assert_eq!(p.cases[0].objects, 1000);
        assert_eq!(p.cases[1].objects, 16);
        assert!(p.workloads[0].preload, "a get-first workload preloads");
    }

    #[test]
    fn errors_name_the_line_field_and_fix() {
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"pub\"]\n")).unwrap_err();
        assert!(err.starts_with("job.toml:7: workload \"w\", phases"), "{err}");
        assert!(err.contains("Did you mean \"put\""), "{err}");
        let err = plan("version = 1\n[[target]]\nbackend = \"sqlit\"\n[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 1\nphases = [\"put\"]\n").unwrap_err();
        assert!(err.contains("job.toml:2") && err.contains("Did you mean \"sqlite\""), "{err}");
    }

    #[test]
    fn mixes_and_stops() {
        let p = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nmix = {{ get = 90, put = 10 }}\nduration = \"2s\"\nkey_order = \"zipf\"\n")).unwrap();
        let phase = &p.workloads[0].phases[0];
        assert_eq!(phase.label, "mix get90 put10");
        assert_eq!(phase.stop.duration_ns, Some(2_000_000_000));
        assert!(matches!(phase.key_order, KeyOrder::Zipf { .. }));
    }

    #[test]
    fn an_even_split_needs_a_count() {
        let phase = |extra: &str| plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\nthreads = [2]\n[[workload.phase]]\nmix = {{ put = 1 }}\n{extra}"));
        assert!(phase("split = \"even\"\n").unwrap().workloads[0].phases[0].even_split);
        assert!(!phase("split = \"shared\"\n").unwrap().workloads[0].phases[0].even_split);
        let err = phase("split = \"even\"\nduration = \"1s\"\n").unwrap_err();
        assert!(err.contains("phases") && err.contains("needs a count stop"), "{err}");
        let err = phase("split = \"halves\"\n").unwrap_err();
        assert!(err.contains("\"halves\" is not known") && err.contains("\"even\""), "{err}");
    }

    #[test]
    fn a_rate_makes_an_open_loop_phase() {
        let phase = |extra: &str| plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nmix = {{ get = 1 }}\n{extra}"));
        let rate = |extra: &str| phase(extra).unwrap().workloads[0].phases[0].rate;
        assert_eq!(rate("rate = \"500/s\"\n"), Some(Rate { per_s: 500.0, arrivals: Arrivals::Uniform }));
        assert_eq!(rate("rate = \"2.5k/s\"\narrivals = \"poisson\"\n"), Some(Rate { per_s: 2500.0, arrivals: Arrivals::Poisson }));
        assert_eq!(rate(""), None);
        assert_eq!(phase("rate = \"2.5k/s\"\narrivals = \"poisson\"\n").unwrap().workloads[0].phases[0].label, "get @ 2.5k/s poisson");
        for (bad, says) in [
            ("rate = \"500\"\n", "has no \"/s\""),
            ("rate = \"0/s\"\n", "not a positive number"),
            ("rate = \"fast/s\"\n", "not a positive number"),
            ("rate = \"5/s\"\narrivals = \"bursty\"\n", "\"bursty\" is not known"),
            ("arrivals = \"poisson\"\n", "arrivals needs a rate"),
        ] {
            let err = phase(bad).unwrap_err();
            assert!(err.contains("phases") && err.contains(says), "{bad}: {err}");
        }
        let seq = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nsequence = [\"put\", \"get\"]\nrate = \"5/s\"\n")).unwrap_err();
        assert!(seq.contains("sequence phase runs its operations back to back"), "{seq}");
    }

    #[test]
    fn sequences_and_read_recent() {
        let e1 = "[[workload]]\nname = \"e1\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nsequence = [\"put\", \"get\"]\nread_recent = 5\ncount = 5\n";
        let p = plan(&format!("{BASE}{e1}")).unwrap();
        let (workload, phase) = (&p.workloads[0], &p.workloads[0].phases[0]);
        assert_eq!(phase.label, "sequence put-get");
        assert!(phase.sequence);
        assert_eq!(phase.read_recent, Some(5));
        assert!(!workload.preload, "a sequence that reads only its own puts needs no preload");
        let bad = |phase: &str| plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\n{phase}")).unwrap_err();
        assert!(bad("sequence = [\"put\"]\nmix = { get = 1 }\n").contains("not both"));
        assert!(bad("count = 3\n").contains("or sequence ="));
        assert!(bad("sequence = [\"get\"]\nread_recent = 2\n").contains("needs a put"));
        assert!(bad("sequence = [\"put\", \"get\"]\nread_recent = 0\n").contains("counts from 1"));
        assert!(bad("sequence = [\"put\", \"gte\"]\n").contains("Did you mean"));
    }

    #[test]
    fn file_server_workloads_are_checked() {
        let workload = |extra: &str| format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n{extra}");
        let p = plan(&workload("phases = [\"upload\", \"download\"]\nduplicates = 0.5\n")).unwrap();
        let w = &p.workloads[0];
        assert!(w.file_server && !w.preload, "uploads fill the store: no preload");
        assert_eq!(w.duplicates, Some(0.5));
        let bad = |extra: &str| plan(&workload(extra)).unwrap_err();
        assert!(bad("phases = [\"upload\", \"get\"]\n").contains("cannot be mixed"));
        assert!(bad("phases = [\"download\", \"upload\"]\n").contains("upload phase first"));
        assert!(bad("phases = [\"upload\"]\nduplicates = 1.0\n").contains("out of range"));
        assert!(bad("phases = [\"put\"]\nduplicates = 0.1\n").contains("upload phases only"));
        assert!(bad("phases = [\"upload\"]\npreload = true\n").contains("preload"));
        assert!(bad("phases = [\"uplod\"]\n").contains("Did you mean \"upload\""));
    }
}
