//! Reports: pure functions of result documents. [`model`] groups results into cells
//! (testbed × workload × phase) and summarises every [`metrics`] metric with [`crate::analysis::stats`];
//! [`export`] renders the model as HTML (with [`plots`]), Markdown, CSV or JSON; [`compare`]
//! sets two groups of results against each other. [`table`] holds the terminal tables.

pub mod cells;
pub mod compare;
pub mod compare_findings;
pub mod compare_machines;
pub mod document;
pub mod durability;
pub mod export;
pub mod findings_table;
pub mod forest;
pub mod format;
pub mod lateness;
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

use crate::base::error::bad_input;
use crate::results::{RunResult, Skipped};

/// Results read for a report or comparison, and the damaged files that were left out.
#[derive(Debug, Default)]
pub struct Loaded {
    pub results: Vec<RunResult>,
    /// `*.json` files of the directories read that are not usable results: damaged (empty,
    /// truncated, not JSON), of a schema version this fsgauge does not read, or not matching
    /// its schema.
    pub skipped: Vec<Skipped>,
    /// Files that record a run already read from another file (a copy, or a path given
    /// twice): `(the file left out, the file counted)`. Each run is counted once.
    pub duplicates: Vec<(PathBuf, PathBuf)>,
    /// `*.json` documents of the directories read that have no `schema` key: not results.
    pub foreign: Vec<PathBuf>,
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
            .chain(self.foreign.iter().map(|f| {
                format!(
                    "{} has no \"schema\" key, so it is not an fsgauge result and was left out (move it out of the results directory to silence this)",
                    f.display()
                )
            }))
            .collect()
    }

    /// With `strict`, a skipped file is bad input (exit 2).
    pub fn check_strict(&self, strict: bool) -> Result<()> {
        if strict && !self.skipped.is_empty() {
            let list: Vec<String> = self.skipped.iter().map(|s| s.to_string()).collect();
            return Err(bad_input(format!(
                "--strict: {} damaged or unreadable result file(s): {}; remove them or re-run those runs",
                list.len(),
                list.join("; ")
            )));
        }
        Ok(())
    }
}

/// Reads results from files and directories (each directory's `*.json`, not recursive, through
/// [`crate::results::load_dir`]), in a stable order; each path must exist and hold at least
/// one result. Files in a directory that are not usable results (damaged, of another schema
/// version, not matching the schema) are returned in [`Loaded::skipped`]; a file given by
/// name that is not a usable result is an error.
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
        crate::base::signals::check()?;
        let md = std::fs::metadata(p).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
        if md.is_dir() {
            // A file in a directory that is not a usable result — damaged, of a schema version
            // this fsgauge does not read, or not matching its schema — is left out with a
            // warning naming it (refused under --strict), as a file given by name is refused.
            let dir = crate::results::load_dir(p).map_err(|e| bad_input(format!("{e:#}")))?;
            if dir.results.is_empty() {
                return Err(bad_input(format!(
                    "{} holds no fsgauge result files (*.json with a schema tag){}{}",
                    p.display(),
                    if dir.skipped.is_empty() {
                        String::new()
                    } else {
                        let list: Vec<String> = dir.skipped.iter().map(|s| s.to_string()).collect();
                        format!("; damaged: {}", list.join("; "))
                    },
                    if dir.foreign.is_empty() {
                        String::new()
                    } else {
                        let list: Vec<String> = dir
                            .foreign
                            .iter()
                            .map(|f| f.display().to_string())
                            .collect();
                        format!("; without a \"schema\" key: {}", list.join(", "))
                    }
                )));
            }
            for f in dir.results {
                keep(&mut out, f.path, f.result);
            }
            out.skipped.extend(dir.skipped);
            out.foreign.extend(dir.foreign);
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
