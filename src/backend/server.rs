//! Plumbing shared by the server backends (postgres, mariadb, s3, gridfs): where the connection
//! URI comes from, how secrets are kept out of every output, which local process is the server,
//! which server-side names a case owns, and which client library versions are compiled in.
//!
//! Nothing here may print or store a secret, and nothing here changes another process: finding a
//! server's pid only reads /proc.

use super::options::Options;
use super::registry::ServerKind;
use super::Namespace;
use std::path::{Path, PathBuf};

/// What replaces a secret in every output.
pub const REDACTED: &str = "<redacted>";

/// Where a backend's server lives and how it was found.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The connection URI or endpoint URL, secrets included: never print it, use `shown`.
    pub uri: String,
    /// The URI with its password replaced by `<redacted>`, for messages and reports.
    pub shown: String,
    /// Where the URI came from: "option uri" or "env STOWBENCH_PG_URI".
    pub source: String,
    /// Whether the URI came from the default environment variable, so the companion variables
    /// (`<PREFIX>_PID`, `<PREFIX>_DATA`) written by scripts/services.sh describe the same server.
    pub from_default_env: bool,
    /// Every secret this backend knows (password from the URI, keys from the environment).
    pub secrets: Secrets,
    /// The server, when scripts/services.sh started it (cold read phases restart it).
    pub script: Option<super::restart::ScriptService>,
    /// The endpoint options as the target gave them.
    given: EndpointOptions,
    /// The target's name, for messages.
    target: String,
    /// The registry's companion variables and default port for this server.
    pid_env: &'static str,
    data_env: &'static str,
    default_port: u16,
}

crate::backend_options! {
    /// The endpoint block every server backend takes (declared once here; the backend's
    /// registry entry, `ServerKind`, supplies its variable names and default port).
    pub struct EndpointOptions {
        uri: Option<String>, "" => "connection URI or endpoint URL with host and port (its password is redacted everywhere); overrides uri_env",
        uri_env: Option<String>, "<the backend's variable>" => "environment variable holding the URI when option uri is absent",
        server_pid: Option<u64>, "<found>" => "server pid for CPU/memory figures (default: the <PREFIX>_PID variable scripts/services.sh writes, the server's own pid file where it names one, or the local listener on the URI's port)",
        data_dir: Option<String>, "<found>" => "the server's local data directory, for allocated bytes (default: what the server reports where it does, or the <PREFIX>_DATA variable)",
    }
}

crate::backend_options! {
    /// `connect_timeout`, for the server backends whose client takes one (all but s3, whose
    /// `request_timeout` bounds each request, connect included).
    pub struct ConnectTimeout {
        connect_timeout: crate::units::Nanos = "10s" => "give up connecting (for MongoDB: and selecting a server) after this long",
    }
}

/// The endpoint block's documentation for a server whose URI variable is `uri_env` (shown as
/// `uri_env`'s default).
pub const fn endpoint_docs(uri_env: &'static str) -> [super::options::OptionDoc; 4] {
    let d = EndpointOptions::DOCS;
    let mut docs = [d[0], d[1], d[2], d[3]];
    docs[1].default = uri_env;
    docs
}

/// Resolves the URI from option `uri` or the environment variable named by `uri_env`.
pub fn endpoint(options: &Options, backend: &str, kind: &ServerKind) -> Result<Endpoint, String> {
    let given = EndpointOptions::read(options)?;
    let env_name = given.uri_env.clone().unwrap_or_else(|| kind.uri_env.to_string());
    let (uri, source) = match &given.uri {
        Some(uri) => (uri.clone(), "option uri".to_string()),
        None => match std::env::var(&env_name) {
            Ok(uri) if !uri.trim().is_empty() => (uri.trim().to_string(), format!("env {env_name}")),
            _ => {
                return Err(format!(
                    "target \"{}\": backend {backend} needs a server: set option uri = \"...\" or the environment variable \
                     {env_name} (scripts/services.sh start && eval \"$(scripts/services.sh env)\" starts local test servers)",
                    options.target
                ))
            }
        },
    };
    // Another backend's URI ("mysql://" given to postgres) is named as such, before any driver
    // reads it in its own words. Text without a scheme is left to the driver (libpq's
    // "host=… user=…" strings), and mongodb+srv:// to gridfs, which says why it cannot take it.
    let explained_elsewhere = uri.starts_with("mongodb+srv://");
    if let Some((scheme, _)) = uri.split_once("://").filter(|_| !explained_elsewhere && !kind.schemes.iter().any(|s| uri.starts_with(s))) {
        let why = format!("a {scheme}:// URI is not a {backend} URI; give one starting with {}", kind.schemes.join(" or "));
        return Err(match given.uri.is_some() {
            true => options.bad("uri", why),
            false => format!("target \"{}\": {env_name} holds {}: {why}", options.target, redact_uri(&uri)),
        });
    }
    let from_default_env = given.uri.is_none() && env_name == kind.uri_env;
    let mut secrets = Secrets::from_uri(&uri);
    if !is_showable(&uri) {
        // Text that is no URI may be a password put where the URI belongs: never shown.
        secrets.add(&uri);
    }
    let (target, pid_env, data_env, default_port) = (options.target.clone(), kind.pid_env, kind.data_env, kind.default_port);
    let mut endpoint =
        Endpoint { shown: shown_uri(&uri), uri, source, from_default_env, secrets, script: None, given, target, pid_env, data_env, default_port };
    endpoint.script = super::restart::ScriptService::find(&endpoint, kind.uri_env);
    Ok(endpoint)
}

impl Endpoint {
    /// The value of a companion variable like STOWBENCH_PG_PID, only when the URI came from the
    /// default variable (otherwise it would describe another server).
    pub fn companion_env(&self, name: &str) -> Option<String> {
        self.from_default_env.then(|| std::env::var(name).ok()).flatten().filter(|v| !v.trim().is_empty())
    }

    /// A server backend's options for the report: as the target gave them (secrets redacted), with
    /// the URI in use (its password redacted) and where it came from.
    pub fn report_options(&self, options: &Options) -> serde_json::Value {
        let mut json = options.redacted_json();
        if let Some(map) = json.as_object_mut() {
            map.insert("uri".into(), self.shown.clone().into());
            map.insert("uri_source".into(), self.source.clone().into());
        }
        json
    }

    /// Host and port of the URI (`default_port` when none is written).
    pub fn host_port(&self, default_port: u16) -> Option<(String, u16)> {
        host_port(&self.uri, default_port)
    }

    /// The server's TCP port: the URI's, else the server's default.
    pub fn port(&self) -> u16 {
        self.host_port(self.default_port).map_or(self.default_port, |(_, port)| port)
    }

    /// The server's root pid: option `server_pid`, else the companion `<PREFIX>_PID` variable, else
    /// `discovered` (a backend-specific guess), else the local process listening on the URI's port.
    pub fn server_pid(&self, discovered: Option<u32>) -> Result<Option<u32>, String> {
        if let Some(pid) = self.given.server_pid {
            let pid = u32::try_from(pid)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("target \"{}\": option \"server_pid\" must be a positive integer", self.target))?;
            if !pid_alive(pid) {
                return Err(format!("target \"{}\": option \"server_pid\" = {pid}: no such process", self.target));
            }
            return Ok(Some(pid));
        }
        let Some(port) = self.host_port(self.default_port).filter(|(h, _)| is_local_host(h)).map(|(_, p)| p) else {
            return Ok(None); // a remote server's processes cannot be sampled from here
        };
        let port = Some(port);
        let from_env = self.companion_env(self.pid_env).and_then(|p| p.trim().parse::<u32>().ok()).filter(|p| pid_alive(*p));
        let listening = |pid: u32| port.is_none_or(|port| tree_listens_on(pid, port));
        Ok(from_env.filter(|p| listening(*p)).or(discovered.filter(|p| pid_alive(*p))).or_else(|| port.and_then(pid_listening_on)))
    }

    /// The server's local data directory: option `data_dir`, else `asked` (what the server says,
    /// if that directory exists here), else the companion `<PREFIX>_DATA` variable.
    pub fn data_dir(&self, asked: Option<String>) -> Result<Option<PathBuf>, String> {
        if let Some(dir) = &self.given.data_dir {
            let dir = PathBuf::from(dir);
            if !dir.is_dir() {
                return Err(format!("target \"{}\": option \"data_dir\": {} is not a directory", self.target, dir.display()));
            }
            return Ok(Some(dir));
        }
        let local = self.host_port(0).is_some_and(|(h, _)| is_local_host(&h));
        let asked = asked.map(PathBuf::from).filter(|d| local && d.is_dir());
        Ok(asked.or_else(|| self.companion_env(self.data_env).map(PathBuf::from).filter(|d| d.is_dir())))
    }
}

/// Secret strings a backend must never show; `scrub` replaces them in any text.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The password in a URI's user-info and in `password=`/`secret=` query parameters, both as
    /// written and percent-decoded (drivers may echo either form).
    pub fn from_uri(uri: &str) -> Secrets {
        let mut s = Secrets::default();
        if let Some(password) = userinfo_password(uri) {
            s.add(password);
        }
        // A libpq "key=value" string: `password=...` or `password='...'`.
        if !uri.contains("://") {
            for (key, value) in key_value_pairs(uri) {
                if is_secret_name(key) {
                    s.add(value.trim_matches('\''));
                }
            }
            return s;
        }
        if let Some((_, query)) = uri.split_once('?') {
            for pair in query.split('&') {
                if let Some((k, v)) = pair.split_once('=') {
                    if is_secret_name(k) {
                        s.add(v);
                    }
                }
            }
        }
        s
    }

    /// Adds every secret of `other`.
    pub fn extend(&mut self, other: &Secrets) {
        for secret in &other.0 {
            self.add(secret);
        }
    }

    /// Adds a secret (and its percent-decoded form); empty strings are ignored.
    pub fn add(&mut self, secret: &str) {
        for form in [secret.to_string(), percent_decode(secret)] {
            if !form.is_empty() && !self.0.contains(&form) {
                self.0.push(form);
            }
        }
        self.0.sort_by_key(|s| std::cmp::Reverse(s.len())); // longest first, so overlaps vanish whole
    }

    /// `text` with every known secret and every URI password replaced by `<redacted>`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = redact(text);
        for secret in &self.0 {
            out = match secret.chars().count() < SHORT_SECRET_CHARS {
                true => replace_standalone(&out, secret),
                false => out.replace(secret.as_str(), REDACTED),
            };
        }
        out
    }
}

/// Secrets shorter than this are hidden only where they stand alone: a password "p" cut out of
/// every word would leave "<redacted>ostgres://" in each message, and the words around it are
/// what a driver writes around a password it echoes (`:p@`, `password=p `, quotes).
const SHORT_SECRET_CHARS: usize = 6;

/// `text` with each occurrence of `secret` not touching a letter or digit on either side replaced.
fn replace_standalone(text: &str, secret: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(secret) {
        let (before, after) = (&rest[..at], &rest[at + secret.len()..]);
        let touches = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        out.push_str(before);
        out.push_str(match touches(before.chars().next_back()) || touches(after.chars().next()) {
            true => secret,
            false => REDACTED,
        });
        rest = after;
    }
    out.push_str(rest);
    out
}

fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password")
        || n.contains("secret")
        || n.contains("token")
        || n.contains("signature")
        // MongoDB's AWS_SESSION_TOKEN:... travels inside this one.
        || n == "authmechanismproperties"
        || n == "pass"
        || n == "pwd"
}

/// The password part of `scheme://user:password@host`, if any. Users type passwords with `/`,
/// `?`, `#` or `@` unescaped, so the user-info ends at the last `@` (unless the part before its
/// first `:` holds a `/`, `?` or `#`: then that `@` is in a path or query). An `@` in the query
/// of a URI without a password makes more than the password hidden: safe, if untidy.
fn userinfo_password(uri: &str) -> Option<&str> {
    let rest = &uri[uri.find("://")? + 3..];
    let userinfo = &rest[..userinfo_end(rest)?];
    userinfo.split_once(':').map(|(_, p)| p).filter(|p| !p.is_empty())
}

/// Where the user-info of `rest` (a URI after its `scheme://`) ends: the `@` before the host, if
/// any (see `userinfo_password`).
fn userinfo_end(rest: &str) -> Option<usize> {
    let last = rest.rfind('@');
    match last.map(|at| &rest[..at]).and_then(|whole| whole.split_once(':')) {
        Some((user, _)) if !user.contains(['/', '?', '#']) => last,
        _ => rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())].rfind('@'),
    }
}

/// The `key=value` pairs of a libpq connection string (values may be single-quoted, with spaces).
fn key_value_pairs(text: &str) -> Vec<(&str, &str)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim_start();
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let end = match after.strip_prefix('\'') {
            Some(quoted) => quoted.find('\'').map_or(after.len(), |close| close + 2),
            None => after.find(char::is_whitespace).unwrap_or(after.len()),
        };
        pairs.push((key, &after[..end]));
        rest = after[end..].trim_start();
    }
    pairs
}

/// Why `uri` cannot be read when its authority (between `scheme://` and the first `/`) holds
/// more than one `@`: a password with an `@` written as is, which drivers read as part of the
/// host ("failed to lookup address information"). Says so without quoting the password.
pub fn unencoded_at(uri: &str) -> Option<String> {
    let rest = &uri[uri.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    (authority.matches('@').count() > 1).then(|| {
        "its user and host part holds more than one @: write an @ inside the user name or password as %40 (and : / ? # as %3A %2F %3F %23)".to_string()
    })
}

/// What the user-and-host part of `scheme://...` gets wrong before any driver reads it: an
/// unencoded @ (`unencoded_at`), or a port that is no port number. A port of 99999 or "abc" read
/// "invalid value for option `port`" (postgres) or "URL ParseError { invalid port number }"
/// (mariadb); port 0 passed, and was reported as a server that did not answer.
pub fn authority_mistake(uri: &str) -> Option<String> {
    unencoded_at(uri).or_else(|| bad_port(uri))
}

/// The first port of the URI's host list (`h1:5432,h2:5433`) that is not a number from 1 to
/// 65535, said in the words the s3 backend uses. An empty port (`h:`) is the default one.
fn bad_port(uri: &str) -> Option<String> {
    hosts_and_ports(uri).into_iter().flatten().find_map(|(_, port)| port.filter(|p| !p.is_empty()).and_then(port_mistake))
}

/// Why `port` (as written in a URI) is no port number, in the words every server backend uses.
pub fn port_mistake(port: &str) -> Option<String> {
    (!matches!(port.parse::<u16>(), Ok(1..))).then(|| format!("its port \"{port}\" is not a port number from 1 to 65535"))
}

/// Each host of `scheme://[user@]h1[:p1][,h2[:p2]…]/...` with its port as written (`None` where
/// none is), an IPv6 host in brackets (`[::1]:5432`); `None` for a host whose bracket is not
/// closed. Empty without `://`.
fn hosts_and_ports(uri: &str) -> Vec<Option<(&str, Option<&str>)>> {
    let Some(scheme_end) = uri.find("://") else { return Vec::new() };
    let rest = &uri[scheme_end + 3..];
    let rest = userinfo_end(rest).map_or(rest, |at| &rest[at + 1..]);
    let hosts = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    hosts.split(',').map(host_and_port).collect()
}

/// `host[:port]` or `[v6][:port]` as (host, port as written); `None` for an unclosed bracket.
fn host_and_port(hostport: &str) -> Option<(&str, Option<&str>)> {
    match hostport.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(host, after)| (host, after.strip_prefix(':'))),
        None => Some(hostport.rsplit_once(':').map_or((hostport, None), |(host, port)| (host, Some(port)))),
    }
}

/// What stands for a URI that is not shown (`shown_uri`).
pub const NOT_SHOWN: &str = "<text that is not a URI, not shown>";

/// A URI as messages and reports show it: its password redacted (`redact_uri`) when it reads as
/// a URI or as a libpq `key=value` string; otherwise `NOT_SHOWN`, as such text may well be a
/// password put where the URI belongs (`export PG_URI=hunter2`), and there is no telling which
/// part of it is secret.
pub fn shown_uri(uri: &str) -> String {
    match is_showable(uri) {
        true => redact_uri(uri),
        false => NOT_SHOWN.into(),
    }
}

/// Whether `redact_uri` knows where the secrets of `uri` are: a `scheme://` URI, or a libpq
/// connection string whose every word is a lower-case `key=value` and which names a host, port,
/// database or user.
fn is_showable(uri: &str) -> bool {
    if uri.contains("://") {
        return true;
    }
    let pairs = key_value_pairs(uri);
    let words_are_pairs = pairs.iter().all(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
    let names_a_place = pairs.iter().any(|(k, _)| ["host", "hostaddr", "port", "dbname", "user"].contains(k));
    // A word without `=` joins the next key ("a b=c" reads as key "a b"), which fails the test.
    !pairs.is_empty() && words_are_pairs && names_a_place
}

/// A URI with the password in its user-info and secret-named query values replaced by
/// `<redacted>`: `postgres://user:<redacted>@host/db`.
pub fn redact_uri(uri: &str) -> String {
    if !uri.contains("://") {
        // A libpq "key=value" string.
        let pairs = key_value_pairs(uri);
        if !pairs.is_empty() {
            let shown: Vec<String> = pairs.iter().map(|(k, v)| if is_secret_name(k) { format!("{k}={REDACTED}") } else { format!("{k}={v}") }).collect();
            return shown.join(" ");
        }
    }
    let mut out = uri.to_string();
    if let Some(password) = userinfo_password(uri) {
        let start = password.as_ptr() as usize - uri.as_ptr() as usize;
        out.replace_range(start..start + password.len(), REDACTED);
    }
    if let Some((head, query)) = out.clone().split_once('?') {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if is_secret_name(k) => format!("{k}={REDACTED}"),
                _ => pair.to_string(),
            })
            .collect();
        out = format!("{head}?{}", pairs.join("&"));
    }
    out
}

/// Redacts every URI password and every `password=VALUE` / `password: VALUE` pair in free text.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if word.contains("://") {
            let start = word.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
            out.push_str(&word[..start]);
            out.push_str(&redact_uri(&word[start..]));
        } else if let Some((k, _)) = word.split_once('=').filter(|(k, v)| is_secret_name(k) && !v.is_empty()) {
            out.push_str(&format!("{k}={REDACTED}"));
        } else {
            out.push_str(word);
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Host and port of `scheme://[user@]host[:port]/...`; `[::1]:5432` style IPv6 works.
pub fn host_port(uri: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = hosts_and_ports(uri).into_iter().next()??; // multi-host URIs: the first host
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some((host.to_string(), port))
}

/// How long `stowbench backends` and the checks that tell "nothing answers" from "refused" wait
/// for a server: a listing must not hang on one, and a server on this network answers in less.
pub const PROBE_TIMEOUT: crate::units::Nanos = crate::units::Nanos(5_000_000_000);

/// What a server backend says of a URI its driver cannot use at all, found before connecting:
/// stowbench's own words, so `validate`, `run` and `backends --uri` call it bad input (exit 2)
/// whether or not a server answers there.
pub const UNUSABLE_URI: &str = "is not a usable URI";

impl Endpoint {
    /// Why the URI cannot be used, located where it was given: at the target's `uri` line, or
    /// naming the environment variable it came from. `why` is scrubbed of every known secret
    /// (a short one only where it stands alone, so stowbench's own words survive).
    /// Text that is not a URI is never shown (`shown_uri`): the message names the variable that
    /// holds it, at the `uri_env` line when the job names the variable.
    pub fn unusable(&self, options: &super::options::Options, why: impl std::fmt::Display) -> String {
        // A driver may quote what it could not read: the secrets, and text never shown, go.
        let why = self.secrets.scrub(&why.to_string());
        let shown = match self.shown.as_str() {
            NOT_SHOWN => "the value (not shown: it may be a secret)".to_string(),
            shown => shown.to_string(),
        };
        match (self.given.uri.is_some(), self.given.uri_env.is_some()) {
            (true, _) => options.bad("uri", format!("{shown} {UNUSABLE_URI}: {why}")),
            (false, true) => options.bad("uri_env", format!("{shown} of {} {UNUSABLE_URI}: {why}", self.source)),
            (false, false) => format!("target \"{}\": {shown} of {} {UNUSABLE_URI}: {why}", options.target, self.source),
        }
    }
}

/// What `within_connect_timeout` says of a listener that never answered: stowbench's own words,
/// which tell the machine's trouble (exit 3) from a mistake in the job without reading a driver's.
pub const NO_ANSWER: &str = "accepted the connection but did not answer within";

/// Runs `connect` on a thread of its own and waits for it at most `timeout`. A driver's connect
/// timeout bounds the TCP connection only: a listener that accepts and never answers (a wrong
/// port, a hung server) would hold the handshake, and `stowbench validate` with it, forever. On
/// time out the thread is left behind, blocked on its own socket (it holds nothing else), and the
/// caller gets a connection error naming the endpoint.
pub fn within_connect_timeout<T: Send + 'static>(
    backend: &str,
    endpoint: &Endpoint,
    timeout: std::time::Duration,
    connect: impl FnOnce() -> super::BResult<T> + Send + 'static,
) -> super::BResult<T> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new().name("stowbench-connect".into()).spawn(move || {
        // A driver that panics on input it cannot read must not pass for a silent server: the
        // panic's words go back as the thread's answer.
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(connect)).map_err(|panic| panic_words(&*panic));
        let _ = sender.send(answer);
    });
    if let Err(e) = spawned {
        return Err(super::BackendError::new(super::ErrorKind::Other, format!("cannot start a thread to connect: {e}")));
    }
    let unexpected = |why: String| {
        Err(super::BackendError::new(
            super::ErrorKind::Other,
            context(
                backend,
                endpoint,
                &format!("cannot connect: the connection attempt failed unexpectedly ({why}); this is a bug in stowbench or its client library"),
            ),
        ))
    };
    match receiver.recv_timeout(timeout) {
        Ok(Ok(answer)) => answer,
        Ok(Err(panic)) => unexpected(format!("it panicked: {panic}")),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => unexpected("it ended without an answer".into()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => no_answer(backend, endpoint, timeout),
    }
}

/// A panic's message, when it carries one (`panic!` with a string or a format).
fn panic_words(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => text.to_string(),
        (_, Some(text)) => text.clone(),
        _ => "no message".into(),
    }
}

/// The error of a connection attempt that did not end within `timeout`.
fn no_answer<T>(backend: &str, endpoint: &Endpoint, timeout: std::time::Duration) -> super::BResult<T> {
    let at = endpoint.host_port(endpoint.default_port).map(|(h, p)| format!(" at {h}:{p}")).unwrap_or_default();
    Err(super::BackendError::new(
        super::ErrorKind::Connection,
        context(
            backend,
            endpoint,
            &format!(
                "cannot connect: something{at} {NO_ANSWER} {} (connect_timeout): \
                 check that the URI's port is the server's and that the server is not hung",
                crate::units::Nanos(timeout.as_nanos() as u64)
            ),
        ),
    ))
}

/// Whether `host` names this machine (loopback, or an empty host meaning a local socket).
pub fn is_local_host(host: &str) -> bool {
    host.is_empty() || host == "localhost" || host == "::1" || host.starts_with("127.")
}

/// Whether process `pid` exists.
pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Socket inodes listening on TCP `port` (IPv4 and IPv6), from /proc/net/tcp{,6}.
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else { continue };
            let local_port = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && local_port == Some(port) {
                inodes.extend(inode.parse::<u64>().ok().filter(|i| *i != 0));
            }
        }
    }
    inodes
}

/// Whether process `pid` holds one of `inodes` as an open file.
fn holds_socket(pid: u32, inodes: &[u64]) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .ok()
            .and_then(|t| t.to_str().and_then(|t| t.strip_prefix("socket:[")).and_then(|t| t.strip_suffix(']')).and_then(|t| t.parse().ok()))
            .is_some_and(|inode: u64| inodes.contains(&inode))
    })
}

fn parent_of(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// The topmost local process holding the socket that listens on TCP `port` (the server's root:
/// PostgreSQL's postmaster, not one of its backends). Needs permission to read /proc/PID/fd.
pub fn pid_listening_on(port: u16) -> Option<u32> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut pid = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).find(|p| holds_socket(*p, &inodes))?;
    while let Some(parent) = parent_of(pid).filter(|p| *p > 1 && holds_socket(*p, &inodes)) {
        pid = parent;
    }
    Some(pid)
}

/// Whether `pid` or one of its descendants listens on TCP `port` (checks that a pid given by the
/// environment still belongs to the server the URI names).
fn tree_listens_on(pid: u32, port: u16) -> bool {
    let inodes = listening_inodes(port);
    !inodes.is_empty() && crate::sampler::process_tree(pid).into_iter().any(|p| holds_socket(p, &inodes))
}

/// The names a case owns on a server: the namespace name plus a hash of the run id and the
/// namespace directory (unique on this machine while it exists), so two runs, two cases, or two
/// test processes pointed at one server never share a table, prefix or bucket, and cleanup can
/// only reach the current namespace's own objects. At most 48 characters of [a-z0-9_].
pub fn owned_name(ns: &Namespace) -> String {
    let identity = format!("{}\n{}", ns.run_id, ns.dir.display());
    let salt = crate::hash::xxh3_64(identity.as_bytes()) as u32;
    let mut base = ns.name.clone();
    base.truncate(38);
    format!("{base}_{salt:08x}")
}

/// The ownership note a backend writes on the tables it makes (a PostgreSQL or MariaDB table
/// comment): the run and the owned name. A table with our name but another note is not ours:
/// stowbench neither writes into it nor removes it when cleaning up from a record.
pub fn owner_note(ns: &Namespace) -> String {
    format!("stowbench run {} namespace {}", super::namespace::safe_name(&ns.run_id), owned_name(ns))
}

/// The version of crate `name` as locked in Cargo.lock at build time ("?" if absent).
pub fn locked_version(name: &str) -> String {
    const LOCK: &str = include_str!("../../Cargo.lock");
    let needle = format!("name = \"{name}\"\nversion = \"");
    LOCK.find(&needle).and_then(|i| LOCK[i + needle.len()..].split('"').next()).unwrap_or("?").to_string()
}

/// Allocated bytes, apparent bytes and file count of `files` (missing files count zero).
pub fn usage_of_files(files: &[PathBuf]) -> super::DiskUsage {
    use std::os::unix::fs::MetadataExt;
    let mut usage = super::DiskUsage::default();
    for f in files {
        if let Ok(meta) = std::fs::metadata(f) {
            usage.allocated_bytes += meta.blocks() * 512;
            usage.apparent_bytes += meta.len();
            usage.files += 1;
        }
    }
    usage
}

/// A message naming the backend and the redacted endpoint: "postgres at postgres://u:<redacted>@h/db: ...".
pub fn context(backend: &str, endpoint: &Endpoint, what: &str) -> String {
    format!("{backend} at {} ({}): {}", endpoint.shown, endpoint.source, endpoint.secrets.scrub(what))
}

/// An error and its chain of causes, "a: b: c" (drivers often keep the useful part in a source).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text = format!("{text}: {next}");
        }
        source = s.source();
    }
    text
}

/// The environment variable a server backend reads its URI from by default (None for backends
/// without a server).
pub fn default_uri_env(backend: &str) -> Option<&'static str> {
    super::registry::server_kind(backend).map(|s| s.uri_env)
}

/// Whether `backend` talks to a server (postgres, mariadb, s3, gridfs).
pub fn is_server_backend(backend: &str) -> bool {
    super::registry::server_kind(backend).is_some()
}

/// For a server backend whose target names no server (no `uri` option, and its URI variable is
/// unset or empty): why, and the command that would enable it. `None` when configured, or not a
/// server backend.
pub fn unconfigured(backend: &str, options: &Options) -> Option<(String, String)> {
    let probe = super::registry::server_kind(backend)?;
    // Options that do not read are left for the backend's own construction to report.
    let given = EndpointOptions::read(options).ok()?;
    if given.uri.is_some() {
        return None;
    }
    let env_name = given.uri_env.unwrap_or_else(|| probe.uri_env.to_string());
    if std::env::var(&env_name).is_ok_and(|v| !v.trim().is_empty()) {
        return None;
    }
    Some((
        format!("no {backend} server configured: {env_name} is not set"),
        format!("scripts/services.sh start && eval \"$(scripts/services.sh env)\" (local test servers), or export {env_name}={}...", probe.schemes[0]),
    ))
}

/// For a server backend, one line saying whether its server answers and which version it is:
/// the `uri` given on the command line when its scheme fits, else the default environment
/// variable. None for backends without a server. Secrets never appear in the line.
pub fn reachability(backend: &str, uri: Option<&str>) -> Option<(String, Reach)> {
    let p = super::registry::server_kind(backend)?;
    let (uri, source) = match uri {
        Some(u) if p.schemes.iter().any(|s| u.starts_with(s)) => (u.to_string(), "--uri".to_string()),
        // The URI asked about is another backend's: this one's server is not what was asked.
        Some(_) => return Some((format!("not checked: --uri is not a {} URI ({})", backend, p.schemes.join(", ")), Reach::NotChecked)),
        None => match std::env::var(p.uri_env) {
            Ok(u) if !u.trim().is_empty() => (u.trim().to_string(), format!("env {}", p.uri_env)),
            _ => return Some((format!("not configured: set {} or pass --uri {}...", p.uri_env, p.schemes[0]), Reach::NotChecked)),
        },
    };
    let mut secrets = Secrets::from_uri(&uri);
    if !is_showable(&uri) {
        secrets.add(&uri);
    }
    let shown = shown_uri(&uri);
    Some(match (p.probe)(&uri) {
        Ok(version) => (format!("reachable at {shown} ({source}): {}", secrets.scrub(&version)), Reach::Reachable),
        Err(e) => {
            // The probe's message names the server as its own context: once is enough.
            let e = e.strip_prefix(&format!("{backend} at {shown} (option uri): ")).unwrap_or(&e);
            // The probe's stand-in target is not the user's.
            let e = e.strip_prefix("target \"probe\": ").unwrap_or(e);
            // The backend's own words on a URI it cannot use: the reason alone (the line names the URI).
            let unusable = e.find(UNUSABLE_URI).map(|at| e[at + UNUSABLE_URI.len()..].trim_start_matches(':').trim_start());
            let e = unusable.unwrap_or(e);
            // A URI whose host or port cannot be read is bad input, not a server that is down.
            // Only libpq reads an empty host (the local socket, or a host in the query string).
            let readable = host_port(&uri, p.default_port).filter(|(host, _)| !host.is_empty() || p.schemes[0] == "postgres://");
            let Some(_) = readable else {
                // The general form, unless the backend already said which form it takes.
                let form = match e.contains("give ") {
                    true => String::new(),
                    false => {
                        format!("; its host or port cannot be read: give {}user@host:port/... (percent-encode a / ? # or @ in the password)", p.schemes[0])
                    }
                };
                return Some((format!("INVALID URI {shown} ({source}): {}{form}", secrets.scrub(e)), Reach::Invalid));
            };
            if unusable.is_some() {
                return Some((format!("INVALID URI {shown} ({source}): {}", secrets.scrub(e)), Reach::Invalid));
            }
            let (state, why) = match nothing_answers(&uri, p.default_port) {
                None if e.contains(NO_ANSWER) => ("NOT ANSWERING", String::new()),
                None => ("REFUSED (the server answers, but not to this URI)", String::new()),
                Some(nothing) => ("UNREACHABLE", format!(" ({})", nothing.said_beside(e))),
            };
            (format!("{state} at {shown} ({source}): {}{why}", secrets.scrub(e)), Reach::Unreachable)
        }
    })
}

/// Nothing accepting a TCP connection where a URI points: the place and the system's reason.
pub struct NothingAnswers {
    /// HOST:PORT.
    pub at: String,
    /// Why the connection failed ("Connection refused (os error 111)").
    pub why: String,
}

impl NothingAnswers {
    /// "nothing answers at HOST:PORT: why", without the reason when `message` already gives it.
    pub fn said_beside(&self, message: &str) -> String {
        match message.contains(&self.why) {
            true => format!("nothing answers at {}", self.at),
            false => format!("nothing answers at {}: {}", self.at, self.why),
        }
    }
}

/// Whether nothing accepts a TCP connection at `uri`'s host and port (`default_port` when it
/// names none); None when something does, or when the URI names no host.
pub fn nothing_answers(uri: &str, default_port: u16) -> Option<NothingAnswers> {
    let (host, port) = host_port(uri, default_port)?;
    let why = tcp_reach(&host, port, PROBE_TIMEOUT.duration()).err()?;
    Some(NothingAnswers { at: format!("{host}:{port}"), why })
}

/// Whether anything accepts a TCP connection at `host:port` within `timeout` (any of the
/// addresses the name resolves to): the one question that tells "no server there" from "a server
/// that answered and refused", without reading a driver's wording.
pub fn tcp_reach(host: &str, port: u16, timeout: std::time::Duration) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}"))?.collect();
    let mut last = format!("{host} resolves to no address");
    for addr in &addrs {
        // The address only when the name has several: the caller names host and port.
        let at = if addrs.len() > 1 { format!("{addr}: ") } else { String::new() };
        match std::net::TcpStream::connect_timeout(addr, timeout) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => last = format!("{at}no answer within {timeout:?}"),
            Err(e) => last = format!("{at}{e}"),
        }
    }
    Err(last)
}

/// What `reachability` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The server answered.
    Reachable,
    /// It did not.
    Unreachable,
    /// Nothing was asked: no URI for this backend.
    NotChecked,
    /// The URI given cannot be read (its host or port), so no server was asked.
    Invalid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords_in_uris_and_text() {
        assert_eq!(redact_uri("postgres://user:s3cr%40t@host:5432/db"), "postgres://user:<redacted>@host:5432/db");
        assert_eq!(redact_uri("mysql://root@127.0.0.1:3306/x"), "mysql://root@127.0.0.1:3306/x");
        assert_eq!(redact_uri("mongodb://h/?authSource=a&password=pw"), "mongodb://h/?authSource=a&password=<redacted>");
        let text = "cannot connect to (postgres://u:pw@h/db) with password=hunter2";
        assert_eq!(redact(text), "cannot connect to (postgres://u:<redacted>@h/db) with password=<redacted>");
        let s = Secrets::from_uri("postgres://u:s3cr%40t@h/db");
        assert_eq!(s.scrub("auth s3cr@t failed, s3cr%40t"), "auth <redacted> failed, <redacted>");
    }

    /// Passwords typed with `/`, `?`, `#` or `@` unescaped, libpq key=value strings and signed
    /// query strings keep their secrets too (they were shown whole).
    #[test]
    fn redacts_passwords_written_carelessly_and_key_value_strings() {
        for (uri, shown) in [
            ("postgres://bob:se/cretPW@127.0.0.1:1/db", "postgres://bob:<redacted>@127.0.0.1:1/db"),
            ("mysql://bob:a?b#c@h:3306/x", "mysql://bob:<redacted>@h:3306/x"),
            ("mongodb://bob:p@ss/w@h/db", "mongodb://bob:<redacted>@h/db"),
            ("http://h:9000/b?X-Amz-Signature=abc123&x=1", "http://h:9000/b?X-Amz-Signature=<redacted>&x=1"),
            ("postgres://bob@h/db", "postgres://bob@h/db"),
            ("host=127.0.0.1 port=1 password=s3cretPW dbname=db", "host=127.0.0.1 port=1 password=<redacted> dbname=db"),
            ("host=h password='two words' user=u", "host=h password=<redacted> user=u"),
        ] {
            assert_eq!(redact_uri(uri), shown, "{uri}");
        }
        for (uri, secret) in [
            ("postgres://bob:se/cretPW@127.0.0.1:1/db", "se/cretPW"),
            ("host=127.0.0.1 password=s3cretPW", "s3cretPW"),
            ("host=h password='two words'", "two words"),
            ("mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:tok", "AWS_SESSION_TOKEN:tok"),
        ] {
            let said = format!("cannot connect with {secret} at {uri}");
            let scrubbed = Secrets::from_uri(uri).scrub(&said);
            assert!(!scrubbed.contains(secret), "{uri}: {scrubbed}");
        }
    }

    #[test]
    fn a_short_password_is_hidden_where_it_stands_alone_not_inside_words() {
        let secrets = Secrets::from_uri("postgres://u:p@/db");
        let said = "postgres://u:p@/db names no host; connecting with password p (\"p\") failed";
        assert_eq!(secrets.scrub(said), "postgres://u:<redacted>@/db names no host; connecting with password <redacted> (\"<redacted>\") failed");
        // At six characters and more, a secret is hidden wherever it appears.
        assert_eq!(Secrets::from_uri("mysql://u:secret@h/db").scrub("xsecretx"), "x<redacted>x");
    }

    #[test]
    fn parses_hosts_and_ports() {
        assert_eq!(host_port("postgres://u:p@127.0.0.1:29005/db", 5432), Some(("127.0.0.1".into(), 29005)));
        assert_eq!(host_port("mongodb://[::1]/", 27017), Some(("::1".into(), 27017)));
        assert_eq!(host_port("http://localhost:9000", 80), Some(("localhost".into(), 9000)));
        assert_eq!(host_port("postgres://bob:se/cr@t@10.0.0.1:7/db", 5432), Some(("10.0.0.1".into(), 7)));
        assert!(is_local_host("127.0.0.1") && !is_local_host("db.example.com"));
    }

    /// An endpoint of a server kind of the test's own, so the test needs no server backend
    /// compiled in (a build without default features has none).
    fn test_endpoint() -> Endpoint {
        const KIND: super::super::registry::ServerKind = super::super::registry::ServerKind {
            uri_env: "STOWBENCH_TEST_ONLY_URI",
            schemes: &["http://"],
            probe: |_| Err("not probed".into()),
            default_port: 80,
            pid_env: "STOWBENCH_TEST_ONLY_PID",
            data_env: "STOWBENCH_TEST_ONLY_DATA",
        };
        let table = toml::Table::from_iter([("uri".to_string(), toml::Value::String("http://127.0.0.1:9/".into()))]);
        let options = Options::new("t", "job.toml", table);
        endpoint(&options, "s3", &KIND).unwrap()
    }

    /// A driver that panicked was reported as "something accepted the connection but did not
    /// answer within 10.0 s", at once.
    #[test]
    fn a_connect_that_panics_or_ends_without_an_answer_is_not_a_server_that_did_not_answer() {
        let long = std::time::Duration::from_secs(30);
        let started = std::time::Instant::now();
        let panicked = within_connect_timeout::<()>("s3", &test_endpoint(), long, || panic!("port out of range: 99999")).unwrap_err();
        assert!(started.elapsed() < long, "answered at once, not after the timeout");
        assert_ne!(panicked.kind, super::super::ErrorKind::Connection);
        assert!(!panicked.message.contains(NO_ANSWER), "{}", panicked.message);
        assert!(panicked.message.contains("failed unexpectedly (it panicked: port out of range: 99999)"), "{}", panicked.message);
        let timed_out = within_connect_timeout::<()>("s3", &test_endpoint(), std::time::Duration::from_millis(50), || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            Ok(())
        });
        assert!(timed_out.unwrap_err().message.contains(NO_ANSWER), "a connect still running at the timeout is one");
    }

    #[test]
    fn text_that_is_no_uri_is_never_shown() {
        assert_eq!(shown_uri("hunter2secret"), NOT_SHOWN);
        assert_eq!(shown_uri("hunter2 secret=x"), NOT_SHOWN);
        assert_eq!(shown_uri("host=h password=pw user=u"), "host=h password=<redacted> user=u");
        assert_eq!(shown_uri("http://h:9000"), "http://h:9000");
    }

    #[test]
    fn more_than_one_at_sign_before_the_host_is_an_unencoded_password() {
        assert!(unencoded_at("postgres://u:hun@ter2@h:5432/db").is_some_and(|why| why.contains("%40") && !why.contains("ter2")));
        assert_eq!(unencoded_at("postgres://u:hun%40ter2@h:5432/db"), None);
        assert_eq!(unencoded_at("postgres://u@h/db?x=a@b"), None, "an @ after the host is not in the password");
        for (uri, port) in
            [("postgres://u:pw@h:99999/db", "99999"), ("mysql://u@h:0/db", "0"), ("mongodb://a:27017,b:x/", "x"), ("postgres://u@[::1]:70000/db", "70000")]
        {
            assert_eq!(authority_mistake(uri), Some(format!("its port \"{port}\" is not a port number from 1 to 65535")), "{uri}");
        }
        for uri in [
            "postgres://u:p:w@h:5432/db",
            "postgres://u@h/db",
            "postgres://u@h:/db",
            "mongodb://a:27017,b/",
            "postgres://u@[::1]/db",
            "postgres:///db?host=/run/x",
        ] {
            assert_eq!(authority_mistake(uri), None, "{uri}");
        }
    }

    #[test]
    fn owned_names_differ_per_namespace_directory() {
        let ns = |dir: &str| Namespace::unheld("same-run", Path::new(dir), "case");
        let (a, b) = (owned_name(&ns("/tmp/a/ns")), owned_name(&ns("/tmp/b/ns")));
        assert!(a != b && a.starts_with("case_") && a.len() <= 48, "{a} {b}");
        assert_eq!(a, owned_name(&ns("/tmp/a/ns")), "stable for one namespace");
    }

    #[test]
    fn locked_versions_come_from_cargo_lock() {
        assert!(locked_version("serde").starts_with("1."));
        assert_eq!(locked_version("no-such-crate"), "?");
    }
}
