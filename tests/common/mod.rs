//! Helpers for the integration tests: run the binary, make scratch files, loop devices and
//! mounts that are ours (never a disk we did not create), and clean them up.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests load BPF and make loop devices: run them as root");
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_iopath")
}

pub fn iopath(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("iopath runs")
}

/// A scratch directory on a real file system (the target dir lives on the root disk, not tmpfs).
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `iopath run ... --json -`, parsed; panics with iopath's stderr when it fails.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    json_of("run", args)
}

/// `iopath <cmd> ... --json -`, parsed; panics with iopath's stderr when it fails.
pub fn json_of(cmd: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec![cmd];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--json", "-"]);
    let out = iopath(&a);
    assert!(out.status.success(), "iopath {a:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON report")
}

/// `iopath run ...` that must fail; returns its stderr.
pub fn run_err(args: &[&str]) -> String {
    let mut a = vec!["run"];
    a.extend_from_slice(args);
    let out = iopath(&a);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "iopath {a:?} should have failed; stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!err.contains("panicked"), "iopath {a:?} panicked: {err}");
    err
}

pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A loop device over a file of ours; detached on drop. A loop device keeps the scheduler it last
/// had across detach (a test that set bfq left every later user of that device on bfq: 340k
/// instead of 580k IOPS in the benchmarks after a test run): each is made and left on "none".
pub struct LoopDev(pub String);

/// Sets a block device's I/O scheduler (its sysfs queue/scheduler).
pub fn set_scheduler(dev: &str, sched: &str) {
    let path = format!("/sys/block/{}/queue/scheduler", dev.trim_start_matches("/dev/"));
    std::fs::write(&path, sched).unwrap_or_else(|e| panic!("{path} <- {sched}: {e}"));
}

impl LoopDev {
    pub fn new(backing: &Path, size_mb: u64, sector: u32) -> LoopDev {
        sh("truncate", &["-s", &format!("{size_mb}M"), backing.to_str().unwrap()]);
        Self::attach(backing, sector)
    }

    /// Over a fully written backing file: reads reach the disk under it, as with a real device.
    pub fn written(backing: &Path, size_mb: u64) -> LoopDev {
        let out = iopath(&["run", "--file", backing.to_str().unwrap(), "--size", &format!("{size_mb}m"), "--ios", "1"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let dev = sh("losetup", &["-f", "--show", "--direct-io=on", backing.to_str().unwrap()]);
        set_scheduler(&dev, "none");
        LoopDev(dev)
    }

    /// Over a sparse file, with direct I/O to it: the loop device's own I/O does not pass
    /// through the page cache a second time (machine-wide counters like /proc/vmstat's
    /// nr_dirtied saw every page twice over a buffered loop device).
    pub fn direct(backing: &Path, size_mb: u64) -> LoopDev {
        sh("truncate", &["-s", &format!("{size_mb}M"), backing.to_str().unwrap()]);
        let dev = sh("losetup", &["-f", "--show", "--direct-io=on", backing.to_str().unwrap()]);
        set_scheduler(&dev, "none");
        LoopDev(dev)
    }

    fn attach(backing: &Path, sector: u32) -> LoopDev {
        let dev = sh("losetup", &["-f", "--show", "--sector-size", &sector.to_string(), backing.to_str().unwrap()]);
        set_scheduler(&dev, "none");
        LoopDev(dev)
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/sys/block/{}/queue/scheduler", self.0.trim_start_matches("/dev/")), "none");
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A mount of ours; unmounted on drop.
pub struct Mount(pub PathBuf);

impl Mount {
    pub fn new(args: &[&str], dir: &Path) -> Mount {
        std::fs::create_dir_all(dir).unwrap();
        let mut a: Vec<&str> = args.to_vec();
        a.push(dir.to_str().unwrap());
        sh("mount", &a);
        Mount(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `iopath <args>` that must fail cleanly: exit status 1 (an error, not a panic's 101 or a
/// signal), no panic text; returns its stderr.
pub fn fails(args: &[&str]) -> String {
    let out = iopath(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "iopath {args:?} must fail with status 1; stdout: {} stderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!err.contains("panicked"), "iopath {args:?} panicked: {err}");
    err
}

/// reads completed, sectors read, writes completed, sectors written (/sys/block/X/stat).
pub fn disk_stat(dev: &str) -> [u64; 4] {
    let name = dev.trim_start_matches("/dev/");
    let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    [f[0], f[2], f[4], f[6]]
}

pub fn delta(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    [b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]]
}

/// The parts add up to the call: the split is a partition of each call's time (on CPU, waited,
/// run queue, and for writes and sync calls what they waited on).
pub fn split_adds_up(s: &serde_json::Value, what: &str) {
    let m = |k: &str| s[k]["mean_ns"].as_f64().unwrap();
    let w = &s["waits"];
    let waits: f64 =
        ["data", "journal", "flush", "throttled"].iter().map(|k| w[k]["mean_ns"].as_f64().unwrap_or(0.0)).sum();
    let parts = m("on_cpu") + m("waited") + m("runq") + waits;
    assert!((parts - m("total")).abs() <= m("total") * 0.01 + 3.0, "{what}: parts {parts} vs total {}", m("total"));
}

/// mkfs.ext4 -E: write the inode tables and journal now. With lazy init the kernel's
/// ext4lazyinit thread zeroes them after mount, and a warm-cache test saw 18 writes (8.5 MB) and
/// 13 reads on the device that were none of the workload's.
pub const NO_LAZY_INIT: &str = "lazy_itable_init=0,lazy_journal_init=0";

/// ext4 mount options: no block-bitmap prefetch after mount. The same ext4lazyinit thread reads
/// the bitmaps in the background otherwise (13 reads of the device during a warm-cache run).
pub const QUIET_EXT4: &str = "no_prefetch_block_bitmaps";

/// A fresh ext4 on a loop device with one file of `mb` MiB, mounted again so nothing of it is
/// cached (unmounting drops its pages).
pub fn cold_fs(name: &str, mb: u64) -> (LoopDev, Mount, String) {
    let d = scratch(name);
    let l = LoopDev::new(&d.join("fs.img"), mb * 2 + 64, 512);
    sh("mkfs.ext4", &["-q", "-E", NO_LAZY_INIT, &l.0]);
    let mnt = d.join("mnt");
    let f = mnt.join("data");
    {
        let _m = Mount::new(&["-o", QUIET_EXT4, &l.0], &mnt);
        let out = iopath(&["run", "--file", f.to_str().unwrap(), "--size", &format!("{mb}m"), "--ios", "1"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let m = Mount::new(&["-o", QUIET_EXT4, &l.0], &mnt);
    (l, m, f.to_str().unwrap().to_owned())
}

/// A bpftrace script running beside iopath, as an independent reference on the same run: started
/// and attached before the workload, stopped with SIGINT after it; its `@name: value` maps read.
pub struct BpfTrace(Option<std::process::Child>);

impl BpfTrace {
    pub fn start(script: &str) -> BpfTrace {
        use std::io::{BufRead, Read};
        // bpftrace finds tracepoints through tracefs, which a fresh machine may not have mounted
        // (iopath mounts it only for its own run): mounted once for the test binary and left
        // mounted, as a machine that ran bpftrace by hand has it.
        static TRACEFS: std::sync::Once = std::sync::Once::new();
        TRACEFS.call_once(|| {
            if !Path::new("/sys/kernel/tracing/events").exists() {
                sh("mount", &["-t", "tracefs", "tracefs", "/sys/kernel/tracing"]);
            }
        });
        let mut child = Command::new("bpftrace")
            .args(["-e", script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("bpftrace is installed (scripts/setup.sh)");
        // "Attaching N probes..." is its first line once the probes are on.
        let mut first = String::new();
        let out = child.stdout.as_mut().unwrap();
        std::io::BufReader::new(out).read_line(&mut first).unwrap();
        if !first.starts_with("Attaching") {
            let mut err = String::new();
            let _ = child.kill();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("bpftrace did not attach: {first:?}, stderr: {err}");
        }
        // Its stderr is not read again: a warning it writes later must not block it on a full pipe.
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        BpfTrace(Some(child))
    }

    /// SIGINT, then its printed maps: `@n: 804` -> ("n", 804).
    pub fn stop(mut self) -> std::collections::HashMap<String, f64> {
        let child = self.0.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (k, v) = l.strip_prefix('@')?.split_once(": ")?;
                Some((k.to_owned(), v.trim().parse().ok()?))
            })
            .collect()
    }
}

impl Drop for BpfTrace {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// bpftrace's count and total time of one syscall made by processes named `comm`.
pub fn syscall_timer(syscall: &str, comm: &str) -> BpfTrace {
    BpfTrace::start(&format!(
        "tracepoint:syscalls:sys_enter_{syscall} /comm == \"{comm}\"/ {{ @s[tid] = nsecs; }}
         tracepoint:syscalls:sys_exit_{syscall} /@s[tid]/ {{ @n = count(); @t = sum(nsecs - @s[tid]); delete(@s[tid]); }}"
    ))
}

/// /proc/sys/vm settings a test changes, put back when dropped. The ratios last: writing a
/// ratio zeroes its bytes twin and the other way round, so a 0 is never written back.
pub struct VmRestore(Vec<(&'static str, String)>);

impl VmRestore {
    pub fn save(keys: &[&'static str]) -> VmRestore {
        VmRestore(keys.iter().map(|k| (*k, std::fs::read_to_string(format!("/proc/sys/vm/{k}")).unwrap())).collect())
    }
}

impl Drop for VmRestore {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            if v.trim() != "0" {
                let _ = std::fs::write(format!("/proc/sys/vm/{k}"), v.trim());
            }
        }
    }
}

/// A file's pages held in the page cache (mapped and mlocked by the test) until dropped. This
/// VM's page cache is trimmed while idle (buff/cache fell 28 MB in 20 idle seconds here, with
/// no reclaim in /proc/vmstat), and a CI run's "warm" pass once re-read 1.1 MiB of a file read
/// a second before: a warm pass pins what it calls warm.
pub struct Pinned(*mut libc::c_void, usize);

impl Pinned {
    pub fn file(path: &str) -> Pinned {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a shared read-only mapping of a file we opened; checked for failure.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
        assert!(p != libc::MAP_FAILED, "mmap {path}: {}", std::io::Error::last_os_error());
        // SAFETY: the mapping made above, of `len` bytes.
        let r = unsafe { libc::mlock(p, len) };
        assert_eq!(r, 0, "mlock {path}: {}", std::io::Error::last_os_error());
        Pinned(p, len)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: the mapping this value owns.
        unsafe {
            libc::munlock(self.0, self.1);
            libc::munmap(self.0, self.1);
        }
    }
}

/// A blkio (cgroup v1) cgroup of ours; removed on drop.
pub struct Blkio(pub std::path::PathBuf);

impl Blkio {
    pub fn new(name: &str, limit_file: &str, limit: &str) -> Blkio {
        let root = std::path::Path::new("/sys/fs/cgroup/blkio");
        assert!(
            root.join("cgroup.procs").exists(),
            "the blkio cgroup (v1) hierarchy is not mounted at {}: this test needs it (cgroup v2 io.max runs in the VM rig)",
            root.display()
        );
        let d = root.join(name);
        let _ = std::fs::create_dir(&d);
        std::fs::write(d.join(limit_file), limit).unwrap();
        Blkio(d)
    }
}

impl Blkio {
    /// `iopath ARGS` run inside this cgroup (the shell joins it, then execs iopath).
    pub fn iopath(&self, args: &[&str]) -> Output {
        let cmd = format!("echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"", self.0.display());
        std::process::Command::new("sh").arg("-c").arg(cmd).arg(bin()).args(args).output().unwrap()
    }
}

impl Drop for Blkio {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// fio's command line for 4k random reads at QD16, direct, 64 MiB, 2 s, JSON on stdout (or
/// `--output`): the outside program the traces of another process follow.
pub fn fio_args(f: &str, engine: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "fio",
        "--name=t",
        "--ioengine",
        engine,
        "--iodepth=16",
        "--rw=randread",
        "--bs=4k",
        "--direct=1",
        "--size=64m",
        "--runtime=2",
        "--time_based",
        "--output-format=json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(format!("--filename={f}"));
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}
