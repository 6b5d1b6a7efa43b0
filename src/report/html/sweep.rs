//! report.html of a sweep, and its charts as standalone SVGs.

use std::fmt::Write;

use super::parts::{card, config_groups, esc, field, page, table, warnings_html, Field};
use crate::report::plot::{self, Series, XAxis, HALF, WIDE};
use crate::sweep::SweepReport;

/// The x axis of a sweep's charts: its swept numeric axis.
pub fn x_axis(name: &str) -> XAxis<'static> {
    fn bytes(v: f64) -> String {
        crate::job::fmt_bytes(v as u64)
    }
    match name {
        "bs" => XAxis { label: "block size", prefix: "bs=", fmt: bytes },
        "jobs" => XAxis { label: "jobs (threads)", prefix: "jobs=", fmt: plot::count },
        "batch_submit" => XAxis { label: "I/Os per submit call", prefix: "batch-submit=", fmt: plot::count },
        "batch_complete" => XAxis { label: "completions per reap", prefix: "batch-complete=", fmt: plot::count },
        _ => plot::QD,
    }
}

/// "p99", "p99.9": a percentile as a name.
pub fn pct_name(p: f64) -> String {
    format!("p{}", if p.fract() == 0.0 { format!("{p:.0}") } else { format!("{p}") })
}

/// The sweep's charts, each a standalone SVG: (file stem, svg). x is the swept numeric axis;
/// one line per combination of the other swept axes (engine, target, pattern...).
pub fn sweep_charts(s: &SweepReport) -> Vec<(String, String)> {
    type Y = (f64, Option<(f64, f64)>);
    let x = s.x_axis.as_str();
    let names = s.lines();
    let series = |f: &dyn Fn(&crate::sweep::Point) -> Y| -> Vec<Series> {
        names
            .iter()
            .map(|n| {
                Series::new(
                    n.clone(),
                    s.points
                        .iter()
                        .filter(|p| &s.line_of(p) == n)
                        .map(|p| {
                            let (y, w) = f(p);
                            (p.coord.number(x), y, w)
                        })
                        .collect(),
                )
            })
            .collect()
    };
    let ax = x_axis(x);
    let us = |s: &crate::sweep::Spread| (s.median / 1000.0, Some((s.min / 1000.0, s.max / 1000.0)));
    let mut out = vec![(
        format!("iops_vs_{x}"),
        plot::lines(
            &format!("IOPS vs {}", ax.label),
            ax,
            "IOPS",
            &series(&|p| (p.iops.median, Some((p.iops.min, p.iops.max)))),
            false,
            HALF,
        ),
    )];
    for &pc in &s.percentiles {
        let name = pct_name(pc);
        let pick = move |p: &crate::sweep::Point| p.percentile(pc).map_or((f64::NAN, None), |s| us(&s));
        out.push((
            format!("{name}_vs_{x}"),
            plot::lines(&format!("{name} latency"), ax, "latency (us)", &series(&pick), true, HALF),
        ));
    }
    if s.traced {
        out.push((
            format!("irq_per_io_vs_{x}"),
            plot::lines(
                "Device IRQs per I/O",
                ax,
                "IRQs per I/O",
                &series(&|p| (p.irq_per_io.unwrap_or(f64::NAN), None)),
                false,
                HALF,
            ),
        ));
        out.push((
            format!("ctx_per_io_vs_{x}"),
            plot::lines(
                "Context switches per I/O",
                ax,
                "switches per I/O",
                &series(&|p| (p.ctx_per_io, None)),
                false,
                HALF,
            ),
        ));
        // Only points whose phase table reconciled: a bar of a table that does not add up would
        // read as a measurement (the points table says which are missing).
        let split: Vec<_> = s.points.iter().filter_map(|p| p.phases_ns.map(|ph| (p, ph))).collect();
        let cats: Vec<String> = split.iter().map(|(p, _)| p.label.clone()).collect();
        let parts: Vec<(String, Vec<f64>)> = ["submission", "block", "device", "completion"]
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), split.iter().map(|(_, ph)| ph[i] / 1000.0).collect()))
            .collect();
        if !split.is_empty() {
            out.push((
                "phases".into(),
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
    let swept = s.swept_axes();
    let grid: Vec<String> = match &s.axes {
        Some(_) if !s.swept.is_empty() => s
            .swept
            .iter()
            .map(|ax| {
                let vals: Vec<String> = s.points.iter().map(|p| p.coord.value(ax)).fold(Vec::new(), |mut v, x| {
                    if !v.contains(&x) {
                        v.push(x);
                    }
                    v
                });
                format!("{} {}", ax.replace('_', "-"), vals.join(", "))
            })
            .collect(),
        _ => vec![format!(
            "{} x queue depth {}",
            s.variants.join(", "),
            s.qds.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(", ")
        )],
    };
    f.push(Field { key: "grid", value: esc(&grid.join(" x ")), class: "wide" });
    f.push(field(
        "runs",
        format!(
            "{} per point, order shuffled by seed {}{}",
            s.repeat,
            s.seed,
            if s.partial { " <span class=\"bad\">(partial: stopped early)</span>" } else { "" }
        ),
    ));
    // The job's fixed part; a swept axis is in the grid field.
    let fixed = match &s.axes {
        Some(a) => {
            let one = |ax: &str, v: String| if s.swept.iter().any(|x| x == ax) { None } else { Some(v) };
            [
                one("rw", a.rw.first().map_or("unknown".into(), |r| r.to_string())),
                one("bs", a.bs.first().map_or("unknown".into(), |b| crate::job::fmt_bytes(*b))),
                one("jobs", a.jobs.first().map_or(String::new(), |j| format!("{j} job(s)"))),
                one("direct", if a.direct.first() == Some(&false) { "buffered".into() } else { "direct".into() }),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
        }
        None => format!(
            "{} {}",
            text(job.map(|j| &j["rw"])),
            job.and_then(|j| j["bs"].as_u64()).map_or("unknown".into(), crate::job::fmt_bytes)
        ),
    };
    f.push(field("job", esc(&fixed)));
    f.push(field("target", esc(&text(first.map(|r| &r["target"]["path"])))));
    f.push(field("kernel", esc(&text(first.map(|r| &r["system"]["kernel"])))));
    if let Some(best) = s.points.iter().max_by(|a, b| a.iops.median.total_cmp(&b.iops.median)) {
        f.push(Field {
            key: "most IOPS",
            value: format!(
                "<span class=\"big\" id=\"iops\">{:.0}</span> {} (p99 {:.1} us)",
                best.iops.median,
                esc(&best.label),
                best.lat_p99_ns.median / 1000.0
            ),
            class: "wide",
        });
    }
    let lowest = s.points.iter().min_by(|a, b| a.lat_p50_ns.median.total_cmp(&b.lat_p50_ns.median));
    if let Some(l) = lowest {
        f.push(field("lowest p50", esc(&format!("{:.1} us, {}", l.lat_p50_ns.median / 1000.0, l.label))));
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
        s.failed.iter().map(|x| format!("{} run {} failed: {}", x.coord.label(&swept), x.rep, x.error)).collect();
    f.push(Field { key: "warnings", value: warnings_html(&warnings), class: "full" });
    card(&f)
}

/// report.html of a sweep: the summary, IOPS and latency over queue depth per engine (median
/// run, min..max whiskers), IRQs and context switches per I/O, the phase breakdown per point,
/// every point, and the configuration of the first run.
pub fn sweep_page(s: &SweepReport, first: Option<&serde_json::Value>) -> String {
    let mut body = summary(s, first);
    let _ = write!(
        body,
        "<h2>Over {}</h2><p>Each point is its median run by IOPS; whiskers span the runs' min..max. Latency at the \
         percentiles chosen (--percentiles {}).</p><div class=\"plots\">",
        x_axis(&s.x_axis).label,
        s.percentiles.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")
    );
    for (_, svg) in sweep_charts(s) {
        body.push_str(&svg);
    }
    body.push_str("</div><h2>Points</h2>");
    let pct = |p: &crate::sweep::Point, pc: f64| {
        p.percentile(pc).map_or("unknown".into(), |s| format!("{:.1}", s.median / 1000.0))
    };
    let rows: Vec<Vec<String>> = s
        .points
        .iter()
        .map(|p| {
            let mut r = vec![
                p.label.clone(),
                p.runs.to_string(),
                format!("{:.0}", p.iops.median),
                format!("{:.0}..{:.0}", p.iops.min, p.iops.max),
            ];
            r.extend(s.percentiles.iter().map(|&pc| pct(p, pc)));
            r.extend([
                format!("{:.2}", p.cpu_per_io_ns.median / 1000.0),
                format!("{:.1}", p.inflight_avg.median),
                match (p.phases_ns, s.traced) {
                    (Some(ph), _) => ph.iter().map(|v| format!("{:.1}", v / 1000.0)).collect::<Vec<_>>().join(" / "),
                    (None, true) => "not reconciled".into(),
                    (None, false) => "not traced".into(),
                },
                p.irq_per_io.map_or("not traced".into(), |v| format!("{v:.3}")),
                format!("{:.3}", p.ctx_per_io),
            ]);
            r
        })
        .collect();
    let pct_heads: Vec<String> = s.percentiles.iter().map(|&p| format!("{} us", pct_name(p))).collect();
    let mut head: Vec<&str> = vec!["point", "runs", "IOPS", "min..max"];
    head.extend(pct_heads.iter().map(String::as_str));
    head.extend(["CPU/IO us", "in flight", "sub/blk/dev/compl us", "IRQ/IO", "ctx/IO"]);
    body.push_str(&table(&head, &rows));
    if let Some(c) = first.map(|r| &r["config"]).filter(|c| !c.is_null()) {
        body.push_str("<h2>Configuration (first run)</h2>");
        body.push_str(&config_groups(c));
    }
    page("iopath sweep", &body)
}
