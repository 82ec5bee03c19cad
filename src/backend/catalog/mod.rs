//! The file server's catalog (E5): which contents are stored (by content hash) and which file
//! names point at them, kept where the content lives when that is a database (PostgreSQL,
//! MariaDB, GridFS's own database) and in a SQLite file beside the content otherwise.
//!
//! Two tables, as the published file server had them: `files` (one row per distinct content:
//! hash, object key, size, whether the content is stored) and `names` (original name → hash).
//! Every write is idempotent, so an upload retried after any failure ends with exactly one
//! `files` row and one stored object per content: the object key is derived from the hash, the
//! `files` row is inserted only when absent, and the content counts as stored only after the
//! store acknowledged it (`mark_stored`). A catalog never times or retries: the runner does.

#[cfg(feature = "mariadb")]
pub mod mariadb;
#[cfg(feature = "gridfs")]
pub mod mongo;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;

use super::BResult;
use serde::Serialize;

/// A content to register: its hash (lower-case hex), the key its object is stored under, its size.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    /// Content hash, lower-case hex (blake3, 64 digits).
    pub hash: &'a str,
    /// Key of the stored object.
    pub object_key: &'a str,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// What registering a file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The content was not known: its row was inserted; the content must be stored.
    New,
    /// The content was registered before but never marked stored (an earlier attempt failed
    /// after registering): it must be stored again, under the same key.
    Unfinished,
    /// The content is stored already: only the name was registered (a duplicate).
    Duplicate,
}

impl Registration {
    /// What a lookup that found `stored` (None: no row; Some(stored flag)) means.
    pub fn from_lookup(stored: Option<bool>) -> Registration {
        match stored {
            None => Registration::New,
            Some(false) => Registration::Unfinished,
            Some(true) => Registration::Duplicate,
        }
    }

    /// Whether the content still has to be written.
    pub fn needs_content(self) -> bool {
        self != Registration::Duplicate
    }
}

/// A stored content as the catalog records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Content hash.
    pub hash: String,
    /// Key of the stored object.
    pub object_key: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

/// Counts the after-run audit needs, read from the catalog itself.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CatalogCounts {
    /// Rows in `files` (distinct contents).
    pub files: u64,
    /// Rows in `names`.
    pub names: u64,
    /// `files` rows whose content was never marked stored.
    pub unfinished: u64,
    /// `names` rows pointing at no `files` row.
    pub dangling_names: u64,
}

/// One worker's connection to the catalog.
pub trait Catalog: Send {
    /// Creates the catalog's tables; harmless to call twice.
    fn prepare(&mut self) -> BResult<()>;
    /// Registers `name` for `content` in one transaction: looks the hash up, inserts the `files`
    /// row when it is absent, and points `name` at the hash (replacing an older mapping).
    fn register(&mut self, name: &str, content: &Content) -> BResult<Registration>;
    /// Records that `hash`'s content is stored.
    fn mark_stored(&mut self, hash: &str) -> BResult<()>;
    /// The stored content `name` points at; `None` for an unknown name or unfinished content.
    fn resolve(&mut self, name: &str) -> BResult<Option<StoredFile>>;
    /// Every `files` row marked stored (for the after-run check of the objects).
    fn stored_files(&mut self) -> BResult<Vec<StoredFile>>;
    /// Row counts for the after-run audit.
    fn counts(&mut self) -> BResult<CatalogCounts>;
    /// Bytes the catalog occupies (its tables and indexes, or its file), where known.
    fn size_bytes(&mut self) -> BResult<Option<u64>>;
    /// Shuts the catalog's connection down from another thread, for `op_timeout` (see
    /// `backend::sockets`); `None` for a catalog in a local file, whose calls cannot be cut.
    fn cut_handle(&self) -> Option<crate::backend::sockets::CutHandle> {
        None
    }
    /// Where the catalog lives and how it commits, for the report, e.g.
    /// "sqlite file …/catalog.sqlite (wal, synchronous = full)"; never a secret.
    fn describe(&self) -> String;
}
