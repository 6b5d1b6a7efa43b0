//! A tracing session: open -> set rodata -> load -> attach every hook this kernel has -> enable
//! -> run the workload -> disable -> read the maps -> detach. The workload runs inside `trace`'s
//! closure, so links cannot outlive it and nothing stays attached after an error.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{anyhow, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, ProgramMut, TracepointCategory};

use super::counts_skel::CountsSkelBuilder;
use super::phases_skel::PhasesSkelBuilder;
use super::tracefs::Tracefs;
use crate::model::{BpfHist, ProbeStatus, RawTrace, NR_COUNTERS, NR_PHASES};

/// What to trace.
#[derive(Clone, Debug, Default)]
pub struct TraceOpts {
    /// Process to trace (0 = all).
    pub tgid: u32,
    /// Thread whose context switches do not count (the tracer's own, when it runs the generator).
    pub exclude_tid: u32,
    /// IRQ numbers of the target device's vectors.
    pub irqs: Vec<u32>,
    /// raw_tp instead of tp_btf for the tracepoint programs.
    pub force_raw_tp: bool,
    /// Have the kernel time every program run (BPF_ENABLE_STATS): what each probe costs.
    pub prog_stats: bool,
    /// Trace these processes and every process they fork (instead of `tgid` alone).
    pub tree: Vec<u32>,
}

/// One hook: its name in reports, whether tracing is pointless without it, and the program
/// chosen for it on this kernel (None: the kernel lacks the tracepoint).
struct Hook<'a> {
    name: &'static str,
    required: bool,
    prog: Option<&'a ProgramMut<'a>>,
    /// For generic `SEC("tracepoint")` programs: where to attach.
    tracepoint: Option<(&'static str, &'static str)>,
}

/// Attaches, runs `workload`, and returns its result with what the probes saw.
pub fn trace<R>(opts: &TraceOpts, workload: impl FnOnce() -> Result<R>) -> Result<(R, RawTrace)> {
    let tfs = Tracefs::ensure()?;
    let has = |g: &str, n: &str| tfs.has_event(g, n);
    let ksyms = super::kallsyms::lookup(&["iomap_dio_bio_end_io", "blkdev_bio_end_io", "blkdev_bio_end_io_async"]);
    let btf = !opts.force_raw_tp;
    let uring_req = has("io_uring", "io_uring_submit_req");
    let uring_sqe = !uring_req && has("io_uring", "io_uring_submit_sqe");
    let uring_complete = has("io_uring", "io_uring_complete");
    let nvme = has("nvme", "nvme_setup_cmd");
    let sys = |n: &str| has("syscalls", n);

    let mut p_store = MaybeUninit::uninit();
    let mut p_open = PhasesSkelBuilder::default().open(&mut p_store).context("opening the phases BPF object")?;
    {
        let ro = p_open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("phases: no .rodata"))?;
        ro.targ_tgid = opts.tgid;
        ro.targ_exclude_tid = opts.exclude_tid;
        ro.targ_tree = !opts.tree.is_empty();
        ro.targ_iomap_end_io = ksyms["iomap_dio_bio_end_io"];
        ro.targ_blkdev_end_io = ksyms["blkdev_bio_end_io"];
        ro.targ_blkdev_end_io_async = ksyms["blkdev_bio_end_io_async"];
        let p = &mut p_open.progs;
        p.submit_req.set_autoload(btf && uring_req);
        p.submit_req_raw.set_autoload(!btf && uring_req);
        p.submit_sqe.set_autoload(uring_sqe);
        p.uring_complete.set_autoload(btf && uring_complete);
        p.uring_complete_raw.set_autoload(!btf && uring_complete);
        p.bio_queue.set_autoload(btf);
        p.bio_queue_raw.set_autoload(!btf);
        p.rq_issue.set_autoload(btf);
        p.rq_issue_raw.set_autoload(!btf);
        p.rq_complete.set_autoload(btf);
        p.rq_complete_raw.set_autoload(!btf);
        p.nvme_setup_cmd.set_autoload(nvme);
        p.sched_switch.set_autoload(btf);
        p.process_fork.set_autoload(!opts.tree.is_empty());
        p.sched_switch_raw.set_autoload(!btf);
        p.uring_enter.set_autoload(sys("sys_enter_io_uring_enter"));
        p.uring_exit.set_autoload(sys("sys_exit_io_uring_enter"));
        p.aio_submit_enter.set_autoload(sys("sys_enter_io_submit"));
        p.aio_submit_exit.set_autoload(sys("sys_exit_io_submit"));
        p.aio_getevents_enter.set_autoload(sys("sys_enter_io_getevents"));
        p.aio_getevents_exit.set_autoload(sys("sys_exit_io_getevents"));
        p.aio_pgetevents_enter.set_autoload(sys("sys_enter_io_pgetevents"));
        p.aio_pgetevents_exit.set_autoload(sys("sys_exit_io_pgetevents"));
    }
    super::log::clear();
    let mut phases = p_open.load().map_err(|e| load_error("phases", e))?;
    for tgid in &opts.tree {
        phases
            .maps
            .traced_tgids
            .update(&tgid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .context("seeding the traced processes")?;
    }

    let dma_map = ["dma_map_phys", "dma_map_page"].into_iter().find(|n| has("dma", n));
    let dma_unmap = ["dma_unmap_phys", "dma_unmap_page"].into_iter().find(|n| has("dma", n));
    let mut c_store = MaybeUninit::uninit();
    let mut c_open = CountsSkelBuilder::default().open(&mut c_store).context("opening the counts BPF object")?;
    {
        let p = &mut c_open.progs;
        p.irq_entry.set_autoload(btf);
        p.irq_entry_raw.set_autoload(!btf);
        p.softirq_entry.set_autoload(btf);
        p.softirq_exit.set_autoload(btf);
        p.softirq_entry_raw.set_autoload(!btf);
        p.softirq_exit_raw.set_autoload(!btf);
        p.iommu_map.set_autoload(has("iommu", "map"));
        p.iommu_unmap.set_autoload(has("iommu", "unmap"));
        p.dma_map.set_autoload(dma_map.is_some());
        p.dma_unmap.set_autoload(dma_unmap.is_some());
    }
    super::log::clear();
    let mut counts = c_open.load().map_err(|e| load_error("counts", e))?;
    for irq in &opts.irqs {
        counts.maps.irq_filter.update(&irq.to_ne_bytes(), &[1u8], MapFlags::ANY).context("filling the IRQ filter")?;
    }

    let (pp, cp) = (&phases.progs, &counts.progs);
    let hooks: Vec<Hook> = vec![
        Hook {
            name: "syscalls:sys_enter_io_uring_enter",
            required: false,
            prog: sys("sys_enter_io_uring_enter").then_some(&pp.uring_enter),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_exit_io_uring_enter",
            required: false,
            prog: sys("sys_exit_io_uring_enter").then_some(&pp.uring_exit),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_enter_io_submit",
            required: false,
            prog: sys("sys_enter_io_submit").then_some(&pp.aio_submit_enter),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_exit_io_submit",
            required: false,
            prog: sys("sys_exit_io_submit").then_some(&pp.aio_submit_exit),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_enter_io_getevents",
            required: false,
            prog: sys("sys_enter_io_getevents").then_some(&pp.aio_getevents_enter),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_exit_io_getevents",
            required: false,
            prog: sys("sys_exit_io_getevents").then_some(&pp.aio_getevents_exit),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_enter_io_pgetevents",
            required: false,
            prog: sys("sys_enter_io_pgetevents").then_some(&pp.aio_pgetevents_enter),
            tracepoint: None,
        },
        Hook {
            name: "syscalls:sys_exit_io_pgetevents",
            required: false,
            prog: sys("sys_exit_io_pgetevents").then_some(&pp.aio_pgetevents_exit),
            tracepoint: None,
        },
        Hook {
            name: if uring_sqe { "io_uring:io_uring_submit_sqe" } else { "io_uring:io_uring_submit_req" },
            required: false,
            prog: if uring_sqe {
                Some(&pp.submit_sqe)
            } else if !uring_req {
                None
            } else if btf {
                Some(&pp.submit_req)
            } else {
                Some(&pp.submit_req_raw)
            },
            tracepoint: None,
        },
        Hook {
            name: "io_uring:io_uring_complete",
            required: false,
            prog: uring_complete.then_some(if btf { &pp.uring_complete } else { &pp.uring_complete_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_bio_queue",
            required: true,
            prog: Some(if btf { &pp.bio_queue } else { &pp.bio_queue_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_rq_issue",
            required: true,
            prog: Some(if btf { &pp.rq_issue } else { &pp.rq_issue_raw }),
            tracepoint: None,
        },
        Hook {
            name: "block:block_rq_complete",
            required: true,
            prog: Some(if btf { &pp.rq_complete } else { &pp.rq_complete_raw }),
            tracepoint: None,
        },
        Hook {
            name: "sched:sched_process_fork",
            required: false,
            prog: (!opts.tree.is_empty()).then_some(&pp.process_fork),
            tracepoint: None,
        },
        Hook {
            name: "nvme:nvme_setup_cmd",
            required: false,
            prog: nvme.then_some(&pp.nvme_setup_cmd),
            tracepoint: None,
        },
        Hook {
            name: "irq:irq_handler_entry",
            required: false,
            prog: Some(if btf { &cp.irq_entry } else { &cp.irq_entry_raw }),
            tracepoint: None,
        },
        Hook {
            name: "irq:softirq_entry",
            required: false,
            prog: Some(if btf { &cp.softirq_entry } else { &cp.softirq_entry_raw }),
            tracepoint: None,
        },
        Hook {
            name: "irq:softirq_exit",
            required: false,
            prog: Some(if btf { &cp.softirq_exit } else { &cp.softirq_exit_raw }),
            tracepoint: None,
        },
        Hook {
            name: "sched:sched_switch",
            required: false,
            prog: Some(if btf { &pp.sched_switch } else { &pp.sched_switch_raw }),
            tracepoint: None,
        },
        Hook {
            name: "iommu:map",
            required: false,
            prog: has("iommu", "map").then_some(&cp.iommu_map),
            tracepoint: None,
        },
        Hook {
            name: "iommu:unmap",
            required: false,
            prog: has("iommu", "unmap").then_some(&cp.iommu_unmap),
            tracepoint: None,
        },
        Hook {
            name: "dma:dma_map",
            required: false,
            prog: dma_map.map(|_| &cp.dma_map),
            tracepoint: dma_map.map(|n| ("dma", n)),
        },
        Hook {
            name: "dma:dma_unmap",
            required: false,
            prog: dma_unmap.map(|_| &cp.dma_unmap),
            tracepoint: dma_unmap.map(|n| ("dma", n)),
        },
    ];

    let mut links: Vec<Link> = Vec::new();
    let mut probes = Vec::new();
    let skip: Vec<String> = std::env::var("IOPATH_SKIP").unwrap_or_default().split(',').map(str::to_owned).collect();
    for h in &hooks {
        if skip.iter().any(|s| !s.is_empty() && h.name.contains(s.as_str())) {
            continue;
        }
        let Some(prog) = h.prog else {
            probes.push(ProbeStatus {
                name: h.name.into(),
                error: Some("not on this kernel".into()),
                ..Default::default()
            });
            continue;
        };
        let res = match h.tracepoint {
            Some((cat, name)) => prog.attach_tracepoint(TracepointCategory::Custom(cat.into()), name),
            None => prog.attach(),
        };
        let via = prog_kind(prog);
        match res {
            Ok(l) => {
                links.push(l);
                probes.push(ProbeStatus {
                    name: h.name.into(),
                    attached: true,
                    via,
                    prog_fd: prog.as_fd().as_raw_fd(),
                    ..Default::default()
                });
            }
            Err(e) if h.required => return Err(anyhow!("attaching {} ({via}) failed: {e}", h.name)),
            Err(e) => {
                probes.push(ProbeStatus { name: h.name.into(), via, error: Some(e.to_string()), ..Default::default() })
            }
        }
    }

    // SAFETY: plain syscall wrapper; the returned fd keeps stats on until closed.
    let stats_fd = if opts.prog_stats {
        unsafe { libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME) }
    } else {
        -1
    };
    // Counting starts only once every link exists, so attach order cannot skew the numbers.
    set_enabled(&mut phases, &mut counts, 1);
    let result = workload();
    set_enabled(&mut phases, &mut counts, 0);

    for p in probes.iter_mut().filter(|p| p.attached) {
        if let Some(info) = prog_info(p.prog_fd) {
            p.recursion_misses = info.recursion_misses;
            p.run_cnt = info.run_cnt;
            p.run_time_ns = info.run_time_ns;
        }
    }
    if stats_fd >= 0 {
        // SAFETY: closing the fd bpf_enable_stats returned.
        unsafe { libc::close(stats_fd) };
    }
    let raw = read_raw(&phases, &counts, probes)?;
    drop(links);
    Ok((result?, raw))
}

fn set_enabled(
    phases: &mut super::phases_skel::PhasesSkel<'_>,
    counts: &mut super::counts_skel::CountsSkel<'_>,
    on: u32,
) {
    if let Some(b) = phases.maps.bss_data.as_deref_mut() {
        b.enabled = on;
    }
    if let Some(b) = counts.maps.bss_data.as_deref_mut() {
        b.enabled = on;
    }
}

fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
    anyhow!("loading the {what} BPF programs failed: {e}{why}. Run 'iopath doctor' to see what this kernel supports")
}

fn prog_kind(p: &ProgramMut) -> String {
    let sec = p.section().to_string_lossy().into_owned();
    sec.split('/').next().unwrap_or("").to_owned()
}

/// The kernel's record of a program: run count and time (when stats are on), and
/// recursion_misses — runs skipped because another BPF program was running on that CPU, i.e.
/// events the program never saw.
fn prog_info(fd: i32) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel fills at most `len` bytes of `info`.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}

fn sum_percpu_u64(vals: &[Vec<u8>]) -> u64 {
    vals.iter().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap_or([0; 8]))).sum()
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
    for q in 0..256u32 {
        let v =
            sum_percpu_u64(&phases.maps.hw_queues.lookup_percpu(&q.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default());
        if v > 0 {
            raw.hw_queues.push((q, v));
        }
    }
    // Whatever is still in flight after the workload drained never completed as far as BPF saw.
    raw.stuck_inflight = phases.maps.inflight.keys().count() as u64;
    raw.stuck_done = phases.maps.done.keys().count() as u64;
    Ok(raw)
}
