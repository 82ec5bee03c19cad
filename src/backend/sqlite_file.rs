//! Placeholder while the backend is being written (replaced in this same session).
use super::options::Options;
use super::{Backend, BackendKind, Namespace};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "sqlite-file",
    summary: "(being written)",
    options: &[],
    construct,
    is_test_tool: false,
};

fn construct(_options: &Options, _ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    Err("not built yet".into())
}
