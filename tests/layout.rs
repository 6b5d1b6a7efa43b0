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
