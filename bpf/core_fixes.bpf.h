/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every kernel-version difference iopath's BPF side depends on, in one place. Each entry says
 * what changed and where; userspace (src/probe/features.rs) picks tracepoint variants by name
 * and sets the targ_* flags below from the running kernel's BTF before load.
 *
 * 1. io_uring's submit tracepoint was renamed io_uring_submit_sqe -> io_uring_submit_req in 6.4
 *    ("io_uring: rename trace_io_uring_submit_sqe() tracepoint", Breno Leitao). Since 6.0 both
 *    take the io_kiocb as their first argument; uring.bpf.h has one program per name and
 *    userspace autoloads the one this kernel has.
 * 2. io_uring_complete's prototype changed in 6.0 (extra1/extra2 for CQE32) and again in 6.3/6.4
 *    (ctx, req, cqe). The io_kiocb stays the second argument throughout: only that is read.
 * 3. Block tracepoints lost their request_queue argument in 5.11 (Christoph Hellwig's "block:
 *    remove the request_queue argument to the block_* tracepoints" series): block_bio_queue's
 *    and block_split's bio is their second argument before (targ_bio_queue_q, from the kernel's
 *    BTF), read by bio_queue_arg below; block_rq_issue/complete take the request first on every
 *    kernel iopath supports (their queue argument went before 5.10).
 * 4. dma_map_page/dma_unmap_page became dma_map_phys/dma_unmap_phys in 6.17 ("dma-mapping:
 *    convert dma_direct_*map_page to be phys_addr_t based", Leon Romanovsky). Counted by name.
 * 5. sched_switch gained prev_state as its fourth argument in 5.18 (fa2c3254d7cf, "sched/tracing:
 *    Don't re-read p->state when emitting sched_switch event"). iopath reads only `preempt` and
 *    `prev`, the first two arguments in every version.
 * 6. io_kiocb's user_data moved into req->cqe.user_data in 5.19 ("io_uring: add struct
 *    io_cqe ..."); read through a shadow struct below.
 * 7. The dma tracepoints (dma:dma_map_page ...) exist from 6.10 ("dma-mapping: add tracing for
 *    dma-mapping API calls", Sean Anderson): absent on 6.1, counted by name where present.
 * 8. nvme-pci gained queue_rqs (nvme_queue_rqs) in 5.19: plugged batches skip nvme_queue_rq, so
 *    the optional fexit/kprobe doorbell probe sees nothing on kernels that batch io_uring's
 *    submissions (seen on 6.12, not on 6.1); the report says so. Both kernels fire
 *    nvme_setup_cmd before block_rq_issue (nvme_prep_rq maps the data first).
 * 9. io_uring moved each opcode's state into io_kiocb's first member (`cmd`, io_kiocb_to_cmd) in
 *    6.0 ("io_uring: move read/write file prep state into actual opcode handler", Jens Axboe);
 *    the read/write kiocb is io_rw's first member there. A kiocb leads back to its io_kiocb by
 *    those two offsets (both 0 on 6.1 through 6.18), read with CO-RE.
 * 10. PF_IO_WORKER (io_uring's SQ thread and io-wq workers, 5.12) and PF_WQ_WORKER (kworkers) are
 *    #defines, absent from BTF: their values have not changed since.
 * 12. Stacked devices' structures live in their modules' BTF (dm_mod, dm_crypt, raid1, md_mod)
 *    and exist only while those are loaded; block_core.bpf.h reads them behind
 *    bpf_core_type_exists(). md's accounting clone of the original bio is struct md_io_acct
 *    with md_end_io_acct before 6.3 and struct md_io_clone with md_end_clone_io since ("md:
 *    use a new bio_set for md_account_bio", Yu Kuai): both have orig_bio and bio_clone.
 * 11. The I/O syscalls' numbers are x86_64's (arch/x86/entry/syscalls/syscall_64.tbl), the
 *    only architecture the tp_btf syscall programs read registers for.
 * 13. Request flag bits (enum req_flag_bits: __REQ_PREFLUSH, __REQ_FUA) moved as flags were
 *    added and removed (e.g. __REQ_FUA 17 on 6.18); read as CO-RE enum values. REQ_OP_FLUSH
 *    is 2 in the low REQ_OP_BITS (8) since 4.10. A cache flush bio has no data; a flush
 *    request (blk-flush's flush_rq) has no bio.
 * 14. A folio's page count: 1 unless PG_head is set in its flags (the first word of the folio in
 *    every version; a memdesc_flags_t struct since 6.18), then 1 << order, the order kept in
 *    _folio_order before 6.6 ("mm: free up a word in the first tail page", Matthew Wilcox) and in
 *    the low byte of _flags_1 since. PG_head's bit is read as a CO-RE enum value.
 * 15. A task's io (blkio) cgroup: task->cgroups->subsys[io_cgrp_id]->cgroup->kn->id, the
 *    cgroup directory's inode number in its hierarchy (v1 blkio or v2), u64 since 5.5;
 *    io_cgrp_id exists only with CONFIG_BLK_CGROUP (0 then: unknown).
 * 18. enum req_op was enum req_opf before 6.0 ("block: introduce a type for request operations",
 *    Bart Van Assche); the values did not change (REQ_OP_WRITE 1, REQ_OP_FLUSH 2 since 4.10).
 * 19. A bio names its disk through bi_bdev from 5.12 (bi_disk and bi_partno before); a request
 *    through q->disk from 5.14 (rq_disk before, gone in 5.17). Seen on Debian's 5.10.
 * 20. blkdev_dio says a sync direct I/O in its flags (DIO_IS_SYNC) from 5.16, in an is_sync
 *    bitfield before; io_kiocb held each opcode's state in a union whose `rw` member leads with
 *    the kiocb before `cmd` (#9). Seen on Debian's 5.10.
 * 21. A small sync direct I/O on a block device (__blkdev_direct_IO_simple) waited through
 *    blkdev_bio_end_io_simple with the waiting task in bi_private until 5.17 ("block: use
 *    submit_bio_wait ..."? the simple path moved to block/fops.c); since, through
 *    submit_bio_wait's end_io (#17). Seen on Debian's 5.10.
 * 22. A bio's io cgroup: bio->bi_blkg->blkcg->css.cgroup->kn->id (as #15), the cgroup the
 *    block layer charges the bio to: for a flusher's writeback, the cgroup that owns the
 *    inode's pages (cgroup v2 writeback), not the kworker's. bi_blkg exists only with
 *    CONFIG_BLK_CGROUP, and is NULL for a bio not associated yet (0 then: unknown).
 * 23. btrfs sends its bios through fs/btrfs/bio.c (btrfs_simple_end_io and the mirrored write's
 *    two ends) from 6.1 (Debian's 6.1 has it; Christoph Hellwig's "btrfs: split submit_bio"
 * series); 5.10's btrfs_map_bio is another design, not followed (bio_owner.bpf.h gives 0: "not
 *    linked"). Its direct I/O is iomap's bio inside a btrfs_bio, end_io btrfs_dio_end_io and
 *    private the iomap_dio, from 6.3 ("btrfs: pass the iomap bio to btrfs_submit_bio"); on 6.1
 *    btrfs clones it, end_io btrfs_end_dio_bio and private the btrfs_dio_private whose `bio` is
 *    iomap's (its field is `bbio` since). Module types: read behind bpf_core_type_exists().
 */
#ifndef IOPATH_CORE_FIXES_BPF_H
#define IOPATH_CORE_FIXES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* A field of a kernel pointer: a plain load from a BTF pointer (tp_btf), a CO-RE probe read
 * otherwise (raw_tp, the programs kept for kernels and hooks where tp_btf does not load). The
 * flag is constant at each call site, so one branch is emitted. */
#define RQ_READ(btf, p, a) ((btf) ? (p)->a : BPF_CORE_READ(p, a))

struct io_kiocb___old {
	__u64 user_data;
} __attribute__((preserve_access_index));

static __always_inline __u64 io_req_user_data(struct io_kiocb *req)
{
	if (bpf_core_field_exists(req->cqe))
		return BPF_CORE_READ(req, cqe.user_data);
	return BPF_CORE_READ((struct io_kiocb___old *)req, user_data);
}

#define PF_EXITING 0x00000004
#define PF_IO_WORKER 0x00000010
#define PF_WQ_WORKER 0x00000020
#define PF_KTHREAD 0x00200000

struct io_kiocb___rw {
	struct io_rw rw;
} __attribute__((preserve_access_index));

/* Each layout in a subprogram of its own: a guarded offset computed inline was hoisted above its
 * bpf_core_field_exists by clang, and the other layout's poisoned relocation ran (6.18 refused
 * rq_issue_btf for io_kiocb___rw.rw). A call is never hoisted, and the verifier never walks a
 * subprogram behind a branch it knows is dead. */
static __noinline __u64 io_kiocb_of_kiocb_cmd(__u64 iocb)
{
	return iocb - bpf_core_field_offset(struct io_kiocb, cmd) -
	       bpf_core_field_offset(struct io_rw, kiocb);
}

static __noinline __u64 io_kiocb_of_kiocb_rw(__u64 iocb)
{
	return iocb - bpf_core_field_offset(struct io_kiocb___rw, rw) -
	       bpf_core_field_offset(struct io_rw, kiocb);
}

static __always_inline __u64 io_kiocb_of_kiocb(struct kiocb *iocb)
{
	if (bpf_core_field_exists(((struct io_kiocb *)0)->cmd))
		return io_kiocb_of_kiocb_cmd((__u64)iocb);
	/* #20 */
	if (bpf_core_field_exists(((struct io_kiocb___rw *)0)->rw))
		return io_kiocb_of_kiocb_rw((__u64)iocb);
	return 0;
}

struct blkdev_dio___old {
	bool is_sync : 1;
} __attribute__((preserve_access_index));

/* #20 */
static __always_inline bool blkdev_dio_is_sync(struct blkdev_dio *dio)
{
	if (bpf_core_field_exists(dio->flags))
		return BPF_CORE_READ(dio, flags) & DIO_IS_SYNC;
	return BPF_CORE_READ_BITFIELD_PROBED((struct blkdev_dio___old *)dio, is_sync);
}

#define REQ_OP_MASK_BITS 0xff
/* #18: the value of REQ_OP_<name> (its value before 6.0 if enum req_op is absent). */
#define REQ_OP_VALUE(name, old)                                                                    \
	(bpf_core_enum_value_exists(enum req_op, name) ? bpf_core_enum_value(enum req_op, name)    \
						       : (old))

static __always_inline bool bio_is_flush(__u32 opf)
{
	return (opf & REQ_OP_MASK_BITS) == REQ_OP_VALUE(REQ_OP_FLUSH, 2) ||
	       (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)));
}

/* 1: a cache flush request, 2: a FUA write, 0: neither. */
static __always_inline int rq_flush_kind(__u32 opf)
{
	if ((opf & REQ_OP_MASK_BITS) == REQ_OP_VALUE(REQ_OP_FLUSH, 2))
		return 1;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		return 2;
	return 0;
}

struct folio___old {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

static __always_inline __u64 folio_pages(struct folio *folio)
{
	unsigned long flags = 0, order;

	bpf_probe_read_kernel(&flags, sizeof(flags), folio);
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (bpf_core_field_exists(((struct folio___old *)folio)->_folio_order))
		order = BPF_CORE_READ((struct folio___old *)folio, _folio_order);
	else
		order = BPF_CORE_READ(folio, _flags_1) & 0xff;
	return 1UL << (order & 31);
}

static __always_inline __u64 task_io_cgroup(struct task_struct *task)
{
	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, io_cgrp_id))
		return 0;
	return BPF_CORE_READ(task, cgroups,
			     subsys[bpf_core_enum_value(enum cgroup_subsys_id, io_cgrp_id)], cgroup,
			     kn, id);
}

/* #22. Not inlined: the field check must stay around its own read (a hoisted CO-RE offset
 * load fails where the field is absent). */
static __noinline __u64 bio_io_cgroup(struct bio *bio)
{
	if (!bpf_core_field_exists(bio->bi_blkg))
		return 0;
	return BPF_CORE_READ(bio, bi_blkg, blkcg, css.cgroup, kn, id);
}

/* The same from a tp_btf program, whose bio is a BTF pointer: plain loads (a fault reads 0)
 * where each probe read is a helper call. As five probe reads this cost top's block_bio_queue
 * ~150 ns an I/O (loop device, io_uring QD8: 460-490 ns, 306-350 with it stubbed out). Its own
 * function, not a `btf` argument: inside a subprog the flag is no constant, and the raw_tp
 * programs' verifier would see the plain loads. */
static __noinline __u64 bio_io_cgroup_btf(struct bio *bio)
{
	if (!bpf_core_field_exists(bio->bi_blkg))
		return 0;
	return bio->bi_blkg->blkcg->css.cgroup->kn->id;
}

struct dentry___new {
	struct hlist_node d_alias;
} __attribute__((preserve_access_index));

/* The dentry whose d_alias node is `alias` (#16). */
static __always_inline struct dentry *dentry_of_alias(void *alias)
{
	if (bpf_core_field_exists(((struct dentry___new *)0)->d_alias))
		return alias - bpf_core_field_offset(struct dentry___new, d_alias);
	return alias - bpf_core_field_offset(struct dentry, d_u.d_alias);
}

struct bio___old {
	struct gendisk *bi_disk;
	__u8 bi_partno;
} __attribute__((preserve_access_index));

struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* The disk a bio goes to (#19). */
static __always_inline struct gendisk *bio_disk(struct bio *bio)
{
	if (bpf_core_field_exists(bio->bi_bdev))
		return BPF_CORE_READ(bio, bi_bdev, bd_disk);
	return BPF_CORE_READ((struct bio___old *)bio, bi_disk);
}

/* The device number a bio goes to, the kernel's dev_t (major << 20 | minor) (#19); `btf`: bio
 * is a BTF pointer (plain loads). */
static __always_inline __u32 bio_devt(struct bio *bio, bool btf)
{
	struct bio___old *old = (void *)bio;
	struct gendisk *disk;

	if (bpf_core_field_exists(bio->bi_bdev))
		return btf ? bio->bi_bdev->bd_dev : BPF_CORE_READ(bio, bi_bdev, bd_dev);
	disk = BPF_CORE_READ(old, bi_disk);
	return ((__u32)BPF_CORE_READ(disk, major) << 20) |
	       (BPF_CORE_READ(disk, first_minor) + BPF_CORE_READ(old, bi_partno));
}

/* The disk of a request (#19); `btf`: rq is a BTF pointer (plain loads). */
static __always_inline struct gendisk *rq_disk(struct request *rq, bool btf)
{
	if (bpf_core_field_exists(((struct request_queue *)0)->disk))
		return btf ? rq->q->disk : BPF_CORE_READ(rq, q, disk);
	return BPF_CORE_READ((struct request___old *)rq, rq_disk);
}

/* The dev_t of a request's disk (#19), major << 20 | first minor; `btf`: rq is a BTF pointer.
 * Before 5.14 the disk is rq->rq_disk, read with probe reads even from a tp_btf program (a BTF load
 * through the shadow type would name a member the running kernel's struct lacks after 5.17). */
static __always_inline __u32 rq_devt(struct request *rq, bool btf)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(((struct request_queue *)0)->disk)) {
		if (btf) {
			disk = rq->q->disk;
			return ((__u32)disk->major << 20) | disk->first_minor;
		}
		disk = BPF_CORE_READ(rq, q, disk);
	} else {
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	}
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | BPF_CORE_READ(disk, first_minor);
}

/* block_bio_queue's (and block_split's) bio (#3): the first argument from 5.11, the second before
 * (request_queue, bio). One load or the other, never a computed offset, which the verifier refuses
 * on a context; `q_first` is the object's rodata flag, constant where this is inlined. */
static __always_inline struct bio *bio_queue_arg(unsigned long long *ctx, bool q_first)
{
	struct bio *bio;

	if (q_first) {
		bio = (struct bio *)ctx[1];
		barrier_var(bio);
	} else {
		bio = (struct bio *)ctx[0];
	}
	return bio;
}

#endif /* IOPATH_CORE_FIXES_BPF_H */
