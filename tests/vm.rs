//! Assertions on what scripts/vmtest brought back from its QEMU guests (Debian 6.1 / 6.12 kernels,
//! an emulated NVMe drive, an Intel vIOMMU). The guests cannot run cargo, so the rig runs them,
//! collects their reports, then runs these tests on the host:
//!
//!     IOPATH_VMTEST_RESULTS=target/vmtest/results/<run> cargo test --test vm -- --ignored
//!
//! Ignored by default because they need that folder; `scripts/vmtest` (and so `.ci/run`) always
//! runs them after a rig run.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn results() -> PathBuf {
    let dir = std::env::var_os("IOPATH_VMTEST_RESULTS")
        .map(PathBuf::from)
        .expect("IOPATH_VMTEST_RESULTS names a scripts/vmtest results folder");
    assert!(dir.is_dir(), "{} is not a folder", dir.display());
    dir
}

/// The boots this run made whose name starts with `prefix` (`<kernel>-<boot>` folders), for the
/// test `test`. scripts/vmtest lists every boot it starts in `boots`: each listed one must have
/// come back; a test none of whose boots were in the run says NOT RUN on the output (cargo
/// cannot mark an ignored test skipped at run time), so it never passes silently on nothing.
fn expect_boots(prefix: &str, test: &str) -> Vec<(String, PathBuf)> {
    let list = results().join("boots");
    let planned: Vec<String> = std::fs::read_to_string(&list)
        .unwrap_or_else(|e| panic!("{}: {e} (results of a scripts/vmtest run list their boots there)", list.display()))
        .lines()
        .filter(|b| b.split_once('-').is_some_and(|(_, boot)| boot.starts_with(prefix)))
        .map(str::to_owned)
        .collect();
    let found = boots(prefix);
    for b in &planned {
        assert!(results().join(b).is_dir(), "{test}: the run booted {b}, but no {b} folder came back");
    }
    // scripts/vmtest skips (--skip) a test whose guests it did not boot; run by hand on such
    // results, the test fails rather than pass on nothing.
    assert!(
        !planned.is_empty(),
        "{test}: NOT RUN, these results have no {prefix}* guest (scripts/vmtest --scenario all boots every one)"
    );
    found
}

/// Boot folders (`<kernel>-<boot>`) whose boot name starts with `prefix`.
fn boots(prefix: &str) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(results())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (kernel, boot) = name.split_once('-')?;
            boot.starts_with(prefix).then(|| (kernel.to_owned(), e.path()))
        })
        .collect();
    v.sort();
    v
}

/// A kernel release of the rig's `kernel` (5.10.0-46-amd64, 6.12.117+deb12-amd64, 7.3-amd64).
fn release_of(kernel: &str, release: &str) -> bool {
    release.strip_prefix(kernel).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
}

fn json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn steps_ok(dir: &Path) {
    assert!(!dir.join("boot-failed").exists(), "{}: the guest did not finish (console.log)", dir.display());
    let log = std::fs::read_to_string(dir.join("steps.log")).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    assert!(!log.trim().is_empty(), "{}: no steps ran", dir.display());
    for line in log.lines() {
        assert!(line.contains("ok=yes"), "{}: step failed: {line}", dir.display());
    }
}

fn probe<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["probes"].as_array().unwrap().iter().find(|p| p["name"] == name)
}

/// What every traced run in a guest must show: the four phases, >= 99% of I/Os followed end to
/// end, the NVMe split with queue ids, and the loss counters including recursion misses.
fn check_trace(kernel: &str, dir: &Path, via_btf: bool) {
    let r = json(&dir.join("report.json"));
    let what = dir.display();
    assert!(release_of(kernel, r["config"]["kernel"].as_str().unwrap()), "{what}: kernel");
    let ios = r["ios"].as_u64().unwrap();
    assert!(ios > 1000, "{what}: {ios} I/Os");
    for ph in ["submission", "block", "device", "completion"] {
        let p = &r["phases"][ph];
        assert!(p["count"].as_u64().unwrap() > 0 && p["mean_ns"].as_u64().unwrap() > 0, "{what}: phase {ph}: {p}");
    }
    let corr = r["correlated_fraction"].as_f64().unwrap();
    assert!(corr >= 0.99, "{what}: correlated {corr}");
    // The NVMe split: driver (setup_cmd -> issue) inside block, device and end inside device.
    let (drv, dev) = (&r["phases"]["nvme_driver"], &r["phases"]["nvme_device"]);
    assert!(drv["count"].as_u64().unwrap_or(0) as f64 >= 0.99 * ios as f64, "{what}: nvme_driver {drv}");
    assert!(dev["count"].as_u64().unwrap_or(0) as f64 >= 0.99 * ios as f64, "{what}: nvme_device {dev}");
    assert!(drv["mean_ns"].as_u64().unwrap() <= r["phases"]["block"]["mean_ns"].as_u64().unwrap(), "{what}");
    assert!(dev["mean_ns"].as_u64().unwrap() <= r["phases"]["device"]["mean_ns"].as_u64().unwrap(), "{what}");
    let queues = r["hw_queues"].as_array().unwrap();
    assert!(!queues.is_empty(), "{what}: no hardware queue ids");
    assert!(queues.iter().all(|q| q["nvme_qid"].as_u64().unwrap() >= 1), "{what}: {queues:?}");
    let per_queue: u64 = queues.iter().map(|q| q["ios"].as_u64().unwrap()).sum();
    assert!(per_queue as f64 >= 0.99 * ios as f64, "{what}: queues hold {per_queue} of {ios}");
    assert!(r["lost_events"]["recursion_misses"].is_u64(), "{what}: recursion_misses not reported");
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(text.contains("recursion misses") && text.contains("nvme device") && text.contains("qid "), "{what}");
    // tp_btf programs on the completion side lose nothing (classic tracepoint programs did).
    if via_btf {
        for name in ["block:block_rq_complete", "nvme:nvme_complete_rq", "io_uring:io_uring_complete", "dma:dma_unmap"]
        {
            if let Some(p) = probe(&r, name).filter(|p| p["attached"] == true) {
                assert_eq!(p["via"], "tp_btf", "{what}: {name}");
                assert_eq!(p["recursion_misses"], 0, "{what}: {name} missed events");
            }
        }
    }
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn every_boot_finished() {
    let all = boots("");
    assert!(!all.is_empty(), "no boot folders in {}", results().display());
    for (_, dir) in all {
        if dir.join("steps.log").exists() || dir.join("boot-failed").exists() {
            steps_ok(&dir);
        }
    }
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn portability_doctor_and_four_phases() {
    for (kernel, dir) in expect_boots("portability", "portability_doctor_and_four_phases") {
        steps_ok(&dir);
        let fentry = json(&dir.join("doctor/doctor.json"))["always_on"]["sync_fentry"] == true;
        // Every kernel of the rig but 5.10 (the compat build) times pread by fentry.
        assert_eq!(fentry, kernel != "5.10", "{kernel}: doctor's always-on sync_fentry");
        top_counts_without_syscall_hooks(&kernel, &dir.join("top"), fentry);
        one_hook_counts_every_read(&kernel, &dir.join("top"));
        if kernel == "5.10" {
            compat_build_traces(&dir);
            continue;
        }
        let d = json(&dir.join("doctor/doctor.json"));
        assert!(release_of(&kernel, d["kernel"].as_str().unwrap()), "{kernel}: {}", d["kernel"]);
        assert_eq!(d["tracing_possible"], true, "{kernel}: {}", d["problems"]);
        assert_eq!(d["btf"], true);
        let tp = |n: &str| d["tracepoints"].as_array().unwrap().iter().any(|t| t["name"] == n && t["present"] == true);
        // The dry run loaded and attached every program of the default trace.
        assert!(d["dry_run"].get("Ok").is_some(), "{kernel}: {}", d["dry_run"]);
        // The kernel-compat rename: submit_sqe before 6.4, submit_req after, one hook either way.
        let plan = d["trace_plan"].as_array().unwrap();
        let how = plan.iter().find(|h| h[0] == "io_uring:io_uring_submit_req").unwrap()[1].clone();
        let want = if kernel == "6.1" { "tp_btf (io_uring_submit_sqe)" } else { "tp_btf" };
        assert_eq!(how, want, "{kernel}: how doctor attaches io_uring's submit tracepoint");
        assert!(tp("io_uring:io_uring_submit_req"), "{kernel}: io_uring submit tracepoint not found by doctor");
        assert!(tp("nvme:nvme_setup_cmd") && tp("nvme:nvme_complete_rq"), "{kernel}: nvme tracepoints");
        // The flamegraphs' sampler's rows, loaded and attached by the dry run like every hook.
        for f in ["on_cpu_stacks", "off_cpu_stacks"] {
            let s = d["features"].as_array().unwrap().iter().find(|s| s["feature"] == f).unwrap();
            assert_eq!(s["on"], true, "{kernel}: {s}");
        }
        // fentry, kprobes and perf events attach in these guests (the first two do not on the
        // build machine).
        for kind in ["fentry", "kprobe", "perf_event"] {
            let a = d["attach"].as_array().unwrap().iter().find(|a| a["kind"] == kind).unwrap();
            assert_eq!(a["ok"], true, "{kernel}: {kind}: {a}");
        }
        // aio and psync start in sys_enter with per-thread task storage: on 7.x that storage
        // was never created (a 20.9 KiB value, over kmalloc_nolock's 8 KiB) and both were 0%.
        for (step, btf) in
            [("uring", true), ("aio", true), ("psync", true), ("uring-rawtp", false), ("uring-kprobe", true)]
        {
            check_trace(&kernel, &dir.join(step), btf);
        }
        let u = json(&dir.join("uring/report.json"));
        let name = "io_uring:io_uring_submit_req";
        assert_eq!(probe(&u, name).map(|p| p["attached"].clone()), Some(Value::Bool(true)), "{kernel}: {name}");
        // The optional doorbell probe: fexit attaches here; on 6.1 io_uring submits through
        // nvme_queue_rq and the split appears (6.12 batches through nvme_queue_rqs).
        let fexit = probe(&u, "fexit:nvme_queue_rq").unwrap_or_else(|| panic!("{kernel}: no fexit probe"));
        assert_eq!(fexit["attached"], true, "{kernel}: {fexit}");
        // The kprobe pair, forced (--doorbell kprobe) where fexit would have been used.
        let k = json(&dir.join("uring-kprobe/report.json"));
        for name in ["kprobe:nvme_queue_rq", "kretprobe:nvme_queue_rq"] {
            let p = probe(&k, name).unwrap_or_else(|| panic!("{kernel}: no {name}"));
            assert_eq!(p["attached"], true, "{kernel}: {p}");
        }
        if kernel == "6.1" {
            for r in [&u, &k] {
                let s = &r["phases"]["nvme_submit"];
                assert!(s["count"].as_u64().unwrap_or(0) > 0, "{kernel}: no doorbell split: {s}");
            }
        }
        let a = json(&dir.join("aio/report.json"));
        assert!(a["phases"]["completion_posted"].is_null(), "aio posts inside the device completion");
        // An outside io_uring program takes its CQEs from the ring: bounded by looks at the
        // ring's head, its latency must match its own clock. Where io_uring_complete fires
        // before the CQE's entry is reserved (6.1) the head's index differs by one from later
        // kernels: this is where a wrong guess would show.
        let (app, run) = (json(&dir.join("uring-app/report.json")), json(&dir.join("uring-app/run.json")));
        // The traced I/O ends at the last look that still saw its CQE; the program took it up to
        // the bound later (the report says so), and its own clock starts at its SQE's prep, before
        // the syscall. So its own mean lies between the traced mean and that plus the mean bound,
        // each with 5%: a head index guessed one off would move the end by a look, out of it.
        // (Under TCG the program's own side grows with the host: on one host 6.1 read traced
        // 270.9 us, own 290.1, bound 30.9 (-6.6%, outside a symmetric 5%); 6.12 333.2/345.0/18.1.)
        let (traced, own) = (app["lat_ns"]["mean"].as_f64().unwrap(), run["lat_ns"]["mean"].as_f64().unwrap());
        let bound = app["phases"]["cq_ring_bound"]["mean_ns"].as_f64().unwrap_or(0.0);
        assert!(
            own >= traced * 0.95 && own <= (traced + bound) * 1.05,
            "{kernel}: traced {traced} ns (+ bound {bound}), the program's own {own} ns"
        );
        assert!(app["correlated_fraction"].as_f64().unwrap() >= 0.99, "{kernel}: {}", app["correlated_fraction"]);
        assert!(app["phases"]["cq_ring_bound"]["count"].as_u64().unwrap_or(0) > 0, "{kernel}: no CQ ring bound");
        // Features the kernel refused are named in the report with a reason, never silent.
        for f in u["features_off"].as_array().unwrap() {
            assert!(!f["why"].as_str().unwrap().is_empty(), "{kernel}: {f}");
        }
        let refused = std::fs::read_to_string(dir.join("iopoll-refused/output.txt")).unwrap();
        assert!(refused.contains("poll_queues") && refused.contains("EOPNOTSUPP"), "{kernel}: {refused}");
    }
}

/// `iopath top --batch` (always on: block and io_uring hooks alone, aio claimed at its first bio)
/// counts the generator's aio reads on this kernel within 1%, with block and device phases and
/// no submission of their own; then its psync preads: where fentry attaches (`fentry`), timed
/// from the call's entry (submission and completion shown), else from the first bio, as aio.
fn top_counts_without_syscall_hooks(kernel: &str, dir: &Path, fentry: bool) {
    let text = std::fs::read_to_string(dir.join("top.txt")).unwrap();
    for (route, run, timed) in [("aio", "run.json", false), ("sync", "run-psync.json", fentry)] {
        let own = json(&dir.join(run))["ios"].as_f64().unwrap();
        let (mut ios, mut frame_s) = (0.0, 0.0);
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("iopath top: ") {
                frame_s = rest.split(" in ").nth(1).and_then(|x| x.split(' ').next()).unwrap().parse::<f64>().unwrap();
                continue;
            }
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 12 && f[3] == "nvme0n1" && f[4] == route {
                // SUB and CMP: timed, or "-/-" (unknown, never a zero); BLK and DEV always.
                let shown = |c: &str| c != "-/-";
                assert!(
                    shown(f[8]) == timed && shown(f[11]) == timed && shown(f[10]),
                    "{kernel}: {route} (fentry {fentry}): {l}"
                );
                ios += f[6].parse::<f64>().unwrap() * frame_s;
            }
        }
        assert!(
            (ios - own).abs() <= own * 0.01 + 2.0,
            "{kernel}: top counted {ios:.0} {route} I/Os, the generator {own}:\n{text}"
        );
    }
}

/// top's default, the one-hook tier (top1.txt, beside the full set's top.txt): the generator's
/// aio and psync reads on nvme0n1 counted within 1% whatever their route (direct, waited: by
/// end_io), nvme0n1's stamps judged (a verdict line), and the device phase shown once judged.
fn one_hook_counts_every_read(kernel: &str, dir: &Path) {
    let text = std::fs::read_to_string(dir.join("top1.txt")).unwrap();
    let own: f64 = ["run.json", "run-psync.json"].iter().map(|r| json(&dir.join(r))["ios"].as_f64().unwrap()).sum();
    let (mut ios, mut frame_s, mut dev_shown) = (0.0, 0.0, false);
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("iopath top: ") {
            frame_s = rest.split(" in ").nth(1).and_then(|x| x.split(' ').next()).unwrap().parse::<f64>().unwrap();
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 12 && f[0] == "-" && f[3] == "nvme0n1" && f[5] == "read" {
            // No process and no submission or completion in this tier: unknown, never a zero.
            assert!(f[1] == "(--phases)" && f[8] == "-/-" && f[11] == "-/-", "{kernel}: {l}");
            dev_shown |= f[10] != "-/-";
            ios += f[6].parse::<f64>().unwrap() * frame_s;
        }
    }
    assert!(
        (ios - own).abs() <= own * 0.01 + 2.0,
        "{kernel}: one hook counted {ios:.0} reads, the generator {own}:\n{text}"
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("nvme0n1: device phase")),
        "{kernel}: no verdict for nvme0n1:\n{text}"
    );
    assert!(dev_shown, "{kernel}: the device phase of nvme0n1 never shown:\n{text}");
}

/// The one-hook tier under dm-linear on nvme0n1 with wbt off (serve beside `serve --phases`):
/// every read is one request of nvme0n1 on the `stacked` route (its bio a dm clone), nvme0n1's
/// issue stamp judged (trusted, or hooked: with wbt off the queue may keep no stats), and the
/// device phase's mean within max(3%, 5 us) of the full set's on the same reads.
fn one_hook_on_a_stacked_device(kernel: &str, dir: &Path) {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let (b1, m1, b, m) = (read("before1.txt"), read("metrics1.txt"), read("before.txt"), read("metrics.txt"));
    let own = json(&dir.join("run.json"))["ios"].as_f64().unwrap();
    let value = |l: &str| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    let sum = |t: &str, prefix: &str, has: &[&str]| -> f64 {
        t.lines().filter(|l| l.starts_with(prefix) && has.iter().all(|h| l.contains(h))).map(value).sum()
    };
    let delta = |a: &str, z: &str, prefix: &str, has: &[&str]| sum(z, prefix, has) - sum(a, prefix, has);
    let nvme = "disk=\"nvme0n1\"";
    let ios = delta(&b1, &m1, "iopath_ios_total{", &[nvme, "route=\"stacked\"", "op=\"read\""]);
    assert!((ios - own).abs() <= own * 0.01, "{kernel}: one hook counted {ios} stacked reads of {own}:\n{m1}");
    assert!(
        m1.contains("iopath_stamps_trusted{disk=\"nvme0n1\",stamp=\"io_start_time_ns\"}"),
        "{kernel}: no verdict on nvme0n1's issue stamp:\n{m1}"
    );
    let dev = |a: &str, z: &str, has: &[&str]| {
        let n = delta(a, z, "iopath_io_latency_seconds_count{", has);
        (n, delta(a, z, "iopath_io_latency_seconds_sum{", has) / n * 1e9)
    };
    let (n1, mean1) = dev(&b1, &m1, &[nvme, "phase=\"device\""]);
    assert!(n1 >= own * 0.99, "{kernel}: the device phase of {n1} of {own} reads");
    // The full set's reads, whichever disk it names for them (the dm device's I/Os).
    let (n, mean) = dev(&b, &m, &["phase=\"device\"", "op=\"read\""]);
    eprintln!("{kernel}: dm one hook device mean {mean1:.0} ns over {n1}, full set {mean:.0} ns over {n}");
    // Under emulation a program's run takes microseconds, and the two sessions' programs run one
    // after the other at each tracepoint.
    assert!(
        (mean1 - mean).abs() <= (mean * 0.03).max(5000.0),
        "{kernel}: device phase mean {mean1:.0} ns (one hook) vs {mean:.0} ns (full set, {n} reads)"
    );
}

/// 5.10: no bpf_loop, BPF atomics or task storage, so the compat build of the phases object
/// (bpf/compat.bpf.h) loads; aio and psync are followed through all four phases and reconcile
/// with the generator's own latency; io_uring is named off (its tracepoints hand over no request
/// here) and still traced at the block layer; no module BTF, so no NVMe split.
fn compat_build_traces(dir: &Path) {
    let d = json(&dir.join("doctor/doctor.json"));
    assert!(release_of("5.10", d["kernel"].as_str().unwrap()), "5.10: {}", d["kernel"]);
    assert_eq!(d["tracing_possible"], true, "5.10: {}", d["problems"]);
    assert!(d["dry_run"].get("Ok").is_some(), "5.10: {}", d["dry_run"]);
    assert_eq!(d["bpf_build"], "compat", "5.10: {}", d["bpf_build"]);
    let off = |r: &Value, feature: &str| {
        r["features_off"].as_array().unwrap().iter().find(|f| f["feature"] == feature).map(|f| f["why"].to_string())
    };
    for step in ["aio", "aio-full", "psync", "aio-rawtp", "aio-kprobe"] {
        let r = json(&dir.join(step).join("report.json"));
        let what = format!("5.10 {step}");
        assert!(r["ios"].as_u64().unwrap() > 1000, "{what}: {}", r["ios"]);
        for ph in ["submission", "block", "device", "completion"] {
            let p = &r["phases"][ph];
            assert!(p["count"].as_u64().unwrap_or(0) > 0, "{what}: phase {ph}: {p}");
        }
        let corr = r["correlated_fraction"].as_f64().unwrap();
        assert!(corr >= 0.99, "{what}: correlated {corr}");
        // The phases add up to the generator's own mean latency. psync's phases start at the
        // syscall's entry and end at its exit: the transitions themselves are outside them, and
        // under TCG they cost several us (5.10 psync: 121.8 of 129.6 us, 94.0%; 6.1 94.9%, 7.x
        // 96.8%; 98.5% on the build host), and how many depends on the host QEMU runs on: on a
        // slower one 5.10 psync summed to 89.3%, 89.4% and, with the commit before, 89.8% (17-23
        // us outside the phases of 166-218). Where the sum falls short the report must say so.
        let ratio = r["reconciliation"]["phase_sum_ratio"].as_f64().unwrap_or(0.0);
        let low = if step == "psync" { 0.85 } else { 0.95 };
        assert!((low..=1.05).contains(&ratio), "{what}: phases sum to {ratio} of the generator's latency");
        let said = r["reconciliation"]["reconciled"].as_bool().unwrap();
        assert_eq!(said, (0.95..=1.05).contains(&ratio), "{what}: reconciled={said} at {ratio}");
        assert!(
            off(&r, "NVMe driver/device split").is_some_and(|w| w.contains("no BTF")),
            "{what}: nvme split not named off"
        );
    }
    let u = json(&dir.join("uring/report.json"));
    let why = off(&u, "io_uring requests").unwrap_or_else(|| panic!("5.10 uring: io_uring requests not named off"));
    assert!(why.contains("hands over no request"), "5.10 uring: {why}");
    let raw = json(&dir.join("aio-rawtp/report.json"));
    assert_eq!(probe(&raw, "block:block_bio_queue").map(|p| p["via"].clone()), Some(Value::from("raw_tp")));
    let k = json(&dir.join("aio-kprobe/report.json"));
    let p = probe(&k, "kprobe:nvme_queue_rq").unwrap_or_else(|| panic!("5.10: no kprobe doorbell"));
    assert_eq!(p["attached"], true, "5.10: {p}");
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn iommu_regression_explained() {
    for (kernel, off) in expect_boots("iommu-off", "iommu_regression_explained") {
        let strict = off.with_file_name(format!("{kernel}-iommu-strict"));
        steps_ok(&off);
        steps_ok(&strict);
        let (b, a) = (json(&off.join("uring/report.json")), json(&strict.join("uring/report.json")));
        check_trace(&kernel, &off.join("uring"), true);
        check_trace(&kernel, &strict.join("uring"), true);
        assert_eq!(b["iommu_map"]["per_io"].as_f64().unwrap(), 0.0, "{kernel}: maps with intel_iommu=off");
        let maps = a["iommu_map"]["per_io"].as_f64().unwrap();
        assert!(maps >= 0.99, "{kernel}: {maps} iommu maps per 4k I/O with the IOMMU strict");
        assert!(a["config"]["iommu"]["mode"].as_str().unwrap().starts_with("DMA"), "{}", a["config"]["iommu"]);
        // IOPS of 3 s emulated runs swing by half between boots (one quick run's IOMMU-off baseline
        // ran at half its usual rate), so the check is where the cost sits, not how big it is.
        let c = json(&off.with_file_name(format!("{kernel}-compare")).join("compare.json"));
        assert!(c["causes"][0].as_str().unwrap().starts_with("IOMMU translation"), "{kernel}: {}", c["causes"]);
        let verdict = c["verdict"].as_str().unwrap();
        assert!(verdict.contains("iommu map 0.00 -> 1.00 per I/O"), "{verdict}");
        // The map is done in the driver's submission step (nvme_setup_cmd -> issue), inside the
        // block phase: that step's share of the block phase grows. A share, not the step's own
        // time: the two guests' CPUs run at different speeds (one CI run's IOMMU-off guest took
        // 83 us of CPU per I/O against 56.5 us for strict, and every CPU step of it was slower,
        // the driver's 4.3 us against 4.2 us).
        let mean = |list: &str, name: &str, side: &str| {
            let p = c[list].as_array().unwrap().iter().find(|p| p["phase"] == name).unwrap();
            p[side]["mean"].as_f64().unwrap()
        };
        let share = |side: &str| mean("nvme_phases", "nvme_driver", side) / mean("phases", "block", side);
        assert!(
            share("after") >= share("before") * 1.2,
            "{kernel}: the driver step's share of the block phase {:.3} -> {:.3}",
            share("before"),
            share("after")
        );
        assert!(c["config_changes"].as_array().unwrap().iter().any(|x| x["key"] == "iommu.mode"), "{kernel}");
        let fam = c["families"].as_array().unwrap().iter().find(|f| f["family"] == "IOMMU/DMA").unwrap();
        assert!(fam["after"].as_f64().unwrap() > fam["before"].as_f64().unwrap() + 0.01, "{kernel}: {fam}");
        let svg = std::fs::read_to_string(off.with_file_name(format!("{kernel}-compare")).join("diff.svg")).unwrap();
        assert!(svg.contains("iommu_dma_map") && svg.contains("class=\"iop-iommu\""), "{kernel}: diff.svg");
    }
}

/// The full matrix's other IOMMU modes: passthrough (identity groups, no translation) and the
/// distro default (lazy, DMA-FQ), and passthrough -> strict explained as a group type change.
/// The same study with the IOMMU off and strict (a small grid in quick, the kernel study with
/// --sweep): every point compared, each point's cause the IOMMU's translation, one verdict for
/// the study, and the study page with this kernel's column.
#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn iommu_sweeps_compared() {
    for (kernel, off) in expect_boots("iommu-off", "iommu_sweeps_compared") {
        let strict = off.with_file_name(format!("{kernel}-iommu-strict"));
        let (a, b) = (json(&off.join("sweep/sweep.json")), json(&strict.join("sweep/sweep.json")));
        assert_eq!(a["points"].as_array().unwrap().len(), b["points"].as_array().unwrap().len(), "{kernel}");
        let dir = off.with_file_name(format!("{kernel}-compare-sweep"));
        let c = json(&dir.join("compare.json"));
        assert_eq!(c["schema"], "iopath.sweep-compare/1");
        let points = c["points"].as_array().unwrap();
        assert_eq!(points.len(), a["points"].as_array().unwrap().len(), "{kernel}: every point compared: {c}");
        for p in points {
            assert!(p["causes"][0].as_str().unwrap().starts_with("IOMMU translation"), "{kernel}: {p}");
        }
        let verdict = c["verdict"].as_str().unwrap();
        assert!(verdict.contains("likely cause: IOMMU translation"), "{kernel}: {verdict}");
        // Each moved point explains itself (CPU per I/O where the submitter is CPU-bound, else the
        // phase that moved most), with the IOMMU's maps; the verdict weighs those, it does not
        // count phases (the quick pair had read "completion phase -4.8 us at 1 of the 2 points"
        // while QD16 lost 41% with device +47.9 us).
        let moved: Vec<&Value> = points.iter().filter(|p| p["iops_judgement"] == "slower").collect();
        for p in &moved {
            let kind = p["explanation"]["kind"].as_str().unwrap();
            assert!(kind == "CPU per I/O" || kind == p["moved_most"], "{kernel}: {p}");
        }
        if !moved.is_empty() {
            assert!(
                verdict.contains("explained by") && verdict.contains("iommu map 0.00 -> 1.00 per I/O"),
                "{kernel}: {verdict}"
            );
        }
        assert!(c["config_changes"].as_array().unwrap().iter().any(|x| x["key"] == "iommu.mode"), "{kernel}");
        for f in ["report.html", "iops.svg", "p99.svg"] {
            assert!(dir.join(f).is_file(), "{kernel}: {f}");
        }
        let study = std::fs::read_to_string(off.with_file_name("study.html")).unwrap();
        assert!(study.contains(&format!(">Debian {kernel}: IOPS<")), "{kernel}: study.html has its column");
        let sj = json(&off.with_file_name("study.json"));
        let col = sj["columns"].as_array().unwrap().iter().find(|x| x["name"] == format!("Debian {kernel}"));
        assert_eq!(col.expect("its column in study.json")["comparison"]["verdict"], c["verdict"], "{kernel}");
    }
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn iommu_passthrough_and_lazy() {
    for (kernel, pt) in expect_boots("iommu-pt", "iommu_passthrough_and_lazy") {
        steps_ok(&pt);
        let r = json(&pt.join("uring/report.json"));
        check_trace(&kernel, &pt.join("uring"), true);
        let groups = r["config"]["iommu"]["group_types"].to_string();
        assert!(groups.contains("identity"), "{kernel}: iommu=pt groups {groups}");
        assert_eq!(r["iommu_map"]["per_io"].as_f64().unwrap(), 0.0, "{kernel}: maps in passthrough");
        let c = json(&pt.with_file_name(format!("{kernel}-compare-pt")).join("compare.json"));
        assert!(c["causes"][0].as_str().unwrap().starts_with("IOMMU translation"), "{kernel}: {}", c["causes"]);
        let g = c["config_changes"].as_array().unwrap().iter().find(|x| x["key"] == "iommu.group_types").cloned();
        let g = g.unwrap_or_else(|| panic!("{kernel}: no group type change"));
        assert!(
            g["before"].as_str().unwrap().contains("identity") && g["after"].as_str().unwrap().contains("DMA"),
            "{g}"
        );
        let lazy = pt.with_file_name(format!("{kernel}-iommu-lazy"));
        steps_ok(&lazy);
        let l = json(&lazy.join("uring/report.json"));
        check_trace(&kernel, &lazy.join("uring"), true);
        assert!(l["config"]["iommu"]["group_types"].to_string().contains("DMA-FQ"), "{kernel}: default domain");
        assert!(l["iommu_map"]["per_io"].as_f64().unwrap() >= 0.99, "{kernel}: lazy still maps every I/O");
    }
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn iopoll_on_poll_queues() {
    for (kernel, dir) in expect_boots("iopoll", "iopoll_on_poll_queues") {
        steps_ok(&dir);
        let r = json(&dir.join("uring-iopoll/report.json"));
        let queues = r["hw_queues"].as_array().unwrap();
        assert!(queues.iter().any(|q| q["kind"] == "poll"), "{kernel}: polled I/O on {queues:?}");
        let irq = r["irq"]["per_io"].as_f64().unwrap();
        assert!(irq < 0.1, "{kernel}: {irq} interrupts per polled I/O");
    }
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn traced_fio_in_guest() {
    for (kernel, dir) in expect_boots("fio", "traced_fio_in_guest") {
        steps_ok(&dir);
        let r = json(&dir.join("fio/report.json"));
        let corr = r["correlated_fraction"].as_f64().unwrap();
        assert!(corr >= 0.99, "{kernel}: traced fio correlated {corr}");
        let f = json(&dir.join("fio/fio.json"));
        let fio_iops = f["jobs"][0]["read"]["iops"].as_f64().unwrap();
        let ours = r["iops"].as_f64().unwrap();
        assert!((ours / fio_iops - 1.0).abs() < 0.05, "{kernel}: iopath {ours} vs fio {fio_iops} IOPS");
    }
}

fn route_share(r: &Value, key: &str) -> f64 {
    r["routes"].as_array().unwrap().iter().find(|x| x["key"] == key).map_or(0.0, |x| x["share"].as_f64().unwrap())
}

/// btrfs's direct reads (its btrfs_bio walked back to the iomap dio; 6.1 clones it, 6.3+ passes
/// iomap's bio on) and a zram device (bio-based: no request) in the guest's kernel.
fn btrfs_and_zram(kernel: &str, dir: &Path) {
    let r = json(&dir.join("btrfs/report.json"));
    let what = format!("{kernel} btrfs");
    assert_eq!(r["target"]["fs_type"], "btrfs", "{what}");
    assert_eq!(r["config"]["filesystem"]["type"], "btrfs", "{what}");
    let corr = r["correlated_fraction"].as_f64().unwrap();
    assert!(corr >= 0.99, "{what}: correlated {corr}; {}", r["reconciliation"]);
    let ios = r["phases"]["total"]["count"].as_f64().unwrap();
    let endio = r["phases"]["fs_endio"]["count"].as_f64().unwrap_or(0.0);
    assert!(endio >= 0.99 * ios, "{what}: end-io worker {} of {ios}", r["phases"]["fs_endio"]);
    let r = json(&dir.join("zram/report.json"));
    let what = format!("{kernel} zram");
    let corr = r["correlated_fraction"].as_f64().unwrap();
    // 7.3 (lazy preemption) under emulation at zram's rate (580k reads in 3 s): the kernel skipped
    // 25248 runs of the bio programs (recursion protection: a run preempted on that CPU), each an
    // I/O not followed. Then every I/O not followed must be one of those, and the table must say
    // so; anywhere else, followed.
    let unfollowed = r["app_ios"].as_f64().unwrap() - r["phases"]["total"]["count"].as_f64().unwrap();
    let skipped = r["lost_events"]["recursion_misses"].as_f64().unwrap();
    let said = r["reconciliation"]["reasons"].to_string().contains("skipped");
    assert!(
        corr >= 0.99 || (skipped >= unfollowed && said),
        "{what}: correlated {corr}, {unfollowed} not followed, {skipped} probe runs skipped; {}",
        r["reconciliation"]
    );
    assert!(route_share(&r, "bio_based") >= 0.99, "{what}: {}", r["routes"]);
}

#[test]
#[ignore = "needs scripts/vmtest results (IOPATH_VMTEST_RESULTS)"]
fn stacked_devices_and_cgroup2() {
    for (kernel, dir) in expect_boots("stack", "stacked_devices_and_cgroup2") {
        steps_ok(&dir);
        let mut up = Vec::new();
        for (step, kind, lower) in [
            ("dm-linear", "dm", &["nvme0n1"][..]),
            ("dm-crypt", "dm", &["nvme0n1"]),
            ("md-raid1", "md", &["nvme0n1", "nvme1n1"]),
        ] {
            let r = json(&dir.join(step).join("report.json"));
            let what = format!("{kernel} {step}");
            let ios = r["ios"].as_u64().unwrap();
            assert!(ios > 1000, "{what}: {ios} I/Os");
            // Every I/O on the top device followed through its clones on the lower device(s).
            let corr = r["correlated_fraction"].as_f64().unwrap();
            assert!(corr >= 0.99, "{what}: correlated {corr}; {}", r["lost_events"]);
            assert!(route_share(&r, "stacked") >= 0.99, "{what}: {}", r["routes"]);
            assert_eq!(r["unlinked"], 0, "{what}");
            // ... and the table adds up to the generator's own latency: 98.8-99.7% on 6.12 once
            // iopath's own reap work is a row of its own (md raid1 on libaio was 94.2% without it:
            // 30 I/Os a reap, closed one by one under emulation before io_getevents returned).
            assert_eq!(r["reconciliation"]["reconciled"], true, "{what}: {}", r["reconciliation"]);
            for sub in ["stacked_down", "stacked_up"] {
                let n = r["phases"][sub]["count"].as_u64().unwrap_or(0);
                assert!(n as f64 >= 0.99 * ios as f64, "{what}: {sub} {}", r["phases"][sub]);
            }
            // The lower device's NVMe split still lands on the same I/Os.
            let drv = r["phases"]["nvme_driver"]["count"].as_u64().unwrap_or(0);
            assert!(drv as f64 >= 0.99 * ios as f64, "{what}: nvme_driver {drv} of {ios}");
            // The stack is in the report's configuration, with what lies beneath.
            let stack = r["config"]["stack"].as_array().unwrap_or_else(|| panic!("{what}: no config.stack"));
            let top = stack.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("{what}: {stack:?}"));
            let below: Vec<&str> = top["lower"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
            assert_eq!(below, lower, "{what}");
            up.push(r["phases"]["stacked_up"]["mean_ns"].as_f64().unwrap());
        }
        one_hook_on_a_stacked_device(&kernel, &dir.join("dm-one-hook"));
        btrfs_and_zram(&kernel, &dir);
        if let Some(level) = json(&dir.join("md-raid1/report.json"))["config"]["stack"][0]["md_level"].as_str() {
            assert_eq!(level, "raid1", "{kernel}");
        }
        // dm-crypt decrypts reads after the lower device completes them: its stacked (up) time
        // dwarfs dm-linear's (x90-x350 under emulation).
        assert!(up[1] > 5.0 * up[0], "{kernel}: stacked up dm-crypt {} vs dm-linear {} ns", up[1], up[0]);
        // dm-crypt cannot take io_uring's non-blocking issue, so io_uring punts every read to
        // io-wq on its own: the kernel's choice, followed as the io-wq route.
        let crypt = json(&dir.join("dm-crypt/report.json"));
        assert!(route_share(&crypt, "iowq") >= 0.5, "{kernel}: {}", crypt["routes"]);
        // cgroup v2 io.max riops=300: blk-throttle holds the rest; the limit is the reference.
        let r = json(&dir.join("cgroup2-io-max/report.json"));
        let iops = r["iops"].as_f64().unwrap();
        assert!(iops <= 300.0 * 1.15, "{kernel}: {iops} IOPS under riops=300");
        assert!(route_share(&r, "throttled") > 0.05, "{kernel}: {}", r["routes"]);
        assert!(r["correlated_fraction"].as_f64().unwrap() >= 0.99, "{kernel}: {}", r["lost_events"]);
        assert_eq!(r["reconciliation"]["reconciled"], true, "{kernel}: {}", r["reconciliation"]);
        let cg = &r["config"]["cgroup"];
        assert_eq!(cg["unified"], "/t", "{kernel}: {cg}");
        assert!(cg["limits"]["io.max"].as_str().unwrap_or("").contains("riops=300"), "{kernel}: {cg}");
        // serve charges writeback to the cgroup that dirtied the pages (the bio's blkcg), not to
        // the flusher: dd wrote 64 MiB through the page cache in /wb, sync wrote it back.
        let m = std::fs::read_to_string(dir.join("cgroup2-writeback/metrics.txt")).unwrap();
        let bytes = |cgroup: &str| -> f64 {
            m.lines()
                .filter(|l| {
                    l.starts_with("iopath_io_bytes_total{")
                        && l.contains("disk=\"nvme1n1\"")
                        && l.contains(&format!("cgroup=\"{cgroup}\""))
                        && l.contains("route=\"writeback\"")
                        && l.contains("op=\"write\"")
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let (wb, root) = (bytes("/wb"), bytes("/"));
        let want = 64.0 * 1048576.0;
        assert!(
            (0.95 * want..=1.1 * want).contains(&wb),
            "{kernel}: {wb} bytes written back for /wb, dd wrote {want}:\n{m}"
        );
        assert!(root < 0.1 * want, "{kernel}: {root} bytes of writeback charged to /:\n{m}");
    }
}
