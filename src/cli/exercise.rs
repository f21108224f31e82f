//! `fsgauge exercise`: the integrity exerciser's flags, the checks that need no filesystem,
//! and the summary table; [`minimize`] cuts a failing crash replay down.

mod minimize;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::common::{RunArgs, TestbedArgs};
use crate::base::error::bad_input;
use crate::base::units::Size;
use crate::workload::exercise::{Exercise, ReplayLog};
use crate::workload::Workload;

/// Random operations on a file, each verified against an in-memory model of the file (fsx
/// from xfstests, done fast, replayable, and across remounts).
#[derive(Debug, Args)]
pub struct ExerciseArgs {
    #[command(flatten)]
    pub testbed: TestbedArgs,
    #[command(flatten)]
    pub run: RunArgs,
    // The workload's parameters, as a plan's `[[workload]] kind = "exercise"` gives them.
    #[command(flatten)]
    pub params: Exercise,
    #[command(flatten)]
    pub minimize: minimize::MinimizeArgs,
    #[command(flatten)]
    pub store: super::store::StoreArg,
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
    if args.testbed.fs.is_some() {
        if read_only_opts(&args.testbed.params.mount_opts) {
            return Err(bad_input(format!(
                "--mount-opts {:?} mounts the testbed read-only; the exerciser writes, so it needs a writable filesystem",
                args.testbed.params.mount_opts
            )));
        }
        if args.params.file.contains('/') {
            return Err(bad_input(format!(
                "--file {:?}: with --fs the file lives on the fresh testbed; give a plain name",
                args.params.file
            )));
        }
    }
    if let Some(dir) = &args.testbed.dir {
        if args.params.remount_every.is_some() {
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
    if args.params.file.contains('/') {
        let p = Path::new(&args.params.file);
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
    // Validated as a plan's workload is, then where it is to run.
    args.params.validate()?;
    check_place(&args)?;
    if args.minimize.minimize.is_some() {
        return minimize::run(
            &args.minimize,
            args.params.replay.as_deref(),
            args.run.params.settings.crash().judged(),
            args.run.output.quiet,
        );
    }
    if let Some(r) = &args.params.replay {
        let log = ReplayLog::load(r)?;
        // The result records the seed the steps were made from, and the lengths the replay
        // models (the header's, within the flags' limits), so that the run is admitted for
        // the memory and space it will take.
        args.run.params.settings.seed.value.get_or_insert(log.seed);
        args.params.max_len = log.params.max_len;
        args.params.max_op_len = log.params.max_op_len;
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
                args.testbed.params.fs_size = Size(log.testbed.size);
            }
            args.testbed.params.mount_opts = log.testbed.mount_options.clone();
        }
        if args.params.file.contains('/') && args.testbed.fs.is_some() {
            args.params.file = Exercise::default().file;
        }
        // The recorded testbed's mount options are checked as the flag's are (a read-only
        // mount is refused before the testbed is built).
        check_place(&args).map_err(|e| {
            bad_input(format!(
                "--replay {} line {}: the testbed it was recorded on: {e:#}; replay elsewhere with --fs KIND or --dir PATH",
                r.display(),
                log.testbed_line
            ))
        })?;
    }
    // A --file path with no place: run in its directory.
    if args.testbed.fs.is_none() && args.testbed.dir.is_none() && args.params.file.contains('/') {
        let p = Path::new(&args.params.file);
        args.testbed.dir = Some(
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        );
    }
    let mut store = args.store.open_for(&args.run)?;
    let place = args.run.admit(args.testbed.place()?, &args.params)?;
    let outcomes = crate::lab::runner::run(&place, &args.params, &args.run.options())?;
    let quiet = args.run.output.silent();
    super::store::index_written(store.as_mut(), &outcomes, &args.run.params.out.dir, quiet);
    args.run
        .print(&outcomes, crate::workload::exercise::report::summary_table)?;
    Ok(super::common::crash_status(
        outcomes.iter().map(|o| &o.result),
    ))
}
