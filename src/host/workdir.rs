//! Where fsgauge makes images, servers' files and run directories by default: the machine's
//! disk or tmpfs.

use std::path::PathBuf;

crate::choice! {
    /// Where the image of a testbed lives.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum Backing("backing") {
        /// An image file in the work directory, on the machine's disk.
        #[default]
        File = "file",
        /// An image on tmpfs (/dev/shm): a RAM disk.
        Ram = "ram",
    }
}

/// Where images go when `--workdir` is not given.
pub fn default_workdir(backing: Backing) -> PathBuf {
    match backing {
        Backing::Ram => PathBuf::from("/dev/shm/fsgauge"),
        Backing::File => PathBuf::from("/var/tmp/fsgauge"),
    }
}
