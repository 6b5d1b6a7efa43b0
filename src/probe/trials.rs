//! What this kernel takes, found by trying: one tiny program per attach kind loaded and attached
//! (the doctor object), BPF atomics loaded. Decided once, up front; `doctor` prints it.

use std::mem::MaybeUninit;
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

use serde::Serialize;

use super::doctor_skel::DoctorSkelBuilder;
use super::hooks::AttachKind;

#[derive(Clone, Debug, Serialize)]
pub struct AttachResult {
    pub kind: AttachKind,
    pub ok: bool,
    /// Why it failed (the libbpf error), when it did.
    pub error: Option<String>,
}

/// Loads and attaches the doctor's program of one kind, alone, counting events of process `tgid`
/// (0 = all), and runs `during` while it is attached. `during` gets a reader of the program's hit
/// counter, so a test can drive I/O and see the program fire.
pub fn with_attached<R>(kind: AttachKind, tgid: u32, during: impl FnOnce(&dyn Fn() -> u64) -> R) -> Result<R, String> {
    let mut storage = MaybeUninit::uninit();
    let mut open = DoctorSkelBuilder::default().open(&mut storage).map_err(|e| format!("open: {e}"))?;
    {
        let p = &mut open.progs;
        p.doctor_tp_btf.set_autoload(kind == AttachKind::TpBtf);
        p.doctor_raw_tp.set_autoload(kind == AttachKind::RawTp);
        p.doctor_tracepoint.set_autoload(kind == AttachKind::Tracepoint);
        p.doctor_fentry.set_autoload(kind == AttachKind::Fentry);
        p.doctor_kprobe.set_autoload(kind == AttachKind::Kprobe);
        p.doctor_perf_event.set_autoload(kind == AttachKind::PerfEvent);
        p.doctor_atomics.set_autoload(false);
    }
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.targ_tgid = tgid;
    }
    let skel = open.load().map_err(|e| format!("load: {e}"))?;
    let p = &skel.progs;
    let one = |r: libbpf_rs::Result<libbpf_rs::Link>| r.map(|l| vec![l]).map_err(anyhow::Error::from);
    let _links = match kind {
        AttachKind::TpBtf => one(p.doctor_tp_btf.attach()),
        AttachKind::RawTp => one(p.doctor_raw_tp.attach()),
        AttachKind::Tracepoint => one(p.doctor_tracepoint.attach()),
        AttachKind::Fentry => one(p.doctor_fentry.attach()),
        AttachKind::Kprobe => one(p.doctor_kprobe.attach()),
        // The sampler's rate (options::StackOpts).
        AttachKind::PerfEvent => super::perf_event::attach_cpu_clock(&p.doctor_perf_event, 997),
    }
    .map_err(|e| format!("attach: {e:#}"))?;
    let idx = AttachKind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
    let hits = || {
        skel.maps.bss_data.as_deref().map_or(0, |b| {
            // SAFETY: .bss is mmaped and written by the program concurrently; a volatile read
            // of an aligned u64 sees either the old or the new count.
            unsafe { std::ptr::read_volatile(&b.hits[idx]) }
        })
    };
    Ok(during(&hits))
}

pub fn attach_kinds(privileged: bool) -> Vec<AttachResult> {
    AttachKind::ALL
        .iter()
        .map(|&kind| {
            if !privileged {
                return AttachResult {
                    kind,
                    ok: false,
                    error: Some("not tried: needs root (CAP_BPF + CAP_PERFMON)".into()),
                };
            }
            super::log::clear();
            match with_attached(kind, 0, |_| ()) {
                Ok(()) => AttachResult { kind, ok: true, error: None },
                Err(e) => {
                    let why = super::log::reason().map(|r| format!(" ({r})")).unwrap_or_default();
                    AttachResult { kind, ok: false, error: Some(format!("{e}{why}")) }
                }
            }
        })
        .collect()
}

/// Loads (never attaches) the doctor's cmpxchg/xchg program: whether this verifier takes BPF
/// atomics (5.12+).
pub fn atomics_load() -> Result<(), String> {
    let mut storage = MaybeUninit::uninit();
    let mut open = DoctorSkelBuilder::default().open(&mut storage).map_err(|e| format!("open: {e}"))?;
    for mut p in open.open_object_mut().progs_mut() {
        let name = p.name().to_string_lossy().into_owned();
        p.set_autoload(name == "doctor_atomics");
    }
    open.load().map(|_| ()).map_err(|e| format!("load: {e}"))
}

pub fn btf_present(sys: &Path) -> bool {
    sys.join("kernel/btf/vmlinux").exists()
}
