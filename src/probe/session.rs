//! A tracing session: open -> set rodata -> load -> attach every hook this kernel has -> enable
//! -> run the workload -> disable -> read the maps -> detach. The workload runs inside `trace`'s
//! closure, so links cannot outlive it and nothing stays attached after an error.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, ProgramMut, RingBufferBuilder, TracepointCategory};

use super::counts_skel::CountsSkelBuilder;
use super::phases_skel::PhasesSkelBuilder;
use super::tracefs::Tracefs;
use crate::model::{BpfHist, ProbeStatus, RawTrace, NR_COUNTERS, NR_PHASES};

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
    /// ...kept in this file (`iopath.events/2`) when given.
    pub events_out: Option<std::path::PathBuf>,
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
    /// With `events`: every interrupt on `irqs` as a time stamp too (a timeline: --perfetto).
    pub irq_stamps: bool,
}

/// Interrupt stamps kept in memory at most (16 bytes each: 64 MiB); later ones are counted.
const MAX_IRQ_STAMPS: usize = 4 << 20;

/// The maps a live reader (`iopath top`) reads while the workload runs, by fd.
#[derive(Clone, Debug)]
pub struct LiveMaps {
    pub top: i32,
    pub phase_counters: i32,
    pub count_counters: i32,
    /// Every hook of the session: its name, whether it attached, and how (tp_btf, raw_tp ...).
    pub hooks: Vec<(String, bool, String)>,
    /// The per-I/O tables (mmapable arrays), for expiry (probe::expire).
    pub ios: i32,
    pub links: i32,
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

/// One hook: its name in reports, whether tracing is pointless without it, and the program
/// chosen for it on this kernel (None: the kernel lacks the tracepoint).
struct Hook<'a> {
    name: &'static str,
    required: bool,
    prog: Option<&'a ProgramMut<'a>>,
    /// For generic `SEC("tracepoint")` programs: where to attach.
    tracepoint: Option<(&'static str, &'static str)>,
}

/// Which program marks nvme_queue_rq's return (the doorbell): fexit where the kernel allows it,
/// else a kprobe pair, else none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QueueRqVia {
    Fexit,
    Kprobe,
    Off,
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

fn doorbell_via(nvme: bool, want: Doorbell) -> QueueRqVia {
    match want {
        _ if !nvme => QueueRqVia::Off,
        Doorbell::Kprobe => QueueRqVia::Kprobe,
        Doorbell::Off => QueueRqVia::Off,
        Doorbell::Auto => QueueRqVia::Fexit,
    }
}

/// What to load from the phases object on this kernel.
struct PhasesPlan {
    btf: bool,
    uring_req: bool,
    uring_sqe: bool,
    uring_complete: bool,
    uring_async: bool,
    stacked: bool,
    sys_enter: bool,
    sys_exit: bool,
    nvme_tp: bool,
    nvme_complete: bool,
    queue_rq: QueueRqVia,
    /// block_bio_backmerge/frontmerge (bios of buffered calls merged into requests).
    merges: bool,
    /// readahead:page_cache_sync_ra/async_ra (6.10+).
    readahead: bool,
    /// block_split (bios of buffered calls split to fit the device).
    splits: bool,
    /// jbd2:jbd2_start_commit/end_commit (ext4's journal, for what sync calls wait on).
    jbd2: bool,
    /// writeback:balance_dirty_pages (dirty throttling inside writes).
    dirty_throttle: bool,
    /// writeback:writeback_dirty_folio/start/written (whose pages the flushers write, and why).
    writeback: bool,
    /// filemap:mm_filemap_get_pages/add_to_page_cache (--pagecache count).
    pc_count: bool,
}

fn configure_phases(
    p_open: &mut super::phases_skel::OpenPhasesSkel<'_>,
    opts: &TraceOpts,
    ksyms: &std::collections::HashMap<String, u64>,
    plan: &PhasesPlan,
) -> Result<()> {
    let btf = plan.btf;
    {
        let ro = p_open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("phases: no .rodata"))?;
        ro.targ_tgid = opts.tgid;
        ro.targ_events = opts.events;
        ro.targ_top = opts.top;
        // top / serve report no syscall counts: other calls skip the hook's work (scripts/
        // bench-serve-overhead.sh, the "syscalls" point).
        ro.targ_syscalls = !opts.top;
        ro.targ_tree = !opts.tree.is_empty();
        ro.targ_app_stamp = opts.app_stamp;
        ro.targ_empty = opts.empty_probes;
        ro.targ_lean = opts.lean == Lean::Uring;
        ro.targ_aio_at_bio = opts.lean == Lean::Aio;
        ro.targ_iomap_end_io = ksyms["iomap_dio_bio_end_io"];
        ro.targ_blkdev_end_io = ksyms["blkdev_bio_end_io"];
        ro.targ_blkdev_end_io_async = ksyms["blkdev_bio_end_io_async"];
        ro.targ_bio_wait_end_io = ksyms["submit_bio_wait_endio"];
        ro.targ_chain_end_io = ksyms["bio_chain_endio"];
        ro.targ_aio_complete = ksyms["aio_complete_rw"];
        ro.targ_dm_end_io = ksyms["clone_endio"];
        ro.targ_crypt_end_io = ksyms["crypt_endio"];
        ro.targ_raid1_read_end_io = ksyms["raid1_end_read_request"];
        ro.targ_raid1_write_end_io = ksyms["raid1_end_write_request"];
        // md's accounting clone: md_end_clone_io since 6.3, md_end_io_acct before (core_fixes #12).
        ro.targ_md_clone_end_io = match ksyms["md_end_clone_io"] {
            0 => ksyms["md_end_io_acct"],
            a => a,
        };
    }
    let p = &mut p_open.progs;
    p.submit_req.set_autoload(btf && plan.uring_req);
    p.submit_req_raw.set_autoload(!btf && plan.uring_req);
    p.submit_sqe.set_autoload(plan.uring_sqe);
    p.uring_complete.set_autoload(btf && plan.uring_complete);
    p.uring_complete_raw.set_autoload(!btf && plan.uring_complete);
    p.queue_async_work.set_autoload(btf && plan.uring_async);
    p.queue_async_work_raw.set_autoload(!btf && plan.uring_async);
    p.bio_complete_btf.set_autoload(btf && plan.stacked);
    p.bio_complete_raw.set_autoload(!btf && plan.stacked);
    p.bio_queue_btf.set_autoload(btf);
    p.bio_queue_raw.set_autoload(!btf);
    p.rq_issue_btf.set_autoload(btf);
    p.rq_issue_raw.set_autoload(!btf);
    p.rq_complete_btf.set_autoload(btf);
    p.rq_complete_raw.set_autoload(!btf);
    p.nvme_setup_cmd.set_autoload(plan.nvme_tp);
    p.nvme_complete_rq.set_autoload(plan.nvme_complete);
    p.nvme_queue_rq_exit.set_autoload(plan.queue_rq == QueueRqVia::Fexit);
    p.nvme_queue_rq_entry.set_autoload(plan.queue_rq == QueueRqVia::Kprobe);
    p.nvme_queue_rq_ret.set_autoload(plan.queue_rq == QueueRqVia::Kprobe);
    p.sched_switch.set_autoload(btf);
    p.process_fork.set_autoload(!opts.tree.is_empty());
    p.sched_switch_raw.set_autoload(!btf);
    p.sched_wakeup.set_autoload(btf);
    // The page cache's extras: BTF only (counted where the kernel has the tracepoints).
    p.bio_backmerge.set_autoload(btf && plan.merges);
    p.bio_frontmerge.set_autoload(btf && plan.merges);
    p.bio_split.set_autoload(btf && plan.splits);
    p.ra_sync.set_autoload(btf && plan.readahead);
    p.ra_async.set_autoload(btf && plan.readahead);
    p.jbd2_start_commit.set_autoload(btf && plan.jbd2);
    p.jbd2_end_commit.set_autoload(btf && plan.jbd2);
    p.dirty_pause.set_autoload(btf && plan.dirty_throttle);
    p.wb_dirty_folio.set_autoload(btf && plan.writeback);
    p.wb_start.set_autoload(btf && plan.writeback);
    p.wb_written.set_autoload(btf && plan.writeback);
    p.pcc_get_pages.set_autoload(btf && plan.pc_count);
    p.pcc_add_folio.set_autoload(btf && plan.pc_count);
    p.sys_enter.set_autoload(btf && plan.sys_enter);
    p.sys_enter_raw.set_autoload(!btf && plan.sys_enter);
    p.sys_exit.set_autoload(btf && plan.sys_exit);
    p.sys_exit_raw.set_autoload(!btf && plan.sys_exit);
    if opts.events {
        p_open.maps.events.set_max_entries(EVENTS_RING_BYTES).context("sizing the events ring buffer")?;
    }
    if opts.clock_slots > 0 {
        p_open.maps.slot_clock.set_max_entries(opts.clock_slots).context("sizing the slot_clock map")?;
    }
    Ok(())
}

/// The program a libbpf load failure names ("prog 'X': BPF program load failed: ...").
fn failing_prog(log_line: &str) -> Option<String> {
    let rest = &log_line[log_line.find("prog '")? + 6..];
    Some(rest[..rest.find('\'')?].to_owned())
}

/// Attaches, runs `workload`, and returns its result with what the probes saw.
pub fn trace<R>(opts: &TraceOpts, workload: impl FnOnce() -> Result<R>) -> Result<(R, RawTrace)> {
    trace_live(opts, |_| workload())
}

/// `trace`, the workload given the maps it may read while it runs (`iopath top`).
pub fn trace_live<R>(opts: &TraceOpts, workload: impl FnOnce(LiveMaps) -> Result<R>) -> Result<(R, RawTrace)> {
    let tfs = Tracefs::ensure()?;
    let has = |g: &str, n: &str| tfs.has_event(g, n);
    let ksyms = super::kallsyms::lookup(&[super::features::OWNER_SYMBOLS, super::features::STACK_SYMBOLS].concat());
    // The top bio's end (block_bio_complete) matters only where a stacked device can clone bios:
    // without one, it would cost a lookup per bio for nothing.
    let stacked = super::features::STACK_SYMBOLS.iter().any(|s| ksyms[*s] != 0);
    let btf = !opts.force_raw_tp;
    let uring_req = has("io_uring", "io_uring_submit_req");
    let uring_sqe = !uring_req && has("io_uring", "io_uring_submit_sqe");
    let uring_complete = has("io_uring", "io_uring_complete");
    let uring_async = has("io_uring", "io_uring_queue_async_work");
    let nvme = has("nvme", "nvme_setup_cmd");
    // --pagecache count: filemap's tracepoints count the page cache, and the syscall pair, which
    // fires on every system call, is not attached at all.
    let pc_count = opts.pagecache == PageCacheMode::Count;
    if pc_count {
        anyhow::ensure!(
            btf && has("filemap", "mm_filemap_get_pages") && has("filemap", "mm_filemap_add_to_page_cache"),
            "--pagecache count needs filemap:mm_filemap_get_pages and mm_filemap_add_to_page_cache \
             through BTF (tp_btf; 6.2+ has them): use --pagecache split on this kernel"
        );
    }
    let sys_enter = !pc_count && opts.lean == Lean::Off && has("raw_syscalls", "sys_enter");
    let sys_exit = !pc_count && opts.lean != Lean::Uring && has("raw_syscalls", "sys_exit");

    // NVMe extras are optional: a kernel whose nvme module BTF or fentry support trips the
    // verifier loses them (said in the report), not the trace. Each failed load drops the
    // failing extra (fexit falls back to kprobes) and tries again.
    let mut plan = PhasesPlan {
        btf,
        uring_req,
        uring_sqe,
        uring_complete,
        uring_async,
        stacked,
        sys_enter,
        sys_exit,
        nvme_tp: nvme,
        nvme_complete: nvme && has("nvme", "nvme_complete_rq"),
        queue_rq: doorbell_via(nvme, opts.doorbell),
        merges: has("block", "block_bio_backmerge") && has("block", "block_bio_frontmerge"),
        readahead: has("readahead", "page_cache_sync_ra") && has("readahead", "page_cache_async_ra"),
        jbd2: has("jbd2", "jbd2_start_commit") && has("jbd2", "jbd2_end_commit"),
        dirty_throttle: has("writeback", "balance_dirty_pages"),
        writeback: has("writeback", "writeback_dirty_folio")
            && has("writeback", "writeback_start")
            && has("writeback", "writeback_written"),
        splits: has("block", "block_split"),
        pc_count,
    };
    let mut load_notes: Vec<ProbeStatus> = Vec::new();
    let mut stores: [MaybeUninit<libbpf_rs::OpenObject>; 4] = std::array::from_fn(|_| MaybeUninit::uninit());
    let mut loaded = None;
    for store in stores.iter_mut() {
        let mut p_open = PhasesSkelBuilder::default().open(store).context("opening the phases BPF object")?;
        configure_phases(&mut p_open, opts, &ksyms, &plan)?;
        super::log::clear();
        match p_open.load() {
            Ok(skel) => {
                loaded = Some(skel);
                break;
            }
            Err(e) => {
                let why = super::log::reason().unwrap_or_else(|| e.to_string());
                let note = |name: &str, then: &str| ProbeStatus {
                    name: name.into(),
                    error: Some(format!("did not load ({why}); {then}")),
                    ..Default::default()
                };
                match failing_prog(&why).as_deref() {
                    Some("nvme_queue_rq_exit") if plan.queue_rq == QueueRqVia::Fexit => {
                        load_notes.push(note("fexit:nvme_queue_rq", "trying kprobes"));
                        plan.queue_rq = QueueRqVia::Kprobe;
                    }
                    Some("nvme_queue_rq_entry" | "nvme_queue_rq_ret") if plan.queue_rq == QueueRqVia::Kprobe => {
                        load_notes.push(note("kprobe:nvme_queue_rq", "no doorbell split"));
                        plan.queue_rq = QueueRqVia::Off;
                    }
                    Some("nvme_setup_cmd" | "nvme_complete_rq") if plan.nvme_tp => {
                        load_notes.push(note("nvme:nvme_setup_cmd", "no NVMe driver/device split"));
                        plan.nvme_tp = false;
                        plan.nvme_complete = false;
                        plan.queue_rq = QueueRqVia::Off;
                    }
                    _ => return Err(load_error("phases", e)),
                }
            }
        }
    }
    let mut phases = loaded
        .ok_or_else(|| anyhow!("loading the phases BPF programs failed after dropping the optional NVMe probes"))?;
    let nvme = plan.nvme_tp;
    for tid in &opts.exclude_tids {
        phases
            .maps
            .excluded_tids
            .update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("excluding iopath's threads")?;
    }
    for tgid in &opts.tree {
        phases
            .maps
            .traced_tgids
            .update(&tgid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("seeding the traced processes")?;
    }

    let dma_map = ["dma_map_phys", "dma_map_page"].into_iter().find(|n| has("dma", n));
    let dma_unmap = ["dma_unmap_phys", "dma_unmap_page"].into_iter().find(|n| has("dma", n));
    let mut c_store = MaybeUninit::uninit();
    let mut c_open = CountsSkelBuilder::default().open(&mut c_store).context("opening the counts BPF object")?;
    {
        let p = &mut c_open.progs;
        p.irq_entry.set_autoload(btf);
        p.irq_entry_raw.set_autoload(!btf);
        p.softirq_entry.set_autoload(btf);
        p.softirq_exit.set_autoload(btf);
        p.softirq_entry_raw.set_autoload(!btf);
        p.softirq_exit_raw.set_autoload(!btf);
        p.iommu_map.set_autoload(!btf && has("iommu", "map"));
        p.iommu_unmap.set_autoload(!btf && has("iommu", "unmap"));
        p.dma_map.set_autoload(!btf && dma_map.is_some());
        p.dma_unmap.set_autoload(!btf && dma_unmap.is_some());
        p.iommu_map_btf.set_autoload(btf && has("iommu", "map"));
        p.iommu_unmap_btf.set_autoload(btf && has("iommu", "unmap"));
        p.dma_map_btf.set_autoload(btf && dma_map.is_some());
        p.dma_unmap_btf.set_autoload(btf && dma_unmap.is_some());
        if btf {
            if let Some(n) = dma_map {
                p.dma_map_btf.set_attach_target(0, Some(n.into())).context("dma map probe target")?;
            }
            if let Some(n) = dma_unmap {
                p.dma_unmap_btf.set_attach_target(0, Some(n.into())).context("dma unmap probe target")?;
            }
        }
    }
    if opts.irq_stamps && opts.events {
        c_open.maps.irq_stamps.set_max_entries(EVENTS_RING_BYTES / 4).context("sizing the IRQ stamps ring buffer")?;
    }
    if let Some(ro) = c_open.maps.rodata_data.as_deref_mut() {
        ro.targ_empty = opts.empty_probes;
        ro.targ_irq_stamps = opts.irq_stamps && opts.events;
    }
    super::log::clear();
    let mut counts = c_open.load().map_err(|e| load_error("counts", e))?;
    for irq in &opts.irqs {
        counts.maps.irq_filter.update(&irq.to_ne_bytes(), &[1u8], MapFlags::ANY).context("filling the IRQ filter")?;
    }

    let (pp, cp) = (&phases.progs, &counts.progs);
    // One mode's hooks or the other's: what a mode leaves out is not listed as missing.
    let mut hooks: Vec<Hook> = if pc_count {
        vec![
            Hook {
                name: "filemap:mm_filemap_get_pages",
                required: false,
                prog: Some(&pp.pcc_get_pages),
                tracepoint: None,
            },
            Hook {
                name: "filemap:mm_filemap_add_to_page_cache",
                required: false,
                prog: Some(&pp.pcc_add_folio),
                tracepoint: None,
            },
        ]
    } else if opts.lean == Lean::Uring {
        Vec::new()
    } else {
        let mut pair = vec![
            Hook {
                name: "raw_syscalls:sys_enter",
                required: false,
                prog: sys_enter.then_some(if btf { &pp.sys_enter } else { &pp.sys_enter_raw }),
                tracepoint: None,
            },
            Hook {
                name: "raw_syscalls:sys_exit",
                required: false,
                prog: sys_exit.then_some(if btf { &pp.sys_exit } else { &pp.sys_exit_raw }),
                tracepoint: None,
            },
        ];
        // Lean aio starts each I/O at the generator's io_submit time (slot_clock): no sys_enter.
        if opts.lean == Lean::Aio {
            pair.remove(0);
        }
        pair
    };
    hooks.extend([
        Hook {
            name: if uring_sqe { "io_uring:io_uring_submit_sqe" } else { "io_uring:io_uring_submit_req" },
            required: false,
            prog: if uring_sqe {
                Some(&pp.submit_sqe)
            } else if !uring_req {
                None
            } else if btf {
                Some(&pp.submit_req)
            } else {
                Some(&pp.submit_req_raw)
            },
            tracepoint: None,
        },
        Hook {
            name: "io_uring:io_uring_complete",
            required: false,
            prog: uring_complete.then_some(if btf { &pp.uring_complete } else { &pp.uring_complete_raw }),
            tracepoint: None,
        },
        Hook {
            name: "io_uring:io_uring_queue_async_work",
            required: false,
            prog: uring_async.then_some(if btf { &pp.queue_async_work } else { &pp.queue_async_work_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_bio_queue",
            required: true,
            prog: Some(if btf { &pp.bio_queue_btf } else { &pp.bio_queue_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_bio_complete",
            required: false,
            prog: stacked.then_some(if btf { &pp.bio_complete_btf } else { &pp.bio_complete_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_rq_issue",
            required: true,
            prog: Some(if btf { &pp.rq_issue_btf } else { &pp.rq_issue_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_rq_complete",
            required: true,
            prog: Some(if btf { &pp.rq_complete_btf } else { &pp.rq_complete_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_bio_backmerge",
            required: false,
            prog: (btf && plan.merges).then_some(&pp.bio_backmerge),
            tracepoint: None,
        },
        Hook {
            name: "block:block_bio_frontmerge",
            required: false,
            prog: (btf && plan.merges).then_some(&pp.bio_frontmerge),
            tracepoint: None,
        },
        Hook {
            name: "block:block_split",
            required: false,
            prog: (btf && plan.splits).then_some(&pp.bio_split),
            tracepoint: None,
        },
        Hook {
            name: "readahead:page_cache_sync_ra",
            required: false,
            prog: (btf && plan.readahead).then_some(&pp.ra_sync),
            tracepoint: None,
        },
        Hook {
            name: "readahead:page_cache_async_ra",
            required: false,
            prog: (btf && plan.readahead).then_some(&pp.ra_async),
            tracepoint: None,
        },
        Hook {
            name: "jbd2:jbd2_start_commit",
            required: false,
            prog: (btf && plan.jbd2).then_some(&pp.jbd2_start_commit),
            tracepoint: None,
        },
        Hook {
            name: "jbd2:jbd2_end_commit",
            required: false,
            prog: (btf && plan.jbd2).then_some(&pp.jbd2_end_commit),
            tracepoint: None,
        },
        Hook {
            name: "writeback:writeback_dirty_folio",
            required: false,
            prog: (btf && plan.writeback).then_some(&pp.wb_dirty_folio),
            tracepoint: None,
        },
        Hook {
            name: "writeback:writeback_start",
            required: false,
            prog: (btf && plan.writeback).then_some(&pp.wb_start),
            tracepoint: None,
        },
        Hook {
            name: "writeback:writeback_written",
            required: false,
            prog: (btf && plan.writeback).then_some(&pp.wb_written),
            tracepoint: None,
        },
        Hook {
            name: "writeback:balance_dirty_pages",
            required: false,
            prog: (btf && plan.dirty_throttle).then_some(&pp.dirty_pause),
            tracepoint: None,
        },
        Hook {
            name: "nvme:nvme_setup_cmd",
            required: false,
            prog: nvme.then_some(&pp.nvme_setup_cmd),
            tracepoint: None,
        },
        Hook {
            name: "nvme:nvme_complete_rq",
            required: false,
            prog: plan.nvme_complete.then_some(&pp.nvme_complete_rq),
            tracepoint: None,
        },
        Hook {
            name: "irq:irq_handler_entry",
            required: false,
            prog: Some(if btf { &cp.irq_entry } else { &cp.irq_entry_raw }),
            tracepoint: None,
        },
        Hook {
            name: "irq:softirq_entry",
            required: false,
            prog: Some(if btf { &cp.softirq_entry } else { &cp.softirq_entry_raw }),
            tracepoint: None,
        },
        Hook {
            name: "irq:softirq_exit",
            required: false,
            prog: Some(if btf { &cp.softirq_exit } else { &cp.softirq_exit_raw }),
            tracepoint: None,
        },
        Hook {
            name: "sched:sched_switch",
            required: false,
            prog: Some(if btf { &pp.sched_switch } else { &pp.sched_switch_raw }),
            tracepoint: None,
        },
        Hook {
            name: "iommu:map",
            required: false,
            prog: has("iommu", "map").then_some(if btf { &cp.iommu_map_btf } else { &cp.iommu_map }),
            tracepoint: None,
        },
        Hook {
            name: "iommu:unmap",
            required: false,
            prog: has("iommu", "unmap").then_some(if btf { &cp.iommu_unmap_btf } else { &cp.iommu_unmap }),
            tracepoint: None,
        },
        Hook {
            name: "dma:dma_map",
            required: false,
            prog: dma_map.map(|_| if btf { &cp.dma_map_btf } else { &cp.dma_map }),
            tracepoint: if btf { None } else { dma_map.map(|n| ("dma", n)) },
        },
        Hook {
            name: "dma:dma_unmap",
            required: false,
            prog: dma_unmap.map(|_| if btf { &cp.dma_unmap_btf } else { &cp.dma_unmap }),
            tracepoint: if btf { None } else { dma_unmap.map(|n| ("dma", n)) },
        },
    ]);
    if btf {
        // Needs the woken task's storage: BTF task pointers, so tp_btf only.
        hooks.push(Hook {
            name: "sched:sched_wakeup",
            required: false,
            prog: Some(&pp.sched_wakeup),
            tracepoint: None,
        });
    }
    match plan.queue_rq {
        QueueRqVia::Fexit => hooks.push(Hook {
            name: "fexit:nvme_queue_rq",
            required: false,
            prog: Some(&pp.nvme_queue_rq_exit),
            tracepoint: None,
        }),
        QueueRqVia::Kprobe => {
            hooks.push(Hook {
                name: "kprobe:nvme_queue_rq",
                required: false,
                prog: Some(&pp.nvme_queue_rq_entry),
                tracepoint: None,
            });
            hooks.push(Hook {
                name: "kretprobe:nvme_queue_rq",
                required: false,
                prog: Some(&pp.nvme_queue_rq_ret),
                tracepoint: None,
            });
        }
        QueueRqVia::Off => {}
    }
    if !opts.tree.is_empty() {
        // Only a process tree needs its forks followed.
        hooks.push(Hook {
            name: "sched:sched_process_fork",
            required: false,
            prog: Some(&pp.process_fork),
            tracepoint: None,
        });
    }
    if opts.lean != Lean::Off {
        // What --lean leaves out is its choice, not missing: not listed (each costs a program run
        // per I/O or per context switch on the submitting thread; README "Overhead").
        hooks.retain(|h| !LEAN_LEAVES_OUT.contains(&h.name));
    }
    let mut links: Vec<Link> = Vec::new();
    let mut probes = load_notes;
    for h in &hooks {
        if opts.skip_hooks.iter().any(|s| !s.is_empty() && h.name.contains(s.as_str())) {
            continue;
        }
        let Some(prog) = h.prog else {
            probes.push(ProbeStatus {
                name: h.name.into(),
                error: Some("not on this kernel".into()),
                ..Default::default()
            });
            continue;
        };
        let res = match h.tracepoint {
            Some((cat, name)) => prog.attach_tracepoint(TracepointCategory::Custom(cat.into()), name),
            None => prog.attach(),
        };
        let via = prog_kind(prog);
        match res {
            Ok(l) => {
                links.push(l);
                probes.push(ProbeStatus {
                    name: h.name.into(),
                    attached: true,
                    via,
                    prog_fd: prog.as_fd().as_raw_fd(),
                    ..Default::default()
                });
            }
            Err(e) if h.required => return Err(anyhow!("attaching {} ({via}) failed: {e}", h.name)),
            Err(e) => {
                probes.push(ProbeStatus { name: h.name.into(), via, error: Some(e.to_string()), ..Default::default() })
            }
        }
    }

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
    let received = AtomicU64::new(0);
    // --events-out: the file, the records written to it and the first write error.
    let sink: std::sync::Mutex<Option<BufWriter<File>>> = std::sync::Mutex::new(None);
    let kept = AtomicU64::new(0);
    let sink_err: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let irq_stamps: std::sync::Mutex<(Vec<crate::model::IrqStamp>, u64)> = std::sync::Mutex::new((Vec::new(), 0));
    let stop_poll = AtomicBool::new(false);
    let mut result = None;
    let mut maps = Vec::new();
    let mut vmstat = None;
    let mut raw_series = None;
    std::thread::scope(|s| -> Result<()> {
        // User stacks are symbolized after the run, when a traced process may be gone: keep its
        // executable mappings as it runs.
        let mapper = sampler.is_some().then(|| {
            let (tgid, tree, stop, traced) = (opts.tgid, !opts.tree.is_empty(), &stop_poll, &traced_tgids);
            let (tx, rx) = std::sync::mpsc::channel();
            let h = s.spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() } as u32);
                let roots = crate::sysconf::SysRoots::live();
                let mut seen: std::collections::BTreeMap<u32, Vec<crate::model::ExecMapping>> = Default::default();
                loop {
                    let done = stop.load(Ordering::Relaxed);
                    let tgids: Vec<u32> = if tree {
                        traced.keys().map(|k| u32::from_ne_bytes(k[..4].try_into().unwrap_or([0; 4]))).collect()
                    } else {
                        vec![tgid]
                    };
                    for t in tgids.into_iter().filter(|&t| t != 0) {
                        if let Some(m) = crate::sysconf::exec_mappings(&roots, t) {
                            let known = seen.entry(t).or_default();
                            for x in m {
                                if !known.contains(&x) {
                                    known.push(x);
                                }
                            }
                        }
                    }
                    if done {
                        return seen.into_iter().collect::<Vec<_>>();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            });
            (h, rx.recv())
        });
        let mapper = match mapper {
            Some((h, Ok(tid))) => {
                // Its own reads of /proc are not the workload.
                phases.maps.excluded_tids.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)?;
                Some(h)
            }
            Some((h, Err(_))) => Some(h),
            None => None,
        };
        let poller = if opts.events {
            if let Some(p) = &opts.events_out {
                let mut f = BufWriter::with_capacity(
                    1 << 20,
                    File::create(p).with_context(|| format!("creating {}", p.display()))?,
                );
                crate::events::write_header(&mut f).with_context(|| format!("writing {}", p.display()))?;
                *sink.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
            }
            let (received, sink, kept, sink_err) = (&received, &sink, &kept, &sink_err);
            let mut b = RingBufferBuilder::new();
            b.add(&phases.maps.events, move |data: &[u8]| {
                received.fetch_add(1, Ordering::Relaxed);
                if let Some(f) = sink.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    // A full disk must not stop the trace: the first error and what was kept are
                    // reported.
                    match f.write_all(data) {
                        Ok(()) => {
                            kept.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            sink_err.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e.to_string());
                        }
                    }
                }
                0
            })?;
            if opts.irq_stamps {
                let stamps = &irq_stamps;
                b.add(&counts.maps.irq_stamps, move |data: &[u8]| {
                    let mut st = stamps.lock().unwrap_or_else(|e| e.into_inner());
                    if st.0.len() >= MAX_IRQ_STAMPS {
                        st.1 += 1;
                    } else if let Some(x) = crate::model::IrqStamp::parse(data) {
                        st.0.push(x);
                    }
                    0
                })?;
            }
            let rb = b.build()?;
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = &stop_poll;
            let h = s.spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() } as u32);
                // Records come without wakeups (BPF_RB_NO_WAKEUP), so epoll never reports the ring
                // ready and poll() would drain nothing: consume on a 20 ms timer instead.
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    let _ = rb.consume();
                }
                let _ = rb.consume();
            });
            let tid: u32 = rx.recv().context("starting the events poller")?;
            phases.maps.excluded_tids.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)?;
            Some(h)
        } else {
            None
        };
        let posted = match opts.clock_slots {
            0 => None,
            n => Some(SlotClockMap::map(phases.maps.slot_clock.as_fd().as_raw_fd(), n)?),
        };
        let vm_stop = &stop_poll;
        let (vm_tx, vm_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let vm = s.spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = vm_tx.send(unsafe { libc::gettid() } as u32);
            // Not one read before the thread is excluded: the probes look it up once.
            go_rx.recv().ok()?;
            super::vmstat::sample(vm_stop)
        });
        // Its reads of /proc/vmstat are iopath's, not the workload's (the generator runs in
        // this process: 89 extra "buffered reads" in a 16384-read job before this).
        let vm_tid: u32 = vm_rx.recv().context("starting the vmstat sampler")?;
        phases.maps.excluded_tids.update(&vm_tid.to_ne_bytes(), &[1u8], MapFlags::ANY)?;
        let series_fds = super::series::Fds {
            hists: phases.maps.hists.as_fd().as_raw_fd(),
            phase_counters: phases.maps.counters.as_fd().as_raw_fd(),
            count_counters: counts.maps.counters.as_fd().as_raw_fd(),
            routes: phases.maps.routes.as_fd().as_raw_fd(),
        };
        let series = match opts.series {
            Some((interval, start)) => {
                let (tx, rx) = std::sync::mpsc::channel();
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                let h = s.spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    let _ = tx.send(unsafe { libc::gettid() } as u32);
                    go_rx.recv().ok()?;
                    super::series::sample(series_fds, interval, start, vm_stop)
                });
                // Its switches are iopath's, not the generator's (same process).
                let tid: u32 = rx.recv().context("starting the time-series sampler")?;
                phases.maps.excluded_tids.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)?;
                Some((h, go_tx))
            }
            None => None,
        };
        let _ = go_tx.send(());
        // Counting starts only once every link exists, so attach order cannot skew the numbers.
        set_enabled(1);
        let series = series.map(|(h, go)| {
            let _ = go.send(());
            h
        });
        result = Some(workload(LiveMaps {
            top: phases.maps.top.as_fd().as_raw_fd(),
            phase_counters: series_fds.phase_counters,
            count_counters: series_fds.count_counters,
            hooks: probes.iter().map(|p| (p.name.clone(), p.attached, p.via.clone())).collect(),
            ios: phases.maps.ios.as_fd().as_raw_fd(),
            links: phases.maps.links.as_fd().as_raw_fd(),
        }));
        set_enabled(0);
        drop(posted);
        stop_poll.store(true, Ordering::Relaxed);
        vmstat = vm.join().map_err(|_| anyhow!("the vmstat sampler panicked"))?;
        if let Some(h) = series {
            raw_series = h.join().map_err(|_| anyhow!("the time-series sampler panicked"))?;
        }
        if let Some(h) = poller {
            h.join().map_err(|_| anyhow!("the events poller panicked"))?;
        }
        if let Some(h) = mapper {
            maps = h.join().map_err(|_| anyhow!("the mappings reader panicked"))?;
        }
        Ok(())
    })?;
    let result = result.ok_or_else(|| anyhow!("the workload did not run"))?;

    for p in probes.iter_mut().filter(|p| p.attached) {
        if let Some(info) = prog_info(p.prog_fd) {
            p.recursion_misses = info.recursion_misses;
            p.run_cnt = info.run_cnt;
            p.run_time_ns = info.run_time_ns;
        }
    }
    if stats_fd >= 0 {
        // SAFETY: closing the fd bpf_enable_stats returned.
        unsafe { libc::close(stats_fd) };
    }
    let mut raw = read_raw(&phases, &counts, probes)?;
    raw.lean = opts.lean != Lean::Off;
    raw.vmstat = vmstat;
    raw.series = raw_series;
    // The dirtiers' cgroups by path, while the directories exist.
    let roots = crate::sysconf::SysRoots::live();
    let mut paths = std::collections::HashMap::new();
    for f in raw.writeback.iter_mut().filter(|f| f.cgroup_id != 0) {
        f.cgroup =
            paths.entry(f.cgroup_id).or_insert_with(|| crate::sysconf::cgroup_path_of_id(&roots, f.cgroup_id)).clone();
    }
    raw.events_received = opts.events.then(|| received.load(Ordering::Relaxed));
    (raw.irq_stamps, raw.irq_stamps_dropped) = irq_stamps.into_inner().unwrap_or_else(|e| e.into_inner());
    if let (Some(p), Some(mut f)) = (&opts.events_out, sink.into_inner().unwrap_or_else(|e| e.into_inner())) {
        let mut err = sink_err.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.flush() {
            err.get_or_insert(e.to_string());
        }
        raw.events_file_error = err.map(|e| {
            format!(
                "writing {}: {e}: it holds {} of the {} records received (a buffered tail may be missing too)",
                p.display(),
                kept.load(Ordering::Relaxed),
                received.load(Ordering::Relaxed)
            )
        });
    }
    if let Some(b) = phases.maps.bss_data.as_deref() {
        raw.active_ns = b.last_reap_ts.saturating_sub(b.first_submit_ts);
    }
    if let Some(smp) = &sampler {
        raw.stacks = Some(smp.read(maps)?);
    }
    drop(links);
    Ok((result?, raw))
}

fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
    anyhow!("loading the {what} BPF programs failed: {e}{why}. Run 'iopath doctor' to see what this kernel supports")
}

fn prog_kind(p: &ProgramMut) -> String {
    let sec = p.section().to_string_lossy().into_owned();
    sec.split('/').next().unwrap_or("").to_owned()
}

/// The kernel's record of a program: run count and time (when stats are on), and
/// recursion_misses — runs skipped because another BPF program was running on that CPU, i.e.
/// events the program never saw.
fn prog_info(fd: i32) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
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
        String::from_utf8_lossy(&b).into_owned()
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
/// (README "Overhead"). Neither attaches the scheduler or softirq hooks (LEAN_LEAVES_OUT).
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

/// The scheduler and softirq hooks `--lean` does not attach (uring's leaves the syscall pair
/// unloaded too).
pub const LEAN_LEAVES_OUT: [&str; 4] =
    ["sched:sched_switch", "sched:sched_wakeup", "irq:softirq_entry", "irq:softirq_exit"];

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
    // I/Os claimed and never closed: still in flight when the workload ended, or their end was
    // not seen.
    raw.stuck_inflight = 0;
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
    #[test]
    fn failing_prog_is_read_from_libbpfs_message() {
        let line = "libbpf: prog 'nvme_queue_rq_exit': BPF program load failed: -EPERM";
        assert_eq!(super::failing_prog(line).as_deref(), Some("nvme_queue_rq_exit"));
        assert_eq!(super::failing_prog("libbpf: failed to load object"), None);
    }
}
