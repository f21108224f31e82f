//! What a run is asked for: where it happens ([`Place`]), how it is repeated and conditioned
//! and where its results go ([`RunOptions`]), one repetition of it ([`Rep`]), and what it gives
//! back ([`Outcome`]). The bottom of the runner: its other files read these and nothing here
//! reads them.

use std::path::PathBuf;

use crate::measure::Progress;
use crate::results::{RunResult, StudyInfo};
use crate::testbed::TestbedSpec;
use crate::workload::{ColdMode, Workload};

/// Where runs happen.
#[derive(Debug, Clone)]
pub enum Place {
    /// A fresh testbed per repetition.
    Testbed(TestbedSpec),
    /// An existing directory.
    Dir(PathBuf),
}

/// How runs are repeated and conditioned, and where results go.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub reps: u32,
    /// Seed of every random choice; chosen from the clock (and recorded) when absent.
    pub seed: Option<u64>,
    pub cold: ColdMode,
    pub mem_limit: Option<u64>,
    pub mem_charge: Option<u64>,
    /// Results directory; `None` keeps results in memory only.
    pub out: Option<PathBuf>,
    pub progress: Progress,
    /// Record the block layout of the workload's tree and the free space of the target at the
    /// workload's layout point (`--layout`), in the result's `layout` field.
    pub layout: bool,
    /// Crash points after the workload (`--crash-points`): off unless asked.
    pub crash: crate::lab::crash::points::CrashArgs,
    /// `--dirty-expire`: the host's expiry of dirty data held for each run (see
    /// [`crate::host::dirty::ExpireHold`]); `None` leaves the host's.
    pub dirty_expire: Option<super::params::DirtyExpire>,
    /// A workload run on the target before the measured one (a plan's `[age]`): its phases come
    /// first in the result, and its tree stays for the workload to run beside.
    pub precondition: Option<Precondition>,
    /// Keep the aging (the precondition, or the workload when it is `age`) in the image cache
    /// under this name, and start from the kept image when the cache has the same aging (see
    /// [`crate::testbed::images`]); `None` ages every run.
    pub keep_image: Option<String>,
    /// The plan the run is part of and its questions, copied into the result (`study`); not
    /// part of the spec hash.
    pub study: Option<StudyInfo>,
    /// How the run fits with the other processes of an MPI job (alone by default).
    pub coordinator: crate::dist::Coord,
}

/// The conditioning workload of a run (see [`RunOptions::precondition`]).
#[derive(Clone)]
pub struct Precondition(pub std::sync::Arc<dyn Workload>);

impl std::fmt::Debug for Precondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Precondition({} {})", self.0.kind(), self.0.params())
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            reps: 1,
            seed: None,
            cold: ColdMode::None,
            mem_limit: None,
            mem_charge: None,
            out: None,
            progress: Progress::hidden(),
            layout: false,
            crash: Default::default(),
            dirty_expire: None,
            precondition: None,
            keep_image: None,
            study: None,
            coordinator: Default::default(),
        }
    }
}

/// One finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub result: RunResult,
    /// Where the result was written.
    pub path: Option<PathBuf>,
}

/// One repetition of a run: where, which workload, with which options, its seed and its
/// number.
#[derive(Clone, Copy)]
pub(super) struct Rep<'a> {
    pub(super) place: &'a Place,
    pub(super) wl: &'a dyn Workload,
    pub(super) opts: &'a RunOptions,
    pub(super) seed: u64,
    pub(super) rep: u32,
}

impl<'a> Rep<'a> {
    pub(super) fn new(
        place: &'a Place,
        wl: &'a dyn Workload,
        opts: &'a RunOptions,
        seed: u64,
        rep: u32,
    ) -> Self {
        Self {
            place,
            wl,
            opts,
            seed,
            rep,
        }
    }
}
