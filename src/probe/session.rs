//! A tracing session: open -> set rodata -> load -> attach every hook this kernel has -> enable
//! -> run the workload -> disable -> read the maps -> detach. The workload runs inside `trace`'s
//! closure, so links cannot outlive it and nothing stays attached after an error.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags};

use super::collect::Collectors;
use super::hooks::Obj;
use super::live::{prog_info, LiveMaps};
use super::load::{attach_per_plan, load_all, load_stacks, obj_stores, plan_for, Attached, Stores};
use super::options::{Lean, TraceOpts};
use crate::model::{BpfHist, ProbeStatus, RawTrace, NR_COUNTERS, NR_PHASES};

/// The slot_clock map, mapped into this process for the generator (see loadgen::slot_clock);
/// unmapped on drop, after the clock is cleared.
struct SlotClockMap {
    ptr: *mut libc::c_void,
    len: usize,
}

impl SlotClockMap {
    fn map(fd: i32, slots: u32) -> Result<SlotClockMap> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (slots as usize * 8).div_ceil(page) * page;
        // SAFETY: a shared read-write mapping of a BPF_F_MMAPABLE array map's values.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(anyhow!("mapping the slot_clock map: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `slots` u64 live at ptr until Drop, which clears the clock first.
        unsafe { crate::loadgen::slot_clock::install(ptr.cast(), slots as usize) };
        Ok(SlotClockMap { ptr, len })
    }
}

impl Drop for SlotClockMap {
    fn drop(&mut self) {
        crate::loadgen::slot_clock::clear();
        // SAFETY: unmapping what map() mapped; nothing reads it after the clear above.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// Attaches, runs `workload`, and returns its result with what the probes saw.
pub fn trace<R>(opts: &TraceOpts, workload: impl FnOnce() -> Result<R>) -> Result<(R, RawTrace)> {
    trace_live(opts, |_| workload())
}

/// What the probes must know before they run: iopath's own threads, the traced process tree,
/// the target disk's interrupt vectors.
fn seed_maps(
    phases: &super::phases_skel::PhasesSkel<'_>,
    counts: &super::counts_skel::CountsSkel<'_>,
    opts: &TraceOpts,
) -> Result<()> {
    for tid in &opts.exclude_tids {
        phases
            .maps
            .excluded_tids
            .update(&tid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("excluding iopath's threads")?;
    }
    // Never iopath itself: `--pid 1`'s tree holds every process, iopath's own among them (its
    // stderr writes were the whole report).
    for tgid in opts.tree.iter().filter(|&&t| t != std::process::id()) {
        phases
            .maps
            .traced_tgids
            .update(&tgid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("seeding the traced processes")?;
    }
    for irq in &opts.irqs {
        counts.maps.irq_filter.update(&irq.to_ne_bytes(), &[1u8], MapFlags::ANY).context("filling the IRQ filter")?;
    }
    Ok(())
}

/// Each attached program's run count and time (with --prog-stats) and recursion misses.
fn fill_prog_stats(probes: &mut [ProbeStatus]) {
    for p in probes.iter_mut().filter(|p| p.attached) {
        if let Some(info) = prog_info(p.prog_fd) {
            p.recursion_misses = info.recursion_misses;
            p.run_cnt = info.run_cnt;
            p.run_time_ns = info.run_time_ns;
        }
    }
}

/// The dirtiers' cgroups by path, while the directories exist.
fn name_cgroups(files: &mut [crate::model::RawWbFile]) {
    let roots = crate::sysconf::SysRoots::live();
    let mut paths = std::collections::HashMap::new();
    for f in files.iter_mut().filter(|f| f.cgroup_id != 0) {
        f.cgroup =
            paths.entry(f.cgroup_id).or_insert_with(|| crate::sysconf::cgroup_path_of_id(&roots, f.cgroup_id)).clone();
    }
}

/// `trace`, the workload given the maps it may read while it runs (`iopath top`).
pub fn trace_live<R>(opts: &TraceOpts, workload: impl FnOnce(LiveMaps) -> Result<R>) -> Result<(R, RawTrace)> {
    let (_tfs, mut plan) = plan_for(opts)?;
    let ksyms = super::kallsyms::lookup(&super::hooks::symbols());
    let mut stores = Stores::default();
    let (mut phases, mut counts) = load_all(&mut plan, opts, &ksyms, &mut stores)?;
    seed_maps(&phases, &counts, opts)?;
    let mut stack_stores = obj_stores();
    let stacks = match plan.samples() {
        true => Some(load_stacks(&mut plan, opts, &phases, &mut stack_stores)?),
        false => None,
    };
    let mut objs = vec![(Obj::Phases, phases.object()), (Obj::Counts, counts.object())];
    objs.extend(stacks.as_ref().map(|s| (Obj::Stacks, s.object())));
    let Attached { mut links, mut probes, per_cpu } = attach_per_plan(&mut plan, &objs)?;
    drop(objs);
    sampling_as_asked(&plan, opts)?;
    let issue_checker = issue_checker(opts, &mut phases, &probes, &mut links);
    let features_off: Vec<crate::model::FeatureOff> = plan
        .off()
        .into_iter()
        .map(|(feature, why)| crate::model::FeatureOff { feature: feature.into(), why })
        .collect();

    // SAFETY: plain syscall wrapper; the returned fd keeps stats on until closed.
    let stats_fd = if opts.prog_stats {
        unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) }
    } else {
        -1
    };
    // The `enabled` flags, written through raw pointers so the ring buffer (which borrows the
    // maps) and the switch can coexist.
    let mut sampler = stacks.map(|s| super::sampler::Sampler::new(s, plan.sample_hz));
    let traced_tgids = libbpf_rs::MapHandle::try_from(&phases.maps.traced_tgids)?;
    let enabled: [*mut u32; 3] = [
        phases.maps.bss_data.as_deref_mut().map_or(std::ptr::null_mut(), |b| &mut b.enabled as *mut u32),
        counts.maps.bss_data.as_deref_mut().map_or(std::ptr::null_mut(), |b| &mut b.enabled as *mut u32),
        sampler.as_mut().map_or(std::ptr::null_mut(), |s| s.enabled_ptr()),
    ];
    let set_enabled = |on: u32| {
        for p in enabled.iter().filter(|p| !p.is_null()) {
            // SAFETY: the pointers are into the mmaped .bss of skeletons that outlive this call.
            unsafe { std::ptr::write_volatile(*p, on) };
        }
    };
    let posted = match opts.clock_slots {
        0 => None,
        n => Some(SlotClockMap::map(phases.maps.slot_clock.as_fd().as_raw_fd(), n)?),
    };
    let collectors = Collectors {
        opts,
        sampling: sampler.is_some(),
        traced_tgids: &traced_tgids,
        excluded_tids: &phases.maps.excluded_tids,
        events: &phases.maps.events,
        irq_stamps: &counts.maps.irq_stamps,
        series_fds: super::series::Fds {
            hists: phases.maps.hists.as_fd().as_raw_fd(),
            phase_counters: phases.maps.counters.as_fd().as_raw_fd(),
            count_counters: counts.maps.counters.as_fd().as_raw_fd(),
            routes: phases.maps.routes.as_fd().as_raw_fd(),
        },
    };
    let live = LiveMaps {
        top: phases.maps.top.as_fd().as_raw_fd(),
        stamp_rows: -1,
        phase_counters: collectors.series_fds.phase_counters,
        count_counters: collectors.series_fds.count_counters,
        stamps_counters: -1,
        hooks: probes.iter().map(|p| (p.name.clone(), p.attached, p.via.clone())).collect(),
        progs: probes.iter().filter(|p| p.attached && p.prog_fd > 0).map(|p| (p.name.clone(), p.prog_fd)).collect(),
        ios: phases.maps.ios.as_fd().as_raw_fd(),
        links: phases.maps.links.as_fd().as_raw_fd(),
        ios_held: phases.maps.ios_held.as_fd().as_raw_fd(),
        links_held: phases.maps.links_held.as_fd().as_raw_fd(),
    };
    let (result, got) = collectors.run(set_enabled, || {
        let Some(c) = issue_checker else { return (workload(live), None) };
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let h = s.spawn(|| c.run(&stop));
            let r = workload(live);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            (r, h.join().ok())
        })
    })?;
    let (result, issue_stamps) = result;
    drop(posted);

    fill_prog_stats(&mut probes);
    if stats_fd >= 0 {
        // SAFETY: closing the fd bpf_enable_stats returned.
        unsafe { libc::close(stats_fd) };
    }
    let mut raw = read_raw(&phases, &counts, probes)?;
    raw.lean = opts.lean != Lean::Off;
    raw.issue_stamps = issue_stamps;
    raw.features_off = features_off;
    raw.bpf_build = plan.flavour.key().into();
    name_cgroups(&mut raw.writeback);
    let maps = got.into_raw(&mut raw);
    raw.active_ns = active_span(&phases.maps.spans)?;
    if let Some(smp) = &sampler {
        raw.stacks = Some(smp.read(maps)?);
    }
    drop(links);
    drop(per_cpu);
    Ok((result?, raw))
}

/// The stacks asked for (--flamegraph, --offcpu) are sampled, or the trace stops with the
/// kernel's reason: a flamegraph run without its stacks has nothing to show.
fn sampling_as_asked(plan: &super::plan::Plan, opts: &TraceOpts) -> Result<()> {
    use super::hooks::Feature;
    let Some(so) = &opts.stacks else { return Ok(()) };
    for (asked, f) in [(so.oncpu, Feature::OnCpuStacks), (so.offcpu, Feature::OffCpuStacks)] {
        let s = plan.state(f);
        if asked && !s.on {
            let how = if s.unused { "were left out" } else { "cannot be sampled here" };
            return Err(anyhow!("the {} {how}: {}", s.title, s.why.as_deref().unwrap_or("not loaded")));
        }
    }
    Ok(())
}

/// A lean trace's issue-stamp checker (probe::issue_stamps), given block_rq_issue's link: None
/// where the trace keeps the hook (not lean, `--issue-hook`) or the hook is not attached.
fn issue_checker(
    opts: &TraceOpts,
    phases: &mut super::phases_skel::PhasesSkel<'_>,
    probes: &[ProbeStatus],
    links: &mut Vec<libbpf_rs::Link>,
) -> Option<super::issue_stamps::Checker> {
    if !opts.issue_stamps() {
        return None;
    }
    // As open_phases decided (the NVMe split keeps the hook).
    if !phases.maps.rodata_data.as_ref().is_some_and(|ro| ro.targ_issue_stamps) {
        return None;
    }
    // links[i] is probes[i]'s for the attached ones (attach_per_plan pushes them together).
    let i = probes.iter().position(|p| p.measures(crate::hook_names::BLOCK_RQ_ISSUE))?;
    if i >= links.len() {
        return None;
    }
    let link = links.remove(i);
    let p = &probes[i];
    let bss = phases.maps.bss_data.as_deref_mut()?;
    let flags = super::issue_stamps::Flags {
        checking: &mut bss.issue_checking as *mut u32,
        stamps: &mut bss.issue_stamps as *mut u32,
        detached: &mut bss.issue_detached as *mut u32,
    };
    Some(super::issue_stamps::Checker {
        prog: super::issue_stamps::IssueProg { fd: p.prog_fd, btf: p.via == "tp_btf" },
        link: Some(Box::new(link)),
        flags,
        queues: libbpf_rs::MapHandle::try_from(&phases.maps.issue_queues).ok()?,
        checks_fd: phases.maps.issue_checks.as_fd().as_raw_fd(),
        counters_fd: phases.maps.counters.as_fd().as_raw_fd(),
        unstamped_counter: crate::model::Counter::IssueUnstamped as u32,
    })
}

/// The traced I/O's active span: the earliest submission and the latest reap over the CPUs'
/// `spans` (0: nothing closed).
fn active_span(spans: &impl MapCore) -> Result<u64> {
    let per_cpu = spans.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
    Ok(span_of(per_cpu.iter().map(|v| (super::series::word(v, 0), super::series::word(v, 1)))))
}

/// (first, last) per CPU -> last - first over the CPUs that closed anything.
fn span_of(per_cpu: impl Iterator<Item = (u64, u64)>) -> u64 {
    let (mut first, mut last) = (u64::MAX, 0);
    for (f, l) in per_cpu.filter(|&(f, _)| f != 0) {
        first = first.min(f);
        last = last.max(l);
    }
    last.saturating_sub(first)
}

fn sum_percpu_u64(vals: &[Vec<u8>]) -> u64 {
    vals.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))).sum()
}

/// Slots of a bpf/slots.bpf.h table still holding a key (its first u64; 0 = free).
fn occupied_slots(map: &dyn MapCore) -> Result<u64> {
    let mut n = 0;
    for (_, value) in map.lookup_batch(4096, MapFlags::ANY, MapFlags::ANY)? {
        n += u64::from(value.get(..8).is_some_and(|k| k.iter().any(|&b| b != 0)));
    }
    Ok(n)
}

/// The files the traced processes dirtied (`wb_files`), largest writeback first.
fn read_wb_files(phases: &super::phases_skel::PhasesSkel<'_>) -> Result<Vec<crate::model::RawWbFile>> {
    use super::phases_skel::types::wb_file;
    let text = |b: &[i8]| {
        let b: Vec<u8> = b.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
        crate::untrusted::visible(&String::from_utf8_lossy(&b)).into_owned()
    };
    let mut out = Vec::new();
    for key in phases.maps.wb_files.keys() {
        let Some(v) = phases.maps.wb_files.lookup(&key, MapFlags::ANY)? else { continue };
        anyhow::ensure!(v.len() == std::mem::size_of::<wb_file>(), "wb_file: {} bytes from the map", v.len());
        // SAFETY: the map's value is a `struct wb_file` of the size checked above (plain data).
        let f: wb_file = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
        out.push(crate::model::RawWbFile {
            ino: f.ino,
            dev: format!("{}:{}", f.dev >> 20, f.dev & 0xfffff),
            tgid: f.tgid,
            comm: text(&f.comm),
            name: text(&f.name),
            cgroup_id: f.cgroup,
            cgroup: None,
            dirtied_pages: f.dirtied,
            bytes: f.bytes.to_vec(),
            bios: f.bios,
            requests: f.rqs,
            block_ns: f.block_ns,
            device_ns: f.device_ns,
        });
    }
    // Most written back first, then most dirtied (a short trace may write back nothing).
    out.sort_by_key(|f| std::cmp::Reverse((f.bytes.iter().sum::<u64>(), f.dirtied_pages)));
    Ok(out)
}

fn read_raw(
    phases: &super::phases_skel::PhasesSkel<'_>,
    counts: &super::counts_skel::CountsSkel<'_>,
    probes: Vec<ProbeStatus>,
) -> Result<RawTrace> {
    let mut raw = RawTrace { probes, ..Default::default() };
    for i in 0..NR_PHASES as u32 {
        let per_cpu = phases.maps.hists.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let mut h = BpfHist::default();
        for bytes in &per_cpu {
            h.add_raw(bytes);
        }
        raw.phases.push(h);
    }
    for i in 0..NR_COUNTERS as u32 {
        let a = phases.maps.counters.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        let b = counts.maps.counters.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        raw.counters.push(sum_percpu_u64(&a) + sum_percpu_u64(&b));
    }
    for q in 0..crate::model::HW_QUEUE_TYPES * crate::model::HW_QUEUE_IDS {
        let v =
            sum_percpu_u64(&phases.maps.hw_queues.lookup_percpu(&q.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default());
        if v > 0 {
            raw.hw_queues.push((q, v));
        }
    }
    // Bios whose request's completion was never seen: their link to the I/O is still held (in
    // flight when the trace stopped, or an end no hook saw). It read 0 whatever happened since
    // routes replaced the in-flight map (issue #45).
    raw.stuck_inflight = occupied_slots(&phases.maps.links)?;
    // I/Os claimed and never closed: still in flight when the workload ended, or their end was
    // not seen.
    raw.stuck_done = occupied_slots(&phases.maps.ios)?;
    raw.routes = (0..crate::model::NR_ROUTE_KINDS as u32 * 2)
        .map(|k| -> Result<u64> {
            Ok(sum_percpu_u64(&phases.maps.routes.lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default()))
        })
        .collect::<Result<_>>()?;
    raw.writeback = read_wb_files(phases)?;
    for nr in 0..crate::model::NR_SYSCALL_SLOTS as u32 {
        let v =
            sum_percpu_u64(&phases.maps.syscalls.lookup_percpu(&nr.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default());
        if v > 0 {
            raw.syscalls.push((nr, v));
        }
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::span_of;

    #[test]
    fn active_span_is_earliest_first_to_latest_last_over_cpus_that_closed() {
        // CPU 1 closed nothing (0, 0): it must not pull the start to 0.
        assert_eq!(span_of([(100, 900), (0, 0), (50, 700)].into_iter()), 850);
        assert_eq!(span_of([(0, 0), (0, 0)].into_iter()), 0);
    }
}
