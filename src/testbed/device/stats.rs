//! What the device server counts: requests, bytes, cache hits, and histograms of lateness
//! (actual reply − modelled completion: the emulator's own error), service time, seek distance
//! and request size.
//!
//! Everything is cumulative since the server started; a [`Snapshot`] is a copy a client takes
//! at any moment (through the server's control pipe), and a phase's figures are the
//! [`Snapshot::delta`] of the snapshots at its end and start. Histograms travel as base64 HDR
//! V2 so a snapshot is one JSON line.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::model::{Dispatch, Op};
use crate::results::device::{HistogramSummary, ModelledIo};

pub use crate::results::device::LATE_NS;

/// The server's counters (cumulative, or a phase's as the difference of two).
pub use crate::results::device::DiskCounts as Counts;

/// The histograms the server keeps, by name (the order of [`Stats::histograms`]).
const HISTOGRAMS: [&str; N] = [
    "lateness",
    "service time",
    "response time",
    "seek distance",
    "request size",
    "emulator time",
];
const N: usize = 6;

/// The server's counters and histograms.
#[derive(Debug, Clone)]
pub struct Stats {
    pub counts: Counts,
    /// Actual reply − modelled completion, ns.
    pub lateness: Histogram<u64>,
    /// Modelled service time (completion − start), ns.
    pub service: Histogram<u64>,
    /// Modelled response time (completion − arrival), ns.
    pub response: Histogram<u64>,
    /// Cylinders moved per request (rotating disks).
    pub seek_cylinders: Histogram<u64>,
    /// Request sizes, bytes (reads and writes).
    pub size: Histogram<u64>,
    /// From a request's arrival until the model had it, ns: the emulator's own cost (its data
    /// copy and the hand-over to the timing thread), which must stay well below the modelled
    /// service times for the replies to be on time.
    pub emulator: Histogram<u64>,
    /// Writes (and zeroings) the image's own filesystem refused with ENOSPC: the backing
    /// store is full, not the emulated disk. Not a phase figure: a run that meets one fails.
    pub image_full: u64,
}

/// The largest value the histograms hold (10^13: about 2.8 hours in ns, any seek distance or
/// request size). The profiles' declared ranges keep every modelled service time below it
/// (`model::limits` tests it); a larger one would be recorded as this.
pub const HISTOGRAM_MAX: u64 = 10_000_000_000_000;

fn histogram() -> Histogram<u64> {
    // Fixed bounds, so that every snapshot has the same layout and deltas subtract bucket by
    // bucket.
    Histogram::new_with_bounds(1, HISTOGRAM_MAX, 3)
        .expect("bounds 1..1e13 at 3 significant figures are valid")
}

impl Default for Stats {
    fn default() -> Self {
        Stats::from_parts(Counts::default(), std::array::from_fn(|_| histogram()))
    }
}

impl Stats {
    fn from_parts(counts: Counts, h: [Histogram<u64>; N]) -> Stats {
        let [lateness, service, response, seek_cylinders, size, emulator] = h;
        Stats {
            counts,
            lateness,
            service,
            response,
            seek_cylinders,
            size,
            emulator,
            image_full: 0,
        }
    }

    /// The histograms, in the order of [`HISTOGRAMS`].
    fn histograms(&self) -> [&Histogram<u64>; N] {
        [
            &self.lateness,
            &self.service,
            &self.response,
            &self.seek_cylinders,
            &self.size,
            &self.emulator,
        ]
    }

    /// Counts one answered request: its dispatch, its size, when the reply went out, and the
    /// emulator's own time on it.
    pub fn record(
        &mut self,
        d: &Dispatch,
        len: u64,
        replied_ns: u64,
        failed: bool,
        emulator_ns: u64,
    ) {
        let c = &mut self.counts;
        match d.op {
            Op::Read => {
                c.reads += 1;
                c.bytes_read += len;
            }
            Op::Write => {
                c.writes += 1;
                c.bytes_written += len;
            }
            Op::Flush => c.flushes += 1,
        }
        if failed {
            c.errors += 1;
        }
        if d.breakdown.cache_hit {
            c.cache_hits += 1;
        }
        if replied_ns < d.done_ns {
            c.early += 1;
        }
        let late = replied_ns.saturating_sub(d.done_ns);
        if late > LATE_NS {
            c.late += 1;
        }
        self.lateness.saturating_record(late);
        self.service.saturating_record(d.service_ns());
        self.response.saturating_record(d.response_ns());
        self.emulator.saturating_record(emulator_ns);
        if d.op != Op::Flush {
            self.seek_cylinders
                .saturating_record(d.breakdown.seek_cylinders);
            self.size.saturating_record(len);
        }
    }

    /// Counts a request answered at native speed, the model being off.
    pub fn record_unmodelled(&mut self, failed: bool) {
        self.counts.unmodelled += 1;
        if failed {
            self.counts.errors += 1;
        }
    }

    /// The requests answered under the model.
    pub fn requests(&self) -> u64 {
        self.counts.reads + self.counts.writes + self.counts.flushes
    }

    /// A copy to send: counters as they are, histograms encoded.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: self.counts,
            histograms: self.histograms().map(encode).to_vec(),
            image_full: self.image_full,
            memory_budget: 0,
        }
    }

    /// The record a result keeps of a phase (these stats being the phase's delta).
    pub fn record_of_phase(&self) -> ModelledIo {
        let c = &self.counts;
        let l = self.lateness();
        ModelledIo {
            counts: *c,
            lateness_p50_ms: l.p50_ms,
            lateness_p99_ms: l.p99_ms,
            lateness_max_ms: l.max_ms,
            service_ns: summary(&self.service),
            response_ns: summary(&self.response),
            seek_cylinders: summary(&self.seek_cylinders),
            size_bytes: summary(&self.size),
            emulator_ns: summary(&self.emulator),
        }
    }
}

fn summary(h: &Histogram<u64>) -> HistogramSummary {
    if h.is_empty() {
        return HistogramSummary::default();
    }
    HistogramSummary {
        count: h.len(),
        mean: h.mean(),
        p50: h.value_at_quantile(0.5) as f64,
        p99: h.value_at_quantile(0.99) as f64,
        max: h.max() as f64,
        hdr: encode(h),
    }
}

fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2Serializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(&buf),
        Err(_) => String::new(),
    }
}

fn decode(s: &str) -> Result<Histogram<u64>, String> {
    if s.is_empty() {
        return Ok(histogram());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram does not decode: {e:?}"))
}

/// The server's stats at one moment, as sent over the control pipe (one JSON line): the
/// counters, and the histograms in the order of [`HISTOGRAMS`], encoded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(flatten)]
    pub counts: Counts,
    pub histograms: Vec<String>,
    /// [`Stats::image_full`] (absent from an older server's line: none).
    #[serde(default)]
    pub image_full: u64,
    /// The most bytes the server holds the disk's contents in memory, its ENOSPC limit; 0
    /// when they are on the host disk (its free space is the limit).
    #[serde(default)]
    pub memory_budget: u64,
}

impl Snapshot {
    /// Back to counters and histograms.
    pub fn decode(&self) -> Result<Stats, String> {
        if self.histograms.len() != HISTOGRAMS.len() {
            return Err(format!(
                "a snapshot has {} histograms, not {}: the server is of another version",
                self.histograms.len(),
                HISTOGRAMS.len()
            ));
        }
        let mut h = Vec::with_capacity(HISTOGRAMS.len());
        for text in &self.histograms {
            h.push(decode(text)?);
        }
        let h: [Histogram<u64>; N] = h.try_into().map_err(|_| "six histograms".to_string())?;
        let mut s = Stats::from_parts(self.counts, h);
        s.image_full = self.image_full;
        Ok(s)
    }

    /// What happened between `earlier` and this snapshot (both from the same server).
    pub fn delta(&self, earlier: &Snapshot) -> Result<Stats, String> {
        let later = self.decode()?;
        let before = earlier.decode()?;
        let counts = later.counts.since(&before.counts)?;
        let mut out = Vec::with_capacity(HISTOGRAMS.len());
        for ((what, mut x), y) in HISTOGRAMS
            .into_iter()
            .zip(later.histograms().map(Clone::clone))
            .zip(before.histograms())
        {
            x.subtract(y).map_err(|e| {
                format!(
                    "{what} histogram of the earlier snapshot is not part of the later one: {e:?}"
                )
            })?;
            out.push(x);
        }
        let h: [Histogram<u64>; N] = out.try_into().map_err(|_| "six histograms".to_string())?;
        let mut s = Stats::from_parts(counts, h);
        s.image_full = later.image_full.saturating_sub(before.image_full);
        Ok(s)
    }
}

/// Lateness of a set of requests, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Lateness {
    pub requests: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Requests later than 0.5 ms.
    pub late: u64,
    /// Requests answered before their modelled completion (0 unless the server is broken).
    pub early: u64,
}

impl Stats {
    /// The lateness percentiles.
    pub fn lateness(&self) -> Lateness {
        let ms = |ns: u64| ns as f64 / 1e6;
        if self.lateness.is_empty() {
            return Lateness::default();
        }
        Lateness {
            requests: self.lateness.len(),
            p50_ms: ms(self.lateness.value_at_quantile(0.5)),
            p99_ms: ms(self.lateness.value_at_quantile(0.99)),
            max_ms: ms(self.lateness.max()),
            late: self.counts.late,
            early: self.counts.early,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::device::model::Breakdown;

    fn dispatch(op: Op, arrival: u64, start: u64, done: u64, hit: bool) -> Dispatch {
        Dispatch {
            id: 0,
            op,
            arrival_ns: arrival,
            start_ns: start,
            done_ns: done,
            breakdown: Breakdown {
                cache_hit: hit,
                seek_cylinders: 10,
                ..Breakdown::default()
            },
        }
    }

    #[test]
    fn record_counts_requests_bytes_hits_and_lateness() {
        let mut s = Stats::default();
        s.record(
            &dispatch(Op::Read, 0, 100, 1_000_000, false),
            4096,
            1_010_000,
            false,
            7_000,
        );
        s.record(
            &dispatch(Op::Write, 0, 0, 2_000_000, true),
            8192,
            2_600_000,
            false,
            0,
        );
        s.record(
            &dispatch(Op::Flush, 0, 0, 3_000_000, false),
            0,
            3_000_000,
            false,
            0,
        );
        assert_eq!(
            (s.counts.reads, s.counts.writes, s.counts.flushes),
            (1, 1, 1)
        );
        assert_eq!((s.counts.bytes_read, s.counts.bytes_written), (4096, 8192));
        assert_eq!(s.counts.cache_hits, 1);
        // Only the write was over 0.5 ms late.
        assert_eq!(s.counts.late, 1);
        let l = s.lateness();
        assert_eq!(l.requests, 3);
        assert!((l.max_ms - 0.6).abs() < 0.001, "max {}", l.max_ms);
        assert!((l.p50_ms - 0.01).abs() < 0.001, "p50 {}", l.p50_ms);
        // A flush has no size and no seek.
        assert_eq!(s.size.len(), 2);
        // The emulator's own time is kept per request, and reaches the phase's record.
        let e = s.record_of_phase().emulator_ns;
        assert_eq!(e.count, 3);
        assert!((e.max - 7_000.0).abs() < 10.0, "max {}", e.max);
    }

    #[test]
    fn a_reply_before_the_modelled_completion_is_early_not_late() {
        let mut s = Stats::default();
        s.record(
            &dispatch(Op::Read, 0, 0, 5_000, false),
            4096,
            4_000,
            false,
            0,
        );
        assert_eq!(s.lateness.max(), 0);
        assert_eq!(s.counts.late, 0);
        // ... but is counted as early: the server must never do it.
        assert_eq!(s.counts.early, 1);
        assert_eq!(s.lateness().early, 1);
    }

    #[test]
    fn delta_of_snapshots_is_what_happened_between_them() {
        let mut s = Stats::default();
        s.record(
            &dispatch(Op::Read, 0, 0, 1_000, false),
            4096,
            2_000_000,
            false,
            0,
        );
        let before = s.snapshot();
        for i in 0..10 {
            s.record(
                &dispatch(Op::Read, 0, 0, 1_000, false),
                4096,
                1_000 + i * 1000,
                false,
                0,
            );
        }
        let after = s.snapshot();
        // Round trip through JSON, as over the control pipe.
        let line = serde_json::to_string(&after).expect("serializes");
        let after: Snapshot = serde_json::from_str(&line).expect("parses");
        let d = after.delta(&before).expect("delta");
        assert_eq!(d.counts.reads, 10);
        assert_eq!(d.counts.bytes_read, 40960);
        assert_eq!(d.counts.late, 0);
        assert_eq!(d.lateness.len(), 10);
        // The 2 ms request of the first phase is not in the second's lateness.
        assert!(d.lateness.max() < 20_000, "max {}", d.lateness.max());
    }

    #[test]
    fn delta_from_an_empty_start_keeps_the_values() {
        // A phase starting with the server: the earlier snapshot is of empty histograms.
        let mut s = Stats::default();
        let start = s.snapshot();
        for i in 1..=1000u64 {
            s.record(
                &dispatch(Op::Read, 0, 0, 0, false),
                4096,
                i * 1000,
                false,
                0,
            );
        }
        let d = s.snapshot().delta(&start).expect("delta");
        let l = d.lateness();
        assert!((l.max_ms - 1.0).abs() < 0.01, "max {} ms", l.max_ms);
        assert!((l.p50_ms - 0.5).abs() < 0.01, "p50 {} ms", l.p50_ms);
    }

    #[test]
    fn delta_refuses_snapshots_out_of_order() {
        let mut s = Stats::default();
        let empty = s.snapshot();
        s.record(&dispatch(Op::Read, 0, 0, 1, false), 4096, 1, false, 0);
        let later = s.snapshot();
        let e = empty.delta(&later).expect_err("out of order");
        assert!(e.contains("out of order"), "{e}");
    }
}
