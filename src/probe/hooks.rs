//! The one table of hooks: per hook its tracepoint (and the names it had on other kernels), the
//! tp_btf and raw_tp programs that serve it, the feature it belongs to, and what that feature
//! needs of a kernel; the kernel symbols and facts the probes read. Pure data, importing nothing
//! of probe/: the plan (probe::plan) decides from it which hooks a kernel and a trace get, doctor
//! and the session both read it.

use std::fmt;

use serde::Serialize;

/// The BPF objects the session loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Obj {
    Phases,
    Counts,
    /// The one-hook tier (bpf/stamps.bpf.c): top and serve's default.
    Stamps,
    /// The flamegraphs' sampler (bpf/stacks.bpf.c): on-CPU and off-CPU stacks.
    Stacks,
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
    /// Flamegraphs (--flamegraph): stacks sampled on every CPU's software cpu-clock.
    OnCpuStacks,
    /// Flamegraphs (--offcpu): the time each traced thread spent switched out, by stack.
    OffCpuStacks,
    /// A file system's end-io work inside completion (btrfs verifies a read's checksums in its
    /// end-io workers): the workqueue's start and end of that work, where the target is btrfs.
    FsEndio,
}

impl Feature {
    pub const ALL: [Feature; 26] = [
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
        Feature::OnCpuStacks,
        Feature::OffCpuStacks,
        Feature::FsEndio,
    ];

    /// How reports and doctor name it.
    pub fn title(self) -> &'static str {
        match self {
            Feature::BlockCore => "block and device phases",
            Feature::Syscalls => "syscall routes (io_uring_enter, libaio, sync I/O, buffered calls)",
            Feature::Uring => "io_uring requests",
            Feature::UringAsync => "io_uring io-wq sub-phase",
            Feature::Stacked => "stacked and bio-based devices (dm, md; zram, brd, pmem)",
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
            Feature::OnCpuStacks => "on-CPU stacks for flamegraphs (cpu-clock samples)",
            Feature::OffCpuStacks => "off-CPU stacks for flamegraphs (sched_switch)",
            Feature::FsEndio => "file systems' end-io work in completion (btrfs checksums)",
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

/// Whether the table's hook of this name is a tracepoint's (not a function probe's).
pub fn is_tracepoint(name: &str) -> bool {
    HOOKS.iter().any(|h| h.name == name && !h.variants.is_empty())
}

/// The tracepoint groups whose events the facts list: every group of the table's tracepoint hooks.
pub fn tracepoint_groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = HOOKS.iter().filter(|h| !h.variants.is_empty()).map(|h| h.group).collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

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

/// btrfs's bio end_io functions and its direct I/O's btrfs_bio end_io (module symbols: present
/// while btrfs is loaded; core_fixes.bpf.h #23).
pub const FS_SYMBOLS: &[Symbol] = &[
    Symbol { role: "btrfs_simple_end_io", names: &["btrfs_simple_end_io"] },
    Symbol { role: "btrfs_orig_write_end_io", names: &["btrfs_orig_write_end_io"] },
    Symbol { role: "btrfs_clone_write_end_io", names: &["btrfs_clone_write_end_io"] },
    Symbol { role: "btrfs_dio_end_io", names: &["btrfs_dio_end_io"] },
    // 6.1: btrfs's clone of iomap's bio.
    Symbol { role: "btrfs_end_dio_bio", names: &["btrfs_end_dio_bio"] },
    // The end-io work that verifies a read's checksums: renamed by 6.18.
    Symbol { role: "btrfs_end_io_work", names: &["simple_end_io_work", "btrfs_end_bio_work"] },
];

/// Every kernel symbol the facts look for: the bio owners' and stacked devices' end_io functions
/// (their roles' every name) and the function probes' targets, all from the table.
pub fn symbols() -> Vec<&'static str> {
    let roles = OWNER_SYMBOLS.iter().chain(STACK_SYMBOLS).chain(FS_SYMBOLS).flat_map(|s| s.names.iter().copied());
    let funcs = HOOKS.iter().flat_map(|h| h.func.iter().copied());
    let mut names: Vec<&'static str> = roles.chain(funcs).collect();
    names.sort_unstable();
    names.dedup();
    names
}

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
    /// A perf event's overflow: one software cpu-clock event per CPU, at the sampling rate.
    PerfEvent,
}

impl Via {
    pub fn kind(self) -> AttachKind {
        match self {
            Via::TpBtf => AttachKind::TpBtf,
            Via::RawTp => AttachKind::RawTp,
            Via::Classic => AttachKind::Tracepoint,
            Via::Fentry | Via::Fexit => AttachKind::Fentry,
            Via::Kprobe => AttachKind::Kprobe,
            Via::PerfEvent => AttachKind::PerfEvent,
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
            Via::PerfEvent => "perf_event",
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
    /// Empty for a perf event's program: it attaches to the event named after the group.
    pub func: &'static [&'static str],
    pub feature: Feature,
    pub used_for: &'static str,
}

const P: Obj = Obj::Phases;
const C: Obj = Obj::Counts;
const S: Obj = Obj::Stamps;
const K: Obj = Obj::Stacks;

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
        "a bio ended: a stacked device's top bio (dm, md), a bio-based device's (zram, brd, pmem); a request's bios never fire it",
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
        "workqueue:workqueue_execute_start",
        "workqueue",
        FsEndio,
        "btrfs's end-io worker starts on a read (its checksums; every other work item returns at once)",
        [tp("workqueue_execute_start", &[btf(P, "fs_endio_start_btf"), raw(P, "fs_endio_start_raw")])]
    ),
    hook!(
        "workqueue:workqueue_execute_end",
        "workqueue",
        FsEndio,
        "... and returns: the read's checksums verified and the I/O ended",
        [tp("workqueue_execute_end", &[raw(P, "fs_endio_end_raw")])]
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
    HookSpec {
        name: "perf_event:cpu-clock",
        group: "perf_event",
        variants: &[],
        func_progs: &[Prog { obj: K, name: "oncpu", via: Via::PerfEvent }],
        func: &[],
        feature: Feature::OnCpuStacks,
        used_for: "flamegraphs: a stack sampled on every CPU's cpu-clock at the sampling rate",
    },
    hook!(
        "sched:sched_switch",
        "sched",
        OffCpuStacks,
        "flamegraphs: the stack a traced thread left the CPU with, and for how long",
        [tp("sched_switch", &[btf(K, "offcpu_switch")])]
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

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
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

/// Program kinds, in the order of `enum doctor_probe` in bpf/doctor.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachKind {
    TpBtf,
    RawTp,
    Tracepoint,
    Fentry,
    Kprobe,
    PerfEvent,
}

impl AttachKind {
    pub const ALL: [AttachKind; 6] = [
        AttachKind::TpBtf,
        AttachKind::RawTp,
        AttachKind::Tracepoint,
        AttachKind::Fentry,
        AttachKind::Kprobe,
        AttachKind::PerfEvent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AttachKind::TpBtf => "tp_btf",
            AttachKind::RawTp => "raw_tp",
            AttachKind::Tracepoint => "tracepoint",
            AttachKind::Fentry => "fentry",
            AttachKind::Kprobe => "kprobe",
            AttachKind::PerfEvent => "perf_event",
        }
    }
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

    #[test]
    fn tracepoint_groups_and_symbols_come_from_the_table() {
        // What the hand-kept lists held before they were derived: the same, nothing lost.
        let mut groups = vec![
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
            "workqueue",
        ];
        groups.sort_unstable();
        assert_eq!(tracepoint_groups(), groups);
        let mut syms = vec![
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
            "btrfs_simple_end_io",
            "btrfs_orig_write_end_io",
            "btrfs_clone_write_end_io",
            "btrfs_dio_end_io",
            "btrfs_end_dio_bio",
            "simple_end_io_work",
            "btrfs_end_bio_work",
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
        syms.sort_unstable();
        assert_eq!(symbols(), syms);
    }
}
