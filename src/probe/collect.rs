//! The threads that run beside a traced workload: the events poller (ring buffers drained on a
//! timer, records kept in `--events-out`), the vmstat sampler, the time-series sampler and the
//! mappings reader (user stacks are symbolized after the run). Each excludes its own thread from
//! the probes before it does anything (they run in the generator's process), and all are joined
//! before the session reads its maps.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, RingBufferBuilder};

use super::options::{EventsOut, TraceOpts};

/// `--events-out`: the file being written (an exclusive temporary one until the trace ends).
type Sink = Mutex<Option<crate::events::BlockWriter<BufWriter<crate::output::TempFile>>>>;
/// The IRQ stamps kept, and how many were dropped past the cap.
type Stamps = Mutex<(Vec<IrqStamp>, u64)>;
use crate::model::{ExecMapping, IrqStamp, RawSeries, RawVmstat};

/// Interrupt stamps kept in memory at most (16 bytes each: 64 MiB); later ones are counted.
const MAX_IRQ_STAMPS: usize = 4 << 20;

/// What the collectors need of the session's maps.
pub(crate) struct Collectors<'a> {
    pub opts: &'a TraceOpts,
    /// Stacks are sampled: keep the traced processes' executable mappings.
    pub sampling: bool,
    pub traced_tgids: &'a MapHandle,
    pub excluded_tids: &'a dyn MapCore,
    pub events: &'a dyn MapCore,
    pub irq_stamps: &'a dyn MapCore,
    pub series_fds: super::series::Fds,
}

/// What they brought back.
#[derive(Default)]
pub(crate) struct Collected {
    pub vmstat: Option<RawVmstat>,
    pub series: Option<RawSeries>,
    pub maps: Vec<(u32, Vec<ExecMapping>)>,
    pub events_received: Option<u64>,
    pub events_file_error: Option<String>,
    /// --perfetto without --events-out: the records, in a file with no name, to read back.
    pub events_scratch: Option<File>,
    pub irq_stamps: Vec<IrqStamp>,
    pub irq_stamps_dropped: u64,
}

impl Collected {
    /// Moves what was collected into the trace; the mappings are returned for symbolization.
    pub fn into_raw(self, raw: &mut crate::model::RawTrace) -> Vec<(u32, Vec<ExecMapping>)> {
        raw.vmstat = self.vmstat;
        raw.series = self.series;
        raw.events_received = self.events_received;
        raw.events_file_error = self.events_file_error;
        raw.events_scratch = self.events_scratch.map(|f| crate::model::Scratch(std::sync::Arc::new(f)));
        raw.irq_stamps = self.irq_stamps;
        raw.irq_stamps_dropped = self.irq_stamps_dropped;
        self.maps
    }
}

/// This thread's id (gettid), sent before the thread does anything else.
fn my_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

impl Collectors<'_> {
    fn exclude(&self, tid: u32) -> Result<()> {
        self.excluded_tids.update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY).context("excluding iopath's threads")
    }

    /// The ring buffers' consumer: each event record counted and written to `--events-out`'s
    /// file (opened here; the first write error kept, the trace goes on), each IRQ stamp kept up to
    /// the cap.
    fn events_ring<'a>(
        &self,
        received: &'a AtomicU64,
        sink: &'a Sink,
        sink_err: &'a Mutex<Option<String>>,
        stamps: &'a Stamps,
    ) -> Result<libbpf_rs::RingBuffer<'a>> {
        if let Some(out) = &self.opts.events_out {
            // An exclusive temporary file until the trace ends (renamed then, or read
            // back by --perfetto): a failed write or a kill never leaves a partial file
            // under the user's name, nor writes through a link planted at it.
            let p = out.path();
            let tmp = crate::output::TempFile::create(p)?;
            let f = crate::events::BlockWriter::new(BufWriter::with_capacity(1 << 20, tmp), crate::loadgen::now_ns)
                .with_context(|| format!("writing {}", p.display()))?;
            *sink.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
        }
        let mut b = RingBufferBuilder::new();
        b.add(self.events, move |data: &[u8]| {
            received.fetch_add(1, Ordering::Relaxed);
            if let Some(f) = sink.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                // A full disk must not stop the trace: the first error and what reached
                // the disk are reported.
                if let Err(e) = f.record(data) {
                    sink_err.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(crate::output::why(&e));
                }
            }
            0
        })?;
        if self.opts.irq_stamps {
            b.add(self.irq_stamps, move |data: &[u8]| {
                let mut st = stamps.lock().unwrap_or_else(|e| e.into_inner());
                if st.0.len() >= MAX_IRQ_STAMPS {
                    st.1 += 1;
                } else if let Some(x) = IrqStamp::parse(data) {
                    st.0.push(x);
                }
                0
            })?;
        }
        Ok(b.build()?)
    }

    /// Starts the collectors, runs `workload` with the probes enabled (`enable(1)` once every
    /// collector is excluded, `enable(0)` after), stops and joins them.
    pub fn run<R>(self, enable: impl Fn(u32), workload: impl FnOnce() -> R) -> Result<(R, Collected)> {
        let opts = self.opts;
        let stop = AtomicBool::new(false);
        let received = AtomicU64::new(0);
        // --events-out: the file and the first write error.
        let sink: Sink = Mutex::new(None);
        let sink_err: Mutex<Option<String>> = Mutex::new(None);
        let stamps: Stamps = Mutex::new((Vec::new(), 0));
        let mut out = Collected::default();
        let result = std::thread::scope(|s| -> Result<R> {
            let stop = &stop;
            // User stacks are symbolized after the run, when a traced process may be gone: keep
            // its executable mappings as it runs.
            let mapper = if self.sampling {
                let (tgid, tree, traced) = (opts.tgid, !opts.tree.is_empty(), self.traced_tgids);
                let (tx, rx) = std::sync::mpsc::channel();
                let h = s.spawn(move || {
                    let _ = tx.send(my_tid());
                    mappings(tgid, tree, traced, stop)
                });
                // Its own reads of /proc are not the workload.
                if let Ok(tid) = rx.recv() {
                    self.exclude(tid)?;
                }
                Some(h)
            } else {
                None
            };
            let poller = if opts.events {
                let rb = self.events_ring(&received, &sink, &sink_err, &stamps)?;
                let (tx, rx) = std::sync::mpsc::channel();
                let h = s.spawn(move || {
                    let _ = tx.send(my_tid());
                    // Records come without wakeups (BPF_RB_NO_WAKEUP), so epoll never reports the
                    // ring ready and poll() would drain nothing: consume on a 20 ms timer instead.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        let _ = rb.consume();
                    }
                    let _ = rb.consume();
                });
                self.exclude(rx.recv().context("starting the events poller")?)?;
                Some(h)
            } else {
                None
            };
            let (vm_tx, vm_rx) = std::sync::mpsc::channel();
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let vm = s.spawn(move || {
                let _ = vm_tx.send(my_tid());
                // Not one read before the thread is excluded: the probes look it up once.
                go_rx.recv().ok()?;
                super::vmstat::sample(stop)
            });
            // Its reads of /proc/vmstat are iopath's, not the workload's (the generator runs in
            // this process: 89 extra "buffered reads" in a 16384-read job before this).
            self.exclude(vm_rx.recv().context("starting the vmstat sampler")?)?;
            let series = match opts.series {
                Some((interval, start)) => {
                    let fds = self.series_fds;
                    let (tx, rx) = std::sync::mpsc::channel();
                    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                    let h = s.spawn(move || {
                        let _ = tx.send(my_tid());
                        go_rx.recv().ok()?;
                        super::series::sample(fds, interval, start, stop)
                    });
                    // Its switches are iopath's, not the generator's (same process).
                    self.exclude(rx.recv().context("starting the time-series sampler")?)?;
                    Some((h, go_tx))
                }
                None => None,
            };
            let _ = go_tx.send(());
            // Counting starts only once every link exists, so attach order cannot skew the numbers.
            enable(1);
            let series = series.map(|(h, go)| {
                let _ = go.send(());
                h
            });
            let result = workload();
            enable(0);
            stop.store(true, Ordering::Relaxed);
            out.vmstat = vm.join().map_err(|_| anyhow!("the vmstat sampler panicked"))?;
            if let Some(h) = series {
                out.series = h.join().map_err(|_| anyhow!("the time-series sampler panicked"))?;
            }
            if let Some(h) = poller {
                h.join().map_err(|_| anyhow!("the events poller panicked"))?;
            }
            if let Some(h) = mapper {
                out.maps = h.join().map_err(|_| anyhow!("the mappings reader panicked"))?;
            }
            Ok(result)
        })?;
        out.events_received = opts.events.then(|| received.load(Ordering::Relaxed));
        (out.irq_stamps, out.irq_stamps_dropped) = stamps.into_inner().unwrap_or_else(|e| e.into_inner());
        if let (Some(dest), Some(f)) = (&opts.events_out, sink.into_inner().unwrap_or_else(|e| e.into_inner())) {
            let err = sink_err.into_inner().unwrap_or_else(|e| e.into_inner());
            finish_events(dest, f, err, received.load(Ordering::Relaxed), &mut out)?;
        }
        Ok((result, out))
    }
}

/// The events file after the trace: renamed into place (`--events-out`), kept open for the
/// Perfetto conversion (scratch), or removed with the error said (how much had reached the disk).
fn finish_events(
    dest: &EventsOut,
    f: crate::events::BlockWriter<BufWriter<crate::output::TempFile>>,
    mut err: Option<String>,
    received: u64,
    out: &mut Collected,
) -> Result<()> {
    let (w, flushed) = f.finish_keep();
    if let Err(e) = flushed {
        err.get_or_insert(crate::output::why(&e));
    }
    // BufWriter's flush ran in finish_keep: into_parts hands the file back either way.
    let (tmp, _) = w.into_parts();
    let on_disk = tmp.written;
    match (err.is_none(), dest) {
        (true, EventsOut::File(_)) => {
            if let Err(e) = tmp.persist() {
                err = Some(format!("{e:#}"));
            }
        }
        (true, EventsOut::Scratch(_)) => {
            let mut f = tmp.into_scratch();
            std::io::Seek::rewind(&mut f).context("reading back the events")?;
            out.events_scratch = Some(f);
        }
        // Dropped: the temporary file is removed.
        (false, _) => drop(tmp),
    }
    out.events_file_error = err.map(|e| {
        let reached = crate::events::records_within(on_disk).min(received);
        let what = match dest {
            EventsOut::File(p) => format!("--events-out {}: not written", p.display()),
            EventsOut::Scratch(p) => {
                format!("--perfetto {}: not written, its events could not be kept beside it", p.display())
            }
        };
        format!(
            "{what}: {e}; {reached} of the {received} records received ({:.1} MiB) had reached the disk when \
             it failed, and the partial file was removed",
            on_disk as f64 / f64::from(1 << 20),
        )
    });
    Ok(())
}

/// The executable mappings of the traced processes, read every 100 ms until `stop`.
fn mappings(tgid: u32, tree: bool, traced: &MapHandle, stop: &AtomicBool) -> Vec<(u32, Vec<ExecMapping>)> {
    let roots = crate::sysconf::SysRoots::live();
    let mut seen: std::collections::BTreeMap<u32, Vec<ExecMapping>> = Default::default();
    loop {
        let done = stop.load(Ordering::Relaxed);
        let tgids: Vec<u32> = if tree {
            traced.keys().map(|k| u32::from_ne_bytes(k[..4].try_into().unwrap_or([0; 4]))).collect()
        } else {
            vec![tgid]
        };
        for t in tgids.into_iter().filter(|&t| t != 0) {
            if let Some(m) = crate::sysconf::exec_mappings(&roots, t) {
                let known = seen.entry(t).or_default();
                for x in m {
                    if !known.contains(&x) {
                        known.push(x);
                    }
                }
            }
        }
        if done {
            return seen.into_iter().collect();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
