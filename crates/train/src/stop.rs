//! The graceful stop of a training run: the first SIGINT or SIGTERM (Ctrl-C, a scheduler's
//! pre-emption) asks the run to stop after the step in flight and write a checkpoint it resumes
//! from exactly; a second one exits at once (the last committed checkpoint stays as it was: a
//! checkpoint is written to a temporary folder and renamed).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Set by the first signal; the run library polls it after every step.
static STOP: AtomicBool = AtomicBool::new(false);
/// Signals received.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// The exit status of a run stopped by a signal (128 + SIGINT, as shells report it).
pub const STOPPED_STATUS: u8 = 130;

extern "C" fn on_signal(_signal: libc::c_int) {
    // Only async-signal-safe work here: atomics, write(2) and _exit(2).
    if SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: _exit ends the process without running anything else.
        unsafe { libc::_exit(i32::from(STOPPED_STATUS)) };
    }
    STOP.store(true, Ordering::SeqCst);
    let message = b"\nstopping after this step and writing a checkpoint; signal again to quit at once\n";
    // SAFETY: write(2) to stderr of a static buffer.
    unsafe { libc::write(2, message.as_ptr().cast(), message.len()) };
}

/// Installs the handler for SIGINT and SIGTERM and returns the flag it sets.
pub fn install() -> &'static AtomicBool {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler above does only async-signal-safe work.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    &STOP
}
