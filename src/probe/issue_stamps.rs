//! The lean trace's issue stamp: block_rq_issue attached only while it is needed.
//!
//! A trace starts with the hook attached and a check window open: each completion compares the
//! request's `io_start_time_ns` with the hooked issue time of the same request, read in the same
//! program run (bpf/block.bpf.h `issue_stamp_of`, bpf/stamp_check.bpf.h). When every queue
//! that did I/O in the window has its stamp within max(1 us, 2%) of the hook on 99% of its
//! requests (`stamps::decide`), the device phase starts at the stamp and the hook is detached;
//! a queue whose stamp is 0 (no queue stats: wbt, iocost and iolatency off) or off keeps the
//! hook for the whole trace. The check runs again every `RECHECK_EVERY`, and at once when a
//! request completes on a queue no check has seen while the hook is detached.
//!
//! Measured on the loop device at io_uring QD32 (scripts/bench-overhead.sh, interleaved):
//! the lean trace without block_rq_issue 0.83x untraced against 0.75x with it.

use std::collections::BTreeMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libbpf_rs::MapCore;

use super::stamps::{decide, CheckStats, Stamp, Verdict};
use crate::model::{IssueStampDisk, IssueStamps};

/// A window lasts at least this long ...
pub const CHECK_FOR: Duration = Duration::from_millis(200);
/// ... until every queue that did I/O in it has this many requests compared (a p99 over 200
/// requests is the third-worst: one stale stamp in a hundred shows) ...
pub const CHECK_SAMPLES: u64 = 200;
/// ... and at most this long (a queue with fewer requests by then is judged on what it had).
pub const CHECK_AT_MOST: Duration = Duration::from_secs(2);
/// The stamps are checked again this often while the trace runs: a plug's cached clock goes
/// stale under preemption (6.9+ before a 6.18-stable fix), which load can bring at any time.
pub const RECHECK_EVERY: Duration = Duration::from_secs(10);
const TICK: Duration = Duration::from_millis(20);
const QUEUES: usize = 1024;
const ERR_SLOTS: usize = 24;
const CHECK_ONE_WORDS: usize = 4 + ERR_SLOTS;
/// `enum stamps_mode`.
const SM_CHECKED: u32 = 1;
const SM_ISSUE_STAMP: u32 = 2;

/// Per queue id: its disk and its comparisons.
type Window = BTreeMap<u32, (u32, CheckStats)>;

/// A window's comparisons per queue id -> each queue's new mode and whether the hook may go:
/// every queue that did I/O in the window trusted, at least one of them.
pub fn judge(window: &Window) -> (BTreeMap<u32, (u32, Option<Verdict>)>, bool) {
    let mut out = BTreeMap::new();
    let mut all = true;
    let mut any = false;
    for (qid, (dev, s)) in window {
        if s.n == 0 {
            continue;
        }
        let v = decide(Stamp::Issue, s).or_else(|| (s.n > 0).then(|| short_verdict(s)));
        match &v {
            Some(v) if v.trusted() => any = true,
            _ => all = false,
        }
        out.insert(*qid, (*dev, v));
    }
    (out, all && any)
}

/// Too few requests for `decide`: the hook stays (never trusted on less than the minimum).
fn short_verdict(s: &CheckStats) -> Verdict {
    Verdict::Hooked {
        n: s.n,
        why: format!("only {} requests compared in the check window: too few to trust the stamp", s.n),
        err_p99_ns: s.err_p99_ns(),
    }
}

/// The words of the BPF side the checker writes (mmaped .bss).
pub struct Flags {
    pub checking: *mut u32,
    pub stamps: *mut u32,
    pub detached: *mut u32,
}

// SAFETY: the pointers are into the mmaped .bss of a skeleton that outlives the checker's thread
// (it is joined inside the session's scope); only that thread writes them.
unsafe impl Send for Flags {}

fn put(p: *mut u32, v: bool) {
    if !p.is_null() {
        // SAFETY: see `Flags`.
        unsafe { std::ptr::write_volatile(p, v as u32) };
    }
}

/// block_rq_issue's program: attached again with a raw tracepoint link (a tp_btf program names
/// its tracepoint in its BTF; a raw_tp one by name).
pub struct IssueProg {
    pub fd: i32,
    pub btf: bool,
}

impl IssueProg {
    fn attach(&self) -> Option<OwnedFd> {
        let name = c"block_rq_issue";
        let p = if self.btf { std::ptr::null() } else { name.as_ptr() };
        // SAFETY: plain syscall wrapper; the returned fd is the link, detached when closed.
        let fd = unsafe { libbpf_rs::libbpf_sys::bpf_raw_tracepoint_open(p, self.fd) };
        // SAFETY: a fresh fd this call owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// The checker: owns block_rq_issue's link for the trace.
pub struct Checker {
    pub prog: IssueProg,
    /// The session's own link, then ours.
    pub link: Option<Box<dyn Send>>,
    pub flags: Flags,
    pub queues: libbpf_rs::MapHandle,
    pub checks_fd: i32,
    pub counters_fd: i32,
    pub unstamped_counter: u32,
}

impl Checker {
    fn read(&self, ncpu: usize, buf: &mut Vec<u8>) -> Window {
        let mut out = BTreeMap::new();
        let size = 2 * CHECK_ONE_WORDS * 8;
        // One batched read of the queue table (1024 lookups a tick were ~50k system calls a
        // second while a window is open), then the checks of the queues that have a disk.
        let Ok(rows) = self.queues.lookup_batch(QUEUES as u32, libbpf_rs::MapFlags::ANY, libbpf_rs::MapFlags::ANY)
        else {
            return out;
        };
        for (k, q) in rows {
            let (Some(k), Some(q)) = (k.get(..4), q.get(..4)) else { continue };
            let id = u32::from_ne_bytes([k[0], k[1], k[2], k[3]]);
            let dev = u32::from_ne_bytes([q[0], q[1], q[2], q[3]]);
            if dev == 0 {
                continue;
            }
            let mut s = CheckStats::default();
            if super::series::lookup_percpu(self.checks_fd, id, size, ncpu, buf) {
                for cpu in buf.chunks(size) {
                    let w: Vec<u64> = (0..CHECK_ONE_WORDS).map(|i| super::series::word(cpu, i)).collect();
                    s.add(&CheckStats::from_words(&w));
                }
            }
            out.insert(id, (dev, s));
        }
        out
    }

    fn set_mode(&self, id: u32, dev: u32, mode: u32) {
        let mut v = [0u8; 8];
        v[..4].copy_from_slice(&dev.to_ne_bytes());
        v[4..].copy_from_slice(&mode.to_ne_bytes());
        let _ = self.queues.update(&id.to_ne_bytes(), &v, libbpf_rs::MapFlags::ANY);
    }

    /// Runs until `stop`: windows, verdicts, the hook attached and detached. Returns the report.
    pub fn run(mut self, stop: &AtomicBool) -> IssueStamps {
        let ncpu = libbpf_rs::num_possible_cpus().unwrap_or(1);
        let mut buf = Vec::new();
        let start = Instant::now();
        let mut report = IssueStamps::default();
        let mut verdicts: BTreeMap<u32, Verdict> = BTreeMap::new();
        // The window open now: when it opened and each queue's stats then.
        let mut window: Option<(Instant, Window)> = None;
        let mut hooked_since = Some(start);
        let mut next_check = start;
        let mut last_unstamped = 0;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
            let now = Instant::now();
            let unstamped = super::series::percpu_u64(self.counters_fd, self.unstamped_counter, ncpu, &mut Vec::new());
            match &window {
                None if now >= next_check || unstamped > last_unstamped => {
                    if self.link.is_none() {
                        match self.prog.attach() {
                            Some(fd) => self.link = Some(Box::new(fd)),
                            // Cannot hook again: the stamps stay as they were judged.
                            None => {
                                next_check = now + RECHECK_EVERY;
                                continue;
                            }
                        }
                        hooked_since = Some(now);
                        put(self.flags.detached, false);
                    }
                    window = Some((now, self.read(ncpu, &mut buf)));
                    put(self.flags.checking, true);
                    report.windows += 1;
                }
                Some((at, base)) => {
                    let cur = self.read(ncpu, &mut buf);
                    let delta: Window = cur
                        .iter()
                        .map(|(id, (dev, s))| {
                            let b = base.get(id).filter(|b| b.0 == *dev).map(|b| b.1).unwrap_or_default();
                            (*id, (*dev, s.since(&b)))
                        })
                        .collect();
                    let short = delta.values().any(|(_, s)| s.n > 0 && s.n < CHECK_SAMPLES);
                    if now < *at + CHECK_FOR || (short && now < *at + CHECK_AT_MOST) {
                        continue;
                    }
                    let (judged, detach) = judge(&delta);
                    for (id, (dev, v)) in &judged {
                        let mode = match v {
                            Some(v) if v.trusted() => SM_CHECKED | SM_ISSUE_STAMP,
                            _ => SM_CHECKED,
                        };
                        self.set_mode(*id, *dev, mode);
                        if let Some(v) = v {
                            verdicts.insert(*dev, v.clone());
                        }
                    }
                    put(self.flags.stamps, verdicts.values().any(Verdict::trusted));
                    if detach {
                        // Flags first: a completion after the detach counts its hardware queue.
                        put(self.flags.detached, true);
                        self.link = None;
                        if let Some(h) = hooked_since.take() {
                            report.hooked_ns += now.duration_since(h).as_nanos() as u64;
                        }
                    }
                    put(self.flags.checking, false);
                    window = None;
                    next_check = now + RECHECK_EVERY;
                }
                None => {}
            }
            last_unstamped = unstamped;
        }
        put(self.flags.checking, false);
        let end = Instant::now();
        if let Some(h) = hooked_since {
            report.hooked_ns += end.duration_since(h).as_nanos() as u64;
        }
        report.run_ns = end.duration_since(start).as_nanos() as u64;
        report.unstamped = super::series::percpu_u64(self.counters_fd, self.unstamped_counter, ncpu, &mut Vec::new());
        report.disks = verdicts.into_iter().map(|(dev, v)| disk_of(dev, &v)).collect();
        report
    }
}

/// A verdict as the report carries it.
fn disk_of(dev: u32, v: &Verdict) -> IssueStampDisk {
    let dev = format!("{}:{}", dev >> 20, dev & 0xfffff);
    match v {
        Verdict::Trusted { n, skew_mean_ns, err_p99_ns } => IssueStampDisk {
            dev,
            trusted: true,
            n: *n,
            err_p99_ns: *err_p99_ns,
            skew_mean_ns: Some(*skew_mean_ns),
            why: None,
        },
        Verdict::Hooked { n, why, err_p99_ns } => IssueStampDisk {
            dev,
            trusted: false,
            n: *n,
            err_p99_ns: *err_p99_ns,
            skew_mean_ns: None,
            why: Some(why.clone()),
        },
        Verdict::Unchecked => IssueStampDisk {
            dev,
            trusted: false,
            n: 0,
            err_p99_ns: 0,
            skew_mean_ns: None,
            why: Some("not checked".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(n: u64, absent: u64, within: u64) -> CheckStats {
        let mut err = [0; 24];
        err[9] = n - absent;
        CheckStats { n, absent, within, skew_sum: 0, err }
    }

    #[test]
    fn the_hook_goes_only_when_every_queue_with_io_is_trusted() {
        let mut w = BTreeMap::new();
        w.insert(3, (7 << 20, stats(500, 0, 500)));
        // A queue that did no I/O in the window does not hold the hook.
        w.insert(4, (8 << 20, stats(0, 0, 0)));
        let (j, detach) = judge(&w);
        assert!(detach);
        assert!(j[&3].1.as_ref().unwrap().trusted());
        assert!(!j.contains_key(&4));

        // A queue keeping no stats (io_start_time_ns 0) keeps it, and says why.
        w.insert(5, (253 << 20, stats(300, 300, 0)));
        let (j, detach) = judge(&w);
        assert!(!detach);
        match j[&5].1.as_ref().unwrap() {
            Verdict::Hooked { why, .. } => assert!(why.contains("io_start_time_ns was 0 on 300 of 300"), "{why}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_stamp_off_on_more_than_one_request_in_a_hundred_keeps_the_hook() {
        let mut w = BTreeMap::new();
        w.insert(1, (7 << 20, stats(1000, 0, 985)));
        let (j, detach) = judge(&w);
        assert!(!detach);
        assert!(!j[&1].1.as_ref().unwrap().trusted());
        // Too few to judge: never trusted on them.
        let mut w = BTreeMap::new();
        w.insert(1, (7 << 20, stats(5, 0, 5)));
        let (j, detach) = judge(&w);
        assert!(!detach);
        assert!(matches!(j[&1].1, Some(Verdict::Hooked { .. })));
    }
}
