//! `--events`: one record per I/O (`struct io_record`, bpf/phases.h) as the ring buffer delivers
//! it, kept in a file: the header line `iopath.events/2` and then 80-byte native-endian records
//! (`iopath.events/1` files, 64-byte records without the disk and bytes, are still read).
//! `iopath report --events FILE` turns them back into phases, exactly, per I/O. Pure: bytes in,
//! summary out.

use std::io::{self, Read, Write};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::hist::{Hist, LatSummary};

pub const HEADER: &[u8] = b"iopath.events/2\n";
pub const RECORD_SIZE: usize = 80;
/// The first format: the same fields without `dev` and `bytes`.
const HEADER_V1: &[u8] = b"iopath.events/1\n";
const RECORD_SIZE_V1: usize = 64;

/// Byte offsets of `struct io_record`'s fields (bpf/phases.h), checked against the compiled
/// layout at build time (probe/mod.rs).
pub mod off {
    pub const TAG: usize = 0;
    pub const SUBMIT_TS: usize = 8;
    pub const QUEUE_TS: usize = 16;
    pub const ISSUE_TS: usize = 24;
    pub const COMPLETE_TS: usize = 32;
    pub const POSTED_TS: usize = 40;
    pub const REAP_TS: usize = 48;
    pub const TGID: usize = 56;
    pub const MODE: usize = 60;
    pub const DEV: usize = 64;
    pub const BYTES: usize = 68;
    pub const TID: usize = 72;
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IoRecord {
    pub tag: u64,
    pub submit_ts: u64,
    pub queue_ts: u64,
    pub issue_ts: u64,
    pub complete_ts: u64,
    /// 0 for aio (no posting tracepoint).
    pub posted_ts: u64,
    pub reap_ts: u64,
    pub tgid: u32,
    pub mode: u32,
    /// The disk (the kernel's dev_t, major << 20 | minor); 0: not known (an events/1 file).
    pub dev: u32,
    /// Bytes of the requests completed for it; 0 in an events/1 file.
    pub bytes: u32,
    /// The thread that submitted it; 0 in an events/1 file.
    pub tid: u32,
}

impl IoRecord {
    /// A record of either format (`b` as long as its format's record).
    pub fn parse(b: &[u8]) -> Option<IoRecord> {
        if b.len() < RECORD_SIZE_V1 {
            return None;
        }
        let w = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let h = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        Some(IoRecord {
            tag: w(off::TAG),
            submit_ts: w(off::SUBMIT_TS),
            queue_ts: w(off::QUEUE_TS),
            issue_ts: w(off::ISSUE_TS),
            complete_ts: w(off::COMPLETE_TS),
            posted_ts: w(off::POSTED_TS),
            reap_ts: w(off::REAP_TS),
            tgid: h(off::TGID),
            mode: h(off::MODE),
            dev: if b.len() >= RECORD_SIZE { h(off::DEV) } else { 0 },
            bytes: if b.len() >= RECORD_SIZE { h(off::BYTES) } else { 0 },
            tid: if b.len() >= RECORD_SIZE { h(off::TID) } else { 0 },
        })
    }

    /// The disk as (major, minor) from the kernel's dev_t (MINORBITS = 20).
    pub fn disk(&self) -> (u32, u32) {
        (self.dev >> 20, self.dev & 0xfffff)
    }

    pub fn to_bytes(&self) -> [u8; RECORD_SIZE] {
        let mut b = [0u8; RECORD_SIZE];
        for (o, v) in [
            (off::TAG, self.tag),
            (off::SUBMIT_TS, self.submit_ts),
            (off::QUEUE_TS, self.queue_ts),
            (off::ISSUE_TS, self.issue_ts),
            (off::COMPLETE_TS, self.complete_ts),
            (off::POSTED_TS, self.posted_ts),
            (off::REAP_TS, self.reap_ts),
        ] {
            b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        }
        for (o, v) in [
            (off::TGID, self.tgid),
            (off::MODE, self.mode),
            (off::DEV, self.dev),
            (off::BYTES, self.bytes),
            (off::TID, self.tid),
        ] {
            b[o..o + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }
}

/// Phases recomputed from the records, per I/O and exact (to the 0.4% of `Hist`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct EventsSummary {
    pub records: u64,
    /// Records whose timestamps are out of order (a missed hook): counted, not used.
    pub inconsistent: u64,
    /// Records no trace writes: a field out of range (unknown submit mode or route flag, no
    /// process, a timestamp of 0, an I/O longer than an hour): a damaged file. Counted, not used.
    pub invalid: u64,
    /// Bytes after the last whole record (a file cut short): not used.
    pub truncated_bytes: u64,
    pub submission: LatSummary,
    pub block: LatSummary,
    pub device: LatSummary,
    pub completion: LatSummary,
    pub completion_posted: Option<LatSummary>,
    pub completion_reap: LatSummary,
    pub total: LatSummary,
}

pub fn write_header(w: &mut impl Write) -> io::Result<()> {
    w.write_all(HEADER)
}

/// `enum submit_mode` values and `enum route_flag` bits of bpf/phases.h a trace can write.
const KNOWN_MODES: std::ops::RangeInclusive<u32> = 1..=3;
const KNOWN_FLAGS: u32 = 0x00ff_0000;
/// No I/O a trace records takes an hour: a longer one is a damaged timestamp.
const MAX_IO_NS: u64 = 3_600_000_000_000;

impl IoRecord {
    /// Fields a trace can have written (order is checked separately: a missed hook, not damage).
    fn valid(&self) -> bool {
        KNOWN_MODES.contains(&(self.mode & 0xffff))
            && self.mode & !(0xffff | KNOWN_FLAGS) == 0
            && self.tgid != 0
            && self.submit_ts != 0
            && self.reap_ts.wrapping_sub(self.submit_ts) < MAX_IO_NS
    }
}

/// Reads into `buf` until it is full or the input ends; how many bytes it got.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The records of an events file, in order, as its format has them.
pub struct Records<R> {
    r: R,
    size: usize,
    buf: [u8; RECORD_SIZE],
    /// Bytes after the last whole record, once the input ended (a file cut short).
    pub truncated_bytes: u64,
}

impl<R: Read> Records<R> {
    /// Checks the header; an error names the file's problem and how to get a good one.
    pub fn new(mut r: R) -> Result<Records<R>> {
        let mut head = vec![0u8; HEADER.len()];
        r.read_exact(&mut head).context("reading the events header")?;
        let size = if head == HEADER {
            RECORD_SIZE
        } else if head == HEADER_V1 {
            RECORD_SIZE_V1
        } else {
            bail!("not an iopath events file (expected the header 'iopath.events/2'): was it written by 'iopath trace --events-out'?");
        };
        Ok(Records { r, size, buf: [0; RECORD_SIZE], truncated_bytes: 0 })
    }

    /// The next record; None at the end (or at a cut record, counted in `truncated_bytes`).
    pub fn next_record(&mut self) -> Result<Option<IoRecord>> {
        let n = fill(&mut self.r, &mut self.buf[..self.size]).context("reading events")?;
        if n < self.size {
            self.truncated_bytes = n as u64;
            return Ok(None);
        }
        Ok(IoRecord::parse(&self.buf[..self.size]))
    }
}

impl IoRecord {
    /// In order and with a request issued: its phases can be computed.
    pub fn ordered(&self) -> bool {
        self.submit_ts <= self.queue_ts
            && self.queue_ts <= self.issue_ts
            && self.issue_ts <= self.complete_ts
            && self.complete_ts <= self.reap_ts
            && (self.posted_ts == 0 || (self.complete_ts <= self.posted_ts && self.posted_ts <= self.reap_ts))
            && self.issue_ts != 0
    }
}

/// Reads an events file and summarizes it. Damaged or cut records are counted and left out; a
/// file with no usable record is an error, not an empty table.
pub fn summarize(r: &mut impl Read) -> Result<EventsSummary> {
    let mut records = Records::new(r)?;
    let (mut sub, mut blk, mut dev, mut comp, mut posted, mut reap, mut total) =
        (Hist::new(), Hist::new(), Hist::new(), Hist::new(), Hist::new(), Hist::new(), Hist::new());
    let mut s = EventsSummary::default();
    while let Some(e) = records.next_record()? {
        s.records += 1;
        if !e.valid() {
            s.invalid += 1;
            continue;
        }
        if !e.ordered() {
            s.inconsistent += 1;
            continue;
        }
        sub.record(e.queue_ts - e.submit_ts);
        blk.record(e.issue_ts - e.queue_ts);
        dev.record(e.complete_ts - e.issue_ts);
        comp.record(e.reap_ts - e.complete_ts);
        if e.posted_ts != 0 {
            posted.record(e.posted_ts - e.complete_ts);
            reap.record(e.reap_ts - e.posted_ts);
        } else {
            reap.record(e.reap_ts - e.complete_ts);
        }
        total.record(e.reap_ts - e.submit_ts);
    }
    s.truncated_bytes = records.truncated_bytes;
    s.submission = sub.summary();
    s.block = blk.summary();
    s.device = dev.summary();
    s.completion = comp.summary();
    s.completion_posted = (posted.count() > 0).then(|| posted.summary());
    s.completion_reap = reap.summary();
    s.total = total.summary();
    let used = s.records - s.inconsistent - s.invalid;
    if used == 0 {
        let mut why = format!("no usable I/O record in the events file ({} records", s.records);
        if s.invalid > 0 {
            why.push_str(&format!(", {} damaged", s.invalid));
        }
        if s.inconsistent > 0 {
            why.push_str(&format!(", {} out of order", s.inconsistent));
        }
        if s.truncated_bytes > 0 {
            why.push_str(&format!(", {} bytes of a cut record", s.truncated_bytes));
        }
        bail!(
            "{why}): it is empty or damaged; write a new one with 'iopath trace --events-out FILE' (a trace \
             that followed no I/O writes only the header)"
        );
    }
    Ok(s)
}

pub fn render_text(s: &EventsSummary, w: &mut impl Write) -> io::Result<()> {
    use crate::report::text::us;
    writeln!(w, "iopath report: {} I/O records ({} out of order, not used)", s.records, s.inconsistent)?;
    if s.invalid > 0 {
        writeln!(w, "  WARNING {} damaged records (fields no trace writes): not used", s.invalid)?;
    }
    if s.truncated_bytes > 0 {
        writeln!(
            w,
            "  WARNING the file ends {} bytes into a record: cut short (a trace killed while writing, or a partial copy)",
            s.truncated_bytes
        )?;
    }
    writeln!(w, "  phases (us)          mean      p50      p90      p99    p99.9      max")?;
    let mut row = |name: &str, l: &LatSummary| {
        writeln!(
            w,
            "    {name:<16}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
            us(l.mean),
            us(l.p50),
            us(l.p90),
            us(l.p99),
            us(l.p999),
            us(l.max)
        )
    };
    row("submission", &s.submission)?;
    row("block layer", &s.block)?;
    row("device", &s.device)?;
    row("completion", &s.completion)?;
    if let Some(p) = &s.completion_posted {
        row("  posted", p)?;
    }
    row("  waiting (reap)", &s.completion_reap)?;
    row("total", &s.total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(base: u64, posted: bool) -> IoRecord {
        IoRecord {
            tag: base,
            submit_ts: base,
            queue_ts: base + 2_000,
            issue_ts: base + 4_000,
            complete_ts: base + 104_000,
            posted_ts: if posted { base + 110_000 } else { 0 },
            reap_ts: base + 115_000,
            tgid: 7,
            mode: if posted { 1 } else { 2 },
            dev: 253 << 20,
            bytes: 4096,
            tid: 8,
        }
    }

    #[test]
    fn records_round_trip_and_summarize_exactly() {
        let mut file = HEADER.to_vec();
        for i in 0..1000 {
            file.extend_from_slice(&rec(1 + i * 1_000_000, i % 2 == 0).to_bytes());
        }
        let mut bad = rec(5, true);
        bad.issue_ts = 1; // before queue: a missed hook
        file.extend_from_slice(&bad.to_bytes());
        assert_eq!(IoRecord::parse(&rec(9, true).to_bytes()), Some(rec(9, true)));
        let s = summarize(&mut file.as_slice()).unwrap();
        assert_eq!((s.records, s.inconsistent), (1001, 1));
        assert_eq!(s.submission.mean, 2_000);
        assert_eq!(s.device.mean, 100_000);
        assert_eq!(s.completion.mean, 11_000);
        assert_eq!(s.completion_posted.unwrap().count, 500);
        assert_eq!(s.total.mean, 115_000);
        assert_eq!(s.completion_reap.count, 1000);
    }

    #[test]
    fn damaged_cut_and_empty_files_are_counted_or_refused() {
        let mut file = HEADER.to_vec();
        for i in 0..10 {
            file.extend_from_slice(&rec(1 + i * 1_000_000, true).to_bytes());
        }
        // A flipped high byte in reap_ts: ordered, but an I/O of years.
        let mut b = rec(7, true).to_bytes();
        b[55] = 0x7f;
        file.extend_from_slice(&b);
        // Random bytes where a record was.
        file.extend_from_slice(&[0xa5; RECORD_SIZE]);
        // Cut mid-record.
        file.extend_from_slice(&rec(9, false).to_bytes()[..40]);
        // The first format: 64-byte records, no disk.
        let mut v1 = HEADER_V1.to_vec();
        v1.extend_from_slice(&rec(3, true).to_bytes()[..RECORD_SIZE_V1]);
        v1.extend_from_slice(&rec(4_000_000, false).to_bytes()[..RECORD_SIZE_V1]);
        let s1 = summarize(&mut v1.as_slice()).unwrap();
        assert_eq!((s1.records, s1.invalid, s1.truncated_bytes, s1.device.mean), (2, 0, 0, 100_000));
        let s = summarize(&mut file.as_slice()).unwrap();
        assert_eq!((s.records, s.invalid, s.inconsistent, s.truncated_bytes), (12, 2, 0, 40));
        assert_eq!(s.total.count, 10);
        assert_eq!(s.completion.max, 11_000, "no damaged value reaches a summary");
        let mut text = Vec::new();
        render_text(&s, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("2 damaged records") && text.contains("40 bytes into a record"), "{text}");
        // Header only, and nothing but damage: errors that say so.
        let e = format!("{:#}", summarize(&mut &HEADER[..]).unwrap_err());
        assert!(e.contains("no usable I/O record") && e.contains("--events-out"), "{e}");
        let mut junk = HEADER.to_vec();
        junk.extend_from_slice(&[0xff; RECORD_SIZE * 3]);
        let e = format!("{:#}", summarize(&mut junk.as_slice()).unwrap_err());
        assert!(e.contains("3 records, 3 damaged"), "{e}");
    }

    #[test]
    fn a_foreign_file_is_refused_clearly() {
        let err = summarize(&mut &b"{\"schema\":\"iopath.report/1\"}"[..]).unwrap_err();
        assert!(format!("{err:#}").contains("not an iopath events file"));
    }
}
