//! The catalog in MariaDB, beside the `mariadb` backend's own table (inline or file mode), in
//! the same storage engine, committed with the server's settings.

use super::{Catalog, CatalogCounts, Content, Registration, StoredFile};
use crate::backend::sockets::{CutHandle, Reconnecting};
use crate::backend::{BResult, BackendError};
use mysql::prelude::Queryable;
use mysql::{params, Conn, TxOpts};

/// Maps a driver error to a backend error (kind and scrubbed message), as the backend does.
pub type ErrorMap = Box<dyn Fn(mysql::Error) -> BackendError + Send>;

/// One worker's connection to a MariaDB catalog.
pub struct MariaCatalog {
    conn: Reconnecting<Conn>,
    files: String,
    names: String,
    engine: String,
    error: ErrorMap,
}

/// The catalog's two table names for a backend whose table is `table` (unquoted).
pub fn table_names(table: &str) -> (String, String) {
    (format!("{table}_files"), format!("{table}_names"))
}

impl MariaCatalog {
    /// A catalog over `conn` whose tables sit beside the backend table `table`, in `engine`.
    pub fn new(conn: Reconnecting<Conn>, table: &str, engine: &str, error: ErrorMap) -> MariaCatalog {
        let (files, names) = table_names(table);
        MariaCatalog { conn, files, names, engine: engine.to_string(), error }
    }

    /// Drops the catalog's tables if they exist (the backend's cleanup).
    pub fn drop_tables(conn: &mut Conn, table: &str) -> Result<(), mysql::Error> {
        let (files, names) = table_names(table);
        conn.query_drop(format!("DROP TABLE IF EXISTS `{names}`, `{files}`"))
    }
}

fn stored_file((hash, object_key, size_bytes): (String, String, u64)) -> StoredFile {
    StoredFile { hash, object_key, size_bytes }
}

impl Catalog for MariaCatalog {
    fn prepare(&mut self) -> BResult<()> {
        let (files, names, engine) = (&self.files, &self.names, &self.engine);
        // Hashes are 64 hex digits and names short ASCII: binary columns compare exactly.
        let files_sql = format!(
            "CREATE TABLE IF NOT EXISTS `{files}` (hash VARBINARY(64) NOT NULL PRIMARY KEY, object_key VARBINARY(512) NOT NULL, \
               size_bytes BIGINT UNSIGNED NOT NULL, stored BOOLEAN NOT NULL DEFAULT FALSE) ENGINE={engine}"
        );
        let names_sql = format!("CREATE TABLE IF NOT EXISTS `{names}` (name VARBINARY(512) NOT NULL PRIMARY KEY, hash VARBINARY(64) NOT NULL) ENGINE={engine}");
        self.conn.live()?.query_drop(files_sql).map_err(&self.error)?;
        self.conn.live()?.query_drop(names_sql).map_err(&self.error)
    }

    fn register(&mut self, name: &str, content: &Content) -> BResult<Registration> {
        let (files, names) = (self.files.clone(), self.names.clone());
        let error = &self.error;
        let mut tx = self.conn.live()?.start_transaction(TxOpts::default()).map_err(error)?;
        let lookup = format!("SELECT stored FROM `{files}` WHERE hash = :hash");
        let mut found: Option<bool> = tx.exec_first(&lookup, params! { "hash" => content.hash }).map_err(error)?;
        if found.is_none() {
            tx.exec_drop(
                format!("INSERT IGNORE INTO `{files}` (hash, object_key, size_bytes, stored) VALUES (:hash, :key, :size, FALSE)"),
                params! { "hash" => content.hash, "key" => content.object_key, "size" => content.size_bytes },
            )
            .map_err(error)?;
            if tx.affected_rows() == 0 {
                // Another worker registered the same content since the lookup.
                found = tx.exec_first(&lookup, params! { "hash" => content.hash }).map_err(error)?;
            }
        }
        tx.exec_drop(
            format!("INSERT INTO `{names}` (name, hash) VALUES (:name, :hash) ON DUPLICATE KEY UPDATE hash = VALUES(hash)"),
            params! { "name" => name, "hash" => content.hash },
        )
        .map_err(error)?;
        tx.commit().map_err(error)?;
        Ok(Registration::from_lookup(found))
    }

    fn mark_stored(&mut self, hash: &str) -> BResult<()> {
        let files = &self.files;
        self.conn.live()?.exec_drop(format!("UPDATE `{files}` SET stored = TRUE WHERE hash = :hash"), params! { "hash" => hash }).map_err(&self.error)
    }

    fn resolve(&mut self, name: &str) -> BResult<Option<StoredFile>> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!("SELECT f.hash, f.object_key, f.size_bytes FROM `{names}` n JOIN `{files}` f ON f.hash = n.hash WHERE n.name = :name AND f.stored");
        let row: Option<(String, String, u64)> = self.conn.live()?.exec_first(sql, params! { "name" => name }).map_err(&self.error)?;
        Ok(row.map(stored_file))
    }

    fn stored_files(&mut self) -> BResult<Vec<StoredFile>> {
        let files = &self.files;
        let rows: Vec<(String, String, u64)> =
            self.conn.live()?.query(format!("SELECT hash, object_key, size_bytes FROM `{files}` WHERE stored ORDER BY hash")).map_err(&self.error)?;
        Ok(rows.into_iter().map(stored_file).collect())
    }

    fn counts(&mut self) -> BResult<CatalogCounts> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!(
            "SELECT (SELECT count(*) FROM `{files}`), (SELECT count(*) FROM `{names}`), \
                    (SELECT count(*) FROM `{files}` WHERE NOT stored), \
                    (SELECT count(*) FROM `{names}` n WHERE NOT EXISTS (SELECT 1 FROM `{files}` f WHERE f.hash = n.hash))"
        );
        let row: Option<(u64, u64, u64, u64)> = self.conn.live()?.query_first(sql).map_err(&self.error)?;
        let (files, names, unfinished, dangling_names) = row.unwrap_or_default();
        Ok(CatalogCounts { files, names, unfinished, dangling_names })
    }

    fn size_bytes(&mut self) -> BResult<Option<u64>> {
        let sql = "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS UNSIGNED) FROM information_schema.tables \
                   WHERE table_schema = DATABASE() AND table_name IN (:files, :names)";
        let bytes: Option<u64> = self.conn.live()?.exec_first(sql, params! { "files" => &self.files, "names" => &self.names }).map_err(&self.error)?;
        Ok(bytes)
    }

    fn cut_handle(&self) -> Option<CutHandle> {
        Some(self.conn.cut_handle())
    }

    fn describe(&self) -> String {
        format!("mariadb tables {} and {} ({}) beside the content, committed with the server's settings", self.files, self.names, self.engine)
    }
}
