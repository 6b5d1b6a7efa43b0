//! pread/pwrite: the synchronous baseline. The I/O happens inside `submit`, so the runner
//! counts its whole time as completion latency (fio reports no slat for sync engines either).
//! With `--hipri`, preadv2/pwritev2 with RWF_HIPRI (fio's pvsync2 `hipri`): the kernel polls for
//! the completion where the device has poll queues, and waits as usual where it has none.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use super::{Buffers, Completion, Engine, Op};

pub struct Psync {
    file: File,
    bufs: Buffers,
    queued: Vec<(u32, Op, u64)>,
    done: Vec<Completion>,
    hipri: bool,
}

/// From <linux/fs.h>.
const RWF_HIPRI: libc::c_int = 0x1;

impl Psync {
    pub fn new(file: File, bufs: Buffers, hipri: bool) -> Self {
        Psync { file, bufs, queued: Vec::with_capacity(1), done: Vec::with_capacity(1), hipri }
    }
}

impl Engine for Psync {
    const SYNC: bool = true;

    fn queue(&mut self, slot: u32, op: Op, offset: u64, _t: u64) -> io::Result<()> {
        self.queued.push((slot, op, offset));
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        for (slot, op, off) in self.queued.drain(..) {
            let (p, n) = (self.bufs.addr(slot), self.bufs.bs());
            let res = loop {
                // SAFETY: p..p+n is this slot's buffer, owned by self.bufs.
                let iov = libc::iovec { iov_base: p.cast(), iov_len: n };
                let r = unsafe {
                    match (op, self.hipri) {
                        (Op::Read, false) => libc::pread(fd, p.cast(), n, off as libc::off_t),
                        (Op::Write, false) => libc::pwrite(fd, p.cast(), n, off as libc::off_t),
                        (Op::Read, true) => libc::preadv2(fd, &iov, 1, off as libc::off_t, RWF_HIPRI),
                        (Op::Write, true) => libc::pwritev2(fd, &iov, 1, off as libc::off_t, RWF_HIPRI),
                    }
                };
                if r >= 0 {
                    break r as i64;
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    break -(e.raw_os_error().unwrap_or(libc::EIO) as i64);
                }
            };
            self.done.push(Completion { slot, res });
        }
        Ok(())
    }

    fn reap(&mut self, _min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }

    fn sync(&mut self, data_only: bool) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        loop {
            // SAFETY: fd is this engine's open file.
            let r = unsafe {
                if data_only {
                    libc::fdatasync(fd)
                } else {
                    libc::fsync(fd)
                }
            };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }

    fn buffers(&mut self) -> &mut Buffers {
        &mut self.bufs
    }
}
