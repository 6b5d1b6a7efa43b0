//! The only users of libbpf-rs: the generated skeletons, what this kernel can attach
//! (`features`), and (later) the tracing session.

pub mod features;
pub mod kallsyms;
pub mod log;
pub mod sampler;
pub mod session;
pub mod tracefs;

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod doctor_skel {
    include!(concat!(env!("OUT_DIR"), "/doctor.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod phases_skel {
    include!(concat!(env!("OUT_DIR"), "/phases.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod counts_skel {
    include!(concat!(env!("OUT_DIR"), "/counts.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod stacks_skel {
    include!(concat!(env!("OUT_DIR"), "/stacks.skel.rs"));
}

// The Rust mirror of bpf/phases.h must match the compiled layout.
const _: () = assert!(
    std::mem::size_of::<phases_skel::types::hist>() == (crate::model::HIST_SLOTS + 2) * 8,
    "struct hist in bpf/phases.h and model::HIST_SLOTS disagree"
);

const _: () = assert!(
    std::mem::size_of::<phases_skel::types::io_record>() == crate::events::RECORD_SIZE,
    "struct io_record in bpf/phases.h and events::RECORD_SIZE disagree"
);

// The enums of bpf/phases.h and their Rust mirrors in model.rs (one side renumbered without the
// other fails the build, not a report).
mod mirrors {
    use super::phases_skel::types::{counter, phase, route_kind, ud_bits};
    use crate::model::{Counter, Phase, RouteKind, NR_COUNTERS, NR_PHASES, NR_ROUTE_KINDS};

    const _: () = assert!(phase::NR_PHASES.0 as usize == NR_PHASES);
    const _: () = assert!(ud_bits::UD_SLOT_BITS.0 == crate::loadgen::UD_SLOT_BITS);
    const _: () = assert!(counter::NR_COUNTERS.0 as usize == NR_COUNTERS);
    const _: () = assert!(route_kind::NR_ROUTE_KINDS.0 as usize == NR_ROUTE_KINDS);
    const _: () = assert!(phase::PH_DEVICE.0 == Phase::Device as u32);
    const _: () = assert!(phase::PH_TOTAL.0 == Phase::Total as u32);
    const _: () = assert!(phase::PH_NVME_END.0 == Phase::NvmeEnd as u32);
    const _: () = assert!(phase::PH_PICKUP.0 == Phase::Pickup as u32);
    const _: () = assert!(phase::PH_IOWQ.0 == Phase::Iowq as u32);
    const _: () = assert!(phase::PH_THROTTLED.0 == Phase::Throttled as u32);
    const _: () = assert!(counter::C_READS.0 == Counter::Reads as u32);
    const _: () = assert!(counter::C_RB_DROPS.0 == Counter::RbDrops as u32);
    const _: () = assert!(counter::C_NO_BLOCK_IO.0 == Counter::NoBlockIo as u32);
    const _: () = assert!(counter::C_UNLINKED.0 == Counter::Unlinked as u32);
    const _: () = assert!(route_kind::RK_SYNC.0 == RouteKind::Sync as u32);
    const _: () = assert!(route_kind::RK_HIPRI.0 == RouteKind::Hipri as u32);
    // Every variant, not only the spot checks above: the last one of each sits at NR - 1.
    const _: () = assert!(Counter::Unlinked as usize == NR_COUNTERS - 1);
    const _: () = assert!(phase::PH_STACK_UP.0 == Phase::StackUp as u32);
    const _: () = assert!(route_kind::RK_STACKED.0 == RouteKind::Stacked as u32);
    const _: () = assert!(phase::PH_APP_SUBMIT.0 == Phase::AppSubmit as u32);
    const _: () = assert!(phase::PH_TRACER_REAP.0 == Phase::TracerReap as u32);
    const _: () = assert!(Phase::TracerReap as usize == NR_PHASES - 1);
    const _: () = assert!(RouteKind::Stacked as usize == NR_ROUTE_KINDS - 1);
}
