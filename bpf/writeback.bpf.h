/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writeback of the pages the traced processes dirtied, whoever writes them: the flushers
 * (kworkers running wb_writeback for a reason: background, periodic, sync ...), a sync call,
 * reclaim. A file enters wb_files when a traced process dirties its first page
 * (writeback_dirty_folio, in the dirtier's context: its pid, comm and io cgroup are the
 * dirtier's); from then its write bios on its own disk are counted by why they were written,
 * and its write requests timed from their own stamps. Its hooks, and jbd2's commits, are here.
 */
#ifndef IOPATH_WRITEBACK_BPF_H
#define IOPATH_WRITEBACK_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "run.bpf.h"
#include "disk_busy.bpf.h"
#include "io_state.bpf.h"
#include "core_fixes.bpf.h"

/* 4096 files: a database's data and WAL files, a build tree's outputs; more are counted
 * (C_WB_FILES_FULL), not followed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* the inode */
	__type(value, struct wb_file);
} wb_files SEC(".maps");

/* A flusher thread inside wb_writeback: its work's reason (writeback_start -> _written). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tid */
	__type(value, __u32);
} wb_work SEC(".maps");

/* Writeback requests in flight, issue -> complete. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64); /* the request */
	__type(value, struct wb_rq);
} wb_rqs SEC(".maps");

/* Set once a traced process dirtied a page: until then the block hooks skip all of this. */
static volatile bool wb_active;

#define PAGE_MAPPING_FLAGS 3UL /* anon / movable bits in page->mapping */

/* The file of a bio's first page, if a file's page cache holds it (0 otherwise). */
static __always_inline __u64 bio_file(struct bio *bio)
{
	struct page *page = BPF_CORE_READ(bio, bi_io_vec, bv_page);
	unsigned long mapping;

	if (!page)
		return 0;
	mapping = (unsigned long)BPF_CORE_READ(page, mapping);
	if (!mapping || (mapping & PAGE_MAPPING_FLAGS))
		return 0;
	return (__u64)BPF_CORE_READ((struct address_space *)mapping, host);
}

/* The followed file whose page leads `bio`, if it is on its own file system's disk `disk` (a
 * loop device's I/O to its backing file carries the same pages to the disk below: counted
 * once). A block device file's inode has no s_bdev (its pseudo file system): any disk. */
static __always_inline __u64 wb_followed(struct bio *bio, struct gendisk *disk)
{
	__u64 inode = bio_file(bio);
	struct gendisk *home;

	if (!inode || !bpf_map_lookup_elem(&wb_files, &inode))
		return 0;
	home = BPF_CORE_READ((struct inode *)inode, i_sb, s_bdev, bd_disk);
	return !home || home == disk ? inode : 0;
}

/* A traced process made a folio dirty. */
static __always_inline int on_dirty_folio(struct folio *folio, struct address_space *mapping)
{
	__u64 inode = (__u64)BPF_CORE_READ(mapping, host), pages = folio_pages(folio);
	struct wb_file *f, init = {};
	struct task_struct *task;
	struct hlist_node *alias;
	struct dentry *d;

	if (!inode)
		return 0;
	count(C_WB_DIRTIED, pages);
	f = bpf_map_lookup_elem(&wb_files, &inode);
	if (f) {
		__sync_fetch_and_add(&f->dirtied, pages);
		return 0;
	}
	task = (struct task_struct *)bpf_get_current_task();
	init.ino = BPF_CORE_READ((struct inode *)inode, i_ino);
	init.dev = BPF_CORE_READ((struct inode *)inode, i_sb, s_dev);
	init.tgid = bpf_get_current_pid_tgid() >> 32;
	init.cgroup = task_io_cgroup(task);
	init.dirtied = pages;
	bpf_get_current_comm(init.comm, sizeof(init.comm));
	/* The name of one of its links (i_dentry lists the dentries of an inode). */
	alias = BPF_CORE_READ((struct inode *)inode, i_dentry.first);
	if (alias) {
		d = dentry_of_alias(alias);
		bpf_probe_read_kernel_str(init.name, sizeof(init.name),
					  BPF_CORE_READ(d, d_name.name));
	}
	if (bpf_map_update_elem(&wb_files, &inode, &init, BPF_NOEXIST) == -7 /* -E2BIG: full */)
		count(C_WB_FILES_FULL, 1);
	wb_active = true;
	return 0;
}

/* A write bio is queued: one of our files' pages on its own disk (a loop device's backing-file
 * I/O carries the same pages to the disk below: not counted twice). `sync_call`: the current
 * task is inside a sync call or an O_SYNC write. */
static __always_inline void wb_bio_queue(struct bio *bio, bool sync_call)
{
	__u64 inode, size;
	__u32 tid, *reason, why;
	struct wb_file *f;

	if (!wb_active ||
	    (BPF_CORE_READ(bio, bi_opf) & REQ_OP_MASK_BITS) != REQ_OP_VALUE(REQ_OP_WRITE, 1))
		return;
	inode = wb_followed(bio, bio_disk(bio));
	f = inode ? bpf_map_lookup_elem(&wb_files, &inode) : NULL;
	if (!f)
		return;
	tid = (__u32)bpf_get_current_pid_tgid();
	reason = bpf_map_lookup_elem(&wb_work, &tid);
	why = reason	  ? (*reason < WBW_KERNEL_REASONS ? *reason : WBW_OTHER)
	      : sync_call ? WBW_SYNC_CALL
			  : WBW_OTHER;
	size = BPF_CORE_READ(bio, bi_iter.bi_size);
	if (why < NR_WB_WHY)
		__sync_fetch_and_add(&f->bytes[why], size);
	__sync_fetch_and_add(&f->bios, 1);
	count(C_WB_BYTES, size);
}

/* A request is issued: a write whose first bio is one of our files' is timed. */
static __always_inline void wb_rq_issue(struct request *rq, struct bio *bio, __u64 now)
{
	struct wb_rq w = {};

	if (!wb_active ||
	    (BPF_CORE_READ(rq, cmd_flags) & REQ_OP_MASK_BITS) != REQ_OP_VALUE(REQ_OP_WRITE, 1))
		return;
	w.file = wb_followed(bio, rq_disk(rq, false));
	if (!w.file)
		return;
	w.issue_ts = now;
	w.alloc_ts = BPF_CORE_READ(rq, start_time_ns);
	bpf_map_update_elem(&wb_rqs, &rq, &w, BPF_ANY);
}

/* `opf`: the request's cmd_flags, read by the caller (a plain load under tp_btf). Only writes
 * are looked up: a hash miss on every read's completion would tax the direct routes too once
 * any traced process dirtied a page. */
static __always_inline void wb_rq_complete(struct request *rq, __u32 opf, __u64 now)
{
	__u64 key = (__u64)rq, block = 0, device;
	struct wb_rq *w;
	struct wb_file *f;

	if (!wb_active || (opf & REQ_OP_MASK_BITS) != REQ_OP_VALUE(REQ_OP_WRITE, 1))
		return;
	w = bpf_map_lookup_elem(&wb_rqs, &key);
	if (!w)
		return;
	device = now - w->issue_ts;
	if (w->alloc_ts && w->alloc_ts < w->issue_ts)
		block = w->issue_ts - w->alloc_ts;
	f = bpf_map_lookup_elem(&wb_files, &w->file);
	if (f) {
		__sync_fetch_and_add(&f->rqs, 1);
		__sync_fetch_and_add(&f->block_ns, block);
		__sync_fetch_and_add(&f->device_ns, device);
	}
	if (w->alloc_ts)
		record(PH_WB_BLOCK, block);
	record(PH_WB_DEVICE, device);
	bpf_map_delete_elem(&wb_rqs, &key);
}

/* A flusher starts / ends a piece of wb_writeback work: bios between are written for its reason. */
static __always_inline void wb_work_start(struct wb_writeback_work *work)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), reason;

	if (!wb_active)
		return;
	reason = BPF_CORE_READ(work, reason);
	bpf_map_update_elem(&wb_work, &tid, &reason, BPF_ANY);
}

static __always_inline void wb_work_end(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (wb_active)
		bpf_map_delete_elem(&wb_work, &tid);
}

/* ---- entry points ---- */

/* ---- what a write or sync call waits for: journal commits and dirty throttling ---- */

/* jbd2 (ext4's journal) commits a transaction: the disk of the file system it journals. */
SEC("tp_btf/jbd2_start_commit")
int BPF_PROG(jbd2_start_commit, journal_t *journal)
{
	EMPTY_GUARD();
	if (enabled)
		busy_change((__u64)journal->j_fs_dev->bd_disk, true, 1);
	return 0;
}

SEC("tp_btf/jbd2_end_commit")
int BPF_PROG(jbd2_end_commit, journal_t *journal)
{
	EMPTY_GUARD();
	__u64 took;

	if (!enabled)
		return 0;
	took = busy_change((__u64)journal->j_fs_dev->bd_disk, true, -1);
	if (took) {
		count(C_JBD2_COMMITS, 1);
		count(C_JBD2_COMMIT_NS, took);
	}
	return 0;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(wb_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	EMPTY_GUARD();
	/* tp_btf pointers may be NULL: checked before any CO-RE read offsets them. */
	if (!enabled || !folio || !mapping || !traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* iopath's own threads (the --events-out writer) are not the workload: a direct read job
	 * had "dirtied 256 pages", its own events file's. */
	if (!not_ours((__u32)bpf_get_current_pid_tgid()))
		return 0;
	return on_dirty_folio(folio, mapping);
}

SEC("tp_btf/writeback_start")
int BPF_PROG(wb_start, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	EMPTY_GUARD();
	if (enabled && work)
		wb_work_start(work);
	return 0;
}

SEC("tp_btf/writeback_written")
int BPF_PROG(wb_written, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	EMPTY_GUARD();
	if (enabled)
		wb_work_end();
	return 0;
}

#endif /* IOPATH_WRITEBACK_BPF_H */
