//! The pure core from recorded data: raw probe maps captured from real traces -> the trace summary
//! a report prints. Golden files; `IOPATH_BLESS=1 cargo test --test aggregate` regenerates them.

use std::path::Path;

use iopath::aggregate::summarize;
use iopath::model::RawTrace;

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Each recorded trace: its raw maps and the I/O count the generator reported.
fn recorded(name: &str) -> (RawTrace, u64) {
    let raw: RawTrace = serde_json::from_slice(&std::fs::read(data(name).join("raw.json")).unwrap()).unwrap();
    let ios: u64 = std::fs::read_to_string(data(name).join("ios")).unwrap().trim().parse().unwrap();
    (raw, ios)
}

fn golden(name: &str, got: &str) {
    let path = data(name).join("summary.golden.json");
    if std::env::var_os("IOPATH_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing: run with IOPATH_BLESS=1", path.display()));
    assert_eq!(got, want, "{name}: summary differs from {} (IOPATH_BLESS=1 to accept)", path.display());
}

#[test]
fn recorded_traces_summarize_to_their_golden_files() {
    for name in ["trace-uring-qd32-virtio", "trace-aio-qd32-virtio"] {
        let (raw, ios) = recorded(name);
        let s = summarize(&raw, ios);
        golden(name, &(serde_json::to_string_pretty(&s).unwrap() + "\n"));

        // Invariants that hold for any input, checked on real data.
        let p = &s.phases;
        assert_eq!(
            s.phase_sum_mean_ns,
            p.submission.mean_ns + p.block.mean_ns + p.device.mean_ns + p.completion.mean_ns
        );
        for ph in [&p.submission, &p.block, &p.device, &p.completion] {
            assert!(
                ph.p50_ns <= ph.p90_ns && ph.p90_ns <= ph.p99_ns && ph.p99_ns <= ph.p999_ns && ph.p999_ns <= ph.max_ns
            );
        }
        assert!((0.0..=1.0).contains(&s.correlated_fraction));
        let l = &s.lost_events;
        assert_eq!(
            l.total,
            l.untagged_bios
                + l.missing_completions
                + l.never_reaped
                + l.reaped_unmatched
                + l.dropped
                + l.recursion_misses
        );
    }
}

#[test]
fn aio_has_no_posted_subphase_and_uring_does() {
    let (u, ios_u) = recorded("trace-uring-qd32-virtio");
    let (a, ios_a) = recorded("trace-aio-qd32-virtio");
    assert!(summarize(&u, ios_u).phases.completion_posted.is_some());
    assert!(summarize(&a, ios_a).phases.completion_posted.is_none());
}

#[test]
fn losses_and_correlation_are_computed_not_assumed() {
    let (mut raw, ios) = recorded("trace-uring-qd32-virtio");
    raw.stuck_inflight = 7;
    raw.stuck_done = 3;
    raw.probes.iter_mut().for_each(|p| p.recursion_misses = 0);
    if let Some(p) = raw.probes.first_mut() {
        p.recursion_misses = 11;
    }
    let s = summarize(&raw, ios);
    assert_eq!(s.lost_events.missing_completions, 7);
    assert_eq!(s.lost_events.never_reaped, 3);
    assert_eq!(s.lost_events.recursion_misses, 11);
    // Half the I/Os reaped -> half correlated.
    let reaped = raw.phase(iopath::model::Phase::Reap).count;
    let s2 = summarize(&raw, reaped * 2);
    assert!((s2.correlated_fraction - 0.5).abs() < 1e-9);
    // No I/O at all: zeros, not NaN.
    let empty = summarize(&RawTrace::default(), 0);
    assert_eq!(empty.correlated_fraction, 0.0);
    assert_eq!(empty.phase_sum_mean_ns, 0);
}
