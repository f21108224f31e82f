//! A streaming directory reader over readdir(3): one entry at a time, names copied into one
//! reusable buffer, no rewinding. Removal can unlink entries while reading (POSIX allows it;
//! entries not yet removed are still returned exactly once), so `rm -rf` of a directory of a
//! million files needs no memory for its names.

use std::ffi::CStr;
use std::os::fd::{IntoRawFd, OwnedFd};

use nix::errno::Errno;

/// What readdir said about an entry's type (`DT_*`), or that it did not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    Dir,
    /// A regular file.
    File,
    Symlink,
    /// Anything else: a device, FIFO or socket.
    Other,
    Unknown,
}

/// An open directory stream; closed on drop.
pub struct DirStream {
    dir: std::ptr::NonNull<libc::DIR>,
}

// SAFETY: the stream is owned by one thread at a time; DIR* has no thread affinity.
unsafe impl Send for DirStream {}

impl DirStream {
    /// Takes ownership of a directory descriptor.
    pub fn new(fd: OwnedFd) -> Result<Self, Errno> {
        let raw = fd.into_raw_fd();
        // SAFETY: raw is an open directory descriptor we own; fdopendir takes it over.
        let p = unsafe { libc::fdopendir(raw) };
        match std::ptr::NonNull::new(p) {
            Some(dir) => Ok(Self { dir }),
            None => {
                let e = Errno::last();
                // SAFETY: fdopendir failed, so the descriptor is still ours to close.
                unsafe { libc::close(raw) };
                Err(e)
            }
        }
    }

    /// Starts again at the directory's first entry (`rewinddir(3)`): a stream over a `dup` of
    /// a descriptor shares its offset, which another reader may have left at the end.
    pub fn rewind(&mut self) {
        // SAFETY: self.dir is a valid open stream.
        unsafe { libc::rewinddir(self.dir.as_ptr()) }
    }

    /// The next entry other than `.` and `..`, or `None` at the end. The name lives until the
    /// next call.
    #[inline]
    pub fn next_entry(&mut self) -> Option<Result<(&CStr, EntryType), Errno>> {
        self.next_with_ino()
            .map(|r| r.map(|(name, kind, _)| (name, kind)))
    }

    /// [`DirStream::next_entry`] with the entry's inode number (`d_ino`).
    pub fn next_with_ino(&mut self) -> Option<Result<(&CStr, EntryType, u64), Errno>> {
        loop {
            Errno::clear();
            // SAFETY: self.dir is a valid open stream.
            let ent = unsafe { libc::readdir64(self.dir.as_ptr()) };
            if ent.is_null() {
                let e = Errno::last();
                return if e as i32 == 0 { None } else { Some(Err(e)) };
            }
            // SAFETY: readdir returned a valid dirent that stays valid until the next readdir
            // on this stream; the returned borrow of self prevents that call meanwhile.
            let (name, dtype, ino) = unsafe {
                (
                    CStr::from_ptr((*ent).d_name.as_ptr()),
                    (*ent).d_type,
                    (*ent).d_ino,
                )
            };
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let t = match dtype {
                libc::DT_DIR => EntryType::Dir,
                libc::DT_REG => EntryType::File,
                libc::DT_LNK => EntryType::Symlink,
                libc::DT_UNKNOWN => EntryType::Unknown,
                _ => EntryType::Other,
            };
            return Some(Ok((name, t, ino)));
        }
    }
}

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: closing the stream we own exactly once.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Each entry comes with its type and its inode number, and a stream read to its end (as a
    /// reader of a shared descriptor leaves it) gives every entry again after a rewind.
    #[test]
    fn entries_come_with_type_and_inode_and_again_after_a_rewind() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("d")).expect("mkdir");
        std::fs::write(tmp.path().join("f"), b"x").expect("write");
        std::os::unix::fs::symlink("f", tmp.path().join("l")).expect("symlink");
        let fd = crate::base::sys::Dir::open(tmp.path()).expect("open");
        let mut s = DirStream::new(OwnedFd::from(fd)).expect("stream");
        let read = |s: &mut DirStream| {
            let mut seen = Vec::new();
            while let Some(e) = s.next_with_ino() {
                let (name, kind, ino) = e.expect("an entry");
                seen.push((name.to_string_lossy().into_owned(), kind, ino));
            }
            seen.sort_by(|a, b| a.0.cmp(&b.0));
            seen
        };
        let ino = |n: &str| {
            std::fs::symlink_metadata(tmp.path().join(n))
                .expect("stat")
                .ino()
        };
        let want = vec![
            ("d".to_string(), EntryType::Dir, ino("d")),
            ("f".to_string(), EntryType::File, ino("f")),
            ("l".to_string(), EntryType::Symlink, ino("l")),
        ];
        // tmpfs and ext4 give the type; a filesystem that does not says Unknown.
        let first = read(&mut s);
        if first.iter().all(|e| e.1 != EntryType::Unknown) {
            assert_eq!(first, want);
        } else {
            assert_eq!(first.len(), 3, "{first:?}");
        }
        assert!(read(&mut s).is_empty(), "at the end");
        s.rewind();
        assert_eq!(read(&mut s).len(), 3);
    }
}
