//! top and serve's one-hook tier (bpf/stamps.bpf.c): loads the object per the hook table's plan,
//! attaches block_rq_complete for the whole session, and the check hooks (block_rq_issue,
//! block_bio_queue) only for a check window or while a device is timed by them (`Checker`).
//!
//! A device's stamps are trusted only once checked: during a window each completion compares
//! the request's stamp with the hooked time of the same request; `decide` turns a window's
//! comparisons into a verdict per stamp.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use libbpf_rs::skel::{Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags};
use serde::{Deserialize, Serialize};

use super::hooks::{Feature, Obj};
use super::load::{load_per_plan, MAX_LOADS};
use super::stamps_skel::{StampsSkel, StampsSkelBuilder};
use super::{live::LiveMaps, options::TraceOpts};

/// A window's length: at 1k IOPS, a thousand requests compared per device.
pub const CHECK_FOR: Duration = Duration::from_secs(1);
/// ... kept open up to this long for a device with too few requests to decide on.
pub const CHECK_AT_MOST: Duration = Duration::from_secs(5);
/// A device's stamps are checked again this often (a kernel's cached plug time goes stale under
/// preemption, which a load can bring at any time).
pub const CHECK_EVERY: Duration = Duration::from_secs(60);
/// A device not decided yet (new, or idle in the last window) opens a window at most this often.
pub const RECHECK_UNCHECKED: Duration = Duration::from_secs(10);
/// The kernel times programs (BPF_ENABLE_STATS: two clock reads a run, ~9% of the loop device's
/// IOPS at QD32 by itself) only inside a window this long ...
pub const MEASURE_FOR: Duration = Duration::from_secs(1);
/// ... every this often: the agent's cost is sampled, not paid for all the time.
pub const MEASURE_EVERY: Duration = Duration::from_secs(10);
/// Requests compared before a stamp is judged.
pub const MIN_SAMPLES: u64 = 20;
/// `enum stamps_counter` (bpf/phases.h), as top's "not counted" line and the metrics name them.
pub const COUNTERS: [(u32, &str); 5] = [
    (0, "one-hook rows full"),
    (1, "device not checked yet (phases unknown)"),
    (2, "no hooked time (phases unknown)"),
    (3, "stamps out of order"),
    (4, "queue id beyond the check table"),
];
const SC_UNCHECKED: u32 = 1;
const ERR_SLOTS: usize = 24;
const CHECK_ONE_WORDS: usize = 4 + ERR_SLOTS;

const _: () = assert!(std::mem::size_of::<super::stamps_skel::types::stamps_check>() == 2 * CHECK_ONE_WORDS * 8);
const _: () = assert!(
    std::mem::size_of::<super::stamps_skel::types::stamps_val>() == 8 * (2 + 2 + 2 * crate::top::counts::TOP_SLOTS)
);
const _: () = assert!(std::mem::size_of::<super::stamps_skel::types::top_key>() == crate::top::counts::KEY_BYTES);
const _: () = assert!(
    std::mem::size_of::<super::stamps_skel::types::stamps_row>()
        == crate::top::counts::KEY_BYTES + std::mem::size_of::<super::stamps_skel::types::stamps_val>()
);
const _: () = assert!(std::mem::size_of::<super::stamps_skel::types::stamps_queue>() == 8);

/// One stamp's comparisons with its hook over a window (or since the start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    pub n: u64,
    pub absent: u64,
    pub within: u64,
    pub skew_sum: i64,
    pub err: [u64; ERR_SLOTS],
}

impl CheckStats {
    pub(crate) fn from_words(w: &[u64]) -> CheckStats {
        let mut err = [0; ERR_SLOTS];
        err.copy_from_slice(&w[4..4 + ERR_SLOTS]);
        CheckStats { n: w[0], absent: w[1], within: w[2], skew_sum: w[3] as i64, err }
    }

    pub(crate) fn add(&mut self, o: &CheckStats) {
        self.n += o.n;
        self.absent += o.absent;
        self.within += o.within;
        self.skew_sum = self.skew_sum.wrapping_add(o.skew_sum);
        for (a, b) in self.err.iter_mut().zip(o.err) {
            *a += b;
        }
    }

    pub(crate) fn since(&self, o: &CheckStats) -> CheckStats {
        let mut err = [0; ERR_SLOTS];
        for (i, e) in err.iter_mut().enumerate() {
            *e = self.err[i].saturating_sub(o.err[i]);
        }
        CheckStats {
            n: self.n.saturating_sub(o.n),
            absent: self.absent.saturating_sub(o.absent),
            within: self.within.saturating_sub(o.within),
            skew_sum: self.skew_sum.wrapping_sub(o.skew_sum),
            err,
        }
    }

    /// The error's 99th percentile, as its power-of-two bucket's upper bound (ns).
    pub fn err_p99_ns(&self) -> u64 {
        let total: u64 = self.err.iter().sum();
        let mut cum = 0;
        for (i, c) in self.err.iter().enumerate() {
            cum += c;
            if total > 0 && cum * 100 >= total * 99 {
                return if i == 0 { 0 } else { 1u64 << i };
            }
        }
        0
    }
}

/// Which stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stamp {
    /// io_start_time_ns, against block_rq_issue: the device phase's start.
    Issue,
    /// start_time_ns, against the first bio's block_bio_queue: the block phase's start.
    Queue,
}

impl Stamp {
    pub fn field(self) -> &'static str {
        match self {
            Stamp::Issue => "io_start_time_ns",
            Stamp::Queue => "start_time_ns",
        }
    }

    fn absent_why(self) -> &'static str {
        match self {
            // blk_mq_start_request sets it only under QUEUE_FLAG_STATS.
            Stamp::Issue => "the queue keeps no stats (wbt, iocost and iolatency off; bfq turns wbt off)",
            // Since 6.13 only with iostats on.
            Stamp::Queue => "iostats is off for the device",
        }
    }
}

/// A stamp's verdict on a device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verdict {
    /// Not checked yet: its phase is unknown until a window decides.
    Unchecked,
    /// Within max(1 us, 2%) of the hook on at least 99% of `n` requests.
    Trusted { n: u64, skew_mean_ns: i64, err_p99_ns: u64 },
    /// Timed by its hook instead, and why.
    Hooked { n: u64, why: String, err_p99_ns: u64 },
}

impl Verdict {
    pub fn trusted(&self) -> bool {
        matches!(self, Verdict::Trusted { .. })
    }
}

/// A stamp's comparisons in one window -> its verdict (None: too few to judge).
pub fn decide(stamp: Stamp, d: &CheckStats) -> Option<Verdict> {
    if d.n < MIN_SAMPLES {
        return None;
    }
    let err_p99_ns = d.err_p99_ns();
    if d.absent > 0 {
        return Some(Verdict::Hooked {
            n: d.n,
            why: format!("{} was 0 on {} of {} requests: {}", stamp.field(), d.absent, d.n, stamp.absent_why()),
            err_p99_ns,
        });
    }
    // Fewer than 99% within the allowance: the p99 error is beyond max(1 us, 2%).
    if d.within * 100 < d.n * 99 {
        return Some(Verdict::Hooked {
            n: d.n,
            why: format!(
                "{} was off its hook by more than max(1 us, 2% of the phase) on {} of {} requests (p99 error ~{} ns)",
                stamp.field(),
                d.n - d.within,
                d.n,
                err_p99_ns
            ),
            err_p99_ns,
        });
    }
    Some(Verdict::Trusted { n: d.n, skew_mean_ns: d.skew_sum / d.n as i64, err_p99_ns })
}

/// A device's two verdicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trust {
    pub issue: Verdict,
    pub queue: Verdict,
}

impl Default for Trust {
    fn default() -> Trust {
        Trust { issue: Verdict::Unchecked, queue: Verdict::Unchecked }
    }
}

impl Trust {
    /// stamps_queue.mode (enum stamps_mode): 0 until both stamps are decided.
    fn mode(&self) -> u32 {
        if matches!(self.issue, Verdict::Unchecked) || matches!(self.queue, Verdict::Unchecked) {
            return 0;
        }
        1 | if self.issue.trusted() { 2 } else { 0 } | if self.queue.trusted() { 4 } else { 0 }
    }

    fn hooked(&self) -> bool {
        matches!(self.issue, Verdict::Hooked { .. }) || matches!(self.queue, Verdict::Hooked { .. })
    }
}

/// The check windows and the check hooks' links.
/// stamps_queues' entries (STAMPS_MAX_QUEUES).
const QUEUES: usize = 1024;

/// The stamps_queues array mapped into this process; unmapped on drop.
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    fn map(fd: i32, len: usize) -> Result<Mapped> {
        // SAFETY: a shared mapping of a BPF_F_MMAPABLE array map's values, `len` bytes (page-rounded).
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(anyhow!("mapping stamps_queues: {}", std::io::Error::last_os_error()));
        }
        Ok(Mapped { ptr, len })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping what `map` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

pub struct Checker<'a> {
    skel: &'a StampsSkel<'a>,
    queues: Mapped,
    /// The .bss words `checking` and `hooks_record` (mmaped: the kernel reads them each run).
    checking: *mut u32,
    hooks_record: *mut u32,
    /// (hook, program) of the check hooks the plan loaded; empty when StampsCheck is off.
    progs: Vec<(String, &'static str)>,
    links: Vec<Link>,
    opened: Option<Instant>,
    next: Instant,
    last_unchecked: u64,
    last_unchecked_window: Option<Instant>,
    /// Per queue id: its disk and its stats when the window opened.
    base: BTreeMap<u32, (u32, [CheckStats; 2])>,
    /// Per disk (dev_t): the verdicts.
    pub trust: BTreeMap<u32, Trust>,
    /// Why no check can run (the check hooks did not load or attach here).
    pub check_off: Option<String>,
    ncpu: usize,
    /// Time the programs in measuring windows (serve's and top's self-metrics).
    measure_stats: bool,
    /// Windows opened so far.
    pub windows: u64,
    /// Every program of the object (name, fd), for the measuring windows.
    prog_fds: Vec<(String, i32)>,
    /// The open measuring window.
    measuring: Option<Measuring>,
    next_measure: Instant,
    /// The last measuring window's BPF ns per completed request (every program's time over the
    /// completion program's runs).
    pub bpf_ns_per_io: Option<f64>,
}

/// A measuring window: its stats fd, when it opened, each program's (runs, ns) then.
type Measuring = (i32, Instant, Vec<(u64, u64)>);

impl Drop for Checker<'_> {
    fn drop(&mut self) {
        if let Some((fd, _, _)) = self.measuring.take() {
            // SAFETY: closing the fd bpf_enable_stats returned.
            unsafe { libc::close(fd) };
        }
    }
}

impl<'a> Checker<'a> {
    fn set(&self, checking: bool, hooks_record: bool) {
        for (p, v) in [(self.hooks_record, hooks_record), (self.checking, checking)] {
            if !p.is_null() {
                // SAFETY: words of the mmaped .bss of a skeleton that outlives the checker.
                unsafe { std::ptr::write_volatile(p, v as u32) };
            }
        }
    }

    fn counter(&self, c: u32) -> u64 {
        let fd = self.skel.maps.stamps_counters.as_fd().as_raw_fd();
        super::series::percpu_u64(fd, c, self.ncpu, &mut Vec::new())
    }

    /// (dev, mode) of queue id `id`, from the mapped array.
    fn queue(&self, id: u32) -> (u32, u32) {
        if id as usize >= QUEUES {
            return (0, 0);
        }
        // SAFETY: `queues` maps the array's QUEUES values of two u32s while the checker lives.
        unsafe {
            let p = self.queues.ptr.cast::<u32>().add(2 * id as usize);
            (std::ptr::read_volatile(p), std::ptr::read_volatile(p.add(1)))
        }
    }

    fn set_mode(&self, id: u32, dev: u32, mode: u32) {
        if id as usize >= QUEUES {
            return;
        }
        // SAFETY: as in `queue`; the kernel side resets the mode only when it sees another disk.
        unsafe {
            let p = self.queues.ptr.cast::<u32>().add(2 * id as usize);
            if std::ptr::read_volatile(p) == dev {
                std::ptr::write_volatile(p.add(1), mode);
            }
        }
    }

    /// Every queue id with a disk, and its stats summed over the CPUs (one lookup per queue that
    /// exists, none for the 1024 slots).
    fn queues(&self) -> BTreeMap<u32, (u32, [CheckStats; 2])> {
        let mut out = BTreeMap::new();
        let c = &self.skel.maps.stamps_checks;
        for id in 0..QUEUES as u32 {
            let (dev, _) = self.queue(id);
            if dev == 0 {
                continue;
            }
            let mut s = [CheckStats::default(); 2];
            if let Ok(Some(per_cpu)) = c.lookup_percpu(&id.to_ne_bytes(), MapFlags::ANY) {
                for v in per_cpu {
                    let w: Vec<u64> = (0..2 * CHECK_ONE_WORDS).map(|i| super::series::word(&v, i)).collect();
                    s[0].add(&CheckStats::from_words(&w[..CHECK_ONE_WORDS]));
                    s[1].add(&CheckStats::from_words(&w[CHECK_ONE_WORDS..]));
                }
            }
            out.insert(id, (dev, s));
        }
        out
    }

    fn attach_hooks(&mut self) {
        if !self.links.is_empty() || self.check_off.is_some() {
            return;
        }
        for (hook, name) in &self.progs {
            let Some(p) = self.skel.object().progs_mut().find(|p| p.name() == *name) else { continue };
            match p.attach() {
                Ok(l) => self.links.push(l),
                Err(e) => {
                    self.check_off = Some(format!("{hook} did not attach ({e})"));
                    self.links.clear();
                    return;
                }
            }
        }
    }

    fn open(&mut self, now: Instant) {
        self.attach_hooks();
        if self.check_off.is_some() {
            return;
        }
        self.base = self.queues();
        self.set(true, true);
        self.opened = Some(now);
        self.windows += 1;
    }

    fn close(&mut self, now: Instant) {
        let cur = self.queues();
        for (id, (dev, s)) in &cur {
            let base = self.base.get(id).filter(|b| b.0 == *dev).map(|b| b.1).unwrap_or_default();
            let t = self.trust.entry(*dev).or_default();
            if let Some(v) = decide(Stamp::Issue, &s[0].since(&base[0])) {
                t.issue = v;
            }
            if let Some(v) = decide(Stamp::Queue, &s[1].since(&base[1])) {
                t.queue = v;
            }
            let mode = t.mode();
            self.set_mode(*id, *dev, mode);
        }
        let keep = self.trust.values().any(Trust::hooked);
        self.set(false, keep);
        if !keep {
            // Detached: the one hook alone until the next window.
            self.links.clear();
        }
        self.opened = None;
        self.next = now + CHECK_EVERY;
    }

    fn prog_times(&self) -> Vec<(u64, u64)> {
        self.prog_fds
            .iter()
            .map(|(_, fd)| super::live::prog_info(*fd).map_or((0, 0), |i| (i.run_cnt, i.run_time_ns)))
            .collect()
    }

    /// Opens or closes the measuring window when due.
    fn measure(&mut self, now: Instant) {
        match self.measuring.take() {
            Some((fd, at, before)) if now >= at + MEASURE_FOR => {
                let after = self.prog_times();
                // SAFETY: closing the fd bpf_enable_stats returned.
                unsafe { libc::close(fd) };
                let ns: u64 = after.iter().zip(&before).map(|(a, b)| a.1.saturating_sub(b.1)).sum();
                let runs = self
                    .prog_fds
                    .iter()
                    .zip(after.iter().zip(&before))
                    .find(|((name, _), _)| name.starts_with("stamps_complete"))
                    .map_or(0, |(_, (a, b))| a.0.saturating_sub(b.0));
                self.bpf_ns_per_io = (runs > 0).then(|| ns as f64 / runs as f64);
                self.next_measure = now + MEASURE_EVERY;
            }
            Some(open) => self.measuring = Some(open),
            None if now >= self.next_measure => {
                // SAFETY: plain syscall wrapper; the returned fd keeps stats on until closed.
                let fd = unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) };
                if fd >= 0 {
                    self.measuring = Some((fd, now, self.prog_times()));
                } else {
                    self.next_measure = now + MEASURE_EVERY;
                }
            }
            None => {}
        }
    }

    /// Opens or closes a window when due; called every refresh (and more often is fine).
    pub fn tick(&mut self, now: Instant) {
        if self.measure_stats {
            self.measure(now);
        }
        let unchecked = self.counter(SC_UNCHECKED);
        match self.opened {
            Some(at) => {
                // Open until every queue that did I/O in it has enough requests to be judged on
                // (an idle one does not hold it), CHECK_AT_MOST at the longest.
                let short = now < at + CHECK_AT_MOST
                    && self.queues().iter().any(|(id, (dev, s))| {
                        let base = self.base.get(id).filter(|b| b.0 == *dev).map(|b| b.1).unwrap_or_default();
                        let n = s[0].since(&base[0]).n;
                        n > 0 && n < MIN_SAMPLES
                    });
                if now >= at + CHECK_FOR && !short {
                    self.close(now);
                }
            }
            None => {
                let grew = unchecked > self.last_unchecked
                    && self.last_unchecked_window.is_none_or(|w| now >= w + RECHECK_UNCHECKED);
                if now >= self.next || grew {
                    if grew {
                        self.last_unchecked_window = Some(now);
                    }
                    self.open(now);
                }
            }
        }
        self.last_unchecked = unchecked;
    }

    /// The hooks attached now, for the probe list (hook names).
    pub fn attached(&self) -> Vec<String> {
        if self.links.is_empty() {
            Vec::new()
        } else {
            self.progs.iter().map(|(h, _)| h.clone()).collect()
        }
    }

    /// What a frame shows of the checks.
    pub fn state(&self) -> StampsState {
        StampsState {
            trust: self.trust.clone(),
            check_off: self.check_off.clone(),
            windows: self.windows,
            hooks_attached: self.attached(),
            bpf_ns_per_io: self.bpf_ns_per_io,
        }
    }
}

/// The one-hook tier's checks as of a read: each disk's verdicts by dev_t.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StampsState {
    pub trust: BTreeMap<u32, Trust>,
    /// Why no check can run here (then every device's phases are unknown).
    pub check_off: Option<String>,
    /// Check windows opened so far.
    pub windows: u64,
    /// The check hooks attached now (a window, or a device timed by them).
    pub hooks_attached: Vec<String>,
    /// BPF ns per completed request in the last measuring window (None: none yet).
    #[serde(default)]
    pub bpf_ns_per_io: Option<f64>,
}

impl StampsState {
    /// One line per disk: how its phases are timed, and why.
    pub fn describe(&self, disk: impl Fn(u32) -> String) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(why) = &self.check_off {
            out.push(format!("stamps not checked, block and device phases unknown: {why}"));
        }
        for (dev, t) in &self.trust {
            out.push(format!("{}: {}", disk(*dev), t.line()));
        }
        out
    }
}

impl Trust {
    /// How a disk's two phases are timed, and why.
    pub fn line(&self) -> String {
        let one = |s: Stamp, v: &Verdict| match v {
            Verdict::Unchecked => format!("{} not checked yet (phase unknown)", s.field()),
            Verdict::Trusted { n, err_p99_ns, .. } => {
                format!("{} trusted (p99 error {} ns over {n} requests)", s.field(), err_p99_ns)
            }
            Verdict::Hooked { why, .. } => format!("hooked ({why})"),
        };
        format!("device phase {}; block phase {}", one(Stamp::Issue, &self.issue), one(Stamp::Queue, &self.queue))
    }

    /// Neither stamp judged yet.
    pub fn unchecked(&self) -> bool {
        matches!(self.issue, Verdict::Unchecked) && matches!(self.queue, Verdict::Unchecked)
    }
}

/// Loads the one-hook object, attaches its hook, and runs `body` with the maps a live reader
/// reads and the checker; every link is dropped on return (nothing left attached).
pub fn live<R>(opts: &TraceOpts, body: impl FnOnce(LiveMaps, &mut Checker<'_>) -> Result<R>) -> Result<R> {
    let (_tfs, mut plan) = super::load::plan_for(opts)?;
    let ksyms = super::kallsyms::lookup(&super::hooks::symbols());
    let mut stores: [MaybeUninit<libbpf_rs::OpenObject>; MAX_LOADS] = std::array::from_fn(|_| MaybeUninit::uninit());
    let mut skel = load_per_plan(Obj::Stamps, "stamps", &mut plan, &mut stores, |s, plan| open(s, opts, &ksyms, plan))?;
    let rows = skel.maps.stamps_rows.max_entries();
    ensure!(
        rows == crate::top::counts::STAMP_ROWS,
        "stamps_rows has {rows} slots, the reader expects {} (bpf/phases.h STAMPS_ROWS)",
        crate::top::counts::STAMP_ROWS
    );
    let mut links = Vec::new();
    let mut probes = Vec::new();
    let mut checks = Vec::new();
    for (hook, prog, _) in plan.programs(Obj::Stamps) {
        let feature = plan.feature_of_prog(prog);
        if feature == Some(Feature::StampsCheck) {
            if plan.is_on(Feature::StampsCheck) {
                checks.push((hook.to_owned(), prog));
            }
            continue;
        }
        let p =
            skel.object().progs_mut().find(|p| p.name() == prog).ok_or_else(|| anyhow!("program {prog} not loaded"))?;
        let via = p.section().to_string_lossy().split('/').next().unwrap_or("").to_owned();
        links.push(p.attach().with_context(|| format!("attaching {hook} ({via})"))?);
        probes.push((hook.to_owned(), true, via, p.as_fd().as_raw_fd()));
    }
    let check_off = (!plan.is_on(Feature::StampsCheck))
        .then(|| plan.state(Feature::StampsCheck).why.clone().unwrap_or_else(|| "the check hooks are off".into()));
    let mut hooks: Vec<(String, bool, String)> =
        probes.iter().map(|(h, on, via, _)| (h.clone(), *on, via.clone())).collect();
    for (h, _) in &checks {
        hooks.push((h.clone(), true, "check windows".into()));
    }
    let maps = LiveMaps {
        top: skel.maps.stamps_spill.as_fd().as_raw_fd(),
        stamp_rows: skel.maps.stamps_rows.as_fd().as_raw_fd(),
        phase_counters: -1,
        count_counters: -1,
        stamps_counters: skel.maps.stamps_counters.as_fd().as_raw_fd(),
        hooks,
        progs: probes.iter().map(|(h, _, _, fd)| (h.clone(), *fd)).collect(),
        ios: -1,
        links: -1,
        ios_held: -1,
        links_held: -1,
    };
    let (checking, hooks_record) = match skel.maps.bss_data.as_deref_mut() {
        Some(b) => (&mut b.checking as *mut u32, &mut b.hooks_record as *mut u32),
        None => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    let mut checker = Checker {
        queues: Mapped::map(skel.maps.stamps_queues.as_fd().as_raw_fd(), (QUEUES * 8).div_ceil(4096) * 4096)?,
        skel: &skel,
        checking,
        hooks_record,
        progs: checks,
        links: Vec::new(),
        opened: None,
        next: Instant::now(),
        last_unchecked: 0,
        last_unchecked_window: None,
        base: BTreeMap::new(),
        trust: BTreeMap::new(),
        check_off,
        ncpu: libbpf_rs::num_possible_cpus()?,
        measure_stats: opts.prog_stats,
        windows: 0,
        prog_fds: skel
            .object()
            .progs()
            .map(|p| (p.name().to_string_lossy().into_owned(), p.as_fd().as_raw_fd()))
            .collect(),
        measuring: None,
        next_measure: Instant::now(),
        bpf_ns_per_io: None,
    };
    checker.tick(Instant::now());
    let r = body(maps, &mut checker);
    drop(checker);
    drop(links);
    r
}

/// doctor's proof of the one-hook tier: loads the object per `plan` and attaches every program
/// it loads (the check hooks too), then lets them go. (hook, how) of each, or the error.
pub fn dry_run(
    mut plan: super::plan::Plan,
    ksyms: &std::collections::HashMap<String, u64>,
) -> Result<Vec<(String, String)>> {
    let opts = TraceOpts { top: true, one_hook: true, ..Default::default() };
    let mut stores: [MaybeUninit<libbpf_rs::OpenObject>; MAX_LOADS] = std::array::from_fn(|_| MaybeUninit::uninit());
    let skel = load_per_plan(Obj::Stamps, "stamps", &mut plan, &mut stores, |s, plan| open(s, &opts, ksyms, plan))?;
    let mut links = Vec::new();
    let mut out = Vec::new();
    for (hook, prog, _) in plan.programs(Obj::Stamps) {
        let p =
            skel.object().progs_mut().find(|p| p.name() == prog).ok_or_else(|| anyhow!("program {prog} not loaded"))?;
        let via = p.section().to_string_lossy().split('/').next().unwrap_or("").to_owned();
        links.push(p.attach().with_context(|| format!("attaching {hook} ({via})"))?);
        let role = if plan.feature_of_prog(prog) == Some(Feature::StampsCheck) { ", check windows" } else { "" };
        out.push((hook.to_owned(), format!("{via}{role}")));
    }
    drop(links);
    Ok(out)
}

fn open<'obj>(
    store: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
    opts: &TraceOpts,
    ksyms: &std::collections::HashMap<String, u64>,
    plan: &super::plan::Plan,
) -> Result<super::stamps_skel::OpenStampsSkel<'obj>> {
    use super::hooks::OWNER_SYMBOLS;
    let mut o = StampsSkelBuilder::default().open(store).context("opening the stamps BPF object")?;
    let addr = |role: &str| super::hooks::symbol_addr(OWNER_SYMBOLS, role, ksyms);
    let ro = o.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("stamps: no .rodata"))?;
    ro.targ_empty = opts.empty_probes;
    ro.targ_bio_queue_q = plan.bio_queue_q;
    ro.targ_direct_end_io =
        [addr("iomap_end_io"), addr("blkdev_end_io"), addr("blkdev_end_io_async"), addr("blkdev_simple_end_io")];
    ro.targ_wait_end_io = addr("bio_wait_end_io");
    let stack = |role: &str| super::hooks::symbol_addr(super::hooks::STACK_SYMBOLS, role, ksyms);
    ro.targ_stack_end_io = [
        stack("dm_end_io"),
        stack("crypt_end_io"),
        stack("raid1_read_end_io"),
        stack("raid1_write_end_io"),
        stack("md_clone_end_io"),
    ];
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(n: u64, absent: u64, within: u64, err_slot: usize) -> CheckStats {
        let mut err = [0; ERR_SLOTS];
        err[err_slot] = n - absent;
        CheckStats { n, absent, within, skew_sum: 0, err }
    }

    #[test]
    fn a_stamp_is_judged_on_enough_requests_only() {
        assert_eq!(decide(Stamp::Issue, &stats(MIN_SAMPLES - 1, 0, MIN_SAMPLES - 1, 3)), None);
        assert!(decide(Stamp::Issue, &stats(1000, 0, 1000, 3)).unwrap().trusted());
    }

    #[test]
    fn an_absent_stamp_is_hooked_with_the_reason() {
        let v = decide(Stamp::Issue, &stats(100, 100, 0, 0)).unwrap();
        match v {
            Verdict::Hooked { why, .. } => assert!(why.contains("io_start_time_ns was 0 on 100 of 100"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn more_than_one_percent_beyond_the_allowance_is_hooked() {
        // 98 of 100 within: 2% beyond.
        let v = decide(Stamp::Queue, &stats(100, 0, 98, 12)).unwrap();
        assert!(!v.trusted(), "{v:?}");
        // 99 of 100 within: the p99 is within.
        assert!(decide(Stamp::Queue, &stats(100, 0, 99, 5)).unwrap().trusted());
    }

    #[test]
    fn the_error_p99_is_its_buckets_upper_bound() {
        let mut s = stats(100, 0, 100, 3);
        s.err[3] = 99;
        s.err[11] = 1;
        assert_eq!(s.err_p99_ns(), 8);
        s.err[3] = 98;
        s.err[11] = 2;
        assert_eq!(s.err_p99_ns(), 2048);
    }
}
