//! Flamegraphs for real: the sampler attached on every CPU, stacks symbolized from the kernel's
//! kallsyms and the generator's own ELF, folded files FlameGraph can read, SVGs inferno drew.

mod common;
use common::*;

use std::collections::HashMap;
use std::path::Path;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Samples whose stack contains a frame for which `pred` holds.
fn samples_with(folded: &str, pred: impl Fn(&str) -> bool) -> u64 {
    folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.split(';').any(&pred))
        .map(|(_, n)| n.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn oncpu_and_offcpu_graphs_of_the_generator() {
    require_root();
    let _s = serial();
    let d = scratch("flame-gen");
    let dev = LoopDev::new(&d.join("backing"), 64, 512);
    let out = d.join("out");
    for engine in ["uring", "aio"] {
        let r = json_of(
            "trace",
            &[
                "--device",
                &dev.0,
                "--engine",
                engine,
                "--qd",
                "8",
                "--runtime",
                "2s",
                "--flamegraph",
                "--offcpu",
                "--out",
                out.to_str().unwrap(),
            ],
        );
        let f = &r["flamegraphs"];
        let on = read(&out.join("oncpu.folded"));
        let total: u64 = on.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
        assert_eq!(total, f["oncpu"]["total"].as_u64().unwrap(), "{engine}: report and file agree");
        // Two seconds of a busy worker at 997 Hz: hundreds of samples at least.
        assert!(total >= 300, "{engine}: only {total} on-CPU samples");
        // The submission syscall and the block layer are where a CPU-bound loop device spends time.
        let (sys, kind) = if engine == "uring" { ("io_uring_enter", "uring") } else { ("sys_io_submit", "aio") };
        let in_sys = samples_with(&on, |fr| fr.contains(sys) && fr.ends_with("_[k]"));
        assert!(in_sys * 10 >= total, "{engine}: {in_sys} of {total} samples under {sys}");
        let in_block = samples_with(&on, |fr| fr.starts_with("blk_mq_") || fr.starts_with("submit_bio"));
        assert!(in_block > 0, "{engine}: no block-layer frames");
        // The generator is built with frame pointers and symbols: its frames have names.
        let naming = f["naming"].as_array().unwrap();
        let w = naming.iter().find(|n| n["comm"].as_str().unwrap().starts_with("iopath-w")).expect("the worker");
        let named = w["user_named"].as_f64().unwrap() / w["user_frames"].as_f64().unwrap();
        assert!(named >= 0.95, "{engine}: only {named} of the generator's user frames named: {w}");
        assert!(on.contains("iopath::loadgen::worker"), "{engine}: the generator's own frames are named");
        assert!(f["kernel_named_fraction"].as_f64().unwrap() >= 0.99);
        // The SVG: title with the job and phases, I/O-path frames classed for their colour.
        let svg = read(&out.join("oncpu.svg"));
        assert!(svg.contains(&format!("iopath: {kind} randread 4K qd8")), "{engine}: title names the job");
        assert!(svg.contains("submission") && svg.contains("device"), "{engine}: title has the phases");
        assert!(svg.contains(&format!("class=\"iop-{kind}\"")), "{engine}: {kind} frames classed");
        assert!(svg.contains("class=\"iop-block\""), "{engine}: block frames classed");
        // Off-CPU: where the worker sleeps waiting for completions, in ns, ending at __schedule.
        let off = read(&out.join("offcpu.folded"));
        let wait = if engine == "uring" { "io_cqring_wait_[k]" } else { "read_events_[k]" };
        // Of the time the generator's worker slept for I/O. Not the start line, where workers wait
        // 100 ms on a lock before their first I/O (loadgen::SETTLE): a futex wait, not I/O. Not the
        // process's other threads either: io_uring's io-wq workers (iou-wrk-*) are threads of the
        // process and idle off-CPU for seconds once started (an official CI host counted 6.5 s of
        // off-CPU time in a 2 s run, of which the wait was 13%, with no way to tell whose it was).
        let worker = |l: &&str| l.starts_with("iopath-w") && !l.contains("futex_wait");
        let ns = |l: &str| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap();
        let waited: u64 = off.lines().filter(worker).filter(|l| l.split(';').any(|fr| fr == wait)).map(ns).sum();
        let off_total: u64 = off.lines().filter(worker).map(ns).sum();
        let mut by_comm: std::collections::BTreeMap<&str, u64> = Default::default();
        for l in off.lines() {
            *by_comm.entry(l.split(';').next().unwrap()).or_default() += ns(l);
        }
        let mut top: Vec<&str> = off.lines().filter(worker).collect();
        top.sort_by_key(|l| std::cmp::Reverse(ns(l)));
        let tail = |l: &str| l.rsplit(';').take(6).collect::<Vec<_>>().join(" < ");
        let seen = format!(
            "{engine}: {waited} of {off_total} ns of the worker's off-CPU time in {wait}; \
             off-CPU ns by thread: {by_comm:?}; the worker's longest: {:#?}",
            top.iter().take(5).map(|l| tail(l)).collect::<Vec<_>>()
        );
        println!("{seen}");
        assert!(waited > 0 && waited * 4 >= off_total, "{seen}");
        assert!(off.lines().all(|l| !l.contains("bpf_trace_run")), "{engine}: the tracer's own frames are trimmed");
    }
}

#[test]
fn all_cpus_shows_the_kernel_threads_that_do_the_io() {
    require_root();
    let _s = serial();
    let d = scratch("flame-all");
    let dev = LoopDev::new(&d.join("backing"), 64, 512);
    let out = d.join("out");
    let args = ["--device", &dev.0, "--engine", "uring", "--qd", "16", "--runtime", "2s", "--flamegraph"];
    let mut all = args.to_vec();
    all.extend(["--all-cpus", "--out", out.to_str().unwrap()]);
    json_of("trace", &all);
    let folded = read(&out.join("oncpu.folded"));
    let comms: std::collections::BTreeSet<&str> = folded.lines().filter_map(|l| l.split(';').next()).collect();
    // The loop device reads its backing file in a kernel worker, and completions run in softirq
    // context: neither is the traced process.
    assert!(comms.iter().any(|c| c.starts_with("kworker") || c.starts_with("ksoftirqd")), "{comms:?}");
    // Without --all-cpus only the traced process is sampled.
    let mut mine = args.to_vec();
    let out2 = d.join("out2");
    mine.extend(["--out", out2.to_str().unwrap()]);
    json_of("trace", &mine);
    let folded = read(&out2.join("oncpu.folded"));
    assert!(
        folded.lines().all(|l| l.starts_with("iopath")),
        "only iopath's threads: {}",
        &folded[..folded.len().min(400)]
    );
}

#[test]
fn a_command_lands_under_flamegraphs_with_a_readable_name() {
    require_root();
    let _s = serial();
    let d = scratch("flame-cmd");
    let f = d.join("x.dat");
    let out = iopath(&["run", "--file", f.to_str().unwrap(), "--size", "32m", "--ios", "1"]);
    assert!(out.status.success());
    // `iopath flamegraph -- CMD`, from a scratch working directory: the default folder is
    // flamegraphs/<command>-<time>.
    let out = std::process::Command::new(bin())
        .current_dir(&d)
        .args([
            "flamegraph",
            "--",
            "fio",
            "--name=t",
            "--filename=x.dat",
            "--rw=randread",
            "--ioengine=io_uring",
            "--direct=1",
            "--iodepth=8",
            "--runtime=2",
            "--time_based",
            "--size=32m",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dirs: Vec<_> = std::fs::read_dir(d.join("flamegraphs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1);
    let name = dirs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("fio-20"), "folder {name}");
    let folded = read(&dirs[0].join("oncpu.folded"));
    assert!(folded.lines().any(|l| l.starts_with("fio;")), "fio's samples are there");
    assert!(dirs[0].join("oncpu.svg").exists() && dirs[0].join("report.json").exists());
    // Debian's fio has no frame pointers: the report says how much of it could be named.
    assert!(text.contains("user frames named:") && text.contains("for fio"), "{text}");
}

#[test]
fn perf_script_and_perf_data_give_the_same_folded_stacks() {
    require_root();
    let _s = serial();
    let d = scratch("flame-perf");
    // A recorded perf script (perf record -g -e cpu-clock of 'iopath run' on a loop device).
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf/uring-loop.script");
    let out =
        iopath(&["flamegraph", "--perf-script", script.to_str().unwrap(), "--out", d.join("a").to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Samples are counted as samples: one per event line of the script (40 cpu-clock lines), not
    // perf's period sum (it had printed "40040040 samples").
    let events = read(&script).lines().filter(|l| l.contains(" cpu-clock:")).count();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.starts_with(&format!("{events} samples (weight ")), "{events} events: {said}");
    let folded = read(&d.join("a/perf.folded"));
    assert!(folded.contains("io_uring_enter_[k]"), "kernel frames annotated as FlameGraph does");
    assert!(read(&d.join("a/perf.svg")).contains("class=\"iop-uring\""));

    // A live perf.data: perf records the generator, iopath runs `perf script` itself.
    let dev = LoopDev::new(&d.join("backing"), 32, 512);
    let data = d.join("perf.data");
    let rec = std::process::Command::new("perf")
        .args(["record", "-q", "-F", "499", "-g", "-e", "cpu-clock", "-o", data.to_str().unwrap(), "--", bin()])
        .args(["run", "--device", &dev.0, "--engine", "aio", "--qd", "8", "--runtime", "1s"])
        .output()
        .expect("perf (linux-perf) is installed by scripts/setup.sh");
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    let out = iopath(&["flamegraph", "--perf-script", data.to_str().unwrap(), "--out", d.join("b").to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let folded = read(&d.join("b/perf.folded"));
    assert!(folded.contains("io_submit"), "the aio submission path is in perf's stacks");

    // Not a perf script: said clearly.
    std::fs::write(d.join("junk"), "hello\n").unwrap();
    let out = iopath(&[
        "flamegraph",
        "--perf-script",
        d.join("junk").to_str().unwrap(),
        "--out",
        d.join("c").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no perf samples"));
}

#[test]
fn differential_graph_of_two_folded_files() {
    let d = scratch("flame-diff");
    std::fs::write(d.join("before.folded"), "app;read;blk_mq_submit_bio_[k] 80\napp;read;schedule_[k] 20\n").unwrap();
    std::fs::write(d.join("after.folded"), "app;read;blk_mq_submit_bio_[k] 50\napp;read;__iommu_dma_map_[k] 50\n")
        .unwrap();
    let out = iopath(&[
        "flamegraph",
        "--diff",
        d.join("before.folded").to_str().unwrap(),
        d.join("after.folded").to_str().unwrap(),
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let diff = read(&d.join("o/diff.folded"));
    assert!(diff.contains("app;read;__iommu_dma_map_[k] 0 50"), "{diff}");
    assert!(diff.contains("app;read;blk_mq_submit_bio_[k] 80 50"), "{diff}");
    let svg = read(&d.join("o/diff.svg"));
    assert!(svg.contains("red grew") && svg.contains("class=\"iop-iommu\""));
    // Both files in one folder: the title names them by path (by folder when the folders differ).
    assert!(svg.contains(&format!("iopath differential: {}", d.join("before.folded").display())), "title");

    // A corrupt input is named, with what is wrong.
    std::fs::write(d.join("bad.folded"), "app;read twelve\n").unwrap();
    let out = iopath(&[
        "flamegraph",
        "--diff",
        d.join("bad.folded").to_str().unwrap(),
        d.join("after.folded").to_str().unwrap(),
        "--out",
        d.join("p").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("bad.folded") && err.contains("line 1"), "{err}");
}

fn go() -> &'static str {
    ["go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| std::process::Command::new(g).arg("version").output().is_ok_and(|o| o.status.success()))
        .expect("Go (go tool pprof; scripts/setup.sh installs golang-go where none is)")
}

/// `go tool pprof -top`'s rows: (flat, cum, function name) in its order (by cum with `cum`).
fn pprof_top(profile: &Path, cum: bool) -> (String, Vec<(f64, f64, String)>) {
    let mut args = vec!["tool", "pprof", "-top", "-nodecount=40", "-unit=ns"];
    if cum {
        args.push("-cum");
    }
    args.push(profile.to_str().unwrap());
    let out = sh(go(), &args);
    let rows = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            let flat = c.first()?.trim_end_matches("ns").parse::<f64>().ok()?;
            let cum = c.get(3)?.trim_end_matches("ns").parse::<f64>().ok()?;
            Some((flat, cum, c[5..].join(" ")))
        })
        .collect();
    (out, rows)
}

/// The folded file's frames by their own (leaf) and inclusive weight, as pprof names them.
fn folded_weights(folded: &str) -> (HashMap<String, u64>, HashMap<String, u64>) {
    let (mut flat, mut incl): (HashMap<String, u64>, HashMap<String, u64>) = Default::default();
    for l in folded.lines() {
        let Some((stack, n)) = l.rsplit_once(' ') else { continue };
        let n = n.parse::<u64>().unwrap();
        // The process name is a label in the profile, not a frame.
        let frames: Vec<&str> = stack.split(';').skip(1).map(|f| f.trim_end_matches("_[k]")).collect();
        if let Some(leaf) = frames.last() {
            *flat.entry(leaf.to_string()).or_default() += n;
        }
        let mut seen = std::collections::HashSet::new();
        for f in frames {
            if seen.insert(f) {
                *incl.entry(f.to_owned()).or_default() += n;
            }
        }
    }
    (flat, incl)
}

/// Each of pprof's first `n` rows has the folded file's weight for that frame, and no more than
/// `n - 1` frames of the folded file weigh more (ties may be listed in any order).
fn same_top(what: &str, rows: &[(String, f64)], folded: &HashMap<String, u64>, unit: u64, n: usize) {
    assert!(!rows.is_empty(), "{what}: no rows");
    for (frame, v) in rows.iter().take(n) {
        // pprof shortens long C++/Rust names for display, keeping their tail
        // ("std::sys::pal::unix::thread::Thread::new::thread_start" shows as "::new::thread_start").
        let close = |w: &u64| ((*w * unit) as f64 - v).abs() <= (*w * unit) as f64 * 0.01 + 1.0;
        let w = folded
            .iter()
            .filter(|(f, _)| *f == frame || f.ends_with(frame.as_str()))
            .map(|(_, w)| w)
            .find(|w| close(w))
            .unwrap_or_else(|| panic!("{what}: {frame} with {v} not in the folded file"));
        let heavier = folded.values().filter(|m| **m > *w).count();
        assert!(heavier < n, "{what}: {frame} is not among the folded file's top {n}");
    }
}

#[test]
fn pprof_profiles_read_by_go_tool_pprof_match_the_folded_files() {
    require_root();
    let _s = serial();
    let d = scratch("flame-pprof");
    let f = d.join("data");
    let out = d.join("out");
    let o = iopath(&[
        "trace",
        "--engine",
        "aio",
        "--qd",
        "8",
        "--file",
        f.to_str().unwrap(),
        "--size",
        "64m",
        "--runtime",
        "2s",
        "--flamegraph",
        "--offcpu",
        "--pprof",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let period = 1_000_000_000 / 997;
    for (name, unit) in [("oncpu", period), ("offcpu", 1)] {
        let (flat, incl) = folded_weights(&read(&out.join(format!("{name}.folded"))));
        let profile = out.join(format!("{name}.pb.gz"));
        let (text, by_flat) = pprof_top(&profile, false);
        assert!(text.contains(if name == "oncpu" { "Type: cpu" } else { "Type: offcpu" }), "{text}");
        // The top frames by own weight (pprof's values in ns: samples x period on-CPU)...
        let rows: Vec<(String, f64)> = by_flat.iter().filter(|r| r.0 > 0.0).map(|r| (r.2.clone(), r.0)).collect();
        same_top(&format!("{name} flat"), &rows, &flat, unit, 5);
        // ... and by inclusive weight.
        let (_, by_cum) = pprof_top(&profile, true);
        let rows: Vec<(String, f64)> = by_cum.iter().map(|r| (r.2.clone(), r.1)).collect();
        same_top(&format!("{name} cum"), &rows, &incl, unit, 8);
    }
    // Kernel frames are marked: pprof lists them under the kernel's mapping.
    let raw = sh(go(), &["tool", "pprof", "-raw", out.join("oncpu.pb.gz").to_str().unwrap()]);
    assert!(raw.lines().any(|l| l.contains(" do_syscall_64 [kernel.kallsyms]")), "{raw}");
}
