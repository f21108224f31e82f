//! The `psync` engine: pread(2)/pwrite(2), one request in flight per thread — fio's `psync`
//! and what tiobench did. The per-request path is the system call, one clock read (the end of
//! one request is the start of the next) and one histogram increment; none of either with
//! latency recording off.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;

use super::clock::{self, Stamp};
use super::{fill_blocks, io_failure, noise, pattern, verify_failure, FsyncPolicy, Job, Ops};
use crate::base::sys;
use crate::measure::{Lane, Recorder, Tick};

/// Writes all of `buf` at `off`, retrying short writes and EINTR.
pub(crate) fn pwrite_all(fd: &OwnedFd, buf: &[u8], off: u64, path: &Path) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let w = match sys::pwrite(fd.as_fd(), &buf[done..], off + done as u64) {
            Ok(w) => w,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(io_failure("write", path, Some(off + done as u64), e, "")),
        };
        if w == 0 {
            return Err(io_failure(
                "write",
                path,
                Some(off + done as u64),
                Errno::EIO,
                "",
            ));
        }
        done += w;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `off`; a file that ends early is an error.
pub(crate) fn pread_exact(fd: &OwnedFd, buf: &mut [u8], off: u64, path: &Path) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let r = match sys::pread(fd.as_fd(), &mut buf[done..], off + done as u64) {
            Ok(r) => r,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(io_failure("read", path, Some(off + done as u64), e, "")),
        };
        if r == 0 {
            return Err(anyhow::Error::new(crate::base::error::SystemFailure(
                format!(
                    "read {} at offset {}: the file ends there, {} bytes short of the block",
                    path.display(),
                    off + done as u64,
                    buf.len() - done
                ),
            )));
        }
        done += r;
    }
    Ok(())
}

pub(crate) fn fsync(fd: &OwnedFd, rec: &mut Recorder, ops: Ops, path: &Path) -> Result<()> {
    let t = Instant::now();
    nix::unistd::fsync(fd.as_raw_fd()).map_err(|e| io_failure("fsync", path, None, e, ""))?;
    rec.record(ops.fsync, t, 0);
    Ok(())
}

/// What a request loop works with: the job, the thread's recorder and I/O lane, the ids of the
/// operations and the open file.
pub(crate) struct Io<'a> {
    pub job: &'a Job,
    pub rec: &'a mut Recorder,
    pub lane: &'a mut Lane,
    pub ops: Ops,
    pub fd: &'a OwnedFd,
}

/// An engine's request loop over an open file, generic over the clock `clk` that times its
/// requests (so the loop without latency recording carries no clock reads).
pub(crate) trait IoLoop {
    fn io_loop<C: Stamp>(io: Io<'_>, clk: &C) -> Result<()>;
}

/// Runs one thread's job with the request loop `L`: opens the file (timed), runs the loop in
/// the I/O lane, timed when the job records latencies, and fsyncs a written file at the end
/// when the job asks for it.
pub(crate) fn run_job<L: IoLoop>(job: &Job, rec: &mut Recorder, ops: Ops) -> Result<()> {
    let t_open = Instant::now();
    let fd = job.open()?;
    rec.record(ops.open, t_open, 0);
    rec.with_lane(ops.io, |rec, lane| {
        let on = job.latency.then(|| clock::On(rec.clock()));
        let fd = &fd;
        let io = Io {
            job,
            rec,
            lane,
            ops,
            fd,
        };
        match &on {
            Some(clk) => L::io_loop(io, clk),
            None => L::io_loop(io, &clock::Off),
        }
    })?;
    if job.mode.writes() && job.fsync != FsyncPolicy::None {
        fsync(&fd, rec, ops, &job.path)?;
    }
    Ok(())
}

/// psync's request loop, one request at a time.
struct Psync;

impl IoLoop for Psync {
    /// The request loop, one request at a time, timed by `clk`.
    fn io_loop<C: Stamp>(io: Io<'_>, clk: &C) -> Result<()> {
        let (job, rec, lane, ops, fd) = (io.job, io.rec, io.lane, io.ops, io.fd);
        let mut state = Loop::new(job);
        // Time-based: around the file again (same order) until the deadline stops a pass.
        while io_range(job, rec, lane, ops, fd, clk, &mut state, 0..job.blocks())? && job.time_based
        {
            if job.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        Ok(())
    }
}

/// Runs one thread's job.
pub(crate) fn run(job: &Job, rec: &mut Recorder, ops: Ops) -> Result<()> {
    run_job::<Psync>(job, rec, ops)
}

/// What a request loop keeps from one stretch of requests to the next.
struct Loop {
    buf: crate::base::sys::AlignedBuf,
    perm: Option<pattern::Permutation>,
}

impl Loop {
    fn new(job: &Job) -> Self {
        let mut buf = job.buffer(1);
        if job.mode.writes() && !job.verify {
            noise(&mut buf, job.seed ^ job.file_id);
        }
        Self {
            buf,
            perm: job.permutation(),
        }
    }
}

/// Requests `range` of the job's order; false when the phase must stop (deadline, signal,
/// another worker's failure).
#[allow(clippy::too_many_arguments)]
fn io_range<C: Stamp>(
    job: &Job,
    rec: &mut Recorder,
    lane: &mut Lane,
    ops: Ops,
    fd: &OwnedFd,
    clk: &C,
    state: &mut Loop,
    range: std::ops::Range<u64>,
) -> Result<bool> {
    let Loop { buf, perm } = state;
    let writes = job.mode.writes();
    let n = job.blocks();
    let block = job.block as usize;
    let every = match job.fsync {
        FsyncPolicy::Every(k) if writes => k,
        _ => 0,
    };
    // Checks (deadline, stop) every `mask + 1` requests, or after any slow request.
    let mask = if C::ON { 255 } else { 63 };
    let mut untimed = 0u64;
    let mut go_on = true;
    let mut t = clk.now();
    for i in range {
        let off = job.offset(perm.as_ref(), i);
        if writes {
            if job.verify {
                fill_blocks(buf, block, true, job.seed, job.file_id, off);
                t = clk.now();
            }
            pwrite_all(fd, buf, off, &job.path)?;
        } else {
            pread_exact(fd, buf, off, &job.path)?;
        }
        let mut slow = false;
        if C::ON {
            // One timestamp per request boundary: this request's end starts the next one.
            let e = clk.now();
            let ns = clk.ns(t, e);
            clk.record(lane, rec, ns, job.block, e);
            slow = ns > 1_000_000;
            t = e;
        } else {
            untimed += 1;
        }
        if job.verify && !writes {
            pattern::check_block(buf, job.seed, job.file_id, off)
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
                go_on = false;
                break;
            }
            if rec.should_stop() {
                rec.check()?;
                go_on = false;
                break;
            }
        }
    }
    if untimed > 0 {
        rec.count_untimed(ops.io, untimed, untimed * job.block);
    }
    Ok(go_on)
}

/// Requests per stretch of the latency probe: long enough that the two clock reads around
/// it vanish, short enough (half a millisecond on a page-cache hit) that the machine's drift
/// hits both halves of a pair alike.
const PROBE_STRETCH: u64 = 512;

/// The mean request time with and without latency recording, from one run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe {
    pub on_ns: f64,
    pub on_requests: u64,
    pub off_ns: f64,
    pub off_requests: u64,
    /// Time per request on ÷ off, per adjacent pair of stretches.
    pub pair_ratios: Vec<f64>,
}

/// `--latency-probe`: runs the job in stretches of [`PROBE_STRETCH`] requests, alternately
/// with latency recording on and off (which goes first flips every pair), and returns the
/// time per request of each. Only the recorded half has latencies.
pub(crate) fn run_probe(job: &Job, rec: &mut Recorder, ops: Ops) -> Result<Probe> {
    let t_open = Instant::now();
    let fd = job.open()?;
    rec.record(ops.open, t_open, 0);
    let clock = rec.clock();
    let on = clock::On(clock);
    let mut state = Loop::new(job);
    let n = job.blocks();
    let (mut on_ticks, mut off_ticks, mut on_n, mut off_n) = (0u64, 0u64, 0u64, 0u64);
    let mut pair_ratios = Vec::new();
    // Time per request of the first stretch of the current pair.
    let mut first = 0.0f64;
    rec.with_lane(ops.io, |rec, lane| -> Result<()> {
        let mut from = 0;
        let mut k = 0u64;
        while from < n {
            let to = (from + PROBE_STRETCH).min(n);
            let timed = (k & 1 == 0) == (k & 2 == 0);
            let t0 = clock.now();
            let go_on = if timed {
                io_range(job, rec, lane, ops, &fd, &on, &mut state, from..to)?
            } else {
                io_range(job, rec, lane, ops, &fd, &clock::Off, &mut state, from..to)?
            };
            let ticks = clock.now().0.saturating_sub(t0.0);
            if !go_on {
                break;
            }
            if timed {
                on_ticks += ticks;
                on_n += to - from;
            } else {
                off_ticks += ticks;
                off_n += to - from;
            }
            let per = ticks as f64 / (to - from) as f64;
            if k & 1 == 0 {
                first = per;
            } else if first > 0.0 && per > 0.0 && to - from == PROBE_STRETCH {
                pair_ratios.push(if timed { per / first } else { first / per });
            }
            from = to;
            k += 1;
        }
        Ok(())
    })?;
    if job.mode.writes() && job.fsync != FsyncPolicy::None {
        fsync(&fd, rec, ops, &job.path)?;
    }
    let per = |ticks: u64, n: u64| clock.ns(Tick(0), Tick(ticks)) as f64 / n.max(1) as f64;
    Ok(Probe {
        on_ns: per(on_ticks, on_n),
        on_requests: on_n,
        off_ns: per(off_ticks, off_n),
        off_requests: off_n,
        pair_ratios,
    })
}
