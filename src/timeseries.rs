//! How a run evolved: per interval (`--interval`, 1 s by default) I/Os, bandwidth and latency
//! (p50/p99/max), from the generator's own clock reads, never from per-I/O events. Each worker
//! records into one small dense histogram for the interval in progress and keeps only its non-empty
//! buckets when the interval ends (a few hundred entries: 1000 workers x 60 s stay in megabytes);
//! the report merges the workers' intervals. Also fio's per-interval log format (`--log-prefix`),
//! so fio's plotting scripts read iopath runs.

use serde::{Deserialize, Serialize};

use crate::model::{Counter, Phase, RawInterval, RawSeries, HIST_SUB_BITS, SERIES_COUNTERS, SERIES_PHASES};

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
    /// The worker's context switches since its previous interval ended (None: not counted).
    pub ctx: Option<u64>,
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
    /// The thread's context switches so far (getrusage(RUSAGE_THREAD)): read once per interval,
    /// when it ends, never per I/O.
    ctx_clock: Option<fn() -> u64>,
    ctx_last: u64,
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
            ctx_clock: None,
            ctx_last: 0,
        }
    }

    /// Counts the thread's context switches per interval with `clock` (cumulative). The switches
    /// of an interval in which nothing completed are counted in the next one that ends.
    pub fn with_ctx_clock(mut self, clock: fn() -> u64) -> Recorder {
        if self.interval_ns > 0 {
            self.ctx_last = clock();
            self.ctx_clock = Some(clock);
        }
        self
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
        let ctx = self.ctx_clock.map(|clock| {
            let now = clock();
            let d = now.saturating_sub(self.ctx_last);
            self.ctx_last = now;
            d
        });
        let idx = self.cur.idx;
        let finished = std::mem::replace(&mut self.cur, Interval { idx, lat_min: u64::MAX, ..Interval::default() });
        self.done.push(Interval { buckets, ctx, ..finished });
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
    /// Each phase's mean over the I/Os whose phase ended in this interval (a trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_mean_ns: Option<PhaseMeans>,
    /// Device interrupts per I/O completed in the interval (a trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_per_io: Option<f64>,
    /// Context switches per I/O: the generator's threads (getrusage), or every traced thread
    /// (sched_switch) when the trace hooked it, as the report's `ctx_switches.source` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_per_io: Option<f64>,
}

/// The four phases' means in one interval; a phase no I/O ended in is absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseMeans {
    pub submission_ns: Option<u64>,
    pub block_ns: Option<u64>,
    pub device_ns: Option<u64>,
    pub completion_ns: Option<u64>,
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
    let mut ctx: Vec<Option<u64>> = vec![None; n];
    for iv in intervals {
        if let Some(c) = iv.ctx {
            *ctx[iv.idx as usize].get_or_insert(0) += c;
        }
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
        .zip(&ctx)
        .map(|((m, c), ctx)| {
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
                phase_mean_ns: None,
                irq_per_io: None,
                ctx_per_io: ctx.filter(|_| ios > 0).map(|c| c as f64 / ios as f64),
            }
        })
        .collect();
    Some(TimeSeries { interval_ns, points })
}

fn mean_of((n, sum): (u64, u64)) -> Option<u64> {
    (n > 0).then(|| sum / n)
}

fn phase_means(iv: &RawInterval) -> Option<PhaseMeans> {
    let at = |i: usize| iv.phases.get(i).copied().and_then(mean_of);
    let m = PhaseMeans { submission_ns: at(0), block_ns: at(1), device_ns: at(2), completion_ns: at(3) };
    (m != PhaseMeans::default()).then_some(m)
}

fn counter(iv: &RawInterval, c: Counter) -> u64 {
    SERIES_COUNTERS.iter().position(|&x| x == c).and_then(|i| iv.counters.get(i).copied()).unwrap_or(0)
}

/// The trace's intervals joined to the generator's (the same edges: the sampler starts at the
/// generator's start line): each point gains its phase means and IRQs per I/O, and its context
/// switches per I/O from sched_switch when `sched_hooked` (otherwise the generator's own stay).
pub fn with_trace(ts: &mut TimeSeries, raw: &RawSeries, sched_hooked: bool) {
    if !raw.from_generator || raw.interval_ns != ts.interval_ns {
        return;
    }
    for (p, iv) in ts.points.iter_mut().zip(&raw.intervals) {
        let ios = p.reads + p.writes;
        p.phase_mean_ns = phase_means(iv);
        p.irq_per_io = (ios > 0).then(|| counter(iv, Counter::Irq) as f64 / ios as f64);
        if sched_hooked {
            let ctx = counter(iv, Counter::CtxVoluntary) + counter(iv, Counter::CtxInvoluntary);
            p.ctx_per_io = (ios > 0).then(|| ctx as f64 / ios as f64);
        }
    }
}

/// A traced command's or process's time series, from the probes alone: its calls (direct I/Os
/// and buffered calls, as `Report::from_process` counts them) per interval, their latency
/// percentiles from the in-kernel histogram, phase means, IRQs and context switches per call.
/// Each call counts in the interval in which it returned. Max latency is the top histogram
/// bucket's upper bound (within 1/32).
pub fn from_raw(raw: &RawSeries) -> Option<TimeSeries> {
    if raw.interval_ns == 0 || raw.intervals.is_empty() {
        return None;
    }
    let points = raw
        .intervals
        .iter()
        .map(|iv| {
            let ios: u64 = iv.calls.iter().map(|&(_, c)| c).sum();
            let phase = |ph: Phase| {
                SERIES_PHASES.iter().position(|&x| x == ph).and_then(|i| iv.phases.get(i).copied()).unwrap_or((0, 0))
            };
            let reads = counter(iv, Counter::Reads) + phase(Phase::PcRead).0 + iv.cached.0;
            let writes = counter(iv, Counter::Writes) + phase(Phase::PcWrite).0 + iv.cached.1;
            let bytes = [
                Counter::Bytes,
                Counter::PcBytesRead,
                Counter::PcBytesWritten,
                Counter::PcBytesCopied,
                Counter::UpcBytes,
            ]
            .iter()
            .map(|&c| counter(iv, c))
            .sum::<u64>();
            let secs = iv.dur_ns.max(1) as f64 / 1e9;
            let slots = || iv.calls.iter().map(|&(s, c)| (s as usize, c));
            let max = iv.calls.last().map(|&(s, _)| {
                let (lo, w) = crate::hist::bucket_range_with(s as usize, HIST_SUB_BITS);
                lo + w
            });
            let q =
                |p: f64| (ios > 0).then(|| crate::hist::quantile_of(slots(), HIST_SUB_BITS, p, 0, max.unwrap_or(0)));
            let ctx = counter(iv, Counter::CtxVoluntary) + counter(iv, Counter::CtxInvoluntary);
            let per_io = |v: u64| (ios > 0).then(|| v as f64 / ios as f64);
            Point {
                t_ns: iv.t_ns,
                dur_ns: iv.dur_ns,
                // A copy (copy_file_range, sendfile) is a call but neither a read nor a write.
                reads,
                writes,
                iops: ios as f64 / secs,
                bw_bytes: bytes as f64 / secs,
                read_lat_mean_ns: None,
                write_lat_mean_ns: None,
                lat_p50_ns: q(0.50),
                lat_p99_ns: q(0.99),
                lat_max_ns: max.filter(|_| ios > 0),
                phase_mean_ns: phase_means(iv),
                irq_per_io: per_io(counter(iv, Counter::Irq)),
                ctx_per_io: per_io(ctx),
            }
        })
        .collect();
    Some(TimeSeries { interval_ns: raw.interval_ns, points })
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

    fn raw_interval(t_ns: u64, device: (u64, u64), calls: Vec<(u32, u64)>, irq: u64, ctx: u64) -> RawInterval {
        let mut phases = vec![(0, 0); SERIES_PHASES.len()];
        phases[2] = device;
        phases[4] = (calls.iter().map(|c| c.1).sum(), 0);
        let mut counters = vec![0; SERIES_COUNTERS.len()];
        counters[0] = irq;
        counters[1] = ctx;
        counters[3] = phases[4].0; // reads
        RawInterval { t_ns, dur_ns: 1_000_000_000, phases, calls, counters, cached: (0, 0) }
    }

    #[test]
    fn the_traces_intervals_join_the_generators() {
        let s = 1_000_000_000u64;
        let mut r = Recorder::new(0, s).with_ctx_clock(|| 0);
        for i in 0..10 {
            r.record(i * 100_000_000, 1000, 4096, false);
        }
        r.finish();
        let mut ts = summarize(&r.done, s, s).unwrap();
        assert_eq!(ts.points[0].ctx_per_io, Some(0.0));
        let raw = RawSeries {
            interval_ns: s,
            from_generator: true,
            intervals: vec![raw_interval(0, (10, 200_000), vec![(100, 10)], 5, 20)],
            ..RawSeries::default()
        };
        with_trace(&mut ts, &raw, false);
        let p = &ts.points[0];
        assert_eq!(p.phase_mean_ns.unwrap().device_ns, Some(20_000));
        assert_eq!(p.phase_mean_ns.unwrap().block_ns, None, "no I/O ended its block phase: unknown");
        assert_eq!(p.irq_per_io, Some(0.5));
        assert_eq!(p.ctx_per_io, Some(0.0), "lean: the generator's own count stays");
        with_trace(&mut ts, &raw, true);
        assert_eq!(ts.points[0].ctx_per_io, Some(2.0), "sched_switch when hooked");
        // Intervals of another length are not joined.
        let mut other = ts.clone();
        with_trace(&mut other, &RawSeries { interval_ns: s / 2, ..raw.clone() }, true);
        assert_eq!(other.points[0].irq_per_io, ts.points[0].irq_per_io);
    }

    #[test]
    fn a_traced_commands_series_comes_from_the_probes_alone() {
        let s = 1_000_000_000u64;
        let slot = crate::model::bpf_slot(50_000) as u32;
        let raw = RawSeries {
            interval_ns: s,
            from_generator: false,
            intervals: vec![
                raw_interval(0, (100, 3_000_000), vec![(slot, 100)], 0, 100),
                // Nothing returned: no latency, no ratio.
                raw_interval(s, (0, 0), vec![], 0, 3),
            ],
            ..RawSeries::default()
        };
        let ts = from_raw(&raw).unwrap();
        let p = &ts.points;
        assert_eq!((p[0].reads, p[0].iops), (100, 100.0));
        let p50 = p[0].lat_p50_ns.unwrap();
        assert!(p50.abs_diff(50_000) <= 50_000 / 32, "{p50}");
        assert!(p[0].lat_max_ns.unwrap() >= 50_000);
        assert_eq!(p[0].phase_mean_ns.unwrap().device_ns, Some(30_000));
        assert_eq!(p[0].ctx_per_io, Some(1.0));
        assert_eq!((p[1].lat_p50_ns, p[1].ctx_per_io, p[1].phase_mean_ns), (None, None, None));
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
