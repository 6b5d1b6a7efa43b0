// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What an I/O costs around it: interrupts on the target device's vectors, BLOCK softirq time,
 * IOMMU and DMA map/unmap events. (Context switches live in phases.bpf.c: they need its per-task
 * state.) Plain per-CPU counters;
 * userspace divides by the I/O count.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "counters.bpf.h"

#define BLOCK_SOFTIRQ 4
#define MAX_IRQ 4096

volatile __u32 enabled = 0;
/* --perfetto: each interrupt on the filtered vectors also as a time stamp. */
const volatile bool targ_irq_stamps = false;

/* Sized by userspace when targ_irq_stamps (a page otherwise). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} irq_stamps SEC(".maps");

/* IRQ numbers of the target device (userspace fills it from sysfs msi_irqs / /proc/interrupts). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_IRQ);
	__type(key, __u32);
	__type(value, __u8);
} irq_filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} softirq_start SEC(".maps");

static __always_inline int on_irq(int irq)
{
	__u32 k = irq;
	__u8 *want;

	if (!enabled || k >= MAX_IRQ)
		return 0;
	want = bpf_map_lookup_elem(&irq_filter, &k);
	if (!want || !*want)
		return 0;
	count(C_IRQ, 1);
	if (targ_irq_stamps) {
		struct irq_stamp st = {
		    .ts = bpf_ktime_get_ns(), .irq = k, .cpu = bpf_get_smp_processor_id()};

		/* No wakeup: drained on the events poller's 20 ms timer. */
		if (bpf_ringbuf_output(&irq_stamps, &st, sizeof(st), BPF_RB_NO_WAKEUP))
			count(C_RB_DROPS, 1);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_entry, int irq)
{
	EMPTY_GUARD();
	return on_irq(irq);
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(irq_entry_raw, int irq)
{
	EMPTY_GUARD();
	return on_irq(irq);
}

static __always_inline int on_softirq(unsigned int vec, bool entry)
{
	__u32 zero = 0;
	__u64 *start;

	if (!enabled || vec != BLOCK_SOFTIRQ)
		return 0;
	start = bpf_map_lookup_elem(&softirq_start, &zero);
	if (!start)
		return 0;
	if (entry) {
		*start = bpf_ktime_get_ns();
		count(C_SOFTIRQ_BLOCK, 1);
	} else if (*start) {
		count(C_SOFTIRQ_BLOCK_NS, bpf_ktime_get_ns() - *start);
		*start = 0;
	}
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	EMPTY_GUARD();
	return on_softirq(vec, true);
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	EMPTY_GUARD();
	return on_softirq(vec, false);
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(softirq_entry_raw, unsigned int vec)
{
	EMPTY_GUARD();
	return on_softirq(vec, true);
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(softirq_exit_raw, unsigned int vec)
{
	EMPTY_GUARD();
	return on_softirq(vec, false);
}

/*
 * IOMMU and DMA mappings: counted system-wide while enabled (the device's DMA is what maps).
 * tp_btf where the kernel has BTF for them: unmaps run in completion (interrupt) context, where
 * classic tracepoint programs lose events to recursion protection (seen: 1.2% of dma unmaps on
 * 6.12, exactly the program's recursion_misses). The classic versions serve --raw-tp.
 */
static __always_inline int count_if_enabled(enum counter c)
{
	if (enabled)
		count(c, 1);
	return 0;
}

SEC("tp_btf/map")
int BPF_PROG(iommu_map_btf)
{
	EMPTY_GUARD();
	return count_if_enabled(C_IOMMU_MAP);
}

SEC("tp_btf/unmap")
int BPF_PROG(iommu_unmap_btf)
{
	EMPTY_GUARD();
	return count_if_enabled(C_IOMMU_UNMAP);
}

/* Attach targets set by userspace: dma_map_phys/dma_unmap_phys, or the _page names before 6.17. */
SEC("tp_btf/dma_map_phys")
int BPF_PROG(dma_map_btf)
{
	EMPTY_GUARD();
	return count_if_enabled(C_DMA_MAP);
}

SEC("tp_btf/dma_unmap_phys")
int BPF_PROG(dma_unmap_btf)
{
	EMPTY_GUARD();
	return count_if_enabled(C_DMA_UNMAP);
}

SEC("tracepoint/iommu/map")
int iommu_map(void *ctx)
{
	EMPTY_GUARD();
	return count_if_enabled(C_IOMMU_MAP);
}

SEC("tracepoint/iommu/unmap")
int iommu_unmap(void *ctx)
{
	EMPTY_GUARD();
	return count_if_enabled(C_IOMMU_UNMAP);
}

/* Attached by userspace to dma:dma_map_phys or dma:dma_map_page, whichever exists. */
SEC("tracepoint")
int dma_map(void *ctx)
{
	EMPTY_GUARD();
	return count_if_enabled(C_DMA_MAP);
}

SEC("tracepoint")
int dma_unmap(void *ctx)
{
	EMPTY_GUARD();
	return count_if_enabled(C_DMA_UNMAP);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
