//! Backend options from a job file's target table, checked against each backend's declared list.
//!
//! A backend declares its options once, with `backend_options!`: a typed struct, its `DOCS` list
//! (name, default, meaning) and its reader. `stowbench backends`, the docs tables
//! (`stowbench backends --markdown`) and the unknown-option check are made from the lists, so each
//! default is written once, and an unknown or misspelt option is refused with a suggestion.
//! Blocks several backends share (`path`, the server endpoint, SQLite's tuning) are declared once
//! where they are read and joined into a backend's list with `options_list!`.

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

/// The option a construction message is about: the first `option "NAME"` in it (also in
/// `unknown option "NAME"`).
fn option_named(message: &str) -> Option<&str> {
    let rest = &message[message.find("option \"")? + "option \"".len()..];
    Some(&rest[..rest.find('"')?])
}

/// `text` with `{rank}` replaced by the rank, so one job gives each rank of a multi-host run its
/// own path (docs/multi-host.md); a single host is rank 0.
pub fn with_rank(text: &str, rank: usize) -> String {
    text.replace("{rank}", &rank.to_string())
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

    /// Refuses an option an earlier version had, saying what replaced it (`instead`).
    pub fn check_retired(&self, name: &str, instead: &str) -> Result<(), String> {
        match self.table.contains_key(name) {
            true => Err(format!("{}: option \"{name}\" was replaced: {instead}", self.context_of(name))),
            false => Ok(()),
        }
    }

    /// Refuses options that `docs` does not declare, suggesting the closest name.
    pub fn check_known(&self, backend: &str, docs: &[OptionDoc]) -> Result<(), String> {
        let names: Vec<&str> = docs.iter().map(|d| d.name).collect();
        for key in self.table.keys() {
            if !names.contains(&key.as_str()) {
                let hint = crate::suggest::did_you_mean(key, &names).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
                let known = match names.is_empty() {
                    true => format!(" Backend {backend} takes no options: remove the line"),
                    false => format!(" Its options are: {}", names.join(", ")),
                };
                return Err(format!("{}: unknown option \"{key}\" for backend {backend}.{hint}{known}", self.context_of(key)));
            }
        }
        Ok(())
    }

    /// Replaces `{rank}` by `rank` in every string option, so one job gives each rank of a
    /// multi-host run its own path (docs/multi-host.md).
    pub fn expand_rank(&mut self, rank: usize) {
        for (_, value) in self.table.iter_mut() {
            if let toml::Value::String(text) = value {
                *text = with_rank(text, rank);
            }
        }
    }

    /// Builds with `construct`, and when it refuses an option by name, sets that option aside and
    /// builds again, so a job hears of every option mistake at once, not one per run. Each
    /// message is located at its option's key. A refusal that names no option still in the table
    /// (a server that does not answer, or what setting an option aside led to) ends the search;
    /// it is kept only when it is the first. What is built after a mistake is dropped unused.
    pub fn construct_all<B>(&self, mut construct: impl FnMut(&Options) -> Result<B, String>) -> Result<B, Vec<String>> {
        let mut options = self.clone();
        let mut mistakes: Vec<String> = Vec::new();
        // Each round sets one option aside: at most one round per option, and the last.
        for _ in 0..=self.table.len() {
            let message = match construct(&options) {
                Ok(built) if mistakes.is_empty() => return Ok(built),
                Ok(_) => break,
                Err(message) => message,
            };
            let named = option_named(&message).filter(|name| options.table.contains_key(*name)).map(str::to_string);
            match named {
                Some(name) => {
                    mistakes.push(self.located(&name, message));
                    options.table.remove(&name);
                }
                None => {
                    if mistakes.is_empty() {
                        mistakes.push(message);
                    }
                    break;
                }
            }
        }
        Err(mistakes)
    }

    /// Whether `message` is about one of these options (`option "NAME"` for a key in the table):
    /// a mistake in the job, whatever a server would answer.
    pub fn names_own_option(&self, message: &str) -> bool {
        option_named(message).is_some_and(|name| self.table.contains_key(name))
    }

    /// Where a message about the whole target belongs: the `uri` key when the target wrote one
    /// (a server's refusal is about it), else the target's own line.
    pub fn locate_target_message(&self, message: &str) -> String {
        let at = self.key_origins.get("uri").cloned().unwrap_or_else(|| format!("{}:1", self.origin));
        match message.starts_with(&self.origin) || self.origin.is_empty() {
            true => message.to_string(),
            false if message.starts_with(&format!("target \"{}\"", self.target)) => format!("{at}: {message}"),
            false => format!("{at}: target \"{}\": {message}", self.target),
        }
    }

    /// `message` about option `name`, with where the key was written in front when the backend
    /// said only "target \"T\": …".
    fn located(&self, name: &str, message: String) -> String {
        match self.key_origins.get(name) {
            Some(at) if !message.starts_with(at.as_str()) && message.starts_with(&format!("target \"{}\"", self.target)) => format!("{at}: {message}"),
            _ => message,
        }
    }

    /// A message about option `name`, located where it was written: "job.toml:4:1: target
    /// \"fs\": option \"path\": why".
    pub(crate) fn bad(&self, name: &str, why: impl std::fmt::Display) -> String {
        format!("{}: option \"{name}\": {why}", self.context_of(name))
    }

    /// The effective options as JSON, for the report: values of secret-bearing names are
    /// redacted, and so is the password inside any URI (`postgres://u:<redacted>@host/db`).
    ///
    /// The `uri` option is redacted as one URI (`server::shown_uri`), not word by word as free
    /// text is: a password may hold a space. Then every secret any URI-like value holds is
    /// scrubbed from every value, whatever characters it has.
    pub fn redacted_json(&self) -> serde_json::Value {
        use super::server::{redact, shown_uri, Secrets};
        let mut secrets = Secrets::default();
        for text in self.table.values().filter_map(|v| v.as_str()) {
            secrets.extend(&Secrets::from_uri(text));
        }
        let mut map = serde_json::Map::new();
        for (k, v) in &self.table {
            let lowered = k.to_lowercase();
            let value = if lowered.contains("password") || lowered.contains("secret") || lowered.contains("token") {
                serde_json::Value::String(super::server::REDACTED.into())
            } else if let toml::Value::String(text) = v {
                let shown = if k == "uri" { shown_uri(text) } else { redact(text) };
                serde_json::Value::String(secrets.scrub(&shown))
            } else {
                serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
            };
            map.insert(k.clone(), value);
        }
        serde_json::Value::Object(map)
    }
}

/// A type an option can hold, read from the TOML value a job file gives (or the declared
/// default, written in the same syntax). Messages say what was expected; the caller adds where.
pub trait OptionValue: Sized {
    /// The value from a job file's TOML.
    fn from_toml(value: &toml::Value) -> Result<Self, String>;
    /// What an absent option without a declared default means: `Option<T>` is `None`; every
    /// other type needs a default (the macro below always declares one for them).
    fn when_absent() -> Option<Self> {
        None
    }
}

impl OptionValue for bool {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        value.as_bool().ok_or_else(|| format!("expected true or false, found {}", value.type_str()))
    }
}

impl OptionValue for u64 {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        match value {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            toml::Value::Integer(i) => Err(format!("{i} is negative")),
            other => Err(format!("expected an integer, found {}", other.type_str())),
        }
    }
}

impl OptionValue for f64 {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        match value {
            toml::Value::Float(f) => Ok(*f),
            toml::Value::Integer(i) => Ok(*i as f64),
            other => Err(format!("expected a number, found {}", other.type_str())),
        }
    }
}

impl OptionValue for String {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        value.as_str().map(str::to_string).ok_or_else(|| format!("expected a string, found {}", value.type_str()))
    }
}

impl OptionValue for ByteSize {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        match value {
            toml::Value::Integer(i) if *i >= 0 => Ok(ByteSize(*i as u64)),
            toml::Value::String(s) => ByteSize::parse(s).map_err(|e| e.to_string()),
            other => Err(format!("expected a size like \"64KiB\", found {other}")),
        }
    }
}

impl OptionValue for Nanos {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        match value {
            toml::Value::String(s) => Nanos::parse(s).map_err(|e| e.to_string()),
            other => Err(format!("expected a duration like \"500ms\", found {other}")),
        }
    }
}

/// One string or a list of them (`"/srv/a"` or `["/srv/a", "/srv/b"]`); never an empty list.
impl OptionValue for Vec<String> {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        let entries: Vec<&toml::Value> = match value {
            toml::Value::Array(list) if list.is_empty() => return Err("the list is empty; give at least one entry".into()),
            toml::Value::Array(list) => list.iter().collect(),
            one => vec![one],
        };
        entries.into_iter().map(|e| e.as_str().map(str::to_string).ok_or_else(|| format!("{e} is not a string; write \"a\" or [\"a\", \"b\"]"))).collect()
    }
}

impl<T: OptionValue> OptionValue for Option<T> {
    fn from_toml(value: &toml::Value) -> Result<Self, String> {
        T::from_toml(value).map(Some)
    }
    fn when_absent() -> Option<Self> {
        Some(None)
    }
}

impl Options {
    /// Option `name` as a `T`: the job file's value, else `default` (the declaration's, in job-file
    /// syntax), else what absence means for `T`.
    pub fn get<T: OptionValue>(&self, name: &str, default: Option<toml::Value>) -> Result<T, String> {
        match (self.table.get(name), default) {
            (Some(value), _) => T::from_toml(value).map_err(|e| self.bad(name, e)),
            (None, Some(default)) => T::from_toml(&default).map_err(|e| format!("stowbench bug: the declared default of option \"{name}\" does not read: {e}")),
            (None, None) => T::when_absent().ok_or_else(|| self.bad(name, "is required")),
        }
    }
}

/// A default's text as a job file writes it, without the quotes of a string (`"64KiB"` → 64KiB).
pub const fn unquoted(text: &'static str) -> &'static str {
    let bytes = text.as_bytes();
    if bytes.len() >= 2 && bytes[0] == b'"' && bytes[bytes.len() - 1] == b'"' {
        let (_, rest) = bytes.split_at(1);
        let (inner, _) = rest.split_at(rest.len() - 1);
        if let Ok(inner) = std::str::from_utf8(inner) {
            return inner;
        }
    }
    text
}

/// Joins option lists (a backend's own and the shared blocks it takes) into one array, at
/// compile time; `N` must be the sum of their lengths (`options_list!` computes it).
pub const fn joined<const N: usize>(parts: &[&[OptionDoc]]) -> [OptionDoc; N] {
    let mut out = [OptionDoc { name: "", default: "", help: "" }; N];
    let (mut part, mut at) = (0, 0);
    while part < parts.len() {
        let mut i = 0;
        while i < parts[part].len() {
            out[at] = parts[part][i];
            (i, at) = (i + 1, at + 1);
        }
        part += 1;
    }
    assert!(at == N, "options_list!: the lengths do not add up");
    out
}

/// One `&'static [OptionDoc]` from several lists: `options_list!(PackOptions::DOCS, PATH_OPTIONS)`.
#[macro_export]
macro_rules! options_list {
    ($($part:expr),+ $(,)?) => {{
        const N: usize = 0 $(+ $part.len())+;
        const ALL: [$crate::backend::options::OptionDoc; N] = $crate::backend::options::joined::<N>(&[$($part),+]);
        &ALL
    }};
}

/// Declares a backend's options once: a typed struct, its documentation list (`DOCS`, which
/// `stowbench backends`, the docs tables and the unknown-option check use) and its reader. Each
/// field is `name: Type = default => "help"`, the default written as in a job file (it is both
/// the documented text and the value), or `name: Option<Type>, "what absence means" => "help"`.
///
/// ```ignore
/// backend_options! {
///     pub struct PackOptions {
///         fsync: bool = false => "fdatasync each record before the put returns",
///         path: Option<String>, "<run directory>" => "directory for the run's data",
///     }
/// }
/// ```
#[macro_export]
macro_rules! backend_options {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($field:ident : $ty:ty $(= $default:literal)? $(, $absent:literal)? => $help:expr),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name {
            $(#[doc = $help] pub $field: $ty,)*
        }

        impl $name {
            /// Every option, with its default and meaning.
            pub const DOCS: &'static [$crate::backend::options::OptionDoc] = &[$($crate::backend::options::OptionDoc {
                name: stringify!($field),
                default: $crate::backend_options!(@text $($default)? ; $($absent)?),
                help: $help,
            }),*];

            /// Reads the options from a target's table (unknown names are refused by `check_known`).
            pub fn read(options: &$crate::backend::options::Options) -> Result<Self, String> {
                Ok($name { $($field: options.get(stringify!($field), $crate::backend_options!(@value $($default)?))?,)* })
            }
        }
    };
    (@text $default:literal ;) => { $crate::backend::options::unquoted(stringify!($default)) };
    (@text ; $absent:literal) => { $absent };
    (@value $default:literal) => { Some(toml::Value::from($default)) };
    (@value) => { None };
}

/// A choice among fixed words, as a typed enum: `option_choice! { pub enum Flush { PerPut = "per-put", None = "none" } }`.
/// Reading refuses any other word, suggesting the closest.
#[macro_export]
macro_rules! option_choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($variant),+ }

        impl $name {
            /// The words a job file may write.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The word for this choice.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::backend::options::OptionValue for $name {
            fn from_toml(value: &toml::Value) -> Result<Self, String> {
                let word = <String as $crate::backend::options::OptionValue>::from_toml(value)?;
                match word.as_str() {
                    $($word => Ok($name::$variant),)+
                    _ => {
                        let hint = $crate::suggest::did_you_mean(&word, Self::WORDS).map(|s| format!(" Did you mean \"{s}\"?")).unwrap_or_default();
                        Err(format!("\"{word}\" is not one of {}.{hint}", Self::WORDS.join(", ")))
                    }
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password with a space went into report.json whole (the URI was redacted word by word).
    #[test]
    fn the_report_never_holds_a_uri_password_whatever_its_characters() {
        let passwords = ["hunter2secret x", "pa ss@wo:rd/x#y?z", "p%40ss%20word", "a b c", "s3cr@t:@@", "@lead ing"];
        for password in passwords {
            for uri in [format!("postgres://postgres:{password}@127.0.0.1:5432/db"), format!("mysql://u:{password}@h/x?charset=utf8")] {
                let table = toml::Table::from_iter([("uri".to_string(), toml::Value::String(uri.clone())), ("mode".to_string(), "bytea".into())]);
                let json = Options::new("t", "job.toml", table).redacted_json().to_string();
                for part in password.split([' ', '@', ':', '/', '#', '?']).filter(|p| p.len() >= 3) {
                    assert!(!json.contains(part), "{uri}: {part:?} is in {json}");
                }
                assert!(json.contains("<redacted>") && json.contains("\"mode\":\"bytea\""), "{json}");
            }
        }
        // Text that is not a URI at all may be a password in the wrong place: not shown.
        let table = toml::Table::from_iter([("uri".to_string(), toml::Value::String("hunter2secret".into()))]);
        assert!(!Options::new("t", "", table).redacted_json().to_string().contains("hunter2"));
    }

    crate::option_choice! {
        enum Flavour { Plain = "plain", Spiced = "spiced" }
    }

    crate::backend_options! {
        struct Example {
            size: ByteSize = "64KiB" => "a size",
            flag: bool = true => "a flag",
            flavour: Flavour = "plain" => "a choice",
            limit: Option<u64>, "<unlimited>" => "an optional number",
        }
    }

    fn options(text: &str) -> Options {
        let mut o = Options::new("t", "job.toml line 3", toml::from_str(text).unwrap());
        o.key_origins.insert("flavour".into(), "job.toml:5:1".into());
        o
    }

    #[test]
    fn each_default_is_written_once_and_documented_as_a_job_file_writes_it() {
        let docs: Vec<(&str, &str)> = Example::DOCS.iter().map(|d| (d.name, d.default)).collect();
        assert_eq!(docs, [("size", "64KiB"), ("flag", "true"), ("flavour", "plain"), ("limit", "<unlimited>")]);
        let read = Example::read(&options("")).unwrap();
        assert_eq!((read.size, read.flag, read.flavour, read.limit), (ByteSize(64 << 10), true, Flavour::Plain, None));
        let read = Example::read(&options("size = \"1MiB\"\nflag = false\nflavour = \"spiced\"\nlimit = 7")).unwrap();
        assert_eq!((read.size, read.flag, read.flavour, read.limit), (ByteSize(1 << 20), false, Flavour::Spiced, Some(7)));
    }

    #[test]
    fn a_wrong_value_names_where_the_option_was_written_and_what_it_takes() {
        let err = Example::read(&options("flavour = \"spiced-up\"")).unwrap_err();
        assert_eq!(err, "job.toml:5:1: target \"t\": option \"flavour\": \"spiced-up\" is not one of plain, spiced. Did you mean \"spiced\"?");
        let err = Example::read(&options("flag = 1")).unwrap_err();
        assert!(err.starts_with("job.toml line 3: target \"t\": option \"flag\": expected true or false"), "{err}");
        let err = options("flavor = \"plain\"").check_known("example", Example::DOCS).unwrap_err();
        assert!(err.contains("unknown option \"flavor\"") && err.contains("Did you mean \"flavour\"?"), "{err}");
        let err = options("latency = \"1ms\"").check_known("null", &[]).unwrap_err();
        assert!(err.ends_with("unknown option \"latency\" for backend null. Backend null takes no options: remove the line"), "{err}");
        let err = options("flavor = \"plain\"").check_retired("flavor", "write flavour").unwrap_err();
        assert!(err.ends_with("target \"t\": option \"flavor\" was replaced: write flavour"), "{err}");
        assert!(options("flavour = \"plain\"").check_retired("flavor", "write flavour").is_ok());
    }

    #[test]
    fn option_lists_join_in_order() {
        const ALL: &[OptionDoc] = crate::options_list!(Example::DOCS, crate::backend::namespace::DataPath::DOCS);
        let names: Vec<&str> = ALL.iter().map(|d| d.name).collect();
        assert_eq!(names, ["size", "flag", "flavour", "limit", "path"]);
        assert_eq!(unquoted("\"a\""), "a");
        assert_eq!(unquoted("2"), "2");
    }
}
