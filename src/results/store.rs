//! The results directory: one JSON file per run, written atomically (temporary file, fsync,
//! rename), named so that a listing sorts by time.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{RunResult, SCHEMA};
use crate::atomic::write_atomic;

/// A result and where it was read from.
#[derive(Debug, Clone)]
pub struct ResultFile {
    pub path: PathBuf,
    pub result: RunResult,
}

/// Writes a result into `dir` (created if needed) and returns its path.
pub fn write_result(dir: &Path, r: &RunResult) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating results directory {}", dir.display()))?;
    let stamp: String = r
        .started_at
        .chars()
        .filter(|c| c.is_ascii_digit())
        .take(14)
        .collect();
    let name = format!(
        "{stamp}-{}-{}-rep{}-{}.json",
        r.testbed.label,
        r.workload.kind,
        r.rep,
        &r.spec_hash[..r.spec_hash.len().min(10)]
    );
    let path = dir.join(name);
    let mut bytes = serde_json::to_vec_pretty(r)?;
    bytes.push(b'\n');
    // A run stopped before its result is written has no result: the file exists only for runs
    // that finished before the signal, and then it is whole (written atomically).
    crate::signals::test_pause("result");
    crate::signals::check()?;
    write_atomic(&path, &bytes)?;
    crate::signals::note_result_written(&path, r.rep);
    crate::signals::test_pause("result");
    Ok(path)
}

/// Reads one result file, checking the schema tag.
pub fn load(path: &Path) -> Result<RunResult> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => bail!(
            "{} has schema {other:?}; this fsgauge reads {SCHEMA}",
            path.display()
        ),
        None => bail!(
            "{} is not an fsgauge result (no \"schema\" field)",
            path.display()
        ),
    }
    serde_json::from_value(v)
        .with_context(|| format!("{} does not match schema {SCHEMA}", path.display()))
}

/// A `*.json` file of a results directory that was not used as a result.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub path: PathBuf,
    /// Why, with the parse error's line and column where there is one.
    pub why: String,
    /// True when the file is damaged (unreadable, empty, truncated, not JSON); false when it is
    /// a JSON document that claims to be a result but is of another schema or does not match.
    pub damaged: bool,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

/// What a results directory holds: the results, sorted by file name, and the `*.json` files
/// that are not usable results. JSON documents without a `schema` tag (a report exported next
/// to the results) are not results and are in neither list.
#[derive(Debug, Clone, Default)]
pub struct DirResults {
    pub results: Vec<ResultFile>,
    pub skipped: Vec<Skipped>,
}

/// Reads every `*.json` result in a directory (not recursive), sorted by file name; the one
/// place results are read from a directory (reports, comparisons, plan resumption). A file
/// that is not a result is never dropped without a trace: it is listed in
/// [`DirResults::skipped`] with the reason, for the caller to warn about or refuse.
pub fn load_dir(dir: &Path) -> Result<DirResults> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading results directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    let mut out = DirResults::default();
    for path in paths {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                out.skipped.push(Skipped {
                    path,
                    why: format!("cannot be read: {e}"),
                    damaged: true,
                });
                continue;
            }
        };
        let v: serde_json::Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                // serde_json's message ends "at line L column C".
                let why = if bytes.iter().all(u8::is_ascii_whitespace) {
                    format!("is empty ({e})")
                } else {
                    format!("is not valid JSON (truncated or damaged): {e}")
                };
                out.skipped.push(Skipped {
                    path,
                    why,
                    damaged: true,
                });
                continue;
            }
        };
        if v.get("schema").is_none() {
            continue;
        }
        match load(&path) {
            Ok(result) => out.results.push(ResultFile { path, result }),
            Err(e) => out.skipped.push(Skipped {
                why: format!("{e:#}")
                    .strip_prefix(&format!("{}", path.display()))
                    .map_or_else(|| format!("{e:#}"), |s| s.trim_start().to_string()),
                path,
                damaged: false,
            }),
        }
    }
    Ok(out)
}
