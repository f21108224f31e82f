//! The server's side of FUSE over io_uring ([`super::Ring`]), the default transport (`auto`;
//! `dev` keeps /dev/fuse). A data request taken from the ring goes the way a FUSE thread's
//! does: its arrival stamped, its data moved (a read straight into the ring entry's buffer,
//! so the reply at the modelled completion only commits), then to the model; the reply
//! commits the entry ([`super::Token`]).
//!
//! Who takes the ring: for a disk that answers at once (`ram`), a thread per CPU
//! ([`prepare`]), each answering on the spot; for a modelled disk, the timing thread itself
//! through [`RingTransport`] ([`prepare_taken`]): it waits on the ring until the next reply is
//! due, takes the requests that come meanwhile, hands them to the model at once, moves their
//! data in order between replies (a burst of 1 MiB writes is milliseconds of copying, which
//! must not hold up a reply due meanwhile) and commits each reply when it is due, so a reply
//! leaves at the time it is recorded at and no request crosses between threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::ENABLE_PARAM;
use super::{Disk, Incoming, Op, Ring, Taker, Token};
use crate::base::sys::rt;
use crate::base::sys::Errno;
use crate::device::model::{Op as ModelOp, Request};
use crate::device::server::args::TransportChoice;
use crate::device::server::core::Core;
use crate::device::transport::dev::{Dev, DevReply};
use crate::device::transport::{
    Answer, Came, Held, Job, Transport, Waiting, DISK_NAME, MAX_REQUEST,
};

/// Request ids of the ring's requests start here, apart from the FUSE threads' ones.
const RING_IDS: u64 = 1 << 62;

/// Whether to ask INIT for the ring; `say` tells of what was found or changed on the
/// way (said once per fsgauge process). `auto` and `uring` both turn the kernel's switch on
/// where it is off (root): through /dev/fuse a request costs the server about twice the CPU,
/// and under the studies' loads an emulated disk's replies come late (session 13's
/// reservation-as-published: p99 2.0–17.0 ms, up to 31% of a phase's requests late, against
/// none over 0.5 ms through the ring). `dev` keeps /dev/fuse and the switch as it is.
/// Returns whether the ring is wanted, and whether this call turned `enable_uring` on.
pub fn wanted(transport: TransportChoice, say: &mut dyn FnMut(&str)) -> (bool, bool) {
    let on = || {
        std::fs::read_to_string(ENABLE_PARAM)
            .map(|v| v.trim() == "Y")
            .unwrap_or(false)
    };
    match transport {
        TransportChoice::Dev => (false, false),
        TransportChoice::Auto | TransportChoice::Uring if on() => (true, false),
        TransportChoice::Auto if !std::path::Path::new(ENABLE_PARAM).exists() => (false, false),
        TransportChoice::Auto | TransportChoice::Uring => match std::fs::write(ENABLE_PARAM, "Y") {
            Ok(()) => {
                say(&format!("turned on FUSE over io_uring ({ENABLE_PARAM} = Y, as the transport {transport} does; it stays on, since a server using the ring fails if it is turned off under it): through /dev/fuse an emulated disk costs the server twice the CPU a request and its replies come late under load; the transport dev (device_transport = \"dev\") keeps /dev/fuse"));
                (true, true)
            }
            Err(e) => {
                say(&format!("FUSE over io_uring is off ({ENABLE_PARAM} = N) and could not be turned on ({e}): requests go through /dev/fuse, at about twice the server's CPU per request, and an emulated disk's replies may come late under load; as root, `echo Y > {ENABLE_PARAM}` turns it on"));
                (false, false)
            }
        },
    }
}

/// The disk as the ring's namespace shows it.
fn disk(core: &Core, started: std::time::SystemTime) -> Disk {
    Disk {
        name: DISK_NAME.to_string(),
        size: core.size,
        time: started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// The ring for `core`'s disk with a thread per CPU, made before the mount (None, said on
/// stderr, where this machine cannot have one): for a disk that answers every request on the
/// spot ([`Core::route`]).
pub(crate) fn prepare(core: &Arc<Core>, started: std::time::SystemTime) -> Option<Ring> {
    let ids = Arc::new(AtomicU64::new(RING_IDS));
    let c = core.clone();
    Ring::prepare(
        disk(core, started),
        MAX_REQUEST,
        Arc::new(move |r: Incoming| {
            match admit(&c, &ids, r, rt::monotonic_ns()) {
                Admitted::Job(mut job) => {
                    move_data(&c, &mut job);
                    if let Some(job) = c.route(job) {
                        // Only a disk that answers at once has ring threads: nothing waits.
                        job.answer();
                    }
                }
                Admitted::Discard(d) => d.apply(&c),
                Admitted::Answered => {}
            }
        }),
    )
}

/// The ring for `core`'s disk taken by the timing thread, made before the mount: the ring,
/// and the transport the timing thread takes it through (with /dev/fuse's channel `dev`,
/// for what still comes that way).
pub(crate) fn prepare_taken(
    core: &Arc<Core>,
    started: std::time::SystemTime,
    dev: Dev,
) -> Result<(Ring, RingTransport), Dev> {
    match Ring::prepare_taken(disk(core, started), MAX_REQUEST) {
        Some((ring, taker)) => Ok((
            ring,
            RingTransport {
                taker: Some(taker),
                core: core.clone(),
                ids: AtomicU64::new(RING_IDS),
                incoming: Vec::new(),
                backlog: VecDeque::new(),
                dev,
            },
        )),
        None => Err(dev),
    }
}

/// What the ring has brought in and not yet done, in the order it came: a request's data to
/// move, or a discard to apply after every earlier request's data.
enum Pending {
    Data(u64),
    Discard(Discard),
}

/// A request through the ring, or one that still came through /dev/fuse (before the ring
/// registered, or after the kernel dropped it).
pub enum RingReply {
    Entry(Token),
    Dev(DevReply),
}

impl Answer for RingReply {
    fn answer(self, io: Result<usize, Errno>) {
        match self {
            RingReply::Entry(t) => t.answer(io),
            RingReply::Dev(d) => d.answer(io),
        }
    }
}

impl Answer for Token {
    fn answer(self, io: Result<usize, Errno>) {
        self.commit(io)
    }
}

/// The ring taken by the timing thread ([`prepare_taken`]).
pub struct RingTransport {
    /// None once the ring has ended (or never began): requests come through `dev`.
    taker: Option<Taker>,
    core: Arc<Core>,
    ids: AtomicU64,
    /// Taken from the ring and not yet handed over.
    incoming: Vec<Incoming>,
    backlog: VecDeque<Pending>,
    dev: Dev,
}

impl RingTransport {
    /// Moves the pending requests' data in order, until request `until` has moved (None: all
    /// of them).
    fn move_until(&mut self, waiting: &mut Waiting<RingReply>, until: Option<u64>) {
        while let Some(p) = self.backlog.pop_front() {
            match p {
                Pending::Data(id) => {
                    if let Some(h) = waiting.get_mut(&id) {
                        move_data(&self.core, &mut h.job);
                        h.moved = true;
                        h.intake_ns = rt::monotonic_ns();
                    }
                    if until == Some(id) {
                        return;
                    }
                }
                Pending::Discard(d) => d.apply(&self.core),
            }
        }
    }

    /// Says a failed wait or poll (only a dead ring fails; its entries end with the
    /// connection).
    fn failed(what: &str, e: std::io::Error) {
        eprintln!("fsgauge devices serve: {what} the FUSE ring failed: {e}");
    }
}

impl Transport for RingTransport {
    type Reply = RingReply;

    fn begin(&mut self) {
        if !self.taker.as_mut().is_some_and(|t| t.begin()) {
            self.taker = None;
        }
    }

    fn take(&mut self, got: &mut Vec<Came<RingReply>>, waiting: &mut Waiting<RingReply>) {
        let now = rt::monotonic_ns();
        let incoming = std::mem::take(&mut self.incoming);
        for i in incoming {
            match admit(&self.core, &self.ids, i, now) {
                // The model is off: answered at once, its data moved after every earlier one.
                Admitted::Job(mut job) if !self.core.is_modelled() => {
                    self.move_until(waiting, None);
                    move_data(&self.core, &mut job);
                    let _ = self.core.route(job);
                }
                Admitted::Job(job) => {
                    self.backlog.push_back(Pending::Data(job.req.id));
                    got.push(Came { job, moved: false });
                }
                Admitted::Discard(d) => self.backlog.push_back(Pending::Discard(d)),
                Admitted::Answered => {}
            }
        }
        self.dev.take_each(|job| {
            got.push(Came {
                job: Job {
                    req: job.req,
                    arrival_ns: job.arrival_ns,
                    pause_ns: job.pause_ns,
                    reply: RingReply::Dev(job.reply),
                    io: job.io,
                },
                moved: true,
            })
        });
    }

    fn wait(&mut self, timeout: Option<Duration>) {
        let Some(taker) = &mut self.taker else {
            return self.dev.wait(timeout);
        };
        if let Err(e) = taker.wait(&mut self.incoming, timeout) {
            Self::failed("waiting on", e);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn send(&mut self) {
        if let Some(t) = &self.taker {
            if let Err(e) = t.flush() {
                Self::failed("submitting to", e);
            }
        }
    }

    fn came(&mut self) -> bool {
        if let Some(t) = &mut self.taker {
            if let Err(e) = t.poll(&mut self.incoming) {
                Self::failed("polling", e);
            }
        }
        !self.incoming.is_empty() || self.dev.came()
    }

    fn open(&self) -> bool {
        self.taker.is_some() || self.dev.open()
    }

    /// One request's data (or discard) from the backlog, between looks at the replies due:
    /// the replies made so far leave first, and the requests come meanwhile are taken (no
    /// wait). A ring that has ended has every request's data moved, and requests come
    /// through /dev/fuse from then on.
    fn work(&mut self, waiting: &mut Waiting<RingReply>) -> bool {
        let Some(taker) = &self.taker else {
            return false;
        };
        if !taker.live() {
            self.move_until(waiting, None);
            self.taker = None;
            return false;
        }
        let first = match self.backlog.front() {
            None => return false,
            Some(Pending::Data(id)) => Some(*id),
            Some(Pending::Discard(_)) => None,
        };
        self.send();
        match first {
            Some(_) => self.move_until(waiting, first),
            None => {
                if let Some(Pending::Discard(d)) = self.backlog.pop_front() {
                    d.apply(&self.core);
                }
            }
        }
        if let Some(t) = &mut self.taker {
            if let Err(e) = t.poll(&mut self.incoming) {
                Self::failed("polling", e);
            }
        }
        true
    }

    fn ready(&mut self, id: u64, waiting: &mut Waiting<RingReply>) {
        if waiting.get(&id).is_some_and(|h: &Held<RingReply>| !h.moved) {
            self.move_until(waiting, Some(id));
        }
    }

    fn serves_crash_file(&self) -> bool {
        // The ring's namespace is the disk file alone.
        self.taker.is_none()
    }
}

/// A ring request taken in, its data not yet moved.
enum Admitted {
    /// For the model; its data is moved by [`move_data`] before its reply.
    Job(Job<RingReply>),
    /// A discard or zeroing: the model sees nothing; [`Discard::apply`] once every earlier
    /// request's data has moved.
    Discard(Discard),
    /// Answered at once (a write past the end).
    Answered,
}

/// A `fallocate(2)` on the disk, to apply.
struct Discard {
    token: Token,
    id: u64,
    mode: i32,
    offset: u64,
    len: u64,
}

impl Discard {
    /// As /dev/fuse's fallocate: the store frees or zeroes, and the request is answered.
    fn apply(self, core: &Core) {
        let done = core.zero(self.id, self.mode, self.offset, self.len);
        self.token.commit(done.map(|()| 0));
    }
}

/// Takes a data request in, arrived at `arrival_ns`, without moving its data: the model can
/// have it at once, and the data moves when the thread has the time (before its reply).
fn admit(core: &Core, ids: &AtomicU64, r: Incoming, arrival_ns: u64) -> Admitted {
    let Incoming {
        op,
        offset,
        len,
        token,
    } = r;
    let id = ids.fetch_add(1, Ordering::Relaxed);
    // Taken by the timing thread (or a disk's own ring thread, with no clock to stop): the
    // pause it published is its clock's now.
    let pause_ns = core.pause_ns.load(Ordering::Acquire);
    let job = |req: Request, token| {
        Admitted::Job(Job {
            req,
            arrival_ns,
            pause_ns,
            reply: RingReply::Entry(token),
            io: Ok(0),
        })
    };
    match op {
        Op::Read => {
            let len = len.min(core.size.saturating_sub(offset));
            job(Request::read(id, offset, len), token)
        }
        Op::Write if offset.saturating_add(len) > core.size => {
            token.commit(Err(Errno::ENOSPC));
            Admitted::Answered
        }
        Op::Write => job(Request::write(id, offset, len), token),
        Op::Fsync => job(Request::flush(id), token),
        Op::Fallocate { mode } => Admitted::Discard(Discard {
            token,
            id,
            mode,
            offset,
            len,
        }),
    }
}

/// Moves a ring request's data: a read's out of the store into the ring entry's buffer, a
/// write's into the store; its result in `job.io`.
fn move_data(core: &Core, job: &mut Job<RingReply>) {
    let RingReply::Entry(token) = &mut job.reply else {
        return;
    };
    let (offset, len) = (job.req.offset, job.req.len as usize);
    job.io = match job.req.op {
        ModelOp::Read => core.store.read(&mut token.buf()[..len], offset),
        ModelOp::Write => core.write(job.req.id, token.data(), offset, job.arrival_ns),
        ModelOp::Flush => {
            core.flush(job.req.id, job.arrival_ns);
            Ok(0)
        }
    };
}
