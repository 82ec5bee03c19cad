//! The job file as written: TOML structures with strict parsing and located error messages.
//!
//! Every table refuses unknown keys; an error names the line and column and, for a misspelt key,
//! the closest known one. `parse_all` collects every mistake of a file rather than the first.
//! Nothing here checks meaning across fields: that is `check.rs`, which turns a `JobSpec` into a
//! validated `Plan`.

use crate::units::{ByteSize, Nanos};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The job file format version this stowbench reads.
pub const JOB_VERSION: u32 = 1;

/// A whole job file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Format version; must be 1.
    pub version: u32,
    /// A name for the run, shown in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// What the job is for, shown in reports.
    #[serde(default)]
    pub description: Option<String>,
    /// Seed for keys, sizes and payloads; the same seed gives the same bytes.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Where backends store data; defaults to a fresh temporary directory.
    #[serde(default)]
    pub work_dir: Option<String>,
    /// The stores to compare.
    #[serde(default, rename = "target")]
    pub targets: Vec<toml::Spanned<TargetSpec>>,
    /// What to do to each store.
    #[serde(default, rename = "workload")]
    pub workloads: Vec<toml::Spanned<WorkloadSpec>>,
    /// Raw block I/O sweeps run through fio.
    #[serde(default, rename = "fio")]
    pub fio: Vec<toml::Spanned<crate::fio::FioSweep>>,
    /// How the ranks of a multi-host run (mpirun, docs/multi-host.md) share the work.
    #[serde(default)]
    pub mpi: Option<toml::Spanned<MpiSpec>>,
}

/// The `[mpi]` table: how the ranks of `mpirun … stowbench run` share each case's keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpiSpec {
    /// "partitioned" (default: every rank its own namespace and keys) or "shared" (one
    /// namespace; each key written by one rank, read by every rank).
    #[serde(default)]
    pub keys: Option<String>,
}

/// A store to measure: a backend and its options (every other key of the table).
#[derive(Debug, Clone, Deserialize)]
pub struct TargetSpec {
    /// Name in reports; defaults to the backend name.
    #[serde(default)]
    pub name: Option<String>,
    /// Registry name of the backend, e.g. "fs".
    pub backend: String,
    /// Backend options, checked by the backend itself.
    #[serde(flatten)]
    pub options: toml::Table,
}

/// Object sizes: a fixed list (one case per size) or a distribution (one case).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeDistSpec {
    /// "uniform" or "log-uniform" between min and max.
    pub kind: String,
    /// Smallest size, inclusive.
    pub min: ByteSize,
    /// Largest size, inclusive.
    pub max: ByteSize,
}

/// A workload: which operations, on how many objects of which sizes, by how many threads.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name in reports and case ids.
    pub name: String,
    /// Object sizes; one case per size.
    #[serde(default)]
    pub sizes: Vec<ByteSize>,
    /// A size distribution instead of `sizes`.
    #[serde(default)]
    pub size_dist: Option<SizeDistSpec>,
    /// Thread counts; one case per count. Default [1] (absent; an empty list is a mistake).
    #[serde(default)]
    pub threads: Option<Vec<u32>>,
    /// Number of distinct keys.
    #[serde(default)]
    pub objects: Option<u64>,
    /// Instead of `objects`: bytes of data per case; objects = dataset / mean size, held between
    /// min_objects and max_objects where they are given, refused outside 16 to 100000 where not.
    #[serde(default)]
    pub dataset: Option<ByteSize>,
    /// The fewest objects derived from `dataset`: a smaller count is raised to it. Without it,
    /// a dataset of fewer than 16 objects is refused.
    #[serde(default)]
    pub min_objects: Option<u64>,
    /// The most objects derived from `dataset`: a larger count is cut to it. Without it, a
    /// dataset of more than 100000 objects is refused.
    #[serde(default)]
    pub max_objects: Option<u64>,
    /// Simple phases by operation name, run in order: e.g. ["put", "get"].
    #[serde(default)]
    pub phases: Vec<String>,
    /// Detailed phases (mixes, stop conditions); use instead of `phases`.
    #[serde(default, rename = "phase")]
    pub phase_tables: Vec<toml::Spanned<PhaseSpec>>,
    /// Default key order for phases: "sequential", "uniform" or "zipf".
    #[serde(default)]
    pub key_order: Option<String>,
    /// Zipf exponent for key_order = "zipf". Default 0.99.
    #[serde(default)]
    pub zipf_theta: Option<f64>,
    /// Runs of each case, each on a fresh store. Default 1.
    #[serde(default)]
    pub repeats: Option<u32>,
    /// Check every get against what was put. Default true.
    #[serde(default)]
    pub verify: Option<bool>,
    /// Fraction (0 to 1) of each 4 KiB payload block that is zeros. Default 0 (incompressible).
    #[serde(default)]
    pub compressibility: Option<f64>,
    /// "warm" (default) or "cold": drop the page cache before each read phase (root only), and
    /// restart the servers scripts/services.sh started so their own caches are empty too.
    #[serde(default)]
    pub cache: Option<String>,
    /// Write back the dirty pages of the filesystems holding the data (all of them with a server
    /// on this machine) before each phase, untimed, as `sync` between steps. Default true.
    #[serde(default)]
    pub settle_writeback: Option<bool>,
    /// Retries of a failed operation before it counts as an error. Default 0.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Largest tolerated ratio of failed to attempted operations; above it the case fails. Default 0.
    #[serde(default)]
    pub max_error_ratio: Option<f64>,
    /// A worker whose operations have all failed for this long stops, and the case fails: a dead
    /// server ends the case instead of spinning through errors. Default 10s; "0s": never.
    #[serde(default)]
    pub give_up_after: Option<Nanos>,
    /// Fail an operation still running after this long as a timeout, cutting the connection of
    /// a server backend so a worker blocked on a silent server gets its thread back. Default: none.
    #[serde(default)]
    pub op_timeout: Option<Nanos>,
    /// Put every object before the first phase, untimed. Default: when the first phase is not a pure put.
    #[serde(default)]
    pub preload: Option<bool>,
    /// File server (upload phases): fraction of uploads whose content repeats an earlier upload
    /// of the same worker, registered without storing the content again. Default 0.
    #[serde(default)]
    pub duplicates: Option<f64>,
}

/// One phase with a mix of operations and a stop condition.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Operation weights, e.g. { get = 90, put = 10 }: each operation drawn at random.
    #[serde(default)]
    pub mix: BTreeMap<String, u32>,
    /// Instead of `mix`: operations run in this order, each once per iteration, e.g.
    /// ["put", "get"]; `count` then counts iterations.
    #[serde(default)]
    pub sequence: Vec<String>,
    /// Gets and heads read the key of this worker's N-th most recent put in this phase (1 = the
    /// last one) instead of a key chosen by `key_order`: E1's "read back the 5th newest".
    #[serde(default)]
    pub read_recent: Option<u64>,
    /// Stop after this many operations (all threads together). With `duration` or `bytes` too,
    /// the first stop reached ends the phase (as fio's size and runtime).
    #[serde(default)]
    pub count: Option<u64>,
    /// Stop after this long.
    #[serde(default)]
    pub duration: Option<Nanos>,
    /// Run at least this long: a phase that reaches its count or bytes (by default one pass over
    /// the objects) sooner goes over its keys again until then, as hyperfine runs its minimum
    /// runs and at least 3 s. Short phases measure thread start-up, not the storage.
    #[serde(default)]
    pub min_duration: Option<Nanos>,
    /// Stop after this many bytes moved.
    #[serde(default)]
    pub bytes: Option<ByteSize>,
    /// Key order for this phase.
    #[serde(default)]
    pub key_order: Option<String>,
    /// How the phase's `count` is shared among threads: "shared" (the default: workers take
    /// operations from one counter, so a faster worker does more) or "even" (each worker does
    /// count ÷ threads, as in "20 threads × 50 files").
    #[serde(default)]
    pub split: Option<String>,
    /// Open-loop load: operations start on a schedule at this rate, all threads together
    /// ("500/s", "2.5k/s"), instead of each thread starting the next as soon as one ends.
    #[serde(default)]
    pub rate: Option<String>,
    /// With `rate`: "uniform" (evenly spaced starts, the default) or "poisson" (random,
    /// exponentially distributed gaps: independent clients).
    #[serde(default)]
    pub arrivals: Option<String>,
    /// Untimed operations before the measurement: a count ...
    #[serde(default)]
    pub warmup_count: Option<u64>,
    /// ... or a duration.
    #[serde(default)]
    pub warmup: Option<Nanos>,
    /// A command and its arguments, run before the phase (before its warm-up and any cache
    /// drop), with the case's storage named in `STOWBENCH_*` environment variables: fio's
    /// exec_prerun. Its failure fails the case.
    #[serde(default)]
    pub before: Option<toml::Spanned<Vec<String>>>,
}

/// A job file error located in its source.
#[derive(Debug, Clone)]
pub struct Located {
    /// 1-based line, if known.
    pub line: Option<usize>,
    /// 1-based column, if known.
    pub column: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    // A span may end inside a multi-byte character when it comes from a mutated file: step back
    // to a character boundary rather than slice through one.
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, column)
}

/// Most mistakes collected from one file: past this many the rest are likely consequences.
pub const MAX_MISTAKES: usize = 100;

/// Parses job file text, stopping at the first mistake (built-in recipes, which are tested valid).
pub fn parse(text: &str) -> Result<JobSpec, Located> {
    let mut parsed = parse_all(text);
    match parsed.job {
        Some(job) if parsed.mistakes.is_empty() => Ok(job),
        _ => Err(parsed.mistakes.swap_remove(0)),
    }
}

/// What `parse_all` found.
#[derive(Debug)]
pub struct Parsed {
    /// The tables that read cleanly; None after a syntax error.
    pub job: Option<JobSpec>,
    /// Every mistake found, in the order found.
    pub mistakes: Vec<Located>,
    /// Keys removed for a mistake: (start of the top-level table holding them, key name). A
    /// misspelt key also lists the key it was meant to be. `check` stays silent about these
    /// fields (e.g. "no sizes" after a bad size), which would only repeat a reported mistake.
    pub removed: Vec<(usize, String)>,
}

/// Parses job file text and collects every mistake instead of stopping at the first.
///
/// A TOML syntax error stops everything (the structure after it is unknown). Otherwise the header
/// keys and each `[[target]]`, `[[workload]]` and `[[fio]]` table are read on their own, so a
/// mistake in one never hides another. Inside a table, each mistake's key is removed and the table
/// read again, until it reads cleanly or its remaining mistake cannot be pinned on one key. The
/// returned `JobSpec` holds only the tables that read cleanly (a header that did not read is
/// replaced by defaults), so `plan` can still check their meanings; it is `None` only after a
/// syntax error.
pub fn parse_all(text: &str) -> Parsed {
    let mut found = Parsed { job: None, mistakes: Vec::new(), removed: Vec::new() };
    let mut root = match toml::de::DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => {
            found.mistakes.push(locate(text, &e, None));
            return found;
        }
    };
    let root_span = root.span();
    let arrays: Vec<_> = ["target", "workload", "fio"].into_iter().map(|key| (key, root.get_mut().remove(key))).collect();
    let mut job = read_table::<JobSpec>(text, root_span, root.into_inner(), &mut found).unwrap_or(JobSpec {
        version: JOB_VERSION,
        name: None,
        description: None,
        seed: None,
        work_dir: None,
        targets: Vec::new(),
        workloads: Vec::new(),
        fio: Vec::new(),
        mpi: None,
    });
    for (key, value) in arrays {
        let Some(value) = value else { continue };
        for (span, table) in tables_of(key, value, text, &mut found.mistakes) {
            match key {
                "target" => job.targets.extend(read_table(text, span, table, &mut found)),
                "workload" => job.workloads.extend(read_table(text, span, table, &mut found)),
                _ => job.fio.extend(read_table(text, span, table, &mut found)),
            }
        }
    }
    found.mistakes.truncate(MAX_MISTAKES);
    found.job = Some(job);
    found
}

type Span = std::ops::Range<usize>;

/// The tables of a top-level array such as `[[workload]]`; anything else there is a mistake.
fn tables_of<'i>(key: &str, value: toml::Spanned<toml::de::DeValue<'i>>, text: &str, mistakes: &mut Vec<Located>) -> Vec<(Span, toml::de::DeTable<'i>)> {
    let span = value.span();
    let not_tables = |at: Span| {
        let (line, column) = line_col(text, at.start);
        let message = format!("field \"{key}\": expected [[{key}]] tables; write each one as a [[{key}]] header followed by its keys");
        Located { line: Some(line), column: Some(column), message }
    };
    match value.into_inner() {
        toml::de::DeValue::Array(items) => {
            let mut tables = Vec::new();
            for item in items.iter() {
                match item.get_ref() {
                    toml::de::DeValue::Table(t) => tables.push((item.span(), t.clone())),
                    _ => mistakes.push(not_tables(item.span())),
                }
            }
            tables
        }
        toml::de::DeValue::Table(t) => vec![(span, t)],
        _ => {
            mistakes.push(not_tables(span));
            Vec::new()
        }
    }
}

/// Reads one table as `T`, collecting each mistake; a key at fault is removed and the table read
/// again. None when the table still does not read (a missing key, or a mistake no key holds).
fn read_table<T: serde::de::DeserializeOwned>(text: &str, span: Span, mut table: toml::de::DeTable<'_>, found: &mut Parsed) -> Option<T> {
    let mut removed: Vec<String> = Vec::new();
    // Each round removes a key, so the loop ends; the bound only guards against a pathological file.
    while found.mistakes.len() < MAX_MISTAKES {
        let de = toml::de::Deserializer::from(toml::Spanned::new(span.clone(), table.clone()));
        let e = match T::deserialize(de) {
            Ok(value) => return Some(value),
            Err(e) => e,
        };
        // A missing key is the table's mistake: its span is the table's, whose first key (at the
        // same place) it must not be pinned on, nor removed. A key removed for a bad value then
        // reads as missing: that mistake is already reported.
        if let Some(missing) = e.message().trim().strip_prefix("missing field `").and_then(|rest| rest.strip_suffix('`')) {
            if removed.iter().any(|k| k == missing) {
                return None;
            }
            // A key near the missing one is its misspelling: "backnd" in a [[target]], whose
            // keys besides name and backend are the backend's options, so no key there is
            // refused as unknown by the parser.
            match misspelling_of(&table, missing) {
                Some((key, at)) => {
                    let (line, column) = line_col(text, at);
                    let message = format!("unknown key \"{key}\". Did you mean \"{missing}\"? This table needs {missing} = ...");
                    found.mistakes.push(Located { line: Some(line), column: Some(column), message });
                    found.removed.push((span.start, missing.to_string()));
                }
                None => found.mistakes.push(locate(text, &e, None)),
            }
            return None;
        }
        let at = e.span().map(|s| s.start).unwrap_or(span.start);
        let hit = remove_key_at(&mut table, at);
        found.mistakes.push(locate(text, &e, hit.as_ref().map(|(_, path)| path.join(".")).as_deref()));
        let (inner_start, path) = hit?;
        let start = inner_start.unwrap_or(span.start);
        if let Some(meant) = meant_key(e.message()) {
            // A required key misspelt ("nme" for name) then reads as missing: the same mistake.
            removed.push(meant.clone());
            found.removed.push((start, meant));
        }
        // The keys holding it lose it too (`get` of a phase's `mix`): `check` stays silent about
        // them, or "a phase needs mix" would follow every bad weight.
        found.removed.extend(path.iter().map(|key| (start, key.clone())));
        removed.push(path.last().expect("a path names at least the key").clone());
    }
    None
}

/// The key of `table` that is a misspelling of `missing`, and where it starts.
fn misspelling_of(table: &toml::de::DeTable<'_>, missing: &str) -> Option<(String, usize)> {
    table
        .iter()
        .map(|(key, _)| key)
        .find(|key| crate::suggest::did_you_mean(key.get_ref(), &[missing]).is_some())
        .map(|key| (key.get_ref().to_string(), key.span().start))
}

/// The key an "unknown field `x`" message suggests, if any: the key the writer meant.
fn meant_key(message: &str) -> Option<String> {
    let rest = message.trim().strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    crate::suggest::did_you_mean(field, &candidates).map(str::to_string)
}

/// Removes the innermost key whose `key = value` text holds byte `at`. Returns the keys from
/// the table that holds it down to it (["mix", "get"] for a weight of a phase's mix), and where
/// that table starts when it is one of an array's (`[[workload.phase]]`), not this one.
fn remove_key_at(table: &mut toml::de::DeTable<'_>, at: usize) -> Option<(Option<usize>, Vec<String>)> {
    let mut hit = None;
    for (key, value) in table.iter_mut() {
        let is_array = matches!(value.get_ref(), toml::de::DeValue::Array(_));
        if let Some((start, mut inner)) = remove_in_value(value, at) {
            // A key of an array's table is named from its own table.
            if !is_array {
                inner.insert(0, key.get_ref().to_string());
            }
            return Some((start, inner));
        }
        // A [[workload.phases]] table starts at its header, before the key it names.
        let from = key.span().start.min(value.span().start);
        if (from..value.span().end.max(key.span().end)).contains(&at) {
            hit = Some(key.get_ref().to_string());
        }
    }
    let name = hit?;
    table.remove(name.as_str());
    Some((None, vec![name]))
}

fn remove_in_value(value: &mut toml::Spanned<toml::de::DeValue<'_>>, at: usize) -> Option<(Option<usize>, Vec<String>)> {
    match value.get_mut() {
        toml::de::DeValue::Table(t) => remove_key_at(t, at),
        toml::de::DeValue::Array(items) => items.iter_mut().find_map(|item| {
            let start = item.span().start;
            remove_in_value(item, at).map(|(inner_start, path)| (inner_start.or(Some(start)), path))
        }),
        _ => None,
    }
}

/// A TOML or serde error as a located mistake; `key` names the field it was found in.
fn locate(text: &str, e: &toml::de::Error, key: Option<&str>) -> Located {
    let (line, column) = match e.span() {
        Some(span) => {
            let (l, c) = line_col(text, span.start);
            (Some(l), Some(c))
        }
        None => (None, None),
    };
    let message = match e.span().and_then(|span| text.get(span)).filter(|_| e.message().trim() == "duplicate key") {
        // TOML's own words name no key; the span holds the repeated one.
        Some(repeated) => format!("key \"{}\" is given twice in this table; keep one of them", repeated.trim().trim_matches('"')),
        None => explain(e.message()),
    };
    let message = match key.and_then(field_range) {
        Some(range) => with_field_range(&message, &range),
        None => message,
    };
    let message = match key.zip(e.span()).and_then(|(key, span)| table_meant(text, span.start, key, e.message())) {
        Some(meant) => format!("{message}. Did you mean {meant}?"),
        None => message,
    };
    let message = match key {
        Some(key) if !message.starts_with("unknown key") => format!("field \"{key}\": {}", list_example(key, &message)),
        _ => message,
    };
    Located { line, column, message }
}

/// The keys that hold a table (or tables), in any table of a job.
const TABLE_KEYS: &[&str] = &["target", "workload", "fio", "mpi", "phase", "size_dist", "mix"];

/// The table a table given where `key` takes no table was meant to be, when `key` is near one
/// that takes tables: "[[workload.phase]]" for a `[[workload.phases]]` header (`phases` is the
/// list of operation names), or "\"phase\"" for an inline table. `at` is where the table starts.
fn table_meant(text: &str, at: usize, key: &str, serde_message: &str) -> Option<String> {
    if !serde_message.trim().starts_with("invalid type: map") {
        return None;
    }
    let last = key.rsplit('.').next().unwrap_or(key);
    let meant = crate::suggest::did_you_mean(last, TABLE_KEYS).filter(|meant| *meant != last)?;
    let written = text.get(at..).and_then(|rest| rest.lines().next()).unwrap_or_default().trim();
    match written.strip_suffix("]]").or_else(|| written.strip_suffix(']')) {
        Some(header) if written.starts_with('[') && header.ends_with(last) => {
            Some(format!("{}{meant}{}", &header[..header.len() - last.len()], &written[header.len()..]))
        }
        _ => Some(format!("\"{meant}\"")),
    }
}

/// The whole numbers a field takes, where the check of the plan limits them more than its type
/// does: a type mistake then names the field's range ("1 to 1024"), not the type's.
fn field_range(key: &str) -> Option<String> {
    match key.rsplit('.').next().unwrap_or(key) {
        "threads" => Some(format!("1 to {}", super::plan::MAX_THREADS)),
        "repeats" => Some("1 to 1000".into()),
        "objects" => Some(format!("1 to {}", super::plan::MAX_OBJECTS)),
        _ => None,
    }
}

/// `message` with the type's range of whole numbers (`type_in_words`), or the "not negative"
/// of a negative one, replaced by the field's own `range`.
fn with_field_range(message: &str, range: &str) -> String {
    const TYPE_RANGE: &str = "a whole number from 0 to ";
    const NOT_NEGATIVE: &str = "a whole number that is not negative";
    if let Some(at) = message.find(TYPE_RANGE) {
        let digits = message[at + TYPE_RANGE.len()..].chars().take_while(char::is_ascii_digit).count();
        return format!("{}a whole number from {range}{}", &message[..at], &message[at + TYPE_RANGE.len() + digits..]);
    }
    message.replace(NOT_NEGATIVE, &format!("a whole number from {range}"))
}

/// serde's "write a sequence" in TOML's words, with an example of the list `key` takes.
fn list_example(key: &str, message: &str) -> String {
    let example = match key.rsplit('.').next().unwrap_or(key) {
        "before" => "before = [\"sh\", \"-c\", \"sync\"] (the program, then each argument)",
        "threads" => "threads = [1, 4]",
        "sizes" => "sizes = [\"4KiB\", \"1MiB\"]",
        "phases" | "sequence" => "phases = [\"put\", \"get\"]",
        _ => "[\"a\", \"b\"]",
    };
    let example = if key == "sequence" { example.replacen("phases", "sequence", 1) } else { example.to_string() };
    message.replace("write a sequence", &format!("write a list in brackets, e.g. {example}"))
}

/// Adds a did-you-mean to serde's "unknown field `x`, expected one of `a`, `b`" messages.
fn explain(message: &str) -> String {
    let message = message.trim();
    if let Some(field) = message.strip_prefix("missing field `").and_then(|rest| rest.strip_suffix('`')) {
        if field == "version" {
            return "missing key \"version\"; add version = 1 as the first line of the job file".to_string();
        }
        return format!("missing key \"{field}\"; add {field} = ... to this table");
    }
    if let Some((found, expected)) = message.strip_prefix("invalid type: ").and_then(|rest| rest.split_once(", expected ")) {
        // TOML reads an integer beyond 64 bits as i128: that is a range mistake, not a type one.
        if let Some(number) = found.strip_prefix("integer `").and_then(|rest| rest.strip_suffix("` as i128")) {
            return format!("{number} is out of range here; write {}", type_in_words(expected));
        }
        let found = if found == "map" { "a table" } else { found };
        return format!("{found} is the wrong type here; write {}", type_in_words(expected));
    }
    if let Some((found, expected)) = message.strip_prefix("invalid value: integer `").and_then(|rest| rest.split_once("`, expected ")) {
        // The field's own range, where it has one, is checked (and said) once it reads.
        if found.starts_with('-') && expected.starts_with('u') {
            return format!("{found} is negative; this field takes a whole number that is not negative");
        }
        return format!("{found} is out of range here; write {}", type_in_words(expected));
    }
    let Some(rest) = message.strip_prefix("unknown field `") else { return message.to_string() };
    let Some((field, expected)) = rest.split_once('`') else { return message.to_string() };
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    if let Some(home) = table_of_misplaced(field, &candidates) {
        return format!("unknown key \"{field}\" here: it belongs in {home}. Known keys here: {}", candidates.join(", "));
    }
    match crate::suggest::did_you_mean(field, &candidates) {
        Some(s) => format!("unknown key \"{field}\". Did you mean \"{s}\"? Known keys here: {}", candidates.join(", ")),
        None => format!("unknown key \"{field}\". Known keys here: {}", candidates.join(", ")),
    }
}

/// serde's name for what a field takes (`u32`, `f64`, `a boolean`), in a job writer's words.
fn type_in_words(expected: &str) -> String {
    match expected {
        "u8" => format!("a whole number from 0 to {}", u8::MAX),
        "u16" => format!("a whole number from 0 to {}", u16::MAX),
        "u32" => format!("a whole number from 0 to {}", u32::MAX),
        "u64" | "usize" => format!("a whole number from 0 to {}", u64::MAX),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number, e.g. 0.5".to_string(),
        "a boolean" => "true or false".to_string(),
        "a map" | "map" => "a table".to_string(),
        other if other.starts_with("struct ") => "a table".to_string(),
        other => other.to_string(),
    }
}

const JOB_KEYS: &[&str] = &["version", "name", "description", "seed", "work_dir", "target", "workload", "fio", "mpi"];
#[rustfmt::skip]
const WORKLOAD_ONLY_KEYS: &[&str] = &[
    "sizes", "size_dist", "threads", "objects", "dataset", "min_objects", "max_objects", "phases", "phase", "zipf_theta",
    "repeats", "verify", "compressibility", "cache", "retries", "max_error_ratio", "give_up_after", "op_timeout",
    "preload", "duplicates", "settle_writeback",
];
const PHASE_ONLY_KEYS: &[&str] =
    &["mix", "sequence", "read_recent", "count", "duration", "min_duration", "bytes", "split", "rate", "arrivals", "warmup_count", "warmup", "before"];

/// Where a key that is unknown in this table (told apart by its known keys) belongs instead:
/// `count` written in `[[workload]]` is a phase's stop condition, not a misspelling.
fn table_of_misplaced(field: &str, known_here: &[&str]) -> Option<&'static str> {
    let here_is = |key: &str| known_here.contains(&key);
    let (in_workload, in_phase, in_job) = (here_is("sizes"), here_is("mix"), here_is("workload"));
    if (in_workload || in_job) && PHASE_ONLY_KEYS.contains(&field) {
        return Some("a [[workload.phase]] table");
    }
    if (in_phase || in_job) && WORKLOAD_ONLY_KEYS.contains(&field) {
        return Some("the [[workload]] table, above its phases");
    }
    if (in_workload || in_phase) && field == "backend" {
        return Some("a [[target]] table");
    }
    if (in_workload || in_phase) && JOB_KEYS.contains(&field) && !here_is(field) {
        return Some("the top of the job file, before any [[target]] or [[workload]]");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_is_named() {
        let err = parse("version = 1\n[[workload]]\nname = \"w\"\n[[workload.phase]]\nmix = { put = 1 }\nmix = { get = 1 }\n").unwrap_err();
        assert_eq!(err.line, Some(6), "{err:?}");
        assert_eq!(err.message, "key \"mix\" is given twice in this table; keep one of them");
    }

    #[test]
    fn an_integer_out_of_its_type_says_the_range() {
        let err = parse("version = 1\n[[workload]]\nname = \"w\"\n[[workload.phase]]\nmix = { put = 4294967296 }\n").unwrap_err();
        assert_eq!(err.line, Some(5), "{err:?}");
        assert!(err.message.contains("4294967296 is out of range here; write a whole number from 0 to 4294967295"), "{}", err.message);
        // A negative number is said to be one, with the field's own range where it has one.
        let err = parse("version = 1\n[[workload]]\nname = \"w\"\nthreads = [-1]\n").unwrap_err();
        assert!(err.message.ends_with("-1 is negative; this field takes a whole number from 1 to 1024"), "{}", err.message);
    }

    /// A bad weight names the mix it is in, and the mix it leaves empty is not reported again.
    #[test]
    fn a_bad_mix_weight_is_one_mistake_named_with_its_mix() {
        let text = "version = 1\n[[workload]]\nname = \"w\"\n[[workload.phase]]\nmix = { put = 1 }\n[[workload.phase]]\nmix = { get = -1 }\n";
        let parsed = parse_all(text);
        let messages: Vec<&str> = parsed.mistakes.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(messages, ["field \"mix.get\": -1 is negative; this field takes a whole number that is not negative"]);
        assert_eq!((parsed.mistakes[0].line, parsed.mistakes[0].column), (Some(7), Some(15)));
        // Silenced in the second phase's table only.
        let phase_start = text.rfind("[[workload.phase]]").unwrap();
        assert!(parsed.removed.iter().any(|(start, key)| key == "mix" && (phase_start..phase_start + 20).contains(start)), "{:?}", parsed.removed);
    }

    #[test]
    fn type_mistakes_are_said_in_words_not_rust_types() {
        let parsed =
            parse_all("version = \"1\"\n[[workload]]\nname = \"w\"\nthreads = [1.5]\nrepeats = 99999999999999999999\nverify = \"yes\"\nzipf_theta = \"x\"\n");
        let messages: Vec<&str> = parsed.mistakes.iter().map(|m| m.message.as_str()).collect();
        let all = messages.join("\n");
        for said in [
            "field \"version\": string \"1\" is the wrong type here; write a whole number from 0 to 4294967295",
            "field \"threads\": floating point `1.5` is the wrong type here; write a whole number from 1 to 1024",
            "field \"repeats\": 99999999999999999999 is out of range here; write a whole number from 1 to 1000",
            "field \"verify\": string \"yes\" is the wrong type here; write true or false",
            "field \"zipf_theta\": string \"x\" is the wrong type here; write a number, e.g. 0.5",
        ] {
            assert!(all.contains(said), "missing {said:?} in\n{all}");
        }
        assert!(!all.contains("u32") && !all.contains("i128") && !all.contains("f64"), "{all}");
        // Each field's own range, not its type's ("threads = [1.5]" said "0 to 4294967295").
        let parsed = parse_all("version = 1\n[[workload]]\nname = \"w\"\nobjects = -1\nrepeats = 1.0\n");
        let all = parsed.mistakes.iter().map(|m| m.message.as_str()).collect::<Vec<_>>().join("\n");
        assert!(all.contains("field \"objects\": -1 is negative; this field takes a whole number from 1 to 100000000"), "{all}");
        assert!(all.contains("field \"repeats\": floating point `1.0` is the wrong type here; write a whole number from 1 to 1000"), "{all}");
    }

    #[test]
    fn a_key_in_the_wrong_table_is_sent_to_its_table() {
        let parsed = parse_all("version = 1\n[[workload]]\nname = \"w\"\ncount = 5\nbackend = \"fs\"\n[[workload.phase]]\nmix = { put = 1 }\nthreads = [2]\n");
        let all: Vec<&str> = parsed.mistakes.iter().map(|m| m.message.as_str()).collect();
        let all = all.join("\n");
        assert!(all.contains("unknown key \"count\" here: it belongs in a [[workload.phase]] table"), "{all}");
        assert!(all.contains("unknown key \"backend\" here: it belongs in a [[target]] table"), "{all}");
        assert!(all.contains("unknown key \"threads\" here: it belongs in the [[workload]] table, above its phases"), "{all}");
    }

    #[test]
    fn unknown_keys_are_located_with_a_suggestion() {
        let text = "version = 1\n[[workload]]\nname = \"w\"\nthread = [1]\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.line, Some(4), "{err:?}");
        assert!(err.message.contains("Did you mean \"threads\""), "{}", err.message);
    }

    #[test]
    fn sizes_parse_exactly() {
        let text = "version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"2.6MB\", \"4KiB\", 100]\n";
        let job = parse(text).unwrap();
        let sizes: Vec<u64> = job.workloads[0].get_ref().sizes.iter().map(|s| s.0).collect();
        assert_eq!(sizes, vec![2_600_000, 4096, 100]);
    }

    #[test]
    fn every_parsing_mistake_is_collected_and_the_good_tables_kept() {
        let text =
            "version = 1\nnmae = \"x\"\n[[target]]\nbackend = 5\n[[target]]\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"1XB\"]\nthread = [1]\n";
        let parsed = parse_all(text);
        let at: Vec<(Option<usize>, Option<usize>)> = parsed.mistakes.iter().map(|m| (m.line, m.column)).collect();
        assert_eq!(at, vec![(Some(2), Some(1)), (Some(4), Some(11)), (Some(9), Some(10)), (Some(10), Some(1))], "{:?}", parsed.mistakes);
        assert!(parsed.mistakes[1].message.starts_with("field \"backend\": integer `5` is the wrong type here; write a string"), "{:?}", parsed.mistakes[1]);
        let job = parsed.job.unwrap();
        assert_eq!(job.targets.len(), 1, "the good target is kept for checking");
        assert_eq!(job.workloads.len(), 1, "a workload with removed keys is still checked");
        let workload_start = job.workloads[0].span().start;
        assert!(parsed.removed.contains(&(workload_start, "sizes".to_string())));
        assert!(parsed.removed.contains(&(workload_start, "threads".to_string())), "the key \"thread\" was meant to be");
    }

    /// A missing key is said once, as the table's: it was pinned on the table's first key (which
    /// starts where the table does), removed, and then said again.
    #[test]
    fn a_missing_key_is_said_once_and_never_pinned_on_a_key_that_is_there() {
        let parsed = parse_all("name = \"x\"\n[[target]]\nbackend = \"null\"\n");
        let said: Vec<&str> = parsed.mistakes.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(said, ["missing key \"version\"; add version = 1 as the first line of the job file"]);
        let parsed = parse_all("version = 1\n[[target]]\nname = \"t\"\n");
        let said: Vec<&str> = parsed.mistakes.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(said, ["missing key \"backend\"; add backend = ... to this table"]);
    }

    #[test]
    fn a_removed_key_does_not_come_back_as_missing() {
        let parsed = parse_all("version = 1\n[[target]]\nbackend = [\"fs\"]\n");
        assert_eq!(parsed.mistakes.len(), 1, "{:?}", parsed.mistakes);
        assert!(parsed.mistakes[0].message.contains("field \"backend\""), "{:?}", parsed.mistakes);
    }

    #[test]
    fn a_syntax_error_stops_at_once() {
        let parsed = parse_all("version = 1\nseeed = \n[[target]]\nbackend = 5\n");
        assert!(parsed.job.is_none());
        assert_eq!(parsed.mistakes.len(), 1);
        assert_eq!(parsed.mistakes[0].line, Some(2), "{:?}", parsed.mistakes);
    }

    #[test]
    fn bad_sizes_are_located() {
        let text = "version = 1\n[[workload]]\nname = \"w\"\nsizes = [\"2.6XB\"]\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.line, Some(4));
        assert!(err.message.contains("\"2.6XB\""), "{}", err.message);
    }
}
