//! Where reports go: standard output, --json FILE, --out DIR. Checked before a run (a report
//! must not be computed for 10 minutes and then have nowhere to go), written with the path in
//! every error, and printed so that a closed or full stdout is an error that says so.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Whether this process may write `p` (root too: a read-only mount refuses it).
fn writable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: access reads a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The nearest folder that exists at or above `p` (where create_dir_all would start).
fn existing_ancestor(p: &Path) -> &Path {
    let mut a = p;
    while !a.exists() {
        match a.parent() {
            Some(up) if !up.as_os_str().is_empty() => a = up,
            _ => return Path::new("."),
        }
    }
    a
}

/// Refuses outputs that cannot be written before any work is done; returns notes for the user
/// (what will be overwritten).
pub fn check(json: Option<&Path>, dir: Option<&Path>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    if let Some(p) = json.filter(|p| p.as_os_str() != "-") {
        if p.is_dir() {
            bail!("--json {}: that is a folder; give a file name (or --out DIR for a folder of reports)", p.display());
        }
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // Inside the --out folder, which the run creates: checked as that folder is.
        let inside_out = dir.is_some_and(|d| parent.starts_with(d));
        if !parent.is_dir() && !inside_out {
            bail!("--json {}: the folder {} does not exist: create it first", p.display(), parent.display());
        }
        let target = if p.exists() {
            p
        } else if inside_out {
            existing_ancestor(parent)
        } else {
            parent
        };
        if !writable(target) {
            bail!(
                "--json {}: {} is not writable by this user (or read-only): pick another place",
                p.display(),
                target.display()
            );
        }
        if p.exists() {
            notes.push(format!("--json {} exists: it will be overwritten", p.display()));
        }
    }
    if let Some(d) = dir {
        if d.exists() && !d.is_dir() {
            bail!("--out {}: exists and is not a folder: give a folder name", d.display());
        }
        let a = existing_ancestor(d);
        if !writable(a) {
            bail!(
                "--out {}: {} is not writable by this user (or read-only): pick another place",
                d.display(),
                a.display()
            );
        }
        if d.is_dir() && std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some()) {
            notes.push(format!(
                "--out {} is not empty: the files this run writes there replace any of the same name",
                d.display()
            ));
        }
    }
    Ok(notes)
}

/// `check`, with its notes on stderr.
pub fn check_and_say(json: Option<&Path>, dir: Option<&Path>) -> Result<()> {
    for n in check(json, dir)? {
        eprintln!("iopath: note: {n}");
    }
    Ok(())
}

/// Writes a file, naming it in any error; its folder is made when missing (checked by `check`).
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Renders into memory, then prints: a full or broken stdout is an error naming stdout.
pub fn print(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<()> {
    let mut buf = Vec::new();
    render(&mut buf).context("rendering the output")?;
    let mut out = std::io::stdout().lock();
    out.write_all(&buf).and_then(|()| out.flush()).context("writing to standard output")
}

/// Whether standard output goes nowhere: /dev/null, or closed (Rust's runtime reopens a closed
/// fd 1 on /dev/null at start-up, so the two look alike). A report printed only there is lost.
pub fn stdout_discarded() -> bool {
    std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritable_and_misnamed_outputs_are_refused_before_work() {
        let d = std::env::temp_dir().join(format!("iopath-output-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e = check(Some(&d), None).unwrap_err().to_string();
        assert!(e.contains("that is a folder"), "{e}");
        let e = check(Some(&d.join("no/such/r.json")), None).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let f = d.join("r.json");
        std::fs::write(&f, b"{}").unwrap();
        let notes = check(Some(&f), None).unwrap();
        assert!(notes[0].contains("will be overwritten"), "{notes:?}");
        let e = check(None, Some(&f)).unwrap_err().to_string();
        assert!(e.contains("not a folder"), "{e}");
        assert!(check(None, Some(&d.join("new/deeper"))).unwrap().is_empty());
        assert!(check(None, Some(&d)).unwrap()[0].contains("is not empty"));
        assert!(check(Some(Path::new("-")), None).unwrap().is_empty());
        // --json inside the --out folder the run will make (the VM rig's compare does this).
        let out = d.join("cmp");
        assert!(check(Some(&out.join("compare.json")), Some(&out)).unwrap().is_empty());
        write_file(&out.join("compare.json"), b"{}").unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
