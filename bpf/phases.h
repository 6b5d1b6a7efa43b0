/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by phases.bpf.c, counts.bpf.c and the Rust side (through the skeletons' types). */
#ifndef IOPATH_PHASES_H
#define IOPATH_PHASES_H

/* Histogram layout: see hist.bpf.h. */
#define HIST_SUB_BITS 5
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_MAX_MSB 40
#define HIST_SLOTS ((HIST_MAX_MSB - HIST_SUB_BITS + 2) * HIST_SUB)

/* Bios of one request walked at completion (merged sequential I/O). */
#define MAX_BIOS_PER_RQ 32
/* iocbs claimed per io_submit and events reaped per io_getevents (bpf_loop bounds): a batch
 * as deep as the generator's --qd 4096 --batch-submit 0. */
#define MAX_AIO_EVENTS 4096

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
	/* Route sub-phases, each inside PH_SUBMISSION and recorded only for I/Os on that route:
	 * PICKUP (SQPOLL): the application queued the SQE -> the SQ thread submitted it;
	 * IOWQ: punted -> a worker queued the bio (queue wait + the worker's own issue);
	 * THROTTLED: start -> bio queued by the kworker that blk-throttle released it from. */
	PH_PICKUP = 11,
	PH_IOWQ = 12,
	PH_THROTTLED = 13,
	/* Stacked devices (dm, md), the top device's own work around the lower device's requests:
	 * STACK_DOWN: top bio queued -> first lower bio queued (dm map, dm-crypt encrypt; in
	 * BLOCK); STACK_UP: last lower request completed -> top bio ended (decrypt, md; in
	 * COMPLETION). */
	PH_STACK_DOWN = 14,
	PH_STACK_UP = 15,
	/* Before the kernel: the application queued the I/O (its stamp in the SQE's user_data or
	 * the iocb's aio_data, the bundled generator only) -> the io_uring_enter / io_submit that
	 * submitted it. The application's own part of its latency. */
	PH_APP_SUBMIT = 16,
	/* After the kernel's part: iopath's own probe at the reaping syscall's exit (io_getevents,
	 * io_uring_enter), closing every I/O the call reaped before the application gets them back.
	 * Each of those I/Os waits for the whole batch: recorded once per I/O with the batch's
	 * time. The observer's cost inside the application's latency (~200 ns an I/O here, 30 I/Os
	 * a libaio reap at QD32: 6 us, 3% of the latency; 6-8% under emulation). */
	PH_TRACER_REAP = 17,
	/* The page-cache route: a buffered read or write of a file (no O_DIRECT), syscall entry ->
	 * return, split by the scheduler's view of the thread inside it: on CPU (lookup, copy,
	 * readahead submission), blocked (waiting for a folio under read, for dirty throttling, for
	 * a lock) until woken, and runnable but not running (woken, or preempted). The three add up
	 * to the total by construction; what they measure is when the thread slept. */
	PH_PC_READ = 18,
	PH_PC_READ_CPU = 19,
	PH_PC_READ_WAIT = 20,
	PH_PC_READ_RUNQ = 21,
	/* Writes and sync calls split their blocked time further, by what ran while they waited
	 * (the same offsets from PH_PC_WRITE and PH_SYNC): WAIT is then what nothing below
	 * explains (a lock, someone else's I/O); DATA the device I/O the call queued itself
	 * (writeback of its dirty pages); JOURNAL a journal commit of its file system (jbd2);
	 * FLUSH a cache flush or FUA write on its disk outside a commit; THROTTLED a
	 * balance_dirty_pages pause (dirty throttling). */
	PH_PC_WRITE = 22,
	PH_PC_WRITE_CPU = 23,
	PH_PC_WRITE_WAIT = 24,
	PH_PC_WRITE_RUNQ = 25,
	PH_PC_WRITE_DATA = 26,
	PH_PC_WRITE_JOURNAL = 27,
	PH_PC_WRITE_FLUSH = 28,
	PH_PC_WRITE_THROTTLED = 29,
	/* fsync and fdatasync: syscall entry -> return, split as writes are. Not I/Os of their
	 * own: counted apart, set against the application's own sync latency. */
	PH_SYNC = 30,
	PH_SYNC_CPU = 31,
	PH_SYNC_WAIT = 32,
	PH_SYNC_RUNQ = 33,
	PH_SYNC_DATA = 34,
	PH_SYNC_JOURNAL = 35,
	PH_SYNC_FLUSH = 36,
	PH_SYNC_THROTTLED = 37,
	/* Inside PH_SYNC_JOURNAL: the commit's own cache flush / FUA write on the disk. */
	PH_SYNC_JOURNAL_FLUSH = 38,
	/* copy_file_range and sendfile between files (cp copies this way): syscall entry ->
	 * return, split as writes are (the bios it queued are the source's reads). */
	PH_PC_COPY = 39,
	PH_PC_COPY_CPU = 40,
	PH_PC_COPY_WAIT = 41,
	PH_PC_COPY_RUNQ = 42,
	PH_PC_COPY_DATA = 43,
	PH_PC_COPY_JOURNAL = 44,
	PH_PC_COPY_FLUSH = 45,
	PH_PC_COPY_THROTTLED = 46,
	/* Writeback of pages the traced processes dirtied, whoever issues it (a flusher, a sync
	 * call): per request, allocated -> issued (rq->start_time_ns; 0 when the queue keeps no
	 * time stamps) and issued -> completed. A request counts for its first bio's file. */
	PH_WB_BLOCK = 47,
	PH_WB_DEVICE = 48,
	/* io_uring reads and writes of buffered files (the page cache): no bio of their own. The
	 * kernel's part is submission -> posted (the lookup and copy inline, or the wait for a page
	 * and the retry from task work, or an io-wq punt); then the reap. ASYNC: the kernel's part
	 * of those not completed inside the submitting call. */
	PH_UPC = 49,
	PH_UPC_KERNEL = 50,
	PH_UPC_REAP = 51,
	PH_UPC_ASYNC = 52,
	/* io_uring: the application took the CQE from its ring between two looks at the ring's
	 * head (cq_ring.bpf.h); the I/O ends at the first, this is the bound's width. */
	PH_RING = 53,
	/* SQPOLL: the application wrote the SQE between two looks at the SQ ring's tail; the I/O
	 * starts at the first (PH_PICKUP runs from there), this is the bound's width. */
	PH_SQ_RING = 54,
	/* A file system's own end-io work inside COMPLETION (fs_endio.bpf.h; btrfs verifies a
	 * read's checksums in its end-io workers before the I/O ends): FS_ENDIO_WAIT the last
	 * request completed -> the worker started on it; FS_ENDIO the worker's run (checksums, then
	 * the I/O's end). */
	PH_FS_ENDIO_WAIT = 55,
	PH_FS_ENDIO = 56,
	NR_PHASES = 57,
};

/* Offsets of a buffered family's rows from its first phase (PH_PC_READ uses the first four). */
enum pc_row {
	PCR_TOTAL = 0,
	PCR_CPU = 1,
	PCR_WAIT = 2,
	PCR_RUNQ = 3,
	PCR_DATA = 4,
	PCR_JOURNAL = 5,
	PCR_FLUSH = 6,
	PCR_THROTTLED = 7,
};

/* Only what histograms cannot tell: how many I/Os reached each phase is the histograms' count. */
enum counter {
	C_BIOS_UNTAGGED = 0, /* ... whose application I/O could not be identified */
	C_ISSUE_UNTRACKED,   /* rq_issue of a request with no tracked bio (other I/O) */
	C_REAP_UNMATCHED,    /* reaped events with no tracked completion */
	C_REAP_OVERFLOW,     /* posted CQEs not parked (RING_MAX on a ring) */
	C_INFLIGHT_FULL,     /* per-I/O table (ios) full: I/O not tracked */
	C_DONE_FULL,	     /* unused since routes (kept: raw.json indexes) */
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
	C_EXPIRED_INFLIGHT,  /* unused since routes (kept: raw.json indexes) */
	C_EXPIRED_DONE,	     /* reclaimed claims: an earlier I/O never closed */
	C_RUNQ_WAIT,	     /* traced threads woken up ... */
	C_RUNQ_WAIT_NS,	     /* ... and the time until they ran (CPU contention) */
	C_READS,	     /* completed application I/Os that read ... */
	C_WRITES,	     /* ... and that wrote (a traced command's mix) */
	C_NO_BLOCK_IO, /* I/Os closed without a bio of their own (page cache, pipes, sockets) */
	C_DISORDERED,  /* closed I/Os whose timestamps were out of order: not in any histogram */
	C_NO_REAP,     /* I/Os whose reap no probe sees (SQPOLL: read from the CQ ring) */
	C_UNLINKED, /* I/Os whose bios were queued but never seen in a request (stacked device) */
	/* The page-cache route (buffered reads and writes of files): */
	C_PC_READS_WAITED,  /* buffered reads that blocked inside the call (a miss, or a lock) */
	C_PC_READS_QUEUED,  /* ... that queued bios themselves (readahead they started) */
	C_PC_BIOS,	    /* bios queued from inside buffered calls (readahead, sync writes) */
	C_PC_BIO_BYTES,	    /* ... and their bytes */
	C_PC_MERGES,	    /* ... merged into a request already queued (back/front merge) */
	C_PC_RA_SYNC,	    /* synchronous readahead started by a buffered read (a miss) */
	C_PC_RA_ASYNC,	    /* asynchronous readahead started by one (a hit on the marker) */
	C_PC_BYTES_READ,    /* bytes the buffered reads returned */
	C_PC_BYTES_WRITTEN, /* bytes the buffered writes took */
	C_PC_SPLITS,	    /* ... bios of theirs split to fit the device (max_sectors_kb) */
	/* Sync calls and the journal and flushes behind them: */
	C_FSYNCS,	    /* fsync calls on disk files */
	C_FDATASYNCS,	    /* fdatasync calls */
	C_SYNC_WRITES,	    /* buffered writes with O_SYNC / O_DSYNC / RWF_DSYNC (in the writes) */
	C_SYNC_BIOS,	    /* data bios fsync/fdatasync calls queued themselves */
	C_SYNC_BIO_BYTES,   /* ... and their bytes */
	C_SYNC_OWN_FLUSHES, /* cache flushes a sync call or write issued itself */
	C_SYNC_JOURNAL_WAITS, /* sync calls and writes that waited through a journal commit */
	C_JBD2_COMMITS,	      /* jbd2 commits on the disks of the traced calls */
	C_JBD2_COMMIT_NS,     /* ... and their time, start -> end */
	C_FLUSH_RQS,	      /* cache-flush requests completed on those disks */
	C_FUA_RQS,	      /* FUA writes completed there */
	C_DIRTY_PAUSES,	      /* balance_dirty_pages pauses inside traced writes */
	C_DIR_SYNCS,	      /* of those fsync/fdatasync calls, on a directory */
	C_PC_BYTES_COPIED,    /* bytes copy_file_range / sendfile calls returned */
	C_WB_DIRTIED,	      /* pages the traced processes made dirty (writeback_dirty_folio) */
	C_WB_BYTES,	      /* bytes of writeback bios of their files, on their files' disks */
	C_WB_FILES_FULL,      /* files not followed: the wb_files table was full */
	/* --pagecache count: counted from filemap's tracepoints, no call timed */
	C_PCC_READS, /* filemap_get_pages calls of the traced processes (one per cached read) */
	C_PCC_PAGES, /* pages they asked for */
	C_PCC_ADDED, /* pages they added to the cache (a miss, readahead, a new page written) */
	/* io_uring on buffered files */
	C_UPC_INLINE,	 /* completed inside the submitting io_uring_enter (the cache had it) */
	C_UPC_BIOS,	 /* bios the submitting call queued for them (readahead, writeback) */
	C_UPC_BIO_BYTES, /* ... and their bytes */
	C_UPC_BYTES,	 /* bytes the requests moved (their CQEs' results) */
	/* iopath top */
	C_TOP_FULL, /* closed I/Os not aggregated: the top table was full (userspace evicts exited
		     * processes' keys every refresh) */
	C_USER_UNREADABLE, /* an application's iocb or io_event array could not be read (aio
			    * requests then not claimed or not reaped) */
	/* io_uring's CQ ring (cq_ring.bpf.h) */
	C_URING_ENTERS,	    /* io_uring_enter calls of the traced threads that submitted SQEs ... */
	C_URING_SQES,	    /* ... and the SQEs they submitted (the application's batching) */
	C_DISORDERED_SPANS, /* CQ ring bounds that ended before they began (a CQE posted on
			     * another CPU after the look that took it read its clock): not
			     * recorded, never a wrapped u64 */
	C_ISSUE_UNSTAMPED,  /* lean trace: requests completed with block_rq_issue detached on a
			     * queue whose io_start_time_ns is not trusted: device phase unknown */
	NR_COUNTERS,
};

/* How the application submitted: io_record.mode's low 16 bits. */
enum submit_mode {
	MODE_NONE = 0,
	MODE_URING = 1,
	MODE_AIO = 2,
	MODE_SYNC = 3, /* read/write/pread/preadv2 ... : the I/O happens inside the syscall */
	MODE_BIO = 4,  /* top / serve: a bio of no I/O a route follows (readahead, writeback,
			* metadata), its own I/O from its queue to its end */
};

/* The route an I/O took: io_record.mode's high 16 bits (flags, several may hold). */
enum route_flag {
	RF_SQPOLL = 1 << 16, /* submitted by the SQ thread */
	RF_IOWQ = 1 << 17,   /* punted to an io-wq worker (IOSQE_ASYNC, or the kernel's choice) */
	RF_THROTTLED = 1 << 18, /* bio queued later by a kworker (blk-throttle) */
	RF_SPLIT = 1 << 19,	/* issued as more than one request (split bios) */
	RF_WRITE = 1 << 20,
	RF_HIPRI = 1 << 21,	/* RWF_HIPRI (preadv2/pwritev2): polled sync I/O */
	RF_NO_REAP = 1 << 22,	/* closed when posted: the reap is not visible to any probe */
	RF_STACKED = 1 << 23,	/* went through a stacked device: its bios were cloned (dm, md) */
	RF_CACHED = 1 << 24,	/* io_uring on a buffered file: the page cache, no bio of its own */
	RF_INLINE = 1 << 25,	/* ... completed inside the submitting io_uring_enter */
	RF_AT_BIO = 1 << 26,	/* top / serve without syscall hooks: claimed at its first bio and
				 * closed when its last bio ended; submission and completion not
				 * timed */
	RF_BIO_BASED = 1 << 27, /* its bios went to a bio-based device (zram, brd, pmem): no
				 * request; the device phase is the bio's queueing to its end */
};
#define MODE_MASK 0xffff

/* routes map keys: route kind * 2 + (write ? 1 : 0). */
enum route_kind {
	RK_URING = 0,	      /* io_uring from the submitting thread */
	RK_SQPOLL = 1,	      /* io_uring SQ thread */
	RK_IOWQ = 2,	      /* io_uring io-wq worker */
	RK_AIO = 3,	      /* libaio */
	RK_SYNC = 4,	      /* synchronous syscalls */
	RK_THROTTLED = 5,     /* also counted under its submit route */
	RK_SPLIT = 6,	      /* likewise */
	RK_HIPRI = 7,	      /* likewise */
	RK_STACKED = 8,	      /* likewise */
	RK_PAGECACHE = 9,     /* buffered read/write of a file: through the page cache */
	RK_URING_CACHED = 10, /* io_uring read/write of a buffered file */
	RK_BIO_BASED = 11,    /* also counted under its submit route */
	NR_ROUTE_KINDS = 12,
};
#define NR_ROUTE_KEYS (NR_ROUTE_KINDS * 2)

/* The bundled generator's io_uring user_data and aio aio_data: a slot index in the low
 * UD_SLOT_BITS, the time it queued the I/O above (src/loadgen mirrors these). */
enum ud_bits {
	UD_SLOT_BITS = 20,
	UD_STAMP_BITS = 64 - UD_SLOT_BITS,
};

/* System calls per I/O: counted per number for the traced threads. */
#define NR_SYSCALL_SLOTS 512

struct hist {
	__u64 slots[HIST_SLOTS];
	__u64 sum;
	__u64 max;
};

/*
 * Slots of the open-addressed tables (slots.bpf.h): a key (0 = free) and its value.
 */
#define SLOT_BITS 16
#define NR_SLOTS (1 << SLOT_BITS)

/* The traced I/O's span on one CPU (io_state.bpf.h spans). */
struct io_span {
	__u64 first; /* earliest submission of an I/O closed here */
	__u64 last;  /* latest reap */
};

/* One I/O, end to end (`iopath trace --events`): emitted when it is reaped. */
struct io_record {
	__u64 tag;	   /* io_kiocb (io_uring), user iocb (aio), task (sync) */
	__u64 submit_ts;   /* the route's start: syscall entry, or the application's SQE stamp */
	__u64 queue_ts;	   /* first bio queued */
	__u64 issue_ts;	   /* first request issued */
	__u64 complete_ts; /* last request completed */
	__u64 posted_ts;   /* 0 where nothing posts apart from the device completion (aio, sync) */
	__u64 reap_ts;
	__u32 tgid;
	__u32 mode;  /* enum submit_mode | enum route_flag */
	__u32 dev;   /* disk of its first bio (the kernel's dev_t: major << 20 | minor) */
	__u32 bytes; /* bytes of the requests completed for it */
	__u32 tid;   /* the thread that submitted it (an SQPOLL thread, for SQPOLL) */
	__u32 pad;
};
_Static_assert(sizeof(struct io_record) == 80, "io_record is the 80-byte events/2 record");

/* An interrupt on a traced disk's vectors, when --events keeps a timeline (--perfetto). */
struct irq_stamp {
	__u64 ts;
	__u32 irq;
	__u32 cpu;
};

/*
 * iopath top: closed I/Os per (process, disk, route, direction), cumulative; userspace takes
 * differences each refresh and names the process's cgroup itself (from /proc, cgroup v1 or
 * v2). The histograms are coarser than struct hist's (8 buckets a power of two from 1 us, a
 * bucket's bounds within 12.5%, so a Prometheus `le` interpolation lands within ~6% of the
 * value): 6.6 KiB a key instead of 38 KiB, 1024 keys = 6.8 MiB of kernel memory in all.
 */
#define TOP_SUB_BITS 3
#define TOP_SUB (1 << TOP_SUB_BITS)
#define TOP_MIN_MSB 10 /* below 2^10 ns: one bucket */
#define TOP_MAX_MSB 35 /* from 2^36 ns (69 s): the last bucket */
#define TOP_SLOTS (1 + (TOP_MAX_MSB - TOP_MIN_MSB + 1) * TOP_SUB)
#define TOP_PHASES 4 /* submission, block, device, completion */
#define TOP_MAX_KEYS 1024

/* top's routes beyond the followed ones (enum route_kind 0..4): bios of no followed I/O. */
#define TOP_ROUTE_BIO 16     /* queued by a process: its buffered I/O's readahead, writeback */
#define TOP_ROUTE_KTHREAD 17 /* queued by a kernel thread: the flushers, the journal */
/* The io_slot disc of a bio's own I/O (keyed by the bio): no aio kioctx's low bits are this. */
#define BIO_DISC 0xfffffffeU

struct top_key {
	__u64 cgroup; /* the io cgroup its first bio was charged to (bi_blkg; its directory's
		       * inode), 0: none */
	__u32 tgid;   /* 0: a kernel thread's bio (TOP_ROUTE_KTHREAD) */
	__u32 dev;
	__u16 route; /* enum route_kind of its submit route (uring, sqpoll, iowq, aio, sync), or
		      * TOP_ROUTE_* */
	__u16 write;
	__u32 pad;
};

struct top_val {
	__u64 ios;
	__u64 bytes;
	__u64 sum[TOP_PHASES];
	__u64 slots[TOP_PHASES * TOP_SLOTS]; /* phase p's at p * TOP_SLOTS */
};

/*
 * A bio's link to the I/O that owns it, made once at block_bio_queue so the request hooks find
 * the I/O with two array lookups instead of deriving it again (a handful of probe reads each).
 * A cache: a bio without one (a split child) is derived; a stale one is refused by `start`.
 */
struct link_slot {
	__u64 key;    /* bio */
	__u64 io_key; /* the io_slot's key ... */
	__u64 start;  /* ... and its r.submit_ts, which a reused io_kiocb would not share */
	__u32 disc;
	__u32 idx; /* its own index in the table (the compat build frees it by index) */
};

/*
 * One application I/O from its route's claim to its reap, keyed by the I/O itself so any context
 * can find it: the io_kiocb (io_uring), the user iocb with its kioctx (aio), the task (sync).
 */
struct io_slot {
	__u64 key;
	__u32 disc; /* aio: the kioctx's low 32 bits (forked processes share iocb addresses) */
	__u32 nrq;  /* requests issued for it */
	/* The record beside the key: every hook that finds the slot reads or stamps it, so the
	 * two share the slot's first 128 bytes (two cache lines, not three). */
	struct io_record r;
	__u64 pickup_ts;      /* io_uring_submit_req */
	__u64 punt_ts;	      /* io_uring_queue_async_work */
	__u64 nvme_ts;	      /* nvme_setup_cmd of its (last) request */
	__u64 nvme_done_ts;   /* nvme_complete_rq of its (last) request */
	__u64 lower_queue_ts; /* stacked: first clone queued on a lower device */
	__u64 top_end_ts;     /* stacked: the top bio ended (block_bio_complete) */
	__u64 cgroup;	      /* top: the io cgroup of its first bio (top_key.cgroup) */
	__u32 bios;	      /* top: its bios queued and not yet ended (RF_AT_BIO closes at 0) */
	__u32 idx;	      /* its own index in the table (the compat build frees it by index) */
	__u64 inst; /* top, RF_AT_BIO: the request's instance (block_core.bpf.h at_bio_stale) */
	__u32
	    cq_tail; /* posted, waiting in the CQ ring: ctx->cached_cq_tail at io_uring_complete */
	__u32 pad2;
	__u64 fs_endio_ts;     /* btrfs: its end-io worker started on it (fs_endio.bpf.h) */
	__u64 fs_endio_end_ts; /* ... and returned */
};
/* A whole number of cache lines (the tables are mmapable arrays: their values start on a page):
 * a slot shares none with its neighbours, in flight on other CPUs (176 bytes straddled them). */
_Static_assert(sizeof(struct io_slot) % 64 == 0, "io_slot is whole cache lines");

/*
 * Why a writeback bio was written: the flusher's work reason (the kernel's enum wb_reason,
 * 0..7, from writeback_start), or inside a sync call / O_SYNC write, or anything else
 * (direct reclaim, a write_inode without work).
 */
enum wb_why {
	WBW_KERNEL_REASONS = 8, /* 0..7: background, vmscan, sync, periodic, laptop timer, fs free
				 * space, forker thread, foreign flush */
	WBW_SYNC_CALL = 8,
	WBW_OTHER = 9,
	NR_WB_WHY = 10,
};

/* A file the traced processes dirtied, and the writeback of its pages (wb_files map). */
struct wb_file {
	__u64 ino;
	__u64 cgroup;  /* the first dirtier's io (blkio) cgroup id: its directory's inode */
	__u64 dirtied; /* pages the traced processes made dirty */
	__u64 bytes[NR_WB_WHY];
	__u64 bios;
	__u64 rqs;
	__u64 block_ns;
	__u64 device_ns;
	__u32 dev;  /* the file system's s_dev (major << 20 | minor) */
	__u32 tgid; /* the first traced process that dirtied it */
	char comm[16];
	char name[32]; /* its dentry's name */
};

/* A writeback request in flight (wb_rqs map, keyed by the request). */
struct wb_rq {
	__u64 file; /* wb_files key: the inode */
	__u64 issue_ts;
	__u64 alloc_ts;
};

/*
 * The one-hook tier (stamps.bpf.c, top and serve's default): one program at block_rq_complete
 * reads the request's own clock (start_time_ns: allocated; io_start_time_ns: issued) for the
 * block and device phases, per-CPU rows by (io cgroup, disk, route by the bio's end_io, op).
 * A device's stamps are used only once checked against hooked times on the same requests
 * (block_bio_queue, block_rq_issue attached for a check window); a device whose stamp is absent
 * or off is timed by those hooks instead (enum stamps_mode).
 */
/* top_key.tgid of a one-hook row: completion names no process. */
#define STAMPS_NO_PROCESS 0xffffffffU
/* The row table's spill-over (a per-CPU hash): keys whose row slots were taken. */
#define STAMPS_MAX_KEYS 512
/* Row slots per CPU, indexed by a hash of the key (two probes): 16 x 3.4 KiB = 54 KiB a CPU.
 * A per-CPU hash lookup cost ~57 ns a run here (jhash of the key, the bucket walk); a slot,
 * ~3 ns. A host's hot keys (disks x routes x ops x io cgroups doing I/O) fit; the rest spill. */
#define STAMPS_ROW_BITS 4
#define STAMPS_ROWS (1 << STAMPS_ROW_BITS)
/* request_queue ids (q->id) with a check and a mode of their own. */
#define STAMPS_MAX_QUEUES 1024
/* block, device: top_val's phases 1 and 2. */
#define STAMPS_PHASES 2
/* Issue times by (queue, hw queue, tag): 4 MiB. */
#define STAMPS_TAG_SLOTS (1 << 18)
/* Queue times by bio address: 1 MiB. */
#define STAMPS_BIO_SLOTS (1 << 16)
/* |stamp - hook| by power of two of ns: 1 ns .. 8 ms and beyond. */
#define STAMPS_ERR_SLOTS 24

/* The one-hook tier's routes (top_key.route), named by the first bio's end_io. */
enum stamps_route {
	SR_DIRECT = 20,	      /* a direct I/O's end_io (iomap, a block device's) */
	SR_WAITED = 21,	      /* submit_bio_wait: a small sync direct I/O, a metadata read, ... */
	SR_OTHER_END_IO = 22, /* an end_io iopath does not name: the page cache's reads and
			       * writeback, journals, metadata, a file system's own direct I/O */
	SR_FLUSH = 23,	      /* a cache flush (no bio) */
	SR_PASSTHROUGH = 24,  /* a driver command (REQ_OP_DRV_IN/OUT: NVMe passthrough, SG_IO) */
	SR_OTHER = 25,	      /* any other request without a bio */
	SR_STACKED = 26,      /* a stacked device's bio (dm, md: a clone, or its own end_io): the
			       * I/O's route is the upper device's, not known here */
};

/* stamps_queue.mode, written by userspace after a check: which stamp a device's phases use. */
enum stamps_mode {
	SM_CHECKED = 1,	    /* a check decided: without it the phases wait for a check window */
	SM_ISSUE_STAMP = 2, /* io_start_time_ns trusted for the device phase (else the hook) */
	SM_QUEUE_STAMP = 4, /* start_time_ns trusted for the block phase's start (else the hook) */
};

struct stamps_queue {
	__u32 dev; /* the disk this queue id was last seen with: a new disk resets the mode */
	__u32 mode;
};

/* One stamp's check on one queue: the requests compared (both times read in the same run). */
struct stamps_check_one {
	__u64 n;	/* requests with the hooked time ... */
	__u64 absent;	/* ... whose stamp was 0 (no queue stats, iostats off, passthrough) */
	__u64 within;	/* ... within max(1 us, 2% of the hooked phase) */
	__s64 skew_sum; /* sum of stamp - hooked time, ns */
	__u64 err[STAMPS_ERR_SLOTS]; /* |stamp - hooked| by power of two */
};

struct stamps_check {
	struct stamps_check_one issue; /* io_start_time_ns vs block_rq_issue */
	struct stamps_check_one queue; /* start_time_ns vs the first bio's block_bio_queue */
};

struct stamps_val {
	__u64 ios;
	__u64 bytes;
	__u64 sum[STAMPS_PHASES];
	__u64 slots[STAMPS_PHASES * TOP_SLOTS];
};

/* A row slot: key.tgid is STAMPS_NO_PROCESS once a key has it, 0 while free. */
struct stamps_row {
	struct top_key key;
	struct stamps_val val;
};

struct stamps_slot {
	__u64 key; /* the request (tag slots) or the bio (bio slots) it was written for */
	__u64 ns;
};

enum stamps_counter {
	SC_FULL,	 /* I/Os not aggregated: the row table was full */
	SC_UNCHECKED,	 /* I/Os of a device not checked yet: counted, phases unknown */
	SC_NO_HOOK_TIME, /* I/Os of a device timed by hooks whose hooked time was not found
			  * (issued before the hook attached, or its slot reused): phases unknown */
	SC_DISORDERED,	 /* times out of order (a stale stamp): phases not recorded */
	SC_QUEUE_BEYOND, /* queue ids beyond STAMPS_MAX_QUEUES: phases unknown */
	NR_STAMPS_COUNTERS,
};

#endif /* IOPATH_PHASES_H */
