//! The compat build of the phases object (bpf/compat.bpf.h: what kernels before 5.17 load) run on
//! the build host, forced with IOPATH_BPF_BUILD=compat: doctor loads it and names it, and it
//! follows io_uring, libaio and sync I/O as the modern build does, each trace checked against the
//! generator's own latency. The rig runs it on 5.10 itself (tests/vm.rs, compat_build_traces).

mod common;
use common::*;
use std::process::Command;

fn compat(args: &[&str]) -> serde_json::Value {
    let out = Command::new(bin()).env("IOPATH_BPF_BUILD", "compat").args(args).output().expect("iopath runs");
    assert!(out.status.success(), "iopath {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn doctor_loads_and_names_the_compat_build() {
    require_root();
    let d = compat(&["doctor", "--json"]);
    assert_eq!(d["bpf_build"], "compat", "{}", d["bpf_build"]);
    assert!(d["dry_run"].get("Ok").is_some(), "the compat build did not load: {}", d["dry_run"]);
    assert_eq!(d["tracing_possible"], true, "{}", d["problems"]);
    // Without the variable the same kernel takes the modern build.
    let out = iopath(&["doctor", "--json"]);
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["bpf_build"], "modern");
}

#[test]
fn the_compat_build_follows_every_engine_and_reconciles() {
    require_root();
    let d = scratch("compat");
    let f = d.join("t.dat");
    let f = f.to_str().unwrap();
    run_json(&["--file", f, "--size", "64m", "--ios", "10"]);
    for (engine, qd, full) in [("uring", "16", true), ("aio", "16", true), ("aio", "16", false), ("psync", "1", false)]
    {
        let mut args = vec!["trace", "--engine", engine, "--qd", qd, "--file", f, "--runtime", "2s", "--json", "-"];
        if full {
            args.push("--full");
        }
        let r = compat(&args);
        let what = format!("compat {engine} qd{qd}{}", if full { " --full" } else { "" });
        assert_eq!(r["bpf_build"], "compat", "{what}");
        for p in ["submission", "block", "device", "completion"] {
            assert!(r["phases"][p]["mean_ns"].as_u64().unwrap_or(0) > 0, "{what}: phase {p}: {}", r["phases"][p]);
        }
        let frac = r["correlated_fraction"].as_f64().unwrap();
        assert!(frac >= 0.99, "{what}: {frac} correlated; lost: {}", r["lost_events"]);
        // The generator's own clock is the reference the phases must add up to.
        let (sum, own) = (r["phase_sum_mean_ns"].as_f64().unwrap(), r["lat_ns"]["mean"].as_f64().unwrap());
        assert!((sum - own).abs() / own <= 0.05, "{what}: phases sum to {sum} ns, the generator measured {own} ns");
        // Nothing claimed twice or dropped: the hash-held claims never lose a slot.
        let lost = &r["lost_events"];
        assert_eq!(lost["dropped"], 0, "{what}: {lost}");
        assert_eq!(lost["untagged_bios"], 0, "{what}: {lost}");
    }
}
