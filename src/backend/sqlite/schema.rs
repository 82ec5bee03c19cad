//! The two table layouts of the `sqlite` backend (option `schema`) and the SQL each one runs.
//!
//! Every statement takes the same parameters, so the session runs one code path for both:
//! `?1` the row id a key maps to (bound but unused by `text-key`), `?2` the key text, `?3` the size
//! or the blob threshold, `?4` the body. This module must never let a row found by its id stand
//! for another key: every rowid statement also compares the stored key text.

use super::connection::SqlContext;
use crate::backend::options::{OptionDoc, Options};
use crate::backend::{BResult, BackendError, ErrorKind};
use rusqlite::{Connection, OptionalExtension};
use std::path::Path;

/// Option `schema`.
pub(crate) const SCHEMA_OPTION: OptionDoc = OptionDoc {
    name: "schema",
    default: "text-key",
    help: "text-key: objects(key TEXT PRIMARY KEY, ...), found through the key's index; rowid: keyed by the xxh3-64 of \
           the key (one B-tree search per lookup; the key is stored and checked, a hash collision fails the put)",
};

/// Values of option `schema`, default first.
const SCHEMAS: &[&str] = &["text-key", "rowid"];

/// Which table layout a database uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schema {
    /// `objects(key TEXT PRIMARY KEY, size_bytes, body)`: a lookup searches the key's index, then
    /// the table by the rowid it found (two B-tree searches).
    TextKey,
    /// `objects(id INTEGER PRIMARY KEY, key, size_bytes, body)` with `id` = xxh3-64 of the key: a
    /// lookup is one search of the table by rowid, as in SQLite's kvtest.
    Rowid,
}

impl Schema {
    /// Reads option `schema`.
    pub fn from_options(options: &Options) -> Result<Schema, String> {
        Ok(match options.choice("schema", SCHEMAS, SCHEMAS[0])?.as_str() {
            "rowid" => Schema::Rowid,
            _ => Schema::TextKey,
        })
    }

    /// The option value that selects this layout.
    pub fn name(self) -> &'static str {
        match self {
            Schema::TextKey => "text-key",
            Schema::Rowid => "rowid",
        }
    }

    /// The row id `key` is stored under in this layout (`text-key` lets SQLite choose; 0 is bound
    /// and ignored).
    pub fn row_id(self, key: &str) -> i64 {
        match self {
            Schema::TextKey => 0,
            Schema::Rowid => row_id_of(key),
        }
    }

    /// Creates the table if it does not exist.
    pub fn create_table(self) -> &'static str {
        match self {
            Schema::TextKey => {
                "CREATE TABLE IF NOT EXISTS objects(
    key TEXT PRIMARY KEY NOT NULL,
    size_bytes INTEGER NOT NULL,
    body BLOB NOT NULL
)"
            }
            Schema::Rowid => {
                "CREATE TABLE IF NOT EXISTS objects(
    id INTEGER PRIMARY KEY NOT NULL,
    key TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    body BLOB NOT NULL
)"
            }
        }
    }

    /// Inserts or replaces a key's row; returns its rowid. `body` must stay the last column: SQLite
    /// keeps a trailing zeroblob as a count instead of expanding it in memory, which is what lets a
    /// 900 MB insert run in bounded memory. With `rowid`, a row of another key under the same id
    /// is left alone and no row is returned (the caller reports the collision).
    pub fn upsert(self) -> &'static str {
        match self {
            Schema::TextKey => {
                "INSERT INTO objects(key, size_bytes, body) VALUES (?2, ?3, ?4)
    ON CONFLICT(key) DO UPDATE SET size_bytes = excluded.size_bytes, body = excluded.body
    RETURNING rowid"
            }
            Schema::Rowid => {
                "INSERT INTO objects(id, key, size_bytes, body) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT(id) DO UPDATE SET size_bytes = excluded.size_bytes, body = excluded.body
        WHERE objects.key = excluded.key
    RETURNING rowid"
            }
        }
    }

    /// `size_bytes`, and the body when `size_bytes <= ?3` (else NULL), of a key's row.
    pub fn select_small(self) -> &'static str {
        match self {
            Schema::TextKey => "SELECT size_bytes, CASE WHEN size_bytes <= ?3 THEN body END FROM objects WHERE key = ?2",
            Schema::Rowid => {
                "SELECT size_bytes, CASE WHEN size_bytes <= ?3 THEN body END FROM objects WHERE id = ?1 AND key = ?2"
            }
        }
    }

    /// `rowid` and `size_bytes` of a key's row.
    pub fn find_row(self) -> &'static str {
        match self {
            Schema::TextKey => "SELECT rowid, size_bytes FROM objects WHERE key = ?2",
            Schema::Rowid => "SELECT rowid, size_bytes FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// `size_bytes` of a key's row.
    pub fn head(self) -> &'static str {
        match self {
            Schema::TextKey => "SELECT size_bytes FROM objects WHERE key = ?2",
            Schema::Rowid => "SELECT size_bytes FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// Deletes a key's row.
    pub fn delete(self) -> &'static str {
        match self {
            Schema::TextKey => "DELETE FROM objects WHERE key = ?2",
            Schema::Rowid => "DELETE FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// The layout of the table `objects` in `conn`'s database, by its primary-key column; None
    /// for a table neither layout made.
    fn of_database(conn: &Connection) -> rusqlite::Result<Option<Schema>> {
        let primary_key: Option<String> =
            conn.query_row("SELECT name FROM pragma_table_info('objects') WHERE pk = 1", [], |row| row.get(0)).optional()?;
        Ok(match primary_key.as_deref() {
            Some("key") => Some(Schema::TextKey),
            Some("id") => Some(Schema::Rowid),
            _ => None,
        })
    }

    /// Refuses a database (`db`, for the message) whose table has another layout than this one:
    /// `CREATE TABLE IF NOT EXISTS` leaves an existing table as it is, and reading a text-key table
    /// with rowid statements (or the reverse) would fail on every operation.
    pub fn check_database(self, conn: &Connection, db: &Path) -> BResult<()> {
        let found = Schema::of_database(conn).context("read the table's layout")?;
        if found == Some(self) {
            return Ok(());
        }
        let found = match found {
            Some(other) => format!("the schema = \"{}\" layout", other.name()),
            None => "a table \"objects\" that neither schema made".to_string(),
        };
        Err(BackendError::new(
            ErrorKind::Other,
            format!(
                "{} holds {found}, but option schema = \"{}\"; SQLite cannot change a table's primary key in place. \
                 Use a new namespace, or the schema the database was made with.",
                db.display(),
                self.name()
            ),
        ))
    }

    /// Why a `rowid` put found another key's row under its id (`?1`): the error it fails with.
    pub fn collision(conn: &Connection, key: &str, id: i64) -> BackendError {
        // Only for the message: a failure to read the other key must not hide the collision.
        let other = conn.query_row("SELECT key FROM objects WHERE id = ?1", [id], |row| row.get::<_, String>(0));
        let other = other.map(|key| format!("the stored key {key:?}")).unwrap_or_else(|_| "a stored key".to_string());
        BackendError::new(
            ErrorKind::Unsupported,
            format!(
                "schema = \"rowid\": key {key:?} and {other} share the row id {id} (the xxh3-64 of the key); \
                 the stored value is kept and this put is refused. Use schema = \"text-key\" for these keys."
            ),
        )
    }
}

/// The row id of `key` in the `rowid` layout: the xxh3-64 (seed 0) of its UTF-8 bytes, as a signed
/// 64-bit integer (every i64 is a valid SQLite rowid). Stored on disk: never change it.
pub fn row_id_of(key: &str) -> i64 {
    crate::hash::xxh3_64(key.as_bytes()) as i64
}
