//! report.html of a study: several sweep comparisons side by side, one column each (the VM rig's
//! kernel study: each kernel's IOMMU off against strict). The same charts as the comparison's
//! page, the same chart in one row for every column, so a shape reads across kernels.

use super::parts::{card, config_changes, esc, page, Field};
use super::sweep_compare::{moved_counts, point_table, sweep_compare_charts, SideNames};
use crate::sweep::SweepReport;
use crate::sweep_compare::SweepComparison;

/// One column: its name ("Debian 6.1") and its two sweeps compared.
pub struct Column<'a> {
    pub name: &'a str,
    pub c: &'a SweepComparison,
    pub a: &'a SweepReport,
    pub b: &'a SweepReport,
}

pub fn study_page(cols: &[Column], sides: SideNames, note: Option<&str>) -> String {
    let title = format!("iopath study: {} (dashed) against {} (solid)", sides.0, sides.1);
    let mut body = note.map_or(String::new(), |n| format!("<p class=\"sub\">{}</p>", esc(n)));
    let fields: Vec<Field> = cols
        .iter()
        .map(|col| Field {
            key: col.name,
            value: format!(
                "<b>{}</b><br>{} points compared: {}",
                esc(&col.c.verdict),
                col.c.points.len(),
                moved_counts(col.c)
            ),
            class: "wide",
        })
        .collect();
    body.push_str(&card(&fields));
    body.push_str(&format!(
        "<h2>Side by side</h2><p>One column per study; each chart {} dashed and {} solid, one colour per line; each \
         point its median run, whiskers min..max.</p>",
        esc(sides.0),
        esc(sides.1)
    ));
    let charts: Vec<Vec<(String, String)>> =
        cols.iter().map(|c| sweep_compare_charts(c.a, c.b, sides, &format!("{}: ", c.name))).collect();
    // Row k holds every column's k-th chart; a column without it (fewer percentiles) leaves a gap.
    let rows = charts.iter().map(Vec::len).max().unwrap_or(0);
    body.push_str(&format!(
        "<div class=\"plots\" style=\"display: grid; grid-template-columns: repeat({}, 1fr)\">",
        cols.len().max(1)
    ));
    for k in 0..rows {
        for c in &charts {
            body.push_str(&format!("<div>{}</div>", c.get(k).map_or("", |x| x.1.as_str())));
        }
    }
    body.push_str("</div>");
    for col in cols {
        body.push_str(&format!("<h2>{}: point by point</h2>", esc(col.name)));
        body.push_str(&point_table(col.c, sides));
        let heading = format!("<h3>{}: configuration changes</h3>", esc(col.name));
        body.push_str(&config_changes(&heading, &col.c.config_changes, sides));
    }
    page(&title, &body)
}
