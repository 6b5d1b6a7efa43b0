/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The libaio route: io_submit claims each iocb of its array, io_getevents reaps each event it
 * returns (both from the syscall room's dispatch). Under --lean the request is claimed at its
 * first bio instead (block_core.bpf.h aio_claim_at_bio).
 */
#ifndef IOPATH_AIO_BPF_H
#define IOPATH_AIO_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "compat.bpf.h"
#include "run.bpf.h"
#include "task.bpf.h"
#include "generator.bpf.h"
#include "io_state.bpf.h"

/* The kioctx behind an aio_context_t (the user address of its ring): it tells apart forked
 * processes that share iocb addresses. Found by matching user_id in mm->ioctx_table, all kernel
 * memory (the ring's own index is in user memory, which a BPF program cannot fault in). */
#define AIO_MAX_CTX 16

struct aio_ctx_find {
	struct kioctx_table *tbl;
	__u64 ctx_id;
	__u32 nr;
	__u32 found;
};

static long aio_ctx_one(__u64 i, struct aio_ctx_find *c)
{
	/* Read out of c first: inside bpf_core_read a field of c would be relocated too. */
	struct kioctx_table *tbl = c->tbl;
	struct kioctx *ctx = NULL;

	if (i >= c->nr)
		return 1;
	bpf_core_read(&ctx, sizeof(ctx), &tbl->table[i & (AIO_MAX_CTX - 1)]);
	if (ctx && BPF_CORE_READ(ctx, user_id) == c->ctx_id) {
		c->found = (__u32)(__u64)ctx;
		return 1;
	}
	return 0;
}

static __always_inline __u32 aio_disc(__u64 ctx_id)
{
	struct task_struct *cur = CURRENT_TASK();
	struct kioctx_table *tbl = BPF_CORE_READ(cur, mm, ioctx_table);
	struct aio_ctx_find c = {.tbl = tbl, .ctx_id = ctx_id};

	if (!tbl)
		return 0;
	c.nr = BPF_CORE_READ(tbl, nr);
	LOOP(AIO_MAX_CTX, AIO_MAX_CTX, aio_ctx_one, &c);
	return c.found;
}

struct aio_claim_ctx {
	__u64 *iocbs;
	__u64 start;
	__u32 disc;
	__u32 tgid;
	bool release;
};

static long aio_claim_one(__u64 i, struct aio_claim_ctx *c)
{
	struct io_slot *s;
	__u64 iocb;

	if (bpf_probe_read_user(&iocb, sizeof(iocb), &c->iocbs[i])) {
		count(C_USER_UNREADABLE, 1);
		return 1;
	}
	if (!iocb)
		return 1;
	if (!c->release) {
		io_claim(iocb, c->disc, c->start, c->tgid, MODE_AIO);
		/* The generator's queue stamp in aio_data (struct iocb's first field). */
		if (targ_app_stamp) {
			__u64 data = 0, queued;

			if (!bpf_probe_read_user(&data, sizeof(data), (void *)iocb)) {
				queued = app_stamp(data, c->start);
				if (queued < c->start)
					record(PH_APP_SUBMIT, c->start - queued);
			}
		}
		return 0;
	}
	/* Not submitted after all (io_submit returned fewer): nothing will reap it. */
	s = ios_find(iocb, c->disc);
	if (s)
		ios_release(s);
	return 0;
}

/* aio_claim_one as the compat build's loop calls it (compat.bpf.h EACH): checked once. */
STEP_FN int aio_claim_g(__u64 iocbs, __u64 i, __u64 start, __u64 disc_tgid, __u32 release)
{
	struct aio_claim_ctx c = {
	    .iocbs = (__u64 *)iocbs,
	    .start = start,
	    .disc = (__u32)disc_tgid,
	    .tgid = disc_tgid >> 32,
	    .release = release,
	};

	return aio_claim_one(i, &c);
}

#define aio_claim_each(n, c)                                                                       \
	EACH(AIO_BATCH_MAX, n, aio_claim_one, &(c), __i,                                           \
	     aio_claim_g((__u64)(c).iocbs, __i, (c).start, (c).disc | ((__u64)(c).tgid << 32),     \
			 (c).release))

/* The kioctx of ctx_id for this task, looked up once per context (a thread keeps using its). */
static __always_inline __u32 task_aio_disc(struct task_ctx *t, __u64 ctx_id)
{
	if (t->aio_ctx_id != ctx_id || !t->aio_disc) {
		t->aio_disc = aio_disc(ctx_id);
		t->aio_ctx_id = ctx_id;
	}
	return t->aio_disc;
}

static __always_inline int on_aio_submit_enter(struct task_ctx *t, __u64 ctx_id, __u64 nr,
					       __u64 iocbs)
{
	struct aio_claim_ctx c = {.iocbs = (__u64 *)iocbs, .start = t->enter_ts};

	c.tgid = bpf_get_current_pid_tgid() >> 32;
	c.disc = task_aio_disc(t, ctx_id);
	/* (--lean aio attaches no sys_enter: its requests are claimed at their bios.) */
	t->aio_iocbs = iocbs;
	t->aio_nr = nr < AIO_BATCH_MAX ? nr : AIO_BATCH_MAX;
	aio_claim_each(t->aio_nr, c);
	return 0;
}

static __always_inline int on_aio_submit_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	struct aio_claim_ctx c = {};
	__u32 done;

	if (!t)
		return 0;
	t->in_submit = 0;
	t->in_sys = 0;
	done = ret > 0 ? ret : 0;
	if (done < t->aio_nr) {
		c.iocbs = (__u64 *)t->aio_iocbs + done;
		c.disc = t->aio_disc;
		c.release = true;
		aio_claim_each(t->aio_nr - done, c);
	}
	return 0;
}

/* Reaps the i-th event of a user io_event array: 1 closed, 0 not followed, -1 unreadable. */
static __always_inline int aio_reap_at(struct io_event *events, __u64 i, __u64 now, __u32 disc)
{
	struct io_slot *s;
	__u64 obj;

	if (bpf_probe_read_user(&obj, sizeof(obj), &events[i].obj)) {
		count(C_USER_UNREADABLE, 1);
		return -1;
	}
	s = ios_find(obj, disc);
	if (!s) {
		count(C_REAP_UNMATCHED, 1);
		return 0;
	}
	/* aio posts inside the bio's end_io, right after block_rq_complete: posting is part of the
	 * device completion path and has no tracepoint of its own. */
	return io_close_slot(s, now, false);
}

/* One reaped event's result: stop at an unreadable one, count what it closed. */
static __always_inline int aio_reaped(struct task_ctx *t, int r)
{
	if (r < 0)
		return 1;
	t->closed += r;
	return 0;
}

struct aio_reap_ctx {
	struct task_ctx *t;
	struct io_event *events;
	__u64 now;
	__u32 disc;
};

static long aio_reap_one(__u64 i, struct aio_reap_ctx *c)
{
	int r = aio_reap_at(c->events, i, c->now, c->disc);

	return aio_reaped(c->t, r);
}

/* (As aio_claim_g.) */
STEP_FN int aio_reap_g(__u64 events, __u64 i, __u64 now, __u32 disc)
{
	return aio_reap_at((struct io_event *)events, i, now, disc);
}

/* io_getevents returned `ret` events in the user array: each one is reaped now. */
static __always_inline int on_getevents_exit(long ret)
{
	struct task_ctx *t = task_ctx(false);
	__u64 now;

	if (!t)
		return 0;
	t->in_sys = 0;
	if (!t->aio_events || ret <= 0)
		return 0;
	now = bpf_ktime_get_ns();
	t->closed = 0;
	{
		struct aio_reap_ctx c = {
		    .events = (struct io_event *)t->aio_events,
		    .now = now,
		    .disc = t->aio_disc,
		    .t = t,
		};

		EACH(AIO_BATCH_MAX, ret < MAX_AIO_EVENTS ? ret : MAX_AIO_EVENTS, aio_reap_one, &c,
		     i, aio_reaped(t, aio_reap_g(t->aio_events, i, now, t->aio_disc)));
	}
	record_reap_batch(now, t->closed);
	return 0;
}

#endif /* IOPATH_AIO_BPF_H */
