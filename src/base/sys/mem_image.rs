//! An emulated disk's bytes in anonymous memory ([`MemImage`]), safe to share between the
//! threads that read and write them: every access copies under the lock of the 1 MiB chunk it
//! touches. The device server's store (`device::server::store`) is built on it.
//!
//! A memory image starts either with all the data of an image file copied in
//! ([`MemImage::load`]), or over a base file it never writes ([`MemImage::over`]): a
//! copy-on-write overlay, whose chunks are read from the base when first touched and held in
//! memory from then on, so that starting costs nothing however large the base is (a kept
//! aged image, see `testbed::images`).

use std::fs::File;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;

use anyhow::{Context, Result};

use super::Errno;

/// Granule of the memory store's locks, of its accounting and of an overlay's loading.
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
    /// Chunks held (written at least once, or loaded from the lower file): an upper bound on
    /// what the store holds, and the most it may hold.
    touched: Box<[AtomicBool]>,
    held: AtomicU64,
    budget: u64,
    /// The base an overlay reads its chunks from until they are loaded; None when everything
    /// was loaded at the start.
    lower: Option<Lower>,
}

/// The base file under an overlay and which of its chunks are in memory.
struct Lower {
    file: File,
    /// Set (under the chunk's write lock) once the chunk's bytes in memory are the disk's:
    /// read from the base, or written whole.
    loaded: Box<[AtomicBool]>,
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
        let m = MemImage::map(size, budget, None)?;
        m.load_extents(file)?;
        Ok(m)
    }

    /// Maps `size` bytes over `base`, which is only ever read: a chunk (1 MiB) is read from
    /// it the first time a request touches it (a write covering the whole chunk or a zeroing
    /// of all of it does not read it), and held in memory from then on, counted against
    /// `budget`. Nothing is read here. A read of a chunk the budget has no room for is
    /// served from the base as it is; a write or partial zeroing of one is refused (ENOSPC).
    pub fn over(base: File, size: u64, budget: u64) -> Result<MemImage> {
        let chunks = size.div_ceil(CHUNK) as usize;
        let lower = Lower {
            file: base,
            loaded: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
        };
        MemImage::map(size, budget, Some(lower))
    }

    fn map(size: u64, budget: u64, lower: Option<Lower>) -> Result<MemImage> {
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
        Ok(MemImage {
            base: base.cast(),
            len: size,
            locks: (0..STRIPES.min(chunks.max(1)))
                .map(|_| RwLock::new(()))
                .collect(),
            touched: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            held: AtomicU64::new(0),
            budget,
            lower,
        })
    }

    /// The most bytes it may hold.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Whether it is an overlay over a base file ([`MemImage::over`]).
    pub fn is_overlay(&self) -> bool {
        self.lower.is_some()
    }

    /// The bytes of the chunks it holds (loaded or written).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
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
    /// image's bytes at an offset and the part of `buf` that goes with them. Stops at the
    /// first piece that fails.
    fn pieces(
        &self,
        off: u64,
        len: u64,
        mut f: impl FnMut(u64, usize, usize) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let end = off.saturating_add(len).min(self.len);
        let mut at = off;
        while at < end {
            let chunk_end = ((at / CHUNK) + 1) * CHUNK;
            let n = (chunk_end.min(end) - at) as usize;
            f(at, (at - off) as usize, n)?;
            at += n as u64;
        }
        Ok(())
    }

    fn lock(&self, at: u64) -> &RwLock<()> {
        &self.locks[(at / CHUNK) as usize % self.locks.len()]
    }

    /// Whether the bytes in memory of the chunk holding `at` are the disk's (always, but in
    /// an overlay's chunks not yet loaded).
    fn is_loaded(&self, at: u64) -> bool {
        self.lower
            .as_ref()
            .is_none_or(|l| l.loaded[(at / CHUNK) as usize].load(Ordering::Acquire))
    }

    /// The byte range of the chunk holding `at`.
    fn chunk_of(&self, at: u64) -> (u64, u64) {
        let start = at / CHUNK * CHUNK;
        (start, (start + CHUNK).min(self.len))
    }

    /// Makes the chunk holding `at` loaded before `at..at + n` is written or zeroed (the
    /// caller holds its write lock and has counted it against the budget): read from the
    /// base unless the request covers all of it.
    fn make_loaded(&self, at: u64, n: usize) -> Result<(), Errno> {
        let Some(lower) = &self.lower else {
            return Ok(());
        };
        let c = (at / CHUNK) as usize;
        if lower.loaded[c].load(Ordering::Acquire) {
            return Ok(());
        }
        let (start, end) = self.chunk_of(at);
        if at != start || at + n as u64 != end {
            // SAFETY: start..end lies inside the mapping; the caller holds the chunk's write
            // lock, so nothing else reads or writes these bytes meanwhile.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    self.base.as_ptr().add(start as usize),
                    (end - start) as usize,
                )
            };
            read_full(&lower.file, dst, start)?;
        }
        lower.loaded[c].store(true, Ordering::Release);
        Ok(())
    }

    /// Fills all of `buf` from `off` (past the end: zeros).
    pub fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        let inside = self.len.saturating_sub(off).min(buf.len() as u64) as usize;
        buf[inside..].fill(0);
        self.pieces(off, inside as u64, |at, i, n| {
            self.read_piece(&mut buf[i..i + n], at)
        })?;
        Ok(buf.len())
    }

    /// Reads `dst` from `at`, within one chunk: an overlay's chunk not yet loaded is loaded
    /// first, under its write lock.
    fn read_piece(&self, dst: &mut [u8], at: u64) -> Result<(), Errno> {
        if self.is_loaded(at) {
            let _g = self.lock(at).read().unwrap_or_else(|p| p.into_inner());
            // Loaded chunks never go back to not loaded: a check before the lock holds.
            self.copy_out(dst, at);
            return Ok(());
        }
        let _g = self.lock(at).write().unwrap_or_else(|p| p.into_inner());
        if !self.is_loaded(at) {
            if self.account(at, 1).is_err() {
                // No room to hold the chunk: the base's bytes, as they are.
                let lower = self
                    .lower
                    .as_ref()
                    .expect("only an overlay has unloaded chunks");
                return read_full(&lower.file, dst, at);
            }
            self.make_loaded(at, 0)?;
        }
        self.copy_out(dst, at);
        Ok(())
    }

    /// Copies the image's bytes at `at` into `dst` (the caller holds the chunk's lock).
    fn copy_out(&self, dst: &mut [u8], at: u64) {
        // SAFETY: at + dst.len() ≤ len (pieces stays inside the mapping, within one chunk);
        // the caller's lock on the chunk keeps writers of these bytes out.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(at as usize),
                dst.as_mut_ptr(),
                dst.len(),
            )
        }
    }

    /// Writes all of `data` at `off`; ENOSPC past the end or beyond the budget.
    pub fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
        if off.saturating_add(data.len() as u64) > self.len {
            return Err(Errno::ENOSPC);
        }
        self.account(off, data.len() as u64)?;
        self.pieces(off, data.len() as u64, |at, i, n| {
            let _g = self.lock(at).write().unwrap_or_else(|p| p.into_inner());
            self.make_loaded(at, n)?;
            // SAFETY: as in copy_out, with the chunk's write lock keeping every other access
            // out.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr().add(i),
                    self.base.as_ptr().add(at as usize),
                    n,
                )
            }
            Ok(())
        })?;
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
    /// again), the partial pages at the ends are cleared. An overlay's chunk not yet loaded
    /// is loaded first unless all of it is zeroed (ENOSPC when the budget has no room for
    /// it).
    pub fn zero(&self, off: u64, len: u64) -> Result<(), Errno> {
        self.pieces(off, len, |at, _, n| {
            let end = at + n as u64;
            let _g = self.lock(at).write().unwrap_or_else(|p| p.into_inner());
            if !self.is_loaded(at) {
                self.account(at, n as u64)?;
                self.make_loaded(at, n)?;
            }
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
            Ok(())
        })
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

/// Fills all of `dst` from `file` at `off`, zeros past its end.
fn read_full(file: &File, dst: &mut [u8], off: u64) -> Result<(), Errno> {
    let mut done = 0;
    while done < dst.len() {
        match super::pread(file.as_fd(), &mut dst[done..], off + done as u64) {
            Ok(0) => {
                dst[done..].fill(0);
                break;
            }
            Ok(n) => done += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

    /// A base of `chunks` chunks whose every byte is `(offset / 4096) % 251 + 1` (never zero),
    /// and its bytes.
    fn base(chunks: u64) -> (File, Vec<u8>) {
        use std::io::Write;
        let bytes: Vec<u8> = (0..chunks * CHUNK)
            .map(|i| ((i / PAGE) % 251) as u8 + 1)
            .collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&bytes).unwrap();
        (f, bytes)
    }

    /// `f`'s bytes now.
    fn contents(f: &File) -> Vec<u8> {
        let mut back = vec![0u8; f.metadata().unwrap().len() as usize];
        read_full(f, &mut back, 0).unwrap();
        back
    }

    /// A base opened write-only: any read of it fails (EBADF), so an overlay over it shows
    /// whether a request read its base.
    fn unreadable(chunks: u64) -> File {
        let path = tempfile::NamedTempFile::new().unwrap().into_temp_path();
        std::fs::write(&path, vec![5u8; (chunks * CHUNK) as usize]).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap()
    }

    #[test]
    fn an_overlay_reads_an_unloaded_chunk_from_its_base_and_then_holds_it() {
        let (f, bytes) = base(4);
        let m = MemImage::over(f.try_clone().unwrap(), 4 * CHUNK, u64::MAX).unwrap();
        assert!(m.is_overlay());
        assert_eq!(m.held(), 0, "nothing is loaded at the start");
        // Across the boundary of chunks 1 and 2.
        let at = 2 * CHUNK - 3 * PAGE - 100;
        let mut back = vec![0u8; 6 * PAGE as usize];
        m.read(&mut back, at).unwrap();
        assert_eq!(&back[..], &bytes[at as usize..at as usize + back.len()]);
        assert_eq!(m.held(), 2 * CHUNK, "the two chunks read are held");
        m.read(&mut back, at).unwrap();
        assert_eq!(m.held(), 2 * CHUNK);
        assert_eq!(contents(&f), bytes, "the base is unchanged");
    }

    #[test]
    fn an_overlays_partial_write_keeps_the_rest_of_the_chunk_from_its_base() {
        let (f, bytes) = base(2);
        let m = MemImage::over(f.try_clone().unwrap(), 2 * CHUNK, u64::MAX).unwrap();
        let at = CHUNK + 1000;
        m.write(&[0xEEu8; 3000], at).unwrap();
        let mut back = vec![0u8; CHUNK as usize];
        m.read(&mut back, CHUNK).unwrap();
        let mut want = bytes[CHUNK as usize..].to_vec();
        want[1000..4000].fill(0xEE);
        assert_eq!(back, want);
        assert_eq!(m.held(), CHUNK);
        assert_eq!(contents(&f), bytes, "the base is never written");
    }

    #[test]
    fn an_overlays_whole_chunk_write_and_zeroing_do_not_read_the_base() {
        let m = MemImage::over(unreadable(3), 3 * CHUNK, u64::MAX).unwrap();
        m.write(&vec![9u8; CHUNK as usize], CHUNK).unwrap();
        m.zero(2 * CHUNK, CHUNK).unwrap();
        let mut back = vec![1u8; 2 * CHUNK as usize];
        m.read(&mut back, CHUNK).unwrap();
        assert!(back[..CHUNK as usize].iter().all(|&b| b == 9));
        assert!(back[CHUNK as usize..].iter().all(|&b| b == 0));
        // A part of a chunk must read the base first: this one cannot be read.
        assert_eq!(m.write(&[9u8; 512], 512), Err(Errno::EBADF));
        assert_eq!(m.zero(512, 512), Err(Errno::EBADF));
    }

    #[test]
    fn an_overlays_partial_zeroing_keeps_the_rest_of_the_chunk_from_its_base() {
        let (f, bytes) = base(1);
        let m = MemImage::over(f.try_clone().unwrap(), CHUNK, u64::MAX).unwrap();
        m.zero(PAGE / 2, 3 * PAGE).unwrap();
        let mut back = vec![0u8; CHUNK as usize];
        m.read(&mut back, 0).unwrap();
        let mut want = bytes.clone();
        want[(PAGE / 2) as usize..(PAGE / 2 + 3 * PAGE) as usize].fill(0);
        assert_eq!(back, want);
        assert_eq!(contents(&f), bytes);
    }

    #[test]
    fn an_overlay_beyond_its_budget_reads_its_base_and_refuses_writes() {
        let (f, bytes) = base(3);
        let m = MemImage::over(f, 3 * CHUNK, CHUNK).unwrap();
        m.write(&[3u8; 100], 0).unwrap();
        let mut back = vec![0u8; 200];
        m.read(&mut back, 2 * CHUNK).unwrap();
        assert_eq!(
            &back[..],
            &bytes[2 * CHUNK as usize..2 * CHUNK as usize + 200]
        );
        assert_eq!(
            m.held(),
            CHUNK,
            "a chunk read beyond the budget is not held"
        );
        assert_eq!(m.write(&[3u8; 100], CHUNK), Err(Errno::ENOSPC));
    }
}
