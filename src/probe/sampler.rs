//! Stacks for flamegraphs (bpf/stacks.bpf.c): on-CPU samples from a perf_event program on the
//! software cpu-clock of every CPU, off-CPU time from sched_switch. The traced-process maps are
//! the phases object's own, so both objects follow the same process tree.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use super::stacks_skel::{StacksSkel, StacksSkelBuilder};
use crate::model::{ExecMapping, RawStack, RawStacks};

/// What to sample.
#[derive(Clone, Debug)]
pub struct StackOpts {
    pub oncpu: bool,
    pub offcpu: bool,
    /// Every task on every CPU, not only the traced processes.
    pub all_cpus: bool,
    /// cpu-clock samples per second per CPU.
    pub freq_hz: u64,
}

impl Default for StackOpts {
    fn default() -> Self {
        // 97 Hz avoids lockstep with 100 Hz timers; enough for a few seconds' profile.
        Self { oncpu: true, offcpu: false, all_cpus: false, freq_hz: 997 }
    }
}

/// Fields drop in order: links, then the perf events they hang on, then the object.
pub(super) struct Sampler<'obj> {
    links: Vec<Link>,
    perf_fds: Vec<OwnedFd>,
    skel: StacksSkel<'obj>,
    freq_hz: u64,
}

/// Which processes the stacks follow, and the phases object's maps that say so.
pub(super) struct Filter<'a> {
    pub tgid: u32,
    pub tree: bool,
    pub traced_tgids: BorrowedFd<'a>,
    pub excluded_tids: BorrowedFd<'a>,
}

impl<'obj> Sampler<'obj> {
    pub fn load(store: &'obj mut MaybeUninit<OpenObject>, opts: &StackOpts, filter: &Filter) -> Result<Self> {
        let mut open = StacksSkelBuilder::default().open(store).context("opening the stacks BPF object")?;
        {
            let ro = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("stacks: no .rodata"))?;
            ro.targ_all = opts.all_cpus;
            ro.targ_tgid = filter.tgid;
            ro.targ_tree = filter.tree;
        }
        open.maps.traced_tgids.reuse_fd(filter.traced_tgids).context("sharing the traced-process map")?;
        open.maps.excluded_tids.reuse_fd(filter.excluded_tids).context("sharing the excluded-thread map")?;
        open.progs.oncpu.set_autoload(opts.oncpu);
        open.progs.offcpu_switch.set_autoload(opts.offcpu);
        super::log::clear();
        let skel = open.load().map_err(|e| {
            let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
            anyhow!("loading the stack sampler failed: {e}{why}")
        })?;
        let mut s = Sampler { skel, links: Vec::new(), perf_fds: Vec::new(), freq_hz: opts.freq_hz };
        if opts.oncpu {
            s.attach_oncpu()?;
        }
        if opts.offcpu {
            let l = s.skel.progs.offcpu_switch.attach().context("attaching the off-CPU sched_switch program")?;
            s.links.push(l);
        }
        Ok(s)
    }

    /// One software cpu-clock event per CPU, each running the sampler.
    fn attach_oncpu(&mut self) -> Result<()> {
        let ncpus = libbpf_rs::num_possible_cpus().context("counting CPUs")?;
        for cpu in 0..ncpus as i32 {
            let fd = match cpu_clock_event(cpu, self.freq_hz) {
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
            let link = self
                .skel
                .progs
                .oncpu
                .attach_perf_event(fd.as_raw_fd())
                .with_context(|| format!("attaching the sampler to cpu {cpu}"))?;
            self.links.push(link);
            self.perf_fds.push(fd);
        }
        if self.links.is_empty() {
            return Err(anyhow!("no CPU accepted a cpu-clock perf event"));
        }
        Ok(())
    }

    pub fn enabled_ptr(&mut self) -> *mut u32 {
        self.skel.maps.bss_data.as_deref_mut().map_or(std::ptr::null_mut(), |b| &mut b.enabled as *mut u32)
    }

    /// The counted stacks, with their frames looked up in the stack map.
    pub fn read(&self, maps: Vec<(u32, Vec<ExecMapping>)>) -> Result<RawStacks> {
        let mut frames: HashMap<i32, Vec<u64>> = HashMap::new();
        let mut dropped = self.skel.maps.bss_data.as_deref().map_or(0, |b| b.dropped);
        let mut read = |map: &dyn MapCore| -> Result<Vec<RawStack>> {
            let mut out = Vec::new();
            for key in map.keys() {
                let Some(val) = map.lookup(&key, MapFlags::ANY)? else { continue };
                let k = parse_key(&key);
                let mut stack = |id: i32| -> Result<Vec<u64>> {
                    if id < 0 {
                        // -EEXIST/-ENOMEM-like: the stack map was full; -EFAULT: no user stack.
                        if id != -libc::EFAULT {
                            dropped += 1;
                        }
                        return Ok(Vec::new());
                    }
                    if let Some(f) = frames.get(&id) {
                        return Ok(f.clone());
                    }
                    let raw = self.skel.maps.stackmap.lookup(&id.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
                    let f: Vec<u64> = raw
                        .chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                        .take_while(|&a| a != 0)
                        .collect();
                    frames.insert(id, f.clone());
                    Ok(f)
                };
                out.push(RawStack {
                    tgid: k.tgid,
                    pid: k.pid,
                    comm: k.comm,
                    kernel: stack(k.kstack)?,
                    user: stack(k.ustack)?,
                    value: u64::from_ne_bytes(val[..8].try_into().unwrap_or([0; 8])),
                });
            }
            Ok(out)
        };
        let oncpu = read(&self.skel.maps.oncpu_samples)?;
        let offcpu = read(&self.skel.maps.offcpu_ns)?;
        Ok(RawStacks { freq_hz: self.freq_hz, oncpu, offcpu, maps, dropped })
    }
}

struct Key {
    tgid: u32,
    pid: u32,
    kstack: i32,
    ustack: i32,
    comm: String,
}

/// `struct stack_key` of bpf/stacks.h.
fn parse_key(b: &[u8]) -> Key {
    let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
    let comm = &b[16..32.min(b.len())];
    let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
    Key {
        tgid: u32_at(0),
        pid: u32_at(4),
        kstack: u32_at(8) as i32,
        ustack: u32_at(12) as i32,
        comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
    }
}

fn cpu_clock_event(cpu: i32, freq_hz: u64) -> std::io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    let mut attr = sys::perf_event_attr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: u64::from(sys::PERF_COUNT_SW_CPU_CLOCK),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = freq_hz;
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

const _: () = assert!(std::mem::size_of::<super::stacks_skel::types::stack_key>() == 32);
