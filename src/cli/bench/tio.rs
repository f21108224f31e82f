//! Flags of `fsgauge bench tio`, and the sweep driver: with a testbed and `--fresh-fs on` (the
//! default), every cell of the sweep is its own run on a new filesystem (the study's "each
//! time we run the test on a fresh created ext3 filesystem"), each with its own result file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::SystemTime;

use anyhow::{Context, Result};
use clap::Args;

use crate::cli::common::{RunArgs, TestbedArgs};
use crate::report::output::{OutputFormat, ResultViews};
use crate::results::RunResult;
use crate::runner::{Outcome, Place};
use crate::units::{parse_duration, parse_list, Size};
use crate::workload::tio::table::{sweep_csv, sweep_tables};
use crate::workload::tio::{Engine, FsyncPolicy, Mode, Tio};
use crate::workload::Workload;

/// A comma list flag (`1,4,8`, `4K,128K`).
#[derive(Debug, Clone)]
pub struct List<T>(pub Vec<T>);

impl<T: FromStr> FromStr for List<T>
where
    T::Err: fmt::Display,
{
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_list(s).map(List).map_err(|e| e.to_string())
    }
}

/// A duration flag (`30s`, `5m`).
#[derive(Debug, Clone, Copy)]
pub struct Secs(pub f64);

impl FromStr for Secs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s)
            .map(|d| Secs(d.as_secs_f64()))
            .map_err(|e| e.to_string())
    }
}

pub(crate) fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{s:?} is not on or off")),
    }
}

#[derive(Debug, Args)]
pub struct TioArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Thread counts to sweep, e.g. 1,4,8,16,32,64.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1,4",
        help_heading = "Workload"
    )]
    pub threads: List<u32>,
    /// Modes to sweep: seqwrite, randwrite, seqread, randread.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "seqwrite,randwrite,seqread,randread",
        help_heading = "Workload"
    )]
    pub mode: List<Mode>,
    /// Block (request) sizes to sweep, e.g. 4K,128K.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "4K,128K",
        help_heading = "Workload"
    )]
    pub block: List<Size>,
    /// Bytes each thread writes or reads (its own file, or its region of the shared file).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "64M",
        help_heading = "Workload"
    )]
    pub file_size: Size,
    /// All threads share one file, each on its own region, instead of a file per thread.
    #[arg(long, help_heading = "Workload")]
    pub shared_file: bool,
    /// O_DIRECT with aligned buffers (the page cache stays out).
    #[arg(long, help_heading = "Workload")]
    pub direct: bool,
    /// When writes are forced out: none, end (fsync each file once, inside the phase) or
    /// every:N (fsync after every N writes of a thread, and at the end).
    #[arg(
        long,
        value_name = "none|end|every:N",
        default_value = "end",
        help_heading = "Workload"
    )]
    pub fsync: FsyncPolicy,
    /// How requests are issued: psync (pread/pwrite) or io_uring.
    #[arg(
        long,
        value_name = "psync|io_uring",
        default_value = "psync",
        help_heading = "Workload"
    )]
    pub engine: Engine,
    /// Requests in flight per thread (io_uring only).
    #[arg(long, value_name = "Q", default_value_t = 1, help_heading = "Workload")]
    pub iodepth: u32,
    /// Use psync when the kernel or filesystem refuses io_uring (with a warning in the
    /// result) instead of failing.
    #[arg(long, help_heading = "Workload")]
    pub engine_fallback: bool,
    /// Cap on each cell's duration, e.g. 30s; a cell stops early when it is reached.
    #[arg(long, value_name = "DURATION", help_heading = "Workload")]
    pub time: Option<Secs>,
    /// Write seeded, self-identifying blocks and check every block read (write cells read
    /// their files back after the phase); a mismatch fails the run with exit code 1.
    #[arg(long, help_heading = "Workload")]
    pub verify: bool,
    /// With --fs: a new filesystem for every cell of the sweep (each cell its own run and
    /// result file). Off: all cells run on one filesystem per repetition.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set, help_heading = "Workload")]
    pub fresh_fs: bool,
    /// Do not record per-request latency (only counts and bytes): for measuring what latency
    /// recording costs. Latency columns are then empty.
    #[arg(long, help_heading = "Workload")]
    pub no_latency: bool,
    /// Self-test of --verify: after a read cell's setup, overwrite block N of the first file
    /// with another block's data; the run must then fail naming that block.
    #[arg(long, value_name = "N", hide = true)]
    pub inject_corruption: Option<u64>,
    /// Measures what latency recording costs within one run: stretches of 2048 requests
    /// alternate with recording on and off, and the phase reports the time per request of
    /// each (latency_probe_on_ns, latency_probe_off_ns, latency_cost). psync only; only the
    /// recorded half of the requests has latencies.
    #[arg(long, hide = true)]
    pub latency_probe: bool,
    /// Print the sweep as CSV on stdout instead of the tables.
    #[arg(long, help_heading = "Runs and results")]
    pub csv: bool,
    #[cfg(feature = "mpi")]
    #[command(flatten)]
    pub mpi: super::mpi::MpiArgs,
}

impl TioArgs {
    pub fn workload(&self) -> Tio {
        Tio {
            threads: self.threads.0.clone(),
            mode: self.mode.0.clone(),
            block: self.block.0.clone(),
            file_size: self.file_size.bytes(),
            shared_file: self.shared_file,
            direct: self.direct,
            fsync: self.fsync,
            engine: self.engine,
            iodepth: self.iodepth,
            time: self.time.map(|s| s.0),
            verify: self.verify,
            fresh_fs: self.fresh_fs,
            engine_fallback: self.engine_fallback,
            latency: !self.no_latency,
            inject_corruption: self.inject_corruption,
            latency_probe: self.latency_probe,
        }
    }
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

/// Runs a sweep workload: one run per cell on fresh testbeds when `split`, else one run.
/// Every cell is checked before anything is made, and all cells share one seed.
pub fn run_sweep<W: Workload>(
    place: &Place,
    whole: &W,
    cells: Vec<W>,
    split: bool,
    run: &RunArgs,
) -> Result<Vec<Outcome>> {
    let mut opts = run.options();
    opts.seed = Some(opts.seed.unwrap_or_else(clock_seed));
    if !(split && matches!(place, Place::Testbed(_))) {
        return crate::runner::run(place, whole, &opts);
    }
    for c in &cells {
        crate::runner::check(place, c, &opts)?;
    }
    let mut out = Vec::new();
    let n = cells.len();
    for (i, c) in cells.iter().enumerate() {
        opts.progress
            .note(&format!("cell {}/{n} on a fresh filesystem", i + 1));
        out.extend(crate::runner::run(place, c, &opts)?);
    }
    Ok(out)
}

/// Writes the sweep's CSV next to the result files and says where.
/// Writes a sweep's CSV into the results directory (on rank 0 only under MPI); its path.
pub fn write_csv(out: &Path, kind: &str, csv: &str, quiet: bool) -> Result<Option<PathBuf>> {
    if crate::dist::secondary_rank() {
        return Ok(None);
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = out.join(format!("{kind}-sweep-{secs}-{}.csv", std::process::id()));
    crate::atomic::write_atomic(&path, csv.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    if !quiet {
        eprintln!("sweep CSV: {}", path.display());
    }
    Ok(Some(path))
}

pub fn run(mut a: TioArgs) -> Result<ExitCode> {
    // --csv is short for --format csv (tio's CSV is the sweep's columns).
    if a.csv {
        a.run.output.format = Some(OutputFormat::Csv);
    }
    let wl = a.workload();
    let place = a.testbed.place()?;
    let outcomes = run_sweep(&place, &wl, wl.cells(), wl.split_per_cell(), &a.run)?;
    let results: Vec<RunResult> = outcomes.iter().map(|o| o.result.clone()).collect();
    let csv = sweep_csv(&results);
    a.run.print_views(
        &outcomes,
        &ResultViews {
            table: &|r| sweep_tables(r) + &crate::dist::report::rank_text(r),
            csv: Some(&sweep_csv),
        },
    )?;
    write_csv(
        &a.run.out,
        "tio",
        &csv,
        a.run.quiet || a.run.output().is_machine(),
    )?;
    Ok(ExitCode::SUCCESS)
}
