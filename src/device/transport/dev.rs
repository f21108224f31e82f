//! The /dev/fuse transport: the FUSE session's threads (`fuser`) take each request, move its
//! data at once (a read's into a preallocated buffer of the [`Pool`]) and hand it to the
//! timing thread on a channel ([`Dev`]); its reply ([`DevReply`]) is a `writev(2)` on
//! /dev/fuse. The crash file is reached this way only.

use std::ops::{Deref, DerefMut};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use fuser::{Errno as FuseErrno, ReplyData, ReplyEmpty, ReplyWrite};

use super::ring::Offer;
use super::{Answer, Came, Job, Transport, Waiting};
use crate::base::sys::{AlignedBuf, Errno};

/// Preallocated aligned buffers: taken at a read's arrival, given back after its reply.
pub struct Pool {
    free: Mutex<Vec<AlignedBuf>>,
    more: Condvar,
}

impl Pool {
    /// `n` buffers of `size` bytes.
    pub fn new(n: usize, size: usize) -> Pool {
        Pool {
            free: Mutex::new((0..n).map(|_| AlignedBuf::zeroed(size)).collect()),
            more: Condvar::new(),
        }
    }

    /// A buffer, waiting for one to come back when all are out; it goes back when dropped.
    pub fn take(self: &Arc<Self>) -> PooledBuf {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(b) = free.pop() {
                return PooledBuf {
                    buf: Some(b),
                    pool: self.clone(),
                };
            }
            free = self.more.wait(free).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, b: AlignedBuf) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.push(b);
        self.more.notify_one();
    }
}

/// A buffer of the [`Pool`], given back when dropped (after its reply).
pub struct PooledBuf {
    buf: Option<AlignedBuf>,
    pool: Arc<Pool>,
}

impl Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf.as_deref().unwrap_or_default()
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().unwrap_or_default()
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.give(b);
        }
    }
}

/// A reply on /dev/fuse.
pub enum DevReply {
    /// A read, its data taken from the store at arrival.
    Read(ReplyData, PooledBuf),
    Write(ReplyWrite),
    Flush(ReplyEmpty),
}

impl Answer for DevReply {
    fn answer(self, io: Result<usize, Errno>) {
        match (self, io) {
            (DevReply::Read(r, _), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
            (DevReply::Write(r), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
            (DevReply::Flush(r), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
            (DevReply::Read(r, b), Ok(n)) => r.data(&b[..n.min(b.len())]),
            (DevReply::Write(r), Ok(n)) => r.written(n as u32),
            (DevReply::Flush(r), Ok(_)) => r.ok(),
        }
    }
}

/// The timing thread's end of the FUSE threads' channel.
pub struct Dev {
    rx: Receiver<Job<DevReply>>,
    /// Handed over and not yet taken.
    came: Vec<Job<DevReply>>,
    /// Whether some FUSE thread may still hand a request over.
    open: bool,
    /// The ring the disk's requests take instead, where ring threads of their own take it
    /// (a disk that answers at once): whether INIT asked for it, once known.
    beside: Option<Arc<Offer>>,
    ring_used: bool,
}

impl Dev {
    pub fn new(rx: Receiver<Job<DevReply>>) -> Dev {
        Self::beside(rx, None)
    }

    /// The channel of a server whose data requests may go through a ring taken by threads of
    /// its own (`ring`): only what the ring leaves to /dev/fuse comes here.
    pub fn beside(rx: Receiver<Job<DevReply>>, ring: Option<Arc<Offer>>) -> Dev {
        Dev {
            rx,
            came: Vec::new(),
            open: true,
            beside: ring,
            ring_used: false,
        }
    }

    /// Takes what has been handed over by now into `came`; says whether anything was.
    fn poll(&mut self) -> bool {
        let before = self.came.len();
        while self.open {
            match self.rx.try_recv() {
                Ok(job) => self.came.push(job),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.open = false,
            }
        }
        self.came.len() > before
    }

    /// Hands each request handed over by now (its data moved) to `f`.
    pub fn take_each(&mut self, mut f: impl FnMut(Job<DevReply>)) {
        self.poll();
        for job in self.came.drain(..) {
            f(job);
        }
    }
}

impl Transport for Dev {
    type Reply = DevReply;

    fn begin(&mut self) {
        if let Some(o) = &self.beside {
            self.ring_used = o.wait();
        }
    }

    fn take(&mut self, got: &mut Vec<Came<DevReply>>, _waiting: &mut Waiting<DevReply>) {
        self.take_each(|job| got.push(Came { job, moved: true }));
    }

    fn wait(&mut self, timeout: Option<Duration>) {
        if !self.open {
            // Nothing comes any more: only the replies due are waited for.
            if let Some(t) = timeout {
                std::thread::sleep(t);
            }
            return;
        }
        let got = match timeout {
            None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(t) => self.rx.recv_timeout(t),
        };
        match got {
            Ok(job) => self.came.push(job),
            Err(RecvTimeoutError::Disconnected) => self.open = false,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }

    fn came(&mut self) -> bool {
        self.poll() || !self.came.is_empty()
    }

    fn open(&self) -> bool {
        self.open || !self.came.is_empty()
    }

    fn serves_crash_file(&self) -> bool {
        !self.ring_used
    }
}
