//! `tree`: the low-memory study's workload (seed study 1, ext3 allocator patches on a mem=64M
//! machine). Phase `create`: one mkdir per directory, then per file one open, writes of
//! `--block` bytes up to `--file-size`, one close. Phase `delete`: remove every file and
//! directory the way `rm -rf` does (read each directory, unlink its entries, rmdir it).
//!
//! Names are generated, never stored, and removal streams directory entries, so fsgauge's own
//! memory stays flat whatever the number of files.

use std::ffi::CString;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::durable_tree::{self, Expected, Ledger, Naming};
use super::fsync::{FsyncMode, FsyncModes};
use super::names::{check_counts, timed_syncfs, tree_space, write_size};
use super::params;
use super::{RunContext, Workload};
use crate::base::error::bad_param;
use crate::base::sys::dirstream::{DirStream, EntryType};
use crate::base::sys::{fs_error, Dir};
use crate::base::units::Overflow;
use crate::measure::{OpDef, Recorder};
use crate::results::MetricDef;

/// The fsync modes of the tree: the study forced nothing out per file.
pub const FSYNC: FsyncModes = FsyncModes {
    workload: "tree",
    modes: &[FsyncMode::None, FsyncMode::File, FsyncMode::End],
};

/// The low-memory study's tree: mkdir per directory, one open/write.../close per file
/// (phase `create`), then remove everything as rm -rf does (phase `delete`).
///
/// The study's two sequences: --dirs 14 --files 10 --file-size 100M, and
/// --dirs 14 --files 1000 --file-size 10M.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, clap::Args)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workload")]
pub struct Tree {
    /// Directories in the tree.
    #[arg(long, default_value_t = 14)]
    pub dirs: u64,
    /// Files per directory.
    #[arg(long, default_value_t = 10)]
    pub files: u64,
    /// Size of every file.
    #[arg(long, value_name = "SIZE", default_value = "100M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub file_size: u64,
    /// Size of each write(2).
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = params::size)]
    #[serde(deserialize_with = "crate::base::units::de_size")]
    pub block: u64,
    /// When written data is forced out (in both phases).
    #[arg(long, value_name = "none|file|end", default_value = "end", value_parser = FSYNC)]
    #[serde(deserialize_with = "de_fsync")]
    pub fsync: FsyncMode,
}

fn de_fsync<'de, D: serde::Deserializer<'de>>(d: D) -> Result<FsyncMode, D::Error> {
    FSYNC.deserialize(d)
}

impl Default for Tree {
    fn default() -> Self {
        params::defaults()
    }
}

/// Under `--scale` the low-memory study's trees keep their shape (14 directories × 10 or 1000
/// files) and grow by file size: 8M files at scale 12.5 are the study's 100M.
pub const SCALES: &[(&str, super::params::ScaleClass)] =
    &[("files", super::params::ScaleClass::Fixed)];

const CREATE_OPS: [OpDef; 5] = [
    OpDef::primary("mkdir"),
    OpDef::primary("create"),
    OpDef::secondary("write"),
    OpDef::secondary("fsync"),
    OpDef::secondary("syncfs"),
];
const DELETE_OPS: [OpDef; 3] = [
    OpDef::primary("unlink"),
    OpDef::primary("rmdir"),
    OpDef::secondary("syncfs"),
];

/// Name of directory `d` (fixed width, so readdir and sort orders are the creation order).
pub fn dir_name(d: u64) -> String {
    format!("d{d:05}")
}

/// Name of file `f` in its directory.
pub fn file_name(f: u64) -> String {
    format!("f{f:07}")
}

impl Tree {
    pub fn total_files(&self) -> u64 {
        self.dirs * self.files
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_files() * self.file_size
    }

    /// The buffer every file is written from, over again (from the seed).
    fn pattern(&self, seed: u64) -> Vec<u8> {
        let mut buf = vec![0u8; self.block.min(self.file_size).max(1) as usize];
        rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut buf);
        buf
    }

    /// The create phase; with `ledger` (crash points follow), when each file was whole (its
    /// close, after its fsync under `--fsync file`) and the syncfs are kept in it.
    fn create_phase(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let buf = self.pattern(ctx.seed());
        let expected = self.dirs + self.total_files();
        let tree = self.clone();
        let fsync = self.fsync;
        let phase = ctx.phase("create", &CREATE_OPS, Some(expected), 1, |_, rec| {
            let (mkdir, create, write, fsync_op, syncfs_op) = (
                rec.op("mkdir"),
                rec.op("create"),
                rec.op("write"),
                rec.op("fsync"),
                rec.op("syncfs"),
            );
            let root_fd = Dir::open_path(&root)?;
            for d in 0..tree.dirs {
                rec.check()?;
                let dname = dir_name(d);
                let cdname = CString::new(dname.as_str()).expect("generated names hold no NUL");
                let t0 = Instant::now();
                root_fd
                    .mkdir(&cdname)
                    .map_err(|e| fs_error("mkdir", &format!("{}/{dname}", root.display()), e))?;
                rec.record(mkdir, t0, 0);
                let dfd = root_fd
                    .open_dir(&cdname)
                    .map_err(|e| fs_error("open", &dname, e))?;
                for f in 0..tree.files {
                    if rec.should_stop() {
                        rec.check()?;
                    }
                    let fname = file_name(f);
                    write_one(
                        rec,
                        &dfd,
                        &fname,
                        &buf,
                        tree.file_size,
                        fsync == FsyncMode::File,
                        (create, write, fsync_op),
                    )
                    .map_err(|(op, e)| {
                        fs_error(op, &format!("{}/{dname}/{fname}", root.display()), e)
                    })?;
                    if let Some(l) = ledger {
                        l.made(d * tree.files + f);
                    }
                }
            }
            if fsync == FsyncMode::End {
                let shown = root.display().to_string();
                let start = durable_tree::now();
                timed_syncfs(rec, syncfs_op, &root_fd, &shown)?;
                if let Some(l) = ledger {
                    l.synced(0, start);
                }
            }
            Ok(())
        })?;
        phase
            .extra
            .insert("files".into(), tree.total_files() as f64);
        Ok(())
    }

    /// The delete phase; with `ledger`, its start stands for every removal's (the removal
    /// reads directories to find what to remove), and its syncfs is kept.
    fn delete_phase(&self, ctx: &mut RunContext, ledger: Option<&Ledger>) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let expected = self.dirs + self.total_files();
        let fsync = self.fsync;
        ctx.phase("delete", &DELETE_OPS, Some(expected), 1, |_, rec| {
            let root_fd = Dir::open_path(&root)?;
            if let Some(l) = ledger {
                l.removing_all(0);
            }
            remove_tree_contents(rec, &root_fd, &root.display().to_string())?;
            if fsync == FsyncMode::End {
                let shown = root.display().to_string();
                let start = durable_tree::now();
                timed_syncfs(rec, rec.op("syncfs"), &root_fd, &shown)?;
                if let Some(l) = ledger {
                    l.synced(0, start);
                }
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// Creates one file: open, writes of the buffer's size, optional fsync, close — timed as one
/// `create`, each write also as a `write`.
fn write_one(
    rec: &mut Recorder,
    dir: &Dir,
    name: &str,
    buf: &[u8],
    size: u64,
    fsync: bool,
    (create, write, fsync_op): (
        crate::measure::OpId,
        crate::measure::OpId,
        crate::measure::OpId,
    ),
) -> Result<(), (&'static str, Errno)> {
    let cname = CString::new(name).map_err(|_| ("open", Errno::EINVAL))?;
    let t0 = Instant::now();
    let file = dir.create(&cname).map_err(|e| ("open", e))?;
    write_size(rec, write, &file, buf, size, Instant::now()).map_err(|e| ("write", e))?;
    if fsync {
        let t1 = Instant::now();
        file.fsync().map_err(|e| ("fsync", e))?;
        rec.record(fsync_op, t1, 0);
    }
    // Close explicitly so a failing close (e.g. deferred ENOSPC on NFS) is seen.
    file.close().map_err(|e| ("close", e))?;
    rec.record(create, t0, 0);
    Ok(())
}

/// Removes everything below `dir` as `rm -rf` does: depth first, reading each directory and
/// unlinking its entries as they are read, then removing the emptied directory. Entries are not
/// collected, so memory does not grow with directory size.
pub fn remove_tree_contents(rec: &mut Recorder, dir: &Dir, display: &str) -> Result<()> {
    let (unlink, rmdir) = (rec.op("unlink"), rec.op("rmdir"));
    // POSIX leaves it open whether readdir returns entries after others were removed; a pass
    // that removed anything is followed by another until one finds the directory empty.
    loop {
        if remove_pass(rec, dir, display, unlink, rmdir)? == 0 {
            return Ok(());
        }
    }
}

/// One readdir pass over `dir`, removing what it returns; how many entries it removed.
fn remove_pass(
    rec: &mut Recorder,
    dir: &Dir,
    display: &str,
    unlink: crate::measure::OpId,
    rmdir: crate::measure::OpId,
) -> Result<u64> {
    let mut removed = 0;
    let dup = dir.try_clone().map_err(|e| fs_error("dup", display, e))?;
    let mut stream = DirStream::new(dup.into()).map_err(|e| fs_error("opendir", display, e))?;
    // A dup shares the file offset: start from the beginning for every pass.
    nix::unistd::lseek(dir.raw(), 0, nix::unistd::Whence::SeekSet)
        .map_err(|e| fs_error("rewind", display, e))?;
    while let Some(ent) = stream.next_entry() {
        let (name, ftype) = ent.map_err(|e| fs_error("readdir", display, e))?;
        if rec.should_stop() {
            rec.check()?;
        }
        let is_dir = match ftype {
            EntryType::Dir => true,
            EntryType::File | EntryType::Symlink | EntryType::Other => false,
            EntryType::Unknown => dir
                .stat(name)
                .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
                .map_err(|e| {
                    fs_error("stat", &format!("{display}/{}", name.to_string_lossy()), e)
                })?,
        };
        if is_dir {
            let shown = format!("{display}/{}", name.to_string_lossy());
            let sub = dir
                .open_dir(name)
                .map_err(|e| fs_error("open", &shown, e))?;
            remove_tree_contents(rec, &sub, &shown)?;
            drop(sub);
            let t0 = Instant::now();
            dir.unlink(name, true)
                .map_err(|e| fs_error("rmdir", &shown, e))?;
            rec.record(rmdir, t0, 0);
            removed += 1;
        } else {
            let t0 = Instant::now();
            if let Err(e) = dir.unlink(name, false) {
                return Err(fs_error(
                    "unlink",
                    &format!("{display}/{}", name.to_string_lossy()),
                    e,
                ));
            }
            rec.record(unlink, t0, 0);
            removed += 1;
        }
    }
    Ok(removed)
}

/// The figures this workload records in a phase's `extra`.
const METRICS: &[MetricDef] = &[MetricDef::count("files", "files", "")];

impl Workload for Tree {
    fn inodes_needed(&self) -> u64 {
        self.dirs
            .saturating_add(self.dirs.saturating_mul(self.files))
    }

    fn metrics(&self) -> &'static [MetricDef] {
        METRICS
    }

    fn kind(&self) -> &'static str {
        "tree"
    }

    fn params(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain struct serializes")
    }

    fn validate(&self) -> Result<()> {
        check_counts(self.dirs, self.files)?;
        if self.block == 0 {
            return Err(bad_param("block", "--block must be at least 1 byte"));
        }
        if self.block > params::MAX_BLOCK {
            return Err(bad_param(
                "block",
                "--block over 1G is not useful; each write is one buffer of that size",
            ));
        }
        Ok(())
    }

    fn space_needed(&self) -> Result<u64, Overflow> {
        let over = Overflow::of(
            "tree",
            "space estimate",
            format!(
                "--dirs {} --files {} --file-size {}",
                self.dirs, self.files, self.file_size
            ),
            "--dirs, --files or --file-size",
        );
        // Data rounded up to 4 KiB blocks, plus a block per directory; the file and inode
        // counts themselves must fit too (file size 0 makes the data term 0).
        tree_space(self.dirs, self.files, self.file_size, 0).ok_or_else(over)
    }

    fn memory_needed(&self) -> Result<u64, Overflow> {
        self.block
            .min(self.file_size)
            .checked_add(1 << 20)
            .ok_or_else(Overflow::of(
                "tree",
                "memory estimate",
                format!("--block {} --file-size {}", self.block, self.file_size),
                "--block",
            ))
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        let files = self.total_files();
        let ledger = (ctx.crash_points() && self.fsync != FsyncMode::None)
            .then(|| Ledger::new(files, files, self.fsync == FsyncMode::File));
        self.create_phase(ctx, ledger.as_ref())?;
        ctx.layout_point()?;
        ctx.make_cold()?;
        self.delete_phase(ctx, ledger.as_ref())?;
        let expected = Expected::new(self.file_size, &self.pattern(ctx.seed()));
        let words = durable_tree::words("tree", self.fsync);
        let naming = Box::new(Names(self.files));
        durable_tree::leave_judge(ctx, ledger, naming, expected, words);
        Ok(())
    }
}

/// The path of a tree run's file from its slot (directory × files + number), for the judge of
/// its crash states.
struct Names(u64);

impl Naming for Names {
    fn path(&self, slot: u64) -> String {
        let files = self.0.max(1);
        format!("{}/{}", dir_name(slot / files), file_name(slot % files))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_record_slot_names_the_file_the_tree_made_there() {
        assert_eq!(Names(10).path(0), "d00000/f0000000");
        assert_eq!(Names(10).path(137), "d00013/f0000007");
    }

    #[test]
    fn fsync_is_none_file_or_end_on_the_command_line_and_in_plans() {
        crate::workload::fsync::testing::takes_exactly::<Tree>(FSYNC, |t| t.fsync);
        assert_eq!(Tree::default().fsync, FsyncMode::End);
    }
}
