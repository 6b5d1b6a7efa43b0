//! The BPF side for real: every attach kind iopath relies on loads here and sees block I/O.

mod common;
use common::*;
use iopath::probe::{hooks::AttachKind, trials::with_attached};

fn direct_reads(path: &std::path::Path, n: usize) {
    let out = iopath(&[
        "run",
        "--file",
        path.to_str().unwrap(),
        "--size",
        "4m",
        "--ios",
        &n.to_string(),
        "--engine",
        "psync",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn tracepoint_programs_count_real_block_io() {
    require_root();
    // Classic tracepoints attach through tracefs (mounted here when a fresh machine lacks it).
    iopath::probe::tracefs::Tracefs::ensure().unwrap();
    let f = scratch("bpf").join("t.dat");
    direct_reads(&f, 1); // lay out first, so only reads happen below
    for kind in [AttachKind::TpBtf, AttachKind::RawTp, AttachKind::Tracepoint] {
        let seen = with_attached(kind, 0, |hits| {
            let before = hits();
            direct_reads(&f, 200);
            hits() - before
        })
        .unwrap_or_else(|e| panic!("{} failed to load/attach: {e}", kind.name()));
        // 200 O_DIRECT reads are 200 issued requests at least (other processes add more).
        assert!(seen >= 200, "{}: block_rq_issue fired {seen} times for 200 direct reads", kind.name());
    }
}

#[test]
fn the_perf_event_program_samples_at_its_rate() {
    require_root();
    // The flamegraphs' sampler's kind: a cpu-clock event at 997 Hz on each CPU. Spinning this
    // thread for 500 ms keeps one CPU busy: at least half of its ~498 samples arrive (the clock
    // is the reference), and no more than every CPU's at 1.5x the rate.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let seen = with_attached(AttachKind::PerfEvent, 0, |hits| {
        let before = hits();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(500) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        hits() - before
    })
    .unwrap_or_else(|e| panic!("perf_event failed to load/attach: {e}"));
    assert!(
        (249..=cpus * 748).contains(&seen),
        "{seen} cpu-clock samples in 500 ms of spinning on {cpus} CPUs at 997 Hz"
    );
}

#[test]
fn the_pid_filter_in_rodata_works() {
    require_root();
    let f = scratch("bpf-filter").join("t.dat");
    direct_reads(&f, 1);
    // Filtered to a pid that does no I/O: the program runs but counts nothing of the reads.
    let seen = with_attached(AttachKind::TpBtf, 1, |hits| {
        let before = hits();
        direct_reads(&f, 200);
        hits() - before
    })
    .unwrap();
    assert!(seen < 200, "filtered to pid 1, the program still counted {seen} of our reads");
}

#[test]
fn doctor_reports_this_machine() {
    require_root();
    let out = iopath(&["doctor", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["tracing_possible"], true);
    assert_eq!(d["btf"], true);
    let attach = |k: &str| d["attach"].as_array().unwrap().iter().find(|a| a["kind"] == k).unwrap()["ok"].clone();
    assert_eq!(attach("tp_btf"), true);
    assert_eq!(attach("raw_tp"), true);
    // fentry and kprobe are tried, and the answer is whatever the kernel says: a bool either way.
    assert!(attach("fentry").is_boolean() && attach("kprobe").is_boolean());
    let tp =
        |n: &str| d["tracepoints"].as_array().unwrap().iter().find(|t| t["name"] == n).map(|t| t["present"].clone());
    assert_eq!(tp("block:block_rq_issue"), Some(true.into()));
    assert_eq!(tp("block:block_rq_complete"), Some(true.into()));
    // Always on: top and serve's own dry run attached block I/O and io_uring hooks alone, and
    // doctor says how sync I/O is timed without the syscall pair, and what fentry does here.
    let a = &d["always_on"];
    assert!(a["error"].is_null(), "{a}");
    let hooks: Vec<&str> = a["hooks"].as_array().unwrap().iter().map(|h| h[0].as_str().unwrap()).collect();
    assert!(hooks.contains(&"block:block_bio_queue") && hooks.contains(&"block:block_bio_complete"), "{hooks:?}");
    // fentry on the positional sync calls where it attaches (the rig), else said off with why.
    let fentry = attach("fentry") == true;
    assert!(
        hooks
            .iter()
            .all(|h| h.starts_with("block:") || h.starts_with("io_uring:") || (fentry && h.starts_with("fentry:"))),
        "{hooks:?}"
    );
    let sync = a["sync_io"].as_str().unwrap();
    assert!(sync.contains("--sync-syscalls") && sync.contains("fentry"), "{sync}");
    assert_eq!(a["sync_fentry"], fentry, "{sync}");
    if fentry {
        assert!(hooks.contains(&"fentry:pread64") && sync.contains("timed by fentry"), "{hooks:?} {sync}");
    } else {
        assert!(sync.contains("fentry on pread/pwrite is off here: fentry"), "{sync}");
    }
    // The one-hook tier, top and serve's default: its dry run loaded and attached the one hook
    // and both check hooks, block I/O's alone.
    let one = d["one_hook"]["hooks"].as_array().unwrap_or_else(|| panic!("one hook: {}", d["one_hook"]));
    let one: Vec<&str> = one.iter().map(|h| h[0].as_str().unwrap()).collect();
    assert_eq!(one, ["block:block_rq_complete", "block:block_rq_issue", "block:block_bio_queue"], "{one:?}");
    let vda = d["block_devices"].as_array().unwrap().iter().find(|b| b["name"] == "vda").cloned();
    if let Some(vda) = vda {
        assert!(vda["scheduler"].is_string() && vda["logical_block_size"].is_u64());
    }
}

/// `doctor --stamps`: each disk's own stamps checked against the hooks on the host's own I/O,
/// for real (the one-hook tier's check window), beside what sysfs says to expect. A loop device
/// of the test's own under load is judged; the requests the check compared are requests the
/// device completed meanwhile (its /sys/block stat, an independent count).
#[test]
fn doctor_checks_each_disks_stamps_under_load() {
    require_root();
    let d = scratch("doctor-stamps");
    let l = LoopDev::written(&d.join("backing"), 64);
    let name = l.0.trim_start_matches("/dev/").to_owned();
    let reads = || -> u64 {
        let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        s.split_whitespace().next().unwrap().parse().unwrap()
    };
    let mut load = std::process::Command::new(bin())
        .args(["run", "--device", &l.0, "--engine", "uring", "--qd", "8", "--runtime", "8s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let before = reads();
    let out = iopath(&["doctor", "--json", "--stamps", "3"]);
    let after = reads();
    let _ = load.kill();
    let _ = load.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &doc["stamps_checked"];
    assert!(c["error"].is_null(), "{c}");
    let line = c["disks"].as_array().unwrap().iter().find(|x| x[0] == name.as_str()).cloned();
    let line = line.unwrap_or_else(|| panic!("{name} not judged: {c}"));
    let line = line[1].as_str().unwrap();
    assert!(line.contains("device phase") && line.contains("block phase"), "{line}");
    // Its verdicts by dev_t: decided on requests the device really completed in the window.
    let trust = c["state"]["trust"].as_object().unwrap();
    let mut judged = 0;
    for t in trust.values() {
        let v = &t["issue"];
        if v["state"] == "unchecked" {
            continue;
        }
        let n = v["n"].as_u64().unwrap();
        assert!(n >= 20, "{t}");
        judged += 1;
        if line.contains("io_start_time_ns trusted") && v["state"] == "trusted" {
            assert!(n <= after - before, "{n} requests compared, the device completed {}", after - before);
        }
    }
    assert!(judged >= 1, "{c}");
    // Without the flag: what sysfs says to expect, labelled so, and no check.
    let out = iopath(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("expected from sysfs, not measured") && text.contains(&name), "{text}");
    let bad = iopath(&["doctor", "--stamps", "-1"]);
    assert!(!bad.status.success());
}
