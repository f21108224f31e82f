//! The emulated-device server: a FUSE filesystem holding one file, the emulated disk, whose
//! bytes live in a real image and whose every request is answered when the device model says
//! the drive would have finished it. Runs as its own process (`fsgauge devices serve`, started
//! by [`super::emulated::EmulatedDevice`]), see the module docs of [`super`] for the design.
//!
//! Threads, and what each does (real-time priorities: the timing thread's above the FUSE
//! threads', both above every normal thread):
//! - the FUSE session's threads (SCHED_FIFO [`FUSE_PRIORITY`]) take each request, stamp its
//!   arrival on the monotonic clock, move its data at once (a write into the [`store`], a
//!   read out of it into a preallocated buffer) and hand it to the timing thread;
//! - the timing thread ([`timing`], SCHED_FIFO [`TIMING_PRIORITY`]) owns the model and replies
//!   to each request at its modelled completion; a FUSE thread copying a large write never
//!   delays it;
//! - through FUSE over io_uring (the default where the kernel has it, [`ring`]) the data
//!   requests come through the ring instead: for a disk that answers at once (`ram`) one ring
//!   thread per CPU (SCHED_FIFO [`FUSE_PRIORITY`], pinned) takes them, for a modelled disk the
//!   timing thread itself;
//! - the stats thread ([`records`], normal priority) keeps the counters and histograms;
//! - the main thread (normal priority) reads the control channel (stdin): `stats` answers one
//!   JSON [`Snapshot`] line on stdout, `ping` answers `ok`, `model on`/`model off` switch the
//!   model, `log start LIMIT_BYTES`/`log stop`/`log summary` and `crash CUT CACHE SEED` drive
//!   the write log and the `crash` file ([`crashfile`]); end of file (the parent closed it or died) unmounts and ends the server.
//!
//! The disk's bytes are held in memory ([`store`]): the emulator's own cost per request is a
//! memory copy, never the host disk's latency.

mod args;
mod crashfile;
mod heldoff;
mod records;
mod ring;
mod stall;
pub mod store;
mod timing;

use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use fuser::{
    Errno as FuseErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, WriteFlags,
};

use super::model::{Dispatch, Op, Request};
use super::stats::Snapshot;
use super::writelog::cut::Replied;
use super::writelog::record::{Timed, WriteLog};
use super::DeviceModel;
use crate::base::sys::rt;
use crate::base::sys::{AlignedBuf, Errno};
pub use args::{transport_from_env, DiskArgs, ServeArgs, StoreChoice, Transport};
pub use crashfile::CRASH_NAME;
use records::{Note, Recorder};
use store::Store;

/// The emulated disk's name in the mount.
pub const DISK_NAME: &str = "disk";
/// The largest request the kernel sends (`fs.fuse.max_pages_limit` = 256 pages).
pub const MAX_REQUEST: usize = 1 << 20;
/// Buffers of [`MAX_REQUEST`] bytes preallocated for requests in flight.
const BUFFERS: usize = 64;
/// FUSE requests the kernel may keep outstanding in the background (async direct I/O).
const MAX_BACKGROUND: u16 = 64;
/// Threads reading /dev/fuse.
const FUSE_THREADS: usize = 4;
/// SCHED_FIFO priority of the FUSE threads (low among real-time ones: above every normal
/// thread, below the kernel's own).
pub const FUSE_PRIORITY: i32 = 10;
/// SCHED_FIFO priority of the timing thread: above the FUSE threads, so that completing a
/// request on time always comes before moving another's data.
pub const TIMING_PRIORITY: i32 = 20;

const ROOT_INO: u64 = 1;
const DISK_INO: u64 = 2;
const CRASH_INO: u64 = 3;
const TTL: Duration = Duration::from_secs(3600);

/// Preallocated aligned buffers: taken at a request's arrival, given back after its reply.
struct Pool {
    free: Mutex<Vec<AlignedBuf>>,
    more: Condvar,
}

impl Pool {
    fn new(n: usize) -> Pool {
        Pool {
            free: Mutex::new((0..n).map(|_| AlignedBuf::zeroed(MAX_REQUEST)).collect()),
            more: Condvar::new(),
        }
    }

    fn take(&self) -> AlignedBuf {
        let mut free = match self.free.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        loop {
            if let Some(b) = free.pop() {
                return b;
            }
            free = match self.more.wait(free) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }

    fn give(&self, b: AlignedBuf) {
        let mut free = match self.free.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        free.push(b);
        self.more.notify_one();
    }
}

enum Reply {
    Read(ReplyData),
    Write(ReplyWrite),
    Flush(ReplyEmpty),
    /// A request taken from the FUSE ring ([`ring`]).
    Ring(super::uring::Token),
}

/// A request on its way through the server: its data already moved.
struct Job {
    req: Request,
    arrival_ns: u64,
    reply: Reply,
    /// A read's data, taken from the store at arrival.
    buf: Option<AlignedBuf>,
    /// Bytes transferred with the store, or its error.
    io: Result<usize, Errno>,
}

struct DiskFs {
    store: Arc<Store>,
    pool: Arc<Pool>,
    to_timing: Mutex<Sender<Job>>,
    next_id: AtomicU64,
    size: u64,
    started: SystemTime,
    /// Set for a device that completes every request on arrival (`ram`): requests are
    /// answered on the FUSE thread that took them, with no hand-over to the timing thread, so
    /// the emulator's own cost is all that `ram` measures.
    immediate: bool,
    /// Whether the model applies now; when not, requests are answered at once and counted as
    /// unmodelled.
    modelled: Arc<AtomicBool>,
    rec: Recorder,
    /// Asks INIT for FUSE over io_uring ([`ring`]).
    ring_offer: Option<Arc<super::uring::Offer>>,
    /// Wakes the timing thread where it takes the ring ([`ring::prepare_taken`]): a request
    /// that still comes through /dev/fuse must not wait for the ring's next event.
    wake_ring: Option<super::uring::Waker>,
    /// The write log, and the crash state served as the `crash` file.
    log: Arc<WriteLog>,
}

impl DiskFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == ROOT_INO {
            (FileType::Directory, 0o700, 0, 2)
        } else {
            (FileType::RegularFile, 0o600, self.size, 1)
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size / 512,
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Hands `job` to the timing thread (or answers it at once: see [`DiskFs::route`]).
    fn send(&self, job: Job) {
        let Some(job) = self.route(job) else {
            return;
        };
        let tx = match self.to_timing.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            // The timing thread is gone (shutting down): answer at once.
            fail(job, Errno::EIO);
            return;
        }
        drop(tx);
        if let Some(w) = &self.wake_ring {
            w();
        }
    }

    /// Answers `job` at once where the model does not apply (switched off, or a disk that
    /// answers at once); otherwise gives it back for the model.
    fn route(&self, job: Job) -> Option<Job> {
        if !self.modelled.load(Ordering::Acquire) {
            self.rec.note(Note::Unmodelled {
                failed: job.io.is_err(),
            });
            let now = rt::monotonic_ns();
            note_reply(&self.log, &job.req, now, now);
            reply(job, &self.pool);
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
            reply(job, &self.pool);
            return None;
        }
        Some(job)
    }

    /// Whether the model applies now.
    fn is_modelled(&self) -> bool {
        self.modelled.load(Ordering::Acquire)
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a write the store refused for want of room: the request still fails (the drive
    /// cannot store it), and the client names the full backing store (or memory) instead of
    /// blaming the filesystem under test.
    fn note_store_error(&self, e: Errno) {
        if e == Errno::ENOSPC {
            self.rec.note(Note::ImageFull);
        }
    }
}

/// Tells the write log of a write's or a flush's reply (modelled completion `done_ns`).
fn note_reply(log: &WriteLog, req: &Request, done_ns: u64, reply_ns: u64) {
    if req.op != Op::Read && log.on() {
        log.note(Timed::Replied(Replied {
            id: req.id,
            done_ns,
            reply_ns,
        }));
    }
}

fn fail(job: Job, e: Errno) {
    let e = FuseErrno::from_i32(e as i32);
    match job.reply {
        Reply::Read(r) => r.error(e),
        Reply::Write(r) => r.error(e),
        Reply::Flush(r) => r.error(e),
        Reply::Ring(t) => t.commit(Err(Errno::from_raw(e.code()))),
    }
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &fuser::Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_REQUEST as u32);
        let _ = config.set_max_readahead(MAX_REQUEST as u32);
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
        // Async direct I/O: the loop device's requests do not wait for each other in FUSE,
        // so several can be outstanding as at a disk's queue.
        if config.add_capabilities(InitFlags::FUSE_ASYNC_DIO).is_err() {
            eprintln!("fsgauge devices serve: the kernel does not offer FUSE async direct I/O; requests will reach the model one at a time");
        }
        if let Some(offer) = &self.ring_offer {
            offer.decide(config);
        }
        Ok(())
    }

    fn lookup(&self, _req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT_INO && name == DISK_NAME {
            reply.entry(&TTL, &self.attr(DISK_INO), Generation(0));
        } else if parent.0 == ROOT_INO && name == CRASH_NAME {
            reply.entry(&TTL, &self.attr(CRASH_INO), Generation(0));
        } else {
            reply.error(FuseErrno::ENOENT);
        }
    }

    fn getattr(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        match ino.0 {
            ROOT_INO | DISK_INO | CRASH_INO => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(FuseErrno::ENOENT),
        }
    }

    fn open(&self, _req: &fuser::Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == DISK_INO || ino.0 == CRASH_INO {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(FuseErrno::EISDIR);
        }
    }

    fn read(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CRASH_INO {
            return self.crash_read(offset, size, reply);
        }
        let arrival_ns = rt::monotonic_ns();
        let len = (size as usize)
            .min(MAX_REQUEST)
            .min(self.size.saturating_sub(offset) as usize);
        let mut buf = self.pool.take();
        let io = self.store.read(&mut buf[..len], offset);
        self.send(Job {
            req: Request::read(self.id(), offset, len as u64),
            arrival_ns,
            reply: Reply::Read(reply),
            buf: Some(buf),
            io,
        });
    }

    fn write(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CRASH_INO {
            return self.crash_write(offset, data, reply);
        }
        let arrival_ns = rt::monotonic_ns();
        if offset.saturating_add(data.len() as u64) > self.size || data.len() > MAX_REQUEST {
            reply.error(FuseErrno::from_i32(libc::ENOSPC));
            return;
        }
        let id = self.id();
        let io = self.log.write(&self.store, id, data, offset, arrival_ns);
        if let Err(e) = io {
            self.note_store_error(e);
        }
        self.send(Job {
            req: Request::write(id, offset, data.len() as u64),
            arrival_ns,
            reply: Reply::Write(reply),
            buf: None,
            io,
        });
    }

    fn flush(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2), not a cache flush: the drive sees nothing.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if ino.0 == CRASH_INO {
            // A checker's disk: its writes are already where they go.
            return reply.ok();
        }
        let arrival_ns = rt::monotonic_ns();
        let id = self.id();
        self.log.flush(&self.store, id, arrival_ns);
        self.send(Job {
            req: Request::flush(id),
            arrival_ns,
            reply: Reply::Flush(reply),
            buf: None,
            io: Ok(0),
        });
    }

    fn fallocate(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino.0 == CRASH_INO {
            return self.crash_zero(offset, length, reply);
        }
        // Discards (the loop device punches holes) and zeroing (the loop device's write-zeroes,
        // e.g. mkfs's inode tables): the store frees or zeroes the space; a 2005 drive had no
        // TRIM, so the model sees nothing.
        match self.log.zero(&self.store, self.id(), mode, offset, length) {
            Ok(()) => reply.ok(),
            Err(e) => {
                self.note_store_error(e);
                reply.error(FuseErrno::from_i32(e as i32))
            }
        }
    }
}

/// Sends the reply of `job` (its data, or its error) and gives its buffer back.
fn reply(job: Job, pool: &Pool) {
    let Job { reply, buf, io, .. } = job;
    match (reply, io) {
        (Reply::Read(r), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
        (Reply::Write(r), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
        (Reply::Flush(r), Err(e)) => r.error(FuseErrno::from_i32(e as i32)),
        (Reply::Read(r), Ok(n)) => match &buf {
            Some(b) => r.data(&b[..n.min(b.len())]),
            None => r.data(&[]),
        },
        (Reply::Write(r), Ok(n)) => r.written(n as u32),
        (Reply::Flush(r), Ok(_)) => r.ok(),
        (Reply::Ring(t), io) => t.commit(io),
    }
    if let Some(b) = buf {
        pool.give(b);
    }
}

/// Set by the parent on every server after its first: the machine's limits were said once.
pub const QUIET_SETUP_ENV: &str = "FSGAUGE_DEVICE_QUIET_SETUP";

/// A limit of this machine met while setting the server up (no CAP_SYS_RESOURCE, no real
/// time), said by the first server an fsgauge process starts, not by each of them.
fn setup_warning(m: &str) {
    if std::env::var_os(QUIET_SETUP_ENV).is_none() {
        eprintln!("fsgauge devices serve: {m}");
    }
}

/// Moves this process out of every memory cgroup a run made (v1 and v2): the daemon must not
/// be reclaimed against a workload's limit.
fn leave_memory_cgroups() {
    for m in crate::host::memlimit::leave_fsgauge_cgroups() {
        eprintln!("fsgauge devices serve: {m}; the server's memory counts against the run's limit");
    }
}

/// The process-wide set-up of a server: out of the run's memory cgroups, no recursion into
/// writeback, its memory locked as it is touched, timer slack of 1 ns.
fn prepare_process() {
    // No PR_SET_PDEATHSIG: it fires when the parent *thread* ends, which in a library user
    // need not be the process. The control pipe's end of file tells of the parent's death.
    if let Err(e) = rt::set_io_flusher() {
        setup_warning(&format!("prctl(PR_SET_IO_FLUSHER) failed ({e}); the server may deadlock under memory pressure (needs Linux 5.6+ and CAP_SYS_RESOURCE)"));
    }
    let _ = rt::set_timer_slack_min();
    leave_memory_cgroups();
    if let Err(e) = rt::lock_all_memory() {
        setup_warning(&format!(
            "mlockall failed ({e}); the server's memory may be paged out under pressure"
        ));
    }
}

/// Runs the server until the control pipe (stdin) closes. Prints `ready TRANSPORT SET` on
/// stdout once the disk file can be opened: TRANSPORT `ring` or `dev`, SET 1 when this server
/// turned the machine's `enable_uring` on (0 otherwise).
pub fn serve(args: &ServeArgs) -> Result<()> {
    let d = &args.disk;
    prepare_process();
    let (want_ring, set_uring) = ring::wanted(d.transport(), &mut |m| setup_warning(m));
    let (profile, abl) = (d.checked_profile()?, d.profile.ablations());
    let model = DeviceModel::new(profile, &abl)
        .map_err(|m| anyhow::anyhow!("profile {}: {m}", profile.name))?
        .with_offset(d.offset);
    if !model.fits(d.size) {
        bail!(
            "an image of {} bytes at offset {} does not fit on {} ({} bytes); give a smaller size or offset",
            d.size,
            d.offset,
            profile.name,
            profile.capacity_bytes
        );
    }
    let store = Arc::new(if d.overlay {
        Store::overlay(&d.image, d.size, d.store_budget())?
    } else {
        Store::open(&d.image, d.size, d.store_budget(), &mut |m| {
            setup_warning(&m)
        })?
    });
    let pool = Arc::new(Pool::new(BUFFERS));
    let (rec, stats_thread) =
        records::start(store.budget()).context("starting the stats thread")?;
    let modelled = Arc::new(AtomicBool::new(d.modelled));
    let log = Arc::new(WriteLog::default());
    let (tx, rx) = mpsc::channel();
    let mut fs = DiskFs {
        store,
        pool: pool.clone(),
        to_timing: Mutex::new(tx),
        next_id: AtomicU64::new(1),
        size: d.size,
        started: SystemTime::now(),
        immediate: profile.kind == super::Kind::Ram && abl.constant_ns.is_none(),
        modelled: modelled.clone(),
        rec: rec.clone(),
        ring_offer: None,
        wake_ring: None,
        log: log.clone(),
    };
    // A disk that answers at once takes the ring on a thread per CPU; a modelled one on the
    // timing thread, which commits each reply when it is due.
    let (mut ring, taken) = match (want_ring, fs.immediate) {
        (true, true) => (ring::prepare(&fs), None),
        (true, false) => match ring::prepare_taken(&fs) {
            Some((r, t)) => (Some(r), Some(t)),
            None => (None, None),
        },
        (false, _) => (None, None),
    };
    fs.ring_offer = ring.as_ref().map(|r| r.offer());
    if taken.is_some() {
        fs.wake_ring = ring.as_ref().map(|r| r.waker());
    }
    let timing = {
        let (rec, log) = (rec.clone(), log.clone());
        std::thread::Builder::new()
            .name("device-timing".into())
            .spawn(move || {
                realtime(TIMING_PRIORITY);
                timing::run(model, rx, rec, &log, &pool, taken)
            })
            .context("starting the timing thread")?
    };
    // The FUSE threads inherit this thread's policy when the session starts them; this thread
    // then goes back to normal: it only reads the control channel.
    realtime(FUSE_PRIORITY);
    let bg = mount(fs, &profile.name, &args.mount, ring.as_mut())?;
    let _ = rt::set_normal();
    {
        let transport = if ring.is_some() { "ring" } else { "dev" };
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready {transport} {}", u8::from(set_uring))
            .context("telling the parent the device is ready")?;
        out.flush()
            .context("telling the parent the device is ready")?;
    }
    control(&rec, &modelled, &log, d.size)?;
    // Detach the mount; the session ends when the last user (a loop device) lets go.
    let _ = nix::mount::umount2(&args.mount, nix::mount::MntFlags::MNT_DETACH);
    let _ = bg.join();
    if let Some(r) = ring {
        r.join();
    }
    let _ = timing.join();
    drop(rec);
    let _ = stats_thread.join();
    Ok(())
}

/// SCHED_FIFO at `priority` for the calling thread (and the threads it starts after): replies
/// leave on time even when the workload keeps every core busy. Spins are short and the
/// kernel's RT throttling keeps a runaway from freezing the machine.
fn realtime(priority: i32) {
    if let Err(e) = rt::set_realtime(priority) {
        setup_warning(&format!(
            "SCHED_FIFO refused ({e}); replies may be late when the CPUs are busy"
        ));
    }
}

/// Mounts the disk's FUSE filesystem on `on` and starts its threads (the ring's first).
fn mount(
    fs: DiskFs,
    profile: &str,
    on: &std::path::Path,
    ring: Option<&mut super::uring::Ring>,
) -> Result<fuser::BackgroundSession> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("fsgauge-{profile}")),
        MountOption::Subtype("fsgauge-device".into()),
        MountOption::RW,
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::NoExec,
    ];
    config.n_threads = Some(FUSE_THREADS);
    config.clone_fd = true;
    let session = fuser::Session::new(fs, on, &config).with_context(|| {
        format!(
            "mounting the device server's FUSE filesystem on {}",
            on.display()
        )
    })?;
    if let Some(r) = ring {
        // On an error the session is dropped, which unmounts: nothing waits for the ring.
        r.start(&session)?;
    }
    session.spawn().context("starting the FUSE session threads")
}

/// Answers the control channel (stdin) until it closes or says `quit`.
fn control(rec: &Recorder, modelled: &AtomicBool, log: &WriteLog, size: u64) -> Result<()> {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
        let answer = match line.trim() {
            "stats" => {
                let snap: Snapshot = rec
                    .snapshot()
                    .context("the stats thread has ended before the server")?;
                serde_json::to_string(&snap)?
            }
            "ping" => "ok".to_string(),
            "model on" | "model off" => {
                modelled.store(line.trim() == "model on", Ordering::Release);
                "ok".to_string()
            }
            "quit" => return Ok(()),
            other => match crashfile::command(log, other, size) {
                Some(answer) => answer,
                None => format!("error: unknown command {other:?}"),
            },
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{answer}").and_then(|_| out.flush()).is_err() {
            return Ok(());
        }
    }
}
