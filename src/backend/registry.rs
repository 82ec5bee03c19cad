//! The registry: every backend stowbench knows, how a job names it, how a run builds it, and for
//! a server backend how its server is found. A new backend joins with its `KIND` and one line in
//! `registry()`.

#[cfg(feature = "gridfs")]
use super::gridfs;
#[cfg(feature = "mariadb")]
use super::mariadb;
#[cfg(feature = "postgres")]
use super::postgres;
#[cfg(feature = "s3")]
use super::s3;
use super::{cfb, fs, null, options, pack, sim, sqlite, sqlite_file, zip, Backend, Namespace};

/// Constructs a backend from its options table, inside a namespace owned by the run.
pub type Constructor = fn(&options::Options, &Namespace) -> Result<Box<dyn Backend>, String>;

/// One entry in the registry: how `stowbench backends` lists a backend and how a run builds it.
pub struct BackendKind {
    /// Registry name used in job files (`backend = "fs"`).
    pub name: &'static str,
    /// One line saying what it stores where.
    pub summary: &'static str,
    /// Every option: name, default, meaning.
    pub options: &'static [options::OptionDoc],
    /// Builds the backend.
    pub construct: Constructor,
    /// Whether this backend is a test tool rather than a real store (shown in listings and reports).
    pub is_test_tool: bool,
    /// For a backend that talks to a server: how it finds and checks one.
    pub server: Option<ServerKind>,
}

/// How a server backend finds its server and how `stowbench backends` checks it.
pub struct ServerKind {
    /// The environment variable holding its URI when a target has no `uri` option.
    pub uri_env: &'static str,
    /// The URI schemes it takes (the first is shown in hints).
    pub schemes: &'static [&'static str],
    /// Connects and says which server answers (its version), or why none does.
    pub probe: fn(&str) -> Result<String, String>,
    /// The port a URI without one means.
    pub default_port: u16,
    /// The companion variable scripts/services.sh writes with the server's pid (`<PREFIX>_PID`).
    pub pid_env: &'static str,
    /// The companion variable with the server's local data directory (`<PREFIX>_DATA`).
    pub data_env: &'static str,
}

/// Every backend stowbench knows, in listing order.
pub fn registry() -> &'static [BackendKind] {
    &[
        fs::KIND,
        sqlite::KIND,
        sqlite_file::KIND,
        pack::KIND,
        cfb::KIND,
        zip::KIND,
        #[cfg(feature = "postgres")]
        postgres::KIND,
        #[cfg(feature = "mariadb")]
        mariadb::KIND,
        #[cfg(feature = "s3")]
        s3::KIND,
        #[cfg(feature = "gridfs")]
        gridfs::KIND,
        null::KIND,
        sim::KIND,
    ]
}

/// Backends a build may leave out, with the cargo feature that brings each in.
const LEFT_OUT: [(&str, &str); 4] = [("postgres", "postgres"), ("mariadb", "mariadb"), ("s3", "s3"), ("gridfs", "gridfs")];

fn enabled(feature: &str) -> bool {
    match feature {
        "postgres" => cfg!(feature = "postgres"),
        "mariadb" => cfg!(feature = "mariadb"),
        "s3" => cfg!(feature = "s3"),
        _ => cfg!(feature = "gridfs"),
    }
}

/// Finds a backend by name, or says which names exist (with a did-you-mean).
pub fn find(name: &str) -> Result<&'static BackendKind, String> {
    registry().iter().find(|k| k.name == name).ok_or_else(|| {
        if let Some((_, feature)) = LEFT_OUT.iter().find(|(backend, feature)| *backend == name && !enabled(feature)) {
            return format!(
                "backend \"{name}\" is not in this build of stowbench (built without cargo feature \"{feature}\"); \
                 rebuild with the default features, or with --features {feature}"
            );
        }
        let names: Vec<&str> = registry().iter().map(|k| k.name).collect();
        let hint = crate::suggest::did_you_mean(name, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        format!("unknown backend \"{name}\".{hint} Known backends: {}", names.join(", "))
    })
}

/// The server part of backend `name`'s entry (None for a backend without a server, or an
/// unknown name).
pub fn server_kind(name: &str) -> Option<&'static ServerKind> {
    registry().iter().find(|k| k.name == name).and_then(|k| k.server.as_ref())
}
