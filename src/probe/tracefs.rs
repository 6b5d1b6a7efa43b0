//! tracefs: found, or mounted where it belongs when missing. It stays mounted: unmounting on exit
//! would pull it from under another iopath (or perf, bpftrace) attaching at the same moment.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Where tracefs is, and whether this process had to mount it.
pub struct Tracefs {
    pub path: PathBuf,
    pub mounted_by_us: bool,
}

impl Tracefs {
    pub fn ensure() -> Result<Tracefs> {
        let path = PathBuf::from(TRACEFS);
        if path.join("events").is_dir() {
            return Ok(Tracefs { path, mounted_by_us: false });
        }
        let legacy = Path::new("/sys/kernel/debug/tracing");
        if legacy.join("events").is_dir() {
            return Ok(Tracefs { path: legacy.into(), mounted_by_us: false });
        }
        let (src, target, fstype) = (c"tracefs", CString::new(TRACEFS)?, c"tracefs");
        // SAFETY: all strings are NUL-terminated and outlive the call.
        let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            bail!("tracefs is not mounted and mounting it at {TRACEFS} failed: {e} (run as root, or 'mount -t tracefs tracefs {TRACEFS}')");
        }
        Ok(Tracefs { path, mounted_by_us: true })
    }

    /// Whether `group:name` exists on this kernel.
    pub fn has_event(&self, group: &str, name: &str) -> bool {
        self.path.join("events").join(group).join(name).is_dir()
    }
}
