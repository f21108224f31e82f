//! The server's requests through FUSE over io_uring ([`crate::testbed::device::uring`]),
//! chosen with `FSGAUGE_DEVICE_TRANSPORT=uring` (`dev`, the default, keeps /dev/fuse). A data
//! request taken from the ring goes the way a FUSE thread's does: its arrival stamped, its
//! data moved at once (a read straight into the ring entry's buffer, so the reply at the
//! modelled completion only commits), then [`DiskFs::send`]; the reply commits the entry
//! ([`Reply::Ring`]).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use super::{DiskFs, Job, Reply, DISK_NAME, MAX_REQUEST};
use crate::sys::rt;
use crate::sys::Errno;
use crate::testbed::device::model::Request;
use crate::testbed::device::uring::{Disk, Incoming, Op, Ring};

/// Which transport the server uses: `uring` or `dev`.
pub const TRANSPORT_ENV: &str = "FSGAUGE_DEVICE_TRANSPORT";

/// Request ids of the ring's requests start here, apart from the FUSE threads' ones.
const RING_IDS: u64 = 1 << 62;

/// The ring for `fs`'s disk, made before the mount (None, said on stderr, where this machine
/// cannot have one). Its data requests go to a sibling of `fs`: the same store, buffers,
/// timing thread and records.
pub(super) fn prepare(fs: &DiskFs) -> Option<Ring> {
    let sibling = DiskFs {
        store: fs.store.clone(),
        pool: fs.pool.clone(),
        to_timing: Mutex::new(match fs.to_timing.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }),
        next_id: AtomicU64::new(RING_IDS),
        size: fs.size,
        started: fs.started,
        immediate: fs.immediate,
        modelled: fs.modelled.clone(),
        rec: fs.rec.clone(),
        ring_offer: None,
    };
    let disk = Disk {
        name: DISK_NAME.to_string(),
        size: fs.size,
        time: fs
            .started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    let sibling = Arc::new(sibling);
    Ring::prepare(
        disk,
        MAX_REQUEST,
        Arc::new(move |r: Incoming| take(&sibling, r)),
    )
}

/// A data request from the ring, on the queue's thread.
fn take(fs: &DiskFs, r: Incoming) {
    let arrival_ns = rt::monotonic_ns();
    let Incoming {
        op,
        offset,
        len,
        mut token,
    } = r;
    let job = |req: Request, token, io| Job {
        req,
        arrival_ns,
        reply: Reply::Ring(token),
        buf: None,
        io,
    };
    match op {
        Op::Read => {
            let len = (len as usize).min(fs.size.saturating_sub(offset) as usize);
            let io = fs.store.read(&mut token.buf()[..len], offset);
            fs.send(job(Request::read(fs.id(), offset, len as u64), token, io));
        }
        Op::Write => {
            if offset.saturating_add(len) > fs.size {
                token.commit(Err(Errno::ENOSPC));
                return;
            }
            let io = fs.store.write(token.data(), offset);
            if let Err(e) = io {
                fs.note_store_error(e);
            }
            fs.send(job(Request::write(fs.id(), offset, len), token, io));
        }
        Op::Fsync => fs.send(job(Request::flush(fs.id()), token, Ok(0))),
        Op::Fallocate { mode } => {
            // As `DiskFs::fallocate`: the store frees or zeroes, the model sees nothing.
            let done = fs.store.zero(mode, offset, len);
            if let Err(e) = done {
                fs.note_store_error(e);
            }
            token.commit(done.map(|()| 0));
        }
    }
}
