//! The mover: a thread that moves a ring request's data between its ring entry and the
//! [`store`](super::store) where moving it on the timing thread could hold up a reply due
//! meanwhile. Through the ring the timing thread takes a modelled disk's requests itself
//! ([`super::ring`]); a write's data must be in the store before its reply, and the memory
//! store gives a page on its first write: a page fault of about 1.7 µs a page, so 0.45 ms for
//! 1 MiB and up to 1.7 ms measured (a C loop of `memcpy` into fresh anonymous memory, this
//! project's 2-core VM). Profiled over journal-size-as-published, those faults were the
//! largest part of the timing thread's CPU in its bursts before a late reply.
//!
//! Which requests go to it: every write of more than [`INLINE_MAX`] bytes, and every request
//! (read, write, flush, discard) taken while it still holds one, so that data moves in the
//! order the requests came (a read after a write sees it; a discard after a write frees it).
//! A small write (a few pages, microseconds even when they fault) and a read (no page to give)
//! are moved by the timing thread at once, as before. Work comes back in the order given.
//!
//! It runs at the FUSE threads' real-time priority ([`super::FUSE_PRIORITY`]), below the
//! timing thread's: on 2 CPUs it copies beside the timing thread, and yields to it on one.
//! A reply due before its data has moved waits for the mover, and is late by that wait,
//! recorded as lateness like any other (the emulator's own).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{ring, DiskFs, Job};
use crate::sys::rt;
use crate::testbed::device::model::Op;

/// Writes of at most this many bytes are moved by the timing thread itself: 4 pages, a few
/// µs to fault in.
pub(super) const INLINE_MAX: u64 = 16 << 10;

/// What the mover is given, in the order the requests came.
enum Work {
    Data(Job),
    Discard(ring::Discard),
}

/// What comes back: a request with its data moved and when that was done, or a discard
/// applied (and answered).
enum Moved {
    Data(Job, u64),
    Applied,
}

/// The timing thread's handle on the mover thread.
pub(super) struct Mover {
    to: Option<Sender<Work>>,
    back: Receiver<Moved>,
    /// Work given and not yet back.
    out: usize,
    thread: Option<JoinHandle<()>>,
}

impl Mover {
    /// Starts the mover thread for `fs`'s store (None, said on stderr, where it cannot start:
    /// the timing thread then moves every request's data itself).
    pub(super) fn start(fs: Arc<DiskFs>) -> Option<Mover> {
        let (to, work) = mpsc::channel::<Work>();
        let (done, back) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("device-mover".into())
            .spawn(move || {
                super::realtime(super::FUSE_PRIORITY);
                for w in work {
                    let moved = match w {
                        Work::Data(mut job) => {
                            ring::move_data(&fs, &mut job);
                            Moved::Data(job, rt::monotonic_ns())
                        }
                        Work::Discard(d) => {
                            d.apply(&fs);
                            Moved::Applied
                        }
                    };
                    if done.send(moved).is_err() {
                        return;
                    }
                }
            });
        match thread {
            Ok(t) => Some(Mover {
                to: Some(to),
                back,
                out: 0,
                thread: Some(t),
            }),
            Err(e) => {
                eprintln!("fsgauge devices serve: starting the data mover failed ({e}); the timing thread moves every request's data, and replies may be late behind large writes");
                None
            }
        }
    }

    /// Whether `job`'s data goes to the mover: a large write, or anything while the mover
    /// holds earlier work.
    pub(super) fn wants(&self, job: &Job) -> bool {
        self.out > 0 || (job.req.op == Op::Write && job.req.len > INLINE_MAX)
    }

    /// Whether a discard goes to the mover (it holds earlier work).
    pub(super) fn busy(&self) -> bool {
        self.out > 0
    }

    /// Gives `job` to the mover; where the mover has died, its data is moved here and it is
    /// handed back at once through `moved`.
    pub(super) fn give(&mut self, job: Job, fs: &DiskFs, moved: &mut impl FnMut(Job, u64)) {
        match self.send(Work::Data(job)) {
            Ok(()) => {}
            Err(Work::Data(mut job)) => {
                ring::move_data(fs, &mut job);
                moved(job, rt::monotonic_ns());
            }
            Err(Work::Discard(_)) => unreachable!("sent data"),
        }
    }

    /// Gives a discard to the mover (applied here where the mover has died).
    pub(super) fn give_discard(&mut self, d: ring::Discard, fs: &DiskFs) {
        if let Err(Work::Discard(d)) = self.send(Work::Discard(d)) {
            d.apply(fs);
        }
    }

    fn send(&mut self, w: Work) -> Result<(), Work> {
        let Some(to) = &self.to else {
            return Err(w);
        };
        match to.send(w) {
            Ok(()) => {
                self.out += 1;
                Ok(())
            }
            Err(mpsc::SendError(w)) => {
                self.to = None;
                Err(w)
            }
        }
    }

    /// Hands every request moved by now to `moved`, without waiting.
    pub(super) fn collect(&mut self, moved: &mut impl FnMut(Job, u64)) {
        while let Ok(m) = self.back.try_recv() {
            self.arrived(m, moved);
        }
    }

    /// Waits until request `id` has moved (every request given before it has too), handing
    /// each to `moved`; returns at once when the mover holds nothing.
    pub(super) fn until(&mut self, id: u64, moved: &mut impl FnMut(Job, u64)) {
        while self.out > 0 {
            let Ok(m) = self.back.recv() else {
                self.out = 0;
                return;
            };
            let this = matches!(&m, Moved::Data(job, _) if job.req.id == id);
            self.arrived(m, moved);
            if this {
                return;
            }
        }
    }

    /// Waits until the mover holds nothing, handing each request to `moved`.
    pub(super) fn drain(&mut self, moved: &mut impl FnMut(Job, u64)) {
        self.until(u64::MAX, moved);
    }

    fn arrived(&mut self, m: Moved, moved: &mut impl FnMut(Job, u64)) {
        self.out = self.out.saturating_sub(1);
        if let Moved::Data(job, at) = m {
            moved(job, at);
        }
    }
}

impl Drop for Mover {
    fn drop(&mut self) {
        // The thread ends once its work channel closes; what it still holds comes back on a
        // channel nobody reads (the ring has ended, so nothing is left to answer).
        self.to = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
