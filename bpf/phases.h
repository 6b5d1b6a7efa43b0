/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by phases.bpf.c, counts.bpf.c and the Rust side (through the skeletons' types). */
#ifndef IOPATH_PHASES_H
#define IOPATH_PHASES_H

/* Histogram layout: see hist.bpf.h. */
#define HIST_SUB_BITS 5
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_MAX_MSB 40
#define HIST_SLOTS ((HIST_MAX_MSB - HIST_SUB_BITS + 2) * HIST_SUB)

/* Completions one task can have posted and not yet reaped (per syscall exit). */
#define REAP_MAX 256
/* Bios of one request walked at completion (merged sequential I/O). */
#define MAX_BIOS_PER_RQ 32
/* Events read back from io_getevents' user array per call. */
#define MAX_AIO_EVENTS 256

/* hw_queues keys: the blk-mq hctx type (0 default, 1 read, 2 poll) and its queue_num (for
 * NVMe, the I/O queue id minus one). */
#define HW_QUEUE_TYPES 3
#define HW_QUEUE_IDS 256
#define HW_QUEUE_KEY(type, id) (((type) % HW_QUEUE_TYPES) * HW_QUEUE_IDS + ((id) % HW_QUEUE_IDS))

enum phase {
	PH_SUBMISSION = 0, /* syscall entry -> block_bio_queue */
	PH_BLOCK = 1,	   /* block_bio_queue -> block_rq_issue */
	PH_DEVICE = 2,	   /* block_rq_issue -> block_rq_complete */
	PH_POSTED = 3,	   /* block_rq_complete -> completion posted (io_uring_complete) */
	PH_REAP = 4,	   /* posted -> reaped (syscall exit) */
	PH_COMPLETION = 5, /* block_rq_complete -> reaped */
	PH_TOTAL = 6,	   /* syscall entry -> reaped */
	/*
	 * NVMe only. nvme_queue_rq sets up the command (nvme_setup_cmd) and DMA-maps the data
	 * before blk_mq_start_request fires block_rq_issue, so the driver's submission work is
	 * the end of PH_BLOCK, and the device phase splits at the driver's completion.
	 */
	PH_DRIVER = 7,	    /* nvme_setup_cmd -> block_rq_issue: command + DMA map (in PH_BLOCK) */
	PH_NVME = 8,	    /* block_rq_issue -> nvme_complete_rq (in PH_DEVICE) */
	PH_NVME_SUBMIT = 9, /* block_rq_issue -> nvme_queue_rq returns: doorbell (fexit/kprobe) */
	PH_NVME_END = 10,   /* nvme_complete_rq -> block_rq_complete (in PH_DEVICE) */
	NR_PHASES = 11,
};

/* Only what histograms cannot tell: how many I/Os reached each phase is the histograms' count. */
enum counter {
	C_BIOS_UNTAGGED = 0, /* ... whose application I/O could not be identified */
	C_ISSUE_UNTRACKED,   /* rq_issue of a request with no tracked bio (other I/O) */
	C_REAP_UNMATCHED,    /* reaped events with no tracked completion */
	C_REAP_OVERFLOW,     /* posted completions beyond REAP_MAX before a reap */
	C_INFLIGHT_FULL,     /* in-flight map full: I/O not tracked */
	C_DONE_FULL,	     /* completed map full */
	C_NVME_SETUP,	     /* nvme_setup_cmd seen for a tracked request */
	C_IRQ,		     /* interrupts on the target device's vectors */
	C_SOFTIRQ_BLOCK,     /* BLOCK softirq runs */
	C_SOFTIRQ_BLOCK_NS,  /* time in BLOCK softirq */
	C_CTX_VOLUNTARY,     /* traced threads switched out while blocking */
	C_CTX_INVOLUNTARY,   /* traced threads preempted */
	C_IOMMU_MAP,	     /* iommu:map events */
	C_IOMMU_UNMAP,	     /* iommu:unmap events */
	C_DMA_MAP,	     /* dma map events (dma_map_phys / dma_map_page) */
	C_DMA_UNMAP,	     /* dma unmap events */
	C_PREEMPTED,	     /* traced threads preempted outside a traced syscall */
	C_PREEMPTED_NS,	     /* ... and the time until they ran again */
	C_BYTES,	     /* bytes of completed tracked requests */
	C_RB_DROPS,	     /* --events records the ring buffer had no room for */
	C_EXPIRED_INFLIGHT,  /* in-flight entries of bios that never completed, reclaimed */
	C_EXPIRED_DONE,	     /* completed entries never posted or reaped, reclaimed */
	C_RUNQ_WAIT,	     /* traced threads woken up ... */
	C_RUNQ_WAIT_NS,	     /* ... and the time until they ran (CPU contention) */
	C_READS,	     /* completed application I/Os that read ... */
	C_WRITES,	     /* ... and that wrote (a traced command's mix) */
	NR_COUNTERS,
};

/* How the application submitted. */
enum submit_mode {
	MODE_NONE = 0,
	MODE_URING = 1,
	MODE_AIO = 2,
};

struct hist {
	__u64 slots[HIST_SLOTS];
	__u64 sum;
	__u64 max;
};

/* One tracked bio, from block_bio_queue to block_rq_complete. */
struct inflight {
	__u64 tag; /* io_kiocb (io_uring) or user iocb pointer (aio) */
	__u64 submit_ts;
	__u64 queue_ts;
	__u64 issue_ts;
	__u64 nvme_ts;
	__u64 nvme_done_ts;
	__u32 tgid;
	__u16 mode;
	__u16 write; /* the bio writes (REQ_OP_* is odd for data-out operations) */
};

/* A completed I/O waiting to be posted/reaped. */
struct done {
	__u64 submit_ts;
	__u64 queue_ts;
	__u64 issue_ts;
	__u64 complete_ts;
};

/*
 * Slots of the open-addressed tables (slots.bpf.h): a key (0 = free) and its value, one cache
 * line each.
 */
#define SLOT_BITS 16
#define NR_SLOTS (1 << SLOT_BITS)

struct inflight_slot {
	__u64 key; /* bio */
	struct inflight v;
};

struct done_slot {
	__u64 key; /* tag */
	__u32 tgid;
	__u32 pad;
	struct done v;
	__u64 pad2[2];
};

/* One I/O, end to end (`iopath trace --events`): emitted when it is reaped. */
struct io_record {
	__u64 tag;
	__u64 submit_ts;
	__u64 queue_ts;
	__u64 issue_ts;
	__u64 complete_ts;
	__u64 posted_ts; /* 0 for aio: it posts inside the device completion */
	__u64 reap_ts;
	__u32 tgid;
	__u32 mode;
};

#endif /* IOPATH_PHASES_H */
