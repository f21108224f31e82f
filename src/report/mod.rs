//! Reports: pure functions of result documents. [`model`] groups results into cells
//! (testbed × workload × phase) and summarises every [`metrics`] metric with [`crate::stats`];
//! [`export`] renders the model as HTML (with [`plots`]), Markdown, CSV or JSON; [`compare`]
//! sets two groups of results against each other. [`table`] holds the terminal tables.

pub mod compare;
pub mod document;
pub mod export;
pub mod forest;
pub mod metrics;
pub mod model;
pub mod output;
pub mod plots;
pub mod png;
pub mod ranks;
pub mod rate;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error::bad_input;
use crate::results::{RunResult, Skipped};

/// Results read for a report or comparison, and the damaged files that were left out.
#[derive(Debug, Default)]
pub struct Loaded {
    pub results: Vec<RunResult>,
    /// Damaged `*.json` files of the directories read (empty, truncated, not JSON).
    pub skipped: Vec<Skipped>,
    /// Files that record a run already read from another file (a copy, or a path given
    /// twice): `(the file left out, the file counted)`. Each run is counted once.
    pub duplicates: Vec<(PathBuf, PathBuf)>,
}

impl Loaded {
    /// One warning per skipped file, saying what to do about it.
    pub fn warnings(&self) -> Vec<String> {
        self.skipped
            .iter()
            .map(|s| {
                format!("skipped {s}; its run is not counted (remove or re-run it; --strict makes this an error)")
            })
            .chain(self.duplicates.iter().map(|(dup, first)| {
                format!(
                    "{} records the same run as {} (a copy, or given twice); it is counted once",
                    dup.display(),
                    first.display()
                )
            }))
            .collect()
    }

    /// With `strict`, a skipped file is bad input (exit 2).
    pub fn check_strict(&self, strict: bool) -> Result<()> {
        if strict && !self.skipped.is_empty() {
            let list: Vec<String> = self.skipped.iter().map(|s| s.to_string()).collect();
            return Err(bad_input(format!(
                "--strict: {} damaged result file(s): {}; remove them or re-run those runs",
                list.len(),
                list.join("; ")
            )));
        }
        Ok(())
    }
}

/// Reads results from files and directories (each directory's `*.json`, not recursive, through
/// [`crate::results::load_dir`]), in a stable order; each path must exist and hold at least
/// one result. Damaged files in a directory are returned in [`Loaded::skipped`]; a file that
/// claims to be a result but is of another schema, or does not match it, is an error.
pub fn load_results(paths: &[PathBuf]) -> Result<Loaded> {
    let mut out = Loaded::default();
    // Each run once, by its identity (see RunResult::identity), in the order first read.
    let mut seen: std::collections::HashMap<String, PathBuf> = std::collections::HashMap::new();
    let mut keep = |out: &mut Loaded, path: PathBuf, r: RunResult| match seen.entry(r.identity()) {
        std::collections::hash_map::Entry::Occupied(o) => {
            out.duplicates.push((path, o.get().clone()));
        }
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(path);
            out.results.push(r);
        }
    };
    for p in paths {
        crate::signals::check()?;
        let md = std::fs::metadata(p).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
        if md.is_dir() {
            let dir = crate::results::load_dir(p).map_err(|e| bad_input(format!("{e:#}")))?;
            if let Some(s) = dir.skipped.iter().find(|s| !s.damaged) {
                return Err(bad_input(s.to_string()));
            }
            if dir.results.is_empty() {
                return Err(bad_input(format!(
                    "{} holds no fsgauge result files (*.json with a schema tag){}",
                    p.display(),
                    if dir.skipped.is_empty() {
                        String::new()
                    } else {
                        let list: Vec<String> = dir.skipped.iter().map(|s| s.to_string()).collect();
                        format!("; damaged: {}", list.join("; "))
                    }
                )));
            }
            for f in dir.results {
                keep(&mut out, f.path, f.result);
            }
            out.skipped.extend(dir.skipped);
        } else {
            let r = load_one(p)?;
            keep(&mut out, p.clone(), r);
        }
    }
    Ok(out)
}

fn load_one(p: &Path) -> Result<RunResult> {
    crate::results::load(p).map_err(|e| bad_input(format!("{e:#}")))
}
