//! `fsgauge study NAME`: multi-testbed studies. `append` is the fragmentation project's append
//! test. Parsing and printing only; the work is in [`crate::lab::study`].

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::analysis::report::output::{render_results, ResultViews};
use crate::base::units::Size;
use crate::cli::common::StepArgs;
use crate::lab::study::append::AppendStudy;
use crate::measure::Progress;
use crate::results::RunResult;
use crate::testbed::{FsKind, TestbedParams, TestbedSpec};
use crate::workload::params::CommaList;
use crate::workload::readtest::ReadPhase;

#[derive(Debug, Subcommand)]
pub enum StudyCmd {
    /// The append test: per filesystem, append round-robin to N files until each usage
    /// checkpoint, copy the tree onto a fresh filesystem of the same size and options, and
    /// compare layout and read speed of the aged tree and its fresh copy.
    Append(AppendArgs),
}

#[derive(Debug, Args)]
// The study's filesystems are smaller than a bench testbed: four of them are built at once.
#[command(mut_arg(crate::testbed::params::SIZE_ID, |a| a.default_value("1G")))]
pub struct AppendArgs {
    /// Filesystems to compare.
    #[arg(long, value_name = "LIST", default_value = "ext2,ext4,xfs,btrfs")]
    pub fs: CommaList<FsKind>,
    /// How every filesystem is built (the study's testbeds are 1G unless --fs-size says).
    #[command(flatten)]
    pub testbed: TestbedParams,
    /// Usage checkpoints, percent, ascending.
    #[arg(long, value_name = "PCT,...", default_value = "25,50,75,99")]
    pub usage: CommaList<f64>,
    /// Append sizes; the study runs once per size.
    #[arg(long, value_name = "SIZE,...", default_value = "4K")]
    pub append: CommaList<Size>,
    /// Files in total.
    #[arg(long, default_value_t = 5000)]
    pub files: u64,
    /// Directories the files are spread over (the study's 1x1 is one directory).
    #[arg(long, default_value_t = 1)]
    pub dirs: u64,
    /// Preallocate each file to its expected final length and truncate it back to its first
    /// block before appending.
    #[arg(long)]
    pub prealloc: bool,
    /// Read phases on both trees.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "walk,random,blockorder,stat"
    )]
    pub read_phases: CommaList<ReadPhase>,
    /// Keep every filesystem's aging in the image cache under NAME, one image per usage
    /// checkpoint (right after the aging step), and start from them instead of aging again
    /// when a later run's aging is the same and every checkpoint of it is kept: the same
    /// parameters and seed (give --seed), filesystem, size, options, device model, kernel and
    /// fsgauge version. Each checkpoint's record in the result (layout.checkpoints[].aged_image)
    /// says which happened, with the key and the digest of the starting state.
    #[arg(long, value_name = "NAME")]
    pub keep_image: Option<String>,
    #[command(flatten)]
    pub step: StepArgs,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

impl AppendArgs {
    pub fn study(&self) -> Result<AppendStudy> {
        let testbeds = self
            .fs
            .iter()
            .map(|&fs| TestbedSpec::build(self.testbed.input(fs, None, None)?))
            .collect::<Result<Vec<_>>>()?;
        let seed = self.step.seed();
        Ok(AppendStudy {
            testbeds,
            usage: self.usage.to_vec(),
            append: self.append.iter().map(|s| s.bytes()).collect(),
            files: self.files,
            dirs: self.dirs,
            prealloc: self.prealloc,
            seed,
            read_phases: self.read_phases.to_vec(),
            keep_image: self.keep_image.clone(),
        })
    }
}

/// The study's results on the terminal: the table the append study registered with its kind
/// (aged against fresh per testbed and usage checkpoint), the same one `fsgauge report` shows.
pub fn study_table(results: &[RunResult]) -> String {
    crate::base::text::Table::texts(&crate::lab::study::append::TABLES.of(results))
}

pub fn run(cmd: StudyCmd) -> Result<ExitCode> {
    match cmd {
        StudyCmd::Append(a) => {
            let study = a.study()?;
            let format = a.step.output.format();
            let mut store = super::store::open_for_run(&a.store, false)?;
            let dir = &a.step.out.dir;
            let (results, written) = study.run(Some(dir), Progress::new(a.step.output.silent()))?;
            super::store::index_files(store.as_mut(), &written, dir, a.step.output.silent());
            let views = ResultViews {
                table: &study_table,
                csv: None,
            };
            print!("{}", render_results(&results, format, &views, true)?);
            if !format.is_machine() {
                super::common::print_lateness(&results);
                for r in &results {
                    for w in &r.errors {
                        eprintln!("warning: {}: {w}", r.testbed.label);
                    }
                }
            }
            if !a.step.output.quiet {
                eprintln!(
                    "{}",
                    super::common::results_in(&a.step.out.dir, results.len(), "")
                );
            }
            crate::workload::age::check_checkpoints_reached(&results)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
