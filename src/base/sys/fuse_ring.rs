//! One queue of FUSE over io_uring (Linux 6.14+, `fs/fuse/dev_uring.c`): the memory the kernel
//! writes requests into and reads replies from, and the two commands that hand it over.
//!
//! A queue is an io_uring (128-byte SQEs, `IORING_OP_URING_CMD` on /dev/fuse) with `entries`
//! ring entries, each a header buffer (`struct fuse_uring_req_header`: the `fuse_in_header`
//! or `fuse_out_header`, the op's fixed argument, `struct fuse_uring_ent_in_out`) and a
//! payload buffer (the op's variable arguments: a write's data, a lookup's name; a reply's
//! out arguments, a read's data). `FUSE_IO_URING_CMD_REGISTER` gives an entry to the kernel;
//! its completion (res 0) says a request is in it; `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`
//! answers that request and gives the entry back for the next.
//!
//! Ownership makes it sound: between a submission and its completion the kernel owns the
//! entry's buffers; between the completion and the commit the one [`Taken`] made from that
//! completion does. A [`Taken`] can move to another thread and commit from there (dropping it
//! answers EIO, so no request is left hanging); the buffers live as long as any [`Taken`]
//! and are leaked, not freed, if the kernel may still hold an entry when the queue goes.
//!
//! Where the kernel's copies run: a command's completion work (copying the entry's next
//! request in) runs in the task that submitted it, and a commit copies the reply out in the
//! committing task. So every command is submitted by the queue's own thread (the one taking
//! completions): its commits go with its next wait, one `io_uring_enter` a batch, and a
//! commit made on another thread is handed to it (a mailbox, and a no-op to wake it), so
//! that a thread with deadlines of its own never copies a request's data.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::AlignedBuf;

/// `FUSE_IO_URING_CMD_REGISTER` (`enum fuse_uring_cmd`).
const CMD_REGISTER: u32 = 1;
/// `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`.
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// Bytes of a header buffer the kernel uses: `in_out[128]`, `op_in[128]`,
/// `fuse_uring_ent_in_out` (32).
pub const HEADER_BYTES: usize = 288;
/// Where the op's fixed argument starts in the header.
const OP_IN: usize = 128;
/// Where `fuse_uring_ent_in_out` starts: flags u64, commit_id u64, payload_sz u32.
const ENT_IN_OUT: usize = 256;
/// Each header buffer gets a page of its own (libfuse does the same).
const HEADER_STRIDE: usize = 4096;
/// `user_data` of the no-op that wakes the queue's thread.
const WAKE: u64 = u64::MAX;

/// What a completion said of one entry.
#[derive(Debug)]
pub enum Event {
    /// A request is in the entry.
    Request(Taken),
    /// The kernel refused or ended the entry's command (`-errno`): `-ENOTCONN` when the
    /// connection ends, `-EOPNOTSUPP` where FUSE over io_uring is disabled. The entry is the
    /// kernel's no more.
    Ended { entry: usize, errno: i32 },
    /// Registration came before the kernel finished INIT (`-EAGAIN`); [`Queue::register`]
    /// it again.
    NotYet { entry: usize },
    /// [`Queue::wake`] was called.
    Woken,
}

/// An io_uring and its entries, for one of the kernel's queues or several (one thread then
/// takes the requests of every CPU). `Sync`: any thread may commit; one thread (the first to
/// call [`Queue::wait`] or [`Queue::poll`]) takes completions.
pub struct Queue {
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// The connection's /dev/fuse, once mounted ([`Queue::attach`]).
    fuse: OnceLock<OwnedFd>,
    /// The kernel's queue (a CPU) each entry belongs to.
    qids: Box<[u16]>,
    entries: usize,
    payload_size: usize,
    headers: ManuallyDrop<AlignedBuf>,
    payloads: ManuallyDrop<AlignedBuf>,
    headers_at: *mut u8,
    payloads_at: *mut u8,
    /// Per entry: header and payload, as REGISTER's `sqe->addr` points to them.
    iovs: Box<[[libc::iovec; 2]]>,
    /// Serialises producers of the submission queue.
    sq: Mutex<()>,
    taker: OnceLock<ThreadId>,
    /// Commits made on other threads, for the taking thread to submit: (entry, commit_id).
    mailbox: Mutex<Vec<(usize, u64)>>,
    /// Entries the kernel holds or may write into (registered, or committed and not yet
    /// completed).
    with_kernel: AtomicUsize,
}

// SAFETY: the raw pointers are to the queue's own buffers; an entry's bytes are touched only
// by the holder of its `Taken` (or by the kernel while it owns the entry), the submission
// queue only under `sq`, and the completion queue only by the one `taker` thread.
unsafe impl Send for Queue {}
// SAFETY: as for Send.
unsafe impl Sync for Queue {}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("qids", &self.qids.first())
            .field("entries", &self.entries)
            .finish()
    }
}

impl Queue {
    /// A queue of `each` ring entries for every queue id in `qids`, with payload buffers of
    /// `payload_size` bytes (at least the connection's `max_write` and `max_pages` × page).
    /// Made before the mount (what can fail fails before the kernel is told of a ring);
    /// nothing is given to the kernel until [`Queue::attach`] and [`Queue::register`].
    pub fn new(qids: &[u16], each: usize, payload_size: usize) -> io::Result<Queue> {
        // Checked: the buffers below are handed to the kernel by address, so their sizes must
        // never wrap.
        let entries = qids
            .len()
            .checked_mul(each)
            .ok_or_else(|| invalid("number of entries"))?;
        let header_bytes = entries
            .checked_mul(HEADER_STRIDE)
            .ok_or_else(|| invalid("entries"))?;
        let payload_bytes = entries
            .checked_mul(payload_size)
            .ok_or_else(|| invalid("payload size"))?;
        if entries == 0 {
            return Err(invalid("number of entries"));
        }
        let qids: Box<[u16]> = (0..entries).map(|e| qids[e / each]).collect();
        let slots = u32::try_from(entries.max(1)).map_err(|_| invalid("entries"))?;
        // Room for every entry's command and the wake-ups besides (an entry has one command
        // at a time, so neither queue can fill).
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .setup_cqsize(slots.next_power_of_two() * 4)
            .build(slots.next_power_of_two() * 2)?;
        // Every page given now, before the mount: the kernel copies each request into them.
        let mut headers = AlignedBuf::prefaulted(header_bytes);
        let mut payloads = AlignedBuf::prefaulted(payload_bytes);
        let headers_at = headers.as_mut_ptr();
        let payloads_at = payloads.as_mut_ptr();
        let iovs = (0..entries)
            .map(|e| {
                [
                    libc::iovec {
                        // SAFETY: in bounds of the headers buffer (entries strides).
                        iov_base: unsafe { headers_at.add(e * HEADER_STRIDE) }.cast(),
                        iov_len: HEADER_BYTES,
                    },
                    libc::iovec {
                        // SAFETY: in bounds of the payloads buffer (entries payloads).
                        iov_base: unsafe { payloads_at.add(e * payload_size) }.cast(),
                        iov_len: payload_size,
                    },
                ]
            })
            .collect();
        Ok(Queue {
            ring,
            fuse: OnceLock::new(),
            qids,
            entries,
            payload_size,
            headers: ManuallyDrop::new(headers),
            payloads: ManuallyDrop::new(payloads),
            headers_at,
            payloads_at,
            iovs,
            sq: Mutex::new(()),
            taker: OnceLock::new(),
            mailbox: Mutex::new(Vec::with_capacity(entries)),
            with_kernel: AtomicUsize::new(0),
        })
    }

    /// Commands go to `fuse`, a descriptor of the mounted connection's /dev/fuse; given back
    /// if the queue already has one.
    pub fn attach(&self, fuse: OwnedFd) -> Result<(), OwnedFd> {
        self.fuse.set(fuse)
    }

    fn fd(&self) -> io::Result<types::Fd> {
        match self.fuse.get() {
            Some(f) => Ok(types::Fd(f.as_raw_fd())),
            None => Err(io::Error::other(
                "a FUSE ring queue used before it was attached to a connection",
            )),
        }
    }

    /// The kernel's queue (the CPU whose requests it takes) of its first entry: the only
    /// one, for a queue of one CPU.
    pub fn qid(&self) -> u16 {
        self.qids[0]
    }

    /// Its number of entries.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Gives entry `entry` to the kernel (`FUSE_IO_URING_CMD_REGISTER`); submitted at once.
    pub fn register(&self, entry: usize) -> io::Result<()> {
        if entry >= self.entries {
            return Err(invalid("entry"));
        }
        let mut sqe = opcode::UringCmd80::new(self.fd()?, CMD_REGISTER)
            .cmd(self.cmd_req(entry, 0))
            .addr(Some(self.iovs[entry].as_ptr() as u64))
            .build()
            .user_data(entry as u64);
        // `UringCmd80` has no `len`; REGISTER wants the iovec count (2) there. The SQE is the
        // kernel's `struct io_uring_sqe` (repr C): `len` is the u32 at byte 24.
        const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
        // SAFETY: byte 24..28 lies inside the 128-byte entry; an unaligned write of a u32.
        unsafe {
            std::ptr::from_mut(&mut sqe)
                .cast::<u8>()
                .add(24)
                .cast::<u32>()
                .write_unaligned(2)
        };
        self.push(sqe, true, true)
    }

    /// Wakes the thread in [`Queue::wait`] (it sees [`Event::Woken`]).
    pub fn wake(&self) -> io::Result<()> {
        let sqe = squeue::Entry128::from(opcode::Nop::new().build().user_data(WAKE));
        self.push(sqe, false, true)
    }

    /// Submits what the taking thread queued, waits for at least one completion (or until
    /// `timeout` has passed) and returns them all, then queues the commits other threads made
    /// meanwhile (submitted with the next wait). Only one thread may take completions: the
    /// first to call this or [`Queue::poll`].
    pub fn wait(
        self: &Arc<Self>,
        out: &mut Vec<Event>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        self.check_taker()?;
        let waited = match timeout {
            None => self.ring.submitter().submit_and_wait(1),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match waited {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ETIME)) => {}
            Err(e) => return Err(e),
        }
        self.reap(out);
        Ok(())
    }

    /// The completions there are now, without a system call (the kernel posts them while the
    /// taking thread runs); the commits other threads made are queued as in [`Queue::wait`].
    pub fn poll(self: &Arc<Self>, out: &mut Vec<Event>) -> io::Result<()> {
        self.check_taker()?;
        self.reap(out);
        Ok(())
    }

    /// Submits what the taking thread queued (its commits), without waiting; no system call
    /// when nothing is queued.
    pub fn flush(&self) -> io::Result<()> {
        let queued = {
            let _g = lock(&self.sq);
            // SAFETY: producers hold `sq`, so no other SubmissionQueue exists.
            unsafe { self.ring.submission_shared().len() }
        };
        if queued == 0 {
            return Ok(());
        }
        self.ring.submitter().submit().map(|_| ())
    }

    fn check_taker(&self) -> io::Result<()> {
        let me = std::thread::current().id();
        if *self.taker.get_or_init(|| me) != me {
            return Err(io::Error::other(
                "a FUSE ring queue's completions are taken by one thread",
            ));
        }
        Ok(())
    }

    fn reap(self: &Arc<Self>, out: &mut Vec<Event>) {
        // SAFETY: only the taker thread (its callers check) ever borrows the completion queue.
        let cq = unsafe { self.ring.completion_shared() };
        for cqe in cq {
            let data = cqe.user_data();
            if data == WAKE {
                out.push(Event::Woken);
                continue;
            }
            let entry = data as usize;
            let res = cqe.result();
            self.with_kernel.fetch_sub(1, Ordering::AcqRel);
            out.push(if res == 0 {
                Event::Request(self.taken(entry))
            } else if res == -libc::EAGAIN {
                Event::NotYet { entry }
            } else {
                Event::Ended { entry, errno: -res }
            });
        }
        let mailed = std::mem::take(&mut *lock(&self.mailbox));
        for (entry, commit_id) in mailed {
            self.push_commit(entry, commit_id, false);
        }
    }

    fn taken(self: &Arc<Self>, entry: usize) -> Taken {
        let h = self.header(entry);
        let commit_id = u64::from_ne_bytes(field(h, ENT_IN_OUT + 8));
        let payload_len = u32::from_ne_bytes(field(h, ENT_IN_OUT + 16)) as usize;
        Taken {
            queue: self.clone(),
            entry,
            commit_id,
            payload_len: payload_len.min(self.payload_size),
            done: false,
        }
    }

    fn header(&self, entry: usize) -> &[u8] {
        // SAFETY: the entry's header stride is inside the buffer; callers hold the entry.
        unsafe {
            std::slice::from_raw_parts(self.headers_at.add(entry * HEADER_STRIDE), HEADER_BYTES)
        }
    }

    #[allow(clippy::mut_from_ref)]
    fn header_mut(&self, entry: usize) -> &mut [u8] {
        // SAFETY: as in `header`; the one holder of the entry writes.
        unsafe {
            std::slice::from_raw_parts_mut(self.headers_at.add(entry * HEADER_STRIDE), HEADER_BYTES)
        }
    }

    #[allow(clippy::mut_from_ref)]
    fn payload_mut(&self, entry: usize) -> &mut [u8] {
        // SAFETY: the entry's payload is inside the buffer; the one holder of the entry
        // borrows it (through its `Taken`, so not beyond the commit).
        unsafe {
            std::slice::from_raw_parts_mut(
                self.payloads_at.add(entry * self.payload_size),
                self.payload_size,
            )
        }
    }

    /// `struct fuse_uring_cmd_req` in the SQE's 80-byte command area.
    fn cmd_req(&self, entry: usize, commit_id: u64) -> [u8; 80] {
        let mut c = [0u8; 80];
        c[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        c[16..18].copy_from_slice(&self.qids[entry].to_ne_bytes());
        c
    }

    fn commit(&self, entry: usize, commit_id: u64, error: i32, payload_len: usize) {
        let h = self.header_mut(entry);
        // fuse_out_header: len, error, unique.
        h[..128].fill(0);
        h[0..4].copy_from_slice(&((16 + payload_len) as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&error.to_ne_bytes());
        h[8..16].copy_from_slice(&commit_id.to_ne_bytes());
        h[ENT_IN_OUT..ENT_IN_OUT + 32].fill(0);
        h[ENT_IN_OUT + 8..ENT_IN_OUT + 16].copy_from_slice(&commit_id.to_ne_bytes());
        h[ENT_IN_OUT + 16..ENT_IN_OUT + 20].copy_from_slice(&(payload_len as u32).to_ne_bytes());
        if self.taker.get() == Some(&std::thread::current().id()) {
            // The taking thread submits its commits with its next wait: one syscall a batch.
            self.push_commit(entry, commit_id, false);
            return;
        }
        // Another thread hands the commit to the taking thread, so that the kernel's copies
        // (this reply's data out, the entry's next request in) run there, not on a thread
        // with its own deadlines; a no-op wakes it, when nothing else is waiting for it.
        let first = {
            let mut m = lock(&self.mailbox);
            m.push((entry, commit_id));
            m.len() == 1
        };
        if first {
            if let Err(e) = self.wake() {
                eprintln!("fsgauge: waking a FUSE ring queue's thread failed: {e}");
            }
        }
    }

    fn push_commit(&self, entry: usize, commit_id: u64, submit: bool) {
        let pushed = self.fd().and_then(|fd| {
            let sqe = opcode::UringCmd80::new(fd, CMD_COMMIT_AND_FETCH)
                .cmd(self.cmd_req(entry, commit_id))
                .build()
                .user_data(entry as u64);
            self.push(sqe, true, submit)
        });
        if let Err(e) = pushed {
            // The submission queue has room for every entry, so only a dead ring fails here;
            // the connection's end completes the entry.
            eprintln!("fsgauge: committing a FUSE ring request failed: {e}");
        }
    }

    /// Queues `sqe` (an entry going to the kernel when `entry`), submitting it when `submit`.
    fn push(&self, sqe: squeue::Entry128, entry: bool, submit: bool) -> io::Result<()> {
        let _g = lock(&self.sq);
        if entry {
            // Counted before the kernel can see it, so its completion never counts first.
            self.with_kernel.fetch_add(1, Ordering::AcqRel);
        }
        // SAFETY: producers hold `sq`, so no other SubmissionQueue exists; the SQE points to
        // the queue's own iovecs (REGISTER) or nothing, alive as long as the queue.
        let pushed = unsafe {
            let mut sq = self.ring.submission_shared();
            let pushed = sq.push(&sqe);
            sq.sync();
            pushed
        };
        if pushed.is_err() {
            if entry {
                self.with_kernel.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(io::Error::other("FUSE ring submission queue full"));
        }
        if submit {
            self.ring.submitter().submit()?;
        }
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        if self.with_kernel.load(Ordering::Acquire) == 0 {
            // SAFETY: no entry is the kernel's: nothing writes into the buffers any more.
            unsafe {
                ManuallyDrop::drop(&mut self.headers);
                ManuallyDrop::drop(&mut self.payloads);
            }
        }
        // Otherwise the buffers are leaked: the kernel may still write into them.
    }
}

/// A request in one entry, owned until [`Taken::commit`] (or drop, which answers EIO).
pub struct Taken {
    queue: Arc<Queue>,
    entry: usize,
    commit_id: u64,
    payload_len: usize,
    done: bool,
}

impl std::fmt::Debug for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taken")
            .field("qid", &self.queue.qids[self.entry])
            .field("entry", &self.entry)
            .field("commit_id", &self.commit_id)
            .finish()
    }
}

impl Taken {
    /// The request's `fuse_in_header` (40 bytes).
    pub fn in_header(&self) -> &[u8] {
        &self.queue.header(self.entry)[..40]
    }

    /// The op's fixed argument (`fuse_read_in`, `fuse_write_in`, ...), 128 bytes.
    pub fn op_in(&self) -> &[u8] {
        &self.queue.header(self.entry)[OP_IN..OP_IN + 128]
    }

    /// The request's variable arguments (a write's data, a lookup's name).
    pub fn payload(&self) -> &[u8] {
        &self.queue.payload_mut(self.entry)[..self.payload_len]
    }

    /// The whole payload buffer, to write the reply into.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.queue.payload_mut(self.entry)
    }

    /// Answers: `error` 0 with the first `payload_len` bytes of the payload as the reply's
    /// out arguments, or a negative errno. The entry goes back to the kernel for the next
    /// request.
    pub fn commit(mut self, error: i32, payload_len: usize) {
        self.done = true;
        let len = if error == 0 {
            payload_len.min(self.queue.payload_size)
        } else {
            0
        };
        self.queue.commit(self.entry, self.commit_id, error, len);
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if !self.done {
            self.queue.commit(self.entry, self.commit_id, -libc::EIO, 0);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn field<const N: usize>(h: &[u8], at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&h[at..at + N]);
    b
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("a FUSE ring queue with a bad {what}"),
    )
}
