//! Which charts a run report gets, and from which of its data: throughput against object size,
//! latency percentiles, the per-second timeline, latency as the store fills, fio's IOPS and MB/s
//! against outstanding I/O, and resources per case. Each group says in words why it has no chart
//! when the report holds nothing for it, rather than drawing an empty one.
//!
//! Pure functions of the report; how a chart is drawn is `report::svg`'s business.

use super::model::{supports_percentile, CaseResult, CaseStatus, Headline, LatencySummary, PhaseResult, RunReport};
use super::spread::Spread;
use super::svg::{Axis, Chart, Kind, Point, Scale, Series, Unit, STYLES};
use super::table::median;
use crate::fio::FioCaseResult;
use std::collections::BTreeMap;

/// One chart and the sentence under it that says what its marks are.
pub struct Figure {
    /// The chart.
    pub chart: Chart,
    /// What the points, lines and bars are.
    pub caption: String,
}

/// The charts of one kind, or why there are none.
pub struct ChartGroup {
    /// Section heading.
    pub heading: &'static str,
    /// The charts, possibly none.
    pub figures: Vec<Figure>,
    /// Why there is no chart (set when `figures` is empty).
    pub absent: String,
    /// What was left out of the charts and why, one sentence each.
    pub notes: Vec<String>,
}

/// The table's rows as data: the report's own, or computed from its cases while a run is still
/// adding them (the headlines are stored at the end).
pub fn headlines(report: &RunReport) -> Vec<Headline> {
    if report.headlines.is_empty() {
        super::table::headlines(report)
    } else {
        report.headlines.clone()
    }
}

/// Every chart group, in page order.
pub fn all(report: &RunReport) -> Vec<ChartGroup> {
    vec![throughput_by_size(report), latency_percentiles(report), timeline(report), growth(report), fio(report), resources(report)]
}

fn axis(label: &str, unit: Unit, scale: Scale) -> Axis {
    Axis { label: label.into(), unit, scale, categories: Vec::new() }
}

fn group(heading: &'static str, figures: Vec<Figure>, absent: &str) -> ChartGroup {
    ChartGroup { heading, figures, absent: absent.into(), notes: Vec::new() }
}

fn threads_text(threads: u32) -> String {
    format!("{threads} thread{}", if threads == 1 { "" } else { "s" })
}

/// A size label the chart can place: a fixed size (not a distribution, not empty objects).
fn fixed_size(size_label: &str, size_bytes: u64) -> bool {
    size_bytes > 0 && !size_label.starts_with("uniform-") && !size_label.starts_with("loguniform-")
}

/// Why a line has no point at some percentile.
const TOO_FEW_SAMPLES_NOTE: &str = "A line has no point at a percentile its samples are too few for (p90: 10, p99: 100, p99.9: 1000, in every repeat): from fewer, it would be the largest sample again, which max shows.";

const INTERVAL_NOTE: &str = "error bars: the 95 % confidence interval of the mean (Student's t), where there are 2 or more repeats, as in the table";

fn throughput_by_size(report: &RunReport) -> ChartGroup {
    let colours = target_colours(report);
    let mut rows: BTreeMap<(String, String, u32), Vec<&Headline>> = BTreeMap::new();
    let all = headlines(report);
    for h in all.iter().filter(|h| h.metric == "bytes_per_s" && fixed_size(&h.size_label, h.size_bytes)) {
        rows.entry((h.workload.clone(), h.phase.clone(), h.threads)).or_default().push(h);
    }
    let (mut figures, mut notes) = (Vec::new(), Vec::new());
    for ((workload, phase, threads), sizes) in rows {
        if sizes.len() < 2 {
            let label = sizes.first().map_or("", |h| h.size_label.as_str());
            notes.push(format!(
                "{phase} · {} · workload {workload}: one object size only ({label}), so no line to draw; its figures are in the headlines.",
                threads_text(threads)
            ));
            continue;
        }
        let mut by_target: BTreeMap<&str, Vec<Point>> = BTreeMap::new();
        for h in &sizes {
            for f in h.figures.iter().filter(|f| f.mean.is_some()) {
                let interval = f.ci95_low.zip(f.ci95_high);
                by_target.entry(&f.target).or_default().push(Point { x: h.size_bytes as f64, y: f.mean.unwrap_or(0.0), interval });
            }
        }
        let with_bars = by_target.values().flatten().any(|p| p.interval.is_some());
        let series = by_target.into_iter().map(|(t, mut points)| {
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            Series { name: t.to_string(), points, look: Some((colour_of(&colours, t), 0)) }
        });
        let measure = measure_plotted(&sizes);
        figures.push(Figure {
            chart: Chart {
                title: format!("{phase} throughput against object size · {} · workload {workload}", threads_text(threads)),
                x: axis("object size", Unit::Bytes, Scale::Log2),
                y: axis("throughput", Unit::BytesPerSecond, Scale::Log10),
                series: series.collect(),
                kind: Kind::Lines,
            },
            caption: format!(
                "{measure}; each point is the mean of a target's repeats{}.",
                if with_bars {
                    format!("; {INTERVAL_NOTE} (an interval reaching zero is cut at the axis' bottom)")
                } else {
                    "; one run each: no error bars".into()
                }
            ),
        });
    }
    let mut group = group(
        "Throughput against object size",
        figures,
        "No workload measured two or more fixed object sizes (empty objects and size distributions are in the headlines).",
    );
    group.notes = notes;
    group
}

/// The throughput a chart's rows hold, in words: the table's block (workload, phase, threads)
/// compares one measure at every size, and its rows say which.
fn measure_plotted(rows: &[&Headline]) -> &'static str {
    use super::table::Measure;
    let named = |m: Measure| rows.iter().all(|h| h.measure == m.name());
    if named(Measure::SteadyState) {
        "Throughput in the steady-state window"
    } else if named(Measure::WholePhase) {
        "Throughput over the whole phase (some phase here was too short for a steady-state window)"
    } else {
        // Reports from before `measure` was recorded: each figure was its phase's window where it
        // had one, else its whole phase.
        "Throughput in each phase's steady-state window, or over the whole phase where it was too short for one"
    }
}

/// (workload, phase label, threads) → the ok cases with that phase, and the phase's index in each.
type PhaseGroups<'a> = BTreeMap<(String, String, u32), Vec<(&'a CaseResult, &'a PhaseResult)>>;

fn phase_groups(report: &RunReport) -> PhaseGroups<'_> {
    let mut groups: PhaseGroups = BTreeMap::new();
    for case in report.cases.iter().filter(|c| c.status == CaseStatus::Ok) {
        for phase in &case.phases {
            groups.entry((case.workload.clone(), phase.phase.clone(), case.threads)).or_default().push((case, phase));
        }
    }
    groups
}

/// (target, size in bytes, size label).
type TargetSize<'a> = (&'a str, u64, &'a str);

const PERCENTILES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "max"];
/// Each of `PERCENTILES` as a number, for the samples it needs; the max needs none.
const PERCENTILE_VALUES: [Option<f64>; 5] = [Some(50.0), Some(90.0), Some(99.0), Some(99.9), None];

/// One repeat's values at `PERCENTILES`, each `None` where its samples are too few for it (it
/// would be the max again, drawn as a percentile).
fn percentiles(l: &LatencySummary) -> [Option<f64>; 5] {
    let values = [l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns];
    std::array::from_fn(|i| PERCENTILE_VALUES[i].is_none_or(|p| supports_percentile(l.samples, p)).then_some(values[i] as f64))
}

/// The median over the repeats of percentile `i`, if every repeat had the samples for it; else
/// NaN, a gap in the line.
fn median_percentile(runs: &[[Option<f64>; 5]], i: usize) -> f64 {
    let values: Option<Vec<f64>> = runs.iter().map(|r| r[i]).collect();
    values.and_then(|mut v| median(&mut v)).unwrap_or(f64::NAN)
}

fn latency_percentiles(report: &RunReport) -> ChartGroup {
    let colours = target_colours(report);
    let mut figures = Vec::new();
    for ((workload, phase, threads), members) in phase_groups(report) {
        let ops: Vec<&String> = members.iter().flat_map(|(_, p)| p.ops.keys()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let open_loop = members.iter().any(|(_, p)| p.open_loop.is_some());
        for op in ops {
            // (target, size) → each percentile's values over the repeats, in first-seen order
            let mut series: Vec<(TargetSize, Vec<[Option<f64>; 5]>)> = Vec::new();
            for (case, p) in &members {
                let Some(result) = p.ops.get(op).filter(|r| r.count > 0) else { continue };
                let key = (case.target.as_str(), case.size_bytes_max, case.size_label.as_str());
                let values = percentiles(result.response_latency.as_ref().unwrap_or(&result.latency));
                match series.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, v)) => v.push(values),
                    None => series.push((key, vec![values])),
                }
            }
            if series.is_empty() {
                continue;
            }
            let repeats = series.iter().map(|(_, v)| v.len()).max().unwrap_or(1);
            let mut sizes: Vec<(u64, &str)> = series.iter().map(|((_, bytes, label), _)| (*bytes, *label)).collect();
            sizes.sort_unstable();
            sizes.dedup();
            // One colour per target and one style (dash and marker) per size, so that every line
            // can be told apart; more sizes than there are styles go to further charts.
            let parts = sizes.chunks(STYLES).count();
            for chunk in sizes.chunks(STYLES) {
                let lines = series.iter().filter_map(|((target, bytes, label), runs)| {
                    let style = chunk.iter().position(|s| *s == (*bytes, *label))?;
                    Some(Series {
                        name: format!("{target} {label}"),
                        points: (0..PERCENTILES.len()).map(|i| Point { x: i as f64, y: median_percentile(runs, i), interval: None }).collect(),
                        look: Some((colour_of(&colours, target), style)),
                    })
                });
                let mut x = axis("percentile", Unit::Plain(""), Scale::Categories);
                x.categories = PERCENTILES.map(String::from).to_vec();
                let from = if open_loop { "from each operation's intended start (open loop)" } else { "from each operation's start" };
                let which_sizes = if parts > 1 { format!(" · sizes {} to {}", chunk[0].1, chunk[chunk.len() - 1].1) } else { String::new() };
                let lines: Vec<Series> = lines.collect();
                let gaps = lines.iter().any(|l| l.points.iter().any(|p| p.y.is_nan()));
                figures.push(Figure {
                    chart: Chart {
                        title: format!("{op} latency percentiles · {phase} · {} · workload {workload}{which_sizes}", threads_text(threads)),
                        x,
                        y: axis("latency", Unit::Nanos, Scale::Log10),
                        series: lines,
                        kind: Kind::Lines,
                    },
                    caption: format!(
                        "Latency of successful operations {from}; one line per target (colour) and size (dash and marker), {}.{}",
                        if repeats > 1 { "each percentile the median over the repeats" } else { "from the run's one repeat" },
                        if gaps { format!(" {TOO_FEW_SAMPLES_NOTE}") } else { String::new() }
                    ),
                });
            }
        }
    }
    group("Latency percentiles", figures, "No finished case with measured operations.")
}

/// Each target's colour index for the whole page: its place in the job's target list (then any
/// target only the cases name), so that a target keeps its colour in every chart, also in one
/// where another target is missing.
fn target_colours(report: &RunReport) -> Vec<String> {
    let planned = report.plan["targets"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str());
    let mut order: Vec<String> = Vec::new();
    for target in planned.chain(report.cases.iter().map(|c| c.target.as_str())) {
        if !order.iter().any(|t| t == target) {
            order.push(target.to_string());
        }
    }
    order
}

fn colour_of(colours: &[String], target: &str) -> usize {
    colours.iter().position(|t| t == target).unwrap_or(0)
}

/// A case's name inside a chart of its group: what differs there (target, size, repeat).
fn member_name(case: &CaseResult, with_size: bool) -> String {
    let size = if with_size { format!(" {}", case.size_label) } else { String::new() };
    format!("{}{size} r{}", case.target, case.repeat)
}

fn timeline(report: &RunReport) -> ChartGroup {
    let colours = target_colours(report);
    let (mut figures, mut short) = (Vec::new(), 0);
    for ((workload, phase, threads), members) in phase_groups(report) {
        let long: Vec<_> = members.iter().filter(|(_, p)| p.window_total_ns >= 2_000_000_000 && p.timeline_per_second.len() >= 2).collect();
        if long.is_empty() {
            short += 1;
            continue;
        }
        // One colour per target, as in every other chart of the page, and one style (dash and
        // marker) per size and repeat, so that every line can be told apart. Lines drawn by their
        // place took colours meant for other targets as soon as there were several sizes. More
        // sizes and repeats than there are styles go to further charts, as in the latency
        // percentiles, rather than two lines of one target being drawn alike.
        let mut runs: Vec<(u64, &str, u32)> = long.iter().map(|(case, _)| (case.size_bytes_max, case.size_label.as_str(), case.repeat)).collect();
        runs.sort_unstable();
        runs.dedup();
        let parts = runs.chunks(STYLES).count();
        for chunk in runs.chunks(STYLES) {
            let series = long.iter().filter_map(|(case, p)| {
                let style = chunk.iter().position(|r| *r == (case.size_bytes_max, case.size_label.as_str(), case.repeat))?;
                Some(Series { name: member_name(case, true), points: per_second_rates(p), look: Some((colour_of(&colours, &case.target), style)) })
            });
            let which = if parts > 1 {
                let ((_, first, r1), (_, last, r2)) = (chunk[0], chunk[chunk.len() - 1]);
                format!(" · {first} r{r1} to {last} r{r2}")
            } else {
                String::new()
            };
            figures.push(Figure {
                chart: Chart {
                    title: format!("{phase} operations per second over time · {} · workload {workload}{which}", threads_text(threads)),
                    x: axis("time since the phase started", Unit::Plain("s"), Scale::Linear),
                    y: axis("operations completed", Unit::Plain("op/s"), Scale::Linear),
                    series: series.collect(),
                    kind: Kind::Lines,
                },
                caption: "All operations of the phase, one line per case: one colour per target, one dash and marker per size and repeat (rN: repeat N). A last second the phase ended in is a rate over the part it ran (left out when under half a second: too few operations to be a rate).".into(),
            });
        }
    }
    let absent = if short == 0 {
        "No finished case with measured phases."
    } else {
        "Every phase ended within its first two seconds: the timeline needs longer phases (duration = \"30s\" in the job)."
    };
    let mut group = group("Per-second timeline", figures, absent);
    if short > 0 && !group.figures.is_empty() {
        group.notes.push(format!("{short} other phase group(s) ended within their first two seconds: too short for a timeline."));
    }
    group
}

/// The phase's operations per second, second by second. The last second is usually cut short by
/// the phase's end: its count over a whole second drew a collapse at the end of every line.
fn per_second_rates(p: &PhaseResult) -> Vec<Point> {
    let phase_s = p.window_total_ns as f64 / 1e9;
    p.timeline_per_second
        .iter()
        .filter_map(|s| {
            let covered = (phase_s - s.second as f64).min(1.0);
            (covered >= 0.5).then(|| Point { x: s.second as f64, y: s.ops as f64 / covered, interval: None })
        })
        .collect()
}

fn growth(report: &RunReport) -> ChartGroup {
    let colours = target_colours(report);
    let mut figures = Vec::new();
    for ((workload, phase, threads), members) in phase_groups(report) {
        let mut by_size: BTreeMap<(u64, String), Vec<(&CaseResult, &PhaseResult)>> = BTreeMap::new();
        for (case, p) in members.iter().filter(|(_, p)| p.ops.contains_key("put") && p.timeline_by_op_index.len() >= 2) {
            by_size.entry((case.size_bytes_max, case.size_label.clone())).or_default().push((case, p));
        }
        for ((_, size_label), cases) in by_size {
            let bucket = cases.iter().map(|(_, p)| p.op_index_bucket_ops).max().unwrap_or(1);
            // One colour per target, one dash per repeat.
            let series = cases.iter().map(|(case, p)| Series {
                name: member_name(case, false),
                points: p
                    .timeline_by_op_index
                    .iter()
                    .filter(|b| b.ops > 0)
                    .map(|b| Point { x: b.first_op_index as f64, y: b.mean_ns, interval: None })
                    .collect(),
                look: Some((colour_of(&colours, &case.target), case.repeat.saturating_sub(1) as usize)),
            });
            figures.push(Figure {
                chart: Chart {
                    title: format!("{phase} latency as the store fills · {size_label} · {} · workload {workload}", threads_text(threads)),
                    x: axis("operations already done in the phase", Unit::Plain("count"), Scale::Linear),
                    y: axis("mean latency", Unit::Nanos, Scale::Log10),
                    series: series.collect(),
                    kind: Kind::Lines,
                },
                caption: format!(
                    "Mean latency of each run of {bucket} operation{} in issue order, one line per case (rN: repeat N); in a put phase on an empty store the x axis counts the objects already stored.",
                    if bucket == 1 { "" } else { "s" }
                ),
            });
        }
    }
    group("Latency as the store fills", figures, "No phase with puts recorded latency by operation index.")
}

fn fio(report: &RunReport) -> ChartGroup {
    use crate::fio::series;
    if report.fio_cases.is_empty() {
        return group("fio: IOPS and bandwidth against outstanding I/O", Vec::new(), "No fio cases in this run.");
    }
    let threads = series::chart_threads(&report.fio_cases, report.environment.cpu_count);
    let mut figures = Vec::new();
    for chart in series::iops_vs_iodepth(&report.fio_cases, threads) {
        for (quantity, label, unit, pick) in [
            ("IOPS", "read + write operations", Unit::Plain("IOPS"), iops as fn(&FioCaseResult) -> f64),
            ("bandwidth", "read + write bandwidth", Unit::BytesPerSecond, bandwidth),
        ] {
            let lines = chart.series.iter().map(|s| Series {
                name: s.name.clone(),
                points: s
                    .points
                    .iter()
                    .map(|p| {
                        let runs: Vec<f64> = report
                            .fio_cases
                            .iter()
                            .filter(|r| r.numjobs == chart.numjobs && r.bs_bytes == chart.bs_bytes && r.iodepth == p.iodepth)
                            .filter(|r| r.target_label == s.target_label && r.rw == s.rw && r.size_bytes == s.size_bytes && r.nrfiles == s.nrfiles)
                            .map(pick)
                            .collect();
                        let spread = Spread::of(&runs);
                        Point { x: f64::from(p.iodepth), y: spread.map_or(0.0, |s| s.mean), interval: spread.and_then(|s| s.ci95) }
                    })
                    .collect(),
                look: None,
            });
            figures.push(Figure {
                chart: Chart {
                    title: format!("fio {quantity} against outstanding I/O · {}", chart.title),
                    x: axis("outstanding I/O per thread, fio iodepth", Unit::Plain("I/Os"), Scale::Log2),
                    y: axis(label, unit, Scale::Linear),
                    series: lines.collect(),
                    kind: Kind::Lines,
                },
                caption: format!(
                    "Reads plus writes, summed over {}; each point is the mean of its runs; {INTERVAL_NOTE}. Other thread counts are in the fio table.",
                    threads_text(threads)
                ),
            });
        }
    }
    group("fio: IOPS and bandwidth against outstanding I/O", figures, "")
}

fn iops(r: &FioCaseResult) -> f64 {
    r.iops
}

fn bandwidth(r: &FioCaseResult) -> f64 {
    r.bw_bytes_per_s as f64
}

fn resources(report: &RunReport) -> ChartGroup {
    let cases: Vec<&CaseResult> = report.cases.iter().filter(|c| c.status == CaseStatus::Ok).collect();
    if cases.is_empty() {
        return group("Resources per case", Vec::new(), "No finished case.");
    }
    let categories: Vec<String> = cases.iter().map(|c| c.case_id.clone()).collect();
    let bars = |title: &str, label: &str, unit: Unit, series: Vec<(&str, Vec<Option<f64>>)>| Chart {
        title: title.into(),
        x: axis(label, unit, Scale::Linear),
        y: Axis { label: "case".into(), unit: Unit::Plain(""), scale: Scale::Categories, categories: categories.clone() },
        series: series
            .into_iter()
            .filter(|(_, values)| values.iter().any(Option::is_some))
            .map(|(name, values)| Series {
                name: name.into(),
                points: values.iter().enumerate().filter_map(|(i, v)| v.map(|y| Point { x: i as f64, y, interval: None })).collect(),
                look: None,
            })
            .collect(),
        kind: Kind::Bars,
    };
    let each = |f: &dyn Fn(&CaseResult) -> Option<f64>| cases.iter().map(|c| f(c)).collect::<Vec<_>>();
    let server = cases.iter().any(|c| c.resources.server_rss_peak_bytes.is_some() || c.resources.server_cpu_ns.is_some());
    let server_note = if server { "" } else { " No server process was measured in this run (local stores only)." };
    let memory = bars(
        "resident memory per case",
        "peak resident memory (client: above its start)",
        Unit::Bytes,
        vec![
            // Every case runs in the one client process: its peak includes what earlier cases
            // left held (allocator caches, a backend's statics), which is not this case's doing.
            ("stowbench (client), peak above the case's start", each(&|c| Some(c.resources.client_rss_growth_bytes() as f64))),
            ("server", each(&|c| c.resources.server_rss_peak_bytes.map(|b| b as f64))),
        ],
    );
    let cpu = bars(
        "CPU time per case",
        "CPU time",
        Unit::Nanos,
        vec![
            ("stowbench (client), user + system", each(&|c| Some((c.resources.client_cpu_user_ns + c.resources.client_cpu_system_ns) as f64))),
            ("server", each(&|c| c.resources.server_cpu_ns.map(|n| n as f64))),
        ],
    );
    let amplification = bars(
        "disk amplification per case",
        "allocated on disk ÷ bytes stored",
        Unit::Plain("×"),
        vec![("allocated ÷ stored", each(&|c| c.disk.amplification))],
    );
    let mut figures = vec![
        Figure {
            chart: memory,
            caption: format!(
                "stowbench (client): how far each case raised the client's resident memory above what it held when the case began; \
                 every case runs in one process, so memory earlier cases left held is not charged to later ones (report.json \
                 has both: client_rss_start_bytes, client_rss_peak_bytes). Server: the peak of its process tree's memory, summed by proportional set size (shared memory counted once, not once per process).{server_note}"
            ),
        },
        Figure { chart: cpu, caption: format!("CPU time used during each case.{server_note}") },
        Figure {
            chart: amplification,
            caption: "Bytes allocated under the backend's data paths after the load, over the bytes of live objects (1 = no overhead).".into(),
        },
    ];
    figures.retain(|f| !f.chart.series.is_empty());
    group("Resources per case", figures, "No resource figures were recorded.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_second_cut_short_is_a_rate_over_what_it_ran_or_left_out() {
        let report: RunReport = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        let mut phase = report.cases[0].phases[0].clone();
        let second = |n: u64, ops: u64| super::super::model::SecondPoint { second: n, ops, ..phase.timeline_per_second[0].clone() };
        phase.timeline_per_second = vec![second(0, 100), second(1, 100), second(2, 40)];
        phase.window_total_ns = 2_500_000_000;
        let ys: Vec<f64> = per_second_rates(&phase).iter().map(|p| p.y).collect();
        assert_eq!(ys, [100.0, 100.0, 80.0], "40 operations in the last half second are 80 a second");
        phase.window_total_ns = 2_100_000_000;
        assert_eq!(per_second_rates(&phase).len(), 2, "a last tenth of a second is too short to be a rate");
    }

    /// A target's colour is its place in the job, in every chart: fs (second in the job) keeps
    /// the second colour when sim has no case to draw (it used to take the first one there).
    #[test]
    fn a_target_keeps_its_colour_when_another_is_missing() {
        let mut report: RunReport = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        let colour = |report: &RunReport| -> Vec<(String, usize)> {
            all(report)
                .iter()
                .take(2) // throughput against size and latency percentiles: one series per target there
                .flat_map(|g| g.figures.iter())
                .flat_map(|f| f.chart.series.iter())
                .map(|s| (s.name.split(' ').next().unwrap().to_string(), s.look.expect("a fixed look").0))
                .collect()
        };
        let both = colour(&report);
        assert!(both.iter().any(|(t, c)| t == "sim" && *c == 0) && both.iter().any(|(t, c)| t == "fs" && *c == 1), "{both:?}");
        report.cases.retain(|c| c.target == "fs");
        report.headlines.clear();
        let fs_only = colour(&report);
        assert!(!fs_only.is_empty() && fs_only.iter().all(|(t, c)| t == "fs" && *c == 1), "{fs_only:?}");
    }

    /// objects-a (4KiB and 64KiB) with its 4KiB cases copied at `extra` more sizes: 1kB, 2kB, ….
    fn with_sizes(extra: u64) -> RunReport {
        let mut report: RunReport = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        let small: Vec<CaseResult> = report.cases.iter().filter(|c| c.size_label == "4KiB").cloned().collect();
        for k in 1..=extra {
            report.cases.extend(small.iter().cloned().map(|mut c| {
                (c.size_bytes_max, c.size_label) = (1000 * k, format!("{k}kB"));
                c
            }));
        }
        report
    }

    /// Beyond three sizes the latency-percentile lines lost their targets' colours (each took a
    /// colour by its place instead) and no dash told the sizes apart. Each line keeps its
    /// target's colour, and each size of a chart has a style (dash and marker) of its own.
    #[test]
    fn every_latency_percentile_line_has_its_targets_colour_and_its_sizes_own_style() {
        let report = with_sizes(4); // 6 sizes
        let colours = target_colours(&report);
        let group = latency_percentiles(&report);
        assert!(!group.figures.is_empty());
        for figure in &group.figures {
            assert_eq!(figure.chart.series.len(), 2 * 6, "{}", figure.chart.title);
            assert_target_colours_and_one_style_per_run(figure, &colours);
        }
    }

    /// Each line of `figure` has its target's colour; the lines of one run (what follows the
    /// target in its name: a size, or a size and repeat) share one style whichever the target;
    /// and no two lines look alike.
    fn assert_target_colours_and_one_style_per_run(figure: &Figure, colours: &[String]) {
        let series = &figure.chart.series;
        let mut looks = Vec::new();
        for s in series {
            let (target, run) = s.name.split_once(' ').unwrap();
            let (colour, style) = s.look.expect("a fixed look");
            assert_eq!(colour, colour_of(colours, target), "{}", s.name);
            assert!(style < STYLES, "{}", s.name);
            looks.push((colour, style));
            let same_run = series.iter().filter(|o| o.name.ends_with(&format!(" {run}")));
            assert!(same_run.map(|o| o.look.unwrap().1).all(|st| st == style), "{}", s.name);
        }
        looks.sort_unstable();
        looks.dedup();
        assert_eq!(looks.len(), series.len(), "two lines drawn alike in {}", figure.chart.title);
    }

    /// `with_sizes(extra)` with every phase three seconds long, long enough for a timeline.
    fn with_timelines(extra: u64) -> RunReport {
        let mut report = with_sizes(extra);
        for phase in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()) {
            let first = phase.timeline_per_second[0].clone();
            phase.timeline_per_second = (0..3).map(|n| super::super::model::SecondPoint { second: n, ops: 100, ..first.clone() }).collect();
            phase.window_total_ns = 3_000_000_000;
        }
        report
    }

    /// With several sizes the timeline drew its lines by their place: the second target took
    /// the third colour, not the one it has in every other chart of the page. Each line has its
    /// target's colour, each size and repeat its own style, and no two lines of a chart look
    /// alike; more sizes and repeats than there are styles go to further charts.
    #[test]
    fn every_timeline_line_has_its_targets_colour_and_its_size_and_repeats_own_style() {
        for (extra, charts) in [(1, 1), (STYLES as u64, 4)] {
            let report = with_timelines(extra); // 2 targets × (2 + extra) sizes × 3 repeats
            let colours = target_colours(&report);
            let group = timeline(&report);
            let put: Vec<&Figure> = group.figures.iter().filter(|f| f.chart.title.starts_with("put ")).collect();
            assert_eq!(put.len(), charts, "{:?}", put.iter().map(|f| &f.chart.title).collect::<Vec<_>>());
            assert_eq!(put.iter().map(|f| f.chart.series.len()).sum::<usize>(), 2 * (2 + extra as usize) * 3);
            for figure in put {
                assert_target_colours_and_one_style_per_run(figure, &colours);
            }
        }
    }

    /// More sizes than there are styles are not drawn alike: they go to a further chart, whose
    /// title names its sizes.
    #[test]
    fn more_sizes_than_styles_go_to_further_latency_percentile_charts() {
        let report = with_sizes(STYLES as u64); // 1kB … 16kB, 4KiB and 64KiB: STYLES + 2 sizes
        let group = latency_percentiles(&report);
        let put: Vec<&Figure> = group.figures.iter().filter(|f| f.chart.title.starts_with("put ")).collect();
        let titles: Vec<&String> = put.iter().map(|f| &f.chart.title).collect();
        assert_eq!(put.len(), 2, "{titles:?}");
        assert!(titles[0].ends_with(" · sizes 1kB to 15kB") && titles[1].ends_with(" · sizes 16kB to 64KiB"), "{titles:?}");
        assert_eq!((put[0].chart.series.len(), put[1].chart.series.len()), (2 * STYLES, 2 * 2));
        assert!(put.iter().all(|f| f.chart.series.iter().all(|s| s.look.unwrap().1 < STYLES)));
    }

    /// A line drew a p99 and a p99.9 of 20 samples: both the largest sample again, shown as
    /// percentiles. It has no point where its samples are too few (a gap, where it breaks), and
    /// the caption says why.
    #[test]
    fn a_latency_percentile_line_has_no_point_its_samples_cannot_give() {
        let mut report: RunReport = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap(); // 20 samples
        let drawn = |report: &RunReport| -> Vec<(Vec<bool>, String)> {
            let figures = latency_percentiles(report).figures;
            figures.iter().flat_map(|f| f.chart.series.iter().map(|s| (s.points.iter().map(|p| p.y.is_finite()).collect(), f.caption.clone()))).collect()
        };
        let few = drawn(&report);
        assert!(!few.is_empty() && few.iter().all(|(points, _)| points == &[true, true, false, false, true]), "p50, p90 and max only: {few:?}");
        assert!(few.iter().all(|(_, caption)| caption.ends_with(TOO_FEW_SAMPLES_NOTE)));
        let svg = super::super::svg::render(&latency_percentiles(&report).figures[0].chart);
        let lines = latency_percentiles(&report).figures[0].chart.series.len();
        assert_eq!(svg.matches("<polyline").count(), 2 * lines, "each line broken at the gap: p50–p90, then max alone");

        // One repeat short of samples leaves the point out: the median would hide it.
        for op in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()).flat_map(|p| p.ops.values_mut()) {
            op.latency.samples = 100;
        }
        report.cases[0].phases[0].ops.values_mut().for_each(|op| op.latency.samples = 99);
        let some = drawn(&report);
        let (short, enough): (Vec<_>, Vec<_>) = some.iter().partition(|(points, _)| !points[2]);
        assert_eq!(short.len(), 1, "the line with the short repeat: {some:?}");
        assert!(enough.iter().all(|(points, _)| points == &[true, true, true, false, true]), "{some:?}");
        for op in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()).flat_map(|p| p.ops.values_mut()) {
            op.latency.samples = 1000;
        }
        let all = drawn(&report);
        assert!(all.iter().all(|(points, caption)| points.iter().all(|p| *p) && !caption.contains(TOO_FEW_SAMPLES_NOTE)), "{all:?}");
    }

    /// The caption names the measure the table's block compares: the fixture's phases were too
    /// short for a steady-state window, so its blocks plot their whole phases (the caption said
    /// "Steady-state window" whatever was plotted). Its stored headlines, older than `measure`,
    /// mixed the two, and the caption says so.
    #[test]
    fn the_throughput_caption_names_the_measure_plotted() {
        let mut report: RunReport = serde_json::from_str(include_str!("../../tests/fixtures/reports/objects-a.json")).unwrap();
        let captions = |report: &RunReport| -> Vec<String> { throughput_by_size(report).figures.into_iter().map(|f| f.caption).collect() };
        let stored = captions(&report);
        assert!(
            !stored.is_empty() && stored.iter().all(|c| c.starts_with("Throughput in each phase's steady-state window, or over the whole phase")),
            "{stored:?}"
        );
        report.headlines.clear();
        let whole = captions(&report);
        assert!(!whole.is_empty() && whole.iter().all(|c| c.starts_with("Throughput over the whole phase")), "{whole:?}");
        for phase in report.cases.iter_mut().flat_map(|c| c.phases.iter_mut()) {
            phase.throughput_all_active = Some(phase.throughput_total.clone());
        }
        let windows = captions(&report);
        assert!(!windows.is_empty() && windows.iter().all(|c| c.starts_with("Throughput in the steady-state window;")), "{windows:?}");
    }
}
