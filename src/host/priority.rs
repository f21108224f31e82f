//! The CPU priority of a run's threads. On a machine shared with other work (a build, a
//! neighbour's test suite) a workload thread that waits for a CPU makes its phase longer though
//! neither the filesystem nor the disk did anything: the emulated disk's clock stops for the
//! emulator's lateness, not for the workload's wait. So a run takes nice -20, as `fio
//! --nice=-20` or `nice -n -20 fio` would (CFS then gives a thread of the run about 87 times the
//! share of a thread at the default nice 0), before it builds its testbed: every thread it
//! starts after that (workers, mkfs, the emulated disk's server) inherits it. A run started
//! under `nice -n N` with N other than 0 keeps N: the engineer chose it.
//!
//! A phase also waits on the kernel threads of the testbed's filesystem: ext4 commits its
//! journal in `jbd2/loopN-8`, XFS pushes its log tail in `xfsaild/loopN`. Under load, a journal
//! commit that waits for a CPU lengthens every operation waiting on it (a small journal's
//! removes most). So each mount by a run at a raised priority gives that filesystem's threads
//! the run's nice ([`share_with_fs_threads`]); they are the testbed's own and end with its
//! unmount, so nothing is given back. Shared kernel threads (writeback's workers, the loop
//! device's, btrfs's, which are not named by device) keep theirs. The nice each run had is in
//! its result ([`crate::results::Environment::nice`]), with its filesystem threads' nice
//! (`kernel_threads`).

use std::path::Path;

use crate::base::sys::proc::fs_threads;
use crate::base::sys::rt;

/// The nice a run takes when it starts at the default 0.
pub const RUN_NICE: i32 = -20;

/// Takes [`RUN_NICE`] for the calling thread (and the threads it starts after) when it is at
/// the default nice 0 and the kernel allows it (root, or `CAP_SYS_NICE`); returns the nice in
/// effect. A refusal is no error: the run goes on at its nice, which its result records.
pub fn take_for_run() -> i32 {
    let now = rt::nice();
    if now != 0 {
        return now;
    }
    match rt::set_nice(RUN_NICE) {
        Ok(()) => RUN_NICE,
        Err(_) => rt::nice(),
    }
}

/// The calling thread's nice.
pub fn current() -> i32 {
    rt::nice()
}

/// Gives the kernel threads of the filesystem just mounted from block device `dev`
/// (`/dev/loop3`) the calling thread's nice when that is raised (below 0, as a run's is); a
/// nice of 0 or above leaves them, and /proc is not read. A refusal leaves a thread's nice as
/// it was, which the result records ([`crate::results::Environment::kernel_threads`]).
pub fn share_with_fs_threads(dev: &Path) {
    let nice = current();
    let Some(name) = dev
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|_| nice < 0)
    else {
        return;
    };
    for t in fs_threads(Path::new("/proc"), name) {
        if t.nice != nice {
            let _ = rt::set_nice_of(t.tid, nice);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_takes_minus_20_from_0_and_keeps_a_nice_it_was_given() {
        // In a thread of its own: the test harness's threads keep theirs.
        std::thread::spawn(|| {
            let start = current();
            let got = take_for_run();
            if start != 0 {
                assert_eq!(got, start, "a nice other than 0 is kept");
                return;
            }
            if nix::unistd::geteuid().is_root() {
                assert_eq!(got, RUN_NICE);
                assert_eq!(current(), RUN_NICE);
                // A thread started now inherits it.
                let child = std::thread::spawn(current).join().unwrap();
                assert_eq!(child, RUN_NICE);
            } else {
                assert_eq!(got, current(), "what is in effect, taken or not");
            }
            // Started again: the nice it has now is kept.
            assert_eq!(take_for_run(), got);
        })
        .join()
        .unwrap();
    }
}
