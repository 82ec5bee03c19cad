//! Every output format, rendered from fixed reports (tests/fixtures/reports/: real small runs,
//! frozen) and compared with golden files in tests/golden/reports/: the table, CSV, the JSON round
//! trip, and comparisons (table, JSON, CSV, HTML).
//! Regenerate the golden files with `UPDATE_GOLDEN=1 cargo test --release --test report_render`,
//! then read the diff before committing it.

mod common;

use std::path::{Path, PathBuf};
use stowbench::report::compare::{self, Change, Comparison, MatchedBy, Options, Verdict};
use stowbench::report::model::RunReport;
use stowbench::report::reporters;

const FIXTURES: [&str; 4] = ["objects-a", "objects-b", "fio-a", "fio-b"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(format!("{name}.json"))
}

fn load(name: &str) -> RunReport {
    stowbench::report::read(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

/// Compares `text` with the golden file `name` (rewriting it first under UPDATE_GOLDEN=1).
fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports").join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert!(text == expected, "{name} differs from its golden file {} (UPDATE_GOLDEN=1 rewrites it; then read the diff)", path.display());
}

fn render_report(format: &str, report: &RunReport) -> String {
    reporters::for_report(format).unwrap()(report)
}

fn render_comparison(format: &str, comparison: &Comparison) -> String {
    reporters::for_comparison(format).unwrap()(comparison)
}

/// RFC 4180 records: fields split on commas outside quotes, `""` inside quotes is one quote.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field, mut quoted) = (Vec::new(), Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => record.push(std::mem::take(&mut field)),
            ('\n', false) => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (other, _) => field.push(other),
        }
    }
    records
}

#[test]
fn every_fixture_is_a_valid_report_and_round_trips_through_the_model_byte_for_byte() {
    for name in FIXTURES {
        common::assert_valid_report(&fixture(name));
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        assert!(render_report("json", &load(name)) == text, "{name}: reading and writing the report changed it");
    }
}

#[test]
fn tables_match_their_golden_files() {
    for name in FIXTURES {
        golden(&format!("{name}.table.txt"), &render_report("table", &load(name)));
    }
}

/// A report saved mid-run ("running") says so in the table and on the page: if its run is over,
/// it ended before its final write, and the report holds only the cases finished by then.
#[test]
fn a_report_still_running_says_what_that_means() {
    let mut report = load("objects-a");
    report.status = stowbench::report::model::RunStatus::Running;
    for format in ["table", "html"] {
        let text = render_report(format, &report);
        assert!(text.contains("it ended before its final write"), "{format}");
    }
    assert!(!render_report("table", &load("objects-a")).contains("before its final write"));
    // A run that stopped early says how much of its plan it ran, and what it did not.
    let planned = report.cases.len();
    let last = report.cases.pop().unwrap().case_id;
    let table = render_report("table", &report);
    assert!(table.contains(&format!("{} of {planned} planned cases (not run: {last})", planned - 1)), "{table}");
}

#[test]
fn csv_matches_its_golden_files_with_one_row_per_case_and_operation() {
    for name in FIXTURES {
        golden(&format!("{name}.csv"), &render_report("csv", &load(name)));
    }
    let objects = parse_csv(&render_report("csv", &load("objects-a")));
    let (header, rows) = objects.split_first().unwrap();
    assert_eq!(rows.len(), 12 * 2, "12 cases × (put, get), one operation each");
    assert!(rows.iter().all(|r| r.len() == header.len()), "every row has every column");
    for column in [
        "run_id",
        "case_id",
        "phase",
        "op",
        "resources.client_rss_peak_bytes",
        "disk.allocated_bytes",
        "phase.throughput_total.bytes_per_s",
        "op.latency.p99_ns",
    ] {
        assert!(header.iter().any(|h| h == column), "objects CSV lacks {column}: {header:?}");
    }
    let fio = parse_csv(&render_report("csv", &load("fio-a")));
    let (header, rows) = fio.split_first().unwrap();
    assert_eq!(rows.len(), 8, "8 cases, each reading or writing");
    for column in ["op", "iops", "op.iops", "op.lat_ns_p99", "target.fs_type", "op.percentiles_ns.99.9"] {
        assert!(header.iter().any(|h| h == column), "fio CSV lacks {column}: {header:?}");
    }
    assert!(!header.iter().any(|h| h == "job_file" || h.starts_with("fio_jobs_json")), "documents stay in the JSON");
}

/// fio's percentile columns read in ascending order of the percentile: keyed as text, p10 and
/// p25 came before p5.
#[test]
fn fio_percentile_columns_are_in_ascending_order_of_the_percentile() {
    let fio = parse_csv(&render_report("csv", &load("fio-a")));
    let percentiles: Vec<&str> = fio[0].iter().filter_map(|h| h.strip_prefix("op.percentiles_ns.")).collect();
    assert_eq!(percentiles, ["1", "5", "10", "25", "50", "75", "90", "95", "99", "99.5", "99.9", "99.95", "99.99"]);
}

#[test]
fn csv_columns_follow_the_model_so_server_figures_appear_when_measured() {
    let mut report = load("objects-a");
    report.cases[3].resources.server_cpu_ns = Some(123_456_789);
    report.cases[3].disk.server_reported_bytes = Some(4096);
    let records = parse_csv(&render_report("csv", &report));
    let column = |name: &str| records[0].iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (cpu, disk, case) = (column("resources.server_cpu_ns"), column("disk.server_reported_bytes"), column("case_id"));
    let row = records.iter().find(|r| r[case] == report.cases[3].case_id).unwrap();
    assert_eq!((row[cpu].as_str(), row[disk].as_str()), ("123456789", "4096"));
    assert!(records.iter().skip(1).filter(|r| r[case] != report.cases[3].case_id).all(|r| r[cpu].is_empty()), "no figure where none was measured");
}

fn compare_fixtures(baseline: &str, candidate: &str, options: &Options) -> Comparison {
    let (a, b) = (load(baseline), load(candidate));
    let name = |n: &str| format!("{n}.json");
    compare::compare((&name(baseline), &a), &[(&name(candidate), &b)], options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn comparisons_match_their_golden_files() {
    let gated = Options { metrics: Vec::new(), fail_if_slower_percent: Some(10.0) };
    for (baseline, candidate, stem) in [("objects-a", "objects-b", "compare-objects"), ("fio-a", "fio-b", "compare-fio")] {
        let comparison = compare_fixtures(baseline, candidate, &gated);
        golden(&format!("{stem}.table.txt"), &render_comparison("table", &comparison));
        golden(&format!("{stem}.json"), &render_comparison("json", &comparison));
        golden(&format!("{stem}.csv"), &render_comparison("csv", &comparison));
        let round_trip: Comparison = serde_json::from_str(&render_comparison("json", &comparison)).unwrap();
        assert_eq!(render_comparison("table", &round_trip), render_comparison("table", &comparison), "the JSON holds the whole comparison");
    }
}

#[test]
fn comparing_the_object_fixtures_finds_the_slower_sim_and_lists_the_extra_size() {
    let c = compare_fixtures("objects-a", "objects-b", &Options { metrics: Vec::new(), fail_if_slower_percent: Some(10.0) });
    let sim_put = c.rows.iter().find(|r| r.case == "sim/small/4KiB/t1" && r.phase.as_deref() == Some("put") && r.metric == "ops_per_s").unwrap();
    // 1 ms → 1.25 ms per operation on the virtual clock: 1000 → 800 op/s in every repeat.
    assert_eq!((sim_put.baseline.values.clone(), sim_put.candidate_sample.values.clone()), (vec![1000.0; 3], vec![800.0; 3]));
    assert_eq!((sim_put.change, sim_put.verdict, sim_put.matched_by), (Change::Slower, Verdict::Significant, MatchedBy::Id));
    // These small runs time fewer than 100 operations of each kind: their p99s are maxima,
    // listed as not compared (8: put and get of two sizes, sim and fs), not ranked.
    let (few, extra): (Vec<_>, Vec<_>) = c.unmatched.iter().partition(|u| u.reason.starts_with("p99 latency not compared"));
    let extra: Vec<&str> = extra.iter().map(|u| u.case.as_str()).collect();
    assert_eq!(extra, ["sim/small/256KiB/t1", "fs/small/256KiB/t1"]);
    assert!(few.len() == 8 && !c.rows.iter().any(|r| r.metric == "p99_ns"), "{few:?}");
    let gate = c.gate.as_ref().unwrap();
    assert!(!gate.passed && gate.failures.iter().any(|f| c.rows[f.row].case == "sim/small/4KiB/t1"));
}

#[test]
fn comparing_the_fio_fixtures_pairs_by_conditions_without_enough_repeats() {
    let c = compare_fixtures("fio-a", "fio-b", &Options::default());
    assert!(!c.rows.is_empty() && c.unmatched.is_empty());
    assert!(c.rows.iter().all(|r| r.matched_by == MatchedBy::Conditions && r.verdict == Verdict::NotEnoughRepeats));
    let first = &c.rows[0];
    assert_eq!(
        (first.case.as_str(), first.candidate_case.as_str()),
        ("fio/fa/dir/randread/bs4KiB/j1/qd1/f1/s1MiB", "fio/fb/dir/randread/bs4KiB/j1/qd1/f1/s1MiB")
    );
}

#[test]
fn the_comparison_html_is_one_self_contained_escaped_page() {
    let mut b = load("objects-b");
    b.name = "<b>&\"quoted\"".into();
    let a = load("objects-a");
    let c = compare::compare(("a<1>.json", &a), &[("b.json", &b)], &Options { metrics: Vec::new(), fail_if_slower_percent: Some(10.0) }).unwrap();
    let page = render_comparison("html", &c);
    assert!(page.starts_with("<!DOCTYPE html>\n") && page.ends_with("</html>\n"));
    assert_eq!(page.matches("<table>").count(), 1, "one table per candidate");
    assert_eq!(page.matches("<tr class=").count(), c.rows.len());
    assert!(page.contains("a&lt;1&gt;.json") && page.contains("&lt;b&gt;&amp;&quot;quoted&quot;") && !page.contains("<b>&"));
    for external in ["<script", "<link", "src=", "http://", "https://", "@import"] {
        assert!(!page.contains(external), "the page loads nothing: found {external}");
    }
    assert!(page.contains("<div class=\"gate failed\">"));
}

/// A target whose `path` put its data on another filesystem than the work directory's: the
/// header once said only "data in <work dir> on ext4", the page likewise, whatever the data was on.
#[test]
fn a_target_on_another_filesystem_is_named_with_its_filesystem() {
    let mut report = load("objects-a");
    let target = report.cases[0].target.clone();
    let mut elsewhere = report.environment.work_dir_filesystem.clone().expect("the fixture states its filesystem");
    (elsewhere.path, elsewhere.mount_point, elsewhere.source) = ("/dev/shm/bench/stowbench-run-case".into(), "/dev/shm".into(), "tmpfs".into());
    (elsewhere.fs_type, elsewhere.mount_options, elsewhere.journal) = ("tmpfs".into(), "rw,nosuid,nodev".into(), None);
    for case in report.cases.iter_mut().filter(|c| c.target == target) {
        case.filesystem = Some(elsewhere.clone());
    }
    let table = render_report("table", &report);
    let line = format!("  data of {target} under /dev/shm/bench on tmpfs (rw,nosuid,nodev) at /dev/shm\n");
    assert_eq!(table.matches(&line).count(), 1, "once per target and mount:\n{table}");
    assert_eq!(table.matches("  data of ").count(), 1, "targets in the work directory are not repeated:\n{table}");
    let page = render_report("html", &report);
    assert!(
        page.contains(&format!("data of {target}")) && page.contains("under /dev/shm/bench: tmpfs (rw,nosuid,nodev) on tmpfs at /dev/shm"),
        "the page names it too"
    );
    // A server's data directory is not one the run made: it is named itself, not its parent.
    for case in report.cases.iter_mut().filter(|c| c.target == target) {
        case.filesystem.as_mut().unwrap().path = "/dev/shm/pg/15/main".into();
    }
    let table = render_report("table", &report);
    assert!(table.contains(&format!("  data of {target} under /dev/shm/pg/15/main on tmpfs")), "{table}");

    // The journal warning follows the cases' filesystems, not the work directory's.
    let no_journal = |r: &RunReport| stowbench::report::warnings::for_report(r).iter().any(|w| w.message.contains("has no journal"));
    for case in report.cases.iter_mut() {
        case.filesystem = Some(elsewhere.clone());
    }
    assert_eq!(report.environment.work_dir_filesystem.as_ref().unwrap().journal, Some(false));
    assert!(!no_journal(&report), "every case's data was on tmpfs");
    report.cases[0].filesystem.as_mut().unwrap().journal = Some(false);
    assert!(no_journal(&report), "one case's data on an ext4 without a journal");
}

/// A block whose phases all have a steady-state window compares windows; once one repeat of one
/// target lacks it, every cell of the block is its whole phase's figure, and the header and the
/// headline's `measure` say so (a row once ranked one target's window against another's total).
#[test]
fn a_block_compares_one_measure_and_says_which() {
    let mut report = load("objects-a");
    for case in &mut report.cases {
        for phase in &mut case.phases {
            let total = phase.throughput_total.clone();
            phase.throughput_all_active =
                Some(stowbench::report::model::Throughput { window_ns: 200_000_000, ops_per_s: total.ops_per_s * 2.0, bytes_per_s: total.bytes_per_s * 2.0 });
        }
    }
    let total_of = |report: &RunReport, target: &str, phase: &str| -> f64 {
        let values: Vec<f64> = report
            .cases
            .iter()
            .filter(|c| c.target == target && c.case_id.contains("/4KiB/"))
            .flat_map(|c| c.phases.iter().filter(|p| p.phase == phase).map(|p| p.throughput_total.bytes_per_s))
            .collect();
        values.iter().sum::<f64>() / values.len() as f64
    };
    let row = |report: &RunReport| {
        stowbench::report::table::headlines(report).into_iter().find(|h| h.phase == "put" && h.size_label == "4KiB").expect("a 4KiB put row")
    };
    let windowed = row(&report);
    assert_eq!(windowed.measure, "steady_state_window");
    for f in &windowed.figures {
        let expected = 2.0 * total_of(&report, &f.target, "put");
        assert!((f.mean.unwrap() - expected).abs() < 1e-6 * expected, "{}: {:?} against {expected}", f.target, f.mean);
    }
    assert!(stowbench::report::table::render(&report).contains("(throughput in the steady-state window"));

    let first_put = report.cases.iter_mut().find(|c| c.case_id.contains("/4KiB/")).unwrap();
    first_put.phases.iter_mut().find(|p| p.phase == "put").unwrap().throughput_all_active = None;
    let mixed = row(&report);
    assert_eq!(mixed.measure, "whole_phase");
    for f in &mixed.figures {
        let expected = total_of(&report, &f.target, "put");
        assert!((f.mean.unwrap() - expected).abs() < 1e-6 * expected, "{}: {:?} against {expected}", f.target, f.mean);
    }
    assert!(stowbench::report::table::render(&report).contains("(throughput over the whole phase, as some phase here was too short"));
}

/// The HTML headlines carry what qualifies a figure, as the table's cells do (a get rate half
/// made of misses once read as a clean rate there), and both say before any number what the
/// read-back checks found.
#[test]
fn misses_and_the_verification_outcome_are_stated_where_the_numbers_are() {
    let mut report = load("objects-a");
    for case in report.cases.iter_mut().filter(|c| c.case_id.starts_with("fs/small/4KiB/")) {
        let get = case.phases.iter_mut().find(|p| p.phase == "get").unwrap();
        let op = get.ops.get_mut("get").unwrap();
        op.misses = op.count; // as many misses as objects read: half of the operations
    }
    report.headlines.clear(); // computed again from the cases, as a run writes them
    let row = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase == "get" && h.size_label == "4KiB").unwrap();
    let fs = row.figures.iter().find(|f| f.target == "fs").unwrap();
    assert_eq!(fs.missed_share, Some(0.5));
    assert_eq!(row.figures.iter().find(|f| f.target == "sim").unwrap().missed_share, None);
    let table = stowbench::report::table::render(&report);
    assert!(table.contains("(50.0% missed)"), "{table}");
    let html = render_report("html", &report);
    assert!(html.contains("<td class=\"wrap\">50.0% missed</td>"), "the HTML headline lacks the missed share");

    let verified = "verified: 240 gets, each whole object compared with what was put (xxh3 digest); none differed";
    assert!(table.contains(verified) && html.contains(verified), "{table}");
    let summary_end = html.find("id=\"headlines\"").unwrap();
    assert!(html[..summary_end].contains(verified), "the verification outcome comes before the numbers");
    report.cases[0].verification.mismatches = 2;
    let failed = "verification FAILED: 2 of 240 gets differed from what was put (see the warnings)";
    assert!(stowbench::report::table::render(&report).contains(failed));
    assert!(render_report("html", &report).contains(failed));
}

/// A healthy case whose gets all missed has nothing to rank, and the HTML headline says so in the
/// terminal's words (it said "failed").
#[test]
fn a_target_whose_gets_all_missed_reads_no_successful_operation_not_failed() {
    let mut report = load("objects-a");
    for case in report.cases.iter_mut().filter(|c| c.case_id.starts_with("fs/small/4KiB/")) {
        let op = case.phases.iter_mut().find(|p| p.phase == "get").unwrap().ops.get_mut("get").unwrap();
        (op.misses, op.count, op.bytes) = (op.count, 0, 0);
    }
    report.headlines.clear();
    assert!(stowbench::report::table::render(&report).contains("no successful operation ("));
    let html = render_report("html", &report);
    let headlines = &html[html.find("id=\"headlines\"").unwrap()..];
    let headlines = &headlines[..headlines.find("</table>").unwrap()];
    assert!(headlines.contains("<td>fs</td><td class=\"num\">no successful operation</td>"), "{headlines}");
    assert!(!headlines.contains(">failed<"), "{headlines}");
}

/// A phase done within one tick of the clock (0 ns) has no rate: it was shown as 0 B/s, and so
/// ranked slowest, making the other target the "only result". It is too short to measure, left
/// out of the mean, and its row ranks no one, in every format.
#[test]
fn a_phase_too_short_to_measure_says_so_and_ranks_no_one() {
    let mut report = load("objects-a");
    for phase in report.cases.iter_mut().filter(|c| c.case_id.starts_with("fs/small/4KiB/")).flat_map(|c| c.phases.iter_mut()) {
        phase.window_total_ns = 0;
        phase.throughput_total.bytes_per_s = 0.0;
        phase.throughput_total.ops_per_s = 0.0;
        phase.throughput_all_active = None;
    }
    report.headlines.clear();
    let row = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase == "put" && h.size_label == "4KiB").unwrap();
    let fs = row.figures.iter().find(|f| f.target == "fs").unwrap();
    assert_eq!((fs.mean, fs.too_short), (None, 3), "{fs:?}");
    assert_eq!((row.verdict.as_str(), row.winner.as_deref()), ("too_short", None), "{row:?}");
    let table = stowbench::report::table::render(&report);
    assert!(table.contains("too short to measure (0 ns)") && table.contains("no ranking: fs too short to measure"), "{table}");
    for line in table.lines().filter(|l| l.starts_with("  4KiB ")) {
        assert!(!line.contains("0.00 B/s") && !line.contains("only result") && !line.contains("only storage result"), "{line}");
    }
    let html = render_report("html", &report);
    assert!(html.contains(">too short to measure (0 ns)<") && html.contains(">no ranking: fs too short to measure<"), "the HTML headline");
}

/// A test tool that failed was left out for failing, not for being a test tool: the winner
/// column gave "(sim: test tool, not ranked)" as the reason.
#[test]
fn a_failed_test_tool_is_not_said_to_be_left_out_as_a_test_tool() {
    let mut report = load("objects-a");
    for case in report.cases.iter_mut().filter(|c| c.case_id.starts_with("sim/small/4KiB/")) {
        case.status = stowbench::report::model::CaseStatus::Failed;
    }
    report.headlines.clear();
    let table = stowbench::report::table::render(&report);
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("  4KiB ")).collect();
    assert!(!rows.is_empty() && rows.iter().all(|l| !l.contains("test tool, not ranked")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("  64KiB ") && l.contains("sim: test tool, not ranked")), "{table}");
}

/// A p99 from fewer than 100 samples is the largest sample: every format calls it max and says
/// from how few, and a cell with enough samples keeps its p99.
#[test]
fn a_p99_of_too_few_samples_is_shown_as_the_max_it_is() {
    let mut report = load("objects-a");
    report.headlines.clear(); // computed again from the cases, as a run writes them
    let row = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase == "put" && h.size_label == "4KiB").unwrap();
    let fs = row.figures.iter().find(|f| f.target == "fs").unwrap();
    assert_eq!(fs.p99_from_samples, Some(20), "{fs:?}");
    let table = stowbench::report::table::render(&report);
    assert!(table.contains("p99 latency (max where a repeat had fewer than 100 samples)") && table.contains(" op/s max 4.42 ms"), "{table}");
    assert!(!table.contains(" op/s p99 "), "{table}");
    assert!(render_report("html", &report).contains("<td class=\"num\">max 4.42 ms (20 samples)</td>"), "the HTML headline still calls it p99");

    for case in &mut report.cases {
        for op in case.phases.iter_mut().flat_map(|p| p.ops.values_mut()) {
            op.latency.samples = 100;
        }
    }
    let row = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase == "put" && h.size_label == "4KiB").unwrap();
    assert!(row.figures.iter().all(|f| f.p99_from_samples.is_none()), "{row:?}");
    let table = stowbench::report::table::render(&report);
    assert!(table.contains(" op/s p99 4.42 ms") && !table.contains("max where"), "{table}");
}

/// A mixed open-loop phase's p99 is its slowest operation's, and the cell names it; the service
/// time beside it is that operation's, not the slowest service time of any (which was another
/// operation's: a p99 of one and an svc of the other, with nothing said). The HTML headline says
/// the same.
#[test]
fn a_mixed_phases_p99_names_its_operation_and_its_service_time_is_the_same_ones() {
    use stowbench::report::model::OpenLoop;
    let mut report = load("objects-a");
    report.headlines.clear();
    let ms = |n: u64| n * 1_000_000;
    for phase in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()).filter(|p| p.phase == "get") {
        phase.phase = "mix get90 put10 @ 3k/s".into();
        phase.open_loop =
            Some(OpenLoop { rate_per_s: 3000.0, arrivals: "uniform".into(), started: 200, mean_lag_ns: 0.0, max_lag_ns: 0, end_lag_ns: 0, kept_up: true });
        let get = phase.ops.get_mut("get").unwrap();
        get.latency.samples = 1000;
        get.latency.p99_ns = ms(1);
        get.response_latency = Some(stowbench::report::model::LatencySummary { p99_ns: ms(50), ..get.latency.clone() });
        let mut put = get.clone();
        put.latency.p99_ns = ms(9);
        put.response_latency = Some(stowbench::report::model::LatencySummary { p99_ns: ms(40), ..put.latency.clone() });
        phase.ops.insert("put".into(), put);
    }
    let row = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase.starts_with("mix ") && h.size_label == "4KiB").unwrap();
    let fs = row.figures.iter().find(|f| f.target == "fs").unwrap();
    assert_eq!((fs.p99_op.as_deref(), fs.p99_ns_median, fs.service_p99_ns_median), (Some("get"), Some(ms(50) as f64), Some(ms(1) as f64)), "{fs:?}");
    let table = stowbench::report::table::render(&report);
    assert!(table.contains("p99 get 50.0 ms svc 1.00 ms") && table.contains("; in this mix, each p99 that of the slowest operation, named"), "{table}");
    assert!(!table.contains("svc 9.00 ms"), "{table}");
    assert!(
        render_report("html", &report).contains("<td class=\"num\">get 50.0 ms svc 1.00 ms</td>"),
        "the HTML headline names the operation and its service time"
    );

    // A phase of one kind of operation names none.
    let put = stowbench::report::table::headlines(&report).into_iter().find(|h| h.phase == "put").unwrap();
    assert!(put.figures.iter().all(|f| f.p99_op.is_none() && f.service_p99_ns_median.is_none()), "{put:?}");
}

/// A phase's `before` command is a condition of what the phase measured: the table and the page
/// name it, quoted so that it can be pasted into a shell and run as it was.
#[test]
fn a_phase_before_command_is_named_among_the_conditions() {
    let mut report = load("objects-a");
    assert!(!render_report("table", &report).contains("before phase"));
    let words = ["sh", "-c", "echo 'it''s' > /dev/null", "/tmp/a b"];
    report.plan["workloads"][0]["phases"][1]["before"] = serde_json::json!(words);
    let label = report.plan["workloads"][0]["phases"][1]["label"].as_str().unwrap().to_string();
    let workload = report.plan["workloads"][0]["name"].as_str().unwrap().to_string();
    let quoted = r#"sh -c 'echo '\''it'\'''\''s'\'' > /dev/null' '/tmp/a b'"#;
    let line = format!("before phase {label} of workload {workload}, once per case, untimed, ahead of its warm-up: {quoted}");
    let table = render_report("table", &report);
    assert!(table.contains(&line), "{table}");
    let html = render_report("html", &report);
    assert!(html.contains("before phase ") && html.contains("/tmp/a b"), "the page names it too");
    // A minimum duration is a condition too: how often each object was read.
    report.plan["workloads"][0]["phases"][1]["stop"] =
        serde_json::json!({ "count": null, "duration_ns": null, "bytes": null, "min_duration_ns": 100_000_000u64 });
    let held = format!(
        "phase {label} of workload {workload}: one pass over the objects, then on over the same keys until 100 ms had passed in each thread (min_duration)"
    );
    assert!(render_report("table", &report).contains(&held) && render_report("html", &report).contains(&held), "{held}");
    // Beside a duration and no count, the phase runs its duration: the minimum decides nothing.
    report.plan["workloads"][0]["phases"][1]["stop"]["duration_ns"] = serde_json::json!(1_000_000_000u64);
    assert!(!render_report("table", &report).contains("(min_duration)"));
    // The quoting reads back as the same words.
    let echoed = std::process::Command::new("sh").arg("-c").arg(format!("printf '%s\\n' {quoted}")).output().unwrap();
    assert_eq!(String::from_utf8(echoed.stdout).unwrap(), words.iter().map(|w| format!("{w}\n")).collect::<String>());
}

/// The misses' latency (`ops.<op>.miss_latency`) was in report.json and the CSV only. Under a
/// block whose phase missed, the table lists each size's misses and their latency; the cells
/// themselves keep their width. The page lists them in a table of their own.
#[test]
fn a_phase_with_misses_shows_their_latency_under_its_block_and_on_the_page() {
    use stowbench::report::model::LatencySummary;
    let mut report = load("objects-a");
    let table = render_report("table", &report);
    assert!(!table.contains("misses (operations that found no object"), "no misses, no lines for them: {table}");
    for case in report.cases.iter_mut().filter(|c| c.case_id.starts_with("fs/small/4KiB/")) {
        let op = case.phases.iter_mut().find(|p| p.phase == "get").unwrap().ops.get_mut("get").unwrap();
        op.misses = 150;
        let latency =
            LatencySummary { samples: 150, mean_ns: 800_000.0, min_ns: 500_000, p50_ns: 700_000, p99_ns: 2_000_000, max_ns: 2_500_000, ..Default::default() };
        op.miss_latency = Some(latency);
    }
    report.headlines.clear();
    let table = render_report("table", &report);
    let get_block = &table[table.find("\nget · ").unwrap()..];
    let get_block = &get_block[..1 + get_block[1..].find("\n\n").unwrap()];
    let lines: Vec<&str> = get_block.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("  misses (operations that found no object")).expect("a misses line under the get block");
    assert!(lines[at].contains("summed over the repeats, with their own latency (the median of the repeats')"), "{get_block}");
    assert_eq!(lines[at + 1].split_whitespace().collect::<Vec<_>>(), ["size", "fs"], "only targets that missed: {get_block}");
    assert!(lines[at + 2].starts_with("  4KiB ") && lines[at + 2].ends_with("get 450 missed: p50 700 µs, p99 2.00 ms"), "{get_block}");
    assert_eq!(lines.len(), at + 3, "no line for 64KiB, which did not miss: {get_block}");
    // The block's own rows carry the missed share only, as before.
    let row = lines.iter().find(|l| l.starts_with("  4KiB ") && l.contains(" op/s ")).unwrap();
    assert!(row.contains("(88.2% missed)") && !row.contains("p50"), "{row}");
    assert!(!table[..table.find("\nget · ").unwrap()].contains("misses (operations"), "the put block has none: {table}");

    let html = render_report("html", &report);
    let misses = &html[html.find("<h3>Misses</h3>").expect("a Misses table on the page")..];
    let misses = &misses[..misses.find("</table>").unwrap()];
    assert_eq!(misses.matches("<tr>").count(), 1 + 3, "a header and the three fs get repeats: {misses}");
    assert!(misses.contains("<td>fs/small/4KiB/t1/r1</td><td>get</td><td>get</td><td class=\"num\">150</td><td class=\"num\">0</td><td class=\"num\">800 µs</td><td class=\"num\">700 µs</td><td class=\"num\">2.00 ms</td><td class=\"num\">2.50 ms</td>"), "{misses}");
    assert!(!render_report("html", &load("objects-a")).contains("<h3>Misses</h3>"), "no misses, no table");
    let csv = parse_csv(&render_report("csv", &report));
    assert!(csv[0].iter().any(|h| h == "op.miss_latency.p50_ns"), "the CSV has them as columns");
}

/// A percentile needs samples: p99 100, p99.9 1000; from fewer it is the largest sample again.
/// The page's operations table showed a p99 and a p99.9 of 20 samples; it shows "—" there and
/// says why once, above the table.
#[test]
fn the_pages_operations_table_shows_no_percentile_its_samples_cannot_give() {
    let mut report = load("objects-a"); // 20 samples an operation
    let html = render_report("html", &report);
    let section = &html[html.find("<h3>Operations</h3>").unwrap()..];
    let (paragraph, table) = section.split_at(section.find("<table").unwrap());
    let table = &table[..table.find("</table>").unwrap()];
    assert!(paragraph.contains("—: too few samples for that percentile (p50: 2, p99: 100, p99.9: 1000)"), "{paragraph}");
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 24);
    for row in &rows {
        let cells: Vec<&str> =
            row.split("<td").skip(1).map(|c| c.split_once('>').unwrap().1.trim_end_matches("</td>").trim_end_matches("</td></tr>\n")).collect();
        // case, phase, op, count, errors, misses, mean, p50, p99, p99.9, max, …
        assert!(cells[7].ends_with('s') && cells[8] == "—" && cells[9] == "—" && cells[10].ends_with('s'), "{cells:?}");
    }
    for op in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()).flat_map(|p| p.ops.values_mut()) {
        op.latency.samples = 1000;
    }
    let html = render_report("html", &report);
    let section = &html[html.find("<h3>Operations</h3>").unwrap()..html.find("<h3>Cases</h3>").unwrap()];
    assert!(!section.contains('—'), "enough samples for every percentile: {section}");
}
