//! Timestamps for the per-request path. A request's latency needs one timestamp per request
//! boundary; on a page-cache hit a request takes about a microsecond, so the clock read is a
//! visible share of it. Where the CPU has an invariant TSC (constant_tsc and nonstop_tsc),
//! requests are timed with the raw time-stamp counter, calibrated once against the monotonic
//! clock — about half the cost of `clock_gettime` in a virtual machine. Elsewhere the
//! monotonic clock ([`Instant`]) is used. `--no-latency` takes no timestamps at all.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A source of request timestamps.
pub(crate) trait Stamp {
    /// A timestamp.
    type T: Copy;
    /// Whether this source times requests at all.
    const ON: bool;
    fn now(&self) -> Self::T;
    /// Nanoseconds from `a` to `b`.
    fn ns(&self, a: Self::T, b: Self::T) -> u64;
}

/// The monotonic clock.
pub(crate) struct Std;

impl Stamp for Std {
    type T = Instant;
    const ON: bool = true;
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
    #[inline]
    fn ns(&self, a: Instant, b: Instant) -> u64 {
        b.saturating_duration_since(a).as_nanos() as u64
    }
}

/// No timestamps: latency recording off.
pub(crate) struct Off;

impl Stamp for Off {
    type T = ();
    const ON: bool = false;
    #[inline]
    fn now(&self) {}
    #[inline]
    fn ns(&self, _: (), _: ()) -> u64 {
        0
    }
}

/// The invariant TSC with its calibration: nanoseconds = ticks × `mult` / 2^32.
pub(crate) struct Tsc {
    mult: u64,
}

impl Stamp for Tsc {
    type T = u64;
    const ON: bool = true;
    #[inline]
    fn now(&self) -> u64 {
        rdtsc()
    }
    #[inline]
    fn ns(&self, a: u64, b: u64) -> u64 {
        ((b.saturating_sub(a) as u128 * self.mult as u128) >> 32) as u64
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn rdtsc() -> u64 {
    0
}

fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

fn calibrate() -> Option<Tsc> {
    if !invariant_tsc() {
        return None;
    }
    let (i0, c0) = (Instant::now(), rdtsc());
    std::thread::sleep(Duration::from_millis(20));
    let (i1, c1) = (Instant::now(), rdtsc());
    let ticks = c1.checked_sub(c0)?;
    let ns = i1.duration_since(i0).as_nanos() as u64;
    if ticks == 0 || ns == 0 {
        return None;
    }
    let per_tick = ns as f64 / ticks as f64;
    // Between 0.1 and 20 GHz, or the counter is not what it claims to be.
    if !(0.05..=10.0).contains(&per_tick) {
        return None;
    }
    Some(Tsc {
        mult: ((ns as u128) << 32).checked_div(ticks as u128)? as u64,
    })
}

/// The calibrated TSC, when this machine has an invariant one.
pub(crate) fn tsc() -> Option<&'static Tsc> {
    static TSC: OnceLock<Option<Tsc>> = OnceLock::new();
    TSC.get_or_init(calibrate).as_ref()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_tsc_agrees_with_the_monotonic_clock() {
        let Some(t) = tsc() else {
            eprintln!("skipped: no invariant TSC here");
            return;
        };
        let (i0, c0) = (Instant::now(), t.now());
        std::thread::sleep(Duration::from_millis(50));
        let (c1, i1) = (t.now(), Instant::now());
        let by_tsc = t.ns(c0, c1) as f64;
        let by_clock = i1.duration_since(i0).as_nanos() as f64;
        assert!(
            (by_tsc - by_clock).abs() / by_clock < 0.01,
            "{by_tsc} vs {by_clock}"
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod cost {
    use super::*;
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
        let at = Instant::now();
        let t = Instant::now();
        for i in 0..n {
            rec.add(op, 900 + (i & 255), 4096, at);
        }
        let add = t.elapsed().as_nanos() as f64 / n as f64;
        let mut h = crate::measure::new_histogram();
        let t = Instant::now();
        for i in 0..n {
            h.saturating_record(std::hint::black_box(900 + (i & 255)));
        }
        let hist = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            let s = std::hint::black_box(at)
                .saturating_duration_since(t)
                .as_secs();
            std::hint::black_box(s + i);
        }
        let series = t.elapsed().as_nanos() as f64 / n as f64;
        eprintln!("histogram record {hist:.1} ns, series second {series:.1} ns");
        let t = Instant::now();
        let mut x = 0u64;
        for _ in 0..n {
            x = x.wrapping_add(std::hint::black_box(Instant::now()).elapsed().as_nanos() as u64);
        }
        let std_pair = t.elapsed().as_nanos() as f64 / n as f64 / 2.0;
        let tsc_ns = tsc().map(|c| {
            let t = Instant::now();
            for _ in 0..n {
                x = x.wrapping_add(std::hint::black_box(c.now()));
            }
            t.elapsed().as_nanos() as f64 / n as f64
        });
        eprintln!(
            "Recorder::add {add:.1} ns, Instant::now {std_pair:.1} ns, TSC read {tsc_ns:?} ns ({})",
            x & 1
        );
    }
}
