//! Carries out a plan (probe::hooks): opens an object, sets each program's autoload from the
//! plan, loads, and attaches what the plan chose. A program the verifier or libbpf refuses (a
//! relocation, a helper, a map type) turns its feature off with libbpf's own reason and the object
//! is loaded again without it; only the block core is required. The doctor's dry run and the
//! trace session both load through here, so "works" in doctor means loaded and attached here.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{Link, OpenObject, TracepointCategory};

use super::hooks::{Feature, Obj, Via, HOOKS};
use super::options::{PageCacheMode, TraceOpts};
use super::plan::{Choice, Plan};
use super::tracefs::Tracefs;
use crate::model::ProbeStatus;

/// Loads tried at most per object: each failed load turns one feature off.
pub const MAX_LOADS: usize = 8;

/// Opens, configures and loads an object per `plan`, turning off the feature of each program
/// that fails to load, until it loads or a required program fails. `open` opens a fresh object
/// in the given storage and applies everything but autoload (rodata, map sizes).
pub fn load_per_plan<'obj, O: OpenSkel<'obj>>(
    obj: Obj,
    what: &str,
    plan: &mut Plan,
    stores: &'obj mut [MaybeUninit<OpenObject>],
    mut open: impl FnMut(&'obj mut MaybeUninit<OpenObject>, &Plan) -> Result<O>,
) -> Result<O::Output> {
    let tries = stores.len();
    for store in stores.iter_mut() {
        let mut o = open(store, plan)?;
        // Each program to load, and the tracepoint name to attach it to on this kernel.
        let targets: HashMap<&str, String> = plan.programs(obj).into_iter().map(|(_, p, t)| (p, t)).collect();
        for mut p in o.open_object_mut().progs_mut() {
            let name = p.name().to_string_lossy().into_owned();
            let target = targets.get(name.as_str());
            p.set_autoload(target.is_some());
            // A typed program serving a renamed tracepoint (dma_map_page for dma_map_phys), and
            // a function probe whose section names no function (the hook table's, per arch).
            let sec = p.section().to_string_lossy().into_owned();
            if let Some(target) = target.filter(|_| sec.starts_with("tp_btf/") || sec == "fentry" || sec == "fexit") {
                if !sec.ends_with(&format!("/{target}")) {
                    p.set_attach_target(0, Some(target.clone()))
                        .with_context(|| format!("{name}: attach target {target}"))?;
                }
            }
        }
        super::log::clear();
        match o.load() {
            Ok(skel) => return Ok(skel),
            Err(e) => {
                let why = super::log::reason().unwrap_or_else(|| e.to_string());
                let feature = super::log::failing_prog().and_then(|p| plan.feature_of_prog(&p));
                match feature {
                    Some(f) if f != Feature::BlockCore && plan.is_on(f) => {
                        plan.disable(f, &format!("did not load here ({why})"));
                    }
                    _ => return Err(load_error(what, e)),
                }
            }
        }
    }
    bail!("loading the {what} BPF programs failed {tries} times, each turning one feature off")
}

pub fn load_error(what: &str, e: libbpf_rs::Error) -> anyhow::Error {
    let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
    anyhow!("loading the {what} BPF programs failed: {e}{why}. Run 'iopath doctor' to see what this kernel supports")
}

/// The links of a session and what each hook did: `links[i]` is the attached `probes[i]`'s; a
/// perf event's program has one link per CPU, the first there and the others in `per_cpu`.
pub struct Attached {
    pub links: Vec<Link>,
    pub probes: Vec<ProbeStatus>,
    pub per_cpu: Vec<Link>,
}

/// Attaches every program the plan loads from `objs`. An optional feature whose program fails to
/// attach is turned off (its links dropped); the block core's failure is an error.
pub fn attach_per_plan(plan: &mut Plan, objs: &[(Obj, &libbpf_rs::Object)]) -> Result<Attached> {
    let mut links: Vec<(Feature, Link)> = Vec::new();
    let mut per_cpu: Vec<(Feature, Link)> = Vec::new();
    let mut done: Vec<(Feature, ProbeStatus)> = Vec::new();
    for h in plan.hooks.clone() {
        let Choice::Load { progs, target, .. } = &h.choice else { continue };
        if !plan.is_on(h.feature) {
            continue;
        }
        for (i, p) in progs.iter().enumerate() {
            let Some((_, obj)) = objs.iter().find(|(o, _)| *o == p.obj) else { continue };
            let prog = obj
                .progs_mut()
                .find(|q| q.name() == p.name)
                .ok_or_else(|| anyhow!("program {} is not in the loaded object", p.name))?;
            let res = match p.via {
                Via::Classic => prog
                    .attach_tracepoint(TracepointCategory::Custom(group_of(h.name).into()), target)
                    .map(|l| vec![l])
                    .map_err(anyhow::Error::from),
                Via::PerfEvent => super::perf_event::attach_cpu_clock(&prog, plan.sample_hz),
                _ => prog.attach().map(|l| vec![l]).map_err(anyhow::Error::from),
            };
            // A kprobe or fentry pair: the second program is the return probe.
            let name = if i == 0 {
                h.name.to_owned()
            } else {
                h.name.replacen("kprobe:", "kretprobe:", 1).replacen("fentry:", "fexit:", 1)
            };
            let via = prog.section().to_string_lossy().split('/').next().unwrap_or("").to_owned();
            match res {
                Ok(ls) => {
                    let fd = prog.as_fd().as_raw_fd();
                    let mut ls = ls.into_iter();
                    links.extend(ls.next().map(|l| (h.feature, l)));
                    per_cpu.extend(ls.map(|l| (h.feature, l)));
                    done.push((
                        h.feature,
                        ProbeStatus {
                            name,
                            attached: true,
                            via,
                            prog_fd: fd,
                            sampler: p.obj == Obj::Stacks,
                            ..Default::default()
                        },
                    ));
                }
                Err(e) if h.feature == Feature::BlockCore => bail!("attaching {name} ({via}) failed: {e:#}"),
                Err(e) => {
                    plan.disable(h.feature, &format!("{name} did not attach ({e:#})"));
                    links.retain(|(f, _)| *f != h.feature);
                    per_cpu.retain(|(f, _)| *f != h.feature);
                    done.retain(|(f, _)| *f != h.feature);
                    break;
                }
            }
        }
    }
    // Every hook the plan wanted and could not have, with its reason (unused ones are the
    // options' choice, not missing).
    let mut probes: Vec<ProbeStatus> = done.into_iter().map(|(_, p)| p).collect();
    for h in &plan.hooks {
        if let Choice::Off { why } = &h.choice {
            probes.push(ProbeStatus { name: h.name.into(), error: Some(why.clone()), ..Default::default() });
        }
    }
    let unpair = |v: Vec<(Feature, Link)>| v.into_iter().map(|(_, l)| l).collect();
    Ok(Attached { links: unpair(links), probes, per_cpu: unpair(per_cpu) })
}

fn group_of(hook: &str) -> &str {
    HOOKS.iter().find(|h| h.name == hook).map_or("", |h| h.group)
}

/// Loads and attaches everything `plan` asks of this kernel, then lets it all go: the doctor's
/// proof. Returns the plan as carried out (features that failed turned off, with the reason).
pub fn dry_run(plan: Plan, ksyms: &HashMap<String, u64>) -> Result<Plan> {
    dry_run_with(plan, ksyms, &TraceOpts::default())
}

/// `dry_run` with these options' rodata (top and serve's: `top` set). The sampler too when the
/// plan wants its rows (doctor's default plan does).
pub fn dry_run_with(mut plan: Plan, ksyms: &HashMap<String, u64>, opts: &TraceOpts) -> Result<Plan> {
    let mut stores = Stores::default();
    let mut stack_stores = obj_stores();
    let (phases, counts) = load_all(&mut plan, opts, ksyms, &mut stores)?;
    // The sampler is optional here: what stops it turns its rows off, never the dry run.
    let stacks = match plan.samples() {
        true => match load_stacks(&mut plan, opts, &phases, &mut stack_stores) {
            Ok(s) => Some(s),
            Err(e) => {
                for f in [Feature::OnCpuStacks, Feature::OffCpuStacks] {
                    plan.disable(f, &format!("{e:#}"));
                }
                None
            }
        },
        false => None,
    };
    let mut objs = vec![(Obj::Phases, phases.object()), (Obj::Counts, counts.object())];
    objs.extend(stacks.as_ref().map(|s| (Obj::Stacks, s.object())));
    let attached = attach_per_plan(&mut plan, &objs)?;
    drop(attached);
    Ok(plan)
}

/// Room for each object's tries (`load_per_plan`): the loaded skeletons borrow it.
pub struct Stores {
    phases: ObjStores,
    counts: ObjStores,
}

/// Room for one object's tries.
pub type ObjStores = [MaybeUninit<OpenObject>; MAX_LOADS];

pub fn obj_stores() -> ObjStores {
    std::array::from_fn(|_| MaybeUninit::uninit())
}

impl Default for Stores {
    fn default() -> Self {
        Stores { phases: obj_stores(), counts: obj_stores() }
    }
}

/// The flamegraphs' sampler (bpf/stacks.bpf.c) loaded per plan, following the processes the
/// phases object follows (its maps shared).
pub fn load_stacks<'obj>(
    plan: &mut Plan,
    opts: &TraceOpts,
    phases: &super::phases_skel::PhasesSkel<'_>,
    stores: &'obj mut [MaybeUninit<OpenObject>],
) -> Result<super::stacks_skel::StacksSkel<'obj>> {
    let filter = super::sampler::Filter {
        all: opts.stacks.as_ref().is_some_and(|s| s.all_cpus),
        tgid: opts.tgid,
        tree: !opts.tree.is_empty(),
        traced_tgids: phases.maps.traced_tgids.as_fd(),
        excluded_tids: phases.maps.excluded_tids.as_fd(),
    };
    load_per_plan(Obj::Stacks, "stacks", plan, stores, |s, _| super::sampler::open(s, &filter))
}

/// A trace's two objects (phases, counts) opened with these options and loaded per plan: the one
/// way the session and doctor's dry run load them.
pub fn load_all<'obj>(
    plan: &mut Plan,
    opts: &TraceOpts,
    ksyms: &HashMap<String, u64>,
    stores: &'obj mut Stores,
) -> Result<(super::phases_skel::PhasesSkel<'obj>, super::counts_skel::CountsSkel<'obj>)> {
    let Stores { phases: p_stores, counts: c_stores } = stores;
    let phases =
        load_per_plan(Obj::Phases, "phases", plan, p_stores, |s, plan| super::open::open_phases(s, opts, ksyms, plan))?;
    let counts =
        load_per_plan(Obj::Counts, "counts", plan, c_stores, |s, plan| super::open::open_counts(s, opts, plan))?;
    Ok((phases, counts))
}

/// This kernel's plan for these options, or why it cannot trace at all. tracefs stays mounted
/// while the returned guard lives.
pub fn plan_for(opts: &TraceOpts) -> Result<(Tracefs, Plan)> {
    let tfs = Tracefs::ensure()?;
    let facts = super::facts::KernelFacts::gather_with(Some(&tfs), true);
    let plan = super::plan::plan(&facts, &opts.plan_options());
    if let Some(why) = plan.fatal() {
        bail!("{why}. Run 'iopath doctor' to see what this kernel supports");
    }
    if opts.pagecache == PageCacheMode::Count && !plan.is_on(Feature::PageCacheCount) {
        bail!(
            "--pagecache count needs filemap:mm_filemap_get_pages and mm_filemap_add_to_page_cache \
             through BTF (tp_btf; 6.2+ has them): use --pagecache split on this kernel ({})",
            plan.state(Feature::PageCacheCount).why.clone().unwrap_or_default()
        );
    }
    Ok((tfs, plan))
}
