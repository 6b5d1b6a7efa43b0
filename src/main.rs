use std::io::Write;
use std::process::ExitCode;

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use clap::Parser;

use iopath::cli::{
    Cli, Command, CompareArgs, CompletionsArgs, DoctorArgs, FlamegraphArgs, ManArgs, ReportArgs, RunArgs, StudyArgs,
    SweepArgs, TraceArgs,
};
use iopath::output::{check_and_say, print, write_file};
use iopath::{doctor, loadgen, report, sysconf};

fn main() -> ExitCode {
    // The watchdog iopath starts beside a traced command (iopath::watchdog): not a subcommand a
    // user runs, so not in --help.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__watchdog") {
        let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
        if let (Some(pid), Some(start)) = (num(2), num(3)) {
            iopath::watchdog::run(pid as u32, start);
            return ExitCode::SUCCESS;
        }
        eprintln!("iopath __watchdog PID START: iopath starts this itself beside a traced command");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    iopath::probe::log::init(cli.verbose);
    // A stop request (a partial report) where one makes sense; elsewhere a signal ends the
    // command at once, temporary files removed (iopath::stop).
    let graceful = match &cli.cmd {
        Command::Run(_) | Command::Trace(_) | Command::Sweep(_) | Command::Top(_) | Command::Serve(_) => true,
        Command::Flamegraph(a) => a.perf_script.is_none() && a.diff.is_none(),
        _ => false,
    };
    if graceful {
        iopath::stop::on_signals();
    } else {
        iopath::stop::on_signals_exit();
    }
    let res = match cli.cmd {
        Command::Run(a) => run(a),
        Command::Trace(a) => trace_cmd(a, cli.verbose),
        Command::Doctor(a) => doctor_cmd(a),
        Command::Report(a) => report_cmd(a),
        Command::Flamegraph(a) => flamegraph_cmd(a, cli.verbose),
        Command::Compare(a) => compare_cmd(a),
        Command::Study(a) => study_cmd(a),
        Command::Sweep(a) => sweep_cmd(a),
        Command::Top(a) => {
            a.to_loop().and_then(|l| iopath::top::run(l, a.listen.as_deref(), "top")).map(|()| ExitCode::SUCCESS)
        }
        Command::Serve(a) => {
            a.to_loop().and_then(|l| iopath::top::run(l, Some(&a.listen), "serve")).map(|()| ExitCode::SUCCESS)
        }
        Command::Completions(a) => completions_cmd(a),
        Command::Man(a) => man_cmd(a),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("iopath: error: {e:#}{}", hint_for(&e));
            ExitCode::FAILURE
        }
    }
}

/// The fix for an error whose cause is this process's limits, wherever in the run it struck
/// (`ulimit -n 20` had failed loading the probes with a bare "Too many open files").
fn hint_for(e: &anyhow::Error) -> &'static str {
    let emfile = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.raw_os_error() == Some(libc::EMFILE))
            || c.to_string().contains("Too many open files")
    });
    if emfile {
        " (this process's open-file limit is too low: iopath holds a descriptor per BPF program, map and \
         link, about 200; raise it with 'ulimit -n 4096', or LimitNOFILE= in a systemd unit)"
    } else {
        ""
    }
}

/// `--log-prefix`'s files: PREFIX_iops.1.log and the others.
fn log_files(prefix: Option<&std::path::Path>) -> Vec<std::path::PathBuf> {
    let Some(prefix) = prefix else { return Vec::new() };
    iopath::timeseries::FioLog::ALL
        .iter()
        .map(|k| std::path::PathBuf::from(format!("{}{}", prefix.display(), k.suffix())))
        .collect()
}

/// Every file a run or trace writes, against the one rule (output::check_outputs): the job's
/// target is what no output may replace.
fn check_run_outputs(
    job: Option<&iopath::job::Job>,
    json: Option<&std::path::Path>,
    more: &[(&'static str, Option<&std::path::Path>)],
    log_prefix: Option<&std::path::Path>,
) -> Result<()> {
    let logs = log_files(log_prefix);
    let mut outs: Vec<(&str, &std::path::Path)> = json.map(|p| ("--json", p)).into_iter().collect();
    outs.extend(more.iter().filter_map(|&(f, p)| Some((f, p?))));
    outs.extend(logs.iter().map(|p| ("--log-prefix", p.as_path())));
    let target: Vec<(&std::path::Path, &str)> =
        job.map(|j| (j.target.path(), "the job's target")).into_iter().collect();
    iopath::output::check_outputs_and_say(&outs, &target)
}

fn run(a: RunArgs) -> Result<ExitCode> {
    let job = a.job.to_job()?;
    check_log_prefix(a.job.common.log_prefix.as_deref())?;
    check_run_outputs(Some(&job), a.json.as_deref(), &[], a.job.common.log_prefix.as_deref())?;
    check_and_say(a.json.as_deref(), None)?;
    let outcome = loadgen::run(&job)?;
    let machine = report::Captured::for_run(&outcome);
    let rep = report::Report::from_run(&job, outcome, machine);
    emit(&rep, a.json.as_deref())?;
    write_fio_logs(&rep, a.job.common.log_prefix.as_deref())?;
    ending(&rep, true)
}

/// `-- CMD`: the command must exist and be executable before any probe loads (a missing one had
/// been traced as its helper shell, report and all, before the 127).
fn check_command(cmd: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let runnable =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let found = if cmd.contains('/') {
        runnable(std::path::Path::new(cmd))
    } else {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| runnable(&d.join(cmd))))
    };
    anyhow::ensure!(
        found,
        "-- {cmd}: no such command{} (or not executable): nothing was traced; check its name",
        if cmd.contains('/') { "" } else { " in PATH" }
    );
    Ok(())
}

/// The exit status of a run a signal stopped (128 + signal, as a shell gives), said on stderr
/// about `what` was kept; None when no signal stopped it.
fn stopped_status(what: &str) -> Option<ExitCode> {
    let sig = iopath::stop::signal()?;
    let name = if sig == libc::SIGTERM { "SIGTERM" } else { "SIGINT" };
    eprintln!("iopath: stopped by {name}: {what} is partial (exit status {})", 128 + sig);
    Some(ExitCode::from((128 + sig) as u8))
}

/// How a run or trace ends once its report is out: stopped by a signal, its (partial) report is
/// printed and the status is the shell's 128 + signal (130 SIGINT, 143 SIGTERM), so a script can
/// tell; the generator's job that completed no I/O is an error naming why (a `--runtime 1ns` run
/// had exited 0 with "0 I/Os"). `generator`: the bundled generator ran (not --pid or -- CMD).
fn ending(rep: &report::Report, generator: bool) -> Result<ExitCode> {
    if let Some(code) = stopped_status("the report above") {
        return Ok(code);
    }
    if generator && rep.ios == 0 {
        anyhow::bail!(
            "the job completed no I/O in {:.3} ms: nothing was measured (a --runtime shorter than one I/O, or a target that returned nothing); give a longer --runtime or --ios",
            rep.runtime_ns as f64 / 1e6
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--log-prefix`: its folder must exist before the run (a run is not thrown away for it).
fn check_log_prefix(prefix: Option<&std::path::Path>) -> Result<()> {
    let Some(p) = prefix else { return Ok(()) };
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    anyhow::ensure!(
        dir.is_dir() && !p.as_os_str().to_string_lossy().ends_with('/'),
        "--log-prefix {}: {} is not an existing folder to write PREFIX_iops.1.log into: create it, or give a prefix \
         such as runs/mytest",
        p.display(),
        dir.display()
    );
    Ok(())
}

/// fio's per-interval logs of the report's time series (`--log-prefix`).
fn write_fio_logs(rep: &report::Report, prefix: Option<&std::path::Path>) -> Result<()> {
    let (Some(prefix), Some(ts)) = (prefix, &rep.timeseries) else { return Ok(()) };
    let bs = rep.job.as_ref().map_or(0, |j| u64::from(j.bs));
    for kind in iopath::timeseries::FioLog::ALL {
        let mut buf = Vec::new();
        iopath::timeseries::write_fio_log(ts, kind, bs, &mut buf)?;
        let path = std::path::PathBuf::from(format!("{}{}", prefix.display(), kind.suffix()));
        write_file(&path, buf)?;
    }
    Ok(())
}

fn trace_cmd(a: TraceArgs, verbose: bool) -> Result<ExitCode> {
    use iopath::trace::External;
    let external = match (a.pid, a.command.is_empty()) {
        (Some(pid), _) => Some(External::Pid(pid)),
        (None, false) => Some(External::Command(a.command.clone())),
        (None, true) => None,
    };
    let sampling = a.flamegraph || a.offcpu;
    // The generator's job, when this trace runs one: its target is no output's to replace.
    let job = if external.is_none() { a.job.to_job().ok() } else { None };
    check_log_prefix(a.job.common.log_prefix.as_deref())?;
    check_run_outputs(
        job.as_ref(),
        a.json.as_deref(),
        &[("--events-out", a.events_out.as_deref()), ("--perfetto", a.perfetto.as_deref())],
        a.job.common.log_prefix.as_deref(),
    )?;
    if a.pprof && !sampling {
        anyhow::bail!("--pprof writes the sampled stacks: add --flamegraph (on-CPU) and/or --offcpu");
    }
    check_and_say(a.json.as_deref(), a.out.as_deref())?;
    check_log_prefix(a.job.common.log_prefix.as_deref())?;
    let flags = a.trace_flags();
    if external.is_some() {
        iopath::job::check_interval(a.job.common.interval)?;
    }
    if let Some(External::Command(cmd)) = &external {
        check_command(&cmd[0])?;
    }
    let (pid_trace, generator) = (matches!(external, Some(External::Pid(_))), external.is_none());
    let (mut rep, raw) = match external {
        Some(what) => iopath::trace::run_external(what, a.external_duration()?, &flags)?,
        None if a.duration.is_some() => anyhow::bail!(
            "--duration bounds a trace of another process (--pid or -- CMD); the bundled generator runs for --runtime"
        ),
        None => iopath::trace::run(&a.job.to_job()?, &flags)?,
    };
    if verbose {
        // What was attached, and how, on this kernel.
        for p in rep.trace.iter().flat_map(|t| &t.probes) {
            match &p.error {
                None => eprintln!("iopath: probe {:<36} {} (recursion misses {})", p.name, p.via, p.recursion_misses),
                Some(e) => eprintln!("iopath: probe {:<36} not attached: {e}", p.name),
            }
        }
    }
    if let Some(e) = iopath::trace::command_failed(&rep).filter(|_| rep.ios == 0) {
        // Nothing ran worth reporting.
        return Err(e);
    }
    // A flamegraph run always has an output folder: flamegraphs/<job>-<time> unless --out says.
    let mut flame_err = None;
    let out = a.out.clone().or_else(|| sampling.then(|| iopath::flame::default_dir(&rep.label())));
    if let (Some(dir), Some(stacks)) = (&out, &raw.stacks) {
        let (title, subtitle) = rep.headline();
        // A finished trace is never dropped for its pictures: the report says what failed, and
        // the exit status does, after the report (a failed oncpu.svg on a full disk was only a
        // warning with status 0).
        match iopath::flame::write_graphs(stacks, dir, &title, &subtitle, a.pprof.then_some(rep.runtime_ns)) {
            Ok(g) => rep.flamegraphs = Some(g),
            Err(e) => {
                rep.warnings.push(format!("flamegraphs not written: {e:#}"));
                flame_err = Some(e);
            }
        }
    }
    // The report first (stdout, --json), then the folder: a folder that cannot be written loses
    // nothing already printed.
    emit(&rep, a.json.as_deref())?;
    write_fio_logs(&rep, a.job.common.log_prefix.as_deref())?;
    if let Some(dir) = &out {
        write_trace_folder(dir, &rep, &raw)?;
    }
    if let Some(e) = flame_err {
        return Err(e.context("the report is written, its flamegraphs are not"));
    }
    if !rep.output_errors.is_empty() {
        anyhow::bail!("the report is written; {}", rep.output_errors.join("; "));
    }
    if let Some(e) = iopath::trace::command_failed(&rep) {
        return Err(e);
    }
    // Ctrl-C is how a --pid trace ends: its report is whole, its status 0.
    if pid_trace {
        return Ok(ExitCode::SUCCESS);
    }
    ending(&rep, generator)
}

/// A trace's folder (--out, or a flamegraph run's): report.json, raw.json, report.txt and
/// report.html with the flamegraphs inline.
fn write_trace_folder(dir: &std::path::Path, rep: &report::Report, raw: &iopath::model::RawTrace) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_file(&dir.join("report.json"), serde_json::to_vec_pretty(rep)?)?;
    write_file(&dir.join("raw.json"), serde_json::to_vec(raw)?)?;
    let mut txt = Vec::new();
    report::text::render_text(rep, &mut txt)?;
    write_file(&dir.join("report.txt"), txt)?;
    let graphs = rep.flamegraphs.as_ref();
    let flames: Vec<(&str, String)> = [
        ("On-CPU flamegraph", graphs.and_then(|f| f.oncpu.as_ref())),
        ("Off-CPU flamegraph (time blocked)", graphs.and_then(|f| f.offcpu.as_ref())),
    ]
    .into_iter()
    .filter_map(|(t, g)| Some((t, std::fs::read_to_string(&g?.svg).ok()?)))
    .collect();
    let html = report::html::trace_page(rep, raw, &flames);
    write_file(&dir.join("report.html"), html)?;
    Ok(())
}

fn flamegraph_cmd(a: FlamegraphArgs, verbose: bool) -> Result<ExitCode> {
    let out = |label: &str| a.trace.out.clone().unwrap_or_else(|| iopath::flame::default_dir(label));
    if let Some(input) = &a.perf_script {
        let dir = out("perf");
        check_and_say(None, Some(&dir))?;
        let outs = [dir.join("perf.folded"), dir.join("perf.svg")];
        iopath::output::check_outputs_and_say(
            &[("--out", outs[0].as_path()), ("--out", outs[1].as_path())],
            &[(input.as_path(), "the --perf-script input")],
        )?;
        let (g, samples) = iopath::flame::write_from_perf(input, &dir)?;
        print(|w| {
            writeln!(
                w,
                "{samples} samples (weight {}: perf's periods summed) in {} stacks: {} and {}",
                g.total,
                g.stacks,
                g.folded.display(),
                g.svg.display()
            )
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(files) = &a.diff {
        let dir = out("diff");
        check_and_say(None, Some(&dir))?;
        // Its inputs are what its outputs must never replace (`--out` the folder of an input
        // had overwritten diff.folded with the difference of itself).
        let outs = [dir.join("diff.folded"), dir.join("diff.svg")];
        iopath::output::check_outputs_and_say(
            &[("--out", outs[0].as_path()), ("--out", outs[1].as_path())],
            &[(files[0].as_path(), "the 'before' input"), (files[1].as_path(), "the 'after' input")],
        )?;
        let (folded, svg) = iopath::flame::write_diff(&files[0], &files[1], &dir)?;
        print(|w| {
            writeln!(w, "differential flamegraph (red grew, blue shrank): {} and {}", folded.display(), svg.display())
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = a.trace;
    t.flamegraph = true;
    trace_cmd(t, verbose)
}

/// A run's report and, when it had --flamegraph, its on-CPU folded stacks (found where the
/// report says, or beside the report file).
fn load_side(path: &std::path::Path) -> Result<(iopath::compare::Side, Option<std::path::PathBuf>)> {
    let text = iopath::input::read_json_text(path)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON (truncated or corrupt?)", path.display()))?;
    let folded = v.pointer("/flamegraphs/oncpu/folded").and_then(|f| f.as_str()).and_then(|f| {
        let f = std::path::Path::new(f);
        let beside = path.parent().map(|d| d.join(f.file_name().unwrap_or_default()));
        [Some(f.to_path_buf()), beside].into_iter().flatten().find(|p| p.exists())
    });
    let folded_text = match &folded {
        Some(p) => Some(iopath::input::read_text(p, iopath::input::PERF_CAP, "a folded stack file")?),
        None => None,
    };
    let side = iopath::compare::side_from_json(&v, &path.display().to_string(), folded_text.as_deref())?;
    Ok((side, folded))
}

/// What a compared run's files add to the page: the report's time series and the phases'
/// histograms of the raw.json beside a report.json (only there: another file's neighbour may be
/// another run's). Either is None when absent or unreadable: the page says it is not drawn.
fn page_extras(path: &std::path::Path) -> (Option<iopath::timeseries::TimeSeries>, Option<iopath::model::RawTrace>) {
    let json = |p: &std::path::Path| -> Option<serde_json::Value> {
        serde_json::from_str(&iopath::input::read_json_text(p).ok()?).ok()
    };
    let ts = json(path).and_then(|v| serde_json::from_value(v.get("timeseries")?.clone()).ok());
    let raw = (path.file_name().is_some_and(|n| n == "report.json"))
        .then(|| path.with_file_name("raw.json"))
        .and_then(|p| json(&p))
        .and_then(|v| serde_json::from_value(v).ok());
    (ts, raw)
}

/// A sweep's summary: `path` itself when it is an `iopath.sweep/1` file, or the sweep.json in
/// the folder `path` names.
fn sweep_file(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let file = if path.is_dir() { path.join("sweep.json") } else { path.to_path_buf() };
    // Not a sweep when it cannot be read as one: load_side then says why.
    let text = iopath::input::read_json_text(&file).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    (v["schema"] == iopath::sweep::SCHEMA).then_some(file)
}

/// Two sweeps compared point by point (each point's median runs as two runs are), or why not:
/// different axes, no point in common, or their run reports not kept.
fn sweeps_compared(
    fa: &std::path::Path,
    fb: &std::path::Path,
) -> Result<(iopath::sweep_compare::SweepComparison, iopath::sweep::SweepReport, iopath::sweep::SweepReport)> {
    let load = |p: &std::path::Path| -> Result<iopath::sweep::SweepReport> {
        let text = iopath::input::read_json_text(p)?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a readable iopath.sweep/1 file", p.display()))
    };
    let (sa, sb) = (load(fa)?, load(fb)?);
    anyhow::ensure!(
        sa.x_axis == sb.x_axis && sa.swept == sb.swept,
        "the two sweeps do not sweep the same axes ({} over {} against {} over {}): compare studies of one shape",
        sa.swept.join(", "),
        sa.x_axis,
        sb.swept.join(", "),
        sb.x_axis
    );
    let dir = |p: &std::path::Path| p.parent().map_or_else(|| std::path::PathBuf::from("."), |d| d.to_path_buf());
    let (da, db) = (dir(fa), dir(fb));
    let names = (fa.display().to_string(), fb.display().to_string());
    let c = iopath::sweep_compare::compare_sweeps(&sa, &sb, (&names.0, &names.1), |pa, pb| {
        let side = |d: &std::path::Path, p: &iopath::sweep::Point| load_side(&d.join(&p.median_report));
        match (side(&da, pa), side(&db, pb)) {
            (Ok((x, _)), Ok((y, _))) => Ok(iopath::compare::compare(&x, &y)),
            (Err(e), _) | (_, Err(e)) => Err(format!("{e:#}")),
        }
    });
    // Nothing compared is an error, said before anything is written.
    if c.points.is_empty() {
        if let Some(why) = c.not_compared.first() {
            anyhow::bail!(
                "no point of the two sweeps could be compared ({why}): a sweep is compared from the run reports it \
                 keeps in runs/ beside sweep.json; give the sweep folders as `iopath sweep --out` wrote them"
            );
        }
        let labels = |s: &iopath::sweep::SweepReport| s.points.iter().map(|p| p.label.clone()).collect::<Vec<_>>();
        anyhow::bail!(
            "the two sweeps have no point in common (A: {}; B: {}): compare two sweeps of one grid",
            labels(&sa).join(", "),
            labels(&sb).join(", ")
        );
    }
    Ok((c, sa, sb))
}

/// `iopath compare SWEEP_A SWEEP_B`: each point's median runs compared as two runs are.
fn compare_sweeps_cmd(a: &CompareArgs, fa: &std::path::Path, fb: &std::path::Path) -> Result<ExitCode> {
    let (c, sa, sb) = sweeps_compared(fa, fb)?;
    if let Some(d) = &a.out {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        write_file(&d.join("report.html"), report::html::sweep_compare_page(&c, &sa, &sb))?;
        for (stem, svg) in report::html::sweep_compare_charts(&sa, &sb, ("A", "B"), "") {
            write_file(&d.join(format!("{stem}.svg")), svg)?;
        }
        write_file(&d.join("compare.json"), serde_json::to_vec_pretty(&c)?)?;
    }
    let mut out = Vec::new();
    writeln!(out, "A {}\nB {}\n\n{}\n", c.before, c.after, c.verdict)?;
    let w = c.points.iter().map(|p| p.label.len()).max().unwrap_or(5).max(5) + 2;
    writeln!(
        out,
        "{:<w$}{:>10}{:>10}{:>9}{:>10}{:>10}  {:<14}phase moved most",
        "point", "IOPS A", "IOPS B", "IOPS", "d p50 us", "d p99 us", "judgement"
    )?;
    let d_us = |c: &iopath::compare::Change| format!("{:+.1}", (c.after - c.before) / 1000.0);
    for p in &c.points {
        writeln!(
            out,
            "{:<w$}{:>10.0}{:>10.0}{:>9}{:>10}{:>10}  {:<14}{}",
            p.label,
            p.iops.before,
            p.iops.after,
            p.iops.pct.map_or("unknown".into(), |v| format!("{v:+.1}%")),
            d_us(&p.lat_p50_ns),
            d_us(&p.lat_p99_ns),
            p.iops_judgement,
            if p.moved_most == "none" {
                "none".to_owned()
            } else {
                format!("{} {:+.1} us", p.moved_most, p.moved_ns / 1000.0)
            }
        )?;
    }
    for l in &c.only_before {
        writeln!(out, "not compared: {l} is only in A")?;
    }
    for l in &c.only_after {
        writeln!(out, "not compared: {l} is only in B")?;
    }
    for l in &c.not_compared {
        writeln!(out, "not compared: {l}")?;
    }
    match &a.json {
        Some(p) if p.as_os_str() == "-" => print(|w| w.write_all(&serde_json::to_vec_pretty(&c)?))?,
        Some(p) => {
            print(|w| w.write_all(&out))?;
            write_file(p, serde_json::to_vec_pretty(&c)?)?;
        }
        None => print(|w| w.write_all(&out))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `iopath study NAME=A,B ...`: each column's two sweeps compared, the columns side by side on
/// one page (study.html) and in study.json.
fn study_cmd(a: StudyArgs) -> Result<ExitCode> {
    // Its folder is judged before any sweep is read (an existing file there had failed at the
    // end with a bare "File exists (os error 17)").
    check_and_say(None, Some(&a.out))?;
    let sides = a.sides.split_once(',').filter(|(x, y)| !x.is_empty() && !y.is_empty() && !y.contains(','));
    let Some(sides) = sides else {
        anyhow::bail!("--sides {}: expected two names, A,B (e.g. --sides 'IOMMU off,IOMMU strict')", a.sides)
    };
    let mut cols = Vec::new();
    for spec in &a.columns {
        let parsed = spec.split_once('=').and_then(|(n, ab)| Some((n, ab.split_once(',')?)));
        let Some((name, (pa, pb))) = parsed.filter(|(n, (x, y))| !n.is_empty() && !x.is_empty() && !y.is_empty())
        else {
            anyhow::bail!("column '{spec}': expected NAME=SWEEP_A,SWEEP_B (sweep.json files or their folders)")
        };
        let file = |p: &str| {
            sweep_file(std::path::Path::new(p))
                .with_context(|| format!("column '{name}': {p} is not an iopath.sweep/1 file or a folder holding one"))
        };
        let (fa, fb) = (file(pa)?, file(pb)?);
        let (c, sa, sb) = sweeps_compared(&fa, &fb).with_context(|| format!("column '{name}'"))?;
        cols.push((name.to_owned(), c, sa, sb));
    }
    let columns: Vec<report::html::Column> =
        cols.iter().map(|(name, c, sa, sb)| report::html::Column { name, c, a: sa, b: sb }).collect();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    write_file(&a.out.join("study.html"), report::html::study_page(&columns, sides, a.note.as_deref()))?;
    let json = serde_json::json!({
        "schema": "iopath.study/1",
        "sides": [sides.0, sides.1],
        "note": a.note,
        "columns": cols.iter().map(|(name, c, _, _)| serde_json::json!({"name": name, "comparison": c})).collect::<Vec<_>>(),
    });
    write_file(&a.out.join("study.json"), serde_json::to_vec_pretty(&json)?)?;
    print(|w| {
        for (name, c, _, _) in &cols {
            writeln!(w, "{name}: {}", c.verdict)?;
        }
        writeln!(w, "study.html and study.json in {}", a.out.display())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn compare_cmd(a: CompareArgs) -> Result<ExitCode> {
    // Its inputs are what its output must never replace.
    iopath::output::check_outputs_and_say(
        &a.json.as_deref().map(|p| ("--json", p)).into_iter().collect::<Vec<_>>(),
        &[(a.before.as_path(), "the 'before' input"), (a.after.as_path(), "the 'after' input")],
    )?;
    check_and_say(a.json.as_deref(), a.out.as_deref())?;
    match (sweep_file(&a.before), sweep_file(&a.after)) {
        (Some(fa), Some(fb)) => return compare_sweeps_cmd(&a, &fa, &fb),
        (Some(_), None) | (None, Some(_)) => anyhow::bail!(
            "one side is a sweep and the other is not: compare two runs (report.json) or two sweeps (sweep.json, or \
             their folders)"
        ),
        (None, None) => {}
    }
    let (before, fb) = load_side(&a.before)?;
    let (after, fa) = load_side(&a.after)?;
    let mut c = iopath::compare::compare(&before, &after);
    let mut dir = a.out.clone();
    if let (Some(fb), Some(fa)) = (fb, fa) {
        let d = dir.get_or_insert_with(|| iopath::flame::default_dir("compare"));
        let (_, svg) = iopath::flame::write_diff(&fb, &fa, d)?;
        c.diff_flamegraph = Some(svg);
    }
    if let Some(d) = &dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        let diff = c.diff_flamegraph.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
        let (eb, ea) = (page_extras(&a.before), page_extras(&a.after));
        let sides =
            report::html::Sides { timeseries: [eb.0.as_ref(), ea.0.as_ref()], raw: [eb.1.as_ref(), ea.1.as_ref()] };
        write_file(&d.join("report.html"), report::html::compare_page(&c, &sides, diff.as_deref()))?;
        write_file(&d.join("compare.json"), serde_json::to_vec_pretty(&c)?)?;
    }
    match &a.json {
        Some(p) if p.as_os_str() == "-" => print(|w| {
            serde_json::to_writer_pretty(&mut *w, &c)?;
            writeln!(w)
        })?,
        Some(p) => {
            print(|w| report::compare_text::render(&c, w))?;
            write_file(p, serde_json::to_vec_pretty(&c)?)?;
        }
        None => print(|w| report::compare_text::render(&c, w))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The sweep's grid from its lists.
fn sweep_axes(a: &SweepArgs) -> Result<(Vec<iopath::sweep::Variant>, iopath::sweep::Axes)> {
    use iopath::job::{self, Rw, Target};
    use iopath::sweep::{parse_list, sorted};
    let variants = iopath::sweep::parse_variants(&a.engine)?;
    let d = &a.dims;
    let count = |p: &str| p.parse::<u32>().map_err(|_| "not a whole number".to_owned());
    let boolish = |p: &str| match p {
        "true" | "1" | "yes" | "direct" => Ok(true),
        "false" | "0" | "no" | "buffered" => Ok(false),
        _ => Err("not true or false".to_owned()),
    };
    let paths = |flag: &str, s: &str, make: fn(std::path::PathBuf) -> Target| {
        parse_list(flag, s, |p| Ok::<_, String>(make(p.into())))
    };
    let target = match (&d.file, &d.device) {
        (Some(f), _) => paths("file", f, Target::File)?,
        (None, Some(dev)) => paths("device", dev, Target::Device)?,
        (None, None) => Vec::new(),
    };
    let axes = iopath::sweep::Axes {
        engine: variants.iter().map(|v| v.name.clone()).collect(),
        qd: iopath::sweep::parse_qds(&a.qd)?,
        bs: sorted(parse_list("bs", &d.bs, job::parse_size)?),
        jobs: sorted(parse_list("jobs", &d.jobs, count)?),
        rw: parse_list("rw", &d.rw, |p| <Rw as clap::ValueEnum>::from_str(p, true))?,
        direct: parse_list("direct", &d.direct, boolish)?,
        batch_submit: sorted(parse_list("batch-submit", &d.batch_submit, count)?),
        batch_complete: sorted(parse_list("batch-complete", &d.batch_complete, count)?),
        target_fs: target.iter().map(|t| loadgen::target::fs_type_at(t.path())).collect(),
        target,
    };
    Ok((variants, axes))
}

/// A traced run's load and attach, beyond its runtime (1.8 s to load the programs on 6.18).
const SWEEP_TRACE_SETUP_S: f64 = 2.0;

/// `runs` runs of `each_s` seconds, in the largest unit that reads well.
fn sweep_length(each_s: f64, runs: usize) -> String {
    let s = each_s * runs as f64;
    match s {
        s if s < 120.0 => format!("{s:.0} s in all"),
        s if s < 7200.0 => format!("{:.0} min in all", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h in all", s / 3600.0),
        s => format!("{:.1} days in all", s / 86_400.0),
    }
}

/// A run's file name from its point's label: letters, digits, '.', '-' and '_' only.
fn file_stem(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect()
}

fn sweep_cmd(a: SweepArgs) -> Result<ExitCode> {
    use iopath::sweep;
    let (variants, axes) = sweep_axes(&a)?;
    let points = axes.points();
    let swept = axes.swept();
    let first = &points[0];
    let base = a.job.to_job(&iopath::cli::Shape {
        engine: variants[0].engine,
        qd: first.qd,
        rw: first.rw,
        bs: first.bs,
        jobs: first.jobs,
        direct: first.direct,
        batch_submit: first.batch_submit,
        batch_complete: first.batch_complete,
        file: first.target.as_ref().filter(|t| matches!(t, iopath::job::Target::File(_))).map(|t| t.path().into()),
        device: first.target.as_ref().filter(|t| matches!(t, iopath::job::Target::Device(_))).map(|t| t.path().into()),
    })?;
    let variant = |name: &str| variants.iter().find(|v| v.name == name).expect("a point's variant is in the grid");
    for c in &points {
        variant(&c.variant).job(&base, c).validate().with_context(|| c.label(&swept))?;
    }
    if !a.no_trace {
        iopath::trace::check_can_trace_for(&sysconf::SysRoots::live(), "sweep")?;
    }
    let dir = a.out.clone().unwrap_or_else(|| iopath::flame::default_dir("sweep"));
    check_and_say(None, Some(&dir))?;
    let existed = dir.exists();
    std::fs::create_dir_all(dir.join("runs")).with_context(|| format!("creating {}", dir.display()))?;
    let plan = sweep::plan(points.len(), a.repeat, base.seed);
    // The estimate before the first run: a grid's product is easy to get wrong by orders of
    // magnitude (a 60,000-run sweep had started with no word of how long it would take).
    let each = match base.stop {
        iopath::job::Stop::Runtime(d) => format!(
            "about {}",
            sweep_length(d.as_secs_f64() + if a.no_trace { 0.5 } else { SWEEP_TRACE_SETUP_S }, plan.len())
        ),
        iopath::job::Stop::Ios(n) => format!("each as long as its {n} I/Os take"),
    };
    eprintln!(
        "iopath sweep: {} points x {} repeat(s) = {} runs, {each}; Ctrl-C stops it and keeps the runs that finished",
        points.len(),
        a.repeat,
        plan.len()
    );
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    let mut failed = Vec::new();
    let mut first_report = None;
    for (i, p) in plan.iter().enumerate() {
        if iopath::stop::requested() {
            eprintln!("iopath sweep: stopped; keeping the {} run(s) that finished", results.len());
            break;
        }
        let c = &points[p.point];
        let label = c.label(&swept);
        let job = variant(&c.variant).job(&base, c);
        let rep = sweep_run(&job, a.no_trace);
        let rep = match rep {
            Ok(r) => r,
            Err(e) => {
                // One failed point must not lose the others: it shows as missing runs.
                eprintln!("iopath sweep: {label} run {} failed: {e:#}", p.rep);
                failed.push(sweep::FailedRun { coord: c.clone(), rep: p.rep, error: format!("{e:#}") });
                continue;
            }
        };
        let name = format!("runs/{}-r{}.json", file_stem(&label), p.rep);
        let value = serde_json::to_value(&rep)?;
        write_file(&dir.join(&name), serde_json::to_vec_pretty(&value)?)?;
        if first_report.is_none() {
            first_report = Some(value.clone());
        }
        let r = sweep::run_result(&rep, c, p.rep, &name);
        let done = i + 1;
        let left = started.elapsed().as_secs_f64() / done as f64 * (plan.len() - done) as f64;
        eprintln!(
            "[{done}/{}] {label} run {}: {:.0} IOPS, p99 {:.1} us ({left:.0} s left)",
            plan.len(),
            p.rep,
            r.iops,
            r.lat_p99_ns / 1000.0,
        );
        results.push(r);
        if let Some(c) = a.cooldown.filter(|_| done < plan.len()) {
            let until = std::time::Instant::now() + c;
            while std::time::Instant::now() < until && !iopath::stop::requested() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    if results.is_empty() {
        return Err(nothing_swept(&dir, existed, &failed, plan.len(), &swept));
    }
    let s = sweep::summarize(&axes, a.repeat, base.seed, !a.no_trace, &base.percentiles, results, failed);
    write_file(&dir.join("sweep.json"), serde_json::to_vec_pretty(&s)?)?;
    write_file(&dir.join("report.html"), report::html::sweep_page(&s, first_report.as_ref()))?;
    for (stem, svg) in report::html::sweep_charts(&s) {
        write_file(&dir.join(format!("{stem}.svg")), svg)?;
    }
    let out = sweep_table(&s, &swept, plan.len(), &dir)?;
    print(|w| w.write_all(&out))?;
    // Stopped by a signal: what it kept is written, and the status says it is partial.
    Ok(stopped_status("the sweep").unwrap_or(ExitCode::SUCCESS))
}

/// One run of a sweep's point: traced, or the generator alone (`--no-trace`).
fn sweep_run(job: &iopath::job::Job, no_trace: bool) -> Result<report::Report> {
    if no_trace {
        loadgen::run(job).map(|o| {
            let machine = report::Captured::for_run(&o);
            report::Report::from_run(job, o, machine)
        })
    } else {
        iopath::trace::run(job, &iopath::trace::TraceFlags::default()).map(|(r, _)| r)
    }
}

/// A sweep none of whose runs finished: its folder removed (or emptied of what it made), and why.
fn nothing_swept(
    dir: &std::path::Path,
    existed: bool,
    failed: &[iopath::sweep::FailedRun],
    runs: usize,
    swept: &[&str],
) -> anyhow::Error {
    if !existed {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        let _ = std::fs::remove_dir(dir.join("runs"));
    }
    match failed.first() {
        Some(f) => anyhow::anyhow!(
            "no run of the sweep succeeded ({} of {runs} failed); the first, {}: {}",
            failed.len(),
            f.coord.label(swept),
            f.error
        ),
        None => anyhow::anyhow!("the sweep was stopped before any run finished"),
    }
}

/// The sweep's table: each point's runs, IOPS (median, min..max), the asked percentiles and the
/// I/Os in flight; the failed runs; where the files are.
fn sweep_table(s: &iopath::sweep::SweepReport, swept: &[&str], runs: usize, dir: &std::path::Path) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let w = s.points.iter().map(|p| p.label.len()).max().unwrap_or(5).max(5) + 2;
    // One latency column per --percentiles entry (fio's percentile_list), each the median run's.
    let pct_head: String =
        s.percentiles.iter().map(|&pc| format!("{:>10}", format!("{} us", report::html::pct_name(pc)))).collect();
    writeln!(out, "{:<w$}{:>5}{:>12}{:>22}{pct_head}{:>10}", "point", "runs", "IOPS", "min..max", "in flight")?;
    for p in &s.points {
        let pcts: String = s
            .percentiles
            .iter()
            .map(|&pc| {
                p.percentile(pc).map_or(format!("{:>10}", "unknown"), |v| format!("{:>10.1}", v.median / 1000.0))
            })
            .collect();
        writeln!(
            out,
            "{:<w$}{:>5}{:>12.0}{:>22}{pcts}{:>10.1}",
            p.label,
            p.runs,
            p.iops.median,
            format!("{:.0}..{:.0}", p.iops.min, p.iops.max),
            p.inflight_avg.median
        )?;
    }
    if !s.failed.is_empty() {
        let points: BTreeSet<String> = s.failed.iter().map(|f| f.coord.label(swept)).collect();
        writeln!(
            out,
            "WARNING {} of {} runs failed ({}): those points have fewer runs or none; why is in sweep.json 'failed'",
            s.failed.len(),
            runs,
            points.into_iter().collect::<Vec<_>>().join(", ")
        )?;
    }
    writeln!(out, "sweep.json and report.html in {}{}", dir.display(), if s.partial { " (partial)" } else { "" })?;
    Ok(out)
}

/// The report on stdout (text, or JSON for --json -), and with --json FILE also there: printed
/// first, so a file that cannot be written loses nothing already shown.
fn emit(rep: &report::Report, json: Option<&std::path::Path>) -> Result<()> {
    if json.is_none_or(|p| p.as_os_str() == "-") && iopath::output::stdout_discarded() {
        eprintln!(
            "iopath: note: standard output is /dev/null (or was closed): this report is printed nowhere; \
             --json FILE or --out DIR keeps it"
        );
    }
    match json {
        Some(p) if p.as_os_str() == "-" => print(|w| {
            serde_json::to_writer_pretty(&mut *w, rep)?;
            writeln!(w)
        }),
        Some(p) => {
            print(|w| report::text::render_text(rep, w))?;
            write_file(p, serde_json::to_vec_pretty(rep)?)
        }
        None => print(|w| report::text::render_text(rep, w)),
    }
}

fn doctor_cmd(a: DoctorArgs) -> Result<ExitCode> {
    let roots = sysconf::SysRoots::live();
    let mut d = doctor::examine(&roots);
    anyhow::ensure!(
        a.stamps.is_finite() && (0.0..=600.0).contains(&a.stamps),
        "--stamps {}: give seconds between 0 and 600 (e.g. --stamps 2)",
        a.stamps
    );
    if a.stamps > 0.0 && d.tracing_possible {
        doctor::check_stamps(&mut d, &roots, a.stamps);
    }
    if a.filesystems {
        anyhow::ensure!(d.root, "--filesystems makes a loop device and mounts a file system on it: run it as root");
        if d.tracing_possible {
            let exe = std::env::current_exe().context("finding this iopath")?;
            d.filesystems = Some(iopath::fs_trials::try_all(&exe));
        }
    }
    if a.facts {
        print(|w| {
            serde_json::to_writer_pretty(&mut *w, &d.facts)?;
            writeln!(w)
        })?;
        return Ok(if d.facts.unseen.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    print(|w| {
        if a.json {
            serde_json::to_writer_pretty(&mut *w, &d)?;
            writeln!(w)
        } else {
            doctor::render_text(&d, w)
        }
    })?;
    Ok(if d.tracing_possible { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn report_cmd(a: ReportArgs) -> Result<ExitCode> {
    // Streamed (record by record, any size), but never a device: /dev/zero would never end.
    iopath::input::check_readable(&a.events, "an events file")?;
    let f = std::fs::File::open(&a.events).with_context(|| format!("opening {}", a.events.display()))?;
    let s = iopath::events::summarize(&mut std::io::BufReader::new(f))?;
    print(|w| {
        if a.json {
            serde_json::to_writer_pretty(&mut *w, &s)?;
            writeln!(w)
        } else {
            iopath::events::render_text(&s, w)
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `iopath completions SHELL`: clap_complete's script for that shell, on standard output.
fn completions_cmd(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "iopath", &mut out);
    std::io::stdout().write_all(&out).context("writing the completions")?;
    Ok(ExitCode::SUCCESS)
}

/// `iopath man DIR`: iopath.1 and iopath-<subcommand>.1 (clap_mangen), each written whole under a
/// temporary name and renamed (output.rs): only those files are made or replaced.
fn man_cmd(a: ManArgs) -> Result<ExitCode> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("making {}", a.dir.display()))?;
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut pages = vec![("iopath".to_owned(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("iopath-{}", sub.get_name());
        // A page's title is its command's name (a dozen short strings, once per process).
        let title: &'static str = Box::leak(name.clone().into_boxed_str());
        pages.push((name, sub.clone().name(title)));
    }
    for (name, page) in &pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(page.clone()).render(&mut roff).context("rendering a man page")?;
        write_file(&a.dir.join(format!("{name}.1")), roff)?;
    }
    eprintln!("iopath man: {} pages in {}", pages.len(), a.dir.display());
    Ok(ExitCode::SUCCESS)
}
