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
/// (an --out folder not empty; what a file will overwrite is `check_outputs`' note).
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

/// Paths that name standard output or nothing: written as they are, never replaced.
fn is_stream(p: &Path) -> bool {
    matches!(p.to_str(), Some("-" | "/dev/stdout" | "/dev/stderr" | "/dev/null"))
}

/// Whether two paths are the same file (or device node): the same inode on the same device, or
/// for a block device the same device number.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => {
            (x.dev() == y.dev() && x.ino() == y.ino())
                || (x.file_type().is_block_device() && y.file_type().is_block_device() && x.rdev() == y.rdev())
        }
        _ => false,
    }
}

/// The one rule for every file iopath writes (`--json`, `--events-out`, `--perfetto`,
/// `--log-prefix`'s files, compare's and study's outputs), checked before any work: never a block
/// or character device (other than standard output and /dev/null: a report written onto
/// /dev/loopN is a destroyed superblock), never the job's target or an input (`protected`: what it
/// is, for the message), never a folder; an existing file is replaced and a note says so. Returns
/// the notes.
pub fn check_outputs(outs: &[(&str, &Path)], protected: &[(&Path, &str)]) -> Result<Vec<String>> {
    use std::os::unix::fs::FileTypeExt;
    let mut notes = Vec::new();
    for &(flag, p) in outs {
        if is_stream(p) {
            continue;
        }
        let shown = p.display();
        if let Ok(m) = std::fs::metadata(p) {
            let t = m.file_type();
            if t.is_block_device() || t.is_char_device() {
                bail!(
                    "{flag} {shown}: a {} device: iopath never writes onto a device (it would overwrite what is                      there); give a file name",
                    if t.is_block_device() { "block" } else { "character" }
                );
            }
            if t.is_dir() {
                bail!("{flag} {shown}: that is a folder; give a file name");
            }
            if t.is_fifo() || t.is_socket() {
                bail!("{flag} {shown}: a pipe or socket, not a file: give a file name (or - for standard output)");
            }
        }
        if let Some((_, what)) = protected.iter().find(|(q, _)| same_file(p, q)) {
            bail!("{flag} {shown}: that is {what}: writing there would destroy it; give another file name");
        }
        if let Some((other, _)) = outs.iter().find(|&&(f, q)| f != flag && q == p && !is_stream(q)) {
            bail!("{flag} {shown}: {other} writes the same file; give each its own");
        }
        // --json's folder may be the --out folder the run makes: `check` judges it.
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if flag != "--json" && !parent.is_dir() {
            bail!("{flag} {shown}: the folder {} does not exist: create it first", parent.display());
        }
        if flag != "--json" && !writable(if p.exists() { p } else { parent }) {
            bail!("{flag} {shown}: not writable by this user (or read-only): pick another place");
        }
        if p.exists() {
            notes.push(format!("{flag} {shown} exists: it will be overwritten"));
        }
    }
    Ok(notes)
}

/// `check_outputs`, with its notes on stderr.
pub fn check_outputs_and_say(outs: &[(&str, &Path)], protected: &[(&Path, &str)]) -> Result<()> {
    for n in check_outputs(outs, protected)? {
        eprintln!("iopath: note: {n}");
    }
    Ok(())
}

/// `check`, with its notes on stderr.
pub fn check_and_say(json: Option<&Path>, dir: Option<&Path>) -> Result<()> {
    for n in check(json, dir)? {
        eprintln!("iopath: note: {n}");
    }
    Ok(())
}

/// The temporary name a file is written under before it is renamed into place: in its own
/// folder (a rename never crosses file systems), hidden, this process's.
pub fn temp_name(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.iopath-{}.tmp", std::process::id()))
}

/// Writes a file, naming it in any error; its folder is made when missing (checked by `check`).
/// Written to a temporary name and renamed: a full disk or a kill leaves the old file or none,
/// never a partial or empty one.
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    if is_stream(path) {
        return std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()));
    }
    let tmp = temp_name(path);
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes.as_ref()).and_then(|()| f.sync_data()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
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
        let notes = check_outputs(&[("--json", &f)], &[]).unwrap();
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

    #[test]
    fn no_output_replaces_a_device_an_input_or_another_output() {
        let d = std::env::temp_dir().join(format!("iopath-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let target = d.join("t.dat");
        std::fs::write(&target, b"data").unwrap();
        let e = |outs: &[(&str, &Path)]| {
            check_outputs(outs, &[(target.as_path(), "the job's target")]).unwrap_err().to_string()
        };
        // A character device (the root's console, always there) and a folder.
        assert!(e(&[("--perfetto", Path::new("/dev/full"))]).contains("character device"));
        assert!(e(&[("--events-out", d.as_path())]).contains("that is a folder"));
        // The target, by another name too (a hard link is the same inode).
        assert!(e(&[("--events-out", &target)]).contains("that is the job's target"));
        let link = d.join("t.link");
        std::fs::hard_link(&target, &link).unwrap();
        assert!(e(&[("--json", &link)]).contains("that is the job's target"));
        let r = d.join("r.json");
        assert!(e(&[("--json", &r), ("--perfetto", &r)]).contains("writes the same file"));
        // Standard output and /dev/null are streams, not devices to protect.
        assert!(check_outputs(&[("--json", Path::new("-")), ("--perfetto", Path::new("/dev/null"))], &[])
            .unwrap()
            .is_empty());
        // Written under a temporary name and renamed: nothing of it is left beside the file.
        write_file(&r, b"{}").unwrap();
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert!(left.iter().all(|n| !n.to_string_lossy().contains(".tmp")), "{left:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
