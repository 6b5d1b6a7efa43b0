//! Compiles every `bpf/*.bpf.c` into a libbpf-rs skeleton (`$OUT_DIR/<name>.skel.rs`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    version();
    // The whole folder: headers shared between programs change skeletons too.
    println!("cargo:rerun-if-changed=bpf");

    let mut sources: Vec<PathBuf> = fs::read_dir("bpf")
        .expect("bpf/ exists")
        .map(|e| e.expect("readable bpf/ entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();

    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let name = src
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bpf.c"))
            .expect("a .bpf.c file name")
            .to_owned();
        // -mcpu=v3: the cmpxchg/xchg of bpf/compat.bpf.h (BPF atomics, kernel 5.12+) and
        // 32-bit jumps (5.1+).
        let skel = out.join(format!("{name}.skel.rs"));
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(["-Wall", "-Werror", "-Ibpf", "-mcpu=v3"])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        if name == "phases" {
            add_compat_build(&src, &out, &skel);
        }
    }
}

/// The phases object again with IOPATH_COMPAT (bpf/compat.bpf.h: kernels without bpf_loop, BPF
/// atomics or task storage). Its skeleton must be the modern one's but for the object's bytes;
/// those are added to the modern skeleton, which then opens whichever the plan chose
/// (probe::flavour::object).
fn add_compat_build(src: &Path, out: &Path, skel: &Path) {
    let dir = out.join("compat");
    fs::create_dir_all(&dir).expect("creating OUT_DIR/compat");
    let compat_skel = dir.join("phases.skel.rs");
    SkeletonBuilder::new()
        .source(src)
        .obj(dir.join("phases.bpf.o"))
        .clang_args(["-Wall", "-Werror", "-Ibpf", "-mcpu=v3", "-DIOPATH_COMPAT"])
        .build_and_generate(&compat_skel)
        .unwrap_or_else(|e| panic!("building {} with IOPATH_COMPAT: {e:#}", src.display()));
    let modern = fs::read_to_string(skel).expect("reading the phases skeleton");
    let compat = fs::read_to_string(&compat_skel).expect("reading the compat phases skeleton");
    let (m_head, _) = split_data(&modern);
    let (c_head, c_data) = split_data(&compat);
    let (m_rest, m_types) = split_types(&m_head);
    let (c_rest, c_types) = split_types(&c_head);
    let differs = |what: &str| -> ! {
        panic!(
            "the compat build of bpf/phases.bpf.c differs from the modern one beyond its bytes ({what}; \
             see {}): both builds must define the same maps, programs, globals and shared structs",
            compat_skel.display()
        )
    };
    if m_rest != c_rest {
        let line = m_rest.lines().zip(c_rest.lines()).position(|(a, b)| a != b).unwrap_or(0);
        differs(&format!("maps, programs or globals: line {} outside the types module", line + 1));
    }
    // The types module lists what each build's BTF holds, in its own order (a bpf_loop callback's
    // context struct is there only where bpf_loop is): a type both have must be the same, and
    // the globals' sections must be in both.
    for (name, text) in &m_types {
        match c_types.get(name) {
            Some(other) if other != text => differs(&format!("struct {name}")),
            None if ["bss", "rodata", "data"].contains(&name.as_str()) => differs(&format!("no {name} section")),
            _ => {}
        }
    }
    let open = "ObjectSkeletonConfigBuilder::new(&DATA)";
    assert!(modern.contains(open), "the phases skeleton no longer opens its object as {open}");
    let mut merged = modern.replacen(
        open,
        "ObjectSkeletonConfigBuilder::new(crate::probe::flavour::object(&DATA, &DATA_COMPAT))",
        1,
    );
    let end = merged.rfind('}').expect("the skeleton module's closing brace");
    merged.insert_str(end, &c_data.replacen("static DATA:", "static DATA_COMPAT:", 1));
    fs::write(skel, merged).expect("writing the phases skeleton");
}

/// A skeleton without its object bytes as (everything but the `types` module, each type of that
/// module by name with its impls).
fn split_types(skel: &str) -> (String, std::collections::BTreeMap<String, String>) {
    let start = skel.find("    pub mod types {").expect("a skeleton has a types module");
    let end = start + skel[start..].find("\n    }\n").expect("the types module ends") + 7;
    let mut types = std::collections::BTreeMap::new();
    let body = &skel[start..end];
    let mut chunk = String::new();
    let mut flush = |chunk: &mut String| {
        let name = chunk
            .split_whitespace()
            .skip_while(|w| !["struct", "enum", "union", "type"].contains(w))
            .nth(1)
            .map(|n| n.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_').to_owned());
        if let Some(name) = name {
            types.insert(name, std::mem::take(chunk));
        }
        chunk.clear();
    };
    for line in body.lines().skip(1) {
        if line.starts_with("        #[derive(") {
            flush(&mut chunk);
        }
        chunk.push_str(line);
        chunk.push('\n');
    }
    flush(&mut chunk);
    (format!("{}{}", &skel[..start], &skel[end..]), types)
}

/// A generated skeleton as (everything but its object bytes, the `static DATA` item).
fn split_data(skel: &str) -> (String, String) {
    let start = skel.find("static DATA:").expect("a skeleton holds static DATA");
    // The attribute line before it (link_section) belongs to the item.
    let start = skel[..start].rfind("#[").filter(|&a| !skel[a..start].contains(';')).unwrap_or(start);
    let len = skel[start..].find("];").expect("static DATA ends with ];") + 2;
    let head = format!("{}{}", &skel[..start], &skel[start + len..]);
    (head, skel[start..start + len].to_owned())
}

/// IOPATH_VERSION for `iopath --version`: the crate's version and the commit checked out when it
/// was built ("commit unknown" outside a git checkout). Uncommitted edits are not flagged: that
/// would rerun this script, and every BPF compile with it, on each edit.
fn version() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => format!("commit {c}"),
        None => "commit unknown".to_owned(),
    };
    println!("cargo:rustc-env=IOPATH_VERSION={} ({commit})", env::var("CARGO_PKG_VERSION").unwrap_or_default());
    // A new commit or checkout changes HEAD or the branch it points to.
    for f in [".git/HEAD"] {
        if Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        let p = format!(".git/{r}");
        if Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
