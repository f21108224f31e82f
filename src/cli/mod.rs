//! The command line: clap types and printing only. Each command converts its arguments into
//! validated library types and calls the library.

mod bench;
pub mod common;
mod exercise;
mod run;
mod testbed;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

pub use common::{RunArgs, TestbedArgs};

/// fsgauge: a filesystem benchmarking laboratory.
///
/// Builds the filesystem under test itself (image → loop device → mkfs → mount), conditions it
/// (memory limit, cold caches), runs workloads with exact per-phase and per-operation
/// measurement, and writes one JSON result per run.
#[derive(Debug, Parser)]
#[command(name = "fsgauge", version, about, long_about = None, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a study: with no arguments, the built-in `quick` study (tree workload on ext4, plus
    /// xfs and btrfs where their mkfs is installed), printed side by side.
    Run(run::RunCmd),
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
}

/// Parses the command line and runs the command.
pub fn main() -> Result<ExitCode> {
    let cli = Cli::parse();
    crate::signals::install();
    match cli.command {
        Command::Run(c) => run::run(c),
        Command::Bench(c) => bench::run(c),
        Command::Exercise(c) => exercise::run(*c),
        Command::Testbed(c) => testbed::run(c),
    }
}
