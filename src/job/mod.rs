//! Job files: parsing (`spec`), validation and matrix expansion (`plan`), and the built-in recipes.

pub mod plan;
pub mod recipes;
pub mod spec;

pub use plan::{Arrivals, CasePlan, KeyOrder, Op, PhasePlan, Plan, Rate, SizeSpec, Stop, WorkloadPlan};

use std::path::Path;

/// The quick default comparison run by `stowbench run` without a job file.
pub const QUICK_RECIPE: &str = include_str!("../../recipes/quick.toml");

/// Parses and validates job text; `source` names it in error messages.
pub fn load_text(text: &str, source: &str) -> Result<Plan, String> {
    let job = spec::parse(text).map_err(|e| match (e.line, e.column) {
        (Some(line), Some(col)) => format!("{source}:{line}:{col}: {}", e.message),
        _ => format!("{source}: {}", e.message),
    })?;
    plan::build(&job, source, text)
}

/// Reads, parses and validates a job file.
pub fn load_file(path: &Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read job file {}: {e}", path.display()))?;
    load_text(&text, &path.display().to_string())
}

/// The built-in quick comparison.
pub fn quick() -> Plan {
    load_text(QUICK_RECIPE, "built-in recipe quick").expect("the built-in quick recipe is valid (tested)")
}
