//! A fleet run without Slurm: one Open MPI `mpirun` starts this same fsgauge binary on H ranks
//! (`--map-by node`: one per host of the hostfile), and rank r runs the r-th, (r+H)-th, ...
//! block of the list it is given, so each block (one round of every configuration) stays on one
//! machine. The rank and the number of ranks come from Open MPI's environment
//! (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`): no MPI library is linked. mpirun is not a
//! scheduler: the submitting process waits for it; there is no queue to ask.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::base::error::bad_input;

/// `mpirun` on PATH; refused (bad input) when missing.
pub fn check_tool() -> Result<PathBuf> {
    crate::base::sys::proc::find_program("mpirun").ok_or_else(|| {
        bad_input(
            "--on mpirun: `mpirun` is not on PATH; install Open MPI (apt-get install openmpi-bin), or use --on slurm",
        )
    })
}

/// The number of distinct hosts a hostfile names (Open MPI's form: `HOST [slots=N ...]`, `#`
/// comments); refused when it cannot be read or names none.
pub fn hosts(hostfile: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(hostfile).map_err(|e| {
        bad_input(format!(
            "--on mpirun:{}: cannot read the hostfile ({e}); give a readable file with one host per line",
            hostfile.display()
        ))
    })?;
    let names = host_names(&text);
    if names.is_empty() {
        return Err(bad_input(format!(
            "--on mpirun:{}: the hostfile names no host; write one host per line (`node1 slots=1`), or leave it out to run on this machine",
            hostfile.display()
        )));
    }
    Ok(u32::try_from(names.len()).unwrap_or(u32::MAX))
}

fn host_names(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter_map(|l| l.split('#').next()?.split_whitespace().next())
        .collect()
}

/// How many ranks: `--machines N` (at most the hostfile's hosts), else one per host of the
/// hostfile, else one; never more than there are blocks to run.
pub fn ranks(machines: Option<u32>, hosts: Option<u32>, blocks: usize) -> Result<u32> {
    let n = match (machines, hosts) {
        (Some(0), _) => {
            return Err(bad_input(
                "--machines 0: mpirun needs at least one rank; give --machines N with N >= 1, or leave it out (one rank per host of the hostfile)",
            ))
        }
        (Some(n), Some(h)) if n > h => {
            return Err(bad_input(format!(
                "--machines {n}: the hostfile names {h} host(s), and each block must stay on one machine; give --machines {h} or fewer, or add hosts"
            )))
        }
        (Some(n), _) => n,
        (None, Some(h)) => h,
        (None, None) => 1,
    };
    Ok(n.min(u32::try_from(blocks.max(1)).unwrap_or(u32::MAX)))
}

/// mpirun's arguments: `ranks` processes, one per node, each running `binary args
/// --blocks-by-rank LIST --out OUT` in `cwd`.
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub args: &'a [OsString],
    pub blocks: &'a [u32],
    pub out: &'a Path,
    pub ranks: u32,
    pub hostfile: Option<&'a Path>,
    pub cwd: &'a Path,
    pub root: bool,
    /// Environment variables to export to every rank (`-x NAME`; local ranks inherit them
    /// anyway, ranks on other hosts only so).
    pub env: Vec<String>,
}

impl Launch<'_> {
    pub fn argv(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = Vec::new();
        if self.root {
            v.push("--allow-run-as-root".into());
        }
        v.extend(["-np".into(), self.ranks.to_string().into()]);
        v.extend(["--map-by".into(), "node".into()]);
        match self.hostfile {
            Some(h) => v.extend(["--hostfile".into(), h.as_os_str().to_owned()]),
            // Without a hostfile every rank is on this machine, whatever its core count.
            None => v.push("--oversubscribe".into()),
        }
        v.extend(["--bind-to".into(), "none".into()]);
        v.extend(["--wdir".into(), self.cwd.as_os_str().to_owned()]);
        for name in &self.env {
            v.extend(["-x".into(), name.into()]);
        }
        v.push(self.binary.as_os_str().to_owned());
        v.extend(self.args.iter().cloned());
        v.push("--blocks-by-rank".into());
        v.push(list(self.blocks).into());
        v.push("--out".into());
        v.push(self.out.as_os_str().to_owned());
        v
    }
}

/// The names of this process's `FSGAUGE_*` variables (the state directory, the store, ...),
/// for [`Launch::env`].
pub fn own_env() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("FSGAUGE_"))
        .collect();
    names.sort();
    names
}

/// `0,2,5`.
pub fn list(blocks: &[u32]) -> String {
    blocks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// This process's (rank, size) under mpirun; refused outside it.
pub fn rank() -> Result<(u32, u32)> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
    match (var("OMPI_COMM_WORLD_RANK"), var("OMPI_COMM_WORLD_SIZE")) {
        (Some(r), Some(n)) if r < n => Ok((r, n)),
        _ => Err(bad_input(
            "--blocks-by-rank is what each rank of `run --on mpirun` runs: it needs Open MPI's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE; run the plan with --on mpirun[:HOSTFILE] instead",
        )),
    }
}

/// The blocks of `list` rank `rank` of `size` runs: the rank-th, then every size-th after.
pub fn of_rank(list: &[u32], rank: u32, size: u32) -> Vec<u32> {
    list.iter()
        .skip(rank as usize)
        .step_by(size.max(1) as usize)
        .copied()
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_dealt_out_by_rank() {
        assert_eq!(of_rank(&[0, 1, 2], 0, 2), vec![0, 2]);
        assert_eq!(of_rank(&[0, 1, 2], 1, 2), vec![1]);
        assert_eq!(of_rank(&[3, 5], 2, 3), Vec::<u32>::new());
        assert_eq!(of_rank(&[3, 5], 1, 3), vec![5]);
    }

    #[test]
    fn hostfiles_count_distinct_hosts_without_comments() {
        let t = "# cluster\nnode1 slots=2\n\nnode2 # spare\nnode1\n   \n";
        assert_eq!(host_names(t).len(), 2);
        assert!(host_names("# nothing\n\n").is_empty());
    }

    #[test]
    fn ranks_follow_machines_hosts_and_blocks() {
        assert_eq!(ranks(None, None, 3).unwrap(), 1);
        assert_eq!(ranks(Some(2), None, 3).unwrap(), 2);
        assert_eq!(ranks(None, Some(4), 3).unwrap(), 3);
        assert_eq!(ranks(Some(2), Some(4), 3).unwrap(), 2);
        assert!(ranks(Some(0), None, 3).is_err());
        assert!(ranks(Some(5), Some(4), 9).is_err());
    }

    #[test]
    fn the_launch_maps_by_node_and_names_the_blocks() {
        let args = [OsString::from("run"), OsString::from("p.toml")];
        let l = Launch {
            binary: Path::new("/bin/fsgauge"),
            args: &args,
            blocks: &[0, 2],
            out: Path::new("/r"),
            ranks: 2,
            hostfile: Some(Path::new("/h")),
            cwd: Path::new("/w"),
            root: true,
            env: vec!["FSGAUGE_STORE".into()],
        };
        let v: Vec<String> = l
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            v.join(" "),
            "--allow-run-as-root -np 2 --map-by node --hostfile /h --bind-to none --wdir /w -x FSGAUGE_STORE /bin/fsgauge run p.toml --blocks-by-rank 0,2 --out /r"
        );
    }
}
