//! `devices check`: runs the check on the target and prints measured against modelled, as a
//! page through the one exporter (every `--format`), on stdout or to `-o FILE`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use super::OutputArgs;
use crate::analysis::report::export::{self, Format};
use crate::base::outfile::OutFile;
use crate::device::calibrate::check::CheckOptions;
use crate::device::calibrate::page;
use crate::device::calibrate::target::{self, TargetSpec};

pub fn run(
    spec: &TargetSpec<'_>,
    opts: &CheckOptions,
    out: &OutputArgs,
    output: Option<&Path>,
) -> Result<ExitCode> {
    // Where the page goes is settled before the benchmarks run: a bad place is refused (exit
    // 2) and nothing is made.
    let file = output.map(|p| OutFile::resolve(p, "-o")).transpose()?;
    let format = out.chosen().unwrap_or_else(|| {
        output
            .and_then(|o| o.extension())
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse().ok())
            .unwrap_or(Format::Table)
    });
    let report = target::check(spec, opts)?;
    let doc = page::page(&report)?.into();
    match file {
        None => export::print(&doc, format)?,
        Some(f) => {
            f.write(&export::render(&doc, format)?)?;
            if !out.quiet && !f.is_stream() {
                eprintln!("devices check written to {}", f.shown().display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
