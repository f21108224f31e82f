//! A plan's matrix over many machines: one Slurm job array whose task K runs *block* K, one
//! round (repetition K) of every configuration of the plan on one machine, so that each
//! comparison of the plan stays paired within a machine. Slurm's own tools do the scheduling
//! (`sbatch --array`, `squeue`/`sacct`, `scancel`); fsgauge keeps only the record of what it
//! submitted (`fleet.json` in the results directory) and reads progress from the result files.
//! Where there is no Slurm, one Open MPI `mpirun` runs the blocks over its ranks, one per host
//! ([`mpirun`]); the record then says so, and a block is done or missing.
//!
//! A block is done when every run of it has its result in the results directory (the same
//! spec hashes a one-process run of the plan makes); anything else is read from Slurm. A
//! resubmission (`run --resume`) submits only the blocks that are neither done nor still
//! queued or running; a block task skips the runs whose result exists, so nothing finished is
//! made twice.

pub mod mpirun;
pub mod script;
pub mod slurm;
pub mod status;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::base::error::bad_input;
use crate::lab::plan::{self, Plan, Reps};

/// The record's file name in the results directory.
pub const RECORD: &str = "fleet.json";
/// The batch script's file name in the results directory (kept for the record).
pub const SCRIPT: &str = "fleet.sbatch";
/// The directory of the tasks' logs and exit markers in the results directory.
pub const LOGS: &str = "fleet-logs";

/// Where a plan runs: `--on slurm[:PARTITION]` or `--on mpirun[:HOSTFILE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On {
    /// A Slurm job array; the partition when one is named (else Slurm's default).
    Slurm { partition: Option<String> },
    /// One `mpirun` whose ranks (one per host of the hostfile, else on this machine) run the
    /// blocks between them.
    Mpirun { hostfile: Option<PathBuf> },
}

impl std::str::FromStr for On {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, rest) = s.split_once(':').map_or((s, None), |(k, r)| (k, Some(r)));
        match (kind, rest) {
            ("slurm", None) => Ok(On::Slurm { partition: None }),
            ("slurm", Some(p)) if valid_partition(p) => Ok(On::Slurm {
                partition: Some(p.to_string()),
            }),
            ("slurm", Some(p)) => Err(format!(
                "{p:?} is not a Slurm partition name (letters, digits, '-', '_', '.'); give --on slurm:PARTITION as `sinfo -s` lists them, or --on slurm for the default partition"
            )),
            ("mpirun", None) => Ok(On::Mpirun { hostfile: None }),
            ("mpirun", Some(h)) if !h.is_empty() => Ok(On::Mpirun {
                hostfile: Some(PathBuf::from(h)),
            }),
            ("mpirun", Some(_)) => Err(
                "--on mpirun: needs a hostfile's path after the colon; give --on mpirun:HOSTFILE, or --on mpirun for ranks on this machine".into(),
            ),
            _ => Err(format!(
                "{s:?} is not a place to run on; give --on slurm (the default partition), --on slurm:PARTITION, --on mpirun (ranks on this machine) or --on mpirun:HOSTFILE (one rank per host)"
            )),
        }
    }
}

impl std::fmt::Display for On {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            On::Slurm { partition: None } => write!(f, "slurm"),
            On::Slurm { partition: Some(p) } => write!(f, "slurm:{p}"),
            On::Mpirun { hostfile: None } => write!(f, "mpirun"),
            On::Mpirun { hostfile: Some(h) } => write!(f, "mpirun:{}", h.display()),
        }
    }
}

fn valid_partition(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 64
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One block: its number (the array task id, the repetition) and the spec hashes of its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub block: u32,
    pub runs: Vec<String>,
}

/// One submission: the Slurm job id of the array and the blocks (task ids) it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    pub blocks: Vec<u32>,
    pub partition: Option<String>,
    pub submitted_at: String,
}

/// Who starts the blocks of a fleet run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// A Slurm job array (records written before mpirun existed have no launcher: Slurm).
    #[default]
    Slurm,
    /// One `mpirun` the submitting process waits for: a block is done or missing, no queue.
    Mpirun,
}

/// `fleet.json`: the plan, its blocks and every array submitted (or mpirun launched) for them,
/// newest last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    pub plan: String,
    pub seed: u64,
    #[serde(default)]
    pub launcher: Launcher,
    /// With mpirun: the hostfile (absolute) when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostfile: Option<PathBuf>,
    /// The arguments every task repeats (the submitting command's, but for the submission's
    /// own flags), as the shell would take them back.
    #[serde(default)]
    pub args: Vec<String>,
    pub blocks: Vec<Block>,
    pub jobs: Vec<Job>,
}

impl Fleet {
    /// The record of a results directory, `None` where it has none.
    pub fn load(dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(RECORD);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let bytes = crate::base::bounded::read_regular(
            &path,
            crate::base::bounded::PLAN_LIMIT,
            "fleet records",
        )
        .map_err(|e| bad_input(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            bad_input(format!(
                "{} is not a fleet record fsgauge wrote ({e}); move it away or give another --out",
                path.display()
            ))
        })
    }

    /// Writes the record atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        crate::base::atomic::write_atomic(&dir.join(RECORD), &bytes)
            .with_context(|| format!("writing {}", dir.join(RECORD).display()))
    }

    /// The command that resubmits what is neither done nor queued.
    pub fn resume_command(&self, dir: &Path) -> String {
        let partition = self.jobs.last().and_then(|j| j.partition.as_ref());
        let on = match (self.launcher, partition, &self.hostfile) {
            (Launcher::Slurm, Some(p), _) => format!("slurm:{p}"),
            (Launcher::Slurm, None, _) => "slurm".into(),
            (Launcher::Mpirun, _, Some(h)) => {
                script::quote(std::ffi::OsStr::new(&format!("mpirun:{}", h.display())))
            }
            (Launcher::Mpirun, _, None) => "mpirun".into(),
        };
        format!(
            "fsgauge {} --on {on} --resume --out {}",
            self.args.join(" "),
            script::quote(dir.as_os_str())
        )
    }

    /// Refuses to continue a run with another launcher than the one that began it (a Slurm
    /// array may still hold blocks mpirun would run twice).
    pub fn same_launcher(&self, launcher: Launcher, dir: &Path) -> Result<()> {
        if self.launcher == launcher {
            return Ok(());
        }
        Err(bad_input(format!(
            "{} was begun with --on {}; continue it with: {}",
            dir.display(),
            match self.launcher {
                Launcher::Slurm => "slurm",
                Launcher::Mpirun => "mpirun",
            },
            self.resume_command(dir)
        )))
    }

    /// The job that ran (or will run) `block` last.
    pub fn last_job_of(&self, block: u32) -> Option<&Job> {
        self.jobs.iter().rev().find(|j| j.blocks.contains(&block))
    }
}

/// Makes a plan a fleet's: its repetitions fixed to the number of blocks. `reps = "auto"` cannot
/// stop early across an array (each round runs on its own machine at once), so it runs its
/// maximum (a smoke run: its one round). Returns the note saying so, when it applies.
pub fn fix_reps(plan: &mut Plan) -> Option<String> {
    let Reps::Auto { max, .. } = plan.reps else {
        return None;
    };
    let n = if plan::smoke(plan) { 1 } else { max };
    plan.reps = Reps::Fixed(n);
    Some(format!(
        "reps = \"auto\" cannot stop early across a job array: every cell runs {n} repetition(s) (its maximum), one block each"
    ))
}

/// The blocks of a plan whose repetitions are fixed ([`fix_reps`]): one per repetition, each
/// with the spec hashes of its runs in matrix order.
pub fn blocks(m: &plan::Matrix, reps: u32) -> Vec<Block> {
    (0..reps)
        .map(|k| Block {
            block: k,
            runs: m
                .runs
                .iter()
                .filter(|r| r.rep == k)
                .map(|r| r.hash.clone())
                .collect(),
        })
        .collect()
}

/// The array's task list for sbatch: `0-4` for a run of blocks, `1,3` otherwise; with a limit
/// of machines at once, `%N`.
pub fn array_spec(blocks: &[u32], machines: Option<u32>) -> String {
    let contiguous = blocks.windows(2).all(|w| w[1] == w[0] + 1);
    let mut spec = match (blocks.first(), blocks.last()) {
        (Some(a), Some(b)) if contiguous && a != b => format!("{a}-{b}"),
        _ => blocks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    };
    if let Some(n) = machines {
        spec.push_str(&format!("%{n}"));
    }
    spec
}

/// The results directory as an absolute path: the tasks run elsewhere, in the submitting
/// directory, and name it in the batch script.
pub fn absolute(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("making {} absolute", dir.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn on_takes_slurm_and_a_partition_and_refuses_the_rest() {
        assert_eq!(
            "slurm".parse::<On>().unwrap(),
            On::Slurm { partition: None }
        );
        assert_eq!(
            "slurm:debug".parse::<On>().unwrap(),
            On::Slurm {
                partition: Some("debug".into())
            }
        );
        for bad in ["nonsense", "slurm:", "slurm:a b", "slurm:x;rm", ""] {
            let e = bad.parse::<On>().unwrap_err();
            assert!(e.contains("slurm"), "{bad}: {e}");
        }
        assert_eq!(
            "mpirun".parse::<On>().unwrap(),
            On::Mpirun { hostfile: None }
        );
        assert_eq!(
            "mpirun:/etc/hosts here".parse::<On>().unwrap(),
            On::Mpirun {
                hostfile: Some("/etc/hosts here".into())
            }
        );
        assert!("mpirun:".parse::<On>().unwrap_err().contains("HOSTFILE"));
        assert!("nonsense".parse::<On>().unwrap_err().contains("mpirun"));
    }

    #[test]
    fn array_specs_are_ranges_or_lists_with_the_machine_limit() {
        assert_eq!(array_spec(&[0, 1, 2], None), "0-2");
        assert_eq!(array_spec(&[0, 1, 2], Some(2)), "0-2%2");
        assert_eq!(array_spec(&[1, 3], None), "1,3");
        assert_eq!(array_spec(&[4], Some(1)), "4%1");
    }
}
