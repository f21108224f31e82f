//! The server's requests through FUSE over io_uring ([`crate::device::uring`]),
//! the default transport (`auto`; `FSGAUGE_DEVICE_TRANSPORT=dev` keeps /dev/fuse). A data
//! request taken from the ring goes the way a FUSE thread's does: its arrival stamped, its
//! data moved at once (a read straight into the ring entry's buffer, so the reply at the
//! modelled completion only commits), then to the model; the reply commits the entry
//! ([`Reply::Ring`]).
//!
//! Who takes the ring: for a disk that answers at once (`ram`), a thread per CPU
//! ([`prepare`]), each answering on the spot; for a modelled disk, the timing thread itself
//! ([`prepare_taken`]): it waits on the ring until the next reply is due, takes the requests
//! that come meanwhile and commits each reply when it is due, so a reply leaves at the time
//! it is recorded at and no request crosses between threads.

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use super::args::{Transport, ENABLE_PARAM, TRANSPORT_ENV};
use super::{DiskFs, Job, Reply, DISK_NAME, MAX_REQUEST};
use crate::base::sys::rt;
use crate::base::sys::Errno;
use crate::device::model::{Op as ModelOp, Request};
use crate::device::uring::{Disk, Incoming, Op, Ring, Taker, Token};

/// Request ids of the ring's requests start here, apart from the FUSE threads' ones.
const RING_IDS: u64 = 1 << 62;

/// Whether to ask INIT for the ring; `say` tells of what was found or changed on the
/// way (said once per fsgauge process). `auto` and `uring` both turn the kernel's switch on
/// where it is off (root): through /dev/fuse a request costs the server about twice the CPU,
/// and under the studies' loads an emulated disk's replies come late (session 13's
/// reservation-as-published: p99 2.0–17.0 ms, up to 31% of a phase's requests late, against
/// none over 0.5 ms through the ring). `dev` keeps /dev/fuse and the switch as it is.
/// Returns whether the ring is wanted, and whether this call turned `enable_uring` on.
pub fn wanted(transport: Transport, say: &mut dyn FnMut(&str)) -> (bool, bool) {
    let on = || {
        std::fs::read_to_string(ENABLE_PARAM)
            .map(|v| v.trim() == "Y")
            .unwrap_or(false)
    };
    match transport {
        Transport::Dev => (false, false),
        Transport::Auto | Transport::Uring if on() => (true, false),
        Transport::Auto if !std::path::Path::new(ENABLE_PARAM).exists() => (false, false),
        Transport::Auto | Transport::Uring => match std::fs::write(ENABLE_PARAM, "Y") {
            Ok(()) => {
                say(&format!("turned on FUSE over io_uring ({ENABLE_PARAM} = Y, as {TRANSPORT_ENV}={transport} does; it stays on, since a server using the ring fails if it is turned off under it): through /dev/fuse an emulated disk costs the server twice the CPU a request and its replies come late under load; {TRANSPORT_ENV}=dev keeps /dev/fuse"));
                (true, true)
            }
            Err(e) => {
                say(&format!("FUSE over io_uring is off ({ENABLE_PARAM} = N) and could not be turned on ({e}): requests go through /dev/fuse, at about twice the server's CPU per request, and an emulated disk's replies may come late under load; as root, `echo Y > {ENABLE_PARAM}` turns it on"));
                (false, false)
            }
        },
    }
}

/// The ring for `fs`'s disk with a thread per CPU, made before the mount (None, said on
/// stderr, where this machine cannot have one). Its data requests go to a sibling of `fs`:
/// the same store, buffers, timing thread and records.
pub(super) fn prepare(fs: &DiskFs) -> Option<Ring> {
    let tx = match fs.to_timing.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    let sibling = Arc::new(sibling(fs, tx));
    Ring::prepare(
        disk(fs),
        MAX_REQUEST,
        Arc::new(move |r: Incoming| {
            if let Some(job) = job(&sibling, r) {
                sibling.send(job);
            }
        }),
    )
}

/// The ring for `fs`'s disk taken by the timing thread ([`Taken`]), made before the mount.
pub(super) fn prepare_taken(fs: &DiskFs) -> Option<(Ring, Taken)> {
    // The sibling hands nothing over (the timing thread is its caller), so it holds no sender
    // that would keep the timing thread's channel open.
    let (tx, _) = mpsc::channel();
    let (ring, taker) = Ring::prepare_taken(disk(fs), MAX_REQUEST)?;
    Some((
        ring,
        Taken {
            taker,
            fs: sibling(fs, tx),
        },
    ))
}

/// The ring's side of the timing thread: what takes its requests, and the disk they go to.
pub(super) struct Taken {
    pub taker: Taker,
    pub fs: DiskFs,
}

fn sibling(fs: &DiskFs, tx: Sender<Job>) -> DiskFs {
    DiskFs {
        store: fs.store.clone(),
        pool: fs.pool.clone(),
        to_timing: Mutex::new(tx),
        next_id: AtomicU64::new(RING_IDS),
        size: fs.size,
        started: fs.started,
        immediate: fs.immediate,
        modelled: fs.modelled.clone(),
        rec: fs.rec.clone(),
        ring_offer: None,
        wake_ring: None,
        log: fs.log.clone(),
    }
}

fn disk(fs: &DiskFs) -> Disk {
    Disk {
        name: DISK_NAME.to_string(),
        size: fs.size,
        time: fs
            .started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// A data request from the ring, its arrival stamped and its data moved: the [`Job`] for the
/// model, or None where it was answered here (an error, a discard).
pub(super) fn job(fs: &DiskFs, r: Incoming) -> Option<Job> {
    match admit(fs, r, rt::monotonic_ns()) {
        Admitted::Job(mut job) => {
            move_data(fs, &mut job);
            Some(job)
        }
        Admitted::Discard(d) => {
            d.apply(fs);
            None
        }
        Admitted::Answered => None,
    }
}

/// A ring request taken in, its data not yet moved.
pub(super) enum Admitted {
    /// For the model; its data is moved by [`move_data`] before its reply.
    Job(Job),
    /// A discard or zeroing: the model sees nothing; [`Discard::apply`] once every earlier
    /// request's data has moved.
    Discard(Discard),
    /// Answered at once (a write past the end).
    Answered,
}

/// A `fallocate(2)` on the disk, to apply.
pub(super) struct Discard {
    token: Token,
    mode: i32,
    offset: u64,
    len: u64,
}

impl Discard {
    /// As `DiskFs::fallocate`: the store frees or zeroes, and the request is answered.
    pub(super) fn apply(self, fs: &DiskFs) {
        let done = fs
            .log
            .zero(&fs.store, fs.id(), self.mode, self.offset, self.len);
        if let Err(e) = done {
            fs.note_store_error(e);
        }
        self.token.commit(done.map(|()| 0));
    }
}

/// Takes a data request in, arrived at `arrival_ns`, without moving its data: the model can
/// have it at once, and the data moves when the thread has the time (before its reply).
pub(super) fn admit(fs: &DiskFs, r: Incoming, arrival_ns: u64) -> Admitted {
    let Incoming {
        op,
        offset,
        len,
        token,
    } = r;
    let job = |req: Request, token| {
        Admitted::Job(Job {
            req,
            arrival_ns,
            reply: Reply::Ring(token),
            buf: None,
            io: Ok(0),
        })
    };
    match op {
        Op::Read => {
            let len = len.min(fs.size.saturating_sub(offset));
            job(Request::read(fs.id(), offset, len), token)
        }
        Op::Write if offset.saturating_add(len) > fs.size => {
            token.commit(Err(Errno::ENOSPC));
            Admitted::Answered
        }
        Op::Write => job(Request::write(fs.id(), offset, len), token),
        Op::Fsync => job(Request::flush(fs.id()), token),
        Op::Fallocate { mode } => Admitted::Discard(Discard {
            token,
            mode,
            offset,
            len,
        }),
    }
}

/// Moves a ring request's data: a read's out of the store into the ring entry's buffer, a
/// write's into the store; its result in `job.io`.
pub(super) fn move_data(fs: &DiskFs, job: &mut Job) {
    let Reply::Ring(token) = &mut job.reply else {
        return;
    };
    let (offset, len) = (job.req.offset, job.req.len as usize);
    job.io = match job.req.op {
        ModelOp::Read => fs.store.read(&mut token.buf()[..len], offset),
        ModelOp::Write => {
            let io = fs
                .log
                .write(&fs.store, job.req.id, token.data(), offset, job.arrival_ns);
            if let Err(e) = io {
                fs.note_store_error(e);
            }
            io
        }
        ModelOp::Flush => {
            fs.log.flush(&fs.store, job.req.id, job.arrival_ns);
            Ok(0)
        }
    };
}
