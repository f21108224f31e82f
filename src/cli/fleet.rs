//! `fsgauge run PLAN --on slurm[:PARTITION]` (submit one job array, one block per task),
//! `--resume` (resubmit only the blocks not done and not queued), `--wait` (a progress bar
//! until the array ends, then the findings), the hidden `run PLAN --block K` each task runs,
//! and `fsgauge status DIR` (of an mpirun run too: `--on mpirun` is in `fleet_mpirun`). Everything that can be refused is refused before the results
//! directory is made or anything submitted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use super::run::{load_plan, parse_options, results_dir, runnable, show_results, RunCmd};
use crate::base::error::bad_input;
use crate::lab::fleet::{self, script, slurm, status, Fleet};
use crate::lab::plan::{self, ExecOptions, Plan};
use crate::measure::Progress;
use crate::results::RunResult;

/// The plan as every block of a fleet sees it: read as a local run reads it, its repetitions
/// fixed (see [`fleet::fix_reps`]), with its matrix and its results directory.
pub(super) struct FleetPlan {
    pub plan: Plan,
    pub matrix: plan::Matrix,
    pub note: Option<String>,
    pub out: PathBuf,
}

pub(super) fn fleet_plan(c: &RunCmd) -> Result<FleetPlan> {
    let mut plan = load_plan(c.plan.as_deref(), &parse_options(c)?)?;
    let note = fleet::fix_reps(&mut plan);
    let matrix = plan::matrix(&plan);
    runnable(&plan, &matrix)?;
    let out = fleet::absolute(&results_dir(
        &c.run.out.dir,
        c.testbeds.device_model.as_ref(),
    ))?;
    Ok(FleetPlan {
        plan,
        matrix,
        note,
        out,
    })
}

/// `run PLAN --on slurm[:PARTITION]`: checks everything, then submits the blocks to run as
/// one array.
pub fn submit(c: &RunCmd, partition: &Option<String>) -> Result<ExitCode> {
    if c.machines == Some(0) {
        return Err(bad_input(
            "--machines 0: an array needs at least one machine at a time; give --machines N with N >= 1, or leave it out to take as many as Slurm gives",
        ));
    }
    let fp = fleet_plan(c)?;
    // As a local run checks (root, mkfs, space, memory limits): the nodes are taken to be
    // machines like this one.
    plan::check(&fp.plan, &fp.matrix)?;
    crate::results::check_out_dir(&fp.out)?;
    if fp.out.to_string_lossy().contains('%') {
        // sbatch reads % in the log's path as a pattern (%j, %a, ...).
        return Err(bad_input(format!(
            "--out {}: a results directory for --on slurm cannot have '%' in its path (sbatch reads it as a pattern); choose another",
            fp.out.display()
        )));
    }
    let record = Fleet::load(&fp.out)?;
    if record.is_some() && !c.resume {
        return Err(bad_input(format!(
            "{} holds a fleet run already ({}); continue it with --resume, or give another --out",
            fp.out.display(),
            fleet::RECORD
        )));
    }
    if let Some(r) = &record {
        r.same_launcher(fleet::Launcher::Slurm, &fp.out)?;
    }
    slurm::check_tools()?;
    slurm::check_partition(partition.as_deref())?;
    let blocks = fleet::blocks(&fp.matrix, fp.plan.reps.max());
    let args = script::task_args(&std::env::args_os().collect::<Vec<_>>());
    let mut record = record.unwrap_or_else(|| Fleet {
        plan: c.plan.clone().unwrap_or_else(|| "quick".into()),
        seed: fp.plan.seed,
        launcher: fleet::Launcher::Slurm,
        hostfile: None,
        args: Vec::new(),
        blocks: blocks.clone(),
        jobs: Vec::new(),
    });
    record.blocks = blocks;
    record.args = args.iter().map(|a| script::quote(a)).collect();
    let to_run = blocks_to_submit(&fp.out, &record, c.resume)?;
    announce(c, &fp, &record, &to_run);
    if to_run.is_empty() {
        eprintln!(
            "nothing to submit: every block is done, pending or running; see fsgauge status {}",
            fp.out.display()
        );
        return finish(c, &fp, &record);
    }
    let logs = fp.out.join(fleet::LOGS);
    let text = script::text(&slurm::own_binary()?, &args, &fp.out, &logs, &fp.plan.name);
    let mut opts = slurm::sbatch_args(
        &fleet::array_spec(&to_run, c.machines),
        partition.as_deref(),
    );
    let cwd = std::env::current_dir().context("the submitting directory")?;
    opts.push(format!("--chdir={}", cwd.display()));
    opts.push(format!("--output={}/block-%a-job-%A.out", logs.display()));
    slurm::test_submit(&text, &opts)?;
    // Checked: from here on things are made.
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let script_path = fp.out.join(fleet::SCRIPT);
    crate::base::atomic::write_atomic(&script_path, text.as_bytes())?;
    let id = slurm::submit(&script_path, &opts)?;
    record.jobs.push(fleet::Job {
        id: id.clone(),
        blocks: to_run.clone(),
        partition: partition.clone(),
        submitted_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    });
    record.save(&fp.out)?;
    println!(
        "submitted job array {id} ({} block(s): {})",
        to_run.len(),
        fleet::array_spec(&to_run, c.machines)
    );
    finish(c, &fp, &record)
}

/// The blocks to submit: all of a new run; under --resume those neither done nor still in
/// Slurm's hands.
fn blocks_to_submit(out: &Path, record: &Fleet, resume: bool) -> Result<Vec<u32>> {
    if !resume || record.jobs.is_empty() {
        let have = plan::existing_results(out)?;
        return Ok(record
            .blocks
            .iter()
            .filter(|b| !b.runs.iter().all(|h| have.contains_key(h)))
            .map(|b| b.block)
            .collect());
    }
    Ok(status::of(out, record)?
        .into_iter()
        .filter(|s| s.state != status::State::Done && !s.state.active())
        .map(|s| s.block)
        .collect())
}

/// Says what is submitted: the plan, its blocks, and the note on reps = "auto".
fn announce(c: &RunCmd, fp: &FleetPlan, record: &Fleet, to_run: &[u32]) {
    if c.output.quiet {
        return;
    }
    let per_block = record.blocks.first().map_or(0, |b| b.runs.len());
    eprintln!(
        "plan {} ({}): {} block(s) of {} run(s) each (one repetition of every configuration per block, on one machine); submitting {}",
        fp.plan.name,
        fp.plan.source,
        record.blocks.len(),
        per_block,
        if to_run.len() == record.blocks.len() {
            "all".to_string()
        } else {
            format!("{} ({})", to_run.len(), fleet::array_spec(to_run, None))
        }
    );
    for s in &fp.matrix.skipped {
        eprintln!("note: {s}");
    }
    if let Some(n) = &fp.note {
        eprintln!("note: {n}");
    }
}

/// Without --wait: the next commands; with it, the wait and the findings.
fn finish(c: &RunCmd, fp: &FleetPlan, record: &Fleet) -> Result<ExitCode> {
    let dir = fp.out.display();
    if !c.wait {
        if !c.output.quiet {
            let job = record
                .jobs
                .last()
                .map_or("JOB".to_string(), |j| j.id.clone());
            eprintln!("follow it:      fsgauge status {dir}");
            eprintln!(
                "after a failure or scancel: {}",
                record.resume_command(&fp.out)
            );
            eprintln!("stop it:        scancel {job}");
            eprintln!("when done:      fsgauge report {dir} -o report.html");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let st = wait(c, fp, record)?;
    let results = results_of(&fp.out, record)?;
    let code = show_results(c, &results, results.len(), 0)?;
    let unfinished: Vec<String> = st
        .iter()
        .filter(|s| s.state != status::State::Done)
        .map(|s| format!("block {} {} ({})", s.block, s.state.name(), s.said))
        .collect();
    if unfinished.is_empty() {
        return Ok(code);
    }
    eprintln!(
        "error: {} of {} block(s) did not finish: {}; logs in {}/{}; resubmit them with: {}",
        unfinished.len(),
        st.len(),
        unfinished.join("; "),
        dir,
        fleet::LOGS,
        record.resume_command(&fp.out)
    );
    Ok(ExitCode::from(1))
}

/// Waits until no block is pending or running, with a bar of the runs done (on a terminal).
fn wait(c: &RunCmd, fp: &FleetPlan, record: &Fleet) -> Result<Vec<status::BlockStatus>> {
    let total: usize = record.blocks.iter().map(|b| b.runs.len()).sum();
    let bar = if c.output.silent() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(total as u64)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {msg}")
            .expect("a valid template"),
    );
    loop {
        let st = status::of(&fp.out, record)?;
        bar.set_position(st.iter().map(|s| s.done as u64).sum());
        bar.set_message(totals_text(&st));
        if !st.iter().any(|s| s.state.active()) {
            bar.finish_and_clear();
            return Ok(st);
        }
        for _ in 0..20 {
            crate::base::signals::check().with_context(|| {
                format!(
                    "stopped waiting; the array goes on: fsgauge status {}",
                    fp.out.display()
                )
            })?;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The plan's results in the directory, block by block.
pub(super) fn results_of(out: &Path, record: &Fleet) -> Result<Vec<RunResult>> {
    let mut have = plan::existing_results(out)?;
    Ok(record
        .blocks
        .iter()
        .flat_map(|b| b.runs.iter())
        .filter_map(|h| have.remove(h))
        .collect())
}

pub(super) fn totals_text(st: &[status::BlockStatus]) -> String {
    status::totals(st)
        .into_iter()
        .map(|(s, n)| format!("{n} {}", s.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `run PLAN --block K --out DIR`: one array task's block, its finished runs skipped.
pub fn block(c: &RunCmd, k: u32) -> Result<ExitCode> {
    let fp = fleet_plan(c)?;
    let reps = fp.plan.reps.max();
    if k >= reps {
        return Err(bad_input(format!(
            "--block {k}: the plan has blocks 0 to {} (one per repetition)",
            reps - 1
        )));
    }
    let mut store = super::store::open_for_run(&c.store, false)?;
    if !c.output.quiet {
        eprintln!(
            "plan {} block {k} of {reps} on {}",
            fp.plan.name,
            nix::unistd::gethostname()
                .map_or_else(|_| "?".into(), |h| h.to_string_lossy().into_owned())
        );
    }
    let ex = plan::execute_block(
        &fp.plan,
        &fp.matrix,
        k,
        &ExecOptions {
            out: fp.out.clone(),
            resume: true,
            progress: Progress::new(c.output.silent()),
            quiet: c.output.silent(),
            attempts: c.attempts,
        },
    )?;
    super::store::index_run(store.as_mut(), &fp.out, c.output.silent());
    show_results(c, &ex.results, ex.ran, ex.reused)
}

/// `fsgauge status DIR`.
#[derive(Debug, Args)]
pub struct StatusCmd {
    /// The results directory of a plan run with `run --on slurm` or `run --on mpirun`.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub out: super::common::OutputArgs,
}

/// Prints each block's state and the totals (`--json`: the blocks as a list).
pub fn status(c: StatusCmd) -> Result<ExitCode> {
    let record = Fleet::load(&c.dir)?.ok_or_else(|| {
        bad_input(format!(
            "{} has no {}: it is not the results directory of a run submitted with --on slurm or --on mpirun",
            c.dir.display(),
            fleet::RECORD
        ))
    })?;
    let st = status::of(&c.dir, &record)?;
    let jobs: Vec<&str> = record.jobs.iter().map(|j| j.id.as_str()).collect();
    let stopped = st.iter().any(|s| {
        matches!(
            s.state,
            status::State::Failed | status::State::Cancelled | status::State::Missing
        )
    });
    let mut note = format!("total: {} block(s): {}", st.len(), totals_text(&st));
    if stopped {
        note.push_str(&format!(
            "; {}: {}",
            match record.launcher {
                fleet::Launcher::Slurm => "resubmit the failed and cancelled blocks",
                fleet::Launcher::Mpirun => "run the missing blocks again",
            },
            record.resume_command(&c.dir)
        ));
    }
    let table = crate::base::text::Table {
        title: match record.launcher {
            fleet::Launcher::Slurm => format!(
                "plan {} (seed {}), job array(s) {}",
                record.plan,
                record.seed,
                jobs.join(", ")
            ),
            fleet::Launcher::Mpirun => format!(
                "plan {} (seed {}), run with mpirun {} time(s)",
                record.plan,
                record.seed,
                jobs.len()
            ),
        },
        label_columns: 1,
        note,
        headers: [
            "block",
            "state",
            "runs done",
            "runs",
            "task",
            match record.launcher {
                fleet::Launcher::Slurm => "slurm / marker",
                fleet::Launcher::Mpirun => "results",
            },
        ]
        .map(String::from)
        .to_vec(),
        rows: st
            .iter()
            .map(|s| {
                vec![
                    s.block.to_string(),
                    s.state.name().to_string(),
                    s.done.to_string(),
                    s.runs.to_string(),
                    s.task.clone().unwrap_or_else(|| "-".into()),
                    s.said.clone(),
                ]
            })
            .collect(),
    };
    c.out
        .print(crate::analysis::report::document::Page::new("fsgauge status", &st)?.table(table))?;
    Ok(ExitCode::SUCCESS)
}
