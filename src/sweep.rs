//! `iopath sweep`: the engine x queue-depth grid, every point repeated in an order shuffled by a
//! seed, each point summarized by its median run with the min and max. Pure: the plan and the
//! summary; the CLI runs the plan.

use crate::report::Report;
use anyhow::{bail, Result};
use serde::Serialize;

use crate::job::{EngineKind, Job};

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
    /// The job of this variant at queue depth `qd`, from the sweep's common job.
    pub fn job(&self, base: &Job, qd: u32) -> Job {
        let mut j = base.clone();
        j.engine = self.engine;
        j.qd = qd;
        j.sqpoll = self.sqpoll;
        j.iopoll = self.iopoll;
        if self.batch {
            j.batch_submit = qd;
            j.batch_complete = (qd / 2).max(1);
        }
        if self.engine == EngineKind::Psync {
            // One synchronous I/O at a time per job: queue depth is the number of jobs.
            j.jobs = qd;
            j.qd = 1;
        }
        j
    }
}

/// One run of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Planned {
    pub variant: usize,
    pub qd: u32,
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

/// Every (variant, qd) `repeat` times, in an order shuffled by `seed` (Fisher-Yates): drift of a
/// shared machine spreads over all points instead of biasing the last ones.
pub fn plan(nvariants: usize, qds: &[u32], repeat: u32, seed: u64) -> Vec<Planned> {
    let mut runs: Vec<Planned> = (0..nvariants)
        .flat_map(|v| qds.iter().flat_map(move |&qd| (1..=repeat).map(move |rep| Planned { variant: v, qd, rep })))
        .collect();
    let mut s = seed;
    for i in (1..runs.len()).rev() {
        let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
        runs.swap(i, j);
    }
    runs
}

/// What one run contributes to its point, read from its report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunResult {
    pub variant: String,
    pub qd: u32,
    pub rep: u32,
    /// The run's report, relative to the sweep folder.
    pub report: String,
    pub iops: f64,
    pub lat_mean_ns: f64,
    pub lat_p50_ns: f64,
    pub lat_p99_ns: f64,
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

pub fn run_result(r: &Report, variant: &str, qd: u32, rep: u32, report: &str) -> RunResult {
    let t = r.trace.as_ref();
    let reconciled = t.filter(|t| t.reconciliation.as_ref().is_some_and(|c| c.reconciled));
    RunResult {
        variant: variant.to_owned(),
        qd,
        rep,
        report: report.to_owned(),
        iops: r.iops,
        lat_mean_ns: r.lat_ns.mean as f64,
        lat_p50_ns: r.lat_ns.p50 as f64,
        lat_p99_ns: r.lat_ns.p99 as f64,
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// One grid point: its median run (by IOPS) and the spread over its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub variant: String,
    pub qd: u32,
    pub runs: usize,
    /// The median run's report.
    pub median_report: String,
    pub iops: Spread,
    pub lat_mean_ns: Spread,
    pub lat_p50_ns: Spread,
    pub lat_p99_ns: Spread,
    pub cpu_per_io_ns: Spread,
    pub inflight_avg: Spread,
    /// The median run's phase means (None: not traced, or its table did not reconcile).
    pub phases_ns: Option<[f64; 4]>,
    pub irq_per_io: Option<f64>,
    pub ctx_per_io: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    pub schema: &'static str,
    pub seed: u64,
    pub repeat: u32,
    pub variants: Vec<String>,
    pub qds: Vec<u32>,
    pub traced: bool,
    /// Points with fewer runs than `repeat` (Ctrl-C, or a failed run) make the sweep partial.
    pub partial: bool,
    pub points: Vec<Point>,
    /// Every run, in the order it ran.
    pub runs: Vec<RunResult>,
    /// Runs that failed, with why: missing from their point, never silently.
    pub failed: Vec<FailedRun>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FailedRun {
    pub variant: String,
    pub qd: u32,
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
    variants: &[Variant],
    qds: &[u32],
    repeat: u32,
    seed: u64,
    traced: bool,
    runs: Vec<RunResult>,
    failed: Vec<FailedRun>,
) -> SweepReport {
    let mut points = Vec::new();
    let mut partial = false;
    for v in variants {
        for &qd in qds {
            let mine: Vec<&RunResult> = runs.iter().filter(|r| r.variant == v.name && r.qd == qd).collect();
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
            points.push(Point {
                variant: v.name.clone(),
                qd,
                runs: mine.len(),
                median_report: med.report.clone(),
                iops: Spread { median: med.iops, ..col(&|r| r.iops) },
                lat_mean_ns: col(&|r| r.lat_mean_ns),
                lat_p50_ns: col(&|r| r.lat_p50_ns),
                lat_p99_ns: col(&|r| r.lat_p99_ns),
                cpu_per_io_ns: col(&|r| r.cpu_per_io_ns),
                inflight_avg: col(&|r| r.inflight_avg),
                phases_ns: med.phases_ns,
                irq_per_io: med.irq_per_io,
                ctx_per_io: med.ctx_per_io,
            });
        }
    }
    SweepReport {
        schema: SCHEMA,
        seed,
        repeat,
        variants: variants.iter().map(|v| v.name.clone()).collect(),
        qds: qds.to_vec(),
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

    #[test]
    fn plan_is_a_seeded_permutation_of_the_grid() {
        let a = plan(2, &[1, 8, 32], 3, 42);
        assert_eq!(a.len(), 18);
        assert_eq!(a, plan(2, &[1, 8, 32], 3, 42), "same seed, same order");
        assert_ne!(a, plan(2, &[1, 8, 32], 3, 43), "another seed, another order");
        let mut sorted = a.clone();
        sorted.sort_by_key(|p| (p.variant, p.qd, p.rep));
        assert_eq!(sorted, plan_sorted(2, &[1, 8, 32], 3));
    }

    fn plan_sorted(n: usize, qds: &[u32], repeat: u32) -> Vec<Planned> {
        let mut v = Vec::new();
        for variant in 0..n {
            for &qd in qds {
                for rep in 1..=repeat {
                    v.push(Planned { variant, qd, rep });
                }
            }
        }
        v
    }

    #[test]
    fn points_take_the_median_run_and_the_spread() {
        let vars = parse_variants("uring").unwrap();
        let run = |rep, iops, lat| RunResult {
            variant: "uring".into(),
            qd: 8,
            rep,
            report: format!("r{rep}.json"),
            iops,
            lat_mean_ns: lat,
            phases_ns: Some([iops, 0.0, 0.0, 0.0]),
            ..Default::default()
        };
        let s = summarize(
            &vars,
            &[8, 16],
            3,
            1,
            true,
            vec![run(1, 300.0, 9.0), run(2, 100.0, 30.0), run(3, 200.0, 15.0)],
            Vec::new(),
        );
        assert!(s.partial, "qd16 never ran");
        assert_eq!(s.points.len(), 1);
        let p = &s.points[0];
        assert_eq!(p.median_report, "r3.json");
        assert_eq!(p.iops, Spread { median: 200.0, min: 100.0, max: 300.0 });
        assert_eq!(p.lat_mean_ns, Spread { median: 15.0, min: 9.0, max: 30.0 });
        assert_eq!(p.phases_ns.map(|p| p[0]), Some(200.0), "the median run's phases");
    }
}
