//! Addresses -> names with blazesym: kernel frames from /proc/kallsyms (no vmlinux needed), user
//! frames from the ELF files the process had mapped (symbol tables, DWARF when present), looked
//! up by file offset so that a process that has exited is still symbolized.

use std::collections::HashMap;
use std::path::PathBuf;

use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::MaybeDefault;
use serde::Serialize;

use super::fold::NamedStack;
use crate::model::{ExecMapping, RawStack};

/// How many user frames got a name, per process: frame-pointer-less binaries show up here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Naming {
    pub tgid: u32,
    pub comm: String,
    /// The frames up to each stack's cut (an address no file mapping covers), and the cut as one.
    pub user_frames: u64,
    pub user_named: u64,
    /// User stacks cut at an address outside any executable file mapping (JIT, [vdso], or a
    /// garbage frame from a binary without frame pointers).
    pub user_cut: u64,
}

impl Naming {
    pub fn fraction(&self) -> f64 {
        if self.user_frames == 0 {
            1.0
        } else {
            self.user_named as f64 / self.user_frames as f64
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Symbols {
    pub stacks: Vec<NamedStack>,
    pub naming: Vec<Naming>,
    pub kernel_frames: u64,
    pub kernel_named: u64,
}

/// A return address points after its call: look up the call itself (the leaf is the exact IP).
fn lookup_addr(i: usize, a: u64) -> u64 {
    if i == 0 {
        a
    } else {
        a.saturating_sub(1)
    }
}

/// Names every frame of `raw` (kernel and user), stopping a user stack at the first address
/// outside an executable file mapping of its process.
pub fn symbolize(raw: &[RawStack], maps: &[(u32, Vec<ExecMapping>)]) -> Symbols {
    let symbolizer = Symbolizer::new();
    let by_tgid: HashMap<u32, &Vec<ExecMapping>> = maps.iter().map(|(t, m)| (*t, m)).collect();

    let knames = kernel_names(&symbolizer, raw);

    // User: each address -> (file, offset), cut at the first one no mapping covers.
    let mut resolved: Vec<Vec<(PathBuf, u64)>> = Vec::with_capacity(raw.len());
    let mut cut: Vec<bool> = Vec::with_capacity(raw.len());
    let mut per_file: HashMap<PathBuf, Vec<u64>> = HashMap::new();
    for s in raw {
        let m = by_tgid.get(&s.tgid).map(|v| v.as_slice()).unwrap_or(&[]);
        let mut frames = Vec::new();
        let mut was_cut = false;
        for (i, &a) in s.user.iter().enumerate() {
            let a = lookup_addr(i, a);
            match m.iter().find(|x| a >= x.start && a < x.end) {
                Some(x) => {
                    let off = a - x.start + x.offset;
                    per_file.entry(PathBuf::from(&x.path)).or_default().push(off);
                    frames.push((PathBuf::from(&x.path), off));
                }
                None => {
                    was_cut = true;
                    break;
                }
            }
        }
        resolved.push(frames);
        cut.push(was_cut);
    }
    let unames = user_names(&symbolizer, per_file);

    let mut out = Symbols::default();
    let mut naming: HashMap<u32, Naming> = HashMap::new();
    for ((s, frames), was_cut) in raw.iter().zip(resolved).zip(cut) {
        let n =
            naming.entry(s.tgid).or_insert_with(|| Naming { tgid: s.tgid, comm: s.comm.clone(), ..Default::default() });
        let mut user = Vec::with_capacity(frames.len());
        // A cut counts as one unnamed frame (the "[unknown]" the graph shows), not as every
        // address past it: frame-pointer unwinding through a function built without them
        // (libc's open64) reads garbage up to the 127-frame limit. One such sample made 127 of
        // the worker's 2084 frames "unnamed" (6%) in a 2 s aio run where every other was named.
        n.user_frames += frames.len() as u64 + u64::from(was_cut);
        n.user_cut += u64::from(was_cut);
        for (path, off) in frames.iter().rev() {
            match unames.get(&(path.clone(), *off)) {
                Some(name) => {
                    n.user_named += 1;
                    user.push(name.clone());
                }
                None => user
                    .push(format!("[{}]", path.file_name().map_or_else(String::new, |f| f.to_string_lossy().into()))),
            }
        }
        if was_cut {
            user.insert(0, "[unknown]".to_owned());
        }
        let mut kernel = Vec::with_capacity(s.kernel.len());
        for (i, &a) in s.kernel.iter().enumerate().rev() {
            out.kernel_frames += 1;
            match knames.get(&lookup_addr(i, a)) {
                Some(name) => {
                    out.kernel_named += 1;
                    kernel.push(name.clone());
                }
                None => kernel.push("[unknown]".to_owned()),
            }
        }
        out.stacks.push(NamedStack { comm: s.comm.clone(), user, kernel, value: s.value });
    }
    out.naming = naming.into_values().collect();
    out.naming.sort_by_key(|n| std::cmp::Reverse(n.user_frames));
    out
}

/// Each distinct kernel address of the stacks named in one batch (JIT code kallsyms does not
/// list: "[bpf]").
fn kernel_names(symbolizer: &Symbolizer, raw: &[RawStack]) -> HashMap<u64, String> {
    // Kernel: one batch of distinct addresses.
    let mut kaddrs: Vec<u64> =
        raw.iter().flat_map(|s| s.kernel.iter().enumerate().map(|(i, &a)| lookup_addr(i, a))).collect();
    kaddrs.sort_unstable();
    kaddrs.dedup();
    let ksrc = Source::Kernel(Kernel {
        kallsyms: MaybeDefault::Default,
        vmlinux: MaybeDefault::None,
        kaslr_offset: Some(0),
        debug_syms: false,
        ..Default::default()
    });
    let text = KernelText::read();
    match symbolizer.symbolize(&ksrc, Input::AbsAddr(&kaddrs)) {
        Ok(syms) => kaddrs
            .iter()
            .zip(syms)
            .filter_map(|(&a, s)| {
                // Past the kernel's text and no module there: JIT code kallsyms does not list
                // (BPF programs, trampolines), which the nearest symbol would misname.
                if text.unlisted(a) {
                    return Some((a, "[bpf]".to_owned()));
                }
                name_of(&s).map(|n| (a, n))
            })
            .collect(),
        Err(_) => HashMap::new(),
    }
}

/// Each (file, offset) of the user stacks named: the symbol table first, then debug info.
fn user_names(symbolizer: &Symbolizer, per_file: HashMap<PathBuf, Vec<u64>>) -> HashMap<(PathBuf, u64), String> {
    let mut unames: HashMap<(PathBuf, u64), String> = HashMap::new();
    for (path, mut offs) in per_file {
        if !path.starts_with("/") {
            // [vdso]: no file to read; its name is the best we have.
            for o in offs {
                unames.insert((path.clone(), o), path.display().to_string());
            }
            continue;
        }
        offs.sort_unstable();
        offs.dedup();
        // The symbol table first: full paths ("iopath::loadgen::worker") read better than DWARF's
        // short generic names; debug info (separate debug files too, e.g. libc6-dbg) for what a
        // stripped library leaves unnamed.
        for debug_syms in [false, true] {
            let todo: Vec<u64> = offs.iter().copied().filter(|o| !unames.contains_key(&(path.clone(), *o))).collect();
            if todo.is_empty() {
                break;
            }
            let src = Source::Elf(Elf { debug_syms, ..Elf::new(&path) });
            if let Ok(syms) = symbolizer.symbolize(&src, Input::FileOffset(&todo)) {
                for (o, s) in todo.iter().zip(syms) {
                    if let Some(n) = name_of(&s) {
                        unames.insert((path.clone(), *o), n);
                    }
                }
            }
        }
    }
    unames
}

/// Where kernel code is that kallsyms names: the core text (up to `_etext`) and module text.
#[derive(Default)]
struct KernelText {
    etext: Option<u64>,
    /// Start addresses of module symbols, sorted.
    modules: Vec<u64>,
}

impl KernelText {
    fn read() -> KernelText {
        let mut k = KernelText::default();
        let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else { return k };
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            let (Some(addr), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else { continue };
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            if name == "_etext" {
                k.etext = Some(addr);
            } else if f.next().is_some_and(|m| m.starts_with('[')) {
                k.modules.push(addr);
            }
        }
        k.modules.sort_unstable();
        k
    }

    fn unlisted(&self, a: u64) -> bool {
        let Some(etext) = self.etext else { return false };
        if a < etext {
            return false;
        }
        // A module function is rarely larger than this.
        let i = self.modules.partition_point(|&m| m <= a);
        !(i > 0 && a - self.modules[i - 1] < 1 << 16)
    }
}

fn name_of(s: &Symbolized) -> Option<String> {
    match s {
        Symbolized::Sym(sym) => Some(sym.name.to_string()),
        Symbolized::Unknown(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_stack_counts_its_cut_as_one_frame_not_the_garbage_past_it() {
        // Two addresses in a mapping, then what frame-pointer unwinding through a function
        // without them reads: 125 addresses no mapping covers, to the 127-frame limit.
        let map = ExecMapping { start: 0x1000, end: 0x2000, offset: 0, path: "/nonexistent/iopath-test".into() };
        let mut user = vec![0x1100, 0x1200];
        user.extend((0..125).map(|i| 0x9000_0000 + i * 8));
        let raw = RawStack { tgid: 7, pid: 7, comm: "w".into(), kernel: Vec::new(), user, value: 1 };
        let s = symbolize(&[raw], &[(7, vec![map])]);
        let n = &s.naming[0];
        assert_eq!((n.user_frames, n.user_cut), (3, 1), "{n:?}");
        assert_eq!(s.stacks[0].user.first().map(String::as_str), Some("[unknown]"));
        assert_eq!(s.stacks[0].user.len(), 3);
    }
}
