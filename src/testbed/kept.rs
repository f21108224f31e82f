//! A testbed and the aged-image cache ([`super::images`]): building one from a kept image
//! (a copy of it in place of mkfs, or a device server serving it as a copy-on-write overlay)
//! and keeping one's filesystem as an image.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;

use anyhow::{Context, Result};

use super::device::{self, EmulatedDevice};
use super::images::{self, Copied, Entry, ImageKey, Kept};
use super::{sys_trust, Testbed};
use crate::results::AgedStart;

/// The kept image a testbed is built from: its path (for messages), the descriptor its entry
/// was checked through (what is copied or served: never opened again by path), and what the
/// copy did once it is made.
#[derive(Debug)]
pub(super) struct Base {
    path: PathBuf,
    file: std::sync::Arc<File>,
    copied: Option<Copied>,
}

impl Base {
    pub(super) fn of(e: &Entry) -> Self {
        Base {
            path: e.image.clone(),
            file: e.file.clone(),
            copied: None,
        }
    }
}

/// The profile that serves an overlay start of a plain testbed (one without
/// `--device-model`): answers at once, at the server's own cost.
const PLAIN_OVERLAY_PROFILE: &str = "ram";

impl Testbed {
    /// The kept image this testbed starts from as an overlay over it, if it does (see
    /// [`super::TestbedSpec::overlay_start`]).
    pub(super) fn overlay_base(&self) -> Option<PathBuf> {
        let base = self.kept_base.as_ref()?;
        self.spec.overlay_start().then(|| base.path.clone())
    }

    /// Starts the device server that serves the kept image `base` as a copy-on-write
    /// overlay: opened read-only here, and by the server through this process's descriptor;
    /// it never writes it, every write stays in its memory. The testbed has no image of its
    /// own. Its disk is the `--device-model`'s, or a `ram` disk on a plain testbed.
    pub(super) fn serve_overlay(&mut self, base: &std::path::Path) -> Result<EmulatedDevice> {
        let f = self
            .kept_base
            .as_ref()
            .context("the testbed is not built from a kept image")?
            .file
            .try_clone()
            .with_context(|| format!("duplicating the descriptor of {}", base.display()))?;
        let disk = self
            .spec
            .overlay_disk(&device::ProfileRef::new(PLAIN_OVERLAY_PROFILE)?);
        // For messages that name the disk's image.
        self.emulated.main_image = Some(base.to_path_buf());
        let disk = self.serve(f, disk, "")?;
        if let Some(b) = self.kept_base.as_mut() {
            // Served as it is: its digest is the one taken when it was kept.
            b.copied = Some(Copied {
                written: 0,
                digest: String::new(),
            });
        }
        Ok(disk)
    }

    /// Builds a testbed of `spec` from the kept image `entry`, then runs `then` on it (e.g.
    /// loading an overlay), and says how its starting state was made: from the image, or
    /// from it as an overlay, in the seconds both took, with the digest taken when it was
    /// kept (a kernel copy of the kept bytes, or the kept bytes served as they are).
    pub fn start_from_kept<T>(
        spec: &super::TestbedSpec,
        entry: &Entry,
        then: impl FnOnce(&Testbed) -> Result<T>,
    ) -> Result<(Testbed, T, AgedStart)> {
        let t0 = std::time::Instant::now();
        let t = Testbed::create_from_image(spec, entry)?;
        let more = then(&t)?;
        let start = AgedStart {
            key: entry.manifest.key.clone(),
            from: if spec.overlay_start() {
                AgedStart::OVERLAY.into()
            } else {
                "image".into()
            },
            seconds: t0.elapsed().as_secs_f64(),
            digest: entry.manifest.digest.clone(),
        };
        Ok((t, more, start))
    }

    /// Loads every chunk of the kept image into the overlay's memory when this testbed is an
    /// overlay over one (else does nothing): reads its whole device once with direct I/O,
    /// outside any phase (the emulated disk's model is off then), so that no measured request
    /// pays for a chunk's first load, which the server counts as its lateness. Returns the
    /// bytes read.
    pub fn load_overlay(&self) -> Result<u64> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        if self.overlay_base().is_none() {
            return Ok(0);
        }
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.device)
            .with_context(|| format!("opening {} with O_DIRECT", self.device.display()))?;
        let mut buf = crate::base::sys::AlignedBuf::zeroed(1 << 20);
        let mut at = 0u64;
        while at < self.spec.size {
            let n = (self.spec.size - at).min(buf.len() as u64) as usize;
            let got = dev.read_at(&mut buf[..n], at).with_context(|| {
                format!(
                    "loading the kept image's chunks: reading {} at {at}",
                    self.device.display()
                )
            })?;
            if got == 0 {
                break;
            }
            at += got as u64;
        }
        Ok(at)
    }

    /// Copies the kept image this testbed is built from, if any, into its new image `f`
    /// (before a loop device or an emulated disk's server reads it).
    pub(super) fn copy_base(&mut self, f: &File) -> Result<()> {
        let Some(base) = &self.kept_base else {
            return Ok(());
        };
        let what = format!("copying the kept image {}", base.path.display());
        let written = images::copy_data(&base.file, self.spec.size, f, &what)?;
        if let Some(b) = self.kept_base.as_mut() {
            // The kernel copied the kept bytes exactly: their digest is the one taken when
            // they were kept (the caller has it from the entry's manifest).
            b.copied = Some(Copied {
                written,
                digest: String::new(),
            });
        }
        Ok(())
    }

    /// What the copy of the kept image this testbed was built from did (its digest), when it
    /// was built from one.
    pub fn started_from(&self) -> Option<&Copied> {
        self.kept_base.as_ref().and_then(|b| b.copied.as_ref())
    }

    /// [`Testbed::keep_image`] while the run directories on the testbed let go of it
    /// ([`super::across_remount`]), aged in `seconds`: how the run's starting state was made.
    pub fn keep_aged(&mut self, key: &ImageKey, kept: Kept, seconds: f64) -> Result<AgedStart> {
        let (mp, reach) = (self.mountpoint().to_path_buf(), self.reach());
        let mut copied = None;
        super::across_remount(&mp, &reach, || {
            copied = Some(self.keep_image(key, kept)?.1);
            Ok(())
        })?;
        Ok(AgedStart {
            key: key.key.clone(),
            from: "aged".into(),
            seconds,
            digest: copied.map(|c| c.digest).unwrap_or_default(),
        })
    }

    /// Keeps the filesystem as it is now in the image cache as entry `key`: unmounted (so
    /// the image is consistent), copied, and mounted again.
    pub fn keep_image(&mut self, key: &ImageKey, kept: Kept) -> Result<(Entry, Copied)> {
        if self.mounted {
            self.unmount()?;
        }
        // An emulated disk's bytes are in its server: read through its device, at native speed.
        let src = match self.emulated.main.as_mut() {
            Some(disk) => {
                disk.set_modelled(false)?;
                File::open(&self.device)
                    .with_context(|| format!("opening {}", self.device.display()))?
            }
            None => {
                let home = self
                    .home
                    .as_ref()
                    .context("the testbed's directory is not open")?;
                let path = sys_trust::fd_path(home.as_fd(), "fs.img");
                File::open(&path).with_context(|| format!("opening {}", path.display()))?
            }
        };
        let kept = images::save(key, &src, self.spec.size, kept);
        drop(src);
        let always = self
            .spec
            .device_model
            .as_ref()
            .is_some_and(|m| m.during == super::device::ModelDuring::Always);
        if let (Some(disk), true) = (self.emulated.main.as_mut(), always) {
            disk.set_modelled(true)?;
        }
        self.mount()?;
        kept
    }
}
