//! `iopath doctor --filesystems`: which file systems' direct I/O iopath follows on this kernel,
//! tried rather than assumed. Each file system the kernel and its mkfs offer is made on a scratch
//! image of our own (a sparse file in a private directory, a loop device over it), mounted there,
//! and traced with the bundled generator's direct reads and writes; the followed share and the
//! reconciliation are what the trace itself reported. Nothing is left behind: the mount, the loop
//! device and the directory go in every case. A file system is only "followed" where this kernel
//! followed it here.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file systems tried, with the mkfs arguments that make one quietly on a loop device.
const FILE_SYSTEMS: [(&str, &[&str]); 4] = [
    ("ext4", &["-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"]),
    ("xfs", &["-q", "-f"]),
    ("btrfs", &["-q", "-f"]),
    ("f2fs", &["-q", "-f"]),
];

/// 320 MiB: xfs refuses file systems under 300 MB.
const IMAGE_BYTES: u64 = 320 << 20;

/// One file system tried on this kernel.
#[derive(Debug, Serialize)]
pub struct FsTrial {
    pub fs: String,
    /// Each direction tried ("reads", "writes"): the share followed end to end and whether the
    /// table reconciled; empty when it could not be tried.
    pub directions: Vec<Direction>,
    /// Why it was not tried, or the first reason a direction was not followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Direction {
    pub rw: &'static str,
    pub followed: f64,
    pub reconciled: bool,
}

impl FsTrial {
    /// Every direction tried was followed (>= 99%) and reconciled.
    pub fn followed(&self) -> bool {
        !self.directions.is_empty() && self.directions.iter().all(|d| d.followed >= 0.99 && d.reconciled)
    }
}

/// Tries every file system this kernel has (in /proc/filesystems, or as a module it can load) and
/// whose mkfs is installed; `exe` is this iopath.
pub fn try_all(exe: &Path) -> Vec<FsTrial> {
    let known = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    FILE_SYSTEMS
        .iter()
        .map(|(fs, mkfs_args)| {
            let mkfs = format!("mkfs.{fs}");
            let kernel_has = known.lines().any(|l| l.split_whitespace().last() == Some(fs))
                || Command::new("modprobe").arg("-q").arg(fs).status().is_ok_and(|s| s.success());
            let why = if !kernel_has {
                Some(format!("this kernel has no {fs} (not in /proc/filesystems, no module)"))
            } else if !on_path(&mkfs) {
                Some(format!("{mkfs} is not installed"))
            } else {
                None
            };
            match why {
                Some(why) => FsTrial { fs: fs.to_string(), directions: Vec::new(), why: Some(why) },
                None => try_one(exe, fs, &mkfs, mkfs_args),
            }
        })
        .collect()
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// The scratch image, its loop device and its mount: undone in reverse on drop.
struct Scratch {
    dir: PathBuf,
    loop_dev: Option<String>,
    mounted: bool,
}

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let mut tmpl = *b"/var/tmp/iopath-fs-XXXXXX\0";
        // SAFETY: a NUL-terminated template of our own; mkdtemp creates the directory 0700.
        let p = unsafe { libc::mkdtemp(tmpl.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(format!("a scratch directory in /var/tmp: {}", std::io::Error::last_os_error()));
        }
        let dir = PathBuf::from(std::str::from_utf8(&tmpl[..tmpl.len() - 1]).unwrap_or_default());
        Ok(Scratch { dir, loop_dev: None, mounted: false })
    }

    fn mnt(&self) -> PathBuf {
        self.dir.join("mnt")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.mnt()).status();
        }
        if let Some(d) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", d]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `cmd args`, its stdout; its stderr as the error.
fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn try_one(exe: &Path, fs: &str, mkfs: &str, mkfs_args: &[&str]) -> FsTrial {
    let mut t = FsTrial { fs: fs.to_string(), directions: Vec::new(), why: None };
    if let Err(e) = trace_on_scratch(exe, fs, mkfs, mkfs_args, &mut t) {
        t.why = Some(e);
    }
    t
}

fn trace_on_scratch(exe: &Path, fs: &str, mkfs: &str, mkfs_args: &[&str], t: &mut FsTrial) -> Result<(), String> {
    let mut s = Scratch::new()?;
    let img = s.dir.join("fs.img");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&img)
        .map_err(|e| format!("{}: {e}", img.display()))?;
    f.set_len(IMAGE_BYTES).map_err(|e| format!("{}: {e}", img.display()))?;
    drop(f);
    let img = img.to_string_lossy().into_owned();
    s.loop_dev = Some(run("losetup", &["-f", "--show", "--direct-io=on", &img])?);
    let dev = s.loop_dev.clone().unwrap_or_default();
    let mut a = mkfs_args.to_vec();
    a.push(&dev);
    run(mkfs, &a)?;
    std::fs::create_dir(s.mnt()).map_err(|e| format!("{}: {e}", s.mnt().display()))?;
    run("mount", &["-t", fs, &dev, &s.mnt().to_string_lossy()])?;
    s.mounted = true;
    let file = s.mnt().join("t.dat").to_string_lossy().into_owned();
    // The file laid out, then the file system mounted again: reads traced right after the layout
    // wrote it saw the kernel leave whole batches of requests unreported (106 of 2000 on xfs here,
    // block_rq_complete never fired for them: docs/routes.md, unlinked I/Os); a cold mount is
    // what a user's existing file is.
    let out = Command::new(exe)
        .args(["run", "--file", &file, "--size", "16m", "--ios", "1"])
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!("iopath run (laying out the file): {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    run("umount", &[&s.mnt().to_string_lossy()])?;
    s.mounted = false;
    run("mount", &["-t", fs, &dev, &s.mnt().to_string_lossy()])?;
    s.mounted = true;
    for rw in ["randread", "randwrite"] {
        let out = Command::new(exe)
            .args(["trace", "--json", "-", "--engine", "uring", "--qd", "8", "--size", "16m", "--ios", "2000"])
            .args(["--rw", rw, "--file", &file, "--allow-write"])
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!("iopath trace --rw {rw}: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let r: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("iopath trace's report: {e}"))?;
        let d = Direction {
            rw: if rw == "randread" { "reads" } else { "writes" },
            followed: r["correlated_fraction"].as_f64().unwrap_or(0.0),
            reconciled: r["reconciliation"]["reconciled"].as_bool().unwrap_or(false),
        };
        if t.why.is_none() && !(d.followed >= 0.99 && d.reconciled) {
            t.why = r["reconciliation"]["reasons"][0].as_str().map(|w| format!("{}: {w}", d.rw));
        }
        t.directions.push(d);
    }
    Ok(())
}

/// doctor's section: one line per file system.
pub fn render(trials: &[FsTrial], w: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(w, "\n  file systems (direct I/O traced on a scratch image of each: io_uring QD8, reads and writes):")?;
    for t in trials {
        let state = if t.followed() {
            "followed"
        } else if t.directions.is_empty() {
            "not tried"
        } else {
            "NOT followed"
        };
        let dirs: Vec<String> = t
            .directions
            .iter()
            .map(|d| {
                format!("{} {:.1}%{}", d.rw, d.followed * 100.0, if d.reconciled { "" } else { " (not reconciled)" })
            })
            .collect();
        write!(w, "    {state:<13} {:<6} {}", t.fs, dirs.join(", "))?;
        match &t.why {
            Some(why) => writeln!(w, "{}{why}", if dirs.is_empty() { "" } else { "; " })?,
            None => writeln!(w)?,
        }
    }
    Ok(())
}
