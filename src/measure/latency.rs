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
    histogram_up_to(MAX_NS)
}

/// A new, empty histogram of 1 .. `max` at 3 significant digits, [`new_histogram`]'s but for
/// its top (the emulated disks' histograms reach past an hour: a profile's slowest flush).
/// Fixed bounds, so that histograms of one layout add and subtract bucket by bucket.
pub fn histogram_up_to(max: u64) -> LatencyHistogram {
    Histogram::new_with_bounds(1, max.max(2), 3).expect("1 .. max ≥ 2 at 3 digits are valid bounds")
}

/// Counts per bucket of [`new_histogram`]'s layout (1 ns .. 1 h at 3 digits: 32 buckets of
/// 1024 sub-buckets, plus the first bucket's lower half).
const COUNTS: usize = 33 * 1024;

/// A worker's latency histogram on the per-operation path: the very buckets of an HDR
/// histogram of 1 ns .. 1 h at 3 significant digits, but recording a value is five
/// instructions and one increment (no min/max/total bookkeeping, no resize checks). It becomes
/// an ordinary [`LatencyHistogram`] — bucket for bucket, so exactly — when the phase ends.
#[derive(Clone)]
pub struct FastHistogram {
    counts: Box<[u64]>,
}

/// Empty and not yet allocated: the counts are allocated by the first [`FastHistogram::record`].
impl Default for FastHistogram {
    fn default() -> Self {
        Self {
            counts: Box::default(),
        }
    }
}

impl FastHistogram {
    /// An empty histogram (its counts are zero pages until touched).
    pub fn new() -> Self {
        Self {
            counts: vec![0u64; COUNTS].into_boxed_slice(),
        }
    }

    /// The bucket of `ns` (clamped to 1 ns .. 1 h), as the HDR histogram numbers them.
    #[inline(always)]
    fn index(ns: u64) -> usize {
        let v = ns.clamp(1, MAX_NS);
        // HDR: bucket = 53 - lzcnt(v | 2047), sub-bucket = v >> bucket, index =
        // bucket × 1024 + sub-bucket (1 ns units, 2048 sub-buckets per bucket).
        let bucket = 53 - (v | 2047).leading_zeros();
        ((bucket as usize) << 10) + (v >> bucket) as usize
    }

    /// The lowest value of bucket `i`.
    fn value_at(i: usize) -> u64 {
        let bucket = if i < 2048 { 0 } else { (i >> 10) - 1 };
        ((i - (bucket << 10)) as u64) << bucket
    }

    /// Records one operation of `ns` nanoseconds (saturating at 1 ns and 1 h).
    #[inline(always)]
    pub fn record(&mut self, ns: u64) {
        let i = Self::index(ns);
        // `i` is always in range once the counts exist (the value is clamped).
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.record_first(ns),
        }
    }

    /// Takes back one [`FastHistogram::record`] of `ns` (nothing when its bucket is empty).
    pub fn unrecord(&mut self, ns: u64) {
        if let Some(c) = self.counts.get_mut(Self::index(ns)) {
            *c = c.saturating_sub(1);
        }
    }

    /// [`FastHistogram::record`] into a histogram whose counts are not allocated yet.
    #[cold]
    #[inline(never)]
    fn record_first(&mut self, ns: u64) {
        *self = Self::new();
        self.record(ns);
    }

    /// Operations recorded.
    pub fn len(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// Adds every count of `other`.
    pub fn add(&mut self, other: &FastHistogram) {
        if self.counts.is_empty() {
            self.counts.clone_from(&other.counts);
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }

    /// Adds every count to `h` (a histogram from [`new_histogram`]), bucket for bucket.
    pub fn add_to(&self, h: &mut LatencyHistogram) {
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                h.saturating_record_n(Self::value_at(i), c);
            }
        }
    }

    /// Moves every count into `total` and lists them (bucket, count) in `out`, leaving this
    /// histogram empty but allocated: how an interval's histogram is closed (a scan of its
    /// buckets, done once per interval, never per operation).
    pub fn drain_into(&mut self, total: &mut FastHistogram, out: &mut Vec<(u32, u64)>) {
        if self.counts.is_empty() {
            return;
        }
        if total.counts.is_empty() {
            *total = Self::new();
        }
        for (i, c) in self.counts.iter_mut().enumerate() {
            if *c > 0 {
                total.counts[i] += *c;
                out.push((i as u32, *c));
                *c = 0;
            }
        }
    }

    /// Adds (bucket, count) pairs listed by [`FastHistogram::drain_into`] to `h` (a histogram
    /// from [`new_histogram`]).
    pub fn add_buckets_to(buckets: &[(u32, u64)], h: &mut LatencyHistogram) {
        for &(i, c) in buckets {
            h.saturating_record_n(Self::value_at(i as usize), c);
        }
    }

    /// The non-empty buckets, (bucket, count), ascending.
    pub(crate) fn buckets(&self) -> Vec<(u32, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i as u32, c))
            .collect()
    }

    /// The bucket of any value an HDR histogram of [`new_histogram`]'s layout holds (up to
    /// the top of its last bucket, a little past [`MAX_NS`]), unclamped: 0 has bucket 0.
    pub(crate) fn bucket_of(ns: u64) -> usize {
        let bucket = 53 - (ns | 2047).leading_zeros();
        ((bucket as usize) << 10) + (ns >> bucket) as usize
    }

    /// The same counts as an ordinary HDR histogram.
    pub fn to_histogram(&self) -> LatencyHistogram {
        let mut h = new_histogram();
        self.add_to(&mut h);
        h
    }
}

/// Percentiles and counts of a histogram; `over_2s`/`over_10s` are counted exactly by the
/// recorder and passed in.
pub fn summarize(h: &LatencyHistogram, over_2s: u64, over_10s: u64) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let hdr = encode(h);
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

/// A histogram as a result file stores it: HDR V2, uncompressed, base64 ("" if it cannot be
/// serialized).
pub fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2Serializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(&buf),
        Err(_) => String::new(),
    }
}

/// The cookie of hdrhistogram's uncompressed V2 encoding (what [`encode`] writes).
const V2_COOKIE: u32 = 0x1c84_9313;
/// Its header: cookie, payload length, normalizing offset, significant digits, lowest and
/// highest trackable values, integer-to-double ratio.
const V2_HEADER: usize = 40;

/// Reads back a histogram stored in a [`LatencySummary`].
///
/// The text comes from a result file, so its header is checked before hdrhistogram reads it:
/// the deserializer allocates the payload length the header claims (up to 4 GiB) and the
/// counts of the claimed range at the claimed digits (50 MB at 5) before it reads the payload.
/// A histogram must be what fsgauge writes: uncompressed V2, at most 3 significant digits
/// (every histogram fsgauge makes has 3), its payload all present.
pub fn decode(summary: &LatencySummary) -> Option<LatencyHistogram> {
    decode_text(&summary.hdr)
}

/// Reads back a histogram [`encode`] wrote, checked as [`decode`] says (None: not one fsgauge
/// writes).
pub fn decode_text(text: &str) -> Option<Histogram<u64>> {
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let header = bytes.get(..V2_HEADER)?;
    let word = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let payload = usize::try_from(word(4)).ok()?;
    if word(0) != V2_COOKIE || payload > bytes.len() - V2_HEADER || word(12) > 3 {
        return None;
    }
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
    fn decode_refuses_histograms_fsgauge_does_not_write() {
        use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let stored = |hdr: String| LatencySummary {
            hdr,
            ..Default::default()
        };
        let mut h = new_histogram();
        h.record(1234).unwrap();
        let ours = summarize(&h, 0, 0);
        assert_eq!(decode(&ours).unwrap().len(), 1);
        let mut bytes = base64::engine::general_purpose::STANDARD
            .decode(&ours.hdr)
            .unwrap();
        // A header claiming 2 GiB of payload (hdrhistogram would allocate it first).
        bytes[4..8].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
        assert!(decode(&stored(b64(&bytes))).is_none());
        assert!(decode(&stored(b64(&bytes[..39]))).is_none());
        // 5 significant digits over 2^62: 50 MB of counts for a few bytes of text.
        let mut wide = Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
        wide.record(1234).unwrap();
        let mut buf = Vec::new();
        V2Serializer::new().serialize(&wide, &mut buf).unwrap();
        assert!(decode(&stored(b64(&buf))).is_none());
        // Compressed: the inflated payload is not bounded by the text.
        let mut buf = Vec::new();
        V2DeflateSerializer::new().serialize(&h, &mut buf).unwrap();
        assert!(decode(&stored(b64(&buf))).is_none());
    }

    #[test]
    fn the_fast_histogram_has_the_hdr_buckets() {
        let h = new_histogram();
        assert_eq!(h.distinct_values(), COUNTS);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let values = (1..5000u64).chain((0..20_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1 + (x >> (x % 40 + 23)).min(MAX_NS)
        }));
        for v in values.chain([MAX_NS - 1, MAX_NS]) {
            let i = FastHistogram::index(v);
            assert_eq!(FastHistogram::value_at(i), h.lowest_equivalent(v), "{v}");
            assert_eq!(FastHistogram::index(h.highest_equivalent(v)), i, "{v}");
        }
    }

    #[test]
    fn the_fast_histogram_converts_exactly() {
        let mut fast = FastHistogram::new();
        let mut hdr = new_histogram();
        let mut x = 12345u64;
        for n in 0..100_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match n % 4 {
                0 => x >> 54,
                1 => x >> 40,
                2 => x >> 24,
                _ => u64::MAX - (x >> 4),
            };
            fast.record(v);
            hdr.saturating_record(v.max(1));
        }
        let back = fast.to_histogram();
        assert_eq!(fast.len(), 100_000);
        assert_eq!(back.len(), hdr.len());
        assert_eq!((back.min_nz(), back.max()), (hdr.min_nz(), hdr.max()));
        assert_eq!(back.mean(), hdr.mean());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), hdr.value_at_quantile(q), "{q}");
        }
        assert_eq!(summarize(&back, 0, 0), summarize(&hdr, 0, 0));
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

    #[test]
    fn a_default_histogram_allocates_on_first_use_and_adds_both_ways() {
        let mut empty = FastHistogram::default();
        assert!(empty.is_empty());
        let mut full = FastHistogram::new();
        full.record(1_500);
        full.record(7);
        // Into an unallocated histogram, and from one.
        empty.add(&full);
        full.add(&FastHistogram::default());
        assert_eq!((empty.len(), full.len()), (2, 2));
        let mut lazy = FastHistogram::default();
        lazy.record(1_500);
        lazy.record(7);
        assert_eq!(lazy.to_histogram(), full.to_histogram());
        assert_eq!(empty.to_histogram(), full.to_histogram());
    }
}
