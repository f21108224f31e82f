//! The machine's resources a run takes and gives back: the cleanup ledger and where its entries
//! are found again (`ledger`, `locate`), loop devices, mounts, the page cache (`cache`), memory
//! cgroups (`memlimit`), the dirty-page thresholds (`dirty`) and whether another process changed
//! them during a phase (`writeback`), the run's CPU priority (`priority`), and run directories
//! (`rundir`). Testbeds and emulated disks are built on
//! them; the ledger releases each kind through the teardown of the module that made it.

pub mod cache;
pub mod dirty;
pub mod ledger;
pub mod locate;
pub mod loopdev;
pub mod memlimit;
pub mod mount;
pub mod priority;
pub mod rundir;
pub mod workdir;
pub mod writeback;

/// A suffix no other testbed, run directory or server of this machine has: the process and a
/// counter.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
