/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The per-CPU counters of `enum counter` (phases.h), shared by every probe family; userspace sums
 * the families' maps index by index. */
#ifndef IOPATH_COUNTERS_BPF_H
#define IOPATH_COUNTERS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(enum counter c, __u64 n)
{
	__u32 k = c;
	__u64 *v = bpf_map_lookup_elem(&counters, &k);

	/* Per-CPU, and each counter is bumped from one kind of context: a plain add suffices. */
	if (v)
		*v += n;
}

/* The floor of scripts/bench-overhead.sh (`iopath trace --empty-probes`): every program attached
 * with an empty body, so a run measures what the hooks cost before any of their work (the
 * tracepoints' own dispatch, a program's entry and exit). The constant makes the rest dead code. */
const volatile bool targ_empty = false;
#define EMPTY_GUARD()                                                                              \
	do {                                                                                       \
		if (targ_empty)                                                                    \
			return 0;                                                                  \
	} while (0)

#endif /* IOPATH_COUNTERS_BPF_H */
