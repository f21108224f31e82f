//! `fsgauge compare BASE NEW`: two sets of results, metric by metric, with Welch's t-test.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::OutputArgs;
use crate::analysis::report::compare::compare;
use crate::analysis::report::compare_findings::compare_findings;
use crate::analysis::report::document::Page;
use crate::base::error::bad_input;
use crate::results::RunResult;

#[derive(Debug, Args)]
pub struct CompareCmd {
    /// The base results: a result file, a directory of them, or a store query
    /// `store:KEY=VALUE,…` (keys as `fsgauge history --where`; needs --store).
    pub base: PathBuf,
    /// The new results: a result file, a directory of them, or a store query.
    pub new: PathBuf,
    /// Use only the base results of this testbed label (so both sides can be one study's
    /// results directory).
    #[arg(long, value_name = "LABEL")]
    pub base_testbed: Option<String>,
    /// Use only the new results of this testbed label.
    #[arg(long, value_name = "LABEL")]
    pub new_testbed: Option<String>,
    /// Compare the two sets' findings instead of their metrics: do two runs of one study
    /// (another kernel, another machine, the same machine beside a build) reach the same
    /// answers? Per question and disk: both ratios with their 95% intervals and decisions,
    /// whether the new ratio lies inside the base's interval, and new / base of the two
    /// ratios with its 95% interval ("agree" when it holds 1). Each finding is decided as
    /// `report` decides it, on the disk's clock on an emulated disk.
    #[arg(long, conflicts_with_all = ["base_testbed", "new_testbed"])]
    pub findings: bool,
    /// --format: table (terminal), json (every row with its figures), csv (one line per row,
    /// full precision), md or html.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Refuse (exit 2) when a result file in a directory is damaged (empty, truncated, not
    /// JSON) or of a schema version this fsgauge does not read, instead of warning and leaving
    /// it out.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

/// Reads one side, warning about (or, with --strict, refusing) damaged files.
fn load_side(
    path: &std::path::Path,
    strict: bool,
    store: &super::store::StoreArg,
) -> Result<Vec<RunResult>> {
    let paths = super::store::expand(&[path.to_path_buf()], store)?;
    let loaded = crate::analysis::report::load_results(&paths)?;
    loaded.check_strict(strict)?;
    for w in loaded.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(loaded.results)
}

/// The results of one testbed label, when one is asked for.
fn only(results: Vec<RunResult>, label: Option<&str>, flag: &str) -> Result<Vec<RunResult>> {
    let Some(label) = label else {
        return Ok(results);
    };
    let mut labels: Vec<String> = results.iter().map(|r| r.testbed.label.clone()).collect();
    labels.sort();
    labels.dedup();
    let kept: Vec<RunResult> = results
        .into_iter()
        .filter(|r| r.testbed.label == label)
        .collect();
    if kept.is_empty() {
        return Err(bad_input(format!(
            "{flag} {label:?}: no results of that testbed; testbeds: {}",
            labels.join(", ")
        )));
    }
    Ok(kept)
}

pub fn run(c: CompareCmd) -> Result<ExitCode> {
    let base = only(
        load_side(&c.base, c.strict, &c.store)?,
        c.base_testbed.as_deref(),
        "--base-testbed",
    )?;
    let new = only(
        load_side(&c.new, c.strict, &c.store)?,
        c.new_testbed.as_deref(),
        "--new-testbed",
    )?;
    let (mut base, mut new) = (base, new);
    crate::workload::registry::declare_missing_metrics(&mut base);
    crate::workload::registry::declare_missing_metrics(&mut new);
    if c.findings {
        let cmp = compare_findings(&base, &new)?;
        let preface = crate::results::differ_text(&cmp.environment) + &cmp.summary_text();
        let page = Page::new("fsgauge compare --findings", &cmp)?
            .preface(preface)
            .table(cmp.table())
            .csv(Some(cmp.csv()));
        c.out.print(page)?;
        return Ok(ExitCode::SUCCESS);
    }
    let cmp = compare(base, new)?;
    let page = Page::new("fsgauge compare", &cmp)?
        .preface(cmp.environment_text() + &cmp.machines_text())
        .table(cmp.table())
        .csv(Some(cmp.csv()));
    c.out.print(page)?;
    Ok(ExitCode::SUCCESS)
}
