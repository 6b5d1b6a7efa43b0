/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The io_uring route: a request is claimed when io_uring takes its SQE (from the submitting
 * thread's io_uring_enter, or by its SQ thread), stamped by the block core from any context, and
 * closed when the application takes its CQE from the ring (cq_ring.bpf.h) or, under --lean and in
 * top / serve, when its completion is posted.
 */
#ifndef IOPATH_URING_BPF_H
#define IOPATH_URING_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "run.bpf.h"
#include "task.bpf.h"
#include "files.bpf.h"
#include "generator.bpf.h"
#include "io_state.bpf.h"
#include "cq_ring.bpf.h"

static __always_inline __u64 uring_stamp(struct io_kiocb *req, __u64 now)
{
	return app_stamp(io_req_user_data(req), now);
}

/* Reads and writes (IORING_OP_* of include/uapi/linux/io_uring.h, stable ABI): the opcodes
 * that move data to or from a file. Others (poll, recv, fsync, NOP) are not followed here. */
static __always_inline bool uring_rw_opcode(__u8 op)
{
	return op == 1 || op == 2 || op == 4 || op == 5 || op == 22 || op == 23;
}

/* A request is submitted: from io_uring_enter by the application, or by its SQ thread. */
static __always_inline int on_submit_req(struct io_kiocb *req, bool btf)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_ctx *t;
	struct io_slot *s;
	__u64 now, start;
	__u32 mode = MODE_URING;

	__u8 op = RQ_READ(btf, req, opcode);

	if (!traced(tgid) || !uring_rw_opcode(op))
		return 0;
	/* A buffered file's request has no bio to say it writes: the opcode does. */
	if (op == 2 || op == 5 || op == 23)
		mode |= RF_WRITE;
	now = bpf_ktime_get_ns();
	start = now;
	/* --lean, top / serve's default: no syscall hook set in_submit. */
	t = (targ_lean || targ_claim_at_bio) ? NULL : task_ctx(false);
	if (CURRENT_FLAGS() & PF_IO_WORKER) {
		/* The SQ thread (io-wq workers issue, they do not submit SQEs). An SQPOLL
		 * application may never enter the kernel (fio spins on its CQ ring): the SQ thread
		 * picking up its next SQE is the look that finds the CQEs it took before writing it
		 * (fio at QD1: the bound was 37 us wide with posting as the only look, the whole
		 * latency). */
		mode |= RF_SQPOLL;
		if (targ_app_stamp) {
			start = uring_stamp(req, now);
		} else {
			__u64 written = sq_written((__u64)BPF_CORE_READ(req, ctx), now);

			if (written)
				start = written;
		}
	} else if (t && t->in_submit) {
		start = t->enter_ts;
		t->sqes++;
		/* A probe read (a scalar key, not a BTF pointer: no arithmetic on those), once a
		 * thread: its ring does not change (a look at another ring is only less useful). */
		if (!t->ring)
			t->ring = (__u64)BPF_CORE_READ(req, ctx);
		if (targ_app_stamp) {
			__u64 queued = uring_stamp(req, now);

			if (queued <= start)
				record(PH_APP_SUBMIT, start - queued);
		}
	} else if (targ_lean && targ_app_stamp) {
		/* --lean: the application's own time (and its syscall's entry) runs until now. */
		__u64 queued = uring_stamp(req, now);

		if (queued <= now)
			record(PH_APP_SUBMIT, now - queued);
	}
	s = io_claim((__u64)req, 0, start, tgid, mode);
	if (s)
		s->pickup_ts = now;
	return 0;
}

/* Punted to io-wq (IOSQE_ASYNC, or the kernel could not issue it without blocking). */
static __always_inline int on_queue_async_work(struct io_kiocb *req)
{
	struct io_slot *s;

	if (!traced(bpf_get_current_pid_tgid() >> 32))
		return 0;
	s = ios_find((__u64)req, 0);
	if (s && !s->punt_ts)
		s->punt_ts = bpf_ktime_get_ns();
	return 0;
}

/* Posted to the CQ ring. The record waits there until a look at the ring's head finds it taken
 * (cq_ring.bpf.h), whoever posted it: the submitting thread's task work, an io-wq worker, an SQ
 * thread. The bundled generator's own SQPOLL ring and every request under --lean instead end at
 * posting (RF_NO_REAP): the generator times its own take from the ring (slot_clock). */
static __always_inline int on_uring_complete(struct io_kiocb *req)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct task_ctx *t;
	struct io_slot *s;
	__u64 now, ring;

	if (!traced(tgid))
		return 0;
	now = bpf_ktime_get_ns();
	s = ios_find((__u64)req, 0);
	/* The ring, for its looks (none under --lean, nor in top / serve's default: they close
	 * at posting): a probe read, a scalar (the tracepoint's BTF pointer allows no key
	 * arithmetic). */
	ring = (targ_lean || targ_claim_at_bio) ? 0 : (__u64)BPF_CORE_READ(req, ctx);
	if (!s) {
		/* Not a followed I/O's CQE, yet a look: the head bounds the others. */
		ring_look(ring, now);
		return 0;
	}
	s->r.posted_ts = now;
	/* No bio of its own: a read or write of a buffered file served by the page cache (its
	 * readahead, if any, serves the cache, not this request). Inline when posted inside the
	 * io_uring_enter that submitted it (the claim started at that call's entry); otherwise it
	 * waited for a page and was retried from task work, or was punted to io-wq. The request
	 * comes as a void pointer in every version of this tracepoint: probe reads. */
	if (!s->r.queue_ts && fd_kind(BPF_CORE_READ(req, file)) == FD_BUFFERED) {
		int res = BPF_CORE_READ(req, cqe.res);

		s->r.mode |= RF_CACHED;
		if (res > 0)
			count(C_UPC_BYTES, res);
		t = task_ctx(false);
		if (t && t->in_submit && t->enter_ts == s->r.submit_ts)
			s->r.mode |= RF_INLINE;
	}
	/* top / serve without syscall hooks see no reap either: each request ends at its posting
	 * (the CQ ring's looks need the traced threads' io_uring_enter and switches). */
	if (targ_lean || targ_claim_at_bio ||
	    (targ_app_stamp && (CURRENT_FLAGS() & PF_IO_WORKER))) {
		s->r.mode |= RF_NO_REAP;
		if (targ_app_stamp) {
			__u32 idx = io_req_user_data(req) & ((1U << UD_SLOT_BITS) - 1);
			__u64 *at = bpf_map_lookup_elem(&slot_clock, &idx);

			if (at)
				*at = now;
		}
		io_close_slot(s, now, false);
		return 0;
	}
	io_route_subphases(s);
	if (!ring_park(ring, s, now))
		count(C_REAP_OVERFLOW, 1);
	ios_release(s);
	return 0;
}

/* io_uring_enter returns: a look at the ring (what this call posted is in the ring now, not yet
 * taken), and the batch it submitted. */
static __always_inline int on_uring_exit(void)
{
	struct task_ctx *t = task_ctx(false);

	if (!t)
		return 0;
	t->in_submit = 0;
	t->in_sys = 0;
	if (t->sqes) {
		count(C_URING_ENTERS, 1);
		count(C_URING_SQES, t->sqes);
		t->sqes = 0;
	}
	ring_look(t->ring, bpf_ktime_get_ns());
	return 0;
}

/* ---- entry points ---- */

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(submit_req, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, true);
}

SEC("tp_btf/io_uring_submit_sqe")
int BPF_PROG(submit_sqe, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, true);
}

SEC("raw_tp/io_uring_submit_req")
int BPF_PROG(submit_req_raw, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_submit_req(req, false);
}

SEC("tp_btf/io_uring_queue_async_work")
int BPF_PROG(queue_async_work, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_queue_async_work(req);
}

SEC("raw_tp/io_uring_queue_async_work")
int BPF_PROG(queue_async_work_raw, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_queue_async_work(req);
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(uring_complete, void *ctx_, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_uring_complete(req);
}

SEC("raw_tp/io_uring_complete")
int BPF_PROG(uring_complete_raw, void *ctx_, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return on_uring_complete(req);
}

#endif /* IOPATH_URING_BPF_H */
