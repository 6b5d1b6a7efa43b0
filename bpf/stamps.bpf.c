// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one-hook tier of top and serve: the block and device phases of every request from one
 * program at block_rq_complete, reading the request's own clock. The full phase set (phases.bpf.c)
 * costs five hooks and ~1 us of BPF an I/O; this costs one and no state shared between CPUs.
 *
 * The kernel's stamps lie in known cases (since 6.9 a plug's cached clock, stale across
 * preemption until a 6.18-stable fix; io_start_time_ns only while the queue keeps stats;
 * start_time_ns only with iostats on since 6.13), so a device's stamps are used only after a
 * check: while userspace holds a check window open, block_bio_queue and block_rq_issue record
 * hooked times and the completion compares each stamp with the hooked time of the same request
 * (stamps_check). Userspace then sets the device's mode: a stamp trusted, or that phase timed by
 * its hook (kept attached) from then on.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "phases.h"
#include "hist.bpf.h"
#include "core_fixes.bpf.h"
#include "stamp_check.bpf.h"

#define READ(btf, p, a) ((btf) ? (p)->a : BPF_CORE_READ(p, a))

/* serve --empty-probes: the hook's body empty, the floor scripts/bench-serve-overhead.sh sets. */
const volatile bool targ_empty = false;
/* Set by userspace while the check hooks are attached: compare stamps with hooked times. */
volatile __u32 checking = 0;
/* The hooks' programs record only while set (a device timed by hooks, or a check). */
volatile __u32 hooks_record = 0;
/* block_bio_queue(q, bio) before 5.11 (core_fixes.bpf.h #3); raw_tp only: its bio is hashed, a
 * number there. */
const volatile bool targ_bio_queue_q = false;
/* The direct I/O end_io functions (iomap, a block device's sync, async and simple ones) and
 * submit_bio_wait's, from /proc/kallsyms (0: absent). */
const volatile __u64 targ_direct_end_io[4] = {};
const volatile __u64 targ_wait_end_io = 0;
/* The stacked devices' end_io functions (dm's clone_endio, dm-crypt's, raid1's, md's; module
 * symbols: 0 while their module is not loaded, when the clone flag still names most). */
const volatile __u64 targ_stack_end_io[5] = {};

/* The rows, per CPU: a key's slot is a hash of it (row_index), so the hot path is an array
 * lookup the verifier inlines and a three-word compare. Each CPU's slot may hold a different key:
 * userspace groups by the key each copy holds. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAMPS_ROWS);
	__type(key, __u32);
	__type(value, struct stamps_row);
} stamps_rows SEC(".maps");

/* Keys whose two slots were taken on their CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, STAMPS_MAX_KEYS);
	/* 3.4 KiB a row a CPU: allocated as rows appear, not for all 512 up front. */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct top_key);
	__type(value, struct stamps_val);
} stamps_spill SEC(".maps");

/* A zeroed row to insert from (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stamps_val);
} stamps_zero SEC(".maps");

/* Mapped into userspace: the checker reads which queues exist and writes their modes without a
 * system call (a map syscall holds off other tracers' programs on its CPU meanwhile). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAMPS_MAX_QUEUES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct stamps_queue);
} stamps_queues SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAMPS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct stamps_check);
} stamps_checks SEC(".maps");

/* Issue times by (queue, hw queue, tag): written where a request is issued, read where it
 * completes (often another CPU: one cache line moves, nothing is locked). The request's address
 * is kept with it: a slot another request took since is a miss, counted, never a wrong time. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAMPS_TAG_SLOTS);
	__type(key, __u32);
	__type(value, struct stamps_slot);
} stamps_issued SEC(".maps");

/* Queue times by the bio's address (a bio has no tag yet when it is queued). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAMPS_BIO_SLOTS);
	__type(key, __u32);
	__type(value, struct stamps_slot);
} stamps_queued SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_STAMPS_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} stamps_counters SEC(".maps");

static __always_inline void scount(enum stamps_counter c)
{
	__u32 k = c;
	__u64 *v = bpf_map_lookup_elem(&stamps_counters, &k);

	if (v)
		*v += 1;
}

/* A typed (tp_btf) pointer as a number: the verifier refuses arithmetic on it, and a slot's key
 * is a number. One helper call, made only while the check hooks record. */
static __always_inline __u64 as_scalar(const void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

/* Tags below 1024 of 256 (queue, hw queue) pairs: distinct for every request in flight on up to
 * 256 hardware queues (a queue id's pairs collide with another's only past that). */
static __always_inline __u32 tag_slot(__u32 qid, __u32 hwq, __u32 tag)
{
	return ((((qid * 37) + hwq) & 255) << 10) | (tag & 1023);
}

static __always_inline __u32 rq_tag_slot(struct request *rq, struct request_queue *q, bool btf)
{
	struct blk_mq_hw_ctx *hctx = READ(btf, rq, mq_hctx);

	return tag_slot(READ(btf, q, id), READ(btf, hctx, queue_num), READ(btf, rq, tag));
}

/* Bios are slab objects of at least 128 bytes: the address's low 7 bits say nothing. */
static __always_inline __u32 bio_slot(__u64 bio)
{
	return (__u32)((bio >> 7) ^ (bio >> 23)) & (STAMPS_BIO_SLOTS - 1);
}

/* ---- the check hooks: attached for a check window, or for a device timed by hooks ---- */

/* Whether a hook should record for queue qid: in a check window always, otherwise only where a
 * device's verdict left `stamp` to its hook. One hooked disk keeps the hooks attached for all
 * (this host's root disk: its writes' stamps are off), and recording for every disk cost the
 * loop device ~10% of its IOPS at QD32 (serve 0.886x where its one hook alone is ~0.99x). */
static __always_inline bool records_for(__u32 qid, __u32 stamp)
{
	struct stamps_queue *q;

	if (checking)
		return true;
	q = bpf_map_lookup_elem(&stamps_queues, &qid);
	return q && (q->mode & SM_CHECKED) && !(q->mode & stamp);
}

static __always_inline int on_issue(struct request *rq, bool btf)
{
	struct stamps_slot *s;
	__u32 k;

	struct request_queue *q;

	if (!hooks_record)
		return 0;
	q = READ(btf, rq, q);
	if (!records_for(READ(btf, q, id), SM_ISSUE_STAMP))
		return 0;
	k = rq_tag_slot(rq, q, btf);
	s = bpf_map_lookup_elem(&stamps_issued, &k);
	if (s) {
		s->key = btf ? as_scalar(rq) : (__u64)rq;
		s->ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* block_rq_issue(rq) on every kernel iopath supports (Debian's 5.10 included: its request_queue
 * argument went before block_bio_queue's, core_fixes.bpf.h #3). */
SEC("tp_btf/block_rq_issue")
int BPF_PROG(stamps_issue, struct request *rq)
{
	return on_issue(rq, true);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(stamps_issue_raw, struct request *rq)
{
	return on_issue(rq, false);
}

static __always_inline void record_queued(__u64 bio)
{
	struct stamps_slot *s;
	__u32 k = bio_slot(bio);

	s = bpf_map_lookup_elem(&stamps_queued, &k);
	if (s) {
		s->key = bio;
		s->ns = bpf_ktime_get_ns();
	}
}

/* tp_btf: the bio's queue by plain loads, so a disk whose stamps are trusted costs a few loads;
 * its address (a helper call) only where it records. */
SEC("tp_btf/block_bio_queue")
int stamps_bio_queue(unsigned long long *ctx)
{
	struct gendisk *disk;
	struct bio *bio;
	__u32 qid;

	if (!hooks_record)
		return 0;
	bio = bio_queue_arg(ctx, targ_bio_queue_q);
	if (bpf_core_field_exists(bio->bi_bdev)) {
		disk = bio->bi_bdev->bd_disk;
		if (!disk)
			return 0;
		qid = disk->queue->id;
	} else {
		/* Before 5.12 (core_fixes.bpf.h #19): a probe read gives a number, not a BTF
		 * pointer, so the chain is read the same way (plain loads from it: -EACCES
		 * on 5.10). */
		qid = BPF_CORE_READ((struct bio___old *)bio, bi_disk, queue, id);
	}
	if (!records_for(qid, SM_QUEUE_STAMP))
		return 0;
	record_queued(as_scalar(bio));
	return 0;
}

SEC("raw_tp/block_bio_queue")
int stamps_bio_queue_raw(unsigned long long *ctx)
{
	struct bio *bio;

	if (!hooks_record)
		return 0;
	bio = bio_queue_arg(ctx, targ_bio_queue_q);
	if (!records_for(BPF_CORE_READ(bio_disk(bio), queue, id), SM_QUEUE_STAMP))
		return 0;
	record_queued((__u64)bio);
	return 0;
}

/* ---- the one hook ---- */

/* The hooked time of `key` in `slots` (0: none: not recorded, or the slot reused since). */
static __always_inline __u64 hooked(void *slots, __u32 k, __u64 key)
{
	struct stamps_slot *s = bpf_map_lookup_elem(slots, &k);

	if (!s || s->key != key)
		return 0;
	return s->ns;
}

static __always_inline __u32 route_of(struct request *rq, struct bio *bio, bool btf)
{
	__u32 op = READ(btf, rq, cmd_flags) & 0xff;
	__u64 end_io;

	if (!bio) {
		if (op == 2) /* REQ_OP_FLUSH (core_fixes.bpf.h #13) */
			return SR_FLUSH;
		if (op == 34 || op == 35) /* REQ_OP_DRV_IN, REQ_OP_DRV_OUT */
			return SR_PASSTHROUGH;
		return SR_OTHER;
	}
	end_io = (__u64)READ(btf, bio, bi_end_io);
	if (end_io && (end_io == targ_direct_end_io[0] || end_io == targ_direct_end_io[1] ||
		       end_io == targ_direct_end_io[2] || end_io == targ_direct_end_io[3]))
		return SR_DIRECT;
	if (end_io && end_io == targ_wait_end_io)
		return SR_WAITED;
	if (op == 34 || op == 35)
		return SR_PASSTHROUGH;
	/* BIO_CLONED is bit 1 of bi_flags from 5.10 to 7.3 (an anonymous enum: no CO-RE name to
	 * relocate): dm's and md's clones carry it; dm-crypt's write bios are its own, named by
	 * their end_io. */
	if ((READ(btf, bio, bi_flags) & (1 << 1)) ||
	    (end_io && (end_io == targ_stack_end_io[0] || end_io == targ_stack_end_io[1] ||
			end_io == targ_stack_end_io[2] || end_io == targ_stack_end_io[3] ||
			end_io == targ_stack_end_io[4])))
		return SR_STACKED;
	return SR_OTHER_END_IO;
}

static __always_inline void add_phase(struct stamps_val *v, __u32 p, __u64 ns)
{
	__u32 slot = top_slot(ns);

	if (p >= STAMPS_PHASES)
		return;
	if (slot >= TOP_SLOTS)
		slot = TOP_SLOTS - 1;
	slot += p * TOP_SLOTS;
	barrier_var(slot);
	if (slot >= STAMPS_PHASES * TOP_SLOTS)
		return;
	barrier_var(slot);
	/* Per-CPU: plain adds. */
	v->slots[slot]++;
	v->sum[p] += ns;
}

static __always_inline struct stamps_val *spill_row(struct top_key *k)
{
	struct stamps_val *v = bpf_map_lookup_elem(&stamps_spill, k);
	__u32 zero = 0;

	if (v)
		return v;
	v = bpf_map_lookup_elem(&stamps_zero, &zero);
	if (!v || bpf_map_update_elem(&stamps_spill, k, v, BPF_NOEXIST))
		return NULL;
	return bpf_map_lookup_elem(&stamps_spill, k);
}

/* Fibonacci hashing of the key's words: the disks and routes of one host differ in few bits. */
static __always_inline __u32 row_index(const struct top_key *k)
{
	__u64 h = k->cgroup ^ ((__u64)k->dev << 24) ^ ((__u64)k->route << 1) ^ k->write;

	return (h * 0x9E3779B97F4A7C15ULL) >> (64 - STAMPS_ROW_BITS);
}

/* Slot i's row if it holds k or was free (then it is k's now), else NULL. A program does not
 * nest on its CPU (the kernel skips a recursive run and counts it), and the rows are this CPU's:
 * nothing else writes the slot meanwhile. */
static __always_inline struct stamps_val *slot_row(__u32 i, const struct top_key *k)
{
	struct stamps_row *r = bpf_map_lookup_elem(&stamps_rows, &i);
	const __u64 *a, *b;

	if (!r)
		return NULL;
	a = (const __u64 *)&r->key;
	b = (const __u64 *)k;
	if (a[0] == b[0] && a[1] == b[1] && a[2] == b[2])
		return &r->val;
	if (r->key.tgid)
		return NULL;
	r->key = *k;
	return &r->val;
}

static __always_inline struct stamps_val *row_of(struct top_key *k)
{
	__u32 i = row_index(k);
	struct stamps_val *v = slot_row(i, k);

	if (v)
		return v;
	v = slot_row(i ^ 1, k);
	if (v)
		return v;
	return spill_row(k);
}

static __always_inline int on_complete(struct request *rq, unsigned int nr_bytes, bool btf)
{
	struct top_key k = {.tgid = STAMPS_NO_PROCESS};
	__u64 now = bpf_ktime_get_ns(), queued = 0, issued = 0, h_queue = 0, h_issue = 0;
	__u64 s_queue = 0, s_issue = 0;
	struct request_queue *rqq;
	struct stamps_queue *q;
	struct stamps_val *v;
	struct bio *bio;
	__u32 qid, mode;
	bool final;

	k.dev = rq_devt(rq, btf);
	k.write = READ(btf, rq, cmd_flags) & 1;
	bio = READ(btf, rq, bio);
	k.route = route_of(rq, bio, btf);
	if (bio)
		k.cgroup = btf ? bio_io_cgroup_btf(bio) : bio_io_cgroup(bio);
	/* A request completes in parts (blk_update_request per part): one I/O, at its last. */
	final = nr_bytes >= READ(btf, rq, __data_len);
	v = row_of(&k);
	if (!v) {
		scount(SC_FULL);
		return 0;
	}
	v->bytes += nr_bytes;
	if (!final)
		return 0;
	v->ios++;

	rqq = READ(btf, rq, q);
	qid = READ(btf, rqq, id);
	if (qid >= STAMPS_MAX_QUEUES) {
		scount(SC_QUEUE_BEYOND);
		return 0;
	}
	q = stamp_queue(&stamps_queues, qid, k.dev);
	if (!q)
		return 0;
	mode = q->mode;
	if (bpf_core_field_exists(rq->io_start_time_ns))
		s_issue = READ(btf, rq, io_start_time_ns);
	if (bpf_core_field_exists(rq->start_time_ns))
		s_queue = READ(btf, rq, start_time_ns);
	if (hooks_record) {
		__u64 r = btf ? as_scalar(rq) : (__u64)rq;
		__u64 b = btf ? as_scalar(bio) : (__u64)bio;

		h_issue = hooked(&stamps_issued, rq_tag_slot(rq, rqq, btf), r);
		if (b)
			h_queue = hooked(&stamps_queued, bio_slot(b), b);
	}
	if (checking) {
		struct stamps_check *c = bpf_map_lookup_elem(&stamps_checks, &qid);

		if (c && h_issue && h_issue <= now) {
			check_one(&c->issue, s_issue, h_issue, now - h_issue);
			if (h_queue && h_queue <= h_issue)
				check_one(&c->queue, s_queue, h_queue, h_issue - h_queue);
		}
	}
	if (mode & SM_CHECKED) {
		issued = (mode & SM_ISSUE_STAMP) ? s_issue : h_issue;
		queued = (mode & SM_QUEUE_STAMP) ? s_queue : h_queue;
	} else if (checking) {
		/* Not decided yet, the hooks attached: the hooked times are the truth. */
		issued = h_issue;
		queued = h_queue;
	} else {
		scount(SC_UNCHECKED);
		return 0;
	}
	if (!issued) {
		scount(SC_NO_HOOK_TIME);
		return 0;
	}
	if (issued > now || (queued && queued > issued)) {
		scount(SC_DISORDERED);
		return 0;
	}
	add_phase(v, 1, now - issued);
	if (queued)
		add_phase(v, 0, issued - queued);
	else if (bio)
		/* A request without a bio (a flush) has no block phase: not a loss. */
		scount(SC_NO_HOOK_TIME);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(stamps_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	if (targ_empty)
		return 0;
	return on_complete(rq, nr_bytes, true);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(stamps_complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	if (targ_empty)
		return 0;
	return on_complete(rq, nr_bytes, false);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
