//! report.html of a comparison.

use super::{card, config_changes, esc, field, flame_frame, page, table, warnings_html, Field};
use crate::compare::{Change, Comparison};
use crate::report::plot::{self, WIDE};

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

/// report.html of a comparison: the verdict, the phases before and after, the counts, the
/// configuration differences and the differential flamegraph.
pub fn compare_page(c: &Comparison, diff_svg: Option<&str>) -> String {
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
    body.push_str("<h2>Per I/O</h2>");
    let rows: Vec<Vec<String>> = c
        .per_io
        .iter()
        .map(|(k, v)| vec![k.replace('_', " "), format!("{:.3}", v.before), format!("{:.3}", v.after)])
        .collect();
    body.push_str(&table(&["event", "before", "after"], &rows));
    body.push_str(&config_changes(&c.config_changes, ("before", "after")));
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
