//! `fsgauge bench WORKLOAD`: one workload, measured, on a fresh testbed or a directory.
//! One file per workload holds its flags; adding a workload adds a variant and a match arm here.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

mod clients;
mod tio;
mod tree;

use super::common::{RunArgs, TestbedArgs};
use crate::report::table::phase_table;
use crate::workload::Workload;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// The low-memory study's tree: mkdir per directory, one open/write.../close per file
    /// (phase `create`), then remove everything as rm -rf does (phase `delete`).
    ///
    /// The study's two sequences: --dirs 14 --files 10 --file-size 100M, and
    /// --dirs 14 --files 1000 --file-size 10M.
    Tree(tree::TreeArgs),
    /// The block-reservation study's threaded I/O (tiobench): threads × mode × block size,
    /// each combination one measured phase (a fresh filesystem per cell with --fs), with
    /// MB/s, IOPS, latency percentiles, requests over 2 s and 10 s, CPU efficiency and the
    /// block layout of every written file.
    ///
    /// The study's sweep: --threads 1,4,8,16,32,64 --mode seqwrite,randwrite,seqread,randread
    /// --block 4K,128K.
    Tio(tio::TioArgs),
    /// The block-reservation study's client load (dbench): N clients, each in its own
    /// directory, replay a dbench loadfile (--loadfile) or the built-in file-server-like mix;
    /// MB/s, and per operation kind count, mean and max latency and percentiles.
    Clients(clients::ClientsArgs),
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
        BenchCmd::Tio(a) => tio::run(a),
        BenchCmd::Clients(a) => clients::run(a),
    }
}
