/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The block core: what happened to an I/O's bios and requests. It never asks which route the I/O
 * came by: every bio leads back to the I/O that owns it (io_key_of_bio), in whatever context the
 * tracepoint fires, so a bio queued by an io-wq worker or by the kworker blk-throttle releases it
 * from, or split into several requests, stamps the same per-I/O state.
 *
 * Which I/O a bio belongs to is bio_owner.bpf.h's question; the hooks that call in are
 * block.bpf.h's.
 */
#ifndef IOPATH_BLOCK_CORE_BPF_H
#define IOPATH_BLOCK_CORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "compat.bpf.h"
#include "core_fixes.bpf.h"
#include "run.bpf.h"
#include "generator.bpf.h"
#include "io_state.bpf.h"
#include "stamp_check.bpf.h"
#include "bio_owner.bpf.h"

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
	/* A trace: a bio of no I/O's end_io, queued by the thread carrying one out (its own direct
	 * I/O's bios sent another way). Never an io_uring request on a buffered file's readahead:
	 * those stay the page cache's (RF_CACHED). */
	if (!key && !targ_top) {
		key = io_key_of_thread();
		s = key ? ios_find(key, 0) : NULL;
		if (s && (s->r.mode & RF_CACHED))
			s = NULL;
	}
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

/* The lean trace's issue stamp for a request's completion (block.bpf.h issue_stamp_of). */
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
 * A trace: a linked bio ended with no request (a request's bios are released at its completion).
 * With no request ever issued for the I/O, its bios went to a bio-based device (zram, brd, pmem:
 * the driver does the work in submit_bio, no request, no block_rq_* event): the device phase runs
 * from the bio's queueing (a clone's on a stacked device) to this end. Otherwise, or once that is
 * set, a stacked device's top bio ended: its completion work ends here.
 */
static __always_inline void bio_based_end(struct io_slot *s, struct bio *bio, __u64 now)
{
	if (!s->r.issue_ts || (s->r.mode & RF_BIO_BASED))
		/* zram, brd and pmem walk a copy of the bio's iterator: its size is still whole. */
		s->r.bytes += BPF_CORE_READ(bio, bi_iter.bi_size);
	if (!s->r.issue_ts) {
		s->r.issue_ts = ((s->r.mode & RF_STACKED) && s->lower_queue_ts) ? s->lower_queue_ts
										: s->r.queue_ts;
		s->r.complete_ts = now;
		s->r.mode |= RF_BIO_BASED;
		s->nrq++;
		return;
	}
	if (s->r.mode & RF_STACKED) {
		if (!s->top_end_ts)
			s->top_end_ts = now;
		return;
	}
	/* A further bio of a bio-based device's I/O (a split): the device phase ends at the last.
	 */
	if ((s->r.mode & RF_BIO_BASED) && now > s->r.complete_ts)
		s->r.complete_ts = now;
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
		bio_based_end(s, bio, bpf_ktime_get_ns());
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
