/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes are traced: the maps the phases object owns and fills (seeded by userspace, grown
 * on fork) and stacks.bpf.c reads (userspace hands it the same map fds). One definition, so the two
 * objects cannot disagree on their layout.
 */
#ifndef IOPATH_TRACED_BPF_H
#define IOPATH_TRACED_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* Processes of a traced tree (`iopath trace -- CMD`, `--pid`). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} traced_tgids SEC(".maps");

/* Threads of the traced process that are iopath's own (the tracer, the event poller). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} excluded_tids SEC(".maps");

#endif /* IOPATH_TRACED_BPF_H */
