//! Issue 14's I/O-error line, end to end through the `stowbench` binary: filesystem calls of
//! `fs`, `sqlite-file` and `pack` fail on purpose — the 1st, 2nd, …, n-th call of a family,
//! once (transient) or from then on (persistent) — and every run must
//!
//! - end by itself (a time-out here is a hang) with exit code 0 or 1, never a panic or a signal;
//!   3 only for a run whose own set-up on the machine failed (no report), saying why;
//! - when it failed, say which call failed (a word of the family: "fsync", "write", …) and on
//!   what: the key of each failed operation (`first_errors`), or the path;
//! - keep every acknowledged object: between the put and the get phase an independent reader
//!   (this binary as the get phase's `before` command, without the fault shim) reads every key
//!   from the store and checks it against its payload; every put the report counts as stored
//!   must read back right, and no key may read back wrong;
//! - leave nothing: the run's directory is gone afterwards; where the faults stopped the run
//!   from removing it (a persistent unlink failure), the run says so and `stowbench cleanup`
//!   removes it; nothing appears outside it;
//! - never turn a failed fsync into a reported success: with retries, a put whose fsync failed
//!   is written and synced anew (the shim's trace shows a new write before the next sync) or
//!   counted as failed.
//!
//! The shim's trace also shows which call SQLite syncs with: `fdatasync`, as a distribution's build
//! of SQLite does (`sqlite_syncs_its_files_with_fdatasync_as_a_distributions_build_does`).
//!
//! How the faults get in: `tests/io_faults/shim.c`, an LD_PRELOAD library compiled here with
//! `cc`, wraps libc's file calls (plain, 64 and *at variants, which both Rust's std and the
//! bundled SQLite use) and fails the chosen one with EIO, only under the run's work directory.
//! A counting run without faults first measures how many calls of each family a run makes; the
//! sweep then samples n across that range (deterministically: the same n on every run of the
//! test). A last test fills the disk instead (ENOSPC). Without a C compiler the tests are
//! skipped loudly, and fail with CI=true.

mod common;
#[path = "io_faults/store.rs"]
mod store;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Objects per run, each put once then read once; every failed put is listed in the report
/// (`first_errors` keeps 10), so the test knows exactly which keys were acknowledged.
const OBJECTS: u64 = 10;
/// Object size: one write call per object in `fs`, one record write in `pack`.
const SIZE_BYTES: u64 = 20_000;
const SEED: u64 = 14;
/// A run that takes longer hangs (a normal one takes well under a second).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Values of n per family and mode, spread evenly from the first call to the last; a failing
/// fsync is tried at every n (once each).
const POINTS: u64 = 5;

/// Call families the shim fails, with the words a message naming such a call contains.
const FAMILIES: &[(&str, &[&str])] = &[
    ("open", &["open", "create"]),
    ("write", &["write"]),
    ("read", &["read"]),
    ("fsync", &["fsync", "fdatasync"]),
    ("rename", &["rename"]),
    ("truncate", &["truncate"]),
    ("mkdir", &["mkdir"]),
    ("unlink", &["unlink", "rmdir"]),
    ("stat", &["stat"]),
];

/// A target of the sweep: its name and backend options.
struct Target {
    name: &'static str,
    backend: &'static str,
    options: &'static str,
}

const TARGETS: &[Target] = &[
    Target { name: "fs", backend: "fs", options: "fsync = true" },
    Target { name: "sqlite-file", backend: "sqlite-file", options: "fsync = true" },
    Target { name: "pack", backend: "pack", options: "" },
    Target { name: "pack-fsync", backend: "pack", options: "fsync = true" },
];

/// The line the verify hook appends to the shim's trace, so the test can tell the put phase's
/// calls from the get phase's.
const PHASE_MARK: &str = "-- get phase --";

fn key(i: u64) -> String {
    stowbench::workload::keys::key_name(i)
}

// ---------------------------------------------------------------------------------------------
// The independent reader: run by stowbench as the get phase's `before` command, without the shim.

/// Reads every key of the case's store and writes "<key> ok|absent|bad <why>" lines to
/// `IOFAULT_VERIFY_OUT` (does nothing when stowbench did not start it).
#[test]
#[ignore = "run by stowbench as the get phase's before command"]
fn verify_hook() {
    let Ok(out) = std::env::var("IOFAULT_VERIFY_OUT") else { return };
    if let Ok(trace) = std::env::var("STOWBENCH_FAULT_TRACE") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(trace).unwrap();
        writeln!(f, "{PHASE_MARK}").unwrap();
    }
    let case_dir = PathBuf::from(std::env::var("STOWBENCH_CASE_DIR").unwrap());
    let backend = std::env::var("IOFAULT_BACKEND").unwrap();
    let options = std::env::var("IOFAULT_OPTIONS").unwrap();
    let values = if backend == "pack" { store::read_pack(&case_dir) } else { store::read_with_backend(&case_dir, &backend, &options, OBJECTS) };
    let payload = stowbench::workload::payload::PayloadSpec::new(SEED, 0.0, stowbench::workload::size::SizeSpec::Fixed { bytes: SIZE_BYTES });
    let lines: Vec<String> = (0..OBJECTS)
        .map(|i| match values.get(&key(i)) {
            None => format!("{} absent", key(i)),
            Some(Err(e)) => format!("{} bad read failed: {e}", key(i)),
            Some(Ok(bytes)) => match payload.verify(i, 0, bytes) {
                Ok(()) => format!("{} ok", key(i)),
                Err(m) => format!("{} bad {}", key(i), m.line()),
            },
        })
        .collect();
    std::fs::write(out, lines.join("\n") + "\n").unwrap();
}

// ---------------------------------------------------------------------------------------------
// Running stowbench under the shim.

/// The shim, compiled once per test process; `None` (skipped loudly) without a C compiler. It
/// is named after its source's hash and put in place by rename, so test processes running at
/// the same time share one file and never see a half-written one.
fn shim() -> Option<&'static Path> {
    static SHIM: OnceLock<Option<PathBuf>> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/io_faults/shim.c");
        let hash = stowbench::hash::xxh3_64(&std::fs::read(src).unwrap());
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("io_faults_shim_{hash:016x}.so"));
        let tmp = out.with_extension(format!("so.{}", std::process::id()));
        match Command::new("cc").args(["-shared", "-fPIC", "-O2", "-o"]).arg(&tmp).arg(src).arg("-ldl").output() {
            Ok(o) if o.status.success() => {
                std::fs::rename(&tmp, &out).unwrap();
                Some(out)
            }
            Ok(o) => panic!("cc could not build the shim: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => {
                assert!(!common::in_ci(), "no C compiler (cc: {e}) and CI=true: install gcc");
                eprintln!("SKIPPED: the fault shim needs a C compiler (cc: {e})");
                None
            }
        }
    })
    .as_deref()
}

/// Which call to fail.
#[derive(Clone, Debug)]
struct Fault {
    family: &'static str,
    nth: u64,
    persistent: bool,
}

/// ENOSPC: the errno of a full disk (the sweep's faults are EIO).
const ENOSPC: i32 = 28;

/// What one run did.
struct Run {
    /// What ran, for messages.
    label: String,
    base: tempfile::TempDir,
    code: Option<i32>,
    stderr: String,
    report: Option<Value>,
    /// The shim's log: one line per failed call.
    injected: Vec<String>,
    /// The reader's verdict per key, when the get phase began.
    verified: Option<BTreeMap<String, String>>,
    /// Every watched call in order (when traced), with `PHASE_MARK` where the get phase began.
    trace: Vec<String>,
    /// Calls per family (counting runs).
    counts: BTreeMap<String, u64>,
}

impl Run {
    fn work(&self) -> PathBuf {
        self.base.path().join("work")
    }

    /// Everything the case's report says went wrong: failures and each operation's first errors.
    fn failure_text(&self) -> String {
        let mut text = self.stderr.clone();
        for case in self.report.iter().flat_map(|r| r["cases"].as_array().into_iter().flatten()) {
            text += &format!("\n{}", case["failure"].as_str().unwrap_or_default());
            for e in first_errors(case) {
                text += &format!("\n{e}");
            }
        }
        text
    }

    fn case(&self) -> Option<&Value> {
        self.report.as_ref().and_then(|r| r["cases"].get(0))
    }

    /// The put phase's operation figures, when the case got that far.
    fn puts(&self) -> Option<&Value> {
        self.case()?["phases"].as_array()?.iter().find(|p| p["phase"].as_str().is_some_and(|l| l.starts_with("put")))?["ops"].get("put")
    }
}

fn first_errors(case: &Value) -> Vec<String> {
    let phases = case["phases"].as_array().into_iter().flatten();
    let ops = phases.flat_map(|p| p["ops"].as_object().into_iter().flat_map(|o| o.values()));
    ops.flat_map(|o| o["first_errors"].as_array().into_iter().flatten().filter_map(|e| e.as_str().map(String::from))).collect()
}

fn job(target: &Target, retries: u32) -> String {
    let exe = std::env::current_exe().unwrap();
    let hook = ["env", "-u", "LD_PRELOAD", exe.to_str().unwrap(), "verify_hook", "--exact", "--ignored", "--test-threads=1"];
    let hook: Vec<String> = hook.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "version = 1\nseed = {SEED}\n[[target]]\nname = \"{}\"\nbackend = \"{}\"\n{}\n[[workload]]\nname = \"w\"\nsizes = [{SIZE_BYTES}]\nobjects = {OBJECTS}\nretries = {retries}\n\
         [[workload.phase]]\nmix = {{ put = 1 }}\n[[workload.phase]]\nmix = {{ get = 1 }}\nbefore = [{}]\n",
        target.name,
        target.backend,
        target.options,
        hook.join(", ")
    )
}

/// Runs the job of `target` under the shim with `fault` (none: count calls), in a fresh directory.
fn run(target: &Target, fault: Option<&Fault>, retries: u32, trace: bool) -> Run {
    run_with_errno(target, fault, retries, trace, None)
}

/// `run`, failing with `errno` instead of EIO.
fn run_with_errno(target: &Target, fault: Option<&Fault>, retries: u32, trace: bool, errno: Option<i32>) -> Run {
    let shim = shim().expect("the shim was built");
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let b = base.path();
    std::fs::write(b.join("job.toml"), job(target, retries)).unwrap();
    std::fs::create_dir(b.join("work")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_stowbench"));
    command
        .args(["run", "job.toml", "--no-progress", "--format", "json", "--out", "out", "--work-dir"])
        .arg(b.join("work"))
        .current_dir(b)
        .env("LD_PRELOAD", shim)
        .env("STOWBENCH_FAULT_PATH", b.join("work"))
        .env("STOWBENCH_FAULT_LOG", b.join("injected"))
        .env("STOWBENCH_FAULT_COUNT", b.join("counts"))
        .env("IOFAULT_VERIFY_OUT", b.join("verified"))
        .env("IOFAULT_BACKEND", target.backend)
        .env("IOFAULT_OPTIONS", target.options)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(b.join("stderr")).unwrap());
    if trace {
        command.env("STOWBENCH_FAULT_TRACE", b.join("trace"));
    }
    if let Some(errno) = errno {
        command.env("STOWBENCH_FAULT_ERRNO", errno.to_string());
    }
    if let Some(f) = fault {
        command.env("STOWBENCH_FAULT_CALL", f.family).env("STOWBENCH_FAULT_NTH", f.nth.to_string());
        command.env("STOWBENCH_FAULT_MODE", if f.persistent { "persistent" } else { "transient" });
    }
    let label = match fault {
        Some(f) => format!("{} {} n={} {}", target.name, f.family, f.nth, if f.persistent { "persistent" } else { "transient" }),
        None => format!("{} without faults", target.name),
    };
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{label}: still running after {RUN_TIMEOUT:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |name: &str| std::fs::read_to_string(b.join(name)).unwrap_or_default();
    let lines = |name: &str| read(name).lines().map(String::from).collect::<Vec<_>>();
    let report = std::fs::read_dir(b.join("out"))
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path().join("report.json")).filter(|p| p.exists())))
        .map(|p| common::assert_valid_report(&p));
    let verified = b
        .join("verified")
        .exists()
        .then(|| lines("verified").iter().map(|l| l.split_once(' ').map(|(k, v)| (k.to_string(), v.to_string())).unwrap()).collect());
    let mut counts = BTreeMap::new();
    for line in lines("counts") {
        for (family, n) in line.split(' ').skip(1).filter_map(|kv| kv.split_once('=')) {
            *counts.entry(family.to_string()).or_insert(0) += n.parse::<u64>().unwrap();
        }
    }
    Run { label, code: status.code(), stderr: read("stderr"), report, injected: lines("injected"), verified, trace: lines("trace"), counts, base }
}

// ---------------------------------------------------------------------------------------------
// What every run must satisfy.

/// Checks one run; returns every problem found (empty: it behaved).
fn check(run: &Run, target: &Target, fault: Option<&Fault>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut fail = |what: String| problems.push(format!("{}: {what}\n    stderr: {}", run.label, run.stderr.trim().replace('\n', "\n            ")));
    let words = fault.map_or(&[][..], |f| FAMILIES.iter().find(|(name, _)| *name == f.family).unwrap().1);
    let text = run.failure_text();
    let names_call = words.iter().any(|w| text.contains(w));
    match run.code {
        Some(0) | Some(1) => {}
        // The environment's code: a set-up call on the machine failed, not the job.
        Some(3) if run.report.is_none() => {
            // A refusal before any case: only a set-up call can have failed, and the message says which, on which path.
            if !(names_call && run.stderr.contains(&*run.work().to_string_lossy())) {
                fail("exit 3 without naming the failed call and its path".into());
            }
        }
        other => fail(format!("exit status {other:?} (101 is a panic, None a signal)")),
    }
    if run.code != Some(0) && !run.injected.is_empty() && !names_call {
        fail(format!("failed without naming the call (any of {words:?}):\n    {}", text.trim().replace('\n', "\n    ")));
    }
    if run.code != Some(0) && run.injected.is_empty() {
        fail("failed, but no call was failed on purpose".into());
    }
    if let Some(case) = run.case() {
        // A failed call changes nothing on disk, so nothing read back may differ from what was put.
        if case["verification"]["mismatches"].as_u64().unwrap_or(0) > 0 {
            fail(format!("stowbench reports damaged data: {}", case["verification"]["mismatched"]));
        }
        for e in first_errors(case) {
            if !e.contains("obj-") || !FAMILIES.iter().flat_map(|(_, w)| w.iter()).any(|w| e.contains(w)) {
                fail(format!("an error that names no key or no call: {e}"));
            }
        }
    }
    problems.extend(check_acknowledged(run));
    problems.extend(check_failed_syncs(run, target));
    problems.extend(check_nothing_left(run));
    problems
}

/// Every put the report counts as stored reads back right; no key reads back wrong.
fn check_acknowledged(run: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(puts) = run.puts() else { return problems };
    let stored = puts["count"].as_u64().unwrap();
    let errors: u64 = puts["errors"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
    let failed: BTreeSet<String> =
        puts["first_errors"].as_array().into_iter().flatten().filter_map(|e| e.as_str()?.strip_prefix("put ")?.split(':').next().map(String::from)).collect();
    if stored + errors != OBJECTS || failed.len() as u64 != errors {
        problems.push(format!("{}: {stored} puts stored, {errors} failed ({failed:?} listed) of {OBJECTS}", run.label));
        return problems;
    }
    let Some(verified) = &run.verified else {
        if stored > 0 {
            problems.push(format!("{}: {stored} puts acknowledged but the get phase never began, so nothing verified them", run.label));
        }
        return problems;
    };
    for (k, verdict) in verified {
        let acknowledged = !failed.contains(k);
        if verdict.starts_with("bad") || (acknowledged && verdict != "ok") {
            let what = if acknowledged { "acknowledged" } else { "failed" };
            problems.push(format!("{}: {what} put of {k} reads back {verdict}", run.label));
        }
    }
    problems
}

/// Whether `path` holds object data of `target` (or is a directory of it): what a put syncs.
/// SQLite's own files are not: with the backend's default synchronous = normal a commit does not
/// sync the WAL (the report's durability line says so), SQLite syncs it at checkpoints, and a
/// checkpoint whose sync fails leaves the commits in the WAL; while the table is created a
/// failed journal sync is rolled back by SQLite itself.
fn holds_objects(target: &Target, path: &str) -> bool {
    match target.backend {
        "fs" => path.contains("/objects"),
        "sqlite-file" => path.contains("/files"),
        _ => path.ends_with(".pack"),
    }
}

/// A failed fsync of a put's data (before the get phase began) fails that put: a run that had
/// one cannot report every put stored without a retry (a retry writes and syncs anew; the
/// retry test checks that in the trace). A failed `syncfs` is the runner's write-back before a
/// phase (`settle_writeback`), which no put waits for: the phase after it must say so in its
/// `not_at_rest` and `writeback_settle.error`.
fn check_failed_syncs(run: &Run, target: &Target) -> Vec<String> {
    let mut problems = Vec::new();
    let failed = |l: &&String| l.starts_with("fsync ") && l.split(' ').nth(2) == Some("FAILED");
    let is_settle = |l: &&String| l.split(' ').nth(1) == Some("syncfs");
    let failed_sync = run
        .trace
        .iter()
        .take_while(|l| *l != PHASE_MARK)
        .filter(failed)
        .filter(|l| !is_settle(l))
        .filter_map(|l| l.split(' ').nth(3))
        .find(|path| holds_objects(target, path));
    if let (Some(path), Some(puts)) = (failed_sync, run.puts()) {
        if puts["count"].as_u64() == Some(OBJECTS) && puts["retries"].as_u64() == Some(0) {
            problems.push(format!("{}: the fsync of {path} failed during the puts, yet every put was reported stored", run.label));
        }
    }
    let settle_failed = run.trace.iter().filter(failed).any(|l| is_settle(&l));
    if let Some(case) = run.case().filter(|_| settle_failed) {
        let unsettled: Vec<&Value> = case["phases"].as_array().into_iter().flatten().filter(|p| p["writeback_settle"]["error"].is_string()).collect();
        let told = unsettled.iter().all(|p| p["not_at_rest"].as_str().is_some_and(|w| w.contains("writing back")));
        // A case that failed before its next phase began has no phase to tell it in.
        if !told || (unsettled.is_empty() && case["failure"].is_null()) {
            problems.push(format!("{}: a syncfs before a phase failed, and no phase says so: {}", run.label, case["phases"]));
        }
    }
    problems
}

/// The run removed its directory, or said it could not and `stowbench cleanup` (without faults)
/// removes it; nothing appeared beside it.
fn check_nothing_left(run: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    let left = walk(&run.work());
    if !left.is_empty() {
        let said = run.stderr.contains("could not be removed") || run.stderr.contains("cannot remove") || run.failure_text().contains("cleanup failed");
        if !said || run.code == Some(0) {
            problems.push(format!("{}: left {} entries without saying so, e.g. {}", run.label, left.len(), left[0].display()));
        }
        let out = Command::new(env!("CARGO_BIN_EXE_stowbench")).arg("cleanup").arg(run.work()).output().unwrap();
        let after = walk(&run.work());
        if !out.status.success() || !after.is_empty() {
            problems.push(format!("{}: stowbench cleanup left {:?}: {}", run.label, after, String::from_utf8_lossy(&out.stderr)));
        }
    }
    let expected = ["job.toml", "work", "out", "stderr", "injected", "counts", "verified", "trace"];
    for entry in std::fs::read_dir(run.base.path()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !expected.contains(&name.as_str()) {
            problems.push(format!("{}: wrote {name} outside its directories", run.label));
        }
    }
    problems
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(entry.path());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&entry.path()));
        }
    }
    out
}

/// n values for a family called `count` times: spread evenly from 1 to `count`.
fn sample(count: u64) -> Vec<u64> {
    let mut n: Vec<u64> = (0..POINTS).map(|i| 1 + i * count.saturating_sub(1) / (POINTS - 1)).filter(|&n| n <= count).collect();
    n.dedup();
    n
}

/// Runs `jobs` on two threads (the machine's cores), collecting every problem.
fn run_all(jobs: Vec<(&'static Target, Fault)>) -> Vec<String> {
    let queue = Mutex::new(jobs);
    let problems = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let Some((target, fault)) = queue.lock().unwrap().pop() else { break };
                let r = run(target, Some(&fault), 0, true);
                problems.lock().unwrap().extend(check(&r, target, Some(&fault)));
            });
        }
    });
    problems.into_inner().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn every_io_error_fails_cleanly_keeps_acknowledged_objects_and_leaves_nothing() {
    if shim().is_none() {
        return;
    }
    let started = Instant::now();
    let mut jobs = Vec::new();
    let mut problems = Vec::new();
    for target in TARGETS {
        let counted = run(target, None, 0, false);
        assert_eq!(counted.code, Some(0), "{}: {}", counted.label, counted.stderr);
        problems.extend(check(&counted, target, None));
        for (family, _) in FAMILIES {
            let count = counted.counts.get(*family).copied().unwrap_or(0);
            for nth in sample(count) {
                jobs.push((target, Fault { family, nth, persistent: true }));
            }
            let transient = if *family == "fsync" { (1..=count).collect() } else { sample(count) };
            for nth in transient {
                jobs.push((target, Fault { family, nth, persistent: false }));
            }
        }
    }
    let runs = jobs.len();
    problems.extend(run_all(jobs));
    eprintln!("{runs} runs with faults in {:.1} s", started.elapsed().as_secs_f64());
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// The fsync of one put's data fails once, with retries = 2: the put is redone whole — a new
/// write before the next fsync — and counted stored once, with one retry. Failing from then on,
/// every later put fails after its retries and none is reported stored.
#[test]
fn a_failed_fsync_is_never_retried_into_a_reported_success() {
    if shim().is_none() {
        return;
    }
    let mut problems = Vec::new();
    for target in TARGETS.iter().filter(|t| t.options.contains("fsync = true")) {
        let baseline = run(target, None, 2, true);
        assert_eq!(baseline.code, Some(0), "{}: {}", baseline.label, baseline.stderr);
        // The fsyncs of object data during the put phase (not directories, not SQLite's files).
        let syncs: Vec<(u64, String)> = baseline
            .trace
            .iter()
            .take_while(|l| *l != PHASE_MARK)
            .filter(|l| l.starts_with("fsync "))
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l.split(' ').nth(3).unwrap().to_string()))
            .filter(|(_, path)| path.contains(".tmp-") || (path.ends_with(".pack") && target.backend == "pack"))
            .collect();
        assert!(syncs.len() >= OBJECTS as usize, "{}: {} data fsyncs in the put phase:\n{}", target.name, syncs.len(), baseline.trace.join("\n"));
        let (nth, _) = syncs[syncs.len() / 2].clone();

        let once = Fault { family: "fsync", nth, persistent: false };
        let r = run(target, Some(&once), 2, true);
        problems.extend(check(&r, target, Some(&once)));
        let puts = r.puts().cloned().unwrap_or_default();
        if r.code != Some(0) || puts["count"].as_u64() != Some(OBJECTS) || puts["retries"].as_u64() != Some(1) || r.injected.len() != 1 {
            problems.push(format!("{}: expected every put stored with one retry: exit {:?}, put {puts}", r.label, r.code));
        }
        // After the failed fsync, the next fsync of data is of bytes written again after it.
        let at = r.trace.iter().position(|l| l.starts_with("fsync ") && l.contains(" FAILED ")).unwrap();
        let next = r.trace[at + 1..].iter().position(|l| l.starts_with("fsync ") && (l.contains(".tmp-") || l.ends_with(".pack"))).map(|i| at + 1 + i);
        let rewritten = next.is_some_and(|j| {
            let path = r.trace[j].split(' ').nth(3).unwrap();
            r.trace[at + 1..j].iter().any(|l| l.starts_with("write ") && l.ends_with(path))
        });
        if !rewritten {
            problems.push(format!(
                "{}: no new write before the next fsync after the failed one:\n{}",
                r.label,
                r.trace[at..].iter().take(12).cloned().collect::<Vec<_>>().join("\n")
            ));
        }

        let from_then_on = Fault { family: "fsync", nth, persistent: true };
        let r = run(target, Some(&from_then_on), 2, true);
        problems.extend(check(&r, target, Some(&from_then_on)));
        let puts = r.puts().cloned().unwrap_or_default();
        let errors: u64 = puts["errors"].as_object().map_or(0, |e| e.values().filter_map(Value::as_u64).sum());
        if r.code != Some(1) || errors == 0 || puts["retries"].as_u64() != Some(2 * errors) {
            problems.push(format!("{}: expected failed puts, each after 2 retries: exit {:?}, put {puts}", r.label, r.code));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// SQLite syncs its database and WAL with `fdatasync`, as a distribution's build of SQLite does:
/// rusqlite's bundled build lacks HAVE_FDATASYNC and would call `fsync`, which also flushes the
/// files' timestamps (a journal commit more per durable put on a journaled filesystem).
/// `.cargo/config.toml` sets it; docs/backends/sqlite.md, "Which sync call".
#[test]
fn sqlite_syncs_its_files_with_fdatasync_as_a_distributions_build_does() {
    if shim().is_none() {
        return;
    }
    let target = Target { name: "sqlite-file-full", backend: "sqlite-file", options: "fsync = true\nsynchronous = \"full\"" };
    let r = run(&target, None, 0, true);
    assert_eq!(r.code, Some(0), "{}: {}", r.label, r.stderr);
    // syncfs is the runner's write-back before each phase (settle_writeback), not SQLite's.
    let of_sqlite =
        |l: &&String| l.starts_with("fsync ") && l.split(' ').nth(1) != Some("syncfs") && l.split(' ').nth(3).is_some_and(|path| path.contains(".db"));
    let syncs: Vec<&String> = r.trace.iter().take_while(|l| *l != PHASE_MARK).filter(of_sqlite).collect();
    assert!(syncs.len() >= OBJECTS as usize, "at least one sync of SQLite's files per committed put, found {}:\n{}", syncs.len(), r.trace.join("\n"));
    let by_fsync: Vec<&&String> = syncs.iter().filter(|l| l.split(' ').nth(1) != Some("fdatasync")).collect();
    assert!(by_fsync.is_empty(), "SQLite synced with another call than fdatasync (is LIBSQLITE3_FLAGS set?):\n{by_fsync:#?}");
}

/// Before each phase the runner writes back the dirty pages of the filesystem holding the data
/// (`settle_writeback`, on by default): one `syncfs` on the case's data before the puts and one
/// before the get phase (ahead of its `before` command, which marks the trace).
#[test]
fn the_runner_writes_back_the_data_s_filesystem_before_each_phase() {
    if shim().is_none() {
        return;
    }
    let target = Target { name: "fs", backend: "fs", options: "" };
    let r = run(&target, None, 0, true);
    assert_eq!(r.code, Some(0), "{}: {}", r.label, r.stderr);
    let work = r.work().to_string_lossy().into_owned();
    let settles: Vec<&String> = r.trace.iter().take_while(|l| *l != PHASE_MARK).filter(|l| l.starts_with("fsync syncfs ok ") && l.contains(&work)).collect();
    assert_eq!(settles.len(), 2, "one syncfs before each of the two phases:\n{}", r.trace.join("\n"));
    let phases = r.case().unwrap()["phases"].as_array().unwrap().clone();
    for phase in &phases {
        assert_eq!(phase["writeback_settle"]["scope"], "filesystems", "{phase}");
        assert!(phase["not_at_rest"].is_null(), "{phase}");
    }
}

/// A disk that fills in the middle of the puts (writes failing with ENOSPC from then on): the
/// puts count as `no_space`, never retried; the run stops at that case and says the filesystem
/// ran out of space; the first error names the key and the write; the acknowledged puts read
/// back right and nothing is left.
#[test]
fn a_disk_that_fills_mid_run_fails_the_puts_as_no_space() {
    if shim().is_none() {
        return;
    }
    let mut problems = Vec::new();
    for target in TARGETS {
        let counted = run(target, None, 2, false);
        let writes = counted.counts.get("write").copied().unwrap_or(0);
        let full = Fault { family: "write", nth: writes / 2, persistent: true };
        let r = run_with_errno(target, Some(&full), 2, true, Some(ENOSPC));
        problems.extend(check(&r, target, Some(&full)));
        let puts = r.puts().cloned().unwrap_or_default();
        let no_space = puts["errors"]["no_space"].as_u64().unwrap_or(0);
        let failure = r.case().and_then(|c| c["failure"].as_str()).unwrap_or_default().to_string();
        if r.code != Some(1) || no_space == 0 || puts["retries"].as_u64() != Some(0) || !failure.contains("ran out of space") {
            problems.push(format!("{}: expected no_space puts, not retried, and the run stopped: exit {:?}, put {puts}, failure {failure}", r.label, r.code));
        }
        // The OS's words, or SQLite's ("database or disk is full").
        if !(failure.contains("No space left on device") || failure.contains("disk is full")) || !failure.contains("write") {
            problems.push(format!("{}: the failure does not quote the failed write: {failure}", r.label));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
