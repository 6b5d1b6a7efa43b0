// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-I/O phases on every route an I/O takes: submission (the route's start -> bio queued), block
 * layer (bio queued -> request issued), device (issued -> completed), completion (completed ->
 * posted -> reaped).
 *
 * Three parts. Routes (this file's syscall and io_uring sections) claim an I/O when the
 * application hands it over and close it when the application gets the result: io_uring from
 * the submitting thread, the SQ thread or an io-wq worker; libaio; synchronous read/write. The
 * block core (block_core.bpf.h) stamps the I/O from its bios and requests in whatever context
 * they move, never asking which route it came by. io_state.bpf.h holds the per-I/O state and is
 * the one place phases are recorded. Every entry point is a thin wrapper over one handler so
 * tp_btf and raw_tp variants share the logic; userspace picks which to load.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "compat.bpf.h"

/* Process to trace; 0 = every process. */
const volatile __u32 targ_tgid = 0;
/* Trace a process tree (traced_tgids, grown on fork) instead of the single targ_tgid. */
const volatile bool targ_tree = false;
/* Emit one io_record per reaped I/O into `events`. */
const volatile bool targ_events = false;
/* The traced application (the bundled generator) stamps each SQE's user_data and each iocb's
 * aio_data with the time it queued the I/O (the low UD_STAMP_BITS of CLOCK_MONOTONIC ns, above a
 * UD_SLOT_BITS slot index): its own time before the kernel, SQPOLL's pickup, slot_clock below. */
const volatile bool targ_app_stamp = false;
/* --lean (io_uring, the bundled generator): no syscall hooks. A request starts when io_uring takes
 * its SQE and ends when its completion is posted; the generator times its own reap from the
 * posting time (slot_clock), as with SQPOLL. */
const volatile bool targ_lean = false;
/* --lean aio (the bundled generator, direct I/O): each request is claimed at its first bio, from
 * the kernel's aio_kiocb, not at io_submit's entry from the user's iocb array (two user-memory
 * reads per iocb: sys_enter cost 465 ns a run on io_submit). It starts at the time the generator
 * wrote into slot_clock just before its io_submit, so no sys_enter hook runs at all (208 ns a run
 * and the syscall slow path on every system call); io_getevents' exit reaps, its arguments read
 * from the registers. A request that makes no bio is not followed: refused for buffered jobs. */
const volatile bool targ_aio_at_bio = false;
/* Count the traced threads' system calls by number. */
const volatile bool targ_syscalls = true;
/* Kernel functions that tell who owns a bio (from /proc/kallsyms; 0 = absent). */
const volatile __u64 targ_iomap_end_io = 0;
const volatile __u64 targ_blkdev_end_io = 0;
const volatile __u64 targ_blkdev_end_io_async = 0;
const volatile __u64 targ_bio_wait_end_io = 0;
const volatile __u64 targ_blkdev_simple_end_io = 0;
const volatile __u64 targ_chain_end_io = 0;
const volatile __u64 targ_aio_complete = 0;
/* ... and the stacked devices' clones (module symbols; 0 where the module is not loaded). */
const volatile __u64 targ_dm_end_io = 0;
const volatile __u64 targ_crypt_end_io = 0;
const volatile __u64 targ_raid1_read_end_io = 0;
const volatile __u64 targ_raid1_write_end_io = 0;
const volatile __u64 targ_md_clone_end_io = 0;

/* block_bio_queue(request_queue, bio): kernels before 5.11 (hooks.rs, from the kernel's BTF). */
const volatile bool targ_bio_queue_q = false;

/* Set by userspace once every link is attached, so attach order cannot skew counts. */
volatile __u32 enabled = 0;

/*
 * The lean trace's issue stamp: where a check found a queue's io_start_time_ns within max(1 us,
 * 2%) of block_rq_issue's time on the same requests, the device phase starts at the stamp and
 * block_rq_issue is detached (src/probe/issue_stamps.rs: 0.75x -> 0.83x untraced without it on
 * the loop device at QD32). The stamp is 0 where the queue keeps no stats (wbt, iocost,
 * iolatency off): that queue keeps its hook.
 */
const volatile bool targ_issue_stamps = false;
/* Userspace: 1 while a check window compares each stamp with the hooked time. */
volatile __u32 issue_checking = 0;
/* Userspace: 1 once some queue's stamp is trusted (SM_ISSUE_STAMP in issue_queues) ... */
volatile __u32 issue_stamps = 0;
/* ... and 1 while block_rq_issue is detached (the hardware queue is counted at completion). */
volatile __u32 issue_detached = 0;

/* Each queue id's disk and mode (SM_CHECKED | SM_ISSUE_STAMP), written by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAMPS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct stamps_queue);
} issue_queues SEC(".maps");

/* Per queue id, this CPU's comparisons of io_start_time_ns with block_rq_issue's time (the
 * .issue half; .queue stays 0). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAMPS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct stamps_check);
} issue_checks SEC(".maps");

#include "traced.bpf.h"
#include "stamp_check.bpf.h"
#include "block_core.bpf.h"

/* A field of a kernel pointer: a plain load from a BTF pointer (tp_btf), a CO-RE probe read
 * otherwise (raw_tp). The flag is constant at each call site, so one branch is emitted. */
#define RQ_READ(btf, p, a) ((btf) ? (p)->a : BPF_CORE_READ(p, a))

struct task_ctx {
	__u64 enter_ts;
	__u64 aio_events; /* io_getevents: the user's io_event array */
	__u64 aio_iocbs;  /* io_submit: the user's iocb pointer array ... */
	__u32 aio_nr;	  /* ... and its length */
	__u32 aio_disc;	  /* the kioctx of the call ... */
	__u64 aio_ctx_id; /* ... and its aio_context_t: the last one looked up, kept */
	__u32 in_submit;  /* inside io_uring_enter / io_submit */
	__u32 sqes;	  /* SQEs the current io_uring_enter submitted */
	__u64 ring;	  /* the io_ring_ctx it last entered or submitted to (cq_ring.bpf.h) */
	__u32 in_sys;	  /* inside a traced I/O syscall */
	/* excluded_tids, looked up once per thread: 1 traced, 2 one of iopath's own (its vmstat
	 * sampler reads /proc/vmstat from the generator's process: 89 "buffered reads" a run). */
	__u32 own;
	/* I/Os the reaping syscall's exit closed so far. Counted here, not in the bpf_loop
	 * context on the stack: the verifier follows a stack counter's every value through the
	 * callback and gives up (8193 jumps); map memory it does not track. */
	__u32 closed;
	/* The page-cache route: inside a buffered read, write or a sync call (enum pc_family). */
	__u32 buffered;
	__u32 pc_bios;	     /* data bios this call queued */
	__u32 sync_call;     /* PC_SYNC: 1 fsync, 2 fdatasync; | 4 on a directory */
	__u32 sync_write;    /* PC_WRITE with O_SYNC / O_DSYNC / RWF_DSYNC */
	__u32 own_flushes;   /* cache flushes this call issued itself */
	__u32 throttling;    /* the current block is a balance_dirty_pages pause */
	__u64 disk;	     /* the gendisk of the call's file (disk_busy key; 0 unknown) */
	__u64 throttle_ts;   /* balance_dirty_pages traced this pause at this time */
	__u64 block_ts;	     /* it blocked (switched out, not preempted) at this time ... */
	__u64 in_preempt_ts; /* ... or was preempted at this time */
	__u64 runq_from;     /* woken inside the call at this time, not yet running */
	__u64 snap[3];	     /* the disk's busy integrals when it blocked (struct disk_busy) */
	__u64 waited_ns;     /* blocked, nothing below explains it (reads: all blocked time) */
	__u64 runq_ns;	     /* runnable but not running, in this call */
	__u64 data_ns;	     /* blocked, it had queued data bios itself */
	__u64 journal_ns;    /* blocked while a journal commit of its disk ran ... */
	__u64 jflush_ns;     /* ... of which a flush / FUA write of that disk was in flight */
	__u64 flush_ns;	     /* blocked while a flush / FUA ran outside a commit */
	__u64 throttled_ns;  /* in balance_dirty_pages pauses */
	__u64 preempt_ts;    /* preempted outside a syscall at this time */
	__u64 wake_ts;	     /* woken up at this time, not yet running */
	/* Posted, not yet taken CQEs wait in the ios table, per ring (cq_ring.bpf.h). Not here:
	 * 256 records made this 20.9 KiB, and from 6.19 on task storage is allocated with
	 * kmalloc_nolock, which serves 8 KiB at most: bpf_task_storage_get(F_CREATE) returned NULL
	 * for every thread on Debian's 7.2 and 7.3, and no syscall route was followed there
	 * (bpf_local_storage_map lost its bpf_mem_alloc in their BTF). */
};

_Static_assert(sizeof(struct task_ctx) <= 4096,
	       "task storage values must stay small (kmalloc_nolock)");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* The compat build's per-thread state (compat.bpf.h), by thread id: an LRU bounds what threads
 * that never reach exit leave behind. Userspace sizes it to one entry in the modern build and
 * does not create task_ctxs in the compat one. */
#define TASK_CTX_TIDS 2048
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TASK_CTX_TIDS);
	__type(key, __u32);
	__type(value, struct task_ctx);
} task_ctx_tids SEC(".maps");

/* All zeros: the compat build's new task_ctx is copied from here (a value this size does not fit
 * the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_ctx);
} task_ctx_zero SEC(".maps");

/* System calls of the traced threads, by number (x86_64). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} syscalls SEC(".maps");

/*
 * One time per slot of the bundled generator, shared with it (mmap; it runs in the tracer's
 * process), sized by userspace (jobs x qd). io_uring under SQPOLL or --lean: when the completion
 * in each slot was posted. The application takes completions from the CQ ring with no syscall
 * hook seeing it; the generator reads this as it takes each CQE and times its own wait against
 * the same clock. aio under --lean: written by the generator, the time it called io_submit for
 * the slot's I/O (aio_claim_at_bio starts the I/O there).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} slot_clock SEC(".maps");

/*
 * What ran on a disk while a traced write or sync call was blocked on it: a journal commit
 * (jbd2_start_commit -> jbd2_end_commit of the file system on it) and cache flushes / FUA writes
 * (issue -> complete). Kept as time integrals, split by which of the two were in progress, so a
 * call's blocked interval [b, w] is attributed by the integrals' growth between b and w, exactly,
 * whatever else the disk did. Entries are made by the traced calls (a disk nobody traced is not
 * followed); the lock is needed because a commit ends on the jbd2 thread's CPU while a flush
 * completes in another CPU's interrupt. tp_btf programs only (raw_tp ones may not take locks).
 */
enum busy_kind { BUSY_J = 0, BUSY_JF = 1, BUSY_F = 2 };

struct disk_busy {
	struct bpf_spin_lock lock;
	__u32 commits; /* commits in progress */
	__u32 flushes; /* flush / FUA requests in flight */
	__u64 last;    /* the integrals are complete up to this time */
	__u64 acc[3];  /* ns with: a commit only, a commit and a flush, a flush only */
	__u64 commit_start;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct disk_busy);
} disk_busy SEC(".maps");

/* Call with the lock held. */
static __always_inline void busy_advance(struct disk_busy *d, __u64 now)
{
	__u64 dt = d->last && now > d->last ? now - d->last : 0;

	if (d->commits && d->flushes)
		d->acc[BUSY_JF] += dt;
	else if (d->commits)
		d->acc[BUSY_J] += dt;
	else if (d->flushes)
		d->acc[BUSY_F] += dt;
	if (now > d->last)
		d->last = now;
}

static __always_inline void busy_read(__u64 disk, __u64 now, __u64 out[3])
{
	/* The compat build keeps no integrals: 5.10's tracing programs cannot take bpf_spin_lock,
	 * and an unlocked count left off by one race would misattribute every later block. A sync
	 * call's blocked time stays unsplit there ("waited"). */
	struct disk_busy *d =
	    disk && !IOPATH_COMPAT_BUILD ? bpf_map_lookup_elem(&disk_busy, &disk) : NULL;

	if (!d) {
		out[0] = out[1] = out[2] = 0;
		return;
	}
	bpf_spin_lock(&d->lock);
	busy_advance(d, now);
	out[0] = d->acc[0];
	out[1] = d->acc[1];
	out[2] = d->acc[2];
	bpf_spin_unlock(&d->lock);
}

/* A commit (`commit`) or a flush started (+1) or ended (-1) on a followed disk. Returns the
 * commit's duration when one ended, else 0. */
static __always_inline __u64 busy_change(__u64 disk, bool commit, int delta)
{
	struct disk_busy *d = IOPATH_COMPAT_BUILD ? NULL : bpf_map_lookup_elem(&disk_busy, &disk);
	__u64 now = bpf_ktime_get_ns(), took = 0;

	if (!d)
		return 0;
	bpf_spin_lock(&d->lock);
	busy_advance(d, now);
	if (commit) {
		if (delta > 0) {
			if (!d->commits++)
				d->commit_start = now;
		} else if (d->commits && !--d->commits) {
			took = now - d->commit_start;
		}
	} else if (delta > 0) {
		d->flushes++;
	} else if (d->flushes) {
		d->flushes--;
	}
	bpf_spin_unlock(&d->lock);
	return took;
}

static __always_inline void busy_follow(__u64 disk)
{
	struct disk_busy zero = {};

	if (disk)
		bpf_map_update_elem(&disk_busy, &disk, &zero, BPF_NOEXIST);
}

/* Requests per hardware queue: HW_QUEUE_KEY(type, id) (NVMe: poll vs irq queues). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HW_QUEUE_TYPES *HW_QUEUE_IDS);
	__type(key, __u32);
	__type(value, __u64);
} hw_queues SEC(".maps");

/* Makes the skeleton emit these types for the Rust side. */
struct hist _hist = {};
struct io_slot _io_slot = {};
struct io_record _io_record = {};
struct wb_file _wb_file = {};
enum wb_why _wb_why = NR_WB_WHY;
/* ... and these enums, so the Rust mirrors are checked against them at build time (probe/mod.rs).
 */
enum phase _phase = NR_PHASES;
enum counter _counter = NR_COUNTERS;
enum route_kind _route_kind = NR_ROUTE_KINDS;
enum ud_bits _ud_bits = UD_SLOT_BITS;

static __always_inline bool tgid_traced(__u32 tgid)
{
	if (targ_tree)
		return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
	return !targ_tgid || tgid == targ_tgid;
}

static __always_inline bool traced(__u32 tgid)
{
	return enabled && tgid_traced(tgid);
}

static __always_inline struct task_ctx *task_ctx(bool create)
{
#ifdef IOPATH_COMPAT
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
	struct task_ctx *t = bpf_map_lookup_elem(&task_ctx_tids, &tid);

	if (t || !create)
		return t;
	t = bpf_map_lookup_elem(&task_ctx_zero, &zero);
	if (!t)
		return NULL;
	bpf_map_update_elem(&task_ctx_tids, &tid, t, BPF_NOEXIST);
	return bpf_map_lookup_elem(&task_ctx_tids, &tid);
#else
	return bpf_task_storage_get(&task_ctxs, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
#endif
}

/* Another task's context (a BTF task pointer: tp_btf's arguments), never created here. */
static __always_inline struct task_ctx *task_ctx_of(struct task_struct *p)
{
#ifdef IOPATH_COMPAT
	__u32 tid = p->pid;

	return bpf_map_lookup_elem(&task_ctx_tids, &tid);
#else
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
#endif
}

/* The calling thread exits: task storage goes with it, the compat build's entry is dropped so a
 * recycled thread id starts clean. */
static __always_inline void task_ctx_exit(void)
{
#ifdef IOPATH_COMPAT
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&task_ctx_tids, &tid);
#endif
}

/* ---- files: what an fd or a request's file is ---- */

#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define S_IFBLK 0060000

/* Only reads and writes of files and block devices are I/O to follow: a pipe or a socket never
 * reaches a disk, and counting them as I/O that "moved no block I/O" would hide the page cache's
 * share. */
#define O_DIRECT_FLAG 040000 /* x86_64 (core_fixes.bpf.h #11: this tool reads x86_64 numbers) */

/* What a sync call's fd is: 0 not a disk file, 1 direct I/O, 2 buffered (the page cache). */
enum fd_kind { FD_OTHER = 0, FD_DIRECT = 1, FD_BUFFERED = 2 };

/* The page-cache route's families (task_ctx.buffered) and their first phase. */
enum pc_family { PC_NONE = 0, PC_READ = 1, PC_WRITE = 2, PC_SYNC = 3, PC_COPY = 4 };

#define O_DSYNC_FLAG 010000 /* O_SYNC is __O_SYNC | O_DSYNC: this bit is set by both */
#define RWF_DSYNC 0x00000002
#define RWF_SYNC 0x00000004

/* The open file behind `fd`. The task's fd table is walked with plain loads where the program
 * has BTF pointers (tp_btf), probe reads otherwise: four probe reads were a third of sys_enter's
 * 427 ns on a cached buffered read (scripts/bench-overhead.sh cached, --prog-stats). */
static __always_inline struct file *fd_file(__u64 fd, bool btf)
{
	struct task_struct *cur = CURRENT_TASK();
	bool b = btf && TASK_BTF;
	struct fdtable *fdt = b ? cur->files->fdt : BPF_CORE_READ(cur, files, fdt);
	struct file **fds, *f = NULL;

	if (!fdt || fd >= RQ_READ(b, fdt, max_fds))
		return NULL;
	fds = RQ_READ(b, fdt, fd);
	if (bpf_core_read(&f, sizeof(f), &fds[fd & 0xfffff]))
		return NULL;
	return f;
}

/* File systems whose regular files have no page cache behind them: a read of /proc or /sys is
 * not a page-cache hit (the generator reads /proc/thread-self/schedstat; any traced program may
 * read /proc: counted as buffered reads, they made a cold-cache comparison read 100% hits). */
#define PROC_SUPER_MAGIC 0x9fa0
#define SYSFS_MAGIC 0x62656572
#define CGROUP_SUPER_MAGIC 0x27e0eb
#define CGROUP2_SUPER_MAGIC 0x63677270
#define DEBUGFS_MAGIC 0x64626720
#define TRACEFS_MAGIC 0x74726163

static __always_inline bool pseudo_fs(unsigned long magic)
{
	return magic == PROC_SUPER_MAGIC || magic == SYSFS_MAGIC || magic == CGROUP_SUPER_MAGIC ||
	       magic == CGROUP2_SUPER_MAGIC || magic == DEBUGFS_MAGIC || magic == TRACEFS_MAGIC;
}

static __always_inline enum fd_kind fd_kind(struct file *f)
{
	struct inode *inode;
	__u32 mode;

	if (!f)
		return FD_OTHER;
	inode = BPF_CORE_READ(f, f_inode);
	mode = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if (mode != S_IFREG && mode != S_IFBLK)
		return FD_OTHER;
	if (mode == S_IFREG && pseudo_fs(BPF_CORE_READ(inode, i_sb, s_magic)))
		return FD_OTHER;
	return (BPF_CORE_READ(f, f_flags) & O_DIRECT_FLAG) ? FD_DIRECT : FD_BUFFERED;
}

/* ---- route: io_uring (the submitting thread, the SQ thread, io-wq workers) ---- */

/* The application's stamp (targ_app_stamp) in user data: UD_STAMP_BITS of ns, unwrapped against
 * now; `now` itself when it is none or from before this run. */
static __always_inline __u64 app_stamp(__u64 user_data, __u64 now)
{
	__u64 t = user_data >> UD_SLOT_BITS, mask = (1ULL << UD_STAMP_BITS) - 1;
	__u64 ts = (now & ~mask) | t;

	if (ts > now)
		ts -= 1ULL << UD_STAMP_BITS;
	return now - ts < 10000000000ULL ? ts : now;
}

static __always_inline __u64 uring_stamp(struct io_kiocb *req, __u64 now)
{
	return app_stamp(io_req_user_data(req), now);
}

/* Reads and writes (IORING_OP_* of include/uapi/linux/io_uring.h, stable ABI): the opcodes
 * that move data to or from a file. Others (poll, recv, fsync, NOP) are not followed here. */
static __always_inline bool uring_rw_opcode(__u8 op)
{
	return op == 1 || op == 2 || op == 4 || op == 5 || op == 22 || op == 23;
}

#include "cq_ring.bpf.h"

/* A request is submitted: from io_uring_enter by the application, or by its SQ thread. */
static __always_inline int on_submit_req(struct io_kiocb *req, bool btf)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_ctx *t;
	struct io_slot *s;
	__u64 now, start;
	__u32 mode = MODE_URING;

	__u8 op = RQ_READ(btf, req, opcode);

	if (!traced(tgid) || !uring_rw_opcode(op))
		return 0;
	/* A buffered file's request has no bio to say it writes: the opcode does. */
	if (op == 2 || op == 5 || op == 23)
		mode |= RF_WRITE;
	now = bpf_ktime_get_ns();
	start = now;
	/* --lean, top / serve's default: no syscall hook set in_submit. */
	t = (targ_lean || targ_claim_at_bio) ? NULL : task_ctx(false);
	if (CURRENT_FLAGS() & PF_IO_WORKER) {
		/* The SQ thread (io-wq workers issue, they do not submit SQEs). An SQPOLL
		 * application may never enter the kernel (fio spins on its CQ ring): the SQ thread
		 * picking up its next SQE is the look that finds the CQEs it took before writing it
		 * (fio at QD1: the bound was 37 us wide with posting as the only look, the whole
		 * latency). */
		mode |= RF_SQPOLL;
		if (targ_app_stamp) {
			start = uring_stamp(req, now);
		} else {
			__u64 written = sq_written((__u64)BPF_CORE_READ(req, ctx), now);

			if (written)
				start = written;
		}
	} else if (t && t->in_submit) {
		start = t->enter_ts;
		t->sqes++;
		/* A probe read (a scalar key, not a BTF pointer: no arithmetic on those), once a
		 * thread: its ring does not change (a look at another ring is only less useful). */
		if (!t->ring)
			t->ring = (__u64)BPF_CORE_READ(req, ctx);
		if (targ_app_stamp) {
			__u64 queued = uring_stamp(req, now);

			if (queued <= start)
				record(PH_APP_SUBMIT, start - queued);
		}
	} else if (targ_lean && targ_app_stamp) {
		/* --lean: the application's own time (and its syscall's entry) runs until now. */
		__u64 queued = uring_stamp(req, now);

		if (queued <= now)
			record(PH_APP_SUBMIT, now - queued);
	}
	s = io_claim((__u64)req, 0, start, tgid, mode);
	if (s)
		s->pickup_ts = now;
	return 0;
}

/* Punted to io-wq (IOSQE_ASYNC, or the kernel could not issue it without blocking). */
static __always_inline int on_queue_async_work(struct io_kiocb *req)
{
	struct io_slot *s;

	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	s = ios_find((__u64)req, 0);
	if (s && !s->punt_ts)
		s->punt_ts = bpf_ktime_get_ns();
	return 0;
}

/* Posted to the CQ ring. The record waits there until a look at the ring's head finds it taken
 * (cq_ring.bpf.h), whoever posted it: the submitting thread's task work, an io-wq worker, an SQ
 * thread. The bundled generator's own SQPOLL ring and every request under --lean instead end at
 * posting (RF_NO_REAP): the generator times its own take from the ring (slot_clock). */
static __always_inline int on_uring_complete(struct io_kiocb *req)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_ctx *t;
	struct io_slot *s;
	__u64 now, ring;

	if (!traced(tgid))
		return 0;
	now = bpf_ktime_get_ns();
	s = ios_find((__u64)req, 0);
	/* The ring, for its looks (none under --lean, nor in top / serve's default: they close
	 * at posting): a probe read, a scalar (the tracepoint's BTF pointer allows no key
	 * arithmetic). */
	ring = (targ_lean || targ_claim_at_bio) ? 0 : (__u64)BPF_CORE_READ(req, ctx);
	if (!s) {
		/* Not a followed I/O's CQE, yet a look: the head bounds the others. */
		ring_look(ring, now);
		return 0;
	}
	s->r.posted_ts = now;
	/* No bio of its own: a read or write of a buffered file served by the page cache (its
	 * readahead, if any, serves the cache, not this request). Inline when posted inside the
	 * io_uring_enter that submitted it (the claim started at that call's entry); otherwise it
	 * waited for a page and was retried from task work, or was punted to io-wq. The request
	 * comes as a void pointer in every version of this tracepoint: probe reads. */
	if (!s->r.queue_ts && fd_kind(BPF_CORE_READ(req, file)) == FD_BUFFERED) {
		int res = BPF_CORE_READ(req, cqe.res);

		s->r.mode |= RF_CACHED;
		if (res > 0)
			count(C_UPC_BYTES, res);
		t = task_ctx(false);
		if (t && t->in_submit && t->enter_ts == s->r.submit_ts)
			s->r.mode |= RF_INLINE;
	}
	/* top / serve without syscall hooks see no reap either: each request ends at its posting
	 * (the CQ ring's looks need the traced threads' io_uring_enter and switches). */
	if (targ_lean || targ_claim_at_bio ||
	    (targ_app_stamp && (CURRENT_FLAGS() & PF_IO_WORKER))) {
		s->r.mode |= RF_NO_REAP;
		if (targ_app_stamp) {
			__u32 idx = io_req_user_data(req) & ((1U << UD_SLOT_BITS) - 1);
			__u64 *at = bpf_map_lookup_elem(&slot_clock, &idx);

			if (at)
				*at = now;
		}
		io_close_slot(s, now, false);
		return 0;
	}
	io_route_subphases(s);
	if (!ring_park(ring, s, now))
		count(C_REAP_OVERFLOW, 1);
	ios_release(s);
	return 0;
}

/* io_uring_enter returns: a look at the ring (what this call posted is in the ring now, not yet
 * taken), and the batch it submitted. */
static __always_inline int on_uring_exit(void)
{
	struct task_ctx *t = task_ctx(false);

	if (!t)
		return 0;
	t->in_submit = 0;
	t->in_sys = 0;
	if (t->sqes) {
		count(C_URING_ENTERS, 1);
		count(C_URING_SQES, t->sqes);
		t->sqes = 0;
	}
	ring_look(t->ring, bpf_ktime_get_ns());
	return 0;
}

/* ---- route: libaio (io_submit claims each iocb, io_getevents reaps it) ---- */

/* The kioctx behind an aio_context_t (the user address of its ring): it tells apart forked
 * processes that share iocb addresses. Found by matching user_id in mm->ioctx_table, all kernel
 * memory (the ring's own index is in user memory, which a BPF program cannot fault in). */
#define AIO_MAX_CTX 16

struct aio_ctx_find {
	struct kioctx_table *tbl;
	__u64 ctx_id;
	__u32 nr;
	__u32 found;
};

static long aio_ctx_one(__u64 i, struct aio_ctx_find *c)
{
	/* Read out of c first: inside bpf_core_read a field of c would be relocated too. */
	struct kioctx_table *tbl = c->tbl;
	struct kioctx *ctx = NULL;

	if (i >= c->nr)
		return 1;
	bpf_core_read(&ctx, sizeof(ctx), &tbl->table[i & (AIO_MAX_CTX - 1)]);
	if (ctx && BPF_CORE_READ(ctx, user_id) == c->ctx_id) {
		c->found = (__u32)(__u64)ctx;
		return 1;
	}
	return 0;
}

static __always_inline __u32 aio_disc(__u64 ctx_id)
{
	struct task_struct *cur = CURRENT_TASK();
	struct kioctx_table *tbl = BPF_CORE_READ(cur, mm, ioctx_table);
	struct aio_ctx_find c = {.tbl = tbl, .ctx_id = ctx_id};

	if (!tbl)
		return 0;
	c.nr = BPF_CORE_READ(tbl, nr);
	LOOP(AIO_MAX_CTX, AIO_MAX_CTX, aio_ctx_one, &c);
	return c.found;
}

struct aio_claim_ctx {
	__u64 *iocbs;
	__u64 start;
	__u32 disc;
	__u32 tgid;
	bool release;
};

static long aio_claim_one(__u64 i, struct aio_claim_ctx *c)
{
	struct io_slot *s;
	__u64 iocb;

	if (bpf_probe_read_user(&iocb, sizeof(iocb), &c->iocbs[i])) {
		count(C_USER_UNREADABLE, 1);
		return 1;
	}
	if (!iocb)
		return 1;
	if (!c->release) {
		io_claim(iocb, c->disc, c->start, c->tgid, MODE_AIO);
		/* The generator's queue stamp in aio_data (struct iocb's first field). */
		if (targ_app_stamp) {
			__u64 data = 0, queued;

			if (!bpf_probe_read_user(&data, sizeof(data), (void *)iocb)) {
				queued = app_stamp(data, c->start);
				if (queued < c->start)
					record(PH_APP_SUBMIT, c->start - queued);
			}
		}
		return 0;
	}
	/* Not submitted after all (io_submit returned fewer): nothing will reap it. */
	s = ios_find(iocb, c->disc);
	if (s)
		ios_release(s);
	return 0;
}

#ifdef IOPATH_COMPAT
/*
 * The compat build calls these global functions in a loop: the verifier checks a global function
 * once, a static one once per iteration, and a loop of 128 over aio_claim_one overran its 8192
 * pending jumps (6.18 and 5.10 alike). Scalars only: 5.10 passes nothing else to them.
 */
__noinline int aio_claim_g(__u64 iocbs, __u64 i, __u64 start, __u64 disc_tgid, __u32 release)
{
	struct aio_claim_ctx c = {
	    .iocbs = (__u64 *)iocbs,
	    .start = start,
	    .disc = (__u32)disc_tgid,
	    .tgid = disc_tgid >> 32,
	    .release = release,
	};

	return aio_claim_one(i, &c);
}

#define AIO_CLAIM_EACH(n, c)                                                                       \
	({                                                                                         \
		__u32 __i, __n = (n);                                                              \
		for (__i = 0; __i < AIO_BATCH_MAX && __i < __n; __i++)                             \
			if (aio_claim_g((__u64)(c).iocbs, __i, (c).start,                          \
					(c).disc | ((__u64)(c).tgid << 32), (c).release))          \
				break;                                                             \
	})
#else
#define AIO_CLAIM_EACH(n, c) bpf_loop(n, aio_claim_one, &(c), 0)
#endif

/* The kioctx of ctx_id for this task, looked up once per context (a thread keeps using its). */
static __always_inline __u32 task_aio_disc(struct task_ctx *t, __u64 ctx_id)
{
	if (t->aio_ctx_id != ctx_id || !t->aio_disc) {
		t->aio_disc = aio_disc(ctx_id);
		t->aio_ctx_id = ctx_id;
	}
	return t->aio_disc;
}

static __always_inline int on_aio_submit_enter(struct task_ctx *t, __u64 ctx_id, __u64 nr,
					       __u64 iocbs)
{
	struct aio_claim_ctx c = {.iocbs = (__u64 *)iocbs, .start = t->enter_ts};

	c.tgid = bpf_get_current_pid_tgid() >> 32;
	c.disc = task_aio_disc(t, ctx_id);
	/* (--lean aio attaches no sys_enter: its requests are claimed at their bios.) */
	t->aio_iocbs = iocbs;
	t->aio_nr = nr < AIO_BATCH_MAX ? nr : AIO_BATCH_MAX;
	AIO_CLAIM_EACH(t->aio_nr, c);
	return 0;
}

static __always_inline int on_aio_submit_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	struct aio_claim_ctx c = {};
	__u32 done;

	if (!t)
		return 0;
	t->in_submit = 0;
	t->in_sys = 0;
	done = ret > 0 ? ret : 0;
	if (done < t->aio_nr) {
		c.iocbs = (__u64 *)t->aio_iocbs + done;
		c.disc = t->aio_disc;
		c.release = true;
		AIO_CLAIM_EACH(t->aio_nr - done, c);
	}
	return 0;
}

/* Reaps the i-th event of a user io_event array: 1 closed, 0 not followed, -1 unreadable. */
static __always_inline int aio_reap_at(struct io_event *events, __u64 i, __u64 now, __u32 disc)
{
	struct io_slot *s;
	__u64 obj;

	if (bpf_probe_read_user(&obj, sizeof(obj), &events[i].obj)) {
		count(C_USER_UNREADABLE, 1);
		return -1;
	}
	s = ios_find(obj, disc);
	if (!s) {
		count(C_REAP_UNMATCHED, 1);
		return 0;
	}
	/* aio posts inside the bio's end_io, right after block_rq_complete: posting is part of the
	 * device completion path and has no tracepoint of its own. */
	return io_close_slot(s, now, false);
}

#ifdef IOPATH_COMPAT
/* (As aio_claim_g.) */
__noinline int aio_reap_g(__u64 events, __u64 i, __u64 now, __u32 disc)
{
	return aio_reap_at((struct io_event *)events, i, now, disc);
}
#else
struct aio_reap_ctx {
	struct task_ctx *t;
	struct io_event *events;
	__u64 now;
	__u32 disc;
};

static long aio_reap_one(__u64 i, struct aio_reap_ctx *c)
{
	int r = aio_reap_at(c->events, i, c->now, c->disc);

	if (r < 0)
		return 1;
	c->t->closed += r;
	return 0;
}
#endif

/* --lean aio: the request's first bio, queued by the generator's thread. The aio_data the kernel
 * copied into the request holds the generator's slot and stamp; the slot's clock, when the
 * generator called io_submit for it. NULL (not claimed) without a time of this run's. */
static __always_inline struct io_slot *aio_claim_at_bio(__u64 key, __u32 disc,
							struct aio_kiocb *aio, __u64 now)
{
	__u64 data = BPF_CORE_READ(aio, ki_res.data), start, queued;
	__u32 idx = data & ((1U << UD_SLOT_BITS) - 1);
	__u64 *at = bpf_map_lookup_elem(&slot_clock, &idx);
	struct io_slot *s;

	start = at ? *at : 0;
	if (!start || start > now || now - start > 10000000000ULL)
		return NULL;
	/* Its bio's lookup just missed: on_bio_queue. */
	s = io_claim_new(key, disc, start, bpf_get_current_pid_tgid() >> 32, MODE_AIO);
	if (s) {
		queued = app_stamp(data, start);
		if (queued < start)
			record(PH_APP_SUBMIT, start - queued);
	}
	return s;
}

/* io_getevents returned `ret` events in the user array: each one is reaped now. */
static __always_inline int on_getevents_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	__u64 now;

	if (!t)
		return 0;
	t->in_sys = 0;
	if (!t->aio_events || ret <= 0)
		return 0;
	now = bpf_ktime_get_ns();
	t->closed = 0;
#ifdef IOPATH_COMPAT
	for (__u32 i = 0; i < AIO_BATCH_MAX && i < ret; i++) {
		int r = aio_reap_g(t->aio_events, i, now, t->aio_disc);

		if (r < 0)
			break;
		t->closed += r;
	}
#else
	{
		struct aio_reap_ctx c = {
		    .events = (struct io_event *)t->aio_events,
		    .now = now,
		    .disc = t->aio_disc,
		    .t = t,
		};

		bpf_loop(ret < MAX_AIO_EVENTS ? ret : MAX_AIO_EVENTS, aio_reap_one, &c, 0);
	}
#endif
	record_reap_batch(now, t->closed);
	return 0;
}

/* ---- route: synchronous read/write (the I/O happens inside the syscall; the task owns it) ---- */

#define RWF_HIPRI 0x00000001
/* A buffered read, write or sync call starts: timed here and at the exit, split by the
 * scheduler hooks; no per-I/O slot (its bios, readahead, serve the cache, not this call). */
static __always_inline void pc_start(struct task_ctx *t, enum pc_family family, struct file *f,
				     bool btf)
{
	t->buffered = family;
	t->pc_bios = 0;
	t->own_flushes = 0;
	t->throttling = 0;
	t->throttle_ts = 0;
	t->block_ts = 0;
	t->in_preempt_ts = 0;
	t->runq_from = 0;
	t->waited_ns = 0;
	t->runq_ns = 0;
	t->data_ns = 0;
	t->journal_ns = 0;
	t->jflush_ns = 0;
	t->flush_ns = 0;
	t->throttled_ns = 0;
	/* The disk under the file's file system (a block device file's own: its first bio). */
	t->disk = family == PC_READ ? 0 : (__u64)BPF_CORE_READ(f, f_inode, i_sb, s_bdev, bd_disk);
	/* disk_busy holds a spin lock: 6.1 refuses it in raw_tp programs ("tracing progs cannot
	 * use bpf_spin_lock yet"), so only the tp_btf variants follow a disk. */
	if (btf)
		busy_follow(t->disk);
}

static __always_inline int on_sync_enter(struct task_ctx *t, __u64 fd, __u64 rwf, bool write,
					 bool btf)
{
	struct file *f = fd_file(fd, btf);

	switch (fd_kind(f)) {
	case FD_DIRECT:
		io_claim(bpf_get_current_task(), 0, t->enter_ts, bpf_get_current_pid_tgid() >> 32,
			 MODE_SYNC | ((rwf & RWF_HIPRI) ? RF_HIPRI : 0));
		return 0;
	case FD_BUFFERED:
		/* top / serve show block I/O rows only: the page cache's split is a trace's. */
		if (targ_top)
			return 0;
		pc_start(t, write ? PC_WRITE : PC_READ, f, btf);
		t->sync_write = write && ((BPF_CORE_READ(f, f_flags) & O_DSYNC_FLAG) ||
					  (rwf & (RWF_DSYNC | RWF_SYNC)));
		return 0;
	default:
		return 0;
	}
}

/* copy_file_range / sendfile with a disk file at one end: the kernel reads and writes the page
 * cache itself (cp on Debian 12 copied 32 MiB in 2 such calls and no read or write). Its disk
 * is the destination's, the source's when that is a socket or a pipe (sendfile). */
static __always_inline int on_copy_enter(struct task_ctx *t, __u64 in_fd, __u64 out_fd, bool btf)
{
	struct file *in, *out;

	if (targ_top)
		return 0;
	in = fd_file(in_fd, btf);
	out = fd_file(out_fd, btf);
	if (fd_kind(out) != FD_OTHER)
		pc_start(t, PC_COPY, out, btf);
	else if (fd_kind(in) != FD_OTHER)
		pc_start(t, PC_COPY, in, btf);
	return 0;
}

/* fsync / fdatasync of a disk file, direct or not, or of a directory (SQLite syncs its
 * directory after creating a journal: 201 of its 804 fdatasyncs in a 200-insert run): its own
 * family, not an I/O. */
static __always_inline int on_fsync_enter(struct task_ctx *t, __u64 fd, bool data_only, bool btf)
{
	struct file *f = fd_file(fd, btf);
	bool dir = f && (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) == S_IFDIR;

	if (!dir && fd_kind(f) == FD_OTHER)
		return 0;
	pc_start(t, PC_SYNC, f, btf);
	t->sync_call = (data_only ? 2 : 1) | (dir ? 4 : 0);
	return 0;
}

/* A blocked interval of a write or sync call ended at `now`: what the disk was doing meanwhile
 * says what it waited for. The journal and flush integrals first; the rest is its own data I/O
 * if it queued any, else unexplained (a lock, someone else's I/O). */
static __always_inline void pc_blocked(struct task_ctx *t, __u64 now)
{
	__u64 blocked = now - t->block_ts, b[3], j, jf, f, rest;

	if (t->buffered == PC_READ) {
		t->waited_ns += blocked;
		return;
	}
	if (t->throttling) {
		t->throttled_ns += blocked;
		return;
	}
	busy_read(t->disk, now, b);
	j = b[BUSY_J] - t->snap[BUSY_J];
	jf = b[BUSY_JF] - t->snap[BUSY_JF];
	f = b[BUSY_F] - t->snap[BUSY_F];
	/* Integrals and the interval come from the same clock; clamp against wrap-around only. */
	if (j + jf + f > blocked) {
		j = j < blocked ? j : blocked;
		jf = jf < blocked - j ? jf : blocked - j;
		f = blocked - j - jf;
	}
	rest = blocked - j - jf - f;
	t->journal_ns += j + jf;
	t->jflush_ns += jf;
	t->flush_ns += f;
	if (t->pc_bios)
		t->data_ns += rest;
	else
		t->waited_ns += rest;
}

/* A buffered call returned: its time on CPU is what the scheduler did not take. */
static __always_inline void pc_close(struct task_ctx *t, long ret)
{
	__u64 now = bpf_ktime_get_ns(), total = now - t->enter_ts;
	__u64 off =
	    t->waited_ns + t->runq_ns + t->data_ns + t->journal_ns + t->flush_ns + t->throttled_ns;
	enum pc_family family = t->buffered;
	bool write = family == PC_WRITE;
	enum phase base = family == PC_SYNC   ? PH_SYNC
			  : family == PC_COPY ? PH_PC_COPY
			  : write	      ? PH_PC_WRITE
					      : PH_PC_READ;

	t->buffered = PC_NONE;
	if (ret < 0 || off > total)
		return;
	record(base + PCR_TOTAL, total);
	record(base + PCR_CPU, total - off);
	record(base + PCR_WAIT, t->waited_ns);
	record(base + PCR_RUNQ, t->runq_ns);
	if (family != PC_READ) {
		record(base + PCR_DATA, t->data_ns);
		record(base + PCR_JOURNAL, t->journal_ns);
		record(base + PCR_FLUSH, t->flush_ns);
		record(base + PCR_THROTTLED, t->throttled_ns);
		if (t->journal_ns)
			count(C_SYNC_JOURNAL_WAITS, 1);
	}
	if (family == PC_SYNC) {
		record(PH_SYNC_JOURNAL_FLUSH, t->jflush_ns);
		count((t->sync_call & 3) == 2 ? C_FDATASYNCS : C_FSYNCS, 1);
		if (t->sync_call & 4)
			count(C_DIR_SYNCS, 1);
		return;
	}
	if (family == PC_COPY) {
		count(C_PC_BYTES_COPIED, ret);
		return;
	}
	count_route(RK_PAGECACHE, write);
	count(write ? C_PC_BYTES_WRITTEN : C_PC_BYTES_READ, ret);
	if (write && t->sync_write)
		count(C_SYNC_WRITES, 1);
	if (!write && t->waited_ns)
		count(C_PC_READS_WAITED, 1);
	if (!write && t->pc_bios)
		count(C_PC_READS_QUEUED, 1);
}

static __always_inline int on_sync_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	struct io_slot *s;

	if (t) {
		t->in_sys = 0;
		if (t->buffered) {
			pc_close(t, ret);
			return 0;
		}
	}
	s = ios_find(bpf_get_current_task(), 0);
	if (s)
		io_close_slot(s, bpf_ktime_get_ns(), true);
	return 0;
}

/* ---- syscalls: where the application submits and reaps ---- */

/* x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl; core_fixes.bpf.h #11). */
#define NR_READ 0
#define NR_WRITE 1
#define NR_PREAD64 17
#define NR_PWRITE64 18
#define NR_READV 19
#define NR_WRITEV 20
#define NR_SENDFILE 40
#define NR_FSYNC 74
#define NR_FDATASYNC 75
#define NR_IO_GETEVENTS 208
#define NR_IO_SUBMIT 209
#define NR_PREADV 295
#define NR_PWRITEV 296
#define NR_COPY_FILE_RANGE 326
#define NR_PREADV2 327
#define NR_PWRITEV2 328
#define NR_IO_PGETEVENTS 333
#define NR_IO_URING_ENTER 426
#define NR_EXIT 60
#define NR_EXIT_GROUP 231

static __always_inline bool sync_syscall(long id)
{
	return id == NR_PREAD64 || id == NR_PWRITE64 || id == NR_READ || id == NR_WRITE ||
	       id == NR_READV || id == NR_WRITEV || id == NR_PREADV || id == NR_PWRITEV ||
	       id == NR_PREADV2 || id == NR_PWRITEV2;
}

static __always_inline bool write_syscall(long id)
{
	return id == NR_WRITE || id == NR_PWRITE64 || id == NR_WRITEV || id == NR_PWRITEV ||
	       id == NR_PWRITEV2;
}

static __always_inline bool io_syscall(long id)
{
	return id == NR_IO_URING_ENTER || id == NR_IO_SUBMIT || id == NR_IO_GETEVENTS ||
	       id == NR_IO_PGETEVENTS || id == NR_FSYNC || id == NR_FDATASYNC ||
	       id == NR_COPY_FILE_RANGE || id == NR_SENDFILE || sync_syscall(id);
}

static __always_inline void count_syscall(long id)
{
	__u32 k = id;
	__u64 *v;

	if (k >= NR_SYSCALL_SLOTS)
		return;
	v = bpf_map_lookup_elem(&syscalls, &k);
	if (v)
		*v += 1;
}

/* A syscall's arguments: direct loads from a BTF pt_regs (tp_btf), CO-RE reads otherwise. The
 * flag is a constant at each call site, so the other branch is never emitted. */
#define SYS_ARG(regs, reg, btf) ((btf) ? (__u64)(regs)->reg : (__u64)BPF_CORE_READ(regs, reg))

static __always_inline int on_sys_enter(struct pt_regs *regs, long id, bool btf)
{
	struct task_ctx *t;

	/* Without the per-syscall counts (iopath top / serve: every process on the host makes
	 * syscalls through this hook), a call that can be no I/O returns before any lookup. */
	if (!targ_syscalls && !io_syscall(id) && id != NR_EXIT && id != NR_EXIT_GROUP)
		return 0;
	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* Every thread of a traced process gets its context at its first syscall, and with it
	 * whether it is one of iopath's own (excluded_tids, looked up once instead of on every
	 * syscall: a hash lookup per call). */
	t = task_ctx(true);
	if (!t)
		return 0;
	if (!t->own) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();

		t->own = bpf_map_lookup_elem(&excluded_tids, &tid) ? 2 : 1;
	}
	if (t->own == 2)
		return 0;
	if (targ_syscalls)
		count_syscall(id);
	if (id == NR_EXIT || id == NR_EXIT_GROUP) {
		/* The last look: the CQEs it took after its last io_uring_enter (fio's final reap),
		 * while its ring is still there (its files close later in do_exit). */
		ring_look(t->ring, bpf_ktime_get_ns());
		task_ctx_exit();
		return 0;
	}
	if (!io_syscall(id))
		return 0;
	t->enter_ts = bpf_ktime_get_ns();
	t->in_sys = 1;
	switch (id) {
	case NR_IO_URING_ENTER:
		t->in_submit = 1;
		t->sqes = 0;
		/* (fd, to_submit, min_complete, flags, ...): a registered ring's fd is an index.
		 * Once a thread, as at submit: the fd walk is five reads. */
		if (!t->ring && !(SYS_ARG(regs, r10, btf) & IORING_ENTER_REGISTERED_RING)) {
			__u64 ring = ring_of_file(fd_file(SYS_ARG(regs, di, btf), btf));

			if (ring)
				t->ring = ring;
		}
		ring_look(t->ring, t->enter_ts);
		return 0;
	case NR_IO_SUBMIT:
		t->in_submit = 1;
		return on_aio_submit_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, si, btf),
					   SYS_ARG(regs, dx, btf));
	case NR_IO_GETEVENTS:
	case NR_IO_PGETEVENTS:
		/* The user's io_event array is the fourth argument (r10 stands in for rcx). */
		t->aio_events = SYS_ARG(regs, r10, btf);
		task_aio_disc(t, SYS_ARG(regs, di, btf));
		return 0;
	case NR_PREADV2:
	case NR_PWRITEV2:
		return on_sync_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, r9, btf),
				     id == NR_PWRITEV2, btf);
	case NR_FSYNC:
	case NR_FDATASYNC:
		return on_fsync_enter(t, SYS_ARG(regs, di, btf), id == NR_FDATASYNC, btf);
	case NR_COPY_FILE_RANGE:
		/* (fd_in, off_in, fd_out, off_out, len, flags) */
		return on_copy_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, dx, btf), btf);
	case NR_SENDFILE:
		/* (out_fd, in_fd, offset, count) */
		return on_copy_enter(t, SYS_ARG(regs, si, btf), SYS_ARG(regs, di, btf), btf);
	default:
		return on_sync_enter(t, SYS_ARG(regs, di, btf), 0, write_syscall(id), btf);
	}
}

static __always_inline int on_sys_exit(struct pt_regs *regs, long id, long ret, bool btf)
{
	if (!io_syscall(id) || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (targ_aio_at_bio) {
		/* --lean aio has no sys_enter hook: io_getevents' arguments are still in the
		 * registers at its exit (the return value went to ax). */
		struct task_ctx *t;

		if (id != NR_IO_GETEVENTS && id != NR_IO_PGETEVENTS)
			return 0;
		t = task_ctx(true);
		if (!t)
			return 0;
		t->aio_events = SYS_ARG(regs, r10, btf);
		task_aio_disc(t, SYS_ARG(regs, di, btf));
		return on_getevents_exit(ret);
	}
	if (id == NR_IO_URING_ENTER)
		return on_uring_exit();
	if (id == NR_IO_SUBMIT)
		return on_aio_submit_exit(ret);
	if (id == NR_IO_GETEVENTS || id == NR_IO_PGETEVENTS)
		return on_getevents_exit(ret);
	return on_sync_exit(ret);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(regs, id, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(regs, regs->orig_ax, ret, true);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter_raw, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(regs, id, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(regs, BPF_CORE_READ(regs, orig_ax), ret, false);
}

/*
 * top / serve where fentry works: the positional sync calls hooked on their own kernel functions
 * (__x64_sys_pread64 ...; the target is set at load from the hook table), so only those calls pay
 * and a direct pread is timed from its entry to its return, as a trace does through the
 * raw_syscalls pair that every system call of every process would pay for. The wrapper's one
 * argument is the user's pt_regs, the same the sys_enter tracepoint hands over.
 */
#define SYNC_FENTRY(name, nr)                                                                      \
	SEC("fentry")                                                                              \
	int BPF_PROG(fentry_##name, struct pt_regs *regs)                                          \
	{                                                                                          \
		EMPTY_GUARD();                                                                     \
		return on_sys_enter(regs, nr, true);                                               \
	}                                                                                          \
	SEC("fexit")                                                                               \
	int BPF_PROG(fexit_##name, struct pt_regs *regs, long ret)                                 \
	{                                                                                          \
		EMPTY_GUARD();                                                                     \
		return on_sys_exit(regs, nr, ret, true);                                           \
	}

SYNC_FENTRY(pread64, NR_PREAD64)
SYNC_FENTRY(pwrite64, NR_PWRITE64)
SYNC_FENTRY(preadv, NR_PREADV)
SYNC_FENTRY(pwritev, NR_PWRITEV)
SYNC_FENTRY(preadv2, NR_PREADV2)
SYNC_FENTRY(pwritev2, NR_PWRITEV2)

/* ---- io_uring tracepoints ---- */

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(submit_req, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, true);
}

SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(submit_sqe, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, true);
}

SEC("raw_tp/io_uring_submit_req")
int BPF_PROG(submit_req_raw, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, false);
}

SEC("tp_btf/io_uring_queue_async_work")
int BPF_PROG(queue_async_work, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_queue_async_work(req);
}

SEC("raw_tp/io_uring_queue_async_work")
int BPF_PROG(queue_async_work_raw, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_queue_async_work(req);
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, void *ctx_, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_uring_complete(req);
}

SEC("raw_tp/io_uring_complete")
int BPF_PROG(uring_complete_raw, void *ctx_, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_uring_complete(req);
}

/* ---- block layer ---- */

/* Bios are followed from any context (a kworker releasing throttled bios is not a traced
 * process); only I/Os a traced route claimed are found. */
#include "writeback.bpf.h"

static __always_inline int bio_queue(struct bio *bio, bool btf)
{
	struct task_ctx *t;
	bool in_sys;

	if (!enabled)
		return 0;
	if (targ_aio_at_bio) {
		/* --lean aio: no syscall hook marks a call; a bio of the generator's is claimed or
		 * followed here, or counted untagged. */
		bool mine = tgid_traced(bpf_get_current_pid_tgid() >> 32);

		wb_bio_queue(bio, false);
		if (!on_bio_queue(bio, mine, btf) && mine)
			count(C_BIOS_UNTAGGED, 1);
		return 0;
	}
	/* --lean, top / serve's default: no syscall hook marks a call, so the task's context has
	 * nothing to say here. */
	t = (targ_lean || targ_claim_at_bio) ? NULL : task_ctx(false);
	wb_bio_queue(bio,
		     t && t->in_sys &&
			 (t->buffered == PC_SYNC || (t->buffered == PC_WRITE && t->sync_write)));
	in_sys = t && t->in_sys && tgid_traced(bpf_get_current_pid_tgid() >> 32);
	if (in_sys && t->buffered) {
		/* Readahead a buffered read started, a sync call's writeback, or a cache flush
		 * it issued itself: the page cache's I/O, counted for the call (not untagged). */
		__u32 size = BPF_CORE_READ(bio, bi_iter.bi_size);

		in_sys = false;
		if (!t->disk) {
			t->disk = (__u64)bio_disk(bio);
			if (btf && t->buffered != PC_READ)
				busy_follow(t->disk);
		}
		if (!size && bio_is_flush(BPF_CORE_READ(bio, bi_opf))) {
			t->own_flushes++;
			count(C_SYNC_OWN_FLUSHES, 1);
			goto queue;
		}
		t->pc_bios++;
		count(t->buffered == PC_SYNC ? C_SYNC_BIOS : C_PC_BIOS, 1);
		count(t->buffered == PC_SYNC ? C_SYNC_BIO_BYTES : C_PC_BIO_BYTES, size);
	}
queue:
	if (on_bio_queue(bio, false, btf) || !in_sys)
		return 0;
	/* The submitting call of io_uring requests on buffered files queues their readahead (or
	 * writeback): pages of a file's cache, the page cache's I/O, not lost. */
	if (t->in_submit && bio_file(bio)) {
		count(C_UPC_BIOS, 1);
		count(C_UPC_BIO_BYTES, BPF_CORE_READ(bio, bi_iter.bi_size));
		return 0;
	}
	count(C_BIOS_UNTAGGED, 1);
	return 0;
}

/* A bio of a buffered call merged into a request already queued: fewer, larger requests. */
static __always_inline int bio_merge(void)
{
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(C_PC_MERGES, 1);
	return 0;
}

SEC("tp_btf/block_bio_backmerge")
int BPF_PROG(bio_backmerge, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_merge();
}

SEC("tp_btf/block_bio_frontmerge")
int BPF_PROG(bio_frontmerge, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_merge();
}

/* A bio of a buffered call split in two (larger than the device takes): one more request. */
SEC("tp_btf/block_split")
int BPF_PROG(bio_split, struct bio *bio)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(C_PC_SPLITS, 1);
	return 0;
}

/* ---- the page cache: readahead a buffered read started (6.10+ tracepoints) ---- */

static __always_inline int readahead(bool sync)
{
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(sync ? C_PC_RA_SYNC : C_PC_RA_ASYNC, 1);
	return 0;
}

SEC("tp_btf/page_cache_sync_ra")
int BPF_PROG(ra_sync)
{
	EMPTY_GUARD();
	return readahead(true);
}

SEC("tp_btf/page_cache_async_ra")
int BPF_PROG(ra_async)
{
	EMPTY_GUARD();
	return readahead(false);
}

/* Only where stacked devices exist (userspace decides): the top bio's end. */
SEC("tp_btf/block_bio_complete")
int BPF_PROG(bio_complete_btf, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	if (enabled)
		on_bio_complete(bio);
	return 0;
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(bio_complete_raw, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	if (enabled)
		on_bio_complete(bio);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int bio_queue_btf(unsigned long long *ctx)
{
	EMPTY_GUARD();
	return bio_queue(bio_queue_arg(ctx, targ_bio_queue_q), true);
}

SEC("raw_tp/block_bio_queue")
int bio_queue_raw(unsigned long long *ctx)
{
	EMPTY_GUARD();
	return bio_queue(bio_queue_arg(ctx, targ_bio_queue_q), false);
}

/* top and serve: a split's front part, linked to its parent's I/O. block_split(q, bio, sector)
 * before 5.11 (as block_bio_queue, targ_bio_queue_q), (bio, sector) since. */
SEC("tp_btf/block_split")
int bio_split_top_btf(unsigned long long *ctx)
{
	EMPTY_GUARD();
	if (enabled)
		on_split_top(bio_queue_arg(ctx, targ_bio_queue_q));
	return 0;
}

SEC("raw_tp/block_split")
int bio_split_top_raw(unsigned long long *ctx)
{
	EMPTY_GUARD();
	if (enabled)
		on_split_top(bio_queue_arg(ctx, targ_bio_queue_q));
	return 0;
}

/* top and serve's bio end (a hook of its own: a trace attaches bio_complete_* only where stacked
 * devices exist, top and serve on every kernel). */
SEC("tp_btf/block_bio_complete")
int BPF_PROG(bio_end_btf, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	if (enabled)
		on_bio_complete(bio);
	return 0;
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(bio_end_raw, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	if (enabled)
		on_bio_complete(bio);
	return 0;
}

static __always_inline void count_hw_queue(__u32 type, __u32 id, bool tracked)
{
	__u32 k = HW_QUEUE_KEY(type, id);
	__u64 *c;

	if (!tracked) {
		count(C_ISSUE_UNTRACKED, 1);
		return;
	}
	c = bpf_map_lookup_elem(&hw_queues, &k);
	if (c)
		*c += 1;
}

static __always_inline void count_rq_hw_queue(struct request *rq, bool btf, bool tracked)
{
	if (btf)
		count_hw_queue(rq->mq_hctx->type, rq->mq_hctx->queue_num, tracked);
	else
		count_hw_queue(BPF_CORE_READ(rq, mq_hctx, type),
			       BPF_CORE_READ(rq, mq_hctx, queue_num), tracked);
}

static __always_inline int rq_issue(struct request *rq, bool btf)
{
	struct bio *bio;
	bool tracked;
	__u64 now;

	if (!enabled)
		return 0;
	/* The disk's flushes and FUA writes (a flush request has no bio). Needs the lock: tp_btf
	 * only, and the constant flag drops it from raw_tp programs. */
	if (btf && rq_flush_kind(rq->cmd_flags))
		busy_change((__u64)rq_disk(rq, true), false, 1);
	bio = RQ_READ(btf, rq, bio);
	if (!bio)
		return 0;
	now = bpf_ktime_get_ns();
	wb_rq_issue(rq, bio, now);
	tracked = walk_rq(bio, RQ_READ(btf, bio, bi_next), now, false, 0);
	count_rq_hw_queue(rq, btf, tracked);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(rq_issue_btf, struct request *rq)
{
	EMPTY_GUARD();
	return rq_issue(rq, true);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(rq_issue_raw, struct request *rq)
{
	EMPTY_GUARD();
	return rq_issue(rq, false);
}

/* The request's io_start_time_ns for the lean trace (issue_stamps): `use` where its queue's stamp
 * is trusted, `chk` (this CPU's comparisons for the queue) while a check window is open. */
static __always_inline void issue_stamp_of(struct request *rq, struct stamp_arg *st, bool btf)
{
	struct request_queue *q = RQ_READ(btf, rq, q);
	struct stamps_queue *m;
	__u32 qid = RQ_READ(btf, q, id);

	m = stamp_queue(&issue_queues, qid, rq_devt(rq, btf));
	if (!m)
		return;
	st->use = (m->mode & SM_ISSUE_STAMP) != 0;
	if (issue_checking)
		st->chk = bpf_map_lookup_elem(&issue_checks, &qid);
	st->stamp = RQ_READ(btf, rq, io_start_time_ns);
}

static __always_inline int rq_complete(struct request *rq, unsigned int nr_bytes, bool btf)
{
	__u64 now = bpf_ktime_get_ns();
	struct stamp_arg st = {};
	struct bio *bio;
	bool tracked;

	if (!enabled)
		return 0;
	wb_rq_complete(rq, RQ_READ(btf, rq, cmd_flags), now);
	if (btf) {
		int kind = rq_flush_kind(rq->cmd_flags);
		__u64 disk = (__u64)rq_disk(rq, true);

		if (kind && bpf_map_lookup_elem(&disk_busy, &disk)) {
			busy_change(disk, false, -1);
			count(kind == 1 ? C_FLUSH_RQS : C_FUA_RQS, 1);
		}
	}
	bio = RQ_READ(btf, rq, bio);
	if (!bio)
		return 0;
	if (targ_issue_stamps && (issue_checking || issue_stamps))
		issue_stamp_of(rq, &st, btf);
	tracked = walk_rq_st(bio, RQ_READ(btf, bio, bi_next), now, true, nr_bytes, &st);
	if (tracked)
		count(C_BYTES, nr_bytes);
	/* The hook that counts a request's hardware queue is detached: counted here. */
	if (issue_detached && st.use)
		count_rq_hw_queue(rq, btf, tracked);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete_btf, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	EMPTY_GUARD();
	return rq_complete(rq, nr_bytes, true);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(rq_complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	EMPTY_GUARD();
	return rq_complete(rq, nr_bytes, false);
}

/* ---- scheduler: context switches, and time the application was runnable but not running ---- */

/* tp_btf hands us BTF task pointers: plain loads, no bpf_probe_read. */
static __always_inline bool not_ours(__u32 tid)
{
	return !bpf_map_lookup_elem(&excluded_tids, &tid);
}

static __always_inline bool traced_thread(struct task_struct *p)
{
	return (targ_tgid || targ_tree) && tgid_traced(p->tgid) && not_ours(p->pid);
}

static __always_inline bool traced_thread_raw(struct task_struct *p)
{
	return (targ_tgid || targ_tree) && tgid_traced(BPF_CORE_READ(p, tgid)) &&
	       not_ours(BPF_CORE_READ(p, pid));
}

/* Children of a traced process are traced too (fio forks its jobs). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	EMPTY_GUARD();
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (targ_tree && ptgid != ctgid && bpf_map_lookup_elem(&traced_tgids, &ptgid))
		bpf_map_update_elem(&traced_tgids, &ctgid, &one, BPF_ANY);
	return 0;
}

/*
 * A thread preempted outside a traced syscall - typically right after one returns, on its way
 * back to user space, after the exit tracepoint stamped the reap - is runnable but not running:
 * time the application waits that no kernel I/O phase covers. Measured from the switch-out to
 * the switch-in. Needs BTF task pointers (task storage of another task), so tp_btf only.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	EMPTY_GUARD();
	struct task_ctx *t;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	if (traced_thread(prev)) {
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
		t = task_ctx_of(prev);
		if (t && t->in_sys && t->buffered) {
			if (preempt) {
				t->in_preempt_ts = now;
			} else {
				t->block_ts = now;
				/* balance_dirty_pages sleeps right after its tracepoint (~1 us
				 * here); a later block in the same call is something else. */
				t->throttling = t->throttle_ts && now - t->throttle_ts < 20000;
				t->throttle_ts = 0;
				if (t->buffered != PC_READ)
					busy_read(t->disk, now, t->snap);
			}
		} else if (t && preempt && !t->in_sys) {
			t->preempt_ts = now;
		}
		/* Only in user space can it take CQEs: a thread blocked in a syscall is looked at
		 * by the syscall's exit (the looks at these switches cost 10% of loop-device IOPS).
		 */
		if (t && t->ring && !t->in_sys && !(prev->flags & PF_EXITING))
			ring_look(t->ring, now);
	}
	if (traced_thread(next)) {
		t = task_ctx_of(next);
		if (t && t->block_ts) {
			/* Blocked, and its wakeup not seen (woken before tracing began). */
			pc_blocked(t, now);
			t->block_ts = 0;
		}
		if (t && t->runq_from) {
			/* Woken inside the call, then waited for a CPU. */
			t->runq_ns += now - t->runq_from;
			t->runq_from = 0;
		}
		if (t && t->in_preempt_ts) {
			t->runq_ns += now - t->in_preempt_ts;
			t->in_preempt_ts = 0;
		}
		if (t && t->preempt_ts) {
			count(C_PREEMPTED, 1);
			count(C_PREEMPTED_NS, now - t->preempt_ts);
			t->preempt_ts = 0;
		}
		if (t && t->wake_ts) {
			count(C_RUNQ_WAIT, 1);
			count(C_RUNQ_WAIT_NS, now - t->wake_ts);
			t->wake_ts = 0;
		}
		/* Preempted in user space, it took nothing from the ring off the CPU: the bound's
		 * start moves up to here. */
		if (t && t->ring && !t->in_sys)
			ring_look(t->ring, now);
	}
	return 0;
}

/* A traced thread woken (its I/O completed, typically) waits for a CPU until sched_switch runs it:
 * the time a busy CPU adds to every I/O, which no I/O phase would otherwise explain. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced_thread(p))
		return 0;
	t = task_ctx_of(p);
	if (!t)
		return 0;
	t->wake_ts = bpf_ktime_get_ns();
	/* A buffered call's blocked interval ends here: what it waited for is told now. */
	if (t->block_ts && t->in_sys && t->buffered) {
		pc_blocked(t, t->wake_ts);
		t->block_ts = 0;
		t->runq_from = t->wake_ts;
	}
	return 0;
}

/* ---- what a write or sync call waits for: journal commits and dirty throttling ---- */

/* jbd2 (ext4's journal) commits a transaction: the disk of the file system it journals. */
SEC("tp_btf/jbd2_start_commit")
int BPF_PROG(jbd2_start_commit, journal_t *journal)
{
	EMPTY_GUARD();
	if (enabled)
		busy_change((__u64)journal->j_fs_dev->bd_disk, true, 1);
	return 0;
}

SEC("tp_btf/jbd2_end_commit")
int BPF_PROG(jbd2_end_commit, journal_t *journal)
{
	EMPTY_GUARD();
	__u64 took;

	if (!enabled)
		return 0;
	took = busy_change((__u64)journal->j_fs_dev->bd_disk, true, -1);
	if (took) {
		count(C_JBD2_COMMITS, 1);
		count(C_JBD2_COMMIT_NS, took);
	}
	return 0;
}

/* ---- writeback of the pages the traced processes dirtied (writeback.bpf.h) ---- */

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(wb_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	EMPTY_GUARD();
	/* tp_btf pointers may be NULL: checked before any CO-RE read offsets them. */
	if (!enabled || !folio || !mapping || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* iopath's own threads (the --events-out writer) are not the workload: a direct read job
	 * had "dirtied 256 pages", its own events file's. */
	if (!not_ours((__u32)bpf_get_current_pid_tgid()))
		return 0;
	return on_dirty_folio(folio, mapping);
}

SEC("tp_btf/writeback_start")
int BPF_PROG(wb_start, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	EMPTY_GUARD();
	if (enabled && work)
		wb_work_start(work);
	return 0;
}

SEC("tp_btf/writeback_written")
int BPF_PROG(wb_written, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	EMPTY_GUARD();
	if (enabled)
		wb_work_end();
	return 0;
}

/* ---- the page cache, counted (--pagecache count) ----
 * One program per read instead of the syscall pair: a cached 4k read cost 0.42 us of BPF with
 * the call split (sys_enter + sys_exit), more than a two-probe bpftrace counter of these same
 * tracepoints (scripts/bench-overhead.sh cached). Counted per CPU; no call is timed. */

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(pcc_get_pages, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	EMPTY_GUARD();
	if (traced(bpf_get_current_pid_tgid() >> 32)) {
		count(C_PCC_READS, 1);
		count(C_PCC_PAGES, last_index - index + 1); /* last_index is the last page read */
	}
	return 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(pcc_add_folio, struct folio *folio)
{
	EMPTY_GUARD();
	if (folio && traced(bpf_get_current_pid_tgid() >> 32))
		count(C_PCC_ADDED, folio_pages(folio));
	return 0;
}

/* A writer is about to sleep for dirty throttling (its arguments differ across kernels: none
 * read). */
SEC("tp_btf/balance_dirty_pages")
int BPF_PROG(dirty_pause)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && (t->buffered == PC_WRITE || t->buffered == PC_COPY)) {
		t->throttle_ts = bpf_ktime_get_ns();
		count(C_DIRTY_PAUSES, 1);
	}
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev)
{
	EMPTY_GUARD();
	if (enabled && traced_thread_raw(prev))
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
	return 0;
}

/* ---- NVMe (module tracepoints; loaded only where the driver is) ---- */

/* The tracepoints hand over NULL-able request pointers: checked before any field read. */
SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(nvme_setup_cmd, struct request *rq)
{
	EMPTY_GUARD();
	struct io_slot *s;

	if (!enabled || !rq)
		return 0;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s) {
		s->nvme_ts = bpf_ktime_get_ns();
		count(C_NVME_SETUP, 1);
	}
	return 0;
}

/* The driver's view of the device time: from issue (blk_mq_start_request, which nvme_queue_rq
 * calls after building the command and DMA-mapping the data) to the completion entry, before
 * the block layer's end-of-request work (for batched/polled completions, before the batch ends). */
SEC("tp_btf/nvme_complete_rq")
int BPF_PROG(nvme_complete_rq, struct request *rq)
{
	EMPTY_GUARD();
	struct io_slot *s;
	__u64 now;

	if (!enabled || !rq)
		return 0;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s && s->r.issue_ts) {
		now = bpf_ktime_get_ns();
		record(PH_NVME, now - s->r.issue_ts);
		s->nvme_done_ts = now;
	}
	return 0;
}

/*
 * Optional (fexit, else kprobe+kretprobe; detected at run time): when nvme_queue_rq returns, the
 * doorbell has been rung (an MMIO write: a VM exit under virtualization). Issue -> doorbell is
 * the part of the device time the CPU spends in the driver. blk_status_t is a u8: only the low
 * byte of the return register is meaningful.
 */
static __always_inline void queue_rq_done(struct request *rq, __u8 ret)
{
	struct io_slot *s;

	if (!rq || ret)
		return;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s && s->r.issue_ts)
		record(PH_NVME_SUBMIT, bpf_ktime_get_ns() - s->r.issue_ts);
}

SEC("fexit/nvme_queue_rq")
int BPF_PROG(nvme_queue_rq_exit, struct blk_mq_hw_ctx *hctx, const struct blk_mq_queue_data *bd,
	     int ret)
{
	EMPTY_GUARD();
	if (enabled)
		queue_rq_done(BPF_CORE_READ(bd, rq), ret);
	return 0;
}

/* kprobe fallback: the request, per thread, from entry to return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} queue_rq_args SEC(".maps");

SEC("kprobe/nvme_queue_rq")
int BPF_KPROBE(nvme_queue_rq_entry, struct blk_mq_hw_ctx *hctx, const struct blk_mq_queue_data *bd)
{
	EMPTY_GUARD();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 rq;

	if (!enabled)
		return 0;
	rq = (__u64)BPF_CORE_READ(bd, rq);
	bpf_map_update_elem(&queue_rq_args, &tid, &rq, BPF_ANY);
	return 0;
}

SEC("kretprobe/nvme_queue_rq")
int BPF_KRETPROBE(nvme_queue_rq_ret, int ret)
{
	EMPTY_GUARD();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *rq = bpf_map_lookup_elem(&queue_rq_args, &tid);

	if (!rq)
		return 0;
	queue_rq_done((struct request *)*rq, ret);
	bpf_map_delete_elem(&queue_rq_args, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
