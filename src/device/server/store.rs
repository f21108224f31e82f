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
//!
//! Over a base ([`Store::overlay`]): a kept aged image served as it is, opened read-only and
//! never written, every write kept in memory (a copy-on-write overlay, see
//! [`MemImage::over`]). A chunk's first touch reads it from the base: that lateness is the
//! server's own and is recorded as every request's is.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result};

use crate::base::sys::mem_image::MemImage;
use crate::base::sys::Errno;

/// Which store a server uses, from `FSGAUGE_DEVICE_STORE`: `memory` (the default), `memory:SIZE`
/// (with a budget of SIZE instead of half the machine's memory), or `file`.
pub const STORE_ENV: &str = "FSGAUGE_DEVICE_STORE";

/// The bytes of one emulated disk.
pub enum Store {
    Memory(MemImage),
    File(FileImage),
}

impl Store {
    /// The store for an image of `size` bytes at `path` (extended sparsely to `size` if
    /// shorter), in memory up to `budget` bytes (None: on the host disk). `why_not_memory` is
    /// told why the bytes stay on the host disk, when they do.
    pub fn open(
        path: &Path,
        size: u64,
        budget: Option<u64>,
        why_not_memory: &mut dyn FnMut(String),
    ) -> Result<Store> {
        let file = FileImage::open(path, size)?;
        let Some(budget) = budget else {
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

    /// An overlay over the image at `path` (opened read-only, never written) of `size`
    /// bytes, holding what is written and what is read of the image in memory up to
    /// `budget` bytes (None: the file store was asked for, which would write the image, and
    /// is refused).
    pub fn overlay(path: &Path, size: u64, budget: Option<u64>) -> Result<Store> {
        let Some(budget) = budget else {
            return Err(crate::base::error::bad_input(format!(
                "an overlay over a kept image keeps the disk's writes in the server's memory, and {STORE_ENV}=file would write them to the kept image; leave {STORE_ENV} unset (or give memory:SIZE), or start the testbed from a copy of the image (--image-start copy)"
            )));
        };
        let base = File::open(path)
            .with_context(|| format!("opening the base image {} read-only", path.display()))?;
        Ok(Store::Memory(MemImage::over(base, size, budget)?))
    }

    /// The most bytes the store may hold in memory; 0 for a file store.
    pub fn budget(&self) -> u64 {
        match self {
            Store::Memory(m) => m.budget(),
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
                let mut buf = crate::base::sys::AlignedBuf::zeroed(data.len().max(1));
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

/// The store as the write log reads and changes it.
impl crate::device::writelog::record::Media for Store {
    fn read(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        Store::read(self, buf, off)
    }
    fn write(&self, data: &[u8], off: u64) -> Result<usize, Errno> {
        Store::write(self, data, off)
    }
    fn zero(&self, mode: i32, off: u64, len: u64) -> Result<(), Errno> {
        Store::zero(self, mode, off, len)
    }
}

/// The most bytes a memory store may hold: half the machine's memory.
pub fn memory_budget() -> u64 {
    crate::base::sys::proc::meminfo("MemTotal").unwrap_or(0) / 2
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
                crate::base::sys::pwrite(f.as_fd(), buf, off)
            } else {
                crate::base::sys::pread(f.as_fd(), buf, off)
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
        crate::base::sys::fallocate(self.buffered.as_fd(), mode, off, len)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_overlay_store_never_writes_its_base_and_refuses_the_file_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kept.img");
        std::fs::write(&path, vec![7u8; 2 << 20]).unwrap();
        let e = Store::overlay(&path, 2 << 20, None).err().unwrap();
        assert_eq!(crate::base::error::exit_code(&e), 2);
        assert!(
            e.to_string()
                .contains("FSGAUGE_DEVICE_STORE=file would write them to the kept image"),
            "{e}"
        );
        let s = Store::overlay(&path, 2 << 20, Some(4 << 20)).unwrap();
        s.write(&[1u8; 4096], 4096).unwrap();
        s.zero(libc::FALLOC_FL_ZERO_RANGE, 1 << 20, 8192).unwrap();
        let mut back = [0u8; 3];
        s.read(&mut back, 4095).unwrap();
        assert_eq!(back, [7, 1, 1]);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            vec![7u8; 2 << 20],
            "the base is as it was"
        );
    }
}
