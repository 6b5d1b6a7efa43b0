//! `iopath top` and `iopath serve`: the probes attached system-wide for as long as it runs, the
//! kernel's per-(process, disk, route, direction) table read every interval, shown as a live
//! table (terminal UI or text) and/or served to Prometheus.
//!
//! counts: the kernel's table and its arithmetic; table: frames and their text; metrics: the
//! exposition; live: reading the probes and /proc; tui: the terminal UI; http: the endpoint.

pub mod counts;
mod http;
pub mod k8s;
pub mod live;
pub mod metrics;
pub mod table;
mod tui;
mod window;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::probe::stamps::Checker;
use crate::probe::{live::LiveMaps, options::TraceOpts, session};
use table::{GroupBy, SortBy};

/// The exposition as of the last refresh, whole: a scrape gets one refresh's numbers or the
/// previous one's, never a mix or a cut.
pub type Exposition = Arc<Mutex<Arc<String>>>;

/// What the refresh loop shows each frame.
pub enum Show {
    Tui,
    Text { count: u64, rows: usize },
    Nothing,
}

/// What `top` and `serve` run: how often, what they show, which hooks (the one-hook tier or the
/// full set, and serve's duty cycle between them).
pub struct Loop {
    pub interval: Duration,
    pub by: GroupBy,
    pub sort: SortBy,
    pub show: Show,
    pub exposition: Option<Exposition>,
    pub cgroups: usize,
    /// kubelet's pod folders (`<namespace>_<name>_<uid>`): the pods' names.
    pub pods_root: std::path::PathBuf,
    pub sync_syscalls: bool,
    pub empty_probes: bool,
    /// The full phase set (`--phases`; `--sync-syscalls` implies it), else the one-hook tier.
    pub phases: bool,
    /// serve's duty cycle: the full set attached for `.1` every `.0` beside the one hook.
    pub phases_every: Option<(Duration, Duration)>,
}

fn opts(l: &Loop) -> TraceOpts {
    TraceOpts {
        sync_syscalls: l.sync_syscalls,
        empty_probes: l.empty_probes,
        one_hook: !l.phases,
        // Every process: system-wide.
        tgid: 0,
        // SAFETY: gettid has no preconditions.
        exclude_tids: vec![unsafe { libc::gettid() } as u32],
        top: true,
        // The agent's own cost, live (iopath_bpf_* and top's header): the kernel times every
        // program run while iopath holds BPF_ENABLE_STATS (two clock reads a run).
        prog_stats: true,
        ..Default::default()
    }
}

fn check(cmd: &str) -> Result<()> {
    crate::trace::check_can_trace_for(&crate::sysconf::SysRoots::live(), cmd)
}

/// Runs the agent until a stop request: `listen` serves the metrics there, `cmd` names the command
/// in messages. What it runs is decided by the caller (main.rs, from the command line).
pub fn run(mut l: Loop, listen: Option<&str>, cmd: &str) -> Result<()> {
    check(cmd)?;
    crate::stop::on_signals();
    // Bound before the probes load: a taken port fails fast, with nothing attached.
    let listener = listen.map(http::bind).transpose()?;
    if let Some(l) = &listener {
        // The real address: with --listen HOST:0 the kernel picked the port.
        let at = l.local_addr().map_or_else(|_| listen.unwrap_or("").to_owned(), |a| a.to_string());
        eprintln!("iopath serve: metrics at http://{at}/metrics");
    }
    std::thread::scope(|s| -> Result<()> {
        let server = listener.map(|lst| {
            let exp: Exposition = Arc::new(Mutex::new(Arc::new(String::new())));
            l.exposition = Some(exp.clone());
            s.spawn(move || http::serve(lst, exp))
        });
        let o = opts(&l);
        let r = if l.phases {
            session::trace_live(&o, |maps| refresh_loop(&l, maps, None)).map(|_| ())
        } else {
            crate::probe::stamps::live(&o, |maps, checker| refresh_loop(&l, maps, Some(checker)))
        };
        // The server stops with the loop (it polls the same stop request).
        crate::stop::request();
        if let Some(h) = server {
            let _ = h.join();
        }
        r.map(|_| ())
    })
}

/// Waits until `deadline`, returning early on a stop request; the one-hook tier's check windows
/// open and close on time meanwhile.
fn sleep_until(deadline: Instant, checker: &mut Option<&mut Checker<'_>>) {
    while !crate::stop::requested() {
        let now = Instant::now();
        if let Some(c) = checker.as_mut() {
            c.tick(now);
        }
        if now >= deadline {
            return;
        }
        // 50 ms: a stop request is answered soon; the checker does no system call on a tick
        // outside its windows but one per-CPU counter read.
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

fn refresh_loop(l: &Loop, maps: LiveMaps, mut checker: Option<&mut Checker<'_>>) -> Result<()> {
    let mut exporter = metrics::Exporter::new(l.cgroups, maps.hooks.clone());
    // serve --phases-every: the full set's windows, their series apart (window="phases").
    let mut duty = match (l.phases_every, checker.is_some()) {
        (Some((every, length)), true) => {
            let full = TraceOpts { one_hook: false, ..opts(l) };
            Some(window::DutyCycle::new(every, length, full, l.pods_root.clone()))
        }
        _ => None,
    };
    let mut windowed = metrics::Exporter::new(l.cgroups, Vec::new()).windowed("phases");
    let mut reader = live::Reader::new(maps, l.pods_root.clone())?;
    let publish = |e: &metrics::Exporter, w: Option<&metrics::Exporter>| -> Result<()> {
        if let Some(x) = &l.exposition {
            let text = Arc::new(e.encode_with(w).map_err(|_| anyhow::anyhow!("encoding the metrics failed"))?);
            *x.lock().unwrap_or_else(|p| p.into_inner()) = text;
        }
        Ok(())
    };
    publish(&exporter, None)?;
    let mut prev = reader.read();
    live::forget_gone(&mut prev);
    let mut tui = match l.show {
        Show::Tui => Some(tui::Tui::start(l.by, l.sort)?),
        _ => None,
    };
    let mut next = Instant::now() + l.interval;
    let mut frames = 0u64;
    let out = loop {
        if let Some(t) = tui.as_mut() {
            // Keys are read until `next`, in steps that keep the check windows on time.
            let mut quit = None;
            while Instant::now() < next && quit.is_none() {
                if let Some(c) = checker.as_mut() {
                    c.tick(Instant::now());
                }
                match t.wait_until(next.min(Instant::now() + Duration::from_millis(250))) {
                    Ok(true) => {}
                    Ok(false) => quit = Some(Ok(())),
                    Err(e) => quit = Some(Err(e)),
                }
            }
            if let Some(q) = quit {
                break q;
            }
        } else {
            sleep_until(next, &mut checker);
        }
        if crate::stop::requested() {
            break Ok(());
        }
        next += l.interval;
        let mut cur = reader.read();
        if let Some(c) = checker.as_deref() {
            cur.stamps = Some(c.state());
        }
        exporter.absorb(&prev, &cur);
        if let Some(d) = duty.as_mut() {
            if let Some((a, b)) = d.poll(Instant::now()) {
                windowed.absorb(&a, &b);
                windowed.note_window(&a, &b, d.duty());
            }
            if d.last_error.is_some() && d.last_error != windowed.window_error {
                eprintln!("iopath serve: a --phases-every window failed: {}", d.last_error.as_deref().unwrap_or(""));
            }
            windowed.window_error = d.last_error.clone();
        }
        publish(&exporter, duty.is_some().then_some(&windowed))?;
        match &l.show {
            Show::Text { count, rows } => {
                let f = table::frame(&prev, &cur, l.by, l.sort);
                let mut o = std::io::stdout().lock();
                table::render_text(&f, l.by, l.sort, *rows, &mut o)?;
                std::io::Write::flush(&mut o)?;
                frames += 1;
                if *count > 0 && frames >= *count {
                    break Ok(());
                }
            }
            Show::Tui => {
                if let Some(t) = tui.as_mut() {
                    t.show(&prev, &cur)?;
                }
            }
            Show::Nothing => {}
        }
        live::forget_gone(&mut cur);
        prev = cur;
    };
    drop(tui);
    out
}
