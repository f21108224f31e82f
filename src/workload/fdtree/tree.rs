//! Walking fdtree's trees: the names of its directories and files, the frames of the
//! depth-first walk that makes and removes them, how a failed operation ends a phase, and the
//! naming the crash judge reads a slot's path with.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;

use crate::base::sys::{fs_error, Dir};
use crate::measure::{OpId, Recorder};
use crate::results::PhaseResult;
use crate::workload::durable_tree::{self, Ledger, Naming};
use crate::workload::names::{timed_syncfs, NameBuf};

/// Name of worker `w`'s base directory.
pub fn base_name(w: u64) -> String {
    format!("LEVEL0.{w}")
}

/// One open directory on the walk: its level, the next child to visit (counting down), and
/// the index it has in its parent (to rebuild its path for messages).
pub(super) struct Frame {
    pub(super) fd: Dir,
    pub(super) level: u32,
    pub(super) next: u64,
    pub(super) via: u64,
    /// Its number in the tree: the base is 0, child n (1..=D) of directory k is k × D + n.
    pub(super) node: u64,
}

/// What a callback failed at: the operation and the errno (the entry is in the name buffer).
type OpFail = (&'static str, Errno);

/// A callback on one directory: recorder, its descriptor, its level, its number in the tree
/// (see [`Frame`]), a name buffer to build entry names in (left holding the failing entry's
/// name on error).
type Visit<'a> = dyn FnMut(&mut Recorder, &Dir, u32, u64, &mut NameBuf) -> Result<(), OpFail> + 'a;

pub(super) fn frame_path(base: &str, stack: &[Frame], name: Option<&NameBuf>) -> String {
    let mut s = base.to_string();
    for f in stack.iter().skip(1) {
        let _ = write!(s, "/L{}D{}", f.level + 1, f.via);
    }
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        s.push('/');
        s.push_str(n.as_str());
    }
    s
}

/// The error of a failed callback: the stop flag seen (a signal, or another worker's failure,
/// which the phase reports instead) or a filesystem error on `path`.
pub(super) fn fail(rec: &Recorder, (op, e): OpFail, path: &str) -> anyhow::Error {
    if op == STOP {
        return match rec.check() {
            Err(i) => i.into(),
            Ok(()) => anyhow::anyhow!("stopped because another worker failed"),
        };
    }
    fs_error(op, path, e)
}

/// The pseudo-operation a callback returns when it saw the stop flag.
pub(super) const STOP: &str = "stop";

/// How a walk ends when a callback fails: a stop at the stonewall ends it without error (what
/// was done counts); anything else is the error [`fail`] makes.
pub(super) fn end(rec: &Recorder, f: OpFail, path: impl FnOnce() -> String) -> Result<()> {
    if f.0 == STOP && rec.stonewalled() {
        return Ok(());
    }
    Err(fail(rec, f, &path()))
}

/// In a tree an earlier phase left partly made (cut at a stonewall), entries that are missing,
/// or directories still holding entries, are passed over (not counted).
#[inline]
pub(super) fn missing(partial: bool, e: Errno) -> bool {
    partial && matches!(e, Errno::ENOENT | Errno::ENOTEMPTY)
}

/// Where a phase's workers' trees are: the workload's root, the first worker number of this
/// process (see [`RunContext::worker_base`]), whether an earlier phase may have left the trees
/// partly made (see [`missing`]), each tree's shown path, and the trees' shape (levels and
/// subdirectories per directory).
pub(super) struct Trees {
    pub(super) root: PathBuf,
    pub(super) off: u64,
    pub(super) partial: bool,
    pub(super) bases: Vec<String>,
    pub(super) levels: u32,
    pub(super) dirs: u64,
}

impl Trees {
    /// The name of worker `w`'s base directory in the root.
    pub(super) fn base_name(&self, w: usize) -> String {
        base_name(self.off + w as u64)
    }

    /// Opens worker `w`'s base directory.
    pub(super) fn open(&self, w: usize) -> Result<Dir> {
        Dir::open_path(&self.root.join(self.base_name(w)))
    }

    /// Walks worker `w`'s tree from its open base directory (see [`walk`]).
    pub(super) fn walk(
        &self,
        rec: &mut Recorder,
        w: usize,
        base: Dir,
        leaves: bool,
        pre: &mut Visit<'_>,
        post: &mut Visit<'_>,
    ) -> Result<()> {
        walk(
            rec,
            base,
            &self.bases[w],
            self.levels,
            self.dirs,
            leaves,
            self.partial,
            pre,
            post,
        )
    }

    /// Opens and walks worker `w`'s tree (see [`walk`]); with `syncfs`, then syncs its
    /// filesystem, timed as that operation (`--fsync end`).
    /// With `ledger` (crash points follow), the syncfs is kept in it.
    pub(super) fn walk_then_sync(
        &self,
        rec: &mut Recorder,
        w: usize,
        leaves: bool,
        (pre, post): (&mut Visit<'_>, &mut Visit<'_>),
        (syncfs, ledger): (Option<OpId>, Option<&Ledger>),
    ) -> Result<()> {
        let base = self.open(w)?;
        let sync_fd = match syncfs {
            Some(op) => Some((
                op,
                base.try_clone()
                    .map_err(|e| fs_error("dup", &self.bases[w], e))?,
            )),
            None => None,
        };
        self.walk(rec, w, base, leaves, pre, post)?;
        if let Some((op, fd)) = sync_fd {
            let start = durable_tree::now();
            timed_syncfs(rec, op, &fd, &self.bases[w])?;
            if let Some(l) = ledger {
                l.synced(w as u32, start);
            }
        }
        Ok(())
    }
}

/// Calls `each` on the entries `count` down to 1 of a directory (with its number), each named
/// by `name_of` in `name` first; the stop flag is checked before each entry.
#[inline]
pub(super) fn each_entry(
    rec: &mut Recorder,
    count: u64,
    name: &mut NameBuf,
    name_of: impl Fn(&mut NameBuf, u64),
    mut each: impl FnMut(&mut Recorder, &mut NameBuf, u64) -> Result<(), OpFail>,
) -> Result<(), OpFail> {
    for i in (1..=count).rev() {
        if rec.should_stop() {
            return Err((STOP, Errno::EINTR));
        }
        name_of(name, i);
        each(rec, name, i)?;
    }
    Ok(())
}

/// One kind of removal in a directory of the tree: unlink (files) or rmdir (directories).
pub(super) struct Removal {
    pub(super) op: OpId,
    pub(super) dir: bool,
    pub(super) partial: bool,
}

impl Removal {
    /// Removes the entries `count` down to 1 (named by `name_of`) from the directory `fd`,
    /// recording each (and calling `starts` with its number just before); entries already
    /// gone in a partial tree (see [`missing`]) are passed over.
    pub(super) fn remove_each(
        &self,
        rec: &mut Recorder,
        fd: &Dir,
        (count, name_of): (u64, impl Fn(&mut NameBuf, u64)),
        name: &mut NameBuf,
        starts: impl Fn(u64),
    ) -> std::result::Result<(), OpFail> {
        each_entry(rec, count, name, name_of, |rec, name, i| {
            starts(i);
            let t0 = Instant::now();
            match fd.unlink(name.as_cstr(), self.dir) {
                Ok(()) => {
                    rec.record(self.op, t0, 0);
                }
                Err(e) if missing(self.partial, e) => {}
                Err(e) => return Err((if self.dir { "rmdir" } else { "unlink" }, e)),
            }
            Ok(())
        })
    }
}

/// Walks one worker's tree in fdtree's order: `pre` on a directory before its children, `post`
/// after them; children from the highest index down. Leaf directories (level 0) are opened and
/// visited only when `leaves` is true. With `partial` (see [`missing`]), a missing directory's
/// subtree is passed over. A stop at the stonewall ends the walk without error.
#[allow(clippy::too_many_arguments)]
pub(super) fn walk(
    rec: &mut Recorder,
    base: Dir,
    base_shown: &str,
    levels: u32,
    dirs: u64,
    leaves: bool,
    partial: bool,
    pre: &mut Visit<'_>,
    post: &mut Visit<'_>,
) -> Result<()> {
    let mut name = NameBuf::new();
    let mut stack: Vec<Frame> = Vec::with_capacity(levels as usize + 1);
    stack.push(Frame {
        fd: base,
        level: levels,
        next: dirs,
        via: 0,
        node: 0,
    });
    if levels > 0 || leaves {
        name.clear();
        if let Err(f) = pre(rec, &stack[0].fd, levels, 0, &mut name) {
            return end(rec, f, || frame_path(base_shown, &stack, Some(&name)));
        }
    }
    while let Some(i) = stack.len().checked_sub(1) {
        let (level, next) = (stack[i].level, stack[i].next);
        let descend = level > 0 && next > 0 && (leaves || level > 1);
        if !descend {
            name.clear();
            if let Err(f) = post(rec, &stack[i].fd, level, stack[i].node, &mut name) {
                return end(rec, f, || frame_path(base_shown, &stack, Some(&name)));
            }
            stack.pop();
            continue;
        }
        if rec.should_stop() {
            return end(rec, (STOP, Errno::EINTR), String::new);
        }
        stack[i].next -= 1;
        dir_name(&mut name, level, next);
        let fd = match stack[i].fd.open_dir(name.as_cstr()) {
            Ok(fd) => fd,
            Err(e) if missing(partial, e) => continue,
            Err(e) => {
                return Err(fs_error(
                    "open",
                    &frame_path(base_shown, &stack, Some(&name)),
                    e,
                ))
            }
        };
        let node = stack[i].node.saturating_mul(dirs).saturating_add(next);
        stack.push(Frame {
            fd,
            level: level - 1,
            next: dirs,
            via: next,
            node,
        });
        name.clear();
        if let Err(f) = pre(rec, &stack[i + 1].fd, level - 1, node, &mut name) {
            return end(rec, f, || frame_path(base_shown, &stack, Some(&name)));
        }
    }
    Ok(())
}

pub(super) fn nothing(
    _: &mut Recorder,
    _: &Dir,
    _: u32,
    _: u64,
    _: &mut NameBuf,
) -> Result<(), OpFail> {
    Ok(())
}

/// Adds the phase's data rate (KiB/s over its wall time) to its figures.
pub(super) fn insert_kib_per_s(phase: &mut PhaseResult) {
    let kib_per_s = phase.bytes as f64 / 1024.0 / phase.wall_s.max(1e-9);
    phase.extra.insert("kib_per_s".into(), kib_per_s);
}

#[inline]
pub(super) fn file_name(name: &mut NameBuf, level: u32, f: u64) {
    name.clear()
        .push_str("L")
        .push_num(level as u64, 0)
        .push_str("F")
        .push_num(f, 0);
}

#[inline]
pub(super) fn dir_name(name: &mut NameBuf, level: u32, d: u64) {
    name.clear()
        .push_str("L")
        .push_num(level as u64, 0)
        .push_str("D")
        .push_num(d, 0);
}

/// The path of an fdtree run's file from its slot (see [`Fdtree::slot`]), for the judge of its
/// crash states: directory `node` of worker `w`'s tree is reached from the base by the child
/// numbers that make it (child n of directory k is k × D + n).
pub(super) struct Names {
    pub(super) off: u64,
    pub(super) levels: u32,
    pub(super) dirs: u64,
    pub(super) files: u64,
    pub(super) per_tree: u64,
}

impl Naming for Names {
    fn path(&self, slot: u64) -> String {
        let per_worker = (self.per_tree * self.files).max(1);
        let (w, rest) = (slot / per_worker, slot % per_worker);
        let (mut node, f) = (rest / self.files.max(1), rest % self.files.max(1) + 1);
        let mut children = Vec::new();
        while node > 0 {
            children.push((node - 1) % self.dirs + 1);
            node = (node - 1) / self.dirs;
        }
        let mut p = base_name(self.off + w);
        let mut level = self.levels;
        for c in children.iter().rev() {
            let _ = write!(p, "/L{level}D{c}");
            level = level.saturating_sub(1);
        }
        let _ = write!(p, "/L{level}F{f}");
        p
    }
}
