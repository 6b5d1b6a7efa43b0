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
static __always_inline __u64 io_key_of_kiocb_done(struct kiocb *iocb, __u64 done, __u32 *disc,
						  struct aio_kiocb **aio)
{
	if (done && done == targ_aio_complete) {
		struct aio_kiocb *a = (void *)iocb;

		*aio = a;
		*disc = (__u32)(__u64)BPF_CORE_READ(a, ki_ctx);
		return BPF_CORE_READ(a, ki_res.obj);
	}
	return io_kiocb_of_kiocb(iocb);
}

static __always_inline __u64 io_key_of_kiocb(struct kiocb *iocb, __u32 *disc,
					     struct aio_kiocb **aio)
{
	return io_key_of_kiocb_done(iocb, (__u64)BPF_CORE_READ(iocb, ki_complete), disc, aio);
}

/*
 * The key of the I/O a bio belongs to (0: not an application direct I/O iopath follows). Which
 * structure holds the owner is told by the bio's end_io: iomap (ext4, xfs files) and the block
 * device's own direct I/O; sync I/O is owned by the task that waits for it. Splits and stacked
 * devices' clones are walked back to the bio the application's I/O made (`*stacked`: through a
 * stacked device).
 */
static __always_inline __u64 io_owner_of_bio(struct bio *bio, __u32 *disc, bool *stacked,
					     struct aio_kiocb **aio, struct bio **root, __u64 *inst)
{
	__u64 end_io = 0;
	struct bio *up;
	int i;

	*disc = 0;
	*stacked = false;
	*aio = NULL;
	for (i = 0; i < MAX_CHAIN; i++) {
		*root = bio;
		end_io = (__u64)BPF_CORE_READ(bio, bi_end_io);
		if (!end_io)
			return 0;
		up = bio_parent(bio, end_io, stacked);
		if (!up)
			break;
		bio = up;
	}
	*root = bio;
	/* The request's own instance: its bio, unless several bios share one dio. */
	*inst = (__u64)bio;
	if (end_io == targ_iomap_end_io) {
		struct iomap_dio *dio = BPF_CORE_READ(bio, bi_private);
		struct kiocb *iocb = BPF_CORE_READ(dio, iocb);
		__u64 done = (__u64)BPF_CORE_READ(iocb, ki_complete);

		/* A freed dio's address is soon another's: its file position tells them apart
		 * (top's instances only: a probe read a trace's issue and completion need not pay).
		 */
		if (targ_top)
			*inst = (__u64)dio ^ ((__u64)BPF_CORE_READ(iocb, ki_pos) << 20);
		if (!done)
			return (__u64)BPF_CORE_READ(dio, submit.waiter);
		return io_key_of_kiocb_done(iocb, done, disc, aio);
	}
	if (end_io == targ_blkdev_end_io_async) {
		struct blkdev_dio *dio =
		    (void *)((char *)bio - bpf_core_field_offset(struct blkdev_dio, bio));

		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc, aio);
	}
	if (end_io == targ_blkdev_end_io) {
		struct blkdev_dio *dio = BPF_CORE_READ(bio, bi_private);

		*inst = (__u64)dio;
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

/* The key of the I/O a bio belongs to (io_owner_of_bio). iopath top and serve also count every
 * bio of no followed I/O (readahead, writeback, the journal, a direct I/O path iopath does not
 * know) as an I/O of its own, keyed by the bio its splits and clones lead back to. */
static __always_inline __u64 io_key_of_bio_inst(struct bio *bio, __u32 *disc, bool *stacked,
						struct aio_kiocb **aio, struct bio **root,
						__u64 *inst)
{
	__u64 key = io_owner_of_bio(bio, disc, stacked, aio, root, inst);

	if (!key && targ_top && *root) {
		*disc = BIO_DISC;
		key = (__u64)*root;
		*inst = key;
	}
	return key;
}

static __always_inline __u64 io_key_of_bio(struct bio *bio, __u32 *disc, bool *stacked,
					   struct aio_kiocb **aio)
{
	struct bio *root = NULL;
	__u64 inst = 0;

	return io_key_of_bio_inst(bio, disc, stacked, aio, &root, &inst);
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

/*
 * iopath top / serve: an I/O no route claimed, at its first bio (started now). A bio of no
 * followed I/O (BIO_DISC) is its own I/O, charged to its process (to no process, 0, when a
 * kernel thread queued it: a flusher, the journal). Without syscall hooks (targ_claim_at_bio)
 * a sync or aio direct I/O starts here too: its submission is not timed. An io_uring request
 * not claimed at its submission (submitted before iopath started) is not followed.
 */
static __always_inline struct io_slot *top_claim_at_bio(struct bio *bio, __u64 key, __u32 disc,
							struct aio_kiocb *aio, __u64 now)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 mode = RF_AT_BIO | RF_NO_REAP;

	/* A cache flush moves no data and its request is the flush machinery's own (issued without
	 * the bio): not an I/O of a row, and never one "not linked" either. */
	if (!BPF_CORE_READ(bio, bi_iter.bi_size))
		return NULL;
	if (disc == BIO_DISC) {
		if (CURRENT_FLAGS() & PF_KTHREAD)
			tgid = 0;
		mode |= MODE_BIO;
	} else if (!targ_claim_at_bio) {
		return NULL;
	} else if (aio) {
		mode |= MODE_AIO;
	} else if (key == bpf_get_current_task()) {
		/* A sync direct I/O is owned by the task that waits for it: this one. */
		mode |= MODE_SYNC;
	} else {
		return NULL;
	}
	return io_claim_new(key, disc, now, tgid, mode);
}

/* Whether an I/O claimed at its first bio (RF_AT_BIO), found again for `bio`, is a leftover: a
 * bio of another request (instance), or the root bio of a single-bio request found again (a
 * request's bio is queued once: its slot is then an earlier request's at the same address). */
static __always_inline bool at_bio_stale(struct io_slot *s, struct bio *bio, struct bio *root,
					 __u64 inst)
{
	return s->inst != inst || (bio == root && inst == (__u64)root);
}

/* The I/O that owns a bio: through its link when it has one (`release`: the bio is done, free
 * the link; `*linked`: found through it), else derived. */
static __always_inline struct io_slot *io_of_bio_linked(struct bio *bio, bool release, bool *linked)
{
	struct link_slot *l = links_find((__u64)bio, 0);
	struct io_slot *s;
	bool stacked;

	*linked = false;
	if (!l)
		return io_of_bio_derived(bio, &stacked);
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts != l->start)
		s = NULL;
	if (release)
		links_release(l);
	if (s)
		*linked = true;
	return s ? s : io_of_bio_derived(bio, &stacked);
}

static __always_inline struct io_slot *io_of_bio(struct bio *bio, bool release)
{
	bool linked;

	return io_of_bio_linked(bio, release, &linked);
}

/* A link from `bio` to the I/O in slot s. top counts the bios an I/O claimed at its first bio
 * (RF_AT_BIO) has in flight: it closes when the last of them ends. */
static __always_inline void link_bio(struct bio *bio, struct io_slot *s)
{
	struct link_slot *l;
	bool existed;

	l = links_claim((__u64)bio, 0, &existed);
	if (l) {
		l->io_key = s->key;
		l->disc = s->disc;
		l->start = s->r.submit_ts;
		if (s->r.mode & RF_AT_BIO)
			__sync_fetch_and_add(&s->bios, 1);
	} else if (s->r.mode & RF_AT_BIO) {
		/* Its end cannot be seen: it expires in flight (userspace counts it). */
		count(C_INFLIGHT_FULL, 1);
	}
}

/* top: the last bio of an RF_AT_BIO I/O ended at `now`: it closes. The slot is taken before
 * anything is recorded, so of two ends that both saw the count reach 0 (compat) one closes. */
static __always_inline void close_at_bio_end(struct io_slot *s, __u64 now)
{
	struct io_record r = s->r;
	__u64 cgroup = s->cgroup;

	if (!ios_take(s, s->key))
		return;
	r.reap_ts = now;
	io_close(&r, cgroup, false);
}

/* A bio of slot s's I/O ended, found through its link (one link, one count). */
static __always_inline void bio_ended(struct io_slot *s, __u64 now)
{
	/* targ_top is rodata: a trace's verifier drops this whole path (the compat build's
	 * unrolled request walks grew past the verifier's budget with it: -E2BIG). */
	if (!targ_top)
		return;
	if ((s->r.mode & RF_AT_BIO) && count_down(&s->bios))
		close_at_bio_end(s, now);
}

/* A bio enters the block layer. A traced I/O queued by a kworker was held back (blk-throttle
 * releases bios from its dispatch work); one queued from its own process (the submitter, the SQ
 * thread, an io-wq worker) was not. */
/* False when the bio belongs to no I/O followed (the caller says why). `claim`: an aio request
 * not claimed yet may be claimed here (--lean aio, a bio the traced process queued); `btf`: bio
 * is a tp_btf program's BTF pointer (its own fields read with plain loads). */
static __always_inline bool on_bio_queue(struct bio *bio, bool claim, bool btf)
{
	struct bio *root = NULL;
	struct aio_kiocb *aio;
	struct io_slot *s;
	__u64 now, key, inst = 0;
	bool stacked;
	__u32 disc;

	key = io_key_of_bio_inst(bio, &disc, &stacked, &aio, &root, &inst);
	s = key ? ios_find(key, disc) : NULL;
	now = 0;
	if (targ_top && s && (s->r.mode & RF_AT_BIO) && at_bio_stale(s, bio, root, inst)) {
		/* A leftover whose end was never seen (a completion the probes missed): counted,
		 * and its slot is this I/O's. One miss must not fold every later I/O of the same
		 * key (an aio iocb, a thread) into one that never closes. */
		count(C_EXPIRED_DONE, 1);
		ios_release(s);
		s = NULL;
	}
	if (!s && aio && claim) {
		now = bpf_ktime_get_ns();
		s = aio_claim_at_bio(key, disc, aio, now);
	}
	if (!s && key && targ_top) {
		now = bpf_ktime_get_ns();
		s = top_claim_at_bio(bio, key, disc, aio, now);
		if (s)
			s->inst = inst;
	}
	if (!s)
		return false;
	/* Read once per followed bio, never for a bio of no followed I/O. */
	if (!now)
		now = bpf_ktime_get_ns();
	link_bio(bio, s);
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
		s->r.dev = bio_devt(bio, btf);
	if (targ_top)
		s->cgroup = btf ? bio_io_cgroup_btf(bio) : bio_io_cgroup(bio);
	if ((btf ? bio->bi_opf : BPF_CORE_READ(bio, bi_opf)) & 1)
		s->r.mode |= RF_WRITE;
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != s->r.tgid &&
	    (CURRENT_FLAGS() & PF_WQ_WORKER))
		s->r.mode |= RF_THROTTLED;
	return true;
}

/* The lean trace's issue stamp for a request's completion (phases.bpf.c issue_stamp_of). */
struct stamp_arg {
	struct stamps_check *chk; /* a check window is open: compare (else NULL) */
	__u64 stamp;		  /* the request's io_start_time_ns (0: none) */
	bool use;		  /* its queue's stamp is trusted */
};

/* An I/O's first request completed: compare its stamp with the hooked issue time (a check window;
 * a single-request I/O only, whose hooked time is this request's), or take the stamp where the
 * queue's is trusted and no hook timed the issue. Not inlined: the walk's callback is at the
 * verifier's budget in the compat build. */
static __noinline int issue_from_stamp(struct io_slot *s, struct stamp_arg *st, __u64 now)
{
	if (!s || !st)
		return 0;
	if (st->chk && s->r.issue_ts && s->nrq == 1 && s->r.issue_ts <= now) {
		check_one(&st->chk->issue, st->stamp, s->r.issue_ts, now - s->r.issue_ts);
		return 0;
	}
	if (s->r.issue_ts)
		return 0;
	if (st->use && st->stamp) {
		s->r.issue_ts = st->stamp;
		s->nrq++;
	} else {
		/* No hook and no trusted stamp (a queue the check has not seen): the device
		 * phase is unknown; userspace attaches the hook again when this grows. */
		count(C_ISSUE_UNSTAMPED, 1);
	}
	return 0;
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
static __always_inline bool complete_one(struct bio *bio, __u64 now, __u32 bytes,
					 struct stamp_arg *st)
{
	bool linked;
	struct io_slot *s = io_of_bio_linked(bio, true, &linked);

	if (!s)
		return false;
	if (targ_issue_stamps && st && (st->chk || st->use || issue_detached))
		issue_from_stamp(s, st, now);
	s->r.bytes += bytes;
	if (now > s->r.complete_ts)
		s->r.complete_ts = now;
	if (s->nvme_done_ts && s->nvme_done_ts <= now)
		record(PH_NVME_END, now - s->nvme_done_ts);
	/* A request's bios end with it (block_bio_complete does not fire for them: the request's
	 * completion traced them). */
	if (linked)
		bio_ended(s, now);
	return true;
}

static __always_inline bool one_bio(struct bio *bio, __u64 now, bool complete, __u32 bytes,
				    struct stamp_arg *st)
{
	return complete ? complete_one(bio, now, bytes, st) : issue_one(bio, now);
}

struct walk_ctx {
	struct bio *bio;
	struct stamp_arg *st;
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
	c->tracked |= one_bio(bio, c->now, c->complete, 0, c->st);
	return 0;
}

/* Every bio of a request: the first inline (almost every request has one), the rest in a loop.
 * Returns whether any belonged to a traced I/O. */
static __always_inline bool walk_rq_st(struct bio *first, struct bio *next, __u64 now,
				       bool complete, __u32 bytes, struct stamp_arg *st)
{
	/* The compat build unrolls the walk of a request's further bios: the stamp's code in each
	 * of its 32 copies made rq_complete -E2BIG (inline too), so there only the first bio takes
	 * the stamp; a merged bio's I/O then has no issue time while the hook is detached
	 * (counted as not linked). */
	struct walk_ctx c = {
	    .bio = next, .st = IOPATH_COMPAT_BUILD ? NULL : st, .now = now, .complete = complete};

	c.tracked = one_bio(first, now, complete, bytes, st);
	if (next)
		LOOP(MAX_BIOS_PER_RQ, MAX_BIOS_PER_RQ, walk_bio, &c);
	return c.tracked;
}

static __always_inline bool walk_rq(struct bio *first, struct bio *next, __u64 now, bool complete,
				    __u32 bytes)
{
	return walk_rq_st(first, next, now, complete, bytes, NULL);
}

/*
 * A bio ended (block_bio_complete). It fires for a bio no request carried: a stacked device's top
 * bio (dm, md), a bio-based device's (zram); a request's bios were traced by its completion
 * (blk_update_request clears their flag). A trace attaches it only where stacked devices exist:
 * the top bio's link is still held, its end is the end of the stacked layer's completion work.
 * top and serve attach it everywhere: an I/O claimed at its first bio closes at its last.
 */
static __always_inline void on_bio_complete(struct bio *bio)
{
	struct link_slot *l = links_find((__u64)bio, 0);
	struct io_slot *s;

	if (!l)
		return;
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts != l->start)
		s = NULL;
	links_release(l);
	if (!s)
		return;
	if (!targ_top) {
		if ((s->r.mode & RF_STACKED) && !s->top_end_ts)
			s->top_end_ts = bpf_ktime_get_ns();
		return;
	}
	bio_ended(s, bpf_ktime_get_ns());
}

/* top: a bio was split to fit its device (block_split, in the submitter, after bio_chain): the
 * front part is a bio of its own, in a request of its own, that ends before its parent does. It
 * is linked to its parent's I/O and counted in flight like a queued bio. */
static __always_inline void on_split_top(struct bio *split)
{
	struct bio *parent = BPF_CORE_READ(split, bi_private);
	struct link_slot *l = links_find((__u64)parent, 0);
	struct io_slot *s;

	if (!l)
		return;
	s = ios_find(l->io_key, l->disc);
	if (s && s->r.submit_ts == l->start)
		link_bio(split, s);
}

#endif /* IOPATH_BLOCK_CORE_BPF_H */
