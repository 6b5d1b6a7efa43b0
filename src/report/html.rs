//! Self-contained HTML reports (no network: styles, plots and the flamegraph are inline) for a
//! trace and for a sweep. A small script checks on load that every plot rendered and records
//! errors, so a headless browser can tell a broken page from a good one.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::plot::{self, Series};
use super::Report;
use crate::model::{BpfHist, Phase, RawTrace, HIST_SUB_BITS};
use crate::sweep::SweepReport;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{t}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; max-width: 1400px; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th {{ background: #f3f3f3; }} td.k {{ text-align: left; font-family: monospace; }}
.plots {{ display: flex; flex-wrap: wrap; gap: 12px; }}
.note {{ color: #a33; }}
iframe {{ width: 100%; height: 720px; border: 1px solid #ccc; }}
</style>
<script>
window.addEventListener('error', function (e) {{ document.documentElement.setAttribute('data-error', String(e.message)); }});
</script></head>
<body>
<h1>{t}</h1>
{body}
<script>
window.addEventListener('load', function () {{
  var plots = document.querySelectorAll('svg.plot'), ok = 0;
  for (var i = 0; i < plots.length; i++) {{ var b = plots[i].getBBox(); if (b.width > 0 && b.height > 0) ok++; }}
  document.body.setAttribute('data-plots', ok + '/' + plots.length);
}});
</script>
</body></html>
"#,
        t = esc(title)
    )
}

fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(s, "<td{}>{}</td>", if i == 0 { " class=\"k\"" } else { "" }, esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// The configuration object of a report as key/value rows.
pub fn config_rows(config: &serde_json::Value) -> Vec<Vec<String>> {
    let mut flat = BTreeMap::new();
    flatten("", config, &mut flat);
    flat.into_iter().map(|(k, v)| vec![k, v]).collect()
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&key(k), x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().all(|x| x.get("name").is_some()) && !a.is_empty() => {
            for x in a {
                flatten(&key(x["name"].as_str().unwrap_or("?")), x, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// A flamegraph SVG, interactive (its own script runs in the frame), inline in the page.
fn flame_frame(svg: &str) -> String {
    format!("<iframe title=\"flamegraph\" srcdoc=\"{}\"></iframe>", esc(svg))
}

/// Histogram slots merged 8 at a time: 4 bars per power of two read better than 32.
fn hist_buckets(h: &BpfHist) -> Vec<(f64, f64, u64)> {
    let mut merged: BTreeMap<u32, u64> = BTreeMap::new();
    for &(slot, c) in &h.slots {
        *merged.entry(slot / 8).or_default() += c;
    }
    merged
        .into_iter()
        .map(|(g, c)| {
            let lo = crate::hist::bucket_range_with((g * 8) as usize, HIST_SUB_BITS).0;
            let (hi0, w) = crate::hist::bucket_range_with((g * 8 + 7) as usize, HIST_SUB_BITS);
            (lo as f64, (hi0 + w) as f64, c)
        })
        .collect()
}

/// report.html of one trace: the phase breakdown, each phase's latency histogram, the per-I/O
/// counts, the configuration and the on-CPU flamegraph.
pub fn trace_page(report: &Report, raw: &RawTrace, flame_svg: Option<&str>) -> String {
    let title = match &report.job {
        Some(j) => format!(
            "iopath trace: {} {} qd{} on {}",
            j.engine,
            j.rw,
            j.qd,
            report
                .target
                .as_ref()
                .map_or_else(|| j.target.path().display().to_string(), |t| t.path.display().to_string())
        ),
        None => match &report.process {
            Some(p) => format!("iopath trace: {} (pid {})", p.command, p.pid),
            None => "iopath trace".to_owned(),
        },
    };
    let sub = format!(
        "{:.0} IOPS, mean latency {:.1} us, kernel {}",
        report.iops,
        report.lat_ns.mean as f64 / 1000.0,
        report.system.kernel
    );
    let mut body = format!("<p>{}</p>", esc(&sub));
    let Some(t) = &report.trace else {
        body.push_str("<p>No trace: this report has no phase breakdown.</p>");
        return page(&title, &body);
    };
    let p = &t.phases;
    let named =
        [("submission", &p.submission), ("block", &p.block), ("device", &p.device), ("completion", &p.completion)];
    let parts: Vec<(String, Vec<f64>)> =
        named.iter().map(|(n, s)| (n.to_string(), vec![s.mean_ns as f64 / 1000.0])).collect();
    body.push_str("<h2>Where the time went</h2><div class=\"plots\">");
    body.push_str(&plot::stacked_bars("Mean per I/O by phase (us)", "us", &["this run".to_owned()], &parts));
    for (name, ph) in [
        ("submission", Phase::Submission),
        ("block", Phase::Block),
        ("device", Phase::Device),
        ("completion", Phase::Completion),
    ] {
        body.push_str(&plot::histogram(&format!("{name} latency"), "us (log)", &hist_buckets(&raw.phase(ph))));
    }
    body.push_str("</div>");
    let us = |v: u64| format!("{:.2}", v as f64 / 1000.0);
    let rows: Vec<Vec<String>> = named
        .iter()
        .map(|(n, s)| vec![n.to_string(), us(s.mean_ns), us(s.p50_ns), us(s.p99_ns), us(s.max_ns)])
        .collect();
    body.push_str(&table(&["phase", "mean us", "p50 us", "p99 us", "max us"], &rows));
    if let Some(ts) = &report.timeseries {
        body.push_str(&time_series_section(ts));
    }
    body.push_str("<h2>Per I/O</h2>");
    let mut counts: Vec<Vec<String>> = [
        ("irq", Some(&t.irq)),
        ("softirq block", t.softirq_block.as_ref()),
        ("iommu map", Some(&t.iommu_map)),
        ("iommu unmap", Some(&t.iommu_unmap)),
        ("dma map", Some(&t.dma_map)),
        ("dma unmap", Some(&t.dma_unmap)),
    ]
    .iter()
    .map(|(k, v)| match v {
        Some(v) => vec![k.to_string(), v.total.to_string(), format!("{:.3}", v.per_io)],
        // --lean hooks no softirq: unknown, not zero.
        None => vec![k.to_string(), "unknown (lean trace; --full)".into(), "unknown".into()],
    })
    .collect();
    let c = &report.ctx_switches;
    counts.push(vec![format!("ctx switches ({})", c.source), c.total.to_string(), format!("{:.3}", c.per_io)]);
    if let Some(d) = &report.run_delay {
        counts.push(vec![
            format!("run queue, us ({})", d.source),
            format!("{:.0}", d.total_ns as f64 / 1000.0),
            format!("{:.2}", d.per_io_ns / 1000.0),
        ]);
    }
    body.push_str(&table(&["event", "total", "per I/O"], &counts));
    if let Some(svg) = flame_svg {
        body.push_str("<h2>On-CPU flamegraph</h2>");
        body.push_str(&flame_frame(svg));
    }
    body.push_str("<h2>Configuration</h2>");
    let config = serde_json::to_value(&report.config).unwrap_or_default();
    body.push_str(&table(&["key", "value"], &config_rows(&config)));
    page(&title, &body)
}

/// How the run evolved: IOPS and latency per interval, on one time axis. The last interval is
/// drawn at its own length (the drain after the deadline is short).
fn time_series_section(ts: &crate::timeseries::TimeSeries) -> String {
    // A last interval much shorter than the rest is the drain after the deadline: left out, as
    // in the text report (its point is in the JSON with its length).
    let tail = ts.points.last().filter(|l| ts.points.len() > 1 && l.dur_ns < ts.interval_ns / 2);
    let points = &ts.points[..ts.points.len() - usize::from(tail.is_some())];
    let end = points.iter().map(|p| (p.t_ns + p.dur_ns) as f64 / 1e9).fold(0.0, f64::max);
    let mid = |p: &crate::timeseries::Point| (p.t_ns as f64 + p.dur_ns as f64 / 2.0) / 1e9;
    let iops = vec![("IOPS".to_owned(), points.iter().map(|p| (mid(p), Some(p.iops))).collect())];
    let lat = |name: &str, f: &dyn Fn(&crate::timeseries::Point) -> Option<u64>| {
        (name.to_owned(), points.iter().map(|p| (mid(p), f(p).map(|v| v as f64 / 1000.0))).collect())
    };
    // p50 and p99: one 10 ms stall as max would flatten both (max per interval is in the JSON).
    let lats = vec![lat("p50", &|p| p.lat_p50_ns), lat("p99", &|p| p.lat_p99_ns)];
    let step = ts.interval_ns as f64 / 1e9;
    let drain = tail.map_or(String::new(), |t| {
        format!(" The last {:.0} ms, the drain after the deadline, is left out.", t.dur_ns as f64 / 1e6)
    });
    format!(
        "<h2>Over time</h2><p>Per {step} s interval, from the generator's own clock reads; a gap is an interval in \
         which nothing completed.{drain} The JSON report's <code>timeseries</code> has every point, max latency \
         included.</p><div class=\"plots\">{}{}</div>",
        plot::time_lines("IOPS per interval", "IOPS", end, &iops),
        plot::time_lines("Latency per interval (us)", "us", end, &lats)
    )
}

/// The sweep's charts, each a standalone SVG: (file stem, svg).
pub fn sweep_charts(s: &SweepReport) -> Vec<(&'static str, String)> {
    type Y = (f64, Option<(f64, f64)>);
    let series = |f: &dyn Fn(&crate::sweep::Point) -> Y| -> Vec<Series> {
        s.variants
            .iter()
            .map(|v| Series {
                name: v.clone(),
                points: s
                    .points
                    .iter()
                    .filter(|p| &p.variant == v)
                    .map(|p| {
                        let (y, w) = f(p);
                        (p.qd as f64, y, w)
                    })
                    .collect(),
            })
            .collect()
    };
    let us = |s: &crate::sweep::Spread| (s.median / 1000.0, Some((s.min / 1000.0, s.max / 1000.0)));
    let mut out = vec![
        (
            "iops_vs_qd",
            plot::lines(
                "IOPS vs queue depth",
                "queue depth",
                "IOPS",
                &series(&|p| (p.iops.median, Some((p.iops.min, p.iops.max)))),
                false,
            ),
        ),
        ("p50_vs_qd", plot::lines("p50 latency (us)", "queue depth", "us", &series(&|p| us(&p.lat_p50_ns)), true)),
        ("p99_vs_qd", plot::lines("p99 latency (us)", "queue depth", "us", &series(&|p| us(&p.lat_p99_ns)), true)),
    ];
    if s.traced {
        // Only points whose phase table reconciled: a bar of a table that does not add up would
        // read as a measurement (the points table says which are missing).
        let split: Vec<_> = s.points.iter().filter_map(|p| p.phases_ns.map(|ph| (p, ph))).collect();
        let cats: Vec<String> = split.iter().map(|(p, _)| format!("{} qd{}", p.variant, p.qd)).collect();
        let parts: Vec<(String, Vec<f64>)> = ["submission", "block", "device", "completion"]
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), split.iter().map(|(_, ph)| ph[i] / 1000.0).collect()))
            .collect();
        if !split.is_empty() {
            out.push(("phases", plot::stacked_bars("Mean per I/O by phase (us), median run", "us", &cats, &parts)));
        }
        out.push((
            "irq_per_io",
            plot::lines(
                "Device IRQs per I/O",
                "queue depth",
                "IRQs per I/O",
                &series(&|p| (p.irq_per_io.unwrap_or(f64::NAN), None)),
                false,
            ),
        ));
        out.push((
            "ctx_per_io",
            plot::lines(
                "Context switches per I/O",
                "queue depth",
                "switches per I/O",
                &series(&|p| (p.ctx_per_io, None)),
                false,
            ),
        ));
    }
    out
}

/// report.html of a sweep: IOPS and latency over queue depth per engine (median run, min..max
/// whiskers), the phase breakdown per point, IRQs and context switches per I/O, every point,
/// and the configuration.
pub fn sweep_page(s: &SweepReport, config: Option<&serde_json::Value>) -> String {
    let mut body = format!(
        "<p>{} engine(s) x {} queue depth(s), {} run(s) per point in an order shuffled by seed {}; each point is its \
         median run (by IOPS), whiskers min..max.{}</p>",
        s.variants.len(),
        s.qds.len(),
        s.repeat,
        s.seed,
        if s.partial { " <span class=\"note\">Partial: some points have fewer runs.</span>" } else { "" }
    );
    body.push_str("<div class=\"plots\">");
    for (_, svg) in sweep_charts(s) {
        body.push_str(&svg);
    }
    body.push_str("</div><h2>Points</h2>");
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|p| {
            vec![
                format!("{} qd{}", p.variant, p.qd),
                p.runs.to_string(),
                format!("{:.0}", p.iops.median),
                format!("{:.0}..{:.0}", p.iops.min, p.iops.max),
                format!("{:.1}", p.lat_p50_ns.median / 1000.0),
                format!("{:.1}", p.lat_p99_ns.median / 1000.0),
                format!("{:.2}", p.cpu_per_io_ns.median / 1000.0),
                format!("{:.1}", p.inflight_avg.median),
                match (p.phases_ns, s.traced) {
                    (Some(ph), _) => ph.iter().map(|v| format!("{:.1}", v / 1000.0)).collect::<Vec<_>>().join(" / "),
                    (None, true) => "not reconciled".into(),
                    (None, false) => "not traced".into(),
                },
                p.irq_per_io.map_or("not traced".into(), |v| format!("{v:.3}")),
                format!("{:.3}", p.ctx_per_io),
            ]
        })
        .collect();
    body.push_str(&table(
        &[
            "point",
            "runs",
            "IOPS",
            "min..max",
            "p50 us",
            "p99 us",
            "CPU/IO us",
            "in flight",
            "sub/blk/dev/compl us",
            "IRQ/IO",
            "ctx/IO",
        ],
        &rows,
    ));
    if let Some(c) = config {
        body.push_str("<h2>Configuration (first run)</h2>");
        body.push_str(&table(&["key", "value"], &config_rows(c)));
    }
    page("iopath sweep", &body)
}

/// report.html of a comparison: the verdict, the phases before and after, the counts, the
/// configuration differences and the differential flamegraph.
pub fn compare_page(c: &crate::compare::Comparison, diff_svg: Option<&str>) -> String {
    let mut body = format!(
        "<p><b>before</b> {}<br><b>after</b> {}</p><p><b>Verdict:</b> {}</p>",
        esc(&c.before),
        esc(&c.after),
        esc(&c.verdict)
    );
    body.push_str("<div class=\"plots\">");
    if !c.phases.is_empty() {
        let parts: Vec<(String, Vec<f64>)> = c
            .phases
            .iter()
            .map(|p| (p.phase.to_string(), vec![p.before.mean / 1000.0, p.after.mean / 1000.0]))
            .collect();
        body.push_str(&plot::stacked_bars(
            "Mean per I/O by phase (us)",
            "us",
            &["before".to_owned(), "after".to_owned()],
            &parts,
        ));
    }
    body.push_str(&plot::stacked_bars(
        "IOPS",
        "IOPS",
        &["before".to_owned(), "after".to_owned()],
        &[("IOPS".to_owned(), vec![c.iops.before, c.iops.after])],
    ));
    body.push_str("</div>");
    if !c.phases.is_empty() {
        let rows: Vec<Vec<String>> = c
            .phases
            .iter()
            .chain(&c.nvme_phases)
            .map(|p| {
                vec![
                    p.phase.replace('_', " "),
                    format!("{:.2}", p.before.mean / 1000.0),
                    format!("{:.2}", p.after.mean / 1000.0),
                    format!("{:+.2}", p.delta_mean_ns / 1000.0),
                    format!("{:+.2}", p.delta_p99_ns / 1000.0),
                    p.judgement.to_string(),
                ]
            })
            .collect();
        body.push_str(&table(&["phase", "before us", "after us", "d mean us", "d p99 us", "judgement"], &rows));
    }
    body.push_str("<h2>Per I/O</h2>");
    let rows: Vec<Vec<String>> = c
        .per_io
        .iter()
        .map(|(k, v)| vec![k.replace('_', " "), format!("{:.3}", v.before), format!("{:.3}", v.after)])
        .collect();
    body.push_str(&table(&["event", "before", "after"], &rows));
    body.push_str("<h2>Configuration changes</h2>");
    if c.config_changes.is_empty() {
        body.push_str("<p>none</p>");
    } else {
        let rows: Vec<Vec<String>> =
            c.config_changes.iter().map(|x| vec![x.key.clone(), x.before.clone(), x.after.clone()]).collect();
        body.push_str(&table(&["key", "before", "after"], &rows));
    }
    if let Some(svg) = diff_svg {
        body.push_str("<h2>Differential on-CPU flamegraph (red grew, blue shrank)</h2>");
        body.push_str(&flame_frame(svg));
    }
    page("iopath compare", &body)
}
