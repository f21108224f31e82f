//! Timestamps for the per-request path: either the phase's operation clock
//! ([`crate::measure::Clock`], the invariant TSC where there is one) or none at all
//! (`--no-latency`, to measure what latency recording costs). The request loops are generic
//! over [`Stamp`], so the loop without timestamps carries no trace of them.

use crate::measure::{Clock, Lane, Recorder, Tick};

/// A source of request timestamps.
pub(crate) trait Stamp {
    /// A timestamp.
    type T: Copy;
    /// Whether this source times requests at all.
    const ON: bool;
    fn now(&self) -> Self::T;
    /// Nanoseconds from `a` to `b`.
    fn ns(&self, a: Self::T, b: Self::T) -> u64;
    /// Records a request of `ns` nanoseconds that ended at `end` into `lane`.
    fn record(&self, lane: &mut Lane, rec: &mut Recorder, ns: u64, bytes: u64, end: Self::T);
}

/// The phase's operation clock.
pub(crate) struct On(pub Clock);

impl Stamp for On {
    type T = Tick;
    const ON: bool = true;
    #[inline(always)]
    fn now(&self) -> Tick {
        self.0.now()
    }
    #[inline(always)]
    fn ns(&self, a: Tick, b: Tick) -> u64 {
        self.0.ns(a, b)
    }
    #[inline(always)]
    fn record(&self, lane: &mut Lane, rec: &mut Recorder, ns: u64, bytes: u64, end: Tick) {
        lane.add(rec, ns, bytes, end);
    }
}

/// No timestamps: latency recording off.
pub(crate) struct Off;

impl Stamp for Off {
    type T = ();
    const ON: bool = false;
    #[inline(always)]
    fn now(&self) {}
    #[inline(always)]
    fn ns(&self, _: (), _: ()) -> u64 {
        0
    }
    #[inline(always)]
    fn record(&self, _: &mut Lane, _: &mut Recorder, _: u64, _: u64, _: ()) {}
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod cost {
    use std::time::Instant;

    use crate::measure::{Devices, OpDef, PhaseMeter, Progress};

    /// What timing and recording one request costs, in nanoseconds (run with
    /// `cargo test --release -- --ignored --nocapture recording_cost`).
    #[test]
    #[ignore]
    fn recording_cost() {
        let meter = PhaseMeter::start(
            "x",
            &[OpDef::primary("read")],
            &Devices::default(),
            None,
            &Progress::hidden(),
        );
        let mut rec = meter.recorder(0);
        let op = rec.op("read");
        let n = 20_000_000u64;
        let t = Instant::now();
        let mut tick = rec.tick();
        for _ in 0..n {
            tick = rec.lap(op, tick, 4096);
        }
        let lap = t.elapsed().as_nanos() as f64 / n as f64;
        let clock = rec.clock();
        let t = Instant::now();
        rec.with_lane(op, |rec, lane| {
            let mut tick = clock.now();
            for _ in 0..n {
                let e = clock.now();
                lane.add(rec, clock.ns(tick, e), 4096, e);
                tick = e;
            }
        });
        let lane = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        let mut x = 0u64;
        for _ in 0..n {
            x = x.wrapping_add(std::hint::black_box(rec.tick()).0);
        }
        let tick_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for _ in 0..n {
            x = x.wrapping_add(std::hint::black_box(Instant::now()).elapsed().as_nanos() as u64);
        }
        let std_pair = t.elapsed().as_nanos() as f64 / n as f64 / 2.0;
        eprintln!(
            "Recorder::lap (clock read + record) {lap:.1} ns, with a Lane {lane:.1} ns, clock read {tick_ns:.1} ns (tsc: {}), Instant::now {std_pair:.1} ns ({})",
            rec.clock().is_tsc(),
            x & 1
        );
    }
}
