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
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::unistd::dup3;
use nix::NixPath;

use super::ledger::{Ledger, Resource};
use crate::base::sys::dirstream::{DirStream, EntryType};
use crate::base::sys::{fchmod, fstat, mkdir_at, open_dir_at, stat_at, unlink_at};

/// What every run directory's name starts with.
pub const PREFIX: &str = "fsgauge-";

/// A run directory that exists for as long as this value does, used through the descriptor it
/// was made with: the directory's name sits in a place another user may write (a `--dir`), so
/// it is resolved once, when made, and never again. Workloads get [`RunDir::pinned`], a path
/// through `/proc/self/fd/N/.` that lands on the very inode fsgauge made whatever is renamed or
/// planted under its name since.
#[derive(Debug)]
pub struct RunDir {
    /// The path as the user knows it (messages, results).
    path: PathBuf,
    /// `/proc/self/fd/N/.` of `dir`.
    pinned: PathBuf,
    /// The run directory, `O_DIRECTORY`, kept open until it is removed.
    dir: OwnedFd,
    /// The directory holding it, kept open (a `--dir`); `None` on a testbed, whose mount point
    /// lies in fsgauge's own work directory and is unmounted by remounts.
    parent: Option<OwnedFd>,
    parent_path: PathBuf,
    /// How the parent is reached again (`parent_path`, or a path through held descriptors).
    reach: PathBuf,
    name: CString,
    dev: u64,
    ino: u64,
    ledger: Option<Ledger>,
    made: Option<Resource>,
}

impl RunDir {
    /// Makes `parent/name` (which must not exist) with `mkdirat` on an opened descriptor of
    /// `parent`, mode 0700, and checks on its own descriptor that it is the directory made:
    /// owned by this user (nobody else can make one owned by root), a directory, empty. With
    /// `record`, the directory has a ledger entry of its own, so that `testbed cleanup` removes
    /// it after a SIGKILL; on a testbed it goes with the testbed.
    pub fn create(parent: &Path, name: &str, record: bool) -> Result<Self> {
        // Reached as every user-named path is (another user's link leads only to what that
        // user owns), recorded by its real path (cleanup refuses a parent that no longer
        // resolves to itself), and made through the descriptor the walk holds.
        let walked = crate::base::sys::trust::walk(parent, None)
            .with_context(|| format!("--dir {}", parent.display()))?;
        let reach = crate::base::sys::trust::fd_path(std::os::fd::AsFd::as_fd(&walked.fd), ".");
        Self::create_at(&reach, &walked.path, name, record)
    }

    /// [`RunDir::create`] in the directory reached as `reach` — on a testbed, the mount point
    /// through the descriptor of the testbed's directory (`/proc/self/fd/N/mnt`), since the
    /// path above it may lie in a directory another user can rename — and shown to the user
    /// as `parent` (canonical), through which nothing is looked up.
    pub fn create_at(reach: &Path, parent: &Path, name: &str, record: bool) -> Result<Self> {
        check_names(parent, OsStr::new(name))?;
        let path = parent.join(name);
        let cname = CString::new(name).context("a run directory name holds a NUL byte")?;
        let cparent = CString::new(reach.as_os_str().as_bytes())
            .with_context(|| format!("{} holds a NUL byte", reach.display()))?;
        let pfd = crate::base::sys::open(&cparent, DIR_FLAGS, 0)
            .with_context(|| format!("opening {}", parent.display()))?;
        let unconfirmed = Resource::RunDir {
            parent: parent.to_path_buf(),
            name: name.to_string(),
            ino: None,
        };
        let mut ledger = if record {
            Some(record_unconfirmed(&path, &unconfirmed)?)
        } else {
            None
        };
        if let Err(e) = make_dir(pfd.as_fd(), &cname, &path) {
            // Nothing was made (and a directory already there is not ours to remove).
            give_up(ledger, &unconfirmed, true);
            return Err(e);
        }
        let (dir, st) = match open_made(pfd.as_fd(), &cname, &path) {
            Ok(x) => x,
            Err(Made::Swapped(e)) => {
                // What fsgauge made was moved away empty, and what has the name now is
                // another user's: neither is for fsgauge to remove.
                give_up(ledger, &unconfirmed, true);
                return Err(e);
            }
            Err(Made::Failed(e)) => {
                // The name is not known to be ours: the ledger entry (no inode) lets cleanup
                // remove only an empty directory.
                give_up(ledger, &unconfirmed, false);
                return Err(e);
            }
        };
        let made = Resource::RunDir {
            parent: parent.to_path_buf(),
            name: name.to_string(),
            ino: Some(st.st_ino),
        };
        if let Some(l) = ledger.as_mut() {
            // From here on the entry names the very inode made above.
            l.replace(&unconfirmed, made.clone())?;
        }
        // The trailing `/.` makes even a look-up that does not follow a final symlink (the
        // layout walk's, aging's) land on the directory the magic link leads to.
        let pinned = PathBuf::from(format!("/proc/self/fd/{}/.", dir.as_raw_fd()));
        let this = Self {
            path,
            pinned,
            dir,
            parent: record.then_some(pfd),
            parent_path: parent.to_path_buf(),
            reach: reach.to_path_buf(),
            name: cname,
            dev: st.st_dev,
            ino: st.st_ino,
            ledger,
            made: Some(made),
        };
        this.check_pinned()?;
        if !record {
            this.pin();
        }
        Ok(this)
    }

    /// Checks that the pinned path (`/proc/self/fd/N/.`) leads to the directory made: fsgauge
    /// reaches its run directory only through it.
    fn check_pinned(&self) -> Result<()> {
        match fs::metadata(&self.pinned) {
            Ok(m) if (m.dev(), m.ino()) == (self.dev, self.ino) => Ok(()),
            _ => bail!(
                "{} does not lead to {} (is /proc mounted?): fsgauge reaches its run directory through it",
                self.pinned.display(),
                self.path.display()
            ),
        }
    }

    /// Keeps the unrecorded directory (one on a testbed) among the pins, by its descriptor,
    /// parent, name and inode.
    fn pin(&self) {
        pins().push(Pin {
            fd: self.dir.as_raw_fd(),
            parent: self.parent_path.clone(),
            name: self.name.clone(),
            ino: self.ino,
        });
    }

    /// The path as the user knows it, for messages and results.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path to hand to code that works by path: `/proc/self/fd/N/.` of the directory made,
    /// valid while this value lives (in this process; a child process would need the
    /// descriptor and `/proc/PID/fd/N`).
    pub fn pinned(&self) -> &Path {
        &self.pinned
    }

    /// Removes the tree through the held descriptor, then the directory's name, but only while
    /// that name is still the inode made (checked through the parent's descriptor).
    fn remove(&mut self) -> Result<()> {
        let dir = self
            .dir
            .try_clone()
            .with_context(|| format!("dup of the descriptor of {}", self.path.display()))?;
        // A remount that failed leaves the descriptor parked on /dev/null: then nothing of it
        // is removed here (the testbed's teardown takes it).
        let st = fstat(dir.as_fd()).with_context(|| format!("fstat {}", self.path.display()))?;
        if !is_dir(&st) || (st.st_dev, st.st_ino) != (self.dev, self.ino) {
            bail!(
                "the descriptor of {} no longer leads to it (a remount failed); left to the testbed's teardown",
                self.path.display()
            );
        }
        let mut kept = Vec::new();
        remove_contents(dir, self.dev, &self.path, &mut kept)?;
        if !kept.is_empty() {
            bail!(
                "{} was emptied except for mount points on other filesystems, left alone: {}",
                self.path.display(),
                kept.join(", ")
            );
        }
        let reopened;
        let pfd = match &self.parent {
            Some(p) => p.as_fd(),
            None => {
                reopened = match open_dir_path(&self.reach) {
                    Ok(d) => d,
                    // The testbed is gone with the directory in it.
                    Err(e) if gone(Some(e as i32)) => return Ok(()),
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("opening {}", self.parent_path.display()))
                    }
                };
                reopened.as_fd()
            }
        };
        let renamed = |now: &str| {
            eprintln!(
                "fsgauge: warning: {} was renamed away while the run used it ({now}): its contents were removed through the descriptor fsgauge held; the emptied directory, under whatever name it has now, and what is now named {} were left alone. Another user can write {}: give fsgauge a --dir only root can write",
                self.path.display(),
                self.name.to_string_lossy(),
                self.parent_path.display()
            );
        };
        match stat_at(pfd, self.name.as_c_str()) {
            Ok(st) if is_dir(&st) && (st.st_dev, st.st_ino) == (self.dev, self.ino) => {
                match unlink_at(pfd, self.name.as_c_str(), true) {
                    Ok(()) | Err(Errno::ENOENT) => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("removing {}", self.path.display())),
                }
            }
            Ok(_) => {
                renamed("the name now holds something else");
                Ok(())
            }
            Err(Errno::ENOENT) => {
                renamed("the name is gone");
                Ok(())
            }
            Err(e) => Err(e).with_context(|| format!("lstat {}", self.path.display())),
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let fd = self.dir.as_raw_fd();
        pins().retain(|p| p.fd != fd);
        let removed = self.remove();
        if let Err(e) = &removed {
            eprintln!(
                "fsgauge: warning: removing {}: {e:#}{}",
                self.path.display(),
                if self.ledger.is_some() {
                    "; `fsgauge testbed cleanup` removes it later"
                } else {
                    ""
                }
            );
        }
        if let Some(mut l) = self.ledger.take() {
            if removed.is_ok() {
                if let Some(made) = self.made.take() {
                    let _ = l.forget(&made);
                }
            } else {
                // Left to `testbed cleanup`, which checks the name again.
                return;
            }
            for e in l.release_all_with(teardown) {
                eprintln!(
                    "fsgauge: warning: removing {}: {e:#}; `fsgauge testbed cleanup` removes it later",
                    self.path.display()
                );
            }
        }
    }
}

/// How run directories are opened: never through a symlink, never inherited by a child.
const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Why a directory just made cannot be used.
/// Begins the ledger entry of run directory `path`, holding `unconfirmed` (its name, no
/// inode yet) before anything is made.
fn record_unconfirmed(path: &Path, unconfirmed: &Resource) -> Result<Ledger> {
    let mut l = Ledger::begin(&format!("dir-{}", super::unique_suffix()), false)?;
    l.set_details(serde_json::json!({ "dir": path }))?;
    l.record(unconfirmed.clone())?;
    Ok(l)
}

/// Releases the ledger of a run directory that could not be made or confirmed; with
/// `forget`, its `unconfirmed` entry is dropped first, so that nothing is removed by name.
fn give_up(ledger: Option<Ledger>, unconfirmed: &Resource, forget: bool) {
    if let Some(mut l) = ledger {
        if forget {
            let _ = l.forget(unconfirmed);
        }
        for e in l.release_all_with(teardown) {
            eprintln!("fsgauge: warning: {e:#}");
        }
    }
}

/// Makes directory `name` (mode 0700) in `parent`; the error names `path`, and says when
/// something of that name was there already.
fn make_dir(parent: BorrowedFd<'_>, name: &CString, path: &Path) -> Result<()> {
    mkdir_at(parent, name.as_c_str(), 0o700).map_err(|e| {
        anyhow::Error::new(e).context(format!(
            "creating {}{}",
            path.display(),
            if e == Errno::EEXIST {
                " (something of that name is there already, not made by this run)"
            } else {
                ""
            }
        ))
    })
}

/// Opens directory `name` in `parent` right after making it, and checks it is the one made.
fn open_made(
    parent: BorrowedFd<'_>,
    name: &CString,
    path: &Path,
) -> Result<(OwnedFd, libc::stat), Made> {
    match crate::base::sys::open_at(parent.as_raw_fd(), name, DIR_FLAGS, 0) {
        Ok(fd) => check_made(fd, path),
        // A symlink (ELOOP, ENOTDIR with O_DIRECTORY), a file, or nothing where the
        // directory was made a moment ago.
        Err(e @ (Errno::ELOOP | Errno::ENOTDIR | Errno::ENOENT)) => {
            Err(Made::Swapped(swapped(path, &format!("{e:?} opening it"))))
        }
        Err(e) => Err(Made::Failed(
            anyhow::Error::new(e)
                .context(format!("opening {} right after making it", path.display())),
        )),
    }
}

enum Made {
    /// Another user swapped something in under its name.
    Swapped(anyhow::Error),
    /// A system call failed.
    Failed(anyhow::Error),
}

fn swapped(path: &Path, why: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is not the directory fsgauge just made ({why}): another user swapped it; give fsgauge a --dir only root can write",
        path.display()
    )
}

/// Checks the directory just made, on its own descriptor: a directory, owned by this user,
/// empty; then makes sure of its mode 0700 (the umask may have taken more).
fn check_made(fd: OwnedFd, path: &Path) -> Result<(OwnedFd, libc::stat), Made> {
    let failed = |e: Errno, what: &str| {
        Made::Failed(anyhow::Error::new(e).context(format!("{what} {}", path.display())))
    };
    let st = fstat(fd.as_fd()).map_err(|e| failed(e, "fstat"))?;
    let euid = nix::unistd::geteuid().as_raw();
    if !is_dir(&st) {
        return Err(Made::Swapped(swapped(path, "not a directory")));
    }
    if st.st_uid != euid {
        return Err(Made::Swapped(swapped(
            path,
            &format!("owned by uid {}", st.st_uid),
        )));
    }
    // The stream reads a second descriptor, so `fd` keeps its offset and stays ours.
    let copy = fd.try_clone().map_err(|e| {
        failed(
            e.raw_os_error().map_or(Errno::EIO, Errno::from_raw),
            "dup of the descriptor of",
        )
    })?;
    let mut listing = DirStream::new(copy).map_err(|e| failed(e, "reading"))?;
    listing.rewind();
    if matches!(listing.next_entry(), Some(Ok(_))) {
        return Err(Made::Swapped(swapped(path, "it is not empty")));
    }
    fchmod(fd.as_fd(), 0o700).map_err(|e| failed(e, "chmod 0700"))?;
    Ok((fd, st))
}

/// A testbed's run directory held open: a remount must let go of it and take it up again.
struct Pin {
    fd: RawFd,
    parent: PathBuf,
    name: CString,
    ino: u64,
}

fn pins() -> std::sync::MutexGuard<'static, Vec<Pin>> {
    static PINS: Mutex<Vec<Pin>> = Mutex::new(Vec::new());
    PINS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `remount` (an unmount and a mount of `mountpoint`) while the run directories held open
/// on it let go of the filesystem: each one's descriptor number is parked on `/` (so the paths
/// handed out, `/proc/self/fd/N`, stay valid numbers) and afterwards points at the directory
/// again, opened under the mount point (reached as `reach`, see [`RunDir::create_at`]) and
/// checked to be the same inode.
pub fn across_remount(
    mountpoint: &Path,
    reach: &Path,
    remount: impl FnOnce() -> Result<()>,
) -> Result<()> {
    // Pins name their parent canonical, as made.
    let canonical = mountpoint.canonicalize();
    let mountpoint = canonical.as_deref().unwrap_or(mountpoint);
    let pins = pins();
    let mine: Vec<&Pin> = pins.iter().filter(|p| p.parent == mountpoint).collect();
    if mine.is_empty() {
        return remount();
    }
    // Parked on /dev/null, which is no directory: while parked, nothing below
    // /proc/self/fd/N can be reached (ENOTDIR), so a remount that fails leaves the run's later
    // steps failing, never working somewhere else.
    let park = crate::base::sys::open(c"/dev/null", libc::O_PATH | libc::O_CLOEXEC, 0)
        .context("opening /dev/null to park run directories across a remount")?;
    for p in &mine {
        dup3(park.as_raw_fd(), p.fd, OFlag::O_CLOEXEC)
            .with_context(|| format!("parking descriptor {} across a remount", p.fd))?;
    }
    remount()?;
    let mp = open_dir_path(reach)
        .with_context(|| format!("opening {} after the remount", mountpoint.display()))?;
    for p in mine {
        let shown = mountpoint.join(OsStr::from_bytes(p.name.as_bytes()));
        let d = open_dir_at(mp.as_fd(), p.name.as_c_str())
            .with_context(|| format!("opening {} after the remount", shown.display()))?;
        let st = fstat(d.as_fd()).with_context(|| format!("fstat {}", shown.display()))?;
        if !is_dir(&st) || st.st_ino != p.ino {
            bail!(
                "{} is not the run directory it was before the remount (inode {} instead of {})",
                shown.display(),
                st.st_ino,
                p.ino
            );
        }
        dup3(d.as_raw_fd(), p.fd, OFlag::O_CLOEXEC)
            .with_context(|| format!("taking up {} again after the remount", shown.display()))?;
    }
    Ok(())
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

/// The [`Teardown`](super::ledger::Teardown) of a run directory the ledger recorded.
pub fn teardown(r: &Resource) -> Option<Result<()>> {
    match r {
        Resource::RunDir { parent, name, ino } => Some(remove(parent, name, *ino)),
        _ => None,
    }
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
    let pdir = match open_dir_path(parent) {
        Ok(d) => d,
        Err(e) if gone(Some(e as i32)) => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("opening {}", parent.display())),
    };
    let pst = fstat(pdir.as_fd()).with_context(|| format!("fstat {}", parent.display()))?;
    let st = match stat_at(pdir.as_fd(), name) {
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
        return match unlink_at(pdir.as_fd(), name, true) {
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
    let dir =
        open_dir_at(pdir.as_fd(), name).with_context(|| format!("opening {}", what.display()))?;
    let dst = fstat(dir.as_fd()).with_context(|| format!("fstat {}", what.display()))?;
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
    match unlink_at(pdir.as_fd(), name, true) {
        Ok(()) => Ok(()),
        Err(e) if gone(Some(e as i32)) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", what.display())),
    }
}

/// An errno that says the thing is not there (or cannot be, below a non-directory).
fn gone(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Opens the directory at `path` (absolute), not following a symlink in its last component.
fn open_dir_path(path: &Path) -> Result<OwnedFd, Errno> {
    path.with_nix_path(|c| crate::base::sys::open(c, DIR_FLAGS, 0))?
}

/// A mount whose target is `dir` or lies below it.
fn mount_at_or_below(dir: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(crate::base::sys::proc::unescape_mount_field)
        .find(|t| Path::new(t).starts_with(dir))
}

/// Empties the directory open as `dir`, depth first, through descriptors only: symlinks are
/// removed, never followed; directories on another filesystem (`dev`) are left and listed in
/// `kept`.
fn remove_contents(dir: OwnedFd, dev: u64, at: &Path, kept: &mut Vec<String>) -> Result<()> {
    // Names first, then removal: a directory is not changed while it is being read. The
    // stream reads a second descriptor; `dir` stays for the removals.
    let copy = dir
        .try_clone()
        .with_context(|| format!("dup of the descriptor of {}", at.display()))?;
    let mut stream = DirStream::new(copy).with_context(|| format!("reading {}", at.display()))?;
    stream.rewind();
    let mut names: Vec<(CString, EntryType)> = Vec::new();
    while let Some(Ok((n, t))) = stream.next_entry() {
        names.push((n.to_owned(), t));
    }
    drop(stream);
    let fd = dir.as_fd();
    for (n, kind) in names {
        let path = at.join(OsStr::from_bytes(n.as_bytes()));
        // The directory entry's type saves a stat for everything but directories; where the
        // filesystem does not say, ask.
        let is_subdir = match kind {
            EntryType::Dir => true,
            EntryType::File | EntryType::Symlink | EntryType::Other => false,
            EntryType::Unknown => match stat_at(fd, n.as_c_str()) {
                Ok(st) => is_dir(&st),
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e).with_context(|| format!("lstat {}", path.display())),
            },
        };
        if is_subdir {
            // O_NOFOLLOW: a symlink swapped in since is not entered. A mount point opens as
            // the mounted filesystem's root, whose device differs.
            let sub = match open_dir_at(fd, n.as_c_str()) {
                Ok(sub) => sub,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
            };
            let sst = fstat(sub.as_fd()).with_context(|| format!("fstat {}", path.display()))?;
            if sst.st_dev != dev {
                kept.push(path.display().to_string());
                continue;
            }
            let before = kept.len();
            remove_contents(sub, dev, &path, kept)?;
            if kept.len() > before {
                continue;
            }
            match unlink_at(fd, n.as_c_str(), true) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            }
        } else {
            match unlink_at(fd, n.as_c_str(), false) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, PermissionsExt};

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

    /// A run directory made without a ledger entry (as on a testbed): the workload's path
    /// reaches the inode made even after its name is swapped for a symlink to a victim, and
    /// the removal empties what was made and leaves the swapped-in names and the victim alone.
    #[test]
    fn a_swapped_name_is_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().canonicalize().unwrap();
        let outside = victim(&parent.join("outside"));
        let name = "fsgauge-swap-1-0";
        let made = RunDir::create(&parent, name, false).unwrap();
        let shown = parent.join(name);
        assert_eq!(made.path(), shown);
        assert_eq!(ino(made.pinned()), ino(&shown));
        assert_eq!(
            fs::metadata(&shown).unwrap().permissions().mode() & 0o7777,
            0o700
        );
        fs::create_dir(made.pinned().join("d")).unwrap();
        fs::write(made.pinned().join("d/f"), b"ours").unwrap();
        // The owner of the parent moves it away and plants a symlink in its place.
        let away = parent.join("fsgauge-swap-1-0.x");
        fs::rename(&shown, &away).unwrap();
        symlink(&outside, &shown).unwrap();
        fs::write(made.pinned().join("g"), b"ours").unwrap();
        assert!(away.join("g").exists() && !outside.join("g").exists());
        drop(made);
        intact(&outside);
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
        assert!(fs::symlink_metadata(&shown)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_dir(&away).unwrap().count(), 0, "emptied");
    }

    /// A testbed's run directory held open lets go of the mount across a remount (a bind mount
    /// here: unmounting it fails while a descriptor is open in it), and is taken up again
    /// under the same pinned path; after a remount that fails, the pinned path leads nowhere.
    #[test]
    fn a_remount_lets_go_of_the_run_directory_and_takes_it_up_again() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: bind mounts need root");
            return;
        }
        use nix::mount::{mount, umount, MsFlags};
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let (src, mp) = (base.join("src"), base.join("mnt"));
        fs::create_dir(&src).unwrap();
        fs::create_dir(&mp).unwrap();
        let bind = || {
            mount(
                Some(&src),
                &mp,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
        };
        bind().unwrap();
        // Whatever fails below, the mount goes with the test (a panic must not leave it).
        let _mounted = Unmounted(mp.clone());
        let made = RunDir::create(&mp, "fsgauge-remount", false).unwrap();
        fs::write(made.pinned().join("f"), b"ours").unwrap();
        across_remount(&mp, &mp, || {
            umount(&mp)?;
            bind()?;
            Ok(())
        })
        .unwrap();
        assert_eq!(fs::read(made.pinned().join("f")).unwrap(), b"ours");
        // A remount that fails half-way: nothing is reachable through the pinned path.
        let e = across_remount(&mp, &mp, || {
            umount(&mp)?;
            anyhow::bail!("mount failed")
        });
        assert!(e.is_err());
        let err = fs::read(made.pinned().join("f")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");
        drop(made);
        // Left for the teardown, untouched.
        assert_eq!(fs::read(src.join("fsgauge-remount/f")).unwrap(), b"ours");
    }

    #[test]
    fn a_name_that_is_taken_is_refused_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().canonicalize().unwrap();
        let there = victim(&parent.join("fsgauge-taken-1-0"));
        let e = RunDir::create(&parent, "fsgauge-taken-1-0", false).unwrap_err();
        assert!(format!("{e:#}").contains("there already"), "{e:#}");
        intact(&there);
        symlink(&there, parent.join("fsgauge-link-1-0")).unwrap();
        assert!(RunDir::create(&parent, "fsgauge-link-1-0", false).is_err());
        intact(&there);
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

    /// A mount made by a test, detached when the test ends, even by a panic.
    struct Unmounted(PathBuf);

    impl Drop for Unmounted {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    #[test]
    fn a_mount_at_or_below_it_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        use nix::mount::{mount, MsFlags};
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
            let mounted = Unmounted(at.to_path_buf());
            fs::write(at.join("on-the-mount"), b"keep").unwrap();
            let r = remove(&parent, "fsgauge-m-1-0", Some(ino(&run)));
            let on_mount = fs::read(at.join("on-the-mount"));
            drop(mounted);
            let e = r.unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{e:#}");
            assert_eq!(on_mount.unwrap(), b"keep");
        }
        remove(&parent, "fsgauge-m-1-0", Some(ino(&run))).unwrap();
        assert!(!run.exists());
    }
}
