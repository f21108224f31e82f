//! What a phase's run-queue wait means for its figures. A thread that is runnable but waits
//! for a CPU is slowed by the machine (a neighbour, the host), not by the filesystem; the
//! disk's clock does not stop for it. Reports state the share of the phase's thread time it
//! took ([`CpuWait::share`]), and for a phase of one thread offer elapsed time less that wait
//! as a figure of its own, beside elapsed time and never in its place
//! ([`PhaseResult::elapsed_less_runq`]). With several threads the waits of different threads
//! overlap each other and the others' work, so no wall time can be taken off soundly.

use super::clock::Clock;
use super::{CpuWait, PhaseResult};

/// The share of a phase's thread time spent waiting for a CPU from which a report says so:
/// 5%. It is the half-width of the tightest intervals findings give on this kind of machine
/// (journal-size's file-remove on a quiet machine, 5.77–6.36×, ±5%): a wait over it can by
/// itself move a phase's time, and so a ratio, out of its own interval, while a smaller one
/// moves it by less than the interval can resolve.
pub const NOTABLE_CPU_WAIT: f64 = 0.05;

impl CpuWait {
    /// Of the threads' time over a phase of `wall_s` seconds (threads × wall), the share
    /// spent runnable but waiting for a CPU, 0–1; `None` for an empty phase.
    pub fn share(&self, wall_s: f64) -> Option<f64> {
        let thread_s = wall_s * self.threads as f64;
        (thread_s > 0.0).then(|| (self.run_delay_ns as f64 / 1e9 / thread_s).min(1.0))
    }

    /// The run-queue wait in seconds.
    pub fn run_delay_s(&self) -> f64 {
        self.run_delay_ns as f64 / 1e9
    }
}

impl PhaseResult {
    /// The share of the phase's thread time its threads waited for a CPU (see
    /// [`CpuWait::share`]); `None` where it was not recorded.
    pub fn cpu_wait_share(&self) -> Option<f64> {
        self.cpu_wait.and_then(|w| w.share(self.wall_s))
    }

    /// A one-thread phase's elapsed time on `clock` less the time its thread waited for a
    /// CPU, seconds: the time it would have taken on a CPU of its own. `None` for a phase of
    /// several threads, and where the wait was not recorded. On an emulated disk this is
    /// disk time less the wait; the two are apart when the thread waited on the disk while
    /// the clock stood still, and a late reply it did not wait for (writeback) could be
    /// taken off twice, so it never goes below 0.
    pub fn elapsed_less_runq(&self, clock: Clock) -> Option<f64> {
        let w = self.cpu_wait.filter(|w| w.threads == 1)?;
        Some((self.times().elapsed(clock) - w.run_delay_s()).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::device::ModelledIo;

    fn phase(wall_s: f64, wait: Option<(u64, u32)>) -> PhaseResult {
        let mut p = crate::measure::PhaseTotals::new("p").into_result(&[]);
        p.wall_s = wall_s;
        p.cpu_wait = wait.map(|(run_delay_ns, threads)| CpuWait {
            run_delay_ns,
            on_cpu_ns: 1,
            threads,
        });
        p
    }

    #[test]
    fn the_share_is_of_every_thread_s_time() {
        assert_eq!(
            phase(10.0, Some((1_000_000_000, 1))).cpu_wait_share(),
            Some(0.1)
        );
        assert_eq!(
            phase(10.0, Some((1_000_000_000, 4))).cpu_wait_share(),
            Some(0.025)
        );
        assert_eq!(phase(0.0, Some((1, 1))).cpu_wait_share(), None);
        assert_eq!(phase(10.0, None).cpu_wait_share(), None);
    }

    #[test]
    fn only_a_one_thread_phase_has_elapsed_less_its_wait() {
        let p = phase(10.0, Some((2_500_000_000, 1)));
        assert_eq!(p.elapsed_less_runq(Clock::Wall), Some(7.5));
        assert_eq!(
            phase(10.0, Some((2_500_000_000, 2))).elapsed_less_runq(Clock::Wall),
            None
        );
        assert_eq!(phase(10.0, None).elapsed_less_runq(Clock::Wall), None);
        // On an emulated disk: disk time less the wait, never below 0.
        let mut p = phase(10.0, Some((2_500_000_000, 1)));
        p.device_model = Some(ModelledIo {
            pause_ns: 1_000_000_000,
            pauses: 3,
            ..Default::default()
        });
        assert_eq!(p.elapsed_less_runq(Clock::Disk), Some(6.5));
        assert_eq!(p.elapsed_less_runq(Clock::Wall), Some(7.5));
        p.cpu_wait = Some(CpuWait {
            run_delay_ns: 20_000_000_000,
            on_cpu_ns: 0,
            threads: 1,
        });
        assert_eq!(p.elapsed_less_runq(Clock::Disk), Some(0.0));
    }
}
