//! The run context a workload sees: where to work, the seed, cold-cache control, and measured
//! phases.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::base::error::bad_input;
use crate::base::sys::statfs::Space;
use crate::dist::Coord;
use crate::measure::{Devices, OpDef, PhaseMeter, Progress, Recorder, SeriesSpec};
use crate::results::crash::{CrashClass, DurableChecked};
use crate::results::{PhaseResult, TestbedInfo};
use crate::testbed::{drop_caches, SetUp, Testbed};

crate::choice! {
    /// How the cache is made cold between phases.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ColdMode("cold-cache mode") {
        /// Nothing: the next phase may hit cached data.
        #[default]
        None = "none",
        /// sync + drop_caches.
        Drop = "drop",
        /// Unmount and mount the testbed again (and drop caches): as close to a reboot as it gets.
        Remount = "remount",
    }
}

/// Where a run happens.
#[derive(Debug)]
// One target exists per run; boxing the testbed would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Target {
    /// A testbed fsgauge built for this run.
    Testbed(Testbed),
    /// An existing directory (`--dir`).
    Dir(PathBuf),
}

impl Target {
    /// The directory the target offers (mount point, or the `--dir` path), as the user knows
    /// it: for messages and results.
    pub fn path(&self) -> &Path {
        match self {
            Target::Testbed(t) => t.mountpoint(),
            Target::Dir(p) => p,
        }
    }

    /// The path to work through: a testbed's mount point reached through the descriptor of its
    /// directory ([`Testbed::reach`]), which nobody can redirect by renaming a directory above
    /// it; the `--dir` path.
    pub fn reach(&self) -> PathBuf {
        match self {
            Target::Testbed(t) => t.reach(),
            Target::Dir(p) => p.clone(),
        }
    }

    pub fn devices(&self) -> Devices {
        match self {
            Target::Testbed(t) => {
                let (model, journal_model) = t.model_probes();
                Devices {
                    main: Devices::stat_file_of_device(t.device()),
                    journal: t.journal_device().and_then(Devices::stat_file_of_device),
                    model,
                    journal_model,
                }
            }
            Target::Dir(p) => Devices {
                main: Devices::stat_file_of_path(p),
                ..Devices::default()
            },
        }
    }

    pub fn info(&self) -> TestbedInfo {
        match self {
            Target::Testbed(t) => t.info(),
            Target::Dir(p) => {
                let st = nix::sys::statvfs::statvfs(p).ok();
                TestbedInfo {
                    label: "dir".into(),
                    fs: fs_type_name(p),
                    size: st.map_or(0, |s| Space::of(&s).total),
                    backing: "dir".into(),
                    device: mount_source(p),
                    path: p.display().to_string(),
                    ..Default::default()
                }
            }
        }
    }

    /// The measured run begins (`true`) or ends: an emulated disk that models the measured
    /// phases only switches its model here (see [`Testbed::measuring`]).
    pub fn measuring(&mut self, on: bool) -> Result<()> {
        match self {
            Target::Testbed(t) => t.measuring(on),
            Target::Dir(_) => Ok(()),
        }
    }

    /// Runs the set-up step `step` (`f`) on the target; on a testbed, a failure that is an
    /// emulated disk's dead server or a full backing store is named as such (see
    /// [`Testbed::after_set_up`]).
    pub fn set_up<T>(
        &mut self,
        step: SetUp,
        f: impl FnOnce(&mut Target) -> Result<T>,
    ) -> Result<T> {
        crate::base::signals::test_pause(step.point());
        let r = f(self);
        match self {
            Target::Testbed(t) => t.after_set_up(step, r),
            Target::Dir(_) => r,
        }
    }

    /// Ok while what serves the target works; an error naming an emulated disk's server that
    /// died.
    pub fn check_devices(&mut self) -> Result<()> {
        match self {
            Target::Testbed(t) => t.check_devices(),
            Target::Dir(_) => Ok(()),
        }
    }

    /// The filesystem's size and free space.
    pub fn space(&self) -> Result<Space> {
        let st = match self {
            Target::Testbed(t) => t.statvfs()?,
            Target::Dir(p) => {
                nix::sys::statvfs::statvfs(p).with_context(|| format!("statvfs {}", p.display()))?
            }
        };
        Ok(Space::of(&st))
    }

    /// Makes the cache cold.
    pub fn cold(&mut self, mode: ColdMode) -> Result<()> {
        match (mode, self) {
            (ColdMode::None, _) => Ok(()),
            (ColdMode::Drop, Target::Testbed(t)) => t.drop_caches_and_settle_disks(),
            (ColdMode::Drop, Target::Dir(_)) => drop_caches(),
            // The run directories held open on the testbed let go of it meanwhile.
            (ColdMode::Remount, Target::Testbed(t)) => {
                let (mp, reach) = (t.mountpoint().to_path_buf(), t.reach());
                crate::testbed::across_remount(&mp, &reach, || t.remount())
            }
            (ColdMode::Remount, Target::Dir(p)) => Err(bad_input(format!(
                "--cold remount needs a testbed fsgauge built (--fs ...); {} is an existing directory, use --cold drop",
                p.display()
            ))),
        }
    }
}

/// The filesystem type of a path, from /proc/self/mountinfo (longest matching mount point).
pub fn fs_type_name(p: &Path) -> String {
    crate::base::sys::proc::mount_of(p)
        .map(|(_, t, _)| t)
        .unwrap_or_else(|| "unknown".into())
}

fn mount_source(p: &Path) -> Option<String> {
    crate::base::sys::proc::mount_of(p).map(|(_, _, s)| s)
}

/// What a workload sees while it runs.
pub struct RunContext<'a> {
    target: &'a mut Target,
    root: PathBuf,
    /// The root as the user knows it, when `root` is the pinned `/proc/self/fd/N/.` path.
    shown_root: Option<PathBuf>,
    seed: u64,
    cold: ColdMode,
    progress: Progress,
    devices: Devices,
    phases: Vec<PhaseResult>,
    warnings: Vec<String>,
    layout_hook: Option<LayoutHook>,
    layout: Option<serde_json::Value>,
    /// How the phases' time series are cut, and their ramp (`--interval`, `--ramp`).
    series: SeriesSpec,
    /// How this process's phases fit with those of the other processes of the job.
    coord: Coord,
    /// Crash points follow the run (`--crash-points`): the workload keeps what it made
    /// durable and leaves its judge here.
    crash_points: bool,
    crash_verifier: Option<CrashVerifier>,
    crash_tally: Option<CrashTally>,
    /// The workload's own aging kept per checkpoint in the image cache (the append test with
    /// `keep_image`): the workload takes it, fills in how each checkpoint started, and puts
    /// it back for the run's record.
    kept_series: Option<crate::testbed::images::series::Series>,
}

/// A workload's judge of one crash state (set by the workload when crash points follow its
/// run, see `lab::crash`): called with the cut's time (CLOCK_MONOTONIC ns: the drive had
/// answered every request up to it, none after) and the workload's directory in the mounted
/// state; returns what is wrong with it, each with its class (nothing: an empty list). An
/// error: the state could not be judged (not a finding about it).
pub type CrashVerifier = Box<dyn FnMut(u64, &Path) -> Result<Vec<(CrashClass, String)>> + Send>;

/// What a workload's judge checked in the crash states, shared between the judge (which counts
/// into it) and the crash record (which keeps it, see [`DurableChecked`]).
pub type CrashTally = std::sync::Arc<std::sync::Mutex<DurableChecked>>;

/// Takes the block-layout snapshot of a workload's tree (set by the runner under `--layout`):
/// called with the workload root and the target.
pub type LayoutHook = Box<dyn FnMut(&Path, &Target) -> Result<serde_json::Value> + Send>;

impl<'a> RunContext<'a> {
    pub fn new(
        target: &'a mut Target,
        root: PathBuf,
        seed: u64,
        cold: ColdMode,
        progress: Progress,
    ) -> Self {
        let devices = target.devices();
        Self {
            target,
            root,
            shown_root: None,
            seed,
            cold,
            progress,
            devices,
            phases: Vec::new(),
            warnings: Vec::new(),
            layout_hook: None,
            layout: None,
            series: SeriesSpec::default(),
            coord: Coord::default(),
            crash_points: false,
            crash_verifier: None,
            crash_tally: None,
            kept_series: None,
        }
    }

    /// The workload's aging is kept per checkpoint as `series` says (none: not kept).
    pub fn with_kept_series(
        mut self,
        series: Option<crate::testbed::images::series::Series>,
    ) -> Self {
        self.kept_series = series;
        self
    }

    /// Takes the kept series (see [`Self::with_kept_series`]); the workload puts it back with
    /// [`Self::put_kept_series`] once it has recorded the starts.
    pub fn take_kept_series(&mut self) -> Option<crate::testbed::images::series::Series> {
        self.kept_series.take()
    }

    /// Puts the kept series back (see [`Self::take_kept_series`]).
    pub fn put_kept_series(&mut self, series: crate::testbed::images::series::Series) {
        self.kept_series = Some(series);
    }

    /// Runs with the other processes of a job as `coord` says (alone by default).
    pub fn with_coordinator(mut self, coord: Coord) -> Self {
        self.coord = coord;
        self
    }

    /// Crash points follow this run.
    pub fn with_crash_points(mut self, on: bool) -> Self {
        self.crash_points = on;
        self
    }

    /// Whether crash points follow this run: a workload that can judge a crash state keeps
    /// what it made durable, and sets its judge with [`Self::set_crash_verifier`].
    pub fn crash_points(&self) -> bool {
        self.crash_points
    }

    /// The workload's judge of crash states (replacing any set before).
    pub fn set_crash_verifier(&mut self, v: CrashVerifier) {
        self.crash_verifier = Some(v);
    }

    /// The judge the workload set, if any.
    pub fn take_crash_verifier(&mut self) -> Option<CrashVerifier> {
        self.crash_verifier.take()
    }

    /// Where the workload's judge counts what it checked, for the crash record.
    pub fn set_crash_tally(&mut self, t: CrashTally) {
        self.crash_tally = Some(t);
    }

    /// The count the workload's judge keeps, if it keeps one.
    pub fn take_crash_tally(&mut self) -> Option<CrashTally> {
        self.crash_tally.take()
    }

    /// The run's coordinator: whether this process is one rank of several.
    pub fn coordinator(&self) -> &Coord {
        &self.coord
    }

    /// Names the root as the user knows it, for messages and results, when `root` is the
    /// pinned path of a run directory (`/proc/self/fd/N/.`, see [`crate::testbed::RunDir`]).
    pub fn with_shown_root(mut self, shown: PathBuf) -> Self {
        self.shown_root = Some(shown);
        self
    }

    /// The workload's directory as the user knows it (for messages and results; work goes
    /// through [`RunContext::root`]).
    pub fn shown_root(&self) -> &Path {
        self.shown_root.as_deref().unwrap_or(&self.root)
    }

    /// Cuts the time series of the phases from here on into `series.interval`, the first
    /// `series.ramp_intervals` a warm-up left out of every figure (`--interval`, `--ramp`).
    pub fn set_series(&mut self, series: SeriesSpec) {
        self.series = series;
    }

    /// The series intervals and ramp of the phases.
    pub fn series(&self) -> SeriesSpec {
        self.series
    }

    /// Asks for a layout snapshot at the workload's [`RunContext::layout_point`].
    pub fn set_layout_hook(&mut self, hook: LayoutHook) {
        self.layout_hook = Some(hook);
    }

    /// Workloads call this right after their last phase that writes data (before any removal):
    /// under `--layout` the block layout of the tree is recorded then. Without it, nothing happens.
    pub fn layout_point(&mut self) -> Result<()> {
        if let Some(hook) = self.layout_hook.as_mut() {
            let snap = hook(&self.root, self.target)?;
            self.layout = Some(snap);
        }
        Ok(())
    }

    /// Stores a layout record the workload made itself (e.g. aging's summary per checkpoint);
    /// it goes into the result's `layout` field, replacing a snapshot from the layout point.
    pub fn set_layout(&mut self, layout: serde_json::Value) {
        self.layout = Some(layout);
    }

    /// The layout snapshot taken at the layout point, if any.
    pub fn take_layout(&mut self) -> Option<serde_json::Value> {
        self.layout.take()
    }

    /// The workload's own directory (made empty before the run, removed after). In a run
    /// directory fsgauge made, this is its pinned path `/proc/self/fd/N/.`: everything below it
    /// is reached from the directory's descriptor, never by its name, which another user may
    /// have swapped (see [`crate::testbed::RunDir`]).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn cold_mode(&self) -> ColdMode {
        self.cold
    }

    pub fn progress(&self) -> Progress {
        self.progress
    }

    pub fn target(&self) -> &Target {
        self.target
    }

    /// The target itself, for a workload that runs a part of its work in a context of its own
    /// (the append test reads its aged tree with the read workload).
    pub fn target_mut(&mut self) -> &mut Target {
        self.target
    }

    /// Makes the cache cold the way the run asked (`--cold`); between phases.
    pub fn make_cold(&mut self) -> Result<()> {
        let mode = self.cold;
        self.make_cold_with(mode)
    }

    /// Makes the cache cold in a given way (a workload with its own rule, e.g. remove-cold).
    pub fn make_cold_with(&mut self, mode: ColdMode) -> Result<()> {
        crate::base::signals::check()?;
        self.target.cold(mode)
    }

    /// Starts a phase meter for workloads that drive their workers themselves.
    pub fn meter(&self, name: &str, defs: &[OpDef], expected: Option<u64>) -> PhaseMeter {
        PhaseMeter::start(name, defs, &self.devices, expected, &self.progress)
            .with_series(self.series)
    }

    /// Runs one measured phase on `workers` threads (1: on this thread) and keeps its result.
    /// `expected` primary ops drive the progress bar.
    pub fn phase<F>(
        &mut self,
        name: &str,
        defs: &[OpDef],
        expected: Option<u64>,
        workers: usize,
        work: F,
    ) -> Result<&mut PhaseResult>
    where
        F: Fn(usize, &mut Recorder) -> Result<()> + Sync,
    {
        crate::base::signals::check()?;
        // Under MPI all ranks start behind a barrier and end together (see `dist`).
        let coord = self.coord.clone();
        let result = coord.phase(
            name,
            &mut || self.meter(name, defs, expected),
            workers.max(1),
            &work,
        )?;
        self.phases.push(result);
        Ok(self.phases.last_mut().expect("just pushed"))
    }

    /// Keeps a phase measured by hand with [`RunContext::meter`], refusing one that ended
    /// inside its ramp.
    pub fn push_checked(&mut self, p: PhaseResult) -> Result<&mut PhaseResult> {
        crate::dist::check_ramp(&p)?;
        Ok(self.push_phase(p))
    }

    /// True when an earlier phase of this run was cut at the stonewall (`--stonewall`): what it
    /// was to make may be partly missing, and later phases must take the tree as they find it.
    pub fn partial(&self) -> bool {
        self.phases.iter().any(|p| p.stonewall_s.is_some())
    }

    /// The first number of this process's workers in names other processes share: under MPI
    /// with `--shared-dir`, rank × `per_rank`; otherwise 0.
    pub fn worker_base(&self, per_rank: u64) -> u64 {
        self.coord.worker_base(per_rank)
    }

    /// Where read and stat phases find the files to read, and the worker number of the first
    /// (see [`RunContext::worker_base`]): this run's own, or under MPI with `--read-neighbour`
    /// those rank r+1 wrote.
    pub fn read_source(&self, per_rank: u64) -> (PathBuf, u64) {
        self.coord.read_source(&self.root, per_rank)
    }

    /// Under MPI with `--shared-dir` and 2 or more ranks, this process's rank: the workload's
    /// directory is shared with the other ranks, so only rank 0 may remove what they all used,
    /// after [`RunContext::barrier`]. `None` when the directory is this process's alone.
    pub fn shared_rank(&self) -> Option<u32> {
        self.coord.shared_rank()
    }

    /// Waits until every MPI rank is here (nothing without MPI): between steps that touch what
    /// other ranks use, outside measured phases.
    pub fn barrier(&self) {
        self.coord.barrier();
    }

    /// Keeps a phase measured by hand with [`RunContext::meter`].
    pub fn push_phase(&mut self, p: PhaseResult) -> &mut PhaseResult {
        self.phases.push(p);
        self.phases.last_mut().expect("just pushed")
    }

    /// Records a warning in the result (and shows it).
    pub fn warn(&mut self, msg: impl Into<String>) {
        self.warnings.push(msg.into());
    }

    /// The phases measured so far and the warnings.
    pub fn into_parts(self) -> (Vec<PhaseResult>, Vec<String>) {
        (self.phases, self.warnings)
    }
}
