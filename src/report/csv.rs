//! CSV: one row per case × operation — an object-store case's phases × operations, a fio case's
//! directions (read, write) — with every figure of the report's JSON for that case on the row.
//!
//! The columns are not listed anywhere: they are the serialized model itself, nested objects
//! flattened into dotted headers (`op.latency.p99_ns`, `resources.server_cpu_ns`) that keep the
//! model's unit-last names. So a field added to the model is a column without touching this file,
//! and the header always says what the JSON says. The header is the union of every row's columns,
//! section by section (the row's identity, then case, phase and operation figures), each in the
//! order the model declares its fields (serde_json keeps that order: `preserve_order`).
//!
//! What a row leaves out, because it is not a figure of that row: null values (nothing measured),
//! time series (lists of unnamed objects: timelines, fio histogram bins) and the documents fio
//! cases carry (`DOCUMENTS`). A list of named objects (fio's `disk_util`) becomes one column group
//! per name; a list of plain values (`connect_ns`, one per worker) one cell, space-separated. The
//! objects a verification found damaged (`verification.mismatched`) are one cell, one line each.

use super::model::RunReport;
use serde::Serialize;
use serde_json::{Map, Value};

/// Fields holding whole documents or free text, not figures: the JSON keeps them.
const DOCUMENTS: &[&str] = &["job_file", "fio_jobs_json", "fio_messages"];

/// Where a column belongs; the header groups columns by section, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    /// Which row this is: run, case, phase, operation.
    Identity,
    /// Figures of the whole case.
    Case,
    /// Figures of the phase (object-store cases).
    Phase,
    /// Figures of the operation, or of the fio direction.
    Operation,
}

/// One row: (section, column, cell), in the order the model declares its fields.
type Row = Vec<(Section, String, String)>;

/// Renders the report as CSV with a header row; see the module documentation for the columns.
pub fn render(report: &RunReport) -> String {
    let mut rows: Vec<Row> = Vec::new();
    for case in &report.cases {
        let value = to_value(case);
        let identity = |phase: &str, op: &str| identity(&report.run_id, &case.case_id, phase, op);
        let mut case_cells = Row::new();
        flatten(Section::Case, "", &without(&value, &["case_id", "phases", "per_rank", "per_host"]), &mut case_cells);
        if !case.verification.mismatched.is_empty() {
            // Which objects differed, and how, is the finding of a failed check: one cell, each
            // object as the table lists it ("obj-… flipped at byte 5000: …"), `;`-separated.
            let lines: Vec<String> = case.verification.mismatched.iter().map(|m| m.line()).collect();
            case_cells.push((Section::Case, "verification.mismatched".into(), lines.join("; ")));
        }
        if case.phases.is_empty() {
            rows.push([identity("", ""), case_cells.clone()].concat()); // a failed case still shows why
        }
        for (phase, phase_value) in case.phases.iter().zip(value["phases"].as_array().into_iter().flatten()) {
            let mut phase_cells = Row::new();
            flatten(Section::Phase, "phase", &without(phase_value, &["phase", "ops"]), &mut phase_cells);
            for (op, op_value) in phase_value["ops"].as_object().into_iter().flatten() {
                let mut op_cells = Row::new();
                flatten(Section::Operation, "op", op_value, &mut op_cells);
                rows.push([identity(&phase.phase, op), case_cells.clone(), phase_cells.clone(), op_cells].concat());
            }
        }
        rows.extend(rank_rows(case, &report.run_id));
        rows.extend(host_rows(case, &report.run_id));
    }
    for case in &report.fio_cases {
        let value = to_value(case);
        let mut case_cells = Row::new();
        let mut skipped = vec!["case_id", "read", "write"];
        skipped.extend(DOCUMENTS);
        flatten(Section::Case, "", &without(&value, &skipped), &mut case_cells);
        for direction in ["read", "write"] {
            let Some(stats) = value.get(direction).filter(|v| !v.is_null()) else { continue };
            let mut op_cells = Row::new();
            flatten(Section::Operation, "op", stats, &mut op_cells);
            rows.push([identity(&report.run_id, &case.case_id, "", direction), case_cells.clone(), op_cells].concat());
        }
    }
    table(rows, Vec::new())
}

/// A multi-host run's per-rank rows of a case: the row's identity, then `rank` and `host` (blank
/// on the merged rows), the rank's status, its phase window and throughput and its operation
/// figures, under the same column names as the merged rows.
fn rank_rows(case: &super::model::CaseResult, run_id: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for r in case.per_rank.iter().flatten() {
        let who = [("rank", r.rank.to_string()), ("host", r.host.clone())].map(|(c, v)| (Section::Identity, c.to_string(), v));
        let mut case_cells = vec![(Section::Case, "status".to_string(), r.status.clone()), (Section::Case, "threads".into(), r.threads.to_string())];
        if let Some(why) = &r.failure {
            case_cells.push((Section::Case, "failure".into(), why.clone()));
        }
        for phase in &r.phases {
            let mut phase_cells = Row::new();
            flatten(Section::Phase, "phase", &without(&to_value(phase), &["phase", "ops"]), &mut phase_cells);
            for (op, o) in &phase.ops {
                let mut op_cells = Row::new();
                // The histogram is for recombining, in the JSON; its percentiles are on the row.
                flatten(Section::Operation, "op", &without(&to_value(o), &["histogram"]), &mut op_cells);
                rows.push([identity(run_id, &case.case_id, &phase.phase, op), who.to_vec(), case_cells.clone(), phase_cells.clone(), op_cells].concat());
            }
        }
    }
    rows
}

/// A multi-host run's per-host rows of a case, one per host and phase: the row's identity with
/// `host` (and `rank` blank), the host's ranks, workers and resources (`resources.*`, as on the
/// merged rows), then the host's operations in the phase and its share of them (`phase.*`).
fn host_rows(case: &super::model::CaseResult, run_id: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for h in case.per_host.iter().flatten() {
        let who = vec![(Section::Identity, "host".to_string(), h.host.clone())];
        let mut case_cells = vec![(Section::Case, "ranks".to_string(), h.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(" "))];
        flatten(Section::Case, "", &without(&to_value(h), &["host", "ranks", "phases"]), &mut case_cells);
        for phase in &h.phases {
            let mut phase_cells = Row::new();
            flatten(Section::Phase, "phase", &without(&to_value(phase), &["phase"]), &mut phase_cells);
            rows.push([identity(run_id, &case.case_id, &phase.phase, ""), who.clone(), case_cells.clone(), phase_cells].concat());
        }
    }
    rows
}

/// Rows of values serialized by serde (a comparison's metric rows, say), one column per field,
/// flattened as report rows are.
pub fn render_records<T: Serialize>(records: &[T]) -> String {
    table(records.iter().map(record_row).collect(), Vec::new())
}

/// As `render_records`, with the columns of `template` (a record with every optional field
/// present) first and in its order, so the header is the same whichever fields the records leave
/// empty: a script can read a column by position, and `--metric` never moves one.
pub fn render_records_like<T: Serialize>(template: &T, records: &[T]) -> String {
    let columns = record_row(template).into_iter().map(|(section, column, _)| (section, column)).collect();
    table(records.iter().map(record_row).collect(), columns)
}

fn record_row<T: Serialize>(record: &T) -> Row {
    let mut row = Row::new();
    flatten(Section::Identity, "", &to_value(record), &mut row);
    row
}

fn to_value<T: Serialize>(value: &T) -> Value {
    // The model serializes without fail (it is written this way after every case).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn identity(run_id: &str, case_id: &str, phase: &str, op: &str) -> Row {
    [("run_id", run_id), ("case_id", case_id), ("phase", phase), ("op", op)]
        .into_iter()
        .map(|(column, cell)| (Section::Identity, column.to_string(), cell.to_string()))
        .collect()
}

/// The object without the named fields (placed elsewhere on the row, or not figures).
fn without(value: &Value, fields: &[&str]) -> Value {
    let kept: Map<String, Value> =
        value.as_object().into_iter().flatten().filter(|(k, _)| !fields.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    Value::Object(kept)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Appends the figures under `value` to `row`, named by their dotted path from `prefix`.
fn flatten(section: Section, prefix: &str, value: &Value, row: &mut Row) {
    match value {
        Value::Null => {}
        Value::Object(fields) => {
            for (key, field) in fields {
                flatten(section, &join(prefix, key), field, row);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            if !items.is_empty() {
                let cells: Vec<String> = items.iter().map(scalar).collect();
                row.push((section, prefix.to_string(), cells.join(" ")));
            }
        }
        Value::Array(items) => {
            for item in items {
                if let Some(name) = item.get("name").and_then(Value::as_str) {
                    flatten(section, &join(prefix, name), &without(item, &["name"]), row);
                }
            }
        }
        leaf => row.push((section, prefix.to_string(), scalar(leaf))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The header (`columns`, then every row's other columns, section by section, each in
/// first-seen order) and the rows.
fn table(rows: Vec<Row>, mut columns: Vec<(Section, String)>) -> String {
    for row in &rows {
        for (section, column, _) in row {
            if !columns.iter().any(|(_, c)| c == column) {
                let at = columns.iter().rposition(|(s, _)| s <= section).map_or(0, |i| i + 1);
                columns.insert(at, (*section, column.clone()));
            }
        }
    }
    let mut out = columns.iter().map(|(_, c)| field(c)).collect::<Vec<_>>().join(",") + "\n";
    for row in &rows {
        let cells: Vec<String> =
            columns.iter().map(|(_, column)| row.iter().find(|(_, c, _)| c == column).map(|(_, _, cell)| field(cell)).unwrap_or_default()).collect();
        out += &cells.join(",");
        out.push('\n');
    }
    out
}

/// Quotes a field when it contains a comma, quote or newline (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a, \"b\""), "\"a, \"\"b\"\"\"");
    }

    #[test]
    fn flattens_objects_named_lists_and_plain_lists_and_leaves_out_series_and_nulls() {
        let value = json!({
            "latency": { "p99_ns": 7, "mean_ns": 2.5 },
            "server_cpu_ns": null,
            "connect_ns": [3, 4],
            "disk_util": [{ "name": "vda", "util_percent": 12.5 }],
            "timeline": [{ "second": 0, "ops": 9 }],
            "label": "a,b",
        });
        let mut row = Row::new();
        flatten(Section::Operation, "op", &value, &mut row);
        let cells: Vec<(&str, &str)> = row.iter().map(|(_, c, v)| (c.as_str(), v.as_str())).collect();
        assert_eq!(
            cells,
            [
                ("op.latency.p99_ns", "7"),
                ("op.latency.mean_ns", "2.5"),
                ("op.connect_ns", "3 4"),
                ("op.disk_util.vda.util_percent", "12.5"),
                ("op.label", "a,b"),
            ]
        );
    }

    #[test]
    fn the_header_unites_every_rows_columns_section_by_section() {
        let row = |cells: &[(Section, &str, &str)]| cells.iter().map(|(s, c, v)| (*s, c.to_string(), v.to_string())).collect::<Row>();
        let first = row(&[(Section::Identity, "case_id", "a"), (Section::Case, "threads", "1"), (Section::Operation, "op.count", "5")]);
        // A later row brings a case column and an operation column the first one lacks.
        let second = row(&[(Section::Identity, "case_id", "b"), (Section::Case, "disk.x_bytes", "9"), (Section::Operation, "op.errors.timeout", "2")]);
        let text = table(vec![first, second], Vec::new());
        assert_eq!(text, "case_id,threads,disk.x_bytes,op.count,op.errors.timeout\na,1,,5,\nb,,9,,2\n");
    }
}
