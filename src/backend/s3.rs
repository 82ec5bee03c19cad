//! `s3`: one object per key in an S3-compatible store (MinIO, AWS S3, Ceph RGW, ...), through
//! the `object_store` crate with its retries turned off, so a failure is counted as a failure and
//! never hidden inside a slow operation. PUTs whose body is signed chunk by chunk (the default,
//! `payload_signing = "chunked"`) are sent by this backend itself (`chunked`), as object_store
//! only signs a whole body.
//!
//! A put below `multipart_threshold` is one PUT whose body is read into memory first (S3 needs
//! the length up front); at or above it, a multipart upload sends `part_size` parts one after
//! another, so at most one part is in memory. A get streams the response body into the sink.
//! Keys live under the prefix `<owned name>/`, so cleanup lists and deletes only this case's
//! objects. Each session owns a single-threaded tokio runtime and its own HTTP connection pools,
//! and blocks on it: no hand-off between threads sits inside a measured operation.

mod chunked;
mod sigv4;
mod uploads;

use super::options::{OptionDoc, Options};
use super::server::{self, Endpoint};
use super::{BResult, Backend, BackendError, BackendInfo, BackendKind, Capabilities, DiskUsage, ErrorKind, Namespace, Session};
use crate::units::{ByteSize, Nanos};
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// Registry entry.
pub const KIND: BackendKind = BackendKind {
    name: "s3",
    summary: "S3-compatible object store (MinIO, AWS, ...): one object per key under a run prefix",
    options: OPTIONS,
    construct,
    is_test_tool: false,
    server: Some(SERVER),
};

/// How this backend finds its server (the shared endpoint block reads it).
const SERVER: super::registry::ServerKind = super::registry::ServerKind {
    uri_env: URI_ENV,
    schemes: &["http://", "https://"],
    probe,
    default_port: 80,
    pid_env: "STOWBENCH_S3_PID",
    data_env: "STOWBENCH_S3_DATA",
};

const URI_ENV: &str = "STOWBENCH_S3_ENDPOINT";

const OPTIONS: &[OptionDoc] = crate::options_list!(&server::endpoint_docs(URI_ENV), S3Options::DOCS);

crate::backend_options! {
    /// s3's own options (the endpoint block is shared by every server backend).
    struct S3Options {
        bucket: Option<String>, "$STOWBENCH_S3_BUCKET or stowbench" => "bucket to write into (created if missing and create_bucket = true)",
        region: Option<String>, "$STOWBENCH_S3_REGION or us-east-1" => "region used for request signing",
        access_key_env: String = "AWS_ACCESS_KEY_ID" => "environment variable holding the access key id",
        secret_key_env: String = "AWS_SECRET_ACCESS_KEY" => "environment variable holding the secret key (redacted everywhere)",
        create_bucket: bool = true => "create the bucket when it does not exist (a signed PUT /bucket/); false: only check, and explain",
        multipart_threshold: ByteSize = "64MiB" => "objects of at least this size go up as multipart uploads",
        part_size: ByteSize = "16MiB" => "multipart part size (5MiB to 5GiB); one part is in memory at a time",
        payload_signing: PayloadSigning = "chunked" => "how a PUT's signature covers its body: chunked (each 64 KiB chunk signed as it is sent, as minio-go and the AWS SDKs over HTTP), whole (the body's SHA-256, hashed before the first byte is sent: object_store's way) or unsigned (UNSIGNED-PAYLOAD, as warp --disable-sha256-payload: no hashing, and the signature does not cover the body; use it over TLS or loopback)",
        request_timeout: Nanos = "300s" => "give up on one HTTP request after this long (no retries)",
        virtual_hosted: bool = false => "bucket in the host name (AWS style) instead of the path (MinIO style)",
    }
}

crate::option_choice! {
    /// How a PUT's signature covers its body (option `payload_signing`).
    pub enum PayloadSigning { Chunked = "chunked", Whole = "whole", Unsigned = "unsigned" }
}

/// S3's smallest part (all but the last) and largest part.
const PART_MIN_BYTES: u64 = 5 << 20;
const PART_MAX_BYTES: u64 = 5 << 30;
/// S3's largest object (10,000 parts of at most 5 GiB make more, but the service caps at 5 TiB).
const S3_MAX_OBJECT_BYTES: u64 = 5 << 40;

struct Settings {
    endpoint: Endpoint,
    bucket: String,
    region: String,
    access_key: String,
    secret_key: String,
    virtual_hosted: bool,
    request_timeout: Nanos,
    prefix: String,
    multipart_threshold_bytes: u64,
    part_bytes: u64,
    payload_signing: PayloadSigning,
}

/// The s3 backend for one case.
pub struct S3Backend {
    settings: Arc<Settings>,
    admin: Client,
    server_header: String,
    server_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    options: Options,
    /// Keys the case uses (`note_keys`), whose incomplete uploads are looked for by name.
    known_keys: std::sync::atomic::AtomicU64,
    /// Uploads this process's sessions started and did not see completed or aborted.
    open_uploads: OpenUploads,
    /// Other processes put under our prefix too (`note_other_writers`): their open uploads are
    /// not in `open_uploads`, so every key is asked for.
    other_writers: std::sync::atomic::AtomicBool,
}

/// The object names of multipart uploads begun here and not yet completed or aborted: while
/// this process runs, the only incomplete uploads a put of ours can have left. Until a session
/// opens, nothing is known (a backend rebuilt from a killed run's record) and cleanup asks the
/// server for each of the case's keys by name instead: one request a key, 40 s for the 100,000
/// keys of a 10 s put phase against MinIO (session 34).
#[derive(Clone, Default)]
struct OpenUploads(Arc<std::sync::Mutex<Option<std::collections::BTreeSet<String>>>>);

impl OpenUploads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<std::collections::BTreeSet<String>>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn watch(&self) {
        self.lock().get_or_insert_with(Default::default);
    }

    fn begun(&self, path: &ObjectPath) {
        if let Some(open) = self.lock().as_mut() {
            open.insert(path.to_string());
        }
    }

    fn ended(&self, path: &ObjectPath) {
        if let Some(open) = self.lock().as_mut() {
            open.remove(path.as_ref());
        }
    }

    /// The object names to ask for by name: the open ones, or None when not known.
    fn names(&self) -> Option<Vec<String>> {
        self.lock().as_ref().map(|open| open.iter().cloned().collect())
    }
}

/// A store and the runtime that drives its connections.
struct Client {
    runtime: Runtime,
    store: AmazonS3,
    /// For the requests sent without object_store: chunk-signed PUTs, creating the bucket,
    /// listing incomplete uploads (one client, so the system certificates are read once).
    http: reqwest::Client,
    settings: Arc<Settings>,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
}

fn construct(options: &Options, ns: &Namespace) -> Result<Box<dyn Backend>, String> {
    options.check_retired(
        "unsigned_payload",
        "write payload_signing = \"unsigned\" for unsigned_payload = true; false is payload_signing = \"whole\", and the default is now \"chunked\"",
    )?;
    options.check_known("s3", OPTIONS)?;
    let mut endpoint = server::endpoint(options, "s3", &SERVER)?;
    if let Some(why) = endpoint_problem(&endpoint.uri) {
        return Err(endpoint.unusable(options, why));
    }
    let own = S3Options::read(options)?;
    if own.bucket.as_deref() == Some("") {
        return Err(options.bad(
            "bucket",
            "is empty; name the bucket to write into (S3 bucket names are 3 to 63 characters), or remove the line for $STOWBENCH_S3_BUCKET or \"stowbench\"",
        ));
    }
    let (key_env, secret_env) = (&own.access_key_env, &own.secret_key_env);
    let missing = |name: &str| {
        format!("target \"{}\": backend s3 needs the environment variable {name} (credentials are read only from the environment)", options.target)
    };
    let access_key = std::env::var(key_env).map_err(|_| missing(key_env))?;
    let secret_key = std::env::var(secret_env).map_err(|_| missing(secret_env))?;
    endpoint.secrets.add(&secret_key);
    let part_bytes = own.part_size.0;
    if !(PART_MIN_BYTES..=PART_MAX_BYTES).contains(&part_bytes) {
        return Err(format!("target \"{}\": option \"part_size\" is {part_bytes} bytes; S3 parts are 5MiB to 5GiB", options.target));
    }
    let settings = Arc::new(Settings {
        bucket: own.bucket.clone().unwrap_or_else(|| env_or("STOWBENCH_S3_BUCKET", "stowbench")),
        region: own.region.clone().unwrap_or_else(|| env_or("STOWBENCH_S3_REGION", "us-east-1")),
        access_key,
        secret_key,
        virtual_hosted: own.virtual_hosted,
        request_timeout: own.request_timeout,
        prefix: server::owned_name(ns),
        multipart_threshold_bytes: own.multipart_threshold.0.max(1),
        part_bytes,
        payload_signing: own.payload_signing,
        endpoint,
    });
    let admin = Client::new(settings.clone(), Role::Admin).map_err(|e| e.message)?;
    // The first request, bounded as a connection is (a listener that never answers would hold it
    // for request_timeout, 300 s by default).
    let create = own.create_bucket;
    let (admin, server_header) = server::within_connect_timeout("s3", &settings.endpoint, CONNECT_TIMEOUT, move || {
        let header = admin.ensure_bucket(create)?;
        Ok((admin, header))
    })
    .map_err(|e| e.message)?;
    let server_pid = settings.endpoint.server_pid(None)?;
    let data_dir = settings.endpoint.data_dir(None)?;
    Ok(Box::new(S3Backend {
        settings,
        admin,
        server_header,
        server_pid,
        data_dir,
        options: options.clone(),
        known_keys: Default::default(),
        open_uploads: Default::default(),
        other_writers: Default::default(),
    }))
}

/// Why `uri` cannot serve as an S3 endpoint, found before object_store reads it: object_store
/// panics on some (a port over 65535, a host it cannot parse), and it sends a user-info part
/// on as a malformed Host header (every request then fails, cleanup included). An endpoint is
/// `http(s)://HOST[:PORT][/path]`, credentials come only from the environment.
fn endpoint_problem(uri: &str) -> Option<String> {
    const FORM: &str = "give http://HOST:PORT or https://HOST:PORT";
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("it holds a space or a control character; {FORM}"));
    }
    let Some(rest) = uri.strip_prefix("http://").or_else(|| uri.strip_prefix("https://")) else {
        return Some(format!("an S3 endpoint starts with http:// or https://; {FORM}"));
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Some(format!(
            "it holds user info (USER:PASSWORD@), which S3 endpoints do not take: credentials come from the environment \
             (options access_key_env and secret_key_env); {FORM}"
        ));
    }
    if rest.contains(['?', '#']) {
        return Some(format!("it holds a query or fragment (? or #), which an S3 endpoint does not take; {FORM}"));
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, after)) if host.parse::<std::net::Ipv6Addr>().is_ok() && (after.is_empty() || after.starts_with(':')) => {
                (host, after.strip_prefix(':'))
            }
            _ => return Some(format!("its IPv6 host cannot be read (an IPv6 address goes in brackets: http://[::1]:9000); {FORM}")),
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Some(format!("it names no host; {FORM}"));
    }
    if !host.contains(':') && !host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_') {
        return Some(format!("its host \"{host}\" is not a host name or IP address; {FORM}"));
    }
    port.and_then(server::port_mistake).map(|why| format!("{why}; {FORM}"))
}

/// How long the TCP connection, and the first request of a target, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Probes an endpoint for `stowbench backends` (credentials from the default variables).
pub fn probe(uri: &str) -> Result<String, String> {
    let table = [("uri".to_string(), toml::Value::String(uri.into())), ("create_bucket".to_string(), toml::Value::Boolean(false))];
    let options = Options::new("probe", "", table.into_iter().collect());
    let dir = std::env::temp_dir();
    let ns = Namespace::unheld("probe", &dir, "probe");
    let backend = construct(&options, &ns)?;
    let info = backend.describe();
    Ok(format!(
        "S3 endpoint answers as \"{}\"; bucket \"{}\" is reachable",
        info.versions.get("server").cloned().unwrap_or_default(),
        info.options["bucket"].as_str().unwrap_or("")
    ))
}

/// `text` with an S3 error document (`<?xml …?><Error><Code>…</Code><Message>…</Message>…`,
/// which the client quotes whole) cut to its code and message: the request and host ids after
/// them help nobody reading a terminal.
fn error_words(text: &str) -> String {
    let field = |name: &str| {
        let start = text.find(&format!("<{name}>"))? + name.len() + 2;
        Some(text[start..start + text[start..].find(&format!("</{name}>"))?].to_string())
    };
    let (Some(begin), Some(end)) = (text.find("<?xml").or_else(|| text.find("<Error>")), text.rfind("</Error>")) else { return text.to_string() };
    let Some(code) = field("Code").filter(|_| begin < end) else { return text.to_string() };
    let said = field("Message").map(|m| format!("{code}: {m}")).unwrap_or(code);
    format!("{}{said}{}", &text[..begin], &text[end + "</Error>".len()..])
}

/// Whether listing failed because the bucket does not exist. object_store reports a listing's
/// 404 as `Generic` (only requests for one object map 404 to `NotFound`), with the server's error
/// document in its words: MinIO and AWS say `NoSuchBucket`.
fn is_missing_bucket(e: &object_store::Error) -> bool {
    let text = e.to_string();
    matches!(e, object_store::Error::NotFound { .. }) || text.contains("NoSuchBucket") || text.contains("404 Not Found")
}

/// A pooled connection idle this long is dropped rather than reused: servers close idle
/// keep-alive connections (MinIO after about 30 s), and a request sent on one they closed fails
/// at once ("error sending request"). Inside a phase connections are never idle this long.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Who a client works for: the measured sessions (no retries: stowbench's own retry policy
/// decides, and counts them) or the backend's own set-up, disk-usage and cleanup requests, which
/// measure nothing and retry a request that was never sent (a connection a restarted server
/// dropped).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Session,
    Admin,
}

impl Client {
    fn new(settings: Arc<Settings>, role: Role) -> BResult<Client> {
        // reqwest is built without a default TLS provider; install ring's once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let client_options = ClientOptions::new()
            .with_allow_http(true)
            .with_timeout(Duration::from_nanos(settings.request_timeout.0))
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_pool_idle_timeout(POOL_IDLE_TIMEOUT);
        let retry = match role {
            Role::Session => RetryConfig { max_retries: 0, retry_timeout: Duration::ZERO, ..RetryConfig::default() },
            Role::Admin => RetryConfig { max_retries: 3, retry_timeout: Duration::from_secs(30), ..RetryConfig::default() },
        };
        let store = AmazonS3Builder::new()
            .with_endpoint(&settings.endpoint.uri)
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_access_key_id(&settings.access_key)
            .with_secret_access_key(&settings.secret_key)
            .with_virtual_hosted_style_request(settings.virtual_hosted)
            .with_unsigned_payload(settings.payload_signing == PayloadSigning::Unsigned)
            .with_client_options(client_options)
            .with_retry(retry)
            .build()
            .map_err(|e| BackendError::new(ErrorKind::Other, server::context("s3", &settings.endpoint, &e.to_string())))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_nanos(settings.request_timeout.0))
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()
            .map_err(|e| BackendError::new(ErrorKind::Other, server::context("s3", &settings.endpoint, &server::chain(&e))))?;
        Ok(Client { runtime, store, http, settings })
    }

    fn error(&self, e: object_store::Error) -> BackendError {
        let kind = match &e {
            object_store::Error::NotFound { .. } => ErrorKind::NotFound,
            object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => ErrorKind::Conflict,
            object_store::Error::NotImplemented { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::Other,
        };
        let text = error_words(&e.to_string());
        let kind = if kind == ErrorKind::Other && (text.contains("timed out") || text.contains("timeout")) {
            ErrorKind::Timeout
        } else if kind == ErrorKind::Other && (text.contains("error sending request") || text.contains("connect")) {
            ErrorKind::Connection
        } else {
            kind
        };
        BackendError::new(kind, format!("s3: {}", self.settings.endpoint.secrets.scrub(&text)))
    }

    /// Checks the bucket (creating it if allowed); returns the server's `Server` header.
    fn ensure_bucket(&self, create: bool) -> BResult<String> {
        let s = &self.settings;
        let fail = |what: String| BackendError::new(ErrorKind::Connection, server::context("s3", &s.endpoint, &what));
        self.runtime.block_on(async {
            let probe = self.store.list_with_delimiter(Some(&ObjectPath::from(s.prefix.as_str()))).await;
            match probe {
                Ok(_) => {}
                Err(e) if is_missing_bucket(&e) && create => self.create_bucket().await?,
                Err(e) if is_missing_bucket(&e) => return Err(fail(format!("bucket \"{}\" does not exist; create it or set create_bucket = true", s.bucket))),
                Err(e) => return Err(fail(format!("cannot list bucket \"{}\": {}", s.bucket, error_words(&e.to_string())))),
            }
            let response = self.http.get(&s.endpoint.uri).send().await.map_err(|e| fail(e.to_string()))?;
            Ok(response.headers().get("server").and_then(|v| v.to_str().ok()).unwrap_or("unknown").to_string())
        })
    }

    /// object_store cannot create buckets: send a signed `PUT /bucket/` ourselves.
    async fn create_bucket(&self) -> BResult<()> {
        use object_store::signer::{Method, Signer};
        let s = &self.settings;
        let url = self.store.signed_url(Method::PUT, &ObjectPath::from(""), Duration::from_secs(300)).await.map_err(|e| self.error(e))?;
        let response =
            self.http.put(url.as_str()).send().await.map_err(|e| BackendError::new(ErrorKind::Connection, s.endpoint.secrets.scrub(&e.to_string())))?;
        let status = response.status();
        if !status.is_success() && status.as_u16() != 409 {
            let body = response.text().await.unwrap_or_default();
            return Err(BackendError::new(
                ErrorKind::Other,
                server::context("s3", &s.endpoint, &format!("bucket \"{}\" does not exist and creating it failed ({status}): {body}", s.bucket)),
            ));
        }
        Ok(())
    }

    /// Our object name for `key`: bytes outside [A-Za-z0-9_-] become `~XX`, the empty key is `~`,
    /// so every key is one path segment under our prefix, and no two keys share a name.
    fn path(&self, key: &str) -> ObjectPath {
        let mut name = String::with_capacity(key.len());
        for b in key.bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                name.push(b as char);
            } else {
                name.push_str(&format!("~{b:02X}"));
            }
        }
        if name.is_empty() {
            name.push('~');
        }
        ObjectPath::from_iter([self.settings.prefix.as_str(), name.as_str()])
    }

    /// Every object under our prefix (name, size).
    fn list_ours(&self) -> BResult<Vec<(ObjectPath, u64)>> {
        let prefix = ObjectPath::from(self.settings.prefix.as_str());
        self.runtime.block_on(async {
            let mut out = Vec::new();
            let mut stream = self.store.list(Some(&prefix));
            while let Some(item) = stream.next().await {
                let meta = item.map_err(|e| self.error(e))?;
                out.push((meta.location, meta.size));
            }
            Ok(out)
        })
    }
}

impl S3Backend {
    /// The incomplete uploads under our prefix: those the prefix listing finds, and those of the
    /// keys asked for by name (the open ones, and every key of the case when those are not all
    /// there may be).
    fn list_uploads(&self) -> BResult<Vec<uploads::Upload>> {
        use std::sync::atomic::Ordering::Relaxed;
        let names = names_to_ask(&self.settings.prefix, self.open_uploads.names(), self.other_writers.load(Relaxed), self.known_keys.load(Relaxed));
        self.admin.list_uploads(names)
    }
}

/// The object names whose incomplete uploads cleanup asks for one by one: the `open` ones, and
/// every key of the case (up to `uploads::MAX_KEYS_BY_NAME`) when those are not known (`None`)
/// or `other_writers` put under the prefix too.
fn names_to_ask(prefix: &str, open: Option<Vec<String>>, other_writers: bool, keys: u64) -> Vec<String> {
    let unknown = open.is_none();
    let mut names = open.unwrap_or_default();
    if unknown || other_writers {
        names.extend((0..keys.min(uploads::MAX_KEYS_BY_NAME)).map(|i| format!("{prefix}/obj-{i:010}")));
    }
    names
}

impl Backend for S3Backend {
    fn capabilities(&self) -> Capabilities {
        let s = &self.settings;
        let max = S3_MAX_OBJECT_BYTES.min(s.part_bytes.saturating_mul(10_000));
        Capabilities {
            max_object_bytes: Some(max),
            max_object_hint: Some(format!(
                "S3 allows 10,000 parts per upload and 5 TiB per object; with part_size = {} bytes that is {max} bytes; raise part_size",
                s.part_bytes
            )),
            operation_deadline: true,
            ..Capabilities::default()
        }
    }

    fn describe(&self) -> BackendInfo {
        let s = &self.settings;
        let mut options = s.endpoint.report_options(&self.options);
        if let Some(map) = options.as_object_mut() {
            map.insert("bucket".into(), s.bucket.clone().into());
            map.insert("region".into(), s.region.clone().into());
            map.insert("prefix".into(), format!("{}/", s.prefix).into());
            map.insert("multipart_threshold".into(), s.multipart_threshold_bytes.into());
            map.insert("part_size".into(), s.part_bytes.into());
            map.insert("payload_signing".into(), s.payload_signing.as_str().into());
            map.insert("retries".into(), 0.into());
        }
        let mut versions = BTreeMap::new();
        versions.insert("server".into(), self.server_header.clone());
        versions.insert("object_store-crate".into(), server::locked_version("object_store"));
        let durability = "the server acknowledged the PUT (or CompleteMultipartUpload); what that means on disk is the server's \
                          policy (MinIO: written to its drives; see docs/backends/s3.md)"
            .to_string();
        let data_paths = self.data_dir.iter().map(|d| d.join(&s.bucket).join(&s.prefix)).collect();
        BackendInfo { backend: "s3".into(), versions, options, durability, data_paths }
    }

    fn prepare(&self) -> BResult<()> {
        Ok(()) // the bucket was checked at construct; prefixes need no creation
    }

    fn open_session(&self, _worker: usize) -> BResult<Box<dyn Session>> {
        let port = self.settings.endpoint.port();
        let client = Client::new(self.settings.clone(), Role::Session)?;
        self.open_uploads.watch();
        Ok(Box::new(S3Session { client, port, body_buffer: BodyBuffer::default(), open_uploads: self.open_uploads.clone() }))
    }

    fn disk_usage(&self) -> BResult<DiskUsage> {
        let reported: u64 = self.admin.list_ours()?.iter().map(|(_, size)| size).sum();
        let mut usage = match &self.data_dir {
            Some(dir) => super::fs::disk_usage_of(&[dir.join(&self.settings.bucket).join(&self.settings.prefix)])?,
            None => DiskUsage { allocated_unknown: true, ..DiskUsage::default() },
        };
        usage.server_reported_bytes = Some(reported);
        Ok(usage)
    }

    fn cleanup(&self) -> BResult<()> {
        let ours = self.admin.list_ours()?;
        let a = &self.admin;
        a.runtime.block_on(async {
            let paths = futures_util::stream::iter(ours.into_iter().map(|(p, _)| Ok(p))).boxed();
            let mut deleted = a.store.delete_stream(paths);
            while let Some(result) = deleted.next().await {
                match result {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(a.error(e)),
                }
            }
            Ok(())
        })?;
        // Then the incomplete multipart uploads a put cut short left (none after a clean run).
        let uploads = self.list_uploads()?;
        self.admin.abort_uploads(&uploads)
    }

    fn server_objects(&self) -> BResult<Vec<String>> {
        let s = &self.settings;
        let ours = self.admin.list_ours()?;
        let uploads = self.list_uploads()?;
        let mut out = Vec::new();
        if !ours.is_empty() {
            let bytes: u64 = ours.iter().map(|(_, size)| size).sum();
            out.push(format!("s3 objects under s3://{}/{}/: {} ({bytes} bytes)", s.bucket, s.prefix, ours.len()));
        }
        if !uploads.is_empty() {
            out.push(format!("s3 incomplete multipart uploads under s3://{}/{}/: {}", s.bucket, s.prefix, uploads.len()));
        }
        Ok(out)
    }

    fn note_keys(&self, keys: u64) {
        self.known_keys.store(keys, std::sync::atomic::Ordering::Relaxed);
    }

    fn note_other_writers(&self) {
        self.other_writers.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn server_pids(&self) -> Vec<u32> {
        self.server_pid.into_iter().collect()
    }

    fn script_service(&self) -> Option<&super::restart::ScriptService> {
        self.settings.endpoint.script.as_ref()
    }
}

struct S3Session {
    client: Client,
    /// The endpoint's TCP port, whose connections an `op_timeout` cut shuts down.
    port: u16,
    /// A put's body (or part) in memory, kept for the next put. Memory fresh from the allocator
    /// is zeroed before the body is read into it, inside the timed put: 2 % of a 16 MiB put here.
    body_buffer: BodyBuffer,
    /// Shared with the backend, which looks for what a put cut short left.
    open_uploads: OpenUploads,
}

impl S3Session {
    /// Sends `body` in `part_size` parts, one in memory at a time; aborts the upload on any
    /// failure, so no half upload is left behind.
    fn put_multipart(&mut self, path: &ObjectPath, body: &mut dyn Read, len: u64) -> BResult<()> {
        let (c, buffer, open) = (&self.client, &mut self.body_buffer, &self.open_uploads);
        let part = c.settings.part_bytes;
        // Noted before the request: a create that times out may still start an upload.
        open.begun(path);
        c.runtime.block_on(async {
            let id = c.store.create_multipart(path).await.map_err(|e| c.error(e))?;
            let mut parts = Vec::new();
            let mut left = len;
            while left > 0 {
                let n = part.min(left);
                let sent = match buffer.fill(body, n) {
                    Ok(bytes) => {
                        let sent = c.put_part(path, &id, parts.len(), bytes.clone()).await;
                        buffer.give_back(bytes);
                        sent
                    }
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(part) => parts.push(part),
                    Err(e) => {
                        if c.store.abort_multipart(path, &id).await.is_ok() {
                            open.ended(path);
                        }
                        return Err(e);
                    }
                }
                left -= n;
            }
            if let Err(e) = c.store.complete_multipart(path, &id, parts).await {
                if c.store.abort_multipart(path, &id).await.is_ok() {
                    open.ended(path);
                }
                return Err(c.error(e));
            }
            open.ended(path);
            Ok(())
        })
    }
}

impl Client {
    /// One PUT of a whole object, signed as `payload_signing` says.
    async fn put_object(&self, path: &ObjectPath, bytes: Bytes) -> BResult<()> {
        match self.settings.payload_signing {
            PayloadSigning::Chunked => self.put_chunked(path.as_ref(), &[], bytes).await.map(drop),
            PayloadSigning::Whole | PayloadSigning::Unsigned => self.store.put(path, PutPayload::from(bytes)).await.map(drop).map_err(|e| self.error(e)),
        }
    }

    /// Part `index` (from 0) of multipart upload `id`, signed as `payload_signing` says.
    async fn put_part(&self, path: &ObjectPath, id: &str, index: usize, bytes: Bytes) -> BResult<PartId> {
        match self.settings.payload_signing {
            PayloadSigning::Chunked => {
                let query = [("partNumber", (index + 1).to_string()), ("uploadId", id.to_string())];
                Ok(PartId { content_id: self.put_chunked(path.as_ref(), &query, bytes).await? })
            }
            PayloadSigning::Whole | PayloadSigning::Unsigned => {
                MultipartStore::put_part(&self.store, path, &id.to_string(), index, PutPayload::from(bytes)).await.map_err(|e| self.error(e))
            }
        }
    }
}

/// Memory for one body at a time, reused from put to put: zeroed when it grows, never again.
#[derive(Default)]
struct BodyBuffer {
    spare: Vec<u8>,
}

impl BodyBuffer {
    /// Reads exactly `len` bytes of `body` into the buffer, which the result holds until
    /// `give_back`.
    fn fill(&mut self, body: &mut dyn Read, len: u64) -> BResult<Bytes> {
        let mut bytes = std::mem::take(&mut self.spare);
        let len = usize::try_from(len).map_err(|_| BackendError::new(ErrorKind::TooLarge, format!("s3: {len} bytes do not fit in memory here")))?;
        bytes.resize(len, 0); // zeroes only what grows: the rest was written before
        let mut filled = 0;
        while filled < len {
            match body.read(&mut bytes[filled..]) {
                Ok(0) => return Err(BackendError::new(ErrorKind::Io, format!("body ended {} bytes early", len - filled))),
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Bytes::from(bytes))
    }

    /// Takes the memory back once the request that sent it is over (if the HTTP stack still
    /// holds a piece of it, the next body gets fresh memory instead).
    fn give_back(&mut self, bytes: Bytes) {
        if let Ok(unique) = bytes.try_into_mut() {
            self.spare = Vec::from(unique);
        }
    }
}

impl Session for S3Session {
    fn put(&mut self, key: &str, body: &mut dyn Read, len: u64) -> BResult<()> {
        let c = &self.client;
        let max = S3_MAX_OBJECT_BYTES.min(c.settings.part_bytes.saturating_mul(10_000));
        if len > max {
            return Err(BackendError::new(ErrorKind::TooLarge, format!("s3: {len} bytes exceed {max} (10,000 parts of part_size)")));
        }
        let path = c.path(key);
        if len >= c.settings.multipart_threshold_bytes {
            return self.put_multipart(&path, body, len);
        }
        let bytes = self.body_buffer.fill(body, len)?;
        let sent = c.runtime.block_on(c.put_object(&path, bytes.clone()));
        self.body_buffer.give_back(bytes);
        sent
    }

    fn get(&mut self, key: &str, sink: &mut dyn Write) -> BResult<u64> {
        let c = &self.client;
        let path = c.path(key);
        c.runtime.block_on(async {
            let result = c.store.get(&path).await.map_err(|e| c.error(e))?;
            let expected = result.meta.size;
            let mut stream = result.into_stream();
            let mut total = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| c.error(e))?;
                sink.write_all(&chunk)?;
                total += chunk.len() as u64;
            }
            if total != expected {
                return Err(BackendError::new(ErrorKind::Corrupt, format!("s3: {key:?} announced {expected} bytes, sent {total}")));
            }
            Ok(total)
        })
    }

    fn delete(&mut self, key: &str) -> BResult<()> {
        // S3 deletes of missing keys succeed silently: ask first, so a missing key is NotFound.
        self.head(key)?;
        let c = &self.client;
        c.runtime.block_on(c.store.delete(&c.path(key))).map_err(|e| c.error(e))
    }

    fn head(&mut self, key: &str) -> BResult<u64> {
        let c = &self.client;
        let meta = c.runtime.block_on(c.store.head(&c.path(key))).map_err(|e| c.error(e))?;
        Ok(meta.size)
    }

    /// The HTTP client pools its connections in the background, so the cut reaches every
    /// connection of this process to the endpoint's port.
    fn cut_handle(&self) -> Option<super::sockets::CutHandle> {
        Some(super::sockets::every_connection_to(self.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_is_open_from_before_its_create_until_it_completes_or_is_aborted() {
        let open = OpenUploads::default();
        assert_eq!(open.names(), None, "no session yet: nothing is known");
        open.watch();
        assert_eq!(open.names(), Some(vec![]));
        let (a, b) = (ObjectPath::from("p/obj-0000000001"), ObjectPath::from("p/obj-0000000002"));
        open.begun(&a);
        open.clone().begun(&b); // each session holds a clone
        open.ended(&a);
        assert_eq!(open.names(), Some(vec!["p/obj-0000000002".to_string()]));
    }

    #[test]
    fn cleanup_asks_for_the_open_uploads_by_name_and_for_every_key_only_when_others_may_have_left_some() {
        let open = |names: &[&str]| Some(names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        let every = |n: u64| (0..n).map(|i| format!("p/obj-{i:010}")).collect::<Vec<_>>();
        // A backend rebuilt from a killed run's record opened no session: every key of the case.
        assert_eq!(names_to_ask("p", None, false, 3), every(3));
        // A running case: only what its sessions began and did not see end; none after a clean run.
        assert_eq!(names_to_ask("p", open(&[]), false, 100_000), Vec::<String>::new());
        assert_eq!(names_to_ask("p", open(&["p/obj-0000000007"]), false, 100_000), vec!["p/obj-0000000007"]);
        // Other ranks put under the prefix too: theirs are not known here.
        let mut both = vec!["p/x".to_string()];
        both.extend(every(2));
        assert_eq!(names_to_ask("p", open(&["p/x"]), true, 2), both);
        assert_eq!(names_to_ask("p", None, false, u64::MAX).len() as u64, uploads::MAX_KEYS_BY_NAME);
    }

    #[test]
    fn an_s3_error_document_reads_as_its_code_and_message() {
        let text = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code>\
                    <Message>Check your key.</Message><RequestId>18EB</RequestId></Error>";
        assert_eq!(error_words(text), "Server returned non-2xx status code: 403 Forbidden: SignatureDoesNotMatch: Check your key.");
        assert_eq!(error_words("error sending request"), "error sending request");
        assert_eq!(error_words("<Error><Message>m</Message></Error>"), "<Error><Message>m</Message></Error>", "no code: as it was");
    }

    #[test]
    fn a_body_buffer_is_reused_and_refuses_a_short_body() {
        let mut buffer = BodyBuffer::default();
        let first = buffer.fill(&mut &[1u8; 100][..], 100).unwrap();
        let memory = first.as_ptr();
        buffer.give_back(first);
        let second = buffer.fill(&mut &[2u8; 60][..], 60).unwrap();
        assert_eq!((second.as_ptr(), &second[..]), (memory, &[2u8; 60][..]), "the same memory, holding the new body");
        let still_sent = second.clone();
        buffer.give_back(second);
        let third = buffer.fill(&mut &[3u8; 10][..], 10).unwrap();
        assert_ne!(third.as_ptr(), memory, "memory a request still holds is never reused");
        assert_eq!((&third[..], &still_sent[..]), (&[3u8; 10][..], &[2u8; 60][..]));
        let err = buffer.fill(&mut &[4u8; 5][..], 8).unwrap_err();
        assert!(err.message.contains("body ended 3 bytes early"), "{}", err.message);
    }
}
