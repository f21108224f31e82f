//! Memory the kernel reads and writes directly: a zeroed buffer aligned to a page, as O_DIRECT
//! asks (the logical block size of the device; 4 KiB covers every common one). Allocated once
//! per worker, so direct I/O needs no copy and no allocation per operation.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};

/// A zeroed byte buffer aligned to 4096 bytes (what O_DIRECT asks of memory).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    layout: Layout,
}

// SAFETY: the buffer is plain owned memory; moving it between threads is fine.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes (at least one page is allocated).
    pub fn zeroed(len: usize) -> Self {
        let layout = Layout::from_size_align(len.max(4096).next_multiple_of(4096), 4096)
            .expect("4096 is a power of two and the size is sane");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Self { ptr, len, layout }
    }

    /// [`AlignedBuf::zeroed`] with every page given now: a large zeroed allocation is a
    /// mapping whose pages the kernel gives on their first write, and a buffer the kernel
    /// copies into (a FUSE ring entry's payload, through `get_user_pages`) would otherwise
    /// take those faults, under the process's `mlockall`, on whichever thread made the copy:
    /// measured, a device server's timing thread spent 11 ms in one wait taking 3 MiB of
    /// writes into entries not used before.
    pub fn prefaulted(len: usize) -> Self {
        let b = Self::zeroed(len);
        for at in (0..b.layout.size()).step_by(4096) {
            // SAFETY: within the allocation; a volatile write of the zero already there makes
            // the page the process's own without changing it.
            unsafe { b.ptr.add(at).write_volatile(0) };
        }
        b
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to at least len initialized (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `b` the process has (mincore).
    fn resident(b: &AlignedBuf) -> usize {
        let pages = b.layout.size() / 4096;
        let mut vec = vec![0u8; pages];
        // SAFETY: the range is the buffer's page-aligned allocation; vec has a byte per page.
        let rc = unsafe { libc::mincore(b.ptr.cast(), b.layout.size(), vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|&&v| v & 1 == 1).count()
    }

    #[test]
    fn a_prefaulted_buffer_has_every_page_and_reads_as_zeros() {
        let b = AlignedBuf::prefaulted(8 << 20);
        assert_eq!(resident(&b), (8 << 20) / 4096);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(b.as_ptr() as usize % 4096, 0);
    }
}
