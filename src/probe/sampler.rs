//! Stacks for flamegraphs (bpf/stacks.bpf.c): on-CPU samples from a perf_event program on the
//! software cpu-clock of every CPU, off-CPU time from sched_switch. Both are rows of the hook
//! table (`perf_event:cpu-clock`, the off-CPU `sched:sched_switch`): the plan decides them, the
//! session loads and attaches them as it does every hook (probe::load), doctor's dry run too.
//! The traced-process maps are the phases object's own, so both objects follow the same process
//! tree.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::{MapCore, MapFlags, OpenObject};

use super::stacks_skel::{OpenStacksSkel, StacksSkel, StacksSkelBuilder};
use crate::model::{ExecMapping, RawStack, RawStacks};

/// The loaded sampler; its links are the session's (load::attach_per_plan, from the hook table's
/// `perf_event:cpu-clock` and off-CPU `sched:sched_switch` rows).
pub(super) struct Sampler<'obj> {
    skel: StacksSkel<'obj>,
    freq_hz: u64,
}

/// Which processes the stacks follow, and the phases object's maps that say so.
pub(super) struct Filter<'a> {
    /// Every task on every CPU.
    pub all: bool,
    pub tgid: u32,
    pub tree: bool,
    pub traced_tgids: BorrowedFd<'a>,
    pub excluded_tids: BorrowedFd<'a>,
}

/// The stacks object opened with its filter (load::load_per_plan sets each program's autoload
/// from the plan).
pub(super) fn open<'obj>(store: &'obj mut MaybeUninit<OpenObject>, filter: &Filter) -> Result<OpenStacksSkel<'obj>> {
    let mut open = StacksSkelBuilder::default().open(store).context("opening the stacks BPF object")?;
    let ro = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("stacks: no .rodata"))?;
    ro.targ_all = filter.all;
    ro.targ_tgid = filter.tgid;
    ro.targ_tree = filter.tree;
    open.maps.traced_tgids.reuse_fd(filter.traced_tgids).context("sharing the traced-process map")?;
    open.maps.excluded_tids.reuse_fd(filter.excluded_tids).context("sharing the excluded-thread map")?;
    Ok(open)
}

impl<'obj> Sampler<'obj> {
    pub fn new(skel: StacksSkel<'obj>, freq_hz: u64) -> Self {
        Sampler { skel, freq_hz }
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

const _: () = assert!(std::mem::size_of::<super::stacks_skel::types::stack_key>() == 32);
