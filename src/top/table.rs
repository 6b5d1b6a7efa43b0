//! `iopath top`'s table: two reads of the kernel's per-(process, disk, route, direction) counts
//! and of /proc in, one frame of rows out (rates, phase quantiles, IRQs and context switches per
//! I/O), sorted; and its plain-text form (`--batch`, `--once`). Pure: tested from recorded
//! snapshots.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::counts::{route_name, Counts, Key, NO_PROCESS, TOP_PHASES};

/// A process doing I/O, as /proc named it when it was first seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Proc {
    pub comm: String,
    /// Its I/O cgroup (blkio v1 path, else the unified v2 path); "?" when it was gone too soon.
    pub cgroup: String,
    /// Voluntary + involuntary context switches of all its threads, cumulative (None: gone).
    pub ctx: Option<u64>,
    /// The Kubernetes pod or container its cgroup names (top::k8s), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<super::k8s::Container>,
}

/// One read of everything a frame needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// CLOCK_MONOTONIC, ns.
    pub t_ns: u64,
    pub rows: BTreeMap<Key, Counts>,
    pub procs: BTreeMap<u32, Proc>,
    /// Interrupts on each disk's vectors, cumulative (disks with vectors of their own only).
    pub irqs: BTreeMap<u32, u64>,
    /// dev_t -> disk name (vda, vda1, loop0).
    pub devs: BTreeMap<u32, String>,
    /// I/Os the probes saw and could not count, by reason, cumulative.
    pub lost: BTreeMap<String, u64>,
    /// Other kernel events counted system-wide (IOMMU and DMA maps), cumulative.
    pub kernel: BTreeMap<String, u64>,
    /// Each attached hook's program: (runs, ns of CPU), cumulative since it loaded.
    pub bpf: BTreeMap<String, (u64, u64)>,
    /// The io cgroups the rows' bios named (Key::cgroup), by id.
    #[serde(default)]
    pub cgroups: BTreeMap<u64, Cgroup>,
    /// The one-hook tier's stamp checks (None: the full set, `--phases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<crate::probe::stamps::StampsState>,
}

/// An io cgroup a bio was charged to, as its hierarchy names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cgroup {
    pub path: String,
    /// The Kubernetes pod or container its path names (top::k8s), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<super::k8s::Container>,
}

impl Snapshot {
    /// The cgroup an I/O is charged to, and the pod or container it names: its first bio's io
    /// cgroup where the kernel named one (a flusher's writeback is its owner's, not the
    /// kworker's), else its process's ("?" when neither is known).
    pub fn cgroup_of(&self, k: &Key) -> (&str, Option<&super::k8s::Container>) {
        if let Some(c) = self.cgroups.get(&k.cgroup).filter(|_| k.cgroup != 0) {
            return (&c.path, c.container.as_ref());
        }
        match self.procs.get(&k.tgid) {
            Some(p) => (&p.cgroup, p.container.as_ref()),
            None => ("?", None),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    #[default]
    Process,
    Cgroup,
    /// Kubernetes pods (namespace/name, from the cgroup path and kubelet's pod folders), and
    /// Docker or Podman containers; any other process by its cgroup.
    Pod,
}

impl GroupBy {
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Process => "process",
            GroupBy::Cgroup => "cgroup",
            GroupBy::Pod => "pod",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    #[default]
    Iops,
    Bytes,
    /// By each phase's p99.
    Submission,
    Block,
    Device,
    Completion,
    Pid,
}

impl SortBy {
    pub const ALL: [SortBy; 7] = [
        SortBy::Iops,
        SortBy::Bytes,
        SortBy::Submission,
        SortBy::Block,
        SortBy::Device,
        SortBy::Completion,
        SortBy::Pid,
    ];

    pub fn next(self) -> SortBy {
        let i = SortBy::ALL.iter().position(|s| *s == self).unwrap_or(0);
        SortBy::ALL[(i + 1) % SortBy::ALL.len()]
    }

    pub fn name(self) -> &'static str {
        match self {
            SortBy::Iops => "IOPS",
            SortBy::Bytes => "MB/s",
            SortBy::Submission => "SUB p99",
            SortBy::Block => "BLK p99",
            SortBy::Device => "DEV p99",
            SortBy::Completion => "CMP p99",
            SortBy::Pid => "PID",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The process (None when grouped by cgroup).
    pub pid: Option<u32>,
    pub comm: String,
    pub cgroup: String,
    pub disk: String,
    pub route: &'static str,
    pub op: &'static str,
    pub ios: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    /// Per phase (submission, block, device, completion), ns; None: no I/O ended it.
    pub p50_ns: [Option<u64>; TOP_PHASES],
    pub p99_ns: [Option<u64>; TOP_PHASES],
    /// The disk's interrupts per I/O of the disk (None: a disk without vectors of its own, loop
    /// or zram, or a process gone before its switches could be read).
    pub irq_per_io: Option<f64>,
    /// The process's (cgroup's) context switches per I/O it completed, all its threads.
    pub ctx_per_io: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Frame {
    pub dur_s: f64,
    pub rows: Vec<Row>,
    pub ios: u64,
    /// I/Os not counted in this frame, by reason.
    pub lost: BTreeMap<String, u64>,
    /// The probes' CPU time in this frame per I/O counted (None: no I/O, or no run times).
    pub bpf_ns_per_io: Option<f64>,
    /// The one-hook tier: how each disk's phases are timed (its stamps, checked, or hooks).
    pub stamps: Vec<String>,
}

fn disk_name(s: &Snapshot, dev: u32) -> String {
    s.devs.get(&dev).cloned().unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff))
}

/// The kernel rows that moved between two reads, with what they did (the frame's and the
/// exporter's one source).
pub fn moved(prev: &Snapshot, cur: &Snapshot) -> Vec<(Key, Counts)> {
    let empty = Counts::default();
    cur.rows.iter().map(|(k, c)| (*k, c.since(prev.rows.get(k).unwrap_or(&empty)))).filter(|(_, d)| d.ios > 0).collect()
}

/// A process's context switches between two reads (None: gone before the second; a process
/// first seen in the second started inside the interval: its whole count).
pub fn ctx_since(prev: &Snapshot, cur: &Snapshot, tgid: u32) -> Option<u64> {
    let before = prev.procs.get(&tgid).and_then(|p| p.ctx).unwrap_or(0);
    cur.procs.get(&tgid).and_then(|p| p.ctx).map(|n| n.saturating_sub(before))
}

/// The frame between two reads, rows grouped by `by` and sorted by `sort` (largest first).
pub fn frame(prev: &Snapshot, cur: &Snapshot, by: GroupBy, sort: SortBy) -> Frame {
    let dur_s = (cur.t_ns.saturating_sub(prev.t_ns) as f64 / 1e9).max(1e-9);
    let moved = moved(prev, cur);
    let unknown = Proc { comm: "?".into(), cgroup: "?".into(), ctx: None, container: None };
    let proc_of = |tgid: u32| cur.procs.get(&tgid).unwrap_or(&unknown);
    // Per disk and per process (or cgroup): I/Os, for the per-I/O ratios.
    let mut disk_ios: BTreeMap<u32, u64> = BTreeMap::new();
    let mut who_ios: BTreeMap<String, u64> = BTreeMap::new();
    let who = |k: &Key| match by {
        // A kernel thread's bios (tgid 0), and the one-hook tier's rows (no process measured),
        // are one row per cgroup they were charged to.
        GroupBy::Process if k.tgid == 0 || k.tgid == NO_PROCESS => format!("{} {}", k.tgid, cur.cgroup_of(k).0),
        GroupBy::Process => k.tgid.to_string(),
        GroupBy::Cgroup => cur.cgroup_of(k).0.to_owned(),
        GroupBy::Pod => {
            let (cg, c) = cur.cgroup_of(k);
            c.and_then(|c| c.key()).unwrap_or_else(|| cg.to_owned())
        }
    };
    for (k, d) in &moved {
        *disk_ios.entry(k.dev).or_default() += d.ios;
        *who_ios.entry(who(k)).or_default() += d.ios;
    }
    // Context switches per group, from each process's difference.
    let mut who_ctx: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut counted = std::collections::BTreeSet::new();
    for (k, _) in &moved {
        if !counted.insert(k.tgid) {
            continue;
        }
        let d = ctx_since(prev, cur, k.tgid);
        let e = who_ctx.entry(who(k)).or_insert(Some(0));
        *e = match (*e, d) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    // Rows: group the kernel's rows.
    let mut groups: BTreeMap<(String, u32, u16, bool), (Counts, Key)> = BTreeMap::new();
    for (k, d) in &moved {
        let e = groups.entry((who(k), k.dev, k.route, k.write)).or_insert_with(|| (Counts::default(), *k));
        e.0.add(d);
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|((w, dev, route, write), (c, key))| {
            let tgid = key.tgid;
            let p = proc_of(tgid);
            let irq_per_io = match (prev.irqs.get(&dev), cur.irqs.get(&dev)) {
                (Some(a), Some(b)) => Some(b.saturating_sub(*a) as f64 / disk_ios[&dev].max(1) as f64),
                _ => None,
            };
            let ctx_per_io = who_ctx.get(&w).copied().flatten().map(|n| n as f64 / who_ios[&w].max(1) as f64);
            Row {
                pid: (by == GroupBy::Process && tgid != NO_PROCESS).then_some(tgid),
                comm: if by == GroupBy::Process { p.comm.clone() } else { String::new() },
                // Grouped by pod, the column names the pod (its key), not one process's cgroup.
                cgroup: if by == GroupBy::Pod { w.clone() } else { cur.cgroup_of(&key).0.to_owned() },
                disk: disk_name(cur, dev),
                route: route_name(route),
                op: if write { "write" } else { "read" },
                ios: c.ios,
                iops: c.ios as f64 / dur_s,
                bytes_per_s: c.bytes as f64 / dur_s,
                p50_ns: std::array::from_fn(|i| c.quantile(i, 0.5)),
                p99_ns: std::array::from_fn(|i| c.quantile(i, 0.99)),
                irq_per_io,
                ctx_per_io,
            }
        })
        .collect();
    sort_rows(&mut rows, sort);
    let lost =
        cur.lost.iter().map(|(k, v)| (k.clone(), v.saturating_sub(prev.lost.get(k).copied().unwrap_or(0)))).collect();
    let ios: u64 = rows.iter().map(|r| r.ios).sum();
    let bpf_ns: u64 = cur.bpf.iter().map(|(k, (_, ns))| ns.saturating_sub(prev.bpf.get(k).map_or(0, |p| p.1))).sum();
    let bpf_ns_per_io = match &cur.stamps {
        // The one-hook tier times its programs in short windows: the last window's figure.
        Some(st) => st.bpf_ns_per_io,
        None => (ios > 0 && bpf_ns > 0).then(|| bpf_ns as f64 / ios as f64),
    };
    let stamps = cur.stamps.as_ref().map(|st| st.describe(|d| disk_name(cur, d))).unwrap_or_default();
    Frame { dur_s, ios, rows, lost, bpf_ns_per_io, stamps }
}

pub fn sort_rows(rows: &mut [Row], sort: SortBy) {
    let p99 = |r: &Row, i: usize| r.p99_ns[i].unwrap_or(0);
    rows.sort_by(|a, b| {
        let ord = match sort {
            SortBy::Iops => b.iops.total_cmp(&a.iops),
            SortBy::Bytes => b.bytes_per_s.total_cmp(&a.bytes_per_s),
            SortBy::Submission => p99(b, 0).cmp(&p99(a, 0)),
            SortBy::Block => p99(b, 1).cmp(&p99(a, 1)),
            SortBy::Device => p99(b, 2).cmp(&p99(a, 2)),
            SortBy::Completion => p99(b, 3).cmp(&p99(a, 3)),
            SortBy::Pid => a.pid.cmp(&b.pid),
        };
        ord.then_with(|| b.ios.cmp(&a.ios)).then_with(|| a.disk.cmp(&b.disk))
    });
}

/// A latency in the table: "-" where no I/O ended that phase.
pub fn lat(ns: Option<u64>) -> String {
    match ns {
        None => "-".into(),
        Some(n) if n < 10_000 => format!("{:.1}u", n as f64 / 1e3),
        Some(n) if n < 10_000_000 => format!("{}u", n / 1000),
        Some(n) => format!("{}m", n / 1_000_000),
    }
}

pub fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// The header and the cells of a row, shared by the text and the terminal UI.
pub const HEADER: [&str; 13] = [
    "PID",
    "COMM",
    "CGROUP",
    "DISK",
    "ROUTE",
    "OP",
    "IOPS",
    "MB/s",
    "SUB p50/p99",
    "BLK p50/p99",
    "DEV p50/p99",
    "CMP p50/p99",
    "IRQ/IO CTX/IO",
];

pub fn cells(r: &Row) -> [String; 13] {
    let ph = |i: usize| format!("{}/{}", lat(r.p50_ns[i]), lat(r.p99_ns[i]));
    [
        r.pid.map_or("-".into(), |p| p.to_string()),
        r.comm.clone(),
        r.cgroup.clone(),
        r.disk.clone(),
        r.route.into(),
        r.op.into(),
        format!("{:.0}", r.iops),
        format!("{:.1}", r.bytes_per_s / 1e6),
        ph(0),
        ph(1),
        ph(2),
        ph(3),
        format!("{} {}", ratio(r.irq_per_io), ratio(r.ctx_per_io)),
    ]
}

pub const WIDTHS: [usize; 13] = [7, 15, 24, 7, 9, 5, 8, 8, 13, 13, 13, 13, 13];

/// One frame as text: a header line with the frame's totals and what was lost, then the table
/// (`limit` rows; 0: all).
pub fn render_text(f: &Frame, by: GroupBy, sort: SortBy, limit: usize, w: &mut impl Write) -> io::Result<()> {
    let lost: u64 = f.lost.values().sum();
    write!(
        w,
        "iopath top: {} I/Os in {:.2} s ({:.0} IOPS), {} rows by {}, sorted by {}",
        f.ios,
        f.dur_s,
        f.ios as f64 / f.dur_s,
        f.rows.len(),
        by.name(),
        sort.name()
    )?;
    if let Some(ns) = f.bpf_ns_per_io {
        write!(w, "; BPF {ns:.0} ns per I/O")?;
        if !f.stamps.is_empty() {
            // The one-hook tier has the kernel time its programs only in short windows.
            write!(w, " (timed 1 s in 10)")?;
        }
    }
    if lost > 0 {
        let why: Vec<String> = f.lost.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {v}")).collect();
        write!(w, "; NOT COUNTED {lost} ({})", why.join(", "))?;
    }
    writeln!(w)?;
    if !f.stamps.is_empty() {
        writeln!(
            w,
            "one hook (block_rq_complete): no process measured (--phases has them); submission and completion unknown"
        )?;
    }
    for l in &f.stamps {
        writeln!(w, "  {l}")?;
    }
    let line = |c: &[String]| {
        c.iter()
            .zip(WIDTHS)
            .map(|(s, n)| format!("{:<n$.n$}", s, n = n))
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end()
            .to_owned()
    };
    writeln!(w, "{}", line(&HEADER.map(String::from)))?;
    let n = if limit == 0 { f.rows.len() } else { limit.min(f.rows.len()) };
    for r in &f.rows[..n] {
        writeln!(w, "{}", line(&cells(r)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::counts::TOP_SLOTS;
    use super::*;

    #[test]
    fn by_pod_a_pods_processes_are_one_row_named_by_the_pod() {
        let uid = "8f3e4a2c-1b2d-4c5e-9f60-7a8b9c0d1e2f";
        let names: BTreeMap<String, (String, String)> =
            [(uid.to_owned(), ("shop".to_owned(), "cart".to_owned()))].into_iter().collect();
        let mut a = Snapshot::default();
        let mut b = Snapshot { t_ns: 1_000_000_000, ..Default::default() };
        for (tgid, ctr) in [(20u32, "aaaaaaaaaaaa1"), (21, "bbbbbbbbbbbb2")] {
            let cg = format!("/kubepods/pod{uid}/{ctr}");
            let p = Proc {
                comm: "w".into(),
                cgroup: cg.clone(),
                ctx: Some(0),
                container: super::super::k8s::container(&cg, &names),
            };
            a.procs.insert(tgid, p.clone());
            b.procs.insert(tgid, p);
            let k = Key { tgid, dev: 7 << 20, route: 4, write: false, cgroup: 0 };
            b.rows.insert(k, Counts { ios: 100, ..Default::default() });
        }
        b.procs.insert(
            30,
            Proc { comm: "sshd".into(), cgroup: "/system.slice/ssh.service".into(), ctx: Some(0), container: None },
        );
        b.rows.insert(
            Key { tgid: 30, dev: 7 << 20, route: 4, write: false, cgroup: 0 },
            Counts { ios: 5, ..Default::default() },
        );
        let f = frame(&a, &b, GroupBy::Pod, SortBy::Iops);
        assert_eq!(f.rows.len(), 2, "{:?}", f.rows);
        assert_eq!((f.rows[0].cgroup.as_str(), f.rows[0].ios), ("shop/cart", 200));
        assert_eq!(f.rows[1].cgroup, "/system.slice/ssh.service");
    }

    #[test]
    fn io_is_charged_to_its_bios_cgroup_not_its_threads() {
        use super::super::counts::{ROUTE_PAGECACHE, ROUTE_WRITEBACK};
        // A process in /db that dirtied pages; the flusher wrote them back (tgid 0), its bios
        // charged to /db (id 42). A bio that named no cgroup (0) falls back to the process's.
        let mut a = Snapshot::default();
        let mut b = Snapshot { t_ns: 1_000_000_000, ..Default::default() };
        let dd = Proc { comm: "dd".into(), cgroup: "/db".into(), ctx: Some(0), container: None };
        a.procs.insert(40, dd.clone());
        b.procs.insert(40, dd);
        b.procs.insert(0, Proc { comm: "[kernel threads]".into(), cgroup: "?".into(), ctx: None, container: None });
        b.cgroups.insert(42, Cgroup { path: "/db".into(), container: None });
        b.cgroups.insert(1, Cgroup { path: "/".into(), container: None });
        let wb = |cgroup| Key { tgid: 0, dev: 7 << 20, route: ROUTE_WRITEBACK, write: true, cgroup };
        b.rows.insert(wb(42), Counts { ios: 300, bytes: 300 << 20, ..Default::default() });
        b.rows.insert(wb(1), Counts { ios: 7, ..Default::default() });
        let own = Key { tgid: 40, dev: 7 << 20, route: ROUTE_PAGECACHE, write: true, cgroup: 0 };
        b.rows.insert(own, Counts { ios: 20, ..Default::default() });
        let f = frame(&a, &b, GroupBy::Cgroup, SortBy::Iops);
        let by: Vec<(&str, &str, u64)> = f.rows.iter().map(|r| (r.cgroup.as_str(), r.route, r.ios)).collect();
        assert_eq!(by, vec![("/db", "writeback", 300), ("/db", "pagecache", 20), ("/", "writeback", 7)]);
        // By process, the kernel threads' bios are a row per cgroup they were charged to.
        let f = frame(&a, &b, GroupBy::Process, SortBy::Iops);
        let kt: Vec<(&str, u64)> =
            f.rows.iter().filter(|r| r.pid == Some(0)).map(|r| (r.cgroup.as_str(), r.ios)).collect();
        assert_eq!(kt, vec![("/db", 300), ("/", 7)]);
        assert_eq!(f.rows[0].ctx_per_io, None, "no process: switches unknown");
    }

    /// `n` I/Os of `bytes` each, every phase `ns` long.
    fn counts(n: u64, bytes: u64, ns: [u64; 4]) -> Counts {
        let mut c = Counts { ios: n, bytes: n * bytes, ..Default::default() };
        for (p, v) in ns.iter().enumerate() {
            let slot = (1..TOP_SLOTS).find(|&i| super::super::counts::bucket_bounds(i).1 > *v).unwrap_or(0);
            c.slots[p * TOP_SLOTS + slot] = n;
            c.sum[p] = n * v;
        }
        c
    }

    fn snap(t_s: u64, rows: Vec<(Key, Counts)>, ctx: u64, irqs: u64) -> Snapshot {
        let mut s = Snapshot { t_ns: t_s * 1_000_000_000, rows: rows.into_iter().collect(), ..Default::default() };
        s.procs.insert(10, Proc { comm: "fio".into(), cgroup: "/db".into(), ctx: Some(ctx), container: None });
        s.procs.insert(11, Proc { comm: "pg".into(), cgroup: "/db".into(), ctx: None, container: None });
        s.devs.insert(253 << 20, "vda".into());
        s.irqs.insert(253 << 20, irqs);
        s.lost.insert("table full".into(), 0);
        s
    }

    #[test]
    fn a_frame_is_the_difference_grouped_and_sorted() {
        let k = |tgid, write| Key { tgid, dev: 253 << 20, route: 0, write, cgroup: 0 };
        let a = snap(1, vec![(k(10, false), counts(1000, 4096, [2_000, 1_000, 100_000, 3_000]))], 500, 100);
        let b = snap(
            3,
            vec![
                (k(10, false), counts(21_000, 4096, [2_000, 1_000, 100_000, 3_000])),
                (k(11, true), counts(500, 8192, [5_000, 1_000, 900_000, 3_000])),
            ],
            4_500,
            20_600,
        );
        let f = frame(&a, &b, GroupBy::Process, SortBy::Iops);
        assert_eq!((f.ios, f.rows.len()), (20_500, 2));
        let r = &f.rows[0];
        assert_eq!((r.pid, r.comm.as_str(), r.op, r.route), (Some(10), "fio", "read", "uring"));
        assert!((r.iops - 10_000.0).abs() < 1e-6, "{}", r.iops);
        assert!((r.bytes_per_s - 40_960_000.0).abs() < 1.0);
        let dev99 = r.p99_ns[2].unwrap();
        assert!((93_000..=107_000).contains(&dev99), "{dev99}");
        // 20500 interrupts over the disk's 20500 I/Os; 4000 switches over fio's 20000.
        assert_eq!(r.irq_per_io, Some(1.0));
        assert_eq!(r.ctx_per_io, Some(0.2));
        // A process whose switches could not be read: unknown, not 0.
        assert_eq!(f.rows[1].ctx_per_io, None);
        let f = frame(&a, &b, GroupBy::Process, SortBy::Device);
        assert_eq!(f.rows[0].pid, Some(11), "largest device p99 first");
        let f = frame(&a, &b, GroupBy::Cgroup, SortBy::Iops);
        assert_eq!(f.rows.len(), 2, "one cgroup, two directions");
        assert_eq!((f.rows[0].pid, f.rows[0].cgroup.as_str()), (None, "/db"));
        assert_eq!(f.rows[0].ctx_per_io, None, "pg's unknown switches make the cgroup's unknown");
        let mut text = Vec::new();
        render_text(&f, GroupBy::Cgroup, SortBy::Iops, 0, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("20500 I/Os in 2.00 s") && text.contains("/db"), "{text}");
        assert!(!text.contains("NOT COUNTED"), "{text}");
    }

    #[test]
    fn lost_events_are_shown() {
        let a = snap(1, vec![], 0, 0);
        let mut b = snap(2, vec![], 0, 0);
        b.lost.insert("table full".into(), 7);
        let f = frame(&a, &b, GroupBy::Process, SortBy::Iops);
        let mut text = Vec::new();
        render_text(&f, GroupBy::Process, SortBy::Iops, 0, &mut text).unwrap();
        assert!(String::from_utf8(text).unwrap().contains("NOT COUNTED 7 (table full 7)"));
    }
}
