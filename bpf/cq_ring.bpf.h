/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When an application took each io_uring completion from its CQ ring.
 *
 * Applications (fio, liburing's io_uring_peek_cqe / io_uring_for_each_cqe) read completions
 * straight from the CQ ring in their memory and enter the kernel only when it is empty: the
 * io_uring_enter that happens to return after a CQE was posted is not when the application took
 * it (fio at QD32 on the root disk took its CQEs 23% of the latency later: the CQEs posted while
 * it submitted one SQE per enter waited until its queue was full). The ring's head is kernel
 * memory too (io_ring_ctx->rings->cq.head, the word the application advances), so every "look"
 * at it bounds when each CQE was taken: after the last look that still saw it in the ring, no
 * later than the first look that found it consumed. The looks are the traced threads'
 * io_uring_enter entry and exit, their switches out and in, the ring's next posting (any
 * thread: an SQ thread's, an io-wq worker's).
 *
 * A posted CQE waits in the per-I/O slot table under (ring, its FIFO number); per ring only two
 * FIFO numbers and the last look's time are kept. The I/O closes at the lower bound (for a
 * program that calls io_uring_enter and then reads the ring, as fio and liburing's wait calls
 * do, that is within a few hundred ns of its own clock read), and PH_RING records the bound's
 * width: the uncertainty, shown as its own row.
 */
#ifndef IOPATH_CQ_RING_BPF_H
#define IOPATH_CQ_RING_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "compat.bpf.h"
#include "io_state.bpf.h"

/* io_uring_enter's flags (uapi): fd is an index into the thread's registered rings. */
#define IORING_ENTER_REGISTERED_RING (1U << 4)

/* CQEs of one ring posted and not yet seen taken: as deep as the generator's --qd 4096. */
#define RING_MAX 4096

/* SQE ranges an SQPOLL ring remembers (a power of two). */
#define SQ_RANGES 32

/* A parked CQE's slot: (disc) no I/O's key and disc pair looks like it. */
#define POSTED_DISC 0xffffffffU

struct ring_state {
	__u64 look_ts;	 /* the last look at this ring's CQ head */
	__u32 first;	 /* FIFO number of the oldest posted CQE not yet seen taken */
	__u32 tail;	 /* FIFO number of the next CQE posted */
	__u32 head_seen; /* the CQ head at the last look */
	/*
	 * SQPOLL rings: the SQ ring's tail at each look, kept as the last SQ_RANGES ranges of SQEs
	 * that appeared between two looks. An SQE written to the ring waits there until the SQ
	 * thread picks it up (the generator's own stamps: 51 us a pickup at QD32 here, 11% of its
	 * latency) and a program that never enters the kernel shows nothing else of it. At QD64 an
	 * SQE waited through 30% more looks than two ranges hold.
	 */
	__u32 sqpoll;
	__u32 sq_tail;		 /* rings->sq.tail at the last look */
	__u32 sq_n;		 /* ranges recorded so far; the newest is (sq_n - 1) % SQ_RANGES */
	__u32 sq_idx[SQ_RANGES]; /* a range's first SQE; it ends where the next newer one starts */
	__u64 sq_lo[SQ_RANGES];	 /* its SQEs appeared after this look ... */
	__u64 sq_hi[SQ_RANGES];	 /* ... and by this one */
};

/* Keyed by the io_ring_ctx. LRU: a ring whose process is gone is forgotten, never full. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct ring_state);
} cq_rings SEC(".maps");

/*
 * Where io_uring_complete fires relative to the reservation of the CQE's entry (io_get_cqe
 * advances ctx->cached_cq_tail): before it in older kernels (5.10, 6.1: the CQE's index is then
 * cached_cq_tail), after it since (cached_cq_tail - 1). Told apart at run time, not by version:
 * only the older order can see cached_cq_tail equal to the application's head (an empty ring) at
 * the tracepoint, and every application empties its ring sometimes (fio does at every reap).
 * Until that is seen the newer order is assumed.
 */
volatile __u32 cq_reserve_after_tp = 0;

static __always_inline __u64 ring_key(__u64 ring, __u32 pos)
{
	/* io_ring_ctx is kmalloc'd (> 2 KiB): its address shifted left by 12 keeps every ring's
	 * 4096 FIFO numbers apart (kernel addresses share their top 12 bits). */
	return (ring << 12) | (pos & (RING_MAX - 1));
}

/* A new ring's state: 700 bytes, more than a BPF stack holds beside the callers' frames. */
struct ring_state ring_zero = {};

static __always_inline struct ring_state *ring_state(__u64 ring, bool create)
{
	struct ring_state *rs = bpf_map_lookup_elem(&cq_rings, &ring);

	if (rs || !create)
		return rs;
	bpf_map_update_elem(&cq_rings, &ring, &ring_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&cq_rings, &ring);
}

struct ring_look {
	__u64 ring;
	__u64 now;
	__u64 look_ts;
	__u32 first;
	__u32 head;
	__u32 stopped; /* the loop stopped at a CQE still in the ring (a flag: the verifier
			* follows a stack counter's every value through the callback) */
};

/* One look's bound: its count is the number of CQEs bounded (no counter of its own). A CQE
 * another CPU posted after this look read its clock has now < lo (a database's reaper thread
 * beside its submitters once showed a 5124096 h max): counted, never recorded wrapped. A global
 * function, verified once on its own: the same branch inlined doubled the verifier's paths in
 * every caller (sched_switch past 1M instructions on 6.18, uring_complete on 7.3). The other
 * spans are closed by io_close, which checks their order (C_DISORDERED). */
__noinline int ring_bound_g(__u64 now, __u64 lo)
{
	if (lo > now)
		count(C_DISORDERED_SPANS, 1);
	else
		record(PH_RING, now - lo);
	return 0;
}

/* The CQE at FIFO number pos: taken (closed, freed: 0), still there (1: stop, the ring is FIFO),
 * or already closed by a concurrent look (skipped: 0). */
static __always_inline int ring_take_at(__u64 ring, __u32 pos, __u32 head, __u64 now, __u64 look_ts)
{
	__u64 key = ring_key(ring, pos);
	struct io_slot *p = ios_find(key, POSTED_DISC);
	struct io_record r;
	__u64 lo, cgroup;
	__u32 idx;

	if (!p)
		return 0;
	idx = p->cq_tail - (cq_reserve_after_tp ? 0 : 1);
	if ((__s32)(head - idx) <= 0)
		return 1;
	r = p->r;
	cgroup = p->cgroup;
	if (!ios_take(p, key))
		return 0;
	lo = look_ts > r.posted_ts ? look_ts : r.posted_ts;
	r.reap_ts = lo;
	io_close(&r, cgroup, false);
	ring_bound_g(now, lo);
	return 0;
}

static long ring_take_one(__u64 i, struct ring_look *c)
{
	if (!ring_take_at(c->ring, c->first + (__u32)i, c->head, c->now, c->look_ts))
		return 0;
	c->stopped = 1;
	return 1;
}

/* ring_take_at as the compat build's loop calls it (compat.bpf.h EACH). */
STEP_FN int ring_take_g(__u64 ring, __u64 pos_head, __u64 now, __u64 look_ts)
{
	return ring_take_at(ring, (__u32)pos_head, pos_head >> 32, now, look_ts);
}

/* CQEs closed per look at most in the compat build (the modern one: RING_MAX); the rest wait for
 * the next look. */
#define RING_BATCH_MAX 256

/* A look at the ring's CQ head at `now`: closes every CQE it finds taken. Not at a thread's
 * last switch (PF_EXITING): its files, the ring's with them, may be gone by then. CQEs no look
 * saw taken stay counted in cq_rings (tail - first) and the report says how many. */
/* The SQ ring's tail moved since the last look: those SQEs appeared between the two looks. */
static __always_inline void sq_look(struct ring_state *rs, struct io_rings *rings, __u64 now)
{
	__u32 tail = BPF_CORE_READ(rings, sq.tail);

	__u32 i = rs->sq_n & (SQ_RANGES - 1);

	if (tail == rs->sq_tail)
		return;
	if (rs->look_ts) {
		rs->sq_idx[i] = rs->sq_tail;
		rs->sq_lo[i] = rs->look_ts;
		rs->sq_hi[i] = now;
		rs->sq_n++;
	}
	rs->sq_tail = tail;
}

/* A look at a ring whose state the caller holds. */
static __always_inline void ring_look_rs(struct ring_state *rs, __u64 ring, __u64 now)
{
	struct io_rings *rings = BPF_CORE_READ((struct io_ring_ctx *)ring, rings);
	struct ring_look c;
	__u32 n, head = BPF_CORE_READ(rings, cq.head);

	if (rs->sqpoll)
		sq_look(rs, rings, now);
	/* Looks run concurrently (the SQ thread's, the application's): first never passes tail. */
	n = (__s32)(rs->tail - rs->first) > 0 ? rs->tail - rs->first : 0;
	/* A head that has not moved since the last look took nothing: most looks stop here (one
	 * per switch, two per io_uring_enter), without touching a record. */
	if (n && head != rs->head_seen) {
		long done;
		__u32 first;

		if (n > RING_MAX)
			n = RING_MAX;
		c.ring = ring;
		c.now = now;
		c.look_ts = rs->look_ts;
		c.first = rs->first;
		c.head = head;
		c.stopped = 0;
		done =
		    EACH(RING_BATCH_MAX, n, ring_take_one, &c, i,
			 ring_take_g(ring, (c.first + i) | ((__u64)head << 32), now, c.look_ts) &&
			     (c.stopped = 1));
		/* bpf_loop counts the iteration that stopped. */
		first = c.first + (__u32)done - (c.stopped ? 1 : 0);
		if ((__s32)(first - rs->first) > 0 && (__s32)(rs->tail - first) >= 0)
			rs->first = first;
	}
	rs->head_seen = head;
	rs->look_ts = now;
}

static __always_inline void ring_look(__u64 ring, __u64 now)
{
	struct ring_state *rs;

	if (!ring)
		return;
	rs = ring_state(ring, false);
	if (rs)
		ring_look_rs(rs, ring, now);
}

/*
 * The SQ thread picks up an SQE of `ring` at `now` (itself a look): when the application wrote
 * it, bounded by the looks around the SQ tail's move: the start of the I/O, at the last look
 * that had not seen it yet (0: not bounded, the I/O starts at the pickup). Records the pickup
 * and the bound's width.
 */
static __always_inline __u64 sq_written(__u64 ring, __u64 now)
{
	struct ring_state *rs = ring_state(ring, true);
	__u32 j, k;
	__u64 lo, hi;

	if (!rs)
		return 0;
	if (!rs->sqpoll) {
		rs->sqpoll = 1;
		rs->sq_tail = BPF_CORE_READ((struct io_ring_ctx *)ring, rings, sq.tail);
	}
	ring_look_rs(rs, ring, now);
	/* io_get_sqe advanced cached_sq_head before the request was set up and traced. */
	k = BPF_CORE_READ((struct io_ring_ctx *)ring, cached_sq_head) - 1;
	if ((__s32)(rs->sq_tail - k) <= 0)
		return 0;
	/* Newest first: the first range that starts at or before k holds it. */
	lo = hi = 0;
	for (j = 0; j < SQ_RANGES && j < rs->sq_n; j++) {
		__u32 i = (rs->sq_n - 1 - j) & (SQ_RANGES - 1);

		if ((__s32)(k - rs->sq_idx[i]) >= 0) {
			lo = rs->sq_lo[i];
			hi = rs->sq_hi[i];
			break;
		}
	}
	if (!lo || lo > now || hi < lo)
		return 0;
	record(PH_SQ_RING, hi - lo);
	return lo;
}

/* A CQE of a followed I/O was posted to `ring`: the record waits there for a look. False when it
 * could not be parked (the ring has RING_MAX waiting, or the slot table is full). */
static __always_inline bool ring_park(__u64 ring, struct io_slot *s, __u64 now)
{
	struct ring_state *rs = ring_state(ring, true);
	struct io_slot *p;
	bool existed;
	__u32 cached;

	if (!rs)
		return false;
	/* A posting is a look too: what the application took before it is closed now. */
	ring_look_rs(rs, ring, now);
	if (rs->tail - rs->first >= RING_MAX)
		return false;
	cached = BPF_CORE_READ((struct io_ring_ctx *)ring, cached_cq_tail);
	if (!cq_reserve_after_tp && cached == rs->head_seen)
		cq_reserve_after_tp = 1;
	p = ios_claim(ring_key(ring, rs->tail), POSTED_DISC, &existed);
	if (!p)
		return false;
	if (existed)
		count(C_EXPIRED_DONE, 1);
	p->disc = POSTED_DISC;
	p->r = s->r;
	p->cgroup = s->cgroup;
	p->cq_tail = cached;
	rs->tail++;
	return true;
}

/* The ring behind an io_uring fd (io_uring_enter's first argument): its file's private data.
 * 0 for a registered ring's index (IORING_ENTER_REGISTERED_RING): the thread's last ring is
 * used then. */
static __always_inline __u64 ring_of_file(struct file *f)
{
	return f ? (__u64)BPF_CORE_READ(f, private_data) : 0;
}

#endif /* IOPATH_CQ_RING_BPF_H */
