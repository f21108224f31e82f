//! Slurm's own command-line tools, run as a user would: `sinfo` to check a partition, `sbatch
//! --test-only` to have Slurm judge the request before anything is submitted, `sbatch
//! --parsable --array` to submit, and `sacct` (or, where Slurm keeps no accounting, `squeue` and
//! `scontrol show job`) to read each array task's state.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::base::error::bad_input;

/// The Slurm programs a submission needs, found on PATH; refused (bad input) when missing.
pub fn check_tools() -> Result<()> {
    for tool in ["sbatch", "sinfo", "squeue"] {
        if crate::base::sys::proc::find_program(tool).is_none() {
            return Err(bad_input(format!(
                "--on slurm: `{tool}` is not on PATH; run on a Slurm login node (or install Slurm's client tools: apt-get install slurm-client; scripts/slurm-localhost makes a one-machine Slurm to try)"
            )));
        }
    }
    Ok(())
}

/// Output of a Slurm tool, or its error message as the tool printed it.
fn output(cmd: &mut Command, stdin: Option<&[u8]>) -> Result<std::result::Result<String, String>> {
    let shown = format!("{cmd:?}");
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("running {shown}"))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .with_context(|| format!("writing the batch script to {shown}"))?;
    }
    let out = child
        .wait_with_output()
        .with_context(|| format!("running {shown}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(Ok(stdout))
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Ok(Err(if err.is_empty() {
            format!("{} ({})", stdout.trim(), out.status)
        } else {
            err
        }))
    }
}

/// The partition exists (`sinfo -h -p PART`); `None`: Slurm has a default partition.
pub fn check_partition(partition: Option<&str>) -> Result<()> {
    let listed = output(Command::new("sinfo").args(["-h", "-o", "%P"]), None)?.map_err(|e| {
        bad_input(format!(
            "--on slurm: sinfo failed: {e}; is slurmctld reachable (scontrol ping)?"
        ))
    })?;
    let names: Vec<&str> = listed.lines().map(str::trim).collect();
    match partition {
        Some(p) => {
            let found = output(Command::new("sinfo").args(["-h", "-p", p, "-o", "%P"]), None)?
                .map_err(|e| bad_input(format!("--on slurm:{p}: sinfo failed: {e}")))?;
            if found.trim().is_empty() {
                return Err(bad_input(format!(
                    "--on slurm:{p}: Slurm has no partition {p:?} (sinfo -h -p {p} lists nothing); partitions here: {}",
                    names.join(" ")
                )));
            }
        }
        None if !names.iter().any(|n| n.ends_with('*')) => {
            return Err(bad_input(format!(
                "--on slurm: Slurm has no default partition; name one with --on slurm:PARTITION (partitions here: {})",
                names.join(" ")
            )))
        }
        None => {}
    }
    Ok(())
}

/// The sbatch options of a submission: the array, and the partition when named.
pub fn sbatch_args(array: &str, partition: Option<&str>) -> Vec<String> {
    let mut args = vec![format!("--array={array}")];
    if let Some(p) = partition {
        args.push(format!("--partition={p}"));
    }
    args
}

/// Has Slurm judge the request without submitting it (`sbatch --test-only`, the script on
/// stdin); a refusal is bad input, with Slurm's words.
pub fn test_submit(script: &str, args: &[String]) -> Result<()> {
    let judged = output(
        Command::new("sbatch").arg("--test-only").args(args),
        Some(script.as_bytes()),
    )?;
    judged.map(|_| ()).map_err(|e| {
        bad_input(format!(
            "Slurm refuses the job array ({}): {e}; nothing was submitted",
            args.join(" ")
        ))
    })
}

/// Submits the batch script as an array; returns the job id.
pub fn submit(script: &Path, args: &[String]) -> Result<String> {
    let out = output(
        Command::new("sbatch")
            .arg("--parsable")
            .args(args)
            .arg(script),
        None,
    )?
    .map_err(|e| anyhow::anyhow!("sbatch {}: {e}", args.join(" ")))?;
    // `--parsable` prints "JOBID" or "JOBID;CLUSTER".
    let id = out.trim().split(';').next().unwrap_or_default().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        anyhow::bail!("sbatch printed {out:?}, not a job id");
    }
    Ok(id)
}

/// The state of each task (block) of array `job` that Slurm knows: from `sacct` when Slurm
/// keeps accounting, else from the controller's memory of finished jobs (`scontrol show job`,
/// MinJobAge); the queue (`squeue`) has the last word on pending and running tasks. States are Slurm's words (PENDING, RUNNING, COMPLETED,
/// FAILED, CANCELLED, ...).
pub fn task_states(job: &str) -> Result<BTreeMap<u32, String>> {
    let mut states = match output(
        Command::new("sacct").args(["-j", job, "--format=JobID,State", "-P", "-n"]),
        None,
    ) {
        Ok(Ok(out)) => parse_sacct(job, &out),
        _ => BTreeMap::new(),
    };
    if states.is_empty() {
        if let Ok(out) = output(
            Command::new("scontrol").args(["show", "job", "-o", job]),
            None,
        )? {
            states.extend(parse_scontrol(&out));
        }
    }
    // The queue last: it is the newest word on pending and running tasks.
    let queued = output(
        Command::new("squeue").args(["-h", "-r", "-j", job, "-o", "%i|%T"]),
        None,
    )?;
    if let Ok(out) = queued {
        states.extend(parse_sacct(job, &out));
    }
    Ok(states)
}

/// `JOB_K|STATE` lines (sacct's and squeue's form); steps (`JOB_K.batch`) and other jobs are
/// left out, and `CANCELLED by 0` is `CANCELLED`.
fn parse_sacct(job: &str, out: &str) -> BTreeMap<u32, String> {
    let prefix = format!("{job}_");
    out.lines()
        .filter_map(|l| {
            let (id, state) = l.trim().split_once('|')?;
            let k = id.strip_prefix(&prefix)?.parse::<u32>().ok()?;
            let state = state.split_whitespace().next()?.to_string();
            Some((k, state))
        })
        .collect()
}

/// `scontrol show job -o`'s records: `ArrayTaskId=K ... JobState=STATE` (a pending range
/// such as `ArrayTaskId=1-2%1` is left to squeue).
fn parse_scontrol(out: &str) -> BTreeMap<u32, String> {
    out.lines()
        .filter_map(|l| {
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix(name).map(str::to_string))
            };
            let k = field("ArrayTaskId=")?.parse::<u32>().ok()?;
            Some((k, field("JobState=")?))
        })
        .collect()
}

/// Cancels the named tasks (`scancel JOB_K`); used by the tests and said in the help.
pub fn scancel(tasks: &[String]) -> Result<()> {
    output(Command::new("scancel").args(tasks), None)?
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("scancel {}: {e}", tasks.join(" ")))
}

/// This fsgauge's own executable, which the batch script calls by its absolute path.
pub fn own_binary() -> Result<PathBuf> {
    std::env::current_exe().context("finding fsgauge's own executable for the batch script")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_states_are_read_from_sacct_squeue_and_scontrol() {
        let sacct = "12_0|COMPLETED\n12_0.batch|COMPLETED\n12_1|CANCELLED by 0\n13_2|RUNNING\n12_[2-3]|PENDING\n";
        let s = parse_sacct("12", sacct);
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            vec![(0, "COMPLETED".into()), (1, "CANCELLED".into())]
        );
        let sc = "JobId=14 ArrayJobId=12 ArrayTaskId=1 JobName=x JobState=CANCELLED Reason=None\nJobId=12 ArrayJobId=12 ArrayTaskId=2-3%1 JobState=PENDING\n";
        let s = parse_scontrol(sc);
        assert_eq!(
            s.into_iter().collect::<Vec<_>>(),
            vec![(1, "CANCELLED".into())]
        );
    }
}
