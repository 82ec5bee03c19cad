//! Each backend's stored objects, reached behind stowbench's back the way an operator, a
//! misbehaving tool or a failing disk would: files on disk, rows by SQL, large objects, S3
//! objects, GridFS chunks, bytes inside a pack file. Only what `STOWBENCH_BACKEND_INFO` (the
//! `before` hook's environment) and the services' own variables say is used to find them.
//!
//! Where a store records an object's length beside its bytes (a row's size_bytes, GridFS's
//! length), a write updates it too: the object is then consistently shorter, which only
//! stowbench's verification can tell. With `CORRUPTION_KEEP_LENGTH=1` the recorded length is
//! left alone, so the backend's own length check is what finds a truncation.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// One backend's stored objects, read and overwritten whole (test objects are 20 kB).
pub trait Store {
    /// The stored bytes of `key`.
    fn read(&mut self, key: &str) -> Vec<u8>;
    /// Replaces the stored bytes of `key` with `bytes`.
    fn write(&mut self, key: &str, bytes: &[u8]);
    /// Whether `write` can make an object shorter. A container's record has a length of its own:
    /// cutting bytes out of the file would damage the next record, not truncate this one.
    fn can_truncate(&self) -> bool {
        true
    }
    /// Cuts the container file itself `keep` bytes into `key`'s entry, as a crash or a full disk
    /// leaves a torn tail; only when the entry ends the file (nothing after it is damaged).
    /// Whether it did.
    fn cut_file_in(&mut self, _key: &str, _keep: u64) -> bool {
        false
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set for the hook"))
}

/// The store the hook's case uses.
pub fn open(info: &Value) -> Box<dyn Store> {
    let set_length = std::env::var("CORRUPTION_KEEP_LENGTH").is_err();
    let opt = |k: &str| info["options"][k].as_str().map(String::from).unwrap_or_default();
    let paths: Vec<PathBuf> = info["data_paths"].as_array().unwrap().iter().map(|p| PathBuf::from(p.as_str().unwrap())).collect();
    match (info["backend"].as_str().unwrap(), opt("mode").as_str()) {
        ("fs", _) => Box::new(Files::fanout(&paths[0], info["options"]["fanout_levels"].as_u64().unwrap() as u32)),
        ("postgres", "file") => Box::new(Files::fanout(&paths[0], 2)),
        ("sqlite", _) => Box::new(SqliteRows { db: rusqlite::Connection::open(&paths[0]).unwrap(), set_length }),
        ("sqlite-file", _) => {
            let db = rusqlite::Connection::open(&paths[0]).unwrap();
            let files = paths[1].clone();
            Box::new(Files {
                path_of: Box::new(move |key, len| {
                    if let Some(len) = len.filter(|_| set_length) {
                        db.execute("UPDATE objects SET size_bytes = ?2 WHERE key = ?1", rusqlite::params![key, len as i64]).unwrap();
                    }
                    files.join(db.query_row("SELECT path FROM objects WHERE key = ?1", [key], |r| r.get::<_, String>(0)).unwrap())
                }),
            })
        }
        ("postgres", mode) => {
            let client = postgres::Client::connect(&env("STOWBENCH_PG_URI"), postgres::NoTls).unwrap();
            Box::new(PgRows { client, table: opt("table"), lo: mode == "lo", set_length })
        }
        ("mariadb", mode) => {
            let table = opt("table").split('.').map(|p| format!("`{p}`")).collect::<Vec<_>>().join(".");
            let opts = mysql::OptsBuilder::from_opts(mysql::Opts::from_url(&env("STOWBENCH_MARIADB_URI")).unwrap()).prefer_socket(false);
            let conn = mysql::Conn::new(opts).unwrap();
            if mode == "file" {
                let (mut conn, files) = (conn, paths[0].clone());
                Box::new(Files {
                    path_of: Box::new(move |key, len| {
                        use mysql::prelude::Queryable;
                        if let Some(len) = len.filter(|_| set_length) {
                            conn.exec_drop(format!("UPDATE {table} SET size_bytes = ? WHERE k = ?"), (len, key)).unwrap();
                        }
                        let path: Vec<u8> = conn.exec_first(format!("SELECT path FROM {table} WHERE k = ?"), (key,)).unwrap().unwrap();
                        files.join(String::from_utf8(path).unwrap())
                    }),
                })
            } else {
                Box::new(MariaRows { conn, table })
            }
        }
        ("s3", _) => Box::new(S3Objects::new(&opt("bucket"), &opt("region"), &opt("prefix"))),
        ("gridfs", _) => Box::new(GridFs::new(&opt("database"), &opt("bucket"))),
        ("pack", _) => Box::new(PackRecords(paths[0].clone())),
        ("zip", _) => Box::new(ZipEntries(paths[0].join("store.zip"))),
        ("cfb", _) => Box::new(CfbStreams(cfb::open_rw(paths[0].join("store.cfb")).unwrap())),
        (other, _) => panic!("no corrupting store for backend {other}"),
    }
}

/// Objects as files: `path_of(key, new length)` says where a key's content file is (and records
/// the new length in the key's row, for a write, where the backend keeps one).
struct Files {
    path_of: PathOf,
}

/// Where a key's content file is, given the key and, for a write, its new length.
type PathOf = Box<dyn FnMut(&str, Option<u64>) -> PathBuf>;

impl Files {
    fn fanout(root: &Path, levels: u32) -> Files {
        let root = root.to_path_buf();
        Files { path_of: Box::new(move |key, _| stowbench::backend::fs::fanout_path(&root, key, levels)) }
    }
}

impl Store for Files {
    fn read(&mut self, key: &str) -> Vec<u8> {
        std::fs::read((self.path_of)(key, None)).unwrap()
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        std::fs::write((self.path_of)(key, Some(bytes.len() as u64)), bytes).unwrap();
    }
}

struct SqliteRows {
    db: rusqlite::Connection,
    set_length: bool,
}

impl Store for SqliteRows {
    fn read(&mut self, key: &str) -> Vec<u8> {
        self.db.query_row("SELECT body FROM objects WHERE key = ?1", [key], |r| r.get(0)).unwrap()
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        let sql = if self.set_length {
            "UPDATE objects SET body = ?2, size_bytes = length(?2) WHERE key = ?1"
        } else {
            "UPDATE objects SET body = ?2 WHERE key = ?1"
        };
        assert_eq!(self.db.execute(sql, rusqlite::params![key, bytes]).unwrap(), 1);
    }
}

/// postgres' bytea rows, or the large objects its rows point at.
struct PgRows {
    client: postgres::Client,
    table: String,
    lo: bool,
    set_length: bool,
}

impl Store for PgRows {
    fn read(&mut self, key: &str) -> Vec<u8> {
        let column = if self.lo { "lo_get(loid)" } else { "data" };
        self.client.query_one(&format!("SELECT {column} FROM {} WHERE key = $1", self.table), &[&key.as_bytes()]).unwrap().get(0)
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        if !self.lo {
            let n = self.client.execute(&format!("UPDATE {} SET data = $2 WHERE key = $1", self.table), &[&key.as_bytes(), &bytes]).unwrap();
            assert_eq!(n, 1);
            return;
        }
        // Overwrite the large object in place and cut it to the new length; its row stays.
        let mut tx = self.client.transaction().unwrap();
        let oid: u32 = tx.query_one(&format!("SELECT loid FROM {} WHERE key = $1", self.table), &[&key.as_bytes()]).unwrap().get(0);
        tx.query_one("SELECT lo_put($1, 0, $2)", &[&oid, &bytes]).unwrap();
        let fd: i32 = tx.query_one("SELECT lo_open($1, 131072)", &[&oid]).unwrap().get(0); // INV_WRITE
        tx.query_one("SELECT lo_truncate($1, $2)", &[&fd, &(bytes.len() as i32)]).unwrap();
        tx.query_one("SELECT lo_close($1)", &[&fd]).unwrap();
        if self.set_length {
            tx.execute(&format!("UPDATE {} SET size_bytes = $2 WHERE key = $1", self.table), &[&key.as_bytes(), &(bytes.len() as i64)]).unwrap();
        }
        tx.commit().unwrap();
    }
}

struct MariaRows {
    conn: mysql::Conn,
    table: String,
}

impl Store for MariaRows {
    fn read(&mut self, key: &str) -> Vec<u8> {
        use mysql::prelude::Queryable;
        self.conn.exec_first(format!("SELECT data FROM {} WHERE k = ?", self.table), (key,)).unwrap().unwrap()
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        use mysql::prelude::Queryable;
        self.conn.exec_drop(format!("UPDATE {} SET data = ? WHERE k = ?", self.table), (bytes, key)).unwrap();
        assert_eq!(self.conn.affected_rows(), 1);
    }
}

/// S3 objects under the case's prefix, through the same client library the backend uses.
struct S3Objects {
    runtime: tokio::runtime::Runtime,
    store: object_store::aws::AmazonS3,
    prefix: String,
}

impl S3Objects {
    fn new(bucket: &str, region: &str, prefix: &str) -> S3Objects {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(env("STOWBENCH_S3_ENDPOINT"))
            .with_bucket_name(bucket)
            .with_region(region)
            .with_access_key_id(env("AWS_ACCESS_KEY_ID"))
            .with_secret_access_key(env("AWS_SECRET_ACCESS_KEY"))
            .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        S3Objects { runtime, store, prefix: prefix.trim_end_matches('/').to_string() }
    }

    fn path(&self, key: &str) -> object_store::path::Path {
        object_store::path::Path::from_iter([self.prefix.as_str(), key])
    }
}

impl Store for S3Objects {
    fn read(&mut self, key: &str) -> Vec<u8> {
        use object_store::ObjectStoreExt;
        let path = self.path(key);
        self.runtime.block_on(async { self.store.get(&path).await.unwrap().bytes().await.unwrap().to_vec() })
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        use object_store::ObjectStoreExt;
        let path = self.path(key);
        self.runtime.block_on(self.store.put(&path, bytes.to_vec().into())).unwrap();
    }
}

/// A GridFS file's chunks, rewritten (and its files document's length with them).
struct GridFs {
    db: mongodb::sync::Database,
    bucket: String,
}

impl GridFs {
    fn new(database: &str, bucket: &str) -> GridFs {
        let client = mongodb::sync::Client::with_uri_str(env("STOWBENCH_MONGO_URI")).unwrap();
        GridFs { db: client.database(database), bucket: bucket.into() }
    }

    /// The newest files document of `key` (the one a get reads).
    fn file(&self, key: &str) -> mongodb::bson::Document {
        let files = self.db.collection::<mongodb::bson::Document>(&format!("{}.files", self.bucket));
        files.find_one(mongodb::bson::doc! { "filename": key }).sort(mongodb::bson::doc! { "uploadDate": -1, "_id": -1 }).run().unwrap().unwrap()
    }

    fn chunks(&self) -> mongodb::sync::Collection<mongodb::bson::Document> {
        self.db.collection(&format!("{}.chunks", self.bucket))
    }
}

impl Store for GridFs {
    fn read(&mut self, key: &str) -> Vec<u8> {
        let id = self.file(key).get("_id").unwrap().clone();
        let mut out = Vec::new();
        for chunk in self.chunks().find(mongodb::bson::doc! { "files_id": id }).sort(mongodb::bson::doc! { "n": 1 }).run().unwrap() {
            out.extend_from_slice(&chunk.unwrap().get_binary_generic("data").unwrap().clone());
        }
        out
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        use mongodb::bson::{doc, spec::BinarySubtype, Binary};
        let file = self.file(key);
        let id = file.get("_id").unwrap().clone();
        let chunk_bytes = file.get_i32("chunkSize").unwrap() as usize;
        self.chunks().delete_many(doc! { "files_id": id.clone() }).run().unwrap();
        let docs: Vec<_> = bytes
            .chunks(chunk_bytes)
            .enumerate()
            .map(|(n, data)| doc! { "files_id": id.clone(), "n": n as i32, "data": Binary { subtype: BinarySubtype::Generic, bytes: data.to_vec() } })
            .collect();
        self.chunks().insert_many(docs).run().unwrap();
        let files = self.db.collection::<mongodb::bson::Document>(&format!("{}.files", self.bucket));
        files.update_one(doc! { "_id": id }, doc! { "$set": { "length": bytes.len() as i64 } }).run().unwrap();
    }
}

/// Values inside pack data files, found by the pack format's own scan and overwritten in place.
struct PackRecords(PathBuf);

impl InPlace for PackRecords {
    /// The data file and the value's offset and length of `key`'s last record.
    fn locate(&self, key: &str) -> (std::fs::File, u64, u64) {
        use stowbench::pack::{record, scan};
        let mut found = None;
        for entry in std::fs::read_dir(&self.0).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "pack")) {
            let file = std::fs::OpenOptions::new().read(true).write(true).open(entry.path()).unwrap();
            let mut head = vec![0u8; record::FILE_HEADER_BYTES as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0).unwrap();
            let salt = record::FileHeader::decode(&head).unwrap().salt;
            let len = file.metadata().unwrap().len();
            let records = scan::scan(&file, salt, record::FILE_HEADER_BYTES, len).unwrap().records;
            if let Some(r) = records.iter().rev().find(|r| r.key == key) {
                found = Some((file.try_clone().unwrap(), r.header.value_offset(), r.header.value_len));
            }
        }
        found.unwrap_or_else(|| panic!("no pack record of {key}"))
    }
}

/// A container whose entries are overwritten in place, at the offset its format puts them.
trait InPlace {
    /// The container file and the offset and length of `key`'s bytes in it.
    fn locate(&self, key: &str) -> (std::fs::File, u64, u64);
    /// Whether this is the compound file, whose allocation tables may follow any stream.
    fn is_compound_file(&self) -> bool {
        false
    }
}

impl<T: InPlace> Store for T {
    fn read(&mut self, key: &str) -> Vec<u8> {
        let (file, at, len) = self.locate(key);
        let mut out = vec![0u8; len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut out, at).unwrap();
        out
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        let (file, at, len) = self.locate(key);
        assert_eq!(bytes.len() as u64, len, "a container entry is overwritten in place, same length");
        std::os::unix::fs::FileExt::write_all_at(&file, bytes, at).unwrap();
    }
    fn can_truncate(&self) -> bool {
        false
    }
    /// The cut also takes whatever follows the entry in the file: nothing for pack's last record,
    /// the central directory for zip's last entry (which the backend holds in memory while it
    /// runs). cfb interleaves its allocation tables with streams: not cut.
    fn cut_file_in(&mut self, key: &str, keep: u64) -> bool {
        let (file, at, _) = self.locate(key);
        if self.is_compound_file() {
            return false;
        }
        file.set_len(at + keep).unwrap();
        true
    }
}

/// Stored entries of the zip archive, found by its central directory and overwritten in place.
struct ZipEntries(PathBuf);

impl InPlace for ZipEntries {
    /// The archive and the offset and length of `key`'s entry data.
    fn locate(&self, key: &str) -> (std::fs::File, u64, u64) {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&self.0).unwrap();
        let mut archive = zip::ZipArchive::new(file.try_clone().unwrap()).unwrap();
        let entry = archive.by_name(&stowbench::backend::zip::entry_name(key)).unwrap();
        assert_eq!(entry.compression(), zip::CompressionMethod::Stored);
        // The data follows the 30-byte local header, its name and its extra field.
        let mut lengths = [0u8; 4];
        file.read_exact_at(&mut lengths, entry.header_start() + 26).unwrap();
        let skip = 30 + u16::from_le_bytes([lengths[0], lengths[1]]) as u64 + u16::from_le_bytes([lengths[2], lengths[3]]) as u64;
        (file, entry.header_start() + skip, entry.size())
    }
}

/// Streams of the compound file (the committed slot of each key), rewritten in place through
/// the cfb crate the backend uses, so the bytes land in the stream's own sectors.
struct CfbStreams(cfb::CompoundFile<std::fs::File>);

impl CfbStreams {
    fn current(&self, key: &str) -> String {
        let committed = |p: &String| self.0.entry(p).is_ok_and(|e| e.is_stream() && e.state_bits() != 0);
        stowbench::backend::cfb::slot_paths(key).into_iter().find(committed).unwrap_or_else(|| panic!("no committed stream of {key}"))
    }
}

impl Store for CfbStreams {
    fn read(&mut self, key: &str) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        self.0.open_stream(self.current(key)).unwrap().read_to_end(&mut out).unwrap();
        out
    }
    fn write(&mut self, key: &str, bytes: &[u8]) {
        use std::io::Write;
        // A shorter value shortens the stream in its directory entry (the backend reads the
        // directory again after the hook: Backend::reread_storage); no damage makes one longer.
        let mut stream = self.0.open_stream(self.current(key)).unwrap();
        assert!(bytes.len() as u64 <= stream.len(), "damage never lengthens a stream");
        stream.set_len(bytes.len() as u64).unwrap();
        stream.write_all(bytes).unwrap();
        stream.flush().unwrap();
    }
    fn can_truncate(&self) -> bool {
        true
    }
}
