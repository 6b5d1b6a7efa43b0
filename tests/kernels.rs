//! The hook plan on every kernel of the VM rig's matrix, from the facts each one recorded
//! (tests/data/kernels/<version>.json, written by `iopath doctor --facts` in the rig's guests
//! and on the build host): pure, no kernel needed. Also keeps docs/kernels.md's kernel table equal to
//! what the plan says (IOPATH_BLESS=1 rewrites it).

use std::path::{Path, PathBuf};

use iopath::probe::facts::KernelFacts;
use iopath::probe::hooks::{Feature, Flavour};
use iopath::probe::options::PlanOptions as Options;
use iopath::probe::plan::{kernel_table, plan, Choice};
use iopath::probe::routes::routes;

const KERNELS: &[(&str, &str)] = &[
    ("5.10", "5.10"),
    ("6.1", "6.1"),
    ("6.12", "6.12"),
    ("6.18 (build host)", "6.18"),
    ("7.2", "7.2"),
    ("7.3-rc7", "7.3"),
];

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernels")
}

fn facts(v: &str) -> KernelFacts {
    KernelFacts::read(&data().join(format!("{v}.json"))).unwrap()
}

fn route_followed(v: &str, name: &str) -> bool {
    let k = facts(v);
    let p = plan(&k, &Options::default());
    routes(&p, &k).iter().find(|r| r.name.starts_with(name)).unwrap_or_else(|| panic!("no route {name}")).followed
}

#[test]
fn every_matrix_kernel_has_a_recording() {
    for (_, v) in KERNELS {
        let k = facts(v);
        assert!(k.release.starts_with(v), "{v}: recorded on {}", k.release);
        assert!(k.unseen.is_empty(), "{v}: the recording missed {:?}", k.unseen);
        assert!(k.has_tracepoint("block", "block_rq_issue"), "{v}: no block tracepoints recorded");
    }
}

#[test]
fn on_5_10_the_compat_build_traces_and_io_uring_is_named_off() {
    let k = facts("5.10");
    let p = plan(&k, &Options::default());
    // No bpf_loop, BPF atomics or task storage: the compat build (bpf/compat.bpf.h).
    assert_eq!(p.flavour, Flavour::Compat);
    assert!(p.fatal().is_none(), "{:?}", p.fatal());
    for f in [Feature::BlockCore, Feature::Syscalls, Feature::ContextSwitches, Feature::RunQueue] {
        assert!(p.is_on(f), "5.10: {f} off: {:?}", p.state(f).why);
    }
    // block_bio_queue(request_queue, bio): the bio is the second argument there.
    assert!(p.bio_queue_q);
    // io_uring_complete(ctx, user_data, res, cflags) names no request: nothing to follow.
    let u = p.state(Feature::Uring);
    assert!(!u.on && u.why.as_deref().unwrap().contains("hands over no request"), "{u:?}");
    // The NVMe tracepoints need module BTF for tp_btf: 5.10 has none (doctor said "tp_btf
    // (module BTF)" there before); so does fexit on nvme_queue_rq: the doorbell is a kprobe.
    let nvme = p.state(Feature::NvmeSplit);
    assert!(!nvme.on && nvme.why.as_deref().unwrap().contains("no BTF"), "{nvme:?}");
    let db = p.hooks.iter().find(|h| h.name == "kprobe:nvme_queue_rq").unwrap();
    assert!(matches!(db.choice, Choice::Load { .. }), "{db:?}");
    // Every later kernel of the matrix takes the modern build, and none has the old prototypes.
    for v in ["6.1", "6.12", "6.18", "7.2", "7.3"] {
        let p = plan(&facts(v), &Options::default());
        assert_eq!(p.flavour, Flavour::Modern, "{v}");
        assert!(!p.bio_queue_q && p.is_on(Feature::Uring), "{v}");
    }
    // Forced (IOPATH_BPF_BUILD=compat, how the build host tests it), a modern kernel loads it too.
    let forced = plan(&facts("6.18"), &Options { force_compat: true, ..Default::default() });
    assert_eq!(forced.flavour, Flavour::Compat);
    assert!(forced.fatal().is_none() && forced.is_on(Feature::Uring));
}

#[test]
fn on_6_1_io_uring_is_followed_through_its_older_tracepoint() {
    let p = plan(&facts("6.1"), &Options::default());
    assert!(p.fatal().is_none() && p.is_on(Feature::Uring));
    let h = p.hooks.iter().find(|h| h.name == "io_uring:io_uring_submit_req").unwrap();
    assert!(matches!(&h.choice, Choice::Load { target, .. } if target == "io_uring_submit_sqe"), "{h:?}");
    // Readahead tracepoints arrived in 6.10: the page-cache extras are off, named.
    let pc = p.state(Feature::PageCacheExtras);
    assert!(!pc.on && pc.why.as_deref().unwrap().contains("page_cache_sync_ra"), "{pc:?}");
}

#[test]
fn on_7_x_writeback_loads_through_the_new_dentry_and_sync_io_through_the_renamed_end_io() {
    for v in ["7.2", "7.3"] {
        let k = facts(v);
        assert!(!k.btf.contains("dentry.d_u") && k.btf.contains("dentry.d_alias"), "{v}: {:?}", k.btf);
        assert!(k.symbols.contains("bio_wait_end_io") && !k.symbols.contains("submit_bio_wait_endio"));
        let p = plan(&k, &Options::default());
        assert!(p.fatal().is_none() && p.is_on(Feature::Writeback), "{v}: {:?}", p.state(Feature::Writeback));
        // jbd2's commit tracepoints are gone in 7.x: that feature alone is off.
        let j = p.state(Feature::Journal);
        assert!(!j.on && j.why.as_deref().unwrap().contains("jbd2"), "{v}: {j:?}");
        assert!(route_followed(v, "sync read"), "{v}");
    }
}

#[test]
fn a_route_is_followed_only_when_every_symbol_it_needs_is_there() {
    let mut k = facts("6.12");
    let p = plan(&k, &Options::default());
    assert!(routes(&p, &k).iter().find(|r| r.name.starts_with("sync read")).unwrap().followed);
    // One of three end_io handlers missing (the others present) is enough to say no.
    k.symbols.remove("iomap_dio_bio_end_io");
    let r = routes(&p, &k).into_iter().find(|r| r.name.starts_with("sync read")).unwrap();
    assert!(!r.followed && r.missing.join(" ").contains("iomap_dio_bio_end_io"), "{r:?}");
}

#[test]
fn where_fentry_is_refused_the_doorbell_uses_kprobes_or_is_named_off() {
    // The build host refuses both: off with the kernel's reason, the trace still runs.
    let p = plan(&facts("6.18"), &Options::default());
    assert!(p.fatal().is_none());
    let d = p.state(Feature::Doorbell);
    assert!(!d.on && d.why.is_some(), "{d:?}");
    // The rig's kernels take fexit.
    let p = plan(&facts("6.12"), &Options::default());
    assert!(
        p.is_on(Feature::Doorbell)
            && p.programs(iopath::probe::hooks::Obj::Phases).iter().any(|(_, n, _)| *n == "nvme_queue_rq_exit")
    );
}

#[test]
fn the_docs_kernel_table_is_the_plans() {
    let kernels: Vec<(String, KernelFacts)> = KERNELS.iter().map(|(l, v)| (l.to_string(), facts(v))).collect();
    let table = kernel_table(&kernels);
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kernels.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (begin, end) = ("<!-- kernel-table: generated by tests/kernels.rs -->\n", "<!-- /kernel-table -->");
    let a = readme.find(begin).expect("docs/kernels.md has the kernel table markers") + begin.len();
    let b = readme[a..].find(end).expect("docs/kernels.md has the kernel table's end marker") + a;
    if std::env::var_os("IOPATH_BLESS").is_some() {
        std::fs::write(&readme_path, format!("{}{table}{}", &readme[..a], &readme[b..])).unwrap();
        return;
    }
    assert_eq!(
        &readme[a..b],
        table,
        "docs/kernels.md's kernel table is stale: IOPATH_BLESS=1 cargo test --test kernels"
    );
}
