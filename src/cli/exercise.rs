//! `fsgauge exercise`: the integrity exerciser's flags, the checks that need no filesystem,
//! and the summary table.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::{RunArgs, TestbedArgs};
use crate::error::bad_input;
use crate::exercise::{Exercise, OpKind, ReplayLog};
use crate::units::{parse_duration, Size};

/// Random operations on a file, each verified against an in-memory model of the file (fsx
/// from xfstests, done fast, replayable, and across remounts).
#[derive(Debug, Args)]
pub struct ExerciseArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The file: a name inside the workload directory, or a path (containing a `/`) used as
    /// it is (created or truncated; left in place). With --procs P, `.0` ... `.P-1` is
    /// appended.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "exercise.dat",
        help_heading = "Exerciser"
    )]
    pub file: String,
    /// Operations per exerciser [default: 100000, or unlimited with --time].
    #[arg(long, value_name = "N", help_heading = "Exerciser")]
    pub ops: Option<u64>,
    /// Run for this long, e.g. 30s, 10m, 1h (with --ops: whichever ends first).
    #[arg(long, value_name = "DURATION", value_parser = parse_time, help_heading = "Exerciser")]
    pub time: Option<f64>,
    /// The file never grows past this (fsx -l).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "256K",
        help_heading = "Exerciser"
    )]
    pub max_len: Size,
    /// Longest single operation (fsx -o).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "64K",
        help_heading = "Exerciser"
    )]
    pub max_op_len: Size,
    /// P exercisers at once, each on its own file (threads).
    #[arg(
        long,
        value_name = "P",
        default_value_t = 1,
        help_heading = "Exerciser"
    )]
    pub procs: u32,
    /// O_DIRECT, with every offset and length a multiple of the block size (the mmap and
    /// dontcache operations are turned off, as with fsx -Z -R -W).
    #[arg(long, help_heading = "Exerciser")]
    pub direct: bool,
    /// Before every operation that moves EOF, write garbage past EOF into the EOF page
    /// through a mapping; the filesystem must zero it when the file grows (fsx -e 1).
    #[arg(long, help_heading = "Exerciser")]
    pub pollute_eof: bool,
    /// Leave these operations out, e.g. --no fsync,fdatasync,clone. Operations: read, write,
    /// read-dontcache, write-dontcache, mapread, mapwrite, truncate, falloc, punch, zero,
    /// collapse, insert, fsync, fdatasync, copy, clone.
    #[arg(
        long,
        value_name = "OPS",
        value_delimiter = ',',
        help_heading = "Exerciser"
    )]
    pub no: Vec<OpKind>,
    /// Weights of operation kinds in the mix, e.g. --weights read=4,fsync=0 (each kind is
    /// picked in proportion to its weight); kinds not named weigh 1, 0 leaves a kind out.
    #[arg(long, value_name = "KIND=N,...", value_parser = parse_weight, value_delimiter = ',', help_heading = "Exerciser")]
    pub weights: Vec<(OpKind, u32)>,
    /// Every K operations (per exerciser), unmount and mount the testbed, drop caches, and
    /// verify every file whole against its model (needs --fs).
    #[arg(long, value_name = "K", help_heading = "Exerciser")]
    pub remount_every: Option<u64>,
    /// Write a replay log per exerciser into DIR (exercise-W.log); on a mismatch also the
    /// report and the expected file image.
    #[arg(long, value_name = "DIR", help_heading = "Exerciser")]
    pub log: Option<PathBuf>,
    /// Re-run exactly the steps of a replay log (from --log). Without --fs/--dir it runs on a
    /// fresh testbed like the one the log was recorded on.
    #[arg(long, value_name = "LOG", help_heading = "Exerciser")]
    pub replay: Option<PathBuf>,
    /// Testing the exerciser: after operation N of exerciser 0, flip the byte at OFFSET
    /// through a second descriptor (N:OFFSET; repeatable).
    #[arg(long, value_name = "N:OFFSET", value_parser = parse_inject, hide = true)]
    pub inject: Vec<(u64, u64)>,
}

fn parse_time(s: &str) -> Result<f64, String> {
    parse_duration(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| e.to_string())
}

fn parse_weight(item: &str) -> Result<(OpKind, u32), String> {
    let (k, n) = item
        .split_once('=')
        .ok_or_else(|| format!("{item:?} is not KIND=N, e.g. read=2"))?;
    let k: OpKind = k.parse()?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("weight {n:?} of {k} is not a whole number"))?;
    if n > 1000 {
        return Err(format!("weight {n} of {k} is over 1000"));
    }
    Ok((k, n))
}

fn parse_inject(s: &str) -> Result<(u64, u64), String> {
    let (n, off) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not N:OFFSET"))?;
    let n = n
        .parse()
        .map_err(|_| format!("{n:?} is not an operation number"))?;
    let off = crate::units::parse_size(off).map_err(|e| e.to_string())?;
    Ok((n, off))
}

impl ExerciseArgs {
    /// The workload these flags describe.
    pub fn workload(&self) -> Exercise {
        Exercise {
            file: self.file.clone(),
            ops: self.ops,
            time: self.time,
            max_len: self.max_len.bytes(),
            max_op_len: self.max_op_len.bytes(),
            procs: self.procs,
            direct: self.direct,
            pollute_eof: self.pollute_eof,
            no: self.no.clone(),
            weights: self.weights.iter().copied().collect(),
            remount_every: self.remount_every.unwrap_or(0),
            log: self.log.clone(),
            replay: self.replay.clone(),
            inject: self.inject.clone(),
        }
    }
}

/// True when a mount-option string asks for a read-only mount.
fn read_only_opts(opts: &str) -> bool {
    opts.split(',').any(|o| o.trim() == "ro")
}

fn statvfs_read_only(p: &Path) -> bool {
    nix::sys::statvfs::statvfs(p)
        .map(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false)
}

/// Checks that need no filesystem: the place, the file, read-only mounts, remounts.
fn check_place(args: &ExerciseArgs) -> Result<()> {
    if args.remount_every == Some(0) {
        return Err(bad_input("--remount-every must be 1 or more"));
    }
    if args.testbed.fs.is_some() {
        if read_only_opts(&args.testbed.mount_opts) {
            return Err(bad_input(format!(
                "--mount-opts {:?} mounts the testbed read-only; the exerciser writes, so it needs a writable filesystem",
                args.testbed.mount_opts
            )));
        }
        if args.file.contains('/') {
            return Err(bad_input(format!(
                "--file {:?}: with --fs the file lives on the fresh testbed; give a plain name",
                args.file
            )));
        }
    }
    if let Some(dir) = &args.testbed.dir {
        if args.remount_every.is_some() {
            return Err(bad_input(format!(
                "--remount-every needs a testbed fsgauge builds (--fs KIND); {} is an existing directory that cannot be remounted",
                dir.display()
            )));
        }
        if dir.is_dir() && statvfs_read_only(dir) {
            return Err(bad_input(format!(
                "--dir {} is on a read-only filesystem; the exerciser writes, so it needs a writable one",
                dir.display()
            )));
        }
    }
    if args.file.contains('/') {
        let p = Path::new(&args.file);
        if let Ok(md) = std::fs::metadata(p) {
            if !md.is_file() {
                return Err(bad_input(format!(
                    "--file {} is not a regular file; the exerciser needs a regular file (it is created if missing, and overwritten)",
                    p.display()
                )));
            }
        }
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(bad_input(format!(
                "--file {}: the directory {} does not exist",
                p.display(),
                parent.display()
            )));
        }
        if statvfs_read_only(parent) {
            return Err(bad_input(format!(
                "--file {} is on a read-only filesystem; the exerciser writes, so it needs a writable one",
                p.display()
            )));
        }
    }
    Ok(())
}

/// Runs the command.
pub fn run(mut args: ExerciseArgs) -> Result<ExitCode> {
    check_place(&args)?;
    if let Some(r) = &args.replay {
        let log = ReplayLog::load(r)?;
        // The result records the seed the steps were made from.
        args.run.seed.get_or_insert(log.seed);
        // Without a place, replay on a testbed like the recorded one.
        if args.testbed.fs.is_none() && args.testbed.dir.is_none() {
            let fs = log.testbed.fs.parse().map_err(|_| {
                bad_input(format!(
                    "{} was recorded on {:?}, which fsgauge cannot build; say where to replay with --fs KIND or --dir PATH",
                    r.display(),
                    log.testbed.fs
                ))
            })?;
            args.testbed.fs = Some(fs);
            if log.testbed.size > 0 {
                args.testbed.fs_size = Size(log.testbed.size);
            }
            args.testbed.mount_opts = log.testbed.mount_options.clone();
        }
        if args.file.contains('/') && args.testbed.fs.is_some() {
            args.file = "exercise.dat".into();
        }
    }
    // A --file path with no place: run in its directory.
    if args.testbed.fs.is_none() && args.testbed.dir.is_none() && args.file.contains('/') {
        let p = Path::new(&args.file);
        args.testbed.dir = Some(
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        );
    }
    let wl = args.workload();
    let place = args.testbed.place()?;
    let outcomes = crate::runner::run(&place, &wl, &args.run.options())?;
    args.run
        .print(&outcomes, crate::exercise::report::summary_table)?;
    Ok(ExitCode::SUCCESS)
}
