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
