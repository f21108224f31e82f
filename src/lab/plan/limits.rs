//! The caps on a plan's expansion, checked by arithmetic on the sizes as written, before
//! anything is expanded: a sweep has at most [`sweep::MAX_CELLS`] cells, and a plan makes at
//! most [`MAX_RUNS`] runs (testbeds × workload cells × repetitions). A few kilobytes of plan
//! can otherwise name millions of runs (2,000 `threads` × 2,000 `block` values), whose
//! expansion took gigabytes before anything was refused.

use anyhow::Result;

use std::ops::Range;

use super::fault::fault;
use super::Reps;
use crate::workload::registry::sweep;
use crate::workload::Workload;

/// The most runs a plan may make, every repetition counted (with `reps = "auto"`, its
/// `max_reps`). 100,000 runs of ten seconds each are more than eleven days of machine time.
pub const MAX_RUNS: u64 = 100_000;

/// The runs a plan makes, counted entry by entry as its workloads are read.
pub(super) struct Tally {
    testbeds: u64,
    reps: u64,
    /// Workload cells so far: an entry's sweep cells when each is a run of its own, else 1.
    cells: u64,
}

impl Tally {
    /// A plan of `testbeds` testbeds, each cell repeated as `reps` says (at most).
    pub(super) fn new(testbeds: usize, reps: Reps) -> Self {
        let reps = match reps {
            Reps::Fixed(n) => n,
            Reps::Auto { max, .. } => max,
        };
        Tally {
            testbeds: testbeds as u64,
            reps: u64::from(reps),
            cells: 0,
        }
    }

    /// Counts the workload entry at `at` (built as `wl`): its sweep within
    /// [`sweep::MAX_CELLS`], and the plan's runs so far within [`MAX_RUNS`]; each refusal at
    /// the entry. `split`: the
    /// sweep's cells are runs of their own (`fresh = "per-run"`), not phases of one run.
    pub(super) fn add(&mut self, at: Range<usize>, wl: &dyn Workload, split: bool) -> Result<()> {
        let what = format!("[[workload]] {}", wl.kind());
        let cells = sweep::check_count(wl).map_err(|e| fault(at.clone(), &what, e))?;
        self.cells = self.cells.saturating_add(if split { cells } else { 1 });
        let runs = self
            .testbeds
            .checked_mul(self.cells)
            .and_then(|n| n.checked_mul(self.reps));
        match runs {
            Some(n) if n <= MAX_RUNS => Ok(()),
            n => Err(fault(
                at,
                &what,
                format!(
                    "the plan makes {} testbed(s) × {} workload cell(s) up to this entry × {} repetition(s) = {} runs, more than the {MAX_RUNS} a plan may make; use fewer testbeds, sweep values or repetitions, or split the study over several plans",
                    self.testbeds,
                    self.cells,
                    self.reps,
                    n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
                ),
            )),
        }
    }
}
