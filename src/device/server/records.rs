//! The server's bookkeeping, off the timing thread: every thread that answers a request
//! pushes a [`Note`] of it on a bounded lock-free queue, and one stats thread (normal
//! priority) takes the queue every [`PERIOD`] (or at once when a snapshot is asked for),
//! keeps the [`Stats`] and answers the control thread's snapshots. The timing thread never
//! waits on a lock the stats thread holds (a normal thread preempted while holding one would
//! hold a real-time thread up for a scheduler slice: milliseconds), never allocates for a
//! note, never encodes a histogram, and does not wake another thread per request (a
//! channel's send would, at each request of a QD32 load). Only when the queue is full (more
//! than [`QUEUE`] requests in one period) do notes go to a locked overflow list.
//!
//! A request's note is appended before its reply leaves, and a snapshot takes the list
//! first, so a snapshot asked for after a workload saw its last request complete holds it.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;

use crate::device::model::Dispatch;
use crate::device::stats::{Snapshot, Stats};

/// How often the stats thread takes the notes when nobody asks.
const PERIOD: Duration = Duration::from_millis(100);
/// Notes the queue holds: a period's requests at 300k a second.
const QUEUE: usize = 32 * 1024;

/// What the stats thread is told.
pub enum Note {
    /// A request answered under the model: its dispatch, its size, when the reply left, whether
    /// its data transfer failed, how long the emulator took from its arrival until the model
    /// had it (the data copy and the hand-over), and how much of its lateness the machine
    /// held the timing thread off its CPU ([`super::heldoff`]). `d` is on the wall clock (the
    /// model's dispatch moved by the disk clock's pause before this reply); `paused_ns` is
    /// how long this reply's lateness stopped the disk's clock (0: it was on time).
    Answered {
        d: Dispatch,
        len: u64,
        replied_ns: u64,
        failed: bool,
        emulator_ns: u64,
        held_off_ns: u64,
        paused_ns: u64,
    },
    /// A request answered at native speed (the model off).
    Unmodelled { failed: bool },
    /// A write the store had no room for.
    ImageFull,
}

/// Where notes wait for the stats thread.
struct Notes {
    queue: ArrayQueue<Note>,
    /// Notes that found the queue full.
    overflow: Mutex<Vec<Note>>,
}

impl Notes {
    /// Every note pushed by now, in `into`.
    fn take(&self, into: &mut Vec<Note>) {
        while let Some(n) = self.queue.pop() {
            into.push(n);
        }
        into.append(&mut self.overflow.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// A handle to note requests with (one per thread that answers them).
#[derive(Clone)]
pub struct Recorder {
    notes: Arc<Notes>,
    asks: Sender<Sender<Snapshot>>,
}

impl Recorder {
    pub fn note(&self, n: Note) {
        if let Err(n) = self.notes.queue.push(n) {
            self.notes
                .overflow
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(n);
        }
    }

    /// The stats as of now: every note made before this call is in it.
    pub fn snapshot(&self) -> Option<Snapshot> {
        let (tx, rx) = mpsc::channel();
        self.asks.send(tx).ok()?;
        rx.recv().ok()
    }
}

/// Starts the stats thread, for a store holding up to `budget` bytes in memory (0: a file
/// store); it ends when every [`Recorder`] is dropped.
pub fn start(budget: u64) -> std::io::Result<(Recorder, std::thread::JoinHandle<()>)> {
    let notes = Arc::new(Notes {
        queue: ArrayQueue::new(QUEUE),
        overflow: Mutex::new(Vec::new()),
    });
    let (asks, asked) = mpsc::channel();
    let shared = notes.clone();
    let handle = std::thread::Builder::new()
        .name("device-stats".into())
        .spawn(move || {
            // Bookkeeping is not on time's path: it yields to everything that is.
            let _ = crate::base::sys::rt::set_normal();
            keep(&shared, &asked, budget)
        })?;
    Ok((Recorder { notes, asks }, handle))
}

fn keep(notes: &Notes, asked: &Receiver<Sender<Snapshot>>, budget: u64) {
    let mut stats = Stats::default();
    let mut taken: Vec<Note> = Vec::with_capacity(QUEUE);
    loop {
        let ask = asked.recv_timeout(PERIOD);
        notes.take(&mut taken);
        for note in taken.drain(..) {
            match note {
                Note::Answered {
                    d,
                    len,
                    replied_ns,
                    failed,
                    emulator_ns,
                    held_off_ns,
                    paused_ns,
                } => {
                    stats.record(&d, len, replied_ns, failed, emulator_ns, held_off_ns);
                    stats.clock.paused(paused_ns);
                }
                Note::Unmodelled { failed } => stats.record_unmodelled(failed),
                Note::ImageFull => stats.image_full += 1,
            }
        }
        match ask {
            Ok(back) => {
                let mut snap = stats.snapshot();
                snap.memory_budget = budget;
                let _ = back.send(snap);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::model::Op;

    fn answered(done_ns: u64, replied_ns: u64) -> Note {
        Note::Answered {
            d: Dispatch {
                id: 1,
                op: Op::Read,
                arrival_ns: 0,
                start_ns: 0,
                done_ns,
                breakdown: Default::default(),
            },
            len: 4096,
            replied_ns,
            failed: false,
            emulator_ns: 1_000,
            held_off_ns: 0,
            paused_ns: replied_ns.saturating_sub(done_ns),
        }
    }

    #[test]
    fn a_snapshot_holds_every_note_made_before_it_was_asked_for() {
        let (rec, handle) = start(7).unwrap();
        for i in 0..1000 {
            rec.note(answered(1_000_000, 1_000_000 + i));
        }
        rec.note(Note::Unmodelled { failed: true });
        rec.note(Note::ImageFull);
        let snap = rec.snapshot().unwrap();
        let s = snap.decode().unwrap();
        assert_eq!(s.counts.reads, 1000);
        assert_eq!(s.counts.unmodelled, 1);
        assert_eq!(s.counts.errors, 1);
        assert_eq!(s.image_full, 1);
        assert_eq!(snap.memory_budget, 7);
        // More notes than the queue holds in one period: none is lost.
        for i in 0..(QUEUE as u64 + 10) {
            rec.note(answered(1_000_000, 1_000_000 + i % 1000));
        }
        let s = rec.snapshot().unwrap().decode().unwrap();
        assert_eq!(s.counts.reads, 1000 + QUEUE as u64 + 10);
        // Later notes come in later snapshots.
        rec.note(answered(0, 600_000));
        let s = rec.snapshot().unwrap().decode().unwrap();
        assert_eq!(
            (s.counts.reads, s.counts.late),
            (1000 + QUEUE as u64 + 10 + 1, 1)
        );
        // Every late reply stopped the disk's clock for its lateness.
        let lates = (0..1000u64).chain((0..QUEUE as u64 + 10).map(|i| i % 1000));
        let (sum, n) = lates.fold((600_000, 1), |(s, n), l| (s + l, n + u64::from(l > 0)));
        assert_eq!((s.clock.pause_ns, s.clock.pauses), (sum, n));
        drop(rec);
        handle.join().unwrap();
    }
}
