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

extern "C" fn on_signal_exit(sig: libc::c_int) {
    // Async-signal-safe only: unlink(2) of the live temporary files, then the default action.
    crate::output::remove_live_temps();
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// For the commands that have no partial result to give (compare, report, study, flamegraph
/// --diff, doctor...): SIGINT/SIGTERM/SIGHUP end them at once with the signal's own status (a
/// shell's 130, 143), even inside a blocking open of a FIFO with no writer (the stop request's
/// handler had let the open restart forever), after removing any temporary file they were
/// writing.
pub fn on_signals_exit() {
    INSTALL.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler is async-signal-safe (see on_signal_exit).
            unsafe { libc::signal(sig, on_signal_exit as *const () as libc::sighandler_t) };
        }
    });
}

/// Requests the stop from inside (a long-running command's loop ended: its helpers follow).
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}
