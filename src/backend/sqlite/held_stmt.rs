//! The small get's one statement, prepared once per session and kept beside the connection, as
//! SQLite's kvtest keeps its `SELECT v FROM kv WHERE k=?1`.
//!
//! rusqlite's `prepare_cached` finds a statement by hashing its SQL text in an LRU cache on every
//! call, clears its bindings when it goes back, and copies every bound key; `perf record` of
//! 10,000-byte SQL gets put that at about 3 % of a get. This holds the raw statement instead (a
//! `Statement` borrows its `Connection` and cannot sit beside it in a session). Every use ends
//! with `sqlite3_reset` (when the returned row is dropped), so an idle held statement is never
//! active and never holds a read transaction. It must be dropped before its connection.

use super::read_blob::last_error;
use rusqlite::{ffi, Connection};
use std::ffi::c_int;
use std::ptr::NonNull;

/// A prepared statement of one connection, reset after every use.
pub(crate) struct HeldStatement {
    stmt: NonNull<ffi::sqlite3_stmt>,
    db: *mut ffi::sqlite3,
}

// SAFETY: used only by the session that owns it and its connection, one call at a time; SQLite is
// built thread-safe (the bundled build), as for `ReadBlob`.
unsafe impl Send for HeldStatement {}

impl HeldStatement {
    /// Prepares `sql` on `conn` (SQLITE_PREPARE_PERSISTENT: it will be used many times).
    ///
    /// # Safety
    /// The statement must be dropped before `conn` is closed or dropped.
    pub unsafe fn prepare(conn: &Connection, sql: &str) -> rusqlite::Result<HeldStatement> {
        let db = conn.handle();
        let mut stmt = std::ptr::null_mut();
        let len = c_int::try_from(sql.len()).expect("our SQL is short");
        let flags = ffi::SQLITE_PREPARE_PERSISTENT as _;
        let rc = ffi::sqlite3_prepare_v3(db, sql.as_ptr().cast(), len, flags, &mut stmt, std::ptr::null_mut());
        match NonNull::new(stmt) {
            Some(stmt) if rc == ffi::SQLITE_OK => Ok(HeldStatement { stmt, db }),
            other => {
                if let Some(stmt) = other {
                    ffi::sqlite3_finalize(stmt.as_ptr());
                }
                Err(last_error(db, if rc == ffi::SQLITE_OK { ffi::SQLITE_MISUSE } else { rc }))
            }
        }
    }

    /// Binds `?1` = `id`, `?3` = `limit` and `?2` = `key` (copied by SQLite; NULL when None, so
    /// no earlier key stays bound), and steps once: the first row, or None. The statement is reset when the row is dropped (or here,
    /// on no row or an error), which ends the read transaction it began.
    pub fn query(&mut self, id: i64, key: Option<&str>, limit: i64) -> rusqlite::Result<Option<HeldRow<'_>>> {
        let stmt = self.stmt.as_ptr();
        // SAFETY: a live statement of a live connection (the contract of `prepare`); the key is
        // copied (SQLITE_TRANSIENT), so no pointer into it outlives this call.
        let rc = unsafe {
            let mut rc = ffi::sqlite3_bind_int64(stmt, 1, id);
            if rc == ffi::SQLITE_OK {
                rc = ffi::sqlite3_bind_int64(stmt, 3, limit);
            }
            match (rc, key) {
                (ffi::SQLITE_OK, Some(key)) => {
                    let text = key.as_ptr().cast();
                    rc = ffi::sqlite3_bind_text64(stmt, 2, text, key.len() as u64, ffi::SQLITE_TRANSIENT(), ffi::SQLITE_UTF8 as _);
                }
                // A statement without ?2 (numbered keys) has nothing to clear.
                (ffi::SQLITE_OK, None) if ffi::sqlite3_bind_parameter_count(stmt) >= 2 => rc = ffi::sqlite3_bind_null(stmt, 2),
                _ => {}
            }
            if rc == ffi::SQLITE_OK {
                ffi::sqlite3_step(stmt)
            } else {
                rc
            }
        };
        match rc {
            ffi::SQLITE_ROW => Ok(Some(HeldRow { held: self })),
            ffi::SQLITE_DONE => {
                self.reset();
                Ok(None)
            }
            rc => {
                let err = last_error(self.db, rc);
                self.reset();
                Err(err)
            }
        }
    }

    fn reset(&mut self) {
        // SAFETY: as in `query`. The result repeats the error of the last step, already reported.
        unsafe { ffi::sqlite3_reset(self.stmt.as_ptr()) };
    }
}

impl Drop for HeldStatement {
    fn drop(&mut self) {
        // SAFETY: as in `query`; never used again.
        unsafe { ffi::sqlite3_finalize(self.stmt.as_ptr()) };
    }
}

/// The current row of a held statement; resets the statement when dropped.
pub(crate) struct HeldRow<'s> {
    held: &'s mut HeldStatement,
}

impl HeldRow<'_> {
    /// Column `idx` as an integer; a column of another type (or NULL) is an error, as in rusqlite.
    pub fn integer(&self, idx: c_int) -> rusqlite::Result<i64> {
        let stmt = self.held.stmt.as_ptr();
        // SAFETY: a statement positioned on a row (SQLITE_ROW), `idx` within its columns.
        match unsafe { ffi::sqlite3_column_type(stmt, idx) } {
            ffi::SQLITE_INTEGER => Ok(unsafe { ffi::sqlite3_column_int64(stmt, idx) }),
            other => Err(wrong_type(idx, other)),
        }
    }

    /// Column `idx` as a BLOB, borrowed from SQLite until the row is dropped; another type (or
    /// NULL) is an error, as in rusqlite.
    pub fn blob(&self, idx: c_int) -> rusqlite::Result<&[u8]> {
        let stmt = self.held.stmt.as_ptr();
        // SAFETY: as in `integer`. SQLite documents to call column_blob before column_bytes; the
        // pointer stays valid until the statement is stepped, reset or finalized, which needs
        // `&mut HeldStatement` and so cannot happen while this borrow of the row lives.
        unsafe {
            if ffi::sqlite3_column_type(stmt, idx) != ffi::SQLITE_BLOB {
                return Err(wrong_type(idx, ffi::sqlite3_column_type(stmt, idx)));
            }
            let data = ffi::sqlite3_column_blob(stmt, idx);
            let len = ffi::sqlite3_column_bytes(stmt, idx);
            if data.is_null() || len <= 0 {
                // A zero-length BLOB (or an allocation failure, reported by the next call).
                return match ffi::sqlite3_errcode(self.held.db) {
                    ffi::SQLITE_NOMEM => Err(last_error(self.held.db, ffi::SQLITE_NOMEM)),
                    _ => Ok(&[]),
                };
            }
            Ok(std::slice::from_raw_parts(data.cast::<u8>(), len as usize))
        }
    }
}

impl Drop for HeldRow<'_> {
    fn drop(&mut self) {
        self.held.reset();
    }
}

/// The error rusqlite gives for a column of an unexpected type.
fn wrong_type(idx: c_int, sqlite_type: c_int) -> rusqlite::Error {
    let found = match sqlite_type {
        ffi::SQLITE_INTEGER => rusqlite::types::Type::Integer,
        ffi::SQLITE_FLOAT => rusqlite::types::Type::Real,
        ffi::SQLITE_TEXT => rusqlite::types::Type::Text,
        ffi::SQLITE_BLOB => rusqlite::types::Type::Blob,
        _ => rusqlite::types::Type::Null,
    };
    rusqlite::Error::InvalidColumnType(idx as usize, format!("column {idx}"), found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_types_errors_and_reset() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, n, b); INSERT INTO t VALUES (1, 'a', 5, x'0102'), (2, 'b', 'x', x'')").unwrap();
        // SAFETY: dropped before `conn` (declared after it).
        let mut held =
            unsafe { HeldStatement::prepare(&conn, "SELECT n, CASE WHEN n <= ?3 THEN b END FROM t WHERE id = ?1 AND (?2 IS NULL OR k = ?2)") }.unwrap();
        {
            let row = held.query(1, Some("a"), 10).unwrap().expect("row 1");
            assert_eq!((row.integer(0).unwrap(), row.blob(1).unwrap()), (5, &[1u8, 2][..]));
        }
        assert!(held.query(1, Some("b"), 10).unwrap().is_none(), "the key is compared");
        let row = held.query(1, None, 4).unwrap().expect("row 1");
        assert!(matches!(row.blob(1), Err(rusqlite::Error::InvalidColumnType(1, _, rusqlite::types::Type::Null))));
        drop(row);
        let row = held.query(2, None, 10).unwrap().expect("row 2");
        assert!(matches!(row.integer(0), Err(rusqlite::Error::InvalidColumnType(0, _, rusqlite::types::Type::Text))));
        drop(row);
        assert!(held.query(3, Some("a"), 10).unwrap().is_none());
        // Every use ended with a reset: the statement is not active, so it holds no read transaction.
        // SAFETY: a live statement.
        assert_eq!(unsafe { ffi::sqlite3_stmt_busy(held.stmt.as_ptr()) }, 0, "reset after use");
        assert!(unsafe { HeldStatement::prepare(&conn, "SELECT nope FROM t") }.is_err());
    }
}
