//! The catalog in the GridFS backend's own database: two collections beside the bucket.
//!
//! No multi-document transactions (FerretDB, the stand-in server here, has none), so every
//! write is idempotent on its own: a `files` document is keyed by the hash (`_id`) and only
//! inserted when absent, a `names` document keyed by the name is upserted. A failure between
//! the two leaves an unfinished `files` document, which the next attempt completes.

use super::{Catalog, CatalogCounts, Content, Registration, StoredFile};
use crate::backend::abandon::{Abandonable, Abandoned};
use crate::backend::sockets::CutHandle;
use crate::backend::{BResult, BackendError};
use mongodb::action::Action;
use mongodb::bson::{doc, Document};
use mongodb::options::WriteConcern;
use mongodb::{Collection, Database};
use std::collections::HashSet;
use std::future::Future;

/// Maps a driver error to a backend error (kind and scrubbed message), as the backend does.
pub type ErrorMap = Box<dyn Fn(mongodb::error::Error) -> BackendError + Send>;

/// One worker's connection to a MongoDB-wire catalog.
pub struct MongoCatalog {
    files: Collection<Document>,
    names: Collection<Document>,
    error: ErrorMap,
    write_concern: Option<WriteConcern>,
    driver: Abandonable,
}

/// The catalog's two collection names for the GridFS bucket `bucket`.
pub fn collection_names(bucket: &str) -> (String, String) {
    (format!("{bucket}_catalog_files"), format!("{bucket}_catalog_names"))
}

/// The MongoDB error code of a duplicate key.
const DUPLICATE_KEY: i32 = 11000;

fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        ErrorKind::Command(c) => c.code == DUPLICATE_KEY,
        _ => false,
    }
}

impl MongoCatalog {
    /// A catalog in `db` beside the bucket `bucket`; `write_concern` as the bucket's writes have it.
    pub fn new(db: &Database, bucket: &str, write_concern: Option<WriteConcern>, error: ErrorMap, driver: Abandonable) -> MongoCatalog {
        let (files, names) = collection_names(bucket);
        MongoCatalog { files: db.collection(&files), names: db.collection(&names), error, write_concern, driver }
    }

    /// Drops the catalog's collections (the backend's cleanup); absent ones are fine.
    pub fn drop_collections(db: &mongodb::sync::Database, bucket: &str) -> Result<(), mongodb::error::Error> {
        let (files, names) = collection_names(bucket);
        for name in [files, names] {
            db.collection::<Document>(&name).drop().run()?;
        }
        Ok(())
    }

    /// Runs one catalog operation on this thread, unless the watchdog abandons it.
    fn run<T>(&self, operation: impl Future<Output = BResult<T>>) -> BResult<T> {
        self.driver.run(operation).unwrap_or_else(|Abandoned| Err(Abandoned::error("gridfs catalog")))
    }

    async fn find_stored(&self, hash: &str) -> BResult<Option<bool>> {
        let found = self.files.find_one(doc! { "_id": hash }).await.map_err(&self.error)?;
        Ok(found.map(|d| d.get_bool("stored").unwrap_or(false)))
    }

    /// The documents of `collection` matching `filter`, by `_id`.
    fn all(&self, collection: &Collection<Document>, filter: Document) -> BResult<Vec<Document>> {
        self.run(async {
            let mut cursor = collection.find(filter).sort(doc! { "_id": 1 }).await.map_err(&self.error)?;
            let mut out = Vec::new();
            while cursor.advance().await.map_err(&self.error)? {
                out.push(cursor.deserialize_current().map_err(&self.error)?);
            }
            Ok(out)
        })
    }

    fn stored_file(d: &Document) -> Option<StoredFile> {
        Some(StoredFile {
            hash: d.get_str("_id").ok()?.to_string(),
            object_key: d.get_str("object_key").ok()?.to_string(),
            size_bytes: d.get_i64("size_bytes").ok()? as u64,
        })
    }
}

impl Catalog for MongoCatalog {
    fn prepare(&mut self) -> BResult<()> {
        // Both collections are keyed by `_id`, which is always indexed: nothing to create.
        Ok(())
    }

    fn register(&mut self, name: &str, content: &Content) -> BResult<Registration> {
        self.run(async {
            let mut found = self.find_stored(content.hash).await?;
            if found.is_none() {
                let row = doc! { "_id": content.hash, "object_key": content.object_key, "size_bytes": content.size_bytes as i64, "stored": false };
                match self.files.insert_one(row).optional(self.write_concern.clone(), |a, wc| a.write_concern(wc)).await {
                    Ok(_) => {}
                    // Another worker registered the same content since the lookup.
                    Err(e) if is_duplicate_key(&e) => found = self.find_stored(content.hash).await?,
                    Err(e) => return Err((self.error)(e)),
                }
            }
            self.names
                .update_one(doc! { "_id": name }, doc! { "$set": { "hash": content.hash } })
                .upsert(true)
                .optional(self.write_concern.clone(), |a, wc| a.write_concern(wc))
                .await
                .map_err(&self.error)?;
            Ok(Registration::from_lookup(found))
        })
    }

    fn mark_stored(&mut self, hash: &str) -> BResult<()> {
        self.run(async {
            self.files
                .update_one(doc! { "_id": hash }, doc! { "$set": { "stored": true } })
                .optional(self.write_concern.clone(), |a, wc| a.write_concern(wc))
                .await
                .map_err(&self.error)?;
            Ok(())
        })
    }

    fn resolve(&mut self, name: &str) -> BResult<Option<StoredFile>> {
        self.run(async {
            let Some(entry) = self.names.find_one(doc! { "_id": name }).await.map_err(&self.error)? else { return Ok(None) };
            let Ok(hash) = entry.get_str("hash") else { return Ok(None) };
            let file = self.files.find_one(doc! { "_id": hash, "stored": true }).await.map_err(&self.error)?;
            Ok(file.as_ref().and_then(Self::stored_file))
        })
    }

    fn stored_files(&mut self) -> BResult<Vec<StoredFile>> {
        let stored = self.all(&self.files, doc! { "stored": true })?;
        Ok(stored.iter().filter_map(Self::stored_file).collect())
    }

    fn counts(&mut self) -> BResult<CatalogCounts> {
        let mut hashes = HashSet::new();
        let mut unfinished = 0;
        for d in self.all(&self.files, doc! {})? {
            unfinished += !d.get_bool("stored").unwrap_or(false) as u64;
            hashes.insert(d.get_str("_id").unwrap_or_default().to_string());
        }
        let (mut names, mut dangling_names) = (0, 0);
        for d in self.all(&self.names, doc! {})? {
            names += 1;
            dangling_names += !hashes.contains(d.get_str("hash").unwrap_or_default()) as u64;
        }
        Ok(CatalogCounts { files: hashes.len() as u64, names, unfinished, dangling_names })
    }

    fn size_bytes(&mut self) -> BResult<Option<u64>> {
        // collStats is not served by every MongoDB-wire server: where it fails the size is unknown.
        Ok(None)
    }

    fn cut_handle(&self) -> Option<CutHandle> {
        Some(self.driver.cut_handle())
    }

    fn describe(&self) -> String {
        let wc = if self.write_concern.is_some() { "write concern j:true" } else { "the client's default write concern" };
        format!("collections {} and {} beside the GridFS bucket, written with {wc}", self.files.name(), self.names.name())
    }
}
