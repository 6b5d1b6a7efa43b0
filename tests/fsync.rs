//! fsync, fdatasync and O_SYNC/O_DSYNC writes on an ext4 of our own (a loop device): each call
//! split into its own writeback, the journal commit and the cache flush, and checked against
//! what iopath does not compute: the generator's own sync timing, a Python program's own count
//! and clock around os.fsync, dd's records, and the device's /sys/block stat.

mod common;
use common::*;
use serde_json::Value;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One at a time: the generator's buffered writes take a few us, and preempted in user space by
/// the test beside it its own clock no longer matches the probes' (86.7% once).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn mean(s: &Value) -> f64 {
    s["mean_ns"].as_f64().unwrap()
}

/// The generator's --fsync 1: every write followed by fsync. ext4 overwrites in place; the
/// write changes the file's times only when the coarse clock ticks (every few ms), so most
/// fsyncs write their page back and flush the disk's cache themselves, and the few that find
/// the inode dirty wait for a journal commit (whose own flush is inside it). Each does one of
/// the two: flushes issued + commits waited = calls.
#[test]
fn fsync_is_split_into_writeback_journal_and_flush() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("fsync-gen", 16);
    let before = disk_stat(&l.0);
    let r = json_of(
        "trace",
        &["--file", &f, "--engine", "psync", "--rw", "randwrite", "--direct", "false", "--fsync", "1", "--ios", "300"],
    );
    let dev = delta(before, disk_stat(&l.0));
    let sc = &r["sync_calls"];
    let app = &r["sync_lat_ns"];
    // Every call the generator timed, the probes split.
    assert_eq!(app["count"].as_u64(), Some(300), "{app}");
    assert_eq!(sc["fsync"].as_u64(), Some(300), "{sc}");
    assert_eq!(sc["fdatasync"].as_u64(), Some(0), "{sc}");
    assert_eq!(sc["split"]["total"]["count"].as_u64(), Some(300), "{sc}");
    split_adds_up(&sc["split"], "fsync");
    // Two clocks, the generator's around the call and the probes' at entry and exit.
    let (ours, theirs) = (mean(&sc["split"]["total"]), app["mean"].as_f64().unwrap());
    assert!((ours - theirs).abs() <= theirs * 0.05 + 2000.0, "fsync mean: probes {ours} ns, generator {theirs} ns");
    assert_eq!(sc["app_mean_ns"].as_f64(), Some(theirs));
    // Each fsync wrote its one dirty page back, then either flushed the cache or committed.
    let bios = sc["data_bios"].as_u64().unwrap();
    assert!((300..=330).contains(&bios), "one 4k page per fsync: {bios} data bios: {sc}");
    assert!(sc["data_bytes"].as_f64().unwrap() <= dev[3] as f64 * 512.0, "data {} vs device {dev:?}", sc["data_bytes"]);
    let (flushed, committed) = (sc["own_flushes"].as_u64().unwrap(), sc["journal_waits"].as_u64().unwrap());
    assert!((295..=305).contains(&(flushed + committed)), "{flushed} flushes + {committed} commits: {sc}");
    assert!(committed >= 1 && sc["commits"].as_u64().unwrap() >= committed.min(1), "{sc}");
    // The device took at least the data (its own counter).
    assert!(dev[2] >= bios, "device writes {dev:?}, data bios {bios}");
    let w = &sc["split"]["waits"];
    assert!(mean(&w["data"]) > 0.0 && mean(&w["flush"]) > 0.0 && mean(&w["journal"]) > 0.0, "{w}");
    // Loop devices have a volatile write cache: every flush is a request on the disk, and the
    // journal's waits include its commit's flush.
    assert!(sc["flush_requests"].as_u64().unwrap() >= flushed, "{sc}");
    assert!(mean(&sc["journal_flush"]) <= mean(&w["journal"]), "{sc}");
    // The writes themselves went into the cache and did not wait for the disk.
    let writes = &r["page_cache"]["writes"];
    assert_eq!(writes["total"]["count"].as_u64(), Some(300));
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}

/// fdatasync of overwritten blocks needs no journal commit (only times changed): ext4 flushes
/// the disk's cache itself, and the split says so.
#[test]
fn fdatasync_of_overwrites_flushes_without_the_journal() {
    require_root();
    let _s = serial();
    let (_l, _m, f) = cold_fs("fdatasync-gen", 16);
    let r = json_of(
        "trace",
        &[
            "--file",
            &f,
            "--engine",
            "psync",
            "--rw",
            "randwrite",
            "--direct",
            "false",
            "--fdatasync",
            "1",
            "--ios",
            "300",
        ],
    );
    let sc = &r["sync_calls"];
    assert_eq!(sc["fdatasync"].as_u64(), Some(300), "{sc}");
    assert_eq!(sc["fsync"].as_u64(), Some(0), "{sc}");
    split_adds_up(&sc["split"], "fdatasync");
    assert_eq!(sc["journal_waits"].as_u64(), Some(0), "overwrites need no commit (only times changed): {sc}");
    assert!(sc["own_flushes"].as_u64().unwrap() >= 285, "ext4 issues the flush itself: {sc}");
    let w = &sc["split"]["waits"];
    assert!(mean(&w["flush"]) > 0.0, "{w}");
    let (ours, theirs) = (mean(&sc["split"]["total"]), r["sync_lat_ns"]["mean"].as_f64().unwrap());
    assert!((ours - theirs).abs() <= theirs * 0.05 + 2000.0, "probes {ours} ns, generator {theirs} ns");
}

/// Another program's fsyncs, against its own count and its own clock around each call.
#[test]
fn a_traced_programs_fsyncs_match_its_own_timing() {
    require_root();
    let _s = serial();
    let (_l, _m, f) = cold_fs("fsync-py", 8);
    let prog = format!(
        "import os, time\n\
         fd = os.open('{f}', os.O_WRONLY)\n\
         t = 0\n\
         for i in range(200):\n\
         \x20   os.pwrite(fd, b'x' * 4096, (i % 64) * 4096)\n\
         \x20   a = time.monotonic_ns(); os.fsync(fd); t += time.monotonic_ns() - a\n\
         print(200, t // 200)\n"
    );
    let out = iopath(&["trace", "--json", "-", "--", "python3", "-c", &prog]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // The report is JSON on stdout; the program's own line comes first.
    let (own, json) = text.split_once('\n').expect("the program's line, then the report");
    let own: Vec<f64> = own.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let r: Value = serde_json::from_str(json).unwrap();
    let sc = &r["sync_calls"];
    assert_eq!(sc["fsync"].as_f64(), Some(own[0]), "{sc}");
    split_adds_up(&sc["split"], "python fsync");
    let ours = mean(&sc["split"]["total"]);
    // Python's clock reads sit a few hundred ns outside the syscall.
    assert!((ours - own[1]).abs() <= own[1] * 0.05 + 3000.0, "probes {ours} ns, python {} ns", own[1]);
    assert_eq!(r["page_cache"]["writes"]["total"]["count"].as_f64(), Some(own[0]), "its pwrites");
}

/// dd's O_DSYNC writes: each write waits for its own writeback, counted as sync writes.
#[test]
fn dsync_writes_wait_for_their_own_writeback() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("dsync-dd", 8);
    let before = disk_stat(&l.0);
    let out = iopath(&[
        "trace",
        "--json",
        "-",
        "--",
        "dd",
        "if=/dev/zero",
        &format!("of={f}"),
        "bs=4k",
        "count=200",
        "oflag=dsync",
        "conv=notrunc",
    ]);
    let dev = delta(before, disk_stat(&l.0));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pc = &r["page_cache"];
    assert_eq!(pc["sync_writes"].as_u64(), Some(200), "{pc}");
    let w = &pc["writes"];
    assert_eq!(w["total"]["count"].as_u64(), Some(200), "{pc}");
    split_adds_up(w, "dsync writes");
    let waits = &w["waits"];
    let waited = mean(&waits["data"]) + mean(&waits["journal"]) + mean(&waits["flush"]);
    assert!(waited > mean(&w["on_cpu"]), "a sync write mostly waits for the disk: {w}");
    assert!(dev[2] >= 200, "the device took every write: {dev:?}");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}
