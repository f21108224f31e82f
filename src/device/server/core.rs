//! What every part of the server that takes requests shares, whatever their transport: the
//! store holding the disk's bytes, the write log, the stats thread's notes, whether the model
//! applies now, and the answer at once where it does not ([`Core::route`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::records::{Note, Recorder};
use super::store::Store;
use crate::base::sys::rt;
use crate::base::sys::Errno;
use crate::device::model::{Dispatch, Op, Request};
use crate::device::transport::{Answer, Job};
use crate::device::writelog::cut::Replied;
use crate::device::writelog::record::{Timed, WriteLog};

/// The disk as every request taker sees it.
pub(crate) struct Core {
    pub store: Arc<Store>,
    /// The emulated disk's size, bytes.
    pub size: u64,
    /// Set for a device that completes every request on arrival (`ram`): requests are
    /// answered on the thread that took them, with no hand-over to the timing thread, so
    /// the emulator's own cost is all that `ram` measures.
    pub immediate: bool,
    /// Whether the model applies now; when not, requests are answered at once and counted as
    /// unmodelled.
    pub modelled: Arc<AtomicBool>,
    pub rec: Recorder,
    /// The write log, and the crash state served as the `crash` file.
    pub log: Arc<WriteLog>,
    /// Whether the crash file can be reached through the transport the disk's requests take
    /// (set by the timing thread once its transport has begun).
    pub crash_file: AtomicBool,
    /// The disk clock's pause, ns, as the timing thread published it after its last stop:
    /// read with each arrival ([`Core::arrived`]).
    pub pause_ns: AtomicU64,
    next_id: AtomicU64,
}

impl Core {
    pub fn new(
        store: Arc<Store>,
        size: u64,
        immediate: bool,
        modelled: Arc<AtomicBool>,
        rec: Recorder,
        log: Arc<WriteLog>,
    ) -> Core {
        Core {
            store,
            size,
            immediate,
            modelled,
            rec,
            log,
            crash_file: AtomicBool::new(true),
            pause_ns: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        }
    }

    /// A request comes now: its arrival on the monotonic clock, and the disk clock's pause
    /// then. The timing thread publishes a stop's pause before its late reply leaves, so a
    /// request sent in answer to that reply always sees it; one that sees the pause before
    /// it came during the stop, or in the nanoseconds after, from a thread not waiting on
    /// the reply, and lands in the disk's future as the clock's definition puts it. The
    /// pause is read first, so a stop published between the two reads is never taken for
    /// an arrival before it.
    pub fn arrived(&self) -> (u64, u64) {
        let pause_ns = self.pause_ns.load(Ordering::Acquire);
        (rt::monotonic_ns(), pause_ns)
    }

    /// Answers `job` at once where the model does not apply (switched off, or a disk that
    /// answers at once); otherwise gives it back for the model.
    pub fn route<R: Answer>(&self, job: Job<R>) -> Option<Job<R>> {
        if !self.is_modelled() {
            self.rec.note(Note::Unmodelled {
                failed: job.io.is_err(),
            });
            let now = rt::monotonic_ns();
            note_reply(&self.log, &job.req, now, now);
            job.answer();
            return None;
        }
        if self.immediate {
            let d = Dispatch {
                id: job.req.id,
                op: job.req.op,
                arrival_ns: job.arrival_ns,
                start_ns: job.arrival_ns,
                done_ns: job.arrival_ns,
                breakdown: Default::default(),
            };
            let now = rt::monotonic_ns();
            self.rec.note(Note::Answered {
                d,
                len: job.req.len,
                replied_ns: now,
                failed: job.io.is_err(),
                emulator_ns: now.saturating_sub(job.arrival_ns),
                held_off_ns: 0,
                // No timing thread, no disk clock: an immediate disk keeps no time to stop.
                paused_ns: 0,
            });
            note_reply(&self.log, &job.req, job.arrival_ns, now);
            job.answer();
            return None;
        }
        Some(job)
    }

    /// Whether the model applies now.
    pub fn is_modelled(&self) -> bool {
        self.modelled.load(Ordering::Acquire)
    }

    /// A new request id (the ring's come from a range of their own).
    pub fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a write the store refused for want of room: the request still fails (the drive
    /// cannot store it), and the client names the full backing store (or memory) instead of
    /// blaming the filesystem under test.
    pub fn note_store_error(&self, e: Errno) {
        if e == Errno::ENOSPC {
            self.rec.note(Note::ImageFull);
        }
    }

    /// Writes `data` at `offset` (request `id`, come at `arrival_ns`) through the write log.
    pub fn write(
        &self,
        id: u64,
        data: &[u8],
        offset: u64,
        arrival_ns: u64,
    ) -> Result<usize, Errno> {
        let io = self.log.write(&*self.store, id, data, offset, arrival_ns);
        if let Err(e) = io {
            self.note_store_error(e);
        }
        io
    }

    /// A flush (request `id`, come at `arrival_ns`) through the write log.
    pub fn flush(&self, id: u64, arrival_ns: u64) {
        self.log.flush(&*self.store, id, arrival_ns);
    }

    /// Frees or zeroes (`mode` as `fallocate(2)`) through the write log.
    pub fn zero(&self, id: u64, mode: i32, offset: u64, len: u64) -> Result<(), Errno> {
        let done = self.log.zero(&*self.store, id, mode, offset, len);
        if let Err(e) = done {
            self.note_store_error(e);
        }
        done
    }
}

/// Tells the write log of a write's or a flush's reply (modelled completion `done_ns`).
pub(crate) fn note_reply(log: &WriteLog, req: &Request, done_ns: u64, reply_ns: u64) {
    if req.op != Op::Read && log.on() {
        log.note(Timed::Replied(Replied {
            id: req.id,
            done_ns,
            reply_ns,
        }));
    }
}
