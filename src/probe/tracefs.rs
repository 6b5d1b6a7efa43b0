//! tracefs: found, or mounted where it belongs when missing, for this run only. A mount iopath
//! made is undone when the run is over (lazily: whoever still holds a file open keeps it) and
//! the user is told both; one that was there is left alone.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

pub const TRACEFS: &str = "/sys/kernel/tracing";
const LEGACY: &str = "/sys/kernel/debug/tracing";

/// Where tracefs is, and whether this process had to mount it.
pub struct Tracefs {
    pub path: PathBuf,
    pub mounted_by_us: bool,
}

/// Mount points of tracefs now, from /proc/self/mountinfo (field 5 is the mount point; the file
/// system type follows the " - " separator).
fn tracefs_mounts() -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let mount_point = left.split_whitespace().nth(4)?;
            (right.split_whitespace().next()? == "tracefs").then(|| PathBuf::from(mount_point))
        })
        .collect()
}

impl Tracefs {
    pub fn ensure() -> Result<Tracefs> {
        for p in [TRACEFS, LEGACY] {
            let path = PathBuf::from(p);
            if path.join("events").is_dir() {
                return Ok(Tracefs { path, mounted_by_us: false });
            }
        }
        // Mounted but not readable (mode 0700 for non-root): say that, not "not mounted".
        if let Some(m) = tracefs_mounts().into_iter().find(|m| m == Path::new(TRACEFS) || m == Path::new(LEGACY)) {
            // Or another iopath mounted it an instant after this one looked (the rig's two tops
            // on 6.1 blamed permissions so, as root): look again before saying why not.
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                if m.join("events").is_dir() {
                    return Ok(Tracefs { path: m, mounted_by_us: false });
                }
            }
            bail!(
                "tracefs is mounted at {} but this user cannot read it (it is root's, mode 0700): run as root or add CAP_DAC_READ_SEARCH",
                m.display()
            );
        }
        let (src, target, fstype) = (c"tracefs", CString::new(TRACEFS)?, c"tracefs");
        // SAFETY: all strings are NUL-terminated and outlive the call.
        let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            // Another tracer (a second iopath started at the same instant: the rig's two tops)
            // mounted it meanwhile: use theirs, leave it to them to unmount.
            if Path::new(TRACEFS).join("events").is_dir() {
                return Ok(Tracefs { path: PathBuf::from(TRACEFS), mounted_by_us: false });
            }
            bail!("tracefs is not mounted and mounting it at {TRACEFS} failed: {e} (run as root, or 'mount -t tracefs tracefs {TRACEFS}')");
        }
        eprintln!("iopath: note: tracefs was not mounted: mounted it at {TRACEFS} for this run (unmounted when done)");
        Ok(Tracefs { path: PathBuf::from(TRACEFS), mounted_by_us: true })
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if !self.mounted_by_us {
            return;
        }
        let Ok(target) = CString::new(self.path.as_os_str().as_encoded_bytes()) else { return };
        // MNT_DETACH: a tracer that opened a file in it meanwhile keeps it until it closes.
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!(
                "iopath: note: could not unmount the tracefs it mounted at {}: {}",
                self.path.display(),
                std::io::Error::last_os_error()
            );
        }
    }
}
