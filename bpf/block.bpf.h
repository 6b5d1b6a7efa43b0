/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The block layer's hooks: a bio queued, split or ended, a request issued and completed. The work
 * is the block core's (block_core.bpf.h), which finds each bio's I/O whatever route claimed it;
 * here each hook also feeds the page-cache route (a buffered call's own bios), writeback, the
 * disks' flush integrals, the hardware-queue counts and the lean trace's issue stamp.
 */
#ifndef IOPATH_BLOCK_BPF_H
#define IOPATH_BLOCK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "run.bpf.h"
#include "task.bpf.h"
#include "disk_busy.bpf.h"
#include "stamp_check.bpf.h"
#include "block_core.bpf.h"
#include "writeback.bpf.h"
#include "core_fixes.bpf.h"

/* Requests per hardware queue: HW_QUEUE_KEY(type, id) (NVMe: poll vs irq queues). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HW_QUEUE_TYPES *HW_QUEUE_IDS);
	__type(key, __u32);
	__type(value, __u64);
} hw_queues SEC(".maps");

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

/* Bios are followed from any context (a kworker releasing throttled bios is not a traced
 * process); only I/Os a traced route claimed are found. */

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
	/* --lean (direct I/O only): a bio of the generator's that no I/O owns is one its direct
	 * I/O's file system sent another way (btrfs's buffered fallback for writes): counted, so
	 * the report never calls its I/Os page-cache hits. A map lookup for such bios only. */
	if (targ_lean) {
		wb_bio_queue(bio, false);
		if (!on_bio_queue(bio, false, btf) && tgid_traced(bpf_get_current_pid_tgid() >> 32))
			count(C_BIOS_UNTAGGED, 1);
		return 0;
	}
	/* top / serve's default: no syscall hook marks a call, so the task's context has nothing
	 * to say here. */
	t = targ_claim_at_bio ? NULL : task_ctx(false);
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

/* A bio's end (block_bio_complete): the same work for the two hook rows that attach it, a
 * trace's where stacked devices exist (bio_complete_*) and top / serve's everywhere (bio_end_*):
 * two programs so the plan can attach each row on its own, one handler. */
static __always_inline int bio_end(struct bio *bio)
{
	if (enabled)
		on_bio_complete(bio);
	return 0;
}

/* Only where stacked devices exist (userspace decides): the top bio's end. */
SEC("tp_btf/block_bio_complete")
int BPF_PROG(bio_complete_btf, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_end(bio);
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(bio_complete_raw, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_end(bio);
}

/* top and serve's bio end (a hook of its own: a trace attaches bio_complete_* only where stacked
 * devices exist, top and serve on every kernel). */
SEC("tp_btf/block_bio_complete")
int BPF_PROG(bio_end_btf, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_end(bio);
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(bio_end_raw, struct request_queue *q, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_end(bio);
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

#endif /* IOPATH_BLOCK_BPF_H */
