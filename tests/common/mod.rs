//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::Path;

/// Validates a report file against the committed JSON Schema; panics listing every violation.
pub fn assert_valid_report(path: &Path) -> serde_json::Value {
    let schema_text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema/report.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the committed schema compiles");
    let errors: Vec<String> = validator.iter_errors(&report).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{} does not match schema/report.schema.json:\n{}", path.display(), errors.join("\n"));
    report
}

/// Whether the test runs in CI (where a missing service must fail, never skip).
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true" || v == "1").unwrap_or(false)
}
