//! Workloads: what is done to the filesystem, in measured phases. One file per workload; each
//! implements [`Workload`], its parameters are one struct (`clap::Args` + serde, see
//! [`params`]), and it is registered by one line in [`registry`], which makes it a plan kind
//! and a `fsgauge bench` subcommand.
//!
//! A workload gets a [`RunContext`]: its own directory on the target, the seed, the cold-cache
//! rule, and [`RunContext::phase`] to run a measured phase on one or more workers.

pub mod age;
pub mod clients;
mod context;
pub mod control;
pub mod create;
pub mod durable_tree;
pub mod exercise;
pub mod fdtree;
pub mod fsync;
pub mod inject;
pub mod interleave;
pub mod names;
pub mod params;
pub mod rate;
pub mod readtest;
pub mod registry;
pub mod tio;
pub mod tree;

use anyhow::Result;

use crate::base::units::Overflow;

pub use context::{ColdMode, CrashTally, CrashVerifier, LayoutHook, RunContext, Target};

/// A workload: a named sequence of measured phases with its parameters.
pub trait Workload: Send + Sync {
    /// The kind, as in `fsgauge bench KIND` and plan files.
    fn kind(&self) -> &'static str;

    /// Every parameter under its plan-file name (flags with `_` for `-`), defaults filled in.
    fn params(&self) -> serde_json::Value;

    /// Bytes of filesystem space the workload will occupy at most (used to refuse runs that
    /// cannot fit before anything is made). Computed with checked arithmetic: parameters whose
    /// estimate (or whose file and inode counts) would not fit in 64 bits are an error, never a
    /// wrapped or saturated figure.
    fn space_needed(&self) -> Result<u64, Overflow> {
        Ok(0)
    }

    /// Inodes the workload makes at most (files and directories), so that a plan can give an
    /// ext filesystem enough of them before it is made; the workload's own check before it
    /// starts uses the same figure. Saturating: [`Workload::space_needed`] refuses counts
    /// that do not fit.
    fn inodes_needed(&self) -> u64 {
        0
    }

    /// Memory the workload needs for itself (buffers), beyond fsgauge's baseline; checked as
    /// [`Workload::space_needed`].
    fn memory_needed(&self) -> Result<u64, Overflow> {
        Ok(0)
    }

    /// Checks parameters that depend on nothing else. Errors are bad input.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// Whether the workload does set-up of its own between its measured phases (aging a tree,
    /// copying it to a fresh twin) and so says itself when the measured part begins and ends
    /// ([`Target::measuring`]); otherwise the whole run is the measured part.
    fn sets_up_inside(&self) -> bool {
        false
    }

    /// The list-valued parameters that are sweep axes (outermost first): every combination of
    /// their values is one cell (see `registry::sweep::cells`), the same from flags and from plans.
    fn sweep_axes(&self) -> &'static [&'static str] {
        &[]
    }

    /// The parameter that counts the workload's concurrent workers (threads, clients), a sweep
    /// axis or not: report tables and plots draw a phase's throughput along it.
    fn line_axis(&self) -> Option<&'static str> {
        None
    }

    /// On a testbed, each cell of the sweep is its own run on a fresh filesystem, unless the
    /// workload's own parameters ask for all cells in one run (tio's `--fresh-fs off`).
    fn fresh_per_cell(&self) -> bool {
        true
    }

    /// The figures the workload records in its phases' `extra`, declared once: unit,
    /// direction, rate. The runner copies them into the result (`workload.metrics`).
    fn metrics(&self) -> &'static [crate::results::MetricDef] {
        &[]
    }

    /// The operation kinds its phases record, as the phases declare them (a workload whose
    /// phases read file data lists at least those), so that results written before an
    /// operation carried its declaration can be given it (`registry::declare_missing_metrics`).
    fn op_kinds(&self) -> Vec<crate::measure::OpDef> {
        Vec::new()
    }

    /// Runs the phases.
    fn run(&self, ctx: &mut RunContext) -> Result<()>;
}
