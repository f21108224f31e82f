//! `fsgauge bench WORKLOAD`: one workload, measured, on a fresh testbed or a directory.
//! The subcommands come from the workload registry: each kind's flags are its parameter
//! struct (`clap::Args`), so a new workload needs nothing here.

use crate::analysis::report::output::{OutputFormat, ResultViews, View};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, Result};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, Subcommand};

mod mpi;

use super::common::{RunArgs, TestbedArgs};
use crate::analysis::report::table::phase_table;
use crate::lab::runner::{Outcome, Place};
use crate::results::RunResult;
use crate::workload::registry::sweep;
use crate::workload::registry::{self, WorkloadKind};
use crate::workload::Workload;

/// `fsgauge bench KIND …`, parsed: the kind, where and how it runs, and its parameters.
pub struct BenchCmd {
    kind: &'static WorkloadKind,
    testbed: TestbedArgs,
    run: RunArgs,
    workload: Box<dyn Workload>,
    /// `--csv`: print the sweep as CSV instead of the tables.
    csv: bool,
    /// The MPI flags, for distributed kinds in a build with MPI.
    mpi: Option<mpi::MpiArgs>,
    /// `--store` / `FSGAUGE_STORE`: the store the results are indexed into.
    store: super::store::StoreArg,
}

impl std::fmt::Debug for BenchCmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCmd")
            .field("kind", &self.kind.name)
            .field("testbed", &self.testbed)
            .field("run", &self.run)
            .field("workload", &self.workload.params())
            .finish()
    }
}

fn benchable() -> impl Iterator<Item = (&'static WorkloadKind, &'static registry::Bench)> {
    registry::kinds()
        .iter()
        .filter_map(|k| k.bench.as_ref().map(|b| (k, b)))
}

fn subcommand(kind: &'static WorkloadKind, b: &registry::Bench) -> Command {
    let cmd = Command::new(kind.name).about(kind.about);
    let cmd =
        super::store::StoreArg::augment_args(RunArgs::augment_args(TestbedArgs::augment_args(cmd)));
    let mut cmd = (b.args)(cmd);
    if b.csv.is_some() {
        cmd = cmd.arg(
            Arg::new("csv")
                .long("csv")
                .action(ArgAction::SetTrue)
                .help("Print the sweep as CSV on stdout instead of the tables")
                .help_heading("Runs and results"),
        );
    }
    if b.distributed && crate::dist::BUILT_IN {
        cmd = mpi::MpiArgs::augment_args(cmd);
    }
    cmd
}

impl FromArgMatches for BenchCmd {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, sub)) = m.subcommand() else {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::MissingSubcommand,
                "bench needs a workload kind",
            ));
        };
        let Some((kind, b)) = benchable().find(|(k, _)| k.name == name) else {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("no workload kind {name:?}"),
            ));
        };
        Ok(BenchCmd {
            kind,
            testbed: TestbedArgs::from_arg_matches(sub)?,
            run: RunArgs::from_arg_matches(sub)?,
            workload: (b.from_args)(sub)?,
            csv: b.csv.is_some() && sub.get_flag("csv"),
            mpi: if b.distributed && crate::dist::BUILT_IN {
                Some(mpi::MpiArgs::from_arg_matches(sub)?)
            } else {
                None
            },
            store: super::store::StoreArg::from_arg_matches(sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Subcommand for BenchCmd {
    fn augment_subcommands(cmd: Command) -> Command {
        cmd.subcommands(benchable().map(|(k, b)| subcommand(k, b)))
            .subcommand_required(true)
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        benchable().any(|(k, _)| k.name == name)
    }
}

pub fn run(cmd: BenchCmd) -> Result<ExitCode> {
    if !crate::dist::BUILT_IN && crate::dist::launched_by_mpirun() {
        eprintln!(
            "warning: this fsgauge is built without MPI, so under mpirun every process runs alone and writes its own result; build with --features mpi for one run over all ranks"
        );
    }
    match &cmd.mpi {
        Some(m) => {
            return mpi::distributed(m, &cmd.testbed, &cmd.run, &*cmd.workload, |run| {
                bench(&cmd, run)
            })
        }
        None if crate::dist::BUILT_IN => mpi::refuse_under_mpirun(cmd.kind.name)?,
        None => {}
    }
    bench(&cmd, &cmd.run)
}

/// Runs the workload (one run per cell of its sweep on fresh testbeds) and prints it.
fn bench(cmd: &BenchCmd, run: &RunArgs) -> Result<ExitCode> {
    let b = cmd
        .kind
        .bench
        .as_ref()
        .expect("bench kinds have bench hooks");
    // A store that cannot be opened is refused before anything runs; only the process that
    // writes the results indexes them.
    let mut store = cmd.store.open_for(run)?;
    let place = run.admit(cmd.testbed.place()?, &*cmd.workload)?;
    let outcomes = run_sweep(&place, &*cmd.workload, run)?;
    super::store::index_written(
        store.as_mut(),
        &outcomes,
        &run.params.out.dir,
        run.output.silent(),
    );
    let results: Vec<RunResult> = outcomes.iter().map(|o| o.result.clone()).collect();
    // --csv is short for --format csv (a sweep's CSV is its own columns).
    let mut run = run.clone();
    if cmd.csv {
        run.output.format = Some(OutputFormat::Csv);
    }
    let tables = |r: &[RunResult]| match &cmd.kind.tables {
        Some(t) => crate::base::text::Table::texts(&t.of(r)),
        None => phase_table(r),
    };
    let table = |r: &[RunResult]| tables(r) + &crate::analysis::report::ranks::rank_text(r);
    let csv_view = b.csv.map(|f| move |r: &[RunResult]| f(r));
    run.print_views(
        &outcomes,
        &ResultViews {
            table: &table,
            csv: csv_view.as_ref().map(|f| f as View),
        },
    )?;
    if let Some(f) = b.csv {
        write_csv(&run, cmd.kind.name, &f(&results), run.output.silent())?;
    }
    if let Some(code) = crate::results::unsaved_exit() {
        return Ok(code);
    }
    Ok(super::common::crash_status(
        outcomes.iter().map(|o| &o.result),
    ))
}

/// Runs a workload: on a testbed, one run per cell of its sweep, each on a fresh filesystem
/// (see [`sweep`]); else one run. Every cell is checked before anything is made, and all
/// cells share one seed.
fn run_sweep(place: &Place, whole: &dyn Workload, run: &RunArgs) -> Result<Vec<Outcome>> {
    let mut opts = run.options();
    opts.seed = Some(run.params.settings.seed.or_clock());
    sweep::check_count(whole)?;
    if !(sweep::splits(whole) && matches!(place, Place::Testbed(_))) {
        return crate::lab::runner::run(place, whole, &opts);
    }
    let cells = sweep::cells(whole)?;
    for c in &cells {
        crate::lab::runner::check(place, &*c.workload, &opts)?;
    }
    let mut out = Vec::new();
    let n = cells.len();
    for (i, c) in cells.iter().enumerate() {
        opts.progress
            .note(&format!("cell {}/{n} on a fresh filesystem", i + 1));
        out.extend(crate::lab::runner::run(place, &*c.workload, &opts)?);
    }
    Ok(out)
}

/// Writes a sweep's CSV into the results directory (on rank 0 only under MPI); its path.
fn write_csv(run: &RunArgs, kind: &str, csv: &str, quiet: bool) -> Result<Option<PathBuf>> {
    if run.coordinator.is_secondary() {
        return Ok(None);
    }
    let out = &run.params.out.dir;
    let dir = crate::base::atomic::OutDir::make(out)
        .map_err(|e| crate::base::error::bad_input(format!("--out {}: {e:#}", out.display())))?;
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let stem = format!("{kind}-sweep-{secs}-{}", std::process::id());
    let name = dir
        .create_new(
            |n| match n {
                0 => format!("{stem}.csv"),
                n => format!("{stem}-{}.csv", n + 1),
            },
            csv.as_bytes(),
        )
        .with_context(|| format!("writing the sweep CSV into {}", out.display()))?;
    let path = out.join(name);
    if !quiet {
        eprintln!("sweep CSV: {}", path.display());
    }
    Ok(Some(path))
}
