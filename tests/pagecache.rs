//! The page-cache route: buffered reads and writes traced on an ext4 of our own (a loop device),
//! checked against counters iopath does not compute: the device's own /sys/block stat, the
//! application's own counts (dd's records), and a warm cache that must move nothing.

mod common;
use common::*;
use serde_json::Value;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One at a time: buffered calls take 1-3 us, so a generator preempted in user space by the
/// test beside it (bpftrace compiling its script takes a CPU for a second) no longer
/// reconciles with its own clock (38.6% once), which is what the report then says.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn buffered_reads_against_the_devices_own_counters() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("pc-reads", 64);
    let job = ["--file", f.as_str(), "--engine", "psync", "--rw", "read", "--direct", "false", "--ios", "16384"];
    let before = disk_stat(&l.0);
    let cold = json_of("trace", &job);
    let dev = delta(before, disk_stat(&l.0));
    let pc = &cold["page_cache"];
    let reads = &pc["reads"];
    assert_eq!(reads["total"]["count"].as_u64(), Some(16384), "{pc}");
    assert_eq!(reads["bytes"].as_u64(), Some(64 << 20), "{pc}");
    split_adds_up(reads, "cold reads");
    assert_eq!(cold["reconciliation"]["reconciled"], true, "{}", cold["reconciliation"]);
    // What the reads started on the device is what the device saw (its own counters; the
    // rest is metadata at open and mount).
    let (bio_bytes, dev_bytes) = (pc["bio_bytes"].as_f64().unwrap(), dev[1] as f64 * 512.0);
    assert!(bio_bytes >= 60.0 * 1048576.0 && bio_bytes <= dev_bytes, "bios {bio_bytes} B, device {dev_bytes} B");
    assert!(bio_bytes >= dev_bytes * 0.97, "bios {bio_bytes} B, device {dev_bytes} B: readahead missed");
    let requests = pc["requests"].as_f64().unwrap();
    assert!((requests - dev[0] as f64).abs() <= (dev[0] as f64 * 0.1).max(3.0), "requests {requests}, device {dev:?}");
    // Sequential 4k reads became large readahead requests.
    assert!(pc["reads_per_request"].as_f64().unwrap() >= 8.0, "{pc}");
    assert!(pc["readahead_sync"].as_u64().unwrap() >= 1, "a cold file starts with a miss: {pc}");
    assert!(pc["reads_queued"].as_u64().unwrap() >= 1, "{pc}");
    let waited = pc["reads_waited"].as_u64().unwrap();
    assert!(waited <= cold["ctx_voluntary"].as_u64().unwrap(), "a read that waited switched out: {pc}");

    // Warm: every read is a hit, nothing reaches the device.
    let _pin = Pinned::file(&f);
    let before = disk_stat(&l.0);
    let warm = json_of("trace", &job);
    let dev = delta(before, disk_stat(&l.0));
    let pc = &warm["page_cache"];
    // (The device is quiet otherwise: cold_fs makes and mounts its ext4 without lazy init and
    // bitmap prefetch, whose kernel thread read 13 blocks during this run before.)
    assert_eq!(pc["bios"].as_u64(), Some(0), "{pc}");
    assert_eq!(dev[0], 0, "a warm cache reads nothing from the device: {dev:?}");
    assert!(pc["read_hit_ratio"].as_f64().unwrap() >= 0.999, "{pc}");
    split_adds_up(&pc["reads"], "warm reads");
    assert_eq!(warm["reconciliation"]["reconciled"], true, "{}", warm["reconciliation"]);
}

/// `--pagecache count`: no syscall hook, one program per read. The reads counted against the
/// generator's own count, the pages added to the cache against what the device read (its
/// /sys/block stat), none added on a warm pass; no call is timed and the report says so. A
/// direct job, which the syscall hooks time, is refused.
#[test]
fn the_page_cache_counted_without_the_syscall_hooks() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("pc-count", 64);
    let job = [
        "--file",
        f.as_str(),
        "--engine",
        "psync",
        "--rw",
        "read",
        "--direct",
        "false",
        "--ios",
        "16384",
        "--pagecache",
        "count",
    ];
    let before = disk_stat(&l.0);
    let cold = json_of("trace", &job);
    let dev = delta(before, disk_stat(&l.0));
    let c = &cold["page_cache_counted"];
    assert_eq!(cold["ios"].as_u64(), Some(16384));
    assert_eq!(c["reads"].as_u64(), Some(16384), "one lookup per 4k read: {c}");
    assert_eq!(c["pages_read"].as_u64(), Some(16384), "{c}");
    // Every page of the file came from the device (readahead), and the file system's own few
    // metadata blocks, read into the cache in the reader's context, count on both sides.
    let (added, device_pages) = (c["pages_added"].as_u64().unwrap(), dev[1] * 512 / 4096);
    assert!(device_pages >= 16384, "the device read the file: {dev:?}");
    assert!(
        added >= 16384 && added.abs_diff(device_pages) <= 64,
        "{added} pages added, the device read {device_pages}"
    );
    assert!(cold["page_cache"].is_null(), "no call split without the syscall hooks: {}", cold["page_cache"]);
    let why = cold["reconciliation"]["reasons"].to_string();
    assert_eq!(cold["reconciliation"]["reconciled"], false);
    assert!(why.contains("--pagecache count: the page cache was counted, no call was timed"), "{why}");
    let attached = |n: &str| cold["probes"].as_array().unwrap().iter().any(|p| p["name"] == n && p["attached"] == true);
    assert!(attached("filemap:mm_filemap_get_pages") && !attached("raw_syscalls:sys_enter"), "{}", cold["probes"]);

    let _pin = Pinned::file(&f);
    let before = disk_stat(&l.0);
    let warm = json_of("trace", &job);
    assert_eq!(delta(before, disk_stat(&l.0))[0], 0, "a warm cache reads nothing from the device");
    assert_eq!(warm["page_cache_counted"]["pages_added"].as_u64(), Some(0), "{}", warm["page_cache_counted"]);
    assert_eq!(warm["page_cache_counted"]["reads"].as_u64(), Some(16384));

    let out = iopath(&["trace", "--file", &f, "--engine", "psync", "--ios", "16", "--pagecache", "count"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("use it with --direct false"), "{err}");
}

/// io_uring reads of a buffered file: no bio of their own. Each request is followed from its
/// io_uring_enter to its reap (in the kernel: inline from the cache, or waiting for a page), the
/// table reconciles with the generator's own latency, and the readahead its submitting calls
/// queued is set against what the device read. A warm pass completes every request inline.
#[test]
fn io_uring_buffered_reads_are_followed() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("pc-uring", 64);
    let job =
        ["--file", f.as_str(), "--engine", "uring", "--qd", "4", "--rw", "read", "--direct", "false", "--ios", "16384"];
    let before = disk_stat(&l.0);
    let cold = json_of("trace", &job);
    let dev = delta(before, disk_stat(&l.0));
    let u = &cold["uring_cached"];
    assert_eq!(u["total"]["count"].as_u64(), Some(16384), "every request followed: {u}");
    assert_eq!(u["bytes"].as_u64(), Some(64 << 20), "their completions' bytes: {u}");
    assert_eq!(cold["reconciliation"]["reconciled"], true, "{}", cold["reconciliation"]);
    assert_eq!(cold["routes"][0]["key"], "uring_cached", "{}", cold["routes"]);
    assert_eq!(cold["routes"][0]["share"].as_f64(), Some(1.0), "{}", cold["routes"]);
    // A cold file: some requests waited for their page, and the device read the file (its
    // readahead, queued by the submitting calls; the file system's metadata besides).
    assert!(u["not_inline"]["count"].as_u64().unwrap_or(0) >= 1, "{u}");
    let bio_bytes = u["bio_bytes"].as_u64().unwrap();
    assert!(
        bio_bytes >= 64 << 20 && bio_bytes <= dev[1] * 512,
        "{bio_bytes} bytes of readahead, the device read {dev:?}"
    );
    assert_eq!(cold["lost_events"]["untagged_bios"].as_u64(), Some(0), "the readahead is the page cache's, not lost");

    let _pin = Pinned::file(&f);
    let before = disk_stat(&l.0);
    let warm = json_of("trace", &job);
    assert_eq!(delta(before, disk_stat(&l.0))[0], 0, "a warm cache reads nothing from the device");
    let u = &warm["uring_cached"];
    assert_eq!(u["inline_ratio"].as_f64(), Some(1.0), "every request served inside its submitting call: {u}");
    assert!(u["not_inline"].is_null() && u["bios"].as_u64() == Some(0), "{u}");
    assert_eq!(warm["reconciliation"]["reconciled"], true, "{}", warm["reconciliation"]);
}

/// fio's io_uring engine on a buffered file, traced from outside: its requests and bytes against
/// fio's own counts, reconciled with the traced syscalls; and io_uring buffered writes (ext4 punts
/// them to io-wq), followed to their reap.
#[test]
fn fio_io_uring_buffered_and_uring_buffered_writes() {
    require_root();
    let _s = serial();
    let (_l, _m, f) = cold_fs("pc-uring-fio", 32);
    let d = scratch("pc-uring-fio-out");
    let fio_json = d.join("fio.json");
    let out = iopath(&[
        "trace",
        "--json",
        "-",
        "--",
        "fio",
        "--name=b",
        &format!("--filename={f}"),
        "--ioengine=io_uring",
        "--iodepth=8",
        "--rw=read",
        "--bs=4k",
        "--direct=0",
        "--size=32m",
        "--output-format=json",
        &format!("--output={}", fio_json.display()),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fio: Value = serde_json::from_str(&std::fs::read_to_string(&fio_json).unwrap()).unwrap();
    let fr = &fio["jobs"][0]["read"];
    assert_eq!(fr["total_ios"].as_u64(), Some(8192), "fio's own count");
    let u = &r["uring_cached"];
    assert_eq!(u["total"]["count"].as_u64(), fr["total_ios"].as_u64(), "{u}");
    assert_eq!(u["bytes"].as_u64(), fr["io_bytes"].as_u64(), "{u}");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);

    let w = json_of(
        "trace",
        &["--file", &f, "--engine", "uring", "--qd", "8", "--rw", "randwrite", "--direct", "false", "--ios", "4096"],
    );
    let u = &w["uring_cached"];
    assert_eq!(u["total"]["count"].as_u64(), Some(4096), "{u}");
    assert_eq!(u["bytes"].as_u64(), Some(16 << 20), "{u}");
    assert_eq!(w["routes"][0]["writes"].as_u64(), Some(4096), "{}", w["routes"]);
    assert_eq!(w["reconciliation"]["reconciled"], true, "{}", w["reconciliation"]);
}

#[test]
fn buffered_writes_are_calls_into_the_cache() {
    require_root();
    let _s = serial();
    let (_l, _m, f) = cold_fs("pc-writes", 16);
    let r =
        json_of("trace", &["--file", &f, "--engine", "psync", "--rw", "write", "--direct", "false", "--ios", "4096"]);
    let w = &r["page_cache"]["writes"];
    assert_eq!(w["total"]["count"].as_u64(), Some(4096), "{}", r["page_cache"]);
    assert_eq!(w["bytes"].as_u64(), Some(16 << 20));
    split_adds_up(w, "writes");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}

/// A traced command's buffered reads, counted against the command's own count.
#[test]
fn dd_through_the_page_cache() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("pc-dd", 32);
    let before = disk_stat(&l.0);
    let out = iopath(&["trace", "--json", "-", "--", "dd", &format!("if={f}"), "of=/dev/null", "bs=4k"]);
    let dev = delta(before, disk_stat(&l.0));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let records: u64 = err
        .lines()
        .find(|l| l.ends_with("records in"))
        .and_then(|l| l.split('+').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("dd's own count: {err}"));
    assert_eq!(records, 8192, "32 MiB in 4k reads");
    // dd's reads, the one that finds the end, and the loader's few reads of its libraries.
    let reads = r["page_cache"]["reads"]["total"]["count"].as_u64().unwrap();
    assert!(reads > records && reads <= records + 16, "traced {reads} buffered reads, dd counted {records}");
    assert_eq!(r["ios"].as_u64(), Some(reads), "the command's I/Os are its calls");
    let bio_bytes = r["page_cache"]["bio_bytes"].as_f64().unwrap();
    assert!(bio_bytes >= 30.0 * 1048576.0 && bio_bytes <= dev[1] as f64 * 512.0, "{bio_bytes} vs {dev:?}");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}

/// cp copies with copy_file_range (coreutils 9): no read or write at all, the kernel moves the
/// data through the cache. Each call is followed, timed like bpftrace times it on the same run,
/// its bytes are the file's, and the device reads are the cold source's.
#[test]
fn cp_copies_inside_the_kernel() {
    require_root();
    let _s = serial();
    let (l, _m, f) = cold_fs("cp", 32);
    let copy = format!("{f}.copy");
    let bt = syscall_timer("copy_file_range", "cp");
    let before = disk_stat(&l.0);
    let out = iopath(&["trace", "--json", "-", "--", "cp", &f, &copy]);
    let dev = delta(before, disk_stat(&l.0));
    let reference = bt.stop();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = reference.get("n").copied().unwrap_or(0.0);
    assert!(n > 0.0, "this cp does not use copy_file_range: {reference:?}");
    let pc = &r["page_cache"];
    let c = &pc["copies"];
    assert_eq!(c["total"]["count"].as_f64(), Some(n), "{pc}");
    let (ours, theirs) = (c["total"]["mean_ns"].as_f64().unwrap(), reference["t"] / n);
    assert!((ours - theirs).abs() <= theirs * 0.05 + 3000.0, "copy mean {ours} ns, bpftrace {theirs} ns");
    split_adds_up(c, "cp's copies");
    assert_eq!(c["bytes"].as_u64(), Some(32 << 20), "{c}");
    // The source was cold: its 32 MiB came from the device, read by the copies.
    assert!(dev[1] * 512 >= 32 << 20, "{dev:?}");
    let bio_bytes = pc["bio_bytes"].as_u64().unwrap();
    // Within 1%: a file-system metadata read (4 KiB over the device's count in one run here) is
    // queued inside a copy too.
    let read = (dev[1] * 512) as f64;
    assert!(bio_bytes >= 32 << 20 && (bio_bytes as f64) <= read * 1.01, "{bio_bytes} bytes queued, device {dev:?}");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}

/// The split of a buffered read (on CPU, waited, run queue) needs the trace's own sched_switch
/// through BTF. Under --raw-tp that hook is raw_tp, while --offcpu's sampler hooks the same
/// tracepoint through tp_btf: the sampler's must not pass for the trace's and claim a split that
/// was never measured.
#[test]
fn the_samplers_switch_hook_never_stands_in_for_the_traces() {
    require_root();
    let _s = serial();
    let (_l, _m, f) = cold_fs("pc-offcpu-rawtp", 16);
    let job = ["--file", f.as_str(), "--engine", "psync", "--rw", "read", "--direct", "false", "--ios", "2048"];
    let out = scratch("pc-offcpu-flame").join("out");
    let r = json_of("trace", &[&job[..], &["--raw-tp", "--offcpu", "--out", out.to_str().unwrap()]].concat());
    assert_eq!(r["page_cache"]["split_known"], false, "{}", r["page_cache"]);
    let probes = r["probes"].as_array().unwrap();
    let switch = |sampler: bool| {
        probes
            .iter()
            .find(|p| p["name"] == "sched:sched_switch" && p["sampler"].as_bool().unwrap_or(false) == sampler)
            .unwrap_or_else(|| panic!("no sched_switch probe (sampler: {sampler}): {probes:?}"))
    };
    assert_eq!((switch(false)["via"].as_str(), switch(false)["attached"].as_bool()), (Some("raw_tp"), Some(true)));
    assert_eq!((switch(true)["via"].as_str(), switch(true)["attached"].as_bool()), (Some("tp_btf"), Some(true)));
    assert_eq!(r["page_cache"]["reads"]["total"]["count"].as_u64(), Some(2048), "{}", r["page_cache"]);
}
