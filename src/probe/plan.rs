//! The plan: which of the table's hooks (probe::hooks) this kernel and these options get.
//! `plan(facts, options)` is pure: the kernel's facts (probe::facts) and the trace's options
//! (probe::options) in, the programs to load and the features on or off (each with the kernel's
//! reason) out. `iopath doctor` prints the plan; the session (probe::session) carries it out and,
//! when an optional program still fails to load or attach, turns that program's feature off and
//! goes on (`Plan::disable`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::facts::KernelFacts;
use super::hooks::*;
use super::options::{Doorbell, Lean, PageCacheMode, PlanOptions};

impl Flavour {
    /// The build this kernel takes (`force_compat`: IOPATH_BPF_BUILD=compat, to test it here).
    pub fn of(k: &KernelFacts, force_compat: bool) -> Flavour {
        let modern = [BPF_TASK_BTF, BPF_TASK_STORAGE, BPF_ATOMICS, BPF_LOOP].iter().all(|b| k.bpf.contains(*b));
        if modern && !force_compat {
            Flavour::Modern
        } else {
            Flavour::Compat
        }
    }
}

/// Why the one-hook tier leaves every other hook out.
pub const ONE_HOOK_ONLY: &str =
    "one-hook tier (top and serve's default): the request's stamps give the block and device phases; \
     --phases attaches the full set (submission, completion, the process)";

/// Why always-on (top and serve without --sync-syscalls) leaves the syscall hooks out.
pub const ALWAYS_ON_NO_SYSCALLS: &str =
    "always-on: no syscall hook (sync and aio I/O are followed from their first bio, \
     submission not timed; --sync-syscalls times it at a cost on every system call of every process)";
/// ... and every hook that fires for more than block I/O and io_uring.
pub const ALWAYS_ON_IO_ONLY: &str =
    "always-on: top and serve hook block I/O and io_uring alone (this fires for work that is not I/O)";

/// What the plan does with one hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Choice {
    /// Load this program (and attach it to `target`, the tracepoint's name on this kernel).
    Load {
        #[serde(skip)]
        progs: Vec<Prog>,
        via: &'static str,
        target: String,
    },
    /// Its feature is off on this kernel (the reason).
    Off { why: String },
    /// Not wanted by these options (the reason): not missing.
    Unused { why: String },
}

#[derive(Clone, Debug, Serialize)]
pub struct PlannedHook {
    pub name: &'static str,
    pub feature: Feature,
    pub used_for: &'static str,
    /// The tracepoint exists on this kernel (under one of its names).
    pub present: bool,
    #[serde(flatten)]
    pub choice: Choice,
}

/// A feature's state: on, off with the kernel's reason, or not wanted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FeatureState {
    pub feature: Feature,
    pub title: &'static str,
    pub on: bool,
    /// Why it is off, or why these options do not use it (None when on).
    pub why: Option<String>,
    /// Not wanted by these options.
    pub unused: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The build of the phases object this kernel loads.
    pub flavour: Flavour,
    /// block_bio_queue takes (request_queue, bio) here (before 5.11): the bio is its second
    /// argument (bpf/run.bpf.h targ_bio_queue_q).
    pub bio_queue_q: bool,
    /// The on-CPU sampler's cpu-clock rate per CPU (0: not sampling).
    #[serde(skip)]
    pub sample_hz: u64,
    pub hooks: Vec<PlannedHook>,
    pub features: Vec<FeatureState>,
}

/// Why a need is not met on this kernel (None: met).
fn unmet(need: &Need, k: &KernelFacts) -> Option<String> {
    match *need {
        Need::Bpf(what, since) => (!k.bpf.contains(what)).then(|| format!("no {what} ({since}+) in this kernel's BPF")),
        Need::Btf(any) => {
            (!any.iter().any(|f| k.btf.contains(*f))).then(|| format!("kernel BTF has none of {}", any.join(", ")))
        }
        Need::ModuleBtf => {
            (!k.module_btf).then(|| "kernel modules carry no BTF here (no /sys/kernel/btf/<module>)".into())
        }
        Need::NotBtf(fact) => {
            k.btf.contains(fact).then(|| format!("this kernel's {} hands over no request", &fact[3..]))
        }
    }
}

/// Why these options leave `h` out (None: wanted).
fn unused_why(h: &HookSpec, o: &PlanOptions, k: &KernelFacts) -> Option<String> {
    let f = h.feature;
    if o.skip.iter().any(|s| !s.is_empty() && h.name.contains(s.as_str())) {
        return Some("--skip-hooks".into());
    }
    let count = o.pagecache == PageCacheMode::Count;
    let always_on = o.top && !o.sync_syscalls;
    let stamps = matches!(f, Feature::Stamps | Feature::StampsCheck);
    if o.one_hook != stamps {
        return Some(if o.one_hook {
            ONE_HOOK_ONLY.into()
        } else {
            "only top and serve's one-hook tier (their default without --phases)".into()
        });
    }
    match f {
        Feature::OnCpuStacks if !o.stacks.as_ref().is_some_and(|s| s.oncpu) => {
            return Some("only with --flamegraph (on-CPU stacks)".into())
        }
        Feature::OffCpuStacks if !o.stacks.as_ref().is_some_and(|s| s.offcpu) => {
            return Some("only with --offcpu (off-CPU stacks)".into())
        }
        Feature::BioEnd if !o.top => {
            return Some("only for top and serve (a trace closes each I/O at its route's end)".into())
        }
        Feature::FsEndio if !o.fs_endio || o.top => {
            return Some("only when the traced I/O may be on btrfs (its end-io workers verify read checksums)".into())
        }
        Feature::Stacked if o.top => {
            return Some("top and serve end every bio in the bio-end hook (stacked devices' too)".into())
        }
        Feature::Syscalls if always_on => return Some(ALWAYS_ON_NO_SYSCALLS.into()),
        Feature::SyncFentry if !always_on => {
            return Some(
                "only top and serve without --sync-syscalls (the syscall pair times every sync call there)".into(),
            )
        }
        Feature::ContextSwitches
        | Feature::RunQueue
        | Feature::Softirqs
        | Feature::Irqs
        | Feature::PageCacheExtras
        | Feature::Journal
        | Feature::Writeback
        | Feature::DirtyThrottle
        | Feature::NvmeSplit
        | Feature::Doorbell
        | Feature::Iommu
        | Feature::Dma
        | Feature::ProcessTree
            if always_on =>
        {
            return Some(ALWAYS_ON_IO_ONLY.into())
        }
        Feature::PageCacheCount if !count => return Some("only with --pagecache count".into()),
        Feature::Syscalls if count => return Some("--pagecache count attaches no syscall hook".into()),
        Feature::Syscalls if o.lean == Lean::Uring => return Some("--lean io_uring attaches no syscall hook".into()),
        Feature::Syscalls if o.lean == Lean::Aio && h.name.ends_with("sys_enter") => {
            return Some("--lean aio claims each request at its first bio".into())
        }
        Feature::ContextSwitches | Feature::RunQueue | Feature::Softirqs if o.lean != Lean::Off => {
            return Some("--lean leaves the scheduler and softirq hooks out".into())
        }
        Feature::ProcessTree if !o.tree => return Some("only when a process tree is traced".into()),
        Feature::Doorbell => {
            let want = match o.doorbell {
                Doorbell::Off => return Some("--doorbell off".into()),
                Doorbell::Kprobe => Via::Kprobe,
                // fexit on a module's function needs that module's BTF (5.10 has none: libbpf
                // found no BTF type for nvme_queue_rq there, -ESRCH).
                Doorbell::Auto
                    if (k.attach_ok(AttachKind::Fentry) && k.module_btf) || !k.attach_ok(AttachKind::Kprobe) =>
                {
                    Via::Fexit
                }
                Doorbell::Auto => Via::Kprobe,
            };
            if h.func_progs.first().is_some_and(|p| p.via != want) {
                return Some(format!("the doorbell is timed by {} here", want.name()));
            }
        }
        _ => {}
    }
    None
}

/// The program for a variant: typed (tp_btf) unless raw_tp is asked for or tp_btf does not
/// work here, then its raw twin (raw_tp, or a classic tracepoint); a variant with one kind only
/// uses that one where it works.
fn pick(v: &Variant, o: &PlanOptions, k: &KernelFacts) -> Result<Prog, String> {
    let works = |p: &Prog| k.attach_ok(p.via.kind());
    let typed = v.progs.iter().find(|p| p.via == Via::TpBtf);
    let untyped = v.progs.iter().find(|p| p.via != Via::TpBtf);
    let order = if o.raw_tp { [untyped, typed] } else { [typed, untyped] };
    order.into_iter().flatten().find(|p| works(p)).copied().ok_or_else(|| {
        let kinds: Vec<_> = v.progs.iter().map(|p| p.via.name()).collect();
        let why = v.progs.first().and_then(|p| k.attach_error(p.via.kind())).unwrap_or_default();
        format!("{} programs do not attach here ({why})", kinds.join(" / "))
    })
}

/// The plan for this kernel and these options. Pure.
pub fn plan(k: &KernelFacts, o: &PlanOptions) -> Plan {
    let mut hooks = Vec::new();
    let mut off: BTreeMap<Feature, String> = BTreeMap::new();
    let flavour = Flavour::of(k, o.force_compat);
    for f in Feature::ALL {
        let unmet: Vec<String> = f.needs(flavour).iter().filter_map(|n| unmet(n, k)).collect();
        if !unmet.is_empty() {
            off.insert(f, unmet.join("; "));
        }
    }
    if flavour == Flavour::Compat {
        // The compat build keeps each thread's state in a hash entry only an exit hook frees.
        off.entry(Feature::SyncFentry).or_insert_with(|| {
            "the compat build keeps thread state no exit hook frees here (task storage: 5.11+)".into()
        });
    }
    for h in HOOKS {
        let variant = h.variants.iter().find(|v| k.has_tracepoint(h.group, v.tracepoint));
        let present = h.variants.is_empty() || variant.is_some();
        let choice = if let Some(why) = unused_why(h, o, k) {
            Choice::Unused { why }
        } else if h.variants.is_empty() {
            match h.func_progs.iter().find(|p| !k.attach_ok(p.via.kind())) {
                Some(p) => Choice::Off {
                    why: format!(
                        "{} programs do not attach here ({})",
                        p.via.name(),
                        k.attach_error(p.via.kind()).unwrap_or_default()
                    ),
                },
                None if h.feature == Feature::Doorbell
                    && h.func_progs.iter().any(|p| p.via == Via::Fexit)
                    && !k.module_btf =>
                {
                    Choice::Off {
                        why: "fexit on nvme_queue_rq needs the nvme module's BTF (no /sys/kernel/btf/<module>)".into(),
                    }
                }
                // A perf event's program: its event is the hook's own (perf_event:cpu-clock).
                None if h.func.is_empty() => Choice::Load {
                    progs: h.func_progs.to_vec(),
                    via: h.func_progs[0].via.name(),
                    target: h.name.split_once(':').map_or(h.name, |(_, e)| e).into(),
                },
                None => match h.func.iter().find(|f| k.symbols.contains(**f)) {
                    None => Choice::Off {
                        why: format!(
                            "{} is not in /proc/kallsyms{}",
                            h.func.join(" / "),
                            if h.feature == Feature::Doorbell { " (no NVMe driver loaded)" } else { "" }
                        ),
                    },
                    Some(f) => Choice::Load {
                        progs: h.func_progs.to_vec(),
                        via: h.func_progs[0].via.name(),
                        target: (*f).into(),
                    },
                },
            }
        } else {
            match variant {
                None => Choice::Off {
                    why: format!(
                        "tracepoint {}:{} is not on this kernel",
                        h.group,
                        h.variants.iter().map(|v| v.tracepoint).collect::<Vec<_>>().join(" / ")
                    ),
                },
                Some(v) => match pick(v, o, k) {
                    Ok(p) => Choice::Load { progs: vec![p], via: p.via.name(), target: v.tracepoint.into() },
                    Err(why) => Choice::Off { why },
                },
            }
        };
        if let Choice::Off { why } = &choice {
            off.entry(h.feature).or_insert_with(|| why.clone());
        }
        hooks.push(PlannedHook { name: h.name, feature: h.feature, used_for: h.used_for, present, choice });
    }
    let mut p = Plan {
        flavour,
        bio_queue_q: k.btf.contains(TP_BIO_QUEUE_Q),
        sample_hz: o.stacks.as_ref().map_or(0, |s| s.freq_hz),
        hooks,
        features: Vec::new(),
    };
    for (f, why) in off {
        p.disable(f, &why);
    }
    p.refresh_features();
    p
}

impl Plan {
    /// Turns `feature` off with the reason (a load or attach failure the facts did not predict).
    pub fn disable(&mut self, feature: Feature, why: &str) {
        for h in self.hooks.iter_mut().filter(|h| h.feature == feature) {
            if matches!(h.choice, Choice::Load { .. }) {
                h.choice = Choice::Off { why: why.to_owned() };
            }
        }
        self.refresh_features();
        if let Some(s) = self.features.iter_mut().find(|s| s.feature == feature && !s.unused) {
            s.on = false;
            s.why = Some(why.to_owned());
        }
    }

    fn refresh_features(&mut self) {
        let old = std::mem::take(&mut self.features);
        for f in Feature::ALL {
            let mine: Vec<&PlannedHook> = self.hooks.iter().filter(|h| h.feature == f).collect();
            let unused = mine.iter().all(|h| matches!(h.choice, Choice::Unused { .. }));
            let why = mine.iter().find_map(|h| match &h.choice {
                Choice::Off { why } => Some(why.clone()),
                _ => None,
            });
            let why = why.or_else(|| old.iter().find(|s| s.feature == f && !s.unused).and_then(|s| s.why.clone()));
            let unused_why = mine.iter().find_map(|h| match &h.choice {
                Choice::Unused { why } => Some(why.clone()),
                _ => None,
            });
            let (on, why) = if unused { (false, unused_why) } else { (why.is_none(), why) };
            self.features.push(FeatureState { feature: f, title: f.title(), on, why, unused });
        }
    }

    /// Whether the flamegraphs' sampler has a row to load (bpf/stacks.bpf.c).
    pub fn samples(&self) -> bool {
        self.is_on(Feature::OnCpuStacks) || self.is_on(Feature::OffCpuStacks)
    }

    pub fn is_on(&self, f: Feature) -> bool {
        self.features.iter().any(|s| s.feature == f && s.on)
    }

    pub fn state(&self, f: Feature) -> &FeatureState {
        self.features.iter().find(|s| s.feature == f).expect("every feature has a state")
    }

    /// Why the trace cannot run at all (the block core is off: the one hook's, in the one-hook
    /// tier), else None.
    pub fn fatal(&self) -> Option<String> {
        let core = if self.state(Feature::Stamps).unused { Feature::BlockCore } else { Feature::Stamps };
        let s = self.state(core);
        s.why.as_ref().map(|w| format!("the {} cannot be traced on this kernel: {w}", s.title))
    }

    /// Every program of `obj` to load, with the tracepoint name to attach it to.
    pub fn programs(&self, obj: Obj) -> Vec<(&'static str, &'static str, String)> {
        let mut out = Vec::new();
        for h in &self.hooks {
            if let Choice::Load { progs, target, .. } = &h.choice {
                for p in progs.iter().filter(|p| p.obj == obj) {
                    out.push((h.name, p.name, target.clone()));
                }
            }
        }
        out
    }

    /// The feature a program serves (a load failure names the program).
    pub fn feature_of_prog(&self, prog: &str) -> Option<Feature> {
        HOOKS
            .iter()
            .find(|h| h.func_progs.iter().chain(h.variants.iter().flat_map(|v| v.progs)).any(|p| p.name == prog))
            .map(|h| h.feature)
    }

    /// The features that are off on this kernel, each with its reason, for reports.
    pub fn off(&self) -> Vec<(&'static str, String)> {
        self.features
            .iter()
            .filter(|s| !s.on && !s.unused)
            .map(|s| (s.title, s.why.clone().unwrap_or_default()))
            .collect()
    }
}

/// docs/kernels.md's kernel table: each feature of the default trace on each recorded kernel, from
/// the same plan doctor and the session use (`kernels`: (label, facts)). Pure.
pub fn kernel_table(kernels: &[(String, KernelFacts)]) -> String {
    let plans: Vec<Plan> = kernels.iter().map(|(_, k)| plan(k, &PlanOptions::default())).collect();
    // A cell says yes, or no and the first reason in short.
    let short = |why: &str| {
        let first = why.split("; ").count();
        let why = why
            .replace(" in this kernel's BPF", "")
            .replace("tracepoint ", "")
            .replace(" is not on this kernel", " absent");
        if first > 1 {
            format!("no: {} (and {} more)", why.split("; ").next().unwrap_or(""), first - 1)
        } else {
            format!("no: {why}")
        }
    };
    let mut out = format!(
        "| feature | needs | {} |\n|---|---|{}\n",
        kernels.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(" | "),
        "---|".repeat(kernels.len())
    );
    // Which build of the phases object each kernel loads (bpf/compat.bpf.h).
    let builds: Vec<&str> = plans.iter().map(|p| p.flavour.key()).collect();
    out += &format!(
        "| BPF build | modern: bpf_get_current_task_btf, task_storage (5.11+), atomics (5.12+), bpf_loop (5.17+); else compat | {} |\n",
        builds.join(" | ")
    );
    for f in Feature::ALL {
        let cells: Vec<String> = plans
            .iter()
            .map(|p| {
                let s = p.state(f);
                match (s.on, s.unused, &s.why) {
                    _ if f != Feature::BlockCore && p.fatal().is_some() => "(no trace)".to_owned(),
                    (true, _, _) => "yes".to_owned(),
                    (false, true, _) => "(not in the default trace)".to_owned(),
                    (false, false, Some(why)) => short(why).replace('|', "/"),
                    (false, false, None) => "no".to_owned(),
                }
            })
            .collect();
        if cells.iter().all(|c| c.starts_with("(no")) {
            continue;
        }
        out += &format!("| {} | {} | {} |\n", f.title(), needs_text(f).replace('|', " or "), cells.join(" | "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(tps: &[&str], bpf: &[&str]) -> KernelFacts {
        let mut k = KernelFacts { schema: super::super::facts::SCHEMA.into(), ..Default::default() };
        k.tracepoints = tps.iter().map(|s| s.to_string()).collect();
        k.bpf = bpf.iter().map(|s| s.to_string()).collect();
        for kind in ["tp_btf", "raw_tp", "tracepoint"] {
            k.attach.insert(kind.into(), None);
        }
        k.attach.insert("fentry".into(), Some("-EPERM".into()));
        k.attach.insert("kprobe".into(), Some("no kprobes".into()));
        k.btf.insert("dentry.d_alias".into());
        k
    }
    const ALL_BPF: &[&str] = &[BPF_LOOP, BPF_TASK_BTF, BPF_RINGBUF, BPF_TASK_STORAGE, BPF_ATOMICS];
    const BLOCK: &[&str] = &["block:block_bio_queue", "block:block_rq_issue", "block:block_rq_complete"];

    /// A kernel with every tracepoint of the table (under every name) and every BPF feature.
    fn every_tracepoint() -> KernelFacts {
        let every: Vec<String> = HOOKS
            .iter()
            .flat_map(|h| h.variants.iter().map(move |v| format!("{}:{}", h.group, v.tracepoint)))
            .collect();
        facts(&every.iter().map(String::as_str).collect::<Vec<_>>(), ALL_BPF)
    }

    #[test]
    fn a_missing_optional_tracepoint_turns_its_feature_off_alone() {
        let k = facts(&[BLOCK, &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"]].concat(), ALL_BPF);
        let p = plan(&k, &PlanOptions::default());
        assert!(p.fatal().is_none());
        assert!(p.is_on(Feature::BlockCore) && p.is_on(Feature::Syscalls));
        let u = p.state(Feature::Uring);
        assert!(!u.on && u.why.as_deref().unwrap().contains("io_uring_submit_req / io_uring_submit_sqe"), "{u:?}");
        // A bio's end is wanted in every trace (bio-based devices need it without dm or md): this
        // kernel's lack of it is said, the rest stays on.
        let s = p.state(Feature::Stacked);
        assert!(!s.on && !s.unused && s.why.as_deref().unwrap().contains("block_bio_complete"), "{s:?}");
    }

    #[test]
    fn always_on_attaches_block_io_and_io_uring_alone() {
        let k = every_tracepoint();
        let loaded = |p: &Plan| -> Vec<&str> {
            let mut v: Vec<&str> =
                p.hooks.iter().filter(|h| matches!(h.choice, Choice::Load { .. })).map(|h| h.name).collect();
            v.dedup();
            v
        };
        let p = plan(&k, &PlanOptions { top: true, ..Default::default() });
        assert_eq!(
            loaded(&p),
            [
                "io_uring:io_uring_submit_req",
                "io_uring:io_uring_complete",
                "io_uring:io_uring_queue_async_work",
                "block:block_bio_queue",
                "block:block_bio_complete",
                "block:block_split",
                "block:block_rq_issue",
                "block:block_rq_complete",
            ]
        );
        let s = p.state(Feature::Syscalls);
        assert!(s.unused && s.why.as_deref().unwrap().contains("--sync-syscalls"), "{s:?}");
        // --sync-syscalls: the syscall pair again, and the bio-end hooks stay.
        let p = plan(&k, &PlanOptions { top: true, sync_syscalls: true, ..Default::default() });
        assert!(p.is_on(Feature::Syscalls) && p.is_on(Feature::BioEnd));
        // A trace never closes I/Os at their bios' end.
        let p = plan(&k, &PlanOptions::default());
        assert!(p.state(Feature::BioEnd).unused && p.is_on(Feature::Syscalls));
    }

    #[test]
    fn always_on_times_positional_sync_calls_by_fentry_where_it_attaches() {
        let mut k = every_tracepoint();
        let top = PlanOptions { top: true, ..Default::default() };
        // This build host: fentry refused, said with the kernel's answer.
        let s = plan(&k, &top).state(Feature::SyncFentry).clone();
        assert!(!s.on && !s.unused && s.why.as_deref().unwrap().contains("-EPERM"), "{s:?}");
        // fentry attaches, the wrappers are there: six pairs on the x86 names, nothing else.
        k.attach.insert("fentry".into(), None);
        for c in ["pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2"] {
            k.symbols.insert(format!("__x64_sys_{c}"));
        }
        let p = plan(&k, &top);
        assert!(p.is_on(Feature::SyncFentry));
        let targets: Vec<(&str, Vec<&str>, String)> = p
            .hooks
            .iter()
            .filter_map(|h| match &h.choice {
                Choice::Load { progs, target, .. } if h.feature == Feature::SyncFentry => {
                    Some((h.name, progs.iter().map(|p| p.name).collect(), target.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(targets.len(), 6, "{targets:?}");
        assert_eq!(targets[0], ("fentry:pread64", vec!["fentry_pread64", "fexit_pread64"], "__x64_sys_pread64".into()));
        // An arm64 kernel's names.
        k.symbols = k.symbols.iter().map(|s| s.replace("__x64_", "__arm64_")).collect();
        let p = plan(&k, &top);
        let h = p.hooks.iter().find(|h| h.name == "fentry:pread64").unwrap();
        assert!(matches!(&h.choice, Choice::Load { target, .. } if target == "__arm64_sys_pread64"), "{h:?}");
        // One call's function missing: the feature is off as a whole, naming it.
        k.symbols.remove("__arm64_sys_pwrite64");
        let s = plan(&k, &top).state(Feature::SyncFentry).clone();
        assert!(!s.on && s.why.as_deref().unwrap().contains("__arm64_sys_pwrite64 is not in /proc/kallsyms"), "{s:?}");
        k.symbols.insert("__arm64_sys_pwrite64".into());
        // A trace and --sync-syscalls time every sync call through the syscall pair instead; the
        // compat build has no exit hook to free a thread's state.
        for o in [PlanOptions::default(), PlanOptions { top: true, sync_syscalls: true, ..Default::default() }] {
            assert!(plan(&k, &o).state(Feature::SyncFentry).unused);
        }
        let s = plan(&k, &PlanOptions { force_compat: true, ..top }).state(Feature::SyncFentry).clone();
        assert!(!s.on && s.why.as_deref().unwrap().contains("compat"), "{s:?}");
    }

    #[test]
    fn the_older_name_of_a_tracepoint_is_used_where_the_newer_is_absent() {
        let k = facts(&[BLOCK, &["io_uring:io_uring_submit_sqe", "io_uring:io_uring_complete"]].concat(), ALL_BPF);
        let p = plan(&k, &PlanOptions::default());
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_submit_req").unwrap();
        assert!(
            matches!(&h.choice, Choice::Load { target, via: "tp_btf", .. } if target == "io_uring_submit_sqe"),
            "{h:?}"
        );
        // --raw-tp: submit_sqe has no raw twin, its typed program serves.
        let p = plan(&k, &PlanOptions { raw_tp: true, ..Default::default() });
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_submit_req").unwrap();
        assert!(matches!(&h.choice, Choice::Load { via: "tp_btf", .. }), "{h:?}");
        let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_complete").unwrap();
        assert!(matches!(&h.choice, Choice::Load { via: "raw_tp", .. }), "{h:?}");
    }

    #[test]
    fn without_bpf_loop_the_compat_build_is_planned_and_without_a_ring_buffer_nothing() {
        let k = facts(BLOCK, &[BPF_TASK_BTF, BPF_RINGBUF, BPF_ATOMICS, BPF_TASK_STORAGE]);
        let p = plan(&k, &PlanOptions::default());
        assert_eq!(p.flavour, Flavour::Compat);
        assert!(p.fatal().is_none(), "{:?}", p.fatal());
        let k = facts(BLOCK, ALL_BPF);
        assert_eq!(plan(&k, &PlanOptions::default()).flavour, Flavour::Modern);
        // The compat build still needs the ring buffer (5.8): below it, no trace, and it says so.
        let k = facts(BLOCK, &[]);
        let why = plan(&k, &PlanOptions::default()).fatal().expect("no ring buffer: no trace");
        assert!(why.contains("ringbuf (5.8+)"), "{why}");
    }

    #[test]
    fn a_disabled_feature_keeps_its_reason_and_unloads_its_programs() {
        let k = facts(
            &[BLOCK, &["writeback:writeback_dirty_folio", "writeback:writeback_start", "writeback:writeback_written"]]
                .concat(),
            ALL_BPF,
        );
        let mut p = plan(&k, &PlanOptions::default());
        assert!(p.is_on(Feature::Writeback));
        assert_eq!(p.feature_of_prog("wb_start"), Some(Feature::Writeback));
        p.disable(Feature::Writeback, "relocation failed");
        assert!(!p.is_on(Feature::Writeback));
        assert_eq!(p.state(Feature::Writeback).why.as_deref(), Some("relocation failed"));
        assert!(!p.programs(Obj::Phases).iter().any(|(_, prog, _)| prog.starts_with("wb_")));
        assert!(p.is_on(Feature::BlockCore));
    }

    #[test]
    fn lean_and_pagecache_count_leave_hooks_out_as_unused_not_missing() {
        let k = facts(
            &[BLOCK, &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit", "sched:sched_switch"]].concat(),
            ALL_BPF,
        );
        let p = plan(&k, &PlanOptions { lean: Lean::Uring, ..Default::default() });
        assert!(p.state(Feature::Syscalls).unused && p.state(Feature::ContextSwitches).unused);
        assert!(p.off().iter().all(|(t, _)| !t.contains("syscall")), "{:?}", p.off());
        let p = plan(&k, &PlanOptions { lean: Lean::Aio, ..Default::default() });
        let names: Vec<_> = p.programs(Obj::Phases).into_iter().map(|(_, n, _)| n).collect();
        assert!(names.contains(&"sys_exit") && !names.contains(&"sys_enter"), "{names:?}");
    }

    #[test]
    fn the_doorbell_falls_back_to_kprobes_where_fexit_is_refused() {
        let mut k = facts(&[BLOCK, &["nvme:nvme_setup_cmd", "nvme:nvme_complete_rq"]].concat(), ALL_BPF);
        k.symbols.insert("nvme_queue_rq".into());
        k.module_btf = true;
        k.attach.insert("kprobe".into(), None);
        let p = plan(&k, &PlanOptions::default());
        let load: Vec<_> = p.programs(Obj::Phases).into_iter().map(|(_, n, _)| n).collect();
        assert!(load.contains(&"nvme_queue_rq_entry") && !load.contains(&"nvme_queue_rq_exit"), "{load:?}");
        assert!(p.is_on(Feature::NvmeSplit) && p.is_on(Feature::Doorbell));
        k.module_btf = false;
        let p = plan(&k, &PlanOptions::default());
        assert!(
            p.state(Feature::NvmeSplit).why.as_deref().unwrap().contains("no BTF"),
            "{:?}",
            p.state(Feature::NvmeSplit)
        );
    }
}
