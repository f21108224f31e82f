//! `fsgauge run PLAN --on mpirun[:HOSTFILE]`: the fleet where there is no Slurm. Everything is
//! checked first (plan, hostfile, `mpirun` on PATH, `--machines`); then one `mpirun` starts
//! this binary on H ranks with the hidden `--blocks-by-rank LIST`, and this process waits for
//! it and prints the findings as a local run does. `--resume` launches only the blocks without
//! all their results, and a block skips its runs whose result exists (as `--block K` does), so
//! nothing finished is made twice.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, Result};

use super::fleet::{fleet_plan, results_of, FleetPlan};
use super::run::{show_results, RunCmd};
use crate::base::error::bad_input;
use crate::lab::fleet::{self, mpirun, script, status, Fleet, Launcher};
use crate::lab::plan::{self, ExecOptions};
use crate::measure::Progress;

/// `run PLAN --on mpirun[:HOSTFILE]`: checks, launches mpirun, waits, shows the findings.
pub fn launch(c: &RunCmd, hostfile: Option<&Path>) -> Result<ExitCode> {
    if c.machines == Some(0) {
        return Err(bad_input(
            "--machines 0: mpirun needs at least one rank; give --machines N with N >= 1, or leave it out (one rank per host of the hostfile, else one)",
        ));
    }
    let hostfile = hostfile.map(fleet::absolute).transpose()?;
    let hosts = hostfile.as_deref().map(mpirun::hosts).transpose()?;
    let fp = fleet_plan(c)?;
    plan::check(&fp.plan, &fp.matrix)?;
    crate::results::check_out_dir(&fp.out)?;
    let record = Fleet::load(&fp.out)?;
    match &record {
        Some(_) if !c.resume => {
            return Err(bad_input(format!(
            "{} holds a fleet run already ({}); continue it with --resume, or give another --out",
            fp.out.display(),
            fleet::RECORD
        )))
        }
        Some(r) => r.same_launcher(Launcher::Mpirun, &fp.out)?,
        None => {}
    }
    let tool = mpirun::check_tool()?;
    let blocks = fleet::blocks(&fp.matrix, fp.plan.reps.max());
    let args = script::task_args(&std::env::args_os().collect::<Vec<_>>());
    let mut record = record.unwrap_or_else(|| Fleet {
        plan: c.plan.clone().unwrap_or_else(|| "quick".into()),
        seed: fp.plan.seed,
        launcher: Launcher::Mpirun,
        hostfile: None,
        args: Vec::new(),
        blocks: blocks.clone(),
        jobs: Vec::new(),
    });
    record.blocks = blocks;
    record.hostfile.clone_from(&hostfile);
    record.args = args.iter().map(|a| script::quote(a)).collect();
    let have = plan::existing_results(&fp.out)?;
    let to_run: Vec<u32> = record
        .blocks
        .iter()
        .filter(|b| !b.runs.iter().all(|h| have.contains_key(h)))
        .map(|b| b.block)
        .collect();
    let ranks = mpirun::ranks(c.machines, hosts, to_run.len())?;
    let before = have.len();
    announce(c, &fp, &record, &to_run, ranks);
    if to_run.is_empty() {
        eprintln!("nothing to run: every block has all its results");
        return finish(c, &fp, &record, (before, true));
    }
    let cwd = std::env::current_dir().context("the submitting directory")?;
    let binary = fleet::slurm::own_binary()?;
    let argv = mpirun::Launch {
        binary: &binary,
        args: &args,
        blocks: &to_run,
        out: &fp.out,
        ranks,
        hostfile: hostfile.as_deref(),
        cwd: &cwd,
        root: nix::unistd::geteuid().is_root(),
        env: mpirun::own_env(),
    }
    .argv();
    // Checked: from here on things are made.
    std::fs::create_dir_all(&fp.out).with_context(|| format!("creating {}", fp.out.display()))?;
    record.jobs.push(fleet::Job {
        id: format!("mpirun-{}", record.jobs.len() + 1),
        blocks: to_run,
        partition: None,
        submitted_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    });
    record.save(&fp.out)?;
    let ok = run_mpirun(&tool, &argv)?;
    finish(c, &fp, &record, (before, ok))
}

/// Runs mpirun to its end; false when it (a rank) failed. A SIGINT or SIGTERM that reaches
/// this process alone is passed on to mpirun, which passes it on to the ranks: they unwind
/// through their testbed guards, and the blocks they did not finish stay missing.
fn run_mpirun(tool: &Path, argv: &[OsString]) -> Result<bool> {
    let mut child = Command::new(tool)
        .args(argv)
        .spawn()
        .with_context(|| format!("running {}", tool.display()))?;
    let mut passed_on = false;
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .with_context(|| format!("waiting for {}", tool.display()))?
        {
            break st;
        }
        if crate::base::signals::interrupted() && !passed_on {
            passed_on = true;
            // mpirun may have just ended on its own; then there is nobody to tell.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !status.success() {
        eprintln!("error: mpirun ended with {status}");
    }
    Ok(status.success())
}

/// Says what is launched: the plan, its blocks, the ranks, and the note on reps = "auto".
fn announce(c: &RunCmd, fp: &FleetPlan, record: &Fleet, to_run: &[u32], ranks: u32) {
    if c.output.quiet {
        return;
    }
    let per_block = record.blocks.first().map_or(0, |b| b.runs.len());
    eprintln!(
        "plan {} ({}): {} block(s) of {} run(s) each (one repetition of every configuration per block, on one machine); running block(s) {} on {ranks} mpirun rank(s){}",
        fp.plan.name,
        fp.plan.source,
        record.blocks.len(),
        per_block,
        mpirun::list(to_run),
        match &record.hostfile {
            Some(h) => format!(" over the hosts of {}", h.display()),
            None => " on this machine".into(),
        }
    );
    for s in &fp.matrix.skipped {
        eprintln!("note: {s}");
    }
    if let Some(n) = &fp.note {
        eprintln!("note: {n}");
    }
}

/// The findings of the results there are, and the blocks still missing, with the command
/// that runs them; `before`: the results found before mpirun, and whether mpirun succeeded.
/// Stopped by a signal: only the missing blocks, then the interruption (exit 130/143).
fn finish(
    c: &RunCmd,
    fp: &FleetPlan,
    record: &Fleet,
    (before, mpirun_ok): (usize, bool),
) -> Result<ExitCode> {
    let st = status::of(&fp.out, record)?;
    let missing: Vec<String> = st
        .iter()
        .filter(|s| s.state != status::State::Done)
        .map(|s| format!("block {} ({})", s.block, s.said))
        .collect();
    let say_missing = || {
        if !missing.is_empty() {
            eprintln!(
                "error: {} of {} block(s) did not finish: {}; run them again with: {}",
                missing.len(),
                st.len(),
                missing.join("; "),
                record.resume_command(&fp.out)
            );
        }
    };
    if crate::base::signals::interrupted() {
        say_missing();
        crate::base::signals::check()?;
    }
    let results = results_of(&fp.out, record)?;
    let reused = before.min(results.len());
    let code = show_results(c, &results, results.len() - reused, reused)?;
    if missing.is_empty() && mpirun_ok {
        return Ok(code);
    }
    say_missing();
    Ok(ExitCode::from(1))
}

/// `run PLAN --blocks-by-rank LIST --out DIR`: what each mpirun rank runs, its blocks of LIST
/// one after another, finished runs skipped.
pub fn rank(c: &RunCmd, list: &str) -> Result<ExitCode> {
    let (rank, size) = mpirun::rank()?;
    let fp = fleet_plan(c)?;
    let reps = fp.plan.reps.max();
    let all = parse_list(list, reps)?;
    let mine = mpirun::of_rank(&all, rank, size);
    let mut store = super::store::open_for_run(&c.store, false)?;
    let host = nix::unistd::gethostname()
        .map_or_else(|_| "?".into(), |h| h.to_string_lossy().into_owned());
    for k in mine {
        if !c.output.quiet {
            eprintln!(
                "plan {} block {k} of {reps} on {host} (rank {rank} of {size})",
                fp.plan.name
            );
        }
        plan::execute_block(
            &fp.plan,
            &fp.matrix,
            k,
            &ExecOptions {
                out: fp.out.clone(),
                resume: true,
                // Several ranks share the terminal: no bars.
                progress: Progress::new(true),
                quiet: c.output.silent(),
                attempts: c.attempts,
            },
        )?;
    }
    super::store::index_run(store.as_mut(), &fp.out, c.output.silent());
    Ok(ExitCode::SUCCESS)
}

/// `0,2,5` as blocks of a plan of `reps` repetitions.
fn parse_list(list: &str, reps: u32) -> Result<Vec<u32>> {
    list.split(',')
        .map(|w| match w.trim().parse::<u32>() {
            Ok(k) if k < reps => Ok(k),
            _ => Err(bad_input(format!(
                "--blocks-by-rank {list}: {w:?} is not a block of the plan (0 to {})",
                reps.saturating_sub(1)
            ))),
        })
        .collect()
}
