//! The run report: its model (`model`), how it is written (atomically, after every case), the
//! environment it records (`env`), cautions for readers (`warnings`), and the renderers that turn
//! it into a terminal table (`table`), CSV (`csv`) or an HTML page with charts (`html`, `charts`,
//! `svg`); `compare` sets runs side by side.
//! Renderers are pure functions of a report, and `reporters` is the one list of them.

pub mod breakeven;
pub mod charts;
pub mod compare;
pub mod csv;
pub mod env;
pub mod html;
pub mod model;
pub mod ranks;
pub mod repeats;
pub mod reporters;
pub mod spread;
pub mod svg;
pub mod table;
pub mod warnings;

use crate::job::{CasePlan, Plan};
use model::{CaseResult, CaseStatus, RunReport, RunStatus, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A report for a run that is about to start.
pub fn new_report(plan: &Plan, run_id: &str, command: &[String], work_dir: &Path) -> RunReport {
    RunReport {
        schema_version: SCHEMA_VERSION,
        tool: "stowbench".into(),
        tool_version: crate::BUILD.into(),
        run_id: run_id.into(),
        status: RunStatus::Running,
        started_at: rfc3339(SystemTime::now()),
        finished_at: None,
        command: command.to_vec(),
        name: plan.name.clone(),
        job_source: plan.source.clone(),
        seed: plan.seed,
        plan: serde_json::to_value(plan).unwrap_or_default(),
        environment: env::capture(work_dir),
        ranks: None,
        recipe: plan.recipe.clone(),
        break_even: Vec::new(),
        headlines: Vec::new(),
        cases: Vec::new(),
        fio_cases: Vec::new(),
        fio_failures: Vec::new(),
        warnings: Vec::new(),
    }
}

/// A case result with its identity filled in and nothing measured yet.
pub fn empty_case(case: &CasePlan, plan: &Plan) -> CaseResult {
    let target = &plan.targets[case.target];
    let kind = crate::backend::find(&target.backend).ok();
    CaseResult {
        case_id: case.id.clone(),
        status: CaseStatus::Failed,
        failure: None,
        target: target.name.clone(),
        backend: target.backend.clone(),
        backend_is_test_tool: kind.is_some_and(|k| k.is_test_tool),
        workload: case.workload_name.clone(),
        size_label: case.size.label(),
        size_bytes_max: case.size.max_bytes(),
        objects: case.objects,
        threads: case.threads,
        repeat: case.repeat,
        backend_info: serde_json::Value::Null,
        durability: String::new(),
        cache_state: if case.workload.cold_cache { "cold" } else { "warm" }.into(),
        filesystem: None,
        connect_ns: Vec::new(),
        preload: None,
        phases: Vec::new(),
        resources: Default::default(),
        disk: Default::default(),
        // What the case would have done: a case that failed before reading was not "unverified".
        verification: crate::report::model::Verification { enabled: case.workload.verify, ..Default::default() },
        wall_ns: 0,
        own_work_share: None,
        file_server: None,
        per_rank: None,
        per_host: None,
    }
}

/// Writes the report as pretty JSON to a temporary file and renames it into place, so a reader
/// or a crash never sees half a report.
pub fn write_atomically(path: &Path, report: &RunReport) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| format!("cannot serialize the report: {e}"))?;
    replace_atomically(path, &(text + "\n"))
}

/// Writes `text` to `path` through a `.tmp` sibling and a rename: readers see the old file or the new one.
pub fn replace_atomically(path: &Path, text: &str) -> Result<(), String> {
    crate::atomic_file::replace(path, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes the report's HTML page beside its JSON file (`report.json` → `report.html`), through a
/// temporary file and a rename like the JSON. Called once, when the run ends (finished or
/// interrupted): rendering every chart after every case would cost a long run more than it
/// measures, and `stowbench report report.json --format html` renders a page from any report.
pub fn write_html_atomically(json_path: &Path, report: &RunReport) -> Result<(), String> {
    replace_atomically(&json_path.with_extension("html"), &html::render(report))
}

/// Why a directory is not a report, with the reports one level below it (a results directory
/// such as stowbench-results holds one run per timestamped subdirectory), newest last.
fn reports_under(dir: &Path) -> String {
    let mut found: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|entries| entries.flatten().map(|e| e.path().join("report.json")).filter(|p| p.is_file()).collect()).unwrap_or_default();
    found.sort();
    match found.as_slice() {
        [] => format!("{} is a directory with no report.json in it or in its subdirectories; give a report file", dir.display()),
        [.., newest] => {
            format!("{} is a directory holding {} run report(s), not one report; give one, e.g. the newest: {}", dir.display(), found.len(), newest.display())
        }
    }
}

/// Writes a report of a run still going: with its break-even sizes, headlines and warnings as
/// they stand, so a run killed before its final write leaves a report that reads like one (the
/// warnings too: a sim run's report must never look like a storage result).
pub fn write_in_progress(path: &Path, report: &RunReport) -> Result<(), String> {
    let mut report = report.clone();
    report.break_even = breakeven::compute(&report);
    report.headlines = table::headlines(&report);
    report.warnings = warnings::for_report(&report);
    write_atomically(path, &report)
}

/// Why `text` (of `path`) is no report, saying what it is when it is a job file: the report
/// commands take a run's output, and a job file given instead is an easy slip.
fn not_json(path: &Path, text: &str, e: serde_json::Error) -> String {
    let job = toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("version") && (t.contains_key("target") || t.contains_key("fio")));
    match job {
        true => format!(
            "{} is a job file, not a report: run it with `stowbench run {}`, then give the report.json (or the directory) it writes under --out (stowbench-results/<timestamp>/)",
            path.display(),
            path.display()
        ),
        false => format!("{} is not JSON: {e}; give a report.json that stowbench run or stowbench fio wrote, or its directory", path.display()),
    }
}

/// Reads a report file back; a run's directory (the one holding `report.json` and `report.html`)
/// stands for its report.
pub fn read(path: &Path) -> Result<RunReport, String> {
    let inside = path.join("report.json");
    let path = if path.is_dir() && inside.is_file() { inside.as_path() } else { path };
    if path.is_dir() {
        return Err(reports_under(path));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read report {}: {e}", path.display()))?;
    // An editor that saved the file as "UTF-8 with BOM" changed nothing a reader cares about.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| not_json(path, text, e))?;
    let mut value = value;
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(version) if version == u64::from(SCHEMA_VERSION) => {}
        // Version 1 differs only in its warnings, which were plain strings.
        Some(1) => upgrade_from_v1(&mut value).map_err(|e| format!("{} is not a stowbench report: {e}", path.display()))?,
        Some(version) => {
            return Err(format!(
                "{} has report schema_version {version}; this stowbench reads versions 1 to {SCHEMA_VERSION}. Use the stowbench \
                 version that wrote it ({}), or run the job again",
                path.display(),
                value.get("tool_version").and_then(|v| v.as_str()).unwrap_or("unknown")
            ))
        }
        None if value.get("schema_version").is_some() => {
            return Err(format!(
                "{}: schema_version is {}, not a whole number: the file was edited or is not a stowbench report \
                 (stowbench writes schema_version = {SCHEMA_VERSION})",
                path.display(),
                value["schema_version"]
            ))
        }
        None => {
            return Err(format!(
                "{} has no schema_version: it is not a stowbench report (stowbench run and stowbench fio write one to \
                 stowbench-results/<timestamp>/report.json)",
                path.display()
            ))
        }
    }
    // The JSON path of the first field that does not fit ("cases[3].repeats[0].ops_per_s"),
    // so an edited or truncated report says where to look.
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string() {
        at if at == "." => format!("{} is not a stowbench report: {}", path.display(), e.inner()),
        at => format!("{} is not a stowbench report: at {at}: {}", path.display(), e.inner()),
    })
}

fn upgrade_from_v1(value: &mut serde_json::Value) -> Result<(), serde_json::Error> {
    let Some(object) = value.as_object_mut() else { return Ok(()) };
    let lines: Vec<String> = serde_json::from_value(object.remove("warnings").unwrap_or_default())?;
    object.insert("warnings".into(), serde_json::to_value(warnings::from_v1(lines))?);
    object.insert("schema_version".into(), SCHEMA_VERSION.into());
    Ok(())
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn utc_parts(t: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    (y, m, d, s / 3600, s % 3600 / 60, s % 60)
}

/// RFC 3339 UTC time, e.g. "2026-11-21T08:30:12Z".
pub fn rfc3339(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = utc_parts(t);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// Compact UTC timestamp for directory names, e.g. "20261121-083012".
pub fn timestamp_compact(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = utc_parts(t);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_version_1_report_is_read_with_its_warnings_unclassified() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut value: serde_json::Value = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        value["schema_version"] = 1.into();
        value["warnings"] = serde_json::json!(["reads ran with a warm page cache"]);
        std::fs::write(&path, value.to_string()).unwrap();
        let report = read(&path).unwrap();
        assert_eq!(report.schema_version, SCHEMA_VERSION);
        assert_eq!(report.warnings, warnings::from_v1(vec!["reads ran with a warm page cache".into()]));
        assert_eq!(report.warnings[0].kind, warnings::WarningKind::Unclassified);
    }

    #[test]
    fn a_schema_version_that_is_not_a_number_is_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut value: serde_json::Value = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        value["schema_version"] = "2".into();
        std::fs::write(&path, value.to_string()).unwrap();
        let message = read(&path).unwrap_err();
        assert!(message.contains("schema_version is \"2\", not a whole number"), "{message}");
        value.as_object_mut().unwrap().remove("schema_version");
        std::fs::write(&path, value.to_string()).unwrap();
        assert!(read(&path).unwrap_err().contains("has no schema_version"));
    }

    #[test]
    fn formats_utc_times() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_163_412);
        assert_eq!(rfc3339(t), "2026-11-20T08:30:12Z");
        assert_eq!(timestamp_compact(t), "20261120-083012");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }
}
