//! One aligned I/O buffer per queue slot (O_DIRECT needs the address aligned too).

use std::alloc::{alloc_zeroed, dealloc, Layout};

pub struct Buffers {
    ptr: *mut u8,
    layout: Layout,
    bs: usize,
    n: usize,
}

impl Buffers {
    pub fn new(n: usize, bs: usize, align: usize) -> Self {
        let align = align.max(4096).next_power_of_two();
        let stride = bs.div_ceil(align) * align;
        let layout = Layout::from_size_align(stride * n, align).expect("buffer layout fits in memory");
        // SAFETY: the layout has a non-zero size (n >= 1 and bs >= 1 are validated by the job).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {} bytes of I/O buffers", layout.size());
        let mut b = Buffers { ptr, layout, bs: stride, n };
        // Not all zeros, so compressing or deduplicating devices see real data (fio does the same).
        for i in 0..n {
            super::pattern::fill(b.slot(i as u32), 0x5eed, i as u64 * stride as u64);
        }
        b.bs = bs;
        b
    }

    fn stride(&self) -> usize {
        self.layout.size() / self.n
    }

    pub fn addr(&self, slot: u32) -> *mut u8 {
        assert!((slot as usize) < self.n);
        // SAFETY: in bounds by the assert.
        unsafe { self.ptr.add(slot as usize * self.stride()) }
    }

    pub fn slot(&mut self, slot: u32) -> &mut [u8] {
        // SAFETY: addr() is in bounds and each slot's range is disjoint; &mut self excludes aliases.
        unsafe { std::slice::from_raw_parts_mut(self.addr(slot), self.bs) }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn bs(&self) -> usize {
        self.bs
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
