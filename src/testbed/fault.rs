//! Whose failure it is. A step that fails on a testbed may not be the filesystem's doing:
//!
//! - an emulated disk's server that died fails every request of its disk, so whatever ran
//!   on it then (mkfs, mount, aging, the syncfs before the model is switched on, a measured
//!   phase) fails with a bare I/O error. The server is named instead, with how it ended, and
//!   the run exits 1: the measured system failed.
//! - the filesystem holding the testbed's image (the backing store) can fill up, and then the
//!   image cannot grow and the testbed's writes fail. On a plain loop device that shows as a
//!   store with next to no room left; an emulated disk's server knows for certain (its write
//!   to the image failed with ENOSPC, see [`super::device::server`]). The store is named, with
//!   its filesystem and free space, and the run exits 2: the set-up failed, not the
//!   filesystem under test.
//!
//! Every set-up step of a testbed goes through [`Testbed::set_up`] (or, for steps the runner
//! makes, [`Testbed::after_set_up`]), and a measured run through the same checks after its
//! phases, so both are told apart the same way wherever they happen.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{EmulatedDevice, ImageAlloc, Testbed};
use crate::base::error::SystemFailure;
use crate::base::sys::trust as sys_trust;
use std::os::fd::AsFd;

/// A set-up step, for messages and the fault tests' stop points (`before-mkfs`, …; see
/// [`crate::base::signals::test_pause`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetUp {
    /// Starting the journal's emulated disk.
    Journal,
    /// Making the filesystem.
    Mkfs,
    /// Mounting it.
    Mount,
    /// Conditioning the filesystem before the workload (a plan's `[age]`).
    Conditioning,
    /// The syncfs that writes back what set-up left dirty before the model is switched on.
    Syncfs,
}

impl SetUp {
    /// The fault tests' stop point just before the step.
    pub fn point(self) -> &'static str {
        match self {
            SetUp::Journal => "before-journal",
            SetUp::Mkfs => "before-mkfs",
            SetUp::Mount => "before-mount",
            SetUp::Conditioning => "before-conditioning",
            SetUp::Syncfs => "before-syncfs",
        }
    }
}

impl fmt::Display for SetUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SetUp::Journal => "the set-up of the journal's emulated disk",
            SetUp::Mkfs => "mkfs",
            SetUp::Mount => "the mount",
            SetUp::Conditioning => "the conditioning (aging) before the workload",
            SetUp::Syncfs => "the syncfs before the device model is switched on",
        })
    }
}

impl Testbed {
    /// Runs the set-up step `step` (`f`), then tells whose failure it was (see
    /// [`Testbed::after_set_up`]).
    pub(super) fn set_up<T>(
        &mut self,
        step: SetUp,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        crate::base::signals::test_pause(step.point());
        let r = f(self);
        self.after_set_up(step, r)
    }

    /// After the set-up step `step` ended with `r`: an emulated disk whose server died fails
    /// it naming the server (exit 1), whatever `r` was (a write-back may have hidden the
    /// failure); a failure with the backing store full names the store (exit 2), as does a
    /// step that passed while the store refused the emulated disk's writes. Otherwise `r`.
    pub fn after_set_up<T>(&mut self, step: SetUp, r: Result<T>) -> Result<T> {
        if matches!(&r, Err(e) if crate::base::error::exit_code(e) >= 128) {
            return r;
        }
        let what = step.to_string();
        if let Err(dead) = self.check_devices_during(Some(&what)) {
            return Err(match r {
                Err(e) => anyhow::Error::new(SystemFailure(format!(
                    "{dead:#}; {what} failed with: {e:#}"
                ))),
                Ok(_) => dead,
            });
        }
        let full = match &r {
            Err(_) => self.backing_full(),
            Ok(_) => self.image_store_full(),
        };
        match (full, r) {
            (Some(full), Err(e)) => Err(anyhow::anyhow!("{full}; {what} failed with: {e:#}")),
            (Some(full), Ok(_)) => Err(anyhow::anyhow!("{full}; during {what}")),
            (None, r) => r,
        }
    }

    /// Ok while the emulated disks' servers run and answer; else an error naming the one
    /// that died (exit 1).
    pub fn check_devices(&mut self) -> Result<()> {
        self.check_devices_during(None)
    }

    fn check_devices_during(&mut self, step: Option<&str>) -> Result<()> {
        for d in [&mut self.emulated.main, &mut self.emulated.journal]
            .into_iter()
            .flatten()
        {
            d.check_during(step)?;
        }
        Ok(())
    }

    /// When a step failed, whether the cause is the host side: the filesystem holding the
    /// testbed's image (the backing store) has filled up, so the image could not grow. The
    /// message names the store, its filesystem and its free space.
    pub fn backing_full(&self) -> Option<String> {
        if let Some(full) = self.image_store_full() {
            return Some(full);
        }
        let lo = self.loopdev.as_ref()?;
        let image = self.mountpoint.parent()?.join("fs.img");
        let store = BackingStore::of(self.home.as_ref()?.as_fd(), image.parent()?);
        // A store with under 1 MiB free (or under 0.1% of itself) can no longer back writes.
        let full = store.free < (1 << 20) || store.free < store.total / 1000;
        full.then(|| self.store_full(&store, &image, &lo.path().display().to_string()))
    }

    /// Whether an emulated disk's server had writes to its image refused with ENOSPC: then
    /// the store under it is full, for certain.
    pub fn image_store_full(&self) -> Option<String> {
        let disks = [
            (&self.emulated.main, &self.emulated.main_image, ""),
            (
                &self.emulated.journal,
                &self.emulated.journal_image,
                "journal ",
            ),
        ];
        disks.into_iter().find_map(|(d, image, role)| {
            let (d, image) = (d.as_ref()?, image.as_ref()?);
            let (refused, budget) = d.image_full().ok().filter(|&(n, _)| n > 0)?;
            if budget > 0 {
                return Some(memory_full(d, role, refused, budget));
            }
            let dir = image.parent()?;
            // The testbed's own images are in its held directory; a RAM journal's is in
            // fsgauge's own RAM directory, which no one else can change.
            let store = match self.home.as_ref() {
                Some(home) if Some(dir) == self.mountpoint.parent() => {
                    BackingStore::of(home.as_fd(), dir)
                }
                _ => BackingStore::at(dir),
            };
            Some(self.store_full(&store, image, &emulated_disk(d, role, refused)))
        })
    }

    /// The message for a full backing store `store` under `image`, behind the device `behind`.
    fn store_full(&self, store: &BackingStore, image: &Path, behind: &str) -> String {
        let sparse = if self.spec.image_alloc == ImageAlloc::Sparse {
            ", or keep the image's room from the start (--image-alloc full)"
        } else {
            ""
        };
        format!(
            "the backing store is full: {store}, so the image {} behind {behind} could not grow and the testbed's writes failed (not the filesystem under test); free space there or put --workdir on a larger filesystem{sparse}",
            image.display()
        )
    }
}

/// The message for an emulated disk whose server held its bytes in memory and ran out of its
/// budget: the run wrote more than the machine can hold, not more than the filesystem can.
fn memory_full(d: &EmulatedDevice, role: &str, refused: u64, budget: u64) -> String {
    format!(
        "the emulated {role}disk {} holds its bytes in memory, and its server (pid {}) refused {refused} write{} for want of it: the run wrote more than its memory budget of {} (half of this machine's memory unless {store}=memory:SIZE sets it), so the testbed's writes failed (not the filesystem under test); make --fs-size or the workload smaller, or keep the disk's bytes on the host disk with {store}=file (its replies may then be late)",
        d.loop_device().unwrap_or(d.file()).display(),
        d.server_pid(),
        if refused == 1 { "" } else { "s" },
        format_size_human(budget),
        store = super::device::server::store::STORE_ENV,
    )
}

/// An emulated disk as a message names it: its loop device and its server.
fn emulated_disk(d: &EmulatedDevice, role: &str, refused: u64) -> String {
    format!(
        "the emulated {role}disk {} (its server, pid {}, had {refused} write{} to the image refused with ENOSPC)",
        d.loop_device().unwrap_or(d.file()).display(),
        d.server_pid(),
        if refused == 1 { "" } else { "s" }
    )
}

/// The filesystem an image file lives on, for messages: where, which filesystem, how full.
pub(super) struct BackingStore {
    dir: PathBuf,
    fs: String,
    pub(super) free: u64,
    total: u64,
}

impl BackingStore {
    /// The store of the held directory `fd`, shown as `dir` (its path is not looked up: it
    /// may lie in a directory another user can rename).
    pub(super) fn of(fd: std::os::fd::BorrowedFd<'_>, dir: &Path) -> Self {
        Self::from(
            nix::sys::statvfs::fstatvfs(fd),
            dir,
            crate::base::sys::proc::mount_of(&sys_trust::fd_path(fd, "")),
        )
    }

    /// The store of `dir` by its path: only for fsgauge's own directories, which no one else
    /// can change.
    pub(super) fn at(dir: &Path) -> Self {
        Self::from(
            nix::sys::statvfs::statvfs(dir),
            dir,
            crate::base::sys::proc::mount_of(dir),
        )
    }

    fn from(
        st: nix::Result<nix::sys::statvfs::Statvfs>,
        dir: &Path,
        mount: Option<(PathBuf, String, String)>,
    ) -> Self {
        let (free, total) = st
            .map(|st| {
                let space = crate::base::sys::statfs::Space::of(&st);
                (space.available, space.total)
            })
            .unwrap_or((0, 0));
        Self {
            dir: dir.to_path_buf(),
            fs: mount.map_or_else(|| "unknown".into(), |(_, t, _)| t),
            free,
            total,
        }
    }
}

impl fmt::Display for BackingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) has {} free of {}",
            self.dir.display(),
            self.fs,
            format_size_human(self.free),
            format_size_human(self.total)
        )
    }
}

pub(super) fn format_size_human(b: u64) -> String {
    crate::base::units::format_bytes_human(b as f64)
}
