//! The one list of output formats. Each entry names a format and holds the pure functions that
//! turn a run report, or a comparison of runs, into text; `run`, `recipe run`, `fio`, `report`
//! and `compare` all choose from it by the `--format` name, so a format exists everywhere or
//! nowhere, and a new one is one entry here.
//!
//! A renderer must never read the clock, the machine or the disk: `stowbench report FILE` has to
//! print exactly what the run printed, and snapshot tests depend on it.

use super::compare::{self, Comparison};
use super::model::RunReport;
use serde::Serialize;

/// One output format.
#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    /// The format's name, as `--format` takes it.
    pub name: &'static str,
    /// What the format is for, in a few words.
    pub summary: &'static str,
    /// Renders a run report; `None` where the format has no report form (yet).
    pub report: Option<fn(&RunReport) -> String>,
    /// Renders a comparison of runs (`stowbench compare`).
    pub comparison: Option<fn(&Comparison) -> String>,
}

/// Every output format, the default first.
pub const REPORTERS: &[Reporter] = &[
    Reporter { name: "table", summary: "text tables for people", report: Some(super::table::render), comparison: Some(compare::render::table) },
    Reporter { name: "json", summary: "the data as JSON", report: Some(json::<RunReport>), comparison: Some(json::<Comparison>) },
    Reporter {
        name: "csv",
        summary: "one row per case × operation (per metric for a comparison)",
        report: Some(super::csv::render),
        comparison: Some(compare::render::csv),
    },
    Reporter {
        name: "html",
        summary: "a self-contained HTML page with charts",
        report: Some(super::html::render),
        comparison: Some(compare::render::html_page),
    },
];

fn json<T: Serialize>(value: &T) -> String {
    // The models serialize without fail: every field is plain data.
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// The format names, for `--format`'s list of accepted values.
pub fn names() -> Vec<&'static str> {
    REPORTERS.iter().map(|r| r.name).collect()
}

/// The format named `name`.
pub fn find(name: &str) -> Result<&'static Reporter, String> {
    REPORTERS.iter().find(|r| r.name == name).ok_or_else(|| {
        let hint = crate::suggest::did_you_mean(name, &names()).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("--format: no format \"{name}\".{hint} Formats: {}", names().join(", "))
    })
}

/// The run-report renderer of format `name`, or why there is none.
pub fn for_report(name: &str) -> Result<fn(&RunReport) -> String, String> {
    let reporter = find(name)?;
    reporter.report.ok_or_else(|| {
        let able: Vec<&str> = REPORTERS.iter().filter(|r| r.report.is_some()).map(|r| r.name).collect();
        format!("--format {name}: run reports cannot be rendered as {name} yet; use one of {}", able.join(", "))
    })
}

/// The comparison renderer of format `name`, or why there is none.
pub fn for_comparison(name: &str) -> Result<fn(&Comparison) -> String, String> {
    let reporter = find(name)?;
    reporter.comparison.ok_or_else(|| {
        let able: Vec<&str> = REPORTERS.iter().filter(|r| r.comparison.is_some()).map(|r| r.name).collect();
        format!("--format {name}: comparisons cannot be rendered as {name}; use one of {}", able.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_formats_and_explains_the_missing_ones() {
        assert_eq!(find("csv").unwrap().name, "csv");
        assert!(find("cvs").unwrap_err().contains("Did you mean \"csv\""));
        assert!(for_report("table").is_ok() && for_comparison("html").is_ok());
        assert_eq!(names()[0], "table", "the default comes first");
    }
}
