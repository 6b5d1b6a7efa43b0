/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A file system's own end-io work, between the device's completion and the I/O's end: btrfs
 * verifies a read's data checksums in its end-io workers (a work item per btrfs_bio:
 * btrfs_end_bio_work, simple_end_io_work since 7.x and on 6.18) before iomap's dio ends. Its two
 * sub-phases of *completion*: the request completed -> the worker started on it (the queue wait),
 * and the worker's run (checksums, then the I/O's end). workqueue_execute_start/end fire for
 * every work item on the machine: the plan attaches them only when the trace's target is on
 * btrfs (or a traced command's I/O may be), and each returns at once for any other function.
 */
#ifndef IOPATH_FS_ENDIO_BPF_H
#define IOPATH_FS_ENDIO_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "run.bpf.h"
#include "block_core.bpf.h"

/* A work item of btrfs's end-io in flight -> its I/O (the btrfs_bio may be freed by the time the
 * worker returns: the end is found by the work's address, never through the bio). */
struct fs_work {
	__u64 key;
	__u64 start;
	__u32 disc;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct fs_work);
} fs_works SEC(".maps");

static __always_inline void fs_endio_start(struct work_struct *work, __u64 fn)
{
	struct bio *bio;
	struct io_slot *s;
	struct fs_work w = {};
	__u64 key = (__u64)work;
	bool stacked;

	if (!enabled || !fn || fn != targ_btrfs_end_io_work ||
	    !bpf_core_type_exists(struct btrfs_bio___iopath))
		return;
	bio =
	    (void *)((char *)work - bpf_core_field_offset(struct btrfs_bio___iopath, end_io_work) +
		     bpf_core_field_offset(struct btrfs_bio___iopath, bio));
	s = io_of_bio_derived(bio, &stacked);
	if (!s)
		return;
	w.key = s->key;
	w.disc = s->disc;
	w.start = bpf_ktime_get_ns();
	if (!s->fs_endio_ts)
		s->fs_endio_ts = w.start;
	bpf_map_update_elem(&fs_works, &key, &w, BPF_ANY);
}

static __always_inline void fs_endio_end(struct work_struct *work, __u64 fn)
{
	__u64 key = (__u64)work;
	struct fs_work *w;
	struct io_slot *s;

	if (!enabled || !fn || fn != targ_btrfs_end_io_work)
		return;
	w = bpf_map_lookup_elem(&fs_works, &key);
	if (!w)
		return;
	s = ios_find(w->key, w->disc);
	if (s && s->fs_endio_ts == w->start)
		s->fs_endio_end_ts = bpf_ktime_get_ns();
	bpf_map_delete_elem(&fs_works, &key);
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(fs_endio_start_btf, struct work_struct *work)
{
	EMPTY_GUARD();
	fs_endio_start(work, (__u64)BPF_CORE_READ(work, func));
	return 0;
}

SEC("raw_tp/workqueue_execute_start")
int BPF_PROG(fs_endio_start_raw, struct work_struct *work)
{
	EMPTY_GUARD();
	fs_endio_start(work, (__u64)BPF_CORE_READ(work, func));
	return 0;
}

/* raw_tp only: a tp_btf program may not read an argument of function type ("arg1 type FUNC_PROTO
 * is not a struct", 6.18), and the work may be freed by now, its func unreadable. */
SEC("raw_tp/workqueue_execute_end")
int BPF_PROG(fs_endio_end_raw, struct work_struct *work, void *function)
{
	EMPTY_GUARD();
	fs_endio_end(work, (__u64)function);
	return 0;
}

#endif /* IOPATH_FS_ENDIO_BPF_H */
