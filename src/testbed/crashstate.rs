//! A testbed's crash states: its emulated disk as power cuts would have left it, each mounted
//! and checked on a second loop device while the testbed's own filesystem stays unmounted.
//!
//! [`Testbed::start_crash_log`] starts the disk's write log (at the measured run's start);
//! [`Testbed::crash_states`] unmounts the filesystem (what the unmount writes is logged too, so
//! the last cut is the cleanly unmounted disk), attaches the crash loop and makes the mount
//! point `crash` beside `mnt` (in the ledger); [`CrashStates::build`] sets one state,
//! [`CrashStates::mount`] mounts it (journal replay), [`CrashStates::check`] runs the read-only
//! checker after unmounting it, and [`CrashStates::finish`] mounts the testbed's own filesystem
//! again (dropping the session without it leaves the testbed unmounted, torn down as usual).

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use super::crashcheck::{self, CheckerOutcome};
use super::device::writelog::{CrashStateInfo, LogSummary};
use super::{sys_trust, Resource, Testbed};
use crate::results::crash::CrashCache;

/// The crash states of one testbed, between [`Testbed::crash_states`] and
/// [`CrashStates::finish`].
pub struct CrashStates<'a> {
    tb: &'a mut Testbed,
    /// The crash loop device.
    dev: PathBuf,
    /// The testbed's directory, held: the mount point `crash` is reached through it (a name
    /// walked from a held parent crosses into what is mounted there, as the testbed's `mnt`).
    home: Arc<std::os::fd::OwnedFd>,
    /// The mount point's path, for messages.
    shown: PathBuf,
    log: LogSummary,
    mounted: bool,
}

impl Testbed {
    /// Starts the write log of the testbed's emulated disk, holding at most `limit` bytes of
    /// data. The runner admits crash points only where this holds (`runner::crash_admissible`
    /// says why to the user): an emulated disk, and no external journal, whose device would
    /// not lose power with it.
    pub fn start_crash_log(&mut self, limit: u64) -> Result<()> {
        if self.journal_device.is_some() {
            bail!("crash points on a testbed with an external journal");
        }
        self.emulated
            .main
            .as_mut()
            .context("the testbed has no emulated disk")?
            .start_log(limit)
    }

    /// Unmounts the filesystem and prepares its crash states.
    pub fn crash_states(&mut self) -> Result<CrashStates<'_>> {
        if self.mounted {
            self.unmount()?;
        }
        let disk = self
            .emulated
            .main
            .as_mut()
            .context("the testbed has no emulated disk")?;
        let log = disk.log_summary()?;
        let dev = disk.attach_crash_loop()?;
        let home = self
            .home
            .clone()
            .context("the testbed's directory is not open")?;
        let home_path = self
            .mountpoint
            .parent()
            .map(PathBuf::from)
            .context("the testbed's mount point has no parent")?;
        self.make_dir_in(&home, &home_path, "crash", 0o755)?;
        let shown = home_path.join("crash");
        self.ledger().record(Resource::Mount {
            target: shown.clone(),
            fsdev: None,
            backing: None,
        })?;
        Ok(CrashStates {
            tb: self,
            dev,
            home,
            shown,
            log,
            mounted: false,
        })
    }
}

impl CrashStates<'_> {
    /// The write log: its requests and the cuts it offers.
    pub fn log(&self) -> &LogSummary {
        &self.log
    }

    /// The testbed the states are of.
    pub fn testbed(&self) -> &Testbed {
        self.tb
    }

    /// Sets the crash state just after request `cut`, with the cache as `cache` says (seeded).
    pub fn build(&mut self, cut: u64, cache: CrashCache, seed: u64) -> Result<CrashStateInfo> {
        if self.mounted {
            self.unmount()?;
        }
        self.disk()?.set_crash_state(cut, cache, seed)
    }

    /// Mounts the state (the journal replays). The path reaches the mount through the held
    /// directory. An error is the kernel refusing the state: a finding, for the caller to class.
    pub fn mount(&mut self) -> Result<PathBuf> {
        let target = self.target();
        let fs = self.tb.spec.fs;
        crashcheck::mount_crash_state(fs, &self.dev, &target, &self.tb.mount_opts)
            .with_context(|| format!("mounting the crash state on {}", self.shown.display()))?;
        self.mounted = true;
        Ok(target)
    }

    /// Unmounts the state.
    pub fn unmount(&mut self) -> Result<()> {
        if self.mounted {
            crashcheck::unmount_crash_state(&self.target()).with_context(|| {
                format!("unmounting the crash state on {}", self.shown.display())
            })?;
            self.mounted = false;
        }
        Ok(())
    }

    /// Unmounts the state and runs the filesystem's read-only checker on it.
    pub fn check(&mut self) -> Result<CheckerOutcome> {
        self.unmount()?;
        crashcheck::run_checker(self.tb.spec.fs, &self.dev, None)
    }

    /// Ends the session: the state unmounted, the testbed's filesystem mounted again.
    pub fn finish(mut self) -> Result<()> {
        self.unmount()?;
        self.tb.mount()
    }

    /// The mount point, reached through the held testbed directory.
    fn target(&self) -> PathBuf {
        sys_trust::fd_path(self.home.as_fd(), "crash")
    }

    fn disk(&mut self) -> Result<&mut super::EmulatedDevice> {
        self.tb
            .emulated
            .main
            .as_mut()
            .context("the testbed has no emulated disk")
    }
}

impl Drop for CrashStates<'_> {
    fn drop(&mut self) {
        if self.mounted {
            let _ = self.unmount();
        }
    }
}
