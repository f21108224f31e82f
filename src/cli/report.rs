//! `fsgauge report RESULTS...`: statistics, tables and plots from result files.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::common::OutputArgs;
use crate::analysis::report::export::Format;
use crate::base::error::bad_input;

#[derive(Debug, Args)]
pub struct ReportCmd {
    /// Result files, directories of them, or store queries `store:KEY=VALUE,…` (keys as
    /// `fsgauge history --where`; needs --store).
    #[arg(value_name = "RESULTS", required = true)]
    pub results: Vec<PathBuf>,
    /// Write the report here [default: stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// --format: html (one self-contained page with plots), table (the tables as terminal
    /// text), md, csv (statistics per cell) or json [default: from the -o file's extension,
    /// else html]; --quiet leaves out the notes of where files went.
    #[command(flatten)]
    pub out: OutputArgs,
    /// The testbed label that percentages are against [default: the first testbed].
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// Also write every plot as an SVG file next to the report (FILE.plots/NAME.svg).
    #[arg(long, requires = "output")]
    pub svg: bool,
    /// Also write every plot as a PNG file next to the report (FILE.plots/NAME.png).
    #[arg(long, requires = "output")]
    pub png: bool,
    /// Refuse (exit 2) when a result file in a directory is damaged (empty, truncated, not
    /// JSON) or of a schema version this fsgauge does not read, instead of warning and leaving
    /// it out.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub store: super::store::StoreArg,
}

pub fn run(c: ReportCmd) -> Result<ExitCode> {
    let format = match (c.out.chosen(), &c.output) {
        (Some(f), _) => f,
        (None, Some(o)) => o
            .extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse().ok())
            .unwrap_or(Format::Html),
        (None, None) => Format::Html,
    };
    // Where the report goes is settled before any work: a bad place is refused (exit 2) and
    // nothing is read or made.
    let target = c
        .output
        .as_deref()
        .map(|p| crate::base::outfile::OutFile::resolve(p, "-o"))
        .transpose()?;
    if (c.svg || c.png) && target.as_ref().is_some_and(|t| t.is_stream()) {
        return Err(bad_input(
            "--svg and --png write files beside the report: give -o a file, not a stream",
        ));
    }
    let paths = super::store::expand(&c.results, &c.store)?;
    let loaded = crate::analysis::report::load_results(&paths)?;
    loaded.check_strict(c.strict)?;
    let skipped = loaded.warnings();
    for w in &skipped {
        eprintln!("warning: {w}");
    }
    let mut results = loaded.results;
    crate::workload::registry::declare_missing_metrics(&mut results);
    let mut report =
        crate::analysis::report::model::build(results, c.baseline.as_deref(), &kind_tables())?;
    // The report says itself which runs it left out, next to the n it counts per cell.
    report.warnings.splice(0..0, skipped);
    let bytes = format.exporter().report(&report)?;
    let Some(target) = target else {
        use std::io::Write;
        std::io::stdout().write_all(&bytes)?;
        return Ok(ExitCode::SUCCESS);
    };
    target.write(&bytes)?;
    if c.svg || c.png {
        write_plots(&report, &target, c.svg, c.png, c.out.quiet)?;
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if !c.out.quiet && !target.is_stream() {
        eprintln!("report written to {}", target.shown().display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every plot as SVG and/or PNG into `FILE.plots` beside the report file.
fn write_plots(
    report: &crate::analysis::report::model::Report,
    target: &crate::base::outfile::OutFile,
    svg: bool,
    png: bool,
    quiet: bool,
) -> Result<()> {
    let Some(dir) = target.sibling_dir("plots")? else {
        return Err(bad_input(
            "--svg and --png write files beside the report: give -o a file, not a stream",
        ));
    };
    let raster = png.then(crate::analysis::report::png::Rasterizer::new);
    for p in crate::analysis::report::plots::all(report) {
        if svg {
            dir.replace(&format!("{}.svg", p.id), p.svg.as_bytes())?;
        }
        if let Some(r) = &raster {
            let png = r.png(&p.svg).with_context(|| format!("plot {}", p.id))?;
            dir.replace(&format!("{}.png", p.id), &png)?;
        }
    }
    if !quiet {
        eprintln!("plots written to {}", dir.path().display());
    }
    Ok(())
}

/// Every kind's own tables, composed here (the edge) so that the report names no kind: the
/// workload kinds' from the registry, and the studies' that write results of their own kind.
pub fn kind_tables() -> Vec<crate::results::tables::KindTables> {
    let mut all = crate::workload::registry::kind_tables();
    all.push(crate::lab::study::append::TABLES);
    all
}
