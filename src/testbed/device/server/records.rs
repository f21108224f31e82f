//! The server's bookkeeping, off the timing thread: every thread that answers a request sends
//! a [`Note`] of it to one stats thread (normal priority), which owns the [`Stats`] and answers
//! the control thread's snapshots. The timing thread never waits on a lock the control thread
//! holds while it encodes histograms, and never encodes one itself.
//!
//! A request's note is sent before its reply leaves, so a snapshot asked for after a
//! workload saw its last request complete holds that request.

use std::sync::mpsc::{self, Receiver, Sender};

use crate::testbed::device::model::Dispatch;
use crate::testbed::device::stats::{Snapshot, Stats};

/// What the stats thread is told.
pub enum Note {
    /// A request answered under the model: its dispatch, its size, when the reply left, whether
    /// its data transfer failed, and how long the emulator took from its arrival until the
    /// model had it (the data copy and the hand-over).
    Answered {
        d: Dispatch,
        len: u64,
        replied_ns: u64,
        failed: bool,
        emulator_ns: u64,
    },
    /// A request answered at native speed (the model off).
    Unmodelled { failed: bool },
    /// A write the store had no room for.
    ImageFull,
    /// Send a snapshot back.
    Snapshot(Sender<Snapshot>),
}

/// A handle to send notes with (one per thread that answers requests).
#[derive(Clone)]
pub struct Recorder(Sender<Note>);

impl Recorder {
    pub fn note(&self, n: Note) {
        // The stats thread ends only after every recorder is gone.
        let _ = self.0.send(n);
    }

    /// The stats as of now: every note sent before this call is in it.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = mpsc::channel();
        self.note(Note::Snapshot(tx));
        rx.recv().ok()
    }
}

/// Starts the stats thread, for a store holding up to `budget` bytes in memory (0: a file
/// store); it ends when every [`Recorder`] is dropped.
pub fn start(budget: u64) -> std::io::Result<(Recorder, std::thread::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("device-stats".into())
        .spawn(move || {
            // Bookkeeping is not on time's path: it yields to everything that is.
            let _ = crate::sys::rt::set_normal();
            keep(rx, budget)
        })?;
    Ok((Recorder(tx), handle))
}

fn keep(rx: Receiver<Note>, budget: u64) {
    let mut stats = Stats::default();
    for note in rx {
        match note {
            Note::Answered {
                d,
                len,
                replied_ns,
                failed,
                emulator_ns,
            } => stats.record(&d, len, replied_ns, failed, emulator_ns),
            Note::Unmodelled { failed } => stats.record_unmodelled(failed),
            Note::ImageFull => stats.image_full += 1,
            Note::Snapshot(back) => {
                let mut snap = stats.snapshot();
                snap.memory_budget = budget;
                let _ = back.send(snap);
            }
        }
    }
}
