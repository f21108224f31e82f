//! Where the emulated disk's bytes live while its server runs.
//!
//! In memory ([`MemImage`]), by default: a request's data moves at memory speed, so the time
//! the emulator spends on it is microseconds and never the host disk's. With the image on the
//! host disk (O_DIRECT, as before), a read took that disk's 0.1 ms typical and several
//! milliseconds at its tail, and a write up to 8 ms: longer than the modelled drive takes for
//! a hit in its cache, so replies were late whatever the timing thread did. An emulated
//! disk's image is scratch (a testbed on one cannot outlive its server, see
//! `testbed::check_persistable`), so nothing is written back: the image file gives the
//! starting contents and is otherwise left alone.
//!
//! On the host disk ([`FileImage`]) when memory cannot hold what is written (more than
//! [`memory_budget`]), or when asked (`FSGAUGE_DEVICE_STORE=file`, for comparisons).

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use anyhow::{Context, Result};

use crate::sys::Errno;

/// Which store a server uses, from `FSGAUGE_DEVICE_STORE`: `memory` (the default), `memory:SIZE`
/// (with a budget of SIZE instead of half the machine's memory), or `file`.
pub const STORE_ENV: &str = "FSGAUGE_DEVICE_STORE";

/// The store asked for in [`STORE_ENV`]: None for the file, else the memory budget.
fn asked() -> Result<Option<u64>> {
    let v = std::env::var(STORE_ENV).unwrap_or_default();
    match v.as_str() {
        "" | "memory" => Ok(Some(memory_budget())),
        "file" => Ok(None),
        _ => match v.strip_prefix("memory:") {
            Some(size) => crate::units::parse_size(size)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("{STORE_ENV}={v}: {e}")),
            None => anyhow::bail!(
                "{STORE_ENV}={v} is not a store: give memory, memory:SIZE (e.g. memory:2G) or file"
            ),
        },
    }
}

/// The bytes of one emulated disk.
pub enum Store {
    Memory(MemImage),
    File(FileImage),
}

impl Store {
    /// The store for an image of `size` bytes at `path` (extended sparsely to `size` if
    /// shorter). `why_not_memory` is told why the bytes stay on the host disk, when they do.
    pub fn open(path: &Path, size: u64, why_not_memory: &mut dyn FnMut(String)) -> Result<Store> {
        let file = FileImage::open(path, size)?;
        let Some(budget) = asked()? else {
            return Ok(Store::File(file));
        };
        match MemImage::load(&file.buffered, size, budget) {
            Ok(m) => Ok(Store::Memory(m)),
            Err(e) => {
                why_not_memory(format!(
                    "the emulated disk's bytes stay on the host disk ({e:#}); requests wait for it, and replies may be late"
                ));
                Ok(Store::File(file))
            }
        }
    }

    /// The most bytes the store may hold in memory; 0 for a file store.
    pub fn budget(&self) -> u64 {
        match self {
            Store::Memory(m) => m.budget,
            Store::File(_) => 0,
        }
    }

    /// Fills all of `buf` from `off` (past the end: zeros).
    pub fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        match self {
            Store::Memory(m) => m.read(buf, off),
            Store::File(f) => f.transfer(buf, off, false),
        }
    }

    /// Writes all of `data` at `off`.
    pub fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
        match self {
            Store::Memory(m) => m.write(data, off),
            Store::File(f) => {
                // The file store writes from an aligned buffer (O_DIRECT).
                let mut buf = crate::sys::AlignedBuf::zeroed(data.len().max(1));
                buf[..data.len()].copy_from_slice(data);
                f.transfer(&mut buf[..data.len()], off, true)
            }
        }
    }

    /// A discard or a zeroing (`fallocate` mode from the loop device): the range reads as
    /// zeros after it, and takes no room where it can be freed.
    pub fn zero(&self, mode: i32, off: u64, len: u64) -> Result<(), Errno> {
        match self {
            Store::Memory(m) => m.zero(off, len),
            Store::File(f) => f.zero(mode, off, len),
        }
    }
}

/// The most bytes a memory store may hold: half the machine's memory.
pub fn memory_budget() -> u64 {
    crate::sys::proc::meminfo("MemTotal").unwrap_or(0) / 2
}

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

    /// Copies the data extents of `file` in (SEEK_DATA / SEEK_HOLE; an unwritten or absent
    /// extent is a hole).
    fn load_extents(&self, file: &File) -> Result<()> {
        let fd = file.as_raw_fd();
        let mut off: u64 = 0;
        let mut buf = vec![0u8; CHUNK as usize];
        while off < self.len {
            // SAFETY: lseek on a descriptor this function borrows; no memory is passed.
            let data = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                break; // ENXIO: no data after off
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            let (start, end) = (data as u64, (hole.max(data) as u64).min(self.len));
            let mut at = start;
            while at < end {
                let n = ((end - at) as usize).min(buf.len());
                let got = crate::sys::pread(file.as_fd(), &mut buf[..n], at)
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
            off = end.max(start + 1);
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

    fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
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

    fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
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
    fn zero(&self, off: u64, len: u64) -> Result<(), Errno> {
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

/// The image on the host disk: one descriptor with O_DIRECT where the image's filesystem
/// allows it, one without for requests it refuses (unaligned, or a filesystem without direct
/// I/O).
pub struct FileImage {
    direct: Option<File>,
    buffered: File,
    /// The image had fewer blocks than bytes when the server started (`--image-alloc
    /// sparse`, or the devices check's scratch image): it is kept sparse, a range the kernel
    /// zeroes is punched out rather than allocated zeroed (both read as zeros), so that mkfs
    /// zeroing a whole drive's inode tables takes no room on the host.
    sparse: bool,
}

impl FileImage {
    fn open(path: &Path, size: u64) -> Result<FileImage> {
        let buffered = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening the device image {}", path.display()))?;
        let meta = buffered
            .metadata()
            .with_context(|| format!("stat of the device image {}", path.display()))?;
        let sparse = {
            use std::os::unix::fs::MetadataExt;
            meta.blocks().saturating_mul(512) < size
        };
        if meta.len() < size {
            // Sparse: the disk's unwritten blocks read as zeros.
            buffered.set_len(size).with_context(|| {
                format!(
                    "extending the device image {} to {size} bytes",
                    path.display()
                )
            })?;
        }
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok();
        Ok(FileImage {
            direct,
            buffered,
            sparse,
        })
    }

    fn io(&self, buf: &mut [u8], off: u64, write: bool) -> Result<usize, Errno> {
        let go = |f: &File, buf: &mut [u8]| {
            if write {
                crate::sys::pwrite(f.as_fd(), buf, off)
            } else {
                crate::sys::pread(f.as_fd(), buf, off)
            }
        };
        if let Some(d) = &self.direct {
            match go(d, buf) {
                Err(Errno::EINVAL) => {}
                r => return r,
            }
        }
        go(&self.buffered, buf)
    }

    /// Reads or writes all of `buf` (short transfers continue; past the end reads zeros).
    fn transfer(&self, buf: &mut [u8], off: u64, write: bool) -> Result<usize, Errno> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.io(&mut buf[done..], off + done as u64, write)?;
            if n == 0 {
                if !write {
                    buf[done..].fill(0);
                }
                return Ok(buf.len());
            }
            done += n;
        }
        Ok(done)
    }

    fn zero(&self, mode: i32, off: u64, len: u64) -> Result<(), Errno> {
        // A 2005 drive had no TRIM; the image frees or zeroes the space.
        let mode = if self.sparse && mode & libc::FALLOC_FL_ZERO_RANGE != 0 {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        } else {
            mode
        };
        crate::sys::fallocate(self.buffered.as_fd(), mode, off, len)
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
