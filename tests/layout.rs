//! The house's rules, checked without a kernel: the BPF object's rooms each stand on their own
//! (CONTRIBUTING.md "The rooms"), kernel-version differences live in the two files made for them,
//! every file of the object carries one license.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bpf_files(ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(root().join("bpf"))
        .expect("bpf/ exists")
        .map(|e| e.expect("a readable bpf/ entry").path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no bpf/*{ext} found");
    v
}

/// libbpf's BPF headers (bpf_helpers.h ...) as libbpf-sys's build installed them for this
/// checkout: the build of the tests themselves made them, so they are there whenever this runs.
fn libbpf_include() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let mut found = Vec::new();
    let mut dirs = vec![target.clone()];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("libbpf-sys-") {
                let inc = p.join("out/include");
                if inc.join("bpf/bpf_helpers.h").exists() {
                    found.push(inc);
                }
            } else if d.components().count() < target.components().count() + 4 {
                dirs.push(p);
            }
        }
    }
    found.sort();
    found.pop().unwrap_or_else(|| panic!("no libbpf-sys include dir under {}: build the crate first", target.display()))
}

#[test]
fn every_bpf_header_compiles_on_its_own_in_both_builds() {
    let inc = libbpf_include();
    let mut failed = Vec::new();
    for h in bpf_files(".bpf.h") {
        let name = h.file_name().unwrap().to_string_lossy().into_owned();
        for def in [None, Some("-DIOPATH_COMPAT")] {
            let src = std::env::temp_dir().join(format!("iopath-layout-{}-{name}.c", std::process::id()));
            fs::write(&src, format!("#include \"{name}\"\n")).unwrap();
            let mut cmd = Command::new("clang");
            cmd.args(["-target", "bpf", "-D__TARGET_ARCH_x86", "-mcpu=v3", "-fsyntax-only", "-Wall", "-Werror"])
                // A header's helpers are used by its includers, not by itself.
                .arg("-Wno-unused-function")
                .arg(format!("-I{}", root().join("bpf").display()))
                .arg(format!("-I{}", inc.display()))
                .args(def)
                .arg(&src);
            let out = cmd.output().expect("clang runs (the build needs it too)");
            fs::remove_file(&src).ok();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let first = err.lines().find(|l| l.contains("error")).unwrap_or("").to_owned();
                failed.push(format!("{name} {}: {first}", def.unwrap_or("(modern)")));
            }
        }
    }
    assert!(failed.is_empty(), "headers that do not include what they use:\n{}", failed.join("\n"));
}

/// The phases object's rooms (its own headers, not the shared ones like slots or hist) stay
/// short enough to read in one sitting.
#[test]
fn bpf_rooms_are_short_and_the_object_file_holds_no_programs() {
    for f in bpf_files(".bpf.h") {
        let n = fs::read_to_string(&f).unwrap().lines().count();
        assert!(n <= 500, "{} has {n} lines (500 at most: split it by what it does)", f.display());
    }
    let phases = fs::read_to_string(root().join("bpf/phases.bpf.c")).unwrap();
    assert!(
        !phases.lines().any(|l| l.contains("SEC(\"") && !l.contains("SEC(\"license\")")),
        "bpf/phases.bpf.c defines a program or map: it belongs beside its handler in a room's header"
    );
}

fn has_compat_conditional(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim_start();
        (t.starts_with("#if") || t.starts_with("#elif")) && t.contains("IOPATH_COMPAT")
    })
}

#[test]
fn kernel_version_differences_live_in_compat_and_core_fixes_alone() {
    let allowed = ["compat.bpf.h", "core_fixes.bpf.h"];
    let mut offenders = Vec::new();
    for f in bpf_files(".h").into_iter().chain(bpf_files(".c")) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if allowed.contains(&name.as_str()) || name == "vmlinux.h" {
            continue;
        }
        if has_compat_conditional(&fs::read_to_string(&f).unwrap()) {
            offenders.push(name);
        }
    }
    assert!(offenders.is_empty(), "#if on IOPATH_COMPAT outside compat.bpf.h / core_fixes.bpf.h: {offenders:?}");
    // The check itself sees one where there is one.
    assert!(has_compat_conditional(&fs::read_to_string(root().join("bpf/compat.bpf.h")).unwrap()));
}

#[test]
fn every_bpf_file_carries_one_license() {
    let spdx = |p: &Path| -> String {
        let text = fs::read_to_string(p).unwrap();
        let line = text.lines().next().unwrap_or("");
        let at = line.find("SPDX-License-Identifier:").unwrap_or_else(|| panic!("{}: no SPDX line first", p.display()));
        line[at + "SPDX-License-Identifier:".len()..].trim().trim_end_matches("*/").trim().to_owned()
    };
    for f in bpf_files(".h").into_iter().chain(bpf_files(".c")) {
        if f.ends_with("vmlinux.h") {
            continue;
        }
        assert_eq!(spdx(&f), "(LGPL-2.1 OR BSD-2-Clause)", "{}", f.display());
    }
}

/// Every `src/` file is a module (`a/mod.rs` is `a`, `lib.rs` and `main.rs` the crate).
fn rust_modules() -> std::collections::BTreeMap<String, PathBuf> {
    let mut out = std::collections::BTreeMap::new();
    let src = root().join("src");
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).unwrap().with_extension("");
                let mut name = rel.to_string_lossy().replace('/', "::");
                if let Some(parent) = name.strip_suffix("::mod") {
                    name = parent.to_owned();
                }
                if name == "lib" || name == "main" {
                    name = "crate".to_owned();
                }
                out.insert(name, p);
            }
        }
    }
    out
}

/// The text without its `#[cfg(test)] mod ... { }` blocks: tests may reach anywhere.
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = &rest[at..];
        let Some(open) = after.find('{') else { break };
        let head = &after[..open];
        if !head.contains("mod ") || head.contains(';') {
            out.push_str(&rest[..at + "#[cfg(test)]".len()]);
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        }
        out.push_str(&rest[..at]);
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap().trim().trim_end_matches("::").to_owned()];
    };
    let prefix = tree[..open].trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand_use(p))
        .map(|p| if p == "self" { prefix.trim_end_matches("::").to_owned() } else { format!("{prefix}{p}") })
        .collect()
}

/// Module -> the modules its non-test code names (`use crate::`, `crate::` paths, `super::`,
/// and a mod.rs's own children).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mods = rust_modules();
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        (1..=parts.len()).rev().map(|i| parts[..i].join("::")).find(|m| mods.contains_key(m))
    };
    let mut g = std::collections::BTreeMap::new();
    for (m, p) in &mods {
        let text = without_test_modules(&fs::read_to_string(p).unwrap());
        let parent = m.rsplit_once("::").map_or("", |(a, _)| a).to_owned();
        let here = if m == "crate" { String::new() } else { m.clone() };
        let mut paths: Vec<String> = Vec::new();
        for stmt in text.split(';') {
            let s = stmt.trim_start();
            let s = s.strip_prefix("pub ").or_else(|| s.strip_prefix("pub(crate) ")).unwrap_or(s);
            if let Some(tree) = s.strip_prefix("use ") {
                for path in expand_use(tree) {
                    if let Some(r) = path.strip_prefix("crate::") {
                        paths.push(r.to_owned());
                    } else if let Some(r) = path.strip_prefix("super::") {
                        paths.push(format!("{parent}::{r}"));
                    } else if let Some(r) = path.strip_prefix("self::") {
                        paths.push(format!("{here}::{r}"));
                    } else {
                        paths.push(format!("{here}::{path}"));
                    }
                }
            }
        }
        for (key, base) in [("crate::", String::new()), ("super::", parent.clone())] {
            let mut rest = text.as_str();
            while let Some(at) = rest.find(key) {
                let tail = &rest[at + key.len()..];
                let end = tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
                paths.push(format!("{base}::{}", &tail[..end]));
                rest = &tail[end..];
            }
        }
        let deps: std::collections::BTreeSet<String> = paths
            .iter()
            .filter_map(|p| resolve(p.trim_start_matches("::")))
            .filter(|d| d != m && d != "crate")
            .collect();
        g.insert(m.clone(), deps);
    }
    g
}

/// The strongly connected groups of more than one module (Tarjan).
fn cycles(g: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::HashMap<&'a str, usize>,
        low: std::collections::HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: std::collections::HashSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: Default::default(),
        low: Default::default(),
        stack: Vec::new(),
        on: Default::default(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_two_modules_of_src_depend_on_each_other() {
    let g = module_graph();
    // The reading sees what is there: the session uses the plan, the plan the table.
    assert!(g["probe::session"].contains("probe::load") && g["probe::plan"].contains("probe::hooks"), "{g:?}");
    let found = cycles(&g);
    assert!(found.is_empty(), "modules in a cycle (each group depends on itself through the others): {found:?}");
    // ... and finds one where there is one.
    let mut looped = g.clone();
    looped.get_mut("probe::hooks").unwrap().insert("probe::session".into());
    assert!(!cycles(&looped).is_empty());
}

/// The pure table and plan import nothing of a session; no room below main.rs takes the command
/// line's clap structs.
#[test]
fn the_table_and_plan_stand_apart_and_only_main_reads_the_command_line() {
    let g = module_graph();
    for (m, allowed) in [
        ("probe::hooks", &[][..]),
        ("probe::options", &["probe::sampler", "probe::series"][..]),
        ("probe::plan", &["probe::facts", "probe::hooks", "probe::options"][..]),
    ] {
        let extra: Vec<&String> =
            g[m].iter().filter(|d| d.starts_with("probe") && !allowed.contains(&d.as_str())).collect();
        assert!(extra.is_empty(), "{m} depends on {extra:?}");
    }
    let readers: Vec<&String> = g.iter().filter(|(m, d)| d.contains("cli") && *m != "crate").map(|(m, _)| m).collect();
    assert!(readers.is_empty(), "modules taking the command line's structs (give them their own options): {readers:?}");
}

/// Each function of `src/` outside tests, with its length in lines (from its `fn` line to the
/// brace that closes it at the same indentation).
fn rust_functions() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (m, p) in rust_modules() {
        let text = without_test_modules(&fs::read_to_string(&p).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let indent = l.len() - t.len();
            let t = ["pub(crate) ", "pub(super) ", "pub "].iter().fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
            let t = ["const ", "async ", "unsafe "].iter().fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
            let Some(rest) = t.strip_prefix("fn ") else { continue };
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            // A declaration without a body (a trait's) ends at its `;`.
            let body = lines[i..].iter().position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
            if body.is_none_or(|b| lines[i + b].trim_end().ends_with(';')) {
                continue;
            }
            let close = format!("{}}}", " ".repeat(indent));
            if let Some(end) =
                lines[i + 1..].iter().position(|l| l.starts_with(&close) && l.trim_end().len() == indent + 1)
            {
                out.push((m.clone(), name, end + 2));
            }
        }
    }
    out
}

#[test]
fn no_function_outside_tests_is_longer_than_120_lines() {
    let fns = rust_functions();
    assert!(fns.len() > 500, "{} functions read", fns.len());
    // The reading measures: a known function's length is what it is.
    let ok = fns.iter().find(|(m, n, _)| m == "report::text" && n == "text_sections").expect("text_sections read");
    let ext = fns.iter().find(|(m, n, _)| m == "trace" && n == "run_external").expect("run_external read");
    assert!((100..=120).contains(&ext.2), "run_external measured {} lines", ext.2);
    assert!((15..60).contains(&ok.2), "text_sections measured {} lines", ok.2);
    let long: Vec<String> =
        fns.iter().filter(|(_, _, n)| *n > 120).map(|(m, f, n)| format!("{m}::{f} ({n} lines)")).collect();
    assert!(long.is_empty(), "functions a reader cannot hold (split them by what they do): {long:?}");
}
