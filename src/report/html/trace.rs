//! report.html of one trace.

use std::collections::BTreeMap;

use super::parts::{card, config_groups, esc, field, flame_frame, page, table, warnings_html, Field};
use crate::model::{BpfHist, Phase, RawTrace, HIST_SUB_BITS};
use crate::report::plot::{self, Dist, WIDE};
use crate::report::Report;

const US: f64 = 1000.0;

/// The four phases as the distributions name them, with their histograms' index.
pub(super) const PHASES: [(&str, Phase); 4] = [
    ("submission", Phase::Submission),
    ("block", Phase::Block),
    ("device", Phase::Device),
    ("completion", Phase::Completion),
];

/// Histogram slots merged 8 at a time, in us: 4 bars per power of two read better than 32.
pub(super) fn hist_buckets(h: &BpfHist) -> Vec<(f64, f64, u64)> {
    let mut merged: BTreeMap<u32, u64> = BTreeMap::new();
    for &(slot, c) in &h.slots {
        *merged.entry(slot / 8).or_default() += c;
    }
    merged
        .into_iter()
        .map(|(g, c)| {
            let lo = crate::hist::bucket_range_with((g * 8) as usize, HIST_SUB_BITS).0;
            let (hi0, w) = crate::hist::bucket_range_with((g * 8 + 7) as usize, HIST_SUB_BITS);
            (lo as f64 / US, (hi0 + w) as f64 / US, c)
        })
        .collect()
}

fn title_of(report: &Report) -> String {
    // The flamegraphs' headline ("iopath: uring randread 4K qd8 on /dev/loop1"), as a trace's.
    report.headline().0.replacen("iopath", "iopath trace", 1)
}

/// The summary card: what ran where, how fast, where the time went, and whether to trust it.
fn summary(report: &Report) -> String {
    let us = |ns: f64| format!("{:.1} us", ns / US);
    let mut f: Vec<Field> = Vec::new();
    match (&report.job, &report.process) {
        (Some(j), _) => f.push(field(
            "job",
            esc(&format!(
                "{} {} {}, qd {} x {} job{}, {:.1} s",
                j.engine,
                j.rw,
                crate::job::fmt_bytes(j.bs as u64),
                j.qd,
                j.jobs,
                if j.jobs == 1 { "" } else { "s" },
                report.runtime_ns as f64 / 1e9
            )),
        )),
        (None, Some(p)) => f.push(field(
            "process",
            esc(&format!("{} (pid {}), {:.1} s", p.command, p.pid, report.runtime_ns as f64 / 1e9)),
        )),
        (None, None) => f.push(field("job", "unknown".into())),
    }
    let target = match &report.target {
        Some(t) => {
            let disk = t.disk.clone().unwrap_or_default();
            let sched = report.config.devices.iter().find(|d| d.name == disk).and_then(|d| d.scheduler.clone());
            let mut s = format!("{} ({}", t.path.display(), t.fs_type);
            if !disk.is_empty() {
                s += &format!(", disk {disk}");
            }
            if let Some(sc) = sched {
                s += &format!(", scheduler {sc}");
            }
            if t.in_memory {
                s += ", in memory: measures RAM";
            }
            s + ")"
        }
        None => "the process's own files".into(),
    };
    f.push(field("target", esc(&target)));
    f.push(field("kernel", esc(&format!("{}, {} CPUs", report.system.kernel, report.system.cpus))));
    f.push(field(
        "hooks",
        match &report.trace {
            Some(t) if t.lean => "lean (the phases' own; --full adds scheduler and softirq)".into(),
            Some(_) => "full".into(),
            None => "not traced".into(),
        },
    ));
    f.push(Field {
        key: "IOPS",
        value: format!("<span class=\"big\" id=\"iops\">{:.0}</span>", report.iops),
        class: "",
    });
    f.push(field("bandwidth", format!("{:.1} MB/s", report.bw_bytes / 1e6)));
    let l = &report.lat_ns;
    f.push(field(
        "latency per I/O",
        format!("mean {} &middot; p50 {} &middot; p99 {}", us(l.mean as f64), us(l.p50 as f64), us(l.p99 as f64)),
    ));
    if let Some(t) = &report.trace {
        let p = &t.phases;
        let named =
            [("submission", &p.submission), ("block", &p.block), ("device", &p.device), ("completion", &p.completion)];
        let sum: u64 = named.iter().map(|(_, s)| s.mean_ns).sum();
        let (name, top) = named.iter().max_by_key(|(_, s)| s.mean_ns).map(|(n, s)| (*n, s.mean_ns)).unwrap_or(("", 0));
        let rec = t.reconciliation.clone().unwrap_or_else(|| crate::aggregate::reconcile(t, report.lat_ns.mean));
        f.push(field(
            "dominant phase",
            if rec.reconciled && sum > 0 {
                format!("<b>{name}</b> {} ({:.0}% of the phases)", us(top as f64), top as f64 * 100.0 / sum as f64)
            } else {
                "none named: the phases do not reconcile".into()
            },
        ));
        f.push(Field {
            key: "phases reconcile",
            value: if rec.reconciled {
                format!(
                    "<span class=\"ok\">yes</span>: the four phases add up to {:.1}% of the application's own mean latency",
                    rec.phase_sum_ratio * 100.0
                )
            } else {
                format!(
                    "<span class=\"bad\">NO</span>: {} ({:.1}% of the application's mean)",
                    esc(&rec.reasons.join("; ")),
                    rec.phase_sum_ratio * 100.0
                )
            },
            class: "full",
        });
    }
    f.push(Field { key: "warnings", value: warnings_html(&report.warnings), class: "full" });
    card(&f)
}

/// report.html of one trace: the summary, the phase breakdown and distributions, the run over
/// time, the per-I/O counts, the flamegraphs (title, svg) and the configuration.
pub fn trace_page(report: &Report, raw: &RawTrace, flames: &[(&str, String)]) -> String {
    let body: String = trace_page_sections(report, raw, flames).into_iter().map(|(_, html)| html).collect();
    page(&title_of(report), &body)
}

/// The page's body section by section, in order (each tested against its own golden file,
/// tests/render.rs).
pub fn trace_page_sections(report: &Report, raw: &RawTrace, flames: &[(&str, String)]) -> Vec<(&'static str, String)> {
    vec![
        ("summary", summary(report)),
        (
            "phases",
            report
                .trace
                .as_ref()
                .map_or_else(|| "<p>No trace: this report has no phase breakdown.</p>".to_owned(), phases_section),
        ),
        ("distributions", report.trace.as_ref().map_or_else(String::new, |t| distributions_section(t, raw))),
        ("timeseries", report.timeseries.as_ref().map_or_else(String::new, time_series_section)),
        ("per_io", report.trace.as_ref().map_or_else(String::new, |t| per_io_section(report, t))),
        ("flamegraphs", flames.iter().map(|(title, svg)| flame_frame(title, svg)).collect()),
        (
            "configuration",
            format!(
                "<h2>Configuration</h2>{}",
                config_groups(&serde_json::to_value(&report.config).unwrap_or_default())
            ),
        ),
    ]
}

/// Where the time went: the four phases' means as bars and as a table.
fn phases_section(t: &crate::aggregate::TraceSummary) -> String {
    let mut body = String::new();
    let p = &t.phases;
    let named =
        [("submission", &p.submission), ("block", &p.block), ("device", &p.device), ("completion", &p.completion)];
    let parts: Vec<(String, Vec<f64>)> =
        named.iter().map(|(n, s)| (n.to_string(), vec![s.mean_ns as f64 / US])).collect();
    body.push_str("<h2>Where the time went</h2>");
    body.push_str(&plot::hbars(
        "Mean per I/O by phase",
        "mean latency (us)",
        "run",
        &["this run".to_owned()],
        &parts,
        WIDE,
    ));
    let sum = t.phase_sum_mean_ns.max(1) as f64;
    let u = |v: u64| format!("{:.2}", v as f64 / US);
    let rows: Vec<Vec<String>> = named
        .iter()
        .map(|(n, s)| {
            vec![
                n.to_string(),
                u(s.mean_ns),
                u(s.p50_ns),
                u(s.p90_ns),
                u(s.p99_ns),
                u(s.max_ns),
                format!("{:.0}%", s.mean_ns as f64 * 100.0 / sum),
            ]
        })
        .collect();
    body.push_str(&table(&["phase", "mean us", "p50 us", "p90 us", "p99 us", "max us", "share"], &rows));
    body
}

/// Each phase's distribution on one log axis.
fn distributions_section(t: &crate::aggregate::TraceSummary, raw: &RawTrace) -> String {
    let p = &t.phases;
    let mut body = String::new();
    let dists: Vec<Dist> = PHASES
        .iter()
        .zip([&p.submission, &p.block, &p.device, &p.completion])
        .map(|((n, ph), s)| Dist {
            name: n.to_string(),
            buckets: hist_buckets(&raw.phase(*ph)),
            p50: (s.count > 0).then_some(s.p50_ns as f64 / US),
            p99: (s.count > 0).then_some(s.p99_ns as f64 / US),
            color: None,
        })
        .collect();
    body.push_str(
        "<h2>Latency distributions</h2><p>Each phase's distribution on the same log axis, so one \
         value sits at the same place in every row; each row is scaled to its own tallest bar.</p>",
    );
    body.push_str(&plot::distributions(
        "Per-I/O latency by phase",
        "latency (us, log)",
        &dists,
        plot::Size { w: WIDE.w, h: 360.0 },
    ));
    body
}

/// Interrupts, softirqs, IOMMU and DMA maps, context switches and run-queue time per I/O.
fn per_io_section(report: &Report, t: &crate::aggregate::TraceSummary) -> String {
    let mut body = String::new();
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
        // The lean default hooks no softirq: unknown, not zero.
        None => vec![k.to_string(), "unknown (lean trace; --full)".into(), "unknown".into()],
    })
    .collect();
    let c = &report.ctx_switches;
    counts.push(vec![format!("ctx switches ({})", c.source), c.total.to_string(), format!("{:.3}", c.per_io)]);
    if let Some(d) = &report.run_delay {
        counts.push(vec![
            format!("run queue, us ({})", d.source),
            format!("{:.0}", d.total_ns as f64 / US),
            format!("{:.2}", d.per_io_ns / US),
        ]);
    }
    body.push_str(&table(&["event", "total", "per I/O"], &counts));
    body
}

/// The intervals to draw, and the last one when it is left out: much shorter than the rest, it is
/// the drain after the deadline (as in the text report; its point is in the JSON with its length).
pub(super) fn steady(
    ts: &crate::timeseries::TimeSeries,
) -> (&[crate::timeseries::Point], Option<&crate::timeseries::Point>) {
    let tail = ts.points.last().filter(|l| ts.points.len() > 1 && l.dur_ns < ts.interval_ns / 2);
    (&ts.points[..ts.points.len() - usize::from(tail.is_some())], tail)
}

/// Where the drawn intervals end, in seconds from the run's start.
pub(super) fn end_s(points: &[crate::timeseries::Point]) -> f64 {
    points.iter().map(|p| (p.t_ns + p.dur_ns) as f64 / 1e9).fold(0.0, f64::max)
}

/// One quantity over time, each interval at its middle.
pub(super) fn time_line(
    name: &str,
    points: &[crate::timeseries::Point],
    f: &dyn Fn(&crate::timeseries::Point) -> Option<f64>,
) -> plot::TimeSeries {
    (name.to_owned(), points.iter().map(|p| ((p.t_ns as f64 + p.dur_ns as f64 / 2.0) / 1e9, f(p))).collect())
}

/// How the run evolved: IOPS, bandwidth, latency, the phases' means and the per-I/O counts per interval,
/// one chart each at the page's full width, so their time axes line up.
fn time_series_section(ts: &crate::timeseries::TimeSeries) -> String {
    use crate::timeseries::Point;
    let (points, tail) = steady(ts);
    let end = end_s(points);
    let line = |name: &str, f: &dyn Fn(&Point) -> Option<f64>| time_line(name, points, f);
    let lat = |f: fn(&Point) -> Option<u64>| move |p: &Point| f(p).map(|v| v as f64 / US);
    let mut charts = vec![
        plot::time_lines("IOPS per interval", "IOPS", end, &[line("IOPS", &|p| Some(p.iops))], WIDE),
        plot::time_lines("Bandwidth per interval", "MB/s", end, &[line("MB/s", &|p| Some(p.bw_bytes / 1e6))], WIDE),
        // p50 and p99 on their own: one 10 ms stall as max would flatten both on a shared axis.
        plot::time_lines(
            "Latency per interval",
            "latency (us)",
            end,
            &[line("p50", &lat(|p| p.lat_p50_ns)), line("p99", &lat(|p| p.lat_p99_ns))],
            WIDE,
        ),
        plot::time_lines("Max latency per interval", "latency (us)", end, &[line("max", &lat(|p| p.lat_max_ns))], WIDE),
    ];
    if points.iter().any(|p| p.phase_mean_ns.is_some()) {
        let ph = |f: fn(&crate::timeseries::PhaseMeans) -> Option<u64>| {
            move |p: &Point| p.phase_mean_ns.as_ref().and_then(f).map(|v| v as f64 / US)
        };
        charts.push(plot::time_lines(
            "Phase means per interval",
            "mean latency (us)",
            end,
            &[
                line("submission", &ph(|m| m.submission_ns)),
                line("block", &ph(|m| m.block_ns)),
                line("device", &ph(|m| m.device_ns)),
                line("completion", &ph(|m| m.completion_ns)),
            ],
            WIDE,
        ));
    }
    let mut per_io = Vec::new();
    if points.iter().any(|p| p.irq_per_io.is_some()) {
        per_io.push(line("IRQs", &|p| p.irq_per_io));
    }
    if points.iter().any(|p| p.ctx_per_io.is_some()) {
        per_io.push(line("ctx switches", &|p| p.ctx_per_io));
    }
    if !per_io.is_empty() {
        charts.push(plot::time_lines("Per I/O, per interval", "events per I/O", end, &per_io, WIDE));
    }
    let step = ts.interval_ns as f64 / 1e9;
    let drain = tail.map_or(String::new(), |t| {
        format!(" The last {:.0} ms, a partial interval at the end, is left out.", t.dur_ns as f64 / 1e6)
    });
    format!(
        "<h2>Over time</h2><p>Per {step} s interval: IOPS, bandwidth and latency from the generator's own clock reads (a traced \
         command: from the probes), phase means and per-I/O counts from the kernel's histograms and counters read at \
         the same interval edges. A gap is an interval in which nothing completed.{drain} The JSON report's \
         <code>timeseries</code> has every point.</p><div class=\"plots\">{}</div>",
        charts.concat()
    )
}
