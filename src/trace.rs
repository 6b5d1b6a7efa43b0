//! `iopath trace`: the bundled generator under the probes; one library call for the CLI.

use anyhow::{bail, Result};

use crate::job::Job;
use crate::model::RawTrace;
use crate::probe::session::{self, TraceOpts};
use crate::report::Report;
use crate::sysconf::{self, SysRoots};
use crate::{aggregate, loadgen};

/// Refuses clearly when tracing cannot work, before any I/O.
pub fn check_can_trace(roots: &SysRoots) -> Result<()> {
    let caps = sysconf::effective_caps(roots);
    let sys_admin = caps & (1 << 21) != 0;
    let bpf_perfmon = caps & (1 << 39) != 0 && caps & (1 << 38) != 0;
    if !sys_admin && !bpf_perfmon {
        bail!("tracing needs root (or CAP_BPF and CAP_PERFMON): run 'sudo iopath trace ...'; 'iopath run' measures without tracing");
    }
    if !roots.sys.join("kernel/btf/vmlinux").exists() {
        bail!("this kernel has no BTF (/sys/kernel/btf/vmlinux): iopath's CO-RE probes need CONFIG_DEBUG_INFO_BTF=y. 'iopath run' still works");
    }
    Ok(())
}

/// Prepares the target untraced (file layout is not the workload), then runs the job with every
/// probe attached and returns the report and the probes' raw data.
pub fn run(job: &Job, force_raw_tp: bool, prog_stats: bool) -> Result<(Report, RawTrace)> {
    let roots = SysRoots::live();
    check_can_trace(&roots)?;
    let target = loadgen::prepare(job)?;
    let irqs = target.disk.as_deref().map(|d| sysconf::device_irqs(&roots, d)).unwrap_or_default();
    let table = sysconf::interrupts(&roots);
    let names = irqs.iter().map(|i| table.get(i).map_or(format!("irq{i}"), |(_, n)| format!("{i}:{n}"))).collect();
    let opts = TraceOpts {
        // SAFETY: getpid/gettid have no preconditions.
        tgid: unsafe { libc::getpid() } as u32,
        exclude_tid: unsafe { libc::gettid() } as u32,
        irqs,
        force_raw_tp,
        prog_stats,
    };
    let (outcome, raw) = session::trace(&opts, || loadgen::run_prepared(job, target))?;
    let summary = aggregate::summarize(&raw, outcome.stats.ios());
    Ok((Report::from_run(job, outcome).with_trace(summary, names), raw))
}
