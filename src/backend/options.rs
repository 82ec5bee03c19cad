//! Backend options from a job file's target table, checked against each backend's declared list.
//!
//! Every option a backend reads must be declared in its `OptionDoc` list, so `stowbench backends`
//! shows it with its default and an unknown or misspelt option is refused with a suggestion.

use crate::units::{ByteSize, Nanos};

/// One option a backend accepts: its name, default (as written in a job file) and meaning.
#[derive(Debug, Clone, Copy)]
pub struct OptionDoc {
    /// Option name in the target table.
    pub name: &'static str,
    /// Default as it would be written in a job file ("" when there is none).
    pub default: &'static str,
    /// What it does, one line.
    pub help: &'static str,
}

/// The options given for one target, with where they came from for error messages.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Target name, for messages.
    pub target: String,
    /// Where the target was defined, e.g. "job.toml line 12", for messages.
    pub origin: String,
    /// The raw options table.
    pub table: toml::Table,
    /// Where each option key was written, e.g. "job.toml:14:1", for messages about that key.
    pub key_origins: std::collections::BTreeMap<String, String>,
}

impl Options {
    /// Options for `target` from a table.
    pub fn new(target: &str, origin: &str, table: toml::Table) -> Self {
        Options { target: target.to_string(), origin: origin.to_string(), table, key_origins: Default::default() }
    }

    /// Where `key` was written, or where the target was, for messages.
    fn context_of(&self, key: &str) -> String {
        match self.key_origins.get(key) {
            Some(at) => format!("{at}: target \"{}\"", self.target),
            None => self.context(),
        }
    }

    fn context(&self) -> String {
        if self.origin.is_empty() {
            format!("target \"{}\"", self.target)
        } else {
            format!("{}: target \"{}\"", self.origin, self.target)
        }
    }

    /// Refuses options that `docs` does not declare, suggesting the closest name.
    pub fn check_known(&self, backend: &str, docs: &[OptionDoc]) -> Result<(), String> {
        let names: Vec<&str> = docs.iter().map(|d| d.name).collect();
        for key in self.table.keys() {
            if !names.contains(&key.as_str()) {
                let hint = crate::suggest::did_you_mean(key, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
                return Err(format!("{}: unknown option \"{key}\" for backend {backend}.{hint} Its options are: {}", self.context_of(key), names.join(", ")));
            }
        }
        Ok(())
    }

    fn bad(&self, name: &str, why: impl std::fmt::Display) -> String {
        format!("{}: option \"{name}\": {why}", self.context_of(name))
    }

    /// A string option.
    pub fn string(&self, name: &str, default: &str) -> Result<String, String> {
        match self.table.get(name) {
            None => Ok(default.to_string()),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.bad(name, format!("expected a string, found {}", other.type_str()))),
        }
    }

    /// An optional string option.
    pub fn opt_string(&self, name: &str) -> Result<Option<String>, String> {
        match self.table.get(name) {
            None => Ok(None),
            Some(_) => self.string(name, "").map(Some),
        }
    }

    /// One of a fixed set of words.
    pub fn choice(&self, name: &str, allowed: &[&str], default: &str) -> Result<String, String> {
        let value = self.string(name, default)?;
        if allowed.contains(&value.as_str()) {
            return Ok(value);
        }
        let hint = crate::suggest::did_you_mean(&value, allowed).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
        Err(self.bad(name, format!("\"{value}\" is not one of {}.{hint}", allowed.join(", "))))
    }

    /// A boolean option.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.table.get(name) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(other) => Err(self.bad(name, format!("expected true or false, found {}", other.type_str()))),
        }
    }

    /// A non-negative integer option.
    pub fn u64(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.table.get(name) {
            None => Ok(default),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(*i as u64),
            Some(toml::Value::Integer(i)) => Err(self.bad(name, format!("{i} is negative"))),
            Some(other) => Err(self.bad(name, format!("expected an integer, found {}", other.type_str()))),
        }
    }

    /// A floating-point option.
    pub fn f64(&self, name: &str, default: f64) -> Result<f64, String> {
        match self.table.get(name) {
            None => Ok(default),
            Some(toml::Value::Float(f)) => Ok(*f),
            Some(toml::Value::Integer(i)) => Ok(*i as f64),
            Some(other) => Err(self.bad(name, format!("expected a number, found {}", other.type_str()))),
        }
    }

    /// A byte size option ("64KiB", "2.6MB" or an integer number of bytes).
    pub fn size(&self, name: &str, default: ByteSize) -> Result<ByteSize, String> {
        match self.table.get(name) {
            None => Ok(default),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(ByteSize(*i as u64)),
            Some(toml::Value::String(s)) => ByteSize::parse(s).map_err(|e| self.bad(name, e)),
            Some(other) => Err(self.bad(name, format!("expected a size like \"64KiB\", found {other}"))),
        }
    }

    /// A duration option ("500ms", "2s").
    pub fn duration(&self, name: &str, default: Nanos) -> Result<Nanos, String> {
        match self.table.get(name) {
            None => Ok(default),
            Some(toml::Value::String(s)) => Nanos::parse(s).map_err(|e| self.bad(name, e)),
            Some(other) => Err(self.bad(name, format!("expected a duration like \"500ms\", found {other}"))),
        }
    }

    /// The effective options as JSON, for the report: values of secret-bearing names are
    /// redacted, and so is the password inside any URI (`postgres://u:<redacted>@host/db`).
    pub fn redacted_json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.table {
            let lowered = k.to_lowercase();
            let value = if lowered.contains("password") || lowered.contains("secret") || lowered.contains("token") {
                serde_json::Value::String(super::server::REDACTED.into())
            } else if let toml::Value::String(text) = v {
                serde_json::Value::String(super::server::redact(text))
            } else {
                serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
            };
            map.insert(k.clone(), value);
        }
        serde_json::Value::Object(map)
    }
}
