//! Rate limits: fio's `rate_iops` and `rate`. A rate-limited worker issues its requests on an
//! open-loop schedule — request k is due at t0 + k / rate (or, for a byte rate, when the bytes
//! of the requests before it are due) — whatever became of the requests before it. A request
//! is never issued before it is due; a worker that has fallen behind issues the requests that
//! are due at once, one after another (none is skipped), so a stall of the device shows as the
//! queue it leaves behind.
//!
//! That queue is what the second latency of a rate-limited run measures: each request's
//! latency from its *due* time to its completion, beside the usual one from its submission
//! (`scheduled_latency` in the result). Measured from submission only, the requests that
//! waited behind a stall look fast — "coordinated omission" (Gil Tene): the load generator
//! politely stops sending while the system is stuck, and the stall vanishes from the
//! percentiles.
//!
//! Waiting for a due time: `clock_nanosleep` on an absolute CLOCK_MONOTONIC time until
//! [`SPIN_NS`] before the due time, with the thread's timer slack at 1 ns, then a spin on the
//! operation clock. On this project's VM a plain sleep (50 µs default slack) woke 75 µs late at
//! the median, a sleep with 1 ns slack 27 µs late, and sleep-then-spin (50 µs) 12 ns late (p99
//! 22 µs) at 2000 requests/s for about 10 % of a CPU (see the notes of the change). Either way
//! the rate itself is reached within 0.03 %, since due times do not drift; the spin keeps the
//! wake-up delay out of the scheduled-time latency.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Result;
use nix::sys::time::TimeSpec;
use nix::time::{clock_gettime, clock_nanosleep, ClockId, ClockNanosleepFlags};
use serde::{Deserialize, Serialize};

use crate::base::error::{bad_param, bad_params};
use crate::base::units::{format_size, parse_size};
use crate::measure::{Clock, Tick};
use crate::results::{RateOutcome, WorkerRate};

/// How long before a due time the sleep ends and the spin begins.
pub const SPIN_NS: u64 = 50_000;

/// The longest single sleep: a worker waiting for a slow rate still sees a signal, another
/// worker's failure or the deadline within this.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// The request rates a schedule can pace, per second: from one request every 1000 s (slower
/// and a phase's due times lie hours apart) to one a nanosecond, the resolution of the
/// operation clock (faster and due times cannot be told apart: the limit would be no limit).
pub const IOPS_RANGE: (f64, f64) = (0.001, 1e9);

/// The byte rates a schedule can pace, per second: 1K/s (one 4K request every 4 s) to 1T/s
/// (beyond any device; the limit would be no limit).
pub const BYTES_RANGE: (u64, u64) = (1 << 10, 1 << 40);

/// A worker falling short of its rate by more than this share is reported.
pub const SHORT_BY: f64 = 0.01;

crate::choice! {
    /// Whom a rate applies to.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum RatePer("rate scope") {
        /// Every worker (thread or client) gets the whole rate, as fio gives each job its own.
        #[default]
        Worker = "worker",
        /// The run's rate, split evenly over its workers.
        Run = "run",
    }
}

impl RatePer {
    /// The default (left out of parameters).
    pub fn is_worker(&self) -> bool {
        *self == Self::Worker
    }
}

/// Bytes per second: `10M`, `10M/s`, `512KiB/s` (binary multiples, as sizes are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRate(pub u64);

impl FromStr for ByteRate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let size = t.strip_suffix("/s").unwrap_or(t);
        parse_size(size).map(ByteRate).map_err(|e| {
            format!("rate {s:?} is not bytes per second ({e}); write it like 10M/s or 512K")
        })
    }
}

impl fmt::Display for ByteRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", format_size(self.0))
    }
}

/// In results and plans: bytes per second as a number; plans may also write `"10M/s"`.
impl Serialize for ByteRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ByteRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(b) => Ok(ByteRate(b)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `--rate-iops 2000`: requests per second (fractions allowed, e.g. 0.5).
pub fn iops(s: &str) -> Result<f64, String> {
    let t = s.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "rate {s:?} is not a number of requests per second; write it like 2000"
        )),
    }
}

/// The rate limit a run asks for: `--rate-iops` / `--rate` / `--rate-per` (plan keys
/// `rate_iops`, `rate`, `rate_per`), which are fields of [`super::control::RunControl`] (see
/// [`super::control::RunControl::rate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateLimit {
    pub iops: Option<f64>,
    pub bytes: Option<ByteRate>,
    pub per: RatePer,
}

/// What a rate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    /// Requests (operations).
    Requests,
    /// Bytes.
    Bytes,
}

impl RateUnit {
    /// The unit as results write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Requests => "ops/s",
            Self::Bytes => "B/s",
        }
    }
}

/// One worker's rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub unit: RateUnit,
    /// Units per second.
    pub per_sec: f64,
}

impl RateLimit {
    /// True when a rate is asked.
    pub fn is_set(&self) -> bool {
        self.iops.is_some() || self.bytes.is_some()
    }

    /// Refuses a rate of 0 (or not a number), rates outside what a schedule can pace
    /// ([`IOPS_RANGE`], [`BYTES_RANGE`]), both rates at once, and a `rate_per` of `run` with
    /// no rate to split (the command line refuses `--rate-per` without a rate already).
    pub fn validate(&self) -> Result<()> {
        if self.iops.is_some() && self.bytes.is_some() {
            return Err(bad_params(
                &["rate_iops", "rate"],
                "--rate-iops and --rate together: give one (with a fixed block size one fixes the other)",
            ));
        }
        if let Some(r) = self.iops {
            if !(r.is_finite() && r > 0.0) {
                return Err(bad_param(
                    "rate_iops",
                    format!("--rate-iops {r}: a rate must be more than 0 requests per second; leave it out for no limit"),
                ));
            }
            let (lo, hi) = IOPS_RANGE;
            if !(lo..=hi).contains(&r) {
                // 1e99, not a hundred digits.
                let r = if (1e-3..1e6).contains(&r) {
                    format!("{r}")
                } else {
                    format!("{r:e}")
                };
                return Err(bad_param(
                    "rate_iops",
                    format!(
                        "--rate-iops {r} is outside what fsgauge can pace: give {lo} to {hi:.0} requests per second (one request every 1000 s to one a nanosecond), or leave it out for no limit"
                    ),
                ));
            }
        }
        if let Some(ByteRate(b)) = self.bytes {
            if b == 0 {
                return Err(bad_param(
                    "rate",
                    "--rate 0: a rate must be more than 0 bytes per second; leave it out for no limit",
                ));
            }
            let (lo, hi) = BYTES_RANGE;
            if !(lo..=hi).contains(&b) {
                return Err(bad_param(
                    "rate",
                    format!(
                        "--rate {} is outside what fsgauge can pace: give {}/s to {}/s, or leave it out for no limit",
                        ByteRate(b),
                        format_size(lo),
                        format_size(hi)
                    ),
                ));
            }
        }
        if self.per == RatePer::Run && !self.is_set() {
            return Err(bad_param(
                "rate_per",
                "rate_per = \"run\" splits a rate over the workers, but no rate is given: add rate_iops or rate, or leave rate_per out",
            ));
        }
        Ok(())
    }

    /// The pace of each of `workers` workers, when a rate is asked.
    pub fn pace(&self, workers: usize) -> Option<Pace> {
        let (unit, total) = match (self.iops, self.bytes) {
            (Some(r), _) => (RateUnit::Requests, r),
            (None, Some(b)) => (RateUnit::Bytes, b.0 as f64),
            (None, None) => return None,
        };
        let per_sec = match self.per {
            RatePer::Worker => total,
            RatePer::Run => total / workers.max(1) as f64,
        };
        Some(Pace { unit, per_sec })
    }
}

/// What one rate-limited worker did: units issued, and the time from its first due time to
/// its last completion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Achieved {
    pub worker: u32,
    pub units: u64,
    pub seconds: f64,
}

/// The phase's rate record, and the warning when a worker fell more than [`SHORT_BY`] short.
pub fn outcome(pace: Pace, mut done: Vec<Achieved>, phase: &str) -> (RateOutcome, Option<String>) {
    done.sort_by_key(|a| a.worker);
    let workers: Vec<WorkerRate> = done
        .iter()
        .map(|a| WorkerRate {
            worker: a.worker,
            asked: pace.per_sec,
            // No request is issued before its due time, so the schedule's own length is the
            // least time the units can take; the last completion only lengthens it (a
            // handful of requests would otherwise seem faster than asked).
            achieved: {
                let secs = a.seconds.max(a.units as f64 / pace.per_sec);
                if secs > 0.0 {
                    a.units as f64 / secs
                } else {
                    0.0
                }
            },
        })
        .collect();
    let short: Vec<String> = workers
        .iter()
        .filter(|w| w.achieved < w.asked * (1.0 - SHORT_BY))
        .map(|w| {
            format!(
                "worker {} {} of {} ({:.1} %)",
                w.worker,
                figure(w.achieved, pace.unit),
                figure(w.asked, pace.unit),
                100.0 * w.achieved / w.asked
            )
        })
        .collect();
    let warning = (!short.is_empty()).then(|| {
        let flag = match pace.unit {
            RateUnit::Requests => "--rate-iops",
            RateUnit::Bytes => "--rate",
        };
        format!(
            "{phase}: rate not reached: {}; the filesystem or device did not keep up (scheduled_latency shows the queue it built), or lower {flag}",
            short.join(", ")
        )
    });
    (
        RateOutcome {
            unit: pace.unit.name().to_string(),
            workers,
        },
        warning,
    )
}

fn figure(v: f64, unit: RateUnit) -> String {
    match unit {
        RateUnit::Requests => format!("{v:.1} ops/s"),
        RateUnit::Bytes => format!("{}/s", format_size(v as u64)),
    }
}

/// One worker's schedule: the due time of each request, and the wait for it.
pub struct Pacer {
    clock: Clock,
    t0: Tick,
    /// Operation-clock ticks per unit of the rate.
    ticks_per_unit: f64,
    /// Units of the requests issued so far.
    units: u64,
    spin: u64,
    _slack: TimerSlack,
}

impl Pacer {
    /// Starts the schedule now: the first request is due at once.
    pub fn start(pace: Pace, clock: Clock) -> Self {
        let slack = TimerSlack::fine();
        Self {
            clock,
            t0: clock.now(),
            ticks_per_unit: clock.per_sec() as f64 / pace.per_sec,
            units: 0,
            spin: clock.ticks(Duration::from_nanos(SPIN_NS)),
            _slack: slack,
        }
    }

    /// When the schedule started.
    pub fn t0(&self) -> Tick {
        self.t0
    }

    /// The due time of the next request, which moves `units` (1 for a request rate, its bytes
    /// for a byte rate); the request after it is due that much later.
    #[inline]
    pub fn next(&mut self, units: u64) -> Tick {
        let due = Tick(
            self.t0
                .0
                .saturating_add((self.units as f64 * self.ticks_per_unit) as u64),
        );
        self.units += units;
        due
    }

    /// Waits until `due` (returns at once when it has passed). Returns false, without waiting
    /// on, as soon as `stop` says so; `stop` is asked between sleeps of at most 50 ms.
    pub fn wait(&self, due: Tick, mut stop: impl FnMut() -> bool) -> bool {
        loop {
            let now = self.clock.now();
            if now >= due {
                return true;
            }
            let left = due.0 - now.0;
            if left <= self.spin {
                while self.clock.now() < due {
                    std::hint::spin_loop();
                }
                return true;
            }
            let nap = Duration::from_nanos(self.clock.ns(Tick(0), Tick(left - self.spin)));
            sleep_for(nap.min(MAX_SLEEP));
            if stop() {
                return false;
            }
        }
    }
}

/// Sleeps `d` as an absolute CLOCK_MONOTONIC deadline (so an interrupted sleep resumes toward
/// the same instant).
fn sleep_for(d: Duration) {
    let Ok(now) = clock_gettime(ClockId::CLOCK_MONOTONIC) else {
        std::thread::sleep(d);
        return;
    };
    let until = now + TimeSpec::from_duration(d);
    while let Err(nix::errno::Errno::EINTR) = clock_nanosleep(
        ClockId::CLOCK_MONOTONIC,
        ClockNanosleepFlags::TIMER_ABSTIME,
        &until,
    ) {}
}

/// The calling thread's timer slack set to 1 ns while this lives (the default, 50 µs, would
/// make every wake-up that much late); the earlier value is restored on drop.
struct TimerSlack {
    before: Option<u64>,
}

impl TimerSlack {
    fn fine() -> Self {
        let before = nix::sys::prctl::get_timerslack().ok().map(|v| v as u64);
        if before.is_some() && nix::sys::prctl::set_timerslack(1).is_err() {
            return Self { before: None };
        }
        Self { before }
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if let Some(v) = self.before {
            let _ = nix::sys::prctl::set_timerslack(v);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn byte_rates_parse_with_or_without_per_second() {
        assert_eq!("10M/s".parse::<ByteRate>(), Ok(ByteRate(10 << 20)));
        assert_eq!("512K".parse::<ByteRate>(), Ok(ByteRate(512 << 10)));
        assert_eq!(" 1MiB/s ".parse::<ByteRate>(), Ok(ByteRate(1 << 20)));
        let e = "10Q/s".parse::<ByteRate>().unwrap_err();
        assert!(e.contains("10Q/s") && e.contains("unknown unit"), "{e}");
        assert!("fast".parse::<ByteRate>().is_err());
        assert!(iops("-3").is_err() && iops("x").is_err());
        assert_eq!(iops("2000"), Ok(2000.0));
        assert_eq!(ByteRate(10 << 20).to_string(), "10M/s");
    }

    #[test]
    fn zero_rates_and_both_rates_are_refused_naming_the_keys() {
        let zero = RateLimit {
            iops: Some(0.0),
            ..Default::default()
        };
        let e = zero.validate().unwrap_err();
        assert_eq!(crate::base::error::bad_fields(&e), ["rate_iops"]);
        assert!(e.to_string().contains("more than 0"), "{e}");
        let zero = RateLimit {
            bytes: Some(ByteRate(0)),
            ..Default::default()
        };
        assert_eq!(
            crate::base::error::bad_fields(&zero.validate().unwrap_err()),
            ["rate"]
        );
        let both = RateLimit {
            iops: Some(10.0),
            bytes: Some(ByteRate(4096)),
            ..Default::default()
        };
        let e = both.validate().unwrap_err();
        assert_eq!(crate::base::error::bad_fields(&e), ["rate_iops", "rate"]);
        assert!(RateLimit::default().validate().is_ok());
    }

    #[test]
    fn a_run_rate_is_split_over_the_workers() {
        let r = RateLimit {
            iops: Some(1000.0),
            ..Default::default()
        };
        assert_eq!(r.pace(4).unwrap().per_sec, 1000.0);
        let r = RateLimit {
            per: RatePer::Run,
            ..r
        };
        assert_eq!(r.pace(4).unwrap().per_sec, 250.0);
        let b = RateLimit {
            bytes: Some(ByteRate(1 << 20)),
            ..Default::default()
        };
        assert_eq!(b.pace(2).unwrap().unit, RateUnit::Bytes);
        assert_eq!(RateLimit::default().pace(2), None);
    }

    #[test]
    fn due_times_follow_the_rate_without_drift() {
        let clock = Clock::new(Instant::now());
        let mut p = Pacer::start(
            Pace {
                unit: RateUnit::Requests,
                per_sec: 1000.0,
            },
            clock,
        );
        let t0 = p.t0();
        let dues: Vec<Tick> = (0..5001).map(|_| p.next(1)).collect();
        assert_eq!(dues[0], t0);
        // Request 5000 is due 5 s after the start, to the tick's rounding.
        let ns = clock.ns(t0, dues[5000]);
        assert!((ns as i64 - 5_000_000_000).abs() < 1_000, "{ns}");
        // A byte rate: a request is due when the bytes before it are.
        let mut b = Pacer::start(
            Pace {
                unit: RateUnit::Bytes,
                per_sec: 4096.0,
            },
            clock,
        );
        let a = b.next(8192);
        let c = b.next(0);
        let ns = clock.ns(a, c);
        assert!((ns as i64 - 2_000_000_000).abs() < 1_000, "{ns}");
    }

    #[test]
    fn waiting_reaches_the_due_time_and_never_sleeps_past_a_stop() {
        let clock = Clock::new(Instant::now());
        let mut p = Pacer::start(
            Pace {
                unit: RateUnit::Requests,
                per_sec: 200.0,
            },
            clock,
        );
        // 20 requests at 200/s: the last is due 95 ms after the start; none is early.
        for _ in 0..20 {
            let due = p.next(1);
            assert!(p.wait(due, || false));
            assert!(clock.now() >= due);
        }
        let took = clock.ns(p.t0(), clock.now());
        assert!(took >= 95_000_000, "{took}");
        // A due time 10 s away: the stop is seen after the first nap.
        let far = Tick(clock.now().0 + clock.per_sec() * 10);
        let t = Instant::now();
        assert!(!p.wait(far, || true));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_worker_short_of_its_rate_is_named() {
        let pace = Pace {
            unit: RateUnit::Requests,
            per_sec: 1000.0,
        };
        let done = vec![
            Achieved {
                worker: 1,
                units: 600,
                seconds: 1.0,
            },
            Achieved {
                worker: 0,
                units: 2000,
                seconds: 2.0,
            },
        ];
        let (o, w) = outcome(pace, done, "randread-4K-t2");
        assert_eq!(o.unit, "ops/s");
        assert_eq!(o.workers[0].worker, 0);
        assert_eq!(o.workers[0].achieved, 1000.0);
        assert_eq!(o.workers[1].achieved, 600.0);
        let w = w.expect("a warning");
        assert!(
            w.contains("rate not reached") && w.contains("worker 1 600.0 ops/s of 1000.0 ops/s"),
            "{w}"
        );
        assert!(!w.contains("worker 0"), "{w}");
        let ok = vec![Achieved {
            worker: 0,
            units: 995,
            seconds: 1.0,
        }];
        assert!(
            outcome(pace, ok, "p").1.is_none(),
            "0.5 % short is within the 1 %"
        );
    }
}
