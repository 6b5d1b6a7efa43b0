//! `iopath compare`: two runs -> what changed, by how much, and the most likely cause. Pure: the
//! reports' JSON and their folded stacks in, a `Comparison` out (the CLI reads the files and
//! writes the differential flamegraph).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::Value;

use crate::aggregate::PhaseStats;
use crate::flame::fold;
use crate::flame::iopath_frames::{family, Family};
use crate::report::Report;

const PHASES: [&str; 4] = ["submission", "block", "device", "completion"];
pub const SCHEMA: &str = "iopath.compare/1";
/// NVMe parts of the block and device phases (reports of NVMe targets only), and what they hold.
const NVME_PHASES: [(&str, &str); 3] = [
    ("nvme_driver", "command + DMA map, in block"),
    ("nvme_device", "issue -> driver completion, in device"),
    ("nvme_end", "end of request, in device"),
];

/// Mean and percentiles of one latency, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stat {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    /// The mean width of the bound on the phase's end or start where it is bounded, not timed
    /// (io_uring's CQ and SQ rings: `cq_ring_bound`, `sq_ring_bound`): a change within it is
    /// noise like any other.
    #[serde(skip_serializing_if = "crate::compare::is_zero_f64")]
    pub bound: f64,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// One side of a comparison, read from an iopath report or fio's JSON output.
#[derive(Clone, Debug, Default)]
pub struct Side {
    pub source: String,
    /// "uring randread 4K qd32 on /dev/loop0, kernel 6.18" or "fio 3.33: job t".
    pub label: String,
    pub iops: f64,
    pub cpu_per_io_ns: Option<f64>,
    /// I/Os in flight on average (Little's law) and the depth asked for (qd x jobs).
    pub inflight: Option<(f64, f64)>,
    pub lat: Stat,
    /// None for fio (latency only, no phases).
    pub phases: Option<BTreeMap<&'static str, Stat>>,
    /// The NVMe sub-phases, when the report has them.
    pub nvme_phases: BTreeMap<&'static str, Stat>,
    /// Events per I/O (irq, ctx_switches, iommu_map ...), when traced.
    pub per_io: BTreeMap<String, f64>,
    /// Configuration and job, flattened to dotted keys.
    pub config: BTreeMap<String, String>,
    /// On-CPU folded stacks, when the run had --flamegraph.
    pub folded: Option<Vec<(String, u64)>>,
    /// Why its phase table does not add up to the application's latency (None: it does, or
    /// the report predates the check; empty reasons are never stored).
    pub unreconciled: Option<Vec<String>>,
}

/// One phase of a report's `phases` object (missing fields read as 0).
fn stat_of(p: &PhaseStats) -> Stat {
    Stat { count: p.count, mean: p.mean_ns as f64, p50: p.p50_ns as f64, p99: p.p99_ns as f64, bound: 0.0 }
}

/// `s` with the mean width of a ring bound on it (None: timed, not bounded).
fn bounded(mut s: Stat, b: &Option<PhaseStats>) -> Stat {
    s.bound = b.as_ref().map_or(0.0, |b| b.mean_ns as f64);
    s
}

/// Reads one side. `folded` is the content of its oncpu.folded, if the caller found one.
pub fn side_from_json(v: &Value, source: &str, folded: Option<&str>) -> Result<Side> {
    if v.get("fio version").is_some() {
        return fio_side(v, source);
    }
    match v.get("schema").and_then(Value::as_str) {
        Some(crate::report::SCHEMA) => {}
        Some(other) => bail!(
            "{source}: schema '{other}' is not one iopath compare reads (iopath.report/1, or fio --output-format=json)"
        ),
        None => bail!(
            "{source}: not an iopath report (no \"schema\") nor fio JSON (no \"fio version\"): give report.json from \
             'iopath trace --out DIR' / '--json FILE', or fio --output-format=json output"
        ),
    }
    // Typed: a field renamed or gone fails here, by name, instead of reading as 0.
    let r: Report = serde_json::from_value(v.clone()).map_err(|e| {
        anyhow::anyhow!(
            "{source}: an iopath.report/1 this version cannot read ({e}): damaged, or from another version?"
        )
    })?;
    side_from_report(&r, source, folded)
}

/// One side from a typed report.
pub fn side_from_report(r: &Report, source: &str, folded: Option<&str>) -> Result<Side> {
    let t = r.trace.as_ref();
    let lat = Stat {
        count: r.ios,
        mean: r.lat_ns.mean as f64,
        p50: r.lat_ns.p50 as f64,
        p99: r.lat_ns.p99 as f64,
        bound: 0.0,
    };
    // The block phases of the I/Os followed to a device; a run the page cache served has none
    // (its time is in the page-cache rows, compared through its own counts below), and four
    // zeros would read as "every phase within noise".
    let phases = t.filter(|t| t.phases.total.count > 0).map(|t| {
        let p = &t.phases;
        vec![
            ("submission", bounded(stat_of(&p.submission), &p.sq_ring_bound)),
            ("block", stat_of(&p.block)),
            ("device", stat_of(&p.device)),
            ("completion", bounded(stat_of(&p.completion), &p.cq_ring_bound)),
        ]
        .into_iter()
        .collect()
    });
    let nvme_phases = t
        .map(|t| {
            let p = &t.phases;
            [("nvme_driver", &p.nvme_driver), ("nvme_device", &p.nvme_device), ("nvme_end", &p.nvme_end)]
                .into_iter()
                .filter_map(|(n, s)| Some((n, stat_of(s.as_ref()?))))
                .collect()
        })
        .unwrap_or_default();
    let mut per_io = BTreeMap::new();
    per_io.insert("ctx_switches".to_owned(), r.ctx_switches.per_io);
    // The workers' run-queue time from schedstat: known traced or not, lean or not.
    if let Some(d) = &r.run_delay {
        per_io.insert("run_delay_us".to_owned(), d.per_io_ns / 1000.0);
    }
    if let Some(t) = t {
        trace_counts(r, t, &mut per_io);
    }
    let mut config = BTreeMap::new();
    flatten("", &serde_json::to_value(&r.config)?, &mut config);
    if let Some(j) = &r.job {
        flatten("job", &serde_json::to_value(j)?, &mut config);
    }
    let kernel = &r.system.kernel;
    let label = match (&r.job, &r.process) {
        (Some(j), _) => format!(
            "{} {} {} qd{} on {}, kernel {kernel}",
            j.engine,
            j.rw,
            crate::job::fmt_bytes(u64::from(j.bs)),
            j.qd,
            r.target.as_ref().map_or_else(|| j.target.path().display().to_string(), |t| t.path.display().to_string())
        ),
        (None, Some(p)) => format!("{} (traced), kernel {kernel}", p.command),
        _ => source.to_owned(),
    };
    Ok(Side {
        source: source.to_owned(),
        label,
        iops: r.iops,
        cpu_per_io_ns: Some(r.cpu.per_io_ns),
        inflight: r.job.as_ref().map(|j| (r.inflight_avg, f64::from(j.qd) * f64::from(j.jobs))),
        lat,
        phases,
        nvme_phases,
        per_io,
        config,
        folded: folded.map(fold::parse).transpose()?,
        unreconciled: t.and_then(|t| t.reconciliation.as_ref()).filter(|x| !x.reconciled).map(|x| {
            if x.reasons.is_empty() {
                vec!["its phase table does not reconcile".to_owned()]
            } else {
                x.reasons.clone()
            }
        }),
    })
}

/// The trace's counts per I/O a comparison weighs: interrupts, softirqs, IOMMU and DMA maps,
/// scheduler waits, system calls, route shares, the page cache's hits and waits.
fn trace_counts(r: &Report, t: &crate::aggregate::TraceSummary, per_io: &mut BTreeMap<String, f64>) {
    for (key, x) in [
        ("irq", Some(t.irq.per_io)),
        ("softirq_block", t.softirq_block.as_ref().map(|v| v.per_io)),
        ("iommu_map", Some(t.iommu_map.per_io)),
        ("iommu_unmap", Some(t.iommu_unmap.per_io)),
        ("dma_map", Some(t.dma_map.per_io)),
        ("dma_unmap", Some(t.dma_unmap.per_io)),
        ("preempted_us", t.preempted_ns.as_ref().map(|v| v.per_io / 1000.0)),
        ("runq_wait_us", t.runq_wait_ns.as_ref().map(|v| v.per_io / 1000.0)),
    ] {
        // --lean hooks no softirq or scheduler event: unknown, so left out (never a zero).
        let Some(x) = x else { continue };
        per_io.insert(key.to_owned(), x);
    }
    // System calls per I/O by name (the seeds' `strace -c`), those run at least once in 100 I/Os.
    for sc in t.syscalls.iter().filter(|sc| sc.per_io >= 0.01) {
        per_io.insert(format!("syscall {}", sc.name), sc.per_io);
    }
    // Route shares: of the followed I/Os, how many took each route (throttled, io-wq ...).
    for rt in &t.routes {
        per_io.insert(format!("share {}", rt.key), rt.share);
    }
    // The page cache: how often buffered reads found their data, what they waited for, and
    // how long writes were held by dirty throttling (per call, of the calls made).
    if let Some(pc) = &t.page_cache {
        if let Some(rd) = &pc.reads {
            per_io.insert("pc read_hit_ratio".to_owned(), pc.read_hit_ratio);
            per_io.insert("pc read_waited_us".to_owned(), rd.waited.mean_ns as f64 / 1000.0);
            if let Some(q) = pc.requests_per_read {
                per_io.insert("pc requests_per_read".to_owned(), q);
            }
        }
        if let Some(th) = pc.writes.as_ref().and_then(|w| w.waits.as_ref()) {
            per_io.insert("pc write_throttled_us".to_owned(), th.throttled.mean_ns as f64 / 1000.0);
        }
    }
    // io_uring reads of buffered files: served inside the submitting call is a hit, and the
    // kernel's time of the others (waiting for their page) spread over every request is the
    // wait per read. Reads only: ext4 punts buffered writes to io-wq, which is no miss.
    let uring_reads = t.routes.iter().any(|rt| rt.key == "uring_cached" && rt.writes == 0);
    if let Some(u) = t.uring_cached.as_ref().filter(|_| uring_reads && t.page_cache.is_none()) {
        let waited = u.not_inline.as_ref().map_or(0.0, |n| n.mean_ns as f64 * n.count as f64);
        per_io.insert("pc read_hit_ratio".to_owned(), u.inline_ratio);
        per_io.insert("pc read_waited_us".to_owned(), waited / u.total.count.max(1) as f64 / 1000.0);
        per_io.insert("pc bios_per_read".to_owned(), u.bios as f64 / u.total.count.max(1) as f64);
    }
    per_io.insert("ctx_involuntary".to_owned(), if r.ios > 0 { t.ctx_involuntary as f64 / r.ios as f64 } else { 0.0 });
}

/// fio --output-format=json: the first job's reads (or writes), latency only.
fn fio_side(v: &Value, source: &str) -> Result<Side> {
    let Some(job) = v.pointer("/jobs/0") else { bail!("{source}: fio JSON without jobs") };
    let dir = if job.pointer("/read/io_bytes").and_then(Value::as_u64).unwrap_or(0) > 0 { "read" } else { "write" };
    let d = &job[dir];
    let g = |p: &str| d.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
    let mut options = BTreeMap::new();
    // A job's own options override the global section's.
    if let Some(o) = v.pointer("/global options") {
        flatten("", o, &mut options);
    }
    if let Some(o) = job.get("job options") {
        flatten("", o, &mut options);
    }
    let config = fio_job(&options);
    // fio counts the job's context switches (getrusage), as iopath counts the traced threads'.
    let mut per_io = BTreeMap::new();
    let ios: u64 = ["read", "write"].iter().filter_map(|d| job.pointer(&format!("/{d}/total_ios"))?.as_u64()).sum();
    if let (Some(ctx), true) = (job.get("ctx").and_then(Value::as_f64), ios > 0) {
        per_io.insert("ctx_switches".to_owned(), ctx / ios as f64);
    }
    Ok(Side {
        source: source.to_owned(),
        label: format!(
            "{}: job {}",
            v["fio version"].as_str().unwrap_or("fio"),
            job["jobname"].as_str().unwrap_or("?")
        ),
        iops: g("/iops"),
        cpu_per_io_ns: None,
        inflight: None,
        lat: Stat {
            count: d.pointer("/total_ios").and_then(Value::as_u64).unwrap_or(0),
            mean: g("/lat_ns/mean"),
            p50: g("/clat_ns/percentile/50.000000"),
            p99: g("/clat_ns/percentile/99.000000"),
            bound: 0.0,
        },
        phases: None,
        nvme_phases: BTreeMap::new(),
        per_io,
        config,
        folded: None,
        unreconciled: None,
    })
}

/// fio's job options in iopath's own job vocabulary (`job.engine`, `job.qd`, `job.bs` in bytes ...),
/// so an iopath report and a fio run of the same workload compare setting by setting. fio's
/// defaults fill what the job file left out (iodepth 1, bs 4k, rw read, buffered, one job): fio
/// ran with them. Options iopath has no word for stay under `job.fio.*`, compared with fio only.
fn fio_job(o: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let get = |k: &str| o.get(k).map(String::as_str);
    let truthy = |k: &str| get(k).is_some_and(|v| v.is_empty() || v == "1" || v == "true");
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        out.insert(format!("job.{k}"), v);
    };
    let engine = get("ioengine").unwrap_or("psync");
    put(
        "engine",
        match engine {
            "io_uring" => "uring",
            "libaio" => "aio",
            "psync" | "pvsync" | "pvsync2" | "sync" => "psync",
            other => other,
        }
        .to_owned(),
    );
    put("qd", get("iodepth").unwrap_or("1").to_owned());
    let bs = get("bs").or(get("blocksize")).unwrap_or("4k");
    put("bs", crate::job::parse_size(bs).map_or_else(|_| bs.to_owned(), |b| b.to_string()));
    let rw = match get("rw").or(get("readwrite")).unwrap_or("read") {
        "rw" | "readwrite" => "rw",
        r => r,
    };
    put("rw", rw.to_owned());
    if let Some(m) = get("rwmixread") {
        put("mix_read_pct", m.to_owned());
    }
    put("direct", truthy("direct").to_string());
    put("jobs", get("numjobs").unwrap_or("1").to_owned());
    if let Some(f) = get("filename") {
        put("target.path", f.to_owned());
    }
    put("sqpoll", truthy("sqthread_poll").to_string());
    put("fixed_bufs", truthy("fixedbufs").to_string());
    put("force_async", truthy("force_async").to_string());
    // `hipri` is polled completion: io_uring's IOPOLL, or RWF_HIPRI for pvsync2.
    let hipri = truthy("hipri");
    put("iopoll", (hipri && engine == "io_uring").to_string());
    put("hipri", (hipri && engine == "pvsync2").to_string());
    let known = [
        "ioengine",
        "iodepth",
        "bs",
        "blocksize",
        "rw",
        "readwrite",
        "rwmixread",
        "direct",
        "numjobs",
        "filename",
        "sqthread_poll",
        "fixedbufs",
        "force_async",
        "hipri",
    ];
    for (k, v) in o.iter().filter(|(k, _)| !known.contains(&k.as_str())) {
        put(&format!("fio.{k}"), v.clone());
    }
    out
}

/// Objects become dotted keys; lists of named objects are keyed by name (devices.vda.scheduler);
/// other lists are joined.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&key(k), x, out);
            }
        }
        Value::Array(a) if !a.is_empty() && a.iter().all(|x| x.get("name").and_then(Value::as_str).is_some()) => {
            for x in a {
                let name = x["name"].as_str().unwrap_or("");
                flatten(&key(name), x, out);
            }
        }
        Value::Array(a) if a.is_empty() => {
            out.insert(prefix.to_owned(), "(none)".to_owned());
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(scalar).collect();
            out.insert(prefix.to_owned(), parts.join(", "));
        }
        _ => {
            out.insert(prefix.to_owned(), scalar(v));
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".to_owned(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(" x"),
        other => other.to_string(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub before: f64,
    pub after: f64,
    /// Relative change in percent (None when `before` is 0).
    pub pct: Option<f64>,
}

impl Change {
    pub fn new(before: f64, after: f64) -> Change {
        Change { before, after, pct: (before != 0.0).then(|| (after - before) / before * 100.0) }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseChange {
    pub phase: &'static str,
    pub before: Stat,
    pub after: Stat,
    pub delta_mean_ns: f64,
    pub delta_p50_ns: f64,
    pub delta_p99_ns: f64,
    /// What a change of the mean must exceed to count (see `noise_ns`).
    pub noise_ns: f64,
    /// "grew", "shrank" or "within noise".
    pub judgement: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct ConfigChange {
    pub key: String,
    pub before: String,
    pub after: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct FrameChange {
    pub frame: String,
    /// Inclusive share of on-CPU samples, 0..1.
    pub before: f64,
    pub after: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FamilyShare {
    pub family: &'static str,
    pub before: f64,
    pub after: f64,
    /// The frames of the family that grew most, for the verdict.
    pub top_frames: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub before: String,
    pub after: String,
    pub iops: Change,
    pub cpu_per_io_ns: Option<Change>,
    /// Both runs kept well under the requested depth in flight (below 80%): the submitting
    /// thread's CPU, not the device, set the pace; (before, after, requested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submitter_bound: Option<(f64, f64, f64)>,
    pub latency_mean_ns: Change,
    pub latency_p99_ns: Change,
    /// Empty when a side has no phases (fio).
    pub phases: Vec<PhaseChange>,
    /// NVMe parts of the block and device phases, when both sides have them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nvme_phases: Vec<PhaseChange>,
    /// Events per I/O before and after.
    pub per_io: Vec<(String, Change)>,
    pub config_changes: Vec<ConfigChange>,
    /// Settings only one side records (an older report, fio's options iopath has no word for):
    /// not known on the other, so not compared.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_one_side_only: Vec<String>,
    /// On-CPU frames whose share grew / shrank the most (needs both sides' folded stacks).
    pub frames_grew: Vec<FrameChange>,
    pub frames_shrank: Vec<FrameChange>,
    /// Frames absent before (< 0.1% of samples) and visible after (>= 0.3%): new code on the path,
    /// e.g. a scheduler's or the IOMMU's.
    pub frames_new: Vec<FrameChange>,
    /// Share of on-CPU samples with a frame of each I/O-path family (io_uring, aio, block layer,
    /// driver, IOMMU/DMA), before and after.
    pub families: Vec<FamilyShare>,
    /// The phase whose mean moved the most beyond noise: submission, block, device, completion or
    /// none ("none" too when a side's phases do not reconcile: nothing is drawn from them).
    pub dominant_phase: &'static str,
    /// Sides whose phase table does not add up, and why ("before: ..."): their phases are shown
    /// but no phase is named as the cause.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreconciled: Vec<String>,
    /// Likely causes, most likely first.
    pub causes: Vec<String>,
    pub verdict: String,
    /// The differential flamegraph, when one was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_flamegraph: Option<std::path::PathBuf>,
}

/// A phase's mean must move by more than this to count: 5% of the larger mean (run-to-run drift
/// on a shared VM is of that order), three standard errors of the difference (the spread estimated
/// from p50..p99 of a roughly log-normal latency), and 0.25 us (timestamp and histogram
/// resolution); plus the wider of the two sides' ring bounds where the phase is bounded, not
/// timed (io_uring's rings): a move within what was never observed is not a change.
pub fn noise_ns(b: &Stat, a: &Stat) -> f64 {
    let se = |s: &Stat| {
        let sigma = ((s.p99 - s.p50) / 2.33).max(0.0);
        if s.count > 0 {
            sigma / (s.count as f64).sqrt()
        } else {
            sigma
        }
    };
    let se_diff = (se(b).powi(2) + se(a).powi(2)).sqrt();
    (0.05 * b.mean.max(a.mean)).max(3.0 * se_diff).max(250.0) + b.bound.max(a.bound)
}

/// Keys that differ between runs without meaning anything (the run's own time or output paths).
fn ignored_key(k: &str) -> bool {
    k.starts_with("job.seed") || k.ends_with("config_source") || k.starts_with("job.runtime")
}

/// How one phase moved, judged against the noise of its two sides.
fn phase_change(name: &'static str, sb: Stat, sa: Stat) -> PhaseChange {
    let d = sa.mean - sb.mean;
    let noise = noise_ns(&sb, &sa);
    PhaseChange {
        phase: name,
        before: sb,
        after: sa,
        delta_mean_ns: d,
        delta_p50_ns: sa.p50 - sb.p50,
        delta_p99_ns: sa.p99 - sb.p99,
        noise_ns: noise,
        judgement: if d.abs() <= noise {
            "within noise"
        } else if d > 0.0 {
            "grew"
        } else {
            "shrank"
        },
    }
}

/// The per-I/O counts both sides measured, before -> after.
fn per_io_changes(b: &Side, a: &Side) -> Vec<(String, Change)> {
    // A count one side did not measure is unknown there, not zero (fio has no IRQ counts). In a
    // family a side measured (its system calls, its routes), a name it lacks did not happen: 0.
    let known = |s: &Side, k: &str| {
        s.per_io.contains_key(k)
            || ["syscall ", "share "].iter().any(|f| k.starts_with(f) && s.per_io.keys().any(|x| x.starts_with(f)))
    };
    let keys: BTreeSet<&String> = b.per_io.keys().chain(a.per_io.keys()).collect();
    keys.into_iter()
        .filter(|k| known(b, k) && known(a, k))
        .map(|k| {
            let g = |s: &Side| s.per_io.get(k).copied().unwrap_or(0.0);
            (k.clone(), Change::new(g(b), g(a)))
        })
        .collect()
}

/// The settings that changed (both sides recorded them), and those only one side recorded.
fn config_diff(b: &Side, a: &Side) -> (Vec<ConfigChange>, Vec<String>) {
    // A disk captured on one side only (a traced command records every disk, a generator run its
    // target's) is not a change of that disk.
    let disks = |s: &Side| -> BTreeSet<String> {
        s.config
            .keys()
            .filter_map(|k| k.strip_prefix("devices."))
            .filter_map(|k| k.split('.').next())
            .map(str::to_owned)
            .collect()
    };
    let (db, da) = (disks(b), disks(a));
    let one_sided = |k: &str| {
        k.strip_prefix("devices.")
            .and_then(|r| r.split('.').next())
            .is_some_and(|d| !(db.contains(d) && da.contains(d)))
    };
    // Likewise a job on one side only (a traced command has none): the workloads differ, which
    // the labels say, not a list of "absent -> x" settings.
    // A cgroup captured on one side only (an older report, a process gone before capture) is
    // unknown there, not "no limits".
    let has_cgroup = |s: &Side| s.config.keys().any(|k| k == "cgroup.blkio" || k == "cgroup.unified");
    let cgroup_known = has_cgroup(b) && has_cgroup(a);
    // fio's JSON carries no system configuration at all: every setting is unknown on its side,
    // never a change (nor a cause).
    let has_config = |s: &Side| s.config.keys().any(|k| !k.starts_with("job."));
    let config_known = has_config(b) && has_config(a);
    let has_job = |s: &Side| s.config.keys().any(|k| k.starts_with("job."));
    let jobs_comparable = has_job(b) == has_job(a);
    let keys: BTreeSet<&String> = b.config.keys().chain(a.config.keys()).collect();
    let mut one_side_only = Vec::new();
    let changes = keys
        .into_iter()
        .filter(|k| {
            !ignored_key(k)
                && !one_sided(k)
                && (jobs_comparable || !k.starts_with("job."))
                && (cgroup_known || !k.starts_with("cgroup."))
                && (config_known || k.starts_with("job."))
        })
        .filter_map(|k| {
            let (x, y) = (b.config.get(k), a.config.get(k));
            // A setting one side does not record is not known there: never a change, except
            // a cgroup limit where both sides captured the cgroup (no io.max line = no limit).
            if (x.is_none() || y.is_none()) && !(cgroup_known && k.starts_with("cgroup.limits.")) {
                if x != y {
                    one_side_only.push(k.clone());
                }
                return None;
            }
            (x != y).then(|| ConfigChange {
                key: k.clone(),
                before: x.cloned().unwrap_or_else(|| "(absent)".into()),
                after: y.cloned().unwrap_or_else(|| "(absent)".into()),
            })
        })
        .collect();
    (changes, one_side_only)
}

pub fn compare(b: &Side, a: &Side) -> Comparison {
    let mut phases = Vec::new();
    if let (Some(pb), Some(pa)) = (&b.phases, &a.phases) {
        for name in PHASES {
            phases.push(phase_change(name, pb[name], pa[name]));
        }
    }
    let nvme_phases: Vec<PhaseChange> = NVME_PHASES
        .iter()
        .filter_map(|&(name, _)| Some(phase_change(name, *b.nvme_phases.get(name)?, *a.nvme_phases.get(name)?)))
        .collect();
    // The phase that explains the change moved the way IOPS did (a phase that shrank because
    // fewer I/Os queued does not explain a loss); any moved phase when none did.
    let explains = if a.iops < b.iops { "grew" } else { "shrank" };
    let largest = |want: Option<&str>| {
        phases
            .iter()
            .filter(|p| p.judgement != "within noise" && want.is_none_or(|w| p.judgement == w))
            .max_by(|x, y| x.delta_mean_ns.abs().total_cmp(&y.delta_mean_ns.abs()))
    };
    let unreconciled: Vec<String> = [("before", b), ("after", a)]
        .iter()
        .filter_map(|(n, s)| s.unreconciled.as_ref().map(|why| format!("{n}: {}", why.join("; "))))
        .collect();
    let dominant = largest(Some(explains)).or_else(|| largest(None));
    let dominant_phase = if unreconciled.is_empty() { dominant.map_or("none", |p| p.phase) } else { "none" };

    let per_io = per_io_changes(b, a);
    let (config_changes, one_side_only) = config_diff(b, a);

    let (frames_grew, frames_shrank, frames_new, families) = match (&b.folded, &a.folded) {
        (Some(fb), Some(fa)) => {
            let (g, s, n) = frame_changes(fb, fa);
            let fams = family_shares(fb, fa, &g);
            (g, s, n, fams)
        }
        _ => (Vec::new(), Vec::new(), Vec::new(), Vec::new()),
    };

    let mut c = Comparison {
        schema: SCHEMA,
        before: b.label.clone(),
        after: a.label.clone(),
        iops: Change::new(b.iops, a.iops),
        cpu_per_io_ns: b.cpu_per_io_ns.zip(a.cpu_per_io_ns).map(|(x, y)| Change::new(x, y)),
        submitter_bound: b
            .inflight
            .zip(a.inflight)
            .filter(|((bi, bq), (ai, aq))| bi < &(0.8 * bq) && ai < &(0.8 * aq))
            .map(|((bi, _), (ai, aq))| (bi, ai, aq)),
        latency_mean_ns: Change::new(b.lat.mean, a.lat.mean),
        latency_p99_ns: Change::new(b.lat.p99, a.lat.p99),
        phases,
        nvme_phases,
        per_io,
        config_changes,
        config_one_side_only: one_side_only,
        frames_grew,
        frames_shrank,
        frames_new,
        families,
        dominant_phase,
        unreconciled,
        causes: Vec::new(),
        verdict: String::new(),
        diff_flamegraph: None,
    };
    c.causes = causes(&c);
    c.verdict = verdict(&c);
    c
}

/// Frames (process names left out) whose inclusive share moved by at least half a point, and the
/// frames new after.
fn frame_changes(b: &[(String, u64)], a: &[(String, u64)]) -> (Vec<FrameChange>, Vec<FrameChange>, Vec<FrameChange>) {
    let comms: BTreeSet<&str> = b.iter().chain(a).filter_map(|(s, _)| s.split(';').next()).collect();
    let sb: BTreeMap<String, f64> = fold::inclusive_shares(b).into_iter().collect();
    let sa: BTreeMap<String, f64> = fold::inclusive_shares(a).into_iter().collect();
    let names: BTreeSet<&String> = sb.keys().chain(sa.keys()).collect();
    let all: Vec<FrameChange> = names
        .into_iter()
        .filter(|n| !comms.contains(n.as_str()))
        .map(|n| FrameChange {
            frame: n.trim_end_matches("_[k]").to_owned(),
            before: sb.get(n).copied().unwrap_or(0.0),
            after: sa.get(n).copied().unwrap_or(0.0),
        })
        .collect();
    // New frames, the widest of each name prefix ("bfq", "blk", "iommu"): a new scheduler's
    // functions would otherwise hide behind the generic dispatch path that now calls them.
    let mut new: Vec<FrameChange> = all.iter().filter(|f| f.before < 0.001 && f.after >= 0.003).cloned().collect();
    new.sort_by(|x, y| y.after.total_cmp(&x.after));
    let mut prefixes = BTreeSet::new();
    new.retain(|f| prefixes.insert(f.frame.trim_start_matches('_').split('_').next().unwrap_or("").to_owned()));
    new.truncate(10);
    let mut moved: Vec<FrameChange> = all.into_iter().filter(|f| (f.after - f.before).abs() >= 0.005).collect();
    moved.sort_by(|x, y| (y.after - y.before).total_cmp(&(x.after - x.before)));
    let grew: Vec<FrameChange> = moved.iter().filter(|f| f.after > f.before).take(10).cloned().collect();
    let mut shrank: Vec<FrameChange> = moved.into_iter().filter(|f| f.after < f.before).collect();
    shrank.reverse();
    shrank.truncate(10);
    (grew, shrank, new)
}

/// Share of samples whose stack holds a frame of `fam`.
fn family_share(lines: &[(String, u64)], fam: Family) -> f64 {
    let total: u64 = lines.iter().map(|(_, n)| n).sum();
    let hit: u64 = lines.iter().filter(|(s, _)| s.split(';').any(|f| family(f) == Some(fam))).map(|(_, n)| n).sum();
    if total == 0 {
        0.0
    } else {
        hit as f64 / total as f64
    }
}

fn family_shares(b: &[(String, u64)], a: &[(String, u64)], grew: &[FrameChange]) -> Vec<FamilyShare> {
    Family::ALL
        .iter()
        .map(|&fam| FamilyShare {
            family: fam.label(),
            before: family_share(b, fam),
            after: family_share(a, fam),
            top_frames: grew
                .iter()
                .filter(|f| family(&f.frame) == Some(fam))
                .take(2)
                .map(|f| f.frame.clone())
                .collect(),
        })
        .collect()
}

fn per_io<'a>(c: &'a Comparison, key: &str) -> Option<&'a Change> {
    c.per_io.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn phase<'a>(c: &'a Comparison, name: &str) -> Option<&'a PhaseChange> {
    c.phases.iter().find(|p| p.phase == name)
}

/// Likely causes, most specific first: what the configuration diff shows, then what the counts
/// and stacks show when the configuration did not change.
fn causes(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(cgroup_limit_cause(c));
    out.extend(iommu_cause(c));
    out.extend(setting_causes(c));
    out.extend(page_cache_cause(c));
    out.extend(dirty_throttling_cause(c));
    out.extend(job_cause(c));
    out.extend(cpu_contention_cause(c));
    if out.is_empty() && c.before.contains("(traced)") != c.after.contains("(traced)") {
        out.push("different workloads: a traced command on one side, the bundled generator on the other".into());
    }
    if out.is_empty() && !c.unreconciled.is_empty() {
        out.push("cannot tell from the phases: a side's phase table does not reconcile".into());
    }
    if out.is_empty() {
        match c.dominant_phase {
            "device" => {
                out.push("the device itself got slower or faster (nothing in the configuration changed)".into())
            }
            "none" => {}
            p => out.push(format!("no configuration change explains it; the {p} phase moved")),
        }
    }
    out
}

/// The configuration changes whose key `pred` picks.
fn changed(c: &Comparison, pred: impl Fn(&str) -> bool) -> Vec<&ConfigChange> {
    c.config_changes.iter().filter(|x| pred(&x.key)).collect()
}

/// A cgroup I/O limit: its setting changed, or the share of I/Os blk-throttle held moved.
fn cgroup_limit_cause(c: &Comparison) -> Option<String> {
    let mut out = None;
    let limits = changed(c, |k| k.starts_with("cgroup.limits."));
    let throttled = per_io(c, "share throttled").map(|x| (x.before, x.after)).filter(|(b, a)| (a - b).abs() >= 0.01);
    if !limits.is_empty() || throttled.is_some() {
        let mut s = String::from("cgroup I/O limit");
        for x in limits.iter().take(3) {
            let name = x.key.trim_start_matches("cgroup.limits.");
            let none = |v: &str| if v == "(absent)" { "none".to_owned() } else { v.to_owned() };
            s.push_str(&format!("; {name} {} -> {}", none(&x.before), none(&x.after)));
        }
        if let Some((b, a)) = throttled {
            s.push_str(&format!("; I/Os held by blk-throttle {:.1}% -> {:.1}%", b * 100.0, a * 100.0));
        }
        out = Some(s);
    }
    out
}

/// IOMMU translation: its configuration changed, maps per I/O or its frames grew.
fn iommu_cause(c: &Comparison) -> Option<String> {
    let mut out = None;
    let iommu_maps = per_io(c, "iommu_map").map(|m| (m.before, m.after));
    let iommu_cfg = changed(c, |k| k.starts_with("iommu.") && !k.starts_with("iommu.config"));
    let iommu_frames = c.families.iter().any(|f| f.family == Family::IommuDma.label() && f.after - f.before >= 0.02);
    if !iommu_cfg.is_empty() || iommu_maps.is_some_and(|(b, a)| a - b >= 0.5) || iommu_frames {
        let mut s = String::from("IOMMU translation");
        for x in iommu_cfg.iter().take(2) {
            s.push_str(&format!("; {} changed {} -> {}", x.key, x.before, x.after));
        }
        if let Some((b, a)) = iommu_maps {
            if (a - b).abs() >= 0.5 {
                s.push_str(&format!("; iommu map/unmap {b:.1} -> {a:.1} per I/O"));
            }
        }
        out = Some(s);
    }
    out
}

/// The target's file system, the devices' settings, NVMe poll queues, the kernel, the CPU's
/// mitigations and governor.
fn setting_causes(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    let fs: Vec<String> = changed(c, |k| k.starts_with("filesystem."))
        .iter()
        .map(|x| format!("{} {} -> {}", x.key.trim_start_matches("filesystem."), x.before, x.after))
        .collect();
    if !fs.is_empty() {
        out.push(format!("the file system changed: {}", fs.join("; ")));
    }
    for x in changed(c, |k| k.starts_with("devices.") && k.ends_with(".scheduler")) {
        out.push(format!("I/O scheduler of {} changed {} -> {}", device_of(&x.key), x.before, x.after));
    }
    for x in changed(c, |k| {
        k.starts_with("devices.")
            && [
                ".nomerges",
                ".rq_affinity",
                ".wbt_lat_usec",
                ".nr_requests",
                ".io_poll",
                ".write_cache",
                ".read_ahead_kb",
                ".iostats",
                ".nr_hw_queues",
            ]
            .iter()
            .any(|s| k.ends_with(s))
    }) {
        out.push(format!("{} changed {} -> {}", x.key, x.before, x.after));
    }
    for x in changed(c, |k| k == "nvme_poll_queues") {
        out.push(format!("NVMe poll queues changed {} -> {}", x.before, x.after));
    }
    for x in changed(c, |k| k == "kernel") {
        out.push(format!("kernel changed {} -> {}", x.before, x.after));
    }
    for x in changed(c, |k| k == "mitigations" || k == "governor") {
        out.push(format!("CPU {} changed", x.key));
    }
    out
}

fn page_cache_cause(c: &Comparison) -> Option<String> {
    let mut out = None;
    // The page cache: buffered reads found their data there less (or more) often, or waited for
    // the device longer. The hit ratio alone hides a dropped cache on sequential reads:
    // readahead brings most pages before they are read (64 MiB of 4k reads after drop_caches:
    // 100% -> 99.85% hits, while the wait for the device went 0 -> 5.2 us of a 6.8 us read).
    // A wait counts when it moved by 0.2 us and by a tenth of the slower side's mean latency
    // (io_uring reads on a loop device once waited 0.74 us more per read, most of what they
    // lost), or by a fifth of a latency change of 5% or more (io_uring's buffered reads after
    // drop_caches: 3.8 -> 4.5 us, of which the wait 0 -> 0.23 us; readahead's own work the rest).
    let hit = per_io(c, "pc read_hit_ratio");
    let slower_us = c.latency_mean_ns.before.max(c.latency_mean_ns.after) / 1000.0;
    let dlat_us = (c.latency_mean_ns.after - c.latency_mean_ns.before).abs() / 1000.0;
    let waited = per_io(c, "pc read_waited_us").filter(|w| {
        let dw = (w.after - w.before).abs();
        dw >= 0.2 && (dw >= 0.1 * slower_us || (dlat_us >= 0.05 * slower_us && dw >= 0.2 * dlat_us))
    });
    // Reads that never went to the device before now do (one in a thousand or more queues a
    // device request or a bio), and they got slower: the cache no longer held their data, even
    // where the wait itself stays small beside the loss. On a host whose device answers fast,
    // readahead's own work inside the read (allocating pages, queueing bios) can be most of what
    // a read loses after drop_caches, and that is on-CPU time, not a wait: tests/compare.rs'
    // drop_caches pair named nothing on one CI host (hit ratio down under 5 points, the wait up
    // 0.2 us or more but under the noise rule above; its numbers were not kept).
    let to_device = ["pc requests_per_read", "pc bios_per_read"]
        .iter()
        .filter_map(|k| per_io(c, k))
        .any(|q| q.before < 0.001 && q.after >= 0.001);
    let went_to_device = to_device && dlat_us >= 0.05 * slower_us && c.latency_mean_ns.after > c.latency_mean_ns.before;
    if let Some(h) =
        hit.filter(|h| (h.after - h.before).abs() >= 0.05 || waited.is_some() || (went_to_device && h.after < h.before))
    {
        let mut s = format!(
            "the page cache: buffered reads found their data cached {:.1}% -> {:.1}% of the time",
            h.before * 100.0,
            h.after * 100.0
        );
        if let Some(w) = per_io(c, "pc read_waited_us") {
            s.push_str(&format!("; waiting for the device {:.1} -> {:.1} us per read", w.before, w.after));
        }
        if let Some(q) = per_io(c, "pc requests_per_read") {
            s.push_str(&format!("; device requests per read {:.4} -> {:.4}", q.before, q.after));
        }
        if let Some(q) = per_io(c, "pc bios_per_read") {
            s.push_str(&format!("; bios queued per read {:.4} -> {:.4}", q.before, q.after));
        }
        let worse = waited.map_or(h.after < h.before, |w| w.after > w.before);
        s.push_str(if worse {
            " (the cache was dropped or the data no longer fits: drop_caches, memory pressure, a first run)"
        } else {
            " (the data was in the cache after)"
        });
        out = Some(s);
    }
    out
}

fn dirty_throttling_cause(c: &Comparison) -> Option<String> {
    let mut out = None;
    // Dirty throttling: a limit changed, or writers were held in balance_dirty_pages longer.
    let vm = changed(c, |k| k.starts_with("vm_dirty."));
    let held = per_io(c, "pc write_throttled_us").filter(|x| (x.after - x.before).abs() >= 1.0);
    if !vm.is_empty() || held.is_some() {
        let mut s = String::from("dirty-page throttling");
        for x in vm.iter().take(4) {
            s.push_str(&format!("; vm.{} {} -> {}", x.key.trim_start_matches("vm_dirty."), x.before, x.after));
        }
        if let Some(x) = held {
            s.push_str(&format!("; writes held in balance_dirty_pages {:.1} -> {:.1} us per write", x.before, x.after));
        }
        out = Some(s);
    }
    out
}

/// The job itself (beyond its target).
fn job_cause(c: &Comparison) -> Option<String> {
    let job: Vec<String> = changed(c, |k| k.starts_with("job."))
        .iter()
        .filter(|x| {
            !x.key.starts_with("job.target") && !x.key.starts_with("job.file") && !x.key.starts_with("job.device")
        })
        .map(|x| format!("{} {} -> {}", x.key.trim_start_matches("job."), x.before, x.after))
        .collect();
    (!job.is_empty()).then(|| format!("the job itself changed: {}", job.join(", ")))
}

fn cpu_contention_cause(c: &Comparison) -> Option<String> {
    let mut out = None;
    // CPU contention: the application waits to run, visible as completion (reap) time with
    // involuntary switches or preempted time up and nothing else changed.
    let inv = per_io(c, "ctx_involuntary").map(|x| (x.before, x.after));
    let pre = per_io(c, "preempted_us").map(|x| (x.before, x.after));
    let runq = per_io(c, "runq_wait_us").map(|x| (x.before, x.after));
    let delay = per_io(c, "run_delay_us").map(|x| (x.before, x.after));
    let completion_grew = phase(c, "completion").is_some_and(|p| p.judgement == "grew");
    let contended = inv.is_some_and(|(b, a)| a > b * 1.5 + 0.01)
        || pre.is_some_and(|(b, a)| a > b + 1.0)
        || runq.is_some_and(|(b, a)| a > b * 1.5 + 1.0)
        || delay.is_some_and(|(b, a)| a > b * 1.5 + 1.0);
    if completion_grew && contended {
        let mut s = String::from("CPU contention: the application was runnable but not running");
        if let Some((b, a)) = runq.filter(|(b, a)| a > &(b + 0.5)) {
            s.push_str(&format!("; run-queue wait after wakeup {b:.1} -> {a:.1} us per I/O"));
        }
        if let Some((b, a)) = delay.filter(|(b, a)| a > &(b + 0.5)) {
            s.push_str(&format!("; runnable, not running {b:.1} -> {a:.1} us per I/O (schedstat)"));
        }
        if let Some((b, a)) = inv.filter(|(b, a)| (a - b).abs() >= 0.005) {
            s.push_str(&format!("; involuntary context switches {b:.3} -> {a:.3} per I/O"));
        }
        if let Some((b, a)) = pre {
            if (a - b).abs() >= 0.1 {
                s.push_str(&format!("; preempted outside syscalls {b:.1} -> {a:.1} us per I/O"));
            }
        }
        out = Some(s);
    }
    out
}

fn device_of(key: &str) -> &str {
    key.strip_prefix("devices.").and_then(|k| k.split('.').next()).unwrap_or(key)
}

fn us(ns: f64) -> String {
    format!("{:.1} us", ns / 1000.0)
}

fn signed_us(ns: f64) -> String {
    format!("{}{:.1} us", if ns >= 0.0 { "+" } else { "-" }, ns.abs() / 1000.0)
}

/// One paragraph: the IOPS change, the likely cause, what the phases did, what the counts and
/// the stacks show.
fn verdict(c: &Comparison) -> String {
    let mut parts = Vec::new();
    let iops = match c.iops.pct {
        Some(p) if p.abs() < 1.0 => "IOPS unchanged".to_owned(),
        Some(p) => format!("IOPS {}{:.0}%", if p >= 0.0 { "+" } else { "-" }, p.abs()),
        None => "IOPS n/a".to_owned(),
    };
    parts.push(format!("{iops} (mean latency {} -> {}).", us(c.latency_mean_ns.before), us(c.latency_mean_ns.after)));
    if let Some(first) = c.causes.first() {
        parts.push(format!("Likely cause: {first}."));
    }
    if c.phases.is_empty() {
        parts.push(
            "Latency only (one side has no block-phase breakdown: fio, or I/O the page cache served).".to_owned(),
        );
    } else if !c.unreconciled.is_empty() {
        parts.push(format!(
            "Phases not compared: {} (nothing is drawn from a phase table that does not add up).",
            c.unreconciled.join(" / ")
        ));
    } else {
        let moved: Vec<&PhaseChange> = {
            let mut m: Vec<&PhaseChange> = c.phases.iter().filter(|p| p.judgement != "within noise").collect();
            m.sort_by(|x, y| y.delta_mean_ns.abs().total_cmp(&x.delta_mean_ns.abs()));
            m
        };
        let still: Vec<&str> = c.phases.iter().filter(|p| p.judgement == "within noise").map(|p| p.phase).collect();
        if moved.is_empty() {
            parts.push("Every phase within noise.".to_owned());
        } else {
            let desc: Vec<String> = moved
                .iter()
                .map(|p| {
                    let rel = if p.before.mean > 0.0 { p.after.mean / p.before.mean } else { f64::INFINITY };
                    format!(
                        "{} {} per I/O ({} -> {}, x{:.1})",
                        p.phase,
                        signed_us(p.delta_mean_ns),
                        us(p.before.mean),
                        us(p.after.mean),
                        rel
                    )
                })
                .collect();
            let mut s = desc.join("; ");
            if !still.is_empty() {
                s.push_str(&format!("; {} within noise", still.join(", ")));
            }
            parts.push(format!("{s}."));
            let inside: Vec<String> = c
                .nvme_phases
                .iter()
                .filter(|p| p.judgement != "within noise")
                .map(|p| {
                    let what = NVME_PHASES.iter().find(|(n, _)| *n == p.phase).map_or("", |(_, w)| w);
                    format!("{} ({what}) {}", p.phase.replace('_', " "), signed_us(p.delta_mean_ns))
                })
                .collect();
            if !inside.is_empty() {
                parts.push(format!("NVMe split: {}.", inside.join("; ")));
            }
            if let (Some((ib, ia, req)), Some(cpu)) = (c.submitter_bound, &c.cpu_per_io_ns) {
                if cpu.pct.is_some_and(|p| p.abs() >= 5.0) {
                    parts.push(format!(
                        "The submitting thread is CPU-bound ({ib:.1} -> {ia:.1} of {req:.0} I/Os in flight): CPU per I/O \
                         {} -> {} ({:+.0}%) sets the IOPS, not the device.",
                        us(cpu.before),
                        us(cpu.after),
                        cpu.pct.unwrap_or(0.0)
                    ));
                }
            }
        }
    }
    let counts: Vec<String> = c
        .per_io
        .iter()
        .filter(|(k, v)| {
            !k.ends_with("_us")
                && !k.starts_with("share ")
                && (v.after - v.before).abs() >= 0.05 * v.before.max(v.after).max(0.2)
        })
        .map(|(k, v)| format!("{} {:.2} -> {:.2} per I/O", k.replace('_', " "), v.before, v.after))
        .collect();
    if !counts.is_empty() {
        parts.push(format!("{}.", counts.join("; ")));
    }
    // I/O-path families whose share of on-CPU samples grew by a point or more, with examples.
    let fams: Vec<String> = c
        .families
        .iter()
        .filter(|f| f.after - f.before >= 0.01)
        .map(|f| {
            let ex = if f.top_frames.is_empty() { String::new() } else { format!(" ({})", f.top_frames.join(", ")) };
            format!("{} frames {:.1}% -> {:.1}% of on-CPU samples{ex}", f.family, f.before * 100.0, f.after * 100.0)
        })
        .collect();
    if !fams.is_empty() {
        parts.push(format!("{}.", fams.join("; ")));
    } else if !c.frames_grew.is_empty() {
        let f: Vec<String> = c
            .frames_grew
            .iter()
            .take(3)
            .map(|f| format!("{} {:.1}% -> {:.1}%", f.frame, f.before * 100.0, f.after * 100.0))
            .collect();
        parts.push(format!("On-CPU frames that grew: {}.", f.join(", ")));
    }
    if !c.frames_new.is_empty() {
        let f: Vec<String> =
            c.frames_new.iter().take(4).map(|f| format!("{} {:.1}%", f.frame, f.after * 100.0)).collect();
        parts.push(format!("New on-CPU frames: {}.", f.join(", ")));
    }
    for other in c.causes.iter().skip(1).take(3) {
        parts.push(format!("Also: {other}."));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(mean: f64) -> Stat {
        Stat { count: 100_000, mean, p50: mean * 0.95, p99: mean * 1.6, bound: 0.0 }
    }

    fn side(phases: [f64; 4], iops: f64) -> Side {
        Side {
            label: "x".into(),
            iops,
            lat: stat(phases.iter().sum()),
            phases: Some(PHASES.iter().zip(phases).map(|(&n, m)| (n, stat(m))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn no_phase_is_blamed_from_a_table_that_does_not_add_up() {
        let b = side([1000.0, 2000.0, 20_000.0, 3000.0], 30_000.0);
        let mut a = side([1000.0, 2000.0, 60_000.0, 3000.0], 12_000.0);
        let both = compare(&b, &a);
        assert_eq!(both.dominant_phase, "device");
        a.unreconciled = Some(vec!["only 8.0% of the application's 1000 I/Os were followed end to end".into()]);
        let c = compare(&b, &a);
        assert_eq!(c.dominant_phase, "none");
        assert!(!c.causes.iter().any(|x| x.contains("device")), "{:?}", c.causes);
        assert!(c.causes[0].contains("cannot tell"), "{:?}", c.causes);
        assert!(c.verdict.contains("Phases not compared: after: only 8.0%"), "{}", c.verdict);
    }

    #[test]
    fn a_cgroup_limit_leads_and_an_unknown_cgroup_is_no_change() {
        let mut b = side([4000.0, 2000.0, 60_000.0, 3000.0], 60_000.0);
        let mut a = side([10_000_000.0, 2000.0, 60_000.0, 3000.0], 3_000.0);
        b.config.insert("cgroup.blkio".into(), "/".into());
        a.config.insert("cgroup.blkio".into(), "/t".into());
        a.config.insert("cgroup.limits.blkio.throttle.read_iops_device".into(), "254:0 3000".into());
        b.per_io.insert("share throttled".into(), 0.0);
        a.per_io.insert("share throttled".into(), 0.106);
        let c = compare(&b, &a);
        assert_eq!(
            c.causes[0],
            "cgroup I/O limit; blkio.throttle.read_iops_device none -> 254:0 3000; I/Os held by blk-throttle 0.0% -> 10.6%"
        );
        assert!(!c.verdict.contains("share throttled"), "shares are not per-I/O counts: {}", c.verdict);
        // A side with no cgroup captured (an older report) says nothing about limits.
        b.config.remove("cgroup.blkio");
        a.per_io.remove("share throttled");
        b.per_io.remove("share throttled");
        let c = compare(&b, &a);
        assert!(c.config_changes.iter().all(|x| !x.key.starts_with("cgroup.")), "{:?}", c.config_changes);
        assert!(!c.causes.iter().any(|x| x.contains("cgroup")), "{:?}", c.causes);
    }

    #[test]
    fn a_ring_bound_widens_the_noise() {
        // A completion phase 8 us longer: beyond 5% of 108 us when timed, within noise when one
        // side's end was only bounded within 4 us.
        let (mut b, mut a) = (stat(100_000.0), stat(108_000.0));
        assert!(8000.0 > noise_ns(&b, &a));
        b.bound = 4000.0;
        a.bound = 1000.0;
        assert!(8000.0 <= noise_ns(&b, &a));
        assert_eq!(noise_ns(&b, &a), noise_ns(&stat(100_000.0), &stat(108_000.0)) + 4000.0);
    }

    #[test]
    fn noise_floor_and_judgement() {
        let b = side([1000.0, 2000.0, 20_000.0, 3000.0], 30_000.0);
        let a = side([1040.0, 5000.0, 20_400.0, 3000.0], 25_000.0);
        let c = compare(&b, &a);
        let j: Vec<&str> = c.phases.iter().map(|p| p.judgement).collect();
        // 40 ns and 400 ns (2% of the device's 20 us) are noise; +3 us of block is not.
        assert_eq!(j, vec!["within noise", "grew", "within noise", "within noise"]);
        assert_eq!(c.dominant_phase, "block");
        assert!(c.verdict.starts_with("IOPS -17%"), "{}", c.verdict);
        assert!(c.verdict.contains("block +3.0 us per I/O (2.0 us -> 5.0 us, x2.5)"), "{}", c.verdict);
    }

    #[test]
    fn nothing_moved() {
        let b = side([1000.0, 2000.0, 20_000.0, 3000.0], 30_000.0);
        let c = compare(&b, &b.clone());
        assert_eq!(c.dominant_phase, "none");
        assert!(c.verdict.contains("Every phase within noise"));
        assert!(c.causes.is_empty());
    }

    #[test]
    fn scheduler_change_leads_the_verdict() {
        let mut b = side([1800.0, 1800.0, 15_800.0, 13_000.0], 30_000.0);
        let mut a = side([1900.0, 4500.0, 18_400.0, 18_000.0], 23_000.0);
        b.config.insert("devices.loop0.scheduler".into(), "none".into());
        a.config.insert("devices.loop0.scheduler".into(), "bfq".into());
        let c = compare(&b, &a);
        assert_eq!(c.config_changes.len(), 1);
        assert_eq!(c.causes[0], "I/O scheduler of loop0 changed none -> bfq");
        assert!(c.verdict.contains("Likely cause: I/O scheduler of loop0 changed none -> bfq."), "{}", c.verdict);
        assert!(c.verdict.contains("x2.5"), "the block phase's relative growth: {}", c.verdict);
    }

    #[test]
    fn a_file_system_change_is_named_first() {
        let mut b = side([1800.0, 1800.0, 15_800.0, 13_000.0], 30_000.0);
        let mut a = side([1900.0, 1800.0, 15_800.0, 40_000.0], 20_000.0);
        b.config.insert("filesystem.type".into(), "ext4".into());
        a.config.insert("filesystem.type".into(), "btrfs".into());
        b.config.insert("filesystem.options".into(), "rw,relatime - rw".into());
        a.config.insert("filesystem.options".into(), "rw,relatime - rw,space_cache=v2,subvolid=5,subvol=/".into());
        let c = compare(&b, &a);
        assert_eq!(
            c.causes[0],
            "the file system changed: options rw,relatime - rw -> rw,relatime - rw,space_cache=v2,subvolid=5,subvol=/; \
             type ext4 -> btrfs"
        );
        // Known on one side only (an older report): unknown, never a change.
        b.config.remove("filesystem.type");
        b.config.remove("filesystem.options");
        assert!(!compare(&b, &a).causes.iter().any(|x| x.contains("file system")));
    }

    #[test]
    fn cpu_contention_without_config_change() {
        let mut b = side([1500.0, 800.0, 15_000.0, 15_000.0], 30_000.0);
        let mut a = side([1500.0, 800.0, 15_000.0, 36_000.0], 17_000.0);
        b.per_io.insert("ctx_involuntary".into(), 0.001);
        a.per_io.insert("ctx_involuntary".into(), 0.4);
        let c = compare(&b, &a);
        assert_eq!(c.dominant_phase, "completion");
        assert!(c.causes[0].starts_with("CPU contention"), "{:?}", c.causes);
    }

    /// Recorded from tests/compare.rs' drop_caches pair: readahead kept the hit ratio at 99.85%,
    /// the wait for the device tells.
    #[test]
    fn a_dropped_page_cache_is_named_from_the_wait_not_only_the_hit_ratio() {
        let mut b = side([1500.0, 0.0, 0.0, 0.0], 600_000.0);
        let mut a = side([6800.0, 0.0, 0.0, 0.0], 150_000.0);
        for (s, hit, waited, rq) in [(&mut b, 1.0, 0.0, 0.0), (&mut a, 0.998_474, 5.232, 0.003_662)] {
            s.per_io.insert("pc read_hit_ratio".into(), hit);
            s.per_io.insert("pc read_waited_us".into(), waited);
            s.per_io.insert("pc requests_per_read".into(), rq);
        }
        let c = compare(&b, &a);
        assert!(
            c.causes[0].starts_with(
                "the page cache: buffered reads found their data cached 100.0% -> 99.8% of the time; \
                 waiting for the device 0.0 -> 5.2 us per read"
            ),
            "{:?}",
            c.causes
        );
        assert!(c.causes[0].ends_with(
            "(the cache was dropped or the data no longer fits: drop_caches, memory pressure, a first run)"
        ));
        // The same hit ratios with no change in the wait and no read sent to the device: nothing
        // to say about the cache.
        a.per_io.insert("pc read_waited_us".into(), 0.2);
        a.per_io.insert("pc requests_per_read".into(), 0.0);
        let c = compare(&b, &a);
        assert!(!c.causes.iter().any(|x| x.contains("page cache")), "{:?}", c.causes);
    }

    /// Recorded from the same test's io_uring pair: the cache refilled fast, the wait grew by a
    /// third of what the reads lost.
    #[test]
    fn a_small_wait_that_explains_a_share_of_the_loss_names_the_cache() {
        let mut b = side([3800.0, 0.0, 0.0, 0.0], 250_000.0);
        let mut a = side([4500.0, 0.0, 0.0, 0.0], 212_000.0);
        for (s, hit, waited) in [(&mut b, 1.0, 0.0), (&mut a, 0.999_573, 0.229)] {
            s.per_io.insert("pc read_hit_ratio".into(), hit);
            s.per_io.insert("pc read_waited_us".into(), waited);
        }
        let c = compare(&b, &a);
        assert!(c.causes.first().is_some_and(|x| x.contains("the cache was dropped")), "{:?}", c.causes);
        // The same wait against no change in latency: noise.
        let mut a2 = side([3800.0, 0.0, 0.0, 0.0], 250_000.0);
        a2.per_io.insert("pc read_hit_ratio".into(), 0.999_573);
        a2.per_io.insert("pc read_waited_us".into(), 0.229);
        let c = compare(&b, &a2);
        assert!(!c.causes.iter().any(|x| x.contains("page cache")), "{:?}", c.causes);
    }

    /// A fast device: reads lost most of their time queueing readahead themselves, not waiting.
    /// The hit ratio fell 3.6 points and the wait 0 -> 0.4 us of a 2.5 -> 7.4 us read; one read in
    /// four now queues a bio, none did before: the cache is named. The same pair with no bio
    /// queued after says nothing about the cache.
    #[test]
    fn reads_sent_to_the_device_name_the_cache_when_the_wait_is_small() {
        let mut b = side([2500.0, 0.0, 0.0, 0.0], 400_000.0);
        let mut a = side([7400.0, 0.0, 0.0, 0.0], 135_000.0);
        for (s, hit, waited, bios) in [(&mut b, 1.0, 0.0, 0.0), (&mut a, 0.964, 0.4, 0.25)] {
            s.per_io.insert("pc read_hit_ratio".into(), hit);
            s.per_io.insert("pc read_waited_us".into(), waited);
            s.per_io.insert("pc bios_per_read".into(), bios);
        }
        let c = compare(&b, &a);
        assert!(
            c.causes.first().is_some_and(
                |x| x.contains("bios queued per read 0.0000 -> 0.2500") && x.contains("the cache was dropped")
            ),
            "{:?}",
            c.causes
        );
        a.per_io.insert("pc bios_per_read".into(), 0.0);
        let c = compare(&b, &a);
        assert!(!c.causes.iter().any(|x| x.contains("page cache")), "{:?}", c.causes);
    }

    #[test]
    fn a_lowered_dirty_limit_is_named_with_the_time_writers_were_held() {
        let mut b = side([2000.0, 0.0, 0.0, 0.0], 400_000.0);
        let mut a = side([9000.0, 0.0, 0.0, 0.0], 100_000.0);
        b.config.insert("vm_dirty.dirty_bytes".into(), "0".into());
        a.config.insert("vm_dirty.dirty_bytes".into(), "4194304".into());
        b.per_io.insert("pc write_throttled_us".into(), 0.0);
        a.per_io.insert("pc write_throttled_us".into(), 6.5);
        let c = compare(&b, &a);
        let cause = c.causes.iter().find(|x| x.starts_with("dirty-page throttling")).expect("named");
        assert_eq!(
            cause,
            "dirty-page throttling; vm.dirty_bytes 0 -> 4194304; writes held in balance_dirty_pages 0.0 -> 6.5 us per write"
        );
    }

    #[test]
    fn a_disk_seen_on_one_side_only_is_not_a_change() {
        let mut b = side([1000.0, 2000.0, 20_000.0, 3000.0], 30_000.0);
        let mut a = b.clone();
        b.config.insert("devices.vda.scheduler".into(), "mq-deadline".into());
        b.config.insert("devices.loop0.scheduler".into(), "none".into());
        a.config.insert("devices.loop0.scheduler".into(), "none".into());
        assert!(compare(&b, &a).config_changes.is_empty());
        a.config.insert("devices.loop0.scheduler".into(), "bfq".into());
        assert_eq!(compare(&b, &a).config_changes.len(), 1);
    }

    #[test]
    fn flatten_names_devices_and_joins_lists() {
        let v: Value = serde_json::json!({
            "kernel": "6.18", "devices": [{"name": "vda", "scheduler": "mq-deadline"}],
            "iommu": {"group_types": [["DMA", 3]], "cmdline": ["intel_iommu=on"]}, "governor": null
        });
        let mut m = BTreeMap::new();
        flatten("", &v, &mut m);
        assert_eq!(m["devices.vda.scheduler"], "mq-deadline");
        assert_eq!(m["iommu.group_types"], "DMA x3");
        assert_eq!(m["iommu.cmdline"], "intel_iommu=on");
        assert_eq!(m["governor"], "none");
    }

    #[test]
    fn refuses_other_schemas_and_reads_fio() {
        let e = side_from_json(&serde_json::json!({"schema": "iopath.sweep/1"}), "s.json", None).unwrap_err();
        assert!(e.to_string().contains("schema 'iopath.sweep/1'"));
        let e = side_from_json(&serde_json::json!({"hello": 1}), "h.json", None).unwrap_err();
        assert!(e.to_string().contains("not an iopath report"));
        let fio = serde_json::json!({
            "fio version": "fio-3.33",
            "jobs": [{"jobname": "t", "job options": {"iodepth": "16"},
                      "read": {"io_bytes": 4096, "iops": 1000.0, "total_ios": 10,
                               "lat_ns": {"mean": 50000.0},
                               "clat_ns": {"percentile": {"50.000000": 40000, "99.000000": 90000}}}}]
        });
        let s = side_from_json(&fio, "fio.json", None).unwrap();
        assert_eq!((s.iops, s.lat.mean, s.lat.p99), (1000.0, 50000.0, 90000.0));
        assert!(s.phases.is_none());
        assert_eq!(s.config["job.qd"], "16");
    }

    /// The same 2 s randread job, seconds apart: `iopath run --engine uring --qd 16` and fio with
    /// io_uring, iodepth=16 (recorded on the build VM, tests/data/compare-fio). fio's JSON has no
    /// system configuration and none of iopath's generator-only settings: unknown, not changes.
    #[test]
    fn iopath_and_fio_of_one_job_differ_in_nothing_they_both_record() {
        let read = |f: &str| -> Value {
            let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/compare-fio/");
            serde_json::from_slice(&std::fs::read(format!("{p}{f}")).unwrap()).unwrap()
        };
        let ours = side_from_json(&read("iopath-run.json"), "iopath-run.json", None).unwrap();
        let mut fio_json = read("fio.json");
        let fio = side_from_json(&fio_json, "fio.json", None).unwrap();
        for (k, v) in [("engine", "uring"), ("qd", "16"), ("bs", "4096"), ("rw", "randread"), ("direct", "true")] {
            assert_eq!(fio.config[&format!("job.{k}")], v, "{k}");
        }
        let c = compare(&ours, &fio);
        assert!(c.config_changes.is_empty(), "{:?}", c.config_changes);
        assert!(c.causes.is_empty(), "{:?}", c.causes);
        for k in ["job.verify", "job.fio.name"] {
            assert!(c.config_one_side_only.iter().any(|x| x == k), "{k}: {:?}", c.config_one_side_only);
        }
        // Measured on both sides (fio's getrusage count): compared; IRQs fio does not count: not.
        assert!(per_io(&c, "ctx_switches").is_some_and(|x| x.after > 0.0));
        assert!(per_io(&c, "irq").is_none());
        // A real difference of the job is still one, and named.
        fio_json["jobs"][0]["job options"]["iodepth"] = "32".into();
        let c = compare(&ours, &side_from_json(&fio_json, "fio.json", None).unwrap());
        let qd = c.config_changes.iter().find(|x| x.key == "job.qd").expect("qd change");
        assert_eq!((qd.before.as_str(), qd.after.as_str()), ("16", "32"));
        assert!(c.causes.iter().any(|x| x.starts_with("the job itself changed")), "{:?}", c.causes);
    }
}
