//! `stowbench compare`: how other runs differ from a baseline run, figure by figure, and whether
//! each difference stands out from the spread of the repeats.
//!
//! `compare` builds a `Comparison` — plain, serializable data — from reports already read; the
//! renderers (`render`: table, CSV, HTML) are pure functions of it, chosen from the one registry
//! (`report::reporters`). Cases are paired by `matching`, figures read by `metrics`, and every
//! difference is judged by Welch's t-test on the repeats (`welch`).
//!
//! The CI gate (`--fail-if-slower PCT`) fails when a throughput figure is slower than the
//! baseline by more than PCT percent and the difference is significant. With fewer than two
//! repeats on a side no test can tell noise from change; a gate must still decide, so such a
//! figure is judged on its single values alone (like criterion's noise threshold without its
//! test): slower by more than PCT fails. Tables say which figures were judged that way.

pub mod matching;
pub mod metrics;
pub mod render;
pub mod welch;

use super::model::{Environment, RunReport};
use crate::report::table::Measure;
pub use matching::MatchedBy;
use matching::Pair;
use metrics::Metric;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use welch::Welch;

/// Confidence level of the significance test: a difference is significant when p < 1 − this.
pub const CONFIDENCE: f64 = 0.95;

/// The version of `compare --format json`'s shape, raised when a field changes meaning or goes.
pub const COMPARISON_SCHEMA_VERSION: u32 = 1;

/// The outcome of comparing runs with a baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The shape of this JSON (`schema/compare.schema.json`): `COMPARISON_SCHEMA_VERSION`.
    #[serde(default)]
    pub schema_version: u32,
    /// The run the others are compared with (the first file).
    pub baseline: RunRef,
    /// The other runs, in the order given; rows name them by position (from 1).
    pub candidates: Vec<RunRef>,
    /// Confidence level of the significance test (0.95: significant when p < 0.05).
    pub confidence: f64,
    /// One row per paired case × phase × operation × metric, candidate by candidate.
    pub rows: Vec<MetricRow>,
    /// Cases that were not paired, with the reason.
    pub unmatched: Vec<Unmatched>,
    /// The regression gate, when `--fail-if-slower` asked for one.
    pub gate: Option<Gate>,
    /// Phases the two jobs define differently (another stop, mix, key order or `before`
    /// command): their figures, compared under one label, measure other work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan_differences: Vec<PlanDifference>,
    /// Settings of the run, a workload or a target that the two jobs give differently (a
    /// target's `fsync`, a workload's `verify`): the figures of every case under them measure
    /// other work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setting_differences: Vec<SettingDifference>,
    /// Facts of the machine and software behind the two runs that differ (another kernel, CPU,
    /// memory, filesystem, SQLite, clock): every figure then compares the environments as well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_differences: Vec<EnvironmentDifference>,
}

/// A phase that one label names in both runs but whose definition differs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanDifference {
    /// Which candidate (from 1).
    pub candidate: usize,
    /// The workload.
    pub workload: String,
    /// The phase's label.
    pub phase: String,
    /// The field of the phase's plan that differs ("stop", "mix", "key_order", ...).
    pub field: String,
    /// Its value in the baseline's plan, as compact JSON ("null" when absent).
    pub baseline: String,
    /// Its value in the candidate's plan.
    pub candidate_value: String,
}

/// A setting outside the phases — the run's, a workload's, a target's — that the two plans give
/// differently: every case under it measured other work (another durability, compressibility,
/// cache state, data directory) though its id is the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingDifference {
    /// Which candidate (from 1).
    pub candidate: usize,
    /// Where the setting lives: `run`, `workload` or `target`.
    pub scope: String,
    /// The workload's or target's name; empty for the run.
    pub name: String,
    /// The setting, as the job file spells it (`verify`, `compressibility`, a target's `fsync`,
    /// `backend`, `work_dir`).
    pub field: String,
    /// Its value in the baseline's plan, as compact JSON ("null" when absent: the default).
    pub baseline: String,
    /// Its value in the candidate's plan.
    pub candidate_value: String,
}

/// A fact of the environment a run records (`report.environment`) that differs between the
/// baseline and a candidate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvironmentDifference {
    /// Which candidate (from 1).
    pub candidate: usize,
    /// The fact, by its path in the report's `environment` (`kernel`, `cpu_count`,
    /// `work_dir_filesystem.fs_type`, `clock.source`).
    pub field: String,
    /// Its value in the baseline, as compact JSON.
    pub baseline: String,
    /// Its value in the candidate.
    pub candidate_value: String,
}

/// Which run a file held.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRef {
    /// The file, as given.
    pub file: String,
    /// The run's id.
    pub run_id: String,
    /// The run's name.
    pub name: String,
    /// When it started, RFC 3339 UTC.
    pub started_at: String,
    /// stowbench's version that wrote it.
    pub tool_version: String,
    /// How the run ended ("complete", "interrupted", "failed", "timed_out"; "running" when it
    /// ended before its final write).
    #[serde(default)]
    pub status: String,
}

/// One metric of one case, baseline against one candidate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricRow {
    /// Which candidate (position in `candidates`, from 1).
    pub candidate: usize,
    /// The candidate's file, as given.
    pub candidate_file: String,
    /// The baseline's case id, without its repeat suffix.
    pub case: String,
    /// The candidate's case id, without its repeat suffix (differs when paired by conditions).
    pub candidate_case: String,
    /// How the two cases were paired.
    pub matched_by: MatchedBy,
    /// The phase, for object-store cases' phase and operation figures.
    pub phase: Option<String>,
    /// The operation (or fio direction), for operation figures.
    pub op: Option<String>,
    /// The metric's name (`metrics::METRICS`); its unit is last.
    pub metric: String,
    /// For a phase's throughput, which one both sides give: the steady-state window when every
    /// repeat on both sides had one, else the whole phase (one measure, as the run table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
    /// Whether a larger value is better.
    pub higher_is_better: bool,
    /// The baseline's values, one per repeat.
    pub baseline: Sample,
    /// The candidate's values, one per repeat.
    pub candidate_sample: Sample,
    /// Candidate mean over baseline mean; `None` when the baseline's is zero.
    pub ratio: Option<f64>,
    /// Which way the candidate differs.
    pub change: Change,
    /// |ratio − 1| in percent; `None` without a ratio.
    pub change_percent: Option<f64>,
    /// Whether the difference stands out from the repeats' spread.
    pub verdict: Verdict,
    /// Welch's test, with two or more repeats on each side.
    pub welch: Option<Welch>,
}

/// The values of one side.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// One value per repeat, in the metric's unit.
    pub values: Vec<f64>,
    /// Their mean.
    pub mean: f64,
}

/// Which way a candidate's figure differs from the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// A speed metric improved (more throughput, less latency).
    Faster,
    /// A speed metric got worse.
    Slower,
    /// An amount (CPU, memory, disk) is smaller.
    Less,
    /// An amount is larger.
    More,
    /// Exactly equal.
    Same,
}

/// Whether a difference is significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// p below 1 − confidence.
    Significant,
    /// p at or above 1 − confidence: the difference may be noise.
    NotSignificant,
    /// Fewer than two repeats on a side: no test is possible.
    NotEnoughRepeats,
}

/// A case without a partner.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unmatched {
    /// Which candidate the pairing was with (from 1).
    pub candidate: usize,
    /// The file holding the case.
    pub file: String,
    /// The case id, without its repeat suffix.
    pub case: String,
    /// Why it has no partner.
    pub reason: String,
}

/// The regression gate of `--fail-if-slower`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Gate {
    /// The threshold: slower by more than this percent fails.
    pub slower_percent: f64,
    /// Whether no throughput figure failed.
    pub passed: bool,
    /// The throughput figures that failed it.
    pub failures: Vec<GateFailure>,
    /// Throughput figures judged on single values (fewer than two repeats on a side).
    pub judged_without_repeats: usize,
    /// Why the gate cannot pass whatever the figures say: a candidate run that did not complete,
    /// a baseline case the candidate failed or lacks (nothing measured is no evidence of speed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unjudged: Vec<String>,
}

/// A throughput figure that failed the gate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateFailure {
    /// Index of its row in `rows`.
    pub row: usize,
    /// How much slower, in percent.
    pub slower_percent: f64,
    /// Whether it was judged on single values rather than a significant test.
    pub without_repeats: bool,
}

/// What to compare, from the command line.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these metrics (names from `metrics::METRICS`); all when empty.
    pub metrics: Vec<String>,
    /// `--fail-if-slower PCT`.
    pub fail_if_slower_percent: Option<f64>,
}

/// Compares each candidate report with the baseline. `Err` for bad options and for a candidate
/// that shares no case with the baseline (nothing to compare: probably the wrong file).
pub fn compare(baseline: (&str, &RunReport), candidates: &[(&str, &RunReport)], options: &Options) -> Result<Comparison, String> {
    let selected = selected_metrics(options)?;
    let baseline_groups = matching::groups(baseline.1);
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    let mut unjudged = Vec::new();
    for (index, (file, report)) in candidates.iter().enumerate() {
        let candidate = index + 1;
        let groups = matching::groups(report);
        let pairing = matching::pair(&baseline_groups, &groups);
        // A run that ended before its first case (killed, timed out) is no wrong file: it is a
        // candidate that measured nothing, which the gate must fail, not refuse to judge.
        let ended_before_any_case = report.cases.is_empty() && report.fio_cases.is_empty() && report.status != crate::report::model::RunStatus::Complete;
        if pairing.pairs.is_empty() && !ended_before_any_case {
            return Err(format!(
                "{file} shares no case with the baseline {}: no case id and no target, workload, size and threads in common. \
                 Compare runs of the same job (stowbench validate JOB lists its case ids)",
                baseline.0
            ));
        }
        if report.status != crate::report::model::RunStatus::Complete {
            unjudged.push(format!("candidate {candidate} {file}: the run did not complete (status {})", report.status));
        }
        for pair in &pairing.pairs {
            let before = rows.len();
            let (pair_rows, too_few) = pair_rows(pair, (candidate, file), &selected);
            rows.extend(pair_rows);
            let compared = rows.len() > before;
            let left_out_any = !too_few.is_empty();
            for left_out in too_few {
                let phase = left_out.phase.map(|p| format!(" phase {p}")).unwrap_or_default();
                let op = left_out.op.map(|o| format!(", {o}")).unwrap_or_default();
                let reason = format!(
                    "{} not compared: a repeat had fewer than {} latency samples, so its p99 is its largest sample, not a percentile; raise objects or the phase's duration",
                    left_out.metric.label,
                    crate::report::model::samples_for_percentile(99.0)
                );
                unmatched.push(Unmatched { candidate, file: file.to_string(), case: format!("{}{phase}{op}", pair.baseline.id), reason });
            }
            let mut failed_somewhere = false;
            for (side, group, file) in [("baseline", pair.baseline, baseline.0), ("candidate", pair.candidate, *file)] {
                let failures: Vec<String> = group.repeats.iter().filter_map(|r| r.failure()).collect();
                let Some(first) = failures.first() else { continue };
                failed_somewhere = true;
                let rest = if compared { "; compared on the repeats that finished" } else { "" };
                let reason = format!("failed in the {side} ({} of {} repeat(s)){rest}: {first}", failures.len(), group.repeats.len());
                if side == "candidate" {
                    unjudged.push(format!("candidate {candidate} {file}: {} failed", group.id));
                }
                unmatched.push(Unmatched { candidate, file: file.to_string(), case: group.id.clone(), reason });
            }
            if !compared && !failed_somewhere && !left_out_any {
                let reason = "no figure of the chosen metrics on both sides (see --metric)".to_string();
                unmatched.push(Unmatched { candidate, file: file.to_string(), case: pair.baseline.id.clone(), reason });
            }
            for skipped in phases_not_compared(pair, &rows[before..]) {
                let case = format!("{} phase {}", pair.baseline.id, skipped.phase);
                if skipped.candidate_lacks_it {
                    unjudged.push(format!("candidate {candidate} {file}: {case}: {}", skipped.reason));
                }
                let side_file = if skipped.only_in_baseline { baseline.0 } else { *file };
                unmatched.push(Unmatched { candidate, file: side_file.to_string(), case, reason: skipped.reason });
            }
        }
        for (group, _) in &pairing.baseline_only {
            unjudged.push(format!("candidate {candidate} {file}: {} is missing (only in the baseline)", group.id));
        }
        let listed = pairing.baseline_only.iter().map(|(g, why)| (baseline.0, g, why)).chain(pairing.candidate_only.iter().map(|(g, why)| (*file, g, why)));
        unmatched.extend(listed.map(|(file, group, why)| Unmatched { candidate, file: file.to_string(), case: group.id.clone(), reason: why.to_string() }));
    }
    let plan_differences = per_candidate(candidates, |report, index| plan_differences(&baseline.1.plan, &report.plan, index));
    let setting_differences = per_candidate(candidates, |report, index| setting_differences(&baseline.1.plan, &report.plan, index));
    let environment_differences = per_candidate(candidates, |report, index| environment_differences(&baseline.1.environment, &report.environment, index));
    let gate = options.fail_if_slower_percent.map(|threshold| gate(&rows, threshold, unjudged));
    Ok(Comparison {
        schema_version: COMPARISON_SCHEMA_VERSION,
        baseline: run_ref(baseline.0, baseline.1),
        candidates: candidates.iter().map(|(file, report)| run_ref(file, report)).collect(),
        confidence: CONFIDENCE,
        rows,
        unmatched,
        gate,
        plan_differences,
        setting_differences,
        environment_differences,
    })
}

/// What `differences` finds in each candidate (numbered from 1), candidate after candidate.
fn per_candidate<T>(candidates: &[(&str, &RunReport)], differences: impl Fn(&RunReport, usize) -> Vec<T>) -> Vec<T> {
    candidates.iter().enumerate().flat_map(|(index, (_, report))| differences(report, index + 1)).collect()
}

/// The facts of the two environments that differ. A fact one report does not know (empty, zero,
/// absent: a report from before it was recorded) is no difference. Left out: the data directory's
/// path and mount point (the run's `work_dir` setting covers them), and the clock's calibrated
/// rate and drift (they differ from run to run on one machine).
fn environment_differences(baseline: &Environment, candidate: &Environment, index: usize) -> Vec<EnvironmentDifference> {
    let (ours, theirs) = (environment_facts(baseline), environment_facts(candidate));
    ours.into_iter()
        .zip(theirs)
        .filter(|(a, b)| known(&a.value) && known(&b.value) && !a.same.holds(&a.value, &b.value))
        .map(|(a, b)| EnvironmentDifference {
            candidate: index,
            field: a.field.to_string(),
            baseline: a.value.to_string(),
            candidate_value: b.value.to_string(),
        })
        .collect()
}

/// One fact of an environment, by its path in the report, and when two values of it count as
/// the same.
struct Fact {
    field: &'static str,
    value: Value,
    same: Sameness,
}

enum Sameness {
    Equal,
    /// Within 1 % of the larger: a machine's memory as the kernel reports it (a kernel build
    /// reserves a few pages more or less).
    WithinOnePercent,
}

impl Sameness {
    fn holds(&self, a: &Value, b: &Value) -> bool {
        match self {
            Sameness::Equal => a == b,
            Sameness::WithinOnePercent => match (a.as_f64(), b.as_f64()) {
                (Some(a), Some(b)) => (a - b).abs() <= 0.01 * a.max(b),
                _ => a == b,
            },
        }
    }
}

/// The environment's facts that bear on the figures.
fn environment_facts(e: &Environment) -> Vec<Fact> {
    let fs = e.work_dir_filesystem.as_ref();
    let text = |s: Option<&String>| s.map_or(Value::Null, |s| Value::String(s.clone()));
    let equal = |field, value| Fact { field, value, same: Sameness::Equal };
    vec![
        equal("hostname", Value::from(e.hostname.as_str())),
        equal("os", Value::from(e.os.as_str())),
        equal("kernel", Value::from(e.kernel.as_str())),
        equal("cpu_model", Value::from(e.cpu_model.as_str())),
        equal("cpu_count", Value::from(e.cpu_count)),
        Fact { field: "memory_bytes", value: Value::from(e.memory_bytes), same: Sameness::WithinOnePercent },
        equal("is_root", Value::from(e.is_root)),
        equal("sqlite_version", Value::from(e.sqlite_version.as_str())),
        equal("work_dir_filesystem.fs_type", text(fs.map(|f| &f.fs_type))),
        equal("work_dir_filesystem.source", text(fs.map(|f| &f.source))),
        equal("work_dir_filesystem.mount_options", text(fs.map(|f| &f.mount_options))),
        equal("work_dir_filesystem.journal", fs.and_then(|f| f.journal).map_or(Value::Null, Value::from)),
        equal("page_cache_reclaim", text(e.page_cache_reclaim.as_ref())),
        equal("clock.source", text(e.clock.as_ref().map(|c| &c.source))),
    ]
}

fn known(v: &Value) -> bool {
    !(v.is_null() || v == &Value::from("") || v == &Value::from(0))
}

/// The phases, by workload and label, that both plans have but define differently (any field of
/// the phase's plan: `mix`, `stop`, `warmup`, `key_order`, ...).
fn plan_differences(baseline: &Value, candidate: &Value, index: usize) -> Vec<PlanDifference> {
    let mut out = Vec::new();
    for (workload_name, workload, theirs) in named_in_both(baseline, candidate, "workloads") {
        for (label, phase, their_phase) in named_in_both_by(workload, theirs, "phases", "label") {
            for (field, ours, other) in field_differences(phase, their_phase, &["label"], Absent::Empty) {
                out.push(PlanDifference {
                    candidate: index,
                    workload: workload_name.clone(),
                    phase: label.clone(),
                    field,
                    baseline: ours,
                    candidate_value: other,
                });
            }
        }
    }
    out
}

/// The run's, the workloads' and the targets' settings that the two plans give differently.
/// A workload's phases are `plan_differences`' part; a target's options count one by one. The
/// seed is left out: another seed writes other bytes and keys of the same kind, not other work.
fn setting_differences(baseline: &Value, candidate: &Value, index: usize) -> Vec<SettingDifference> {
    let entry = |scope: &str, name: &str, (field, ours, other): (String, String, String)| SettingDifference {
        candidate: index,
        scope: scope.to_string(),
        name: name.to_string(),
        field,
        baseline: ours,
        candidate_value: other,
    };
    let mut out = Vec::new();
    for field in ["work_dir", "mpi_keys"] {
        let (ours, other) = (compact(baseline.get(field)), compact(candidate.get(field)));
        if differ(&ours, &other, Absent::Empty) {
            out.push(entry("run", "", (field.to_string(), ours.to_string(), other.to_string())));
        }
    }
    for (name, ours, theirs) in named_in_both(baseline, candidate, "workloads") {
        out.extend(field_differences(ours, theirs, &["name", "phases"], Absent::Empty).into_iter().map(|d| entry("workload", &name, d)));
    }
    for (name, ours, theirs) in named_in_both(baseline, candidate, "targets") {
        let settings = |t: &Value| {
            // A target's options sit beside `backend` and `retries` in the job file: one level.
            let mut flat = t.get("options_json").and_then(Value::as_object).cloned().unwrap_or_default();
            for key in ["backend", "retries"] {
                flat.insert(key.to_string(), t.get(key).cloned().unwrap_or(Value::Null));
            }
            Value::Object(flat)
        };
        out.extend(field_differences(&settings(ours), &settings(theirs), &[], Absent::Null).into_iter().map(|d| entry("target", &name, d)));
    }
    out
}

/// The entries of list `key` that both plans have under one `name`, with the baseline's and the
/// candidate's.
fn named_in_both<'v>(baseline: &'v Value, candidate: &'v Value, key: &str) -> Vec<(String, &'v Value, &'v Value)> {
    named_in_both_by(baseline, candidate, key, "name")
}

fn named_in_both_by<'v>(baseline: &'v Value, candidate: &'v Value, key: &str, by: &str) -> Vec<(String, &'v Value, &'v Value)> {
    let list = |v: &'v Value| v.get(key).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let name = |v: &Value| v.get(by).and_then(Value::as_str).map(str::to_string);
    list(baseline)
        .iter()
        .filter_map(|ours| {
            let n = name(ours)?;
            let theirs = list(candidate).iter().find(|t| name(t).as_deref() == Some(n.as_str()))?;
            Some((n, ours, theirs))
        })
        .collect()
}

/// What an absent field stands for, so that leaving it out and writing it read the same.
#[derive(Clone, Copy)]
enum Absent {
    /// A field the plan leaves out when it is empty or false (`before`, `sequence`,
    /// `file_server`), or one a report written before it existed lacks.
    Empty,
    /// Only null: a target's option left out takes its backend's default, which may be `true`
    /// (pack's `mmap`), so `false` written there is a different setting.
    Null,
}

/// The fields (but `skip`) of two JSON objects that differ, as (field, baseline, candidate) in
/// compact JSON, sorted by field; `absent` says which values a missing field equals.
fn field_differences(ours: &Value, theirs: &Value, skip: &[&str], absent: Absent) -> Vec<(String, String, String)> {
    let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    let mut fields = keys(ours);
    fields.extend(keys(theirs).into_iter().filter(|k| ours.get(k).is_none()));
    fields.sort();
    fields
        .into_iter()
        .filter(|f| !skip.contains(&f.as_str()))
        .filter_map(|f| {
            let (a, b) = (compact(ours.get(&f)), compact(theirs.get(&f)));
            differ(&a, &b, absent).then(|| (f, a.to_string(), b.to_string()))
        })
        .collect()
}

/// The value with null fields dropped, so `{"count": null}` and `{}` read the same.
fn compact(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Object(map)) => Value::Object(map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), compact(Some(v)))).collect()),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

fn differ(a: &Value, b: &Value, absent: Absent) -> bool {
    let empty = |v: &Value| match absent {
        Absent::Empty => v.is_null() || v == &Value::Bool(false) || v == &Value::Array(Vec::new()),
        Absent::Null => v.is_null(),
    };
    a != b && !(empty(a) && empty(b))
}

fn selected_metrics(options: &Options) -> Result<Vec<&'static Metric>, String> {
    let selected: Vec<&'static Metric> = if options.metrics.is_empty() {
        metrics::METRICS.iter().collect()
    } else {
        options.metrics.iter().map(|name| metrics::find(name)).collect::<Result<_, _>>()?
    };
    if let Some(threshold) = options.fail_if_slower_percent {
        if !(threshold.is_finite() && threshold >= 0.0) {
            return Err(format!("--fail-if-slower: {threshold} is not a percentage; give one like 10 (fail when 10 % slower)"));
        }
        // Slower is measured as the share of the baseline's throughput lost (1 − ratio): it never
        // reaches 100 %, so a larger threshold is a gate that can never fail.
        if threshold >= 100.0 {
            return Err(format!(
                "--fail-if-slower: {threshold} % would never fail: a throughput can lose at most all of the baseline's (100 %); give a \
                 percentage below 100, like 10 (fail when 10 % slower)"
            ));
        }
        if !selected.iter().any(|m| m.throughput) {
            return Err("--fail-if-slower judges throughput, and --metric leaves none; add ops_per_s or bytes_per_s".into());
        }
    }
    Ok(selected)
}

fn run_ref(file: &str, report: &RunReport) -> RunRef {
    RunRef {
        file: file.to_string(),
        run_id: report.run_id.clone(),
        name: report.name.clone(),
        started_at: report.started_at.clone(),
        tool_version: report.tool_version.clone(),
        status: report.status.to_string(),
    }
}

/// Values per (phase, op, metric) over a group's repeats, in first-seen order: each the value
/// and, for a phase's throughput, its steady-state window.
/// Whether some repeat's figure came from too few samples (`Figure::too_few_samples`) is last.
type Series = Vec<((Option<String>, Option<String>, &'static Metric), Vec<(f64, Option<f64>)>, bool)>;

fn series(group: &matching::Group, selected: &[&'static Metric]) -> Series {
    let mut out: Series = Vec::new();
    for case in &group.repeats {
        for f in metrics::figures(case).into_iter().filter(|f| selected.iter().any(|m| m.name == f.metric.name)) {
            let key = (f.phase, f.op, f.metric);
            match out.iter_mut().find(|(k, _, _)| k.0 == key.0 && k.1 == key.1 && k.2.name == key.2.name) {
                Some((_, values, too_few)) => {
                    values.push((f.value, f.window));
                    *too_few |= f.too_few_samples;
                }
                None => out.push((key, vec![(f.value, f.window)], f.too_few_samples)),
            }
        }
    }
    out
}

/// A figure of a paired case left out because a side read it from too few samples.
struct TooFewSamples {
    phase: Option<String>,
    op: Option<String>,
    metric: &'static Metric,
}

/// The values both sides are compared on, and which measure they are: windows only when every
/// value on both sides has one, so a ratio never sets one side's window against the other's
/// whole phase.
fn one_measure(base: &[(f64, Option<f64>)], theirs: &[(f64, Option<f64>)]) -> (Vec<f64>, Vec<f64>, Option<Measure>) {
    let all = || base.iter().chain(theirs);
    if all().all(|(_, window)| window.is_none()) {
        return (base.iter().map(|v| v.0).collect(), theirs.iter().map(|v| v.0).collect(), None);
    }
    if all().all(|(_, window)| window.is_some()) {
        let windows = |side: &[(f64, Option<f64>)]| side.iter().filter_map(|v| v.1).collect();
        return (windows(base), windows(theirs), Some(Measure::SteadyState));
    }
    (base.iter().map(|v| v.0).collect(), theirs.iter().map(|v| v.0).collect(), Some(Measure::WholePhase))
}

/// The rows of a pair, and the figures both sides have but a side read from too few samples.
fn pair_rows(pair: &Pair, (candidate, file): (usize, &str), selected: &[&'static Metric]) -> (Vec<MetricRow>, Vec<TooFewSamples>) {
    let theirs = series(pair.candidate, selected);
    let mut rows = Vec::new();
    let mut too_few = Vec::new();
    for ((phase, op, metric), base_values, base_too_few) in series(pair.baseline, selected) {
        let found = theirs.iter().find(|((p, o, m), _, _)| *p == phase && *o == op && m.name == metric.name);
        let Some((_, their_values, their_too_few)) = found else { continue };
        if base_too_few || *their_too_few {
            too_few.push(TooFewSamples { phase, op, metric });
            continue;
        }
        let (base_values, their_values, measure) = one_measure(&base_values, their_values);
        let measure = measure.or((metric.throughput && phase.is_some()).then_some(Measure::WholePhase));
        let (base, theirs) = (sample(base_values), sample(their_values));
        if base.mean == 0.0 && theirs.mean == 0.0 {
            continue; // nothing measured on either side (a backend without disk files, say)
        }
        let ratio = (base.mean != 0.0).then(|| theirs.mean / base.mean);
        let welch = welch::welch(&base.values, &theirs.values);
        let verdict = match welch {
            None => Verdict::NotEnoughRepeats,
            Some(w) if w.p < 1.0 - CONFIDENCE => Verdict::Significant,
            Some(_) => Verdict::NotSignificant,
        };
        rows.push(MetricRow {
            candidate,
            candidate_file: file.to_string(),
            case: pair.baseline.id.clone(),
            candidate_case: pair.candidate.id.clone(),
            matched_by: pair.matched_by,
            phase,
            op,
            metric: metric.name.to_string(),
            measure,
            higher_is_better: metric.higher_is_better,
            change: change(metric, base.mean, theirs.mean),
            change_percent: ratio.map(|r| (r - 1.0).abs() * 100.0),
            ratio,
            baseline: base,
            candidate_sample: theirs,
            verdict,
            welch,
        });
    }
    (rows, too_few)
}

/// A phase of a paired case that gives no row, and why.
struct SkippedPhase {
    phase: String,
    reason: String,
    /// Listed with the baseline's file: the candidate does not have it.
    only_in_baseline: bool,
    /// The candidate measured nothing of it (missing, or no successful operation): the gate
    /// cannot say it is not slower.
    candidate_lacks_it: bool,
}

/// The phases of a pair's finished repeats that one side lacks, or that gave no row (`compared`)
/// as a side had no successful operation (every one a miss: no throughput or latency to
/// compare). They were left out without a word.
fn phases_not_compared(pair: &Pair, compared: &[MetricRow]) -> Vec<SkippedPhase> {
    // Phase label → (successful operations, misses) over the group's finished repeats.
    fn phases(group: &matching::Group) -> Vec<(String, u64, u64)> {
        let mut out: Vec<(String, u64, u64)> = Vec::new();
        let finished = group.repeats.iter().filter_map(|r| match r {
            matching::Measured::Object(case) if case.status == crate::report::model::CaseStatus::Ok => Some(*case),
            _ => None,
        });
        for phase in finished.flat_map(|case| &case.phases) {
            let done: u64 = phase.ops.values().map(|op| op.count).sum();
            let missed: u64 = phase.ops.values().map(|op| op.misses).sum();
            match out.iter_mut().find(|(label, _, _)| *label == phase.phase) {
                Some(entry) => (entry.1, entry.2) = (entry.1 + done, entry.2 + missed),
                None => out.push((phase.phase.clone(), done, missed)),
            }
        }
        out
    }
    let (ours, theirs) = (phases(pair.baseline), phases(pair.candidate));
    if ours.is_empty() || theirs.is_empty() {
        return Vec::new(); // no finished repeat on a side: listed as failed, phases and all
    }
    let find = |side: &[(String, u64, u64)], label: &str| side.iter().find(|(l, _, _)| l == label).map(|&(_, done, missed)| (done, missed));
    let mut out = Vec::new();
    for (label, done, missed) in &ours {
        let skipped =
            |reason: String, only_in_baseline, candidate_lacks_it| SkippedPhase { phase: label.clone(), reason, only_in_baseline, candidate_lacks_it };
        match find(&theirs, label) {
            None => out.push(skipped("phase only in the baseline".into(), true, true)),
            Some((their_done, their_missed)) if !compared.iter().any(|r| r.phase.as_deref() == Some(label.as_str())) => {
                let side = match (*done == 0, their_done == 0) {
                    (true, true) => format!("on either side ({missed} and {their_missed} misses)"),
                    (true, false) => format!("in the baseline ({missed} misses)"),
                    (false, true) => format!("in the candidate ({their_missed} misses)"),
                    // Both measured it: --metric chose none of its figures.
                    (false, false) => continue,
                };
                out.push(skipped(format!("no successful operation {side}: nothing to compare"), false, their_done == 0));
            }
            Some(_) => {}
        }
    }
    for (label, _, _) in theirs.iter().filter(|(label, _, _)| find(&ours, label).is_none()) {
        out.push(SkippedPhase { phase: label.clone(), reason: "phase only in the candidate".into(), only_in_baseline: false, candidate_lacks_it: false });
    }
    out
}

fn sample(values: Vec<f64>) -> Sample {
    let mean = welch::mean_and_variance(&values).0;
    Sample { values, mean }
}

fn change(metric: &Metric, baseline: f64, candidate: f64) -> Change {
    if candidate == baseline {
        return Change::Same;
    }
    let larger = candidate > baseline;
    match (metric.speed, larger == metric.higher_is_better) {
        (true, true) => Change::Faster,
        (true, false) => Change::Slower,
        (false, _) if larger => Change::More,
        (false, _) => Change::Less,
    }
}

/// The gate: a throughput row fails when it is slower by more than `threshold` percent and the
/// difference is significant, or cannot be tested for want of repeats (see the module docs).
fn gate(rows: &[MetricRow], threshold: f64, unjudged: Vec<String>) -> Gate {
    let throughput = |r: &&MetricRow| metrics::find(&r.metric).is_ok_and(|m| m.throughput);
    let mut failures = Vec::new();
    for (index, row) in rows.iter().enumerate().filter(|(_, r)| throughput(r)) {
        let slower_percent = row.ratio.map_or(0.0, |r| (1.0 - r) * 100.0);
        let counts = matches!(row.verdict, Verdict::Significant | Verdict::NotEnoughRepeats);
        if row.change == Change::Slower && slower_percent > threshold && counts {
            failures.push(GateFailure { row: index, slower_percent, without_repeats: row.verdict == Verdict::NotEnoughRepeats });
        }
    }
    Gate {
        slower_percent: threshold,
        passed: failures.is_empty() && unjudged.is_empty(),
        failures,
        unjudged,
        judged_without_repeats: rows.iter().filter(throughput).filter(|r| r.verdict == Verdict::NotEnoughRepeats).count(),
    }
}

#[cfg(test)]
mod tests;
