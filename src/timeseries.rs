//! How a run evolved: per interval (`--interval`, 1 s by default) I/Os, bandwidth and latency
//! (p50/p99/max), from the generator's own clock reads, never from per-I/O events. Each worker
//! records into one small dense histogram for the interval in progress and keeps only its non-empty
//! buckets when the interval ends (a few hundred entries: 1000 workers x 60 s stay in megabytes);
//! the report merges the workers' intervals. Also fio's per-interval log format (`--log-prefix`),
//! so fio's plotting scripts read iopath runs.

use serde::{Deserialize, Serialize};

/// Buckets per power of two: 32 (a bucket is at most 1/32 of its value wide, midpoints within
/// 1.6%), against the run's 128: 1920 u32 counters (7.5 KiB) per worker, not 58 KiB per interval.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const NBUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = ((v >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    (((msb - SUB_BITS + 1) as usize) << SUB_BITS) + sub
}

/// One worker's finished interval.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    pub idx: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_lat_sum: u128,
    pub write_lat_sum: u128,
    pub lat_min: u64,
    pub lat_max: u64,
    /// Non-empty latency buckets (bucket, count), in bucket order.
    pub buckets: Vec<(u16, u32)>,
}

/// A worker's recorder. `interval_ns == 0`: off (records nothing).
#[derive(Clone, Default)]
pub struct Recorder {
    start_ns: u64,
    interval_ns: u64,
    /// The interval in progress spans [lo, hi) ns: no division per I/O while inside it.
    lo: u64,
    hi: u64,
    cur: Interval,
    counts: Vec<u32>,
    pub done: Vec<Interval>,
}

impl Recorder {
    pub fn new(start_ns: u64, interval_ns: u64) -> Recorder {
        Recorder {
            start_ns,
            interval_ns,
            lo: start_ns,
            hi: start_ns.saturating_add(interval_ns),
            cur: Interval { lat_min: u64::MAX, ..Interval::default() },
            counts: vec![0; if interval_ns > 0 { NBUCKETS } else { 0 }],
            done: Vec::new(),
        }
    }

    /// One I/O completed at `now` after `lat` ns.
    #[inline]
    pub fn record(&mut self, now: u64, lat: u64, bytes: u64, write: bool) {
        if self.interval_ns == 0 {
            return;
        }
        if now < self.lo || now >= self.hi {
            let idx = now.saturating_sub(self.start_ns) / self.interval_ns;
            self.flush();
            self.cur.idx = idx;
            self.lo = self.start_ns + idx * self.interval_ns;
            self.hi = self.lo + self.interval_ns;
        }
        let c = &mut self.cur;
        if write {
            c.writes += 1;
            c.bytes_written += bytes;
            c.write_lat_sum += u128::from(lat);
        } else {
            c.reads += 1;
            c.bytes_read += bytes;
            c.read_lat_sum += u128::from(lat);
        }
        c.lat_min = c.lat_min.min(lat);
        c.lat_max = c.lat_max.max(lat);
        self.counts[bucket_of(lat)] += 1;
    }

    fn flush(&mut self) {
        if self.cur.reads + self.cur.writes == 0 {
            return;
        }
        let mut buckets = Vec::new();
        for (i, c) in self.counts.iter_mut().enumerate() {
            if *c > 0 {
                buckets.push((i as u16, *c));
                *c = 0;
            }
        }
        let idx = self.cur.idx;
        let finished = std::mem::replace(&mut self.cur, Interval { idx, lat_min: u64::MAX, ..Interval::default() });
        self.done.push(Interval { buckets, ..finished });
    }

    /// Ends the interval in progress: every I/O recorded is in `done`.
    pub fn finish(&mut self) {
        if self.interval_ns > 0 {
            self.flush();
        }
    }

    /// Another worker's finished intervals join this one's (merged by index in `summarize`).
    pub fn absorb(&mut self, o: &Recorder) {
        self.interval_ns = self.interval_ns.max(o.interval_ns);
        self.done.extend(o.done.iter().cloned());
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }
}

/// The run over time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimeSeries {
    pub interval_ns: u64,
    pub points: Vec<Point>,
}

/// One interval of the run. Latency is absent (unknown, never zero) where nothing completed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// Start of the interval, from the run's start line.
    pub t_ns: u64,
    /// Its length: `interval_ns`, or less for the last one.
    pub dur_ns: u64,
    pub reads: u64,
    pub writes: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_lat_mean_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_lat_mean_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p99_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_max_ns: Option<u64>,
}

/// Merges the workers' intervals into one point per interval of a run `elapsed_ns` long (the
/// completions after the last full interval, the tail's drain, fall in a shorter last one).
pub fn summarize(intervals: &[Interval], interval_ns: u64, elapsed_ns: u64) -> Option<TimeSeries> {
    if interval_ns == 0 {
        return None;
    }
    let last = intervals.iter().map(|i| i.idx).max().unwrap_or(0).max(elapsed_ns.saturating_sub(1) / interval_ns);
    let n = last as usize + 1;
    let mut merged: Vec<Interval> =
        (0..n).map(|i| Interval { idx: i as u64, lat_min: u64::MAX, ..Interval::default() }).collect();
    let mut counts: Vec<Vec<u64>> = vec![Vec::new(); n];
    for iv in intervals {
        let m = &mut merged[iv.idx as usize];
        m.reads += iv.reads;
        m.writes += iv.writes;
        m.bytes_read += iv.bytes_read;
        m.bytes_written += iv.bytes_written;
        m.read_lat_sum += iv.read_lat_sum;
        m.write_lat_sum += iv.write_lat_sum;
        m.lat_min = m.lat_min.min(iv.lat_min);
        m.lat_max = m.lat_max.max(iv.lat_max);
        let c = &mut counts[iv.idx as usize];
        if c.is_empty() {
            c.resize(NBUCKETS, 0);
        }
        for &(b, k) in &iv.buckets {
            c[b as usize] += u64::from(k);
        }
    }
    let points = merged
        .iter()
        .zip(&counts)
        .map(|(m, c)| {
            let t_ns = m.idx * interval_ns;
            // The last interval ends with the run (its drain may run past it: at least 1 ms).
            let dur_ns =
                if m.idx == last { elapsed_ns.saturating_sub(t_ns).clamp(1_000_000, interval_ns) } else { interval_ns };
            let secs = dur_ns as f64 / 1e9;
            let ios = m.reads + m.writes;
            let mean = |sum: u128, n: u64| (n > 0).then(|| (sum / u128::from(n)) as u64);
            let q = |p: f64| {
                (ios > 0)
                    .then(|| crate::hist::quantile_of(c.iter().copied().enumerate(), SUB_BITS, p, m.lat_min, m.lat_max))
            };
            Point {
                t_ns,
                dur_ns,
                reads: m.reads,
                writes: m.writes,
                iops: ios as f64 / secs,
                bw_bytes: (m.bytes_read + m.bytes_written) as f64 / secs,
                read_lat_mean_ns: mean(m.read_lat_sum, m.reads),
                write_lat_mean_ns: mean(m.write_lat_sum, m.writes),
                lat_p50_ns: q(0.50),
                lat_p99_ns: q(0.99),
                lat_max_ns: (ios > 0).then_some(m.lat_max),
            }
        })
        .collect();
    Some(TimeSeries { interval_ns, points })
}

/// Which of fio's per-interval logs (`write_iops_log`, `write_bw_log`, `write_lat_log` with
/// `log_avg_msec`): fio names them `<prefix>_iops.1.log`, `_bw.1.log`, `_lat.1.log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FioLog {
    Iops,
    Bw,
    Lat,
}

impl FioLog {
    pub const ALL: [FioLog; 3] = [FioLog::Iops, FioLog::Bw, FioLog::Lat];

    pub fn suffix(self) -> &'static str {
        match self {
            FioLog::Iops => "_iops.1.log",
            FioLog::Bw => "_bw.1.log",
            FioLog::Lat => "_lat.1.log",
        }
    }
}

/// One of fio's averaged logs: `time (ms, the interval's end), value, direction (0 read, 1
/// write), block size, offset` per line and direction, as fio 3.33 writes them with
/// `log_avg_msec` (iops per second, bandwidth in KiB/s, mean latency in ns; block size and offset
/// 0 when averaged). An interval where a direction did nothing has no line for it, as in fio.
pub fn write_fio_log(ts: &TimeSeries, kind: FioLog, bs: u64, w: &mut impl std::io::Write) -> std::io::Result<()> {
    for p in &ts.points {
        let ms = (p.t_ns + p.dur_ns) / 1_000_000;
        let secs = p.dur_ns as f64 / 1e9;
        for (dir, n, lat) in [(0, p.reads, p.read_lat_mean_ns), (1, p.writes, p.write_lat_mean_ns)] {
            if n == 0 {
                continue;
            }
            let value = match kind {
                FioLog::Iops => (n as f64 / secs).round() as u64,
                FioLog::Bw => (n as f64 * bs as f64 / secs / 1024.0).round() as u64,
                FioLog::Lat => lat.unwrap_or(0),
            };
            writeln!(w, "{ms}, {value}, {dir}, 0, 0")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_split_by_completion_time_and_merge_across_workers() {
        let s = 1_000_000_000u64;
        let mut a = Recorder::new(0, s);
        let mut b = Recorder::new(0, s);
        for i in 0..100 {
            a.record(i * 10_000_000, 1000 + i, 4096, false); // 0-0.99 s: 100 reads
        }
        b.record(1_500_000_000, 5000, 4096, true); // 1.5 s: one write
        b.record(3_200_000_000, 7000, 4096, false); // 3.2 s, after an empty interval
        a.finish();
        b.finish();
        a.absorb(&b);
        let ts = summarize(&a.done, s, 3_500_000_000).unwrap();
        assert_eq!(ts.points.len(), 4);
        let p = &ts.points;
        assert_eq!((p[0].reads, p[0].writes), (100, 0));
        assert_eq!(p[0].iops, 100.0);
        assert_eq!(p[0].lat_max_ns, Some(1099));
        assert!((p[0].lat_p50_ns.unwrap() as i64 - 1049).abs() <= 1049 / 32, "{:?}", p[0].lat_p50_ns);
        assert_eq!((p[1].writes, p[1].write_lat_mean_ns, p[1].read_lat_mean_ns), (1, Some(5000), None));
        // Nothing completed in [2 s, 3 s): no latency, not a zero one.
        assert_eq!((p[2].reads + p[2].writes, p[2].lat_p99_ns, p[2].iops), (0, None, 0.0));
        // The last interval is as long as the run was: 0.5 s.
        assert_eq!(p[3].dur_ns, 500_000_000);
        assert_eq!(p[3].iops, 2.0);
        let total: u64 = p.iter().map(|x| x.reads + x.writes).sum();
        assert_eq!(total, 102);
    }

    #[test]
    fn off_records_nothing() {
        let mut r = Recorder::default();
        r.record(5, 5, 5, false);
        r.finish();
        assert!(r.done.is_empty() && summarize(&r.done, 0, 10).is_none());
    }

    #[test]
    fn fio_logs_have_fios_columns() {
        let mut r = Recorder::new(0, 1_000_000_000);
        for i in 0..10 {
            r.record(i * 100_000_000, 2000, 4096, i % 2 == 1);
        }
        r.finish();
        let ts = summarize(&r.done, 1_000_000_000, 1_000_000_000).unwrap();
        let mut out = Vec::new();
        for k in FioLog::ALL {
            write_fio_log(&ts, k, 4096, &mut out).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "1000, 5, 0, 0, 0\n1000, 5, 1, 0, 0\n1000, 20, 0, 0, 0\n1000, 20, 1, 0, 0\n1000, 2000, 0, 0, 0\n1000, 2000, 1, 0, 0\n");
    }
}
