//! io_uring reads and writes on buffers the ring owns, so no request can outlive its memory.
//!
//! The kernel writes into (or reads from) a request's buffer until its completion is reaped;
//! `io_uring`'s `push` is unsafe because nothing ties the buffer to that. Here the buffer is one
//! slot of an [`AlignedBuf`] held by the [`Ring`]: a slot in flight cannot be borrowed, and
//! dropping the ring first waits for every request it submitted (if even that fails, the
//! buffer is leaked rather than freed under the kernel).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

use super::AlignedBuf;

/// Which transfer a request makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The file's bytes into the slot.
    Read,
    /// The slot's bytes into the file.
    Write,
}

/// Why a request was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// The submission queue is full: submit and reap first.
    QueueFull,
    /// The slot does not exist or already has a request in flight.
    SlotBusy,
}

/// An io_uring on one file with `slots` buffers of `block` bytes each.
pub struct Ring<'fd> {
    ring: IoUring,
    fd: BorrowedFd<'fd>,
    bufs: AlignedBuf,
    block: usize,
    busy: Vec<bool>,
    in_flight: usize,
}

impl<'fd> Ring<'fd> {
    /// A ring of at least `entries` submission entries (rounded up to a power of two) for
    /// requests on `fd`, taking `bufs` as `bufs.len() / block` slots.
    pub fn new(
        entries: u32,
        fd: BorrowedFd<'fd>,
        bufs: AlignedBuf,
        block: usize,
    ) -> io::Result<Self> {
        if block == 0 || u32::try_from(block).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("an io_uring slot of {block} bytes (give 1 to 4G)"),
            ));
        }
        let ring = IoUring::new(entries.max(1).next_power_of_two())?;
        let slots = bufs.len() / block;
        Ok(Self {
            ring,
            fd,
            bufs,
            block,
            busy: vec![false; slots],
            in_flight: 0,
        })
    }

    /// The buffer of slot `s`; `None` while a request on it is in flight (or no such slot).
    #[inline]
    pub fn slot(&mut self, s: usize) -> Option<&mut [u8]> {
        if *self.busy.get(s)? {
            return None;
        }
        Some(&mut self.bufs[s * self.block..(s + 1) * self.block])
    }

    /// Queues a transfer of slot `s` at file offset `off`; the completion carries `s`.
    #[inline]
    pub fn push(&mut self, s: usize, op: Op, off: u64) -> Result<(), PushError> {
        if self.busy.get(s) != Some(&false) {
            return Err(PushError::SlotBusy);
        }
        let fd = types::Fd(self.fd.as_raw_fd());
        let len = self.block as u32; // checked in `new`
        let b = &mut self.bufs[s * self.block..(s + 1) * self.block];
        let sqe = match op {
            Op::Write => opcode::Write::new(fd, b.as_ptr(), len).offset(off).build(),
            Op::Read => opcode::Read::new(fd, b.as_mut_ptr(), len)
                .offset(off)
                .build(),
        }
        .user_data(s as u64);
        // SAFETY: the request's buffer is slot `s` of `self.bufs`, which `self` owns: it is
        // marked busy below, so no slice of it is handed out until its completion is reaped,
        // and `Drop` waits for every pushed request before the buffer can be freed (or leaks
        // it). The descriptor is borrowed for 'fd, which outlives `self`.
        unsafe { self.ring.submission().push(&sqe) }.map_err(|_| PushError::QueueFull)?;
        self.busy[s] = true;
        self.in_flight += 1;
        Ok(())
    }

    /// Submits what is queued and waits until at least `want` completions are ready.
    #[inline]
    pub fn submit_and_wait(&mut self, want: usize) -> io::Result<usize> {
        self.ring.submit_and_wait(want)
    }

    /// Appends every ready completion to `out` as (slot, result: bytes or -errno), freeing its
    /// slot.
    #[inline]
    pub fn reap(&mut self, out: &mut Vec<(usize, i32)>) {
        for cqe in self.ring.completion() {
            let s = cqe.user_data() as usize;
            if let Some(b) = self.busy.get_mut(s) {
                if *b {
                    *b = false;
                    self.in_flight -= 1;
                }
            }
            out.push((s, cqe.result()));
        }
    }

    /// Requests submitted or queued whose completion has not been reaped.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Waits for every request in flight, dropping their results.
    pub fn drain(&mut self) -> io::Result<()> {
        let mut done = Vec::new();
        while self.in_flight > 0 {
            self.submit_and_wait(1)?;
            done.clear();
            self.reap(&mut done);
        }
        Ok(())
    }
}

impl Drop for Ring<'_> {
    fn drop(&mut self) {
        if self.drain().is_err() {
            // The kernel may still use the buffers: never free them.
            std::mem::forget(std::mem::replace(&mut self.bufs, AlignedBuf::zeroed(0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_slot_in_flight_cannot_be_borrowed_or_reused_until_reaped() {
        let f = tempfile::tempfile().expect("a temporary file");
        let mut ring = match Ring::new(2, f.as_fd(), AlignedBuf::zeroed(8192), 4096) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("skipped: the kernel refuses io_uring_setup ({e})");
                return;
            }
        };
        ring.slot(0).expect("free")[..4].copy_from_slice(b"ring");
        assert_eq!(ring.push(0, Op::Write, 0), Ok(()));
        assert!(ring.slot(0).is_none());
        assert_eq!(ring.push(0, Op::Read, 0), Err(PushError::SlotBusy));
        assert_eq!(ring.push(2, Op::Read, 0), Err(PushError::SlotBusy));
        let mut done = Vec::new();
        while ring.in_flight() > 0 {
            ring.submit_and_wait(1).expect("io_uring_enter");
            ring.reap(&mut done);
        }
        assert_eq!(done, vec![(0, 4096)]);
        done.clear();
        assert_eq!(ring.push(1, Op::Read, 0), Ok(()));
        ring.drain().expect("drain");
        assert_eq!(&ring.slot(1).expect("reaped")[..4], b"ring");
    }
}
