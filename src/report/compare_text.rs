//! The terminal rendering of `iopath compare`.

use std::io::{self, Write};

use crate::compare::{Change, Comparison};

fn pct(c: &Change) -> String {
    c.pct.map_or_else(|| "n/a".to_owned(), |p| format!("{p:+.1}%"))
}

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1000.0)
}

pub fn render(c: &Comparison, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "iopath compare")?;
    writeln!(w, "  before  {}", c.before)?;
    writeln!(w, "  after   {}", c.after)?;
    writeln!(w, "\n  verdict: {}\n", c.verdict)?;
    writeln!(w, "  {:<24}{:>12}{:>12}{:>10}", "", "before", "after", "change")?;
    writeln!(w, "  {:<24}{:>12.0}{:>12.0}{:>10}", "IOPS", c.iops.before, c.iops.after, pct(&c.iops))?;
    if let Some(cpu) = &c.cpu_per_io_ns {
        writeln!(w, "  {:<24}{:>12}{:>12}{:>10}", "CPU per I/O (us)", us(cpu.before), us(cpu.after), pct(cpu))?;
    }
    let (m, p) = (&c.latency_mean_ns, &c.latency_p99_ns);
    writeln!(w, "  {:<24}{:>12}{:>12}{:>10}", "latency mean (us)", us(m.before), us(m.after), pct(m))?;
    writeln!(w, "  {:<24}{:>12}{:>12}{:>10}", "latency p99 (us)", us(p.before), us(p.after), pct(p))?;
    if !c.phases.is_empty() {
        writeln!(
            w,
            "\n  {:<12}{:>11}{:>11}{:>10}{:>10}{:>10}{:>9}  judgement",
            "phase (us)", "before", "after", "d mean", "d p50", "d p99", "noise"
        )?;
        // NVMe sub-phases sit indented under the phases they are part of.
        let top = c.phases.iter().map(|ph| ("", ph));
        for (indent, ph) in top.chain(c.nvme_phases.iter().map(|ph| ("  ", ph))) {
            writeln!(
                w,
                "  {:<12}{:>11}{:>11}{:>10}{:>10}{:>10}{:>9}  {}",
                format!("{indent}{}", ph.phase.replace('_', " ")),
                us(ph.before.mean),
                us(ph.after.mean),
                format!("{:+.2}", ph.delta_mean_ns / 1000.0),
                format!("{:+.2}", ph.delta_p50_ns / 1000.0),
                format!("{:+.2}", ph.delta_p99_ns / 1000.0),
                us(ph.noise_ns),
                ph.judgement
            )?;
        }
        if c.unreconciled.is_empty() {
            writeln!(w, "  dominant phase: {}", c.dominant_phase)?;
        } else {
            writeln!(w, "  dominant phase: not named: the phases do not reconcile")?;
            for u in &c.unreconciled {
                writeln!(w, "    {u}")?;
            }
        }
    }
    if !c.per_io.is_empty() {
        writeln!(w, "\n  {:<24}{:>12}{:>12}", "per I/O", "before", "after")?;
        for (k, v) in &c.per_io {
            writeln!(w, "  {:<24}{:>12.3}{:>12.3}", k.replace('_', " "), v.before, v.after)?;
        }
    }
    if c.config_changes.is_empty() {
        writeln!(w, "\n  configuration: no differences")?;
    } else {
        writeln!(w, "\n  configuration changes:")?;
        for x in &c.config_changes {
            writeln!(w, "    {}: {} -> {}", x.key, x.before, x.after)?;
        }
    }
    if !c.config_one_side_only.is_empty() {
        let n = c.config_one_side_only.len();
        let shown: Vec<&str> = c.config_one_side_only.iter().take(6).map(String::as_str).collect();
        let more = if n > shown.len() { format!(" and {} more", n - shown.len()) } else { String::new() };
        writeln!(w, "  not compared (recorded on one side only, unknown on the other): {}{more}", shown.join(", "))?;
    }
    if !c.frames_grew.is_empty() || !c.frames_shrank.is_empty() || !c.frames_new.is_empty() {
        writeln!(w, "\n  on-CPU frames (inclusive share of samples):")?;
        for f in c.frames_grew.iter().take(8) {
            writeln!(w, "    grew    {:<48} {:>6.1}% -> {:>5.1}%", f.frame, f.before * 100.0, f.after * 100.0)?;
        }
        for f in c.frames_new.iter().take(8) {
            writeln!(w, "    new     {:<48} {:>6.1}% -> {:>5.1}%", f.frame, f.before * 100.0, f.after * 100.0)?;
        }
        for f in c.frames_shrank.iter().take(5) {
            writeln!(w, "    shrank  {:<48} {:>6.1}% -> {:>5.1}%", f.frame, f.before * 100.0, f.after * 100.0)?;
        }
    }
    if let Some(d) = &c.diff_flamegraph {
        writeln!(w, "  differential flamegraph: {}", d.display())?;
    }
    if c.causes.len() > 1 {
        writeln!(w, "\n  likely causes, most likely first:")?;
        for x in &c.causes {
            writeln!(w, "    - {x}")?;
        }
    }
    Ok(())
}
