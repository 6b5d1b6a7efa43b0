/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * NVMe's own view of the device phase (module tracepoints, loaded only where the driver is) and
 * the optional doorbell probe (fexit, else kprobe + kretprobe; detected at run time).
 */
#ifndef IOPATH_NVME_BPF_H
#define IOPATH_NVME_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "run.bpf.h"
#include "block_core.bpf.h"

/* The tracepoints hand over NULL-able request pointers: checked before any field read. */
SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(nvme_setup_cmd, struct request *rq)
{
	EMPTY_GUARD();
	struct io_slot *s;

	if (!enabled || !rq)
		return 0;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s) {
		s->nvme_ts = bpf_ktime_get_ns();
		count(C_NVME_SETUP, 1);
	}
	return 0;
}

/* The driver's view of the device time: from issue (blk_mq_start_request, which nvme_queue_rq
 * calls after building the command and DMA-mapping the data) to the completion entry, before
 * the block layer's end-of-request work (for batched/polled completions, before the batch ends). */
SEC("tp_btf/nvme_complete_rq")
int BPF_PROG(nvme_complete_rq, struct request *rq)
{
	EMPTY_GUARD();
	struct io_slot *s;
	__u64 now;

	if (!enabled || !rq)
		return 0;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s && s->r.issue_ts) {
		now = bpf_ktime_get_ns();
		record(PH_NVME, now - s->r.issue_ts);
		s->nvme_done_ts = now;
	}
	return 0;
}

/*
 * Optional (fexit, else kprobe+kretprobe; detected at run time): when nvme_queue_rq returns, the
 * doorbell has been rung (an MMIO write: a VM exit under virtualization). Issue -> doorbell is
 * the part of the device time the CPU spends in the driver. blk_status_t is a u8: only the low
 * byte of the return register is meaningful.
 */
static __always_inline void queue_rq_done(struct request *rq, __u8 ret)
{
	struct io_slot *s;

	if (!rq || ret)
		return;
	s = io_of_bio(BPF_CORE_READ(rq, bio), false);
	if (s && s->r.issue_ts)
		record(PH_NVME_SUBMIT, bpf_ktime_get_ns() - s->r.issue_ts);
}

SEC("fexit/nvme_queue_rq")
int BPF_PROG(nvme_queue_rq_exit, struct blk_mq_hw_ctx *hctx, const struct blk_mq_queue_data *bd,
	     int ret)
{
	EMPTY_GUARD();
	if (enabled)
		queue_rq_done(BPF_CORE_READ(bd, rq), ret);
	return 0;
}

/* kprobe fallback: the request, per thread, from entry to return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} queue_rq_args SEC(".maps");

SEC("kprobe/nvme_queue_rq")
int BPF_KPROBE(nvme_queue_rq_entry, struct blk_mq_hw_ctx *hctx, const struct blk_mq_queue_data *bd)
{
	EMPTY_GUARD();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 rq;

	if (!enabled)
		return 0;
	rq = (__u64)BPF_CORE_READ(bd, rq);
	bpf_map_update_elem(&queue_rq_args, &tid, &rq, BPF_ANY);
	return 0;
}

SEC("kretprobe/nvme_queue_rq")
int BPF_KRETPROBE(nvme_queue_rq_ret, int ret)
{
	EMPTY_GUARD();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 *rq = bpf_map_lookup_elem(&queue_rq_args, &tid);

	if (!rq)
		return 0;
	queue_rq_done((struct request *)*rq, ret);
	bpf_map_delete_elem(&queue_rq_args, &tid);
	return 0;
}

#endif /* IOPATH_NVME_BPF_H */
