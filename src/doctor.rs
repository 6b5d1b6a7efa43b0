//! `iopath doctor`: what this machine can trace, and what to do about what it cannot.

use std::io::{self, Write};

use serde::Serialize;

use crate::probe::facts::KernelFacts;
use crate::probe::hooks::{self, AttachKind, Feature};
use crate::probe::options::{force_compat, PlanOptions, StackOpts};
use crate::probe::plan::{self, Choice, FeatureState};
use crate::probe::routes::{self, RouteStatus};
use crate::probe::trials::{self, AttachResult};

use crate::probe::tracefs::Tracefs;
use crate::sysconf::{self, BlockQueue, IommuState, SysRoots};

/// A hook's tracepoint on this kernel.
#[derive(Clone, Debug, Serialize)]
pub struct TracepointStatus {
    pub name: String,
    pub present: bool,
    pub used_for: &'static str,
    pub required: bool,
}

#[derive(Debug, Serialize)]
pub struct Doctor {
    pub schema: &'static str,
    pub kernel: String,
    pub root: bool,
    pub cap_sys_admin: bool,
    pub cap_bpf: bool,
    pub cap_perfmon: bool,
    pub btf: bool,
    pub tracefs: Option<String>,
    pub tracefs_mounted_by_iopath: bool,
    /// Why tracefs could not be used (unmounted and unmountable, or unreadable to this user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracefs_error: Option<String>,
    pub tracepoints: Vec<TracepointStatus>,
    pub attach: Vec<AttachResult>,
    pub block_devices: Vec<BlockQueue>,
    pub nvme_poll_queues: Option<u32>,
    pub iommu: IommuState,
    /// What `iopath trace` will attach on this kernel, and how (hook, kind), as carried out by
    /// the dry run: loaded and attached for real.
    pub trace_plan: Vec<(String, String)>,
    /// The build of the phases object this kernel loads (bpf/compat.bpf.h).
    pub bpf_build: hooks::Flavour,
    /// Every feature: on, or off with the kernel's reason.
    pub features: Vec<FeatureState>,
    /// Whether the default trace's programs were loaded and attached here (the dry run), and
    /// its error when not.
    pub dry_run: Option<Result<(), String>>,
    /// What this kernel offers (tests/data/kernels/*.json are recordings of these).
    pub facts: KernelFacts,
    /// Every route an I/O can take, and whether `iopath trace` follows it here.
    pub routes: Vec<RouteStatus>,
    /// Why tracing cannot work here, each with the fix. Empty = it can.
    pub problems: Vec<String>,
    /// Things that work but limit what iopath shows.
    pub notes: Vec<String>,
    pub tracing_possible: bool,
    /// What `iopath top` and `serve` attach here (without --sync-syscalls), carried out by a
    /// dry run of their own; None when doctor could not load programs at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_on: Option<AlwaysOn>,
    /// top and serve's default, the one-hook tier (bpf/stamps.bpf.c), carried out by a dry run of
    /// its own; None when doctor could not load programs at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_hook: Option<OneHook>,
    /// `--stamps SECS`: each disk's stamps checked against the hooks on this host's own I/O over
    /// that long (the one-hook tier's check window, for real); None without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stamps_checked: Option<StampsChecked>,
    /// `--filesystems`: each file system's direct I/O traced on a scratch image (None without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystems: Option<Vec<crate::fs_trials::FsTrial>>,
}

/// doctor --stamps: the verdicts a check window reached, per disk that did I/O in it.
#[derive(Debug, Serialize)]
pub struct StampsChecked {
    pub secs: f64,
    /// (disk, verdict line), one per disk with enough requests in the window.
    pub disks: Vec<(String, String)>,
    pub state: crate::probe::stamps::StampsState,
    /// Why no check ran (the check hooks did not load here), or the session's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// doctor --stamps: loads the one-hook tier, holds one check window open over `secs` of this host's
/// own I/O (doctor makes none), and keeps each disk's verdicts. Everything is detached on return.
pub fn check_stamps(d: &mut Doctor, roots: &SysRoots, secs: f64) {
    use crate::probe::options::TraceOpts;
    let opts = TraceOpts { top: true, one_hook: true, ..Default::default() };
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let res = crate::probe::stamps::live(&opts, |_, checker| {
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(50));
            checker.tick(std::time::Instant::now());
        }
        Ok(checker.state())
    });
    let names = sysconf::dev_names(roots);
    let name = |dev: u32| names.get(&dev).cloned().unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & 0xfffff));
    d.stamps_checked = Some(match res {
        Ok(state) => StampsChecked {
            secs,
            disks: state.trust.iter().filter(|(_, t)| !t.unchecked()).map(|(dev, t)| (name(*dev), t.line())).collect(),
            error: state.check_off.clone(),
            state,
        },
        Err(e) => StampsChecked { secs, disks: Vec::new(), state: Default::default(), error: Some(format!("{e:#}")) },
    });
}

/// What a disk's queue settings say of the kernel's stamps before any check: expected, not
/// measured (doctor --stamps measures). (io_start_time_ns, start_time_ns).
pub fn stamps_expected(b: &BlockQueue) -> (&'static str, &'static str) {
    let wbt_on = b.wbt_lat_usec.as_deref().is_some_and(|v| v != "0");
    let issue = if b.nr_hw_queues.is_none() {
        "none: a bio-based device has no requests (top counts its bios)"
    } else if wbt_on {
        "set: wbt keeps the queue's stats (checked before use: a plug's cached clock can be off)"
    } else {
        "likely 0: wbt off (set only if iocost or iolatency keeps the queue's stats): its hook times it"
    };
    let queue = match b.iostats {
        _ if b.nr_hw_queues.is_none() => "none: no requests",
        Some(true) => "set: iostats on",
        Some(false) => "0 since 6.13 with iostats off: its hook times it",
        None => "unknown: no queue/iostats",
    };
    (issue, queue)
}

/// The one-hook tier on this kernel.
#[derive(Debug, Serialize)]
pub struct OneHook {
    /// (hook, how) of every hook it loads and attaches (the check hooks too); empty when the dry
    /// run failed.
    pub hooks: Vec<(String, String)>,
    /// The dry run's error, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// top and serve on this kernel: their hooks and how sync and aio I/O are timed.
#[derive(Debug, Serialize)]
pub struct AlwaysOn {
    /// (hook, how) of every hook they attach; empty when the dry run failed.
    pub hooks: Vec<(String, String)>,
    /// The dry run's error, if it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The positional sync calls are timed by fentry on their kernel functions (loaded and
    /// attached by the dry run).
    pub sync_fentry: bool,
    /// How sync and aio direct I/O are timed here, in words.
    pub sync_io: String,
}

/// top and serve's plan carried out (loaded, attached, let go), and what it means for sync I/O.
fn always_on(facts: &KernelFacts, ksyms: &std::collections::HashMap<String, u64>) -> AlwaysOn {
    let o = PlanOptions { top: true, force_compat: force_compat(), ..Default::default() };
    let opts = crate::probe::options::TraceOpts { top: true, ..Default::default() };
    let (hooks, error, fentry) = match crate::probe::load::dry_run_with(plan::plan(facts, &o), ksyms, &opts) {
        Ok(p) => {
            let f = p.state(Feature::SyncFentry);
            let fentry = if f.on { Ok(()) } else { Err(f.why.clone().unwrap_or_else(|| "not loaded".into())) };
            let attached =
                trace_plan(&p).into_iter().filter(|(_, how)| !how.starts_with("not used:") && !how.starts_with("off:"));
            (attached.collect(), None, fentry)
        }
        Err(e) => (Vec::new(), Some(format!("{e:#}")), Err("the dry run failed".into())),
    };
    const AT_BIO: &str = "block and device phases from the first bio to the last bio's end, submission \
                          and completion not timed";
    const NO_PAIR: &str = "no syscall hook for every call: the raw_syscalls pair would send every system \
                           call of every process through the slow path (--sync-syscalls attaches it)";
    let sync_io = match &fentry {
        Ok(()) => format!(
            "pread64, pwrite64, preadv, pwritev, preadv2, pwritev2: all four phases, timed by fentry on \
             their kernel functions (only those calls pay); read, write, readv, writev and aio: {AT_BIO} \
             (a hook on read and write would run for every socket and pipe read of every process); {NO_PAIR}"
        ),
        Err(why) => format!("{AT_BIO}; {NO_PAIR}; fentry on pread/pwrite is off here: {why}"),
    };
    AlwaysOn { hooks, error, sync_fentry: fentry.is_ok(), sync_io }
}

pub fn examine(roots: &SysRoots) -> Doctor {
    let privs = sysconf::Privileges::of_this_process(roots);
    let privileged = privs.can_trace();
    let btf = trials::btf_present(&roots.sys);
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    if !privileged {
        problems.push("no privileges to load BPF: run as root (or grant CAP_BPF and CAP_PERFMON: setcap cap_bpf,cap_perfmon+ep iopath)".into());
    }
    if !btf {
        problems.push("no kernel BTF (/sys/kernel/btf/vmlinux): iopath's CO-RE programs need a kernel built with CONFIG_DEBUG_INFO_BTF=y".into());
    }
    let (tfs, tracefs_error) = match Tracefs::ensure() {
        Ok(t) => (Some(t), None),
        Err(e) => {
            problems.push(format!("{e:#}"));
            (None, Some(format!("{e:#}")))
        }
    };
    let mut facts = KernelFacts::gather_with(tfs.as_ref(), privileged);
    if tfs.is_none() {
        facts.unseen.push("tracepoints: tracefs could not be read".into());
    }
    // The default trace's hooks, and the flamegraphs' sampler's (--flamegraph, --offcpu): the dry
    // run loads and attaches those too.
    let stacks = Some(StackOpts { oncpu: true, offcpu: true, ..Default::default() });
    let planned = plan::plan(&facts, &PlanOptions { force_compat: force_compat(), stacks, ..Default::default() });
    let tracepoints = if tfs.is_some() { tracepoint_statuses(&planned) } else { Vec::new() };
    for t in tracepoints.iter().filter(|t| t.required && !t.present) {
        problems.push(format!(
            "tracepoint {} is missing: the kernel lacks block-layer tracing (CONFIG_BLK_DEV_IO_TRACE / tracepoints)",
            t.name
        ));
    }
    let attach = if btf { trials::attach_kinds(privileged) } else { Vec::new() };
    attach_findings(&attach, privileged, btf, &mut problems, &mut notes);
    if !tracepoints.iter().any(|t| t.name.starts_with("nvme:") && t.present) {
        notes.push(
            "no nvme tracepoints (no NVMe driver loaded): the device phase is not split into driver and device".into(),
        );
    }
    let iommu = sysconf::iommu_state(roots);
    if iommu.group_types.is_empty() {
        notes.push("no IOMMU groups: DMA is untranslated, iommu map/unmap will count 0".into());
    }
    // The plan carried out: every program of the default trace loaded and attached, then let go.
    // Only that says "works" (a plan's prediction alone said so on kernels where it failed).
    let mut plan = planned.clone();
    let mut dry_run = None;
    let mut always = None;
    let mut one_hook = None;
    if privileged && btf && tfs.is_some() {
        if let Some(why) = planned.fatal() {
            problems.push(why);
        } else {
            let ksyms = crate::probe::kallsyms::lookup(&hooks::symbols());
            always = Some(always_on(&facts, &ksyms));
            let o = PlanOptions { top: true, one_hook: true, ..Default::default() };
            one_hook = Some(match crate::probe::stamps::dry_run(plan::plan(&facts, &o), &ksyms) {
                Ok(hooks) => OneHook { hooks, error: None },
                Err(e) => OneHook { hooks: Vec::new(), error: Some(format!("{e:#}")) },
            });
            match crate::probe::load::dry_run(planned.clone(), &ksyms) {
                Ok(p) => {
                    plan = p;
                    dry_run = Some(Ok(()));
                }
                Err(e) => {
                    problems.push(format!("the default trace's programs did not load here: {e:#}"));
                    dry_run = Some(Err(format!("{e:#}")));
                }
            }
        }
    }
    // Without root, kallsyms reads as zeros and tracefs is closed: every route would look
    // unfollowed for want of what this user cannot see. Say unknown instead.
    let routes = if tfs.is_some() && privileged { routes::routes(&plan, &facts) } else { Vec::new() };
    let tracing_possible = problems.is_empty();
    let trace_plan = if tfs.is_some() { trace_plan(&plan) } else { Vec::new() };
    Doctor {
        schema: "iopath.doctor/1",
        kernel: sysconf::kernel_release(roots),
        root: privs.root,
        cap_sys_admin: privs.cap_sys_admin,
        cap_bpf: privs.cap_bpf,
        cap_perfmon: privs.cap_perfmon,
        btf,
        tracefs: tfs.as_ref().map(|t| t.path.display().to_string()),
        tracefs_mounted_by_iopath: tfs.as_ref().is_some_and(|t| t.mounted_by_us),
        tracefs_error,
        tracepoints,
        attach,
        block_devices: sysconf::block_devices(roots),
        nvme_poll_queues: sysconf::nvme_poll_queues(roots),
        iommu,
        trace_plan,
        bpf_build: plan.flavour,
        features: plan.features.clone(),
        dry_run,
        facts,
        routes,
        problems,
        notes,
        tracing_possible,
        always_on: always,
        one_hook,
        stamps_checked: None,
        filesystems: None,
    }
}

/// The plan's tracepoint hooks, each listed once (the trace's where top's shares it).
fn tracepoint_statuses(planned: &plan::Plan) -> Vec<TracepointStatus> {
    planned
        .hooks
        .iter()
        .filter(|h| hooks::is_tracepoint(h.name))
        // A tracepoint two hooks serve (the trace's and top's) is listed once: the trace's.
        .filter({
            let mut seen = std::collections::HashSet::new();
            move |h| seen.insert(h.name)
        })
        .map(|h| TracepointStatus {
            name: h.name.to_owned(),
            present: h.present,
            used_for: h.used_for,
            required: h.feature == Feature::BlockCore,
        })
        .collect()
}

/// What the attach kinds tried say: no tracepoint program at all is a problem; no tp_btf, fentry or
/// kprobe a note.
fn attach_findings(
    attach: &[AttachResult],
    privileged: bool,
    btf: bool,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let ok = |k: AttachKind| attach.iter().any(|a| a.kind == k && a.ok);
    if privileged && btf && !ok(AttachKind::TpBtf) && !ok(AttachKind::RawTp) && !ok(AttachKind::Tracepoint) {
        problems.push("no tracepoint program could be loaded and attached (see the attach lines): check lockdown (/sys/kernel/security/lockdown) and dmesg".into());
    }
    if !ok(AttachKind::TpBtf) && ok(AttachKind::Tracepoint) {
        notes.push("tp_btf is unavailable: completion-side probes fall back to raw_tp or classic tracepoints, which can miss events under recursion (counted as recursion_misses)".into());
    }
    for k in [AttachKind::Fentry, AttachKind::Kprobe] {
        if privileged && !ok(k) {
            notes.push(format!(
                "{} programs cannot attach here: optional extras are skipped; tracepoints carry the phases",
                k.name()
            ));
        }
    }
}

/// How each hook is attached on this kernel, from the plan the dry run carried out.
fn trace_plan(plan: &plan::Plan) -> Vec<(String, String)> {
    plan.hooks
        .iter()
        .map(|h| {
            let how = match &h.choice {
                Choice::Load { via, target, .. } if h.name.ends_with(&format!(":{target}")) => (*via).to_owned(),
                Choice::Load { via, target, .. } => format!("{via} ({target})"),
                Choice::Off { why } => format!("off: {why}"),
                Choice::Unused { why } => format!("not used: {why}"),
            };
            (h.name.to_owned(), how)
        })
        .collect()
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

pub fn render_text(d: &Doctor, w: &mut impl Write) -> io::Result<()> {
    render_access(d, w)?;
    render_plan(d, w)?;
    render_devices(d, w)?;
    if let Some(t) = &d.filesystems {
        crate::fs_trials::render(t, w)?;
    }
    render_verdict(d, w)
}

/// The kernel, privileges, BTF, tracefs, the BPF build, the attach kinds tried.
fn render_access(d: &Doctor, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "iopath doctor — kernel {}", d.kernel)?;
    writeln!(
        w,
        "  privileges  root: {}  CAP_SYS_ADMIN: {}  CAP_BPF: {}  CAP_PERFMON: {}",
        yes(d.root),
        yes(d.cap_sys_admin),
        yes(d.cap_bpf),
        yes(d.cap_perfmon)
    )?;
    writeln!(w, "  BTF         {}", if d.btf { "/sys/kernel/btf/vmlinux" } else { "MISSING" })?;
    writeln!(
        w,
        "  tracefs     {}{}",
        d.tracefs.as_deref().or(d.tracefs_error.as_deref()).unwrap_or("not available"),
        if d.tracefs_mounted_by_iopath {
            " (was not mounted: iopath mounted it for this check and unmounted it)"
        } else {
            ""
        }
    )?;
    writeln!(w, "  BPF build   {}", d.bpf_build.name())?;
    writeln!(w, "\n  attach kinds (each loaded and attached for real):")?;
    for a in &d.attach {
        match &a.error {
            None => writeln!(w, "    {:<11} ok", a.kind.name())?,
            Some(e) => writeln!(w, "    {:<11} FAILED  {e}", a.kind.name())?,
        }
    }
    Ok(())
}

/// The table's hooks on no tracepoint (function probes, the sampler's perf event) and how each
/// attaches here.
fn render_other_hooks(d: &Doctor, w: &mut dyn Write) -> io::Result<()> {
    let mut other = d.trace_plan.iter().filter(|(n, _)| !hooks::is_tracepoint(n)).peekable();
    if other.peek().is_none() {
        return Ok(());
    }
    writeln!(w, "\n  function probes and perf events (and how each attaches here):")?;
    for (name, how) in other {
        let (kind, what) = if how.starts_with("off:") || how.starts_with("not used:") {
            ("-", how.as_str())
        } else {
            (how.as_str(), hooks::HOOKS.iter().find(|h| h.name == name).map_or("", |h| h.used_for))
        };
        writeln!(w, "    {name:<47} {kind:<22} {what}")?;
    }
    Ok(())
}

/// What the plan does here: each tracepoint and how it attaches, the features, the one-hook tier,
/// always-on, the routes followed.
fn render_plan(d: &Doctor, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "\n  tracepoints (and how 'iopath trace' attaches each here):")?;
    if d.tracepoints.is_empty() && d.tracefs.is_none() {
        writeln!(w, "    not listed: tracefs could not be read (above)")?;
    }
    for t in &d.tracepoints {
        let mark = match (t.present, t.required) {
            (true, _) => "present",
            (false, true) => "MISSING",
            (false, false) => "absent ",
        };
        let how = d.trace_plan.iter().find(|(n, _)| *n == t.name).map_or("", |(_, h)| h.as_str());
        // A hook not attached says why instead of what it is for.
        let (kind, what) =
            if how.starts_with("off:") || how.starts_with("not used:") { ("-", how) } else { (how, t.used_for) };
        writeln!(w, "    {mark}  {:<38} {:<22} {what}", t.name, kind)?;
    }
    render_other_hooks(d, w)?;
    writeln!(w, "\n  features (on: loaded and attached by the dry run; off: the kernel's reason):")?;
    for f in d.features.iter().filter(|f| !f.unused) {
        match (&f.why, f.on) {
            (_, true) => writeln!(w, "    on   {}", f.title)?,
            (why, false) => writeln!(w, "    OFF  {}: {}", f.title, why.as_deref().unwrap_or("not loaded"))?,
        }
    }
    if let Some(one) = &d.one_hook {
        writeln!(w, "\n  one hook ('iopath top' and 'serve' by default, loaded and attached for real):")?;
        match &one.error {
            Some(e) => writeln!(w, "    FAILED  {e}")?,
            None => {
                for (hook, how) in &one.hooks {
                    writeln!(w, "    {hook:<28} {how}")?;
                }
                writeln!(
                    w,
                    "    block and device phases from each request's stamps, trusted per device only once checked \
                     against the hooks (top's header, iopath_stamps_trusted); no process, submission or completion"
                )?;
            }
        }
    }
    if let Some(a) = &d.always_on {
        writeln!(w, "\n  always on with --phases ('iopath top' and 'serve', loaded and attached for real):")?;
        match &a.error {
            Some(e) => writeln!(w, "    FAILED  {e}")?,
            None => {
                let names: Vec<&str> = a.hooks.iter().map(|(n, _)| n.as_str()).collect();
                writeln!(w, "    hooks       {} ({})", a.hooks.len(), names.join(", "))?;
            }
        }
        writeln!(w, "    sync, aio   {}", a.sync_io)?;
        writeln!(w, "    io_uring    from io_uring taking the SQE to its completion's posting (the reap is not seen)")?;
    }
    writeln!(w, "\n  routes (how an I/O reaches the disk, and whether 'iopath trace' follows it here):")?;
    if d.routes.is_empty() {
        writeln!(w, "    unknown: tracefs and kernel symbols are root's (see the verdict); run doctor as root")?;
    }
    for r in &d.routes {
        if r.followed {
            writeln!(w, "    followed      {:<46} {}", r.name, r.note)?;
        } else {
            writeln!(w, "    NOT followed  {:<46} {}", r.name, r.missing.join("; "))?;
        }
    }
    Ok(())
}

/// The block devices, their stamps (expected, and measured with --stamps), the IOMMU.
fn render_devices(d: &Doctor, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "\n  block devices:")?;
    writeln!(
        w,
        "    {:<10} {:<12} {:>6} {:>6} {:>8} {:>8}  {:<14} model",
        "name", "scheduler", "hwq", "lbs", "iostats", "io_poll", "write_cache"
    )?;
    for b in &d.block_devices {
        let opt = |v: Option<bool>| v.map_or("-", yes);
        writeln!(
            w,
            "    {:<10} {:<12} {:>6} {:>6} {:>8} {:>8}  {:<14} {}",
            b.name,
            b.scheduler.as_deref().unwrap_or("-"),
            b.nr_hw_queues.map_or("-".into(), |n| n.to_string()),
            b.logical_block_size.map_or("-".into(), |n| n.to_string()),
            opt(b.iostats),
            opt(b.io_poll),
            b.write_cache.as_deref().unwrap_or("-"),
            b.model.as_deref().unwrap_or("")
        )?;
    }
    writeln!(
        w,
        "    nvme poll_queues: {}",
        d.nvme_poll_queues.map_or("nvme driver not loaded".into(), |n| n.to_string())
    )?;
    writeln!(
        w,
        "\n  the kernel's own stamps per disk (expected from sysfs, not measured: doctor --stamps 2 checks them):"
    )?;
    // An unattached loop device has no I/O to stamp.
    for b in d.block_devices.iter().filter(|b| b.size_sectors != Some(0)) {
        let (issue, queue) = stamps_expected(b);
        writeln!(w, "    {:<10} io_start_time_ns {issue}", b.name)?;
        writeln!(w, "    {:<10} start_time_ns    {queue}", "")?;
    }
    if let Some(c) = &d.stamps_checked {
        writeln!(w, "\n  stamps checked against the hooks on this host's own I/O over {:.1} s (measured):", c.secs)?;
        if let Some(e) = &c.error {
            writeln!(w, "    FAILED  {e}")?;
        }
        for (disk, line) in &c.disks {
            writeln!(w, "    {disk:<10} {line}")?;
        }
        if c.disks.is_empty() && c.error.is_none() {
            writeln!(w, "    no disk did enough I/O in the window to be judged (20 requests): run it under load")?;
        }
    }
    writeln!(w, "\n  IOMMU       {}", d.iommu.mode)?;
    if !d.iommu.cmdline.is_empty() {
        writeln!(w, "    cmdline   {}", d.iommu.cmdline.join(" "))?;
    }
    match &d.iommu.config_source {
        Some(src) if d.iommu.config.is_empty() => writeln!(w, "    config    {src}: no CONFIG_IOMMU_DEFAULT_* set")?,
        Some(src) => writeln!(w, "    config    {src}: {}", d.iommu.config.join(" "))?,
        None => writeln!(w, "    config    not found (/proc/config.gz, /boot/config-{})", d.kernel)?,
    }
    Ok(())
}

/// The notes and whether tracing works here.
fn render_verdict(d: &Doctor, w: &mut dyn Write) -> io::Result<()> {
    if !d.notes.is_empty() {
        writeln!(w, "\n  notes:")?;
        for n in &d.notes {
            writeln!(w, "    - {n}")?;
        }
    }
    writeln!(w)?;
    if d.tracing_possible {
        writeln!(w, "  verdict: tracing works here.")?;
    } else {
        writeln!(w, "  verdict: tracing is NOT possible here:")?;
        for p in &d.problems {
            writeln!(w, "    - {p}")?;
        }
    }
    Ok(())
}
