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

/// A buffer that cannot be had: its size rounded to a page does not fit the address space
/// (or a `Layout`), or the allocator has no memory for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufError {
    #[error("a buffer of {0} bytes does not fit this machine's address space")]
    TooLarge(usize),
    #[error("no memory for a buffer of {0} bytes")]
    NoMemory(usize),
}

/// The bytes allocated for a buffer of `len`: at least one page, a whole number of pages;
/// `None` when that does not fit a `Layout` (so never a size that wrapped past zero).
pub fn alloc_size(len: usize) -> Option<usize> {
    let size = len.max(PAGE).checked_next_multiple_of(PAGE)?;
    Layout::from_size_align(size, PAGE).ok().map(|l| l.size())
}

/// The alignment and the unit of allocation.
const PAGE: usize = 4096;

impl AlignedBuf {
    /// `len` zero bytes (at least one page is allocated), or why not: a size past the address
    /// space or memory the allocator cannot give is an error, never a wrapped size or an
    /// abort. Sizes from input (a replay log's lengths, a block size) come here.
    pub fn try_zeroed(len: usize) -> Result<Self, BufError> {
        let size = alloc_size(len).ok_or(BufError::TooLarge(len))?;
        let layout = Layout::from_size_align(size, PAGE).map_err(|_| BufError::TooLarge(len))?;
        // SAFETY: the layout has a non-zero size (at least one page).
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(BufError::NoMemory(size));
        }
        Ok(Self { ptr, len, layout })
    }

    /// [`AlignedBuf::try_zeroed`] for the fixed sizes of fsgauge's own buffers (a page, a
    /// request, a ring's entries). Panics, naming the size, where `try_zeroed` would fail:
    /// no input reaches this (sizes from input take `try_zeroed`), and the panic is the
    /// bound, never a wrapped size.
    pub fn zeroed(len: usize) -> Self {
        match Self::try_zeroed(len) {
            Ok(b) => b,
            Err(BufError::NoMemory(size)) => std::alloc::handle_alloc_error(
                Layout::from_size_align(size, PAGE).expect("made by try_zeroed"),
            ),
            Err(e) => panic!("AlignedBuf::zeroed: {e}"),
        }
    }

    /// [`AlignedBuf::zeroed`] with every page given now: a large zeroed allocation is a
    /// mapping whose pages the kernel gives on their first write, and a buffer the kernel
    /// copies into (a FUSE ring entry's payload, through `get_user_pages`) would otherwise
    /// take those faults, under the process's `mlockall`, on whichever thread made the copy:
    /// measured, a device server's timing thread spent 11 ms in one wait taking 3 MiB of
    /// writes into entries not used before.
    pub fn prefaulted(len: usize) -> Self {
        let b = Self::zeroed(len);
        for at in (0..b.layout.size()).step_by(PAGE) {
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

    /// What an allocation size must be for a buffer of `len`: a whole number of pages, at
    /// least one, covering `len`, less than a page more than needed.
    fn sound(len: usize, size: usize) -> bool {
        size % PAGE == 0 && size >= len && size >= PAGE && size - len.max(PAGE) < PAGE
    }

    proptest::proptest! {
        /// Over every length: a size that is sound, or none (never one that wrapped: before,
        /// `len.max(4096).next_multiple_of(4096)` gave 0 for the last 4095 lengths in a
        /// release build, with the slice still claiming `len` bytes).
        #[test]
        fn every_length_gets_a_sound_size_or_none(len in proptest::num::usize::ANY) {
            if let Some(size) = alloc_size(len) {
                proptest::prop_assert!(sound(len, size), "{len} -> {size}");
            } else {
                proptest::prop_assert!(len > isize::MAX as usize - PAGE, "{len} refused");
            }
        }

        /// The callers' ranges: the exerciser's model and scratch (up to its MAX_FILE_LEN,
        /// 16 GiB) and tio's blocks (up to MAX_BLOCK, 1 GiB, times its queue) all get a size.
        #[test]
        fn the_callers_lengths_all_get_a_size(len in 0usize..=(1usize << 40)) {
            let size = alloc_size(len);
            proptest::prop_assert!(size.is_some_and(|s| sound(len, s)), "{len} -> {size:?}");
        }

        /// The lengths next to the top of the address space.
        #[test]
        fn the_top_lengths_are_refused(back in 0usize..(1 << 20)) {
            proptest::prop_assert_eq!(alloc_size(usize::MAX - back), None);
        }
    }

    #[test]
    fn sizes_past_the_address_space_or_memory_are_errors_not_aborts() {
        for len in [usize::MAX, usize::MAX - 4095, isize::MAX as usize] {
            assert_eq!(
                AlignedBuf::try_zeroed(len).err(),
                Some(BufError::TooLarge(len)),
                "{len}"
            );
        }
        // 4 EiB fits a Layout but no machine's memory.
        assert!(matches!(
            AlignedBuf::try_zeroed(1 << 62),
            Err(BufError::NoMemory(_))
        ));
        let b = AlignedBuf::try_zeroed(0).expect("one page");
        assert_eq!((b.len(), b.layout.size()), (0, PAGE));
    }

    #[test]
    fn a_prefaulted_buffer_has_every_page_and_reads_as_zeros() {
        let b = AlignedBuf::prefaulted(8 << 20);
        assert_eq!(resident(&b), (8 << 20) / 4096);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(b.as_ptr() as usize % 4096, 0);
    }
}
