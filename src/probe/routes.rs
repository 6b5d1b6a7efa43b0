//! The routes an I/O can take and whether this kernel's plan follows each: what `doctor` lists
//! (pure: the plan and the kernel's facts in).

use serde::Serialize;

use super::facts::KernelFacts;
use super::hooks::Feature;
use super::plan::Plan;

/// A route an I/O can take, and what following it needs on this kernel. `iopath doctor` lists
/// every route with whether it is followed here, from the same plan the trace session carries out.
pub struct RouteSpec {
    pub name: &'static str,
    /// The features (hooks::Feature) whose hooks it needs, every one.
    pub features: &'static [Feature],
    /// Kernel symbols it needs: every entry, each by any of its names (renames across kernels).
    pub symbols: &'static [&'static [&'static str]],
    /// Said of it even when followed: what it shows, or what stays out of reach.
    pub note: &'static str,
    /// Not followed on any kernel yet, and why.
    pub unsupported: Option<&'static str>,
    /// What a missing symbol means for this route, when more than "not in this kernel".
    pub without_symbols: Option<&'static str>,
}

const SYSCALLS: Feature = Feature::Syscalls;
const URING: Feature = Feature::Uring;
const BLOCK: Feature = Feature::BlockCore;
/// Direct I/O on files (iomap) and on block devices (async completions have their own end_io
/// since 5.16; blkdev_bio_end_io serves both before).
const DIRECT_IO: &[&[&str]] = &[&["iomap_dio_bio_end_io"], &["blkdev_bio_end_io_async", "blkdev_bio_end_io"]];

pub const ROUTES: &[RouteSpec] = &[
    RouteSpec {
        name: "io_uring from the submitting thread",
        features: &[BLOCK, SYSCALLS, URING],
        symbols: DIRECT_IO,
        note: "O_DIRECT reads and writes; ends when the application took the CQE from its ring (bounded by looks at the ring's head)",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring SQPOLL (SQ thread)",
        features: &[BLOCK, URING],
        symbols: DIRECT_IO,
        note: "the bundled generator times its pickup and its take from the CQ ring; a traced command's are bounded by looks at the SQ ring's tail and the CQ ring's head",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring io-wq (worker)",
        features: &[BLOCK, SYSCALLS, URING, Feature::UringAsync],
        symbols: DIRECT_IO,
        note: "IOSQE_ASYNC and the kernel's own punts: the io-wq sub-phase is punt -> the worker queued the bio",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "libaio",
        features: &[BLOCK, SYSCALLS],
        symbols: &[&["aio_complete_rw"]],
        note: "io_submit claims each iocb, io_getevents reaps it",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "sync read/write/pread/preadv2 (and writes)",
        features: &[BLOCK, SYSCALLS],
        symbols: &[&["iomap_dio_bio_end_io"], &["bio_wait_end_io", "submit_bio_wait_endio", "blkdev_bio_end_io_simple"], &["blkdev_bio_end_io"]],
        note: "O_DIRECT I/O inside the syscall, RWF_HIPRI too (buffered calls: the page-cache route)",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "throttled (blk-throttle, cgroup I/O limits)",
        features: &[BLOCK],
        symbols: DIRECT_IO,
        note: "bios a kworker releases later are followed from any context; the throttled sub-phase is start -> released",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "split bios and merged requests",
        features: &[BLOCK],
        symbols: &[&["bio_chain_endio"]],
        note: "every request of an I/O stamps it: device = first issue -> last completion",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "stacked devices (dm-linear, dm-crypt, md raid1)",
        features: &[BLOCK, Feature::Stacked],
        symbols: &[&["clone_endio", "raid1_end_read_request"]],
        note: "clones on the lower devices are walked back to the top bio; stacked sub-phases: down (dm map, encrypt) and up (decrypt)",
        unsupported: None,
        without_symbols: Some(
            "no device-mapper or md module is loaded here (clone_endio, raid1_end_read_request not in /proc/kallsyms): \
             there is no stacked device to follow; load dm_mod / md_mod (creating a device does) and run doctor again",
        ),
    },
    RouteSpec {
        name: "buffered sync read/write (the page cache)",
        features: &[SYSCALLS, Feature::ContextSwitches],
        symbols: &[],
        note: "each call split into on CPU, waited and run queue; its readahead counted (readahead \
               tracepoints: 6.10+), hit ratio, requests per read; copy_file_range and sendfile (cp) too",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "fsync, fdatasync, O_SYNC/O_DSYNC writes",
        features: &[SYSCALLS, Feature::RunQueue],
        symbols: &[],
        note: "blocked time split by what its disk did meanwhile: its own data writeback, the journal commit (jbd2; of which the commit's flush), a cache flush / FUA; dirty throttling in writes",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "writeback (the flushers, sync calls, reclaim)",
        features: &[BLOCK, Feature::Writeback],
        symbols: &[],
        note: "the pages the traced processes dirtied, per file: who dirtied them (pid, io cgroup), bytes \
               written back by reason, each request's block and device time",
        unsupported: None,
        without_symbols: None,
    },
    RouteSpec {
        name: "io_uring buffered I/O (the page cache)",
        features: &[SYSCALLS, URING],
        symbols: &[],
        note: "io_uring_enter -> posted (inline from the cache, or the wait for a page and the retry, or an io-wq \
               punt) -> reaped; the readahead its submitting calls queue",
        unsupported: None,
        without_symbols: None,
    },
];

/// Whether a route is followed on this kernel, and if not, what is missing.
#[derive(Clone, Debug, Serialize)]
pub struct RouteStatus {
    pub name: &'static str,
    pub followed: bool,
    /// What is missing (tracepoints, symbols), or why it is not followed at all.
    pub missing: Vec<String>,
    pub note: &'static str,
}

/// Which routes the plan follows on this kernel: every feature a route needs is on and every
/// symbol it compares against is in /proc/kallsyms (under one of its names). Pure.
pub fn routes(plan: &Plan, facts: &KernelFacts) -> Vec<RouteStatus> {
    ROUTES
        .iter()
        .map(|r| {
            let mut missing: Vec<String> = r
                .features
                .iter()
                .filter(|f| !plan.is_on(**f))
                .map(|f| {
                    let s = plan.state(*f);
                    match &s.why {
                        Some(why) => format!("{}: {why}", f.title()),
                        None => f.title().to_owned(),
                    }
                })
                .collect();
            let absent: Vec<String> = r
                .symbols
                .iter()
                .filter(|names| !names.iter().any(|n| facts.symbols.contains(*n)))
                .map(|names| names.join(" / "))
                .collect();
            // A feature off for want of the same module says it already.
            if !absent.is_empty() && (missing.is_empty() || r.without_symbols.is_none()) {
                missing.push(r.without_symbols.map_or_else(
                    || {
                        format!(
                            "kernel symbol {} not in /proc/kallsyms (hidden from non-root, or not in this kernel)",
                            absent.join(", ")
                        )
                    },
                    str::to_owned,
                ));
            }
            if let Some(why) = r.unsupported {
                missing.push(why.to_owned());
            }
            RouteStatus { name: r.name, followed: missing.is_empty(), missing, note: r.note }
        })
        .collect()
}
