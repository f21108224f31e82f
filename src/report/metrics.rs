//! The metrics a report shows, declared once as data: name, unit, whether higher is better,
//! whether it is a rate (harmonic mean meaningful), and how to read it from a phase. The same
//! declaration drives the tables, the plots and the direction of "better" in comparisons
//! (as fio's option table and mmtests' `preferhigher` do).
//!
//! Besides the built-in metrics, every workload-specific figure a phase records in
//! [`PhaseResult::extra`] is a metric too; its direction is read from its name (`..._per_s`
//! and `..._kib_s` are rates, higher is better), otherwise none is claimed.

use serde::Serialize;

use crate::results::PhaseResult;

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    /// No direction is claimed (a count, a workload-specific figure).
    Neither,
}

/// A built-in metric.
pub struct MetricDef {
    /// Stable key (JSON, CSV).
    pub key: &'static str,
    /// Column and axis name.
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
    /// A rate: the harmonic mean is reported too.
    pub rate: bool,
    /// The value of a phase; `None` when it does not apply (no bytes, no latency, no device).
    pub get: fn(&PhaseResult) -> Option<f64>,
}

/// Every built-in metric, in report order.
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        key: "elapsed",
        name: "elapsed",
        unit: "s",
        better: Better::Lower,
        rate: false,
        get: |p| Some(p.wall_s),
    },
    MetricDef {
        key: "sys",
        name: "sys time",
        unit: "s",
        better: Better::Lower,
        rate: false,
        get: |p| Some(p.sys_s),
    },
    MetricDef {
        key: "user",
        name: "user time",
        unit: "s",
        better: Better::Lower,
        rate: false,
        get: |p| Some(p.user_s),
    },
    MetricDef {
        key: "ops_per_s",
        name: "op rate",
        unit: "ops/s",
        better: Better::Higher,
        rate: true,
        get: |p| (p.ops > 0).then_some(p.ops_per_s),
    },
    MetricDef {
        key: "mb_per_s",
        name: "throughput",
        unit: "MB/s",
        better: Better::Higher,
        rate: true,
        get: |p| (p.bytes > 0).then_some(p.bytes_per_s / 1e6),
    },
    MetricDef {
        key: "lat_mean",
        name: "mean latency",
        unit: "ms",
        better: Better::Lower,
        rate: false,
        get: |p| (p.latency.count > 0).then_some(p.latency.mean_ns / 1e6),
    },
    MetricDef {
        key: "lat_p99",
        name: "p99 latency",
        unit: "ms",
        better: Better::Lower,
        rate: false,
        get: |p| (p.latency.count > 0).then_some(p.latency.p99_ns as f64 / 1e6),
    },
    MetricDef {
        key: "lat_max",
        name: "max latency",
        unit: "ms",
        better: Better::Lower,
        rate: false,
        get: |p| (p.latency.count > 0).then_some(p.latency.max_ns as f64 / 1e6),
    },
    MetricDef {
        key: "over_2s",
        name: "ops over 2 s",
        unit: "%",
        better: Better::Lower,
        rate: false,
        get: |p| {
            (p.latency.count > 0).then(|| p.latency.over_2s as f64 * 100.0 / p.latency.count as f64)
        },
    },
    MetricDef {
        key: "dev_write_mb",
        name: "device writes",
        unit: "MB",
        better: Better::Lower,
        rate: false,
        get: |p| p.device.map(|d| d.write_bytes as f64 / 1e6),
    },
    MetricDef {
        key: "dev_read_mb",
        name: "device reads",
        unit: "MB",
        better: Better::Lower,
        rate: false,
        get: |p| p.device.map(|d| d.read_bytes as f64 / 1e6),
    },
    MetricDef {
        key: "write_amp",
        name: "write amplification",
        unit: "x",
        better: Better::Lower,
        rate: false,
        get: |p| match p.device {
            Some(d) if p.bytes > 0 && d.write_bytes > 0 => {
                Some(d.write_bytes as f64 / p.bytes as f64)
            }
            _ => None,
        },
    },
];

/// A metric: built in, or a workload's own figure from `extra`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Metric {
    Builtin(usize),
    Extra(String),
}

impl Metric {
    /// Looks a built-in metric up by key.
    pub fn by_key(key: &str) -> Option<Metric> {
        METRICS
            .iter()
            .position(|m| m.key == key)
            .map(Metric::Builtin)
            .or_else(|| key.strip_prefix("extra.").map(|k| Metric::Extra(k.into())))
    }

    pub fn key(&self) -> String {
        match self {
            Metric::Builtin(i) => METRICS[*i].key.to_string(),
            Metric::Extra(k) => format!("extra.{k}"),
        }
    }

    pub fn name(&self) -> String {
        match self {
            Metric::Builtin(i) => METRICS[*i].name.to_string(),
            Metric::Extra(k) => k.replace('_', " "),
        }
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Metric::Builtin(i) => METRICS[*i].unit,
            Metric::Extra(_) => "",
        }
    }

    /// `throughput (MB/s)`.
    pub fn label(&self) -> String {
        match self.unit() {
            "" => self.name(),
            u => format!("{} ({u})", self.name()),
        }
    }

    pub fn better(&self) -> Better {
        match self {
            Metric::Builtin(i) => METRICS[*i].better,
            Metric::Extra(k) if is_rate_name(k) => Better::Higher,
            Metric::Extra(_) => Better::Neither,
        }
    }

    pub fn is_rate(&self) -> bool {
        match self {
            Metric::Builtin(i) => METRICS[*i].rate,
            Metric::Extra(k) => is_rate_name(k),
        }
    }

    /// The value in a phase.
    pub fn value(&self, p: &PhaseResult) -> Option<f64> {
        match self {
            Metric::Builtin(i) => (METRICS[*i].get)(p),
            Metric::Extra(k) => p.extra.get(k).copied(),
        }
        .filter(|v| v.is_finite())
    }
}

fn is_rate_name(k: &str) -> bool {
    k.ends_with("per_s") || k.ends_with("_kib_s") || k.ends_with("_mb_s") || k.ends_with("_s_rate")
}

/// Every metric that has a value in at least one of the phases, built-in ones first.
pub fn present<'a>(phases: impl IntoIterator<Item = &'a PhaseResult> + Clone) -> Vec<Metric> {
    let mut out: Vec<Metric> = (0..METRICS.len())
        .map(Metric::Builtin)
        .filter(|m| phases.clone().into_iter().any(|p| m.value(p).is_some()))
        .collect();
    let mut extra: Vec<String> = phases
        .into_iter()
        .flat_map(|p| p.extra.keys().cloned())
        .collect();
    extra.sort();
    extra.dedup();
    out.extend(extra.into_iter().map(Metric::Extra));
    out
}

/// The metric that stands for a phase in bars and the mean ± sd table: throughput when the
/// phase moved data, else operations per second, else elapsed time.
pub fn main_metric<'a>(phases: impl IntoIterator<Item = &'a PhaseResult> + Clone) -> Metric {
    for key in ["mb_per_s", "ops_per_s"] {
        let m = Metric::by_key(key).expect("declared above");
        if phases.clone().into_iter().any(|p| m.value(p).is_some()) {
            return m;
        }
    }
    Metric::by_key("elapsed").expect("declared above")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_directions_declared() {
        let mut keys: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), METRICS.len());
        assert_eq!(Metric::by_key("elapsed").unwrap().better(), Better::Lower);
        assert_eq!(Metric::by_key("mb_per_s").unwrap().better(), Better::Higher);
        assert_eq!(
            Metric::Extra("create_kib_per_s".into()).better(),
            Better::Higher
        );
        assert_eq!(Metric::Extra("files".into()).better(), Better::Neither);
        assert_eq!(
            Metric::by_key("extra.files"),
            Some(Metric::Extra("files".into()))
        );
    }
}
