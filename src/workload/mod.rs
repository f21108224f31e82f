//! Workloads: what is done to the filesystem, in measured phases. One file per workload; each
//! implements [`Workload`] and is registered in [`crate::cli`] by one line.
//!
//! A workload gets a [`RunContext`]: its own directory on the target, the seed, the cold-cache
//! rule, and [`RunContext::phase`] to run a measured phase on one or more workers.

pub mod clients;
mod context;
pub mod create;
pub mod dirstream;
pub mod fdtree;
pub mod interleave;
pub mod names;
pub mod readtest;
pub mod registry;
pub mod tio;
pub mod tree;

use anyhow::Result;

pub use context::{ColdMode, LayoutHook, RunContext, Target};

/// A workload: a named sequence of measured phases with its parameters.
pub trait Workload: Send + Sync {
    /// The kind, as in `fsgauge bench KIND` and plan files.
    fn kind(&self) -> &'static str;

    /// Every parameter under its plan-file name (flags with `_` for `-`), defaults filled in.
    fn params(&self) -> serde_json::Value;

    /// Bytes of filesystem space the workload will occupy at most (used to refuse runs that
    /// cannot fit before anything is made).
    fn space_needed(&self) -> u64 {
        0
    }

    /// Memory the workload needs for itself (buffers), beyond fsgauge's baseline.
    fn memory_needed(&self) -> u64 {
        0
    }

    /// Checks parameters that depend on nothing else. Errors are bad input.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The figures the workload records in its phases' `extra`, declared once: unit,
    /// direction, rate. The runner copies them into the result (`workload.metrics`).
    fn metrics(&self) -> &'static [crate::results::MetricDef] {
        &[]
    }

    /// Runs the phases.
    fn run(&self, ctx: &mut RunContext) -> Result<()>;
}

/// Gives results written before declarations were recorded (no `workload.metrics`) the
/// declarations their kind makes today, so that reports of old result files show units and
/// directions too. A kind that is no longer known, or parameters that no longer build, leave
/// the result as it is (its figures are then shown with no direction claimed).
pub fn declare_missing_metrics(results: &mut [crate::results::RunResult]) {
    for r in results.iter_mut().filter(|r| r.workload.metrics.is_empty()) {
        let built = registry::find(&r.workload.kind).and_then(|k| {
            let params = match r.workload.params.as_object() {
                Some(_) => r.workload.params.clone(),
                None => serde_json::json!({}),
            };
            (k.build)(params)
                .or_else(|_| (k.build)(serde_json::json!({})))
                .ok()
        });
        if let Some(w) = built {
            r.workload.metrics = w.metrics().to_vec();
        }
    }
}
