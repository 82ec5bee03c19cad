//! The two table layouts of the `sqlite` backend (option `schema`) and the SQL each one runs.
//!
//! Every statement takes the same parameters, so the session runs one code path for both:
//! `?1` the row id a key maps to (bound but unused by `text-key`), `?2` the key text, `?3` the size
//! or the blob threshold, `?4` the body. This module must never let a row found by its id stand
//! for another key: a rowid statement compares the stored key text unless the id names exactly one
//! key and the table itself refuses any other key under it (numbered keys, see `RowKey`).

use super::connection::SqlContext;
use crate::backend::{BResult, BackendError, ErrorKind};
use rusqlite::{Connection, OptionalExtension};
use std::path::Path;

/// The constraint of the `rowid` table that makes a non-negative id name exactly one key: the row
/// under id N ≥ 0 must hold the key `obj-N` as `crate::workload::keys::write_key_name` spells it
/// (at least ten digits, zero-padded; SQLite's printf takes the 64-bit id whole). A macro so that
/// `create_table` can stay one `&'static str`; `check_database` looks for this text.
macro_rules! numbered_check {
    () => {
        "CHECK (id < 0 OR key = printf('obj-%010d', id))"
    };
}

crate::option_choice! {
    /// Which table layout a database uses. `TextKey`: `objects(key TEXT PRIMARY KEY, size_bytes,
    /// body)`, a lookup searches the key's index, then the table by the rowid it found (two B-tree
    /// searches). `Rowid`: `objects(id INTEGER PRIMARY KEY, key, size_bytes, body)` with `id` from
    /// `row_key`, a lookup is one search of the table by rowid, as in SQLite's kvtest.
    pub(crate) enum Schema { TextKey = "text-key", Rowid = "rowid" }
}

impl Schema {
    /// The row id `key` is stored under in this layout (`text-key` lets SQLite choose; 0 is bound
    /// and ignored, and the key is always compared).
    pub fn row_key(self, key: &str) -> RowKey {
        match self {
            Schema::TextKey => RowKey { id: 0, exact: false },
            Schema::Rowid => row_key_of(key),
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
            // The CHECK is what lets a numbered key's get skip the key comparison: SQLite itself
            // refuses any row whose non-negative id is not exactly the id of the key it holds.
            Schema::Rowid => concat!(
                "CREATE TABLE IF NOT EXISTS objects(
    id INTEGER PRIMARY KEY NOT NULL,
    key TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    body BLOB NOT NULL,
    ",
                numbered_check!(),
                "
)"
            ),
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

    /// `size_bytes`, and the body when `size_bytes <= ?3` (else NULL), of `row`'s key's row.
    pub fn select_small(self, row: RowKey) -> &'static str {
        match (self, row.exact) {
            (Schema::TextKey, _) => "SELECT size_bytes, CASE WHEN size_bytes <= ?3 THEN body END FROM objects WHERE key = ?2",
            (Schema::Rowid, true) => "SELECT size_bytes, CASE WHEN size_bytes <= ?3 THEN body END FROM objects WHERE id = ?1",
            (Schema::Rowid, false) => "SELECT size_bytes, CASE WHEN size_bytes <= ?3 THEN body END FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// `rowid` and `size_bytes` of `row`'s key's row. (`?2 NOT NULL` below only keeps the key a
    /// parameter of the statement, so that every statement binds the same ones.)
    pub fn find_row(self, row: RowKey) -> &'static str {
        match (self, row.exact) {
            (Schema::TextKey, _) => "SELECT rowid, size_bytes FROM objects WHERE key = ?2",
            (Schema::Rowid, true) => "SELECT rowid, size_bytes FROM objects WHERE id = ?1 AND ?2 NOT NULL",
            (Schema::Rowid, false) => "SELECT rowid, size_bytes FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// `size_bytes` of `row`'s key's row.
    pub fn head(self, row: RowKey) -> &'static str {
        match (self, row.exact) {
            (Schema::TextKey, _) => "SELECT size_bytes FROM objects WHERE key = ?2",
            (Schema::Rowid, true) => "SELECT size_bytes FROM objects WHERE id = ?1 AND ?2 NOT NULL",
            (Schema::Rowid, false) => "SELECT size_bytes FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// Deletes `row`'s key's row.
    pub fn delete(self, row: RowKey) -> &'static str {
        match (self, row.exact) {
            (Schema::TextKey, _) => "DELETE FROM objects WHERE key = ?2",
            (Schema::Rowid, true) => "DELETE FROM objects WHERE id = ?1 AND ?2 NOT NULL",
            (Schema::Rowid, false) => "DELETE FROM objects WHERE id = ?1 AND key = ?2",
        }
    }

    /// The layout of the table `objects` in `conn`'s database, by its primary-key column (and, for
    /// `rowid`, the constraint that numbered keys rely on); else what the table is, in words.
    fn of_database(conn: &Connection) -> rusqlite::Result<Result<Schema, &'static str>> {
        let primary_key: Option<String> = conn.query_row("SELECT name FROM pragma_table_info('objects') WHERE pk = 1", [], |row| row.get(0)).optional()?;
        Ok(match primary_key.as_deref() {
            Some("key") => Ok(Schema::TextKey),
            Some("id") => {
                let sql: String = conn.query_row("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'objects'", [], |row| row.get(0))?;
                // A rowid table without the constraint was made by an older stowbench that kept every
                // key under its hash: its rows under non-negative ids may hold any key, so reading it
                // with this build (which trusts those ids) could hand out another key's value.
                match sql.contains(numbered_check!()) {
                    true => Ok(Schema::Rowid),
                    false => Err("the rowid layout of an older stowbench (every key under its hash)"),
                }
            }
            _ => Err("a table \"objects\" that neither schema made"),
        })
    }

    /// Refuses a database (`db`, for the message) whose table has another layout than this one:
    /// `CREATE TABLE IF NOT EXISTS` leaves an existing table as it is, and reading a text-key table
    /// with rowid statements (or the reverse) would fail on every operation.
    pub fn check_database(self, conn: &Connection, db: &Path) -> BResult<()> {
        let found = match Schema::of_database(conn).context("read the table's layout")? {
            Ok(found) if found == self => return Ok(()),
            Ok(other) => format!("the schema = \"{}\" layout", other.as_str()),
            Err(what) => what.to_string(),
        };
        Err(BackendError::new(
            ErrorKind::Other,
            format!(
                "{} holds {found}, but option schema = \"{}\"; SQLite cannot change a table's primary key in place. \
                 Use a new namespace, or the schema the database was made with.",
                db.display(),
                self.as_str()
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
                "schema = \"rowid\": key {key:?} and {other} share the row id {id} (from the xxh3-64 of the key); \
                 the stored value is kept and this put is refused. Use schema = \"text-key\" for these keys."
            ),
        )
    }
}

/// Where a key's row sits in the `rowid` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowKey {
    /// The row id (SQLite's rowid) the key is stored under.
    pub id: i64,
    /// Whether that id names this key alone, so that the row found under it needs no key
    /// comparison: true for a numbered key in the `rowid` layout, false otherwise.
    pub exact: bool,
}

/// The row of `key` in the `rowid` layout. Stored on disk: never change it.
///
/// - A numbered key — exactly as `write_key_name(N)` spells it, `obj-` and N in decimal with at
///   least ten digits, zero-padded — is stored under id N (N ≤ i64::MAX), so keys written and read
///   in index order sit side by side in the table, as kvtest's ids 1..N do. `exact`: the spelling
///   is one-to-one (one N per key, one key per N), no other key ever gets a non-negative id, and
///   the table's CHECK refuses any row under id N that does not hold `obj-N`; so the row under
///   such an id is that key's, and reading it needs no key comparison.
/// - Every other key is stored under the xxh3-64 (seed 0) of its UTF-8 bytes with the top bit set:
///   always negative, so it can never meet a numbered key. Two such keys can share an id (63 bits
///   of hash), so their statements compare the stored key, and a put finding another key's row
///   fails (`Schema::collision`).
pub fn row_key_of(key: &str) -> RowKey {
    match numbered_index(key) {
        Some(n) => RowKey { id: n, exact: true },
        None => RowKey { id: hashed_row_id(key), exact: false },
    }
}

/// The row id of `key` in the `rowid` layout (`row_key_of`).
pub fn row_id_of(key: &str) -> i64 {
    row_key_of(key).id
}

/// The id of a key that is not numbered: xxh3-64 (seed 0) with the top bit set, always negative.
fn hashed_row_id(key: &str) -> i64 {
    (crate::hash::xxh3_64(key.as_bytes()) | 1 << 63) as i64
}

/// N, when `key` is exactly `write_key_name(N)`'s spelling of some N ≤ i64::MAX: `obj-` and N's
/// decimal digits, zero-padded to ten (so eleven or more digits never start with 0). Any other
/// spelling of a number ("obj-1", "obj-+000000001", a leading zero too many) is not numbered, so
/// no two keys map to the same N.
pub fn numbered_index(key: &str) -> Option<i64> {
    let digits = key.strip_prefix("obj-")?.as_bytes();
    let canonical = digits.len() == 10 || (11..=19).contains(&digits.len()) && digits[0] != b'0';
    if !canonical {
        return None;
    }
    // A blob get parses its key on every call: the usual ten digits go eight at a time.
    let n = match *digits {
        [a, b, c, d, e, f, g, h, i, j] => eight_digits([a, b, c, d, e, f, g, h])? * 100 + digits_value(&[i, j])?,
        _ => digits_value(digits)?,
    };
    i64::try_from(n).ok()
}

/// The value of up to 19 ASCII digits (fits a u64), or None if any byte is not a digit.
fn digits_value(digits: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for &d in digits {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n * 10 + u64::from(digit);
    }
    Some(n)
}

/// The value of eight ASCII digits, first the most significant, or None if any byte is not a
/// digit: one check and three multiplications for all eight (as simdjson parses them) where a
/// loop took about 60 instructions.
fn eight_digits(bytes: [u8; 8]) -> Option<u64> {
    let v = u64::from_le_bytes(bytes);
    // Every byte's high nibble is 3 ('0'..='?'), and still 3 after adding 6 (so at most '9').
    // A byte that carried into the next would itself have failed the first test.
    let high_nibbles = v & 0xF0F0_F0F0_F0F0_F0F0;
    let high_nibbles_plus_6 = v.wrapping_add(0x0606_0606_0606_0606) & 0xF0F0_F0F0_F0F0_F0F0;
    if (high_nibbles | (high_nibbles_plus_6 >> 4)) != 0x3333_3333_3333_3333 {
        return None;
    }
    let v = (v & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561) >> 8; // pairs of digits, in every other byte
    let v = (v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16; // fours, in every other u16
    Some((v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::keys::key_name;

    #[test]
    fn eight_digits_reads_what_the_loop_reads_and_refuses_every_other_byte() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..200_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut bytes = *format!("{:08}", rng % 100_000_000).as_bytes().first_chunk::<8>().unwrap();
            if round % 2 == 1 {
                // One byte anything at all (mostly not a digit), at any place.
                bytes[(rng >> 32) as usize % 8] = (rng >> 40) as u8;
            }
            assert_eq!(eight_digits(bytes), digits_value(&bytes), "{bytes:?}");
        }
        for byte in 0..=255u8 {
            for place in 0..8 {
                let mut bytes = *b"12345678";
                bytes[place] = byte;
                assert_eq!(eight_digits(bytes), digits_value(&bytes), "{bytes:?}");
            }
        }
        assert_eq!(eight_digits(*b"00000000"), Some(0));
        assert_eq!(eight_digits(*b"99999999"), Some(99_999_999));
    }

    /// Boundaries of the numbered range: where the zero padding stops, and the largest id.
    const NUMBERS: &[u64] = &[0, 1, 9, 42, 9_999_999_999, 10_000_000_000, 12_345_678_901, 999_999_999_999_999_999, i64::MAX as u64];

    #[test]
    fn numbered_keys_are_exactly_the_runners_key_names() {
        for &n in NUMBERS {
            assert_eq!(numbered_index(&key_name(n)), Some(n as i64), "{}", key_name(n));
            assert_eq!(row_key_of(&key_name(n)), RowKey { id: n as i64, exact: true });
        }
        // Past i64::MAX the runner's names are hashed like any other key.
        assert_eq!(numbered_index(&key_name(i64::MAX as u64 + 1)), None);
        assert_eq!(numbered_index(&key_name(u64::MAX)), None);
        for key in [
            "obj-1",
            "obj-000000001",
            "obj-00000000001",
            "obj-01234567890",
            "obj-+000000001",
            "obj- 000000001",
            "obj-000000001 ",
            "Obj-0000000001",
            "obj_0000000001",
            "obj-",
            "obj-00000000x1",
            "obj-１２３４５６７８９０",
            "obj-99999999999999999999",
            "obj-9223372036854775808",
            "xobj-0000000001",
            "obj-0000000001\0",
        ] {
            assert_eq!(numbered_index(key), None, "{key:?} is not how the runner spells a number");
        }
    }

    /// One id per numbered key and one numbered key per id: every key that maps to N is spelled
    /// exactly `key_name(N)`, so no two keys can meet under a non-negative id.
    #[test]
    fn a_numbered_id_names_one_key() {
        let mut candidates: Vec<String> = NUMBERS.iter().map(|&n| key_name(n)).collect();
        for n in [0u64, 7, 10_000_000_000] {
            let digits = n.to_string();
            for width in 0..22 {
                candidates.push(format!("obj-{digits:0>width$}"));
                candidates.push(format!("obj-{}{digits}", "0".repeat(width)));
            }
        }
        for key in &candidates {
            if let Some(n) = numbered_index(key) {
                assert_eq!(key, &key_name(n as u64), "{key:?} maps to {n} but is not its spelling");
            }
        }
    }

    /// Every other key lands below zero, so a hashed key never meets a numbered one.
    #[test]
    fn other_keys_are_hashed_below_zero() {
        let keys = (0..100_000u64)
            .map(|i| format!("file-{i}"))
            .chain((0..1000u64).map(|i| format!("obj-{i}")))
            .chain(["", "obj-", "victim", "ünïcødé"].map(String::from));
        for key in keys {
            let row = row_key_of(&key);
            assert!(row.id < 0 && !row.exact, "{key:?} → {row:?}");
            assert_eq!(row.id, (crate::hash::xxh3_64(key.as_bytes()) | 1 << 63) as i64, "{key:?}: the ids are on disk");
        }
        assert_eq!(Schema::TextKey.row_key("obj-0000000001"), RowKey { id: 0, exact: false }, "text-key always compares the key");
    }

    /// The table's CHECK, in SQL, agrees with `numbered_index` in Rust: a numbered id takes its own
    /// key only (checked at the largest ids too: SQLite's printf must format 64-bit ids whole).
    #[test]
    fn the_table_refuses_any_other_key_under_a_numbered_id() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(Schema::Rowid.create_table()).unwrap();
        let insert = "INSERT INTO objects(id, key, size_bytes, body) VALUES (?1, ?2, 1, x'00')";
        for &n in NUMBERS {
            conn.execute(insert, rusqlite::params![n as i64, key_name(n)]).unwrap_or_else(|e| panic!("{}: {e}", key_name(n)));
            for intruder in [key_name(n + 1), format!("obj-{n}0"), format!("obj-0{n:010}"), "other".into()] {
                let err = conn.execute(insert, rusqlite::params![n as i64, intruder]).expect_err(&intruder);
                assert!(err.to_string().contains("CHECK") || err.to_string().contains("UNIQUE"), "{intruder}: {err}");
                let other_id = if n == 0 { 1 } else { n - 1 };
                if intruder != key_name(other_id) {
                    let err = conn.execute(insert, rusqlite::params![other_id as i64, intruder]).expect_err(&intruder);
                    assert!(err.to_string().contains("CHECK"), "{intruder} under {other_id}: {err}");
                }
            }
        }
        conn.execute(insert, rusqlite::params![row_id_of("victim"), "victim"]).unwrap();
        conn.execute(insert, rusqlite::params![-1i64, "anything below zero"]).unwrap();
    }

    #[test]
    fn a_rowid_table_without_the_check_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE objects(id INTEGER PRIMARY KEY NOT NULL, key TEXT NOT NULL, size_bytes INTEGER NOT NULL, body BLOB NOT NULL)")
            .unwrap();
        let err = Schema::Rowid.check_database(&conn, Path::new("old.db")).unwrap_err();
        assert!(err.message.contains("older stowbench") && err.message.contains("old.db"), "{err}");
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(Schema::Rowid.create_table()).unwrap();
        Schema::Rowid.check_database(&conn, Path::new("new.db")).unwrap();
        assert!(Schema::TextKey.check_database(&conn, Path::new("new.db")).is_err());
    }
}
