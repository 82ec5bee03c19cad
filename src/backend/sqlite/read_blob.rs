//! A read-only BLOB handle (SQLite's incremental blob I/O) that a session can keep open across
//! gets and move from row to row with `sqlite3_blob_reopen`, as SQLite's kvtest does.
//!
//! rusqlite's `Blob` borrows its `Connection`, so a session cannot keep one beside the connection
//! it owns; this wraps the raw handle instead. While the handle is open the connection holds a
//! read transaction (the handle is an unfinished statement): every statement of that connection
//! reads the snapshot taken when the handle was opened. The handle must never outlive its
//! connection, and is never used for writing.

use rusqlite::{ffi, Connection};
use std::ffi::{c_int, CStr};
use std::ptr::NonNull;

/// An open read-only handle on one column of one table, pointing at one row.
pub(crate) struct ReadBlob {
    blob: NonNull<ffi::sqlite3_blob>,
    db: *mut ffi::sqlite3,
    /// Read position within the current row's value, in bytes.
    pos_bytes: u64,
    /// When the handle was opened (`clock::coarse_monotonic_ns`): the age of the snapshot it holds.
    pub opened_at_ns: u64,
}

// SAFETY: the handle is only ever used by the session that owns it and its connection, one call
// at a time; rusqlite's Connection is Send, and SQLite is built thread-safe (the bundled build).
unsafe impl Send for ReadBlob {}

impl ReadBlob {
    /// Opens `table.column` of row `rowid` of the main database read-only. If `conn` already
    /// holds a read transaction (a statement of it is still active), the handle joins it.
    ///
    /// # Safety
    /// The handle must be dropped before `conn` is closed or dropped.
    pub unsafe fn open(conn: &Connection, table: &CStr, column: &CStr, rowid: i64) -> rusqlite::Result<ReadBlob> {
        let db = conn.handle();
        let mut blob = std::ptr::null_mut();
        let rc = ffi::sqlite3_blob_open(db, c"main".as_ptr(), table.as_ptr(), column.as_ptr(), rowid, 0, &mut blob);
        match NonNull::new(blob) {
            Some(blob) if rc == ffi::SQLITE_OK => Ok(ReadBlob { blob, db, pos_bytes: 0, opened_at_ns: crate::clock::coarse_monotonic_ns() }),
            other => {
                // SQLite documents that a failed open leaves a handle that is safe to close (or NULL).
                if let Some(blob) = other {
                    ffi::sqlite3_blob_close(blob.as_ptr());
                }
                Err(last_error(db, rc))
            }
        }
    }

    /// Moves the handle to row `rowid` of the same table and column, inside the same read
    /// transaction. On an error SQLite has aborted the handle: drop it.
    pub fn reopen(&mut self, rowid: i64) -> rusqlite::Result<()> {
        // SAFETY: an open handle of a live connection (the contract of `open`).
        let rc = unsafe { ffi::sqlite3_blob_reopen(self.blob.as_ptr(), rowid) };
        self.pos_bytes = 0;
        match rc {
            ffi::SQLITE_OK => Ok(()),
            _ => Err(last_error(self.db, rc)),
        }
    }

    /// Length of the current row's value, in bytes.
    pub fn len_bytes(&self) -> u64 {
        // SAFETY: as in `reopen`. SQLite returns a non-negative int (0 for an aborted handle).
        unsafe { ffi::sqlite3_blob_bytes(self.blob.as_ptr()) }.max(0) as u64
    }
}

impl std::io::Read for ReadBlob {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // A value is at most SQLITE_MAX_LENGTH (1e9) bytes, so lengths and offsets fit an int.
        let n = (self.len_bytes().saturating_sub(self.pos_bytes)).min(buf.len() as u64).min(c_int::MAX as u64) as c_int;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: as in `reopen`; `buf` holds at least `n` bytes.
        let rc = unsafe { ffi::sqlite3_blob_read(self.blob.as_ptr(), buf.as_mut_ptr().cast(), n, self.pos_bytes as c_int) };
        if rc != ffi::SQLITE_OK {
            return Err(std::io::Error::other(last_error(self.db, rc)));
        }
        self.pos_bytes += n as u64;
        Ok(n as usize)
    }
}

impl Drop for ReadBlob {
    fn drop(&mut self) {
        // SAFETY: as in `reopen`. Closing a read-only handle cannot lose data; its result (the
        // error of an earlier failed call, if any) was reported when that call failed.
        unsafe { ffi::sqlite3_blob_close(self.blob.as_ptr()) };
    }
}

/// The connection's error for result code `rc`, with SQLite's message.
pub(crate) fn last_error(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is a live connection; sqlite3_errmsg returns a NUL-terminated string it owns,
    // copied here before any other call on the connection.
    let message = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }.to_string_lossy().into_owned();
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(message))
}
