//! The runner: for each repetition, build the target (a fresh testbed, or the `--dir`),
//! condition it (memory limit, memory charger), run the workload, tear everything down, and
//! write one result per run. Everything that can be checked is checked before anything is made.

pub mod admit;
mod kept;
pub mod params;
mod record;
mod request;
mod target;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::base::error::bad_input;
use crate::measure::Progress;
use crate::results::{Conditions, Environment, RunRecord, RunResult};
use crate::testbed::{MemCharger, MemLimit, RunDir, SetUp};
use crate::workload::{ColdMode, RunContext, Target, Workload};
pub use admit::{admitted, check, check_dir};
use kept::{Keeping, Start};
use record::{assemble, conditions, spec, unpin, with_precondition, write_outcome};
use request::Rep;
pub use request::{Outcome, Place, Precondition, RunOptions};
pub use target::build_target;
use target::OnTarget;

fn format_size_round(b: u64) -> String {
    crate::base::units::format_bytes_human(b as f64)
}

/// Runs a workload `opts.reps` times and returns the results (also written to `opts.out`).
pub fn run(place: &Place, wl: &dyn Workload, opts: &RunOptions) -> Result<Vec<Outcome>> {
    admit::check(place, wl, opts)?;
    let seed = opts.seed.unwrap_or_else(admit::clock_seed);
    let (place, note) = admitted(place, wl)?;
    if let Some(note) = note {
        opts.progress.note(&note);
    }
    let place = &place;
    let mut out = Vec::new();
    for rep in 0..opts.reps {
        crate::base::signals::check()?;
        let outcome = run_once(Rep::new(place, wl, opts, seed, rep), None)?;
        if let Some(why) = outcome.result.disturbed() {
            eprintln!("warning: rep {rep}: {why}: its figures measure that process too; run it again when the machine is yours");
        }
        out.push(outcome);
    }
    Ok(out)
}

/// A stable hash of everything that defines a run (see [`spec`]).
pub fn spec_hash(
    place: &Place,
    wl: &dyn Workload,
    opts: &RunOptions,
    seed: u64,
    rep: u32,
) -> String {
    let spec = spec(Rep::new(place, wl, opts, seed, rep));
    crate::results::spec_hash(&spec)
}

/// Runs a workload once in an existing directory itself (`fsgauge read PATH`): no workload
/// directory is made or removed, nothing is conditioned; one result is returned.
pub fn run_in_place(
    dir: &Path,
    wl: &dyn Workload,
    seed: u64,
    cold: ColdMode,
    progress: Progress,
) -> Result<RunResult> {
    crate::host::priority::take_for_run();
    let started = SystemTime::now();
    let mut target = Target::Dir(dir.to_path_buf());
    let mut ctx = RunContext::new(&mut target, dir.to_path_buf(), seed, cold, progress);
    wl.run(&mut ctx)?;
    let (phases, errors) = ctx.into_parts();
    let place = Place::Dir(dir.to_path_buf());
    let opts = RunOptions {
        cold,
        seed: Some(seed),
        ..Default::default()
    };
    let testbed = target.info();
    Ok(RunResult::assemble(RunRecord {
        crash: None,
        environment: Some(
            Environment::collect(&testbed).with_nice(crate::host::priority::current()),
        ),
        testbed,
        workload: crate::workload::registry::workload_info(wl),
        rep: 0,
        seed,
        started,
        spec: spec(Rep::new(&place, wl, &opts, seed, 0)),
        conditions: Conditions {
            cold: cold.name().into(),
            ..Default::default()
        },
        phases,
        layout: None,
        errors,
        mpi: None,
    }))
}

/// Runs repetition `rep` (checks first), for plans, which order runs themselves: alone on a
/// fresh target, or on `target`, one the caller built and keeps (a plan with
/// `fresh = "per-testbed"` runs several workloads and repetitions on one filesystem; the
/// workload's directory is removed afterwards, the target stays).
pub fn run_rep(
    target: Option<&mut Target>,
    place: &Place,
    wl: &dyn Workload,
    opts: &RunOptions,
    seed: u64,
    rep: u32,
) -> Result<Outcome> {
    admit::check(place, wl, opts)?;
    run_once(Rep::new(place, wl, opts, seed, rep), target)
}

/// Runs repetition `r` on `shared`, or alone on a fresh target.
fn run_once(r: Rep<'_>, shared: Option<&mut Target>) -> Result<Outcome> {
    // Before the testbed and the workload's threads: they inherit it (see host::priority).
    crate::host::priority::take_for_run();
    let (mut on, mut ks, started) = match shared {
        // A plan's shared filesystem is aged on it as it is: the image cache is for fresh ones.
        Some(t) => (OnTarget::Shared(t), Start::off(), SystemTime::now()),
        None => {
            // Before anything is made: a kept image is found, or the cache's room for one checked.
            let keeping = kept::keeping(&r)?;
            let started = SystemTime::now();
            let (target, start) = target::build(r.place, r.opts, keeping.hit())?;
            (
                OnTarget::Own(Box::new(target)),
                Start { keeping, start },
                started,
            )
        }
    };
    let result = match (&ks.keeping, kept::aging_is_workload(&r)) {
        // An aging started from its own kept image is done: its figures are the kept ones.
        (Keeping::Hit { entry }, true) => {
            kept::replay(on.get(), r, started, entry, ks.start.take())?
        }
        _ => run_in(on.get(), r, started, &mut ks)?,
    };
    on.done()?;
    write_outcome(result, r.opts)
}

/// Where, and when, the room for a workload is found short.
enum Room<'a> {
    /// The target as built: a testbed after mkfs, or the `--dir`.
    Built(&'a Target),
    /// The target after conditioning with the named workload.
    Conditioned(&'a Target, &'a str),
}

/// The refusal when the target has less room (`avail`) than the workload needs (`need`): a
/// testbed is too small after mkfs (--fs-size); a `--dir` has no mkfs and no size of fsgauge's,
/// so its message names the directory and its free space; after conditioning, the usage aged
/// to is part of the cause.
fn no_room(at: Room<'_>, wl: &dyn Workload, need: u64, avail: u64) -> anyhow::Error {
    let (kind, need, free) = (wl.kind(), format_size_round(need), format_size_round(avail));
    bad_input(match at {
        Room::Built(Target::Testbed(_)) => format!(
            "the {kind} workload needs about {need} but the filesystem has only {free} free after mkfs; make {} larger",
            crate::testbed::params::SIZE_FLAG
        ),
        Room::Built(Target::Dir(dir)) => format!(
            "the {kind} workload needs about {need} but --dir {} has only {free} free; free space there, pick a directory on a filesystem with more room, or make the workload smaller",
            dir.display()
        ),
        Room::Conditioned(target, pre) => {
            let bigger = match target {
                Target::Testbed(_) => {
                    format!("make {} larger", crate::testbed::params::SIZE_FLAG)
                }
                Target::Dir(d) => format!("free space in --dir {}", d.display()),
            };
            format!(
                "after conditioning with {pre}, the filesystem has {free} free but the {kind} workload needs about {need}; age to a lower usage or {bigger}"
            )
        }
    })
}

/// The room on the target for the workload's `need` bytes (after conditioning with
/// `conditioned_with`, when it was), refused where it has less.
fn room(
    target: &Target,
    conditioned_with: Option<&str>,
    wl: &dyn Workload,
    need: u64,
) -> Result<()> {
    let avail = target.space()?.available;
    if need <= avail {
        return Ok(());
    }
    let at = match conditioned_with {
        Some(pre) => Room::Conditioned(target, pre),
        None => Room::Built(target),
    };
    Err(no_room(at, wl, need, avail))
}

fn run_in(
    target: &mut Target,
    r: Rep<'_>,
    started: SystemTime,
    ks: &mut Start,
) -> Result<RunResult> {
    let Rep {
        wl,
        opts,
        seed,
        rep,
        ..
    } = r;
    let mut warnings = match &*target {
        Target::Testbed(t) => t.warnings(),
        Target::Dir(_) => Vec::new(),
    };
    let need = admit::space_needed(wl)?;
    room(target, None, wl, need)?;
    let Conditioned {
        guard: _pre_root,
        phases: pre_phases,
        layout: pre_layout,
    } = condition(target, r, need, &mut warnings, ks)?;
    let coord = opts.coordinator.clone();
    let WorkRoot {
        name: root_name,
        root,
        cleanup: cleanup_root,
        dist: dist_root,
    } = WorkRoot::make(target, wl, &coord, rep)?;
    // Held until the run ends, its result written (see host::dirty::ExpireHold).
    let _expire = hold_expire(opts)?;
    let (mem_limit, charger) = memory_conditions(opts, wl)?;

    if !wl.sets_up_inside() {
        target.measuring(true)?;
    }
    crate::lab::crash::campaign::start(target, &opts.crash)?;
    // The workload works through the pinned path of the directory made, never its name.
    let (root, shown) = match &cleanup_root {
        Some(g) => (g.pinned(), g.shown()),
        None => (root.clone(), root),
    };
    let mut ctx = run_context(target, r, root, shown, ks);
    let ran_at = std::time::Instant::now();
    let ran = wl.run(&mut ctx).map_err(|e| match &cleanup_root {
        Some(g) => g.explain(e),
        None => e,
    });
    let (layout, verifier) = (ctx.take_layout(), ctx.take_crash_verifier());
    let (tally, series) = (ctx.take_crash_tally(), ctx.take_kept_series());
    let (wl_phases, more_warnings) = ctx.into_parts();
    check_devices_after(target, &ran)?;
    let crash_run = crate::lab::crash::campaign::After {
        ran: ran.is_ok(),
        seed,
        rel_root: &root_name,
        verifier,
        tally,
        progress: opts.progress,
    };
    let crash = crate::lab::crash::campaign::after(target, &opts.crash, crash_run)?;
    target.measuring(false)?;
    if ran.is_ok() && kept::aging_is_workload(&r) {
        ks.start = kept::save(target, &ks.keeping, ran_at, &wl_phases, layout.as_ref())?;
    }
    let mut phases = pre_phases;
    phases.extend(wl_phases);
    let layout = with_precondition(layout, pre_layout);
    let conditions = conditions(opts, mem_limit.as_ref(), charger.as_ref());
    drop(charger);
    drop(mem_limit);
    drop(cleanup_root);
    if let Some(d) = dist_root {
        coord.release_root(d);
    }
    if let Err(e) = ran {
        return Err(with_backing_full(target, e));
    }
    warnings.extend(more_warnings);
    // Where the emulated disk fell behind its model is in the phases' records; reports and
    // the run's output show it as one table (report::lateness), not a warning per phase.
    let (phases, warnings, mpi) = coord.gather(phases, warnings, wl.metrics())?;

    let mut result = assemble(
        target, r, started, conditions, phases, layout, warnings, mpi,
    )?;
    result.testbed.aged_image = ks.start.take().or(kept::first_start(series));
    result.crash = crash;
    Ok(result)
}

/// The directory a repetition's workload runs in: made by fsgauge (and removed by its guard),
/// or, under MPI, made by the ranks together (see `dist`) and released through the coordinator.
struct WorkRoot {
    /// The directory's name under the target.
    name: String,
    /// The directory's path (the one the ranks share under MPI).
    root: PathBuf,
    /// The guard removing the directory fsgauge made; `None` under MPI.
    cleanup: Option<RootGuard>,
    /// The directory the ranks made together; `None` outside MPI.
    dist: Option<crate::dist::DistRoot>,
}

impl WorkRoot {
    /// Makes repetition `rep`'s workload directory in the target: named after the workload (and,
    /// in a `--dir`, the process and repetition), or the one the MPI ranks make together.
    fn make(
        target: &Target,
        wl: &dyn Workload,
        coord: &crate::dist::Coord,
        rep: u32,
    ) -> Result<Self> {
        let name = match target {
            Target::Testbed(_) => format!("fsgauge-{}", wl.kind()),
            Target::Dir(_) => format!("fsgauge-{}-{}-{rep}", wl.kind(), std::process::id()),
        };
        let root = target.path().join(&name);
        let dist = coord.make_root(target.path(), wl.kind(), rep)?;
        let root = dist.as_ref().map_or(root, |d| d.root.clone());
        let cleanup = if dist.is_some() {
            None
        } else {
            Some(RootGuard::make(target, &name).context("creating the workload directory")?)
        };
        Ok(Self {
            name,
            root,
            cleanup,
            dist,
        })
    }
}

/// The host's expiry of dirty data held for the run, when the options ask for one.
fn hold_expire(opts: &RunOptions) -> Result<Option<crate::host::dirty::ExpireHold>> {
    opts.dirty_expire
        .map(|e| {
            crate::host::dirty::ExpireHold::for_run(e.centisecs)
                .context("holding the host's vm.dirty_expire_centisecs (--dirty-expire)")
        })
        .transpose()
}

/// The memory limit and the memory charger the options ask for, applied before the workload runs.
fn memory_conditions(
    opts: &RunOptions,
    wl: &dyn Workload,
) -> Result<(Option<MemLimit>, Option<MemCharger>)> {
    let mem_limit = match opts.mem_limit {
        Some(limit) => Some(MemLimit::apply(
            limit,
            admit::memory_needs(wl).map_err(admit::MemoryRefusal::refused)?,
        )?),
        None => None,
    };
    let charger = match opts.mem_charge {
        Some(target_free) => Some(MemCharger::charge(target_free)?),
        None => None,
    };
    Ok((mem_limit, charger))
}

/// The workload's context: its (pinned) root, shown as `shown`, the run's options, the kept
/// series, and with `--layout` a hook snapshotting the layout with the pinned root unpinned.
fn run_context<'a>(
    target: &'a mut Target,
    r: Rep<'_>,
    root: PathBuf,
    shown: PathBuf,
    ks: &mut Start,
) -> RunContext<'a> {
    let opts = r.opts;
    let mut ctx = RunContext::new(target, root, r.seed, opts.cold, opts.progress)
        .with_shown_root(shown.clone())
        .with_coordinator(opts.coordinator.clone())
        .with_crash_points(opts.crash.judged())
        .with_kept_series(ks.take_series());
    if opts.layout {
        ctx.set_layout_hook(Box::new(move |root, target| {
            let mut snap = crate::layout::snapshot(root, &target.reach())?;
            unpin(&mut snap, root, &shown);
            Ok(snap)
        }));
    }
    ctx
}

/// A failed run's error, naming the host's store under the testbed's image where it is full:
/// a write error of the testbed may come from there.
fn with_backing_full(target: &Target, e: anyhow::Error) -> anyhow::Error {
    if let (Target::Testbed(t), true) = (target, crate::base::error::exit_code(&e) < 128) {
        if let Some(full) = t.backing_full() {
            return anyhow::anyhow!("{full}; the run failed with: {e:#}");
        }
    }
    e
}

/// After the workload (`ran`): a dead device server is the cause of whatever failed since, and
/// fails the run (exit 1); writes the store under an emulated disk refused are lost even when
/// nothing noticed, and fail it naming the store (exit 2).
fn check_devices_after(target: &mut Target, ran: &Result<()>) -> Result<()> {
    if let Err(dead) = target.check_devices() {
        return Err(match ran {
            Err(e) => dead.context(format!("the run failed with: {e:#}; its cause")),
            Ok(()) => dead,
        });
    }
    if let (Ok(()), Target::Testbed(t)) = (ran, &*target) {
        if let Some(full) = t.image_store_full() {
            return Err(anyhow::anyhow!(
                "{full}; the workload reported no error, but writes it made were refused"
            ));
        }
    }
    Ok(())
}

/// What conditioning (`RunOptions::precondition`, e.g. aging) left: its directory (removed
/// with the run), its phases and its layout record.
struct Conditioned {
    guard: Option<RootGuard>,
    phases: Vec<crate::results::PhaseResult>,
    layout: Option<serde_json::Value>,
}

/// Conditions the filesystem before the workload, when the run asks for it, and checks that
/// the workload (`need` bytes) still fits afterwards.
fn condition(
    target: &mut Target,
    r: Rep<'_>,
    need: u64,
    warnings: &mut Vec<String>,
    ks: &mut Start,
) -> Result<Conditioned> {
    let (wl, opts, seed, rep) = (r.wl, r.opts, r.seed, r.rep);
    let Some(Precondition(pre)) = &opts.precondition else {
        return Ok(Conditioned {
            guard: None,
            phases: Vec::new(),
            layout: None,
        });
    };
    if let Keeping::Hit { entry } = &ks.keeping {
        // The filesystem is the kept image of this aging: its tree is there already.
        room(target, Some(pre.kind()), wl, need)?;
        return Ok(Conditioned {
            guard: None,
            phases: entry.manifest.phases.clone(),
            layout: entry.manifest.layout.clone(),
        });
    }
    let pre_name = match &*target {
        Target::Testbed(_) => format!("fsgauge-pre-{}", pre.kind()),
        Target::Dir(_) => format!("fsgauge-pre-{}-{}-{rep}", pre.kind(), std::process::id()),
    };
    let guard =
        RootGuard::make(target, &pre_name).context("creating the conditioning directory")?;
    let aging_at = std::time::Instant::now();
    let (phases, layout, more) = target.set_up(SetUp::Conditioning, |target| {
        let mut ctx = RunContext::new(target, guard.pinned(), seed, opts.cold, opts.progress)
            .with_shown_root(guard.shown());
        pre.run(&mut ctx)
            .map_err(|e| guard.explain(e))
            .with_context(|| format!("conditioning the filesystem with {}", pre.kind()))?;
        ctx.make_cold()?;
        let layout = ctx.take_layout();
        let (phases, more) = ctx.into_parts();
        Ok((phases, layout, more))
    })?;
    warnings.extend(more);
    if let Some(s) = kept::save(target, &ks.keeping, aging_at, &phases, layout.as_ref())? {
        ks.start = Some(s);
    }
    room(target, Some(pre.kind()), wl, need)?;
    Ok(Conditioned {
        guard: Some(guard),
        phases,
        layout,
    })
}

/// A workload directory, made and removed through descriptors ([`RunDir`]) whatever happened.
/// In a `--dir` it is recorded in the ledger (`testbed cleanup` removes it after a SIGKILL); on
/// a testbed it goes with the testbed. Workloads reach it through [`RootGuard::pinned`] only.
struct RootGuard {
    dir: RunDir,
}

impl RootGuard {
    /// Makes directory `name` in the target.
    fn make(target: &Target, name: &str) -> Result<Self> {
        let dir = match target {
            Target::Dir(p) => RunDir::create(p, name, true)?,
            // Made through the testbed's held directory: the private directory above the mount
            // point may lie in a --workdir another user can rename.
            Target::Testbed(t) => RunDir::create_at(&t.reach(), t.mountpoint(), name, false)?,
        };
        Ok(Self { dir })
    }

    /// The path workloads use: `/proc/self/fd/N/.` of the directory made.
    fn pinned(&self) -> PathBuf {
        self.dir.pinned().to_path_buf()
    }

    /// The path as the user knows it.
    fn shown(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// An error that names a path below the pinned one says which directory that is.
    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        let pinned = self.dir.pinned().display().to_string();
        if format!("{e:#}").contains(&pinned) {
            e.context(format!(
                "{pinned} is the run directory {}",
                self.dir.path().display()
            ))
        } else {
            e
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--dir` with too little room: no mkfs and no --fs-size in the message, but the
    /// directory and its free space (checked through `run_in`, the run's own check, which a
    /// directory filling up after `check` reaches).
    #[test]
    fn a_full_dir_is_named_with_its_free_space_not_fs_size() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let wl: crate::workload::tree::Tree = serde_json::from_value(serde_json::json!({
            "dirs": 1, "files": 1, "file_size": "1P"
        }))
        .expect("tree params");
        let place = Place::Dir(dir.path().to_path_buf());
        let opts = RunOptions::default();
        let mut target = Target::Dir(dir.path().to_path_buf());
        let err = run_in(
            &mut target,
            Rep::new(&place, &wl, &opts, 1, 0),
            SystemTime::now(),
            &mut Start::off(),
        )
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        assert!(err.contains("free"), "{err}");
        assert!(!err.contains("mkfs") && !err.contains("--fs-size"), "{err}");
    }
}
