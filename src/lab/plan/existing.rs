//! What a results directory already holds when a plan runs: the results it reuses (by spec
//! hash, under `--resume` and for the blocks of a Slurm array), the damaged files it sets
//! aside, and how often a run another process disturbed is made.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;

use crate::results::{ResultFile, RunResult};

/// Results in a directory by spec hash; files that do not read as results are skipped (a
/// results directory may hold other things).
pub fn existing_results(dir: &Path) -> Result<HashMap<String, RunResult>> {
    Ok(existing_files(dir)?
        .into_iter()
        .map(|(h, f)| (h, f.result))
        .collect())
}

/// [`existing_results`] with the files they were read from.
pub(super) fn existing_files(dir: &Path) -> Result<HashMap<String, ResultFile>> {
    let mut out = HashMap::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    // A file that is not a usable result is not reused: its run is made again.
    for f in crate::results::load_dir(dir)?.results {
        out.insert(f.result.spec_hash.clone(), f);
    }
    Ok(out)
}

/// How often a run whose phases another process disturbed is made (the first time included).
pub const DISTURBED_ATTEMPTS: u32 = 3;

/// Under `--resume`, a `*.json` of the results directory that is not a usable result (damaged,
/// or of another schema) is renamed to `NAME.damaged` with a warning: its run is made again,
/// and the file no longer stops `report` on that directory. Nothing is deleted.
pub(super) fn set_aside_damaged(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let skipped = crate::results::load_dir(dir)?.skipped;
    if skipped.is_empty() {
        return Ok(());
    }
    let d = crate::base::atomic::OutDir::open(dir)?;
    for s in skipped {
        let Some(name) = s.path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let mut moved = None;
        for i in 0..100u32 {
            let to = if i == 0 {
                format!("{name}.damaged")
            } else {
                format!("{name}.damaged-{}", i + 1)
            };
            match d.rename_noreplace(name, &to) {
                Ok(()) => {
                    moved = Some(to);
                    break;
                }
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => {
                    return Err(crate::base::sys::fs_error(
                        "rename the damaged result",
                        &s.path.display().to_string(),
                        e,
                    ))
                }
            }
        }
        match moved {
            Some(to) => eprintln!(
                "warning: --resume: {s}; its run is made again, and the file is kept as {}",
                dir.join(to).display()
            ),
            None => anyhow::bail!(
                "--resume: {s}; it could not be set aside (every name {name}.damaged* is taken); move it away"
            ),
        }
    }
    Ok(())
}
