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
