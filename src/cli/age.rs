//! `fsgauge age`: age a fresh testbed (or a directory) to usage checkpoints — fill, round-robin
//! append or churn — and print each checkpoint's figures. Parsing and printing only; the work
//! is in [`crate::age`].

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::{RunArgs, TestbedArgs};
use crate::age::{pct_label, Age, AgeMode, AgeParams, DeleteOrder, SizeDist, TreeShape};
use crate::error::bad_input;
use crate::report::table::format_rate;
use crate::results::RunResult;
use crate::units::{format_bytes_human, parse_list, Size};

#[derive(Debug, Args)]
pub struct AgeCmd {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Usage checkpoints: percentages of the filesystem's blocks (statvfs), ascending.
    #[arg(
        long,
        value_name = "PCT,...",
        default_value = "25,50,75,99",
        help_heading = "Aging"
    )]
    pub usage: String,
    /// fill: create files until each checkpoint; append: create the N×C tree, then append to
    /// its files round-robin; churn: fill, then delete and create at steady fullness.
    #[arg(
        long,
        value_name = "fill|append|churn",
        default_value = "fill",
        help_heading = "Aging"
    )]
    pub mode: AgeMode,
    /// File-size distribution: agrawal, impressions, loizides-1g, fixed:SIZE, uniform:MIN..MAX,
    /// or a CSV file of size,weight rows (see --list-dists).
    #[arg(
        long,
        value_name = "NAME|FILE",
        default_value = "agrawal",
        help_heading = "Aging"
    )]
    pub dist: String,
    /// Tree shape: N directories × C files each.
    #[arg(
        long,
        value_name = "NxC",
        default_value = "10x100",
        help_heading = "Aging"
    )]
    pub tree: TreeShape,
    /// Depths of the N directories: fixed:D, uniform:A..B, poisson:L or impressions.
    #[arg(long, value_name = "NAME", help_heading = "Aging")]
    pub depth_dist: Option<String>,
    /// Bytes per append (append mode).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "4K",
        help_heading = "Aging"
    )]
    pub append: Size,
    /// Draw each append's size from this distribution instead (append mode).
    #[arg(long, value_name = "NAME|FILE", help_heading = "Aging")]
    pub append_dist: Option<String>,
    /// Append mode: fallocate every file to its expected final length and truncate it back to
    /// its first block before appending (the study's "with preallocation" runs).
    #[arg(long, help_heading = "Aging")]
    pub prealloc: bool,
    /// Churn mode: write this multiple of the filesystem size after filling, e.g. 3x.
    #[arg(long, value_name = "Nx", default_value = "3x", value_parser = parse_multiple, help_heading = "Aging")]
    pub churn: f64,
    /// Churn mode: delete the oldest file first or one at random.
    #[arg(
        long,
        value_name = "oldest|random",
        default_value = "oldest",
        help_heading = "Aging"
    )]
    pub delete: DeleteOrder,
    /// Allocate with fallocate instead of writing data (fast; delayed allocation does not act).
    #[arg(long, help_heading = "Aging")]
    pub fallocate_only: bool,
    /// Size of each write(2).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "1M",
        help_heading = "Aging"
    )]
    pub block: Size,
    /// Print the built-in distributions with their parameters and exit.
    #[arg(long, help_heading = "Aging")]
    pub list_dists: bool,
}

fn parse_multiple(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches(['x', 'X']);
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{s:?} is not a positive multiple like 3x or 0.5x"))
}

impl AgeCmd {
    /// The validated aging parameters.
    pub fn params(&self) -> Result<AgeParams> {
        let usage: Vec<f64> =
            parse_list(&self.usage).map_err(|e| bad_input(format!("--usage: {e}")))?;
        let p = AgeParams {
            usage,
            mode: self.mode,
            dist: self.dist.clone(),
            tree: self.tree,
            depth_dist: self.depth_dist.clone(),
            append: self.append.bytes(),
            append_dist: self.append_dist.clone(),
            prealloc: self.prealloc,
            churn: self.churn,
            delete: self.delete,
            fallocate_only: self.fallocate_only,
            block: self.block.bytes(),
        };
        p.validate()?;
        Ok(p)
    }
}

/// The checkpoint table of aging results.
pub fn checkpoint_table(results: &[RunResult]) -> String {
    let headers = [
        "testbed",
        "checkpoint",
        "usage %",
        "files",
        "bytes",
        "write KiB/s",
        "ext/file",
        "layout",
        "free ext",
        "largest free",
    ];
    let mut rows = Vec::new();
    let mut digests = Vec::new();
    for r in results {
        for ph in &r.phases {
            let x = |k: &str| ph.extra.get(k).copied();
            let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
            rows.push(vec![
                r.testbed.label.clone(),
                ph.name.clone(),
                opt(x("usage_pct"), &|v| format!("{v:.1}")),
                opt(x("files"), &|v| format!("{v:.0}")),
                opt(x("bytes"), &format_bytes_human),
                opt(x("write_kbps"), &format_rate),
                opt(x("extents_per_file"), &|v| format!("{v:.2}")),
                opt(x("layout_score"), &|v| format!("{v:.3}")),
                opt(x("free_extents"), &|v| format!("{v:.0}")),
                opt(x("largest_free_share"), &|v| format!("{:.1}%", v * 100.0)),
            ]);
        }
        if let Some(m) = r.layout.as_ref().and_then(|l| l.get("manifest")) {
            digests.push(format!(
                "{}: manifest sha256 {} ({} operations, seed {})",
                r.testbed.label,
                m.get("sha256").and_then(|v| v.as_str()).unwrap_or("?"),
                m.get("ops").and_then(|v| v.as_u64()).unwrap_or(0),
                r.seed
            ));
        }
    }
    let mut out = render(&headers, &rows);
    for d in digests {
        out.push_str(&d);
        out.push('\n');
    }
    out
}

/// A plain aligned table: first column left, the others right.
pub(crate) fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == 0 {
                s.push_str(&format!("{c:<width$}", width = w[0]));
            } else {
                s.push_str(&format!("  {c:>width$}", width = w[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

pub fn run(cmd: AgeCmd) -> Result<ExitCode> {
    if cmd.list_dists {
        for (name, about) in crate::age::dist::builtin_list() {
            println!("{name:<18} {about}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let params = cmd.params()?;
    let place = cmd.testbed.place()?;
    if let Some(spec) = cmd.testbed.spec()? {
        params.check_fits(spec.size, 4096)?;
    }
    // Parse once more for the file-distribution case so a bad file fails before anything.
    SizeDist::parse(&params.dist)?;
    let outcomes = crate::runner::run(&place, &Age(params.clone()), &cmd.run.options())?;
    cmd.run.print(&outcomes, checkpoint_table)?;
    if !cmd.run.output.silent() {
        for o in &outcomes {
            if let Some(last) = o.result.phases.last() {
                if last.extra.get("enospc").copied().unwrap_or(0.0) > 0.0 {
                    eprintln!(
                        "note: {} stopped by ENOSPC at {:.1}% (target {}%)",
                        o.result.testbed.label,
                        last.extra.get("usage_pct").copied().unwrap_or(0.0),
                        pct_label(last.extra.get("usage_target_pct").copied().unwrap_or(0.0))
                    );
                }
            }
        }
    }
    let results: Vec<RunResult> = outcomes.into_iter().map(|o| o.result).collect();
    crate::age::check_checkpoints_reached(&results)?;
    Ok(ExitCode::SUCCESS)
}
