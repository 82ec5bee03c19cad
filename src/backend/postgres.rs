//! `postgres`: objects in PostgreSQL, stored one of three ways (option `mode`):
//!
//! - `bytea`: one row per object in a `bytea` column, written with `COPY ... FROM STDIN (FORMAT
//!   binary)`, so the body streams to the server; read whole when it is at most `chunk_size`,
//!   else in `substring` slices inside one snapshot, so client memory stays at one slice. The
//!   column's storage is EXTERNAL by default (TOASTed, not compressed) so random payloads are not
//!   run through pglz for nothing.
//! - `lo`: the bytes in a large object written and read in `chunk_size` pieces (`lowrite`,
//!   `loread`) inside one transaction; the row holds its oid. Overwrite and delete unlink the old
//!   large object in the same transaction, so none is ever orphaned.
//! - `file`: the row holds key and size, the bytes live in a file beside it under the namespace
//!   directory (written atomically like `fs`) — the FILESTREAM shape of experiment E1.
//!
//! With `partitions`/`tablespaces` the table is hash-partitioned on its key and its partitions
//! spread over tablespaces made for the case (see `layout`); with `wait_sample` the sessions'
//! lock waits inside the server are sampled (see `waits`).
//!
//! Tables are named after the case's namespace and run (`server::owned_name`), so cleanup drops
//! only this case's tables, tablespaces and large objects. Writers of one key are serialized by a transaction
//! advisory lock so an overwrite never collides with another; readers see one committed value.

mod layout;
mod waits;

use self::layout::Layout;
use self::waits::WaitSampler;
use super::options::{OptionDoc, Options};
use super::server::{self, Endpoint};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::{ByteSize, Nanos};
use postgres::types::Oid;
use postgres::{Client, IsolationLevel, NoTls};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "postgres",
    summary: "PostgreSQL: bytea column streamed with COPY, large objects, or row + file (option mode)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: Some(SERVER),
};

/// How this backend finds its server (the shared endpoint block reads it).
const SERVER: super::registry::ServerKind = super::registry::ServerKind {
    uri_env: URI_ENV,
    schemes: &["postgres://", "postgresql://"],
    probe,
    default_port: 5432,
    pid_env: "STOWBENCH_PG_PID",
    data_env: "STOWBENCH_PG_DATA",
};

const URI_ENV: &str = "STOWBENCH_PG_URI";

const OPTIONS: &[OptionDoc] = crate::options_list!(
    &server::endpoint_docs(URI_ENV),
    server::ConnectTimeout::DOCS,
    PgOptions::DOCS,
    super::namespace::DataPath::DOCS,
    super::row_file::DirectOption::DOCS,
    layout::LayoutOptions::DOCS
);

crate::option_choice! {
    /// bytea column storage.
    enum Storage { External = "external", Default = "default" }
}

crate::backend_options! {
    /// postgres's own options (endpoint, file mode's path and direct, and the layout are shared blocks).
    struct PgOptions {
        mode: Mode = "bytea" => "bytea (row column), lo (large object), file (row + file beside it)",
        storage: Storage = "external" => "bytea column storage: external (uncompressed TOAST) or default (the server's, compresses)",
        chunk_size: ByteSize = "1MiB" => "bytes per lowrite/loread call (lo) and per substring slice of larger bytea reads",
        fsync: bool = true => "file mode: fsync each file and its directory (as durable as the committed row)",
        statement_timeout: Nanos = "0s" => "abort any statement running longer (the server's statement_timeout, set per connection; a timeout error the workload's retries may retry); 0s: never",
        wait_sample: Nanos = "0s" => "sample the sessions' server wait events this often (e.g. 10ms) and report time seen waiting on Lock/LWLock events as writer wait (an estimate, one interval resolution); 0s: off",
    }
}

/// bytea values are capped at 1 GB by PostgreSQL, and the server builds each value whole in memory
/// on COPY: refuse anything within 1 MB of that, before any data is written.
const BYTEA_MAX_BYTES: u64 = 999_000_000;
/// Large objects are capped at 4 TB by PostgreSQL.
const LO_MAX_BYTES: u64 = 4 * (1 << 40);
/// lo_open modes from libpq-fs.h.
const INV_WRITE: i32 = 0x20000;
const INV_READ: i32 = 0x40000;
/// Signature, flags and header-extension length of COPY's binary format (for puts).
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

crate::option_choice! {
    /// Where a value lives: a bytea column, a large object, or a file the row points at.
    enum Mode { Bytea = "bytea", Lo = "lo", File = "file" }
}

/// What sessions share: how to connect and where the data goes.
struct Shared {
    endpoint: Endpoint,
    connect_timeout: Nanos,
    /// Zero: statements never time out.
    statement_timeout: Nanos,
    mode: Mode,
    /// The table's name, quoted.
    table: String,
    /// Partitions and tablespaces of the table.
    layout: Layout,
    lock_class: i32,
    chunk_bytes: usize,
    /// File mode: how content files are written and read.
    file_mode: super::fs::WriteMode,
    files_root: PathBuf,
    max_bytes: Option<u64>,
}

/// The postgres backend for one case.
pub struct PgBackend {
    shared: Arc<Shared>,
    /// Where file mode's content files live (the run's namespace, or `path`'s per-run directory).
    files: super::namespace::DataNamespace,
    external_storage: bool,
    server_version: String,
    settings: BTreeMap<String, String>,
    server_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    /// Samples the sessions' lock waits (option `wait_sample`; None when off).
    waits: Option<WaitSampler>,
    options: Options,
    /// The comment that marks our table as ours (`server::owner_note`).
    owner: String,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("postgres", OPTIONS)?;
    let endpoint = server::endpoint(options, "postgres", &SERVER)?;
    driver_config(&endpoint).map_err(|why| endpoint.unusable(options, why))?;
    let own = PgOptions::read(options)?;
    let mode = own.mode;
    if Layout::check(options)? > 0 && mode == Mode::Lo {
        return Err(format!(
            "target \"{}\": options \"partitions\"/\"tablespaces\" need mode = \"bytea\" or \"file\": large objects live in \
             pg_largeobject, which cannot be partitioned or moved to a tablespace",
            options.target
        ));
    }
    let external_storage = own.storage == Storage::External;
    let chunk = own.chunk_size.0;
    if !(8192..=(256 << 20)).contains(&chunk) {
        return Err(format!("target \"{}\": option \"chunk_size\" is {chunk} bytes; use 8KiB to 256MiB", options.target));
    }
    // File mode's content files: the one per-run namespace mechanism (`namespace::DataNamespace`).
    let files = super::namespace::DataNamespace::new(options, ns)?;
    // Quoted: the name may start with a digit. The mode is in the name, so no two layouts share one.
    let table = format!("\"{}_{}\"", server::owned_name(ns), format!("{mode:?}").to_lowercase());
    let wait_sample_ns = own.wait_sample.0;
    if wait_sample_ns != 0 && wait_sample_ns < waits::MIN_INTERVAL_NS {
        return Err(format!("target \"{}\": option \"wait_sample\" is {wait_sample_ns} ns; use 1ms or more (or 0s for off)", options.target));
    }
    let files_root = files.ns.dir.join("pgfiles");
    let file_mode = match mode {
        Mode::File => super::row_file::content_mode(options, own.fsync, &files_root)?,
        _ if options.table.contains_key("direct") => {
            return Err(format!("target \"{}\": option \"direct\" applies only to mode = \"file\"; set mode = \"file\" or remove it", options.target))
        }
        _ => super::fs::WriteMode { fsync: own.fsync, fsync_dirs: own.fsync, direct: false },
    };
    let mut shared = Shared {
        connect_timeout: server::ConnectTimeout::read(options)?.connect_timeout,
        statement_timeout: own.statement_timeout,
        mode,
        lock_class: crate::hash::xxh3_64(table.as_bytes()) as i32,
        table,
        layout: Layout::default(), // needs the server's data directory: read below
        chunk_bytes: chunk as usize,
        file_mode,
        files_root,
        max_bytes: match mode {
            Mode::Bytea => Some(BYTEA_MAX_BYTES),
            Mode::Lo => Some(LO_MAX_BYTES),
            Mode::File => None,
        },
        endpoint,
    };
    let mut client = shared.connect().map_err(|e| e.message)?;
    let (server_version, settings) = read_settings(&mut client).map_err(|e| server::context("postgres", &shared.endpoint, &e.to_string()))?;
    let pidfile = settings.get("data_directory").and_then(|d| std::fs::read_to_string(PathBuf::from(d).join("postmaster.pid")).ok());
    let postmaster = pidfile.and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()));
    let server_pid = shared.endpoint.server_pid(postmaster)?;
    let data_dir = shared.endpoint.data_dir(settings.get("data_directory").cloned())?;
    shared.layout = Layout::from_options(options, ns, &server::owned_name(ns), data_dir.as_deref())?;
    let waits = (wait_sample_ns > 0).then(|| WaitSampler::new(wait_sample_ns));
    Ok(Box::new(PgBackend {
        shared: Arc::new(shared),
        files,
        external_storage,
        server_version,
        settings,
        server_pid,
        data_dir,
        waits,
        options: options.clone(),
        owner: server::owner_note(ns),
    }))
}

/// The server's version and the settings that decide durability (read, never changed).
fn read_settings(client: &mut Client) -> Result<(String, BTreeMap<String, String>), postgres::Error> {
    let version: String = client.query_one("SHOW server_version", &[])?.get(0);
    let rows = client.query(
        "SELECT name, current_setting(name) FROM pg_settings WHERE name IN \
         ('synchronous_commit', 'fsync', 'full_page_writes', 'wal_sync_method', 'data_directory', 'shared_buffers', 'default_toast_compression')",
        &[],
    )?;
    Ok((version, rows.iter().map(|r| (r.get(0), r.get(1))).collect()))
}

/// Probes a URI for `stowbench backends`: the server's version, or why it cannot be reached.
pub fn probe(uri: &str) -> Result<String, String> {
    let options = Options::new("probe", "", [("uri".to_string(), toml::Value::String(uri.into()))].into_iter().collect());
    let endpoint = server::endpoint(&options, "postgres", &SERVER)?;
    let shared = Shared {
        endpoint,
        connect_timeout: server::PROBE_TIMEOUT,
        statement_timeout: Nanos(0),
        mode: Mode::Bytea,
        table: String::new(),
        layout: Layout::default(),
        lock_class: 0,
        chunk_bytes: 0,
        file_mode: super::fs::WriteMode::default(),
        files_root: PathBuf::new(),
        max_bytes: None,
    };
    let mut client = shared.connect().map_err(|e| e.message)?;
    let (version, _) = read_settings(&mut client).map_err(|e| shared.endpoint.secrets.scrub(&e.to_string()))?;
    Ok(format!("PostgreSQL {version}"))
}

/// The driver's configuration from the endpoint's URI, or why the driver cannot use it, found
/// without connecting.
fn driver_config(endpoint: &Endpoint) -> Result<postgres::Config, String> {
    if let Some(why) = server::authority_mistake(&endpoint.uri) {
        return Err(why);
    }
    let config: postgres::Config = endpoint.uri.parse().map_err(|e| endpoint.secrets.scrub(&server::chain(&e)))?;
    // libpq would take an empty host as its local socket; this driver has no such default.
    if config.get_hosts().is_empty() {
        return Err("it names no host; give postgres://user@HOST:5432/db, or add ?host=/var/run/postgresql for a local socket".into());
    }
    Ok(config)
}

impl Shared {
    fn connect(&self) -> BResult<Client> {
        let fail =
            |e: &dyn std::fmt::Display| BackendError::new(ErrorKind::Connection, server::context("postgres", &self.endpoint, &format!("cannot connect: {e}")));
        let mut config = driver_config(&self.endpoint).map_err(|why| {
            BackendError::new(ErrorKind::Connection, server::context("postgres", &self.endpoint, &format!("the URI {}: {why}", server::UNUSABLE_URI)))
        })?;
        let timeout = std::time::Duration::from_nanos(self.connect_timeout.0);
        config.connect_timeout(timeout).application_name("stowbench");
        let outcome = server::within_connect_timeout("postgres", &self.endpoint, timeout, move || Ok(config.connect(NoTls)))?;
        outcome.map_err(|e| fail(&server::chain(&e)))
    }

    /// A worker's connection (a session's or the file catalog's): every statement it runs is
    /// bounded by `statement_timeout`; the server cancels with 57014, counted as a timeout. Set-up
    /// and cleanup connections are not bounded: a short limit must not stop a case from starting
    /// or from removing its data.
    fn connect_worker(&self) -> BResult<Client> {
        let mut client = self.connect()?;
        if self.statement_timeout.0 > 0 {
            let ms = self.statement_timeout.0.div_ceil(1_000_000);
            client.batch_execute(&format!("SET statement_timeout = {ms}")).map_err(|e| self.error(e))?;
        }
        Ok(client)
    }

    /// The server's TCP port (the URI's, else PostgreSQL's default).
    fn port(&self) -> u16 {
        self.endpoint.port()
    }

    /// Maps a driver error to a kind, with secrets scrubbed from its message.
    fn error(&self, e: postgres::Error) -> BackendError {
        use postgres::error::SqlState;
        let kind = match e.code() {
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::LOCK_NOT_AVAILABLE => {
                ErrorKind::Conflict
            }
            Some(c) if *c == SqlState::QUERY_CANCELED => ErrorKind::Timeout,
            Some(c) if *c == SqlState::PROGRAM_LIMIT_EXCEEDED || *c == SqlState::OUT_OF_MEMORY => ErrorKind::TooLarge,
            Some(c) if c.code().starts_with("53") || c.code().starts_with("58") => ErrorKind::Io,
            Some(_) => ErrorKind::Other,
            None if e.is_closed() => ErrorKind::Connection,
            None => ErrorKind::Connection,
        };
        let text = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => server::chain(&e),
        };
        BackendError::new(kind, format!("postgres: {}", self.endpoint.secrets.scrub(&text)))
    }

    /// Refuses a put above the declared limit before reading any of its body.
    fn check_size(&self, len: u64) -> BResult<()> {
        match self.max_bytes {
            Some(max) if len > max => {
                Err(BackendError::new(ErrorKind::TooLarge, format!("postgres {:?} mode stores at most {max} bytes per object; this one has {len}", self.mode)))
            }
            _ => Ok(()),
        }
    }
}

impl Backend for PgBackend {
    fn capabilities(&self) -> Capabilities {
        let (max, hint) = match self.shared.mode {
            Mode::Bytea => (
                BYTEA_MAX_BYTES,
                "PostgreSQL caps a bytea value at 1 GB and the server holds each value whole in memory while copying it; \
                 stowbench refuses more than 999,000,000 bytes. Use mode = \"lo\" (large objects, up to 4 TB) or mode = \"file\"",
            ),
            Mode::Lo => (LO_MAX_BYTES, "PostgreSQL caps a large object at 4 TB; use mode = \"file\""),
            Mode::File => (u64::MAX, ""),
        };
        Capabilities {
            max_object_bytes: (max != u64::MAX).then_some(max),
            max_object_hint: (!hint.is_empty()).then(|| hint.to_string()),
            operation_deadline: true,
            ..Capabilities::default()
        }
    }

    fn describe(&self) -> BackendInfo {
        let s = &self.shared;
        let mut options = s.endpoint.report_options(&self.options);
        if let Some(map) = options.as_object_mut() {
            map.insert("mode".into(), format!("{:?}", s.mode).to_lowercase().into());
            map.insert("table".into(), s.table.clone().into());
            if s.mode == Mode::Bytea {
                map.insert("storage".into(), if self.external_storage { "external" } else { "default" }.into());
            }
            if s.mode != Mode::File {
                map.insert("chunk_size".into(), s.chunk_bytes.into());
            }
            if s.mode == Mode::File {
                map.insert("fsync".into(), s.file_mode.fsync.into());
                map.insert("direct".into(), s.file_mode.direct.into());
            }
            for (k, v) in &self.settings {
                map.insert(format!("server_{k}"), v.clone().into());
            }
            s.layout.record(map);
            let sample = self.waits.as_ref().map(|w| format!("{}ms", w.interval_ms())).unwrap_or_else(|| "0s".into());
            map.insert("wait_sample".into(), sample.into());
        }
        let mut versions = BTreeMap::new();
        versions.insert("postgresql".into(), self.server_version.clone());
        versions.insert("postgres-crate".into(), server::locked_version("postgres"));
        let sync = self.settings.get("synchronous_commit").map(String::as_str).unwrap_or("?");
        let fsync = self.settings.get("fsync").map(String::as_str).unwrap_or("?");
        let mut durability = format!("commit of one transaction per put; server synchronous_commit = {sync}, fsync = {fsync}");
        if s.mode == Mode::File {
            durability += if s.file_mode.fsync {
                "; content file fsynced with its directory before the row commits"
            } else {
                "; content file NOT fsynced (page cache only)"
            };
        }
        let mut data_paths: Vec<PathBuf> = self.data_dir.iter().cloned().collect();
        if s.mode == Mode::File {
            data_paths.insert(0, s.files_root.clone());
        }
        // The first path names the filesystem in the report: the tablespaces' when there are any.
        for (i, dir) in s.layout.dirs().into_iter().enumerate() {
            data_paths.insert(i, dir);
        }
        BackendInfo { backend: "postgres".into(), versions, options, durability, data_paths }
    }

    fn prepare(&self) -> BResult<()> {
        let s = &self.shared;
        let mut client = s.connect()?;
        let columns = match s.mode {
            Mode::Bytea => "key bytea PRIMARY KEY, data bytea NOT NULL",
            Mode::Lo => "key bytea PRIMARY KEY, loid oid NOT NULL, size_bytes bigint NOT NULL",
            Mode::File => "key bytea PRIMARY KEY, size_bytes bigint NOT NULL",
        };
        let fail = |e| s.error(e);
        check_owner(&mut client, s, &self.owner)?;
        // One simple query, so one transaction: the table never exists without its ownership note.
        let create = format!("CREATE TABLE IF NOT EXISTS {} ({columns}){};", s.table, s.layout.partition_clause());
        client.batch_execute(&format!("{create} COMMENT ON TABLE {} IS '{}';", s.table, self.owner)).map_err(fail)?;
        s.layout.create(&mut client, &s.table, s.table.trim_matches('"'), &fail)?;
        if s.mode == Mode::Bytea && self.external_storage {
            // After the partitions exist: on a partitioned table it reaches every partition.
            client.batch_execute(&format!("ALTER TABLE {} ALTER COLUMN data SET STORAGE EXTERNAL;", s.table)).map_err(fail)?;
        }
        if s.mode == Mode::File {
            std::fs::create_dir_all(&s.files_root)?;
        }
        Ok(())
    }

    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>> {
        let sockets = super::sockets::Sockets::to_port(self.shared.port());
        let mut client = sockets.track(|| self.shared.connect_worker())?;
        let waited = match &self.waits {
            Some(sampler) => Some(sampler.register(&mut client, &self.shared)?),
            None => None,
        };
        Ok(Box::new(PgSession { client, sockets, shared: self.shared.clone(), worker, waited }))
    }

    /// The file server's catalog lives in the same database, beside the content's table.
    fn open_catalog(&self, _worker: usize, _beside: &std::path::Path) -> BResult<Box<dyn super::catalog::Catalog>> {
        let shared = self.shared.clone();
        let error = Box::new(move |e| shared.error(e));
        let connecting = self.shared.clone();
        let client = super::sockets::Reconnecting::open(self.shared.port(), Box::new(move || connecting.connect_worker()))?;
        Ok(Box::new(super::catalog::postgres::PgCatalog::new(client, &self.shared.table, error)))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        let s = &self.shared;
        let mut client = s.connect()?;
        let mut usage = match &self.data_dir {
            Some(dir) => {
                let mut usage = server::usage_of_files(&relation_files(&mut client, s, dir)?);
                if s.mode == Mode::Lo {
                    usage.add_files(&large_object_share(&mut client, s, dir)?);
                }
                usage
            }
            None => DiskUsage { allocated_unknown: true, ..DiskUsage::default() },
        };
        // A partitioned table holds no data itself: sum its partitions (pg_partition_tree lists
        // nothing for a plain table, which is counted itself).
        let total = "SELECT coalesce(sum(pg_total_relation_size(r)), 0)::bigint FROM \
                     (SELECT $1::text::regclass AS r UNION SELECT relid FROM pg_partition_tree($1::text::regclass)) t";
        let table_bytes: i64 = client.query_one(total, &[&s.table]).map_err(|e| s.error(e))?.get(0);
        let mut reported = table_bytes as u64;
        if s.mode == Mode::Lo {
            reported += large_object_bytes(&mut client, s)?;
        }
        if s.mode == Mode::File {
            usage.add_files(&super::fs::disk_usage_of(std::slice::from_ref(&s.files_root))?);
        }
        usage.server_reported_bytes = Some(reported);
        Ok(usage)
    }

    fn cleanup(&self) -> BResult<()> {
        let s = &self.shared;
        let mut client = s.connect()?;
        let mut tx = client.transaction().map_err(|e| s.error(e))?;
        let exists: Option<String> = tx.query_one("SELECT to_regclass($1)::text", &[&s.table]).map_err(|e| s.error(e))?.get(0);
        if exists.is_some() {
            if s.mode == Mode::Lo {
                tx.execute(&format!("SELECT lo_unlink(loid) FROM {}", s.table), &[]).map_err(|e| s.error(e))?;
            }
            tx.batch_execute(&format!("DROP TABLE {}", s.table)).map_err(|e| s.error(e))?;
        }
        tx.commit().map_err(|e| s.error(e))?;
        super::catalog::postgres::PgCatalog::drop_tables(&mut client, &s.table).map_err(|e| s.error(e))?;
        s.layout.drop_all(&mut client, &|e| s.error(e))?;
        if s.mode == Mode::File {
            match std::fs::remove_dir_all(&s.files_root) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        self.files.release()
    }

    fn server_objects(&self) -> BResult<Vec<String>> {
        let mut client = self.shared.connect()?;
        check_owner(&mut client, &self.shared, &self.owner)?;
        server_objects(&mut client, &self.shared)
    }

    fn server_pids(&self) -> Vec<u32> {
        self.server_pid.into_iter().collect()
    }

    fn script_service(&self) -> Option<&super::restart::ScriptService> {
        self.shared.endpoint.script.as_ref()
    }
}

/// Refuses a table of our name whose comment is not our ownership note (made by someone else, or
/// by another run): nothing is written into it or, from a record, removed. No table is fine.
fn check_owner(client: &mut Client, s: &Shared, owner: &str) -> BResult<()> {
    let sql = "SELECT obj_description(c, 'pg_class') FROM to_regclass($1) c WHERE c IS NOT NULL";
    let row = client.query_opt(sql, &[&s.table]).map_err(|e| s.error(e))?;
    match row.map(|r| r.get::<_, Option<String>>(0)) {
        Some(comment) if comment.as_deref() != Some(owner) => Err(BackendError::new(
            ErrorKind::Other,
            format!("postgres table {} exists but is not this case's (its comment is {comment:?}, ours would be {owner:?}): left alone", s.table),
        )),
        _ => Ok(()),
    }
}

/// What `cleanup` removes, as it is now: our table (its partitions, rows and in lo mode the large
/// objects its rows hold), the file catalog's tables, our tablespaces. Reads only.
fn server_objects(client: &mut Client, s: &Shared) -> BResult<Vec<String>> {
    let e = |e| s.error(e);
    let (files, names) = super::catalog::postgres::table_names(&s.table);
    let mut out = Vec::new();
    for table in [&s.table, &files, &names] {
        let exists: Option<String> = client.query_one("SELECT to_regclass($1)::text", &[table]).map_err(e)?.get(0);
        if exists.is_none() {
            continue;
        }
        let rows: i64 = client.query_one(&format!("SELECT count(*) FROM {table}"), &[]).map_err(e)?.get(0);
        let parts: i64 = client.query_one("SELECT count(*) - 1 FROM pg_partition_tree($1::text::regclass)", &[table]).map_err(e)?.get(0);
        let parts = if parts > 0 { format!(", {parts} partitions") } else { String::new() };
        out.push(format!("postgres table {table} ({rows} rows{parts})"));
        if table == &s.table && s.mode == Mode::Lo {
            let sql = format!("SELECT count(*) FROM pg_largeobject_metadata WHERE oid IN (SELECT loid FROM {table})");
            let objects: i64 = client.query_one(&sql, &[]).map_err(e)?.get(0);
            out.push(format!("postgres large objects of {table}: {objects}"));
        }
    }
    for (name, dir) in s.layout.tablespaces() {
        let found = client.query_opt("SELECT 1 FROM pg_tablespace WHERE spcname = $1", &[&name]).map_err(e)?;
        if found.is_some() {
            out.push(format!("postgres tablespace {name} at {}", dir.display()));
        }
    }
    Ok(out)
}

/// Files of our table (every partition), its TOAST tables and all their indexes (every fork and 1 GB segment).
fn relation_files(client: &mut Client, s: &Shared, data_dir: &std::path::Path) -> BResult<Vec<PathBuf>> {
    let sql = "WITH t AS (SELECT oid, reltoastrelid FROM pg_class WHERE oid = $1::text::regclass \
               OR oid IN (SELECT relid FROM pg_partition_tree($1::text::regclass))), \
               rels AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0 \
               UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM t UNION SELECT reltoastrelid FROM t)) \
               SELECT pg_relation_filepath(oid) FROM rels";
    let rows = client.query(sql, &[&s.table]).map_err(|e| s.error(e))?;
    Ok(rows.iter().filter_map(|row| row.get::<_, Option<String>>(0)).flat_map(|rel| files_of_relation(data_dir, &rel)).collect())
}

/// The files of the relation at `rel` (`pg_relation_filepath`, relative to the data directory):
/// the main file, its 1 GB segments ("N.1") and its forks ("N_fsm", "N_vm").
fn files_of_relation(data_dir: &std::path::Path, rel: &str) -> Vec<PathBuf> {
    let path = data_dir.join(rel);
    let (Some(dir), Some(base)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name == base || name.strip_prefix(base).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('_'))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Our part of `pg_largeobject`, which every large object of the database shares (so its files
/// also hold other users' objects, and the dead pages that earlier cases' deletions left for
/// VACUUM): the heap pages on which our large objects' rows lie, and of its index the same
/// fraction as those pages are of the heap. Live rows only: pages holding nothing but rows of
/// our own deleted or overwritten objects are not counted, though they take space until VACUUM.
/// Finding the pages reads pg_largeobject, which needs superuser; without it the whole files
/// are counted, an upper bound (docs/backends/postgres.md).
fn large_object_share(client: &mut Client, s: &Shared, data_dir: &std::path::Path) -> BResult<DiskUsage> {
    let files = |client: &mut Client, relation: &str| -> BResult<DiskUsage> {
        let rel: Option<String> = client.query_one("SELECT pg_relation_filepath($1::text::regclass)", &[&relation]).map_err(|e| s.error(e))?.get(0);
        Ok(server::usage_of_files(&rel.map(|rel| files_of_relation(data_dir, &rel)).unwrap_or_default()))
    };
    let mut index = files(client, "pg_largeobject_loid_pn_index")?;
    // A row's heap page is the first number of its ctid, "(page,item)"; the heap's own size is its
    // main fork's, as the server has it.
    let pages = format!(
        "SELECT count(DISTINCT (ctid::text::point)[0])::bigint, current_setting('block_size')::bigint, pg_relation_size('pg_largeobject') \
         FROM pg_largeobject WHERE loid IN (SELECT loid FROM {})",
        s.table
    );
    let Ok(row) = client.query_one(&pages, &[]) else {
        index.add_files(&files(client, "pg_largeobject")?);
        return Ok(index);
    };
    let [our_pages, block_bytes, heap_bytes] = [0, 1, 2].map(|i| row.get::<_, i64>(i).max(0) as u64);
    let block_bytes = block_bytes.max(1);
    let heap_pages = (heap_bytes / block_bytes).max(our_pages).max(1);
    let index_share = (index.allocated_bytes as u128 * our_pages as u128 / heap_pages as u128) as u64;
    let bytes = our_pages * block_bytes + index_share;
    Ok(DiskUsage { allocated_bytes: bytes, apparent_bytes: bytes, ..DiskUsage::default() })
}

/// Bytes our large objects occupy in pg_largeobject as the server stores them (reading it needs
/// superuser; without it, the byte count recorded in our rows is used instead).
fn large_object_bytes(client: &mut Client, s: &Shared) -> BResult<u64> {
    let exact = format!("SELECT coalesce(sum(pg_column_size(p.data)), 0)::bigint FROM pg_largeobject p WHERE p.loid IN (SELECT loid FROM {})", s.table);
    match client.query_one(&exact, &[]) {
        Ok(row) => Ok(row.get::<_, i64>(0) as u64),
        Err(_) => {
            let sum: i64 = client.query_one(&format!("SELECT coalesce(sum(size_bytes), 0)::bigint FROM {}", s.table), &[]).map_err(|e| s.error(e))?.get(0);
            Ok(sum as u64)
        }
    }
}

struct PgSession {
    client: Client,
    /// Its connection's socket, which the runner's `op_timeout` watchdog may cut.
    sockets: super::sockets::Sockets,
    shared: Arc<Shared>,
    worker: usize,
    /// Time this session's backend was seen waiting on a lock, in ns (option `wait_sample`).
    waited: Option<Arc<AtomicU64>>,
}

/// Reads exactly `buf.len()` bytes or fails: the body must be as long as promised.
fn read_full(body: &mut dyn Read, buf: &mut [u8], left_after: u64) -> BResult<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = body.read(&mut buf[filled..])?;
        if n == 0 {
            return Err(BackendError::new(ErrorKind::Io, format!("body ended {} bytes early", (buf.len() - filled) as u64 + left_after)));
        }
        filled += n;
    }
    Ok(())
}

impl PgSession {
    /// Connects again when the connection was lost (a server restart, or a cut by the runner's
    /// `op_timeout` watchdog); part of the operation that finds it lost, as a client's reconnect is.
    fn reconnect_if_lost(&mut self) -> BResult<()> {
        if self.client.is_closed() {
            let shared = self.shared.clone();
            self.client = self.sockets.track(|| shared.connect_worker())?;
        }
        Ok(())
    }

    /// Starts a write transaction holding the advisory lock of `key` (writers of one key queue).
    fn write_tx(&mut self, key: &str) -> BResult<postgres::Transaction<'_>> {
        let s = self.shared.clone();
        let mut tx = self.client.transaction().map_err(|e| s.error(e))?;
        let key_hash = crate::hash::xxh3_64(key.as_bytes()) as i32;
        tx.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&s.lock_class, &key_hash]).map_err(|e| s.error(e))?;
        Ok(tx)
    }

    fn put_bytea(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let s = self.shared.clone();
        let field_len = i32::try_from(len).map_err(|_| BackendError::new(ErrorKind::TooLarge, "bytea values are limited to 1 GB; use mode = \"lo\""))?;
        let mut tx = self.write_tx(key)?;
        tx.execute(&format!("DELETE FROM {} WHERE key = $1", s.table), &[&key.as_bytes()]).map_err(|e| s.error(e))?;
        let mut writer = tx.copy_in(&format!("COPY {} (key, data) FROM STDIN (FORMAT binary)", s.table)).map_err(|e| s.error(e))?;
        let mut head = COPY_HEADER.to_vec();
        head.extend_from_slice(&2i16.to_be_bytes());
        head.extend_from_slice(&(key.len() as i32).to_be_bytes());
        head.extend_from_slice(key.as_bytes());
        head.extend_from_slice(&field_len.to_be_bytes());
        writer.write_all(&head)?;
        super::copy_exact(body, &mut writer, len)?; // on error the writer is dropped: COPY and transaction abort
        writer.write_all(&(-1i16).to_be_bytes())?;
        writer.finish().map_err(|e| s.error(e))?;
        tx.commit().map_err(|e| s.error(e))
    }

    fn get_bytea(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let s = self.shared.clone();
        let e = |e| s.error(e);
        let chunk = s.chunk_bytes as i32;
        // A value of at most chunk_size comes back whole from one statement (one snapshot).
        let sql = format!("SELECT CASE WHEN octet_length(data) <= $2 THEN data END FROM {} WHERE key = $1", s.table);
        let row = self.client.query_opt(&sql, &[&key.as_bytes(), &chunk]).map_err(e)?;
        let Some(row) = row else { return Err(BackendError::not_found(key)) };
        if let Some(data) = row.get::<_, Option<&[u8]>>(0) {
            sink.write_all(data)?;
            return Ok(data.len() as u64);
        }
        // A larger one is read in chunk_size slices inside one read-only REPEATABLE READ
        // transaction: client memory stays at one slice (a row or COPY message would carry the
        // whole value) and a concurrent overwrite cannot mix versions. With EXTERNAL storage a
        // slice reads only the TOAST chunks it needs.
        let mut tx = self.client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().map_err(e)?;
        let row = tx.query_opt(&format!("SELECT octet_length(data) FROM {} WHERE key = $1", s.table), &[&key.as_bytes()]).map_err(e)?;
        let Some(row) = row else { return Err(BackendError::not_found(key)) };
        let len: i32 = row.get(0);
        let slice = format!("SELECT substring(data FROM $2 FOR $3) FROM {} WHERE key = $1", s.table);
        let mut done: i32 = 0;
        while done < len {
            let row = tx.query_one(&slice, &[&key.as_bytes(), &(done + 1), &chunk]).map_err(e)?;
            let data: &[u8] = row.get(0);
            if data.is_empty() {
                return Err(BackendError::new(ErrorKind::Corrupt, format!("postgres: value of {key:?} ended at {done} of {len} bytes")));
            }
            sink.write_all(data)?;
            done += data.len() as i32;
        }
        tx.commit().map_err(e)?;
        Ok(len as u64)
    }

    fn put_lo(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let s = self.shared.clone();
        let mut buf = vec![0u8; s.chunk_bytes.min(len.max(1) as usize)];
        let mut tx = self.write_tx(key)?;
        let e = |e| s.error(e);
        let oid: Oid = tx.query_one("SELECT lo_create(0)", &[]).map_err(e)?.get(0);
        let fd: i32 = tx.query_one("SELECT lo_open($1, $2)", &[&oid, &INV_WRITE]).map_err(e)?.get(0);
        let mut left = len;
        while left > 0 {
            let n = buf.len().min(left as usize);
            read_full(body, &mut buf[..n], left - n as u64)?;
            tx.query_one("SELECT lowrite($1, $2)", &[&fd, &&buf[..n]]).map_err(e)?;
            left -= n as u64;
        }
        tx.query_one("SELECT lo_close($1)", &[&fd]).map_err(e)?;
        let old = tx.query_opt(&format!("DELETE FROM {} WHERE key = $1 RETURNING loid", s.table), &[&key.as_bytes()]).map_err(e)?;
        if let Some(old) = old {
            tx.query_one("SELECT lo_unlink($1)", &[&old.get::<_, Oid>(0)]).map_err(e)?;
        }
        tx.execute(&format!("INSERT INTO {} (key, loid, size_bytes) VALUES ($1, $2, $3)", s.table), &[&key.as_bytes(), &oid, &(len as i64)]).map_err(e)?;
        tx.commit().map_err(e)
    }

    fn get_lo(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let s = self.shared.clone();
        let e = |e| s.error(e);
        // Repeatable read: the row and the large object come from one snapshot, so a concurrent
        // overwrite (which unlinks the old object) cannot pull the object from under this read.
        let mut tx = self.client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().map_err(e)?;
        let row = tx.query_opt(&format!("SELECT loid, size_bytes FROM {} WHERE key = $1", s.table), &[&key.as_bytes()]).map_err(e)?;
        let Some(row) = row else { return Err(BackendError::not_found(key)) };
        let (oid, size): (Oid, i64) = (row.get(0), row.get(1));
        let fd: i32 = tx.query_one("SELECT lo_open($1, $2)", &[&oid, &INV_READ]).map_err(e)?.get(0);
        let chunk = s.chunk_bytes as i32;
        let mut total = 0u64;
        loop {
            let row = tx.query_one("SELECT loread($1, $2)", &[&fd, &chunk]).map_err(e)?;
            let data: &[u8] = row.get(0);
            if data.is_empty() {
                break;
            }
            sink.write_all(data)?;
            total += data.len() as u64;
        }
        tx.commit().map_err(e)?;
        if total != size as u64 {
            return Err(BackendError::new(ErrorKind::Corrupt, format!("postgres: large object {oid} holds {total} bytes, its row says {size}")));
        }
        Ok(total)
    }

    fn file_path(&self, key: &str) -> PathBuf {
        super::fs::fanout_path(&self.shared.files_root, key, 2)
    }
}

impl Session for PgSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.reconnect_if_lost()?;
        self.shared.check_size(len)?;
        match self.shared.mode {
            Mode::Bytea => self.put_bytea(key, body, len),
            Mode::Lo => self.put_lo(key, body, len),
            Mode::File => {
                let s = self.shared.clone();
                super::fs::write_file_atomically(&self.file_path(key), body, len, s.file_mode, self.worker)?;
                let sql = format!("INSERT INTO {} (key, size_bytes) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET size_bytes = EXCLUDED.size_bytes", s.table);
                self.client.execute(&sql, &[&key.as_bytes(), &(len as i64)]).map_err(|e| s.error(e))?;
                Ok(())
            }
        }
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.reconnect_if_lost()?;
        match self.shared.mode {
            Mode::Bytea => self.get_bytea(key, sink),
            Mode::Lo => self.get_lo(key, sink),
            Mode::File => {
                self.head(key)?; // the row is the registration: no row, no object
                let mode = self.shared.file_mode;
                let path = self.file_path(key);
                let mut file = super::fs::open_to_read(&path, mode).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => BackendError::not_found(key),
                    _ => super::fs::call_error("open", &path, e),
                })?;
                let len = file.metadata().map_err(|e| super::fs::call_error("fstat", &path, e))?.len();
                super::fs::read_whole(&mut file, &path, len, sink, mode)?;
                Ok(len)
            }
        }
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.reconnect_if_lost()?;
        let s = self.shared.clone();
        let mut tx = self.write_tx(key)?;
        let returning = if s.mode == Mode::Lo { "loid" } else { "0::oid" };
        let row = tx.query_opt(&format!("DELETE FROM {} WHERE key = $1 RETURNING {returning}", s.table), &[&key.as_bytes()]).map_err(|e| s.error(e))?;
        let Some(row) = row else { return Err(BackendError::not_found(key)) };
        if s.mode == Mode::Lo {
            tx.query_one("SELECT lo_unlink($1)", &[&row.get::<_, Oid>(0)]).map_err(|e| s.error(e))?;
        }
        tx.commit().map_err(|e| s.error(e))?;
        if s.mode == Mode::File {
            match std::fs::remove_file(self.file_path(key)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.reconnect_if_lost()?;
        let s = self.shared.clone();
        let sql = match s.mode {
            Mode::Bytea => format!("SELECT octet_length(data)::bigint FROM {} WHERE key = $1", s.table),
            _ => format!("SELECT size_bytes FROM {} WHERE key = $1", s.table),
        };
        let row = self.client.query_opt(&sql, &[&key.as_bytes()]).map_err(|e| s.error(e))?;
        row.map(|r| r.get::<_, i64>(0) as u64).ok_or_else(|| BackendError::not_found(key))
    }

    /// Estimated from samples of the server's wait events (see `waits`); 0 when not sampled.
    fn wait_ns(&self) -> u64 {
        self.waited.as_ref().map_or(0, |w| w.load(Ordering::Relaxed))
    }

    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        Some(self.sockets.cut_handle())
    }
}
