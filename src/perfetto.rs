//! `--perfetto FILE`: the per-I/O records (`--events`) as a Perfetto trace (protos/perfetto/trace,
//! TrackEvent), for ui.perfetto.dev. Pure: records, interrupt stamps and names in, bytes out.
//!
//! Tracks: each process, each submitting thread under it, each disk's queue, each interrupt
//! vector. An I/O is four slices: submission and completion on its thread, block and device on
//! its disk, joined by one flow (submission -> block -> device -> completion). I/Os in flight
//! together overlap, which one track cannot draw, so each thread and disk has lanes (child
//! tracks "#0", "#1" ...): an I/O takes the first lane free over its whole span there, as many
//! lanes as were in flight at once. Interrupts are instants on their vector's track.
//! Events are written in time order (the records arrive in reap order): ~40 bytes of memory an
//! I/O while writing.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::events::IoRecord;
use crate::model::IrqStamp;
use crate::pb::Pb;

/// What the tracks are called.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// dev_t -> disk name.
    pub devs: BTreeMap<u32, String>,
    /// tgid -> process name.
    pub procs: BTreeMap<u32, String>,
    /// IRQ number -> "36:virtio1-req.0".
    pub irqs: BTreeMap<u32, String>,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Written {
    /// I/Os drawn (four slices and a flow each).
    pub ios: u64,
    /// Records left out: damaged or out of order (a missed hook), as `iopath report` counts them.
    pub skipped: u64,
    pub irqs: u64,
    pub tracks: u64,
}

// TracePacket / TrackDescriptor / TrackEvent field numbers (perfetto_trace.proto).
const TRACE_PACKET: u32 = 1;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PROCESS: u32 = 3;
const TD_THREAD: u32 = 4;
const TD_PARENT: u32 = 5;
const TE_TYPE: u32 = 9;
const TE_TRACK: u32 = 11;
const TE_CATEGORIES: u32 = 22;
const TE_NAME: u32 = 23;
const TE_FLOW: u32 = 47;
const TE_FLOW_END: u32 = 48;
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
/// Every packet on one writer sequence (no interning, so no incremental state).
const SEQ: u64 = 1;

/// Track ids: the kind in the top 4 bits, the id (tgid, tid, dev_t, IRQ) below, a lane in
/// the low 20 bits (lane 0xfffff: the parent track itself).
fn uuid(kind: u64, id: u32, lane: u32) -> u64 {
    (kind << 60) | ((id as u64) << 20) | (lane as u64 & 0xfffff)
}
const PROCESS: u64 = 1;
const THREAD: u64 = 2;
const DISK: u64 = 3;
const IRQ: u64 = 4;
const PARENT: u32 = 0xfffff;

fn packet(w: &mut impl Write, p: Pb) -> io::Result<()> {
    let mut t = Pb::default();
    t.msg(TRACE_PACKET, p);
    w.write_all(&t.0)
}

fn descriptor(
    w: &mut impl Write,
    uuid: u64,
    parent: Option<u64>,
    name: &str,
    body: Option<(u32, Pb)>,
) -> io::Result<()> {
    let mut td = Pb::default();
    td.uint(TD_UUID, uuid);
    if let Some(p) = parent {
        td.uint(TD_PARENT, p);
    }
    td.str(TD_NAME, name);
    if let Some((field, m)) = body {
        td.msg(field, m);
    }
    let mut p = Pb::default();
    p.uint(PKT_SEQ_ID, SEQ);
    p.msg(PKT_TRACK_DESCRIPTOR, td);
    packet(w, p)
}

/// Lanes of one track: each lane's end; an interval takes the first lane ended by its start.
#[derive(Default)]
struct Lanes(Vec<u64>);

impl Lanes {
    fn take(&mut self, start: u64, end: u64) -> u32 {
        let i = match self.0.iter().position(|e| *e <= start) {
            Some(i) => i,
            None => {
                self.0.push(0);
                self.0.len() - 1
            }
        };
        self.0[i] = end;
        i as u32
    }
}

/// One event to write: sorted by time, an end before a begin at the same time (a lane freed
/// and taken again at one instant).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ev {
    ts: u64,
    /// 0 end, 1 begin or instant.
    order: u8,
    /// 0 submission, 1 block, 2 device, 3 completion, 4 interrupt.
    what: u8,
    track: u64,
    /// The I/O's flow id (its index + 1), or the interrupt's index.
    id: u32,
}

const SLICE_NAMES: [&str; 4] = ["submission", "block", "device", "completion"];

/// Writes the trace. `records` in any order.
pub fn write(records: &[IoRecord], irqs: &[IrqStamp], names: &Names, w: &mut impl Write) -> io::Result<Written> {
    let mut out = Written::default();
    let mut ios: Vec<&IoRecord> = records
        .iter()
        .filter(|r| {
            let ok = r.ordered() && r.tgid != 0 && r.submit_ts != 0;
            out.skipped += u64::from(!ok);
            ok
        })
        .collect();
    ios.sort_by_key(|r| r.submit_ts);
    let mut thread_lanes: BTreeMap<u32, Lanes> = BTreeMap::new();
    let mut disk_lanes: BTreeMap<u32, Lanes> = BTreeMap::new();
    let mut threads: BTreeMap<u32, u32> = BTreeMap::new();
    let mut evs: Vec<Ev> = Vec::with_capacity(ios.len() * 8 + irqs.len());
    for (i, r) in ios.iter().enumerate() {
        let id = i as u32 + 1;
        // A record of the first format has no thread: its process stands in.
        let tid = if r.tid != 0 { r.tid } else { r.tgid };
        threads.insert(tid, r.tgid);
        let tl = thread_lanes.entry(tid).or_default().take(r.submit_ts, r.reap_ts);
        let dl = disk_lanes.entry(r.dev).or_default().take(r.queue_ts, r.complete_ts);
        let (tt, dt) = (uuid(THREAD, tid, tl), uuid(DISK, r.dev, dl));
        for (what, track, a, b) in [
            (0u8, tt, r.submit_ts, r.queue_ts),
            (1, dt, r.queue_ts, r.issue_ts),
            (2, dt, r.issue_ts, r.complete_ts),
            (3, tt, r.complete_ts, r.reap_ts),
        ] {
            evs.push(Ev { ts: a, order: 1, what, track, id });
            evs.push(Ev { ts: b, order: 0, what, track, id });
        }
    }
    out.ios = ios.len() as u64;
    for (i, s) in irqs.iter().enumerate() {
        evs.push(Ev { ts: s.ts, order: 1, what: 4, track: uuid(IRQ, s.irq, PARENT), id: i as u32 });
    }
    out.irqs = irqs.len() as u64;
    evs.sort_unstable();

    // Descriptors first: processes, threads and their lanes, disks and theirs, vectors.
    let procs: std::collections::BTreeSet<u32> = threads.values().copied().collect();
    for p in &procs {
        let name = names.procs.get(p).cloned().unwrap_or_else(|| format!("pid {p}"));
        let mut pd = Pb::default();
        pd.uint(1, *p as u64);
        pd.str(6, &name);
        descriptor(w, uuid(PROCESS, *p, PARENT), None, &name, Some((TD_PROCESS, pd)))?;
        out.tracks += 1;
    }
    for (tid, tgid) in &threads {
        let parent = uuid(THREAD, *tid, PARENT);
        let mut td = Pb::default();
        td.uint(1, *tgid as u64);
        td.uint(2, *tid as u64);
        td.str(5, &format!("tid {tid}"));
        descriptor(w, parent, None, &format!("tid {tid}"), Some((TD_THREAD, td)))?;
        for lane in 0..thread_lanes[tid].0.len() as u32 {
            descriptor(w, uuid(THREAD, *tid, lane), Some(parent), &format!("tid {tid} I/O #{lane}"), None)?;
        }
        out.tracks += 1 + thread_lanes[tid].0.len() as u64;
    }
    for (dev, lanes) in &disk_lanes {
        let disk = names.devs.get(dev).cloned().unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff));
        let parent = uuid(DISK, *dev, PARENT);
        descriptor(w, parent, None, &format!("{disk} queue"), None)?;
        for lane in 0..lanes.0.len() as u32 {
            descriptor(w, uuid(DISK, *dev, lane), Some(parent), &format!("{disk} #{lane}"), None)?;
        }
        out.tracks += 1 + lanes.0.len() as u64;
    }
    let vectors: std::collections::BTreeSet<u32> = irqs.iter().map(|s| s.irq).collect();
    for v in &vectors {
        let name = names.irqs.get(v).cloned().unwrap_or_else(|| format!("irq {v}"));
        descriptor(w, uuid(IRQ, *v, PARENT), None, &format!("IRQ {name}"), None)?;
        out.tracks += 1;
    }

    for e in &evs {
        let mut te = Pb::default();
        te.uint(TE_TRACK, e.track);
        if e.what == 4 {
            let s = irqs[e.id as usize];
            te.uint(TE_TYPE, INSTANT);
            te.str(TE_CATEGORIES, "irq");
            te.str(TE_NAME, &format!("irq {} cpu {}", s.irq, s.cpu));
        } else if e.order == 1 {
            te.uint(TE_TYPE, SLICE_BEGIN);
            te.str(TE_CATEGORIES, "io");
            te.str(TE_NAME, SLICE_NAMES[e.what as usize]);
            // One flow per I/O: each slice continues it, the completion ends it.
            te.fixed64(if e.what == 3 { TE_FLOW_END } else { TE_FLOW }, e.id as u64);
        } else {
            te.uint(TE_TYPE, SLICE_END);
        }
        let mut p = Pb::default();
        p.uint(PKT_TIMESTAMP, e.ts);
        p.uint(PKT_SEQ_ID, SEQ);
        p.msg(PKT_TRACK_EVENT, te);
        packet(w, p)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: u64, tid: u32, dev: u32) -> IoRecord {
        IoRecord {
            tag: t,
            submit_ts: t,
            queue_ts: t + 2_000,
            issue_ts: t + 3_000,
            complete_ts: t + 100_000,
            posted_ts: 0,
            reap_ts: t + 105_000,
            tgid: 10,
            mode: 2,
            dev,
            bytes: 4096,
            tid,
        }
    }

    #[test]
    fn overlapping_ios_take_lanes_and_everything_is_counted() {
        // Four I/Os in flight at once on one thread and disk, then one after they all ended.
        let mut rs: Vec<IoRecord> = (0..4).map(|i| rec(1_000_000 + i * 10_000, 11, 7 << 20)).collect();
        rs.push(rec(2_000_000, 11, 7 << 20));
        let mut bad = rec(3_000_000, 11, 7 << 20);
        bad.issue_ts = 0;
        rs.push(bad);
        let irqs = vec![IrqStamp { ts: 1_100_000, irq: 36, cpu: 1 }];
        let mut names = Names::default();
        names.devs.insert(7 << 20, "loop7".into());
        let mut buf = Vec::new();
        let w = write(&rs, &irqs, &names, &mut buf).unwrap();
        assert_eq!((w.ios, w.skipped, w.irqs), (5, 1, 1));
        // Process, thread + 4 lanes, disk + 4 lanes, one vector.
        assert_eq!(w.tracks, 1 + 5 + 5 + 1);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.contains("loop7 #3") && !text.contains("loop7 #4"), "four lanes at most");
        assert!(text.contains("irq 36 cpu 1"));
    }

    #[test]
    fn lanes_are_reused_once_free() {
        let mut l = Lanes::default();
        assert_eq!(l.take(0, 10), 0);
        assert_eq!(l.take(5, 15), 1);
        assert_eq!(l.take(10, 20), 0, "ended at 10: free at 10");
        assert_eq!(l.take(12, 13), 2);
    }
}
