//! Trusted places: directories that no one but root (the effective user) can change, reached
//! and used through descriptors so that nobody can swap what a path names between a check
//! and its use.
//!
//! fsgauge runs as root on shared machines, where another local user may plant symlinks,
//! rename directories or make fsgauge's own directories before fsgauge does. The rules:
//!
//! - fsgauge's own directories (work `/var/tmp/fsgauge`, RAM `/dev/shm/fsgauge`, the ledger)
//!   are made with mode 0700 by the effective user and never removed; one that exists but is
//!   owned by someone else, or writable by others, is refused ([`own_dir`]).
//! - A directory is *trusted* when every directory on its path from `/` down is owned by root
//!   or the effective user and not writable by group or others, or sticky (as `/var/tmp`:
//!   others cannot rename or remove root's entries there). A path through a trusted directory
//!   stays safe to use by path, which is what the mount point handed to workloads relies on.
//! - Everything made per run is made exclusively inside a held directory descriptor
//!   (`mkdirat`, `O_CREAT|O_EXCL|O_NOFOLLOW`), then opened without following symlinks and
//!   checked on the descriptor ([`make_dir_at`], [`create_file_at`]).
//! - A user's `--workdir` that is not trusted gets a private 0700 directory with an
//!   unpredictable name inside it ([`private_name`]); everything of the run lives in there.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use super::owner::{distrust, fstat, mkdir_at, stat_at};
use super::owner::{mode_text, owner_text};

/// A file's identity: the device it is on and its inode number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    /// The identity of an open file.
    pub fn of(fd: BorrowedFd<'_>) -> std::io::Result<Self> {
        let st = fstat(fd)?;
        Ok(Self {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

fn cstr(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Opens the directory `name` in the held directory `dir`, not following a symlink.
pub fn open_dir_in(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<OwnedFd> {
    super::open_dir_at(dir, name).map_err(std::io::Error::from)
}

/// Opens a directory by absolute path without following any symlink on the way
/// (openat2 with RESOLVE_NO_SYMLINKS).
pub fn open_dir_nofollow(path: &Path) -> std::io::Result<OwnedFd> {
    openat2_nofollow(path, libc::O_RDONLY)
}

/// [`open_dir_nofollow`] as an O_PATH descriptor: the filesystem is not asked to open the
/// directory, so this works on one shut down (FS_IOC_SHUTDOWN), which answers EIO otherwise.
pub fn open_dir_path_nofollow(path: &Path) -> std::io::Result<OwnedFd> {
    openat2_nofollow(path, libc::O_PATH)
}

/// Opens the directory `name` in the held directory `dir` as an O_PATH descriptor, not
/// following a symlink (see [`open_dir_path_nofollow`]).
pub fn open_dir_path_in(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<OwnedFd> {
    let fd = nix::fcntl::openat(
        Some(dir.as_raw_fd()),
        name,
        nix::fcntl::OFlag::O_PATH
            | nix::fcntl::OFlag::O_DIRECTORY
            | nix::fcntl::OFlag::O_NOFOLLOW
            | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    // SAFETY: openat returned a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The mount id of the mount an open descriptor is in, from `/proc/self/fdinfo` (statx's
/// STATX_MNT_ID asks the filesystem, which a shut-down one answers with EIO).
pub fn fdinfo_mnt_id(fd: BorrowedFd<'_>) -> std::io::Result<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no mnt_id in /proc/self/fdinfo"))
}

fn openat2_nofollow(path: &Path, access: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = cstr(path)?;
    // struct open_how of linux/openat2.h (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (access | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads a valid open_how of the size given and a NUL-terminated path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: openat2 returned a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A directory reached by [`super::chase::chase`]: its descriptor, its real path, and whether
/// every directory on the way is trusted (and if not, the first that is not and why).
pub struct Walked {
    pub fd: OwnedFd,
    pub path: PathBuf,
    pub untrusted: Option<String>,
}

/// Reaches the directory `path` as [`super::chase::chase`] does (another user's link leads
/// only to what that user owns), making missing directories with `mode` when `create`.
pub fn walk(path: &Path, create: Option<u32>) -> Result<Walked> {
    use super::chase::{chase, reopen_dir, Opts};
    let c = chase(
        path,
        Opts {
            follow_last: true,
            create,
        },
    )?;
    if !c.rest.is_empty() {
        let what = if c.st.is_some() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(crate::base::error::bad_input(format!(
            "{} {what}",
            c.path().display()
        )));
    }
    let fd =
        reopen_dir(fd_b(&c.dir)).with_context(|| format!("opening {}", c.dir_path.display()))?;
    Ok(Walked {
        fd,
        path: c.dir_path,
        untrusted: c.untrusted,
    })
}

fn fd_b(fd: &OwnedFd) -> BorrowedFd<'_> {
    std::os::fd::AsFd::as_fd(fd)
}

/// One of fsgauge's own directories (work, RAM, ledger, caches): made with mode 0700 where
/// missing (with its missing parents), never removed. One that exists but that the effective
/// user does not own, or that others can write, is refused, as is a path through a directory
/// others could change.
pub fn own_dir(path: &Path) -> Result<OwnedFd> {
    let euid = nix::unistd::geteuid().as_raw();
    let w = walk(path, Some(0o700)).map_err(|e| {
        crate::base::error::bad_input(format!(
            "refusing fsgauge's directory {}: {e:#}. Check it, remove it (fsgauge makes it again, owned by uid {euid} with mode 0700), or point fsgauge elsewhere",
            path.display()
        ))
    })?;
    let st = fstat(fd_b(&w.fd)).with_context(|| format!("stat {}", w.path.display()))?;
    let refuse = |why: String| {
        crate::base::error::bad_input(format!(
            "refusing fsgauge's directory {}: {why}; someone else may have made it to plant files for fsgauge to format or delete. Check it, remove it (fsgauge makes it again, owned by uid {euid} with mode 0700), or point fsgauge elsewhere",
            w.path.display()
        ))
    };
    if st.st_uid != euid || st.st_mode & 0o022 != 0 {
        return Err(refuse(format!(
            "it is owned by {} with mode {}, not by uid {euid} and writable by it alone",
            owner_text(st.st_uid),
            mode_text(st.st_mode)
        )));
    }
    if let Some(why) = w.untrusted {
        return Err(refuse(format!("a directory above it is not safe ({why})")));
    }
    Ok(w.fd)
}

/// Makes the directory `name` in `dir` exclusively (it must not exist) and opens it without
/// following symlinks; the descriptor is checked to be the effective user's and not writable
/// by others. The mode is set explicitly (the umask does not narrow it).
pub fn make_dir_at(dir: BorrowedFd<'_>, name: &str, mode: u32) -> std::io::Result<OwnedFd> {
    mkdir_at(dir, Path::new(name), mode)?;
    let fd = open_dir_in(dir, name)?;
    let st = fstat(fd_b(&fd))?;
    if st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "{name} was swapped after it was made (owner uid {}, mode {})",
            st.st_uid,
            mode_text(st.st_mode)
        )));
    }
    // The mode exactly, whatever the umask took off; a failure leaves it narrower, not wider.
    let _ = super::fchmod(fd_b(&fd), mode as libc::mode_t);
    Ok(fd)
}

/// Creates the regular file `name` in `dir` exclusively, read-write, mode 0600.
pub fn create_file_at(dir: BorrowedFd<'_>, name: &str) -> std::io::Result<File> {
    let c = cstr(Path::new(name))?;
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = super::open_at(dir.as_raw_fd(), &c, flags, 0o600).map_err(std::io::Error::from)?;
    Ok(File::from(fd))
}

/// The name of a private entry fsgauge makes in a shared directory, unpredictable so that no
/// one can make it first: `.fsgauge-<16 hex digits>` (a private work directory, a device
/// server's mount point), or `.fsgauge-KIND-<16 hex digits>` saying what it is for (`check`:
/// `devices check`'s image, `tmp`: a file being written atomically).
pub fn private_name(kind: &str) -> String {
    let n = rand::random::<u64>();
    if kind.is_empty() {
        format!(".fsgauge-{n:016x}")
    } else {
        format!(".fsgauge-{kind}-{n:016x}")
    }
}

/// Removes `name` from `dir` (a directory when `is_dir`), only if it is still the file
/// `id` when given. Gone already, or replaced by something else: nothing is removed.
pub fn remove_at(
    dir: BorrowedFd<'_>,
    name: &str,
    is_dir: bool,
    id: Option<FileId>,
) -> std::io::Result<()> {
    let st = match stat_at(dir, name) {
        Ok(st) => st,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if let Some(id) = id {
        if st.st_dev != id.dev || st.st_ino != id.ino {
            return Ok(());
        }
    }
    match super::unlink_at(dir, name, is_dir) {
        Ok(()) | Err(super::Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The device number and mount id of an open file.
pub fn statx_dev_mnt(fd: BorrowedFd<'_>) -> std::io::Result<(u64, u64)> {
    let st = super::statx(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH, libc::STATX_MNT_ID)?;
    Ok((
        libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        st.stx_mnt_id,
    ))
}

/// The path through which a descriptor's directory is reached without a lookup by name
/// (`/proc/self/fd/N/rest`).
pub fn fd_path(fd: BorrowedFd<'_>, rest: &str) -> PathBuf {
    let p = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if rest.is_empty() {
        p
    } else {
        p.join(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_names_are_dot_fsgauge_kind_and_sixteen_hex_digits() {
        let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
        let work = private_name("");
        assert!(work.strip_prefix(".fsgauge-").is_some_and(hex), "{work}");
        let tmp = private_name("tmp");
        assert!(tmp.strip_prefix(".fsgauge-tmp-").is_some_and(hex), "{tmp}");
        assert_ne!(private_name(""), private_name(""));
    }

    #[test]
    fn an_own_directory_of_someone_else_or_open_to_others_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root to give a directory away");
            return;
        }
        let tmp = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let mine = tmp.path().join("a/b");
        own_dir(&mine).expect("made");
        let md = std::fs::metadata(&mine).expect("stat");
        assert_eq!(md.permissions().mode() & 0o7777, 0o700);
        own_dir(&mine).expect("accepted again");

        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        let e = format!("{:#}", own_dir(&theirs).expect_err("refused"));
        assert!(
            e.contains("theirs") && e.contains("65534") && e.contains("remove it"),
            "{e}"
        );

        let open = tmp.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = format!("{:#}", own_dir(&open).expect_err("refused"));
        assert!(e.contains("0777"), "{e}");

        // Below a directory others can write: refused too.
        let e = format!("{:#}", own_dir(&open.join("x")).expect_err("refused"));
        assert!(e.contains("above it"), "{e}");

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&mine, &link).expect("symlink");
        // A symlink the user names is resolved once, as given; a swapped one is not followed.
        own_dir(&link).expect("resolved");
    }

    #[test]
    fn removal_checks_identity() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = open_dir_nofollow(&tmp.path().canonicalize().expect("canon")).expect("open");
        let f = create_file_at(fd_b(&dir), "f").expect("create");
        let id = FileId::of(std::os::fd::AsFd::as_fd(&f)).expect("id");
        assert!(create_file_at(fd_b(&dir), "f").is_err(), "exclusive");
        std::fs::rename(tmp.path().join("f"), tmp.path().join("g")).expect("rename");
        std::fs::write(tmp.path().join("f"), b"other").expect("write");
        remove_at(fd_b(&dir), "f", false, Some(id)).expect("remove");
        assert!(tmp.path().join("f").exists(), "another file was removed");
        remove_at(fd_b(&dir), "g", false, Some(id)).expect("remove");
        assert!(!tmp.path().join("g").exists());
    }
}
