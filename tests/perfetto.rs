//! `--perfetto`: the timeline read back by the perfetto package's own protos (scripts/
//! check-perfetto.py; not iopath's parser): one slice per phase per I/O, as many as the trace
//! counted, flows joining each I/O's four slices, the disk's interrupts as instants.

mod common;

use common::*;

fn python() -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/python");
    assert!(p.exists(), "{} missing: scripts/setup.sh makes it (pip: perfetto, protobuf)", p.display());
    p.to_string_lossy().into_owned()
}

#[test]
fn a_perfetto_trace_holds_every_io_and_interrupt() {
    require_root();
    let d = scratch("perfetto");
    let f = d.join("data");
    let out = d.join("trace.pftrace");
    // A file on the root disk: virtio has interrupt vectors of its own.
    let r = json_of(
        "trace",
        &[
            "--engine",
            "uring",
            "--qd",
            "8",
            "--jobs",
            "2",
            "--file",
            f.to_str().unwrap(),
            "--size",
            "64m",
            "--runtime",
            "2s",
            "--perfetto",
            out.to_str().unwrap(),
        ],
    );
    let p = &r["perfetto"];
    let check =
        sh(&python(), &[concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check-perfetto.py"), out.to_str().unwrap()]);
    let c: serde_json::Value = serde_json::from_str(&check).unwrap();
    let ios = r["ios"].as_u64().unwrap();
    let drawn = p["ios"].as_u64().unwrap();
    assert_eq!(p["skipped"], 0, "{p}");
    // The records are the I/Os the probes closed: the generator's count, to the few the report
    // counts as lost.
    assert!(drawn.abs_diff(ios) <= ios / 200, "drawn {drawn}, the generator did {ios}");
    for phase in ["submission", "block", "device", "completion"] {
        assert_eq!(c["slices"][phase].as_u64(), Some(drawn), "{phase}: {check}");
    }
    assert_eq!(c["flows"].as_u64(), Some(drawn), "{check}");
    assert_eq!(c["flows_with_3_continuing_and_1_end"].as_u64(), Some(drawn), "{check}");
    assert_eq!(c["unbalanced_slices"], 0, "{check}");
    assert_eq!(c["events_on_unknown_tracks"], 0, "{check}");
    assert_eq!(c["out_of_order_events"], 0, "{check}");
    // Two workers: two threads of one process.
    assert_eq!(c["tracks"]["process"], 1, "{check}");
    assert_eq!(c["tracks"]["thread"], 2, "{check}");
    // Every interrupt the trace counted on the disk's vectors is an instant.
    let irqs = r["irq"]["total"].as_u64().unwrap();
    assert!(irqs > 0, "virtio takes interrupts: {}", r["irq"]);
    assert_eq!(c["instants"].as_u64(), Some(irqs), "{check}");
    assert!(!d.join("trace.events.tmp").exists(), "the temporary events file is removed");
}

#[test]
fn perfetto_refuses_an_unwritable_path_before_tracing() {
    require_root();
    let o = iopath(&["trace", "--engine", "uring", "--ios", "10", "--perfetto", "/nonexistent-dir/t.pftrace"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--perfetto /nonexistent-dir/t.pftrace: the folder /nonexistent-dir does not exist"), "{err}");
}
