/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Each traced thread's state while it is inside an I/O system call (the sync, aio and page-cache
 * routes, the scheduler hooks that split a call's blocked time): task storage, or before 5.11 a
 * hash by thread id (compat.bpf.h task_local).
 */
#ifndef IOPATH_TASK_BPF_H
#define IOPATH_TASK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "compat.bpf.h"

/* The page-cache route's families (task_ctx.buffered) and their first phase. */
enum pc_family { PC_NONE = 0, PC_READ = 1, PC_WRITE = 2, PC_SYNC = 3, PC_COPY = 4 };

struct task_ctx {
	__u64 enter_ts;
	__u64 aio_events; /* io_getevents: the user's io_event array */
	__u64 aio_iocbs;  /* io_submit: the user's iocb pointer array ... */
	__u32 aio_nr;	  /* ... and its length */
	__u32 aio_disc;	  /* the kioctx of the call ... */
	__u64 aio_ctx_id; /* ... and its aio_context_t: the last one looked up, kept */
	__u32 in_submit;  /* inside io_uring_enter / io_submit */
	__u32 sqes;	  /* SQEs the current io_uring_enter submitted */
	__u64 ring;	  /* the io_ring_ctx it last entered or submitted to (cq_ring.bpf.h) */
	__u32 in_sys;	  /* inside a traced I/O syscall */
	/* excluded_tids, looked up once per thread: 1 traced, 2 one of iopath's own (its vmstat
	 * sampler reads /proc/vmstat from the generator's process: 89 "buffered reads" a run). */
	__u32 own;
	/* I/Os the reaping syscall's exit closed so far. Counted here, not in the bpf_loop
	 * context on the stack: the verifier follows a stack counter's every value through the
	 * callback and gives up (8193 jumps); map memory it does not track. */
	__u32 closed;
	/* The page-cache route: inside a buffered read, write or a sync call (enum pc_family). */
	__u32 buffered;
	__u32 pc_bios;	     /* data bios this call queued */
	__u32 sync_call;     /* PC_SYNC: 1 fsync, 2 fdatasync; | 4 on a directory */
	__u32 sync_write;    /* PC_WRITE with O_SYNC / O_DSYNC / RWF_DSYNC */
	__u32 own_flushes;   /* cache flushes this call issued itself */
	__u32 throttling;    /* the current block is a balance_dirty_pages pause */
	__u64 disk;	     /* the gendisk of the call's file (disk_busy key; 0 unknown) */
	__u64 throttle_ts;   /* balance_dirty_pages traced this pause at this time */
	__u64 block_ts;	     /* it blocked (switched out, not preempted) at this time ... */
	__u64 in_preempt_ts; /* ... or was preempted at this time */
	__u64 runq_from;     /* woken inside the call at this time, not yet running */
	__u64 snap[3];	     /* the disk's busy integrals when it blocked (struct disk_busy) */
	__u64 waited_ns;     /* blocked, nothing below explains it (reads: all blocked time) */
	__u64 runq_ns;	     /* runnable but not running, in this call */
	__u64 data_ns;	     /* blocked, it had queued data bios itself */
	__u64 journal_ns;    /* blocked while a journal commit of its disk ran ... */
	__u64 jflush_ns;     /* ... of which a flush / FUA write of that disk was in flight */
	__u64 flush_ns;	     /* blocked while a flush / FUA ran outside a commit */
	__u64 throttled_ns;  /* in balance_dirty_pages pauses */
	__u64 preempt_ts;    /* preempted outside a syscall at this time */
	__u64 wake_ts;	     /* woken up at this time, not yet running */
	/* Posted, not yet taken CQEs wait in the ios table, per ring (cq_ring.bpf.h). Not here:
	 * 256 records made this 20.9 KiB, and from 6.19 on task storage is allocated with
	 * kmalloc_nolock, which serves 8 KiB at most: bpf_task_storage_get(F_CREATE) returned NULL
	 * for every thread on Debian's 7.2 and 7.3, and no syscall route was followed there
	 * (bpf_local_storage_map lost its bpf_mem_alloc in their BTF). */
};

_Static_assert(sizeof(struct task_ctx) <= 4096,
	       "task storage values must stay small (kmalloc_nolock)");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* The compat build's per-thread state (compat.bpf.h), by thread id: an LRU bounds what threads
 * that never reach exit leave behind. Userspace sizes it to one entry in the modern build and
 * does not create task_ctxs in the compat one. */
#define TASK_CTX_TIDS 2048
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TASK_CTX_TIDS);
	__type(key, __u32);
	__type(value, struct task_ctx);
} task_ctx_tids SEC(".maps");

/* All zeros: the compat build's new task_ctx is copied from here (a value this size does not fit
 * the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct task_ctx);
} task_ctx_zero SEC(".maps");

static __always_inline struct task_ctx *task_ctx(bool create)
{
	return task_local(&task_ctxs, &task_ctx_tids, &task_ctx_zero, create);
}

/* Another task's context (a BTF task pointer: tp_btf's arguments), never created here. */
static __always_inline struct task_ctx *task_ctx_of(struct task_struct *p)
{
	return task_local_of(&task_ctxs, &task_ctx_tids, p);
}

/* The calling thread exits: task storage goes with it, the compat build's entry is dropped so a
 * recycled thread id starts clean. */
static __always_inline void task_ctx_exit(void)
{
	task_local_drop(&task_ctx_tids);
}

#endif /* IOPATH_TASK_BPF_H */
