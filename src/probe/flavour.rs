//! Which build of the phases object the next open takes (bpf/compat.bpf.h, hooks::Flavour). Both
//! builds share one generated skeleton: build.rs embeds the compat build's bytes beside the
//! modern one's and routes the skeleton's object through `object`, after checking that the two
//! skeletons are identical but for those bytes.

use std::sync::atomic::{AtomicBool, Ordering};

use super::hooks::Flavour;

static COMPAT: AtomicBool = AtomicBool::new(false);

/// The build the next `PhasesSkelBuilder::open` loads (set from the plan just before it).
pub fn set(f: Flavour) {
    COMPAT.store(f == Flavour::Compat, Ordering::SeqCst);
}

/// Called by the generated skeleton (build.rs) for the object's bytes.
pub fn object(modern: &'static [u8], compat: &'static [u8]) -> &'static [u8] {
    if COMPAT.load(Ordering::SeqCst) {
        compat
    } else {
        modern
    }
}
