//! Break-even sizes: where one target overtakes another as objects grow ("sqlite faster below
//! ~X, fs above"). For every pair of targets measured at three or more common sizes in one
//! workload, phase and thread count, per operation (and per iteration of a sequence), the mean
//! time per operation is compared size by size; wherever the faster target changes between two
//! neighbouring sizes, the crossing is interpolated in log-size and log-time, and the two measured
//! sizes that bracket it are kept. A pure function of the report.

use super::model::{CaseResult, CaseStatus, RunReport};
use super::spread::{verdict, Spread, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One crossing between two targets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BreakEven {
    /// Workload name.
    pub workload: String,
    /// Phase label.
    pub phase: String,
    /// Threads.
    pub threads: u32,
    /// Operation ("put", "get", …) or "iteration" (all operations of a sequence).
    pub op: String,
    /// The target with the lower mean time below the crossing.
    pub faster_below: String,
    /// The target with the lower mean time above it.
    pub faster_above: String,
    /// Interpolated crossing, in bytes.
    pub size_bytes: f64,
    /// The measured sizes on either side of it, in bytes.
    pub bracket_bytes: [u64; 2],
    /// Whether at neither bracketing size the two targets' 95 % intervals of the mean time per
    /// operation are apart (or a target ran once there): the crossing may be noise, as the
    /// headline rows then read "tie". False in reports from before it was recorded.
    #[serde(default)]
    pub within_spread: bool,
}

/// Mean time per operation, in ns: (workload, phase, threads, op) → target → size → repeats.
type Series = BTreeMap<(String, String, u32, String), BTreeMap<String, BTreeMap<u64, Vec<f64>>>>;

/// Every break-even in the report, in a stable order.
pub fn compute(report: &RunReport) -> Vec<BreakEven> {
    let mut series: Series = BTreeMap::new();
    // Cases with a size distribution ("uniform-…", "loguniform-…") have no single size to place.
    let fixed_size = |c: &CaseResult| !c.size_label.starts_with("uniform-") && !c.size_label.starts_with("loguniform-");
    // A test tool crosses nothing real (as in the table's winner column): with real backends
    // in the run, it is left out.
    let any_real = report.cases.iter().any(|c| !c.backend_is_test_tool);
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Ok && fixed_size(c) && !(any_real && c.backend_is_test_tool)) {
        add_case(&mut series, case);
    }
    crossings(&series)
}

fn crossings(series: &Series) -> Vec<BreakEven> {
    let mut found = Vec::new();
    for ((workload, phase, threads, op), targets) in series {
        // The mean of the repeats, as the table's cells and the spread judgement below use: a
        // median here once put crossings where the table showed none.
        let means: Vec<(&String, BTreeMap<u64, f64>)> =
            targets.iter().map(|(t, sizes)| (t, sizes.iter().filter_map(|(s, v)| Spread::of(v).map(|m| (*s, m.mean))).collect())).collect();
        for (i, (a, a_times)) in means.iter().enumerate() {
            for (b, b_times) in &means[i + 1..] {
                let common: Vec<(u64, f64, f64)> =
                    a_times.iter().filter_map(|(s, ta)| b_times.get(s).map(|tb| (*s, *ta, *tb))).filter(|(_, ta, tb)| *ta > 0.0 && *tb > 0.0).collect();
                if common.len() < 3 {
                    continue;
                }
                for pair in common.windows(2) {
                    let ((s0, a0, b0), (s1, a1, b1)) = (pair[0], pair[1]);
                    // ln(a/b) < 0: a is faster. A change of sign is a crossing.
                    let (r0, r1) = ((a0 / b0).ln(), (a1 / b1).ln());
                    if r0 == 0.0 || r0.signum() == r1.signum() {
                        continue;
                    }
                    let t = r0 / (r0 - r1);
                    let size = ((s0 as f64).ln() + t * ((s1 as f64).ln() - (s0 as f64).ln())).exp();
                    let (below, above) = if r0 < 0.0 { (a, b) } else { (b, a) };
                    let apart_at = |size: u64| apart(&targets[*a][&size], &targets[*b][&size]);
                    found.push(BreakEven {
                        workload: workload.clone(),
                        phase: phase.clone(),
                        threads: *threads,
                        op: op.clone(),
                        faster_below: below.to_string(),
                        faster_above: above.to_string(),
                        size_bytes: size,
                        bracket_bytes: [s0, s1],
                        within_spread: !apart_at(s0) && !apart_at(s1),
                    });
                }
            }
        }
    }
    found
}

/// Whether two targets' repeats at one size are told apart: their 95 % intervals of the mean
/// do not overlap (two or more repeats each).
fn apart(a: &[f64], b: &[f64]) -> bool {
    let (Some(a), Some(b)) = (Spread::of(a), Spread::of(b)) else { return false };
    // The headline rows' own judgement, so a crossing and its rows never disagree.
    let (higher, lower) = if a.mean >= b.mean { (&a, &b) } else { (&b, &a) };
    verdict(higher, lower) == Verdict::Clear
}

fn add_case(series: &mut Series, case: &CaseResult) {
    for phase in &case.phases {
        let mut iteration = 0.0;
        for (op, result) in &phase.ops {
            if result.count == 0 {
                continue;
            }
            iteration += result.latency.mean_ns;
            let key = (case.workload.clone(), phase.phase.clone(), case.threads, op.clone());
            series.entry(key).or_default().entry(case.target.clone()).or_default().entry(case.size_bytes_max).or_default().push(result.latency.mean_ns);
        }
        if phase.phase.starts_with("sequence ") {
            let key = (case.workload.clone(), phase.phase.clone(), case.threads, "iteration".to_string());
            series.entry(key).or_default().entry(case.target.clone()).or_default().entry(case.size_bytes_max).or_default().push(iteration);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crossing_is_interpolated_in_log_size_between_its_bracketing_sizes() {
        // a: 10 µs per op at every size; b: 40, 20, 5 µs at 1 kB, 10 kB, 100 kB. They cross between
        // 10 kB (b twice as slow) and 100 kB (b twice as fast): in the middle in log-size, 31.6 kB.
        let mut series: Series = BTreeMap::new();
        let key = ("w".to_string(), "get".to_string(), 1, "get".to_string());
        for (size, a, b) in [(1_000u64, 10.0, 40.0), (10_000, 10.0, 20.0), (100_000, 10.0, 5.0)] {
            series.entry(key.clone()).or_default().entry("a".into()).or_default().insert(size, vec![a]);
            series.entry(key.clone()).or_default().entry("b".into()).or_default().insert(size, vec![b]);
        }
        let found = crossings(&series);
        assert_eq!(found.len(), 1);
        let cross = &found[0];
        assert_eq!((cross.faster_below.as_str(), cross.faster_above.as_str()), ("a", "b"));
        assert_eq!(cross.bracket_bytes, [10_000, 100_000]);
        assert!((cross.size_bytes - 31_622.8).abs() < 1.0, "{}", cross.size_bytes);
        assert!(cross.within_spread, "one repeat each: nothing is told apart");
    }

    #[test]
    fn a_crossing_between_two_ties_is_said_to_be_within_the_spread() {
        let key = ("w".to_string(), "get".to_string(), 1, "get".to_string());
        let with = |b_at_10k: Vec<f64>, b_at_100k: Vec<f64>| {
            let mut series: Series = BTreeMap::new();
            let sizes = [
                (1_000u64, vec![10.0, 10.2, 9.8], vec![40.0, 40.5, 39.5]),
                (10_000, vec![10.0, 10.2, 9.8], b_at_10k),
                (100_000, vec![10.0, 10.2, 9.8], b_at_100k),
            ];
            for (size, a, b) in sizes {
                series.entry(key.clone()).or_default().entry("a".into()).or_default().insert(size, a);
                series.entry(key.clone()).or_default().entry("b".into()).or_default().insert(size, b);
            }
            crossings(&series)
        };
        // b barely slower, then barely faster, each inside a's spread: a crossing, but a tie on both sides.
        let ties = with(vec![10.3, 9.5, 11.0], vec![9.9, 9.0, 10.6]);
        assert_eq!(ties.len(), 1);
        assert!(ties[0].within_spread);
        // Clearly slower, then clearly faster: a crossing the repeats stand behind.
        let clear = with(vec![20.0, 20.2, 19.8], vec![5.0, 5.1, 4.9]);
        assert!(!clear[0].within_spread);
    }

    #[test]
    fn no_crossing_with_fewer_than_three_common_sizes_or_without_a_change() {
        let mut series: Series = BTreeMap::new();
        let key = ("w".to_string(), "put".to_string(), 1, "put".to_string());
        for (size, a, b) in [(1_000u64, 10.0, 40.0), (10_000, 10.0, 5.0)] {
            series.entry(key.clone()).or_default().entry("a".into()).or_default().insert(size, vec![a]);
            series.entry(key.clone()).or_default().entry("b".into()).or_default().insert(size, vec![b]);
        }
        assert!(crossings(&series).is_empty(), "two sizes are not enough to call a trend");
        series.get_mut(&key).unwrap().get_mut("b").unwrap().insert(100_000, vec![50.0]);
        series.get_mut(&key).unwrap().get_mut("a").unwrap().insert(100_000, vec![10.0]);
        assert_eq!(crossings(&series).len(), 2, "a wins, loses, wins again: two crossings");
    }

    /// The faster target at a size is the one with the lower mean time over the repeats, as
    /// the table's cells rank by their means. The median once disagreed: b's repeats 5, 5, 50
    /// (median 5, mean 20) made b the faster one at 10 kB where the table had a ahead.
    #[test]
    fn the_mean_of_the_repeats_decides_as_in_the_table() {
        let mut series: Series = BTreeMap::new();
        let key = ("w".to_string(), "get".to_string(), 1, "get".to_string());
        for (size, b) in [(1_000u64, vec![40.0, 40.0, 40.0]), (10_000, vec![5.0, 5.0, 50.0]), (100_000, vec![40.0, 40.0, 40.0])] {
            series.entry(key.clone()).or_default().entry("a".into()).or_default().insert(size, vec![10.0, 10.0, 10.0]);
            series.entry(key.clone()).or_default().entry("b".into()).or_default().insert(size, b);
        }
        assert!(crossings(&series).is_empty(), "a is faster by its mean at every size: {:?}", crossings(&series));
    }
}
