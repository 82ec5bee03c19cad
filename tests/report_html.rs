//! The run report's HTML page (`--format html`, `report.html`): its structure from fixed reports
//! against golden outlines (tests/golden/reports/*.html-outline.txt: headings, chart titles, axes,
//! legends, table headers — not every byte of SVG), what it must never contain (anything to load,
//! unescaped text), the file a run writes, and a real render in headless Chromium that fails on
//! any console message or missing chart and keeps a screenshot in target/test-output/.
//!
//! Regenerate the outlines with `UPDATE_GOLDEN=1 cargo test --release --test report_html`, then
//! read the diff before committing it.

use std::path::{Path, PathBuf};
use std::process::Command;
use stowbench::report::charts;
use stowbench::report::model::RunReport;
use stowbench::report::reporters;
use stowbench::report::warnings::{Warning, WarningKind};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(format!("{name}.json"))
}

fn load(name: &str) -> RunReport {
    stowbench::report::read(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn html(report: &RunReport) -> String {
    reporters::for_report("html").expect("html renders run reports")(report)
}

/// Compares `text` with the golden file `name` (rewriting it first under UPDATE_GOLDEN=1).
fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reports").join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&path, text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 creates it)", path.display()));
    assert!(text == expected, "{name} differs from its golden file {} (UPDATE_GOLDEN=1 rewrites it; then read the diff)", path.display());
}

/// The value of attribute `name` in a tag's text (`a href="x" class="y"`).
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[start..].split('"').next()
}

/// A readable outline of the page: headings, notes, table headers with their row counts, and per
/// chart its title, axis titles, legend, and counts of points and error bars.
fn outline(page: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let (mut text_of, mut headers, mut legend, mut rows, mut points, mut bars) = (None::<String>, Vec::new(), Vec::new(), 0, 0, 0);
    // Inside a chart's title or axis title, whose wrapped lines are `<tspan>`s: the outline shows
    // them all, so that a title cut short is seen as one.
    let mut in_titled_text = false;
    for token in page.split('<').skip(1) {
        let (tag, text) = token.split_once('>').unwrap_or((token, ""));
        // "/table" names the closing tag; "circle/" would not happen (attributes come first).
        let name = tag.split([' ']).next().unwrap_or("").trim_end_matches('/');
        let class = attribute(tag, "class").unwrap_or("");
        match name {
            "h1" | "h2" | "h3" => lines.push(format!("{name} {text}")),
            "p" if class == "absent" || class == "note" => lines.push(format!("  ({class}) {text}")),
            "th" => headers.push(text.to_string()),
            "tr" if !headers.is_empty() && tag == "tr" => rows += 1,
            "/table" => {
                lines.push(format!("  table [{}] rows {}", headers.join(" | "), rows));
                (headers, rows) = (Vec::new(), 0);
            }
            "svg" => (legend, points, bars) = (Vec::new(), 0, 0),
            "text" if !class.is_empty() => {
                text_of = Some(format!("    {class}: {text}"));
                in_titled_text = true;
            }
            "tspan" if in_titled_text => {
                if let Some(last) = lines.last_mut() {
                    *last += &format!(" {text}");
                }
            }
            "/text" => in_titled_text = false,
            "text" if text_of.is_none() => legend.push(text.to_string()),
            // A point's marker: a circle, or a path of another shape.
            "circle" if class.is_empty() => points += 1,
            "path" if class == "marker" => points += 1,
            "path" if class == "error-bar" => bars += 1,
            "g" if class == "legend" => legend.clear(), // the legend's texts follow
            "/svg" => lines.push(format!("    legend: {}; points {points}, error bars {bars}", legend.join(", "))),
            "li" if text.starts_with("workload ") => lines.push(format!("  break-even: {text}")),
            "a" if attribute(tag, "download").is_some() => lines.push("    download SVG".into()),
            _ => {}
        }
        if let Some(line) = text_of.take() {
            lines.push(line);
        }
        if name == "figure" {
            lines.push("  chart".into());
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn the_page_structure_matches_its_golden_outlines() {
    for name in ["objects-a", "fio-a", "html-run"] {
        golden(&format!("{name}.html-outline.txt"), &outline(&html(&load(name))));
    }
}

#[test]
fn the_html_run_fixture_has_every_kind_of_chart_and_both_break_evens() {
    let report = load("html-run");
    for group in charts::all(&report) {
        assert!(!group.figures.is_empty(), "{}: {}", group.heading, group.absent);
    }
    let page = html(&report);
    assert_eq!(page.matches("<li>workload small").count(), 2, "put and get each have a break-even");
    assert!(page.contains("sqlite faster below ~"));
    assert!(page.contains("verdict-clear\">clear: fs ×") && page.contains("verdict-tie\">tie: "));
}

#[test]
fn the_page_loads_nothing_and_escapes_every_report_string() {
    let mut report = load("objects-a");
    for case in &mut report.cases {
        case.target = format!("<script>alert('{}')</script>", case.target);
    }
    report.warnings.push(Warning {
        kind: WarningKind::Unclassified,
        message: "a <b>bold</b> & \"quoted\" warning".into(),
        advice: String::new(),
        case_ids: Vec::new(),
        phase: None,
    });
    report.headlines.clear(); // computed again from the renamed targets
    let page = html(&report);
    assert!(page.starts_with("<!DOCTYPE html>\n") && page.ends_with("</html>\n"));
    assert!(!page.contains("<script") && !page.contains("<b>bold") && page.contains("&lt;script&gt;alert(&#39;sim&#39;)"));
    assert!(page.contains("a &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot; warning"));
    for external in ["<link", "src=", "http://", "https://", "@import", "url("] {
        assert!(!page.contains(external), "the page loads nothing: found {external}");
    }
    assert_eq!(page.matches("<figure class=\"chart\">").count(), page.matches("download=\"stowbench-chart-").count(), "every chart can be saved as SVG");
    assert_eq!(page, html(&report), "a pure function of the report");
}

#[test]
fn a_report_without_cases_says_so_instead_of_drawing_empty_charts() {
    let mut report = load("fio-a");
    report.fio_cases.clear();
    let page = html(&report);
    assert!(!page.contains("<svg"), "no data, no chart");
    assert!(page.contains("No fio cases in this run.") && page.contains("No finished case."));
}

#[test]
fn a_run_writes_report_html_beside_report_json_and_report_renders_the_same_page() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-html-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let job = "version = 1\nname = \"page\"\n[[target]]\nname = \"sim\"\nbackend = \"sim\"\nlatency = \"1ms\"\n[[workload]]\nname = \"w\"\nsizes = [\"1KiB\", \"4KiB\"]\nobjects = 5\nphases = [\"put\", \"get\"]\n";
    std::fs::write(dir.join("job.toml"), job).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_stowbench"))
        .args(["run", "job.toml", "--out", "out", "--work-dir", ".", "--no-progress"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let stamp = std::fs::read_dir(dir.join("out")).unwrap().next().unwrap().unwrap().path();
    let written = std::fs::read_to_string(stamp.join("report.html")).expect("report.html beside report.json");
    let again = Command::new(env!("CARGO_BIN_EXE_stowbench")).args(["report", "--format", "html"]).arg(stamp.join("report.json")).output().unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(written, String::from_utf8(again.stdout).unwrap(), "the run's page and `report --format html` are the same page");
    assert!(!stamp.join("report.html.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The Chromium to use: STOWBENCH_CHROMIUM, else the first of the usual names on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("STOWBENCH_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|dir| ["chromium", "chromium-browser", "google-chrome"].map(|n| dir.join(n))).find(|p| p.is_file())
}

/// Runs headless Chromium on `page` with `extra` arguments; returns (stdout, console lines).
/// Console messages go to stderr with `--enable-logging=stderr`; the page has no script, so any
/// console line is a problem (a blocked load, a parse error). Chromium returns once the page has
/// loaded, and nothing on the page changes after that: there is no timing to wait for.
fn headless(browser: &Path, page: &Path, profile: &Path, extra: &[&str]) -> (String, Vec<String>) {
    let out = Command::new(browser)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", browser.display()));
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let console = String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(String::from).collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

#[test]
fn chromium_renders_every_chart_without_a_console_message_and_keeps_a_screenshot() {
    let Some(browser) = chromium() else {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: chromium is required (apt-get install chromium, see scripts/services.sh)");
        println!("skipped: no chromium on PATH (set STOWBENCH_CHROMIUM or install chromium); under CI=true this fails");
        return;
    };
    let output = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("test-output");
    std::fs::create_dir_all(&output).unwrap();
    let profile = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chromium-profile-{}", std::process::id()));
    let report = load("html-run");
    let page_path = output.join("report.html");
    std::fs::write(&page_path, html(&report)).unwrap();

    // The check can fail: a page that tries to load an image yields a console line.
    let bad = output.join("report-negative-control.html");
    std::fs::write(&bad, html(&report).replace("<h2 ", "<img src=\"http://example.invalid/x.png\"><h2 ")).unwrap();
    let (_, console) = headless(&browser, &bad, &profile, &["--dump-dom"]);
    assert!(!console.is_empty(), "a blocked load must show as a console line, or this test could never fail");

    let (dom, console) = headless(&browser, &page_path, &profile, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let expected: usize = charts::all(&report).iter().map(|g| g.figures.len()).sum();
    let figures: Vec<&str> = dom.split("<figure class=\"chart\">").skip(1).collect();
    assert_eq!(figures.len(), expected, "every chart the report has is on the page");
    for (i, figure) in figures.iter().enumerate() {
        let figure = figure.split("</figure>").next().unwrap();
        assert!(figure.contains("<svg") && figure.contains("class=\"series\""), "chart {} has no drawing", i + 1);
    }
    let screenshot = output.join("report.png");
    let _ = std::fs::remove_file(&screenshot);
    let (_, console) = headless(&browser, &page_path, &profile, &["--window-size=1280,2400", &format!("--screenshot={}", screenshot.display())]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let png = std::fs::read(&screenshot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "a real PNG");
    println!("screenshot: {}", screenshot.display());
    let _ = std::fs::remove_dir_all(&profile);
}
