//! bench/summarize.py, which turns every bench script's raw.csv into its verdicts: a tool's
//! figure is balanced over the order the tools ran in, so that neither an odd number of repeats
//! (one order once more often) nor two clusters of values (running second much faster) can lean
//! a verdict the way running second leans a measurement.

use std::path::Path;
use std::process::Command;

mod common;

/// Runs summarize.py on `raw` (CSV text) with `args`; returns summary.json.
fn summarize(raw: &str, args: &[&str]) -> Option<serde_json::Value> {
    summarize_runs(&[raw], args)
}

/// Runs summarize.py on several runs' raw.csv (CSV texts, one file each) with `args`; returns
/// summary.json.
fn summarize_runs(runs: &[&str], args: &[&str]) -> Option<serde_json::Value> {
    let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !python {
        assert!(!common::in_ci(), "python3 is not installed and CI=true: scripts/services.sh install adds it");
        eprintln!("SKIPPED: python3 is not installed (apt-get install python3)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw_paths: Vec<_> = runs
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let path = dir.path().join(format!("raw-{i}.csv"));
            std::fs::write(&path, raw).unwrap();
            path
        })
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/summarize.py");
    let out = Command::new("python3").arg(script).args(&raw_paths).args(args).arg("--out").arg(dir.path().join("out")).output().unwrap();
    assert!(out.status.success(), "summarize.py failed: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap()).unwrap())
}

/// Rows of one cell: each repeat's `(first tool, value), (second tool, value)` in the order run.
fn raw_two_tools(repeats: &[[(&str, f64); 2]]) -> String {
    let mut raw = String::from("cell,repeat,tool,value,target\n");
    for (i, repeat) in repeats.iter().enumerate() {
        for (tool, value) in repeat {
            raw += &format!("c,{},{tool},{value},0.90\n", i + 1);
        }
    }
    raw
}

#[test]
fn an_odd_number_of_repeats_does_not_lean_the_ratio_toward_one_order() {
    // Whichever tool runs second reads 0.6x: the reference ran first twice, stowbench once.
    let raw = raw_two_tools(&[[("ref", 100.0), ("sb", 60.0)], [("sb", 100.0), ("ref", 60.0)], [("ref", 100.0), ("sb", 62.0)]]);
    let Some(summary) = summarize(&raw, &["--keys", "cell", "--ref-name", "ref", "--unit", "op/s"]) else { return };
    let cell = &summary["cells"][0];
    // Plain medians would say stowbench 62 against the reference's 100: 0.62, a MISS.
    assert!((cell["ratio_of_plain_medians"].as_f64().unwrap() - 0.62).abs() < 1e-9, "{cell}");
    // Balanced: stowbench sqrt(61 x 100), the reference sqrt(100 x 60).
    let ratio = cell["ratio"].as_f64().unwrap();
    assert!((ratio - (61.0f64 * 100.0).sqrt() / (100.0f64 * 60.0).sqrt()).abs() < 1e-9, "{cell}");
    assert_eq!(cell["verdict"], "PASS", "{cell}");
    // The paired ratios 0.60, 1.667, 0.62 by which tool ran first: sqrt(0.61 x 1.667).
    let paired = cell["paired_median"].as_f64().unwrap();
    assert!((paired - (0.61f64 * (100.0 / 60.0)).sqrt()).abs() < 1e-9, "{cell}");
}

#[test]
fn with_each_order_equally_often_each_position_is_still_compared_with_its_own() {
    // Two repeats in each order. A plain median of four values would pool the positions; the
    // figure is the geometric mean of each position's median.
    let raw = raw_two_tools(&[[("ref", 100.0), ("sb", 80.0)], [("sb", 90.0), ("ref", 110.0)], [("ref", 120.0), ("sb", 70.0)], [("sb", 95.0), ("ref", 105.0)]]);
    let Some(summary) = summarize(&raw, &["--keys", "cell", "--ref-name", "ref", "--unit", "op/s"]) else { return };
    let cell = &summary["cells"][0];
    let close = |key: &str, want: f64| assert!((cell[key].as_f64().unwrap() - want).abs() < 1e-9, "{key}: {cell}");
    // The reference: first 100, 120 (median 110), second 110, 105 (107.5); stowbench: first 90,
    // 95 (92.5), second 80, 70 (75).
    close("ref_median", (110.0f64 * 107.5).sqrt());
    close("sb_median", (92.5f64 * 75.0).sqrt());
    close("ratio_of_plain_medians", 85.0 / 107.5);
    // Paired ratios with the reference first: 0.8, 0.583; with stowbench first: 0.818, 0.905.
    // Each order's interval is its min–max at this count (coverage 1/2); combined alike, both
    // holding at once: 1/4.
    let (ref_first, sb_first): ([f64; 2], [f64; 2]) = ([80.0 / 100.0, 70.0 / 120.0], [90.0 / 110.0, 95.0 / 105.0]);
    close("paired_median", ((ref_first[0] + ref_first[1]) / 2.0 * (sb_first[0] + sb_first[1]) / 2.0).sqrt());
    close("paired_low", (ref_first[1] * sb_first[0]).sqrt());
    close("paired_high", (ref_first[0] * sb_first[1]).sqrt());
    close("paired_coverage", 0.25);
}

#[test]
fn runs_given_together_pool_as_one_with_each_repeat_paired_within_itself() {
    // Two runs of two repeats each, both numbered 1 and 2. Pooled, they are four repeats; taken
    // by their own numbers, repeat 1 of the second run would be paired with the first run's.
    let first = raw_two_tools(&[[("ref", 100.0), ("sb", 90.0)], [("sb", 95.0), ("ref", 100.0)]]);
    let second = raw_two_tools(&[[("ref", 100.0), ("sb", 50.0)], [("sb", 55.0), ("ref", 100.0)]]);
    let args = ["--keys", "cell", "--ref-name", "ref", "--unit", "op/s"];
    let Some(pooled) = summarize_runs(&[&first, &second], &args) else { return };
    let cell = &pooled["cells"][0];
    assert_eq!(cell["repeats"], 4, "{cell}");
    // Paired ratios with the reference first: 0.90, 0.50 (median 0.70); with stowbench first:
    // 0.95, 0.55 (0.75).
    assert!((cell["paired_median"].as_f64().unwrap() - (0.70f64 * 0.75).sqrt()).abs() < 1e-9, "{cell}");
    // The same as one run of the four repeats numbered 1 to 4.
    let one_run =
        raw_two_tools(&[[("ref", 100.0), ("sb", 90.0)], [("sb", 95.0), ("ref", 100.0)], [("ref", 100.0), ("sb", 50.0)], [("sb", 55.0), ("ref", 100.0)]]);
    let Some(single) = summarize(&one_run, &args) else { return };
    assert_eq!(pooled["cells"], single["cells"]);
}

#[test]
fn named_tools_are_balanced_over_their_positions_too() {
    // pack-durable.sh's form: named tools; pack ran first twice and second once.
    let mut raw = String::from("op,repeat,tool,value,target\n");
    for (repeat, order) in [(1, [("pack", 100.0), ("fs", 50.0)]), (2, [("fs", 100.0), ("pack", 50.0)]), (3, [("pack", 100.0), ("fs", 50.0)])] {
        for (tool, value) in order {
            let target = if tool == "fs" { "0.97" } else { "" };
            raw += &format!("get,{repeat},{tool},{value},{target}\n");
        }
    }
    let args = ["--keys", "op", "--unit", "op/s", "--tools", "pack,fs", "--ratio", "pack/fs"];
    let Some(summary) = summarize(&raw, &args) else { return };
    let ratio = &summary["cells"][0]["ratios"]["pack/fs"];
    // Plain medians: 100 / 50 = 2. Balanced, each tool sqrt(100 x 50): 1.
    assert!((ratio["ratio"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{ratio}");
}

#[test]
fn named_tools_get_paired_ratios_balanced_over_which_of_the_two_ran_first() {
    // Three tools; `c` always runs first, so only the order of `a` and `b` between themselves
    // may group the paired ratios a / b: 2.0 and 2.2 with a before b, 3.0 and 2.6 with b before a.
    let mut raw = String::from("op,repeat,tool,value,target\n");
    let repeats: [[(&str, f64); 3]; 4] = [
        [("c", 1.0), ("a", 200.0), ("b", 100.0)],
        [("c", 1.0), ("b", 100.0), ("a", 300.0)],
        [("c", 1.0), ("a", 220.0), ("b", 100.0)],
        [("c", 1.0), ("b", 100.0), ("a", 260.0)],
    ];
    for (i, repeat) in repeats.iter().enumerate() {
        for (tool, value) in repeat {
            let target = if *tool == "b" { "2.0" } else { "" };
            raw += &format!("put,{},{tool},{value},{target}\n", i + 1);
        }
    }
    let args = ["--keys", "op", "--unit", "op/s", "--tools", "a,b,c", "--ratio", "a/b"];
    let Some(summary) = summarize(&raw, &args) else { return };
    let ratio = &summary["cells"][0]["ratios"]["a/b"];
    let close = |field: &str, expected: f64| {
        let got = ratio[field].as_f64().unwrap_or_else(|| panic!("{field} missing: {ratio}"));
        assert!((got - expected).abs() < 1e-9, "{field}: {got} against {expected}: {ratio}");
    };
    let ratios: Vec<f64> = ratio["paired_ratios"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(ratios, [2.0, 3.0, 2.2, 2.6]);
    // Each order's median (2.1 and 2.8), combined as the figures are: their geometric mean.
    close("paired_median", (2.1f64 * 2.8).sqrt());
    // Two values an order: each interval is its min and max at 50 % coverage, combined alike.
    close("paired_low", (2.0f64 * 2.6).sqrt());
    close("paired_high", (2.2f64 * 3.0).sqrt());
    close("paired_coverage", 0.25);
}
