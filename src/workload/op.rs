//! The operations a workload issues, and the steps a file-server operation is made of.

use serde::Serialize;

/// The operations a workload can issue, and the steps a file-server operation is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Store an object.
    Put,
    /// Read an object back.
    Get,
    /// Remove an object.
    Delete,
    /// Ask for an object's size.
    Head,
    /// File server: hash a file, register it in the catalog (a duplicate is only registered),
    /// then store its content (a `put` step) — E5's upload.
    Upload,
    /// File server: find a file's stored object by its name in the catalog (a `lookup` step),
    /// then read it (a `get` step).
    Download,
    /// Step of an upload: hashing the content (the client's work, as a file server does it).
    Hash,
    /// Step of an upload: the duplicate lookup and the catalog rows (and, after the content is
    /// stored, marking it stored).
    Register,
    /// Step of a download: resolving the name to the stored object.
    Lookup,
}

impl Op {
    /// The operations a job file may name, in report order.
    pub const ALL: [Op; 6] = [Op::Put, Op::Get, Op::Delete, Op::Head, Op::Upload, Op::Download];

    /// How many kinds there are, operations and steps.
    pub const KINDS: usize = 9;

    /// Every kind, operations and steps, in declaration order (the order `Ord` sorts by).
    pub const EVERY: [Op; Op::KINDS] = [Op::Put, Op::Get, Op::Delete, Op::Head, Op::Upload, Op::Download, Op::Hash, Op::Register, Op::Lookup];

    /// This kind's place in `EVERY`: an index for per-kind tables that need no map search.
    pub fn slot(self) -> usize {
        self as usize
    }

    /// Lower-case name used in job files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::Delete => "delete",
            Op::Head => "head",
            Op::Upload => "upload",
            Op::Download => "download",
            Op::Hash => "hash",
            Op::Register => "register",
            Op::Lookup => "lookup",
        }
    }

    /// Whether this operation stores an object (`read_recent` follows these).
    pub fn writes(self) -> bool {
        matches!(self, Op::Put | Op::Upload)
    }

    /// Whether this operation reads an object (`read_recent` applies to these).
    pub fn reads(self) -> bool {
        matches!(self, Op::Get | Op::Head | Op::Download)
    }

    /// Whether this is a file-server operation (it needs a catalog).
    pub fn is_file_server(self) -> bool {
        matches!(self, Op::Upload | Op::Download)
    }

    /// Whether this operation's count and bytes go into a phase's totals: in a file-server phase
    /// only the uploads and downloads do, the others being their steps.
    pub fn counts_in_totals(self, file_server_phase: bool) -> bool {
        !file_server_phase || self.is_file_server()
    }

    /// The operation or step a report names `name`.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::EVERY.into_iter().find(|op| op.name() == name)
    }

    /// An operation a job file may name.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::Op;

    #[test]
    fn every_kind_sits_at_its_slot_in_sort_order() {
        for (i, op) in Op::EVERY.into_iter().enumerate() {
            assert_eq!(op.slot(), i, "{op:?}");
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
        assert!(Op::EVERY.windows(2).all(|w| w[0] < w[1]), "EVERY must follow Ord's order: the report lists kinds by it");
        assert!(Op::ALL.into_iter().all(|op| Op::EVERY.contains(&op)));
    }
}
