//! Configuration capture from /proc and /sys: the kernel, block queues, IOMMU. Roots are
//! injectable so the parsers are tested on captured trees (`tests/data/sysroot`).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where /proc, /sys and /boot are; `SysRoots::live()` outside tests.
#[derive(Clone, Debug)]
pub struct SysRoots {
    pub proc: PathBuf,
    pub sys: PathBuf,
    pub boot: PathBuf,
}

impl SysRoots {
    pub fn live() -> Self {
        SysRoots { proc: "/proc".into(), sys: "/sys".into(), boot: "/boot".into() }
    }

    /// A captured tree with `proc/`, `sys/` and `boot/` below `dir`.
    pub fn under(dir: &Path) -> Self {
        SysRoots { proc: dir.join("proc"), sys: dir.join("sys"), boot: dir.join("boot") }
    }
}

pub fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// The kernel release (`uname -r`).
pub fn kernel_release(roots: &SysRoots) -> String {
    read_trim(&roots.proc.join("sys/kernel/osrelease")).unwrap_or_else(|| "unknown".into())
}

pub fn cmdline(roots: &SysRoots) -> String {
    read_trim(&roots.proc.join("cmdline")).unwrap_or_default()
}

/// One block device's queue settings, as `iopath doctor` and reports show them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct BlockQueue {
    pub name: String,
    /// The active scheduler (the bracketed entry of queue/scheduler).
    pub scheduler: Option<String>,
    pub nr_hw_queues: Option<u32>,
    pub logical_block_size: Option<u32>,
    pub iostats: Option<bool>,
    pub io_poll: Option<bool>,
    pub write_cache: Option<String>,
    pub model: Option<String>,
    pub nr_requests: Option<u32>,
    /// Writeback throttling target latency (0: off).
    pub wbt_lat_usec: Option<String>,
    /// Where completions run: 0 anywhere, 1 the submitting CPU's group, 2 the submitting CPU.
    pub rq_affinity: Option<String>,
    /// 0 merges, 1 simple merges only, 2 none.
    pub nomerges: Option<String>,
    pub read_ahead_kb: Option<u32>,
    /// 512-byte sectors (0: an unattached loop device, an empty drive).
    pub size_sectors: Option<u64>,
}

/// Whole disks under /sys/block (no partitions), sorted by name.
pub fn block_devices(roots: &SysRoots) -> Vec<BlockQueue> {
    let mut names: Vec<String> = fs::read_dir(roots.sys.join("block"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names.iter().map(|n| block_queue(roots, n)).collect()
}

/// Every block device and partition by the kernel's dev_t (major << 20 | minor), from
/// /sys/class/block/*/dev ("MAJ:MIN").
pub fn dev_names(roots: &SysRoots) -> std::collections::BTreeMap<u32, String> {
    let mut out = std::collections::BTreeMap::new();
    for e in fs::read_dir(roots.sys.join("class/block")).into_iter().flatten().flatten() {
        let Some(mm) = read_trim(&e.path().join("dev")) else { continue };
        let Some((ma, mi)) = mm.split_once(':') else { continue };
        let (Ok(ma), Ok(mi)) = (ma.parse::<u32>(), mi.parse::<u32>()) else { continue };
        out.insert((ma << 20) | mi, e.file_name().to_string_lossy().into_owned());
    }
    out
}

pub fn block_queue(roots: &SysRoots, name: &str) -> BlockQueue {
    let dev = roots.sys.join("block").join(name);
    let q = dev.join("queue");
    let flag = |f: &str| read_trim(&q.join(f)).map(|v| v == "1");
    BlockQueue {
        name: name.to_owned(),
        scheduler: read_trim(&q.join("scheduler")).map(|s| active_choice(&s)),
        nr_hw_queues: fs::read_dir(dev.join("mq")).ok().map(|rd| rd.count() as u32),
        logical_block_size: read_trim(&q.join("logical_block_size")).and_then(|v| v.parse().ok()),
        iostats: flag("iostats"),
        io_poll: flag("io_poll"),
        write_cache: read_trim(&q.join("write_cache")),
        model: read_trim(&dev.join("device/model")).filter(|m| !m.is_empty()),
        nr_requests: read_trim(&q.join("nr_requests")).and_then(|v| v.parse().ok()),
        wbt_lat_usec: read_trim(&q.join("wbt_lat_usec")),
        rq_affinity: read_trim(&q.join("rq_affinity")),
        nomerges: read_trim(&q.join("nomerges")),
        read_ahead_kb: read_trim(&q.join("read_ahead_kb")).and_then(|v| v.parse().ok()),
        size_sectors: read_trim(&dev.join("size")).and_then(|v| v.parse().ok()),
    }
}

/// `none [mq-deadline] kyber` -> `mq-deadline`; a file without brackets is its own value.
pub fn active_choice(s: &str) -> String {
    s.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or(s.trim())
        .to_owned()
}

/// The whole disk (`vda`, `nvme0n1`) holding the block device `major:minor`, if it is one.
pub fn disk_of_devnum(roots: &SysRoots, major: u32, minor: u32) -> Option<String> {
    let link = roots.sys.join(format!("dev/block/{major}:{minor}"));
    let real = fs::canonicalize(&link).ok()?;
    // A partition's sysfs directory sits inside its disk's and has a `partition` file.
    let disk = if real.join("partition").exists() { real.parent()?.to_path_buf() } else { real };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

/// Everything outside the job that changes I/O performance, captured with every report so that
/// `iopath compare` can name what differs between two runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Config {
    pub kernel: String,
    pub cmdline: String,
    pub iommu: IommuState,
    /// The disks the I/O went to: the target's, or every attached one when tracing another process.
    pub devices: Vec<BlockQueue>,
    pub nvme_poll_queues: Option<u32>,
    pub cpus: usize,
    pub cpu_model: Option<String>,
    /// cpufreq governor of CPU 0 (None in VMs without cpufreq).
    pub governor: Option<String>,
    /// /sys/devices/system/cpu/vulnerabilities, one "name: status" per entry.
    pub mitigations: Vec<String>,
    /// The traced process's cgroup and the I/O controls on it and its ancestors (None: the
    /// process was gone, or its cgroup could not be read: unknown, not "no limits").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupIo>,
    /// Stacked devices (device-mapper, md) among the disks, with what is underneath.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<StackedDevice>,
    /// /proc/sys/vm's dirty-page limits (dirty_ratio, dirty_bytes, dirty_background_*,
    /// dirty_expire_centisecs, dirty_writeback_centisecs): when writers are throttled and
    /// the flushers start. Empty in reports made before they were captured: unknown.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vm_dirty: std::collections::BTreeMap<String, String>,
    /// The generator's target file's file system (None: a device, a traced command, or an older
    /// report: unknown, never a change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FileSystem>,
}

/// A file system as a report's configuration names it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FileSystem {
    /// ext4, xfs, btrfs ... (/proc/self/mountinfo's type).
    #[serde(rename = "type")]
    pub kind: String,
    /// The mount's options, then the file system's ("rw,relatime - rw,space_cache=v2,subvol=/").
    pub options: Option<String>,
}

/// A process's cgroup as it routes I/O: v1 blkio and v2 io controls, with their values.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CgroupIo {
    /// The blkio (v1) cgroup path, when the blkio hierarchy is mounted.
    pub blkio: Option<String>,
    /// The unified (v2) cgroup path, when cgroup2 is mounted with the io controller.
    pub unified: Option<String>,
    /// Every set control on the cgroup and its ancestors, by file: blkio.throttle.* and weights
    /// (v1), io.max, io.latency, io.weight, io.cost.* (v2); an ancestor's named with its path
    /// ("/a: io.max"). Unset ones (empty, "default") are left out.
    pub limits: std::collections::BTreeMap<String, String>,
}

/// One stacked block device and the devices under it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StackedDevice {
    pub name: String,
    /// "dm" or "md".
    pub kind: String,
    /// device-mapper: its name and the uuid's prefix, which names the owner (LVM-, CRYPT-).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dm_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dm_uuid_prefix: Option<String>,
    /// md: the RAID level (raid0, raid1 ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md_level: Option<String>,
    /// The devices underneath (slaves/), sorted.
    pub lower: Vec<String>,
}

/// Mount points of the cgroup hierarchies: (blkio v1, unified v2).
fn cgroup_mounts(roots: &SysRoots) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v1, mut v2) = (None, None);
    let info = fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
    for line in info.lines() {
        // "36 25 0:31 / /sys/fs/cgroup/blkio rw,... shared:13 - cgroup cgroup rw,blkio"
        let Some((pre, post)) = line.split_once(" - ") else { continue };
        let (Some(mnt), mut post) = (pre.split_whitespace().nth(4), post.split_whitespace()) else { continue };
        let (fstype, opts) = (post.next().unwrap_or(""), post.nth(1).unwrap_or(""));
        let at = roots.sys.join(mnt.trim_start_matches("/sys/"));
        let at = if mnt.starts_with("/sys/") { at } else { PathBuf::from(mnt) };
        if fstype == "cgroup" && opts.split(',').any(|o| o == "blkio") {
            v1 = Some(at);
        } else if fstype == "cgroup2" {
            v2 = Some(at);
        }
    }
    (v1, v2)
}

/// The I/O controls that apply to process `pid` (its cgroup and every ancestor).
pub fn cgroup_io(roots: &SysRoots, pid: u32) -> Option<CgroupIo> {
    let text = fs::read_to_string(roots.proc.join(format!("{pid}/cgroup"))).ok()?;
    let (v1_mnt, v2_mnt) = cgroup_mounts(roots);
    let mut out = CgroupIo::default();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if ctrls.split(',').any(|c| c == "blkio") {
            out.blkio = Some(path.to_owned());
            if let Some(m) = &v1_mnt {
                collect_limits(m, path, V1_FILES, &mut out.limits);
            }
        } else if ctrls.is_empty() {
            if let Some(m) = &v2_mnt {
                let ctl = read_trim(&m.join("cgroup.controllers")).unwrap_or_default();
                if ctl.split_whitespace().any(|c| c == "io") {
                    out.unified = Some(path.to_owned());
                    collect_limits(m, path, V2_FILES, &mut out.limits);
                    // iocost is configured on the root only: named as the root's.
                    for f in ["io.cost.qos", "io.cost.model"] {
                        if let Some(v) = read_trim(&m.join(f)).filter(|v| !v.is_empty()) {
                            out.limits.insert(format!("/: {f}"), v.lines().collect::<Vec<_>>().join("; "));
                        }
                    }
                }
            }
        }
    }
    Some(out)
}

const V1_FILES: &[&str] = &[
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.weight",
    "blkio.bfq.weight",
];
const V2_FILES: &[&str] = &["io.max", "io.latency", "io.weight", "io.bfq.weight"];

/// Set controls of `path` and its ancestors below the mount `mnt`, ancestors named by path.
fn collect_limits(mnt: &Path, path: &str, files: &[&str], out: &mut std::collections::BTreeMap<String, String>) {
    let mut dir = String::from(path);
    loop {
        let d = mnt.join(dir.trim_start_matches('/'));
        for f in files {
            let Some(v) = read_trim(&d.join(f)) else { continue };
            // Defaults say nothing: an empty throttle file, "default 100" weights.
            let set: Vec<&str> =
                v.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("default")).collect();
            if set.is_empty() || (f.ends_with("weight") && set == ["100"]) {
                continue;
            }
            let name = if dir == path { f.to_string() } else { format!("{dir}: {f}") };
            out.insert(name, set.join("; "));
        }
        if dir == "/" || dir.is_empty() {
            break;
        }
        dir = match dir.rfind('/') {
            Some(0) | None => "/".to_owned(),
            Some(i) => dir[..i].to_owned(),
        };
    }
}

/// device-mapper and md devices among `disks` (all disks when empty), with what lies beneath.
pub fn device_stack(roots: &SysRoots, disks: &[String]) -> Vec<StackedDevice> {
    let names: Vec<String> =
        if disks.is_empty() { block_devices(roots).into_iter().map(|b| b.name).collect() } else { disks.to_vec() };
    names
        .into_iter()
        .filter_map(|name| {
            let dev = roots.sys.join("block").join(&name);
            let kind = if dev.join("dm").exists() {
                "dm"
            } else if dev.join("md").exists() {
                "md"
            } else {
                return None;
            };
            let mut lower: Vec<String> = fs::read_dir(dev.join("slaves"))
                .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            lower.sort();
            Some(StackedDevice {
                kind: kind.into(),
                dm_name: read_trim(&dev.join("dm/name")),
                dm_uuid_prefix: read_trim(&dev.join("dm/uuid"))
                    .and_then(|u| u.split_once('-').map(|(p, _)| format!("{p}-")))
                    .filter(|p| p.len() > 1),
                md_level: read_trim(&dev.join("md/level")),
                lower,
                name,
            })
        })
        .collect()
}

/// Whether a file system of type `fs` is mounted (this process's mount namespace).
pub fn mounted(roots: &SysRoots, fs: &str) -> bool {
    fs::read_to_string(roots.proc.join("self/mountinfo"))
        .is_ok_and(|m| m.lines().any(|l| l.split(" - ").nth(1).and_then(|r| r.split(' ').next()) == Some(fs)))
}

/// Captures the configuration for a run on `disks` (empty: every attached disk) by process
/// `pid` (its cgroup's I/O controls).
pub fn capture(roots: &SysRoots, disks: &[String], pid: u32) -> Config {
    let devices = if disks.is_empty() {
        block_devices(roots)
            .into_iter()
            // Unattached loop devices and empty slots have size 0.
            .filter(|b| read_trim(&roots.sys.join("block").join(&b.name).join("size")).is_some_and(|s| s != "0"))
            .collect()
    } else {
        disks.iter().map(|d| block_queue(roots, d)).collect()
    };
    let mut mitigations: Vec<String> = fs::read_dir(roots.sys.join("devices/system/cpu/vulnerabilities"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = read_trim(&e.path())?;
                    Some(format!("{}: {v}", e.file_name().to_string_lossy()))
                })
                .collect()
        })
        .unwrap_or_default();
    mitigations.sort();
    let cpuinfo = fs::read_to_string(roots.proc.join("cpuinfo")).unwrap_or_default();
    Config {
        kernel: kernel_release(roots),
        cmdline: cmdline(roots),
        iommu: iommu_state(roots),
        devices,
        nvme_poll_queues: nvme_poll_queues(roots),
        cpus: cpuinfo.lines().filter(|l| l.starts_with("processor")).count(),
        cpu_model: cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned()),
        governor: read_trim(&roots.sys.join("devices/system/cpu/cpu0/cpufreq/scaling_governor")),
        mitigations,
        cgroup: cgroup_io(roots, pid),
        vm_dirty: [
            "dirty_ratio",
            "dirty_bytes",
            "dirty_background_ratio",
            "dirty_background_bytes",
            "dirty_expire_centisecs",
            "dirty_writeback_centisecs",
        ]
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), read_trim(&roots.proc.join("sys/vm").join(k))?)))
        .collect(),
        stack: device_stack(roots, disks),
        filesystem: None,
    }
}

/// The IOMMU as the kernel set it up: what decides whether every I/O pays a map and an unmap.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IommuState {
    /// Group count per default-domain type (`DMA`, `DMA-FQ`, `identity`, `blocked`).
    pub group_types: Vec<(String, u32)>,
    /// IOMMU-related kernel parameters, verbatim from the command line.
    pub cmdline: Vec<String>,
    /// `CONFIG_IOMMU_DEFAULT_*` and `CONFIG_INTEL_IOMMU_DEFAULT_ON` lines set in the kernel config.
    pub config: Vec<String>,
    /// Where the config came from (`/proc/config.gz`, `/boot/config-…`), if found.
    pub config_source: Option<String>,
    /// One line: "off", "identity (passthrough)", "DMA (strict)", "DMA-FQ (lazy)"…
    pub mode: String,
}

pub fn iommu_state(roots: &SysRoots) -> IommuState {
    let mut types: Vec<(String, u32)> = Vec::new();
    if let Ok(rd) = fs::read_dir(roots.sys.join("kernel/iommu_groups")) {
        for g in rd.filter_map(|e| e.ok()) {
            let t = read_trim(&g.path().join("type")).unwrap_or_else(|| "unknown".into());
            match types.iter_mut().find(|(k, _)| *k == t) {
                Some((_, n)) => *n += 1,
                None => types.push((t, 1)),
            }
        }
    }
    types.sort();
    let cmdline: Vec<String> = cmdline(roots)
        .split_whitespace()
        .filter(|w| {
            ["intel_iommu", "amd_iommu", "iommu.strict", "iommu.passthrough", "iommu=", "iommu.forcedac"]
                .iter()
                .any(|k| w.starts_with(k))
        })
        .map(str::to_owned)
        .collect();
    let (config, config_source) = match kernel_config(roots) {
        Some((text, src)) => (
            text.lines()
                .filter(|l| {
                    (l.starts_with("CONFIG_IOMMU_DEFAULT_") || l.starts_with("CONFIG_INTEL_IOMMU_DEFAULT_ON"))
                        && !l.starts_with('#')
                })
                .map(str::to_owned)
                .collect(),
            Some(src),
        ),
        None => (Vec::new(), None),
    };
    let mode = if types.is_empty() {
        "off (no IOMMU groups: DMA goes untranslated)".to_owned()
    } else {
        types.iter().map(|(t, n)| format!("{t} x{n}")).collect::<Vec<_>>().join(", ")
    };
    IommuState { group_types: types, cmdline, config, config_source, mode }
}

/// The running kernel's config text and where it was found.
pub fn kernel_config(roots: &SysRoots) -> Option<(String, String)> {
    let gz = roots.proc.join("config.gz");
    if let Ok(f) = fs::File::open(&gz) {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f).read_to_string(&mut s).is_ok() {
            return Some((s, "/proc/config.gz".into()));
        }
    }
    let release = kernel_release(roots);
    let boot = roots.boot.join(format!("config-{release}"));
    fs::read_to_string(&boot).ok().map(|s| (s, format!("/boot/config-{release}")))
}

/// nvme's `poll_queues` module parameter: 0 means polled (IOPOLL/HIPRI) I/O cannot work.
pub fn nvme_poll_queues(roots: &SysRoots) -> Option<u32> {
    read_trim(&roots.sys.join("module/nvme/parameters/poll_queues")).and_then(|v| v.parse().ok())
}

/// The interrupt vectors of a disk's device: the MSI/MSI-X IRQs of the nearest PCI ancestor of
/// /sys/block/<disk>/device (or its legacy `irq`). Empty for software devices (loop, zram).
pub fn device_irqs(roots: &SysRoots, disk: &str) -> Vec<u32> {
    let Ok(mut dir) = fs::canonicalize(roots.sys.join("block").join(disk).join("device")) else { return Vec::new() };
    for _ in 0..6 {
        if let Ok(rd) = fs::read_dir(dir.join("msi_irqs")) {
            let mut irqs: Vec<u32> =
                rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
            irqs.sort_unstable();
            return irqs;
        }
        if let Some(irq) = read_trim(&dir.join("irq")).and_then(|v| v.parse::<u32>().ok()).filter(|&i| i > 0) {
            if dir.join("vendor").exists() {
                return vec![irq];
            }
        }
        if !dir.pop() {
            break;
        }
    }
    Vec::new()
}

/// /proc/interrupts: IRQ number -> (count summed over CPUs, handler name).
pub fn interrupts(roots: &SysRoots) -> std::collections::HashMap<u32, (u64, String)> {
    let text = fs::read_to_string(roots.proc.join("interrupts")).unwrap_or_default();
    let mut lines = text.lines();
    let ncpu = lines.next().map_or(0, |h| h.split_whitespace().count());
    let mut out = std::collections::HashMap::new();
    for l in lines {
        let mut it = l.split_whitespace();
        let Some(irq) = it.next().and_then(|f| f.strip_suffix(':')).and_then(|f| f.parse::<u32>().ok()) else {
            continue;
        };
        let fields: Vec<&str> = it.collect();
        let count = fields.iter().take(ncpu).filter_map(|f| f.parse::<u64>().ok()).sum();
        let name = fields.last().map_or("", |v| v).to_string();
        out.insert(irq, (count, name));
    }
    out
}

/// What this process may do with BPF: the one definition `doctor` reports and `trace` checks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Privileges {
    pub root: bool,
    pub cap_sys_admin: bool,
    pub cap_bpf: bool,
    pub cap_perfmon: bool,
}

impl Privileges {
    pub fn of_this_process(roots: &SysRoots) -> Privileges {
        const CAP_SYS_ADMIN: u32 = 21;
        const CAP_PERFMON: u32 = 38;
        const CAP_BPF: u32 = 39;
        let caps = effective_caps(roots);
        let has = |c: u32| caps & (1u64 << c) != 0;
        Privileges {
            // SAFETY: geteuid has no preconditions.
            root: unsafe { libc::geteuid() } == 0,
            cap_sys_admin: has(CAP_SYS_ADMIN),
            cap_bpf: has(CAP_BPF),
            cap_perfmon: has(CAP_PERFMON),
        }
    }

    /// Loading and attaching tracing programs needs CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON.
    pub fn can_trace(&self) -> bool {
        self.cap_sys_admin || (self.cap_bpf && self.cap_perfmon)
    }
}

/// `36:virtio1-req.0` for each IRQ, as /proc/interrupts names its handler.
pub fn irq_names(roots: &SysRoots, irqs: &[u32]) -> Vec<String> {
    let table = interrupts(roots);
    irqs.iter().map(|i| table.get(i).map_or(format!("irq{i}"), |(_, n)| format!("{i}:{n}"))).collect()
}

/// True when /proc/kallsyms shows this process zeros for addresses (kptr_restrict without
/// CAP_SYSLOG): the probes tell routes apart by the kernel's end_io functions' addresses, and
/// with zeros they would follow nothing, silently.
pub fn kallsyms_hidden(roots: &SysRoots) -> bool {
    use std::io::BufRead;
    let Ok(f) = fs::File::open(roots.proc.join("kallsyms")) else { return true };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .take(64)
        .all(|l| l.split_whitespace().next().is_none_or(|a| a.bytes().all(|b| b == b'0')))
}

/// Capability bits from /proc/self/status `CapEff`.
pub fn effective_caps(roots: &SysRoots) -> u64 {
    fs::read_to_string(roots.proc.join("self/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Executable mappings of a process (None once it is gone): what user stack addresses are
/// symbolized against. Anonymous mappings (JIT code, the io_uring rings) are left out on purpose:
/// a stack is cut there.
pub fn exec_mappings(roots: &SysRoots, pid: u32) -> Option<Vec<crate::model::ExecMapping>> {
    let text = fs::read_to_string(roots.proc.join(pid.to_string()).join("maps")).ok()?;
    Some(parse_exec_mappings(&text))
}

/// The executable, file-backed lines of a /proc/PID/maps text.
pub fn parse_exec_mappings(text: &str) -> Vec<crate::model::ExecMapping> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let path = f.nth(2)?;
            // [vdso] is code too (clock_gettime): kept, and named as such.
            if !perms.contains('x') || !(path.starts_with('/') || path == "[vdso]") {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            Some(crate::model::ExecMapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: path.to_owned(),
            })
        })
        .collect()
}

/// The path of the io cgroup whose directory has inode `id` (what BPF reads as kn->id): in the
/// v1 blkio hierarchy when mounted, else the unified one. None when no directory matches.
pub fn cgroup_path_of_id(roots: &SysRoots, id: u64) -> Option<String> {
    io_cgroup_dirs(roots).remove(&id)
}

/// Every io cgroup by its directory's inode (the id BPF reads as kn->id), as its path in the
/// hierarchy ("/" its root): the v1 blkio hierarchy when mounted, else the unified one. One walk;
/// at most 100k directories (a host has a few hundred to a few thousand).
pub fn io_cgroup_dirs(roots: &SysRoots) -> std::collections::HashMap<u64, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::HashMap::new();
    let (v1, v2) = cgroup_mounts(roots);
    let Some(root) = v1.or(v2) else { return out };
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        if out.len() >= 100_000 {
            break;
        }
        let Ok(m) = fs::metadata(&d) else { continue };
        let Ok(rel) = d.strip_prefix(&root) else { continue };
        // A cgroup's name is its creator's choice (tabs, newlines, quotes): made visible here,
        // escaped again by each sink.
        out.insert(m.ino(), crate::untrusted::visible(&format!("/{}", rel.to_string_lossy())).into_owned());
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_choice_reads_brackets() {
        assert_eq!(active_choice("none [mq-deadline] kyber bfq"), "mq-deadline");
        assert_eq!(active_choice("[none] mq-deadline"), "none");
        assert_eq!(active_choice("write back"), "write back");
    }

    #[test]
    fn captured_tree() {
        let roots = SysRoots::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysroot"));
        assert_eq!(kernel_release(&roots), "6.12.9-amd64");
        let devs = block_devices(&roots);
        let nvme = devs.iter().find(|d| d.name == "nvme0n1").expect("nvme0n1 in the capture");
        assert_eq!(nvme.scheduler.as_deref(), Some("none"));
        assert_eq!(nvme.nr_hw_queues, Some(2));
        assert_eq!(nvme.logical_block_size, Some(512));
        assert_eq!(nvme.io_poll, Some(false));
        assert_eq!(nvme.model.as_deref(), Some("QEMU NVMe Ctrl"));
        let iommu = iommu_state(&roots);
        assert_eq!(iommu.group_types, vec![("DMA".to_owned(), 3)]);
        assert_eq!(iommu.cmdline, vec!["intel_iommu=on".to_owned(), "iommu.strict=1".to_owned()]);
        assert_eq!(iommu.config, vec!["CONFIG_IOMMU_DEFAULT_DMA_LAZY=y".to_owned()]);
        assert_eq!(iommu.config_source.as_deref(), Some("/boot/config-6.12.9-amd64"));
        assert_eq!(nvme_poll_queues(&roots), Some(0));
        let irqs = interrupts(&roots);
        assert_eq!(irqs.get(&36), Some(&(1_201_234 + 5_678, "virtio1-req.0".to_owned())));
        assert_eq!(irqs.get(&0).map(|v| v.0), Some(45));
    }

    #[test]
    fn cgroup_io_controls_and_the_device_stack() {
        let roots = SysRoots::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysroot"));
        // v1 blkio: the job's own limit and its parent's, defaults left out.
        let v1 = cgroup_io(&roots, 4242).expect("a cgroup");
        assert_eq!(v1.blkio.as_deref(), Some("/batch/job1"));
        let limits: Vec<(&str, &str)> = v1.limits.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            limits,
            [
                ("/batch: blkio.throttle.write_bps_device", "259:0 52428800"),
                ("blkio.throttle.read_iops_device", "259:0 3000")
            ]
        );
        // v2 (another machine: the io controller sits in one hierarchy only): io.max on the
        // cgroup, iocost on the root; "default 100" weights are no setting.
        let v2 = cgroup_io(
            &SysRoots::under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysroot-cgroup2")),
            4343,
        )
        .expect("a cgroup");
        assert_eq!(v2.unified.as_deref(), Some("/svc/db"));
        assert_eq!(v2.limits["io.max"], "259:0 rbps=max wbps=1048576 riops=max wiops=max");
        assert!(v2.limits["/: io.cost.qos"].starts_with("259:0 enable=1"), "{:?}", v2.limits);
        assert!(!v2.limits.keys().any(|k| k.contains("io.weight")), "{:?}", v2.limits);
        // A process that is gone: unknown, not "no limits".
        assert_eq!(cgroup_io(&roots, 1), None);
        let stack = device_stack(&roots, &[]);
        let dm = stack.iter().find(|d| d.name == "dm-0").expect("dm-0");
        assert_eq!(
            (dm.kind.as_str(), dm.dm_name.as_deref(), dm.dm_uuid_prefix.as_deref()),
            ("dm", Some("vg0-data"), Some("LVM-"))
        );
        assert_eq!(dm.lower, ["nvme0n1"]);
        let md = stack.iter().find(|d| d.name == "md0").expect("md0");
        assert_eq!((md.kind.as_str(), md.md_level.as_deref()), ("md", Some("raid1")));
        assert_eq!(md.lower, ["nvme0n1", "nvme1n1"]);
        assert!(!stack.iter().any(|d| d.name == "nvme0n1"), "a plain disk is no stack");
    }

    #[test]
    fn exec_mappings_keep_code_files_and_vdso() {
        let maps = "\
55d0c0a00000-55d0c0a40000 r--p 00000000 fe:01 123 /usr/bin/fio
55d0c0a40000-55d0c0b00000 r-xp 00040000 fe:01 123 /usr/bin/fio
7f0000000000-7f0000100000 rw-s 00000000 00:0f 9 anon_inode:[io_uring]
7f1000000000-7f1000001000 r-xp 00000000 00:00 0
7ffd1000d000-7ffd1000f000 r-xp 00000000 00:00 0 [vdso]
";
        let m = parse_exec_mappings(maps);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].start, m[0].offset, m[0].path.as_str()), (0x55d0c0a40000, 0x40000, "/usr/bin/fio"));
        assert_eq!(m[1].path, "[vdso]");
    }
}
