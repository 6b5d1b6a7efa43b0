//! report.html of a sweep, and its charts as standalone SVGs.

use super::{card, config_groups, esc, field, page, table, warnings_html, Field};
use crate::report::plot::{self, Series, HALF, WIDE};
use crate::sweep::SweepReport;

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
                HALF,
            ),
        ),
        (
            "p50_vs_qd",
            plot::lines("p50 latency", "queue depth", "latency (us)", &series(&|p| us(&p.lat_p50_ns)), true, HALF),
        ),
        (
            "p99_vs_qd",
            plot::lines("p99 latency", "queue depth", "latency (us)", &series(&|p| us(&p.lat_p99_ns)), true, HALF),
        ),
    ];
    if s.traced {
        out.push((
            "irq_per_io",
            plot::lines(
                "Device IRQs per I/O",
                "queue depth",
                "IRQs per I/O",
                &series(&|p| (p.irq_per_io.unwrap_or(f64::NAN), None)),
                false,
                HALF,
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
                HALF,
            ),
        ));
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
            out.push((
                "phases",
                plot::hbars("Mean per I/O by phase, median run", "mean latency (us)", "point", &cats, &parts, WIDE),
            ));
        }
    }
    out
}

fn summary(s: &SweepReport, first: Option<&serde_json::Value>) -> String {
    let mut f: Vec<Field> = Vec::new();
    let job = first.map(|r| &r["job"]);
    let text = |v: Option<&serde_json::Value>| v.and_then(|x| x.as_str()).unwrap_or("unknown").to_owned();
    f.push(field(
        "grid",
        esc(&format!(
            "{} x queue depth {}",
            s.variants.join(", "),
            s.qds.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", ")
        )),
    ));
    f.push(field(
        "runs",
        format!(
            "{} per point, order shuffled by seed {}{}",
            s.repeat,
            s.seed,
            if s.partial { " <span class=\"bad\">(partial: stopped early)</span>" } else { "" }
        ),
    ));
    f.push(field(
        "job",
        esc(&format!(
            "{} {}",
            text(job.map(|j| &j["rw"])),
            job.and_then(|j| j["bs"].as_u64()).map_or("unknown".into(), crate::job::fmt_bytes)
        )),
    ));
    f.push(field("target", esc(&text(first.map(|r| &r["target"]["path"])))));
    f.push(field("kernel", esc(&text(first.map(|r| &r["system"]["kernel"])))));
    if let Some(best) = s.points.iter().max_by(|a, b| a.iops.median.total_cmp(&b.iops.median)) {
        f.push(Field {
            key: "most IOPS",
            value: format!(
                "<span class=\"big\" id=\"iops\">{:.0}</span> {} qd{} (p99 {:.1} us)",
                best.iops.median,
                esc(&best.variant),
                best.qd,
                best.lat_p99_ns.median / 1000.0
            ),
            class: "wide",
        });
    }
    let lowest = s.points.iter().min_by(|a, b| a.lat_p50_ns.median.total_cmp(&b.lat_p50_ns.median));
    if let Some(l) = lowest {
        f.push(field("lowest p50", esc(&format!("{:.1} us, {} qd{}", l.lat_p50_ns.median / 1000.0, l.variant, l.qd))));
    }
    let unreconciled = s.points.iter().filter(|p| s.traced && p.phases_ns.is_none()).count();
    f.push(field(
        "phases reconcile",
        match (s.traced, unreconciled) {
            (false, _) => "not traced".into(),
            (true, 0) => "<span class=\"ok\">yes</span>, at every point".into(),
            (true, n) => format!("<span class=\"bad\">NO</span> at {n} point(s): their phases are left out"),
        },
    ));
    let warnings: Vec<String> =
        s.failed.iter().map(|x| format!("{} qd{} run {} failed: {}", x.variant, x.qd, x.rep, x.error)).collect();
    f.push(Field { key: "warnings", value: warnings_html(&warnings), class: "full" });
    card(&f)
}

/// report.html of a sweep: the summary, IOPS and latency over queue depth per engine (median
/// run, min..max whiskers), IRQs and context switches per I/O, the phase breakdown per point,
/// every point, and the configuration of the first run.
pub fn sweep_page(s: &SweepReport, first: Option<&serde_json::Value>) -> String {
    let mut body = summary(s, first);
    body.push_str(
        "<h2>Queue depth</h2><p>Each point is its median run by IOPS; whiskers span the runs' min..max.</p><div class=\"plots\">",
    );
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
    if let Some(c) = first.map(|r| &r["config"]).filter(|c| !c.is_null()) {
        body.push_str("<h2>Configuration (first run)</h2>");
        body.push_str(&config_groups(c));
    }
    page("iopath sweep", &body)
}
