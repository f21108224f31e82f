//! What a run records: the spec that defines it (hashed into its result's `spec_hash`), the
//! conditions it was made under, its result assembled from the target, the workload's phases
//! and the conditioning's, and that result written.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;

use super::request::{Outcome, Place, Precondition, Rep, RunOptions};
use crate::results::{write_result, Conditions, Environment, RunRecord, RunResult};
use crate::testbed::{MemCharger, MemLimit};
use crate::workload::Target;

/// Everything that defines a run, as hashed into its result's `spec_hash`.
pub(super) fn spec(r: Rep<'_>) -> serde_json::Value {
    let (place, wl, opts) = (r.place, r.wl, r.opts);
    let place_v = match place {
        Place::Testbed(s) => serde_json::to_value(s).unwrap_or_default(),
        Place::Dir(p) => serde_json::json!({ "dir": p }),
    };
    let mut v = serde_json::json!({
        "place": place_v,
        "workload": { "kind": wl.kind(), "params": wl.params() },
        "cold": opts.cold.name(),
        "mem_limit": opts.mem_limit,
        "mem_charge": opts.mem_charge,
        "seed": r.seed,
        "rep": r.rep,
    });
    // Only present when used, so hashes of runs without one stay as they were.
    if let Some(e) = opts.dirty_expire {
        v["dirty_expire_s"] = serde_json::json!(e.secs());
    }
    if let Some(Precondition(p)) = &opts.precondition {
        v["precondition"] = serde_json::json!({ "kind": p.kind(), "params": p.params() });
    }
    v
}

/// The conditions a run was made under: the cold mode, the memory limit and charger.
pub(super) fn conditions(
    opts: &RunOptions,
    mem_limit: Option<&MemLimit>,
    charger: Option<&MemCharger>,
) -> Conditions {
    let dirty = mem_limit.and_then(|m| m.dirty_limits());
    Conditions {
        cold: opts.cold.name().into(),
        mem_limit: opts.mem_limit,
        mem_limit_cgroup: mem_limit.map(|m| format!("{:?}", m.version()).to_lowercase()),
        mem_limit_peak: mem_limit.and_then(|m| m.peak()),
        mem_limit_dirty_bytes: dirty.map(|d| d.dirty_bytes),
        mem_limit_dirty_background_bytes: dirty.map(|d| d.background_bytes),
        mem_charge: opts.mem_charge,
        mem_charge_locked: charger.map(|c| c.locked()),
        mem_charge_available: charger.map(|c| c.available_after()),
        dirty_expire_s: opts.dirty_expire.map(|d| d.secs()),
    }
}

/// The workload's layout record, with the conditioning's under `precondition`.
pub(super) fn with_precondition(
    layout: Option<serde_json::Value>,
    pre: Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    match (layout, pre) {
        (Some(mut w), Some(p)) if w.is_object() => {
            w["precondition"] = p;
            Some(w)
        }
        (None, Some(p)) => Some(serde_json::json!({ "precondition": p })),
        (w, _) => w,
    }
}

/// The run's result: its testbed as it is now (with the environment read while it is still
/// attached), the workload with every figure its phases (and the conditioning's) declare.
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
    target: &Target,
    r: Rep<'_>,
    started: SystemTime,
    conditions: Conditions,
    phases: Vec<crate::results::PhaseResult>,
    layout: Option<serde_json::Value>,
    warnings: Vec<String>,
    mpi: Option<crate::results::MpiInfo>,
) -> Result<RunResult> {
    let (wl, opts, seed, rep) = (r.wl, r.opts, r.seed, r.rep);
    let mut testbed = target.info();
    testbed.memory_limit = opts.mem_limit;
    // Read after the measured phases, while the testbed is still attached.
    let environment =
        Some(Environment::collect(&testbed).with_nice(crate::host::priority::current()));
    // The conditioning phases (aging) are part of the result: their figures are declared too.
    let mut metrics = wl.metrics().to_vec();
    if let Some(Precondition(p)) = &opts.precondition {
        for m in p.metrics() {
            if !metrics.iter().any(|d| d.key == m.key) {
                metrics.push(m.clone());
            }
        }
    }
    let spec = spec(r);
    let mut result = RunResult::assemble(RunRecord {
        testbed,
        workload: {
            let mut w = crate::workload::registry::workload_info(wl);
            w.metrics = metrics;
            w
        },
        rep,
        seed,
        started,
        spec,
        conditions,
        phases,
        layout,
        errors: warnings,
        mpi,
        environment,
        crash: None,
    });
    result.study = opts.study.clone();
    Ok(result)
}

/// Puts the path the user knows (`shown`) back in place of the pinned one (`/proc/self/fd/N/.`)
/// in every string of a record (the layout's root and its worst files' paths).
pub(super) fn unpin(v: &mut serde_json::Value, pinned: &Path, shown: &Path) {
    match v {
        serde_json::Value::String(s) => {
            if let Ok(rest) = Path::new(s.as_str()).strip_prefix(pinned) {
                let real = if rest.as_os_str().is_empty() {
                    shown.to_path_buf()
                } else {
                    shown.join(rest)
                };
                *s = real.display().to_string();
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| unpin(x, pinned, shown)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| unpin(x, pinned, shown)),
        _ => {}
    }
}

/// The run's outcome: its result, written to the results directory when the options name one.
pub(super) fn write_outcome(result: RunResult, opts: &RunOptions) -> Result<Outcome> {
    let path = match &opts.out {
        Some(dir) => Some(write_result(dir, &result)?),
        None => None,
    };
    Ok(Outcome { result, path })
}
