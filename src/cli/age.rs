//! `fsgauge age`: age a fresh testbed (or a directory) to usage checkpoints — fill, round-robin
//! append or churn — and print each checkpoint's figures. Parsing and printing only; the work
//! is in [`crate::workload::age`].

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::{RunArgs, TestbedArgs};
use crate::analysis::report::table::format_rate;
use crate::base::units::format_bytes_human;
use crate::results::RunResult;
use crate::workload::age::{pct_label, Age, AgeParams};
use crate::workload::Workload;

#[derive(Debug, Args)]
pub struct AgeCmd {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    // The workload's parameters, as a plan's `[[workload]] kind = "age"` gives them.
    #[command(flatten)]
    pub params: AgeParams,
    /// Keep the aged filesystem in the image cache under NAME, and start from it instead of
    /// aging again when a later run's aging is the same: the same parameters and seed (give
    /// --seed), filesystem, size, mkfs and mount options, device model and offset, kernel
    /// release and fsgauge version. Each run says which happened ("aged in X s, kept as image
    /// KEY" or "from image KEY in Y s") and its result records the key and the digest of the
    /// starting state (testbed.aged_image). A plan's `[age] keep_image = true` does the same
    /// for its aging. `fsgauge testbed images` lists the cache; its size limit is
    /// FSGAUGE_IMAGE_CACHE_MAX (default a fifth of its filesystem's free space).
    #[arg(long, value_name = "NAME", help_heading = "Aging")]
    pub keep_image: Option<String>,
    /// Print the built-in distributions with their parameters and exit.
    #[arg(long, help_heading = "Aging")]
    pub list_dists: bool,
    #[command(flatten)]
    pub store: super::store::StoreArg,
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

pub fn run(mut cmd: AgeCmd) -> Result<ExitCode> {
    if cmd.list_dists {
        for (name, about) in crate::workload::age::dist::builtin_list() {
            println!("{name:<18} {about}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Validated as a plan's workload is, before anything is made.
    let age = Age(cmd.params);
    age.validate()?;
    cmd.testbed.keeps_image = cmd.keep_image.is_some();
    let place = cmd.testbed.place()?;
    if let Some(spec) = cmd.testbed.spec()? {
        age.0.check_fits(spec.size, 4096)?;
    }
    if let Some(name) = &cmd.keep_image {
        crate::host::ledger::check_name(name)
            .map_err(|e| crate::base::error::bad_input(format!("--keep-image: {e:#}")))?;
    }
    let mut store = cmd.store.open_for(&cmd.run)?;
    let place = cmd.run.admit(place, &age)?;
    let mut opts = cmd.run.options();
    opts.keep_image = cmd.keep_image.clone();
    let outcomes = crate::lab::runner::run(&place, &age, &opts)?;
    let quiet = cmd.run.output.silent();
    super::store::index_written(store.as_mut(), &outcomes, &cmd.run.params.out.dir, quiet);
    cmd.run.print(&outcomes, checkpoint_table)?;
    if !cmd.run.output.silent() {
        for o in &outcomes {
            if let Some(a) = &o.result.testbed.aged_image {
                eprintln!(
                    "note: {} rep {}: {}",
                    o.result.testbed.label,
                    o.result.rep,
                    a.describe()
                );
            }
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
    crate::workload::age::check_checkpoints_reached(&results)?;
    Ok(ExitCode::SUCCESS)
}
