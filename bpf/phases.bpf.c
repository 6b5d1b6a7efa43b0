// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-I/O phases on every route an I/O takes: submission (the route's start -> bio queued), block
 * layer (bio queued -> request issued), device (issued -> completed), completion (completed ->
 * posted -> reaped).
 *
 * One object, read by route: each room is a header that includes what it uses and holds its
 * tracepoint entry points beside their handlers (every entry point a thin wrapper over one
 * handler, so tp_btf and raw_tp variants share the logic; userspace picks which to load).
 *   run.bpf.h          the run's knobs (rodata userspace sets before load) and who is traced
 *   syscalls.bpf.h     where the application submits and reaps, dispatched to the routes:
 *   uring.bpf.h          io_uring (the submitting thread, the SQ thread, io-wq; cq_ring.bpf.h)
 *   aio.bpf.h            libaio
 *   sync.bpf.h           synchronous read/write and the page cache
 *   block.bpf.h        the block layer's hooks over the block core (block_core.bpf.h, which
 *                      finds each bio's I/O whatever route claimed it; io_state.bpf.h holds the
 *                      per-I/O state and is the one place phases are recorded)
 *   sched.bpf.h        context switches, run-queue waits, a buffered call's blocked time
 *   writeback.bpf.h    writeback of the traced processes' pages, journal commits
 *   nvme.bpf.h         the NVMe driver's view of the device phase
 *   fs_endio.bpf.h     a file system's own end-io work inside completion (btrfs's checksums)
 * Kernel-version differences live in core_fixes.bpf.h and compat.bpf.h alone: the object is built
 * twice, as is and with IOPATH_COMPAT (build.rs checks the two skeletons equal).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"
#include "run.bpf.h"
#include "syscalls.bpf.h"
#include "uring.bpf.h"
#include "aio.bpf.h"
#include "sync.bpf.h"
#include "block.bpf.h"
#include "sched.bpf.h"
#include "writeback.bpf.h"
#include "nvme.bpf.h"
#include "fs_endio.bpf.h"

/* Makes the skeleton emit these types for the Rust side. */
struct hist _hist = {};
struct io_slot _io_slot = {};
struct io_record _io_record = {};
struct wb_file _wb_file = {};
enum wb_why _wb_why = NR_WB_WHY;
/* ... and these enums, so the Rust mirrors are checked against them at build time (probe/mod.rs).
 */
enum phase _phase = NR_PHASES;
enum counter _counter = NR_COUNTERS;
enum route_kind _route_kind = NR_ROUTE_KINDS;
enum ud_bits _ud_bits = UD_SLOT_BITS;

char LICENSE[] SEC("license") = "Dual BSD/GPL";
