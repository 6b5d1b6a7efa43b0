/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the bundled generator shares with the probes: its queue stamps in each request's user data
 * (targ_app_stamp) and slot_clock, the one time per generator slot both sides read.
 */
#ifndef IOPATH_GENERATOR_BPF_H
#define IOPATH_GENERATOR_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"

/*
 * One time per slot of the bundled generator, shared with it (mmap; it runs in the tracer's
 * process), sized by userspace (jobs x qd). io_uring under SQPOLL or --lean: when the completion
 * in each slot was posted. The application takes completions from the CQ ring with no syscall
 * hook seeing it; the generator reads this as it takes each CQE and times its own wait against
 * the same clock. aio under --lean: written by the generator, the time it called io_submit for
 * the slot's I/O (aio_claim_at_bio starts the I/O there).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} slot_clock SEC(".maps");

/* The application's stamp (targ_app_stamp) in user data: UD_STAMP_BITS of ns, unwrapped against
 * now; `now` itself when it is none or from before this run. */
static __always_inline __u64 app_stamp(__u64 user_data, __u64 now)
{
	__u64 t = user_data >> UD_SLOT_BITS, mask = (1ULL << UD_STAMP_BITS) - 1;
	__u64 ts = (now & ~mask) | t;

	if (ts > now)
		ts -= 1ULL << UD_STAMP_BITS;
	return now - ts < 10000000000ULL ? ts : now;
}

#endif /* IOPATH_GENERATOR_BPF_H */
