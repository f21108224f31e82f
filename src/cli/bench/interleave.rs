//! Flags of `fsgauge bench interleave`.

use clap::Args;

use crate::cli::common::{RunArgs, TestbedArgs};
use crate::units::Size;
use crate::workload::interleave::{Interleave, Order};
use crate::workload::ColdMode;

#[derive(Debug, Args)]
pub struct InterleaveArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Directories under the workload directory.
    #[arg(long, default_value_t = 9890, help_heading = "Workload")]
    pub dirs: u64,
    /// Files in each directory.
    #[arg(long, default_value_t = 14, help_heading = "Workload")]
    pub files: u64,
    /// Size of every file (the study did not say; empty by default).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "0",
        help_heading = "Workload"
    )]
    pub file_size: Size,
    /// interleaved: file 1 in every directory, then file 2 in every directory, … (the study);
    /// grouped: all files of one directory before the next.
    #[arg(
        long,
        value_name = "interleaved|grouped",
        default_value = "interleaved",
        help_heading = "Workload"
    )]
    pub order: Order,
    /// How the cache is made cold before the timed removal (the study rebooted): remount
    /// (testbeds only), drop (sync + drop_caches) or none.
    #[arg(
        long,
        value_name = "remount|drop|none",
        default_value = "remount",
        help_heading = "Workload"
    )]
    pub remove_cold: ColdMode,
    /// Write the tree as found on disk after file_create (one line per entry:
    /// `d<TAB>path` or `f<TAB>size<TAB>path`, relative to the workload directory) to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub tree_list: Option<std::path::PathBuf>,
}

impl InterleaveArgs {
    pub fn workload(&self) -> Interleave {
        Interleave {
            dirs: self.dirs,
            files: self.files,
            file_size: self.file_size.bytes(),
            order: self.order,
            remove_cold: self.remove_cold,
            tree_list: self.tree_list.clone(),
        }
    }
}
