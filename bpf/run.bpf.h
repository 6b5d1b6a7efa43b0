/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * This run of the phases object: what userspace set before load (rodata: whom to trace, which
 * shortcuts a route takes, the kernel functions that tell a bio's owner), whether the run has
 * begun (`enabled`) and which threads are traced. Every room of the object includes it: the knobs
 * are in one place, and no header depends on what its includer happened to define before it.
 */
#ifndef IOPATH_RUN_BPF_H
#define IOPATH_RUN_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "traced.bpf.h"

/* Process to trace; 0 = every process. */
const volatile __u32 targ_tgid = 0;
/* Trace a process tree (traced_tgids, grown on fork) instead of the single targ_tgid. */
const volatile bool targ_tree = false;
/* Emit one io_record per reaped I/O into `events`. */
const volatile bool targ_events = false;
/* The traced application (the bundled generator) stamps each SQE's user_data and each iocb's
 * aio_data with the time it queued the I/O (the low UD_STAMP_BITS of CLOCK_MONOTONIC ns, above a
 * UD_SLOT_BITS slot index): its own time before the kernel, SQPOLL's pickup, slot_clock below. */
const volatile bool targ_app_stamp = false;
/* --lean (io_uring, the bundled generator): no syscall hooks. A request starts when io_uring takes
 * its SQE and ends when its completion is posted; the generator times its own reap from the
 * posting time (slot_clock), as with SQPOLL. */
const volatile bool targ_lean = false;
/* --lean aio (the bundled generator, direct I/O): each request is claimed at its first bio, from
 * the kernel's aio_kiocb, not at io_submit's entry from the user's iocb array (two user-memory
 * reads per iocb: sys_enter cost 465 ns a run on io_submit). It starts at the time the generator
 * wrote into slot_clock just before its io_submit, so no sys_enter hook runs at all (208 ns a run
 * and the syscall slow path on every system call); io_getevents' exit reaps, its arguments read
 * from the registers. A request that makes no bio is not followed: refused for buffered jobs. */
const volatile bool targ_aio_at_bio = false;
/* Count the traced threads' system calls by number. */
const volatile bool targ_syscalls = true;
/* Kernel functions that tell who owns a bio (from /proc/kallsyms; 0 = absent). */
const volatile __u64 targ_iomap_end_io = 0;
const volatile __u64 targ_blkdev_end_io = 0;
const volatile __u64 targ_blkdev_end_io_async = 0;
const volatile __u64 targ_bio_wait_end_io = 0;
const volatile __u64 targ_blkdev_simple_end_io = 0;
const volatile __u64 targ_chain_end_io = 0;
const volatile __u64 targ_aio_complete = 0;
/* ... and the stacked devices' clones (module symbols; 0 where the module is not loaded). */
const volatile __u64 targ_dm_end_io = 0;
const volatile __u64 targ_crypt_end_io = 0;
const volatile __u64 targ_raid1_read_end_io = 0;
const volatile __u64 targ_raid1_write_end_io = 0;
const volatile __u64 targ_md_clone_end_io = 0;

/* ... and btrfs's (fs/btrfs/bio.c; module symbols: 0 while btrfs is not loaded). */
const volatile __u64 targ_btrfs_simple_end_io = 0;
const volatile __u64 targ_btrfs_orig_write_end_io = 0;
const volatile __u64 targ_btrfs_clone_write_end_io = 0;
const volatile __u64 targ_btrfs_dio_end_io = 0;
const volatile __u64 targ_btrfs_end_dio_bio = 0;
/* btrfs's end-io work function (its read checksums), and whether fs_endio.bpf.h's hooks are
 * attached (its sub-phases are recorded only then). */
const volatile __u64 targ_btrfs_end_io_work = 0;
const volatile bool targ_fs_endio = false;

/* block_bio_queue(request_queue, bio): kernels before 5.11 (hooks.rs, from the kernel's BTF). */
const volatile bool targ_bio_queue_q = false;

/* Set by userspace once every link is attached, so attach order cannot skew counts. */
volatile __u32 enabled = 0;

/*
 * The lean trace's issue stamp: where a check found a queue's io_start_time_ns within max(1 us,
 * 2%) of block_rq_issue's time on the same requests, the device phase starts at the stamp and
 * block_rq_issue is detached (src/probe/issue_stamps.rs: 0.75x -> 0.83x untraced without it on
 * the loop device at QD32). The stamp is 0 where the queue keeps no stats (wbt, iocost,
 * iolatency off): that queue keeps its hook.
 */
const volatile bool targ_issue_stamps = false;
/* Userspace: 1 while a check window compares each stamp with the hooked time. */
volatile __u32 issue_checking = 0;
/* Userspace: 1 once some queue's stamp is trusted (SM_ISSUE_STAMP in issue_queues) ... */
volatile __u32 issue_stamps = 0;
/* ... and 1 while block_rq_issue is detached (the hardware queue is counted at completion). */
volatile __u32 issue_detached = 0;

/* ---- who is traced ---- */

static __always_inline bool tgid_traced(__u32 tgid)
{
	if (targ_tree)
		return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
	return !targ_tgid || tgid == targ_tgid;
}

static __always_inline bool traced(__u32 tgid)
{
	return enabled && tgid_traced(tgid);
}

/* tp_btf hands us BTF task pointers: plain loads, no bpf_probe_read. */
static __always_inline bool not_ours(__u32 tid)
{
	return !bpf_map_lookup_elem(&excluded_tids, &tid);
}

static __always_inline bool traced_thread(struct task_struct *p)
{
	return (targ_tgid || targ_tree) && tgid_traced(p->tgid) && not_ours(p->pid);
}

static __always_inline bool traced_thread_raw(struct task_struct *p)
{
	return (targ_tgid || targ_tree) && tgid_traced(BPF_CORE_READ(p, tgid)) &&
	       not_ours(BPF_CORE_READ(p, pid));
}

#endif /* IOPATH_RUN_BPF_H */
