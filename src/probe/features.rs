//! What this kernel offers iopath, found by looking (tracefs, BTF) and by trying (loading and
//! attaching one tiny program per attach kind). Decided once, up front; `doctor` prints it.

use std::mem::MaybeUninit;
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

use serde::Serialize;

use super::doctor_skel::DoctorSkelBuilder;
use super::tracefs::Tracefs;

/// A tracepoint iopath uses, and what for.
pub struct TracepointSpec {
    pub group: &'static str,
    /// Alternatives across kernel versions, newest first; the first present one is used.
    pub names: &'static [&'static str],
    pub used_for: &'static str,
    /// Without it the four-phase split cannot be made.
    pub required: bool,
}

pub const TRACEPOINTS: &[TracepointSpec] = &[
    TracepointSpec {
        group: "raw_syscalls",
        names: &["sys_enter"],
        used_for: "submission start, reap array (io_uring_enter, io_submit, io_[p]getevents by number)",
        required: false,
    },
    TracepointSpec {
        group: "raw_syscalls",
        names: &["sys_exit"],
        used_for: "reap (io_uring_enter, io_[p]getevents return)",
        required: false,
    },
    TracepointSpec {
        group: "syscalls",
        names: &["sys_enter_io_uring_enter"],
        used_for: "the syscall exists (traced through raw_syscalls)",
        required: false,
    },
    TracepointSpec {
        group: "syscalls",
        names: &["sys_enter_io_submit"],
        used_for: "the syscall exists (traced through raw_syscalls)",
        required: false,
    },
    TracepointSpec {
        group: "syscalls",
        names: &["sys_enter_io_getevents"],
        used_for: "the syscall exists (traced through raw_syscalls)",
        required: false,
    },
    TracepointSpec {
        group: "syscalls",
        names: &["sys_enter_io_pgetevents"],
        used_for: "the syscall exists (traced through raw_syscalls)",
        required: false,
    },
    TracepointSpec {
        group: "io_uring",
        names: &["io_uring_submit_req", "io_uring_submit_sqe"],
        used_for: "io_uring request submitted (submit_sqe before 6.4)",
        required: false,
    },
    TracepointSpec {
        group: "io_uring",
        names: &["io_uring_complete"],
        used_for: "io_uring completion posted",
        required: false,
    },
    TracepointSpec {
        group: "io_uring",
        names: &["io_uring_queue_async_work"],
        used_for: "io_uring request punted to io-wq (the io-wq sub-phase)",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_bio_queue"],
        used_for: "bio enters the block layer",
        required: true,
    },
    TracepointSpec { group: "block", names: &["block_getrq"], used_for: "request allocated", required: false },
    TracepointSpec {
        group: "block",
        names: &["block_bio_remap"],
        used_for: "bio remapped to a lower device (dm, md, partitions): not needed, clones are walked back",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_bio_complete"],
        used_for: "a bio ended: the top bio of a stacked device (attached where dm or md is loaded)",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_bio_backmerge"],
        used_for: "page cache: bios of buffered calls merged into a queued request",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_bio_frontmerge"],
        used_for: "page cache: bios of buffered calls merged into a queued request",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_split"],
        used_for: "page cache: bios of buffered calls split to fit the device (one more request each)",
        required: false,
    },
    TracepointSpec {
        group: "readahead",
        names: &["page_cache_sync_ra"],
        used_for: "page cache: readahead a buffered read started on a miss (6.10+)",
        required: false,
    },
    TracepointSpec {
        group: "readahead",
        names: &["page_cache_async_ra"],
        used_for: "page cache: readahead a buffered read started on the marker (6.10+)",
        required: false,
    },
    TracepointSpec {
        group: "jbd2",
        names: &["jbd2_start_commit"],
        used_for: "sync calls: time blocked while ext4's journal committed",
        required: false,
    },
    TracepointSpec {
        group: "jbd2",
        names: &["jbd2_end_commit"],
        used_for: "sync calls: time blocked while ext4's journal committed",
        required: false,
    },
    TracepointSpec {
        group: "writeback",
        names: &["writeback_dirty_folio"],
        used_for: "writeback: the files the traced processes dirty, and who dirtied them",
        required: false,
    },
    TracepointSpec {
        group: "writeback",
        names: &["writeback_start"],
        used_for: "writeback: why a flusher writes (background, periodic, sync ...)",
        required: false,
    },
    TracepointSpec {
        group: "writeback",
        names: &["writeback_written"],
        used_for: "writeback: why a flusher writes (background, periodic, sync ...)",
        required: false,
    },
    TracepointSpec {
        group: "writeback",
        names: &["balance_dirty_pages"],
        used_for: "buffered writes: dirty-throttling pauses",
        required: false,
    },
    TracepointSpec {
        group: "filemap",
        names: &["mm_filemap_get_pages"],
        used_for: "--pagecache count: buffered reads counted without the syscall hooks",
        required: false,
    },
    TracepointSpec {
        group: "filemap",
        names: &["mm_filemap_add_to_page_cache"],
        used_for: "--pagecache count: pages the traced processes added to the cache",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_rq_insert"],
        used_for: "scheduler insert (not with scheduler none)",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_rq_issue"],
        used_for: "request issued to the driver",
        required: true,
    },
    TracepointSpec {
        group: "block",
        names: &["block_rq_complete"],
        used_for: "request completed by the device",
        required: true,
    },
    TracepointSpec {
        group: "block",
        names: &["block_io_start"],
        used_for: "I/O accounting start (6.5+)",
        required: false,
    },
    TracepointSpec {
        group: "block",
        names: &["block_io_done"],
        used_for: "I/O accounting done (6.5+)",
        required: false,
    },
    TracepointSpec {
        group: "nvme",
        names: &["nvme_setup_cmd"],
        used_for: "NVMe command set up (driver/device split)",
        required: false,
    },
    TracepointSpec { group: "nvme", names: &["nvme_complete_rq"], used_for: "NVMe command completed", required: false },
    TracepointSpec {
        group: "irq",
        names: &["irq_handler_entry"],
        used_for: "device interrupts per I/O",
        required: false,
    },
    TracepointSpec { group: "irq", names: &["irq_handler_exit"], used_for: "interrupt handler time", required: false },
    TracepointSpec { group: "irq", names: &["softirq_entry"], used_for: "BLOCK softirq time", required: false },
    TracepointSpec { group: "irq", names: &["softirq_exit"], used_for: "BLOCK softirq time", required: false },
    TracepointSpec {
        group: "sched",
        names: &["sched_switch"],
        used_for: "context switches per I/O, off-CPU time",
        required: false,
    },
    TracepointSpec {
        group: "sched",
        names: &["sched_wakeup"],
        used_for: "run-queue wait of the traced threads (CPU contention)",
        required: false,
    },
    TracepointSpec { group: "iommu", names: &["map"], used_for: "IOMMU mappings per I/O", required: false },
    TracepointSpec { group: "iommu", names: &["unmap"], used_for: "IOMMU unmappings per I/O", required: false },
    TracepointSpec {
        group: "dma",
        names: &["dma_map_phys", "dma_map_page"],
        used_for: "DMA mappings per I/O (dma_map_page before 6.17)",
        required: false,
    },
    TracepointSpec {
        group: "dma",
        names: &["dma_unmap_phys", "dma_unmap_page"],
        used_for: "DMA unmappings per I/O",
        required: false,
    },
];

/// Kernel functions whose addresses tell the block core who owns a bio (bpf/block_core.bpf.h):
/// the direct-I/O end_io handlers, the bio chain of split bios, and aio's completion.
pub const OWNER_SYMBOLS: &[&str] = &[
    "iomap_dio_bio_end_io",
    "blkdev_bio_end_io",
    "blkdev_bio_end_io_async",
    "submit_bio_wait_endio",
    "bio_chain_endio",
    "aio_complete_rw",
];

/// The stacked devices' clone end_io handlers (module symbols: present while dm_mod, dm_crypt,
/// raid1 and md_mod are loaded), in the order of the targ_* rodata they fill.
pub const STACK_SYMBOLS: &[&str] = &[
    "clone_endio",
    "crypt_endio",
    "raid1_end_read_request",
    "raid1_end_write_request",
    "md_end_clone_io",
    "md_end_io_acct",
];

/// A route an I/O can take, and what following it needs on this kernel. `iopath doctor` lists
/// every route with whether it is followed here; the trace session loads the same tracepoints
/// and symbols.
pub struct RouteSpec {
    pub name: &'static str,
    /// Tracepoints it needs, each `group:name` with alternatives across versions.
    pub tracepoints: &'static [(&'static str, &'static [&'static str])],
    /// Kernel symbols it needs, any one of them (the bio's owner is found through it).
    pub symbols: &'static [&'static str],
    /// Said of it even when followed: what it shows, or what stays out of reach.
    pub note: &'static str,
    /// Not followed on any kernel yet, and why.
    pub unsupported: Option<&'static str>,
    /// What a missing symbol means for this route, when more than "not in this kernel".
    pub without_symbols: Option<&'static str>,
}

const SYSCALLS: (&str, &[&str]) = ("raw_syscalls", &["sys_enter"]);
const SUBMIT: (&str, &[&str]) = ("io_uring", &["io_uring_submit_req", "io_uring_submit_sqe"]);
const POSTED: (&str, &[&str]) = ("io_uring", &["io_uring_complete"]);
const DIRECT_IO: &[&str] = &["iomap_dio_bio_end_io", "blkdev_bio_end_io_async", "blkdev_bio_end_io"];

pub const ROUTES: &[RouteSpec] = &[
    RouteSpec {
        name: "io_uring from the submitting thread",
        tracepoints: &[SYSCALLS, SUBMIT, POSTED],
        symbols: DIRECT_IO,
        note: "O_DIRECT reads and writes; reaped at the io_uring_enter that returns after posting",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring SQPOLL (SQ thread)",
        tracepoints: &[SUBMIT, POSTED],
        symbols: DIRECT_IO,
        note: "the bundled generator times its pickup and its reap from the CQ ring; a traced command's ends at posting",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring io-wq (worker)",
        tracepoints: &[SYSCALLS, SUBMIT, POSTED, ("io_uring", &["io_uring_queue_async_work"])],
        symbols: DIRECT_IO,
        note: "IOSQE_ASYNC and the kernel's own punts: the io-wq sub-phase is punt -> the worker queued the bio",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "libaio",
        tracepoints: &[SYSCALLS],
        symbols: &["aio_complete_rw"],
        note: "io_submit claims each iocb, io_getevents reaps it",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "sync read/write/pread/preadv2 (and writes)",
        tracepoints: &[SYSCALLS],
        symbols: &["iomap_dio_bio_end_io", "submit_bio_wait_endio", "blkdev_bio_end_io"],
        note: "O_DIRECT I/O inside the syscall, RWF_HIPRI too (buffered calls: the page-cache route)",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "throttled (blk-throttle, cgroup I/O limits)",
        tracepoints: &[("block", &["block_bio_queue"])],
        symbols: DIRECT_IO,
        note: "bios a kworker releases later are followed from any context; the throttled sub-phase is start -> released",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "split bios and merged requests",
        tracepoints: &[("block", &["block_rq_issue"]), ("block", &["block_rq_complete"])],
        symbols: &["bio_chain_endio"],
        note: "every request of an I/O stamps it: device = first issue -> last completion",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "stacked devices (dm-linear, dm-crypt, md raid1)",
        tracepoints: &[("block", &["block_bio_complete"])],
        symbols: &["clone_endio", "raid1_end_read_request"],
        note: "clones on the lower devices are walked back to the top bio; stacked sub-phases: down (dm map, encrypt) and up (decrypt)",
        unsupported: None,
        without_symbols: Some(
            "no device-mapper or md module is loaded here (clone_endio, raid1_end_read_request not in /proc/kallsyms): \
             there is no stacked device to follow; load dm_mod / md_mod (creating a device does) and run doctor again",
        ),
    },
    RouteSpec {
        name: "buffered sync read/write (the page cache)",
        tracepoints: &[SYSCALLS, ("sched", &["sched_switch"])],
        symbols: &[],
        note: "each call split into on CPU, waited and run queue; its readahead counted (readahead \
               tracepoints: 6.10+), hit ratio, requests per read; copy_file_range and sendfile (cp) too",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "fsync, fdatasync, O_SYNC/O_DSYNC writes",
        tracepoints: &[SYSCALLS, ("sched", &["sched_wakeup"])],
        symbols: &[],
        note: "blocked time split by what its disk did meanwhile: its own data writeback, the journal commit (jbd2; of which the commit's flush), a cache flush / FUA; dirty throttling in writes",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "writeback (the flushers, sync calls, reclaim)",
        tracepoints: &[
            ("writeback", &["writeback_dirty_folio"]),
            ("writeback", &["writeback_start"]),
            ("writeback", &["writeback_written"]),
        ],
        symbols: &[],
        note: "the pages the traced processes dirtied, per file: who dirtied them (pid, io cgroup), bytes \
               written back by reason, each request's block and device time",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring buffered I/O (the page cache)",
        tracepoints: &[SYSCALLS, SUBMIT, POSTED],
        symbols: &[],
        note: "io_uring_enter -> posted (inline from the cache, or the wait for a page and the retry, or an io-wq \
               punt) -> reaped; the readahead its submitting calls queue",
        unsupported: None,
        without_symbols: None,
    },
];

/// Whether a route is followed on this kernel, and if not, what is missing.
#[derive(Clone, Debug, Serialize)]
pub struct RouteStatus {
    pub name: &'static str,
    pub followed: bool,
    /// What is missing (tracepoints, symbols), or why it is not followed at all.
    pub missing: Vec<String>,
    pub note: &'static str,
}

/// `has(group, name)` says whether a tracepoint exists; `symbols` are the addresses found in
/// /proc/kallsyms (0: absent or hidden). Pure: doctor and tests feed it.
pub fn routes(has: &dyn Fn(&str, &str) -> bool, symbols: &std::collections::HashMap<String, u64>) -> Vec<RouteStatus> {
    ROUTES
        .iter()
        .map(|r| {
            let mut missing: Vec<String> = r
                .tracepoints
                .iter()
                .filter(|(g, names)| !names.iter().any(|n| has(g, n)))
                .map(|(g, names)| format!("tracepoint {g}:{}", names[0]))
                .collect();
            if !r.symbols.is_empty() && !r.symbols.iter().any(|s| symbols.get(*s).is_some_and(|&a| a != 0)) {
                missing.push(r.without_symbols.map_or_else(
                    || {
                        format!(
                            "kernel symbol {} in /proc/kallsyms (hidden from non-root, or not in this kernel)",
                            r.symbols.join(" / ")
                        )
                    },
                    str::to_owned,
                ));
            }
            if let Some(why) = r.unsupported {
                missing.push(why.to_owned());
            }
            RouteStatus { name: r.name, followed: missing.is_empty(), missing, note: r.note }
        })
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct TracepointStatus {
    /// `group:name` of the variant found, or of the newest variant when none is.
    pub name: String,
    pub present: bool,
    pub used_for: &'static str,
    pub required: bool,
}

pub fn tracepoints(tfs: &Tracefs) -> Vec<TracepointStatus> {
    TRACEPOINTS
        .iter()
        .map(|t| {
            let found = t.names.iter().find(|n| tfs.has_event(t.group, n));
            TracepointStatus {
                name: format!("{}:{}", t.group, found.unwrap_or(&t.names[0])),
                present: found.is_some(),
                used_for: t.used_for,
                required: t.required,
            }
        })
        .collect()
}

/// Program kinds, in the order of `enum doctor_probe` in bpf/doctor.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachKind {
    TpBtf,
    RawTp,
    Tracepoint,
    Fentry,
    Kprobe,
}

impl AttachKind {
    pub const ALL: [AttachKind; 5] =
        [AttachKind::TpBtf, AttachKind::RawTp, AttachKind::Tracepoint, AttachKind::Fentry, AttachKind::Kprobe];

    pub fn name(self) -> &'static str {
        match self {
            AttachKind::TpBtf => "tp_btf",
            AttachKind::RawTp => "raw_tp",
            AttachKind::Tracepoint => "tracepoint",
            AttachKind::Fentry => "fentry",
            AttachKind::Kprobe => "kprobe",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct AttachResult {
    pub kind: AttachKind,
    pub ok: bool,
    /// Why it failed (the libbpf error), when it did.
    pub error: Option<String>,
}

/// Loads and attaches the doctor's program of one kind, alone, counting events of process `tgid`
/// (0 = all), and runs `during` while it is attached. `during` gets a reader of the program's hit
/// counter, so a test can drive I/O and see the program fire.
pub fn with_attached<R>(kind: AttachKind, tgid: u32, during: impl FnOnce(&dyn Fn() -> u64) -> R) -> Result<R, String> {
    let mut storage = MaybeUninit::uninit();
    let mut open = DoctorSkelBuilder::default().open(&mut storage).map_err(|e| format!("open: {e}"))?;
    {
        let p = &mut open.progs;
        p.doctor_tp_btf.set_autoload(kind == AttachKind::TpBtf);
        p.doctor_raw_tp.set_autoload(kind == AttachKind::RawTp);
        p.doctor_tracepoint.set_autoload(kind == AttachKind::Tracepoint);
        p.doctor_fentry.set_autoload(kind == AttachKind::Fentry);
        p.doctor_kprobe.set_autoload(kind == AttachKind::Kprobe);
    }
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.targ_tgid = tgid;
    }
    let skel = open.load().map_err(|e| format!("load: {e}"))?;
    let p = &skel.progs;
    let _link = match kind {
        AttachKind::TpBtf => p.doctor_tp_btf.attach(),
        AttachKind::RawTp => p.doctor_raw_tp.attach(),
        AttachKind::Tracepoint => p.doctor_tracepoint.attach(),
        AttachKind::Fentry => p.doctor_fentry.attach(),
        AttachKind::Kprobe => p.doctor_kprobe.attach(),
    }
    .map_err(|e| format!("attach: {e}"))?;
    let idx = AttachKind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
    let hits = || {
        skel.maps.bss_data.as_deref().map_or(0, |b| {
            // SAFETY: .bss is mmaped and written by the program concurrently; a volatile read
            // of an aligned u64 sees either the old or the new count.
            unsafe { std::ptr::read_volatile(&b.hits[idx]) }
        })
    };
    Ok(during(&hits))
}

pub fn attach_kinds(privileged: bool) -> Vec<AttachResult> {
    AttachKind::ALL
        .iter()
        .map(|&kind| {
            if !privileged {
                return AttachResult {
                    kind,
                    ok: false,
                    error: Some("not tried: needs root (CAP_BPF + CAP_PERFMON)".into()),
                };
            }
            super::log::clear();
            match with_attached(kind, 0, |_| ()) {
                Ok(()) => AttachResult { kind, ok: true, error: None },
                Err(e) => {
                    let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
                    AttachResult { kind, ok: false, error: Some(format!("{e}{why}")) }
                }
            }
        })
        .collect()
}

pub fn btf_present(sys: &Path) -> bool {
    sys.join("kernel/btf/vmlinux").exists()
}
