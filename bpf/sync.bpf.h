/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The synchronous route and the page cache. A direct read or write is one I/O the calling task
 * owns from the syscall's entry to its return; a buffered read, write, copy or sync call is timed
 * whole and its blocked time split by what the disk was doing (disk_busy.bpf.h) and by the
 * scheduler (sched.bpf.h); the page cache's own events (readahead, merges, splits, dirty
 * throttling, --pagecache count) are counted for the call that caused them.
 */
#ifndef IOPATH_SYNC_BPF_H
#define IOPATH_SYNC_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "run.bpf.h"
#include "task.bpf.h"
#include "files.bpf.h"
#include "disk_busy.bpf.h"
#include "io_state.bpf.h"
#include "core_fixes.bpf.h"

#define RWF_HIPRI 0x00000001
/* A buffered read, write or sync call starts: timed here and at the exit, split by the
 * scheduler hooks; no per-I/O slot (its bios, readahead, serve the cache, not this call). */
static __always_inline void pc_start(struct task_ctx *t, enum pc_family family, struct file *f,
				     bool btf)
{
	t->buffered = family;
	t->pc_bios = 0;
	t->own_flushes = 0;
	t->throttling = 0;
	t->throttle_ts = 0;
	t->block_ts = 0;
	t->in_preempt_ts = 0;
	t->runq_from = 0;
	t->waited_ns = 0;
	t->runq_ns = 0;
	t->data_ns = 0;
	t->journal_ns = 0;
	t->jflush_ns = 0;
	t->flush_ns = 0;
	t->throttled_ns = 0;
	/* The disk under the file's file system (a block device file's own: its first bio). */
	t->disk = family == PC_READ ? 0 : (__u64)BPF_CORE_READ(f, f_inode, i_sb, s_bdev, bd_disk);
	/* disk_busy holds a spin lock: 6.1 refuses it in raw_tp programs ("tracing progs cannot
	 * use bpf_spin_lock yet"), so only the tp_btf variants follow a disk. */
	if (btf)
		busy_follow(t->disk);
}

static __always_inline int on_sync_enter(struct task_ctx *t, __u64 fd, __u64 rwf, bool write,
					 bool btf)
{
	struct file *f = fd_file(fd, btf);

	switch (fd_kind(f)) {
	case FD_DIRECT:
		io_claim(bpf_get_current_task(), 0, t->enter_ts, bpf_get_current_pid_tgid() >> 32,
			 MODE_SYNC | ((rwf & RWF_HIPRI) ? RF_HIPRI : 0));
		return 0;
	case FD_BUFFERED:
		/* top / serve show block I/O rows only: the page cache's split is a trace's. */
		if (targ_top)
			return 0;
		pc_start(t, write ? PC_WRITE : PC_READ, f, btf);
		t->sync_write = write && ((BPF_CORE_READ(f, f_flags) & O_DSYNC_FLAG) ||
					  (rwf & (RWF_DSYNC | RWF_SYNC)));
		return 0;
	default:
		return 0;
	}
}

/* copy_file_range / sendfile with a disk file at one end: the kernel reads and writes the page
 * cache itself (cp on Debian 12 copied 32 MiB in 2 such calls and no read or write). Its disk
 * is the destination's, the source's when that is a socket or a pipe (sendfile). */
static __always_inline int on_copy_enter(struct task_ctx *t, __u64 in_fd, __u64 out_fd, bool btf)
{
	struct file *in, *out;

	if (targ_top)
		return 0;
	in = fd_file(in_fd, btf);
	out = fd_file(out_fd, btf);
	if (fd_kind(out) != FD_OTHER)
		pc_start(t, PC_COPY, out, btf);
	else if (fd_kind(in) != FD_OTHER)
		pc_start(t, PC_COPY, in, btf);
	return 0;
}

/* fsync / fdatasync of a disk file, direct or not, or of a directory (SQLite syncs its
 * directory after creating a journal: 201 of its 804 fdatasyncs in a 200-insert run): its own
 * family, not an I/O. */
static __always_inline int on_fsync_enter(struct task_ctx *t, __u64 fd, bool data_only, bool btf)
{
	struct file *f = fd_file(fd, btf);
	bool dir = f && (BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT) == S_IFDIR;

	if (!dir && fd_kind(f) == FD_OTHER)
		return 0;
	pc_start(t, PC_SYNC, f, btf);
	t->sync_call = (data_only ? 2 : 1) | (dir ? 4 : 0);
	return 0;
}

/* A blocked interval of a write or sync call ended at `now`: what the disk was doing meanwhile
 * says what it waited for. The journal and flush integrals first; the rest is its own data I/O
 * if it queued any, else unexplained (a lock, someone else's I/O). */
static __always_inline void pc_blocked(struct task_ctx *t, __u64 now)
{
	__u64 blocked = now - t->block_ts, b[3], j, jf, f, rest;

	if (t->buffered == PC_READ) {
		t->waited_ns += blocked;
		return;
	}
	if (t->throttling) {
		t->throttled_ns += blocked;
		return;
	}
	busy_read(t->disk, now, b);
	j = b[BUSY_J] - t->snap[BUSY_J];
	jf = b[BUSY_JF] - t->snap[BUSY_JF];
	f = b[BUSY_F] - t->snap[BUSY_F];
	/* Integrals and the interval come from the same clock; clamp against wrap-around only. */
	if (j + jf + f > blocked) {
		j = j < blocked ? j : blocked;
		jf = jf < blocked - j ? jf : blocked - j;
		f = blocked - j - jf;
	}
	rest = blocked - j - jf - f;
	t->journal_ns += j + jf;
	t->jflush_ns += jf;
	t->flush_ns += f;
	if (t->pc_bios)
		t->data_ns += rest;
	else
		t->waited_ns += rest;
}

/* A buffered call returned: its time on CPU is what the scheduler did not take. */
static __always_inline void pc_close(struct task_ctx *t, long ret)
{
	__u64 now = bpf_ktime_get_ns(), total = now - t->enter_ts;
	__u64 off =
	    t->waited_ns + t->runq_ns + t->data_ns + t->journal_ns + t->flush_ns + t->throttled_ns;
	enum pc_family family = t->buffered;
	bool write = family == PC_WRITE;
	enum phase base = family == PC_SYNC   ? PH_SYNC
			  : family == PC_COPY ? PH_PC_COPY
			  : write	      ? PH_PC_WRITE
					      : PH_PC_READ;

	t->buffered = PC_NONE;
	if (ret < 0 || off > total)
		return;
	record(base + PCR_TOTAL, total);
	record(base + PCR_CPU, total - off);
	record(base + PCR_WAIT, t->waited_ns);
	record(base + PCR_RUNQ, t->runq_ns);
	if (family != PC_READ) {
		record(base + PCR_DATA, t->data_ns);
		record(base + PCR_JOURNAL, t->journal_ns);
		record(base + PCR_FLUSH, t->flush_ns);
		record(base + PCR_THROTTLED, t->throttled_ns);
		if (t->journal_ns)
			count(C_SYNC_JOURNAL_WAITS, 1);
	}
	if (family == PC_SYNC) {
		record(PH_SYNC_JOURNAL_FLUSH, t->jflush_ns);
		count((t->sync_call & 3) == 2 ? C_FDATASYNCS : C_FSYNCS, 1);
		if (t->sync_call & 4)
			count(C_DIR_SYNCS, 1);
		return;
	}
	if (family == PC_COPY) {
		count(C_PC_BYTES_COPIED, ret);
		return;
	}
	count_route(RK_PAGECACHE, write);
	count(write ? C_PC_BYTES_WRITTEN : C_PC_BYTES_READ, ret);
	if (write && t->sync_write)
		count(C_SYNC_WRITES, 1);
	if (!write && t->waited_ns)
		count(C_PC_READS_WAITED, 1);
	if (!write && t->pc_bios)
		count(C_PC_READS_QUEUED, 1);
}

static __always_inline int on_sync_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	struct io_slot *s;

	if (t) {
		t->in_sys = 0;
		if (t->buffered) {
			pc_close(t, ret);
			return 0;
		}
	}
	s = ios_find(bpf_get_current_task(), 0);
	if (s)
		io_close_slot(s, bpf_ktime_get_ns(), true);
	return 0;
}

/* ---- the page cache's own events, for the call that caused them ---- */

/* A bio of a buffered call merged into a request already queued: fewer, larger requests. */
static __always_inline int bio_merge(void)
{
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(C_PC_MERGES, 1);
	return 0;
}

SEC("tp_btf/block_bio_backmerge")
int BPF_PROG(bio_backmerge, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_merge();
}

SEC("tp_btf/block_bio_frontmerge")
int BPF_PROG(bio_frontmerge, struct bio *bio)
{
	EMPTY_GUARD();
	return bio_merge();
}

/* A bio of a buffered call split in two (larger than the device takes): one more request. */
SEC("tp_btf/block_split")
int BPF_PROG(bio_split, struct bio *bio)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(C_PC_SPLITS, 1);
	return 0;
}

/* Readahead a buffered read started (6.10+ tracepoints). */
static __always_inline int readahead(bool sync)
{
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && t->buffered)
		count(sync ? C_PC_RA_SYNC : C_PC_RA_ASYNC, 1);
	return 0;
}

SEC("tp_btf/page_cache_sync_ra")
int BPF_PROG(ra_sync)
{
	EMPTY_GUARD();
	return readahead(true);
}

SEC("tp_btf/page_cache_async_ra")
int BPF_PROG(ra_async)
{
	EMPTY_GUARD();
	return readahead(false);
}

/* ---- the page cache, counted (--pagecache count) ----
 * One program per read instead of the syscall pair: a cached 4k read cost 0.42 us of BPF with
 * the call split (sys_enter + sys_exit), more than a two-probe bpftrace counter of these same
 * tracepoints (scripts/bench-overhead.sh cached). Counted per CPU; no call is timed. */

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(pcc_get_pages, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	EMPTY_GUARD();
	if (traced(bpf_get_current_pid_tgid() >> 32)) {
		count(C_PCC_READS, 1);
		count(C_PCC_PAGES, last_index - index + 1); /* last_index is the last page read */
	}
	return 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(pcc_add_folio, struct folio *folio)
{
	EMPTY_GUARD();
	if (folio && traced(bpf_get_current_pid_tgid() >> 32))
		count(C_PCC_ADDED, folio_pages(folio));
	return 0;
}

/* A writer is about to sleep for dirty throttling (its arguments differ across kernels: none
 * read). */
SEC("tp_btf/balance_dirty_pages")
int BPF_PROG(dirty_pause)
{
	EMPTY_GUARD();
	struct task_ctx *t;

	if (!enabled || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	t = task_ctx(false);
	if (t && t->in_sys && (t->buffered == PC_WRITE || t->buffered == PC_COPY)) {
		t->throttle_ts = bpf_ktime_get_ns();
		count(C_DIRTY_PAUSES, 1);
	}
	return 0;
}

#endif /* IOPATH_SYNC_BPF_H */
