//! Plain data shared by the probe session, aggregation and reports: what the BPF side measured,
//! as raw as it came out of the maps (so a run can be re-aggregated later), and no I/O.

use serde::{Deserialize, Serialize};

use crate::hist::{bucket_range_with, mean_of, quantile_of, LatSummary};

/// Mirrors `bpf/phases.h`; the skeleton-type assertions in `probe` keep them in step.
pub const HIST_SUB_BITS: u32 = 5;
pub const HIST_SLOTS: usize = (40 - HIST_SUB_BITS as usize + 2) << HIST_SUB_BITS;
pub const NR_PHASES: usize = 57;
pub const NR_COUNTERS: usize = 70;
/// Why a writeback bio was written (`enum wb_why`): the kernel's 8 reasons, a sync call, other.
pub const NR_WB_WHY: usize = 10;
/// `NR_ROUTE_KINDS` and `NR_SYSCALL_SLOTS` of bpf/phases.h.
pub const NR_ROUTE_KINDS: usize = 12;
pub const NR_SYSCALL_SLOTS: usize = 512;
/// `NR_SLOTS` of bpf/phases.h: the per-I/O tables' slots.
pub const NR_SLOTS: usize = 1 << 16;

/// `enum phase` of bpf/phases.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Submission = 0,
    Block = 1,
    Device = 2,
    Posted = 3,
    Reap = 4,
    Completion = 5,
    Total = 6,
    Driver = 7,
    Nvme = 8,
    NvmeSubmit = 9,
    NvmeEnd = 10,
    Pickup = 11,
    Iowq = 12,
    Throttled = 13,
    StackDown = 14,
    StackUp = 15,
    AppSubmit = 16,
    TracerReap = 17,
    PcRead = 18,
    PcReadCpu = 19,
    PcReadWait = 20,
    PcReadRunq = 21,
    PcWrite = 22,
    PcWriteCpu = 23,
    PcWriteWait = 24,
    PcWriteRunq = 25,
    PcWriteData = 26,
    PcWriteJournal = 27,
    PcWriteFlush = 28,
    PcWriteThrottled = 29,
    Sync = 30,
    SyncCpu = 31,
    SyncWait = 32,
    SyncRunq = 33,
    SyncData = 34,
    SyncJournal = 35,
    SyncFlush = 36,
    SyncThrottled = 37,
    SyncJournalFlush = 38,
    PcCopy = 39,
    PcCopyCpu = 40,
    PcCopyWait = 41,
    PcCopyRunq = 42,
    PcCopyData = 43,
    PcCopyJournal = 44,
    PcCopyFlush = 45,
    PcCopyThrottled = 46,
    WbBlock = 47,
    WbDevice = 48,
    Upc = 49,
    UpcKernel = 50,
    UpcReap = 51,
    UpcAsync = 52,
    /// io_uring: the bound on when the application took the CQE from its ring (its width).
    Ring = 53,
    /// SQPOLL: the bound on when the application wrote the SQE to its ring (its width).
    SqRing = 54,
    /// A file system's end-io work (btrfs: read checksums): the request completed -> its worker
    /// started; the worker's run (both inside completion).
    FsEndioWait = 55,
    FsEndio = 56,
}

/// `enum route_kind` of bpf/phases.h: the routes map counts closed I/Os per kind and direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    Uring = 0,
    Sqpoll = 1,
    Iowq = 2,
    Aio = 3,
    Sync = 4,
    Throttled = 5,
    Split = 6,
    Hipri = 7,
    Stacked = 8,
    /// Buffered reads and writes of files: shown in the page-cache table, not the routes.
    PageCache = 9,
    /// io_uring reads and writes of buffered files.
    UringCached = 10,
    /// A bio-based device's (zram, brd, pmem): no request, the device phase is the driver's work.
    BioBased = 11,
}

impl RouteKind {
    pub const ALL: [RouteKind; NR_ROUTE_KINDS] = [
        RouteKind::Uring,
        RouteKind::Sqpoll,
        RouteKind::Iowq,
        RouteKind::Aio,
        RouteKind::Sync,
        RouteKind::Throttled,
        RouteKind::Split,
        RouteKind::Hipri,
        RouteKind::Stacked,
        RouteKind::PageCache,
        RouteKind::UringCached,
        RouteKind::BioBased,
    ];

    /// The report's name for it.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::Uring => "io_uring (submitting thread)",
            RouteKind::Sqpoll => "io_uring SQPOLL (SQ thread)",
            RouteKind::Iowq => "io_uring io-wq (worker)",
            RouteKind::Aio => "libaio",
            RouteKind::Sync => "sync syscall",
            RouteKind::Throttled => "throttled (blk-throttle)",
            RouteKind::Split => "split (several requests)",
            RouteKind::Hipri => "RWF_HIPRI (polled sync)",
            RouteKind::Stacked => "stacked device (dm, md)",
            RouteKind::PageCache => "page cache (buffered)",
            RouteKind::UringCached => "io_uring on a buffered file (page cache)",
            RouteKind::BioBased => "bio-based device (no request: device = the driver's own work)",
        }
    }
}

/// `HW_QUEUE_*` of bpf/phases.h: hw_queues keys are `type * HW_QUEUE_IDS + queue_num`.
pub const HW_QUEUE_TYPES: u32 = 3;
pub const HW_QUEUE_IDS: u32 = 256;

/// `enum counter` of bpf/phases.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    BiosUntagged = 0,
    IssueUntracked,
    ReapUnmatched,
    ReapOverflow,
    InflightFull,
    DoneFull,
    NvmeSetup,
    Irq,
    SoftirqBlock,
    SoftirqBlockNs,
    CtxVoluntary,
    CtxInvoluntary,
    IommuMap,
    IommuUnmap,
    DmaMap,
    DmaUnmap,
    Preempted,
    PreemptedNs,
    Bytes,
    RbDrops,
    ExpiredInflight,
    ExpiredDone,
    RunqWait,
    RunqWaitNs,
    Reads,
    Writes,
    NoBlockIo,
    Disordered,
    NoReap,
    Unlinked,
    PcReadsWaited,
    PcReadsQueued,
    PcBios,
    PcBioBytes,
    PcMerges,
    PcRaSync,
    PcRaAsync,
    PcBytesRead,
    PcBytesWritten,
    PcSplits,
    Fsyncs,
    Fdatasyncs,
    SyncWrites,
    SyncBios,
    SyncBioBytes,
    SyncOwnFlushes,
    SyncJournalWaits,
    Jbd2Commits,
    Jbd2CommitNs,
    FlushRqs,
    FuaRqs,
    DirtyPauses,
    DirSyncs,
    PcBytesCopied,
    WbDirtied,
    WbBytes,
    WbFilesFull,
    PccReads,
    PccPages,
    PccAdded,
    UpcInline,
    UpcBios,
    UpcBioBytes,
    UpcBytes,
    TopFull,
    UserUnreadable,
    UringEnters,
    UringSqes,
    DisorderedSpans,
    /// Lean trace: requests completed while block_rq_issue was detached, on a queue whose
    /// io_start_time_ns was not trusted (their device phase unknown).
    IssueUnstamped,
}

/// One in-kernel histogram (`struct hist`), summed over CPUs. Slots are kept sparse.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BpfHist {
    /// (slot, count) for non-empty slots, ascending.
    pub slots: Vec<(u32, u64)>,
    pub count: u64,
    pub sum: u64,
    pub max: u64,
}

impl BpfHist {
    /// Adds one CPU's `struct hist` as the kernel laid it out: HIST_SLOTS u64, sum, max.
    pub fn add_raw(&mut self, bytes: &[u8]) {
        let word =
            |i: usize| bytes.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])));
        let mut dense: Vec<u64> = vec![0; HIST_SLOTS];
        for &(s, c) in &self.slots {
            dense[s as usize] += c;
        }
        for (i, d) in dense.iter_mut().enumerate() {
            *d += word(i);
        }
        self.slots = dense.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| (i as u32, c)).collect();
        self.count = self.slots.iter().map(|&(_, c)| c).sum();
        self.sum += word(HIST_SLOTS);
        self.max = self.max.max(word(HIST_SLOTS + 1));
    }

    /// Adds another histogram's counts (a traced command's buffered and direct I/Os are one
    /// population of calls to it).
    pub fn merge(&mut self, o: &BpfHist) {
        for &(slot, c) in &o.slots {
            match self.slots.binary_search_by_key(&slot, |&(s, _)| s) {
                Ok(i) => self.slots[i].1 += c,
                Err(i) => self.slots.insert(i, (slot, c)),
            }
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }

    pub fn record(&mut self, v: u64) {
        // Used by tests to build histograms the way the kernel does.
        let slot = bpf_slot(v) as u32;
        match self.slots.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => self.slots[i].1 += 1,
            Err(i) => self.slots.insert(i, (slot, 1)),
        }
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    pub fn mean(&self) -> f64 {
        mean_of(self.sum as f64, self.count)
    }

    /// The value at rank ceil(q * n) (see `hist::quantile_of`); the minimum is the first
    /// non-empty slot's lower bound.
    pub fn quantile(&self, q: f64) -> u64 {
        let min = self.slots.first().map_or(0, |&(s, _)| bucket_range_with(s as usize, HIST_SUB_BITS).0);
        quantile_of(self.slots.iter().map(|&(s, c)| (s as usize, c)), HIST_SUB_BITS, q, min, self.max)
    }

    pub fn summary(&self) -> LatSummary {
        LatSummary {
            count: self.count,
            min: self.slots.first().map_or(0, |&(s, _)| bucket_range_with(s as usize, HIST_SUB_BITS).0),
            mean: self.mean().round() as u64,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max,
        }
    }
}

/// The slot the BPF side puts `v` in (bpf/hist.bpf.h), for tests and recorded data.
pub fn bpf_slot(v: u64) -> usize {
    let sub = 1u64 << HIST_SUB_BITS;
    if v < sub {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    if msb > 40 {
        return HIST_SLOTS - 1;
    }
    let s = ((v >> (msb - HIST_SUB_BITS)) & (sub - 1)) as usize;
    (((msb - HIST_SUB_BITS + 1) as usize) << HIST_SUB_BITS) + s
}

/// How one hook was attached on this kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeStatus {
    pub name: String,
    pub attached: bool,
    /// tp_btf, raw_tp or tracepoint.
    pub via: String,
    pub error: Option<String>,
    /// Runs the kernel skipped because another BPF program was running on that CPU.
    pub recursion_misses: u64,
    /// Times the program ran and the CPU time it took (with `--prog-stats`; 0 otherwise).
    pub run_cnt: u64,
    pub run_time_ns: u64,
    /// A hook of the flamegraphs' sampler (bpf/stacks.bpf.c): its `sched:sched_switch` says
    /// nothing of whether the trace's own switch hook ran (`measures`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampler: bool,
    #[serde(skip)]
    pub prog_fd: i32,
}

impl ProbeStatus {
    /// The trace's own hook `name` is attached (never the sampler's of the same tracepoint: with
    /// --offcpu under --lean or --raw-tp it alone would claim a switch split never measured).
    pub fn measures(&self, name: &str) -> bool {
        self.attached && !self.sampler && self.name == name
    }
}

/// A feature the kernel could not give this trace, and the kernel's reason (probe::hooks).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeatureOff {
    pub feature: String,
    pub why: String,
}

/// A file of this process's with no name (a TempFile's `into_scratch`), shared by the clones of
/// a trace; two are equal whatever they hold (it is no measurement).
#[derive(Clone, Debug)]
pub struct Scratch(pub std::sync::Arc<std::fs::File>);

impl PartialEq for Scratch {
    fn eq(&self, _: &Scratch) -> bool {
        true
    }
}

/// Everything the probes measured in one session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawTrace {
    /// Indexed by `Phase`.
    pub phases: Vec<BpfHist>,
    /// Indexed by `Counter`.
    pub counters: Vec<u64>,
    /// (hardware queue key: hctx type * HW_QUEUE_IDS + queue_num, requests issued on it).
    pub hw_queues: Vec<(u32, u64)>,
    pub probes: Vec<ProbeStatus>,
    /// Features off on this kernel (the rest of the trace ran without them).
    #[serde(default)]
    pub features_off: Vec<FeatureOff>,
    /// The build of the phases object loaded: "modern", or "compat" (bpf/compat.bpf.h).
    #[serde(default)]
    pub bpf_build: String,
    /// Tracked bios never seen completing (their link to the I/O still held at the end).
    pub stuck_inflight: u64,
    /// Completed I/Os never seen posted or reaped.
    pub stuck_done: u64,
    /// `--events`: records received from the ring buffer (None when off).
    pub events_received: Option<u64>,
    /// `--perfetto`: interrupts on the traced disks' vectors, in arrival order (not in raw.json:
    /// the timeline file holds them), and those beyond the memory cap.
    #[serde(skip)]
    pub irq_stamps: Vec<IrqStamp>,
    #[serde(default, skip_serializing_if = "crate::model::is_zero")]
    pub irq_stamps_dropped: u64,
    /// --events-out: what went wrong writing the file (a full disk), with how many records it
    /// kept; None when every record received was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_file_error: Option<String>,
    /// --perfetto without --events-out: the records, in a file with no name left.
    #[serde(skip)]
    pub events_scratch: Option<Scratch>,
    /// First traced submission to last traced reap, in ns (0 when nothing was reaped).
    #[serde(default)]
    pub active_ns: u64,
    /// Closed I/Os per route kind and direction: index `RouteKind * 2 + write`.
    #[serde(default)]
    pub routes: Vec<u64>,
    /// The traced threads' system calls: (x86_64 number, count), non-zero only.
    #[serde(default)]
    pub syscalls: Vec<(u32, u64)>,
    /// `--flamegraph` / `--offcpu`: the stacks as the kernel counted them (None when off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<RawStacks>,
    /// Files the traced processes dirtied, and their pages' writeback (`struct wb_file`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writeback: Vec<RawWbFile>,
    /// /proc/vmstat over the trace (dirty and writeback pages); None when not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<RawVmstat>,
    /// `--lean`: no syscall, scheduler or softirq hook was attached (what they count is unknown).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
    /// The trace over time: one entry per `--interval`, read from the maps at its edges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<RawSeries>,
    /// A lean trace: block_rq_issue or the request's io_start_time_ns, per disk, checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_stamps: Option<IssueStamps>,
}

/// A lean trace's issue stamp (probe::issue_stamps): where its device phase started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IssueStamps {
    /// Each disk the checks saw, with its last verdict.
    pub disks: Vec<IssueStampDisk>,
    /// Check windows run.
    pub windows: u64,
    /// How long the trace ran (ns) ...
    pub run_ns: u64,
    /// ... and how long block_rq_issue was attached in it (ns): check windows, and the whole
    /// run where a disk's stamp was not trusted.
    pub hooked_ns: u64,
    /// Requests completed while the hook was detached on a queue whose stamp was not trusted:
    /// their device phase is unknown (the I/O is counted as not linked).
    pub unstamped: u64,
}

/// One disk's io_start_time_ns checked against block_rq_issue on the same requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IssueStampDisk {
    /// "major:minor".
    pub dev: String,
    /// Within max(1 us, 2%) of the hook on 99% of `n` requests: the device phase starts at it.
    pub trusted: bool,
    /// Requests compared in the last check window (the stamp and the hook's time of each).
    pub n: u64,
    /// The error's p99, as its power-of-two bucket's upper bound.
    pub err_p99_ns: u64,
    /// Mean of stamp - hooked time (trusted disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew_mean_ns: Option<i64>,
    /// Why the hook times it instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The phases read at every interval edge, in this order (`RawInterval::phases`).
pub const SERIES_PHASES: [Phase; 9] = [
    Phase::Submission,
    Phase::Block,
    Phase::Device,
    Phase::Completion,
    Phase::Total,
    Phase::PcRead,
    Phase::PcWrite,
    Phase::PcCopy,
    Phase::Upc,
];

/// The counters read at every interval edge, in this order (`RawInterval::counters`).
pub const SERIES_COUNTERS: [Counter; 10] = [
    Counter::Irq,
    Counter::CtxVoluntary,
    Counter::CtxInvoluntary,
    Counter::Reads,
    Counter::Writes,
    Counter::Bytes,
    Counter::PcBytesRead,
    Counter::PcBytesWritten,
    Counter::PcBytesCopied,
    Counter::UpcBytes,
];

/// The trace's time series as the maps had it: cumulative values differenced at each edge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawSeries {
    pub interval_ns: u64,
    /// Edges from the generator's start line (its time series has the same intervals), or from
    /// the moment the probes were enabled (a traced command or process).
    pub from_generator: bool,
    pub intervals: Vec<RawInterval>,
    /// What the sampler itself cost: its map reads, and the time they took (ns).
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub read_ns: u64,
}

/// What the probes counted in one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawInterval {
    /// Start, from the series' start, and length (the last one ends with the trace).
    pub t_ns: u64,
    pub dur_ns: u64,
    /// Per `SERIES_PHASES`: (I/Os whose phase ended in the interval, sum of their times).
    pub phases: Vec<(u64, u64)>,
    /// The application's calls (`Total` and the buffered families): their latency histogram's
    /// non-empty slots in the interval, for percentiles.
    pub calls: Vec<(u32, u64)>,
    /// Per `SERIES_COUNTERS`.
    pub counters: Vec<u64>,
    /// io_uring requests on buffered files: (reads, writes).
    pub cached: (u64, u64),
}

/// One file the traced processes dirtied (bpf/phases.h `struct wb_file`), its cgroup resolved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawWbFile {
    pub ino: u64,
    /// "major:minor" of its file system.
    pub dev: String,
    pub tgid: u32,
    pub comm: String,
    pub name: String,
    /// The dirtier's io (blkio) cgroup: its directory's inode (0: unknown) and its path under
    /// the hierarchy, when found.
    pub cgroup_id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    pub dirtied_pages: u64,
    /// Bytes of writeback bios, by `enum wb_why`.
    pub bytes: Vec<u64>,
    pub bios: u64,
    pub requests: u64,
    pub block_ns: u64,
    pub device_ns: u64,
}

/// /proc/vmstat read every 100 ms during the trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawVmstat {
    /// (nr_dirty, nr_writeback) pages, one pair per sample.
    pub samples: Vec<(u64, u64)>,
    /// nr_dirtied and nr_written: end minus start (machine-wide).
    pub dirtied: u64,
    pub written: u64,
    /// vm.dirty_background_* and vm.dirty_* as set (ratio % or bytes), for the reader.
    pub thresholds: String,
}

/// One distinct (thread, kernel stack, user stack) and its weight: samples on-CPU, ns off-CPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawStack {
    pub tgid: u32,
    pub pid: u32,
    pub comm: String,
    /// Return addresses, innermost first (as bpf_get_stackid stores them); empty when none.
    pub kernel: Vec<u64>,
    pub user: Vec<u64>,
    pub value: u64,
}

/// An executable file mapping of a traced process (/proc/PID/maps), kept so that user addresses
/// can be symbolized after the process is gone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecMapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    pub path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RawStacks {
    /// perf cpu-clock sampling rate.
    pub freq_hz: u64,
    pub oncpu: Vec<RawStack>,
    pub offcpu: Vec<RawStack>,
    /// Executable mappings per traced process.
    pub maps: Vec<(u32, Vec<ExecMapping>)>,
    /// Samples lost to full maps (stack or count maps).
    pub dropped: u64,
}

impl RawTrace {
    pub fn counter(&self, c: Counter) -> u64 {
        self.counters.get(c as usize).copied().unwrap_or(0)
    }
    /// (reads, writes) closed on a route kind.
    pub fn route(&self, k: RouteKind) -> (u64, u64) {
        let at = |i: usize| self.routes.get(i).copied().unwrap_or(0);
        (at(k as usize * 2), at(k as usize * 2 + 1))
    }
    pub fn phase(&self, p: Phase) -> BpfHist {
        self.phases.get(p as usize).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_histogram_error_is_within_two_percent() {
        let mut h = BpfHist::default();
        for i in 1..=10_000u64 {
            h.record(i * 997);
        }
        for (q, exact) in [(0.5, 5000.0 * 997.0), (0.9, 9000.0 * 997.0), (0.99, 9900.0 * 997.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.02, "q{q}: {got} vs {exact}");
        }
        // The mean comes from the exact sum, not from bucket midpoints.
        assert_eq!(h.summary().mean, (5000.5f64 * 997.0).round() as u64);
    }

    #[test]
    fn raw_struct_layout_round_trips() {
        let mut bytes = vec![0u8; (HIST_SLOTS + 2) * 8];
        let put = |b: &mut Vec<u8>, i: usize, v: u64| b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        put(&mut bytes, bpf_slot(1000), 3);
        put(&mut bytes, HIST_SLOTS, 3000);
        put(&mut bytes, HIST_SLOTS + 1, 1000);
        let mut h = BpfHist::default();
        h.add_raw(&bytes);
        h.add_raw(&bytes);
        assert_eq!((h.count, h.sum, h.max), (6, 6000, 1000));
        assert_eq!(h.slots, vec![(bpf_slot(1000) as u32, 6)]);
    }
}

/// One interrupt (`struct irq_stamp`, bpf/phases.h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqStamp {
    pub ts: u64,
    pub irq: u32,
    pub cpu: u32,
}

impl IrqStamp {
    pub fn parse(b: &[u8]) -> Option<IrqStamp> {
        Some(IrqStamp {
            ts: u64::from_ne_bytes(b.get(0..8)?.try_into().ok()?),
            irq: u32::from_ne_bytes(b.get(8..12)?.try_into().ok()?),
            cpu: u32::from_ne_bytes(b.get(12..16)?.try_into().ok()?),
        })
    }
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
