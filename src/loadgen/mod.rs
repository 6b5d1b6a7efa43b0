//! The bundled load generator: fio-like jobs on io_uring, native AIO or pread/pwrite.
//!
//! Each worker thread owns one engine (ring or AIO context), one fd and qd buffers, and loops as
//! fio does: queue up to batch_submit I/Os -> one submit call -> repeat while slots are free ->
//! wait for >= batch_complete completions. Clock reads are per batch, not per I/O: one before
//! preparing, one after submit, one after reaping.
//! Timestamps are CLOCK_MONOTONIC nanoseconds, the clock bpf_ktime_get_ns() reads, so the trace
//! can line them up with kernel events.

mod aio;
mod buffers;
pub mod pattern;
mod psync;
pub mod target;
mod uring;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;
use std::thread;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

pub use buffers::Buffers;
pub use target::Prepared;

use crate::hist::Hist;
use crate::job::{EngineKind, Job, Rw, Stop};
use pattern::Rng;

/// How long ready workers sleep at the start line before the first I/O, so that a run starts
/// from a quiet scheduler state, not from its setup's (buffers, ring, page faults, perhaps a file
/// just written). A new thread starts at full PELT load (1024, decaying with a ~32 ms half-life),
/// and that history feeds where the scheduler wakes the threads each I/O depends on (a loop
/// device's kworker). fio's jobs start the same way: they idle until fio's main loop, polling every
/// 100 ms, starts them. Measured at QD1 on the RAM loop device: the submitter's load at its first
/// I/O is 1000-1024 without the pause, 128-180 with it (fio's: ~130).
pub const SETTLE: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

pub struct Completion {
    pub slot: u32,
    /// Bytes transferred, or -errno.
    pub res: i64,
}

/// What an I/O engine does; the worker loop is generic over it, so there is no dynamic dispatch
/// per I/O.
pub trait Engine {
    /// True when `submit` performs the I/O itself (no separate completion).
    const SYNC: bool = false;
    /// Prepares one I/O on `slot`'s buffer; it reaches the kernel at the next `submit`.
    /// Queues one I/O into `slot`; `t` is when the generator started it (its latency's start,
    /// CLOCK_MONOTONIC ns), which io_uring carries in the SQE's user_data for the tracer.
    fn queue(&mut self, slot: u32, op: Op, offset: u64, t: u64) -> io::Result<()>;

    /// When the probes saw the completion in `slot` posted (SQPOLL under trace; None otherwise).
    #[inline]
    fn posted_ns(&self, _slot: u32) -> Option<u64> {
        None
    }
    /// Hands every queued I/O to the kernel.
    fn submit(&mut self) -> io::Result<()>;
    /// Waits for at least `min` completions and appends all available ones to `out`.
    fn reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()>;
    /// Appends completions that are already visible, without a syscall (io_uring's CQ ring).
    /// Engines that cannot look without a syscall see nothing.
    fn peek(&mut self, _out: &mut Vec<Completion>) {}
    /// fsync / fdatasync of the engine's file (psync only: Job::validate refuses the others).
    fn sync(&mut self, _data_only: bool) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
    fn buffers(&mut self) -> &mut Buffers;
}

/// CLOCK_MONOTONIC in nanoseconds (a vDSO call: no syscall).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into ts.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The bundled generator's io_uring user_data: a slot index unique across its workers in the low
/// bits, the time it queued the I/O above (bpf/phases.h `enum ud_bits`, checked at build time).
pub const UD_SLOT_BITS: u32 = 20;

/// One time per generator slot, shared with the probes (an mmapped BPF array the trace session
/// installs while the workload runs), on the probes' clock (CLOCK_MONOTONIC):
/// - io_uring under SQPOLL or a lean trace: when the probes saw the slot's completion posted. No
///   hook sees the reap, so the generator times that wait itself as it takes each CQE.
/// - aio under a lean trace: when the generator called io_submit for the slot's I/O, written
///   here just before the call. The probes start the I/O there, at its first bio, with no
///   syscall hook (raw_syscalls:sys_enter ran for every system call: 208 ns a run on io_submit).
pub mod slot_clock {
    use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

    static PTR: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
    static LEN: AtomicUsize = AtomicUsize::new(0);

    /// # Safety
    /// `ptr` must point to `len` u64 that stay mapped until `clear` is called.
    pub unsafe fn install(ptr: *mut AtomicU64, len: usize) {
        LEN.store(0, Ordering::SeqCst);
        PTR.store(ptr, Ordering::SeqCst);
        LEN.store(len, Ordering::SeqCst);
    }

    pub fn clear() {
        LEN.store(0, Ordering::SeqCst);
        PTR.store(std::ptr::null_mut(), Ordering::SeqCst);
    }

    /// Whether a clock is installed (the generator then writes its io_submit times).
    #[inline]
    pub fn installed() -> bool {
        LEN.load(Ordering::Acquire) > 0
    }

    /// Sets slot `idx`'s time (out of range or no clock: nothing).
    #[inline]
    pub fn set(idx: usize, ns: u64) {
        if idx >= LEN.load(Ordering::Acquire) {
            return;
        }
        let p = PTR.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: install's contract keeps idx < len elements mapped until clear.
            unsafe { (*p.add(idx)).store(ns, Ordering::Release) };
        }
    }

    /// Slot `idx`'s time (None: no clock installed, or out of range).
    #[inline]
    pub fn get(idx: usize) -> Option<u64> {
        if idx >= LEN.load(Ordering::Acquire) {
            return None;
        }
        let p = PTR.load(Ordering::Acquire);
        // SAFETY: install's contract keeps idx < len elements mapped until clear.
        (!p.is_null()).then(|| unsafe { (*p.add(idx)).load(Ordering::Relaxed) })
    }
}

/// What one worker measured.
#[derive(Clone, Default)]
pub struct Stats {
    pub lat: Hist,
    pub slat: Hist,
    pub clat: Hist,
    /// SQPOLL under trace: completion posted (probes) -> taken from the CQ ring (generator).
    pub reap_wait: Hist,
    /// --fsync / --fdatasync: each sync call, timed apart from the writes.
    pub sync_lat: Hist,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub verified: u64,
    /// The worker threads' own context switches (RUSAGE_THREAD), the tracer's main thread excluded.
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// How the run evolved: per interval I/Os, bytes and latency (crate::timeseries).
    pub series: crate::timeseries::Recorder,
    /// The worker threads' time runnable but not running (schedstat run_delay, ns); None where the
    /// kernel keeps no schedstat (CONFIG_SCHED_INFO off).
    pub run_delay_ns: Option<u64>,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.lat.merge(&o.lat);
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.reap_wait.merge(&o.reap_wait);
        self.sync_lat.merge(&o.sync_lat);
        self.reads += o.reads;
        self.writes += o.writes;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.verified += o.verified;
        self.ctx_voluntary += o.ctx_voluntary;
        self.ctx_involuntary += o.ctx_involuntary;
        self.series.absorb(&o.series);
        // Unknown for one worker is unknown for the sum.
        self.run_delay_ns = self.run_delay_ns.zip(o.run_delay_ns).map(|(a, b)| a + b);
    }
    pub fn ios(&self) -> u64 {
        self.reads + self.writes
    }
}

/// Process CPU time and context switches (all threads, including an SQPOLL poller).
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub usr_ns: u64,
    pub sys_ns: u64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

impl Usage {
    pub fn now() -> Usage {
        Self::of(libc::RUSAGE_SELF)
    }

    pub fn this_thread() -> Usage {
        Self::of(libc::RUSAGE_THREAD)
    }

    fn of(who: libc::c_int) -> Usage {
        // SAFETY: getrusage fills the zeroed struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        Usage {
            usr_ns: ns(ru.ru_utime),
            sys_ns: ns(ru.ru_stime),
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
        }
    }
    pub fn since(self, before: Usage) -> Usage {
        Usage {
            usr_ns: self.usr_ns - before.usr_ns,
            sys_ns: self.sys_ns - before.sys_ns,
            nvcsw: self.nvcsw - before.nvcsw,
            nivcsw: self.nivcsw - before.nivcsw,
        }
    }
}

/// A finished run: merged stats, wall time and resource use of the I/O phase only.
pub struct Outcome {
    pub stats: Stats,
    pub start_ns: u64,
    pub end_ns: u64,
    pub usage: Usage,
    pub target: Prepared,
    /// A stop was requested (Ctrl-C/SIGTERM): the run ended early with the I/Os that finished.
    pub stopped: bool,
}

impl Outcome {
    pub fn elapsed_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns).max(1)
    }
}

/// Prepares the target, builds one engine per thread, runs the job and merges what it measured.
pub fn run(job: &Job) -> Result<Outcome> {
    let target = prepare(job)?;
    run_prepared(job, target)
}

/// Checks the job and readies its target (creating and laying out files): everything before the
/// first measured I/O, so a tracer can attach after it.
pub fn prepare(job: &Job) -> Result<Prepared> {
    job.validate()?;
    let target = target::prepare(job)?;
    // Once per process: a sweep prepares the same target for every run.
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    for w in &target.warnings {
        if !said.contains(w) {
            eprintln!("iopath: warning: {w}");
            said.push(w.clone());
        }
    }
    drop(said);
    if job.iopoll {
        check_iopoll(&target)?;
    }
    Ok(target)
}

/// Every worker keeps its own descriptors open (the target; io_uring's ring too): make room for
/// them up front, raising the soft limit as far as the hard one allows, or say which flag and
/// which limit, instead of a bare EMFILE from the 500th worker.
fn ensure_fds(job: &Job) -> Result<()> {
    let per = if job.engine == EngineKind::Uring { 2 } else { 1 };
    let need = u64::from(job.jobs) * per + 64;
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || need <= r.rlim_cur {
        return Ok(());
    }
    if need <= r.rlim_max {
        r.rlim_cur = need;
        // SAFETY: setrlimit reads the struct; a soft limit up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
            return Ok(());
        }
    }
    bail!(
        "--jobs {} needs about {need} open files ({per} per worker), and this process may open {} (ulimit -n; \
         hard limit {}): lower --jobs, or raise the limit",
        job.jobs,
        r.rlim_cur,
        r.rlim_max
    )
}

/// Runs the job on a prepared target.
pub fn run_prepared(job: &Job, target: Prepared) -> Result<Outcome> {
    ensure_fds(job)?;
    match job.engine {
        EngineKind::Uring => run_with(job, target, |i, file, bufs| uring::Uring::new(job, i, file, bufs)),
        EngineKind::Aio => run_with(job, target, |w, file, bufs| aio::Aio::new(job.qd, w * job.qd, file, bufs)),
        EngineKind::Psync => run_with(job, target, |_, file, bufs| Ok(psync::Psync::new(file, bufs, job.hipri))),
    }
}

/// Polled completions need a driver with poll queues; without them every I/O fails with
/// EOPNOTSUPP (fio prints just that). Say what is missing and how to get it instead.
fn check_iopoll(t: &Prepared) -> Result<()> {
    let roots = crate::sysconf::SysRoots::live();
    let q = t.disk.as_deref().map(|d| crate::sysconf::block_queue(&roots, d));
    if q.as_ref().and_then(|q| q.io_poll) != Some(true) {
        let disk = t.disk.clone().unwrap_or_else(|| "this target".into());
        let nvme = match crate::sysconf::nvme_poll_queues(&roots) {
            Some(n) => format!(" (nvme poll_queues is {n} now)"),
            None => String::new(),
        };
        bail!(
            "--iopoll: {disk} has no poll queues (/sys/block/{disk}/queue/io_poll is not 1), so every polled I/O would fail with EOPNOTSUPP. \
             For NVMe, load the driver with poll queues: 'modprobe nvme poll_queues=N' or boot with nvme.poll_queues=N{nvme}; \
             other drivers (virtio-blk, loop) may not support polling at all. Run without --iopoll."
        );
    }
    Ok(())
}

/// The last run's start line (CLOCK_MONOTONIC ns), for the probes' time-series sampler: its
/// intervals then have the same edges as the generator's own.
pub static START_LINE: AtomicU64 = AtomicU64::new(0);

fn run_with<E, F>(job: &Job, target: Prepared, make: F) -> Result<Outcome>
where
    E: Engine,
    F: Fn(u32, std::fs::File, Buffers) -> Result<E> + Sync,
{
    let align = target.dio_mem_align.max(512) as usize;
    let nblocks = target.size / job.bs as u64;
    // The start line: workers set up, report, then wait on the read side until the write guard
    // drops. Unlike a Barrier it cannot hang when a thread fails to spawn.
    let gate = RwLock::new(());
    let failed = AtomicBool::new(false);
    let start_line = AtomicU64::new(0);
    let (prepared, make, gate, failed, start_line) = (&target, &make, &gate, &failed, &start_line);
    let (stats, start_ns, end_ns, usage, first_err) = thread::scope(|s| {
        let hold = gate.write().unwrap_or_else(|e| e.into_inner());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<bool>();
        let mut handles = Vec::new();
        let mut first_err = None;
        for i in 0..job.jobs {
            let plan = Plan::new(job, i, nblocks);
            let cpu = job.cpus.as_ref().map(|c| c[i as usize % c.len()]);
            let ready_tx = ready_tx.clone();
            let spawned = thread::Builder::new().name(format!("iopath-w{i}")).spawn_scoped(s, move || {
                // Everything a worker touches per I/O (fd, buffers, ring) is made on its own
                // thread after pinning, as fio's jobs do: memory lands on the worker's node.
                let ready = cpu.map(pin_to).transpose().and_then(|_| {
                    let file = target::open(job, prepared)?;
                    make(i, file, Buffers::new(job.qd as usize, job.bs as usize, align))
                });
                let _ = ready_tx.send(ready.is_ok());
                drop(gate.read().unwrap_or_else(|e| e.into_inner()));
                let engine = ready?;
                if failed.load(Ordering::Relaxed) {
                    return Ok(Stats::default());
                }
                worker(engine, plan, start_line.load(Ordering::Acquire))
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    first_err = Some(anyhow!("spawning a worker thread: {e}"));
                    break;
                }
            }
        }
        // Nobody issues I/O unless every worker is ready.
        let all_ready = handles.iter().all(|_| ready_rx.recv().unwrap_or(false));
        if first_err.is_some() || !all_ready {
            failed.store(true, Ordering::Relaxed);
        } else {
            thread::sleep(SETTLE);
        }
        let before = Usage::now();
        let start_ns = now_ns();
        start_line.store(start_ns, Ordering::Release);
        START_LINE.store(start_ns, Ordering::Release);
        drop(hold);
        let mut stats: Option<Stats> = None;
        for h in handles {
            match h.join() {
                Ok(Ok(s)) => match &mut stats {
                    Some(m) => m.merge(&s),
                    None => stats = Some(s),
                },
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => first_err = first_err.or(Some(anyhow!("a worker thread panicked"))),
            }
        }
        (stats.unwrap_or_default(), start_ns, now_ns(), Usage::now().since(before), first_err)
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Outcome { stats, start_ns, end_ns, usage, target, stopped: crate::stop::requested() })
}

fn pin_to(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            bail!("--cpus: CPU {cpu} is out of range");
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("--cpus: cannot run on CPU {cpu}: {} (see nproc / taskset -p $$)", io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One worker's share of the job.
struct Plan {
    rw: Rw,
    mix: u8,
    bs: u64,
    qd: u32,
    nblocks: u64,
    /// Where sequential I/O starts: workers spread over the target.
    next_block: u64,
    rng: Rng,
    seed: u64,
    verify: bool,
    runtime: Option<Duration>,
    ios: u64,
    batch_submit: u32,
    batch_complete: u32,
    /// A sync call after every `sync_every` writes (0: never); fdatasync when `datasync`.
    sync_every: u32,
    datasync: bool,
    /// The time series' interval (ns).
    interval_ns: u64,
}

impl Plan {
    fn new(job: &Job, i: u32, nblocks: u64) -> Plan {
        let ios = match job.stop {
            Stop::Ios(n) => n / job.jobs as u64 + u64::from((i as u64) < n % job.jobs as u64),
            Stop::Runtime(_) => u64::MAX,
        };
        Plan {
            rw: job.rw,
            mix: job.mix_read_pct,
            bs: job.bs as u64,
            qd: job.qd,
            nblocks,
            next_block: nblocks * i as u64 / job.jobs as u64,
            rng: Rng::new(job.seed.wrapping_add(i as u64)),
            seed: job.seed,
            verify: job.verify,
            runtime: match job.stop {
                Stop::Runtime(d) => Some(d),
                Stop::Ios(_) => None,
            },
            ios,
            batch_submit: if job.batch_submit == 0 { job.qd } else { job.batch_submit.min(job.qd) },
            batch_complete: job.batch_complete.max(1),
            sync_every: job.fsync.max(job.fdatasync),
            datasync: job.fdatasync > 0,
            interval_ns: job.interval.as_nanos() as u64,
        }
    }

    #[inline]
    fn next(&mut self) -> (Op, u64) {
        let op = match self.rw {
            Rw::Read | Rw::Randread => Op::Read,
            Rw::Write | Rw::Randwrite => Op::Write,
            Rw::Randrw => {
                if self.rng.below(100) < self.mix as u64 {
                    Op::Read
                } else {
                    Op::Write
                }
            }
        };
        let block = if self.rw.is_random() {
            self.rng.below(self.nblocks)
        } else {
            let b = self.next_block;
            self.next_block = if b + 1 >= self.nblocks { 0 } else { b + 1 };
            b
        };
        (op, block * self.bs)
    }
}

// Kept out of line: flamegraphs name it as the generator's loop.
#[inline(never)]
fn worker<E: Engine>(mut e: E, mut p: Plan, start_ns: u64) -> Result<Stats> {
    let series = crate::timeseries::Recorder::new(start_ns, p.interval_ns).with_ctx_clock(|| {
        let u = Usage::this_thread();
        u.nvcsw + u.nivcsw
    });
    let mut st = Stats { series, ..Stats::default() };
    let qd = p.qd as usize;
    let mut free: Vec<u32> = (0..p.qd).rev().collect();
    let mut t_start = vec![0u64; qd];
    let mut t_submit = vec![0u64; qd];
    let mut what = vec![(Op::Read, 0u64); qd];
    let mut done = Vec::with_capacity(qd);
    let mut batch_slots: Vec<u32> = Vec::with_capacity(qd);
    let mut issued = 0u64;
    let mut inflight = 0u32;
    let mut synced_at = 0u64;
    let usage_before = Usage::this_thread();
    let delay_before = run_delay_ns();
    // The run's one start line, not this thread's wake-up: 1000 psync workers on 2 CPUs took
    // 2 s to all wake, and per-thread deadlines made --runtime 1s run 3.1 s.
    let deadline = p.runtime.map_or(u64::MAX, |d| start_ns + d.as_nanos() as u64);
    let mut now = now_ns();

    loop {
        let issuing = now < deadline && issued < p.ios && !crate::stop::requested();
        if !issuing && inflight == 0 {
            break;
        }
        // Fill free slots, up to one submit batch.
        while issuing && (batch_slots.len() as u32) < p.batch_submit && issued < p.ios {
            let Some(slot) = free.pop() else { break };
            let (op, off) = p.next();
            if p.verify && op == Op::Write {
                pattern::fill(e.buffers().slot(slot), p.seed, off);
            }
            e.queue(slot, op, off, now).map_err(|err| anyhow!("queueing I/O failed: {err}"))?;
            what[slot as usize] = (op, off);
            t_start[slot as usize] = now;
            batch_slots.push(slot);
            issued += 1;
        }
        if !batch_slots.is_empty() {
            e.submit().map_err(|err| anyhow!("submitting I/O failed: {err}"))?;
            // A synchronous engine did the I/O inside submit: all of it is completion time.
            let t = if E::SYNC { now } else { now_ns() };
            for &slot in &batch_slots {
                t_submit[slot as usize] = t;
            }
            if !E::SYNC {
                for _ in 0..batch_slots.len() {
                    st.slat.record(t - now);
                }
            }
            inflight += batch_slots.len() as u32;
            batch_slots.clear();
            // The submit call may have posted completions (io_uring runs deferred completions
            // on GETEVENTS): reap them now, when the kernel handed them over, not a batch later.
            e.peek(&mut done);
            if !done.is_empty() {
                now = t;
                inflight -= complete(&mut e, &mut p, &mut st, &mut done, &mut free, now, &what, &t_start, &t_submit)?;
            }
        }
        // Like fio, keep filling while slots are free (batch_submit < qd), and wait only when
        // the queue is full or nothing more is to be issued.
        if issuing && issued < p.ios && !free.is_empty() {
            now = now_ns();
            if now < deadline {
                continue;
            }
        }
        if inflight == 0 {
            continue;
        }
        // Reap: wait for at least batch_complete (fewer at the tail).
        let min = p.batch_complete.min(inflight);
        e.reap(min, &mut done).map_err(|err| anyhow!("waiting for completions failed: {err}"))?;
        now = now_ns();
        inflight -= complete(&mut e, &mut p, &mut st, &mut done, &mut free, now, &what, &t_start, &t_submit)?;
        // fio's fsync=N: after every N writes, outside any write's latency, timed on its own.
        if p.sync_every > 0 && st.writes >= synced_at + u64::from(p.sync_every) {
            synced_at = st.writes;
            e.sync(p.datasync)
                .map_err(|err| anyhow!("{} failed: {err}", if p.datasync { "fdatasync" } else { "fsync" }))?;
            let t = now_ns();
            st.sync_lat.record(t - now);
            now = t;
        }
    }
    let u = Usage::this_thread().since(usage_before);
    st.ctx_voluntary = u.nvcsw;
    st.ctx_involuntary = u.nivcsw;
    st.run_delay_ns = delay_before.zip(run_delay_ns()).map(|(b, a)| a.saturating_sub(b));
    st.series.finish();
    Ok(st)
}

/// This thread's time on a run queue waiting for a CPU (the second field of
/// /proc/thread-self/schedstat, ns): after wakeups and preemptions alike. The kernel's own
/// account, read twice per worker: no hook, so a lean trace and an untraced run have it too.
pub fn run_delay_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Accounts for reaped completions at time `now`; returns how many there were.
#[allow(clippy::too_many_arguments)]
#[inline]
fn complete<E: Engine>(
    e: &mut E,
    p: &mut Plan,
    st: &mut Stats,
    done: &mut Vec<Completion>,
    free: &mut Vec<u32>,
    now: u64,
    what: &[(Op, u64)],
    t_start: &[u64],
    t_submit: &[u64],
) -> Result<u32> {
    let n = done.len() as u32;
    for c in done.drain(..) {
        let s = c.slot as usize;
        let (op, off) = what[s];
        if c.res != p.bs as i64 {
            return Err(io_error(op, off, p.bs, c.res));
        }
        if p.verify && op == Op::Read {
            if let Some(at) = pattern::check(e.buffers().slot(c.slot), p.seed, off) {
                bail!("--verify: data at byte {at} differs from what seed {} writes there (block at {off})", p.seed);
            }
            st.verified += 1;
        }
        st.lat.record(now - t_start[s]);
        st.series.record(now, now - t_start[s], p.bs, op == Op::Write);
        st.clat.record(now - t_submit[s]);
        if let Some(posted) = e.posted_ns(c.slot).filter(|&p| p > 0 && p <= now) {
            st.reap_wait.record(now - posted);
        }
        match op {
            Op::Read => {
                st.reads += 1;
                st.bytes_read += p.bs;
            }
            Op::Write => {
                st.writes += 1;
                st.bytes_written += p.bs;
            }
        }
        free.push(c.slot);
    }
    Ok(n)
}

fn io_error(op: Op, off: u64, bs: u64, res: i64) -> anyhow::Error {
    let what = if op == Op::Read { "read" } else { "write" };
    if res >= 0 {
        return anyhow!("short {what} at offset {off}: {res} of {bs} bytes (did the file shrink?)");
    }
    let errno = (-res) as i32;
    let e = io::Error::from_raw_os_error(errno);
    let hint = match errno {
        libc::EOPNOTSUPP => ": the device does not support this mode (for --iopoll: the driver has no poll queues; see nvme poll_queues)",
        libc::EINVAL => ": O_DIRECT rejected the I/O (offset, size or buffer not aligned to the device's logical block size?)",
        libc::EIO => ": the device reported an error (see dmesg)",
        libc::ENOSPC => ": the file system is full",
        _ => "",
    };
    anyhow!("{what} of {bs} bytes at offset {off} failed: {e}{hint}")
}
