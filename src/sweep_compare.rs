//! `iopath compare SWEEP_A SWEEP_B`: two studies point by point. Each point's median runs are
//! compared as `iopath compare` compares two runs (the same noise rule for the phases, the same
//! causes); IOPS count as moved only beyond 5% and outside both points' min..max over their
//! repeats. One verdict for the whole study says where IOPS moved, which phase moved and the
//! likely cause: "IOPS -18..-31% at qd >= 8; block phase +9.1..+10.4 us at every point; likely
//! cause: IOMMU translation". Pure: the CLI loads the files and compares the median runs.

use serde::Serialize;

use crate::compare::{Change, Comparison, ConfigChange};
use crate::sweep::{Point, Spread, SweepReport};

pub const SCHEMA: &str = "iopath.sweep-compare/1";

/// IOPS must move by more than this share to count (the phases' rule: 5% of the larger mean).
const IOPS_NOISE: f64 = 0.05;

#[derive(Clone, Debug, Serialize)]
pub struct PointChange {
    pub label: String,
    /// The chart's line (the label without the x axis) and the point's x value.
    pub line: String,
    pub x: f64,
    pub iops: Change,
    pub iops_before: Spread,
    pub iops_after: Spread,
    /// "faster", "slower" or "within noise".
    pub iops_judgement: &'static str,
    pub lat_p50_ns: Change,
    pub lat_p99_ns: Change,
    /// The phase whose mean moved most beyond noise (run compare's rule); "none" when every
    /// phase stayed within noise or a side's table does not reconcile.
    pub moved_most: &'static str,
    /// ... and by how much (ns, after - before).
    pub moved_ns: f64,
    /// Run compare's likely causes for this point, most likely first.
    pub causes: Vec<String>,
    /// What this point's own run comparison says sets its IOPS.
    pub explanation: Explanation,
}

/// A point's primary explanation, as its run comparison draws it: CPU per I/O where the
/// submitting thread is CPU-bound (both runs kept well under the requested depth in flight:
/// Little's law), with the kernel events per I/O that grew; the phase that moved most
/// otherwise; "none" when neither says anything.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Explanation {
    /// "CPU per I/O", a phase (submission, block, device, completion), or "none".
    pub kind: String,
    /// CPU per I/O's or the phase mean's change, after - before (ns) ...
    pub delta_ns: f64,
    /// ... and relative (percent), when the before side is not zero.
    pub pct: Option<f64>,
    /// Kernel events per I/O that grew by a quarter or more ("iommu map 0.00 -> 1.00").
    pub events: Vec<String>,
}

/// Events that count once or more per I/O (not times or shares): a growth of a quarter of an
/// event per I/O is a mechanism, not noise (the IOMMU's strict mode: 0 -> 1 map per I/O).
fn grown_events(c: &Comparison) -> Vec<String> {
    c.per_io
        .iter()
        .filter(|(k, v)| !k.ends_with("_us") && !k.starts_with("share ") && v.after - v.before >= 0.25)
        .map(|(k, v)| format!("{} {:.2} -> {:.2} per I/O", k.replace('_', " "), v.before, v.after))
        .collect()
}

pub fn explanation(c: &Comparison) -> Explanation {
    let events = grown_events(c);
    if let (Some(_), Some(cpu)) = (c.submitter_bound, &c.cpu_per_io_ns) {
        if cpu.pct.is_some_and(|p| p.abs() >= 5.0) {
            return Explanation { kind: "CPU per I/O".into(), delta_ns: cpu.after - cpu.before, pct: cpu.pct, events };
        }
    }
    match c.phases.iter().find(|p| p.phase == c.dominant_phase) {
        Some(p) if c.dominant_phase != "none" => Explanation {
            kind: c.dominant_phase.into(),
            delta_ns: p.delta_mean_ns,
            pct: (p.before.mean > 0.0).then(|| p.delta_mean_ns / p.before.mean * 100.0),
            events,
        },
        _ => Explanation { kind: "none".into(), delta_ns: 0.0, pct: None, events },
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepComparison {
    pub schema: &'static str,
    pub before: String,
    pub after: String,
    pub x_axis: String,
    pub points: Vec<PointChange>,
    /// Points one study has and the other does not: not compared.
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    /// Points both have whose median runs could not be compared, with why.
    pub not_compared: Vec<String>,
    /// What differs between the two studies' machines and settings (their first matched point).
    pub config_changes: Vec<ConfigChange>,
    pub verdict: String,
}

/// IOPS beyond noise: more than 5%, and the two min..max ranges apart.
fn iops_judgement(b: &Spread, a: &Spread) -> &'static str {
    let rel = (a.median - b.median) / b.median.max(1e-9);
    let apart = a.min > b.max || a.max < b.min;
    match (rel.abs() > IOPS_NOISE && apart, rel > 0.0) {
        (false, _) => "within noise",
        (true, true) => "faster",
        (true, false) => "slower",
    }
}

/// The matched points of two sweeps (same label), each with the comparison of its median runs
/// (`compare` gives it, or why it cannot: a median report missing or unreadable).
pub fn compare_sweeps(
    before: &SweepReport,
    after: &SweepReport,
    names: (&str, &str),
    mut compare: impl FnMut(&Point, &Point) -> Result<Comparison, String>,
) -> SweepComparison {
    let x = before.x_axis.clone();
    let mut points = Vec::new();
    let mut config_changes = None;
    let mut not_compared = Vec::new();
    for b in &before.points {
        let Some(a) = after.points.iter().find(|a| a.label == b.label) else { continue };
        let c = match compare(b, a) {
            Ok(c) => c,
            Err(why) => {
                not_compared.push(format!("{}: {why}", b.label));
                continue;
            }
        };
        if config_changes.is_none() {
            config_changes = Some(c.config_changes.clone());
        }
        let moved = c.phases.iter().find(|p| p.phase == c.dominant_phase);
        points.push(PointChange {
            label: b.label.clone(),
            line: before.line_of(b),
            x: b.coord.number(&x),
            iops: Change::new(b.iops.median, a.iops.median),
            iops_before: b.iops,
            iops_after: a.iops,
            iops_judgement: iops_judgement(&b.iops, &a.iops),
            lat_p50_ns: Change::new(b.lat_p50_ns.median, a.lat_p50_ns.median),
            lat_p99_ns: Change::new(b.lat_p99_ns.median, a.lat_p99_ns.median),
            moved_most: c.dominant_phase,
            moved_ns: moved.map_or(0.0, |p| p.delta_mean_ns),
            causes: c.causes.clone(),
            explanation: explanation(&c),
        });
    }
    let labels = |s: &SweepReport, other: &SweepReport| -> Vec<String> {
        s.points.iter().filter(|p| !other.points.iter().any(|o| o.label == p.label)).map(|p| p.label.clone()).collect()
    };
    let mut out = SweepComparison {
        schema: SCHEMA,
        before: names.0.to_owned(),
        after: names.1.to_owned(),
        x_axis: x,
        only_before: labels(before, after),
        only_after: labels(after, before),
        not_compared,
        points,
        config_changes: config_changes.unwrap_or_default(),
        verdict: String::new(),
    };
    out.verdict = verdict(&out);
    out
}

/// A value of the x axis as the reader knows it: 64K for a block size, 8 for a queue depth.
fn fmt_x(axis: &str, v: f64) -> String {
    match axis {
        "bs" => crate::job::fmt_bytes(v as u64),
        _ => format!("{v:.0}"),
    }
}

/// Where on the x axis: "at every point", "at qd >= 8", "at qd <= 4", or "at qd 1, 16".
fn where_on(axis: &str, moved: &[f64], all: &[f64]) -> String {
    let name = axis.replace('_', "-");
    let mut all: Vec<f64> = all.to_vec();
    all.sort_by(f64::total_cmp);
    all.dedup();
    let mut m: Vec<f64> = moved.to_vec();
    m.sort_by(f64::total_cmp);
    m.dedup();
    if m.len() == all.len() {
        return "at every point".into();
    }
    if all.len() > 2 && m.len() > 1 {
        if all.ends_with(&m) {
            return format!("at {name} >= {}", fmt_x(axis, m[0]));
        }
        if all.starts_with(&m) {
            return format!("at {name} <= {}", fmt_x(axis, m[m.len() - 1]));
        }
    }
    format!("at {name} {}", m.iter().map(|v| fmt_x(axis, *v)).collect::<Vec<_>>().join(", "))
}

/// Where IOPS moved with this judgement: "at every point"; a part of the x axis when at those x
/// values every line moved (and nowhere else); else "at 6 of 8 points". (One study's verdict
/// once said "at every point" where uring's QD1 and QD4 had stayed within noise: aio had moved
/// there, and the x values alone covered the axis.)
fn where_moved(c: &SweepComparison, judgement: &str, xs: &[f64], all: &[f64]) -> String {
    let n = xs.len();
    if n == c.points.len() {
        return "at every point".into();
    }
    let full: Vec<f64> = all
        .iter()
        .copied()
        .filter(|x| c.points.iter().filter(|p| p.x == *x).all(|p| p.iops_judgement == judgement))
        .collect();
    let covered = c.points.iter().filter(|p| full.contains(&p.x)).count();
    if !full.is_empty() && covered == n {
        where_on(&c.x_axis, &full, all)
    } else {
        format!("at {n} of {} points", c.points.len())
    }
}

fn range(v: &[f64], fmt: impl Fn(f64) -> String) -> String {
    let lo = v.iter().copied().fold(f64::MAX, f64::min);
    let hi = v.iter().copied().fold(f64::MIN, f64::max);
    if (hi - lo).abs() < 1e-9 {
        fmt(lo)
    } else {
        format!("{}..{}", fmt(lo), fmt(hi))
    }
}

/// One sentence for the study.
fn verdict(c: &SweepComparison) -> String {
    if c.points.is_empty() {
        return "No point of one study matches a point of the other: nothing compared.".into();
    }
    let all: Vec<f64> = c.points.iter().map(|p| p.x).collect();
    let mut parts = Vec::new();
    for (judgement, sign) in [("slower", -1.0), ("faster", 1.0)] {
        let moved: Vec<&PointChange> = c.points.iter().filter(|p| p.iops_judgement == judgement).collect();
        if moved.is_empty() {
            continue;
        }
        let pcts: Vec<f64> = moved.iter().filter_map(|p| p.iops.pct).collect();
        let xs: Vec<f64> = moved.iter().map(|p| p.x).collect();
        let pct = |v: f64| format!("{}{:.0}%", if sign < 0.0 { "-" } else { "+" }, v.abs());
        // Sorted by size so the range reads from the smallest change to the largest.
        let mut sorted = pcts.clone();
        sorted.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
        parts.push(format!("IOPS {} {}", range_abs(&sorted, pct), where_moved(c, judgement, &xs, &all)));
    }
    // Medians that moved beyond 5% inside the repeats' min..max: not counted as moved, but said,
    // so a study whose runs scatter (the VM rig under emulation: uring QD 4..64 -25..-34% by the
    // median with overlapping repeats) does not read as if nothing had moved.
    let spread: Vec<f64> = c
        .points
        .iter()
        .filter(|p| p.iops_judgement == "within noise")
        .filter_map(|p| p.iops.pct)
        .filter(|v| v.abs() > IOPS_NOISE * 100.0)
        .collect();
    if parts.is_empty() && spread.is_empty() {
        parts.push("IOPS within noise at every point".into());
    }
    if !spread.is_empty() {
        let mut sorted = spread.clone();
        sorted.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
        let pct = |v: f64| format!("{}{:.0}%", if v < 0.0 { "-" } else { "+" }, v.abs());
        let range = if sorted.iter().all(|v| *v < 0.0) || sorted.iter().all(|v| *v > 0.0) {
            range_abs(&sorted, pct)
        } else {
            format!(
                "{}..{}",
                pct(sorted.iter().copied().fold(f64::MAX, f64::min)),
                pct(sorted.iter().copied().fold(f64::MIN, f64::max))
            )
        };
        parts.push(format!(
            "IOPS medians {range} at {} of {} points inside the repeats' min..max (not counted as moved: more repeats \
             would tell)",
            spread.len(),
            c.points.len()
        ));
    }
    let any_moved = c.points.iter().any(|p| p.iops_judgement != "within noise");
    if any_moved {
        // Each moved point's own explanation, weighed by the IOPS it lost (or gained): what
        // explains the most IOPS comes first. Counting which phase moved most at the most
        // points had named "block phase +1.9..+5.0 us" for a kernel study whose points each
        // said the submitter was CPU-bound, CPU per I/O +42%.
        for (judgement, what) in [("slower", "explained"), ("faster", "faster points explained")] {
            if let Some(s) = explained(c, judgement) {
                parts.push(format!("{what} by {s}"));
            }
        }
    } else {
        // Nothing moved: the phase most often named as moving most, with its change.
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for p in c.points.iter().filter(|p| p.moved_most != "none") {
            match counts.iter_mut().find(|(n, _)| *n == p.moved_most) {
                Some((_, k)) => *k += 1,
                None => counts.push((p.moved_most, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        if let Some(&(phase, n)) = counts.first() {
            let deltas: Vec<f64> = c.points.iter().filter(|p| p.moved_most == phase).map(|p| p.moved_ns).collect();
            let at = if n == c.points.len() {
                "at every point".to_owned()
            } else {
                format!("at {n} of {} points", c.points.len())
            };
            parts.push(format!("{phase} phase {} {at}", range(&deltas, us)));
        } else {
            parts.push("no phase moved beyond noise (or the phases do not reconcile)".into());
        }
    }
    // The cause of the points that moved, weighed by their IOPS change (every point's when none
    // moved), in its short form (before its evidence).
    let weight = |p: &PointChange| if any_moved { (p.iops.after - p.iops.before).abs() } else { 1.0 };
    let mut causes: Vec<(String, f64)> = Vec::new();
    for p in c.points.iter().filter(|p| !any_moved || p.iops_judgement != "within noise") {
        if let Some(first) = p.causes.first() {
            let short = first.split(';').next().unwrap_or(first).trim().to_owned();
            match causes.iter_mut().find(|(n, _)| *n == short) {
                Some((_, k)) => *k += weight(p),
                None => causes.push((short, weight(p))),
            }
        }
    }
    causes.sort_by(|a, b| b.1.total_cmp(&a.1));
    if let Some((cause, _)) = causes.first() {
        parts.push(format!("likely cause: {cause}"));
    }
    let mut v = parts.join("; ");
    if !c.config_changes.is_empty() {
        let keys: Vec<&str> = c.config_changes.iter().take(4).map(|x| x.key.as_str()).collect();
        v += &format!(" (configuration changed: {})", keys.join(", "));
    }
    v + "."
}

fn us(v: f64) -> String {
    format!("{}{:.1} us", if v >= 0.0 { "+" } else { "-" }, v.abs() / 1000.0)
}

/// The explanations of the points judged `judgement`, grouped by kind and weighed by the IOPS
/// each point moved: "CPU per I/O +30..+42% (the submitter CPU-bound; iommu map 0.00 -> 1.00 per
/// I/O) at 3 of 4 points (91% of the IOPS lost), device phase +47.9 us at 1 (9%)".
fn explained(c: &SweepComparison, judgement: &str) -> Option<String> {
    let moved: Vec<&PointChange> = c.points.iter().filter(|p| p.iops_judgement == judgement).collect();
    let total: f64 = moved.iter().map(|p| (p.iops.after - p.iops.before).abs()).sum();
    if moved.is_empty() {
        return None;
    }
    let mut groups: Vec<(&str, Vec<&PointChange>, f64)> = Vec::new();
    for p in &moved {
        let w = (p.iops.after - p.iops.before).abs();
        match groups.iter_mut().find(|(k, _, _)| *k == p.explanation.kind) {
            Some((_, v, sum)) => {
                v.push(p);
                *sum += w;
            }
            None => groups.push((p.explanation.kind.as_str(), vec![p], w)),
        }
    }
    groups.sort_by(|a, b| b.2.total_cmp(&a.2));
    let lost = if judgement == "slower" { "lost" } else { "gained" };
    let parts: Vec<String> = groups
        .iter()
        .enumerate()
        .map(|(i, (kind, pts, w))| {
            let share = if total > 0.0 { w / total * 100.0 } else { 0.0 };
            let at = if i == 0 {
                format!("at {} of {} points ({share:.0}% of the IOPS {lost})", pts.len(), moved.len())
            } else {
                format!("at {} ({share:.0}%)", pts.len())
            };
            let mut events: Vec<&str> = Vec::new();
            for e in pts.iter().flat_map(|p| p.explanation.events.iter()) {
                if !events.iter().any(|x| x.split(' ').take(2).eq(e.split(' ').take(2))) {
                    events.push(e);
                }
            }
            let with = if events.is_empty() { String::new() } else { format!(" with {}", events.join(", ")) };
            match *kind {
                "CPU per I/O" => {
                    let mut pcts: Vec<f64> = pts.iter().filter_map(|p| p.explanation.pct).collect();
                    pcts.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
                    let pct = |v: f64| format!("{}{:.0}%", if v < 0.0 { "-" } else { "+" }, v.abs());
                    format!("CPU per I/O {} (the submitting thread CPU-bound){with} {at}", range_abs(&pcts, pct))
                }
                "none" => format!("no phase beyond noise{with} {at}"),
                phase => {
                    let deltas: Vec<f64> = pts.iter().map(|p| p.explanation.delta_ns).collect();
                    format!("{phase} phase {}{with} {at}", range(&deltas, us))
                }
            }
        })
        .collect();
    Some(parts.join(", "))
}

/// A range of signed percentages by magnitude: "-18..-31%".
fn range_abs(sorted: &[f64], fmt: impl Fn(f64) -> String) -> String {
    match (sorted.first(), sorted.last()) {
        (Some(a), Some(b)) if (a - b).abs() >= 0.5 => {
            let (fa, fb) = (fmt(*a), fmt(*b));
            format!("{}..{}", fa.trim_end_matches('%'), fb)
        }
        (Some(a), _) => fmt(*a),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_names_the_part_of_the_axis() {
        let all = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        assert_eq!(where_on("qd", &[8.0, 16.0, 32.0], &all), "at qd >= 8");
        assert_eq!(where_on("qd", &[1.0, 2.0], &all), "at qd <= 2");
        assert_eq!(where_on("qd", &all, &all), "at every point");
        assert_eq!(where_on("bs", &[4096.0, 1048576.0], &[4096.0, 65536.0, 1048576.0]), "at bs 4K, 1M");
    }

    fn change(label: &str, x: f64, j: &'static str) -> PointChange {
        let s = Spread::default();
        PointChange {
            label: label.into(),
            line: label.split(' ').next().unwrap().into(),
            x,
            iops: Change::new(100.0, if j == "slower" { 70.0 } else { 100.0 }),
            iops_before: s,
            iops_after: s,
            iops_judgement: j,
            lat_p50_ns: Change::new(1.0, 1.0),
            lat_p99_ns: Change::new(1.0, 1.0),
            moved_most: "device",
            moved_ns: 1000.0,
            causes: vec!["IOMMU translation; iommu.mode off -> DMA".into()],
            explanation: Explanation { kind: "device".into(), delta_ns: 1000.0, pct: Some(10.0), events: vec![] },
        }
    }

    fn comparison(points: Vec<PointChange>) -> SweepComparison {
        SweepComparison {
            schema: SCHEMA,
            before: "a".into(),
            after: "b".into(),
            x_axis: "qd".into(),
            points,
            only_before: vec![],
            only_after: vec![],
            not_compared: vec![],
            config_changes: vec![],
            verdict: String::new(),
        }
    }

    #[test]
    fn the_verdict_says_where_on_the_axis_and_only_there() {
        let mut c = comparison(vec![
            change("uring qd1", 1.0, "within noise"),
            change("uring qd16", 16.0, "slower"),
            change("aio qd1", 1.0, "slower"),
            change("aio qd16", 16.0, "slower"),
        ]);
        let v = verdict(&c);
        assert!(v.starts_with("IOPS -30% at 3 of 4 points;"), "uring qd1 did not move: {v}");
        assert!(v.contains("likely cause: IOMMU translation"), "{v}");
        c.points[2].iops_judgement = "within noise";
        assert!(verdict(&c).starts_with("IOPS -30% at qd 16;"), "{}", verdict(&c));
    }

    #[test]
    fn medians_that_moved_inside_the_spread_are_said_not_counted() {
        let mut a = change("uring qd1", 1.0, "faster");
        a.iops = Change::new(5455.0, 5749.0);
        let mut b = change("uring qd16", 16.0, "within noise");
        b.iops = Change::new(29844.0, 19653.0);
        let mut e = change("uring qd64", 64.0, "within noise");
        e.iops = Change::new(30111.0, 20907.0);
        let f = change("aio qd1", 1.0, "within noise");
        let c = comparison(vec![a, b, e, f]);
        let v = verdict(&c);
        assert!(v.starts_with("IOPS +5% at 1 of 4 points; IOPS medians -31..-34% at 2 of 4 points inside"), "{v}");
        let quiet = comparison(vec![change("uring qd1", 1.0, "within noise")]);
        assert!(verdict(&quiet).starts_with("IOPS within noise at every point"), "{}", verdict(&quiet));
    }

    #[test]
    fn iops_move_only_beyond_five_percent_and_the_runs_spread() {
        let s = |median: f64, min: f64, max: f64| Spread { median, min, max };
        assert_eq!(iops_judgement(&s(100.0, 95.0, 105.0), &s(80.0, 78.0, 82.0)), "slower");
        assert_eq!(iops_judgement(&s(100.0, 95.0, 105.0), &s(96.0, 90.0, 99.0)), "within noise", "inside 5%");
        assert_eq!(iops_judgement(&s(100.0, 80.0, 120.0), &s(90.0, 85.0, 95.0)), "within noise", "ranges overlap");
        assert_eq!(iops_judgement(&s(100.0, 99.0, 101.0), &s(120.0, 118.0, 121.0)), "faster");
        assert_eq!(range_abs(&[-18.2, -31.0], |v| format!("{:.0}%", v)), "-18..-31%");
    }

    #[test]
    fn each_moved_point_explains_itself_weighed_by_the_iops_it_lost() {
        // The 6.12 kernel study's shape: the points that lost most are CPU-bound with the IOMMU's
        // maps; two others moved a phase by a few us. Counting phases had named the block phase.
        let cpu = |label: &str, x: f64, before: f64, after: f64, pct: f64| {
            let mut p = change(label, x, "slower");
            p.iops = Change::new(before, after);
            p.explanation = Explanation {
                kind: "CPU per I/O".into(),
                delta_ns: pct * 390.0,
                pct: Some(pct),
                events: vec!["iommu map 0.00 -> 1.00 per I/O".into()],
            };
            p
        };
        let blk = |label: &str, x: f64, us: f64| {
            let mut p = change(label, x, "slower");
            p.iops = Change::new(5000.0, 4300.0);
            p.explanation = Explanation { kind: "block".into(), delta_ns: us * 1000.0, pct: Some(9.0), events: vec![] };
            p
        };
        let c = comparison(vec![
            blk("uring qd4", 4.0, 1.9),
            blk("uring qd16", 16.0, 5.0),
            cpu("uring qd64", 64.0, 30000.0, 20000.0, 42.0),
            cpu("aio qd64", 64.0, 28000.0, 20200.0, 30.0),
            change("aio qd1", 1.0, "within noise"),
        ]);
        let v = verdict(&c);
        assert!(
            v.contains(
                "explained by CPU per I/O +30..+42% (the submitting thread CPU-bound) with iommu map 0.00 -> 1.00 per \
                 I/O at 2 of 4 points (93% of the IOPS lost), block phase +1.9 us..+5.0 us at 2 (7%)"
            ),
            "{v}"
        );
        // A faster point is said apart, never mixed into what the slower ones lost.
        let mut f = blk("aio qd4", 4.0, -3.0);
        f.iops_judgement = "faster";
        f.iops = Change::new(4000.0, 4800.0);
        let mut c2 = c.clone();
        c2.points.push(f);
        let v2 = verdict(&c2);
        assert!(
            v2.contains("(93% of the IOPS lost)")
                && v2.contains(
                    "faster points explained by block phase -3.0 us at 1 of 1 points (100% of the IOPS gained)"
                ),
            "{v2}"
        );
    }
}
