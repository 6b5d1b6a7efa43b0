//! `--events`: one record per I/O (`struct io_record`, bpf/phases.h) as the ring buffer delivers
//! it, kept in a file (`iopath.events/3`): the header line, the trace's start time and the
//! header's CRC32C; then blocks of at most BLOCK_RECORDS 80-byte native-endian records, each
//! after a head with its record count, the time it was written and two CRC32Cs (the head's, the
//! records'). A damaged block is skipped and counted, never used, and a record stamped before the
//! trace began or after its block was written is out of range, not a phase: 200 bit flips in a
//! 42,804-record events/2 file had reached the tables as a 1011 us submission mean (1.95 clean)
//! and a 17 s maximum. `iopath.events/2` (80-byte records) and `/1` (64-byte, without the disk
//! and bytes) files are still read, record by record. `iopath report --events FILE` turns them
//! back into phases, exactly, per I/O. Pure: bytes in, summary out.

use std::io::{self, Read, Write};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::hist::{Hist, LatSummary};

pub const HEADER: &[u8] = b"iopath.events/3\n";
pub const RECORD_SIZE: usize = 80;
/// The second format: the header line, then records with no checksum.
pub const HEADER_V2: &[u8] = b"iopath.events/2\n";
/// Records a block holds (the last one fewer): 4 KiB of records. Damage costs a whole block: with
/// 64 KiB blocks, 200 bit flips in a 40,000-record file hit all 49 blocks and left nothing; with
/// 4 KiB, at most 200 of 785 (24 bytes of head per 4080 of records: 0.6%).
pub const BLOCK_RECORDS: usize = 51;
const BLOCK_MAGIC: &[u8; 4] = b"IOEB";
/// A block's head: magic, record count, the time it was written (ns), the records' CRC32C and
/// the head's own (over the 20 bytes before it).
const BLOCK_HEAD: usize = 24;

/// CRC32C (Castagnoli, reflected 0x82F63B78), the checksum of iSCSI, ext4 and btrfs metadata.
pub fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !data.iter().fold(!0u32, |c, &b| TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8))
}

/// Whole records inside the first `bytes` of an events/3 file (full blocks only): what a write
/// that failed part-way had put on the disk.
pub fn records_within(bytes: u64) -> u64 {
    let head = (HEADER.len() + 12) as u64;
    let block = (BLOCK_HEAD + BLOCK_RECORDS * RECORD_SIZE) as u64;
    bytes.saturating_sub(head) / block * BLOCK_RECORDS as u64
}

/// Writes an events/3 file: the header now, the records in checksummed blocks, the last block at
/// `finish`. `now` is the probes' clock (CLOCK_MONOTONIC, bpf_ktime_get_ns).
pub struct BlockWriter<W: Write> {
    w: W,
    buf: Vec<u8>,
    n: u32,
    now: fn() -> u64,
}

impl<W: Write> BlockWriter<W> {
    pub fn new(mut w: W, now: fn() -> u64) -> io::Result<BlockWriter<W>> {
        let mut head = HEADER.to_vec();
        head.extend_from_slice(&now().to_le_bytes());
        let crc = crc32c(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        w.write_all(&head)?;
        Ok(BlockWriter { w, buf: Vec::with_capacity(BLOCK_RECORDS * RECORD_SIZE), n: 0, now })
    }

    /// One record as the ring buffer delivered it (`struct io_record`'s bytes).
    pub fn record(&mut self, rec: &[u8]) -> io::Result<()> {
        let mut r = [0u8; RECORD_SIZE];
        let k = rec.len().min(RECORD_SIZE);
        r[..k].copy_from_slice(&rec[..k]);
        self.buf.extend_from_slice(&r);
        self.n += 1;
        if self.n as usize == BLOCK_RECORDS {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let mut head = Vec::with_capacity(BLOCK_HEAD);
        head.extend_from_slice(BLOCK_MAGIC);
        head.extend_from_slice(&self.n.to_le_bytes());
        head.extend_from_slice(&(self.now)().to_le_bytes());
        head.extend_from_slice(&crc32c(&self.buf).to_le_bytes());
        let crc = crc32c(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        let written = self.w.write_all(&head).and_then(|()| self.w.write_all(&self.buf));
        // Cleared either way: a full disk must not grow the block for the rest of the trace.
        self.buf.clear();
        self.n = 0;
        written
    }

    /// Writes the last block and flushes; the writer back.
    pub fn finish(self) -> io::Result<W> {
        let (w, r) = self.finish_keep();
        r.map(|()| w)
    }

    /// `finish` that hands the writer back even when the last block could not be written (how
    /// much of the file reached the disk is then the writer's to say).
    pub fn finish_keep(mut self) -> (W, io::Result<()>) {
        let r = self.flush_block().and_then(|()| self.w.flush());
        (self.w, r)
    }
}
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
    /// Blocks whose checksum failed (events/3): skipped, never used ...
    pub damaged_blocks: u64,
    /// ... and the records they held (a block whose head is damaged counts as a full one).
    pub damaged_records: u64,
    /// Records stamped before the trace began or after their block was written: not used.
    pub outside: u64,
    pub submission: LatSummary,
    pub block: LatSummary,
    pub device: LatSummary,
    pub completion: LatSummary,
    pub completion_posted: Option<LatSummary>,
    pub completion_reap: LatSummary,
    pub total: LatSummary,
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
    /// events/3: the trace's start, and the current block's records still to hand out, with the
    /// time the block was written.
    checked: bool,
    start_ns: u64,
    block: std::collections::VecDeque<IoRecord>,
    written_ns: u64,
    /// Bytes after the last whole record or block (a file cut short).
    pub truncated_bytes: u64,
    pub damaged_blocks: u64,
    pub damaged_records: u64,
    /// Records of a good block whose timestamps lie outside the trace (before its start, after
    /// the block was written): handed out with `outside` set, for the caller to leave out.
    pub outside: u64,
}

impl<R: Read> Records<R> {
    /// Checks the header; an error names the file's problem and how to get a good one.
    pub fn new(mut r: R) -> Result<Records<R>> {
        let mut head = vec![0u8; HEADER.len()];
        if let Err(e) = r.read_exact(&mut head) {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                bail!(
                    "the events file is empty or shorter than its header: not an iopath events file, or one cut \
                     short; write a new one with 'iopath trace --events-out FILE'"
                );
            }
            return Err(e).context("reading the events header");
        }
        let (size, checked) = if head == HEADER {
            (RECORD_SIZE, true)
        } else if head == HEADER_V2 {
            (RECORD_SIZE, false)
        } else if head == HEADER_V1 {
            (RECORD_SIZE_V1, false)
        } else {
            bail!("not an iopath events file (expected the header 'iopath.events/3'): was it written by 'iopath trace --events-out'?");
        };
        let mut start_ns = 0;
        if checked {
            let mut rest = [0u8; 12];
            r.read_exact(&mut rest).context("reading the events header")?;
            head.extend_from_slice(&rest[..8]);
            if crc32c(&head).to_le_bytes() != rest[8..12] {
                bail!("the events file's header is damaged (its checksum fails): write a new one with 'iopath trace --events-out FILE'");
            }
            start_ns = u64::from_le_bytes(rest[..8].try_into().unwrap_or_default());
        }
        Ok(Records {
            r,
            size,
            buf: [0; RECORD_SIZE],
            checked,
            start_ns,
            block: Default::default(),
            written_ns: 0,
            truncated_bytes: 0,
            damaged_blocks: 0,
            damaged_records: 0,
            outside: 0,
        })
    }

    /// Reads blocks until one holds records (false at the end of the file).
    fn next_block(&mut self) -> Result<bool> {
        loop {
            let mut head = [0u8; BLOCK_HEAD];
            let n = fill(&mut self.r, &mut head).context("reading events")?;
            if n < BLOCK_HEAD {
                self.truncated_bytes += n as u64;
                return Ok(false);
            }
            let field = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().unwrap_or_default());
            let count = field(4) as usize;
            let head_ok =
                &head[..4] == BLOCK_MAGIC && crc32c(&head[..20]) == field(20) && (1..=BLOCK_RECORDS).contains(&count);
            // A damaged head's count cannot be trusted: every block but the last is full.
            let len = if head_ok { count } else { BLOCK_RECORDS } * RECORD_SIZE;
            let mut data = vec![0u8; len];
            let got = fill(&mut self.r, &mut data).context("reading events")?;
            if !head_ok {
                self.damaged_blocks += 1;
                self.damaged_records += (got / RECORD_SIZE) as u64;
                if got < len {
                    return Ok(false);
                }
                continue;
            }
            if got < len {
                self.truncated_bytes += (BLOCK_HEAD + got) as u64;
                return Ok(false);
            }
            if crc32c(&data) != field(16) {
                self.damaged_blocks += 1;
                self.damaged_records += count as u64;
                continue;
            }
            self.written_ns = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
            self.block = data.chunks_exact(RECORD_SIZE).filter_map(IoRecord::parse).collect();
            return Ok(true);
        }
    }

    /// The next record; None at the end (or at a cut record, counted in `truncated_bytes`).
    /// In an events/3 file only records of blocks whose checksums hold.
    pub fn next_record(&mut self) -> Result<Option<IoRecord>> {
        if self.checked {
            if self.block.is_empty() && !self.next_block()? {
                return Ok(None);
            }
            return Ok(self.block.pop_front());
        }
        let n = fill(&mut self.r, &mut self.buf[..self.size]).context("reading events")?;
        if n < self.size {
            self.truncated_bytes = n as u64;
            return Ok(None);
        }
        Ok(IoRecord::parse(&self.buf[..self.size]))
    }

    /// Whether `e` lies inside the trace as its file bounds it (events/3; always for older
    /// files): submitted after the trace began, reaped before its block was written.
    pub fn inside(&self, e: &IoRecord) -> bool {
        !self.checked || (e.submit_ts >= self.start_ns && e.reap_ts <= self.written_ns)
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
        if !records.inside(&e) {
            s.outside += 1;
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
    s.damaged_blocks = records.damaged_blocks;
    s.damaged_records = records.damaged_records;
    s.submission = sub.summary();
    s.block = blk.summary();
    s.device = dev.summary();
    s.completion = comp.summary();
    s.completion_posted = (posted.count() > 0).then(|| posted.summary());
    s.completion_reap = reap.summary();
    s.total = total.summary();
    let used = s.records - s.inconsistent - s.invalid - s.outside;
    if used == 0 {
        let mut why = format!("no usable I/O record in the events file ({} records", s.records);
        if s.damaged_blocks > 0 {
            why.push_str(&format!(", {} damaged blocks skipped", s.damaged_blocks));
        }
        if s.outside > 0 {
            why.push_str(&format!(", {} outside the trace", s.outside));
        }
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
    if s.damaged_blocks > 0 {
        writeln!(
            w,
            "  WARNING {} damaged blocks ({} records) failed their checksum: skipped, not used",
            s.damaged_blocks, s.damaged_records
        )?;
    }
    if s.invalid > 0 {
        writeln!(w, "  WARNING {} damaged records (fields no trace writes): not used", s.invalid)?;
    }
    if s.outside > 0 {
        writeln!(w, "  WARNING {} records stamped outside the trace: not used", s.outside)?;
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
        let mut file = HEADER_V2.to_vec();
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
        let mut file = HEADER_V2.to_vec();
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
        let e = format!("{:#}", summarize(&mut &HEADER_V2[..]).unwrap_err());
        assert!(e.contains("no usable I/O record") && e.contains("--events-out"), "{e}");
        let mut junk = HEADER_V2.to_vec();
        junk.extend_from_slice(&[0xff; RECORD_SIZE * 3]);
        let e = format!("{:#}", summarize(&mut junk.as_slice()).unwrap_err());
        assert!(e.contains("3 records, 3 damaged"), "{e}");
    }

    #[test]
    fn a_foreign_file_is_refused_clearly() {
        let err = summarize(&mut &b"{\"schema\":\"iopath.report/1\"}"[..]).unwrap_err();
        assert!(format!("{err:#}").contains("not an iopath events file"));
    }

    fn clock() -> u64 {
        10_000_000_000
    }

    /// An events/3 file of `n` records starting at 1 s (the clock above writes 10 s).
    fn v3(n: u64) -> Vec<u8> {
        let mut w = BlockWriter::new(Vec::new(), || 1_000_000_000).unwrap();
        w.now = clock;
        for i in 0..n {
            w.record(&rec(1_000_000_000 + i * 1_000_000, i % 2 == 0).to_bytes()).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn crc32c_is_castagnoli() {
        // The standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn checksummed_blocks_keep_damage_out_of_every_table() {
        let clean = summarize(&mut v3(2000).as_slice()).unwrap();
        const { assert!(2000 > 3 * BLOCK_RECORDS, "the file spans several blocks") };
        assert_eq!((clean.records, clean.damaged_blocks, clean.invalid), (2000, 0, 0));
        assert_eq!(clean.total.max, 115_000);
        // 200 bit flips inside the second block's records: the block is skipped whole.
        let mut f = v3(2000);
        let second = 28 + BLOCK_HEAD + BLOCK_RECORDS * RECORD_SIZE + BLOCK_HEAD;
        for k in 0..200 {
            f[second + (k * 331) % (BLOCK_RECORDS * RECORD_SIZE)] ^= 1 << (k % 8);
        }
        // (distinct offsets: no flip undoes another)
        let s = summarize(&mut f.as_slice()).unwrap();
        assert_eq!((s.damaged_blocks, s.damaged_records), (1, BLOCK_RECORDS as u64));
        assert_eq!(s.records, 2000 - BLOCK_RECORDS as u64);
        assert_eq!((s.submission.mean, s.total.max), (2_000, 115_000), "no damaged value reaches a table");
        // A damaged block head: its count is not trusted, a full block is skipped.
        let mut f = v3(2000);
        f[28 + 5] ^= 0x40;
        let s = summarize(&mut f.as_slice()).unwrap();
        assert_eq!((s.damaged_blocks, s.records), (1, 2000 - BLOCK_RECORDS as u64));
        let mut text = Vec::new();
        render_text(&s, &mut text).unwrap();
        let want = format!("1 damaged blocks ({BLOCK_RECORDS} records) failed their checksum");
        assert!(String::from_utf8(text).unwrap().contains(&want));
        // A damaged header: refused, not read.
        let mut f = v3(10);
        f[18] ^= 1;
        let e = format!("{:#}", summarize(&mut f.as_slice()).unwrap_err());
        assert!(e.contains("header is damaged"), "{e}");
        // Cut inside the last block: counted, the whole blocks before it used.
        let f = v3(2000);
        let s = summarize(&mut &f[..f.len() - 100]).unwrap();
        assert_eq!(s.records, (2000 / BLOCK_RECORDS * BLOCK_RECORDS) as u64);
        assert!(s.truncated_bytes > 0);
    }

    #[test]
    fn a_look_before_its_posting_is_out_of_order_never_a_wrapped_time() {
        // A CQ ring look by another thread: the look's clock (reap) read before the CQE's
        // posting stamp on another CPU, 3019 ns earlier (the database case: 18446744073709548597
        // ns had reached a max).
        let mut w = BlockWriter::new(Vec::new(), || 1_000_000_000).unwrap();
        w.now = clock;
        let good = rec(2_000_000_000, true);
        let mut bad = rec(3_000_000_000, true);
        bad.reap_ts = bad.posted_ts - 3019;
        for r in [good, bad] {
            w.record(&r.to_bytes()).unwrap();
        }
        let s = summarize(&mut w.finish().unwrap().as_slice()).unwrap();
        assert_eq!((s.records, s.inconsistent), (2, 1));
        for p in [&s.submission, &s.block, &s.device, &s.completion, &s.completion_reap, &s.total] {
            assert!(p.max < 1_000_000_000, "a wrapped difference reached a table: {p:?}");
        }
        assert_eq!(s.total.count, 1);
    }

    #[test]
    fn a_record_stamped_outside_the_trace_is_not_used() {
        let mut w = BlockWriter::new(Vec::new(), || 1_000_000_000).unwrap();
        w.now = clock;
        w.record(&rec(2_000_000_000, true).to_bytes()).unwrap();
        // Before the trace began; after its block was written (a reap at 36 minutes).
        w.record(&rec(5, true).to_bytes()).unwrap();
        let mut late = rec(2_000_000_000, true);
        late.reap_ts = 2_160_000_000_000;
        late.tid = 9;
        w.record(&late.to_bytes()).unwrap();
        let s = summarize(&mut w.finish().unwrap().as_slice()).unwrap();
        assert_eq!((s.records, s.outside, s.total.count), (3, 2, 1));
    }
}
