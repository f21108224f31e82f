//! Flags of MPI runs (shown in a build with `--features mpi`) shared by the distributed
//! `bench` kinds, and the wrapper that runs a bench command as one rank of an MPI job: it starts the session,
//! agrees with the other ranks on the checks and the seed, and ends the job in order (rank 0
//! reports an error every rank agreed on; an error only this rank saw aborts the job).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::base::error::bad_input;
use crate::cli::common::{RunArgs, TestbedArgs};
use crate::dist::{Coord, Coordinator, DirMode, DistOptions};
use crate::workload::Workload;

/// How the ranks of an MPI job (`mpirun -np N fsgauge bench ...`) share the work.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "MPI (under mpirun: one worker set per rank)")]
pub struct MpiArgs {
    /// Each rank works in its own subtree rank.<r> of the run's directory, as mdtest -u
    /// (the default).
    #[arg(long, conflicts_with = "shared_dir")]
    pub unique_dir: bool,
    /// All ranks work in one directory; worker names are numbered across ranks.
    #[arg(long)]
    pub shared_dir: bool,
    /// Every rank stops a phase when the first rank has run it this long (e.g. 30s); the counts
    /// done by then are reported (IOR/mdtest stonewalling).
    #[arg(long, value_name = "DURATION", value_parser = crate::workload::params::seconds)]
    pub stonewall: Option<f64>,
    /// The read and stat phases of rank r use the files rank r+1 wrote (mdtest -N 1), so a
    /// client's own cache cannot help it.
    #[arg(long)]
    pub read_neighbour: bool,
}

impl MpiArgs {
    /// The validated options.
    pub fn options(&self) -> Result<DistOptions> {
        let stonewall = match self.stonewall {
            Some(s) if !(s > 0.0 && s.is_finite()) => {
                return Err(bad_input("--stonewall must be more than 0s"));
            }
            Some(s) => Some(std::time::Duration::from_secs_f64(s)),
            None => None,
        };
        Ok(DistOptions {
            dir_mode: if self.shared_dir {
                DirMode::Shared
            } else {
                DirMode::Unique
            },
            stonewall,
            read_neighbour: self.read_neighbour,
        })
    }
}

/// Runs `body` as this process's rank (or plainly, without mpirun and without a stonewall).
pub fn distributed(
    mpi: &MpiArgs,
    testbed: &TestbedArgs,
    run: &RunArgs,
    wl: &dyn Workload,
    body: impl FnOnce(&RunArgs) -> Result<ExitCode>,
) -> Result<ExitCode> {
    let opts = mpi.options()?;
    if opts.read_neighbour && !crate::dist::launched_by_mpirun() {
        return Err(bad_input(
            "--read-neighbour needs 2 or more MPI ranks: run under mpirun -np N (N ≥ 2)",
        ));
    }
    let Some(s) = crate::dist::coordinator(opts)? else {
        return body(run);
    };
    let outcome = (|| {
        let ready = check(&*s, testbed, run, wl);
        s.agree(ready)?;
        let mut run = run.clone();
        run.coordinator = Coord::new(s.clone());
        let seed = run.params.settings.seed.or_clock();
        run.params.settings.seed.value = Some(s.broadcast_u64(seed));
        body(&run)
    })();
    match outcome {
        Ok(code) => Ok(code),
        // Alone, there is nobody to keep in step: report as any run does.
        Err(e) if s.size() == 1 => Err(e),
        // Rank 0 reports it and exits with its code. The others end quietly and with success:
        // mpirun kills the whole job as soon as one process exits with an error, which could
        // come before rank 0 has printed.
        Err(e) if s.failure_agreed() => {
            if s.rank() == 0 {
                Err(e)
            } else {
                crate::base::signals::outcome_settled();
                Ok(ExitCode::SUCCESS)
            }
        }
        Err(e) => s.abort(&e),
    }
}

/// For workloads without an MPI mode: refuses to run as several uncoordinated copies.
pub fn refuse_under_mpirun(kind: &str) -> Result<()> {
    if crate::dist::launched_by_mpirun() {
        let with: Vec<&str> = crate::workload::registry::kinds()
            .iter()
            .filter(|k| k.bench.is_some_and(|b| b.distributed))
            .map(|k| k.name)
            .collect();
        return Err(bad_input(format!(
            "bench {kind} has no MPI mode; under mpirun use bench {} (or run {kind} without mpirun)",
            with.join(", ")
        )));
    }
    Ok(())
}

/// What every rank checks before anything is made.
fn check(
    s: &dyn Coordinator,
    testbed: &TestbedArgs,
    run: &RunArgs,
    wl: &dyn Workload,
) -> Result<()> {
    let place = testbed.place()?;
    if s.size() > 1 && matches!(place, crate::lab::runner::Place::Testbed(_)) {
        return Err(bad_input(format!(
            "under mpirun with {} ranks, give --dir PATH with a directory every rank reaches (a shared filesystem, or a testbed made with `fsgauge testbed create` on a single host); --fs builds a testbed on one host for one process",
            s.size()
        )));
    }
    let o = s.options();
    if o.read_neighbour && s.size() < 2 {
        return Err(bad_input(
            "--read-neighbour needs 2 or more ranks (mpirun -np N with N ≥ 2)",
        ));
    }
    crate::lab::runner::check(&place, wl, &run.options())
}
