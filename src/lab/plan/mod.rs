//! Plans: a whole study in one TOML file — the testbeds to build, the workloads to run on each,
//! how often, and how the filesystem is conditioned — expanded into the matrix of runs
//! (testbed × workload × repetition) that the runner executes one by one.
//!
//! A plan is checked completely before anything is made: malformed TOML, unknown fields, a
//! workload kind that is not registered, a parameter of the wrong type, a testbed that cannot be
//! built or a matrix that does not fit on the disk are all errors that name the file, line and
//! column and the field, and list the allowed values. Workload parameters are each workload's own
//! serde struct (see [`crate::workload::registry`]), under the names of its command-line flags
//! with `_` for `-`, so a new workload is usable from plans by its one registry line.
//!
//! ```toml
//! name = "lowmem"           # optional; default: the file name
//! description = "..."       # optional
//! reps = 3                  # or "auto": with questions, repeat until every question is
//! # cv_target = 0.05        #   decided; without, until the CV of the run time is at most
//! # max_reps = 10           #   cv_target; at least 3 and at most max_reps runs per cell
//! fresh = "per-run"         # or "per-testbed": one filesystem for all runs on a testbed
//! cold = "drop"             # between phases: none | drop | remount
//! seed = 1                  # default 1: plans are reproducible, and --resume relies on it
//! layout = true             # reps, seed, cold and layout are the run settings: the flags of
//!                           #   the same names (--seed ...) declare them, and win over them
//!
//! [testbed_defaults]        # optional: the keys of a [[testbed]] (but label) that every
//! fs = "ext4"               #   testbed has unless it writes them itself (`size` counts as
//! mem_limit = "128M"        #   `fs_size`, ...); errors in them point here
//!
//! [[testbed]]               # one per configuration
//! label = "ext4-noextent"   # default: the fs name; labels are unique
//! fs = "ext4"               # ext2 | ext3 | ext4 | xfs | btrfs
//! fs_size = "2G"            # the testbed flags, `_` for `-` (default 2G); the old keys
//! mkfs_opts = "-O ^extent,^64bit" #  size, mkfs and mount still work
//! mount_opts = "data=ordered"
//! journal = "ram:64M"       # external journal: ram:SIZE | file:SIZE
//! mem_limit = "128M"        # memory cgroup limit of the runs, page cache included
//! backing = "file"          # file | ram
//! # workdir, loop_direct_io = false, optional = true (skip when its mkfs is missing)
//!
//! [[workload]]              # kind plus the workload's flags, `_` for `-`
//! kind = "tree"
//! label = "big"             # optional; default: the kind (`kind#N` when a kind appears
//! dirs = 14                 #   more than once); unique, and not a testbed label
//! files = 10
//! file_size = "8M"
//!
//! [[question]]              # what the study asks; the report answers each with a finding
//! id = "extents"            # default q1, q2, ... by position; unique
//! ask = "Do extents speed up large-file deletes?"   # optional, in words
//! baseline = "ext4-noextent"  # two testbed labels, two workload labels, or two phase names
//! variant = "ext4"            #   (two phases of the same runs when neither is a label)
//! workload = "big"          # the cell's other coordinates: the workload label when the plan
//! # testbed = "..."         #   has several and the question does not compare workloads; the
//! phase = "delete"          #   testbed label likewise; the phase unless comparing phases
//! metric = "elapsed"        # a core metric key (elapsed, sys, ops_per_s, mb_per_s, ...) or
//!                           #   one of the workload's own figures
//! # where = { threads = 8 } # one cell of a sweep: parameters of the workload, at sweep values
//! published = 0.15          # optional: the published ratio variant / baseline (> 0)
//! source = "study 1: 8.88 s -> 1.29 s"   # optional
//! # epsilon = 0.05         # "no change" band, in (0, 1); default 5%
//! ```
//!
//! Questions are resolved before anything is made: baseline and variant must both be testbed
//! labels or both workload labels (or both neither, read as phases), the cell's coordinates
//! must name entries of the plan, the metric must be one the workload records; errors point at
//! the field. Phase names are known only from a run, so a question's phases are checked on the
//! first result of each cell it reads, before that result is written. Every result of the plan
//! carries the plan's name, its workload entry's label and the questions (`study`), outside the
//! spec hash: adding a question does not make finished runs new experiments, and `--resume`
//! writes the new questions into the results it reuses. With questions and `reps = "auto"`,
//! each further round adds one repetition to every cell an undecided question reads (both
//! sides), in matrix order, so runs alternate between testbeds; with `fresh = "per-testbed"`
//! and questions, every testbed's filesystem is built once and kept until the end, and runs
//! alternate between them repetition by repetition, as they do with `"per-run"`.
//!
//! A list on a workload's sweep axis (`threads = [1, 4, 8]`, `mode = [...]`) is a sweep: with
//! `fresh = "per-run"` every cell is its own run on a fresh filesystem with its own result (as
//! `fsgauge bench KIND --fs` runs it); with `"per-testbed"` the cells are phases of one run.
//!
//! `extends = "PRESET"` makes a plan of a built-in preset and the changes the plan states:
//! its top-level keys replace the preset's (but for its name, its own), its entries merge key
//! by key into the preset's entries of the same label, and `drop_testbeds`/`drop_workloads`/`drop_questions` leave some
//! out ([`extends`] has the rule). Errors point into the plan or the preset, wherever the line
//! at fault is written.
//!
//! `layout = true` records block layout and free space at each run's layout point. `[age]`
//! holds the parameters of the `age` workload (e.g. `mode = "append"`, `usage = [75.0]`): every
//! run's filesystem is aged first, and the workload then runs on the aged filesystem; the aging
//! checkpoints are phases of the run's result.

mod execute;
mod existing;
mod extends;
mod fault;
mod fit;
mod limits;
mod parse;
pub mod presets;
mod question;
mod room;
pub(crate) mod scale;
mod source;
mod testbeds;
mod workloads;

use std::sync::Arc;

use std::path::PathBuf;

use crate::device::ProfileRef;
use crate::lab::runner::params::RunSettings;
use crate::testbed::TestbedSpec;
use crate::workload::{ColdMode, Workload};

pub use execute::{
    cells_to_repeat, check, estimate, execute, execute_block, existing_results, first_round,
    interleaved, main_metric, matrix, run_hash, smoke, study_info, Estimate, ExecOptions, Executed,
    Matrix, PlannedRun, SMOKE_SCALE,
};
pub use existing::DISTURBED_ATTEMPTS;
pub use fault::Location;
pub use limits::MAX_RUNS;
#[cfg(test)]
pub(crate) use parse::{parse_test, setting_keys, settings_of, OWN_KEYS};
pub use question::{check_phases, PlanQuestion};
pub use scale::{scale_class, ScaleClass, FIELD_SCALES};

/// Parses and validates a plan; `source` names it in errors (a path, or `preset NAME`). A plan
/// that `extends` a preset is merged with it first ([`extends`]), and its errors point into the
/// file that wrote the line at fault.
pub fn parse(text: &str, source: &str, opts: &ParseOptions) -> anyhow::Result<Plan> {
    let own = source::Src::new(source, text);
    match extends::resolve(&own, &presets::lookup)? {
        None => parse::parse_src(&own, opts),
        Some(r) => parse::parse_src(
            &source::Src::with_origins(source, &r.text, Some(&r.origins)),
            opts,
        ),
    }
}

/// The whole plan: `text` itself, or, when it extends a preset, the plan resolved — its own
/// opening comments on top, then every key the preset and it give, without `extends`.
pub fn resolved_text(text: &str, source: &str) -> anyhow::Result<String> {
    let own = source::Src::new(source, text);
    Ok(extends::resolve(&own, &presets::lookup)?.map_or_else(|| text.to_string(), |r| r.text))
}

/// What the command line adds to a plan.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// `--scale F` (1 when absent).
    pub scale: Option<f64>,
    /// `--workdir DIR`: where images go, for every testbed.
    pub workdir: Option<PathBuf>,
    /// `--device-model PROFILE`: every testbed on this emulated disk (each keeps its
    /// `device_offset` and `device_model_during`).
    pub device_model: Option<ProfileRef>,
    /// The run settings given as flags (`--reps`, `--seed`, `--cold`, `--layout`): each one
    /// given wins over the plan's key of the same name.
    pub settings: RunSettings,
    /// `--mem-limit SIZE`: every testbed's memory limit, over its `mem_limit`.
    pub mem_limit: Option<u64>,
}

/// Default target of `reps = "auto"`: stop when the run time varies by less than 5%.
pub const AUTO_CV_TARGET: f64 = 0.05;
/// Default cap of `reps = "auto"`.
pub const AUTO_MAX_REPS: u32 = 10;
/// `reps = "auto"` always makes at least this many runs (a CV of two values means little).
pub const AUTO_MIN_REPS: u32 = 3;

/// How often each testbed × workload cell runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reps {
    /// Exactly this many repetitions.
    Fixed(u32),
    /// Repeat until the coefficient of variation of the run's elapsed time (the sum of its
    /// phases' wall times) is at most `cv`, with at least [`AUTO_MIN_REPS`] and at most `max`
    /// runs (as the Phoronix Test Suite does).
    Auto { cv: f64, max: u32 },
}

impl Reps {
    /// Repetitions made in the first round.
    pub fn initial(self) -> u32 {
        match self {
            Reps::Fixed(n) => n,
            Reps::Auto { max, .. } => AUTO_MIN_REPS.min(max),
        }
    }

    /// The most repetitions a cell can get.
    pub fn max(self) -> u32 {
        match self {
            Reps::Fixed(n) => n,
            Reps::Auto { max, .. } => max,
        }
    }
}

crate::choice! {
    /// When testbeds are rebuilt.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Fresh("fresh") {
        /// A fresh filesystem for every run (the default, as the block-reservation study did).
        PerRun = "per-run",
        /// One filesystem per testbed entry, used by all its runs in turn.
        PerTestbed = "per-testbed",
    }
}

/// One `[[testbed]]` entry, validated.
#[derive(Debug, Clone)]
pub struct PlanTestbed {
    pub spec: TestbedSpec,
    /// Memory limit for runs on this testbed (cgroup, page cache included).
    pub mem_limit: Option<u64>,
    /// Skip this testbed (with a note) when its mkfs is not installed, instead of failing.
    pub optional: bool,
    /// Where the entry is in the plan.
    pub at: Location,
}

/// One `[[workload]]` entry, validated: its kind and parameters (as written, sizes as bytes
/// once scaled), and the built workload.
#[derive(Clone)]
pub struct PlanWorkload {
    pub kind: &'static str,
    /// The entry's label (`label = ...`; default the kind, `kind#N` when a kind appears more
    /// than once): how questions and results name it. Every cell of a split sweep has its
    /// entry's label.
    pub label: String,
    /// MPI ranks the workload is meant to run on (`ranks = N`): documentation, shown by
    /// `--dry-run`; `fsgauge run` itself is one process (see the README on MPI runs).
    pub ranks: Option<u32>,
    /// The parameters as the plan gave them (without `kind`).
    pub given: serde_json::Value,
    pub workload: Arc<dyn Workload>,
    pub at: Location,
    /// `keep_image = true` in an `append` workload's table: the append test's agings are
    /// kept in the image cache, one image per usage checkpoint, and a run whose checkpoints
    /// are all kept starts from them (see [`crate::testbed::images::series`]).
    pub keep_image: bool,
}

impl std::fmt::Debug for PlanWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanWorkload")
            .field("kind", &self.kind)
            .field("params", &self.workload.params())
            .finish()
    }
}

impl PlanWorkload {
    /// `tree dirs=14 files=10 file_size=8M`: the kind and the parameters the plan set.
    pub fn describe(&self) -> String {
        let mut s = self.kind.to_string();
        if let Some(map) = self.given.as_object() {
            for (k, v) in map {
                let shown = match v {
                    serde_json::Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                s.push_str(&format!(" {k}={shown}"));
            }
        }
        if let Some(n) = self.ranks {
            s.push_str(&format!(" ranks={n}"));
        }
        s
    }
}

/// A validated plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where the plan came from (a path, or `preset NAME`), for messages.
    pub source: String,
    pub name: String,
    pub description: String,
    pub testbeds: Vec<PlanTestbed>,
    pub workloads: Vec<PlanWorkload>,
    pub reps: Reps,
    pub fresh: Fresh,
    pub cold: ColdMode,
    pub seed: u64,
    /// The scale applied (1 as written).
    pub scale: f64,
    /// Notes made while scaling (testbeds grown to fit).
    pub notes: Vec<String>,
    /// Record block layout and free space at each run's layout point (`layout = true`).
    pub layout: bool,
    /// Crash points after each run (`crash_points = N`, ...; see `fsgauge run --help`).
    pub crash: crate::lab::crash::points::CrashArgs,
    /// The host's expiry of dirty data held for each run (`dirty_expire = "5min"`).
    pub dirty_expire: Option<crate::lab::runner::params::DirtyExpire>,
    /// `[age]`: aging run on each run's filesystem before its workload.
    pub age: Option<PlanWorkload>,
    /// `[age] keep_image = true`: the aging is kept in the image cache, and every run whose
    /// aging is the same starts from a copy of it (see [`crate::testbed::images`]).
    pub keep_image: bool,
    /// `[[question]]`s, resolved: what the study asks (see [`crate::results::Question`]).
    pub questions: Vec<PlanQuestion>,
}
