/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The scheduler's hooks: traced processes' children, each traced thread's context switches, the
 * time it was runnable but not running, and the switches that end a buffered call's blocked
 * interval (sync.bpf.h pc_blocked) or look at its io_uring ring (cq_ring.bpf.h).
 */
#ifndef IOPATH_SCHED_BPF_H
#define IOPATH_SCHED_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "run.bpf.h"
#include "task.bpf.h"
#include "disk_busy.bpf.h"
#include "sync.bpf.h"
#include "cq_ring.bpf.h"
#include "core_fixes.bpf.h"

/* Children of a traced process are traced too (fio forks its jobs). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(process_fork, struct task_struct *parent, struct task_struct *child)
{
	EMPTY_GUARD();
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (targ_tree && ptgid != ctgid && bpf_map_lookup_elem(&traced_tgids, &ptgid))
		bpf_map_update_elem(&traced_tgids, &ctgid, &one, BPF_ANY);
	return 0;
}

/*
 * A thread preempted outside a traced syscall - typically right after one returns, on its way
 * back to user space, after the exit tracepoint stamped the reap - is runnable but not running:
 * time the application waits that no kernel I/O phase covers. Measured from the switch-out to
 * the switch-in. Needs BTF task pointers (task storage of another task), so tp_btf only.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	EMPTY_GUARD();
	struct task_ctx *t;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	if (traced_thread(prev)) {
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
		t = task_ctx_of(prev);
		if (t && t->in_sys && t->buffered) {
			if (preempt) {
				t->in_preempt_ts = now;
			} else {
				t->block_ts = now;
				/* balance_dirty_pages sleeps right after its tracepoint (~1 us
				 * here); a later block in the same call is something else. */
				t->throttling = t->throttle_ts && now - t->throttle_ts < 20000;
				t->throttle_ts = 0;
				if (t->buffered != PC_READ)
					busy_read(t->disk, now, t->snap);
			}
		} else if (t && preempt && !t->in_sys) {
			t->preempt_ts = now;
		}
		/* Only in user space can it take CQEs: a thread blocked in a syscall is looked at
		 * by the syscall's exit (the looks at these switches cost 10% of loop-device IOPS).
		 */
		if (t && t->ring && !t->in_sys && !(prev->flags & PF_EXITING))
			ring_look(t->ring, now);
	}
	if (traced_thread(next)) {
		t = task_ctx_of(next);
		if (t && t->block_ts) {
			/* Blocked, and its wakeup not seen (woken before tracing began). */
			pc_blocked(t, now);
			t->block_ts = 0;
		}
		if (t && t->runq_from) {
			/* Woken inside the call, then waited for a CPU. */
			t->runq_ns += now - t->runq_from;
			t->runq_from = 0;
		}
		if (t && t->in_preempt_ts) {
			t->runq_ns += now - t->in_preempt_ts;
			t->in_preempt_ts = 0;
		}
		if (t && t->preempt_ts) {
			count(C_PREEMPTED, 1);
			count(C_PREEMPTED_NS, now - t->preempt_ts);
			t->preempt_ts = 0;
		}
		if (t && t->wake_ts) {
			count(C_RUNQ_WAIT, 1);
			count(C_RUNQ_WAIT_NS, now - t->wake_ts);
			t->wake_ts = 0;
		}
		/* Preempted in user space, it took nothing from the ring off the CPU: the bound's
		 * start moves up to here. */
		if (t && t->ring && !t->in_sys)
			ring_look(t->ring, now);
	}
	return 0;
}

/* A traced thread woken (its I/O completed, typically) waits for a CPU until sched_switch runs it:
 * the time a busy CPU adds to every I/O, which no I/O phase would otherwise explain. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced_thread(p))
		return 0;
	t = task_ctx_of(p);
	if (!t)
		return 0;
	t->wake_ts = bpf_ktime_get_ns();
	/* A buffered call's blocked interval ends here: what it waited for is told now. */
	if (t->block_ts && t->in_sys && t->buffered) {
		pc_blocked(t, t->wake_ts);
		t->block_ts = 0;
		t->runq_from = t->wake_ts;
	}
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev)
{
	EMPTY_GUARD();
	if (enabled && traced_thread_raw(prev))
		count(preempt ? C_CTX_INVOLUNTARY : C_CTX_VOLUNTARY, 1);
	return 0;
}

#endif /* IOPATH_SCHED_BPF_H */
