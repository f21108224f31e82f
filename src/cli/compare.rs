//! `fsgauge compare BASE NEW`: two sets of results, metric by metric, with Welch's t-test.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Result;
use clap::Args;

use crate::report::compare::compare;

#[derive(Debug, Args)]
pub struct CompareCmd {
    /// The base results: a result file or a directory of them.
    pub base: PathBuf,
    /// The new results: a result file or a directory of them.
    pub new: PathBuf,
    /// table (terminal), md or json.
    #[arg(long, value_name = "table|md|json", default_value = "table")]
    pub format: CompareFormat,
}

/// Output of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Md,
    Json,
}

impl FromStr for CompareFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Self::Table),
            "md" | "markdown" => Ok(Self::Md),
            "json" => Ok(Self::Json),
            _ => Err(format!("unknown format {s:?}; use table, md or json")),
        }
    }
}

pub fn run(c: CompareCmd) -> Result<ExitCode> {
    let base = crate::report::load_results(std::slice::from_ref(&c.base))?;
    let new = crate::report::load_results(std::slice::from_ref(&c.new))?;
    let cmp = compare(base, new)?;
    match c.format {
        CompareFormat::Table => print!("{}", crate::report::table::text(&cmp.table())),
        CompareFormat::Md => print!("{}", crate::report::export::md_table(&cmp.table())),
        CompareFormat::Json => println!("{}", serde_json::to_string_pretty(&cmp)?),
    }
    Ok(ExitCode::SUCCESS)
}
