//! The metrics a report shows. Every one is declared once, as data ([`MetricDef`]): the core
//! figures of a phase in [`crate::results::metric::CORE`], and each workload's own figures
//! (a phase's `extra`) by the workload, next to its operations, and carried in the result
//! file under `workload.metrics`. The declaration drives the tables, the plots and the
//! direction of "better" in comparisons (as fio's option table and mmtests' `preferhigher`
//! do); nothing is read from a figure's name. A figure a result does not declare (a result
//! written before declarations were recorded, when its kind is unknown) is shown under its
//! key with no unit and no direction claimed.

use serde::Serialize;

use crate::results::clock::Clock;
use crate::results::metric::{self, CoreMetric, CORE};
pub use crate::results::metric::{Better, MetricDef};
use crate::results::{PhaseResult, RunResult};

/// A metric: a core one, or a workload's own figure from `extra` with its declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Metric {
    Core(usize),
    Extra(MetricDef),
}

impl Metric {
    /// The core metric of that key.
    pub fn core(key: &str) -> Option<Metric> {
        CORE.iter().position(|m| m.def.key == key).map(Metric::Core)
    }

    fn from_core(m: &'static CoreMetric) -> Metric {
        Metric::core(&m.def.key).unwrap_or(Metric::Core(0))
    }

    /// The declaration.
    pub fn def(&self) -> &MetricDef {
        match self {
            Metric::Core(i) => &CORE[*i].def,
            Metric::Extra(d) => d,
        }
    }

    /// Stable key (JSON, CSV): the core key, or `extra.KEY`.
    pub fn key(&self) -> String {
        match self {
            Metric::Core(i) => CORE[*i].def.key.to_string(),
            Metric::Extra(d) => format!("extra.{}", d.key),
        }
    }

    /// `throughput (MB/s)`.
    pub fn label(&self) -> String {
        self.def().label()
    }

    /// The value in a phase: elapsed time and rates on the disk's clock on an emulated disk
    /// (see [`PhaseResult::times`]).
    pub fn value(&self, p: &PhaseResult) -> Option<f64> {
        self.value_on(p, Clock::Disk)
    }

    /// The value in a phase, its elapsed time and rates read on `clock`.
    pub fn value_on(&self, p: &PhaseResult, clock: Clock) -> Option<f64> {
        match self {
            Metric::Core(i) => (CORE[*i].get)(p, clock),
            Metric::Extra(d) => p
                .extra
                .get(d.key.as_ref())
                .map(|&v| metric::extra_on(d, p, v, clock)),
        }
        .filter(|v| v.is_finite())
    }
}

/// The declaration of a result's `extra` figure: the result's own, else its key as its name
/// with no unit and no direction claimed.
pub fn extra_def(r: &RunResult, key: &str) -> MetricDef {
    r.workload
        .metric(key)
        .cloned()
        .unwrap_or_else(|| MetricDef {
            key: key.to_string().into(),
            name: key.replace('_', " ").into(),
            unit: "".into(),
            better: Better::Neither,
            rate: false,
            combine: Default::default(),
        })
}

/// Every metric that has a value in at least one of the phases, core ones first, then the
/// workload's figures in key order (declared as the first result holding one declares it).
pub fn present<'a>(
    phases: impl IntoIterator<Item = (&'a RunResult, &'a PhaseResult)> + Clone,
) -> Vec<Metric> {
    let mut out: Vec<Metric> = (0..CORE.len())
        .map(Metric::Core)
        .filter(|m| {
            let mut all = phases.clone().into_iter().map(|(_, p)| p);
            all.any(|p| m.value(p).is_some())
                && metric::beside_disk_time(&m.key(), phases.clone().into_iter().map(|(_, p)| p))
                && metric::beside_cpu_wait(&m.key(), phases.clone().into_iter().map(|(_, p)| p))
        })
        .collect();
    let mut extra: Vec<(&str, &RunResult)> = Vec::new();
    for (r, p) in phases {
        for k in p.extra.keys() {
            if !extra.iter().any(|(e, _)| *e == k.as_str()) {
                extra.push((k, r));
            }
        }
    }
    extra.sort_by(|a, b| a.0.cmp(b.0));
    out.extend(
        extra
            .into_iter()
            .map(|(k, r)| Metric::Extra(extra_def(r, k))),
    );
    out
}

/// The metric that stands for a phase (see [`metric::main_metric`]).
pub fn main_metric<'a>(phases: impl IntoIterator<Item = &'a PhaseResult> + Clone) -> Metric {
    Metric::from_core(metric::main_metric(phases))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_figures_take_their_declaration_from_the_result() {
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": "fsgauge.run/1",
            "tool": {"name": "fsgauge", "version": "0"},
            "host": {"hostname": "h", "kernel": "k", "cpus": 1, "memory": 1},
            "testbed": {"label": "t", "fs": "ext4", "size": 1, "mkfs_args": [],
                        "mount_options": "", "journal": null, "memory_limit": null,
                        "backing": "dir", "device": null, "loop_direct_io": null, "path": "/"},
            "workload": {"kind": "create", "params": {},
                         "metrics": [{"key": "kib_per_s", "name": "file data rate",
                                      "unit": "KiB/s", "better": "higher", "rate": true}]},
            "rep": 0, "seed": 1, "started_at": "2026-01-01T00:00:00Z", "spec_hash": "",
            "conditions": {"cold": "none"}, "phases": [], "errors": []
        }))
        .unwrap();
        let d = extra_def(&r, "kib_per_s");
        assert_eq!(
            (d.better, d.rate, d.unit.as_ref()),
            (Better::Higher, true, "KiB/s")
        );
        // Undeclared: no direction, whatever the name says.
        let d = extra_def(&r, "files_per_s");
        assert_eq!(
            (d.better, d.rate, d.unit.as_ref()),
            (Better::Neither, false, "")
        );
        r.workload.metrics.clear();
        assert_eq!(extra_def(&r, "kib_per_s").better, Better::Neither);
        assert_eq!(
            Metric::core("elapsed").map(|m| m.def().better),
            Some(Better::Lower)
        );
    }
}
