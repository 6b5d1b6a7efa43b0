//! The Prometheus side of `iopath top --listen` / `iopath serve`: cumulative series kept in
//! userspace from each frame's differences (so a process's kernel rows can be deleted when it
//! exits and its counts still never go back), encoded as OpenMetrics by prometheus-client.
//!
//! Cardinality is bounded: series are (disk, cgroup, route, op); the first `cap` cgroups seen
//! doing I/O (the busiest first within a refresh) keep their own label, every later one is
//! summed into cgroup="other". Histogram buckets are the kernel's (8 a power of two, 1 us to
//! 69 s); a series exposes a bucket once data fell next to it and from then on (Prometheus
//! needs a series' `le` set stable), so an idle series costs a few lines, not 209.

use std::collections::{BTreeMap, BTreeSet};

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::counts::{bucket_bounds, route_name, Counts, PHASE_NAMES, TOP_PHASES, TOP_SLOTS};
use super::table::Snapshot;

/// The label value every cgroup beyond the cap is summed into.
pub const OTHER: &str = "other";

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeriesKey {
    pub disk: String,
    pub cgroup: String,
    pub route: &'static str,
    pub op: &'static str,
    /// The cgroup's Kubernetes pod or container, as labels (namespace, pod, pod_uid,
    /// container_id, qos: those known); none for cgroup="other".
    pub container: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
struct Series {
    counts: Counts,
    /// Buckets exposed (sticky), per phase at p * TOP_SLOTS.
    shown: Vec<bool>,
}

#[derive(Clone, Debug, Default)]
pub struct Exporter {
    cap: usize,
    admitted: BTreeSet<String>,
    /// Cgroups summed into "other" so far.
    folded: BTreeSet<String>,
    series: BTreeMap<SeriesKey, Series>,
    irqs: BTreeMap<String, u64>,
    ctx: BTreeMap<String, u64>,
    lost: BTreeMap<String, u64>,
    kernel: BTreeMap<String, u64>,
    /// Each hook's program: runs and ns, cumulative (the kernel's own counters).
    bpf: BTreeMap<String, (u64, u64)>,
    hooks: Vec<(String, bool, String)>,
    /// The one-hook tier's checks, by disk name, as of the last refresh.
    stamps: BTreeMap<String, crate::probe::stamps::Trust>,
    pub refreshes: u64,
    /// serve --phases-every: these series are the full set's windows (label window="phases").
    window: Option<&'static str>,
    /// ... the windows so far, the last one's BPF ns per I/O, the share of time attached.
    windows: u64,
    window_bpf_ns_per_io: Option<f64>,
    duty: f64,
    /// Why the last window failed, if it did.
    pub window_error: Option<String>,
}

impl Exporter {
    pub fn new(cap: usize, hooks: Vec<(String, bool, String)>) -> Exporter {
        Exporter { cap, hooks, ..Default::default() }
    }

    /// The cgroups folded into "other" are tracked by name only up to 4096 (a fleet host can
    /// churn through many containers; the count is what matters).
    fn label(&mut self, cgroup: &str) -> String {
        if self.admitted.contains(cgroup) {
            return cgroup.to_owned();
        }
        if self.admitted.len() < self.cap {
            self.admitted.insert(cgroup.to_owned());
            return cgroup.to_owned();
        }
        if self.folded.len() < 4096 {
            self.folded.insert(cgroup.to_owned());
        }
        OTHER.to_owned()
    }

    /// Adds what happened between two reads.
    pub fn absorb(&mut self, prev: &Snapshot, cur: &Snapshot) {
        self.refreshes += 1;
        let mut moved = super::table::moved(prev, cur);
        // The busiest first: within one refresh they are admitted first.
        moved.sort_by_key(|m| std::cmp::Reverse(m.1.ios));
        let mut seen_tgid = BTreeSet::new();
        for (k, d) in &moved {
            let (cgroup, container) = cur.cgroup_of(k);
            let container = container.map(|c| c.labels()).unwrap_or_default();
            let cg = self.label(cgroup);
            let disk = cur.devs.get(&k.dev).cloned().unwrap_or_else(|| format!("{}:{}", k.dev >> 20, k.dev & 0xfffff));
            let key = SeriesKey {
                disk,
                container: if cg == OTHER { Vec::new() } else { container },
                cgroup: cg.clone(),
                route: route_name(k.route),
                op: if k.write { "write" } else { "read" },
            };
            let s = self
                .series
                .entry(key)
                .or_insert_with(|| Series { counts: Counts::default(), shown: vec![false; TOP_PHASES * TOP_SLOTS] });
            s.counts.add(d);
            for p in 0..TOP_PHASES {
                let ph = d.phase(p);
                for (i, &c) in ph.iter().enumerate() {
                    if c > 0 {
                        // The bucket and the one below: its lower bound is an `le` too.
                        s.shown[p * TOP_SLOTS + i] = true;
                        if i > 0 {
                            s.shown[p * TOP_SLOTS + i - 1] = true;
                        }
                    }
                }
            }
            if seen_tgid.insert(k.tgid) {
                if let Some(n) = super::table::ctx_since(prev, cur, k.tgid) {
                    *self.ctx.entry(cg).or_default() += n;
                }
            }
        }
        for (dev, n) in &cur.irqs {
            let disk = cur.devs.get(dev).cloned().unwrap_or_else(|| dev.to_string());
            let d = n.saturating_sub(prev.irqs.get(dev).copied().unwrap_or(*n));
            *self.irqs.entry(disk).or_default() += d;
        }
        for (why, n) in &cur.lost {
            *self.lost.entry(why.clone()).or_default() += n.saturating_sub(prev.lost.get(why).copied().unwrap_or(0));
        }
        for (hook, v) in &cur.bpf {
            self.bpf.insert(hook.clone(), *v);
        }
        if let Some(st) = &cur.stamps {
            for (dev, t) in &st.trust {
                let disk = cur.devs.get(dev).cloned().unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff));
                self.stamps.insert(disk, t.clone());
            }
        }
        for (what, n) in &cur.kernel {
            *self.kernel.entry(what.clone()).or_default() +=
                n.saturating_sub(prev.kernel.get(what).copied().unwrap_or(0));
        }
    }

    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// The whole exposition, OpenMetrics text (ends with "# EOF").
    /// Series of the full set's windows (serve --phases-every), labelled window=`w`.
    pub fn windowed(mut self, w: &'static str) -> Exporter {
        self.window = Some(w);
        self
    }

    /// A window's cost: its programs' run time over the I/Os it counted.
    pub fn note_window(&mut self, a: &Snapshot, b: &Snapshot, duty: f64) {
        self.windows += 1;
        self.duty = duty;
        let ns: u64 = b.bpf.iter().map(|(k, (_, ns))| ns.saturating_sub(a.bpf.get(k).map_or(0, |p| p.1))).sum();
        let ios: u64 = super::table::moved(a, b).iter().map(|(_, d)| d.ios).sum();
        // A window without I/O measures nothing: the last one that did stays shown.
        if ios > 0 {
            self.window_bpf_ns_per_io = Some(ns as f64 / ios as f64);
        }
    }

    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        self.encode_with(None)
    }

    /// The exposition, with the full set's window series (`extra`) beside this one's.
    pub fn encode_with(&self, extra: Option<&Exporter>) -> Result<String, std::fmt::Error> {
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register_collector(Box::new(View(self.clone(), extra.cloned())));
        let mut out = String::with_capacity(64 << 10);
        prometheus_client::encoding::text::encode(&mut out, &reg)?;
        Ok(out)
    }
}

#[derive(Debug)]
struct View(Exporter, Option<Exporter>);

/// A label value, escaped as the exposition format needs when it is written (a cgroup or pod
/// name is anyone's: `untrusted::label_value`). Every label goes through it.
#[derive(Clone, Debug)]
struct Lv(String);

impl<S: Into<String>> From<S> for Lv {
    fn from(s: S) -> Lv {
        Lv(s.into())
    }
}

impl prometheus_client::encoding::EncodeLabelValue for Lv {
    fn encode(&self, e: &mut prometheus_client::encoding::LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        e.write_str(&crate::untrusted::label_value(&self.0))
    }
}

type Labels = Vec<(String, Lv)>;

fn labels(k: &SeriesKey, window: Option<&str>) -> Labels {
    let mut l: Labels = vec![
        ("disk".into(), k.disk.clone().into()),
        ("cgroup".into(), k.cgroup.clone().into()),
        ("route".into(), k.route.into()),
        ("op".into(), k.op.into()),
    ];
    l.extend(k.container.iter().map(|(n, v)| (n.clone(), v.clone().into())));
    if let Some(w) = window {
        l.push(("window".into(), w.into()));
    }
    l
}

/// A counter family from (labels, value) pairs.
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: impl Iterator<Item = (Labels, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (l, v) in rows {
        m.encode_family(&l)?.encode_counter::<Labels, u64, f64>(&v, None)?;
    }
    Ok(())
}

impl prometheus_client::collector::Collector for View {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &self.0;
        // Every series, the full set's windows' after this tier's (window="phases").
        let all = || {
            std::iter::once(e)
                .chain(self.1.as_ref())
                .flat_map(|x| x.series.iter().map(move |(k, s)| (labels(k, x.window), s)))
        };
        self.encode_latency(&mut enc)?;
        counters(&mut enc, "iopath_ios", "Closed I/Os", None, all().map(|(l, s)| (l, s.counts.ios)))?;
        counters(
            &mut enc,
            "iopath_io",
            "Bytes of the requests completed for the I/Os",
            Some(&Unit::Bytes),
            all().map(|(l, s)| (l, s.counts.bytes)),
        )?;
        if let Some(w) = &self.1 {
            encode_windows(&mut enc, w)?;
        }
        counters(
            &mut enc,
            "iopath_irqs",
            "Interrupts on the disk's own vectors (disks without vectors of their own, loop or zram, have none)",
            None,
            e.irqs.iter().map(|(d, v)| (vec![("disk".to_owned(), d.clone().into())], *v)),
        )?;
        counters(
            &mut enc,
            "iopath_context_switches",
            "Context switches of the processes doing I/O, all their threads",
            None,
            e.ctx.iter().map(|(c, v)| (vec![("cgroup".to_owned(), c.clone().into())], *v)),
        )?;
        counters(
            &mut enc,
            "iopath_kernel_events",
            "IOMMU and DMA mapping events (iommu:map/unmap, dma map/unmap) on the whole system",
            None,
            e.kernel.iter().map(|(w, v)| (vec![("event".to_owned(), w.clone().into())], *v)),
        )?;
        counters(
            &mut enc,
            "iopath_lost_events",
            "I/Os the probes saw but could not count, by reason (never silently dropped)",
            None,
            e.lost.iter().map(|(w, v)| (vec![("reason".to_owned(), w.clone().into())], *v)),
        )?;
        counters(
            &mut enc,
            "iopath_bpf_runs",
            "Runs of each of iopath's BPF programs (by hook) while the kernel timed them: since it loaded with \
             --phases, in 1-s windows every 10 s in the one-hook tier (BPF_ENABLE_STATS costs ~9% of a CPU-bound \
             device's IOPS by itself)",
            None,
            e.bpf.iter().map(|(h, (runs, _))| (vec![("prog".to_owned(), h.clone().into())], *runs)),
        )?;
        {
            let mut m = enc.encode_descriptor(
                "iopath_bpf_run",
                "CPU time of each of iopath's BPF programs (by hook) over the runs iopath_bpf_runs counts: what \
                 the agent costs",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            for (h, (_, ns)) in &e.bpf {
                let l: Labels = vec![("prog".into(), h.clone().into())];
                m.encode_family(&l)?.encode_counter::<Labels, f64, f64>(&(*ns as f64 / 1e9), None)?;
            }
        }
        encode_stamps(&mut enc, e)?;
        {
            let mut m = enc.encode_descriptor(
                "iopath_cgroups_folded",
                "Cgroups beyond the label cap, summed into cgroup=\"other\"",
                None,
                MetricType::Gauge,
            )?;
            m.encode_gauge(&(e.folded.len() as i64))?;
        }
        encode_probe_info(&mut enc, e)?;
        Ok(())
    }
}

impl View {
    /// Each phase's latency histogram, by the series' labels; a phase never timed has no series.
    fn encode_latency(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &self.0;
        let all = || {
            std::iter::once(e)
                .chain(self.1.as_ref())
                .flat_map(|x| x.series.iter().map(move |(k, s)| (labels(k, x.window), s)))
        };
        let mut m = enc.encode_descriptor(
            "iopath_io_latency",
            "Time each closed I/O spent in each phase (submission: syscall to first bio queued; block: \
                 queued to issued; device: issued to completed; completion: completed to reaped). Without \
                 --phases (one hook at block_rq_complete) only block and device, from the request's stamps \
                 where checked (iopath_stamps_trusted), by cgroup, disk, route (the bio's end_io) and op: no \
                 process is measured there",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (base, s) in all() {
            for (p, phase) in PHASE_NAMES.iter().enumerate() {
                // prometheus-client takes each bucket's own count and sums them itself;
                // f64::MAX is its "+Inf".
                let slots = s.counts.phase(p);
                let (mut cum, mut given) = (0u64, 0u64);
                let mut buckets = Vec::new();
                for (i, &c) in slots.iter().enumerate() {
                    cum += c;
                    let hi = bucket_bounds(i).1;
                    if s.shown[p * TOP_SLOTS + i] && hi != u64::MAX {
                        buckets.push((hi as f64 / 1e9, cum - given));
                        given = cum;
                    }
                }
                buckets.push((f64::MAX, cum - given));
                if cum == 0 {
                    // Never timed (the one-hook tier's submission and completion, sync and
                    // aio submission without syscall hooks): no series, never a zero.
                    continue;
                }
                let mut l = base.clone();
                l.push(("phase".into(), (*phase).into()));
                m.encode_family(&l)?.encode_histogram::<Labels>(s.counts.sum[p] as f64 / 1e9, cum, &buckets, None)?;
            }
        }
        Ok(())
    }
}

/// serve --phases-every's windows: how many, the duty, the full set's BPF cost in its last window.
fn encode_windows(enc: &mut DescriptorEncoder, w: &Exporter) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "iopath_phases_windows",
        "serve --phases-every: windows the full phase set was attached for (window=\"phases\" series)",
        None,
        MetricType::Counter,
    )?;
    m.encode_counter::<Labels, u64, f64>(&w.windows, None)?;
    let mut m = enc.encode_descriptor(
        "iopath_phases_duty",
        "serve --phases-every: the share of the time the full phase set is attached",
        None,
        MetricType::Gauge,
    )?;
    m.encode_gauge(&w.duty)?;
    if let Some(ns) = w.window_bpf_ns_per_io {
        let mut m = enc.encode_descriptor(
            "iopath_phases_window_bpf_ns_per_io",
            "serve --phases-every: BPF ns per I/O of the full set in its last window with I/O \
                 (averaged over the time: times iopath_phases_duty)",
            None,
            MetricType::Gauge,
        )?;
        m.encode_gauge(&ns)?;
    }
    Ok(())
}

/// The one-hook tier's stamps: trusted or not per disk, and the last check's p99 error.
fn encode_stamps(enc: &mut DescriptorEncoder, e: &Exporter) -> Result<(), std::fmt::Error> {
    use crate::probe::stamps::{Stamp, Verdict};
    let each = |t: &crate::probe::stamps::Trust| [(Stamp::Issue, t.issue.clone()), (Stamp::Queue, t.queue.clone())];
    let mut m = enc.encode_descriptor(
        "iopath_stamps_trusted",
        "One-hook tier: 1 where the request's stamp (io_start_time_ns: device phase, start_time_ns: block \
             phase) was within max(1 us, 2%) of its hook on 99% of the requests checked, 0 where the hook times \
             that phase instead; a disk not checked yet has no series",
        None,
        MetricType::Gauge,
    )?;
    for (disk, t) in &e.stamps {
        for (s, v) in each(t) {
            if matches!(v, Verdict::Unchecked) {
                continue;
            }
            let l: Labels = vec![("disk".into(), disk.clone().into()), ("stamp".into(), s.field().into())];
            m.encode_family(&l)?.encode_gauge(&(v.trusted() as i64))?;
        }
    }
    let mut m = enc.encode_descriptor(
        "iopath_stamps_error_p99",
        "One-hook tier: the 99th percentile of |stamp - hooked time| on the requests of the last check \
             (a power of two's upper bound)",
        Some(&Unit::Seconds),
        MetricType::Gauge,
    )?;
    for (disk, t) in &e.stamps {
        for (s, v) in each(t) {
            let ns = match v {
                Verdict::Trusted { err_p99_ns, .. } | Verdict::Hooked { err_p99_ns, .. } => err_p99_ns,
                Verdict::Unchecked => continue,
            };
            let l: Labels = vec![("disk".into(), disk.clone().into()), ("stamp".into(), s.field().into())];
            m.encode_family(&l)?.encode_gauge(&(ns as f64 / 1e9))?;
        }
    }
    Ok(())
}

/// The probe set, every hook attached or not.
fn encode_probe_info(enc: &mut DescriptorEncoder, e: &Exporter) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(
        "iopath_probe",
        "The probe set: every hook, attached or not, and how",
        None,
        MetricType::Info,
    )?;
    for (name, attached, via) in &e.hooks {
        let l: Labels = vec![
            ("hook".into(), name.clone().into()),
            ("attached".into(), attached.to_string().into()),
            ("via".into(), if via.is_empty() { "-".into() } else { via.clone().into() }),
        ];
        m.encode_info(&l)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::counts::Key;
    use super::super::table::Proc;
    use super::*;

    fn snap(n: u64, cgroups: &[(u32, &str)]) -> Snapshot {
        let mut s = Snapshot { t_ns: n * 1_000_000_000, ..Default::default() };
        for (tgid, cg) in cgroups {
            let mut c = Counts { ios: n * 10, bytes: n * 40960, ..Default::default() };
            // Device times of ~100 us: bucket 1 + (16-10)*8 + 4 = [98304, 106496).
            c.slots[2 * TOP_SLOTS + 53] = n * 10;
            c.sum[2] = n * 10 * 100_000;
            s.rows.insert(Key { tgid: *tgid, dev: 7 << 20, route: 4, write: false, cgroup: 0 }, c);
            s.procs
                .insert(*tgid, Proc { comm: "dd".into(), cgroup: cg.to_string(), ctx: Some(n * 3), container: None });
        }
        s.devs.insert(7 << 20, "loop0".into());
        s.lost.insert("table full".into(), n);
        s.bpf.insert("block:block_rq_complete".into(), (n * 10, n * 5000));
        s
    }

    #[test]
    fn exposition_counts_caps_cgroups_and_keeps_buckets_sparse() {
        let cg: Vec<(u32, String)> = (1..=5).map(|i| (i, format!("/c{i}"))).collect();
        let cgs: Vec<(u32, &str)> = cg.iter().map(|(t, c)| (*t, c.as_str())).collect();
        let mut e = Exporter::new(3, vec![("block:block_rq_issue".into(), true, "tp_btf".into())]);
        e.absorb(&Snapshot::default(), &snap(1, &cgs));
        e.absorb(&snap(1, &cgs), &snap(2, &cgs));
        assert_eq!(e.series_count(), 4, "3 cgroups and 'other'");
        let text = e.encode().unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("# TYPE iopath_io_latency_seconds histogram"), "{text}");
        // 20 I/Os per cgroup so far; 'other' holds two cgroups' worth.
        assert!(text.contains(r#"iopath_ios_total{disk="loop0",cgroup="other",route="sync",op="read"} 40"#), "{text}");
        assert!(text.contains(r#"iopath_ios_total{disk="loop0",cgroup="/c1",route="sync",op="read"} 20"#), "{text}");
        assert!(
            text.contains(r#"iopath_io_bytes_total{disk="loop0",cgroup="/c1",route="sync",op="read"} 81920"#),
            "{text}"
        );
        assert!(text.contains("iopath_cgroups_folded 2"), "{text}");
        // The agent's own cost, per program, as the kernel counts it.
        assert!(text.contains(r#"iopath_bpf_runs_total{prog="block:block_rq_complete"} 20"#), "{text}");
        assert!(text.contains("# TYPE iopath_bpf_run_seconds counter"), "{text}");
        assert!(text.contains(r#"iopath_bpf_run_seconds_total{prog="block:block_rq_complete"} 0.00001"#), "{text}");
        assert!(text.contains(r#"iopath_lost_events_total{reason="table full"} 2"#), "{text}");
        assert!(
            text.contains(r#"iopath_probe_info{hook="block:block_rq_issue",attached="true",via="tp_btf"} 1"#),
            "{text}"
        );
        // The device phase: the data's bucket and the one below it, then +Inf; no other bucket.
        let dev_c1: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("iopath_io_latency_seconds_bucket") && l.contains("/c1") && l.contains("device"))
            .collect();
        assert_eq!(dev_c1.len(), 3, "{dev_c1:?}");
        assert!(dev_c1[0].contains("le=\"0.000098304\"") && dev_c1[0].ends_with(" 0"), "{dev_c1:?}");
        assert!(dev_c1[1].contains("le=\"0.000106496\"") && dev_c1[1].ends_with(" 20"), "{dev_c1:?}");
        assert!(dev_c1[2].contains("le=\"+Inf\"") && dev_c1[2].ends_with(" 20"), "{dev_c1:?}");
    }
}
