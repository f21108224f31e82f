//! What a tree workload (`create`, `tree`, `fdtree`) made durable, for its crash points
//! (`--crash-points`, see `lab::crash`): a record kept while it runs, and the judge of a
//! crash state against it.
//!
//! The record holds, on CLOCK_MONOTONIC (the emulated disk's server's clock, the one a cut is
//! timed on; [`crate::base::sys::rt::monotonic_ns`], as the exerciser's record):
//! - per file, when it was whole: the end of its own fsync (`--fsync file`), else the end of its
//!   close; and when its removal (unlink) started;
//! - every syncfs (`--fsync end|phase|last`): its start and end, and who ran it (a worker, or
//!   a phase of its own after every worker's operations).
//!
//! A file is found by its slot: an index into the workload's own naming scheme ([`Naming`]),
//! never a stored name. The record costs 16 bytes per file (two `u64` times) plus 24 per
//! syncfs, and is kept only when crash points follow the run. The workloads write
//! deterministic bytes (every file the same buffer over again, see [`Expected`]), so a file's
//! content is known from the workload's parameters and seed, and its BLAKE3 is computed once.
//!
//! The judge of a cut at time T ([`judge`]) asks, of every file, what T promises:
//! - durable (its fsync ended by T, or a syncfs that ended by T started after it was whole),
//!   and its removal not started by T: it must be there with its exact size and bytes;
//! - removed, and a syncfs that ended by T started after the removal was done: it must be gone;
//! - anything else may be either way. Renames: these workloads make none.
//!
//! Directories: a durable file's directories must be there. Its own fsync makes its name and
//! its parent directories durable on the three filesystems fsgauge builds: ext4 commits the
//! jbd2 transaction that holds the file's creation, and every earlier transaction (the mkdir of
//! its directories) is committed before it (no journal: `ext4_sync_parent` syncs new parents);
//! xfs forces its log up to the file's last change, which lies after the creation and the
//! mkdirs in the one ordered log; btrfs logs a new inode with its new dentry and its new
//! ancestors (`btrfs_log_inode_parent`), or falls back to a full transaction commit.
//!
//! Testing the judge (debug builds only, as the exerciser's): `FSGAUGE_CRASH_INJECT` set to
//! `corrupt:OFFSET` flips the byte at OFFSET of the first durable file of each state before it
//! is read, `truncate:SIZE` cuts that file to SIZE, and `forget` drops every second
//! durability point (fsync or syncfs) from the record: a corruption or a cut must be found at
//! that file, and forgetting a promise must never make a failure.

mod judge;
mod state;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use judge::{judge, Due, Found, Judged, Point};
pub use state::verifier;

use super::{CrashTally, RunContext};
use crate::results::crash::DurableChecked;

/// The syncfs ran in a phase of its own, after every worker's operations had ended.
pub const ALL_WORKERS: u32 = u32::MAX;

/// Now on CLOCK_MONOTONIC, in nanoseconds (the clock a cut is timed on).
#[inline]
pub fn now() -> u64 {
    crate::base::sys::rt::monotonic_ns()
}

/// One syncfs: when it started and ended, and who ran it (a worker, or [`ALL_WORKERS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sync {
    pub start: u64,
    pub end: u64,
    pub worker: u32,
}

/// How a workload names its files: a slot (its index, `worker × per_worker + n`) to the path
/// relative to the workload directory.
pub trait Naming: Send {
    fn path(&self, slot: u64) -> String;
}

/// The bytes every file of the run holds: `size` bytes, `pattern` over again (the workloads
/// write one buffer over and over), with their BLAKE3.
#[derive(Debug, Clone)]
pub struct Expected {
    pub size: u64,
    pattern: Vec<u8>,
    pub digest: blake3::Hash,
}

impl Expected {
    /// Files of `size` bytes, `pattern` repeated (an empty pattern is one zero byte).
    pub fn new(size: u64, pattern: &[u8]) -> Self {
        let pattern = if pattern.is_empty() {
            vec![0]
        } else {
            pattern.to_vec()
        };
        let mut h = blake3::Hasher::new();
        let mut left = size;
        while left > 0 {
            let n = left.min(pattern.len() as u64) as usize;
            h.update(&pattern[..n]);
            left -= n as u64;
        }
        Self {
            size,
            pattern,
            digest: h.finalize(),
        }
    }

    /// The byte the file holds at `off`.
    #[inline]
    pub fn byte_at(&self, off: u64) -> u8 {
        self.pattern[(off % self.pattern.len() as u64) as usize]
    }

    /// The first offset of `bytes` (read at `off`) below the expected size that does not hold
    /// the expected byte: compared a pattern-long slice at a time.
    pub fn first_diff(&self, off: u64, bytes: &[u8]) -> Option<u64> {
        let len = self.pattern.len() as u64;
        let bytes = &bytes[..self.size.saturating_sub(off).min(bytes.len() as u64) as usize];
        let mut i = 0usize;
        while i < bytes.len() {
            let at = ((off + i as u64) % len) as usize;
            let n = (self.pattern.len() - at).min(bytes.len() - i);
            if bytes[i..i + n] != self.pattern[at..at + n] {
                let j = (0..n).find(|&j| bytes[i + j] != self.pattern[at + j])?;
                return Some(off + (i + j) as u64);
            }
            i += n;
        }
        None
    }
}

/// The record being kept while the workload runs (shared by its workers: each writes only its
/// own files' slots).
pub struct Ledger {
    made: Vec<AtomicU64>,
    gone: Vec<AtomicU64>,
    syncs: Mutex<Vec<Sync>>,
    per_worker: u64,
    fsynced: bool,
}

impl Ledger {
    /// A record of `files` slots, `per_worker` to a worker; `fsynced`: each file is fsynced
    /// (`--fsync file`), so its `made` time is its fsync's end.
    pub fn new(files: u64, per_worker: u64, fsynced: bool) -> Self {
        let slots = |_| AtomicU64::new(0);
        Self {
            made: (0..files).map(slots).collect(),
            gone: (0..files).map(slots).collect(),
            syncs: Mutex::new(Vec::new()),
            per_worker: per_worker.max(1),
            fsynced,
        }
    }

    /// The file in `slot` is whole now (its fsync, or its close, has just returned).
    #[inline]
    pub fn made(&self, slot: u64) {
        if let Some(m) = self.made.get(slot as usize) {
            m.store(now(), Ordering::Relaxed);
        }
    }

    /// The removal of the file in `slot` starts now.
    #[inline]
    pub fn removing(&self, slot: u64) {
        if let Some(g) = self.gone.get(slot as usize) {
            g.store(now(), Ordering::Relaxed);
        }
    }

    /// The removal of every file of `worker` starts now (a removal that finds its entries by
    /// reading directories: the start of the whole removal stands for each one's).
    pub fn removing_all(&self, worker: u64) {
        let t = now();
        let from = worker.saturating_mul(self.per_worker) as usize;
        let to = from.saturating_add(self.per_worker as usize);
        for g in self.gone.iter().take(to).skip(from) {
            g.store(t, Ordering::Relaxed);
        }
    }

    /// A syncfs by `worker` (or [`ALL_WORKERS`]) ran from `start` to now.
    pub fn synced(&self, worker: u32, start: u64) {
        let end = now();
        if let Ok(mut s) = self.syncs.lock() {
            s.push(Sync { start, end, worker });
        }
    }

    /// The record, frozen after the run.
    pub fn into_record(self) -> Record {
        let times = |v: Vec<AtomicU64>| v.into_iter().map(AtomicU64::into_inner).collect();
        Record {
            made: times(self.made),
            gone: times(self.gone),
            syncs: self.syncs.into_inner().unwrap_or_default(),
            per_worker: self.per_worker,
            fsynced: self.fsynced,
        }
    }
}

/// What a run made durable, frozen after it (see the module docs); a time 0 is "never".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// Per slot: when the file was whole (its fsync's end under `fsynced`, else its close's).
    pub made: Vec<u64>,
    /// Per slot: when its removal started.
    pub gone: Vec<u64>,
    pub syncs: Vec<Sync>,
    pub per_worker: u64,
    pub fsynced: bool,
}

impl Record {
    /// The worker that made and removed the file in `slot`.
    pub fn worker(&self, slot: u64) -> u32 {
        u32::try_from(slot / self.per_worker.max(1)).unwrap_or(u32::MAX - 1)
    }

    /// The record with every second durability point forgotten (the `forget` fault): every
    /// second fsynced file is taken as never made, every second syncfs as never run.
    pub fn forget_every_second(mut self) -> Self {
        if self.fsynced {
            for m in self.made.iter_mut().filter(|m| **m != 0).skip(1).step_by(2) {
                *m = 0;
            }
        }
        let mut i = 0;
        self.syncs.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        self
    }
}

/// Leaves the judge of the run's crash states in `ctx` (when crash points follow it): with a
/// record, [`verifier`] over it; without one (`--fsync none` makes nothing durable), a judge
/// that counts the states and says in the crash record that the mount and the checker alone
/// judge them.
pub fn leave_judge(
    ctx: &mut RunContext,
    ledger: Option<Ledger>,
    naming: Box<dyn Naming>,
    expected: Expected,
    words: String,
) {
    if !ctx.crash_points() {
        return;
    }
    let tally: CrashTally = Arc::new(Mutex::new(DurableChecked {
        judge: words,
        ..Default::default()
    }));
    ctx.set_crash_tally(tally.clone());
    let record = ledger.map_or_else(Record::default, Ledger::into_record);
    ctx.set_crash_verifier(verifier(record, naming, expected, tally));
}

/// The words of the crash record for a workload `kind` under `--fsync mode`.
pub fn words(kind: &str, mode: super::fsync::FsyncMode) -> String {
    use super::fsync::FsyncMode;
    match mode {
        FsyncMode::None => format!("{kind} --fsync none makes nothing durable: its crash states are judged by the mount and the checker alone"),
        FsyncMode::File => format!("{kind} --fsync file: each file whose fsync ended before the cut, and not being removed, has its size and bytes"),
        FsyncMode::End | FsyncMode::Phase | FsyncMode::Last => format!("{kind} --fsync {mode}: each file whole before the start of a syncfs that ended before the cut, and not being removed, has its size and bytes; each removal done before such a syncfs is gone"),
    }
}
