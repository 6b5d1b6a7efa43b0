use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use iopath::cli::{Cli, Command, DoctorArgs, RunArgs};
use iopath::{doctor, loadgen, report, sysconf};

fn main() -> ExitCode {
    let cli = Cli::parse();
    iopath::probe::log::init(cli.verbose);
    let res = match cli.cmd {
        Command::Run(a) => run(a),
        Command::Doctor(a) => doctor_cmd(a),
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
    let stdout = std::io::stdout();
    match a.json.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            serde_json::to_writer_pretty(stdout.lock(), &rep)?;
            writeln!(stdout.lock())?;
        }
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            serde_json::to_writer_pretty(f, &rep)?;
            report::render_text(&rep, &mut stdout.lock())?;
        }
        None => report::render_text(&rep, &mut stdout.lock())?,
    }
    Ok(ExitCode::SUCCESS)
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
