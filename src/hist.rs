//! Log-linear latency histogram (HdrHistogram's layout): values below 128 are exact, above that
//! every power of two is split into 128 equal buckets, so a bucket is at most 1/128 of its lower
//! bound wide and its midpoint is within 0.4% of any value in it. Fixed size (58 KiB), no
//! allocation on the record path, mergeable across threads.

use serde::Serialize;

const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
/// Octave 0 holds the exact values 0..128; octaves 1..=57 cover msb 7..=63.
pub const NBUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

#[derive(Clone)]
pub struct Hist {
    counts: Box<[u64; NBUCKETS]>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
pub fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = ((v >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    (((msb - SUB_BITS + 1) as usize) << SUB_BITS) + sub
}

/// Lowest value and width of bucket `i`.
pub fn bucket_range(i: usize) -> (u64, u64) {
    bucket_range_with(i, SUB_BITS)
}

/// The same layout with 2^`sub_bits` buckets per power of two (the BPF side uses 5: see
/// bpf/hist.bpf.h).
pub fn bucket_range_with(i: usize, sub_bits: u32) -> (u64, u64) {
    let sub_n = 1usize << sub_bits;
    if i < sub_n {
        return (i as u64, 1);
    }
    let octave = (i >> sub_bits) as u32;
    let sub = (i & (sub_n - 1)) as u64;
    let width = 1u64 << (octave - 1);
    ((sub_n as u64 + sub) * width, width)
}

impl Hist {
    pub fn new() -> Self {
        Hist { counts: Box::new([0; NBUCKETS]), count: 0, sum: 0, min: u64::MAX, max: 0 }
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> f64 {
        mean_of(self.sum as f64, self.count)
    }

    /// The value at rank ceil(q * count), as fio computes percentiles.
    pub fn quantile(&self, q: f64) -> u64 {
        quantile_of(self.counts.iter().copied().enumerate(), SUB_BITS, q, self.min, self.max)
    }

    pub fn summary(&self) -> LatSummary {
        LatSummary {
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            mean: self.mean().round() as u64,
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max,
        }
    }
}

/// The value at rank ceil(q * n) of a log-linear histogram given as (bucket, count) in bucket
/// order, with 2^`sub_bits` buckets per power of two: the bucket's midpoint, clamped to the exact
/// min and max. One definition for the generator's and the kernel's histograms.
pub fn quantile_of(
    buckets: impl Iterator<Item = (usize, u64)> + Clone,
    sub_bits: u32,
    q: f64,
    min: u64,
    max: u64,
) -> u64 {
    let n: u64 = buckets.clone().map(|(_, c)| c).sum();
    if n == 0 {
        return 0;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in buckets {
        seen += c;
        if seen >= rank {
            let (lo, width) = bucket_range_with(i, sub_bits);
            return (lo + (width - 1) / 2).clamp(min, max.max(min));
        }
    }
    max
}

/// Mean of `sum` over `count`, 0 for an empty distribution.
pub fn mean_of(sum: f64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// The numbers a report prints for one latency distribution, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatSummary {
    pub count: u64,
    pub min: u64,
    pub mean: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        let mut next = 0u64;
        for i in 0..NBUCKETS {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i} starts where {} ended", i.saturating_sub(1));
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(lo + (w - 1)), i);
            next = lo.wrapping_add(w);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket_of(u64::MAX), NBUCKETS - 1);
    }

    #[test]
    fn relative_error_is_below_one_percent() {
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            let (lo, w) = bucket_range(bucket_of(v));
            let mid = lo + (w - 1) / 2;
            let err = (mid as f64 - v as f64).abs() / v as f64;
            assert!(err <= 0.004, "value {v}: midpoint {mid} is {err} off");
            v = v * 3 / 2 + 1;
        }
    }

    #[test]
    fn quantiles_match_exact_ranks() {
        let mut h = Hist::new();
        // 1..=10000 µs in ns: the exact p-quantile is ceil(p*n) µs.
        for i in 1..=10_000u64 {
            h.record(i * 1000);
        }
        for (q, exact) in [(0.5, 5_000_000f64), (0.9, 9_000_000.0), (0.99, 9_900_000.0), (0.999, 9_990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact < 0.01, "q{q}: {got} vs {exact}");
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min, 1000);
        assert_eq!(s.max, 10_000_000);
        assert_eq!(s.mean, 5_000_500);
        assert!(s.p50 <= s.p90 && s.p90 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max);
    }

    #[test]
    fn merge_equals_recording_everything_once() {
        let (mut a, mut b, mut all) = (Hist::new(), Hist::new(), Hist::new());
        for i in 0..5000u64 {
            let v = i * i + 7;
            if i % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
    }

    #[test]
    fn empty_is_zero_not_garbage() {
        let s = Hist::new().summary();
        assert_eq!(s, LatSummary::default());
    }
}
