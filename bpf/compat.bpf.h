/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one place for what kernels before 5.17 lack. The phases object is built twice from the same
 * source (build.rs): as is, and with IOPATH_COMPAT for kernels whose verifier has no bpf_loop
 * (5.17), BPF atomics (cmpxchg/xchg, 5.12), task storage or bpf_get_current_task_btf (5.11):
 * Debian 11's 5.10, Ubuntu 22.04's 5.15, RHEL 9's 5.14. probe::hooks picks the build from the
 * kernel's facts (Flavour). Both builds define the same maps, programs and globals, so one Rust
 * skeleton serves both (build.rs compares the two generated skeletons).
 *
 *   modern                            compat
 *   bpf_loop(n, cb, ctx)              a bounded loop (EACH; fewer aio events a batch)
 *   slot claim: cmpxchg on the key    a BPF_NOEXIST insert of the slot's index in NAME_held
 *   slot release: xchg                a delete from NAME_held (exactly one deleter wins)
 *   task storage                      an LRU hash by thread id (task_local below)
 *   bpf_get_current_task_btf()        bpf_get_current_task() and probe reads (TASK_BTF is 0)
 *   disk busy integrals (spin lock)   none: a sync call's blocked time is not split by the
 *                                     flushes and commits that ran meanwhile (disk_busy.bpf.h)
 *
 * The compat claims cost two hash operations per I/O (~150 ns each on the 2-vCPU test VM) that the
 * modern build does not pay: only the kernels that need them run them.
 */
#ifndef IOPATH_COMPAT_BPF_H
#define IOPATH_COMPAT_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#ifdef IOPATH_COMPAT

#define IOPATH_COMPAT_BUILD 1

/* The current task is not a BTF pointer: its fields are read with probe reads. */
#define TASK_BTF 0
#define CURRENT_TASK() ((struct task_struct *)bpf_get_current_task())

/*
 * EACH(MAX, n, cb, ctx, i, STEP): the bounded-loop pattern, the compat build's one difference in
 * control flow. Modern: bpf_loop(n, cb, ctx), calling cb(i, ctx) for i in [0, n) until it returns
 * nonzero. Compat (no bpf_loop): at most MAX iterations of a loop that evaluates STEP, an
 * expression of its index `i`, nonzero to stop; its verifier walks every iteration, so MAX stays
 * small (an aio batch of 4096 did not fit 5.10's 1M-instruction budget). STEP calls cb where cb is
 * small (LOOP); where it is not, a STEP_FN global function doing cb's work, which the verifier
 * checks once instead of once per iteration (a loop of 128 over aio_claim_one overran its 8192
 * pending jumps, 6.18 and 5.10 alike), with scalar arguments only (5.10 passes nothing else to a
 * global function). Either way the value is the iterations run, counting the one that stopped.
 */
#define EACH(MAX, n, cb, ctx, i, STEP)                                                             \
	({                                                                                         \
		__u32 i, __n = (n);                                                                \
		(void)(cb);                                                                        \
		(void)(ctx);                                                                       \
		for (i = 0; i < (MAX) && i < __n; i++) {                                           \
			if (STEP) {                                                                \
				i++;                                                               \
				break;                                                             \
			}                                                                          \
		}                                                                                  \
		i;                                                                                 \
	})

/* A STEP's global function: checked once by the verifier. */
#define STEP_FN __noinline

/* At most this many aio events a reap and iocbs a submit are followed (the rest are counted
 * unmatched); the modern build follows MAX_AIO_EVENTS. */
#define AIO_BATCH_MAX 128

#else /* !IOPATH_COMPAT */

#define IOPATH_COMPAT_BUILD 0
#define TASK_BTF 1
#define CURRENT_TASK() bpf_get_current_task_btf()
#define EACH(MAX, n, cb, ctx, i, STEP) bpf_loop(n, cb, ctx, 0)
/* Not called here: not emitted. */
#define STEP_FN static __always_inline __attribute__((unused))
#define AIO_BATCH_MAX MAX_AIO_EVENTS

#endif /* IOPATH_COMPAT */

/* cb(i, ctx) for i in [0, n): EACH where the callback is small enough to be walked MAX times. */
#define LOOP(MAX, n, cb, ctx) EACH(MAX, n, cb, ctx, __i, cb(__i, ctx))

/* The current task's flags (PF_*), by a plain load where the task is a BTF pointer. */
#define CURRENT_FLAGS()                                                                            \
	(TASK_BTF ? bpf_get_current_task_btf()->flags : BPF_CORE_READ(CURRENT_TASK(), flags))

/*
 * A slot's key word: claimed from 0 to `key` by one context, given back to 0 by its owner. `held`
 * is the table's NAME_held hash (compat only; an empty map of one entry in the modern build).
 */
static __always_inline bool slot_take_free(void *held, __u64 *keyp, __u32 *idxp, __u32 idx,
					   __u64 key)
{
#ifdef IOPATH_COMPAT
	__u8 one = 1;

	/* The insert is the claim: of two contexts racing for this free slot, one gets -EEXIST. */
	if (bpf_map_update_elem(held, &idx, &one, BPF_NOEXIST))
		return false;
	*keyp = key;
#else
	if (__sync_val_compare_and_swap(keyp, 0, key) != 0)
		return false;
#endif
	*idxp = idx;
	return true;
}

/* Gives a slot back if it still holds `key` (true: this context gave it back). Its values were
 * read before: xchg / the delete order those reads before the release. */
static __always_inline bool slot_give(void *held, __u64 *keyp, __u32 idx, __u64 key)
{
#ifdef IOPATH_COMPAT
	if (*keyp != key || bpf_map_delete_elem(held, &idx))
		return false;
	*keyp = 0;
	return true;
#else
	return __sync_val_compare_and_swap(keyp, key, 0) == key;
#endif
}

/* Takes one from a count several CPUs share (an I/O's bios in flight); true when this made it 0.
 * Before 5.12 no atomic returns the old value: the decrement is atomic and the test reads after
 * it, so two ends at once may both see 0 (the caller's slot take lets only one of them on). */
static __always_inline bool count_down(__u32 *c)
{
#ifdef IOPATH_COMPAT
	__sync_fetch_and_add(c, -1);
	return *(volatile __u32 *)c == 0;
#else
	return __sync_fetch_and_sub(c, 1) == 1;
#endif
}

/*
 * Per-thread state (task.bpf.h): task storage, or in the compat build an LRU hash by thread id
 * (`by_tid`) whose new entries are copied from a zeroed per-CPU value (`zero`: a value that size
 * does not fit the BPF stack). Both builds define all three maps; userspace sizes the unused ones.
 */
static __always_inline void *task_local(void *storage, void *by_tid, void *zero, bool create)
{
#ifdef IOPATH_COMPAT
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), k = 0;
	void *t = bpf_map_lookup_elem(by_tid, &tid);

	if (t || !create)
		return t;
	t = bpf_map_lookup_elem(zero, &k);
	if (!t)
		return NULL;
	bpf_map_update_elem(by_tid, &tid, t, BPF_NOEXIST);
	return bpf_map_lookup_elem(by_tid, &tid);
#else
	return bpf_task_storage_get(storage, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
#endif
}

/* Another task's state (a BTF task pointer: tp_btf's arguments), never created. */
static __always_inline void *task_local_of(void *storage, void *by_tid, struct task_struct *p)
{
#ifdef IOPATH_COMPAT
	__u32 tid = p->pid;

	return bpf_map_lookup_elem(by_tid, &tid);
#else
	return bpf_task_storage_get(storage, p, 0, 0);
#endif
}

/* The calling thread exits: task storage goes with it; a hash entry is dropped so a recycled
 * thread id starts clean. */
static __always_inline void task_local_drop(void *by_tid)
{
#ifdef IOPATH_COMPAT
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(by_tid, &tid);
#endif
}

#endif /* IOPATH_COMPAT_BPF_H */
