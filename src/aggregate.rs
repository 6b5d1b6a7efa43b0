//! Raw probe data -> the trace part of a report. Pure: recorded `RawTrace`s in tests/data feed it.

use serde::{Deserialize, Serialize};

use crate::model::{Counter, Phase, RawTrace};

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
    /// Map or buffer full: I/O not tracked.
    pub dropped: u64,
    /// Sum of the programs' recursion_misses: events the kernel did not deliver to BPF.
    pub recursion_misses: u64,
    /// `--events` records the ring buffer had no room for.
    pub ring_drops: u64,
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
    /// Application I/Os followed from submit to reap, as a share of the I/Os the generator (or
    /// the traced syscalls) completed.
    pub correlated_fraction: f64,
    /// Sum of the four phase means: what the phases explain of one I/O.
    pub phase_sum_mean_ns: u64,
    pub lost_events: Lost,
    pub irq: PerIo,
    pub softirq_block: PerIo,
    pub softirq_block_ns: PerIo,
    pub iommu_map: PerIo,
    pub iommu_unmap: PerIo,
    pub dma_map: PerIo,
    pub dma_unmap: PerIo,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// Traced threads preempted outside a traced syscall (mostly on the way back to user space
    /// after a reap): runnable, not running. Total time and per I/O, in ns.
    pub preempted_ns: PerIo,
    /// Woken traced threads waiting for a CPU (wakeup -> running): CPU contention.
    #[serde(default)]
    pub runq_wait_ns: PerIo,
    /// Requests per hardware queue, busiest first.
    pub hw_queues: Vec<HwQueue>,
    pub probes: Vec<crate::model::ProbeStatus>,
    /// `--events`: records received (one per reaped I/O), when on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
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

fn stats(h: &crate::model::BpfHist) -> PhaseStats {
    let s = h.summary();
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

/// `ios`: I/Os the application completed in the traced interval (the generator's count).
pub fn summarize(raw: &RawTrace, ios: u64) -> TraceSummary {
    let per = |n: u64| PerIo { total: n, per_io: if ios == 0 { 0.0 } else { n as f64 / ios as f64 } };
    let opt = |p: Phase| {
        let h = raw.phase(p);
        (h.count > 0).then(|| stats(&h))
    };
    let phases = Phases {
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
    };
    let phase_sum_mean_ns =
        phases.submission.mean_ns + phases.block.mean_ns + phases.device.mean_ns + phases.completion.mean_ns;
    // Every reaped I/O lands once in the reap histogram.
    let reaped = raw.phase(Phase::Reap).count;
    let mut lost = Lost {
        untagged_bios: raw.counter(Counter::BiosUntagged),
        // Left over at the end, or reclaimed during the run when the address came back.
        missing_completions: raw.stuck_inflight + raw.counter(Counter::ExpiredInflight),
        never_reaped: raw.stuck_done + raw.counter(Counter::ExpiredDone),
        reaped_unmatched: raw.counter(Counter::ReapUnmatched),
        dropped: raw.counter(Counter::InflightFull)
            + raw.counter(Counter::DoneFull)
            + raw.counter(Counter::ReapOverflow),
        recursion_misses: raw.probes.iter().map(|p| p.recursion_misses).sum(),
        ring_drops: raw.counter(Counter::RbDrops),
        total: 0,
    };
    lost.total = lost.untagged_bios
        + lost.missing_completions
        + lost.never_reaped
        + lost.reaped_unmatched
        + lost.dropped
        + lost.recursion_misses
        + lost.ring_drops;
    TraceSummary {
        phases,
        correlated_fraction: if ios == 0 { 0.0 } else { (reaped.min(ios)) as f64 / ios as f64 },
        phase_sum_mean_ns,
        lost_events: lost,
        irq: per(raw.counter(Counter::Irq)),
        softirq_block: per(raw.counter(Counter::SoftirqBlock)),
        softirq_block_ns: per(raw.counter(Counter::SoftirqBlockNs)),
        iommu_map: per(raw.counter(Counter::IommuMap)),
        iommu_unmap: per(raw.counter(Counter::IommuUnmap)),
        dma_map: per(raw.counter(Counter::DmaMap)),
        dma_unmap: per(raw.counter(Counter::DmaUnmap)),
        preempted_ns: per(raw.counter(Counter::PreemptedNs)),
        runq_wait_ns: per(raw.counter(Counter::RunqWaitNs)),
        ctx_voluntary: raw.counter(Counter::CtxVoluntary),
        ctx_involuntary: raw.counter(Counter::CtxInvoluntary),
        hw_queues: hw_queues(&raw.hw_queues),
        probes: raw.probes.clone(),
        events: raw.events_received,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HW_QUEUE_IDS;

    #[test]
    fn hw_queue_keys_decode_type_and_nvme_qid() {
        // Two irq queues and one poll queue (key = type * HW_QUEUE_IDS + queue_num).
        let q = hw_queues(&[(0, 10), (1, 30), (2 * HW_QUEUE_IDS + 2, 50)]);
        assert_eq!(q[0], HwQueue { id: 2, kind: "poll".into(), nvme_qid: 3, ios: 50 });
        assert_eq!(q[1], HwQueue { id: 1, kind: "default".into(), nvme_qid: 2, ios: 30 });
        assert_eq!(q[2].id, 0);
    }
}
