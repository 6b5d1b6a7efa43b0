//! `iopath sweep`: a grid over any of the job's dimensions (engine, queue depth, block size,
//! jobs, access pattern, direct or buffered, batch sizes, targets), every point repeated in an
//! order shuffled by a seed, each point summarized by its median run with the min and max. Pure:
//! the grid, the plan and the summary; the CLI runs the plan.

use crate::report::Report;
use anyhow::{bail, Result};
use serde::Serialize;

use crate::job::{EngineKind, Job, Rw, Target};
use serde::Deserialize;

pub const SCHEMA: &str = "iopath.sweep/1";

/// One engine setup of the grid: `uring`, `aio`, `psync`, `uring+sqpoll`, `uring+iopoll`,
/// `uring+batch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    pub name: String,
    pub engine: EngineKind,
    pub sqpoll: bool,
    pub iopoll: bool,
    /// Submit the whole queue depth at once and reap half of it per call (fio's
    /// iodepth_batch_submit=QD, iodepth_batch_complete_min=QD/2).
    pub batch: bool,
}

pub fn parse_variants(s: &str) -> Result<Vec<Variant>> {
    let mut out: Vec<Variant> = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let mut parts = name.split('+');
        let engine = match parts.next() {
            Some("uring") | Some("io_uring") => EngineKind::Uring,
            Some("aio") | Some("libaio") => EngineKind::Aio,
            Some("psync") => EngineKind::Psync,
            Some(e) => bail!("--engine {name}: unknown engine '{e}' (uring, aio, psync, with uring+sqpoll, uring+iopoll, uring+batch)"),
            None => unreachable!("split yields at least one part"),
        };
        let mut v = Variant { name: name.to_owned(), engine, sqpoll: false, iopoll: false, batch: false };
        for flag in parts {
            match (engine, flag) {
                (EngineKind::Uring, "sqpoll") => v.sqpoll = true,
                (EngineKind::Uring, "iopoll") => v.iopoll = true,
                (EngineKind::Uring | EngineKind::Aio, "batch") => v.batch = true,
                _ => bail!("--engine {name}: '+{flag}' does not apply to {engine} (uring+sqpoll, uring+iopoll, uring+batch, aio+batch)"),
            }
        }
        if out.iter().any(|o| o.name == v.name) {
            bail!("--engine lists {name} twice");
        }
        out.push(v);
    }
    if out.is_empty() {
        bail!("--engine: give at least one engine, e.g. uring,aio");
    }
    Ok(out)
}

pub fn parse_qds(s: &str) -> Result<Vec<u32>> {
    let mut q = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p.parse::<u32>() {
            Ok(n) if (1..=65536).contains(&n) => q.push(n),
            _ => bail!("--qd {s}: '{p}' is not a queue depth (1..65536)"),
        }
    }
    if q.is_empty() {
        bail!("--qd: give at least one queue depth, e.g. 1,4,16,64");
    }
    q.sort_unstable();
    q.dedup();
    Ok(q)
}

impl Variant {
    /// The job of this variant at one point of the grid, from the sweep's common job.
    pub fn job(&self, base: &Job, c: &Coord) -> Job {
        let mut j = base.clone();
        j.engine = self.engine;
        j.qd = c.qd;
        j.bs = c.bs as u32;
        j.jobs = c.jobs;
        j.rw = c.rw;
        j.direct = c.direct;
        j.batch_submit = c.batch_submit;
        j.batch_complete = c.batch_complete;
        j.sqpoll = self.sqpoll;
        j.iopoll = self.iopoll;
        if let Some(t) = &c.target {
            j.target = t.clone();
        }
        if self.batch {
            j.batch_submit = c.qd;
            j.batch_complete = (c.qd / 2).max(1);
        }
        if self.engine == EngineKind::Psync {
            // One synchronous I/O at a time per thread: the point's concurrency, qd x jobs as
            // the other engines keep in flight, is its number of threads. (Threads = qd alone
            // ran a point labelled "jobs=2" with one thread.)
            j.jobs = c.qd * c.jobs;
            j.qd = 1;
        }
        j
    }
}

/// The sweep's axes, each the list given (one value: not swept). Points are every combination.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axes {
    pub engine: Vec<String>,
    pub qd: Vec<u32>,
    pub bs: Vec<u64>,
    pub jobs: Vec<u32>,
    pub rw: Vec<Rw>,
    pub direct: Vec<bool>,
    pub batch_submit: Vec<u32>,
    pub batch_complete: Vec<u32>,
    /// Targets (files or devices); empty: the job's default scratch file.
    pub target: Vec<Target>,
    /// Each target's file system, in `target`'s order (None: a device, or unknown): a sweep over
    /// files on ext4, xfs and btrfs labels its points by it. Empty in sweeps made before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_fs: Vec<Option<String>>,
}

/// The numeric axes, in the order one is chosen as a chart's x axis.
pub const NUMERIC_AXES: [&str; 5] = ["qd", "bs", "jobs", "batch_submit", "batch_complete"];

impl Axes {
    fn len_of(&self, name: &str) -> usize {
        match name {
            "engine" => self.engine.len(),
            "qd" => self.qd.len(),
            "bs" => self.bs.len(),
            "jobs" => self.jobs.len(),
            "rw" => self.rw.len(),
            "direct" => self.direct.len(),
            "batch_submit" => self.batch_submit.len(),
            "batch_complete" => self.batch_complete.len(),
            "target" => self.target.len(),
            _ => 0,
        }
    }

    /// The axes with more than one value, in grid order.
    pub fn swept(&self) -> Vec<&'static str> {
        ["engine", "qd", "bs", "jobs", "rw", "direct", "batch_submit", "batch_complete", "target"]
            .into_iter()
            .filter(|a| self.len_of(a) > 1)
            .collect()
    }

    /// The charts' x axis: the first swept numeric axis (queue depth when nothing numeric is).
    pub fn x_axis(&self) -> &'static str {
        NUMERIC_AXES.into_iter().find(|a| self.len_of(a) > 1).unwrap_or("qd")
    }

    /// Every point, engine-major then queue depth then the rest (with only engine x queue depth
    /// swept, the order and so a seed's plan are those of earlier sweeps).
    pub fn points(&self) -> Vec<Coord> {
        let targets: Vec<(Option<Target>, Option<String>)> = if self.target.is_empty() {
            vec![(None, None)]
        } else {
            self.target
                .iter()
                .enumerate()
                .map(|(i, t)| (Some(t.clone()), self.target_fs.get(i).cloned().flatten()))
                .collect()
        };
        let mut out = Vec::new();
        for v in &self.engine {
            for &qd in &self.qd {
                for &bs in &self.bs {
                    for &jobs in &self.jobs {
                        for &rw in &self.rw {
                            for &direct in &self.direct {
                                for &batch_submit in &self.batch_submit {
                                    for &batch_complete in &self.batch_complete {
                                        for (target, target_fs) in &targets {
                                            out.push(Coord {
                                                variant: v.clone(),
                                                qd,
                                                bs,
                                                jobs,
                                                rw,
                                                direct,
                                                batch_submit,
                                                batch_complete,
                                                target: target.clone(),
                                                target_fs: target_fs.clone(),
                                            });
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Parses a comma list with `one`, keeping the order given and dropping repeats.
pub fn parse_list<T: PartialEq>(flag: &str, s: &str, one: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let v = one(p).map_err(|e| anyhow::anyhow!("--{flag} {s}: '{p}': {e}"))?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        bail!("--{flag}: give at least one value");
    }
    Ok(out)
}

/// The values of a numeric axis sorted ascending (a chart's x axis reads left to right).
pub fn sorted<T: PartialOrd + Copy>(mut v: Vec<T>) -> Vec<T> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v
}

/// One point of the grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coord {
    pub variant: String,
    pub qd: u32,
    pub bs: u64,
    pub jobs: u32,
    pub rw: Rw,
    pub direct: bool,
    pub batch_submit: u32,
    pub batch_complete: u32,
    /// None: the job's default target.
    pub target: Option<Target>,
    /// The target's file system, named in its label (None: a device, the default, or unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_fs: Option<String>,
}

impl Coord {
    /// An axis' value as text.
    pub fn value(&self, axis: &str) -> String {
        match axis {
            "engine" => self.variant.clone(),
            "qd" => self.qd.to_string(),
            "bs" => crate::job::fmt_bytes(self.bs),
            "jobs" => self.jobs.to_string(),
            "rw" => self.rw.to_string(),
            "direct" => if self.direct { "direct" } else { "buffered" }.to_owned(),
            "batch_submit" => self.batch_submit.to_string(),
            "batch_complete" => self.batch_complete.to_string(),
            "target" => match (&self.target, &self.target_fs) {
                (None, _) => "default".into(),
                (Some(t), None) => t.path().display().to_string(),
                (Some(t), Some(fs)) => format!("{} ({fs})", t.path().display()),
            },
            _ => String::new(),
        }
    }

    /// An axis' value as a number (numeric axes only).
    pub fn number(&self, axis: &str) -> f64 {
        match axis {
            "qd" => self.qd as f64,
            "bs" => self.bs as f64,
            "jobs" => self.jobs as f64,
            "batch_submit" => self.batch_submit as f64,
            "batch_complete" => self.batch_complete as f64,
            _ => f64::NAN,
        }
    }

    /// "uring qd8" and each other swept axis: "uring qd8 bs=64K /dev/vdb".
    pub fn label(&self, swept: &[&str]) -> String {
        self.label_without(swept, "")
    }

    /// The label without one axis: the name of the line a chart over that axis draws.
    pub fn label_without(&self, swept: &[&str], x: &str) -> String {
        let mut s = self.variant.clone();
        if x != "qd" {
            s += &format!(" qd{}", self.qd);
        }
        for a in swept.iter().filter(|a| !["engine", "qd", x].contains(a)) {
            match *a {
                "rw" | "direct" | "target" => s += &format!(" {}", self.value(a)),
                _ => s += &format!(" {}={}", a.replace('_', "-"), self.value(a)),
            }
        }
        s
    }
}

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Planned {
    /// Index into `Axes::points`.
    pub point: usize,
    /// 1-based repetition of this point.
    pub rep: u32,
}

/// splitmix64: a small, well-mixed generator, so a seed gives the same order everywhere.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every point `repeat` times, in an order shuffled by `seed` (Fisher-Yates): drift of a shared
/// machine spreads over all points instead of biasing the last ones.
pub fn plan(npoints: usize, repeat: u32, seed: u64) -> Vec<Planned> {
    let mut runs: Vec<Planned> =
        (0..npoints).flat_map(|point| (1..=repeat).map(move |rep| Planned { point, rep })).collect();
    let mut s = seed;
    for i in (1..runs.len()).rev() {
        let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
        runs.swap(i, j);
    }
    runs
}

/// A latency percentile: (percentile, ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pct {
    pub p: f64,
    pub ns: f64,
}

/// What one run contributes to its point, read from its report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    #[serde(flatten)]
    pub coord: Coord,
    pub rep: u32,
    /// The run's report, relative to the sweep folder.
    pub report: String,
    pub iops: f64,
    pub lat_mean_ns: f64,
    pub lat_p50_ns: f64,
    pub lat_p99_ns: f64,
    /// The latency percentiles of `--percentiles`.
    #[serde(default)]
    pub lat_percentiles_ns: Vec<Pct>,
    pub cpu_per_io_ns: f64,
    /// I/Os in flight on average (Little's law), against the requested depth.
    pub inflight_avg: f64,
    /// Phase means (submission, block, device, completion); None when the run was not traced or
    /// its phase table did not reconcile with its latency (then no measurement to plot).
    pub phases_ns: Option<[f64; 4]>,
    /// IRQs per I/O; None when not traced.
    pub irq_per_io: Option<f64>,
    pub ctx_per_io: f64,
    pub partial: bool,
}

pub fn run_result(r: &Report, coord: &Coord, rep: u32, report: &str) -> RunResult {
    let t = r.trace.as_ref();
    let reconciled = t.filter(|t| t.reconciliation.as_ref().is_some_and(|c| c.reconciled));
    RunResult {
        coord: coord.clone(),
        rep,
        report: report.to_owned(),
        iops: r.iops,
        lat_mean_ns: r.lat_ns.mean as f64,
        lat_p50_ns: r.lat_ns.p50 as f64,
        lat_p99_ns: r.lat_ns.p99 as f64,
        lat_percentiles_ns: r.lat_percentiles_ns.iter().map(|p| Pct { p: p.p, ns: p.ns as f64 }).collect(),
        cpu_per_io_ns: r.cpu.per_io_ns,
        inflight_avg: r.inflight_avg,
        phases_ns: reconciled.map(|t| {
            let p = &t.phases;
            [p.submission.mean_ns, p.block.mean_ns, p.device.mean_ns, p.completion.mean_ns].map(|v| v as f64)
        }),
        irq_per_io: t.map(|t| t.irq.per_io),
        ctx_per_io: r.ctx_switches.per_io,
        partial: r.partial,
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// A percentile's spread over a point's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PctSpread {
    pub p: f64,
    #[serde(flatten)]
    pub ns: Spread,
}

/// One grid point: its median run (by IOPS) and the spread over its runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    #[serde(flatten)]
    pub coord: Coord,
    /// Its name on the page: the engine, the queue depth and every other swept axis.
    pub label: String,
    pub runs: usize,
    /// The median run's report.
    pub median_report: String,
    pub iops: Spread,
    pub lat_mean_ns: Spread,
    pub lat_p50_ns: Spread,
    pub lat_p99_ns: Spread,
    /// Each percentile of `--percentiles`.
    #[serde(default)]
    pub lat_percentiles_ns: Vec<PctSpread>,
    pub cpu_per_io_ns: Spread,
    pub inflight_avg: Spread,
    /// The median run's phase means (None: not traced, or its table did not reconcile).
    pub phases_ns: Option<[f64; 4]>,
    pub irq_per_io: Option<f64>,
    pub ctx_per_io: f64,
}

impl Point {
    /// A latency percentile's spread over the point's runs (sweeps from before `--percentiles`
    /// carry only p50 and p99); None when the point does not have it.
    pub fn percentile(&self, p: f64) -> Option<Spread> {
        match self.lat_percentiles_ns.iter().find(|x| x.p == p) {
            Some(x) => Some(x.ns),
            None if p == 50.0 => Some(self.lat_p50_ns),
            None if p == 99.0 => Some(self.lat_p99_ns),
            None => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepReport {
    pub schema: String,
    pub seed: u64,
    pub repeat: u32,
    pub variants: Vec<String>,
    pub qds: Vec<u32>,
    /// Every axis with its values, and those swept (more than one value).
    #[serde(default)]
    pub axes: Option<Axes>,
    #[serde(default)]
    pub swept: Vec<String>,
    /// The axis the charts put on x.
    #[serde(default = "default_x")]
    pub x_axis: String,
    /// The latency percentiles each point carries (`--percentiles`).
    #[serde(default = "crate::job::default_percentiles")]
    pub percentiles: Vec<f64>,
    pub traced: bool,
    /// Points with fewer runs than `repeat` (Ctrl-C, or a failed run) make the sweep partial.
    pub partial: bool,
    pub points: Vec<Point>,
    /// Every run, in the order it ran.
    pub runs: Vec<RunResult>,
    /// Runs that failed, with why: missing from their point, never silently.
    pub failed: Vec<FailedRun>,
}

impl SweepReport {
    /// The swept axes' names.
    pub fn swept_axes(&self) -> Vec<&str> {
        self.swept.iter().map(String::as_str).collect()
    }

    /// A point's line on the charts: its label without the x axis ("uring", "aio bs=64K").
    pub fn line_of(&self, p: &Point) -> String {
        p.coord.label_without(&self.swept_axes(), &self.x_axis)
    }

    /// The charts' lines, in the order of their first point.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in &self.points {
            let n = self.line_of(p);
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }
}

fn default_x() -> String {
    "qd".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FailedRun {
    #[serde(flatten)]
    pub coord: Coord,
    pub rep: u32,
    pub error: String,
}

fn spread(mut v: Vec<f64>) -> Spread {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => Spread::default(),
        n => Spread { median: v[(n - 1) / 2], min: v[0], max: v[n - 1] },
    }
}

pub fn summarize(
    axes: &Axes,
    repeat: u32,
    seed: u64,
    traced: bool,
    percentiles: &[f64],
    runs: Vec<RunResult>,
    failed: Vec<FailedRun>,
) -> SweepReport {
    let swept = axes.swept();
    let mut points = Vec::new();
    let mut partial = false;
    for c in axes.points() {
        let mine: Vec<&RunResult> = runs.iter().filter(|r| r.coord == c).collect();
        partial |= mine.len() < repeat as usize || mine.iter().any(|r| r.partial);
        if mine.is_empty() {
            continue;
        }
        // The median run by IOPS (the lower middle of an even count): its numbers are one
        // real run's, not a mix of several.
        let mut by_iops = mine.clone();
        by_iops.sort_by(|a, b| a.iops.total_cmp(&b.iops));
        let med = by_iops[(by_iops.len() - 1) / 2];
        let col = |f: &dyn Fn(&RunResult) -> f64| spread(mine.iter().map(|r| f(r)).collect());
        let pcts = percentiles
            .iter()
            .map(|&p| PctSpread {
                p,
                ns: spread(
                    mine.iter().filter_map(|r| r.lat_percentiles_ns.iter().find(|x| x.p == p).map(|x| x.ns)).collect(),
                ),
            })
            .collect();
        points.push(Point {
            label: c.label(&swept),
            coord: c,
            runs: mine.len(),
            median_report: med.report.clone(),
            iops: Spread { median: med.iops, ..col(&|r| r.iops) },
            lat_mean_ns: col(&|r| r.lat_mean_ns),
            lat_p50_ns: col(&|r| r.lat_p50_ns),
            lat_p99_ns: col(&|r| r.lat_p99_ns),
            lat_percentiles_ns: pcts,
            cpu_per_io_ns: col(&|r| r.cpu_per_io_ns),
            inflight_avg: col(&|r| r.inflight_avg),
            phases_ns: med.phases_ns,
            irq_per_io: med.irq_per_io,
            ctx_per_io: med.ctx_per_io,
        });
    }
    SweepReport {
        schema: SCHEMA.into(),
        seed,
        repeat,
        variants: axes.engine.clone(),
        qds: axes.qd.clone(),
        swept: swept.iter().map(|s| s.to_string()).collect(),
        x_axis: axes.x_axis().into(),
        axes: Some(axes.clone()),
        percentiles: percentiles.to_vec(),
        traced,
        partial: partial || !failed.is_empty(),
        points,
        runs,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_and_qds_parse_or_say_why() {
        let v = parse_variants("uring,aio,uring+sqpoll,uring+batch,psync").unwrap();
        assert_eq!(v.len(), 5);
        assert!(v[2].sqpoll && v[2].engine == EngineKind::Uring);
        assert!(v[3].batch);
        assert!(parse_variants("aio+sqpoll").unwrap_err().to_string().contains("does not apply to"));
        assert!(parse_variants("spdk").unwrap_err().to_string().contains("unknown engine 'spdk'"));
        assert!(parse_variants("uring,uring").unwrap_err().to_string().contains("twice"));
        assert_eq!(parse_qds("32,1,4,4").unwrap(), vec![1, 4, 32]);
        assert!(parse_qds("1,0").unwrap_err().to_string().contains("'0'"));
    }

    fn axes(engines: &str, qds: &[u32]) -> Axes {
        Axes {
            engine: parse_variants(engines).unwrap().into_iter().map(|v| v.name).collect(),
            qd: qds.to_vec(),
            bs: vec![4096],
            jobs: vec![1],
            rw: vec![Rw::Randread],
            direct: vec![true],
            batch_submit: vec![1],
            batch_complete: vec![1],
            target: Vec::new(),
            target_fs: Vec::new(),
        }
    }

    #[test]
    fn plan_is_a_seeded_permutation_of_the_grid() {
        let a = plan(6, 3, 42);
        assert_eq!(a.len(), 18);
        assert_eq!(a, plan(6, 3, 42), "same seed, same order");
        assert_ne!(a, plan(6, 3, 43), "another seed, another order");
        let mut sorted = a.clone();
        sorted.sort_by_key(|p| (p.point, p.rep));
        let all: Vec<Planned> = (0..6).flat_map(|point| (1..=3).map(move |rep| Planned { point, rep })).collect();
        assert_eq!(sorted, all);
    }

    #[test]
    fn files_on_several_file_systems_are_labelled_by_theirs() {
        let mut a = axes("uring", &[16]);
        a.target = ["/mnt/e/t.dat", "/mnt/b/t.dat"].iter().map(|p| Target::File(p.into())).collect();
        a.target_fs = vec![Some("ext4".into()), Some("btrfs".into())];
        let pts = a.points();
        assert_eq!(pts[0].label(&a.swept()), "uring qd16 /mnt/e/t.dat (ext4)");
        assert_eq!(pts[1].label(&a.swept()), "uring qd16 /mnt/b/t.dat (btrfs)");
        // Unknown (a device, a path with nothing of it yet): the path alone.
        a.target_fs = vec![None, None];
        assert_eq!(a.points()[1].label(&a.swept()), "uring qd16 /mnt/b/t.dat");
    }

    #[test]
    fn any_axis_sweeps_and_names_its_points() {
        let mut a = axes("uring,aio", &[1, 8]);
        a.bs = vec![4096, 1 << 20];
        a.direct = vec![true, false];
        let pts = a.points();
        assert_eq!(pts.len(), 2 * 2 * 2 * 2);
        assert_eq!(a.swept(), vec!["engine", "qd", "bs", "direct"]);
        assert_eq!(a.x_axis(), "qd");
        assert_eq!(pts[0].label(&a.swept()), "uring qd1 bs=4K direct");
        assert_eq!(pts[0].label_without(&a.swept(), "bs"), "uring qd1 direct");
        assert_eq!(pts[1].label(&a.swept()), "uring qd1 bs=4K buffered");
        // Engine-major, then queue depth: a plain engine x qd grid keeps its old order.
        assert_eq!((pts[4].variant.as_str(), pts[4].qd), ("uring", 8));
        a.qd = vec![32];
        assert_eq!(a.x_axis(), "bs", "the first swept numeric axis");
        let v = &parse_variants("psync,uring+batch").unwrap();
        let base = crate::job::Job::example();
        let j = v[0].job(&base, &pts[3]);
        assert_eq!((j.jobs, j.qd, j.bs, j.direct), (1, 1, 1 << 20, false), "psync: threads = qd");
        // A jobs axis: the psync point labelled jobs=2 runs two threads per unit of qd.
        let mut c = pts[3].clone();
        (c.qd, c.jobs) = (4, 2);
        let j = v[0].job(&base, &c);
        assert_eq!((j.jobs, j.qd), (8, 1), "psync: threads = qd x jobs");
        let j = v[1].job(&base, &pts[5]);
        assert_eq!((j.batch_submit, j.batch_complete), (8, 4), "the batch variant sets both");
        let sizes = parse_list("bs", "4k,32m,4k", crate::job::parse_size).unwrap();
        assert_eq!(sizes, vec![4096, 32 << 20]);
        assert!(parse_list("bs", "4k,x", crate::job::parse_size).unwrap_err().to_string().contains("--bs 4k,x: 'x'"));
    }

    #[test]
    fn points_take_the_median_run_and_the_spread() {
        let a = axes("uring", &[8, 16]);
        let c = a.points()[0].clone();
        let run = |rep, iops, lat| RunResult {
            coord: c.clone(),
            rep,
            report: format!("r{rep}.json"),
            iops,
            lat_mean_ns: lat,
            lat_p50_ns: 0.0,
            lat_p99_ns: 0.0,
            lat_percentiles_ns: vec![Pct { p: 99.9, ns: lat * 10.0 }],
            cpu_per_io_ns: 0.0,
            inflight_avg: 0.0,
            phases_ns: Some([iops, 0.0, 0.0, 0.0]),
            irq_per_io: None,
            ctx_per_io: 0.0,
            partial: false,
        };
        let s = summarize(
            &a,
            3,
            1,
            true,
            &[99.9],
            vec![run(1, 300.0, 9.0), run(2, 100.0, 30.0), run(3, 200.0, 15.0)],
            Vec::new(),
        );
        assert!(s.partial, "qd16 never ran");
        assert_eq!(s.points.len(), 1);
        let p = &s.points[0];
        assert_eq!(p.median_report, "r3.json");
        assert_eq!(p.label, "uring qd8");
        assert_eq!(p.iops, Spread { median: 200.0, min: 100.0, max: 300.0 });
        assert_eq!(p.lat_mean_ns, Spread { median: 15.0, min: 9.0, max: 30.0 });
        assert_eq!(p.lat_percentiles_ns[0].ns, Spread { median: 150.0, min: 90.0, max: 300.0 });
        assert_eq!(p.phases_ns.map(|p| p[0]), Some(200.0), "the median run's phases");
        // The JSON keeps the fields earlier sweeps had (variant, qd) and reads back.
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!((v["points"][0]["variant"].as_str(), v["points"][0]["qd"].as_u64()), (Some("uring"), Some(8)));
        let back: SweepReport = serde_json::from_value(v).unwrap();
        assert_eq!(back.points, s.points);
    }
}
