//! Reading the cache's files as root reads any input: the cache directory is fsgauge's own
//! (`trust::own_dir`: the effective user's, writable by it alone, on a path no one else can
//! change), held open, and each entry's files are opened inside it without following a link
//! and without blocking (a FIFO's `open` returns at once), then checked on the descriptor: a
//! regular file of the effective user's with one link, a manifest no larger than
//! [`MANIFEST_LIMIT`]. An image is checked against its manifest (its length and the digest
//! of its contents) before anything mounts or copies it: an image that changed since it was
//! kept is [`Damaged`], and a run ages afresh rather than start from it.
//!
//! Verifying reads the whole image once more (the digest covers every non-zero block): a
//! 1G ext4 image aged to half its size (485 MB of data) added 1.0 s to a 0.9 s start here
//! (release build, CPU pressure 95%), paid before anything is measured. A per-chunk hash
//! would spare no reading (a start copies or loads every chunk); it could only spread the
//! hashing over threads.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::cache_dir;
use serde::{Deserialize, Serialize};

use crate::base::sys::{trust, Errno};
use crate::results::PhaseResult;

/// The largest manifest read (the aging's phases and layout record: tens of KiB).
pub const MANIFEST_LIMIT: u64 = 64 << 20;

/// What the cache knows of an entry (`KEY.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub key: String,
    /// The name it was kept under (`--keep-image NAME`, the plan's name).
    pub name: String,
    /// Everything the key hashes, in clear.
    pub fields: serde_json::Value,
    pub fs: String,
    /// The filesystem's size (the image's length), bytes.
    pub fs_size: u64,
    /// Bytes the image takes on the cache's disk.
    pub on_disk: u64,
    /// RFC 3339, UTC.
    pub created: String,
    pub last_used: String,
    /// The digest of the aged state's contents (see [`super::copy`]).
    pub digest: String,
    /// Seconds the aging took.
    pub aging_s: f64,
    /// The aging's phases, as its run recorded them: a run from the image reports them.
    pub phases: Vec<PhaseResult>,
    /// The aging's layout record, when the run recorded one.
    pub layout: Option<serde_json::Value>,
}

/// An entry whose files cannot be used as they are; `testbed images --prune KEY` removes it.
#[derive(Debug, thiserror::Error)]
#[error("the kept image {key} is damaged: {} {why}; remove it with `fsgauge testbed images --prune {key}`", .path.display())]
pub struct Damaged {
    pub key: String,
    pub path: PathBuf,
    pub why: String,
}

/// The cache directory, held open and checked as one of fsgauge's own directories: `None`
/// when it does not exist and `create` is not set. One that the effective user does not own,
/// that others can write, or that is reached through a path others can change, is refused
/// (bad input, exit 2), for reading as for writing.
pub fn open_dir(create: bool) -> Result<Option<(OwnedFd, PathBuf)>> {
    let dir = cache_dir();
    if !create {
        if let Err(e) = std::fs::symlink_metadata(&dir) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
        }
    }
    let fd = trust::own_dir(&dir).context("the aged-image cache directory")?;
    Ok(Some((fd, dir)))
}

/// Opens file `name` of entry `key` in the held cache directory `dir` (at `path`) to read:
/// `None` when it does not exist; [`Damaged`] when it is not a regular file of the effective
/// user's with one link (a link, a FIFO, a device, a hard link to another file).
pub fn open(dir: BorrowedFd<'_>, path: &Path, name: &str, key: &str) -> Result<Option<File>> {
    let damaged = |why: String| Damaged {
        key: key.to_string(),
        path: path.join(name),
        why,
    };
    let cname = CString::new(name).context("an entry name with a NUL byte")?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = match crate::base::sys::open_at(dir.as_raw_fd(), &cname, flags | libc::O_NOCTTY, 0) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => return Err(damaged("is a symbolic link".into()).into()),
        Err(e) => {
            return Err(anyhow::anyhow!(
                "opening {}: {}",
                path.join(name).display(),
                e.desc()
            ))
        }
    };
    let st = trust::fstat(fd.as_fd()).with_context(|| format!("stat {}", path.display()))?;
    let euid = nix::unistd::geteuid().as_raw();
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        let kind = crate::base::bounded::kind_of(st.st_mode);
        return Err(damaged(format!("is {kind}, not a regular file")).into());
    }
    if st.st_uid != euid {
        return Err(damaged(format!("is owned by uid {}, not by uid {euid}", st.st_uid)).into());
    }
    if st.st_nlink != 1 {
        return Err(damaged(format!("has {} links (another name for it)", st.st_nlink)).into());
    }
    Ok(Some(File::from(fd)))
}

/// Reads the manifest of entry `key` from its opened file, at most [`MANIFEST_LIMIT`] bytes.
pub fn read_manifest(f: &File, path: &Path, key: &str) -> Result<Manifest> {
    let damaged = |why: String| Damaged {
        key: key.to_string(),
        path: path.to_path_buf(),
        why,
    };
    let mut bytes = Vec::new();
    f.take(MANIFEST_LIMIT + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MANIFEST_LIMIT {
        return Err(damaged(format!("is more than {MANIFEST_LIMIT} bytes")).into());
    }
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| damaged(format!("is not a manifest fsgauge reads ({e})")))?;
    if m.key != key {
        return Err(damaged(format!("is the manifest of key {:?}", m.key)).into());
    }
    Ok(m)
}

/// Checks that image `f` of entry `key` (at `path`) is as its manifest says it was kept: the
/// filesystem's length, then the digest of its contents (every non-zero block, read once;
/// SIGINT and SIGTERM are honoured between chunks).
pub fn verify(f: &File, path: &Path, key: &str, m: &Manifest) -> Result<()> {
    let damaged = |why: String| Damaged {
        key: key.to_string(),
        path: path.to_path_buf(),
        why,
    };
    let len = f
        .metadata()
        .with_context(|| format!("stat {}", path.display()))?
        .len();
    if len != m.fs_size {
        return Err(damaged(format!(
            "is {len} bytes long, but it was kept {} bytes long",
            m.fs_size
        ))
        .into());
    }
    let what = format!("checking the kept image {}", path.display());
    let digest = super::copy::digest(f, len, &what)?;
    if digest != m.digest {
        return Err(damaged(format!(
            "holds contents of digest {digest}, but it was kept with {} (it changed since)",
            m.digest
        ))
        .into());
    }
    Ok(())
}
