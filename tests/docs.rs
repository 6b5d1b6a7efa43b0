//! The documentation kept honest: every relative link resolves (files and `#anchors`), every
//! heading the README once had lives on in some page, every module is named in CONTRIBUTING.md,
//! docs/json.md names every key of a recorded report, and the README's example commands run as
//! written (paths substituted by scratch ones) and exit 0.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CONTRIBUTING.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(p: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(p).unwrap();
    let mut a: BTreeSet<String> = prose(&text).lines().filter(|l| l.starts_with('#')).map(slug).collect();
    // ... and explicit ones: <a id="lean"></a>
    for part in text.split("<a id=\"").skip(1) {
        if let Some(id) = part.split('"').next() {
            a.insert(id.to_owned());
        }
    }
    a
}

/// `[text](target)` links of a page's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find(')') {
            out.push(rest[..j].to_owned());
            rest = &rest[j..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, frag) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() { page.clone() } else { page.parent().unwrap().join(path) };
            checked += 1;
            if !file.exists() {
                bad.push(format!("{}: {target}: no such file", page.display()));
            } else if !frag.is_empty() && file.extension().is_some_and(|e| e == "md") && !anchors(&file).contains(frag)
            {
                bad.push(format!("{}: {target}: no heading #{frag} in {}", page.display(), file.display()));
            }
        }
    }
    assert!(checked > 40, "only {checked} links found: the parser is broken");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_heading_the_readme_had_lives_on() {
    let all: String = pages().iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    let old = std::fs::read_to_string(root().join("tests/data/readme-headings.txt")).unwrap();
    let lost: Vec<&str> = old.lines().filter(|h| !all.contains(h.trim_start_matches('#').trim())).collect();
    assert!(old.lines().count() >= 20 && lost.is_empty(), "headings no page has: {lost:?}");
}

#[test]
fn the_readme_is_short_and_installs_early() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(n <= 300, "README.md is {n} lines");
    let install = text.lines().position(|l| l.contains("./scripts/setup.sh")).expect("the install command");
    let tests = text.lines().position(|l| l.contains("./scripts/test.sh")).expect("the test command");
    assert!(install < 60 && tests < 60, "the two commands at lines {install} and {tests}");
    for page in pages().iter().filter(|p| p.starts_with(root().join("docs"))) {
        let t = std::fs::read_to_string(page).unwrap();
        let mut l = t.lines();
        assert!(l.next().is_some_and(|h| h.starts_with("# ")), "{}: a title first", page.display());
        assert!(t.contains("## Contents"), "{}: no table of contents", page.display());
    }
}

#[test]
fn every_module_is_named_in_contributing() {
    let c = std::fs::read_to_string(root().join("CONTRIBUTING.md")).unwrap();
    let mut missing = Vec::new();
    let mut files = Vec::new();
    for dir in ["src", "src/probe", "src/top", "src/loadgen", "src/flame", "src/report", "bpf"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.is_file() && p.file_name().is_some_and(|n| n != "vmlinux.h") {
                files.push(p);
            }
        }
    }
    for p in &files {
        let name = p.file_name().unwrap().to_str().unwrap();
        let rel = p.strip_prefix(root()).unwrap().to_str().unwrap();
        // Named by its path, or by its file name inside its folder's row.
        if !c.contains(rel) && !c.contains(&format!("`{name}`")) {
            missing.push(rel.to_owned());
        }
    }
    assert!(files.len() > 60, "{} files", files.len());
    assert!(missing.is_empty(), "modules CONTRIBUTING.md does not name: {missing:?}");
}

#[test]
fn the_json_page_names_every_key_of_a_report() {
    let doc = std::fs::read_to_string(root().join("docs/json.md")).unwrap();
    let keys: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_owned))
        .filter_map(|k| k.rsplit(['.', ']', '[']).find(|s| !s.is_empty()).map(str::to_owned))
        .collect();
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("tests/data/compare-iommu/before/report.json")).unwrap())
            .unwrap();
    let mut missing = BTreeSet::new();
    // Keys of maps keyed by data (disks, hooks, syscall names, "q0") are values, not fields.
    let is_data = |k: &str| {
        k.starts_with(|c: char| c.is_ascii_digit() || c == '/')
            || k.contains(':')
            || k.starts_with("nvme")
            || k.starts_with("vd")
            || k.starts_with("loop")
    };
    fn walk(v: &serde_json::Value, path: &str, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{path}{k}");
                    out.push((p.clone(), k.clone()));
                    walk(x, &format!("{p}."), out);
                }
            }
            serde_json::Value::Array(a) => {
                if let Some(x) = a.first() {
                    walk(x, path, out);
                }
            }
            _ => {}
        }
    }
    let mut all = Vec::new();
    walk(&r, "", &mut all);
    for (path, k) in &all {
        // job.stop is an enum: its one key is the stop rule's name.
        if !keys.contains(k) && !is_data(k) && !path.starts_with("job.stop.") && !path.contains(".syscalls.") {
            missing.insert(path.clone());
        }
    }
    assert!(all.len() > 200, "{} keys in the recorded report", all.len());
    assert!(
        missing.is_empty(),
        "docs/json.md names none of: {missing:?} (python3 scripts/gen-json-doc.py > docs/json.md)"
    );
}

/// The README's example commands, as written: the scratch file, a loop device of the test's own
/// and a live process's pid substituted for the README's.
#[test]
fn the_readme_examples_run() {
    require_root();
    let d = scratch("readme-examples");
    let file = d.join("t.dat");
    let dev = LoopDev::direct(&d.join("backing"), 128);
    let loopname = dev.0.trim_start_matches("/dev/").to_owned();
    // A process doing direct reads for --pid to trace.
    let mut reader = Command::new("sh")
        .arg("-c")
        .arg(format!("while :; do dd if={} of=/dev/null bs=4k count=2000 iflag=direct status=none; done", dev.0))
        .spawn()
        .unwrap();
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut cmds = Vec::new();
    let mut console = false;
    for l in text.lines() {
        if l.starts_with("```") {
            console = l.trim() == "```console";
            continue;
        }
        if let Some(c) = l.strip_prefix("$ ").filter(|_| console) {
            cmds.push(c.to_owned());
        }
    }
    assert!(cmds.len() >= 8, "{cmds:?}");
    // `iopath` on PATH is the binary under test.
    let bindir = Path::new(bin()).parent().unwrap().to_owned();
    let path = format!("{}:{}", bindir.display(), std::env::var("PATH").unwrap_or_default());
    let mut failed = Vec::new();
    for c in &cmds {
        let c = c
            .replace("/var/tmp/iop/t.dat", file.to_str().unwrap())
            .replace("/dev/loop1", &dev.0)
            .replace("/sys/block/loop1/", &format!("/sys/block/{loopname}/"))
            .replace("4242", &reader.id().to_string());
        let o = Command::new("sh").arg("-c").arg(&c).current_dir(&d).env("PATH", &path).output().unwrap();
        if !o.status.success() {
            failed.push(format!("{c}: {:?}\n{}", o.status.code(), String::from_utf8_lossy(&o.stderr)));
        }
    }
    let _ = reader.kill();
    let _ = reader.wait();
    assert!(failed.is_empty(), "README examples that failed:\n{}", failed.join("\n"));
}

#[test]
fn man_pages_render_without_warnings() {
    let d = scratch("man-pages");
    let o = iopath(&["man", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.path()).collect();
    pages.sort();
    let names: Vec<String> = pages.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["iopath.1", "iopath-trace.1", "iopath-top.1", "iopath-serve.1", "iopath-completions.1"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    for p in &pages {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("MANWIDTH=80 man -l {} 2>&1 >/dev/null", p.display()))
            .output()
            .unwrap();
        assert!(o.status.success() && o.stdout.is_empty(), "{}: {}", p.display(), String::from_utf8_lossy(&o.stdout));
        // ... and it says something: the page's own text, rendered.
        let text = Command::new("man").args(["-l", p.to_str().unwrap()]).env("MANWIDTH", "80").output().unwrap();
        assert!(String::from_utf8_lossy(&text.stdout).contains("iopath"), "{}", p.display());
    }
}

#[test]
fn bash_completes_subcommands_and_flags() {
    let d = scratch("completions");
    let o = iopath(&["completions", "bash"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = d.join("iopath.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let complete = |words: &str| -> String {
        let n = words.split(' ').count() - 1;
        let cmd = format!(
            "source {}; complete -p iopath >/dev/null || exit 3; COMP_WORDS=({words}); COMP_CWORD={n}; \
             COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _iopath iopath \"${{COMP_WORDS[$COMP_CWORD]}}\" \
             \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let o = Command::new("bash").arg("-c").arg(cmd).output().unwrap();
        assert!(o.status.success(), "{words}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let subs = complete("iopath tr");
    assert!(subs.lines().any(|l| l == "trace"), "iopath tr -> {subs:?}");
    let flags = complete("iopath trace --eng");
    assert!(flags.lines().any(|l| l == "--engine"), "iopath trace --eng -> {flags:?}");
    for shell in ["zsh", "fish"] {
        let o = iopath(&["completions", shell]);
        assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("trace"), "{shell}");
    }
}
