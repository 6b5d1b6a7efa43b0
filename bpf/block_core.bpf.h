/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The block core: what happened to an I/O's bios and requests. It never asks which route the I/O
 * came by: every bio leads back to the I/O that owns it (io_key_of_bio), in whatever context the
 * tracepoint fires, so a bio queued by an io-wq worker or by the kworker blk-throttle releases it
 * from, or split into several requests, stamps the same per-I/O state.
 *
 * Included once, by phases.bpf.c, after its rodata (targ_*_end_io, targ_*_complete).
 */
#ifndef IOPATH_BLOCK_CORE_BPF_H
#define IOPATH_BLOCK_CORE_BPF_H

#include "io_state.bpf.h"
#include "core_fixes.bpf.h"

/* Split bios are chained to their parent (bio_chain: bi_end_io = bio_chain_endio, bi_private =
 * the parent); a few levels cover a bio split by more than one layer. */
#define MAX_CHAIN 4

/* The I/O a direct-I/O kiocb belongs to: the kiocb itself is the io_kiocb's first member for
 * io_uring; aio's sits at offset 0 of the aio_kiocb, whose user iocb and kioctx name it. */
static __always_inline __u64 io_key_of_kiocb(struct kiocb *iocb, __u32 *disc)
{
	__u64 done = (__u64)BPF_CORE_READ(iocb, ki_complete);

	if (done && done == targ_aio_complete) {
		struct aio_kiocb *a = (void *)iocb;

		*disc = (__u32)(__u64)BPF_CORE_READ(a, ki_ctx);
		return BPF_CORE_READ(a, ki_res.obj);
	}
	return io_kiocb_of_kiocb(iocb);
}

/*
 * The key of the I/O a bio belongs to (0: not an application direct I/O iopath follows). Which
 * structure holds the owner is told by the bio's end_io: iomap (ext4, xfs files) and the block
 * device's own direct I/O; sync I/O is owned by the task that waits for it.
 */
static __always_inline __u64 io_key_of_bio(struct bio *bio, __u32 *disc)
{
	__u64 end_io = 0;
	int i;

	*disc = 0;
	for (i = 0; i < MAX_CHAIN; i++) {
		end_io = (__u64)BPF_CORE_READ(bio, bi_end_io);
		if (!end_io || end_io != targ_chain_end_io)
			break;
		bio = BPF_CORE_READ(bio, bi_private);
	}
	if (!end_io)
		return 0;
	if (end_io == targ_iomap_end_io) {
		struct iomap_dio *dio = BPF_CORE_READ(bio, bi_private);
		struct kiocb *iocb = BPF_CORE_READ(dio, iocb);

		if (!BPF_CORE_READ(iocb, ki_complete))
			return (__u64)BPF_CORE_READ(dio, submit.waiter);
		return io_key_of_kiocb(iocb, disc);
	}
	if (end_io == targ_blkdev_end_io_async) {
		struct blkdev_dio *dio =
		    (void *)((char *)bio - bpf_core_field_offset(struct blkdev_dio, bio));

		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc);
	}
	if (end_io == targ_blkdev_end_io) {
		struct blkdev_dio *dio = BPF_CORE_READ(bio, bi_private);

		if (BPF_CORE_READ(dio, flags) & DIO_IS_SYNC)
			return (__u64)BPF_CORE_READ(dio, waiter);
		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc);
	}
	/* A block device's small sync direct I/O waits in submit_bio_wait on its own stack: the
	 * waiter is the task submitting it (a throttled one is released by a kworker, where the
	 * owner cannot be told: counted untagged). */
	if (end_io == targ_bio_wait_end_io)
		return bpf_get_current_task();
	return 0;
}

#define LINK_MATCH(s, k, d) ((s)->key == (k))
/* bio -> the I/O that owns it (a cache of io_key_of_bio, see struct link_slot). */
SLOT_TABLE(links, link_slot, LINK_MATCH)

static __always_inline struct io_slot *io_of_bio_derived(struct bio *bio)
{
	__u32 disc;
	__u64 key = io_key_of_bio(bio, &disc);

	return key ? ios_find(key, disc) : NULL;
}

/* The I/O that owns a bio: through its link when it has one (`release`: the bio is done, free
 * the link), else derived. */
static __always_inline struct io_slot *io_of_bio(struct bio *bio, bool release)
{
	struct link_slot *l = links_find((__u64)bio, 0);
	struct io_slot *s;

	if (!l)
		return io_of_bio_derived(bio);
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts != l->start)
		s = NULL;
	if (release)
		slot_release(&l->key);
	return s ? s : io_of_bio_derived(bio);
}

/* A bio enters the block layer. A traced I/O queued by a kworker was held back (blk-throttle
 * releases bios from its dispatch work); one queued from its own process (the submitter, the SQ
 * thread, an io-wq worker) was not. */
static __always_inline void on_bio_queue(struct bio *bio, bool in_traced_syscall)
{
	struct task_struct *cur;
	struct link_slot *l;
	struct io_slot *s;
	bool existed;

	s = io_of_bio_derived(bio);
	if (!s) {
		if (in_traced_syscall)
			count(C_BIOS_UNTAGGED, 1);
		return;
	}
	l = links_claim((__u64)bio, 0, &existed);
	if (l) {
		l->io_key = s->key;
		l->disc = s->disc;
		l->start = s->r.submit_ts;
	}
	if (s->r.queue_ts)
		return;
	s->r.queue_ts = bpf_ktime_get_ns();
	if (BPF_CORE_READ(bio, bi_opf) & 1)
		s->r.mode |= RF_WRITE;
	cur = bpf_get_current_task_btf();
	if (cur->tgid != s->r.tgid && (cur->flags & PF_WQ_WORKER))
		s->r.mode |= RF_THROTTLED;
}

static __always_inline bool issue_one(struct bio *bio, __u64 now)
{
	struct io_slot *s = io_of_bio(bio, false);

	if (!s)
		return false;
	if (!s->r.issue_ts)
		s->r.issue_ts = now;
	s->nrq++;
	if (s->nvme_ts && s->nvme_ts <= now)
		record(PH_DRIVER, now - s->nvme_ts);
	return true;
}

static __always_inline bool complete_one(struct bio *bio, __u64 now)
{
	struct io_slot *s = io_of_bio(bio, true);

	if (!s)
		return false;
	if (now > s->r.complete_ts)
		s->r.complete_ts = now;
	if (s->nvme_done_ts && s->nvme_done_ts <= now)
		record(PH_NVME_END, now - s->nvme_done_ts);
	return true;
}

static __always_inline bool one_bio(struct bio *bio, __u64 now, bool complete)
{
	return complete ? complete_one(bio, now) : issue_one(bio, now);
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
	c->tracked |= one_bio(bio, c->now, c->complete);
	return 0;
}

/* Every bio of a request: the first inline (almost every request has one), the rest in a loop.
 * Returns whether any belonged to a traced I/O. */
static __always_inline bool walk_rq(struct bio *first, struct bio *next, __u64 now, bool complete)
{
	struct walk_ctx c = {.bio = next, .now = now, .complete = complete};

	c.tracked = one_bio(first, now, complete);
	if (next)
		bpf_loop(MAX_BIOS_PER_RQ, walk_bio, &c, 0);
	return c.tracked;
}

#endif /* IOPATH_BLOCK_CORE_BPF_H */
