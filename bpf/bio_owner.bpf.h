/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which I/O a bio belongs to, told by its end_io: iomap's and the block device's direct I/O (an
 * io_uring or aio kiocb), a task waiting for its sync I/O, the splits and stacked devices' clones
 * it came from (dm, dm-crypt, raid1, md). The block core's one question, asked from whatever
 * context a bio moves in.
 */
#ifndef IOPATH_BIO_OWNER_BPF_H
#define IOPATH_BIO_OWNER_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "compat.bpf.h"
#include "core_fixes.bpf.h"
#include "run.bpf.h"
#include "top.bpf.h"

/* A bio leads to its parent through at most this many hops: splits (bio_chain) and the clones of
 * stacked devices (dm over dm-crypt over a split ...). */
#define MAX_CHAIN 6

/*
 * Stacked devices' own structures, from their modules' BTF (CO-RE; the ___iopath suffix is
 * dropped when matching). Only the fields read are named. Where a module is not loaded its type
 * does not exist, and bpf_core_type_exists() makes the branch that reads it dead code, so the
 * program still loads (core_fixes.bpf.h #12).
 */
struct dm_io___iopath {
	struct bio *orig_bio;
} __attribute__((preserve_access_index));

struct dm_target_io___iopath {
	struct dm_io___iopath *io;
	struct bio clone;
} __attribute__((preserve_access_index));

struct dm_crypt_io___iopath {
	struct bio *base_bio;
} __attribute__((preserve_access_index));

struct r1bio___iopath {
	struct bio *master_bio;
} __attribute__((preserve_access_index));

struct md_io_clone___iopath {
	struct bio *orig_bio;
	struct bio bio_clone;
} __attribute__((preserve_access_index));

struct md_io_acct___iopath {
	struct bio *orig_bio;
	struct bio bio_clone;
} __attribute__((preserve_access_index));

/*
 * btrfs's bios (fs/btrfs/bio.c, 6.1+): every bio it sends to a device is the one embedded in a
 * btrfs_bio, whose own end_io and private say what it is for; the bio's bi_end_io is btrfs's
 * (btrfs_simple_end_io, or one of the two ends of a mirrored write, the stripe in bi_private).
 * A part btrfs split off at a stripe boundary has no end_io of its own, its private the btrfs_bio
 * it was split from. Its direct I/O: the btrfs_bio iomap allocated, end_io btrfs_dio_end_io and
 * private the iomap_dio (6.3+); on 6.1 a clone of it, end_io btrfs_end_dio_bio and private the
 * btrfs_dio_private that embeds iomap's bio (core_fixes.bpf.h #23).
 */
struct btrfs_bio___iopath {
	void *end_io;
	void *private;
	struct work_struct end_io_work;
	struct bio bio;
} __attribute__((preserve_access_index));

struct btrfs_io_context___iopath {
	struct bio *orig_bio;
} __attribute__((preserve_access_index));

struct btrfs_io_stripe___iopath {
	struct btrfs_io_context___iopath *bioc;
} __attribute__((preserve_access_index));

struct btrfs_dio_private___iopath {
	struct bio bio;
} __attribute__((preserve_access_index));

static __always_inline bool btrfs_end_io(__u64 end_io)
{
	return end_io &&
	       (end_io == targ_btrfs_simple_end_io || end_io == targ_btrfs_orig_write_end_io ||
		end_io == targ_btrfs_clone_write_end_io);
}

/* The iomap_dio a btrfs device bio (bi_end_io one of btrfs's: btrfs_end_io) carries out, as a
 * number (0: not a direct I/O's). Not inlined: every bio owner's caller would grow by it. */
static __noinline __u64 btrfs_dio_of(__u64 bio_addr, __u64 end_io)
{
	struct bio *bio = (void *)bio_addr;
	struct btrfs_bio___iopath *bb;
	__u64 off, done;

	if (!bpf_core_type_exists(struct btrfs_bio___iopath) || !bio)
		return 0;
	/* A mirrored write's copy for another device: the stripe leads to the original. */
	if (end_io == targ_btrfs_clone_write_end_io) {
		struct btrfs_io_stripe___iopath *st = BPF_CORE_READ(bio, bi_private);

		bio = BPF_CORE_READ(st, bioc, orig_bio);
	}
	off = bpf_core_field_offset(struct btrfs_bio___iopath, bio);
	bb = (void *)((char *)bio - off);
	done = (__u64)BPF_CORE_READ(bb, end_io);
	/* A part split off: the btrfs_bio it came from holds the I/O. */
	if (!done) {
		bb = BPF_CORE_READ(bb, private);
		done = (__u64)BPF_CORE_READ(bb, end_io);
	}
	if (done && done == targ_btrfs_dio_end_io)
		return (__u64)BPF_CORE_READ(bb, private);
	if (done && done == targ_btrfs_end_dio_bio &&
	    bpf_core_field_exists(struct btrfs_dio_private___iopath, bio)) {
		struct btrfs_dio_private___iopath *dip = BPF_CORE_READ(bb, private);

		return (__u64)BPF_CORE_READ(dip, bio.bi_private);
	}
	return 0;
}

/* The bio a clone or split came from (NULL: no clone iopath knows). `*stacked` is set when the
 * hop crossed a stacked device (a split stays on its device). */
static __always_inline struct bio *bio_parent(struct bio *bio, __u64 end_io, bool *stacked)
{
	if (end_io == targ_chain_end_io)
		return BPF_CORE_READ(bio, bi_private);
	/* dm core: the clone sits in a dm_target_io whose dm_io holds the original bio. */
	if (end_io == targ_dm_end_io && bpf_core_type_exists(struct dm_target_io___iopath)) {
		struct dm_target_io___iopath *tio =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct dm_target_io___iopath, clone));

		*stacked = true;
		return BPF_CORE_READ(tio, io, orig_bio);
	}
	/* dm-crypt: its clone's bi_private is the dm_crypt_io of the bio dm handed it. */
	if (end_io == targ_crypt_end_io && bpf_core_type_exists(struct dm_crypt_io___iopath)) {
		struct dm_crypt_io___iopath *io = BPF_CORE_READ(bio, bi_private);

		*stacked = true;
		return BPF_CORE_READ(io, base_bio);
	}
	/* md raid1: each leg's bio points at the r1bio of the bio md was given. */
	if ((end_io == targ_raid1_read_end_io || end_io == targ_raid1_write_end_io) &&
	    bpf_core_type_exists(struct r1bio___iopath)) {
		struct r1bio___iopath *r1 = BPF_CORE_READ(bio, bi_private);

		*stacked = true;
		return BPF_CORE_READ(r1, master_bio);
	}
	/* md's accounting clone of the original bio: md_io_clone (6.3+), md_io_acct before. */
	if (end_io == targ_md_clone_end_io && bpf_core_type_exists(struct md_io_clone___iopath)) {
		struct md_io_clone___iopath *c =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct md_io_clone___iopath, bio_clone));

		*stacked = true;
		return BPF_CORE_READ(c, orig_bio);
	}
	if (end_io == targ_md_clone_end_io && bpf_core_type_exists(struct md_io_acct___iopath)) {
		struct md_io_acct___iopath *c =
		    (void *)((char *)bio -
			     bpf_core_field_offset(struct md_io_acct___iopath, bio_clone));

		*stacked = true;
		return BPF_CORE_READ(c, orig_bio);
	}
	return NULL;
}

/* The I/O a direct-I/O kiocb belongs to: the kiocb itself is the io_kiocb's first member for
 * io_uring; aio's sits at offset 0 of the aio_kiocb, whose user iocb and kioctx name it. */
static __always_inline __u64 io_key_of_kiocb_done(struct kiocb *iocb, __u64 done, __u32 *disc,
						  struct aio_kiocb **aio)
{
	if (done && done == targ_aio_complete) {
		struct aio_kiocb *a = (void *)iocb;

		*aio = a;
		*disc = (__u32)(__u64)BPF_CORE_READ(a, ki_ctx);
		return BPF_CORE_READ(a, ki_res.obj);
	}
	return io_kiocb_of_kiocb(iocb);
}

static __always_inline __u64 io_key_of_kiocb(struct kiocb *iocb, __u32 *disc,
					     struct aio_kiocb **aio)
{
	return io_key_of_kiocb_done(iocb, (__u64)BPF_CORE_READ(iocb, ki_complete), disc, aio);
}

/*
 * The key of the I/O a bio belongs to (0: not an application direct I/O iopath follows). Which
 * structure holds the owner is told by the bio's end_io: iomap (ext4, xfs files) and the block
 * device's own direct I/O; sync I/O is owned by the task that waits for it. Splits and stacked
 * devices' clones are walked back to the bio the application's I/O made (`*stacked`: through a
 * stacked device).
 */
static __always_inline __u64 io_owner_of_bio(struct bio *bio, __u32 *disc, bool *stacked,
					     struct aio_kiocb **aio, struct bio **root, __u64 *inst)
{
	__u64 end_io = 0;
	struct bio *up;
	int i;

	*disc = 0;
	*stacked = false;
	*aio = NULL;
	for (i = 0; i < MAX_CHAIN; i++) {
		*root = bio;
		end_io = (__u64)BPF_CORE_READ(bio, bi_end_io);
		if (!end_io)
			return 0;
		up = bio_parent(bio, end_io, stacked);
		if (!up)
			break;
		bio = up;
	}
	*root = bio;
	/* The request's own instance: its bio, unless several bios share one dio. */
	*inst = (__u64)bio;
	if (end_io == targ_iomap_end_io || btrfs_end_io(end_io)) {
		struct iomap_dio *dio = end_io == targ_iomap_end_io
					    ? BPF_CORE_READ(bio, bi_private)
					    : (void *)btrfs_dio_of((__u64)bio, end_io);
		struct kiocb *iocb;
		__u64 done;

		if (!dio)
			return 0;
		iocb = BPF_CORE_READ(dio, iocb);
		done = (__u64)BPF_CORE_READ(iocb, ki_complete);

		/* A freed dio's address is soon another's: its file position tells them apart
		 * (top's instances only: a probe read a trace's issue and completion need not pay).
		 */
		if (targ_top)
			*inst = (__u64)dio ^ ((__u64)BPF_CORE_READ(iocb, ki_pos) << 20);
		if (!done)
			return (__u64)BPF_CORE_READ(dio, submit.waiter);
		return io_key_of_kiocb_done(iocb, done, disc, aio);
	}
	if (end_io == targ_blkdev_end_io_async) {
		struct blkdev_dio *dio =
		    (void *)((char *)bio - bpf_core_field_offset(struct blkdev_dio, bio));

		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc, aio);
	}
	if (end_io == targ_blkdev_end_io) {
		struct blkdev_dio *dio = BPF_CORE_READ(bio, bi_private);

		*inst = (__u64)dio;
		if (blkdev_dio_is_sync(dio))
			return (__u64)BPF_CORE_READ(dio, waiter);
		return io_key_of_kiocb(BPF_CORE_READ(dio, iocb), disc, aio);
	}
	/* A block device's small sync direct I/O waits in submit_bio_wait on its own stack: the
	 * waiter is the task submitting it. From a kworker (blk-throttle's release, dm-crypt's
	 * workers) the owner cannot be told: not followed. */
	/* Before 5.17 (core_fixes.bpf.h #21): the waiting task is in bi_private, any context. */
	if (end_io == targ_blkdev_simple_end_io)
		return (__u64)BPF_CORE_READ(bio, bi_private);
	if (end_io == targ_bio_wait_end_io && !(CURRENT_FLAGS() & (PF_WQ_WORKER | PF_IO_WORKER)))
		return bpf_get_current_task();
	return 0;
}

/* io-wq's worker (io_uring/io-wq.c): the work it runs is a request's io_wq_work. */
struct io_worker___iopath {
	struct io_wq_work *cur_work;
} __attribute__((preserve_access_index));

struct task_struct___worker {
	void *worker_private;
} __attribute__((preserve_access_index));

/*
 * The I/O the current thread is carrying out, for a bio no end_io leads back to (0: none): the
 * request an io-wq worker runs (its worker's cur_work, 6.0+: worker_private), else the thread's
 * own sync direct I/O (keyed by the task; a slot exists only while such a call is in flight). A
 * file system that sends a direct I/O another way queues its bios from that thread: btrfs writes
 * O_DIRECT data to a checksummed file through the page cache and flushes it in the call (kernel
 * commit 968f19c5b1b7: 26046 of 26046 psync writes here, one writeback bio each). The key is the
 * route's own (an io_kiocb's address, the task's), disc 0. Not inlined: on_bio_queue is at the
 * compat build's budget.
 */
static __noinline __u64 io_key_of_thread(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct io_worker___iopath *w;
	struct io_wq_work *work;

	if (!(BPF_CORE_READ(task, flags) & PF_IO_WORKER))
		return (__u64)task;
	if (!bpf_core_field_exists(struct task_struct___worker, worker_private) ||
	    !bpf_core_type_exists(struct io_worker___iopath))
		return 0;
	w = BPF_CORE_READ((struct task_struct___worker *)task, worker_private);
	work = BPF_CORE_READ(w, cur_work);
	if (!work)
		return 0;
	return (__u64)work - bpf_core_field_offset(struct io_kiocb, work);
}

/* The key of the I/O a bio belongs to (io_owner_of_bio). iopath top and serve also count every
 * bio of no followed I/O (readahead, writeback, the journal, a direct I/O path iopath does not
 * know) as an I/O of its own, keyed by the bio its splits and clones lead back to. */
static __always_inline __u64 io_key_of_bio_inst(struct bio *bio, __u32 *disc, bool *stacked,
						struct aio_kiocb **aio, struct bio **root,
						__u64 *inst)
{
	__u64 key = io_owner_of_bio(bio, disc, stacked, aio, root, inst);

	if (!key && targ_top && *root) {
		*disc = BIO_DISC;
		key = (__u64)*root;
		*inst = key;
	}
	return key;
}

static __always_inline __u64 io_key_of_bio(struct bio *bio, __u32 *disc, bool *stacked,
					   struct aio_kiocb **aio)
{
	struct bio *root = NULL;
	__u64 inst = 0;

	return io_key_of_bio_inst(bio, disc, stacked, aio, &root, &inst);
}

#endif /* IOPATH_BIO_OWNER_BPF_H */
