//! Command-line interface: `run`, `recipe`, `validate`, `report`, `compare`, `backends`, `fio`,
//! `compact`, `cleanup`.
//!
//! Raw arguments are parsed by clap, then validated into a `Plan`; every failure becomes a
//! message and an exit code decided by its `error::Kind` (0 ok, 1 a case failed, `compare`'s gate
//! failed or `cleanup` could not reach a server, 2 bad input or usage, 3 the environment — a
//! server that does not answer, disk space, a report or directory that cannot be written, a
//! missing tool or privilege —, 130 interrupted). Results go to stdout, progress and messages to
//! stderr. Every output format comes from `report::reporters`.

use crate::backend::{self, namespace};
use crate::error::{Error, EXIT_RUN_FAILED};
use crate::job::{self, Plan};
use crate::report::{self, compare, reporters};
use crate::runner::{self, RunOptions, RunOutcome};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Exit code: bad input or usage.
pub const EXIT_USAGE: i32 = crate::error::EXIT_BAD_INPUT;
/// Exit code of `compare` when `--fail-if-slower`'s gate fails.
pub const EXIT_SLOWER: i32 = EXIT_RUN_FAILED;
/// Exit code of `cleanup` when some server objects could not be removed (their directory and
/// record are kept for a later cleanup): as promised since cleanup first could, 1, not the
/// environment's 3 — the run's data is what failed to go.
pub const EXIT_CLEANUP_INCOMPLETE: i32 = EXIT_RUN_FAILED;

/// Where should the files live? Measure it on your own machine.
#[derive(Debug, Parser)]
#[command(name = "stowbench", version = crate::BUILD, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a job file, or the quick default comparison when none is given.
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// The published experiments, built in: list them, print one's job file, or run one.
    Recipe {
        /// list, show NAME or run NAME.
        #[command(subcommand)]
        action: RecipeAction,
    },
    /// Check a job file without running it.
    Validate {
        /// The job file (TOML).
        job: PathBuf,
    },
    /// Render a saved report.json again.
    Report {
        /// The report file.
        file: PathBuf,
        /// Output format.
        #[arg(long, default_value = "table", value_parser = format_names())]
        format: String,
    },
    /// Compare runs: every figure of each report against the first (the baseline), with ratios and
    /// whether each difference is significant. Exit code 1 when --fail-if-slower's gate fails.
    #[command(allow_negative_numbers = true)]
    Compare(CompareArgs),
    /// List the backends, their options and defaults, and whether each server answers.
    Backends {
        /// A server URI to check (postgres://, mysql://, http(s):// for S3, mongodb://); without
        /// it the STOWBENCH_*_URI / STOWBENCH_S3_ENDPOINT environment variables are checked.
        #[arg(long)]
        uri: Option<String>,
        /// Print each backend's options as the Markdown table its page in docs/backends carries
        /// (between the `options:` markers), instead of the listing; with names, only those.
        #[arg(long)]
        markdown: bool,
        /// Backends to print (default: all).
        names: Vec<String>,
    },
    /// Run a fio sweep (rw × block size × threads × queue depth × files × targets) and chart it.
    // Negative numbers reach our own checks ("-1 is not a count…") instead of clap's "unexpected
    // argument '-1'".
    #[command(allow_negative_numbers = true)]
    Fio(Box<crate::fio::cli::FioArgs>),
    /// Rewrite a pack store's live objects into new files, reclaiming deleted and overwritten space.
    Compact {
        /// The pack directory (a `pack` target's data directory, kept with `run --keep`).
        dir: PathBuf,
        /// Compact even when the data files hold damaged records, leaving them out for good
        /// (without it such a pack is refused and no record changes; closing it may still write the
        /// index that spares the next open a scan).
        #[arg(long)]
        drop_damaged: bool,
    },
    /// Remove a namespace directory left by a run, or every one directly inside DIR.
    Cleanup {
        /// A stowbench-* directory, or a directory holding some.
        dir: PathBuf,
        /// List what would be removed (unmounted, detached), and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// What `stowbench recipe` does.
#[derive(Debug, Subcommand)]
pub enum RecipeAction {
    /// The recipes: the question each answers, what it needs, how long it takes at scale 1.
    List,
    /// Print a recipe's job file, to copy and edit (`stowbench recipe show e1-filestream > e1.toml`).
    Show {
        /// Recipe name.
        name: String,
    },
    /// Run a recipe; server targets without a configured server are skipped, each with the reason.
    #[command(allow_negative_numbers = true)]
    Run {
        /// Recipe name.
        name: String,
        /// Multiply every count, size and duration by this (1 = the published size).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Where results go, which targets, output format.
        #[command(flatten)]
        settings: RunSettings,
    },
}

/// The `--format` names of the reporter registry, for clap to check and list.
fn format_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(reporters::names())
}

/// Options of `stowbench compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Report files (report.json); the first is the baseline, each other one is compared with it.
    #[arg(required = true, num_args = 2.., value_name = "REPORT")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = format_names())]
    pub format: String,
    /// Exit with code 1 when a throughput figure (ops/s, bytes/s) is slower than the baseline's
    /// by more than PCT percent and the difference is significant (Welch's t-test, 95 %). With
    /// fewer than 2 repeats on a side the single values decide: slower by more than PCT fails.
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,
    /// Only these metrics (comma-separated): ops_per_s, bytes_per_s, mean_ns, p50_ns, p99_ns,
    /// client_cpu_ns, server_cpu_ns, client_rss_peak_bytes, server_rss_peak_bytes,
    /// disk_allocated_bytes, fio_cpu_percent.
    #[arg(long, value_delimiter = ',')]
    pub metric: Vec<String>,
}

/// Where a run's report goes and how it is printed: `run`, `recipe run` and `fio` share these.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputSettings {
    /// Directory for results; the report goes to OUT/<timestamp>/report.json.
    #[arg(long, default_value = "stowbench-results")]
    pub out: PathBuf,
    /// How to print results on stdout.
    #[arg(long, default_value = "table", value_parser = format_names())]
    pub format: String,
    /// No progress display on stderr.
    #[arg(long)]
    pub no_progress: bool,
}

/// Options of `stowbench run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Job file (TOML); without it, the quick default comparison runs.
    pub job: Option<PathBuf>,
    /// Where results go, which targets, output format.
    #[command(flatten)]
    pub settings: RunSettings,
}

/// Options shared by `stowbench run` and `stowbench recipe run`.
#[derive(Debug, clap::Args)]
pub struct RunSettings {
    /// Where the report goes, how it is printed.
    #[command(flatten)]
    pub output: OutputSettings,
    /// Parent directory for the run's data (a marked stowbench-<run id> directory is made in it).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep the stored data after each case.
    #[arg(long)]
    pub keep: bool,
    /// Run even when the data will not fit in the free space of the filesystems holding it.
    #[arg(long)]
    pub no_space_check: bool,
    /// Only these targets (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Override the job's seed.
    #[arg(long, value_parser = parse_seed, allow_hyphen_values = true)]
    pub seed: Option<u64>,
    /// End the run after this long (e.g. 10m): the case running then fails and no other starts,
    /// and an operation blocked past it (no op_timeout) ends the process with the report kept.
    #[arg(long, allow_hyphen_values = true)]
    pub timeout: Option<String>,
    /// What times each operation: auto (the CPU's time-stamp counter where the kernel itself
    /// keeps time with it, as fio's clocksource=cpu; else clock_gettime), tsc, or monotonic.
    #[arg(long, default_value = "auto", value_parser = crate::clock::ClockChoice::parse)]
    pub clock: crate::clock::ClockChoice,
}

/// `--seed`: a whole number, said in our words rather than clap's "invalid digit found in string".
fn parse_seed(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        let why = if text.trim().starts_with('-') { "is negative" } else { "is not a whole number" };
        format!("\"{text}\" {why}; a seed is a whole number from 0 to {}", u64::MAX)
    })
}

/// The `--timeout` of `run`, `recipe run` and `fio`: a positive duration, if given.
pub(crate) fn run_timeout(text: Option<&str>) -> Result<Option<std::time::Duration>, Error> {
    let timeout = text.map(|t| crate::units::Nanos::parse(t).map(|n| n.duration())).transpose().map_err(|e| Error::bad_input(format!("--timeout: {e}")))?;
    if timeout.is_some_and(|t| t.is_zero()) {
        return Err(Error::bad_input("--timeout: 0 s leaves no time to run; give a positive duration such as 10m"));
    }
    Ok(timeout)
}

/// Parses `args` (including the program name) and runs; returns the exit code.
pub fn main_with_args(args: Vec<String>, interrupted: &AtomicBool) -> i32 {
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    let result = match cli.command {
        Command::Run(run) => load_plan(run.job.as_deref()).and_then(|plan| run_command(plan, run.settings, args, interrupted)),
        Command::Recipe { action } => recipe_command(action, args, interrupted),
        Command::Validate { job } => validate(&job),
        Command::Report { file, format } => reporters::for_report(&format)
            .and_then(|render| {
                print!("{}", render(&report::read(&file)?));
                Ok(0)
            })
            .map_err(Error::bad_input),
        Command::Compare(compare) => compare_command(&compare).map_err(Error::bad_input),
        Command::Backends { uri, markdown, names } => names
            .iter()
            .map(|name| backend::find(name))
            .collect::<Result<Vec<_>, _>>()
            .map(|chosen| {
                let chosen = if chosen.is_empty() { backend::registry().iter().collect() } else { chosen };
                if markdown {
                    chosen.iter().for_each(|kind| print!("{}", options_markdown(kind)));
                    return Ok(0);
                }
                let (text, reaches) = list_backends_checked(&chosen, uri.as_deref());
                if uri.is_some() && reaches.iter().all(|r| *r == backend::server::Reach::NotChecked) {
                    let schemes: Vec<&str> = chosen.iter().filter_map(|k| k.server.as_ref()).flat_map(|s| s.schemes.iter().copied()).collect();
                    if schemes.is_empty() {
                        return Err("--uri checks a server, and none of the backends listed has one (server backends: postgres, mariadb, s3, gridfs)".into());
                    }
                    // Not echoed: what is not a URI cannot be trusted to have its password found and hidden.
                    return Err(format!(
                        "--uri: no backend listed here takes that URI; give one starting with {} (a libpq \"key=value\" string is not a URI)",
                        schemes.join(", ")
                    ));
                }
                print!("{text}");
                // A script checking a server before a run can rely on the code: 1 when it does not
                // answer, 2 when the URI itself is bad input.
                Ok(match () {
                    _ if reaches.contains(&backend::server::Reach::Invalid) => EXIT_USAGE,
                    _ if uri.is_some() && reaches.contains(&backend::server::Reach::Unreachable) => 1,
                    _ => 0,
                })
            })
            .and_then(|r| r)
            .map_err(Error::bad_input),
        Command::Fio(fio) => crate::fio::cli::run(&fio, args, interrupted),
        Command::Cleanup { dir, dry_run } => cleanup(&dir, dry_run),
        Command::Compact { dir, drop_damaged } => {
            crate::pack::compact_with(&dir, crate::pack::CompactOptions { drop_damaged }).map_err(|e| compact_failure(&dir, e)).map(|r| {
                if r.already_compact {
                    println!(
                        "{} is already compact: {} live records in one file of {} bytes, nothing dead or damaged (generation {}); \
                         no record rewritten",
                        dir.display(),
                        r.live_records,
                        r.bytes_before,
                        r.generation
                    );
                    return 0;
                }
                println!(
                    "compacted {}: {} live records, {} → {} bytes (generation {})",
                    dir.display(),
                    r.live_records,
                    r.bytes_before,
                    r.bytes_after,
                    r.generation
                );
                if r.dropped_damaged_bytes > 0 {
                    println!("  dropped {} damaged byte(s) holding no record that checks (--drop-damaged)", r.dropped_damaged_bytes);
                }
                if r.cut_tail_bytes > 0 {
                    println!("  left out {} byte(s) of zeros after the last record (space a durable writer wrote ahead)", r.cut_tail_bytes);
                }
                0
            })
        }
    };
    result.unwrap_or_else(|e| {
        crate::say!("stowbench: {}", e.message);
        e.exit_code()
    })
}

/// `compact` failed: a directory that is no pack store (or a damaged one) is the user's to fix;
/// the disk failing under it is the environment.
fn compact_failure(dir: &Path, e: backend::BackendError) -> Error {
    let message = format!("compact {}: {}", dir.display(), e.message);
    match e.kind {
        backend::ErrorKind::Io | backend::ErrorKind::NoSpace => Error::environment(message),
        _ => Error::bad_input(message),
    }
}

fn compare_command(args: &CompareArgs) -> Result<i32, String> {
    let render = reporters::for_comparison(&args.format)?;
    let names: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    let reports = args.files.iter().map(|f| report::read(f)).collect::<Result<Vec<_>, _>>()?;
    let candidates: Vec<(&str, &report::model::RunReport)> = names[1..].iter().map(String::as_str).zip(&reports[1..]).collect();
    let options = compare::Options { metrics: args.metric.clone(), fail_if_slower_percent: args.fail_if_slower };
    let comparison = compare::compare((&names[0], &reports[0]), &candidates, &options)?;
    print!("{}", render(&comparison));
    Ok(if comparison.gate.as_ref().is_some_and(|g| !g.passed) { EXIT_SLOWER } else { 0 })
}

/// The job file's plan: a file that cannot be read or is wrong is the user's to fix.
fn load_plan(job: Option<&Path>) -> Result<Plan, Error> {
    match job {
        Some(path) => job::load_file(path).map_err(Error::bad_input),
        None => Ok(job::quick()),
    }
}

fn recipe_command(action: RecipeAction, command: Vec<String>, interrupted: &AtomicBool) -> Result<i32, Error> {
    use crate::job::recipes;
    match action {
        RecipeAction::List => print!("{}", recipes::list()),
        RecipeAction::Show { name } => print!("{}", recipes::find(&name).map_err(Error::bad_input)?.text),
        RecipeAction::Run { name, scale, settings } => {
            let plan = recipes::find(&name).and_then(|recipe| recipes::plan(recipe, scale)).map_err(Error::bad_input)?;
            // With --targets, run_command's retain_targets judges the names, the skipped
            // targets' included, and leaves nothing counted as skipped for want of a server.
            if settings.targets.is_empty() {
                for s in plan.recipe.iter().flat_map(|r| &r.skipped_targets) {
                    crate::say!("stowbench: skipping target {}: {}; to run it: {}", s.target, s.reason, s.enable);
                }
                if plan.targets.is_empty() && plan.fio.is_empty() {
                    return Err(Error::bad_input(format!("recipe {name}: every target was skipped; nothing to run")));
                }
            }
            return run_command(plan, settings, command, interrupted);
        }
    }
    Ok(0)
}

fn run_command(mut plan: Plan, args: RunSettings, command: Vec<String>, interrupted: &AtomicBool) -> Result<i32, Error> {
    if !args.targets.is_empty() {
        plan.retain_targets(&args.targets).map_err(Error::bad_input)?;
    }
    if let Some(seed) = args.seed {
        plan.seed = seed;
    }
    let timeout = run_timeout(args.timeout.as_deref())?;
    let opts = RunOptions {
        work_dir: args.work_dir,
        keep: args.keep,
        skip_space_check: args.no_space_check,
        command,
        timeout,
        clock: args.clock,
        ..RunOptions::default()
    };
    #[cfg(feature = "mpi")]
    if crate::multihost::launched() {
        // Started by mpirun: this process is one rank of the job (docs/multi-host.md).
        let ranks = crate::multihost::MpiRanks::init().map_err(Error::environment)?;
        return match run_and_print_with(&plan, &args.output, opts, interrupted, &ranks) {
            Ok(outcome) => Ok(outcome.exit_code),
            Err(e) => {
                // Every rank refuses with the same words (they agreed on them): rank 0 says them,
                // here, before MPI is finalised; after that the others exit, and mpirun may end
                // rank 0 before it has printed anything.
                if runner::ranks::Ranks::is_lead(&ranks) {
                    crate::say!("stowbench: {e}");
                }
                Ok(e.exit_code())
            }
        };
    }
    // Without the feature, every rank mpirun starts would run the whole job on its own, each
    // with its own report and the machine's cores shared among them: no figure would be the
    // job's. (A world of one is one run, as without mpirun.)
    #[cfg(not(feature = "mpi"))]
    if crate::host::started_by_mpirun() && crate::host::mpirun_world_size() != Some(1) {
        let ranks = crate::host::mpirun_world_size().map_or_else(|| "several".to_string(), |n| n.to_string());
        return Err(Error::bad_input(format!(
            "started by mpirun ({ranks} processes), but this stowbench was built without the mpi feature: each process would run \
             the whole job alone. Build it with `cargo build --release --features mpi` to run the job across the ranks \
             (docs/multi-host.md), or run it without mpirun"
        )));
    }
    run_and_print(&plan, &args.output, opts, interrupted).map(|outcome| outcome.exit_code)
}

/// Runs a plan and prints its report in the chosen format: the one path of `run`, `recipe run`
/// and `fio`, so each writes the same report (one run id, one environment capture, one atomic
/// writer, after every case) to OUT/<timestamp>/report.json. `opts.report_path` and
/// `opts.progress` come from `output`.
pub fn run_and_print(plan: &Plan, output: &OutputSettings, opts: RunOptions, interrupted: &AtomicBool) -> Result<RunOutcome, Error> {
    run_and_print_with(plan, output, opts, interrupted, &runner::ranks::Solo)
}

/// `run_and_print` as one of the processes of `ranks`: only the first rank prints and names the
/// report; the others stay quiet but for errors.
pub fn run_and_print_with(
    plan: &Plan,
    output: &OutputSettings,
    opts: RunOptions,
    interrupted: &AtomicBool,
    ranks: &dyn runner::ranks::Ranks,
) -> Result<RunOutcome, Error> {
    // Checked before running: a format the report cannot take must not cost a whole run.
    let render = reporters::for_report(&output.format).map_err(Error::bad_input)?;
    let stamp = report::timestamp_compact(std::time::SystemTime::now());
    // Only the lead writes a report; it claims its directory now, so that two runs started in
    // the same second never share one.
    let out_existed = output.out.exists();
    let dir = if ranks.is_lead() { claim_report_directory(&output.out, &stamp).map_err(Error::environment)? } else { output.out.join(&stamp) };
    let report_path = dir.join("report.json");
    let opts = RunOptions { report_path: report_path.clone(), progress: !output.no_progress, ..opts };
    let outcome = runner::run_with(plan, &opts, interrupted, ranks).inspect_err(|_| {
        // Refused before its first report: what was made for it goes, if nothing was written
        // there (remove_dir removes only an empty directory).
        if ranks.is_lead() && std::fs::remove_dir(&dir).is_ok() && !out_existed {
            let _ = std::fs::remove_dir(&output.out);
        }
    })?;
    if let Some(e) = &outcome.cleanup_error {
        crate::say!("stowbench: the run's data could not be removed: {e}. `stowbench cleanup` removes it.");
    }
    if !ranks.is_lead() {
        return Ok(outcome);
    }
    print!("{}", render(&outcome.report));
    match &outcome.report_error {
        // The figures above are all that is left of the run: say so, and why.
        Some(e) => crate::say!(
            "stowbench: the report could not be written: {e}. No case started after that; the results above are \
             the only copy of the {} finished case(s). Free the disk or fix the --out directory, then run again.",
            outcome.report.cases.len() + outcome.report.fio_cases.len()
        ),
        None => crate::say!("report: {}\npage:   {}", report_path.display(), report_path.with_extension("html").display()),
    }
    if outcome.exit_code == 130 {
        let finished = outcome.report.cases.len() + outcome.report.fio_cases.len();
        crate::say!("interrupted: {finished} finished case(s) kept in the report");
    }
    Ok(outcome)
}

/// Creates OUT/STAMP (or STAMP-2, STAMP-3 … when taken) for one run's report. `create_dir`
/// either makes the directory or fails because it exists, so a run started in the same second
/// (another process, another rank of a default build) gets a directory of its own.
fn claim_report_directory(out: &Path, stamp: &str) -> Result<PathBuf, String> {
    let first = out.join(stamp);
    if out.exists() && !out.is_dir() {
        return Err(format!("cannot create the report directory {}: {} is not a directory (--out)", first.display(), out.display()));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create the report directory {}: {e} (--out)", first.display()))?;
    for n in 1u32.. {
        let dir = if n == 1 { out.join(stamp) } else { out.join(format!("{stamp}-{n}")) };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create the report directory {}: {e}", dir.display())),
        }
    }
    unreachable!("some numbered directory is free")
}

/// Checks a job file: every loader mistake, every target's backend option mistake (found by
/// constructing the backend, as the runner's preflight does) and every case asking a backend for
/// what it does not declare (`runner::contract`), reported together, in file order.
fn validate(path: &Path) -> Result<i32, Error> {
    let source = path.display().to_string();
    let (plan, mut mistakes) = job::check_text(&job::read_file(path).map_err(Error::bad_input)?, &source);
    let Some(plan) = plan else { return Err(Error::bad_input(job::render_mistakes(&source, mistakes))) };
    // A run id of its own, as a run's: a target's `path` gets stowbench-<run id>-<target> inside
    // it, which must be this check's alone (a fixed name was refused when some other directory
    // had it, and shared between two checks running at once).
    let run_id = format!("validate-{}", runner::new_run_id());
    let dir = std::env::temp_dir().join(format!("stowbench-{run_id}"));
    let root = backend::Namespace::create(&dir, &run_id, "validate").map_err(Error::environment)?;
    let mut servers_down = Vec::new();
    for (i, target) in plan.targets.iter().enumerate() {
        let kind = backend::find(&target.backend).map_err(Error::bad_input)?;
        let ns = root.child(&namespace::safe_name(&target.name)).map_err(Error::environment)?;
        // A multi-host job's `{rank}` paths are checked as rank 0 (this host) would use them.
        let mut options = target.options.clone();
        options.expand_rank(0);
        match options.construct_all(|options| (kind.construct)(options, &ns)) {
            Ok(b) => {
                // What the run's preflight would refuse, validate refuses too.
                if let Err(found) = runner::contract::check(&plan, i, &b.capabilities()) {
                    mistakes.extend(found.iter().map(|e| job::Mistake::from_message(&source, e)));
                }
                let _ = b.cleanup();
            }
            Err(found) if found.len() > 1 => mistakes.extend(found.iter().map(|e| job::Mistake::from_message(&source, e))),
            Err(mut found) => match runner::construct_failure(kind, target, found.remove(0)) {
                // Not the job's mistake: listed with them, counted apart, and the exit code says
                // the machine's when nothing else is wrong.
                e if e.kind == crate::error::Kind::Environment => servers_down.push(job::Mistake::from_message(&source, &e.message)),
                e => mistakes.push(job::Mistake::from_message(&source, &e.message)),
            },
        }
    }
    namespace::remove(&root.dir).map_err(Error::environment)?;
    // What every rank of an mpirun start would refuse (checked as for ranks on one host: where
    // they run is known only then).
    if plan.mpi_keys == crate::job::plan::KeySharing::Shared {
        if let Err(e) = runner::contract::refuse_shared_keys(&plan, 1) {
            mistakes.push(job::Mistake::from_message(&source, &e));
        }
    }
    if let Some(dir) = &plan.work_dir {
        if let Err(e) = runner::work_parent(None, Some((&crate::backend::options::with_rank(dir, 0), plan.work_dir_at.as_deref()))) {
            mistakes.push(job::Mistake::from_message(&source, &e.message));
        }
    }
    if !mistakes.is_empty() || !servers_down.is_empty() {
        // The environment's code only when servers are all that is wrong: a mistake of the job
        // is the first thing to fix.
        let only_servers_down = mistakes.is_empty();
        let text = job::render_mistakes_and_servers(&source, mistakes, servers_down);
        return Err(if only_servers_down { Error::environment(text) } else { Error::bad_input(text) });
    }
    let fio_cases: Vec<crate::fio::FioCase> = plan.fio.iter().flat_map(crate::fio::expand).collect();
    println!(
        "{}: ok — {} target(s), {} workload(s), {} case(s), {} fio case(s)",
        path.display(),
        plan.targets.len(),
        plan.workloads.len(),
        plan.cases.len(),
        fio_cases.len()
    );
    for id in plan.cases.iter().map(|c| &c.id).chain(fio_cases.iter().map(|c| &c.id)) {
        println!("  {id}");
    }
    Ok(0)
}

/// The text of `stowbench backends` for `kinds`, with a line per server backend saying whether
/// its server (at `uri`, or named by its environment variable) answers, and its version.
pub fn list_backends_checked(kinds: &[&backend::BackendKind], uri: Option<&str>) -> (String, Vec<backend::server::Reach>) {
    let mut out = String::new();
    let mut reaches = Vec::new();
    // The names' column fits the longest name of all backends, so descriptions line up; the
    // defaults' column fits the usual ones, and the few long ones (an environment variable "or"
    // a fallback) push their own line's description along rather than every line's.
    let name_width = kinds.iter().flat_map(|kind| kind.options.iter()).map(|o| o.name.chars().count()).max().unwrap_or(0);
    let default_width = 18;
    for kind in kinds {
        let tool = if kind.is_test_tool { " [test tool]" } else { "" };
        out += &format!("{}{tool}: {}\n", kind.name, kind.summary);
        if let Some((line, reach)) = backend::server::reachability(kind.name, uri) {
            out += &format!("    server: {line}\n");
            reaches.push(reach);
        }
        for o in kind.options {
            let default = if o.default.is_empty() { "(none)" } else { o.default };
            out += &format!("    {:<name_width$} default {:<default_width$} {}\n", o.name, default, o.help);
        }
    }
    (out, reaches)
}

/// The Markdown table of `kind`'s options, between the markers its docs page carries: generated
/// from the declarations, so the page cannot drift from the code (tests/cli.rs checks it does not).
pub fn options_markdown(kind: &backend::BackendKind) -> String {
    let mut out = format!("<!-- options of {}: generated by `stowbench backends --markdown {}`; edit the declaration in the code -->\n", kind.name, kind.name);
    out += "| option | default | meaning |\n|---|---|---|\n";
    for o in kind.options {
        let default = if o.default.is_empty() { "(none)".to_string() } else { format!("`{}`", o.default) };
        out += &format!("| `{}` | {default} | {} |\n", o.name, o.help.replace('|', "\\|"));
    }
    out + "<!-- end of options -->\n"
}

/// Whether a stowbench process is using `dir`, or a fio target directly inside it: a run holds
/// each fio target's marker while fio runs there, and the run's directory holds that target.
fn in_use_with_its_fio_targets(dir: &Path) -> bool {
    let live_target_inside = || {
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        entries
            .filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-fio-"))
            .any(|e| namespace::is_owned(&e.path()) && namespace::in_use(&e.path()))
    };
    namespace::in_use(dir) || live_target_inside()
}

fn cleanup(dir: &Path, dry_run: bool) -> Result<i32, Error> {
    if let Ok(to) = std::fs::read_link(dir) {
        return Err(Error::bad_input(format!(
            "{} is a symbolic link to {}: stowbench never deletes through a link; give the directory itself",
            dir.display(),
            to.display()
        )));
    }
    if !dir.is_dir() {
        let what = if dir.exists() { "is not a directory" } else { "does not exist" };
        return Err(Error::bad_input(format!(
            "{} {what}: give a run's stowbench-<run id> directory, or the directory holding them (the --work-dir of the run)",
            dir.display()
        )));
    }
    // fio targets left by a killed run first: their mounts and loop devices must go before the
    // directories holding them.
    let fio_targets = crate::fio::registry::leftovers(dir)?;
    let dirs: Vec<PathBuf> = if namespace::is_owned(dir) {
        vec![dir.to_path_buf()]
    } else {
        // A DIR that is not there is a mistake in the command line.
        let entries = std::fs::read_dir(dir).map_err(|e| Error::bad_input(format!("cannot read {}: {e}", dir.display())))?;
        let mut ours: Vec<PathBuf> = Vec::new();
        for entry in entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-")) {
            let path = entry.path();
            // A link to a run's directory is not that directory: removing through it would
            // empty a directory outside DIR.
            if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                if namespace::is_owned(&path) {
                    println!("skipped {}: a symbolic link, not followed (give the directory it points to)", path.display());
                }
                continue;
            }
            if namespace::is_owned(&path) && !fio_targets.iter().any(|t| t.ns_dir == path) {
                ours.push(path);
            }
        }
        ours.sort();
        ours
    };
    if dirs.is_empty() && fio_targets.is_empty() {
        return Err(Error::bad_input(format!(
            "{} carries no {} marker and holds no stowbench-* directory that does; nothing {}",
            dir.display(),
            namespace::MARKER_FILE,
            if dry_run { "would be removed" } else { "was removed" }
        )));
    }
    // A run still writing keeps its directory: removing it would fail that run, or worse, let it
    // report numbers measured on files deleted under it.
    let (busy, dirs): (Vec<PathBuf>, Vec<PathBuf>) = dirs.into_iter().partition(|d| in_use_with_its_fio_targets(d));
    // A run's fio targets live inside its directory (a made filesystem is mounted there): found
    // and undone before that directory is removed, as when the run directory itself is given.
    let mut fio_targets = fio_targets;
    let run_dirs: Vec<&PathBuf> = dirs.iter().filter(|d| d.as_path() != dir).collect();
    for d in &run_dirs {
        fio_targets.extend(crate::fio::registry::leftovers(d)?);
    }
    for d in &busy {
        crate::say!(
            "stowbench: {} {}: a stowbench run is still using it (it holds the lock on its {}); let the run end, or stop it, then clean up",
            if dry_run { "would keep" } else { "kept" },
            d.display(),
            namespace::MARKER_FILE
        );
    }
    // Server objects first (see backend::record): a directory whose server cannot be reached is
    // kept, with its record, for a later cleanup.
    // Each kept directory with what must hold before cleaning it again can work.
    let mut kept: Vec<PathBuf> = Vec::new();
    let mut again_once: Vec<Vec<String>> = Vec::new();
    for d in &dirs {
        for case_dir in backend::record::find(d) {
            match backend::record::clean(&case_dir, dry_run) {
                Ok(lines) => lines.iter().for_each(|l| println!("{} {l}", if dry_run { "would remove" } else { "removed" })),
                Err(failure) => {
                    crate::say!("stowbench: {}", failure.message);
                    let at = kept.iter().position(|k| k == d).unwrap_or_else(|| {
                        kept.push(d.clone());
                        again_once.push(Vec::new());
                        kept.len() - 1
                    });
                    if !again_once[at].contains(&failure.again_once) {
                        again_once[at].push(failure.again_once);
                    }
                }
            }
        }
    }
    let exit_code = if kept.is_empty() && busy.is_empty() { 0 } else { EXIT_CLEANUP_INCOMPLETE };
    if dry_run {
        for t in &fio_targets {
            for (what, path) in [("unmount", &t.mount_point), ("detach", &t.loop_dev)] {
                if let Some(path) = path {
                    println!("would {what} {}", path.display());
                }
            }
            println!("would remove fio target {}", t.ns_dir.display());
        }
        for d in dirs.iter().filter(|d| !kept.contains(d)) {
            println!("would remove {}", d.display());
        }
        return Ok(exit_code);
    }
    for holder in std::iter::once(dir).chain(run_dirs.iter().filter(|d| !kept.contains(d)).map(|d| d.as_path())) {
        for path in crate::fio::registry::cleanup_leftovers(holder)? {
            println!("removed fio target {}", path.display());
        }
    }
    for d in dirs.iter().filter(|d| !kept.contains(d)) {
        namespace::remove(d).map_err(Error::environment)?;
        println!("removed {}", d.display());
    }
    for (d, conditions) in kept.iter().zip(&again_once) {
        crate::say!("stowbench: kept {} and its server records; run `stowbench cleanup {}` again once {}", d.display(), d.display(), conditions.join(" and "));
    }
    Ok(exit_code)
}

#[cfg(test)]
mod tests {
    /// Two runs started in the same second once both chose OUT/STAMP (each checked that it did
    /// not exist, then made it later), and one report replaced the other.
    #[test]
    fn each_run_claims_a_report_directory_of_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("results");
        let claims: Vec<_> = (0..3).map(|_| super::claim_report_directory(&out, "20261127-050000").unwrap()).collect();
        let names: Vec<_> = claims.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["20261127-050000", "20261127-050000-2", "20261127-050000-3"]);
        assert!(claims.iter().all(|d| d.is_dir()));
        std::fs::write(tmp.path().join("file"), b"").unwrap();
        let refused = super::claim_report_directory(&tmp.path().join("file"), "s").unwrap_err();
        assert!(refused.contains("--out"), "{refused}");
    }
}
