//! A worker's private tally of a phase: per operation kind a count, bytes and a latency
//! histogram, and a per-second series. Nothing here is shared, so the hot path has no atomics
//! but one relaxed add every 256 operations for the progress bar.
//!
//! Two ways in: [`Recorder::lap`] / [`Recorder::span`] take [`Tick`]s of the phase's
//! [`Clock`] (the invariant TSC where there is one) — the cheap path for per-syscall timing,
//! where recording an operation is a subtraction, a multiply, a histogram increment and a few
//! compares; [`Recorder::with_lane`] lends an operation kind out to a tight loop as a [`Lane`]
//! that keeps its tallies next to the loop (cheaper still after each system call); and
//! [`Recorder::record`] / [`Recorder::add`] take [`Instant`]s, for callers that time coarser
//! work.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clock::{Clock, Tick};
use super::latency::FastHistogram;
use super::scheduled::Scheduled;

/// An operation kind a phase records, declared up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpDef {
    pub name: &'static str,
    /// Counts toward the phase's `ops` and its headline latency (e.g. `create`, `mkdir`);
    /// secondary kinds (e.g. each `write` inside a create) are reported on their own only.
    pub primary: bool,
    /// Reads file data, so its speed depends on what the page cache holds (the report warns
    /// when a phase of such operations ran on a warm cache smaller than memory).
    pub reads: bool,
}

impl OpDef {
    pub const fn primary(name: &'static str) -> Self {
        Self {
            name,
            primary: true,
            reads: false,
        }
    }
    pub const fn secondary(name: &'static str) -> Self {
        Self {
            name,
            primary: false,
            reads: false,
        }
    }
    /// The same kind, declared as reading file data.
    pub const fn reading(self) -> Self {
        Self {
            reads: true,
            ..self
        }
    }
}

/// Index of an operation kind in the phase's [`OpDef`] list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpId(pub usize);

pub(crate) struct OpSlot {
    pub def: OpDef,
    pub count: u64,
    pub bytes: u64,
    pub over_2s: u64,
    pub over_10s: u64,
    /// Latency histogram. Of a primary kind, while the phase runs: of series interval `sec`
    /// only (closed intervals are in `total` and the recorder's `intervals`); after
    /// [`Recorder::finish`], and always of a secondary kind: of the whole phase.
    pub hist: FastHistogram,
    /// The series interval `hist` holds (primary kinds).
    pub sec: usize,
    /// Closed intervals of a primary kind, added up.
    pub total: FastHistogram,
}

const PROGRESS_EVERY: u64 = 256;
const PROGRESS_PERIOD: Duration = Duration::from_millis(100);

/// One worker's measurements for one phase.
pub struct Recorder {
    pub(crate) worker: u32,
    origin: Instant,
    /// The series second last written and its bounds [lo, hi): working out the second of an
    /// operation from scratch costs more than the rest of recording it.
    sec_lo: Instant,
    sec_hi: Instant,
    sec_idx: usize,
    /// Length of a series interval ("second" below), and the same in ticks.
    interval: Duration,
    interval_ticks: u64,
    /// The phase's operation clock and the same series second in its ticks.
    clock: Clock,
    origin_tick: Tick,
    tsec_lo: u64,
    tsec_hi: u64,
    tsec_idx: usize,
    /// Tick by which the progress counter is published at the latest.
    flush_due: u64,
    pub(crate) ops: Vec<OpSlot>,
    /// (primary ops, bytes) per second since the phase start.
    pub(crate) series: Vec<(u64, u64)>,
    /// Latency of primary operations per series second: the closed intervals' histogram
    /// buckets, (bucket, count) as [`FastHistogram::drain_into`] lists them.
    pub(crate) intervals: Vec<Vec<(u32, u64)>>,
    /// Latency from the scheduled time, per operation kind (rate-limited loops only; empty
    /// otherwise).
    pub(crate) scheduled: Vec<Scheduled>,
    progress: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    wall: Arc<AtomicBool>,
    unflushed: u64,
    last_flush: Instant,
    pub(crate) finished: Option<Duration>,
    /// The scheduler's counters of the thread that finished this recorder, read on that
    /// thread at its first [`Recorder::finish`] (before a worker thread is joined).
    pub(crate) sched_end: Option<(i32, super::schedstat::TaskSched)>,
}

/// The stop flags a phase shares with its workers' recorders.
#[derive(Clone, Default)]
pub(crate) struct StopFlags {
    /// Set when the phase must end: a worker failed, or a stonewall was reached.
    pub(crate) stop: Arc<AtomicBool>,
    /// Set (with `stop`) when the end is a stonewall: work done counts, nothing failed.
    pub(crate) wall: Arc<AtomicBool>,
}

impl Recorder {
    #[allow(clippy::too_many_arguments)] // the phase's timing, one per field: no better grouping
    pub(crate) fn new(
        worker: u32,
        origin: Instant,
        clock: Clock,
        origin_tick: Tick,
        interval: Duration,
        defs: &[OpDef],
        progress: Arc<AtomicU64>,
        flags: StopFlags,
    ) -> Self {
        let StopFlags { stop, wall } = flags;
        let interval_ticks = clock.ticks(interval).max(1);
        Self {
            worker,
            origin,
            sec_lo: origin,
            sec_hi: origin + interval,
            sec_idx: 0,
            interval,
            interval_ticks,
            clock,
            origin_tick,
            tsec_lo: origin_tick.0,
            tsec_hi: origin_tick.0.saturating_add(interval_ticks),
            tsec_idx: 0,
            flush_due: origin_tick.0.saturating_add(clock.ticks(PROGRESS_PERIOD)),
            ops: defs
                .iter()
                .map(|&def| OpSlot {
                    def,
                    count: 0,
                    bytes: 0,
                    over_2s: 0,
                    over_10s: 0,
                    hist: FastHistogram::default(),
                    sec: 0,
                    total: FastHistogram::default(),
                })
                .collect(),
            series: Vec::new(),
            intervals: Vec::new(),
            scheduled: Vec::new(),
            progress,
            stop,
            wall,
            unflushed: 0,
            last_flush: origin,
            finished: None,
            sched_end: None,
        }
    }

    /// The operation kind called `name` (declared when the phase started).
    pub fn op(&self, name: &str) -> OpId {
        OpId(
            self.ops
                .iter()
                .position(|s| s.def.name == name)
                .unwrap_or_else(|| panic!("operation {name:?} was not declared for this phase")),
        )
    }

    /// Which worker this is (0-based).
    pub fn worker(&self) -> u32 {
        self.worker
    }

    /// The phase's operation clock.
    #[inline]
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Now, on the phase's operation clock.
    #[inline(always)]
    pub fn tick(&self) -> Tick {
        self.clock.now()
    }

    /// Records one operation that began at `start` and ends now (on the operation clock);
    /// returns now, so that back-to-back operations share one clock read per boundary.
    #[inline(always)]
    pub fn lap(&mut self, op: OpId, start: Tick, bytes: u64) -> Tick {
        let now = self.clock.now();
        self.span(op, start, now, bytes);
        now
    }

    /// Records one operation from `start` to `end` (ticks of the operation clock).
    #[inline(always)]
    pub fn span(&mut self, op: OpId, start: Tick, end: Tick, bytes: u64) {
        self.add_tick(op, self.clock.ns(start, end), bytes, end);
    }

    /// Adds an operation of `ns` nanoseconds that ended at tick `end`.
    #[inline(always)]
    pub fn add_tick(&mut self, op: OpId, ns: u64, bytes: u64, end: Tick) {
        let sec = self.second_at_tick(end);
        if self.add_in(op, ns, bytes, sec)
            && (self.unflushed >= PROGRESS_EVERY || end.0 >= self.flush_due)
        {
            self.flush_due = end.0.saturating_add(self.clock.ticks(PROGRESS_PERIOD));
            self.flush_progress();
        }
    }

    /// Adds an operation of `ns` nanoseconds that ended in series second `sec`, whichever clock
    /// told the second; returns whether its kind is primary (then it is counted as unflushed
    /// progress, and the caller decides whether to publish).
    #[inline(always)]
    fn add_in(&mut self, op: OpId, ns: u64, bytes: u64, sec: usize) -> bool {
        let (primary, held) = self.tally(op, ns, bytes);
        if primary && held != sec {
            self.moved_second(op, ns, sec);
        }
        self.series_add(sec, bytes, primary);
        if primary {
            self.unflushed += 1;
        }
        primary
    }

    /// Count, bytes, histogram and the slow-request counters of one operation; whether its
    /// kind is primary, and the series second its histogram held (see [`OpSlot::hist`]).
    #[inline(always)]
    fn tally(&mut self, op: OpId, ns: u64, bytes: u64) -> (bool, usize) {
        let slot = &mut self.ops[op.0];
        slot.count += 1;
        slot.bytes += bytes;
        slot.hist.record(ns);
        if ns > 2_000_000_000 {
            slot.over_2s += 1;
            if ns > 10_000_000_000 {
                slot.over_10s += 1;
            }
        }
        (slot.def.primary, slot.sec)
    }

    /// A primary operation of `ns` just tallied into its kind's histogram ended in second
    /// `sec`, which is not the one the histogram holds: it is taken out again, the held
    /// second is closed (its buckets go to that second and to the kind's total), and the
    /// histogram, now of `sec`, gets the operation. Deciding this after the tally keeps the
    /// per-operation path as it was, but for one compare.
    #[cold]
    #[inline(never)]
    fn moved_second(&mut self, op: OpId, ns: u64, sec: usize) {
        let slot = &mut self.ops[op.0];
        slot.hist.unrecord(ns);
        close_interval(
            &mut self.intervals,
            &mut slot.total,
            &mut slot.hist,
            slot.sec,
        );
        slot.sec = sec;
        slot.hist.record(ns);
    }

    #[inline(always)]
    fn series_add(&mut self, sec: usize, bytes: u64, primary: bool) {
        if sec >= self.series.len() {
            self.series.resize(sec + 1, (0, 0));
        }
        let cell = &mut self.series[sec];
        cell.1 += bytes;
        cell.0 += primary as u64;
    }

    /// The series second of tick `end`: the remembered one when `end` falls in its bounds.
    #[inline(always)]
    fn second_at_tick(&mut self, end: Tick) -> usize {
        if end.0 >= self.tsec_lo && end.0 < self.tsec_hi {
            self.tsec_idx
        } else {
            self.tick_second(end)
        }
    }

    /// The series second of tick `at`, remembered with its bounds for the next operations.
    #[cold]
    fn tick_second(&mut self, at: Tick) -> usize {
        let per = self.interval_ticks;
        let sec = at.0.saturating_sub(self.origin_tick.0) / per;
        if at.0 >= self.origin_tick.0 {
            self.tsec_lo = self.origin_tick.0.saturating_add(sec * per);
            self.tsec_hi = self.tsec_lo.saturating_add(per);
            self.tsec_idx = sec as usize;
        }
        sec as usize
    }

    /// Records one operation that began at `started` and ends now; returns now, so that
    /// back-to-back operations need one clock read each.
    #[inline]
    pub fn record(&mut self, op: OpId, started: Instant, bytes: u64) -> Instant {
        let now = Instant::now();
        self.add(
            op,
            now.saturating_duration_since(started).as_nanos() as u64,
            bytes,
            now,
        );
        now
    }

    /// Times `f` as one operation of kind `op` moving `bytes`.
    #[inline]
    pub fn time<T>(&mut self, op: OpId, bytes: u64, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let out = f();
        self.record(op, t0, bytes);
        out
    }

    /// Adds an operation of `ns` nanoseconds that ended at `at`.
    #[inline]
    pub fn add(&mut self, op: OpId, ns: u64, bytes: u64, at: Instant) {
        let sec = if at >= self.sec_lo && at < self.sec_hi {
            self.sec_idx
        } else {
            self.second_of(at)
        };
        // Publish every 256 operations, or every 100 ms when operations are slow.
        if self.add_in(op, ns, bytes, sec)
            && (self.unflushed >= PROGRESS_EVERY
                || at.saturating_duration_since(self.last_flush) > PROGRESS_PERIOD)
        {
            self.progress.fetch_add(self.unflushed, Ordering::Relaxed);
            self.unflushed = 0;
            self.last_flush = at;
        }
    }

    /// Records the latency of an operation of kind `op`, recorded as usual, counted from its
    /// scheduled time (a rate limit's due time) instead of its submission: `ns` from the due
    /// time to tick `end`. Rate-limited request loops only; see [`crate::workload::rate`].
    pub fn scheduled(&mut self, op: OpId, ns: u64, end: Tick) {
        let sec = self.second_at_tick(end);
        if self.scheduled.len() <= op.0 {
            self.scheduled
                .resize_with(self.ops.len().max(op.0 + 1), Default::default);
        }
        self.scheduled[op.0].record(ns, sec);
    }

    /// Counts `count` operations moving `bytes` without timing them (no histogram entry, no
    /// series point): for measuring what per-operation latency recording itself costs.
    pub fn count_untimed(&mut self, op: OpId, count: u64, bytes: u64) {
        let slot = &mut self.ops[op.0];
        slot.count += count;
        slot.bytes += bytes;
        if slot.def.primary {
            self.unflushed += count;
        }
    }

    /// The series second of `at`, remembered with its bounds for the next operations.
    #[cold]
    fn second_of(&mut self, at: Instant) -> usize {
        let sec = (at.saturating_duration_since(self.origin).as_nanos()
            / self.interval.as_nanos().max(1)) as u64;
        if at >= self.origin {
            self.sec_lo = self.origin + self.interval * sec as u32;
            self.sec_hi = self.sec_lo + self.interval;
            self.sec_idx = sec as usize;
        }
        sec as usize
    }

    /// Adds bytes moved outside any timed operation (e.g. setup done in a phase).
    pub fn add_bytes(&mut self, op: OpId, bytes: u64) {
        self.ops[op.0].bytes += bytes;
    }

    /// True when the phase should end early: a signal arrived, another worker failed, or the
    /// phase was cut at a stonewall (then [`Recorder::stonewalled`] is true too).
    #[inline]
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || crate::base::signals::interrupted()
    }

    /// True when the phase was cut at a stonewall (MPI `--stonewall`): the worker should end its
    /// work now and return `Ok`, keeping what it did. Check it when [`Recorder::should_stop`]
    /// says to stop.
    #[inline]
    pub fn stonewalled(&self) -> bool {
        self.wall.load(Ordering::Relaxed)
    }

    /// `Err(Interrupted)` once a signal arrived; call between operations.
    pub fn check(&self) -> Result<(), crate::base::error::Interrupted> {
        crate::base::signals::check()
    }

    /// Marks this worker as done now (its own wall time) and closes its last series interval:
    /// from here on every kind's `hist` is of the whole phase. Called by the phase runner.
    pub fn finish(&mut self) {
        if self.finished.is_none() {
            self.finished = Some(self.origin.elapsed());
            self.sched_end = super::schedstat::this_thread();
            for slot in self.ops.iter_mut().filter(|s| s.def.primary) {
                close_interval(
                    &mut self.intervals,
                    &mut slot.total,
                    &mut slot.hist,
                    slot.sec,
                );
                slot.hist = std::mem::take(&mut slot.total);
            }
            for s in &mut self.scheduled {
                s.finish();
            }
        }
        self.flush_progress();
    }

    fn flush_progress(&mut self) {
        if self.unflushed > 0 {
            self.progress.fetch_add(self.unflushed, Ordering::Relaxed);
            self.unflushed = 0;
        }
    }

    /// Count of primary operations so far.
    pub fn primary_ops(&self) -> u64 {
        self.ops
            .iter()
            .filter(|s| s.def.primary)
            .map(|s| s.count)
            .sum()
    }

    /// Count of operations of one kind so far.
    pub fn count(&self, op: OpId) -> u64 {
        self.ops[op.0].count
    }
}

/// Moves the buckets of `hist` (operations of series second `sec`) to that second's list in
/// `intervals` and to `total`.
fn close_interval(
    intervals: &mut Vec<Vec<(u32, u64)>>,
    total: &mut FastHistogram,
    hist: &mut FastHistogram,
    sec: usize,
) {
    if sec >= intervals.len() {
        intervals.resize_with(sec + 1, Vec::new);
    }
    hist.drain_into(total, &mut intervals[sec]);
}

/// One operation kind lent out of a [`Recorder`] for a tight request loop (see
/// [`Recorder::with_lane`]): its histogram and tallies live here, next to the loop, so that
/// recording a request touches the loop's own few cache lines — after a system call has
/// pushed the recorder out of the L1 cache, every line an operation's record touches is a
/// miss. So everything an operation touches (besides its histogram bucket) is in the lane's
/// first cache line, including the clock's scale, and operations are counted only as
/// `pending` until the lane settles. Every 256 operations, at every second of the series and
/// at least every 100 ms the lane settles into the recorder (series and progress); when the
/// loop ends, everything is added to the recorder's own tallies, exactly.
#[repr(C, align(64))]
pub struct Lane {
    // The first cache line: what every operation touches.
    hist: FastHistogram,
    /// nanoseconds = ticks × `mult` / 2^32 (the clock's scale).
    mult: u64,
    /// Tick at which to settle next (end of second `sec`, or the progress period).
    due: u64,
    /// Operations (and their bytes) since the last settling, all in series second `sec`.
    pending: u64,
    pending_bytes: u64,
    /// Ticks are read from the TSC here (else through the recorder's clock).
    tsc: bool,
    // Touched when settling, on slow operations and at the end.
    op: OpId,
    /// Operations and bytes settled so far.
    count: u64,
    bytes: u64,
    over_2s: u64,
    over_10s: u64,
    sec: usize,
    /// The series second `hist` holds (of a primary kind; see [`OpSlot::hist`]).
    hist_sec: usize,
}

impl Lane {
    fn new(op: OpId, hist: FastHistogram, hist_sec: usize, clock: &Clock) -> Self {
        Lane {
            hist_sec,
            hist,
            mult: clock.mult(),
            due: 0,
            pending: 0,
            pending_bytes: 0,
            tsc: clock.is_tsc(),
            op,
            count: 0,
            bytes: 0,
            over_2s: 0,
            over_10s: 0,
            sec: 0,
        }
    }

    /// Records one operation from `start` to `end` (ticks of `rec`'s clock).
    #[inline(always)]
    pub fn span(&mut self, rec: &mut Recorder, start: Tick, end: Tick, bytes: u64) {
        let ns = Clock::scale(self.mult, start, end);
        self.add(rec, ns, bytes, end);
    }

    /// Records one operation that began at `start` and ends now; returns now.
    #[inline(always)]
    pub fn lap(&mut self, rec: &mut Recorder, start: Tick, bytes: u64) -> Tick {
        let now = if self.tsc {
            Clock::tsc_now()
        } else {
            rec.clock.now()
        };
        self.span(rec, start, now, bytes);
        now
    }

    /// Records one operation of `ns` nanoseconds moving `bytes` that ended at tick `end`.
    #[inline(always)]
    pub fn add(&mut self, rec: &mut Recorder, ns: u64, bytes: u64, end: Tick) {
        if end.0 >= self.due || self.pending >= PROGRESS_EVERY {
            rec.settle(self, end);
        }
        self.hist.record(ns);
        self.pending += 1;
        self.pending_bytes += bytes;
        if ns > 2_000_000_000 {
            self.slow(ns);
        }
    }

    #[cold]
    #[inline(never)]
    fn slow(&mut self, ns: u64) {
        self.over_2s += 1;
        if ns > 10_000_000_000 {
            self.over_10s += 1;
        }
    }
}

impl Recorder {
    /// Runs `f` with operation kind `op` lent out as a [`Lane`]; its operations are in the
    /// recorder's tallies when `f` returns (also when it fails).
    pub fn with_lane<R>(&mut self, op: OpId, f: impl FnOnce(&mut Recorder, &mut Lane) -> R) -> R {
        self.with_lanes([op], |rec, [lane]| f(rec, lane))
    }

    /// [`Recorder::with_lane`] for several operation kinds at once (e.g. each syscall of a
    /// file create, and the create itself).
    pub fn with_lanes<R, const N: usize>(
        &mut self,
        ops: [OpId; N],
        f: impl FnOnce(&mut Recorder, &mut [Lane; N]) -> R,
    ) -> R {
        // The lanes take the recorder's own histograms (whatever the recorder records of the
        // same kind meanwhile goes into a new one, added back at the end), so that nothing of
        // the size of a histogram is copied or merged when the loop ends: on a phase of a few
        // thousand fast operations, adding five histograms of 33K buckets was 1-2 ms of its
        // wall time.
        let clock = self.clock;
        let mut lanes = ops.map(|op| {
            let slot = &mut self.ops[op.0];
            Lane::new(op, std::mem::take(&mut slot.hist), slot.sec, &clock)
        });
        let out = f(self, &mut lanes);
        for lane in &mut lanes {
            self.settle_pending(lane);
            let slot = &mut self.ops[lane.op.0];
            slot.count += lane.count;
            slot.bytes += lane.bytes;
            slot.over_2s += lane.over_2s;
            slot.over_10s += lane.over_10s;
        }
        for lane in lanes {
            let slot = &mut self.ops[lane.op.0];
            let mut meanwhile = std::mem::replace(&mut slot.hist, lane.hist);
            if slot.def.primary && slot.sec != lane.hist_sec {
                // Recorded meanwhile in another series second: closed there.
                close_interval(
                    &mut self.intervals,
                    &mut slot.total,
                    &mut meanwhile,
                    slot.sec,
                );
                slot.sec = lane.hist_sec;
            } else {
                slot.hist.add(&meanwhile);
            }
        }
        out
    }

    /// Moves a lane's pending operations into the series (and the progress counter).
    fn settle_pending(&mut self, lane: &mut Lane) {
        if lane.pending == 0 {
            return;
        }
        lane.count += lane.pending;
        lane.bytes += lane.pending_bytes;
        let primary = self.ops[lane.op.0].def.primary;
        if lane.sec >= self.series.len() {
            self.series.resize(lane.sec + 1, (0, 0));
        }
        let cell = &mut self.series[lane.sec];
        cell.1 += lane.pending_bytes;
        if primary {
            cell.0 += lane.pending;
            self.unflushed += lane.pending;
            self.flush_progress();
        }
    }

    /// Settles a lane whose next operation ends at `end`: its pending operations go to their
    /// second, and the lane moves to the second of `end`.
    #[cold]
    #[inline(never)]
    fn settle(&mut self, lane: &mut Lane, end: Tick) {
        self.settle_pending(lane);
        lane.pending = 0;
        lane.pending_bytes = 0;
        lane.sec = self.second_at_tick(end);
        if lane.hist_sec != lane.sec && self.ops[lane.op.0].def.primary {
            let slot = &mut self.ops[lane.op.0];
            close_interval(
                &mut self.intervals,
                &mut slot.total,
                &mut lane.hist,
                lane.hist_sec,
            );
            lane.hist_sec = lane.sec;
        }
        let period = end.0.saturating_add(self.clock.ticks(PROGRESS_PERIOD));
        lane.due = if end.0 >= self.origin_tick.0 {
            self.tsec_hi.min(period)
        } else {
            // Before the phase's origin (a clock read before the phase began): second 0.
            self.origin_tick.0.min(period)
        };
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::measure::summarize;

    /// A recorder of worker 0 on the monotonic clock from `origin`.
    fn recorder(origin: Instant, defs: &[OpDef], progress: &Arc<AtomicU64>) -> Recorder {
        Recorder::new(
            0,
            origin,
            Clock::monotonic(origin),
            Tick(0),
            Duration::from_secs(1),
            defs,
            Arc::clone(progress),
            StopFlags::default(),
        )
    }

    /// A recorder from `origin` of one primary kind, "op", and its id.
    fn lone_kind(origin: Instant) -> (Recorder, OpId) {
        let r = recorder(
            origin,
            &[OpDef::primary("op")],
            &Arc::new(AtomicU64::new(0)),
        );
        let op = r.op("op");
        (r, op)
    }

    #[test]
    fn operations_land_in_the_second_they_ended_in() {
        let origin = Instant::now();
        let (mut r, op) = lone_kind(origin);
        let ms = |m: u64| origin + Duration::from_millis(m);
        for at in [500, 1500, 700, 3200, 999, 1000, 3999] {
            r.add(op, 10, 1, ms(at));
        }
        let ops: Vec<u64> = r.series.iter().map(|c| c.0).collect();
        assert_eq!(ops, [3, 2, 0, 2]);
        assert_eq!(r.count(op), 7);
    }

    #[test]
    fn spans_land_in_the_second_they_ended_in_and_time_exactly() {
        let origin = Instant::now();
        // Ticks of the monotonic clock are nanoseconds since the origin.
        let progress = Arc::new(AtomicU64::new(0));
        let mut r = recorder(
            origin,
            &[OpDef::primary("op"), OpDef::secondary("part")],
            &progress,
        );
        let (op, part) = (r.op("op"), r.op("part"));
        let ms = |m: u64| Tick(m * 1_000_000);
        for at in [500, 1500, 700, 3200, 999, 1000, 3999] {
            r.span(op, ms(at - 1), ms(at), 7);
            r.span(part, ms(at - 1), ms(at), 1);
        }
        let ops: Vec<u64> = r.series.iter().map(|c| c.0).collect();
        assert_eq!(ops, [3, 2, 0, 2]);
        let bytes: Vec<u64> = r.series.iter().map(|c| c.1).collect();
        assert_eq!(bytes, [24, 16, 0, 16]);
        assert_eq!((r.count(op), r.count(part)), (7, 7));
        let h = r.ops[op.0].hist.to_histogram();
        assert_eq!((h.min(), h.max()), (999_936, 1_000_447));
        // A slow operation is published to the progress counter at once.
        r.span(op, ms(4000), ms(6500), 0);
        assert_eq!(r.ops[op.0].over_2s, 1);
        assert_eq!(progress.load(Ordering::Relaxed), 8);
        let before = r.tick();
        let after = r.lap(part, before, 0);
        assert!(after >= before);
        assert_eq!(r.count(part), 8);
    }

    #[test]
    fn a_lane_records_exactly_what_spans_would() {
        let origin = Instant::now();
        let defs = [OpDef::primary("op")];
        let new = |p: &Arc<AtomicU64>| recorder(origin, &defs, p);
        let (pa, pb) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (mut a, mut b) = (new(&pa), new(&pb));
        let op = a.op("op");
        // 3000 operations over 3.5 s, some slow, one a second long.
        let ends: Vec<u64> = (0..3000u64).map(|i| i * 1_166_666 + 1).collect();
        let ns = |i: usize| {
            if i == 1234 {
                2_500_000_000
            } else {
                700 + (i as u64 * 37) % 5000
            }
        };
        for (i, &e) in ends.iter().enumerate() {
            a.add_tick(op, ns(i), 4096, Tick(e));
        }
        b.with_lane(op, |rec, lane| {
            for (i, &e) in ends.iter().enumerate() {
                lane.add(rec, ns(i), 4096, Tick(e));
            }
        });
        a.finish();
        b.finish();
        assert_eq!(a.series, b.series);
        assert_eq!(a.intervals, b.intervals);
        let (sa, sb) = (&a.ops[0], &b.ops[0]);
        assert_eq!(
            (sa.count, sa.bytes, sa.over_2s),
            (sb.count, sb.bytes, sb.over_2s)
        );
        assert_eq!((sb.count, sb.over_2s), (3000, 1));
        let (ha, hb) = (sa.hist.to_histogram(), sb.hist.to_histogram());
        assert_eq!(summarize(&ha, 0, 0), summarize(&hb, 0, 0));
        assert_eq!(pa.load(Ordering::Relaxed), 3000);
        assert_eq!(pb.load(Ordering::Relaxed), 3000);
    }

    #[test]
    fn nothing_is_lost_while_a_kind_is_lent_out() {
        let origin = Instant::now();
        let (mut r, op) = lone_kind(origin);
        // Before the loop, through two lanes of the same kind at once, and through the
        // recorder itself while the kind is lent out.
        r.add_tick(op, 100, 0, Tick(1));
        r.with_lanes([op, op], |rec, [a, b]| {
            a.add(rec, 200, 0, Tick(2));
            b.add(rec, 300, 0, Tick(3));
            rec.add_tick(op, 400, 0, Tick(4));
            a.add(rec, 500, 0, Tick(5));
        });
        r.with_lane(op, |rec, lane| lane.add(rec, 600, 0, Tick(6)));
        let slot = &r.ops[op.0];
        assert_eq!(slot.count, 6);
        let h = slot.hist.to_histogram();
        assert_eq!(h.len(), 6);
        for v in [100, 200, 300, 400, 500, 600] {
            assert_eq!(h.count_at(v), 1, "{v} ns");
        }
    }

    /// The latencies of the operations that ended in each second, as a histogram.
    fn interval(r: &Recorder, sec: usize) -> crate::measure::LatencyHistogram {
        let mut h = crate::measure::new_histogram();
        FastHistogram::add_buckets_to(&r.intervals[sec], &mut h);
        h
    }

    #[test]
    fn each_second_keeps_the_latencies_of_its_operations_and_they_add_up_to_the_phase() {
        let origin = Instant::now();
        let mut r = recorder(
            origin,
            &[OpDef::primary("op"), OpDef::secondary("part")],
            &Arc::new(AtomicU64::new(0)),
        );
        let (op, part) = (r.op("op"), r.op("part"));
        let ms = |m: u64| Tick(m * 1_000_000);
        // Second 0 through the recorder, second 1 through a lane while the recorder records
        // in second 2 (the lane ends in second 3), second 4 through the recorder again, and
        // one operation late for second 1 after all that.
        r.add_tick(op, 100, 1, ms(10));
        r.add_tick(op, 200, 1, ms(900));
        r.add_tick(part, 5, 0, ms(950));
        r.with_lane(op, |rec, lane| {
            lane.add(rec, 1_000, 1, ms(1_100));
            lane.add(rec, 2_000, 1, ms(1_500));
            rec.add_tick(op, 30_000, 1, ms(2_500));
            lane.add(rec, 3_000, 1, ms(3_100));
        });
        r.add_tick(op, 40_000, 1, ms(4_000));
        r.add_tick(op, 5_000, 1, ms(1_999));
        r.finish();
        // The lowest value of each recorded bucket, once per operation.
        let near = |sec: usize| -> Vec<u64> {
            interval(&r, sec)
                .iter_recorded()
                .flat_map(|v| {
                    std::iter::repeat_n(v.value_iterated_to(), v.count_at_value() as usize)
                })
                .map(|v| crate::measure::new_histogram().lowest_equivalent(v))
                .collect()
        };
        let lowest = |v: &[u64]| -> Vec<u64> {
            let h = crate::measure::new_histogram();
            v.iter().map(|&x| h.lowest_equivalent(x)).collect()
        };
        assert_eq!(near(0), lowest(&[100, 200]));
        assert_eq!(near(1), lowest(&[1_000, 2_000, 5_000]));
        assert_eq!(near(2), lowest(&[30_000]));
        assert_eq!(near(3), lowest(&[3_000]));
        assert_eq!(near(4), lowest(&[40_000]));
        // Per second as the series counts them; all seconds together are the phase.
        let counts: Vec<u64> = (0..5).map(|s| interval(&r, s).len()).collect();
        let ops: Vec<u64> = r.series.iter().map(|c| c.0).collect();
        assert_eq!(counts, ops);
        let mut all = crate::measure::new_histogram();
        for s in 0..5 {
            all.add(interval(&r, s)).unwrap();
        }
        assert_eq!(all, r.ops[op.0].hist.to_histogram());
        assert_eq!(r.ops[op.0].count, 8);
        // A secondary kind keeps one histogram and is in no interval.
        assert_eq!(r.ops[part.0].hist.len(), 1);
    }

    #[test]
    fn what_every_operation_touches_is_in_one_cache_line() {
        assert_eq!(std::mem::align_of::<Lane>(), 64);
        assert!(std::mem::offset_of!(Lane, tsc) < 64);
    }
}
