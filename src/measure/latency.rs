//! Latency histograms: HDR histograms over 1 ns .. 1 h with 3 significant digits (fio's own
//! histogram stops near 17 s; tiobench counted requests over 2 s and 10 s, so the range must
//! reach well past that).

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;

use crate::results::LatencySummary;

/// A latency histogram in nanoseconds.
pub type LatencyHistogram = Histogram<u64>;

/// Highest trackable latency: one hour.
pub const MAX_NS: u64 = 3_600 * 1_000_000_000;

/// A new, empty latency histogram.
pub fn new_histogram() -> LatencyHistogram {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("1 ns .. 1 h at 3 digits are valid bounds")
}

/// Percentiles and counts of a histogram; `over_2s`/`over_10s` are counted exactly by the
/// recorder and passed in.
pub fn summarize(h: &LatencyHistogram, over_2s: u64, over_10s: u64) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let mut buf = Vec::new();
    let hdr = match V2Serializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(&buf),
        Err(_) => String::new(),
    };
    LatencySummary {
        count: h.len(),
        min_ns: h.min_nz(),
        mean_ns: h.mean(),
        p50_ns: h.value_at_quantile(0.50),
        p90_ns: h.value_at_quantile(0.90),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
        over_2s,
        over_10s,
        hdr,
    }
}

/// Reads back a histogram stored in a [`LatencySummary`].
pub fn decode(summary: &LatencySummary) -> Option<LatencyHistogram> {
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&summary.hdr)
        .ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_one_nanosecond_to_an_hour_at_three_digits() {
        let mut h = new_histogram();
        h.record(1).unwrap();
        h.record(MAX_NS).unwrap();
        h.record(12_345).unwrap();
        assert_eq!(h.min_nz(), 1);
        let top = h.max();
        assert!(
            (top as f64 - MAX_NS as f64).abs() / (MAX_NS as f64) < 0.001,
            "{top}"
        );
        let mid = h.value_at_quantile(0.5);
        assert!((mid as f64 - 12_345.0).abs() / 12_345.0 < 0.001, "{mid}");
    }

    #[test]
    fn summary_round_trips_through_its_stored_histogram() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let s = summarize(&h, 0, 0);
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_ns, 1000);
        assert!((s.p50_ns as f64 - 500_000.0).abs() < 500.0);
        let back = decode(&s).unwrap();
        assert_eq!(back.len(), 1000);
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
    }

    #[test]
    fn merged_histograms_are_exact() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        for v in 0..500u64 {
            a.record(100 + v).unwrap();
            b.record(1_000_000 + v).unwrap();
        }
        let mut m = new_histogram();
        m.add(&a).unwrap();
        m.add(&b).unwrap();
        assert_eq!(m.len(), 1000);
        assert_eq!(m.min_nz(), 100);
        assert!(m.max() >= 1_000_499);
    }
}
