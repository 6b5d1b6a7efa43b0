/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a disk was doing while a traced write or sync call was blocked on it: journal commits and
 * cache flushes, as time integrals (the block, writeback/jbd2 and scheduler rooms keep them; the
 * page-cache route reads them).
 */
#ifndef IOPATH_DISK_BUSY_BPF_H
#define IOPATH_DISK_BUSY_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "compat.bpf.h"

/*
 * What ran on a disk while a traced write or sync call was blocked on it: a journal commit
 * (jbd2_start_commit -> jbd2_end_commit of the file system on it) and cache flushes / FUA writes
 * (issue -> complete). Kept as time integrals, split by which of the two were in progress, so a
 * call's blocked interval [b, w] is attributed by the integrals' growth between b and w, exactly,
 * whatever else the disk did. Entries are made by the traced calls (a disk nobody traced is not
 * followed); the lock is needed because a commit ends on the jbd2 thread's CPU while a flush
 * completes in another CPU's interrupt. tp_btf programs only (raw_tp ones may not take locks).
 */
enum busy_kind { BUSY_J = 0, BUSY_JF = 1, BUSY_F = 2 };

struct disk_busy {
	struct bpf_spin_lock lock;
	__u32 commits; /* commits in progress */
	__u32 flushes; /* flush / FUA requests in flight */
	__u64 last;    /* the integrals are complete up to this time */
	__u64 acc[3];  /* ns with: a commit only, a commit and a flush, a flush only */
	__u64 commit_start;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct disk_busy);
} disk_busy SEC(".maps");

/* Call with the lock held. */
static __always_inline void busy_advance(struct disk_busy *d, __u64 now)
{
	__u64 dt = d->last && now > d->last ? now - d->last : 0;

	if (d->commits && d->flushes)
		d->acc[BUSY_JF] += dt;
	else if (d->commits)
		d->acc[BUSY_J] += dt;
	else if (d->flushes)
		d->acc[BUSY_F] += dt;
	if (now > d->last)
		d->last = now;
}

static __always_inline void busy_read(__u64 disk, __u64 now, __u64 out[3])
{
	/* The compat build keeps no integrals: 5.10's tracing programs cannot take bpf_spin_lock,
	 * and an unlocked count left off by one race would misattribute every later block. A sync
	 * call's blocked time stays unsplit there ("waited"). */
	struct disk_busy *d =
	    disk && !IOPATH_COMPAT_BUILD ? bpf_map_lookup_elem(&disk_busy, &disk) : NULL;

	if (!d) {
		out[0] = out[1] = out[2] = 0;
		return;
	}
	bpf_spin_lock(&d->lock);
	busy_advance(d, now);
	out[0] = d->acc[0];
	out[1] = d->acc[1];
	out[2] = d->acc[2];
	bpf_spin_unlock(&d->lock);
}

/* A commit (`commit`) or a flush started (+1) or ended (-1) on a followed disk. Returns the
 * commit's duration when one ended, else 0. */
static __always_inline __u64 busy_change(__u64 disk, bool commit, int delta)
{
	struct disk_busy *d = IOPATH_COMPAT_BUILD ? NULL : bpf_map_lookup_elem(&disk_busy, &disk);
	__u64 now = bpf_ktime_get_ns(), took = 0;

	if (!d)
		return 0;
	bpf_spin_lock(&d->lock);
	busy_advance(d, now);
	if (commit) {
		if (delta > 0) {
			if (!d->commits++)
				d->commit_start = now;
		} else if (d->commits && !--d->commits) {
			took = now - d->commit_start;
		}
	} else if (delta > 0) {
		d->flushes++;
	} else if (d->flushes) {
		d->flushes--;
	}
	bpf_spin_unlock(&d->lock);
	return took;
}

static __always_inline void busy_follow(__u64 disk)
{
	struct disk_busy zero = {};

	if (disk)
		bpf_map_update_elem(&disk_busy, &disk, &zero, BPF_NOEXIST);
}

#endif /* IOPATH_DISK_BUSY_BPF_H */
