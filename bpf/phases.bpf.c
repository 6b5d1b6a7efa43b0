// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-I/O phases: submission (syscall entry -> bio queued), block layer (bio queued -> request
 * issued), device (issued -> completed), completion (completed -> posted -> reaped).
 *
 * State lives where it is cheapest: the submitting task's own storage (syscall entry time, the
 * io_uring request being issued, completions waiting to be reaped) and two hash maps for what
 * crosses contexts (bio -> timestamps while in the block layer; completed I/O -> completion time
 * until io_uring posts it or io_getevents returns it). Every entry point is a thin wrapper over
 * one handler so tp_btf and raw_tp variants share the logic; userspace picks which to load.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "counters.bpf.h"
#include "hist.bpf.h"
#include "core_fixes.bpf.h"
#include "slots.bpf.h"
#include "traced.bpf.h"

/* Process to trace; 0 = every process. */
const volatile __u32 targ_tgid = 0;
/* Emit one io_record per reaped I/O into `events`. */
const volatile bool targ_events = false;
/* bi_end_io of the direct-I/O paths whose bio leads back to the kiocb (from /proc/kallsyms). */
const volatile __u64 targ_iomap_end_io = 0;
const volatile __u64 targ_blkdev_end_io = 0;
const volatile __u64 targ_blkdev_end_io_async = 0;

/* Trace a process tree (traced_tgids, grown on fork) instead of the single targ_tgid. */
const volatile bool targ_tree = false;

/* Set by userspace once every link is attached, so attach order cannot skew counts. */
volatile __u32 enabled = 0;

/* The traced I/O's active span: first submission, last reap (a traced command's IOPS are over
 * this, not over its start-up and exit). Plain stores: an off-by-one-I/O race is harmless. */
__u64 first_submit_ts = 0;
__u64 last_reap_ts = 0;

struct task_ctx {
	__u64 enter_ts;
	__u64 cur_req;
	__u64 aio_events;
	__u32 mode;
	__u32 in_submit;
	__u32 nposted;
	__u32 in_sys;			    /* inside a traced submit/reap syscall */
	__u64 preempt_ts;		    /* preempted outside a syscall at this time */
	__u64 wake_ts;			    /* woken up at this time, not yet running */
	struct io_record pending[REAP_MAX]; /* posted, not yet reaped */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

#define INFLIGHT_MATCH(s, k, tgid) ((s)->key == (k))
/* bio -> its timestamps, from block_bio_queue to block_rq_complete. */
SLOT_TABLE(inflight, inflight_slot, INFLIGHT_MATCH)

/* --events: sized by userspace (a page when off). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

#define DONE_MATCH(s, k, t) ((s)->key == (k) && (s)->tgid == (t))
/* (tag, tgid) of a completed I/O -> its timestamps, until io_uring posts it or aio reaps it. */
SLOT_TABLE(done, done_slot, DONE_MATCH)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_PHASES);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* Requests per hardware queue: HW_QUEUE_KEY(type, id) (NVMe: poll vs irq queues). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HW_QUEUE_TYPES *HW_QUEUE_IDS);
	__type(key, __u32);
	__type(value, __u64);
} hw_queues SEC(".maps");

/* Makes the skeleton emit these types for the Rust side. */
struct hist _hist = {};
struct inflight_slot _inflight_slot = {};
struct done_slot _done_slot = {};
struct io_record _io_record = {};

static __always_inline void record(enum phase p, __u64 v)
{
	__u32 k = p;
	struct hist *h = bpf_map_lookup_elem(&hists, &k);

	if (h)
		hist_add(h, v);
}

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
	return bpf_task_storage_get(&task_ctxs, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* ---- syscalls: where the application submits and reaps ---- */

static __always_inline int on_submit_enter(__u32 mode, __u64 aio_events)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_ctx *t;

	if (!traced(tgid))
		return 0;
	t = task_ctx(true);
	if (!t)
		return 0;
	t->enter_ts = bpf_ktime_get_ns();
	if (!first_submit_ts)
		first_submit_ts = t->enter_ts;
	t->mode = mode;
	t->in_submit = 1;
	t->in_sys = 1;
	t->cur_req = 0;
	t->aio_events = aio_events;
	return 0;
}

struct reap_ctx {
	struct task_ctx *t;
	__u64 now;
};

/* The end of an I/O's trip: it is reaped at `now`. */
static __always_inline void emit(struct io_record *r, __u64 now)
{
	r->reap_ts = now;
	/* No wakeup per record: userspace drains every 20 ms (a wakeup per I/O costs ~25%). */
	if (targ_events && bpf_ringbuf_output(&events, r, sizeof(*r), BPF_RB_NO_WAKEUP))
		count(C_RB_DROPS, 1);
}

static long reap_one(__u64 i, struct reap_ctx *c)
{
	struct io_record *r;

	if (i >= REAP_MAX)
		return 1;
	r = &c->t->pending[i];
	record(PH_REAP, c->now - r->posted_ts);
	record(PH_COMPLETION, c->now - r->complete_ts);
	record(PH_TOTAL, c->now - r->submit_ts);
	emit(r, c->now);
	return 0;
}

/* Completions posted to this task since its last reap are reaped now. bpf_loop keeps the
 * verifier's work independent of REAP_MAX. */
static __always_inline void reap_posted(struct task_ctx *t, __u64 now)
{
	struct reap_ctx c = {.t = t, .now = now};
	__u32 n = t->nposted;

	if (n > REAP_MAX)
		n = REAP_MAX;
	if (n) {
		bpf_loop(n, reap_one, &c, 0);
		last_reap_ts = now;
	}
	t->nposted = 0;
}

static __always_inline int on_uring_exit(void)
{
	struct task_ctx *t = task_ctx(false);

	if (!t)
		return 0;
	t->in_submit = 0;
	t->in_sys = 0;
	reap_posted(t, bpf_ktime_get_ns());
	return 0;
}

static __always_inline int on_aio_submit_exit(void)
{
	struct task_ctx *t = task_ctx(false);

	if (t) {
		t->in_submit = 0;
		t->in_sys = 0;
	}
	return 0;
}

static __always_inline int on_getevents_enter(__u64 events)
{
	struct task_ctx *t = task_ctx(true);

	if (t) {
		t->aio_events = events;
		t->in_sys = 1;
	}
	return 0;
}

struct aio_reap_ctx {
	struct io_event *events;
	__u64 now;
	__u64 matched;
	__u32 tgid;
};

static long aio_reap_one(__u64 i, struct aio_reap_ctx *c)
{
	struct done_slot *s;
	struct done *d;
	__u64 tag;

	if (bpf_probe_read_user(&tag, sizeof(tag), &c->events[i].obj))
		return 1;
	s = done_find(tag, c->tgid);
	if (!s) {
		count(C_REAP_UNMATCHED, 1);
		return 0;
	}
	d = &s->v;
	/* aio posts inside the bio's end_io, right after block_rq_complete: posting is part of the
	 * device completion path and has no tracepoint of its own. */
	record(PH_REAP, c->now - d->complete_ts);
	record(PH_COMPLETION, c->now - d->complete_ts);
	record(PH_TOTAL, c->now - d->submit_ts);
	if (targ_events) {
		struct io_record r = {
		    .tag = tag,
		    .submit_ts = d->submit_ts,
		    .queue_ts = d->queue_ts,
		    .issue_ts = d->issue_ts,
		    .complete_ts = d->complete_ts,
		    .tgid = c->tgid,
		    .mode = MODE_AIO,
		};

		emit(&r, c->now);
	}
	slot_release(&s->key);
	c->matched++;
	return 0;
}

/* io_getevents returned `ret` events in the user array: each one is reaped now. */
static __always_inline int on_getevents_exit(__u32 tgid, long ret)
{
	struct aio_reap_ctx c = {.tgid = tgid};
	struct task_ctx *t = task_ctx(false);

	if (t)
		t->in_sys = 0;
	if (!t || !t->aio_events || ret <= 0)
		return 0;
	c.events = (struct io_event *)t->aio_events;
	c.now = bpf_ktime_get_ns();
	last_reap_ts = c.now;
	bpf_loop(ret < MAX_AIO_EVENTS ? ret : MAX_AIO_EVENTS, aio_reap_one, &c, 0);
	return 0;
}

/*
 * The raw syscall tracepoints, filtered by number: one cheap program where eight per-syscall
 * tracepoints cost ~180 ns a run through perf's syscall path (and turn the same syscall-trace
 * path on for every task anyway). x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl).
 */
#define NR_IO_GETEVENTS 208
#define NR_IO_SUBMIT 209
#define NR_IO_PGETEVENTS 333
#define NR_IO_URING_ENTER 426

static __always_inline bool io_syscall(long id)
{
	return id == NR_IO_URING_ENTER || id == NR_IO_SUBMIT || id == NR_IO_GETEVENTS ||
	       id == NR_IO_PGETEVENTS;
}

static __always_inline int on_sys_enter(long id, __u64 arg3)
{
	if (!io_syscall(id))
		return 0;
	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (id == NR_IO_URING_ENTER)
		return on_submit_enter(MODE_URING, 0);
	if (id == NR_IO_SUBMIT)
		return on_submit_enter(MODE_AIO, 0);
	/* io_getevents / io_pgetevents: the user's io_event array is the fourth argument. */
	return on_getevents_enter(arg3);
}

static __always_inline int on_sys_exit(long id, long ret)
{
	__u32 tgid;

	if (!io_syscall(id))
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!traced(tgid))
		return 0;
	if (id == NR_IO_URING_ENTER)
		return on_uring_exit();
	if (id == NR_IO_SUBMIT)
		return on_aio_submit_exit();
	return on_getevents_exit(tgid, ret);
}

/* The fourth syscall argument travels in r10 (the syscall ABI's substitute for rcx). */
SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	return on_sys_enter(id, regs->r10);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	return on_sys_exit(regs->orig_ax, ret);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter_raw, struct pt_regs *regs, long id)
{
	return on_sys_enter(id, BPF_CORE_READ(regs, r10));
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	return on_sys_exit(BPF_CORE_READ(regs, orig_ax), ret);
}

/* ---- io_uring ---- */

static __always_inline int on_submit_req(struct io_kiocb *req)
{
	struct task_ctx *t;

	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t)
		t->cur_req = (__u64)req;
	return 0;
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(submit_req, struct io_kiocb *req)
{
	return on_submit_req(req);
}

SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(submit_sqe, struct io_kiocb *req)
{
	return on_submit_req(req);
}

SEC("raw_tp/io_uring_submit_req")
int BPF_PROG(submit_req_raw, struct io_kiocb *req)
{
	return on_submit_req(req);
}

static __always_inline int on_uring_complete(void *req)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct done_slot *s;
	struct task_ctx *t;
	struct done *d;
	__u64 now;
	__u32 n;

	if (!traced(tgid))
		return 0;
	s = done_find((__u64)req, tgid);
	if (!s)
		return 0;
	d = &s->v;
	now = bpf_ktime_get_ns();
	record(PH_POSTED, now - d->complete_ts);
	t = task_ctx(true);
	if (t) {
		n = t->nposted;
		if (n < REAP_MAX) {
			struct io_record *r = &t->pending[n];

			r->tag = (__u64)req;
			r->submit_ts = d->submit_ts;
			r->queue_ts = d->queue_ts;
			r->issue_ts = d->issue_ts;
			r->complete_ts = d->complete_ts;
			r->posted_ts = now;
			r->tgid = tgid;
			r->mode = MODE_URING;
			t->nposted = n + 1;
		} else {
			count(C_REAP_OVERFLOW, 1);
		}
	}
	slot_release(&s->key);
	return 0;
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, void *ctx_, void *req)
{
	return on_uring_complete(req);
}

SEC("raw_tp/io_uring_complete")
int BPF_PROG(uring_complete_raw, void *ctx_, void *req)
{
	return on_uring_complete(req);
}

/* ---- block layer ---- */

/* The user iocb of an aio direct I/O, found from its bio: the bio's end_io says which dio struct
 * holds the kiocb, and the kiocb sits at offset 0 of the aio_kiocb. */
static __always_inline __u64 aio_user_iocb(struct bio *bio)
{
	__u64 end_io = (__u64)BPF_CORE_READ(bio, bi_end_io);
	struct kiocb *iocb = NULL;

	if (!end_io)
		return 0;
	if (end_io == targ_iomap_end_io) {
		struct iomap_dio *dio = BPF_CORE_READ(bio, bi_private);

		iocb = BPF_CORE_READ(dio, iocb);
	} else if (end_io == targ_blkdev_end_io_async) {
		struct blkdev_dio *dio =
		    (void *)((char *)bio - bpf_core_field_offset(struct blkdev_dio, bio));

		iocb = BPF_CORE_READ(dio, iocb);
	} else if (end_io == targ_blkdev_end_io) {
		struct blkdev_dio *dio = BPF_CORE_READ(bio, bi_private);

		iocb = BPF_CORE_READ(dio, iocb);
	}
	if (!iocb)
		return 0;
	return BPF_CORE_READ((struct aio_kiocb *)iocb, ki_res.obj);
}

static __always_inline int on_bio_queue(struct bio *bio)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct inflight_slot *s;
	struct task_ctx *t;
	bool existed;
	__u64 tag;

	if (!traced(tgid))
		return 0;
	t = task_ctx(false);
	if (!t || !t->in_submit)
		return 0;
	tag = t->mode == MODE_URING ? t->cur_req : aio_user_iocb(bio);
	if (!tag)
		count(C_BIOS_UNTAGGED, 1);
	s = inflight_claim((__u64)bio, 0, &existed);
	if (!s) {
		count(C_INFLIGHT_FULL, 1);
		return 0;
	}
	/* The same bio address queued again: the earlier bio never reached block_rq_complete. */
	if (existed)
		count(C_EXPIRED_INFLIGHT, 1);
	s->v.mode = t->mode;
	s->v.write = BPF_CORE_READ(bio, bi_opf) & 1;
	s->v.tgid = tgid;
	s->v.submit_ts = t->enter_ts;
	s->v.queue_ts = bpf_ktime_get_ns();
	s->v.issue_ts = 0;
	s->v.nvme_ts = 0;
	s->v.nvme_done_ts = 0;
	s->v.tag = tag;
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(bio_queue, struct bio *bio)
{
	return on_bio_queue(bio);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(bio_queue_raw, struct bio *bio)
{
	return on_bio_queue(bio);
}

/* Per-bio work, shared by the tp_btf and raw_tp entry points (which differ only in how they read
 * kernel pointers: plain BTF loads vs. CO-RE probe reads). */
static __always_inline bool issue_one(__u64 key, __u64 now)
{
	struct inflight_slot *s = inflight_find(key, 0);

	if (s)
		s->v.issue_ts = now;
	return s != NULL;
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

/* Completed bios of one I/O (split, or merged into one request) share its done slot; the I/O
 * completes with its last bio. A slot left by an earlier I/O on the same tag is reclaimed. */
static __always_inline void mark_done(struct inflight *e, __u64 now)
{
	struct done_slot *s;
	bool existed;

	s = done_claim(e->tag, e->tgid, &existed);
	if (!s) {
		count(C_DONE_FULL, 1);
		return;
	}
	if (existed && s->v.submit_ts == e->submit_ts) {
		if (now > s->v.complete_ts)
			s->v.complete_ts = now;
		return;
	}
	if (existed)
		count(C_EXPIRED_DONE, 1);
	/* Once per I/O, however many bios it was split into. */
	count(e->write ? C_WRITES : C_READS, 1);
	s->tgid = e->tgid;
	s->v.submit_ts = e->submit_ts;
	s->v.queue_ts = e->queue_ts;
	s->v.issue_ts = e->issue_ts;
	s->v.complete_ts = now;
}

static __always_inline bool complete_one(__u64 key, __u64 now)
{
	struct inflight_slot *s = inflight_find(key, 0);
	struct inflight *e;

	if (!s)
		return false;
	e = &s->v;
	record(PH_SUBMISSION, e->queue_ts - e->submit_ts);
	if (e->issue_ts) {
		record(PH_BLOCK, e->issue_ts - e->queue_ts);
		record(PH_DEVICE, now - e->issue_ts);
		if (e->nvme_ts && e->nvme_ts <= e->issue_ts)
			record(PH_DRIVER, e->issue_ts - e->nvme_ts);
		if (e->nvme_done_ts)
			record(PH_NVME_END, now - e->nvme_done_ts);
	}
	if (e->tag)
		mark_done(e, now);
	slot_release(&s->key);
	return true;
}

struct walk_ctx {
	struct bio *bio;
	__u64 now;
	bool complete;
	bool tracked;
};

/* Further bios of a merged request: rare, so the slower probe reads are fine here. */
static long walk_bio(__u64 i, struct walk_ctx *c)
{
	struct bio *bio = c->bio;

	if (!bio)
		return 1;
	c->bio = BPF_CORE_READ(bio, bi_next);
	if (c->complete)
		complete_one((__u64)bio, c->now);
	else
		c->tracked |= issue_one((__u64)bio, c->now);
	return 0;
}

static __always_inline bool walk_rest(struct bio *next, __u64 now, bool complete)
{
	struct walk_ctx c = {.bio = next, .now = now, .complete = complete};

	if (next)
		bpf_loop(MAX_BIOS_PER_RQ, walk_bio, &c, 0);
	return c.tracked;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(rq_issue, struct request *rq)
{
	struct bio *bio;
	bool tracked;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	bio = rq->bio;
	if (!bio)
		return 0;
	tracked = issue_one((__u64)bio, now);
	tracked |= walk_rest(bio->bi_next, now, false);
	count_hw_queue(rq->mq_hctx->type, rq->mq_hctx->queue_num, tracked);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(rq_issue_raw, struct request *rq)
{
	struct bio *bio;
	bool tracked;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	bio = BPF_CORE_READ(rq, bio);
	if (!bio)
		return 0;
	tracked = issue_one((__u64)bio, now);
	tracked |= walk_rest(BPF_CORE_READ(bio, bi_next), now, false);
	count_hw_queue(BPF_CORE_READ(rq, mq_hctx, type), BPF_CORE_READ(rq, mq_hctx, queue_num),
		       tracked);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct bio *bio;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	bio = rq->bio;
	if (!bio)
		return 0;
	if (complete_one((__u64)bio, now))
		count(C_BYTES, nr_bytes);
	walk_rest(bio->bi_next, now, true);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(rq_complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct bio *bio;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	bio = BPF_CORE_READ(rq, bio);
	if (!bio)
		return 0;
	if (complete_one((__u64)bio, now))
		count(C_BYTES, nr_bytes);
	walk_rest(BPF_CORE_READ(bio, bi_next), now, true);
	return 0;
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
	struct task_ctx *t;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	if (traced_thread(prev)) {
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
		if (preempt) {
			t = bpf_task_storage_get(&task_ctxs, prev, 0, 0);
			if (t && !t->in_sys)
				t->preempt_ts = now;
		}
	}
	if (traced_thread(next)) {
		t = bpf_task_storage_get(&task_ctxs, next, 0, 0);
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
	}
	return 0;
}

/* A traced thread woken (its I/O completed, typically) waits for a CPU until sched_switch runs it:
 * the time a busy CPU adds to every I/O, which no I/O phase would otherwise explain. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	struct task_ctx *t;

	if (!enabled || !traced_thread(p))
		return 0;
	t = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (t)
		t->wake_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev)
{
	if (enabled && traced_thread_raw(prev))
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
	return 0;
}

/* ---- NVMe (module tracepoints; loaded only where the driver is) ---- */

/* The tracepoints hand over NULL-able request pointers: checked before any field read. */
SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(nvme_setup_cmd, struct request *rq)
{
	struct inflight_slot *s;

	if (!enabled || !rq)
		return 0;
	s = inflight_find((__u64)BPF_CORE_READ(rq, bio), 0);
	if (s) {
		s->v.nvme_ts = bpf_ktime_get_ns();
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
	struct inflight_slot *s;
	__u64 now;

	if (!enabled || !rq)
		return 0;
	s = inflight_find((__u64)BPF_CORE_READ(rq, bio), 0);
	if (s && s->v.issue_ts) {
		now = bpf_ktime_get_ns();
		record(PH_NVME, now - s->v.issue_ts);
		s->v.nvme_done_ts = now;
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
	struct inflight_slot *s;

	if (!rq || ret)
		return;
	s = inflight_find((__u64)BPF_CORE_READ(rq, bio), 0);
	if (s && s->v.issue_ts)
		record(PH_NVME_SUBMIT, bpf_ktime_get_ns() - s->v.issue_ts);
}

SEC("fexit/nvme_queue_rq")
int BPF_PROG(nvme_queue_rq_exit, struct blk_mq_hw_ctx *hctx, const struct blk_mq_queue_data *bd,
	     int ret)
{
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
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *rq = bpf_map_lookup_elem(&queue_rq_args, &tid);

	if (!rq)
		return 0;
	queue_rq_done((struct request *)*rq, ret);
	bpf_map_delete_elem(&queue_rq_args, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
