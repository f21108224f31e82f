//! `tree`: the low-memory study's workload (seed study 1, ext3 allocator patches on a mem=64M
//! machine). Phase `create`: one mkdir per directory, then per file one open, writes of
//! `--block` bytes up to `--file-size`, one close. Phase `delete`: remove every file and
//! directory the way `rm -rf` does (read each directory, unlink its entries, rmdir it).
//!
//! Names are generated, never stored, and removal streams directory entries, so fsgauge's own
//! memory stays flat whatever the number of files.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::str::FromStr;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use super::dirstream::{DirStream, EntryType};
use super::names::timed_syncfs;
use super::{RunContext, Workload};
use crate::error::{bad_input, SystemFailure};
use crate::measure::{OpDef, Recorder};
use crate::results::MetricDef;

/// When data is forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// Never: the phase ends when the last close returns (data may still be in the page cache).
    None,
    /// fsync each file before its close (counted inside the file's create time).
    File,
    /// One syncfs at the end of each phase, inside the phase's time (the default).
    End,
}

impl FromStr for FsyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "none" => Ok(Self::None),
            "file" => Ok(Self::File),
            "end" => Ok(Self::End),
            _ => Err(format!("unknown fsync mode {s:?}; use none, file or end")),
        }
    }
}

/// Parameters of the tree workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Tree {
    /// Directories under the workload root.
    pub dirs: u64,
    /// Files in each directory.
    pub files: u64,
    /// Size of each file, bytes.
    #[serde(deserialize_with = "crate::units::de_size")]
    pub file_size: u64,
    /// Size of each write call, bytes.
    #[serde(deserialize_with = "crate::units::de_size")]
    pub block: u64,
    pub fsync: FsyncMode,
}

impl Default for Tree {
    fn default() -> Self {
        Self {
            dirs: 14,
            files: 10,
            file_size: 100 << 20,
            block: 1 << 20,
            fsync: FsyncMode::End,
        }
    }
}

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

/// An I/O error of the filesystem under test, naming the operation and the path.
fn fs_error(op: &str, path: &str, e: Errno) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(format!(
        "{op} {path} failed: {e} ({})",
        e.desc()
    )))
}

impl Tree {
    pub fn total_files(&self) -> u64 {
        self.dirs * self.files
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_files() * self.file_size
    }

    fn create_phase(&self, ctx: &mut RunContext) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let mut buf = vec![0u8; self.block.min(self.file_size).max(1) as usize];
        rand_chacha::ChaCha8Rng::seed_from_u64(ctx.seed()).fill_bytes(&mut buf);
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
            let root_fd = open_dir(&root)?;
            for d in 0..tree.dirs {
                rec.check()?;
                let dname = dir_name(d);
                let t0 = Instant::now();
                mkdirat(
                    Some(root_fd.as_raw_fd()),
                    dname.as_str(),
                    Mode::from_bits_truncate(0o755),
                )
                .map_err(|e| fs_error("mkdir", &format!("{}/{dname}", root.display()), e))?;
                rec.record(mkdir, t0, 0);
                let dfd = openat(
                    Some(root_fd.as_raw_fd()),
                    dname.as_str(),
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| fs_error("open", &dname, e))?;
                // SAFETY: openat returned a fresh descriptor that nothing else owns.
                let dfd = unsafe { OwnedFd::from_raw_fd(dfd) };
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
                }
            }
            if fsync == FsyncMode::End {
                let shown = root.display().to_string();
                timed_syncfs(rec, syncfs_op, root_fd.as_raw_fd(), &shown)?;
            }
            Ok(())
        })?;
        phase
            .extra
            .insert("files".into(), tree.total_files() as f64);
        Ok(())
    }

    fn delete_phase(&self, ctx: &mut RunContext) -> Result<()> {
        let root = ctx.root().to_path_buf();
        let expected = self.dirs + self.total_files();
        let fsync = self.fsync;
        ctx.phase("delete", &DELETE_OPS, Some(expected), 1, |_, rec| {
            let root_fd = open_dir(&root)?;
            remove_tree_contents(rec, &root_fd, &root.display().to_string())?;
            if fsync == FsyncMode::End {
                let shown = root.display().to_string();
                timed_syncfs(rec, rec.op("syncfs"), root_fd.as_raw_fd(), &shown)?;
            }
            Ok(())
        })?;
        Ok(())
    }
}

fn open_dir(path: &std::path::Path) -> Result<OwnedFd> {
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fs_error("open", &path.display().to_string(), e))?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates one file: open, writes of the buffer's size, optional fsync, close — timed as one
/// `create`, each write also as a `write`.
fn write_one(
    rec: &mut Recorder,
    dir: &OwnedFd,
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
    // SAFETY: plain openat(2) on a valid directory descriptor and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            cname.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err(("open", Errno::last()));
    }
    // SAFETY: fd was just returned by openat and is owned here.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut left = size;
    let mut t = Instant::now();
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        // SAFETY: writing from a live buffer of at least n bytes.
        let w = unsafe { libc::write(file.as_raw_fd(), buf.as_ptr().cast(), n) };
        if w < 0 {
            let e = Errno::last();
            if e == Errno::EINTR {
                continue;
            }
            return Err(("write", e));
        }
        if w == 0 {
            return Err(("write", Errno::EIO));
        }
        left -= w as u64;
        t = rec.record(write, t, w as u64);
    }
    if fsync {
        let t1 = Instant::now();
        nix::unistd::fsync(file.as_raw_fd()).map_err(|e| ("fsync", e))?;
        rec.record(fsync_op, t1, 0);
    }
    // Close explicitly so a failing close (e.g. deferred ENOSPC on NFS) is seen.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
    // SAFETY: closing the descriptor we own exactly once.
    if unsafe { libc::close(fd) } != 0 {
        return Err(("close", Errno::last()));
    }
    rec.record(create, t0, 0);
    Ok(())
}

/// Removes everything below `dir` as `rm -rf` does: depth first, reading each directory and
/// unlinking its entries as they are read, then removing the emptied directory. Entries are not
/// collected, so memory does not grow with directory size.
pub fn remove_tree_contents(rec: &mut Recorder, dir: &OwnedFd, display: &str) -> Result<()> {
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
    dir: &OwnedFd,
    display: &str,
    unlink: crate::measure::OpId,
    rmdir: crate::measure::OpId,
) -> Result<u64> {
    let mut removed = 0;
    let dup = nix::unistd::dup(dir.as_raw_fd()).map_err(|e| fs_error("dup", display, e))?;
    // SAFETY: dup returned a fresh descriptor that nothing else owns.
    let mut stream = DirStream::new(unsafe { OwnedFd::from_raw_fd(dup) })
        .map_err(|e| fs_error("opendir", display, e))?;
    // A dup shares the file offset: start from the beginning for every pass.
    nix::unistd::lseek(dir.as_raw_fd(), 0, nix::unistd::Whence::SeekSet)
        .map_err(|e| fs_error("rewind", display, e))?;
    while let Some(ent) = stream.next_entry() {
        let (name, ftype) = ent.map_err(|e| fs_error("readdir", display, e))?;
        if rec.should_stop() {
            rec.check()?;
        }
        let is_dir = match ftype {
            EntryType::Dir => true,
            EntryType::Other => false,
            EntryType::Unknown => nix::sys::stat::fstatat(
                Some(dir.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
            .map_err(|e| fs_error("stat", &format!("{display}/{}", name.to_string_lossy()), e))?,
        };
        if is_dir {
            let shown = format!("{display}/{}", name.to_string_lossy());
            let sub = openat(
                Some(dir.as_raw_fd()),
                name,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
                Mode::empty(),
            )
            .map_err(|e| fs_error("open", &shown, e))?;
            // SAFETY: fresh descriptor from openat.
            let sub = unsafe { OwnedFd::from_raw_fd(sub) };
            remove_tree_contents(rec, &sub, &shown)?;
            drop(sub);
            let t0 = Instant::now();
            unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::RemoveDir)
                .map_err(|e| fs_error("rmdir", &shown, e))?;
            rec.record(rmdir, t0, 0);
            removed += 1;
        } else {
            let t0 = Instant::now();
            if let Err(e) = unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir) {
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
        if self.dirs == 0 || self.files == 0 {
            return Err(bad_input(format!(
                "--dirs {} --files {}: both must be 1 or more",
                self.dirs, self.files
            )));
        }
        if self.block == 0 {
            return Err(bad_input("--block must be at least 1 byte"));
        }
        if self.block > (1 << 30) {
            return Err(bad_input(
                "--block over 1G is not useful; each write is one buffer of that size",
            ));
        }
        Ok(())
    }

    fn space_needed(&self) -> u64 {
        // Data rounded up to 4 KiB blocks, plus a block per directory.
        let per_file = self.file_size.div_ceil(4096) * 4096;
        self.total_files()
            .saturating_mul(per_file)
            .saturating_add(self.dirs * 4096)
    }

    fn memory_needed(&self) -> u64 {
        self.block.min(self.file_size) + (1 << 20)
    }

    fn run(&self, ctx: &mut RunContext) -> Result<()> {
        self.create_phase(ctx)?;
        ctx.layout_point()?;
        ctx.make_cold()?;
        self.delete_phase(ctx)
    }
}
