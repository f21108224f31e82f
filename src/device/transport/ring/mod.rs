//! FUSE over io_uring for the device server ([`taken`] is the server's side of it): requests arrive in ring entries and replies go
//! back with the next fetch, one `io_uring_enter` a batch instead of a `read(2)` and a
//! `writev(2)` a request on /dev/fuse (Linux 6.14+, `fs/fuse/dev_uring.c`; libfuse's
//! `lib/fuse_uring.c` is the reference server).
//!
//! How it sits beside `fuser`: `fuser` mounts and answers INIT on /dev/fuse as before (both
//! inside `Session::new`); [`Offer::decide`], called from the `Filesystem::init` callback,
//! adds `FUSE_OVER_IO_URING`
//! (INIT `flags2` bit 41, which `fuser`'s `InitFlags` passes through `from_bits_retain`) when
//! the kernel offers it. From the INIT reply on, the kernel holds every new request until
//! each of its queues (one per possible CPU; a request goes to its submitter's CPU) has an
//! entry, then sends all of them but FORGET and INTERRUPT through the ring, so the ring
//! answers the namespace (the root and the one disk file: lookup, getattr, open, release,
//! flush, statfs) itself and hands the data requests (read, write, fsync, fallocate) to the
//! server as [`Incoming`]. `fuser`'s threads keep reading /dev/fuse for the FORGETs.
//!
//! Fallback: where the kernel does not offer the flag (`enable_uring` = N, a kernel without
//! `CONFIG_FUSE_IO_URING` or before 6.14), INIT goes without it and `fuser` serves
//! everything, said in one line on stderr; where the kernel refuses a registration, it drops
//! the ring itself and requests go to /dev/fuse (said too). The queues and their buffers are
//! made before the mount; what is left between the INIT reply and the registration (a
//! duplicate descriptor, the threads) makes the server give up the mount if it fails, so no
//! request waits for a ring that will not come.
//!
//! Plugging it under a server: [`Ring::prepare`] before the mount (with the [`Handler`] that
//! takes [`Incoming`] data requests on the queue's thread); [`Offer::decide`] in
//! `Filesystem::init`; [`Ring::start`] between `fuser::Session::new` and `spawn`;
//! [`Token::commit`] from any thread; [`Ring::join`] after the session's threads have ended.

pub mod abi;
pub mod taken;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use fuser::{InitFlags, KernelConfig};

use crate::base::sys::fuse_ring::{Event, Queue, Taken};
use crate::base::sys::Errno;
use abi::InHeader;

/// The module parameter that lets the kernel offer FUSE over io_uring.
pub const ENABLE_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// The disk file's inode.
pub const DISK_INO: u64 = 2;
/// Attribute and entry timeout, seconds.
const TTL_S: u64 = 3600;
/// Ring entries over all queues (each holds a payload buffer of the largest request).
const TOTAL_ENTRIES: usize = 64;
/// Entries of one queue, at least (below it a queue waits on its commits more than the disk).
const MIN_ENTRIES: usize = 4;
/// Most memory the payload buffers may take; past it the ring is declined.
const MAX_BUFFER_BYTES: usize = 512 << 20;
/// Pause before registering again when the kernel had not finished INIT.
const NOT_YET_PAUSE: Duration = Duration::from_millis(1);

/// What the emulated disk looks like in the mount.
#[derive(Debug, Clone)]
pub struct Disk {
    /// The file's name in the root.
    pub name: String,
    pub size: u64,
    /// Its times (seconds since the epoch).
    pub time: u64,
}

impl Disk {
    fn attr(&self, ino: u64) -> Option<abi::Attr> {
        match ino {
            abi::ROOT_INO => Some(abi::Attr {
                ino,
                size: 0,
                mode: libc::S_IFDIR | 0o700,
                nlink: 2,
                time: self.time,
            }),
            DISK_INO => Some(abi::Attr {
                ino,
                size: self.size,
                mode: libc::S_IFREG | 0o600,
                nlink: 1,
                time: self.time,
            }),
            _ => None,
        }
    }
}

/// A data request's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Fsync,
    /// `fallocate(2)` with this mode (discard, zeroing).
    Fallocate {
        mode: i32,
    },
}

/// A data request from the ring: answer it with [`Token::commit`], from any thread, at any
/// time.
#[derive(Debug)]
pub struct Incoming {
    pub op: Op,
    pub offset: u64,
    /// Bytes to read or written (a fallocate's length; 0 for fsync).
    pub len: u64,
    pub token: Token,
}

/// The right and the duty to answer one request; its entry's buffer is the request's while
/// it is held. Dropped without a commit, the request fails with EIO.
#[derive(Debug)]
pub struct Token {
    taken: Taken,
    op: Op,
    /// Bytes of the payload that are the request's (a write's data) or its reply's room (a
    /// read's).
    len: usize,
}

impl Token {
    /// A write's data.
    pub fn data(&self) -> &[u8] {
        let p = self.taken.payload();
        &p[..self.len.min(p.len())]
    }

    /// Where a read's data goes (`len` bytes): fill it before committing `Ok(len)`.
    pub fn buf(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.taken.payload_mut()[..len]
    }

    /// Answers the request: a read's `Ok(n)` sends the first `n` bytes of [`Token::buf`], a
    /// write's `Ok(n)` says `n` bytes were written, fsync and fallocate ignore `n`.
    pub fn commit(mut self, result: std::result::Result<usize, Errno>) {
        match (self.op, result) {
            (_, Err(e)) => self.taken.commit(-(e as i32), 0),
            (Op::Read, Ok(n)) => self.taken.commit(0, n.min(self.len)),
            (Op::Write, Ok(n)) => {
                let len = abi::write_out(self.taken.payload_mut(), n as u32);
                self.taken.commit(0, len)
            }
            (Op::Fsync | Op::Fallocate { .. }, Ok(_)) => self.taken.commit(0, 0),
        }
    }
}

/// Takes each data request on the queue's thread (see [`Ring::prepare`]).
pub type Handler = Arc<dyn Fn(Incoming) + Send + Sync>;

/// Wakes the thread taking a ring's completions ([`Ring::waker`]).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// Requests answered through the ring.
#[derive(Debug, Default)]
pub struct Counts {
    /// Data requests handed to the server.
    pub data: AtomicU64,
    /// Namespace requests the ring answered itself.
    pub other: AtomicU64,
}

/// Whether INIT asked for the ring: decided by [`Offer::decide`] in `Filesystem::init`,
/// awaited by the queue threads.
#[derive(Debug, Default)]
pub struct Offer {
    decided: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Offer {
    /// Call from `Filesystem::init`: asks the kernel for FUSE over io_uring when it offers
    /// it; says on stderr, once, when it does not. Returns whether it asked.
    pub fn decide(&self, config: &mut KernelConfig) -> bool {
        let asked = config
            .add_capabilities(InitFlags::from_bits_retain(abi::FUSE_OVER_IO_URING))
            .is_ok();
        if !asked {
            eprintln!("fsgauge devices serve: the kernel does not offer FUSE over io_uring (Linux 6.14+ with CONFIG_FUSE_IO_URING, and /sys/module/fuse/parameters/enable_uring set to Y); requests go through /dev/fuse");
        }
        self.set(asked);
        asked
    }

    /// Whether INIT asked for the ring (None before INIT).
    pub fn asked(&self) -> Option<bool> {
        match self.decided.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    fn set(&self, asked: bool) {
        let mut d = match self.decided.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if d.is_none() {
            *d = Some(asked);
        }
        self.cv.notify_all();
    }

    /// Waits until INIT has decided; whether it asked for the ring.
    pub fn wait(&self) -> bool {
        let mut d = match self.decided.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        loop {
            if let Some(asked) = *d {
                return asked;
            }
            d = match self.cv.wait(d) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }
}

/// The ring: one [`Queue`] and one thread per possible CPU ([`Ring::prepare`]), or one queue
/// for every CPU taken by a thread of the server's own ([`Ring::prepare_taken`]).
pub struct Ring {
    queues: Vec<Arc<Queue>>,
    offer: Arc<Offer>,
    /// Set once the queues have the connection (or never will): what a [`Taker`] waits for.
    started: Arc<Offer>,
    counts: Arc<Counts>,
    disk: Arc<Disk>,
    /// Takes the data requests on the queues' threads; None when a [`Taker`] takes them.
    handler: Option<Handler>,
    threads: Vec<JoinHandle<()>>,
    pin: bool,
}

impl Ring {
    /// Makes the queues, before the mount: `payload` is the largest request (the mount's
    /// `max_write` and `max_pages`). None, said on stderr, where this machine cannot (no
    /// io_uring with 128-byte entries, too many CPUs for the memory).
    pub fn prepare(disk: Disk, payload: usize, handler: Handler) -> Option<Ring> {
        Self::make(disk, payload, Some(handler))
    }

    /// As [`Ring::prepare`], but one queue holds the entries of every CPU and no thread of
    /// the ring's own takes them: the returned [`Taker`] does, on the thread that calls it (the
    /// device server's timing thread, so that a modelled reply leaves when it is due, with no
    /// hand-over to another thread).
    pub fn prepare_taken(disk: Disk, payload: usize) -> Option<(Ring, Taker)> {
        let ring = Self::make(disk, payload, None)?;
        let taker = Taker {
            entries: Entries {
                queue: ring.queues[0].clone(),
                counts: ring.counts.clone(),
                disk: ring.disk.clone(),
                refused: Arc::new(AtomicBool::new(false)),
                live: 0,
            },
            offer: ring.offer.clone(),
            started: ring.started.clone(),
            events: Vec::new(),
        };
        Some((ring, taker))
    }

    fn make(disk: Disk, payload: usize, handler: Option<Handler>) -> Option<Ring> {
        match Self::make_queues(payload, handler.is_none()) {
            Ok(queues) => Some(Ring {
                queues,
                offer: Arc::new(Offer::default()),
                started: Arc::new(Offer::default()),
                counts: Arc::new(Counts::default()),
                disk: Arc::new(disk),
                handler,
                threads: Vec::new(),
                pin: true,
            }),
            Err(e) => {
                eprintln!("fsgauge devices serve: no FUSE over io_uring ({e:#}); requests go through /dev/fuse");
                None
            }
        }
    }

    /// A queue per CPU, or one for all of them (`one`).
    fn make_queues(payload: usize, one: bool) -> Result<Vec<Arc<Queue>>> {
        let n = possible_cpus()?;
        let entries = (TOTAL_ENTRIES / n).max(MIN_ENTRIES);
        if n * entries * payload > MAX_BUFFER_BYTES {
            anyhow::bail!(
                "{n} possible CPUs would need {} MiB of ring buffers",
                (n * entries * payload) >> 20
            );
        }
        let qids: Vec<u16> = (0..n).map(|q| q as u16).collect();
        let groups: Vec<&[u16]> = if one {
            vec![&qids[..]]
        } else {
            qids.chunks(1).collect()
        };
        groups
            .into_iter()
            .map(|g| {
                Queue::new(g, entries, payload)
                    .map(Arc::new)
                    .context("setting up an io_uring with 128-byte entries")
            })
            .collect()
    }

    /// Whether each queue's thread runs only on its CPU (the default); set before
    /// [`Ring::start`].
    pub fn pin_queues(&mut self, on: bool) {
        self.pin = on;
    }

    /// What `Filesystem::init` calls [`Offer::decide`] on.
    pub fn offer(&self) -> Arc<Offer> {
        self.offer.clone()
    }

    /// Requests answered through the ring so far.
    pub fn counts(&self) -> Arc<Counts> {
        self.counts.clone()
    }

    /// What wakes whatever takes the ring's completions (a [`Taker`] in [`Taker::wait`]
    /// returns, with no request), from any thread.
    pub fn waker(&self) -> Waker {
        let queues = self.queues.clone();
        Arc::new(move || {
            for q in &queues {
                if let Err(e) = q.wake() {
                    eprintln!("fsgauge: waking a FUSE ring queue's thread failed: {e}");
                }
            }
        })
    }

    /// Right after the mount (`fuser::Session::new`, which answers INIT), before the
    /// session's threads: gives the queues the connection (a duplicate of `session`'s
    /// /dev/fuse descriptor) and starts their threads (or lets the [`Taker`] go on), which
    /// register at once when INIT asked for the ring. On an error the server must give up
    /// the mount (dropping the session unmounts it): the kernel holds every request until the
    /// ring has registered.
    pub fn start(&mut self, session: &impl AsFd) -> Result<()> {
        for q in &self.queues {
            let fd = session
                .as_fd()
                .try_clone_to_owned()
                .context("duplicating the FUSE session's descriptor for the ring")?;
            if q.attach(fd).is_err() {
                anyhow::bail!("the FUSE ring was started twice");
            }
        }
        let Some(handler) = &self.handler else {
            self.started.set(true);
            return Ok(());
        };
        let refused = Arc::new(AtomicBool::new(false));
        for q in &self.queues {
            let run = QueueRun {
                entries: Entries {
                    queue: q.clone(),
                    counts: self.counts.clone(),
                    disk: self.disk.clone(),
                    refused: refused.clone(),
                    live: 0,
                },
                offer: self.offer.clone(),
                handler: handler.clone(),
                pin: self.pin,
            };
            let t = std::thread::Builder::new()
                .name(format!("fuse-ring-{}", q.qid()))
                .spawn(move || run.run())
                .context("starting a FUSE ring thread")?;
            self.threads.push(t);
        }
        Ok(())
    }

    /// Waits for the queue threads: they end when the connection does (after the unmount
    /// and the last user letting go) or at once when INIT did not ask for the ring.
    pub fn join(mut self) {
        self.offer.set(false);
        self.started.set(false);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Ring {
    /// A ring given up before [`Ring::start`] (a failed mount) lets its [`Taker`] go.
    fn drop(&mut self) {
        self.offer.set(false);
        self.started.set(false);
    }
}

/// The number of queues the kernel makes: `num_possible_cpus()`, from
/// /sys/devices/system/cpu/possible (`0-1`, `0-3,8-11`).
fn possible_cpus() -> Result<usize> {
    let path = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse_cpu_list(text.trim()).with_context(|| format!("{path} reads {:?}", text.trim()))
}

fn parse_cpu_list(s: &str) -> Result<usize> {
    let mut n = 0;
    for part in s.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>()?, b.parse::<usize>()?),
            None => {
                let a = part.parse::<usize>()?;
                (a, a)
            }
        };
        anyhow::ensure!(a <= b, "a descending CPU range");
        n += b - a + 1;
    }
    anyhow::ensure!(n > 0, "no CPU");
    Ok(n)
}

/// A queue's entries as the thread taking its completions sees them.
struct Entries {
    queue: Arc<Queue>,
    counts: Arc<Counts>,
    disk: Arc<Disk>,
    /// Some registration was refused (said once).
    refused: Arc<AtomicBool>,
    /// Entries registered and not ended.
    live: usize,
}

impl Entries {
    /// Gives every entry to the kernel.
    fn register(&mut self) {
        for e in 0..self.queue.entries() {
            match self.queue.register(e) {
                Ok(()) => self.live += 1,
                Err(err) => self.refuse(&err.to_string()),
            }
        }
    }

    /// Handles completions: namespace requests answered here, data requests to `out`.
    fn handle(&mut self, events: &mut Vec<Event>, out: &mut Vec<Incoming>) {
        for ev in events.drain(..) {
            match ev {
                Event::Request(t) => {
                    if let Some(i) = dispatch(&self.disk, &self.counts, t) {
                        out.push(i);
                    }
                }
                Event::NotYet { entry } => {
                    std::thread::sleep(NOT_YET_PAUSE);
                    if let Err(e) = self.queue.register(entry) {
                        self.refuse(&e.to_string());
                        self.live -= 1;
                    }
                }
                Event::Ended { errno, .. } => {
                    self.live -= 1;
                    if errno != libc::ENOTCONN && errno != libc::ECONNABORTED {
                        self.refuse(&Errno::from_raw(errno).to_string());
                    }
                }
                Event::Woken => {}
            }
        }
    }

    /// The kernel refused an entry: it has dropped the ring (requests go to /dev/fuse).
    fn refuse(&self, why: &str) {
        if !self.refused.swap(true, Ordering::AcqRel) {
            eprintln!("fsgauge devices serve: the kernel refused FUSE over io_uring ({why}); requests go through /dev/fuse");
        }
    }
}

/// One queue's thread.
struct QueueRun {
    entries: Entries,
    offer: Arc<Offer>,
    handler: Handler,
    pin: bool,
}

impl QueueRun {
    fn run(mut self) {
        if !self.offer.wait() {
            return;
        }
        let q = self.entries.queue.clone();
        if self.pin {
            // On the CPU whose requests the queue takes, as libfuse does: the request is
            // copied in, and answered, where it was made. Not fatal where refused (a cpuset).
            let mut set = nix::sched::CpuSet::new();
            if set.set(q.qid() as usize).is_ok() {
                let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
            }
        }
        self.entries.register();
        let mut events = Vec::with_capacity(q.entries());
        let mut data = Vec::with_capacity(q.entries());
        while self.entries.live > 0 {
            if let Err(e) = q.wait(&mut events, None) {
                eprintln!(
                    "fsgauge devices serve: FUSE ring queue {} failed: {e}",
                    q.qid()
                );
                return;
            }
            self.entries.handle(&mut events, &mut data);
            for i in data.drain(..) {
                (self.handler)(i);
            }
        }
    }
}

/// The ring's entries of every CPU, taken on the calling thread ([`Ring::prepare_taken`]).
pub struct Taker {
    entries: Entries,
    offer: Arc<Offer>,
    started: Arc<Offer>,
    events: Vec<Event>,
}

impl Taker {
    /// Waits until INIT has decided and the ring has the connection, then registers every
    /// entry. False where the ring is not used (INIT did not ask for it, the mount failed, or
    /// the kernel refused every entry): requests then come through /dev/fuse.
    pub fn begin(&mut self) -> bool {
        if !self.offer.wait() || !self.started.wait() {
            return false;
        }
        self.entries.register();
        self.entries.live > 0
    }

    /// Whether some entry is still the kernel's (false once the connection has ended).
    pub fn live(&self) -> bool {
        self.entries.live > 0
    }

    /// Submits the commits made so far and waits for requests, at most `timeout` (None: until
    /// one comes or [`Ring::wake`]); the data requests go to `out`.
    pub fn wait(
        &mut self,
        out: &mut Vec<Incoming>,
        timeout: Option<Duration>,
    ) -> std::io::Result<()> {
        self.entries.queue.wait(&mut self.events, timeout)?;
        self.entries.handle(&mut self.events, out);
        Ok(())
    }

    /// The data requests there are now, without a system call.
    pub fn poll(&mut self, out: &mut Vec<Incoming>) -> std::io::Result<()> {
        self.entries.queue.poll(&mut self.events)?;
        self.entries.handle(&mut self.events, out);
        Ok(())
    }

    /// Submits the commits made so far, without waiting.
    pub fn flush(&self) -> std::io::Result<()> {
        self.entries.queue.flush()
    }
}

/// A completed entry: a namespace request is answered here, a data request returned.
fn dispatch(disk: &Disk, counts: &Counts, mut t: Taken) -> Option<Incoming> {
    let h = InHeader::parse(t.in_header());
    let data = |op: Op, offset: u64, len: u64, t: Taken| {
        counts.data.fetch_add(1, Ordering::Relaxed);
        Some(Incoming {
            op,
            offset,
            len,
            token: Token {
                taken: t,
                op,
                len: len as usize,
            },
        })
    };
    match h.opcode {
        abi::READ => {
            let (off, size) = abi::rw_in(t.op_in());
            let room = t.payload_mut().len();
            data(Op::Read, off, (size as usize).min(room) as u64, t)
        }
        abi::WRITE => {
            let (off, size) = abi::rw_in(t.op_in());
            let len = (size as usize).min(t.payload().len());
            data(Op::Write, off, len as u64, t)
        }
        abi::FSYNC => data(Op::Fsync, 0, 0, t),
        abi::FALLOCATE => {
            let (off, len, mode) = abi::fallocate_in(t.op_in());
            data(Op::Fallocate { mode }, off, len, t)
        }
        _ => {
            counts.other.fetch_add(1, Ordering::Relaxed);
            let (error, len) = namespace(disk, &h, &mut t);
            t.commit(error, len);
            None
        }
    }
}

/// Answers a request on the namespace (the root and the disk file): `(-errno or 0, reply
/// bytes in the payload)`.
fn namespace(disk: &Disk, h: &InHeader, t: &mut Taken) -> (i32, usize) {
    match h.opcode {
        abi::LOOKUP => {
            let name = t.payload().split(|&b| b == 0).next().unwrap_or_default();
            match (h.nodeid, disk.attr(DISK_INO)) {
                (abi::ROOT_INO, Some(a)) if name == disk.name.as_bytes() => {
                    (0, abi::entry_out(t.payload_mut(), &a, TTL_S))
                }
                _ => (-libc::ENOENT, 0),
            }
        }
        abi::GETATTR => match disk.attr(h.nodeid) {
            Some(a) => (0, abi::attr_out(t.payload_mut(), &a, TTL_S)),
            None => (-libc::ENOENT, 0),
        },
        abi::OPEN if h.nodeid == DISK_INO => (0, abi::open_out(t.payload_mut())),
        abi::OPEN => (-libc::EISDIR, 0),
        abi::OPENDIR => (0, abi::open_out(t.payload_mut())),
        abi::RELEASE | abi::RELEASEDIR | abi::FLUSH => (0, 0),
        abi::STATFS => (0, abi::statfs_out(t.payload_mut())),
        _ => (-libc::ENOSYS, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_count_is_the_number_of_possible_cpus() {
        assert_eq!(parse_cpu_list("0").expect("one"), 1);
        assert_eq!(parse_cpu_list("0-1").expect("two"), 2);
        assert_eq!(parse_cpu_list("0-3,8-11").expect("eight"), 8);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
