//! `fsgauge read PATH`: the fragmentation study's read test on an existing tree. Parsing and
//! printing only; the work is in [`crate::workload::readtest`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::analysis::report::output::{render_results, ResultViews};
use crate::analysis::report::table::format_rate;
use crate::base::units::format_bytes_human;
use crate::cli::common::StepArgs;
use crate::lab::runner::params::Cold;
use crate::measure::Progress;
use crate::results::{write_result, RunResult};
use crate::workload::readtest::{in_place, ReadTest};

#[derive(Debug, Args)]
pub struct ReadCmd {
    /// The tree to read.
    pub path: PathBuf,
    // The workload's parameters, as a plan's `[[workload]] kind = "read"` gives them.
    #[command(flatten)]
    pub test: ReadTest,
    #[command(flatten)]
    pub cold: Cold,
    #[command(flatten)]
    pub step: StepArgs,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

/// The read table: one row per phase.
pub fn read_table(r: &RunResult) -> String {
    let headers = [
        "phase",
        "files",
        "bytes",
        "elapsed",
        "read KiB/s",
        "total KiB/s",
        "stat/s",
    ];
    let rows: Vec<Vec<String>> = r
        .phases
        .iter()
        .map(|ph| {
            // Elapsed and rates on the disk's clock on an emulated disk (PhaseResult::times).
            let t = ph.times();
            let x = |k: &str| ph.extra.get(k).copied();
            let per_s = |k: &str| x(k).map(|v| t.rate(v, crate::results::clock::Clock::Disk));
            let rate = |v: Option<f64>| v.map_or("-".into(), format_rate);
            vec![
                ph.name.clone(),
                x("files").map_or("-".into(), |v| format!("{v:.0}")),
                x("bytes").map_or("-".into(), format_bytes_human),
                format!("{:.3}s", t.disk_s),
                rate(per_s("read_kbps")),
                rate(per_s("total_kbps")),
                rate(per_s("meta_files_per_s").or(per_s("files_per_s"))),
            ]
        })
        .collect();
    super::age::render(&headers, &rows)
}

pub fn run(cmd: ReadCmd) -> Result<ExitCode> {
    let test = ReadTest {
        path: Some(cmd.path.clone()),
        ..cmd.test.clone()
    };
    let seed = cmd.step.seed();
    let cold = cmd.cold.for_read();
    let (tree, test) = in_place(&cmd.path, &test, cold)?;
    let mut store = super::store::open_for_run(&cmd.store, false)?;
    let result = crate::lab::runner::run_in_place(
        &tree,
        &test,
        seed,
        cold,
        Progress::new(cmd.step.output.silent()),
    )?;
    let file = write_result(&cmd.step.out.dir, &result)?;
    let quiet = cmd.step.output.silent();
    super::store::index_files(
        store.as_mut(),
        std::slice::from_ref(&file),
        &cmd.step.out.dir,
        quiet,
    );
    let format = cmd.step.output.format();
    let views = ResultViews {
        table: &|r: &[RunResult]| r.iter().map(read_table).collect(),
        csv: None,
    };
    print!(
        "{}",
        render_results(std::slice::from_ref(&result), format, &views, false)?
    );
    if !format.is_machine() {
        for w in &result.errors {
            eprintln!("warning: {w}");
        }
    }
    if !cmd.step.output.quiet {
        eprintln!("result file: {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}
