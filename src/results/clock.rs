//! A phase's three times on an emulated disk: the wall time, the pause of the disk's own
//! clock (how far it fell behind the wall while the emulator was behind its model,
//! DEVICES.md "the disk's own clock"), and the disk time, wall − pause: what the modelled
//! drive would have given on a host that kept time, as far as the phase waited on the disk.
//!
//! Elapsed time and every rate per second (ops/s, MB/s, a workload's declared rates) are read
//! on the disk's clock wherever figures are compared — findings, tables, the report — through
//! [`PhaseResult::times`] alone, so no table computes disk time its own way. The wall-time
//! figures stay in the result as measured (`wall_s`, `ops_per_s`, `bytes_per_s`). A phase not
//! on an emulated disk, and every result written before the disk had a clock, has no pause:
//! its disk time is its wall time, and every figure reads exactly as recorded.

use super::PhaseResult;

/// Which clock a phase's times and rates are read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The disk's own clock on an emulated disk (wall − pause); the wall clock elsewhere.
    #[default]
    Disk,
    /// The wall clock, as the result recorded the phase.
    Wall,
}

/// A phase's wall time, the pause of its emulated disk's clock, and its disk time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PhaseTimes {
    /// Wall time, seconds (`wall_s`).
    pub wall_s: f64,
    /// How far the disk's clock fell behind the wall over the phase, seconds: the larger of
    /// the main and the journal disk's pauses (0 without an emulated disk).
    pub pause_s: f64,
    /// How many times that disk's clock stopped.
    pub pauses: u64,
    /// wall − pause, seconds (never below 0).
    pub disk_s: f64,
}

impl PhaseResult {
    /// The phase's three times. A phase on two emulated disks (an external journal on its
    /// own disk) waited on both clocks at once, and one stall of the host stops both: its
    /// pause is the larger of the two, so no stall is taken off twice and disk time is never
    /// shorter than either disk allows.
    pub fn times(&self) -> PhaseTimes {
        let (pause_ns, pauses) = [&self.device_model, &self.journal_device_model]
            .into_iter()
            .flatten()
            .map(|d| (d.pause_ns, d.pauses))
            .max()
            .unwrap_or((0, 0));
        let pause_s = pause_ns as f64 / 1e9;
        PhaseTimes {
            wall_s: self.wall_s,
            pause_s,
            pauses,
            disk_s: if pause_ns == 0 {
                self.wall_s
            } else {
                (self.wall_s - pause_s).max(0.0)
            },
        }
    }
}

impl PhaseTimes {
    /// Whether the disk's clock stopped in the phase (disk time differs from wall time).
    pub fn paused(&self) -> bool {
        self.pause_s > 0.0
    }

    /// The share of the wall time the disk's clock stood still, 0–1 (0 for an empty phase).
    pub fn pause_share(&self) -> f64 {
        if self.wall_s > 0.0 {
            (self.pause_s / self.wall_s).min(1.0)
        } else {
            0.0
        }
    }

    /// The phase's elapsed time on `clock`, seconds.
    pub fn elapsed(&self, clock: Clock) -> f64 {
        match clock {
            Clock::Disk => self.disk_s,
            Clock::Wall => self.wall_s,
        }
    }

    /// A rate per second the result recorded over the wall time, on `clock`: the same count
    /// over the disk time. Exactly the recorded value without a pause (no rounding).
    pub fn rate(&self, wall_rate: f64, clock: Clock) -> f64 {
        if clock == Clock::Wall || !self.paused() {
            return wall_rate;
        }
        // A disk time of 0 (the clock stood still the whole phase) gives no finite rate;
        // reports leave non-finite figures out.
        wall_rate * self.wall_s / self.disk_s
    }
}

/// A result of a `kind` workload on testbed `label`, repetition `rep`, with no phases: the
/// frame unit tests of disk time hang their phases on.
#[cfg(test)]
pub(crate) fn bare_result(label: &str, rep: u32, kind: &str) -> super::RunResult {
    let mut r: super::RunResult = serde_json::from_value(serde_json::json!({
        "schema": super::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
        "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
        "testbed": super::TestbedInfo::default(),
        "workload": {"kind": kind, "params": {}},
        "rep": rep, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "drop"},
        "phases": [], "errors": []
    }))
    .expect("a result");
    r.testbed.label = label.into();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::device::ModelledIo;

    fn phase(wall_s: f64, main: Option<u64>, journal: Option<u64>) -> PhaseResult {
        let mut p = crate::measure::PhaseTotals::new("p").into_result(&[]);
        p.wall_s = wall_s;
        p.ops_per_s = 300.0;
        let disk = |pause_ns| ModelledIo {
            pause_ns,
            pauses: pause_ns / 1_000_000,
            ..Default::default()
        };
        p.device_model = main.map(disk);
        p.journal_device_model = journal.map(disk);
        p
    }

    #[test]
    fn disk_time_is_wall_less_the_pause_and_rates_follow_it() {
        let t = phase(10.0, Some(2_500_000_000), None).times();
        assert_eq!(
            (t.wall_s, t.pause_s, t.pauses, t.disk_s),
            (10.0, 2.5, 2500, 7.5)
        );
        assert!(t.paused());
        assert_eq!(t.pause_share(), 0.25);
        assert_eq!(t.elapsed(Clock::Disk), 7.5);
        assert_eq!(t.elapsed(Clock::Wall), 10.0);
        // 3000 operations in 10 s of wall time are 3000 in 7.5 s of disk time.
        assert_eq!(t.rate(300.0, Clock::Disk), 400.0);
        assert_eq!(t.rate(300.0, Clock::Wall), 300.0);
    }

    #[test]
    fn two_disks_pause_the_phase_by_the_larger_of_their_pauses() {
        let t = phase(10.0, Some(1_000_000_000), Some(3_000_000_000)).times();
        assert_eq!((t.pause_s, t.pauses, t.disk_s), (3.0, 3000, 7.0));
        let t = phase(10.0, Some(4_000_000_000), Some(3_000_000_000)).times();
        assert_eq!((t.pause_s, t.disk_s), (4.0, 6.0));
    }

    #[test]
    fn without_a_pause_every_figure_is_the_recorded_one() {
        for p in [
            phase(0.1 + 0.2, None, None),
            phase(0.1 + 0.2, Some(0), None),
        ] {
            let t = p.times();
            assert!(!t.paused());
            assert_eq!(t.disk_s.to_bits(), p.wall_s.to_bits());
            let rate = 1.0 / 3.0;
            assert_eq!(t.rate(rate, Clock::Disk).to_bits(), rate.to_bits());
        }
        // A result written before the disk had a clock reads pause 0.
        let mut record = serde_json::to_value(ModelledIo::default()).expect("a record");
        let fields = record.as_object_mut().expect("an object");
        assert!(fields.remove("pause_ns").is_some() && fields.remove("pauses").is_some());
        let old: ModelledIo = serde_json::from_value(record).expect("an older record");
        assert_eq!((old.pause_ns, old.pauses), (0, 0));
        // A clock that stood still the whole phase leaves no disk time, never a negative one.
        let t = phase(1.0, Some(2_000_000_000), None).times();
        assert_eq!(t.disk_s, 0.0);
        assert!(!t.rate(5.0, Clock::Disk).is_finite());
    }
}
