//! For a session that runs for hours (`iopath top`, `serve`): the per-I/O tables must not fill
//! with I/Os that will never close (a process killed mid-I/O, a completion no hook saw). Both
//! tables (`ios`: an I/O's state, `links`: a bio's owner) are mmapable arrays; a slot whose I/O
//! started longer ago than `max_age` is freed with a cmpxchg of its key to 0, the same atomic the
//! probes claim it with, so a slot re-claimed in between is left alone; the compat build's claim
//! on it (its index in the table's `_held` hash, bpf/compat.bpf.h) is deleted after. A trace of
//! seconds does not need it: its session ends first.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{anyhow, Result};

use super::phases_skel::types::{io_slot, link_slot};

/// One mmapped table: `len` bytes at `ptr`, `stride` bytes a slot.
struct Table {
    ptr: *mut u8,
    len: usize,
    stride: usize,
    /// Offsets of the key and of the start time inside a slot.
    key_off: usize,
    start_off: usize,
    /// False for a test's plain memory (not unmapped).
    mapped: bool,
    /// The table's held-index hash (-1: none); empty unless the compat build runs.
    held: i32,
}

// SAFETY: the mapping is shared memory only read and cmpxchg'd through atomics.
unsafe impl Send for Table {}

impl Table {
    fn map(fd: i32, held: i32, slot_size: usize, key_off: usize, start_off: usize) -> Result<Table> {
        let stride = slot_size.div_ceil(8) * 8;
        // The map's own size, not an assumption: NR_SLOTS of bpf/phases.h.
        let mut info = libbpf_rs::libbpf_sys::bpf_map_info::default();
        let mut n = std::mem::size_of_val(&info) as u32;
        // SAFETY: info is a bpf_map_info of the size given.
        let rc = unsafe { libbpf_rs::libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut n) };
        if rc != 0 || info.max_entries as usize != crate::model::NR_SLOTS || info.value_size as usize != slot_size {
            return Err(anyhow!(
                "a per-I/O table is not the layout expected ({} slots of {} bytes, expected {} of {slot_size})",
                info.max_entries,
                info.value_size,
                crate::model::NR_SLOTS
            ));
        }
        let len = (crate::model::NR_SLOTS * stride).div_ceil(4096) * 4096;
        // SAFETY: a shared mapping of an mmapable array map's values (BPF_F_MMAPABLE).
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(anyhow!("mapping a per-I/O table for expiry: {}", std::io::Error::last_os_error()));
        }
        Ok(Table { ptr: ptr.cast(), len, stride, key_off, start_off, mapped: true, held })
    }

    /// Frees the slots that started before `cutoff` (monotonic ns); how many.
    fn sweep(&self, cutoff: u64) -> u64 {
        let mut freed = 0;
        for i in 0..self.len / self.stride {
            let base = i * self.stride;
            // SAFETY: both words lie inside the mapping, 8-byte aligned (stride and offsets are
            // multiples of 8); the probes access them concurrently only through atomics or
            // plain 8-byte stores, which AtomicU64 loads tolerate.
            let (key, start) = unsafe {
                (
                    AtomicU64::from_ptr(self.ptr.add(base + self.key_off).cast()),
                    AtomicU64::from_ptr(self.ptr.add(base + self.start_off).cast()),
                )
            };
            let k = key.load(Ordering::Acquire);
            if k == 0 {
                continue;
            }
            let s = start.load(Ordering::Acquire);
            if s != 0 && s < cutoff && key.compare_exchange(k, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                freed += 1;
                if self.held >= 0 {
                    let idx = i as u32;
                    // SAFETY: a u32 key of the held hash; ENOENT (the modern build) is fine.
                    unsafe { libbpf_rs::libbpf_sys::bpf_map_delete_elem(self.held, (&idx as *const u32).cast()) };
                }
            }
        }
        freed
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: unmapping what map() mapped.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }
}

/// The two tables of a live session.
pub struct Expiry {
    ios: Table,
    links: Table,
    /// Slots freed so far: I/Os (and bio links) that never closed.
    pub expired_ios: u64,
    pub expired_links: u64,
}

impl Expiry {
    /// Each table as (its fd, its held-index hash's fd).
    pub fn new(ios_fd: [i32; 2], links_fd: [i32; 2]) -> Result<Expiry> {
        use std::mem::{offset_of, size_of};
        let ios = Table::map(
            ios_fd[0],
            ios_fd[1],
            size_of::<io_slot>(),
            offset_of!(io_slot, key),
            offset_of!(io_slot, r) + crate::events::off::SUBMIT_TS,
        )?;
        let links = Table::map(
            links_fd[0],
            links_fd[1],
            size_of::<link_slot>(),
            offset_of!(link_slot, key),
            offset_of!(link_slot, start),
        )?;
        Ok(Expiry { ios, links, expired_ios: 0, expired_links: 0 })
    }

    /// Frees what started more than `max_age` before `now_ns` (CLOCK_MONOTONIC, the probes'
    /// bpf_ktime_get_ns).
    pub fn sweep(&mut self, now_ns: u64, max_age: std::time::Duration) {
        let cutoff = now_ns.saturating_sub(max_age.as_nanos() as u64);
        self.expired_ios += self.ios.sweep(cutoff);
        self.expired_links += self.links.sweep(cutoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slots_started_before_the_cutoff_are_freed() {
        // Four slots of 4 words: key at word 0, start at word 2.
        let mut mem: Vec<u64> = vec![0; 16];
        for (i, (key, start)) in [(0u64, 5u64), (0xa, 5), (0xb, 500), (0xc, 0)].iter().enumerate() {
            mem[i * 4] = *key;
            mem[i * 4 + 2] = *start;
        }
        let t = Table {
            ptr: mem.as_mut_ptr().cast(),
            len: 16 * 8,
            stride: 32,
            key_off: 0,
            start_off: 16,
            mapped: false,
            held: -1,
        };
        // Free slot 0 stays free; 0xa started at 5 < 100: freed; 0xb at 500: kept; 0xc has no
        // start yet (being claimed): kept.
        assert_eq!(t.sweep(100), 1);
        drop(t);
        assert_eq!([mem[0], mem[4], mem[8], mem[12]], [0, 0, 0xb, 0xc]);
    }
}
