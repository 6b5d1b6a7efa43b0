//! The one stop request of a run: SIGINT/SIGTERM set it, and everything that loops (the
//! generator's workers, a layout, a sweep, a traced command's wait) polls it. Report building
//! does not read it: a run's outcome records whether it was stopped.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;

static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that asked for the stop (0: none, or a stop from inside).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Relaxed);
}

/// Routes Ctrl-C and SIGTERM to the stop request instead of killing the process mid-run (which
/// would leave a partial layout or, under tracing, nothing written at all). Idempotent.
pub fn on_signals() {
    INSTALL.call_once(|| {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
            libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        }
    });
}

/// True once a stop was requested.
#[inline]
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The signal that stopped the run, if one did (SIGINT, SIGTERM): its report is partial, and the
/// exit status says so the way a shell does (128 + the signal: 130, 143), after the report.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Requests the stop from inside (a long-running command's loop ended: its helpers follow).
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}
