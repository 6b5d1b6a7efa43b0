//! The run report: one struct (`iopath.report/1`), built from a finished run, rendered as text or
//! JSON. Later reports (trace, compare) extend it with more keys; existing keys keep their meaning.

pub mod compare_text;
pub mod html;
pub mod plot;
pub mod text;

use serde::{Deserialize, Serialize};

use crate::hist::LatSummary;
use crate::job::{EngineKind, Job};
use crate::loadgen::{Outcome, Prepared};

pub const SCHEMA: &str = "iopath.report/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    /// The bundled generator's job (`null` when tracing another process).
    pub job: Option<Job>,
    pub system: System,
    /// What outside the job changes I/O performance (kernel, IOMMU, device queue, CPU).
    pub config: crate::sysconf::Config,
    pub target: Option<Prepared>,
    /// The traced process when it is not the bundled generator (`--pid`, `-- CMD`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Outputs asked for that could not be written (also among the warnings): the run exits
    /// non-zero for them once the report and every other output are out.
    #[serde(skip)]
    pub output_errors: Vec<String>,
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    /// Blocks whose content `--verify` checked.
    #[serde(default)]
    pub verified: u64,
    pub runtime_ns: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    /// Queue (prepared) to reaped: what the application waited.
    pub lat_ns: LatSummary,
    /// The latency percentiles `--percentiles` chose (fio's percentile_list), from the same
    /// histogram as `lat_ns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lat_percentiles_ns: Vec<Percentile>,
    /// --fsync / --fdatasync: the generator's own timing of each sync call (not in `lat_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_lat_ns: Option<LatSummary>,
    /// I/Os in flight on average, by Little's law (IOPS x mean latency): what the queue depth
    /// really was. Below the requested depth when the submitting thread, not the device, limits.
    pub inflight_avg: f64,
    /// SQPOLL under trace: completion posted (probes) -> taken from the CQ ring (the generator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reap_wait_ns: Option<LatSummary>,
    /// Queue to submit call returned; `null` for synchronous engines (psync).
    pub slat_ns: Option<LatSummary>,
    /// Submit call returned to reaped (`null` when tracing another process).
    pub clat_ns: Option<LatSummary>,
    pub cpu: Cpu,
    pub ctx_switches: CtxSwitches,
    /// The phase breakdown and per-I/O counts (`iopath trace` only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::aggregate::TraceSummary>,
    /// The generator's mean latency minus the sum of the phase means: syscall entry/exit and the
    /// application's own time, which no kernel phase covers (trace only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_phases_ns: Option<i64>,
    /// The generator's worker threads' time runnable but not running (schedstat run_delay):
    /// traced or not, lean or not. None for another process and where the kernel keeps no
    /// schedstat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay: Option<RunDelay>,
    /// How the run evolved, per `--interval` (the generator's own clock reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<crate::timeseries::TimeSeries>,
    /// The worker threads' own counts, kept beside the BPF ones as a cross-check (trace only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ctx_switches_getrusage: Option<CtxSwitches>,
    /// Names of the target device's interrupt vectors (trace only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irq_vectors: Vec<String>,
    /// True when the run was cut short (Ctrl-C, SIGTERM): the numbers cover what finished.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// `--flamegraph` / `--offcpu`: the graphs written and what they show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flamegraphs: Option<crate::flame::FlameSummary>,
    /// `--perfetto`: the timeline written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perfetto: Option<PerfettoFile>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PerfettoFile {
    pub path: std::path::PathBuf,
    /// I/Os drawn; records left out (damaged or out of order); interrupt instants; tracks.
    pub ios: u64,
    pub skipped: u64,
    pub irqs: u64,
    pub tracks: u64,
    /// Interrupts beyond what the trace keeps in memory (not drawn).
    pub irqs_dropped: u64,
}

/// A traced process that is not the bundled generator.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub command: String,
    /// Exit status of a `-- CMD` run; None while it still ran (or for `--pid`).
    pub exit_code: Option<i32>,
    /// iopath itself stopped the command (--duration reached, or Ctrl-C): its exit status is
    /// the interruption's, not a failure of its own.
    #[serde(default)]
    pub interrupted: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct System {
    pub kernel: String,
    pub cpus: usize,
}

impl Tool {
    fn this() -> Tool {
        Tool { name: "iopath".into(), version: env!("CARGO_PKG_VERSION").into() }
    }
}

/// The machine as a report describes it, captured by the caller (live, or from a recorded
/// sysroot in tests): report building reads nothing itself.
#[derive(Clone, Debug)]
pub struct Captured {
    pub system: System,
    pub config: crate::sysconf::Config,
}

impl Captured {
    /// From `roots`: the disks the I/O went to and the traced process (its cgroup).
    pub fn from(roots: &crate::sysconf::SysRoots, disks: &[String], pid: u32) -> Captured {
        let config = crate::sysconf::capture(roots, disks, pid);
        Captured { system: System { kernel: crate::sysconf::kernel_release(roots), cpus: config.cpus }, config }
    }

    /// This machine now; `cpus` as the scheduler offers them to this process (affinity, cpuset).
    pub fn live(disks: &[String], pid: u32) -> Captured {
        let mut c = Captured::from(&crate::sysconf::SysRoots::live(), disks, pid);
        c.system.cpus = std::thread::available_parallelism().map_or(c.system.cpus, |n| n.get());
        c
    }

    /// This machine now, for a generator run on `o`'s target.
    pub fn for_run(o: &Outcome) -> Captured {
        let mut c = Captured::live(&o.target.disk.iter().cloned().collect::<Vec<_>>(), std::process::id());
        if o.target.kind == "file" {
            c.config.filesystem = Some(crate::sysconf::FileSystem {
                kind: o.target.fs_type.clone(),
                options: o.target.mount_options.clone(),
            });
        }
        c
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cpu {
    /// Percent of one CPU over the run, as fio reports it.
    pub usr_pct: f64,
    pub sys_pct: f64,
    pub usr_ns: u64,
    pub sys_ns: u64,
    /// (usr + sys) / ios: the CPU cost of one I/O.
    pub per_io_ns: f64,
}

/// One latency percentile: p in (0, 100), its value in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    pub p: f64,
    pub ns: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CtxSwitches {
    pub voluntary: u64,
    pub involuntary: u64,
    pub total: u64,
    pub per_io: f64,
    /// `getrusage` (the worker threads' own counts) or `sched_switch` (counted by BPF).
    pub source: String,
}

/// Time on a run queue waiting for a CPU, after wakeups and preemptions alike.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunDelay {
    pub total_ns: u64,
    pub per_io_ns: f64,
    /// Where it was read: "schedstat" (/proc/thread-self/schedstat, per worker thread).
    pub source: String,
}

impl Report {
    pub fn from_run(job: &Job, o: Outcome, machine: Captured) -> Report {
        let elapsed = o.elapsed_ns();
        let secs = elapsed as f64 / 1e9;
        let ios = o.stats.ios();
        let per_io = |x: f64| if ios == 0 { 0.0 } else { x / ios as f64 };
        Report {
            schema: SCHEMA.into(),
            tool: Tool::this(),
            job: Some(job.clone()),
            system: machine.system,
            config: machine.config,
            warnings: o.target.warnings.clone(),
            target: Some(o.target),
            process: None,
            output_errors: Vec::new(),
            ios,
            reads: o.stats.reads,
            writes: o.stats.writes,
            verified: o.stats.verified,
            runtime_ns: elapsed,
            iops: ios as f64 / secs,
            bw_bytes: (o.stats.bytes_read + o.stats.bytes_written) as f64 / secs,
            lat_ns: o.stats.lat.summary(),
            lat_percentiles_ns: job
                .percentiles
                .iter()
                .map(|&p| Percentile { p, ns: o.stats.lat.quantile(p / 100.0) })
                .filter(|_| o.stats.lat.count() > 0)
                .collect(),
            sync_lat_ns: (o.stats.sync_lat.count() > 0).then(|| o.stats.sync_lat.summary()),
            reap_wait_ns: (o.stats.reap_wait.count() > 0).then(|| o.stats.reap_wait.summary()),
            inflight_avg: ios as f64 / secs * o.stats.lat.mean() / 1e9,
            slat_ns: (job.engine != EngineKind::Psync).then(|| o.stats.slat.summary()),
            clat_ns: Some(o.stats.clat.summary()),
            cpu: Cpu {
                usr_pct: o.usage.usr_ns as f64 / elapsed as f64 * 100.0,
                sys_pct: o.usage.sys_ns as f64 / elapsed as f64 * 100.0,
                usr_ns: o.usage.usr_ns,
                sys_ns: o.usage.sys_ns,
                per_io_ns: per_io((o.usage.usr_ns + o.usage.sys_ns) as f64),
            },
            ctx_switches: CtxSwitches {
                voluntary: o.stats.ctx_voluntary,
                involuntary: o.stats.ctx_involuntary,
                total: o.stats.ctx_voluntary + o.stats.ctx_involuntary,
                per_io: per_io((o.stats.ctx_voluntary + o.stats.ctx_involuntary) as f64),
                source: "getrusage".into(),
            },
            run_delay: o.stats.run_delay_ns.map(|ns| RunDelay {
                total_ns: ns,
                per_io_ns: per_io(ns as f64),
                source: "schedstat".into(),
            }),
            timeseries: crate::timeseries::summarize(&o.stats.series.done, o.stats.series.interval_ns(), elapsed),
            trace: None,
            partial: o.stopped,
            ctx_switches_getrusage: None,
            outside_phases_ns: None,
            irq_vectors: Vec::new(),
            flamegraphs: None,
            perfetto: None,
        }
        .with_depth_check(job)
    }

    /// Says so when the generator could not keep the queue depth it was asked for: the latency
    /// then covers fewer I/Os in flight than the job says, and IOPS are the submitter's limit.
    fn with_depth_check(mut self, job: &Job) -> Report {
        let wanted = (job.qd * job.jobs) as f64;
        if job.engine != EngineKind::Psync && wanted > 1.0 && self.ios > 0 && self.inflight_avg < 0.8 * wanted {
            self.warnings.push(format!(
                "only {:.1} of the {} requested I/Os were in flight on average (Little's law: IOPS x mean latency): \
                 the submitting thread, not the device, set the pace{}",
                self.inflight_avg,
                wanted,
                if job.batch_submit == 1 {
                    "; --batch-submit 0 submits every free slot in one call (fio: iodepth_batch_submit)"
                } else {
                    ""
                }
            ));
        }
        self
    }

    /// A report for a traced process other than the generator: its I/O count, latency (syscall
    /// entry to reap) and bytes come from the probes; CPU from the process's own accounting.
    pub fn from_process(
        process: Process,
        raw: &crate::model::RawTrace,
        elapsed_ns: u64,
        cpu_ns: (u64, u64),
        warnings: Vec<String>,
        machine: Captured,
        partial: bool,
    ) -> Report {
        use crate::model::{Counter, Phase};
        // The process's calls: followed direct I/Os and buffered reads and writes (page cache).
        let mut total = raw.phase(Phase::Total);
        let (pc_reads, pc_writes) = (raw.phase(Phase::PcRead), raw.phase(Phase::PcWrite));
        total.merge(&pc_reads);
        total.merge(&pc_writes);
        // copy_file_range / sendfile: I/Os of the process, neither a read nor a write alone.
        total.merge(&raw.phase(Phase::PcCopy));
        // io_uring requests on buffered files.
        total.merge(&raw.phase(Phase::Upc));
        let ios = total.count;
        let secs = elapsed_ns.max(1) as f64 / 1e9;
        let per_io = |x: f64| if ios == 0 { 0.0 } else { x / ios as f64 };
        Report {
            schema: SCHEMA.into(),
            tool: Tool::this(),
            job: None,
            system: machine.system,
            config: machine.config,
            target: None,
            process: Some(process),
            warnings,
            output_errors: Vec::new(),
            ios,
            // Counted as I/Os complete, so a few still unreaped at the end may be in the split
            // but not in `ios`.
            reads: raw.counter(Counter::Reads) + pc_reads.count + raw.route(crate::model::RouteKind::UringCached).0,
            writes: raw.counter(Counter::Writes) + pc_writes.count + raw.route(crate::model::RouteKind::UringCached).1,
            verified: 0,
            runtime_ns: elapsed_ns,
            iops: ios as f64 / secs,
            bw_bytes: (raw.counter(Counter::Bytes)
                + raw.counter(Counter::PcBytesRead)
                + raw.counter(Counter::PcBytesWritten)
                + raw.counter(Counter::PcBytesCopied)
                + raw.counter(Counter::UpcBytes)) as f64
                / secs,
            lat_ns: total.summary(),
            lat_percentiles_ns: Vec::new(),
            sync_lat_ns: None,
            reap_wait_ns: None,
            inflight_avg: ios as f64 / secs * total.mean() / 1e9,
            slat_ns: None,
            clat_ns: None,
            cpu: Cpu {
                usr_pct: cpu_ns.0 as f64 / elapsed_ns.max(1) as f64 * 100.0,
                sys_pct: cpu_ns.1 as f64 / elapsed_ns.max(1) as f64 * 100.0,
                usr_ns: cpu_ns.0,
                sys_ns: cpu_ns.1,
                per_io_ns: per_io((cpu_ns.0 + cpu_ns.1) as f64),
            },
            ctx_switches: CtxSwitches {
                voluntary: 0,
                involuntary: 0,
                total: 0,
                per_io: 0.0,
                source: "sched_switch".into(),
            },
            run_delay: None,
            timeseries: raw.series.as_ref().and_then(crate::timeseries::from_raw),
            trace: None,
            partial,
            ctx_switches_getrusage: None,
            outside_phases_ns: None,
            irq_vectors: Vec::new(),
            flamegraphs: None,
            perfetto: None,
        }
    }

    /// A name for the run's output folder: "uring-randread-4k-qd32", "fio", "pid1234".
    pub fn label(&self) -> String {
        match (&self.job, &self.process) {
            (Some(j), _) => format!("{}-{}-{}-qd{}", j.engine, j.rw, crate::job::fmt_bytes(j.bs as u64), j.qd),
            (None, Some(p)) => p
                .command
                .split_whitespace()
                .next()
                .and_then(|c| c.rsplit('/').next())
                .filter(|c| !c.is_empty())
                .map_or_else(|| format!("pid{}", p.pid), str::to_owned),
            (None, None) => "run".to_owned(),
        }
    }

    /// One line for a flamegraph's title: the job and the phase means.
    pub fn headline(&self) -> (String, String) {
        let what = match (&self.job, &self.process) {
            (Some(j), _) => format!(
                "iopath: {} {} {} qd{} on {}",
                j.engine,
                j.rw,
                crate::job::fmt_bytes(j.bs as u64),
                j.qd,
                self.target.as_ref().map_or_else(String::new, |t| t.path.display().to_string())
            ),
            (None, Some(p)) => format!("iopath: {} (pid {})", p.command, p.pid),
            (None, None) => "iopath".to_owned(),
        };
        let phases = match &self.trace {
            Some(t) => {
                let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
                format!(
                    "{:.0} IOPS, mean us per I/O: submission {}, block {}, device {}, completion {}",
                    self.iops,
                    us(t.phases.submission.mean_ns),
                    us(t.phases.block.mean_ns),
                    us(t.phases.device.mean_ns),
                    us(t.phases.completion.mean_ns)
                )
            }
            None => format!("{:.0} IOPS", self.iops),
        };
        (what, phases)
    }

    /// Adds what the probes measured; context switches then come from sched_switch.
    pub fn with_trace(mut self, t: crate::aggregate::TraceSummary, irq_vectors: Vec<String>) -> Report {
        let total = t.ctx_voluntary + t.ctx_involuntary;
        let wait = self.reap_wait_ns.as_ref().map(crate::aggregate::PhaseStats::from);
        let mut t = crate::aggregate::with_reap_from_ring(t, wait);
        if let (Some(job), Some(target)) = (&self.job, &self.target) {
            if job.direct {
                // A device's fs_type is "block device": its direct I/O never meets a cache either.
                t.direct_fs = Some(target.fs_type.clone());
            }
        }
        t.reconciliation = Some(crate::aggregate::reconcile(&t, self.lat_ns.mean));
        if let (Some(sc), Some(app)) = (t.sync_calls.as_mut(), &self.sync_lat_ns) {
            sc.app_mean_ns = Some(app.mean);
        }
        if self.job.is_some() {
            // The generator's own view, kept to cross-check the probes.
            self.ctx_switches_getrusage = Some(self.ctx_switches.clone());
            self.outside_phases_ns = Some(self.lat_ns.mean as i64 - t.phase_sum_mean_ns as i64);
        }
        // --lean has no sched_switch: the generator's getrusage counts stay.
        if !t.lean {
            self.ctx_switches = CtxSwitches {
                voluntary: t.ctx_voluntary,
                involuntary: t.ctx_involuntary,
                total,
                per_io: if self.ios == 0 { 0.0 } else { total as f64 / self.ios as f64 },
                source: "sched_switch".into(),
            };
        }
        self.trace = Some(t);
        self.irq_vectors = irq_vectors;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(p: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(p)
    }

    /// Report building reads no machine state of its own: what it says of the machine is what
    /// the caller captured (here a recorded 6.12 sysroot, not this host).
    #[test]
    fn a_report_describes_the_machine_it_was_given() {
        let m = Captured::from(&crate::sysconf::SysRoots::under(&data("sysroot")), &[], 1);
        let p = Process { pid: 1, command: "x".into(), exit_code: Some(0), interrupted: false };
        let r = Report::from_process(p, &crate::model::RawTrace::default(), 1_000_000, (0, 0), Vec::new(), m, false);
        assert_eq!(r.system.kernel, "6.12.9-amd64");
        assert_eq!(r.config.kernel, "6.12.9-amd64");
    }

    /// Reports read back typed, the recorded ones of earlier versions included: a field renamed
    /// or gone is an error naming it, never a 0.
    #[test]
    fn reports_read_back_typed_and_a_renamed_field_is_an_error() {
        for side in ["before", "after"] {
            let text = std::fs::read_to_string(data(&format!("compare-iommu/{side}/report.json"))).unwrap();
            let r: Report = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{side}: {e}"));
            assert!(r.iops > 0.0 && r.trace.is_some(), "{side}");
            let again: Report = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
            assert_eq!(again.trace, r.trace);
            let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let iops = v.as_object_mut().unwrap().remove("iops").unwrap();
            v["iops_total"] = iops;
            let e = crate::compare::side_from_json(&v, "renamed.json", None).unwrap_err().to_string();
            assert!(e.contains("missing field `iops`"), "{e}");
        }
        // A run report has no trace: read as none, not as a trace of zeros.
        let run = std::fs::read_to_string(data("compare-fio/iopath-run.json")).unwrap();
        let r: Report = serde_json::from_str(&run).unwrap();
        assert!(r.trace.is_none());
    }
}
