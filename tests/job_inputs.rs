//! Arbitrary input against the job loader and the size, duration and rate parsers (issue 14):
//! no panic on any input, every mistake located inside the file, and parsed values that format
//! and parse back to themselves.
//!
//! Inputs come from fixed seeds (xoshiro), so a failure names its seed and case and reproduces
//! exactly; each test is bounded by a case count, not by time.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::panic::{catch_unwind, AssertUnwindSafe};
use stowbench::job;
use stowbench::units::{ByteSize, Nanos};

/// Pieces text is built from: numbers of every shape, units, TOML punctuation and awkward unicode.
const TOKENS: &[&str] = &[
    "0",
    "1",
    "7",
    "42",
    "4096",
    "2.6",
    ".5",
    "5.",
    "1_000",
    "1e3",
    "-1",
    "+1",
    "-0",
    "1e400",
    "-1e400",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "0.000000000000000000001",
    "b",
    "B",
    "kB",
    "KB",
    "kb",
    "MB",
    "GB",
    "TB",
    "KiB",
    "MiB",
    "GiB",
    "TiB",
    "PB",
    "PiB",
    "ns",
    "us",
    "µs",
    "ms",
    "s",
    "m",
    "min",
    "h",
    "k",
    "M",
    "/s",
    "/",
    " ",
    "  ",
    "\t",
    "\n",
    ".",
    "_",
    "e",
    "=",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    ",",
    "#",
    "\\",
    "é",
    "ß",
    "\u{0}",
    "\u{feff}",
    "\u{301}",
    "🦀",
    "\u{202e}",
    "ǅ",
    "Ω",
    "١",
    "µ",
];

/// Extra tokens for job file mutations: keys, headers and values that are valid somewhere.
const JOB_TOKENS: &[&str] = &[
    "[[target]]",
    "[[workload]]",
    "[[workload.phase]]",
    "[[fio]]",
    "[workload]",
    "[target.x]",
    "backend",
    "name",
    "sizes",
    "objects",
    "threads",
    "phases",
    "repeats",
    "rate",
    "duration",
    "count",
    "mix",
    "sequence",
    "size_dist",
    "dataset",
    "\"fs\"",
    "\"sim\"",
    "\"put\"",
    "\"get\"",
    "\"upload\"",
    "\"download\"",
    "\"4KiB\"",
    "\"-4KiB\"",
    "\"1e400/s\"",
    "\"0/s\"",
    "\"1.5s\"",
    "\"-1s\"",
    "[1, 2]",
    "[]",
    "{}",
    "{ get = 1 }",
    "true",
    "0.99",
    "1000",
    "-5",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "1979-05-27T07:32:00Z",
    "\"\"\"",
    "'''",
];

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

fn below(rng: &mut Xoshiro256PlusPlus, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// A string of 0 to `max_tokens` random tokens.
fn tokens(rng: &mut Xoshiro256PlusPlus, pool: &[&str], max_tokens: usize) -> String {
    let n = below(rng, max_tokens + 1);
    (0..n).map(|_| pool[below(rng, pool.len())]).collect()
}

/// Runs `f`, failing the test with `what` (which names the seed and input) if it panics.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(e) => {
            let why = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("panicked on {what}: {}", why.unwrap_or_default())
        }
    }
}

/// Feeds `parse` 200,000 random token strings from `seed`: it must not panic, an error must quote
/// the text, and `accepted` checks each value it returns (`what` names the case).
fn parser_property<T>(seed: u64, parse: impl Fn(&str) -> Result<T, String>, accepted: impl Fn(&str, T)) {
    let mut r = rng(seed);
    for case in 0..200_000 {
        let text = tokens(&mut r, TOKENS, 6);
        let what = format!("seed {seed} case {case}: {text:?}");
        match no_panic(&what, || parse(&text)) {
            Ok(value) => accepted(&what, value),
            Err(e) => assert!(e.contains(&format!("\"{text}\"")), "{what}: the message does not quote the input: {e}"),
        }
    }
}

#[test]
fn sizes_never_panic_quote_bad_text_and_round_trip() {
    let parse = |text: &str| ByteSize::parse(text).map_err(|e| e.0);
    parser_property(14, parse, |what, size| {
        let label = size.label();
        assert_eq!(ByteSize::parse(&label).ok(), Some(size), "{what}: label {label:?} does not parse back");
        assert_eq!(ByteSize::parse(&size.0.to_string()).ok(), Some(size), "{what}");
    });
}

#[test]
fn every_byte_count_labels_and_parses_back() {
    let mut r = rng(15);
    let edges = [0, 1, 999, 1000, 1023, 1024, u64::MAX, u64::MAX - 1, u64::MAX / 10, u64::MAX / 10 + 1, 1 << 63, (1 << 30) * 3];
    let random = (0..100_000).map(|i| r.next_u64() >> (i % 64));
    for bytes in edges.into_iter().chain(random) {
        let label = no_panic(&format!("label of {bytes}"), || ByteSize(bytes).label());
        assert_eq!(ByteSize::parse(&label).ok(), Some(ByteSize(bytes)), "{bytes} labels as {label:?}");
    }
}

#[test]
fn durations_never_panic_quote_bad_text_and_round_trip() {
    let parse = |text: &str| Nanos::parse(text).map_err(|e| e.0);
    parser_property(16, parse, |what, d| assert_eq!(Nanos::parse(&format!("{}ns", d.0)).ok(), Some(d), "{what}"));
}

#[test]
fn rates_never_panic_and_are_finite_and_bounded() {
    parser_property(17, job::plan::parse_rate, |what, per_s| {
        let bounds = job::plan::MIN_RATE_PER_S..=job::plan::MAX_RATE_PER_S;
        assert!(per_s.is_finite() && bounds.contains(&per_s), "{what}: accepted {per_s}/s");
    });
}

/// Loads `text` and checks each mistake lies inside the file, and the rendered list names the
/// file on every located line and ends with the count.
fn load_and_check_locations(what: &str, text: &str) -> usize {
    let (_, mistakes) = no_panic(what, || job::check_text(text, "fuzz.toml"));
    let lines: Vec<&str> = text.split('\n').collect();
    for m in &mistakes {
        assert!(m.line >= 1 && m.line <= lines.len(), "{what}: line {} outside the file: {m:?}", m.line);
        let width = lines[m.line - 1].chars().count();
        assert!(m.column >= 1 && m.column <= width + 1, "{what}: column {} outside line {} ({width} chars): {m:?}", m.column, m.line);
        assert!(!m.message.trim().is_empty(), "{what}: empty message");
    }
    if !mistakes.is_empty() {
        let rendered = job::render_mistakes("fuzz.toml", mistakes.clone());
        for m in &mistakes {
            let first_line = m.message.lines().next().unwrap_or_default();
            let located = format!("fuzz.toml:{}:{}: {first_line}", m.line, m.column);
            assert!(rendered.contains(&located), "{what}: {located:?} missing from\n{rendered}");
        }
        let count = rendered.lines().last().unwrap_or_default();
        assert!(count.ends_with(" in fuzz.toml") && count.contains(" mistake"), "{what}: no count line: {rendered}");
    }
    mistakes.len()
}

#[test]
fn the_loader_never_panics_on_random_text() {
    let mut r = rng(18);
    for case in 0..20_000 {
        let text = match case % 3 {
            0 => String::from_utf8_lossy(&(0..below(&mut r, 300)).map(|_| r.next_u64() as u8).collect::<Vec<_>>()).into_owned(),
            1 => tokens(&mut r, TOKENS, 60),
            _ => format!("version = 1\n{}", tokens(&mut r, JOB_TOKENS, 40)),
        };
        load_and_check_locations(&format!("random case {case}: {text:?}"), &text);
    }
}

/// The shipped recipes and a job that uses every section: the seeds of the mutations.
fn seed_jobs() -> Vec<(String, String)> {
    let mut jobs: Vec<(String, String)> = job::recipes::RECIPES.iter().map(|r| (format!("recipe {}", r.name), r.text.to_string())).collect();
    jobs.push(("example".into(), EXAMPLE_JOB.to_string()));
    jobs
}

const EXAMPLE_JOB: &str = r#"version = 1
name = "every section"
seed = 7
[[target]]
backend = "sim"
latency = "1ms"
retries = 2
[[target]]
name = "files"
backend = "fs"
[[workload]]
name = "w"
sizes = ["4KiB", "2.6MB"]
threads = [1, 4]
objects = 100
key_order = "zipf"
zipf_theta = 0.9
phases = ["put", "get"]
[[workload]]
name = "mix"
size_dist = { kind = "log-uniform", min = "1KiB", max = "1MiB" }
dataset = "64MiB"
max_objects = 1000
repeats = 2
[[workload.phase]]
mix = { get = 90, put = 10 }
duration = "2s"
rate = "2.5k/s"
arrivals = "poisson"
[[workload.phase]]
sequence = ["put", "get"]
read_recent = 5
count = 50
split = "even"
"#;

/// Splits text into tokens that keep their separators, so joining them gives the text back.
fn split_tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() || "[]{}=,\"'".contains(c) {
            if start < i {
                out.push(&text[start..i]);
            }
            out.push(&text[i..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[test]
fn the_loader_never_panics_on_mutated_recipes() {
    let mut r = rng(19);
    for (name, text) in seed_jobs() {
        assert!(job::check_text(&text, "seed.toml").1.is_empty(), "{name} must load cleanly before mutation");
        let tokens = split_tokens(&text);
        let mut mistaken = 0;
        for case in 0..2_000 {
            let mut mutated: Vec<&str> = tokens.clone();
            for _ in 0..1 + below(&mut r, 4) {
                let i = below(&mut r, mutated.len().max(1)).min(mutated.len().saturating_sub(1));
                match below(&mut r, 4) {
                    0 => {
                        mutated.remove(i);
                    }
                    1 => mutated.insert(i, mutated[i]),
                    2 => mutated[i] = JOB_TOKENS[below(&mut r, JOB_TOKENS.len())],
                    _ => mutated[i] = TOKENS[below(&mut r, TOKENS.len())],
                }
                if mutated.is_empty() {
                    break;
                }
            }
            let text = mutated.concat();
            mistaken += usize::from(load_and_check_locations(&format!("{name} mutation {case}: {text:?}"), &text) > 0);
        }
        // Most mutations must break the file, or this test checks nothing.
        assert!(mistaken > 1_000, "{name}: only {mistaken} of 2000 mutations were refused");
    }
}

#[test]
fn the_loader_survives_deep_nesting_and_huge_values() {
    let depth = 5_000;
    let cases = [
        ("deep arrays", format!("version = 1\nx = {}1{}\n", "[".repeat(depth), "]".repeat(depth))),
        ("deep inline tables", format!("version = 1\nx = {}1{}\n", "{a = ".repeat(depth), "}".repeat(depth))),
        ("deep dotted key", format!("version = 1\n{} = 1\n", vec!["a"; depth].join("."))),
        ("deep table header", format!("version = 1\n[{}]\nb = 1\n", vec!["target"; depth].join("."))),
        ("deep workload key", format!("version = 1\n[[workload]]\nname = \"w\"\n{} = 1\n", vec!["phase"; depth].join("."))),
        ("huge sizes", "version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [\"16TiB\", 9223372036854775807]\nsize_dist = { kind = \"uniform\", min = 1, max = \"16TiB\" }\nobjects = 100000000\n".into()),
        ("huge matrix", format!("version = 1\n[[target]]\nbackend = \"sim\"\n[[workload]]\nname = \"w\"\nsizes = [{}]\nthreads = [{}]\nrepeats = 1000\nobjects = 1\nphases = [\"put\"]\n", vec!["1"; 1000].join(","), vec!["1"; 1000].join(","))),
    ];
    for (what, text) in cases {
        assert!(load_and_check_locations(what, &text) > 0, "{what} must be refused");
    }
}

// Session 46's tester found these in the job checks: each test fails without its fix.

/// A job with one `fs` target and `workload`'s lines after its name.
fn job_with(workload: &str) -> String {
    format!("version = 1\n[[target]]\nbackend = \"fs\"\n[[workload]]\nname = \"w\"\n{workload}")
}

/// Every mistake `validate` would list for `text` (the loader's part), rendered.
fn mistakes_in(text: &str) -> String {
    job::load_text(text, "job.toml").err().unwrap_or_default()
}

/// A case id named 1 TiB "1024GiB": the labels stopped at GiB.
#[test]
fn a_case_id_names_a_terabyte_size_in_tib() {
    let plan =
        job::load_text(&job_with("sizes = [\"1TiB\", \"1PiB\", \"1536GiB\", \"2TB\", \"64MB\"]\nobjects = 1\nphases = [\"put\"]\n"), "job.toml").unwrap();
    let ids: Vec<&str> = plan.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["fs/w/1TiB/t1/r1", "fs/w/1PiB/t1/r1", "fs/w/1536GiB/t1/r1", "fs/w/2TB/t1/r1", "fs/w/64MB/t1/r1"]);
}

/// A dataset of the wrong type or with a bad size was also reported as "say how many objects".
#[test]
fn a_bad_dataset_is_one_mistake_not_also_missing_objects() {
    for (dataset, said) in [
        ("true", "job.toml:8:11: field \"dataset\": boolean `true` is the wrong type here"),
        ("1e30", "job.toml:8:11: field \"dataset\": size 1e30 is a decimal number, not a count of bytes"),
        ("\"1e30\"", "job.toml:8:11: field \"dataset\": size \"1e30\": exponents are not accepted"),
        ("\"-1\"", "job.toml:8:11: field \"dataset\": size \"-1\" is negative"),
        ("\"5XB\"", "job.toml:8:11: field \"dataset\": size \"5XB\" has an unknown unit \"XB\""),
    ] {
        let said_all = mistakes_in(&job_with(&format!("sizes = [\"4KiB\"]\nphases = [\"put\"]\ndataset = {dataset}\n")));
        assert!(said_all.starts_with(said) && said_all.ends_with("\n1 mistake in job.toml"), "{dataset}: {said_all}");
    }
    // Without a dataset at all, objects are still asked for.
    assert!(mistakes_in(&job_with("sizes = [\"4KiB\"]\nphases = [\"put\"]\n")).contains("field \"objects\": say how many objects"));
}

/// A required key misspelt ("nme" for name) was also reported as missing.
#[test]
fn a_misspelt_required_key_is_not_also_missing() {
    let said = mistakes_in("version = 1\n[[target]]\nbackend = \"fs\"\n[[workload]]\nnme = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\n");
    assert!(said.starts_with("job.toml:5:1: unknown key \"nme\". Did you mean \"name\"?"), "{said}");
    assert!(said.ends_with("\n1 mistake in job.toml"), "{said}");
}

/// A phase without `mix` said only that, hiding the phase's other mistakes.
#[test]
fn a_phase_without_mix_still_reports_its_other_mistakes() {
    let phase = "[[workload.phase]]\ncount = 0\nkey_order = \"zipff\"\nsplit = \"halves\"\nrate = \"fast\"\nmin_duration = \"0s\"\n";
    let said = mistakes_in(&job_with(&format!("sizes = [\"4KiB\"]\nobjects = 5\n{phase}")));
    for expected in [
        "job.toml:8:1: workload \"w\", field \"mix\": a phase needs mix",
        "job.toml:9:1: workload \"w\", field \"count\": a stop condition of 0",
        "job.toml:10:1: workload \"w\", field \"key_order\": \"zipff\" is not a key order",
        "job.toml:11:1: workload \"w\", field \"split\": split = \"halves\" is not known",
        "job.toml:12:1: workload \"w\", field \"rate\": rate \"fast\"",
        "job.toml:13:1: workload \"w\", field \"min_duration\": a minimum of 0 changes nothing",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in\n{said}");
    }
    assert!(said.ends_with("\n6 mistakes in job.toml"), "{said}");
}

/// `[[workload.phases]]`, `backnd` and `fsync_directory` got no did-you-mean: a table where
/// `phases` (a list of names) was expected dropped the workload unexplained, a [[target]] sends
/// every key but name and backend to its backend (so "backnd" read as backend missing), and an
/// edit distance alone misses a word written out ("directory" for "dir").
#[test]
fn unknown_keys_get_a_suggestion_in_every_kind_of_table() {
    let said = mistakes_in(&job_with("sizes = [\"4KiB\"]\nobjects = 5\n[[workload.phases]]\nmix = { put = 1 }\n"));
    assert_eq!(said, "job.toml:8:1: field \"phases\": a table is the wrong type here; write a string. Did you mean [[workload.phase]]?\n1 mistake in job.toml");
    let said = mistakes_in("version = 1\n[[target]]\nbacknd = \"fs\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\n");
    assert_eq!(said, "job.toml:3:1: unknown key \"backnd\". Did you mean \"backend\"? This table needs backend = ...\n1 mistake in job.toml");
    let said = mistakes_in(
        "version = 1\n[[target]]\nbackend = \"fs\"\nnmae = \"files\"\n[[workload]]\nname = \"w\"\nsizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\n",
    );
    assert!(
        said.starts_with("job.toml:4:1: target \"fs\": unknown key \"nmae\". Did you mean \"name\"? A target's own keys are name, backend, retries"),
        "{said}"
    );
    // A backend's own options are checked by the backend, against its declared list.
    let (plan, mistakes) = job::check_text(
        "version = 1\n[[target]]\nbackend = \"fs\"\nfsync_directory = true\n[[workload]]\nname = \"w\"\nsizes = [1]\nobjects = 1\nphases = [\"put\"]\n",
        "job.toml",
    );
    assert!(mistakes.is_empty(), "{mistakes:?}");
    let fs = stowbench::backend::find("fs").unwrap();
    let said = plan.unwrap().targets[0].options.check_known("fs", fs.options).unwrap_err();
    assert!(said.starts_with("job.toml:4:1: target \"fs\": unknown option \"fsync_directory\" for backend fs. Did you mean \"fsync_dir\"?"), "{said}");
}

/// `op_timeout` given to a local backend was refused at the target's line, not at op_timeout's.
#[test]
fn op_timeout_on_a_local_backend_is_refused_at_its_own_line() {
    let plan = job::load_text(&job_with("sizes = [\"4KiB\"]\nobjects = 5\nphases = [\"put\"]\nop_timeout = \"1s\"\n"), "job.toml").unwrap();
    let local = stowbench::backend::Capabilities::default();
    let said = stowbench::runner::contract::check(&plan, 0, &local).unwrap_err();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("job.toml:9:1: target \"fs\" (backend fs) cannot honour op_timeout"), "{said:?}");
}

/// A dataset far outside the default object counts was clamped without a word (5 bytes ran 16
/// objects of 4 KiB, 99999 TiB ran 100000); bounds the job writes still hold the count.
#[test]
fn a_dataset_outside_the_default_object_counts_is_refused_with_the_range() {
    let dataset = |lines: &str| job_with(&format!("sizes = [\"4KiB\"]\nphases = [\"put\"]\n{lines}"));
    for (lines, held) in [("dataset = 5\n", "5B holds 0 objects of 4KiB"), ("dataset = \"99999TiB\"\n", "99999TiB holds 26843277164544 objects of 4KiB")] {
        let said = mistakes_in(&dataset(lines));
        let range = "outside the 16 to 100000 a case holds unless min_objects and max_objects say otherwise; give a dataset from 64KiB to 409.6MB";
        assert!(said.starts_with(&format!("job.toml:8:1: workload \"w\", field \"dataset\": {held}, {range}")), "{lines}: {said}");
    }
    // Bounds the job writes are asked-for clamps, as the quick recipe's "10 to 300 objects".
    let objects = |lines: &str| job::load_text(&dataset(lines), "job.toml").map(|p| p.cases[0].objects);
    assert_eq!(objects("dataset = \"99999TiB\"\nmax_objects = 300\n"), Ok(300));
    assert_eq!(objects("dataset = 5\nmin_objects = 10\n"), Ok(10));
    assert_eq!(objects("dataset = \"64MiB\"\n"), Ok(16384));
    let said = mistakes_in(&dataset("dataset = \"1MiB\"\nmax_objects = 0\n"));
    assert!(said.contains("field \"max_objects\": 0 is out of range; use 1 to 100000000"), "{said}");
}
