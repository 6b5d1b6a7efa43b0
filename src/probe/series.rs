//! The trace over time without a per-I/O cost: a thread reads the cumulative per-phase histograms
//! and the IRQ / context-switch / byte counters at every interval edge and keeps the differences.
//! One read is 9 histograms x 9.5 KiB per CPU plus the counters: measured 120-180 us on this
//! 2-vCPU VM (raw.json's `series.reads` / `read_ns` keep each trace's own figure); at the
//! default 1 s interval that is 0.02% of a CPU, at the 10 ms minimum 1.2%.
//!
//! The edges are the generator's own (`loadgen::START_LINE` + k x interval), so each interval of
//! the trace lines up with the same interval of the generator's time series; a traced command
//! or process counts from the moment the probes were enabled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::model::{RawInterval, RawSeries, RouteKind, HIST_SLOTS, SERIES_COUNTERS, SERIES_PHASES};

/// The maps read, by fd (the thread cannot borrow the skeleton).
#[derive(Clone, Copy)]
pub struct Fds {
    pub hists: i32,
    pub phase_counters: i32,
    pub count_counters: i32,
    pub routes: i32,
}

/// Where the series' time starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Start {
    /// At the bundled generator's start line (it runs in this process).
    Generator,
    /// When sampling starts: the probes were just enabled.
    Now,
}

pub(crate) fn lookup_percpu(fd: i32, key: u32, size: usize, ncpu: usize, buf: &mut Vec<u8>) -> bool {
    let stride = size.div_ceil(8) * 8;
    buf.resize(stride * ncpu, 0);
    // SAFETY: the key is a u32 and the buffer holds one value per possible CPU, as the kernel
    // writes for a per-CPU map.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_map_lookup_elem(
            fd,
            (&key as *const u32).cast(),
            buf.as_mut_ptr().cast::<std::ffi::c_void>(),
        )
    };
    rc == 0
}

/// A per-CPU u64 (a counter) summed over the CPUs; 0 when the lookup fails.
pub(crate) fn percpu_u64(fd: i32, key: u32, ncpu: usize, buf: &mut Vec<u8>) -> u64 {
    if !lookup_percpu(fd, key, 8, ncpu, buf) {
        return 0;
    }
    buf.chunks(8).map(|w| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]))).sum()
}

/// Cumulative values at one instant.
#[derive(Clone, Default)]
struct Snapshot {
    /// Per series phase: dense slots (calls only need them for `Total` and the buffered ones).
    slots: Vec<Vec<u64>>,
    sums: Vec<u64>,
    counters: Vec<u64>,
    cached: (u64, u64),
}

/// The i-th native-endian u64 of a map value's bytes (0 past its end).
pub(crate) fn word(b: &[u8], i: usize) -> u64 {
    b.get(i * 8..i * 8 + 8).map_or(0, |w| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])))
}

fn snapshot(fds: Fds, ncpu: usize, buf: &mut Vec<u8>) -> Snapshot {
    let hist_size = (HIST_SLOTS + 2) * 8;
    let mut s = Snapshot::default();
    for ph in SERIES_PHASES {
        let mut dense = vec![0u64; HIST_SLOTS];
        let mut sum = 0;
        if lookup_percpu(fds.hists, ph as u32, hist_size, ncpu, buf) {
            for cpu in buf.chunks(hist_size.div_ceil(8) * 8) {
                for (i, d) in dense.iter_mut().enumerate() {
                    *d += word(cpu, i);
                }
                sum += word(cpu, HIST_SLOTS);
            }
        }
        s.slots.push(dense);
        s.sums.push(sum);
    }
    let sum_u64 = |fd: i32, key: u32, buf: &mut Vec<u8>| -> u64 {
        if lookup_percpu(fd, key, 8, ncpu, buf) {
            buf.chunks(8).map(|c| word(c, 0)).sum()
        } else {
            0
        }
    };
    for c in SERIES_COUNTERS {
        s.counters.push(sum_u64(fds.phase_counters, c as u32, buf) + sum_u64(fds.count_counters, c as u32, buf));
    }
    let k = RouteKind::UringCached as u32 * 2;
    s.cached = (sum_u64(fds.routes, k, buf), sum_u64(fds.routes, k + 1, buf));
    s
}

/// The interval between two snapshots.
fn diff(a: &Snapshot, b: &Snapshot, t_ns: u64, dur_ns: u64) -> RawInterval {
    let count = |v: &Vec<u64>| v.iter().sum::<u64>();
    let phases = (0..SERIES_PHASES.len())
        .map(|i| (count(&b.slots[i]).saturating_sub(count(&a.slots[i])), b.sums[i].saturating_sub(a.sums[i])))
        .collect();
    // The application's calls: every series phase from `Total` on (as Report::from_process).
    let mut calls = vec![0u64; HIST_SLOTS];
    for i in 4..SERIES_PHASES.len() {
        for (slot, c) in calls.iter_mut().enumerate() {
            *c += b.slots[i][slot].saturating_sub(a.slots[i][slot]);
        }
    }
    RawInterval {
        t_ns,
        dur_ns,
        phases,
        calls: calls.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| (i as u32, c)).collect(),
        counters: b.counters.iter().zip(&a.counters).map(|(b, a)| b.saturating_sub(*a)).collect(),
        cached: (b.cached.0.saturating_sub(a.cached.0), b.cached.1.saturating_sub(a.cached.1)),
    }
}

/// Samples until `stop`, then once more at the end; None before a start line was seen.
pub fn sample(fds: Fds, interval: Duration, start: Start, stop: &AtomicBool) -> Option<RawSeries> {
    let ncpu = libbpf_rs::num_possible_cpus().ok()?;
    let interval_ns = interval.as_nanos() as u64;
    let spawned = crate::loadgen::now_ns();
    let t0 = match start {
        Start::Now => spawned,
        Start::Generator => loop {
            // The start line of this run, not of one before it in the same process (a sweep).
            let line = crate::loadgen::START_LINE.load(Ordering::Acquire);
            if line > spawned {
                break line;
            }
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        },
    };
    let mut buf = Vec::new();
    // The maps are this session's and count nothing before the probes are enabled: the series
    // starts from zero. (A first snapshot taken here would be late: a traced command's first
    // calls, its startup reads, went missing from the series that way: 5 of 5976.)
    let mut prev = Snapshot {
        slots: vec![vec![0; HIST_SLOTS]; SERIES_PHASES.len()],
        sums: vec![0; SERIES_PHASES.len()],
        counters: vec![0; SERIES_COUNTERS.len()],
        cached: (0, 0),
    };
    let mut out = RawSeries {
        interval_ns,
        from_generator: start == Start::Generator,
        intervals: Vec::new(),
        reads: 0,
        read_ns: 0,
    };
    let mut k = 0u64;
    loop {
        let edge = t0 + (k + 1) * interval_ns;
        // Sleep to the edge in short steps so the end of the trace is not waited for.
        while !stop.load(Ordering::Relaxed) && crate::loadgen::now_ns() < edge {
            let left = edge.saturating_sub(crate::loadgen::now_ns());
            std::thread::sleep(Duration::from_nanos(left.min(20_000_000)));
        }
        let done = stop.load(Ordering::Relaxed);
        let now = crate::loadgen::now_ns();
        let cur = snapshot(fds, ncpu, &mut buf);
        out.reads += 1;
        out.read_ns += crate::loadgen::now_ns().saturating_sub(now);
        let t = k * interval_ns;
        let end = if done { now.saturating_sub(t0).max(t + 1) } else { t + interval_ns };
        out.intervals.push(diff(&prev, &cur, t, end - t));
        prev = cur;
        k += 1;
        if done {
            return Some(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_the_difference_of_its_edges() {
        let n = SERIES_PHASES.len();
        let mut a = Snapshot {
            slots: vec![vec![0; HIST_SLOTS]; n],
            sums: vec![0; n],
            counters: vec![0; SERIES_COUNTERS.len()],
            cached: (1, 0),
        };
        a.slots[2][100] = 5;
        a.sums[2] = 500;
        let mut b = a.clone();
        b.slots[2][100] = 8;
        b.sums[2] = 830;
        b.slots[4][40] = 2; // Total
        b.slots[5][41] = 1; // a buffered read
        b.counters[0] = 6;
        b.cached = (3, 1);
        let i = diff(&a, &b, 1000, 1000);
        assert_eq!(i.phases[2], (3, 330));
        assert_eq!(i.phases[0], (0, 0));
        assert_eq!(i.calls, vec![(40, 2), (41, 1)]);
        assert_eq!(i.counters[0], 6);
        assert_eq!(i.cached, (2, 1));
    }
}
