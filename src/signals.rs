//! SIGINT and SIGTERM become a flag that long work polls, so that a stopped run unwinds through
//! the testbed guards (unmount, detach, delete) instead of dying with mounts left behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::Interrupted;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the handlers once. Safe to call more than once.
pub fn install() {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registration only fails for signals that may not be caught; these may.
        let _ = signal_hook::flag::register(sig, Arc::clone(flag));
    }
}

/// True once SIGINT or SIGTERM has arrived.
pub fn interrupted() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// `Err(Interrupted)` once a signal has arrived; call it between operations.
pub fn check() -> Result<(), Interrupted> {
    if interrupted() {
        Err(Interrupted("SIGINT/SIGTERM"))
    } else {
        Ok(())
    }
}
