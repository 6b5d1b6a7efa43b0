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

/* A bio leads to its parent through at most this many hops: splits (bio_chain) and the clones of
 * stacked devices (dm over dm-crypt over a split ...). */
#define MAX_CHAIN 6

/*
 * Stacked devices' own structures, from their modules' BTF (CO-RE; the ___iopath suffix is
 * dropped when matching). Only the fields read are named. Where a module is not loaded its type
 * does not exist, and bpf_core_type_exists() makes the branch that reads it dead code, so the
 * program still loads (core_fixes.bpf.h #12).
 */
struct dm_io___iopath {
	struct bio *orig_bio;
} __attribute__((preserve_access_index));

struct dm_target_io___iopath {
	struct dm_io___iopath *io;
	struct bio clone;
} __attribute__((preserve_access_index));

struct dm_crypt_io___iopath {
	struct bio *base_bio;
} __attribute__((preserve_access_index));

struct r1bio___iopath {
	struct bio *master_bio;
} __attribute__((preserve_access_index));

struct md_io_clone___iopath {
	struct bio *orig_bio;
	struct bio bio_clone;
} __attribute__((preserve_access_index));

struct md_io_acct___iopath {
	struct bio *orig_bio;
	struct bio bio_clone;
} __attribute__((preserve_access_index));

/* The bio a clone or split came from (NULL: no clone iopath knows). `*stacked` is set when the
 * hop crossed a stacked device (a split stays on its device). */
static __always_inline struct bio *bio_parent(struct bio *bio, __u64 end_io, bool *stacked)
{
	if (end_io == targ_chain_end_io)
		return BPF_CORE_READ(bio, bi_private);
	/* dm core: the clone sits in a dm_target_io whose dm_io holds the original bio. */
	if (end_io == targ_dm_end_io && bpf_core_type_exists(struct dm_target_io___iopath)) {
		struct dm_target_io___iopath *tio =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct dm_target_io___iopath, clone));

		*stacked = true;
		return BPF_CORE_READ(tio, io, orig_bio);
	}
	/* dm-crypt: its clone's bi_private is the dm_crypt_io of the bio dm handed it. */
	if (end_io == targ_crypt_end_io && bpf_core_type_exists(struct dm_crypt_io___iopath)) {
		struct dm_crypt_io___iopath *io = BPF_CORE_READ(bio, bi_private);

		*stacked = true;
		return BPF_CORE_READ(io, base_bio);
	}
	/* md raid1: each leg's bio points at the r1bio of the bio md was given. */
	if ((end_io == targ_raid1_read_end_io || end_io == targ_raid1_write_end_io) &&
	    bpf_core_type_exists(struct r1bio___iopath)) {
		struct r1bio___iopath *r1 = BPF_CORE_READ(bio, bi_private);

		*stacked = true;
		return BPF_CORE_READ(r1, master_bio);
	}
	/* md's accounting clone of the original bio: md_io_clone (6.3+), md_io_acct before. */
	if (end_io == targ_md_clone_end_io && bpf_core_type_exists(struct md_io_clone___iopath)) {
		struct md_io_clone___iopath *c =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct md_io_clone___iopath, bio_clone));

		*stacked = true;
		return BPF_CORE_READ(c, orig_bio);
	}
	if (end_io == targ_md_clone_end_io && bpf_core_type_exists(struct md_io_acct___iopath)) {
		struct md_io_acct___iopath *c =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct md_io_acct___iopath, bio_clone));

		*stacked = true;
		return BPF_CORE_READ(c, orig_bio);
	}
	return NULL;
}

/* The I/O a direct-I/O kiocb belongs to: the kiocb itself is the io_kiocb's first member for
 * io_uring; aio's sits at offset 0 of the aio_kiocb, whose user iocb and kioctx name it. */
static __always_inline __u64 io_key_of_kiocb(struct kiocb *iocb, __u32 *disc,
					     struct aio_kiocb **aio)
{
	__u64 done = (__u64)BPF_CORE_READ(iocb, ki_complete);

	if (done && done == targ_aio_complete) {
		struct aio_kiocb *a = (void *)iocb;

		*aio = a;
		*disc = (__u32)(__u64)BPF_CORE_READ(a, ki_ctx);
		return BPF_CORE_READ(a, ki_res.obj);
	}
	return io_kiocb_of_kiocb(iocb);
}

/*
 * The key of the I/O a bio belongs to (0: not an application direct I/O iopath follows). Which
 * structure holds the owner is told by the bio's end_io: iomap (ext4, xfs files) and the block
 * device's own direct I/O; sync I/O is owned by the task that waits for it. Splits and stacked
 * devices' clones are walked back to the bio the application's I/O made (`*stacked`: through a
 * stacked device).
 */
static __always_inline __u64 io_key_of_bio(struct bio *bio, __u32 *disc, bool *stacked,
					   struct aio_kiocb **aio)
{
	__u64 end_io = 0;
	struct bio *up;
	int i;

	*disc = 0;
	*stacked = false;
	*aio = NULL;
	for (i = 0; i < MAX_CHAIN; i++) {
		end_io = (__u64)BPF_CORE_READ(bio, bi_end_io);
		if (!end_io)
			return 0;
		up = bio_parent(bio, end_io, stacked);
		if (!up)
			break;
		bio = up;
	}
	if (end_io == targ_iomap_end_io) {
		struct iomap_dio *dio = BPF_CORE_READ(bio, bi_private);
		struct kiocb *iocb = BPF_CORE_READ(dio, iocb);

		if (!BPF_CORE_READ(iocb, ki_complete))
			return (__u64)BPF_CORE_READ(dio, submit.waiter);
		return io_key_of_kiocb(iocb, disc, aio);
	}
	if (end_io == targ_blkdev_end_io_async) {
		struct blkdev_dio *dio =
		    (void *)((char *)bio - bpf_core_field_offset(struct blkdev_dio, bio));

		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc, aio);
	}
	if (end_io == targ_blkdev_end_io) {
		struct blkdev_dio *dio = BPF_CORE_READ(bio, bi_private);

		if (blkdev_dio_is_sync(dio))
			return (__u64)BPF_CORE_READ(dio, waiter);
		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc, aio);
	}
	/* A block device's small sync direct I/O waits in submit_bio_wait on its own stack: the
	 * waiter is the task submitting it. From a kworker (blk-throttle's release, dm-crypt's
	 * workers) the owner cannot be told: not followed. */
	/* Before 5.17 (core_fixes.bpf.h #21): the waiting task is in bi_private, any context. */
	if (end_io == targ_blkdev_simple_end_io)
		return (__u64)BPF_CORE_READ(bio, bi_private);
	if (end_io == targ_bio_wait_end_io && !(CURRENT_FLAGS() & (PF_WQ_WORKER | PF_IO_WORKER)))
		return bpf_get_current_task();
	return 0;
}

#define LINK_MATCH(s, k, d) ((s)->key == (k))
/* bio -> the I/O that owns it (a cache of io_key_of_bio, see struct link_slot). */
SLOT_TABLE(links, link_slot, LINK_MATCH)

static __always_inline struct io_slot *io_of_bio_derived(struct bio *bio, bool *stacked)
{
	struct aio_kiocb *aio;
	__u32 disc;
	__u64 key = io_key_of_bio(bio, &disc, stacked, &aio);

	return key ? ios_find(key, disc) : NULL;
}

/* Defined by the includer (phases.bpf.c): claims an aio request at its first bio (--lean). */
static __always_inline struct io_slot *aio_claim_at_bio(__u64 key, __u32 disc,
							struct aio_kiocb *aio, __u64 now);

/* The I/O that owns a bio: through its link when it has one (`release`: the bio is done, free
 * the link), else derived. */
static __always_inline struct io_slot *io_of_bio(struct bio *bio, bool release)
{
	struct link_slot *l = links_find((__u64)bio, 0);
	struct io_slot *s;
	bool stacked;

	if (!l)
		return io_of_bio_derived(bio, &stacked);
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts != l->start)
		s = NULL;
	if (release)
		links_release(l);
	return s ? s : io_of_bio_derived(bio, &stacked);
}

/* A bio enters the block layer. A traced I/O queued by a kworker was held back (blk-throttle
 * releases bios from its dispatch work); one queued from its own process (the submitter, the SQ
 * thread, an io-wq worker) was not. */
/* False when the bio belongs to no I/O followed (the caller says why). `claim`: an aio request
 * not claimed yet may be claimed here (--lean aio, a bio the traced process queued). */
static __always_inline bool on_bio_queue(struct bio *bio, bool claim)
{
	struct aio_kiocb *aio;
	struct link_slot *l;
	struct io_slot *s;
	bool existed, stacked;
	__u32 disc;
	__u64 now, key;

	key = io_key_of_bio(bio, &disc, &stacked, &aio);
	s = key ? ios_find(key, disc) : NULL;
	now = 0;
	if (!s && aio && claim) {
		now = bpf_ktime_get_ns();
		s = aio_claim_at_bio(key, disc, aio, now);
	}
	if (!s)
		return false;
	/* Read once per followed bio, never for a bio of no followed I/O. */
	if (!now)
		now = bpf_ktime_get_ns();
	l = links_claim((__u64)bio, 0, &existed);
	if (l) {
		l->io_key = s->key;
		l->disc = s->disc;
		l->start = s->r.submit_ts;
	}
	/* A clone on a stacked device's lower device: the top bio was queued before it. */
	if (stacked) {
		s->r.mode |= RF_STACKED;
		if (!s->lower_queue_ts)
			s->lower_queue_ts = now;
	}
	if (s->r.queue_ts)
		return true;
	s->r.queue_ts = now;
	/* The disk the application addressed (a stacked device's top, not its lower disks): for
	 * top's rows and the events' device tracks only, a trace does not read it. */
	if (targ_top || targ_events)
		s->r.dev = bio_devt(bio);
	if (BPF_CORE_READ(bio, bi_opf) & 1)
		s->r.mode |= RF_WRITE;
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != s->r.tgid &&
	    (CURRENT_FLAGS() & PF_WQ_WORKER))
		s->r.mode |= RF_THROTTLED;
	return true;
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

/* `bytes`: the request's, given with its first bio (a merged request's bytes count for the I/O
 * of its first bio). */
static __always_inline bool complete_one(struct bio *bio, __u64 now, __u32 bytes)
{
	struct io_slot *s = io_of_bio(bio, true);

	if (!s)
		return false;
	s->r.bytes += bytes;
	if (now > s->r.complete_ts)
		s->r.complete_ts = now;
	if (s->nvme_done_ts && s->nvme_done_ts <= now)
		record(PH_NVME_END, now - s->nvme_done_ts);
	return true;
}

static __always_inline bool one_bio(struct bio *bio, __u64 now, bool complete, __u32 bytes)
{
	return complete ? complete_one(bio, now, bytes) : issue_one(bio, now);
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
	c->tracked |= one_bio(bio, c->now, c->complete, 0);
	return 0;
}

/* Every bio of a request: the first inline (almost every request has one), the rest in a loop.
 * Returns whether any belonged to a traced I/O. */
static __always_inline bool walk_rq(struct bio *first, struct bio *next, __u64 now, bool complete,
				    __u32 bytes)
{
	struct walk_ctx c = {.bio = next, .now = now, .complete = complete};

	c.tracked = one_bio(first, now, complete, bytes);
	if (next)
		LOOP(MAX_BIOS_PER_RQ, MAX_BIOS_PER_RQ, walk_bio, &c);
	return c.tracked;
}

/* A bio ended (block_bio_complete; attached only where stacked devices exist). The top bio of a
 * stacked device never became a request, so its link is still held: its end is the end of the
 * stacked layer's completion work, and the link is freed here. */
static __always_inline void on_bio_complete(struct bio *bio)
{
	struct link_slot *l = links_find((__u64)bio, 0);
	struct io_slot *s;

	if (!l)
		return;
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts == l->start && (s->r.mode & RF_STACKED) && !s->top_end_ts)
		s->top_end_ts = bpf_ktime_get_ns();
	links_release(l);
}

#endif /* IOPATH_BLOCK_CORE_BPF_H */
