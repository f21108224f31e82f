//! `fsgauge store add|rebuild|status|migrate` (the results store: an index of result files in SQLite
//! or PostgreSQL) and `fsgauge history METRIC --where …` (one metric over kernels, commits or
//! days, with the changes outside the noise marked).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::{OutputArgs, RunArgs};
use crate::analysis::report::document::Page;
use crate::base::error::bad_input;
use crate::lab::store::history::{self, By};
use crate::lab::store::history_sketch::{self, Charset};
use crate::lab::store::{Filter, Location, Store};

/// `--store`, or `FSGAUGE_STORE` (exported into every job a Slurm `sbatch` submits, so one
/// line in a job script or `~/.bashrc` points every run at the team's store).
#[derive(Debug, Clone, Args)]
pub struct StoreArg {
    /// The results store: a SQLite file's path (made when missing; nothing to install or
    /// start) or a PostgreSQL URL (postgres://USER[:PASSWORD]@HOST[:PORT]/DB). The result
    /// files stay the source of truth; the store indexes them.
    #[arg(long, env = "FSGAUGE_STORE", value_name = "PATH|URL")]
    pub store: Option<String>,
}

impl StoreArg {
    /// The store's location; a missing one is refused, saying how to give it.
    pub fn location(&self) -> Result<Location> {
        match &self.store {
            Some(s) => Location::parse(s),
            None => Err(bad_input(
                "no store given: set --store PATH|URL or FSGAUGE_STORE (a SQLite file, e.g. fsgauge-results/store.sqlite, or postgres://USER@HOST/DB)",
            )),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum StoreCmd {
    /// Index result files (files, or directories of them) in the store; adding a result twice
    /// adds it once.
    Add(AddCmd),
    /// Drop the index and make it again from the result files alone (the files are untouched).
    Rebuild(AddCmd),
    /// How many runs and figures the store holds.
    Status(StatusCmd),
    /// Bring a store of an older schema version to this fsgauge's, in place (queries never
    /// change a store, so they refuse an older one and name this command); what the new
    /// version keeps is read from the result files again.
    Migrate(StatusCmd),
}

#[derive(Debug, Args)]
pub struct AddCmd {
    /// Result files, or directories of them.
    #[arg(value_name = "RESULTS", required = true)]
    pub results: Vec<PathBuf>,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct StatusCmd {
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What a store command says: the store, and what it read or holds.
#[derive(Debug, serde::Serialize)]
struct Said {
    store: String,
    /// Result files read (add, rebuild).
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<usize>,
    /// Runs that were not in the store before (add, rebuild).
    #[serde(skip_serializing_if = "Option::is_none")]
    new: Option<usize>,
    /// Files of the directories that are not results, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<String>,
    runs: i64,
    figures: i64,
}

impl Said {
    fn print(&self, out: &OutputArgs) -> Result<()> {
        let mut headers = vec!["store"];
        let mut row = vec![self.store.clone()];
        if let (Some(f), Some(n)) = (self.files, self.new) {
            headers.extend(["files read", "runs new"]);
            row.extend([f.to_string(), n.to_string()]);
        }
        headers.extend(["runs", "figures"]);
        row.extend([self.runs.to_string(), self.figures.to_string()]);
        let table = crate::base::text::Table {
            title: String::new(),
            label_columns: 1,
            note: String::new(),
            headers: headers.into_iter().map(String::from).collect(),
            rows: vec![row],
        };
        out.print(Page::new("fsgauge store", self)?.table(table))
    }
}

pub fn run(c: StoreCmd) -> Result<ExitCode> {
    match c {
        StoreCmd::Add(a) => add(a, false),
        StoreCmd::Rebuild(a) => add(a, true),
        StoreCmd::Status(s) => status(s, false),
        StoreCmd::Migrate(s) => status(s, true),
    }
}

/// `store status`, and `store migrate` (which says the same once the store is migrated).
fn status(s: StatusCmd, migrate: bool) -> Result<ExitCode> {
    let loc = s.store.location()?;
    let mut store = if migrate {
        let (store, from) = Store::open_for_migrating(&loc)?;
        if from.is_none() && !s.out.format().is_machine() {
            eprintln!(
                "the store {} is at this fsgauge's schema version already: nothing to migrate",
                loc.shown()
            );
        }
        store
    } else {
        Store::open_for_reading(&loc)?
    };
    let (runs, figures) = store.counts()?;
    Said {
        store: loc.shown(),
        files: None,
        new: None,
        skipped: Vec::new(),
        runs,
        figures,
    }
    .print(&s.out)?;
    Ok(ExitCode::SUCCESS)
}

fn add(a: AddCmd, rebuild: bool) -> Result<ExitCode> {
    let loc = a.store.location()?;
    // Every path is checked before the store is touched: a typo adds nothing.
    for p in &a.results {
        if let Err(e) = std::fs::metadata(p) {
            return Err(bad_input(format!("{}: {e}", p.display())));
        }
    }
    let mut store = if rebuild {
        Store::open_for_rebuild(&loc)?
    } else {
        Store::open_for_writing(&loc)?
    };
    let added = store.add(&a.results)?;
    if !a.out.format().is_machine() {
        for s in &added.skipped {
            eprintln!("warning: {s}: not indexed");
        }
    }
    let (runs, figures) = store.counts()?;
    Said {
        store: loc.shown(),
        files: Some(added.files),
        new: Some(added.new),
        skipped: added.skipped,
        runs,
        figures,
    }
    .print(&a.out)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
#[command(after_long_help = HISTORY_HELP)]
pub struct HistoryCmd {
    /// The metric: a core metric key (elapsed, sys, ops_per_s, mb_per_s, p99, ...) or one of
    /// the workload's own figures.
    pub metric: String,
    /// Only runs with these values: KEY=VALUE, several comma-separated or in several
    /// --where. Keys: fs, testbed, workload, label, plan, phase, host, kernel, cpu, commit,
    /// version, profile, foreign_cache_drops and set_aside (counts: =0 leaves out the runs
    /// something disturbed), steal_below and pressure_below (a share 0–1: only figures whose
    /// phase had less CPU steal / pressure), or any workload parameter (threads=8).
    #[arg(long = "where", value_name = "KEY=VALUE,...")]
    pub filter: Vec<String>,
    /// What the runs are grouped by along the history.
    #[arg(long, value_enum, default_value = "kernel")]
    pub by: By,
    /// The family-wise error rate of the change marks: the chance that any change marked is
    /// not there.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Draw the history's bars on the terminal and in Markdown with ASCII (`|--o--|`) instead
    /// of box-drawing characters (`├──●──┤`).
    #[arg(long)]
    pub ascii: bool,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub out: OutputArgs,
}

const HISTORY_HELP: &str = "\
Groups are put in the order of their first run. Each group is compared with the one before by
Welch's unequal-variance t-test; Holm's step-down correction over those comparisons keeps the
chance of marking any change that is not there at most --alpha (family-wise error). A change
is marked * better / worse (or changed, for a figure without a direction).

Results whose file changed or vanished since it was indexed are named and left out.
The terminal and --format md draw the history above its table in text: a row per group with
its mean and its 95% interval as a bar on one scale (├──●──┤; --ascii: |--o--|), each change
outside the noise flagged as in the table (* worse). --format html draws it as SVG: each
group's mean with its 95% interval, and a triangle over each change outside the noise.

Example: when did file_remove ops/s drop on xfs?
  fsgauge history ops_per_s --where fs=xfs,phase=file_remove --by kernel
  fsgauge history ops_per_s --where fs=xfs,phase=file_remove --format html > history.html";

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 0.5 => Ok(a),
        _ => Err(format!(
            "{s:?}: give a probability above 0 and below 0.5, e.g. 0.05"
        )),
    }
}

pub fn history(c: HistoryCmd) -> Result<ExitCode> {
    let filter = Filter::parse(&c.filter)?;
    let loc = c.store.location()?;
    let mut store = Store::open_for_reading(&loc)?;
    let (hits, stale) = store.metric(&c.metric, &filter)?;
    for s in &stale {
        eprintln!("warning: {s}");
    }
    if hits.is_empty() {
        return Err(bad_input(format!(
            "{}: no figure in {} matches{}; keys: {}",
            c.metric,
            loc.shown(),
            if c.filter.is_empty() {
                String::new()
            } else {
                format!(" --where {}", c.filter.join(","))
            },
            crate::lab::store::key_names()
        )));
    }
    let h = history::history(&hits, &c.metric, c.by, c.alpha)?;
    let page = Page::new("fsgauge history", &h)?
        .plot(crate::lab::store::history_plot::plot(&h))
        .sketch(history_sketch::sketch(
            &h,
            if c.ascii {
                Charset::Ascii
            } else {
                Charset::Unicode
            },
        ))
        .table(history::table(&h));
    c.out.print(page)?;
    Ok(ExitCode::SUCCESS)
}

/// `compare` and `report` arguments with `store:KEY=VALUE,…` queries replaced by the result
/// files they name (read from the files, the source of truth).
pub fn expand(paths: &[PathBuf], store: &StoreArg) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        match p.to_str().filter(|s| s.starts_with("store:")) {
            Some(q) => out.extend(crate::lab::store::query_paths(q, store.store.as_deref())?),
            None => out.push(p.clone()),
        }
    }
    Ok(out)
}

/// The store `fsgauge run` indexes into, opened before anything runs so that a store that
/// cannot be opened is refused (exit 2) with nothing made; `None` when none is set.
pub fn open_for_run(arg: &StoreArg, dry_run: bool) -> Result<Option<Store>> {
    if arg.store.is_none() || dry_run {
        return Ok(None);
    }
    Ok(Some(Store::open_for_writing(&arg.location()?)?))
}

impl StoreArg {
    /// The store a command's results are indexed into, opened before anything runs so that
    /// one that cannot be opened is refused (exit 2) with nothing made; `None` when none is
    /// set, and on an MPI rank other than the one that writes the results.
    pub fn open_for(&self, run: &RunArgs) -> Result<Option<Store>> {
        if run.coordinator.is_secondary() {
            return Ok(None);
        }
        open_for_run(self, false)
    }
}

/// Indexes a run's results directory into its store. The result files are written already:
/// a store that fails now is named in a warning, and the files can be added later.
pub fn index_run(store: Option<&mut Store>, dir: &std::path::Path, quiet: bool) {
    index_paths(store, &[dir.to_path_buf()], dir, quiet);
}

/// Indexes the result files a command without a plan wrote (`bench`, `run` as a user, `age`,
/// `exercise`), not the rest of their directory, as [`index_run`] does.
pub fn index_written(
    store: Option<&mut Store>,
    outcomes: &[crate::lab::runner::Outcome],
    dir: &std::path::Path,
    quiet: bool,
) {
    let paths: Vec<PathBuf> = outcomes.iter().filter_map(|o| o.path.clone()).collect();
    index_files(store, &paths, dir, quiet);
}

/// Indexes result files a command wrote into `dir` (`read`, `study append`, and through
/// [`index_written`] every command without a plan): the one way they reach the store.
pub fn index_files(
    store: Option<&mut Store>,
    paths: &[PathBuf],
    dir: &std::path::Path,
    quiet: bool,
) {
    if !paths.is_empty() {
        index_paths(store, paths, dir, quiet);
    }
}

/// Indexes `paths` (result files or directories of them, in `dir`) into the store.
fn index_paths(store: Option<&mut Store>, paths: &[PathBuf], dir: &std::path::Path, quiet: bool) {
    let Some(store) = store else {
        return;
    };
    match store.add(paths) {
        Ok(a) if !quiet => eprintln!(
            "indexed {} results ({} new) in the store {}",
            a.files,
            a.new,
            store.location.shown()
        ),
        Ok(_) => {}
        Err(e) => eprintln!(
            "warning: the results could not be indexed in the store {} ({e:#}); they are in {}: add them later with fsgauge store add --store {} {}",
            store.location.shown(),
            dir.display(),
            store.location.shown(),
            dir.display()
        ),
    }
}
