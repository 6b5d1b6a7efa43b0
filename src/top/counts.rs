//! What the kernel keeps per (process, disk, route, direction) for `iopath top` (`struct
//! top_key` / `struct top_val`, bpf/phases.h), and the arithmetic on it: differences between
//! two reads, sums over rows, quantiles. Pure.

use serde::{Deserialize, Serialize};

/// Mirrors bpf/phases.h (asserted against the skeleton's types in probe/mod.rs).
pub const TOP_SUB_BITS: u32 = 3;
pub const TOP_MIN_MSB: u32 = 10;
pub const TOP_MAX_MSB: u32 = 35;
pub const TOP_SLOTS: usize = 1 + ((TOP_MAX_MSB - TOP_MIN_MSB + 1) << TOP_SUB_BITS) as usize;
pub const TOP_PHASES: usize = 4;
/// The phases in the kernel's order, as metrics and columns name them.
pub const PHASE_NAMES: [&str; TOP_PHASES] = ["submission", "block", "device", "completion"];

/// One row of the kernel's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    /// The process (0: bios kernel threads queued, the flushers' and the journal's).
    pub tgid: u32,
    /// The kernel's dev_t (major << 20 | minor).
    pub dev: u32,
    /// `enum route_kind` of the submit route, or TOP_ROUTE_* (a bio of no followed I/O).
    pub route: u16,
    pub write: bool,
    /// The io cgroup the I/O's first bio was charged to (bi_blkg: its directory's inode in the
    /// io hierarchy), 0 when the bio named none: then the process's cgroup stands for it.
    #[serde(default)]
    pub cgroup: u64,
}

/// `struct top_key`'s size (bpf/phases.h; asserted against the skeleton in top::live).
pub const KEY_BYTES: usize = 24;
/// STAMPS_ROWS (bpf/phases.h): the one-hook tier's row slots per CPU (checked against the map
/// when it is loaded, probe::stamps).
pub const STAMP_ROWS: u32 = 16;
/// `struct stamps_val`'s size: ios, bytes, sum[2], slots[2 * TOP_SLOTS].
pub const STAMPS_VAL_BYTES: usize = 8 * (4 + 2 * TOP_SLOTS);

impl Key {
    /// `struct top_key`: cgroup u64, tgid u32, dev u32, route u16, write u16, pad u32.
    pub fn to_bytes(&self) -> [u8; KEY_BYTES] {
        let mut b = [0u8; KEY_BYTES];
        b[0..8].copy_from_slice(&self.cgroup.to_ne_bytes());
        b[8..12].copy_from_slice(&self.tgid.to_ne_bytes());
        b[12..16].copy_from_slice(&self.dev.to_ne_bytes());
        b[16..18].copy_from_slice(&self.route.to_ne_bytes());
        b[18..20].copy_from_slice(&(self.write as u16).to_ne_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; KEY_BYTES]) -> Key {
        let w32 = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let w16 = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        Key {
            cgroup: u64::from_ne_bytes(b[0..8].try_into().unwrap_or([0; 8])),
            tgid: w32(8),
            dev: w32(12),
            route: w16(16),
            write: w16(18) != 0,
        }
    }
}

/// bpf/phases.h STAMPS_NO_PROCESS: a one-hook row (completion runs where no process is known).
pub const NO_PROCESS: u32 = u32::MAX;
/// How top names the one-hook tier's rows: every process of the cgroup, none measured.
pub const NO_PROCESS_COMM: &str = "(--phases)";

/// bpf/phases.h TOP_ROUTE_*: bios of no I/O a route follows, counted as I/Os of their own.
pub const ROUTE_PAGECACHE: u16 = 16;
pub const ROUTE_WRITEBACK: u16 = 17;

/// The submit route's name (`enum route_kind`, the routes a top row can have).
pub fn route_name(route: u16) -> &'static str {
    match route {
        0 => "uring",
        1 => "sqpoll",
        2 => "iowq",
        3 => "aio",
        4 => "sync",
        // Queued by a process outside any I/O iopath follows: its buffered reads' readahead,
        // its fsync's or dirty throttling's writeback, metadata.
        ROUTE_PAGECACHE => "pagecache",
        // Queued by a kernel thread: the flushers, the journal, kworkers.
        ROUTE_WRITEBACK => "writeback",
        // The one-hook tier (enum stamps_route): the first bio's end_io names the route.
        20 => "direct",
        21 => "waited",
        // An end_io iopath does not name (the page cache's, journals', a file system's own
        // direct I/O's, btrfs's): not called buffered, which it need not be.
        22 => "other",
        23 => "flush",
        24 => "passthrough",
        26 => "stacked",
        _ => "other",
    }
}

/// Closed I/Os, their bytes and phases: cumulative as read, or a difference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub ios: u64,
    pub bytes: u64,
    /// Nanoseconds per phase.
    pub sum: [u64; TOP_PHASES],
    /// Phase p's buckets at p * TOP_SLOTS.
    pub slots: Vec<u64>,
}

impl Default for Counts {
    fn default() -> Counts {
        Counts { ios: 0, bytes: 0, sum: [0; TOP_PHASES], slots: vec![0; TOP_PHASES * TOP_SLOTS] }
    }
}

/// Bucket `i`'s bounds in ns: [lower, upper); the last is open (u64::MAX).
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 1 << TOP_MIN_MSB);
    }
    let j = (i - 1) as u64;
    let msb = TOP_MIN_MSB as u64 + (j >> TOP_SUB_BITS);
    let sub = j & ((1 << TOP_SUB_BITS) - 1);
    let step = 1u64 << (msb - TOP_SUB_BITS as u64);
    let lower = (1u64 << msb) + sub * step;
    if i == TOP_SLOTS - 1 {
        (lower, u64::MAX)
    } else {
        (lower, lower + step)
    }
}

impl Counts {
    /// From the kernel's value: ios, bytes, sum[4], slots[4 * TOP_SLOTS], native-endian u64s.
    pub fn from_bytes(b: &[u8]) -> Option<Counts> {
        let w = |i: usize| b.get(i * 8..i * 8 + 8).map(|x| u64::from_ne_bytes(x.try_into().unwrap_or([0; 8])));
        let mut c = Counts { ios: w(0)?, bytes: w(1)?, ..Default::default() };
        for p in 0..TOP_PHASES {
            c.sum[p] = w(2 + p)?;
        }
        for (i, s) in c.slots.iter_mut().enumerate() {
            *s = w(2 + TOP_PHASES + i)?;
        }
        Some(c)
    }

    /// From the one-hook tier's per-CPU value (`struct stamps_val`: ios, bytes, sum[2],
    /// slots[2 * TOP_SLOTS]), one CPU's copy after another: summed, its block and device phases
    /// as phases 1 and 2 (submission and completion stay empty: not measured, never a zero).
    pub fn from_stamps_percpu(b: &[u8], ncpu: usize) -> Option<Counts> {
        let words = 4 + 2 * TOP_SLOTS;
        let mut c = Counts::default();
        for cpu in 0..ncpu {
            let at = cpu * words;
            let w = |i: usize| {
                b.get((at + i) * 8..(at + i) * 8 + 8).map(|x| u64::from_ne_bytes(x.try_into().unwrap_or([0; 8])))
            };
            c.ios += w(0)?;
            c.bytes += w(1)?;
            c.sum[1] += w(2)?;
            c.sum[2] += w(3)?;
            for i in 0..2 * TOP_SLOTS {
                c.slots[TOP_SLOTS + i] += w(4 + i)?;
            }
        }
        Some(c)
    }

    /// One row slot of the one-hook tier as every CPU holds it (`struct stamps_row`: the key,
    /// then `struct stamps_val`, one CPU's copy after another): each CPU's slot may hold a
    /// different key (the slot is a hash of the key; a CPU claims it for the first key it sees),
    /// so the copies are grouped by their own key; a free copy (tgid 0) holds nothing.
    pub fn from_stamp_row_percpu(b: &[u8], ncpu: usize) -> Vec<(Key, Counts)> {
        let per = KEY_BYTES + STAMPS_VAL_BYTES;
        let mut out: Vec<(Key, Counts)> = Vec::new();
        for cpu in 0..ncpu {
            let Some(copy) = b.get(cpu * per..(cpu + 1) * per) else { break };
            let Ok(kb) = <[u8; KEY_BYTES]>::try_from(&copy[..KEY_BYTES]) else { break };
            let key = Key::from_bytes(&kb);
            if key.tgid == 0 {
                continue;
            }
            let Some(c) = Counts::from_stamps_percpu(&copy[KEY_BYTES..], 1) else { continue };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, sum)) => sum.add(&c),
                None => out.push((key, c)),
            }
        }
        out
    }

    pub fn add(&mut self, o: &Counts) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        for p in 0..TOP_PHASES {
            self.sum[p] += o.sum[p];
        }
        for (a, b) in self.slots.iter_mut().zip(&o.slots) {
            *a += b;
        }
    }

    /// What happened since `earlier` (a key deleted and made again counts from zero).
    pub fn since(&self, earlier: &Counts) -> Counts {
        if earlier.ios > self.ios {
            return self.clone();
        }
        Counts {
            ios: self.ios - earlier.ios,
            bytes: self.bytes.saturating_sub(earlier.bytes),
            sum: std::array::from_fn(|p| self.sum[p].saturating_sub(earlier.sum[p])),
            slots: self.slots.iter().zip(&earlier.slots).map(|(a, b)| a.saturating_sub(*b)).collect(),
        }
    }

    pub fn phase(&self, p: usize) -> &[u64] {
        &self.slots[p * TOP_SLOTS..(p + 1) * TOP_SLOTS]
    }

    pub fn phase_count(&self, p: usize) -> u64 {
        self.phase(p).iter().sum()
    }

    /// Quantile q of phase p in ns, interpolated linearly inside its bucket (as Prometheus'
    /// histogram_quantile does); None without I/O.
    pub fn quantile(&self, p: usize, q: f64) -> Option<u64> {
        let slots = self.phase(p);
        let n: u64 = slots.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = q * n as f64;
        let mut seen = 0u64;
        for (i, &c) in slots.iter().enumerate() {
            if c > 0 && (seen + c) as f64 >= rank {
                let (lo, hi) = bucket_bounds(i);
                if hi == u64::MAX {
                    return Some(lo);
                }
                let into = ((rank - seen as f64) / c as f64).clamp(0.0, 1.0);
                return Some(lo + ((hi - lo) as f64 * into) as u64);
            }
            seen += c;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets as bpf/top.bpf.h's top_slot files values.
    fn slot_of(v: u64) -> usize {
        if v < 1 << TOP_MIN_MSB {
            return 0;
        }
        let msb = 63 - v.leading_zeros() as u64;
        if msb > TOP_MAX_MSB as u64 {
            return TOP_SLOTS - 1;
        }
        let sub = (v >> (msb - TOP_SUB_BITS as u64)) & ((1 << TOP_SUB_BITS) - 1);
        (1 + ((msb - TOP_MIN_MSB as u64) << TOP_SUB_BITS) + sub) as usize
    }

    /// One CPU's `struct stamps_row` copy: key, ios, bytes, sum[2], slots.
    fn stamp_row(key: &Key, ios: u64, block_ns: u64, device_ns: u64) -> Vec<u8> {
        let mut b = key.to_bytes().to_vec();
        let mut words = vec![0u64; 4 + 2 * TOP_SLOTS];
        words[0] = ios;
        words[1] = ios * 4096;
        words[2] = block_ns * ios;
        words[3] = device_ns * ios;
        words[4 + slot_of(block_ns)] = ios;
        words[4 + TOP_SLOTS + slot_of(device_ns)] = ios;
        for w in words {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_row_slot_groups_each_cpus_copy_by_its_own_key() {
        let a = Key { tgid: u32::MAX, dev: (7 << 20) | 1, route: 20, write: false, cgroup: 5 };
        let b = Key { route: 22, ..a };
        let free = Key { tgid: 0, dev: 0, route: 0, write: false, cgroup: 0 };
        // Four CPUs: a, free, b, a (the slot claimed by different keys on different CPUs).
        let mut buf = stamp_row(&a, 10, 2000, 30_000);
        buf.extend(stamp_row(&free, 0, 0, 0));
        buf.extend(stamp_row(&b, 3, 5000, 90_000));
        buf.extend(stamp_row(&a, 5, 2000, 30_000));
        let rows = Counts::from_stamp_row_percpu(&buf, 4);
        assert_eq!(rows.len(), 2, "{rows:?}");
        let (ka, ca) = &rows[0];
        assert_eq!(*ka, a);
        assert_eq!((ca.ios, ca.bytes, ca.sum[1], ca.sum[2]), (15, 15 * 4096, 15 * 2000, 15 * 30_000));
        assert_eq!(ca.phase_count(1), 15);
        assert_eq!(ca.phase_count(0), 0, "submission is not measured in the one-hook tier");
        let (kb, cb) = &rows[1];
        assert_eq!((*kb, cb.ios, cb.phase_count(2)), (b, 3, 3));
        // A short buffer (fewer CPUs' copies than said) yields what it holds, no panic.
        assert_eq!(Counts::from_stamp_row_percpu(&buf[..buf.len() / 2], 4).len(), 1);
    }

    #[test]
    fn buckets_tile_the_axis_and_hold_their_values() {
        assert_eq!(TOP_SLOTS, 209);
        for i in 1..TOP_SLOTS {
            assert_eq!(bucket_bounds(i - 1).1, bucket_bounds(i).0, "bucket {i}");
        }
        for v in [0u64, 1023, 1024, 1151, 1152, 99_999, 1 << 35, (1 << 36) - 1, 1 << 40] {
            let (lo, hi) = bucket_bounds(slot_of(v));
            assert!(lo <= v && v < hi, "{v} in [{lo}, {hi})");
        }
        // A bucket's width is at most 1/8 of its lower bound (above the first).
        for i in 1..TOP_SLOTS - 1 {
            let (lo, hi) = bucket_bounds(i);
            assert!((hi - lo) * 8 <= lo, "bucket {i}");
        }
    }

    #[test]
    fn quantiles_differences_and_bytes() {
        let mut c = Counts::default();
        // 99 device times of 100 us, one of 5 ms.
        for v in std::iter::repeat_n(100_000, 99).chain([5_000_000]) {
            c.slots[2 * TOP_SLOTS + slot_of(v)] += 1;
            c.sum[2] += v;
            c.ios += 1;
        }
        let p50 = c.quantile(2, 0.5).unwrap();
        assert!((94_000..=106_000).contains(&p50), "{p50}");
        let p999 = c.quantile(2, 0.999).unwrap();
        assert!((4_500_000..=5_300_000).contains(&p999), "{p999}");
        assert_eq!(c.quantile(0, 0.5), None, "no submission recorded: unknown, not 0");
        let mut later = c.clone();
        later.add(&c);
        let d = later.since(&c);
        assert_eq!(d, c);
        // A key deleted and made again: the new count is the difference.
        assert_eq!(c.since(&later), c);
        let mut raw = Vec::new();
        for w in [c.ios, c.bytes].iter().chain(&c.sum).chain(&c.slots) {
            raw.extend_from_slice(&w.to_ne_bytes());
        }
        assert_eq!(Counts::from_bytes(&raw), Some(c));
        assert_eq!(Counts::from_bytes(&raw[..100]), None);
    }

    #[test]
    fn keys_round_trip_the_kernel_layout() {
        let k = Key { tgid: 7, dev: (8 << 20) | 1, route: ROUTE_WRITEBACK, write: true, cgroup: 0x1_0000_0042 };
        let b = k.to_bytes();
        assert_eq!(&b[0..8], &0x1_0000_0042u64.to_ne_bytes(), "cgroup first, as struct top_key");
        assert_eq!(Key::from_bytes(&b), k);
        assert_eq!(route_name(k.route), "writeback");
    }
}
