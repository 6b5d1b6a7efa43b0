//! The file-system and device-kind matrix on the host: ext4, xfs and btrfs on loop devices of our
//! own, and a zram device we add (bio-based: no request). Each job is traced for real and checked
//! against references that are not iopath's: the generator's own clock (the phase table must add
//! up to it), the device's own I/O counters (/sys/block/X/stat: every I/O followed was a request
//! or bio the kernel counted), and fio's own latency for a traced outside program. What iopath
//! cannot follow must be named with its true reason, never as page-cache hits.

mod common;
use common::*;

use serde_json::Value;

/// Traces measure timing: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file system of `kind` on a loop device of ours (direct I/O to a sparse backing file), mounted
/// with `opts`; unmounted and detached on drop (Mount before LoopDev).
struct Fs {
    _m: Mount,
    dev: LoopDev,
    dir: std::path::PathBuf,
}

fn fs(kind: &str, opts: &str) -> Fs {
    let d = scratch(&format!("fs-{kind}"));
    let dev = LoopDev::direct(&d.join("fs.img"), 768);
    match kind {
        "ext4" => sh("mkfs.ext4", &["-q", "-E", NO_LAZY_INIT, &dev.0]),
        "xfs" => sh("mkfs.xfs", &["-q", "-f", &dev.0]),
        "btrfs" => sh("mkfs.btrfs", &["-q", "-f", &dev.0]),
        _ => unreachable!(),
    };
    let mnt = d.join("mnt");
    let m = Mount::new(&["-o", opts, &dev.0], &mnt);
    Fs { _m: m, dev, dir: mnt }
}

/// `iopath trace` of the generator on `file`, with the device's own counters beside it: the
/// report and (reads, writes) the kernel completed on `disk` meanwhile.
fn traced(disk: &str, file: &str, args: &[&str]) -> (Value, [u64; 4]) {
    let before = disk_stat(disk);
    let mut a = vec!["--file", file, "--size", "128m", "--runtime", "1500ms"];
    a.extend_from_slice(args);
    let r = json_of("trace", &a);
    (r, delta(before, disk_stat(disk)))
}

fn share(r: &Value, key: &str) -> f64 {
    r["routes"].as_array().unwrap().iter().find(|x| x["key"] == key).map_or(0.0, |x| x["share"].as_f64().unwrap())
}

/// At least 99% followed, the table reconciled with the generator's own mean (5%, or the 2 us
/// floor), and every followed I/O one the device itself counted (its stat's reads or writes).
fn followed(r: &Value, stat: [u64; 4], write: bool, what: &str) {
    let frac = r["correlated_fraction"].as_f64().unwrap();
    assert!(
        frac >= 0.99,
        "{what}: {frac} correlated of {}; lost {}; unlinked {}; no block I/O {}; reconciliation {}",
        r["app_ios"],
        r["lost_events"],
        r["unlinked"],
        r["no_block_io"],
        r["reconciliation"]
    );
    assert_eq!(r["reconciliation"]["reconciled"], true, "{what}: {}", r["reconciliation"]);
    let (sum, app) = (r["phase_sum_mean_ns"].as_f64().unwrap(), r["lat_ns"]["mean"].as_f64().unwrap());
    assert!((sum - app).abs() <= (app * 0.05).max(2000.0), "{what}: phases {sum} ns vs the generator's {app} ns");
    let ios = r["phases"]["total"]["count"].as_f64().unwrap();
    let dev_ios = if write { stat[2] } else { stat[0] } as f64;
    assert!(dev_ios >= ios * 0.99, "{what}: {ios} I/Os followed, the device completed {dev_ios}");
    assert!(r["phases"]["device"]["mean_ns"].as_u64().unwrap() > 0, "{what}: no device time");
}

#[test]
fn direct_io_is_followed_on_ext4_xfs_and_btrfs() {
    require_root();
    let _serial = serial();
    for (kind, opts) in [("ext4", QUIET_EXT4), ("xfs", "defaults"), ("btrfs", "defaults")] {
        let f = fs(kind, opts);
        let file = f.dir.join("t.dat");
        let file = file.to_str().unwrap();
        for engine in
            [&["--engine", "uring", "--qd", "16"][..], &["--engine", "aio", "--qd", "16"], &["--engine", "psync"]]
        {
            let (r, stat) = traced(&f.dev.0, file, engine);
            let what = format!("{kind} {engine:?} reads");
            followed(&r, stat, false, &what);
            assert_eq!(r["target"]["fs_type"], kind, "{what}");
        }
        // Writes: btrfs writes O_DIRECT data to a checksummed file through its page cache (below);
        // a nodatacow file's stay direct. ext4's and xfs's are direct as they are.
        let wfile = f.dir.join("w.dat");
        if kind == "btrfs" {
            std::fs::File::create(&wfile).unwrap();
            sh("chattr", &["+C", wfile.to_str().unwrap()]);
        }
        for engine in [&["--engine", "uring", "--qd", "16"][..], &["--engine", "psync"]] {
            let mut a = engine.to_vec();
            a.extend_from_slice(&["--rw", "randwrite", "--allow-write"]);
            let (r, stat) = traced(&f.dev.0, wfile.to_str().unwrap(), &a);
            followed(&r, stat, true, &format!("{kind} {engine:?} writes"));
        }
    }
}

/// btrfs writes O_DIRECT data to a checksummed file through its page cache and flushes it in
/// the call (kernel commit 968f19c5b1b7, in the host's 6.18): the writeback bios are linked to the
/// I/O through the thread carrying it out (the sync call, io_uring's io-wq worker); libaio's
/// io_submit names no request, so there they are named, never called page-cache hits.
#[test]
fn btrfs_direct_writes_through_its_cache_are_followed_or_named() {
    require_root();
    let _serial = serial();
    let f = fs("btrfs", "defaults");
    let file = f.dir.join("sum.dat");
    let file = file.to_str().unwrap();
    let write = |engine: &[&str]| {
        let mut a = engine.to_vec();
        a.extend_from_slice(&["--rw", "randwrite", "--allow-write"]);
        traced(&f.dev.0, file, &a)
    };
    run_json(&["--file", file, "--size", "128m", "--ios", "1"]);
    for engine in [&["--engine", "uring", "--qd", "16"][..], &["--engine", "psync"]] {
        let (r, stat) = write(engine);
        followed(&r, stat, true, &format!("btrfs {engine:?} writes to a checksummed file"));
    }
    let (r, stat) = write(&["--engine", "aio", "--qd", "16"]);
    let what = "btrfs libaio writes to a checksummed file";
    let ios = r["app_ios"].as_f64().unwrap();
    // The device counted the writes, iopath the bios the generator's threads queued that no
    // I/O it follows owns.
    assert!(stat[2] as f64 >= ios * 0.99, "{what}: the device completed {} writes of {ios}", stat[2]);
    let untagged = r["lost_events"]["untagged_bios"].as_f64().unwrap();
    assert!(untagged >= ios * 0.99, "{what}: {untagged} unlinked bios counted for {ios} I/Os");
    let rec = &r["reconciliation"];
    assert_eq!(rec["reconciled"], false, "{what}: {rec}");
    let why = rec["reasons"].to_string();
    assert!(why.contains("file system btrfs") && why.contains("through the page cache"), "{what}: {why}");
    assert!(!why.contains("page-cache hits"), "{what}: a direct write called a page-cache hit: {why}");
}

/// btrfs verifies a read's checksums in its end-io workers: two sub-phases of completion, each
/// read's worker found (bpftrace counts the same work items run), and inside completion.
#[test]
fn btrfs_read_checksums_are_a_sub_phase_of_completion() {
    require_root();
    let _serial = serial();
    let f = fs("btrfs", "defaults");
    let file = f.dir.join("t.dat");
    let file = file.to_str().unwrap();
    run_json(&["--file", file, "--size", "128m", "--ios", "1"]);
    // btrfs's end-io work function, by either of its names (its address: this bpftrace cannot
    // compare ksym() with a string).
    let ksyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let work = ksyms
        .lines()
        .find(|l| l.ends_with(" simple_end_io_work") || l.ends_with(" btrfs_end_bio_work"))
        .and_then(|l| l.split(' ').next())
        .expect("btrfs's end-io work function in /proc/kallsyms");
    let bt = BpfTrace::start(&format!(
        "tracepoint:workqueue:workqueue_execute_start /(uint64)args->function == 0x{work}/ {{ @works = count(); }}"
    ));
    let (r, stat) = traced(&f.dev.0, file, &["--engine", "uring", "--qd", "16"]);
    let works = bt.stop().get("works").copied().unwrap_or(0.0);
    followed(&r, stat, false, "btrfs reads with their end-io work");
    let p = &r["phases"];
    let ios = p["total"]["count"].as_f64().unwrap();
    let (wait, run) = (&p["fs_endio_wait"], &p["fs_endio"]);
    assert!(run["count"].as_f64().unwrap_or(0.0) >= ios * 0.99, "end-io worker runs {run} for {ios} reads");
    assert!(works >= run["count"].as_f64().unwrap(), "bpftrace saw {works} end-io work items, iopath {run}");
    let part = wait["mean_ns"].as_f64().unwrap() + run["mean_ns"].as_f64().unwrap();
    assert!(
        part > 0.0 && part <= p["completion"]["mean_ns"].as_f64().unwrap(),
        "{wait} + {run} vs {}",
        p["completion"]
    );
    // Not on ext4: the hooks are not even attached there.
    let e = fs("ext4", QUIET_EXT4);
    let ef = e.dir.join("t.dat");
    let (r, _) = traced(&e.dev.0, ef.to_str().unwrap(), &["--engine", "uring", "--qd", "16"]);
    assert!(r["phases"]["fs_endio"].is_null(), "{}", r["phases"]);
}

/// A zram device of our own (hot_add), removed on drop.
struct Zram(String);

impl Zram {
    fn new(mb: u64) -> Zram {
        let ctl = std::path::Path::new("/sys/class/zram-control/hot_add");
        if !ctl.exists() {
            let _ = std::process::Command::new("modprobe").arg("zram").status();
        }
        let id = std::fs::read_to_string(ctl).expect("zram (modprobe zram): the bio-based device of this test");
        let name = format!("zram{}", id.trim());
        std::fs::write(format!("/sys/block/{name}/disksize"), format!("{mb}M")).unwrap();
        Zram(name)
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        let id = self.0.trim_start_matches("zram");
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", id);
    }
}

#[test]
fn a_bio_based_device_is_followed_from_its_bios() {
    require_root();
    let _serial = serial();
    let z = Zram::new(256);
    let dev = format!("/dev/{}", z.0);
    assert!(!std::path::Path::new(&format!("/sys/block/{}/mq", z.0)).exists(), "zram has no request queue");
    for (engine, write) in [
        (&["--engine", "uring", "--qd", "16"][..], false),
        (&["--engine", "aio", "--qd", "16"], false),
        (&["--engine", "psync"], false),
        (&["--engine", "uring", "--qd", "16", "--rw", "randwrite", "--allow-write"], true),
    ] {
        let before = disk_stat(&z.0);
        let mut a = vec!["--device", &dev, "--size", "128m", "--runtime", "1s"];
        a.extend_from_slice(engine);
        let r = json_of("trace", &a);
        let stat = delta(before, disk_stat(&z.0));
        let what = format!("zram {engine:?}");
        followed(&r, stat, write, &what);
        assert!(share(&r, "bio_based") >= 0.99, "{what}: routes {}", r["routes"]);
        // No request: nothing between the bio's queueing and the driver's work.
        assert_eq!(r["phases"]["block"]["mean_ns"].as_u64(), Some(0), "{what}");
    }
}

#[test]
fn fio_on_btrfs_agrees_with_its_own_latency() {
    require_root();
    let _serial = serial();
    let f = fs("btrfs", "defaults");
    let file = f.dir.join("fio.dat");
    let file = file.to_str().unwrap();
    run_json(&["--file", file, "--size", "64m", "--ios", "1"]);
    let fio_out = f.dir.join("fio.json");
    let mut a: Vec<String> = ["trace", "--json", "-", "--"].map(String::from).to_vec();
    a.extend(fio_args(file, "io_uring", &[&format!("--output={}", fio_out.display())]));
    let out = iopath(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fio: Value = serde_json::from_slice(&std::fs::read(&fio_out).unwrap()).unwrap();
    let fio_ios = fio["jobs"][0]["read"]["total_ios"].as_f64().unwrap();
    let fio_lat = fio["jobs"][0]["read"]["lat_ns"]["mean"].as_f64().unwrap();
    let ios = r["phases"]["total"]["count"].as_f64().unwrap();
    assert!(ios >= fio_ios * 0.99 && ios <= fio_ios, "traced {ios} I/Os on btrfs, fio did {fio_ios}");
    let lat = r["lat_ns"]["mean"].as_f64().unwrap();
    assert!((lat - fio_lat).abs() / fio_lat < 0.05, "traced mean {lat} ns vs fio's {fio_lat} ns");
    let sum = r["phase_sum_mean_ns"].as_f64().unwrap();
    assert!((sum - fio_lat).abs() / fio_lat < 0.05, "phases {sum} ns vs fio's {fio_lat} ns");
}

/// `doctor --filesystems` tries each file system on a scratch image of its own: ext4, xfs and
/// btrfs followed here (what tests above measured by hand), f2fs named with the reason it was
/// not tried, and nothing left behind (no loop device, mount or directory of its own).
#[test]
fn doctor_tries_each_file_system_and_leaves_nothing_behind() {
    require_root();
    let _serial = serial();
    let loops = || sh("losetup", &["-a"]).lines().count();
    let mounts = || std::fs::read_to_string("/proc/self/mounts").unwrap().lines().count();
    let scratch_dirs = || {
        std::fs::read_dir("/var/tmp")
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("iopath-fs-"))
            .count()
    };
    let before = (loops(), mounts(), scratch_dirs());
    let o = iopath(&["doctor", "--filesystems", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((loops(), mounts(), scratch_dirs()), before, "doctor --filesystems left something behind");
    let trials = d["filesystems"].as_array().expect("doctor --json carries the trials");
    let trial = |fs: &str| trials.iter().find(|t| t["fs"] == fs).unwrap_or_else(|| panic!("{fs} not tried: {d}"));
    for fs in ["ext4", "xfs", "btrfs"] {
        let t = trial(fs);
        let dirs = t["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 2, "{fs}: {t}");
        for x in dirs {
            assert!(x["followed"].as_f64().unwrap() >= 0.99 && x["reconciled"] == true, "{fs}: {t}");
        }
    }
    let f2fs = trial("f2fs");
    if f2fs["directions"].as_array().unwrap().is_empty() {
        assert!(f2fs["why"].as_str().is_some_and(|w| w.contains("f2fs")), "{f2fs}");
    }
    let text = String::from_utf8(iopath(&["doctor", "--filesystems"]).stdout).unwrap();
    let line = text.lines().find(|l| l.split_whitespace().nth(1) == Some("btrfs")).unwrap_or_default();
    assert!(line.trim_start().starts_with("followed"), "the text's btrfs line: {line:?}\n{text}");
}

/// Every report names its file system and mount options; `compare` names a change of them as
/// the cause, and a sweep over files on several file systems labels its points by theirs.
#[test]
fn the_file_system_is_in_the_configuration_compare_and_sweep() {
    require_root();
    let _serial = serial();
    let (e, b) = (fs("ext4", QUIET_EXT4), fs("btrfs", "defaults"));
    let (fe, fb) = (e.dir.join("t.dat"), b.dir.join("t.dat"));
    let (fe, fb) = (fe.to_str().unwrap(), fb.to_str().unwrap());
    let out = scratch("fs-compare");
    let (je, jb) = (out.join("ext4.json"), out.join("btrfs.json"));
    for (f, j) in [(fe, &je), (fb, &jb)] {
        let o = iopath(&["run", "--file", f, "--size", "64m", "--runtime", "1s", "--json", j.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&jb).unwrap()).unwrap();
    assert_eq!(r["config"]["filesystem"]["type"], "btrfs", "{}", r["config"]);
    let opts = r["config"]["filesystem"]["options"].as_str().unwrap();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mine = mountinfo.lines().find(|l| l.split(' ').nth(4) == Some(b.dir.to_str().unwrap())).unwrap();
    assert!(mine.ends_with(opts.split(" - ").nth(1).unwrap()), "{opts} vs mountinfo's {mine}");
    let c = String::from_utf8(iopath(&["compare", je.to_str().unwrap(), jb.to_str().unwrap()]).stdout).unwrap();
    assert!(c.contains("the file system changed") && c.contains("type ext4 -> btrfs"), "{c}");
    let sw = out.join("sweep");
    let files = format!("{fe},{fb}");
    let o = iopath(&[
        "sweep",
        "--engine",
        "uring",
        "--qd",
        "8",
        "--repeat",
        "1",
        "--no-trace",
        "--runtime",
        "1s",
        "--size",
        "64m",
        "--file",
        &files,
        "--out",
        sw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&std::fs::read(sw.join("sweep.json")).unwrap()).unwrap();
    let labels: Vec<&str> = s["points"].as_array().unwrap().iter().map(|p| p["label"].as_str().unwrap()).collect();
    assert_eq!(labels, [format!("uring qd8 {fe} (ext4)"), format!("uring qd8 {fb} (btrfs)")], "{labels:?}");
}

/// Buffered reads and writes on btrfs are the page-cache route as on ext4 (tests/pagecache.rs):
/// every call counted, its time split into parts that add up, and what its reads started on the
/// device is what the device itself counted.
#[test]
fn buffered_btrfs_is_the_page_cache_route() {
    require_root();
    let _serial = serial();
    let f = fs("btrfs", "defaults");
    let file = f.dir.join("t.dat");
    let file = file.to_str().unwrap();
    run_json(&["--file", file, "--size", "64m", "--ios", "1"]);
    // Cold: mounted again, nothing of the file cached.
    sh("umount", &[f.dir.to_str().unwrap()]);
    sh("mount", &[&f.dev.0, f.dir.to_str().unwrap()]);
    let job = ["--file", file, "--engine", "psync", "--rw", "read", "--direct", "false", "--ios", "16384"];
    let before = disk_stat(&f.dev.0);
    let r = json_of("trace", &job);
    let dev = delta(before, disk_stat(&f.dev.0));
    let pc = &r["page_cache"];
    let reads = &pc["reads"];
    assert_eq!(reads["total"]["count"].as_u64(), Some(16384), "{pc}");
    assert_eq!(reads["bytes"].as_u64(), Some(64 << 20), "{pc}");
    split_adds_up(reads, "btrfs cold reads");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
    // The reads' own bios are what the device read, less btrfs's metadata (its checksum tree).
    let (bio_bytes, dev_bytes) = (pc["bio_bytes"].as_f64().unwrap(), dev[1] as f64 * 512.0);
    assert!(bio_bytes >= 60.0 * 1048576.0 && bio_bytes <= dev_bytes, "bios {bio_bytes} B, device {dev_bytes} B");
    let requests = pc["requests"].as_f64().unwrap();
    assert!((requests - dev[0] as f64).abs() <= (dev[0] as f64 * 0.1).max(3.0), "requests {requests}, device {dev:?}");
    assert!(pc["reads_per_request"].as_f64().unwrap() >= 8.0, "readahead made large requests: {pc}");
    // Writes into the cache: each call counted and split.
    let w = json_of(
        "trace",
        &[
            "--file",
            file,
            "--engine",
            "psync",
            "--rw",
            "randwrite",
            "--direct",
            "false",
            "--allow-write",
            "--ios",
            "4096",
        ],
    );
    let writes = &w["page_cache"]["writes"];
    assert_eq!(writes["total"]["count"].as_u64(), Some(4096), "{}", w["page_cache"]);
    split_adds_up(writes, "btrfs writes");
    assert_eq!(w["reconciliation"]["reconciled"], true, "{}", w["reconciliation"]);
}
