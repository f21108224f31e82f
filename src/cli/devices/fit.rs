//! `devices fit`: fits a profile to the target and prints it as a page through the one
//! exporter (the profile file as text; the check, the fitted seek curve and the comparison as
//! tables), with the measurements on stderr for a terminal; writes the profile with `--out`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::OutputArgs;
use crate::device::calibrate::check::CheckOptions;
use crate::device::calibrate::fit;
use crate::device::calibrate::page::{fit_page, fit_text, report_text};
use crate::device::calibrate::target::TargetSpec;

pub fn run(
    spec: &TargetSpec<'_>,
    opts: &CheckOptions,
    name: Option<&str>,
    out_file: Option<&Path>,
    out: &OutputArgs,
) -> Result<ExitCode> {
    // Where the profile goes is settled before the benchmarks run.
    let target = out_file
        .map(|p| crate::base::outfile::OutFile::resolve(p, "--out"))
        .transpose()?;
    let report = fit::run(spec, opts, name)?;
    if let Some(t) = &target {
        t.write(report.profile_toml.as_bytes())
            .context("writing the fitted profile")?;
    }
    if !out.silent() {
        eprint!("{}", report_text(&report.check));
        eprint!("{}", fit_text(&report));
        if let Some(path) = out_file {
            eprintln!(
                "wrote {}: check it with `fsgauge devices show {}`",
                path.display(),
                path.display()
            );
        }
    }
    out.print(fit_page(&report)?)?;
    Ok(ExitCode::SUCCESS)
}
