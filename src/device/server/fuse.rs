//! The FUSE filesystem the kernel mounts: a root holding the disk file and the crash file
//! ([`super::crashfile`]). Through /dev/fuse ([`crate::device::transport::dev`]) the session's
//! threads take the disk's data requests here, move their data at once and hand them to the
//! timing thread; through FUSE over io_uring the ring answers the disk's requests itself, and
//! this filesystem only answers INIT (asking for the ring) and what still comes on /dev/fuse.

use std::ffi::OsStr;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno as FuseErrno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, WriteFlags,
};

use super::core::Core;
use super::crashfile::{CrashFile, CRASH_NAME};
use super::MAX_BACKGROUND;
use crate::base::sys::Errno;
use crate::device::model::Request;
use crate::device::transport::dev::{DevReply, Pool};
use crate::device::transport::ring::{Offer, Waker};
use crate::device::transport::{Job, DISK_NAME, MAX_REQUEST};

const ROOT_INO: u64 = 1;
const DISK_INO: u64 = 2;
const CRASH_INO: u64 = 3;
const TTL: Duration = Duration::from_secs(3600);

/// The mounted filesystem.
pub(super) struct DiskFs {
    pub core: Arc<Core>,
    /// The read buffers of requests through /dev/fuse.
    pub pool: Arc<Pool>,
    /// Hands /dev/fuse's data requests to the timing thread.
    pub to_timing: Mutex<Sender<Job<DevReply>>>,
    pub started: SystemTime,
    /// Asks INIT for FUSE over io_uring ([`crate::device::transport::ring`]).
    pub ring_offer: Option<Arc<Offer>>,
    /// Wakes the timing thread where it takes the ring: a request that still comes through
    /// /dev/fuse must not wait for the ring's next event.
    pub wake_ring: Option<Waker>,
}

impl DiskFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == ROOT_INO {
            (FileType::Directory, 0o700, 0, 2)
        } else {
            (FileType::RegularFile, 0o600, self.core.size, 1)
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

    /// Hands `job` to the timing thread (or answers it at once: see [`Core::route`]).
    fn send(&self, job: Job<DevReply>) {
        let Some(job) = self.core.route(job) else {
            return;
        };
        let tx = self.to_timing.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(mpsc::SendError(job)) = tx.send(job) {
            // The timing thread is gone (shutting down): answer at once.
            job.fail(Errno::EIO);
            return;
        }
        drop(tx);
        if let Some(w) = &self.wake_ring {
            w();
        }
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
            return self.core.crash_read(offset, size, reply);
        }
        let (arrival_ns, pause_ns) = self.core.arrived();
        let len = (size as usize)
            .min(MAX_REQUEST)
            .min(self.core.size.saturating_sub(offset) as usize);
        let mut buf = self.pool.take();
        let io = self.core.store.read(&mut buf[..len], offset);
        self.send(Job {
            req: Request::read(self.core.id(), offset, len as u64),
            arrival_ns,
            pause_ns,
            reply: DevReply::Read(reply, buf),
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
            return self.core.crash_write(offset, data, reply);
        }
        let (arrival_ns, pause_ns) = self.core.arrived();
        if offset.saturating_add(data.len() as u64) > self.core.size || data.len() > MAX_REQUEST {
            reply.error(FuseErrno::from_i32(libc::ENOSPC));
            return;
        }
        let id = self.core.id();
        let io = self.core.write(id, data, offset, arrival_ns);
        self.send(Job {
            req: Request::write(id, offset, data.len() as u64),
            arrival_ns,
            pause_ns,
            reply: DevReply::Write(reply),
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
        let (arrival_ns, pause_ns) = self.core.arrived();
        let id = self.core.id();
        self.core.flush(id, arrival_ns);
        self.send(Job {
            req: Request::flush(id),
            arrival_ns,
            pause_ns,
            reply: DevReply::Flush(reply),
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
            return self.core.crash_zero(offset, length, reply);
        }
        // Discards (the loop device punches holes) and zeroing (the loop device's write-zeroes,
        // e.g. mkfs's inode tables): the store frees or zeroes the space; a 2005 drive had no
        // TRIM, so the model sees nothing.
        match self.core.zero(self.core.id(), mode, offset, length) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(FuseErrno::from_i32(e as i32)),
        }
    }
}
