//! What the device server counts: requests, bytes, cache hits, and histograms of lateness
//! (actual reply − modelled completion: the emulator's own error), service time, seek distance
//! and request size.
//!
//! Everything is cumulative since the server started; a [`Snapshot`] is a copy a client takes
//! at any moment (through the server's control pipe), and a phase's figures are the
//! [`Snapshot::delta`] of the snapshots at its end and start. The histograms are `measure`'s
//! (3 significant digits, up to [`HISTOGRAM_MAX`]) and travel in its encoding
//! ([`crate::measure::encode`]), so a snapshot is one JSON line and a result's device
//! histograms read back as its latency histograms do ([`crate::measure::decode_text`]).

use std::ops::{Index, IndexMut};

use serde::{Deserialize, Serialize};

use super::model::{Dispatch, Op};
use crate::measure::{decode_text, encode, histogram_up_to, LatencyHistogram};
use crate::results::device::{HistogramSummary, ModelledIo};

pub use crate::results::device::LATE_NS;

/// The server's counters (cumulative, or a phase's as the difference of two).
pub use crate::results::device::DiskCounts as Counts;

/// The largest value the histograms hold (10^13: about 2.8 hours in ns, any seek distance or
/// request size): the longest time the model gives a request ([`crate::device::model::LONGEST_NS`],
/// past measure's hour); a larger one would be recorded as this.
pub const HISTOGRAM_MAX: u64 = crate::device::model::LONGEST_NS;

fn histogram() -> LatencyHistogram {
    histogram_up_to(HISTOGRAM_MAX)
}

crate::choice! {
    /// The histograms the server keeps, named once: each one's place in [`Histograms`] and in
    /// a [`Snapshot`]'s list ([`Hist::ALL`]'s order), and its name in messages.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Hist("device histogram") {
        /// Actual reply − modelled completion, ns.
        Lateness = "lateness",
        /// Modelled service time (completion − start), ns.
        Service = "service time",
        /// Modelled response time (completion − arrival), ns.
        Response = "response time",
        /// Cylinders moved per request (rotating disks).
        SeekCylinders = "seek distance",
        /// Request sizes, bytes (reads and writes).
        Size = "request size",
        /// From a request's arrival until the model had it, ns: the emulator's own cost (its
        /// data copy and the hand-over to the timing thread), which must stay well below the
        /// modelled service times for the replies to be on time.
        Emulator = "emulator time",
    }
}

/// One histogram of each [`Hist`].
#[derive(Debug, Clone)]
pub struct Histograms([LatencyHistogram; Hist::ALL.len()]);

impl Default for Histograms {
    fn default() -> Self {
        Histograms(std::array::from_fn(|_| histogram()))
    }
}

impl Index<Hist> for Histograms {
    type Output = LatencyHistogram;
    fn index(&self, k: Hist) -> &LatencyHistogram {
        &self.0[k as usize]
    }
}

impl IndexMut<Hist> for Histograms {
    fn index_mut(&mut self, k: Hist) -> &mut LatencyHistogram {
        &mut self.0[k as usize]
    }
}

impl Histograms {
    /// Each histogram encoded, in [`Hist::ALL`]'s order.
    fn encoded(&self) -> Vec<String> {
        Hist::ALL.iter().map(|&k| encode(&self[k])).collect()
    }

    /// The histograms of a snapshot's list (in [`Hist::ALL`]'s order; "" is an empty one).
    fn decoded(texts: &[String]) -> Result<Histograms, String> {
        if texts.len() != Hist::ALL.len() {
            return Err(format!(
                "a snapshot has {} histograms, not {}: the server is of another version",
                texts.len(),
                Hist::ALL.len()
            ));
        }
        let mut out = Histograms::default();
        for (&k, text) in Hist::ALL.iter().zip(texts) {
            if text.is_empty() {
                continue;
            }
            let h = decode_text(text)
                .ok_or_else(|| format!("the {} histogram does not decode", k.name()))?;
            // Into the standard layout, so that two snapshots subtract bucket by bucket.
            out[k]
                .add(&h)
                .map_err(|e| format!("the {} histogram is out of range: {e:?}", k.name()))?;
        }
        Ok(out)
    }

    /// What was recorded between `earlier` and these histograms, each bucket by bucket.
    fn since(&self, earlier: &Histograms) -> Result<Histograms, String> {
        let mut out = self.clone();
        for k in Hist::ALL {
            out[k].subtract(&earlier[k]).map_err(|e| {
                format!(
                    "{} histogram of the earlier snapshot is not part of the later one: {e:?}",
                    k.name()
                )
            })?;
        }
        Ok(out)
    }
}

/// Whether a reply late by `late_ns`, `held_off_ns` of it while the machine held the server's
/// timing thread off its CPU past the wake-up it had asked for, is the machine's: most of its
/// lateness is.
fn late_is_machines(late_ns: u64, held_off_ns: u64) -> bool {
    held_off_ns > 0 && held_off_ns.saturating_mul(2) >= late_ns
}

/// How far the disk's own clock ([`super::model::clock`]) fell behind the wall, and how many
/// times it stopped: cumulative, or a phase's as the difference of two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockCounts {
    #[serde(default)]
    pub pause_ns: u64,
    #[serde(default)]
    pub pauses: u64,
}

impl ClockCounts {
    /// A reply stopped the clock for `ns` (0: it was on time).
    pub fn paused(&mut self, ns: u64) {
        if ns > 0 {
            self.pause_ns += ns;
            self.pauses += 1;
        }
    }

    /// What happened between `earlier` and these counts.
    fn since(&self, earlier: &ClockCounts) -> Result<ClockCounts, String> {
        let down = |what: &str, x: u64, y: u64| {
            x.checked_sub(y).ok_or_else(|| {
                format!("the disk clock's {what} went down from {y} to {x}: the snapshots are from different servers or out of order")
            })
        };
        Ok(ClockCounts {
            pause_ns: down("pause", self.pause_ns, earlier.pause_ns)?,
            pauses: down("stops", self.pauses, earlier.pauses)?,
        })
    }
}

/// The server's counters and histograms.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub counts: Counts,
    /// The disk clock's pause.
    pub clock: ClockCounts,
    pub hist: Histograms,
    /// Writes (and zeroings) the image's own filesystem refused with ENOSPC: the backing
    /// store is full, not the emulated disk. Not a phase figure: a run that meets one fails.
    pub image_full: u64,
}

impl Stats {
    /// Counts one answered request: its dispatch, its size, when the reply went out, the
    /// emulator's own time on it, and how much of its lateness the machine held the server's
    /// timing thread off its CPU.
    pub fn record(
        &mut self,
        d: &Dispatch,
        len: u64,
        replied_ns: u64,
        failed: bool,
        emulator_ns: u64,
        held_off_ns: u64,
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
            if late_is_machines(late, held_off_ns) {
                c.late_held_off += 1;
            }
        }
        let h = &mut self.hist;
        h[Hist::Lateness].saturating_record(late);
        h[Hist::Service].saturating_record(d.service_ns());
        h[Hist::Response].saturating_record(d.response_ns());
        h[Hist::Emulator].saturating_record(emulator_ns);
        if d.op != Op::Flush {
            h[Hist::SeekCylinders].saturating_record(d.breakdown.seek_cylinders);
            h[Hist::Size].saturating_record(len);
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
        self.counts.requests()
    }

    /// A copy to send: counters as they are, histograms encoded.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            counts: self.counts,
            clock: self.clock,
            histograms: self.hist.encoded(),
            image_full: self.image_full,
            memory_budget: 0,
        }
    }

    /// The record a result keeps of a phase (these stats being the phase's delta).
    pub fn record_of_phase(&self) -> ModelledIo {
        let l = self.lateness();
        let summary = |k: Hist| summary(&self.hist[k]);
        ModelledIo {
            counts: self.counts,
            lateness_p50_ms: l.p50_ms,
            lateness_p99_ms: l.p99_ms,
            lateness_max_ms: l.max_ms,
            service_ns: summary(Hist::Service),
            response_ns: summary(Hist::Response),
            seek_cylinders: summary(Hist::SeekCylinders),
            size_bytes: summary(Hist::Size),
            emulator_ns: summary(Hist::Emulator),
            pause_ns: self.clock.pause_ns,
            pauses: self.clock.pauses,
        }
    }
}

fn summary(h: &LatencyHistogram) -> HistogramSummary {
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

/// The server's stats at one moment, as sent over the control pipe (one JSON line): the
/// counters, and the histograms in the order of [`Hist::ALL`], encoded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(flatten)]
    pub counts: Counts,
    /// The disk clock's pause (absent from an older server's line: none).
    #[serde(flatten)]
    pub clock: ClockCounts,
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
        Ok(Stats {
            counts: self.counts,
            clock: self.clock,
            hist: Histograms::decoded(&self.histograms)?,
            image_full: self.image_full,
        })
    }

    /// What happened between `earlier` and this snapshot (both from the same server).
    pub fn delta(&self, earlier: &Snapshot) -> Result<Stats, String> {
        let later = self.decode()?;
        let before = earlier.decode()?;
        Ok(Stats {
            counts: later.counts.since(&before.counts)?,
            clock: later.clock.since(&before.clock)?,
            hist: later.hist.since(&before.hist)?,
            image_full: later.image_full.saturating_sub(before.image_full),
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
    /// How far the disk's own clock fell behind the wall meanwhile, ms, and in how many stops.
    #[serde(default)]
    pub pause_ms: f64,
    #[serde(default)]
    pub pauses: u64,
}

impl Stats {
    /// The lateness percentiles.
    pub fn lateness(&self) -> Lateness {
        let ms = |ns: u64| ns as f64 / 1e6;
        let h = &self.hist[Hist::Lateness];
        if h.is_empty() {
            return Lateness::default();
        }
        Lateness {
            requests: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            late: self.counts.late,
            early: self.counts.early,
            pause_ms: ms(self.clock.pause_ns),
            pauses: self.clock.pauses,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::model::Breakdown;

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
            0,
        );
        s.record(
            &dispatch(Op::Write, 0, 0, 2_000_000, true),
            8192,
            2_600_000,
            false,
            0,
            0,
        );
        s.record(
            &dispatch(Op::Flush, 0, 0, 3_000_000, false),
            0,
            3_000_000,
            false,
            0,
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
        assert_eq!(s.hist[Hist::Size].len(), 2);
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
            0,
        );
        assert_eq!(s.hist[Hist::Lateness].max(), 0);
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
            0,
        );
        s.clock.paused(1_999_000);
        let before = s.snapshot();
        for i in 0..10 {
            s.record(
                &dispatch(Op::Read, 0, 0, 1_000, false),
                4096,
                1_000 + i * 1000,
                false,
                0,
                0,
            );
            s.clock.paused(i * 1000);
        }
        let after = s.snapshot();
        // Round trip through JSON, as over the control pipe.
        let line = serde_json::to_string(&after).expect("serializes");
        let after: Snapshot = serde_json::from_str(&line).expect("parses");
        let d = after.delta(&before).expect("delta");
        assert_eq!(d.counts.reads, 10);
        assert_eq!(d.counts.bytes_read, 40960);
        assert_eq!(d.counts.late, 0);
        assert_eq!(d.hist[Hist::Lateness].len(), 10);
        // The 2 ms request of the first phase is not in the second's lateness.
        let max = d.hist[Hist::Lateness].max();
        assert!(max < 20_000, "max {max}");
        // The disk clock's pause over the phase: its own stops only (9 late replies).
        assert_eq!((d.clock.pause_ns, d.clock.pauses), (45_000, 9));
        let r = d.record_of_phase();
        assert_eq!((r.pause_ns, r.pauses), (45_000, 9));
        assert!(before.delta(&after).is_err(), "out of order");
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
                0,
            );
        }
        let d = s.snapshot().delta(&start).expect("delta");
        let l = d.lateness();
        assert!((l.max_ms - 1.0).abs() < 0.01, "max {} ms", l.max_ms);
        assert!((l.p50_ms - 0.5).abs() < 0.01, "p50 {} ms", l.p50_ms);
    }

    #[test]
    fn a_phase_keeps_measures_histograms_in_measures_encoding() {
        let mut s = Stats::default();
        for i in 1..=100u64 {
            s.record(
                &dispatch(Op::Read, 0, 0, i * 10_000, false),
                4096,
                i * 10_000,
                false,
                0,
                0,
            );
        }
        let phase = s.snapshot().delta(&Stats::default().snapshot()).unwrap();
        let service = phase.record_of_phase().service_ns;
        let back = decode_text(&service.hdr).expect("measure decodes it");
        // Measure's layout, past its hour: the slowest profile's flush fits.
        assert_eq!(
            (back.low(), back.high(), back.sigfig()),
            (1, HISTOGRAM_MAX, 3)
        );
        assert_eq!(back.len(), 100);
        assert_eq!(back.value_at_quantile(0.99) as f64, service.p99);
        // Each histogram in its named place: 100 requests of 4096 bytes, none seeking.
        let size = &phase.hist[Hist::Size];
        assert!(size.equivalent(size.max(), 4096), "{}", size.max());
        assert_eq!(phase.hist[Hist::SeekCylinders].len(), 100);
        assert_eq!(phase.hist[Hist::Emulator].max(), 0);
        assert_eq!(phase.requests(), 100);
    }

    #[test]
    fn a_snapshot_whose_histogram_does_not_decode_names_it() {
        crate::base::choice::testing::one_set_of_names::<Hist>();
        let mut snap = Stats::default().snapshot();
        snap.histograms[Hist::Response as usize] = "bm90IGEgaGlzdG9ncmFt".into();
        let e = snap.decode().expect_err("not a histogram");
        assert!(e.contains("the response time histogram"), "{e}");
        snap.histograms.pop();
        let e = snap.decode().expect_err("five histograms");
        assert!(e.contains("has 5 histograms, not 6"), "{e}");
    }

    #[test]
    fn a_late_reply_mostly_held_off_the_cpu_is_counted_as_the_machines() {
        let mut s = Stats::default();
        let start = s.snapshot();
        let due = 10_000_000;
        // 2 ms late, 1.5 ms of it with the timing thread held off its CPU: the machine's.
        s.record(
            &dispatch(Op::Read, 0, 0, due, false),
            4096,
            due + 2_000_000,
            false,
            0,
            1_500_000,
        );
        // 2 ms late, 0.5 ms of it held off: the emulator's own work.
        s.record(
            &dispatch(Op::Write, 0, 0, due, true),
            4096,
            due + 2_000_000,
            false,
            0,
            500_000,
        );
        // 1 ms late, exactly half held off: the machine's.
        s.record(
            &dispatch(Op::Read, 0, 0, due, false),
            4096,
            due + 1_000_000,
            false,
            0,
            500_000,
        );
        // On time (0.2 ms, under the 0.5 ms that counts as late), all of it held off.
        s.record(
            &dispatch(Op::Read, 0, 0, due, false),
            4096,
            due + 200_000,
            false,
            0,
            200_000,
        );
        let phase = s.snapshot().delta(&start).expect("delta");
        assert_eq!((phase.counts.late, phase.counts.late_held_off), (3, 2));
        let record = phase.record_of_phase();
        assert_eq!(record.counts.late_held_off, 2);
        let json = serde_json::to_value(&record).expect("serialises");
        assert_eq!(json["late_held_off"], 2, "{json}");
        assert_eq!(json["late"], 3, "{json}");
    }

    #[test]
    fn delta_refuses_snapshots_out_of_order() {
        let mut s = Stats::default();
        let empty = s.snapshot();
        s.record(&dispatch(Op::Read, 0, 0, 1, false), 4096, 1, false, 0, 0);
        let later = s.snapshot();
        let e = empty.delta(&later).expect_err("out of order");
        assert!(e.contains("out of order"), "{e}");
    }
}
