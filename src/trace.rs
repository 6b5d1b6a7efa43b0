//! `iopath trace`: the bundled generator under the probes; one library call for the CLI.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::job::Job;
use crate::model::RawTrace;
use crate::probe::{options::TraceOpts, session};
use crate::report::{Process, Report};
use crate::sysconf::{self, SysRoots};
use crate::{aggregate, loadgen};

/// Refuses clearly when tracing cannot work, before any I/O.
pub fn check_can_trace(roots: &SysRoots) -> Result<()> {
    check_can_trace_for(roots, "trace")
}

/// `check_can_trace` for the command `cmd` (trace, sweep, top, serve): its own name in the fix.
pub fn check_can_trace_for(roots: &SysRoots, cmd: &str) -> Result<()> {
    if !sysconf::Privileges::of_this_process(roots).can_trace() {
        let fix = match cmd {
            "serve" => "run it as root, or as the service docs/fleet/iopath.service describes (its capabilities)",
            "top" => "run 'sudo iopath top'",
            "sweep" => "run 'sudo iopath sweep ...', or add --no-trace to measure without tracing",
            _ => "run 'sudo iopath trace ...'; 'iopath run' measures without tracing",
        };
        bail!("iopath {cmd} needs root (or CAP_BPF and CAP_PERFMON) to load its probes: {fix}");
    }
    if sysconf::kallsyms_hidden(roots) {
        bail!(
            "/proc/kallsyms shows this user no addresses (kptr_restrict): iopath needs them to tell the I/O routes \
             apart; run as root or add CAP_SYSLOG (docs/fleet/iopath.service lists the capabilities)"
        );
    }
    if !roots.sys.join("kernel/btf/vmlinux").exists() {
        bail!("this kernel has no BTF (/sys/kernel/btf/vmlinux): iopath's CO-RE probes need CONFIG_DEBUG_INFO_BTF=y. 'iopath run' still works");
    }
    Ok(())
}

/// Prepares the target untraced (file layout is not the workload), then runs the job with every
/// probe attached and returns the report and the probes' raw data.
/// How to trace, beyond what to trace.
#[derive(Clone, Debug, Default)]
pub struct TraceFlags {
    pub force_raw_tp: bool,
    pub prog_stats: bool,
    pub events: bool,
    pub events_out: Option<std::path::PathBuf>,
    /// Stacks for flamegraphs (None: off).
    pub stacks: Option<crate::probe::options::StackOpts>,
    pub doorbell: crate::probe::options::Doorbell,
    pub skip_hooks: Vec<String>,
    pub empty_probes: bool,
    /// `--issue-hook`: block_rq_issue attached for the whole lean trace.
    pub issue_hook: bool,
    pub hooks: HookSet,
    pub pagecache: crate::probe::options::PageCacheMode,
    /// The time series' interval (a traced command or process; the generator's is the job's).
    pub interval: std::time::Duration,
    /// `--perfetto FILE`: the events (kept in FILE.events while tracing unless --events-out
    /// names a file) and the disks' interrupt stamps, written as a Perfetto trace after.
    pub perfetto: Option<std::path::PathBuf>,
}

impl TraceFlags {
    /// The probes' options these flags set, the one place they are converted; what to trace
    /// (the process, its disks' interrupts, the generator's stamps) is the caller's to add.
    pub fn opts(&self) -> TraceOpts {
        TraceOpts {
            force_raw_tp: self.force_raw_tp,
            prog_stats: self.prog_stats,
            events: self.events_on(),
            events_out: self.events_file(),
            stacks: self.stacks.clone(),
            doorbell: self.doorbell,
            skip_hooks: self.skip_hooks.clone(),
            empty_probes: self.empty_probes,
            pagecache: self.pagecache,
            irq_stamps: self.perfetto.is_some(),
            issue_hook: self.issue_hook,
            ..TraceOpts::default()
        }
    }

    fn events_on(&self) -> bool {
        self.events || self.events_out.is_some() || self.perfetto.is_some()
    }

    /// Where the records go: --events-out, else a nameless file beside the Perfetto file for the
    /// conversion (never a name of the user's: `X.events.tmp` had been deleted, whatever it was).
    fn events_file(&self) -> Option<crate::probe::options::EventsOut> {
        use crate::probe::options::EventsOut;
        match (&self.events_out, &self.perfetto) {
            (Some(p), _) => Some(EventsOut::File(p.clone())),
            (None, Some(p)) => Some(EventsOut::Scratch(p.clone())),
            (None, None) => None,
        }
    }
}

/// `--perfetto`'s file into the report; one that could not be written is a warning in the
/// report and an error after it (`Report::output_errors`): the report is never lost for it.
fn perfetto_into(rep: &mut Report, flags: &TraceFlags, raw: &RawTrace, irqs: &[u32]) {
    if let Some(e) = &raw.events_file_error {
        // Says which output it cost (--events-out, or --perfetto's events): once.
        rep.warnings.push(e.clone());
        rep.output_errors.push(e.clone());
        if flags.events_out.is_some() && flags.perfetto.is_some() {
            let e = "--perfetto not written: its events (--events-out) were not kept".to_owned();
            rep.warnings.push(e.clone());
            rep.output_errors.push(e);
        }
        return;
    }
    match write_perfetto(flags, raw, irqs) {
        Ok(w) => {
            rep.perfetto = w.map(|w| crate::report::PerfettoFile {
                path: flags.perfetto.clone().unwrap_or_default(),
                ios: w.ios,
                skipped: w.skipped,
                irqs: w.irqs,
                tracks: w.tracks,
                irqs_dropped: raw.irq_stamps_dropped,
            })
        }
        Err(e) => {
            let e = format!("--perfetto not written: {e:#}");
            rep.warnings.push(e.clone());
            rep.output_errors.push(e);
        }
    }
}

/// `--perfetto`: the events (the --events-out file, or the nameless scratch file) and the
/// stamps as a Perfetto trace.
pub fn write_perfetto(
    flags: &TraceFlags,
    raw: &crate::model::RawTrace,
    irqs: &[u32],
) -> Result<Option<crate::perfetto::Written>> {
    let Some(out) = &flags.perfetto else { return Ok(None) };
    let roots = SysRoots::live();
    let read = |f: &std::fs::File| -> Result<Vec<crate::events::IoRecord>> {
        let mut rs = crate::events::Records::new(std::io::BufReader::new(f))?;
        let mut v = Vec::new();
        while let Some(r) = rs.next_record()? {
            v.push(r);
        }
        Ok(v)
    };
    let records = match (&flags.events_out, &raw.events_scratch) {
        (Some(p), _) => {
            let f = std::fs::File::open(p).with_context(|| format!("reading {}", p.display()))?;
            read(&f).with_context(|| format!("reading {}", p.display()))?
        }
        (None, Some(s)) => read(&s.0).context("reading back the trace's events")?,
        (None, None) => bail!("the trace kept no events to convert"),
    };
    let mut names = crate::perfetto::Names { devs: sysconf::dev_names(&roots), ..Default::default() };
    for r in &records {
        names.procs.entry(r.tgid).or_insert_with(|| {
            std::fs::read_to_string(roots.proc.join(format!("{}/comm", r.tgid))).map_or_else(
                |_| format!("pid {}", r.tgid),
                |c| format!("{} {}", crate::untrusted::visible(c.trim_end_matches('\n')), r.tgid),
            )
        });
    }
    for (irq, name) in irqs.iter().zip(sysconf::irq_names(&roots, irqs)) {
        names.irqs.insert(*irq, name);
    }
    // Rendered in memory, then written under a temporary name and renamed (output::write_file).
    let mut buf = Vec::new();
    let written = crate::perfetto::write(&records, &raw.irq_stamps, &names, &mut buf)
        .with_context(|| format!("writing {}", out.display()))?;
    crate::output::write_file(out, buf)?;
    Ok(Some(written))
}

/// Which hooks a trace of the bundled generator attaches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HookSet {
    /// Lean where the job allows it (direct io_uring or aio), every hook otherwise.
    #[default]
    Auto,
    /// `--lean`: only the four phases' hooks; refused where the job's route needs more.
    Lean,
    /// `--full`: the scheduler, softirq and syscall hooks too (per-I/O context switches,
    /// preemption, run-queue waits, BLOCK softirq time, syscall counts).
    Full,
}

/// The hooks a generator job gets. The lean set is the default where it follows the job: the
/// scheduler, softirq and syscall hooks cost ~0.5-1 us of BPF per I/O on the submitting thread
/// (0.65x untraced against the one-phase peer's 0.76x, loop device QD32: docs/performance.md).
pub fn hook_set(job: &Job, hooks: HookSet) -> Result<crate::probe::options::Lean> {
    use crate::job::EngineKind;
    use crate::probe::options::Lean;
    let fits = match job.engine {
        EngineKind::Uring if job.direct => Some(Lean::Uring),
        EngineKind::Aio if job.direct => Some(Lean::Aio),
        _ => None,
    };
    Ok(match (hooks, fits) {
        (HookSet::Full, _) | (HookSet::Auto, None) => Lean::Off,
        (_, Some(lean)) => lean,
        (HookSet::Lean, None) => bail!(
            "--lean follows direct io_uring and aio only (it claims a request at its first bio, or has no \
             syscall hook, which the other routes are timed by): use it with --engine uring or aio and \
             --direct true, or drop it"
        ),
    })
}

pub fn run(job: &Job, flags: &TraceFlags) -> Result<(Report, RawTrace)> {
    anyhow::ensure!(
        !(flags.pagecache == crate::probe::options::PageCacheMode::Count && job.direct),
        "--pagecache count leaves out the syscall hooks that the direct (O_DIRECT) routes are timed by: \
         use it with --direct false, or drop it"
    );
    use crate::job::EngineKind;
    use crate::probe::options::Lean;
    let lean = hook_set(job, flags.hooks)?;
    let roots = SysRoots::live();
    check_can_trace(&roots)?;
    let target = loadgen::prepare(job)?;
    let irqs = target.disk.as_deref().map(|d| sysconf::device_irqs(&roots, d)).unwrap_or_default();
    let names = sysconf::irq_names(&roots, &irqs);
    let irq_list = irqs.clone();
    let opts = TraceOpts {
        // SAFETY: getpid/gettid have no preconditions.
        tgid: unsafe { libc::getpid() } as u32,
        exclude_tids: vec![unsafe { libc::gettid() } as u32],
        irqs,
        app_stamp: job.engine != crate::job::EngineKind::Psync,
        // SQPOLL and lean io_uring: the generator times its reap from the probes' posting
        // times; lean aio: the probes start each I/O at the generator's io_submit time.
        clock_slots: if (job.engine == EngineKind::Uring && (job.sqpoll || lean == Lean::Uring)) || lean == Lean::Aio {
            job.jobs * job.qd
        } else {
            0
        },
        lean,
        series: (!job.interval.is_zero()).then_some((job.interval, crate::probe::series::Start::Generator)),
        fs_endio: target.fs_type == "btrfs",
        ..flags.opts()
    };
    let (outcome, raw) = session::trace(&opts, || loadgen::run_prepared(job, target))?;
    let summary = aggregate::summarize(&raw, outcome.stats.ios());
    let machine = crate::report::Captured::for_run(&outcome);
    let mut rep = Report::from_run(job, outcome, machine).with_trace(summary, names);
    if let (Some(ts), Some(rs)) = (rep.timeseries.as_mut(), &raw.series) {
        crate::timeseries::with_trace(ts, rs, !raw.lean);
    }
    skipped_note(&mut rep, flags);
    perfetto_into(&mut rep, flags, &raw, &irq_list);
    Ok((rep, raw))
}

/// `--skip-hooks`: said as the user's choice, never as something this kernel lacks.
fn skipped_note(rep: &mut Report, flags: &TraceFlags) {
    if !flags.skip_hooks.is_empty() {
        rep.warnings.push(format!(
            "hooks whose name contains {} were left out by --skip-hooks (not by the kernel): what they time is not measured",
            flags.skip_hooks.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ")
        ));
    }
}

/// A process to trace that is not the bundled generator.
pub enum External {
    Pid(u32),
    Command(Vec<String>),
}

/// Every block device's interrupt vectors: another process may do I/O on any of them.
fn all_disk_irqs(roots: &SysRoots) -> (Vec<u32>, Vec<String>) {
    let mut irqs: Vec<u32> =
        sysconf::block_devices(roots).iter().flat_map(|b| sysconf::device_irqs(roots, &b.name)).collect();
    irqs.sort_unstable();
    irqs.dedup();
    let names = sysconf::irq_names(roots, &irqs);
    (irqs, names)
}

/// Every process below `pid` now (children, their children ...), from /proc's parent links: a
/// running fio's workers or a PostgreSQL postmaster's backends, forked before the trace began.
/// Threads need no listing: they share their process's tgid.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some((_, pp)) = crate::watchdog::start_and_parent(p) {
            parent_of.push((p, pp));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(q) = frontier.pop() {
        for &(c, _) in parent_of.iter().filter(|&&(c, pp)| pp == q && c != pid) {
            if !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// utime + stime of `pid` and every process below it, with the children they reaped (cutime,
/// cstime: a PostgreSQL backend that exits lands in the postmaster's). The postmaster alone showed
/// 0.0% CPU while its backends ran pgbench.
fn tree_cpu(pid: u32) -> Option<(u64, u64)> {
    let with_reaped = |p: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let f: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).map(|t| t * 1_000_000_000 / hz);
        Some((tick(11)? + tick(13)?, tick(12)? + tick(14)?))
    };
    let own = with_reaped(pid)?;
    Some(descendants(pid).into_iter().filter_map(with_reaped).fold(own, |a, c| (a.0 + c.0, a.1 + c.1)))
}

/// What `ps` would call the process: its command line, else (a kernel thread, or a process
/// that has exited: no cmdline) its comm in brackets, else its pid; control characters spelled
/// out (`untrusted::visible`), as for every name iopath did not write.
fn command_line(pid: u32) -> String {
    let args = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    if !args.is_empty() {
        return crate::untrusted::visible(&args).into_owned();
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(c) if !c.trim_end_matches('\n').is_empty() => {
            format!("[{}]", crate::untrusted::visible(c.trim_end_matches('\n')))
        }
        _ => format!("pid {pid} (its name unknown: it had exited)"),
    }
}

/// A command interrupted (--duration, Ctrl-C) that has not exited after this long is killed.
const KILL_AFTER_NS: u64 = 5_000_000_000;

/// The traced process: one already running, or a command started behind a gate (a pipe on fd 3)
/// that opens once the probes are attached, watched so that it cannot outlive iopath.
struct Target {
    pid: u32,
    gate: Option<i32>,
    watchdog: Option<crate::watchdog::Watchdog>,
}

/// Checks the pid, or starts the command behind its gate.
fn start_target(what: &External) -> Result<Target> {
    Ok(match what {
        External::Pid(pid) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                bail!("no process {pid}: check the pid (ps -p {pid}); to trace a command from its start use 'iopath trace -- CMD ARGS'");
            }
            if crate::watchdog::ended(*pid) {
                bail!(
                    "process {pid} has already exited (a zombie its parent has not reaped): there is nothing left to trace; \
                     to trace a command from its start use 'iopath trace -- CMD ARGS'"
                );
            }
            Target { pid: *pid, gate: None, watchdog: None }
        }
        External::Command(argv) => {
            if argv.is_empty() {
                bail!("nothing to run after '--': give a command, e.g. iopath trace -- fio job.fio");
            }
            // The command waits behind a gate (a pipe on fd 3) until the probes are attached,
            // then the shell execs it under the same pid.
            let mut fds = [0i32; 2];
            // SAFETY: pipe2 fills two fds.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                bail!("pipe: {}", std::io::Error::last_os_error());
            }
            let (rd, wr) = (fds[0], fds[1]);
            let mut cmd = std::process::Command::new("/bin/sh");
            // A gate that cannot be read must not let the command start untraced: exit 125.
            cmd.arg("-c").arg("read _ <&3 || exit 125; exec 3<&-; exec \"$@\"").arg("iopath-gate").args(argv);
            // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    // dup2 onto itself keeps O_CLOEXEC: clear it explicitly in that case.
                    let ok = if rd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(rd, 3) };
                    // iopath killed (SIGKILL: no handler runs): the command stops at once, its
                    // tree intact (killed, its children would go to pid 1 out of reach), and the
                    // watchdog ends the whole tree (crate::watchdog).
                    if ok >= 0 && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGSTOP as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if ok < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            crate::watchdog::become_subreaper();
            let child = cmd.spawn().with_context(|| format!("cannot start '{}'", argv[0]))?;
            // SAFETY: closing our copy of the read end.
            unsafe { libc::close(rd) };
            let watchdog = match crate::watchdog::Watchdog::start(child.id()) {
                Ok(w) => w,
                Err(e) => {
                    // SAFETY: the command, still behind its gate, must not run unwatched.
                    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                    return Err(e);
                }
            };
            Target { pid: child.id(), gate: Some(wr), watchdog: Some(watchdog) }
        }
    })
}

/// How the watch over a traced process ended.
#[derive(Default)]
struct Watched {
    /// A command's exit status (128 + the signal when a signal ended it).
    exit_code: Option<i32>,
    /// A command's CPU time (user, system), from wait4.
    child_cpu: (u64, u64),
    /// A running process tree's CPU time at the last look.
    last_cpu: (u64, u64),
    /// A traced pid exited before the trace ended.
    exited_early: bool,
    /// --duration ended it.
    timed_out: bool,
    /// iopath interrupted the command (--duration or Ctrl-C).
    interrupted: bool,
}

/// Watches `pid` every 20 ms until it exits, `deadline` passes or a stop is requested. A command
/// (`gated`) is waited for: interrupted (SIGINT) at the deadline or on a stop, killed if it has not
/// exited 5 s later; a running process is left alone, its tree's CPU read every 0.5 s.
fn watch(pid: u32, gated: bool, deadline: Option<u64>, cpu_start: (u64, u64)) -> Watched {
    let mut w = Watched { last_cpu: cpu_start, ..Watched::default() };
    let mut signalled = false;
    let mut signalled_at = 0;
    let mut ticks = 0u32;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if gated {
            let mut status = 0;
            // SAFETY: rusage is plain data filled by the kernel.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::wait4(pid as i32, &mut status, libc::WNOHANG, &mut ru) };
            if r == pid as i32 {
                let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
                w.child_cpu = (ns(ru.ru_utime), ns(ru.ru_stime));
                w.exit_code = Some(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                });
                break;
            }
            let over = deadline.is_some_and(|d| loadgen::now_ns() >= d);
            w.timed_out |= over && !signalled && !crate::stop::requested();
            if (crate::stop::requested() || over) && !signalled {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid as i32, libc::SIGINT) };
                signalled = true;
                w.interrupted = true;
                signalled_at = loadgen::now_ns();
            } else if signalled && loadgen::now_ns() - signalled_at > KILL_AFTER_NS {
                // It ignored SIGINT: the trace must end anyway.
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        } else {
            // Gone, or a zombie: its I/O is over (a zombie's /proc entry stays until reaped).
            if crate::watchdog::ended(pid) {
                w.exited_early = true;
                break;
            }
            // The tree's CPU every 0.5 s, not every 20 ms: it reads /proc whole.
            ticks += 1;
            if ticks % 25 == 0 {
                w.last_cpu = tree_cpu(pid).unwrap_or(w.last_cpu);
            }
            if crate::stop::requested() {
                break;
            }
            if deadline.is_some_and(|d| loadgen::now_ns() >= d) {
                w.timed_out = true;
                break;
            }
        }
    }
    w
}

/// What the report says of how the trace ended: an early exit, Ctrl-C, what was killed, --duration.
fn ending_warnings(
    what: &External,
    pid: u32,
    duration: Option<Duration>,
    w: &Watched,
    elapsed: u64,
    left_running: usize,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if w.exited_early {
        warnings.push(format!("process {pid} exited during the trace: the report covers it until then"));
    }
    if matches!(what, External::Pid(_)) && crate::stop::requested() && !w.exited_early {
        warnings.push(format!(
            "traced for {:.1} s, until Ctrl-C; process {pid} was left running, untouched",
            elapsed as f64 / 1e9
        ));
    }
    if left_running > 0 {
        warnings.push(format!(
            "the command's tree still had {left_running} process(es) running when the trace ended: iopath killed them, \
             as every end of a traced command does (they are not in the report past that point)"
        ));
    }
    if let (true, Some(d)) = (w.timed_out, duration) {
        warnings.push(match &what {
            External::Pid(_) => {
                format!("traced for {d:?} (--duration) and stopped; process {pid} was left running, untouched")
            }
            External::Command(_) => format!(
                "the command was still running after {d:?} (--duration): iopath interrupted it (SIGINT) and traced it until it exited"
            ),
        });
    }
    warnings
}

/// What was followed and what was seen, for a trace that saw no I/O (so "nothing" can be checked
/// against what the user expected).
fn nothing_seen_warnings(what: &External, pid: u32, children: &[u32], raw: &RawTrace) -> Vec<String> {
    let mut warnings = Vec::new();
    // What was followed, so "nothing seen" can be checked against what the user expected.
    warnings.push(match (&what, children.len()) {
        (External::Command(_), _) => format!("followed: the command (pid {pid}), its threads and every process it forked"),
        (External::Pid(_), 0) => format!("followed: pid {pid} and its threads, and any process it forked during the trace (it had no children at the start)"),
        (External::Pid(_), n) => format!(
            "followed: pid {pid}, its {n} child processes at the start ({}), their threads, and any process forked during the trace",
            children.iter().take(8).map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    });
    let cached = raw.counter(crate::model::Counter::NoBlockIo);
    warnings.push(if cached > 0 {
        format!("no I/O of this process reached a block device: its {cached} reads and writes of files were served by the page cache (buffered I/O)")
    } else {
        "no read or write of a file or block device was seen (io_uring, libaio or read/write/pread/preadv2 and their write twins)".into()
    });
    warnings
}

/// Traces another process (and what it forks) until it exits, `duration` passes, or Ctrl-C.
pub fn run_external(what: External, duration: Option<Duration>, flags: &TraceFlags) -> Result<(Report, RawTrace)> {
    anyhow::ensure!(
        flags.hooks != HookSet::Lean,
        "--lean needs the bundled generator, whose direct I/O it knows (its io_uring reap is timed by the \
         generator, its aio requests are claimed at their bios): drop --lean to trace a process or command"
    );
    let roots = SysRoots::live();
    check_can_trace(&roots)?;
    let (irqs, irq_names) = all_disk_irqs(&roots);
    let irq_list = irqs.clone();
    let Target { pid, gate, watchdog } = start_target(&what)?;
    // A running process's existing children are part of it (fio's workers do the I/O).
    let children = match &what {
        External::Pid(_) => descendants(pid),
        External::Command(_) => Vec::new(),
    };
    let opts = TraceOpts {
        irqs,
        tree: std::iter::once(pid).chain(children.iter().copied()).collect(),
        series: (!flags.interval.is_zero()).then_some((flags.interval, crate::probe::series::Start::Now)),
        fs_endio: sysconf::mounted(&roots, "btrfs"),
        ..flags.opts()
    };
    // The cgroup now, while the process surely exists (a command may be gone by the report).
    let cgroup = sysconf::cgroup_io(&roots, pid);
    // Both set once the probes are attached: loading them takes seconds of the verifier's time
    // (1.8 s for 29 programs on 6.18), which a --duration must not spend, nor the rate and CPU
    // per I/O count (a 1.5 s --pid trace saw 20 ms of I/O and 580 us of CPU per I/O before).
    let mut cpu_before = (0, 0);
    let mut start = loadgen::now_ns();
    let mut watched = Watched::default();
    let attached_line = match &what {
        External::Pid(_) => Some(format!(
            "iopath: tracing pid {pid} and {} processes below it, {}",
            children.len(),
            match duration {
                Some(d) => format!("for {d:?} (Ctrl-C ends it sooner)"),
                None => "until it exits or Ctrl-C".to_owned(),
            }
        )),
        External::Command(_) => None,
    };
    let traced = session::trace(&opts, || {
        start = loadgen::now_ns();
        if let External::Pid(_) = &what {
            cpu_before = tree_cpu(pid).unwrap_or((0, 0));
        }
        // Said once the probes are on: what the user runs next is seen (scripts wait for it).
        if let Some(line) = &attached_line {
            eprintln!("{line}");
        }
        if let Some(wr) = gate {
            // SAFETY: writing one line to our pipe, then closing it: the gate opens.
            unsafe {
                libc::write(wr, b"g\n".as_ptr().cast(), 2);
                libc::close(wr);
            }
        }
        watched = watch(pid, gate.is_some(), duration.map(|d| start + d.as_nanos() as u64), cpu_before);
        Ok(())
    });
    // However the trace ended (the command's exit, --duration, a signal, an error), what the
    // command left running ends with it, as a SIGKILL of iopath ends it through the watchdog.
    let left_running = match &what {
        External::Command(_) => crate::watchdog::end_children(&watchdog.iter().map(|w| w.pid()).collect::<Vec<_>>()),
        External::Pid(_) => 0,
    };
    let ((), raw) = traced?;
    let elapsed = loadgen::now_ns() - start;
    // The command was waited for (or the trace failed above, and the watchdog ends it).
    if let Some(w) = watchdog {
        w.done();
    }
    let cpu = match &what {
        External::Pid(_) => {
            let end = tree_cpu(pid).unwrap_or(watched.last_cpu);
            (end.0.saturating_sub(cpu_before.0), end.1.saturating_sub(cpu_before.1))
        }
        External::Command(_) => watched.child_cpu,
    };
    let mut warnings = ending_warnings(&what, pid, duration, &watched, elapsed, left_running);
    let command = match &what {
        External::Command(argv) => crate::untrusted::visible(&argv.join(" ")).into_owned(),
        External::Pid(_) => command_line(pid),
    };
    use crate::model::Phase;
    let ios =
        [Phase::Total, Phase::PcRead, Phase::PcWrite, Phase::PcCopy].iter().map(|&p| raw.phase(p).count).sum::<u64>();
    if ios == 0 {
        warnings.extend(nothing_seen_warnings(&what, pid, &children, &raw));
    }
    // Every reaped event counts as an application I/O, matched or not, and so does every read or
    // write of a file that moved no block I/O of its own (served by the page cache).
    let seen = ios + raw.counter(crate::model::Counter::ReapUnmatched) + raw.counter(crate::model::Counter::NoBlockIo);
    let summary = aggregate::summarize(&raw, seen);
    // IOPS over the I/O's own span: a command's start-up and exit are not its I/O rate.
    let span = if raw.active_ns > 0 && raw.active_ns < elapsed { raw.active_ns } else { elapsed };
    let machine = crate::report::Captured::live(&[], pid);
    let mut rep = Report::from_process(
        Process { pid, command, exit_code: watched.exit_code, interrupted: watched.interrupted },
        &raw,
        span,
        cpu,
        warnings,
        machine,
        // Ctrl-C is how a --pid trace ends: its report is whole, not partial.
        crate::stop::requested() && matches!(what, External::Command(_)),
    )
    .with_trace(summary, irq_names);
    rep.config.cgroup = cgroup;
    skipped_note(&mut rep, flags);
    perfetto_into(&mut rep, flags, &raw, &irq_list);
    Ok((rep, raw))
}

/// The error for a traced command that failed, after its report was written.
pub fn command_failed(rep: &Report) -> Option<anyhow::Error> {
    let p = rep.process.as_ref().filter(|p| !p.interrupted)?;
    let code = p.exit_code?;
    let hint = match code {
        127 => " (command not found?)",
        125 => " (iopath's start gate failed: the command did not run)",
        _ => "",
    };
    (code != 0).then(|| anyhow!("the traced command exited with status {code}{hint}"))
}
