//! The catalog in PostgreSQL, beside the `postgres` backend's own table (bytea, lo or file
//! mode): registration commits in the same database, with the server's durability settings.

use super::{Catalog, CatalogCounts, Content, Registration, StoredFile};
use crate::backend::sockets::{CutHandle, Reconnecting};
use crate::backend::{BResult, BackendError};
use postgres::Client;

/// Maps a driver error to a backend error (kind and scrubbed message), as the backend does.
pub type ErrorMap = Box<dyn Fn(postgres::Error) -> BackendError + Send>;

/// One worker's connection to a PostgreSQL catalog.
pub struct PgCatalog {
    client: Reconnecting<Client>,
    files: String,
    names: String,
    error: ErrorMap,
}

/// The quoted names of the catalog's two tables for a backend whose table is `table` (quoted).
pub fn table_names(table: &str) -> (String, String) {
    let base = table.trim_matches('"');
    (format!("\"{base}_files\""), format!("\"{base}_names\""))
}

impl PgCatalog {
    /// A catalog over `client` (reconnected after a cut) whose tables sit beside the backend
    /// table `table` (quoted).
    pub fn new(client: Reconnecting<Client>, table: &str, error: ErrorMap) -> PgCatalog {
        let (files, names) = table_names(table);
        PgCatalog { client, files, names, error }
    }

    /// Drops the catalog's tables if they exist (the backend's cleanup).
    pub fn drop_tables(client: &mut Client, table: &str) -> Result<(), postgres::Error> {
        let (files, names) = table_names(table);
        client.batch_execute(&format!("DROP TABLE IF EXISTS {names}; DROP TABLE IF EXISTS {files};"))
    }
}

fn stored_file(row: &postgres::Row) -> StoredFile {
    StoredFile { hash: row.get(0), object_key: row.get(1), size_bytes: row.get::<_, i64>(2) as u64 }
}

impl Catalog for PgCatalog {
    fn prepare(&mut self) -> BResult<()> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS {files} (hash text PRIMARY KEY, object_key text NOT NULL, size_bytes bigint NOT NULL, \
               stored boolean NOT NULL DEFAULT false);
             CREATE TABLE IF NOT EXISTS {names} (name text PRIMARY KEY, hash text NOT NULL);"
        );
        self.client.live()?.batch_execute(&sql).map_err(&self.error)
    }

    fn register(&mut self, name: &str, content: &Content) -> BResult<Registration> {
        let (files, names) = (self.files.clone(), self.names.clone());
        let error = &self.error;
        let mut tx = self.client.live()?.transaction().map_err(error)?;
        let lookup = format!("SELECT stored FROM {files} WHERE hash = $1");
        let mut found: Option<bool> = tx.query_opt(&lookup, &[&content.hash]).map_err(error)?.map(|r| r.get(0));
        if found.is_none() {
            let inserted = tx
                .execute(
                    &format!("INSERT INTO {files} (hash, object_key, size_bytes, stored) VALUES ($1, $2, $3, false) ON CONFLICT (hash) DO NOTHING"),
                    &[&content.hash, &content.object_key, &(content.size_bytes as i64)],
                )
                .map_err(error)?;
            if inserted == 0 {
                // Another worker registered the same content since the lookup.
                found = tx.query_opt(&lookup, &[&content.hash]).map_err(error)?.map(|r| r.get(0));
            }
        }
        tx.execute(&format!("INSERT INTO {names} (name, hash) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET hash = EXCLUDED.hash"), &[&name, &content.hash])
            .map_err(error)?;
        tx.commit().map_err(error)?;
        Ok(Registration::from_lookup(found))
    }

    fn mark_stored(&mut self, hash: &str) -> BResult<()> {
        let files = &self.files;
        self.client.live()?.execute(&format!("UPDATE {files} SET stored = true WHERE hash = $1"), &[&hash]).map_err(&self.error)?;
        Ok(())
    }

    fn resolve(&mut self, name: &str) -> BResult<Option<StoredFile>> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!("SELECT f.hash, f.object_key, f.size_bytes FROM {names} n JOIN {files} f ON f.hash = n.hash WHERE n.name = $1 AND f.stored");
        Ok(self.client.live()?.query_opt(&sql, &[&name]).map_err(&self.error)?.as_ref().map(stored_file))
    }

    fn stored_files(&mut self) -> BResult<Vec<StoredFile>> {
        let files = &self.files;
        let rows =
            self.client.live()?.query(&format!("SELECT hash, object_key, size_bytes FROM {files} WHERE stored ORDER BY hash"), &[]).map_err(&self.error)?;
        Ok(rows.iter().map(stored_file).collect())
    }

    fn counts(&mut self) -> BResult<CatalogCounts> {
        let (files, names) = (&self.files, &self.names);
        let sql = format!(
            "SELECT (SELECT count(*) FROM {files}), (SELECT count(*) FROM {names}), \
                    (SELECT count(*) FROM {files} WHERE NOT stored), \
                    (SELECT count(*) FROM {names} n WHERE NOT EXISTS (SELECT 1 FROM {files} f WHERE f.hash = n.hash))"
        );
        let row = self.client.live()?.query_one(&sql, &[]).map_err(&self.error)?;
        let n = |i: usize| row.get::<_, i64>(i) as u64;
        Ok(CatalogCounts { files: n(0), names: n(1), unfinished: n(2), dangling_names: n(3) })
    }

    fn size_bytes(&mut self) -> BResult<Option<u64>> {
        let (files, names) = (&self.files, &self.names);
        let row = self
            .client
            .live()?
            .query_one("SELECT pg_total_relation_size($1::text::regclass) + pg_total_relation_size($2::text::regclass)", &[files, names])
            .map_err(&self.error)?;
        Ok(Some(row.get::<_, i64>(0) as u64))
    }

    fn cut_handle(&self) -> Option<CutHandle> {
        Some(self.client.cut_handle())
    }

    fn describe(&self) -> String {
        format!("postgres tables {} and {} beside the content, committed with the server's settings", self.files, self.names)
    }
}
