//! What a kernel offers iopath, as plain data: its tracepoints, the kernel symbols and BTF members
//! the probes read, the BPF map types, helpers and attach kinds it takes. Gathered once from the
//! running kernel (tracefs, /proc/kallsyms, /sys/kernel/btf, and tiny programs loaded for real),
//! or read back from a recording (`iopath doctor --facts`; tests/data/kernels/<version>.json holds
//! one per kernel of the VM rig's matrix), so `hooks::plan` is tested on every kernel without
//! booting one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::hooks;
use super::hooks::AttachKind;

/// The facts of one kernel. Absent means absent: a fact that could not be looked at (no root, no
/// tracefs) is said in `unseen`, and the plan then treats it as missing.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelFacts {
    pub schema: String,
    pub release: String,
    /// `group:name` of every tracepoint of the groups iopath uses.
    pub tracepoints: BTreeSet<String>,
    /// Kernel functions of `hooks::symbols()` found in /proc/kallsyms with an address.
    pub symbols: BTreeSet<String>,
    /// `struct.member` (members inside anonymous unions count as the struct's) and `struct`
    /// entries of `hooks::BTF_FACTS` present in vmlinux BTF.
    pub btf: BTreeSet<String>,
    /// Kernel modules carry BTF of their own (/sys/kernel/btf/<module>): the nvme tp_btf programs
    /// need it.
    pub module_btf: bool,
    /// BPF features (the `hooks::BPF_*` names) this kernel's verifier takes (helpers, map types,
    /// instructions), each tried for real.
    pub bpf: BTreeSet<String>,
    /// Each attach kind: None when a program of that kind loaded and attached, else the error.
    pub attach: BTreeMap<String, Option<String>>,
    /// What could not be looked at, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
}

pub const SCHEMA: &str = "iopath.kernel-facts/1";

impl KernelFacts {
    pub fn has_tracepoint(&self, group: &str, name: &str) -> bool {
        self.tracepoints.contains(&format!("{group}:{name}"))
    }

    pub fn attach_ok(&self, kind: AttachKind) -> bool {
        matches!(self.attach.get(kind.name()), Some(None))
    }

    /// Why programs of `kind` do not work here (None: they do).
    pub fn attach_error(&self, kind: AttachKind) -> Option<String> {
        match self.attach.get(kind.name()) {
            Some(None) => None,
            Some(Some(e)) => Some(e.clone()),
            None => Some("not tried".into()),
        }
    }

    /// A recording (tests/data/kernels/*.json, `iopath doctor --facts`).
    pub fn read(path: &Path) -> Result<KernelFacts> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let f: KernelFacts =
            serde_json::from_str(&text).with_context(|| format!("{}: not kernel facts", path.display()))?;
        anyhow::ensure!(f.schema == SCHEMA, "{}: schema '{}', expected {SCHEMA}", path.display(), f.schema);
        Ok(f)
    }

    /// The running kernel's facts. `privileged`: may load programs and read kallsyms.
    pub fn gather(privileged: bool) -> KernelFacts {
        let tfs = super::tracefs::Tracefs::ensure();
        let mut f = KernelFacts::gather_with(tfs.as_ref().ok(), privileged);
        if let Err(e) = tfs {
            f.unseen.push(format!("tracepoints: {e:#}"));
        }
        f
    }

    /// As `gather`, with tracefs already found (None: not readable; no tracepoints then).
    pub fn gather_with(tfs: Option<&super::tracefs::Tracefs>, privileged: bool) -> KernelFacts {
        let mut f = KernelFacts {
            schema: SCHEMA.into(),
            release: crate::sysconf::kernel_release(&crate::sysconf::SysRoots::live()),
            ..Default::default()
        };
        if let Some(t) = tfs {
            for group in hooks::tracepoint_groups() {
                let Ok(dir) = std::fs::read_dir(t.path.join("events").join(group)) else { continue };
                for e in dir.flatten().filter(|e| e.path().is_dir()) {
                    f.tracepoints.insert(format!("{group}:{}", e.file_name().to_string_lossy()));
                }
            }
        }
        let syms = super::kallsyms::lookup(&hooks::symbols());
        f.symbols = syms.iter().filter(|(_, &a)| a != 0).map(|(n, _)| n.clone()).collect();
        if !privileged {
            f.unseen.push("symbols: /proc/kallsyms shows addresses to root only".into());
        }
        match libbpf_rs::btf::Btf::from_vmlinux() {
            Ok(btf) => {
                for fact in hooks::BTF_FACTS {
                    if btf_has(&btf, fact) {
                        f.btf.insert((*fact).to_owned());
                    }
                }
                for (fact, tp, args) in hooks::TP_FACTS {
                    if tp_args(&btf, tp).is_some_and(|a| a == *args) {
                        f.btf.insert((*fact).to_owned());
                    }
                }
            }
            Err(e) => f.unseen.push(format!("btf: {e}")),
        }
        f.module_btf = std::fs::read_dir("/sys/kernel/btf")
            .map(|d| d.flatten().any(|e| e.file_name() != "vmlinux"))
            .unwrap_or(false);
        if privileged {
            f.bpf = bpf_features();
            for a in super::trials::attach_kinds(true) {
                f.attach.insert(a.kind.name().into(), a.error);
            }
        } else {
            f.unseen.push("bpf, attach: loading programs needs root (CAP_BPF + CAP_PERFMON)".into());
        }
        f
    }
}

/// `struct` or `struct.member` in vmlinux BTF; a member of an anonymous union or struct inside
/// the struct counts as the struct's own (as CO-RE matches it).
fn btf_has(btf: &libbpf_rs::btf::Btf, fact: &str) -> bool {
    use libbpf_rs::btf::types::Struct;
    let (ty, member) = fact.split_once('.').map_or((fact, None), |(t, m)| (t, Some(m)));
    let Some(s) = btf.type_by_name::<Struct>(ty) else { return false };
    let Some(member) = member else { return true };
    let Ok(comp) = libbpf_rs::btf::types::Composite::try_from(*s) else { return false };
    composite_has(btf, comp, member, 0)
}

fn composite_has(btf: &libbpf_rs::btf::Btf, c: libbpf_rs::btf::types::Composite<'_>, member: &str, depth: u32) -> bool {
    use libbpf_rs::btf::types::Composite;
    use libbpf_rs::btf::BtfType;
    c.iter().any(|m| match m.name {
        Some(n) => n.to_str() == Some(member),
        None if depth < 4 => btf
            .type_by_id::<BtfType>(m.ty)
            .and_then(|t| Composite::try_from(t).ok())
            .is_some_and(|inner| composite_has(btf, inner, member, depth + 1)),
        None => false,
    })
}

/// A tracepoint's arguments as its BTF prototype (`btf_trace_<tp>`) gives them, after the
/// tracepoint's own context: "struct bio *", "void *" (any other pointer), "int" (any integer or
/// enum), "other".
pub fn tp_args(btf: &libbpf_rs::btf::Btf, tp: &str) -> Option<Vec<String>> {
    use libbpf_rs::btf::types::{FuncProto, Typedef};
    use libbpf_rs::btf::{BtfKind, BtfType};
    let td = btf.type_by_name::<Typedef>(&format!("btf_trace_{tp}"))?;
    let proto = td.next_type()?.skip_mods_and_typedefs();
    let proto = if proto.kind() == BtfKind::Ptr { proto.next_type()? } else { proto };
    let proto = FuncProto::try_from(proto).ok()?;
    let kind = |t: BtfType<'_>| {
        let t = t.skip_mods_and_typedefs();
        match t.kind() {
            BtfKind::Int | BtfKind::Enum | BtfKind::Enum64 => "int".to_owned(),
            BtfKind::Ptr => match t.next_type().map(|p| p.skip_mods_and_typedefs()) {
                Some(p) if p.kind() == BtfKind::Struct => {
                    format!("struct {} *", p.name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
                }
                _ => "void *".to_owned(),
            },
            _ => "other".to_owned(),
        }
    };
    Some(proto.iter().skip(1).map(|p| btf.type_by_id::<BtfType>(p.ty).map_or("other".to_owned(), kind)).collect())
}

/// Each BPF feature (the `hooks::BPF_*` names) this kernel takes. Helpers and map types through
/// libbpf's own probes (a tiny program or map made and thrown away); atomics by loading the
/// doctor's cmpxchg program.
fn bpf_features() -> BTreeSet<String> {
    use libbpf_rs::libbpf_sys as sys;
    let mut out = BTreeSet::new();
    // SAFETY: libbpf's probes take plain values and a null options pointer.
    let helper =
        |id: u32| unsafe { sys::libbpf_probe_bpf_helper(sys::BPF_PROG_TYPE_RAW_TRACEPOINT, id, std::ptr::null()) == 1 };
    // SAFETY: as above.
    let map = |t: u32| unsafe { sys::libbpf_probe_bpf_map_type(t, std::ptr::null()) == 1 };
    for (name, ok) in [
        (hooks::BPF_LOOP, helper(sys::BPF_FUNC_loop)),
        (hooks::BPF_TASK_BTF, helper(sys::BPF_FUNC_get_current_task_btf)),
        (hooks::BPF_RINGBUF, map(sys::BPF_MAP_TYPE_RINGBUF)),
        (hooks::BPF_TASK_STORAGE, map(sys::BPF_MAP_TYPE_TASK_STORAGE)),
        (hooks::BPF_ATOMICS, super::trials::atomics_load().is_ok()),
    ] {
        if ok {
            out.insert(name.to_owned());
        }
    }
    out
}
