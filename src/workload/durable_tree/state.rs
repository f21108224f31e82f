//! Reading a mounted crash state for the judge: what each due file is there ([`Found`]), and the
//! faults the tests put into a state (see the module docs of `durable_tree`).

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use anyhow::{Context, Result};

use super::judge::{judge, Due, Found};
use super::{Expected, Naming, Record};
use crate::base::sys::{Dir, Errno};
use crate::workload::inject::Inject;
use crate::workload::{CrashTally, CrashVerifier};

/// Files named per state in the crash record; one more line counts the rest.
const SHOWN: usize = 3;

/// Bytes read past the expected size of a file found longer (its digest covers those).
const LONG_READ: u64 = 1 << 20;

/// The judge of the crash states of a run that left `record`: each state's durable files,
/// named by `naming` below the workload directory, compared with `expected`; what it checked
/// counted into `tally`.
pub fn verifier(
    record: Record,
    naming: Box<dyn Naming>,
    expected: Expected,
    tally: CrashTally,
) -> CrashVerifier {
    let inject = Inject::from_env();
    let record = if inject == Some(Inject::Forget) {
        record.forget_every_second()
    } else {
        record
    };
    let mut buf = vec![0u8; 1 << 20];
    Box::new(move |cut_ns, root| {
        let dir = match Dir::open(root) {
            Ok(d) => Some(d),
            // The workload directory itself is gone: so is every file in it.
            Err(Errno::ENOENT) => None,
            Err(e) => anyhow::bail!("opening {}: {}", root.display(), e.desc()),
        };
        let mut first = true;
        let judged = judge(&record, cut_ns, &expected, naming.as_ref(), SHOWN, |due| {
            let (slot, present) = match *due {
                Due::Present { slot, .. } => (slot, true),
                Due::Gone { slot, .. } => (slot, false),
            };
            let path = naming.path(slot);
            let Some(d) = &dir else {
                return Ok(Found::Absent {
                    dir_missing: Some(".".into()),
                });
            };
            if let (true, true, Some(i)) = (present, first, inject) {
                put_fault(i, d, &path)?;
            }
            first &= !present;
            look(d, &path, &expected, &mut buf)
                .with_context(|| format!("reading {path} in {}", root.display()))
        })?;
        tally
            .lock()
            .map_err(|_| anyhow::anyhow!("the crash tally of another judge panicked"))?
            .count(judged.files, judged.removals);
        Ok(judged.failures)
    })
}

/// What the state shows at `path` (relative to `dir`): absent (and whether its directory is
/// gone too), or the file compared with `expected`.
fn look(dir: &Dir, path: &str, expected: &Expected, buf: &mut [u8]) -> Result<Found> {
    let fd = match open(dir, path, libc::O_RDONLY) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => {
            let parent = Path::new(path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty());
            let dir_missing = match parent {
                None => None,
                Some(p) => {
                    let c = CString::new(p.as_os_str().as_encoded_bytes())?;
                    match dir.stat(&c) {
                        Ok(_) => None,
                        Err(Errno::ENOENT) => Some(p.display().to_string()),
                        Err(e) => anyhow::bail!("stat {}: {}", p.display(), e.desc()),
                    }
                }
            };
            return Ok(Found::Absent { dir_missing });
        }
        Err(e) => anyhow::bail!("open: {}", e.desc()),
    };
    compare(fd.as_fd(), expected, buf)
}

/// `path` below `dir`, opened with `flags` (never following a symlink at its end).
fn open(dir: &Dir, path: &str, flags: libc::c_int) -> Result<OwnedFd, Errno> {
    let c = CString::new(path).map_err(|_| Errno::EINVAL)?;
    crate::base::sys::open_at(dir.raw(), &c, flags | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0)
}

/// Reads the file `fd` (up to [`LONG_READ`] past the expected size) and compares it with
/// `expected`: slices against the pattern (a `memcmp` each), the digest of what was read only
/// when something differs (a right file is read once and hashed never).
pub fn compare(
    fd: std::os::fd::BorrowedFd<'_>,
    expected: &Expected,
    buf: &mut [u8],
) -> Result<Found> {
    let size = crate::base::sys::fstat(fd)
        .map_err(|e| anyhow::anyhow!("fstat: {}", e.desc()))?
        .st_size as u64;
    let limit = size.min(expected.size.saturating_add(LONG_READ));
    let mut first_diff = None;
    let read = read_range(fd, limit, buf, |off, bytes| {
        if first_diff.is_none() {
            first_diff = expected.first_diff(off, bytes);
        }
    })?;
    let digest = if size == expected.size && read == size && first_diff.is_none() {
        expected.digest
    } else {
        let mut h = blake3::Hasher::new();
        read_range(fd, limit, buf, |_, bytes| {
            h.update(bytes);
        })?;
        h.finalize()
    };
    Ok(Found::File {
        size,
        first_diff,
        read,
        digest,
    })
}

/// Reads `fd` from 0 up to `limit` bytes in `buf`-sized preads, giving each piece to `each`
/// with its offset; the bytes read (fewer at an early end of the file).
fn read_range(
    fd: std::os::fd::BorrowedFd<'_>,
    limit: u64,
    buf: &mut [u8],
    mut each: impl FnMut(u64, &[u8]),
) -> Result<u64> {
    let mut off = 0u64;
    while off < limit {
        let want = (limit - off).min(buf.len() as u64) as usize;
        let n = crate::base::sys::pread(fd, &mut buf[..want], off)
            .map_err(|e| anyhow::anyhow!("pread at {off}: {}", e.desc()))?;
        if n == 0 {
            break;
        }
        each(off, &buf[..n]);
        off += n as u64;
    }
    Ok(off)
}

/// Puts fault `i` into the file `path` below `dir` (an absent file is left).
fn put_fault(i: Inject, dir: &Dir, path: &str) -> Result<()> {
    match open(dir, path, libc::O_RDWR) {
        Ok(fd) => i.apply_to(fd),
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => anyhow::bail!("opening {path} to inject a fault: {}", e.desc()),
    }
}
