//! Flags of `fsgauge bench create`.

use clap::Args;

use crate::cli::common::{RunArgs, TestbedArgs};
use crate::units::Size;
use crate::workload::create::Create;
use crate::workload::tree::FsyncMode;

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Files each worker creates (fs_mark -n).
    #[arg(long, default_value_t = 10_000, help_heading = "Workload")]
    pub files: u64,
    /// Size of every file (fs_mark -s).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "4K",
        help_heading = "Workload"
    )]
    pub file_size: Size,
    /// Size of each write(2) (fs_mark -w).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "1M",
        help_heading = "Workload"
    )]
    pub block: Size,
    /// Workers started together, each in its own directory w<N> (fs_mark -t); files/s is the
    /// aggregate and each worker's own figures are kept.
    #[arg(long, value_name = "T", default_value_t = 1, help_heading = "Workload")]
    pub threads: u32,
    /// none: no sync; file: fsync before each close (fs_mark's default -S 1); end: one
    /// syncfs per worker after its last file, inside the phase.
    #[arg(
        long,
        value_name = "none|file|end",
        default_value = "none",
        help_heading = "Workload"
    )]
    pub fsync: FsyncMode,
    /// Files per subdirectory of each worker's directory (fs_mark -N); 0 puts them all in it.
    #[arg(long, value_name = "K", default_value_t = 0, help_heading = "Workload")]
    pub files_per_dir: u64,
    #[cfg(feature = "mpi")]
    #[command(flatten)]
    pub mpi: super::mpi::MpiArgs,
}

impl CreateArgs {
    pub fn workload(&self) -> Create {
        Create {
            files: self.files,
            file_size: self.file_size.bytes(),
            block: self.block.bytes(),
            threads: self.threads,
            fsync: self.fsync,
            files_per_dir: self.files_per_dir,
        }
    }
}
