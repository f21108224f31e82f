//! What the exerciser made durable, and the judge of a file read back after a power cut.
//!
//! A crash campaign (issue 32) runs the exerciser on an emulated disk whose server logs every
//! request with its CLOCK_MONOTONIC arrival and reply times, rebuilds the disk as a power cut at
//! a time T would leave it, mounts it, reads the exerciser's file back and asks [`judge`]
//! whether what it reads is allowed. This module is the exerciser's side of that:
//!
//! - A [`Record`] of the run: every operation with its start and end on CLOCK_MONOTONIC (the
//!   server's clock; [`crate::base::sys::rt::monotonic_ns`], two vDSO reads per operation into a
//!   preallocated vector), its arguments (so the model can be re-run: data comes from the seed
//!   and the operation's number, [`super::model`]), and whether it is a durability point.
//!   Durability points are what the filesystem promises to keep (POSIX and the Linux man
//!   pages): `fsync`, `fdatasync` (data and the size needed to read it back, all the judge
//!   looks at), `syncfs`, the set-up (the created, emptied file, fsynced with its directory) and
//!   a remount (a clean unmount writes everything). `msync(MS_SYNC)` (mapwrite) and
//!   `RWF_DONTCACHE` are not: the list errs on the side of no false alarm, and a point left
//!   out only weakens what is required. (The exerciser has no O_SYNC/O_DSYNC descriptor; such a
//!   write promises only its own range, not the file, so it would need a per-range rule.)
//! - [`judge`]: a pure function of the record, the cut time and what was found. See
//!   [`judge`] for the rule and its cost.
//!
//! The API for a campaign: set [`super::Exercise::durable`] to a [`Sink`] (or
//! [`super::Config::record`] for an [`super::Exerciser`] of one's own); after the run,
//! [`Sink::take`] gives each exerciser's [`Record`]; then [`Judge::new`] (or [`judge`]) per
//! record, and [`Judge::judge`] per crash state, with [`Found`] read from the crashed file.
//! The exerciser's output is the same with or without a record.

mod judge;
mod shift;
mod verdict;
mod whence;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use judge::{judge, Judge};
pub use verdict::{Class, Found, Mismatch, Problem, Verdict};
pub use whence::{Seen, Whence};

use super::ops::{Op, OpKind};

/// What an event of the record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// The file created, emptied, and fsynced with its directory (version 0: empty).
    Setup,
    /// Operation number `n` (from 1); version `n` is the file after it.
    Op(u64, Op),
    /// The testbed unmounted and mounted again after operation `n`.
    Remount(u64),
}

impl What {
    /// The version of the file this event leaves: the number of operations done.
    pub fn version(&self) -> u64 {
        match *self {
            What::Setup => 0,
            What::Op(n, _) | What::Remount(n) => n,
        }
    }
}

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            What::Setup => f.write_str("set-up (file created and fsynced with its directory)"),
            What::Op(n, op) => write!(f, "{n} {}", op.kind),
            What::Remount(n) => write!(f, "remount after {n}"),
        }
    }
}

/// One event on CLOCK_MONOTONIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub what: What,
    /// Nanoseconds, read before the first system call of the event.
    pub start_ns: u64,
    /// Nanoseconds, read after the event's last system call returned.
    pub end_ns: u64,
    /// Whether everything before the event's end must survive a later power cut.
    pub durable: bool,
}

/// Whether an operation of `kind` is a durability point of the whole file.
pub fn is_durability_point(kind: OpKind) -> bool {
    matches!(kind, OpKind::Fsync | OpKind::Fdatasync | OpKind::Syncfs)
}

/// The record of one exerciser's run: enough to re-run its model and to know, for any time,
/// what had been made durable and which operations had started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The exerciser's file.
    pub file: PathBuf,
    /// The exerciser's seed (the data of every write).
    pub seed: u64,
    /// `--max-len` and `--max-op-len` of the run (the model's sizes).
    pub max_len: u64,
    pub max_op_len: u64,
    /// Events in the order they happened (their times never go back).
    pub events: Vec<Event>,
}

impl Record {
    /// An empty record with room for `capacity` events (so that recording allocates nothing
    /// until then).
    pub fn new(file: PathBuf, seed: u64, max_len: u64, max_op_len: u64, capacity: usize) -> Self {
        Self {
            file,
            seed,
            max_len,
            max_op_len,
            events: Vec::with_capacity(capacity),
        }
    }

    /// Appends an event; its durability follows [`is_durability_point`] (set-up and
    /// remounts always are).
    pub fn push(&mut self, what: What, start_ns: u64, end_ns: u64) {
        let durable = match what {
            What::Setup | What::Remount(_) => true,
            What::Op(_, op) => is_durability_point(op.kind),
        };
        self.events.push(Event {
            what,
            start_ns,
            end_ns,
            durable,
        });
    }

    /// Makes the last event an ordinary one (not a durability point): it failed.
    pub fn forget_last(&mut self) {
        if let Some(e) = self.events.last_mut() {
            e.durable = false;
        }
    }

    /// The operations in order (operation `n` at index `n - 1`).
    pub fn ops(&self) -> impl Iterator<Item = (u64, Op)> + '_ {
        self.events.iter().filter_map(|e| match e.what {
            What::Op(n, op) => Some((n, op)),
            _ => None,
        })
    }
}

/// Where a workload run leaves its exercisers' records: shared with the caller, who takes them
/// after the run. Not a parameter: it compares equal to any other and is never serialized.
#[derive(Clone, Default)]
pub struct Sink(Arc<Mutex<Vec<(u32, Record)>>>);

impl Sink {
    /// Stores exerciser `w`'s record.
    pub fn put(&self, w: u32, r: Record) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((w, r));
    }

    /// The records stored so far, by exerciser number, leaving the sink empty.
    pub fn take(&self) -> Vec<(u32, Record)> {
        let mut v = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_by_key(|(w, _)| *w);
        v
    }
}

impl PartialEq for Sink {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

#[cfg(test)]
mod tests;
