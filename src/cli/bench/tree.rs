//! Flags of `fsgauge bench tree`.

use clap::Args;

use crate::cli::common::{RunArgs, TestbedArgs};
use crate::units::Size;
use crate::workload::tree::{FsyncMode, Tree};

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
