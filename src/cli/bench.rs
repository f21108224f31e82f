//! `fsgauge bench WORKLOAD`: one workload, measured, on a fresh testbed or a directory.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::{RunArgs, TestbedArgs};
use crate::report::table::phase_table;
use crate::units::Size;
use crate::workload::tree::{FsyncMode, Tree};
use crate::workload::Workload;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// The low-memory study's tree: mkdir per directory, one open/write.../close per file
    /// (phase `create`), then remove everything as rm -rf does (phase `delete`).
    ///
    /// The study's two sequences: --dirs 14 --files 10 --file-size 100M, and
    /// --dirs 14 --files 1000 --file-size 10M.
    Tree(TreeArgs),
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Directories in the tree.
    #[arg(long, default_value_t = 14, help_heading = "Workload")]
    pub dirs: u64,
    /// Files per directory.
    #[arg(long, default_value_t = 10, help_heading = "Workload")]
    pub files: u64,
    /// Size of every file.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "100M",
        help_heading = "Workload"
    )]
    pub file_size: Size,
    /// Size of each write(2).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "1M",
        help_heading = "Workload"
    )]
    pub block: Size,
    /// When data is forced out: none (phase ends at the last close), file (fsync before each
    /// close), end (one syncfs inside each phase).
    #[arg(
        long,
        value_name = "none|file|end",
        default_value = "end",
        help_heading = "Workload"
    )]
    pub fsync: FsyncMode,
}

impl TreeArgs {
    pub fn workload(&self) -> Tree {
        Tree {
            dirs: self.dirs,
            files: self.files,
            file_size: self.file_size.bytes(),
            block: self.block.bytes(),
            fsync: self.fsync,
        }
    }
}

/// Runs a workload with the shared flags and prints it.
pub fn bench(testbed: &TestbedArgs, run: &RunArgs, wl: &dyn Workload) -> Result<ExitCode> {
    let place = testbed.place()?;
    let outcomes = crate::runner::run(&place, wl, &run.options())?;
    run.print(&outcomes, phase_table)?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(cmd: BenchCmd) -> Result<ExitCode> {
    match cmd {
        BenchCmd::Tree(a) => bench(&a.testbed, &a.run, &a.workload()),
    }
}
