//! The clock of the per-operation path. An operation's latency needs one timestamp per
//! operation boundary; a file create on tmpfs takes a few microseconds and a page-cache read
//! about one, so the clock read is a visible share of what is measured. Where the CPU has an
//! invariant TSC (`constant_tsc` and `nonstop_tsc`, and the kernel keeps it as its
//! clocksource, i.e. the CPUs' counters agree), operations are timed with the raw
//! time-stamp counter (no serialising fence: the syscall between two reads orders them well
//! enough for nanosecond figures), calibrated once per process against the monotonic clock —
//! less than half the cost of `clock_gettime` in a virtual machine. Elsewhere the ticks are
//! nanoseconds of the monotonic clock ([`Instant`]).
//!
//! Ticks are only ever compared and subtracted within one process; they become nanoseconds
//! through [`Clock::ns`].

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::base::sys::cpu::rdtsc;

/// A timestamp of a [`Clock`]: TSC ticks, or nanoseconds since the clock's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(pub u64);

/// The operation clock of a phase: the calibrated TSC where there is an invariant one,
/// otherwise the monotonic clock. Cheap to copy.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Ticks come from RDTSC (else from `origin.elapsed()`).
    tsc: bool,
    /// nanoseconds = ticks × `mult` / 2^32.
    mult: u64,
    /// Ticks per second.
    per_sec: u64,
    origin: Instant,
}

impl Clock {
    /// The best clock of this machine; `origin` is where monotonic-clock ticks count from.
    pub fn new(origin: Instant) -> Self {
        match tsc() {
            Some(t) => Self {
                tsc: true,
                mult: t.mult,
                per_sec: t.per_sec,
                origin,
            },
            None => Self::monotonic(origin),
        }
    }

    /// The monotonic clock, in nanoseconds since `origin`.
    pub fn monotonic(origin: Instant) -> Self {
        Self {
            tsc: false,
            mult: 1 << 32,
            per_sec: 1_000_000_000,
            origin,
        }
    }

    /// The same clock with monotonic-clock ticks counted from `origin`.
    pub fn with_origin(self, origin: Instant) -> Self {
        Self { origin, ..self }
    }

    /// True when ticks come from the time-stamp counter.
    pub fn is_tsc(&self) -> bool {
        self.tsc
    }

    /// Now.
    #[inline(always)]
    pub fn now(&self) -> Tick {
        if self.tsc {
            Tick(rdtsc())
        } else {
            Tick(self.origin.elapsed().as_nanos() as u64)
        }
    }

    /// Nanoseconds from `a` to `b` (0 if `b` is earlier).
    #[inline(always)]
    pub fn ns(&self, a: Tick, b: Tick) -> u64 {
        Self::scale(self.mult, a, b)
    }

    /// The clock's scale: nanoseconds = ticks × `mult` / 2^32 (see [`Clock::scale`]).
    pub fn mult(&self) -> u64 {
        self.mult
    }

    /// Nanoseconds from `a` to `b` (0 if `b` is earlier) at scale `mult`: what [`Clock::ns`]
    /// computes, for a loop that keeps the scale in its own cache line.
    #[inline(always)]
    pub fn scale(mult: u64, a: Tick, b: Tick) -> u64 {
        ((b.0.saturating_sub(a.0) as u128 * mult as u128) >> 32) as u64
    }

    /// Now, from the time-stamp counter: for a clock whose [`Clock::is_tsc`] is true.
    #[inline(always)]
    pub fn tsc_now() -> Tick {
        Tick(rdtsc())
    }

    /// Ticks in one second.
    pub fn per_sec(&self) -> u64 {
        self.per_sec
    }

    /// Ticks in `d` (rounded down).
    pub fn ticks(&self, d: Duration) -> u64 {
        (d.as_nanos() * self.per_sec as u128 / 1_000_000_000) as u64
    }
}

/// The calibration of an invariant TSC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tsc {
    /// nanoseconds = ticks × `mult` / 2^32.
    pub(crate) mult: u64,
    pub(crate) per_sec: u64,
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
    // The kernel's own verdict too: it keeps the TSC as its clocksource only while the
    // counters of all CPUs agree (a thread may move between CPUs mid-operation).
    let kernel_trusts =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map_or(true, |c| c.trim() == "tsc");
    has("constant_tsc") && has("nonstop_tsc") && kernel_trusts
}

/// One (monotonic, TSC) pair read as close together as this moment allows: of a few tries,
/// the one whose two counter reads bracket the clock read most tightly (a try interrupted by
/// the scheduler is thrown away).
fn pair() -> (Instant, u64) {
    let mut best: Option<(u64, Instant, u64)> = None;
    for _ in 0..7 {
        let a = rdtsc();
        let i = Instant::now();
        let b = rdtsc();
        let gap = b.wrapping_sub(a);
        if best.is_none_or(|(g, _, _)| gap < g) {
            best = Some((gap, i, a + gap / 2));
        }
    }
    let (_, i, c) = best.expect("seven tries");
    (i, c)
}

fn calibrate() -> Option<Tsc> {
    if !invariant_tsc() {
        return None;
    }
    let (i0, c0) = pair();
    std::thread::sleep(Duration::from_millis(20));
    let (i1, c1) = pair();
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
        per_sec: (ticks as u128 * 1_000_000_000 / ns as u128) as u64,
    })
}

/// The calibrated TSC, when this machine has an invariant one (calibrated on first use).
pub(crate) fn tsc() -> Option<&'static Tsc> {
    static TSC: OnceLock<Option<Tsc>> = OnceLock::new();
    TSC.get_or_init(calibrate).as_ref()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_agrees_with_the_monotonic_clock() {
        for c in [Clock::new(Instant::now()), Clock::monotonic(Instant::now())] {
            let (i0, c0) = (Instant::now(), c.now());
            std::thread::sleep(Duration::from_millis(50));
            let (c1, i1) = (c.now(), Instant::now());
            let by_clock = c.ns(c0, c1) as f64;
            let by_instant = i1.duration_since(i0).as_nanos() as f64;
            assert!(
                (by_clock - by_instant).abs() / by_instant < 0.01,
                "tsc {}: {by_clock} vs {by_instant}",
                c.is_tsc()
            );
            let per_sec = c.ticks(Duration::from_secs(1)) as f64;
            assert!((per_sec - c.per_sec() as f64).abs() <= 1.0);
            assert_eq!(c.ns(c1, c0), 0, "an earlier end is no time, not a wrap");
        }
    }
}
