/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Per-I/O state, whatever route carries the I/O: a route claims an io_slot when the application
 * hands the I/O to the kernel, the block core stamps it from any context (the submitter, an SQ
 * thread, an io-wq worker, the kworker blk-throttle releases bios from), and the route closes it
 * when the application gets the result. Closing is the one place phases are recorded, so every
 * I/O lands in every histogram once, however many bios and requests it became.
 */
#ifndef IOPATH_IO_STATE_BPF_H
#define IOPATH_IO_STATE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "run.bpf.h"
#include "counters.bpf.h"
#include "hist.bpf.h"
#include "slots.bpf.h"
#include "top.bpf.h"

#define IO_MATCH(s, k, d) ((s)->key == (k) && (s)->disc == (d))
/* (key, disc) -> the I/O's state, from claim to close. */
SLOT_TABLE(ios, io_slot, IO_MATCH)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_PHASES);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

/* Closed I/Os per route kind and direction (enum route_kind * 2 + write). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_ROUTE_KEYS);
	__type(key, __u32);
	__type(value, __u64);
} routes SEC(".maps");

/* --events: sized by userspace (a page when off). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* The traced I/O's active span: first submission, last reap (a traced command's IOPS are over
 * this, not over its start-up and exit), per CPU; userspace takes the earliest and the latest.
 * Not globals: written at every close, they shared `enabled`'s cache line in .bss, which every
 * hook reads first, and made that read a miss on the other CPU (rq_complete: 27% of its samples
 * on `if (!enabled)`, perf on the 2-vCPU host's lean uring trace). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct io_span);
} spans SEC(".maps");

/* n I/Os each took v ns in phase p. */
static __always_inline void record_n(enum phase p, __u64 v, __u64 n)
{
	__u32 k = p;
	struct hist *h;

	/* top / serve read their own table (top.bpf.h), never these. */
	if (targ_top)
		return;

	h = bpf_map_lookup_elem(&hists, &k);

	if (h)
		hist_add_n(h, v, n);
}

static __always_inline void record(enum phase p, __u64 v)
{
	record_n(p, v, 1);
}

static __always_inline void count_route(enum route_kind k, bool write)
{
	__u32 key = k * 2 + write;
	__u64 *v = bpf_map_lookup_elem(&routes, &key);

	if (v)
		*v += 1;
}

/* Fills a slot just claimed for a new I/O. */
static __always_inline struct io_slot *io_init(struct io_slot *s, __u64 key, __u32 disc,
					       __u64 start, __u32 tgid, __u32 mode)
{
	s->disc = disc;
	s->nrq = 0;
	s->pickup_ts = 0;
	s->punt_ts = 0;
	s->nvme_ts = 0;
	s->nvme_done_ts = 0;
	s->lower_queue_ts = 0;
	s->top_end_ts = 0;
	s->fs_endio_ts = 0;
	s->fs_endio_end_ts = 0;
	s->cgroup = 0;
	s->bios = 0;
	s->inst = 0;
	s->r.tag = key;
	s->r.submit_ts = start;
	s->r.queue_ts = 0;
	s->r.issue_ts = 0;
	s->r.complete_ts = 0;
	s->r.posted_ts = 0;
	s->r.reap_ts = 0;
	s->r.tgid = tgid;
	s->r.mode = mode;
	s->r.dev = 0;
	s->r.bytes = 0;
	s->r.tid = (__u32)bpf_get_current_pid_tgid();
	s->r.pad = 0;
	return s;
}

/* A route's claim: the I/O starts at `start`. A slot still holding the key is a leftover of an
 * earlier I/O whose end was never seen: counted and reused. */
static __always_inline struct io_slot *io_claim(__u64 key, __u32 disc, __u64 start, __u32 tgid,
						__u32 mode)
{
	struct io_slot *s;
	bool existed;

	s = ios_claim(key, disc, &existed);
	if (!s) {
		count(C_INFLIGHT_FULL, 1);
		return NULL;
	}
	if (existed)
		count(C_EXPIRED_DONE, 1);
	return io_init(s, key, disc, start, tgid, mode);
}

/* io_claim for a key the caller just looked up and did not find: no second lookup (four probes
 * of the table on every claim at a bio). */
static __always_inline struct io_slot *io_claim_new(__u64 key, __u32 disc, __u64 start, __u32 tgid,
						    __u32 mode)
{
	struct io_slot *s = ios_claim_free(key, disc);

	if (!s) {
		count(C_INFLIGHT_FULL, 1);
		return NULL;
	}
	return io_init(s, key, disc, start, tgid, mode);
}

/* The I/O's route sub-phases, known only while its slot is held: folded into the record's
 * flags (and histograms) before the slot is released. */
static __always_inline void io_route_subphases(struct io_slot *s)
{
	struct io_record *r = &s->r;

	/* Only for an I/O io_close will keep (linked and ordered): a sub-phase is part of its
	 * submission phase, so the two must count the same I/Os. An unlinked io-wq read on a
	 * cold ext4 file (<= 1%) waited long in the worker: counted in PH_IOWQ alone, it once
	 * made the io-wq mean exceed the submission mean (CI, stop 28). */
	if (!r->queue_ts || !r->issue_ts || !r->complete_ts || r->queue_ts < r->submit_ts ||
	    r->issue_ts < r->queue_ts || r->complete_ts < r->issue_ts)
		return;
	if ((r->mode & RF_SQPOLL) && s->pickup_ts >= r->submit_ts)
		record(PH_PICKUP, s->pickup_ts - r->submit_ts);
	if (s->punt_ts && r->queue_ts >= s->punt_ts) {
		r->mode |= RF_IOWQ;
		record(PH_IOWQ, r->queue_ts - s->punt_ts);
	}
	if ((r->mode & RF_THROTTLED) && r->queue_ts >= r->submit_ts)
		record(PH_THROTTLED, r->queue_ts - r->submit_ts);
	if (s->nrq > 1)
		r->mode |= RF_SPLIT;
	if ((r->mode & RF_STACKED) && s->lower_queue_ts >= r->queue_ts)
		record(PH_STACK_DOWN, s->lower_queue_ts - r->queue_ts);
	if ((r->mode & RF_STACKED) && s->top_end_ts && r->complete_ts &&
	    s->top_end_ts >= r->complete_ts)
		record(PH_STACK_UP, s->top_end_ts - r->complete_ts);
	/* targ_fs_endio is rodata: without the hooks the verifier drops this. The worker hands the
	 * I/O back before it returns, so a reap can close it first (1.8% of reads on 6.1 under
	 * emulation): its run ends at its return or at the I/O's posting (else now, the close),
	 * whichever came first. */
	if (targ_fs_endio && s->fs_endio_ts && s->fs_endio_ts >= r->complete_ts) {
		__u64 done = r->posted_ts ? r->posted_ts : bpf_ktime_get_ns();
		__u64 wend =
		    s->fs_endio_end_ts && s->fs_endio_end_ts < done ? s->fs_endio_end_ts : done;

		if (wend >= s->fs_endio_ts) {
			record(PH_FS_ENDIO_WAIT, s->fs_endio_ts - r->complete_ts);
			record(PH_FS_ENDIO, wend - s->fs_endio_ts);
		}
	}
}

/* io_uring on a buffered file: no bio of its own. The kernel's part (submitted -> posted) and
 * the reap (posted -> reaped) are its phases; with the application's and the tracer's rows they
 * add up to the request's latency. */
static __always_inline bool io_close_cached(struct io_record *r, bool alone)
{
	__u64 end = r->reap_ts;

	if (!r->posted_ts || r->posted_ts < r->submit_ts || end < r->posted_ts) {
		count(C_DISORDERED, 1);
		return false;
	}
	record(PH_UPC_KERNEL, r->posted_ts - r->submit_ts);
	if (r->mode & RF_INLINE)
		count(C_UPC_INLINE, 1);
	else
		record(PH_UPC_ASYNC, r->posted_ts - r->submit_ts);
	if (r->mode & RF_NO_REAP)
		count(C_NO_REAP, 1);
	else
		record(PH_UPC_REAP, end - r->posted_ts);
	record(PH_UPC, end - r->submit_ts);
	count_route(RK_URING_CACHED, r->mode & RF_WRITE);
	if (alone)
		record(PH_TRACER_REAP, bpf_ktime_get_ns() - end);
	return true;
}

/* The route a closed I/O is counted under (routes map, top's rows). */
static __always_inline __u16 route_of(struct io_record *r)
{
	__u32 m = r->mode & MODE_MASK;

	if (m == MODE_BIO)
		return r->tgid ? TOP_ROUTE_BIO : TOP_ROUTE_KTHREAD;
	if (m == MODE_AIO)
		return RK_AIO;
	if (m == MODE_SYNC)
		return RK_SYNC;
	if (r->mode & RF_SQPOLL)
		return RK_SQPOLL;
	if (r->mode & RF_IOWQ)
		return RK_IOWQ;
	return RK_URING;
}

/* The end of an I/O's trip: reaped at r->reap_ts (or, RF_NO_REAP, when posted). True when it
 * landed in the histograms. `alone`: the one I/O its syscall returns (sync), so iopath's own
 * work closing it is timed here; a batch's caller times the whole batch (record_reap_batch).
 * `cgroup`: its first bio's io cgroup, for top's rows. */
static __always_inline bool io_close(struct io_record *r, __u64 cgroup, bool alone)
{
	__u64 end = r->reap_ts;
	bool write = r->mode & RF_WRITE;
	struct io_span *span;
	__u32 zero = 0;
	__u16 route;

	if (!r->queue_ts && (r->mode & RF_CACHED))
		return io_close_cached(r, alone);
	if (!r->queue_ts) {
		/* Not block I/O of its own: a page-cache hit, a pipe, a socket, a NOP. */
		count(C_NO_BLOCK_IO, 1);
		return false;
	}
	if (!r->issue_ts || !r->complete_ts) {
		/* Its bios reached no request iopath could link back to it: a stacked device's
		 * clones (dm, md) on the lower device; top's own bio of a bio-based device (zram),
		 * which has no request at all, is not an application's I/O lost. */
		if ((r->mode & MODE_MASK) != MODE_BIO)
			count(C_UNLINKED, 1);
		return false;
	}
	if (r->queue_ts < r->submit_ts || r->issue_ts < r->queue_ts ||
	    r->complete_ts < r->issue_ts || end < r->complete_ts ||
	    (r->posted_ts && (r->posted_ts < r->complete_ts || end < r->posted_ts))) {
		count(C_DISORDERED, 1);
		return false;
	}
	route = route_of(r);
	if (targ_top) {
		/* top / serve read their own table alone: the trace's histograms and counters
		 * would cost ~100 ns an I/O for nobody (six histogram updates). An I/O claimed at
		 * its first bio (RF_AT_BIO) has its block and device phases only. */
		top_add(r, cgroup, end, route, write);
		return true;
	}
	record(PH_SUBMISSION, r->queue_ts - r->submit_ts);
	record(PH_BLOCK, r->issue_ts - r->queue_ts);
	record(PH_DEVICE, r->complete_ts - r->issue_ts);
	if (r->posted_ts)
		record(PH_POSTED, r->posted_ts - r->complete_ts);
	if (r->mode & RF_NO_REAP)
		count(C_NO_REAP, 1);
	else
		record(PH_REAP, end - (r->posted_ts ? r->posted_ts : r->complete_ts));
	record(PH_COMPLETION, end - r->complete_ts);
	record(PH_TOTAL, end - r->submit_ts);
	count(write ? C_WRITES : C_READS, 1);
	count_route(route, write);
	if (targ_top)
		top_add(r, cgroup, end, route, write);
	if (r->mode & RF_THROTTLED)
		count_route(RK_THROTTLED, write);
	if (r->mode & RF_SPLIT)
		count_route(RK_SPLIT, write);
	if (r->mode & RF_HIPRI)
		count_route(RK_HIPRI, write);
	if (r->mode & RF_STACKED)
		count_route(RK_STACKED, write);
	if (r->mode & RF_BIO_BASED)
		count_route(RK_BIO_BASED, write);
	/* The span starts at the first I/O that reached a device, not at the first read of any
	 * file (a traced command's loader reads its libraries through the page cache). */
	span = bpf_map_lookup_elem(&spans, &zero);
	if (span) {
		if (!span->first || r->submit_ts < span->first)
			span->first = r->submit_ts;
		if (end > span->last)
			span->last = end;
	}
	/* No wakeup per record: userspace drains every 20 ms (a wakeup per I/O costs ~25%). */
	if (targ_events && bpf_ringbuf_output(&events, r, sizeof(*r), BPF_RB_NO_WAKEUP))
		count(C_RB_DROPS, 1);
	if (alone)
		record(PH_TRACER_REAP, bpf_ktime_get_ns() - end);
	return true;
}

/* Closes the I/O held in slot s, reaped at `now`, and frees the slot. */
static __always_inline bool io_close_slot(struct io_slot *s, __u64 now, bool alone)
{
	bool closed;

	io_route_subphases(s);
	s->r.reap_ts = now;
	closed = io_close(&s->r, s->cgroup, alone);
	ios_release(s);
	return closed;
}

/* A reaping syscall's exit closed `closed` I/Os from `start` on: each waited for all of it. */
static __always_inline void record_reap_batch(__u64 start, __u32 closed)
{
	if (closed)
		record_n(PH_TRACER_REAP, bpf_ktime_get_ns() - start, closed);
}

#endif /* IOPATH_IO_STATE_BPF_H */
