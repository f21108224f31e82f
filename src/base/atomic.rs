//! Atomic file writes, for results, reports and the ledger: a reader sees the old file or the new
//! one, never a torn one, even after a crash; and a writer running as root in a directory that
//! another user can write never follows anything that user planted there.
//!
//! Every write goes through a directory opened once ([`OutDir`]). The data is written to a
//! temporary file that has no name (`O_TMPFILE`), or, where the filesystem cannot make one, a
//! random name created with `O_CREAT | O_EXCL | O_NOFOLLOW`: no name another user could predict
//! and plant a symlink at. Then either
//! - [`OutDir::replace`] renames it over the target name through the directory descriptor
//!   (`renameat` replaces a symlink planted at the name, it never follows it), or
//! - [`OutDir::create_new`] links it under a name that must not exist yet (`linkat` fails with
//!   `EEXIST` for any existing entry, symlinks included), trying further names until one is
//!   free, so a result never replaces another file and two processes never share a name.
//!
//! On any error the temporary file goes with it (an unnamed one by itself, a named one is
//! unlinked by its guard).

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::fcntl::AtFlags;

use crate::base::sys::fs_error;

/// How many names [`OutDir::create_new`] tries before giving up.
const MAX_NAMES: u32 = 10_000;

/// A directory opened once; every name below is resolved through its descriptor.
#[derive(Debug)]
pub struct OutDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl OutDir {
    /// Opens an existing directory, reached as [`crate::base::sys::chase`] reaches a path (another
    /// user's link leads only to what that user owns); `path` is kept as the user gave it, for
    /// messages.
    pub fn open(path: &Path) -> Result<OutDir> {
        Self::reach(path, None)
    }

    /// [`OutDir::open`], making the directory and its missing parents (mode 0755) first.
    pub fn make(path: &Path) -> Result<OutDir> {
        Self::reach(path, Some(0o755))
    }

    fn reach(path: &Path, create: Option<u32>) -> Result<OutDir> {
        let w = crate::base::sys::trust::walk(path, create)?;
        Ok(OutDir {
            fd: w.fd,
            path: path.to_path_buf(),
        })
    }

    /// The kernel interface this directory is on (`/proc`, `/sys`, a cgroup filesystem, …),
    /// where no output belongs; `None` on a real filesystem.
    pub fn kernel_interface(&self) -> Option<&'static str> {
        use nix::sys::statfs as s;
        let t = s::fstatfs(&self.fd).ok()?.filesystem_type();
        let kernel = [
            (s::PROC_SUPER_MAGIC, "/proc"),
            (s::SYSFS_MAGIC, "/sys"),
            (s::CGROUP2_SUPER_MAGIC, "a cgroup filesystem"),
            (s::CGROUP_SUPER_MAGIC, "a cgroup filesystem"),
            (s::DEBUGFS_MAGIC, "debugfs"),
            (s::SECURITYFS_MAGIC, "securityfs"),
            (s::TRACEFS_MAGIC, "tracefs"),
        ];
        kernel.iter().find(|(m, _)| *m == t).map(|(_, w)| *w)
    }

    /// The directory `name` in this one, made (mode 0755) when missing; never through a link.
    pub fn subdir(&self, name: &str) -> Result<OutDir> {
        check_name(name, &self.path)?;
        let shown = self.shown(name);
        match crate::base::sys::trust::mkdir_at(self.fd.as_fd(), Path::new(name), 0o755) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("mkdir", &shown, e)),
        }
        let fd = crate::base::sys::trust::open_dir_in(self.fd.as_fd(), name).map_err(|e| {
            crate::base::error::bad_input(format!(
                "{shown} is not a directory fsgauge can write into ({e}); remove it or choose another place"
            ))
        })?;
        Ok(OutDir {
            fd,
            path: self.path.join(name),
        })
    }

    /// Creates `name` here for writing as the caller goes (a log): an existing regular file of
    /// that name is unlinked first, never opened (it could be another user's hard link), and
    /// the new one is made with `O_CREAT | O_EXCL | O_NOFOLLOW`. Anything else at the name is
    /// refused.
    pub fn create_stream(&self, name: &str) -> Result<fs::File> {
        check_name(name, &self.path)?;
        let shown = self.shown(name);
        if let Some(st) = self.entry(name)? {
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(crate::base::error::bad_input(format!(
                    "{shown} exists and is {}; fsgauge replaces only regular files — remove it or choose another place",
                    crate::base::bounded::kind_of(st.st_mode)
                )));
            }
            crate::base::sys::unlink_at(self.fd().as_fd(), name, false)
                .map_err(|e| fs_error("unlink", &shown, e))?;
        }
        let c = cstring(name.as_bytes(), Path::new(name))?;
        crate::base::sys::open_at(
            self.raw(),
            &c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        )
        .map(fs::File::from)
        .map_err(|e| fs_error("create", &shown, e))
    }

    /// The stat of the entry `name` (a link not followed), `None` when there is none.
    fn entry(&self, name: &str) -> Result<Option<libc::stat>> {
        match crate::base::sys::trust::stat_at(self.fd.as_fd(), name) {
            Ok(st) => Ok(Some(st)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("stat", &self.shown(name), e)),
        }
    }

    /// The directory a chase ended in, opened to write in; an error says "opening PATH: …".
    pub fn from_chased(c: &crate::base::sys::chase::Chased) -> Result<OutDir> {
        let fd = crate::base::sys::chase::reopen_dir(c.dir.as_fd())
            .with_context(|| format!("opening {}", c.dir_path.display()))?;
        Ok(OutDir::from_fd(fd, c.dir_path.clone()))
    }

    /// A directory already opened (`O_DIRECTORY`), known to the user as `path`.
    pub fn from_fd(fd: OwnedFd, path: PathBuf) -> OutDir {
        OutDir { fd, path }
    }

    /// The path the directory was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's descriptor.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn shown(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    /// A fresh temporary file in this directory: unnamed where the filesystem supports
    /// `O_TMPFILE`, else under a random name created exclusively.
    fn temp(&self) -> Result<Temp<'_>> {
        let dot = c".";
        match crate::base::sys::open_at(
            self.raw(),
            dot,
            libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644,
        ) {
            Ok(fd) => {
                return Ok(Temp {
                    dir: self,
                    file: fs::File::from(fd),
                    name: None,
                })
            }
            // Filesystems without O_TMPFILE say EOPNOTSUPP (or EISDIR on old kernels, which
            // take O_TMPFILE for O_DIRECTORY).
            Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL) => {}
            Err(e) => {
                return Err(fs_error(
                    "create a temporary file in",
                    &self.path.display().to_string(),
                    e,
                ))
            }
        }
        for _ in 0..100 {
            let name = crate::base::sys::trust::private_name("tmp");
            let c = CString::new(name.clone()).expect("hex names hold no NUL");
            match crate::base::sys::open_at(
                self.raw(),
                &c,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o644,
            ) {
                Ok(fd) => {
                    return Ok(Temp {
                        dir: self,
                        file: fs::File::from(fd),
                        name: Some(name),
                    })
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(fs_error("create", &self.shown(&name), e)),
            }
        }
        anyhow::bail!(
            "no free temporary name in {} after 100 random tries; look for files named .fsgauge-tmp-* there",
            self.path.display()
        )
    }

    /// Checks that a file can be made here, by making a temporary one (and removing it).
    pub fn probe(&self) -> Result<()> {
        let mut t = self.temp()?;
        t.write(b"fsgauge")?;
        Ok(())
    }

    /// Replaces `name` (a plain file name in this directory) with `bytes`: a planted symlink at
    /// the name is replaced, never followed.
    pub fn replace(&self, name: &str, bytes: &[u8]) -> Result<()> {
        check_name(name, &self.path)?;
        self.check_replaceable(name)?;
        let mut t = self.temp()?;
        t.write(bytes)?;
        let from = match &t.name {
            Some(n) => n.clone(),
            None => {
                let mut linked = None;
                for _ in 0..100 {
                    let n = crate::base::sys::trust::private_name("tmp");
                    match t.link_as(&n) {
                        Ok(()) => {
                            linked = Some(n);
                            break;
                        }
                        Err(Errno::EEXIST) => continue,
                        Err(e) => return Err(fs_error("link", &self.shown(&n), e)),
                    }
                }
                let n = linked.with_context(|| {
                    format!("no free temporary name in {}", self.path.display())
                })?;
                t.name = Some(n.clone());
                n
            }
        };
        nix::fcntl::renameat(Some(self.raw()), from.as_str(), Some(self.raw()), name)
            .map_err(|e| fs_error("rename a temporary file to", &self.shown(name), e))?;
        t.name = None;
        self.sync();
        Ok(())
    }

    /// Refuses to replace `name` when it is there and not a regular file or a symbolic link (a
    /// device node, a FIFO, a socket, a directory): an output never destroys one.
    fn check_replaceable(&self, name: &str) -> Result<()> {
        match self.entry(name)? {
            Some(st)
                if !matches!(st.st_mode & libc::S_IFMT, libc::S_IFREG | libc::S_IFLNK) =>
            {
                Err(crate::base::error::bad_input(format!(
                    "{} is {}; fsgauge writes its output only to a regular file (or `-` for standard output) and never replaces anything else — choose another place",
                    self.shown(name),
                    crate::base::bounded::kind_of(st.st_mode)
                )))
            }
            _ => Ok(()),
        }
    }

    /// Writes `bytes` under the first name of `names(0)`, `names(1)`, … that does not exist;
    /// returns the name. Nothing existing is ever replaced.
    pub fn create_new(&self, names: impl Fn(u32) -> String, bytes: &[u8]) -> Result<String> {
        let mut t = self.temp()?;
        t.write(bytes)?;
        for i in 0..MAX_NAMES {
            let name = names(i);
            check_name(&name, &self.path)?;
            match t.link_as(&name) {
                Ok(()) => {
                    drop(t);
                    self.sync();
                    return Ok(name);
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(fs_error("link", &self.shown(&name), e)),
            }
        }
        anyhow::bail!(
            "every one of {MAX_NAMES} names like {} is taken in {}; clear the directory",
            names(0),
            self.path.display()
        )
    }

    /// Writes `bytes` under `name` only if no entry of that name exists (symlinks included):
    /// false, and nothing written, when it is taken.
    pub fn create_if_absent(&self, name: &str, bytes: &[u8]) -> Result<bool> {
        check_name(name, &self.path)?;
        let mut t = self.temp()?;
        t.write(bytes)?;
        match t.link_as(name) {
            Ok(()) => {
                drop(t);
                self.sync();
                Ok(true)
            }
            Err(Errno::EEXIST) => Ok(false),
            Err(e) => Err(fs_error("link", &self.shown(name), e)),
        }
    }

    /// Renames `from` to `to` in this directory unless `to` exists (`RENAME_NOREPLACE`).
    pub fn rename_noreplace(&self, from: &str, to: &str) -> Result<(), Errno> {
        nix::fcntl::renameat2(
            Some(self.raw()),
            from,
            Some(self.raw()),
            to,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
    }

    fn sync(&self) {
        // The rename or link is durable once the directory is; a failure here loses nothing
        // that a crash would not.
        let _ = nix::unistd::fsync(self.raw());
    }
}

/// A temporary file being written; removed on drop unless it was renamed.
struct Temp<'a> {
    dir: &'a OutDir,
    file: fs::File,
    /// Its name in the directory; `None` for an unnamed `O_TMPFILE` file.
    name: Option<String>,
}

impl Temp<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let shown = self.dir.path.display().to_string();
        self.file
            .write_all(bytes)
            .map_err(|e| io_error("write a temporary file in", &shown, e))?;
        self.file
            .sync_all()
            .map_err(|e| io_error("fsync a temporary file in", &shown, e))
    }

    /// Gives the file the name `name`, which must not exist.
    fn link_as(&self, name: &str) -> Result<(), Errno> {
        let dir = Some(self.dir.raw());
        match &self.name {
            Some(tmp) => nix::unistd::linkat(dir, tmp.as_str(), dir, name, AtFlags::empty()),
            None => {
                // Linking an O_TMPFILE file through /proc works for every user; the
                // AT_EMPTY_PATH form (without /proc) needs CAP_DAC_READ_SEARCH.
                let proc = format!("/proc/self/fd/{}", self.file.as_fd().as_raw_fd());
                match nix::unistd::linkat(
                    None,
                    proc.as_str(),
                    dir,
                    name,
                    AtFlags::AT_SYMLINK_FOLLOW,
                ) {
                    Err(Errno::ENOENT) if !Path::new("/proc/self/fd").exists() => {
                        nix::unistd::linkat(
                            Some(self.file.as_raw_fd()),
                            "",
                            dir,
                            name,
                            AtFlags::AT_EMPTY_PATH,
                        )
                    }
                    r => r,
                }
            }
        }
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if let Some(n) = &self.name {
            let _ = crate::base::sys::unlink_at(self.dir.fd().as_fd(), n.as_str(), false);
        }
    }
}

fn cstring(bytes: &[u8], path: &Path) -> Result<CString> {
    CString::new(bytes).with_context(|| format!("{} holds a NUL byte", path.display()))
}

fn check_name(name: &str, dir: &Path) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        anyhow::bail!("{name:?} is not a file name to write in {}", dir.display());
    }
    Ok(())
}

fn io_error(op: &str, path: &str, e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(n) => fs_error(op, path, Errno::from_raw(n)),
        None => anyhow::Error::new(e).context(format!("{op} {path}")),
    }
}

/// Writes a file atomically: a temporary file in its directory, fsync, rename over the name,
/// fsync of the directory. A symlink at the name is replaced, not followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} does not end in a UTF-8 file name", path.display()))?;
    OutDir::open(dir)?.replace(name, bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn replace_replaces_a_symlink_instead_of_following_it() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("report.html")).unwrap();
        write_atomic(&t.path().join("report.html"), b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(t.path().join("report.html")).unwrap(), b"new");
        assert!(!fs::symlink_metadata(t.path().join("report.html"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read_dir(t.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }

    #[test]
    fn create_new_never_replaces_and_takes_the_next_name() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("r.json")).unwrap();
        let d = OutDir::open(t.path()).unwrap();
        let names = |i: u32| {
            if i == 0 {
                "r.json".to_string()
            } else {
                format!("r-{}.json", i + 1)
            }
        };
        assert_eq!(d.create_new(names, b"one").unwrap(), "r-2.json");
        assert_eq!(d.create_new(names, b"two").unwrap(), "r-3.json");
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(t.path().join("r-2.json")).unwrap(), b"one");
        assert_eq!(
            fs::read_dir(t.path()).unwrap().count(),
            4,
            "no temporary left"
        );
    }
}
