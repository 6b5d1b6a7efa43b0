//! `iopath run` on real files: every engine and io_uring mode does real I/O and the report's
//! numbers hang together.

mod common;
use common::*;
use std::os::unix::fs::MetadataExt;

fn check_sane(r: &serde_json::Value, what: &str) {
    assert_eq!(r["schema"], "iopath.report/1");
    let ios = r["ios"].as_u64().unwrap();
    assert!(ios > 100, "{what}: only {ios} I/Os");
    let lat = &r["lat_ns"];
    let (p50, p99, max) = (lat["p50"].as_u64().unwrap(), lat["p99"].as_u64().unwrap(), lat["max"].as_u64().unwrap());
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{what}: p50 {p50} p99 {p99} max {max}");
    assert_eq!(lat["count"].as_u64(), Some(ios), "{what}: every I/O has a latency");
    assert!(r["iops"].as_f64().unwrap() > 0.0);
    let cpu = r["cpu"]["usr_ns"].as_u64().unwrap() + r["cpu"]["sys_ns"].as_u64().unwrap();
    assert!(cpu > 0, "{what}: CPU time was counted");
    let ctx = r["ctx_switches"]["voluntary"].as_u64().unwrap() + r["ctx_switches"]["involuntary"].as_u64().unwrap();
    assert!(ctx > 0, "{what}: context switches were counted");
    // lat = slat + clat, per I/O, so the means add up (rounding aside).
    if let Some(slat) = r["slat_ns"]["mean"].as_u64() {
        let sum = slat + r["clat_ns"]["mean"].as_u64().unwrap();
        let l = lat["mean"].as_u64().unwrap();
        assert!(sum.abs_diff(l) <= 2, "{what}: slat+clat {sum} vs lat {l}");
    }
}

#[test]
fn every_engine_and_mode_does_real_io() {
    require_root();
    let d = scratch("engines");
    let f = d.join("t.dat");
    let f = f.to_str().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("uring qd16", &["--engine", "uring", "--qd", "16"]),
        ("aio qd16", &["--engine", "aio", "--qd", "16"]),
        ("psync", &["--engine", "psync"]),
        ("uring sqpoll", &["--engine", "uring", "--qd", "8", "--sqpoll"]),
        ("uring batch", &["--engine", "uring", "--qd", "32", "--batch-submit", "4", "--batch-complete", "4"]),
        ("uring fixed-bufs", &["--engine", "uring", "--qd", "8", "--fixed-bufs"]),
        ("aio randrw 2 jobs", &["--engine", "aio", "--qd", "4", "--rw", "randrw", "--mix", "70", "--jobs", "2"]),
    ];
    for (what, extra) in cases {
        let mut a = vec!["--file", f, "--size", "64m", "--runtime", "1s"];
        a.extend_from_slice(extra);
        let r = run_json(&a);
        check_sane(&r, what);
        assert_eq!(r["target"]["fs_type"], "ext4", "{what}: the test file is on the root file system");
        if *what == "psync" {
            assert!(r["slat_ns"].is_null(), "a synchronous engine has no submission latency");
        }
        if what.contains("randrw") {
            let (rd, wr) = (r["reads"].as_u64().unwrap(), r["writes"].as_u64().unwrap());
            let share = rd as f64 / (rd + wr) as f64;
            assert!((0.6..0.8).contains(&share), "--mix 70 gave {share:.2} reads");
        }
    }
}

#[test]
fn ios_budget_is_exact_and_queue_depth_is_used() {
    require_root();
    let d = scratch("budget");
    let f = d.join("t.dat");
    let r = run_json(&["--file", f.to_str().unwrap(), "--size", "16m", "--ios", "5000", "--qd", "32", "--jobs", "2"]);
    assert_eq!(r["ios"].as_u64(), Some(5000));
    // Deeper queues cost latency: with 32 in flight, the mean is above one I/O's service time.
    let qd1 = run_json(&["--file", f.to_str().unwrap(), "--ios", "2000", "--qd", "1"]);
    assert!(
        r["lat_ns"]["mean"].as_u64() > qd1["lat_ns"]["mean"].as_u64(),
        "qd32 mean {} should exceed qd1 mean {}",
        r["lat_ns"]["mean"],
        qd1["lat_ns"]["mean"]
    );
}

#[test]
fn bytes_written_are_bytes_read_back() {
    require_root();
    let d = scratch("verify");
    let f = d.join("v.dat");
    let f = f.to_str().unwrap();
    // Lay out with seed 1, overwrite everything with seed 42 through each engine, read back.
    // The test's own file, not iopath's: written with --allow-write.
    std::fs::write(f, vec![0u8; 8 << 20]).unwrap();
    let w = run_json(&[
        "--file",
        f,
        "--rw",
        "write",
        "--ios",
        "2048",
        "--bs",
        "4k",
        "--qd",
        "8",
        "--verify",
        "--seed",
        "42",
        "--allow-write",
    ]);
    assert_eq!(w["writes"].as_u64(), Some(2048));
    for engine in ["uring", "aio", "psync"] {
        let qd = if engine == "psync" { "1" } else { "16" };
        let r = run_json(&[
            "--file", f, "--engine", engine, "--qd", qd, "--rw", "randread", "--ios", "3000", "--verify", "--seed",
            "42",
        ]);
        assert_eq!(r["verified"].as_u64(), Some(3000), "{engine}: every block read was checked");
    }
    // The check is real: a wrong seed, or one flipped byte, is caught.
    let err = run_err(&["--file", f, "--rw", "read", "--ios", "10", "--verify", "--seed", "43"]);
    assert!(err.contains("--verify: data at byte"), "{err}");
    let mut bytes = std::fs::read(f).unwrap();
    bytes[4096 * 7 + 5] ^= 0xff;
    std::fs::write(f, &bytes).unwrap();
    let err = run_err(&["--file", f, "--rw", "read", "--ios", "2048", "--verify", "--seed", "42"]);
    assert!(err.contains(&format!("at byte {}", 4096 * 7)), "{err}");
}

#[test]
fn a_new_file_is_created_and_fully_written() {
    require_root();
    let d = scratch("layout");
    let f = d.join("new.dat");
    let r = run_json(&["--file", f.to_str().unwrap(), "--size", "8m", "--ios", "100"]);
    assert_eq!(r["target"]["size"].as_u64(), Some(8 << 20));
    let meta = std::fs::metadata(&f).unwrap();
    assert_eq!(meta.len(), 8 << 20);
    // Allocated, not sparse: reads of holes would never reach the device.
    assert_eq!(meta.blocks() * 512, 8 << 20);
    // And it holds the seed-1 pattern, so a verifying read passes on a fresh file.
    let v = run_json(&["--file", f.to_str().unwrap(), "--rw", "read", "--ios", "2048", "--verify"]);
    assert_eq!(v["verified"].as_u64(), Some(2048));
}

#[test]
fn tmpfs_and_page_cache_are_called_out() {
    require_root();
    let d = scratch("tmpfs");
    let _m = Mount::new(&["-t", "tmpfs", "-o", "size=64m", "tmpfs"], &d.join("mnt"));
    let f = d.join("mnt/t.dat");
    let r = run_json(&["--file", f.to_str().unwrap(), "--size", "16m", "--ios", "500"]);
    assert_eq!(r["target"]["in_memory"], true);
    let w = r["warnings"].to_string();
    assert!(w.contains("lives in RAM"), "O_DIRECT on tmpfs is flagged: {w}");
    // Traced, it has no block phases: said so, counted as moving no block I/O, never zeros
    // in a table or another engine's labels.
    let out = iopath(&["trace", "--file", f.to_str().unwrap(), "--engine", "uring", "--qd", "8", "--ios", "3000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("no I/O was followed end to end") && text.contains("tmpfs file"), "{text}");
    assert!(!text.contains("sum of means") && !text.contains("aio"), "{text}");
    let t = json_of("trace", &["--file", f.to_str().unwrap(), "--engine", "uring", "--ios", "3000"]);
    assert_eq!(t["no_block_io"].as_u64(), Some(3000), "{t}");
    assert_eq!(t["reconciliation"]["reconciled"], false);

    let g = scratch("buffered").join("b.dat");
    let r = run_json(&["--file", g.to_str().unwrap(), "--size", "8m", "--ios", "500", "--direct", "false"]);
    assert!(r["warnings"].to_string().contains("page cache"), "{}", r["warnings"]);
}

#[test]
fn a_loop_device_is_a_target() {
    require_root();
    let d = scratch("loopdev");
    let l = LoopDev::new(&d.join("backing"), 64, 512);
    let r = run_json(&["--device", &l.0, "--engine", "aio", "--qd", "8", "--runtime", "1s"]);
    check_sane(&r, "aio on a loop device");
    assert_eq!(r["target"]["kind"], "device");
    // Reads leave atime alone (O_NOATIME, as fio opens devices): with relatime, an atime older
    // than a day would otherwise be rewritten by the first read, and every read pays the check.
    let file = d.join("atime.dat");
    let file = file.to_str().unwrap();
    run_json(&["--file", file, "--size", "1m", "--ios", "1"]);
    for (flag, target) in [("--device", l.0.as_str()), ("--file", file)] {
        sh("touch", &["-a", "-d", "2000-01-01", target]);
        let old = std::fs::metadata(target).unwrap().atime();
        run_json(&[flag, target, "--rw", "randread", "--ios", "200"]);
        assert_eq!(std::fs::metadata(target).unwrap().atime(), old, "{target}: reads must not update atime");
    }
    let w = run_json(&["--device", &l.0, "--rw", "randwrite", "--allow-write", "--ios", "1000", "--qd", "8"]);
    assert_eq!(w["writes"].as_u64(), Some(1000));
}

/// Little's law holds the generator to its word: the queue depth actually kept is reported, and a
/// submitter that cannot keep up is said to, with the flag that fixes it.
#[test]
fn achieved_queue_depth_is_reported_and_explained() {
    require_root();
    let d = scratch("run-inflight");
    let _m = Mount::new(&["-t", "tmpfs", "-o", "size=100m", "tmpfs"], &d.join("mnt"));
    let dev = LoopDev::new(&d.join("mnt/backing"), 64, 512);
    let one = run_json(&["--device", &dev.0, "--qd", "32", "--runtime", "2s"]);
    let all = run_json(&["--device", &dev.0, "--qd", "32", "--batch-submit", "0", "--runtime", "2s"]);
    for r in [&one, &all] {
        let little = r["iops"].as_f64().unwrap() * r["lat_ns"]["mean"].as_f64().unwrap() / 1e9;
        assert!((r["inflight_avg"].as_f64().unwrap() - little).abs() < 0.01 * little + 0.01, "{}", r["inflight_avg"]);
    }
    // One submit call per I/O on a RAM-backed loop device: the thread, not the device, is the limit.
    let warned = |r: &serde_json::Value| {
        r["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("in flight on average"))
    };
    assert!(one["inflight_avg"].as_f64().unwrap() < 0.8 * 32.0 && warned(&one), "{}", one["warnings"]);
    assert!(one["warnings"].to_string().contains("--batch-submit 0"));
    assert!(all["inflight_avg"].as_f64().unwrap() >= 0.8 * 32.0 && !warned(&all), "{}", all["inflight_avg"]);
}

/// `iopath --version`: the version and the commit it was built from (a fresh clone builds HEAD).
#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = iopath(&["--version"]);
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(out.status.success() && v.starts_with(&format!("iopath {} (commit ", env!("CARGO_PKG_VERSION"))), "{v}");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        Some(h) => assert!(v.ends_with(&format!("(commit {h})")), "built from {v}, HEAD is {h}"),
        None => assert!(v.ends_with("(commit unknown)"), "{v}"),
    }
}
