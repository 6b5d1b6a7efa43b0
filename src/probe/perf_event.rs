//! Perf events for BPF programs: a software cpu-clock on each CPU, the on-CPU sampler's (the hook
//! table's `perf_event:cpu-clock`) and the doctor's perf_event trial.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::{Link, ProgramMut};

/// `prog` attached to a cpu-clock event at `hz` on every online CPU: one link each. A link owns
/// its event's fd (libbpf closes it with the link: `bpf_link_perf_detach`), so an fd is handed
/// over only once its attach succeeded; one kept beside the link too was closed twice.
pub fn attach_cpu_clock(prog: &ProgramMut<'_>, hz: u64) -> Result<Vec<Link>> {
    let ncpus = libbpf_rs::num_possible_cpus().context("counting CPUs")?;
    let mut links = Vec::new();
    for cpu in 0..ncpus as i32 {
        let fd = match cpu_clock_event(cpu, hz) {
            Ok(fd) => fd,
            // A possible but offline CPU.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => continue,
            Err(e) => {
                return Err(anyhow!(
                    "perf_event_open(cpu-clock, cpu {cpu}) failed: {e}; kernel.perf_event_paranoid or a \
                     missing CAP_PERFMON can forbid it"
                ))
            }
        };
        let link = prog.attach_perf_event(fd.as_raw_fd()).with_context(|| format!("attaching to cpu {cpu}"))?;
        // The link closes it now.
        let _ = fd.into_raw_fd();
        links.push(link);
    }
    if links.is_empty() {
        return Err(anyhow!("no CPU accepted a cpu-clock perf event"));
    }
    Ok(links)
}

fn cpu_clock_event(cpu: i32, hz: u64) -> std::io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    let mut attr = sys::perf_event_attr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: u64::from(sys::PERF_COUNT_SW_CPU_CLOCK),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = hz;
    attr.set_freq(1);
    // SAFETY: a plain syscall with a fully initialised attr; the fd is owned from here on.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const _,
            -1i32,
            cpu,
            -1i32,
            sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
