//! The hooks code outside the hook table asks about by name (whether one was attached, which
//! program to find): one constant each, checked against the table's rows (probe::hooks tests), so
//! a renamed hook fails a test instead of silently reading as "not attached". Pure: the report and
//! aggregation import it without the probe session.

pub const BLOCK_RQ_ISSUE: &str = "block:block_rq_issue";
pub const BLOCK_BIO_BACKMERGE: &str = "block:block_bio_backmerge";
pub const BLOCK_SPLIT: &str = "block:block_split";
pub const SYS_ENTER: &str = "raw_syscalls:sys_enter";
pub const SYS_EXIT: &str = "raw_syscalls:sys_exit";
pub const SCHED_SWITCH: &str = "sched:sched_switch";
pub const JBD2_END_COMMIT: &str = "jbd2:jbd2_end_commit";
pub const BALANCE_DIRTY_PAGES: &str = "writeback:balance_dirty_pages";
pub const FILEMAP_GET_PAGES: &str = "filemap:mm_filemap_get_pages";
pub const IOMMU_MAP: &str = "iommu:map";
pub const IOMMU_UNMAP: &str = "iommu:unmap";
pub const DMA_MAP: &str = "dma:dma_map";
pub const DMA_UNMAP: &str = "dma:dma_unmap";
/// NVMe's doorbell probes, either of which times issue -> doorbell.
pub const DOORBELL: [&str; 2] = ["fexit:nvme_queue_rq", "kprobe:nvme_queue_rq"];

/// Every name above.
pub const ALL: [&str; 15] = [
    BLOCK_RQ_ISSUE,
    BLOCK_BIO_BACKMERGE,
    BLOCK_SPLIT,
    SYS_ENTER,
    SYS_EXIT,
    SCHED_SWITCH,
    JBD2_END_COMMIT,
    BALANCE_DIRTY_PAGES,
    FILEMAP_GET_PAGES,
    IOMMU_MAP,
    IOMMU_UNMAP,
    DMA_MAP,
    DMA_UNMAP,
    DOORBELL[0],
    DOORBELL[1],
];
