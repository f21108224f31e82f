//! Multi-node runs on MPI (cargo feature `mpi`): one fsgauge process per MPI rank, each running
//! the workload's workers, as IOR and mdtest do when a parallel or network filesystem is
//! measured from many client machines.
//!
//! The model (mdtest/IOR semantics):
//! - every measured phase starts on all ranks together, behind an MPI barrier, and ends when the
//!   last rank finishes; the phase's `wall_s` is the slowest rank's, `first_done_s` the fastest;
//! - each rank works in its own subtree (`--unique-dir`, mdtest -u) or all in one directory
//!   (`--shared-dir`, worker names numbered across ranks);
//! - `--stonewall T`: when the first rank reaches T in a phase, every rank stops that phase and
//!   the counts done by then are reported; the hot loops only read an atomic flag that a poller
//!   thread sets, so a stonewall costs them nothing;
//! - `--read-neighbour` (mdtest -N 1): the read and stat phases of rank r use the files rank r+1
//!   wrote, so a client's own cache cannot help it;
//! - aggregation is exact ([`merge`]): operations and bytes are summed over ranks, latency
//!   histograms merged bucket by bucket (never averaged percentiles), and rank 0 writes one
//!   result with a per-rank table in every phase.
//!
//! A failure on one rank (an error in a phase) stops the others' phase at once and ends the job
//! with an error naming the rank; an error outside a phase aborts the job (MPI_Abort), so a
//! failing rank never leaves the others hanging; a killed rank ends the job through mpirun.
//!
//! Without mpirun (and without `--stonewall`), nothing here runs: the commands work exactly as
//! in a build without MPI.

mod coordinator;
pub mod merge;
#[cfg(feature = "mpi")]
mod session;

use std::rc::Rc;
use std::time::Duration;

use anyhow::Result;

pub use coordinator::{check_ramp, Coord, Coordinator, DistRoot, Local, Start, Work};
#[cfg(feature = "mpi")]
pub use session::{library_version, RankFailure, Session};

/// True when this build runs MPI jobs (cargo feature `mpi`).
pub const BUILT_IN: bool = cfg!(feature = "mpi");

/// The version line: the crate's version and whether MPI runs are built in.
pub const fn describe() -> &'static str {
    #[cfg(feature = "mpi")]
    {
        concat!(env!("CARGO_PKG_VERSION"), " (MPI: built in)")
    }
    #[cfg(not(feature = "mpi"))]
    {
        concat!(
            env!("CARGO_PKG_VERSION"),
            " (MPI: not built in; build with --features mpi)"
        )
    }
}

/// The coordinator of this process under `opts`: one rank of the MPI job when launched by
/// mpirun in an MPI build, a single rank kept for `--stonewall` without mpirun; `None` when
/// the process runs alone as any run does ([`Local`]).
pub fn coordinator(opts: DistOptions) -> Result<Option<Rc<dyn Coordinator>>> {
    #[cfg(feature = "mpi")]
    {
        Ok(Session::start(opts)?.map(|s| s as Rc<dyn Coordinator>))
    }
    #[cfg(not(feature = "mpi"))]
    {
        if launched_by_mpirun() || opts.stonewall.is_some() || opts.read_neighbour {
            return Err(crate::base::error::bad_input(
                "this fsgauge is built without MPI: --stonewall, --read-neighbour and runs under mpirun need a build with --features mpi",
            ));
        }
        Ok(None)
    }
}

crate::choice! {
    /// Where the ranks work.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum DirMode("directory mode") {
        /// Each rank in its own subtree `rank.<r>` of the run's directory (mdtest -u).
        #[default]
        Unique = "unique-dir" | "unique",
        /// Every rank in the same directory; worker names are numbered across ranks.
        Shared = "shared-dir" | "shared",
    }
}

/// The rules of a multi-rank run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DistOptions {
    pub dir_mode: DirMode,
    /// Every rank stops a phase when the first rank has run it this long.
    pub stonewall: Option<Duration>,
    /// Read and stat phases of rank r use rank r+1's files.
    pub read_neighbour: bool,
}

/// True when this process was started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx).
pub fn launched_by_mpirun() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMI_RANK",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// The rank whose files rank `rank` reads under `--read-neighbour` (r+1, wrapping).
pub fn neighbour(rank: u32, size: u32) -> u32 {
    if size == 0 {
        0
    } else {
        (rank + 1) % size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_wrap_and_modes_parse() {
        assert_eq!(neighbour(0, 4), 1);
        assert_eq!(neighbour(3, 4), 0);
        assert_eq!(neighbour(0, 1), 0);
        assert_eq!("shared-dir".parse::<DirMode>(), Ok(DirMode::Shared));
        assert_eq!("unique".parse::<DirMode>(), Ok(DirMode::Unique));
        assert!("both".parse::<DirMode>().is_err());
        assert_eq!(DirMode::default().name(), "unique-dir");
    }
}
