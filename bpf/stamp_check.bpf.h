/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A request's own stamp checked against the hooked time it replaces, on the same request in the
 * same program run: the one-hook tier's checks (stamps.bpf.c) and the lean trace's issue stamp
 * (block.bpf.h) both count their comparisons here, and userspace's verdict (src/probe/stamps.rs
 * `decide`) reads them.
 */
#ifndef IOPATH_STAMP_CHECK_BPF_H
#define IOPATH_STAMP_CHECK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"
#include "hist.bpf.h"

/* One stamp against its hooked time on the same request; `phase` is the hooked phase it bounds,
 * for the 2% allowance. Not inlined: the check's branches stay out of the hot path's code. */
static __noinline int check_one(struct stamps_check_one *c, __u64 stamp, __u64 hook, __u64 phase)
{
	__u64 err, allowed;
	__u32 slot;

	if (!c || !hook)
		return 0;
	c->n++;
	if (!stamp) {
		c->absent++;
		return 0;
	}
	err = stamp > hook ? stamp - hook : hook - stamp;
	allowed = phase / 50;
	if (allowed < 1000)
		allowed = 1000;
	if (err <= allowed)
		c->within++;
	c->skew_sum += (__s64)(stamp - hook);
	slot = err ? log2_u64(err) + 1 : 0;
	if (slot >= STAMPS_ERR_SLOTS)
		slot = STAMPS_ERR_SLOTS - 1;
	c->err[slot]++;
	return 0;
}

/* Queue qid's mode in `queues` (an array of struct stamps_queue by queue id), for disk `dev`:
 * a queue id another disk had (ids are reused) is unchecked again. */
static __always_inline struct stamps_queue *stamp_queue(void *queues, __u32 qid, __u32 dev)
{
	struct stamps_queue *q = bpf_map_lookup_elem(queues, &qid);

	if (q && q->dev != dev) {
		q->dev = dev;
		q->mode = 0;
	}
	return q;
}

#endif /* IOPATH_STAMP_CHECK_BPF_H */
