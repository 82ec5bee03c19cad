//! Running fio for one case: check the job file with `fio --parse-only`, run it with a time limit,
//! stop it cleanly on Ctrl-C, and read its JSON. stowbench drives fio; it never reimplements it.
//!
//! Files live in the target's data directory; before a case runs, files of a different layout
//! (size, file count) are removed so space does not pile up, and files of the same layout are
//! reused. This module writes only inside the prepared target's directories.

use super::case::FioCase;
use super::error::FioError;
use super::parse::parse_fio_json;
use super::registry;
use super::render::render_job;
use super::result::{FioCaseResult, RunRecord};
use super::spec::{FioSweep, IoEngine};
use super::target::{prepare_target, PreparedTarget};
use super::{device, sys};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to run cases.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The fio program to run (default "fio" on PATH).
    pub fio_program: PathBuf,
    /// Ask fio for `json+` so results carry latency histogram bins.
    pub histogram: bool,
    /// Time limit per case; None means ramp + runtime + 60 s + time to lay out files at 20 MB/s.
    pub timeout: Option<Duration>,
    /// The caller's stop flag (the core's Ctrl-C flag); when set, fio is asked to stop.
    pub stop: Option<Arc<AtomicBool>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { fio_program: PathBuf::from("fio"), histogram: true, timeout: None, stop: None }
    }
}

/// Name of the file in the data directory that records which file layout is there.
const DATASET_FILE: &str = ".stowbench-dataset";

/// fio's version string ("fio-3.33"); an error tells how to install fio.
pub fn fio_version(program: &Path) -> Result<String, FioError> {
    let output = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| FioError::FioMissing { detail: format!("{}: {e}", program.display()) })?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !output.status.success() || !text.starts_with("fio") {
        return Err(FioError::FioMissing { detail: format!("`{} --version` printed \"{text}\"", program.display()) });
    }
    Ok(text)
}

/// Checks a job file with `fio --parse-only`; the error carries fio's message and the file text.
pub fn parse_only(program: &Path, job_path: &Path, case_id: &str, job_file: &str) -> Result<(), FioError> {
    let output =
        Command::new(program).arg("--parse-only").arg(job_path).stdin(Stdio::null()).output().map_err(|e| FioError::FioMissing { detail: e.to_string() })?;
    let mut message = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !stdout.is_empty() {
        message = format!("{message}\n{stdout}").trim().to_string();
    }
    // A job fio drops after a bad option must not pass unnoticed even if a future fio exits 0.
    if output.status.success() && !message.contains("dropped") && !message.contains("Bad option") {
        return Ok(());
    }
    Err(FioError::ParseOnly { case_id: case_id.into(), job_file: job_file.into(), message })
}

/// Runs one case on a prepared target and returns its result.
pub fn run_case(case: &FioCase, target: &PreparedTarget, options: &RunOptions) -> Result<FioCaseResult, FioError> {
    if stop_requested(options) {
        return Err(FioError::Interrupted { case_id: case.id.clone() });
    }
    let version = fio_version(&options.fio_program)?;
    check_target_for_case(case, target)?;
    let job_file = render_job(case, target.data_path());
    let jobs_dir = target.control_dir.join("jobs");
    std::fs::create_dir_all(&jobs_dir).map_err(|e| FioError::io(&jobs_dir, e))?;
    let job_path = jobs_dir.join(format!("{}.fio", case.job_name()));
    let out_path = jobs_dir.join(format!("{}.json", case.job_name()));
    let log_path = jobs_dir.join(format!("{}.log", case.job_name()));
    std::fs::write(&job_path, &job_file).map_err(|e| FioError::io(&job_path, e))?;
    let _ = std::fs::remove_file(&out_path);
    parse_only(&options.fio_program, &job_path, &case.id, &job_file)?;

    let format = if options.histogram { "json+" } else { "json" };
    let args = [format!("--output-format={format}"), format!("--output={}", out_path.display()), job_path.display().to_string()];
    let command = format!("{} {}", options.fio_program.display(), args.join(" "));
    let log = std::fs::File::create(&log_path).map_err(|e| FioError::io(&log_path, e))?;
    let log_err = log.try_clone().map_err(|e| FioError::io(&log_path, e))?;
    let writeback_settle = settle_writeback(case, target);
    let started = Instant::now();
    let child = Command::new(&options.fio_program)
        .args(&args)
        .current_dir(&target.control_dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| FioError::FioMissing { detail: e.to_string() })?;
    let status = supervise(child, case, options)?;
    let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    // A terminal's Ctrl-C reaches fio too, which then exits "successfully" with a shortened run:
    // such a result is partial and must not be reported as a measurement.
    if stop_requested(options) {
        return Err(FioError::Interrupted { case_id: case.id.clone() });
    }
    let messages = std::fs::read_to_string(&log_path).unwrap_or_default().trim().to_string();
    if !status.success() {
        return Err(FioError::FioFailed { case_id: case.id.clone(), status: status.to_string(), stderr: messages, job_file });
    }
    let text = std::fs::read_to_string(&out_path).map_err(|e| output_error(case, &out_path, e))?;
    let output = parse_fio_json(&text).map_err(|e| output_error(case, &out_path, e))?;
    if let Some(job) = output.jobs.iter().find(|j| j.error != 0) {
        let stderr = format!("fio reported error {} for job {}: {messages}", job.error, job.jobname);
        return Err(FioError::FioFailed { case_id: case.id.clone(), status: "job error".into(), stderr, job_file });
    }
    let mut output = output;
    if output.fio_version == "unknown" {
        output.fio_version = version;
    }
    let record = RunRecord { job_file, command, messages, wall_ns, writeback_settle };
    FioCaseResult::build(case, &target.facts, output, record).map_err(|e| output_error(case, &out_path, e))
}

/// Writes back the dirty pages before the case, as `sync` between fio runs by hand: a buffered
/// case would otherwise pay for the writes the case before it left. A failure is recorded and the
/// case runs anyway, as a phase of `stowbench run` does.
fn settle_writeback(case: &FioCase, target: &PreparedTarget) -> Option<crate::report::model::WritebackSettle> {
    use crate::runner::writeback::{settle, Scope};
    if !case.settle_writeback || case.ioengine == IoEngine::Null {
        return None;
    }
    let scope = if target.facts.kind == "dir" {
        Scope::Filesystems(vec![target.data_path().to_path_buf()])
    } else {
        // A made filesystem's loop device leaves its backing file's pages dirty in the filesystem
        // below it, and a raw device's buffered writes sit in the block device's own cache:
        // sync(2) writes back both.
        Scope::All
    };
    settle(&scope)
}

fn output_error(case: &FioCase, path: &Path, message: impl std::fmt::Display) -> FioError {
    FioError::Output { case_id: case.id.clone(), path: path.display().to_string(), message: message.to_string() }
}

/// Waits for fio, stopping it on the caller's stop flag, on an interrupt, or at the time limit.
fn supervise(mut child: Child, case: &FioCase, options: &RunOptions) -> Result<ExitStatus, FioError> {
    let pid = child.id() as i32;
    registry::add_fio_pid(pid);
    let limit = options.timeout.unwrap_or_else(|| default_timeout(case));
    let started = Instant::now();
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(FioError::io(Path::new("fio"), e)),
        }
        if stop_requested(options) {
            stop_child(&mut child, libc::SIGINT);
            break Err(FioError::Interrupted { case_id: case.id.clone() });
        }
        if started.elapsed() > limit {
            stop_child(&mut child, libc::SIGTERM);
            break Err(FioError::Timeout { case_id: case.id.clone(), limit_s: limit.as_secs() });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    registry::remove_fio_pid(pid);
    outcome
}

/// Whether the caller's stop flag is set or an interrupt cleanup has started.
fn stop_requested(options: &RunOptions) -> bool {
    options.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) || registry::interrupted()
}

/// Sends `signal`, gives fio 5 s to finish writing, then kills it; always reaps the child.
fn stop_child(child: &mut Child, signal: i32) {
    // SAFETY: kill on our own child's pid; it has not been reaped yet, so the pid is still ours.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Ramp + runtime + one minute + laying out the files at a pessimistic 20 MB/s.
pub fn default_timeout(case: &FioCase) -> Duration {
    let layout_s = case.data_bytes() / 20_000_000;
    Duration::from_nanos(case.ramp_time.0.saturating_add(case.runtime.0)) + Duration::from_secs(60 + layout_s)
}

/// Per-case checks on the machine: device still unused and big enough, data layout, space, O_DIRECT.
fn check_target_for_case(case: &FioCase, target: &PreparedTarget) -> Result<(), FioError> {
    if target.is_device() {
        // Re-checked before every case: something may have mounted it since the last one.
        let dev = target.data_path();
        let facts = device::check_device(dev, dev)?;
        if case.size.bytes() > facts.size_bytes {
            return Err(FioError::NoSpace {
                case_id: case.id.clone(),
                dir: dev.display().to_string(),
                needed_bytes: case.size.bytes(),
                available_bytes: facts.size_bytes,
            });
        }
        return Ok(());
    }
    if case.ioengine == IoEngine::Null {
        return Ok(());
    }
    let data = target.data_path();
    let existing = ensure_dataset(data, &case.dataset_key())?;
    let needed = case.data_bytes().saturating_sub(existing);
    let available = sys::free_bytes(data)?;
    if needed > available {
        return Err(FioError::NoSpace { case_id: case.id.clone(), dir: data.display().to_string(), needed_bytes: needed, available_bytes: available });
    }
    if case.direct {
        target.probe_direct()?;
    }
    Ok(())
}

/// Keeps the data directory's files if they have the layout `key`, else removes them (only the
/// files in the directory fio uses; the directory itself was created by stowbench). Returns the
/// bytes of files already in place.
fn ensure_dataset(data: &Path, key: &str) -> Result<u64, FioError> {
    let key_path = data.join(DATASET_FILE);
    let current = std::fs::read_to_string(&key_path).unwrap_or_default();
    if current.trim() != key {
        for entry in std::fs::read_dir(data).map_err(|e| FioError::io(data, e))?.flatten() {
            let name = entry.file_name();
            // Only fio's data files (named stow.*) and our own bookkeeping are removed.
            if name.to_string_lossy().starts_with("stow.") || name == DATASET_FILE {
                std::fs::remove_file(entry.path()).map_err(|e| FioError::io(&entry.path(), e))?;
            }
        }
        std::fs::write(&key_path, key).map_err(|e| FioError::io(&key_path, e))?;
    }
    let mut bytes = 0;
    for entry in std::fs::read_dir(data).map_err(|e| FioError::io(data, e))?.flatten() {
        if entry.file_name().to_string_lossy().starts_with("stow.") {
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    Ok(bytes)
}

/// What happened to one case of a sweep, handed to the caller as soon as it is known.
pub type CaseOutcome<'a> = (&'a FioCase, Result<FioCaseResult, FioError>);

/// Validates, expands and runs a whole sweep, target by target; `on_case` sees each outcome at once
/// (so the caller can append it to the report file) and returns false to stop early. Targets are
/// cleaned up after their cases; an interrupt stops the sweep with `FioError::Interrupted`.
pub fn run_sweep(sweep: &FioSweep, work_dir: &Path, run_id: &str, options: &RunOptions, mut on_case: impl FnMut(CaseOutcome) -> bool) -> Result<(), FioError> {
    sweep.validate()?;
    fio_version(&options.fio_program)?;
    let cases = super::case::expand(sweep);
    for spec in &sweep.target {
        if stop_requested(options) {
            return Err(FioError::Interrupted { case_id: "(between targets)".into() });
        }
        let mut target = prepare_target(spec, work_dir, run_id)?;
        for case in cases.iter().filter(|c| &c.target == spec) {
            let outcome = run_case(case, &target, options);
            let interrupted = matches!(outcome, Err(FioError::Interrupted { .. }));
            let keep_going = on_case((case, outcome));
            if interrupted {
                target.cleanup()?;
                return Err(FioError::Interrupted { case_id: case.id.clone() });
            }
            if !keep_going {
                return target.cleanup();
            }
        }
        target.cleanup()?;
    }
    Ok(())
}
