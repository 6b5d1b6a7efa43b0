//! The only users of libbpf-rs: the generated skeletons, what this kernel can attach
//! (`features`), and (later) the tracing session.

pub mod features;
pub mod log;
pub mod tracefs;

#[allow(clippy::all, dead_code, non_camel_case_types, non_snake_case, non_upper_case_globals)]
pub(crate) mod doctor_skel {
    include!(concat!(env!("OUT_DIR"), "/doctor.skel.rs"));
}
