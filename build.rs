//! Compiles every `bpf/*.bpf.c` into a libbpf-rs skeleton (`$OUT_DIR/<name>.skel.rs`).

use std::env;
use std::fs;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
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
        // -mcpu=v3: the cmpxchg/xchg of bpf/slots.bpf.h (BPF atomics, kernel 5.12+).
        SkeletonBuilder::new()
            .source(&src)
            .clang_args(["-Wall", "-Werror", "-Ibpf", "-mcpu=v3"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    }
}
