//! The command line: clap types and printing only. Each command converts its arguments into
//! validated library types and calls the library.

mod age;
mod bench;
pub mod common;
mod compare;
mod devices;
mod exercise;
mod fleet;
mod fleet_mpirun;
mod frag;
mod images;
#[cfg(test)]
mod plan_keys;
mod presets;
mod read;
mod report;
mod run;
mod store;
mod study;
mod testbed;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use common::{RunArgs, TestbedArgs};

/// The version line says whether MPI runs are built in (cargo feature `mpi`).
const VERSION: &str = crate::dist::describe();

/// fsgauge: a filesystem benchmarking laboratory.
///
/// Builds the filesystem under test itself (image → loop device → mkfs → mount), conditions it
/// (memory limit, cold caches), runs workloads with exact per-phase and per-operation
/// measurement, and writes one JSON result per run.
#[derive(Debug, Parser)]
#[command(name = "fsgauge", version = VERSION, about, long_about = None, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a study from a plan file or preset: with no arguments, the built-in `quick` study
    /// (tree workload on ext4, plus xfs and btrfs where their mkfs is installed), side by side.
    Run(run::RunCmd),
    /// List the built-in studies (presets), or print one's plan.
    Presets(presets::PresetsCmd),
    /// Turn result files into a report: statistics, tables, plots (HTML, Markdown, CSV, JSON).
    ///
    /// Statistics per cell (n, mean, sd, CV, 95% CI), the findings of the studies' questions,
    /// the studies' tables, plots (SVG/PNG beside the report with --svg/--png), as one
    /// self-contained HTML file, a table, Markdown, CSV or JSON. A damaged result file in a
    /// directory, or one of
    /// a schema version this fsgauge does not read, is named in a warning and left out (--strict:
    /// exit 2); a file named on the command line is refused. Give it a study's results on this
    /// machine and on emulated disks (fsgauge report fsgauge-results
    /// fsgauge-results-st3500641as): runs on different disks are never pooled, each disk gets its
    /// own finding, the table "Findings by disk" sets them side by side with the published ratio,
    /// and the HTML report opens with a forest plot of them (ratio on a log axis, 95% interval,
    /// published figure marked).
    Report(report::ReportCmd),
    /// Compare two sets of results metric by metric, with Welch's t-test.
    ///
    /// First the environment fields that differ between the two sets ("these runs differ in:
    /// vm.dirty_ratio 20 → 10"); then per metric the mean ± sd of both, the % change, Welch's
    /// t-test p-value, and whether that is better or worse.
    Compare(compare::CompareCmd),
    /// Run one workload on a fresh testbed (--fs) or an existing directory (--dir).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// The integrity exerciser: random operations on a file (fsx's set: reads, writes past
    /// EOF, mmap, truncate, fallocate modes, copy_file_range, reflink), each verified against
    /// an in-memory model; replayable, and with --remount-every across remounts.
    Exercise(Box<exercise::ExerciseArgs>),
    /// Build, list and tear down testbeds (image → loop device → mkfs → mount).
    #[command(subcommand)]
    Testbed(testbed::TestbedCmd),
    /// Block layout and fragmentation of trees (ext2/3/4 inode tables or FIEMAP, counted as
    /// filefrag counts), and free-space fragmentation of a filesystem (as e2freefrag).
    ///
    /// Per tree: extents, ideal extents, layout score, fragmentation factor, internal
    /// fragmentation and inter-file locality. --free MOUNTPOINT: free-space fragmentation as
    /// e2freefrag reports it (GETFSMAP, else the ext2/3/4 block bitmaps).
    Frag(frag::FragCmd),
    /// Age a filesystem to usage checkpoints (fill, round-robin append, churn), recording
    /// throughput, layout and free-space fragmentation at each (the study's agesystem).
    ///
    /// Usage is the whole filesystem's (statvfs used blocks); each checkpoint lands within 1% of
    /// the filesystem size. With --dir the aged tree is made in a new directory below PATH and
    /// removed after the run, like every workload's directory.
    Age(Box<age::AgeCmd>),
    /// Read a tree back as the study's read tool did: walk order, random order, physical-block
    /// order (KiB/s of read time and of the whole pass), and files stat'ed per second.
    Read(read::ReadCmd),
    /// Multi-testbed studies: `append` (aged by round-robin appends vs a fresh copy).
    #[command(subcommand)]
    Study(study::StudyCmd),
    /// Emulated devices: the disk profiles (seeds' 7200 rpm drives, SSDs, ram) with the source
    /// of every parameter, and what the disk model expects of each.
    ///
    /// The built-in profiles: study 5's Seagate ST3500641AS, a 2003–2005 Deskstar 7K250-class
    /// drive for studies 1–4, a SATA and an NVMe SSD, and ram. A profile is a TOML file, so a
    /// path works wherever a name does; ablations after a colon (seek=off, rotation=off,
    /// cache=off, constant=12ms) take a part of the model away. Testbeds run on a profile with
    /// --device-model (README, "Emulated disks"); scripts/bench-device checks the server's
    /// accuracy and cost.
    Devices(devices::DevicesCmd),
    /// The results store: index result files in SQLite (a file; the default) or PostgreSQL
    /// (a server a team shares), rebuild the index from the files, say what it holds.
    ///
    /// The result files stay the source of truth. --store PATH|URL or FSGAUGE_STORE names
    /// the store; `fsgauge run` indexes what it writes when one is set.
    #[command(subcommand)]
    Store(store::StoreCmd),
    /// One metric over kernels, fsgauge commits, versions, hosts or days, from the store, with
    /// the changes outside the noise marked (Welch's t-test between neighbouring groups,
    /// Holm-corrected).
    History(store::HistoryCmd),
    /// Where a plan submitted with `run --on slurm` stands: each block (one repetition of every
    /// configuration, one array task) pending, running, done, failed or cancelled, from its
    /// result files and Slurm (sacct, or squeue and scontrol without accounting), and the
    /// totals. Resubmit what failed or was cancelled with `run PLAN --on slurm --resume --out DIR`.
    Status(fleet::StatusCmd),
}

/// Parses the command line and runs the command.
pub fn main() -> Result<ExitCode> {
    let cli = Cli::try_parse().unwrap_or_else(|e| common::with_tips(e).exit());
    crate::base::signals::install();
    let res = match cli.command {
        // A plan over a Slurm array (`--on`) or one block of it (`--block`) is the fleet's.
        Command::Run(c) => match (c.on.clone(), c.block, c.blocks_by_rank.clone()) {
            (Some(crate::lab::fleet::On::Slurm { partition }), _, _) => {
                fleet::submit(&c, &partition)
            }
            (Some(crate::lab::fleet::On::Mpirun { hostfile }), _, _) => {
                fleet_mpirun::launch(&c, hostfile.as_deref())
            }
            (None, Some(k), _) => fleet::block(&c, k),
            (None, None, Some(list)) => fleet_mpirun::rank(&c, &list),
            (None, None, None) => run::run(c),
        },
        Command::Status(c) => fleet::status(c),
        Command::Presets(c) => presets::run(c),
        Command::Report(c) => report::run(c),
        Command::Compare(c) => compare::run(c),
        Command::Bench(c) => bench::run(c),
        Command::Exercise(c) => exercise::run(*c),
        Command::Testbed(c) => testbed::run(c),
        Command::Frag(c) => frag::run(c),
        Command::Age(c) => age::run(*c),
        Command::Read(c) => read::run(c),
        Command::Study(c) => study::run(c),
        Command::Devices(c) => devices::run(c),
        Command::Store(c) => store::run(c),
        Command::History(c) => store::history(c),
    };
    // A signal after the command's last check still ends the process as interrupted.
    crate::base::signals::conclude(res)
}
