//! Runs a plan: preflight every target (options and size limits, before any data is written), then
//! each case in its own namespace — prepare, connect, preload, phases, verify, measure disk, clean
//! up — appending its result to the report file at once, so an interrupt or crash loses nothing
//! that finished.
//!
//! The runner owns timing, retries and verification; backends only move bytes.

mod audit;
pub mod contract;
mod deadline;
pub mod fileserver;
pub mod hook;
pub mod keytable;
pub mod ops;
pub mod phase;
pub mod progress;
pub mod ranks;
pub mod retry;
pub mod schedule;
pub(crate) mod space;
pub mod watchdog;
pub mod writeback;

use crate::backend::catalog::Catalog;
use crate::backend::{self, namespace, Backend, BackendKind, Namespace, Session};
use crate::clock::{Clock, MeasuringClock, MonotonicClock};
use crate::error::{Error, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED};
use crate::job::plan::TargetPlan;
use crate::job::{CasePlan, PhasePlan, Plan, Stop};
use crate::report::model::{CaseResult, CaseStatus, ClockInfo, DiskResult, PhaseResult, PreloadResult, RunReport, RunStatus, Verification};
use crate::sampler::ResourceSampler;
use crate::workload::op::Op;
use crate::workload::payload::PayloadSpec;
use keytable::KeyTable;
use phase::PhaseContext;
use progress::Progress;
use ranks::{Ranks, Stops};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How to run a plan.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The report file to write (its directory is created).
    pub report_path: PathBuf,
    /// Parent directory for the run's namespace; default: the job's work_dir, else the temp dir.
    pub work_dir: Option<PathBuf>,
    /// Keep the stored data after each case (for inspection).
    pub keep: bool,
    /// Run even when the data will not fit in the free space (`--no-space-check`).
    pub skip_space_check: bool,
    /// Show progress on stderr.
    pub progress: bool,
    /// The command line, for the report.
    pub command: Vec<String>,
    /// How fio cases run (`[[fio]]` tables, `stowbench fio`): histograms, time limit.
    pub fio: crate::fio::RunOptions,
    /// The run's own deadline (`--timeout`), see `deadline`.
    pub timeout: Option<std::time::Duration>,
    /// Which clock times real backends' operations (`--clock`).
    pub clock: crate::clock::ClockChoice,
}

/// What a run produced.
pub struct RunOutcome {
    /// The final report (also on disk).
    pub report: RunReport,
    /// 0 ok, 1 a case failed (errors, error budget, verification), the run timed out or its
    /// data could not be removed afterwards, 3 the report could not be written (`report_error`),
    /// 130 interrupted.
    pub exit_code: i32,
    /// Why the report file could not be written during the run, which then stopped starting
    /// cases: `report` holds what finished, and is all there is of it.
    pub report_error: Option<String>,
    /// Why the run's directory could not be removed after the report was written (it is left
    /// in place for `stowbench cleanup`).
    pub cleanup_error: Option<String>,
}

/// A unique run id: UTC timestamp plus a few random hex digits.
pub fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let salt = crate::hash::xxh3_64(&[nanos.to_le_bytes(), std::process::id().to_le_bytes()].concat()) & 0xffff;
    format!("{}-{salt:04x}", crate::report::timestamp_compact(std::time::SystemTime::now()))
}

/// Runs every case of `plan`; `Err` only for problems found before any case ran: bad input (a
/// refusal of the plan) or the environment (a server that does not answer, disk space, a
/// directory that cannot be made).
pub fn run(plan: &Plan, opts: &RunOptions, interrupted: &AtomicBool) -> Result<RunOutcome, Error> {
    run_with(plan, opts, interrupted, &ranks::Solo)
}

/// Runs every case of `plan` as one of the processes of `ranks` (see `ranks`): this process's
/// share of each case, with only the first rank writing the report.
pub fn run_with(plan: &Plan, opts: &RunOptions, interrupted: &AtomicBool, ranks: &dyn Ranks) -> Result<RunOutcome, Error> {
    let Some(timeout) = opts.timeout else { return run_cases(plan, opts, interrupted, &AtomicBool::new(false), ranks) };
    let finished = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| deadline::watch(timeout, &opts.report_path, &finished, &timed_out, interrupted));
        let outcome = run_cases(plan, opts, interrupted, &timed_out, ranks);
        finished.store(true, Ordering::Relaxed);
        outcome
    })
}

/// The directory the run's own directory is made in: `--work-dir`, else the job's `work_dir`
/// (with where the job sets it), else the temporary directory. It must exist: made here, a
/// mistyped path's missing parents would stay behind after the run, which removes only what it
/// marked as its own.
pub fn work_parent(cli: Option<&Path>, job: Option<(&str, Option<&str>)>) -> Result<PathBuf, Error> {
    let fix = "Create it first, or fix the path (a run makes its own stowbench-<run id> directory inside it, and removes that)";
    if let Some(dir) = cli {
        return existing_dir(dir, || Error::bad_input(format!("--work-dir {}: not an existing directory. {fix}", dir.display()))).map(|()| dir.into());
    }
    if let Some((dir, at)) = job {
        let at = at.map(|at| format!("{at}: ")).unwrap_or_default();
        return existing_dir(Path::new(dir), || Error::bad_input(format!("{at}work_dir: \"{dir}\" is not an existing directory. {fix}"))).map(|()| dir.into());
    }
    let temp = std::env::temp_dir();
    existing_dir(&temp, || {
        Error::environment(format!(
            "the temporary directory {} does not exist (is TMPDIR set to a missing path?); create it, or give --work-dir DIR",
            temp.display()
        ))
    })
    .map(|()| temp.clone())
}

/// Ok when `dir` is a directory; `missing` when it is not there or not a directory; a failing
/// stat is the machine's, named with its path.
fn existing_dir(dir: &Path, missing: impl FnOnce() -> Error) -> Result<(), Error> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(missing()),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => Err(missing()),
        Err(e) => Err(Error::environment(format!("stat of {} failed: {e}", dir.display()))),
    }
}

/// The run directory and report of the run in progress, for the message of a hard exit (a second
/// Ctrl-C), which leaves both behind.
static IN_PROGRESS: std::sync::Mutex<Option<(PathBuf, PathBuf)>> = std::sync::Mutex::new(None);

/// Marks a run in progress until dropped.
struct InProgress;

impl InProgress {
    fn start(run_dir: &Path, report: &Path) -> InProgress {
        *IN_PROGRESS.lock().unwrap_or_else(|p| p.into_inner()) = Some((run_dir.to_path_buf(), report.to_path_buf()));
        InProgress
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        *IN_PROGRESS.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// What a process exiting in the middle of a run leaves behind, and how to remove it; None when
/// no run is in progress.
pub fn left_behind_if_exiting_now() -> Option<String> {
    let guard = IN_PROGRESS.try_lock().ok()?;
    let (dir, report) = guard.as_ref()?;
    // Data a target's `path` put elsewhere is named too, each with its own command: cleaning the
    // run directory does not reach it.
    let elsewhere: String = crate::backend::namespace::made_for_paths_now()
        .unwrap_or_default()
        .iter()
        .map(|made| format!(", and in {} (stowbench cleanup {})", made.display(), made.display()))
        .collect();
    Some(format!(
        "the run's data stays in {} (remove it with: stowbench cleanup {}){elsewhere}; {} stays marked \"running\"",
        dir.display(),
        dir.display(),
        report.display()
    ))
}

fn run_cases(plan: &Plan, opts: &RunOptions, interrupted: &AtomicBool, timed_out: &AtomicBool, ranks: &dyn Ranks) -> Result<RunOutcome, Error> {
    // This process's share of every case (all of it on a single host).
    let local = ranks.local_plan(plan).map_err(Error::bad_input)?;
    let clock = MeasuringClock::choose(opts.clock).map_err(Error::environment);
    // Ranks measure their clocks' offsets with the clock that will time them.
    let run_id = ranks.start_run(new_run_id(), clock.as_ref().map_or(&MonotonicClock as &dyn Clock, |c| c.clock().as_ref()));
    let lead = ranks.is_lead();
    let parent = work_parent(opts.work_dir.as_deref(), local.work_dir.as_deref().map(|d| (d, local.work_dir_at.as_deref())));
    let parent_exists = parent.as_ref().map(|_| ()).map_err(Clone::clone);
    let parent = parent.unwrap_or_else(|_| std::env::temp_dir());
    // Absolute: server cases record their directory for `stowbench cleanup`, run from anywhere.
    let parent = std::path::absolute(&parent).map_err(|e| Error::environment(format!("cannot resolve {}: {e}", parent.display())))?;
    let (dir_name, ns_name) = ranks.run_directory(&run_id);
    let run_dir = parent.join(dir_name);
    // With one namespace for every rank, the lead makes the run directory; a rank that does not
    // find it there (a work directory local to its host) makes one of its own, and removes it.
    let (mut root, mut owns_root) = (Err(Error::environment("the run directory was not made")), true);
    ranks.lead_first(&mut || {
        owns_root = !ranks.shares_namespace() || lead || !namespace::is_owned(&run_dir);
        // A missing parent is refused through the agreed preflight below, so every rank stops.
        root = parent_exists.clone().and_then(|()| Namespace::create(&run_dir, &run_id, &ns_name).map_err(Error::environment));
    });
    // Refused before anything is written: no report file claims a run that never started. Every
    // rank hears every other's verdict, so all refuse together.
    let mut report = crate::report::new_report(plan, &run_id, &opts.command, root.as_ref().map_or(&parent, |r| &r.dir));
    ranks.describe(&mut report);
    // fio times its own sweeps: a run of nothing else names no clock of ours.
    if let (Ok(clock), false) = (&clock, plan.cases.is_empty()) {
        report.environment.clock = Some(ClockInfo { source: clock.source().into(), detail: clock.detail().to_string(), drift_ppm: None });
    }
    let checked = clock.as_ref().map(|_| ()).map_err(Clone::clone).and(root.clone()).and_then(|root| {
        ranks.refuse_sharing(&local).map_err(Error::bad_input)?;
        // Scratch namespaces of their own, also when the ranks share the run directory.
        let scratch = if ranks.shares_namespace() { format!("-rank{}", ranks.rank()) } else { String::new() };
        preflight(&local, &root, opts, &scratch)
    });
    // The report is started only once every rank agreed to run; its own failure is agreed on too.
    let agreed = ranks.preflight(checked).and_then(|()| ranks.preflight(if lead { start_report(&opts.report_path, &report) } else { Ok(()) }));
    let (root, clock) = match (agreed, root, clock) {
        (Ok(()), Ok(root), Ok(clock)) => (root, clock),
        (verdict, root, _) => {
            if let (Ok(root), true) = (root, owns_root) {
                let _ = namespace::remove(&root.dir);
            }
            return Err(verdict.err().unwrap_or_else(|| Error::environment("another rank could not start the run")));
        }
    };
    let _in_progress = InProgress::start(&root.dir, &opts.report_path);
    // Only the first rank writes the report; the others keep theirs in memory.
    let write = |report: &RunReport| if lead { crate::report::write_in_progress(&opts.report_path, report).err() } else { None };
    let mut progress = Progress::new(plan.cases.len() as u64, lead && opts.progress && !plan.cases.is_empty());
    let mut failed = false;
    let mut report_error = None;
    let mut stops = Stops::default();
    for (case, share) in plan.cases.iter().zip(&local.cases) {
        if ranks.stop_before_case(interrupted.load(Ordering::Relaxed)) {
            stops.interrupted = true;
            break;
        }
        progress.start_case(case);
        let local_result = run_case(&local, share, &root, opts, &Running { interrupted, progress: &progress, ranks, owns_root, clock: clock.clock() });
        let here = Stops { interrupted: interrupted.load(Ordering::Relaxed), timed_out: timed_out.load(Ordering::Relaxed) };
        let mut result;
        (result, stops) = ranks.case_end(case, local_result, here);
        if stops.timed_out {
            // Unlike Ctrl-C, a deadline is part of the job: the case it cut short is reported.
            result.status = CaseStatus::Failed;
            result.failure = Some(deadline::cut_short(opts.timeout));
            failed = true;
            progress.finish_case(&result);
            report.cases.push(result);
            report_error = write(&report);
            break;
        }
        if stops.interrupted {
            break; // a case cut short is not a result
        }
        let out_of_space = ran_out_of_space(&result);
        if out_of_space {
            let why = space::exhausted(&result.case_id, &data_paths(&result));
            result.status = CaseStatus::Failed;
            result.failure = Some(result.failure.take().map_or_else(|| why.clone(), |f| format!("{f}; {why}")));
        }
        failed |= result.status != CaseStatus::Ok;
        progress.finish_case(&result);
        report.cases.push(result);
        // A report that cannot be written would lose every later case: none starts. (Under MPI
        // the other ranks learn it at the next case's start, as they learn of a Ctrl-C.)
        report_error = write(&report);
        if out_of_space || report_error.is_some() {
            break;
        }
    }
    progress.done();
    for sweep in &plan.fio {
        if interrupted.load(Ordering::Relaxed) || report_error.is_some() {
            break;
        }
        failed |= run_fio_sweep(sweep, &root, &run_id, opts, interrupted, &mut report);
    }
    let was_timed_out = stops.timed_out || timed_out.load(Ordering::Relaxed);
    let was_interrupted = !was_timed_out && (stops.interrupted || interrupted.load(Ordering::Relaxed) || crate::fio::registry::interrupted());
    report.status = if was_timed_out {
        RunStatus::TimedOut
    } else if was_interrupted {
        RunStatus::Interrupted
    } else if failed || report_error.is_some() {
        // A run stopped because its report could not be written did not complete.
        RunStatus::Failed
    } else {
        RunStatus::Complete
    };
    report.finished_at = Some(crate::report::rfc3339(std::time::SystemTime::now()));
    if let Some(info) = &mut report.environment.clock {
        info.drift_ppm = clock.drift_ppm();
    }
    report.break_even = crate::report::breakeven::compute(&report);
    report.headlines = crate::report::table::headlines(&report);
    report.warnings = crate::report::warnings::for_report(&report);
    if report_error.is_none() && lead {
        report_error =
            crate::report::write_atomically(&opts.report_path, &report).and_then(|()| crate::report::write_html_atomically(&opts.report_path, &report)).err();
    }
    // What was measured is kept (on disk, or at least in `report`): a directory that cannot be
    // removed fails the run (exit 1), it does not turn it into a refusal or lose the results.
    let cleanup_error = if opts.keep || !owns_root { None } else { remove_run_directory(&root.dir).err() };
    let exit_code = if report_error.is_some() {
        EXIT_ENVIRONMENT
    } else if was_interrupted {
        EXIT_INTERRUPTED
    } else if failed || was_timed_out || cleanup_error.is_some() {
        EXIT_RUN_FAILED
    } else {
        EXIT_OK
    };
    Ok(RunOutcome { report, exit_code, report_error, cleanup_error })
}

/// Makes the report's directory and writes the report of a run that is starting, so a report
/// path that cannot be written is found before any case runs.
fn start_report(path: &Path, report: &RunReport) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::environment(format!("cannot create the report directory {}: {e}", dir.display())))?;
    }
    crate::report::write_atomically(path, report).map_err(Error::environment)
}

/// Removes the run's directory, unless a case's server objects could not be removed (its server
/// was down): then the directory stays with their records, and a message says how to finish.
fn remove_run_directory(dir: &Path) -> Result<(), String> {
    let pending = backend::record::find(dir);
    if pending.is_empty() {
        return namespace::remove(dir);
    }
    let cases: Vec<String> = pending.iter().filter_map(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    crate::say!(
        "stowbench: kept {}: the server objects of {} could not be removed; run `stowbench cleanup {}` once the server is back",
        dir.display(),
        cases.join(", "),
        dir.display()
    );
    Ok(())
}

/// Runs one fio sweep, appending each case to the report file as it finishes; returns whether
/// any fio case failed.
fn run_fio_sweep(sweep: &crate::fio::FioSweep, root: &Namespace, run_id: &str, opts: &RunOptions, interrupted: &AtomicBool, report: &mut RunReport) -> bool {
    use crate::fio::FioError;
    let mut failed = false;
    let total = crate::fio::expand(sweep).len();
    let mut done = 0;
    if opts.progress {
        crate::say!("fio sweep {}: {total} case(s)", sweep.name);
    }
    let outcome = crate::fio::run_sweep(sweep, &root.dir, run_id, &opts.fio, |(case, result)| {
        done += 1;
        match result {
            Ok(r) => {
                if opts.progress {
                    crate::say!("[{done}/{total}] {}: {:.0} IOPS, {}", case.id, r.iops, crate::units::format_rate_bytes(r.bw_bytes_per_s as f64));
                }
                report.fio_cases.push(r);
            }
            Err(FioError::Interrupted { .. }) => {}
            Err(e) => {
                failed = true;
                // A failure is shown even without progress, as a failed object-store case is.
                crate::say!("[{done}/{total}] {}: FAILED: {e}", case.id);
                report.fio_failures.push(crate::report::model::FioFailure { case_id: case.id.clone(), message: e.to_string() });
            }
        }
        if let Err(e) = crate::report::write_in_progress(&opts.report_path, report) {
            crate::say!("stowbench: {e}");
        }
        !interrupted.load(Ordering::Relaxed)
    });
    match outcome {
        Ok(()) | Err(FioError::Interrupted { .. }) => failed,
        Err(e) => {
            report.fio_failures.push(crate::report::model::FioFailure { case_id: format!("fio/{}", sweep.name), message: e.to_string() });
            true
        }
    }
}

/// Whether a case's operations failed for want of space.
fn ran_out_of_space(result: &CaseResult) -> bool {
    let no_space = crate::backend::ErrorKind::NoSpace.name();
    result.phases.iter().flat_map(|p| p.ops.values()).any(|o| o.errors.contains_key(no_space))
}

fn data_paths(result: &CaseResult) -> Vec<PathBuf> {
    let paths = result.backend_info.get("data_paths").and_then(|p| p.as_array());
    paths.into_iter().flatten().filter_map(|p| p.as_str()).map(PathBuf::from).collect()
}

/// Builds every target once and holds every case to its backend's declared capabilities (sizes,
/// delete, overwrite, op_timeout: `contract`) and to the space its data needs, before any data.
/// `scratch` ends the names of the namespaces the targets are built in (each rank's own).
fn preflight(plan: &Plan, root: &Namespace, opts: &RunOptions, scratch: &str) -> Result<(), Error> {
    let fio = &opts.fio;
    let mut needs = Vec::new();
    if !plan.fio.is_empty() {
        crate::fio::run::fio_version(&fio.fio_program)?;
    }
    for sweep in &plan.fio {
        for target in &sweep.target {
            crate::fio::target::check_target(target, &sweep.name)?;
        }
        crate::fio::cli::check_raw_options(sweep, &fio.fio_program)?;
    }
    needs.extend(space::fio_images(plan, &root.dir));
    if let Some(w) = plan.workloads.iter().find(|w| w.cold_cache) {
        if !crate::host::is_root() {
            return Err(Error::environment(format!(
                "workload \"{}\" asks for cache = \"cold\", which drops the page cache and needs root; run as root or use cache = \"warm\"",
                w.name
            )));
        }
    }
    for (i, target) in plan.targets.iter().enumerate() {
        let kind = backend::find(&target.backend).map_err(Error::bad_input)?;
        let ns = root.child(&format!("preflight-{i}{scratch}")).map_err(Error::environment)?;
        let built = target.options.construct_all(|options| (kind.construct)(options, &ns));
        let caps = built.as_ref().map(|b| b.capabilities());
        if let (Ok(b), Ok(caps)) = (&built, &caps) {
            if let Some(path) = b.describe().data_paths.first() {
                let keeps = caps.keeps_replaced_values;
                needs.extend(plan.cases.iter().filter(|c| c.target == i).map(|c| space::Need::of(c, path, keeps)));
            }
            let _ = b.cleanup();
        }
        namespace::remove(&ns.dir).map_err(Error::environment)?;
        let caps = caps.map_err(|found| match found.as_slice() {
            [one] => construct_failure(kind, target, one.clone()),
            // Every option mistake at once, in file order, as `validate` lists them.
            _ => {
                Error::bad_input(crate::job::render_mistakes(&plan.source, found.iter().map(|e| crate::job::Mistake::from_message(&plan.source, e)).collect()))
            }
        })?;
        contract::check(plan, i, &caps).map_err(|found| match found.as_slice() {
            [one] => Error::bad_input(one.clone()),
            _ => {
                Error::bad_input(crate::job::render_mistakes(&plan.source, found.iter().map(|e| crate::job::Mistake::from_message(&plan.source, e)).collect()))
            }
        })?;
    }
    if !opts.skip_space_check {
        space::check(&needs, opts.keep).map_err(Error::environment)?;
    }
    Ok(())
}

/// Why a target could not be built, with its kind and where in the job: a mistake in its
/// options is bad input; so is a server that answered and refused (a wrong password or database
/// in the URI: the driver's words say which). Only when nothing accepts a TCP connection at the
/// URI's host and port, or when something accepts it and never answers, is it the machine's
/// (environment): the kind rests on those answers, never on a driver's wording.
pub fn construct_failure(kind: &BackendKind, target: &TargetPlan, message: String) -> Error {
    if target.options.names_own_option(&message) || message.contains(backend::server::UNUSABLE_URI) {
        return Error::bad_input(message);
    }
    let message = target.options.locate_target_message(&message);
    let unreachable = kind.server.as_ref().and_then(|server| {
        // No URI, or one that is no URI of this backend, is the job's (or its variables') mistake.
        let endpoint = backend::server::endpoint(&target.options, kind.name, server).ok()?;
        let reads_as_uri = server.schemes.iter().any(|s| endpoint.uri.starts_with(s));
        reads_as_uri.then(|| backend::server::nothing_answers(&endpoint.uri, server.default_port)).flatten()
    });
    match unreachable {
        Some(nothing) => {
            Error::environment(format!("{message} ({}; start the server, or point the target's uri at one that runs)", nothing.said_beside(&message)))
        }
        // A listener that took the connection and never answered: the machine's trouble too.
        None if message.contains(backend::server::NO_ANSWER) => Error::environment(message),
        None => Error::bad_input(message),
    }
}

/// Everything a case needs while it runs.
struct CaseRun<'a> {
    plan: &'a Plan,
    case: &'a CasePlan,
    clock: Arc<dyn Clock>,
    keys: KeyTable,
    /// The keys this rank writes and reads (see `KeySpace`).
    key_space: keytable::KeySpace,
    payload: PayloadSpec,
    interrupted: &'a AtomicBool,
    progress: &'a Progress,
    verification: Verification,
    attempted: u64,
    failed_ops: u64,
    files: crate::stats::FileTally,
    /// Why workers stopped early (`give_up_after`), if any did.
    gave_up: Option<String>,
    /// The processes running the case (one on a single host).
    ranks: &'a dyn Ranks,
    /// How many workers the last phase merged: every rank's.
    workers_merged: u32,
}

fn failed_case(case: &CasePlan, plan: &Plan, why: String, started: Instant) -> CaseResult {
    let mut r = crate::report::empty_case(case, plan);
    r.status = CaseStatus::Failed;
    r.failure = Some(why);
    r.wall_ns = started.elapsed().as_nanos() as u64;
    r
}

/// What every case of a run shares while it runs.
struct Running<'a> {
    /// Set on Ctrl-C.
    interrupted: &'a AtomicBool,
    progress: &'a Progress,
    /// The processes running the job (one on a single host).
    ranks: &'a dyn Ranks,
    /// Whether this process made the run directory (not another rank's shared one).
    owns_root: bool,
    /// What times real backends' operations.
    clock: &'a Arc<dyn Clock>,
}

fn run_case(plan: &Plan, case: &CasePlan, root: &Namespace, opts: &RunOptions, running: &Running) -> CaseResult {
    let started = Instant::now();
    let target = &plan.targets[case.target];
    let ranks = running.ranks;
    // With one namespace for every rank, the lead alone makes, prepares and removes the store.
    let shared = ranks.shares_namespace();
    let owns_store = !shared || ranks.is_lead();
    if !owns_store {
        if let Err(e) = ranks.store_ready() {
            return failed_case(case, plan, e, started);
        }
    }
    let ns = match root.child(&format!("case-{:04}", case.index)) {
        Ok(ns) => ns,
        Err(e) => return failed_case(case, plan, e, started),
    };
    let built = backend::find(&target.backend).and_then(|kind| Ok(((kind.construct)(&target.options, &ns)?, kind.server.is_some())));
    let backend = match built {
        Ok((b, server)) if !owns_store && !server => match b.describe().data_paths.iter().find(|p| !p.exists()) {
            Some(missing) => return failed_case(case, plan, store_not_seen(missing, running.owns_root), started),
            None => b,
        },
        Ok((b, _)) => b,
        Err(e) => return failed_case(case, plan, e, started),
    };
    if owns_store {
        // Before anything exists on a server: what this case will own there, for `stowbench
        // cleanup` after a kill or a server that is down when the case ends.
        let objects = ranks.key_space(case).all;
        backend.note_keys(objects);
        if shared {
            backend.note_other_writers();
        }
        if let Err(e) = backend::record::write(&ns, &target.name, &target.backend, &target.options, backend.as_ref(), objects) {
            let _ = namespace::remove(&ns.dir);
            return failed_case(case, plan, e, started);
        }
    }
    let mut result = crate::report::empty_case(case, plan);
    let outcome = measure_case(plan, case, backend.as_ref(), &ns.dir, running, &mut result);
    if shared {
        // The store is removed once, by the lead, after every rank is done with it.
        ranks.leave_case();
    }
    let cleanup = if opts.keep {
        Ok(())
    } else if !owns_store {
        // Only a case directory this rank made in a run directory of its own is its to remove.
        if running.owns_root {
            namespace::remove(&ns.dir)
        } else {
            Ok(())
        }
    } else {
        backend.cleanup().map_err(|e| e.to_string()).and_then(|()| backend::record::release(&ns.dir)).and_then(|()| namespace::remove(&ns.dir))
    };
    if let Err(e) = outcome {
        result.status = CaseStatus::Failed;
        result.failure = Some(e);
    }
    if let Err(e) = cleanup {
        // Data left behind (on a server that went away, say) is a failure of its own, told
        // after whatever failed first: `stowbench cleanup` is the way to remove it.
        result.status = CaseStatus::Failed;
        result.failure = Some(match result.failure.take() {
            Some(first) => format!("{first}; then cleanup failed: {e}"),
            None => format!("cleanup failed: {e}"),
        });
    }
    result.wall_ns = started.elapsed().as_nanos() as u64;
    result
}

/// Why a rank that shares the lead's namespace cannot use the store the lead prepared.
fn store_not_seen(missing: &Path, own_run_directory: bool) -> String {
    let why = if own_run_directory { "the work directory is not the lead's on this host" } else { "it is not on a filesystem every rank sees" };
    format!(
        "[mpi] keys = \"shared\": this rank does not see the store the lead prepared ({} is missing here: {why}); \
         give --work-dir (or the target's path) on a filesystem every host mounts, or use keys = \"partitioned\"",
        missing.display()
    )
}

type Workers = (Vec<Box<dyn Session>>, Vec<Box<dyn Catalog>>);

/// Opens every worker's session (and file catalog), noting each worker's connect time.
fn open_workers(
    backend: &dyn Backend,
    case: &CasePlan,
    file_server: bool,
    case_dir: &Path,
    clock: &dyn Clock,
    connect_ns: &mut Vec<u64>,
) -> Result<Workers, String> {
    let (mut sessions, mut catalogs): Workers = (Vec::new(), Vec::new());
    for w in 0..case.threads as usize {
        // Connections, the catalog's included, are made before any phase: set-up is never timed.
        let t = clock.now_ns();
        sessions.push(backend.open_session(w).map_err(|e| format!("worker {w} could not open a session: {e}"))?);
        if file_server {
            catalogs.push(backend.open_catalog(w, case_dir).map_err(|e| format!("worker {w} could not open the file catalog: {e}"))?);
        }
        connect_ns.push(clock.now_ns() - t);
    }
    Ok((sessions, catalogs))
}

/// Measures one case in `case_dir` (its own namespace directory, where a file-server catalog
/// that is not kept in the backend's database lives).
fn measure_case(plan: &Plan, case: &CasePlan, backend: &dyn Backend, case_dir: &Path, running: &Running, result: &mut CaseResult) -> Result<(), String> {
    let Running { interrupted, progress, ranks, .. } = *running;
    let info = backend.describe();
    result.durability = info.durability.clone();
    result.filesystem = info.data_paths.first().and_then(|p| crate::host::filesystem_of(existing_ancestor(p)));
    result.backend_info = serde_json::to_value(&info).unwrap_or_default();
    // What the backend declared, beside what it is: a reader sees, say, that writes were
    // serialized inside it (the `serialized_writes` warning reads this).
    result.backend_info["capabilities"] = serde_json::to_value(backend.capabilities()).unwrap_or_default();
    let direct = info.options.get("direct").and_then(|d| d.as_bool()) == Some(true);
    if direct {
        result.cache_state = "direct".into();
    }
    if !ranks.shares_namespace() || ranks.is_lead() {
        backend.prepare().map_err(|e| format!("prepare failed: {e}"))?;
        if ranks.shares_namespace() {
            ranks.store_ready()?;
        }
    }
    let workload = &case.workload;
    let key_space = ranks.key_space(case);
    let mut run = CaseRun {
        plan,
        case,
        clock: backend.clock().unwrap_or_else(|| running.clock.clone()),
        keys: KeyTable::new(key_space.all),
        key_space,
        payload: PayloadSpec::new(ranks.payload_seed(plan.seed), workload.compressibility, case.size),
        interrupted,
        progress,
        verification: Verification { enabled: workload.verify, ..Default::default() },
        attempted: 0,
        failed_ops: 0,
        files: Default::default(),
        gave_up: None,
        ranks,
        workers_merged: case.threads,
    };
    backend.attach_payload(&run.payload);
    let server_pids = backend.server_pids();
    let writeback_scope = workload.settle_writeback.then(|| writeback::scope(&info.data_paths, !server_pids.is_empty()));
    let mut sampler = ResourceSampler::start(server_pids);
    let (mut sessions, mut catalogs) = open_workers(backend, case, workload.file_server, case_dir, run.clock.as_ref(), &mut result.connect_ns)?;
    if let Some(first) = catalogs.first_mut() {
        first.prepare().map_err(|e| format!("preparing the file catalog failed: {e}"))?;
    }
    if workload.preload {
        result.preload = Some(run.preload(&mut sessions)?);
    }
    for phase in &workload.phases {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        // The store comes to rest first (untimed): a phase must not pay for work the previous one
        // left deferred (Backend::settle), and a `before` command then finds every byte where it
        // will stay (damage it writes into SQLite's database file is not overwritten by a later
        // checkpoint of older WAL frames). A store that cannot come to rest (a failing disk) still
        // runs the phase, whose reads check the data acknowledged so far; the phase says so
        // (`not_at_rest`).
        sessions.iter_mut().for_each(|session| session.settle());
        let mut not_at_rest = backend.settle().err().map(|e| format!("bringing the store to rest failed: {e}"));
        // Then the dirty pages, the store's own and any other program's on its filesystems: a
        // phase must not pay for writeback that earlier work left (writeback.rs says how much).
        let writeback_settle = writeback_scope.as_ref().and_then(writeback::settle);
        if let Some(e) = writeback_settle.as_ref().and_then(|w| w.error.clone()) {
            not_at_rest = Some(not_at_rest.map_or(e.clone(), |first| format!("{first}; {e}")));
        }
        if !phase.before.is_empty() {
            // Before the warm-up and the cache drop, so a cold read afterwards reads what the
            // command left on disk.
            hook::run(&phase.before, &hook::environment(case, phase, &info, case_dir, plan.seed), &phase.label, interrupted)?;
            backend.reread_storage().map_err(|e| format!("after the `before` command of phase {}, reading the storage again failed: {e}", phase.label))?;
        }
        // The warm-up comes first: it reads the data, so a cache emptied before it would be full
        // again when the measured part starts.
        if let Some(warmup) = phase.warmup {
            run.phase(phase, warmup, true, &mut sessions, &mut catalogs)?;
        }
        let dropped = workload.cold_cache && phase.mix.iter().any(|(op, _)| *op != Op::Put);
        let mut server_restarted = false;
        if dropped {
            // Caches inside this process go too: a connection's own page cache (SQLite's holds
            // the last ~2 MB a session touched) and mapped data files, which the kernel does not
            // drop while they are mapped. The sessions are closed and opened again after the
            // drop, untimed, as at the start of the case; a server restart needs that anyway.
            sessions.clear();
            catalogs.clear();
            backend.release_cached_data().map_err(|e| format!("before the cold phase {}, releasing cached data failed: {e}", phase.label))?;
            if let Some(service) = backend.script_service() {
                let banked = sampler.server_cpu_before_restart();
                let pid = service.restart()?;
                sampler.replace_server(banked, pid.into_iter().collect());
                server_restarted = true;
            }
            crate::host::drop_caches()?;
            (sessions, catalogs) = open_workers(backend, case, workload.file_server, case_dir, run.clock.as_ref(), &mut Vec::new())?;
        }
        let stop = phase::effective_stop(phase.stop, case.objects);
        // This process and the servers it samples; with several ranks the case's result sums
        // every rank's count (multihost::merge), so a host's servers are counted by one rank.
        let io_processes = if run.ranks.counts_host_servers() { sampler.server_processes() } else { Vec::new() };
        let reads_before = crate::sampler::device_read_bytes_of(&io_processes);
        let mut measured = run.phase(phase, stop, false, &mut sessions, &mut catalogs)?;
        measured.device_read_bytes = reads_before.zip(crate::sampler::device_read_bytes_of(&io_processes)).map(|(before, after)| after.saturating_sub(before));
        measured.cache_state = if direct {
            "direct"
        } else if dropped {
            "cold"
        } else {
            "warm"
        }
        .into();
        measured.server_restarted = server_restarted;
        measured.not_at_rest = not_at_rest;
        measured.writeback_settle = writeback_settle;
        let gave_up = measured.gave_up_workers;
        result.phases.push(measured);
        if gave_up > 0 {
            let seconds = workload.give_up_after_ns as f64 / 1e9;
            run.gave_up.get_or_insert(format!(
                "gave up in phase {}: {gave_up} of {} workers saw nothing but failures for {seconds} s (give_up_after)",
                phase.label, run.workers_merged
            ));
            if gave_up == run.workers_merged {
                // Every worker found the store dead: later phases would only repeat that.
                break;
            }
        }
    }
    result.resources = sampler.finish();
    if let Some(catalog) = catalogs.first_mut() {
        let session = sessions.first_mut().expect("a case has at least one worker");
        let audit = audit::file_server(catalog.as_mut(), session.as_mut(), &run.files, workload.duplicates.unwrap_or(0.0), &run.keys)
            .map_err(|e| format!("auditing the file catalog failed: {e}"))?;
        result.file_server = Some(audit);
    }
    drop(catalogs);
    drop(sessions);
    // A file server stores each distinct content once: that, not the sum of file sizes, is what
    // the disk holds.
    let logical = result.file_server.as_ref().map_or_else(|| run.keys.live_bytes(), |f| f.content_bytes);
    let usage = backend.disk_usage().map_err(|e| format!("disk usage: {e}"));
    if let Ok(usage) = &usage {
        result.disk = DiskResult {
            logical_bytes: logical,
            allocated_bytes: usage.allocated_bytes,
            apparent_bytes: usage.apparent_bytes,
            files: usage.files,
            server_reported_bytes: usage.server_reported_bytes,
            amplification: (logical > 0 && !usage.allocated_unknown).then(|| usage.allocated_bytes as f64 / logical as f64),
            allocated_unknown: usage.allocated_unknown,
        };
    }
    result.verification = run.verification.clone();
    result.own_work_share = result.compute_own_work_share();
    // What went wrong during the phases (a server that died, say) comes first; that the disk
    // usage could not be read afterwards is its consequence.
    match (run.judge(result), usage) {
        (Err(verdict), Err(disk)) => Err(format!("{verdict}; then {disk}")),
        (Ok(()), Err(disk)) => Err(disk),
        (verdict, Ok(_)) => verdict,
    }
}

/// The deepest existing ancestor of a path (data paths may not exist yet).
fn existing_ancestor(p: &Path) -> &Path {
    p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"))
}

impl CaseRun<'_> {
    fn context<'c>(&'c self, phase: &'c PhasePlan, stop: Stop, warmup: bool) -> PhaseContext<'c> {
        let w = &self.case.workload;
        PhaseContext {
            phase,
            stop,
            warmup,
            objects: self.case.objects,
            payload: self.payload.clone(),
            verify: w.verify,
            retries: self.plan.targets[self.case.target].retries.unwrap_or(w.retries),
            give_up_after_ns: w.give_up_after_ns,
            op_timeout_ns: w.op_timeout_ns,
            duplicates: w.duplicates.unwrap_or(0.0),
            keys: &self.keys,
            key_space: self.key_space,
            reads_all: self.key_space.is_shared(self.case.objects) && !phase.mix.iter().any(|(op, _)| *op == Op::Delete),
            clock: self.clock.as_ref(),
            interrupted: self.interrupted,
            seed: self.plan.seed,
            next_op: AtomicU64::new(0),
            bytes_claimed: AtomicU64::new(0),
            origin_ns: None,
        }
    }

    fn phase(
        &mut self,
        phase: &PhasePlan,
        stop: Stop,
        warmup: bool,
        sessions: &mut [Box<dyn Session>],
        catalogs: &mut [Box<dyn Catalog>],
    ) -> Result<PhaseResult, String> {
        let wait_before: u64 = sessions.iter().map(|s| s.wait_ns()).sum();
        let workers = self.run_workers(phase, stop, warmup, sessions, catalogs)?;
        let wait_after: u64 = sessions.iter().map(|s| s.wait_ns()).sum();
        let (workers, lock_wait_ns) = self.ranks.phase_end(&phase.label, workers, wait_after - wait_before)?;
        if phase.mix.iter().any(|(op, _)| op.writes() || *op == Op::Delete) {
            self.ranks.share_keys(&self.keys, self.key_space, self.case.objects)?;
        }
        self.workers_merged = workers.len() as u32;
        for w in &workers {
            self.files.add(&w.files);
            self.verification.add(w.verified, w.mismatches, &w.mismatched);
        }
        let merged = crate::stats::merge(&phase.label, workers, lock_wait_ns);
        // The steps of uploads and downloads are parts of them, not operations of their own.
        let file_server = phase.mix.iter().any(|(op, _)| op.is_file_server());
        let counted = || merged.ops.iter().filter(|(name, _)| Op::from_name(name).is_some_and(|op| op.counts_in_totals(file_server))).map(|(_, o)| o);
        let errors: u64 = counted().map(|o| o.errors.values().sum::<u64>()).sum();
        self.attempted += counted().map(|o| o.count).sum::<u64>() + errors;
        self.failed_ops += errors;
        Ok(merged)
    }

    /// Runs a phase's workers from the ranks' start barrier. They stop on Ctrl-C and when
    /// another rank ends its share of the phase early; when this rank's share ends early (a
    /// worker panicked, or Ctrl-C), it tells the others.
    fn run_workers(
        &self,
        phase: &PhasePlan,
        stop: Stop,
        warmup: bool,
        sessions: &mut [Box<dyn Session>],
        catalogs: &mut [Box<dyn Catalog>],
    ) -> Result<Vec<crate::stats::WorkerStats>, String> {
        let stop_now = AtomicBool::new(self.interrupted.load(Ordering::Relaxed));
        let mut ctx = self.context(phase, stop, warmup);
        ctx.interrupted = &stop_now;
        ctx.origin_ns = self.ranks.phase_start(self.clock.as_ref())?;
        let workers = phase::run(&ctx, sessions, catalogs, || {
            // A minimum duration makes the count a floor: how many operations is not known ahead.
            let planned = stop.count.filter(|_| stop.min_duration_ns.is_none());
            self.progress.phase_tick(&phase.label, ctx.next_op.load(Ordering::Relaxed), planned);
            if self.interrupted.load(Ordering::Relaxed) || self.ranks.stop_requested() {
                stop_now.store(true, Ordering::Relaxed);
            }
        });
        if workers.is_err() || self.interrupted.load(Ordering::Relaxed) {
            self.ranks.request_stop();
        }
        workers
    }

    fn preload(&mut self, sessions: &mut [Box<dyn Session>]) -> Result<PreloadResult, String> {
        let put = PhasePlan { label: "preload".into(), ..PhasePlan::single(Op::Put, crate::workload::keys::KeyOrder::Sequential) };
        let t = self.clock.now_ns();
        let workers = self.run_workers(&put, Stop { count: Some(self.case.objects), ..Stop::default() }, false, sessions, &mut [])?;
        let (workers, _) = self.ranks.phase_end("preload", workers, 0)?;
        self.ranks.share_keys(&self.keys, self.key_space, self.case.objects)?;
        let merged = crate::stats::merge("preload", workers, 0);
        let put = merged.ops.get("put");
        Ok(PreloadResult {
            ops: put.map(|p| p.count).unwrap_or(0),
            bytes: put.map(|p| p.bytes).unwrap_or(0),
            elapsed_ns: self.clock.now_ns() - t,
            errors: put.map(|p| p.errors.values().sum()).unwrap_or(0),
            first_errors: put.map(|p| p.first_errors.clone()).unwrap_or_default(),
        })
    }

    /// Decides the case's status: verification mismatches and the error budget.
    fn judge(&self, result: &mut CaseResult) -> Result<(), String> {
        let v = &self.verification;
        if v.mismatches > 0 {
            // Every listed object on its own line: "which objects and what damage" is the answer.
            let lines: Vec<String> = v.mismatched.iter().map(|m| format!("\n    {}", m.line())).collect();
            let more = if v.mismatched_cut {
                format!("\n    … and {} more (see verification.mismatches)", v.mismatches - v.mismatched.len() as u64)
            } else {
                String::new()
            };
            return Err(format!("verification failed: {} of {} gets differ from what was put:{}{more}", v.mismatches, v.checked, lines.concat()));
        }
        // Before the budget: the measured phases' failures follow from objects never stored.
        if let Some(preload) = result.preload.as_ref().filter(|p| p.errors > 0) {
            let first = preload.first_errors.first().map(|e| format!("; first: {e}")).unwrap_or_default();
            return Err(format!("preload failed: {} of {} objects could not be stored before the measured phases{first}", preload.errors, self.case.objects));
        }
        let budget = self.case.workload.max_error_ratio;
        let over_budget = (self.attempted > 0 && self.failed_ops as f64 > budget * self.attempted as f64).then(|| {
            // The first failure says which call failed on which object: where to look first.
            let first = result.phases.iter().flat_map(|p| p.ops.values()).find_map(|o| o.first_errors.first());
            let first = first.map(|e| format!("; first: {e}")).unwrap_or_default();
            format!("error budget exceeded: {} of {} operations failed (max_error_ratio = {budget}){first}", self.failed_ops, self.attempted)
        });
        match (&self.gave_up, over_budget) {
            (Some(gave_up), Some(budget)) => return Err(format!("{gave_up}; {budget}")),
            (Some(gave_up), None) => return Err(gave_up.clone()),
            (None, Some(budget)) => return Err(budget),
            (None, None) => {}
        }
        if let Some(problem) = result.file_server.as_ref().and_then(|f| f.problems.first()) {
            return Err(format!("file catalog audit failed: {problem}"));
        }
        result.status = CaseStatus::Ok;
        Ok(())
    }
}
