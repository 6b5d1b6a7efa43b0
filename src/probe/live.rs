//! What a live reader (top, serve, the issue-stamp checker) holds of a running session: the maps
//! it reads by fd, and each program's run stats from the kernel.

/// The maps a live reader (`iopath top`) reads while the workload runs, by fd.
#[derive(Clone, Debug)]
pub struct LiveMaps {
    pub top: i32,
    /// The one-hook tier's row slots (a per-CPU array of `struct stamps_row`, `top` its
    /// spill-over hash); -1 with the full set.
    pub stamp_rows: i32,
    pub phase_counters: i32,
    pub count_counters: i32,
    /// The one-hook tier's counters (`enum stamps_counter`); -1 with the full set.
    pub stamps_counters: i32,
    /// Every hook of the session: its name, whether it attached, and how (tp_btf, raw_tp ...).
    pub hooks: Vec<(String, bool, String)>,
    /// The attached hooks' programs (hook, program fd): their run counts and times, live (with
    /// `prog_stats`).
    pub progs: Vec<(String, i32)>,
    /// The per-I/O tables (mmapable arrays), for expiry (probe::expire).
    pub ios: i32,
    pub links: i32,
    /// Their held-index hashes: the compat build's claims (bpf/compat.bpf.h), freed with a slot.
    pub ios_held: i32,
    pub links_held: i32,
}

/// The kernel's record of a program: run count and time (when stats are on), and
/// recursion_misses — runs skipped because another BPF program was running on that CPU, i.e.
/// events the program never saw.
pub(crate) fn prog_info(fd: i32) -> Option<libbpf_rs::libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel fills at most `len` bytes of `info`.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}
