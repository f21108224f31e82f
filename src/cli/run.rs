//! `fsgauge run [PLAN]`: run a study from a plan file or a built-in preset. With no plan, the
//! built-in `quick` preset — the tree workload on small loop-mounted ext4, xfs and btrfs images
//! (those whose mkfs is installed), repeated, side by side; without root, on a temporary
//! directory instead.

use crate::analysis::report::lateness::is_lateness_warning;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use crate::analysis::report::document::Page;
use crate::analysis::report::output::{results_page, ResultViews};
use crate::analysis::report::table::{side_by_side, side_by_side_per_workload};
use crate::base::bounded::ReadError;
use crate::base::error::bad_input;
use crate::base::text::Table;
use crate::base::units::{format_bytes_human, format_size};
use crate::cli::common::{declared, OutputArgs};
use crate::device::ProfileRef;
use crate::lab::plan::{self, presets, ExecOptions, ParseOptions, Plan, Reps};
use crate::lab::runner::params::{ResultsDir, RunParams};
use crate::lab::runner::{Place, RunOptions};
use crate::measure::Progress;
use crate::results::RunResult;
use crate::testbed::TestbedParams;

/// The question syntax, after `fsgauge run --help`.
const QUESTIONS_HELP: &str = "\
A plan may ask questions; each is answered by a finding (variant / baseline, 95% interval):

  [[question]]
  id = \"dir-remove\"          # default q1, q2, ...
  baseline = \"journal-16M\"   # two testbed labels, two workload labels, or two phases
  variant = \"journal-1G\"
  workload = \"deep\"          # the cell: the workload label when the plan has several and
  # testbed = \"...\"          #   the question does not compare workloads; the testbed
  phase = \"dir_remove\"       #   likewise; the phase unless comparing phases
  metric = \"ops_per_s\"       # a core metric (elapsed, sys, ops_per_s, ...) or the workload's
  # where = { threads = 8 }  # one cell of a sweep
  published = 3.67           # optional: the published ratio (source = \"...\" says where from)
  # epsilon = 0.05           # optional: the \"no change\" band

A [[workload]] is named by its label = \"...\" (default: its kind, kind#N when repeated).
With reps = \"auto\", every cell an undecided question reads gets one more repetition per
round, alternating between testbeds, from 3 up to max_reps. Because the run stops at the
first round whose interval decides, that interval is a repeated one (\"n = 4 pairs of up to
10, sequential\"): each round's look uses the level that keeps the chance of any look deciding
a change that is not there at 5% (0.988 for rounds 3..10), so the finding holds wherever the
run stopped. --dry-run lists the questions.";

#[derive(Debug, Args)]
#[command(after_long_help = format!("{QUESTIONS_HELP}\n\n{}", super::presets::EXTENDS_HELP))]
pub struct RunCmd {
    /// A plan file (TOML), or the name of a built-in preset (see `fsgauge presets`)
    /// [default: the quick preset].
    #[arg(value_name = "PLAN")]
    pub plan: Option<String>,
    /// Print the expanded matrix (testbed × workload × repetition) with an estimate of disk
    /// space and time, and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Skip runs whose result already exists in --out for the identical run spec, so a study
    /// that was stopped continues where it was.
    #[arg(long)]
    pub resume: bool,
    /// How many times a run is made when another process drops the kernel's caches during
    /// one of its phases (a benchmark or test suite beside it): 1 keeps the first attempt
    /// with a warning; the attempts set aside are named in the result (`set_aside`).
    #[arg(long, value_name = "N", default_value_t = plan::DISTURBED_ATTEMPTS,
          value_parser = clap::value_parser!(u32).range(1..=10))]
    pub attempts: u32,
    /// Multiply the plan's counts and file sizes by F (testbeds grow to fit).
    #[arg(long, value_name = "F")]
    pub scale: Option<f64>,
    /// `--workdir` and `--device-model`, for every testbed of the plan.
    #[command(flatten)]
    pub testbeds: PlanTestbeds,
    /// The run settings, as bench takes them; each overrides the plan's key of the same name.
    #[command(flatten)]
    pub run: RunParams,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub store: super::store::StoreArg,
    /// Run the plan on a cluster instead of here, block K being repetition K of every
    /// configuration, on one machine, so each comparison is paired within a machine.
    /// `slurm` (Slurm's default partition) or `slurm:PARTITION`: one job array is submitted;
    /// task K runs block K; sbatch's SBATCH_* environment variables (time limit, account, ...)
    /// apply. `mpirun` (ranks on this machine) or `mpirun:HOSTFILE` (Open MPI's hostfile, one
    /// rank per host): one mpirun runs the blocks over its ranks and this command waits for it.
    /// --out must be on a filesystem every node sees (and so must the plan file and the
    /// directory you submit from: tasks run there). Then `fsgauge status DIR`; rerun with
    /// --resume to run again only the blocks without all their results.
    #[arg(
        long,
        value_name = "slurm[:PARTITION]|mpirun[:HOSTFILE]",
        conflicts_with = "dry_run"
    )]
    pub on: Option<crate::lab::fleet::On>,
    /// With --on slurm: at most N machines (array tasks) at once (sbatch --array=...%N).
    /// With --on mpirun: N ranks (default: the hostfile's hosts, else 1).
    #[arg(long, value_name = "N", requires = "on")]
    pub machines: Option<u32>,
    /// With --on slurm: stay until the array ends, with a progress bar, then print the findings
    /// as a local run does (Ctrl-C stops waiting, not the array). --on mpirun always waits.
    #[arg(long, requires = "on")]
    pub wait: bool,
    /// Run block K of a plan submitted with --on (what each array task runs).
    #[arg(long, value_name = "K", hide = true, conflicts_with_all = ["on", "dry_run"])]
    pub block: Option<u32>,
    /// Run, as rank r of N under mpirun, the r-th, (r+N)-th, ... block of LIST (what each
    /// rank of --on mpirun runs).
    #[arg(long, value_name = "LIST", hide = true, conflicts_with_all = ["on", "dry_run", "block"])]
    pub blocks_by_rank: Option<String>,
}

/// `--workdir` and `--device-model` of `run`: the testbed settings of the same names, taken as
/// [`TestbedParams`] declares them (its other flags do not apply to a plan's testbeds, which
/// the plan describes), applied to every testbed of the plan.
#[derive(Debug, Clone, Default)]
pub struct PlanTestbeds {
    pub workdir: Option<PathBuf>,
    pub device_model: Option<ProfileRef>,
}

impl PlanTestbeds {
    const IDS: [&'static str; 2] = ["workdir", "device_model"];
}

impl clap::FromArgMatches for PlanTestbeds {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut me = Self::default();
        me.update_from_arg_matches(m)?;
        Ok(me)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        // The types are TestbedParams's fields' (clap's derive reads its matches the same way).
        let [workdir, device_model] = Self::IDS;
        if let Some(w) = m.get_one::<PathBuf>(workdir) {
            self.workdir = Some(w.clone());
        }
        if let Some(d) = m.get_one::<ProfileRef>(device_model) {
            self.device_model = Some(d.clone());
        }
        Ok(())
    }
}

impl Args for PlanTestbeds {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.args(Self::IDS.map(declared::<TestbedParams>))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Reads the plan `arg` names, the quick preset when none (see [`plan_text`]); an argument
/// that names no plan to read is refused here, as bad input.
pub fn load_plan(arg: Option<&str>, opts: &ParseOptions) -> Result<Plan> {
    let (text, name) = plan_text(arg).map_err(|e| e.refused())?;
    plan::parse(&text, &name, opts)
}

/// Why `run` has no plan to run: its argument names none that can be read, or no run of the
/// plan can be made here. Each is bad input ([`NoPlan::refused`]).
#[derive(Debug, thiserror::Error)]
enum NoPlan {
    #[error("cannot read the plan: {0}")]
    Unreadable(#[from] ReadError),
    #[error("reading plan {}: not UTF-8 text (byte {at}); a plan is a TOML file", .path.display())]
    NotText { path: PathBuf, at: usize },
    #[error("preset {name} needs the workload kind(s) {} which this build does not have; runnable presets: {}",
        .missing.join(", "), preset_names(presets::runnable()))]
    MissingKinds {
        name: &'static str,
        missing: Vec<String>,
    },
    #[error("{} is a directory, not a plan; give a plan file (TOML) or a preset name ({})",
        .path.display(), preset_names(presets::PRESETS))]
    Directory { path: PathBuf },
    #[error(
        "{arg}: no such plan file, and no preset of that name (presets: {})",
        preset_names(presets::PRESETS)
    )]
    Unknown { arg: String },
    #[error("{plan}: no testbed of the plan can be built here (every optional testbed's mkfs is missing)")]
    NothingRunnable { plan: String },
}

impl NoPlan {
    /// The refusal as bad input.
    fn refused(self) -> anyhow::Error {
        bad_input(self.to_string())
    }
}

/// The text of the plan `arg` names and its name in errors (a path, or `preset NAME`): a plan
/// file's, else a preset's; any other argument is refused before anything is parsed. No
/// argument is the quick preset, whatever files are here. A directory is never a plan: a
/// preset's name is taken as the preset even where a directory of that name (its results, say)
/// is here.
fn plan_text(arg: Option<&str>) -> Result<(Cow<'static, str>, String), NoPlan> {
    let Some(arg) = arg else {
        let quick = presets::find("quick").expect("the quick preset is built in");
        return Ok((quick.toml.into(), quick.source()));
    };
    let path = Path::new(arg);
    // symlink_metadata, not exists(): a symlink loop or a dangling link is a plan file that
    // cannot be read (said so), not a missing one.
    if std::fs::symlink_metadata(path).is_ok() && !path.is_dir() {
        return Ok((read_plan_file(path)?.into(), path.display().to_string()));
    }
    match presets::find(arg) {
        Some(p) => {
            let missing = p.missing_kinds();
            if !missing.is_empty() {
                return Err(NoPlan::MissingKinds {
                    name: p.name,
                    missing,
                });
            }
            Ok((p.toml.into(), p.source()))
        }
        None if path.is_dir() => Err(NoPlan::Directory {
            path: path.to_path_buf(),
        }),
        None => Err(NoPlan::Unknown {
            arg: arg.to_string(),
        }),
    }
}

/// A plan file's text: a regular file of at most [`PLAN_LIMIT`](crate::base::bounded::PLAN_LIMIT)
/// bytes, read as UTF-8.
fn read_plan_file(path: &Path) -> Result<String, NoPlan> {
    let bytes =
        crate::base::bounded::read_regular(path, crate::base::bounded::PLAN_LIMIT, "plans")?;
    String::from_utf8(bytes).map_err(|e| NoPlan::NotText {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })
}

/// The presets' names, for a message that lists them.
fn preset_names<'a>(presets: impl IntoIterator<Item = &'a presets::Preset>) -> String {
    presets
        .into_iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `run` on this machine, in this process (`--on`, `--block` and `--blocks-by-rank` go to
/// [`super::fleet`] and [`super::fleet_mpirun`]).
pub fn run(c: RunCmd) -> Result<ExitCode> {
    // What the command line gives the plan, read once: the quick study and a plan take it alike.
    let opts = parse_options(&c)?;
    let root = nix::unistd::geteuid().is_root();
    if c.plan.is_none() && !root && !c.dry_run {
        return quick_on_temp_dir(&c, &opts);
    }
    // A plan's results go where `--out` and `--device-model` say, from here on.
    let out = results_dir(&c.run.out.dir, c.testbeds.device_model.as_ref());
    let plan = load_plan(c.plan.as_deref(), &opts)?;
    // A store that cannot be opened is refused before anything runs.
    let mut store = super::store::open_for_run(&c.store, c.dry_run)?;
    let c = RunCmd {
        run: RunParams {
            out: ResultsDir { dir: out },
            ..c.run
        },
        ..c
    };
    let m = plan::matrix(&plan);
    if c.dry_run {
        c.output
            .print(dry_run_document(&plan, &m, &c.run.out.dir)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !c.output.quiet {
        for s in &m.skipped {
            eprintln!("note: {s}");
        }
        for n in &plan.notes {
            eprintln!("note: {n}");
        }
    }
    runnable(&plan, &m)?;
    announce(&c, &plan, &m);
    let ex = plan::execute(
        &plan,
        &m,
        &ExecOptions {
            out: c.run.out.dir.clone(),
            resume: c.resume,
            progress: Progress::new(c.output.silent()),
            quiet: c.output.silent(),
            attempts: c.attempts,
        },
    )?;
    super::store::index_run(store.as_mut(), &c.run.out.dir, c.output.silent());
    show_results(&c, &ex.results, ex.ran, ex.reused)
}

/// The end of a plan's run: the findings and tables of `results` (`ran` made now, `reused`
/// found from before), the warnings, where the results are, and the exit status.
pub(super) fn show_results(
    c: &RunCmd,
    results: &[RunResult],
    ran: usize,
    reused: usize,
) -> Result<ExitCode> {
    let views = ResultViews {
        table: &side_by_side_per_workload,
        csv: None,
    };
    if !c.output.format().is_machine() {
        let (_, _, cells) = crate::analysis::report::model::cells(results);
        for w in crate::analysis::report::model::short_phases(results, &cells) {
            eprintln!("warning: {w}");
        }
    }
    c.output.print(results_document(results, &views)?)?;
    if !c.output.format().is_machine() {
        super::common::print_lateness(results);
        for r in results {
            // Older results' lateness paragraphs: the table above holds their figures.
            for w in r.errors.iter().filter(|w| !is_lateness_warning(w)) {
                eprintln!("warning: {} rep {}: {w}", r.testbed.label, r.rep);
            }
            if !c.output.quiet {
                super::common::print_crash(r);
            }
        }
        if !c.output.quiet {
            let count = super::common::results_in(
                &c.run.out.dir,
                results.len(),
                &format!(" ({} run now, {} found from before)", ran, reused),
            );
            eprintln!(
                "{count}; make a report with: fsgauge report {} -o report.html",
                c.run.out.dir.display()
            );
        }
    }
    if let Some(code) = crate::results::unsaved_exit() {
        return Ok(code);
    }
    crate::workload::age::check_checkpoints_reached(results)?;
    Ok(super::common::crash_status(results))
}

/// The run's results as one document: the findings, the journal and the durability tables
/// come before the results table on the terminal and as tables of their own in Markdown and
/// HTML; the JSON is the result documents (which hold their figures) and the CSV one row per
/// run and phase.
pub(super) fn results_document(results: &[RunResult], views: &ResultViews) -> Result<Page> {
    use crate::analysis::report::{durability, findings_table, model, table};
    let mut page = results_page(results, views, true)?;
    let mut text = String::new();
    let mut tables = Vec::new();
    if let Some(f) = table::findings_text(results) {
        text.push_str(&f);
        text.push('\n');
        let stated = crate::analysis::findings::sentence::stated(results);
        tables.push(findings_table::findings_table(&stated));
    }
    let more = [
        model::journal_table(results),
        durability::durability_table(results),
    ];
    for t in more.into_iter().flatten() {
        text.push_str(&table::text(&t));
        text.push('\n');
        tables.push(t);
    }
    page.text = page.text.map(|own| text + &own);
    tables.append(&mut page.tables);
    page.tables = tables;
    Ok(page)
}

/// Refuses a plan of which no run can be made here: every testbed was optional and its mkfs
/// is missing (a dry run still lists them).
pub(super) fn runnable(plan: &Plan, m: &plan::Matrix) -> Result<()> {
    if m.runs.is_empty() {
        return Err(NoPlan::NothingRunnable {
            plan: plan.source.clone(),
        }
        .refused());
    }
    Ok(())
}

/// Says what is about to run: the quick study in words, or a plan's name, source and runs
/// (how `reps = "auto"` goes on when it does).
fn announce(c: &RunCmd, plan: &Plan, m: &plan::Matrix) {
    if c.plan.is_none() && !c.output.format().is_machine() {
        let w = &plan.workloads[0].workload.params();
        let labels: Vec<&str> = plan
            .testbeds
            .iter()
            .enumerate()
            .filter(|(i, _)| m.runs.iter().any(|r| r.testbed == *i))
            .map(|(_, t)| t.spec.label.as_str())
            .collect();
        println!(
            "quick study: tree workload ({} dirs x {} files x {}, fsync per {}) on {} (fresh 1G loop images, {}, cold caches between phases)",
            w["dirs"],
            w["files"],
            format_size(w["file_size"].as_u64().unwrap_or(0)),
            w["fsync"].as_str().unwrap_or("-"),
            labels.join(", "),
            match plan.reps {
                Reps::Auto { max, .. } if !plan::smoke(plan) => format!(
                    "{} reps interleaved, then more of the questions' testbeds until the questions are decided, at most {max}",
                    plan.reps.initial()
                ),
                _ => format!("{} reps interleaved", plan::first_round(plan)),
            }
        );
    } else if !c.output.quiet {
        eprintln!(
            "plan {} ({}): {} run(s){}",
            plan.name,
            plan.source,
            m.runs.len(),
            match plan.reps {
                Reps::Auto { .. } if plan::smoke(plan) => format!(
                    ": a smoke run (--scale {} is below {}), so reps = \"auto\" stops after this first round; its findings are indicative",
                    plan.scale,
                    plan::SMOKE_SCALE
                ),
                Reps::Auto { max, .. } if !plan.questions.is_empty() => format!(
                    " in the first round; more, up to {max} per cell, until every question is decided"
                ),
                Reps::Auto { cv, max } => format!(
                    " in the first round; more, up to {max} per cell, until the run time varies by less than {:.0}%",
                    cv * 100.0
                ),
                Reps::Fixed(_) => String::new(),
            }
        );
    }
}

/// The plan's repetitions as the dry run states them.
fn reps_text(plan: &Plan) -> String {
    match plan.reps {
        Reps::Fixed(n) => n.to_string(),
        Reps::Auto { .. } if plan::smoke(plan) => format!(
            "auto, stopping at {} (a smoke run: --scale below {})",
            plan::first_round(plan),
            plan::SMOKE_SCALE
        ),
        Reps::Auto { max, .. } if !plan.questions.is_empty() => {
            format!("auto (3 to {max}, until every question is decided)")
        }
        Reps::Auto { cv, max } => format!("auto (3 to {max}, until CV <= {cv})"),
    }
}

/// The dry run's testbeds, workloads and questions, each with where the plan states it.
fn testbeds_and_workloads(plan: &Plan, out: &mut String) {
    let _ = writeln!(out, "testbeds:");
    for t in &plan.testbeds {
        let _ = writeln!(
            out,
            "  {:<22} {}{}",
            t.spec.label,
            t.spec.describe(),
            t.mem_limit
                .map_or(String::new(), |m| format!(" mem_limit={}", format_size(m)))
        );
    }
    let _ = writeln!(out, "workloads:");
    for w in &plan.workloads {
        let _ = writeln!(
            out,
            "  {:<9} {} -> {}",
            w.at.line_in(&plan.source),
            w.describe(),
            w.workload.params()
        );
        if let Some(n) = w.ranks {
            let _ = writeln!(
                out,
                "             ranks = {n}: documentation; this plan runs it in one process; on {n} ranks run `mpirun -np {n} fsgauge bench {} --dir PATH ...` (fsgauge built with --features mpi)",
                w.kind
            );
        }
    }
    if !plan.questions.is_empty() {
        let _ = writeln!(out, "questions (baseline -> variant, cell, metric):");
        for q in &plan.questions {
            let _ = writeln!(out, "  {:<9} {}", q.at.line_in(&plan.source), q.describe());
        }
    }
}

/// One run the dry run lists, as its JSON states it.
#[derive(Serialize)]
struct PlannedRun {
    testbed: String,
    workload: String,
    rep: u32,
    hash: String,
    exists: bool,
}

/// The dry run's machine form: the plan's runs in order and what they will cost.
#[derive(Serialize)]
struct DryRun {
    plan: String,
    source: String,
    reps: String,
    skipped: Vec<String>,
    notes: Vec<String>,
    runs: Vec<PlannedRun>,
    estimate_runs: usize,
    estimate_max_runs: usize,
    estimate_done: usize,
    peak_disk_bytes: u64,
    peak_ram_bytes: u64,
    data_written_bytes: u64,
    seconds: f64,
}

/// The dry run as one document: the plan, its runs in order and the estimate as terminal
/// text, the runs as a table (Markdown, HTML, CSV) and all of it as JSON.
fn dry_run_document(plan: &Plan, m: &plan::Matrix, out: &Path) -> Result<Page> {
    let existing = plan::existing_results(out)?;
    let e = plan::estimate(plan, m, &existing)?;
    let runs: Vec<PlannedRun> = m
        .runs
        .iter()
        .map(|r| PlannedRun {
            testbed: plan.testbeds[r.testbed].spec.label.clone(),
            workload: plan.workloads[r.workload].describe(),
            rep: r.rep,
            hash: r.hash.clone(),
            exists: existing.contains_key(&r.hash),
        })
        .collect();
    let data = DryRun {
        plan: plan.name.clone(),
        source: plan.source.clone(),
        reps: reps_text(plan),
        skipped: m.skipped.clone(),
        notes: plan.notes.clone(),
        runs,
        estimate_runs: e.runs,
        estimate_max_runs: e.max_runs,
        estimate_done: e.done,
        peak_disk_bytes: e.peak_disk,
        peak_ram_bytes: e.peak_ram,
        data_written_bytes: e.data_written,
        seconds: e.seconds,
    };
    let rows = data
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                (i + 1).to_string(),
                r.testbed.clone(),
                r.workload.clone(),
                r.rep.to_string(),
                r.hash[..12].to_string(),
                if r.exists { "yes" } else { "" }.to_string(),
            ]
        })
        .collect();
    let table = Table {
        title: "Runs (in order)".into(),
        label_columns: 3,
        note: String::new(),
        headers: ["#", "testbed", "workload", "rep", "hash", "result exists"]
            .map(String::from)
            .to_vec(),
        rows,
    };
    let text = dry_run_text(plan, m, &existing, &e);
    Ok(
        Page::new(format!("fsgauge run --dry-run {}", plan.name), &data)?
            .table(table)
            .text(text),
    )
}

/// The dry run on the terminal: the plan, its testbeds, workloads, questions, runs and the
/// estimate.
fn dry_run_text(
    plan: &Plan,
    m: &plan::Matrix,
    existing: &std::collections::HashMap<String, RunResult>,
    e: &plan::Estimate,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan {} ({}): {} testbed(s) x {} workload(s), reps {}, fresh {}, cold {}, seed {}, scale {}",
        plan.name,
        plan.source,
        plan.testbeds.len(),
        plan.workloads.len(),
        reps_text(plan),
        plan.fresh.name(),
        plan.cold.name(),
        plan.seed,
        plan.scale
    );
    if let Some(e) = plan.dirty_expire {
        let _ = writeln!(
            out,
            "the host's vm.dirty_expire_centisecs is held at {} ({} s) for each run, and given back after",
            e.centisecs,
            e.secs()
        );
    }
    for s in &m.skipped {
        let _ = writeln!(out, "skipped testbed {s}");
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note: {n}");
    }
    testbeds_and_workloads(plan, &mut out);
    let _ = writeln!(out, "runs (in order):");
    for (i, r) in m.runs.iter().enumerate() {
        let done = if existing.contains_key(&r.hash) {
            "  (result exists: --resume skips it)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  {:>4}  {:<22} {:<40} rep {:<3} {}{done}",
            i + 1,
            plan.testbeds[r.testbed].spec.label,
            plan.workloads[r.workload].describe(),
            r.rep,
            &r.hash[..12]
        );
    }
    let _ = writeln!(out, "{}", estimate_text(plan, e));
    out
}

/// The estimate line of the dry run.
fn estimate_text(plan: &Plan, e: &plan::Estimate) -> String {
    format!(
        "estimate: {} run(s){}, {} already done; disk at the peak {} ({}){}; data written {}; time about {} (rough: set-up plus data at 150 MB/s where no earlier run is known)",
        e.runs,
        if e.max_runs > e.runs {
            format!(" (up to {} with reps = \"auto\")", e.max_runs)
        } else {
            String::new()
        },
        e.done,
        format_bytes_human(e.peak_disk as f64),
        if plan.fresh == plan::Fresh::PerTestbed && plan::interleaved(plan) {
            "every testbed at once: runs alternate between them"
        } else {
            "one testbed at a time"
        },
        if e.peak_ram > 0 {
            format!(", RAM disk {}", format_bytes_human(e.peak_ram as f64))
        } else {
            String::new()
        },
        format_bytes_human(e.data_written as f64),
        humantime::format_duration(std::time::Duration::from_secs(e.seconds.ceil() as u64))
    )
}

/// Where results go: `--out`, except that runs on an emulated disk given by `--device-model`
/// go to `fsgauge-results-PROFILE` when `--out` was left at its default, so that they do not
/// mix with runs of the same plan on other disks (a report pools results by testbed label).
pub(super) fn results_dir(out: &Path, disk: Option<&ProfileRef>) -> PathBuf {
    match disk {
        Some(d) if out == default_out() => {
            // A profile file's stem; ablations keep their words, in characters a name takes.
            let (head, tail) = d.as_str().split_once(':').unwrap_or((d.as_str(), ""));
            let stem = Path::new(head)
                .file_stem()
                .map_or(head.into(), |s| s.to_string_lossy());
            let mut name = format!("{}-{stem}", default_out().display());
            if !tail.is_empty() {
                name.push('-');
                name.extend(tail.chars().map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' {
                        c
                    } else {
                        '_'
                    }
                }));
            }
            PathBuf::from(name)
        }
        _ => out.to_path_buf(),
    }
}

/// `--out`'s default, as [`ResultsDir`] declares it.
fn default_out() -> PathBuf {
    ResultsDir::default().dir
}

/// What the command line gives a plan: each flag given wins over the plan's key of the same
/// name (the plan's parser applies them).
pub(super) fn parse_options(c: &RunCmd) -> Result<ParseOptions> {
    if c.run.mem_charge.is_some() {
        return Err(bad_input(
            "--mem-charge applies to one workload (bench, age, exercise); a plan's runs are limited with --mem-limit or a testbed's mem_limit",
        ));
    }
    Ok(ParseOptions {
        scale: c.scale,
        workdir: c.testbeds.workdir.clone(),
        device_model: c.testbeds.device_model.clone(),
        settings: c.run.settings,
        mem_limit: c.run.mem_limit.map(crate::base::units::Size::bytes),
    })
}

/// Without root there are no testbeds: the quick study's workload on a temporary directory.
fn quick_on_temp_dir(c: &RunCmd, opts: &ParseOptions) -> Result<ExitCode> {
    let plan = load_plan(None, opts)?;
    let wl = plan.workloads[0].workload.clone();
    let reps = plan.reps.initial();
    // A store that cannot be opened is refused before anything is made.
    let mut store = super::store::open_for_run(&c.store, false)?;
    // Made exclusively, mode 0700, under an unpredictable name: another user of the shared
    // temporary directory cannot plant it beforehand. Removed (it only) on drop.
    let temp = tempfile::Builder::new()
        .prefix("fsgauge-quick-")
        .tempdir()
        .with_context(|| {
            format!(
                "creating a temporary directory in {}",
                std::env::temp_dir().display()
            )
        })?;
    let dir = temp.path().to_path_buf();
    if !c.output.format().is_machine() {
        println!(
            "not root: running the quick study on the temporary directory {} instead of fresh testbeds (run as root to build ext4/xfs/btrfs testbeds)",
            dir.display()
        );
    }
    let opts = RunOptions {
        reps,
        // A directory is no plan's testbed: the seed and the cold mode are those of a run
        // without a plan (from the clock; warm, as dropping caches needs root).
        seed: c.run.settings.seed.value,
        cold: c.run.settings.cold.or_default(),
        mem_limit: None,
        mem_charge: None,
        out: Some(c.run.out.dir.clone()),
        progress: Progress::new(c.output.silent()),
        layout: plan.layout,
        crash: Default::default(),
        dirty_expire: None,
        precondition: None,
        keep_image: None,
        study: None,
        coordinator: Default::default(),
    };
    let outcomes = crate::lab::runner::run(&Place::Dir(dir), wl.as_ref(), &opts)?;
    drop(temp);
    super::store::index_written(store.as_mut(), &outcomes, &c.run.out.dir, c.output.silent());
    let results: Vec<RunResult> = outcomes.into_iter().map(|o| o.result).collect();
    let views = ResultViews {
        table: &side_by_side,
        csv: None,
    };
    c.output.print(results_document(&results, &views)?)?;
    if !c.output.silent() {
        eprintln!(
            "{}",
            super::common::results_in(&c.run.out.dir, results.len(), "")
        );
    }
    if let Some(code) = crate::results::unsaved_exit() {
        return Ok(code);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Runs on an emulated disk go to a directory named for it unless --out says where, so
    /// that they do not pool with runs of the same plan on other disks.
    #[test]
    fn results_on_an_emulated_disk_go_to_a_directory_named_for_it() {
        let disk = |s: &str| s.parse::<ProfileRef>().unwrap();
        let out = default_out();
        assert_eq!(out, PathBuf::from("fsgauge-results"));
        assert_eq!(results_dir(&out, None), out);
        assert_eq!(
            results_dir(&out, Some(&disk("st3500641as"))),
            PathBuf::from("fsgauge-results-st3500641as")
        );
        assert_eq!(
            results_dir(&out, Some(&disk("deskstar-7k250:seek=off,cache=off"))),
            PathBuf::from("fsgauge-results-deskstar-7k250-seek_off_cache_off")
        );
        let given = PathBuf::from("/tmp/mine");
        assert_eq!(results_dir(&given, Some(&disk("ram"))), given);
    }

    /// `run --workdir --device-model` are the testbed flags, read into the plan's options.
    #[test]
    fn workdir_and_device_model_are_read_for_every_testbed_of_the_plan() {
        let flags =
            |args: &[&str]| -> PlanTestbeds { crate::workload::params::from_flags(args).unwrap() };
        let none = flags(&[]);
        assert_eq!((none.workdir, none.device_model), (None, None));
        let both = flags(&[
            "--workdir",
            "/srv/img",
            "--device-model",
            "st3500641as:seek=off",
        ]);
        assert_eq!(both.workdir, Some(PathBuf::from("/srv/img")));
        assert_eq!(
            both.device_model.map(|d| d.as_str().to_string()),
            Some("st3500641as:seek=off".into())
        );
        let e = crate::workload::params::from_flags::<PlanTestbeds>(&["--fs-size", "1G"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--fs-size"), "{e}");
    }
}
