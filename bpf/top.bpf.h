/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * iopath top: every closed I/O of the system into one row per (process, disk, route,
 * direction). One hash lookup and six atomic adds an I/O, only when targ_top is set.
 */
#ifndef IOPATH_TOP_BPF_H
#define IOPATH_TOP_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"
#include "hist.bpf.h"
#include "counters.bpf.h"

/* Set by `iopath top` / `serve` alone: a trace pays nothing for it. */
const volatile bool targ_top = false;
/* top / serve without syscall hooks (the default; --sync-syscalls clears it): sync and aio
 * direct I/O are claimed at their first bio and closed at their last bio's end, io_uring
 * requests closed when their completion is posted. */
const volatile bool targ_claim_at_bio = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TOP_MAX_KEYS);
	__type(key, struct top_key);
	__type(value, struct top_val);
} top SEC(".maps");

/* A zeroed value to insert from: too large for the BPF stack (6.6 KiB). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct top_val);
} top_zero SEC(".maps");

/* Atomic: a key is shared by every CPU its process's I/Os complete on. */
static __always_inline void top_phase(struct top_val *v, __u32 p, __u64 ns)
{
	__u32 slot = top_slot(ns);

	if (p >= TOP_PHASES)
		return;
	if (slot >= TOP_SLOTS)
		slot = TOP_SLOTS - 1;
	slot += p * TOP_SLOTS;
	/* Keep the bound check and the access on one register, or the verifier loses the bound. */
	barrier_var(slot);
	if (slot >= TOP_PHASES * TOP_SLOTS)
		return;
	barrier_var(slot);
	__sync_fetch_and_add(&v->slots[slot], 1);
	__sync_fetch_and_add(&v->sum[p], ns);
}

/* One closed, ordered I/O (io_close checked the order): its four phases, end at `end`. An I/O
 * claimed at its first bio (RF_AT_BIO) has no submission or completion of its own: those
 * histograms do not count it (unknown, never a zero). */
static __always_inline void top_add(struct io_record *r, __u64 cgroup, __u64 end, __u16 route,
				    bool write)
{
	struct top_key k = {
	    .cgroup = cgroup, .tgid = r->tgid, .dev = r->dev, .route = route, .write = write};
	struct top_val *v;
	__u32 zero = 0;

	v = bpf_map_lookup_elem(&top, &k);
	if (!v) {
		struct top_val *z = bpf_map_lookup_elem(&top_zero, &zero);

		/* Another CPU may insert it first (EEXIST): the lookup after finds either one. */
		if (z)
			bpf_map_update_elem(&top, &k, z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&top, &k);
		if (!v) {
			count(C_TOP_FULL, 1);
			return;
		}
	}
	__sync_fetch_and_add(&v->ios, 1);
	__sync_fetch_and_add(&v->bytes, r->bytes);
	if (!(r->mode & RF_AT_BIO))
		top_phase(v, 0, r->queue_ts - r->submit_ts);
	top_phase(v, 1, r->issue_ts - r->queue_ts);
	top_phase(v, 2, r->complete_ts - r->issue_ts);
	if (!(r->mode & RF_AT_BIO))
		top_phase(v, 3, end - r->complete_ts);
}

#endif /* IOPATH_TOP_BPF_H */
