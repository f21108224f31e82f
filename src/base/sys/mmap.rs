//! Memory mappings owned by a value and unmapped when it is dropped: the one `mmap(2)` wrapper
//! of the crate. The exerciser maps ranges of the file under test (its mapped-read and
//! mapped-write operations, and the page past EOF); the memory charger maps locked anonymous
//! memory to take it away from the page cache.
//!
//! The bytes are handed out as whole pages: the kernel maps whole pages, so the tail of the last
//! page past the length asked for is addressable (for a file, it reads as zeros past EOF —
//! exactly what the exerciser checks).
//!
//! A file mapping is only as stable as the file: the caller must be the one writer of the mapped
//! range while the mapping lives, and must not shrink the file below it (a truncated page faults
//! with SIGBUS). fsgauge maps only files it created on its own testbed.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use nix::errno::Errno;

/// What a file mapping may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; `populate` faults every page in with the `mmap` call itself (`MAP_POPULATE`),
    /// instead of one trap per page as the bytes are first touched.
    Read { populate: bool },
    /// Read and write; pages fault as they are touched, so every written page goes through the
    /// filesystem's `page_mkwrite`.
    Write,
}

/// A mapping of `len` bytes, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    /// The length given to `mmap`.
    len: usize,
    /// `len` rounded up to whole pages: what is addressable.
    span: usize,
    writable: bool,
}

// SAFETY: the mapping is memory owned by this value alone (no other handle to it exists in the
// process), so moving it to another thread is as sound as moving a Vec.
unsafe impl Send for Mmap {}

/// The system's page size.
pub fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(4096)
}

impl Mmap {
    /// A shared mapping of `len` bytes of the file open on `fd`, from `offset` (a multiple of
    /// the page size). See the module documentation for what the caller must keep true of the
    /// file while the mapping lives.
    pub fn file(
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<Self, Errno> {
        let (prot, flags, writable) = match access {
            Access::Read { populate: false } => (libc::PROT_READ, libc::MAP_SHARED, false),
            Access::Read { populate: true } => (
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                false,
            ),
            Access::Write => (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, true),
        };
        let offset = libc::off_t::try_from(offset).map_err(|_| Errno::EOVERFLOW)?;
        Self::map(len, prot, flags, fd.as_raw_fd(), offset, writable)
    }

    /// `len` bytes of private anonymous memory, populated and locked in RAM (`MAP_LOCKED`) by
    /// the `mmap` call itself.
    pub fn anonymous_locked(len: usize) -> Result<Self, Errno> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE | libc::MAP_LOCKED;
        Self::map(len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0, true)
    }

    fn map(
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        fd: libc::c_int,
        offset: libc::off_t,
        writable: bool,
    ) -> Result<Self, Errno> {
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        let span = len
            .checked_next_multiple_of(page_size())
            .ok_or(Errno::ENOMEM)?;
        // SAFETY: a new mapping at an address the kernel chooses (null hint, no MAP_FIXED), so
        // no existing memory is replaced; `fd` is open for the duration of the call (it is
        // borrowed by the caller, or -1 with MAP_ANONYMOUS); the result is checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::ENOMEM)?;
        Ok(Self {
            ptr,
            len,
            span,
            writable,
        })
    }

    /// The length the mapping was made with.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapped pages: the length asked for, rounded up to whole pages.
    pub fn pages(&self) -> &[u8] {
        // SAFETY: the kernel mapped `span` bytes (whole pages) at `ptr`, readable, and they stay
        // mapped until `self` is dropped; the borrow of `self` keeps the slice within that.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.span) }
    }

    /// The mapped pages, writable; `None` for a read-only mapping.
    pub fn pages_mut(&mut self) -> Option<&mut [u8]> {
        if !self.writable {
            return None;
        }
        // SAFETY: as in `pages`, and the mapping was made with PROT_WRITE; `&mut self` makes
        // this the only reference into the mapping.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.span) })
    }

    /// Writes the mapping's dirty pages back to the file and waits for them (`msync(MS_SYNC)`).
    pub fn sync(&self) -> Result<(), Errno> {
        // SAFETY: msync on exactly the live mapping made in `map`; it changes no memory.
        let rc = unsafe { libc::msync(self.ptr.as_ptr().cast(), self.len, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Errno::last())
        }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no slice into it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn a_file_mapping_reads_the_file_and_zeros_past_its_end() {
        let mut f = tempfile::tempfile().expect("a temporary file");
        f.write_all(b"hello").expect("writing 5 bytes");
        let m = Mmap::file(f.as_fd(), 0, 5, Access::Read { populate: true }).expect("mmap");
        assert_eq!(m.len(), 5);
        assert_eq!(m.pages().len(), page_size());
        assert_eq!(&m.pages()[..5], b"hello");
        assert!(m.pages()[5..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_write_mapping_reaches_the_file_and_a_read_mapping_cannot_be_written() {
        let f = tempfile::tempfile().expect("a temporary file");
        f.set_len(8).expect("ftruncate to 8 bytes");
        let mut m = Mmap::file(f.as_fd(), 0, 8, Access::Write).expect("mmap");
        m.pages_mut().expect("writable")[..8].copy_from_slice(b"abcdefgh");
        m.sync().expect("msync");
        drop(m);
        let mut back = [0u8; 8];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut back, 0).expect("pread");
        assert_eq!(&back, b"abcdefgh");
        let mut r = Mmap::file(f.as_fd(), 0, 8, Access::Read { populate: false }).expect("mmap");
        assert!(r.pages_mut().is_none());
    }

    #[test]
    fn bad_requests_are_errors() {
        let f = tempfile::tempfile().expect("a temporary file");
        let read = Access::Read { populate: false };
        assert_eq!(Mmap::file(f.as_fd(), 0, 0, read).err(), Some(Errno::EINVAL));
        assert_eq!(Mmap::file(f.as_fd(), 1, 8, read).err(), Some(Errno::EINVAL));
    }
}
