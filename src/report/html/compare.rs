//! report.html of a comparison.

use super::parts::{card, config_changes, esc, field, flame_frame, page, table, warnings_html, Field};
use super::trace::{end_s, hist_buckets, steady, time_line, PHASES};
use crate::compare::{Change, Comparison};
use crate::model::RawTrace;
use crate::report::plot::{self, Dist, WIDE};
use crate::timeseries::{Point, TimeSeries};

/// What each run's own files add to its comparison's page: its time series (its report.json)
/// and its phases' histograms (the raw.json beside it). None where a side has none (fio's
/// JSON, a report moved without its raw.json): that part of the page says so.
#[derive(Default)]
pub struct Sides<'a> {
    pub timeseries: [Option<&'a TimeSeries>; 2],
    pub raw: [Option<&'a RawTrace>; 2],
}

/// Each phase's distribution before and after, one row each on one shared log axis, the two rows
/// of a phase in its colour: a shift reads as a move along the same x.
fn distributions(c: &Comparison, raw: [&RawTrace; 2]) -> String {
    let mut rows = Vec::new();
    for (i, (name, ph)) in PHASES.iter().enumerate() {
        let moved = c.phases.iter().find(|p| p.phase == *name);
        for (side, r) in ["before", "after"].iter().zip(raw) {
            let s = moved.map(|m| if *side == "before" { &m.before } else { &m.after });
            rows.push(Dist {
                name: format!("{name} {side}"),
                buckets: hist_buckets(&r.phase(*ph)),
                p50: s.filter(|s| s.count > 0).map(|s| s.p50 / 1000.0),
                p99: s.filter(|s| s.count > 0).map(|s| s.p99 / 1000.0),
                color: Some(i),
            });
        }
    }
    plot::distributions(
        "Per-I/O latency by phase, before and after",
        "latency (us, log)",
        &rows,
        plot::Size { w: WIDE.w, h: 560.0 },
    )
}

/// IOPS and p99 per interval of both runs on one time axis from each run's start, before dashed.
fn over_time(ts: [&TimeSeries; 2]) -> String {
    let drawn = ts.map(|t| steady(t).0);
    let end = drawn.iter().map(|p| end_s(p)).fold(0.0, f64::max);
    let chart = |title: &str, y: &str, f: &dyn Fn(&Point) -> Option<f64>| {
        let lines = [time_line("before", drawn[0], f), time_line("after", drawn[1], f)];
        plot::time_lines_styled(title, y, end, &[(&lines[0], 0, true), (&lines[1], 0, false)], WIDE)
    };
    let lat = |f: fn(&Point) -> Option<u64>| move |p: &Point| f(p).map(|v| v as f64 / 1000.0);
    [
        chart("IOPS per interval", "IOPS", &|p| Some(p.iops)),
        chart("p99 latency per interval", "latency (us)", &lat(|p| p.lat_p99_ns)),
        chart("Max latency per interval", "latency (us)", &lat(|p| p.lat_max_ns)),
    ]
    .concat()
}

fn change(c: &Change, unit: &str, scale: f64) -> String {
    let pct = c.pct.map_or("unknown".into(), |p| format!("{p:+.1}%"));
    format!("{:.1} &rarr; {:.1} {unit} ({pct})", c.before / scale, c.after / scale)
}

fn summary(c: &Comparison) -> String {
    let mut f: Vec<Field> = Vec::new();
    f.push(Field { key: "verdict", value: format!("<b>{}</b>", esc(&c.verdict)), class: "full" });
    f.push(Field { key: "before", value: esc(&c.before), class: "wide" });
    f.push(Field { key: "after", value: esc(&c.after), class: "wide" });
    f.push(Field {
        key: "IOPS",
        value: format!(
            "<span class=\"big\" id=\"iops\">{:.0} &rarr; {:.0}</span> {}",
            c.iops.before,
            c.iops.after,
            c.iops.pct.map_or("".into(), |p| format!("({p:+.1}%)"))
        ),
        class: "wide",
    });
    f.push(field("mean latency", change(&c.latency_mean_ns, "us", 1000.0)));
    f.push(field("p99 latency", change(&c.latency_p99_ns, "us", 1000.0)));
    f.push(field("phase that moved most", esc(c.dominant_phase)));
    f.push(field(
        "phases reconcile",
        if c.phases.is_empty() {
            "no phases on a side (fio?)".into()
        } else if c.unreconciled.is_empty() {
            "<span class=\"ok\">yes</span>, on both sides".into()
        } else {
            format!("<span class=\"bad\">NO</span>: {}", esc(&c.unreconciled.join("; ")))
        },
    ));
    f.push(Field {
        key: "likely causes",
        value: if c.causes.is_empty() { "none named".into() } else { warnings_html(&c.causes) },
        class: "full",
    });
    card(&f)
}

/// report.html of a comparison: the verdict, the phases before and after, their distributions and
/// both runs over time (when the runs' files have them), the counts, the configuration
/// differences and the differential flamegraph.
pub fn compare_page(c: &Comparison, sides: &Sides, diff_svg: Option<&str>) -> String {
    let mut body = summary(c);
    let cats = ["before".to_owned(), "after".to_owned()];
    if !c.phases.is_empty() {
        body.push_str("<h2>Where the time went</h2>");
        let parts: Vec<(String, Vec<f64>)> = c
            .phases
            .iter()
            .map(|p| (p.phase.to_string(), vec![p.before.mean / 1000.0, p.after.mean / 1000.0]))
            .collect();
        body.push_str(&plot::hbars("Mean per I/O by phase", "mean latency (us)", "run", &cats, &parts, WIDE));
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
    body.push_str("<h2>Throughput</h2>");
    body.push_str(&plot::hbars(
        "IOPS",
        "IOPS",
        "run",
        &cats,
        &[("IOPS".to_owned(), vec![c.iops.before, c.iops.after])],
        WIDE,
    ));
    if !c.phases.is_empty() {
        body.push_str("<h2>Latency distributions</h2>");
        match sides.raw {
            [Some(b), Some(a)] => {
                body.push_str(
                    "<p>Each phase before and after, one row each on the same log axis (each row scaled to its \
                     own tallest bar; p50 and p99 marked).</p>",
                );
                body.push_str(&distributions(c, [b, a]));
            }
            _ => body.push_str(
                "<p>Not drawn: a run's raw.json (its phases' histograms, written beside report.json by \
                 <code>iopath trace --out</code>) was not found next to the report compared.</p>",
            ),
        }
    }
    body.push_str("<h2>Over time</h2>");
    match sides.timeseries {
        [Some(b), Some(a)] => {
            body.push_str("<p>Both runs per interval from each one's start: before dashed, after solid.</p>");
            body.push_str(&format!("<div class=\"plots\">{}</div>", over_time([b, a])));
        }
        _ => body.push_str("<p>Not drawn: a side has no time series (fio's JSON output has none).</p>"),
    }
    body.push_str("<h2>Per I/O</h2>");
    let rows: Vec<Vec<String>> = c
        .per_io
        .iter()
        .map(|(k, v)| vec![k.replace('_', " "), format!("{:.3}", v.before), format!("{:.3}", v.after)])
        .collect();
    body.push_str(&table(&["event", "before", "after"], &rows));
    body.push_str(&config_changes("<h2>Configuration changes</h2>", &c.config_changes, ("before", "after")));
    if !c.config_one_side_only.is_empty() {
        body.push_str(&format!(
            "<p>Recorded on one side only, not compared: {}</p>",
            esc(&c.config_one_side_only.join(", "))
        ));
    }
    if let Some(svg) = diff_svg {
        body.push_str(&flame_frame("Differential on-CPU flamegraph (red grew, blue shrank)", svg));
    }
    page("iopath compare", &body)
}
