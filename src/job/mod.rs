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

/// Reads a job file; text that is not UTF-8 is refused at its line and column.
pub fn read_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read job file {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    // Read at most one byte past the limit: /dev/zero, a FIFO or a huge file given by mistake
    // must not be read without end.
    let mut bytes = Vec::new();
    file.take(MAX_JOB_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_JOB_FILE_BYTES {
        return Err(format!(
            "{}: the job file is larger than {} MiB, far beyond any job (is it the right file?); give a job file in TOML or JSON",
            path.display(),
            MAX_JOB_FILE_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| not_utf8(&path.display().to_string(), e.as_bytes(), e.utf8_error().valid_up_to()))
}

/// The largest job file read: a job of thousands of targets and workloads is far smaller.
pub const MAX_JOB_FILE_BYTES: u64 = 16 << 20;

/// Where a job file stops being UTF-8, as `file:line:column` (the column counted in characters,
/// as every other mistake's), with the byte and its offset, and the fix.
fn not_utf8(source: &str, bytes: &[u8], at: usize) -> String {
    let before = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    let utf16 = if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) { " (it starts with a UTF-16 byte-order mark)" } else { "" };
    format!("{source}:{line}:{column}: the job file is not UTF-8: byte 0x{:02x} at offset {at}{utf16}; save it as UTF-8", bytes[at])
}

/// Reads, parses and validates a job file.
pub fn load_file(path: &Path) -> Result<Plan, String> {
    load_text(&read_file(path)?, &path.display().to_string())
}

/// The built-in quick comparison.
pub fn quick() -> Plan {
    load_text(QUICK_RECIPE, "built-in recipe quick").expect("the built-in quick recipe is valid (tested)")
}

#[cfg(test)]
mod tests {
    /// `stowbench validate /dev/zero` read without end.
    #[test]
    fn a_job_file_is_read_only_up_to_its_limit() {
        let e = super::read_file(std::path::Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e, "/dev/zero: the job file is larger than 16 MiB, far beyond any job (is it the right file?); give a job file in TOML or JSON");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("at_limit.toml");
        std::fs::write(&path, vec![b'#'; super::MAX_JOB_FILE_BYTES as usize]).unwrap();
        assert_eq!(super::read_file(&path).map(|text| text.len() as u64), Ok(super::MAX_JOB_FILE_BYTES));
    }

    #[test]
    fn a_job_that_is_not_utf8_is_refused_at_its_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, b"version = 1\nname = \"\xc3\xa9t\xff\"\n").unwrap();
        let e = super::read_file(&path).unwrap_err();
        assert!(e.ends_with("bad.toml:2:11: the job file is not UTF-8: byte 0xff at offset 23; save it as UTF-8"), "{e}");
        std::fs::write(&path, b"\xff\xfev\x00").unwrap();
        let e = super::read_file(&path).unwrap_err();
        assert!(
            e.ends_with("bad.toml:1:1: the job file is not UTF-8: byte 0xff at offset 0 (it starts with a UTF-16 byte-order mark); save it as UTF-8"),
            "{e}"
        );
    }
}
