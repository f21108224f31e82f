//! The one timed request loop of calibration: every micro-benchmark of `devices check` is a
//! request issued again and again for a time box, each timed on [`crate::measure`]'s operation
//! clock and recorded by its [`crate::measure::Recorder`] like a workload's operations (count, bytes, latency
//! histogram, wall time), with each request's own time kept as well: the model replays the
//! same requests, and the demerit compares the two request by request.

use std::time::Duration;

use anyhow::Result;

use crate::measure::{Devices, OpDef, PhaseMeter, Progress};
use crate::results::PhaseResult;

/// The operation kind every calibration loop records.
const REQUEST: OpDef = OpDef::primary("request");

/// What a timed loop measured.
#[derive(Debug, Clone)]
pub struct Timed {
    /// Each request's time, ns, in the order issued.
    pub times: Vec<u64>,
    /// The loop as a measured phase: requests, bytes, wall time, the latency histogram.
    pub phase: PhaseResult,
}

impl Timed {
    /// Requests made.
    pub fn requests(&self) -> u64 {
        self.phase.ops
    }

    /// The mean request time, ms (exact, from every request's time; 0 without requests).
    pub fn mean_ms(&self) -> f64 {
        self.times.iter().sum::<u64>() as f64 / self.times.len().max(1) as f64 / 1e6
    }

    /// The bytes moved over the loop's wall time, MB/s.
    pub fn rate_mb_s(&self) -> f64 {
        self.phase.bytes as f64 / self.phase.wall_s.max(1e-9) / 1e6
    }

    /// A percentile of the request times from the recorder's histogram, ms (None without
    /// requests).
    pub fn percentile_ms(&self, p: Percentile) -> Option<f64> {
        let l = &self.phase.latency;
        let ns = match p {
            Percentile::P50 => l.p50_ns,
            Percentile::P99 => l.p99_ns,
        };
        (l.count > 0).then(|| ns as f64 / 1e6)
    }
}

/// The percentiles a benchmark shows.
#[derive(Debug, Clone, Copy)]
pub enum Percentile {
    P50,
    P99,
}

/// Issues `request` again and again until `seconds` have passed on the operation clock, or
/// until it returns `Ok(None)` (no request left); each call is one request, timed from before
/// the call to after it, moving the bytes it returns. The first error ends the loop.
pub fn run(
    name: &str,
    seconds: f64,
    mut request: impl FnMut() -> Result<Option<u64>>,
) -> Result<Timed> {
    let meter = PhaseMeter::start(
        name,
        &[REQUEST],
        &Devices::default(),
        None,
        &Progress::hidden(),
    );
    let mut rec = meter.recorder(0);
    let op = rec.op(REQUEST.name);
    let clock = rec.clock();
    let end = clock
        .now()
        .0
        .saturating_add(clock.ticks(Duration::from_secs_f64(seconds.max(0.0))));
    let mut times = Vec::new();
    loop {
        let t0 = clock.now();
        if t0.0 >= end {
            break;
        }
        let Some(bytes) = request()? else { break };
        let t1 = clock.now();
        rec.span(op, t0, t1, bytes);
        times.push(clock.ns(t0, t1));
    }
    Ok(Timed {
        times,
        phase: meter.finish(vec![rec]),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_counts_each_request_its_bytes_and_its_time_once() {
        let mut left = 5u64;
        let t = run("t", 3600.0, || {
            if left == 0 {
                return Ok(None);
            }
            left -= 1;
            std::thread::sleep(Duration::from_micros(200));
            Ok(Some(4096))
        })
        .unwrap();
        assert_eq!(t.requests(), 5);
        assert_eq!(t.times.len(), 5);
        assert_eq!(t.phase.bytes, 5 * 4096);
        assert_eq!(t.phase.latency.count, 5);
        // Each request slept at least 200 µs (less 5% for a TSC calibrated against the
        // monotonic clock), and the recorder saw the same times.
        assert!(t.times.iter().all(|&ns| ns >= 190_000), "{:?}", t.times);
        assert!(t.mean_ms() >= 0.19);
        let max = *t.times.iter().max().unwrap();
        let p99 = t.percentile_ms(Percentile::P99).unwrap();
        assert!(
            (p99 - max as f64 / 1e6).abs() <= max as f64 / 1e6 * 0.01,
            "{p99} vs {max}"
        );
    }

    #[test]
    fn an_error_ends_the_loop_and_is_returned() {
        let mut n = 0;
        let e = run("t", 3600.0, || {
            n += 1;
            if n == 3 {
                anyhow::bail!("the third request failed");
            }
            Ok(Some(1))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "the third request failed");
        assert_eq!(n, 3);
    }

    #[test]
    fn a_spent_time_box_makes_no_request() {
        let t = run("t", 0.0, || panic!("no request may be made")).unwrap();
        assert_eq!(t.requests(), 0);
        assert_eq!(t.mean_ms(), 0.0);
        assert_eq!(t.percentile_ms(Percentile::P50), None);
    }
}
