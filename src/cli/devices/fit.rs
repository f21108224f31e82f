//! `devices fit`: fits a profile to the target, prints it (and the comparison with an
//! emulated profile's own figures), writes it with `--out`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::OutputArgs;
use crate::calibrate::check::CheckOptions;
use crate::calibrate::fit::{self, FitReport};
use crate::calibrate::target::TargetSpec;
use crate::report::output::OutputFormat;

pub fn run(
    spec: &TargetSpec<'_>,
    opts: &CheckOptions,
    name: Option<&str>,
    out_file: Option<&Path>,
    out: &OutputArgs,
) -> Result<ExitCode> {
    // Where the profile goes is settled before the benchmarks run.
    let target = out_file
        .map(|p| crate::outfile::OutFile::resolve(p, "--out"))
        .transpose()?;
    let report = fit::run(spec, opts, name)?;
    if let Some(t) = &target {
        t.write(report.profile_toml.as_bytes())
            .context("writing the fitted profile")?;
    }
    if out.format() == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !out.quiet {
        eprint!("{}", crate::calibrate::page::report_text(&report.check));
        eprint!("{}", fit_text(&report));
        if let Some(path) = out_file {
            eprintln!(
                "wrote {}: check it with `fsgauge devices show {}`",
                path.display(),
                path.display()
            );
        }
    }
    print!("{}", report.profile_toml);
    Ok(ExitCode::SUCCESS)
}

fn fit_text(r: &FitReport) -> String {
    let f = &r.fitted;
    let mut s = format!(
        "\nfitted seek curve ({} cylinders in the fitted geometry; time less the fixed part and half a revolution)\n{:>10}  {:>10}  {:>6}\n",
        f.cylinders, "cylinders", "seek", "pairs"
    );
    for p in &f.seek {
        s.push_str(&format!(
            "{:>10.0}  {:>7.3} ms  {:>6}\n",
            p.cylinders, p.seek_ms, p.pairs
        ));
    }
    for n in &f.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    if !r.comparison.is_empty() {
        s.push_str(&format!(
            "\nfitted against profile {}\n{:<18}  {:>14}  {:>14}  {:>7}\n",
            r.template, "parameter", "fitted", "profile", "error"
        ));
        for c in &r.comparison {
            s.push_str(&format!(
                "{:<18}  {:>14.3}  {:>14.3}  {:>+6.1}%\n",
                c.parameter,
                c.fitted,
                c.profile,
                c.error * 100.0
            ));
        }
    }
    s.push('\n');
    s
}
