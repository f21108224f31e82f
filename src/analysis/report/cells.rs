//! The report's cells (testbed × workload × phase, each metric summarised over the
//! repetitions), the labels that name their workloads, and the [`Report`] that holds them: the
//! shapes that the model builds and the tables and plots read, below all of them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::metrics::{self, Better, Metric};
use crate::analysis::findings::sentence::Stated;
use crate::analysis::stats::{self, Summary};
use crate::base::text::Table;
use crate::base::units::format_size;
use crate::results::tables::Against;
use crate::results::{PhaseResult, RunResult};

/// One metric of one cell, over the cell's repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct CellMetric {
    pub key: String,
    pub name: String,
    pub unit: String,
    pub better: Better,
    /// The value of each repetition, in repetition order.
    pub values: Vec<f64>,
    /// The host and repetition of each value (beside `values`): `compare` pairs within a
    /// machine by them.
    #[serde(skip)]
    pub origins: Vec<(String, u32)>,
    pub summary: Summary,
    /// Harmonic mean, for rates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harmonic_mean: Option<f64>,
}

/// Testbed × workload × phase.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub testbed: String,
    pub workload: String,
    pub phase: String,
    /// Thread or client count of the runs (from the parameter the workload declares as its
    /// line axis, else the phase's worker count).
    pub threads: u64,
    /// What `threads` counts: the parameter the workload declares as its line axis, else
    /// `workers`.
    pub axis: String,
    /// The workload label without its line axis (lines against threads join on it).
    pub series: String,
    /// The phase name without a sweep's thread/client suffix (see [`line_phase`]).
    pub line_phase: String,
    /// The key of the metric that stands for the phase.
    pub main: String,
    pub metrics: Vec<CellMetric>,
}

impl Cell {
    pub fn metric(&self, key: &str) -> Option<&CellMetric> {
        self.metrics.iter().find(|m| m.key == key)
    }

    pub fn main_metric(&self) -> Option<&CellMetric> {
        self.metric(&self.main)
    }
}

/// One run's environment, for the report's environment table.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub testbed: String,
    pub workload: String,
    pub rep: u32,
    pub fs: String,
    pub size: String,
    pub mkfs: String,
    pub mount: String,
    pub journal: String,
    pub memory_limit: String,
    pub backing: String,
    pub device: String,
    pub loop_direct_io: String,
    pub cold: String,
    pub kernel: String,
    pub host: String,
    pub tool: String,
    pub started_at: String,
    pub seed: u64,
    pub spec_hash: String,
    /// The machine's CPU steal and CPU pressure over the run's measured phases (wall-time
    /// weighted); empty for results that do not record them.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub machine_load: String,
    /// The share of the run's measured phases' thread time that fsgauge's own threads spent
    /// runnable but waiting for a CPU (`4.2%`); empty for results that do not record it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cpu_wait: String,
}

/// Everything a report shows.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub title: String,
    pub testbeds: Vec<String>,
    pub workloads: Vec<String>,
    /// The testbed that percentages are against.
    pub baseline: String,
    pub cells: Vec<Cell>,
    pub tables: Vec<Table>,
    pub warnings: Vec<String>,
    pub environment: Vec<Environment>,
    /// The environment fields whose values differ between the runs (sysctls, kernel, mkfs
    /// version, device queue settings, ...), each value with its testbeds: the likely
    /// explanation of a difference, shown before the numbers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environment_differs: Vec<crate::results::Spread>,
    /// The answer to each question the results carry (none without questions): the report
    /// leads with them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Stated>,
    #[serde(skip)]
    pub results: Vec<RunResult>,
    /// The figures kinds registered, with the workload (label) whose cells they draw, in the
    /// order of the cells.
    #[serde(skip)]
    pub against: Vec<(String, Against)>,
}

/// The label of each result's workload: its kind, plus the parameters that differ between the
/// results of that kind (`tree files=10 file_size=8M`), so that two workloads of one kind in a
/// study stay apart and one alone stays short. `strip` leaves those parameters out.
pub fn workload_labels(results: &[RunResult], strip: &[&str]) -> Vec<String> {
    labels_without(results, |_, k| strip.contains(&k))
}

/// The workload labels without each result's line axis (see [`Cell::series`]).
fn series_labels(results: &[RunResult]) -> Vec<String> {
    labels_without(results, |r, k| r.workload.line_axis.as_deref() == Some(k))
}

/// [`workload_labels`], leaving out the parameters `strip` says of a result.
fn labels_without(results: &[RunResult], strip: impl Fn(&RunResult, &str) -> bool) -> Vec<String> {
    let mut by_kind: BTreeMap<&str, Vec<&serde_json::Value>> = BTreeMap::new();
    for r in results {
        by_kind
            .entry(r.workload.kind.as_str())
            .or_default()
            .push(&r.workload.params);
    }
    results
        .iter()
        .map(|r| {
            let kind = r.workload.kind.as_str();
            let all = &by_kind[kind];
            let mut label = kind.to_string();
            if let Some(map) = r.workload.params.as_object() {
                for (k, v) in map {
                    if strip(r, k) {
                        continue;
                    }
                    if all.iter().any(|o| o.get(k) != Some(v)) {
                        let shown = show_param(r.workload.is_size(k), v);
                        label.push_str(&format!(" {k}={shown}"));
                    }
                }
            }
            label
        })
        .collect()
}

/// A parameter's value as a label shows it; `size`: the workload declared it a size in bytes.
fn show_param(size: bool, v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) if size && n.as_u64().is_some() => {
            format_size(n.as_u64().unwrap_or(0))
        }
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Thread (or client) count of a run's phase: the value of the parameter its workload declares
/// as its line axis, else the phase's worker count.
pub fn threads_of(r: &RunResult, p: &PhaseResult) -> u64 {
    let axis = r.workload.line_axis.as_deref();
    match axis.and_then(|k| r.workload.params.get(k)) {
        Some(v) if v.as_u64().is_some() => v.as_u64().unwrap_or(1),
        // A sweep parameter of one value (`threads = [4]`).
        Some(serde_json::Value::Array(a)) if a.len() == 1 && a[0].as_u64().is_some() => {
            a[0].as_u64().unwrap_or(1)
        }
        _ => (p.workers.len() as u64).max(1),
    }
}

/// A phase name without the thread or client count a sweep puts at its end (`seqwrite-4K-t4`
/// → `seqwrite-4K`, `mix-c8` → `mix`), so that cells of one sweep line up by threads.
pub fn line_phase(phase: &str) -> String {
    if let Some((head, tail)) = phase.rsplit_once('-') {
        let mut chars = tail.chars();
        if matches!(chars.next(), Some('t' | 'c'))
            && !chars.as_str().is_empty()
            && chars.all(|c| c.is_ascii_digit())
        {
            return head.to_string();
        }
    }
    phase.to_string()
}

/// Puts results in the stable report order.
pub fn sort_results(results: &mut [RunResult]) {
    results.sort_by(|a, b| {
        (
            &a.started_at,
            &a.testbed.label,
            &a.workload.kind,
            a.rep,
            &a.spec_hash,
        )
            .cmp(&(
                &b.started_at,
                &b.testbed.label,
                &b.workload.kind,
                b.rep,
                &b.spec_hash,
            ))
    });
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

/// Groups results into cells and summarises every metric.
pub fn cells(results: &[RunResult]) -> (Vec<String>, Vec<String>, Vec<Cell>) {
    let labels = workload_labels(results, &[]);
    let series = series_labels(results);
    let mut testbeds = Vec::new();
    let mut workloads = Vec::new();
    for (i, r) in results.iter().enumerate() {
        push_unique(&mut testbeds, &r.testbed.label);
        push_unique(&mut workloads, &labels[i]);
    }
    // (testbed, workload, phase) -> its phases with their runs, in first-appearance order.
    let groups = stats::group(results.iter().enumerate().flat_map(|(i, r)| {
        let labels = &labels;
        r.phases.iter().map(move |p| {
            (
                (r.testbed.label.clone(), labels[i].clone(), p.name.clone()),
                (i, r, p),
            )
        })
    }));
    // Cells ordered by workload, then phase (first appearance), then testbed.
    let mut phase_order: Vec<(String, String)> = Vec::new();
    for ((_, w, p), _) in &groups {
        let k = (w.clone(), p.clone());
        if !phase_order.contains(&k) {
            phase_order.push(k);
        }
    }
    let mut out = Vec::new();
    for w in &workloads {
        for (pw, ph) in &phase_order {
            if pw != w {
                continue;
            }
            for t in &testbeds {
                let key = (t.clone(), w.clone(), ph.clone());
                let Some((_, members)) = groups.iter().find(|(k, _)| *k == key) else {
                    continue;
                };
                let (first, r0, p0) = members[0];
                let (threads, series) = (threads_of(r0, p0), &series[first]);
                let phases: Vec<(&RunResult, &PhaseResult)> =
                    members.iter().map(|&(_, r, p)| (r, p)).collect();
                let main = metrics::main_metric(phases.iter().map(|(_, p)| *p)).key();
                let ms = metrics::present(phases.iter().copied())
                    .into_iter()
                    .filter_map(|m| cell_metric(&m, &phases))
                    .collect();
                out.push(Cell {
                    testbed: t.clone(),
                    workload: w.clone(),
                    phase: ph.clone(),
                    threads,
                    axis: r0
                        .workload
                        .line_axis
                        .clone()
                        .unwrap_or_else(|| "workers".into()),
                    series: series.clone(),
                    line_phase: line_phase(ph),
                    main,
                    metrics: ms,
                });
            }
        }
    }
    (testbeds, workloads, out)
}

fn cell_metric(m: &Metric, phases: &[(&RunResult, &PhaseResult)]) -> Option<CellMetric> {
    let (values, origins): (Vec<f64>, Vec<(String, u32)>) = phases
        .iter()
        .filter_map(|(r, p)| Some((m.value(p)?, (r.host.hostname.clone(), r.rep))))
        .unzip();
    let summary = stats::summarize(&values)?;
    let def = m.def();
    Some(CellMetric {
        key: m.key(),
        name: def.name.to_string(),
        unit: def.unit.to_string(),
        better: def.better,
        harmonic_mean: if def.rate {
            stats::harmonic_mean(&values)
        } else {
            None
        },
        values,
        origins,
        summary,
    })
}
