//! `create`: the fs_mark-style small-file creation rate. Each of `--threads` workers creates
//! `--files` files of `--file-size` bytes in its own directory `w<N>` (as fs_mark gives each
//! thread its own directory and `-n` files), optionally spread over subdirectories of
//! `--files-per-dir` files each (fs_mark's `-D`/`-N`); each file is one `open(O_CREAT)`, the
//! writes, an optional `fsync`, and one `close`. Every syscall is timed on its own, so the
//! result has the latency of each kind (open, write, fsync, close) besides the whole-file
//! `create`. A `remove` phase then unlinks every file.
//!
//! Cut at an MPI stonewall, the create phase keeps what it made and the remove phase
//! removes exactly those files.
//!
//! The per-file path is the syscalls, one clock read per syscall boundary (the invariant TSC
//! where there is one) and histogram increments in the worker's own recorder: no allocation,
//! no locks, names counted up in place in a stack buffer. The
//! benchmark `scripts/bench-create` checks that this reaches at least 95% of the rate of a
//! minimal C program doing the same syscalls (it measures about 97-98%; the rest is the
//! recording: the bare syscall loop alone measured 99.4-100%).

use std::path::Path;

use anyhow::Result;
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::durable_tree::{self, Expected, Ledger, Naming};
use super::fsync::{FsyncMode, FsyncModes};
use super::names::{check_inodes, digits, timed_syncfs, NameBuf};
use super::params;
use super::{RunContext, Workload};
use crate::base::error::bad_param;
use crate::base::sys::{fs_error, Dir};
use crate::base::units::{blocks_4k, Overflow};
use crate::measure::{OpDef, OpId, Recorder};
use crate::results::MetricDef;
use crate::results::PhaseResult;

/// fs_mark-style small-file creation rate: per file open(O_CREAT), writes, optional fsync,
/// close, each syscall timed on its own; then a remove phase (after --cold).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct Create {
    /// Files each worker creates (fs_mark -n).
    #[arg(long, default_value_t = 10_000)]
    pub files: u64,
    /// Size of every file (fs_mark -s).
    #[arg(long, value_name = "SIZE", default_value = "4K", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub file_size: u64,
    /// Size of each write(2) (fs_mark -w).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub block: u64,
    /// Workers started together, each in its own directory w<N> (fs_mark -t); files/s is the
    /// aggregate and each worker's own figures are kept.
    #[arg(long, value_name = "T", default_value_t = 1)]
    pub threads: u32,
    /// When written data is forced out: file is fs_mark's default (-S 1), none its -S 0.
    #[arg(long, value_name = "none|file|end", default_value = "none", value_parser = FSYNC)]
    #[serde(deserialize_with = "de_fsync")]
    pub fsync: FsyncMode,
    /// Files per subdirectory of each worker's directory (fs_mark -N); 0 puts them all in it.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub files_per_dir: u64,
}

/// The fsync modes of `create`: fs_mark's own (-S 0 and 1) and one syncfs per worker.
pub const FSYNC: FsyncModes = FsyncModes {
    workload: "create",
    modes: &[FsyncMode::None, FsyncMode::File, FsyncMode::End],
};

fn de_fsync<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FsyncMode, D::Error> {
    FSYNC.deserialize(d)
}

impl Default for Create {
    fn default() -> Self {
        super::params::defaults()
    }
}

const CREATE_OPS: [OpDef; 6] = [
    OpDef::primary("create"),
    OpDef::secondary("open"),
    OpDef::secondary("write"),
    OpDef::secondary("fsync"),
    OpDef::secondary("close"),
    OpDef::secondary("syncfs"),
];
const REMOVE_OPS: [OpDef; 2] = [OpDef::primary("unlink"), OpDef::secondary("rmdir")];

impl Create {
    /// Files over all workers.
    pub fn total_files(&self) -> u64 {
        self.files.saturating_mul(self.threads as u64)
    }

    /// Subdirectories of each worker's directory.
    pub fn subdirs(&self) -> u64 {
        if self.files_per_dir == 0 {
            0
        } else {
            self.files.div_ceil(self.files_per_dir)
        }
    }

    fn widths(&self) -> (usize, usize) {
        (
            digits(self.files.saturating_sub(1)),
            digits(self.subdirs().saturating_sub(1)),
        )
    }

    /// Worker `w`'s directory name.
    pub fn worker_dir(w: u64) -> String {
        format!("w{w}")
    }

    /// Makes the workers' directories and subdirectories (not measured: fs_mark too makes its
    /// directories before the timed loop).
    fn prepare(&self, ctx: &RunContext) -> Result<()> {
        let root = ctx.root();
        let root_fd = Dir::open_path(root)?;
        let (_, sw) = self.widths();
        let off = ctx.worker_base(self.threads as u64);
        let mut name = NameBuf::new();
        for w in off..off + self.threads as u64 {
            name.clear().push_str(&Self::worker_dir(w));
            root_fd.mkdir(name.as_cstr()).map_err(|e| {
                fs_error("mkdir", &format!("{}/{}", root.display(), name.as_str()), e)
            })?;
            let wfd = root_fd.open_dir(name.as_cstr()).map_err(|e| {
                fs_error("open", &format!("{}/{}", root.display(), name.as_str()), e)
            })?;
            for s in 0..self.subdirs() {
                name.clear().push_str("s").push_num(s, sw);
                wfd.mkdir(name.as_cstr()).map_err(|e| {
                    fs_error(
                        "mkdir",
                        &format!("{}/w{w}/{}", root.display(), name.as_str()),
                        e,
                    )
                })?;
            }
        }
        Ok(())
    }

    /// The buffer every file is written from, over again (from the seed).
    fn pattern(&self, seed: u64) -> Vec<u8> {
        let mut buf = vec![0u8; self.block.min(self.file_size).max(1) as usize];
        rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut buf);
        buf
    }

    /// The create phase; returns how many files each worker made (all of them, unless the
    /// phase was cut at a stonewall). With `ledger` (crash points follow), each file's fsync
    /// (or close) and each syncfs is kept in it.
    fn create_phase(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<Vec<u64>> {
        let root = ctx.root().to_path_buf();
        let off = ctx.worker_base(self.threads as u64);
        let (fw, sw) = self.widths();
        let (files, size, k, fsync) = (self.files, self.file_size, self.files_per_dir, self.fsync);
        let buf = self.pattern(ctx.seed());
        let phase = ctx.phase(
            "create",
            &CREATE_OPS,
            Some(self.total_files()),
            self.threads as usize,
            |w, rec| {
                let (create, open, write, fsync_op, close_op, syncfs_op) = (
                    rec.op("create"),
                    rec.op("open"),
                    rec.op("write"),
                    rec.op("fsync"),
                    rec.op("close"),
                    rec.op("syncfs"),
                );
                let wdir = root.join(Self::worker_dir(off + w as u64));
                let wfd = Dir::open_path(&wdir)?;
                let mut sub: Option<Dir> = None;
                // The subdirectory's name, and the file's: "f" and the file number, zero-padded,
                // counted up in place from one file to the next.
                let mut dname = NameBuf::new();
                let mut fname = NameBuf::new();
                fname.push_str("f").push_num(0, fw);
                let shown = |fname: &NameBuf, i: u64| shown_file(&wdir, fname, i, k, sw);
                // Files still to go in the current subdirectory (0: open the next one).
                let mut room = 0u64;
                let clock = rec.clock();
                rec.with_lanes([create, open, write, fsync_op, close_op], |rec, lanes| {
                    let [l_create, l_open, l_write, l_fsync, l_close] = lanes;
                    for i in 0..files {
                        // Every 16 files (well under a millisecond on a RAM-backed directory):
                        // the check itself costs a few cache misses after each syscall.
                        if i & 15 == 0 && rec.should_stop() {
                            if rec.stonewalled() {
                                break;
                            }
                            rec.check()?;
                            anyhow::bail!("stopped because another worker failed");
                        }
                        if k > 0 && room == 0 {
                            room = k;
                            dname.clear().push_str("s").push_num(i / k, sw);
                            sub = Some(wfd.open_dir(dname.as_cstr()).map_err(|e| {
                                let at = format!("{}/{}", wdir.display(), dname.as_str());
                                fs_error("open", &at, e)
                            })?);
                        }
                        room = room.saturating_sub(1);
                        let dir = sub.as_ref().unwrap_or(&wfd);
                        // One clock read per syscall boundary: each syscall's end starts the
                        // next.
                        let t0 = clock.now();
                        let fd = dir
                            .create(fname.as_cstr())
                            .map_err(|e| fs_error("open", &shown(&fname, i), e))?;
                        let mut t = l_open.lap(rec, t0, 0);
                        let mut left = size;
                        while left > 0 {
                            let n = left.min(buf.len() as u64) as usize;
                            if let Err(e) = fd.write_all(&buf[..n], |b| {
                                t = l_write.lap(rec, t, b as u64);
                            }) {
                                return Err(fs_error("write", &shown(&fname, i), e));
                            }
                            left -= n as u64;
                        }
                        if fsync == FsyncMode::File {
                            fd.fsync()
                                .map_err(|e| fs_error("fsync", &shown(&fname, i), e))?;
                            t = l_fsync.lap(rec, t, 0);
                        }
                        fd.close()
                            .map_err(|e| fs_error("close", &shown(&fname, i), e))?;
                        // Whole (and, with --fsync file, durable) by now: the close, a little
                        // after the fsync's end, errs on the side of fewer promises.
                        if let Some(l) = ledger {
                            l.made(w as u64 * files + i);
                        }
                        let end = l_close.lap(rec, t, 0);
                        l_create.span(rec, t0, end, 0);
                        fname.increment();
                    }
                    Ok(())
                })?;
                if fsync == FsyncMode::End {
                    sync_worker_dir(rec, syncfs_op, &wfd, &wdir, w, ledger)?;
                }
                Ok(())
            },
        )?;
        Ok(files_made(phase))
    }

    /// Unlinks the files each worker made (`made[w]`), then the subdirectories; each unlink's
    /// start kept in `ledger`.
    fn remove_phase(
        &self,
        ctx: &mut RunContext,
        made: &[u64],
        ledger: Option<&Ledger>,
    ) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let off = ctx.worker_base(self.threads as u64);
        let (fw, sw) = self.widths();
        let (k, subdirs) = (self.files_per_dir, self.subdirs());
        ctx.phase(
            "remove",
            &REMOVE_OPS,
            Some(self.total_files()),
            self.threads as usize,
            |w, rec| {
                let (unlink, rmdir) = (rec.op("unlink"), rec.op("rmdir"));
                let wdir = root.join(Self::worker_dir(off + w as u64));
                let wfd = Dir::open_path(&wdir)?;
                let mut sub: Option<Dir> = None;
                let mut name = NameBuf::new();
                let files = made.get(w).copied().unwrap_or(0);
                let mut fname = NameBuf::new();
                fname.push_str("f").push_num(0, fw);
                let mut room = 0u64;
                for i in 0..files {
                    if rec.should_stop() {
                        if rec.stonewalled() {
                            // What is left goes with the workload's directory.
                            return Ok(());
                        }
                        rec.check()?;
                        anyhow::bail!("stopped because another worker failed");
                    }
                    if k > 0 && room == 0 {
                        room = k;
                        name.clear().push_str("s").push_num(i / k, sw);
                        sub = Some(wfd.open_dir(name.as_cstr()).map_err(|e| {
                            fs_error("open", &format!("{}/{}", wdir.display(), name.as_str()), e)
                        })?);
                    }
                    room = room.saturating_sub(1);
                    let dir = sub.as_ref().unwrap_or(&wfd);
                    if let Some(l) = ledger {
                        l.removing(w as u64 * self.files + i);
                    }
                    let t0 = rec.tick();
                    dir.unlink(fname.as_cstr(), false).map_err(|e| {
                        fs_error(
                            "unlink",
                            &format!("{} entry {}", wdir.display(), fname.as_str()),
                            e,
                        )
                    })?;
                    rec.lap(unlink, t0, 0);
                    fname.increment();
                }
                drop(sub);
                for s in 0..subdirs {
                    name.clear().push_str("s").push_num(s, sw);
                    let t0 = rec.tick();
                    wfd.unlink(name.as_cstr(), true).map_err(|e| {
                        fs_error("rmdir", &format!("{}/{}", wdir.display(), name.as_str()), e)
                    })?;
                    rec.lap(rmdir, t0, 0);
                }
                Ok(())
            },
        )?;
        Ok(())
    }
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[
    MetricDef::count("files", "files", ""),
    MetricDef::rate("files_per_s", "file rate", "files/s"),
    MetricDef::rate("kib_per_s", "file data rate", "KiB/s"),
];

impl Workload for Create {
    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "create"
    }

    fn line_axis(&self) -> Option<&'static str> {
        Some("threads")
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        if self.files == 0 {
            return Err(bad_param("files", "--files must be 1 or more"));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(bad_param(
                "threads",
                format!("--threads {}: use 1 to 1024 workers", self.threads),
            ));
        }
        params::check_block("block", self.block)?;
        if self.total_files() > 1 << 40 {
            return Err(bad_param(
                "files",
                format!(
                    "--files {} × --threads {} is more files than any filesystem holds",
                    self.files, self.threads
                ),
            ));
        }
        Ok(())
    }

    fn inodes_needed(&self) -> u64 {
        let dirs = (self.threads as u64).saturating_mul(self.subdirs().saturating_add(1));
        self.total_files().saturating_add(dirs)
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        let over = Overflow::of(
            "create",
            "space estimate",
            format!(
                "--files {} --threads {} --files-per-dir {} --file-size {}",
                self.files, self.threads, self.files_per_dir, self.file_size
            ),
            "--files, --threads or --file-size",
        );
        let files = self
            .files
            .checked_mul(self.threads as u64)
            .ok_or_else(&over)?;
        let per_file = blocks_4k(self.file_size)
            .and_then(|b| b.checked_add(512))
            .ok_or_else(&over)?;
        let dirs = self
            .subdirs()
            .checked_add(1)
            .and_then(|d| d.checked_mul(self.threads as u64))
            .ok_or_else(&over)?;
        files.checked_add(dirs).ok_or_else(&over)?;
        files
            .checked_mul(per_file)
            .and_then(|data| data.checked_add(dirs.checked_mul(4096 + 512)?))
            .ok_or_else(&over)
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        (self.threads as u64)
            .checked_mul(2 << 20)
            .and_then(|m| m.checked_add(self.block.min(self.file_size)))
            .ok_or_else(Overflow::of(
                "create",
                "memory estimate",
                format!("--threads {} --block {}", self.threads, self.block),
                "--threads or --block",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        check_inodes(ctx.root(), self.inodes_needed(), "create")?;
        self.prepare(ctx)?;
        let ledger = (ctx.crash_points() && self.fsync != FsyncMode::None).then(|| {
            Ledger::new(
                self.total_files(),
                self.files,
                self.fsync == FsyncMode::File,
            )
        });
        let made = self.create_phase(ctx, ledger.as_ref())?;
        ctx.layout_point()?;
        ctx.make_cold()?;
        self.remove_phase(ctx, &made, ledger.as_ref())?;
        let (fw, sw) = self.widths();
        let naming = Names {
            off: ctx.worker_base(self.threads as u64),
            files: self.files,
            per_dir: self.files_per_dir,
            widths: (fw, sw),
        };
        let expected = Expected::new(self.file_size, &self.pattern(ctx.seed()));
        let words = durable_tree::words("create", self.fsync);
        durable_tree::leave_judge(ctx, ledger, Box::new(naming), expected, words);
        Ok(())
    }
}

/// The path of a create run's file from its slot (worker × files + number), for the judge of
/// its crash states.
struct Names {
    off: u64,
    files: u64,
    per_dir: u64,
    widths: (usize, usize),
}

impl Naming for Names {
    fn path(&self, slot: u64) -> String {
        let (w, i) = (slot / self.files, slot % self.files);
        let (fw, sw) = self.widths;
        let mut p = format!("{}/", Create::worker_dir(self.off + w));
        if let Some(s) = i.checked_div(self.per_dir) {
            p.push_str(&format!("s{s:0sw$}/"));
        }
        p.push_str(&format!("f{i:0fw$}"));
        p
    }
}

/// The path shown for worker directory `wdir`'s file `fname` (its `i`th): in subdirectory
/// "s" and `i / k` (zero-padded to `sw`) where there are `k` files a subdirectory.
fn shown_file(wdir: &Path, fname: &NameBuf, i: u64, k: u64, sw: usize) -> String {
    match i.checked_div(k) {
        None => format!("{}/{}", wdir.display(), fname.as_str()),
        Some(s) => {
            let mut sub = NameBuf::new();
            sub.push_str("s").push_num(s, sw);
            format!("{}/{}/{}", wdir.display(), sub.as_str(), fname.as_str())
        }
    }
}

/// With `--fsync end`: syncs worker `w`'s filesystem through its directory `wfd` (timed as
/// `op`), the sync's start kept in `ledger`.
fn sync_worker_dir(
    rec: &mut Recorder,
    op: OpId,
    wfd: &Dir,
    wdir: &Path,
    w: usize,
    ledger: Option<&Ledger>,
) -> Result<()> {
    let shown = wdir.display().to_string();
    let start = durable_tree::now();
    timed_syncfs(rec, op, wfd, &shown)?;
    if let Some(l) = ledger {
        l.synced(w as u32, start);
    }
    Ok(())
}

/// Adds the create phase's files, files a second and KiB a second to its figures; returns how
/// many files each worker made (every one asked for, or those done by the stonewall).
fn files_made(phase: &mut PhaseResult) -> Vec<u64> {
    let made = phase.ops as f64;
    let wall = phase.wall_s.max(1e-9);
    phase.extra.insert("files".into(), made);
    phase.extra.insert("files_per_s".into(), made / wall);
    let kib = phase.bytes as f64 / 1024.0 / wall;
    phase.extra.insert("kib_per_s".into(), kib);
    if phase.workers.is_empty() {
        vec![phase.ops]
    } else {
        phase.workers.iter().map(|w| w.ops).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fsync_is_none_file_or_end_on_the_command_line_and_in_plans() {
        crate::workload::fsync::testing::takes_exactly::<Create>(FSYNC, |c| c.fsync);
        assert_eq!(Create::default().fsync, FsyncMode::None);
    }

    #[test]
    fn counts_and_layout() {
        let c = Create {
            files: 1000,
            threads: 3,
            files_per_dir: 300,
            ..Default::default()
        };
        assert_eq!(c.total_files(), 3000);
        assert_eq!(c.subdirs(), 4);
        assert_eq!(c.widths(), (3, 1));
        c.validate().unwrap();
        let p = c.params();
        assert_eq!(p["fsync"], "none");
        let back: Create = serde_json::from_value(p).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn a_crash_record_slot_names_the_file_the_worker_made_there() {
        let c = Create {
            files: 1000,
            threads: 2,
            files_per_dir: 300,
            ..Default::default()
        };
        let flat = Names {
            off: 0,
            files: 1000,
            per_dir: 0,
            widths: c.widths(),
        };
        assert_eq!(flat.path(0), "w0/f000");
        assert_eq!(flat.path(1999), "w1/f999");
        let spread = Names {
            off: 4,
            per_dir: 300,
            ..flat
        };
        let mut want = NameBuf::new();
        want.push_str("s")
            .push_num(2, 1)
            .push_str("/f")
            .push_num(601, 3);
        assert_eq!(spread.path(1601), format!("w5/{}", want.as_str()));
    }

    #[test]
    fn refuses_zero_counts() {
        for c in [
            Create {
                files: 0,
                ..Default::default()
            },
            Create {
                threads: 0,
                ..Default::default()
            },
        ] {
            let e = c.validate().unwrap_err();
            assert!(
                e.downcast_ref::<crate::base::error::BadInput>().is_some(),
                "{e}"
            );
        }
    }
}
