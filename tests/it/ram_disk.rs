//! A RAM disk served by this process over /dev/fuse or FUSE over io_uring, for the ring tests
//! (`device_uring.rs`) and the transport benchmark (`benches/uring_transport.rs`, which
//! includes this file by path): the /dev/fuse side as `devices serve` configures it, the ring
//! side answering data requests at once, a loop device with direct I/O on top.
#![allow(dead_code)] // each includer uses its part

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use fsgauge::device::transport::ring::{self as uring, Counts, Disk, Incoming, Offer, Op, Ring};
use fsgauge::testbed::LoopDevice;
use fuser::{
    FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, WriteFlags,
};

pub const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";
const MAX_REQUEST: usize = 1 << 20;
const TTL: Duration = Duration::from_secs(3600);

/// Sets the module parameter for a test and puts back the value it found.
pub struct Param(Option<String>);

impl Param {
    pub fn set(on: bool) -> Option<Param> {
        let was = std::fs::read_to_string(PARAM).ok()?.trim().to_string();
        std::fs::write(PARAM, if on { "1" } else { "0" }).ok()?;
        Some(Param(Some(was)))
    }
}

impl Drop for Param {
    fn drop(&mut self) {
        if let Some(was) = self.0.take() {
            let _ = std::fs::write(PARAM, if was == "Y" { "1" } else { "0" });
        }
    }
}

/// The disk's bytes, in memory.
pub struct Ram(pub RwLock<Vec<u8>>);

impl Ram {
    pub fn zeroed(size: usize) -> Arc<Ram> {
        Arc::new(Ram(RwLock::new(vec![0u8; size])))
    }

    fn read(&self, buf: &mut [u8], off: u64) -> usize {
        let b = self.0.read().unwrap();
        let off = (off as usize).min(b.len());
        let n = buf.len().min(b.len() - off);
        buf[..n].copy_from_slice(&b[off..off + n]);
        n
    }

    fn write(&self, data: &[u8], off: u64) -> usize {
        let mut b = self.0.write().unwrap();
        let off = (off as usize).min(b.len());
        let n = data.len().min(b.len() - off);
        b[off..off + n].copy_from_slice(&data[..n]);
        n
    }
}

/// The /dev/fuse side: as `devices serve` configures it, with the ring offered at INIT.
struct RamFs {
    ram: Arc<Ram>,
    size: u64,
    offer: Option<Arc<Offer>>,
    pub asked: Arc<Mutex<Option<bool>>>,
}

impl RamFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == 1 {
            (FileType::Directory, 0o700, 0, 2)
        } else {
            (FileType::RegularFile, 0o600, self.size, 1)
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size / 512,
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
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
}

impl Filesystem for RamFs {
    fn init(&mut self, _req: &fuser::Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_REQUEST as u32);
        let _ = config.set_max_readahead(MAX_REQUEST as u32);
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        let asked = self.offer.as_ref().map(|o| o.decide(config));
        *self.asked.lock().unwrap() = asked;
        Ok(())
    }

    fn lookup(&self, _req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == 1 && name == "disk" {
            reply.entry(&TTL, &self.attr(2), Generation(0));
        } else {
            reply.error(fuser::Errno::ENOENT);
        }
    }

    fn getattr(
        &self,
        _r: &fuser::Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        reply.attr(&TTL, &self.attr(ino.0));
    }

    fn open(&self, _r: &fuser::Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _r: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut buf = vec![0u8; size as usize];
        let n = self.ram.read(&mut buf, offset);
        reply.data(&buf[..n]);
    }

    fn write(
        &self,
        _r: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.written(self.ram.write(data, offset) as u32);
    }

    fn flush(
        &self,
        _r: &fuser::Request,
        _i: INodeNo,
        _f: FileHandle,
        _l: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, _r: &fuser::Request, _i: INodeNo, _f: FileHandle, _d: bool, reply: ReplyEmpty) {
        reply.ok();
    }
}

/// The ring side: data requests answered at once on the queue thread that took them (reads
/// from `drop_reads_from` on are dropped unanswered).
fn ram_handler(ram: Arc<Ram>, drop_reads_from: u64) -> uring::Handler {
    Arc::new(move |mut r: Incoming| match r.op {
        Op::Read if r.offset >= drop_reads_from => drop(r.token),
        Op::Read => {
            let n = ram.read(r.token.buf(), r.offset);
            r.token.commit(Ok(n));
        }
        Op::Write => {
            let n = ram.write(r.token.data(), r.offset);
            r.token.commit(Ok(n));
        }
        Op::Fsync | Op::Fallocate { .. } => r.token.commit(Ok(0)),
    })
}

/// A RAM disk mounted in the sandbox, through the ring (when `ring`) or /dev/fuse.
pub struct Served {
    mount: PathBuf,
    session: Option<fuser::BackgroundSession>,
    ring: Option<Ring>,
    pub counts: Option<Arc<Counts>>,
    pub asked: Arc<Mutex<Option<bool>>>,
}

impl Served {
    pub fn start(dir: &Path, ram: Arc<Ram>, ring: bool) -> Served {
        Self::start_with(dir, ram, ring.then_some(true), u64::MAX)
    }

    /// `ring`: None for /dev/fuse only, or whether the ring's threads are pinned.
    pub fn start_with(
        dir: &Path,
        ram: Arc<Ram>,
        ring: Option<bool>,
        drop_reads_from: u64,
    ) -> Served {
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        let size = ram.0.read().unwrap().len() as u64;
        let mut ring = ring.and_then(|pin| {
            let disk = Disk {
                name: "disk".into(),
                size,
                time: 0,
            };
            let mut r =
                Ring::prepare(disk, MAX_REQUEST, ram_handler(ram.clone(), drop_reads_from))?;
            r.pin_queues(pin);
            Some(r)
        });
        let asked = Arc::new(Mutex::new(None));
        let fs = RamFs {
            ram,
            size,
            offer: ring.as_ref().map(|r| r.offer()),
            asked: asked.clone(),
        };
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            MountOption::FSName("fsgauge-uring-test".into()),
            MountOption::RW,
            MountOption::NoAtime,
        ];
        config.n_threads = Some(4);
        config.clone_fd = true;
        let session = fuser::Session::new(fs, &mount, &config).unwrap();
        if let Some(r) = ring.as_mut() {
            r.start(&session).unwrap();
        }
        let counts = ring.as_ref().map(|r| r.counts());
        Served {
            mount,
            session: Some(session.spawn().unwrap()),
            ring,
            counts,
            asked,
        }
    }

    pub fn disk(&self) -> PathBuf {
        self.mount.join("disk")
    }

    pub fn data_requests(&self) -> u64 {
        self.counts
            .as_ref()
            .map_or(0, |c| c.data.load(Ordering::Relaxed))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.mount, nix::mount::MntFlags::MNT_DETACH);
        if let Some(s) = self.session.take() {
            let _ = s.join();
        }
        if let Some(r) = self.ring.take() {
            r.join();
        }
    }
}

/// A loop device with direct I/O on the served disk.
pub fn attach(s: &Served) -> LoopDevice {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(s.disk())
        .unwrap();
    let l = LoopDevice::attach(&f, &s.disk(), true).unwrap();
    assert!(
        l.direct_io(),
        "the loop device does direct I/O on the FUSE file"
    );
    l
}
