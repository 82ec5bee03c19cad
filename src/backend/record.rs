//! The record of what a server case owns, kept in the case's namespace directory so that
//! `stowbench cleanup` can remove the server-side objects of a run that was killed, or whose
//! server was down when the case ended.
//!
//! The runner writes `.stowbench-server.json` when a server backend's case starts, before the
//! backend creates anything on its server, and pins the directory (`namespace::pin`): no
//! stowbench removal deletes it while the record says objects may be left. After the backend's
//! own cleanup succeeded the pin is released and the directory goes as usual.
//!
//! The record holds what rebuilds the same backend — its name, the target's options, the
//! namespace's run id, directory and name (from which `server::owned_name` derives every owned
//! name again) — plus, for people, the owned names themselves. It never holds a secret: the URI is
//! stored with its password replaced by `<redacted>` (only to check that the server found at
//! cleanup is the same one), and the URI to connect with is read at cleanup from the environment
//! variable the run read it from (or the backend's default variable, when the run was given a
//! `uri` option with a password). Credentials that were only ever environment variables (S3 keys)
//! are stored as the variables' names, as the options give them.
//!
//! Cleanup from a record reuses the backend's own `cleanup`, after `server_objects` listed what
//! it will remove; `--dry-run` prints that list and changes nothing.

use super::namespace::{self, Namespace};
use super::options::Options;
use super::server::{self, REDACTED};
use super::Backend;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record's file name inside a case's namespace directory.
pub const RECORD_FILE: &str = ".stowbench-server.json";

/// The record format's version.
const VERSION: u32 = 1;

/// What one case owns on one server, and how to find that server again without a secret.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRecord {
    /// Always "stowbench".
    pub tool: String,
    /// Format version (1).
    pub version: u32,
    /// The run that owns the objects.
    pub run_id: String,
    /// The job's target name.
    pub target: String,
    /// Registry name of the backend (postgres, mariadb, s3, gridfs).
    pub backend: String,
    /// The namespace directory the owned names were derived from (this record's directory).
    pub namespace_dir: PathBuf,
    /// The namespace's name, from which the owned names derive.
    pub namespace_name: String,
    /// Keys `obj-0000000000` … the case used (S3 finds incomplete uploads per key on MinIO).
    pub keys: u64,
    /// The server's URI or endpoint with any password replaced by `<redacted>`.
    pub server: String,
    /// The environment variable cleanup reads the full URI from.
    pub uri_env: String,
    /// Where the password is (never here).
    pub password: String,
    /// The target's options without `uri` and without any secret value; effective values read
    /// from the environment at run time (an S3 bucket and region, a GridFS database) are pinned.
    pub options: serde_json::Value,
    /// For people: the owned name and what the backend said it uses (mode, table, prefix,
    /// bucket, database, tablespaces and their directories).
    pub owns: serde_json::Value,
}

/// The pin that keeps `dir` (and every marked directory above it) while its record is unresolved.
fn pin_name(dir: &Path) -> String {
    format!("server-{}", dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

/// Options whose values are copied from what the backend resolved (from the environment or its
/// defaults), so a cleanup with another environment still finds the same objects.
fn pinned_options(backend: &str) -> &'static [&'static str] {
    match backend {
        "s3" => &["bucket", "region"],
        "gridfs" => &["database"],
        _ => &[],
    }
}
/// What the record shows of `describe()` for people.
const OWNED_INFO: &[&str] = &["mode", "table", "prefix", "bucket", "database", "tablespaces", "tablespace_dir"];

/// Writes the record of a server backend's case into `ns.dir` and pins the directory; does
/// nothing for a backend without a server. Call it before `prepare`.
pub fn write(ns: &Namespace, target: &str, backend_name: &str, options: &Options, backend: &dyn Backend, keys: u64) -> Result<(), String> {
    let Some(kind) = super::registry::server_kind(backend_name) else { return Ok(()) };
    let default_env = kind.uri_env;
    let endpoint = server::endpoint(options, backend_name, kind)?;
    let uri_env = endpoint.source.strip_prefix("env ").unwrap_or(default_env).to_string();
    let info = backend.describe();
    let mut kept = serde_json::Map::new();
    for (k, v) in &options.table {
        let lowered = k.to_lowercase();
        let secret = lowered.contains("password") || lowered.contains("secret") || lowered.contains("token");
        if k == "uri" || (secret && !k.ends_with("_env")) {
            continue;
        }
        kept.insert(k.clone(), serde_json::to_value(v).map_err(|e| e.to_string())?);
    }
    for k in pinned_options(backend_name) {
        if let Some(v) = info.options.get(*k).filter(|v| v.is_string()) {
            kept.insert(k.to_string(), v.clone());
        }
    }
    if backend_name == "s3" {
        kept.insert("create_bucket".into(), false.into()); // cleanup never makes a bucket
    }
    let mut owns = serde_json::Map::new();
    owns.insert("owned_name".into(), server::owned_name(ns).into());
    for k in OWNED_INFO {
        if let Some(v) = info.options.get(*k) {
            owns.insert(k.to_string(), v.clone());
        }
    }
    let password = match endpoint.shown.contains(REDACTED) {
        true => format!("not stored: cleanup reads the full URI from ${uri_env}"),
        false => "none in the URI".to_string(),
    };
    let record = ServerRecord {
        tool: "stowbench".into(),
        version: VERSION,
        run_id: ns.run_id.clone(),
        target: target.to_string(),
        backend: backend_name.to_string(),
        namespace_dir: ns.dir.clone(),
        namespace_name: ns.name.clone(),
        keys,
        server: endpoint.shown.clone(),
        uri_env,
        password,
        options: serde_json::Value::Object(kept),
        owns: serde_json::Value::Object(owns),
    };
    // Whatever an option held, no known secret reaches the file. Each string is scrubbed on its
    // own, not the JSON text: a password at the end of a value ("…?password=X") took the
    // closing quote and comma with it, and `cleanup` could no longer read the record.
    let mut value = serde_json::to_value(&record).map_err(|e| e.to_string())?;
    scrub_strings(&mut value, &endpoint.secrets);
    let text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
    let path = ns.dir.join(RECORD_FILE);
    crate::atomic_file::replace(&path, (text + "\n").as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let why = format!(
        "{} holds the record of {backend_name} objects at {} not yet removed; `stowbench cleanup {}` removes them",
        path.display(),
        endpoint.shown,
        ns.dir.display()
    );
    namespace::pin(&ns.dir, &pin_name(&ns.dir), &why)
}

/// Releases the pin of `dir`'s record after its server objects are gone (the record itself goes
/// with the directory).
pub fn release(dir: &Path) -> Result<(), String> {
    if !dir.join(RECORD_FILE).exists() {
        return Ok(());
    }
    namespace::unpin(dir, &pin_name(dir))
}

/// Every directory under `dir` (itself included) that holds a record, descending only into
/// marked directories (never into a backend's data).
pub fn find(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if !namespace::is_owned(&d) {
            continue;
        }
        if d.join(RECORD_FILE).is_file() {
            found.push(d.clone());
        }
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        stack.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
    }
    found.sort();
    found
}

/// Reads the record in `dir`.
pub fn load(dir: &Path) -> Result<ServerRecord, String> {
    let path = dir.join(RECORD_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let record: ServerRecord = serde_json::from_str(&text).map_err(|e| format!("{} is not a stowbench server record: {e}", path.display()))?;
    if record.tool != "stowbench" || record.version != VERSION {
        return Err(format!("{}: record version {} of {:?}; this stowbench reads version {VERSION}", path.display(), record.version, record.tool));
    }
    Ok(record)
}

impl ServerRecord {
    /// The full URI to connect with: from `uri_env` when it names the recorded server, else the
    /// recorded one when it never had a password.
    fn uri(&self) -> Result<(String, UriFrom), String> {
        let from_env = std::env::var(&self.uri_env).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if let Some(uri) = from_env.as_ref().filter(|u| server::redact_uri(u) == self.server) {
            return Ok((uri.clone(), UriFrom::Env));
        }
        if !self.server.contains(REDACTED) {
            return Ok((self.server.clone(), UriFrom::Record));
        }
        Err(match from_env {
            Some(other) => format!(
                "the record holds no password (never stored), and ${} names {}, not this server: set it to the full URI of {}",
                self.uri_env,
                server::redact_uri(&other),
                self.server
            ),
            None => format!("the record holds no password (never stored): set ${} to the full URI of {}", self.uri_env, self.server),
        })
    }

    /// Rebuilds the case's backend from the record found in `dir`: same options, same namespace,
    /// so the same owned names, connecting with `uri` (from `Self::uri`, read once, so the
    /// variable cannot change between the check and the connect). Nothing is created there.
    fn backend(&self, dir: &Path, (uri, from): (String, UriFrom)) -> Result<Box<dyn Backend>, String> {
        let same = |a: &Path, b: &Path| a == b || a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(a, b)| a == b);
        if !same(&self.namespace_dir, dir) {
            return Err(format!(
                "the record was written for {} but lies in {}: refusing (the owned names and local files belong to the first)",
                self.namespace_dir.display(),
                dir.display()
            ));
        }
        let mut table: toml::Table = serde_json::from_value(self.options.clone()).map_err(|e| format!("options in the record: {e}"))?;
        // Taken from the variable, the backend reads it there itself, and its messages say so
        // ("env STOWBENCH_PG_URI", not "option uri").
        match from {
            UriFrom::Env => table.insert("uri_env".into(), toml::Value::String(self.uri_env.clone())),
            UriFrom::Record => table.insert("uri".into(), toml::Value::String(uri)),
        };
        let origin = dir.join(RECORD_FILE).display().to_string();
        let options = Options::new(&self.target, &origin, table);
        let ns = Namespace::unheld(&self.run_id, &self.namespace_dir, &self.namespace_name);
        let backend = (super::find(&self.backend)?.construct)(&options, &ns)?;
        backend.note_keys(self.keys);
        Ok(backend)
    }
}

/// Where `ServerRecord::uri` found the URI.
#[derive(Debug, PartialEq)]
enum UriFrom {
    /// The record's `uri_env` variable, which names the recorded server.
    Env,
    /// The record itself (a URI without a password).
    Record,
}

/// Why `clean` could not remove a record's server objects, and when trying again can work.
#[derive(Debug)]
pub struct CleanFailure {
    pub message: String,
    /// What must hold before cleanup can succeed: "the server answers", or that the URI's
    /// variable names the recorded server.
    pub again_once: String,
}

/// Scrubs every string inside `value` (keys are names stowbench wrote, and stay).
fn scrub_strings(value: &mut serde_json::Value, secrets: &server::Secrets) {
    match value {
        serde_json::Value::String(text) => *text = secrets.scrub(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| scrub_strings(item, secrets)),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(|field| scrub_strings(field, secrets)),
        _ => {}
    }
}

/// Removes (or with `dry_run` only lists) the server objects recorded in `dir`; returns one line
/// per object removed, as `server_objects` listed them just before. On success the record's pin
/// is released, so the directory can be removed. An error names the server (password redacted)
/// and why; the directory and record are then left for a later cleanup.
pub fn clean(dir: &Path, dry_run: bool) -> Result<Vec<String>, CleanFailure> {
    let record = load(dir).map_err(|message| CleanFailure { message, again_once: "the error above is fixed".into() })?;
    let at = format!("{} at {} (record {})", record.backend, record.server, dir.join(RECORD_FILE).display());
    // Trying again helps once the server answers; what else failed (an object that is not this
    // case's, a refusal) needs a person first.
    let fail_with = |e: String, unreachable: bool| CleanFailure {
        message: format!("cannot clean up {at}: {e}"),
        again_once: if unreachable { format!("{} answers", record.server) } else { "the error above is fixed".into() },
    };
    let fail = |e: super::BackendError| fail_with(e.message, matches!(e.kind, super::ErrorKind::Connection | super::ErrorKind::Timeout));
    // Without the URI no server is asked: what must change is the variable, not the server.
    let uri = record.uri().map_err(|e| CleanFailure {
        message: format!("cannot clean up {at}: {e}"),
        again_once: format!("${} holds the full URI of {}", record.uri_env, record.server),
    })?;
    // A backend is made by connecting: that failing is the server not answering (or refusing
    // the login, which the message says).
    let backend = record.backend(dir, uri).map_err(|e| fail_with(e, true))?;
    let objects = backend.server_objects().map_err(fail)?;
    let lines: Vec<String> = objects.iter().map(|o| format!("{o} on {}", record.server)).collect();
    if dry_run {
        return Ok(lines);
    }
    backend.cleanup().map_err(fail)?;
    // A run killed mid-operation may still have writes in flight on the server: GridFS's dropped
    // chunks collection came back with the dead client's last chunk once the server finished that
    // insert (servers test, kill_cleanup). So a removal counts once a check a pause later finds
    // nothing; what reappears is removed again, a bounded number of times.
    for round in 1..=CLEAN_ROUNDS {
        std::thread::sleep(CLEAN_SETTLE);
        let left = backend.server_objects().map_err(fail)?;
        if left.is_empty() {
            break;
        }
        if round == CLEAN_ROUNDS {
            return Err(fail_with(format!("still there after cleanup: {}", left.join("; ")), false));
        }
        backend.cleanup().map_err(fail)?;
    }
    release(dir).map_err(|message| CleanFailure { message, again_once: "the error above is fixed".into() })?;
    Ok(lines)
}

/// How many times `clean` checks, and removes again what a killed run's last writes brought back.
const CLEAN_ROUNDS: u32 = 5;
/// The pause before each check: longer than a local server takes to finish a dead client's
/// request, short next to a person running `stowbench cleanup`.
const CLEAN_SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

#[cfg(test)]
mod tests {
    use super::*;

    fn record(server: &str, uri_env: &str) -> ServerRecord {
        ServerRecord {
            tool: "stowbench".into(),
            version: VERSION,
            run_id: "r".into(),
            target: "t".into(),
            backend: "postgres".into(),
            namespace_dir: PathBuf::from("/nowhere/case-0000"),
            namespace_name: "sb_case_0000".into(),
            keys: 0,
            server: server.into(),
            uri_env: uri_env.into(),
            password: String::new(),
            options: serde_json::json!({}),
            owns: serde_json::json!({}),
        }
    }

    /// A password ending a value (a URI's `?password=X`, libpq's `password=X`) is scrubbed inside
    /// its string: scrubbing the JSON text took the closing quote and comma with it, and cleanup
    /// then refused the record as not stowbench's.
    #[test]
    fn a_scrubbed_record_stays_valid_json_and_holds_no_password() {
        for uri in ["postgres://postgres@h:5432/db?password=hunter2secret", "host=h password=hunter2secret"] {
            let mut value = serde_json::to_value(record(uri, "X")).unwrap();
            scrub_strings(&mut value, &server::Secrets::from_uri(uri));
            let text = serde_json::to_string_pretty(&value).unwrap();
            assert!(!text.contains("hunter2secret"), "{text}");
            let read: ServerRecord = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert!(read.server.contains(REDACTED), "{}", read.server);
        }
    }

    #[test]
    fn the_uri_comes_from_the_environment_only_when_it_names_the_recorded_server() {
        // Each case has a variable of its own: tests run in parallel threads.
        let plain = record("postgres://u@h:5432/db", "STOWBENCH_RECORD_TEST_UNSET");
        assert_eq!(plain.uri().unwrap(), ("postgres://u@h:5432/db".into(), UriFrom::Record), "a URI without a password is used as recorded");

        let secret = record("postgres://u:<redacted>@h:5432/db", "STOWBENCH_RECORD_TEST_SAME");
        std::env::set_var("STOWBENCH_RECORD_TEST_SAME", "postgres://u:pw@h:5432/db");
        assert_eq!(secret.uri().unwrap(), ("postgres://u:pw@h:5432/db".into(), UriFrom::Env));

        let missing = record("postgres://u:<redacted>@h:5432/db", "STOWBENCH_RECORD_TEST_UNSET");
        assert!(missing.uri().unwrap_err().contains("set $STOWBENCH_RECORD_TEST_UNSET to the full URI"));

        let other = record("postgres://u:<redacted>@h:5432/db", "STOWBENCH_RECORD_TEST_OTHER");
        std::env::set_var("STOWBENCH_RECORD_TEST_OTHER", "postgres://u:pw@elsewhere:5432/db");
        let err = other.uri().unwrap_err();
        assert!(err.contains("names postgres://u:<redacted>@elsewhere:5432/db, not this server") && !err.contains("pw@"), "{err}");
    }

    #[test]
    fn a_record_found_elsewhere_than_where_it_was_written_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let err = record("postgres://u@h/db", "X").backend(tmp.path(), ("postgres://u@h/db".into(), UriFrom::Record)).err().unwrap();
        assert!(err.contains("was written for /nowhere/case-0000"), "{err}");
    }

    #[test]
    fn records_are_found_in_marked_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        let run = Namespace::create(&tmp.path().join("run"), "r", "run").unwrap();
        let case = run.child("case-0000").unwrap();
        std::fs::write(case.dir.join(RECORD_FILE), "{}").unwrap();
        let unmarked = case.dir.join("data");
        std::fs::create_dir(&unmarked).unwrap();
        std::fs::write(unmarked.join(RECORD_FILE), "{}").unwrap();
        assert_eq!(find(&run.dir), vec![case.dir.clone()]);
        assert!(load(&case.dir).unwrap_err().contains("not a stowbench server record"));
    }
}
