//! `fsgauge run`: the built-in `quick` study — the tree workload on a small loop-mounted ext4
//! image, plus xfs and btrfs where their mkfs is installed, repeated, side by side.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::measure::Progress;
use crate::report::table::side_by_side;
use crate::results::RunResult;
use crate::runner::{Place, RunOptions};
use crate::testbed::{FsKind, TestbedSpec};
use crate::workload::tree::{FsyncMode, Tree};
use crate::workload::ColdMode;

#[derive(Debug, Args)]
pub struct RunCmd {
    /// Repetitions per filesystem.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Seed for every random choice.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Directory for result files.
    #[arg(long, value_name = "DIR", default_value = "fsgauge-results")]
    pub out: PathBuf,
    /// Print the result documents as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// No progress and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Record the block layout of each run's tree and the free space in its result (`layout`).
    #[arg(long)]
    pub layout: bool,
}

/// The quick study's workload: 8 directories × 32 files × 1 MiB, 256 KiB writes.
pub fn quick_workload() -> Tree {
    Tree {
        dirs: 8,
        files: 32,
        file_size: 1 << 20,
        block: 256 << 10,
        fsync: FsyncMode::End,
    }
}

pub fn run(c: RunCmd) -> Result<ExitCode> {
    let wl = quick_workload();
    let root = nix::unistd::geteuid().is_root();
    let progress = Progress::new(c.quiet || c.json);
    let mut places = Vec::new();
    let mut temp = None;
    if root {
        for fs in [FsKind::Ext4, FsKind::Xfs, FsKind::Btrfs] {
            if fs.find_mkfs().is_some() {
                places.push(Place::Testbed(TestbedSpec::new(fs, 1 << 30)));
            } else if !c.quiet {
                eprintln!(
                    "note: {} not installed, skipping {fs} (apt-get install {})",
                    fs.mkfs_program(),
                    fs.package()
                );
            }
        }
        println!(
            "quick study: tree workload ({} dirs x {} files x 1M, fsync at end) on {} (fresh 1G loop images, {} reps, cold caches between phases)",
            wl.dirs,
            wl.files,
            places
                .iter()
                .filter_map(|p| match p {
                    Place::Testbed(s) => Some(s.fs.name()),
                    Place::Dir(_) => None,
                })
                .collect::<Vec<_>>()
                .join(", "),
            c.reps
        );
    } else {
        let dir = std::env::temp_dir().join(format!("fsgauge-quick-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        println!(
            "not root: running the quick study on the temporary directory {} instead of fresh testbeds (run as root to build ext4/xfs/btrfs testbeds)",
            dir.display()
        );
        places.push(Place::Dir(dir.clone()));
        temp = Some(TempDir(dir));
    }
    let opts = RunOptions {
        reps: c.reps,
        seed: c.seed,
        cold: if root { ColdMode::Drop } else { ColdMode::None },
        mem_limit: None,
        mem_charge: None,
        out: Some(c.out.clone()),
        progress,
        layout: c.layout,
    };
    let mut results: Vec<RunResult> = Vec::new();
    for place in &places {
        for o in crate::runner::run(place, &wl, &opts)? {
            results.push(o.result);
        }
    }
    drop(temp);
    if c.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", side_by_side(&results));
        if !c.quiet {
            eprintln!("{} result file(s) in {}", results.len(), c.out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
