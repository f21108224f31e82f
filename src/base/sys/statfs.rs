//! `fstatfs(2)`: which filesystem a descriptor lives on, its size and its identity; and
//! [`Space`], a filesystem's size and free space in bytes as `statvfs(3)` gives them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// What `fstatfs` says of the filesystem holding a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStat {
    /// The filesystem's magic number (`f_type`), e.g. 0xEF53 for ext2/3/4.
    pub magic: i64,
    /// Total data blocks (`f_blocks`).
    pub blocks: u64,
    /// The block size `blocks` counts in (`f_bsize`).
    pub block_size: u64,
    /// The filesystem id (`f_fsid`), two 32-bit words.
    pub fsid: [u32; 2],
}

/// `fstatfs` on `fd`.
pub fn fstatfs(fd: BorrowedFd<'_>) -> io::Result<FsStat> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is a live borrowed descriptor and `st` is a writable statfs-sized buffer.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatfs succeeded, so the kernel filled the whole struct.
    let st = unsafe { st.assume_init() };
    // SAFETY: fsid_t is two 32-bit integers (`int __val[2]`); its field is private in the libc
    // crate, and any bit pattern is a valid [u32; 2].
    let fsid: [u32; 2] = unsafe { std::mem::transmute_copy(&st.f_fsid) };
    #[allow(clippy::unnecessary_cast)]
    Ok(FsStat {
        magic: st.f_type as i64,
        blocks: st.f_blocks as u64,
        block_size: st.f_bsize as u64,
        fsid,
    })
}

/// A filesystem's size and free space in bytes, from `statvfs(3)`: each block count times
/// `f_frsize`, the unit statvfs counts blocks in (`f_bsize` is the preferred I/O size and
/// need not be the same). The one place block counts become bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// The filesystem's size (`f_blocks`).
    pub total: u64,
    /// Free bytes, the blocks reserved for root included (`f_bfree`).
    pub free: u64,
    /// Free bytes that any writer may take (`f_bavail`): what a run may count on.
    pub available: u64,
}

impl Space {
    /// The sizes `st` gives.
    #[allow(clippy::unnecessary_cast)] // statvfs field types differ between platforms
    pub fn of(st: &nix::sys::statvfs::Statvfs) -> Self {
        let unit = st.fragment_size() as u64;
        let bytes = |blocks| (blocks as u64).saturating_mul(unit);
        Self {
            total: bytes(st.blocks()),
            free: bytes(st.blocks_free()),
            available: bytes(st.blocks_available()),
        }
    }

    /// Bytes in use: the size less the free bytes (reserved blocks count as free).
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_root_filesystem_has_a_size() {
        let f = std::fs::File::open("/").expect("opening /");
        let st = fstatfs(f.as_fd()).expect("fstatfs /");
        assert!(st.block_size > 0, "{st:?}");
        assert_ne!(st.magic, 0, "{st:?}");
    }

    #[test]
    fn space_counts_blocks_of_the_fragment_size() {
        let st = nix::sys::statvfs::statvfs("/").expect("statvfs /");
        let sp = Space::of(&st);
        #[allow(clippy::unnecessary_cast)]
        let unit = st.fragment_size() as u64;
        assert!(unit > 0);
        assert_eq!(sp.total % unit, 0, "{sp:?}");
        assert_eq!(sp.total / unit, st.blocks() as u64);
        assert_eq!(sp.free / unit, st.blocks_free() as u64);
        assert_eq!(sp.available / unit, st.blocks_available() as u64);
        assert!(sp.available <= sp.free && sp.free <= sp.total, "{sp:?}");
        assert_eq!(sp.used(), sp.total - sp.free);
    }
}
