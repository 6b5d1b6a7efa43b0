//! report.html of two sweeps compared.

use super::parts::{card, config_changes, esc, field, page, table, warnings_html, Field};
use super::sweep::{pct_name, x_axis};
use crate::report::plot::{self, Series, HALF};
use crate::sweep::{Point, SweepReport};
use crate::sweep_compare::SweepComparison;

/// A point's value and its min..max whisker (None: the point does not carry it).
type Pick<'a> = &'a dyn Fn(&Point) -> Option<(f64, (f64, f64))>;

/// What the two studies are called in legends and headings: ("A", "B"), or what they are
/// ("IOMMU off", "IOMMU strict").
pub type SideNames<'a> = (&'a str, &'a str);

/// One chart with both studies: each line of A dashed, the same line of B solid, same colour.
fn overlay(
    title: &str,
    y_label: &str,
    log_y: bool,
    ab: (&SweepReport, &SweepReport),
    sides: SideNames,
    f: Pick,
) -> String {
    let (a, b) = ab;
    let x = a.x_axis.as_str();
    let lines = a.lines();
    let mut series = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        for (side, s, dashed) in [(sides.0, a, true), (sides.1, b, false)] {
            let points = s
                .points
                .iter()
                .filter(|p| &s.line_of(p) == line)
                .filter_map(|p| f(p).map(|(y, w)| (p.coord.number(x), y, Some(w))))
                .collect();
            series.push(Series { name: format!("{side} {line}"), points, color: Some(i), dashed });
        }
    }
    plot::lines(title, x_axis(x), y_label, &series, log_y, HALF)
}

fn summary(c: &SweepComparison) -> String {
    let mut f = vec![
        Field { key: "verdict", value: format!("<b>{}</b>", esc(&c.verdict)), class: "full" },
        Field { key: "A (before, dashed)", value: esc(&c.before), class: "wide" },
        Field { key: "B (after, solid)", value: esc(&c.after), class: "wide" },
        field("points compared", format!("<span class=\"big\" id=\"points\">{}</span>", c.points.len())),
        field("IOPS moved", moved_counts(c)),
        field("configuration changes", c.config_changes.len().to_string()),
    ];
    let unmatched: Vec<String> = c
        .only_before
        .iter()
        .map(|l| format!("{l}: only in A"))
        .chain(c.only_after.iter().map(|l| format!("{l}: only in B")))
        .chain(c.not_compared.iter().cloned())
        .collect();
    f.push(Field { key: "not compared", value: warnings_html(&unmatched), class: "full" });
    card(&f)
}

/// The overlay charts, each a standalone SVG: (file stem, svg): IOPS and every percentile both
/// sweeps carry, each title after `title_prefix` ("Debian 6.1: " on a study page).
pub fn sweep_compare_charts(
    a: &SweepReport,
    b: &SweepReport,
    sides: SideNames,
    title_prefix: &str,
) -> Vec<(String, String)> {
    let iops = |p: &Point| Some((p.iops.median, (p.iops.min, p.iops.max)));
    let mut out =
        vec![("iops".to_owned(), overlay(&format!("{title_prefix}IOPS"), "IOPS", false, (a, b), sides, &iops))];
    for &pc in a.percentiles.iter().filter(|p| b.percentiles.contains(p)) {
        let pick = move |p: &Point| p.percentile(pc).map(|s| (s.median / 1000.0, (s.min / 1000.0, s.max / 1000.0)));
        let title = format!("{title_prefix}{} latency", pct_name(pc));
        out.push((pct_name(pc), overlay(&title, "latency (us)", true, (a, b), sides, &pick)));
    }
    out
}

/// Each point's change: IOPS, latency deltas, the phase that moved most and the likely cause.
pub(super) fn point_table(c: &SweepComparison, sides: SideNames) -> String {
    let us = |v: f64| format!("{}{:.1}", if v >= 0.0 { "+" } else { "-" }, v.abs() / 1000.0);
    let rows: Vec<Vec<String>> = c
        .points
        .iter()
        .map(|p| {
            vec![
                p.label.clone(),
                format!("{:.0}", p.iops.before),
                format!("{:.0}", p.iops.after),
                p.iops.pct.map_or("unknown".into(), |v| format!("{v:+.1}%")),
                p.iops_judgement.to_owned(),
                us(p.lat_p50_ns.after - p.lat_p50_ns.before),
                us(p.lat_p99_ns.after - p.lat_p99_ns.before),
                if p.moved_most == "none" { "none".into() } else { format!("{} {} us", p.moved_most, us(p.moved_ns)) },
                p.causes.first().map_or(String::new(), |c| c.split(';').next().unwrap_or(c).to_owned()),
            ]
        })
        .collect();
    let (ia, ib) = (format!("IOPS {}", sides.0), format!("IOPS {}", sides.1));
    table(&["point", &ia, &ib, "IOPS", "judgement", "d p50 us", "d p99 us", "phase moved most", "likely cause"], &rows)
}

/// How many points got slower, faster, or stayed within noise.
pub(super) fn moved_counts(c: &SweepComparison) -> String {
    let n = |j: &str| c.points.iter().filter(|p| p.iops_judgement == j).count();
    format!("{} slower, {} faster, {} within noise", n("slower"), n("faster"), n("within noise"))
}

/// report.html of `iopath compare SWEEP_A SWEEP_B`: the verdict, A and B overlaid (IOPS and the
/// percentiles both carry), each point's change, and what changed in the configuration.
pub fn sweep_compare_page(c: &SweepComparison, a: &SweepReport, b: &SweepReport) -> String {
    let mut body = summary(c);
    let ax = x_axis(&a.x_axis);
    body.push_str(&format!(
        "<h2>A and B over {}</h2><p>A dashed, B solid, one colour per line; each point its median run, whiskers \
         min..max.</p><div class=\"plots\">",
        ax.label
    ));
    for (_, svg) in sweep_compare_charts(a, b, ("A", "B"), "") {
        body.push_str(&svg);
    }
    body.push_str("</div><h2>Point by point</h2>");
    body.push_str(&point_table(c, ("A", "B")));
    body.push_str(&config_changes("<h2>Configuration changes</h2>", &c.config_changes, ("A", "B")));
    page("iopath compare: two sweeps", &body)
}
