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

/// Lateness above which a phase is flagged: the emulator could not keep up (DEVICES.md).
pub const LATE_NS: u64 = 500_000;

/// The server's counters and histograms.
#[derive(Debug, Clone)]
pub struct Stats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests the drive's cache served (read-ahead, dirty data, or into the write cache).
    pub cache_hits: u64,
    /// Requests answered more than [`LATE_NS`] after their modelled completion.
    pub late: u64,
    /// Requests that failed on the image (answered with an error).
    pub errors: u64,
    /// Requests answered before their modelled completion: a broken server (the lateness
    /// histogram holds them as 0).
    pub early: u64,
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
}

fn histogram() -> Histogram<u64> {
    // Fixed bounds (1 to 10^13: an hour in ns, any seek distance or request size), so that
    // every snapshot has the same layout and deltas subtract bucket by bucket.
    Histogram::new_with_bounds(1, 10_000_000_000_000, 3)
        .expect("bounds 1..1e13 at 3 significant figures are valid")
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            reads: 0,
            writes: 0,
            flushes: 0,
            bytes_read: 0,
            bytes_written: 0,
            cache_hits: 0,
            late: 0,
            errors: 0,
            early: 0,
            lateness: histogram(),
            service: histogram(),
            response: histogram(),
            seek_cylinders: histogram(),
            size: histogram(),
        }
    }
}

impl Stats {
    /// Counts one answered request: its dispatch, its size, and when the reply went out.
    pub fn record(&mut self, d: &Dispatch, len: u64, replied_ns: u64, failed: bool) {
        match d.op {
            Op::Read => {
                self.reads += 1;
                self.bytes_read += len;
            }
            Op::Write => {
                self.writes += 1;
                self.bytes_written += len;
            }
            Op::Flush => self.flushes += 1,
        }
        if failed {
            self.errors += 1;
        }
        if d.breakdown.cache_hit {
            self.cache_hits += 1;
        }
        if replied_ns < d.done_ns {
            self.early += 1;
        }
        let late = replied_ns.saturating_sub(d.done_ns);
        if late > LATE_NS {
            self.late += 1;
        }
        self.lateness.saturating_record(late);
        self.service.saturating_record(d.service_ns());
        self.response.saturating_record(d.response_ns());
        if d.op != Op::Flush {
            self.seek_cylinders
                .saturating_record(d.breakdown.seek_cylinders);
            self.size.saturating_record(len);
        }
    }

    /// The requests answered.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes + self.flushes
    }

    /// A copy to send: counters as they are, histograms encoded.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            reads: self.reads,
            writes: self.writes,
            flushes: self.flushes,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            cache_hits: self.cache_hits,
            late: self.late,
            errors: self.errors,
            early: self.early,
            lateness: encode(&self.lateness),
            service: encode(&self.service),
            response: encode(&self.response),
            seek_cylinders: encode(&self.seek_cylinders),
            size: encode(&self.size),
        }
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

/// The server's stats at one moment, as sent over the control pipe (one JSON line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub cache_hits: u64,
    pub late: u64,
    pub errors: u64,
    #[serde(default)]
    pub early: u64,
    pub lateness: String,
    pub service: String,
    pub response: String,
    pub seek_cylinders: String,
    pub size: String,
}

impl Snapshot {
    /// Back to counters and histograms.
    pub fn decode(&self) -> Result<Stats, String> {
        Ok(Stats {
            reads: self.reads,
            writes: self.writes,
            flushes: self.flushes,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            cache_hits: self.cache_hits,
            late: self.late,
            errors: self.errors,
            early: self.early,
            lateness: decode(&self.lateness)?,
            service: decode(&self.service)?,
            response: decode(&self.response)?,
            seek_cylinders: decode(&self.seek_cylinders)?,
            size: decode(&self.size)?,
        })
    }

    /// What happened between `earlier` and this snapshot (both from the same server).
    pub fn delta(&self, earlier: &Snapshot) -> Result<Stats, String> {
        let a = self.decode()?;
        let b = earlier.decode()?;
        let sub = |mut x: Histogram<u64>, y: &Histogram<u64>, what: &str| {
            x.subtract(y).map_err(|e| {
                format!(
                    "{what} histogram of the earlier snapshot is not part of the later one: {e:?}"
                )
            })?;
            Ok::<_, String>(x)
        };
        let less = |x: u64, y: u64, what: &str| {
            x.checked_sub(y).ok_or_else(|| {
                format!("{what} went down from {y} to {x}: the snapshots are from different servers or out of order")
            })
        };
        Ok(Stats {
            reads: less(a.reads, b.reads, "reads")?,
            writes: less(a.writes, b.writes, "writes")?,
            flushes: less(a.flushes, b.flushes, "flushes")?,
            bytes_read: less(a.bytes_read, b.bytes_read, "bytes read")?,
            bytes_written: less(a.bytes_written, b.bytes_written, "bytes written")?,
            cache_hits: less(a.cache_hits, b.cache_hits, "cache hits")?,
            late: less(a.late, b.late, "late requests")?,
            errors: less(a.errors, b.errors, "errors")?,
            early: less(a.early, b.early, "early replies")?,
            lateness: sub(a.lateness, &b.lateness, "lateness")?,
            service: sub(a.service, &b.service, "service time")?,
            response: sub(a.response, &b.response, "response time")?,
            seek_cylinders: sub(a.seek_cylinders, &b.seek_cylinders, "seek distance")?,
            size: sub(a.size, &b.size, "request size")?,
        })
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
            late: self.late,
            early: self.early,
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
        );
        s.record(
            &dispatch(Op::Write, 0, 0, 2_000_000, true),
            8192,
            2_600_000,
            false,
        );
        s.record(
            &dispatch(Op::Flush, 0, 0, 3_000_000, false),
            0,
            3_000_000,
            false,
        );
        assert_eq!((s.reads, s.writes, s.flushes), (1, 1, 1));
        assert_eq!((s.bytes_read, s.bytes_written), (4096, 8192));
        assert_eq!(s.cache_hits, 1);
        // Only the write was over 0.5 ms late.
        assert_eq!(s.late, 1);
        let l = s.lateness();
        assert_eq!(l.requests, 3);
        assert!((l.max_ms - 0.6).abs() < 0.001, "max {}", l.max_ms);
        assert!((l.p50_ms - 0.01).abs() < 0.001, "p50 {}", l.p50_ms);
        // A flush has no size and no seek.
        assert_eq!(s.size.len(), 2);
    }

    #[test]
    fn a_reply_before_the_modelled_completion_is_early_not_late() {
        let mut s = Stats::default();
        s.record(&dispatch(Op::Read, 0, 0, 5_000, false), 4096, 4_000, false);
        assert_eq!(s.lateness.max(), 0);
        assert_eq!(s.late, 0);
        // ... but is counted as early: the server must never do it.
        assert_eq!(s.early, 1);
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
        );
        let before = s.snapshot();
        for i in 0..10 {
            s.record(
                &dispatch(Op::Read, 0, 0, 1_000, false),
                4096,
                1_000 + i * 1000,
                false,
            );
        }
        let after = s.snapshot();
        // Round trip through JSON, as over the control pipe.
        let line = serde_json::to_string(&after).expect("serializes");
        let after: Snapshot = serde_json::from_str(&line).expect("parses");
        let d = after.delta(&before).expect("delta");
        assert_eq!(d.reads, 10);
        assert_eq!(d.bytes_read, 40960);
        assert_eq!(d.late, 0);
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
            s.record(&dispatch(Op::Read, 0, 0, 0, false), 4096, i * 1000, false);
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
        s.record(&dispatch(Op::Read, 0, 0, 1, false), 4096, 1, false);
        let later = s.snapshot();
        let e = empty.delta(&later).expect_err("out of order");
        assert!(e.contains("out of order"), "{e}");
    }
}
