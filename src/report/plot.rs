//! The SVG charts of the HTML reports: lines over queue depth with min..max whiskers, lines over
//! time, horizontal stacked bars with their values written on them, and latency distributions as
//! small multiples on one shared log axis.
//!
//! Drawn here rather than by the `plotters` crate (0.3.7, svg_backend), which was tried on the
//! sweep's IOPS-vs-queue-depth chart (2 lines x 7 points with whiskers): 32.8 KiB of SVG against
//! 4.7 KiB from this file, decade ticks (1, 2, 3 .. 10, 20) on a queue-depth axis that only has
//! powers of two, tick labels "250000.0", and no per-point `<title>`, which is how a reader reads
//! an exact value off these pages (hover) and how the tests find a chart's data. Gaps for
//! unknown values, value labels inside bar segments and one shared x axis across small multiples
//! would each be custom drawing on top of it anyway. Every chart here shares one frame: the same
//! margins, tick rules (`ticks`, 1-2-5 on log axes), unit-bearing axis labels (classes `xlabel`
//! and `ylabel`, which the tests look for), the same palette and legend.

use std::fmt::Write;

/// Tableau 10: distinguishable, colour-blind-safe.
pub const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/// A chart's size in CSS pixels (it scales down with the page: width 100%, height auto).
#[derive(Clone, Copy, Debug)]
pub struct Size {
    pub w: f64,
    pub h: f64,
}

/// Half the report's width: two charts side by side.
pub const HALF: Size = Size { w: 556.0, h: 300.0 };
/// The report's full width (1120 px of content): time plots, so their x axes line up.
pub const WIDE: Size = Size { w: 1120.0, h: 220.0 };

const L: f64 = 70.0;
const R: f64 = 130.0;
const T: f64 = 34.0;
const B: f64 = 44.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A number as an axis label: 1.2k, 3.4M, 0.25.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A chart being drawn: its SVG so far and its plot area.
struct Chart {
    s: String,
    size: Size,
    left: f64,
}

impl Chart {
    fn open(title: &str, class: &str, size: Size) -> Chart {
        Chart::with_left(title, class, size, L)
    }

    fn with_left(title: &str, class: &str, size: Size, left: f64) -> Chart {
        let Size { w, h } = size;
        let mut s = format!(
            "<svg class=\"plot {class}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" \
             height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">"
        );
        let _ = write!(
            s,
            "<text class=\"title\" x=\"{left}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>",
            esc(title)
        );
        Chart { s, size, left }
    }

    fn x0(&self) -> f64 {
        self.left
    }
    fn x1(&self) -> f64 {
        self.size.w - R
    }
    fn y0(&self) -> f64 {
        self.size.h - B
    }
    fn y1(&self) -> f64 {
        T
    }

    /// The axes and their labels (a label names the unit).
    fn axes(&mut self, x_label: &str, y_label: &str) {
        let (x0, x1, y0, y1) = (self.x0(), self.x1(), self.y0(), self.y1());
        let _ = write!(
            self.s,
            "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#333\"/><line x1=\"{x0}\" y1=\"{y1}\" x2=\"{x0}\" y2=\"{y0}\" stroke=\"#333\"/>"
        );
        let _ = write!(
            self.s,
            "<text class=\"xlabel\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            (x0 + x1) / 2.0,
            self.size.h - 8.0,
            esc(x_label)
        );
        let _ = write!(
            self.s,
            "<text class=\"ylabel\" transform=\"translate(14,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            (y1 + y0) / 2.0,
            esc(y_label)
        );
    }

    /// A horizontal grid line at height `y`, labelled with its value.
    fn grid_y(&mut self, y: f64, label: &str) {
        let (x0, x1) = (self.x0(), self.x1());
        let _ = write!(
            self.s,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            esc(label)
        );
    }

    /// A tick label under the x axis (and a faint vertical grid line).
    fn tick_x(&mut self, x: f64, label: &str) {
        let (y0, y1) = (self.y0(), self.y1());
        let _ = write!(
            self.s,
            "<line x1=\"{x:.1}\" y1=\"{y1}\" x2=\"{x:.1}\" y2=\"{y0}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            y0 + 16.0,
            esc(label)
        );
    }

    fn legend(&mut self, names: &[String]) {
        let x = self.x1() + 12.0;
        for (i, n) in names.iter().enumerate() {
            let y = T + 10.0 + i as f64 * 18.0;
            let _ = write!(
                self.s,
                "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text class=\"legend\" x=\"{}\" y=\"{y}\">{}</text>",
                y - 10.0,
                PALETTE[i % PALETTE.len()],
                x + 18.0,
                esc(n)
            );
        }
    }

    /// A legend of line samples: each line's name, palette colour and dash, as drawn.
    fn line_legend(&mut self, lines: &[(&str, usize, bool)]) {
        let x = self.x1() + 8.0;
        for (i, &(name, color, dashed)) in lines.iter().enumerate() {
            let y = T + 10.0 + i as f64 * 16.0;
            let col = PALETTE[color % PALETTE.len()];
            let dash = if dashed { " stroke-dasharray=\"6,4\"" } else { "" };
            let _ = write!(
                self.s,
                "<line x1=\"{x}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"{col}\" stroke-width=\"2\"{dash}/><text class=\"legend\" x=\"{}\" y=\"{y}\">{}</text>",
                y - 4.0,
                x + 18.0,
                y - 4.0,
                x + 22.0,
                esc(name)
            );
        }
    }

    fn no_data(mut self, what: &str) -> String {
        let _ =
            write!(self.s, "<text x=\"{}\" y=\"{}\">{}</text></svg>", self.x0() + 30.0, self.size.h / 2.0, esc(what));
        self.s
    }

    fn close(mut self) -> String {
        self.s.push_str("</svg>");
        self.s
    }
}

/// Nice round ticks over [lo, hi].
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= n as f64).unwrap_or(mag * 10.0);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(t);
        t += step;
    }
    out
}

/// Tick labels of one linear axis with the same decimals (0.50, 1.00, 1.50; not 0.50, 1.0, 1.5):
/// as many as the step needs, and `short` (1.2k) once the step is whole.
fn tick_labels(t: &[f64]) -> Vec<String> {
    let step = if t.len() > 1 { t[1] - t[0] } else { 1.0 };
    if step >= 1.0 {
        return t.iter().map(|&v| short(v)).collect();
    }
    let d =
        (0..4).find(|&d| ((step * 10f64.powi(d)).round() - step * 10f64.powi(d)).abs() < 1e-6).unwrap_or(4) as usize;
    t.iter().map(|v| format!("{v:.d$}")).collect()
}

/// 1-2-5 ticks per decade over [10^lo, 10^hi] (log10 bounds); round linear ticks when fewer
/// than two fall inside (a latency axis often spans less than a decade).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let t: Vec<f64> = (lo.floor() as i32..=hi.ceil() as i32)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|v| v.log10() >= lo - 1e-9 && v.log10() <= hi + 1e-9)
        .collect();
    if t.len() < 2 {
        ticks(10f64.powf(lo), 10f64.powf(hi), 4)
    } else {
        t
    }
}

/// A point of a line: x, y, and an optional min..max whisker.
pub type XyW = (f64, f64, Option<(f64, f64)>);

/// One line of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<XyW>,
    /// Its palette colour (None: by its place in the list) and whether it is dashed (the
    /// "before" side of two overlaid studies).
    pub color: Option<usize>,
    pub dashed: bool,
}

impl Series {
    pub fn new(name: String, points: Vec<XyW>) -> Series {
        Series { name, points, color: None, dashed: false }
    }
}

/// A log2 x axis of a sweep: its label, how a point names its x in a hover title ("qd" gives
/// "qd32", "bs=" gives "bs=64K"), and how a tick shows a value.
#[derive(Clone, Copy)]
pub struct XAxis<'a> {
    pub label: &'a str,
    pub prefix: &'a str,
    pub fmt: fn(f64) -> String,
}

/// Queue depths (and other counts) on x.
pub const QD: XAxis<'static> = XAxis { label: "queue depth", prefix: "qd", fmt: count };

/// A count as a tick: 1, 32, 1024.
pub fn count(v: f64) -> String {
    format!("{v:.0}")
}

/// Lines over a log2 x axis (queue depths, block sizes), linear or log10 y, with min..max whiskers.
pub fn lines(title: &str, x: XAxis, y_label: &str, series: &[Series], log_y: bool, size: Size) -> String {
    let mut c = Chart::open(title, "lines", size);
    let pts = series.iter().flat_map(|x| &x.points);
    let xs: Vec<f64> = pts.clone().map(|p| p.0.max(1.0).log2()).collect();
    let ys: Vec<f64> =
        pts.flat_map(|p| [Some(p.1), p.2.map(|w| w.0), p.2.map(|w| w.1)]).flatten().filter(|v| v.is_finite()).collect();
    if xs.is_empty() || ys.is_empty() {
        return c.no_data("no data");
    }
    let (x0, x1) = (xs.iter().copied().fold(f64::MAX, f64::min), xs.iter().copied().fold(f64::MIN, f64::max));
    let fy = |v: f64| if log_y { v.max(1e-9).log10() } else { v };
    let (mut y0, mut y1) =
        (ys.iter().copied().map(fy).fold(f64::MAX, f64::min), ys.iter().copied().map(fy).fold(f64::MIN, f64::max));
    if !log_y {
        y0 = 0.0;
    }
    if y1 <= y0 {
        y1 = y0 + if log_y { 0.3 } else { 1.0 };
    }
    let pad = (y1 - y0) * 0.05;
    y1 += pad;
    if log_y {
        y0 -= pad;
    }
    let (ax0, ax1, ay0, ay1) = (c.x0(), c.x1(), c.y0(), c.y1());
    let px = |x: f64| ax0 + if x1 > x0 { (x.max(1.0).log2() - x0) / (x1 - x0) } else { 0.5 } * (ax1 - ax0);
    let py = |y: f64| ay0 - (fy(y) - y0) / (y1 - y0) * (ay0 - ay1);
    c.axes(x.label, y_label);
    // A tick at every power of two, every other one past 12 of them (4K..32M is 14).
    let every = if x1 - x0 > 12.0 { 2 } else { 1 };
    for t in ((x0.floor() as i64)..=(x1.ceil() as i64)).step_by(every) {
        let v = 2f64.powi(t as i32);
        if v.log2() >= x0 - 1e-9 && v.log2() <= x1 + 1e-9 {
            c.tick_x(px(v), &(x.fmt)(v));
        }
    }
    let yt = if log_y { log_ticks(y0, y1) } else { ticks(y0, y1, 5) };
    let labels = if log_y { yt.iter().map(|&v| short(v)).collect() } else { tick_labels(&yt) };
    for (t, label) in yt.iter().zip(labels) {
        c.grid_y(py(*t), &label);
    }
    for (i, ser) in series.iter().enumerate() {
        let col = PALETTE[ser.color.unwrap_or(i) % PALETTE.len()];
        let path: Vec<String> =
            ser.points.iter().filter(|p| p.1.is_finite()).map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1))).collect();
        let dash = if ser.dashed { " stroke-dasharray=\"6,4\"" } else { "" };
        let _ = write!(
            c.s,
            "<polyline fill=\"none\" stroke=\"{col}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            path.join(" ")
        );
        for p in ser.points.iter().filter(|p| p.1.is_finite()) {
            let _ = write!(
                c.s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{col}\"><title>{} {}{}: {}</title></circle>",
                px(p.0),
                py(p.1),
                esc(&ser.name),
                x.prefix,
                esc(&(x.fmt)(p.0)),
                short(p.1)
            );
            if let Some((lo, hi)) = p.2 {
                let x = px(p.0);
                let (a, b) = (py(lo), py(hi));
                let _ = write!(
                    c.s,
                    "<path d=\"M{x:.1},{a:.1}V{b:.1}M{:.1},{a:.1}H{:.1}M{:.1},{b:.1}H{:.1}\" stroke=\"{col}\"/>",
                    x - 4.0,
                    x + 4.0,
                    x - 4.0,
                    x + 4.0
                );
            }
        }
    }
    let legend: Vec<(&str, usize, bool)> =
        series.iter().enumerate().map(|(i, s)| (s.name.as_str(), s.color.unwrap_or(i), s.dashed)).collect();
    c.line_legend(&legend);
    c.close()
}

/// One line over time: its name and (seconds, value; None where unknown).
pub type TimeSeries = (String, Vec<(f64, Option<f64>)>);

/// Lines over time: a linear x axis in seconds from the run's start, y from 0. A point with no
/// value (nothing completed in that interval) breaks its line: unknown is drawn as a gap, never as
/// a zero. Every time chart of a page has the same size and margins, so their x axes line up.
pub fn time_lines(title: &str, y_label: &str, x_end: f64, series: &[TimeSeries], size: Size) -> String {
    let styled: Vec<(&TimeSeries, usize, bool)> = series.iter().enumerate().map(|(i, s)| (s, i, false)).collect();
    time_lines_styled(title, y_label, x_end, &styled, size)
}

/// [`time_lines`] with each line's palette colour and dash chosen: two runs overlaid, the one
/// before dashed, the same quantity the same colour.
pub fn time_lines_styled(
    title: &str,
    y_label: &str,
    x_end: f64,
    series: &[(&TimeSeries, usize, bool)],
    size: Size,
) -> String {
    let mut c = Chart::open(title, "lines time", size);
    let ys: Vec<f64> =
        series.iter().flat_map(|x| x.0 .1.iter().filter_map(|p| p.1)).filter(|v| v.is_finite()).collect();
    if ys.is_empty() || x_end <= 0.0 {
        return c.no_data("no data");
    }
    let y1 = ys.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.05;
    let (ax0, ax1, ay0, ay1) = (c.x0(), c.x1(), c.y0(), c.y1());
    let px = |x: f64| ax0 + x / x_end * (ax1 - ax0);
    let py = |y: f64| ay0 - y / y1 * (ay0 - ay1);
    c.axes("time (s)", y_label);
    let xt = ticks(0.0, x_end, 10);
    for (t, label) in xt.iter().zip(tick_labels(&xt)) {
        c.tick_x(px(*t), &label);
    }
    let yt = ticks(0.0, y1, 4);
    for (t, label) in yt.iter().zip(tick_labels(&yt)) {
        c.grid_y(py(*t), &label);
    }
    for &((name, pts), color, dashed) in series {
        let col = PALETTE[color % PALETTE.len()];
        let dash = if dashed { " stroke-dasharray=\"6,4\"" } else { "" };
        for run in pts.split(|p| p.1.is_none()).filter(|r| !r.is_empty()) {
            let path: Vec<String> =
                run.iter().map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1.unwrap_or(0.0)))).collect();
            let _ = write!(
                c.s,
                "<polyline fill=\"none\" stroke=\"{col}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
                path.join(" ")
            );
            for p in run {
                let _ = write!(
                    c.s,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{col}\"><title>{} at {:.2} s: {}</title></circle>",
                    px(p.0),
                    py(p.1.unwrap_or(0.0)),
                    esc(name),
                    p.0,
                    short(p.1.unwrap_or(0.0))
                );
            }
        }
    }
    let legend: Vec<(&str, usize, bool)> = series.iter().map(|s| (s.0 .0.as_str(), s.1, s.2)).collect();
    c.line_legend(&legend);
    c.close()
}

/// Horizontal stacked bars, one per category, one segment per named part, each segment's value
/// written on it where it fits (always in its hover title) and the bar's total at its end.
pub fn hbars(
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    parts: &[(String, Vec<f64>)],
    size: Size,
) -> String {
    let longest = categories.iter().map(|c| c.chars().count()).max().unwrap_or(0) as f64;
    let left = (longest * 6.6 + 28.0).max(L);
    let n = categories.len().max(1) as f64;
    // Bars 26 px high with 10 px between them: the height follows the categories.
    let size = Size { w: size.w, h: T + B + n * 36.0 };
    let mut c = Chart::with_left(title, "bars", size, left);
    let totals: Vec<f64> =
        (0..categories.len()).map(|i| parts.iter().map(|p| p.1.get(i).copied().unwrap_or(0.0)).sum()).collect();
    let xmax = totals.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.08;
    let (ax0, ax1, ay1) = (c.x0(), c.x1(), c.y1());
    let px = |v: f64| ax0 + v / xmax * (ax1 - ax0);
    c.axes(x_label, y_label);
    let xt = ticks(0.0, xmax, 8);
    for (t, label) in xt.iter().zip(tick_labels(&xt)) {
        c.tick_x(px(*t), &label);
    }
    for (i, cat) in categories.iter().enumerate() {
        let y = ay1 + 5.0 + i as f64 * 36.0;
        let _ = write!(c.s, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", ax0 - 6.0, y + 17.0, esc(cat));
        let mut x = 0.0;
        for (k, (name, vals)) in parts.iter().enumerate() {
            let v = vals.get(i).copied().unwrap_or(0.0);
            let (xa, xb) = (px(x), px(x + v));
            x += v;
            let _ = write!(
                c.s,
                "<rect x=\"{xa:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"26\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                (xb - xa).max(0.0),
                PALETTE[k % PALETTE.len()],
                esc(cat),
                esc(name),
                short(v)
            );
            let label = short(v);
            if xb - xa > label.len() as f64 * 6.6 + 6.0 {
                let _ = write!(
                    c.s,
                    "<text class=\"value\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#fff\">{label}</text>",
                    (xa + xb) / 2.0,
                    y + 17.0
                );
            }
        }
        let _ = write!(
            c.s,
            "<text class=\"value total\" x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
            px(x) + 4.0,
            y + 17.0,
            short(x)
        );
    }
    c.legend(&parts.iter().map(|p| p.0.clone()).collect::<Vec<_>>());
    c.close()
}

/// One distribution of the small multiples: its name, its buckets (low, high, count) in the
/// axis' unit, and where its p50 and p99 fall.
pub struct Dist {
    pub name: String,
    pub buckets: Vec<(f64, f64, u64)>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// Its palette colour (None: by its row): a phase keeps its colour in both runs compared.
    pub color: Option<usize>,
}

/// Distributions as small multiples, one row each, on one shared log x axis: the same value is
/// at the same place in every row, so phases can be read against each other. Each row is scaled
/// to its own tallest bucket (a share of that row's I/Os), with its p50 and p99 marked.
pub fn distributions(title: &str, x_label: &str, rows: &[Dist], size: Size) -> String {
    let mut c = Chart::open(title, "dist", size);
    let all = rows.iter().flat_map(|r| r.buckets.iter().filter(|b| b.2 > 0 && b.1 > 0.0));
    let lo = all.clone().map(|b| b.0.max(1e-3).log10()).fold(f64::MAX, f64::min);
    let hi = all.map(|b| b.1.max(1e-3).log10()).fold(f64::MIN, f64::max);
    if rows.is_empty() || lo > hi {
        return c.no_data("no samples");
    }
    let (lo, hi) = (lo, hi.max(lo + 0.3));
    let (ax0, ax1, ay0, ay1) = (c.x0(), c.x1(), c.y0(), c.y1());
    let px = |v: f64| ax0 + (v.max(1e-3).log10() - lo) / (hi - lo) * (ax1 - ax0);
    c.axes(x_label, "share of each row's I/Os");
    for t in log_ticks(lo, hi) {
        c.tick_x(px(t), &short(t));
    }
    let row_h = (ay0 - ay1) / rows.len() as f64;
    for (i, r) in rows.iter().enumerate() {
        let base = ay1 + row_h * (i as f64 + 1.0);
        let col = PALETTE[r.color.unwrap_or(i) % PALETTE.len()];
        let total: u64 = r.buckets.iter().map(|b| b.2).sum();
        let top = r.buckets.iter().map(|b| b.2).max().unwrap_or(0).max(1) as f64;
        let _ = write!(
            c.s,
            "<line x1=\"{ax0}\" y1=\"{base:.1}\" x2=\"{ax1}\" y2=\"{base:.1}\" stroke=\"#ccc\"/><text class=\"row\" x=\"{}\" y=\"{:.1}\" fill=\"{col}\" font-weight=\"bold\">{}</text>",
            ax1 + 8.0,
            base - row_h / 2.0 + 4.0,
            esc(&r.name)
        );
        for b in r.buckets.iter().filter(|b| b.2 > 0 && b.1 > 0.0) {
            let h = b.2 as f64 / top * (row_h - 6.0);
            let (xa, xb) = (px(b.0), px(b.1));
            let _ = write!(
                c.s,
                "<rect x=\"{xa:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{col}\"><title>{} {}..{}: {} I/Os ({:.1}%)</title></rect>",
                base - h,
                (xb - xa).max(1.0),
                esc(&r.name),
                short(b.0),
                short(b.1),
                b.2,
                b.2 as f64 * 100.0 / total.max(1) as f64
            );
        }
        // p50's label to the left of its mark, p99's to the right: close marks do not overlap.
        for (name, v, dx, anchor) in [("p50", r.p50, -3.0, "end"), ("p99", r.p99, 3.0, "start")] {
            if let Some(v) = v {
                let x = px(v);
                let _ = write!(
                    c.s,
                    "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{base:.1}\" stroke=\"#222\" stroke-dasharray=\"3,2\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"{anchor}\">{name} {}</text>",
                    base - row_h + 4.0,
                    x + dx,
                    base - row_h + 13.0,
                    short(v)
                );
            }
        }
    }
    c.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_their_data() {
        let l = lines(
            "IOPS",
            QD,
            "IOPS",
            &[Series::new("uring".into(), vec![(1.0, 10_000.0, Some((9000.0, 11_000.0))), (32.0, 200_000.0, None)])],
            false,
            HALF,
        );
        assert!(l.starts_with("<svg") && l.ends_with("</svg>"));
        assert!(l.contains("<polyline") && l.contains("uring qd32: 200k"));
        assert!(l.contains("class=\"xlabel\"") && l.contains("class=\"ylabel\""));
        let b = hbars("phases", "us", "run", &["this run".into()], &[("device".into(), vec![20.0])], WIDE);
        assert!(b.contains("this run device: 20") && b.contains("class=\"value\""), "{b}");
        let d = distributions(
            "phases",
            "latency (us)",
            &[Dist { name: "device".into(), buckets: vec![(1.0, 2.0, 5)], p50: Some(1.5), p99: None, color: None }],
            WIDE,
        );
        assert!(d.contains("device 1.0..2.0: 5 I/Os (100.0%)") && d.contains("p50 1.5"), "{d}");
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(log_ticks(0.0, 1.0), vec![1.0, 2.0, 5.0, 10.0]);
        assert_eq!(tick_labels(&[0.0, 0.25, 0.5]), ["0.00", "0.25", "0.50"]);
        assert_eq!(tick_labels(&[0.0, 0.5, 1.0]), ["0.0", "0.5", "1.0"]);
        assert_eq!(tick_labels(&[0.0, 5000.0]), ["0", "5.0k"]);
    }

    #[test]
    fn an_unknown_value_is_a_gap_not_a_zero() {
        let t = time_lines(
            "IOPS",
            "IOPS",
            3.0,
            &[("IOPS".into(), vec![(0.5, Some(10.0)), (1.5, None), (2.5, Some(12.0))])],
            WIDE,
        );
        assert_eq!(t.matches("<polyline").count(), 2, "two runs around the gap");
        assert!(!t.contains(": 0</title>"));
    }
}
