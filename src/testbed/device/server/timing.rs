//! The timing thread: it owns the [`DeviceModel`], whose clock is the monotonic clock. It
//! takes each request as the FUSE threads hand it over (data already moved), submits it at
//! its arrival, lets the drive take the next command when [`DeviceModel::ready_at`] comes, and
//! replies to each request at its `done_ns` (an absolute sleep, then a short spin). It runs
//! at a higher real-time priority than the FUSE threads, so copying data never delays a
//! reply; it takes no lock another thread holds for long (the hand-over is a channel, the
//! bookkeeping a note to the stats thread), does no I/O but the replies, and allocates only
//! the entries of its maps.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use super::records::{Note, Recorder};
use super::{reply, Job, Pool};
use crate::sys::rt;
use crate::testbed::device::model::{Dispatch, Op};
use crate::testbed::device::DeviceModel;

/// The timing thread sleeps until this long before a reply is due, then spins: more than its
/// wake-up latency under SCHED_FIFO on a virtual machine.
const SPIN_NS: u64 = 60_000;

/// A request the model has, with when the timing thread took it.
struct Held {
    job: Job,
    intake_ns: u64,
}

/// Runs until every FUSE thread's sender is gone and every request is answered.
pub fn run(mut model: DeviceModel, rx: Receiver<Job>, rec: Recorder, pool: &Pool) {
    let mut waiting: HashMap<u64, Held> = HashMap::new();
    let mut due: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut taken: HashMap<u64, Dispatch> = HashMap::new();
    let mut open = true;
    let take = |job: Job, model: &mut DeviceModel, waiting: &mut HashMap<u64, Held>| {
        let intake_ns = rt::monotonic_ns();
        model.submit(job.req, job.arrival_ns);
        waiting.insert(job.req.id, Held { job, intake_ns });
    };
    loop {
        let now = rt::monotonic_ns();
        // The drive takes commands as the model frees it, on the model's time.
        while let Some(t) = model.ready_at() {
            if t > now {
                break;
            }
            match model.next(t) {
                Some(d) => {
                    due.push(Reverse((d.done_ns, d.id)));
                    taken.insert(d.id, d);
                }
                None => break,
            }
        }
        // Reply to every request whose completion has come.
        while let Some(&Reverse((done, id))) = due.peek() {
            if done > rt::monotonic_ns() {
                break;
            }
            due.pop();
            let (Some(d), Some(held)) = (taken.remove(&id), waiting.remove(&id)) else {
                continue;
            };
            answer(held, &d, &rec, pool);
        }
        if !open && waiting.is_empty() {
            return;
        }
        let wake = match (model.ready_at(), due.peek()) {
            (Some(a), Some(Reverse((b, _)))) => Some(a.min(*b)),
            (a, b) => a.or(b.map(|Reverse((t, _))| *t)),
        };
        match next_arrival(&rx, wake, open) {
            Ok(job) => take(job, &mut model, &mut waiting),
            Err(RecvTimeoutError::Disconnected) => open = false,
            Err(RecvTimeoutError::Timeout) => {}
        }
        // Everything else that has arrived meanwhile.
        while open {
            match rx.try_recv() {
                Ok(job) => take(job, &mut model, &mut waiting),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
    }
}

/// Waits for the next request until `wake` (none: for ever): asleep until SPIN_NS before it,
/// then spinning, still taking arrivals.
fn next_arrival(
    rx: &Receiver<Job>,
    wake: Option<u64>,
    open: bool,
) -> Result<Job, RecvTimeoutError> {
    let now = rt::monotonic_ns();
    match wake {
        None if open => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        None => Err(RecvTimeoutError::Disconnected),
        Some(w) if w > now + SPIN_NS && open => {
            rx.recv_timeout(Duration::from_nanos(w - now - SPIN_NS))
        }
        Some(w) => {
            while rt::monotonic_ns() < w {
                if open {
                    match rx.try_recv() {
                        Ok(j) => return Ok(j),
                        Err(TryRecvError::Disconnected) => {
                            return Err(RecvTimeoutError::Disconnected)
                        }
                        Err(TryRecvError::Empty) => {}
                    }
                }
                std::hint::spin_loop();
            }
            Err(RecvTimeoutError::Timeout)
        }
    }
}

/// Replies to a request at its modelled completion; its note goes to the stats thread first.
fn answer(held: Held, d: &Dispatch, rec: &Recorder, pool: &Pool) {
    let Held { job, intake_ns } = held;
    let len = if d.op == Op::Flush { 0 } else { job.req.len };
    rec.note(Note::Answered {
        d: *d,
        len,
        replied_ns: rt::monotonic_ns(),
        failed: job.io.is_err(),
        emulator_ns: intake_ns.saturating_sub(job.arrival_ns),
    });
    reply(job, pool);
}
