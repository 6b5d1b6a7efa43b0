//! The one table of hooks: per hook its tracepoint (and the names it had on other kernels), the
//! tp_btf and raw_tp programs that serve it, the feature it belongs to, and what that feature
//! needs of a kernel. `plan(facts, options)` is pure: the kernel's facts (probe::facts) and the
//! trace's options in, the programs to load and the features on or off (each with the kernel's
//! reason) out. `iopath doctor` prints the plan; the session (probe::session) carries it out and,
//! when an optional program still fails to load or attach, turns that program's feature off and
//! goes on (`Plan::disable`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::facts::KernelFacts;
use super::features::AttachKind;
use super::session::{Doorbell, Lean, PageCacheMode};

/// The BPF objects the session loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Obj {
    Phases,
    Counts,
    /// The one-hook tier (bpf/stamps.bpf.c): top and serve's default.
    Stamps,
}

/// What a set of hooks gives the report. A feature is on or off as a whole: its hooks only mean
/// something together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// bio queued, request issued and completed: the block and device phases. Without it there
    /// is no trace.
    BlockCore,
    /// The syscall pair: submission start and reap of io_uring_enter, libaio and sync I/O, and the
    /// page-cache split of buffered calls.
    Syscalls,
    Uring,
    UringAsync,
    Stacked,
    PageCacheExtras,
    Journal,
    Writeback,
    DirtyThrottle,
    PageCacheCount,
    NvmeSplit,
    Doorbell,
    Irqs,
    Softirqs,
    ContextSwitches,
    RunQueue,
    Iommu,
    Dma,
    ProcessTree,
    /// top and serve: every bio's end, where an I/O claimed at its first bio closes.
    BioEnd,
    /// top and serve: the positional sync calls (pread64, pwritev2 ...) timed by fentry/fexit on
    /// their own kernel functions, where fentry works: only those calls pay.
    SyncFentry,
    /// top and serve's one-hook tier: the block and device phases from the request's own stamps
    /// at block_rq_complete.
    Stamps,
    /// ... the hooks its stamps are checked against (a check window), and that time a device
    /// whose stamps are absent or off.
    StampsCheck,
}

impl Feature {
    pub const ALL: [Feature; 23] = [
        Feature::BlockCore,
        Feature::Syscalls,
        Feature::Uring,
        Feature::UringAsync,
        Feature::Stacked,
        Feature::PageCacheExtras,
        Feature::Journal,
        Feature::Writeback,
        Feature::DirtyThrottle,
        Feature::PageCacheCount,
        Feature::NvmeSplit,
        Feature::Doorbell,
        Feature::Irqs,
        Feature::Softirqs,
        Feature::ContextSwitches,
        Feature::RunQueue,
        Feature::Iommu,
        Feature::Dma,
        Feature::ProcessTree,
        Feature::BioEnd,
        Feature::SyncFentry,
        Feature::Stamps,
        Feature::StampsCheck,
    ];

    /// How reports and doctor name it.
    pub fn title(self) -> &'static str {
        match self {
            Feature::BlockCore => "block and device phases",
            Feature::Syscalls => "syscall routes (io_uring_enter, libaio, sync I/O, buffered calls)",
            Feature::Uring => "io_uring requests",
            Feature::UringAsync => "io_uring io-wq sub-phase",
            Feature::Stacked => "stacked devices (dm, md)",
            Feature::PageCacheExtras => "page cache merges, splits and readahead",
            Feature::Journal => "journal commits in sync calls (jbd2)",
            Feature::Writeback => "writeback attribution",
            Feature::DirtyThrottle => "dirty throttling",
            Feature::PageCacheCount => "page cache counting (--pagecache count)",
            Feature::NvmeSplit => "NVMe driver/device split",
            Feature::Doorbell => "NVMe doorbell",
            Feature::Irqs => "interrupts per I/O",
            Feature::Softirqs => "BLOCK softirq time",
            Feature::ContextSwitches => "context switches per I/O",
            Feature::RunQueue => "run-queue wait",
            Feature::Iommu => "IOMMU maps per I/O",
            Feature::Dma => "DMA maps per I/O",
            Feature::ProcessTree => "process tree (forks)",
            Feature::BioEnd => "I/Os closed at their last bio's end (top, serve)",
            Feature::SyncFentry => "sync pread/pwrite timed by fentry (top, serve)",
            Feature::Stamps => "block and device phases from the request's stamps (top, serve: one hook)",
            Feature::StampsCheck => "the stamps checked against hooked times, per device (top, serve)",
        }
    }

    /// What this kernel must offer beyond the hooks' tracepoints, with the phases object built
    /// as `flavour`.
    pub fn needs(self, flavour: Flavour) -> &'static [Need] {
        // The modern build keeps per-thread state in task storage, claims per-I/O slots with
        // cmpxchg and walks merged bios with bpf_loop; the compat build (bpf/compat.bpf.h) needs
        // none of them.
        const CORE: &[Need] = &[
            Need::Bpf(BPF_TASK_BTF, "5.11"),
            Need::Bpf(BPF_TASK_STORAGE, "5.11"),
            Need::Bpf(BPF_ATOMICS, "5.12"),
            Need::Bpf(BPF_LOOP, "5.17"),
            Need::Bpf(BPF_RINGBUF, "5.8"),
        ];
        const CORE_COMPAT: &[Need] = &[Need::Bpf(BPF_RINGBUF, "5.8")];
        const THREAD: &[Need] = &[Need::Bpf(BPF_TASK_STORAGE, "5.11")];
        // 5.10's io_uring_complete(ctx, user_data, res, cflags) names no request: nothing ties a
        // completion to the request its submit hook saw.
        const URING: &[Need] = &[Need::NotBtf(TP_URING_COMPLETE_NO_REQ)];
        const URING_COMPAT: &[Need] = &[Need::Bpf(BPF_RINGBUF, "5.8"), Need::NotBtf(TP_URING_COMPLETE_NO_REQ)];
        let compat = flavour == Flavour::Compat;
        match self {
            Feature::BlockCore | Feature::Stacked if compat => CORE_COMPAT,
            Feature::BlockCore | Feature::Stacked => CORE,
            Feature::Uring | Feature::UringAsync if compat => URING_COMPAT,
            Feature::Uring | Feature::UringAsync => URING,
            Feature::Syscalls
            | Feature::ContextSwitches
            | Feature::RunQueue
            | Feature::PageCacheExtras
            | Feature::DirtyThrottle
            | Feature::SyncFentry
                if !compat =>
            {
                THREAD
            }
            // The dirtied file's name through its dentry: d_u.d_alias before 7.x, d_alias in a
            // union since (core_fixes.bpf.h #16); either layout works.
            Feature::Writeback => &[Need::Btf(&["dentry.d_u", "dentry.d_alias"])],
            Feature::NvmeSplit => &[Need::ModuleBtf],
            _ => &[],
        }
    }
}

/// IOPATH_BPF_BUILD=compat: load the compat build on a kernel that takes the modern one (how the
/// tests run it on the build host).
pub fn force_compat() -> bool {
    std::env::var("IOPATH_BPF_BUILD").is_ok_and(|v| v == "compat")
}

/// Which build of the phases object a kernel loads (bpf/compat.bpf.h): the modern one where the
/// verifier has bpf_loop, BPF atomics, task storage and bpf_get_current_task_btf (5.17+), else
/// the compat one (5.10 to 5.16: bounded loops, claims through a hash, per-thread state in an
/// LRU hash).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    #[default]
    Modern,
    Compat,
}

impl Flavour {
    /// The build this kernel takes (`force_compat`: IOPATH_BPF_BUILD=compat, to test it here).
    pub fn of(k: &KernelFacts, force_compat: bool) -> Flavour {
        let modern = [BPF_TASK_BTF, BPF_TASK_STORAGE, BPF_ATOMICS, BPF_LOOP].iter().all(|b| k.bpf.contains(*b));
        if modern && !force_compat {
            Flavour::Modern
        } else {
            Flavour::Compat
        }
    }

    /// As reports and the kernel table name it (the JSON's value too).
    pub fn key(self) -> &'static str {
        match self {
            Flavour::Modern => "modern",
            Flavour::Compat => "compat",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavour::Modern => "modern",
            Flavour::Compat => "compat (no bpf_loop / BPF atomics / task storage)",
        }
    }
}

/// A kernel fact a feature needs.
#[derive(Clone, Copy, Debug)]
pub enum Need {
    /// A BPF feature (one of the BPF_* names below, probed for real by facts.rs), and the kernel
    /// that brought it.
    Bpf(&'static str, &'static str),
    /// Any one of these BTF facts (BTF_FACTS).
    Btf(&'static [&'static str]),
    /// BTF for modules (tp_btf on a module's tracepoint).
    ModuleBtf,
    /// This BTF fact must be absent (a tracepoint prototype that hands over too little).
    NotBtf(&'static str),
}

pub const BPF_LOOP: &str = "helper bpf_loop";
pub const BPF_TASK_BTF: &str = "helper bpf_get_current_task_btf";
pub const BPF_RINGBUF: &str = "map ringbuf";
pub const BPF_TASK_STORAGE: &str = "map task_storage";
pub const BPF_ATOMICS: &str = "insn atomics (cmpxchg, xchg)";

/// BTF facts recorded per kernel (`struct` or `struct.member`): the layouts the probes read
/// where they changed across kernels (core_fixes.bpf.h).
pub const BTF_FACTS: &[&str] = &[
    "dentry.d_u",
    "dentry.d_alias",
    "io_kiocb.cqe",
    "io_kiocb.cmd",
    "folio._folio_order",
    "folio._flags_1",
    "kiocb.ki_complete",
    "aio_kiocb.ki_res",
    "request.start_time_ns",
    "request.io_start_time_ns",
    "md_io_clone",
    "md_io_acct",
];

/// Tracepoint prototypes that change what a program can read, as BTF facts: the fact, the
/// tracepoint, and its arguments after the tracepoint's own context (probe::facts::tp_args).
pub const TP_BIO_QUEUE_Q: &str = "tp block_bio_queue(request_queue, bio)";
pub const TP_URING_COMPLETE_NO_REQ: &str = "tp io_uring_complete(ctx, user_data, res, cflags)";
pub const TP_FACTS: &[(&str, &str, &[&str])] = &[
    // Before 5.11 the block tracepoints took the request_queue first (core_fixes.bpf.h #3).
    (TP_BIO_QUEUE_Q, "block_bio_queue", &["struct request_queue *", "struct bio *"]),
    (TP_URING_COMPLETE_NO_REQ, "io_uring_complete", &["void *", "int", "int", "int"]),
];

/// The tracepoint groups whose events the facts list.
pub const TRACEPOINT_GROUPS: &[&str] = &[
    "raw_syscalls",
    "io_uring",
    "block",
    "readahead",
    "jbd2",
    "writeback",
    "filemap",
    "nvme",
    "irq",
    "sched",
    "iommu",
    "dma",
];

/// A kernel function the probes compare bi_end_io or ki_complete against, by the names it had.
pub struct Symbol {
    /// The rodata it fills (bpf/run.bpf.h targ_*), or what it is for.
    pub role: &'static str,
    /// In order of preference: the first found is used (a kernel may have both names).
    pub names: &'static [&'static str],
}

pub const OWNER_SYMBOLS: &[Symbol] = &[
    Symbol { role: "iomap_end_io", names: &["iomap_dio_bio_end_io"] },
    Symbol { role: "blkdev_end_io", names: &["blkdev_bio_end_io"] },
    Symbol { role: "blkdev_end_io_async", names: &["blkdev_bio_end_io_async"] },
    // Renamed by 7.2 (core_fixes.bpf.h #17). The old name first: 6.18 has both, and there its
    // bio_wait_end_io is another function (dd's direct reads of a loop device: 6000 of 6000 bios
    // untagged with the new name picked).
    Symbol { role: "bio_wait_end_io", names: &["submit_bio_wait_endio", "bio_wait_end_io"] },
    // Before 5.17 a small sync direct I/O on a block device waited with its own end_io, the
    // waiting task in bi_private (core_fixes.bpf.h #21; dd and psync on 5.10: 19656 of 19656
    // bios untagged without it).
    Symbol { role: "blkdev_simple_end_io", names: &["blkdev_bio_end_io_simple"] },
    Symbol { role: "chain_end_io", names: &["bio_chain_endio"] },
    Symbol { role: "aio_complete", names: &["aio_complete_rw"] },
];

/// The stacked devices' clone end_io handlers (module symbols: present while dm_mod, dm_crypt,
/// raid1 and md_mod are loaded).
pub const STACK_SYMBOLS: &[Symbol] = &[
    Symbol { role: "dm_end_io", names: &["clone_endio"] },
    Symbol { role: "crypt_end_io", names: &["crypt_endio"] },
    Symbol { role: "raid1_read_end_io", names: &["raid1_end_read_request"] },
    Symbol { role: "raid1_write_end_io", names: &["raid1_end_write_request"] },
    // md_end_clone_io since 6.3, md_end_io_acct before (core_fixes.bpf.h #12).
    Symbol { role: "md_clone_end_io", names: &["md_end_clone_io", "md_end_io_acct"] },
];

/// Every symbol name the facts look for.
pub const SYMBOLS: &[&str] = &[
    "iomap_dio_bio_end_io",
    "blkdev_bio_end_io",
    "blkdev_bio_end_io_async",
    "bio_wait_end_io",
    "submit_bio_wait_endio",
    "blkdev_bio_end_io_simple",
    "bio_chain_endio",
    "aio_complete_rw",
    "clone_endio",
    "crypt_endio",
    "raid1_end_read_request",
    "raid1_end_write_request",
    "md_end_clone_io",
    "md_end_io_acct",
    "nvme_queue_rq",
    "__x64_sys_pread64",
    "__x64_sys_pwrite64",
    "__x64_sys_preadv",
    "__x64_sys_pwritev",
    "__x64_sys_preadv2",
    "__x64_sys_pwritev2",
    "__arm64_sys_pread64",
    "__arm64_sys_pwrite64",
    "__arm64_sys_preadv",
    "__arm64_sys_pwritev",
    "__arm64_sys_preadv2",
    "__arm64_sys_pwritev2",
];

/// The name of `sym` this kernel has (None: none of them).
pub fn symbol_name(sym: &Symbol, has: impl Fn(&str) -> bool) -> Option<&'static str> {
    sym.names.iter().copied().find(|n| has(n))
}

/// The address of the symbol of `role` in `syms`, by the first of its names /proc/kallsyms had
/// (`ksyms`, probe::kallsyms::lookup); 0 where none (the probes then never match it).
pub fn symbol_addr(syms: &[Symbol], role: &str, ksyms: &std::collections::HashMap<String, u64>) -> u64 {
    syms.iter()
        .find(|s| s.role == role)
        .and_then(|s| symbol_name(s, |n| ksyms.get(n).is_some_and(|&a| a != 0)))
        .map_or(0, |n| ksyms[n])
}

/// How a program attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    TpBtf,
    RawTp,
    /// A classic tracepoint (tracefs id), attached by group and name.
    Classic,
    Fentry,
    Fexit,
    Kprobe,
}

impl Via {
    fn kind(self) -> AttachKind {
        match self {
            Via::TpBtf => AttachKind::TpBtf,
            Via::RawTp => AttachKind::RawTp,
            Via::Classic => AttachKind::Tracepoint,
            Via::Fentry | Via::Fexit => AttachKind::Fentry,
            Via::Kprobe => AttachKind::Kprobe,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Via::TpBtf => "tp_btf",
            Via::RawTp => "raw_tp",
            Via::Classic => "tracepoint",
            Via::Fentry => "fentry",
            Via::Fexit => "fexit",
            Via::Kprobe => "kprobe",
        }
    }
}

/// One program that can serve a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prog {
    pub obj: Obj,
    pub name: &'static str,
    pub via: Via,
}

const fn btf(obj: Obj, name: &'static str) -> Prog {
    Prog { obj, name, via: Via::TpBtf }
}
const fn raw(obj: Obj, name: &'static str) -> Prog {
    Prog { obj, name, via: Via::RawTp }
}
const fn classic(obj: Obj, name: &'static str) -> Prog {
    Prog { obj, name, via: Via::Classic }
}

/// A name a hook's tracepoint had, and the programs for it (typed first, then the raw twin).
pub struct Variant {
    pub tracepoint: &'static str,
    pub progs: &'static [Prog],
}

/// One hook of the table.
pub struct HookSpec {
    /// `group:name` in reports (the newest name; `group:kind:function` for function probes).
    pub name: &'static str,
    pub group: &'static str,
    /// Newest first; the first this kernel has is used. Empty: a function probe (`progs`).
    pub variants: &'static [Variant],
    /// For function probes (fentry, fexit, kprobe): the programs, all attached together ...
    pub func_progs: &'static [Prog],
    /// ... to the first of these kernel functions /proc/kallsyms has (an architecture's name).
    pub func: &'static [&'static str],
    pub feature: Feature,
    pub used_for: &'static str,
}

const P: Obj = Obj::Phases;
const C: Obj = Obj::Counts;
const S: Obj = Obj::Stamps;

const fn tp(tracepoint: &'static str, progs: &'static [Prog]) -> Variant {
    Variant { tracepoint, progs }
}

macro_rules! hook {
    ($name:expr, $group:expr, $feature:ident, $used:expr, [$($v:expr),+ $(,)?]) => {
        HookSpec {
            name: $name,
            group: $group,
            variants: &[$($v),+],
            func_progs: &[],
            func: &[],
            feature: Feature::$feature,
            used_for: $used,
        }
    };
}

/// A positional sync call's entry and return, on its kernel function (the syscall wrapper, whose
/// one argument is the user's registers). read, write, readv and writev are left out on purpose:
/// every socket and pipe read of every process would pay for them.
macro_rules! sync_fentry {
    ($call:literal, $entry:literal, $exit:literal) => {
        HookSpec {
            name: concat!("fentry:", $call),
            group: "syscalls",
            variants: &[],
            func_progs: &[
                Prog { obj: P, name: $entry, via: Via::Fentry },
                Prog { obj: P, name: $exit, via: Via::Fexit },
            ],
            func: &[concat!("__x64_sys_", $call), concat!("__arm64_sys_", $call)],
            feature: Feature::SyncFentry,
            used_for: concat!("top and serve: ", $call, " timed from its entry to its return (only this call pays)"),
        }
    };
}

pub const HOOKS: &[HookSpec] = &[
    hook!(
        "raw_syscalls:sys_enter",
        "raw_syscalls",
        Syscalls,
        "submission start, reap array (io_uring_enter, io_submit, io_[p]getevents by number)",
        [tp("sys_enter", &[btf(P, "sys_enter"), raw(P, "sys_enter_raw")])]
    ),
    hook!(
        "raw_syscalls:sys_exit",
        "raw_syscalls",
        Syscalls,
        "reap (io_uring_enter, io_[p]getevents return)",
        [tp("sys_exit", &[btf(P, "sys_exit"), raw(P, "sys_exit_raw")])]
    ),
    hook!(
        "io_uring:io_uring_submit_req",
        "io_uring",
        Uring,
        "io_uring request submitted (submit_sqe before 6.4)",
        [
            tp("io_uring_submit_req", &[btf(P, "submit_req"), raw(P, "submit_req_raw")]),
            tp("io_uring_submit_sqe", &[btf(P, "submit_sqe")]),
        ]
    ),
    hook!(
        "io_uring:io_uring_complete",
        "io_uring",
        Uring,
        "io_uring completion posted",
        [tp("io_uring_complete", &[btf(P, "uring_complete"), raw(P, "uring_complete_raw")])]
    ),
    hook!(
        "io_uring:io_uring_queue_async_work",
        "io_uring",
        UringAsync,
        "io_uring request punted to io-wq (the io-wq sub-phase)",
        [tp("io_uring_queue_async_work", &[btf(P, "queue_async_work"), raw(P, "queue_async_work_raw")])]
    ),
    hook!(
        "block:block_bio_queue",
        "block",
        BlockCore,
        "bio enters the block layer",
        [tp("block_bio_queue", &[btf(P, "bio_queue_btf"), raw(P, "bio_queue_raw")])]
    ),
    hook!(
        "block:block_bio_complete",
        "block",
        Stacked,
        "a bio ended: the top bio of a stacked device (where dm or md is loaded)",
        [tp("block_bio_complete", &[btf(P, "bio_complete_btf"), raw(P, "bio_complete_raw")])]
    ),
    hook!(
        "block:block_bio_complete",
        "block",
        BioEnd,
        "top and serve: a bio ended; an I/O claimed at its first bio closes at its last",
        [tp("block_bio_complete", &[btf(P, "bio_end_btf"), raw(P, "bio_end_raw")])]
    ),
    hook!(
        "block:block_split",
        "block",
        BioEnd,
        "top and serve: a bio split to fit its device, its front part in flight as one more bio",
        [tp("block_split", &[btf(P, "bio_split_top_btf"), raw(P, "bio_split_top_raw")])]
    ),
    hook!(
        "block:block_rq_issue",
        "block",
        BlockCore,
        "request issued to the driver",
        [tp("block_rq_issue", &[btf(P, "rq_issue_btf"), raw(P, "rq_issue_raw")])]
    ),
    hook!(
        "block:block_rq_complete",
        "block",
        BlockCore,
        "request completed by the device",
        [tp("block_rq_complete", &[btf(P, "rq_complete_btf"), raw(P, "rq_complete_raw")])]
    ),
    hook!(
        "block:block_rq_complete",
        "block",
        Stamps,
        "top and serve (one hook): a request's block and device phases from its own stamps",
        [tp("block_rq_complete", &[btf(S, "stamps_complete"), raw(S, "stamps_complete_raw")])]
    ),
    hook!(
        "block:block_rq_issue",
        "block",
        StampsCheck,
        "top and serve: issue times the stamps are checked against (a check window), or that time a device",
        [tp("block_rq_issue", &[btf(S, "stamps_issue"), raw(S, "stamps_issue_raw")])]
    ),
    hook!(
        "block:block_bio_queue",
        "block",
        StampsCheck,
        "top and serve: queue times the stamps are checked against (a check window), or that time a device",
        [tp("block_bio_queue", &[btf(S, "stamps_bio_queue"), raw(S, "stamps_bio_queue_raw")])]
    ),
    hook!(
        "block:block_bio_backmerge",
        "block",
        PageCacheExtras,
        "page cache: bios of buffered calls merged into a queued request",
        [tp("block_bio_backmerge", &[btf(P, "bio_backmerge")])]
    ),
    hook!(
        "block:block_bio_frontmerge",
        "block",
        PageCacheExtras,
        "page cache: bios of buffered calls merged into a queued request",
        [tp("block_bio_frontmerge", &[btf(P, "bio_frontmerge")])]
    ),
    hook!(
        "block:block_split",
        "block",
        PageCacheExtras,
        "page cache: bios split to fit the device (one more request each)",
        [tp("block_split", &[btf(P, "bio_split")])]
    ),
    hook!(
        "readahead:page_cache_sync_ra",
        "readahead",
        PageCacheExtras,
        "page cache: readahead a buffered read started on a miss (6.10+)",
        [tp("page_cache_sync_ra", &[btf(P, "ra_sync")])]
    ),
    hook!(
        "readahead:page_cache_async_ra",
        "readahead",
        PageCacheExtras,
        "page cache: readahead started on the marker (6.10+)",
        [tp("page_cache_async_ra", &[btf(P, "ra_async")])]
    ),
    hook!(
        "jbd2:jbd2_start_commit",
        "jbd2",
        Journal,
        "sync calls: time blocked while ext4's journal committed",
        [tp("jbd2_start_commit", &[btf(P, "jbd2_start_commit")])]
    ),
    hook!(
        "jbd2:jbd2_end_commit",
        "jbd2",
        Journal,
        "sync calls: time blocked while ext4's journal committed",
        [tp("jbd2_end_commit", &[btf(P, "jbd2_end_commit")])]
    ),
    hook!(
        "writeback:writeback_dirty_folio",
        "writeback",
        Writeback,
        "writeback: the files the traced processes dirty, and who dirtied them",
        [tp("writeback_dirty_folio", &[btf(P, "wb_dirty_folio")])]
    ),
    hook!(
        "writeback:writeback_start",
        "writeback",
        Writeback,
        "writeback: why a flusher writes (background, periodic, sync ...)",
        [tp("writeback_start", &[btf(P, "wb_start")])]
    ),
    hook!(
        "writeback:writeback_written",
        "writeback",
        Writeback,
        "writeback: why a flusher writes (background, periodic, sync ...)",
        [tp("writeback_written", &[btf(P, "wb_written")])]
    ),
    hook!(
        "writeback:balance_dirty_pages",
        "writeback",
        DirtyThrottle,
        "buffered writes: dirty-throttling pauses",
        [tp("balance_dirty_pages", &[btf(P, "dirty_pause")])]
    ),
    hook!(
        "filemap:mm_filemap_get_pages",
        "filemap",
        PageCacheCount,
        "--pagecache count: buffered reads counted without the syscall hooks",
        [tp("mm_filemap_get_pages", &[btf(P, "pcc_get_pages")])]
    ),
    hook!(
        "filemap:mm_filemap_add_to_page_cache",
        "filemap",
        PageCacheCount,
        "--pagecache count: pages the traced processes added to the cache",
        [tp("mm_filemap_add_to_page_cache", &[btf(P, "pcc_add_folio")])]
    ),
    hook!(
        "nvme:nvme_setup_cmd",
        "nvme",
        NvmeSplit,
        "NVMe command set up (driver/device split)",
        [tp("nvme_setup_cmd", &[btf(P, "nvme_setup_cmd")])]
    ),
    hook!(
        "nvme:nvme_complete_rq",
        "nvme",
        NvmeSplit,
        "NVMe command completed",
        [tp("nvme_complete_rq", &[btf(P, "nvme_complete_rq")])]
    ),
    HookSpec {
        name: "fexit:nvme_queue_rq",
        group: "nvme",
        variants: &[],
        func_progs: &[Prog { obj: P, name: "nvme_queue_rq_exit", via: Via::Fexit }],
        func: &["nvme_queue_rq"],
        feature: Feature::Doorbell,
        used_for: "NVMe doorbell rung (nvme_queue_rq's return)",
    },
    HookSpec {
        name: "kprobe:nvme_queue_rq",
        group: "nvme",
        variants: &[],
        func_progs: &[
            Prog { obj: P, name: "nvme_queue_rq_entry", via: Via::Kprobe },
            Prog { obj: P, name: "nvme_queue_rq_ret", via: Via::Kprobe },
        ],
        func: &["nvme_queue_rq"],
        feature: Feature::Doorbell,
        used_for: "NVMe doorbell rung, as a kprobe pair where fexit is refused",
    },
    sync_fentry!("pread64", "fentry_pread64", "fexit_pread64"),
    sync_fentry!("pwrite64", "fentry_pwrite64", "fexit_pwrite64"),
    sync_fentry!("preadv", "fentry_preadv", "fexit_preadv"),
    sync_fentry!("pwritev", "fentry_pwritev", "fexit_pwritev"),
    sync_fentry!("preadv2", "fentry_preadv2", "fexit_preadv2"),
    sync_fentry!("pwritev2", "fentry_pwritev2", "fexit_pwritev2"),
    hook!(
        "irq:irq_handler_entry",
        "irq",
        Irqs,
        "device interrupts per I/O",
        [tp("irq_handler_entry", &[btf(C, "irq_entry"), raw(C, "irq_entry_raw")])]
    ),
    hook!(
        "irq:softirq_entry",
        "irq",
        Softirqs,
        "BLOCK softirq time",
        [tp("softirq_entry", &[btf(C, "softirq_entry"), raw(C, "softirq_entry_raw")])]
    ),
    hook!(
        "irq:softirq_exit",
        "irq",
        Softirqs,
        "BLOCK softirq time",
        [tp("softirq_exit", &[btf(C, "softirq_exit"), raw(C, "softirq_exit_raw")])]
    ),
    hook!(
        "sched:sched_switch",
        "sched",
        ContextSwitches,
        "context switches per I/O, off-CPU time",
        [tp("sched_switch", &[btf(P, "sched_switch"), raw(P, "sched_switch_raw")])]
    ),
    hook!(
        "sched:sched_wakeup",
        "sched",
        RunQueue,
        "run-queue wait of the traced threads (CPU contention)",
        [tp("sched_wakeup", &[btf(P, "sched_wakeup")])]
    ),
    hook!(
        "sched:sched_process_fork",
        "sched",
        ProcessTree,
        "a traced process forked: its child is traced too",
        [tp("sched_process_fork", &[btf(P, "process_fork")])]
    ),
    hook!(
        "iommu:map",
        "iommu",
        Iommu,
        "IOMMU mappings per I/O",
        [tp("map", &[btf(C, "iommu_map_btf"), classic(C, "iommu_map")])]
    ),
    hook!(
        "iommu:unmap",
        "iommu",
        Iommu,
        "IOMMU unmappings per I/O",
        [tp("unmap", &[btf(C, "iommu_unmap_btf"), classic(C, "iommu_unmap")])]
    ),
    hook!(
        "dma:dma_map",
        "dma",
        Dma,
        "DMA mappings per I/O (dma_map_page before 6.17)",
        [
            tp("dma_map_phys", &[btf(C, "dma_map_btf"), classic(C, "dma_map")]),
            tp("dma_map_page", &[btf(C, "dma_map_btf"), classic(C, "dma_map")]),
        ]
    ),
    hook!(
        "dma:dma_unmap",
        "dma",
        Dma,
        "DMA unmappings per I/O",
        [
            tp("dma_unmap_phys", &[btf(C, "dma_unmap_btf"), classic(C, "dma_unmap")]),
            tp("dma_unmap_page", &[btf(C, "dma_unmap_btf"), classic(C, "dma_unmap")]),
        ]
    ),
];

/// The trace's options that decide which hooks it wants.
#[derive(Clone, Debug, Default)]
pub struct Options {
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
}

/// Why the one-hook tier leaves every other hook out.
pub const ONE_HOOK_ONLY: &str =
    "one-hook tier (top and serve's default): the request's stamps give the block and device phases; \
     --phases attaches the full set (submission, completion, the process)";

/// Why always-on (top and serve without --sync-syscalls) leaves the syscall hooks out.
pub const ALWAYS_ON_NO_SYSCALLS: &str =
    "always-on: no syscall hook (sync and aio I/O are followed from their first bio, \
     submission not timed; --sync-syscalls times it at a cost on every system call of every process)";
/// ... and every hook that fires for more than block I/O and io_uring.
pub const ALWAYS_ON_IO_ONLY: &str =
    "always-on: top and serve hook block I/O and io_uring alone (this fires for work that is not I/O)";

/// What the plan does with one hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Choice {
    /// Load this program (and attach it to `target`, the tracepoint's name on this kernel).
    Load {
        #[serde(skip)]
        progs: Vec<Prog>,
        via: &'static str,
        target: String,
    },
    /// Its feature is off on this kernel (the reason).
    Off { why: String },
    /// Not wanted by these options (the reason): not missing.
    Unused { why: String },
}

#[derive(Clone, Debug, Serialize)]
pub struct PlannedHook {
    pub name: &'static str,
    pub feature: Feature,
    pub used_for: &'static str,
    /// The tracepoint exists on this kernel (under one of its names).
    pub present: bool,
    #[serde(flatten)]
    pub choice: Choice,
}

/// A feature's state: on, off with the kernel's reason, or not wanted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FeatureState {
    pub feature: Feature,
    pub title: &'static str,
    pub on: bool,
    /// Why it is off, or why these options do not use it (None when on).
    pub why: Option<String>,
    /// Not wanted by these options.
    pub unused: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The build of the phases object this kernel loads.
    pub flavour: Flavour,
    /// block_bio_queue takes (request_queue, bio) here (before 5.11): the bio is its second
    /// argument (bpf/run.bpf.h targ_bio_queue_q).
    pub bio_queue_q: bool,
    pub hooks: Vec<PlannedHook>,
    pub features: Vec<FeatureState>,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// Why a need is not met on this kernel (None: met).
fn unmet(need: &Need, k: &KernelFacts) -> Option<String> {
    match *need {
        Need::Bpf(what, since) => (!k.bpf.contains(what)).then(|| format!("no {what} ({since}+) in this kernel's BPF")),
        Need::Btf(any) => {
            (!any.iter().any(|f| k.btf.contains(*f))).then(|| format!("kernel BTF has none of {}", any.join(", ")))
        }
        Need::ModuleBtf => {
            (!k.module_btf).then(|| "kernel modules carry no BTF here (no /sys/kernel/btf/<module>)".into())
        }
        Need::NotBtf(fact) => {
            k.btf.contains(fact).then(|| format!("this kernel's {} hands over no request", &fact[3..]))
        }
    }
}

/// Why these options leave `h` out (None: wanted).
fn unused_why(h: &HookSpec, o: &Options, k: &KernelFacts) -> Option<String> {
    let f = h.feature;
    if o.skip.iter().any(|s| !s.is_empty() && h.name.contains(s.as_str())) {
        return Some("--skip-hooks".into());
    }
    let count = o.pagecache == PageCacheMode::Count;
    let always_on = o.top && !o.sync_syscalls;
    let stamps = matches!(f, Feature::Stamps | Feature::StampsCheck);
    if o.one_hook != stamps {
        return Some(if o.one_hook {
            ONE_HOOK_ONLY.into()
        } else {
            "only top and serve's one-hook tier (their default without --phases)".into()
        });
    }
    match f {
        Feature::BioEnd if !o.top => {
            return Some("only for top and serve (a trace closes each I/O at its route's end)".into())
        }
        Feature::Stacked if o.top => {
            return Some("top and serve end every bio in the bio-end hook (stacked devices' too)".into())
        }
        Feature::Syscalls if always_on => return Some(ALWAYS_ON_NO_SYSCALLS.into()),
        Feature::SyncFentry if !always_on => {
            return Some(
                "only top and serve without --sync-syscalls (the syscall pair times every sync call there)".into(),
            )
        }
        Feature::ContextSwitches
        | Feature::RunQueue
        | Feature::Softirqs
        | Feature::Irqs
        | Feature::PageCacheExtras
        | Feature::Journal
        | Feature::Writeback
        | Feature::DirtyThrottle
        | Feature::NvmeSplit
        | Feature::Doorbell
        | Feature::Iommu
        | Feature::Dma
        | Feature::ProcessTree
            if always_on =>
        {
            return Some(ALWAYS_ON_IO_ONLY.into())
        }
        Feature::PageCacheCount if !count => return Some("only with --pagecache count".into()),
        Feature::Syscalls if count => return Some("--pagecache count attaches no syscall hook".into()),
        Feature::Syscalls if o.lean == Lean::Uring => return Some("--lean io_uring attaches no syscall hook".into()),
        Feature::Syscalls if o.lean == Lean::Aio && h.name.ends_with("sys_enter") => {
            return Some("--lean aio claims each request at its first bio".into())
        }
        Feature::ContextSwitches | Feature::RunQueue | Feature::Softirqs if o.lean != Lean::Off => {
            return Some("--lean leaves the scheduler and softirq hooks out".into())
        }
        Feature::ProcessTree if !o.tree => return Some("only when a process tree is traced".into()),
        Feature::Stacked if !STACK_SYMBOLS.iter().any(|s| symbol_name(s, |n| k.symbols.contains(n)).is_some()) => {
            return Some("no device-mapper or md module is loaded (no clone end_io in /proc/kallsyms)".into());
        }
        Feature::Doorbell => {
            let want = match o.doorbell {
                Doorbell::Off => return Some("--doorbell off".into()),
                Doorbell::Kprobe => Via::Kprobe,
                // fexit on a module's function needs that module's BTF (5.10 has none: libbpf
                // found no BTF type for nvme_queue_rq there, -ESRCH).
                Doorbell::Auto
                    if (k.attach_ok(AttachKind::Fentry) && k.module_btf) || !k.attach_ok(AttachKind::Kprobe) =>
                {
                    Via::Fexit
                }
                Doorbell::Auto => Via::Kprobe,
            };
            if h.func_progs.first().is_some_and(|p| p.via != want) {
                return Some(format!("the doorbell is timed by {} here", want.name()));
            }
        }
        _ => {}
    }
    None
}

/// The program for a variant: typed (tp_btf) unless raw_tp is asked for or tp_btf does not
/// work here, then its raw twin (raw_tp, or a classic tracepoint); a variant with one kind only
/// uses that one where it works.
fn pick(v: &Variant, o: &Options, k: &KernelFacts) -> Result<Prog, String> {
    let works = |p: &Prog| k.attach_ok(p.via.kind());
    let typed = v.progs.iter().find(|p| p.via == Via::TpBtf);
    let untyped = v.progs.iter().find(|p| p.via != Via::TpBtf);
    let order = if o.raw_tp { [untyped, typed] } else { [typed, untyped] };
    order.into_iter().flatten().find(|p| works(p)).copied().ok_or_else(|| {
        let kinds: Vec<_> = v.progs.iter().map(|p| p.via.name()).collect();
        let why = v.progs.first().and_then(|p| k.attach_error(p.via.kind())).unwrap_or_default();
        format!("{} programs do not attach here ({why})", kinds.join(" / "))
    })
}

/// The plan for this kernel and these options. Pure.
pub fn plan(k: &KernelFacts, o: &Options) -> Plan {
    let mut hooks = Vec::new();
    let mut off: BTreeMap<Feature, String> = BTreeMap::new();
    let flavour = Flavour::of(k, o.force_compat);
    for f in Feature::ALL {
        let unmet: Vec<String> = f.needs(flavour).iter().filter_map(|n| unmet(n, k)).collect();
        if !unmet.is_empty() {
            off.insert(f, unmet.join("; "));
        }
    }
    if flavour == Flavour::Compat {
        // The compat build keeps each thread's state in a hash entry only an exit hook frees.
        off.entry(Feature::SyncFentry).or_insert_with(|| {
            "the compat build keeps thread state no exit hook frees here (task storage: 5.11+)".into()
        });
    }
    for h in HOOKS {
        let variant = h.variants.iter().find(|v| k.has_tracepoint(h.group, v.tracepoint));
        let present = h.variants.is_empty() || variant.is_some();
        let choice = if let Some(why) = unused_why(h, o, k) {
            Choice::Unused { why }
        } else if h.variants.is_empty() {
            match h.func_progs.iter().find(|p| !k.attach_ok(p.via.kind())) {
                Some(p) => Choice::Off {
                    why: format!(
                        "{} programs do not attach here ({})",
                        p.via.name(),
                        k.attach_error(p.via.kind()).unwrap_or_default()
                    ),
                },
                None if h.feature == Feature::Doorbell
                    && h.func_progs.iter().any(|p| p.via == Via::Fexit)
                    && !k.module_btf =>
                {
                    Choice::Off {
                        why: "fexit on nvme_queue_rq needs the nvme module's BTF (no /sys/kernel/btf/<module>)".into(),
                    }
                }
                None => match h.func.iter().find(|f| k.symbols.contains(**f)) {
                    None => Choice::Off {
                        why: format!(
                            "{} is not in /proc/kallsyms{}",
                            h.func.join(" / "),
                            if h.feature == Feature::Doorbell { " (no NVMe driver loaded)" } else { "" }
                        ),
                    },
                    Some(f) => Choice::Load {
                        progs: h.func_progs.to_vec(),
                        via: h.func_progs[0].via.name(),
                        target: (*f).into(),
                    },
                },
            }
        } else {
            match variant {
                None => Choice::Off {
                    why: format!(
                        "tracepoint {}:{} is not on this kernel",
                        h.group,
                        h.variants.iter().map(|v| v.tracepoint).collect::<Vec<_>>().join(" / ")
                    ),
                },
                Some(v) => match pick(v, o, k) {
                    Ok(p) => Choice::Load { progs: vec![p], via: p.via.name(), target: v.tracepoint.into() },
                    Err(why) => Choice::Off { why },
                },
            }
        };
        if let Choice::Off { why } = &choice {
            off.entry(h.feature).or_insert_with(|| why.clone());
        }
        hooks.push(PlannedHook { name: h.name, feature: h.feature, used_for: h.used_for, present, choice });
    }
    let mut p = Plan { flavour, bio_queue_q: k.btf.contains(TP_BIO_QUEUE_Q), hooks, features: Vec::new() };
    for (f, why) in off {
        p.disable(f, &why);
    }
    p.refresh_features();
    p
}

impl Plan {
    /// Turns `feature` off with the reason (a load or attach failure the facts did not predict).
    pub fn disable(&mut self, feature: Feature, why: &str) {
        for h in self.hooks.iter_mut().filter(|h| h.feature == feature) {
            if matches!(h.choice, Choice::Load { .. }) {
                h.choice = Choice::Off { why: why.to_owned() };
            }
        }
        self.refresh_features();
        if let Some(s) = self.features.iter_mut().find(|s| s.feature == feature && !s.unused) {
            s.on = false;
            s.why = Some(why.to_owned());
        }
    }

    fn refresh_features(&mut self) {
        let old = std::mem::take(&mut self.features);
        for f in Feature::ALL {
            let mine: Vec<&PlannedHook> = self.hooks.iter().filter(|h| h.feature == f).collect();
            let unused = mine.iter().all(|h| matches!(h.choice, Choice::Unused { .. }));
            let why = mine.iter().find_map(|h| match &h.choice {
                Choice::Off { why } => Some(why.clone()),
                _ => None,
            });
            let why = why.or_else(|| old.iter().find(|s| s.feature == f && !s.unused).and_then(|s| s.why.clone()));
            let unused_why = mine.iter().find_map(|h| match &h.choice {
                Choice::Unused { why } => Some(why.clone()),
                _ => None,
            });
            let (on, why) = if unused { (false, unused_why) } else { (why.is_none(), why) };
            self.features.push(FeatureState { feature: f, title: f.title(), on, why, unused });
        }
    }

    pub fn is_on(&self, f: Feature) -> bool {
        self.features.iter().any(|s| s.feature == f && s.on)
    }

    pub fn state(&self, f: Feature) -> &FeatureState {
        self.features.iter().find(|s| s.feature == f).expect("every feature has a state")
    }

    /// Why the trace cannot run at all (the block core is off: the one hook's, in the one-hook
    /// tier), else None.
    pub fn fatal(&self) -> Option<String> {
        let core = if self.state(Feature::Stamps).unused { Feature::BlockCore } else { Feature::Stamps };
        let s = self.state(core);
        s.why.as_ref().map(|w| format!("the {} cannot be traced on this kernel: {w}", s.title))
    }

    /// Every program of `obj` to load, with the tracepoint name to attach it to.
    pub fn programs(&self, obj: Obj) -> Vec<(&'static str, &'static str, String)> {
        let mut out = Vec::new();
        for h in &self.hooks {
            if let Choice::Load { progs, target, .. } = &h.choice {
                for p in progs.iter().filter(|p| p.obj == obj) {
                    out.push((h.name, p.name, target.clone()));
                }
            }
        }
        out
    }

    /// The feature a program serves (a load failure names the program).
    pub fn feature_of_prog(&self, prog: &str) -> Option<Feature> {
        HOOKS
            .iter()
            .find(|h| h.func_progs.iter().chain(h.variants.iter().flat_map(|v| v.progs)).any(|p| p.name == prog))
            .map(|h| h.feature)
    }

    /// The features that are off on this kernel, each with its reason, for reports.
    pub fn off(&self) -> Vec<(&'static str, String)> {
        self.features
            .iter()
            .filter(|s| !s.on && !s.unused)
            .map(|s| (s.title, s.why.clone().unwrap_or_default()))
            .collect()
    }
}

/// What a feature needs, in words: its tracepoints and the kernel facts of `Feature::needs`.
pub fn needs_text(f: Feature) -> String {
    let mut parts: Vec<String> = HOOKS
        .iter()
        .filter(|h| h.feature == f)
        .map(|h| match h.variants.len() {
            0 => h.name.to_owned(),
            _ => format!("{}:{}", h.group, h.variants.iter().map(|v| v.tracepoint).collect::<Vec<_>>().join("|")),
        })
        .collect();
    parts.dedup();
    // The least a kernel needs: the compat build's (the BPF build row says which build needs what).
    for n in f.needs(Flavour::Compat) {
        parts.push(match n {
            Need::Bpf(what, since) => format!("{} ({since}+)", what.split(' ').nth(1).unwrap_or(what)),
            Need::Btf(any) => format!("BTF {}", any.join(" or ")),
            Need::ModuleBtf => "module BTF".into(),
            Need::NotBtf(fact) => format!("not {}", &fact[3..]),
        });
    }
    parts.join(", ")
}

/// docs/kernels.md's kernel table: each feature of the default trace on each recorded kernel, from
/// the same plan doctor and the session use (`kernels`: (label, facts)). Pure.
pub fn kernel_table(kernels: &[(String, KernelFacts)]) -> String {
    let plans: Vec<Plan> = kernels.iter().map(|(_, k)| plan(k, &Options::default())).collect();
    // A cell says yes, or no and the first reason in short.
    let short = |why: &str| {
        let first = why.split("; ").count();
        let why = why
            .replace(" in this kernel's BPF", "")
            .replace("tracepoint ", "")
            .replace(" is not on this kernel", " absent");
        if first > 1 {
            format!("no: {} (and {} more)", why.split("; ").next().unwrap_or(""), first - 1)
        } else {
            format!("no: {why}")
        }
    };
    let mut out = format!(
        "| feature | needs | {} |\n|---|---|{}\n",
        kernels.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(" | "),
        "---|".repeat(kernels.len())
    );
    // Which build of the phases object each kernel loads (bpf/compat.bpf.h).
    let builds: Vec<&str> = plans.iter().map(|p| p.flavour.key()).collect();
    out += &format!(
        "| BPF build | modern: bpf_get_current_task_btf, task_storage (5.11+), atomics (5.12+), bpf_loop (5.17+); else compat | {} |\n",
        builds.join(" | ")
    );
    for f in Feature::ALL {
        let cells: Vec<String> = plans
            .iter()
            .map(|p| {
                let s = p.state(f);
                match (s.on, s.unused, &s.why) {
                    _ if f != Feature::BlockCore && p.fatal().is_some() => "(no trace)".to_owned(),
                    (true, _, _) => "yes".to_owned(),
                    (false, true, _) => "(not in the default trace)".to_owned(),
                    (false, false, Some(why)) => short(why).replace('|', "/"),
                    (false, false, None) => "no".to_owned(),
                }
            })
            .collect();
        if cells.iter().all(|c| c.starts_with("(no")) {
            continue;
        }
        out += &format!("| {} | {} | {} |\n", f.title(), needs_text(f).replace('|', " or "), cells.join(" | "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_asked_about_by_name_is_a_row_of_the_table() {
        for name in crate::hook_names::ALL {
            assert!(HOOKS.iter().any(|h| h.name == name), "{name} is no hook of the table");
        }
    }

    fn facts(tps: &[&str], bpf: &[&str]) -> KernelFacts {
        let mut k = KernelFacts { schema: super::super::facts::SCHEMA.into(), ..Default::default() };
        k.tracepoints = tps.iter().map(|s| s.to_string()).collect();
        k.bpf = bpf.iter().map(|s| s.to_string()).collect();
        for kind in ["tp_btf", "raw_tp", "tracepoint"] {
            k.attach.insert(kind.into(), None);
        }
        k.attach.insert("fentry".into(), Some("-EPERM".into()));
        k.attach.insert("kprobe".into(), Some("no kprobes".into()));
        k.btf.insert("dentry.d_alias".into());
        k
    }
    const ALL_BPF: &[&str] = &[BPF_LOOP, BPF_TASK_BTF, BPF_RINGBUF, BPF_TASK_STORAGE, BPF_ATOMICS];
    const BLOCK: &[&str] = &["block:block_bio_queue", "block:block_rq_issue", "block:block_rq_complete"];

    /// A kernel with every tracepoint of the table (under every name) and every BPF feature.
    fn every_tracepoint() -> KernelFacts {
        let every: Vec<String> = HOOKS
            .iter()
            .flat_map(|h| h.variants.iter().map(move |v| format!("{}:{}", h.group, v.tracepoint)))
            .collect();
        facts(&every.iter().map(String::as_str).collect::<Vec<_>>(), ALL_BPF)
    }

    #[test]
    fn a_missing_optional_tracepoint_turns_its_feature_off_alone() {
        let k = facts(&[BLOCK, &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"]].concat(), ALL_BPF);
        let p = plan(&k, &Options::default());
        assert!(p.fatal().is_none());
        assert!(p.is_on(Feature::BlockCore) && p.is_on(Feature::Syscalls));
        let u = p.state(Feature::Uring);
        assert!(!u.on && u.why.as_deref().unwrap().contains("io_uring_submit_req / io_uring_submit_sqe"), "{u:?}");
        assert!(p.state(Feature::Stacked).unused, "no dm/md module: not wanted, not missing");
    }

    #[test]
    fn always_on_attaches_block_io_and_io_uring_alone() {
        let k = every_tracepoint();
        let loaded = |p: &Plan| -> Vec<&str> {
            let mut v: Vec<&str> =
                p.hooks.iter().filter(|h| matches!(h.choice, Choice::Load { .. })).map(|h| h.name).collect();
            v.dedup();
            v
        };
        let p = plan(&k, &Options { top: true, ..Default::default() });
        assert_eq!(
            loaded(&p),
            [
                "io_uring:io_uring_submit_req",
                "io_uring:io_uring_complete",
                "io_uring:io_uring_queue_async_work",
                "block:block_bio_queue",
                "block:block_bio_complete",
                "block:block_split",
                "block:block_rq_issue",
                "block:block_rq_complete",
            ]
        );
        let s = p.state(Feature::Syscalls);
        assert!(s.unused && s.why.as_deref().unwrap().contains("--sync-syscalls"), "{s:?}");
        // --sync-syscalls: the syscall pair again, and the bio-end hooks stay.
        let p = plan(&k, &Options { top: true, sync_syscalls: true, ..Default::default() });
        assert!(p.is_on(Feature::Syscalls) && p.is_on(Feature::BioEnd));
        // A trace never closes I/Os at their bios' end.
        let p = plan(&k, &Options::default());
        assert!(p.state(Feature::BioEnd).unused && p.is_on(Feature::Syscalls));
    }

    #[test]
    fn always_on_times_positional_sync_calls_by_fentry_where_it_attaches() {
        let mut k = every_tracepoint();
        let top = Options { top: true, ..Default::default() };
        // This build host: fentry refused, said with the kernel's answer.
        let s = plan(&k, &top).state(Feature::SyncFentry).clone();
        assert!(!s.on && !s.unused && s.why.as_deref().unwrap().contains("-EPERM"), "{s:?}");
        // fentry attaches, the wrappers are there: six pairs on the x86 names, nothing else.
        k.attach.insert("fentry".into(), None);
        for c in ["pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2"] {
            k.symbols.insert(format!("__x64_sys_{c}"));
        }
        let p = plan(&k, &top);
        assert!(p.is_on(Feature::SyncFentry));
        let targets: Vec<(&str, Vec<&str>, String)> = p
            .hooks
            .iter()
            .filter_map(|h| match &h.choice {
                Choice::Load { progs, target, .. } if h.feature == Feature::SyncFentry => {
                    Some((h.name, progs.iter().map(|p| p.name).collect(), target.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(targets.len(), 6, "{targets:?}");
        assert_eq!(targets[0], ("fentry:pread64", vec!["fentry_pread64", "fexit_pread64"], "__x64_sys_pread64".into()));
        // An arm64 kernel's names.
        k.symbols = k.symbols.iter().map(|s| s.replace("__x64_", "__arm64_")).collect();
        let p = plan(&k, &top);
        let h = p.hooks.iter().find(|h| h.name == "fentry:pread64").unwrap();
        assert!(matches!(&h.choice, Choice::Load { target, .. } if target == "__arm64_sys_pread64"), "{h:?}");
        // One call's function missing: the feature is off as a whole, naming it.
        k.symbols.remove("__arm64_sys_pwrite64");
        let s = plan(&k, &top).state(Feature::SyncFentry).clone();
        assert!(!s.on && s.why.as_deref().unwrap().contains("__arm64_sys_pwrite64 is not in /proc/kallsyms"), "{s:?}");
        k.symbols.insert("__arm64_sys_pwrite64".into());
        // A trace and --sync-syscalls time every sync call through the syscall pair instead; the
        // compat build has no exit hook to free a thread's state.
        for o in [Options::default(), Options { top: true, sync_syscalls: true, ..Default::default() }] {
            assert!(plan(&k, &o).state(Feature::SyncFentry).unused);
        }
        let s = plan(&k, &Options { force_compat: true, ..top }).state(Feature::SyncFentry).clone();
        assert!(!s.on && s.why.as_deref().unwrap().contains("compat"), "{s:?}");
    }

    #[test]
    fn the_older_name_of_a_tracepoint_is_used_where_the_newer_is_absent() {
        let k = facts(&[BLOCK, &["io_uring:io_uring_submit_sqe", "io_uring:io_uring_complete"]].concat(), ALL_BPF);
        let p = plan(&k, &Options::default());
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_submit_req").unwrap();
        assert!(
            matches!(&h.choice, Choice::Load { target, via: "tp_btf", .. } if target == "io_uring_submit_sqe"),
            "{h:?}"
        );
        // --raw-tp: submit_sqe has no raw twin, its typed program serves.
        let p = plan(&k, &Options { raw_tp: true, ..Default::default() });
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_submit_req").unwrap();
        assert!(matches!(&h.choice, Choice::Load { via: "tp_btf", .. }), "{h:?}");
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_complete").unwrap();
        assert!(matches!(&h.choice, Choice::Load { via: "raw_tp", .. }), "{h:?}");
    }

    #[test]
    fn without_bpf_loop_the_compat_build_is_planned_and_without_a_ring_buffer_nothing() {
        let k = facts(BLOCK, &[BPF_TASK_BTF, BPF_RINGBUF, BPF_ATOMICS, BPF_TASK_STORAGE]);
        let p = plan(&k, &Options::default());
        assert_eq!(p.flavour, Flavour::Compat);
        assert!(p.fatal().is_none(), "{:?}", p.fatal());
        let k = facts(BLOCK, ALL_BPF);
        assert_eq!(plan(&k, &Options::default()).flavour, Flavour::Modern);
        // The compat build still needs the ring buffer (5.8): below it, no trace, and it says so.
        let k = facts(BLOCK, &[]);
        let why = plan(&k, &Options::default()).fatal().expect("no ring buffer: no trace");
        assert!(why.contains("ringbuf (5.8+)"), "{why}");
    }

    #[test]
    fn a_disabled_feature_keeps_its_reason_and_unloads_its_programs() {
        let k = facts(
            &[BLOCK, &["writeback:writeback_dirty_folio", "writeback:writeback_start", "writeback:writeback_written"]]
                .concat(),
            ALL_BPF,
        );
        let mut p = plan(&k, &Options::default());
        assert!(p.is_on(Feature::Writeback));
        assert_eq!(p.feature_of_prog("wb_start"), Some(Feature::Writeback));
        p.disable(Feature::Writeback, "relocation failed");
        assert!(!p.is_on(Feature::Writeback));
        assert_eq!(p.state(Feature::Writeback).why.as_deref(), Some("relocation failed"));
        assert!(!p.programs(Obj::Phases).iter().any(|(_, prog, _)| prog.starts_with("wb_")));
        assert!(p.is_on(Feature::BlockCore));
    }

    #[test]
    fn lean_and_pagecache_count_leave_hooks_out_as_unused_not_missing() {
        let k = facts(
            &[BLOCK, &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit", "sched:sched_switch"]].concat(),
            ALL_BPF,
        );
        let p = plan(&k, &Options { lean: Lean::Uring, ..Default::default() });
        assert!(p.state(Feature::Syscalls).unused && p.state(Feature::ContextSwitches).unused);
        assert!(p.off().iter().all(|(t, _)| !t.contains("syscall")), "{:?}", p.off());
        let p = plan(&k, &Options { lean: Lean::Aio, ..Default::default() });
        let names: Vec<_> = p.programs(Obj::Phases).into_iter().map(|(_, n, _)| n).collect();
        assert!(names.contains(&"sys_exit") && !names.contains(&"sys_enter"), "{names:?}");
    }

    #[test]
    fn the_doorbell_falls_back_to_kprobes_where_fexit_is_refused() {
        let mut k = facts(&[BLOCK, &["nvme:nvme_setup_cmd", "nvme:nvme_complete_rq"]].concat(), ALL_BPF);
        k.symbols.insert("nvme_queue_rq".into());
        k.module_btf = true;
        k.attach.insert("kprobe".into(), None);
        let p = plan(&k, &Options::default());
        let load: Vec<_> = p.programs(Obj::Phases).into_iter().map(|(_, n, _)| n).collect();
        assert!(load.contains(&"nvme_queue_rq_entry") && !load.contains(&"nvme_queue_rq_exit"), "{load:?}");
        assert!(p.is_on(Feature::NvmeSplit) && p.is_on(Feature::Doorbell));
        k.module_btf = false;
        let p = plan(&k, &Options::default());
        assert!(
            p.state(Feature::NvmeSplit).why.as_deref().unwrap().contains("no BTF"),
            "{:?}",
            p.state(Feature::NvmeSplit)
        );
    }
}
