//! Restarting a server that scripts/services.sh started, so that a cold read phase
//! (`cache = "cold"`) finds the server's own cache — PostgreSQL's shared buffers, InnoDB's buffer
//! pool, FerretDB's SQLite pages — empty, not just the kernel's page cache.
//!
//! Only a server the script recorded is ever restarted: `services.sh env` exports
//! STOWBENCH_SERVICES_DIR and STOWBENCH_SERVICES_SCRIPT, and the script's fragment
//! `DIR/<service>.env` must hold exactly the URI this target connects to. A server the user runs
//! is never touched; its cache stays warm and the report says so.

use super::server::Endpoint;
use std::path::PathBuf;
use std::process::Command;

/// A server started by scripts/services.sh, which stowbench may restart.
#[derive(Debug, Clone)]
pub struct ScriptService {
    script: PathBuf,
    dir: PathBuf,
    /// The script's name for it: pg, mariadb, s3, mongo.
    service: &'static str,
}

/// The script's service name and the variable its fragment records the address in, by the
/// backend's default URI variable.
fn service_of(uri_env_default: &str) -> Option<(&'static str, &'static str)> {
    match uri_env_default {
        "STOWBENCH_PG_URI" => Some(("pg", "STOWBENCH_PG_URI")),
        "STOWBENCH_MARIADB_URI" => Some(("mariadb", "STOWBENCH_MARIADB_URI")),
        "STOWBENCH_S3_ENDPOINT" => Some(("s3", "STOWBENCH_S3_ENDPOINT")),
        "STOWBENCH_MONGO_URI" => Some(("mongo", "STOWBENCH_MONGO_URI")),
        _ => None,
    }
}

/// The value of `name` in an env fragment (`NAME=value` lines).
fn fragment_value(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix('=').map(|v| v.trim().to_string()))
}

impl ScriptService {
    /// The script-started service behind `endpoint`, if there is one.
    pub fn find(endpoint: &Endpoint, uri_env_default: &str) -> Option<ScriptService> {
        let (service, uri_var) = service_of(uri_env_default)?;
        let dir = PathBuf::from(std::env::var_os("STOWBENCH_SERVICES_DIR")?);
        let script = PathBuf::from(std::env::var_os("STOWBENCH_SERVICES_SCRIPT")?);
        let fragment = std::fs::read_to_string(dir.join(format!("{service}.env"))).ok()?;
        (fragment_value(&fragment, uri_var)? == endpoint.uri.trim() && script.is_file()).then_some(ScriptService { script, dir, service })
    }

    /// Stops and starts the server on its address and data; returns its new pid.
    pub fn restart(&self) -> Result<Option<u32>, String> {
        let out = Command::new(&self.script)
            .args(["restart", "--only", self.service])
            .arg(&self.dir)
            .output()
            .map_err(|e| format!("cannot run {} to restart {}: {e}", self.script.display(), self.service))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = said.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("; ");
            return Err(format!(
                "restarting {} for a cold read phase failed ({}): {}. `{} status {}` shows what runs",
                self.service,
                out.status,
                super::server::redact(&said),
                self.script.display(),
                self.dir.display()
            ));
        }
        let fragment = std::fs::read_to_string(self.dir.join(format!("{}.env", self.service))).unwrap_or_default();
        let pid_var = format!("STOWBENCH_{}_PID", self.service.to_uppercase());
        Ok(fragment_value(&fragment, &pid_var).and_then(|p| p.parse().ok()))
    }

    /// What was restarted, for the report: "pg (scripts/services.sh, /tmp/svc)".
    pub fn describe(&self) -> String {
        format!("{} ({}, {})", self.service, self.script.display(), self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_value_is_found_by_its_exact_name() {
        let text = "STOWBENCH_PG_URI=postgres://postgres@127.0.0.1:5/stowbench\nSTOWBENCH_PG_PID=42\n";
        assert_eq!(fragment_value(text, "STOWBENCH_PG_PID").as_deref(), Some("42"));
        assert_eq!(fragment_value(text, "STOWBENCH_PG").as_deref(), None, "a prefix is not the name");
        assert_eq!(service_of("STOWBENCH_S3_ENDPOINT"), Some(("s3", "STOWBENCH_S3_ENDPOINT")));
        assert_eq!(service_of("MY_URI"), None);
    }
}
