/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The system calls where an application submits and reaps: raw_syscalls' pair (or, in top and
 * serve where fentry works, the positional sync calls' own functions) dispatched by number to the
 * io_uring, aio and sync rooms, and each traced thread's calls counted.
 */
#ifndef IOPATH_SYSCALLS_BPF_H
#define IOPATH_SYSCALLS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "run.bpf.h"
#include "task.bpf.h"
#include "files.bpf.h"
#include "cq_ring.bpf.h"
#include "uring.bpf.h"
#include "aio.bpf.h"
#include "sync.bpf.h"

/* System calls of the traced threads, by number (x86_64). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SYSCALL_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} syscalls SEC(".maps");

/* x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl; core_fixes.bpf.h #11). */
#define NR_READ 0
#define NR_WRITE 1
#define NR_PREAD64 17
#define NR_PWRITE64 18
#define NR_READV 19
#define NR_WRITEV 20
#define NR_SENDFILE 40
#define NR_FSYNC 74
#define NR_FDATASYNC 75
#define NR_IO_GETEVENTS 208
#define NR_IO_SUBMIT 209
#define NR_PREADV 295
#define NR_PWRITEV 296
#define NR_COPY_FILE_RANGE 326
#define NR_PREADV2 327
#define NR_PWRITEV2 328
#define NR_IO_PGETEVENTS 333
#define NR_IO_URING_ENTER 426
#define NR_EXIT 60
#define NR_EXIT_GROUP 231

static __always_inline bool sync_syscall(long id)
{
	return id == NR_PREAD64 || id == NR_PWRITE64 || id == NR_READ || id == NR_WRITE ||
	       id == NR_READV || id == NR_WRITEV || id == NR_PREADV || id == NR_PWRITEV ||
	       id == NR_PREADV2 || id == NR_PWRITEV2;
}

static __always_inline bool write_syscall(long id)
{
	return id == NR_WRITE || id == NR_PWRITE64 || id == NR_WRITEV || id == NR_PWRITEV ||
	       id == NR_PWRITEV2;
}

static __always_inline bool io_syscall(long id)
{
	return id == NR_IO_URING_ENTER || id == NR_IO_SUBMIT || id == NR_IO_GETEVENTS ||
	       id == NR_IO_PGETEVENTS || id == NR_FSYNC || id == NR_FDATASYNC ||
	       id == NR_COPY_FILE_RANGE || id == NR_SENDFILE || sync_syscall(id);
}

static __always_inline void count_syscall(long id)
{
	__u32 k = id;
	__u64 *v;

	if (k >= NR_SYSCALL_SLOTS)
		return;
	v = bpf_map_lookup_elem(&syscalls, &k);
	if (v)
		*v += 1;
}

/* A syscall's arguments: direct loads from a BTF pt_regs (tp_btf), CO-RE reads otherwise. The
 * flag is a constant at each call site, so the other branch is never emitted. */
#define SYS_ARG(regs, reg, btf) ((btf) ? (__u64)(regs)->reg : (__u64)BPF_CORE_READ(regs, reg))

static __always_inline int on_sys_enter(struct pt_regs *regs, long id, bool btf)
{
	struct task_ctx *t;

	/* Without the per-syscall counts (iopath top / serve: every process on the host makes
	 * syscalls through this hook), a call that can be no I/O returns before any lookup. */
	if (!targ_syscalls && !io_syscall(id) && id != NR_EXIT && id != NR_EXIT_GROUP)
		return 0;
	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* Every thread of a traced process gets its context at its first syscall, and with it
	 * whether it is one of iopath's own (excluded_tids, looked up once instead of on every
	 * syscall: a hash lookup per call). */
	t = task_ctx(true);
	if (!t)
		return 0;
	if (!t->own) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();

		t->own = bpf_map_lookup_elem(&excluded_tids, &tid) ? 2 : 1;
	}
	if (t->own == 2)
		return 0;
	if (targ_syscalls)
		count_syscall(id);
	if (id == NR_EXIT || id == NR_EXIT_GROUP) {
		/* The last look: the CQEs it took after its last io_uring_enter (fio's final reap),
		 * while its ring is still there (its files close later in do_exit). */
		ring_look(t->ring, bpf_ktime_get_ns());
		task_ctx_exit();
		return 0;
	}
	if (!io_syscall(id))
		return 0;
	t->enter_ts = bpf_ktime_get_ns();
	t->in_sys = 1;
	switch (id) {
	case NR_IO_URING_ENTER:
		t->in_submit = 1;
		t->sqes = 0;
		/* (fd, to_submit, min_complete, flags, ...): a registered ring's fd is an index.
		 * Once a thread, as at submit: the fd walk is five reads. */
		if (!t->ring && !(SYS_ARG(regs, r10, btf) & IORING_ENTER_REGISTERED_RING)) {
			__u64 ring = ring_of_file(fd_file(SYS_ARG(regs, di, btf), btf));

			if (ring)
				t->ring = ring;
		}
		ring_look(t->ring, t->enter_ts);
		return 0;
	case NR_IO_SUBMIT:
		t->in_submit = 1;
		return on_aio_submit_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, si, btf),
					   SYS_ARG(regs, dx, btf));
	case NR_IO_GETEVENTS:
	case NR_IO_PGETEVENTS:
		/* The user's io_event array is the fourth argument (r10 stands in for rcx). */
		t->aio_events = SYS_ARG(regs, r10, btf);
		task_aio_disc(t, SYS_ARG(regs, di, btf));
		return 0;
	case NR_PREADV2:
	case NR_PWRITEV2:
		return on_sync_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, r9, btf),
				     id == NR_PWRITEV2, btf);
	case NR_FSYNC:
	case NR_FDATASYNC:
		return on_fsync_enter(t, SYS_ARG(regs, di, btf), id == NR_FDATASYNC, btf);
	case NR_COPY_FILE_RANGE:
		/* (fd_in, off_in, fd_out, off_out, len, flags) */
		return on_copy_enter(t, SYS_ARG(regs, di, btf), SYS_ARG(regs, dx, btf), btf);
	case NR_SENDFILE:
		/* (out_fd, in_fd, offset, count) */
		return on_copy_enter(t, SYS_ARG(regs, si, btf), SYS_ARG(regs, di, btf), btf);
	default:
		return on_sync_enter(t, SYS_ARG(regs, di, btf), 0, write_syscall(id), btf);
	}
}

static __always_inline int on_sys_exit(struct pt_regs *regs, long id, long ret, bool btf)
{
	if (!io_syscall(id) || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (targ_aio_at_bio) {
		/* --lean aio has no sys_enter hook: io_getevents' arguments are still in the
		 * registers at its exit (the return value went to ax). */
		struct task_ctx *t;

		if (id != NR_IO_GETEVENTS && id != NR_IO_PGETEVENTS)
			return 0;
		t = task_ctx(true);
		if (!t)
			return 0;
		t->aio_events = SYS_ARG(regs, r10, btf);
		task_aio_disc(t, SYS_ARG(regs, di, btf));
		return on_getevents_exit(ret);
	}
	if (id == NR_IO_URING_ENTER)
		return on_uring_exit();
	if (id == NR_IO_SUBMIT)
		return on_aio_submit_exit(ret);
	if (id == NR_IO_GETEVENTS || id == NR_IO_PGETEVENTS)
		return on_getevents_exit(ret);
	return on_sync_exit(ret);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(regs, id, true);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(regs, regs->orig_ax, ret, true);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter_raw, struct pt_regs *regs, long id)
{
	EMPTY_GUARD();
	return on_sys_enter(regs, id, false);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	EMPTY_GUARD();
	return on_sys_exit(regs, BPF_CORE_READ(regs, orig_ax), ret, false);
}

/*
 * top / serve where fentry works: the positional sync calls hooked on their own kernel functions
 * (__x64_sys_pread64 ...; the target is set at load from the hook table), so only those calls pay
 * and a direct pread is timed from its entry to its return, as a trace does through the
 * raw_syscalls pair that every system call of every process would pay for. The wrapper's one
 * argument is the user's pt_regs, the same the sys_enter tracepoint hands over.
 */
#define SYNC_FENTRY(name, nr)                                                                      \
	SEC("fentry")                                                                              \
	int BPF_PROG(fentry_##name, struct pt_regs *regs)                                          \
	{                                                                                          \
		EMPTY_GUARD();                                                                     \
		return on_sys_enter(regs, nr, true);                                               \
	}                                                                                          \
	SEC("fexit")                                                                               \
	int BPF_PROG(fexit_##name, struct pt_regs *regs, long ret)                                 \
	{                                                                                          \
		EMPTY_GUARD();                                                                     \
		return on_sys_exit(regs, nr, ret, true);                                           \
	}

SYNC_FENTRY(pread64, NR_PREAD64)
SYNC_FENTRY(pwrite64, NR_PWRITE64)
SYNC_FENTRY(preadv, NR_PREADV)
SYNC_FENTRY(pwritev, NR_PWRITEV)
SYNC_FENTRY(preadv2, NR_PREADV2)
SYNC_FENTRY(pwritev2, NR_PWRITEV2)

#endif /* IOPATH_SYSCALLS_BPF_H */
