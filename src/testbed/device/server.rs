//! The emulated-device server: a FUSE filesystem holding one file, the emulated disk, whose
//! bytes live in a real image and whose every request is answered when the device model says
//! the drive would have finished it. Runs as its own process (`fsgauge devices serve`, started
//! by [`super::emulated::EmulatedDevice`]), see the module docs of [`super`] for the design.
//!
//! Threads:
//! - the FUSE session's threads take each request, stamp its arrival on the monotonic clock,
//!   do its data I/O on the image at once (into a preallocated aligned buffer) and hand it to
//!   the scheduler;
//! - the scheduler thread owns the [`DeviceModel`]: it submits requests at their arrival,
//!   lets the drive take the next one when [`DeviceModel::ready_at`] comes, and replies to each
//!   at its `done_ns` (an absolute sleep, then a short spin), recording the lateness;
//! - the main thread reads the control pipe (stdin): `stats` answers one JSON [`Snapshot`]
//!   line on stdout, `ping` answers `ok`, `model on`/`model off` switch the model; end of file
//!   (the parent closed it or died) unmounts and ends the server.

use std::collections::{BinaryHeap, HashMap};
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use fuser::{
    Errno as FuseErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, WriteFlags,
};

use super::model::{Dispatch, Op, Request};
use super::stats::{Snapshot, Stats};
use super::{load_ref, DeviceModel};
use crate::sys::rt;
use crate::sys::{AlignedBuf, Errno};

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
/// The scheduler sleeps until this long before a reply is due, then spins.
const SPIN_NS: u64 = 60_000;
/// SCHED_FIFO priority of the server's threads (low among real-time ones: above every
/// normal thread, below the kernel's own).
const REALTIME_PRIORITY: i32 = 10;

const ROOT_INO: u64 = 1;
const DISK_INO: u64 = 2;
const TTL: Duration = Duration::from_secs(3600);

/// What `fsgauge devices serve` is given.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// The profile reference (name or file, with ablations).
    pub profile: String,
    /// The image holding the bytes; it must lie in a directory only root can change.
    pub image: PathBuf,
    /// The emulated disk's size in bytes.
    pub size: u64,
    /// Where the image sits on the modelled disk, bytes.
    pub offset: u64,
    /// An empty directory to mount on.
    pub mount: PathBuf,
    /// Whether the model applies from the start; `model on` / `model off` on the control pipe
    /// switch it (set-up at native speed, measured phases modelled).
    pub modelled: bool,
}

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

/// The image: one descriptor with O_DIRECT where the image's filesystem allows it, one
/// without for requests it refuses (unaligned, or a filesystem without direct I/O).
struct Image {
    direct: Option<File>,
    buffered: File,
    /// The image had fewer blocks than bytes when the server started (`--image-alloc
    /// sparse`, or the devices check's scratch image): it is kept sparse, a range the kernel
    /// zeroes is punched out rather than allocated zeroed (both read as zeros), so that mkfs
    /// zeroing a whole drive's inode tables takes no room on the host.
    sparse: bool,
}

impl Image {
    fn open(path: &Path, size: u64) -> Result<Image> {
        let buffered = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening the device image {}", path.display()))?;
        let meta = buffered
            .metadata()
            .with_context(|| format!("stat of the device image {}", path.display()))?;
        let len = meta.len();
        let sparse = {
            use std::os::unix::fs::MetadataExt;
            meta.blocks().saturating_mul(512) < size
        };
        if len < size {
            // Sparse: the disk's unwritten blocks read as zeros.
            buffered.set_len(size).with_context(|| {
                format!(
                    "extending the device image {} to {size} bytes",
                    path.display()
                )
            })?;
        }
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok();
        Ok(Image {
            direct,
            buffered,
            sparse,
        })
    }

    fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        if let Some(d) = &self.direct {
            match crate::sys::pread(d.as_fd(), buf, off) {
                Err(Errno::EINVAL) => {}
                r => return r,
            }
        }
        crate::sys::pread(self.buffered.as_fd(), buf, off)
    }

    fn write(&self, buf: &[u8], off: u64) -> Result<usize, Errno> {
        if let Some(d) = &self.direct {
            match crate::sys::pwrite(d.as_fd(), buf, off) {
                Err(Errno::EINVAL) => {}
                r => return r,
            }
        }
        crate::sys::pwrite(self.buffered.as_fd(), buf, off)
    }

    /// Reads or writes all of `buf` (short transfers continue; past the end reads zeros).
    fn transfer(&self, buf: &mut [u8], off: u64, write: bool) -> Result<usize, Errno> {
        let mut done = 0;
        while done < buf.len() {
            let n = if write {
                self.write(&buf[done..], off + done as u64)?
            } else {
                self.read(&mut buf[done..], off + done as u64)?
            };
            if n == 0 {
                if !write {
                    buf[done..].fill(0);
                }
                return Ok(buf.len());
            }
            done += n;
        }
        Ok(done)
    }
}

enum Reply {
    Read(ReplyData),
    Write(ReplyWrite),
    Flush(ReplyEmpty),
}

/// A request on its way through the server.
struct Job {
    req: Request,
    arrival_ns: u64,
    reply: Reply,
    buf: Option<AlignedBuf>,
    /// Bytes transferred with the image, or its error.
    io: Result<usize, Errno>,
}

struct DiskFs {
    image: Arc<Image>,
    pool: Arc<Pool>,
    to_sched: Mutex<Sender<Job>>,
    next_id: AtomicU64,
    size: u64,
    started: SystemTime,
    /// Set for a device that completes every request on arrival (`ram`): requests are
    /// answered on the FUSE thread that took them, with no hand-over to the scheduler, so the
    /// emulator's own cost is all that `ram` measures.
    immediate: Option<(Arc<Mutex<Stats>>, Arc<Pool>)>,
    /// Whether the model applies now; when not, requests are answered at once and counted as
    /// unmodelled.
    modelled: Arc<AtomicBool>,
    stats: Arc<Mutex<Stats>>,
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

    fn send(&self, job: Job) {
        if !self.modelled.load(Ordering::Acquire) {
            let failed = job.io.is_err();
            reply(job, &self.pool);
            lock(&self.stats).record_unmodelled(failed);
            return;
        }
        if let Some((stats, pool)) = &self.immediate {
            let d = Dispatch {
                id: job.req.id,
                op: job.req.op,
                arrival_ns: job.arrival_ns,
                start_ns: job.arrival_ns,
                done_ns: job.arrival_ns,
                breakdown: Default::default(),
            };
            answer(job, &d, stats, pool);
            return;
        }
        let tx = match self.to_sched.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            // The scheduler is gone (shutting down): answer at once.
            fail(job, Errno::EIO);
        }
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a write to the image that its filesystem refused for want of room: the request
    /// still fails (the drive cannot store it), and the client names the full backing store
    /// instead of blaming the filesystem under test.
    fn note_image_error(&self, e: Errno) {
        if e == Errno::ENOSPC {
            lock(&self.stats).image_full += 1;
        }
    }
}

fn fail(job: Job, e: Errno) {
    let e = FuseErrno::from_i32(e as i32);
    match job.reply {
        Reply::Read(r) => r.error(e),
        Reply::Write(r) => r.error(e),
        Reply::Flush(r) => r.error(e),
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
        Ok(())
    }

    fn lookup(&self, _req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT_INO && name == DISK_NAME {
            reply.entry(&TTL, &self.attr(DISK_INO), Generation(0));
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
            ROOT_INO | DISK_INO => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(FuseErrno::ENOENT),
        }
    }

    fn open(&self, _req: &fuser::Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == DISK_INO {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(FuseErrno::EISDIR);
        }
    }

    fn read(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let arrival_ns = rt::monotonic_ns();
        let len = (size as usize)
            .min(MAX_REQUEST)
            .min(self.size.saturating_sub(offset) as usize);
        let mut buf = self.pool.take();
        let io = self.image.transfer(&mut buf[..len], offset, false);
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
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let arrival_ns = rt::monotonic_ns();
        if offset.saturating_add(data.len() as u64) > self.size || data.len() > MAX_REQUEST {
            reply.error(FuseErrno::from_i32(libc::ENOSPC));
            return;
        }
        let mut buf = self.pool.take();
        buf[..data.len()].copy_from_slice(data);
        let io = self.image.transfer(&mut buf[..data.len()], offset, true);
        if let Err(e) = io {
            self.note_image_error(e);
        }
        self.send(Job {
            req: Request::write(self.id(), offset, data.len() as u64),
            arrival_ns,
            reply: Reply::Write(reply),
            buf: Some(buf),
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
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let arrival_ns = rt::monotonic_ns();
        self.send(Job {
            req: Request::flush(self.id()),
            arrival_ns,
            reply: Reply::Flush(reply),
            buf: None,
            io: Ok(0),
        });
    }

    fn fallocate(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Discards (the loop device punches holes) and zeroing (the loop device's write-zeroes,
        // e.g. mkfs's inode tables): the image frees or zeroes the space; a 2005 drive had no
        // TRIM, so the model sees nothing.
        let mode = if self.image.sparse && mode & libc::FALLOC_FL_ZERO_RANGE != 0 {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        } else {
            mode
        };
        match crate::sys::fallocate(self.image.buffered.as_fd(), mode, offset, length) {
            Ok(()) => reply.ok(),
            Err(e) => {
                self.note_image_error(e);
                reply.error(FuseErrno::from_i32(e as i32))
            }
        }
    }
}

/// The scheduler: the model's clock is the monotonic clock; see the module docs.
fn schedule(mut model: DeviceModel, rx: Receiver<Job>, stats: Arc<Mutex<Stats>>, pool: Arc<Pool>) {
    let mut waiting: HashMap<u64, Job> = HashMap::new();
    let mut due: BinaryHeap<std::cmp::Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut taken: HashMap<u64, Dispatch> = HashMap::new();
    let mut open = true;
    let take = |job: Job, model: &mut DeviceModel, waiting: &mut HashMap<u64, Job>| {
        model.submit(job.req, job.arrival_ns);
        waiting.insert(job.req.id, job);
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
                    due.push(std::cmp::Reverse((d.done_ns, d.id)));
                    taken.insert(d.id, d);
                }
                None => break,
            }
        }
        // Reply to every request whose completion has come.
        while let Some(&std::cmp::Reverse((done, id))) = due.peek() {
            if done > rt::monotonic_ns() {
                break;
            }
            due.pop();
            let (Some(d), Some(job)) = (taken.remove(&id), waiting.remove(&id)) else {
                continue;
            };
            answer(job, &d, &stats, &pool);
        }
        if !open && waiting.is_empty() {
            return;
        }
        let wake = match (model.ready_at(), due.peek()) {
            (Some(a), Some(std::cmp::Reverse((b, _)))) => Some(a.min(*b)),
            (Some(a), None) => Some(a),
            (None, Some(std::cmp::Reverse((b, _)))) => Some(*b),
            (None, None) => None,
        };
        let now = rt::monotonic_ns();
        let got = match wake {
            None if open => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            None => return,
            Some(w) if w > now + SPIN_NS && open => {
                rx.recv_timeout(Duration::from_nanos(w - now - SPIN_NS))
            }
            Some(w) => {
                // Close to the deadline: spin, still taking arrivals.
                let mut got = Err(RecvTimeoutError::Timeout);
                while rt::monotonic_ns() < w {
                    if open {
                        match rx.try_recv() {
                            Ok(j) => {
                                got = Ok(j);
                                break;
                            }
                            Err(TryRecvError::Disconnected) => {
                                got = Err(RecvTimeoutError::Disconnected);
                                break;
                            }
                            Err(TryRecvError::Empty) => {}
                        }
                    }
                    std::hint::spin_loop();
                }
                got
            }
        };
        match got {
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

fn answer(job: Job, d: &Dispatch, stats: &Mutex<Stats>, pool: &Pool) {
    let len = job.req.len;
    let failed = job.io.is_err();
    let replied = reply(job, pool);
    lock(stats).record(d, if d.op == Op::Flush { 0 } else { len }, replied, failed);
}

fn lock(stats: &Mutex<Stats>) -> std::sync::MutexGuard<'_, Stats> {
    match stats.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Sends the reply of `job` (its data, or its error) and gives its buffer back; returns when
/// the reply left, on the monotonic clock.
fn reply(job: Job, pool: &Pool) -> u64 {
    let Job { reply, buf, io, .. } = job;
    let replied = match (reply, io) {
        (r, Err(e)) => {
            fail(
                Job {
                    req: Request::flush(0),
                    arrival_ns: 0,
                    reply: r,
                    buf: None,
                    io: Ok(0),
                },
                e,
            );
            rt::monotonic_ns()
        }
        (Reply::Read(r), Ok(n)) => {
            let t = rt::monotonic_ns();
            match &buf {
                Some(b) => r.data(&b[..n.min(b.len())]),
                None => r.data(&[]),
            }
            t
        }
        (Reply::Write(r), Ok(n)) => {
            let t = rt::monotonic_ns();
            r.written(n as u32);
            t
        }
        (Reply::Flush(r), Ok(_)) => {
            let t = rt::monotonic_ns();
            r.ok();
            t
        }
    };
    if let Some(b) = buf {
        pool.give(b);
    }
    replied
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
    for m in crate::testbed::leave_fsgauge_cgroups() {
        eprintln!("fsgauge devices serve: {m}; the server's memory counts against the run's limit");
    }
}

/// Runs the server until the control pipe (stdin) closes. Prints `ready` on stdout once the
/// disk file can be opened.
pub fn serve(args: &ServeArgs) -> Result<()> {
    // No PR_SET_PDEATHSIG: it fires when the parent *thread* ends, which in a library user
    // need not be the process. The control pipe's end of file tells of the parent's death.
    if let Err(e) = rt::set_io_flusher() {
        setup_warning(&format!("prctl(PR_SET_IO_FLUSHER) failed ({e}); the server may deadlock under memory pressure (needs Linux 5.6+ and CAP_SYS_RESOURCE)"));
    }
    let _ = rt::set_timer_slack_min();
    leave_memory_cgroups();
    let (profile, abl) = load_ref(&args.profile)?;
    let model = DeviceModel::new(&profile, &abl)
        .map_err(|m| anyhow::anyhow!("profile {}: {m}", profile.name))?
        .with_offset(args.offset);
    if !model.fits(args.size) {
        bail!(
            "an image of {} bytes at offset {} does not fit on {} ({} bytes); give a smaller size or offset",
            args.size,
            args.offset,
            profile.name,
            profile.capacity_bytes
        );
    }
    let image = Arc::new(Image::open(&args.image, args.size)?);
    let pool = Arc::new(Pool::new(BUFFERS));
    if let Err(e) = rt::lock_all_memory() {
        setup_warning(&format!(
            "mlockall failed ({e}); the server's memory may be paged out under pressure"
        ));
    }
    // Real time for every server thread (they inherit it): replies leave on time even when
    // the workload keeps every core busy. Spins are short (SPIN_NS) and the kernel's RT
    // throttling keeps a runaway from freezing the machine.
    if let Err(e) = rt::set_realtime(REALTIME_PRIORITY) {
        setup_warning(&format!(
            "SCHED_FIFO refused ({e}); replies may be late when the CPUs are busy"
        ));
    }
    let stats = Arc::new(Mutex::new(Stats::default()));
    let immediate = (profile.kind == super::Kind::Ram && abl.constant_ns.is_none())
        .then(|| (stats.clone(), pool.clone()));
    let modelled = Arc::new(AtomicBool::new(args.modelled));
    let (tx, rx) = mpsc::channel();
    let sched = {
        let stats = stats.clone();
        let pool = pool.clone();
        std::thread::Builder::new()
            .name("device-model".into())
            .spawn(move || schedule(model, rx, stats, pool))
            .context("starting the scheduler thread")?
    };
    let fs = DiskFs {
        image,
        pool,
        to_sched: Mutex::new(tx),
        next_id: AtomicU64::new(1),
        size: args.size,
        started: SystemTime::now(),
        immediate,
        modelled: modelled.clone(),
        stats: stats.clone(),
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("fsgauge-{}", profile.name)),
        MountOption::Subtype("fsgauge-device".into()),
        MountOption::RW,
        MountOption::NoAtime,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::NoExec,
    ];
    config.n_threads = Some(FUSE_THREADS);
    config.clone_fd = true;
    let session = fuser::Session::new(fs, &args.mount, &config).with_context(|| {
        format!(
            "mounting the device server's FUSE filesystem on {}",
            args.mount.display()
        )
    })?;
    let bg = session
        .spawn()
        .context("starting the FUSE session threads")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready").context("telling the parent the device is ready")?;
        out.flush()
            .context("telling the parent the device is ready")?;
    }
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let answer = match line.trim() {
            "stats" => {
                let snap: Snapshot = lock(&stats).snapshot();
                serde_json::to_string(&snap)?
            }
            "ping" => "ok".to_string(),
            "model on" | "model off" => {
                modelled.store(line.trim() == "model on", Ordering::Release);
                "ok".to_string()
            }
            "quit" => break,
            other => format!("error: unknown command {other:?}"),
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{answer}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    // Detach the mount; the session ends when the last user (a loop device) lets go.
    let _ = nix::mount::umount2(&args.mount, nix::mount::MntFlags::MNT_DETACH);
    let _ = bg.join();
    let _ = sched.join();
    Ok(())
}
