//! The system calls fsgauge makes on the filesystem under test, on owned descriptors: a [`Dir`]
//! (open, open a child, mkdir, create, unlink, syncfs) and a [`File`] (write everything, fsync,
//! a close whose error is seen), and the one way a failed call is told to the user
//! ([`fs_error`]). What the kernel reports through /proc is in [`proc`].
//!
//! These are the hot paths of the metadata workloads, measured against a bare C loop
//! (`scripts/bench-create`): every method is one syscall on a descriptor the type owns, inlined,
//! with no allocation; names are NUL-terminated strings the caller builds in place
//! (`workload::names::NameBuf`). The other unsafe calls of the crate sit behind small safe
//! wrappers here too: memory mappings ([`mmap`]), io_uring requests on owned buffers
//! ([`uring`]) and FUSE over io_uring's queues ([`fuse_ring`]), `fstatfs` ([`statfs`]),
//! RDTSC ([`cpu`]) and the SIGPIPE disposition ([`signal`]). Outside `sys`, `unsafe` is left only in the two ioctl modules, `layout::sys`
//! and `testbed::loopdev`; every block says why it is sound (clippy's
//! `undocumented_unsafe_blocks` is denied) and `tests/it/code_rules.rs` fails on any other.

mod buf;
pub mod chase;
pub mod cpu;
pub mod dirstream;
pub mod fuse_ring;
pub mod mem_image;
pub mod mmap;
mod owner;
pub mod proc;
pub mod rt;
pub mod signal;
pub mod statfs;
pub mod trust;
pub mod uring;

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;

pub use buf::AlignedBuf;
pub use nix::errno::Errno;
use nix::NixPath;

use crate::base::error::SystemFailure;

/// `struct xfs_fs_eofblocks` (xfs_fs.h), the argument of `XFS_IOC_FREE_EOFBLOCKS`: version 1,
/// flags, no uid/gid/project filter, zero padding. 128 bytes.
#[repr(C)]
struct XfsFsEofblocks {
    eof_version: u32,
    eof_flags: u32,
    eof_uid: u32,
    eof_gid: u32,
    eof_prid: u32,
    pad32: u32,
    eof_min_file_size: u64,
    pad64: [u64; 12],
}

/// An error of the filesystem under test: `{op} {path} failed: ENOSPC (No space left on
/// device)` — the operation, the path as the user knows it, the errno's name and its meaning.
pub fn fs_error(op: &str, path: &str, e: Errno) -> anyhow::Error {
    anyhow::Error::new(SystemFailure(fs_message(op, path, e)))
}

/// The text of [`fs_error`], for errors that add a hint after it.
pub fn fs_message(op: &str, path: &str, e: Errno) -> String {
    format!("{op} {path} failed: {e:?} ({})", e.desc())
}

/// The descriptor a successful `open*` returned, or its errno.
#[inline]
fn owned(fd: RawFd) -> Result<OwnedFd, Errno> {
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `fd` was just returned by the kernel for this call and nothing else holds it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The errno of a syscall that returns 0 on success.
#[inline]
fn check(r: libc::c_int) -> Result<(), Errno> {
    if r != 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// `open(2)` of a path with the caller's flags (`O_CLOEXEC` is the caller's to add) and the
/// mode for a file it creates.
#[inline]
pub fn open(path: &CStr, flags: libc::c_int, mode: libc::mode_t) -> Result<OwnedFd, Errno> {
    // SAFETY: open(2) with a NUL-terminated path.
    owned(unsafe { libc::open(path.as_ptr(), flags, mode as libc::c_uint) })
}

/// `openat(2)` of `name` in the directory `dir` (or `AT_FDCWD`) with the caller's flags and the
/// mode for a file it creates. `dir` is only read by the kernel, which checks it.
#[inline]
pub fn open_at(
    dir: RawFd,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> Result<OwnedFd, Errno> {
    // SAFETY: openat(2) with a NUL-terminated name; the kernel refuses a bad `dir` (EBADF).
    owned(unsafe { libc::openat(dir, name.as_ptr(), flags, mode as libc::c_uint) })
}

/// The byte count of a read or write syscall, or its errno.
#[inline]
fn count(r: isize) -> Result<usize, Errno> {
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(r as usize)
}

/// One `read(2)` into `buf`: the bytes read (0 at the end of the file). EINTR is the caller's.
#[inline]
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: read(2) into a live buffer of buf.len() bytes.
    count(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// One `write(2)` of `buf`: the bytes written. EINTR is the caller's.
#[inline]
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    // SAFETY: write(2) from a live buffer of buf.len() bytes.
    count(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// One `pread(2)` into `buf` at `off`: the bytes read (0 at the end of the file).
#[inline]
pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
    // SAFETY: pread(2) into a live buffer of buf.len() bytes.
    count(unsafe {
        libc::pread(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            off as libc::off_t,
        )
    })
}

/// One `pwrite(2)` of `buf` at `off`: the bytes written.
#[inline]
pub fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], off: u64) -> Result<usize, Errno> {
    // SAFETY: pwrite(2) from a live buffer of buf.len() bytes.
    count(unsafe {
        libc::pwrite(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            off as libc::off_t,
        )
    })
}

/// `pwritev2(2)` of `buf` at `off` with `RWF_*` flags (plain `pwrite(2)` when `flags` is 0):
/// the bytes written.
#[inline]
pub fn pwrite_flags(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    off: u64,
    flags: libc::c_int,
) -> Result<usize, Errno> {
    if flags == 0 {
        return pwrite(fd, buf, off);
    }
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: pwritev2(2) reads one iovec that points into a live buffer of buf.len() bytes.
    count(unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, off as libc::off_t, flags) })
}

/// `preadv2(2)` into `buf` at `off` with `RWF_*` flags (plain `pread(2)` when `flags` is 0):
/// the bytes read.
#[inline]
pub fn pread_flags(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    off: u64,
    flags: libc::c_int,
) -> Result<usize, Errno> {
    if flags == 0 {
        return pread(fd, buf, off);
    }
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: preadv2(2) fills one iovec that points into a live buffer of buf.len() bytes.
    count(unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, off as libc::off_t, flags) })
}

/// `copy_file_range(2)` of up to `len` bytes from `src` to `dst` within the one file: the bytes
/// copied (0 at the end of the file).
#[inline]
pub fn copy_range(fd: BorrowedFd<'_>, src: u64, dst: u64, len: usize) -> Result<usize, Errno> {
    let (mut i, mut o) = (src as libc::loff_t, dst as libc::loff_t);
    let raw = fd.as_raw_fd();
    // SAFETY: copy_file_range(2) on one descriptor; the offsets are live locals it updates.
    count(unsafe { libc::copy_file_range(raw, &mut i, raw, &mut o, len, 0) })
}

/// The data extents of the file `fd` below `len` (`lseek` SEEK_DATA / SEEK_HOLE; holes and
/// unwritten extents are left out), in order: the one walk of a sparse image's data. An error
/// other than the end of the data (ENXIO): the file cannot say where its data are.
pub fn data_extents(fd: BorrowedFd<'_>, len: u64) -> Result<Vec<(u64, u64)>, Errno> {
    let raw = fd.as_raw_fd();
    let mut out = Vec::new();
    let mut off: u64 = 0;
    while off < len {
        // SAFETY: lseek on a borrowed descriptor; no memory is passed.
        let data = unsafe { libc::lseek(raw, off as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            match Errno::last() {
                Errno::ENXIO => break,
                e => return Err(e),
            }
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(raw, data, libc::SEEK_HOLE) };
        let (start, end) = (data as u64, (hole.max(data) as u64).min(len));
        if start >= len {
            break;
        }
        out.push((start, end));
        off = end.max(start + 1);
    }
    Ok(out)
}

/// `copy_file_range(2)` of up to `len` bytes at `off` of `src` to the same offset of `dst`.
pub fn copy_between(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    off: u64,
    len: usize,
) -> Result<usize, Errno> {
    let (mut i, mut o) = (off as libc::loff_t, off as libc::loff_t);
    // SAFETY: copy_file_range(2) between two descriptors; the offsets are live locals.
    count(unsafe {
        libc::copy_file_range(src.as_raw_fd(), &mut i, dst.as_raw_fd(), &mut o, len, 0)
    })
}

/// `ioctl(FICLONERANGE)`: shares `len` bytes at `src` of the file with `dst` of the same file
/// (reflink; btrfs, xfs).
pub fn clone_range(fd: BorrowedFd<'_>, src: u64, len: u64, dst: u64) -> Result<(), Errno> {
    let arg = libc::file_clone_range {
        src_fd: fd.as_raw_fd() as i64,
        src_offset: src,
        src_length: len,
        dest_offset: dst,
    };
    // SAFETY: FICLONERANGE reads a file_clone_range that lives across the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FICLONERANGE, &arg) })
}

/// `fallocate(2)` of `len` bytes at `off` with `mode` (`0`: allocate and extend the size).
#[inline]
pub fn fallocate(fd: BorrowedFd<'_>, mode: libc::c_int, off: u64, len: u64) -> Result<(), Errno> {
    // SAFETY: fallocate(2) on a descriptor; no memory is passed.
    check(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) })
}

/// `fstat(2)`.
#[inline]
pub fn fstat(fd: BorrowedFd<'_>) -> Result<libc::stat, Errno> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat(2) into a buffer of the size it fills.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: what `name` in `dir` is, a symlink itself.
/// `name` is anything that makes a C string (`CStr`, `str`, `OsStr`, `Path`; one with a NUL
/// inside is EINVAL).
#[inline]
pub fn stat_at<P: ?Sized + NixPath>(dir: BorrowedFd<'_>, name: &P) -> Result<libc::stat, Errno> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    name.with_nix_path(|c| {
        // SAFETY: fstatat(2) on a live descriptor with a NUL-terminated name, into a buffer of
        // the size it fills.
        check(unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    })??;
    // SAFETY: fstatat succeeded, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `mkdirat(dir, name, mode)` (the umask narrows `mode`).
#[inline]
pub fn mkdir_at<P: ?Sized + NixPath>(
    dir: BorrowedFd<'_>,
    name: &P,
    mode: libc::mode_t,
) -> Result<(), Errno> {
    name.with_nix_path(|c| {
        // SAFETY: mkdirat(2) on a live descriptor with a NUL-terminated name.
        check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) })
    })?
}

/// `unlinkat(dir, name)`, with `AT_REMOVEDIR` when `rmdir`.
#[inline]
pub fn unlink_at<P: ?Sized + NixPath>(
    dir: BorrowedFd<'_>,
    name: &P,
    rmdir: bool,
) -> Result<(), Errno> {
    let flags = if rmdir { libc::AT_REMOVEDIR } else { 0 };
    name.with_nix_path(|c| {
        // SAFETY: unlinkat(2) on a live descriptor with a NUL-terminated name.
        check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) })
    })?
}

/// `openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)`: the directory `name`
/// in `dir`, never through a symlink in its last component.
#[inline]
pub fn open_dir_at<P: ?Sized + NixPath>(dir: BorrowedFd<'_>, name: &P) -> Result<OwnedFd, Errno> {
    name.with_nix_path(|c| {
        open_at(
            dir.as_raw_fd(),
            c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
    })?
}

/// `fchmod(2)`: sets the mode exactly (the umask does not apply).
#[inline]
pub fn fchmod(fd: BorrowedFd<'_>, mode: libc::mode_t) -> Result<(), Errno> {
    // SAFETY: fchmod(2) on a descriptor; no memory is passed.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })
}

/// `statx(2)` of `name` in the directory `dir` (or `AT_FDCWD`) with `flags` (`AT_*`) asking
/// for the `mask` fields (`STATX_*`).
#[inline]
pub fn statx(
    dir: RawFd,
    name: &CStr,
    flags: libc::c_int,
    mask: libc::c_uint,
) -> Result<libc::statx, Errno> {
    let mut st = std::mem::MaybeUninit::<libc::statx>::uninit();
    // SAFETY: statx(2) with a NUL-terminated name into a buffer of the size it fills; the
    // kernel refuses a bad `dir` (EBADF).
    check(unsafe { libc::statx(dir, name.as_ptr(), flags, mask, st.as_mut_ptr()) })?;
    // SAFETY: statx succeeded, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `close(2)` of an owned descriptor, reporting its error (a deferred ENOSPC or EIO shows up
/// here on some filesystems). The descriptor is gone either way.
#[inline]
pub fn close(fd: OwnedFd) -> Result<(), Errno> {
    let fd = fd.into_raw_fd();
    // SAFETY: `fd` came out of an OwnedFd just above, so it is closed exactly once, here.
    check(unsafe { libc::close(fd) })
}

/// An open directory (`O_RDONLY | O_DIRECTORY | O_CLOEXEC`), closed on drop.
#[derive(Debug)]
pub struct Dir(OwnedFd);

impl Dir {
    /// Opens a directory by path.
    pub fn open(path: &Path) -> Result<Dir, Errno> {
        path.with_nix_path(|c| open(c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0))?
            .map(Dir)
    }

    /// A stand-in that is no directory (`/dev/null`, `O_PATH`): every call relative to it
    /// fails (ENOTDIR), so a holder that lets go of its directory for a while (across an
    /// unmount) never works somewhere else meanwhile.
    pub fn parked() -> Result<Dir, Errno> {
        open(c"/dev/null", libc::O_PATH | libc::O_CLOEXEC, 0).map(Dir)
    }

    /// Opens a directory by path; an error names it ([`fs_error`]).
    pub fn open_path(path: &Path) -> anyhow::Result<Dir> {
        Dir::open(path).map_err(|e| fs_error("open", &path.display().to_string(), e))
    }

    /// `openat(self, name, O_DIRECTORY | O_NOFOLLOW)`: a child directory.
    #[inline]
    pub fn open_dir(&self, name: &CStr) -> Result<Dir, Errno> {
        open_dir_at(self.as_fd(), name).map(Dir)
    }

    /// `mkdirat(self, name, 0755)`.
    #[inline]
    pub fn mkdir(&self, name: &CStr) -> Result<(), Errno> {
        mkdir_at(self.as_fd(), name, 0o755)
    }

    /// `unlinkat(self, name)`, with `AT_REMOVEDIR` when `rmdir`.
    #[inline]
    pub fn unlink(&self, name: &CStr, rmdir: bool) -> Result<(), Errno> {
        unlink_at(self.as_fd(), name, rmdir)
    }

    /// `openat(self, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)`: the file, to be
    /// closed with [`File::close`] so that a failing close is seen.
    #[inline]
    pub fn create(&self, name: &CStr) -> Result<File, Errno> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
        open_at(self.raw(), name, flags, 0o644).map(File)
    }

    /// `openat(self, name, O_RDONLY | O_CLOEXEC)`: a file to read.
    #[inline]
    pub fn open_read(&self, name: &CStr) -> Result<File, Errno> {
        open_at(self.raw(), name, libc::O_RDONLY | libc::O_CLOEXEC, 0).map(File)
    }

    /// `fstatat(self, name, AT_SYMLINK_NOFOLLOW)`.
    #[inline]
    pub fn stat(&self, name: &CStr) -> Result<libc::stat, Errno> {
        stat_at(self.as_fd(), name)
    }

    /// `syncfs(2)` of the filesystem holding the directory.
    pub fn syncfs(&self) -> Result<(), Errno> {
        nix::unistd::syncfs(self.raw())
    }

    /// Shuts down the filesystem holding the directory as a crash would, without flushing its
    /// log (`FS_IOC_SHUTDOWN` with `FS_SHUTDOWN_FLAGS_NOLOGFLUSH`, ext4's and xfs's "godown"):
    /// every later write fails, and what its journal had not committed stays off the disk.
    pub fn shutdown_nologflush(&self) -> Result<(), Errno> {
        // _IOR('X', 125, __u32): the kernel reads the flags from the pointer.
        nix::ioctl_read!(fs_ioc_shutdown, b'X', 125, u32);
        const FS_SHUTDOWN_FLAGS_NOLOGFLUSH: u32 = 2;
        let mut flags = FS_SHUTDOWN_FLAGS_NOLOGFLUSH;
        // SAFETY: the pointer is to a live u32 the call only reads.
        unsafe { fs_ioc_shutdown(self.raw(), &mut flags) }.map(|_| ())
    }

    /// Frees now, and waits for, the blocks xfs preallocated past the end of every file of the
    /// filesystem holding the directory (`XFS_IOC_FREE_EOFBLOCKS` with `XFS_EOF_FLAGS_SYNC`, as
    /// `xfs_spaceman -c "prealloc -s"` does). xfs keeps that speculative preallocation while an
    /// inode stays cached and trims it when the inode is evicted, so a usage figure read without
    /// this depends on when the host evicts inodes (another process's `drop_caches`, say).
    /// ENOTTY on other filesystems.
    pub fn xfs_free_eofblocks(&self) -> Result<(), Errno> {
        // _IOR('X', 58, struct xfs_fs_eofblocks): the kernel reads the struct.
        nix::ioctl_read!(xfs_ioc_free_eofblocks, b'X', 58, XfsFsEofblocks);
        const XFS_EOFBLOCKS_VERSION: u32 = 1;
        const XFS_EOF_FLAGS_SYNC: u32 = 1;
        let mut arg = XfsFsEofblocks {
            eof_version: XFS_EOFBLOCKS_VERSION,
            eof_flags: XFS_EOF_FLAGS_SYNC,
            eof_uid: 0,
            eof_gid: 0,
            eof_prid: 0,
            pad32: 0,
            eof_min_file_size: 0,
            pad64: [0; 12],
        };
        // SAFETY: the pointer is to a live, fully initialised struct of the layout the call
        // reads (128 bytes, checked by a test); the kernel does not keep it.
        unsafe { xfs_ioc_free_eofblocks(self.raw(), &mut arg) }.map(|_| ())
    }

    /// A second descriptor of the same directory (`dup`; it shares the file offset).
    pub fn try_clone(&self) -> Result<Dir, Errno> {
        self.0
            .try_clone()
            .map(Dir)
            .map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
    }

    /// The raw descriptor, for calls this type does not wrap; still owned by `self`.
    #[inline]
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl From<OwnedFd> for Dir {
    fn from(fd: OwnedFd) -> Self {
        Dir(fd)
    }
}

impl From<Dir> for OwnedFd {
    fn from(d: Dir) -> Self {
        d.0
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for Dir {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A file open for writing, made by [`Dir::create`]. Dropping it closes it and ignores the
/// error (for paths that already failed); [`File::close`] reports it.
#[derive(Debug)]
pub struct File(OwnedFd);

impl File {
    /// `write(2)` of the whole slice, retrying on EINTR and short writes; after each call,
    /// `each` gets the bytes that call wrote, so callers can time every syscall.
    #[inline]
    pub fn write_all(&self, mut buf: &[u8], mut each: impl FnMut(usize)) -> Result<(), Errno> {
        while !buf.is_empty() {
            // SAFETY: write(2) from a live buffer of buf.len() bytes on a descriptor we own.
            let w = unsafe { libc::write(self.raw(), buf.as_ptr().cast(), buf.len()) };
            if w < 0 {
                let e = Errno::last();
                if e == Errno::EINTR {
                    continue;
                }
                return Err(e);
            }
            if w == 0 {
                return Err(Errno::EIO);
            }
            each(w as usize);
            buf = &buf[w as usize..];
        }
        Ok(())
    }

    /// One `read(2)` into `buf`, retried on EINTR: the bytes read, 0 at the end of the file.
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        loop {
            // SAFETY: read(2) into a live buffer of buf.len() bytes on a descriptor we own.
            let r = unsafe { libc::read(self.raw(), buf.as_mut_ptr().cast(), buf.len()) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = Errno::last();
            if e != Errno::EINTR {
                return Err(e);
            }
        }
    }

    /// `fsync(2)`.
    #[inline]
    pub fn fsync(&self) -> Result<(), Errno> {
        // SAFETY: fsync(2) on a descriptor we own.
        check(unsafe { libc::fsync(self.raw()) })
    }

    /// `close(2)`, reporting its error (a deferred ENOSPC or EIO shows up here on some
    /// filesystems). The descriptor is gone either way.
    #[inline]
    pub fn close(self) -> Result<(), Errno> {
        close(self.0)
    }

    /// The raw descriptor, for calls this type does not wrap; still owned by `self`.
    #[inline]
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl AsFd for File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for File {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn the_xfs_eofblocks_argument_has_the_kernels_size() {
        assert_eq!(std::mem::size_of::<super::XfsFsEofblocks>(), 128);
    }

    use super::*;

    #[test]
    fn makes_writes_closes_and_removes_through_owned_descriptors() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Dir::open(tmp.path()).unwrap();
        root.mkdir(c"d").unwrap();
        let d = root.open_dir(c"d").unwrap();
        let f = d.create(c"f").unwrap();
        let mut calls = Vec::new();
        f.write_all(&[7u8; 5000], |n| calls.push(n)).unwrap();
        assert_eq!(calls.iter().sum::<usize>(), 5000);
        f.fsync().unwrap();
        f.close().unwrap();
        assert_eq!(
            std::fs::read(tmp.path().join("d/f")).unwrap(),
            vec![7u8; 5000]
        );
        assert_eq!(d.mkdir(c"f"), Err(Errno::EEXIST));
        d.unlink(c"f", false).unwrap();
        drop(d);
        root.unlink(c"d", true).unwrap();
        assert!(!tmp.path().join("d").exists());
    }

    #[test]
    fn one_message_names_the_operation_path_and_errno() {
        let e = Dir::open_path(Path::new("/nonexistent/fsgauge")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "open /nonexistent/fsgauge failed: ENOENT (No such file or directory)"
        );
    }
}
