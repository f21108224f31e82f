//! Flags of `fsgauge bench clients`: the dbench-style client load, swept over client counts
//! (a fresh filesystem per count with --fs).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::tio::{on_off, run_sweep, write_csv, List, Secs};
use crate::cli::common::{RunArgs, TestbedArgs};
use crate::results::RunResult;
use crate::workload::clients::{table, Clients};

#[derive(Debug, Args)]
pub struct ClientsArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Client counts to sweep, e.g. 1,4,8,16,32,64.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1,4",
        help_heading = "Workload"
    )]
    pub clients: List<u32>,
    /// A dbench loadfile (e.g. /usr/share/dbench/client.txt from the dbench package); without
    /// it, the built-in file-server-like mix.
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub loadfile: Option<PathBuf>,
    /// How long each client count runs [default: 60s, or no limit with --loops].
    #[arg(long, value_name = "DURATION", help_heading = "Workload")]
    pub time: Option<Secs>,
    /// Exactly N passes over the loadfile (or mix) per client.
    #[arg(long, value_name = "N", help_heading = "Workload")]
    pub loops: Option<u64>,
    /// Built-in mix: directories per client.
    #[arg(long, value_name = "N", default_value_t = 8, help_heading = "Workload")]
    pub mix_dirs: u32,
    /// Built-in mix: files per client (4K..128K each).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100,
        help_heading = "Workload"
    )]
    pub mix_files: u32,
    /// Built-in mix: transactions per pass.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 2000,
        help_heading = "Workload"
    )]
    pub mix_ops: u32,
    /// With --fs: a new filesystem for every client count (each its own run).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set, help_heading = "Workload")]
    pub fresh_fs: bool,
    #[cfg(feature = "mpi")]
    #[command(flatten)]
    pub mpi: super::mpi::MpiArgs,
}

impl ClientsArgs {
    pub fn workload(&self) -> Clients {
        let time = match (self.time, self.loops) {
            (Some(t), _) => Some(t.0),
            (None, Some(_)) => None,
            (None, None) => Some(60.0),
        };
        Clients {
            clients: self.clients.0.clone(),
            loadfile: self.loadfile.clone(),
            time,
            loops: self.loops,
            mix_dirs: self.mix_dirs,
            mix_files: self.mix_files,
            mix_ops: self.mix_ops,
            fresh_fs: self.fresh_fs,
        }
    }
}

pub fn run(a: ClientsArgs) -> Result<ExitCode> {
    let wl = a.workload();
    let place = a.testbed.place()?;
    let outcomes = run_sweep(&place, &wl, wl.cells(), wl.split_per_cell(), &a.run)?;
    a.run.print(&outcomes, |r| {
        table::tables(r) + &crate::dist::report::rank_text(r)
    })?;
    let results: Vec<RunResult> = outcomes.iter().map(|o| o.result.clone()).collect();
    let mut csv = String::from("testbed,fs,rep,clients,mb_per_s,ops,wall_s\n");
    for r in &results {
        for p in &r.phases {
            if let Some(n) = p.name.strip_prefix("clients-") {
                csv.push_str(&format!(
                    "{},{},{},{n},{},{},{}\n",
                    r.testbed.label,
                    r.testbed.fs,
                    r.rep,
                    p.bytes_per_s / 1e6,
                    p.ops,
                    p.wall_s
                ));
            }
        }
    }
    write_csv(
        &a.run.out,
        "clients",
        &csv,
        a.run.quiet || a.run.output().is_machine(),
    )?;
    Ok(ExitCode::SUCCESS)
}
