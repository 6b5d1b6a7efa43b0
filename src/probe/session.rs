//! A tracing session: open -> set rodata -> load -> attach every hook this kernel has -> enable
//! -> run the workload -> disable -> read the maps -> detach. The workload runs inside `trace`'s
//! closure, so links cannot outlive it and nothing stays attached after an error.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};

use super::collect::Collectors;
use super::counts_skel::CountsSkelBuilder;
use super::hooks::{Feature, Obj};
use super::load::{attach_per_plan, load_per_plan, Attached, MAX_LOADS};
use super::phases_skel::PhasesSkelBuilder;
use super::tracefs::Tracefs;
use crate::model::{BpfHist, ProbeStatus, RawTrace, NR_COUNTERS, NR_PHASES};

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
    pub stacks: Option<super::sampler::StackOpts>,
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
}

impl TraceOpts {
    /// Whether the lean trace may take its device phase's start from the request's stamp.
    pub fn issue_stamps(&self) -> bool {
        self.lean != Lean::Off && !self.top && !self.issue_hook && !self.empty_probes
    }
}

/// The maps a live reader (`iopath top`) reads while the workload runs, by fd.
#[derive(Clone, Debug)]
pub struct LiveMaps {
    pub top: i32,
    /// The one-hook tier's row slots (a per-CPU array of `struct stamps_row`, `top` its
    /// spill-over hash); -1 with the full set.
    pub stamp_rows: i32,
    pub phase_counters: i32,
    pub count_counters: i32,
    /// The one-hook tier's counters (`enum stamps_counter`); -1 with the full set.
    pub stamps_counters: i32,
    /// Every hook of the session: its name, whether it attached, and how (tp_btf, raw_tp ...).
    pub hooks: Vec<(String, bool, String)>,
    /// The attached hooks' programs (hook, program fd): their run counts and times, live (with
    /// `prog_stats`).
    pub progs: Vec<(String, i32)>,
    /// The per-I/O tables (mmapable arrays), for expiry (probe::expire).
    pub ios: i32,
    pub links: i32,
    /// Their held-index hashes: the compat build's claims (bpf/compat.bpf.h), freed with a slot.
    pub ios_held: i32,
    pub links_held: i32,
}

/// The slot_clock map, mapped into this process for the generator (see loadgen::slot_clock);
/// unmapped on drop, after the clock is cleared.
struct SlotClockMap {
    ptr: *mut libc::c_void,
    len: usize,
}

impl SlotClockMap {
    fn map(fd: i32, slots: u32) -> Result<SlotClockMap> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (slots as usize * 8).div_ceil(page) * page;
        // SAFETY: a shared read-write mapping of a BPF_F_MMAPABLE array map's values.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(anyhow!("mapping the slot_clock map: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `slots` u64 live at ptr until Drop, which clears the clock first.
        unsafe { crate::loadgen::slot_clock::install(ptr.cast(), slots as usize) };
        Ok(SlotClockMap { ptr, len })
    }
}

impl Drop for SlotClockMap {
    fn drop(&mut self) {
        crate::loadgen::slot_clock::clear();
        // SAFETY: unmapping what map() mapped; nothing reads it after the clear above.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Ring buffer for `--events`: 16 MiB holds ~260k records, over a second at this machine's
/// fastest rate, against a 20 ms drain.
const EVENTS_RING_BYTES: u32 = 16 << 20;

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

/// Opens the phases object in `store` and sets everything but autoload: the rodata (the options,
/// the kernel functions that tell who owns a bio) and map sizes.
pub(crate) fn open_phases<'obj>(
    store: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    opts: &TraceOpts,
    ksyms: &std::collections::HashMap<String, u64>,
    plan: &super::hooks::Plan,
) -> Result<super::phases_skel::OpenPhasesSkel<'obj>> {
    use super::hooks::{Flavour, OWNER_SYMBOLS, STACK_SYMBOLS};
    super::flavour::set(plan.flavour);
    let mut p_open = PhasesSkelBuilder::default().open(store).context("opening the phases BPF object")?;
    let addr = |syms: &[super::hooks::Symbol], role: &str| super::hooks::symbol_addr(syms, role, ksyms);
    {
        let ro = p_open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("phases: no .rodata"))?;
        ro.targ_tgid = opts.tgid;
        ro.targ_events = opts.events;
        ro.targ_top = opts.top;
        ro.targ_claim_at_bio = opts.top && !opts.sync_syscalls;
        // top / serve report no syscall counts: other calls skip the hook's work (scripts/
        // bench-serve-overhead.sh, the "syscalls" point).
        ro.targ_syscalls = !opts.top;
        ro.targ_tree = !opts.tree.is_empty();
        ro.targ_app_stamp = opts.app_stamp;
        ro.targ_empty = opts.empty_probes;
        ro.targ_lean = opts.lean == Lean::Uring;
        ro.targ_aio_at_bio = opts.lean == Lean::Aio;
        // The NVMe split times setup_cmd -> issue at block_rq_issue: where it is on, the hook stays
        // (the rig's 7.3 guest lost its driver phase without it).
        ro.targ_issue_stamps = opts.issue_stamps() && !plan.is_on(super::hooks::Feature::NvmeSplit);
        ro.targ_iomap_end_io = addr(OWNER_SYMBOLS, "iomap_end_io");
        ro.targ_blkdev_end_io = addr(OWNER_SYMBOLS, "blkdev_end_io");
        ro.targ_blkdev_end_io_async = addr(OWNER_SYMBOLS, "blkdev_end_io_async");
        ro.targ_bio_wait_end_io = addr(OWNER_SYMBOLS, "bio_wait_end_io");
        ro.targ_blkdev_simple_end_io = addr(OWNER_SYMBOLS, "blkdev_simple_end_io");
        ro.targ_chain_end_io = addr(OWNER_SYMBOLS, "chain_end_io");
        ro.targ_aio_complete = addr(OWNER_SYMBOLS, "aio_complete");
        ro.targ_dm_end_io = addr(STACK_SYMBOLS, "dm_end_io");
        ro.targ_crypt_end_io = addr(STACK_SYMBOLS, "crypt_end_io");
        ro.targ_raid1_read_end_io = addr(STACK_SYMBOLS, "raid1_read_end_io");
        ro.targ_raid1_write_end_io = addr(STACK_SYMBOLS, "raid1_write_end_io");
        ro.targ_md_clone_end_io = addr(STACK_SYMBOLS, "md_clone_end_io");
        ro.targ_bio_queue_q = plan.bio_queue_q;
    }
    // Each build leaves the other's maps empty: task storage does not exist before 5.11, and
    // the compat build's tables would cost the modern one ~20 MiB for nothing.
    if plan.flavour == Flavour::Compat {
        p_open.maps.task_ctxs.set_autocreate(false).context("leaving task storage out")?;
    } else {
        for m in [&mut p_open.maps.task_ctx_tids, &mut p_open.maps.ios_held, &mut p_open.maps.links_held] {
            m.set_max_entries(1).context("sizing the compat build's maps")?;
        }
    }
    if opts.events {
        p_open.maps.events.set_max_entries(EVENTS_RING_BYTES).context("sizing the events ring buffer")?;
    }
    if opts.clock_slots > 0 {
        p_open.maps.slot_clock.set_max_entries(opts.clock_slots).context("sizing the slot_clock map")?;
    }
    Ok(p_open)
}

/// Opens the counts object (interrupts, softirqs, IOMMU and DMA maps) and sets its rodata.
pub(crate) fn open_counts<'obj>(
    store: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    opts: &TraceOpts,
    _plan: &super::hooks::Plan,
) -> Result<super::counts_skel::OpenCountsSkel<'obj>> {
    let mut c_open = CountsSkelBuilder::default().open(store).context("opening the counts BPF object")?;
    if opts.irq_stamps && opts.events {
        c_open.maps.irq_stamps.set_max_entries(EVENTS_RING_BYTES / 4).context("sizing the IRQ stamps ring buffer")?;
    }
    if let Some(ro) = c_open.maps.rodata_data.as_deref_mut() {
        ro.targ_empty = opts.empty_probes;
        ro.targ_irq_stamps = opts.irq_stamps && opts.events;
    }
    Ok(c_open)
}

impl TraceOpts {
    /// What the hook plan needs of these options.
    pub fn hook_options(&self) -> super::hooks::Options {
        super::hooks::Options {
            raw_tp: self.force_raw_tp,
            lean: self.lean,
            pagecache: self.pagecache,
            doorbell: self.doorbell,
            tree: !self.tree.is_empty(),
            skip: self.skip_hooks.clone(),
            force_compat: super::hooks::force_compat(),
            top: self.top,
            sync_syscalls: self.sync_syscalls,
            one_hook: self.one_hook,
        }
    }
}

/// Attaches, runs `workload`, and returns its result with what the probes saw.
pub fn trace<R>(opts: &TraceOpts, workload: impl FnOnce() -> Result<R>) -> Result<(R, RawTrace)> {
    trace_live(opts, |_| workload())
}

/// This kernel's plan for these options, or why it cannot trace at all. tracefs stays mounted
/// while the returned guard lives.
pub(crate) fn plan_for(opts: &TraceOpts) -> Result<(Tracefs, super::hooks::Plan)> {
    let tfs = Tracefs::ensure()?;
    let facts = super::facts::KernelFacts::gather_with(Some(&tfs), true);
    let plan = super::hooks::plan(&facts, &opts.hook_options());
    if let Some(why) = plan.fatal() {
        bail!("{why}. Run 'iopath doctor' to see what this kernel supports");
    }
    if opts.pagecache == PageCacheMode::Count && !plan.is_on(Feature::PageCacheCount) {
        bail!(
            "--pagecache count needs filemap:mm_filemap_get_pages and mm_filemap_add_to_page_cache \
             through BTF (tp_btf; 6.2+ has them): use --pagecache split on this kernel ({})",
            plan.state(Feature::PageCacheCount).why.clone().unwrap_or_default()
        );
    }
    Ok((tfs, plan))
}

/// What the probes must know before they run: iopath's own threads, the traced process tree,
/// the target disk's interrupt vectors.
fn seed_maps(
    phases: &super::phases_skel::PhasesSkel<'_>,
    counts: &super::counts_skel::CountsSkel<'_>,
    opts: &TraceOpts,
) -> Result<()> {
    for tid in &opts.exclude_tids {
        phases
            .maps
            .excluded_tids
            .update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("excluding iopath's threads")?;
    }
    // Never iopath itself: `--pid 1`'s tree holds every process, iopath's own among them (its
    // stderr writes were the whole report).
    for tgid in opts.tree.iter().filter(|&&t| t != std::process::id()) {
        phases
            .maps
            .traced_tgids
            .update(&tgid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("seeding the traced processes")?;
    }
    for irq in &opts.irqs {
        counts.maps.irq_filter.update(&irq.to_ne_bytes(), &[1u8], MapFlags::ANY).context("filling the IRQ filter")?;
    }
    Ok(())
}

/// Each attached program's run count and time (with --prog-stats) and recursion misses.
fn fill_prog_stats(probes: &mut [ProbeStatus]) {
    for p in probes.iter_mut().filter(|p| p.attached) {
        if let Some(info) = prog_info(p.prog_fd) {
            p.recursion_misses = info.recursion_misses;
            p.run_cnt = info.run_cnt;
            p.run_time_ns = info.run_time_ns;
        }
    }
}

/// The dirtiers' cgroups by path, while the directories exist.
fn name_cgroups(files: &mut [crate::model::RawWbFile]) {
    let roots = crate::sysconf::SysRoots::live();
    let mut paths = std::collections::HashMap::new();
    for f in files.iter_mut().filter(|f| f.cgroup_id != 0) {
        f.cgroup =
            paths.entry(f.cgroup_id).or_insert_with(|| crate::sysconf::cgroup_path_of_id(&roots, f.cgroup_id)).clone();
    }
}

/// `trace`, the workload given the maps it may read while it runs (`iopath top`).
pub fn trace_live<R>(opts: &TraceOpts, workload: impl FnOnce(LiveMaps) -> Result<R>) -> Result<(R, RawTrace)> {
    let (_tfs, mut plan) = plan_for(opts)?;
    let ksyms = super::kallsyms::lookup(super::hooks::SYMBOLS);
    let mut p_stores: [MaybeUninit<libbpf_rs::OpenObject>; MAX_LOADS] = std::array::from_fn(|_| MaybeUninit::uninit());
    let mut c_stores: [MaybeUninit<libbpf_rs::OpenObject>; MAX_LOADS] = std::array::from_fn(|_| MaybeUninit::uninit());
    let mut phases =
        load_per_plan(Obj::Phases, "phases", &mut plan, &mut p_stores, |s, plan| open_phases(s, opts, &ksyms, plan))?;
    let mut counts =
        load_per_plan(Obj::Counts, "counts", &mut plan, &mut c_stores, |s, plan| open_counts(s, opts, plan))?;
    seed_maps(&phases, &counts, opts)?;
    let Attached { mut links, mut probes } =
        attach_per_plan(&mut plan, &[(Obj::Phases, phases.object()), (Obj::Counts, counts.object())])?;
    let issue_checker = issue_checker(opts, &mut phases, &probes, &mut links);
    let features_off: Vec<crate::model::FeatureOff> = plan
        .off()
        .into_iter()
        .map(|(feature, why)| crate::model::FeatureOff { feature: feature.into(), why })
        .collect();

    // SAFETY: plain syscall wrapper; the returned fd keeps stats on until closed.
    let stats_fd = if opts.prog_stats {
        unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) }
    } else {
        -1
    };
    // The `enabled` flags, written through raw pointers so the ring buffer (which borrows the
    // maps) and the switch can coexist.
    let mut s_store = MaybeUninit::uninit();
    let mut sampler = match &opts.stacks {
        Some(so) => {
            let filter = super::sampler::Filter {
                tgid: opts.tgid,
                tree: !opts.tree.is_empty(),
                traced_tgids: phases.maps.traced_tgids.as_fd(),
                excluded_tids: phases.maps.excluded_tids.as_fd(),
            };
            Some(super::sampler::Sampler::load(&mut s_store, so, &filter)?)
        }
        None => None,
    };
    let traced_tgids = libbpf_rs::MapHandle::try_from(&phases.maps.traced_tgids)?;
    let enabled: [*mut u32; 3] = [
        phases.maps.bss_data.as_deref_mut().map_or(std::ptr::null_mut(), |b| &mut b.enabled as *mut u32),
        counts.maps.bss_data.as_deref_mut().map_or(std::ptr::null_mut(), |b| &mut b.enabled as *mut u32),
        sampler.as_mut().map_or(std::ptr::null_mut(), |s| s.enabled_ptr()),
    ];
    let set_enabled = |on: u32| {
        for p in enabled.iter().filter(|p| !p.is_null()) {
            // SAFETY: the pointers are into the mmaped .bss of skeletons that outlive this call.
            unsafe { std::ptr::write_volatile(*p, on) };
        }
    };
    let posted = match opts.clock_slots {
        0 => None,
        n => Some(SlotClockMap::map(phases.maps.slot_clock.as_fd().as_raw_fd(), n)?),
    };
    let collectors = Collectors {
        opts,
        sampling: sampler.is_some(),
        traced_tgids: &traced_tgids,
        excluded_tids: &phases.maps.excluded_tids,
        events: &phases.maps.events,
        irq_stamps: &counts.maps.irq_stamps,
        series_fds: super::series::Fds {
            hists: phases.maps.hists.as_fd().as_raw_fd(),
            phase_counters: phases.maps.counters.as_fd().as_raw_fd(),
            count_counters: counts.maps.counters.as_fd().as_raw_fd(),
            routes: phases.maps.routes.as_fd().as_raw_fd(),
        },
    };
    let live = LiveMaps {
        top: phases.maps.top.as_fd().as_raw_fd(),
        stamp_rows: -1,
        phase_counters: collectors.series_fds.phase_counters,
        count_counters: collectors.series_fds.count_counters,
        stamps_counters: -1,
        hooks: probes.iter().map(|p| (p.name.clone(), p.attached, p.via.clone())).collect(),
        progs: probes.iter().filter(|p| p.attached && p.prog_fd > 0).map(|p| (p.name.clone(), p.prog_fd)).collect(),
        ios: phases.maps.ios.as_fd().as_raw_fd(),
        links: phases.maps.links.as_fd().as_raw_fd(),
        ios_held: phases.maps.ios_held.as_fd().as_raw_fd(),
        links_held: phases.maps.links_held.as_fd().as_raw_fd(),
    };
    let (result, got) = collectors.run(set_enabled, || {
        let Some(c) = issue_checker else { return (workload(live), None) };
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| c.run(&stop));
            let r = workload(live);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (r, h.join().ok())
        })
    })?;
    let (result, issue_stamps) = result;
    drop(posted);

    fill_prog_stats(&mut probes);
    if stats_fd >= 0 {
        // SAFETY: closing the fd bpf_enable_stats returned.
        unsafe { libc::close(stats_fd) };
    }
    let mut raw = read_raw(&phases, &counts, probes)?;
    raw.lean = opts.lean != Lean::Off;
    raw.issue_stamps = issue_stamps;
    raw.features_off = features_off;
    raw.bpf_build = plan.flavour.key().into();
    name_cgroups(&mut raw.writeback);
    let maps = got.into_raw(&mut raw);
    raw.active_ns = active_span(&phases.maps.spans)?;
    if let Some(smp) = &sampler {
        raw.stacks = Some(smp.read(maps)?);
    }
    drop(links);
    Ok((result?, raw))
}

/// A lean trace's issue-stamp checker (probe::issue_stamps), given block_rq_issue's link: None
/// where the trace keeps the hook (not lean, `--issue-hook`) or the hook is not attached.
fn issue_checker(
    opts: &TraceOpts,
    phases: &mut super::phases_skel::PhasesSkel<'_>,
    probes: &[ProbeStatus],
    links: &mut Vec<libbpf_rs::Link>,
) -> Option<super::issue_stamps::Checker> {
    if !opts.issue_stamps() {
        return None;
    }
    // As open_phases decided (the NVMe split keeps the hook).
    if !phases.maps.rodata_data.as_ref().is_some_and(|ro| ro.targ_issue_stamps) {
        return None;
    }
    // links[i] is probes[i]'s for the attached ones (attach_per_plan pushes them together).
    let i = probes.iter().position(|p| p.attached && p.name == crate::hook_names::BLOCK_RQ_ISSUE)?;
    if i >= links.len() {
        return None;
    }
    let link = links.remove(i);
    let p = &probes[i];
    let bss = phases.maps.bss_data.as_deref_mut()?;
    let flags = super::issue_stamps::Flags {
        checking: &mut bss.issue_checking as *mut u32,
        stamps: &mut bss.issue_stamps as *mut u32,
        detached: &mut bss.issue_detached as *mut u32,
    };
    Some(super::issue_stamps::Checker {
        prog: super::issue_stamps::IssueProg { fd: p.prog_fd, btf: p.via == "tp_btf" },
        link: Some(Box::new(link)),
        flags,
        queues: libbpf_rs::MapHandle::try_from(&phases.maps.issue_queues).ok()?,
        checks_fd: phases.maps.issue_checks.as_fd().as_raw_fd(),
        counters_fd: phases.maps.counters.as_fd().as_raw_fd(),
        unstamped_counter: crate::model::Counter::IssueUnstamped as u32,
    })
}

/// The traced I/O's active span: the earliest submission and the latest reap over the CPUs'
/// `spans` (0: nothing closed).
fn active_span(spans: &impl MapCore) -> Result<u64> {
    let per_cpu = spans.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
    Ok(span_of(per_cpu.iter().map(|v| (super::series::word(v, 0), super::series::word(v, 1)))))
}

/// (first, last) per CPU -> last - first over the CPUs that closed anything.
fn span_of(per_cpu: impl Iterator<Item = (u64, u64)>) -> u64 {
    let (mut first, mut last) = (u64::MAX, 0);
    for (f, l) in per_cpu.filter(|&(f, _)| f != 0) {
        first = first.min(f);
        last = last.max(l);
    }
    last.saturating_sub(first)
}

/// The kernel's record of a program: run count and time (when stats are on), and
/// recursion_misses — runs skipped because another BPF program was running on that CPU, i.e.
/// events the program never saw.
pub(crate) fn prog_info(fd: i32) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel fills at most `len` bytes of `info`.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}

fn sum_percpu_u64(vals: &[Vec<u8>]) -> u64 {
    vals.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))).sum()
}

/// Slots of a bpf/slots.bpf.h table still holding a key (its first u64; 0 = free).
fn occupied_slots(map: &dyn MapCore) -> Result<u64> {
    let mut n = 0;
    for (_, value) in map.lookup_batch(4096, MapFlags::ANY, MapFlags::ANY)? {
        n += u64::from(value.get(..8).is_some_and(|k| k.iter().any(|&b| b != 0)));
    }
    Ok(n)
}

/// The files the traced processes dirtied (`wb_files`), largest writeback first.
fn read_wb_files(phases: &super::phases_skel::PhasesSkel<'_>) -> Result<Vec<crate::model::RawWbFile>> {
    use super::phases_skel::types::wb_file;
    let text = |b: &[i8]| {
        let b: Vec<u8> = b.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
        crate::untrusted::visible(&String::from_utf8_lossy(&b)).into_owned()
    };
    let mut out = Vec::new();
    for key in phases.maps.wb_files.keys() {
        let Some(v) = phases.maps.wb_files.lookup(&key, MapFlags::ANY)? else { continue };
        anyhow::ensure!(v.len() == std::mem::size_of::<wb_file>(), "wb_file: {} bytes from the map", v.len());
        // SAFETY: the map's value is a `struct wb_file` of the size checked above (plain data).
        let f: wb_file = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
        out.push(crate::model::RawWbFile {
            ino: f.ino,
            dev: format!("{}:{}", f.dev >> 20, f.dev & 0xfffff),
            tgid: f.tgid,
            comm: text(&f.comm),
            name: text(&f.name),
            cgroup_id: f.cgroup,
            cgroup: None,
            dirtied_pages: f.dirtied,
            bytes: f.bytes.to_vec(),
            bios: f.bios,
            requests: f.rqs,
            block_ns: f.block_ns,
            device_ns: f.device_ns,
        });
    }
    // Most written back first, then most dirtied (a short trace may write back nothing).
    out.sort_by_key(|f| std::cmp::Reverse((f.bytes.iter().sum::<u64>(), f.dirtied_pages)));
    Ok(out)
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

fn read_raw(
    phases: &super::phases_skel::PhasesSkel<'_>,
    counts: &super::counts_skel::CountsSkel<'_>,
    probes: Vec<ProbeStatus>,
) -> Result<RawTrace> {
    let mut raw = RawTrace { probes, ..Default::default() };
    for i in 0..NR_PHASES as u32 {
        let per_cpu = phases.maps.hists.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let mut h = BpfHist::default();
        for bytes in &per_cpu {
            h.add_raw(bytes);
        }
        raw.phases.push(h);
    }
    for i in 0..NR_COUNTERS as u32 {
        let a = phases.maps.counters.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let b = counts.maps.counters.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        raw.counters.push(sum_percpu_u64(&a) + sum_percpu_u64(&b));
    }
    for q in 0..crate::model::HW_QUEUE_TYPES * crate::model::HW_QUEUE_IDS {
        let v =
            sum_percpu_u64(&phases.maps.hw_queues.lookup_percpu(&q.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default());
        if v > 0 {
            raw.hw_queues.push((q, v));
        }
    }
    // Bios whose request's completion was never seen: their link to the I/O is still held (in
    // flight when the trace stopped, or an end no hook saw). It read 0 whatever happened since
    // routes replaced the in-flight map (issue #45).
    raw.stuck_inflight = occupied_slots(&phases.maps.links)?;
    // I/Os claimed and never closed: still in flight when the workload ended, or their end was
    // not seen.
    raw.stuck_done = occupied_slots(&phases.maps.ios)?;
    raw.routes = (0..crate::model::NR_ROUTE_KINDS as u32 * 2)
        .map(|k| -> Result<u64> {
            Ok(sum_percpu_u64(&phases.maps.routes.lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default()))
        })
        .collect::<Result<_>>()?;
    raw.writeback = read_wb_files(phases)?;
    for nr in 0..crate::model::NR_SYSCALL_SLOTS as u32 {
        let v =
            sum_percpu_u64(&phases.maps.syscalls.lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default());
        if v > 0 {
            raw.syscalls.push((nr, v));
        }
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::span_of;

    #[test]
    fn active_span_is_earliest_first_to_latest_last_over_cpus_that_closed() {
        // CPU 1 closed nothing (0, 0): it must not pull the start to 0.
        assert_eq!(span_of([(100, 900), (0, 0), (50, 700)].into_iter()), 850);
        assert_eq!(span_of([(0, 0), (0, 0)].into_iter()), 0);
    }
}
