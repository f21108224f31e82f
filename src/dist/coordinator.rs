//! The coordinator of a run: how one process's phases, directories and results fit with those
//! of the other processes of the job. Passed explicitly (in [`crate::lab::runner::RunOptions`] and
//! the workload's run context), never looked up: [`Local`] is a process alone, as every run
//! without mpirun; an MPI build's session (see `session`) is one rank of a job.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Context, Result};

use super::DistOptions;
use crate::base::error::bad_input;
use crate::measure::{PhaseMeter, Recorder};
use crate::results::{MetricDef, MpiInfo, PhaseResult};

/// The work of one worker of a phase: its number and its recorder.
pub type Work<'a> = &'a (dyn Fn(usize, &mut Recorder) -> Result<()> + Sync);

/// What starts a phase's meter, once every process is ready.
pub type Start<'a> = &'a mut dyn FnMut() -> PhaseMeter;

/// One process's part in a run of one or more processes.
pub trait Coordinator {
    /// This process's rank (0 alone).
    fn rank(&self) -> u32;

    /// How many processes run together (1 alone).
    fn size(&self) -> u32;

    /// True on every rank but 0: such ranks write no result and print nothing.
    fn is_secondary(&self) -> bool {
        self.rank() != 0
    }

    /// The rules of the multi-rank run (the defaults alone).
    fn options(&self) -> DistOptions;

    /// Runs one measured phase on `workers` threads with every other rank: `start` starts its
    /// meter once all are ready; the result is this rank's. Its errors name the phase.
    /// Provided: the phase of a process alone (no rank to wait for); a coordinator of several
    /// processes replaces it.
    fn phase(
        &self,
        name: &str,
        start: Start<'_>,
        workers: usize,
        work: Work<'_>,
    ) -> Result<PhaseResult> {
        let meter = start();
        let recorders = crate::measure::run_workers(&meter, workers.max(1), work)
            .with_context(|| format!("phase {name}"))?;
        let result = meter.finish(recorders);
        check_ramp(&result)?;
        Ok(result)
    }

    /// Waits until every rank is here (nothing alone).
    fn barrier(&self);

    /// Every rank learns whether any rank failed a step; the first failing rank's error becomes
    /// every rank's error. Alone: `r` itself.
    fn agree(&self, r: Result<()>) -> Result<()>;

    /// Rank 0's value of `v`, on every rank.
    fn broadcast_u64(&self, v: u64) -> u64;

    /// True when the last error came out of a step every rank agreed on.
    fn failure_agreed(&self) -> bool {
        false
    }

    /// Ends the whole job at once for a failure this rank alone saw.
    fn abort(&self, err: &anyhow::Error) -> ! {
        eprintln!("fsgauge: error: {err:#}");
        std::process::exit(crate::base::error::exit_code(err) as i32)
    }

    /// Makes the run's directory below `parent` together with the other ranks; `None` when the
    /// process makes its own (alone).
    fn make_root(&self, parent: &Path, kind: &str, rep: u32) -> Result<Option<DistRoot>>;

    /// Removes a directory [`Coordinator::make_root`] made, in step with the other ranks.
    fn release_root(&self, root: DistRoot);

    /// The first worker number of this rank in names shared by all ranks (0 alone).
    fn worker_base(&self, per_rank: u64) -> u64;

    /// Where the read and stat phases find their files and the first worker number: the own
    /// root alone, or under `--read-neighbour` those of rank r+1.
    fn read_source(&self, own_root: &Path, per_rank: u64) -> (PathBuf, u64);

    /// Under `--shared-dir` with 2 or more ranks, this rank; `None` when the directory is this
    /// process's alone.
    fn shared_rank(&self) -> Option<u32> {
        (self.size() > 1 && self.options().dir_mode == super::DirMode::Shared).then(|| self.rank())
    }

    /// Sends every rank's phases to rank 0 and merges them there: rank 0 gets the merged
    /// phases, warnings and the run's MPI record; the other ranks (and a process alone) get
    /// their own back and no record.
    fn gather(
        &self,
        phases: Vec<PhaseResult>,
        warnings: Vec<String>,
        metrics: &[MetricDef],
    ) -> Result<(Vec<PhaseResult>, Vec<String>, Option<MpiInfo>)>;
}

/// A process alone: runs the workers, measures, and keeps its results.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Coordinator for Local {
    fn rank(&self) -> u32 {
        0
    }

    fn size(&self) -> u32 {
        1
    }

    fn options(&self) -> DistOptions {
        DistOptions::default()
    }

    fn barrier(&self) {}

    fn agree(&self, r: Result<()>) -> Result<()> {
        r
    }

    fn broadcast_u64(&self, v: u64) -> u64 {
        v
    }

    fn make_root(&self, _parent: &Path, _kind: &str, _rep: u32) -> Result<Option<DistRoot>> {
        Ok(None)
    }

    fn release_root(&self, root: DistRoot) {
        // Never made here; dropping it removes only what it names as its own.
        drop(root);
    }

    fn worker_base(&self, _per_rank: u64) -> u64 {
        0
    }

    fn read_source(&self, own_root: &Path, _per_rank: u64) -> (PathBuf, u64) {
        (own_root.to_path_buf(), 0)
    }

    fn gather(
        &self,
        phases: Vec<PhaseResult>,
        warnings: Vec<String>,
        _metrics: &[MetricDef],
    ) -> Result<(Vec<PhaseResult>, Vec<String>, Option<MpiInfo>)> {
        Ok((phases, warnings, None))
    }
}

/// The coordinator a run is given: cloned into every place that needs it; [`Local`] by default.
#[derive(Clone)]
pub struct Coord(Rc<dyn Coordinator>);

impl Coord {
    pub fn new(c: Rc<dyn Coordinator>) -> Self {
        Coord(c)
    }
}

impl Default for Coord {
    fn default() -> Self {
        Coord(Rc::new(Local))
    }
}

impl std::ops::Deref for Coord {
    type Target = dyn Coordinator;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::fmt::Debug for Coord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Coord(rank {} of {})", self.rank(), self.size())
    }
}

/// The run's directory on this rank, made by [`Coordinator::make_root`];
/// [`Coordinator::release_root`] removes it in step with the other ranks (rank 0 removes the
/// common parent last).
pub struct DistRoot {
    pub root: PathBuf,
    /// The common parent `fsgauge-KIND-JOB-REP` (the root itself under `--shared-dir`).
    pub(super) base: PathBuf,
    pub(super) released: bool,
}

impl DistRoot {
    /// Marks it released; the paths to remove: this rank's own (when it differs from the
    /// common parent) and the common parent.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(super) fn take(mut self) -> (PathBuf, PathBuf) {
        self.released = true;
        (self.root.clone(), self.base.clone())
    }
}

impl Drop for DistRoot {
    fn drop(&mut self) {
        // Unwinding without the other ranks: only this rank's own directory is safe to remove.
        if !self.released && self.root != self.base {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A phase that ended inside its ramp measured nothing: bad input (the ramp was too long for
/// the work), exit 2.
pub fn check_ramp(p: &PhaseResult) -> Result<()> {
    if let (Some(ramp), Some(t)) = (p.ramp_s, &p.ramp_totals) {
        if t.seconds < ramp {
            return Err(bad_input(format!(
                "phase {} ended after {}, inside its --ramp {}: nothing was left to measure; use --time-based with --time D (the phase then runs the ramp plus D), more work, or a shorter --ramp",
                p.name,
                crate::base::text::format_secs_unit(t.seconds),
                crate::base::text::format_secs_unit(ramp)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Devices, OpDef, Progress};

    const DEFS: [OpDef; 2] = [OpDef::primary("create"), OpDef::secondary("stat")];

    fn start(name: &str) -> PhaseMeter {
        PhaseMeter::start(name, &DEFS, &Devices::default(), None, &Progress::hidden())
    }

    /// Worker `w` counts `w + 1` creates of 10 bytes each and one stat.
    fn work(w: usize, r: &mut Recorder) -> Result<()> {
        let (create, stat) = (r.op("create"), r.op("stat"));
        r.count_untimed(create, w as u64 + 1, 10 * (w as u64 + 1));
        r.count_untimed(stat, 1, 0);
        Ok(())
    }

    /// The figures of a phase that do not depend on its timing.
    fn counts(p: &PhaseResult) -> (String, u64, u64, Vec<(String, u64, u64)>) {
        let ops = p
            .op_stats
            .iter()
            .map(|(k, s)| (k.clone(), s.count, s.bytes))
            .collect();
        (p.name.clone(), p.ops, p.bytes, ops)
    }

    #[test]
    fn local_phase_is_the_single_process_phase() -> Result<()> {
        // What a process alone did before the coordinator: its workers, then the meter's finish.
        let meter = start("create");
        let recorders = crate::measure::run_workers(&meter, 3, work)?;
        let before = meter.finish(recorders);

        let local = Coord::default();
        let after = local.phase("create", &mut || start("create"), 3, &work)?;
        assert_eq!(counts(&after), counts(&before));
        assert_eq!(after.ops, 6);
        assert_eq!(after.bytes, 60);
        assert_eq!(after.stonewall_s, None);
        assert_eq!(after.workers.len(), before.workers.len());

        // Workers 0 means one, as before.
        let one = local.phase("create", &mut || start("create"), 0, &work)?;
        assert_eq!(one.ops, 1);
        Ok(())
    }

    #[test]
    fn local_phase_reports_a_worker_failure() {
        let failing = |w: usize, _: &mut Recorder| -> Result<()> {
            if w == 1 {
                anyhow::bail!("disk full");
            }
            Ok(())
        };
        let err = Local
            .phase("write", &mut || start("write"), 2, &failing)
            .err()
            .map(|e| format!("{e:#}"));
        assert!(err.is_some_and(|e| e.contains("phase write") && e.contains("disk full")));
    }

    #[test]
    fn local_phase_refuses_one_that_ended_inside_its_ramp() {
        let series = crate::measure::SeriesSpec {
            interval: std::time::Duration::from_secs(5),
            ramp_intervals: 2,
        };
        let err = Local
            .phase(
                "create",
                &mut || start("create").with_series(series),
                1,
                &work,
            )
            .err()
            .map(|e| format!("{e:#}"));
        assert!(err.is_some_and(|e| e.starts_with("phase create ended") && e.contains("--ramp")));
    }

    #[test]
    fn local_is_one_rank_alone() -> Result<()> {
        let c = Coord::default();
        assert_eq!((c.rank(), c.size()), (0, 1));
        assert!(!c.is_secondary());
        assert_eq!(c.shared_rank(), None);
        assert_eq!(c.worker_base(8), 0);
        let own = Path::new("/tmp/own");
        assert_eq!(c.read_source(own, 8), (own.to_path_buf(), 0));
        assert_eq!(c.broadcast_u64(7), 7);
        assert!(c.agree(Err(anyhow::anyhow!("no"))).is_err());
        assert!(c.make_root(own, "create", 0)?.is_none());
        let (phases, warnings, info) = c.gather(Vec::new(), vec!["w".into()], &[])?;
        assert!(phases.is_empty() && info.is_none());
        assert_eq!(warnings, vec!["w".to_string()]);
        assert_eq!(format!("{c:?}"), "Coord(rank 0 of 1)");
        Ok(())
    }
}
