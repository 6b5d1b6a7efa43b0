use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use iopath::cli::{Cli, Command, CompareArgs, DoctorArgs, FlamegraphArgs, ReportArgs, RunArgs, SweepArgs, TraceArgs};
use iopath::{doctor, loadgen, report, sysconf};

fn main() -> ExitCode {
    let cli = Cli::parse();
    iopath::probe::log::init(cli.verbose);
    iopath::loadgen::stop_on_signals();
    let res = match cli.cmd {
        Command::Run(a) => run(a),
        Command::Trace(a) => trace_cmd(a, cli.verbose),
        Command::Doctor(a) => doctor_cmd(a),
        Command::Report(a) => report_cmd(a),
        Command::Flamegraph(a) => flamegraph_cmd(a, cli.verbose),
        Command::Compare(a) => compare_cmd(a),
        Command::Sweep(a) => sweep_cmd(a),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("iopath: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: RunArgs) -> Result<ExitCode> {
    let job = a.job.to_job()?;
    let outcome = loadgen::run(&job)?;
    let rep = report::Report::from_run(&job, outcome);
    emit(&rep, a.json.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

fn trace_cmd(a: TraceArgs, verbose: bool) -> Result<ExitCode> {
    use iopath::trace::External;
    let external = match (a.pid, a.command.is_empty()) {
        (Some(pid), _) => Some(External::Pid(pid)),
        (None, false) => Some(External::Command(a.command.clone())),
        (None, true) => None,
    };
    let sampling = a.flamegraph || a.offcpu;
    let flags = iopath::trace::TraceFlags {
        force_raw_tp: a.raw_tp,
        prog_stats: a.prog_stats,
        events: a.events,
        events_out: a.events_out.clone(),
        stacks: sampling.then_some(iopath::probe::sampler::StackOpts {
            oncpu: a.flamegraph,
            offcpu: a.offcpu,
            all_cpus: a.all_cpus,
            freq_hz: a.freq,
        }),
    };
    let (mut rep, raw) = match external {
        Some(what) => iopath::trace::run_external(what, a.duration, &flags)?,
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
    let out = a.out.clone().or_else(|| sampling.then(|| iopath::flame::default_dir(&rep.label())));
    if let (Some(dir), Some(stacks)) = (&out, &raw.stacks) {
        let (title, subtitle) = rep.headline();
        rep.flamegraphs = Some(iopath::flame::write_graphs(stacks, dir, &title, &subtitle)?);
    }
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let write = |name: &str, bytes: Vec<u8>| {
            std::fs::write(dir.join(name), bytes).with_context(|| format!("writing {}", dir.join(name).display()))
        };
        write("report.json", serde_json::to_vec_pretty(&rep)?)?;
        write("raw.json", serde_json::to_vec(&raw)?)?;
        let mut txt = Vec::new();
        report::render_text(&rep, &mut txt)?;
        write("report.txt", txt)?;
        let flame =
            rep.flamegraphs.as_ref().and_then(|f| f.oncpu.as_ref()).and_then(|g| std::fs::read_to_string(&g.svg).ok());
        let html = report::html::trace_page(&serde_json::to_value(&rep)?, &raw, flame.as_deref());
        write("report.html", html.into_bytes())?;
    }
    emit(&rep, a.json.as_deref())?;
    if let Some(e) = iopath::trace::command_failed(&rep) {
        return Err(e);
    }
    Ok(ExitCode::SUCCESS)
}

fn flamegraph_cmd(a: FlamegraphArgs, verbose: bool) -> Result<ExitCode> {
    let out = |label: &str| a.trace.out.clone().unwrap_or_else(|| iopath::flame::default_dir(label));
    if let Some(input) = &a.perf_script {
        let g = iopath::flame::write_from_perf(input, &out("perf"))?;
        println!("{} samples in {} stacks: {} and {}", g.total, g.stacks, g.folded.display(), g.svg.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(files) = &a.diff {
        let (folded, svg) = iopath::flame::write_diff(&files[0], &files[1], &out("diff"))?;
        println!("differential flamegraph (red grew, blue shrank): {} and {}", folded.display(), svg.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = a.trace;
    t.flamegraph = true;
    trace_cmd(t, verbose)
}

/// A run's report and, when it had --flamegraph, its on-CPU folded stacks (found where the
/// report says, or beside the report file).
fn load_side(path: &std::path::Path) -> Result<(iopath::compare::Side, Option<std::path::PathBuf>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON (truncated or corrupt?)", path.display()))?;
    let folded = v.pointer("/flamegraphs/oncpu/folded").and_then(|f| f.as_str()).and_then(|f| {
        let f = std::path::Path::new(f);
        let beside = path.parent().map(|d| d.join(f.file_name().unwrap_or_default()));
        [Some(f.to_path_buf()), beside].into_iter().flatten().find(|p| p.exists())
    });
    let folded_text = match &folded {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let side = iopath::compare::side_from_json(&v, &path.display().to_string(), folded_text.as_deref())?;
    Ok((side, folded))
}

fn compare_cmd(a: CompareArgs) -> Result<ExitCode> {
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
        std::fs::write(d.join("report.html"), report::html::compare_page(&c, diff.as_deref()))?;
        std::fs::write(d.join("compare.json"), serde_json::to_vec_pretty(&c)?)?;
    }
    match &a.json {
        Some(p) if p.as_os_str() == "-" => {
            serde_json::to_writer_pretty(std::io::stdout().lock(), &c)?;
            println!();
        }
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            serde_json::to_writer_pretty(f, &c)?;
            report::compare_text::render(&c, &mut std::io::stdout().lock())?;
        }
        None => report::compare_text::render(&c, &mut std::io::stdout().lock())?,
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep_cmd(a: SweepArgs) -> Result<ExitCode> {
    use iopath::sweep;
    let variants = sweep::parse_variants(&a.engine)?;
    let qds = sweep::parse_qds(&a.qd)?;
    let base = a.job.to_job(iopath::job::EngineKind::Uring, 1)?;
    for v in &variants {
        for &qd in &qds {
            v.job(&base, qd).validate().with_context(|| format!("{} at qd {qd}", v.name))?;
        }
    }
    if !a.no_trace {
        iopath::trace::check_can_trace(&sysconf::SysRoots::live())?;
    }
    let dir = a.out.clone().unwrap_or_else(|| iopath::flame::default_dir("sweep"));
    std::fs::create_dir_all(dir.join("runs")).with_context(|| format!("creating {}", dir.display()))?;
    loadgen::stop_on_signals();
    let plan = sweep::plan(variants.len(), &qds, a.repeat, base.seed);
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    let mut first_config = None;
    for (i, p) in plan.iter().enumerate() {
        if loadgen::stopped() {
            eprintln!("iopath sweep: stopped; keeping the {} run(s) that finished", results.len());
            break;
        }
        let v = &variants[p.variant];
        let job = v.job(&base, p.qd);
        let rep = if a.no_trace {
            loadgen::run(&job).map(|o| report::Report::from_run(&job, o))
        } else {
            iopath::trace::run(&job, &iopath::trace::TraceFlags::default()).map(|(r, _)| r)
        };
        let rep = match rep {
            Ok(r) => r,
            Err(e) => {
                // One failed point must not lose the others: it shows as missing runs.
                eprintln!("iopath sweep: {} qd{} run {} failed: {e:#}", v.name, p.qd, p.rep);
                continue;
            }
        };
        let name = format!("runs/{}-qd{}-r{}.json", v.name.replace('+', "_"), p.qd, p.rep);
        let value = serde_json::to_value(&rep)?;
        std::fs::write(dir.join(&name), serde_json::to_vec_pretty(&value)?)?;
        if first_config.is_none() {
            first_config = Some(value["config"].clone());
        }
        let r = sweep::run_result(&value, &v.name, p.qd, p.rep, &name);
        let done = i + 1;
        let left = started.elapsed().as_secs_f64() / done as f64 * (plan.len() - done) as f64;
        eprintln!(
            "[{done}/{}] {} qd{} run {}: {:.0} IOPS, p99 {:.1} us; about {:.0} s left",
            plan.len(),
            v.name,
            p.qd,
            p.rep,
            r.iops,
            r.lat_p99_ns / 1000.0,
            left
        );
        results.push(r);
        if let Some(c) = a.cooldown.filter(|_| done < plan.len()) {
            let until = std::time::Instant::now() + c;
            while std::time::Instant::now() < until && !loadgen::stopped() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    let s = sweep::summarize(&variants, &qds, a.repeat, base.seed, !a.no_trace, results);
    std::fs::write(dir.join("sweep.json"), serde_json::to_vec_pretty(&s)?)?;
    std::fs::write(dir.join("report.html"), report::html::sweep_page(&s, first_config.as_ref()))?;
    for (stem, svg) in report::html::sweep_charts(&s) {
        std::fs::write(dir.join(format!("{stem}.svg")), svg)?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<16}{:>5}{:>12}{:>22}{:>10}{:>10}{:>10}",
        "point", "runs", "IOPS", "min..max", "p50 us", "p99 us", "in flight"
    )?;
    for p in &s.points {
        writeln!(
            out,
            "{:<16}{:>5}{:>12.0}{:>22}{:>10.1}{:>10.1}{:>10.1}",
            format!("{} qd{}", p.variant, p.qd),
            p.runs,
            p.iops.median,
            format!("{:.0}..{:.0}", p.iops.min, p.iops.max),
            p.lat_p50_ns.median / 1000.0,
            p.lat_p99_ns.median / 1000.0,
            p.inflight_avg.median
        )?;
    }
    writeln!(out, "sweep.json and report.html in {}{}", dir.display(), if s.partial { " (partial)" } else { "" })?;
    Ok(ExitCode::SUCCESS)
}

fn emit(rep: &report::Report, json: Option<&std::path::Path>) -> Result<()> {
    let stdout = std::io::stdout();
    match json {
        Some(p) if p.as_os_str() == "-" => {
            serde_json::to_writer_pretty(stdout.lock(), rep)?;
            writeln!(stdout.lock())?;
        }
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            serde_json::to_writer_pretty(f, rep)?;
            report::render_text(rep, &mut stdout.lock())?;
        }
        None => report::render_text(rep, &mut stdout.lock())?,
    }
    Ok(())
}

fn doctor_cmd(a: DoctorArgs) -> Result<ExitCode> {
    let d = doctor::examine(&sysconf::SysRoots::live());
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &d)?;
        writeln!(out)?;
    } else {
        doctor::render_text(&d, &mut out)?;
    }
    Ok(if d.tracing_possible { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn report_cmd(a: ReportArgs) -> Result<ExitCode> {
    let f = std::fs::File::open(&a.events).with_context(|| format!("opening {}", a.events.display()))?;
    let s = iopath::events::summarize(&mut std::io::BufReader::new(f))?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &s)?;
        writeln!(out)?;
    } else {
        iopath::events::render_text(&s, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}
