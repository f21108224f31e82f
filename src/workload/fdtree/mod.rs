//! `fdtree`: the LLNL fdtree metadata benchmark (seed study 5, the ext4 journal-size study),
//! done exactly and without forking a `dd` per file.
//!
//! The tree is fdtree's: a base directory and, in every directory above the leaves, `D`
//! subdirectories named `L<level>D<n>` (level counting down from `L` at the base to 1), so
//! 1 + D + … + D^L directories; in every directory `F` files named `L<level>F<n>` of `S` bytes
//! (written in 4 KiB `write(2)` calls, as `dd bs=4096` does). The four phases run in fdtree's
//! order and visit entries in its order (highest index first, parents before children):
//! `dir_create` (mkdir), `file_create` (open + writes + close; files/s and KiB/s),
//! `file_remove` (unlink), `dir_remove` (rmdir, children before parents). fdtree times each
//! loop without a sync (`--fsync none`, what it measured); `--fsync phase` keeps that timing
//! and follows each create and remove phase with a phase of its own, `<phase>_sync`, timing
//! one syncfs: the writeback fdtree's timing left out, recorded beside it. Optional `stat`
//! (stat every file, as mdtest does) and `read` (read every file back) phases come after
//! `file_create`; the cache is made cold (`--cold`) before each of them and before
//! `file_remove`.
//!
//! `--threads T` runs T workers at once behind a barrier, each on its own tree
//! `LEVEL0.<worker>` (as parallel fdtree instances or `mdtest -u` do): the trees are disjoint,
//! every count is T times one tree, and each worker's own figures are kept.
//!
//! Under MPI (`crate::dist`), worker trees are numbered across ranks in a shared directory, the
//! stat and read phases may walk the next rank's trees (`--read-neighbour`), and a phase cut at
//! the stonewall leaves the tree partly made: later phases then pass over missing entries.
//!
//! Entry names are generated from counters in a stack buffer and the tree is walked with one
//! open directory descriptor per level, so memory does not grow with the number of entries.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use super::durable_tree::{self, Expected, Ledger, ALL_WORKERS};
use super::fsync::{FsyncMode, FsyncModes};
use super::names::{
    check_inodes, digits, ensure_fds, timed_syncfs, tree_space, write_size, NameBuf, PATH_MAX,
};
use super::{RunContext, Workload};
use crate::base::error::{bad_input, bad_param, bad_params, SystemFailure};
use crate::base::sys::{fs_error, Dir};
use crate::base::units::{Overflow, Size};
use crate::measure::{OpDef, OpId, Recorder};
use crate::results::{MetricDef, PhaseResult};

mod tree;

pub use tree::base_name;
use tree::{
    dir_name, each_entry, file_name, insert_kib_per_s, missing, nothing, Names, Removal, Trees,
};

crate::choice! {
    /// The four scenarios of the journal-size study (Linux Magazine, 2009), with fdtree's own
    /// parameters: `-s 1` (4 KiB) and `-s 1000` (4,096,000 bytes, the study's "4 MiB") files.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Scenario("scenario") {
        /// 4 KiB files, shallow tree: L=3 D=20 F=40 (8421 dirs, 336840 files).
        SmallShallow = "small-shallow",
        /// 4 KiB files, deep tree: L=10 D=3 F=4 (88573 dirs, 354292 files).
        SmallDeep = "small-deep",
        /// 4 MiB files, shallow tree: L=2 D=17 F=10 (307 dirs, 3070 files, 12.3 GB).
        MediumShallow = "medium-shallow",
        /// 4 MiB files, deep tree: L=9 D=2 F=4 (1023 dirs, 4092 files, 16.8 GB).
        MediumDeep = "medium-deep",
    }
}

/// The fsync modes of fdtree: every one (fdtree itself never syncs: none).
pub const FSYNC: FsyncModes = FsyncModes {
    workload: "fdtree",
    modes: &FsyncMode::ALL,
};

/// The phase that times the syncfs after phase `name` under `--fsync phase`.
pub fn sync_phase_name(name: &str) -> String {
    format!("{name}_sync")
}

impl Scenario {
    /// Levels, directories per level, files per directory, file size in bytes.
    pub fn shape(self) -> (u32, u64, u64, u64) {
        match self {
            Self::SmallShallow => (3, 20, 40, 4096),
            Self::SmallDeep => (10, 3, 4, 4096),
            Self::MediumShallow => (2, 17, 10, 1000 * 4096),
            Self::MediumDeep => (9, 2, 4, 1000 * 4096),
        }
    }
}

/// Parameters of the fdtree workload, resolved (a scenario's values filled in).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(from = "FdtreeSpec")]
pub struct Fdtree {
    /// The study scenario the shape came from, if any (explicit values override it).
    pub scenario: Option<Scenario>,
    /// Directory levels below the base (`-l`).
    pub levels: u32,
    /// Subdirectories in every non-leaf directory (`-d`).
    pub dirs_per_level: u64,
    /// Files in every directory (`-f`); 0 makes a tree of directories only (no file phases).
    pub files_per_dir: u64,
    /// Size of every file, bytes (`-s` × 4096).
    pub file_size: u64,
    /// Size of each write(2) (fdtree's dd uses 4096).
    pub block: u64,
    /// Workers, each on its own tree.
    pub threads: u32,
    /// When written data is forced out (fdtree never syncs: none).
    pub fsync: FsyncMode,
    /// Add a `stat` phase (stat every file) after file_create.
    pub stat: bool,
    /// Add a `read` phase (read every file back) after file_create (and stat).
    pub read: bool,
    /// Write the on-disk tree (walked after file_create, before removal) to this file.
    pub tree_list: Option<PathBuf>,
}

/// The fdtree metadata benchmark (journal-size study): a tree of 1 + D + … + D^L
/// directories with F files of S bytes in each; phases dir_create (dirs/s), file_create
/// (files/s, KiB/s), file_remove, dir_remove, plus optional stat and read.
///
/// Defaults are fdtree's: L=4 D=10 F=10 S=40K (11111 directories, 111110 files).
/// --scenario picks one of the study's four (see below).
///
/// This is the plan-file and flag form of [`Fdtree`]: the shape is optional, a scenario fills
/// it in.
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct FdtreeSpec {
    /// A scenario of the journal-size study (4 KiB or 4 MiB files, shallow or deep tree):
    ///
    ///   small-shallow   L=3  D=20 F=40 S=4K      8421 dirs  336840 files   1.3 GiB
    ///   small-deep      L=10 D=3  F=4  S=4K     88573 dirs  354292 files   1.4 GiB
    ///   medium-shallow  L=2  D=17 F=10 S=4000K    307 dirs    3070 files  11.7 GiB
    ///   medium-deep     L=9  D=2  F=4  S=4000K   1023 dirs    4092 files  15.6 GiB
    ///
    /// (fdtree -l L -d D -f F -s S/4K; the "4 MiB" files are fdtree's -s 1000.)
    ///
    /// These are the study's full sizes.
    /// Any of --levels, --dirs-per-level, --files-per-dir, --file-size given as well overrides
    /// the scenario's value, e.g. --file-size 400K scales a medium scenario down to fit a
    /// smaller testbed (the result records the values used).
    #[arg(long, value_name = "NAME", verbatim_doc_comment, value_parser = super::params::item::<Scenario>)]
    pub scenario: Option<Scenario>,
    /// Directory levels below the base (fdtree -l) [default: 4].
    #[arg(long, value_name = "L")]
    pub levels: Option<u32>,
    /// Subdirectories in every non-leaf directory (fdtree -d) [default: 10].
    #[arg(long, value_name = "D")]
    pub dirs_per_level: Option<u64>,
    /// Files in every directory (fdtree -f; 0: directories only, no file phases) [default: 10].
    #[arg(long, value_name = "F")]
    pub files_per_dir: Option<u64>,
    /// Size of every file (fdtree -s N means N × 4K) [default: 40K].
    #[arg(long, value_name = "SIZE")]
    pub file_size: Option<Size>,
    /// Size of each write(2) (fdtree's dd writes 4K blocks) [default: 4K].
    #[arg(long, value_name = "SIZE")]
    pub block: Option<Size>,
    /// Workers started together, each building, timing and removing its own tree
    /// LEVEL0.<worker> (as parallel fdtree runs or mdtest -u): every count is T × one tree
    /// [default: 1].
    #[arg(long, value_name = "T")]
    pub threads: Option<u32>,
    /// When written data is forced out, in the create and remove phases (fdtree itself never
    /// syncs: none) [default: none].
    #[arg(long, value_name = "none|file|end|phase|last", value_parser = FSYNC)]
    pub fsync: Option<FsyncMode>,
    /// Add a `stat` phase after file_create: stat every file (as mdtest does) and check its
    /// size. --cold applies before it.
    #[arg(long)]
    pub stat: bool,
    /// Add a `read` phase after file_create (and stat): read every file back and check its
    /// length. --cold applies before it.
    #[arg(long)]
    pub read: bool,
    /// Write the tree as found on disk after file_create (one line per entry:
    /// `d<TAB>path` or `f<TAB>size<TAB>path`, relative to the workload directory) to FILE.
    #[arg(long, value_name = "FILE")]
    pub tree_list: Option<PathBuf>,
}

/// fdtree's defaults: L=4 D=10 F=10, files of 10 blocks of 4 KiB.
pub const DEFAULT_SHAPE: (u32, u64, u64, u64) = (4, 10, 10, 40 * 1024);

impl From<FdtreeSpec> for Fdtree {
    fn from(s: FdtreeSpec) -> Self {
        let (l, d, f, size) = s.scenario.map_or(DEFAULT_SHAPE, Scenario::shape);
        Self {
            scenario: s.scenario,
            levels: s.levels.unwrap_or(l),
            dirs_per_level: s.dirs_per_level.unwrap_or(d),
            files_per_dir: s.files_per_dir.unwrap_or(f),
            file_size: s.file_size.map_or(size, Size::bytes),
            block: s.block.map_or(4096, Size::bytes),
            threads: s.threads.unwrap_or(1),
            fsync: s.fsync.unwrap_or(FsyncMode::None),
            stat: s.stat,
            read: s.read,
            tree_list: s.tree_list,
        }
    }
}

impl Default for Fdtree {
    fn default() -> Self {
        FdtreeSpec::default().into()
    }
}

const DIR_CREATE_OPS: [OpDef; 2] = [OpDef::primary("mkdir"), OpDef::secondary("syncfs")];
const FILE_CREATE_OPS: [OpDef; 4] = [
    OpDef::primary("create"),
    OpDef::secondary("write"),
    OpDef::secondary("fsync"),
    OpDef::secondary("syncfs"),
];
const STAT_OPS: [OpDef; 1] = [OpDef::primary("stat")];
const READ_OPS: [OpDef; 2] = [
    OpDef::primary("read_file").reading(),
    OpDef::secondary("read").reading(),
];
const FILE_REMOVE_OPS: [OpDef; 2] = [OpDef::primary("unlink"), OpDef::secondary("syncfs")];
const DIR_REMOVE_OPS: [OpDef; 2] = [OpDef::primary("rmdir"), OpDef::secondary("syncfs")];
/// The phase after a create or remove phase under `--fsync phase`: one syncfs.
const SYNC_OPS: [OpDef; 1] = [OpDef::primary("syncfs")];

/// The create and remove phases, which `--fsync end` syncs inside and `--fsync phase` follows
/// with a sync phase of their own.
pub const DIR_CREATE: &str = "dir_create";
pub const FILE_CREATE: &str = "file_create";
pub const FILE_REMOVE: &str = "file_remove";
pub const DIR_REMOVE: &str = "dir_remove";

impl Fdtree {
    /// Directories in one tree: 1 + D + … + D^L (None when it overflows).
    pub fn dirs_per_tree(&self) -> Option<u64> {
        let mut total: u64 = 0;
        for _ in 0..=self.levels {
            total = total.checked_mul(self.dirs_per_level)?.checked_add(1)?;
        }
        Some(total)
    }

    /// Directories over all workers.
    pub fn total_dirs(&self) -> u64 {
        self.dirs_per_tree()
            .unwrap_or(u64::MAX)
            .saturating_mul(self.threads as u64)
    }

    /// Files over all workers.
    pub fn total_files(&self) -> u64 {
        self.total_dirs().saturating_mul(self.files_per_dir)
    }

    /// Length of the longest path below the workload root (a file in a leaf directory).
    pub fn deepest_relative_path(&self) -> usize {
        let mut len = base_name(self.threads.saturating_sub(1) as u64).len();
        for level in 1..=self.levels as u64 {
            len += 3 + digits(level) + digits(self.dirs_per_level);
        }
        len + 4 + digits(self.files_per_dir)
    }

    fn shown(&self) -> String {
        format!(
            "L={} D={} F={} S={}",
            self.levels,
            self.dirs_per_level,
            self.files_per_dir,
            crate::base::units::format_size(self.file_size)
        )
    }

    /// Where this process's workers' trees are, for a phase: under `root`, numbered from `off`
    /// (see [`RunContext::worker_base`]).
    fn trees_at(&self, root: PathBuf, off: u64, partial: bool) -> Trees {
        let bases = (off..off + self.threads as u64)
            .map(|w| root.join(base_name(w)).display().to_string())
            .collect();
        Trees {
            root,
            off,
            partial,
            bases,
            levels: self.levels,
            dirs: self.dirs_per_level,
        }
    }

    /// Where this process's workers' trees are, for a phase.
    fn trees(&self, ctx: &RunContext) -> Trees {
        let root = ctx.root().to_path_buf();
        let off = ctx.worker_base(self.threads as u64);
        self.trees_at(root, off, ctx.partial())
    }

    /// Runs a measured phase with one worker per tree of `trees`; `work` gets the trees, the
    /// worker's number and its recorder.
    fn tree_phase<'c, F>(
        &self,
        ctx: &'c mut RunContext,
        trees: Trees,
        name: &str,
        ops: &[OpDef],
        expected: u64,
        work: F,
    ) -> Result<&'c mut PhaseResult>
    where
        F: Fn(&Trees, usize, &mut Recorder) -> Result<()> + Sync,
    {
        ctx.phase(
            name,
            ops,
            Some(expected),
            self.threads as usize,
            |w, rec| work(&trees, w, rec),
        )
    }

    /// A create or remove phase on this process's own trees (see [`Self::trees`]), its count
    /// of `expected` entries kept as the phase's figure `counted` ("dirs" or "files").
    fn own_tree_phase<'c, F>(
        &self,
        ctx: &'c mut RunContext,
        (name, ops): (&str, &[OpDef]),
        (counted, expected): (&str, u64),
        work: F,
    ) -> Result<&'c mut PhaseResult>
    where
        F: Fn(&Trees, usize, &mut Recorder) -> Result<()> + Sync,
    {
        let trees = self.trees(ctx);
        let phase = self.tree_phase(ctx, trees, name, ops, expected, work)?;
        phase.extra.insert(counted.into(), phase.ops as f64);
        Ok(phase)
    }

    /// The syncfs a create or remove phase ends with, inside its time (`--fsync end`).
    fn in_phase_syncfs(&self, rec: &Recorder) -> Option<OpId> {
        (self.fsync == FsyncMode::End).then(|| rec.op("syncfs"))
    }

    /// Under `--fsync phase`, the phase `<name>_sync` after phase `name`: one syncfs of the
    /// filesystem, timed, with the device writes of the writeback `name` left behind; under
    /// `--fsync last`, only after the last phase (dir_remove). Nothing under the other modes.
    fn sync_after(&self, ctx: &mut RunContext, name: &str, ledger: Option<&Ledger>) -> Result<()> {
        let after = match self.fsync {
            FsyncMode::Phase => true,
            FsyncMode::Last => name == DIR_REMOVE,
            FsyncMode::None | FsyncMode::File | FsyncMode::End => false,
        };
        if !after {
            return Ok(());
        }
        let root = ctx.root().to_path_buf();
        let shown = root.display().to_string();
        ctx.phase(&sync_phase_name(name), &SYNC_OPS, Some(1), 1, |_, rec| {
            let op = rec.op("syncfs");
            let start = durable_tree::now();
            timed_syncfs(rec, op, &Dir::open_path(&root)?, &shown)?;
            if let Some(l) = ledger {
                l.synced(ALL_WORKERS, start);
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Runs phase `name` (one of the create and remove phases), then its sync phase under
    /// `--fsync phase` (see [`Self::sync_after`]); with `ledger` (crash points follow), what
    /// they make durable is kept in it.
    fn with_sync(
        &self,
        ctx: &mut RunContext,
        (name, ledger): (&str, Option<&Ledger>),
        phase: fn(&Self, &mut RunContext, Option<&Ledger>) -> Result<()>,
    ) -> Result<()> {
        phase(self, ctx, ledger)?;
        self.sync_after(ctx, name, ledger)
    }

    /// The slot of file `f` (1..=F) of directory `node` of worker `w`'s tree in the crash
    /// record (see [`durable_tree`]).
    fn slot(&self, w: usize, node: u64, f: u64) -> u64 {
        let per_tree = self.dirs_per_tree().unwrap_or(0);
        ((w as u64) * per_tree + node) * self.files_per_dir + (f - 1)
    }

    fn dir_create(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let d = self.dirs_per_level;
        self.own_tree_phase(
            ctx,
            (DIR_CREATE, &DIR_CREATE_OPS),
            ("dirs", self.total_dirs()),
            |t, w, rec| {
                let mkdir = rec.op("mkdir");
                let root_fd = Dir::open_path(&t.root)?;
                let mut name = NameBuf::new();
                name.push_str(&t.base_name(w));
                let t0 = Instant::now();
                root_fd
                    .mkdir(name.as_cstr())
                    .map_err(|e| fs_error("mkdir", &t.bases[w], e))?;
                rec.record(mkdir, t0, 0);
                let mut pre = |rec: &mut Recorder, fd: &Dir, level: u32, _, name: &mut NameBuf| {
                    if level == 0 {
                        return Ok(());
                    }
                    for nd in (1..=d).rev() {
                        dir_name(name, level, nd);
                        let t0 = Instant::now();
                        fd.mkdir(name.as_cstr()).map_err(|e| ("mkdir", e))?;
                        rec.record(mkdir, t0, 0);
                    }
                    Ok(())
                };
                let syncfs = (self.in_phase_syncfs(rec), ledger);
                t.walk_then_sync(rec, w, false, (&mut pre, &mut nothing), syncfs)
            },
        )?;
        Ok(())
    }

    fn file_create(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let (nf, size) = (self.files_per_dir, self.file_size);
        let block = self.block.min(size).max(1) as usize;
        let fsync = self.fsync;
        let phase = self.own_tree_phase(
            ctx,
            (FILE_CREATE, &FILE_CREATE_OPS),
            ("files", self.total_files()),
            |t, w, rec| {
                let (create, write, fsync_op) =
                    (rec.op("create"), rec.op("write"), rec.op("fsync"));
                let buf = vec![0u8; block];
                let mut pre =
                    |rec: &mut Recorder, fd: &Dir, level: u32, node, name: &mut NameBuf| {
                        let file_name = |n: &mut NameBuf, f| file_name(n, level, f);
                        each_entry(rec, nf, name, file_name, |rec, name, f| {
                            let t0 = Instant::now();
                            let file = fd.create(name.as_cstr()).map_err(|e| ("create", e))?;
                            write_size(rec, write, &file, &buf, size, t0)
                                .map_err(|e| ("write", e))?;
                            if fsync == FsyncMode::File {
                                let t1 = Instant::now();
                                file.fsync().map_err(|e| ("fsync", e))?;
                                rec.record(fsync_op, t1, 0);
                            }
                            file.close().map_err(|e| ("close", e))?;
                            rec.record(create, t0, 0);
                            // Whole when its fsync, else its close, returned (see durable_tree).
                            if let Some(l) = ledger {
                                l.made(self.slot(w, node, f));
                            }
                            Ok(())
                        })
                    };
                let syncfs = (self.in_phase_syncfs(rec), ledger);
                t.walk_then_sync(rec, w, true, (&mut pre, &mut nothing), syncfs)
            },
        )?;
        let files_per_s = phase.ops as f64 / phase.wall_s.max(1e-9);
        phase.extra.insert("files_per_s".into(), files_per_s);
        insert_kib_per_s(phase);
        Ok(())
    }

    /// Visits every file of every worker's tree as a measured phase: `make` builds each worker's
    /// per-file action (given its recorder), which returns the size it saw; a size other than
    /// `--file-size` fails the phase, naming the file (`what` and `verb` word the message;
    /// `with_rate` adds the phase's KiB/s to its figures).
    fn visit_files<M, V>(
        &self,
        ctx: &mut RunContext,
        phase_name: &str,
        ops: &[OpDef],
        (what, verb, with_rate): (&str, &str, bool),
        make: M,
    ) -> Result<()>
    where
        M: Fn(&Recorder) -> V + Sync,
        V: FnMut(&mut Recorder, &Dir, &mut NameBuf) -> Result<u64, (&'static str, Errno)>,
    {
        // Under MPI with --read-neighbour, another rank's tree (see `dist`).
        let (root, off) = ctx.read_source(self.threads as u64);
        let trees = self.trees_at(root, off, ctx.partial());
        let (nf, size) = (self.files_per_dir, self.file_size);
        let phase = self.tree_phase(
            ctx,
            trees,
            phase_name,
            ops,
            self.total_files(),
            |t, w, rec| {
                let mut visit = make(rec);
                let mut wrong: Option<(String, u64)> = None;
                let mut pre = |rec: &mut Recorder, fd: &Dir, level: u32, _, name: &mut NameBuf| {
                    let file_name = |n: &mut NameBuf, f| file_name(n, level, f);
                    each_entry(rec, nf, name, file_name, |rec, name, _| {
                        let got = visit(rec, fd, name)?;
                        if got != size && wrong.is_none() {
                            wrong = Some((name.as_str().to_string(), got));
                        }
                        Ok(())
                    })
                };
                t.walk_then_sync(rec, w, true, (&mut pre, &mut nothing), (None, None))?;
                if let Some((name, got)) = wrong {
                    return Err(anyhow::Error::new(SystemFailure(format!(
                        "{what}: a file named {name} below {} {verb} {got} bytes, expected {size}",
                        t.bases[w]
                    ))));
                }
                Ok(())
            },
        )?;
        let files = phase.ops as f64;
        phase.extra.insert("files".into(), files);
        if with_rate {
            insert_kib_per_s(phase);
        }
        Ok(())
    }

    fn stat_phase(&self, ctx: &mut RunContext) -> Result<()> {
        let (partial, size) = (ctx.partial(), self.file_size);
        self.visit_files(ctx, "stat", &STAT_OPS, ("stat", "has", false), |rec| {
            let stat = rec.op("stat");
            move |rec: &mut Recorder, fd: &Dir, name: &mut NameBuf| {
                let t0 = Instant::now();
                match fd.stat(name.as_cstr()) {
                    Ok(st) => {
                        rec.record(stat, t0, 0);
                        Ok(st.st_size as u64)
                    }
                    Err(e) if missing(partial, e) => Ok(size),
                    Err(e) => Err(("stat", e)),
                }
            }
        })
    }

    fn read_phase(&self, ctx: &mut RunContext) -> Result<()> {
        let block = self.block.max(4096) as usize;
        let (partial, size) = (ctx.partial(), self.file_size);
        self.visit_files(ctx, "read", &READ_OPS, ("read", "gave", true), |rec| {
            let (file_op, read_op) = (rec.op("read_file"), rec.op("read"));
            let mut buf = vec![0u8; block];
            move |rec: &mut Recorder, fd: &Dir, name: &mut NameBuf| {
                let t0 = Instant::now();
                let file = match fd.open_read(name.as_cstr()) {
                    Ok(file) => file,
                    Err(e) if missing(partial, e) => return Ok(size),
                    Err(e) => return Err(("open", e)),
                };
                let mut total = 0u64;
                let mut t = t0;
                loop {
                    let r = file.read(&mut buf).map_err(|e| ("read", e))?;
                    t = rec.record(read_op, t, r as u64);
                    if r == 0 {
                        break;
                    }
                    total += r as u64;
                }
                file.close().map_err(|e| ("close", e))?;
                rec.record(file_op, t0, 0);
                Ok(total)
            }
        })
    }

    fn file_remove(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let nf = self.files_per_dir;
        self.own_tree_phase(
            ctx,
            (FILE_REMOVE, &FILE_REMOVE_OPS),
            ("files", self.total_files()),
            |t, w, rec| {
                let entry = Removal {
                    op: rec.op("unlink"),
                    dir: false,
                    partial: t.partial,
                };
                let mut pre =
                    |rec: &mut Recorder, fd: &Dir, level: u32, node, name: &mut NameBuf| {
                        let names = (nf, |n: &mut NameBuf, f| file_name(n, level, f));
                        entry.remove_each(rec, fd, names, name, |f| {
                            if let Some(l) = ledger {
                                l.removing(self.slot(w, node, f));
                            }
                        })
                    };
                let syncfs = (self.in_phase_syncfs(rec), ledger);
                t.walk_then_sync(rec, w, true, (&mut pre, &mut nothing), syncfs)
            },
        )?;
        Ok(())
    }

    fn dir_remove(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let d = self.dirs_per_level;
        self.own_tree_phase(
            ctx,
            (DIR_REMOVE, &DIR_REMOVE_OPS),
            ("dirs", self.total_dirs()),
            |t, w, rec| {
                let rmdir = rec.op("rmdir");
                let syncfs = self.in_phase_syncfs(rec);
                let root_fd = Dir::open_path(&t.root)?;
                let base = t.open(w)?;
                let entry = Removal {
                    op: rmdir,
                    dir: true,
                    partial: t.partial,
                };
                let mut post = |rec: &mut Recorder, fd: &Dir, level: u32, _, name: &mut NameBuf| {
                    if level == 0 {
                        return Ok(());
                    }
                    let names = (d, |n: &mut NameBuf, nd| dir_name(n, level, nd));
                    entry.remove_each(rec, fd, names, name, |_| {})
                };
                t.walk(rec, w, base, false, &mut nothing, &mut post)?;
                let mut name = NameBuf::new();
                name.push_str(&t.base_name(w));
                let t0 = Instant::now();
                match root_fd.unlink(name.as_cstr(), true) {
                    Ok(()) => {
                        rec.record(rmdir, t0, 0);
                    }
                    // Left for the workload directory's removal.
                    Err(e) if missing(t.partial, e) || rec.stonewalled() => {}
                    Err(e) => return Err(fs_error("rmdir", &t.bases[w], e)),
                }
                if let Some(op) = syncfs {
                    let start = durable_tree::now();
                    timed_syncfs(rec, op, &root_fd, &t.root.display().to_string())?;
                    if let Some(l) = ledger {
                        l.synced(w as u32, start);
                    }
                }
                Ok(())
            },
        )?;
        Ok(())
    }

    /// Checks that need the workload root: full path length, inodes, open-file limit.
    fn check_place(&self, root: &Path) -> Result<()> {
        let deepest = root.as_os_str().len() + 1 + self.deepest_relative_path();
        if deepest >= PATH_MAX {
            return Err(bad_input(format!(
                "fdtree {}: the deepest path would be {deepest} bytes long under {}, over PATH_MAX ({}); use fewer --levels",
                self.shown(),
                root.display(),
                PATH_MAX - 1
            )));
        }
        check_inodes(root, self.inodes_needed(), "fdtree")?;
        ensure_fds(
            (self.levels as u64 + 3) * self.threads as u64 + 64,
            "fdtree",
        )
    }
}

/// Writes every entry below `root` as `d<TAB>path` or `f<TAB>size<TAB>path` lines (paths
/// relative to `root`, in directory order), walking the disk, not the generated names.
pub fn write_tree_list(root: &Path, out: &Path) -> Result<()> {
    let target = crate::base::outfile::OutFile::resolve(out, "--tree-list")?;
    let mut w = Vec::new();
    fn walk_dir(dir: &Path, rel: &Path, w: &mut impl std::io::Write) -> Result<()> {
        for ent in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let ent = ent.with_context(|| format!("reading {}", dir.display()))?;
            let md = ent
                .metadata()
                .with_context(|| format!("stat {}", ent.path().display()))?;
            let r = rel.join(ent.file_name());
            if md.is_dir() {
                writeln!(w, "d\t{}", r.display())?;
                walk_dir(&ent.path(), &r, w)?;
            } else {
                writeln!(w, "f\t{}\t{}", md.len(), r.display())?;
            }
        }
        Ok(())
    }
    walk_dir(root, Path::new(""), &mut w)?;
    target.write(&w)
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[
    MetricDef::count("dirs", "directories", ""),
    MetricDef::count("files", "files", ""),
    MetricDef::rate("files_per_s", "file rate", "files/s"),
    MetricDef::rate("kib_per_s", "file data rate", "KiB/s"),
];

impl Workload for Fdtree {
    fn inodes_needed(&self) -> u64 {
        self.total_dirs().saturating_add(self.total_files())
    }

    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "fdtree"
    }

    fn op_kinds(&self) -> Vec<OpDef> {
        [
            &DIR_CREATE_OPS[..],
            &FILE_CREATE_OPS,
            &STAT_OPS,
            &READ_OPS,
            &FILE_REMOVE_OPS,
            &DIR_REMOVE_OPS,
            &SYNC_OPS,
        ]
        .concat()
    }

    fn line_axis(&self) -> Option<&'static str> {
        Some("threads")
    }

    fn params(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "scenario": self.scenario.map(Scenario::name),
            "levels": self.levels,
            "dirs_per_level": self.dirs_per_level,
            "files_per_dir": self.files_per_dir,
            "file_size": self.file_size,
            "block": self.block,
            "threads": self.threads,
            "fsync": self.fsync,
            "stat": self.stat,
            "read": self.read,
        });
        if let Some(p) = &self.tree_list {
            v["tree_list"] = serde_json::json!(p);
        }
        v
    }

    fn validate(&self) -> Result<()> {
        let s = self.shown();
        if self.levels == 0 || self.dirs_per_level == 0 {
            let field = if self.levels == 0 {
                "levels"
            } else {
                "dirs_per_level"
            };
            return Err(bad_param(
                field,
                format!("fdtree {s}: --levels and --dirs-per-level must be 1 or more"),
            ));
        }
        if self.files_per_dir == 0 && (self.stat || self.read) {
            return Err(bad_param(
                "files_per_dir",
                format!("fdtree {s}: --stat and --read need files: give --files-per-dir 1 or more"),
            ));
        }
        if self.threads == 0 {
            return Err(bad_param("threads", "--threads must be 1 or more"));
        }
        if self.threads > 1024 {
            return Err(bad_param(
                "threads",
                format!(
                    "--threads {} is more than 1024 workers; each is a thread with its own tree",
                    self.threads
                ),
            ));
        }
        super::params::check_block("block", self.block)?;
        let Some(per_tree) = self.dirs_per_tree() else {
            return Err(bad_params(&["levels", "dirs_per_level"], format!(
                "fdtree {s}: --levels {} with --dirs-per-level {} makes more than 2^64 directories per tree (1+D+…+D^L); use fewer levels or fewer directories per level",
                self.levels, self.dirs_per_level
            )));
        };
        if per_tree
            .checked_mul(self.threads as u64)
            .and_then(|n| n.checked_mul(self.files_per_dir + 1))
            .is_none_or(|n| n > 1 << 40)
        {
            return Err(bad_params(&["levels", "dirs_per_level"], format!(
                "fdtree {s}: --levels {} with --dirs-per-level {} makes {per_tree} directories per tree (1+D+…+D^L), and with --files-per-dir {} and --threads {} more entries than any filesystem holds; use fewer levels or fewer directories per level",
                self.levels, self.dirs_per_level, self.files_per_dir, self.threads
            )));
        }
        // The root's own path is added when the run starts; 64 bytes is the least it takes.
        let rel = self.deepest_relative_path();
        if rel + 64 >= PATH_MAX {
            return Err(bad_input(format!(
                "fdtree {s}: the deepest path below the workload directory alone would be {rel} bytes, near or over PATH_MAX ({}); use fewer --levels",
                PATH_MAX - 1
            )));
        }
        Ok(())
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        let over = Overflow::of(
            "fdtree",
            "space estimate",
            format!(
                "--levels {} --dirs-per-level {} --files-per-dir {} --file-size {} --threads {}",
                self.levels, self.dirs_per_level, self.files_per_dir, self.file_size, self.threads
            ),
            "--levels, --dirs-per-level, --files-per-dir, --file-size or --threads",
        );
        // A block per directory, file data in 4 KiB blocks, and an inode's worth (512 bytes,
        // xfs's size) per entry for filesystems that allocate inodes from free space.
        self.dirs_per_tree()
            .and_then(|d| d.checked_mul(self.threads as u64))
            .and_then(|dirs| tree_space(dirs, self.files_per_dir, self.file_size, 512))
            .ok_or_else(over)
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        (self.block.max(4096))
            .checked_add(2 << 20)
            .and_then(|per| per.checked_mul(self.threads as u64))
            .and_then(|m| m.checked_add(1 << 20))
            .ok_or_else(Overflow::of(
                "fdtree",
                "memory estimate",
                format!("--threads {} --block {}", self.threads, self.block),
                "--threads or --block",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        self.check_place(ctx.root())?;
        // What the run makes durable, kept when crash points follow (see durable_tree).
        let kept = (ctx.crash_points() && self.fsync != FsyncMode::None).then(|| {
            let per_tree = self.dirs_per_tree().unwrap_or(0) * self.files_per_dir;
            Ledger::new(self.total_files(), per_tree, self.fsync == FsyncMode::File)
        });
        let ledger = kept.as_ref();
        self.with_sync(ctx, (DIR_CREATE, ledger), Self::dir_create)?;
        // A tree of directories only (-f 0) has no file phases: a phase of nothing would
        // time only the walk.
        let files = self.files_per_dir > 0;
        if files {
            self.with_sync(ctx, (FILE_CREATE, ledger), Self::file_create)?;
        }
        ctx.layout_point()?;
        // Under MPI, rank 0 alone writes it (of its own tree, or of the shared directory).
        if let Some(out) = self
            .tree_list
            .as_ref()
            .filter(|_| !ctx.coordinator().is_secondary())
        {
            write_tree_list(ctx.root(), out)?;
        }
        if self.stat {
            ctx.make_cold()?;
            self.stat_phase(ctx)?;
        }
        if self.read {
            ctx.make_cold()?;
            self.read_phase(ctx)?;
        }
        ctx.make_cold()?;
        if files {
            self.with_sync(ctx, (FILE_REMOVE, ledger), Self::file_remove)?;
        }
        self.with_sync(ctx, (DIR_REMOVE, ledger), Self::dir_remove)?;
        let naming = Names {
            off: ctx.worker_base(self.threads as u64),
            levels: self.levels,
            dirs: self.dirs_per_level,
            files: self.files_per_dir,
            per_tree: self.dirs_per_tree().unwrap_or(0),
        };
        let pattern = vec![0u8; self.block.min(self.file_size).max(1) as usize];
        let expected = Expected::new(self.file_size, &pattern);
        let words = durable_tree::words("fdtree", self.fsync);
        durable_tree::leave_judge(ctx, kept, Box::new(naming), expected, words);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::workload::durable_tree::Naming;

    #[test]
    fn a_crash_record_slot_names_the_file_the_walk_made_there() {
        let f = Fdtree {
            levels: 2,
            dirs_per_level: 3,
            files_per_dir: 4,
            threads: 2,
            ..Fdtree::default()
        };
        let names = Names {
            off: 0,
            levels: 2,
            dirs: 3,
            files: 4,
            per_tree: f.dirs_per_tree().unwrap(),
        };
        // The base, its child 3, and that one's child 2 (node (0×3+3)×3+2 = 11).
        assert_eq!(names.path(f.slot(0, 0, 1)), "LEVEL0.0/L2F1");
        assert_eq!(names.path(f.slot(0, 3, 4)), "LEVEL0.0/L2D3/L1F4");
        assert_eq!(names.path(f.slot(1, 11, 2)), "LEVEL0.1/L2D3/L1D2/L0F2");
        assert_eq!(f.slot(1, 12, 4) + 1, f.total_files());
    }

    #[test]
    fn scenarios_have_one_set_of_names() {
        crate::base::choice::testing::one_set_of_names::<Scenario>();
    }

    #[test]
    fn every_fsync_mode_is_fdtree_s_and_phase_is_one() {
        crate::workload::fsync::testing::takes_exactly::<FdtreeSpec>(FSYNC, |f| {
            f.fsync.unwrap_or(FsyncMode::None)
        });
        let f: Fdtree = serde_json::from_value(serde_json::json!({"fsync": "phase"})).unwrap();
        assert_eq!(f.fsync, FsyncMode::Phase);
        assert_eq!(f.params()["fsync"], "phase");
        let again: Fdtree = serde_json::from_value(f.params()).unwrap();
        assert_eq!(again, f);
        assert_eq!(sync_phase_name(DIR_REMOVE), "dir_remove_sync");
        assert!(serde_json::from_value::<Fdtree>(serde_json::json!({"fsync": "later"})).is_err());
    }

    #[test]
    fn default_counts_are_fdtrees() {
        let f = Fdtree::default();
        assert_eq!(f.dirs_per_tree(), Some(11111));
        assert_eq!(f.total_files(), 111110);
        assert_eq!(f.file_size, 40960);
        let f = Fdtree {
            threads: 3,
            ..Fdtree::default()
        };
        assert_eq!(f.total_dirs(), 33333);
    }

    #[test]
    fn scenarios_have_the_studys_counts_and_flags_override_them() {
        let n = |sc: Scenario| {
            let f = Fdtree::from(FdtreeSpec {
                scenario: Some(sc),
                ..Default::default()
            });
            (f.total_dirs(), f.total_files(), f.file_size)
        };
        assert_eq!(n(Scenario::SmallShallow), (8421, 336840, 4096));
        assert_eq!(n(Scenario::SmallDeep), (88573, 354292, 4096));
        assert_eq!(n(Scenario::MediumShallow), (307, 3070, 4_096_000));
        assert_eq!(n(Scenario::MediumDeep), (1023, 4092, 4_096_000));
        let f: Fdtree = serde_json::from_value(
            serde_json::json!({"scenario": "small-deep", "levels": 2, "file_size": "8K"}),
        )
        .unwrap();
        assert_eq!((f.levels, f.dirs_per_level, f.file_size), (2, 3, 8192));
        assert_eq!(f.params()["scenario"], "small-deep");
        let again: Fdtree = serde_json::from_value(f.params()).unwrap();
        assert_eq!(again, f);
        assert!("medium-wide".parse::<Scenario>().is_err());
    }

    #[test]
    fn plans_name_the_metadata_workloads_like_the_flags() {
        let find = |k| crate::workload::registry::find(k).unwrap();
        let w =
            (find("fdtree").build)(serde_json::json!({"scenario": "medium-deep", "threads": 2}))
                .unwrap();
        assert_eq!(w.params()["levels"], 9);
        assert_eq!(w.params()["file_size"], 4_096_000);
        assert_eq!(w.params()["threads"], 2);
        assert!((find("fdtree").build)(serde_json::json!({"level": 2})).is_err());
        let w = (find("interleave").build)(serde_json::json!({"order": "grouped"})).unwrap();
        assert_eq!(w.params()["dirs"], 9890);
        let w = (find("create").build)(serde_json::json!({"files": 5, "fsync": "file"})).unwrap();
        assert_eq!(w.params()["fsync"], "file");
    }

    #[test]
    fn refuses_zero_counts_overflow_and_long_paths() {
        for bad in [
            serde_json::json!({"levels": 0}),
            serde_json::json!({"dirs_per_level": 0}),
            serde_json::json!({"files_per_dir": 0, "stat": true}),
            serde_json::json!({"threads": 0}),
            serde_json::json!({"levels": 100, "dirs_per_level": 1000}),
            serde_json::json!({"levels": 900, "dirs_per_level": 1}),
        ] {
            let f: Fdtree = serde_json::from_value(bad.clone()).unwrap();
            let e = f.validate().expect_err(&bad.to_string());
            assert!(
                e.downcast_ref::<crate::base::error::BadInput>().is_some(),
                "{bad}: {e}"
            );
        }
        let deep: Fdtree =
            serde_json::from_value(serde_json::json!({"levels": 300, "dirs_per_level": 1}))
                .unwrap();
        deep.validate().unwrap();
        // LEVEL0.0 + 300 × "/L<n>D1" + "/L0F10"
        let expect = 8 + (1..=300u64).map(|l| 4 + digits(l)).sum::<usize>() + 6;
        assert_eq!(deep.deepest_relative_path(), expect);
    }
}
