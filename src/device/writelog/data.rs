//! The write log's bytes (writes' data and undo pre-images), kept in a file rather than the
//! server's heap, as dm-log-writes keeps its log on a device: the in-memory log is an index
//! of positions in it. A run's log file lies beside its image in the run's private directory
//! (made and recorded by the run, removed with it); a log started without one keeps its bytes
//! in an anonymous memory file (`memfd_create(2)`), which is the same code on pages of memory.
//!
//! Appends go through one buffer of [`BUFFER`] bytes, filled by the thread that already copies
//! the request's data into the store (a FUSE thread) and written out when full: the timing
//! thread never waits on the log's file. Reads (a crash state served) come from the file at
//! positions already written out: [`LogData::flush`] writes the buffer before a crash state is
//! built, and the file is append-only, so a position once written never changes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::base::sys::Errno;

/// The append buffer: at most this many bytes of the log are in memory at once.
pub const BUFFER: usize = 1 << 20;

/// A run of the log's bytes: `len` bytes from byte `at` of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blob {
    pub at: u64,
    pub len: u64,
}

/// The log's bytes, appended to.
#[derive(Debug)]
pub struct LogData {
    file: Arc<File>,
    buf: Vec<u8>,
    /// Bytes written to the file (the buffer holds the ones after them).
    flushed: u64,
}

/// A reader of the log's bytes written out so far (for the crash state served).
#[derive(Debug, Clone)]
pub struct LogReader {
    file: Arc<File>,
}

impl LogData {
    /// A log kept in `file`, from its start (the file is emptied first).
    pub fn in_file(file: File) -> std::io::Result<LogData> {
        file.set_len(0)?;
        Ok(LogData {
            file: Arc::new(file),
            buf: Vec::with_capacity(BUFFER),
            flushed: 0,
        })
    }

    /// A log kept in memory (an anonymous memory file).
    pub fn in_memory() -> std::io::Result<LogData> {
        use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
        let fd = memfd_create(c"fsgauge-write-log", MemFdCreateFlag::MFD_CLOEXEC)
            .map_err(std::io::Error::from)?;
        LogData::in_file(File::from(fd))
    }

    /// The log's length in bytes (written out and buffered).
    pub fn len(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    /// Whether nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `bytes`; where they are.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<Blob> {
        self.append_with(bytes.len(), |into| into.copy_from_slice(bytes))
    }

    /// Appends `len` bytes that `fill` writes in place (a pre-image read from the store
    /// straight into the buffer); where they are.
    pub fn append_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> std::io::Result<Blob> {
        if self.buf.len() + len > BUFFER {
            self.flush()?;
        }
        let blob = Blob {
            at: self.len(),
            len: len as u64,
        };
        if len > BUFFER {
            let mut big = vec![0u8; len];
            fill(&mut big);
            self.file.write_all_at(&big, self.flushed)?;
            self.flushed += len as u64;
            return Ok(blob);
        }
        let start = self.buf.len();
        self.buf.resize(start + len, 0);
        fill(&mut self.buf[start..]);
        Ok(blob)
    }

    /// Writes the buffered bytes out to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.flushed)?;
            self.flushed += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// A reader of the bytes written out ([`LogData::flush`] first for all of them).
    pub fn reader(&self) -> LogReader {
        LogReader {
            file: self.file.clone(),
        }
    }

    /// The file's size on its filesystem, bytes (what the log takes there).
    pub fn allocated(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.file
            .metadata()
            .map_or(0, |m| m.blocks().saturating_mul(512))
    }
}

impl LogReader {
    /// Fills `buf` from byte `at` of the log.
    pub fn read(&self, buf: &mut [u8], at: u64) -> Result<(), Errno> {
        self.file
            .read_exact_at(buf, at)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn appended_bytes_read_back_from_where_the_append_said_across_the_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogData::in_file(File::create_new(dir.path().join("log")).unwrap()).unwrap();
        let small = log.append(&[1u8; 1000]).unwrap();
        let big = log.append(&vec![2u8; BUFFER + 7]).unwrap();
        let filled = log.append_with(600, |b| b.fill(3)).unwrap();
        assert_eq!(
            (small.at, big.at, filled.at),
            (0, 1000, 1000 + BUFFER as u64 + 7)
        );
        assert_eq!(log.len(), filled.at + 600);
        log.flush().unwrap();
        let r = log.reader();
        for (b, byte) in [(small, 1u8), (big, 2), (filled, 3)] {
            let mut got = vec![0u8; b.len as usize];
            r.read(&mut got, b.at).unwrap();
            assert!(got.iter().all(|&x| x == byte));
        }
        assert_eq!(
            std::fs::metadata(dir.path().join("log")).unwrap().len(),
            log.len()
        );
        let mut past = [0u8; 1];
        assert!(r.read(&mut past, log.len()).is_err());
    }

    #[test]
    fn a_memory_log_reads_back_too() {
        let mut log = LogData::in_memory().unwrap();
        let b = log.append(b"abc").unwrap();
        log.flush().unwrap();
        let mut got = [0u8; 3];
        log.reader().read(&mut got, b.at).unwrap();
        assert_eq!(&got, b"abc");
    }
}
