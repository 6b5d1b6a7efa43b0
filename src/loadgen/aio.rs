//! Linux native AIO through the raw syscalls (io_setup / io_submit / io_getevents), no libaio.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use anyhow::{anyhow, Result};

use super::{Buffers, Completion, Engine, Op};

/// `struct iocb` from <linux/aio_abi.h> (x86_64, little-endian field order).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event` from <linux/aio_abi.h>.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;

pub struct Aio {
    ctx: libc::c_ulong,
    /// This worker's first slot among all workers' (worker x qd): aio_data and the slot clock
    /// name slots across workers.
    base: u32,
    _file: File,
    fd: u32,
    iocbs: Vec<Iocb>,
    queued: Vec<*mut Iocb>,
    events: Vec<IoEvent>,
    bufs: Buffers,
}

impl Aio {
    pub fn new(qd: u32, base: u32, file: File, bufs: Buffers) -> Result<Self> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the context id into `ctx`.
        if unsafe { libc::syscall(libc::SYS_io_setup, qd as libc::c_long, &mut ctx as *mut libc::c_ulong) } != 0 {
            let e = io::Error::last_os_error();
            let hint = if e.raw_os_error() == Some(libc::EAGAIN) {
                ": the system-wide AIO limit is reached (raise /proc/sys/fs/aio-max-nr or lower --qd/--jobs)"
            } else {
                ""
            };
            return Err(anyhow!("io_setup({qd}) failed: {e}{hint}"));
        }
        Ok(Aio {
            ctx,
            base,
            fd: file.as_raw_fd() as u32,
            _file: file,
            iocbs: vec![Iocb::default(); qd as usize],
            queued: Vec::with_capacity(qd as usize),
            events: vec![IoEvent::default(); qd as usize],
            bufs,
        })
    }
}

impl Engine for Aio {
    #[inline]
    fn queue(&mut self, slot: u32, op: Op, offset: u64, t: u64) -> io::Result<()> {
        let cb = &mut self.iocbs[slot as usize];
        *cb = Iocb {
            // The slot, and above it when the generator queued the I/O (as io_uring's user_data:
            // a tracer times the application's own part before io_submit from it).
            aio_data: (t << super::UD_SLOT_BITS) | u64::from(self.base + slot),
            aio_lio_opcode: if op == Op::Read { IOCB_CMD_PREAD } else { IOCB_CMD_PWRITE },
            aio_fildes: self.fd,
            aio_buf: self.bufs.addr(slot) as u64,
            aio_nbytes: self.bufs.bs() as u64,
            aio_offset: offset as i64,
            ..Iocb::default()
        };
        self.queued.push(cb);
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        if super::slot_clock::installed() {
            // A lean trace starts each I/O at this call, by this clock (see slot_clock).
            let now = super::now_ns();
            for &cb in &self.queued {
                // SAFETY: every queued pointer is to a live iocb in self.iocbs.
                let slot = unsafe { (*cb).aio_data } & ((1 << super::UD_SLOT_BITS) - 1);
                super::slot_clock::set(slot as usize, now);
            }
        }
        let mut done = 0;
        while done < self.queued.len() {
            let rest = &self.queued[done..];
            // SAFETY: every pointer is to a live iocb in self.iocbs whose buffer stays valid
            // until its event is reaped.
            let n = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, rest.len() as libc::c_long, rest.as_ptr()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) {
                    continue;
                }
                return Err(e);
            }
            done += n as usize;
        }
        self.queued.clear();
        Ok(())
    }

    fn reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        loop {
            // SAFETY: the kernel writes at most events.len() entries into the vector's buffer.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    min as libc::c_long,
                    self.events.len() as libc::c_long,
                    self.events.as_mut_ptr(),
                    std::ptr::null_mut::<libc::timespec>(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e);
            }
            out.extend(self.events[..n as usize].iter().map(|ev| Completion {
                slot: ((ev.data & ((1 << super::UD_SLOT_BITS) - 1)) as u32).wrapping_sub(self.base),
                res: ev.res,
            }));
            return Ok(());
        }
    }

    fn buffers(&mut self) -> &mut Buffers {
        &mut self.bufs
    }
}

impl Drop for Aio {
    fn drop(&mut self) {
        // SAFETY: destroying our own context; in-flight I/Os are waited for by the kernel.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}
