//! The disk's clock held while fsgauge, not the workload, has the host busy between phases.
//!
//! A cold phase starts after `sync` and `echo 3 > drop_caches`. Both are the whole machine's:
//! `sync` waits for every filesystem's writeback and the drop walks every cached page, so on a
//! machine with a build beside the run they take seconds where they take a tenth of one on a
//! quiet one. The emulated drive's clock ran on meanwhile, and the drive destaged its write
//! cache: a delete phase that on a quiet machine read its metadata back from the drive's
//! cache (16 of 16 reads, 8 ms) read it from the platters under load (2 of 14, 98 ms), and a
//! finding's ratio moved tenfold (lowmem-as-published, extents-delete-large). That is the
//! host's time, which the disk's clock is there to keep out.
//!
//! So the run holds the clock (`clock hold` on the control channel) after its own testbed's
//! writes are done (a syncfs) and runs it again (`clock run`) after the drop: while held, the
//! drive does nothing (no destaging, no rotation), as during a stop of the clock for a late
//! reply ([`crate::device::model::clock`]), and the phase starts on the drive as it was when
//! the testbed's writeback ended. A hold never blocks the host: the first request that comes
//! during it ends it at its arrival (the drive has work; a flush a `sync` sends to every
//! disk, say), and the request reaches the drive at the hold's start on its clock.
//!
//! The control thread begins a hold and says where it ends; only the timing thread ends one
//! (it owns the clock), at its next pass: a held timing thread polls every [`HOLD_POLL_NS`],
//! one asleep until a request comes takes the end in with that request. A hold begun before
//! the timing thread took in the end of the one before it joins that one (holds are a
//! phase apart, so this does not happen in a run).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::base::sys::rt;

/// How often a held timing thread looks for the hold's end, ns.
pub const HOLD_POLL_NS: u64 = 1_000_000;

/// The hold shared between the control thread and the timing thread.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    /// When the hold began (monotonic ns), 0: none.
    since: AtomicU64,
    /// When `clock run` asked for its end, 0: not yet.
    run_at: AtomicU64,
}

/// A hold the timing thread ended: from `since` to `end` on the wall, with the pause the
/// clock had before it (what requests stamped during it carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended {
    pub since: u64,
    pub end: u64,
    pub pause_before: u64,
}

impl Ended {
    pub fn len(&self) -> u64 {
        self.end - self.since
    }

    /// The disk time of a request that came at `arrival` stamped with the pause `pause_then`:
    /// one stamped before the clock had taken the hold in (`pause_then` at most the pause
    /// before it) and come during the hold reaches the drive at the hold's start, one come
    /// after it as long after that as it came after the hold's end; any other as the clock
    /// maps it.
    pub fn arrival(&self, arrival: u64, pause_then: u64) -> u64 {
        if arrival >= self.since && pause_then <= self.pause_before {
            (arrival.max(self.end) - self.len()).saturating_sub(pause_then)
        } else {
            arrival.saturating_sub(pause_then)
        }
    }
}

impl Hold {
    /// `clock hold`: the clock stops now (a hold already on stays as it began).
    pub fn begin(&self) {
        let now = rt::monotonic_ns().max(1);
        if self
            .since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.run_at.store(0, Ordering::Release);
        }
    }

    /// `clock run`: the hold ends now. The timing thread takes it in at its next pass (at the
    /// next request, or its next timed wake-up): until then the drive does nothing, and the
    /// requests that come after now reach it as long after the hold's start as they came
    /// after its end ([`Ended::arrival`]). A hold is never waited for: the timing thread may be
    /// asleep until a request comes.
    pub fn run(&self) {
        let now = rt::monotonic_ns().max(1);
        if self.since.load(Ordering::Acquire) != 0 {
            let _ = self
                .run_at
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Whether a hold is on.
    pub fn on(&self) -> bool {
        self.since.load(Ordering::Acquire) != 0
    }

    /// The timing thread's part: ends the hold at the first arrival among the requests just
    /// taken (`first_arrival`) or where `clock run` asked, whichever came first; `None` while
    /// it goes on (or none is on). `pause_before` is the clock's pause now.
    pub fn end(&self, first_arrival: Option<u64>, pause_before: u64) -> Option<Ended> {
        let since = self.since.load(Ordering::Acquire);
        if since == 0 {
            return None;
        }
        let run_at = Some(self.run_at.load(Ordering::Acquire)).filter(|&t| t != 0);
        let end = match (first_arrival, run_at) {
            (Some(a), Some(r)) => a.min(r),
            (a, r) => a.or(r)?,
        }
        .max(since);
        self.run_at.store(0, Ordering::Release);
        self.since.store(0, Ordering::Release);
        Some(Ended {
            since,
            end,
            pause_before,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_goes_on_until_run_or_a_request_and_ends_at_the_first() {
        let h = Hold::default();
        assert!(!h.on());
        assert_eq!(h.end(Some(5), 0), None, "no hold: nothing ends");
        h.begin();
        let since = h.since.load(Ordering::Acquire);
        assert!(h.on());
        assert_eq!(h.end(None, 7), None, "held until asked or a request comes");
        // A request ends it at its arrival.
        let e = h.end(Some(since + 40), 7).expect("ended by the request");
        assert_eq!(
            (e.since, e.end, e.len(), e.pause_before),
            (since, since + 40, 40, 7)
        );
        assert!(!h.on());
        // `clock run` ends it where it asked, before a later arrival.
        h.begin();
        let since = h.since.load(Ordering::Acquire);
        h.run_at.store(since + 10, Ordering::Release);
        let e = h.end(Some(since + 30), 0).expect("ended");
        assert_eq!(e.end, since + 10);
    }

    #[test]
    fn requests_during_a_hold_reach_the_drive_at_its_start_and_later_ones_keep_their_distance() {
        // Held from wall 1,000 to 6,000 with a pause of 100 before.
        let e = Ended {
            since: 1_000,
            end: 6_000,
            pause_before: 100,
        };
        // Came before the hold: as the clock maps it.
        assert_eq!(e.arrival(900, 100), 800);
        // Came during it: at the hold's start on the disk's clock (900).
        assert_eq!(e.arrival(1_000, 100), 900);
        assert_eq!(e.arrival(5_999, 100), 900);
        // Came after its end but stamped before the clock took the hold in: 50 after its start.
        assert_eq!(e.arrival(6_050, 100), 950);
        // Stamped after (the pause then includes the hold): as the clock maps it.
        assert_eq!(e.arrival(6_050, 5_100), 950);
    }

    #[test]
    fn run_says_where_the_hold_ends_and_the_timing_thread_takes_it_in_later() {
        let h = Hold::default();
        h.run();
        assert!(!h.on(), "run without a hold: nothing");
        h.begin();
        let since = h.since.load(Ordering::Acquire);
        h.run();
        let run_at = h.run_at.load(Ordering::Acquire);
        assert!(
            run_at >= since && h.on(),
            "still on until the timing thread ends it"
        );
        // The timing thread wakes much later with a request: the hold ended at `run`.
        let e = h.end(Some(run_at + 1_000_000_000), 0).expect("ended");
        assert_eq!((e.since, e.end), (since, run_at));
        assert!(!h.on());
    }
}
