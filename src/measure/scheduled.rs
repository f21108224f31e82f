//! A second latency per operation kind for rate-limited runs: from each request's scheduled
//! (due) time to its completion, beside the usual one from its submission (see
//! `workload::rate`). Kept per series second as the primary latency is, so the queue a stall
//! leaves behind shows in the second it happened. Filled only by rate-limited request loops;
//! a recorder without a rate limit never touches it.

use super::latency::FastHistogram;

/// One operation kind's latencies from the scheduled time, in one worker.
#[derive(Default)]
pub(crate) struct Scheduled {
    pub count: u64,
    pub over_2s: u64,
    pub over_10s: u64,
    /// While the phase runs: of series second `sec` only; after [`Scheduled::finish`]: of the
    /// whole phase.
    pub hist: FastHistogram,
    pub sec: usize,
    /// Closed seconds, added up.
    total: FastHistogram,
    /// Closed seconds' buckets, (bucket, count), by second.
    pub intervals: Vec<Vec<(u32, u64)>>,
}

impl Scheduled {
    /// Records an operation of `ns` from its due time that ended in series second `sec`.
    pub fn record(&mut self, ns: u64, sec: usize) {
        if sec != self.sec {
            self.close();
            self.sec = sec;
        }
        self.hist.record(ns);
        self.count += 1;
        if ns > 2_000_000_000 {
            self.over_2s += 1;
            if ns > 10_000_000_000 {
                self.over_10s += 1;
            }
        }
    }

    /// Closes the held second: its buckets go to its interval and to the total.
    fn close(&mut self) {
        if self.sec >= self.intervals.len() {
            self.intervals.resize_with(self.sec + 1, Vec::new);
        }
        self.hist
            .drain_into(&mut self.total, &mut self.intervals[self.sec]);
    }

    /// Closes the last second; `hist` is the whole phase from here on.
    pub fn finish(&mut self) {
        self.close();
        self.hist = std::mem::take(&mut self.total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_their_own_latencies_and_add_up_to_the_phase() {
        let mut s = Scheduled::default();
        s.record(1_000, 0);
        s.record(3_000_000_000, 0);
        s.record(5_000, 2);
        s.record(7_000, 1);
        s.finish();
        assert_eq!(s.count, 4);
        assert_eq!(s.over_2s, 1);
        assert_eq!(s.over_10s, 0);
        assert_eq!(s.hist.len(), 4);
        let per: Vec<u64> = s
            .intervals
            .iter()
            .map(|b| b.iter().map(|&(_, c)| c).sum())
            .collect();
        assert_eq!(per, [2, 1, 1]);
    }
}
