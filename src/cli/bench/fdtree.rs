//! Flags of `fsgauge bench fdtree`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::common::{RunArgs, TestbedArgs};
use crate::units::Size;
use crate::workload::fdtree::{Fdtree, FdtreeSpec, Scenario};
use crate::workload::tree::FsyncMode;

#[derive(Debug, Args)]
pub struct FdtreeArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// A scenario of the journal-size study (4 KiB or 4 MiB files, shallow or deep tree):
    ///
    ///   small-shallow   L=3  D=20 F=40 S=4K      8421 dirs  336840 files   1.3 GiB
    ///   small-deep      L=10 D=3  F=4  S=4K     88573 dirs  354292 files   1.4 GiB
    ///   medium-shallow  L=2  D=17 F=10 S=4000K    307 dirs    3070 files  11.7 GiB
    ///   medium-deep     L=9  D=2  F=4  S=4000K   1023 dirs    4092 files  15.6 GiB
    ///
    /// (fdtree -l L -d D -f F -s S/4K; the "4 MiB" files are fdtree's -s 1000.)
    ///
    /// These are the study's full sizes.
    /// Any of --levels, --dirs-per-level, --files-per-dir, --file-size given as well overrides
    /// the scenario's value, e.g. --file-size 400K scales a medium scenario down to fit a
    /// smaller testbed (the result records the values used).
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Workload",
        verbatim_doc_comment
    )]
    pub scenario: Option<Scenario>,
    /// Directory levels below the base (fdtree -l) [default: 4].
    #[arg(long, value_name = "L", help_heading = "Workload")]
    pub levels: Option<u32>,
    /// Subdirectories in every non-leaf directory (fdtree -d) [default: 10].
    #[arg(long, value_name = "D", help_heading = "Workload")]
    pub dirs_per_level: Option<u64>,
    /// Files in every directory (fdtree -f) [default: 10].
    #[arg(long, value_name = "F", help_heading = "Workload")]
    pub files_per_dir: Option<u64>,
    /// Size of every file (fdtree -s N means N × 4K) [default: 40K].
    #[arg(long, value_name = "SIZE", help_heading = "Workload")]
    pub file_size: Option<Size>,
    /// Size of each write(2) (fdtree's dd writes 4K blocks) [default: 4K].
    #[arg(long, value_name = "SIZE", help_heading = "Workload")]
    pub block: Option<Size>,
    /// Workers started together, each building, timing and removing its own tree
    /// LEVEL0.<worker> (as parallel fdtree runs or mdtest -u): every count is T × one tree.
    #[arg(long, value_name = "T", default_value_t = 1, help_heading = "Workload")]
    pub threads: u32,
    /// When data is forced out: none (fdtree never syncs), file (fsync before each close),
    /// end (one syncfs at the end of each create and remove phase, inside its time).
    #[arg(
        long,
        value_name = "none|file|end",
        default_value = "none",
        help_heading = "Workload"
    )]
    pub fsync: FsyncMode,
    /// Add a `stat` phase after file_create: stat every file (as mdtest does) and check its
    /// size. --cold applies before it.
    #[arg(long, help_heading = "Workload")]
    pub stat: bool,
    /// Add a `read` phase after file_create (and stat): read every file back and check its
    /// length. --cold applies before it.
    #[arg(long, help_heading = "Workload")]
    pub read: bool,
    /// Write the tree as found on disk after file_create (one line per entry:
    /// `d<TAB>path` or `f<TAB>size<TAB>path`, relative to the workload directory) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub tree_list: Option<PathBuf>,
    #[cfg(feature = "mpi")]
    #[command(flatten)]
    pub mpi: super::mpi::MpiArgs,
}

impl FdtreeArgs {
    pub fn workload(&self) -> Fdtree {
        Fdtree::from(FdtreeSpec {
            scenario: self.scenario,
            levels: self.levels,
            dirs_per_level: self.dirs_per_level,
            files_per_dir: self.files_per_dir,
            file_size: self.file_size,
            block: self.block,
            threads: Some(self.threads),
            fsync: Some(self.fsync),
            stat: self.stat,
            read: self.read,
            tree_list: self.tree_list.clone(),
        })
    }
}
