//! Reports: pure functions of result documents. [`model`] groups results into cells
//! (testbed × workload × phase) and summarises every [`metrics`] metric with [`crate::stats`];
//! [`export`] renders the model as HTML (with [`plots`]), Markdown, CSV or JSON; [`compare`]
//! sets two groups of results against each other. [`table`] holds the terminal tables.

pub mod compare;
pub mod export;
pub mod metrics;
pub mod model;
pub mod output;
pub mod plots;
pub mod png;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error::bad_input;
use crate::results::RunResult;

/// Reads results from files and directories (each directory's `*.json`, not recursive), in a
/// stable order; each path must exist and hold at least one result.
pub fn load_results(paths: &[PathBuf]) -> Result<Vec<RunResult>> {
    let mut out = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
        if md.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| bad_input(format!("{}: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|e| e == "json"))
                .filter(|f| {
                    !f.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            files.sort();
            let before = out.len();
            for f in files {
                // A results directory may also hold other JSON (a report exported next to
                // the results): only documents with a schema tag are results.
                let bytes =
                    std::fs::read(&f).map_err(|e| bad_input(format!("{}: {e}", f.display())))?;
                let is_result = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .is_some_and(|v| v.get("schema").is_some());
                if is_result {
                    out.push(load_one(&f)?);
                }
            }
            if out.len() == before {
                return Err(bad_input(format!(
                    "{} holds no fsgauge result files (*.json with a schema tag)",
                    p.display()
                )));
            }
        } else {
            out.push(load_one(p)?);
        }
    }
    Ok(out)
}

fn load_one(p: &Path) -> Result<RunResult> {
    crate::results::load(p).map_err(|e| bad_input(format!("{e:#}")))
}
