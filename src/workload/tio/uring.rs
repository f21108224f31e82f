//! The `io_uring` engine: each thread keeps `iodepth` requests in flight on its own ring, as
//! fio's `io_uring` engine does with its defaults (no registered files or buffers, no
//! submission-queue polling). A request's latency runs from just before its submission to
//! the reaping of its completion.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use io_uring::IoUring;
use nix::errno::Errno;

use super::clock::Stamp;
use super::{
    fill_blocks, io_failure, noise, pattern, psync, verify_failure, FsyncPolicy, Job, Ops,
};
use crate::base::error::SystemFailure;
use crate::base::sys::uring::{Op, Ring};
use crate::measure::Recorder;

/// Whether the kernel lets this process set up a ring of `depth` entries.
pub(crate) fn kernel_check(depth: u32) -> Result<(), String> {
    IoUring::new(depth.max(1).next_power_of_two())
        .map(drop)
        .map_err(|e| format!("the kernel refuses io_uring_setup ({e})"))
}

/// Writes and reads one 4 KiB block of `path` through a ring: the filesystem's answer.
pub(crate) fn probe(path: &Path, direct: bool, depth: u32) -> Result<(), String> {
    let mut flags = libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    let fd = super::open_path(path, flags).map_err(|e| format!("opening a probe file: {e}"))?;
    let mut buf = crate::base::sys::AlignedBuf::zeroed(4096);
    noise(&mut buf, 1);
    let mut ring = Ring::new(depth, fd.as_fd(), buf, 4096)
        .map_err(|e| format!("the kernel refuses io_uring_setup ({e})"))?;
    let mut reaped = Vec::with_capacity(1);
    for op in [Op::Write, Op::Read] {
        ring.push(0, op, 0)
            .map_err(|_| "submission queue full".to_string())?;
        ring.submit_and_wait(1)
            .map_err(|e| format!("io_uring_enter failed ({e})"))?;
        reaped.clear();
        ring.reap(&mut reaped);
        let &(_, res) = reaped.first().ok_or_else(|| "no completion".to_string())?;
        if res < 0 {
            let e = Errno::from_raw(-res);
            return Err(format!(
                "the filesystem refuses io_uring {} ({e}: {})",
                if op == Op::Write { "writes" } else { "reads" },
                e.desc()
            ));
        }
    }
    Ok(())
}

/// io_uring's request loop, `iodepth` requests in flight.
struct Uring;

impl psync::IoLoop for Uring {
    /// The request loop with `iodepth` requests in flight, timed by `clk`.
    fn io_loop<C: Stamp>(io: psync::Io<'_>, clk: &C) -> Result<()> {
        let (job, rec, lane, ops, fd) = (io.job, io.rec, io.lane, io.ops, io.fd);
        let depth = job.iodepth.max(1) as usize;
        let block = job.block as usize;
        let writes = job.mode.writes();
        let mut ring = job_ring(job, fd, depth)?;
        let perm = job.permutation();
        let blocks = job.blocks();
        // Time-based: requests go on around the file (same order) until the deadline stops them.
        let n = if job.time_based { u64::MAX } else { blocks };
        let every = match job.fsync {
            FsyncPolicy::Every(k) if writes => k,
            _ => 0,
        };
        // Per slot: the offset and submission time of the request using that buffer.
        let mut slots: Vec<Option<(u64, C::T)>> = vec![None; depth];
        let mut free: Vec<usize> = (0..depth).rev().collect();
        let (mut next, mut untimed) = (0u64, 0u64);
        let mut stopped = false;
        // Requests are issued up to `batch_end`; with fsync every N writes, each batch of N is
        // drained and fsynced before the next begins.
        let mut batch_end = if every > 0 { every.min(n) } else { n };
        // The wall clock for the per-second series and the deadline, refreshed every 64 batches.
        // (Also after a millisecond: slow devices must not overrun --time by much.)
        let (mut now, mut batches, mut refreshed) = (Instant::now(), 0u64, clk.now());
        // Completions of one wait, copied out so the ring can be used while they are handled.
        let mut reaped: Vec<(usize, i32)> = Vec::with_capacity(depth);
        let result = (|| -> Result<()> {
            loop {
                while !stopped && next < batch_end && !free.is_empty() {
                    let s = free.pop().expect("checked non-empty");
                    let off = job.offset(perm.as_ref(), next % blocks);
                    if writes && job.verify {
                        let b = ring.slot(s).expect("a free slot is not in flight");
                        fill_blocks(b, block, true, job.seed, job.file_id, off);
                    }
                    let op = if writes { Op::Write } else { Op::Read };
                    if ring.push(s, op, off).is_err() {
                        free.push(s);
                        break;
                    }
                    slots[s] = Some((off, clk.now()));
                    next += 1;
                }
                if ring.in_flight() == 0 {
                    if stopped || next >= n {
                        break;
                    }
                    // A batch boundary, drained: fsync, then open the next batch.
                    psync::fsync(fd, rec, ops, &job.path)?;
                    batch_end = (batch_end + every.max(1)).min(n);
                    continue;
                }
                ring.submit_and_wait(1)
                    .map_err(|e| ring_failure("io_uring_enter on", &job.path, e))?;
                reaped.clear();
                ring.reap(&mut reaped);
                let stamp = clk.now();
                batches += 1;
                if batches & 63 == 0 || (C::ON && clk.ns(refreshed, stamp) > 1_000_000) {
                    now = Instant::now();
                    refreshed = stamp;
                }
                for &(s, res) in &reaped {
                    let (off, t0) = slots[s].take().expect("a completion for a submitted slot");
                    let b = ring.slot(s).expect("a reaped slot is not in flight");
                    completed(job, fd, b, off, res)?;
                    if C::ON {
                        clk.record(lane, rec, clk.ns(t0, stamp), job.block, stamp);
                    } else {
                        untimed += 1;
                    }
                    free.push(s);
                }
                if let Some(d) = job.deadline {
                    if now >= d {
                        stopped = true;
                    }
                }
                if rec.should_stop() {
                    stopped = true;
                }
            }
            Ok(())
        })();
        // Never drop buffers the kernel may still write into (the ring's drop would also wait).
        drop(ring);
        result?;
        rec.check()?;
        if untimed > 0 {
            rec.count_untimed(ops.io, untimed, untimed * job.block);
        }
        Ok(())
    }
}

/// Sets up the job's ring of `depth` entries on `fd`, with one buffer per slot (filled with
/// noise for writes that are not verified). The ring owns the buffers: a slot in flight cannot
/// be touched, and dropping the ring waits for every request (never dropping buffers the
/// kernel may still write into).
fn job_ring<'fd>(job: &Job, fd: &'fd OwnedFd, depth: usize) -> Result<Ring<'fd>> {
    let mut bufs = job.buffer(depth);
    if job.mode.writes() && !job.verify {
        noise(&mut bufs, job.seed ^ job.file_id);
    }
    Ring::new(depth as u32, fd.as_fd(), bufs, job.block as usize)
        .map_err(|e| ring_failure("io_uring_setup for", &job.path, e))
}

/// The ring's own call `what` (on `path`) failing: the measured system's failure.
fn ring_failure(what: &str, path: &Path, e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(format!("{what} {}: {e}", path.display())))
}

/// The completion `res` of the request for the block at `off`, in its buffer `b`: a failed
/// request is an error, a short one is finished synchronously (as fio requeues the rest), and
/// a block read is checked against the pattern under --verify.
fn completed(job: &Job, fd: &OwnedFd, b: &mut [u8], off: u64, res: i32) -> Result<()> {
    let writes = job.mode.writes();
    if res < 0 {
        let e = Errno::from_raw(-res);
        let op = if writes { "write" } else { "read" };
        return Err(io_failure(op, &job.path, Some(off), e, " (io_uring)"));
    }
    let done = res as usize;
    if done != b.len() {
        let rest = off + done as u64;
        if writes {
            psync::pwrite_all(fd, &b[done..], rest, &job.path)?;
        } else {
            psync::pread_exact(fd, &mut b[done..], rest, &job.path)?;
        }
    }
    if job.verify && !writes {
        pattern::check_block(b, job.seed, job.file_id, off)
            .map_err(|m| verify_failure(&job.path, &m))?;
    }
    Ok(())
}

/// Runs one thread's job with `iodepth` requests in flight.
pub(crate) fn run(job: &Job, rec: &mut Recorder, ops: Ops) -> Result<()> {
    psync::run_job::<Uring>(job, rec, ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_that_cannot_run_says_why() {
        let e = probe(Path::new("/nonexistent-dir/probe"), false, 4)
            .expect_err("there is no such directory");
        assert!(e.contains("probe file"), "{e}");
    }

    #[test]
    fn the_probe_passes_where_io_uring_works() {
        if let Err(e) = kernel_check(4) {
            eprintln!("skipped: {e}");
            return;
        }
        let dir = tempfile::tempdir_in("/var/tmp").expect("a temporary directory");
        let r = probe(&dir.path().join("probe"), false, 4);
        assert_eq!(r, Ok(()));
    }
}
