//! The one constructor of an emulated disk: a device server on an image this process holds,
//! with its loop device attached. A testbed's disk and journal device ([`crate::testbed`])
//! and the disk `devices check` and `fit` measure are all made here, so that the image is
//! always reached through the held descriptor and the loop device always has direct I/O.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use anyhow::Result;

use super::emulated::{EmulatedDevice, Start};

/// The name through which the server opens an image this process holds open:
/// `/proc/PID/fd/N`, never a path someone else could swap.
pub fn held_path(image: &File) -> PathBuf {
    PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        image.as_raw_fd()
    ))
}

/// An emulated disk as `start` says (its image given by [`held_path`] where this process made
/// it), with its loop device attached (direct I/O, rotational for a rotating profile).
/// Returns the disk and its loop device's path. On an error nothing of the disk is left
/// running: a disk whose loop device cannot be attached is stopped as it is dropped.
pub fn start(start: &Start<'_>) -> Result<(EmulatedDevice, PathBuf)> {
    let mut disk = EmulatedDevice::start_with(start)?;
    let loop_dev = disk.attach_loop()?;
    Ok((disk, loop_dev))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn the_held_path_reaches_the_held_file_itself() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("image")).unwrap();
        f.set_len(12345).unwrap();
        let p = held_path(&f);
        assert!(
            p.starts_with(format!("/proc/{}/fd", std::process::id())),
            "{}",
            p.display()
        );
        // Renamed away, the name is gone but the held path still reaches the same inode.
        std::fs::rename(dir.path().join("image"), dir.path().join("moved")).unwrap();
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(md.ino(), f.metadata().unwrap().ino());
        assert_eq!(md.len(), 12345);
    }
}
