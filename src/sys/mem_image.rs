//! An emulated disk's bytes in anonymous memory ([`MemImage`]), safe to share between the
//! threads that read and write them: every access copies under the lock of the 1 MiB chunk it
//! touches. The device server's store (`testbed::device::server::store`) is built on it.

use std::fs::File;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use anyhow::{Context, Result};

use super::Errno;

/// Granule of the memory store's locks and of its accounting.
const CHUNK: u64 = 1 << 20;
/// Locks over the chunks (chunk i takes lock i mod STRIPES).
const STRIPES: usize = 1024;
const PAGE: u64 = 4096;

/// The disk's bytes in anonymous memory, mapped without reserving (the kernel gives a page
/// when it is first written; an unwritten page reads as zeros). Every access copies under
/// the lock of the 1 MiB chunk it touches, so a read never sees a write half-made within a
/// chunk; requests that cross a chunk boundary are not atomic across it (nor are a drive's).
pub struct MemImage {
    base: NonNull<u8>,
    len: u64,
    locks: Box<[RwLock<()>]>,
    /// Chunks written at least once (an upper bound on what the store holds), and the most it
    /// may hold.
    touched: Box<[std::sync::atomic::AtomicBool]>,
    held: AtomicU64,
    budget: u64,
}

// SAFETY: the mapping is owned by the MemImage and freed only on drop; every access to its
// bytes goes through raw-pointer copies made under the chunk's RwLock (readers shared,
// writers exclusive), so threads never race on the same bytes.
unsafe impl Send for MemImage {}
// SAFETY: as for Send.
unsafe impl Sync for MemImage {}

impl MemImage {
    /// Maps `size` bytes and copies in the data extents of `file` (its holes stay unmapped
    /// zeros). Fails when the mapping is refused or the data alone exceeds `budget`.
    pub fn load(file: &File, size: u64, budget: u64) -> Result<MemImage> {
        let len = usize::try_from(size).context("image size")?;
        let nz = std::num::NonZeroUsize::new(len.max(1)).context("image size")?;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to its range.
        let base = unsafe {
            nix::sys::mman::mmap_anonymous(
                None,
                nz,
                nix::sys::mman::ProtFlags::PROT_READ | nix::sys::mman::ProtFlags::PROT_WRITE,
                nix::sys::mman::MapFlags::MAP_PRIVATE | nix::sys::mman::MapFlags::MAP_NORESERVE,
            )
        }
        .with_context(|| format!("mapping {size} bytes of memory for the image"))?;
        // The process locks its memory (mlockall, on fault); the image's pages are unlocked so
        // that a discard can give them back (MADV_DONTNEED refuses locked pages). There is
        // nothing to page them out to on a machine without swap, and with swap the timing
        // thread never touches them.
        // SAFETY: the range is the mapping just made.
        let _ = unsafe { nix::sys::mman::munlock(base, len.max(1)) };
        let chunks = size.div_ceil(CHUNK) as usize;
        let m = MemImage {
            base: base.cast(),
            len: size,
            locks: (0..STRIPES.min(chunks.max(1)))
                .map(|_| RwLock::new(()))
                .collect(),
            touched: (0..chunks)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            held: AtomicU64::new(0),
            budget,
        };
        m.load_extents(file)?;
        Ok(m)
    }

    /// The most bytes it may hold.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Copies the data extents of `file` in (SEEK_DATA / SEEK_HOLE; an unwritten or absent
    /// extent is a hole).
    fn load_extents(&self, file: &File) -> Result<()> {
        let mut buf = vec![0u8; CHUNK as usize];
        // A file that cannot say where its data are (SEEK_DATA works on every regular file
        // on Linux) has none loaded.
        for (start, end) in super::data_extents(file.as_fd(), self.len).unwrap_or_default() {
            let mut at = start;
            while at < end {
                let n = ((end - at) as usize).min(buf.len());
                let got = super::pread(file.as_fd(), &mut buf[..n], at)
                    .with_context(|| format!("reading the image at byte {at}"))?;
                if got == 0 {
                    break;
                }
                if buf[..got].iter().any(|&b| b != 0) {
                    self.write(&buf[..got], at)
                        .map_err(|e| anyhow::anyhow!("{e}"))
                        .with_context(|| {
                            format!(
                                "the image's data exceed the memory budget of {} bytes",
                                self.budget
                            )
                        })?;
                }
                at += got as u64;
            }
        }
        Ok(())
    }

    /// Copies between the image and `buf` chunk by chunk, each under its lock; `f` gets the
    /// image's bytes at an offset and the part of `buf` that goes with them.
    fn pieces(&self, off: u64, len: u64, mut f: impl FnMut(u64, usize, usize)) {
        let end = off.saturating_add(len).min(self.len);
        let mut at = off;
        while at < end {
            let chunk_end = ((at / CHUNK) + 1) * CHUNK;
            let n = (chunk_end.min(end) - at) as usize;
            f(at, (at - off) as usize, n);
            at += n as u64;
        }
    }

    fn lock(&self, at: u64) -> &RwLock<()> {
        &self.locks[(at / CHUNK) as usize % self.locks.len()]
    }

    /// Fills all of `buf` from `off` (past the end: zeros).
    pub fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        let inside = self.len.saturating_sub(off).min(buf.len() as u64) as usize;
        buf[inside..].fill(0);
        self.pieces(off, inside as u64, |at, i, n| {
            let _g = self.lock(at).read().unwrap_or_else(|p| p.into_inner());
            // SAFETY: at + n ≤ len (pieces stays inside the mapping); buf[i..i + n] is in
            // bounds; the chunk's read lock keeps writers of these bytes out.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.as_ptr().add(at as usize),
                    buf.as_mut_ptr().add(i),
                    n,
                )
            }
        });
        Ok(buf.len())
    }

    /// Writes all of `data` at `off`; ENOSPC past the end or beyond the budget.
    pub fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
        if off.saturating_add(data.len() as u64) > self.len {
            return Err(Errno::ENOSPC);
        }
        self.account(off, data.len() as u64)?;
        self.pieces(off, data.len() as u64, |at, i, n| {
            let _g = self.lock(at).write().unwrap_or_else(|p| p.into_inner());
            // SAFETY: as in read, with the chunk's write lock keeping every other access out.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr().add(i),
                    self.base.as_ptr().add(at as usize),
                    n,
                )
            }
        });
        Ok(data.len())
    }

    /// Counts the chunks `off..off + len` touches for the first time against the budget;
    /// ENOSPC (nothing written) when they would exceed it.
    fn account(&self, off: u64, len: u64) -> Result<(), Errno> {
        let first = off / CHUNK;
        let last = (off + len.max(1) - 1) / CHUNK;
        let new = (first..=last)
            .filter(|&c| !self.touched[c as usize].load(Ordering::Relaxed))
            .count() as u64;
        if new == 0 {
            return Ok(());
        }
        if self.held.load(Ordering::Relaxed) + new * CHUNK > self.budget {
            return Err(Errno::ENOSPC);
        }
        for c in first..=last {
            if !self.touched[c as usize].swap(true, Ordering::Relaxed) {
                self.held.fetch_add(CHUNK, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Zeros `off..off + len`: whole pages are given back to the kernel (they read as zeros
    /// again), the partial pages at the ends are cleared.
    pub fn zero(&self, off: u64, len: u64) -> Result<(), Errno> {
        self.pieces(off, len, |at, _, n| {
            let end = at + n as u64;
            let _g = self.lock(at).write().unwrap_or_else(|p| p.into_inner());
            let (p0, p1) = (at.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
            if p1 > p0 {
                // SAFETY: p0..p1 lies inside the private anonymous mapping, under the chunk's
                // write lock; MADV_DONTNEED on it makes those pages read as zeros.
                let freed = unsafe {
                    nix::sys::mman::madvise(
                        self.base.add(p0 as usize).cast(),
                        (p1 - p0) as usize,
                        nix::sys::mman::MmapAdvise::MADV_DONTNEED,
                    )
                };
                if freed.is_err() {
                    self.clear(p0, p1);
                }
                self.clear(at, p0.min(end));
                self.clear(p1.max(at), end);
            } else {
                self.clear(at, end);
            }
        });
        Ok(())
    }

    /// Writes zeros over `from..to` (the caller holds the chunk's write lock).
    fn clear(&self, from: u64, to: u64) {
        if to > from {
            // SAFETY: from..to lies inside the mapping; the caller holds the write lock.
            unsafe {
                std::ptr::write_bytes(
                    self.base.as_ptr().add(from as usize),
                    0,
                    (to - from) as usize,
                )
            }
        }
    }
}

impl Drop for MemImage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in load, of this length; no reference into it outlives self.
        let _ = unsafe { nix::sys::mman::munmap(self.base.cast(), (self.len as usize).max(1)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(size: u64, budget: u64) -> MemImage {
        let f = tempfile::tempfile().unwrap();
        f.set_len(size).unwrap();
        MemImage::load(&f, size, budget).unwrap()
    }

    #[test]
    fn memory_store_reads_back_what_was_written_across_chunks_and_zeros_elsewhere() {
        let m = image(4 * CHUNK, u64::MAX);
        let data: Vec<u8> = (0..3 * PAGE as usize)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        let at = CHUNK - PAGE; // crosses the first chunk boundary
        m.write(&data, at).unwrap();
        let mut back = vec![0u8; data.len() + 2 * PAGE as usize];
        m.read(&mut back, at - PAGE).unwrap();
        assert!(back[..PAGE as usize].iter().all(|&b| b == 0));
        assert_eq!(&back[PAGE as usize..PAGE as usize + data.len()], &data[..]);
        assert!(back[PAGE as usize + data.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn memory_store_zeroing_clears_partial_and_whole_pages() {
        let m = image(2 * CHUNK, u64::MAX);
        m.write(&vec![7u8; 4 * PAGE as usize], 0).unwrap();
        // From the middle of page 0 to the middle of page 3.
        m.zero(PAGE / 2, 3 * PAGE).unwrap();
        let mut back = vec![0u8; 4 * PAGE as usize];
        m.read(&mut back, 0).unwrap();
        let half = (PAGE / 2) as usize;
        assert!(back[..half].iter().all(|&b| b == 7));
        assert!(back[half..half + 3 * PAGE as usize].iter().all(|&b| b == 0));
        assert!(back[half + 3 * PAGE as usize..].iter().all(|&b| b == 7));
    }

    #[test]
    fn memory_store_refuses_writes_beyond_its_budget_and_past_its_end() {
        let m = image(8 * CHUNK, 2 * CHUNK);
        m.write(&[1u8; 512], 0).unwrap();
        m.write(&[1u8; 512], CHUNK).unwrap();
        // Rewriting a chunk already held costs nothing.
        m.write(&[2u8; 512], 512).unwrap();
        assert_eq!(m.write(&[1u8; 512], 2 * CHUNK), Err(Errno::ENOSPC));
        assert_eq!(m.write(&[1u8; 512], 8 * CHUNK - 256), Err(Errno::ENOSPC));
        let mut tail = [9u8; 512];
        m.read(&mut tail, 8 * CHUNK - 256).unwrap();
        assert!(tail.iter().all(|&b| b == 0), "past the end reads zeros");
    }

    #[test]
    fn memory_store_starts_from_the_image_files_data() {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(4 * CHUNK).unwrap();
        f.seek(SeekFrom::Start(3 * CHUNK + 100)).unwrap();
        f.write_all(b"fsgauge").unwrap();
        let m = MemImage::load(&f, 4 * CHUNK, u64::MAX).unwrap();
        let mut back = [0u8; 9];
        m.read(&mut back, 3 * CHUNK + 99).unwrap();
        assert_eq!(&back, b"\0fsgauge\0");
        assert_eq!(m.held.load(Ordering::Relaxed), CHUNK);
    }
}
