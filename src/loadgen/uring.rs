//! io_uring engine: one ring per worker; plain, SQPOLL, IOPOLL and registered-buffer variants.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use anyhow::{anyhow, Result};
use io_uring::{opcode, types, IoUring};

use super::{Buffers, Completion, Engine, Op};
use crate::job::Job;

/// From <linux/io_uring.h>.
const IORING_ENTER_GETEVENTS: u32 = 1;

pub struct Uring {
    ring: IoUring,
    _file: File,
    fd: types::Fd,
    bufs: Buffers,
    fixed: bool,
    force_async: bool,
    queued: u32,
    /// This worker's first slot index across all workers (worker index x qd).
    base: u32,
}

/// user_data: the slot index across workers in the low UD_SLOT_BITS, and above it the low bits
/// of the time the generator started the I/O, so a tracer can time the SQ thread's pickup and
/// tell the generator when each completion was posted (bpf/uring.bpf.h).
const SLOT_MASK: u64 = (1 << super::UD_SLOT_BITS) - 1;

fn user_data(index: u32, t: u64) -> u64 {
    (t << super::UD_SLOT_BITS) | (u64::from(index) & SLOT_MASK)
}

impl Uring {
    pub fn new(job: &Job, worker: u32, file: File, bufs: Buffers) -> Result<Self> {
        let entries = job.qd.next_power_of_two().max(2);
        // fio's ring setup (3.33+): completions run only when we ask for them (DEFER_TASKRUN), so
        // no task-work interrupts land mid-loop. Needs 6.1+; older kernels get a plain ring.
        // SINGLE_ISSUER binds the ring to the thread that builds it: engines are built on their
        // worker thread.
        let lean = !job.sqpoll;
        let build = |lean: bool| {
            let mut b = IoUring::builder();
            if job.sqpoll {
                // The poller sleeps after 1 s idle; a running job keeps it awake.
                b.setup_sqpoll(1000);
            }
            if job.iopoll {
                b.setup_iopoll();
            }
            if lean {
                b.setup_coop_taskrun().setup_single_issuer().setup_defer_taskrun();
            }
            b.build(entries)
        };
        let ring = match build(lean) {
            Ok(r) => r,
            Err(e) if lean && e.raw_os_error() == Some(libc::EINVAL) => {
                build(false).map_err(|e| setup_error(job, entries, e))?
            }
            Err(e) => return Err(setup_error(job, entries, e)),
        };
        if job.fixed_bufs {
            let iov: Vec<libc::iovec> = (0..bufs.len() as u32)
                .map(|i| libc::iovec { iov_base: bufs.addr(i).cast(), iov_len: bufs.bs() })
                .collect();
            // SAFETY: the buffers live in `bufs`, owned by this engine and dropped after the ring.
            unsafe { ring.submitter().register_buffers(&iov) }.map_err(|e| {
                let bytes = iov.len() * bufs.bs();
                let why = match e.raw_os_error() {
                    Some(libc::ENOMEM) => format!(
                        ": registered buffers are pinned and count against the locked-memory limit (ulimit -l, \
                             RLIMIT_MEMLOCK); this job pins {} KiB per ring: raise the limit, or lower --qd / --bs",
                        bytes >> 10
                    ),
                    Some(libc::EINVAL) => ": the kernel refused the buffer table (each buffer at most 1 GiB, \
                                               at most 16384 of them: lower --qd or --bs)"
                        .to_owned(),
                    Some(libc::EFAULT) | Some(libc::EOPNOTSUPP) => {
                        ": buffers from this memory cannot be pinned (file-backed or special memory)".to_owned()
                    }
                    _ => String::new(),
                };
                anyhow!("--fixed-bufs: registering {} buffers with io_uring failed: {e}{why}", iov.len())
            })?;
        }
        let fd = types::Fd(file.as_raw_fd());
        Ok(Uring {
            ring,
            _file: file,
            fd,
            bufs,
            fixed: job.fixed_bufs,
            force_async: job.force_async,
            queued: 0,
            base: worker * job.qd,
        })
    }
}

fn setup_error(job: &Job, entries: u32, e: io::Error) -> anyhow::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) if job.sqpoll => ": SQPOLL needs root or CAP_SYS_NICE on this kernel",
        Some(libc::ENOMEM) => ": not enough locked memory for the ring (raise RLIMIT_MEMLOCK or lower --qd)",
        Some(libc::ENOSYS) | Some(libc::EPERM) => {
            ": io_uring is disabled here (see /proc/sys/kernel/io_uring_disabled)"
        }
        _ => "",
    };
    anyhow!("io_uring_setup({entries}) failed: {e}{hint}")
}

impl Engine for Uring {
    #[inline]
    fn queue(&mut self, slot: u32, op: Op, offset: u64, t: u64) -> io::Result<()> {
        let (ptr, len) = (self.bufs.addr(slot), self.bufs.bs() as u32);
        let sqe = match (op, self.fixed) {
            (Op::Read, false) => opcode::Read::new(self.fd, ptr, len).offset(offset).build(),
            (Op::Write, false) => opcode::Write::new(self.fd, ptr, len).offset(offset).build(),
            (Op::Read, true) => opcode::ReadFixed::new(self.fd, ptr, len, slot as u16).offset(offset).build(),
            (Op::Write, true) => opcode::WriteFixed::new(self.fd, ptr, len, slot as u16).offset(offset).build(),
        };
        // With SQPOLL an entry is freed when the poller consumes it, not at completion: the SQ can
        // be full while slots are free. Wake the poller and wait for room (IORING_ENTER_SQ_WAIT).
        while self.ring.submission().is_full() {
            self.ring.submit()?;
            self.ring.submitter().squeue_wait()?;
        }
        // SAFETY: the buffer stays valid and untouched until this slot's completion is reaped.
        let flags = if self.force_async { io_uring::squeue::Flags::ASYNC } else { io_uring::squeue::Flags::empty() };
        unsafe { self.ring.submission().push(&sqe.user_data(user_data(self.base + slot, t)).flags(flags)) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.queued += 1;
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        if self.ring.params().is_setup_sqpoll() {
            // The poller consumes the SQ by itself; submit() only wakes it when it sleeps.
            self.ring.submit()?;
            self.queued = 0;
            return Ok(());
        }
        while self.queued > 0 {
            // GETEVENTS with min_complete 0, as fio commits: on a DEFER_TASKRUN ring this also
            // posts completions that are waiting, so their slots are refilled sooner.
            // SAFETY: no argument struct is passed.
            match unsafe { self.ring.submitter().enter::<libc::sigset_t>(self.queued, 0, IORING_ENTER_GETEVENTS, None) }
            {
                Ok(n) => self.queued -= (n as u32).min(self.queued),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        loop {
            {
                let cq = self.ring.completion();
                if cq.len() as u32 >= min.max(1) || (min == 0 && !cq.is_empty()) {
                    out.extend(cq.map(|c| Completion {
                        slot: ((c.user_data() & SLOT_MASK) as u32).wrapping_sub(self.base),
                        res: c.result() as i64,
                    }));
                    return Ok(());
                }
            }
            match self.ring.submit_and_wait(min.max(1) as usize) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
            let cq = self.ring.completion();
            if !cq.is_empty() {
                out.extend(cq.map(|c| Completion {
                    slot: ((c.user_data() & SLOT_MASK) as u32).wrapping_sub(self.base),
                    res: c.result() as i64,
                }));
                return Ok(());
            }
        }
    }

    fn peek(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ring.completion().map(|c| Completion {
            slot: ((c.user_data() & SLOT_MASK) as u32).wrapping_sub(self.base),
            res: c.result() as i64,
        }));
    }

    fn buffers(&mut self) -> &mut Buffers {
        &mut self.bufs
    }

    #[inline]
    fn posted_ns(&self, slot: u32) -> Option<u64> {
        // Installed only under a trace that cannot see the reap (SQPOLL, --lean).
        super::slot_clock::get((self.base + slot) as usize)
    }
}
