//! Metrics declared once, as data: a key, a name, a unit, which direction is better and
//! whether it is a rate (so that a harmonic mean means something). The core figures of every
//! phase are declared here in [`CORE`]; a workload declares the figures it records in a
//! phase's `extra` next to its operations (a `const` list of [`MetricDef`]), and the runner
//! copies that list into the result (`workload.metrics`), so that tables, plots, statistics
//! and `compare` read a figure's unit and direction from the result file itself — as fio's
//! option table and mmtests' `preferhigher` do — and never guess it from the name.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::clock::Clock;
use super::PhaseResult;

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    /// No direction is claimed (a count, a setting echoed back).
    #[default]
    Neither,
}

/// How a figure of one rank (or worker) combines with the others' into the figure of the
/// whole run (see `dist::merge`). Declared with the figure, never guessed from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// Added up (counts: files, directories, threads, passes, CPU seconds).
    #[default]
    Sum,
    /// A rate per second: each part's rate × its own wall time, over the merged wall time.
    Rate,
    /// The mean of the parts (a score, a per-file mean).
    Mean,
    /// The largest part (a worst case).
    Max,
    /// The smallest part (a flag that holds only if it holds everywhere).
    Min,
    /// A setting every part shares, kept as it is (the largest, should parts differ).
    Same,
    /// Recomputed from the merged latency histogram: the share of operations over 2 s.
    #[serde(rename = "share_over_2s")]
    ShareOver2s,
    /// Recomputed from the merged latency histogram: the share of operations over 10 s.
    #[serde(rename = "share_over_10s")]
    ShareOver10s,
    /// Recomputed from the merged phase: megabytes moved per CPU second.
    MbPerCpuS,
}

/// One metric's declaration. `const` in the declaring code (borrowed strings), owned after
/// it has been read back from a result file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricDef {
    /// Stable key: for a workload's figure, its name in the phase's `extra`.
    pub key: Cow<'static, str>,
    /// Column and axis name.
    pub name: Cow<'static, str>,
    /// Unit, empty for a plain count or ratio.
    #[serde(default)]
    pub unit: Cow<'static, str>,
    /// Which way is better.
    #[serde(default)]
    pub better: Better,
    /// A rate (per second): the harmonic mean over repetitions is reported too.
    #[serde(default)]
    pub rate: bool,
    /// How the figure combines across MPI ranks. Absent (taken as a sum) in results written
    /// before it was added; only a run merges ranks, so those never need it.
    #[serde(default)]
    pub combine: Combine,
}

impl MetricDef {
    /// A declaration for `const` lists.
    pub const fn new(
        key: &'static str,
        name: &'static str,
        unit: &'static str,
        better: Better,
        rate: bool,
    ) -> Self {
        Self {
            key: Cow::Borrowed(key),
            name: Cow::Borrowed(name),
            unit: Cow::Borrowed(unit),
            better,
            rate,
            combine: if rate { Combine::Rate } else { Combine::Sum },
        }
    }

    /// The same figure, combining across ranks as `combine` says (a sum, or a rate for
    /// rates, unless declared otherwise).
    pub const fn combine(mut self, combine: Combine) -> Self {
        self.combine = combine;
        self
    }

    /// A rate per second, higher is better.
    pub const fn rate(key: &'static str, name: &'static str, unit: &'static str) -> Self {
        Self::new(key, name, unit, Better::Higher, true)
    }

    /// A figure with no claimed direction (a count, a setting echoed back).
    pub const fn count(key: &'static str, name: &'static str, unit: &'static str) -> Self {
        Self::new(key, name, unit, Better::Neither, false)
    }

    /// A figure where less is better (a time, a share of slow operations).
    pub const fn lower(key: &'static str, name: &'static str, unit: &'static str) -> Self {
        Self::new(key, name, unit, Better::Lower, false)
    }

    /// A figure where more is better that is not a rate (a layout score).
    pub const fn higher(key: &'static str, name: &'static str, unit: &'static str) -> Self {
        Self::new(key, name, unit, Better::Higher, false)
    }

    /// `throughput (MB/s)`.
    pub fn label(&self) -> String {
        if self.unit.is_empty() {
            self.name.to_string()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }
}

/// A core metric: its declaration and how to read it from any phase.
pub struct CoreMetric {
    pub def: MetricDef,
    /// The value of a phase with its elapsed time and rates on a clock (see
    /// [`PhaseResult::times`]); `None` when it does not apply (no bytes, no latency, no
    /// device).
    pub get: fn(&PhaseResult, Clock) -> Option<f64>,
}

impl CoreMetric {
    /// The value of a phase as findings, tables and reports compare it: elapsed time and
    /// rates on the disk's clock on an emulated disk (the wall clock elsewhere).
    pub fn value(&self, p: &PhaseResult) -> Option<f64> {
        (self.get)(p, Clock::Disk)
    }
}

/// A workload's own figure (from a phase's `extra`, recorded over the wall time) on `clock`:
/// a declared rate per second over the disk time, anything else as recorded.
pub fn extra_on(def: &MetricDef, p: &PhaseResult, value: f64, clock: Clock) -> f64 {
    if def.rate {
        p.times().rate(value, clock)
    } else {
        value
    }
}

/// Every core metric of a phase, in report order.
pub const CORE: &[CoreMetric] = &[
    CoreMetric {
        def: MetricDef::lower("elapsed", "elapsed", "s"),
        get: |p, c| Some(p.times().elapsed(c)),
    },
    CoreMetric {
        def: MetricDef::lower("sys", "sys time", "s"),
        get: |p, _| Some(p.sys_s),
    },
    CoreMetric {
        def: MetricDef::lower("user", "user time", "s"),
        get: |p, _| Some(p.user_s),
    },
    CoreMetric {
        def: MetricDef::rate("ops_per_s", "op rate", "ops/s"),
        get: |p, c| (p.ops > 0).then(|| p.times().rate(p.ops_per_s, c)),
    },
    CoreMetric {
        def: MetricDef::rate("mb_per_s", "throughput", "MB/s"),
        get: |p, c| (p.bytes > 0).then(|| p.times().rate(p.bytes_per_s, c) / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("lat_mean", "mean latency", "ms"),
        get: |p, _| (p.latency.count > 0).then_some(p.latency.mean_ns / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("lat_p99", "p99 latency", "ms"),
        get: |p, _| (p.latency.count > 0).then_some(p.latency.p99_ns as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("lat_max", "max latency", "ms"),
        get: |p, _| (p.latency.count > 0).then_some(p.latency.max_ns as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("sched_mean", "mean latency from the scheduled time", "ms"),
        get: |p, _| sched(p).map(|l| l.mean_ns / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("sched_p99", "p99 latency from the scheduled time", "ms"),
        get: |p, _| sched(p).map(|l| l.p99_ns as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("sched_max", "max latency from the scheduled time", "ms"),
        get: |p, _| sched(p).map(|l| l.max_ns as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("over_2s", "ops over 2 s", "%"),
        get: |p, _| {
            (p.latency.count > 0).then(|| p.latency.over_2s as f64 * 100.0 / p.latency.count as f64)
        },
    },
    CoreMetric {
        def: MetricDef::lower("dev_write_mb", "device writes", "MB"),
        get: |p, _| p.device.map(|d| d.write_bytes as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("dev_read_mb", "device reads", "MB"),
        get: |p, _| p.device.map(|d| d.read_bytes as f64 / 1e6),
    },
    CoreMetric {
        def: MetricDef::lower("write_amp", "write amplification", "x"),
        get: |p, _| match p.device {
            Some(d) if p.bytes > 0 && d.write_bytes > 0 => {
                Some(d.write_bytes as f64 / p.bytes as f64)
            }
            _ => None,
        },
    },
    // The wall-time figures beside the disk-time ones, on an emulated disk: shown where any
    // phase's disk clock stopped ([`beside_disk_time`]).
    CoreMetric {
        def: MetricDef::lower("wall", "wall time", "s"),
        get: |p, _| on_emulated_disk(p).then_some(p.wall_s),
    },
    CoreMetric {
        def: MetricDef::count("pause", "disk clock pause", "s"),
        get: |p, _| on_emulated_disk(p).then(|| p.times().pause_s),
    },
    // What the phase's threads waited for a CPU, and a one-thread phase's time and op rate
    // without that wait (see `cpuwait`): shown where some phase waited over
    // NOTABLE_CPU_WAIT ([`beside_cpu_wait`]). Beside elapsed time, never in its place.
    CoreMetric {
        def: MetricDef::count("runq_wait", "run-queue wait", "%"),
        get: |p, _| p.cpu_wait_share().map(|s| s * 100.0),
    },
    CoreMetric {
        def: MetricDef::lower("elapsed_less_runq", "elapsed less run-queue wait", "s"),
        get: |p, c| p.elapsed_less_runq(c),
    },
    CoreMetric {
        def: MetricDef::rate(
            "ops_per_s_less_runq",
            "op rate less run-queue wait",
            "ops/s",
        ),
        get: |p, c| {
            let less = p.elapsed_less_runq(c)?;
            let t = p.times();
            (p.ops > 0).then(|| t.rate(p.ops_per_s, c) * t.elapsed(c) / less)
        },
    },
];

/// The core metrics of the run-queue wait: a table shows them only where some phase's
/// threads waited for a CPU over [`super::cpuwait::NOTABLE_CPU_WAIT`] of their time, so
/// results of a machine that gave the phases their CPU (and results from before fsgauge
/// recorded the wait) read as before.
pub const BESIDE_CPU_WAIT: &[&str] = &["runq_wait", "elapsed_less_runq", "ops_per_s_less_runq"];

/// Whether a core metric is shown for these phases: [`BESIDE_CPU_WAIT`] ones where any
/// phase waited over the threshold, every other one always (where it has a value).
pub fn beside_cpu_wait<'a>(key: &str, mut phases: impl Iterator<Item = &'a PhaseResult>) -> bool {
    !BESIDE_CPU_WAIT.contains(&key)
        || phases.any(|p| {
            p.cpu_wait_share()
                .is_some_and(|s| s > super::cpuwait::NOTABLE_CPU_WAIT)
        })
}

/// Whether a phase ran on an emulated disk (main or journal).
fn on_emulated_disk(p: &PhaseResult) -> bool {
    p.device_model.is_some() || p.journal_device_model.is_some()
}

/// The core metrics that stand beside the disk-time figures (wall time, the disk clock's
/// pause): a table shows them only where some phase's disk clock stopped, so results on
/// disks that kept time (and results from before the disk had a clock) read as before.
pub const BESIDE_DISK_TIME: &[&str] = &["wall", "pause"];

/// Whether a core metric is shown for these phases: [`BESIDE_DISK_TIME`] ones where any
/// phase paused, every other one always (where it has a value).
pub fn beside_disk_time<'a>(key: &str, mut phases: impl Iterator<Item = &'a PhaseResult>) -> bool {
    !BESIDE_DISK_TIME.contains(&key) || phases.any(|p| p.times().paused())
}

/// A rate-limited phase's latency from the scheduled time (none without a rate limit).
fn sched(p: &PhaseResult) -> Option<&crate::results::LatencySummary> {
    p.scheduled_latency.as_ref().filter(|l| l.count > 0)
}

/// The core metric of that key.
pub fn core(key: &str) -> Option<&'static CoreMetric> {
    CORE.iter().find(|m| m.def.key == key)
}

/// The metric that stands for a phase — in bars, the mean ± sd table, sweep tables and
/// `reps = "auto"`: throughput when the phase moved data, else operations per second, else
/// elapsed time.
pub fn main_metric<'a>(
    phases: impl IntoIterator<Item = &'a PhaseResult> + Clone,
) -> &'static CoreMetric {
    for key in ["mb_per_s", "ops_per_s"] {
        if let Some(m) = core(key) {
            if phases.clone().into_iter().any(|p| m.value(p).is_some()) {
                return m;
            }
        }
    }
    &CORE[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_keys_are_unique_and_directions_declared() {
        let mut keys: Vec<&str> = CORE.iter().map(|m| m.def.key.as_ref()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), CORE.len());
        assert_eq!(core("elapsed").map(|m| m.def.better), Some(Better::Lower));
        assert_eq!(core("mb_per_s").map(|m| m.def.rate), Some(true));
        assert_eq!(CORE[0].def.key, "elapsed");
    }

    #[test]
    fn a_declaration_reads_back_from_json_as_written() {
        let d = MetricDef::rate("kib_per_s", "file create", "KiB/s");
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["better"], "higher");
        assert_eq!(v["rate"], true);
        assert_eq!(v["combine"], "rate");
        let share = MetricDef::lower("s", "s", "").combine(Combine::ShareOver2s);
        assert_eq!(
            serde_json::to_value(&share).unwrap()["combine"],
            "share_over_2s"
        );
        let back: MetricDef = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn the_run_queue_figures_show_only_where_a_phase_waited_over_the_threshold() {
        let mut p = crate::measure::PhaseTotals::new("p").into_result(&[]);
        (p.wall_s, p.ops, p.ops_per_s) = (10.0, 1000, 100.0);
        assert!(!beside_cpu_wait("runq_wait", std::iter::once(&p)));
        assert!(beside_cpu_wait("elapsed", std::iter::once(&p)));
        let value = |p: &PhaseResult, key: &str| core(key).and_then(|m| m.value(p));
        assert_eq!(value(&p, "elapsed_less_runq"), None);
        p.cpu_wait = Some(crate::results::CpuWait {
            run_delay_ns: 400_000_000,
            on_cpu_ns: 9_000_000_000,
            threads: 1,
        });
        // 4%: recorded and readable, not shown.
        assert!(!beside_cpu_wait("elapsed_less_runq", std::iter::once(&p)));
        assert_eq!(value(&p, "runq_wait"), Some(4.0));
        assert_eq!(value(&p, "elapsed_less_runq"), Some(9.6));
        let rate = value(&p, "ops_per_s_less_runq").unwrap();
        assert!((rate - 1000.0 / 9.6).abs() < 1e-9, "{rate}");
        // Elapsed time stays as measured.
        assert_eq!(value(&p, "elapsed"), Some(10.0));
        p.cpu_wait = p.cpu_wait.map(|w| crate::results::CpuWait {
            run_delay_ns: 600_000_000,
            ..w
        });
        assert!(beside_cpu_wait("ops_per_s_less_runq", std::iter::once(&p)));
    }
}
