//! Reads a `Snapshot` from the running probes (the `top` map, the lost-event counters) and from
//! /proc and /sys (who each process is, its context switches, each disk's interrupts), and keeps
//! the kernel's table bounded: the rows of processes that exited are read one last time, then
//! deleted (their counts live on in the exporter's cumulative series).

use std::collections::{BTreeMap, HashMap};

use crate::model::Counter;
use crate::probe::live::LiveMaps;
use crate::sysconf::{self, SysRoots};

use super::counts::{Counts, Key, KEY_BYTES};

// The kernel's key is what Key::to_bytes writes.
const _: () = assert!(std::mem::size_of::<crate::probe::phases_skel::types::top_key>() == KEY_BYTES);
use super::table::{Proc, Snapshot};

/// The counters a top shows as "not counted", with the reason it prints. Bios of no
/// application I/O (a flusher's writeback, a journal commit) are not among them: they are not
/// an application's I/O lost, and top does not claim to show them.
const LOST: &[(Counter, &str)] = &[
    (Counter::TopFull, "top table full"),
    (Counter::InflightFull, "in-flight table full"),
    (Counter::ExpiredDone, "expired (never closed)"),
    (Counter::Disordered, "out of order"),
    (Counter::Unlinked, "no request linked"),
    (Counter::ReapOverflow, "reap overflow"),
];
/// ... each with the hook that counts it: without that hook attached (always-on leaves them
/// out: they fire for every device's DMA, the network's too) the count is unknown, not 0.
const KERNEL: &[(Counter, &str, &str)] = &[
    (Counter::IommuMap, "iommu_map", crate::hook_names::IOMMU_MAP),
    (Counter::IommuUnmap, "iommu_unmap", crate::hook_names::IOMMU_UNMAP),
    (Counter::DmaMap, "dma_map", crate::hook_names::DMA_MAP),
    (Counter::DmaUnmap, "dma_unmap", crate::hook_names::DMA_UNMAP),
];

pub struct Reader {
    maps: LiveMaps,
    roots: SysRoots,
    ncpu: usize,
    buf: Vec<u8>,
    /// Who each process is, read when first seen (a process's name and cgroup rarely change,
    /// and it may be gone by the next read).
    known: HashMap<u32, (String, String, Option<super::k8s::Container>)>,
    /// kubelet's pod folders (/var/log/pods) and the pod names read from them.
    pods_root: std::path::PathBuf,
    pod_names: BTreeMap<String, (String, String)>,
    /// dev_t -> name and the disk's interrupt vectors, read at start and on an unknown dev_t.
    devs: BTreeMap<u32, String>,
    vectors: BTreeMap<u32, Vec<u32>>,
    /// Kernel rows deleted so far (exited processes).
    pub evicted: u64,
    /// The io hierarchy's directories by inode (Key::cgroup), and the read that last walked it.
    cgroup_paths: HashMap<u64, String>,
    cgroup_walk: Option<u64>,
    /// Frees per-I/O slots of I/Os that never closed (the session runs for hours).
    expiry: Option<crate::probe::expire::Expiry>,
    reads: u64,
}

/// How top names the process of bios kernel threads queued (tgid 0).
pub const KERNEL_THREADS: &str = "[kernel]";
/// Reads between two walks of the io cgroup hierarchy for an id not known yet.
const WALK_EVERY: u64 = 5;

/// An I/O in flight longer than this never closes: its slot is freed (a throttled or hung
/// I/O can take tens of seconds: NVMe's own timeout is 30 s).
pub const EXPIRE_AFTER: std::time::Duration = std::time::Duration::from_secs(120);
/// Sweeping the two 64Ki-slot tables: every this many refreshes.
const SWEEP_EVERY: u64 = 10;

/// Voluntary + involuntary switches of every thread of `tgid` (None: gone).
fn ctx_switches(roots: &SysRoots, tgid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(roots.proc.join(format!("{tgid}/task"))).ok()?;
    let mut n = 0;
    for t in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("status")) else { continue };
        for l in text.lines() {
            if let Some(v) =
                l.strip_prefix("voluntary_ctxt_switches:").or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                n += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some(n)
}

/// The process's I/O cgroup: blkio (v1) where mounted, else the unified hierarchy's path.
fn io_cgroup(roots: &SysRoots, tgid: u32) -> Option<String> {
    let c = sysconf::cgroup_io(roots, tgid)?;
    let unified = std::fs::read_to_string(roots.proc.join(format!("{tgid}/cgroup")))
        .ok()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("0::").map(str::to_owned)));
    c.blkio.or(c.unified).or(unified).map(|p| crate::untrusted::visible(&p).into_owned())
}

/// Its comm as the kernel has it (only the trailing newline is /proc's), made visible: a comm is
/// anyone's choice (prctl PR_SET_NAME), escape sequences and newlines included.
fn comm(roots: &SysRoots, tgid: u32) -> Option<String> {
    std::fs::read_to_string(roots.proc.join(format!("{tgid}/comm")))
        .ok()
        .map(|s| crate::untrusted::visible(s.strip_suffix('\n').unwrap_or(&s)).into_owned())
}

impl Reader {
    pub fn new(maps: LiveMaps, pods_root: std::path::PathBuf) -> anyhow::Result<Reader> {
        // The one-hook tier keeps no per-I/O slot: nothing to expire.
        let expiry = if maps.ios >= 0 {
            Some(crate::probe::expire::Expiry::new([maps.ios, maps.ios_held], [maps.links, maps.links_held])?)
        } else {
            None
        };
        let mut r = Reader {
            expiry,
            reads: 0,
            maps,
            roots: SysRoots::live(),
            ncpu: libbpf_rs::num_possible_cpus()?,
            buf: Vec::new(),
            known: HashMap::new(),
            cgroup_paths: HashMap::new(),
            cgroup_walk: None,
            pod_names: super::k8s::pod_names(&pods_root),
            pods_root,
            devs: BTreeMap::new(),
            vectors: BTreeMap::new(),
            evicted: 0,
        };
        r.read_devs();
        Ok(r)
    }

    /// Every block device and partition by dev_t, and the interrupt vectors of each (a
    /// partition's are its disk's).
    fn read_devs(&mut self) {
        self.devs = sysconf::dev_names(&self.roots);
        self.vectors.clear();
        for (dev, name) in &self.devs {
            let path = self.roots.sys.join("class/block").join(name);
            let disk = std::fs::canonicalize(&path)
                .ok()
                .and_then(|p| {
                    let parent = p.parent()?;
                    parent.join("dev").exists().then(|| parent.file_name()?.to_str().map(str::to_owned)).flatten()
                })
                .unwrap_or_else(|| name.clone());
            let irqs = sysconf::device_irqs(&self.roots, &disk);
            if !irqs.is_empty() {
                self.vectors.insert(*dev, irqs);
            }
        }
    }

    fn counter(&mut self, c: Counter) -> u64 {
        let fds = [self.maps.phase_counters, self.maps.count_counters];
        fds.into_iter()
            .filter(|fd| *fd >= 0)
            .map(|fd| crate::probe::series::percpu_u64(fd, c as u32, self.ncpu, &mut self.buf))
            .sum()
    }

    /// Every row of the kernel's table, by key.
    fn rows(&mut self) -> BTreeMap<Key, Counts> {
        let fd = self.maps.top;
        let mut out = BTreeMap::new();
        let mut key = [0u8; KEY_BYTES];
        let mut next = [0u8; KEY_BYTES];
        let one_hook = self.maps.stamps_counters >= 0;
        let mut value = if one_hook {
            // Per CPU: struct stamps_val, a multiple of 8 bytes.
            vec![0u8; 8 * (4 + 2 * super::counts::TOP_SLOTS) * self.ncpu]
        } else {
            vec![0u8; 8 * (2 + super::counts::TOP_PHASES * (1 + super::counts::TOP_SLOTS))]
        };
        let mut first = true;
        // Bounded: a key deleted under the walk restarts it from the first key (the kernel's
        // get_next_key), which must not loop for ever; the table holds 1024 keys.
        for _ in 0..4 * 1024 {
            // SAFETY: key buffers of the map's key size (struct top_key, KEY_BYTES); a null key
            // starts the walk.
            let rc = unsafe {
                libbpf_rs::libbpf_sys::bpf_map_get_next_key(
                    fd,
                    if first { std::ptr::null() } else { key.as_ptr().cast() },
                    next.as_mut_ptr().cast(),
                )
            };
            if rc != 0 {
                break;
            }
            first = false;
            key = next;
            // SAFETY: the value buffer is the map's value size (struct top_val).
            let rc = unsafe {
                libbpf_rs::libbpf_sys::bpf_map_lookup_elem(fd, key.as_ptr().cast(), value.as_mut_ptr().cast())
            };
            if rc != 0 {
                continue;
            }
            let k = Key::from_bytes(&key);
            let c = if one_hook { Counts::from_stamps_percpu(&value, self.ncpu) } else { Counts::from_bytes(&value) };
            if let Some(c) = c {
                out.insert(k, c);
            }
        }
        if self.maps.stamp_rows >= 0 {
            self.stamp_rows(&mut out);
        }
        out
    }

    /// The one-hook tier's row slots, added to the rows of its spill-over hash.
    fn stamp_rows(&mut self, out: &mut BTreeMap<Key, Counts>) {
        let per = super::counts::KEY_BYTES + super::counts::STAMPS_VAL_BYTES;
        let mut value = vec![0u8; per * self.ncpu];
        for i in 0..super::counts::STAMP_ROWS {
            // SAFETY: a u32 key and a value buffer of the map's per-CPU value size times the
            // possible CPUs (struct stamps_row, a multiple of 8 bytes).
            let rc = unsafe {
                libbpf_rs::libbpf_sys::bpf_map_lookup_elem(
                    self.maps.stamp_rows,
                    (&i as *const u32).cast(),
                    value.as_mut_ptr().cast(),
                )
            };
            if rc != 0 {
                continue;
            }
            for (k, c) in Counts::from_stamp_row_percpu(&value, self.ncpu) {
                out.entry(k).or_default().add(&c);
            }
        }
    }

    fn delete(&mut self, k: &Key) {
        let key = k.to_bytes();
        // SAFETY: a key of the map's key size.
        if unsafe { libbpf_rs::libbpf_sys::bpf_map_delete_elem(self.maps.top, key.as_ptr().cast()) } == 0 {
            self.evicted += 1;
        }
    }

    /// The io cgroups the rows' bios named. The hierarchy is walked again for an id not known
    /// yet (a new container), at most once every WALK_EVERY reads (an id still unknown after
    /// that is a cgroup removed since: its rows fall back to their process's cgroup).
    fn cgroups(&mut self, rows: &BTreeMap<Key, Counts>) -> BTreeMap<u64, super::table::Cgroup> {
        let ids: std::collections::BTreeSet<u64> = rows.keys().map(|k| k.cgroup).filter(|&c| c != 0).collect();
        if ids.iter().any(|i| !self.cgroup_paths.contains_key(i))
            && self.cgroup_walk.is_none_or(|at| self.reads >= at + WALK_EVERY)
        {
            self.cgroup_paths = sysconf::io_cgroup_dirs(&self.roots);
            self.cgroup_walk = Some(self.reads);
        }
        let mut out = BTreeMap::new();
        for id in ids {
            let Some(path) = self.cgroup_paths.get(&id) else { continue };
            let mut container = super::k8s::container(path, &self.pod_names);
            if container.as_ref().is_some_and(|c| c.pod_uid.is_some() && c.pod.is_none()) {
                self.pod_names = super::k8s::pod_names(&self.pods_root);
                container = super::k8s::container(path, &self.pod_names);
            }
            out.insert(id, super::table::Cgroup { path: path.clone(), container });
        }
        out
    }

    /// One read. Rows of processes gone are in it for their last time, and deleted from the
    /// kernel's table (`forget` then drops them from the previous snapshot's baseline).
    pub fn read(&mut self) -> Snapshot {
        let t_ns = crate::loadgen::now_ns();
        let rows = self.rows();
        if rows.keys().any(|k| !self.devs.contains_key(&k.dev)) {
            self.read_devs();
        }
        let mut procs = BTreeMap::new();
        let mut gone = Vec::new();
        for k in rows.keys() {
            if procs.contains_key(&k.tgid) {
                continue;
            }
            if k.tgid == 0 {
                // Bios kernel threads queued: charged to the cgroups they name, no process.
                procs.insert(0, Proc { comm: KERNEL_THREADS.into(), cgroup: "?".into(), ctx: None, container: None });
                continue;
            }
            if k.tgid == super::counts::NO_PROCESS {
                // The one-hook tier: completion names no process (--phases does).
                let comm = super::counts::NO_PROCESS_COMM.into();
                procs.insert(k.tgid, Proc { comm, cgroup: "?".into(), ctx: None, container: None });
                continue;
            }
            let alive = self.roots.proc.join(k.tgid.to_string()).exists();
            if !alive {
                gone.push(k.tgid);
            }
            let (c, cg, container) = match self.known.get_mut(&k.tgid) {
                // Its name again at every read: a process that execs (the `sh` that starts a
                // traced command behind its gate, a launcher) is named for what it runs now.
                Some(x) => {
                    if let Some(c) = comm(&self.roots, k.tgid) {
                        x.0 = c;
                    }
                    x.clone()
                }
                None => {
                    let cg = io_cgroup(&self.roots, k.tgid).unwrap_or_else(|| "?".into());
                    // A pod not named yet: kubelet made its folder since the last look.
                    let mut container = super::k8s::container(&cg, &self.pod_names);
                    if container.as_ref().is_some_and(|c| c.pod_uid.is_some() && c.pod.is_none()) {
                        self.pod_names = super::k8s::pod_names(&self.pods_root);
                        container = super::k8s::container(&cg, &self.pod_names);
                    }
                    let x = (comm(&self.roots, k.tgid).unwrap_or_else(|| "?".into()), cg, container);
                    if alive {
                        self.known.insert(k.tgid, x.clone());
                    }
                    x
                }
            };
            procs.insert(k.tgid, Proc { comm: c, cgroup: cg, ctx: ctx_switches(&self.roots, k.tgid), container });
        }
        let cgroups = self.cgroups(&rows);
        let ints = sysconf::interrupts(&self.roots);
        let irqs = self
            .vectors
            .iter()
            .map(|(dev, v)| (*dev, v.iter().filter_map(|i| ints.get(i)).map(|(n, _)| n).sum::<u64>()))
            .collect();
        let mut lost: BTreeMap<String, u64> = if self.maps.stamps_counters >= 0 {
            crate::probe::stamps::COUNTERS
                .iter()
                .map(|(c, why)| {
                    (
                        why.to_string(),
                        crate::probe::series::percpu_u64(self.maps.stamps_counters, *c, self.ncpu, &mut self.buf),
                    )
                })
                .collect()
        } else {
            LOST.iter().map(|(c, why)| (why.to_string(), self.counter(*c))).collect()
        };
        self.reads += 1;
        if let Some(e) = self.expiry.as_mut() {
            if self.reads % SWEEP_EVERY == 0 {
                e.sweep(t_ns, EXPIRE_AFTER);
            }
            lost.insert("expired in flight".into(), e.expired_ios);
        }
        let counted: Vec<(Counter, &str)> = KERNEL
            .iter()
            .filter(|(_, _, hook)| self.maps.hooks.iter().any(|(h, on, _)| h == hook && *on))
            .map(|(c, what, _)| (*c, *what))
            .collect();
        let kernel = counted.into_iter().map(|(c, what)| (what.to_string(), self.counter(c))).collect();
        for t in gone {
            self.known.remove(&t);
            for k in rows.keys().filter(|k| k.tgid == t).copied().collect::<Vec<_>>() {
                self.delete(&k);
            }
        }
        let infos: Vec<(String, libbpf_rs::libbpf_sys::bpf_prog_info)> = self
            .maps
            .progs
            .iter()
            .filter_map(|(hook, fd)| Some((hook.clone(), crate::probe::live::prog_info(*fd)?)))
            .collect();
        // A run the kernel skipped because another run of the same program was active on that
        // CPU (a completion interrupting one): its event never reached BPF, an I/O it would
        // have opened or closed is then counted elsewhere ("expired ...") or not at all.
        lost.insert("recursion misses".into(), infos.iter().map(|(_, i)| i.recursion_misses).sum());
        let bpf = infos.into_iter().map(|(hook, i)| (hook, (i.run_cnt, i.run_time_ns))).collect();
        Snapshot { t_ns, rows, procs, irqs, devs: self.devs.clone(), lost, kernel, bpf, cgroups, stamps: None }
    }
}

/// After a read: rows deleted from the kernel start again from zero, so the baseline for the
/// next frame drops them (a process id reused later counts afresh).
pub fn forget_gone(s: &mut Snapshot) {
    let gone: Vec<u32> = s
        .procs
        .iter()
        .filter(|(t, p)| **t != 0 && **t != super::counts::NO_PROCESS && p.ctx.is_none())
        .map(|(t, _)| *t)
        .collect();
    s.rows.retain(|k, _| !gone.contains(&k.tgid));
}
