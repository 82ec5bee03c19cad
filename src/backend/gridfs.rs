//! `gridfs`: objects as GridFS files (MongoDB wire protocol) through the official driver.
//!
//! The measured operations use the driver's async API on a runtime of this module's, so that
//! `operation_timeout` bounds a whole operation: the Rust driver has no socket time-out, and a
//! server that takes the connection but never answers (stopped, hung) would otherwise hold an
//! operation until the driver's monitor gives the server up, then retry it. Setup, cleanup and
//! the file server's catalog use the sync API.
//!
//! A put streams the body into an upload stream, which inserts `chunk_size` chunk documents as
//! they fill and the files document last, at close: until then readers see the previous
//! revision. Then older revisions of the same name are deleted (upload new, then delete old), so a
//! key never disappears during an overwrite. The current value of a key is its newest revision by
//! (uploadDate, _id); a get finds it and streams its chunks into the sink. The GridFS bucket is
//! named after the case's namespace and run, so cleanup drops only this case's two collections.
//!
//! On this machine the server is FerretDB on SQLite, a stand-in for MongoDB: its numbers are
//! FerretDB's, not MongoDB's (see docs/backends/gridfs.md).

use super::abandon::{Abandonable, Abandoned};
use super::options::{OptionDoc, Options};
use super::server::{self, Endpoint};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::{ByteSize, Nanos};
use futures_util::AsyncWriteExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::gridfs::{FilesCollectionDocument, GridFsBucket as AsyncBucket, GridFsUploadStream};
use mongodb::options::{ClientOptions, GridFsBucketOptions, WriteConcern};
use mongodb::sync::gridfs::GridFsBucket;
use mongodb::sync::{Client, Database};
use std::collections::BTreeMap;
use std::future::Future;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "gridfs",
    summary: "GridFS over the MongoDB wire protocol (MongoDB, or FerretDB as a stand-in)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: Some(SERVER),
};

/// How this backend finds its server (the shared endpoint block reads it).
const SERVER: super::registry::ServerKind = super::registry::ServerKind {
    uri_env: URI_ENV,
    // Not mongodb+srv://: the driver is built without DNS SRV lookups (see refuse_srv).
    schemes: &["mongodb://"],
    probe,
    default_port: 27017,
    pid_env: "STOWBENCH_MONGO_PID",
    data_env: "STOWBENCH_MONGO_DATA",
};

const URI_ENV: &str = "STOWBENCH_MONGO_URI";

const OPTIONS: &[OptionDoc] = crate::options_list!(&server::endpoint_docs(URI_ENV), server::ConnectTimeout::DOCS, GridFsOptions::DOCS);

crate::backend_options! {
    /// gridfs's own options (the endpoint block is shared by every server backend).
    struct GridFsOptions {
        database: Option<String>, "<URI's database> or stowbench" => "database holding the GridFS bucket",
        chunk_size: ByteSize = "255KiB" => "GridFS chunk size (bytes per chunk document; at most 15MiB)",
        journal: bool = false => "write concern j:true (each chunk and file document waits for the journal)",
        operation_timeout: Nanos = "0s" => "fail a put, get, head or delete running longer as a timeout (the workload's retries may retry it): the operation is abandoned at the deadline, its connection closed, and each query carries what is left as maxTimeMS; 0s: never",
    }
}

/// A chunk document must stay under MongoDB's 16 MiB document limit.
const CHUNK_MAX_BYTES: u64 = 15 << 20;

struct Shared {
    endpoint: Endpoint,
    connect_timeout: Nanos,
    /// 0: operations never time out.
    operation_timeout: Nanos,
    database: String,
    bucket: String,
    chunk_bytes: u32,
    journal: bool,
}

/// The gridfs backend for one case.
pub struct GridFsBackend {
    shared: Arc<Shared>,
    admin: Client,
    build_info: BTreeMap<String, String>,
    server_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    options: Options,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("gridfs", OPTIONS)?;
    let endpoint = server::endpoint(options, "gridfs", &SERVER)?;
    refuse_srv(&endpoint.uri).map_err(|why| options.bad("uri", why))?;
    if let Some(why) = server::authority_mistake(&endpoint.uri) {
        return Err(endpoint.unusable(options, why));
    }
    let own = GridFsOptions::read(options)?;
    if let Some(why) = own.database.as_deref().and_then(database_name_problem) {
        return Err(options.bad("database", why));
    }
    let chunk = own.chunk_size.0;
    if !(1024..=CHUNK_MAX_BYTES).contains(&chunk) {
        return Err(format!(
            "target \"{}\": option \"chunk_size\" is {chunk} bytes; use 1KiB to 15MiB (a chunk is one document, at most 16 MiB)",
            options.target
        ));
    }
    let mut shared = Shared {
        connect_timeout: server::ConnectTimeout::read(options)?.connect_timeout,
        operation_timeout: own.operation_timeout,
        database: String::new(),
        bucket: server::owned_name(ns),
        chunk_bytes: chunk as u32,
        journal: own.journal,
        endpoint,
    };
    let admin = shared.connect().map_err(|e| e.message)?;
    let from_uri = admin.default_database().map(|d| d.name().to_string());
    shared.database = own.database.clone().or(from_uri).unwrap_or_else(|| "stowbench".into());
    let build_info = read_build_info(&admin).map_err(|e| shared.connect_failure(e))?;
    let server_pid = shared.endpoint.server_pid(None)?;
    let data_dir = shared.endpoint.data_dir(None)?;
    Ok(Box::new(GridFsBackend { shared: Arc::new(shared), admin, build_info, server_pid, data_dir, options: options.clone() }))
}

/// Why MongoDB would refuse `name` as a database name (found before the run, which would
/// otherwise fail at its first request): empty, too long, or holding a character it forbids.
fn database_name_problem(name: &str) -> Option<String> {
    const FIX: &str = "name a database like \"stowbench\", or remove the line for the URI's database";
    if name.is_empty() {
        return Some(format!("is empty; {FIX}"));
    }
    if name.len() >= 64 {
        return Some(format!("\"{name}\" is {} bytes; MongoDB database names are shorter than 64 bytes", name.len()));
    }
    let forbidden = name.chars().find(|c| "/\\. \"$".contains(*c) || c.is_control());
    forbidden.map(|c| format!("\"{name}\" holds {c:?}, which MongoDB database names cannot; {FIX}"))
}

/// Server version facts from buildInfo (FerretDB adds its own version next to the MongoDB one it
/// emulates).
fn read_build_info(client: &Client) -> Result<BTreeMap<String, String>, mongodb::error::Error> {
    let info = client.database("admin").run_command(doc! { "buildInfo": 1 }).run()?;
    let mut out = BTreeMap::new();
    for key in ["version", "ferretdbVersion", "gitVersion"] {
        if let Ok(v) = info.get_str(key) {
            out.insert(key.to_string(), v.to_string());
        }
    }
    Ok(out)
}

/// A `mongodb+srv://` URI needs DNS SRV lookups, which the driver is built without here: said
/// plainly, with the fix, rather than as a driver's complaint about a missing feature.
fn refuse_srv(uri: &str) -> Result<(), String> {
    match uri.starts_with("mongodb+srv://") {
        true => Err("mongodb+srv:// needs DNS SRV lookups, which this build of stowbench lacks: give mongodb://host:port,... \
                     with the hosts the SRV record names"
            .into()),
        false => Ok(()),
    }
}

/// Probes a URI for `stowbench backends`: the server's version, or why it cannot be reached.
pub fn probe(uri: &str) -> Result<String, String> {
    let options = Options::new("probe", "", [("uri".to_string(), toml::Value::String(uri.into()))].into_iter().collect());
    let shared = Shared {
        endpoint: server::endpoint(&options, "gridfs", &SERVER)?,
        connect_timeout: server::PROBE_TIMEOUT,
        operation_timeout: Nanos(0),
        database: String::new(),
        bucket: String::new(),
        chunk_bytes: 0,
        journal: false,
    };
    let info = read_build_info(&shared.connect().map_err(|e| e.message)?).map_err(|e| shared.connect_failure(e))?;
    Ok(match info.get("ferretdbVersion") {
        Some(f) => format!("FerretDB {f} (MongoDB {} wire protocol; a stand-in, not MongoDB)", info.get("version").cloned().unwrap_or_default()),
        None => format!("MongoDB {}", info.get("version").cloned().unwrap_or_default()),
    })
}

impl Shared {
    /// A client for the backend's own work (setup, disk usage, cleanup, the catalog).
    fn connect(&self) -> BResult<Client> {
        let opts = self.client_options()?;
        Client::with_options(opts).map_err(|e| self.cannot_connect(&e.kind))
    }

    /// A client for one session's measured operations. The driver's own retries are off: a read
    /// or write it retried would be one operation to stowbench, its failure hidden as latency
    /// (a retried read waits up to connect_timeout for the server to be selected again), so a
    /// failure is counted and retried only as the workload says (as the s3 backend does).
    fn session_client(&self, driver: &Abandonable) -> BResult<mongodb::Client> {
        let mut opts = self.client_options()?;
        opts.retry_reads = Some(false);
        opts.retry_writes = Some(false);
        driver.client(opts).map_err(|e| self.cannot_connect(&e.kind))
    }

    fn client_options(&self) -> BResult<ClientOptions> {
        let mut opts = ClientOptions::parse(&self.endpoint.uri).run().map_err(|e| self.cannot_connect(&e.kind))?;
        let timeout = Duration::from_nanos(self.connect_timeout.0);
        opts.connect_timeout = Some(timeout);
        opts.server_selection_timeout = Some(timeout);
        opts.app_name = Some("stowbench".into());
        Ok(opts)
    }

    fn cannot_connect(&self, e: &dyn std::fmt::Display) -> BackendError {
        BackendError::new(ErrorKind::Connection, server::context("gridfs", &self.endpoint, &format!("cannot connect: {e}")))
    }

    fn bucket(&self, client: &Client) -> GridFsBucket {
        client.database(&self.database).gridfs_bucket(self.bucket_options())
    }

    fn bucket_options(&self) -> GridFsBucketOptions {
        let mut options = GridFsBucketOptions::builder().bucket_name(self.bucket.clone()).chunk_size_bytes(self.chunk_bytes).build();
        if self.journal {
            options.write_concern = Some(WriteConcern::builder().journal(true).build());
        }
        options
    }

    /// The deadline of an operation starting now.
    fn deadline(&self) -> Deadline {
        let limit = self.operation_timeout;
        Deadline { at: (limit.0 > 0).then(|| Instant::now() + Duration::from_nanos(limit.0)), limit }
    }

    fn database(&self, client: &Client) -> Database {
        client.database(&self.database)
    }

    fn error(&self, e: mongodb::error::Error) -> BackendError {
        use mongodb::error::{ErrorKind as M, GridFsErrorKind as G};
        let kind = match e.kind.as_ref() {
            M::GridFs(G::FileNotFound { .. }) => ErrorKind::NotFound,
            M::GridFs(G::MissingChunk { .. }) => ErrorKind::Conflict, // deleted by a concurrent overwrite
            M::GridFs(_) => ErrorKind::Corrupt,
            M::Io(_) | M::ServerSelection { .. } | M::ConnectionPoolCleared { .. } | M::DnsResolve { .. } => ErrorKind::Connection,
            M::Command(c) if c.code == 50 => ErrorKind::Timeout,
            M::Command(c) if c.code == 112 || c.code == 11000 => ErrorKind::Conflict,
            _ => ErrorKind::Other,
        };
        let why = match e.kind.as_ref() {
            // The driver's text dumps its whole view of the topology.
            M::ServerSelection { .. } => format!("no server answered within connect_timeout = {}", self.connect_timeout),
            kind => kind.to_string(),
        };
        BackendError::new(kind, format!("gridfs: {}", self.endpoint.secrets.scrub(&why)))
    }

    /// Why the first command after connecting failed, for construction and `backends`: the
    /// driver connects lazily, so this is where an absent server shows, as a server-selection
    /// timeout whose text dumps the topology. Said plainly instead: the callers add whether
    /// anything answers at the URI (`server::nothing_answers`).
    fn connect_failure(&self, e: mongodb::error::Error) -> String {
        let why = match e.kind.as_ref() {
            // Something that takes the TCP connection but never completes MongoDB's handshake (a
            // wrong port, a hung server) is the machine's trouble, said in the words the runner
            // knows (server::NO_ANSWER); with nothing listening, the runner says so itself.
            mongodb::error::ErrorKind::ServerSelection { .. } if server::nothing_answers(&self.endpoint.uri, SERVER.default_port).is_none() => {
                format!("something {} {} as a MongoDB server (connect_timeout)", server::NO_ANSWER, self.connect_timeout)
            }
            mongodb::error::ErrorKind::ServerSelection { .. } => format!("no server was selected within {}", self.connect_timeout),
            kind => kind.to_string(),
        };
        server::context("gridfs", &self.endpoint, &format!("cannot connect: {why}"))
    }
}

impl Backend for GridFsBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities { operation_deadline: true, ..Capabilities::default() }
    }

    fn describe(&self) -> BackendInfo {
        let s = &self.shared;
        let mut options = s.endpoint.report_options(&self.options);
        if let Some(map) = options.as_object_mut() {
            map.insert("database".into(), s.database.clone().into());
            map.insert("bucket".into(), s.bucket.clone().into());
            map.insert("chunk_size".into(), s.chunk_bytes.into());
            map.insert("journal".into(), s.journal.into());
            map.insert("operation_timeout".into(), s.operation_timeout.to_string().into());
        }
        let mut versions = BTreeMap::new();
        for (k, v) in &self.build_info {
            versions.insert(format!("server_{k}"), v.clone());
        }
        versions.insert("mongodb-crate".into(), server::locked_version("mongodb"));
        let mut durability = if s.journal {
            "every chunk and the files document acknowledged with write concern j:true (journaled)".to_string()
        } else {
            "every chunk and the files document acknowledged with the client's default write concern (w:1, no journal wait)".to_string()
        };
        // What the write concern asks is not what this server does: FerretDB's SQLite backend
        // syncs every write whether or not j:true is asked (strace: 101 fsyncs for 40 puts with
        // journal = false, 104 with true), so the option changes nothing there.
        if self.build_info.contains_key("ferretdbVersion") {
            durability += "; FerretDB (SQLite backend) syncs every write either way, so journal changes nothing on this server";
        }
        BackendInfo { backend: "gridfs".into(), versions, options, durability, data_paths: self.data_dir.iter().cloned().collect() }
    }

    fn prepare(&self) -> BResult<()> {
        let s = &self.shared;
        // The driver creates the GridFS indexes on a bucket's first upload; creating them here
        // keeps that cost out of the first measured put.
        let db = s.database(&self.admin);
        let indexes =
            [(format!("{}.files", s.bucket), doc! { "filename": 1, "uploadDate": 1 }), (format!("{}.chunks", s.bucket), doc! { "files_id": 1, "n": 1 })];
        for (i, (collection, keys)) in indexes.into_iter().enumerate() {
            let unique = i == 1;
            let spec = doc! { "createIndexes": collection, "indexes": [ { "key": keys, "name": if unique { "files_id_1_n_1" } else { "filename_1_uploadDate_1" }, "unique": unique } ] };
            db.run_command(spec).run().map_err(|e| s.error(e))?;
        }
        Ok(())
    }

    /// The file server's catalog lives in the same database, beside the bucket.
    fn open_catalog(&self, _worker: usize, _beside: &std::path::Path) -> BResult<Box<dyn super::catalog::Catalog>> {
        let s = self.shared.clone();
        // Its operations are measured with the store's, so it runs as a session does.
        let driver = Abandonable::new()?;
        let db = s.session_client(&driver)?.database(&s.database);
        let write_concern = s.journal.then(|| WriteConcern::builder().journal(true).build());
        let bucket = s.bucket.clone();
        let error = Box::new(move |e| s.error(e));
        Ok(Box::new(super::catalog::mongo::MongoCatalog::new(&db, &bucket, write_concern, error, driver)))
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        let s = &self.shared;
        let driver = Abandonable::new()?;
        let client = s.session_client(&driver)?;
        let bucket = client.database(&s.database).gridfs_bucket(s.bucket_options());
        Ok(Box::new(GridFsSession { client, bucket, driver, buffer: vec![0; super::COPY_BUFFER_BYTES], shared: s.clone() }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        let s = &self.shared;
        let db = s.database(&self.admin);
        let mut reported = 0u64;
        let mut wired_tiger_files = Vec::new();
        let collections = ["files", "chunks"].map(|suffix| format!("{}.{suffix}", s.bucket));
        for collection in &collections {
            let stats = db.run_command(doc! { "collStats": collection }).run().map_err(|e| s.error(e))?;
            reported += number(&stats, "storageSize") + number(&stats, "totalIndexSize");
            if let (Some(dir), Ok(uri)) = (&self.data_dir, stats.get_document("wiredTiger").and_then(|w| w.get_str("uri"))) {
                if let Some(table) = uri.strip_prefix("statistics:table:") {
                    wired_tiger_files.push(dir.join(format!("{table}.wt")));
                }
            }
        }
        let mut usage = match &self.data_dir {
            Some(_) if !wired_tiger_files.is_empty() => server::usage_of_files(&wired_tiger_files),
            // FerretDB/SQLite keeps a whole database in one file: count our collections' pages in
            // it, or the whole database (with its WAL) where that file cannot be read so.
            Some(dir) => {
                let files = ["sqlite", "sqlite-wal", "sqlite-shm"].map(|ext| dir.join(format!("{}.{ext}", s.database)));
                ferretdb_sqlite_usage(&files[0], &collections).unwrap_or_else(|| server::usage_of_files(&files))
            }
            None => DiskUsage { allocated_unknown: true, ..DiskUsage::default() },
        };
        usage.server_reported_bytes = Some(reported);
        Ok(usage)
    }

    fn cleanup(&self) -> BResult<()> {
        let s = &self.shared;
        s.bucket(&self.admin).drop().run().map_err(|e| s.error(e))?;
        super::catalog::mongo::MongoCatalog::drop_collections(&s.database(&self.admin), &s.bucket).map_err(|e| s.error(e))
    }

    fn server_objects(&self) -> BResult<Vec<String>> {
        server_objects(&self.shared, &self.admin)
    }

    fn server_pids(&self) -> Vec<u32> {
        self.server_pid.into_iter().collect()
    }

    fn script_service(&self) -> Option<&super::restart::ScriptService> {
        self.shared.endpoint.script.as_ref()
    }
}

/// What `cleanup` removes, as it is now: the bucket's files and chunks collections and the file
/// catalog's collections, with their document counts. Reads only.
fn server_objects(s: &Shared, client: &Client) -> BResult<Vec<String>> {
    let db = s.database(client);
    let (files, names) = super::catalog::mongo::collection_names(&s.bucket);
    let ours = [format!("{}.files", s.bucket), format!("{}.chunks", s.bucket), files, names];
    let existing = db.list_collection_names().run().map_err(|e| s.error(e))?;
    let mut out = Vec::new();
    for name in ours.iter().filter(|n| existing.contains(n)) {
        let count = db.collection::<Document>(name).count_documents(doc! {}).run().map_err(|e| s.error(e))?;
        out.push(format!("gridfs collection {}.{name} ({count} documents)", s.database));
    }
    Ok(out)
}

/// A numeric field of a command reply, whatever BSON number type the server chose.
fn number(doc: &Document, key: &str) -> u64 {
    match doc.get(key) {
        Some(Bson::Int32(v)) => *v as u64,
        Some(Bson::Int64(v)) => *v as u64,
        Some(Bson::Double(v)) => *v as u64,
        _ => 0,
    }
}

/// Our part of a FerretDB/SQLite database file: the pages of our collections' tables and their
/// indexes, as SQLite's `dbstat` counts them in the database as it is now (its WAL included).
/// The file itself also holds the database's other collections and the free pages that dropped
/// collections left (earlier cases': it never shrinks), so counted whole it is only an upper
/// bound. FerretDB names each collection's table in its `_ferretdb_collections`. `None` when the
/// file cannot be read so (another server's layout, no permission): the caller counts the files.
fn ferretdb_sqlite_usage(path: &std::path::Path, collections: &[String; 2]) -> Option<DiskUsage> {
    use rusqlite::{Connection, OpenFlags};
    // Read-only, and only for as long as one query: FerretDB's writers are not held up (WAL).
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).ok()?;
    let (found, bytes): (i64, i64) = conn
        .query_row(
            "WITH ours AS (SELECT table_name FROM _ferretdb_collections WHERE name IN (?1, ?2)) \
             SELECT (SELECT count(*) FROM ours), coalesce(sum(pgsize), 0) FROM dbstat \
             WHERE name IN (SELECT name FROM sqlite_schema WHERE tbl_name IN (SELECT table_name FROM ours))",
            [&collections[0], &collections[1]],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .ok()?;
    // Both collections named there, or this is not the layout this reads (a bucket not written to
    // yet has neither: nothing of ours is in the file, but 0 would hide a misreading).
    if found != 2 {
        return None;
    }
    let bytes = u64::try_from(bytes).ok()?;
    Some(DiskUsage { allocated_bytes: bytes, apparent_bytes: bytes, files: 1, ..DiskUsage::default() })
}

struct GridFsSession {
    /// The connection pool the bucket and the chunk reads use.
    client: mongodb::Client,
    bucket: AsyncBucket,
    /// Runs the operations, so that the runner's watchdog can abandon one (`cut_handle`).
    driver: Abandonable,
    /// The put's copy buffer, kept between puts.
    buffer: Vec<u8>,
    shared: Arc<Shared>,
}

/// Newest revision first: the one a get returns and the order overwrites delete in.
fn newest_first() -> Document {
    doc! { "uploadDate": -1, "_id": -1 }
}

/// When the current operation must have ended (`operation_timeout`); `at` is None: never.
/// The session abandons the operation there (`GridFsSession::bounded`); each query also carries
/// what is left of it as maxTimeMS, so the server stops working on it too.
struct Deadline {
    at: Option<Instant>,
    limit: Nanos,
}

impl Deadline {
    /// A time-out error once the deadline has passed. Checked where the operation runs our own
    /// code (reading the body, writing the sink), which the runtime cannot interrupt.
    fn check(&self) -> BResult<()> {
        match self.at {
            Some(at) if Instant::now() >= at => Err(self.expired()),
            _ => Ok(()),
        }
    }

    fn expired(&self) -> BackendError {
        BackendError::new(ErrorKind::Timeout, format!("gridfs: the operation ran longer than operation_timeout = {}", self.limit))
    }

    /// What is left, for a query's maxTimeMS (at least 1 ms: 0 would mean "no limit").
    fn left(&self) -> Option<Duration> {
        self.at.map(|at| at.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))
    }
}

impl GridFsSession {
    /// Runs `operation` on this thread until it ends, its deadline passes (then it fails as a
    /// time-out) or the watchdog abandons it.
    fn run<T>(&self, deadline: &Deadline, operation: impl Future<Output = BResult<T>>) -> Result<BResult<T>, Abandoned> {
        self.driver.run_within(deadline.left(), || deadline.expired(), operation)
    }

    /// `run`, an abandoned operation failing as a time-out.
    fn bounded<T>(&self, deadline: &Deadline, operation: impl Future<Output = BResult<T>>) -> BResult<T> {
        self.run(deadline, operation).unwrap_or_else(|Abandoned| Err(Abandoned::error("gridfs")))
    }

    /// The current (newest) revision of `key`.
    async fn current(&self, key: &str, deadline: &Deadline) -> BResult<FilesCollectionDocument> {
        let s = &self.shared;
        let mut find = self.bucket.find_one(doc! { "filename": key }).sort(newest_first());
        if let Some(left) = deadline.left() {
            find = find.max_time(left);
        }
        let found = find.await.map_err(|e| s.error(e))?;
        found.ok_or_else(|| BackendError::not_found(key))
    }

    /// Deletes the revisions of `key` older than `mine` (never a newer one a concurrent writer made).
    async fn delete_older(&self, key: &str, mine: &Bson, deadline: &Deadline) -> BResult<()> {
        let s = &self.shared;
        let mut find = self.bucket.find_one(doc! { "_id": mine.clone() });
        if let Some(left) = deadline.left() {
            find = find.max_time(left);
        }
        let me = find.await.map_err(|e| s.error(e))?;
        let Some(me) = me else { return Ok(()) }; // a newer writer already replaced it
        let date = me.upload_date;
        let older = doc! { "filename": key, "$or": [ { "uploadDate": { "$lt": date } }, { "uploadDate": date, "_id": { "$lt": mine.clone() } } ] };
        let mut find = self.bucket.find(older);
        if let Some(left) = deadline.left() {
            find = find.max_time(left);
        }
        let mut cursor = find.await.map_err(|e| s.error(e))?;
        while cursor.advance().await.map_err(|e| s.error(e))? {
            let file = cursor.deserialize_current().map_err(|e| s.error(e))?;
            match self.bucket.delete(file.id).await {
                Err(e) if matches!(e.kind.as_ref(), mongodb::error::ErrorKind::GridFs(mongodb::error::GridFsErrorKind::FileNotFound { .. })) => {}
                other => other.map_err(|e| s.error(e))?,
            }
        }
        Ok(())
    }
}

/// Streams `len` bytes of `body` into `upload` (which inserts a chunk document as each fills).
async fn upload_body(upload: &mut GridFsUploadStream, body: &mut dyn Read, len: u64, buffer: &mut [u8], deadline: &Deadline) -> BResult<()> {
    let mut left = len;
    while left > 0 {
        deadline.check()?;
        let want = buffer.len().min(left as usize);
        let n = body.read(&mut buffer[..want])?;
        if n == 0 {
            return Err(BackendError::new(ErrorKind::Io, format!("body ended {left} bytes early")));
        }
        upload.write_all(&buffer[..n]).await?;
        left -= n as u64;
    }
    Ok(())
}

/// A numeric field of a chunk as the server sent it (read in place: the chunk's data is not
/// copied out of the reply), whatever BSON number type the server chose.
fn raw_number(doc: &mongodb::bson::RawDocument, key: &str) -> Option<u64> {
    let value = doc.get(key).ok()??;
    value.as_i64().or_else(|| value.as_i32().map(i64::from)).or_else(|| value.as_f64().map(|f| f as i64)).and_then(|v| u64::try_from(v).ok())
}

/// Bytes of chunks one reply may carry. The driver's own download stream leaves the batch size
/// to the server, and FerretDB then answers with one reply larger than the driver accepts
/// (48 MB) for big files; chunks are therefore read with an explicit batch size.
const BATCH_BYTES: u64 = 8 << 20;

impl GridFsSession {
    /// Streams the chunks of `file` into `sink`, checking order and sizes as the spec requires.
    async fn download(&self, file: &FilesCollectionDocument, sink: &mut dyn Write, deadline: &Deadline) -> BResult<()> {
        let s = &self.shared;
        let chunks = self.client.database(&s.database).collection::<Document>(&format!("{}.chunks", s.bucket));
        let size = u64::from(file.chunk_size_bytes.max(1));
        let count = file.length.div_ceil(size);
        let batch = (BATCH_BYTES / size).clamp(1, 10_000) as u32;
        let mut find = chunks.find(doc! { "files_id": file.id.clone() }).sort(doc! { "n": 1 }).batch_size(batch);
        if let Some(left) = deadline.left() {
            find = find.max_time(left);
        }
        let mut cursor = find.await.map_err(|e| s.error(e))?;
        let mut n = 0u64;
        while cursor.advance().await.map_err(|e| s.error(e))? {
            deadline.check()?;
            let chunk = cursor.current();
            let data = match chunk.get_binary("data") {
                Ok(b) => b.bytes,
                Err(_) => return Err(BackendError::new(ErrorKind::Corrupt, format!("gridfs: chunk {n} of {:?} has no binary data", file.filename))),
            };
            let want = size.min(file.length.saturating_sub(n * size));
            if n >= count || raw_number(chunk, "n") != Some(n) || data.len() as u64 != want {
                return Err(BackendError::new(
                    ErrorKind::Corrupt,
                    format!("gridfs: chunk {n} of {:?} is out of order, extra or {} bytes instead of {want}", file.filename, data.len()),
                ));
            }
            sink.write_all(data)?;
            n += 1;
        }
        if n < count {
            // The revision's chunks vanished mid-read: a concurrent overwrite deleted it.
            return Err(BackendError::new(ErrorKind::Conflict, format!("gridfs: chunk {n} of {:?} is missing (deleted by an overwrite?)", file.filename)));
        }
        Ok(())
    }
}

impl Session for GridFsSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let s = self.shared.clone();
        let deadline = s.deadline();
        let mut upload = self.bounded(&deadline, async { self.bucket.open_upload_stream(key).await.map_err(|e| s.error(e)) })?;
        let mut buffer = std::mem::take(&mut self.buffer);
        let written = self.run(&deadline, async {
            upload_body(&mut upload, body, len, &mut buffer, &deadline).await?;
            upload.close().await.map_err(BackendError::from)
        });
        self.buffer = buffer;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // Removes the chunks written so far (no files document exists yet), within a
                // deadline of its own: what a server that stopped answering keeps is left to
                // the case's cleanup, which drops the bucket.
                let id = upload.id().clone();
                let _ = self.bounded(&s.deadline(), async {
                    // A chunk write the deadline cut short is still held by the stream: it is
                    // finished first (writing nothing more), else the server could store it
                    // after the removal below.
                    let _ = upload.write(&[]).await;
                    match upload.abort().await {
                        Ok(()) => Ok(()),
                        // A failed write closed the stream, which then removes nothing itself.
                        Err(_) => {
                            let chunks = self.client.database(&s.database).collection::<Document>(&format!("{}.chunks", s.bucket));
                            chunks.delete_many(doc! { "files_id": id }).await.map(|_| ()).map_err(|e| s.error(e))
                        }
                    }
                });
                return Err(e);
            }
            // The watchdog is waiting for this worker: the stream, dropped unclosed, has the
            // driver remove its chunks in the background.
            Err(Abandoned) => {
                drop(upload);
                return Err(Abandoned::error("gridfs"));
            }
        }
        let mine = upload.id().clone();
        self.bounded(&deadline, self.delete_older(key, &mine, &deadline))
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let deadline = self.shared.deadline();
        self.bounded(&deadline, async {
            let file = self.current(key, &deadline).await?;
            self.download(&file, sink, &deadline).await?;
            Ok(file.length)
        })
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        let s = self.shared.clone();
        self.bounded(&s.deadline(), async { self.bucket.delete_by_name(key).await.map_err(|e| s.error(e)) })
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let deadline = self.shared.deadline();
        self.bounded(&deadline, async { Ok(self.current(key, &deadline).await?.length) })
    }

    /// Abandons the operation in flight rather than cutting sockets: the driver pools its
    /// connections, so a socket cut would reach every session's (`abandon`).
    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        Some(self.driver.cut_handle())
    }
}
