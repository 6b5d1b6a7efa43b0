//! What a session traces and how: the options every room of probe/ reads, set once from the
//! command's flags (trace.rs `TraceFlags::opts`, top's agent) and converted here, once, into the
//! options the hook plan decides by. Pure data: it imports nothing of the session.

/// Where a trace's event records go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventsOut {
    /// `--events-out FILE`.
    File(std::path::PathBuf),
    /// Beside this file (`--perfetto`'s), nameless, read back after the trace.
    Scratch(std::path::PathBuf),
}

impl EventsOut {
    pub fn path(&self) -> &std::path::Path {
        match self {
            EventsOut::File(p) | EventsOut::Scratch(p) => p,
        }
    }
}

/// What to trace.
#[derive(Clone, Debug, Default)]
pub struct TraceOpts {
    /// Process to trace (0 = all).
    pub tgid: u32,
    /// iopath's own threads inside the traced process (their context switches do not count).
    pub exclude_tids: Vec<u32>,
    /// IRQ numbers of the target device's vectors.
    pub irqs: Vec<u32>,
    /// raw_tp instead of tp_btf for the tracepoint programs.
    pub force_raw_tp: bool,
    /// Have the kernel time every program run (BPF_ENABLE_STATS): what each probe costs.
    pub prog_stats: bool,
    /// Trace these processes and every process they fork (instead of `tgid` alone).
    pub tree: Vec<u32>,
    /// One record per reaped I/O through a ring buffer (drained every 20 ms)...
    pub events: bool,
    /// ...kept in this file (`iopath.events/3`) when given.
    pub events_out: Option<EventsOut>,
    /// Stacks for flamegraphs (None: no sampling).
    pub stacks: Option<StackOpts>,
    /// The traced process is the bundled generator, which stamps each SQE's user_data and each
    /// iocb's aio_data with the time it queued the I/O: its own time before the kernel and
    /// SQPOLL's pickup are then measured.
    pub app_stamp: bool,
    /// The generator's slots across workers (jobs x qd) in the slot clock it shares with the
    /// probes (loadgen::slot_clock: io_uring's posting times under SQPOLL or --lean, lean aio's
    /// io_submit times; 0: none).
    pub clock_slots: u32,
    /// How to time NVMe's doorbell.
    pub doorbell: Doorbell,
    /// Hooks whose name contains one of these are not attached (to measure a family's cost).
    pub skip_hooks: Vec<String>,
    /// Every program's body empty (`--empty-probes`): the hooks' cost floor, no data.
    pub empty_probes: bool,
    /// `--lean`: the hooks the four phases of the generator's direct I/O need and no more.
    pub lean: Lean,
    /// `--pagecache`: split buffered calls (the syscall hooks) or count the page cache.
    pub pagecache: PageCacheMode,
    /// The time series: its interval and where its time starts (None: not sampled).
    pub series: Option<(std::time::Duration, super::series::Start)>,
    /// `iopath top` / `serve`: every closed I/O also counted per (process, disk, route,
    /// direction) in the `top` map.
    pub top: bool,
    /// top / serve `--sync-syscalls`: the syscall hooks time sync and aio submission (every
    /// system call of every process then pays for them).
    pub sync_syscalls: bool,
    /// With `events`: every interrupt on `irqs` as a time stamp too (a timeline: --perfetto).
    pub irq_stamps: bool,
    /// top / serve's one-hook tier (probe::stamps) instead of the full set.
    pub one_hook: bool,
    /// A lean trace keeps block_rq_issue attached throughout (`--issue-hook`) instead of
    /// trusting a checked io_start_time_ns (probe::issue_stamps).
    pub issue_hook: bool,
    /// The I/O may be on btrfs (the generator's target is, or a btrfs is mounted for a traced
    /// command): its end-io work's sub-phases are hooked.
    pub fs_endio: bool,
}

impl TraceOpts {
    /// Whether the lean trace may take its device phase's start from the request's stamp.
    pub fn issue_stamps(&self) -> bool {
        self.lean != Lean::Off && !self.top && !self.issue_hook && !self.empty_probes
    }
}

impl TraceOpts {
    /// What the hook plan needs of these options.
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            raw_tp: self.force_raw_tp,
            lean: self.lean,
            pagecache: self.pagecache,
            doorbell: self.doorbell,
            tree: !self.tree.is_empty(),
            skip: self.skip_hooks.clone(),
            force_compat: force_compat(),
            top: self.top,
            sync_syscalls: self.sync_syscalls,
            one_hook: self.one_hook,
            stacks: self.stacks.clone(),
            fs_endio: self.fs_endio,
        }
    }
}

/// What to sample for flamegraphs (bpf/stacks.bpf.c, probe::sampler): the hook table's
/// on-CPU and off-CPU rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackOpts {
    pub oncpu: bool,
    pub offcpu: bool,
    /// Every task on every CPU, not only the traced processes.
    pub all_cpus: bool,
    /// cpu-clock samples per second per CPU.
    pub freq_hz: u64,
}

impl Default for StackOpts {
    fn default() -> Self {
        // 997 Hz, not 1000: no lockstep with the kernel's 1000 Hz and 100 Hz timers; enough for
        // a few seconds' profile.
        Self { oncpu: true, offcpu: false, all_cpus: false, freq_hz: 997 }
    }
}

/// How to time NVMe's doorbell (`--doorbell`): fexit first, falling back to kprobes (auto); or
/// the kprobe pair forced (the VM rig exercises it where fexit would attach); or not at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Doorbell {
    #[default]
    Auto,
    Kprobe,
    Off,
}

/// How the page cache is followed (`--pagecache`): each buffered call split into on CPU, waited
/// and run queue through the syscall hooks (split), or counted per CPU from filemap's own
/// tracepoints, one program per read and no syscall hook (count: ~0.4 us of BPF less per cached
/// read, scripts/bench-overhead.sh cached; no call is timed and no syscall route followed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PageCacheMode {
    #[default]
    Split,
    Count,
}

/// `--lean`: the hooks the four phases of the bundled generator's direct I/O need and no more
/// (docs/performance.md). Neither attaches the scheduler or softirq hooks (hooks::plan).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lean {
    #[default]
    Off,
    /// No syscall hook either: a request starts when io_uring takes its SQE and ends when its
    /// completion is posted; the generator times its reap (clock_slots must be set).
    Uring,
    /// aio has no tracepoint: io_getevents' exit reaps; each request is claimed at its first bio,
    /// from the kernel's aio_kiocb, and starts at the generator's io_submit time (slot_clock).
    Aio,
}

/// The trace's options that decide which hooks it wants.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    pub raw_tp: bool,
    pub lean: Lean,
    pub pagecache: PageCacheMode,
    pub doorbell: Doorbell,
    /// A process tree is traced (its forks followed).
    pub tree: bool,
    /// Hooks whose name contains one of these are left out (--skip-hooks).
    pub skip: Vec<String>,
    /// Load the compat build even where the modern one works (IOPATH_BPF_BUILD=compat).
    pub force_compat: bool,
    /// `iopath top` / `serve`: always on, every process of the host.
    pub top: bool,
    /// ... with the syscall hooks (`--sync-syscalls`): sync and aio submission timed, at a cost
    /// on every system call of every process.
    pub sync_syscalls: bool,
    /// top and serve's one-hook tier (their default; `--phases` attaches the full set).
    pub one_hook: bool,
    /// Stacks for flamegraphs (--flamegraph, --offcpu): the sampler's rows are wanted.
    pub stacks: Option<StackOpts>,
    /// The trace's I/O may be on btrfs: its end-io work's sub-phases (the workqueue hooks fire
    /// for every work item on the machine, so they attach only then).
    pub fs_endio: bool,
}

/// IOPATH_BPF_BUILD=compat: load the compat build on a kernel that takes the modern one (how the
/// tests run it on the build host).
pub fn force_compat() -> bool {
    std::env::var("IOPATH_BPF_BUILD").is_ok_and(|v| v == "compat")
}
