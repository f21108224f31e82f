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
