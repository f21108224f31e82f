//! Cold caches: `sync` then `echo 3 > /proc/sys/vm/drop_caches` (page cache, dentries, inodes).

use anyhow::{Context, Result};

use crate::base::error::bad_input;

/// Writes back everything and drops clean caches. Needs root.
pub fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            bad_input("--cold drop needs root (it writes /proc/sys/vm/drop_caches); run as root or use --cold none")
        } else {
            anyhow::Error::from(e).context("writing 3 to /proc/sys/vm/drop_caches")
        }
    })
}

/// Flushes one filesystem (syncfs(2)) through any open file or directory on it.
pub fn syncfs(path: &std::path::Path) -> Result<()> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f))
        .with_context(|| format!("syncfs {}", path.display()))
}
