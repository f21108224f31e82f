//! Shared pieces of the metadata workloads (`fdtree`, `interleave`, `create`): entry names built
//! in a stack buffer (no allocation per operation, so fsgauge measures the filesystem and not
//! its allocator), the checks of descriptors and inodes a tree needs, and a timed `syncfs`.
//! The syscalls themselves are [`crate::base::sys::Dir`]'s.
//!
//! Names are generated from counters, never stored: memory stays flat however many entries a
//! tree has.

use std::ffi::CStr;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use nix::errno::Errno;

use crate::base::error::{bad_input, bad_param};
use crate::base::sys::{fs_error, Dir, File};
use crate::base::units::blocks_4k;
use crate::measure::{OpId, Recorder};

/// Longest name a [`NameBuf`] holds (NAME_MAX is 255; the workloads' names are far shorter).
const CAP: usize = 255;

/// Linux PATH_MAX, counting the terminating NUL.
pub const PATH_MAX: usize = libc::PATH_MAX as usize;

/// An entry name (or a short relative path) assembled in place and handed to syscalls as a
/// NUL-terminated string.
#[derive(Clone)]
pub struct NameBuf {
    buf: [u8; CAP + 1],
    len: usize,
}

impl Default for NameBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl NameBuf {
    /// An empty name.
    pub fn new() -> Self {
        Self {
            buf: [0; CAP + 1],
            len: 0,
        }
    }

    /// Empties the name.
    #[inline]
    pub fn clear(&mut self) -> &mut Self {
        self.len = 0;
        self
    }

    /// Cuts the name back to `len` bytes (to reuse a prefix).
    #[inline]
    pub fn truncate(&mut self, len: usize) -> &mut Self {
        self.len = self.len.min(len);
        self
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends text (cut at the capacity; the workloads validate their name lengths up front).
    #[inline]
    pub fn push_str(&mut self, s: &str) -> &mut Self {
        let n = s.len().min(CAP - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        self
    }

    /// Appends `n` in decimal, zero-padded to at least `width` digits.
    #[inline]
    pub fn push_num(&mut self, mut n: u64, width: usize) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let used = digits.len() - i;
        for _ in used..width.min(20) {
            if self.len < CAP {
                self.buf[self.len] = b'0';
                self.len += 1;
            }
        }
        for &d in &digits[i..] {
            if self.len < CAP {
                self.buf[self.len] = d;
                self.len += 1;
            }
        }
        self
    }

    /// Adds one to the decimal number the name ends with, in place (carrying; a number of
    /// all nines grows by a digit, and a name without one gets "1"): the next name of a
    /// counter for a few instructions instead of formatting the number again.
    #[inline]
    pub fn increment(&mut self) -> &mut Self {
        let mut i = self.len;
        while i > 0 {
            match self.buf[i - 1] {
                b'9' => {
                    self.buf[i - 1] = b'0';
                    i -= 1;
                }
                d @ b'0'..=b'8' => {
                    self.buf[i - 1] = d + 1;
                    return self;
                }
                _ => break,
            }
        }
        // Every digit carried (or there were none): a leading 1 goes in at `i`.
        if self.len < CAP {
            self.buf.copy_within(i..self.len, i + 1);
            self.buf[i] = b'1';
            self.len += 1;
        }
        self
    }

    /// The name as a C string (writes the terminating NUL).
    #[inline]
    pub fn as_cstr(&mut self) -> &CStr {
        self.buf[self.len] = 0;
        CStr::from_bytes_until_nul(&self.buf[..=self.len])
            .expect("names are built from text and digits, so the only NUL is the last byte")
    }

    /// The name as text (for messages).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
    }
}

/// Decimal digits of `n` (1 for 0).
pub fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Refuses a tree of no directories or no files per directory (`--dirs`, `--files`).
pub fn check_counts(dirs: u64, files: u64) -> Result<()> {
    if dirs == 0 || files == 0 {
        let field = if dirs == 0 { "dirs" } else { "files" };
        return Err(bad_param(
            field,
            format!("--dirs {dirs} --files {files}: both must be 1 or more"),
        ));
    }
    Ok(())
}

/// Space a tree of `dirs` directories with `files_per_dir` files of `file_size` bytes in each
/// takes: a 4 KiB block per directory, file data in 4 KiB blocks, and `inode` bytes per entry
/// (for filesystems that allocate inodes from free space). None when a count or the total
/// overflows.
pub fn tree_space(dirs: u64, files_per_dir: u64, file_size: u64, inode: u64) -> Option<u64> {
    let files = dirs.checked_mul(files_per_dir)?;
    files.checked_add(dirs)?;
    let per_file = blocks_4k(file_size)?.checked_add(inode)?;
    dirs.checked_mul(4096 + inode)?
        .checked_add(files.checked_mul(per_file)?)
}

/// Writes `size` bytes to `file` from `buf`, in writes of at most `buf.len()` bytes (the buffer
/// over again), recording each write as `op` timed on from `t` (a file's create and its first
/// write start at the same instant).
#[inline]
pub fn write_size(
    rec: &mut Recorder,
    op: OpId,
    file: &File,
    buf: &[u8],
    size: u64,
    mut t: Instant,
) -> Result<(), Errno> {
    let mut left = size;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        file.write_all(&buf[..n], |b| {
            t = rec.record(op, t, b as u64);
        })?;
        left -= n as u64;
    }
    Ok(())
}

/// `syncfs` of the filesystem holding `dir`, timed as one `op` (a phase's `--fsync end`);
/// an error names `shown`.
pub fn timed_syncfs(rec: &mut Recorder, op: OpId, dir: &Dir, shown: &str) -> Result<()> {
    let t0 = rec.tick();
    dir.syncfs().map_err(|e| fs_error("syncfs", shown, e))?;
    rec.lap(op, t0, 0);
    Ok(())
}

/// Makes sure the process may hold `needed` descriptors, raising the soft limit up to the hard
/// one if needed; refuses (bad input) when even the hard limit is too low.
pub fn ensure_fds(needed: u64, what: &str) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| anyhow::anyhow!("getrlimit(RLIMIT_NOFILE): {e}"))?;
    if needed <= soft {
        return Ok(());
    }
    if needed > hard {
        return Err(bad_input(format!(
            "{what} keeps {needed} directories open at once, but the open-file limit is {hard}; raise it (ulimit -Hn) or make the tree shallower / use fewer threads"
        )));
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed, hard)
        .map_err(|e| anyhow::anyhow!("setrlimit(RLIMIT_NOFILE, {needed}): {e}"))?;
    Ok(())
}

/// Free inodes of the filesystem holding `dir`, when the filesystem counts them (btrfs and
/// some others report none).
pub fn free_inodes(dir: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    (st.files() > 0).then_some(st.files_free() as u64)
}

/// Refuses (bad input, before anything is created) when `needed` inodes do not fit.
pub fn check_inodes(dir: &Path, needed: u64, kind: &str) -> Result<()> {
    if let Some(free) = free_inodes(dir) {
        if needed > free {
            return Err(bad_input(format!(
                "the {kind} workload needs {needed} inodes but the filesystem at {} has only {free} free; give mkfs more inodes (ext4: --mkfs-opts \"-N {}\") or make the workload smaller",
                dir.display(),
                needed + needed / 10 + 1024
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn builds_padded_names_without_allocating() {
        let mut n = NameBuf::new();
        n.push_str("d").push_num(42, 5);
        assert_eq!(n.as_str(), "d00042");
        let keep = n.len();
        n.push_str("/f").push_num(7, 2);
        assert_eq!(n.as_cstr().to_str().unwrap(), "d00042/f07");
        n.truncate(keep).push_str("/f").push_num(123, 2);
        assert_eq!(n.as_str(), "d00042/f123");
        n.clear()
            .push_str("L")
            .push_num(10, 0)
            .push_str("D")
            .push_num(0, 0);
        assert_eq!(n.as_str(), "L10D0");
        n.clear().push_num(u64::MAX, 0);
        assert_eq!(n.as_str(), u64::MAX.to_string());
    }

    #[test]
    fn increments_the_trailing_number_as_formatting_would() {
        let mut n = NameBuf::new();
        n.push_str("f").push_num(0, 3);
        for i in 0..2000u64 {
            let mut want = NameBuf::new();
            want.push_str("f").push_num(i, 3);
            assert_eq!(n.as_str(), want.as_str());
            n.increment();
        }
        n.clear().push_str("99");
        assert_eq!(n.increment().as_str(), "100");
        n.clear().push_str("d7/f");
        assert_eq!(n.increment().as_str(), "d7/f1");
        n.clear().push_str("s1f099");
        assert_eq!(n.increment().as_cstr().to_str().unwrap(), "s1f100");
    }

    #[test]
    fn counts_digits() {
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(9889), 4);
        assert_eq!(digits(u64::MAX), 20);
    }
}
