//! A crash the kernel makes: the testbed's filesystem shut down without flushing its log
//! (`FS_IOC_SHUTDOWN`, NOLOGFLUSH: xfstests' "godown"), then mounted again so its journal
//! replays. What the filesystem had not committed by then is lost, as in a crash, but the disk
//! keeps every write it had completed (no drive cache is lost): a cross-check of the emulated
//! disk's cuts ([`super::crashstate`]) that needs neither the emulator nor its write log.

use anyhow::{Context, Result};

use super::fsck::{self, CheckerOutcome};
use super::Testbed;
use crate::testbed::FsKind;

/// Whether `fs` can be shut down this way (ext2/3/4 through the ext4 driver, and xfs).
pub fn supported(fs: FsKind) -> bool {
    !matches!(fs, FsKind::Btrfs)
}

impl Testbed {
    /// Shuts the filesystem down as a crash would and unmounts it; returns the instant of the
    /// shutdown (CLOCK_MONOTONIC ns): every operation that ended before it is judged by what
    /// it had made durable. [`Self::mount_after_crash`] then mounts the state.
    pub fn shut_down(&mut self) -> Result<u64> {
        let dir = crate::base::sys::Dir::open(&self.reach())
            .map_err(|e| anyhow::anyhow!("opening {}: {}", self.mountpoint.display(), e.desc()))?;
        let at = crate::base::sys::rt::monotonic_ns();
        dir.shutdown_nologflush().map_err(|e| {
            anyhow::anyhow!(
                "shutting down {} (FS_IOC_SHUTDOWN): {}",
                self.mountpoint.display(),
                e.desc()
            )
        })?;
        drop(dir);
        self.unmount()?;
        Ok(at)
    }

    /// Mounts the filesystem after [`Self::shut_down`] (its journal replays). An error is the
    /// kernel refusing the state: a finding, for the caller to class.
    pub fn mount_after_crash(&mut self) -> Result<()> {
        self.mount()
    }

    /// Unmounts the filesystem, runs its checker read-only on the testbed's device, and mounts
    /// it again.
    pub fn check_unmounted(&mut self) -> Result<CheckerOutcome> {
        if self.mounted {
            self.unmount()?;
        }
        let out = fsck::run_checker(self.spec.fs, &self.device, self.journal_device())
            .context("checking the filesystem after the shutdown")?;
        self.mount()?;
        Ok(out)
    }
}
