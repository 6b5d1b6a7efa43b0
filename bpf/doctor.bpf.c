// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The doctor's probes: one tiny counting program per attach kind, on the
 * block layer's issue tracepoint (and vfs_read for fentry/kprobe, which need
 * a kernel function; a cpu-clock perf event for perf_event). Loading each and seeing its counter
 * move is the proof that this kind of program works here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "doctor.h"

/* Count only this process's events when set (tests use it); 0 = everyone. */
const volatile __u32 targ_tgid = 0;

__u64 hits[DOCTOR_NR_PROBES] = {};

static __always_inline int count(enum doctor_probe probe)
{
	if (targ_tgid && (bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return 0;
	if (probe < DOCTOR_NR_PROBES)
		__sync_fetch_and_add(&hits[probe], 1);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(doctor_tp_btf, struct request *rq)
{
	return count(DOCTOR_TP_BTF);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(doctor_raw_tp, struct request *rq)
{
	return count(DOCTOR_RAW_TP);
}

SEC("tracepoint/block/block_rq_issue")
int doctor_tracepoint(void *ctx)
{
	return count(DOCTOR_TRACEPOINT);
}

SEC("fentry/vfs_read")
int BPF_PROG(doctor_fentry)
{
	return count(DOCTOR_FENTRY);
}

SEC("kprobe/vfs_read")
int BPF_KPROBE(doctor_kprobe)
{
	return count(DOCTOR_KPROBE);
}

/* The flamegraphs' sampler attaches this way (a software cpu-clock on each CPU). */
SEC("perf_event")
int doctor_perf_event(void *ctx)
{
	return count(DOCTOR_PERF_EVENT);
}

/* Loaded, never attached: whether the verifier takes BPF atomics (cmpxchg, xchg: 5.12+), which
 * the per-I/O tables claim and free their slots with (bpf/slots.bpf.h). */
__u64 atomics_word = 0;

SEC("raw_tp/block_rq_issue")
int BPF_PROG(doctor_atomics)
{
	__u64 seen = __sync_val_compare_and_swap(&atomics_word, 0, 1);

	__sync_lock_test_and_set(&atomics_word, seen);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
