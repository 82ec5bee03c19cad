//! `stowbench fio`: a fio sweep from command-line flags, run (or printed with `--dry-run`).
//!
//! The flags build the same `FioSweep` a `[[fio]]` table would, so both paths share validation,
//! and the sweep runs as a plan of its own through the same runner as `stowbench run`: one run
//! id, one environment capture, the report written atomically after every case to
//! OUT/<timestamp>/report.json, and printed by the same reporters. Besides the report, this
//! module writes only the chart series asked for with `--csv`.

use super::case::{expand, FioCase};
use super::error::FioError;
use super::render::render_job;
use super::run::{fio_version, parse_only, RunOptions};
use super::series::{chart_threads, charts_csv, iops_vs_iodepth};
use super::spec::{FioSweep, FsKind, IoEngine, RwMode, TargetSpec};
use crate::units::{ByteSize, Nanos};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Flags of `stowbench fio`. Lists are comma-separated; `A..B` doubles from A up to B (1..64).
#[derive(clap::Args, Debug, Clone)]
pub struct FioArgs {
    /// Sweep name, part of every case id.
    #[arg(long, default_value = "cli")]
    pub name: String,
    /// Access patterns: read, write, randread, randwrite, rw, randrw, randrw:70 (70 % reads).
    #[arg(long, default_value = "randread")]
    pub rw: String,
    /// Block sizes with units, e.g. 8KiB,64KiB,512KiB or 4KiB..1MiB.
    #[arg(long, default_value = "4KiB", allow_hyphen_values = true)]
    pub bs: String,
    /// Thread counts, e.g. 1,4 or 1..64.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub numjobs: String,
    /// Outstanding I/O per thread, e.g. 1..128.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub iodepth: String,
    /// Files per thread, e.g. 1,2,4,8,16.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub nrfiles: String,
    /// Bytes of file data per thread (split over nrfiles), e.g. 64MiB or 50MB,1GiB.
    #[arg(long, default_value = "256MiB", allow_hyphen_values = true)]
    pub size: String,
    /// Measured time per case, e.g. 30s.
    #[arg(long, default_value = "30s", allow_hyphen_values = true)]
    pub runtime: String,
    /// Warm-up per case before measuring, e.g. 2s.
    #[arg(long, default_value = "2s", allow_hyphen_values = true)]
    pub ramp_time: String,
    /// Existing directories to test (repeatable); stowbench works in a marked subdirectory.
    #[arg(long)]
    pub target: Vec<PathBuf>,
    /// Filesystems to make for the run (root only): ext4,xfs,btrfs,tmpfs.
    #[arg(long)]
    pub fs: Option<String>,
    /// Size of each made filesystem.
    #[arg(long, default_value = "2GiB", allow_hyphen_values = true)]
    pub fs_size: String,
    /// Extra mkfs options for made filesystems (one string, split on spaces).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub mkfs_options: String,
    /// Mount options for made filesystems, e.g. noatime.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub mount_options: String,
    /// fio ioengine: libaio, io_uring, psync, sync, posixaio, null.
    #[arg(long, default_value = "libaio")]
    pub ioengine: String,
    /// Read percentage for mixed patterns without one.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rwmixread: u8,
    /// Buffered I/O instead of O_DIRECT.
    #[arg(long)]
    pub no_direct: bool,
    /// Stop when the files are covered instead of running for the whole runtime.
    #[arg(long)]
    pub no_time_based: bool,
    /// All threads share one set of files.
    #[arg(long)]
    pub share_files: bool,
    /// Leave the dirty pages as they are before each case, instead of writing them back untimed
    /// (what `sync` between fio runs does): a buffered case may then pay for the one before.
    #[arg(long)]
    pub no_settle_writeback: bool,
    /// Runs of every combination; a chart point is their mean, with their range [min–max] in the
    /// terminal and the 95 % confidence interval of the mean (error bars) on the page.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Extra raw fio option key=value (repeatable), checked by fio --parse-only.
    #[arg(long = "fio-option", allow_hyphen_values = true)]
    pub fio_option: Vec<String>,
    /// Print the job files (checked with fio --parse-only when fio is installed) and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replaced by the run report (OUT/<timestamp>/report.json); kept only to say so.
    #[arg(long, hide = true)]
    pub json: Option<PathBuf>,
    /// Write chart series as CSV to this file (IOPS and MB/s against outstanding I/O).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Raw block device to test; destroys its contents on writes.
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// Must repeat --device exactly.
    #[arg(long)]
    pub confirm_device: Option<PathBuf>,
    /// Thread count the --csv chart series are drawn at (default, as in the table: the run's CPU
    /// count if swept, else the thread count with the most cases).
    #[arg(long)]
    pub thread_count_for_charts: Option<u32>,
    /// Directory for loop images, job files and fio output of made filesystems; it must exist
    /// (default with --fs: stowbench-results, made if missing; otherwise a temporary directory).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Ask fio for plain json (no latency histogram bins).
    #[arg(long)]
    pub no_histogram: bool,
    /// Run even when a made filesystem's loop image (as large as the filesystem) will not fit in
    /// the free space of the filesystem holding --work-dir.
    #[arg(long)]
    pub no_space_check: bool,
    /// Time limit per case, e.g. 10m (default: ramp + runtime + 60 s + layout time).
    #[arg(long, allow_hyphen_values = true)]
    pub timeout: Option<String>,
    /// Where the report goes, how it is printed.
    #[command(flatten)]
    pub output: crate::cli::OutputSettings,
}

/// Where made filesystems' images go without --work-dir (beside the default --out).
const DEFAULT_WORK_DIR: &str = "stowbench-results";

/// Runs `stowbench fio`; returns the exit code (0 ok, 1 a case failed, 3 the report could not be
/// written, 130 interrupted) or what stopped it before running (bad input, exit 2, or the
/// environment, exit 3: see `crate::error`). `command` is the command line, for the report.
pub fn run(args: &FioArgs, command: Vec<String>, interrupted: &AtomicBool) -> Result<i32, crate::error::Error> {
    use crate::error::Error;
    if let Some(path) = &args.json {
        return Err(Error::bad_input(format!(
            "--json {}: stowbench fio writes the run report now, like stowbench run: --out DIR puts it in \
             DIR/<timestamp>/report.json (`stowbench report FILE --format json` prints it); --csv still writes the chart series",
            path.display()
        )));
    }
    let sweep = args.to_sweep()?;
    sweep.validate()?;
    // Flags about the charts are checked before the sweep, not after it has run.
    if let Some(threads) = args.thread_count_for_charts {
        if !sweep.numjobs.contains(&threads) {
            return Err(Error::bad_input(format!(
                "--thread-count-for-charts {threads}: no case runs {threads} thread(s); the sweep's --numjobs are {}",
                sweep.numjobs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    if let Some(path) = &args.csv {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(Error::bad_input(format!("--csv {}: {} is not an existing directory; create it or fix the path", path.display(), parent.display())));
        }
        if path.is_dir() {
            return Err(Error::bad_input(format!("--csv {}: is a directory; give a file name, e.g. {}", path.display(), path.join("charts.csv").display())));
        }
        crate::atomic_file::check_writable(path).map_err(|e| Error::environment(format!("--csv {}: cannot be written: {e}", path.display())))?;
    }
    let timeout = crate::cli::run_timeout(args.timeout.as_deref())?;
    if args.dry_run {
        return Ok(dry_run(&sweep, args, &crate::runner::new_run_id())?);
    }
    let fio = RunOptions { histogram: !args.no_histogram, timeout, ..RunOptions::default() };
    let plan = crate::job::Plan::fio_only(sweep, "command line (stowbench fio)");
    let work_dir = match &args.work_dir {
        Some(dir) => Some(dir.clone()), // checked by the runner: a mistyped path is not made
        // Only made filesystems keep anything there (loop images); directory and device targets
        // run in a temporary directory, and nothing is left in the working directory.
        None if args.fs.is_none() => None,
        None => {
            // What the runner's preflight would refuse is refused before the default directory
            // is made, so a refused run leaves nothing behind.
            crate::fio::run::fio_version(&fio.fio_program)?;
            for target in &plan.fio[0].target {
                crate::fio::target::check_target(target, &plan.fio[0].name)?;
            }
            let default = PathBuf::from(DEFAULT_WORK_DIR);
            if !args.no_space_check {
                // Absolute, so that the check finds the filesystem the directory will be made on.
                let at = std::env::current_dir().map(|d| d.join(DEFAULT_WORK_DIR)).unwrap_or_else(|_| default.clone());
                crate::runner::space::check(&crate::runner::space::fio_images(&plan, &at), false).map_err(Error::environment)?;
            }
            std::fs::create_dir_all(&default).map_err(|e| Error::environment(format!("cannot create {DEFAULT_WORK_DIR} (the default --work-dir): {e}")))?;
            Some(default)
        }
    };
    let opts = crate::runner::RunOptions { work_dir, command, fio, skip_space_check: args.no_space_check, ..Default::default() };
    let outcome = crate::cli::run_and_print(&plan, &args.output, opts, interrupted)?;
    if let Some(path) = &args.csv {
        let cases = &outcome.report.fio_cases;
        let threads = args.thread_count_for_charts.unwrap_or_else(|| chart_threads(cases, outcome.report.environment.cpu_count));
        write_atomic(path, &charts_csv(&iops_vs_iodepth(cases, threads)))?;
    }
    Ok(outcome.exit_code)
}

impl FioArgs {
    /// The sweep these flags describe (not yet validated).
    pub fn to_sweep(&self) -> Result<FioSweep, FioError> {
        let bad = |field: &str, message: String| FioError::Invalid { sweep: self.name.clone(), field: format!("--{field}"), message };
        let sizes = |field: &str, text: &str| {
            parse_list(text, |t| ByteSize::parse(t).map(|b| b.0).map_err(|e| e.0), |b| ByteSize(b).label())
                .map(|v| v.into_iter().map(ByteSize).collect::<Vec<_>>())
                .map_err(|e| bad(field, e))
        };
        let counts = |field: &str, text: &str| {
            parse_list(
                text,
                |t| t.parse::<u64>().map_err(|_| format!("\"{t}\" is not a count; use whole numbers of 1 or more, e.g. 1,4 or 1..64")),
                |n| n.to_string(),
            )
            .and_then(|v| v.into_iter().map(|n| u32::try_from(n).map_err(|_| format!("{n} is too large"))).collect::<Result<Vec<u32>, String>>())
            .map_err(|e| bad(field, e))
        };
        let rw = split(&self.rw).and_then(|items| items.into_iter().map(RwMode::parse).collect::<Result<Vec<_>, _>>()).map_err(|e| bad("rw", e))?;
        Ok(FioSweep {
            name: self.name.clone(),
            target: self.targets()?,
            rw,
            bs: sizes("bs", &self.bs)?,
            numjobs: counts("numjobs", &self.numjobs)?,
            iodepth: counts("iodepth", &self.iodepth)?,
            nrfiles: counts("nrfiles", &self.nrfiles)?,
            size: sizes("size", &self.size)?,
            runtime: Nanos::parse(&self.runtime).map_err(|e| bad("runtime", e.0))?,
            ramp_time: Nanos::parse(&self.ramp_time).map_err(|e| bad("ramp-time", e.0))?,
            direct: !self.no_direct,
            time_based: !self.no_time_based,
            ioengine: IoEngine::parse(&self.ioengine).map_err(|e| bad("ioengine", e))?,
            rwmixread: self.rwmixread,
            share_files: self.share_files,
            repeat: self.repeat,
            extra: self.extra_options()?,
            settle_writeback: !self.no_settle_writeback,
        })
    }

    fn targets(&self) -> Result<Vec<TargetSpec>, FioError> {
        let bad = |field: &str, message: String| FioError::Invalid { sweep: self.name.clone(), field: format!("--{field}"), message };
        let mut targets: Vec<TargetSpec> = Vec::new();
        for (i, path) in self.target.iter().enumerate() {
            let label = if self.target.len() > 1 { format!("dir{}", i + 1) } else { "dir".to_string() };
            targets.push(TargetSpec::Dir { path: path.clone(), label });
        }
        if let Some(list) = &self.fs {
            let size = ByteSize::parse(&self.fs_size).map_err(|e| bad("fs-size", e.0))?;
            for name in split(list).map_err(|e| bad("fs", e))? {
                let fs = FsKind::parse(name).map_err(|e| bad("fs", e))?;
                let mkfs_options = if fs == FsKind::Tmpfs { String::new() } else { self.mkfs_options.clone() };
                targets.push(TargetSpec::Fs { fs, size, mkfs_options, mount_options: self.mount_options.clone(), label: fs.name().into() });
            }
        }
        match (&self.device, &self.confirm_device) {
            (Some(device), Some(confirm)) => targets.push(TargetSpec::device(device.clone(), confirm.clone())),
            (Some(device), None) => {
                return Err(bad(
                    "confirm-device",
                    format!("writing to {} destroys its contents; repeat the path with --confirm-device {}", device.display(), device.display()),
                ))
            }
            (None, Some(_)) => return Err(bad("confirm-device", "given without --device".into())),
            (None, None) => {}
        }
        if targets.is_empty() {
            return Err(bad("target", "no target: give --target DIR, --fs ext4,xfs (as root) or --device with --confirm-device".into()));
        }
        Ok(targets)
    }

    fn extra_options(&self) -> Result<BTreeMap<String, String>, FioError> {
        self.fio_option
            .iter()
            .map(|kv| {
                kv.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).ok_or_else(|| FioError::Invalid {
                    sweep: self.name.clone(),
                    field: "--fio-option".into(),
                    message: format!("\"{kv}\" is not key=value, e.g. --fio-option fsync=1"),
                })
            })
            .collect()
    }
}

/// The comma-separated items of a flag. An empty one ("4KiB,,8KiB", "1,") is refused: it is a
/// slip more often than a meaning, and fio's own "bs=4k,,8k" means something else entirely.
fn split(text: &str) -> Result<Vec<&str>, String> {
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    if items.len() > 1 && items.iter().any(|t| t.is_empty()) {
        return Err(format!("\"{text}\" has an empty item between or after its commas; remove the extra comma"));
    }
    Ok(items.into_iter().filter(|t| !t.is_empty()).collect())
}

/// Parses "a,b,c" and doubling ranges "A..B" (A, 2A, 4A, … up to B).
pub fn parse_list(text: &str, parse: impl Fn(&str) -> Result<u64, String>, show: impl Fn(u64) -> String) -> Result<Vec<u64>, String> {
    let mut values = Vec::new();
    for item in split(text)? {
        match item.split_once("..") {
            Some((low, high)) => {
                let (low, high) = (parse(low.trim())?, parse(high.trim())?);
                if low == 0 || high < low {
                    return Err(format!("range \"{item}\" must go up from a value above zero"));
                }
                let mut value = low;
                while value <= high {
                    values.push(value);
                    value = value.saturating_mul(2);
                }
                if values.last() != Some(&high) {
                    return Err(format!("range \"{item}\" doubles from {} and misses {}; end it on a doubling of the start", show(low), show(high)));
                }
            }
            None => values.push(parse(item)?),
        }
    }
    if values.is_empty() {
        return Err("is empty".into());
    }
    Ok(values)
}

/// Raw options (`--fio-option`, a job's `extra`) are fio's to judge: its --parse-only reads the
/// sweep's first job file before anything runs (the runner's preflight), so a mistyped option is
/// one refusal, not one failure per case. Other sweeps are left to their cases.
pub fn check_raw_options(sweep: &FioSweep, fio_program: &Path) -> Result<(), FioError> {
    let Some(case) = expand(sweep).into_iter().next().filter(|_| !sweep.extra.is_empty()) else { return Ok(()) };
    let scratch = std::env::temp_dir().join(format!("stowbench-fio-check-{}", crate::runner::new_run_id()));
    std::fs::create_dir_all(&scratch).map_err(|e| FioError::io(&scratch, e))?;
    let job = render_job(&case, &planned_path(&case, Path::new(DEFAULT_WORK_DIR), "check"));
    let checked = parse_only_in(&scratch, fio_program, &case, &job);
    let _ = std::fs::remove_dir_all(&scratch);
    checked
}

/// Writes `case`'s job file into `scratch` and has fio --parse-only read it.
fn parse_only_in(scratch: &Path, fio_program: &Path, case: &FioCase, job: &str) -> Result<(), FioError> {
    let path = scratch.join(format!("{}.fio", case.job_name()));
    std::fs::write(&path, job).map_err(|e| FioError::io(&path, e))?;
    parse_only(fio_program, &path, &case.id, job)
}

/// Prints every job file, checked by `fio --parse-only` when fio is installed; runs nothing.
fn dry_run(sweep: &FioSweep, args: &FioArgs, run_id: &str) -> Result<i32, FioError> {
    // A directory that is not there is refused here as the run would refuse it, and so is a
    // device that is no block device; a made filesystem's checks (root) and whether a device is
    // in use are the run's.
    for target in &sweep.target {
        match target {
            TargetSpec::Dir { .. } => crate::fio::target::check_target(target, &sweep.name)?,
            TargetSpec::Device { device, .. } => {
                crate::fio::device::block_device_metadata(device)?;
            }
            TargetSpec::Fs { .. } => {}
        }
    }
    let cases = expand(sweep);
    let fio = PathBuf::from("fio");
    let checker = fio_version(&fio).ok();
    let scratch = std::env::temp_dir().join(format!("stowbench-fio-dry-run-{run_id}"));
    if checker.is_some() {
        std::fs::create_dir_all(&scratch).map_err(|e| FioError::io(&scratch, e))?;
    }
    let mut checked = 0usize;
    let result = (|| {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        for case in &cases {
            let job = render_job(case, &planned_path(case, args.work_dir.as_deref().unwrap_or(Path::new(DEFAULT_WORK_DIR)), run_id));
            // A closed pipe (`| head`) ends the listing quietly instead of panicking in println!.
            if writeln!(stdout, "# ---- {} ----\n{job}", case.id).is_err() {
                return Ok(0);
            }
            if checker.is_some() {
                parse_only_in(&scratch, &fio, case, &job)?;
                checked += 1;
            }
        }
        Ok(0)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    match &checker {
        Some(version) => crate::say!("{} job files; {version} --parse-only accepted {checked} of them", cases.len()),
        None => crate::say!("{} job files; fio is not installed, so they were not checked with --parse-only", cases.len()),
    }
    result
}

/// Where a case's I/O would go, without preparing anything.
fn planned_path(case: &FioCase, work_dir: &Path, run_id: &str) -> PathBuf {
    let ns = super::target::ns_name(run_id, case.target.label());
    match &case.target {
        TargetSpec::Dir { path, .. } => path.join(ns).join("data"),
        TargetSpec::Fs { .. } => work_dir.join(ns).join("mnt").join("data"),
        TargetSpec::Device { device, .. } => device.clone(),
    }
}

/// Writes to a temporary name and renames, so a reader never sees half a file.
fn write_atomic(path: &Path, text: &str) -> Result<(), FioError> {
    crate::atomic_file::replace(path, text.as_bytes()).map_err(|e| FioError::io(path, e))
}
