//! The terminal rendering of a report.

use std::io::{self, Write};

use super::Report;
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
pub fn us(ns: u64) -> String {
    let u = ns as f64 / 1e3;
    if u >= 1000.0 {
        format!("{u:.0}")
    } else if u >= 100.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

pub fn render_text(r: &Report, w: &mut impl Write) -> io::Result<()> {
    let j = &r.job;
    let t = &r.target;
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
    for warn in &r.warnings {
        writeln!(w, "  WARNING {warn}")?;
    }
    writeln!(
        w,
        "  IOPS {}   BW {:.1} MiB/s   {} I/Os in {:.2}s (read {}, write {}){}",
        si(r.iops),
        r.bw_bytes / (1 << 20) as f64,
        r.ios,
        r.runtime_ns as f64 / 1e9,
        r.reads,
        r.writes,
        if r.verified > 0 { format!(", {} blocks verified", r.verified) } else { String::new() }
    )?;
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
        None => writeln!(w, "    {:<10}{:>9}", "slat", "n/a (synchronous engine)")?,
    }
    row(w, "clat", &r.clat_ns)?;
    row(w, "lat", &r.lat_ns)?;
    writeln!(
        w,
        "  CPU     usr {:.1}%  sys {:.1}%  ({} us of CPU per I/O)",
        r.cpu.usr_pct,
        r.cpu.sys_pct,
        us(r.cpu.per_io_ns.round() as u64)
    )?;
    writeln!(
        w,
        "  ctx sw  voluntary {}  involuntary {}  ({:.3} per I/O)",
        r.ctx_switches.voluntary, r.ctx_switches.involuntary, r.ctx_switches.per_io
    )?;
    Ok(())
}

fn uring_flags(r: &Report) -> String {
    let j = &r.job;
    let mut f = String::new();
    for (on, name) in [(j.sqpoll, "+sqpoll"), (j.iopoll, "+iopoll"), (j.fixed_bufs, "+fixedbufs")] {
        if on {
            f.push_str(name);
        }
    }
    if j.batch_submit != 1 || j.batch_complete > 1 {
        f.push_str(&format!(" batch {}/{}", j.batch_submit, j.batch_complete));
    }
    f
}
