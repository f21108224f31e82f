//! Who owns a file and whether others could change it: the stat calls and the ownership and
//! mode check ([`distrust`]) that both the path chaser ([`super::chase`]) and the trusted
//! places ([`super::trust`]) are built on.

use std::os::fd::BorrowedFd;
use std::path::Path;

/// fstat(2) ([`super::fstat`], its error as an `io::Error`).
pub fn fstat(fd: BorrowedFd<'_>) -> std::io::Result<libc::stat> {
    super::fstat(fd).map_err(std::io::Error::from)
}

/// fstatat(2) of `name` in `dir`, not following a symlink ([`super::stat_at`]).
pub fn stat_at(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> std::io::Result<libc::stat> {
    super::stat_at(dir, name.as_ref()).map_err(std::io::Error::from)
}

/// mkdirat(2) ([`super::mkdir_at`]).
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &Path, mode: u32) -> std::io::Result<()> {
    super::mkdir_at(dir, name, mode as libc::mode_t).map_err(std::io::Error::from)
}

pub(crate) fn mode_text(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

pub(crate) fn owner_text(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(
            || format!("uid {uid}"),
            |u| format!("{} (uid {uid})", u.name),
        )
}

/// Why a directory (by its stat) is not trusted, if it is not: owned by someone other than
/// root and the effective user, or writable by group or others without the sticky bit.
pub fn distrust(st: &libc::stat) -> Option<String> {
    let euid = nix::unistd::geteuid().as_raw();
    let mode = st.st_mode;
    if st.st_uid != 0 && st.st_uid != euid {
        return Some(format!(
            "it is owned by {} (mode {})",
            owner_text(st.st_uid),
            mode_text(mode)
        ));
    }
    if mode & 0o022 != 0 && mode & libc::S_ISVTX == 0 {
        return Some(format!(
            "it is writable by others (owner {}, mode {})",
            owner_text(st.st_uid),
            mode_text(mode)
        ));
    }
    None
}
