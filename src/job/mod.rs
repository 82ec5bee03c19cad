//! Job files: parsing (`spec`), checking and matrix expansion (`check`, into the types of `plan`),
//! and the built-in recipes.
//!
//! A job file's mistakes are all reported at once, each located by line and column, in file
//! order, then counted: a user fixes the file in one pass instead of one run per mistake.

pub mod check;
pub mod plan;
pub mod recipes;
pub mod spec;

pub use plan::{Arrivals, CasePlan, PhasePlan, Plan, Rate, Stop, WorkloadPlan};

use std::path::Path;

/// The quick default comparison run by `stowbench run` without a job file.
pub const QUICK_RECIPE: &str = include_str!("../../recipes/quick.toml");

/// One mistake in a job file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mistake {
    /// 1-based line of the key (or table) at fault.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The field, what is wrong and the fix, without the file and position.
    pub message: String,
}

impl Mistake {
    /// Reads back a message that starts with "SOURCE:LINE:COL: " (as backend option errors do);
    /// a message without a position sorts after every located one.
    pub fn from_message(source: &str, message: &str) -> Mistake {
        let located = message.strip_prefix(source).and_then(|rest| rest.strip_prefix(':')).and_then(|rest| {
            let mut parts = rest.splitn(3, ':');
            let line = parts.next()?.parse().ok()?;
            let column = parts.next()?.parse().ok()?;
            Some((line, column, parts.next()?.trim_start().to_string()))
        });
        match located {
            Some((line, column, message)) => Mistake { line, column, message },
            None => Mistake { line: usize::MAX, column: 0, message: message.to_string() },
        }
    }
}

/// Every mistake as "SOURCE:LINE:COL: message" lines in file order, then how many there were.
pub fn render_mistakes(source: &str, mistakes: Vec<Mistake>) -> String {
    render_mistakes_and_servers(source, mistakes, Vec::new())
}

/// The job's mistakes and the targets whose server does not answer (the machine's, not the
/// job's), as lines in file order, then how many of each.
pub fn render_mistakes_and_servers(source: &str, mistakes: Vec<Mistake>, servers_down: Vec<Mistake>) -> String {
    let (n, down) = (mistakes.len(), servers_down.len());
    let mut all: Vec<Mistake> = mistakes.into_iter().chain(servers_down).collect();
    all.sort_by_key(|m| (m.line, m.column));
    all.dedup();
    let mut out = String::new();
    for m in &all {
        if m.line == usize::MAX {
            out.push_str(&format!("{}\n", m.message));
        } else {
            out.push_str(&format!("{source}:{}:{}: {}\n", m.line, m.column, m.message));
        }
    }
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let servers = plural(down, "target's server does not answer", "targets' servers do not answer");
    out.push_str(&match (n, down) {
        (_, 0) => format!("{} in {source}", plural(n, "mistake", "mistakes")),
        (0, _) => format!("no mistakes in {source}, but {servers}"),
        _ => format!("{} in {source}; {servers}", plural(n, "mistake", "mistakes")),
    });
    out
}

/// Parses and checks job text, collecting every mistake; the plan holds what checked out.
pub fn check_text(text: &str, source: &str) -> (Option<Plan>, Vec<Mistake>) {
    let parsed = spec::parse_all(text);
    let mut mistakes: Vec<Mistake> =
        parsed.mistakes.iter().map(|l| Mistake { line: l.line.unwrap_or(1), column: l.column.unwrap_or(1), message: l.message.clone() }).collect();
    let Some(job) = &parsed.job else { return (None, mistakes) };
    let (plan, more) = check::check(job, source, text, Some(&parsed));
    mistakes.extend(more);
    (Some(plan), mistakes)
}

/// Parses and validates job text; `source` names it in error messages, which list every mistake.
pub fn load_text(text: &str, source: &str) -> Result<Plan, String> {
    match check_text(text, source) {
        (Some(plan), mistakes) if mistakes.is_empty() => Ok(plan),
        (_, mistakes) => Err(render_mistakes(source, mistakes)),
    }
}

/// Reads a job file.
pub fn read_file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read job file {}: {e}", path.display()))
}

/// Reads, parses and validates a job file.
pub fn load_file(path: &Path) -> Result<Plan, String> {
    load_text(&read_file(path)?, &path.display().to_string())
}

/// The built-in quick comparison.
pub fn quick() -> Plan {
    load_text(QUICK_RECIPE, "built-in recipe quick").expect("the built-in quick recipe is valid (tested)")
}
