/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The in-kernel log-linear histogram, one definition for every probe. Values below HIST_SUB are
 * exact; above, each power of two is split into HIST_SUB equal buckets, so a bucket's midpoint is
 * within 1/(2*HIST_SUB) = 1.6% of any value in it. src/hist.rs decodes the same layout.
 */
#ifndef IOPATH_HIST_BPF_H
#define IOPATH_HIST_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"

static __always_inline __u64 log2_u64(__u64 v)
{
	__u64 r = 0, s;

	s = (v > 0xFFFFFFFFULL) << 5;
	v >>= s;
	r |= s;
	s = (v > 0xFFFF) << 4;
	v >>= s;
	r |= s;
	s = (v > 0xFF) << 3;
	v >>= s;
	r |= s;
	s = (v > 0xF) << 2;
	v >>= s;
	r |= s;
	s = (v > 0x3) << 1;
	v >>= s;
	r |= s;
	r |= (v >> 1);
	return r;
}

static __always_inline __u64 hist_slot(__u64 v)
{
	__u64 msb, sub;

	if (v < HIST_SUB)
		return v;
	msb = log2_u64(v);
	if (msb > HIST_MAX_MSB)
		return HIST_SLOTS - 1;
	sub = (v >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1);
	return ((msb - HIST_SUB_BITS + 1) << HIST_SUB_BITS) + sub;
}

/*
 * Plain adds on a per-CPU histogram: a BPF program is not preempted on its CPU, and each phase is
 * written from one kind of context only (block-side phases where requests complete, reap-side
 * phases in the application's task), so a nested program never updates the same histogram. The
 * count is the sum of the slots, computed in userspace.
 */
static __always_inline void hist_add_n(struct hist *h, __u64 v, __u64 n)
{
	__u64 slot = hist_slot(v);

	/* Keep the bound check and the access on one register, or the verifier loses the bound. */
	barrier_var(slot);
	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	barrier_var(slot);
	h->slots[slot] += n;
	h->sum += v * n;
	if (v > h->max)
		h->max = v;
}

static __always_inline void hist_add(struct hist *h, __u64 v)
{
	hist_add_n(h, v, 1);
}

/* top's and the one-hook tier's coarser histogram (TOP_*: phases.h). */
static __always_inline __u32 top_slot(__u64 v)
{
	__u64 msb, sub;

	if (v < (1ULL << TOP_MIN_MSB))
		return 0;
	msb = log2_u64(v);
	if (msb > TOP_MAX_MSB)
		return TOP_SLOTS - 1;
	sub = (v >> (msb - TOP_SUB_BITS)) & (TOP_SUB - 1);
	return 1 + ((msb - TOP_MIN_MSB) << TOP_SUB_BITS) + sub;
}

#endif /* IOPATH_HIST_BPF_H */
