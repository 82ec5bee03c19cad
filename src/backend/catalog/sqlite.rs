//! The catalog in a SQLite database: beside the content for stores that are not databases (fs,
//! pack, s3, ...), or inside the store's own database file for `sqlite` and `sqlite-file`.
//!
//! Committed durably (WAL, synchronous = full): a file server that acknowledged an upload must
//! still know the file after a power loss, and a weaker setting would flatter the registration
//! time next to server catalogs that commit durably.

use super::{Catalog, CatalogCounts, Content, Registration, StoredFile};
use crate::backend::sqlite::connection::{begin_write, unsigned, SqlContext};
use crate::backend::BResult;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};

/// The catalog's file name when it sits beside the content.
pub const BESIDE_FILE: &str = "catalog.sqlite";

/// How long a writer waits for another worker's transaction before failing with a conflict.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// One worker's connection to a SQLite catalog.
pub struct SqliteCatalog {
    conn: Connection,
    path: PathBuf,
    files: String,
    names: String,
    lock_wait_ns: u64,
}

impl SqliteCatalog {
    /// Opens (creating if needed) the catalog at `path`, with tables named `{prefix}files` and
    /// `{prefix}names` (prefix: [a-z0-9_] only, from a namespace).
    pub fn open(path: &Path, prefix: &str) -> BResult<SqliteCatalog> {
        debug_assert!(prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).context(&format!("open catalog {}", path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT).context("set busy_timeout")?;
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0)).context("set journal_mode")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(crate::backend::BackendError::new(
                crate::backend::ErrorKind::Other,
                format!("SQLite kept journal_mode \"{mode}\" for the catalog {} (WAL needs shared memory)", path.display()),
            ));
        }
        conn.pragma_update(None, "synchronous", "full").context("set synchronous")?;
        Ok(SqliteCatalog { conn, path: path.to_path_buf(), files: format!("{prefix}files"), names: format!("{prefix}names"), lock_wait_ns: 0 })
    }

    /// Time this connection waited for the catalog's write lock, in nanoseconds.
    pub fn lock_wait_ns(&self) -> u64 {
        self.lock_wait_ns
    }
}

impl Catalog for SqliteCatalog {
    fn prepare(&mut self) -> BResult<()> {
        let (files, names) = (&self.files, &self.names);
        self.conn
            .execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS {files}(hash TEXT PRIMARY KEY, object_key TEXT NOT NULL, \
                   size_bytes INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0);
                 CREATE TABLE IF NOT EXISTS {names}(name TEXT PRIMARY KEY, hash TEXT NOT NULL);"
            ))
            .context("create the catalog tables")
    }

    fn register(&mut self, name: &str, content: &Content) -> BResult<Registration> {
        let (files, names) = (self.files.clone(), self.names.clone());
        let tx = begin_write(&mut self.conn, &mut self.lock_wait_ns)?;
        let found: Option<bool> = tx
            .query_row(&format!("SELECT stored FROM {files} WHERE hash = ?1"), params![content.hash], |row| row.get(0))
            .optional()
            .context("look the hash up")?;
        if found.is_none() {
            tx.execute(
                &format!("INSERT INTO {files}(hash, object_key, size_bytes, stored) VALUES (?1, ?2, ?3, 0)"),
                params![content.hash, content.object_key, content.size_bytes as i64],
            )
            .context("insert the files row")?;
        }
        tx.execute(
            &format!("INSERT INTO {names}(name, hash) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET hash = excluded.hash"),
            params![name, content.hash],
        )
        .context("insert the names row")?;
        tx.commit().context("commit the registration")?;
        Ok(Registration::from_lookup(found))
    }

    fn mark_stored(&mut self, hash: &str) -> BResult<()> {
        let files = &self.files;
        self.conn.execute(&format!("UPDATE {files} SET stored = 1 WHERE hash = ?1"), params![hash]).context("mark the content stored")?;
        Ok(())
    }

    fn resolve(&mut self, name: &str) -> BResult<Option<StoredFile>> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!("SELECT f.hash, f.object_key, f.size_bytes FROM {names} n JOIN {files} f ON f.hash = n.hash WHERE n.name = ?1 AND f.stored = 1");
        let mut stmt = self.conn.prepare_cached(&sql).context("prepare the lookup")?;
        stmt.query_row(params![name], |row| Ok(StoredFile { hash: row.get(0)?, object_key: row.get(1)?, size_bytes: unsigned(row, 2)? }))
            .optional()
            .context("look the name up")
    }

    fn stored_files(&mut self) -> BResult<Vec<StoredFile>> {
        let files = &self.files;
        let mut stmt = self.conn.prepare(&format!("SELECT hash, object_key, size_bytes FROM {files} WHERE stored = 1 ORDER BY hash")).context("list files")?;
        let rows =
            stmt.query_map([], |row| Ok(StoredFile { hash: row.get(0)?, object_key: row.get(1)?, size_bytes: unsigned(row, 2)? })).context("list files")?;
        rows.collect::<Result<Vec<_>, _>>().context("list files")
    }

    fn counts(&mut self) -> BResult<CatalogCounts> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!(
            "SELECT (SELECT count(*) FROM {files}), (SELECT count(*) FROM {names}), \
                    (SELECT count(*) FROM {files} WHERE stored = 0), \
                    (SELECT count(*) FROM {names} n WHERE NOT EXISTS (SELECT 1 FROM {files} f WHERE f.hash = n.hash))"
        );
        self.conn
            .query_row(&sql, [], |row| {
                Ok(CatalogCounts { files: unsigned(row, 0)?, names: unsigned(row, 1)?, unfinished: unsigned(row, 2)?, dangling_names: unsigned(row, 3)? })
            })
            .context("count the catalog rows")
    }

    fn size_bytes(&mut self) -> BResult<Option<u64>> {
        // The database and its WAL: what the catalog costs on disk.
        use std::os::unix::fs::MetadataExt;
        let files = crate::backend::sqlite::connection::database_files(&self.path);
        Ok(Some(files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.blocks() * 512).sum()))
    }

    fn describe(&self) -> String {
        format!("sqlite file {} (tables {}, {}; wal, synchronous = full)", self.path.display(), self.files, self.names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content<'a>(hash: &'a str) -> Content<'a> {
        Content { hash, object_key: hash, size_bytes: 10 }
    }

    #[test]
    fn registration_is_idempotent_and_a_duplicate_is_only_named() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = SqliteCatalog::open(&tmp.path().join("c.sqlite"), "t_").unwrap();
        a.prepare().unwrap();
        a.prepare().unwrap();
        assert_eq!(a.register("one", &content("aa")).unwrap(), Registration::New);
        // A retry before the content was stored must store it again, without a second row.
        assert_eq!(a.register("one", &content("aa")).unwrap(), Registration::Unfinished);
        assert_eq!(a.resolve("one").unwrap(), None, "unfinished content is not served");
        a.mark_stored("aa").unwrap();
        let mut b = SqliteCatalog::open(&tmp.path().join("c.sqlite"), "t_").unwrap();
        assert_eq!(b.register("two", &content("aa")).unwrap(), Registration::Duplicate);
        assert_eq!(b.resolve("two").unwrap().map(|f| f.object_key), Some("aa".to_string()));
        assert_eq!(b.counts().unwrap(), CatalogCounts { files: 1, names: 2, unfinished: 0, dangling_names: 0 });
        assert_eq!(b.stored_files().unwrap().len(), 1);
        assert!(b.size_bytes().unwrap().unwrap() > 0);
    }
}
