//! `serve --phases-every`: the full phase set (submission and completion, by process route)
//! attached for a short window beside the one hook, in a thread of its own, then detached; each
//! window's two reads come back for the exporter (series labelled window="phases").

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::table::Snapshot;
use crate::probe::options::TraceOpts;

type Window = JoinHandle<Result<(Snapshot, Snapshot)>>;

pub struct DutyCycle {
    every: Duration,
    length: Duration,
    next: Instant,
    running: Option<Window>,
    opts: TraceOpts,
    pods_root: PathBuf,
    /// Why the last window failed (its programs did not load, ...), if it did.
    pub last_error: Option<String>,
}

impl DutyCycle {
    /// The first window opens at once: a user asking for the full set sees it without waiting.
    pub fn new(every: Duration, length: Duration, opts: TraceOpts, pods_root: PathBuf) -> DutyCycle {
        DutyCycle { every, length, next: Instant::now(), running: None, opts, pods_root, last_error: None }
    }

    /// The share of the time the full set is attached.
    pub fn duty(&self) -> f64 {
        self.length.as_secs_f64() / self.every.as_secs_f64()
    }

    /// Starts a window when one is due; returns a finished window's two reads.
    pub fn poll(&mut self, now: Instant) -> Option<(Snapshot, Snapshot)> {
        if let Some(h) = &self.running {
            if !h.is_finished() {
                return None;
            }
            let h = self.running.take()?;
            match h.join() {
                Ok(Ok(r)) => {
                    self.last_error = None;
                    return Some(r);
                }
                Ok(Err(e)) => self.last_error = Some(format!("{e:#}")),
                Err(_) => self.last_error = Some("the window's thread panicked".into()),
            }
            return None;
        }
        if now >= self.next {
            self.next = now + self.every;
            let (opts, root, length) = (self.opts.clone(), self.pods_root.clone(), self.length);
            self.running = Some(std::thread::spawn(move || window(&opts, root, length)));
        }
        None
    }
}

impl Drop for DutyCycle {
    /// A window ends early on the stop request: its programs are detached before serve exits.
    fn drop(&mut self) {
        if let Some(h) = self.running.take() {
            let _ = h.join();
        }
    }
}

/// One window: the full set attached, read at its start and end, detached on return.
fn window(opts: &TraceOpts, pods_root: PathBuf, length: Duration) -> Result<(Snapshot, Snapshot)> {
    let (reads, _raw) = crate::probe::session::trace_live(opts, |maps| {
        let mut reader = super::live::Reader::new(maps, pods_root)?;
        let a = reader.read();
        let end = Instant::now() + length;
        while Instant::now() < end && !crate::stop::requested() {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok((a, reader.read()))
    })?;
    Ok(reads)
}
