//! The one way fsgauge reads a file it takes as input (results, plans, ledger entries, device
//! profiles, dbench loadfiles, replay logs, size distributions): reached as
//! [`crate::base::sys::chase`] reaches a path (another user's link leads only to what that user
//! owns), a regular file only, up to a stated size.
//!
//! A `*.json` that links to `/dev/zero` would otherwise be read until the kernel kills the
//! process, and a FIFO would block it forever in `open` or `read`, deaf to SIGINT (the handler
//! only sets a flag). The file is opened `O_NONBLOCK` (a FIFO's `open` returns at once), its
//! type and size are checked with `fstat` on that descriptor (not on a path another user could
//! swap in between), and at most `limit + 1` bytes are read, so a file that grows while being
//! read is still refused.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

/// The largest result file read (a result with a layout snapshot and histograms is a few MiB).
pub const RESULT_LIMIT: u64 = 256 << 20;
/// The largest plan file read.
pub const PLAN_LIMIT: u64 = 4 << 20;
/// The largest ledger entry read.
pub const LEDGER_LIMIT: u64 = 1 << 20;
/// The largest device profile read (the built-in ones are a few KiB).
pub const PROFILE_LIMIT: u64 = 1 << 20;
/// The largest dbench loadfile read (dbench's own client.txt is about 30 MiB).
pub const LOADFILE_LIMIT: u64 = 256 << 20;
/// The largest exerciser replay log read (a step a line; a long soak writes a few hundred MiB).
pub const REPLAY_LIMIT: u64 = 1 << 30;
/// The largest file-size distribution read.
pub const DIST_LIMIT: u64 = 16 << 20;

/// What reading a plan holds at once, at most, per byte of plan text ([`PLAN_LIMIT`] bytes at
/// most): the text, its TOML tree with spans, and the plan built from it, every sweep within
/// its caps (`registry::sweep::MAX_CELLS`, `plan::MAX_RUNS`), counted before it is expanded.
/// `tests/fuzz_regressions` holds the reader to it.
pub const PLAN_MEMORY_PER_BYTE: usize = 64;
/// What reading a result holds at once, at most, per byte of result file, beside the file's
/// bytes: the typed result, read in one pass (never a `serde_json::Value` of the document
/// beside it). `tests/fuzz_regressions` holds the reader to it.
pub const RESULT_MEMORY_PER_BYTE: usize = 4;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: {} ({})", .path.display(), .errno.desc(), describe_errno(*.errno))]
    Open { path: PathBuf, errno: Errno },
    #[error("{} is {kind}, not a regular file; fsgauge reads its {what} from regular files only", .path.display())]
    NotRegular {
        path: PathBuf,
        kind: &'static str,
        what: &'static str,
    },
    #[error("{} is {size} bytes, more than the {limit} bytes fsgauge reads as a {what}; is it the right file?", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
        what: &'static str,
    },
    #[error("reading {}: {} ({})", .path.display(), .errno.desc(), describe_errno(*.errno))]
    Read { path: PathBuf, errno: Errno },
    /// The path was refused on the way to the file (another user's link, a file that
    /// changed while it was opened).
    #[error("{msg}")]
    Refused { path: PathBuf, msg: String },
}

impl ReadError {
    /// The errno of a failed open, if that is what failed.
    pub fn open_errno(&self) -> Option<Errno> {
        match self {
            ReadError::Open { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

fn describe_errno(e: Errno) -> String {
    format!("{e:?}")
}

/// What a file mode is, for a message.
pub fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFREG => "a regular file",
        _ => "a file of no known type",
    }
}

/// Reads a regular file of at most `limit` bytes; `what` names it in messages ("result",
/// "plan", "ledger entry").
pub fn read_regular(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
    let fd = open_input(path)?;
    let st = crate::base::sys::fstat(fd.as_fd()).map_err(|errno| ReadError::Read {
        path: path.to_path_buf(),
        errno,
    })?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(st.st_mode),
            what,
        });
    }
    let size = st.st_size.max(0) as u64;
    if size > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
            what,
        });
    }
    let mut out = Vec::with_capacity(size as usize);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match crate::base::sys::read(fd.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() as u64 > limit {
                    return Err(ReadError::TooLarge {
                        path: path.to_path_buf(),
                        size: out.len() as u64,
                        limit,
                        what,
                    });
                }
            }
            Err(Errno::EINTR) => continue,
            Err(errno) => {
                return Err(ReadError::Read {
                    path: path.to_path_buf(),
                    errno,
                })
            }
        }
    }
    Ok(out)
}

/// [`read_regular`] of a text input named by `flag` (`--loadfile`, `--replay`, …): any failure
/// is bad input (exit 2) that names the flag, and the text must be UTF-8.
pub fn read_text(
    path: &Path,
    limit: u64,
    what: &'static str,
    flag: &str,
) -> anyhow::Result<String> {
    let bytes = read_regular(path, limit, what)
        .map_err(|e| crate::base::error::bad_input(format!("{flag}: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        crate::base::error::bad_input(format!(
            "{flag} {}: not UTF-8 text (byte {}); fsgauge reads its {what} as text",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Opens the file at `path` to read, without blocking (a FIFO's open returns at once) and
/// without following a link in its last component once it was chased.
fn open_input(path: &Path) -> Result<std::os::fd::OwnedFd, ReadError> {
    use crate::base::sys::chase::{chase, check_input_owner, Opts};
    let refused = |e: anyhow::Error| ReadError::Refused {
        path: path.to_path_buf(),
        msg: format!("{e:#}"),
    };
    let c = chase(path, Opts::FOLLOW).map_err(|e| match e.downcast_ref::<std::io::Error>() {
        Some(io) => ReadError::Open {
            path: path.to_path_buf(),
            errno: Errno::from_raw(io.raw_os_error().unwrap_or(libc::EIO)),
        },
        None => refused(e),
    })?;
    let (name, st) = match (c.rest.as_slice(), c.st) {
        ([], _) => {
            return Err(ReadError::NotRegular {
                path: path.to_path_buf(),
                kind: "a directory",
                what: "input",
            })
        }
        ([name], Some(st)) => (name, st),
        _ => {
            return Err(ReadError::Open {
                path: path.to_path_buf(),
                errno: Errno::ENOENT,
            })
        }
    };
    let dir_uid = crate::base::sys::chase::owner_of(c.dir.as_fd()).map_err(refused)?;
    check_input_owner(path, &st, dir_uid).map_err(|e| ReadError::Refused {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let cname = CString::new(name.as_bytes()).map_err(|_| ReadError::Open {
        path: path.to_path_buf(),
        errno: Errno::EINVAL,
    })?;
    crate::base::sys::open_at(
        c.dir.as_raw_fd(),
        &cname,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY,
        0,
    )
    .map_err(|errno| match errno {
        Errno::ELOOP => ReadError::Refused {
            path: path.to_path_buf(),
            msg: format!(
                "{} became a symbolic link while fsgauge was opening it; give a path that others cannot change",
                path.display()
            ),
        },
        errno => ReadError::Open {
            path: path.to_path_buf(),
            errno,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn refuses_devices_fifos_and_large_files() {
        let t = tempfile::tempdir().unwrap();
        let link = t.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_regular(&link, 10, "result").unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let fifo = t.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_regular(&fifo, 10, "result").unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let big = t.path().join("big.json");
        std::fs::write(&big, [b' '; 11]).unwrap();
        let e = read_regular(&big, 10, "result").unwrap_err();
        assert!(e.to_string().contains("more than the 10 bytes"), "{e}");
        std::fs::write(&big, b"0123456789").unwrap();
        assert_eq!(read_regular(&big, 10, "result").unwrap(), b"0123456789");
    }
}
