//! Writeback of what a traced command dirtied, on an ext4 of our own (a loop device): the file,
//! the process and cgroup that dirtied it, why its pages were written (sync, background ...),
//! checked against /proc/vmstat, the device's /sys/block stat and the test's own cgroup.

mod common;
use common::*;
use serde_json::Value;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Both tests change the machine's writeback (a sync, a dirty threshold): one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// nr_dirtied and nr_written from /proc/vmstat.
fn vmstat() -> [u64; 2] {
    let text = std::fs::read_to_string("/proc/vmstat").unwrap();
    let get =
        |k: &str| text.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse::<u64>().ok()).unwrap();
    [get("nr_dirtied"), get("nr_written")]
}

/// A child io cgroup of our own under the blkio (v1) hierarchy, or the unified one (v2): its
/// path inside the hierarchy and its cgroup.procs; removed on drop.
struct IoCgroup(std::path::PathBuf);

impl IoCgroup {
    fn new(name: &str) -> IoCgroup {
        let v1 = std::path::Path::new("/sys/fs/cgroup/blkio");
        let root = if v1.join("cgroup.procs").exists() { v1 } else { std::path::Path::new("/sys/fs/cgroup") };
        let dir = root.join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        IoCgroup(dir)
    }
}

impl Drop for IoCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A fresh ext4 of 1 GiB on a loop device (sparse): big enough that ext4 never writes back for
/// free space (a 192 MB one did, for 56 of 64 MiB: the "fs free space" reason).
fn big_fs(name: &str) -> (LoopDev, Mount) {
    let d = scratch(name);
    let l = LoopDev::direct(&d.join("fs.img"), 1024);
    sh("mkfs.ext4", &["-q", "-E", NO_LAZY_INIT, &l.0]);
    let m = Mount::new(&["-o", QUIET_EXT4, &l.0], &d.join("mnt"));
    (l, m)
}

fn trace_cmd(cmd: &str) -> Value {
    let out = iopath(&["trace", "--json", "-", "--", "sh", "-c", cmd]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn reason(by: &Value, name: &str) -> u64 {
    by.as_array().unwrap().iter().find(|r| r[0] == name).map_or(0, |r| r[1].as_u64().unwrap())
}

/// dd writes 64 MiB into the cache and sync(2) has the flushers write it: every page is the
/// file's, dirtied by dd in our cgroup, written back for "sync" (or "background" if the
/// threshold was crossed first), as many pages as /proc/vmstat counts and the device took.
#[test]
fn a_synced_file_is_written_back_for_its_writer() {
    require_root();
    let _s = serial();
    let (l, m) = big_fs("wb-sync");
    let out = m.0.join("out");
    // mkfs wrote the device through the cache: its pages go first (7.7 MiB of them here).
    sh("sync", &[]);
    let (vm0, dev0) = (vmstat(), disk_stat(&l.0));
    // dd runs in a cgroup of its own: the dirtier's cgroup is read in the kernel, at the write.
    let cg = IoCgroup::new("iopath-wb-test");
    let r = trace_cmd(&format!(
        "echo $$ > {}/cgroup.procs && exec sh -c 'dd if=/dev/zero of={} bs=1M count=64 status=none && sync'",
        cg.0.display(),
        out.display()
    ));
    let (vm1, dev) = (vmstat(), delta(dev0, disk_stat(&l.0)));
    let wb = &r["writeback"];
    assert_eq!(wb["dirtied_pages"].as_u64(), Some(16384), "64 MiB of new pages: {wb}");
    let file = &wb["files"][0];
    assert_eq!(file["name"], "out", "{wb}");
    assert_eq!(file["comm"], "dd", "{file}");
    assert_eq!(file["cgroup"].as_str(), Some("/iopath-wb-test"), "{file}");
    assert_eq!(file["written_bytes"].as_u64(), Some(64 << 20), "sync waits for every page: {file}");
    let by = &file["by_reason"];
    let flushers = ["sync", "background", "periodic", "fs free space"].iter().map(|r| reason(by, r)).sum::<u64>();
    assert_eq!(flushers, 64 << 20, "the flushers wrote it: {by}");
    assert!(reason(by, "sync") > 0, "sync(2) wrote some of it: {by}");
    // Machine-wide counters: the idle machine adds a little (journald, the file system's own).
    let (dirtied, written) = (vm1[0] - vm0[0], vm1[1] - vm0[1]);
    assert!((16384..=16384 + 16384 / 20 + 256).contains(&dirtied), "/proc/vmstat nr_dirtied +{dirtied}");
    assert!((16384..=16384 + 16384 / 20 + 256).contains(&written), "/proc/vmstat nr_written +{written}");
    assert!(dev[3] * 512 >= 64 << 20, "the device took the 64 MiB: {dev:?}");
    let reqs = file["requests"].as_u64().unwrap();
    // The device's other writes are the file system's own (journal, metadata): a few dozen.
    assert!(
        reqs > 0 && reqs <= dev[2] && dev[2] - reqs <= 64,
        "{reqs} requests timed, the device completed {} writes",
        dev[2]
    );
    assert!(file["device_mean_ns"].as_u64().unwrap() > 0, "{file}");
    assert_eq!(wb["device"]["count"].as_u64(), Some(reqs), "one file, all its requests: {wb}");
}

/// With background writeback from 4 MiB of dirty pages, the flushers start while dd still
/// writes: the reason says "background".
#[test]
fn a_low_background_threshold_starts_the_flushers_early() {
    require_root();
    let _s = serial();
    let _restore = VmRestore::save(&["dirty_background_bytes", "dirty_background_ratio"]);
    std::fs::write("/proc/sys/vm/dirty_background_bytes", "4194304").unwrap();
    let (_l, m) = big_fs("wb-background");
    let out = m.0.join("out");
    // A second of quiet after dd: the flushers' work is seen, not cut off by the end of the trace.
    let r = trace_cmd(&format!("dd if=/dev/zero of={} bs=1M count=64 status=none && sleep 1", out.display()));
    let wb = &r["writeback"];
    let by = &wb["files"][0]["by_reason"];
    assert!(reason(by, "background") >= 32 << 20, "most of it written for the background threshold: {wb}");
    assert!(wb["vmstat"]["thresholds"].as_str().unwrap().contains("from 4194304 bytes"), "{wb}");
}
