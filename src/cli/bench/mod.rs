//! `fsgauge bench WORKLOAD`: one workload, measured, on a fresh testbed or a directory.
//! One file per workload holds its flags; adding a workload adds a variant and a match arm here.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

mod clients;
mod create;
mod fdtree;
mod interleave;
#[cfg(feature = "mpi")]
mod mpi;
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
    /// The fdtree metadata benchmark (journal-size study): a tree of 1 + D + … + D^L
    /// directories with F files of S bytes in each; phases dir_create (dirs/s), file_create
    /// (files/s, KiB/s), file_remove, dir_remove, plus optional stat and read.
    ///
    /// Defaults are fdtree's: L=4 D=10 F=10 S=40K (11111 directories, 111110 files).
    /// --scenario picks one of the study's four (see below).
    Fdtree(fdtree::FdtreeArgs),
    /// The inode-reservation study: make --dirs directories, create --files files in each
    /// round-robin (file 1 everywhere, then file 2, …), make the cache cold, and time removing
    /// the tree as rm -rf does. Phases dir_create, file_create, remove.
    ///
    /// The study's sizes are the defaults: 9890 directories × 14 files = 138460 files. The
    /// study rebooted after each operation: --cold applies between dir_create and
    /// file_create, --remove-cold before the removal.
    Interleave(interleave::InterleaveArgs),
    /// fs_mark-style small-file creation rate: per file open(O_CREAT), writes, optional fsync,
    /// close, each syscall timed on its own; then a remove phase (after --cold).
    Create(create::CreateArgs),
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
    run.print(&outcomes, |r| {
        phase_table(r) + &crate::report::ranks::rank_text(r)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(cmd: BenchCmd) -> Result<ExitCode> {
    #[cfg(not(feature = "mpi"))]
    if crate::dist::launched_by_mpirun() {
        eprintln!(
            "warning: this fsgauge is built without MPI, so under mpirun every process runs alone and writes its own result; build with --features mpi for one run over all ranks"
        );
    }
    match cmd {
        BenchCmd::Tree(a) => {
            #[cfg(feature = "mpi")]
            mpi::refuse_under_mpirun("tree")?;
            bench(&a.testbed, &a.run, &a.workload())
        }
        #[cfg(not(feature = "mpi"))]
        BenchCmd::Fdtree(a) => bench(&a.testbed, &a.run, &a.workload()),
        #[cfg(feature = "mpi")]
        BenchCmd::Fdtree(a) => mpi::distributed(&a.mpi, &a.testbed, &a.run, &a.workload(), |run| {
            bench(&a.testbed, run, &a.workload())
        }),
        BenchCmd::Interleave(a) => {
            #[cfg(feature = "mpi")]
            mpi::refuse_under_mpirun("interleave")?;
            bench(&a.testbed, &a.run, &a.workload())
        }
        #[cfg(not(feature = "mpi"))]
        BenchCmd::Create(a) => bench(&a.testbed, &a.run, &a.workload()),
        #[cfg(feature = "mpi")]
        BenchCmd::Create(a) => mpi::distributed(&a.mpi, &a.testbed, &a.run, &a.workload(), |run| {
            bench(&a.testbed, run, &a.workload())
        }),
        #[cfg(not(feature = "mpi"))]
        BenchCmd::Tio(a) => tio::run(a),
        #[cfg(feature = "mpi")]
        BenchCmd::Tio(a) => {
            let (m, t, r, w) = (
                a.mpi.clone(),
                a.testbed.clone(),
                a.run.clone(),
                a.workload(),
            );
            mpi::distributed(&m, &t, &r, &w, |run| {
                tio::run(tio::TioArgs {
                    run: run.clone(),
                    ..a
                })
            })
        }
        #[cfg(not(feature = "mpi"))]
        BenchCmd::Clients(a) => clients::run(a),
        #[cfg(feature = "mpi")]
        BenchCmd::Clients(a) => {
            let (m, t, r, w) = (
                a.mpi.clone(),
                a.testbed.clone(),
                a.run.clone(),
                a.workload(),
            );
            mpi::distributed(&m, &t, &r, &w, |run| {
                clients::run(clients::ClientsArgs {
                    run: run.clone(),
                    ..a
                })
            })
        }
    }
}
