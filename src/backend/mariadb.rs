//! `mariadb`: objects in MariaDB or MySQL (InnoDB by default), stored one of two ways (`mode`):
//!
//! - `inline` (default): one row per object with the bytes in a `LONGBLOB` column. A put is one
//!   autocommitted `INSERT ... ON DUPLICATE KEY UPDATE` (atomic: readers see the old or the new
//!   value, never a mix); a get is one `SELECT`. The MySQL protocol carries a row and a statement
//!   parameter whole, so the client holds one object in memory per operation: the largest object
//!   is the server's `max_allowed_packet`, read at construct and enforced before any data is
//!   written.
//! - `file`: the FILESTREAM pattern of experiment E1. The row holds key, size and the content
//!   file's path; the bytes live in a local file beside it, written and read by the same code as
//!   `sqlite-file` (`row_file`), with the same `order`, `fsync` and `path` options, so the two
//!   engines differ only in the row store. No packet carries content: no size limit but the
//!   filesystem's, and the bytes stream in both directions.
//!
//! The table is named after the case's namespace, run and mode, so cleanup drops only this case's
//! table and two layouts never share one; file mode's cleanup also removes its files directory.

use super::options::{OptionDoc, Options};
use super::row_file::{ContentFiles, Order, Row, RowFileSession, Rows};
use super::server::{self, Endpoint};
use super::sockets::Reconnecting;
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::Nanos;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, TxOpts};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "mariadb",
    summary: "MariaDB/MySQL: one InnoDB row per object, content in a LONGBLOB column or in a file beside it (option mode)",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: Some(SERVER),
};

/// How this backend finds its server (the shared endpoint block reads it).
const SERVER: super::registry::ServerKind = super::registry::ServerKind {
    uri_env: URI_ENV,
    schemes: &["mysql://", "mariadb://"],
    probe,
    default_port: 3306,
    pid_env: "STOWBENCH_MARIADB_PID",
    data_env: "STOWBENCH_MARIADB_DATA",
};

const URI_ENV: &str = "STOWBENCH_MARIADB_URI";

const OPTIONS: &[OptionDoc] = crate::options_list!(
    &server::endpoint_docs(URI_ENV),
    server::ConnectTimeout::DOCS,
    MariaOptions::DOCS,
    super::row_file::OrderOption::DOCS,
    super::namespace::DataPath::DOCS,
    super::row_file::DirectOption::DOCS
);

crate::backend_options! {
    /// mariadb's own options (endpoint, and file mode's order, path and direct, are shared blocks).
    struct MariaOptions {
        mode: Mode = "inline" => "inline (LONGBLOB column in the row) or file (the row holds key and size, the content a file beside it)",
        fsync: bool = false => "file mode: fsync each content file before its rename and its directory after it",
        engine: String = "InnoDB" => "storage engine of the table",
        statement_timeout: Nanos = "0s" => "abort any statement running longer (MariaDB's max_statement_time, which covers writes too; a timeout error the workload's retries may retry); 0s: never",
    }
}

/// Bytes of a packet that are not the value: command, statement id, key and length headers.
const PACKET_OVERHEAD_BYTES: u64 = 64 * 1024;

/// Options that only file mode reads; given with `mode = "inline"` they would silently do nothing.
const FILE_MODE_OPTIONS: &[&str] = &["order", "fsync", "path", "direct"];

/// ER_DUP_ENTRY: an INSERT found the key taken (a concurrent first put of the same key committed).
const ER_DUP_ENTRY: u16 = 1062;

/// How often a file-mode row commit is retried after losing the race to insert a new key.
const COMMIT_ATTEMPTS: usize = 8;

crate::option_choice! {
    /// Where a value lives: in the row, or in a file the row points at.
    enum Mode { Inline = "inline", File = "file" }
}

/// File mode: where the content files go, in which order, how durable.
struct FileMode {
    /// The namespace the files directory is in; a `path` option's directory is released on cleanup.
    data: super::namespace::DataNamespace,
    files: PathBuf,
    order: Order,
    mode: super::fs::WriteMode,
}

struct Shared {
    endpoint: Endpoint,
    connect_timeout: Nanos,
    /// Zero: statements never time out.
    statement_timeout: Nanos,
    table: String,
    max_object_bytes: u64,
}

/// The mariadb backend for one case.
pub struct MariaBackend {
    shared: Arc<Shared>,
    engine: String,
    database: String,
    max_allowed_packet: u64,
    server_version: String,
    settings: BTreeMap<String, String>,
    server_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    /// Set in file mode only.
    file: Option<FileMode>,
    options: Options,
    /// The comment that marks our table as ours (`server::owner_note`).
    owner: String,
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_known("mariadb", OPTIONS)?;
    let endpoint = server::endpoint(options, "mariadb", &SERVER)?;
    if let Some(why) = server::authority_mistake(&endpoint.uri) {
        return Err(endpoint.unusable(options, why));
    }
    driver_opts(&endpoint).map_err(|e| endpoint.unusable(options, endpoint.secrets.scrub(&e.to_string())))?;
    let own = MariaOptions::read(options)?;
    let engine = own.engine.clone();
    if engine.is_empty() || !engine.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("target \"{}\": option \"engine\" = \"{engine}\" is not an engine name like InnoDB", options.target));
    }
    let mode = own.mode;
    let file_options = match mode {
        Mode::File => Some(super::row_file::OrderOption::read(options)?.order),
        Mode::Inline => {
            if let Some(name) = FILE_MODE_OPTIONS.iter().find(|name| options.table.contains_key(**name)) {
                let target = &options.target;
                let why = format!("option \"{name}\" applies only to mode = \"file\"; set mode = \"file\" or remove it");
                return Err(format!("target \"{target}\": {why}"));
            }
            None
        }
    };
    let mut shared = Shared {
        endpoint,
        connect_timeout: server::ConnectTimeout::read(options)?.connect_timeout,
        statement_timeout: own.statement_timeout,
        // The mode is in the name, so no two layouts share a table.
        table: format!("{}_{}", server::owned_name(ns), format!("{mode:?}").to_lowercase()),
        max_object_bytes: 0,
    };
    let mut conn = shared.connect().map_err(|e| e.message)?;
    let fail = |e: mysql::Error| server::context("mariadb", &shared.endpoint, &words(&e));
    let row: (String, u64, String, String) =
        conn.query_first("SELECT VERSION(), @@global.max_allowed_packet, @@datadir, DATABASE()").map_err(fail)?.unwrap_or_default();
    let (server_version, max_allowed_packet, datadir, database) = row;
    if database.is_empty() {
        return Err(format!("target \"{}\": the URI {} names no database; add one: mysql://user@host:port/DATABASE", options.target, shared.endpoint.shown));
    }
    check_engine(&mut conn, &engine, options).map_err(fail)??;
    let settings = read_settings(&mut conn).map_err(fail)?;
    shared.max_object_bytes = max_allowed_packet.saturating_sub(PACKET_OVERHEAD_BYTES);
    let pid_file: Option<String> = conn.query_first("SELECT @@pid_file").ok().flatten();
    let discovered = pid_file.and_then(|f| std::fs::read_to_string(f).ok()).and_then(|t| t.trim().parse().ok());
    let server_pid = shared.endpoint.server_pid(discovered)?;
    let data_dir = shared.endpoint.data_dir(Some(datadir))?;
    // Last, once the server answered: a `path` option's directory is created here.
    let file = match file_options {
        Some(order) => {
            let data = super::namespace::DataNamespace::new(options, ns)?;
            let files = data.ns.dir.join("files");
            Some(FileMode { mode: super::row_file::content_mode(options, own.fsync, &files)?, files, data, order })
        }
        None => None,
    };
    Ok(Box::new(MariaBackend {
        shared: Arc::new(shared),
        engine,
        database,
        max_allowed_packet,
        server_version,
        settings,
        server_pid,
        data_dir,
        file,
        options: options.clone(),
        owner: server::owner_note(ns),
    }))
}

/// Why the server cannot make a table with `engine` (MariaDB would say "Unknown storage engine"
/// only at the first CREATE TABLE, in the run), naming the engines it offers; the outer error is
/// a failed query.
fn check_engine(conn: &mut Conn, engine: &str, options: &Options) -> Result<Result<(), String>, mysql::Error> {
    let engines: Vec<(String, String)> = conn.query("SELECT ENGINE, SUPPORT FROM information_schema.ENGINES")?;
    let usable: Vec<&str> = engines.iter().filter(|(_, support)| support == "YES" || support == "DEFAULT").map(|(name, _)| name.as_str()).collect();
    if usable.iter().any(|name| name.eq_ignore_ascii_case(engine)) {
        return Ok(Ok(()));
    }
    let state = match engines.iter().find(|(name, _)| name.eq_ignore_ascii_case(engine)) {
        Some((_, support)) => format!("is not available on this server (SUPPORT = {support})"),
        None => "is not a storage engine this server knows".to_string(),
    };
    Ok(Err(options.bad("engine", format!("\"{engine}\" {state}; use one it offers: {}", usable.join(", ")))))
}

/// Settings that decide durability and limits (read, never changed).
fn read_settings(conn: &mut Conn) -> Result<BTreeMap<String, String>, mysql::Error> {
    let names = [
        "innodb_flush_log_at_trx_commit",
        "sync_binlog",
        "log_bin",
        "innodb_doublewrite",
        "innodb_flush_method",
        "innodb_log_file_size",
        "innodb_buffer_pool_size",
    ];
    let mut out = BTreeMap::new();
    for name in names {
        let value: Option<Option<String>> = conn.query_first(format!("SELECT CAST(@@global.{name} AS CHAR)")).ok();
        if let Some(Some(v)) = value {
            out.insert(name.to_string(), v);
        }
    }
    Ok(out)
}

/// Probes a URI for `stowbench backends`: the server's version, or why it cannot be reached.
pub fn probe(uri: &str) -> Result<String, String> {
    let options = Options::new("probe", "", [("uri".to_string(), toml::Value::String(uri.into()))].into_iter().collect());
    let shared = Shared {
        endpoint: server::endpoint(&options, "mariadb", &SERVER)?,
        connect_timeout: server::PROBE_TIMEOUT,
        statement_timeout: Nanos(0),
        table: String::new(),
        max_object_bytes: 0,
    };
    let mut conn = shared.connect().map_err(|e| e.message)?;
    let row: Option<(String, u64)> = conn.query_first("SELECT VERSION(), @@global.max_allowed_packet").map_err(|e| shared.error(e).message)?;
    let (version, packet) = row.unwrap_or_default();
    Ok(format!("MariaDB/MySQL {version} (max_allowed_packet {packet} bytes)"))
}

/// A driver error in the server's or the system's own words: the crate's Display wraps each kind
/// as `MySqlError { … }`, which reads like a debug dump.
fn words(e: &mysql::Error) -> String {
    match e {
        mysql::Error::IoError(e) => e.to_string(),
        mysql::Error::CodecError(e) => e.to_string(),
        mysql::Error::MySqlError(e) => e.to_string(),
        mysql::Error::DriverError(e) => e.to_string(),
        mysql::Error::UrlError(e) => format!("the URI {}: {e}", server::UNUSABLE_URI),
        other => other.to_string(),
    }
}

/// The driver's options from the endpoint's URI, or why the driver cannot use it (an unknown
/// parameter, a bad value), found without connecting.
fn driver_opts(endpoint: &server::Endpoint) -> Result<Opts, mysql::UrlError> {
    // The driver knows only mysql://; mariadb:// (accepted for MariaDB's users) means the same.
    let uri = match endpoint.uri.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => endpoint.uri.clone(),
    };
    Opts::from_url(&uri)
}

impl Shared {
    fn connect(&self) -> BResult<Conn> {
        let fail =
            |e: &dyn std::fmt::Display| BackendError::new(ErrorKind::Connection, server::context("mariadb", &self.endpoint, &format!("cannot connect: {e}")));
        let opts = driver_opts(&self.endpoint)
            .map_err(|e| BackendError::new(ErrorKind::Connection, server::context("mariadb", &self.endpoint, &words(&mysql::Error::UrlError(e)))))?;
        // TCP as the URI says: the crate would otherwise switch to the server's Unix socket when
        // it finds one, which measures a different transport than the other server backends.
        let timeout = std::time::Duration::from_nanos(self.connect_timeout.0);
        let opts = OptsBuilder::from_opts(opts).prefer_socket(false).tcp_connect_timeout(Some(timeout));
        let outcome = server::within_connect_timeout("mariadb", &self.endpoint, timeout, move || Ok(Conn::new(opts)))?;
        let mut conn = outcome.map_err(|e| fail(&words(&e)))?;
        // Read committed: an upsert takes no gap locks, so writers of different keys never deadlock.
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED").map_err(|e| self.error(e))?;
        if self.statement_timeout.0 > 0 {
            // MariaDB's limit covers every statement, writes included (MySQL's covers SELECT only).
            let seconds = self.statement_timeout.0 as f64 / 1e9;
            conn.query_drop(format!("SET SESSION max_statement_time = {seconds}")).map_err(|e| self.error(e))?;
        }
        Ok(conn)
    }

    /// The server's TCP port (the URI's, else MariaDB's default).
    fn port(&self) -> u16 {
        self.endpoint.port()
    }

    fn error(&self, e: mysql::Error) -> BackendError {
        let kind = match &e {
            mysql::Error::MySqlError(m) => match m.code {
                1213 | 1020 => ErrorKind::Conflict,
                1205 | 3024 | 1969 => ErrorKind::Timeout,
                1153 | 1118 | 1301 => ErrorKind::TooLarge,
                1021 | 1114 | 3 => ErrorKind::Io,
                _ => ErrorKind::Other,
            },
            mysql::Error::IoError(_) | mysql::Error::CodecError(_) => ErrorKind::Connection,
            mysql::Error::DriverError(_) => ErrorKind::Connection,
            _ => ErrorKind::Other,
        };
        BackendError::new(kind, format!("mariadb: {}", self.endpoint.secrets.scrub(&words(&e))))
    }
}

impl Backend for MariaBackend {
    fn capabilities(&self) -> Capabilities {
        if self.file.is_some() {
            // The content never travels in a packet: max_allowed_packet does not apply.
            return Capabilities { operation_deadline: true, ..Capabilities::default() };
        }
        Capabilities {
            max_object_bytes: Some(self.shared.max_object_bytes),
            max_object_hint: Some(format!(
                "the server's max_allowed_packet is {} bytes and a LONGBLOB value travels in one packet; raise it \
                 (mariadbd --max-allowed-packet=1G, or SET GLOBAL max_allowed_packet = 1073741824 and reconnect; 1 GiB is the most) \
                 or use mode = \"file\" (the content in a file beside the row, no packet limit), \
                 or backend \"postgres\" with mode = \"lo\", \"s3\" or \"fs\" for larger objects",
                self.max_allowed_packet
            )),
            operation_deadline: true,
            ..Capabilities::default()
        }
    }

    fn describe(&self) -> BackendInfo {
        let s = &self.shared;
        let mut options = s.endpoint.report_options(&self.options);
        if let Some(map) = options.as_object_mut() {
            map.insert("engine".into(), self.engine.clone().into());
            map.insert("mode".into(), if self.file.is_some() { "file" } else { "inline" }.into());
            if let Some(file) = &self.file {
                map.insert("order".into(), file.order.as_str().into());
                map.insert("fsync".into(), file.mode.fsync.into());
                map.insert("direct".into(), file.mode.direct.into());
            }
            map.insert("table".into(), format!("{}.{}", self.database, s.table).into());
            map.insert("server_max_allowed_packet".into(), self.max_allowed_packet.into());
            for (k, v) in &self.settings {
                map.insert(format!("server_{k}"), v.clone().into());
            }
        }
        let mut versions = BTreeMap::new();
        versions.insert("mariadb".into(), self.server_version.clone());
        versions.insert("mysql-crate".into(), server::locked_version("mysql"));
        let get = |k: &str| self.settings.get(k).map(String::as_str).unwrap_or("?");
        let server = format!(
            "server innodb_flush_log_at_trx_commit = {}, sync_binlog = {}, log_bin = {}",
            get("innodb_flush_log_at_trx_commit"),
            get("sync_binlog"),
            get("log_bin")
        );
        let mut data_paths: Vec<PathBuf> = self.data_dir.iter().cloned().collect();
        let durability = match &self.file {
            None => format!("autocommit of one statement per put; {server}"),
            Some(file) => {
                data_paths.insert(0, file.files.clone());
                format!("{}; row: one transaction per put; {server}", super::row_file::durability(file.order, file.mode))
            }
        };
        BackendInfo { backend: "mariadb".into(), versions, options, durability, data_paths }
    }

    fn prepare(&self) -> BResult<()> {
        let s = &self.shared;
        // File mode's path is relative to the files directory: fan-out, encoded key (at most 3 × 512
        // bytes) and a version suffix fit in 2048 bytes.
        let columns = match self.file {
            None => "k VARBINARY(512) NOT NULL PRIMARY KEY, data LONGBLOB NOT NULL",
            Some(_) => {
                "k VARBINARY(512) NOT NULL PRIMARY KEY, size_bytes BIGINT UNSIGNED NOT NULL, \
                        path VARBINARY(2048) NOT NULL, created_ns BIGINT NOT NULL"
            }
        };
        // The ownership note in the same statement: the table never exists without it.
        let sql = format!("CREATE TABLE IF NOT EXISTS `{}` ({columns}) ENGINE={} COMMENT='{}'", s.table, self.engine, self.owner);
        let mut conn = s.connect()?;
        check_owner(&mut conn, s, &self.owner)?;
        conn.query_drop(sql).map_err(|e| s.error(e))?;
        if let Some(file) = &self.file {
            std::fs::create_dir_all(&file.files)?;
        }
        Ok(())
    }

    /// The file server's catalog lives in the same database, beside the content's table.
    fn open_catalog(&self, _worker: usize, _beside: &std::path::Path) -> BResult<Box<dyn super::catalog::Catalog>> {
        let shared = self.shared.clone();
        let error = Box::new(move |e| shared.error(e));
        let connecting = self.shared.clone();
        let conn = Reconnecting::open(self.shared.port(), Box::new(move || connecting.connect()))?;
        Ok(Box::new(super::catalog::mariadb::MariaCatalog::new(conn, &self.shared.table, &self.engine, error)))
    }

    fn open_session(&self, worker: usize) -> BResult<Box<dyn Session>> {
        let connecting = self.shared.clone();
        let conn = Reconnecting::open(self.shared.port(), Box::new(move || connecting.connect()))?;
        Ok(match &self.file {
            None => Box::new(MariaSession { conn, shared: self.shared.clone() }),
            Some(file) => Box::new(RowFileSession {
                rows: MariaRows { conn, shared: self.shared.clone() },
                content: ContentFiles::new(file.files.clone(), file.order, file.mode, worker),
            }),
        })
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        let s = &self.shared;
        let mut conn = s.connect()?;
        // InnoDB's table statistics lag behind writes until recalculated.
        conn.query_drop(format!("ANALYZE TABLE `{}`", s.table)).map_err(|e| s.error(e))?;
        let reported: Option<u64> = conn
            .exec_first(
                "SELECT CAST(data_length + index_length AS UNSIGNED) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
                (&s.table,),
            )
            .map_err(|e| s.error(e))?;
        let mut usage = match &self.data_dir {
            Some(dir) => {
                let base = dir.join(&self.database).join(&s.table);
                server::usage_of_files(&[
                    base.with_extension("ibd"),
                    base.with_extension("MYD"),
                    base.with_extension("MYI"),
                    base.with_extension("MAD"),
                    base.with_extension("MAI"),
                ])
            }
            None => DiskUsage { allocated_unknown: true, ..DiskUsage::default() },
        };
        usage.server_reported_bytes = reported;
        if let Some(file) = &self.file {
            // Content, and any orphan or temporary file a crash left there, as on disk now.
            usage.add_files(&super::fs::disk_usage_of(std::slice::from_ref(&file.files))?);
        }
        Ok(usage)
    }

    fn cleanup(&self) -> BResult<()> {
        let s = &self.shared;
        let mut conn = s.connect()?;
        conn.query_drop(format!("DROP TABLE IF EXISTS `{}`", s.table)).map_err(|e| s.error(e))?;
        super::catalog::mariadb::MariaCatalog::drop_tables(&mut conn, &s.table).map_err(|e| s.error(e))?;
        if let Some(file) = &self.file {
            // The whole files directory, orphans included; then a `path` option's own directory.
            super::fs::remove_dir_if_present(&file.files)?;
            file.data.release()?;
        }
        Ok(())
    }

    fn server_objects(&self) -> BResult<Vec<String>> {
        check_owner(&mut self.shared.connect()?, &self.shared, &self.owner)?;
        server_objects(&self.shared)
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
fn check_owner(conn: &mut Conn, s: &Shared, owner: &str) -> BResult<()> {
    let sql = "SELECT table_comment FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?";
    let comment: Option<String> = conn.exec_first(sql, (s.table.as_str(),)).map_err(|e| s.error(e))?;
    match comment {
        Some(comment) if comment != owner => Err(BackendError::new(
            ErrorKind::Other,
            format!("mariadb table `{}` exists but is not this case's (its comment is {comment:?}, ours would be {owner:?}): left alone", s.table),
        )),
        _ => Ok(()),
    }
}

/// What `cleanup` removes, as it is now: our table and the file catalog's tables, with their
/// row counts. Reads only.
fn server_objects(s: &Shared) -> BResult<Vec<String>> {
    let mut conn = s.connect()?;
    let (files, names) = super::catalog::mariadb::table_names(&s.table);
    let mut out = Vec::new();
    for table in [&s.table, &files, &names] {
        let sql = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?";
        let found: Option<u64> = conn.exec_first(sql, (table.as_str(),)).map_err(|e| s.error(e))?;
        if found.unwrap_or(0) == 0 {
            continue;
        }
        let rows: Option<u64> = conn.query_first(format!("SELECT COUNT(*) FROM `{table}`")).map_err(|e| s.error(e))?;
        out.push(format!("mariadb table `{table}` ({} rows)", rows.unwrap_or(0)));
    }
    Ok(out)
}

struct MariaSession {
    /// Replaced when the runner's `op_timeout` watchdog cut it or the server closed it: the
    /// crate cannot tell a dead connection, and would fail every later call on it.
    conn: Reconnecting<Conn>,
    shared: Arc<Shared>,
}

impl Session for MariaSession {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        self.conn.revive()?;
        let s = self.shared.clone();
        if len > s.max_object_bytes {
            return Err(BackendError::new(
                ErrorKind::TooLarge,
                format!("mariadb: {len} bytes exceed {} (the server's max_allowed_packet less protocol overhead)", s.max_object_bytes),
            ));
        }
        // The protocol sends a parameter whole: the value is read into memory first.
        let mut value = Vec::with_capacity(len as usize);
        body.take(len).read_to_end(&mut value)?;
        if value.len() as u64 != len {
            return Err(BackendError::new(ErrorKind::Io, format!("body ended {} bytes early", len - value.len() as u64)));
        }
        let sql = format!("INSERT INTO `{}` (k, data) VALUES (?, ?) ON DUPLICATE KEY UPDATE data = VALUES(data)", s.table);
        self.conn.exec_drop(sql, (key.as_bytes(), value)).map_err(|e| s.error(e))
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        self.conn.revive()?;
        let s = self.shared.clone();
        let value: Option<Vec<u8>> = self.conn.exec_first(format!("SELECT data FROM `{}` WHERE k = ?", s.table), (key.as_bytes(),)).map_err(|e| s.error(e))?;
        let value = value.ok_or_else(|| BackendError::not_found(key))?;
        sink.write_all(&value)?;
        Ok(value.len() as u64)
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        self.conn.revive()?;
        let s = self.shared.clone();
        self.conn.exec_drop(format!("DELETE FROM `{}` WHERE k = ?", s.table), (key.as_bytes(),)).map_err(|e| s.error(e))?;
        if self.conn.affected_rows() == 0 {
            return Err(BackendError::not_found(key));
        }
        Ok(())
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        self.conn.revive()?;
        let s = self.shared.clone();
        let len: Option<u64> =
            self.conn.exec_first(format!("SELECT LENGTH(data) FROM `{}` WHERE k = ?", s.table), (key.as_bytes(),)).map_err(|e| s.error(e))?;
        len.ok_or_else(|| BackendError::not_found(key))
    }

    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        Some(self.conn.cut_handle())
    }
}

/// File mode's session: rows in MariaDB, content through `row_file` exactly as `sqlite-file`.
/// File mode's row side: autocommitted reads at READ COMMITTED (the newest committed row), and
/// short write transactions that lock the key's row.
struct MariaRows {
    conn: Reconnecting<Conn>,
    shared: Arc<Shared>,
}

impl Rows for MariaRows {
    fn read_row(&mut self, key: &str) -> BResult<Option<Row>> {
        self.conn.revive()?;
        let s = self.shared.clone();
        let sql = format!("SELECT size_bytes, path, created_ns FROM `{}` WHERE k = ?", s.table);
        let row: Option<(u64, String, i64)> = self.conn.exec_first(sql, (key.as_bytes(),)).map_err(|e| s.error(e))?;
        Ok(row.map(|(size_bytes, path, created_ns)| Row { size_bytes, path, created_ns }))
    }

    fn commit_row(&mut self, key: &str, row: &Row) -> BResult<Option<Row>> {
        self.conn.revive()?;
        let s = self.shared.clone();
        let e = |e| s.error(e);
        let select = format!("SELECT size_bytes, path, created_ns FROM `{}` WHERE k = ? FOR UPDATE", s.table);
        let update = format!("UPDATE `{}` SET size_bytes = ?, path = ?, created_ns = ? WHERE k = ?", s.table);
        let insert = format!("INSERT INTO `{}` (k, size_bytes, path, created_ns) VALUES (?, ?, ?, ?)", s.table);
        for _ in 0..COMMIT_ATTEMPTS {
            // The row lock makes reading the old row and replacing it one step, as SQLite's write
            // lock does for sqlite-file: the file it names is the one this put must remove.
            let mut tx = self.conn.start_transaction(TxOpts::default()).map_err(e)?;
            let old: Option<(u64, String, i64)> = tx.exec_first(&select, (key.as_bytes(),)).map_err(e)?;
            let written = match old {
                Some(_) => tx.exec_drop(&update, (row.size_bytes, row.path.as_str(), row.created_ns, key.as_bytes())),
                None => tx.exec_drop(&insert, (key.as_bytes(), row.size_bytes, row.path.as_str(), row.created_ns)),
            };
            match written {
                // A new key has no row to lock: a concurrent first put inserted it and committed.
                // Dropping `tx` rolls back, which also releases the lock the duplicate check took
                // (kept, two such losers would deadlock on their FOR UPDATE); the next attempt
                // finds and locks the row.
                Err(mysql::Error::MySqlError(m)) if m.code == ER_DUP_ENTRY => continue,
                Err(err) => return Err(e(err)),
                Ok(()) => {}
            }
            tx.commit().map_err(e)?;
            return Ok(old.map(|(size_bytes, path, created_ns)| Row { size_bytes, path, created_ns }));
        }
        let why = format!("mariadb: key \"{key}\" was inserted and deleted concurrently {COMMIT_ATTEMPTS} times");
        Err(BackendError::new(ErrorKind::Conflict, why))
    }

    fn undo_row(&mut self, key: &str, ours: &Row, old: Option<Row>) {
        // One autocommitted statement: its WHERE makes "still ours?" and the change one step.
        let table = &self.shared.table;
        let mine = "k = ? AND path = ? AND created_ns = ?";
        let _ = match old {
            None => {
                let sql = format!("DELETE FROM `{table}` WHERE {mine}");
                self.conn.exec_drop(sql, (key.as_bytes(), ours.path.as_str(), ours.created_ns))
            }
            Some(o) => self.conn.exec_drop(
                format!("UPDATE `{table}` SET size_bytes = ?, path = ?, created_ns = ? WHERE {mine}"),
                (o.size_bytes, o.path, o.created_ns, key.as_bytes(), ours.path.as_str(), ours.created_ns),
            ),
        };
    }

    fn delete_row(&mut self, key: &str) -> BResult<Option<String>> {
        self.conn.revive()?;
        let s = self.shared.clone();
        let e = |e| s.error(e);
        // SELECT ... FOR UPDATE, then DELETE, rather than MariaDB's DELETE ... RETURNING, which MySQL lacks.
        let mut tx = self.conn.start_transaction(TxOpts::default()).map_err(e)?;
        let select = format!("SELECT path FROM `{}` WHERE k = ? FOR UPDATE", s.table);
        let path: Option<String> = tx.exec_first(select, (key.as_bytes(),)).map_err(e)?;
        if path.is_some() {
            tx.exec_drop(format!("DELETE FROM `{}` WHERE k = ?", s.table), (key.as_bytes(),)).map_err(e)?;
        }
        tx.commit().map_err(e)?;
        Ok(path)
    }

    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        Some(self.conn.cut_handle())
    }
}
