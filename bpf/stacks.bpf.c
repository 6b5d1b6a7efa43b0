// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stacks for flamegraphs. On-CPU: a perf_event program on the software cpu-clock of every CPU
 * (no hardware PMU in VMs like ours) counts (thread, kernel stack, user stack) in the kernel.
 * Off-CPU: sched_switch stamps a traced thread's stacks when it leaves the CPU and adds the
 * time until it runs again. Userspace symbolizes and folds.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stacks.h"
#include "traced.bpf.h"

/* Sample every task (`--all-cpus`) instead of the traced processes. */
const volatile bool targ_all = false;
/* Process to trace when not a tree (0 with targ_tree = false and targ_all = false: nothing). */
const volatile __u32 targ_tgid = 0;
const volatile bool targ_tree = false;

/* Set by userspace once everything is attached. */
volatile __u32 enabled = 0;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, STACK_DEPTH * sizeof(__u64));
} stackmap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stack_key);
	__type(value, __u64);
} oncpu_samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stack_key);
	__type(value, __u64);
} offcpu_ns SEC(".maps");

/* Where a traced thread left the CPU: when, and its stacks then. */
struct offcpu_start {
	__u64 ts;
	__s32 kstack;
	__s32 ustack;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_start);
} offcpu_starts SEC(".maps");

/* Samples lost because a map was full (userspace reports them next to the graph). */
__u64 dropped = 0;

struct stack_key _stack_key = {};

static __always_inline bool wanted(__u32 tgid, __u32 pid)
{
	if (!pid)
		return false; /* the idle task */
	if (targ_all)
		return true;
	if (bpf_map_lookup_elem(&excluded_tids, &pid))
		return false;
	if (targ_tree)
		return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
	return tgid == targ_tgid;
}

static __always_inline void add(void *map, struct stack_key *k, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(map, k);

	if (c) {
		__sync_fetch_and_add(c, v);
		return;
	}
	/* Another CPU may have created it meanwhile: then add to that one. */
	if (bpf_map_update_elem(map, k, &v, BPF_NOEXIST)) {
		c = bpf_map_lookup_elem(map, k);
		if (c)
			__sync_fetch_and_add(c, v);
		else
			__sync_fetch_and_add(&dropped, 1);
	}
}

SEC("perf_event")
int oncpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct stack_key k = {.tgid = id >> 32, .pid = (__u32)id};

	if (!enabled || !wanted(k.tgid, k.pid))
		return 0;
	bpf_get_current_comm(&k.comm, sizeof(k.comm));
	k.kstack = bpf_get_stackid(ctx, &stackmap, 0);
	k.ustack = bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
	add(&oncpu_samples, &k, 1);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct offcpu_start *s;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	/* Still running as prev: the stacks taken now are where it blocks. */
	if (wanted(prev->tgid, prev->pid)) {
		s = bpf_task_storage_get(&offcpu_starts, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (s) {
			s->ts = now;
			s->kstack = bpf_get_stackid(ctx, &stackmap, 0);
			s->ustack = bpf_get_stackid(ctx, &stackmap, BPF_F_USER_STACK);
		}
	}
	if (wanted(next->tgid, next->pid)) {
		s = bpf_task_storage_get(&offcpu_starts, next, 0, 0);
		if (s && s->ts) {
			struct stack_key k = {
			    .tgid = next->tgid,
			    .pid = next->pid,
			    .kstack = s->kstack,
			    .ustack = s->ustack,
			};

			bpf_probe_read_kernel_str(&k.comm, sizeof(k.comm), next->comm);
			add(&offcpu_ns, &k, now - s->ts);
			s->ts = 0;
		}
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
