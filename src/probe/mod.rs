//! The only users of libbpf-rs: the generated skeletons, what this kernel can attach
//! (`features`), and (later) the tracing session.

mod collect;
pub mod expire;
pub mod facts;
pub mod flavour;
pub mod hooks;
pub mod issue_stamps;
pub mod kallsyms;
pub mod live;
pub mod load;
pub mod log;
pub mod open;
pub mod options;
pub mod perf_event;
pub mod plan;
pub mod routes;
pub mod sampler;
pub mod series;
pub mod session;
pub mod stamps;
pub mod tracefs;
pub mod trials;
pub mod vmstat;

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod doctor_skel {
    include!(concat!(env!("OUT_DIR"), "/doctor.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod phases_skel {
    include!(concat!(env!("OUT_DIR"), "/phases.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod counts_skel {
    include!(concat!(env!("OUT_DIR"), "/counts.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod stamps_skel {
    include!(concat!(env!("OUT_DIR"), "/stamps.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod stacks_skel {
    include!(concat!(env!("OUT_DIR"), "/stacks.skel.rs"));
}

// The Rust mirror of bpf/phases.h must match the compiled layout.
const _: () = assert!(
    std::mem::size_of::<phases_skel::types::hist>() == (crate::model::HIST_SLOTS + 2) * 8,
    "struct hist in bpf/phases.h and model::HIST_SLOTS disagree"
);

const _: () = assert!(
    std::mem::size_of::<phases_skel::types::io_record>() == crate::events::RECORD_SIZE,
    "struct io_record in bpf/phases.h and events::RECORD_SIZE disagree"
);

// Each field of `struct io_record` where events.rs reads it.
mod record_layout {
    use super::phases_skel::types::io_record as R;
    use crate::events::off;
    use std::mem::offset_of;
    const _: () = assert!(offset_of!(R, tag) == off::TAG);
    const _: () = assert!(offset_of!(R, submit_ts) == off::SUBMIT_TS);
    const _: () = assert!(offset_of!(R, queue_ts) == off::QUEUE_TS);
    const _: () = assert!(offset_of!(R, issue_ts) == off::ISSUE_TS);
    const _: () = assert!(offset_of!(R, complete_ts) == off::COMPLETE_TS);
    const _: () = assert!(offset_of!(R, posted_ts) == off::POSTED_TS);
    const _: () = assert!(offset_of!(R, reap_ts) == off::REAP_TS);
    const _: () = assert!(offset_of!(R, tgid) == off::TGID);
    const _: () = assert!(offset_of!(R, mode) == off::MODE);
    const _: () = assert!(offset_of!(R, dev) == off::DEV);
    const _: () = assert!(offset_of!(R, bytes) == off::BYTES);
    const _: () = assert!(offset_of!(R, tid) == off::TID);
}

// The enums of bpf/phases.h and their Rust mirrors in model.rs, every variant (one side
// renumbered or extended without the other fails the build, not a report).
mod mirrors {
    use super::phases_skel::types::{counter, phase, route_kind, ud_bits, wb_why};
    use crate::model::{Counter, Phase, RouteKind, NR_COUNTERS, NR_PHASES, NR_ROUTE_KINDS};

    /// Asserts each C enumerator equals its Rust variant and that both sides have `NR` of them.
    macro_rules! mirror {
        ($rust:ident, $nr:expr, $c_nr:expr; $($c:path => $r:ident),+ $(,)?) => {
            $(const _: () = assert!($c.0 as u32 == $rust::$r as u32, stringify!($r));)+
            const _: () = assert!($c_nr as usize == $nr);
            const _: () = assert!([$($rust::$r as usize),+].len() == $nr);
            // A Rust variant missing from the list fails this match (no wildcard).
            const _: fn($rust) = |x| match x {
                $($rust::$r => ()),+
            };
        };
    }

    mirror!(Phase, NR_PHASES, phase::NR_PHASES.0;
        phase::PH_SUBMISSION => Submission,
        phase::PH_BLOCK => Block,
        phase::PH_DEVICE => Device,
        phase::PH_POSTED => Posted,
        phase::PH_REAP => Reap,
        phase::PH_COMPLETION => Completion,
        phase::PH_TOTAL => Total,
        phase::PH_DRIVER => Driver,
        phase::PH_NVME => Nvme,
        phase::PH_NVME_SUBMIT => NvmeSubmit,
        phase::PH_NVME_END => NvmeEnd,
        phase::PH_PICKUP => Pickup,
        phase::PH_IOWQ => Iowq,
        phase::PH_THROTTLED => Throttled,
        phase::PH_STACK_DOWN => StackDown,
        phase::PH_STACK_UP => StackUp,
        phase::PH_APP_SUBMIT => AppSubmit,
        phase::PH_TRACER_REAP => TracerReap,
        phase::PH_PC_READ => PcRead,
        phase::PH_PC_READ_CPU => PcReadCpu,
        phase::PH_PC_READ_WAIT => PcReadWait,
        phase::PH_PC_READ_RUNQ => PcReadRunq,
        phase::PH_PC_WRITE => PcWrite,
        phase::PH_PC_WRITE_CPU => PcWriteCpu,
        phase::PH_PC_WRITE_WAIT => PcWriteWait,
        phase::PH_PC_WRITE_RUNQ => PcWriteRunq,
        phase::PH_PC_WRITE_DATA => PcWriteData,
        phase::PH_PC_WRITE_JOURNAL => PcWriteJournal,
        phase::PH_PC_WRITE_FLUSH => PcWriteFlush,
        phase::PH_PC_WRITE_THROTTLED => PcWriteThrottled,
        phase::PH_SYNC => Sync,
        phase::PH_SYNC_CPU => SyncCpu,
        phase::PH_SYNC_WAIT => SyncWait,
        phase::PH_SYNC_RUNQ => SyncRunq,
        phase::PH_SYNC_DATA => SyncData,
        phase::PH_SYNC_JOURNAL => SyncJournal,
        phase::PH_SYNC_FLUSH => SyncFlush,
        phase::PH_SYNC_THROTTLED => SyncThrottled,
        phase::PH_SYNC_JOURNAL_FLUSH => SyncJournalFlush,
        phase::PH_PC_COPY => PcCopy,
        phase::PH_PC_COPY_CPU => PcCopyCpu,
        phase::PH_PC_COPY_WAIT => PcCopyWait,
        phase::PH_PC_COPY_RUNQ => PcCopyRunq,
        phase::PH_PC_COPY_DATA => PcCopyData,
        phase::PH_PC_COPY_JOURNAL => PcCopyJournal,
        phase::PH_PC_COPY_FLUSH => PcCopyFlush,
        phase::PH_PC_COPY_THROTTLED => PcCopyThrottled,
        phase::PH_WB_BLOCK => WbBlock,
        phase::PH_WB_DEVICE => WbDevice,
        phase::PH_UPC => Upc,
        phase::PH_UPC_KERNEL => UpcKernel,
        phase::PH_UPC_REAP => UpcReap,
        phase::PH_UPC_ASYNC => UpcAsync,
        phase::PH_RING => Ring,
        phase::PH_SQ_RING => SqRing,
        phase::PH_FS_ENDIO_WAIT => FsEndioWait,
        phase::PH_FS_ENDIO => FsEndio
    );
    mirror!(Counter, NR_COUNTERS, counter::NR_COUNTERS.0;
        counter::C_BIOS_UNTAGGED => BiosUntagged,
        counter::C_ISSUE_UNTRACKED => IssueUntracked,
        counter::C_REAP_UNMATCHED => ReapUnmatched,
        counter::C_REAP_OVERFLOW => ReapOverflow,
        counter::C_INFLIGHT_FULL => InflightFull,
        counter::C_DONE_FULL => DoneFull,
        counter::C_NVME_SETUP => NvmeSetup,
        counter::C_IRQ => Irq,
        counter::C_SOFTIRQ_BLOCK => SoftirqBlock,
        counter::C_SOFTIRQ_BLOCK_NS => SoftirqBlockNs,
        counter::C_CTX_VOLUNTARY => CtxVoluntary,
        counter::C_CTX_INVOLUNTARY => CtxInvoluntary,
        counter::C_IOMMU_MAP => IommuMap,
        counter::C_IOMMU_UNMAP => IommuUnmap,
        counter::C_DMA_MAP => DmaMap,
        counter::C_DMA_UNMAP => DmaUnmap,
        counter::C_PREEMPTED => Preempted,
        counter::C_PREEMPTED_NS => PreemptedNs,
        counter::C_BYTES => Bytes,
        counter::C_RB_DROPS => RbDrops,
        counter::C_EXPIRED_INFLIGHT => ExpiredInflight,
        counter::C_EXPIRED_DONE => ExpiredDone,
        counter::C_RUNQ_WAIT => RunqWait,
        counter::C_RUNQ_WAIT_NS => RunqWaitNs,
        counter::C_READS => Reads,
        counter::C_WRITES => Writes,
        counter::C_NO_BLOCK_IO => NoBlockIo,
        counter::C_DISORDERED => Disordered,
        counter::C_NO_REAP => NoReap,
        counter::C_UNLINKED => Unlinked,
        counter::C_PC_READS_WAITED => PcReadsWaited,
        counter::C_PC_READS_QUEUED => PcReadsQueued,
        counter::C_PC_BIOS => PcBios,
        counter::C_PC_BIO_BYTES => PcBioBytes,
        counter::C_PC_MERGES => PcMerges,
        counter::C_PC_RA_SYNC => PcRaSync,
        counter::C_PC_RA_ASYNC => PcRaAsync,
        counter::C_PC_BYTES_READ => PcBytesRead,
        counter::C_PC_BYTES_WRITTEN => PcBytesWritten,
        counter::C_PC_SPLITS => PcSplits,
        counter::C_FSYNCS => Fsyncs,
        counter::C_FDATASYNCS => Fdatasyncs,
        counter::C_SYNC_WRITES => SyncWrites,
        counter::C_SYNC_BIOS => SyncBios,
        counter::C_SYNC_BIO_BYTES => SyncBioBytes,
        counter::C_SYNC_OWN_FLUSHES => SyncOwnFlushes,
        counter::C_SYNC_JOURNAL_WAITS => SyncJournalWaits,
        counter::C_JBD2_COMMITS => Jbd2Commits,
        counter::C_JBD2_COMMIT_NS => Jbd2CommitNs,
        counter::C_FLUSH_RQS => FlushRqs,
        counter::C_FUA_RQS => FuaRqs,
        counter::C_DIRTY_PAUSES => DirtyPauses,
        counter::C_DIR_SYNCS => DirSyncs,
        counter::C_PC_BYTES_COPIED => PcBytesCopied,
        counter::C_WB_DIRTIED => WbDirtied,
        counter::C_WB_BYTES => WbBytes,
        counter::C_WB_FILES_FULL => WbFilesFull,
        counter::C_PCC_READS => PccReads,
        counter::C_PCC_PAGES => PccPages,
        counter::C_PCC_ADDED => PccAdded,
        counter::C_UPC_INLINE => UpcInline,
        counter::C_UPC_BIOS => UpcBios,
        counter::C_UPC_BIO_BYTES => UpcBioBytes,
        counter::C_UPC_BYTES => UpcBytes,
        counter::C_TOP_FULL => TopFull,
        counter::C_USER_UNREADABLE => UserUnreadable,
        counter::C_URING_ENTERS => UringEnters,
        counter::C_URING_SQES => UringSqes,
        counter::C_DISORDERED_SPANS => DisorderedSpans,
        counter::C_ISSUE_UNSTAMPED => IssueUnstamped
    );
    mirror!(RouteKind, NR_ROUTE_KINDS, route_kind::NR_ROUTE_KINDS.0;
        route_kind::RK_URING => Uring,
        route_kind::RK_SQPOLL => Sqpoll,
        route_kind::RK_IOWQ => Iowq,
        route_kind::RK_AIO => Aio,
        route_kind::RK_SYNC => Sync,
        route_kind::RK_THROTTLED => Throttled,
        route_kind::RK_SPLIT => Split,
        route_kind::RK_HIPRI => Hipri,
        route_kind::RK_STACKED => Stacked,
        route_kind::RK_PAGECACHE => PageCache,
        route_kind::RK_URING_CACHED => UringCached,
        route_kind::RK_BIO_BASED => BioBased
    );
    const _: () = assert!(ud_bits::UD_SLOT_BITS.0 == crate::loadgen::UD_SLOT_BITS);
    const _: () = assert!(wb_why::NR_WB_WHY.0 as usize == crate::model::NR_WB_WHY);
    const _: () = assert!(wb_why::WBW_SYNC_CALL.0 == 8 && wb_why::WBW_OTHER.0 == 9);
    // wb_file.bytes is one u64 per reason: a type check, at build time.
    const _: fn(super::phases_skel::types::wb_file) -> [u64; crate::model::NR_WB_WHY] = |f| f.bytes;
}

/// The hook table names programs by string: each must be a program of its object, and every
/// program of the four objects the table drives must be a row of it (a rename on either side
/// fails here, not silently at run time; issue #45).
#[cfg(test)]
mod table_matches_skeletons {
    use std::collections::BTreeSet;
    use std::mem::MaybeUninit;

    use libbpf_rs::skel::{OpenSkel, SkelBuilder};

    use super::hooks::{Obj, HOOKS};

    fn table(obj: Obj) -> BTreeSet<String> {
        HOOKS
            .iter()
            .flat_map(|h| h.variants.iter().flat_map(|v| v.progs.iter()).chain(h.func_progs.iter()))
            .filter(|p| p.obj == obj)
            .map(|p| p.name.to_owned())
            .collect()
    }

    fn names<'a>(progs: impl Iterator<Item = libbpf_rs::OpenProgram<'a>>) -> BTreeSet<String> {
        progs.map(|p| p.name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn every_program_is_a_row_and_every_row_a_program() {
        for compat in [false, true] {
            super::flavour::set(if compat { super::hooks::Flavour::Compat } else { super::hooks::Flavour::Modern });
            let mut s = MaybeUninit::uninit();
            let o = super::phases_skel::PhasesSkelBuilder::default().open(&mut s).unwrap();
            assert!(table(Obj::Phases).len() > 40, "{:?}", table(Obj::Phases));
            assert_eq!(names(o.open_object().progs()), table(Obj::Phases), "phases (compat: {compat})");
        }
        super::flavour::set(super::hooks::Flavour::Modern);
        let mut s = MaybeUninit::uninit();
        let o = super::counts_skel::CountsSkelBuilder::default().open(&mut s).unwrap();
        assert_eq!(names(o.open_object().progs()), table(Obj::Counts), "counts");
        let mut s = MaybeUninit::uninit();
        let o = super::stamps_skel::StampsSkelBuilder::default().open(&mut s).unwrap();
        assert_eq!(names(o.open_object().progs()), table(Obj::Stamps), "stamps");
        let mut s = MaybeUninit::uninit();
        let o = super::stacks_skel::StacksSkelBuilder::default().open(&mut s).unwrap();
        assert_eq!(names(o.open_object().progs()), table(Obj::Stacks), "stacks");
    }
}
