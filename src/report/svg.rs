//! Charts as plain SVG text: line charts (linear or log axes, error bars) and horizontal bar
//! charts, each with its title, axis labels carrying their unit, and a legend. No fonts or scripts
//! are shipped: the browser draws the text, so a chart is the same bytes offline and online.
//!
//! Pure functions of their input; every string from a report is escaped here. What to chart from
//! a report is `report::charts`' business, not this module's.

use crate::report::compare::render::escape;
use std::fmt::Write;

/// How values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Evenly spaced values, starting at zero.
    Linear,
    /// Decades (ticks at 1, 2, 5 × 10ⁿ when the range is short).
    Log10,
    /// Powers of two (object sizes, queue depths).
    Log2,
    /// Named categories at 0, 1, 2, … (the tick labels say which).
    Categories,
}

/// What an axis measures; ticks are written in the unit the data's largest value reads best in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Bytes, binary multiples (KiB, MiB, GiB).
    Bytes,
    /// Bytes per second, decimal multiples (kB/s, MB/s, GB/s).
    BytesPerSecond,
    /// Nanoseconds shown as ns, µs, ms or s.
    Nanos,
    /// A plain count or rate whose name the axis label gives (ops/s, IOPS, seconds, ×).
    Plain(&'static str),
}

/// One axis: what it measures, in which unit, on which scale.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The quantity, e.g. "throughput"; the unit and "log scale" are appended.
    pub label: String,
    /// The unit values are given in.
    pub unit: Unit,
    /// How values are spaced.
    pub scale: Scale,
    /// For `Scale::Categories`: the names at 0, 1, 2, ….
    pub categories: Vec<String>,
}

/// One point of a line, with an optional interval drawn as an error bar; a `y` that is not finite
/// (NaN) is a gap, where the line breaks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Position on the x axis, in the axis' unit.
    pub x: f64,
    /// Position on the y axis, in the axis' unit.
    pub y: f64,
    /// The interval around `y` (low, high), drawn only when present.
    pub interval: Option<(f64, f64)>,
}

/// One line (or one bar per category, in a bar chart).
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points in x order; in a bar chart, one per category (x = its index).
    pub points: Vec<Point>,
    /// Colour and style indexes, to draw related lines alike (one colour per target, one style
    /// per size or repeat); a style is a dash pattern and a marker shape, and the first
    /// `STYLES` are all different. `None`: by the series' place in the chart.
    pub look: Option<(usize, usize)>,
}

/// A whole chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Horizontal axis (in a bar chart: the value axis).
    pub x: Axis,
    /// Vertical axis (in a bar chart: the categories, one row each).
    pub y: Axis,
    /// The lines or bar groups.
    pub series: Vec<Series>,
    /// Lines instead of horizontal bars.
    pub kind: Kind,
}

/// The two shapes of chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Lines with markers over x.
    Lines,
    /// Horizontal bars, one row per category of the y axis, one bar per series.
    Bars,
}

/// Colour-blind-safe colours (Okabe and Ito); beyond them lines repeat colours with other styles.
const COLOURS: [&str; 8] = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999"];
/// Solid, dashed, dotted, dash-dot.
const DASHES: [&str; 4] = ["", "6 3", "2 3", "8 3 2 3"];
/// The shapes of a line's markers: a second cue beside the dash, which a short or dense line
/// (where dashes hardly show) and a reader who cannot tell the dashes apart still see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}
const MARKERS: [Marker; 4] = [Marker::Circle, Marker::Square, Marker::Triangle, Marker::Diamond];
/// How many series of one colour can be told apart: each style a different pair of dash and
/// marker.
pub const STYLES: usize = DASHES.len() * MARKERS.len();
const WIDTH: f64 = 760.0;
const PLOT_HEIGHT: f64 = 300.0;
const CHAR_WIDTH: f64 = 6.6; // of 11 px sans-serif, generous: labels must not overlap
/// From one line of a wrapped label to the next, in pixels.
const LINE_HEIGHT: f64 = 13.0;
/// The top of the plot under a title of one line; each further line of the title moves it down.
const TOP: f64 = 34.0;
/// The title's font size (the rest of the chart's text is 11 px).
const TITLE_SIZE: f64 = 13.0;
/// Of the title's 13 px bold sans-serif, as generous as `CHAR_WIDTH`: bold runs wider still.
const TITLE_CHAR_WIDTH: f64 = CHAR_WIDTH * TITLE_SIZE / 11.0 * 1.1;
/// From one line of a wrapped title to the next, in pixels.
const TITLE_LINE_HEIGHT: f64 = 16.0;

/// How the `i`-th series is drawn.
struct Look {
    colour: &'static str,
    dash: &'static str,
    marker: Marker,
    /// A bar drawn as an outline: the colours' second round (a ninth target) in a bar chart,
    /// where a bar has no dash or marker to tell it from the first target's.
    hollow: bool,
}

/// The colour, dash pattern and marker of the `i`-th series. Past the 8 colours, a colour comes
/// back with styles none of its first round's series uses (a ninth target's line is no
/// first target's twin), and a bar comes back hollow.
fn look(chart: &Chart, i: usize) -> Look {
    let (colour, style) = chart.series[i].look.unwrap_or((i, 0));
    let round = colour / COLOURS.len();
    let styles_used = chart.series.iter().map(|s| s.look.map_or(0, |(_, style)| style) + 1).max().unwrap_or(1);
    let (dash, marker) = style_parts(style + round * styles_used);
    Look { colour: COLOURS[colour % COLOURS.len()], dash: DASHES[dash], marker: MARKERS[marker], hollow: round % 2 == 1 }
}

/// A style's dash and marker indexes. Both change from one style to the next (solid circles,
/// dashed squares, dotted triangles, dash-dot diamonds, then solid squares, …), so neighbours
/// differ in two cues; over `STYLES` styles each pair comes once.
fn style_parts(style: usize) -> (usize, usize) {
    let style = style % STYLES;
    let dash = style % DASHES.len();
    (dash, (dash + style / DASHES.len()) % MARKERS.len())
}

/// A bar's (or its legend key's) fill: the colour, or an outline of it on white.
fn bar_paint(colour: &str, hollow: bool) -> String {
    match hollow {
        true => format!("fill=\"#fff\" stroke=\"{colour}\" stroke-width=\"1.5\""),
        false => format!("fill=\"{colour}\""),
    }
}

/// A marker of `shape` centred on (x, y), of about the area of a circle of radius `r`; `extra`
/// goes inside the element (a tooltip's `<title>`). A circle stays a `<circle>`, the other shapes
/// are paths of class `class`.
fn marker(shape: Marker, (x, y): (f64, f64), r: f64, colour: &str, class: &str, extra: &str) -> String {
    let d = match shape {
        Marker::Circle => {
            let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
            return format!("<circle{class} cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{colour}\">{extra}</circle>");
        }
        Marker::Square => {
            let h = r * 0.9;
            format!("M{:.1},{:.1}h{:.1}v{:.1}h{:.1}z", x - h, y - h, 2.0 * h, 2.0 * h, -2.0 * h)
        }
        Marker::Triangle => {
            let h = r * 1.3;
            format!("M{x:.1},{:.1}L{:.1},{:.1}L{:.1},{:.1}z", y - h, x + h, y + h * 0.75, x - h, y + h * 0.75)
        }
        Marker::Diamond => {
            let h = r * 1.3;
            format!("M{x:.1},{:.1}L{:.1},{y:.1}L{x:.1},{:.1}L{:.1},{y:.1}z", y - h, x + h, y + h, x - h)
        }
    };
    format!("<path class=\"{}\" d=\"{d}\" fill=\"{colour}\">{extra}</path>", if class.is_empty() { "marker" } else { class })
}

impl Unit {
    /// The divisor and unit name that make `largest` read best.
    fn display(self, largest: f64) -> (f64, &'static str) {
        let pick = |steps: &[(f64, &'static str)]| steps.iter().copied().find(|(d, _)| largest >= *d).unwrap_or(*steps.last().unwrap());
        match self {
            Unit::Bytes => pick(&[(1_073_741_824.0, "GiB"), (1_048_576.0, "MiB"), (1024.0, "KiB"), (1.0, "bytes")]),
            Unit::BytesPerSecond => pick(&[(1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")]),
            Unit::Nanos => pick(&[(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")]),
            Unit::Plain(name) => (1.0, name),
        }
    }
}

/// A value mapped onto pixels along one axis.
struct Mapping {
    scale: Scale,
    low: f64,
    high: f64,
    from_px: f64,
    to_px: f64,
}

impl Mapping {
    fn px(&self, value: f64) -> f64 {
        let (v, lo, hi) = match self.scale {
            Scale::Log10 | Scale::Log2 => (value.max(self.low).ln(), self.low.ln(), self.high.ln()),
            _ => (value, self.low, self.high),
        };
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        self.from_px + t.clamp(0.0, 1.0) * (self.to_px - self.from_px)
    }
}

/// The axis range and its ticks (values in the axis' unit) for data between `min` and `max`.
fn ticks(axis: &Axis, min: f64, max: f64) -> (f64, f64, Vec<f64>) {
    match axis.scale {
        Scale::Categories => (-0.5, axis.categories.len() as f64 - 0.5, (0..axis.categories.len()).map(|i| i as f64).collect()),
        Scale::Linear => {
            let high = if max > 0.0 { max } else { 1.0 };
            let raw = high / 5.0;
            let magnitude = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(raw);
            // Headroom: a line along the top value must not hide in the plot's frame.
            let top = (high * 1.04 / step).ceil() * step;
            (0.0, top, (0..=((top / step).round() as usize)).map(|i| i as f64 * step).collect())
        }
        Scale::Log2 => {
            let (lo, hi) = (min.max(f64::MIN_POSITIVE).log2().floor(), max.max(f64::MIN_POSITIVE).log2().ceil());
            let (lo, hi) = if hi <= lo { (lo - 1.0, hi + 1.0) } else { (lo, hi) };
            let step = ((hi - lo) / 8.0).ceil().max(1.0);
            let ticks = (0..).map(|i| lo + i as f64 * step).take_while(|e| *e <= hi).map(|e| 2f64.powf(e)).collect();
            (2f64.powf(lo), 2f64.powf(hi), ticks)
        }
        Scale::Log10 => {
            let (lo, hi) = (min.max(f64::MIN_POSITIVE).log10().floor(), max.max(f64::MIN_POSITIVE).log10().ceil());
            // All values on one power of ten: a decade either side keeps them off the frame.
            let (lo, hi) = if hi <= lo { (lo - 1.0, hi + 1.0) } else { (lo, hi) };
            let steps: &[f64] = if hi - lo <= 2.0 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            let mut ticks = Vec::new();
            for e in lo as i32..=hi as i32 {
                ticks.extend(steps.iter().map(|m| m * 10f64.powi(e)).filter(|v| *v <= 10f64.powf(hi) * 1.0001));
            }
            (10f64.powf(lo), 10f64.powf(hi), ticks)
        }
    }
}

/// A tick value without needless digits: "0.5", "20", "1024", "2.5".
fn number(value: f64) -> String {
    let text = if value >= 100.0 || value == value.round() {
        format!("{value:.0}")
    } else if value >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Whether each tick carries its own unit: log axes of bytes, rates and times span several
/// units ("1 KiB … 1 MiB"), which read better than 0.001 … 1 of one unit.
fn ticks_carry_unit(axis: &Axis) -> bool {
    is_log(axis.scale) && !matches!(axis.unit, Unit::Plain(_))
}

/// The axis title: quantity, unit and scale ("throughput (MB/s, log scale)"); where the ticks
/// carry their units, the title says so instead of naming one.
fn axis_title(axis: &Axis, unit_name: &str) -> String {
    let scale = match axis.scale {
        Scale::Log10 => "log scale",
        Scale::Log2 => "log₂ scale",
        _ => "",
    };
    match (axis.scale, unit_name) {
        (Scale::Categories, _) => axis.label.clone(),
        _ if ticks_carry_unit(axis) => format!("{} ({scale}, units on the ticks)", axis.label),
        (_, "") => axis.label.clone(),
        (Scale::Linear, _) => format!("{} ({unit_name})", axis.label),
        _ => format!("{} ({unit_name}, {scale})", axis.label),
    }
}

/// The data range of one axis over every point and interval (positive values only on log axes).
fn data_range(chart: &Chart, pick: fn(&Point) -> [f64; 3], log: bool) -> (f64, f64) {
    let values = chart.series.iter().flat_map(|s| s.points.iter().flat_map(pick));
    let values: Vec<f64> = values.filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        (1.0, 1.0)
    } else {
        (min, max)
    }
}

/// The chart as a standalone SVG document (also valid inline in HTML).
pub fn render(chart: &Chart) -> String {
    match chart.kind {
        Kind::Lines => lines(chart),
        Kind::Bars => bars(chart),
    }
}

fn is_log(scale: Scale) -> bool {
    matches!(scale, Scale::Log10 | Scale::Log2)
}

/// `text` in lines of at most `width` characters, so that a long name (a target's, a case's) is
/// shown whole instead of running off the chart's edge. A line ends after the last '/' (between
/// a case id's parts) in its second half, else after the last space, '-', '_' or '.' there, else
/// at `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    wrap_at(text, width, &['/'], &[' ', '-', '_', '.'])
}

/// `text` in lines of at most `width` characters, each ending after the last of `first` in its
/// second half, else after the last of `then` there, else at `width` characters.
fn wrap_at(text: &str, width: usize, first: &[char], then: &[char]) -> Vec<String> {
    let width = width.max(2);
    let mut rest: Vec<char> = text.chars().collect();
    let mut lines = Vec::new();
    while rest.len() > width {
        let after = |separators: &[char]| rest[..width].iter().rposition(|c| separators.contains(c)).map(|i| i + 1).filter(|&end| end > width / 2);
        let end = after(first).or_else(|| after(then)).unwrap_or(width);
        lines.push(rest[..end].iter().collect::<String>().trim_end().to_string());
        rest.drain(..end);
        while rest.first() == Some(&' ') {
            rest.remove(0);
        }
    }
    lines.push(rest.into_iter().collect());
    lines
}

/// A `<text>` of one or more lines, the first with its baseline at `y`; `anchor` is its
/// `text-anchor` (empty: the start). Lines after the first are `<tspan>`s.
fn text_lines(x: f64, y: f64, anchor: &str, lines: &[String]) -> String {
    let anchor = if anchor.is_empty() { String::new() } else { format!(" text-anchor=\"{anchor}\"") };
    let mut out = format!("<text x=\"{x}\" y=\"{y:.1}\"{anchor}>{}", escape(lines.first().map_or("", String::as_str)));
    for line in lines.iter().skip(1) {
        let _ = write!(out, "<tspan x=\"{x}\" dy=\"{LINE_HEIGHT}\">{}</tspan>", escape(line));
    }
    out + "</text>"
}

/// Legend rows below the plot: as many entries per row as fit; a name wider than the chart
/// wraps, and its row grows to hold it. Returns (svg, height).
fn legend(chart: &Chart, top: f64, with_lines: bool) -> (String, f64) {
    let names: Vec<Vec<String>> = chart.series.iter().map(|s| wrap(&s.name, ((WIDTH - 20.0 - 34.0) / CHAR_WIDTH) as usize)).collect();
    let longest = names.iter().flatten().map(|line| line.chars().count()).max().unwrap_or(0) as f64;
    let entry = longest * CHAR_WIDTH + 34.0;
    let per_row = ((WIDTH - 20.0) / entry).floor().max(1.0) as usize;
    // Each row's top: rows of one line are 18 px apart; a wrapped name adds its extra lines.
    let row_tops: Vec<f64> = names
        .chunks(per_row)
        .scan(top, |next, row| {
            let this = *next;
            *next += 18.0 + (row.iter().map(Vec::len).max().unwrap_or(1) - 1) as f64 * LINE_HEIGHT;
            Some(this)
        })
        .collect();
    let height = names.chunks(per_row).map(|row| 18.0 + (row.iter().map(Vec::len).max().unwrap_or(1) - 1) as f64 * LINE_HEIGHT).sum();
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let Look { colour, dash, marker: shape, hollow } = look(chart, i);
        let (x, y) = (20.0 + (i % per_row) as f64 * entry, row_tops[i / per_row]);
        if with_lines {
            let _ = write!(
                out,
                "<line x1=\"{x}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"{}\"/>",
                x + 24.0,
                colour,
                dash
            );
            out += &marker(shape, (x + 12.0, y), 3.0, colour, "key", "");
        } else {
            let _ = write!(out, "<rect x=\"{x}\" y=\"{}\" width=\"24\" height=\"10\" {}/>", y - 5.0, bar_paint(colour, hollow));
        }
        out += &text_lines(x + 30.0, y + 4.0, "", name);
        out.push('\n');
    }
    (format!("<g class=\"legend\">\n{out}</g>\n"), height)
}

/// The chart's title in lines that fit between 20 px margins: a long workload or target name
/// ran off both edges of the centred title, and the reader lost both its ends. It breaks at a
/// space (between the title's words and parts) before any character inside a name.
fn title_lines(chart: &Chart) -> Vec<String> {
    wrap_at(&chart.title, ((WIDTH - 40.0) / TITLE_CHAR_WIDTH) as usize, &[' '], &['-', '_', '.', '/'])
}

/// The top of the plot: below every line of the title.
fn plot_top(chart: &Chart) -> f64 {
    TOP + (title_lines(chart).len() - 1) as f64 * TITLE_LINE_HEIGHT
}

fn open(chart: &Chart, height: f64) -> String {
    let mut title = String::new();
    for (i, line) in title_lines(chart).iter().enumerate() {
        if i == 0 {
            title += &escape(line);
        } else {
            let _ = write!(title, "<tspan x=\"{}\" dy=\"{TITLE_LINE_HEIGHT}\">{}</tspan>", WIDTH / 2.0, escape(line));
        }
    }
    format!(
        "<svg width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\" aria-label=\"{}\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n<text class=\"title\" x=\"{}\" y=\"18\" font-size=\"{TITLE_SIZE}\" font-weight=\"bold\" text-anchor=\"middle\">{title}</text>\n",
        escape(&chart.title),
        WIDTH / 2.0,
    )
}

/// Tick lines, tick labels and the axis title of a value axis (`horizontal`: the x axis); `at` is
/// the plot's left edge, top and bottom.
fn value_axis(axis: &Axis, map: &Mapping, ticks: &[f64], divisor: f64, unit_name: &str, at: (f64, f64, f64), horizontal: bool) -> String {
    let mut out = String::from("<g class=\"axis\">\n");
    let (x_edge, top, y_edge) = at;
    for (i, tick) in ticks.iter().enumerate() {
        let p = map.px(*tick * divisor);
        let label = match axis.scale {
            Scale::Categories => axis.categories.get(i).cloned().unwrap_or_default(),
            _ if ticks_carry_unit(axis) => tip_value(axis, *tick * divisor),
            _ => number(*tick),
        };
        if horizontal {
            let _ = writeln!(out, "<line x1=\"{p:.1}\" y1=\"{top}\" x2=\"{p:.1}\" y2=\"{y_edge}\" stroke=\"#e4e4e4\"/><text x=\"{p:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>", y_edge + 14.0, escape(&label));
        } else {
            let _ = writeln!(
                out,
                "<line x1=\"{x_edge}\" y1=\"{p:.1}\" x2=\"{}\" y2=\"{p:.1}\" stroke=\"#e4e4e4\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                WIDTH - 20.0,
                x_edge - 5.0,
                p + 4.0,
                escape(&label)
            );
        }
    }
    let title = escape(&axis_title(axis, unit_name));
    if horizontal {
        let _ = writeln!(out, "<text class=\"x-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{title}</text>", (x_edge + WIDTH - 20.0) / 2.0, y_edge + 32.0);
    } else {
        let _ = writeln!(out, "<text class=\"y-title\" transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{title}</text>", (top + y_edge) / 2.0);
    }
    out + "</g>\n"
}

/// Lays out one value axis: mapping, ticks, divisor and unit name.
fn layout(axis: &Axis, range: (f64, f64), pixels: (f64, f64)) -> (Mapping, Vec<f64>, f64, &'static str) {
    let (divisor, unit_name) = match axis.scale {
        Scale::Categories => (1.0, ""),
        // Ticks with their own units are laid out in the base unit (powers of 2 of bytes).
        _ if ticks_carry_unit(axis) => (1.0, ""),
        _ => axis.unit.display(range.1),
    };
    let (low, high, ticks) = ticks(axis, range.0 / divisor, range.1 / divisor);
    let scaled = |v: f64| if axis.scale == Scale::Categories { v } else { v * divisor };
    (Mapping { scale: axis.scale, low: scaled(low), high: scaled(high), from_px: pixels.0, to_px: pixels.1 }, ticks, divisor, unit_name)
}

fn lines(chart: &Chart) -> String {
    let left = 78.0;
    let top = plot_top(chart);
    let bottom = top + PLOT_HEIGHT;
    let (x_range, y_range) = (data_range(chart, |p| [p.x; 3], is_log(chart.x.scale)), data_range(chart, interval_values, is_log(chart.y.scale)));
    let (x_map, x_ticks, x_div, x_unit) = layout(&chart.x, x_range, (left, WIDTH - 20.0));
    let (y_map, y_ticks, y_div, y_unit) = layout(&chart.y, y_range, (bottom, top));
    let (legend_svg, legend_height) = legend(chart, bottom + 56.0, true);
    let mut out = open(chart, bottom + 50.0 + legend_height + 8.0);
    out += &value_axis(&chart.x, &x_map, &x_ticks, x_div, x_unit, (left, top, bottom), true);
    out += &value_axis(&chart.y, &y_map, &y_ticks, y_div, y_unit, (left, top, bottom), false);
    let _ = writeln!(out, "<rect x=\"{left}\" y=\"{top}\" width=\"{}\" height=\"{PLOT_HEIGHT}\" fill=\"none\" stroke=\"#888\"/>", WIDTH - 20.0 - left);
    for (i, series) in chart.series.iter().enumerate() {
        let Look { colour, dash, marker: shape, .. } = look(chart, i);
        out += "<g class=\"series\">\n";
        // A point without a value (y not finite) is a gap: the line stops there and goes on
        // after it, and draws nothing a reader could take for a value in between.
        for run in series.points.split(|p| !p.y.is_finite()).filter(|run| !run.is_empty()) {
            let path: Vec<String> = run.iter().map(|p| format!("{:.1},{:.1}", x_map.px(p.x), y_map.px(p.y))).collect();
            let _ =
                writeln!(out, "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"{}\"/>", path.join(" "), colour, dash);
        }
        // Dense lines get small markers, which would otherwise hide the line itself.
        let radius = if series.points.len() > 40 { 1.5 } else { 3.0 };
        for p in series.points.iter().filter(|p| p.y.is_finite()) {
            let (x, y) = (x_map.px(p.x), y_map.px(p.y));
            if let Some((low, high)) = p.interval {
                let (top, foot) = (y_map.px(high), y_map.px(low));
                let _ = write!(
                    out,
                    "<path class=\"error-bar\" d=\"M{x:.1},{top:.1}V{foot:.1}M{:.1},{top:.1}H{:.1}M{:.1},{foot:.1}H{:.1}\" stroke=\"{}\"/>",
                    x - 4.0,
                    x + 4.0,
                    x - 4.0,
                    x + 4.0,
                    colour
                );
            }
            let tip = format!("{}: {} → {}", series.name, tip_value(&chart.x, p.x), tip_value(&chart.y, p.y));
            out += &marker(shape, (x, y), radius, colour, "", &format!("<title>{}</title>", escape(&tip)));
            out.push('\n');
        }
        out += "</g>\n";
    }
    out + &legend_svg + "</svg>\n"
}

fn interval_values(p: &Point) -> [f64; 3] {
    let (low, high) = p.interval.unwrap_or((p.y, p.y));
    [p.y, low, high]
}

/// A value as a tooltip shows it, in the unit that suits it alone.
fn tip_value(axis: &Axis, value: f64) -> String {
    if axis.scale == Scale::Categories {
        return axis.categories.get(value as usize).cloned().unwrap_or_default();
    }
    let (divisor, unit) = axis.unit.display(value);
    format!("{} {unit}", number(value / divisor))
}

fn bars(chart: &Chart) -> String {
    let categories = &chart.y.categories;
    // The labels take at most half the width; a longer one (a long target's case id) wraps
    // rather than running off the chart's left edge.
    let labels: Vec<Vec<String>> = categories.iter().map(|c| wrap(c, ((WIDTH / 2.0 - 12.0) / CHAR_WIDTH) as usize)).collect();
    let longest = labels.iter().flatten().map(|line| line.chars().count()).max().unwrap_or(0) as f64;
    let left = (longest * CHAR_WIDTH + 12.0).clamp(60.0, WIDTH / 2.0);
    let bar = 9.0;
    let bars_height = bar * chart.series.len() as f64;
    // Each category's row holds its bars or its label's lines, whichever is taller.
    let heights: Vec<f64> = labels.iter().map(|l| (bars_height + 6.0).max(l.len() as f64 * LINE_HEIGHT + 4.0)).collect();
    let top = plot_top(chart);
    let tops: Vec<f64> = heights
        .iter()
        .scan(top, |next, h| {
            let this = *next;
            *next += h;
            Some(this)
        })
        .collect();
    let bottom = top + heights.iter().sum::<f64>();
    let (x_map, x_ticks, x_div, x_unit) = layout(&chart.x, data_range(chart, |p| [p.y; 3], false), (left, WIDTH - 90.0));
    let (legend_svg, legend_height) = legend(chart, bottom + 56.0, false);
    let mut out = open(chart, bottom + 50.0 + legend_height + 8.0);
    out += &value_axis(&chart.x, &x_map, &x_ticks, x_div, x_unit, (left, top, bottom), true);
    out += "<g class=\"axis\">\n";
    for (c, lines) in labels.iter().enumerate() {
        // The lines centred on the row, as one line was.
        let y = tops[c] + heights[c] / 2.0 + 4.0 - (lines.len() - 1) as f64 * LINE_HEIGHT / 2.0;
        out += &text_lines(left - 5.0, y, "end", lines);
        out.push('\n');
    }
    out += "</g>\n";
    for (i, series) in chart.series.iter().enumerate() {
        let Look { colour, hollow, .. } = look(chart, i);
        out += "<g class=\"series\">\n";
        for p in &series.points {
            let Some((row_top, row_height)) = tops.get(p.x as usize).zip(heights.get(p.x as usize)) else { continue };
            let y = row_top + (row_height - bars_height) / 2.0 + i as f64 * bar;
            let end = x_map.px(p.y);
            let text = tip_value(&chart.x, p.y);
            let tip = format!("{} {}: {text}", categories.get(p.x as usize).map(String::as_str).unwrap_or(""), series.name);
            let _ = writeln!(
                out,
                "<rect x=\"{left}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{}\" {}><title>{}</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\">{}</text>",
                (end - left).max(0.5),
                bar - 1.0,
                bar_paint(colour, hollow),
                escape(&tip),
                end + 3.0,
                y + bar - 2.0,
                escape(&text)
            );
        }
        out += "</g>\n";
    }
    let _ = writeln!(out, "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#888\"/>");
    out + &legend_svg + "</svg>\n"
}

/// The SVG as a standalone file in a `data:` URI (percent-encoded UTF-8), for a "download SVG"
/// link that works offline. Inline SVG in HTML needs no namespace; a file of its own does, and it
/// is added only here so the page itself names no URL at all.
pub fn data_uri(svg: &str) -> String {
    let file = svg.replacen("<svg ", "<svg xmlns=\"http://www.w3.org/2000/svg\" ", 1);
    let mut out = String::from("data:image/svg+xml;charset=utf-8,");
    for byte in file.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'=' | b',' | b'(' | b')' => out.push(byte as char),
            other => {
                let _ = write!(out, "%{other:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(label: &str, unit: Unit, scale: Scale) -> Axis {
        Axis { label: label.into(), unit, scale, categories: Vec::new() }
    }

    #[test]
    fn log_ticks_cover_the_data_in_decades_and_label_the_unit_and_scale() {
        let a = axis("throughput", Unit::BytesPerSecond, Scale::Log10);
        let (low, high, ticks) = ticks(&a, 3.2, 4100.0);
        assert_eq!((low, high), (1.0, 10_000.0));
        assert_eq!(ticks, vec![1.0, 10.0, 100.0, 1000.0, 10_000.0]);
        assert_eq!(axis_title(&a, ""), "throughput (log scale, units on the ticks)");
        let linear = axis("throughput", Unit::BytesPerSecond, Scale::Linear);
        assert_eq!(axis_title(&linear, Unit::BytesPerSecond.display(4.1e9).1), "throughput (GB/s)");
        assert_eq!(tip_value(&a, 2.5e6), "2.5 MB/s");
        let (_, _, short) = ticks_of(Scale::Log10, 2.0, 40.0);
        assert_eq!(short, vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0], "a short range gets 1-2-5 ticks");
        assert_eq!(ticks_of(Scale::Log10, 1e6, 1e6).0, 1e5, "one value sits mid-axis, not on the frame");
    }

    fn ticks_of(scale: Scale, min: f64, max: f64) -> (f64, f64, Vec<f64>) {
        ticks(&axis("x", Unit::Plain(""), scale), min, max)
    }

    #[test]
    fn linear_axes_start_at_zero_and_powers_of_two_stay_powers_of_two() {
        assert_eq!(ticks_of(Scale::Linear, 130.0, 930.0), (0.0, 1000.0, vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]));
        assert_eq!(ticks_of(Scale::Log2, 1.0, 16.0).2, vec![1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(ticks_of(Scale::Log2, 4.0, 4.0).2, vec![2.0, 4.0, 8.0], "one value still gets an axis around it");
        assert_eq!((number(0.5), number(1024.0), number(2.5), number(0.001)), ("0.5".into(), "1024".into(), "2.5".into(), "0.001".into()));
    }

    #[test]
    fn names_are_escaped_and_error_bars_drawn_only_where_given() {
        let chart = Chart {
            title: "a <b> & c".into(),
            x: axis("object size", Unit::Bytes, Scale::Log2),
            y: axis("throughput", Unit::BytesPerSecond, Scale::Log10),
            series: vec![Series {
                name: "<script>".into(),
                points: vec![Point { x: 1024.0, y: 1e6, interval: Some((0.5e6, 2e6)) }, Point { x: 4096.0, y: 3e6, interval: None }],
                look: None,
            }],
            kind: Kind::Lines,
        };
        let svg = render(&chart);
        assert!(svg.contains("a &lt;b&gt; &amp; c") && svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
        assert_eq!(svg.matches("class=\"error-bar\"").count(), 1);
        assert!(svg.contains("object size (log₂ scale, units on the ticks)") && svg.contains(">1 KiB<") && svg.contains(">4 KiB<"));
    }

    /// Every style is a pair of dash and marker no other style has, and styles next to each
    /// other differ in both.
    #[test]
    fn each_style_is_its_own_dash_and_marker() {
        let mut parts: Vec<(usize, usize)> = (0..STYLES).map(style_parts).collect();
        assert!(parts.windows(2).all(|w| w[0].0 != w[1].0 && w[0].1 != w[1].1), "{parts:?}");
        parts.sort_unstable();
        parts.dedup();
        assert_eq!(parts.len(), STYLES);
    }

    /// A line's markers and its legend key have the shape of its style.
    #[test]
    fn lines_and_their_legend_keys_are_drawn_with_their_styles_marker() {
        let series = |name: &str, style: usize| Series { name: name.into(), points: vec![Point { x: 1.0, y: 1.0, interval: None }], look: Some((0, style)) };
        let chart = Chart {
            title: "t".into(),
            x: axis("x", Unit::Plain(""), Scale::Linear),
            y: axis("y", Unit::Plain(""), Scale::Linear),
            series: (0..4).map(|style| series(&format!("s{style}"), style)).collect(),
            kind: Kind::Lines,
        };
        let svg = render(&chart);
        assert_eq!(svg.matches("<circle cx=").count() + svg.matches("<circle class=\"key\"").count(), 2, "style 0 has circles: {svg}");
        assert_eq!(svg.matches("<path class=\"marker\"").count(), 3, "one point each of the three other shapes: {svg}");
        assert_eq!(svg.matches("<path class=\"key\"").count(), 3, "and their legend keys: {svg}");
        for dash in DASHES {
            assert!(svg.contains(&format!("stroke-dasharray=\"{dash}\"")), "{dash}");
        }
    }

    /// Session 47 noticed: a ninth target was drawn as the first (same colour, same style), and
    /// the e4 recipe has ten targets.
    #[test]
    fn past_eight_colours_no_two_series_look_alike() {
        let series = |target: usize, style: usize| Series {
            name: format!("t{target} s{style}"),
            points: vec![Point { x: 0.0, y: 1.0, interval: None }],
            look: Some((target, style)),
        };
        for styles in [1, 3] {
            let chart = Chart {
                title: "t".into(),
                x: axis("x", Unit::Plain(""), Scale::Linear),
                y: axis("y", Unit::Plain(""), Scale::Linear),
                series: (0..10).flat_map(|target| (0..styles).map(move |style| series(target, style))).collect(),
                kind: Kind::Lines,
            };
            let mut looks: Vec<(&str, &str, Marker)> = (0..chart.series.len()).map(|i| look(&chart, i)).map(|l| (l.colour, l.dash, l.marker)).collect();
            let all = looks.len();
            looks.sort_by_key(|l| format!("{l:?}"));
            looks.dedup();
            assert_eq!(looks.len(), all, "{styles} style(s) a target");
        }
        let bars = Chart {
            title: "t".into(),
            x: axis("x", Unit::Plain(""), Scale::Linear),
            y: Axis { label: "case".into(), unit: Unit::Plain(""), scale: Scale::Categories, categories: vec!["a".into()] },
            series: (0..10).map(|target| series(target, 0)).collect(),
            kind: Kind::Bars,
        };
        let svg = render(&bars);
        let first = COLOURS[0];
        assert_eq!(svg.matches(&format!("fill=\"{first}\"")).count(), 2, "the first target's bar and key: {svg}");
        assert_eq!(svg.matches(&format!("fill=\"#fff\" stroke=\"{first}\"")).count(), 2, "the ninth's, hollow: {svg}");
    }

    #[test]
    fn a_long_label_wraps_after_a_separator_and_loses_no_character() {
        let id = "a-very-long-target-name-for-the-primary-object-store-cluster/w/256KiB/t1/r1";
        let lines = wrap(id, 55);
        assert_eq!(lines, ["a-very-long-target-name-for-the-primary-object-store-", "cluster/w/256KiB/t1/r1"]);
        assert_eq!(wrap("aaaaaaaaaa", 4), ["aaaa", "aaaa", "aa"], "no separator: cut at the width");
        assert_eq!(wrap("sim/small/4KiB/t1/r1", 55), ["sim/small/4KiB/t1/r1"]);
        assert_eq!(wrap("one two three", 8), ["one two", "three"]);
    }

    /// A bar chart's category labels (case ids, which hold the target's name) took at most half
    /// the width and a longer one ran off the chart's left edge. It wraps: every line fits in the
    /// margin, and the whole name is on the chart.
    #[test]
    fn long_category_labels_and_legend_names_fit_inside_the_chart() {
        let long = format!("{}/w/4KiB/t1/r1", "a-target-name-much-longer-than-any-margin-".repeat(3));
        let chart = Chart {
            title: "CPU time per case".into(),
            x: axis("CPU time", Unit::Nanos, Scale::Linear),
            y: Axis { label: "case".into(), unit: Unit::Plain(""), scale: Scale::Categories, categories: vec![long.clone(), "b/w/4KiB/t1/r1".into()] },
            series: vec![Series {
                name: format!("{long} and a legend entry as long"),
                points: vec![Point { x: 0.0, y: 2e6, interval: None }, Point { x: 1.0, y: 1e6, interval: None }],
                look: None,
            }],
            kind: Kind::Bars,
        };
        let svg = render(&chart);
        let texts: Vec<(f64, &str, &str)> = svg
            .split("<text ")
            .skip(1)
            .flat_map(|t| {
                let x: f64 = t.split("x=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
                let anchor = if t.contains("text-anchor=\"end\"") { "end" } else { "start" };
                let body = t.split_once('>').unwrap().1.split("</text>").next().unwrap();
                let mut lines = body.split("<tspan ");
                let first = lines.next().unwrap();
                std::iter::once(first).chain(lines.map(|l| l.split_once('>').unwrap().1.trim_end_matches("</tspan>"))).map(move |line| (x, anchor, line))
            })
            .collect();
        for (x, anchor, line) in &texts {
            let width = line.chars().count() as f64 * CHAR_WIDTH;
            let (from, to) = if *anchor == "end" { (x - width, *x) } else { (*x, x + width) };
            assert!(from >= 0.0 && to <= WIDTH, "{line:?} spans {from:.0}..{to:.0} px of {WIDTH}");
        }
        // A line break takes the space it breaks at, nothing else.
        let shown: String = texts.iter().map(|(_, _, line)| *line).collect::<String>().replace(' ', "");
        assert!(shown.contains(&long), "the whole label is on the chart: {shown}");
        assert!(shown.contains(&chart.series[0].name.replace(' ', "")), "the whole legend name is on the chart: {shown}");
    }

    /// A title with a long workload name (64 characters, the most a name may have) ran off both
    /// edges of the chart. It wraps: every line fits, the whole title is shown, and the plot
    /// starts below its last line, in a chart as much taller, in line and bar charts alike.
    #[test]
    fn a_long_title_wraps_and_the_plot_makes_room_for_it() {
        let workload = "mixed-small-object-ingest-scenario-with-a-very-long-descript-v2x";
        let chart = |title: &str, kind: Kind| Chart {
            title: title.into(),
            x: axis("x", Unit::Plain("s"), Scale::Linear),
            y: match kind {
                Kind::Lines => axis("y", Unit::Plain("op/s"), Scale::Linear),
                Kind::Bars => Axis { label: "case".into(), unit: Unit::Plain(""), scale: Scale::Categories, categories: vec!["a".into()] },
            },
            series: vec![Series { name: "s".into(), points: vec![Point { x: 0.0, y: 1.0, interval: None }], look: None }],
            kind,
        };
        // The plot's frame: its top, and the svg's height.
        let frame = |svg: &str, kind: Kind| -> (f64, f64) {
            let attr = |tag: &str, name: &str| -> f64 { tag.split(&format!(" {name}=\"")).nth(1).unwrap().split('"').next().unwrap().parse().unwrap() };
            let top = match kind {
                Kind::Lines => attr(svg.split("<rect x=").nth(1).unwrap(), "y"),
                Kind::Bars => attr(svg.rsplit("<line x1=").next().unwrap(), "y1"),
            };
            (top, attr(svg, "height"))
        };
        for kind in [Kind::Lines, Kind::Bars] {
            let long = format!("put operations per second over time · 16 threads · workload {workload} · 4KiB r1 to 64KiB r3");
            let svg = render(&chart(&long, kind));
            let title = svg.split("<text class=\"title\"").nth(1).unwrap().split_once('>').unwrap().1.split("</text>").next().unwrap();
            let mut parts = title.split("<tspan ");
            let first = parts.next().unwrap();
            let lines: Vec<&str> = std::iter::once(first).chain(parts.map(|l| l.split_once('>').unwrap().1.trim_end_matches("</tspan>"))).collect();
            assert!(lines.len() >= 2, "{title}");
            for line in &lines {
                let width = line.chars().count() as f64 * TITLE_CHAR_WIDTH;
                assert!(width <= WIDTH - 40.0, "{line:?} is {width:.0} px wide, centred in {WIDTH}");
            }
            assert_eq!(lines.join(" "), escape(&long), "the whole title, broken at spaces");
            let (short_top, short_height) = frame(&render(&chart("short", kind)), kind);
            let (top, height) = frame(&svg, kind);
            let extra = (lines.len() - 1) as f64 * TITLE_LINE_HEIGHT;
            assert_eq!((top, height), (short_top + extra, short_height + extra), "{kind:?}: {svg}");
        }
    }

    #[test]
    fn the_data_uri_is_percent_encoded() {
        assert_eq!(data_uri("<a href=\"#\">µ</a>"), "data:image/svg+xml;charset=utf-8,%3Ca%20href=%22%23%22%3E%C2%B5%3C%2Fa%3E");
        assert!(data_uri("<svg width=\"1\"></svg>")
            .starts_with("data:image/svg+xml;charset=utf-8,%3Csvg%20xmlns=%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%20width"));
    }
}
