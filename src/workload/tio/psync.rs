//! The `psync` engine: pread(2)/pwrite(2), one request in flight per thread — fio's `psync`
//! and what tiobench did. The per-request path is the system call, one clock read (the end of
//! one request is the start of the next) and one histogram increment; none of either with
//! latency recording off.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;

use super::clock::{self, Stamp};
use super::{fill_blocks, io_failure, noise, pattern, verify_failure, FsyncPolicy, Job, Ops};
use crate::measure::Recorder;

/// Writes all of `buf` at `off`, retrying short writes and EINTR.
pub(crate) fn pwrite_all(fd: &OwnedFd, buf: &[u8], off: u64, path: &Path) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        // SAFETY: writing from a live buffer of the given length.
        let w = unsafe {
            libc::pwrite(
                fd.as_raw_fd(),
                buf[done..].as_ptr().cast(),
                buf.len() - done,
                (off + done as u64) as libc::off_t,
            )
        };
        if w < 0 {
            let e = Errno::last();
            if e == Errno::EINTR {
                continue;
            }
            return Err(io_failure("write", path, Some(off + done as u64), e, ""));
        }
        if w == 0 {
            return Err(io_failure(
                "write",
                path,
                Some(off + done as u64),
                Errno::EIO,
                "",
            ));
        }
        done += w as usize;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `off`; a file that ends early is an error.
pub(crate) fn pread_exact(fd: &OwnedFd, buf: &mut [u8], off: u64, path: &Path) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        // SAFETY: reading into a live buffer of the given length.
        let r = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                (off + done as u64) as libc::off_t,
            )
        };
        if r < 0 {
            let e = Errno::last();
            if e == Errno::EINTR {
                continue;
            }
            return Err(io_failure("read", path, Some(off + done as u64), e, ""));
        }
        if r == 0 {
            return Err(anyhow::Error::new(crate::error::SystemFailure(format!(
                "read {} at offset {}: the file ends there, {} bytes short of the block",
                path.display(),
                off + done as u64,
                buf.len() - done
            ))));
        }
        done += r as usize;
    }
    Ok(())
}

pub(crate) fn fsync(fd: &OwnedFd, rec: &mut Recorder, ops: Ops, path: &Path) -> Result<()> {
    let t = Instant::now();
    nix::unistd::fsync(fd.as_raw_fd()).map_err(|e| io_failure("fsync", path, None, e, ""))?;
    rec.record(ops.fsync, t, 0);
    Ok(())
}

/// Runs one thread's job.
pub(crate) fn run(job: &Job, rec: &mut Recorder, ops: Ops) -> Result<()> {
    let t_open = Instant::now();
    let fd = job.open()?;
    rec.record(ops.open, t_open, 0);
    if job.latency {
        let clk = clock::On(rec.clock());
        io_loop(job, rec, ops, &fd, &clk)?;
    } else {
        io_loop(job, rec, ops, &fd, &clock::Off)?;
    }
    if job.mode.writes() && job.fsync != FsyncPolicy::None {
        fsync(&fd, rec, ops, &job.path)?;
    }
    Ok(())
}

/// The request loop, one request at a time, timed by `clk`.
fn io_loop<C: Stamp>(job: &Job, rec: &mut Recorder, ops: Ops, fd: &OwnedFd, clk: &C) -> Result<()> {
    let mut buf = job.buffer(1);
    let writes = job.mode.writes();
    if writes && !job.verify {
        noise(&mut buf, job.seed ^ job.file_id);
    }
    let perm = job.permutation();
    let n = job.blocks();
    let block = job.block as usize;
    let every = match job.fsync {
        FsyncPolicy::Every(k) if writes => k,
        _ => 0,
    };
    // Checks (deadline, stop) every `mask + 1` requests, or after any slow request.
    let mask = if C::ON { 255 } else { 63 };
    let mut untimed = 0u64;
    let mut t = clk.now();
    for i in 0..n {
        let off = job.offset(perm.as_ref(), i);
        if writes {
            if job.verify {
                fill_blocks(&mut buf, block, true, job.seed, job.file_id, off);
                t = clk.now();
            }
            pwrite_all(fd, &buf, off, &job.path)?;
        } else {
            pread_exact(fd, &mut buf, off, &job.path)?;
        }
        let mut slow = false;
        if C::ON {
            // One timestamp per request boundary: this request's end starts the next one.
            let e = clk.now();
            let ns = clk.ns(t, e);
            clk.record(rec, ops.io, ns, job.block, e);
            slow = ns > 1_000_000;
            t = e;
        } else {
            untimed += 1;
        }
        if job.verify && !writes {
            pattern::check_block(&buf, job.seed, job.file_id, off)
                .map_err(|m| verify_failure(&job.path, &m))?;
            t = clk.now();
        }
        if every > 0 && (i + 1) % every == 0 && i + 1 < n {
            fsync(fd, rec, ops, &job.path)?;
            slow = true;
            t = clk.now();
        }
        if slow || i & mask == mask {
            if job.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if rec.should_stop() {
                rec.check()?;
                break;
            }
        }
    }
    if untimed > 0 {
        rec.count_untimed(ops.io, untimed, untimed * job.block);
    }
    Ok(())
}
