//! Opens each BPF object and fills what the options decide before load: rodata, map sizes,
//! which build's maps exist. The session and the doctor's dry run open through here.

use std::mem::MaybeUninit;

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::SkelBuilder;

use super::counts_skel::CountsSkelBuilder;
use super::options::{Lean, TraceOpts};
use super::phases_skel::PhasesSkelBuilder;
use super::plan::Plan;

/// Ring buffer for `--events`: 16 MiB holds ~260k records, over a second at this machine's
/// fastest rate, against a 20 ms drain.
pub const EVENTS_RING_BYTES: u32 = 16 << 20;

/// Opens the phases object in `store` and sets everything but autoload: the rodata (the options,
/// the kernel functions that tell who owns a bio) and map sizes.
pub fn open_phases<'obj>(
    store: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    opts: &TraceOpts,
    ksyms: &std::collections::HashMap<String, u64>,
    plan: &Plan,
) -> Result<super::phases_skel::OpenPhasesSkel<'obj>> {
    use super::hooks::{Flavour, FS_SYMBOLS, OWNER_SYMBOLS, STACK_SYMBOLS};
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
        ro.targ_btrfs_simple_end_io = addr(FS_SYMBOLS, "btrfs_simple_end_io");
        ro.targ_btrfs_orig_write_end_io = addr(FS_SYMBOLS, "btrfs_orig_write_end_io");
        ro.targ_btrfs_clone_write_end_io = addr(FS_SYMBOLS, "btrfs_clone_write_end_io");
        ro.targ_btrfs_dio_end_io = addr(FS_SYMBOLS, "btrfs_dio_end_io");
        ro.targ_btrfs_end_dio_bio = addr(FS_SYMBOLS, "btrfs_end_dio_bio");
        ro.targ_btrfs_end_io_work = addr(FS_SYMBOLS, "btrfs_end_io_work");
        ro.targ_fs_endio = plan.is_on(super::hooks::Feature::FsEndio);
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
pub fn open_counts<'obj>(
    store: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    opts: &TraceOpts,
    _plan: &Plan,
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
