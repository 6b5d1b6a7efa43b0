/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What an fd or a request's file is: a disk file read directly or through the page cache, or
 * something no disk is behind (a pipe, a socket, /proc). The sync, io_uring and syscall rooms
 * choose a route by it.
 */
#ifndef IOPATH_FILES_BPF_H
#define IOPATH_FILES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "compat.bpf.h"
#include "core_fixes.bpf.h"

#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define S_IFBLK 0060000

/* Only reads and writes of files and block devices are I/O to follow: a pipe or a socket never
 * reaches a disk, and counting them as I/O that "moved no block I/O" would hide the page cache's
 * share. */
#define O_DIRECT_FLAG 040000 /* x86_64 (core_fixes.bpf.h #11: this tool reads x86_64 numbers) */

/* What a sync call's fd is: 0 not a disk file, 1 direct I/O, 2 buffered (the page cache). */
enum fd_kind { FD_OTHER = 0, FD_DIRECT = 1, FD_BUFFERED = 2 };

#define O_DSYNC_FLAG 010000 /* O_SYNC is __O_SYNC | O_DSYNC: this bit is set by both */
#define RWF_DSYNC 0x00000002
#define RWF_SYNC 0x00000004

/* The open file behind `fd`. The task's fd table is walked with plain loads where the program
 * has BTF pointers (tp_btf), probe reads otherwise: four probe reads were a third of sys_enter's
 * 427 ns on a cached buffered read (scripts/bench-overhead.sh cached, --prog-stats). */
static __always_inline struct file *fd_file(__u64 fd, bool btf)
{
	struct task_struct *cur = CURRENT_TASK();
	bool b = btf && TASK_BTF;
	struct fdtable *fdt = b ? cur->files->fdt : BPF_CORE_READ(cur, files, fdt);
	struct file **fds, *f = NULL;

	if (!fdt || fd >= RQ_READ(b, fdt, max_fds))
		return NULL;
	fds = RQ_READ(b, fdt, fd);
	if (bpf_core_read(&f, sizeof(f), &fds[fd & 0xfffff]))
		return NULL;
	return f;
}

/* File systems whose regular files have no page cache behind them: a read of /proc or /sys is
 * not a page-cache hit (the generator reads /proc/thread-self/schedstat; any traced program may
 * read /proc: counted as buffered reads, they made a cold-cache comparison read 100% hits). */
#define PROC_SUPER_MAGIC 0x9fa0
#define SYSFS_MAGIC 0x62656572
#define CGROUP_SUPER_MAGIC 0x27e0eb
#define CGROUP2_SUPER_MAGIC 0x63677270
#define DEBUGFS_MAGIC 0x64626720
#define TRACEFS_MAGIC 0x74726163

static __always_inline bool pseudo_fs(unsigned long magic)
{
	return magic == PROC_SUPER_MAGIC || magic == SYSFS_MAGIC || magic == CGROUP_SUPER_MAGIC ||
	       magic == CGROUP2_SUPER_MAGIC || magic == DEBUGFS_MAGIC || magic == TRACEFS_MAGIC;
}

static __always_inline enum fd_kind fd_kind(struct file *f)
{
	struct inode *inode;
	__u32 mode;

	if (!f)
		return FD_OTHER;
	inode = BPF_CORE_READ(f, f_inode);
	mode = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if (mode != S_IFREG && mode != S_IFBLK)
		return FD_OTHER;
	if (mode == S_IFREG && pseudo_fs(BPF_CORE_READ(inode, i_sb, s_magic)))
		return FD_OTHER;
	return (BPF_CORE_READ(f, f_flags) & O_DIRECT_FLAG) ? FD_DIRECT : FD_BUFFERED;
}

#endif /* IOPATH_FILES_BPF_H */
