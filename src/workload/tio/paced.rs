//! The rate-limited `psync` loop (`--rate-iops`, `--rate`): one request in flight, each issued
//! at its due time on the worker's open-loop schedule ([`Pacer`]), or at once when the worker
//! is behind. Every request is recorded twice: from its submission (the lane, as the unlimited
//! loop does) and from its due time ([`Recorder::scheduled`]). The unlimited loop in
//! [`super::psync`] is untouched by any of this.

use std::time::Instant;

use anyhow::Result;

use super::psync::{fsync, pread_exact, pwrite_all};
use super::{fill_blocks, noise, pattern, verify_failure, FsyncPolicy, Job, Ops};
use crate::measure::{Recorder, Tick};
use crate::workload::rate::{Achieved, Pace, Pacer, RateUnit};

/// Runs one thread's job at `pace`; returns what it achieved.
pub(crate) fn run(job: &Job, rec: &mut Recorder, ops: Ops, pace: Pace) -> Result<Achieved> {
    let t_open = Instant::now();
    let fd = job.open()?;
    rec.record(ops.open, t_open, 0);
    let clock = rec.clock();
    let per_request = match pace.unit {
        RateUnit::Requests => 1,
        RateUnit::Bytes => job.block,
    };
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
    let (done, t0, last) = rec.with_lane(ops.io, |rec, lane| -> Result<(u64, Tick, Tick)> {
        let mut pacer = Pacer::start(pace, clock);
        // The deadline on the operation clock: no request due at or after it is issued.
        let deadline = job.deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Tick(clock.now().0.saturating_add(clock.ticks(left)))
        });
        let mut last = pacer.t0();
        let mut i = 0u64;
        while job.time_based || i < n {
            let due = pacer.next(per_request);
            // A worker behind its schedule stops at the deadline too (`last` is about now).
            if deadline.is_some_and(|d| due >= d || last >= d) {
                break;
            }
            if !pacer.wait(due, || rec.should_stop()) {
                rec.check()?;
                break;
            }
            let off = job.offset(perm.as_ref(), i % n);
            if writes && job.verify {
                fill_blocks(&mut buf, block, true, job.seed, job.file_id, off);
            }
            let s = clock.now();
            if writes {
                pwrite_all(&fd, &buf, off, &job.path)?;
            } else {
                pread_exact(&fd, &mut buf, off, &job.path)?;
            }
            let e = clock.now();
            lane.add(rec, clock.ns(s, e), job.block, e);
            rec.scheduled(ops.io, clock.ns(due, e), e);
            last = e;
            i += 1;
            if job.verify && !writes {
                pattern::check_block(&buf, job.seed, job.file_id, off)
                    .map_err(|m| verify_failure(&job.path, &m))?;
            }
            if every > 0 && i % every == 0 && (job.time_based || i < n) {
                fsync(&fd, rec, ops, &job.path)?;
            }
            // A worker that is behind does not wait, so it looks for a stop here too.
            if i & 63 == 0 && rec.should_stop() {
                rec.check()?;
                break;
            }
        }
        Ok((i, pacer.t0(), last))
    })?;
    if writes && job.fsync != FsyncPolicy::None {
        fsync(&fd, rec, ops, &job.path)?;
    }
    Ok(Achieved {
        worker: rec.worker(),
        units: done * per_request,
        seconds: clock.ns(t0, last) as f64 / 1e9,
    })
}
