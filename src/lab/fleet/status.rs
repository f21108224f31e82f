//! Where each block of a fleet run stands: done when all its results are in the results
//! directory (whatever Slurm says), otherwise as Slurm reports its latest task, or, where Slurm
//! no longer remembers the task, as the batch script's exit marker says. A block launched with
//! mpirun has no queue to ask: it is done or missing.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::{slurm, Fleet, LOGS};

/// A block's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Pending,
    Running,
    Done,
    Failed,
    Cancelled,
    /// mpirun's blocks without all their results (mpirun has no queue: nothing is pending).
    Missing,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Missing => "missing",
        }
    }

    /// Still in Slurm's hands: submitting it again would run it twice.
    pub fn active(self) -> bool {
        matches!(self, State::Pending | State::Running)
    }
}

/// One block's line of `fsgauge status`.
#[derive(Debug, Clone, Serialize)]
pub struct BlockStatus {
    pub block: u32,
    pub state: State,
    /// Runs of the block whose result is in the results directory.
    pub done: usize,
    pub runs: usize,
    /// The array task that ran it last (`JOB_K`).
    pub task: Option<String>,
    /// What Slurm or the exit marker said, as it said it.
    pub said: String,
}

/// Every block's status.
pub fn of(dir: &Path, fleet: &Fleet) -> Result<Vec<BlockStatus>> {
    let have: HashSet<String> = crate::lab::plan::existing_results(dir)?
        .into_keys()
        .collect();
    let mut by_job: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    let mut out = Vec::new();
    for b in &fleet.blocks {
        let done = b.runs.iter().filter(|h| have.contains(*h)).count();
        let job = fleet.last_job_of(b.block);
        let task = job
            .filter(|_| fleet.launcher == super::Launcher::Slurm)
            .map(|j| format!("{}_{}", j.id, b.block));
        let (state, said) = if done == b.runs.len() {
            (State::Done, "all results present".to_string())
        } else if fleet.launcher == super::Launcher::Mpirun {
            (
                State::Missing,
                format!(
                    "{} of {} result(s) missing",
                    b.runs.len() - done,
                    b.runs.len()
                ),
            )
        } else if let Some(j) = job {
            if !by_job.contains_key(&j.id) {
                by_job.insert(j.id.clone(), slurm::task_states(&j.id)?);
            }
            let slurm_says = by_job.get(&j.id).and_then(|m| m.get(&b.block)).cloned();
            match slurm_says {
                Some(s) => (from_slurm(&s), s),
                None => from_marker(dir, b.block),
            }
        } else {
            (State::Cancelled, "never submitted".to_string())
        };
        out.push(BlockStatus {
            block: b.block,
            state,
            done,
            runs: b.runs.len(),
            task,
            said,
        });
    }
    Ok(out)
}

/// Slurm's state of a task whose block is not done.
fn from_slurm(s: &str) -> State {
    match s {
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "CONFIGURING" | "SUSPENDED"
        | "RESV_DEL_HOLD" | "SPECIAL_EXIT" => State::Pending,
        "RUNNING" | "COMPLETING" | "SIGNALING" | "STAGE_OUT" | "RESIZING" => State::Running,
        "CANCELLED" => State::Cancelled,
        // COMPLETED with results missing, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...
        _ => State::Failed,
    }
}

/// The batch script's exit marker of a task Slurm no longer knows: an exit status, or
/// `cancelled STATUS`; none at all: the task left the queue without running (cancelled while
/// pending, or its job is gone from the controller).
fn from_marker(dir: &Path, block: u32) -> (State, String) {
    let path = dir.join(LOGS).join(format!("block-{block}.exit"));
    match std::fs::read_to_string(&path) {
        Ok(s) if s.starts_with("cancelled") => {
            (State::Cancelled, format!("exit marker: {}", s.trim()))
        }
        Ok(s) => (State::Failed, format!("exit marker: status {}", s.trim())),
        Err(_) => (
            State::Cancelled,
            "not in Slurm's queue and never ran (no exit marker)".into(),
        ),
    }
}

/// The count of blocks in each state, in the order of [`State`].
pub fn totals(st: &[BlockStatus]) -> BTreeMap<State, usize> {
    let mut t = BTreeMap::new();
    for s in st {
        *t.entry(s.state).or_insert(0) += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_states_map_to_block_states() {
        assert_eq!(from_slurm("PENDING"), State::Pending);
        assert_eq!(from_slurm("RUNNING"), State::Running);
        assert_eq!(from_slurm("CANCELLED"), State::Cancelled);
        assert_eq!(from_slurm("COMPLETED"), State::Failed);
        assert_eq!(from_slurm("TIMEOUT"), State::Failed);
    }

    #[test]
    fn an_mpirun_block_without_its_results_is_missing_whatever_its_job() {
        let d = tempfile::tempdir().expect("a temporary directory");
        let fleet = Fleet {
            plan: "p.toml".into(),
            seed: 1,
            launcher: super::super::Launcher::Mpirun,
            hostfile: None,
            args: Vec::new(),
            blocks: vec![super::super::Block {
                block: 0,
                runs: vec!["h0".into(), "h1".into()],
            }],
            jobs: vec![super::super::Job {
                id: "mpirun-1".into(),
                blocks: vec![0],
                partition: None,
                submitted_at: "2026-11-29T00:00:00Z".into(),
            }],
        };
        let st = of(d.path(), &fleet).expect("status");
        assert_eq!(st[0].state, State::Missing);
        assert_eq!(st[0].said, "2 of 2 result(s) missing");
        assert_eq!(st[0].task, None);
        assert!(!st[0].state.active());
    }

    #[test]
    fn exit_markers_say_cancelled_or_failed() {
        let d = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(d.path().join(LOGS)).expect("logs");
        assert_eq!(from_marker(d.path(), 0).0, State::Cancelled);
        std::fs::write(d.path().join(LOGS).join("block-1.exit"), "1\n").expect("marker");
        assert_eq!(from_marker(d.path(), 1).0, State::Failed);
        std::fs::write(d.path().join(LOGS).join("block-2.exit"), "cancelled 130\n")
            .expect("marker");
        assert_eq!(from_marker(d.path(), 2).0, State::Cancelled);
    }
}
