//! The pure core from recorded data: raw probe maps captured from real traces -> the trace summary
//! a report prints. Golden files; `IOPATH_BLESS=1 cargo test --test aggregate` regenerates them.

use std::path::Path;

use iopath::aggregate::{reconcile, summarize};
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
        assert!(p.tracer_reap.is_none() && p.app_before_submit.is_none(), "{name}: recorded before those rows");
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
                + l.ring_drops
                + l.disordered
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

/// The generator's own mean latency from a recorded report.txt ("    lat   mean ...", in us).
fn recorded_lat_ns(name: &str) -> u64 {
    let text = std::fs::read_to_string(data(name).join("report.txt")).unwrap();
    let line = text.lines().find(|l| l.trim_start().starts_with("lat ")).expect("a lat line");
    let us: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    (us * 1000.0) as u64
}

#[test]
fn recorded_runs_reconcile_with_their_generator() {
    for name in ["trace-uring-qd32-virtio", "trace-aio-qd32-virtio"] {
        let (raw, ios) = recorded(name);
        let s = summarize(&raw, ios);
        let r = reconcile(&s, recorded_lat_ns(name));
        assert!(r.reconciled, "{name}: {:?}", r.reasons);
        assert!((0.95..=1.05).contains(&r.phase_sum_ratio), "{name}: {}", r.phase_sum_ratio);
    }
}

#[test]
fn a_table_that_does_not_add_up_says_why() {
    use iopath::model::Counter;
    let name = "trace-uring-qd32-virtio";
    let (mut raw, ios) = recorded(name);
    let lat = recorded_lat_ns(name);
    // Half the application's I/Os were page-cache hits: not followed, and said so.
    raw.counters.resize(iopath::model::NR_COUNTERS, 0);
    raw.counters[Counter::NoBlockIo as usize] = ios;
    let s = summarize(&raw, ios * 2);
    let r = reconcile(&s, lat);
    assert!(!r.reconciled);
    assert!(r.reasons[0].starts_with("only 50.0% of the application's"), "{:?}", r.reasons);
    assert!(r.reasons[0].contains("page-cache hits"), "{:?}", r.reasons);
    // The phases cover two thirds of what the application timed: more than 5% off.
    let s = summarize(&raw, ios);
    let r = reconcile(&s, lat * 3 / 2);
    assert!(!r.reconciled);
    assert!(r.reasons.iter().any(|x| x.contains("add up to 66.")), "{:?}", r.reasons);
    // Nothing at all: not reconciled, never a division by zero.
    let r = reconcile(&summarize(&RawTrace::default(), 0), 0);
    assert!(!r.reconciled && r.reasons[0].starts_with("no application I/O"), "{:?}", r.reasons);
}

#[test]
fn routes_and_syscalls_come_from_the_raw_maps() {
    use iopath::model::RouteKind;
    let (mut raw, ios) = recorded("trace-uring-qd32-virtio");
    raw.routes = vec![0; iopath::model::NR_ROUTE_KINDS * 2];
    raw.routes[RouteKind::Uring as usize * 2] = ios - 100;
    raw.routes[RouteKind::Iowq as usize * 2] = 100;
    raw.routes[RouteKind::Throttled as usize * 2 + 1] = 50;
    raw.syscalls = vec![(426, ios), (17, ios / 2)];
    let s = summarize(&raw, ios);
    let keys: Vec<&str> = s.routes.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["uring", "iowq", "throttled"]);
    assert_eq!((s.routes[2].reads, s.routes[2].writes), (0, 50));
    assert!((s.routes[1].share - 100.0 / ios as f64).abs() < 1e-12);
    assert_eq!(s.syscalls[0].name, "io_uring_enter");
    assert!((s.syscalls[0].per_io - 1.0).abs() < 1e-12);
    assert_eq!(s.syscalls[1].name, "pread64");
}

/// libaio at QD32 reaps ~30 I/Os per io_getevents, and iopath's probe closes each before the call
/// returns: recorded on this machine, 4.9 us per I/O (2.8%) the application waited for the tracer.
/// With its own row the table adds up; without it, it would have missed the generator's latency by
/// that much. Recorded with `iopath trace --engine aio --qd 32 --runtime 3s --out`.
#[test]
fn the_tracers_own_reap_work_is_a_row_of_its_own() {
    let name = "trace-aio-qd32-tracer";
    let (raw, ios) = recorded(name);
    let s = summarize(&raw, ios);
    let p = &s.phases;
    let tr = p.tracer_reap.as_ref().expect("a tracer row");
    let app = p.app_before_submit.as_ref().expect("an application row");
    assert_eq!(tr.count, p.total.count, "every I/O io_getevents returned waited for the tracer");
    assert_eq!(
        s.phase_sum_mean_ns,
        app.mean_ns + tr.mean_ns + p.submission.mean_ns + p.block.mean_ns + p.device.mean_ns + p.completion.mean_ns
    );
    let lat = recorded_lat_ns(name);
    let r = reconcile(&s, lat);
    assert!(r.reconciled && (0.98..=1.02).contains(&r.phase_sum_ratio), "{:?} {}", r.reasons, r.phase_sum_ratio);
    let without = (s.phase_sum_mean_ns - tr.mean_ns) as f64 / lat as f64;
    assert!(without < 0.98, "the tracer's share is what closed the gap: {without}");
    // The same share weighs less when only some I/Os were reaped by a syscall (SQPOLL's are
    // taken from the CQ ring): half of them -> half its mean in the sum.
    let mut half = raw.clone();
    let t = iopath::model::Phase::TracerReap as usize;
    let h = &mut half.phases[t];
    h.slots.iter_mut().for_each(|(_, c)| *c /= 2);
    h.count = h.slots.iter().map(|&(_, c)| c).sum();
    h.sum /= 2;
    let h = summarize(&half, ios);
    let hm = h.phases.tracer_reap.as_ref().unwrap();
    let weighted = hm.mean_ns * hm.count / h.phases.total.count;
    assert_eq!(h.phase_sum_mean_ns, s.phase_sum_mean_ns - tr.mean_ns + weighted);
    assert!((weighted as f64 - tr.mean_ns as f64 / 2.0).abs() < tr.mean_ns as f64 * 0.05);
}

/// Writeback of a recorded dd + sync: the reasons add up to what was written, per file and in
/// total, and a file's means come from its own requests.
#[test]
fn writeback_reasons_and_files_add_up() {
    let name = "trace-dd-sync-writeback";
    let (raw, ios) = recorded(name);
    let s = summarize(&raw, ios);
    golden(name, &(serde_json::to_string_pretty(&s).unwrap() + "\n"));
    let wb = s.writeback.as_ref().expect("dd dirtied pages");
    assert_eq!(wb.dirtied_pages, 16384);
    assert_eq!(wb.by_reason.iter().map(|r| r.1).sum::<u64>(), wb.written_bytes);
    assert_eq!(wb.files.iter().map(|f| f.written_bytes).sum::<u64>(), wb.written_bytes);
    for f in &wb.files {
        assert_eq!(f.by_reason.iter().map(|r| r.1).sum::<u64>(), f.written_bytes, "{}", f.name);
    }
    let out = &wb.files[0];
    assert_eq!((out.name.as_str(), out.comm.as_str()), ("out", "dd"));
    assert_eq!(out.by_reason, vec![("sync".to_owned(), 64 << 20)]);
    assert_eq!(wb.device.count, out.requests, "one file: every timed request is its");
    // No file without its dirtier: a trace that dirtied nothing has no writeback section.
    let mut none = raw.clone();
    none.writeback.clear();
    none.counters[iopath::model::Counter::WbDirtied as usize] = 0;
    assert!(summarize(&none, ios).writeback.is_none());
}

/// `--lean` hooks no scheduler or softirq event: what those count is unknown — absent from the
/// summary (and so from every report), never a zero — while the phases, recorded from the same
/// raw maps, still reconcile with the generator's own latency (aio: its reap is the probes').
#[test]
fn a_lean_trace_leaves_what_it_did_not_hook_unknown() {
    let name = "trace-aio-qd32-lean";
    let (raw, ios) = recorded(name);
    assert!(raw.lean, "{name} is a --lean recording");
    let s = summarize(&raw, ios);
    assert!(s.lean);
    assert!(s.softirq_block.is_none() && s.softirq_block_ns.is_none());
    assert!(s.preempted_ns.is_none() && s.runq_wait_ns.is_none());
    let json = serde_json::to_value(&s).unwrap();
    for unknown in ["softirq_block", "softirq_block_ns", "preempted_ns", "runq_wait_ns"] {
        assert!(json.get(unknown).is_none(), "{unknown} serialized as {}", json[unknown]);
    }
    assert!(s.irq.total == 0, "a loop device has no vectors, and IRQs are still hooked");
    let r = reconcile(&s, recorded_lat_ns(name));
    assert!(r.reconciled, "{name}: {:?}", r.reasons);
    assert!((0.95..=1.05).contains(&r.phase_sum_ratio), "{name}: {}", r.phase_sum_ratio);
    // The same maps read as a full trace's: zeros where it hooked nothing (what --lean avoids).
    let full = summarize(&RawTrace { lean: false, ..raw }, ios);
    assert_eq!(full.softirq_block.map(|v| v.total), Some(0));
}

/// A difference of two stamps taken out of order wraps to ~1.8e19 ns in a u64: the CQ ring
/// bound's max of a database traced with --pid read 18446744073709548597 (5124096 h). No such
/// value reaches the summary, its JSON or a table; a main phase holding one is not reconciled.
#[test]
fn a_value_no_kernel_can_produce_never_reaches_a_table() {
    use iopath::model::{BpfHist, Phase, NR_PHASES};
    let (mut raw, ios) = recorded("trace-uring-qd32-virtio");
    let wrapped = 18_446_744_073_709_548_597u64;
    raw.active_ns = 3_000_000_000;
    raw.phases.resize(NR_PHASES, BpfHist::default());
    raw.phases[Phase::Ring as usize] =
        BpfHist { slots: vec![(10, 4), (209, 1)], count: 5, sum: wrapped.wrapping_add(4000), max: wrapped };
    let s = summarize(&raw, ios);
    assert!(s.phases.cq_ring_bound.is_none(), "{:?}", s.phases.cq_ring_bound);
    assert_eq!(s.beyond_trace, ["cq_ring_bound"]);
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains(&wrapped.to_string()), "the wrapped value reached the JSON");
    // A main phase holding one: no sample shown, and the table says it does not reconcile.
    raw.phases[Phase::Total as usize].max = wrapped;
    let s = summarize(&raw, ios);
    assert_eq!(s.phases.total.count, 0);
    let r = reconcile(&s, 1_000_000);
    assert!(!r.reconciled && r.reasons.iter().any(|x| x.contains("longer than the trace")), "{r:?}");
    assert!(!serde_json::to_string(&s).unwrap().contains(&wrapped.to_string()));
    // Within the trace: untouched.
    let (raw, ios) = recorded("trace-uring-qd32-virtio");
    assert!(summarize(&raw, ios).beyond_trace.is_empty());
}
