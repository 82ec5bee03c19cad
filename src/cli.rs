//! Command-line interface: `run`, `validate`, `report`, `backends`, `cleanup`.
//!
//! Raw arguments are parsed by clap, then validated into a `Plan`; every failure becomes a
//! message and an exit code (0 ok, 1 a case failed, 2 bad input or usage, 130 interrupted).
//! Results go to stdout, progress and messages to stderr.

use crate::backend::{self, namespace};
use crate::job::{self, Plan};
use crate::report;
use crate::runner::{self, RunOptions};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Exit code: bad input or usage.
pub const EXIT_USAGE: i32 = 2;

/// Where should the files live? Measure it on your own machine.
#[derive(Debug, Parser)]
#[command(name = "stowbench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a job file, or the quick default comparison when none is given.
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
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// List the backends, their options and defaults, and whether each server answers.
    Backends {
        /// A server URI to check (postgres://, mysql://, http(s):// for S3, mongodb://); without
        /// it the STOWBENCH_*_URI / STOWBENCH_S3_ENDPOINT environment variables are checked.
        #[arg(long)]
        uri: Option<String>,
    },
    /// Run a fio sweep (rw × block size × threads × queue depth × files × targets) and chart it.
    Fio(Box<crate::fio::cli::FioArgs>),
    /// Rewrite a pack store's live objects into new files, reclaiming deleted and overwritten space.
    Compact {
        /// The pack directory (a `pack` target's data directory, kept with `run --keep`).
        dir: PathBuf,
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

/// Output formats for results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Table,
    /// The canonical report JSON.
    Json,
    /// One row per case, phase and operation.
    Csv,
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
    /// Directory for results; the report goes to OUT/<timestamp>/report.json.
    #[arg(long, default_value = "stowbench-results")]
    pub out: PathBuf,
    /// Parent directory for the run's data (a marked stowbench-<run id> directory is made in it).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep the stored data after each case.
    #[arg(long)]
    pub keep: bool,
    /// Only these targets (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Override the job's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// How to print results on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// No progress display on stderr.
    #[arg(long)]
    pub no_progress: bool,
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
        Command::Report { file, format } => report::read(&file).map(|r| {
            print!("{}", render(&r, format));
            0
        }),
        Command::Backends { uri } => {
            print!("{}", list_backends_checked(uri.as_deref()));
            Ok(0)
        }
        Command::Fio(args) => crate::fio::cli::run(&args),
        Command::Cleanup { dir, dry_run } => cleanup(&dir, dry_run),
        Command::Compact { dir } => crate::pack::compact(&dir).map_err(|e| format!("compact {}: {}", dir.display(), e.message)).map(|r| {
            println!(
                "compacted {}: {} live records, {} → {} bytes (generation {})",
                dir.display(),
                r.live_records,
                r.bytes_before,
                r.bytes_after,
                r.generation
            );
            0
        }),
    };
    result.unwrap_or_else(|message| {
        eprintln!("stowbench: {message}");
        EXIT_USAGE
    })
}

fn render(r: &report::model::RunReport, format: Format) -> String {
    match format {
        Format::Table => report::table::render(r),
        Format::Json => serde_json::to_string_pretty(r).unwrap_or_default() + "\n",
        Format::Csv => report::csv::render(r),
    }
}

fn load_plan(job: Option<&Path>) -> Result<Plan, String> {
    match job {
        Some(path) => job::load_file(path),
        None => Ok(job::quick()),
    }
}

fn recipe_command(action: RecipeAction, command: Vec<String>, interrupted: &AtomicBool) -> Result<i32, String> {
    use crate::job::recipes;
    match action {
        RecipeAction::List => print!("{}", recipes::list()),
        RecipeAction::Show { name } => print!("{}", recipes::find(&name)?.text),
        RecipeAction::Run { name, scale, settings } => {
            let plan = recipes::plan(recipes::find(&name)?, scale)?;
            let skipped = plan.recipe.as_ref().map(|r| r.skipped_targets.clone()).unwrap_or_default();
            if let Some(s) = skipped.iter().find(|s| settings.targets.contains(&s.target)) {
                return Err(format!("--targets: target \"{}\" cannot run: {}; to run it: {}", s.target, s.reason, s.enable));
            }
            for s in &skipped {
                eprintln!("stowbench: skipping target {}: {}; to run it: {}", s.target, s.reason, s.enable);
            }
            if plan.targets.is_empty() && plan.fio.is_empty() {
                return Err(format!("recipe {name}: every target was skipped; nothing to run"));
            }
            return run_command(plan, settings, command, interrupted);
        }
    }
    Ok(0)
}

fn run_command(mut plan: Plan, args: RunSettings, command: Vec<String>, interrupted: &AtomicBool) -> Result<i32, String> {
    if !args.targets.is_empty() {
        plan.retain_targets(&args.targets)?;
    }
    if let Some(seed) = args.seed {
        plan.seed = seed;
    }
    let stamp = report::timestamp_compact(std::time::SystemTime::now());
    let mut dir = args.out.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = args.out.join(format!("{stamp}-{n}"));
    }
    let report_path = dir.join("report.json");
    let opts = RunOptions { report_path: report_path.clone(), work_dir: args.work_dir, keep: args.keep, progress: !args.no_progress, command };
    let outcome = runner::run(&plan, &opts, interrupted)?;
    print!("{}", render(&outcome.report, args.format));
    eprintln!("report: {}", report_path.display());
    if outcome.exit_code == 130 {
        eprintln!("interrupted: {} finished case(s) kept in the report", outcome.report.cases.len());
    }
    Ok(outcome.exit_code)
}

fn validate(path: &Path) -> Result<i32, String> {
    let plan = job::load_file(path)?;
    let dir = std::env::temp_dir().join(format!("stowbench-validate-{}", runner::new_run_id()));
    let root = backend::Namespace::create(&dir, "validate", "validate")?;
    let mut problems = Vec::new();
    for target in &plan.targets {
        let kind = backend::find(&target.backend)?;
        let ns = root.child(&namespace::safe_name(&target.name))?;
        match (kind.construct)(&target.options, &ns) {
            Ok(b) => {
                let _ = b.cleanup();
            }
            Err(e) => problems.push(e),
        }
    }
    namespace::remove(&root.dir)?;
    if !problems.is_empty() {
        return Err(problems.join("\n"));
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

/// The text of `stowbench backends`.
pub fn list_backends() -> String {
    list_backends_checked(None)
}

/// The text of `stowbench backends`, with a line per server backend saying whether its server
/// (at `uri`, or named by its environment variable) answers, and its version.
pub fn list_backends_checked(uri: Option<&str>) -> String {
    let mut out = String::new();
    for kind in backend::registry() {
        let tool = if kind.is_test_tool { " [test tool]" } else { "" };
        out += &format!("{}{tool}: {}\n", kind.name, kind.summary);
        if let Some(line) = backend::server::reachability(kind.name, uri) {
            out += &format!("    server: {line}\n");
        }
        for o in kind.options {
            let default = if o.default.is_empty() { "(none)" } else { o.default };
            out += &format!("    {:<20} default {:<18} {}\n", o.name, default, o.help);
        }
    }
    out
}

fn cleanup(dir: &Path, dry_run: bool) -> Result<i32, String> {
    // fio targets left by a killed run first: their mounts and loop devices must go before the
    // directories holding them.
    let fio_targets = crate::fio::registry::leftovers(dir).map_err(|e| e.to_string())?;
    let dirs: Vec<PathBuf> = if namespace::is_owned(dir) {
        vec![dir.to_path_buf()]
    } else {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let mut ours: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("stowbench-") && namespace::is_owned(&e.path()))
            .map(|e| e.path())
            .filter(|p| !fio_targets.iter().any(|t| t.ns_dir == *p))
            .collect();
        ours.sort();
        ours
    };
    if dirs.is_empty() && fio_targets.is_empty() {
        return Err(format!(
            "{} carries no {} marker and holds no stowbench-* directory that does; nothing {}",
            dir.display(),
            namespace::MARKER_FILE,
            if dry_run { "would be removed" } else { "was removed" }
        ));
    }
    if dry_run {
        for t in &fio_targets {
            for (what, path) in [("unmount", &t.mount_point), ("detach", &t.loop_dev)] {
                if let Some(path) = path {
                    println!("would {what} {}", path.display());
                }
            }
            println!("would remove fio target {}", t.ns_dir.display());
        }
        for d in &dirs {
            println!("would remove {}", d.display());
        }
        return Ok(0);
    }
    for path in crate::fio::registry::cleanup_leftovers(dir).map_err(|e| e.to_string())? {
        println!("removed fio target {}", path.display());
    }
    for d in &dirs {
        namespace::remove(d)?;
        println!("removed {}", d.display());
    }
    Ok(0)
}
