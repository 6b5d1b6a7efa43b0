//! tracefs: found, or mounted for as long as iopath needs it and unmounted after.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Holds tracefs mounted; unmounts it on drop only if iopath mounted it.
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

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            if let Ok(p) = CString::new(self.path.as_os_str().as_encoded_bytes()) {
                // SAFETY: unmounting what we mounted; a busy tracefs stays mounted (MNT_DETACH).
                unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}
