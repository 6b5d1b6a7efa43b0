//! The terminal rendering of a report.

use std::io::{self, Write};

use super::Report;
use crate::aggregate::{PhaseStats, TraceSummary};
use crate::hist::LatSummary;
use crate::job::{fmt_bytes, Stop};

/// `1234567` -> `1.23M`, `45200.0` -> `45.2k`.
pub fn si(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.2}G", x / 1e9),
        x if x >= 1e6 => format!("{:.2}M", x / 1e6),
        x if x >= 1e4 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// Nanoseconds as microseconds with sensible precision.
/// Microseconds for a 9-wide column: at most 8 characters whatever the value, so columns never
/// run together (a damaged 36-minute value had): seconds from 10 s ("12.3s"), hours from 10^4 s.
pub fn us(ns: u64) -> String {
    let u = ns as f64 / 1e3;
    if u >= 1e10 {
        format!("{:.0}h", u / 3.6e9)
    } else if u >= 1e7 {
        format!("{:.1}s", u / 1e6)
    } else if u >= 1000.0 {
        format!("{u:.0}")
    } else if u >= 100.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

pub fn render_text(r: &Report, w: &mut impl Write) -> io::Result<()> {
    for (_, text) in text_sections(r) {
        w.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// The report's text section by section, in the order printed (tests/render.rs holds each one's
/// golden file): what ran, its numbers, how they moved, then the trace's sections.
pub fn text_sections(r: &Report) -> Vec<(&'static str, String)> {
    let text = |f: &dyn Fn(&mut dyn Write) -> io::Result<()>| {
        let mut out = Vec::new();
        f(&mut out).expect("writing to memory");
        String::from_utf8(out).expect("the renderers write UTF-8")
    };
    let mut v = vec![
        ("header", text(&|w| header_section(r, w))),
        ("run", text(&|w| run_section(r, w))),
        ("over_time", text(&|w| over_time_section(r, w))),
    ];
    if let Some(t) = &r.trace {
        v.extend(trace_sections(r, t));
    }
    if r.partial {
        v.push(("partial", "  PARTIAL: the run was interrupted; numbers cover the I/Os that finished\n".to_owned()));
    }
    v
}

/// What ran (the generator's job, or the traced process) and the warnings about it.
fn header_section(r: &Report, w: &mut dyn Write) -> io::Result<()> {
    match (&r.job, &r.target, &r.process) {
        (Some(j), Some(t), _) => {
            let stop = match j.stop {
                Stop::Runtime(d) => format!("{}s time-based", d.as_secs_f64()),
                Stop::Ios(n) => format!("for {n} I/Os"),
            };
            writeln!(
                w,
                "iopath run: {} {} {} qd{}{} x{} job(s), {}, {}",
                j.engine,
                j.rw,
                fmt_bytes(j.bs as u64),
                j.qd,
                uring_flags(r),
                j.jobs,
                if j.direct { "O_DIRECT" } else { "buffered" },
                stop
            )?;
            let disk = t.disk.as_deref().map(|d| format!(" on {d}")).unwrap_or_default();
            writeln!(
                w,
                "  target  {} ({}{}, {} used), kernel {}",
                t.path.display(),
                t.fs_type,
                disk,
                fmt_bytes(t.size),
                r.system.kernel
            )?;
        }
        (_, _, Some(p)) => {
            writeln!(w, "iopath trace: pid {} ({}), kernel {}", p.pid, p.command, r.system.kernel)?;
            if let Some(code) = p.exit_code {
                let why = if p.interrupted { " (interrupted by iopath: --duration, or Ctrl-C)" } else { "" };
                writeln!(w, "  exited with status {code}{why}")?;
            }
        }
        _ => writeln!(w, "iopath report, kernel {}", r.system.kernel)?,
    }
    for warn in &r.warnings {
        writeln!(w, "  WARNING {warn}")?;
    }
    Ok(())
}

/// IOPS, bandwidth, latency, CPU and context switches: the application's own numbers.
fn run_section(r: &Report, w: &mut dyn Write) -> io::Result<()> {
    // Reports recorded before traced commands counted their mix have no split: say nothing.
    let buffered = r.trace.as_ref().and_then(|t| t.page_cache.as_ref()).map_or(0, |pc| {
        [&pc.reads, &pc.writes, &pc.copies].iter().filter_map(|s| s.as_ref()).map(|s| s.total.count).sum::<u64>()
    });
    let copies = r.trace.as_ref().and_then(|t| t.page_cache.as_ref()?.copies.as_ref()).map_or(0, |s| s.total.count);
    let copies = if copies > 0 { format!(", copy {copies}") } else { String::new() };
    let split = match (r.reads + r.writes > 0 || r.ios == 0, buffered) {
        // A traced command's calls: direct I/O and the page cache's, both counted.
        (true, b) if b > 0 && b < r.ios => {
            format!(" (read {}, write {}{copies}; {} of them buffered)", r.reads, r.writes, b)
        }
        (true, _) => format!(" (read {}, write {}{copies})", r.reads, r.writes),
        (false, _) => String::new(),
    };
    writeln!(
        w,
        "  IOPS {}   BW {:.1} MiB/s   {} I/Os in {:.2}s{split}{}",
        si(r.iops),
        r.bw_bytes / (1 << 20) as f64,
        r.ios,
        r.runtime_ns as f64 / 1e9,
        if r.verified > 0 { format!(", {} blocks verified", r.verified) } else { String::new() }
    )?;
    writeln!(w, "  in flight {:.1} on average (IOPS x mean latency)", r.inflight_avg)?;
    writeln!(w, "  latency (us)     mean      p50      p90      p99    p99.9      max")?;
    let row = |w: &mut dyn Write, name: &str, s: &LatSummary| {
        writeln!(
            w,
            "    {name:<10}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}",
            us(s.mean),
            us(s.p50),
            us(s.p90),
            us(s.p99),
            us(s.p999),
            us(s.max)
        )
    };
    match &r.slat_ns {
        Some(s) => row(w, "slat", s)?,
        None if r.job.is_none() => writeln!(w, "    {:<10}{:>9}", "slat", "n/a (another process)")?,
        None => writeln!(w, "    {:<10}{:>9}", "slat", "n/a (synchronous engine)")?,
    }
    match &r.clat_ns {
        Some(c) => row(w, "clat", c)?,
        None => writeln!(w, "    {:<10}{:>9}", "clat", "n/a (another process: lat is syscall entry to reap)")?,
    }
    row(w, "lat", &r.lat_ns)?;
    if let Some(s) = &r.sync_lat_ns {
        let name = if r.job.as_ref().is_some_and(|j| j.fdatasync > 0) { "fdatasync" } else { "fsync" };
        row(w, name, s)?;
        writeln!(w, "      ({} calls, timed apart: not in the writes' latency)", s.count)?;
    }
    writeln!(
        w,
        "  CPU     usr {:.1}%  sys {:.1}%  ({} us of CPU per I/O)",
        r.cpu.usr_pct,
        r.cpu.sys_pct,
        us(r.cpu.per_io_ns.round() as u64)
    )?;
    writeln!(
        w,
        "  ctx sw  voluntary {}  involuntary {}  ({:.3} per I/O, {})",
        r.ctx_switches.voluntary, r.ctx_switches.involuntary, r.ctx_switches.per_io, r.ctx_switches.source
    )?;
    Ok(())
}

/// The time series and the run queue.
fn over_time_section(r: &Report, mut w: &mut dyn Write) -> io::Result<()> {
    if let Some(ts) = &r.timeseries {
        render_series(ts, &mut w)?;
    }
    if let Some(d) = &r.run_delay {
        writeln!(
            w,
            "  run queue  {} us per I/O runnable, not running ({}: after wakeups and preemptions)",
            us(d.per_io_ns.round() as u64),
            d.source
        )?;
    }
    Ok(())
}

/// One character per value, ▁ (the row's least) to █ (its most); a blank where it is unknown.
fn sparkline(values: &[Option<f64>]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let known = values.iter().flatten();
    let (lo, hi) = known.fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if hi <= lo => BARS[3],
            Some(v) => BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize],
        })
        .collect()
}

/// The run over time, compact: IOPS, bandwidth and latency p50/p99/max per interval as
/// sparklines with their range (the JSON report's "timeseries" has every value). At most 60
/// characters: longer runs are shown in groups of intervals (each group's mean IOPS and
/// bandwidth, worst latency).
fn render_series(ts: &crate::timeseries::TimeSeries, w: &mut impl Write) -> io::Result<()> {
    // A last interval much shorter than the rest (the drain after the deadline, a command's last
    // moments) is a drop in the line that is not the run's: left out here, in the JSON.
    let tail = ts.points.last().filter(|l| ts.points.len() > 1 && l.dur_ns < ts.interval_ns / 2);
    let p = &ts.points[..ts.points.len() - usize::from(tail.is_some())];
    if p.len() < 2 {
        return Ok(());
    }
    let per = p.len().div_ceil(60);
    let groups: Vec<&[crate::timeseries::Point]> = p.chunks(per).collect();
    let iops: Vec<Option<f64>> =
        groups.iter().map(|g| Some(g.iter().map(|x| x.iops).sum::<f64>() / g.len() as f64)).collect();
    let bw: Vec<Option<f64>> =
        groups.iter().map(|g| Some(g.iter().map(|x| x.bw_bytes).sum::<f64>() / g.len() as f64)).collect();
    // A group's worst: its intervals' largest p50, p99 and max (a stall stays visible when grouped).
    let worst = |f: fn(&crate::timeseries::Point) -> Option<u64>| -> Vec<Option<f64>> {
        groups.iter().map(|g| g.iter().filter_map(f).max().map(|v| v as f64)).collect()
    };
    let (p50, p99, max) = (worst(|x| x.lat_p50_ns), worst(|x| x.lat_p99_ns), worst(|x| x.lat_max_ns));
    let range = |v: &[Option<f64>], f: &dyn Fn(f64) -> String| {
        let k: Vec<f64> = v.iter().flatten().copied().collect();
        let lo = k.iter().copied().fold(f64::MAX, f64::min);
        let hi = k.iter().copied().fold(f64::MIN, f64::max);
        if k.is_empty() {
            "unknown".to_owned()
        } else {
            format!("{} .. {}", f(lo), f(hi))
        }
    };
    let step = ts.interval_ns as f64 / 1e9 * per as f64;
    let idle = p.iter().filter(|x| x.lat_p99_ns.is_none()).count();
    writeln!(
        w,
        "  over time  {} points of {step}s{}{}",
        groups.len(),
        if per > 1 { " (grouped)" } else { "" },
        if idle > 0 { format!(", {idle} with no completion (blank)") } else { String::new() }
    )?;
    if let Some(t) = tail {
        writeln!(w, "      (the last {:.0} ms, a partial interval at the end, left out)", t.dur_ns as f64 / 1e6)?;
    }
    writeln!(w, "    {:<11}{}   {}", "IOPS", sparkline(&iops), range(&iops, &|x| si(x)))?;
    writeln!(w, "    {:<11}{}   {}", "MB/s", sparkline(&bw), range(&bw, &|x| format!("{:.1}", x / 1e6)))?;
    for (name, v) in [("p50 (us)", &p50), ("p99 (us)", &p99), ("max (us)", &max)] {
        writeln!(w, "    {name:<11}{}   {}", sparkline(v), range(v, &|x| us(x as u64)))?;
    }
    // A group's mean of a per-interval mean or ratio, weighted by the intervals' I/Os.
    let weighted = |f: &dyn Fn(&crate::timeseries::Point) -> Option<f64>| -> Vec<Option<f64>> {
        groups
            .iter()
            .map(|g| {
                let (sum, n) = g
                    .iter()
                    .filter_map(|x| f(x).map(|v| (v, (x.reads + x.writes).max(1) as f64)))
                    .fold((0.0, 0.0), |(s, n), (v, k)| (s + v * k, n + k));
                (n > 0.0).then(|| sum / n)
            })
            .collect()
    };
    let phase = |g: fn(&crate::timeseries::PhaseMeans) -> Option<u64>| {
        weighted(&move |x: &crate::timeseries::Point| x.phase_mean_ns.as_ref().and_then(g).map(|v| v as f64))
    };
    let rows: [(&str, Vec<Option<f64>>); 4] = [
        ("  submit", phase(|m| m.submission_ns)),
        ("  block", phase(|m| m.block_ns)),
        ("  device", phase(|m| m.device_ns)),
        ("  complete", phase(|m| m.completion_ns)),
    ];
    if rows.iter().any(|(_, v)| v.iter().any(Option::is_some)) {
        writeln!(w, "    phase means (us):")?;
        for (name, v) in &rows {
            writeln!(w, "    {name:<11}{}   {}", sparkline(v), range(v, &|x| us(x as u64)))?;
        }
    }
    for (name, f) in [
        ("IRQ/IO", &(|x: &crate::timeseries::Point| x.irq_per_io) as &dyn Fn(&crate::timeseries::Point) -> Option<f64>),
        ("ctx/IO", &|x: &crate::timeseries::Point| x.ctx_per_io),
    ] {
        let v = weighted(f);
        if v.iter().any(Option::is_some) {
            writeln!(w, "    {name:<11}{}   {}", sparkline(&v), range(&v, &|x| format!("{x:.3}")))?;
        }
    }
    Ok(())
}

/// Where a lean trace's device phase started, per disk, and what that was checked against.
fn issue_stamps(st: &crate::model::IssueStamps, w: &mut dyn Write) -> io::Result<()> {
    let share = if st.run_ns > 0 { st.hooked_ns as f64 / st.run_ns as f64 * 100.0 } else { 100.0 };
    writeln!(
        w,
        "  device phase's start: block_rq_issue attached {share:.0}% of the run ({} check window{}), \
         the request's io_start_time_ns where checked (--issue-hook keeps the hook)",
        st.windows,
        if st.windows == 1 { "" } else { "s" }
    )?;
    for d in &st.disks {
        if d.trusted {
            writeln!(
                w,
                "    {:<8} io_start_time_ns: within max(1 us, 2%) of the hook on 99% of {} requests (p99 error <= {} ns, mean skew {:+} ns)",
                d.dev,
                d.n,
                d.err_p99_ns,
                d.skew_mean_ns.unwrap_or(0)
            )?;
        } else {
            writeln!(w, "    {:<8} block_rq_issue: {}", d.dev, d.why.as_deref().unwrap_or("not checked"))?;
        }
    }
    if st.unstamped > 0 {
        writeln!(
            w,
            "    {} requests completed on a disk no check had seen while the hook was detached: their device phase is unknown (not linked)",
            st.unstamped
        )?;
    }
    Ok(())
}

/// What every section of a trace's text reads: the report, its trace, and what the two decide
/// together (whether the phases reconcile, whether any I/O was followed end to end).
struct View<'a> {
    r: &'a Report,
    t: &'a TraceSummary,
    rec: crate::aggregate::Reconciliation,
    /// I/Os with bios were followed end to end: the phase table has rows.
    rows: bool,
    /// --lean on io_uring: no syscall hook, so the application's row runs until io_uring took the SQE.
    no_syscall_hooks: bool,
}

impl View<'_> {
    /// One row of the phase table; `share`: with its share of the phases' sum.
    fn row(&self, w: &mut dyn Write, name: &str, s: &PhaseStats, share: bool) -> io::Result<()> {
        let sum = self.t.phase_sum_mean_ns.max(1) as f64;
        let pct = if share { format!("{:>6.1}%", s.mean_ns as f64 / sum * 100.0) } else { String::new() };
        writeln!(
            w,
            "    {name:<16}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9} {pct}",
            us(s.mean_ns),
            us(s.p50_ns),
            us(s.p90_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns)
        )
    }
}

type Section = fn(&View, &mut dyn Write) -> io::Result<()>;

/// A trace's text, section by section in the order printed; each is tested against its own golden
/// file (tests/render.rs).
const TRACE_SECTIONS: &[(&str, Section)] = &[
    ("hooks", hooks_section),
    ("phases", phases_section),
    ("reconciliation", reconciliation_section),
    ("accounting", accounting_section),
    ("routes", routes_section),
    ("per_io", per_io_section),
    ("counts", counts_section),
    ("probe_cost", probe_cost_section),
    ("outputs", outputs_section),
    ("probes", probes_section),
];

/// Each section of a trace's text by name, rendered (what render_text prints, in order).
pub fn trace_sections(r: &Report, t: &TraceSummary) -> Vec<(&'static str, String)> {
    let v = View {
        r,
        t,
        rec: t.reconciliation.clone().unwrap_or_else(|| crate::aggregate::reconcile(t, r.lat_ns.mean)),
        rows: t.phases.total.count > 0,
        no_syscall_hooks: t.lean
            && !t.probes.iter().any(|p| {
                p.attached && [crate::hook_names::SYS_ENTER, crate::hook_names::SYS_EXIT].contains(&p.name.as_str())
            }),
    };
    TRACE_SECTIONS
        .iter()
        .map(|(name, f)| {
            let mut out = Vec::new();
            f(&v, &mut out).expect("writing to memory");
            (*name, String::from_utf8(out).expect("the renderers write UTF-8"))
        })
        .collect()
}

/// Which hooks a lean trace left out, and where its device phase starts.
fn hooks_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let t = v.t;
    if t.lean {
        // The default for the generator's direct I/O: say what it leaves out and how to get it.
        // Syscalls are counted at their entry: lean aio hooks only io_getevents' exit.
        let syscalls =
            if t.probes.iter().any(|p| p.measures(crate::hook_names::SYS_ENTER)) { "" } else { ", syscall-entry" };
        writeln!(
            w,
            "\n  hooks: lean (the phases' own; no scheduler, softirq{syscalls} hook): --full measures those too"
        )?;
        if let Some(st) = &t.issue_stamps {
            issue_stamps(st, w)?;
        }
    }
    Ok(())
}

/// The phase table: its header, the route's rows, the reap, the page cache's.
fn phases_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t, p, rec) = (v.r, v.t, &v.t.phases, &v.rec);
    if rec.reconciled {
        writeln!(w, "\n  phases (us)          mean      p50      p90      p99    p99.9      max   share")?;
    } else {
        writeln!(w, "\n  phases (us), NOT RECONCILED: these cover only what was followed (see below)")?;
        writeln!(w, "                       mean      p50      p90      p99    p99.9      max   share")?;
    }
    if p.total.count == 0 && t.page_cache.is_none() && t.uring_cached.is_none() {
        writeln!(w, "    no I/O was followed end to end: no phase to show")?;
        if r.target.as_ref().is_some_and(|t| t.in_memory && t.disk.is_none()) {
            writeln!(
                w,
                "    (the target is a {} file: its I/O is a memory copy that never reaches a block device, so there are no block phases; trace a file on a disk)",
                r.target.as_ref().map_or("", |t| t.fs_type.as_str())
            )?;
        }
    }
    if v.rows {
        phase_rows(v, w)?;
    }
    reap_rows(v, w)?;
    buffered_rows(v, w)
}

/// The followed I/Os' rows: the application's own time, submission, block layer, device, completion.
fn phase_rows(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (t, p, no_syscall_hooks) = (v.t, &v.t.phases, v.no_syscall_hooks);
    let row = |w: &mut dyn Write, name: &str, s: &PhaseStats, share: bool| v.row(w, name, s, share);
    if let Some(a) = &p.app_before_submit {
        row(w, "application", a, true)?;
        let lean_aio = t.lean && !no_syscall_hooks;
        let until = if no_syscall_hooks {
            "io_uring took its SQE: its own time and the syscall's entry (lean trace)"
        } else if lean_aio {
            "it called io_submit, by its own clock: its own time before the kernel (lean trace)"
        } else {
            "its io_uring_enter / io_submit: its own time before the kernel"
        };
        writeln!(w, "      (the generator queued the I/O -> {until})")?;
    }
    row(w, "submission", &p.submission, true)?;
    for (name, s) in [("  SQ-thread pickup", &p.sqpoll_pickup), ("  io-wq", &p.iowq), ("  throttled", &p.throttled)] {
        if let Some(s) = s {
            row(w, name, s, false)?;
        }
    }
    if let Some(b) = &p.sq_ring_bound {
        row(w, "  + SQ ring bound", b, false)?;
        writeln!(
            w,
            "      (SQPOLL: each SQE appeared in the ring between two looks at its tail; the I/O starts at the first)"
        )?;
    }
    row(w, "block layer", &p.block, true)?;
    if let Some(s) = &p.stacked_down {
        row(w, "  stacked (down)", s, false)?;
    }
    if let Some(d) = &p.nvme_driver {
        row(w, "  nvme driver", d, false)?;
    }
    row(w, "device", &p.device, true)?;
    if let Some(n) = &p.nvme_device {
        row(w, "  nvme device", n, false)?;
        if let Some(s) = &p.nvme_submit {
            row(w, "    to doorbell", s, false)?;
        } else if t.probes.iter().any(|q| q.attached && crate::hook_names::DOORBELL.contains(&q.name.as_str())) {
            writeln!(
                w,
                "    {:<16}nvme_queue_rq probe attached, never hit: requests went through nvme_queue_rqs (batched)",
                "  to doorbell"
            )?;
        }
        if let Some(e) = &p.nvme_end {
            row(w, "  nvme end", e, false)?;
        }
        writeln!(w, "    (nvme driver = nvme_setup_cmd -> issue: command + DMA map, inside the block layer phase;")?;
        writeln!(w, "     nvme device = issue -> nvme_complete_rq; nvme end = -> block_rq_complete)")?;
    }
    row(w, "completion", &p.completion, true)?;
    if let Some(s) = &p.stacked_up {
        row(w, "  stacked (up)", s, false)?;
    }
    if let Some(s) = &p.fs_endio_wait {
        row(w, "  end-io queued", s, false)?;
    }
    if let Some(s) = &p.fs_endio {
        row(w, "  end-io worker", s, false)?;
        writeln!(w, "      (btrfs: the device's completion -> its end-io worker, which verifies the read's checksums and ends it)")?;
    }
    match &p.completion_posted {
        Some(posted) => row(w, "  posted", posted, false)?,
        None => writeln!(w, "    {:<16}{:>9}", "  posted", "n/a (posted inside the device completion: aio, sync I/O)")?,
    }
    if p.completion_reap.count > 0 {
        row(w, "  waiting (reap)", &p.completion_reap, false)?;
    }
    if let Some(b) = &p.cq_ring_bound {
        row(w, "  + CQ ring bound", b, false)?;
        writeln!(
            w,
            "      (io_uring: each CQE was taken from the ring between two looks at its head; the I/O ends at the"
        )?;
        writeln!(
            w,
            "       last look that still saw it, and may have been taken up to this much later: not timed, bounded)"
        )?;
    }
    if let Some(tr) = &p.tracer_reap {
        row(w, "tracer (iopath)", tr, true)?;
        writeln!(
            w,
            "      (iopath's own probe closing the I/Os a reaping syscall returned, before the application got them:"
        )?;
        writeln!(w, "       the observer's cost, in the application's latency while traced, not the kernel's work)")?;
    }
    Ok(())
}

/// The reap from the CQ ring, timed by the generator or not seen at all.
fn reap_rows(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let t = v.t;
    let row = |w: &mut dyn Write, name: &str, s: &PhaseStats, share: bool| v.row(w, name, s, share);
    match (&t.reap_from_ring, t.reap_not_seen) {
        (Some(wait), _) => {
            row(w, "reap (CQ ring)", wait, true)?;
            // SQPOLL reads the CQ ring with no syscall, traced lean or not; --lean on the
            // submitting thread reaps through io_uring_enter, which it does not hook.
            let sqpoll = t.routes.iter().any(|r| r.key == "sqpoll" && r.share > 0.5);
            let how = if t.lean && !sqpoll {
                "lean trace: posted -> taken by the generator: the rest of its io_uring_enter, which no hook sees, and its return"
            } else {
                "SQPOLL: posted -> taken from the CQ ring with no syscall, which no probe sees"
            };
            writeln!(w, "      ({how}: timed by the generator)")?;
        }
        (None, 0) => {}
        (None, n) => writeln!(
            w,
            "    {:<16} not seen for {n} I/Os: reaped from the CQ ring without a syscall (SQPOLL)",
            "  waiting (reap)"
        )?,
    }
    Ok(())
}

/// The page cache's rows, and io_uring's on buffered files.
fn buffered_rows(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (t, p, rows) = (v.t, &v.t.phases, v.rows);
    let row = |w: &mut dyn Write, name: &str, s: &PhaseStats, share: bool| v.row(w, name, s, share);
    if let Some(pc) = &t.page_cache {
        render_page_cache_rows(pc, w, &row)?;
    }
    if let Some(u) = &t.uring_cached {
        // The application's and the tracer's rows are shown once: above, when I/Os with bios
        // were followed too.
        if !rows {
            if let Some(a) = &p.app_before_submit {
                row(w, "application", a, false)?;
            }
        }
        row(w, "io_uring buffered", &u.total, false)?;
        row(w, "  in the kernel", &u.kernel, false)?;
        if let Some(n) = &u.not_inline {
            row(w, "    not inline", n, false)?;
        }
        row(w, "  waiting (reap)", &u.reap, false)?;
        if !rows {
            if let Some(tr) = &p.tracer_reap {
                row(w, "tracer (iopath)", tr, false)?;
            }
        }
        writeln!(
            w,
            "      (io_uring on a buffered file: in the kernel = submitted -> posted, the page cache's lookup and copy"
        )?;
        writeln!(
            w,
            "       inside the submitting call; not inline: the wait for a page being read and the retry, or an"
        )?;
        writeln!(w, "       io-wq punt, as ext4's buffered writes take)")?;
    }
    Ok(())
}

/// The phases' sum against the application's own latency: reconciled, or why not.
fn reconciliation_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t, p, rec, rows, no_syscall_hooks) = (v.r, v.t, &v.t.phases, &v.rec, v.rows, v.no_syscall_hooks);
    let bound = p.cq_ring_bound.as_ref().filter(|_| r.job.is_none());
    let whose = match (r.job.is_some(), bound.is_some()) {
        (true, _) => "the generator's own",
        (false, true) => "the traced I/Os'",
        (false, false) => "the traced syscalls'",
    };
    if rec.reconciled {
        writeln!(
            w,
            "    {:<16}{:>9}   = {:.1}% of {whose} mean latency ({} us)",
            "sum of means",
            us(t.phase_sum_mean_ns),
            rec.phase_sum_ratio * 100.0,
            us(r.lat_ns.mean)
        )?;
        if let Some(b) = bound {
            // The ring's part is bounded, not timed: say which part and by how much.
            writeln!(
                w,
                "      (each I/O ends at the last look that saw its CQE in the ring; taken within +{} us more, the mean bound)",
                us(b.mean_ns)
            )?;
        }
        if let Some(out) = r.outside_phases_ns {
            let place = if no_syscall_hooks {
                "between the generator's clock reads and the probes' (lean trace)"
            } else if t.reap_not_seen > 0 && t.reap_from_ring.is_none() {
                "in the application (queueing, reading the CQ ring) and syscall entry/exit"
            } else if p.app_before_submit.is_some() {
                "after the reaping syscall's exit, until the generator took the completion"
            } else {
                "in the application and syscall entry/exit"
            };
            if out >= 0 {
                // Without sched_switch (--lean) whether the thread was preempted there is unknown.
                let preempted = t.preempted_ns.as_ref().map_or("unknown".to_owned(), |p| us(p.per_io.round() as u64));
                writeln!(
                    w,
                    "    {:<16}{:>9}   {place}, of which preempted (runnable, not running) {preempted}",
                    "outside phases",
                    us(out as u64),
                )?;
            } else {
                // The probes' timestamps sit just outside the application's (syscall entry before
                // the generator's clock read returns, and so on): within the tolerance, by less
                // than the clocks' own spread.
                writeln!(
                    w,
                    "    {:<16}{:>9}   (the phases cover {} us more than the application timed: clock placement)",
                    "outside phases",
                    "none",
                    us(out.unsigned_abs())
                )?;
            }
        }
    } else {
        if rows {
            writeln!(
                w,
                "    {:<16}{:>9}   does not reconcile with {whose} mean latency ({} us):",
                "sum of means",
                us(t.phase_sum_mean_ns),
                us(r.lat_ns.mean)
            )?;
        } else {
            writeln!(w, "    no phase sum to set against {whose} mean latency ({} us):", us(r.lat_ns.mean))?;
        }
        for why in &rec.reasons {
            writeln!(w, "      - {why}")?;
        }
    }
    Ok(())
}

/// What the I/O count covers: correlated, lost, out of order, unreadable.
fn accounting_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t) = (v.r, v.t);
    let l = &t.lost_events;
    writeln!(
        w,
        "  correlated {:.2}% of {} I/Os; lost/uncertain events {} (untagged {}, missing completions {}, never reaped {}, unmatched reaps {}, dropped {}, recursion misses {})",
        t.correlated_fraction * 100.0,
        r.ios,
        l.total,
        l.untagged_bios,
        l.missing_completions,
        l.never_reaped,
        l.reaped_unmatched,
        l.dropped,
        l.recursion_misses
    )?;
    if !t.beyond_trace.is_empty() {
        writeln!(
            w,
            "  out of order  {} held values longer than the trace (stamps taken out of order): not shown as measured",
            t.beyond_trace.join(", ")
        )?;
    }
    if l.disordered > 0 || l.disordered_spans > 0 {
        writeln!(
            w,
            "  out of order  {} I/Os and {} phase spans stamped out of order (two CPUs' clocks): in no histogram, never a \
             negative time",
            l.disordered, l.disordered_spans
        )?;
    }
    if l.user_unreadable > 0 {
        writeln!(w, "  user memory unreadable {} times: iocb or io_event arrays the probes could not read (those requests not followed)", l.user_unreadable)?;
    }
    Ok(())
}

/// The routes the I/Os took, and the page cache's, sync calls' and writeback's own accounts.
fn routes_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let t = v.t;
    if !t.routes.is_empty() {
        let parts: Vec<String> = t
            .routes
            .iter()
            .map(|x| {
                let dir = match (x.reads, x.writes) {
                    (_, 0) => "reads".to_owned(),
                    (0, _) => "writes".to_owned(),
                    (r, w) => format!("{r} reads, {w} writes"),
                };
                format!("{} {:.1}% ({dir})", x.name, x.share * 100.0)
            })
            .collect();
        writeln!(w, "  routes  {}", parts.join("; "))?;
    }
    if t.no_block_io > 0 {
        writeln!(
            w,
            "  page cache  {} reads/writes of files moved no block I/O of their own (not in the phases)",
            t.no_block_io
        )?;
    }
    if let Some(pc) = &t.page_cache {
        render_page_cache_counts(pc, w)?;
    }
    if let Some(u) = &t.uring_cached {
        writeln!(
            w,
            "  io_uring buffered  {} requests: {:.2}% completed inside the submitting call (reads: the cache had the \
             data); those calls queued {} bios, {:.1} MiB (readahead, writeback)",
            u.total.count,
            u.inline_ratio * 100.0,
            u.bios,
            u.bio_bytes as f64 / (1 << 20) as f64
        )?;
    }
    if let Some(sc) = &t.sync_calls {
        let known = t.page_cache.as_ref().map_or_else(
            || t.probes.iter().any(|p| p.measures(crate::hook_names::SCHED_SWITCH) && p.via == "tp_btf"),
            |pc| pc.split_known,
        );
        render_sync_calls(sc, known, w)?;
    }
    if let Some(c) = &t.page_cache_counted {
        writeln!(
            w,
            "\n  page cache (counted, --pagecache count: no call timed)  {} reads asked for {} pages; the traced \
             processes added {} pages to the cache ({})",
            c.reads,
            c.pages_read,
            c.pages_added,
            c.added_per_page_read.map_or("no page read".to_owned(), |r| format!("{:.4} per page read", r))
        )?;
    }
    if let Some(wb) = &t.writeback {
        render_writeback(wb, w)?;
    }
    Ok(())
}

/// Interrupts, softirqs, IOMMU and DMA maps, context switches per I/O.
fn per_io_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t) = (v.r, v.t);
    let vectors = if r.irq_vectors.is_empty() {
        "no device vectors: software device".to_owned()
    } else {
        r.irq_vectors.join(",")
    };
    writeln!(w, "\n  per I/O            total     per I/O")?;
    // Interrupts, softirqs and IOMMU/DMA maps belong to no process: counted machine-wide (IRQs on
    // the target's vectors) for as long as the trace ran, so I/O of anyone else adds to them.
    writeln!(w, "    (IRQs, softirqs, iommu and dma: device- or machine-wide while traced; other I/O adds to them)")?;
    // --lean attaches no softirq or scheduler hook: what they count is unknown, not zero.
    let unknown = |w: &mut dyn Write, name: &str| {
        writeln!(w, "    {:<40}{:>10}{:>10}   (lean trace: not hooked; --full hooks it)", name, "unknown", "unknown")
    };
    for (name, v) in [
        (format!("IRQs ({vectors})"), Some(&t.irq)),
        ("BLOCK softirqs".to_owned(), t.softirq_block.as_ref()),
        ("iommu map".to_owned(), Some(&t.iommu_map)),
        ("iommu unmap".to_owned(), Some(&t.iommu_unmap)),
        ("dma map".to_owned(), Some(&t.dma_map)),
        ("dma unmap".to_owned(), Some(&t.dma_unmap)),
    ] {
        match v {
            Some(v) => writeln!(w, "    {:<40}{:>10}{:>10.3}", name, v.total, v.per_io)?,
            None => unknown(w, &name)?,
        }
    }
    writeln!(
        w,
        "    {:<40}{:>10}{:>10.3}{}",
        "context switches (traced threads)",
        r.ctx_switches.total,
        r.ctx_switches.per_io,
        if t.lean { "   (getrusage: a lean trace has no sched_switch; --full)" } else { "" }
    )?;
    for (name, v) in
        [("BLOCK softirq time (us)", &t.softirq_block_ns), ("run-queue wait after wakeup (us)", &t.runq_wait_ns)]
    {
        match v {
            Some(v) => writeln!(w, "    {:<40}{:>10}{:>10}", name, us(v.total), us(v.per_io.round() as u64))?,
            None => unknown(w, name)?,
        }
    }
    Ok(())
}

/// System calls per I/O, io_uring's ring use, the hardware queues.
fn counts_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t) = (v.r, v.t);
    if !t.syscalls.is_empty() {
        // Those that ran at least once in 1000 I/Os; the JSON report has every one.
        let top: Vec<String> = t
            .syscalls
            .iter()
            .filter(|s| s.per_io >= 0.001)
            .take(8)
            .map(|s| format!("{} {:.3}", s.name, s.per_io))
            .collect();
        let more = t.syscalls.len() - top.len();
        writeln!(
            w,
            "  syscalls per I/O  {}{}",
            top.join(", "),
            if more > 0 { format!(" (+{more} more in the JSON report)") } else { String::new() }
        )?;
    }
    if let Some(u) = t.uring_rings.as_ref().filter(|u| u.submitting_enters > 0) {
        // Why the application's part is what it is: SQEs written to the ring wait there until
        // an io_uring_enter submits them, and CQEs wait until it looks.
        writeln!(
            w,
            "  io_uring rings    {:.2} SQEs per submitting io_uring_enter ({} SQEs in {} calls); {} CQEs taken from the ring, bounded",
            u.sqes_per_enter, u.sqes_submitted, u.submitting_enters, u.cqes_bounded
        )?;
    }
    if !t.hw_queues.is_empty() {
        let nvme = r.target.as_ref().and_then(|t| t.disk.as_deref()).is_some_and(|d| d.starts_with("nvme"));
        let q: Vec<String> = t
            .hw_queues
            .iter()
            .map(|q| {
                let name = if nvme { format!("qid {}", q.nvme_qid) } else { format!("q{}", q.id) };
                let kind = if q.kind == "default" { String::new() } else { format!(" ({})", q.kind) };
                format!("{name}{kind}: {}", q.ios)
            })
            .collect();
        writeln!(w, "  hardware queues  {}", q.join("  "))?;
    }
    Ok(())
}

/// The kernel's BPF stats per probe (--prog-stats).
fn probe_cost_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let (r, t) = (v.r, v.t);
    let timed: Vec<_> = t.probes.iter().filter(|p| p.run_cnt > 0).collect();
    if !timed.is_empty() {
        let ios = r.ios.max(1) as f64;
        let total: u64 = timed.iter().map(|p| p.run_time_ns).sum();
        writeln!(w, "  probe cost (kernel BPF stats): {} ns of CPU per I/O in all", (total as f64 / ios).round())?;
        for p in &timed {
            writeln!(
                w,
                "    {:<36} {:>10} runs {:>7.0} ns/run {:>8.1} ns per I/O",
                p.name,
                p.run_cnt,
                p.run_time_ns as f64 / p.run_cnt as f64,
                p.run_time_ns as f64 / ios
            )?;
        }
    }
    Ok(())
}

/// Flamegraphs and the Perfetto timeline written beside the report.
fn outputs_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let r = v.r;
    if let Some(f) = &r.flamegraphs {
        render_flame(f, w)?;
    }
    if let Some(p) = &r.perfetto {
        write!(
            w,
            "\n  perfetto timeline {} ({} I/Os, {} interrupts, {} tracks; open in ui.perfetto.dev)",
            p.path.display(),
            p.ios,
            p.irqs,
            p.tracks
        )?;
        if p.skipped > 0 || p.irqs_dropped > 0 {
            write!(
                w,
                "; NOT DRAWN: {} out-of-order records, {} interrupts beyond the memory cap",
                p.skipped, p.irqs_dropped
            )?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// The probes attached, the BPF build, the features off and why.
fn probes_section(v: &View, w: &mut dyn Write) -> io::Result<()> {
    let t = v.t;
    let mut kinds: Vec<String> = Vec::new();
    for p in t.probes.iter().filter(|p| p.attached) {
        if !kinds.contains(&p.via) {
            kinds.push(p.via.clone());
        }
    }
    let absent: Vec<&str> = t.probes.iter().filter(|p| !p.attached).map(|p| p.name.as_str()).collect();
    writeln!(
        w,
        "  probes  {} attached via {}{}",
        t.probes.iter().filter(|p| p.attached).count(),
        kinds.join("/"),
        if absent.is_empty() { String::new() } else { format!("; not attached: {}", absent.join(", ")) }
    )?;
    if t.bpf_build == "compat" {
        writeln!(
            w,
            "  BPF build: compat (no bpf_loop / BPF atomics / task storage here): a sync call's blocked time is not split by flushes and commits"
        )?;
    }
    for f in &t.features_off {
        // The user's --skip-hooks is not the kernel's doing.
        let whose = if f.why.contains("--skip-hooks") { "off by --skip-hooks" } else { "off on this kernel" };
        writeln!(w, "  {whose}: {}: {}", f.feature, f.why)?;
    }
    Ok(())
}

fn render_flame(f: &crate::flame::FlameSummary, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "\n  flamegraphs in {} (cpu-clock at {} Hz per CPU)", f.dir.display(), f.freq_hz)?;
    for (what, g, unit) in [("on-CPU", &f.oncpu, "samples"), ("off-CPU", &f.offcpu, "ns")] {
        let Some(g) = g else { continue };
        writeln!(w, "    {what:<8} {} {unit} in {} stacks: {}", g.total, g.stacks, g.svg.display())?;
        let top: Vec<String> = g
            .top_frames
            .iter()
            .take(6)
            .map(|(n, s)| format!("{} {:.0}%", n.trim_end_matches("_[k]"), s * 100.0))
            .collect();
        writeln!(w, "      widest frames: {}", top.join(", "))?;
    }
    for n in f.naming.iter().take(4) {
        writeln!(
            w,
            "    user frames named: {} of {} ({:.1}%) for {} (pid {}){}",
            n.user_named,
            n.user_frames,
            n.fraction() * 100.0,
            n.comm,
            n.tgid,
            if n.user_cut > 0 { format!("; {} stacks cut at an unmapped address", n.user_cut) } else { String::new() }
        )?;
    }
    writeln!(
        w,
        "    kernel frames named: {:.1}%{}",
        f.kernel_named_fraction * 100.0,
        if f.dropped > 0 { format!("; {} samples lost to full maps", f.dropped) } else { String::new() }
    )?;
    Ok(())
}

fn uring_flags(r: &Report) -> String {
    let Some(j) = &r.job else { return String::new() };
    let mut f = String::new();
    for (on, name) in [(j.sqpoll, "+sqpoll"), (j.iopoll, "+iopoll"), (j.fixed_bufs, "+fixedbufs")] {
        if on {
            f.push_str(name);
        }
    }
    if j.batch_submit != 1 || j.batch_complete > 1 {
        f.push_str(&format!(" batch {}/{}", j.batch_submit, j.batch_complete));
    }
    if j.fsync > 0 {
        f.push_str(&format!(" fsync/{}", j.fsync));
    }
    if j.fdatasync > 0 {
        f.push_str(&format!(" fdatasync/{}", j.fdatasync));
    }
    if j.sync {
        f.push_str(" O_SYNC");
    }
    f
}

/// Writes one phase row: name, stats, whether to show its share.
type RowFn<'a> = dyn Fn(&mut dyn Write, &str, &PhaseStats, bool) -> io::Result<()> + 'a;

/// The page-cache route's rows in the phase table: buffered reads and writes, each split into
/// on CPU, waited (blocked until woken) and run queue, which add up to the call.
fn render_page_cache_rows(pc: &crate::aggregate::PageCache, w: &mut dyn Write, row: &RowFn) -> io::Result<()> {
    for (name, split) in [("buffered reads", &pc.reads), ("buffered writes", &pc.writes), ("copies", &pc.copies)] {
        let Some(s) = split else { continue };
        row(w, name, &s.total, false)?;
        if pc.split_known {
            // A copy's own bios are mostly its source's reads; a write's are its writeback.
            let own = if name == "copies" { "  its I/O" } else { "  its writeback" };
            render_split_rows(s, None, own, w, row)?;
        } else {
            writeln!(w, "    {:<16}unknown: sched_switch is not attached via BTF here", "  split")?;
        }
    }
    writeln!(
        w,
        "      (the page cache: a call's time on CPU is lookup, copy and starting readahead; waited is blocked"
    )?;
    writeln!(w, "       until woken: a folio still being read, a lock, someone else's I/O)")?;
    Ok(())
}

/// A buffered family's sub-rows: on CPU, what it was blocked on, run queue. Rows of the wait
/// split that never happened (mean and max 0) are left out; `jflush`: the journal's own flush.
fn render_split_rows(
    s: &crate::aggregate::CacheSplit,
    jflush: Option<&PhaseStats>,
    own: &str,
    w: &mut dyn Write,
    row: &RowFn,
) -> io::Result<()> {
    let seen = |p: &PhaseStats| p.max_ns > 0;
    row(w, "  on CPU", &s.on_cpu, false)?;
    if let Some(x) = &s.waits {
        for (name, p) in
            [(own, &x.data), ("  journal", &x.journal), ("  cache flush", &x.flush), ("  throttled", &x.throttled)]
        {
            if seen(p) {
                row(w, name, p, false)?;
            }
            if name == "  journal" && seen(p) {
                if let Some(j) = jflush.filter(|j| seen(j)) {
                    row(w, "    its flush", j, false)?;
                }
            }
        }
        row(w, "  other waits", &s.waited, false)?;
    } else {
        row(w, "  waited", &s.waited, false)?;
    }
    row(w, "  run queue", &s.runq, false)
}

/// fsync / fdatasync: their own table (they are not I/Os), split like writes, and what they
/// set off on their disks.
fn render_sync_calls(sc: &crate::aggregate::SyncCalls, split_known: bool, w: &mut dyn Write) -> io::Result<()> {
    let total = sc.split.total.mean_ns.max(1) as f64;
    let row = |w: &mut dyn Write, name: &str, s: &PhaseStats, _share: bool| {
        writeln!(
            w,
            "    {name:<16}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9} {:>6.1}%",
            us(s.mean_ns),
            us(s.p50_ns),
            us(s.p90_ns),
            us(s.p99_ns),
            us(s.p999_ns),
            us(s.max_ns),
            s.mean_ns as f64 / total * 100.0
        )
    };
    writeln!(
        w,
        "\n  sync calls (us)      mean      p50      p90      p99    p99.9      max   share   (fsync {}, fdatasync {}{})",
        sc.fsync,
        sc.fdatasync,
        if sc.directories > 0 { format!("; {} on directories", sc.directories) } else { String::new() }
    )?;
    row(w, "fsync/fdatasync", &sc.split.total, false)?;
    if split_known {
        render_split_rows(&sc.split, Some(&sc.journal_flush), "  its writeback", w, &row)?;
        writeln!(
            w,
            "      (blocked time told apart by what the file's disk did meanwhile: the data bios the call queued,"
        )?;
        writeln!(w, "       a journal commit of its file system, a cache flush or FUA write outside one)")?;
    } else {
        writeln!(w, "    {:<16}unknown: sched_switch is not attached via BTF here", "  split")?;
    }
    let sum = sc.split.sum_of_means_ns();
    match sc.app_mean_ns {
        Some(app) => writeln!(
            w,
            "    {:<16}{:>9}   = {:.1}% of the generator's own mean sync latency ({} us)",
            "sum of means",
            us(sum),
            sum as f64 / app.max(1) as f64 * 100.0,
            us(app)
        )?,
        None => writeln!(
            w,
            "    {:<16}{:>9}   = {:.1}% of the traced calls' mean latency ({} us)",
            "sum of means",
            us(sum),
            sum as f64 / total * 100.0,
            us(sc.split.total.mean_ns)
        )?,
    }
    let commits = match (sc.commits, sc.commit_mean_ns) {
        (Some(n), Some(m)) => format!("{n} journal commits on their disks (mean {} us)", us(m)),
        (Some(n), None) => format!("{n} journal commits on their disks"),
        (None, _) => "journal commits unknown (no jbd2 tracepoints)".to_owned(),
    };
    writeln!(
        w,
        "  sync  {} waited through a journal commit; {} data bios ({:.1} MiB) they queued, {} cache flushes they issued",
        sc.journal_waits,
        sc.data_bios,
        sc.data_bytes as f64 / (1 << 20) as f64,
        sc.own_flushes
    )?;
    writeln!(
        w,
        "        {commits}; {} flush requests, {} FUA writes there (anyone's)",
        sc.flush_requests, sc.fua_writes
    )
}

/// The writeback of what the traced processes dirtied: whose files, why written, how long.
fn render_writeback(wb: &crate::aggregate::Writeback, w: &mut dyn Write) -> io::Result<()> {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let shares = |by: &[(String, u64)], total: u64| {
        by.iter()
            .map(|(r, b)| format!("{r} {:.1}%", *b as f64 / total.max(1) as f64 * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        w,
        "\n  writeback  the traced processes dirtied {} pages ({:.1} MiB); {:.1} MiB of their files written back while traced{}",
        wb.dirtied_pages,
        mib(wb.dirtied_pages * 4096),
        mib(wb.written_bytes),
        if wb.written_bytes > 0 { format!(": {}", shares(&wb.by_reason, wb.written_bytes)) } else { String::new() }
    )?;
    if wb.device.count > 0 {
        let block = wb
            .block
            .as_ref()
            .map_or("unknown (no request time stamps)".to_owned(), |b| format!("{} us", us(b.mean_ns)));
        writeln!(
            w,
            "             {} requests: block (allocated -> issued) {block}, device {} us mean, p99 {} us",
            wb.device.count,
            us(wb.device.mean_ns),
            us(wb.device.p99_ns)
        )?;
    }
    writeln!(
        w,
        "    {:<20} {:<18} {:<14} {:>9} {:>9} {:>8} {:>9} {:>9}  why",
        "file", "dirtied by", "io cgroup", "dirty MiB", "wrote MiB", "requests", "block us", "device us"
    )?;
    for f in wb.files.iter().take(10) {
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), us);
        writeln!(
            w,
            "    {:<20} {:<18} {:<14} {:>9.1} {:>9.1} {:>8} {:>9} {:>9}  {}",
            // No dentry: a block device's own cache (the file system's metadata buffers; its inode
            // number is the device's) or a deleted file.
            format!("{} ({})", if f.name.is_empty() { "(unnamed: metadata?)" } else { f.name.as_str() }, f.ino),
            format!("{} ({})", f.comm, f.pid),
            f.cgroup.as_deref().unwrap_or("unknown"),
            mib(f.dirtied_pages * 4096),
            mib(f.written_bytes),
            f.requests,
            opt(f.block_mean_ns),
            opt(f.device_mean_ns),
            shares(&f.by_reason, f.written_bytes)
        )?;
    }
    if wb.files.len() > 10 {
        writeln!(w, "    (+{} more files in the JSON report)", wb.files.len() - 10)?;
    }
    if wb.files_not_followed > 0 {
        writeln!(w, "    {} files not followed: the in-kernel table of 4096 was full", wb.files_not_followed)?;
    }
    if let Some(v) = &wb.vmstat {
        writeln!(
            w,
            "  dirty pages  max {}, mean {}; under writeback max {} (machine-wide, {} samples 20 ms apart; /proc/vmstat: +{} dirtied, +{} written)",
            v.dirty_max_pages, v.dirty_mean_pages, v.writeback_max_pages, v.samples, v.dirtied_pages, v.written_pages
        )?;
        writeln!(w, "               {}", v.thresholds)?;
    }
    Ok(())
}

/// What the buffered calls did to the cache and the device.
fn render_page_cache_counts(pc: &crate::aggregate::PageCache, w: &mut dyn Write) -> io::Result<()> {
    let known = |v: Option<u64>| v.map_or("unknown (no tracepoint)".to_owned(), |v| v.to_string());
    if let Some(r) = &pc.reads {
        writeln!(
            w,
            "  page cache  reads {}: {:.2}% never blocked (hits), {} waited, {} started device reads themselves",
            r.total.count,
            pc.read_hit_ratio * 100.0,
            pc.reads_waited,
            pc.reads_queued
        )?;
        writeln!(
            w,
            "              readahead started: {} on a miss (sync), {} on the marker (async)",
            known(pc.readahead_sync),
            known(pc.readahead_async)
        )?;
    }
    if let Some(wr) = &pc.writes {
        let pauses = pc.dirty_pauses.map_or("unknown (no tracepoint)".to_owned(), |n| n.to_string());
        writeln!(
            w,
            "  page cache  writes {}: {} with O_SYNC/O_DSYNC, {} dirty-throttling pauses",
            wr.total.count, pc.sync_writes, pauses
        )?;
    }
    if let Some(c) = &pc.copies {
        writeln!(
            w,
            "  page cache  copies {} (copy_file_range, sendfile): {:.1} MiB moved by the kernel",
            c.total.count,
            c.bytes as f64 / (1 << 20) as f64
        )?;
    }
    let per = match (pc.requests, pc.reads_per_request) {
        (Some(q), Some(rpr)) => format!("{q} requests ({} merged): {rpr:.1} reads per request", pc.merges.unwrap_or(0)),
        (Some(q), None) => format!("{q} requests"),
        _ => "requests unknown (no merge tracepoints)".to_owned(),
    };
    if pc.reads.is_some() || pc.bios > 0 {
        writeln!(
            w,
            "              device I/O they started: {} bios, {:.1} MiB; {per}",
            pc.bios,
            pc.bio_bytes as f64 / (1 << 20) as f64
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_microsecond_cell_never_outgrows_its_column() {
        let mut ns = 1u64;
        while ns < u64::MAX / 10 {
            for v in [ns, ns * 3, ns * 9] {
                assert!(us(v).len() <= 8, "{v} ns -> {}", us(v));
            }
            ns *= 10;
        }
        assert!(us(u64::MAX).len() <= 8, "{}", us(u64::MAX));
        assert_eq!(us(2_160_000_000_000), "2160.0s");
        assert_eq!(us(3_613_000), "3613");
    }
    use crate::timeseries::{PhaseMeans, Point, TimeSeries};

    fn point(i: u64, iops: f64, device: Option<u64>) -> Point {
        Point {
            t_ns: i * 1_000_000_000,
            dur_ns: 1_000_000_000,
            reads: iops as u64,
            writes: 0,
            iops,
            bw_bytes: iops * 4096.0,
            read_lat_mean_ns: Some(20_000),
            write_lat_mean_ns: None,
            lat_p50_ns: (iops > 0.0).then_some(18_000),
            lat_p99_ns: (iops > 0.0).then_some(40_000 + i * 1000),
            lat_max_ns: (iops > 0.0).then_some(90_000),
            phase_mean_ns: device.map(|d| PhaseMeans { device_ns: Some(d), ..PhaseMeans::default() }),
            irq_per_io: (iops > 0.0).then_some(1.0),
            ctx_per_io: None,
        }
    }

    #[test]
    fn the_series_draws_each_known_row_and_leaves_unknowns_blank() {
        let ts = TimeSeries {
            interval_ns: 1_000_000_000,
            points: vec![point(0, 1000.0, Some(10_000)), point(1, 0.0, None), point(2, 2000.0, Some(30_000))],
        };
        let mut out = Vec::new();
        render_series(&ts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("3 points of 1s, 1 with no completion (blank)"), "{text}");
        assert!(text.contains("      device   ▁ █   10.00 .. 30.00"), "{text}");
        // A phase no interval measured says so; a count nobody took gets no row.
        assert!(text.contains("      submit         unknown") && !text.contains("ctx/IO"), "{text}");
        assert!(text.contains("IRQ/IO     ▄ ▄   1.000 .. 1.000"), "{text}");
    }
}
