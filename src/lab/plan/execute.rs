//! Expanding a plan into its matrix of runs and running it: testbed × workload × repetition,
//! interleaved (repetition 1 of every cell before repetition 2 of any) so that slow drift of
//! the machine spreads over all configurations instead of biasing one; with `--resume`, runs
//! whose result already exists for the identical run spec (same [`runner::spec_hash`]) are not
//! made again, so a study killed halfway (even by SIGKILL: results are written atomically, one
//! file per finished run) completes without repeating work and loses nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use anyhow::{Context, Result};

pub use super::existing::existing_results;
use super::existing::{existing_files, set_aside_damaged};
use super::{check_phases, Fresh, Plan, Reps};
use crate::analysis::findings;
use crate::base::error::bad_input;
use crate::lab::runner::{self, Place, RunOptions};
use crate::measure::Progress;
use crate::results::{Question, ResultFile, RunResult, StudyInfo};
use crate::workload::Target;

/// One run of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRun {
    /// Index into [`Plan::testbeds`].
    pub testbed: usize,
    /// Index into [`Plan::workloads`].
    pub workload: usize,
    pub rep: u32,
    /// [`runner::spec_hash`] of the run: equal hashes are the same experiment.
    pub hash: String,
}

/// The expanded plan.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The runs of the first round, in the order they will be made.
    pub runs: Vec<PlannedRun>,
    /// Testbeds left out, with why (optional ones whose mkfs is missing).
    pub skipped: Vec<String>,
}

/// A testbed of the plan as the runner takes it: where its runs are made and their options
/// (one repetition at a time; the plan's run writes the results), built once for each use.
pub struct OnTestbed {
    pub place: Place,
    pub opts: RunOptions,
}

/// Testbed `testbed` of the plan as the runner takes it.
pub fn on_testbed(plan: &Plan, testbed: usize, progress: Progress) -> OnTestbed {
    let tb = &plan.testbeds[testbed];
    OnTestbed {
        place: Place::Testbed(tb.spec.clone()),
        opts: RunOptions {
            reps: 1,
            seed: Some(plan.seed),
            cold: plan.cold,
            mem_limit: tb.mem_limit,
            mem_charge: None,
            out: None,
            progress,
            layout: plan.layout,
            crash: plan.crash,
            dirty_expire: plan.dirty_expire,
            precondition: plan
                .age
                .as_ref()
                .map(|a| crate::lab::runner::Precondition(a.workload.clone())),
            keep_image: plan.keep_image.then(|| plan.name.clone()),
            study: None,
            coordinator: Default::default(),
        },
    }
}

/// What every result of a plan's workload entry carries: the plan, the entry's label and the
/// plan's questions.
pub fn study_info(plan: &Plan, workload: usize) -> StudyInfo {
    StudyInfo {
        plan: plan.name.clone(),
        workload: plan.workloads[workload].label.clone(),
        scale: plan.scale,
        questions: questions_as_run(plan),
    }
}

/// The plan's questions as this run of it asks them: under `reps = "auto"` (not a smoke run)
/// each is looked at after every round from the first round's repetitions up to the cap, so
/// its interval is the repeated one over those looks ([`crate::analysis::stats::sequential`]).
pub fn questions_as_run(plan: &Plan) -> Vec<Question> {
    let looks = match plan.reps {
        Reps::Auto { max, .. } if !smoke(plan) && plan.reps.initial() < max => {
            Some(crate::results::Looks {
                first: plan.reps.initial(),
                last: max,
            })
        }
        _ => None,
    };
    plan.questions
        .iter()
        .map(|q| Question {
            looks,
            ..q.question.clone()
        })
        .collect()
}

/// The hash of one run, as the runner records it.
pub fn run_hash(plan: &Plan, testbed: usize, workload: usize, rep: u32) -> String {
    let on = on_testbed(plan, testbed, Progress::hidden());
    runner::spec_hash(
        &on.place,
        plan.workloads[workload].workload.as_ref(),
        &on.opts,
        plan.seed,
        rep,
    )
}

fn planned(plan: &Plan, t: usize, w: usize, rep: u32) -> PlannedRun {
    PlannedRun {
        testbed: t,
        workload: w,
        rep,
        hash: run_hash(plan, t, w, rep),
    }
}

/// Expands the plan: the testbeds that can be built here (optional ones whose mkfs is missing
/// are left out), × workloads × the first round of repetitions.
pub fn matrix(plan: &Plan) -> Matrix {
    let mut skipped = Vec::new();
    let usable: Vec<usize> = (0..plan.testbeds.len())
        .filter(|&t| {
            let tb = &plan.testbeds[t];
            if tb.optional && tb.spec.fs.find_mkfs().is_none() {
                skipped.push(format!(
                    "{}: {} not installed, skipping (apt-get install {})",
                    tb.spec.label,
                    tb.spec.fs.mkfs_program(),
                    tb.spec.fs.package()
                ));
                false
            } else {
                true
            }
        })
        .collect();
    let reps = first_round(plan);
    let workloads = plan.workloads.len();
    // (testbed, workload, rep) in the order the runs are made.
    let mut order = Vec::new();
    if interleaved(plan) {
        for rep in 0..reps {
            for &t in &usable {
                order.extend((0..workloads).map(|w| (t, w, rep)));
            }
        }
    } else {
        for &t in &usable {
            for w in 0..workloads {
                order.extend((0..reps).map(|rep| (t, w, rep)));
            }
        }
    }
    let runs = order
        .into_iter()
        .map(|(t, w, rep)| planned(plan, t, w, rep))
        .collect();
    Matrix { runs, skipped }
}

/// Whether runs alternate between testbeds repetition by repetition (round-robin over the
/// testbeds within each round): always with a fresh filesystem per run; with one filesystem
/// per testbed when the plan has questions (every testbed's filesystem then exists at once, so
/// that drift hits both sides of a question alike).
pub fn interleaved(plan: &Plan) -> bool {
    plan.fresh == Fresh::PerRun || !plan.questions.is_empty()
}

/// What a plan will cost: runs, disk space at the peak, data written, time.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Runs of the first round.
    pub runs: usize,
    /// Most runs the plan can make (`reps = "auto"` may add repetitions).
    pub max_runs: usize,
    /// Runs whose result already exists in the results directory (skipped by `--resume`).
    pub done: usize,
    /// Disk (and RAM disk) space needed at once: the largest testbed with its journal.
    pub peak_disk: u64,
    pub peak_ram: u64,
    /// Bytes the workloads write over the first round.
    pub data_written: u64,
    /// Seconds for the first round, roughly (measured time of earlier identical runs where
    /// known, otherwise set-up time plus data at 150 MB/s).
    pub seconds: f64,
}

/// Seconds to build and tear down one testbed, roughly (mkfs, mount, unmount, loop device).
const SETUP_S: f64 = 2.0;
/// Rate assumed for unknown runs: data written once and removed or read once.
const ASSUMED_BYTES_PER_S: f64 = 150e6;

/// Estimates the cost of a plan; `existing` are results already in the results directory.
///
/// Sums are checked: a plan whose totals do not fit in 64 bits is bad input.
pub fn estimate(
    plan: &Plan,
    m: &Matrix,
    existing: &HashMap<String, RunResult>,
) -> Result<Estimate> {
    let over = |what: &str| {
        bad_input(format!(
            "the plan's {what} overflows 64 bits; use smaller sizes or fewer runs"
        ))
    };
    let mut e = Estimate {
        runs: m.runs.len(),
        max_runs: 0,
        done: 0,
        peak_disk: 0,
        peak_ram: 0,
        data_written: 0,
        seconds: 0.0,
    };
    let cells: std::collections::BTreeSet<(usize, usize)> =
        m.runs.iter().map(|r| (r.testbed, r.workload)).collect();
    let most = if smoke(plan) {
        first_round(plan)
    } else {
        plan.reps.max()
    };
    e.max_runs = cells.len() * most as usize;
    for r in &m.runs {
        let tb = &plan.testbeds[r.testbed].spec;
        let mut disk: u64 = 0;
        let mut ram: u64 = 0;
        let image = tb.size;
        match tb.backing {
            crate::testbed::Backing::File => disk = image,
            crate::testbed::Backing::Ram => ram = image,
        }
        if let Some(j) = tb.journal {
            let (on, what) = match j.backing {
                crate::testbed::Backing::File => (&mut disk, "peak disk use"),
                crate::testbed::Backing::Ram => (&mut ram, "peak memory use"),
            };
            *on = on.checked_add(j.size).ok_or_else(|| over(what))?;
        }
        e.peak_disk = e.peak_disk.max(disk);
        e.peak_ram = e.peak_ram.max(ram);
        let wl = &plan.workloads[r.workload].workload;
        let space = wl.space_needed().map_err(|e| bad_input(e.to_string()))?;
        e.data_written = e
            .data_written
            .checked_add(space)
            .ok_or_else(|| over("data written"))?;
        if let Some(done) = existing.get(&r.hash) {
            e.done += 1;
            e.seconds += done.phases.iter().map(|p| p.wall_s).sum::<f64>() + SETUP_S;
        } else {
            e.seconds += SETUP_S + 2.0 * space as f64 / ASSUMED_BYTES_PER_S;
        }
    }
    if plan.fresh == Fresh::PerTestbed && interleaved(plan) {
        // Every testbed's filesystem exists at once.
        let (mut disk, mut ram) = (0u64, 0u64);
        let built: BTreeSet<usize> = m.runs.iter().map(|r| r.testbed).collect();
        for t in built {
            let tb = &plan.testbeds[t].spec;
            let mut add = |b: crate::testbed::Backing, n: u64| match b {
                crate::testbed::Backing::File => disk = disk.saturating_add(n),
                crate::testbed::Backing::Ram => ram = ram.saturating_add(n),
            };
            add(tb.backing, tb.size);
            if let Some(j) = tb.journal {
                add(j.backing, j.size);
            }
        }
        e.peak_disk = disk;
        e.peak_ram = ram;
    }
    Ok(e)
}

/// How a plan is run.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Results directory.
    pub out: PathBuf,
    /// Skip runs whose result exists in `out` with the identical spec hash.
    pub resume: bool,
    pub progress: Progress,
    /// No per-run lines on stderr.
    pub quiet: bool,
    /// How many times a run disturbed by another process's cache drop is made (1 or more;
    /// [`super::DISTURBED_ATTEMPTS`] by default): the last attempt is kept.
    pub attempts: u32,
}

/// What a plan run produced.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    /// Every result of the plan, in matrix order: made now or found (with `--resume`).
    pub results: Vec<RunResult>,
    /// Runs made now.
    pub ran: usize,
    /// Runs skipped because their result existed.
    pub reused: usize,
}

/// Checks every testbed × workload pair as the runner will (root, mkfs installed, space,
/// memory limit) before anything is made; errors name the plan entries.
pub fn check(plan: &Plan, m: &Matrix) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for r in &m.runs {
        if !seen.insert((r.testbed, r.workload)) {
            continue;
        }
        let tb = &plan.testbeds[r.testbed];
        let wl = &plan.workloads[r.workload];
        let on = on_testbed(plan, r.testbed, Progress::hidden());
        runner::admit::check(&on.place, wl.workload.as_ref(), &on.opts).map_err(|e| {
            let msg = format!(
                "{}: testbed {:?} with the {} workload at {}: {e:#}",
                tb.at,
                tb.spec.label,
                wl.kind,
                wl.at.line_in(&tb.at.file)
            );
            if crate::base::error::exit_code(&e) == 2 {
                bad_input(msg)
            } else {
                e.context(msg)
            }
        })?;
    }
    Ok(())
}

/// The figure `reps = "auto"` watches: a run's elapsed time, all phases together.
pub fn main_metric(r: &RunResult) -> f64 {
    r.phases.iter().map(|p| p.wall_s).sum()
}

fn needs_more(plan: &Plan, done: &[&RunResult]) -> bool {
    let Reps::Auto { cv, max } = plan.reps else {
        return false;
    };
    if done.len() as u32 >= max {
        return false;
    }
    let xs: Vec<f64> = done.iter().map(|r| main_metric(r)).collect();
    match crate::analysis::stats::summarize(&xs) {
        Some(s) => s.n < super::AUTO_MIN_REPS as usize || s.cv > cv,
        None => true,
    }
}

/// Below this `--scale` a plan is a smoke run: `reps = "auto"` stops at its first round.
pub const SMOKE_SCALE: f64 = 0.25;

/// A smoke run (`--scale` below [`SMOKE_SCALE`] with `reps = "auto"`): it checks that every
/// run of the plan works, in about a minute, and makes no more repetitions than the first
/// round's; its findings are indicative (its phases are too short to decide them).
pub fn smoke(plan: &Plan) -> bool {
    matches!(plan.reps, Reps::Auto { .. }) && plan.scale < SMOKE_SCALE
}

/// Repetitions of every cell in the first round: one in a smoke run (it checks that each run
/// works, in about a minute), else the plan's own first round.
pub fn first_round(plan: &Plan) -> u32 {
    if smoke(plan) {
        1
    } else {
        plan.reps.initial()
    }
}

/// The cells (testbed, workload index) that `reps = "auto"` repeats once more for a plan's
/// questions: every cell that an undecided question reads (both its sides), unless it has
/// `max` repetitions already. A pure function of the results so far (the same
/// [`findings::evaluate`] the report answers the questions with).
pub fn cells_to_repeat(
    questions: &[Question],
    cells: &BTreeMap<(usize, usize), Vec<RunResult>>,
    max: u32,
) -> BTreeSet<(usize, usize)> {
    let all: Vec<RunResult> = cells.values().flatten().cloned().collect();
    let mut out = BTreeSet::new();
    for q in questions {
        if !findings::evaluate(q, &all).undecided() {
            continue;
        }
        for (&cell, rs) in cells {
            if (rs.len() as u32) < max && rs.iter().any(|r| findings::uses(q, r)) {
                out.insert(cell);
            }
        }
    }
    out
}

/// The next round of `reps = "auto"`: one more repetition of each cell that needs it — for
/// the plan's questions while one is undecided ([`cells_to_repeat`]), without questions while
/// a cell's run time still varies — in matrix order (round-robin over the testbeds).
fn next_round(plan: &Plan, cells: &BTreeMap<(usize, usize), Vec<RunResult>>) -> Vec<PlannedRun> {
    let Reps::Auto { max, .. } = plan.reps else {
        return Vec::new();
    };
    if smoke(plan) {
        return Vec::new();
    }
    let wanted: BTreeSet<(usize, usize)> = if plan.questions.is_empty() {
        cells
            .iter()
            .filter(|(_, rs)| needs_more(plan, &rs.iter().collect::<Vec<_>>()))
            .map(|(&c, _)| c)
            .collect()
    } else {
        cells_to_repeat(&questions_as_run(plan), cells, max)
    };
    wanted
        .into_iter()
        .map(|(t, w)| {
            planned(
                plan,
                t,
                w,
                cells.get(&(t, w)).map_or(0, |rs| rs.len() as u32),
            )
        })
        .collect()
}

/// Runs the plan: checks first, then every run of the matrix in order (skipping finished ones
/// under `--resume`), then, for `reps = "auto"`, rounds of one more repetition of the cells
/// that need it (see [`next_round`]).
///
/// Every result carries the plan's study ([`study_info`]). Before a result made now is written,
/// it is checked to have the phases the plan's questions read in it ([`check_phases`]): phase
/// names are known only from a run, and a question naming a phase the workload does not have
/// stops the plan there, with the question's line and column, and nothing of that run written.
/// A result reused under `--resume` whose study differs (a question added since) is rewritten
/// with the plan's study; its measurements and spec hash stay.
pub fn execute(plan: &Plan, m: &Matrix, opts: &ExecOptions) -> Result<Executed> {
    check(plan, m)?;
    // Before anything runs: a results directory that cannot take results stops the plan here.
    crate::results::check_out_dir(&opts.out)?;
    let existing = if opts.resume {
        set_aside_damaged(&opts.out)?;
        existing_files(&opts.out)?
    } else {
        HashMap::new()
    };
    let mut s = Session {
        plan,
        opts,
        existing,
        total_hint: m.runs.len(),
        counter: 0,
        ex: Executed::default(),
        by_cell: BTreeMap::new(),
    };
    if interleaved(plan) {
        s.run_interleaved(m)?;
    } else {
        s.run_by_testbed(m)?;
    }
    let mut ex = s.ex;
    ex.results = s.by_cell.into_values().flatten().collect();
    Ok(ex)
}

/// Runs block `block` of a plan spread over machines (`run --on slurm`): repetition `block` of
/// every run of the matrix `m`, in its order, on this machine, so that each comparison is paired
/// within one machine. Runs whose result exists in `opts.out` are never made again (a block
/// resubmitted after a cancel finishes what was left). The plan's repetitions are fixed (see
/// [`crate::lab::fleet`]): no further rounds follow.
pub fn execute_block(plan: &Plan, m: &Matrix, block: u32, opts: &ExecOptions) -> Result<Executed> {
    let runs: Vec<PlannedRun> = m.runs.iter().filter(|r| r.rep == block).cloned().collect();
    let m = Matrix {
        runs,
        skipped: m.skipped.clone(),
    };
    check(plan, &m)?;
    crate::results::check_out_dir(&opts.out)?;
    set_aside_damaged(&opts.out)?;
    let mut s = Session {
        plan,
        opts,
        existing: existing_files(&opts.out)?,
        total_hint: m.runs.len(),
        counter: 0,
        ex: Executed::default(),
        by_cell: BTreeMap::new(),
    };
    // Interleaved within the block whatever the plan's order: one round is one block.
    s.run_interleaved(&Matrix {
        runs: m.runs.clone(),
        skipped: Vec::new(),
    })?;
    let mut ex = s.ex;
    ex.results = s.by_cell.into_values().flatten().collect();
    Ok(ex)
}

/// The state of one [`execute`]: the results found under `--resume`, the runs counted so far,
/// and the results of each (testbed, workload) cell.
struct Session<'a> {
    plan: &'a Plan,
    opts: &'a ExecOptions,
    existing: HashMap<String, ResultFile>,
    total_hint: usize,
    counter: usize,
    ex: Executed,
    by_cell: BTreeMap<(usize, usize), Vec<RunResult>>,
}

impl Session<'_> {
    /// Builds testbed `testbed`'s filesystem, kept by the caller for several runs.
    fn build(&self, testbed: usize) -> Result<Target> {
        let on = on_testbed(self.plan, testbed, self.opts.progress);
        runner::build_target(&on.place, &on.opts)
    }

    /// One run: reused if a result of it exists (its study brought up to date), otherwise made
    /// on `target` (or a filesystem of its own when none) and written.
    fn one(&mut self, run: &PlannedRun, target: Option<&mut Target>) -> Result<RunResult> {
        self.counter += 1;
        let (plan, opts) = (self.plan, self.opts);
        let tb = &plan.testbeds[run.testbed];
        let wl = &plan.workloads[run.workload];
        let study = study_info(plan, run.workload);
        // Past the first round (reps = "auto"), the count of further runs is not known ahead.
        let of = if self.counter <= self.total_hint {
            format!("{}/{}", self.counter, self.total_hint)
        } else {
            format!("{}, more repetitions", self.counter)
        };
        let what = format!(
            "[{of}] {} · {} · rep {}",
            tb.spec.label,
            wl.describe(),
            run.rep
        );
        if let Some(f) = self.existing.get(&run.hash) {
            if !opts.quiet {
                eprintln!("{what}: done before (result {}), skipped", &run.hash[..10]);
            }
            let r = restudied(f, study, &plan.questions)?;
            self.ex.reused += 1;
            return Ok(r);
        }
        if !opts.quiet {
            eprintln!("{what}");
        }
        // The result is written here, after its phases are checked against the questions.
        let OnTestbed {
            place,
            opts: mut ropts,
        } = on_testbed(plan, run.testbed, opts.progress);
        ropts.study = Some(study);
        if wl.keep_image {
            // The append test keeps its own agings (the plan refuses it beside [age]).
            ropts.keep_image = Some(plan.name.clone());
        }
        // Only a run that starts from nothing of an earlier attempt's can be made again as the
        // same experiment: not one on a filesystem the plan keeps between runs (the attempt
        // would leave its files there), nor one that ages (a second attempt would start from
        // the image the first made).
        let remakeable = target.is_none() && !wl.keep_image && plan.age.is_none();
        let mut target = target;
        let mut set_aside = Vec::new();
        let attempts = opts.attempts.max(1);
        let mut result = loop {
            let outcome = runner::run_rep(
                target.as_deref_mut(),
                &place,
                wl.workload.as_ref(),
                &ropts,
                plan.seed,
                run.rep,
            )
            .with_context(|| format!("run {what}"))?;
            check_phases(&plan.questions, &outcome.result)?;
            let attempt = set_aside.len() as u32 + 1;
            match outcome.result.disturbed() {
                Some(why) if !remakeable => {
                    eprintln!(
                        "warning: {what}: {why}; the run is kept (it ages, or its filesystem is kept between runs, so another attempt would not be the same experiment)"
                    );
                    break outcome.result;
                }
                Some(why) if attempt < attempts => {
                    eprintln!(
                        "warning: {what}: {why}; the run is made again (attempt {} of {attempts})",
                        attempt + 1
                    );
                    set_aside.push(format!(
                        "attempt {attempt}, started {}: {why}",
                        outcome.result.started_at
                    ));
                }
                Some(why) if attempts == 1 => {
                    eprintln!("warning: {what}: {why}; the run is kept (--attempts 1)");
                    break outcome.result;
                }
                Some(why) => {
                    eprintln!(
                        "warning: {what}: {why}, in each of {attempts} attempts; the last is kept as the result (find what disturbs this machine: another benchmark or test suite)"
                    );
                    break outcome.result;
                }
                None => break outcome.result,
            }
        };
        result.set_aside = set_aside;
        crate::results::write_result(&opts.out, &result)?;
        self.ex.ran += 1;
        Ok(result)
    }

    /// Per testbed (fresh = "per-testbed" with questions): every testbed's filesystem, built at
    /// its first run made now, kept until the end; rounds of the whole matrix.
    fn run_interleaved(&mut self, m: &Matrix) -> Result<()> {
        let mut targets: BTreeMap<usize, Target> = BTreeMap::new();
        let mut round = m.runs.clone();
        while !round.is_empty() {
            for run in &round {
                // The testbed's filesystem when the plan keeps one and the run is made now.
                let shared =
                    self.plan.fresh != Fresh::PerRun && !self.existing.contains_key(&run.hash);
                let target = match targets.entry(run.testbed) {
                    _ if !shared => None,
                    std::collections::btree_map::Entry::Occupied(o) => Some(o.into_mut()),
                    std::collections::btree_map::Entry::Vacant(v) => {
                        Some(v.insert(self.build(run.testbed)?))
                    }
                };
                let r = self.one(run, target)?;
                self.by_cell
                    .entry((run.testbed, run.workload))
                    .or_default()
                    .push(r);
            }
            round = next_round(self.plan, &self.by_cell);
        }
        for (_, target) in std::mem::take(&mut targets) {
            if let Target::Testbed(tb) = target {
                tb.destroy()?;
            }
        }
        Ok(())
    }

    /// One testbed after the other: each testbed's filesystem built at its first run made now
    /// and destroyed after its last workload; each cell's repetitions run until it needs no more.
    fn run_by_testbed(&mut self, m: &Matrix) -> Result<()> {
        let plan = self.plan;
        let mut groups: Vec<usize> = m.runs.iter().map(|r| r.testbed).collect();
        groups.dedup();
        for t in groups {
            let mut target: Option<Target> = None;
            for w in 0..plan.workloads.len() {
                let mut rep = 0;
                loop {
                    let cell = self.by_cell.entry((t, w)).or_default();
                    let want_more = rep < first_round(plan)
                        || (!smoke(plan) && needs_more(plan, &cell.iter().collect::<Vec<_>>()));
                    if !want_more {
                        break;
                    }
                    let run = planned(plan, t, w, rep);
                    let r = if self.existing.contains_key(&run.hash) {
                        self.one(&run, None)?
                    } else {
                        if target.is_none() {
                            target = Some(self.build(t)?);
                        }
                        self.one(&run, target.as_mut())?
                    };
                    self.by_cell.entry((t, w)).or_default().push(r);
                    rep += 1;
                }
            }
            if let Some(Target::Testbed(tb)) = target {
                tb.destroy()?;
            }
        }
        Ok(())
    }
}

/// A result reused under `--resume`, with the plan's study: checked to have the phases the
/// questions read, and rewritten in place when its study differs (a question added since).
fn restudied(
    f: &ResultFile,
    study: StudyInfo,
    questions: &[super::PlanQuestion],
) -> Result<RunResult> {
    let mut r = f.result.clone();
    let changed = r.study.as_ref() != Some(&study);
    r.study = Some(study);
    check_phases(questions, &r)?;
    if changed {
        let mut bytes = serde_json::to_vec_pretty(&r)?;
        bytes.push(b'\n');
        crate::base::atomic::write_atomic(&f.path, &bytes)
            .with_context(|| format!("updating the study of {}", f.path.display()))?;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::plan::parse_test;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            "reps = 2\n{extra}\n[[testbed]]\nlabel = \"a\"\nfs = \"ext4\"\nsize = \"256M\"\n\n[[testbed]]\nlabel = \"b\"\nfs = \"ext4\"\nsize = \"512M\"\njournal = \"file:16M\"\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 2\nfile_size = \"1M\"\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 3\nfile_size = \"4K\"\n"
        );
        parse_test(&text, None).unwrap()
    }

    /// (testbed, workload, repetition) of each run, in order.
    fn order(runs: &[PlannedRun]) -> Vec<(usize, usize, u32)> {
        runs.iter()
            .map(|r| (r.testbed, r.workload, r.rep))
            .collect()
    }

    /// The order of [`plan`]'s eight runs (2 testbeds × 2 workloads × 2 repetitions) when
    /// repetitions interleave: every cell once, then every cell again.
    const INTERLEAVED: [(usize, usize, u32); 8] = [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 0),
        (1, 1, 0),
        (0, 0, 1),
        (0, 1, 1),
        (1, 0, 1),
        (1, 1, 1),
    ];

    #[test]
    fn per_run_matrices_interleave_repetitions() {
        let p = plan("");
        let m = matrix(&p);
        let order = order(&m.runs);
        assert_eq!(order, INTERLEAVED);
        let hashes: std::collections::BTreeSet<_> = m.runs.iter().map(|r| &r.hash).collect();
        assert_eq!(hashes.len(), 8, "every run has its own spec hash");
        assert_eq!(m.runs[0].hash, run_hash(&p, 0, 0, 0), "hashes are stable");
    }

    #[test]
    fn per_testbed_matrices_keep_a_testbed_together() {
        let p = plan("fresh = \"per-testbed\"");
        let order: Vec<usize> = matrix(&p).runs.iter().map(|r| r.testbed).collect();
        assert_eq!(order, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn estimates_count_the_peak_disk_and_the_data() {
        let p = plan("");
        let m = matrix(&p);
        let e = estimate(&p, &m, &HashMap::new()).unwrap();
        assert_eq!(e.runs, 8);
        assert_eq!(e.max_runs, 8);
        assert_eq!(
            e.peak_disk,
            (512 << 20) + (16 << 20),
            "largest image plus its journal file"
        );
        assert_eq!(e.peak_ram, 0);
        // 4 runs of 2 x 1M files and 4 runs of 3 x 4K files, plus a block per directory.
        assert_eq!(
            e.data_written,
            4 * ((2 << 20) + 4096) + 4 * (3 * 4096 + 4096)
        );
        assert!(e.seconds >= 8.0 * SETUP_S);
        let mut auto = plan("");
        auto.reps = Reps::Auto { cv: 0.05, max: 7 };
        let m = matrix(&auto);
        let e = estimate(&auto, &m, &HashMap::new()).unwrap();
        assert_eq!((e.runs, e.max_runs), (12, 28));
    }

    /// A result of testbed `tb` and workload entry `wl` whose create phase ran at `rate` ops/s
    /// and delete phase at twice that.
    fn res(tb: &str, wl: &str, rate: f64) -> RunResult {
        let lat = serde_json::to_value(crate::results::LatencySummary::default()).unwrap();
        let phase = |name: &str, r: f64| {
            serde_json::json!({"name": name, "wall_s": 1.0, "user_s": 0.0, "sys_s": 0.0,
                "ops": r as u64, "bytes": 0, "ops_per_s": r, "bytes_per_s": 0.0,
                "latency": lat, "device": null, "series": []})
        };
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": crate::results::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
            "testbed": crate::results::TestbedInfo::default(),
            "workload": {"kind": "tree", "params": {"dirs": 1}},
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "drop"},
            "phases": [phase("create", rate), phase("delete", 2.0 * rate)],
            "errors": []
        }))
        .unwrap();
        r.testbed.label = tb.into();
        r.study = Some(StudyInfo {
            plan: "t".into(),
            workload: wl.into(),
            questions: Vec::new(),
            scale: 1.0,
        });
        r
    }

    fn question(compares: crate::results::Compares, base: &str, variant: &str) -> Question {
        use crate::results::Compares;
        Question {
            id: "q".into(),
            ask: String::new(),
            baseline: base.into(),
            variant: variant.into(),
            compares,
            testbed: (compares != Compares::Testbeds).then(|| "a".into()),
            workload: (compares != Compares::Workloads).then(|| "w1".into()),
            phase: (compares != Compares::Phases).then(|| "create".into()),
            metric: "ops_per_s".into(),
            filter: Default::default(),
            published: None,
            source: String::new(),
            epsilon: 0.05,
            looks: None,
        }
    }

    /// Cells (testbed a=0/b=1, workload w1=0/w2=1) with these rates per repetition.
    fn cells(rates: [&[f64]; 4]) -> BTreeMap<(usize, usize), Vec<RunResult>> {
        let mut out = BTreeMap::new();
        for (i, (t, w)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            let rs: Vec<RunResult> = rates[i]
                .iter()
                .map(|&x| res(["a", "b"][t], ["w1", "w2"][w], x))
                .collect();
            out.insert((t, w), rs);
        }
        out
    }

    const NOISY: &[f64] = &[100.0, 110.0, 90.0];
    const NOISY_TOO: &[f64] = &[101.0, 95.0, 108.0];
    const STEADY: &[f64] = &[100.0, 100.5, 99.5];
    const DOUBLE: &[f64] = &[200.0, 202.0, 198.0];

    #[test]
    fn an_undecided_question_repeats_both_its_sides_and_nothing_else() {
        use crate::results::Compares;
        let by_testbed = question(Compares::Testbeds, "a", "b");
        let noisy = cells([NOISY, STEADY, NOISY_TOO, STEADY]);
        assert!(findings::evaluate(
            &by_testbed,
            &noisy.values().flatten().cloned().collect::<Vec<_>>()
        )
        .undecided());
        assert_eq!(
            cells_to_repeat(std::slice::from_ref(&by_testbed), &noisy, 10),
            BTreeSet::from([(0, 0), (1, 0)]),
            "a/w1 and b/w1; the w2 cells are in no question"
        );
        // Decided: a clear doubling, or an interval inside +-5%.
        let larger = cells([STEADY, NOISY, DOUBLE, NOISY]);
        assert!(cells_to_repeat(std::slice::from_ref(&by_testbed), &larger, 10).is_empty());
        let same = cells([STEADY, NOISY, &[100.2, 99.8, 100.0], NOISY]);
        assert!(cells_to_repeat(std::slice::from_ref(&by_testbed), &same, 10).is_empty());
        // Other kinds of question read other cells.
        let by_workload = question(Compares::Workloads, "w1", "w2");
        assert_eq!(
            cells_to_repeat(
                &[by_workload],
                &cells([NOISY, NOISY_TOO, STEADY, STEADY]),
                10
            ),
            BTreeSet::from([(0, 0), (0, 1)])
        );
        let by_phase = question(Compares::Phases, "create", "delete");
        let noisy_phases: Vec<RunResult> = [100.0, 300.0, 50.0]
            .iter()
            .zip([180.0, 190.0, 300.0])
            .map(|(&c, d)| {
                let mut r = res("a", "w1", c);
                r.phases[1].ops_per_s = d;
                r
            })
            .collect();
        let mut by_cell = cells([STEADY, STEADY, STEADY, STEADY]);
        by_cell.insert((0, 0), noisy_phases);
        assert_eq!(
            cells_to_repeat(std::slice::from_ref(&by_phase), &by_cell, 10),
            BTreeSet::from([(0, 0)])
        );
        // Decided phases (delete runs at twice the create rate): nothing.
        assert!(
            cells_to_repeat(&[by_phase], &cells([STEADY, STEADY, STEADY, STEADY]), 10).is_empty()
        );
    }

    #[test]
    fn repetitions_stop_at_the_cap_cell_by_cell() {
        use crate::results::Compares;
        let q = question(Compares::Testbeds, "a", "b");
        let mut noisy = cells([NOISY, STEADY, NOISY_TOO, STEADY]);
        assert!(cells_to_repeat(std::slice::from_ref(&q), &noisy, 3).is_empty());
        noisy.get_mut(&(0, 0)).unwrap().push(res("a", "w1", 105.0));
        assert_eq!(
            cells_to_repeat(std::slice::from_ref(&q), &noisy, 4),
            BTreeSet::from([(1, 0)]),
            "a/w1 has its 4 already"
        );
    }

    #[test]
    fn rounds_follow_the_questions_in_matrix_order() {
        let mut p = plan(
            "[[question]]\nbaseline = \"a\"\nvariant = \"b\"\nworkload = \"tree#2\"\nphase = \"create\"\nmetric = \"ops_per_s\"\n",
        );
        // Fixed repetitions: no further round.
        let noisy = cells([NOISY, NOISY_TOO, NOISY_TOO, NOISY]);
        assert!(next_round(&p, &noisy).is_empty());
        p.reps = Reps::Auto { cv: 0.05, max: 5 };
        let round = order(&next_round(&p, &noisy));
        // tree#2 is workload 1; the question's cells get their 4th repetition (rep 3),
        // testbed a first.
        let mut wl2 = cells([NOISY, NOISY_TOO, NOISY_TOO, NOISY]);
        for rs in wl2.values_mut() {
            for r in rs.iter_mut() {
                if let Some(s) = r.study.as_mut() {
                    s.workload = if s.workload == "w1" {
                        "tree#1"
                    } else {
                        "tree#2"
                    }
                    .into();
                }
            }
        }
        let round2 = order(&next_round(&p, &wl2));
        assert!(round.is_empty(), "no result is of tree#2: {round:?}");
        assert_eq!(round2, [(0, 1, 3), (1, 1, 3)]);
        assert_eq!(next_round(&p, &wl2)[0].hash, run_hash(&p, 0, 1, 3));
    }

    #[test]
    fn per_testbed_plans_with_questions_alternate_between_testbeds() {
        let p = plan(
            "fresh = \"per-testbed\"\n[[question]]\nbaseline = \"a\"\nvariant = \"b\"\nworkload = \"tree#1\"\nphase = \"create\"\nmetric = \"elapsed\"\n",
        );
        assert!(interleaved(&p));
        let order = order(&matrix(&p).runs);
        assert_eq!(order, INTERLEAVED);
        let e = estimate(&p, &matrix(&p), &HashMap::new()).unwrap();
        assert_eq!(
            e.peak_disk,
            (256 << 20) + (512 << 20) + (16 << 20),
            "every testbed's filesystem at once"
        );
    }

    #[test]
    fn every_result_of_an_entry_carries_the_plan_and_its_label() {
        let p = plan(
            "[[question]]\nbaseline = \"a\"\nvariant = \"b\"\nworkload = \"tree#1\"\nphase = \"create\"\nmetric = \"elapsed\"\n",
        );
        let s = study_info(&p, 1);
        assert_eq!((s.plan.as_str(), s.workload.as_str()), ("t", "tree#2"));
        assert_eq!(s.questions.len(), 1);
        assert_eq!(s.questions[0].workload.as_deref(), Some("tree#1"));
    }

    #[test]
    fn findings_read_sweep_cells_and_keep_to_their_plan() {
        use crate::results::Compares;
        let mut q = question(Compares::Testbeds, "a", "b");
        q.filter.insert("threads".into(), serde_json::json!(4));
        // A cell of a split sweep records its value as a list of one.
        let cell = |tb: &str, threads: u64, rate: f64| {
            let mut r = res(tb, "w1", rate);
            r.workload.params = serde_json::json!({"threads": [threads]});
            r.study.as_mut().unwrap().questions = vec![q.clone()];
            r
        };
        let mut rs: Vec<RunResult> = Vec::new();
        for (&x, &y) in STEADY.iter().zip(DOUBLE) {
            rs.extend([
                cell("a", 4, x),
                cell("b", 4, y),
                cell("a", 1, y),
                cell("b", 1, x),
            ]);
        }
        assert!(findings::uses(&q, &rs[0]) && !findings::uses(&q, &rs[2]));
        // Another plan's runs with the same labels and the opposite effect.
        let mut other = rs.clone();
        for r in &mut other {
            r.study.as_mut().unwrap().plan = "other".into();
            r.testbed.label = if r.testbed.label == "a" { "b" } else { "a" }.into();
        }
        rs.extend(other);
        let fs = findings::findings(&rs);
        assert_eq!(fs.len(), 2, "one question per plan");
        use crate::analysis::stats::Decision;
        for (f, want) in fs.iter().zip([Decision::Larger, Decision::Smaller]) {
            assert_eq!((f.base_values.len(), f.variant_values.len()), (3, 3));
            assert_eq!(f.decision, Some(want), "{f:?}");
        }
    }

    /// Runs made in pairs share the machine's speed spells: the paired interval sees through
    /// the spells that leave the unpaired one undecided; without matching repetitions on both
    /// sides nothing is paired.
    #[test]
    fn repetitions_made_in_pairs_are_compared_pair_by_pair() {
        use crate::analysis::stats::Decision;
        use crate::results::Compares;
        let q = question(Compares::Testbeds, "a", "b");
        // A 30% spell in repetitions 1 and 3 hits both testbeds; b is 10% faster throughout.
        let spells = [100.0, 130.0, 101.0, 128.0, 99.0];
        let wobble = [1.0, 1.01, 0.99, 1.0, 1.005];
        let mut rs = Vec::new();
        for (rep, (&x, &w)) in spells.iter().zip(&wobble).enumerate() {
            for (tb, v) in [("a", x), ("b", x * 1.1 * w)] {
                let mut r = res(tb, "w1", v);
                r.rep = rep as u32;
                rs.push(r);
            }
        }
        let f = findings::evaluate(&q, &rs);
        let r = f.ratio.expect("a ratio");
        assert!(r.paired && r.n_base == 5, "{r:?}");
        assert_eq!(f.decision, Some(Decision::Larger), "{r:?}");
        assert!(r.low > 1.08 && r.high < 1.12, "{r:?}");
        let unpaired =
            crate::analysis::stats::ratio_of_means(&f.base_values, &f.variant_values).unwrap();
        assert_eq!(unpaired.decide(0.05), Decision::Undecided, "{unpaired:?}");
        // The last repetition of b is missing: the sides no longer pair up.
        rs.pop();
        let f = findings::evaluate(&q, &rs);
        assert!(!f.ratio.expect("a ratio").paired);
        assert_eq!((f.base_values.len(), f.variant_values.len()), (5, 4));
    }

    /// A scaled-down run is a smoke run: no repetitions past the first round, whatever its
    /// questions say.
    #[test]
    fn a_smoke_run_stops_at_its_first_round() {
        use crate::results::Compares;
        let mut p = plan("");
        p.reps = Reps::Auto { cv: 0.05, max: 10 };
        p.questions = Vec::new();
        let mut noisy = cells([NOISY, STEADY, NOISY_TOO, STEADY]);
        for (i, r) in noisy
            .get_mut(&(0, 0))
            .expect("cell a/w1")
            .iter_mut()
            .enumerate()
        {
            r.phases[0].wall_s = 1.0 + i as f64;
        }
        assert!(
            !next_round(&p, &noisy).is_empty(),
            "the CV rule repeats noisy cells"
        );
        assert_eq!(first_round(&p), 3);
        p.scale = 0.05;
        assert!(smoke(&p));
        assert!(next_round(&p, &noisy).is_empty());
        // One repetition of every cell: a smoke run checks that each run works.
        assert_eq!(first_round(&p), 1);
        let q = question(Compares::Testbeds, "a", "b");
        assert!(!cells_to_repeat(std::slice::from_ref(&q), &noisy, 10).is_empty());
        p.scale = SMOKE_SCALE;
        assert!(!smoke(&p), "0.25 and up is a scaled run, not a smoke run");
    }

    /// Under `reps = "auto"` a question is looked at after every round until it decides, so
    /// the results carry its looks and its interval is the repeated one: wider than the plain
    /// 95% interval on the same values, and deciding only what it can decide at every look.
    #[test]
    fn a_question_run_until_it_decides_gets_the_repeated_interval() {
        use crate::results::{Compares, Looks};
        let with = |reps: Reps, scale: f64| {
            let mut p = plan("[[question]]\nbaseline = \"a\"\nvariant = \"b\"\nworkload = \"tree#1\"\nphase = \"create\"\nmetric = \"ops_per_s\"\n");
            p.reps = reps;
            p.scale = scale;
            questions_as_run(&p)[0].looks
        };
        let auto = Reps::Auto { cv: 0.05, max: 10 };
        assert_eq!(with(auto, 1.0), Some(Looks { first: 3, last: 10 }));
        assert_eq!(with(Reps::Fixed(5), 1.0), None, "one look");
        assert_eq!(with(auto, 0.05), None, "a smoke run looks once");
        assert_eq!(
            with(Reps::Auto { cv: 0.05, max: 3 }, 1.0),
            None,
            "one round only"
        );

        // Five pairs whose per-pair ratios give a plain 95% interval that just excludes 1.
        let pairs = [
            (100.0, 104.0),
            (100.0, 101.5),
            (100.0, 103.0),
            (100.0, 100.5),
            (100.0, 102.5),
        ];
        let plain = crate::analysis::stats::paired_ratio(&pairs).unwrap();
        assert!(plain.low > 1.0, "{plain:?}");
        let mut q = question(Compares::Testbeds, "a", "b");
        q.epsilon = 0.01;
        let results: Vec<RunResult> = pairs
            .iter()
            .enumerate()
            .flat_map(|(k, &(x, y))| {
                [("a", x), ("b", y)].map(|(tb, rate)| RunResult {
                    rep: k as u32,
                    ..res(tb, "w1", rate)
                })
            })
            .collect();
        let once = findings::evaluate(&q, &results);
        assert_eq!(once.ratio.unwrap().low, plain.low);
        q.looks = Some(Looks { first: 3, last: 10 });
        let seq = findings::evaluate(&q, &results);
        let r = seq.ratio.unwrap();
        assert!(
            r.low < plain.low && r.high > plain.high,
            "{r:?} vs {plain:?}"
        );
        assert!(r.low < 1.0 && seq.undecided(), "{r:?}");
        assert!(
            r.p > 0.05 && r.p > plain.p,
            "p on the interval's scale: {}",
            r.p
        );
        assert!(
            (r.ratio - plain.ratio).abs() < 1e-12,
            "the estimate itself is the same"
        );
    }
}
