//! The target of a job: checks it, creates and lays out files, refuses what would destroy data,
//! and finds what a report must say about it (file system, disk, alignment, tmpfs).

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::pattern;
use crate::job::{fmt_bytes, Job, Target};
use crate::sysconf::{self, SysRoots};

/// `_IOR(0x12, 114, size_t)`: the device's size in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// What the run needs to know about its target, and what the report says about it.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Prepared {
    pub kind: String,
    pub path: PathBuf,
    /// Bytes in use: a whole number of blocks.
    pub size: u64,
    pub fs_type: String,
    /// A file's mount options as /proc/self/mountinfo has them, the mount's own then the file
    /// system's ("rw,relatime - rw,space_cache=v2,subvol=/"): what a report's configuration names
    /// so `compare` can tell a file-system change (None: a device, or an older report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// The whole disk under the target (`vda`, `loop0`), when there is one.
    pub disk: Option<String>,
    /// Offset/length alignment O_DIRECT needs here.
    pub dio_offset_align: u32,
    /// Buffer address alignment O_DIRECT needs here.
    pub dio_mem_align: u32,
    /// True when the bytes live in RAM (tmpfs, or a loop device backed by tmpfs).
    pub in_memory: bool,
    pub warnings: Vec<String>,
}

pub fn prepare(job: &Job) -> Result<Prepared> {
    let t = match &job.target {
        Target::File(p) => prepare_file(job, p),
        Target::Device(p) => prepare_device(job, p),
    }?;
    // No output of this run may replace it, by any name (output::protect).
    crate::output::protect(&t.path, "the job's target");
    Ok(t)
}

/// Opens the target for one worker thread.
pub fn open(job: &Job, t: &Prepared) -> Result<File> {
    let flags = if job.direct { libc::O_DIRECT } else { 0 } | if job.sync { libc::O_SYNC } else { 0 };
    // A file written is opened as prepare_file judged it, never through a link swapped in
    // since (a device's path is often a link: /dev/disk/by-id; a read may follow one).
    let flags = flags | if t.kind == "file" && job.rw.writes() { libc::O_NOFOLLOW } else { 0 };
    // A benchmark's reads should not write atime: on a block device every direct read ends in
    // file_accessed() (touch_atime and current_time show in a perf profile of the RAM loop device).
    // fio opens devices O_NOATIME too. It needs the file's owner or CAP_FOWNER; without, open as is.
    let open = |flags| {
        let mut o = OpenOptions::new();
        o.read(true).write(job.rw.writes()).custom_flags(flags);
        o.open(&t.path)
    };
    let f = match open(flags | libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(flags),
        r => r,
    };
    f.map_err(|e| explain_open(&t.path, job, e))
}

fn explain_open(path: &Path, job: &Job, e: std::io::Error) -> anyhow::Error {
    let how = if job.rw.writes() { "reading and writing" } else { "reading" };
    let writing = job.rw.writes();
    let device = fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
    let fix = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EROFS) if writing && device => {
            " (the device is read-only, or not writable by this user: 'blockdev --getro' says which; \
             'blockdev --setrw' allows writes to a device that is yours)"
        }
        Some(libc::EACCES) if !writing && device => " (reading a raw device needs root, or the disk group)",
        Some(libc::EACCES) if !writing => " (run as root, or pick a file you can read)",
        Some(libc::EPERM) | Some(libc::EROFS) if !writing => " (even a read-only open was refused: check its attributes (lsattr) and the mount options)",
        Some(libc::EACCES) => " (the file is not writable by this user: run as root, or pick a file you own)",
        Some(libc::EPERM) | Some(libc::EROFS) => {
            " (the file is not writable here: check its attributes (lsattr: immutable?) and whether the file system is read-only)"
        }
        Some(libc::EINVAL) if job.direct => " (this file system refuses O_DIRECT: use --direct false)",
        Some(libc::EBUSY) => " (the device is in use: mounted, or held by another driver)",
        _ => "",
    };
    anyhow!("cannot open {} for {how}: {e}{fix}", path.display())
}

/// The extended attribute iopath sets on every file it creates as a target: a later job may
/// write its own file again (and grow it), never one iopath did not create (`--allow-write`
/// names one it may). Only the file's owner or root can set a user.* attribute, and whoever can
/// could write the file anyway: it marks, it does not grant.
const MADE_BY_IOPATH: &str = "user.iopath.target";

/// Whether `path` (never followed if a link) carries the mark.
fn made_by_iopath(path: &Path) -> bool {
    let (Ok(p), Ok(n)) = (CString::new(path.as_os_str().as_encoded_bytes()), CString::new(MADE_BY_IOPATH)) else {
        return false;
    };
    // SAFETY: lgetxattr with a null buffer and size 0 only returns the value's size.
    unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) >= 0 }
}

/// Creates the target exclusively (O_EXCL|O_NOFOLLOW: never through a link planted at its
/// name) and marks it iopath's. False: the mark could not be set (a file system without user
/// extended attributes): this run may lay it out, a later write job needs --allow-write.
fn create_own(path: &Path, job: &Job) -> Result<bool> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| explain_open(path, job, e))?;
    let n = CString::new(MADE_BY_IOPATH)?;
    let v = b"1";
    // SAFETY: fsetxattr on our own descriptor with a 1-byte value.
    Ok(unsafe { libc::fsetxattr(f.as_raw_fd(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) } == 0)
}

/// The loop device whose backing file `m` is, if one is: a job writing it writes under a
/// block device's feet (whatever is on it, a mounted file system included).
fn loop_backed_by(m: &fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    for e in fs::read_dir("/sys/block").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(b) = sysconf::read_trim(&e.path().join("loop/backing_file")) else { continue };
        let b = b.trim_end_matches(" (deleted)");
        if fs::metadata(b).is_ok_and(|x| x.dev() == m.dev() && x.ino() == m.ino()) {
            return Some(name);
        }
    }
    None
}

fn prepare_file(job: &Job, path: &Path) -> Result<Prepared> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!("directory {} does not exist: create it first, or point --file elsewhere", parent.display());
    }
    let link = fs::symlink_metadata(path).ok();
    let meta = fs::metadata(path).ok();
    if let Some(m) = &meta {
        if m.file_type().is_block_device() {
            bail!("{} is a block device: use --device {} instead of --file", path.display(), path.display());
        }
        if !m.is_file() {
            bail!("{} is not a regular file", path.display());
        }
    }
    if link.is_some() && meta.is_none() {
        bail!(
            "{} is a symbolic link to nothing: iopath never creates a file through a link; give the real path",
            path.display()
        );
    }
    let existing = meta.as_ref().map_or(0, |m| m.len());
    let want = job.size.unwrap_or(if existing > 0 { existing } else { crate::job::DEFAULT_SCRATCH_SIZE });
    let size = want - want % job.bs as u64;
    // Whose file it is decides what the job may do to it: iopath writes only files it created
    // (a write job had overwritten a user's file, a loop device's backing file among them, and
    // a read job on a 21-byte file had grown it to 64 KiB and changed its last bytes).
    let own = meta.is_some() && !link.as_ref().is_some_and(|l| l.file_type().is_symlink()) && made_by_iopath(path);
    if let Some(m) = &meta {
        check_may_write(job, path, m, own, existing, size)?;
    }
    if size < job.bs as u64 {
        bail!(
            "{} holds {} bytes, less than one --bs {} block: give --size to grow it",
            path.display(),
            existing,
            fmt_bytes(job.bs as u64)
        );
    }
    if existing < size {
        check_room(parent, size - existing)?;
    }
    let mut t_warn = Vec::new();
    if meta.is_none() && !create_own(path, job)? {
        t_warn.push(format!(
            "{}: this file system keeps no user extended attributes, so iopath cannot mark the file as its own: a \
             later write job on it needs --allow-write",
            path.display()
        ));
    }
    let needs_write = job.rw.writes() || existing < size;
    if needs_write {
        // Fail before a long layout when the file cannot be written at all.
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| explain_open(path, job, e))?;
    }
    if existing < size {
        if let Err(e) = layout(path, existing, size, job.seed) {
            // Leave the file as it was: gone if iopath made it, its old length otherwise.
            if meta.is_none() {
                let _ = fs::remove_file(path);
            } else if let Ok(f) = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(path) {
                let _ = f.set_len(existing);
            }
            return Err(e);
        }
    }

    let (fs_type, dev, mount_options) = mount_of(path)?;
    let disk = dev.and_then(|(maj, min)| sysconf::disk_of_devnum(&SysRoots::live(), maj, min));
    let (mem_align, offset_align) = dio_align(path, disk.as_deref());
    let in_memory = matches!(fs_type.as_str(), "tmpfs" | "ramfs");
    let mut t = Prepared {
        kind: "file".into(),
        path: path.to_path_buf(),
        size,
        fs_type,
        mount_options,
        disk,
        dio_offset_align: offset_align,
        dio_mem_align: mem_align,
        in_memory,
        warnings: t_warn,
    };
    check_common(job, &mut t)?;
    Ok(t)
}

/// An existing file the job would write or grow: never a loop device's backing file, and never
/// one iopath did not create unless --allow-write says its data is the user's to lose.
fn check_may_write(job: &Job, path: &Path, m: &fs::Metadata, own: bool, existing: u64, size: u64) -> Result<()> {
    let grows = existing < size;
    if job.rw.writes() || grows {
        if let Some(dev) = loop_backed_by(m) {
            bail!(
                "refusing to write to {}: it is the backing file of /dev/{dev}, and writing it writes under that \
                 device (a file system on it included); detach it (losetup -d /dev/{dev}) or use another file",
                path.display()
            );
        }
    }
    if !own && !job.allow_write {
        if job.rw.writes() {
            bail!(
                "refusing to write to {}: it exists and iopath did not create it (a --rw {} job would overwrite \
                 it). Give a new file name (iopath creates and lays it out), or add --allow-write if its data is \
                 yours to lose",
                path.display(),
                job.rw
            );
        }
        if grows && existing < job.bs as u64 {
            bail!(
                "{} holds {existing} bytes, less than one --bs {} block, and iopath never grows or changes a file \
                 it did not create: give a new file name (iopath creates and lays it out), or --allow-write to \
                 grow this one",
                path.display(),
                fmt_bytes(job.bs as u64)
            );
        }
        if grows {
            bail!(
                "{} holds {} and the job needs {} (--size): iopath never grows or changes a file it did not \
                 create. Give --size {} or less to read within it, a new file name, or --allow-write",
                path.display(),
                fmt_bytes(existing),
                fmt_bytes(size),
                fmt_bytes(existing - existing % job.bs as u64)
            );
        }
    }
    Ok(())
}

fn prepare_device(job: &Job, path: &Path) -> Result<Prepared> {
    let meta = fs::metadata(path).with_context(|| format!("cannot use --device {}", path.display()))?;
    if !meta.file_type().is_block_device() {
        bail!("{} is not a block device: use --file for regular files", path.display());
    }
    let rdev = std::os::unix::fs::MetadataExt::rdev(&meta);
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let roots = SysRoots::live();
    let name = fs::canonicalize(format!("/sys/dev/block/{maj}:{min}"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let disk = sysconf::disk_of_devnum(&roots, maj, min);

    if job.rw.writes() {
        // A read-only block device (losetup -r, blockdev --setro, a write-protected disk) opens
        // O_RDWR fine and fails every write with EPERM: say it before the run.
        if fs::read_to_string(format!("/sys/class/block/{name}/ro")).is_ok_and(|s| s.trim() == "1") {
            bail!(
                "{} is read-only (/sys/class/block/{name}/ro = 1): --rw {} cannot write to it; use a read workload, or make it writable (blockdev --setrw {}) if it is yours",
                path.display(),
                job.rw,
                path.display()
            );
        }
        if let Some(m) = mounted_on(maj, min, &name) {
            bail!(
                "refusing to write to {}: it is mounted ({m}). Writing would corrupt that file system; unmount it or test on a loop device you create",
                path.display()
            );
        }
        let holders = fs::read_dir(format!("/sys/class/block/{name}/holders")).map(|d| d.count()).unwrap_or(0);
        if holders > 0 {
            bail!("refusing to write to {}: it is held by {holders} other device(s) (LVM, md, dm…)", path.display());
        }
        // O_EXCL on a block device fails with EBUSY when anything has it claimed (a mount, md, dm).
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_EXCL)
            .open(path)
            .map_err(|e| explain_open(path, job, e))?;
    }

    let f = File::open(path).map_err(|e| explain_open(path, job, e))?;
    let mut bytes: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which outlives the call.
    if unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut bytes as *mut u64) } != 0 {
        bail!("cannot read the size of {}: {}", path.display(), std::io::Error::last_os_error());
    }
    let want = job.size.unwrap_or(bytes);
    if want > bytes {
        bail!("--size {} is larger than {} ({})", fmt_bytes(want), path.display(), fmt_bytes(bytes));
    }
    let size = want - want % job.bs as u64;
    if size < job.bs as u64 {
        bail!("{} is smaller than one --bs {} block", path.display(), fmt_bytes(job.bs as u64));
    }
    let lbs = sysconf::block_queue(&roots, disk.as_deref().unwrap_or(&name)).logical_block_size.unwrap_or(512);
    let backing =
        fs::read_to_string(format!("/sys/class/block/{name}/loop/backing_file")).ok().map(|s| s.trim().to_owned());
    let in_memory = backing
        .as_deref()
        .and_then(|b| mount_of(Path::new(b)).ok())
        .is_some_and(|(fs, _, _)| fs == "tmpfs" || fs == "ramfs")
        || name.starts_with("zram")
        || name.starts_with("ram");
    let mut t = Prepared {
        kind: "device".into(),
        path: path.to_path_buf(),
        size,
        fs_type: "block device".into(),
        mount_options: None,
        disk: disk.or(Some(name)),
        dio_offset_align: lbs,
        dio_mem_align: lbs,
        in_memory,
        warnings: Vec::new(),
    };
    if !job.rw.writes() {
        if let Some(m) = mounted_on(maj, min, t.disk.as_deref().unwrap_or("")) {
            t.warnings.push(format!(
                "{} is mounted ({m}): reads are safe, but the file system's own I/O shares the device",
                path.display()
            ));
        }
    }
    check_common(job, &mut t)?;
    Ok(t)
}

/// Checks and warnings that apply to files and devices alike.
fn check_common(job: &Job, t: &mut Prepared) -> Result<()> {
    if job.direct {
        if t.dio_offset_align == 0 {
            bail!(
                "{} ({}) does not support O_DIRECT: use --direct false (and expect the page cache in the numbers)",
                t.path.display(),
                t.fs_type
            );
        }
        if job.bs % t.dio_offset_align != 0 {
            bail!(
                "--bs {} is not a multiple of {}'s logical block size ({} bytes), which O_DIRECT requires: use --bs {}",
                job.bs,
                t.path.display(),
                t.dio_offset_align,
                fmt_bytes(t.dio_offset_align.max(4096) as u64)
            );
        }
        if t.in_memory {
            t.warnings.push(format!(
                "{} lives in RAM ({}): O_DIRECT here measures memory copies and the CPU, not a disk",
                t.path.display(),
                if t.kind == "file" { t.fs_type.clone() } else { "a RAM-backed device".to_owned() }
            ));
        }
    } else if job.rw.reads() {
        if let Some(avail) = mem_available() {
            if t.size <= avail {
                t.warnings.push(format!(
                    "buffered reads of {} fit in free page cache ({} available): after the first pass this measures memory, not the device; use --direct (the default) to measure the device",
                    fmt_bytes(t.size),
                    fmt_bytes(avail - avail % (1 << 20))
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a layout that would fill the file system: it must leave 5% of it (at most 1 GiB) to
/// everything else. A full root file system breaks more than the benchmark.
fn check_room(dir: &Path, need: u64) -> Result<()> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())?;
    // SAFETY: statvfs fills the struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Ok(()); // No answer: the write itself will say ENOSPC.
    }
    let unit = st.f_frsize as u64;
    let (free, total) = (st.f_bavail as u64 * unit, st.f_blocks as u64 * unit);
    let keep = (total / 20).min(1 << 30);
    if need.saturating_add(keep) > free {
        bail!(
            "laying out the target needs {} but the file system holding {} has {} free (iopath leaves {} of it to \
             everything else): use a smaller --size, or point --file at a file system with room",
            human(need),
            dir.display(),
            human(free),
            human(keep)
        );
    }
    Ok(())
}

/// 1.0 GiB, 77.7 MiB: a space for a reader (fmt_bytes is exact, for sizes a user typed).
fn human(b: u64) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    match units.iter().find(|&&(_, u)| b >= u) {
        Some(&(name, u)) => format!("{:.1} {name}", b as f64 / u as f64),
        None => format!("{b} bytes"),
    }
}

/// Writes the (seed, offset) pattern into `[from, to)` and pushes it out of the page cache, so
/// that reads hit real, allocated blocks (reading holes or unwritten extents costs no device I/O).
fn layout(path: &Path, from: u64, to: u64, seed: u64) -> Result<()> {
    let from = from - from % 8;
    eprintln!("iopath: laying out {} ({} to write)…", path.display(), fmt_bytes(to - from));
    // The file exists by now (made by create_own, or a file the job may grow): never created
    // here, never through a link.
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("opening {} to lay it out", path.display()))?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(from))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = from;
    while off < to {
        if crate::stop::requested() {
            bail!("interrupted while laying out {}: the file is left as it was", path.display());
        }
        let n = ((to - off) as usize).min(buf.len());
        pattern::fill(&mut buf[..n], seed, off);
        f.write_all(&buf[..n]).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOSPC) {
                ": the file system is full, use a smaller --size"
            } else {
                ""
            };
            anyhow!("laying out {}: {e}{hint}", path.display())
        })?;
        off += n as u64;
    }
    f.sync_data().with_context(|| format!("syncing {}", path.display()))?;
    // SAFETY: plain advisory call on an fd we own.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(())
}

/// The file system a file is on, or would be on once created (its nearest existing directory's);
/// None for a block device or where nothing of the path exists.
pub fn fs_type_at(path: &Path) -> Option<String> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let m = fs::metadata(existing).ok()?;
    if std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
        return None;
    }
    mount_of(existing).ok().map(|(t, _, _)| t).filter(|t| t != "unknown")
}

/// A file system type, the device number under it (block-backed ones), its mount options.
type MountOf = (String, Option<(u32, u32)>, Option<String>);

/// The file system type, (for block-backed ones) the device number holding `path`, and its mount
/// options ("<mount options> - <super options>", as in /proc/self/mountinfo).
fn mount_of(path: &Path) -> Result<MountOf> {
    let real = fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    let info = fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let mut best: Option<(usize, String, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|&x| x == "-") else {
            continue;
        };
        let mnt = unescape_mount(f.get(4).copied().unwrap_or(""));
        if (real.starts_with(&mnt)) && best.as_ref().is_none_or(|(l, _, _)| mnt.len() >= *l) {
            // A subvolume's name is one iopath did not write: made visible here, where it is
            // captured, as every such name (untrusted.rs).
            let opts = crate::untrusted::visible(&format!(
                "{} - {}",
                f.get(5).copied().unwrap_or("?"),
                f.get(sep + 3).copied().unwrap_or("?")
            ))
            .into_owned();
            best = Some((mnt.len(), f.get(sep + 1).copied().unwrap_or("?").to_owned(), opts));
        }
    }
    let (fs_type, mount) = best.map_or_else(|| ("unknown".into(), None), |(_, t, o)| (t, Some(o)));
    let st = fs::metadata(&real)?;
    let dev = std::os::unix::fs::MetadataExt::dev(&st);
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    Ok((fs_type, (maj != 0).then_some((maj, min)), mount))
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// Where device `maj:min` (or one of its partitions) is mounted, if anywhere.
fn mounted_on(maj: u32, min: u32, disk: &str) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut devs = vec![format!("{maj}:{min}")];
    // Partitions of a whole disk count too.
    if let Ok(rd) = fs::read_dir(format!("/sys/class/block/{disk}")) {
        for e in rd.filter_map(|e| e.ok()) {
            if let Some(d) = sysconf::read_trim(&e.path().join("dev")) {
                if e.path().join("partition").exists() {
                    devs.push(d);
                }
            }
        }
    }
    info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        devs.iter().any(|d| f.get(2) == Some(&d.as_str())).then(|| format!("at {}", f.get(4).unwrap_or(&"?")))
    })
}

/// (memory alignment, offset alignment) for O_DIRECT: statx's STATX_DIOALIGN where the file system
/// reports it (Linux 6.1+), else the disk's logical block size; 0 when O_DIRECT is unsupported.
fn dio_align(path: &Path, disk: Option<&str>) -> (u32, u32) {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: statx fills the zeroed struct we pass; the path is NUL-terminated.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut stx) };
    if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 {
        return (stx.stx_dio_mem_align, stx.stx_dio_offset_align);
    }
    let lbs = disk.and_then(|d| sysconf::block_queue(&SysRoots::live(), d).logical_block_size).unwrap_or(512);
    (lbs, lbs)
}

fn mem_available() -> Option<u64> {
    let s = fs::read_to_string("/proc/meminfo").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}
