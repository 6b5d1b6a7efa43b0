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

/// A loop device over a file of ours; detached on drop.
pub struct LoopDev(pub String);

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
        LoopDev(dev)
    }

    fn attach(backing: &Path, sector: u32) -> LoopDev {
        let dev = sh("losetup", &["-f", "--show", "--sector-size", &sector.to_string(), backing.to_str().unwrap()]);
        LoopDev(dev)
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
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
