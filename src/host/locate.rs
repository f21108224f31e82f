//! Finding what a ledger entry recorded where it is now, so that `testbed cleanup` removes the
//! image and directories of a killed run even after they were renamed.
//!
//! The owner of a `--workdir` can rename the private directory fsgauge made in it (only
//! within that directory: moving a directory to another parent needs write permission on the
//! directory itself, which only root has), and root can rename anything, such as
//! `/var/tmp/fsgauge/ext4-PID-0`. The ledger records each directory's and image's identity
//! (device and inode), so an object is looked for by that identity:
//! - at its recorded path;
//! - in its recorded parent directory under any name, the parent found the same way when the
//!   entry recorded it (the image in the testbed's directory in the private directory);
//! - at the path the kernel gives for a loop device still backed by one of the entry's images
//!   (`/sys/block/loopN/loop/backing_file`), and the directories above it: they follow the
//!   image wherever it was moved while its filesystem stayed mounted.
//!
//! Something found under another name is taken only while it is still what fsgauge made: the
//! recorded identity, the right kind (directory or regular file), owned by this user and not
//! writable by others. It is removed through the descriptor of the directory it was found in,
//! after its identity is checked once more. What is found nowhere is [`Missing`]: reported
//! with its identity, never counted as removed.

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::errno::Errno;

use crate::base::sys::dirstream::DirStream;
use crate::base::sys::trust::{self, FileId};

/// How deep a chain of recorded parents is followed (the image in the testbed's directory in
/// the private directory is 3).
const MAX_DEPTH: usize = 8;

/// A directory or image the ledger recorded that is neither at its recorded path nor anywhere
/// its identity was looked for.
#[derive(Debug, thiserror::Error)]
pub struct Missing {
    /// "directory" or "image".
    pub what: &'static str,
    pub path: PathBuf,
    pub id: FileId,
    /// The directories searched for its identity.
    pub searched: Vec<PathBuf>,
}

impl Missing {
    /// The directory (`is_dir`) or image `id` made as `path`, looked for in `searched`.
    fn new(path: PathBuf, is_dir: bool, id: FileId, searched: Vec<PathBuf>) -> Self {
        Missing {
            what: if is_dir { "directory" } else { "image" },
            path,
            id,
            searched,
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = (libc::major(self.id.dev), libc::minor(self.id.dev));
        write!(
            f,
            "{} {} (device {major}:{minor}, inode {}) was not found: not at that path",
            self.what,
            self.path.display(),
            self.id.ino
        )?;
        if !self.searched.is_empty() {
            let dirs: Vec<String> = self
                .searched
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            write!(f, ", nor under another name in {}", dirs.join(", "))?;
        }
        let find = match mount_of_dev(self.id.dev) {
            Some(mp) => format!("`find {} -xdev -inum {}`", mp.display(), self.id.ino),
            None => format!("its inode number {} on device {major}:{minor}", self.id.ino),
        };
        write!(
            f,
            ". A run killed while removing it may have removed it already; if it was moved elsewhere, find it with {find} and remove it by hand"
        )
    }
}

/// Where a recorded object was found: the directory holding it, held open, and its name there.
struct Found {
    dir: OwnedFd,
    name: CString,
    path: PathBuf,
}

/// What a ledger entry knows about where its objects are: the directories it recorded with
/// their identities, and where attached loop devices say its images are now.
#[derive(Debug, Default)]
pub struct Locator {
    dirs: Vec<(PathBuf, FileId)>,
    backing: Vec<PathBuf>,
}

impl Locator {
    /// The locator of the directories recorded with their identities and of the images
    /// `images` (found where attached loop devices say they are now).
    pub fn new(dirs: Vec<(PathBuf, FileId)>, images: &[FileId]) -> Self {
        let backing = if images.is_empty() {
            Vec::new()
        } else {
            super::loopdev::backing_paths(images)
        };
        Self { dirs, backing }
    }

    /// Removes the directory or image fsgauge made as `path` (the file `id`) wherever it is
    /// now; [`Missing`] when it is nowhere to be found. A directory that is not empty stays,
    /// and that is an error: it holds something fsgauge did not make, or did not find.
    /// Returns where it was found when that was not `path`.
    pub fn remove(&self, path: &Path, is_dir: bool, id: FileId) -> Result<Option<PathBuf>> {
        let mut searched = Vec::new();
        let Some(found) = self.find(path, is_dir, id, 0, &mut searched)? else {
            searched.dedup();
            return Err(Missing::new(path.to_path_buf(), is_dir, id, searched).into());
        };
        remove_found(&found, is_dir, id)?;
        Ok((found.path != path).then_some(found.path))
    }

    fn find(
        &self,
        path: &Path,
        is_dir: bool,
        id: FileId,
        depth: usize,
        searched: &mut Vec<PathBuf>,
    ) -> Result<Option<Found>> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        if depth > MAX_DEPTH {
            return Ok(None);
        }
        // The recorded parent, by its path.
        match trust::open_dir_nofollow(parent) {
            Ok(d) => {
                if let Some(f) = look_in(d, parent, name, is_dir, id)? {
                    return Ok(Some(f));
                }
                searched.push(parent.to_path_buf());
            }
            Err(e) if gone(e.raw_os_error()) || e.raw_os_error() == Some(libc::ELOOP) => {}
            Err(e) => return Err(e).with_context(|| format!("opening {}", parent.display())),
        }
        // The recorded parent by its identity, wherever it is now.
        if let Some((_, pid)) = self.dirs.iter().find(|(p, _)| p == parent) {
            if let Some(pf) = self.find(parent, true, *pid, depth + 1, searched)? {
                if let Some(d) = open_found_dir(&pf, *pid)? {
                    if let Some(f) = look_in(d, &pf.path, name, is_dir, id)? {
                        return Ok(Some(f));
                    }
                    searched.push(pf.path);
                }
            }
        }
        // Where an attached loop device says an image is, and the directories above it.
        for b in &self.backing {
            for a in b.ancestors() {
                let (Some(ap), Some(an)) = (a.parent(), a.file_name()) else {
                    continue;
                };
                let Ok(d) = trust::open_dir_nofollow(ap) else {
                    continue;
                };
                // A path given by the kernel, not recorded: taken only while it is still
                // what fsgauge made.
                let name = CString::new(an.as_bytes()).context("a path holds a NUL byte")?;
                if let Ok(f) = take(d, ap, name, is_dir, id, true)? {
                    return Ok(Some(f));
                }
            }
        }
        Ok(None)
    }
}

/// Removes `name` from the held directory `dir` (at `dir_path`) while it is the file `id`,
/// looking for it under another name in `dir` when it is not there (renamed while held).
/// Returns where it was found when that was not its name; [`Missing`] when it is not in
/// `dir` at all.
pub fn remove_held(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    name: &str,
    is_dir: bool,
    id: FileId,
) -> Result<Option<PathBuf>> {
    let d = dir
        .try_clone_to_owned()
        .with_context(|| format!("dup of the descriptor of {}", dir_path.display()))?;
    let path = dir_path.join(name);
    let Some(found) = look_in(d, dir_path, OsStr::new(name), is_dir, id)? else {
        let searched = vec![dir_path.to_path_buf()];
        return Err(Missing::new(path, is_dir, id, searched).into());
    };
    remove_found(&found, is_dir, id)?;
    Ok((found.path != path).then_some(found.path))
}

/// Removes what was found, after checking its identity once more on its directory.
fn remove_found(found: &Found, is_dir: bool, id: FileId) -> Result<()> {
    let fd = found.dir.as_fd();
    match crate::base::sys::stat_at(fd, found.name.as_c_str()) {
        Ok(st) if same(&st, id) => {}
        Ok(_) | Err(Errno::ENOENT) => anyhow::bail!(
            "{} changed while it was being removed (it is no longer device {}:{}, inode {}); run cleanup again",
            found.path.display(),
            libc::major(id.dev),
            libc::minor(id.dev),
            id.ino
        ),
        Err(e) => return Err(e).with_context(|| format!("lstat {}", found.path.display())),
    }
    match crate::base::sys::unlink_at(fd, found.name.as_c_str(), is_dir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::ENOTEMPTY) | Err(Errno::EEXIST) => anyhow::bail!(
            "the directory {} is not empty: it holds something fsgauge did not make or could not find, so it was left alone; look inside, remove it by hand, then run cleanup again",
            found.path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("removing {}", found.path.display())),
    }
}

/// Looks for the file `id` in the directory `dir` (at `dir_path`): as `name`, else under any
/// name (renamed), taken only while it is still what fsgauge made.
fn look_in(
    dir: OwnedFd,
    dir_path: &Path,
    name: &OsStr,
    is_dir: bool,
    id: FileId,
) -> Result<Option<Found>> {
    let cname = CString::new(name.as_bytes()).context("a recorded name holds a NUL byte")?;
    let mut dir = match take(dir, dir_path, cname, is_dir, id, false)? {
        Ok(found) => return Ok(Some(found)),
        Err(dir) => dir,
    };
    let copy = dir
        .try_clone()
        .with_context(|| format!("dup of the descriptor of {}", dir_path.display()))?;
    let mut listing =
        DirStream::new(copy).with_context(|| format!("reading {}", dir_path.display()))?;
    listing.rewind();
    // The directory entry's inode number picks the candidates; a stat confirms the rest.
    let mut candidates: Vec<CString> = Vec::new();
    while let Some(Ok((n, _, ino))) = listing.next_with_ino() {
        if ino == id.ino {
            candidates.push(n.to_owned());
        }
    }
    for n in candidates {
        dir = match take(dir, dir_path, n, is_dir, id, true)? {
            Ok(found) => return Ok(Some(found)),
            Err(dir) => dir,
        };
    }
    Ok(None)
}

/// `name` in `dir` (at `dir_path`) as found when it is the file `id` of the right kind (and,
/// with `made`, still what fsgauge made); else the directory back, to look further.
fn take(
    dir: OwnedFd,
    dir_path: &Path,
    name: CString,
    is_dir: bool,
    id: FileId,
    made: bool,
) -> Result<std::result::Result<Found, OwnedFd>> {
    Ok(match stat_at(dir.as_fd(), &name, dir_path)? {
        Some(st) if same(&st, id) && kind_ok(&st, is_dir) && (!made || made_here(&st)) => {
            let path = dir_path.join(OsStr::from_bytes(name.as_bytes()));
            Ok(Found { dir, name, path })
        }
        _ => Err(dir),
    })
}

/// Opens the directory found as `pf` without following a symlink, checked to be the directory
/// `id`.
fn open_found_dir(pf: &Found, id: FileId) -> Result<Option<OwnedFd>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let d = match crate::base::sys::open_at(pf.dir.as_raw_fd(), &pf.name, flags, 0) {
        Ok(d) => d,
        Err(e) if gone(Some(e as i32)) || e == Errno::ELOOP => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", pf.path.display())),
    };
    let st = trust::fstat(d.as_fd()).with_context(|| format!("fstat {}", pf.path.display()))?;
    Ok((st.st_dev == id.dev && st.st_ino == id.ino).then_some(d))
}

/// fstatat without following a symlink; None when nothing (or no directory on the way) is
/// there.
fn stat_at(dir: BorrowedFd<'_>, name: &CStr, dir_path: &Path) -> Result<Option<libc::stat>> {
    match crate::base::sys::stat_at(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(e) if gone(Some(e as i32)) => Ok(None),
        Err(e) => Err(e).with_context(|| {
            format!(
                "lstat {}",
                dir_path.join(OsStr::from_bytes(name.to_bytes())).display()
            )
        }),
    }
}

fn same(st: &libc::stat, id: FileId) -> bool {
    st.st_dev == id.dev && st.st_ino == id.ino
}

fn kind_ok(st: &libc::stat, is_dir: bool) -> bool {
    st.st_mode & libc::S_IFMT == if is_dir { libc::S_IFDIR } else { libc::S_IFREG }
}

/// What fsgauge makes is this user's and not writable by others.
fn made_here(st: &libc::stat) -> bool {
    st.st_uid == nix::unistd::geteuid().as_raw() && st.st_mode & 0o022 == 0
}

/// An errno that says the thing is not there (or cannot be, below a non-directory).
fn gone(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

/// A mount point of the filesystem on device `dev`, for the hint to find a missing object.
fn mount_of_dev(dev: u64) -> Option<PathBuf> {
    let want = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let at = f.get(4)?;
        (f.get(2) == Some(&want.as_str()) && f.get(3) == Some(&"/"))
            .then(|| PathBuf::from(crate::base::sys::proc::unescape_mount_field(at)))
    })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::host::ledger::{Ledger, Resource};

    fn id(p: &Path) -> FileId {
        let md = fs::symlink_metadata(p).unwrap();
        FileId {
            dev: md.dev(),
            ino: md.ino(),
        }
    }

    /// A killed run's private directory, testbed directory and image, recorded with their
    /// identities in a ledger entry of its own: (ledger, entry, work dir, the three paths).
    fn killed_run(tmp: &Path) -> (Ledger, [PathBuf; 3]) {
        let wd = tmp.join("wd");
        let private = wd.join(".fsgauge-0123");
        let home = private.join("ext4-1-0");
        let image = home.join("fs.img");
        fs::create_dir_all(&home).unwrap();
        fs::write(&image, b"image").unwrap();
        fs::set_permissions(&image, fs::Permissions::from_mode(0o600)).unwrap();
        let mut l = Ledger::begin_in(&tmp.join("ledger"), "ext4-1-0", false).unwrap();
        for (p, r) in [
            (
                &private,
                Resource::Dir {
                    path: private.clone(),
                    id: Some(id(&private)),
                },
            ),
            (
                &home,
                Resource::Dir {
                    path: home.clone(),
                    id: Some(id(&home)),
                },
            ),
            (
                &image,
                Resource::Image {
                    path: image.clone(),
                    id: Some(id(&image)),
                },
            ),
        ] {
            assert!(p.exists());
            l.record(r).unwrap();
        }
        (l, [private, home, image])
    }

    /// Issue 29 item 7: the private directory renamed after the run made it, and a victim
    /// planted under its old name: the renamed directory, its testbed directory and image are
    /// found by their identities and removed; the victim stays.
    #[test]
    fn a_renamed_private_directory_is_found_by_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = tmp.path().canonicalize().unwrap();
        let (mut l, [private, home, _]) = killed_run(&tmp);
        let renamed = tmp.join("wd/.fsgauge-0123.x");
        fs::rename(&private, &renamed).unwrap();
        fs::create_dir_all(&home).unwrap();
        fs::write(home.join("fs.img"), b"victim").unwrap();
        let errors = l.release_all();
        assert!(errors.is_empty(), "{errors:?}");
        assert!(!renamed.exists(), "the renamed private directory was left");
        assert_eq!(fs::read(home.join("fs.img")).unwrap(), b"victim");
        assert!(!tmp.join("ledger/ext4-1-0.json").exists());
    }

    /// Issue 29 item 7: what is nowhere to be found is said to be missing, naming it and its
    /// inode, struck off, and what was made before it still goes; a directory under another
    /// name that others can write is not taken for the one fsgauge made.
    #[test]
    fn what_is_found_nowhere_is_reported_with_its_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let tmp = tmp.path().canonicalize().unwrap();
        let (mut l, [private, home, image]) = killed_run(&tmp);
        let far = tmp.join("far");
        fs::create_dir(&far).unwrap();
        let moved = far.join("moved.img");
        fs::rename(&image, &moved).unwrap();
        fs::write(&image, b"victim").unwrap();
        let ino = id(&moved).ino;
        let errors = l.release_all();
        let text: Vec<String> = errors.iter().map(|e| format!("{e:#}")).collect();
        assert_eq!(errors.len(), 2, "{text:?}");
        assert!(errors[0].is::<Missing>(), "{text:?}");
        assert!(
            text[1].contains(&format!("{} is not empty", home.display())),
            "{text:?}"
        );
        for needle in [
            format!("image {}", image.display()),
            format!("inode {ino}"),
            format!("in {}", home.display()),
            "was not found".to_string(),
        ] {
            assert!(text[0].contains(&needle), "no {needle:?} in {}", text[0]);
        }
        // Struck off; the testbed's directory holds the victim, so it stays, and says so.
        assert_eq!(fs::read(&moved).unwrap(), b"image");
        assert_eq!(fs::read(&image).unwrap(), b"victim");
        assert!(private.exists());

        // A renamed directory that others can write is not fsgauge's to remove.
        let (mut l, [private, _, image]) = killed_run(&tmp.join("again"));
        fs::remove_file(&image).unwrap();
        let renamed = private.with_file_name(".fsgauge-0123.x");
        fs::rename(&private, &renamed).unwrap();
        fs::set_permissions(&renamed, fs::Permissions::from_mode(0o777)).unwrap();
        let errors = l.release_all();
        let text: Vec<String> = errors.iter().map(|e| format!("{e:#}")).collect();
        assert!(
            text.iter().any(|t| t.contains("ext4-1-0 (device")),
            "{text:?}"
        );
        assert!(renamed.join("ext4-1-0").exists(), "{text:?}");
    }
}
