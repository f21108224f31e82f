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

use super::device::writelog::{CrashStateInfo, LogSummary};
use super::fsck::{self, CheckerOutcome};
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

/// The write log's file in the testbed's directory, beside the image.
pub const WRITE_LOG_NAME: &str = "write.log";

/// Free space left to everything else on the filesystem holding the write log when its limit
/// is what fits there.
pub const WRITE_LOG_RESERVE: u64 = 256 << 20;

impl Testbed {
    /// The testbed's directory: its held descriptor and its path (the mount point's parent),
    /// where the crash log and the crash states are made.
    fn home_dir(&self) -> Result<(Arc<std::os::fd::OwnedFd>, PathBuf)> {
        let home = self
            .home
            .clone()
            .context("the testbed's directory is not open")?;
        let home_path = self
            .mountpoint
            .parent()
            .map(PathBuf::from)
            .context("the testbed's mount point has no parent")?;
        Ok((home, home_path))
    }

    /// Starts the write log of the testbed's emulated disk, kept in the file
    /// [`WRITE_LOG_NAME`] beside the image (made and recorded in the ledger the first time,
    /// removed with the testbed) and holding at most `limit` bytes of data and pre-images;
    /// without a limit, what fits in the free space of its filesystem less
    /// [`WRITE_LOG_RESERVE`]. A limit larger than that free space is refused. The runner
    /// admits crash points only where this holds (`runner::crash_admissible` says why to the
    /// user): an emulated disk, and no external journal, whose device would not lose power
    /// with it. Returns the limit.
    pub fn start_crash_log(&mut self, limit: Option<u64>) -> Result<u64> {
        if self.journal_device.is_some() {
            bail!("crash points on a testbed with an external journal");
        }
        let (home, home_path) = self.home_dir()?;
        if self.emulated.write_log.is_none() {
            let (f, made, id) = self.ledger().make_at(
                home.as_fd(),
                &home_path,
                WRITE_LOG_NAME,
                "write log ",
                sys_trust::create_file_at,
            )?;
            self.hold(made, &home, WRITE_LOG_NAME, id);
            self.emulated.write_log = Some(f);
        }
        let file = self
            .emulated
            .write_log
            .as_ref()
            .context("no write log file")?;
        // What the previous log of this testbed held is free again once it is emptied.
        file.set_len(0)
            .with_context(|| format!("emptying {}", home_path.join(WRITE_LOG_NAME).display()))?;
        let mut store = super::fault::BackingStore::of(home.as_fd(), &home_path);
        // On tmpfs its room is memory too.
        let reach = sys_trust::fd_path(home.as_fd(), "");
        store.free = super::room::free_space(&reach).map_or(store.free, |f| f.min(store.free));
        let limit = log_limit(limit, &store)?;
        let held = super::device::disk::held_path(file);
        self.emulated
            .main
            .as_mut()
            .context("the testbed has no emulated disk")?
            .start_log(limit, Some(&held))?;
        Ok(limit)
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
        let (home, home_path) = self.home_dir()?;
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

/// The write log's limit: `asked`, if the free space of `store` holds it, or all of that free
/// space less [`WRITE_LOG_RESERVE`].
fn log_limit(asked: Option<u64>, store: &super::fault::BackingStore) -> Result<u64> {
    match asked {
        Some(l) if l > store.free => Err(crate::base::error::bad_input(format!(
            "--crash-log-limit {}: the write log is kept beside the image, and {store}; give a smaller limit or free space there",
            crate::base::units::format_size(l)
        ))),
        Some(l) => Ok(l),
        None if store.free > 2 * WRITE_LOG_RESERVE => Ok(store.free - WRITE_LOG_RESERVE),
        None => Err(crate::base::error::bad_input(format!(
            "crash points keep the write log beside the image, and {store}: too little for a log; free space there or put --workdir on a larger filesystem"
        ))),
    }
}

impl CrashStates<'_> {
    /// The write log: its requests and the cuts it offers.
    pub fn log(&self) -> &LogSummary {
        &self.log
    }

    /// The peak resident memory of the disk's server so far, bytes.
    pub fn server_peak_memory(&mut self) -> Result<u64> {
        Ok(self.disk()?.server_peak_memory())
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
        fsck::mount_crash_state(fs, &self.dev, &target, &self.tb.mount_opts)
            .with_context(|| format!("mounting the crash state on {}", self.shown.display()))?;
        self.mounted = true;
        Ok(target)
    }

    /// Unmounts the state.
    pub fn unmount(&mut self) -> Result<()> {
        if self.mounted {
            fsck::unmount_crash_state(&self.target()).with_context(|| {
                format!("unmounting the crash state on {}", self.shown.display())
            })?;
            self.mounted = false;
        }
        Ok(())
    }

    /// Unmounts the state and runs the filesystem's read-only checker on it.
    pub fn check(&mut self) -> Result<CheckerOutcome> {
        self.unmount()?;
        fsck::run_checker(self.tb.spec.fs, &self.dev, None)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_log_limit_is_the_one_asked_where_it_fits_else_the_free_space_less_the_reserve() {
        let mut store = super::super::fault::BackingStore::at(std::path::Path::new("/"));
        store.free = 10 << 30;
        assert_eq!(log_limit(Some(1 << 30), &store).unwrap(), 1 << 30);
        assert_eq!(
            log_limit(None, &store).unwrap(),
            (10 << 30) - WRITE_LOG_RESERVE
        );
        let e = log_limit(Some(11 << 30), &store).unwrap_err();
        assert_eq!(crate::base::error::exit_code(&e), 2);
        assert!(e.to_string().contains("kept beside the image"), "{e}");
        store.free = WRITE_LOG_RESERVE;
        let e = log_limit(None, &store).unwrap_err();
        assert!(e.to_string().contains("too little for a log"), "{e}");
    }
}
