//! Command-line structs (clap derive) and their conversion into a `Job`; nothing else.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::top::{Loop, Show};
use clap::{builder::BoolishValueParser, ArgAction, Args, Parser, Subcommand};

use crate::job::{self, EngineKind, Job, Rw, Stop, Target};

const EXAMPLES: &str = "\
EXAMPLES:
  iopath doctor                                  what this kernel and machine can trace
  iopath run --engine uring --qd 32              4k random reads on a 1 GiB scratch file, 10 s
  iopath run --engine aio --qd 32 --file /mnt/nvme/t.dat --size 8g --runtime 30s
  iopath run --engine uring --rw randrw --mix 70 --bs 16k --qd 64 --jobs 2 --cpus 0-1
  iopath run --engine uring --qd 128 --sqpoll --fixed-bufs --batch-submit 16 --batch-complete 8
  iopath run --device /dev/nvme0n1 --rw randread --qd 32 --json run.json
  iopath trace --engine uring --qd 32            the phase breakdown of the same job
  iopath trace --engine aio --qd 32 --out runs/aio32
  iopath trace --pid 4242 --duration 10s          another process's io_uring/aio I/O
  iopath trace -- fio --name=x --ioengine=libaio --iodepth=32 --rw=randread --direct=1 --size=1g";

#[derive(Parser, Debug)]
#[command(name = "iopath", version = env!("IOPATH_VERSION"), about = "Where did my I/O's time go? A kernel I/O path profiler.", after_help = EXAMPLES)]
pub struct Cli {
    /// Show libbpf's own messages and what was decided about probes.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub cmd: Command,
}

// Each subcommand's --help ends with the examples the README and docs/ use.
const RUN_EXAMPLES: &str = "\
Examples:
  iopath run --engine uring --qd 32 --file /var/tmp/iop/t.dat --runtime 3s
  iopath run --engine aio --qd 32 --device /dev/nvme0n1 --json run.json
  iopath run --engine uring --rw randrw --mix 70 --bs 16k --qd 64 --jobs 2";
const TRACE_EXAMPLES: &str = "\
Examples:
  iopath trace --engine uring --qd 32 --file /var/tmp/iop/t.dat --runtime 3s
  iopath trace -- dd if=/var/tmp/iop/t.dat of=/dev/null bs=1M iflag=direct
  iopath trace --pid 4242 --duration 5s";
const DOCTOR_EXAMPLES: &str = "\
Examples:
  iopath doctor
  iopath doctor --json > doctor.json";
const REPORT_EXAMPLES: &str = "\
Examples:
  iopath trace --engine uring --qd 32 --events-out run.events
  iopath report --events run.events";
const FLAMEGRAPH_EXAMPLES: &str = "\
Examples:
  iopath trace --engine uring --qd 32 --file /var/tmp/iop/t.dat --runtime 3s --flamegraph --out run1
  iopath flamegraph -- fio job.fio
  iopath flamegraph --diff before/oncpu.folded after/oncpu.folded";
const COMPARE_EXAMPLES: &str = "\
Examples:
  iopath compare before/report.json after/report.json
  iopath compare before/sweep.json after/sweep.json --json compare.json";
const STUDY_EXAMPLES: &str = "\
Examples:
  iopath study --sides 'IOMMU off,IOMMU strict' --out study \\
    'Debian 6.1=6.1-off/sweep,6.1-strict/sweep' 'Debian 6.12=6.12-off/sweep,6.12-strict/sweep'";
const SWEEP_EXAMPLES: &str = "\
Examples:
  iopath sweep --engine uring,aio --qd 1,8,32 --repeat 1 --runtime 1s --file /var/tmp/iop/t.dat --out study
  iopath sweep --engine uring,aio,psync --qd 1,2,4,8,16,32,64,128 --repeat 10 --seed 1 --device /dev/nvme0n1";
const TOP_EXAMPLES: &str = "\
Examples:
  iopath top
  iopath top --once
  iopath top --batch --count 10 --by pod";
const SERVE_EXAMPLES: &str = "\
Examples:
  iopath serve --listen 127.0.0.1:9435
  iopath serve --sync-syscalls";
const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  iopath completions bash > /usr/share/bash-completion/completions/iopath
  iopath completions zsh > /usr/share/zsh/vendor-completions/_iopath
  iopath completions fish > /usr/share/fish/vendor_completions.d/iopath.fish";
const MAN_EXAMPLES: &str = "\
Examples:
  iopath man /usr/local/share/man/man1
  iopath man man && man -l man/iopath-trace.1";

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the bundled load generator and report IOPS, latency percentiles, CPU and context switches.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Run the generator under eBPF tracing: where each I/O's time went, phase by phase.
    #[command(after_help = TRACE_EXAMPLES)]
    Trace(TraceArgs),
    /// Check what this machine can trace: privileges, BTF, tracepoints, attach kinds, devices, IOMMU.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// Re-read what a trace kept: per-I/O phases from an --events-out file.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Flamegraphs: trace with stack sampling (like 'trace --flamegraph'), or render perf's
    /// samples (--perf-script), or compare two folded files (--diff).
    #[command(after_help = FLAMEGRAPH_EXAMPLES)]
    Flamegraph(FlamegraphArgs),
    /// Explain the difference between two runs: phases, counts, configuration, flamegraphs.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Sweep comparisons side by side on one page: each column two sweeps (A dashed, B solid),
    /// e.g. the VM rig's kernel study, each kernel's IOMMU off against strict.
    #[command(after_help = STUDY_EXAMPLES)]
    Study(StudyArgs),
    /// The engine x queue-depth study: every point N times in a seeded random order, median run
    /// with min/max, the phase breakdown per point, and an HTML report.
    #[command(after_help = SWEEP_EXAMPLES)]
    Sweep(SweepArgs),
    /// Live and system-wide, like top: every process (or cgroup) doing I/O, per disk and route:
    /// IOPS, bandwidth, each phase's p50/p99, IRQs and context switches per I/O.
    #[command(after_help = TOP_EXAMPLES)]
    Top(TopArgs),
    /// 'top' without a terminal, for a service: the Prometheus (OpenMetrics) endpoint alone.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Shell completions (bash, zsh, fish), printed to standard output.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions(CompletionsArgs),
    /// Man pages for iopath and each subcommand, written into a folder.
    #[command(after_help = MAN_EXAMPLES)]
    Man(ManArgs),
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell the completions are for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Folder for iopath.1 and iopath-<subcommand>.1 (made if missing; only those files are
    /// written).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct TopArgs {
    /// Refresh every this long (1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = job::parse_duration)]
    pub interval: Duration,
    /// Plain text instead of the terminal UI: one table per refresh, for scripts.
    #[arg(long)]
    pub batch: bool,
    /// One refresh in plain text, then exit.
    #[arg(long)]
    pub once: bool,
    /// With --batch: stop after this many refreshes (0: until Ctrl-C / SIGTERM).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Rows grouped by process or by cgroup ('c' switches in the terminal UI).
    #[arg(long, value_enum, default_value_t = crate::top::table::GroupBy::Process)]
    pub by: crate::top::table::GroupBy,
    /// Sort by ('s' cycles in the terminal UI): iops, bytes, or a phase's p99.
    #[arg(long, value_enum, default_value_t = crate::top::table::SortBy::Iops)]
    pub sort: crate::top::table::SortBy,
    /// Rows shown in text mode (0: all).
    #[arg(long, default_value_t = 0)]
    pub rows: usize,
    /// Also serve Prometheus metrics (OpenMetrics) at http://ADDR/metrics, e.g. 127.0.0.1:9435.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Cgroups with a label of their own in the metrics; later ones are summed into "other".
    #[arg(long, default_value_t = 50)]
    pub cgroups: usize,
    /// kubelet's pod folders (`<namespace>_<name>_<uid>`): Kubernetes pods are labelled with
    /// their namespace and name from there (pod UID, container id and QoS come from the cgroup).
    #[arg(long, value_name = "DIR", default_value = "/var/log/pods")]
    pub pods_root: std::path::PathBuf,
    /// Time sync and aio submission through the syscall hooks (raw_syscalls), as a trace does.
    /// Off by default: those hooks send every system call of every process through the slow
    /// path (getppid at 0.58x with them); without, sync and aio I/O are followed from their
    /// first bio (block and device phases) and io_uring from its submission to its posting.
    #[arg(long)]
    pub sync_syscalls: bool,
    /// The full phase set: submission and completion too, by process and thread, at ~1 us of
    /// BPF an I/O over five hooks. Without it (the default) one hook at block_rq_complete reads
    /// the request's own stamps (checked per device against hooked times): block and device
    /// phases by cgroup, disk, route and op, no process. --sync-syscalls implies it.
    #[arg(long)]
    pub phases: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Where to serve http://ADDR/metrics.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9435")]
    pub listen: String,
    /// How often the probes' tables are read (the exposition is as of the last read).
    #[arg(long, default_value = "1s", value_parser = job::parse_duration)]
    pub interval: Duration,
    /// Cgroups with a label of their own; later ones are summed into "other".
    #[arg(long, default_value_t = 50)]
    pub cgroups: usize,
    /// kubelet's pod folders (`<namespace>_<name>_<uid>`): Kubernetes pods are labelled with
    /// their namespace and name from there (pod UID, container id and QoS come from the cgroup).
    #[arg(long, value_name = "DIR", default_value = "/var/log/pods")]
    pub pods_root: std::path::PathBuf,
    /// Time sync and aio submission through the syscall hooks (raw_syscalls), as a trace does.
    /// Off by default: those hooks send every system call of every process through the slow
    /// path (getppid at 0.58x with them); without, sync and aio I/O are followed from their
    /// first bio (block and device phases) and io_uring from its submission to its posting.
    #[arg(long)]
    pub sync_syscalls: bool,
    /// The full phase set: submission and completion too, at ~1 us of BPF an I/O over five
    /// hooks. Without it (the default) one hook at block_rq_complete reads the request's own
    /// stamps (checked per device against hooked times): block and device phases by cgroup,
    /// disk, route and op. --sync-syscalls implies it.
    #[arg(long)]
    pub phases: bool,
    /// Duty-cycle the full phase set beside the one hook: attached for --phases-for (2s) every
    /// this long, its rows exported with window="phases" (submission and completion, by process
    /// route), then detached; what it cost in the window is iopath_phases_window_bpf_ns_per_io.
    #[arg(long, value_name = "DUR", value_parser = job::parse_duration)]
    pub phases_every: Option<Duration>,
    /// How long each --phases-every window lasts.
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = job::parse_duration)]
    pub phases_for: Duration,
    /// Attach serve's hooks with empty bodies: what they cost before any of their work, the
    /// floor `scripts/bench-serve-overhead.sh` sets beside serve. Metrics then count nothing.
    #[arg(long, hide = true)]
    pub empty_probes: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Engines, comma-separated: uring, aio, psync, uring+sqpoll, uring+iopoll, uring+batch, aio+batch.
    #[arg(long, default_value = "uring,aio")]
    pub engine: String,
    /// Queue depths, comma-separated (psync: the number of threads).
    #[arg(long, default_value = "1,2,4,8,16,32,64,128")]
    pub qd: String,
    /// Runs per point.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Pause between runs (e.g. 2s), to let caches, clocks and the device settle.
    #[arg(long, value_parser = job::parse_duration, allow_hyphen_values = true)]
    pub cooldown: Option<Duration>,
    /// Measure with 'iopath run' only (no phases, no probes).
    #[arg(long)]
    pub no_trace: bool,
    /// Folder for every run's report, sweep.json and report.html (default flamegraphs/sweep-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub dims: SweepDims,
    #[command(flatten)]
    pub job: JobCommon,
}

/// The job's shape as lists: every combination is a point of the sweep.
#[derive(Args, Debug, Clone)]
pub struct SweepDims {
    /// Access patterns, comma-separated (randread,randwrite,read,write,randrw).
    #[arg(long, default_value = "randread", value_name = "LIST")]
    pub rw: String,
    /// Block sizes, comma-separated (4k,64k,1m,32m).
    #[arg(long, default_value = "4k", value_name = "LIST")]
    pub bs: String,
    /// Worker threads, comma-separated (psync: threads = qd x jobs, the concurrency the other
    /// engines' point keeps in flight).
    #[arg(long, default_value = "1", value_name = "LIST")]
    pub jobs: String,
    /// O_DIRECT, comma-separated: true, false, or true,false (buffered vs direct).
    #[arg(long, default_value = "true", value_name = "LIST")]
    pub direct: String,
    /// I/Os per submit call, comma-separated (fio iodepth_batch_submit; 0 = all free slots).
    #[arg(long, default_value = "1", value_name = "LIST")]
    pub batch_submit: String,
    /// Completions waited for per reap, comma-separated (fio iodepth_batch_complete_min).
    #[arg(long, default_value = "1", value_name = "LIST")]
    pub batch_complete: String,
    /// Target files, comma-separated: the devices they live on compared in one study.
    #[arg(long, value_name = "LIST", conflicts_with = "device")]
    pub file: Option<String>,
    /// Target block devices, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub device: Option<String>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: an iopath report.json (or --json output), or fio --output-format=json output.
    pub before: PathBuf,
    /// The run to explain, in the same forms.
    pub after: PathBuf,
    /// Also write the comparison as JSON (iopath.compare/1) to PATH ('-' for stdout instead of text).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Folder for the differential flamegraph (default flamegraphs/compare-<time>), written when
    /// both runs have on-CPU stacks.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct StudyArgs {
    /// Each column: NAME=SWEEP_A,SWEEP_B (sweep.json files or the folders iopath sweep wrote).
    #[arg(required = true, value_name = "NAME=A,B")]
    pub columns: Vec<String>,
    /// What A and B are, as the page's legends and tables name them.
    #[arg(long, default_value = "A,B", value_name = "A,B")]
    pub sides: String,
    /// A line under the title: how the sweeps were made.
    #[arg(long)]
    pub note: Option<String>,
    /// Folder for study.html and study.json (iopath.study/1).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct FlamegraphArgs {
    /// Render 'perf script' output (or a perf.data, run through 'perf script') instead of tracing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["diff", "pid", "command"])]
    pub perf_script: Option<PathBuf>,
    /// Differential flamegraph of two folded files: red grew, blue shrank.
    #[arg(long, num_args = 2, value_names = ["BEFORE", "AFTER"], conflicts_with_all = ["pid", "command"])]
    pub diff: Option<Vec<PathBuf>>,
    #[command(flatten)]
    pub trace: TraceArgs,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// An events file written by 'iopath trace --events-out FILE'.
    #[arg(long, value_name = "FILE")]
    pub events: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Also write the report as JSON to this file; '-' for stdout.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write report.json, report.txt and raw.json (the probes' raw data) into this folder.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Use raw_tp programs instead of tp_btf.
    #[arg(long)]
    pub raw_tp: bool,
    /// Time every BPF program run (kernel BPF stats) and show what each probe costs per I/O.
    #[arg(long)]
    pub prog_stats: bool,
    /// Also stream one record per I/O through a ring buffer (counted; kept with --events-out).
    #[arg(long)]
    pub events: bool,
    /// Keep the per-I/O records in this file (implies --events); read it with 'iopath report --events'.
    #[arg(long, value_name = "FILE")]
    pub events_out: Option<PathBuf>,
    /// Trace this running process (and what it forks) instead of the bundled generator.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid (or -- CMD): stop tracing after this long (default: when it exits, or Ctrl-C).
    #[arg(long, value_parser = job::parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Sample on-CPU stacks (perf cpu-clock, every CPU): oncpu.folded + oncpu.svg in the output folder
    /// (--out, or flamegraphs/<job>-<time>).
    #[arg(long)]
    pub flamegraph: bool,
    /// Off-CPU time with stacks (sched_switch): offcpu.folded + offcpu.svg.
    #[arg(long)]
    pub offcpu: bool,
    /// Write every I/O as a Perfetto trace (ui.perfetto.dev): a track per thread and per disk
    /// queue, each I/O's phases as slices joined by a flow, the disk's interrupts as instants.
    /// Turns on --events.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<std::path::PathBuf>,
    /// Also write the sampled stacks as gzipped pprof profiles (oncpu.pb.gz, offcpu.pb.gz) for
    /// go tool pprof, Pyroscope or Parca.
    #[arg(long)]
    pub pprof: bool,
    /// Sample every process on every CPU, not only the traced ones (kernel threads too: loop workers).
    #[arg(long)]
    pub all_cpus: bool,
    /// Stack samples per second per CPU.
    #[arg(long, default_value_t = 997, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub freq: u64,
    /// NVMe's doorbell (issue -> nvme_queue_rq returns): fexit, else kprobes (auto); the kprobe
    /// pair forced; or off.
    #[arg(long, value_enum, default_value_t = crate::probe::options::Doorbell::Auto)]
    pub doorbell: crate::probe::options::Doorbell,
    /// Leave out hooks whose name contains one of these (comma-separated, e.g. irq,softirq): what
    /// a family of probes costs (scripts/bench-overhead.sh).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub skip_hooks: Vec<String>,
    /// Attach every probe with an empty body: what the hooks cost before any of their work (the
    /// floor in scripts/bench-overhead.sh). The report then has no phases: a measurement of cost
    /// only.
    #[arg(long, hide = true)]
    pub empty_probes: bool,
    /// A lean trace keeps block_rq_issue attached for the whole run. By default it checks each
    /// disk's own issue stamp (io_start_time_ns) against the hook on the same requests and, where
    /// the stamp is within max(1 us, 2%) on 99% of them, starts the device phase at the stamp and
    /// detaches the hook (checked again every 10 s; the report names each disk's verdict).
    #[arg(long)]
    pub issue_hook: bool,
    /// The bundled generator's direct I/O at the least cost (the default for direct io_uring and
    /// aio; refused elsewhere): only the hooks the four phases need, no scheduler or softirq hook.
    /// io_uring: no syscall hook either (a request starts when io_uring takes its SQE and its
    /// completion ends when posted; the generator times its own reap). aio: each request claimed
    /// at its first bio, not from the user's iocb array. Context switches come from getrusage;
    /// softirq time, preemption and run-queue waits are unknown (--full measures them).
    #[arg(long, conflicts_with = "full")]
    pub lean: bool,
    /// Every hook, also where --lean would do: per-I/O context switches, preemption and run-queue
    /// waits (sched_switch/sched_wakeup), BLOCK softirq time and, for io_uring, the syscall pair
    /// (syscall counts; the reap timed by a probe). Costs ~0.5-1 us of BPF per I/O more.
    #[arg(long)]
    pub full: bool,
    /// The page cache: split each buffered call into on CPU, waited and run queue (split, through
    /// the syscall hooks), or count reads and pages added per CPU from filemap's tracepoints
    /// (count: cheaper on cached reads, times no call and follows no syscall; buffered jobs).
    #[arg(long, value_enum, default_value_t = crate::probe::options::PageCacheMode::Split)]
    pub pagecache: crate::probe::options::PageCacheMode,
    /// Run and trace this command (and what it forks), e.g. -- fio job.fio
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Also write the report as JSON (schema iopath.report/1) to this file; '-' for stdout.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print JSON (schema iopath.doctor/1) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print only this kernel's facts as JSON (schema iopath.kernel-facts/1): the recording
    /// tests/data/kernels/<version>.json holds for each kernel of the VM rig's matrix.
    #[arg(long, conflicts_with = "json")]
    pub facts: bool,
    /// Also check each disk's own stamps (io_start_time_ns, start_time_ns) against the hooks
    /// over this many seconds of the host's own I/O, as top and serve do before trusting them
    /// (doctor makes no I/O: run it under load). 0: only what sysfs says to expect.
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub stamps: f64,
    /// Also try each file system this kernel and its mkfs offer (ext4, xfs, btrfs, f2fs): made
    /// on a scratch loop device of its own, its direct reads and writes traced; lists the ones
    /// followed here and why the others are not. Needs root; leaves nothing behind.
    #[arg(long)]
    pub filesystems: bool,
}

/// The workload, fio-style. Shared by `run` and `trace`.
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// I/O engine.
    #[arg(long, value_enum, default_value_t = EngineKind::Uring)]
    pub engine: EngineKind,
    /// I/Os in flight per job thread.
    #[arg(long, default_value_t = 1)]
    pub qd: u32,
    #[command(flatten)]
    pub shape: JobShape,
    #[command(flatten)]
    pub common: JobCommon,
}

/// The job's shape: the flags `sweep` takes as lists (see `SweepDims`). Shared by `run` and
/// `trace` as single values.
#[derive(Args, Debug, Clone)]
pub struct JobShape {
    /// Access pattern.
    #[arg(long, value_enum, default_value_t = Rw::Randread)]
    pub rw: Rw,
    /// Block size (4k, 64k, 1m...).
    #[arg(long, default_value = "4k", value_parser = job::parse_size)]
    pub bs: u64,
    /// Target file; created and fully written when missing or shorter than --size.
    #[arg(long, value_name = "PATH", conflicts_with = "device")]
    pub file: Option<PathBuf>,
    /// Target block device (read-only unless --allow-write; never a mounted one for writes).
    #[arg(long, value_name = "DEV")]
    pub device: Option<PathBuf>,
    /// O_DIRECT: bypass the page cache (--direct false for buffered I/O).
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new(), value_name = "BOOL")]
    pub direct: bool,
    /// Worker threads, each with its own ring/context and qd I/Os.
    #[arg(long, default_value_t = 1)]
    pub jobs: u32,
    /// Most I/Os per submit call (fio iodepth_batch_submit, default 1: submit each at once); 0 = all free slots.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub batch_submit: u32,
    /// Completions to wait for per reap (fio iodepth_batch_complete_min).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub batch_complete: u32,
}

/// Every job flag but the engine, the queue depth and the shape (which `sweep` takes as lists).
#[derive(Args, Debug, Clone)]
pub struct JobCommon {
    /// Read percentage for --rw randrw.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub mix: u8,
    /// Bytes of the target to use (default: the whole file or device; 1g for a new file).
    #[arg(long, value_parser = job::parse_size)]
    pub size: Option<u64>,
    /// The report's time series: IOPS, bandwidth and latency per this long (1s, 100ms).
    #[arg(long, default_value = "1s", value_parser = job::parse_duration, allow_hyphen_values = true)]
    pub interval: Duration,
    /// Latency percentiles the report lists (fio's percentile_list), comma-separated: 50,99,99.9.
    #[arg(long, default_value = "50,99", value_parser = job::parse_percentiles, value_name = "LIST")]
    pub percentiles: job::Percentiles,
    /// Also write fio's per-interval logs, PREFIX_iops.1.log, PREFIX_bw.1.log and PREFIX_lat.1.log
    /// (fio's write_*_log with log_avg_msec = --interval), for fio's plotting scripts.
    #[arg(long, value_name = "PREFIX")]
    pub log_prefix: Option<PathBuf>,
    /// How long to run (10s, 500ms, 2m). Default 10s unless --ios is given.
    #[arg(long, value_parser = job::parse_duration, allow_hyphen_values = true, conflicts_with = "ios")]
    pub runtime: Option<Duration>,
    /// Stop after this many I/Os in total (shared by the job threads).
    #[arg(long)]
    pub ios: Option<u64>,
    /// Allow a write job on a --device, or on an existing --file iopath did not create (destroys
    /// its data; never a mounted device or a loop device's backing file).
    #[arg(long)]
    pub allow_write: bool,
    /// Pin worker threads to these CPUs, round-robin (0-3,6).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Seed for random offsets and data (same seed, same sequence).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// io_uring: a kernel thread polls the submission queue.
    #[arg(long)]
    pub sqpoll: bool,
    /// io_uring: poll for completions instead of interrupts (needs driver poll queues).
    #[arg(long)]
    pub iopoll: bool,
    /// io_uring: register the I/O buffers once (READ_FIXED/WRITE_FIXED).
    #[arg(long)]
    pub fixed_bufs: bool,
    /// io_uring: issue every I/O from an io-wq worker (IOSQE_ASYNC; fio's force_async).
    #[arg(long)]
    pub force_async: bool,
    /// psync: preadv2/pwritev2 with RWF_HIPRI, polled sync I/O (fio's pvsync2 hipri).
    #[arg(long)]
    pub hipri: bool,
    /// psync: fsync(2) after every N writes (fio's fsync=N); timed apart from the writes.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub fsync: u32,
    /// psync: fdatasync(2) after every N writes (fio's fdatasync=N).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub fdatasync: u32,
    /// Open the target O_SYNC (fio's sync=1): each write returns once it is on stable storage.
    #[arg(long)]
    pub sync: bool,
    /// Write a (seed, offset) pattern; on reads, check every block holds it.
    #[arg(long)]
    pub verify: bool,
}

impl JobArgs {
    pub fn to_job(&self) -> Result<Job> {
        self.common.to_job(&self.shape.at(self.engine, self.qd))
    }

    /// The generator's flags given a value other than their default (--runtime aside: it also
    /// bounds a trace of another process). With --pid or -- CMD they cannot apply: the traced
    /// process does its own I/O, so they are refused rather than ignored.
    pub fn generator_flags_set(&self) -> Vec<&'static str> {
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            job: JobArgs,
        }
        let d = Defaults::parse_from(["iopath"]).job;
        let (a, b) = (&self.common, &d.common);
        let (x, y) = (&self.shape, &d.shape);
        let differs = |x: &dyn std::fmt::Debug, y: &dyn std::fmt::Debug| format!("{x:?}") != format!("{y:?}");
        [
            ("--engine", differs(&self.engine, &d.engine)),
            ("--qd", self.qd != d.qd),
            ("--rw", differs(&x.rw, &y.rw)),
            ("--mix", a.mix != b.mix),
            ("--bs", x.bs != y.bs),
            ("--size", a.size != b.size),
            ("--ios", a.ios != b.ios),
            ("--file", x.file != y.file),
            ("--device", x.device != y.device),
            ("--direct", x.direct != y.direct),
            ("--allow-write", a.allow_write != b.allow_write),
            ("--jobs", x.jobs != y.jobs),
            ("--cpus", a.cpus != b.cpus),
            ("--seed", a.seed != b.seed),
            ("--sqpoll", a.sqpoll != b.sqpoll),
            ("--iopoll", a.iopoll != b.iopoll),
            ("--fixed-bufs", a.fixed_bufs != b.fixed_bufs),
            ("--force-async", a.force_async != b.force_async),
            ("--hipri", a.hipri != b.hipri),
            ("--fsync", a.fsync != b.fsync),
            ("--fdatasync", a.fdatasync != b.fdatasync),
            ("--sync", a.sync != b.sync),
            ("--batch-submit", x.batch_submit != y.batch_submit),
            ("--batch-complete", x.batch_complete != y.batch_complete),
            ("--verify", a.verify != b.verify),
            // --interval applies to a traced process too (the probes' own time series); fio's
            // logs need each direction's latency and the block size, which only the generator has.
            ("--log-prefix", a.log_prefix != b.log_prefix),
            ("--percentiles", a.percentiles != b.percentiles),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

impl TraceArgs {
    /// How to trace, from these flags: the one conversion (what to trace is the job's or the
    /// process's).
    pub fn trace_flags(&self) -> crate::trace::TraceFlags {
        let sampling = self.flamegraph || self.offcpu;
        crate::trace::TraceFlags {
            force_raw_tp: self.raw_tp,
            prog_stats: self.prog_stats,
            events: self.events,
            events_out: self.events_out.clone(),
            stacks: sampling.then_some(crate::probe::options::StackOpts {
                oncpu: self.flamegraph,
                offcpu: self.offcpu,
                all_cpus: self.all_cpus,
                freq_hz: self.freq,
            }),
            doorbell: self.doorbell,
            skip_hooks: self.skip_hooks.clone(),
            empty_probes: self.empty_probes,
            issue_hook: self.issue_hook,
            hooks: match (self.lean, self.full) {
                (true, _) => crate::trace::HookSet::Lean,
                (false, true) => crate::trace::HookSet::Full,
                (false, false) => crate::trace::HookSet::Auto,
            },
            pagecache: self.pagecache,
            interval: self.job.common.interval,
            perfetto: self.perfetto.clone(),
        }
    }

    /// How long to trace another process (--pid, -- CMD): --duration, or --runtime as its
    /// synonym there. The generator's flags are refused: they cannot apply to another process.
    pub fn external_duration(&self) -> Result<Option<Duration>> {
        let set = self.job.generator_flags_set();
        if !set.is_empty() {
            anyhow::bail!(
                "{} set the bundled generator's workload and cannot apply to another process (--pid or -- CMD does its \
                 own I/O): drop {}, or trace the generator without --pid / -- CMD",
                set.join(", "),
                if set.len() == 1 { "it" } else { "them" }
            );
        }
        match (self.duration, self.job.common.runtime) {
            (Some(_), Some(_)) => anyhow::bail!("--duration and --runtime say the same thing here: give one"),
            (Some(d), _) | (_, Some(d)) if d.is_zero() => anyhow::bail!(
                "--duration 0 would trace nothing: give a length (--duration 10s), or leave it out to trace until the \
                 process exits or Ctrl-C"
            ),
            (d, r) => Ok(d.or(r)),
        }
    }
}

/// One point of the job's shape: what `JobCommon::to_job` completes into a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub engine: EngineKind,
    pub qd: u32,
    pub rw: Rw,
    pub bs: u64,
    pub jobs: u32,
    pub direct: bool,
    pub batch_submit: u32,
    pub batch_complete: u32,
    pub file: Option<PathBuf>,
    pub device: Option<PathBuf>,
}

impl JobShape {
    pub fn at(&self, engine: EngineKind, qd: u32) -> Shape {
        Shape {
            engine,
            qd,
            rw: self.rw,
            bs: self.bs,
            jobs: self.jobs,
            direct: self.direct,
            batch_submit: self.batch_submit,
            batch_complete: self.batch_complete,
            file: self.file.clone(),
            device: self.device.clone(),
        }
    }
}

impl JobCommon {
    pub fn to_job(&self, shape: &Shape) -> Result<Job> {
        let Shape { engine, qd, .. } = *shape;
        let bs = u32::try_from(shape.bs).map_err(|_| anyhow::anyhow!("--bs {} is too large (at most 4g)", shape.bs))?;
        let target = match (&shape.file, &shape.device) {
            (_, Some(d)) => Target::Device(d.clone()),
            (Some(f), None) => Target::File(f.clone()),
            (None, None) => Target::File(std::env::current_dir()?.join(job::DEFAULT_SCRATCH_NAME)),
        };
        let size = match (&target, self.size, &shape.file, &shape.device) {
            (Target::File(_), None, None, None) => Some(job::DEFAULT_SCRATCH_SIZE),
            (_, s, _, _) => s,
        };
        let stop = match (self.runtime, self.ios) {
            (_, Some(n)) => Stop::Ios(n),
            (Some(d), None) => Stop::Runtime(d),
            (None, None) => Stop::Runtime(Duration::from_secs(10)),
        };
        let job = Job {
            engine,
            rw: shape.rw,
            mix_read_pct: self.mix,
            bs,
            qd,
            size,
            stop,
            target,
            direct: shape.direct,
            allow_write: self.allow_write,
            jobs: shape.jobs,
            cpus: self.cpus.as_deref().map(job::parse_cpus).transpose().map_err(|e| anyhow::anyhow!("--cpus: {e}"))?,
            seed: self.seed,
            sqpoll: self.sqpoll,
            iopoll: self.iopoll,
            fixed_bufs: self.fixed_bufs,
            force_async: self.force_async,
            hipri: self.hipri,
            fsync: self.fsync,
            fdatasync: self.fdatasync,
            sync: self.sync,
            batch_submit: shape.batch_submit,
            batch_complete: shape.batch_complete,
            verify: self.verify,
            interval: self.interval,
            percentiles: self.percentiles.0.clone(),
        };
        job::check_interval(self.interval)?;
        job.validate()?;
        Ok(job)
    }
}

impl TopArgs {
    /// The agent `iopath top` runs, or why these flags do not make one.
    pub fn to_loop(&self) -> Result<Loop> {
        crate::job::check_interval(self.interval)?;
        if self.once && self.count > 0 {
            bail!("--once is one refresh; --count N is N refreshes with --batch: give one of them");
        }
        let show = if self.once {
            Show::Text { count: 1, rows: self.rows }
        } else if self.batch {
            Show::Text { count: self.count, rows: self.rows }
        } else {
            use std::io::IsTerminal;
            if !std::io::stdout().is_terminal() {
                bail!("iopath top's live view needs a terminal: use --batch (or --once) for text, or 'iopath serve' for metrics alone");
            }
            if self.count > 0 {
                bail!("--count applies to --batch: add --batch, or drop --count");
            }
            Show::Tui
        };
        Ok(Loop {
            interval: self.interval,
            by: self.by,
            sort: self.sort,
            show,
            exposition: None,
            cgroups: self.cgroups,
            pods_root: self.pods_root.clone(),
            sync_syscalls: self.sync_syscalls,
            empty_probes: false,
            phases: self.phases || self.sync_syscalls,
            phases_every: None,
        })
    }
}

impl ServeArgs {
    /// The agent `iopath serve` runs, or why these flags do not make one.
    pub fn to_loop(&self) -> Result<Loop> {
        crate::job::check_interval(self.interval)?;
        if let Some(every) = self.phases_every {
            if self.phases || self.sync_syscalls {
                bail!("--phases-every duty-cycles the full set beside the one hook; --phases (or --sync-syscalls) attaches it all the time: give one of them");
            }
            if self.phases_for.is_zero() || self.phases_for >= every {
                bail!(
                "--phases-for {:?} must be shorter than --phases-every {every:?} (and more than 0): the full set is attached for --phases-for of every --phases-every",
                self.phases_for
            );
            }
        }
        Ok(Loop {
            interval: self.interval,
            by: crate::top::table::GroupBy::Process,
            sort: crate::top::table::SortBy::Iops,
            show: Show::Nothing,
            exposition: None,
            cgroups: self.cgroups,
            pods_root: self.pods_root.clone(),
            sync_syscalls: self.sync_syscalls,
            empty_probes: self.empty_probes,
            phases: self.phases || self.sync_syscalls,
            phases_every: self.phases_every.map(|e| (e, self.phases_for)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(args: &[&str]) -> Result<Job> {
        let mut argv = vec!["iopath", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.cmd {
            Command::Run(r) => r.job.to_job(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_are_a_scratch_file_randread() {
        let j = job(&[]).unwrap();
        assert_eq!((j.engine, j.rw, j.bs, j.qd, j.direct), (EngineKind::Uring, Rw::Randread, 4096, 1, true));
        assert_eq!(j.size, Some(1 << 30));
        assert!(j.target.path().ends_with(job::DEFAULT_SCRATCH_NAME));
        assert_eq!(j.stop, Stop::Runtime(Duration::from_secs(10)));
    }

    #[test]
    fn flags_reach_the_job() {
        let j = job(&[
            "--engine", "aio", "--rw", "randrw", "--mix", "70", "--bs", "16k", "--qd", "64", "--ios", "1000",
            "--direct", "false", "--cpus", "0-1", "--file", "/tmp/x",
        ])
        .unwrap();
        assert_eq!((j.engine, j.rw, j.mix_read_pct, j.bs, j.qd), (EngineKind::Aio, Rw::Randrw, 70, 16384, 64));
        assert_eq!(j.stop, Stop::Ios(1000));
        assert!(!j.direct);
        assert_eq!(j.cpus, Some(vec![0, 1]));
        assert_eq!(j.size, None, "an explicit file keeps its own size");
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let err = |a: &[&str]| format!("{:#}", job(a).unwrap_err());
        assert!(err(&["--engine", "spdk"]).contains("invalid value 'spdk'"));
        assert!(err(&["--qd", "0"]).contains("--qd must be at least 1"));
        assert!(err(&["--bs", "1000"]).contains("not a multiple of 512"));
        assert!(err(&["--size", "2k"]).contains("smaller than --bs"));
        assert!(err(&["--runtime", "10x"]).contains("unknown duration unit"));
        assert!(err(&["--size", "lots"]).contains("not a size"));
        assert!(err(&["--engine", "psync", "--qd", "8"]).contains("one I/O at a time"));
        assert!(err(&["--engine", "aio", "--sqpoll"]).contains("io_uring options"));
        assert!(err(&["--device", "/dev/vda", "--rw", "randwrite"]).contains("--allow-write"));
        assert!(err(&["--runtime", "1s", "--ios", "5"]).contains("cannot be used with"));
        assert!(err(&["--iopoll", "--direct", "false"]).contains("needs O_DIRECT"));
    }
}
