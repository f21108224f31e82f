//! SIGINT and SIGTERM become a flag that long work polls, so that a stopped run unwinds through
//! the testbed guards (unmount, detach, delete) instead of dying with mounts left behind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::Interrupted;

/// The number of the signal that arrived (the last one, if both did); 0 while none has.
static SIGNAL: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Installs the handlers once. Safe to call more than once.
pub fn install() {
    let slot = SIGNAL.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registration only fails for signals that may not be caught; these may.
        let _ = signal_hook::flag::register_usize(sig, Arc::clone(slot), sig as usize);
    }
}

/// The signal that arrived, if one has.
fn arrived() -> Option<i32> {
    let n = SIGNAL.get()?.load(Ordering::Relaxed);
    (n != 0).then_some(n as i32)
}

/// True once SIGINT or SIGTERM has arrived.
pub fn interrupted() -> bool {
    arrived().is_some()
}

/// `Err(Interrupted)` once a signal has arrived; call it between operations.
pub fn check() -> Result<(), Interrupted> {
    match arrived() {
        Some(sig) => Err(Interrupted(sig)),
        None => Ok(()),
    }
}
