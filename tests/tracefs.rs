//! tracefs missing on a fresh machine: iopath mounts it for the run, says so, and unmounts it
//! after. Its own test binary: cargo runs test binaries one at a time, so no other trace of this
//! suite loses tracefs while it is unmounted here.

mod common;
use common::*;

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.contains(" /sys/kernel/tracing ") && l.contains(" - tracefs "))
}

#[test]
fn a_missing_tracefs_is_mounted_for_the_run_and_unmounted_after() {
    require_root();
    let was = tracefs_mounted();
    if was {
        sh("umount", &["/sys/kernel/tracing"]);
    }
    let out = iopath(&["doctor"]);
    let after = tracefs_mounted();
    // Put back what the machine had before asserting anything.
    if was {
        sh("mount", &["-t", "tracefs", "tracefs", "/sys/kernel/tracing"]);
    }
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}{err}");
    assert!(err.contains("tracefs was not mounted: mounted it at /sys/kernel/tracing for this run"), "{err}");
    assert!(text.contains("iopath mounted it for this check and unmounted it"), "{text}");
    assert!(text.contains("block:block_rq_issue"), "the tracepoints were read through it: {text}");
    assert!(!after, "iopath unmounts the tracefs it mounted");
}
