//! Which frames belong to the I/O path, by family, so the SVG can colour them: an IOMMU or
//! scheduler cost should be visible at a glance.

/// A family of I/O-path frames and its colour in the SVG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    IoUring,
    Aio,
    Block,
    Driver,
    IommuDma,
}

impl Family {
    pub const ALL: [Family; 5] = [Family::IoUring, Family::Aio, Family::Block, Family::Driver, Family::IommuDma];

    pub fn class(self) -> &'static str {
        match self {
            Family::IoUring => "iop-uring",
            Family::Aio => "iop-aio",
            Family::Block => "iop-block",
            Family::Driver => "iop-driver",
            Family::IommuDma => "iop-iommu",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Family::IoUring => "io_uring",
            Family::Aio => "aio",
            Family::Block => "block layer",
            Family::Driver => "driver",
            Family::IommuDma => "IOMMU/DMA",
        }
    }

    /// Colour-blind-safe (Tableau 10); IOMMU/DMA in the loudest one.
    pub fn color(self) -> &'static str {
        match self {
            Family::IoUring => "#59a14f",
            Family::Aio => "#76b7b2",
            Family::Block => "#4e79a7",
            Family::Driver => "#b07aa1",
            Family::IommuDma => "#e15759",
        }
    }
}

const IOMMU: &[&str] = &[
    "iommu_",
    "__iommu_",
    "intel_iommu_",
    "amd_iommu_",
    "iommu_dma_",
    "dma_map_",
    "dma_unmap_",
    "__dma_map_",
    "dma_direct_",
    "swiotlb_",
    "qi_",
    "domain_unmap",
    "iova_",
    "alloc_iova",
    "free_iova",
];
const DRIVER: &[&str] = &["nvme_", "virtblk_", "virtio_", "vring_", "vp_", "loop_", "lo_", "scsi_", "ahci_", "ata_"];
const BLOCK: &[&str] = &[
    "blk_",
    "__blk_",
    "bio_",
    "__bio_",
    "submit_bio",
    "__submit_bio",
    "elv_",
    "dd_",
    "bfq_",
    "kyber_",
    "blkdev_",
    "rq_qos_",
    "wbt_",
    "part_",
    "bdev_",
];
const URING: &[&str] = &[
    "io_submit_sqes",
    "io_issue_sqe",
    "io_read",
    "io_write",
    "io_queue_",
    "io_req_",
    "io_cq",
    "io_sq",
    "io_rw_",
    "io_import",
    "io_complete_rw",
    "io_fill_cqe",
    "io_post_",
    "io_do_iopoll",
    "io_run_task_work",
    "io_poll_",
    "io_init_req",
    "io_alloc_",
    "io_free_",
    "__io_",
    "tctx_task_work",
];
const AIO: &[&str] =
    &["aio_", "io_submit_one", "read_events", "do_io_getevents", "lookup_ioctx", "ioctx_", "refill_reqs"];

/// The family of a frame name (kernel frames may carry FlameGraph's `_[k]` suffix).
pub fn family(frame: &str) -> Option<Family> {
    let f = frame.strip_suffix("_[k]").unwrap_or(frame);
    let any = |list: &[&str]| list.iter().any(|p| f.starts_with(p));
    if any(IOMMU) {
        Some(Family::IommuDma)
    } else if f.contains("io_uring") || any(URING) {
        Some(Family::IoUring)
    } else if f.contains("sys_io_submit")
        || f.contains("sys_io_getevents")
        || f.contains("sys_io_pgetevents")
        || any(AIO)
    {
        Some(Family::Aio)
    } else if any(DRIVER) {
        Some(Family::Driver)
    } else if any(BLOCK) {
        Some(Family::Block)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(family("__iommu_dma_unmap_[k]"), Some(Family::IommuDma));
        assert_eq!(family("intel_iommu_map_pages_[k]"), Some(Family::IommuDma));
        assert_eq!(family("__x64_sys_io_uring_enter_[k]"), Some(Family::IoUring));
        assert_eq!(family("io_submit_sqes_[k]"), Some(Family::IoUring));
        assert_eq!(family("__x64_sys_io_submit_[k]"), Some(Family::Aio));
        assert_eq!(family("aio_read_[k]"), Some(Family::Aio));
        assert_eq!(family("blk_mq_submit_bio_[k]"), Some(Family::Block));
        assert_eq!(family("dd_dispatch_request_[k]"), Some(Family::Block));
        assert_eq!(family("virtblk_handle_req_[k]"), Some(Family::Driver));
        assert_eq!(family("nvme_queue_rq_[k]"), Some(Family::Driver));
        assert_eq!(family("schedule_[k]"), None);
        assert_eq!(family("io_schedule_[k]"), None);
    }
}
