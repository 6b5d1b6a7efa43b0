//! Raw probe data -> the trace part of a report. Pure: recorded `RawTrace`s in tests/data feed it.

use serde::{Deserialize, Serialize};

use crate::model::{Counter, Phase, RawTrace, RouteKind};

/// One phase, as the report prints it (nanoseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    pub count: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Syscall entry -> bio queued.
    pub submission: PhaseStats,
    /// Bio queued -> request issued to the driver.
    pub block: PhaseStats,
    /// Issued -> completed by the device.
    pub device: PhaseStats,
    /// Completed -> reaped by the application (posted + waiting).
    pub completion: PhaseStats,
    /// Completed -> posted (io_uring_complete); absent for aio, which posts inside the device
    /// completion.
    pub completion_posted: Option<PhaseStats>,
    /// Posted -> reaped.
    pub completion_reap: PhaseStats,
    /// Syscall entry -> reaped, per I/O.
    pub total: PhaseStats,
    /// NVMe only. nvme_queue_rq builds the command (nvme_setup_cmd) and DMA-maps the data
    /// before block_rq_issue fires, so the driver's submission work ends the block phase:
    /// nvme_driver = nvme_setup_cmd -> issued (command + DMA map, IOMMU map included; part of
    /// `block`); nvme_device = issued -> nvme_complete_rq (the device as the driver sees it,
    /// IOMMU unmap included; part of `device`).
    pub nvme_driver: Option<PhaseStats>,
    pub nvme_device: Option<PhaseStats>,
    /// NVMe with the optional fexit/kprobe on nvme_queue_rq: issued -> doorbell rung (part of
    /// nvme_device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_submit: Option<PhaseStats>,
    /// NVMe only: nvme_complete_rq -> block_rq_complete (end-of-request work; part of `device`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme_end: Option<PhaseStats>,
    /// SQPOLL only: the application queued the SQE -> the SQ thread submitted it (part of
    /// `submission`; measured where the application stamps its SQEs: the bundled generator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqpoll_pickup: Option<PhaseStats>,
    /// io-wq only: punted -> the worker queued the bio (queue wait and the worker's own issue;
    /// part of `submission`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iowq: Option<PhaseStats>,
    /// Throttled I/Os only: start -> the kworker blk-throttle released the bio from queued it
    /// (part of `submission`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled: Option<PhaseStats>,
    /// Stacked devices only: the top bio queued -> the first clone queued on a lower device (dm's
    /// mapping, dm-crypt's encryption; part of `block`) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacked_down: Option<PhaseStats>,
    /// ... and the last lower request completed -> the top bio ended (dm-crypt's decryption,
    /// md's completion; part of `completion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacked_up: Option<PhaseStats>,
    /// btrfs reads (where its end-io work is hooked): the last request completed -> btrfs's
    /// end-io worker started on it (part of `completion`) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_endio_wait: Option<PhaseStats>,
    /// ... and that worker's run: the read's data checksums verified, then the I/O ended (part of
    /// `completion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_endio: Option<PhaseStats>,
    /// io_uring with the bundled generator: it queued the SQE (the stamp in its user_data) ->
    /// the io_uring_enter that submitted it. The application's own time before the kernel, a
    /// part of `phase_sum_mean_ns` of its own when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_before_submit: Option<PhaseStats>,
    /// iopath's own probe at the reaping syscall's exit (io_getevents, io_uring_enter, a sync
    /// read's return): closing every I/O the call returned before the application gets them. Each
    /// I/O waited for its whole batch. Not the kernel's work: the observer's cost inside the
    /// application's latency while traced, a part of `phase_sum_mean_ns` of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracer_reap: Option<PhaseStats>,
    /// io_uring: when the application took each CQE from its ring is bounded by two looks at the
    /// ring's head (the last that still saw it, the first that found it taken); the I/O ends at
    /// the first (`completion_reap` runs to it). This is the bound's width: how much later the
    /// application may have taken it, the uncertainty of `completion` and `total`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cq_ring_bound: Option<PhaseStats>,
    /// SQPOLL without the generator's stamps: when the application wrote each SQE is bounded by
    /// two looks at the SQ ring's tail; the I/O starts at the first (`sqpoll_pickup` runs from
    /// it). This is the bound's width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sq_ring_bound: Option<PhaseStats>,
}

/// io_uring's two rings as the traced application used them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UringRings {
    /// I/Os whose CQE a look at the ring's head found taken: their end is bounded, not timed
    /// (`phases.cq_ring_bound`).
    pub cqes_bounded: u64,
    /// io_uring_enter calls that submitted SQEs, and the SQEs they submitted: the batching the
    /// application did (fio's iodepth_batch_submit, liburing's io_uring_submit after several
    /// io_uring_get_sqe).
    pub submitting_enters: u64,
    pub sqes_submitted: u64,
    pub sqes_per_enter: f64,
}

/// I/Os that took one route (or had one property: throttled, split, hipri).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Stable key: "uring", "sqpoll", "iowq", "aio", "sync", "throttled", "split", "hipri".
    pub key: String,
    pub name: String,
    pub reads: u64,
    pub writes: u64,
    /// Share of the I/Os followed end to end.
    pub share: f64,
}

/// One system call of the traced threads and how often it ran per I/O.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Syscall {
    pub name: String,
    pub count: u64,
    pub per_io: f64,
}

/// Whether the phase table adds up to what the application measured, and if not, why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reconciliation {
    pub reconciled: bool,
    /// Sum of the phase means over the application's own mean latency.
    pub phase_sum_ratio: f64,
    /// What was not followed, or does not add up, in words (empty when reconciled).
    pub reasons: Vec<String>,
}

/// Everything that could make a number wrong, and by how much.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// Bios queued by a traced submit whose application I/O could not be identified.
    pub untagged_bios: u64,
    /// Tracked bios never seen completing (a missed block_rq_complete).
    pub missing_completions: u64,
    /// Completed I/Os never seen posted or reaped.
    pub never_reaped: u64,
    /// Reaped events without a tracked completion.
    pub reaped_unmatched: u64,
    /// An application's iocb or io_event array could not be read from its memory: requests not
    /// claimed or not reaped.
    #[serde(default)]
    pub user_unreadable: u64,
    /// Map or buffer full: I/O not tracked.
    pub dropped: u64,
    /// Sum of the programs' recursion_misses: events the kernel did not deliver to BPF.
    pub recursion_misses: u64,
    /// `--events` records the ring buffer had no room for.
    pub ring_drops: u64,
    /// Followed I/Os whose timestamps were out of order: in no histogram.
    #[serde(default)]
    pub disordered: u64,
    /// CQ ring bounds that ended before they began (the CQE posted on another CPU after the
    /// look read its clock): in no histogram, never a wrapped value. Not I/Os: not in `total`.
    #[serde(default)]
    pub disordered_spans: u64,
    pub total: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerIo {
    pub total: u64,
    pub per_io: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    pub phases: Phases,
    /// Phases whose histogram held a value longer than the trace itself (out-of-order stamps
    /// wrapped below zero): sub-phases are left out (unknown), and a main phase among them makes
    /// the table NOT RECONCILED. Empty when every value is one the kernel can produce.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beyond_trace: Vec<String>,
    /// Application I/Os followed from submit to reap, as a share of the I/Os the generator (or
    /// the traced syscalls) completed.
    pub correlated_fraction: f64,
    /// Sum of the four phase means: what the phases explain of one I/O.
    pub phase_sum_mean_ns: u64,
    pub lost_events: Lost,
    pub irq: PerIo,
    /// BLOCK softirqs and their time; None (unknown) under `--lean`, which hooks no softirq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_block: Option<PerIo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_block_ns: Option<PerIo>,
    pub iommu_map: PerIo,
    pub iommu_unmap: PerIo,
    pub dma_map: PerIo,
    pub dma_unmap: PerIo,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// Traced threads preempted outside a traced syscall (mostly on the way back to user space
    /// after a reap): runnable, not running. Total time and per I/O, in ns. None (unknown) under
    /// `--lean`, which hooks no scheduler event; so is runq_wait_ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_ns: Option<PerIo>,
    /// Woken traced threads waiting for a CPU (wakeup -> running): CPU contention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runq_wait_ns: Option<PerIo>,
    /// Requests per hardware queue, busiest first.
    pub hw_queues: Vec<HwQueue>,
    pub probes: Vec<crate::model::ProbeStatus>,
    /// Features the kernel could not give this trace, each with its reason (the rest ran).
    #[serde(default)]
    pub features_off: Vec<crate::model::FeatureOff>,
    /// The build of the phases object that ran: "modern", or "compat" (kernels before 5.17).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bpf_build: String,
    /// `--events`: records received (one per reaped I/O), when on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// The routes the followed I/Os took: submit routes first (they add up to all followed
    /// I/Os), then properties.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// The traced threads' system calls, most frequent first.
    #[serde(default)]
    pub syscalls: Vec<Syscall>,
    /// Reads and writes of files that moved no block I/O of their own (page-cache hits, writes into
    /// the cache).
    #[serde(default)]
    pub no_block_io: u64,
    /// The bundled generator's job was direct I/O on a file of this file system, or on a "block
    /// device" (None: buffered, or a traced command): its I/Os with no bio are then never
    /// page-cache hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_fs: Option<String>,
    /// Followed I/Os whose end is their posting: the application reaped them with no syscall
    /// (SQPOLL reads the CQ ring), so their wait for the reap is in no phase.
    #[serde(default)]
    pub reap_not_seen: u64,
    /// SQPOLL with the bundled generator: the completion posted (probes) -> taken from the CQ
    /// ring (the generator's own clock): the reap no probe sees, timed by the application. A part
    /// of `phase_sum_mean_ns` of its own when present (`completion` then ends at posting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reap_from_ring: Option<PhaseStats>,
    /// io_uring: the CQEs whose take from the ring was bounded, and the application's submit
    /// batching (None when no io_uring I/O was followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring_rings: Option<UringRings>,
    /// `--lean`: no syscall, scheduler or softirq hook: the application's time runs until io_uring
    /// took the SQE, every reap is timed by the generator, and the softirq counts, softirq time
    /// and run-queue waits are unknown (context switches come from getrusage).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
    /// A lean trace: each disk's io_start_time_ns checked against block_rq_issue, and how long
    /// the hook stayed attached (the device phase starts at the stamp where it is trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_stamps: Option<crate::model::IssueStamps>,
    /// The I/Os the application did (the generator's count, or for a traced command the
    /// followed ones, unmatched reaps and those that moved no block I/O): what `correlated_fraction`
    /// is a share of.
    #[serde(default)]
    pub app_ios: u64,
    /// I/Os whose bios were queued but never seen in a request iopath could link back to them:
    /// a stacked device's clones (dm, md) on the lower device.
    #[serde(default)]
    pub unlinked: u64,
    /// Buffered reads and writes (the page-cache route); None when the run had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<PageCache>,
    /// fsync / fdatasync calls; None when the run had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_calls: Option<SyncCalls>,
    /// The pages the traced processes dirtied and their writeback; None when they dirtied none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback: Option<Writeback>,
    /// `--pagecache count`: the page cache counted from filemap's tracepoints (no call timed);
    /// None in the default split mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_counted: Option<PageCacheCounted>,
    /// io_uring reads and writes of buffered files; None when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring_cached: Option<UringCached>,
    /// Set from `reconcile` once the application's own latency is known (None until then, and
    /// in reports made before the check existed).
    #[serde(default)]
    pub reconciliation: Option<Reconciliation>,
}

/// Buffered reads or writes of files, split by what the thread did inside the call: on CPU
/// (page-cache lookup, copy, starting readahead), blocked until woken (waiting for a folio under
/// read or writeback, dirty throttling, a lock), runnable but not running. The three add up to
/// the call's time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSplit {
    pub total: PhaseStats,
    pub on_cpu: PhaseStats,
    /// Blocked, and nothing below explains it (for reads, all blocked time).
    pub waited: PhaseStats,
    pub runq: PhaseStats,
    /// Bytes the calls returned (read) or took (write); 0 for sync calls.
    pub bytes: u64,
    /// Writes and sync calls: blocked time told apart by what the file's disk did meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<WaitSplit>,
}

/// What a write or sync call was blocked on, by the disk's state meanwhile (bpf/disk_busy.bpf.h
/// `struct disk_busy`): its own data bios in flight, a journal commit of its file system, a
/// cache flush or FUA write outside a commit, a dirty-throttling pause. With `on_cpu`, `waited`
/// and `runq` they add up to the call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitSplit {
    pub data: PhaseStats,
    pub journal: PhaseStats,
    pub flush: PhaseStats,
    pub throttled: PhaseStats,
}

impl CacheSplit {
    pub fn sum_of_means_ns(&self) -> u64 {
        self.on_cpu.mean_ns
            + self.waited.mean_ns
            + self.runq.mean_ns
            + self
                .waits
                .as_ref()
                .map_or(0, |w| w.data.mean_ns + w.journal.mean_ns + w.flush.mean_ns + w.throttled.mean_ns)
    }
}

/// fsync and fdatasync calls on disk files: not I/Os of their own, timed and split apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncCalls {
    pub fsync: u64,
    pub fdatasync: u64,
    /// Of those, the calls on a directory (made after a create, rename or unlink).
    #[serde(default)]
    pub directories: u64,
    /// Entry -> return, split like a write (`waits` always set).
    pub split: CacheSplit,
    /// Inside `waits.journal`: the commit's own cache flush / FUA write in flight.
    pub journal_flush: PhaseStats,
    /// Data bios the calls queued themselves (writeback of their dirty pages) and their bytes.
    pub data_bios: u64,
    pub data_bytes: u64,
    /// Cache flushes the sync calls and sync writes issued themselves (blkdev_issue_flush).
    pub own_flushes: u64,
    /// Calls (sync calls and sync writes) that waited through a journal commit.
    pub journal_waits: u64,
    /// Journal commits on the calls' disks and their mean time (None: no jbd2 tracepoints).
    pub commits: Option<u64>,
    pub commit_mean_ns: Option<u64>,
    /// Flush requests and FUA writes completed on the calls' disks (every writer's).
    pub flush_requests: u64,
    pub fua_writes: u64,
    /// The application's own mean sync latency (the bundled generator's), set by the report;
    /// the split's mean is set against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_mean_ns: Option<u64>,
}

/// The page-cache route: buffered syscalls of the traced threads, and the block I/O they
/// started themselves (readahead; sync writes).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageCache {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<CacheSplit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<CacheSplit>,
    /// copy_file_range and sendfile with a file at one end: the kernel copies through the
    /// cache itself (cp does), split like writes; their bios are mostly the source's reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<CacheSplit>,
    /// Reads that never blocked: served from the cache (hits) over all buffered reads.
    pub read_hit_ratio: f64,
    /// Reads that blocked inside the call (waiting for the device, mostly).
    pub reads_waited: u64,
    /// Reads that queued bios themselves (the readahead they started).
    pub reads_queued: u64,
    /// Bios queued from inside buffered calls, their bytes, how many were split to fit the
    /// device and merged into a request already queued (requests = bios + splits - merges).
    pub bios: u64,
    pub bio_bytes: u64,
    pub splits: Option<u64>,
    /// None where the merge tracepoints were not attached: unknown, not zero.
    pub merges: Option<u64>,
    pub requests: Option<u64>,
    /// Device requests per buffered read, and buffered reads per request ("4k reads became
    /// 128k requests: 32 reads per request").
    pub requests_per_read: Option<f64>,
    pub reads_per_request: Option<f64>,
    /// Readahead started by the reads: on a miss (sync) and on the marker (async). None where
    /// the kernel has no readahead tracepoints (before 6.10).
    pub readahead_sync: Option<u64>,
    pub readahead_async: Option<u64>,
    /// False where the split cannot be made (sched_switch not attached via BTF): then only the
    /// totals are measurements.
    pub split_known: bool,
    /// Writes with O_SYNC / O_DSYNC / RWF_DSYNC (each one waits for its own writeback).
    #[serde(default)]
    pub sync_writes: u64,
    /// balance_dirty_pages pauses inside the writes (None: no tracepoint).
    #[serde(default)]
    pub dirty_pauses: Option<u64>,
}

/// `p`: the total, on-CPU, waited and run-queue phases of reads or of writes; `waits`: the
/// data, journal, flush and throttled phases where the family has them.
fn cache_split(raw: &RawTrace, p: [Phase; 4], waits: Option<[Phase; 4]>, bytes: u64) -> Option<CacheSplit> {
    let [total, on_cpu, waited, runq] = p.map(|p| stats(&raw.phase(p)));
    let waits = waits.map(|w| {
        let [data, journal, flush, throttled] = w.map(|p| stats(&raw.phase(p)));
        WaitSplit { data, journal, flush, throttled }
    });
    (total.count > 0).then_some(CacheSplit { total, on_cpu, waited, runq, bytes, waits })
}

fn sync_calls(raw: &RawTrace) -> Option<SyncCalls> {
    use Phase::*;
    let split = cache_split(
        raw,
        [Sync, SyncCpu, SyncWait, SyncRunq],
        Some([SyncData, SyncJournal, SyncFlush, SyncThrottled]),
        0,
    )?;
    let jbd2 = raw.probes.iter().any(|p| p.measures(crate::hook_names::JBD2_END_COMMIT));
    let commits = raw.counter(Counter::Jbd2Commits);
    Some(SyncCalls {
        fsync: raw.counter(Counter::Fsyncs),
        fdatasync: raw.counter(Counter::Fdatasyncs),
        directories: raw.counter(Counter::DirSyncs),
        journal_flush: stats(&raw.phase(SyncJournalFlush)),
        split,
        data_bios: raw.counter(Counter::SyncBios),
        data_bytes: raw.counter(Counter::SyncBioBytes),
        own_flushes: raw.counter(Counter::SyncOwnFlushes),
        journal_waits: raw.counter(Counter::SyncJournalWaits),
        commits: jbd2.then_some(commits),
        commit_mean_ns: (jbd2 && commits > 0).then(|| raw.counter(Counter::Jbd2CommitNs) / commits),
        flush_requests: raw.counter(Counter::FlushRqs),
        fua_writes: raw.counter(Counter::FuaRqs),
        app_mean_ns: None,
    })
}

fn page_cache(raw: &RawTrace) -> Option<PageCache> {
    use Phase::*;
    let reads = cache_split(raw, [PcRead, PcReadCpu, PcReadWait, PcReadRunq], None, raw.counter(Counter::PcBytesRead));
    let writes = cache_split(
        raw,
        [PcWrite, PcWriteCpu, PcWriteWait, PcWriteRunq],
        Some([PcWriteData, PcWriteJournal, PcWriteFlush, PcWriteThrottled]),
        raw.counter(Counter::PcBytesWritten),
    );
    let copies = cache_split(
        raw,
        [PcCopy, PcCopyCpu, PcCopyWait, PcCopyRunq],
        Some([PcCopyData, PcCopyJournal, PcCopyFlush, PcCopyThrottled]),
        raw.counter(Counter::PcBytesCopied),
    );
    if reads.is_none() && writes.is_none() && copies.is_none() {
        return None;
    }
    let attached = |n: &str| raw.probes.iter().any(|p| p.measures(n));
    let nreads = reads.as_ref().map_or(0, |r| r.total.count);
    let waited = raw.counter(Counter::PcReadsWaited);
    let bios = raw.counter(Counter::PcBios);
    let merges = attached(crate::hook_names::BLOCK_BIO_BACKMERGE).then(|| raw.counter(Counter::PcMerges));
    let splits = attached(crate::hook_names::BLOCK_SPLIT).then(|| raw.counter(Counter::PcSplits));
    // Each bio is a request, one more per split, one fewer per merge into a queued one.
    let requests = merges.zip(splits).map(|(m, sp)| (bios + sp).saturating_sub(m));
    let ra = attached("readahead:page_cache_sync_ra");
    Some(PageCache {
        read_hit_ratio: if nreads == 0 { 0.0 } else { nreads.saturating_sub(waited) as f64 / nreads as f64 },
        reads_waited: waited,
        reads_queued: raw.counter(Counter::PcReadsQueued),
        bios,
        bio_bytes: raw.counter(Counter::PcBioBytes),
        merges,
        splits,
        requests,
        // Per read only when reads alone queued them: a copy's bios are reads too.
        requests_per_read: requests.filter(|_| nreads > 0 && copies.is_none()).map(|q| q as f64 / nreads as f64),
        reads_per_request: requests
            .filter(|&q| q > 0 && nreads > 0 && copies.is_none())
            .map(|q| nreads as f64 / q as f64),
        readahead_sync: ra.then(|| raw.counter(Counter::PcRaSync)),
        readahead_async: ra.then(|| raw.counter(Counter::PcRaAsync)),
        split_known: raw.probes.iter().any(|p| p.measures(crate::hook_names::SCHED_SWITCH) && p.via == "tp_btf"),
        sync_writes: raw.counter(Counter::SyncWrites),
        dirty_pauses: attached(crate::hook_names::BALANCE_DIRTY_PAGES).then(|| raw.counter(Counter::DirtyPauses)),
        reads,
        writes,
        copies,
    })
}

/// One blk-mq hardware queue and the traced requests issued on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HwQueue {
    /// The hctx's queue_num (0-based).
    pub id: u32,
    /// The hctx type: "default", "read" or "poll" (NVMe poll queues serve --iopoll).
    pub kind: String,
    /// For NVMe, the I/O queue id (qid) the driver uses: id + 1 (qid 0 is the admin queue).
    pub nvme_qid: u32,
    pub ios: u64,
}

fn hw_queues(raw: &[(u32, u64)]) -> Vec<HwQueue> {
    use crate::model::{HW_QUEUE_IDS, HW_QUEUE_TYPES};
    let mut v: Vec<HwQueue> = raw
        .iter()
        .map(|&(key, ios)| {
            let id = key % HW_QUEUE_IDS;
            let kind = match (key / HW_QUEUE_IDS) % HW_QUEUE_TYPES {
                0 => "default",
                1 => "read",
                _ => "poll",
            };
            HwQueue { id, kind: kind.into(), nvme_qid: id + 1, ios }
        })
        .collect();
    v.sort_by(|a, b| b.ios.cmp(&a.ios).then(a.id.cmp(&b.id)));
    v
}

impl From<&crate::hist::LatSummary> for PhaseStats {
    fn from(s: &crate::hist::LatSummary) -> PhaseStats {
        PhaseStats {
            count: s.count,
            mean_ns: s.mean,
            p50_ns: s.p50,
            p90_ns: s.p90,
            p99_ns: s.p99,
            p999_ns: s.p999,
            max_ns: s.max,
        }
    }
}

/// The kernel's `enum wb_reason` (0..7), then iopath's own two (`enum wb_why`).
pub const WB_REASONS: [&str; crate::model::NR_WB_WHY] = [
    "background",
    "vmscan",
    "sync",
    "periodic",
    "laptop timer",
    "fs free space",
    "forker thread",
    "foreign flush",
    "sync call / O_SYNC",
    "other",
];

/// Writeback of the pages the traced processes dirtied, whoever wrote them back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Writeback {
    /// Pages they made dirty (writeback_dirty_folio).
    pub dirtied_pages: u64,
    /// Bytes of their files written back during the trace, and by why (non-zero reasons only).
    pub written_bytes: u64,
    pub by_reason: Vec<(String, u64)>,
    /// Per writeback request: allocated -> issued (None: the queue keeps no time stamps), issued
    /// -> completed.
    pub block: Option<PhaseStats>,
    pub device: PhaseStats,
    pub files: Vec<WbFile>,
    /// Files not followed: the in-kernel table was full.
    pub files_not_followed: u64,
    /// /proc/vmstat over the trace (machine-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<Vmstat>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WbFile {
    pub name: String,
    pub ino: u64,
    pub dev: String,
    /// The first traced process that dirtied it.
    pub pid: u32,
    pub comm: String,
    /// Its io cgroup path; None when unknown.
    pub cgroup: Option<String>,
    pub dirtied_pages: u64,
    pub written_bytes: u64,
    pub by_reason: Vec<(String, u64)>,
    pub requests: u64,
    pub block_mean_ns: Option<u64>,
    pub device_mean_ns: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vmstat {
    pub dirty_max_pages: u64,
    pub dirty_mean_pages: u64,
    pub writeback_max_pages: u64,
    /// nr_dirtied and nr_written, end minus start: every process's, not only the traced ones'.
    pub dirtied_pages: u64,
    pub written_pages: u64,
    pub thresholds: String,
    /// How many samples the maxima and mean come from (one every 20 ms).
    #[serde(default)]
    pub samples: u64,
}

fn reasons(bytes: &[u64]) -> Vec<(String, u64)> {
    bytes.iter().zip(WB_REASONS).filter(|(b, _)| **b > 0).map(|(b, r)| (r.to_owned(), *b)).collect()
}

fn writeback(raw: &RawTrace) -> Option<Writeback> {
    let dirtied = raw.counter(Counter::WbDirtied);
    if raw.writeback.is_empty() && dirtied == 0 {
        return None;
    }
    let mut total = vec![0u64; crate::model::NR_WB_WHY];
    for f in &raw.writeback {
        for (t, b) in total.iter_mut().zip(&f.bytes) {
            *t += b;
        }
    }
    let block = raw.phase(Phase::WbBlock);
    let files = raw
        .writeback
        .iter()
        .map(|f| WbFile {
            name: f.name.clone(),
            ino: f.ino,
            dev: f.dev.clone(),
            pid: f.tgid,
            comm: f.comm.clone(),
            cgroup: f.cgroup.clone(),
            dirtied_pages: f.dirtied_pages,
            written_bytes: f.bytes.iter().sum(),
            by_reason: reasons(&f.bytes),
            requests: f.requests,
            block_mean_ns: (f.requests > 0 && block.count > 0).then(|| f.block_ns / f.requests),
            device_mean_ns: (f.requests > 0).then(|| f.device_ns / f.requests),
        })
        .collect();
    let vmstat = raw.vmstat.as_ref().filter(|v| !v.samples.is_empty()).map(|v| Vmstat {
        dirty_max_pages: v.samples.iter().map(|s| s.0).max().unwrap_or(0),
        dirty_mean_pages: v.samples.iter().map(|s| s.0).sum::<u64>() / v.samples.len() as u64,
        writeback_max_pages: v.samples.iter().map(|s| s.1).max().unwrap_or(0),
        dirtied_pages: v.dirtied,
        written_pages: v.written,
        thresholds: v.thresholds.clone(),
        samples: v.samples.len() as u64,
    });
    Some(Writeback {
        dirtied_pages: dirtied,
        written_bytes: total.iter().sum(),
        by_reason: reasons(&total),
        block: (block.count > 0).then(|| stats(&block)),
        device: stats(&raw.phase(Phase::WbDevice)),
        files,
        files_not_followed: raw.counter(Counter::WbFilesFull),
        vmstat,
    })
}

/// io_uring reads and writes of buffered files: the page cache serves them, no bio of their own.
/// With the application's and the tracer's rows, kernel + reap add up to the request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UringCached {
    /// Submitted (its io_uring_enter) -> reaped.
    pub total: PhaseStats,
    /// Submitted -> posted: the lookup and copy inside the submitting call, or the wait for a
    /// page (its readahead in flight) and the retry from task work, or an io-wq punt.
    pub kernel: PhaseStats,
    /// The kernel's part of those not completed inside the submitting call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_inline: Option<PhaseStats>,
    /// Posted -> reaped.
    pub reap: PhaseStats,
    /// Completed inside the submitting call (the cache had the data) over all of them.
    pub inline_ratio: f64,
    /// Bios their submitting calls queued (readahead, writeback) and their bytes.
    pub bios: u64,
    pub bio_bytes: u64,
    /// Bytes the requests moved (their completions' results).
    #[serde(default)]
    pub bytes: u64,
}

fn uring_cached(raw: &RawTrace) -> Option<UringCached> {
    let total = raw.phase(Phase::Upc);
    (total.count > 0).then(|| {
        let not_inline = raw.phase(Phase::UpcAsync);
        UringCached {
            total: stats(&total),
            kernel: stats(&raw.phase(Phase::UpcKernel)),
            not_inline: (not_inline.count > 0).then(|| stats(&not_inline)),
            reap: stats(&raw.phase(Phase::UpcReap)),
            inline_ratio: raw.counter(Counter::UpcInline) as f64 / total.count as f64,
            bios: raw.counter(Counter::UpcBios),
            bio_bytes: raw.counter(Counter::UpcBioBytes),
            bytes: raw.counter(Counter::UpcBytes),
        }
    })
}

/// The page cache as `--pagecache count` sees it: one program per filemap_get_pages call of the
/// traced processes (a buffered read's lookup) and one per folio they added to the cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageCacheCounted {
    /// filemap_get_pages calls (one per buffered read of up to a batch of pages).
    pub reads: u64,
    /// Pages those calls asked for.
    pub pages_read: u64,
    /// Pages the traced processes added to the cache: misses and the readahead they started
    /// (and new pages of buffered writes).
    pub pages_added: u64,
    /// pages_added / pages_read: how much of what was read came from the device (above 1 when
    /// readahead brought pages that were not read while traced).
    pub added_per_page_read: Option<f64>,
}

fn page_cache_counted(raw: &RawTrace) -> Option<PageCacheCounted> {
    if !raw.probes.iter().any(|p| p.measures(crate::hook_names::FILEMAP_GET_PAGES)) {
        return None;
    }
    let (reads, pages_read, pages_added) =
        (raw.counter(Counter::PccReads), raw.counter(Counter::PccPages), raw.counter(Counter::PccAdded));
    Some(PageCacheCounted {
        reads,
        pages_read,
        pages_added,
        added_per_page_read: (pages_read > 0).then(|| pages_added as f64 / pages_read as f64),
    })
}

fn stats(h: &crate::model::BpfHist) -> PhaseStats {
    PhaseStats::from(&h.summary())
}

/// Slack over the traced span for phases that begin before the first traced submission (the
/// application's own time before it): a wrapped difference is ~1.8e19 ns, far past any slack.
const BEYOND_SLACK_NS: u64 = 1_000_000_000;

/// The phases whose max is longer than the trace (`span_ns`, first submission to last reap,
/// plus BEYOND_SLACK_NS): no kernel produces such a value, only a difference of two stamps
/// taken out of order. Sub-phases among them become unknown (None); the main ones keep no sample
/// (their sum and mean hold the wrapped value too) and `reconcile` names them. Nothing is
/// checked when the span is unknown (0).
fn beyond_trace(p: &mut Phases, span_ns: u64) -> Vec<String> {
    let mut out = Vec::new();
    if span_ns == 0 {
        return out;
    }
    let limit = span_ns.saturating_add(BEYOND_SLACK_NS);
    for (name, s) in [
        ("submission", &mut p.submission),
        ("block", &mut p.block),
        ("device", &mut p.device),
        ("completion", &mut p.completion),
        ("completion_reap", &mut p.completion_reap),
        ("total", &mut p.total),
    ] {
        if s.max_ns > limit {
            // No sample of it is shown (count 0), and `reconcile` says why.
            *s = PhaseStats::default();
            out.push(name.to_owned());
        }
    }
    for (name, s) in [
        ("completion_posted", &mut p.completion_posted),
        ("nvme_driver", &mut p.nvme_driver),
        ("nvme_device", &mut p.nvme_device),
        ("nvme_submit", &mut p.nvme_submit),
        ("nvme_end", &mut p.nvme_end),
        ("sqpoll_pickup", &mut p.sqpoll_pickup),
        ("iowq", &mut p.iowq),
        ("throttled", &mut p.throttled),
        ("stacked_down", &mut p.stacked_down),
        ("stacked_up", &mut p.stacked_up),
        ("fs_endio_wait", &mut p.fs_endio_wait),
        ("fs_endio", &mut p.fs_endio),
        ("app_before_submit", &mut p.app_before_submit),
        ("tracer_reap", &mut p.tracer_reap),
        ("cq_ring_bound", &mut p.cq_ring_bound),
        ("sq_ring_bound", &mut p.sq_ring_bound),
    ] {
        if s.as_ref().is_some_and(|x| x.max_ns > limit) {
            *s = None;
            out.push(name.to_owned());
        }
    }
    out
}

/// `ios`: I/Os the application completed in the traced interval (the generator's count).
pub fn summarize(raw: &RawTrace, ios: u64) -> TraceSummary {
    let per = |n: u64| PerIo { total: n, per_io: if ios == 0 { 0.0 } else { n as f64 / ios as f64 } };
    let mut phases = phases_of(raw);
    // Recorded for the I/Os a syscall reaped (not those SQPOLL's application takes from the CQ
    // ring): its share of the mean over every I/O followed.
    let uring_cached = uring_cached(raw);
    let upc_n = uring_cached.as_ref().map_or(0, |u| u.total.count);
    let tracer_mean_ns = phases.tracer_reap.as_ref().map_or(0, |r| {
        let all = (phases.total.count + upc_n).max(r.count);
        (r.mean_ns as u128 * r.count as u128 / all.max(1) as u128) as u64
    });
    // The application's and the tracer's rows belong to both populations io_uring closes: the
    // I/Os with bios, and those on buffered files (a generator job is one or the other).
    let app_mean_ns = phases.app_before_submit.as_ref().map_or(0, |a| a.mean_ns);
    let phase_sum_mean_ns = app_mean_ns
        + tracer_mean_ns
        + phases.submission.mean_ns
        + phases.block.mean_ns
        + phases.device.mean_ns
        + phases.completion.mean_ns;
    // Every I/O followed end to end lands once in the total histogram (the reap histogram misses
    // those whose reap no probe sees); every buffered call once in its page-cache total, every
    // io_uring request on a buffered file once in its own.
    let direct = raw.phase(Phase::Total).count;
    let page_cache = page_cache(raw);
    let (pc_n, pc_weighted) = page_cache.as_ref().map_or((0, 0u128), |pc| {
        [&pc.reads, &pc.writes, &pc.copies]
            .iter()
            .filter_map(|s| s.as_ref())
            .fold((0, 0u128), |(n, w), s| (n + s.total.count, w + s.sum_of_means_ns() as u128 * s.total.count as u128))
    });
    let (pc_n, pc_weighted) = match &uring_cached {
        Some(u) => (
            pc_n + upc_n,
            pc_weighted + (app_mean_ns + tracer_mean_ns + u.kernel.mean_ns + u.reap.mean_ns) as u128 * upc_n as u128,
        ),
        None => (pc_n, pc_weighted),
    };
    // The application's mean over both populations, weighted by their counts.
    let phase_sum_mean_ns = if pc_n == 0 {
        phase_sum_mean_ns
    } else {
        ((phase_sum_mean_ns as u128 * direct as u128 + pc_weighted) / (direct + pc_n) as u128) as u64
    };
    let followed = direct + pc_n;
    let lost = lost_of(raw);
    let per_io = |n: u64| if ios == 0 { 0.0 } else { n as f64 / ios as f64 };
    let mut syscalls: Vec<Syscall> = raw
        .syscalls
        .iter()
        .map(|&(nr, count)| Syscall { name: crate::syscall_names::name(nr), count, per_io: per_io(count) })
        .collect();
    syscalls.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    let beyond_trace = beyond_trace(&mut phases, raw.active_ns);
    TraceSummary {
        phases,
        beyond_trace,
        correlated_fraction: if ios == 0 { 0.0 } else { (followed.min(ios)) as f64 / ios as f64 },
        phase_sum_mean_ns,
        lost_events: lost,
        irq: per(raw.counter(Counter::Irq)),
        softirq_block: (!raw.lean).then(|| per(raw.counter(Counter::SoftirqBlock))),
        softirq_block_ns: (!raw.lean).then(|| per(raw.counter(Counter::SoftirqBlockNs))),
        iommu_map: per(raw.counter(Counter::IommuMap)),
        iommu_unmap: per(raw.counter(Counter::IommuUnmap)),
        dma_map: per(raw.counter(Counter::DmaMap)),
        dma_unmap: per(raw.counter(Counter::DmaUnmap)),
        preempted_ns: (!raw.lean).then(|| per(raw.counter(Counter::PreemptedNs))),
        runq_wait_ns: (!raw.lean).then(|| per(raw.counter(Counter::RunqWaitNs))),
        ctx_voluntary: raw.counter(Counter::CtxVoluntary),
        ctx_involuntary: raw.counter(Counter::CtxInvoluntary),
        hw_queues: hw_queues(&raw.hw_queues),
        probes: raw.probes.clone(),
        features_off: raw.features_off.clone(),
        bpf_build: raw.bpf_build.clone(),
        events: raw.events_received,
        routes: routes(raw, direct + upc_n),
        syscalls,
        no_block_io: raw.counter(Counter::NoBlockIo),
        direct_fs: None,
        reap_not_seen: raw.counter(Counter::NoReap),
        reap_from_ring: None,
        uring_rings: uring_rings(raw),
        lean: raw.lean,
        issue_stamps: raw.issue_stamps.clone(),
        app_ios: ios,
        unlinked: raw.counter(Counter::Unlinked),
        page_cache,
        sync_calls: sync_calls(raw),
        writeback: writeback(raw),
        page_cache_counted: page_cache_counted(raw),
        uring_cached,
        reconciliation: None,
    }
}

/// Each phase's statistics; a sub-phase never recorded is absent (unknown), not zero.
fn phases_of(raw: &RawTrace) -> Phases {
    let opt = |p: Phase| {
        let h = raw.phase(p);
        (h.count > 0).then(|| stats(&h))
    };
    Phases {
        submission: stats(&raw.phase(Phase::Submission)),
        block: stats(&raw.phase(Phase::Block)),
        device: stats(&raw.phase(Phase::Device)),
        completion: stats(&raw.phase(Phase::Completion)),
        completion_posted: opt(Phase::Posted),
        completion_reap: stats(&raw.phase(Phase::Reap)),
        total: stats(&raw.phase(Phase::Total)),
        nvme_driver: opt(Phase::Driver),
        nvme_device: opt(Phase::Nvme),
        nvme_submit: opt(Phase::NvmeSubmit),
        nvme_end: opt(Phase::NvmeEnd),
        sqpoll_pickup: opt(Phase::Pickup),
        iowq: opt(Phase::Iowq),
        throttled: opt(Phase::Throttled),
        stacked_down: opt(Phase::StackDown),
        stacked_up: opt(Phase::StackUp),
        fs_endio_wait: opt(Phase::FsEndioWait),
        fs_endio: opt(Phase::FsEndio),
        app_before_submit: opt(Phase::AppSubmit),
        tracer_reap: opt(Phase::TracerReap),
        cq_ring_bound: opt(Phase::Ring),
        sq_ring_bound: opt(Phase::SqRing),
    }
}

/// What the trace lost or could not place, by reason, and their total.
fn lost_of(raw: &RawTrace) -> Lost {
    let mut lost = Lost {
        untagged_bios: raw.counter(Counter::BiosUntagged),
        // Left over at the end, or reclaimed during the run when the address came back.
        missing_completions: raw.stuck_inflight + raw.counter(Counter::ExpiredInflight),
        never_reaped: raw.stuck_done + raw.counter(Counter::ExpiredDone),
        reaped_unmatched: raw.counter(Counter::ReapUnmatched),
        user_unreadable: raw.counter(Counter::UserUnreadable),
        dropped: raw.counter(Counter::InflightFull)
            + raw.counter(Counter::DoneFull)
            + raw.counter(Counter::ReapOverflow),
        recursion_misses: raw.probes.iter().map(|p| p.recursion_misses).sum(),
        ring_drops: raw.counter(Counter::RbDrops),
        disordered: raw.counter(Counter::Disordered),
        disordered_spans: raw.counter(Counter::DisorderedSpans),
        total: 0,
    };
    lost.total = lost.untagged_bios
        + lost.missing_completions
        + lost.never_reaped
        + lost.reaped_unmatched
        + lost.user_unreadable
        + lost.dropped
        + lost.recursion_misses
        + lost.ring_drops
        + lost.disordered;
    lost
}

fn uring_rings(raw: &RawTrace) -> Option<UringRings> {
    let (bounded, enters, sqes) =
        (raw.phase(Phase::Ring).count, raw.counter(Counter::UringEnters), raw.counter(Counter::UringSqes));
    (bounded + enters > 0).then(|| UringRings {
        cqes_bounded: bounded,
        submitting_enters: enters,
        sqes_submitted: sqes,
        sqes_per_enter: if enters == 0 { 0.0 } else { sqes as f64 / enters as f64 },
    })
}

fn routes(raw: &RawTrace, followed: u64) -> Vec<Route> {
    RouteKind::ALL
        .iter()
        // Buffered calls have their own table (page_cache): shares here are of followed I/Os.
        .filter(|&&k| k != RouteKind::PageCache)
        .filter_map(|&k| {
            let (reads, writes) = raw.route(k);
            (reads + writes > 0).then(|| Route {
                key: route_key(k).into(),
                name: k.name().into(),
                reads,
                writes,
                share: (reads + writes) as f64 / followed.max(1) as f64,
            })
        })
        .collect()
}

fn route_key(k: RouteKind) -> &'static str {
    match k {
        RouteKind::Uring => "uring",
        RouteKind::Sqpoll => "sqpoll",
        RouteKind::Iowq => "iowq",
        RouteKind::Aio => "aio",
        RouteKind::Sync => "sync",
        RouteKind::Throttled => "throttled",
        RouteKind::Split => "split",
        RouteKind::Hipri => "hipri",
        RouteKind::Stacked => "stacked",
        RouteKind::PageCache => "pagecache",
        RouteKind::UringCached => "uring_cached",
        RouteKind::BioBased => "bio_based",
    }
}

/// How far the phase sum may miss the application's mean latency and still reconcile: 5%, or
/// 2 us where that is more. The floor is the part no phase is meant to cover: syscall entry and
/// exit and the application's own loop, 1-3 us per I/O on the 2-vCPU test VM ("outside phases":
/// psync 1.1, uring 2.1 us), which alone is 5% of a 20-40 us I/O on a RAM-backed device.
pub const RECONCILE_TOLERANCE: f64 = 0.05;
pub const RECONCILE_FLOOR_NS: f64 = 2000.0;
/// The share of the application's I/Os that must be followed end to end.
pub const MIN_CORRELATED: f64 = 0.99;

/// Adds the application's own timing of the reap no probe sees (SQPOLL: completions taken from
/// the CQ ring), measured against the probes' posting time, as a fifth part of the phase sum
/// (the completion phase then ends at posting). Pure.
pub fn with_reap_from_ring(mut t: TraceSummary, wait: Option<PhaseStats>) -> TraceSummary {
    if let Some(w) = wait.filter(|w| w.count > 0 && t.reap_not_seen > 0) {
        t.phase_sum_mean_ns += w.mean_ns;
        t.reap_from_ring = Some(w);
    }
    t
}

/// Why I/Os of a direct job had no bio iopath could link, or none at all. A direct I/O is a
/// page-cache hit only if no bio was queued for it: with the traced threads' unlinked bios beside
/// them, they had bios iopath could not link. btrfs, since 968f19c5b1b7 ("btrfs: always fallback
/// to buffered write if the inode requires checksum"), writes O_DIRECT data to a checksummed file
/// through the page cache and flushes it in the call (26046 of 26046 psync writes here, one
/// writeback bio each): followed through the thread carrying the I/O out (sync, io-wq), not for
/// libaio, whose io_submit names no request. None: nothing to say.
fn direct_reason(t: &TraceSummary) -> Option<String> {
    let n = t.no_block_io;
    let untagged = t.lost_events.untagged_bios;
    let skipped = t.lost_events.recursion_misses;
    // Probe runs the kernel skipped leave I/Os without the bio they queued: never a page-cache
    // hit then (7.3's lazy preemption under zram's rate in the rig: 9887 I/Os, every one a
    // skipped block_bio_queue run).
    if n > 0 && skipped > 0 {
        return Some(format!(
            "; {n} had no bio iopath saw: the kernel skipped {skipped} probe runs (its recursion protection: \
             another run of the same program was in progress on that CPU, as when a preemptible kernel \
             preempts a program), which lost their bios' queueing or end{}",
            if t.direct_fs.is_none() { "; the rest, if any, page-cache hits or writes into the cache" } else { "" }
        ));
    }
    Some(match t.direct_fs.as_deref() {
        None if n > 0 => format!(
            "; {n} moved no block I/O of their own (page-cache hits, or writes into the cache): their time is \
             not in these phases"
        ),
        None => return None,
        Some("block device") if n > 0 => {
            format!("; {n} direct I/Os on the block device had no bio iopath saw: their time is not in these phases")
        }
        Some(fs) if untagged == 0 && n > 0 => format!(
            "; {n} direct I/Os queued no bio at all (file system {fs}: a hole, data kept inline, or past the \
             end of the file): their time is not in these phases"
        ),
        Some(_) if untagged == 0 => return None,
        Some("btrfs") => format!(
            "; the traced threads queued {untagged} bios that no I/O iopath follows owns (file system btrfs: it \
             writes O_DIRECT data to a file with data checksums through the page cache and flushes it in the \
             call, kernel commit 968f19c5b1b7; iopath links those bios through the thread carrying the I/O \
             out, an io-wq worker or the sync call, but libaio's io_submit names no request; before 6.1 \
             btrfs's direct I/O bios are not walked back); a nodatacow file (chattr +C on the empty file) \
             keeps btrfs's writes direct and followed"
        ),
        Some(fs) => format!(
            "; the traced threads queued {untagged} bios that no I/O iopath follows owns (file system {fs}: a \
             direct I/O path iopath does not walk back on this kernel)"
        ),
    })
}

/// Checks the phase table against the application's own view: `t.app_ios` I/Os with mean
/// latency `app_mean_ns` (the generator's, or syscall entry -> return for a traced command). Pure.
pub fn reconcile(t: &TraceSummary, app_mean_ns: u64) -> Reconciliation {
    let app_ios = t.app_ios;
    let mut reasons = Vec::new();
    let ratio = if app_mean_ns == 0 { 0.0 } else { t.phase_sum_mean_ns as f64 / app_mean_ns as f64 };
    let main = ["submission", "block", "device", "completion", "completion_reap", "total"];
    if let Some(p) = t.beyond_trace.iter().find(|p| main.contains(&p.as_str())) {
        reasons.push(format!(
            "the {p} phase held a value longer than the trace itself (stamps taken out of order): its numbers \
             are not measurements"
        ));
    }
    if app_ios == 0 {
        reasons.push("no application I/O completed: there is nothing to split".to_owned());
    } else if t.correlated_fraction < MIN_CORRELATED {
        let mut why = format!(
            "only {:.1}% of the application's {} I/Os were followed end to end",
            t.correlated_fraction * 100.0,
            app_ios
        );
        if t.page_cache_counted.is_some() {
            why.push_str(
                "; --pagecache count: the page cache was counted, no call was timed and no syscall hook attached",
            );
        }
        if let Some(r) = direct_reason(t) {
            why.push_str(&r);
        }
        if t.unlinked > 0 && t.lost_events.recursion_misses > 0 {
            why.push_str(&format!(
                "; {} reached the block layer but their request or bio end was not seen: among the {} probe runs \
                 the kernel skipped (recursion protection: a run of the same program in progress on that CPU)",
                t.unlinked, t.lost_events.recursion_misses
            ));
        } else if t.unlinked > 0 {
            why.push_str(&format!(
                "; {} reached the block layer but no request linked back to them (a stacked device whose clones \
                 iopath cannot walk back: not dm-linear, dm-crypt or md raid1, or its module has no BTF; also \
                 seen, up to 1.3% and in whole batches, on an ext4 file just written or whose metadata was \
                 just dropped, where the kernel issued requests and never reported them complete: \
                 block_rq_complete and block_io_done did not fire for them, for an independent bpftrace \
                 either)",
                t.unlinked
            ));
        }
        let l = &t.lost_events;
        if l.untagged_bios > 0 && t.direct_fs.is_none() {
            why.push_str(&format!(
                "; {} bios the traced threads queued belong to no I/O iopath follows (readahead, writeback, metadata)",
                l.untagged_bios
            ));
        }
        let other = l.total - l.untagged_bios;
        if other > 0 {
            why.push_str(&format!("; {other} lost or uncertain events"));
        }
        reasons.push(why);
    }
    let off_ns = (t.phase_sum_mean_ns as f64 - app_mean_ns as f64).abs();
    // With nothing followed the sum is no measurement (the tracer's own row at most): the
    // reason above says so, and a ratio would only look like one.
    if app_ios > 0
        && t.correlated_fraction > 0.0
        && off_ns > (RECONCILE_TOLERANCE * app_mean_ns as f64).max(RECONCILE_FLOOR_NS)
    {
        let mut why = format!(
            "the phase means add up to {:.1}% of the application's mean latency, more than {:.0}% (and {:.0} us) off",
            ratio * 100.0,
            RECONCILE_TOLERANCE * 100.0,
            RECONCILE_FLOOR_NS / 1000.0
        );
        if t.reap_not_seen > 0 && t.reap_from_ring.is_none() {
            why.push_str(&format!(
                "; {} I/Os were reaped with no syscall (SQPOLL: the application reads the CQ ring), so their \
                 wait for the reap is in no phase",
                t.reap_not_seen
            ));
        }
        reasons.push(why);
    }
    Reconciliation { reconciled: reasons.is_empty(), phase_sum_ratio: ratio, reasons }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HW_QUEUE_IDS;

    fn unfollowed(no_block_io: u64, untagged: u64, skipped: u64, direct_fs: Option<&str>) -> String {
        let t = TraceSummary {
            app_ios: 1000,
            correlated_fraction: 0.5,
            no_block_io,
            direct_fs: direct_fs.map(str::to_owned),
            lost_events: Lost {
                untagged_bios: untagged,
                recursion_misses: skipped,
                total: untagged + skipped,
                ..Default::default()
            },
            ..Default::default()
        };
        reconcile(&t, 10_000).reasons.join("; ")
    }

    #[test]
    fn a_direct_io_without_a_bio_is_never_called_a_page_cache_hit() {
        // Buffered: the page cache it is.
        assert!(unfollowed(500, 0, 0, None).contains("page-cache hits"));
        // btrfs's buffered fallback for direct writes: named, with its way out.
        let w = unfollowed(500, 500, 0, Some("btrfs"));
        assert!(w.contains("file system btrfs") && w.contains("968f19c5b1b7") && !w.contains("page-cache hits"), "{w}");
        // A direct I/O that queued nothing at all: a hole, inline data, past EOF.
        let w = unfollowed(500, 0, 0, Some("xfs"));
        assert!(w.contains("queued no bio at all (file system xfs") && !w.contains("page-cache hits"), "{w}");
        // The kernel skipped probe runs: that, not the cache.
        let w = unfollowed(500, 0, 700, Some("block device"));
        assert!(w.contains("skipped 700 probe runs") && !w.contains("page-cache"), "{w}");
        let w = unfollowed(500, 0, 0, Some("block device"));
        assert!(w.contains("on the block device had no bio iopath saw") && !w.contains("page-cache"), "{w}");
    }

    #[test]
    fn hw_queue_keys_decode_type_and_nvme_qid() {
        // Two irq queues and one poll queue (key = type * HW_QUEUE_IDS + queue_num).
        let q = hw_queues(&[(0, 10), (1, 30), (2 * HW_QUEUE_IDS + 2, 50)]);
        assert_eq!(q[0], HwQueue { id: 2, kind: "poll".into(), nvme_qid: 3, ios: 50 });
        assert_eq!(q[1], HwQueue { id: 1, kind: "default".into(), nvme_qid: 2, ios: 30 });
        assert_eq!(q[2].id, 0);
    }
}
