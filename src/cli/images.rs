//! `fsgauge testbed images` (the aged-image cache, `--prune`), `testbed snapshot` and
//! `testbed restore`. Parsing and printing only; the work is in [`crate::testbed::images`].

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::OutputArgs;
use crate::analysis::report::output::listing;
use crate::base::error::bad_input;
use crate::base::units::format_size;
use crate::testbed::images::{self, snapshot, Prune};

#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// Remove entries: those last used longer ago than --older-than, --all, or the one of
    /// KEY (a key or the name it was kept under).
    #[arg(long)]
    pub prune: bool,
    /// With --prune: entries last used longer ago than this (`7d`, `12h`).
    #[arg(long, value_name = "DUR", requires = "prune")]
    pub older_than: Option<String>,
    /// With --prune: every entry.
    #[arg(long, requires = "prune")]
    pub all: bool,
    /// With --prune: the entry of this key or name.
    #[arg(value_name = "KEY", requires = "prune")]
    pub key: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

const HEADERS: [&str; 7] = [
    "key",
    "name",
    "fs",
    "on disk",
    "created",
    "last used",
    "digest",
];

/// `testbed images [--prune ...]`.
pub fn images(a: ImagesArgs) -> Result<ExitCode> {
    if a.prune {
        return prune(&a);
    }
    let entries = images::list()?;
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let m = &e.manifest;
            vec![
                m.key.clone(),
                m.name.clone(),
                m.fs.clone(),
                format_size(m.on_disk),
                m.created.clone(),
                m.last_used.clone(),
                m.digest.chars().take(23).collect(),
            ]
        })
        .collect();
    let mut text = if rows.is_empty() {
        format!("no kept images in {}\n", images::cache_dir().display())
    } else {
        crate::cli::age::render(&HEADERS, &rows)
    };
    let snaps = snapshot::all()?;
    for (tb, snap, size) in &snaps {
        text.push_str(&format!(
            "snapshot {snap} of testbed {tb}: {} on disk\n",
            format_size(*size)
        ));
    }
    let data = serde_json::json!({
        "dir": images::cache_dir(),
        "images": entries.iter().map(|e| &e.manifest).collect::<Vec<_>>(),
        "snapshots": snaps.iter().map(|(t, s, b)| serde_json::json!({"testbed": t, "snapshot": s, "on_disk": b})).collect::<Vec<_>>(),
    });
    a.out
        .print(listing("fsgauge kept images", &data, text, &HEADERS, rows)?)?;
    Ok(ExitCode::SUCCESS)
}

fn prune(a: &ImagesArgs) -> Result<ExitCode> {
    let which = match (&a.older_than, a.all, &a.key) {
        (Some(d), false, None) => Prune::OlderThan(
            crate::base::units::parse_duration(d)
                .map_err(|e| bad_input(format!("--older-than {d}: {e}")))?,
        ),
        (None, true, None) => Prune::All,
        (None, false, Some(k)) => Prune::Named(k.clone()),
        _ => {
            return Err(bad_input(
                "--prune takes one of --older-than DUR, --all or KEY (a key or name `fsgauge testbed images` lists)",
            ))
        }
    };
    let removed = images::prune(&which)?;
    for m in &removed {
        println!(
            "removed image {} ({}, {} on disk)",
            m.key,
            m.name,
            format_size(m.on_disk)
        );
    }
    if removed.is_empty() {
        println!("no kept image removed");
    }
    Ok(ExitCode::SUCCESS)
}

/// `testbed snapshot NAME [--as SNAP]`.
pub fn take(name: &str, snap: Option<&str>) -> Result<ExitCode> {
    crate::base::signals::install();
    let snap = snap.unwrap_or(snapshot::DEFAULT_SNAP);
    let path = snapshot::snapshot(name, snap)?;
    println!(
        "snapshot {snap} of testbed {name}: {} (restore with `fsgauge testbed restore {name} {snap}`)",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `testbed restore NAME [SNAP]`.
pub fn restore(name: &str, snap: Option<&str>) -> Result<ExitCode> {
    crate::base::signals::install();
    let snap = snap.unwrap_or(snapshot::DEFAULT_SNAP);
    snapshot::restore(name, snap)?;
    println!("testbed {name} restored to snapshot {snap}");
    Ok(ExitCode::SUCCESS)
}
