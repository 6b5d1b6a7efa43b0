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
        if !a.is_dir() {
            bail!(
                "--out {}: {} is a file, so no folder can be made below it: give a folder name",
                d.display(),
                a.display()
            );
        }
        if let Ok(m) = std::fs::symlink_metadata(d) {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if m.file_type().is_symlink() || (m.is_dir() && m.uid() != me && m.mode() & 0o002 != 0) {
                bail!(
                    "--out {}: a symbolic link, or a folder anyone may write that is not this user's: someone else \
                     decides what is in it; give a folder of your own",
                    d.display()
                );
            }
        }
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

/// The owner of what stands at `p` (a link itself, not its target) when that is not this
/// process's user.
fn foreign_owner(p: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    (m.uid() != me).then_some(m.uid())
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
                    "{flag} {shown}: a {} device: iopath never writes onto a device (it would overwrite what is there); give a file name",
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
        if let Some(uid) = foreign_owner(p) {
            bail!(
                "{flag} {shown}: exists and belongs to uid {uid}, not to this user: iopath never replaces a file \
                 someone else owns (in a shared folder it may be planted); give another file name"
            );
        }
        if let Some((_, what)) = protected.iter().find(|(q, _)| same_file(p, q)) {
            bail!("{flag} {shown}: that is {what}: writing there would destroy it; give another file name");
        }
        if let Some((other, _)) = outs.iter().find(|&&(f, q)| f != flag && q == p && !is_stream(q)) {
            bail!("{flag} {shown}: {other} writes the same file; give each its own");
        }
        // --json's folder may be the --out folder the run makes, and --out's files are in it:
        // `check` judges that folder.
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let in_made_folder = flag == "--json" || flag == "--out";
        if !in_made_folder && !parent.is_dir() {
            bail!("{flag} {shown}: the folder {} does not exist: create it first", parent.display());
        }
        if !in_made_folder && !writable(if p.exists() { p } else { parent }) {
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

/// What every temporary file of iopath's is named: `.<name>.iopath-<pid>-<random>.tmp` in the
/// final file's own folder (a rename never crosses file systems). The random part makes the name
/// unguessable (a user who can write a shared folder cannot plant a symlink at it first), the pid
/// lets a later run tell one a SIGKILLed run left (its pid gone) from one being written now.
fn temp_name_for(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut r = [0u8; 8];
    // SAFETY: getrandom fills the buffer it is given; a short read leaves zeros, and O_EXCL
    // still refuses a name that exists.
    unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) };
    let mut n = std::ffi::OsString::from(".");
    n.push(name);
    n.push(format!(".iopath-{}-{:016x}.tmp", std::process::id(), u64::from_ne_bytes(r)));
    n
}

/// Whether `entry` is a temporary file a run of iopath that is gone left for `name`: its pid
/// part names no live process. Only a regular file of this user with one link is removed (a
/// planted symlink or someone else's file is never touched).
fn stale_temp(name: &str, entry: &str) -> Option<u32> {
    let rest = entry.strip_prefix('.')?.strip_prefix(name)?.strip_prefix(".iopath-")?.strip_suffix(".tmp")?;
    let (pid, rand) = rest.split_once('-')?;
    (rand.len() == 16 && rand.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
    let pid: u32 = pid.parse().ok()?;
    // SAFETY: kill with signal 0 only checks that the process exists.
    let gone = unsafe { libc::kill(pid as i32, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    gone.then_some(pid)
}

fn cstr(p: &std::ffi::OsStr) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_encoded_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// The live temporary files, for the signal handler of commands that do not stop gracefully
/// (`stop::on_signals`): it unlinks each, then dies of the signal. Slots hold leaked C strings
/// (never freed: a handler may be reading one), so a slot is a pointer an atomic swap clears.
const LIVE_SLOTS: usize = 64;
static LIVE: [std::sync::atomic::AtomicPtr<libc::c_char>; LIVE_SLOTS] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; LIVE_SLOTS];

fn register_live(path: &Path) -> Option<usize> {
    use std::sync::atomic::Ordering;
    let c = cstr(path.as_os_str()).ok()?.into_raw();
    for (i, slot) in LIVE.iter().enumerate() {
        if slot.compare_exchange(std::ptr::null_mut(), c, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return Some(i);
        }
    }
    // More than LIVE_SLOTS at once: Drop still removes it; only a signal could leave it.
    // SAFETY: c came from into_raw above and was never shared.
    drop(unsafe { std::ffi::CString::from_raw(c) });
    None
}

fn unregister_live(slot: Option<usize>) {
    if let Some(i) = slot {
        // Leaked on purpose (see LIVE): a few bytes per file a run writes.
        LIVE[i].store(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// Unlinks every live temporary file. Async-signal-safe: atomic loads and unlink(2) only.
pub fn remove_live_temps() {
    for slot in &LIVE {
        let p = slot.swap(std::ptr::null_mut(), std::sync::atomic::Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a NUL-terminated string leaked by register_live, never freed.
            unsafe { libc::unlink(p) };
        }
    }
}

/// Inputs and targets of this run, by (device, inode): no output may replace one, whatever
/// name it is reached by (`protect`, checked again at every rename).
static PROTECTED: std::sync::Mutex<Vec<(u64, u64, String)>> = std::sync::Mutex::new(Vec::new());

/// Marks `path` (an input read, the job's target) as what no output of this run may replace.
pub fn protect(path: &Path, what: &str) {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(path) {
        if m.is_file() {
            PROTECTED.lock().unwrap_or_else(|e| e.into_inner()).push((m.dev(), m.ino(), what.to_owned()));
        }
    }
}

fn protected_as(m: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let list = PROTECTED.lock().unwrap_or_else(|e| e.into_inner());
    list.iter().find(|(d, i, _)| *d == m.dev() && *i == m.ino()).map(|(_, _, w)| w.clone())
}

/// An I/O error said for a person: a full disk or quota by name.
pub fn why(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => format!("{e} (ENOSPC: the file system is full)"),
        Some(libc::EDQUOT) => format!("{e} (EDQUOT: this user's disk quota is used up)"),
        _ => e.to_string(),
    }
}

/// A file being written for `dest`: created with O_CREAT|O_EXCL|O_NOFOLLOW under an unguessable
/// name in `dest`'s folder (held open, so a folder renamed meanwhile still gets it), renamed
/// over `dest` by `persist`. Dropped without `persist` (an error, a stop), it is removed; a
/// SIGKILL leaves it under a name the next run that writes there removes (`stale_temp`).
pub struct TempFile {
    dir: std::fs::File,
    tmp: std::ffi::OsString,
    name: std::ffi::OsString,
    dest: std::path::PathBuf,
    file: Option<std::fs::File>,
    slot: Option<usize>,
    /// Bytes the kernel took (written to the file), for a failure's message.
    pub written: u64,
}

impl TempFile {
    pub fn create(dest: &Path) -> Result<TempFile> {
        Self::create_io(dest).with_context(|| format!("creating a temporary file for {}", dest.display()))
    }

    fn create_io(dest: &Path) -> std::io::Result<TempFile> {
        use std::os::unix::io::{AsRawFd, FromRawFd};
        let name = dest.file_name().ok_or_else(|| std::io::Error::from_raw_os_error(libc::EISDIR))?.to_os_string();
        let parent = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // SAFETY: open of a NUL-terminated path; the fd is owned by the File made from it.
        let dfd = unsafe {
            libc::open(cstr(parent.as_os_str())?.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC)
        };
        if dfd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: dfd is a fresh descriptor of ours.
        let dir = unsafe { std::fs::File::from_raw_fd(dfd) };
        remove_stale(&dir, parent, &name.to_string_lossy());
        for _ in 0..16 {
            let tmp = temp_name_for(&name);
            let c = cstr(&tmp)?;
            // SAFETY: openat with a NUL-terminated name relative to our folder fd.
            let fd = unsafe {
                libc::openat(
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    // Read and write: a scratch file (`into_scratch`) is read back.
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    0o666 as libc::c_uint,
                )
            };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EEXIST) {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: fd is a fresh descriptor of ours.
            let file = unsafe { std::fs::File::from_raw_fd(fd) };
            let slot = register_live(&parent.join(&tmp));
            return Ok(TempFile { dir, tmp, name, dest: dest.to_path_buf(), file: Some(file), slot, written: 0 });
        }
        Err(std::io::Error::from_raw_os_error(libc::EEXIST))
    }

    pub fn file(&mut self) -> &mut std::fs::File {
        self.file.as_mut().expect("a TempFile's file until persist")
    }

    /// Flushed to the disk and renamed over the destination, which keeps its mode when it
    /// existed; refused when the destination is an input or the target of this run, or another
    /// user's file.
    pub fn persist(mut self) -> Result<()> {
        self.persist_io().with_context(|| format!("writing {}", self.dest.display()))
    }

    fn persist_io(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        use std::os::unix::io::AsRawFd;
        let file = self.file.take().expect("persist once");
        file.sync_data()?;
        if let Ok(m) = std::fs::symlink_metadata(&self.dest) {
            if let Some(what) = protected_as(&m) {
                return Err(std::io::Error::other(format!("that is {what}: iopath never writes over it")));
            }
            // Planted since the check before the run: never replaced, never given our report.
            if let Some(uid) = foreign_owner(&self.dest) {
                return Err(std::io::Error::other(format!(
                    "it belongs to uid {uid}, not to this user: iopath never replaces a file someone else owns"
                )));
            }
            if m.is_file() {
                file.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))?;
            }
        }
        let (from, to) = (cstr(&self.tmp)?, cstr(&self.name)?);
        let fd = self.dir.as_raw_fd();
        // SAFETY: renameat within one folder fd, NUL-terminated names.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        unregister_live(self.slot.take());
        Ok(())
    }

    /// The file, its name removed now: scratch space read back by this process only (the
    /// events a --perfetto trace converts), gone with its last descriptor.
    pub fn into_scratch(mut self) -> std::fs::File {
        let file = self.file.take().expect("a TempFile's file");
        self.unlink();
        file
    }

    fn unlink(&mut self) {
        use std::os::unix::io::AsRawFd;
        if let Ok(c) = cstr(&self.tmp) {
            // SAFETY: unlinkat of our own temporary name in our folder fd.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) };
        }
        unregister_live(self.slot.take());
    }
}

impl std::io::Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file().write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.file.is_some() || self.slot.is_some() {
            self.file = None;
            self.unlink();
        }
    }
}

/// Removes what runs of iopath killed before they could (SIGKILL) left for `name` in `dir`.
fn remove_stale(dir: &std::fs::File, dir_path: &Path, name: &str) {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for e in std::fs::read_dir(dir_path).into_iter().flatten().flatten() {
        let entry = e.file_name();
        let Some(entry) = entry.to_str() else { continue };
        if stale_temp(name, entry).is_none() {
            continue;
        }
        // symlink_metadata: a planted link is seen as a link, never followed.
        let Ok(m) = e.metadata() else { continue };
        if m.file_type().is_file() && m.uid() == me && m.nlink() == 1 {
            if let Ok(c) = std::ffi::CString::new(entry) {
                // SAFETY: unlinkat of a name in our folder fd.
                unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
            }
        }
    }
}

/// Writes a file, naming it in any error; its folder is made when missing (checked by `check`).
/// Written to an exclusive temporary file and renamed (`TempFile`): a full disk or a kill leaves
/// the old file or none, never a partial or empty one, and never writes through a planted link.
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    if is_stream(path) {
        return std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()));
    }
    let mut t = TempFile::create(path)?;
    t.write_all(bytes.as_ref()).map_err(|e| anyhow::anyhow!("writing {}: {}", path.display(), why(&e)))?;
    t.persist().map_err(|e| {
        let io = e.downcast_ref::<std::io::Error>().map(why);
        match io {
            Some(w) => anyhow::anyhow!("writing {}: {w}", path.display()),
            None => e,
        }
    })
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
