//! pack: stowbench's own container format — append-only striped data files with checksummed
//! records, an in-memory index (persisted at close, rebuilt by a scan after a crash), tombstones
//! for deletes and offline compaction.
//!
//! `docs/formats/pack.md` describes the on-disk format (version 1) and why it is shaped this way.
//! This module never returns bytes it has not verified and never removes a file it did not name.

pub mod compact;
pub mod index_file;
pub mod key_index;
pub mod record;
pub mod scan;
pub mod store;
pub mod view;

pub use compact::{compact, compact_with, CompactOptions, CompactReport};
pub use store::{PackStore, Recovery, StripeLease, MAPPED_RESIDENT_BUDGET_BYTES};
