//! Checking a parsed `JobSpec` into a `Plan`: defaults filled in, meanings checked, and the
//! matrix targets × workloads × sizes × threads × repeats expanded into cases with stable ids.
//!
//! Every mistake is collected, not just the first: each target, each workload and each of a
//! workload's fields is checked on its own, and a mistake names the file, the line and column of
//! the key at fault (or of its table), the field, and the fix. This module never touches a
//! backend's data: option checks against a backend happen when the backend is constructed
//! (`stowbench validate`, the runner's preflight).

use super::plan::*;
use super::spec::{line_col, JobSpec, Parsed, PhaseSpec, WorkloadSpec, JOB_VERSION};
use super::Mistake;
use crate::backend::options::Options;
use crate::units::ByteSize;
use crate::workload::keys::KeyOrder;
use crate::workload::op::Op;
use crate::workload::size::SizeSpec;
use std::sync::Arc;

type Span = std::ops::Range<usize>;

struct Ctx<'a> {
    source: &'a str,
    text: &'a str,
    /// Keys the parser removed for a mistake, by the start of their table (`spec::Parsed`).
    removed: &'a [(usize, String)],
}

impl Ctx<'_> {
    /// Whether the parser removed `key` from the table at `table` for a mistake it reported.
    fn was_removed(&self, table: &Span, key: &str) -> bool {
        self.removed.iter().any(|(start, removed)| *start == table.start && removed == key)
    }

    /// Byte `offset` as "SOURCE:LINE:COLUMN", for a check made after this one (`runner::contract`).
    fn location(&self, offset: usize) -> String {
        let (line, column) = line_col(self.text, offset);
        format!("{}:{line}:{column}", self.source)
    }

    /// A mistake at byte `offset`: "`what`: `message`".
    fn at(&self, offset: usize, what: &str, message: impl std::fmt::Display) -> Mistake {
        let (line, column) = line_col(self.text, offset);
        Mistake { line, column, message: format!("{what}: {message}") }
    }

    /// A mistake in `field` of the table at `table` (the table `what` names), located at the
    /// field's key when it is written in the table's own lines, else at the table's header.
    /// None when the parser already reported a mistake in that field.
    fn field(&self, table: &Span, what: &str, field: &str, message: impl std::fmt::Display) -> Option<Mistake> {
        let key = field.split('.').next().unwrap_or(field);
        // A workload's sizes are given one way or the other: after a mistaken size_dist, "no
        // sizes" would only repeat it.
        let keys: &[&str] = if matches!(key, "sizes" | "size_dist") { &["sizes", "size_dist"] } else { std::slice::from_ref(&key) };
        if keys.iter().any(|key| self.was_removed(table, key)) {
            return None;
        }
        let offset = key_offset(self.text, table.start, key).unwrap_or(table.start);
        let what = if what.is_empty() { format!("field \"{field}\"") } else { format!("{what}, field \"{field}\"") };
        Some(self.at(offset, &what, message))
    }
}

/// What a target or workload name may hold, and why.
const NAME_RULE: &str =
    "use 1 to 64 letters, digits, '-', '_' or '.' (names go into case ids like fs/w/4KiB/t1/r1, comma-separated --targets lists and file names)";

/// Whether `name` keeps case ids, `--targets a,b` and file names unambiguous.
fn usable_name(name: &str) -> bool {
    (1..=64).contains(&name.chars().count()) && name.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Byte offset of `key = ...` among the lines of the table starting at `start` (its header line,
/// if any, and the lines up to the next header), or None when it is written elsewhere (a dotted
/// key, a sub-table).
fn key_offset(text: &str, start: usize, key: &str) -> Option<usize> {
    let mut start = start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut offset = start;
    for (i, line) in text[start..].split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if i > 0 && trimmed.starts_with('[') {
            return None;
        }
        if trimmed.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('=')) {
            return Some(offset + (line.len() - trimmed.len()));
        }
        offset += line.len();
    }
    None
}

/// Validates a parsed job and expands its matrix; the error lists every mistake (a built-in
/// recipe's, which are tested valid).
pub fn build(job: &JobSpec, source: &str, text: &str) -> Result<Plan, String> {
    match check(job, source, text, None) {
        (plan, mistakes) if mistakes.is_empty() => Ok(plan),
        (_, mistakes) => Err(super::render_mistakes(source, mistakes)),
    }
}

/// Validates a parsed job and expands its matrix, stopping at nothing: the plan holds whatever
/// checked out and the mistakes list the rest. `source` names the file in messages;
/// `parsed` is what the parser left out: after a parsing mistake, tables may have been dropped,
/// so an empty list of targets or workloads is a consequence, not a mistake of its own, and so
/// is a removed key's field.
pub fn check(job: &JobSpec, source: &str, text: &str, parsed: Option<&Parsed>) -> (Plan, Vec<Mistake>) {
    let ctx = Ctx { source, text, removed: parsed.map_or(&[], |p| &p.removed) };
    let spec_had_mistakes = parsed.is_some_and(|p| !p.mistakes.is_empty());
    let mut mistakes = Vec::new();
    if job.version != JOB_VERSION {
        let m = format!("{} is not supported; this stowbench reads version {JOB_VERSION}: write version = {JOB_VERSION}", job.version);
        mistakes.extend(ctx.field(&(0..0), "", "version", m));
    }
    let mut fio = Vec::new();
    for spanned in &job.fio {
        let sweep = spanned.get_ref();
        // A directory target must exist when the run starts; saying so here gives the line.
        let dirs = || {
            sweep
                .target
                .iter()
                .filter(|t| matches!(t, crate::fio::spec::TargetSpec::Dir { .. }))
                .try_for_each(|t| crate::fio::target::check_target(t, &sweep.name))
        };
        // Every mistake of the table at once; its directories are looked at once the rest holds.
        let mut found = sweep.mistakes();
        if found.is_empty() {
            found.extend(dirs().err());
        }
        if found.is_empty() {
            fio.push(sweep.clone());
        }
        for e in found {
            match e {
                crate::fio::FioError::Invalid { sweep, field, message } => {
                    mistakes.extend(ctx.field(&spanned.span(), &format!("fio sweep \"{sweep}\""), &field, message))
                }
                e => mistakes.push(ctx.at(spanned.span().start, "fio", e)),
            }
        }
    }
    let fio_only = job.targets.is_empty() && job.workloads.is_empty() && !job.fio.is_empty();
    if !fio_only && !spec_had_mistakes {
        if job.targets.is_empty() {
            mistakes.push(ctx.at(0, "target", "no [[target]] table; add one, e.g.\n[[target]]\nbackend = \"fs\""));
        }
        if job.workloads.is_empty() {
            mistakes.push(ctx.at(0, "workload", "no [[workload]] table; add one with a name, sizes and phases"));
        }
    }
    let targets = check_targets(job, &ctx, &mut mistakes);
    let mut workloads: Vec<Arc<WorkloadPlan>> = Vec::new();
    let mut cases = Vec::new();
    for spanned in &job.workloads {
        let (w, span) = (spanned.get_ref(), spanned.span());
        let what = format!("workload \"{}\"", w.name);
        let mut report = |field: &str, at: Option<usize>, message: String| {
            // `at` is a phase table: its own keys are searched from its header.
            mistakes.extend(ctx.field(&at.map_or(span.clone(), |at| at..at), &what, field, message))
        };
        let mut plan = check_workload(w, &mut report);
        if let (Some(plan), Some(_)) = (plan.as_mut(), w.op_timeout) {
            plan.op_timeout_at = Some(ctx.location(key_offset(text, span.start, "op_timeout").unwrap_or(span.start)));
        }
        if workloads.iter().any(|p| p.name == w.name) {
            report("name", None, format!("\"{}\" is used twice; give each [[workload]] a distinct name", w.name));
        }
        let sizes = sizes_of(w, &mut report);
        let threads = match &w.threads {
            None => vec![1],
            Some(listed) if listed.is_empty() => {
                report("threads", None, "[] lists no thread count; list at least one, e.g. threads = [1, 4] (or leave it out for 1)".into());
                vec![1]
            }
            Some(listed) => listed.clone(),
        };
        if let Some(t) = threads.iter().find(|t| **t == 0 || **t > MAX_THREADS) {
            report("threads", None, format!("{t} is out of range; use 1 to {MAX_THREADS}"));
        }
        // A case id names its size and thread count: one listed twice would give two cases one id.
        if let Some(t) = threads.iter().enumerate().find_map(|(i, t)| threads[..i].contains(t).then_some(t)) {
            report("threads", None, format!("{t} is listed twice; list each thread count once (repeats = N runs each case N times)"));
        }
        if let Some(label) = sizes.iter().enumerate().find_map(|(i, s)| sizes[..i].iter().any(|o| o.label() == s.label()).then(|| s.label())) {
            report("sizes", None, format!("{label} is listed twice (sizes are compared by bytes: 4KiB and 4096B are one size); list each size once (repeats = N runs each case N times)"));
        }
        let repeats = w.repeats.unwrap_or(1);
        if repeats == 0 || repeats > 1000 {
            report("repeats", None, format!("{repeats} is out of range; use 1 to 1000"));
        }
        let objects = match sizes.iter().map(|size| objects_for(w, size)).collect::<Result<Vec<u64>, _>>() {
            Ok(objects) => objects,
            // A dataset removed for its mistake leaves the workload with neither objects nor
            // dataset: "say how many objects" would only repeat that mistake.
            Err(_) if w.objects.is_none() && w.dataset.is_none() && ctx.was_removed(&span, "dataset") => Vec::new(),
            Err((field, m)) => {
                report(field, None, m);
                Vec::new()
            }
        };
        let matrix = [targets.len(), sizes.len(), threads.len(), repeats as usize].iter().fold(1u64, |n, k| n.saturating_mul(*k as u64));
        if cases.len() as u64 + matrix > MAX_CASES {
            report("repeats", None, format!("the job expands to more than {MAX_CASES} cases (targets × sizes × threads × repeats); use fewer"));
            continue;
        }
        let Some(plan) = plan.map(Arc::new) else { continue };
        for (ti, target) in targets.iter().enumerate() {
            for (size, &objects) in sizes.iter().zip(&objects) {
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
    let plan = Plan {
        name: job.name.clone().unwrap_or_else(|| "job".into()),
        description: job.description.clone(),
        source: source.to_string(),
        seed: job.seed.unwrap_or(DEFAULT_SEED),
        work_dir: job.work_dir.clone(),
        // Top-level keys come before the first table header, so the search starts at 0.
        work_dir_at: job.work_dir.as_ref().map(|_| ctx.location(key_offset(text, 0, "work_dir").unwrap_or(0))),
        targets,
        workloads,
        cases,
        fio,
        recipe: None,
        mpi_keys: check_mpi(job, &ctx, &mut mistakes),
    };
    (plan, mistakes)
}

/// The `[mpi]` table: how the ranks of a multi-host run share each case's keys.
fn check_mpi(job: &JobSpec, ctx: &Ctx, mistakes: &mut Vec<Mistake>) -> KeySharing {
    let Some(spanned) = &job.mpi else { return KeySharing::Partitioned };
    match spanned.get_ref().keys.as_deref() {
        None | Some("partitioned") => KeySharing::Partitioned,
        Some("shared") => KeySharing::Shared,
        Some(other) => {
            let message = format!(
                "\"{other}\" is not a way to share keys; use \"partitioned\" (every rank its own keys, the default) or \"shared\" \
                 (one key space: each key written by one rank, read by every rank)"
            );
            mistakes.extend(ctx.field(&spanned.span(), "[mpi]", "keys", message));
            KeySharing::Partitioned
        }
    }
}

fn check_targets(job: &JobSpec, ctx: &Ctx, mistakes: &mut Vec<Mistake>) -> Vec<TargetPlan> {
    let mut targets: Vec<TargetPlan> = Vec::new();
    for spanned in &job.targets {
        let (t, span) = (spanned.get_ref(), spanned.span());
        let name = t.name.clone().unwrap_or_else(|| t.backend.clone());
        let what = format!("target \"{name}\"");
        let before = mistakes.len();
        let mut table = t.options.clone();
        // Reported after the target is kept, so the backend still checks its other options.
        let mut misspelt = Vec::new();
        match crate::backend::find(&t.backend) {
            Ok(kind) => {
                for (key, meant) in misspelt_target_keys(&table, kind) {
                    table.remove(&key);
                    let options: Vec<&str> = kind.options.iter().map(|o| o.name).collect();
                    let message = format!(
                        "unknown key \"{key}\". Did you mean \"{meant}\"? A target's own keys are {}; the others are options of backend {}: {}",
                        TARGET_KEYS.join(", "),
                        kind.name,
                        options.join(", ")
                    );
                    misspelt.push(ctx.at(key_offset(ctx.text, span.start, &key).unwrap_or(span.start), &what, message));
                }
            }
            Err(e) => mistakes.extend(ctx.field(&span, &what, "backend", e)),
        }
        if !usable_name(&name) {
            mistakes.extend(ctx.field(&span, &what, "name", format!("\"{name}\" is not a usable name; {NAME_RULE}")));
        } else if targets.iter().any(|p| p.name == name) {
            mistakes.extend(ctx.field(&span, &what, "name", format!("\"{name}\" is used twice; give each [[target]] a distinct name = \"...\"")));
        }
        let (line, _) = line_col(ctx.text, span.start);
        let retries = match table.remove("retries") {
            None => None,
            Some(toml::Value::Integer(n)) if (0..=MAX_RETRIES as i64).contains(&n) => Some(n as u32),
            Some(other) => {
                mistakes.extend(ctx.field(&span, &what, "retries", format!("{other} is not a retry count; use a whole number from 0 to {MAX_RETRIES}")));
                None
            }
        };
        if mistakes.len() > before {
            continue;
        }
        mistakes.extend(misspelt);
        let mut options = Options::new(&name, &format!("{}:{line}", ctx.source), table);
        options.key_origins = t
            .options
            .keys()
            .filter_map(|key| key_offset(ctx.text, span.start, key).map(|at| (key, line_col(ctx.text, at))))
            .map(|(key, (l, c))| (key.clone(), format!("{}:{l}:{c}", ctx.source)))
            .collect();
        targets.push(TargetPlan { options_json: options.redacted_json(), name, backend: t.backend.clone(), options, retries });
    }
    targets
}

/// The keys of a `[[target]]` table that the job reads itself; every other key is an option of
/// its backend.
const TARGET_KEYS: [&str; 3] = ["name", "backend", "retries"];

/// The option keys of a target that are no option of its backend but a misspelling of one of the
/// target's own keys ("nmae" for name), each with the key meant: the backend, which knows only its
/// options, would call them unknown without a suggestion.
fn misspelt_target_keys(options: &toml::Table, kind: &crate::backend::BackendKind) -> Vec<(String, &'static str)> {
    let mut candidates: Vec<&'static str> = kind.options.iter().map(|o| o.name).collect();
    candidates.extend(TARGET_KEYS);
    options
        .keys()
        .filter(|key| !candidates.contains(&key.as_str()))
        .filter_map(|key| crate::suggest::did_you_mean(key, &candidates).filter(|meant| TARGET_KEYS.contains(meant)).map(|meant| (key.clone(), meant)))
        .collect()
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

/// Reports a mistake in a workload's `field`: the key in the table starting at byte `at` when
/// given (a phase table), else in the workload's table.
type Report<'r> = dyn FnMut(&str, Option<usize>, String) + 'r;

/// Checks every field of a workload, reporting each mistake; None when any was found.
fn check_workload(w: &WorkloadSpec, report: &mut Report) -> Option<WorkloadPlan> {
    let mut ok = true;
    let mut bad = |field: &str, at: Option<usize>, message: String| {
        ok = false;
        report(field, at, message);
    };
    if !usable_name(&w.name) {
        bad("name", None, format!("\"{}\" is not a usable name; {NAME_RULE}", w.name));
    }
    let theta = w.zipf_theta.unwrap_or(0.99);
    if !(theta > 0.0 && theta < 1.0) {
        bad("zipf_theta", None, format!("{theta} is out of range; use a value between 0 and 1 exclusive, e.g. 0.99"));
    }
    let default_order = parse_key_order(w.key_order.as_deref().unwrap_or("sequential"), theta).unwrap_or_else(|m| {
        bad("key_order", None, m);
        KeyOrder::Sequential
    });
    let phases = check_phases(w, default_order, theta, &mut bad);
    let compressibility = w.compressibility.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&compressibility) {
        bad("compressibility", None, format!("{compressibility} is out of range; use 0 (random) to 1 (all zeros)"));
    }
    let cold_cache = match w.cache.as_deref().unwrap_or("warm") {
        "warm" => false,
        "cold" => true,
        other => {
            bad("cache", None, format!("\"{other}\" is not a cache state; use \"warm\" or \"cold\""));
            false
        }
    };
    let max_error_ratio = w.max_error_ratio.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&max_error_ratio) {
        bad("max_error_ratio", None, format!("{max_error_ratio} is out of range; use 0 to 1"));
    }
    let retries = w.retries.unwrap_or(0);
    if retries > MAX_RETRIES {
        bad("retries", None, format!("{retries} is too many; use 0 to {MAX_RETRIES}"));
    }
    // The file-server rules read the phases: checked only when every phase checked out, so a
    // misspelt operation is not reported a second time as a misplaced one.
    let phases = phases?;
    let file_server = file_server_rules(w, &phases).unwrap_or_else(|(field, m)| {
        bad(field, None, m);
        false
    });
    let first_is_put = phases.first().map(|p| p.mix.iter().all(|(op, _)| *op == Op::Put) || p.reads_only_its_own_puts()).unwrap_or(true);
    ok.then(|| WorkloadPlan {
        name: w.name.clone(),
        phases,
        verify: w.verify.unwrap_or(true),
        compressibility,
        cold_cache,
        settle_writeback: w.settle_writeback.unwrap_or(true),
        retries,
        max_error_ratio,
        give_up_after_ns: w.give_up_after.map_or(DEFAULT_GIVE_UP_AFTER_NS, |d| d.0),
        op_timeout_ns: w.op_timeout.map_or(0, |d| d.0),
        op_timeout_at: None,
        preload: w.preload.unwrap_or(!first_is_put && !file_server),
        file_server,
        duplicates: file_server.then(|| w.duplicates.unwrap_or(0.0)),
    })
}

/// How long a worker keeps trying when every operation fails (workload key `give_up_after`).
pub const DEFAULT_GIVE_UP_AFTER_NS: u64 = 10_000_000_000;

/// A mistake in one field: the field at fault, and what is wrong with the fix.
type FieldMistake = (&'static str, String);

/// A phase, or every mistake found in it.
type PhaseResult = Result<PhasePlan, Vec<FieldMistake>>;

/// A workload's phases, each checked on its own; None when any has a mistake (each reported).
fn check_phases(w: &WorkloadSpec, default_order: KeyOrder, theta: f64, bad: &mut Report) -> Option<Vec<PhasePlan>> {
    let results: Vec<(Option<usize>, PhaseResult)> = match (w.phases.is_empty(), w.phase_tables.is_empty()) {
        (false, false) => vec![(None, Err(vec![("phases", "use either phases = [...] or [[workload.phase]] tables, not both".into())]))],
        (true, true) => vec![(None, Err(vec![("phases", "no phases; add e.g. phases = [\"put\", \"get\"]".into())]))],
        (false, true) => w.phases.iter().map(|name| (None, simple_phase(name, default_order).map_err(|m| vec![("phases", m)]))).collect(),
        // A phase table's mistake is located at its key inside that table.
        (true, false) => w.phase_tables.iter().map(|p| (Some(p.span().start), table_phase(p.get_ref(), default_order, theta))).collect(),
    };
    let mut phases: Vec<PhasePlan> = Vec::new();
    for (at, result) in results {
        match result {
            Ok(mut phase) => {
                // Reports key a case's phases by label: a second "get" (a warm-up pass, then the
                // measured one) is its own row, "get #2", never a repeat of the first.
                let same = phases.iter().filter(|p| p.label == phase.label || p.label.starts_with(&format!("{} #", phase.label))).count();
                if same > 0 {
                    phase.label = format!("{} #{}", phase.label, same + 1);
                }
                phases.push(phase)
            }
            Err(mistakes) => mistakes.into_iter().for_each(|(field, m)| bad(field, at, m)),
        }
    }
    (phases.len() == w.phases.len().max(w.phase_tables.len()) && !phases.is_empty()).then_some(phases)
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

fn simple_phase(name: &str, key_order: KeyOrder) -> Result<PhasePlan, String> {
    let op = Op::parse(name).ok_or_else(|| {
        let names = Op::ALL.map(Op::name);
        let hint = crate::suggest::did_you_mean(name, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("\"{name}\" is not an operation; use put, get, delete, head, upload or download.{hint}")
    })?;
    Ok(PhasePlan::single(op, key_order))
}

/// One `[[workload.phase]]` table. Each field is checked on its own and every mistake named
/// with its key: a phase without `mix` still hears of its bad split or rate in the same pass.
fn table_phase(p: &PhaseSpec, default_order: KeyOrder, theta: f64) -> PhaseResult {
    let mut mistakes = Vec::new();
    let sequence = !p.sequence.is_empty();
    let mix = kept(phase_operations(p, default_order), &mut mistakes);
    // Which operations read_recent needs is known only from a mix that checked out.
    if let Some(mix) = &mix {
        kept(check_read_recent(p.read_recent, mix), &mut mistakes);
    }
    let key_order = match &p.key_order {
        Some(name) => kept(parse_key_order(name, theta).map_err(|m| ("key_order", m)), &mut mistakes),
        None => Some(default_order),
    };
    let stop = Stop { count: p.count, duration_ns: p.duration.map(|d| d.0), bytes: p.bytes.map(|b| b.0), min_duration_ns: p.min_duration.map(|d| d.0) };
    mistakes.extend(stop_mistakes(&stop));
    let warmup = match (p.warmup_count, p.warmup) {
        (None, None) => None,
        (count, duration) => Some(Stop { count, duration_ns: duration.map(|d| d.0), bytes: None, min_duration_ns: None }),
    };
    let even_split = kept(phase_split(p), &mut mistakes);
    let rate = kept(phase_rate(p, sequence), &mut mistakes);
    let before = match &p.before {
        Some(command) => kept(check_before(command.get_ref()).map_err(|m| ("before", m)), &mut mistakes),
        None => Some(Vec::new()),
    };
    match (mix, key_order, even_split, rate, before) {
        (Some(mix), Some(key_order), Some(even_split), Some(rate), Some(before)) if mistakes.is_empty() => {
            let label = phase_label(p, &mix, sequence, rate);
            Ok(PhasePlan { label, mix, stop, key_order, warmup, sequence, read_recent: p.read_recent, even_split, rate, before })
        }
        _ => Err(mistakes),
    }
}

/// `result`'s value, or None with its mistake added to `mistakes`.
fn kept<T>(result: Result<T, FieldMistake>, mistakes: &mut Vec<FieldMistake>) -> Option<T> {
    result.map_err(|mistake| mistakes.push(mistake)).ok()
}

/// A phase's operations and their weights: its `mix`, or its `sequence` (each weighted 1).
fn phase_operations(p: &PhaseSpec, default_order: KeyOrder) -> Result<Vec<(Op, u32)>, FieldMistake> {
    let mut mix = Vec::new();
    match (p.mix.is_empty(), p.sequence.is_empty()) {
        (false, false) => return Err(("mix", "use either mix = {...} or sequence = [...] in a phase, not both".into())),
        (true, true) => return Err(("mix", "a phase needs mix = { get = 90, put = 10 } (drawn at random) or sequence = [\"put\", \"get\"] (in order)".into())),
        (false, true) => {
            for (name, weight) in &p.mix {
                let op = simple_phase(name, default_order).map_err(|m| ("mix", m))?.mix[0].0;
                if *weight > 0 {
                    mix.push((op, *weight));
                }
            }
            if mix.is_empty() {
                return Err(("mix", "a phase's mix has no operation with a weight above 0; e.g. mix = { get = 90, put = 10 }".into()));
            }
        }
        (true, false) => {
            for name in &p.sequence {
                mix.push((simple_phase(name, default_order).map_err(|m| ("sequence", m))?.mix[0].0, 1));
            }
        }
    }
    Ok(mix)
}

fn check_read_recent(read_recent: Option<u64>, mix: &[(Op, u32)]) -> Result<(), FieldMistake> {
    match read_recent {
        Some(0) => Err(("read_recent", "read_recent counts from 1 (the newest put); e.g. read_recent = 5 reads the 5th newest".into())),
        Some(_) if !mix.iter().any(|(op, _)| op.writes()) || !mix.iter().any(|(op, _)| op.reads()) => Err((
            "read_recent",
            "read_recent makes gets, heads and downloads read what this phase put or uploaded: \
             the phase needs a put and a get or head (or an upload and a download)"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// Every mistake in a phase's stop conditions: each one given as 0, and a floor above its ceiling.
fn stop_mistakes(stop: &Stop) -> Vec<FieldMistake> {
    let mut mistakes = Vec::new();
    for (field, value) in [("count", stop.count), ("duration", stop.duration_ns), ("bytes", stop.bytes)] {
        if value == Some(0) {
            mistakes.push((field, "a stop condition of 0 would measure nothing; remove it or give a positive value".into()));
        }
    }
    match (stop.min_duration_ns, stop.duration_ns) {
        (Some(0), _) => mistakes.push(("min_duration", "a minimum of 0 changes nothing; remove it or give a positive duration, e.g. \"100ms\"".into())),
        (Some(min), Some(max)) if min > max => {
            mistakes.push(("min_duration", "is longer than the phase's duration, which ends it first; lower min_duration or raise duration".into()))
        }
        _ => {}
    }
    mistakes
}

/// Whether each thread does its own share of the phase's count (`split = "even"`).
fn phase_split(p: &PhaseSpec) -> Result<bool, FieldMistake> {
    match p.split.as_deref() {
        None | Some("shared") => Ok(false),
        Some("even") if p.duration.is_some() || p.bytes.is_some() => Err((
            "split",
            "split = \"even\" gives every thread count ÷ threads operations, so it needs a count stop, not duration or bytes; \
             remove duration/bytes (the default count is one pass over the objects) or use split = \"shared\""
                .into(),
        )),
        Some("even") if p.min_duration.is_some() => Err((
            "split",
            "split = \"even\" gives every thread a fixed share of count, which min_duration would stretch unevenly; \
             remove min_duration, or use split = \"shared\""
                .into(),
        )),
        Some("even") => Ok(true),
        Some(other) => {
            Err(("split", format!("split = \"{other}\" is not known; use \"shared\" (one counter, the default) or \"even\" (count ÷ threads each)")))
        }
    }
}

/// The phase's open-loop schedule, if it has a `rate`.
fn phase_rate(p: &PhaseSpec, sequence: bool) -> Result<Option<Rate>, FieldMistake> {
    match (&p.rate, p.arrivals.as_deref()) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(("arrivals", "arrivals needs a rate, e.g. rate = \"500/s\" with arrivals = \"poisson\"".into())),
        (Some(_), _) if sequence => {
            Err(("rate", "rate schedules single operations; a sequence phase runs its operations back to back (closed-loop): remove rate, or use mix".into()))
        }
        (Some(text), arrivals) => {
            let arrivals = match arrivals.unwrap_or("uniform") {
                "uniform" => Arrivals::Uniform,
                "poisson" => Arrivals::Poisson,
                other => {
                    return Err(("arrivals", format!("arrivals = \"{other}\" is not known; use \"uniform\" (evenly spaced) or \"poisson\" (random gaps)")))
                }
            };
            Ok(Some(Rate { per_s: parse_rate(text).map_err(|m| ("rate", m))?, arrivals }))
        }
    }
}

/// The phase's name in reports: its operation, its sequence or its mix, and its rate.
fn phase_label(p: &PhaseSpec, mix: &[(Op, u32)], sequence: bool, rate: Option<Rate>) -> String {
    let label = if sequence {
        let names: Vec<&str> = mix.iter().map(|(op, _)| op.name()).collect();
        format!("sequence {}", names.join("-"))
    } else if mix.len() == 1 {
        mix[0].0.name().to_string()
    } else {
        let parts: Vec<String> = mix.iter().map(|(op, w)| format!("{}{w}", op.name())).collect();
        format!("mix {}", parts.join(" "))
    };
    // An open-loop phase is another measurement than a closed-loop one of the same operations:
    // its label says so, so reports never put the two in one row.
    match (&p.rate, rate) {
        (Some(text), Some(Rate { arrivals: Arrivals::Poisson, .. })) => format!("{label} @ {} poisson", text.trim()),
        (Some(text), Some(_)) => format!("{label} @ {}", text.trim()),
        _ => label,
    }
}

/// Checks a phase's `before` command: present, and a program that can be found now (a typo
/// should fail `stowbench validate`, not the first case after minutes of loading).
fn check_before(command: &[String]) -> Result<Vec<String>, String> {
    let example = "e.g. before = [\"./corrupt.sh\", \"--flip\"]";
    let Some(program) = command.first().filter(|p| !p.trim().is_empty()) else {
        return Err(format!("the command is empty; give the program and its arguments, {example}, or remove before"));
    };
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = std::path::Path::new(program);
        let relative = if path.is_absolute() { "" } else { " (relative to the directory stowbench runs in)" };
        let why = match path.metadata() {
            Err(_) => format!("was not found{relative}; give its path"),
            Ok(m) if m.is_dir() => format!("is a directory{relative}; give the program inside it"),
            Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => {
                format!(
                    "is not executable (mode {:o}); chmod +x it, or run it through its interpreter, e.g. before = [\"sh\", \"{program}\"]",
                    m.permissions().mode() & 0o777
                )
            }
            Ok(_) => return Ok(command.to_vec()),
        };
        return Err(format!("program \"{program}\" {why}{}", if why.ends_with("its path") { format!(", {example}") } else { String::new() }));
    }
    if !std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program)))) {
        return Err(format!("program \"{program}\" was not found in PATH; give its path, {example}"));
    }
    Ok(command.to_vec())
}

/// The sizes of a workload's cases; empty (and reported) when they are mistaken.
fn sizes_of(w: &WorkloadSpec, report: &mut Report) -> Vec<SizeSpec> {
    let mut bad = |field: &str, message: String| {
        report(field, None, message);
        Vec::new()
    };
    match (&w.size_dist, w.sizes.is_empty()) {
        (Some(_), false) => bad("sizes", "use either sizes = [...] or size_dist = {...}, not both".into()),
        (None, true) => bad("sizes", "no sizes; add e.g. sizes = [\"4KiB\", \"1MiB\"]".into()),
        (None, false) => w.sizes.iter().map(|s| SizeSpec::Fixed { bytes: s.0 }).collect(),
        (Some(d), true) if d.min > d.max => bad("size_dist", format!("min {} is larger than max {}; swap them", d.min, d.max)),
        (Some(d), true) => match d.kind.as_str() {
            "uniform" => vec![SizeSpec::Uniform { min_bytes: d.min.0, max_bytes: d.max.0 }],
            "log-uniform" => vec![SizeSpec::LogUniform { min_bytes: d.min.0, max_bytes: d.max.0 }],
            other => bad("size_dist.kind", format!("\"{other}\" is not a distribution; use \"uniform\" or \"log-uniform\"")),
        },
    }
}

/// Distinct keys of a case of objects of `size`; the error names the field at fault.
fn objects_for(w: &WorkloadSpec, size: &SizeSpec) -> Result<u64, FieldMistake> {
    match (w.objects, w.dataset) {
        (Some(_), Some(_)) => Err(("objects", "use either objects or dataset, not both".into())),
        (Some(n), None) if n == 0 || n > MAX_OBJECTS => Err(("objects", format!("{n} is out of range; use 1 to {MAX_OBJECTS}"))),
        // The bounds hold only a count derived from dataset: beside objects they would be
        // ignored, and the case would hold a count the file seems to forbid.
        (Some(n), None) if w.min_objects.is_some() || w.max_objects.is_some() => {
            let field = if w.min_objects.is_some() { "min_objects" } else { "max_objects" };
            Err((field, format!("{field} bounds the count a dataset gives, and objects = {n} sets the count itself; remove {field}, or use dataset = \"...\" instead of objects")))
        }
        (Some(n), None) => Ok(n),
        (None, Some(dataset)) => objects_in_dataset(w, dataset, size),
        (None, None) => Err(("objects", "say how many objects: objects = 1000, or dataset = \"64MiB\"".into())),
    }
}

/// The fewest objects of a size a `dataset` case holds when the workload sets no min_objects.
const DEFAULT_MIN_OBJECTS: u64 = 16;
/// The most objects of a size a `dataset` case holds when the workload sets no max_objects.
const DEFAULT_MAX_OBJECTS: u64 = 100_000;

/// The objects of `size` that `dataset` holds. A count outside min_objects..max_objects is held
/// to the bound when the workload writes that bound (what the quick recipe does: "40 MiB where 10
/// to 300 objects allow"), and refused with the range when the bound is only the default: nothing
/// in the file then asked for a count other than the dataset's (5 bytes made 16 objects of 4 KiB,
/// 99999 TiB 100000).
fn objects_in_dataset(w: &WorkloadSpec, dataset: ByteSize, size: &SizeSpec) -> Result<u64, FieldMistake> {
    if dataset.0 == 0 {
        return Err(("dataset", "0 bytes hold no objects; give the data a case should hold, e.g. dataset = \"64MiB\"".into()));
    }
    for (field, bound) in [("min_objects", w.min_objects), ("max_objects", w.max_objects)] {
        if let Some(n) = bound.filter(|n| *n == 0 || *n > MAX_OBJECTS) {
            return Err((field, format!("{n} is out of range; use 1 to {MAX_OBJECTS}")));
        }
    }
    let (lo, hi) = (w.min_objects.unwrap_or(DEFAULT_MIN_OBJECTS), w.max_objects.unwrap_or(DEFAULT_MAX_OBJECTS));
    if lo > hi {
        return Err(("min_objects", format!("min_objects {lo} is above max_objects {hi}")));
    }
    let mean = size.mean_bytes().max(1);
    let held = dataset.0 / mean;
    if (held < lo && w.min_objects.is_none()) || (held > hi && w.max_objects.is_none()) {
        let (least, most) = (ByteSize(lo.saturating_mul(mean)), ByteSize(hi.saturating_mul(mean)));
        return Err((
            "dataset",
            format!(
                "{dataset} holds {held} objects of {}, outside the {lo} to {hi} a case holds unless min_objects and max_objects say \
                 otherwise; give a dataset from {least} to {most}, or set min_objects and max_objects (1 to {MAX_OBJECTS}) to hold \
                 the count between them",
                size.label()
            ),
        ));
    }
    Ok(held.clamp(lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, String> {
        super::super::load_text(text, "job.toml")
    }

    const BASE: &str = "version = 1\n[[target]]\nbackend = \"sim\"\n[[target]]\nname = \"fs2\"\nbackend = \"fs\"\n";

    /// A bad weight is one mistake: the mix it leaves empty is not also "a phase needs mix".
    #[test]
    fn a_bad_mix_weight_is_reported_once() {
        let err = plan(&format!(
            "{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\n[[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = -1 }}\n"
        ))
        .unwrap_err();
        assert!(err.contains("field \"mix.get\": -1 is negative"), "{err}");
        assert!(!err.contains("a phase needs mix"), "{err}");
    }

    /// A `[[fio]]` table's mistakes come all at once, each at its field's line (it used to stop
    /// at the first).
    #[test]
    fn every_mistake_of_a_fio_table_is_listed() {
        let text = "version = 1\n[[fio]]\nname = \"x\"\ntarget = \"/tmp\"\nrw = [\"randread\"]\nbs = [\"4KiB\"]\nnumjobs = [0]\n\
                    iodepth = [100000]\nnrfiles = [0]\nsize = \"1MiB\"\nruntime = \"0s\"\n";
        let err = plan(text).unwrap_err();
        for (line, field) in [(7, "numjobs"), (8, "iodepth"), (9, "nrfiles"), (11, "runtime")] {
            assert!(err.contains(&format!("job.toml:{line}:1: fio sweep \"x\", field \"{field}\"")), "{field}: {err}");
        }
    }

    /// Issue 14: the mean of two sizes above 8 EiB overflowed (a wrong object count in release).
    #[test]
    fn the_mean_of_the_largest_sizes_does_not_overflow() {
        assert_eq!(SizeSpec::Uniform { min_bytes: u64::MAX, max_bytes: u64::MAX }.mean_bytes(), u64::MAX);
        assert_eq!(SizeSpec::Uniform { min_bytes: 3, max_bytes: 6 }.mean_bytes(), 4);
    }

    /// Issue 14: "1e308k/s" overflowed to an infinite rate after scaling and was accepted.
    #[test]
    fn rates_are_finite_and_bounded() {
        assert!(parse_rate("1e308k/s").is_err());
        assert!(parse_rate("2e9/s").unwrap_err().contains("out of range"));
        assert!(parse_rate("1e-9/s").unwrap_err().contains("out of range"));
        assert_eq!(parse_rate("1M/s"), Ok(1e6));
    }

    #[test]
    fn a_huge_matrix_is_refused_not_expanded() {
        let threads = vec!["1"; 1000].join(", ");
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1, 2]\nthreads = [{threads}]\nrepeats = 1000\nobjects = 1\nphases = [\"put\"]\n"))
            .unwrap_err();
        assert!(err.contains("field \"repeats\": the job expands to more than 100000 cases"), "{err}");
    }

    #[test]
    fn matrix_expands_with_stable_ids() {
        let p = plan(&format!(
            "{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"2.6MB\"]\nthreads = [1, 4]\nrepeats = 2\nobjects = 10\nphases = [\"put\", \"get\"]\n"
        ))
        .unwrap();
        assert_eq!(p.cases.len(), 2 * 2 * 2 * 2);
        assert_eq!(p.cases[0].id, "sim/w/4KiB/t1/r1");
        assert_eq!(p.cases[15].id, "fs2/w/2.6MB/t4/r2");
        assert!(!p.workloads[0].preload);
    }

    #[test]
    fn a_size_or_thread_count_listed_twice_is_refused() {
        let err = plan(&format!(
            "{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"1MiB\", \"4096B\"]\nthreads = [1, 4, 1]\nobjects = 10\nphases = [\"put\"]\n"
        ))
        .unwrap_err();
        assert!(err.contains("field \"threads\": 1 is listed twice"), "{err}");
        assert!(err.contains("field \"sizes\": 4KiB is listed twice"), "{err}");
        plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4kB\", \"4KiB\"]\nthreads = [1, 4]\nobjects = 10\nphases = [\"put\"]\n")).unwrap();
    }

    #[test]
    fn dataset_derives_clamped_object_counts() {
        let p = plan(&format!(
            "{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\", \"16MiB\"]\ndataset = \"64MiB\"\nmin_objects = 16\nmax_objects = 1000\nphases = [\"get\"]\n"
        ))
        .unwrap();
        assert_eq!(p.cases[0].objects, 1000);
        assert_eq!(p.cases[1].objects, 16);
        assert!(p.workloads[0].preload, "a get-first workload preloads");
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\ndataset = \"0\"\nphases = [\"put\"]\n")).unwrap_err();
        assert!(err.contains("field \"dataset\": 0 bytes hold no objects"), "{err}");
    }

    /// Session 47 noticed: min_objects beside objects was ignored without a word.
    #[test]
    fn object_bounds_beside_objects_are_refused() {
        for bound in ["min_objects = 10", "max_objects = 50"] {
            let field = bound.split(' ').next().unwrap();
            let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 100\n{bound}\nphases = [\"put\"]\n")).unwrap_err();
            assert!(err.contains(&format!("field \"{field}\": {field} bounds the count a dataset gives, and objects = 100 sets")), "{err}");
            assert!(err.starts_with(&format!("job.toml:11:1: workload \"w\", field \"{field}\"")), "the bound's own line: {err}");
        }
    }

    #[test]
    fn errors_name_the_line_field_and_fix() {
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"pub\"]\n")).unwrap_err();
        assert!(err.starts_with("job.toml:11:1: workload \"w\", field \"phases\""), "{err}");
        assert!(err.contains("Did you mean \"put\""), "{err}");
        let err = plan("version = 1\n[[target]]\nbackend = \"sqlit\"\n[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 1\nphases = [\"put\"]\n").unwrap_err();
        assert!(err.contains("job.toml:3:1: target \"sqlit\", field \"backend\"") && err.contains("Did you mean \"sqlite\""), "{err}");
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
        let phase = |extra: &str| {
            plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\nthreads = [2]\n[[workload.phase]]\nmix = {{ put = 1 }}\n{extra}"))
        };
        assert!(phase("split = \"even\"\n").unwrap().workloads[0].phases[0].even_split);
        assert!(!phase("split = \"shared\"\n").unwrap().workloads[0].phases[0].even_split);
        let err = phase("split = \"even\"\nduration = \"1s\"\n").unwrap_err();
        assert!(err.contains("field \"split\"") && err.contains("needs a count stop"), "{err}");
        let err = phase("split = \"halves\"\n").unwrap_err();
        assert!(err.contains("\"halves\" is not known") && err.contains("\"even\""), "{err}");
    }

    #[test]
    fn a_minimum_duration_is_a_floor_under_the_other_stops() {
        let phase =
            |extra: &str| plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nmix = {{ get = 1 }}\n{extra}"));
        let stop = phase("min_duration = \"100ms\"\n").unwrap().workloads[0].phases[0].stop;
        assert_eq!((stop.count, stop.min_duration_ns), (None, Some(100_000_000)), "the count stays the default pass over the objects");
        phase("min_duration = \"1s\"\nduration = \"1s\"\n").unwrap();
        for (bad, at, says) in [
            ("min_duration = \"0s\"\n", "job.toml:13:1: workload \"w\", field \"min_duration\"", "a minimum of 0 changes nothing"),
            ("min_duration = \"2s\"\nduration = \"1s\"\n", "field \"min_duration\"", "longer than the phase's duration"),
            ("min_duration = \"1s\"\nsplit = \"even\"\n", "field \"split\"", "remove min_duration"),
        ] {
            let err = phase(bad).unwrap_err();
            assert!(err.contains(at) && err.contains(says), "{bad}: {err}");
        }
        // In the workload table it is named as a phase key, as `duration` is.
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\nmin_duration = \"1s\"\nphases = [\"get\"]\n")).unwrap_err();
        assert!(err.contains("min_duration") && err.contains("[[workload.phase]]"), "{err}");
    }

    #[test]
    fn a_rate_makes_an_open_loop_phase() {
        let phase =
            |extra: &str| plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nmix = {{ get = 1 }}\n{extra}"));
        let rate = |extra: &str| phase(extra).unwrap().workloads[0].phases[0].rate;
        assert_eq!(rate("rate = \"500/s\"\n"), Some(Rate { per_s: 500.0, arrivals: Arrivals::Uniform }));
        assert_eq!(rate("rate = \"2.5k/s\"\narrivals = \"poisson\"\n"), Some(Rate { per_s: 2500.0, arrivals: Arrivals::Poisson }));
        assert_eq!(rate(""), None);
        assert_eq!(phase("rate = \"2.5k/s\"\narrivals = \"poisson\"\n").unwrap().workloads[0].phases[0].label, "get @ 2.5k/s poisson");
        // Located at the key inside the phase table: line 13 is the first after `mix`.
        for (bad, at, says) in [
            ("rate = \"500\"\n", "job.toml:13:1: workload \"w\", field \"rate\"", "has no \"/s\""),
            ("rate = \"0/s\"\n", "job.toml:13:1: workload \"w\", field \"rate\"", "not a positive number"),
            ("rate = \"fast/s\"\n", "job.toml:13:1: workload \"w\", field \"rate\"", "not a positive number"),
            ("rate = \"5/s\"\narrivals = \"bursty\"\n", "job.toml:14:1: workload \"w\", field \"arrivals\"", "\"bursty\" is not known"),
            ("arrivals = \"poisson\"\n", "job.toml:13:1: workload \"w\", field \"arrivals\"", "arrivals needs a rate"),
        ] {
            let err = phase(bad).unwrap_err();
            assert!(err.starts_with(at) && err.contains(says), "{bad}: {err}");
        }
        let seq =
            plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\n[[workload.phase]]\nsequence = [\"put\", \"get\"]\nrate = \"5/s\"\n"))
                .unwrap_err();
        assert!(seq.contains("sequence phase runs its operations back to back"), "{seq}");
    }

    #[test]
    fn names_that_would_be_ambiguous_are_refused() {
        for bad in ["a,b", "w x", "a/b", "w<b>", ""] {
            let err = plan(&format!("{BASE}[[workload]]\nname = {bad:?}\nsizes = [1]\nobjects = 5\nphases = [\"put\"]\n")).unwrap_err();
            assert!(err.contains("is not a usable name; use 1 to 64 letters"), "{bad}: {err}");
        }
        plan(&format!("{BASE}[[workload]]\nname = \"e1.small_v-2é\"\nsizes = [1]\nobjects = 5\nphases = [\"put\"]\n")).unwrap();
    }

    #[test]
    fn an_empty_thread_list_is_a_mistake() {
        let err = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nthreads = []\nobjects = 5\nphases = [\"put\"]\n")).unwrap_err();
        assert!(err.contains("field \"threads\": [] lists no thread count"), "{err}");
    }

    #[test]
    fn a_phase_label_given_again_is_numbered() {
        let p = plan(&format!("{BASE}[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 5\nphases = [\"put\", \"get\", \"put\", \"get\", \"get\"]\n")).unwrap();
        let labels: Vec<&str> = p.workloads[0].phases.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["put", "get", "put #2", "get #2", "get #3"]);
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
