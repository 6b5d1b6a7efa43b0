//! Small SVG charts for the HTML reports, drawn by hand so the page needs nothing but itself:
//! lines with min/max whiskers over a log2 axis, stacked bars, histograms.

use std::fmt::Write;

/// Tableau 10: distinguishable, colour-blind-safe.
pub const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

const W: f64 = 640.0;
const H: f64 = 320.0;
const L: f64 = 70.0;
const R: f64 = 150.0;
const T: f64 = 36.0;
const B: f64 = 48.0;

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
    } else {
        format!("{v:.2}")
    }
}

fn open(title: &str, class: &str) -> String {
    let mut s = format!(
        "<svg class=\"plot {class}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" \
         height=\"{H}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = write!(s, "<text x=\"{}\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}</text>", L, esc(title));
    s
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

fn axes(s: &mut String, x_label: &str, y_label: &str) {
    let _ = write!(
        s,
        "<line x1=\"{L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{}\" stroke=\"#333\"/>",
        H - B,
        W - R,
        H - B,
        H - B
    );
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        (L + W - R) / 2.0,
        H - 10.0,
        esc(x_label)
    );
    let _ = write!(
        s,
        "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (T + H - B) / 2.0,
        esc(y_label)
    );
}

/// A horizontal grid line at height `y`, labelled with its value.
fn grid_line(s: &mut String, y: f64, value: f64) {
    let _ = write!(
        s,
        "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        W - R,
        L - 6.0,
        y + 4.0,
        short(value)
    );
}

fn legend(s: &mut String, names: &[String]) {
    for (i, n) in names.iter().enumerate() {
        let y = T + 10.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            W - R + 12.0,
            y - 10.0,
            PALETTE[i % PALETTE.len()],
            W - R + 30.0,
            y,
            esc(n)
        );
    }
}

/// A point of a line: x, y, and an optional min..max whisker.
pub type XyW = (f64, f64, Option<(f64, f64)>);

/// One line of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<XyW>,
}

/// Lines over a log2 x axis (queue depths), linear or log10 y.
pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[Series], log_y: bool) -> String {
    let mut s = open(title, "lines");
    let pts = series.iter().flat_map(|x| &x.points);
    let xs: Vec<f64> = pts.clone().map(|p| p.0.max(1.0).log2()).collect();
    let ys: Vec<f64> =
        pts.flat_map(|p| [Some(p.1), p.2.map(|w| w.0), p.2.map(|w| w.1)]).flatten().filter(|v| v.is_finite()).collect();
    if xs.is_empty() || ys.is_empty() {
        s.push_str("<text x=\"100\" y=\"150\">no data</text></svg>");
        return s;
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
    let px = |x: f64| L + if x1 > x0 { (x.max(1.0).log2() - x0) / (x1 - x0) } else { 0.5 } * (W - L - R);
    let py = |y: f64| H - B - (fy(y) - y0) / (y1 - y0) * (H - B - T);
    axes(&mut s, x_label, y_label);
    for t in (x0.floor() as i64)..=(x1.ceil() as i64) {
        let x = 2f64.powi(t as i32);
        if x.log2() < x0 - 1e-9 || x.log2() > x1 + 1e-9 {
            continue;
        }
        let _ = write!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{x:.0}</text>", px(x), H - B + 16.0);
    }
    let yt: Vec<f64> = if log_y {
        // 1-2-5 per decade: a latency axis often spans less than one.
        (y0.floor() as i32..=y1.ceil() as i32)
            .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .filter(|v| fy(*v) >= y0 && fy(*v) <= y1)
            .collect::<Vec<f64>>()
    } else {
        ticks(y0, y1, 5)
    };
    // A narrow log range may hold fewer than two 1-2-5 ticks: then round ticks in value space.
    let yt = if log_y && yt.len() < 2 { ticks(10f64.powf(y0), 10f64.powf(y1), 4) } else { yt };
    for t in yt {
        grid_line(&mut s, py(t), t);
    }
    for (i, ser) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = ser.points.iter().map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1))).collect();
        let _ = write!(s, "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>", path.join(" "));
        for p in &ser.points {
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"><title>{} qd{}: {}</title></circle>",
                px(p.0),
                py(p.1),
                esc(&ser.name),
                p.0,
                short(p.1)
            );
            if let Some((lo, hi)) = p.2 {
                let x = px(p.0);
                let _ = write!(
                    s,
                    "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>",
                    py(lo),
                    py(hi),
                    x - 4.0,
                    py(lo),
                    x + 4.0,
                    py(lo),
                    x - 4.0,
                    py(hi),
                    x + 4.0,
                    py(hi)
                );
            }
        }
    }
    legend(&mut s, &series.iter().map(|x| x.name.clone()).collect::<Vec<_>>());
    s.push_str("</svg>");
    s
}

/// One line over time: its name and (seconds, value; None where unknown).
pub type TimeSeries = (String, Vec<(f64, Option<f64>)>);

/// Lines over time: a linear x axis in seconds from the run's start, y from 0. A point with no
/// value (nothing completed in that interval) breaks its line: unknown is drawn as a gap, never as
/// a zero. Every time chart of a page has the same frame, so their x axes line up.
pub fn time_lines(title: &str, y_label: &str, x_end: f64, series: &[TimeSeries]) -> String {
    let mut s = open(title, "lines time");
    let ys: Vec<f64> = series.iter().flat_map(|x| x.1.iter().filter_map(|p| p.1)).filter(|v| v.is_finite()).collect();
    if ys.is_empty() || x_end <= 0.0 {
        s.push_str("<text x=\"100\" y=\"150\">no data</text></svg>");
        return s;
    }
    let y1 = ys.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.05;
    let px = |x: f64| L + x / x_end * (W - L - R);
    let py = |y: f64| H - B - y / y1 * (H - B - T);
    axes(&mut s, "time (s)", y_label);
    for t in ticks(0.0, x_end, 6) {
        let _ = write!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>", px(t), H - B + 16.0, short(t));
    }
    for t in ticks(0.0, y1, 5) {
        grid_line(&mut s, py(t), t);
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        for run in pts.split(|p| p.1.is_none()).filter(|r| !r.is_empty()) {
            let path: Vec<String> =
                run.iter().map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1.unwrap_or(0.0)))).collect();
            let _ =
                write!(s, "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>", path.join(" "));
            for p in run {
                let _ = write!(
                    s,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{c}\"><title>{} at {:.2} s: {}</title></circle>",
                    px(p.0),
                    py(p.1.unwrap_or(0.0)),
                    esc(name),
                    p.0,
                    short(p.1.unwrap_or(0.0))
                );
            }
        }
    }
    legend(&mut s, &series.iter().map(|x| x.0.clone()).collect::<Vec<_>>());
    s.push_str("</svg>");
    s
}

/// Stacked bars: one bar per category, one segment per named part.
pub fn stacked_bars(title: &str, y_label: &str, categories: &[String], parts: &[(String, Vec<f64>)]) -> String {
    let mut s = open(title, "bars");
    let totals: Vec<f64> =
        (0..categories.len()).map(|i| parts.iter().map(|p| p.1.get(i).copied().unwrap_or(0.0)).sum()).collect();
    let ymax = totals.iter().copied().fold(0.0, f64::max).max(1e-9) * 1.05;
    axes(&mut s, "", y_label);
    for t in ticks(0.0, ymax, 5) {
        grid_line(&mut s, H - B - t / ymax * (H - B - T), t);
    }
    let n = categories.len().max(1) as f64;
    let slot = (W - L - R) / n;
    let bw = (slot * 0.7).min(60.0);
    for (i, cat) in categories.iter().enumerate() {
        let x = L + slot * (i as f64 + 0.5) - bw / 2.0;
        let mut y = H - B;
        for (k, (name, vals)) in parts.iter().enumerate() {
            let v = vals.get(i).copied().unwrap_or(0.0);
            let h = v / ymax * (H - B - T);
            y -= h;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                PALETTE[k % PALETTE.len()],
                esc(cat),
                esc(name),
                short(v)
            );
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"end\" transform=\"rotate(-30 {:.1} {})\">{}</text>",
            x + bw / 2.0,
            H - B + 14.0,
            x + bw / 2.0,
            H - B + 14.0,
            esc(cat)
        );
    }
    legend(&mut s, &parts.iter().map(|p| p.0.clone()).collect::<Vec<_>>());
    s.push_str("</svg>");
    s
}

/// A histogram of (bucket low, bucket high, count) over a log x axis.
pub fn histogram(title: &str, x_label: &str, buckets: &[(f64, f64, u64)]) -> String {
    let mut s = open(title, "hist");
    let b: Vec<&(f64, f64, u64)> = buckets.iter().filter(|b| b.2 > 0 && b.1 > 0.0).collect();
    if b.is_empty() {
        s.push_str("<text x=\"100\" y=\"150\">no samples</text></svg>");
        return s;
    }
    let x0 = b.iter().map(|b| b.0.max(1.0).log10()).fold(f64::MAX, f64::min);
    let x1 = b.iter().map(|b| b.1.max(1.0).log10()).fold(f64::MIN, f64::max).max(x0 + 0.1);
    let cmax = b.iter().map(|b| b.2).max().unwrap_or(1) as f64;
    let px = |v: f64| L + (v.max(1.0).log10() - x0) / (x1 - x0) * (W - L - R);
    axes(&mut s, x_label, "I/Os");
    for e in (x0.floor() as i32)..=(x1.ceil() as i32) {
        let v = 10f64.powi(e);
        if v.log10() < x0 || v.log10() > x1 {
            continue;
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            px(v),
            H - B + 16.0,
            short(v / 1000.0)
        );
    }
    for bk in b {
        let h = bk.2 as f64 / cmax * (H - B - T);
        let (xa, xb) = (px(bk.0), px(bk.1));
        let _ = write!(
            s,
            "<rect x=\"{xa:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}..{} ns: {}</title></rect>",
            H - B - h,
            (xb - xa).max(1.0),
            PALETTE[0],
            bk.0,
            bk.1,
            bk.2
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_their_data() {
        let l = lines(
            "IOPS",
            "queue depth",
            "IOPS",
            &[Series {
                name: "uring".into(),
                points: vec![(1.0, 10_000.0, Some((9000.0, 11_000.0))), (32.0, 200_000.0, None)],
            }],
            false,
        );
        assert!(l.starts_with("<svg") && l.ends_with("</svg>"));
        assert!(l.contains("<polyline") && l.contains("uring qd32: 200k"));
        let b = stacked_bars("phases", "us", &["qd1".into()], &[("device".into(), vec![20.0])]);
        assert!(b.contains("qd1 device: 20"));
        let h = histogram("device", "us", &[(1000.0, 2000.0, 5)]);
        assert!(h.contains("1000..2000 ns: 5"));
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    }
}
