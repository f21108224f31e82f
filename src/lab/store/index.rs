//! What the store keeps of one result file: the run's row, every figure of every phase, the
//! workload's scalar parameters. Made from the file alone, so that `store rebuild` makes the
//! same rows again.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Context, Result};

use crate::results::clock::Clock;
use crate::results::{metric, HostLoad, RunResult};

/// One run's row of the `runs` table (columns in [`super::schema::RUN_COLUMNS`] order).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub run_id: String,
    pub path: String,
    pub file_size: i64,
    pub file_mtime_ns: i64,
    pub started_at: String,
    pub plan: Option<String>,
    pub label: Option<String>,
    pub testbed: String,
    pub fs: String,
    pub workload: String,
    pub rep: i64,
    pub spec_hash: String,
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: Option<String>,
    pub cpus: i64,
    pub version: String,
    pub git_commit: Option<String>,
    pub device_profile: Option<String>,
    /// The machine's CPU steal, the most of any phase (a share 0–1); `None` where not told.
    pub steal: Option<f64>,
    /// CPU pressure (`some`), the most of any phase (a share 0–1); `None` where not told.
    pub cpu_pressure: Option<f64>,
    /// Other processes' cache drops during the phases, summed.
    pub foreign_cache_drops: i64,
    /// Attempts set aside (disturbed) before this one was kept.
    pub set_aside: i64,
}

/// One phase's row of the `phases` table: (phase, CPU steal, CPU pressure).
pub type PhaseLoad = (String, Option<f64>, Option<f64>);

/// A result file as the store indexes it.
#[derive(Debug, Clone)]
pub struct Indexed {
    pub run: RunRow,
    /// (phase, metric, value)
    pub metrics: Vec<(String, String, f64)>,
    /// Each phase's load: (phase, CPU steal, CPU pressure), shares 0–1 where told.
    pub phases: Vec<PhaseLoad>,
    /// (parameter, value as text)
    pub params: Vec<(String, String)>,
}

/// The size and modification time (ns) of a file, by which a change is noticed.
pub fn fingerprint(path: &Path) -> std::io::Result<(i64, i64)> {
    let md = std::fs::metadata(path)?;
    Ok((
        md.size() as i64,
        md.mtime() * 1_000_000_000 + md.mtime_nsec(),
    ))
}

/// The store's rows of one result read from `path`.
pub fn index(path: &Path, r: &RunResult) -> Result<Indexed> {
    let (file_size, file_mtime_ns) =
        fingerprint(path).with_context(|| format!("{}", path.display()))?;
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let env = r.environment.as_ref();
    let run = RunRow {
        run_id: r.identity(),
        path: path.to_string_lossy().into_owned(),
        file_size,
        file_mtime_ns,
        started_at: r.started_at.clone(),
        plan: r.study.as_ref().map(|s| s.plan.clone()),
        label: r.study.as_ref().map(|s| s.workload.clone()),
        testbed: r.testbed.label.clone(),
        fs: r.testbed.fs.clone(),
        workload: r.workload.kind.clone(),
        rep: i64::from(r.rep),
        spec_hash: r.spec_hash.clone(),
        hostname: r.host.hostname.clone(),
        kernel: r.host.kernel.clone(),
        cpu_model: env.map(|e| e.cpu_model.clone()).filter(|s| !s.is_empty()),
        cpus: i64::from(r.host.cpus),
        version: r.tool.version.clone(),
        git_commit: env
            .map(|e| e.build.commit.clone())
            .filter(|s| !s.is_empty()),
        device_profile: r.testbed.device_model.as_ref().map(|d| d.profile.clone()),
        steal: most(r, |l| l.steal),
        cpu_pressure: most(r, |l| l.cpu_pressure),
        foreign_cache_drops: r
            .phases
            .iter()
            .map(|p| i64::try_from(p.foreign_cache_drops).unwrap_or(i64::MAX))
            .fold(0i64, i64::saturating_add),
        set_aside: i64::try_from(r.set_aside.len()).unwrap_or(i64::MAX),
    };
    Ok(Indexed {
        run,
        metrics: figures(r),
        phases: phase_loads(r),
        params: params(&r.workload.params),
    })
}

/// The most of one share of the machine's load over the run's phases; `None` when no phase
/// tells it.
fn most(r: &RunResult, share: impl Fn(&HostLoad) -> Option<f64>) -> Option<f64> {
    r.phases
        .iter()
        .filter_map(|p| p.host_load.as_ref().and_then(&share))
        .filter(|v| v.is_finite())
        .reduce(f64::max)
}

/// Each phase's CPU steal and CPU pressure, as its `host_load` tells them (a share that is not
/// a number is not known).
fn phase_loads(r: &RunResult) -> Vec<PhaseLoad> {
    let finite = |v: Option<f64>| v.filter(|v| v.is_finite());
    let mut out: Vec<PhaseLoad> = Vec::new();
    for p in &r.phases {
        // Phase names are a run's own; one row each (the first, should a name repeat).
        if out.iter().any(|(name, _, _)| name == &p.name) {
            continue;
        }
        let load = p.host_load.as_ref();
        out.push((
            p.name.clone(),
            finite(load.and_then(|l| l.steal)),
            finite(load.and_then(|l| l.cpu_pressure)),
        ));
    }
    out
}

/// Every figure of every phase: the core metrics as findings read them (elapsed time and
/// rates on the disk's clock on an emulated disk), then the workload's own.
fn figures(r: &RunResult) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for p in &r.phases {
        for c in metric::CORE {
            if let Some(v) = c.value(p).filter(|v| v.is_finite()) {
                out.push((p.name.clone(), c.def.key.to_string(), v));
            }
        }
        for (k, &v) in &p.extra {
            let v = match r.workload.metric(k) {
                Some(def) => metric::extra_on(def, p, v, Clock::Disk),
                None => v,
            };
            if v.is_finite() && !out.iter().any(|(ph, m, _)| ph == &p.name && m == k) {
                out.push((p.name.clone(), k.clone(), v));
            }
        }
    }
    out
}

/// The workload's scalar parameters as text (a string as itself, a number or flag as JSON).
fn params(v: &serde_json::Value) -> Vec<(String, String)> {
    let Some(map) = v.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k.clone(), s.clone())),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => {
                Some((k.clone(), v.to_string()))
            }
            _ => None,
        })
        .collect()
}
