//! A run's own directory inside a user's `--dir` (`fsgauge-KIND-PID-REP`), recorded in the
//! ledger so that `fsgauge testbed cleanup` can remove what a SIGKILLed run left there.
//!
//! Removing a directory tree named by a ledger entry is the most dangerous thing cleanup does:
//! a forged entry, or a name reused since, must never make it delete anything else. So the
//! entry records the parent (canonical at the time), the name and the inode fsgauge's own
//! `mkdir` made, and the tree is removed only when all of this holds, checked through file
//! descriptors so that no path is resolved twice:
//! - the name starts with `fsgauge-` and is one plain path component;
//! - the parent is an absolute path without `.`/`..` that still resolves to itself (no symlink
//!   has been put into it since);
//! - the directory lies directly inside that parent, is a directory (not a symlink), is on the
//!   parent's filesystem, has nothing mounted at or below it, and is the inode fsgauge made.
//!
//! The removal itself never follows a symlink and never leaves the directory's filesystem.

use std::ffi::{CString, OsStr};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::ledger::{Ledger, Resource};

/// What every run directory's name starts with.
pub const PREFIX: &str = "fsgauge-";

/// A run directory that exists for as long as this value does, recorded in the ledger.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    ledger: Option<Ledger>,
}

impl RunDir {
    /// Makes `parent/name` (which must not exist), recorded in a ledger entry of its own.
    pub fn create(parent: &Path, name: &str) -> Result<Self> {
        // Recorded canonical: cleanup refuses a parent that no longer resolves to itself.
        let parent = &parent
            .canonicalize()
            .with_context(|| format!("resolving {}", parent.display()))?;
        check_names(parent, OsStr::new(name))?;
        let path = parent.join(name);
        let mut ledger = Ledger::begin(&format!("dir-{}", super::unique_suffix()), false)?;
        ledger.set_details(serde_json::json!({ "dir": path }))?;
        let unconfirmed = Resource::RunDir {
            parent: parent.to_path_buf(),
            name: name.to_string(),
            ino: None,
        };
        ledger.record(unconfirmed.clone())?;
        if let Err(e) = fs::create_dir(&path) {
            // Nothing was made (and a directory already there is not ours to remove).
            let _ = ledger.forget(&unconfirmed);
            let _ = ledger.release_all();
            return Err(e).with_context(|| format!("creating {}", path.display()));
        }
        let made = Resource::RunDir {
            parent: parent.to_path_buf(),
            name: name.to_string(),
            ino: Some(
                fs::symlink_metadata(&path)
                    .with_context(|| format!("reading back {}", path.display()))?
                    .ino(),
            ),
        };
        // From here on the entry names the very inode made above.
        let mut this = Self {
            path,
            ledger: Some(ledger),
        };
        if let Some(l) = this.ledger.as_mut() {
            l.replace(&unconfirmed, made)?;
        }
        Ok(this)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Some(mut l) = self.ledger.take() {
            for e in l.release_all() {
                eprintln!(
                    "fsgauge: warning: removing {}: {e:#}; `fsgauge testbed cleanup` removes it later",
                    self.path.display()
                );
            }
        }
    }
}

/// Refuses a name or parent that cannot be a run directory fsgauge made.
pub fn check_names(parent: &Path, name: &OsStr) -> Result<()> {
    let n = name.as_bytes();
    let plain = Path::new(name).components().count() == 1
        && matches!(
            Path::new(name).components().next(),
            Some(Component::Normal(_))
        );
    if !n.starts_with(PREFIX.as_bytes())
        || n.len() == PREFIX.len()
        || n.contains(&b'/')
        || n.contains(&0)
        || !plain
    {
        bail!(
            "{:?} is not a run directory name (fsgauge-…, one path component)",
            name
        );
    }
    if !parent.is_absolute()
        || parent
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        bail!(
            "{} is not an absolute path without '.' or '..'",
            parent.display()
        );
    }
    Ok(())
}

/// Removes the run directory `parent/name` recorded in the ledger (see the module docs for
/// what is checked first). A directory that is already gone counts as removed. `ino` is the
/// inode fsgauge made; without it (a run killed right after its `mkdir`) only an empty
/// directory is removed.
pub fn remove(parent: &Path, name: &str, ino: Option<u64>) -> Result<()> {
    let what = parent.join(name);
    let refuse = |why: String| -> anyhow::Error {
        anyhow::anyhow!(
            "refusing to remove {}: {why}; if it is a run directory of fsgauge's, remove it by hand, and the next `fsgauge testbed cleanup` drops its ledger entry",
            what.display()
        )
    };
    check_names(parent, OsStr::new(name)).map_err(|e| refuse(format!("{e:#}")))?;
    match parent.canonicalize() {
        Ok(c) if c == parent => {}
        Ok(c) => {
            return Err(refuse(format!(
                "its parent now resolves to {} (a symlink was put into the path)",
                c.display()
            )))
        }
        Err(e) if gone(e.raw_os_error()) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("resolving {}", parent.display())),
    }
    let pdir = match open_dir(None, parent.as_os_str()) {
        Ok(d) => d,
        Err(e) if gone(Some(e as i32)) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("opening {}", parent.display())),
    };
    let pst = fstat(pdir.as_raw_fd()).with_context(|| format!("fstat {}", parent.display()))?;
    let st = match fstatat(Some(pdir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(e) if gone(Some(e as i32)) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("lstat {}", what.display())),
    };
    if !is_dir(&st) {
        return Err(refuse("it is not a directory (a symlink or a file)".into()));
    }
    if st.st_dev != pst.st_dev {
        return Err(refuse("it is a mount point".into()));
    }
    if let Some(m) = mount_at_or_below(&what) {
        return Err(refuse(format!("{m} is mounted there")));
    }
    let Some(ino) = ino else {
        return match unlinkat(Some(pdir.as_raw_fd()), name, UnlinkatFlags::RemoveDir) {
            Ok(()) => Ok(()),
            Err(e) if gone(Some(e as i32)) => Ok(()),
            Err(Errno::ENOTEMPTY) | Err(Errno::EEXIST) => Err(refuse(
                "the ledger never confirmed it as the directory fsgauge made, and it is not empty"
                    .into(),
            )),
            Err(e) => Err(e).with_context(|| format!("removing {}", what.display())),
        };
    };
    if st.st_ino != ino {
        return Err(refuse(format!(
            "it is not the directory fsgauge made (inode {} instead of {ino})",
            st.st_ino
        )));
    }
    let dir = open_dir(Some(pdir.as_raw_fd()), OsStr::new(name))
        .with_context(|| format!("opening {}", what.display()))?;
    let dst = fstat(dir.as_raw_fd()).with_context(|| format!("fstat {}", what.display()))?;
    if (dst.st_dev, dst.st_ino) != (st.st_dev, st.st_ino) {
        return Err(refuse("it changed while being checked".into()));
    }
    let mut kept = Vec::new();
    remove_contents(dir, st.st_dev, &what, &mut kept)?;
    if !kept.is_empty() {
        bail!(
            "{} was emptied except for mount points on other filesystems, left alone: {}",
            what.display(),
            kept.join(", ")
        );
    }
    match unlinkat(Some(pdir.as_raw_fd()), name, UnlinkatFlags::RemoveDir) {
        Ok(()) => Ok(()),
        Err(e) if gone(Some(e as i32)) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", what.display())),
    }
}

/// An errno that says the thing is not there (or cannot be, below a non-directory).
fn gone(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

fn open_dir(at: Option<std::os::fd::RawFd>, path: &OsStr) -> nix::Result<Dir> {
    Dir::openat(
        at,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// A mount whose target is `dir` or lies below it.
fn mount_at_or_below(dir: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(super::mount::unescape_mount_field)
        .find(|t| Path::new(t).starts_with(dir))
}

/// Empties the directory open as `dir`, depth first, through descriptors only: symlinks are
/// removed, never followed; directories on another filesystem (`dev`) are left and listed in
/// `kept`.
fn remove_contents(mut dir: Dir, dev: u64, at: &Path, kept: &mut Vec<String>) -> Result<()> {
    // Names first, then removal: a directory is not changed while it is being read.
    let names: Vec<(CString, Option<Type>)> = dir
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_owned(), e.file_type()))
        .filter(|(n, _)| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect();
    let fd = dir.as_raw_fd();
    for (n, kind) in names {
        let path = at.join(OsStr::from_bytes(n.as_bytes()));
        // The directory entry's type saves a stat for everything but directories; where the
        // filesystem does not say, ask.
        let is_subdir = match kind {
            Some(t) => t == Type::Directory,
            None => match fstatat(Some(fd), n.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => is_dir(&st),
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e).with_context(|| format!("lstat {}", path.display())),
            },
        };
        if is_subdir {
            // O_NOFOLLOW: a symlink swapped in since is not entered. A mount point opens as
            // the mounted filesystem's root, whose device differs.
            let sub = match open_dir(Some(fd), OsStr::from_bytes(n.as_bytes())) {
                Ok(sub) => sub,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
            };
            let sst =
                fstat(sub.as_raw_fd()).with_context(|| format!("fstat {}", path.display()))?;
            if sst.st_dev != dev {
                kept.push(path.display().to_string());
                continue;
            }
            let before = kept.len();
            remove_contents(sub, dev, &path, kept)?;
            if kept.len() > before {
                continue;
            }
            match unlinkat(Some(fd), n.as_c_str(), UnlinkatFlags::RemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            }
        } else {
            match unlinkat(Some(fd), n.as_c_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn ino(p: &Path) -> u64 {
        fs::symlink_metadata(p).unwrap().ino()
    }

    /// A directory with a file in it that nothing may touch.
    fn victim(at: &Path) -> PathBuf {
        fs::create_dir_all(at).unwrap();
        fs::write(at.join("precious"), b"keep").unwrap();
        at.to_path_buf()
    }

    fn intact(v: &Path) {
        assert_eq!(fs::read(v.join("precious")).unwrap(), b"keep", "{v:?}");
    }

    #[test]
    fn removes_its_tree_without_following_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().canonicalize().unwrap();
        let outside = victim(&parent.join("outside"));
        let run = parent.join("fsgauge-tree-7-0");
        fs::create_dir_all(run.join("a/b/c")).unwrap();
        fs::write(run.join("a/b/c/f"), b"x").unwrap();
        fs::write(run.join("g"), b"x").unwrap();
        symlink(&outside, run.join("a/link-to-outside")).unwrap();
        symlink(outside.join("precious"), run.join("file-link")).unwrap();
        remove(&parent, "fsgauge-tree-7-0", Some(ino(&run))).unwrap();
        assert!(!run.exists());
        intact(&outside);
        // Gone already: removed.
        remove(&parent, "fsgauge-tree-7-0", Some(ino(&outside))).unwrap();
    }

    #[test]
    fn forged_entries_are_refused_and_touch_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().canonicalize().unwrap();
        let plain = victim(&parent.join("data"));
        // Not named like a run directory, although it is a real directory with its inode.
        let e = remove(&parent, "data", Some(ino(&plain))).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a run directory name"),
            "{e:#}"
        );
        // Names that reach elsewhere.
        for name in ["fsgauge-x/../data", "fsgauge-", "..", "fsgauge-a/b"] {
            assert!(remove(&parent, name, Some(ino(&plain))).is_err(), "{name}");
        }
        // A parent that is relative, or has '..' in it.
        let sub = parent.join("sub");
        fs::create_dir(&sub).unwrap();
        let named = victim(&parent.join("fsgauge-real"));
        let dotted = sub.join("..");
        assert!(remove(&dotted, "fsgauge-real", Some(ino(&named))).is_err());
        assert!(remove(Path::new("relative"), "fsgauge-real", Some(ino(&named))).is_err());
        // A symlink named like a run directory, pointing at the data.
        symlink(&plain, parent.join("fsgauge-link")).unwrap();
        let e = remove(&parent, "fsgauge-link", Some(ino(&plain))).unwrap_err();
        assert!(format!("{e:#}").contains("not a directory"), "{e:#}");
        assert!(parent.join("fsgauge-link").exists());
        // A parent reached through a symlink put into the path since.
        symlink(&parent, sub.join("up")).unwrap();
        let e = remove(&sub.join("up"), "fsgauge-real", Some(ino(&named))).unwrap_err();
        assert!(format!("{e:#}").contains("resolves to"), "{e:#}");
        // A directory of the right name that is not the inode fsgauge made (a reused name).
        let e = remove(&parent, "fsgauge-real", Some(ino(&named) + 1)).unwrap_err();
        assert!(
            format!("{e:#}").contains("not the directory fsgauge made"),
            "{e:#}"
        );
        // Never confirmed (no inode): only an empty one would go.
        let e = remove(&parent, "fsgauge-real", None).unwrap_err();
        assert!(format!("{e:#}").contains("not empty"), "{e:#}");
        intact(&plain);
        intact(&named);
        let empty = parent.join("fsgauge-empty");
        fs::create_dir(&empty).unwrap();
        remove(&parent, "fsgauge-empty", None).unwrap();
        assert!(!empty.exists());
    }

    /// A forged entry naming a system directory is refused by its name before anything is
    /// opened. Without an inode, the worst a broken check could do here is an rmdir of a
    /// non-empty directory, which the kernel refuses: the test itself cannot do harm.
    #[test]
    fn a_forged_entry_naming_etc_is_refused() {
        let e = remove(Path::new("/"), "etc", None).unwrap_err();
        assert!(
            format!("{e:#}").contains("refusing to remove /etc"),
            "{e:#}"
        );
        assert!(check_names(Path::new("/"), OsStr::new("etc")).is_err());
        assert!(Path::new("/etc").is_dir());
        // In /etc, a run directory that does not exist is simply gone.
        remove(Path::new("/etc"), "fsgauge-never-made-1-0", None).unwrap();
    }

    #[test]
    fn a_mount_at_or_below_it_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        use nix::mount::{mount, umount, MsFlags};
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().canonicalize().unwrap();
        let run = parent.join("fsgauge-m-1-0");
        let inner = run.join("inner");
        fs::create_dir_all(&inner).unwrap();
        for (at, needle) in [(&run, "mount point"), (&inner, "is mounted there")] {
            mount(
                Some("tmpfs"),
                at.as_path(),
                Some("tmpfs"),
                MsFlags::empty(),
                None::<&str>,
            )
            .unwrap();
            fs::write(at.join("on-the-mount"), b"keep").unwrap();
            let r = remove(&parent, "fsgauge-m-1-0", Some(ino(&run)));
            let on_mount = fs::read(at.join("on-the-mount"));
            umount(at.as_path()).unwrap();
            let e = r.unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{e:#}");
            assert_eq!(on_mount.unwrap(), b"keep");
        }
        remove(&parent, "fsgauge-m-1-0", Some(ino(&run))).unwrap();
        assert!(!run.exists());
    }
}
