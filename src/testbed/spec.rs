//! What a testbed is made of, validated: the filesystem kind and its tools, the size, mkfs and
//! mount options, an optional external journal, the backing (image file or RAM) or a real device.

pub use crate::host::workdir::{default_workdir, Backing};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::device::server::{DiskSettings, Misfit, Serving, StoreChoice, TransportChoice};
use super::device::{ModelDuring, ProfileRef};
use crate::base::error::{bad_input, bad_param};
use crate::base::sys::proc::find_program;
use crate::base::units::{format_size, parse_size};

crate::choice! {
    /// A filesystem fsgauge can build. One place knows each kind's tools and limits.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum FsKind("filesystem") {
        Ext2 = "ext2",
        Ext3 = "ext3",
        Ext4 = "ext4",
        Xfs = "xfs",
        Btrfs = "btrfs",
    }
}

impl FsKind {
    /// The mkfs program, as installed by the package [`FsKind::package`].
    pub fn mkfs_program(self) -> &'static str {
        match self {
            Self::Ext2 => "mkfs.ext2",
            Self::Ext3 => "mkfs.ext3",
            Self::Ext4 => "mkfs.ext4",
            Self::Xfs => "mkfs.xfs",
            Self::Btrfs => "mkfs.btrfs",
        }
    }

    /// The Debian package that installs the mkfs program.
    pub fn package(self) -> &'static str {
        match self {
            Self::Ext2 | Self::Ext3 | Self::Ext4 => "e2fsprogs",
            Self::Xfs => "xfsprogs",
            Self::Btrfs => "btrfs-progs",
        }
    }

    /// The smallest size the mkfs of this kind accepts with its default options.
    pub fn min_size(self) -> u64 {
        match self {
            Self::Ext2 | Self::Ext3 | Self::Ext4 => 2 << 20,
            Self::Xfs => 300 << 20,
            Self::Btrfs => 128 << 20,
        }
    }

    pub fn is_ext(self) -> bool {
        matches!(self, Self::Ext2 | Self::Ext3 | Self::Ext4)
    }

    /// Whether the journal can live on its own device (ext3/ext4 journal_dev, xfs logdev).
    pub fn supports_external_journal(self) -> bool {
        matches!(self, Self::Ext3 | Self::Ext4 | Self::Xfs)
    }

    /// Full path of the mkfs program if it is installed.
    pub fn find_mkfs(self) -> Option<PathBuf> {
        find_program(self.mkfs_program())
    }
}

crate::choice! {
    /// How an image file's blocks are allocated on the host.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ImageAlloc("image allocation") {
        /// All of them before mkfs (fallocate), so the host's allocator never runs in a
        /// measured phase.
        #[default]
        Full = "full",
        /// Only what is written, when it is written: an image the size of a whole drive
        /// takes on the host what mkfs and the workload write.
        Sparse = "sparse",
    }
}

crate::choice! {
    /// How a testbed built from a kept aged image starts (see `testbed::images`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ImageStart("image start") {
        /// From its own copy of the image (the kernel's copy_file_range), under a loop device
        /// or the emulated disk's server.
        Copy = "copy",
        /// Served by a device server as a copy-on-write overlay over the kept image, which
        /// is never written: on a plain testbed the server has the `ram` profile.
        Overlay = "overlay",
    }
}

/// An external journal (ext3/ext4 journal device, xfs log device) and where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalSpec {
    pub backing: Backing,
    pub size: u64,
}

impl FromStr for JournalSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, size) = s.split_once(':').ok_or_else(|| {
            format!("journal {s:?} is not of the form ram:SIZE or file:SIZE (e.g. ram:64M)")
        })?;
        let backing: Backing = kind.parse().map_err(|_| {
            format!(
                "journal {s:?}: unknown place {:?}; use ram:SIZE or file:SIZE",
                kind.trim()
            )
        })?;
        let size = parse_size(size).map_err(|e| format!("journal {s:?}: {e}"))?;
        if size < (1 << 20) {
            return Err(format!(
                "journal {s:?} is smaller than 1M; no filesystem takes one that small (ext3/ext4: 1024 filesystem blocks, 4M with the default 4K blocks; xfs: 64M)"
            ));
        }
        Ok(Self { backing, size })
    }
}

impl fmt::Display for JournalSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backing, format_size(self.size))
    }
}

/// Everything needed to build one testbed. Validated by [`TestbedSpec::validate`] before
/// anything is created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestbedSpec {
    /// Short name used in tables and result file names.
    pub label: String,
    pub fs: FsKind,
    /// Size of the filesystem in bytes (the image size).
    pub size: u64,
    /// Extra mkfs arguments, split as a shell would split them.
    pub mkfs_opts: Vec<String>,
    /// Mount options, comma separated, as `mount -o` takes them.
    pub mount_opts: String,
    pub journal: Option<JournalSpec>,
    pub backing: Backing,
    /// How the image's blocks are allocated on the host (results before it: full).
    #[serde(default)]
    pub image_alloc: ImageAlloc,
    /// Directory for images and mount points.
    pub workdir: PathBuf,
    /// Loop devices do direct I/O on their backing file (the default).
    pub loop_direct_io: bool,
    /// Format this block device instead of an image (needs `destroy_data`).
    pub device: Option<PathBuf>,
    /// Serve the image through an emulated disk (`--device-model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_model: Option<ModelSpec>,
    /// Serve the external journal's image through an emulated disk of this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_device_model: Option<ProfileRef>,
    /// How a start from a kept aged image is made (None: an overlay on an emulated disk, a
    /// copy on a plain testbed; see [`TestbedSpec::overlay_start`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_start: Option<ImageStart>,
    /// How its emulated disks are served: their transport and store (None: the defaults).
    /// How a disk is served, not what it is: not part of what defines a run (its spec hash),
    /// so neither is written.
    #[serde(skip)]
    pub device_transport: Option<TransportChoice>,
    #[serde(skip)]
    pub device_store: Option<StoreChoice>,
}

/// An image served through an emulated disk: the profile (with ablations), where the
/// filesystem sits on the modelled disk, and when the model applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub profile: ProfileRef,
    /// Bytes from the modelled disk's start to the filesystem's first byte.
    pub offset: u64,
    pub during: ModelDuring,
}

/// What mkfs writes to a sparse image, as [`TestbedSpec::image_room`] counts it (besides the
/// inode tables it zeroes on a plain loop device).
pub const SPARSE_MKFS: u64 = 1 << 30;

/// A testbed as the flags or a plan's `[[testbed]]` give it, before defaults are filled in.
#[derive(Debug, Clone)]
pub struct TestbedInput {
    pub fs: FsKind,
    pub size: u64,
    /// mkfs arguments as one string of words (`"-O ^extent -I 256"`).
    pub mkfs: String,
    pub mount: String,
    pub journal: Option<JournalSpec>,
    pub backing: Backing,
    pub image_alloc: ImageAlloc,
    /// Where images go; [`default_workdir`] of the backing when absent.
    pub workdir: Option<PathBuf>,
    pub loop_direct_io: bool,
    pub device_model: Option<ModelSpec>,
    pub journal_device_model: Option<ProfileRef>,
    pub image_start: Option<ImageStart>,
    /// How its emulated disks are served (the environment's fallback already applied).
    pub serving: Serving,
    pub device: Option<PathBuf>,
    /// The label; the filesystem kind when absent.
    pub label: Option<String>,
}

/// The real path of a `--device`, reached as every user-named path is (another user's link
/// leads only to what that user owns): mkfs must format the device the user named, not one a
/// link planted on the way points at.
fn resolve_device(dev: &Path) -> anyhow::Result<PathBuf> {
    let c = crate::base::sys::chase::chase(dev, crate::base::sys::chase::Opts::FOLLOW)
        .map_err(|e| bad_param("device", format!("--device {}: {e:#}", dev.display())))?;
    match (c.rest.len(), c.st) {
        (1, Some(_)) => Ok(c.path()),
        (0, _) => Err(bad_param(
            "device",
            format!(
                "--device {} is a directory, not a block device",
                dev.display()
            ),
        )),
        _ => Err(bad_param(
            "device",
            format!("--device {} does not exist", dev.display()),
        )),
    }
}

impl TestbedSpec {
    /// The one way a spec is made from what a user wrote (flags or a plan): defaults filled in
    /// and validated. Errors are [`crate::base::error::BadInput`] naming the field at fault (its plan
    /// name: `size`, `mkfs`, `journal`, `label`).
    pub fn build(i: TestbedInput) -> anyhow::Result<Self> {
        let mkfs_opts =
            split_words(&i.mkfs).map_err(|e| bad_param("mkfs", format!("--mkfs-opts: {e}")))?;
        // A --device is formatted whole: its size is the testbed's, known before anything is
        // made, so that every check of room is made against it (one that cannot be read is
        // reported by the preflight).
        let device = i.device.as_deref().map(resolve_device).transpose()?;
        let size = device
            .as_deref()
            .and_then(|d| super::device_size(d).ok())
            .unwrap_or(i.size);
        let spec = TestbedSpec {
            label: i.label.unwrap_or_else(|| i.fs.name().to_string()),
            fs: i.fs,
            size,
            mkfs_opts,
            mount_opts: i.mount,
            journal: i.journal,
            backing: i.backing,
            image_alloc: i.image_alloc,
            workdir: i.workdir.unwrap_or_else(|| default_workdir(i.backing)),
            loop_direct_io: i.loop_direct_io,
            device,
            device_model: i.device_model,
            journal_device_model: i.journal_device_model,
            image_start: i.image_start,
            device_transport: i.serving.transport,
            device_store: i.serving.store,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The room the image takes on the host for a workload that writes about `written` bytes:
    /// its size when it is allocated in full; when sparse, twice what is written (the
    /// estimate leaves out the filesystem's own metadata) and 1G for what mkfs writes, at
    /// most its size.
    /// On a plain loop device, mkfs's zeroing of the inode tables (ext4: 1/64 of the size)
    /// is allocated too; an emulated disk punches it out (see the device server).
    pub fn image_room(&self, written: u64) -> u64 {
        match self.image_alloc {
            ImageAlloc::Full => self.size,
            ImageAlloc::Sparse => written
                .saturating_mul(2)
                .saturating_add(self.zeroed_room())
                .saturating_add(SPARSE_MKFS)
                .min(self.size),
        }
    }

    /// What mkfs's zeroing of the inode tables (ext4: 1/64 of the size) allocates of a sparse
    /// image, counted as 1/50: on a plain loop device all of it, on an emulated disk nothing
    /// (its server punches the zeroed ranges out).
    pub fn zeroed_room(&self) -> u64 {
        if self.device_model.is_some() {
            0
        } else {
            self.size / 50
        }
    }

    /// A spec with defaults for everything but the kind and size.
    pub fn new(fs: FsKind, size: u64) -> Self {
        Self {
            label: fs.name().to_string(),
            fs,
            size,
            mkfs_opts: Vec::new(),
            mount_opts: String::new(),
            journal: None,
            backing: Backing::File,
            image_alloc: ImageAlloc::Full,
            workdir: default_workdir(Backing::File),
            loop_direct_io: true,
            device: None,
            device_model: None,
            journal_device_model: None,
            image_start: None,
            device_transport: None,
            device_store: None,
        }
    }

    /// How its emulated disks are served: their transport and store.
    fn serving(&self) -> Serving {
        Serving {
            transport: self.device_transport,
            store: self.device_store,
        }
    }

    /// The emulated disk under the filesystem (`--device-model`), as the device wing takes
    /// it: its profile, the filesystem's place on it, how it is served, and whether the model
    /// applies from the start (`device_model_during`).
    pub fn disk(&self) -> Option<DiskSettings> {
        let m = self.device_model.as_ref()?;
        Some(self.disk_of(m.profile.clone(), self.size, m.offset))
    }

    /// The emulated disk of the external journal (`--journal-device-model`): at the start of
    /// its profile, modelled when the main disk's model applies.
    pub fn journal_disk(&self) -> Option<DiskSettings> {
        let (p, j) = (self.journal_device_model.as_ref()?, self.journal.as_ref()?);
        Some(self.disk_of(p.clone(), j.size, 0))
    }

    /// The disk that serves a kept image as a copy-on-write overlay under the filesystem:
    /// the `--device-model`'s, or `plain` (a `ram` disk) on a plain testbed.
    /// The plain testbed's disk is modelled from the start (`ram` answers at once anyway).
    pub fn overlay_disk(&self, plain: &ProfileRef) -> DiskSettings {
        let disk = self.disk().unwrap_or_else(|| {
            DiskSettings::new(plain.clone(), self.size, 0).served(self.serving())
        });
        DiskSettings {
            overlay: true,
            ..disk
        }
    }

    /// A disk of `profile` serving `size` bytes at `offset`, served and modelled as this
    /// testbed's disks are.
    fn disk_of(&self, profile: ProfileRef, size: u64, offset: u64) -> DiskSettings {
        let during = self
            .device_model
            .as_ref()
            .map_or_else(ModelDuring::default, |m| m.during);
        DiskSettings {
            modelled: during == ModelDuring::Always,
            ..DiskSettings::new(profile, size, offset).served(self.serving())
        }
    }

    /// Whether a start from a kept image is served as an overlay over it (the default on an
    /// emulated disk, `--image-start overlay` on a plain testbed) rather than from a copy.
    pub fn overlay_start(&self) -> bool {
        match self.image_start {
            Some(s) => s == ImageStart::Overlay,
            None => self.device_model.is_some(),
        }
    }

    /// The smallest external journal the filesystem's mkfs accepts, and why (for messages).
    ///
    /// - ext3/ext4: `mke2fs -O journal_dev` refuses fewer than 1024 blocks of the journal's
    ///   block size ("Journal must be at least 1024 blocks", e2fsprogs 1.47.0), and the kernel's
    ///   JBD2 refuses to mount one whose journal area, after the superblocks in the device's
    ///   first 4K, is under 1024 blocks ("JBD2: Journal too short (blocks 2-1024)" for a 4M
    ///   device at 4K blocks). Tried on kernel 6.x with fsgauge's own testbed: 4M fails and
    ///   4100K mounts at `-b 4096`; 2050K fails and 2052K mounts at `-b 2048`; 1027K fails and
    ///   1028K mounts at `-b 1024`. So: 1024 blocks plus 4K. fsgauge makes the journal device
    ///   with the filesystem's block size: `-b` of --mkfs-opts, else 4096.
    /// - xfs: mkfs.xfs (xfsprogs 6.1.0) refuses an external log under 64M ("Log size must be at
    ///   least 64MB"; 4M: "must be at least 1368 blocks"), and takes 64M.
    pub fn journal_min(&self) -> anyhow::Result<(u64, String)> {
        if self.fs.is_ext() {
            let block = self.ext_block_size()?;
            return Ok((
                1024 * block + 4096,
                format!(
                    "an {} external journal must hold 1024 blocks of {} bytes after its first 4K, {} in all (the minimum of mke2fs and of the kernel's JBD2)",
                    self.fs,
                    block,
                    format_size(1024 * block + 4096)
                ),
            ));
        }
        Ok((
            64 << 20,
            format!(
                "an {} external log must be at least 64M (mkfs.xfs's minimum)",
                self.fs
            ),
        ))
    }

    /// The block size `-b N` (or `-bN`) of --mkfs-opts for ext filesystems, else 4096 (what
    /// fsgauge passes to mke2fs when the user gives none).
    fn ext_block_size(&self) -> anyhow::Result<u64> {
        let mut it = self.mkfs_opts.iter();
        while let Some(o) = it.next() {
            let v = match o.strip_prefix("-b") {
                Some("") => it.next().map(String::as_str),
                Some(v) => Some(v),
                None => continue,
            };
            return match v.and_then(|v| v.parse::<u64>().ok()) {
                Some(b @ (1024 | 2048 | 4096 | 8192 | 16384 | 32768 | 65536)) => Ok(b),
                _ => Err(bad_input(format!(
                    "--mkfs-opts -b {}: not a block size mke2fs takes; use 1024, 2048 or 4096",
                    v.unwrap_or("")
                ))),
            };
        }
        Ok(4096)
    }

    /// Checks what can be checked without touching the machine's devices: sizes, combinations,
    /// option syntax. Errors are [`crate::base::error::BadInput`].
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.device.is_none() && self.size < self.fs.min_size() {
            return Err(bad_param(
                "size",
                format!(
                    "--fs-size {} is too small for {}: {} needs at least {} (mkfs refuses smaller)",
                    format_size(self.size),
                    self.fs,
                    self.fs.mkfs_program(),
                    format_size(self.fs.min_size())
                ),
            ));
        }
        if let Some(j) = &self.journal {
            if !self.fs.supports_external_journal() {
                return Err(bad_param(
                    "journal",
                    format!(
                        "--journal {j}: {} has no external journal; use ext3, ext4 or xfs",
                        self.fs
                    ),
                ));
            }
            let (min, why) = self.journal_min()?;
            if j.size < min {
                return Err(bad_param(
                    "journal",
                    format!(
                        "--journal {j} is too small: {why}; give --journal {}:{} or more",
                        j.backing,
                        format_size(min)
                    ),
                ));
            }
        }
        if self
            .mkfs_opts
            .iter()
            .any(|o| o == "-J" || o.starts_with("-Jdevice"))
            && self.journal.is_some()
        {
            return Err(bad_param(
                "mkfs",
                "--mkfs-opts has -J and --journal is given too; pass the journal size with --journal ram:SIZE|file:SIZE only",
            ));
        }
        self.validate_models()?;
        self.validate_image_start()?;
        // Testbed names begin with the label, and ledger names never begin with '.'.
        if self.label.is_empty()
            || self.label.starts_with('.')
            || !self
                .label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(bad_param(
                "label",
                format!(
                    "testbed label {:?} must be letters, digits, '-', '_' or '.', not starting with '.'",
                    self.label
                ),
            ));
        }
        Ok(())
    }

    /// An overlay start serves one image fsgauge kept through a device server: not a
    /// `--device`, not a testbed with an external journal.
    fn validate_image_start(&self) -> anyhow::Result<()> {
        if self.image_start != Some(ImageStart::Overlay) {
            return Ok(());
        }
        let why = if let Some(dev) = &self.device {
            format!(
                "--device {} is formatted and measured as it is",
                dev.display()
            )
        } else if let Some(j) = &self.journal {
            format!("--journal {j} puts the journal on a second image, which the image cache does not keep")
        } else {
            return Ok(());
        };
        Err(bad_param(
            "image_start",
            format!(
                "--image-start overlay serves a kept aged image through a device server, over one image file; {why}: leave out --image-start overlay (or use --image-start copy)"
            ),
        ))
    }

    /// The device model fits what it serves: an image (not a `--device`) on a loop device that
    /// does direct I/O, the filesystem at its offset within the modelled disk, and a journal
    /// for a journal's model.
    fn validate_models(&self) -> anyhow::Result<()> {
        if let Some(m) = &self.device_model {
            if let Some(dev) = &self.device {
                return Err(bad_param(
                    "device_model",
                    format!(
                        "--device-model {} serves an image through an emulated disk; --device {} is a real one, measured as it is: give one of them",
                        m.profile,
                        dev.display()
                    ),
                ));
            }
            if !self.loop_direct_io {
                return Err(bad_param(
                    "loop_direct_io",
                    format!(
                        "--loop-direct-io off: the emulated disk of --device-model {} needs its loop device to do direct I/O, so that every block request reaches the disk's model rather than the host's page cache; leave --loop-direct-io out (it is on by default), or drop --device-model",
                        m.profile
                    ),
                ));
            }
            let disk = self.disk().expect("a disk: it has a device model");
            disk.model().map_err(|misfit| match misfit {
                Misfit::Profile(e) => {
                    bad_param("device_model", format!("--device-model {}: {e}", m.profile))
                }
                Misfit::TooLarge => {
                    let profile = m.profile.profile();
                    bad_param(
                        "device_offset",
                        format!(
                            "the filesystem ({}) at --device-offset {} does not fit on {} ({}); make --device-offset or --fs-size smaller",
                            format_size(self.size),
                            format_size(m.offset),
                            profile.name,
                            format_size(profile.capacity_bytes)
                        ),
                    )
                }
            })?;
        }
        if let Some(p) = &self.journal_device_model {
            let Some(j) = &self.journal else {
                return Err(bad_param(
                    "journal_device_model",
                    format!(
                        "--journal-device-model {p} models the external journal's device, but there is none; add --journal ram:SIZE|file:SIZE or drop it"
                    ),
                ));
            };
            let disk = self
                .journal_disk()
                .expect("a disk: it has a journal's model");
            disk.model().map_err(|misfit| match misfit {
                Misfit::Profile(e) => bad_param(
                    "journal_device_model",
                    format!("--journal-device-model {p}: {e}"),
                ),
                Misfit::TooLarge => {
                    let profile = p.profile();
                    bad_param(
                        "journal_device_model",
                        format!(
                            "the journal ({}) does not fit on {} ({}); give a larger profile or a smaller --journal",
                            format_size(j.size),
                            profile.name,
                            format_size(profile.capacity_bytes)
                        ),
                    )
                }
            })?;
        }
        Ok(())
    }

    /// `ext4 2G -O ^extent data=writeback` — one line for tables and listings.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {}", self.fs, format_size(self.size));
        if !self.mkfs_opts.is_empty() {
            s.push_str(&format!(" mkfs[{}]", self.mkfs_opts.join(" ")));
        }
        if !self.mount_opts.is_empty() {
            s.push_str(&format!(" -o {}", self.mount_opts));
        }
        if let Some(j) = &self.journal {
            s.push_str(&format!(" journal={j}"));
        }
        if self.backing == Backing::Ram {
            s.push_str(" on ram");
        }
        if let Some(m) = &self.device_model {
            s.push_str(&format!(" disk={}", m.profile));
        }
        s
    }
}

/// Splits an option string the way a POSIX shell splits words (quotes and backslashes).
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(format!("unclosed ' in {text:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => cur.push(c),
                            None => return Err(format!("trailing \\ in {text:?}")),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(format!("unclosed \" in {text:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err(format!("trailing \\ in {text:?}")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_image_takes_what_is_written_and_a_full_one_its_size() {
        const G: u64 = 1 << 30;
        let mut spec = TestbedSpec::new(FsKind::Ext4, 465 * G);
        assert_eq!(spec.image_room(2 * G), 465 * G);
        spec.image_alloc = ImageAlloc::Sparse;
        // Twice the writes, 1G for mkfs, and the inode tables a plain loop device allocates.
        assert_eq!(spec.image_room(2 * G), 4 * G + G + 465 * G / 50);
        spec.device_model = Some(ModelSpec {
            profile: "st3500641as".parse().unwrap(),
            offset: 0,
            during: ModelDuring::Phases,
        });
        assert_eq!(spec.image_room(2 * G), 5 * G);
        // Never more than the image itself.
        assert_eq!(spec.image_room(u64::MAX), 465 * G);
        assert_eq!(TestbedSpec::new(FsKind::Ext4, G).image_room(0), G);
    }

    /// A testbed on an emulated disk, as a plan gives it: deskstar-7k250 without seeks, the
    /// filesystem 100G in, modelled in the measured phases, through /dev/fuse from a file
    /// store, with an external journal on a `ram` disk.
    fn on_a_disk() -> (TestbedSpec, ProfileRef) {
        let disk: ProfileRef = "deskstar-7k250:seek=off".parse().unwrap();
        let mut spec = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        spec.device_model = Some(ModelSpec {
            profile: disk.clone(),
            offset: 100 << 30,
            during: ModelDuring::Phases,
        });
        spec.journal = Some("file:64M".parse().unwrap());
        spec.journal_device_model = Some("ram".parse().unwrap());
        spec.device_transport = Some(TransportChoice::Dev);
        spec.device_store = Some(StoreChoice::File);
        (spec, disk)
    }

    #[test]
    fn a_testbed_loads_its_profiles_once_and_its_servers_each_once() {
        use crate::device::emulated::argv::server_argv;
        use crate::device::profile::LOADS;
        use crate::device::server::ServeArgs;
        use clap::{Args, FromArgMatches};
        let loads = || LOADS.with(|n| n.get());
        let start = loads();
        // As a flag or a plan key gives it.
        let (spec, disk) = on_a_disk();
        assert_eq!(
            loads() - start,
            2,
            "each reference is loaded as it is parsed"
        );
        spec.validate().unwrap();
        // What the testbed gives the device wing, and its server's argv.
        let serve = ServeArgs {
            disk: spec.disk().expect("a disk"),
            profile_hash: Some(disk.profile().fingerprint()),
            image: "/proc/1/fd/3".into(),
            mount: "/var/tmp/fsgauge/.fsgauge-0".into(),
        };
        assert_eq!(serve.disk.profile.profile().name, "deskstar-7k250");
        let argv = server_argv(&serve);
        assert_eq!(
            loads() - start,
            2,
            "validating and starting load nothing again"
        );
        // The server, in its own process, loads it once, as it parses its flags.
        let cmd = ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true));
        let parsed = ServeArgs::from_arg_matches(&cmd.get_matches_from(argv)).unwrap();
        assert_eq!(parsed.disk.profile.ablations().to_string(), "seek=off");
        assert_eq!(loads() - start, 3);
    }

    /// The testbed hands the device wing one value per disk, and the server decodes that same
    /// value: profile, offset, size, whether modelled from the start, overlay, transport and
    /// store, all as the spec says them.
    #[test]
    fn a_testbeds_disks_are_the_settings_their_servers_decode() {
        use crate::device::emulated::argv::server_argv;
        use crate::device::server::{DiskSettings, ServeArgs, Serving};
        use clap::{Args, FromArgMatches};
        let decoded = |d: &DiskSettings| {
            let serve = ServeArgs {
                disk: d.clone(),
                profile_hash: None,
                image: "/proc/1/fd/3".into(),
                mount: "/var/tmp/fsgauge/.fsgauge-0".into(),
            };
            let cmd = ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true));
            ServeArgs::from_arg_matches(&cmd.get_matches_from(server_argv(&serve)))
                .unwrap()
                .disk
        };
        let (mut spec, disk) = on_a_disk();
        let served = Serving {
            transport: Some(TransportChoice::Dev),
            store: Some(StoreChoice::File),
        };
        let main = spec.disk().expect("a disk");
        assert_eq!(
            main,
            DiskSettings {
                profile: disk.clone(),
                size: 1 << 30,
                offset: 100 << 30,
                modelled: false,
                overlay: false,
                serving: served,
            }
        );
        assert_eq!(decoded(&main), main);
        let journal = spec.journal_disk().expect("a journal's disk");
        assert_eq!(
            (journal.profile.as_str(), journal.size, journal.offset),
            ("ram", 64 << 20, 0)
        );
        assert_eq!((journal.modelled, journal.serving), (false, served));
        assert_eq!(decoded(&journal), journal);
        let plain: ProfileRef = "ram".parse().unwrap();
        let over = spec.overlay_disk(&plain);
        assert!(over.overlay && over.profile == disk && over.offset == 100 << 30);
        assert_eq!(decoded(&over), over);
        // Modelled from the start: every disk of the testbed, the journal's too.
        spec.device_model.as_mut().expect("a model").during = ModelDuring::Always;
        assert!(spec.disk().expect("a disk").modelled && spec.journal_disk().expect("j").modelled);
        // A plain testbed's overlay is a `ram` disk modelled from the start, served the same.
        let mut bare = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        bare.device_transport = Some(TransportChoice::Dev);
        assert_eq!(bare.disk(), None);
        let over = bare.overlay_disk(&plain);
        assert_eq!(
            (
                over.profile.as_str(),
                over.offset,
                over.modelled,
                over.overlay
            ),
            ("ram", 0, true, true)
        );
        assert_eq!(over.serving.transport, Some(TransportChoice::Dev));
    }

    /// Whether the filesystem fits on its disk is the rule the server applies too: the
    /// testbed refuses, at `device_offset` and in its own words, exactly the disks whose
    /// settings make no model.
    #[test]
    fn a_disk_too_small_is_refused_by_the_servers_rule_in_the_testbeds_words() {
        use crate::device::server::Misfit;
        let (mut spec, _) = on_a_disk();
        let cap = spec
            .disk()
            .expect("a disk")
            .profile
            .profile()
            .capacity_bytes;
        spec.device_model.as_mut().expect("a model").offset = cap - (1 << 30);
        spec.validate().expect("ends at the last byte");
        assert!(spec.disk().expect("a disk").model().is_ok());
        spec.device_model.as_mut().expect("a model").offset = cap - (1 << 30) + 4096;
        let e = spec.validate().expect_err("one block past the end");
        assert_eq!(
            spec.disk().expect("a disk").model().err(),
            Some(Misfit::TooLarge)
        );
        assert_eq!(crate::base::error::bad_field(&e), Some("device_offset"));
        assert_eq!(
            e.to_string(),
            "the filesystem (1G) at --device-offset 243150012K does not fit on deskstar-7k250 (244198584K); make --device-offset or --fs-size smaller"
        );
    }

    #[test]
    fn kinds_parse_and_name_their_package() {
        assert_eq!("ext4".parse::<FsKind>().unwrap(), FsKind::Ext4);
        assert_eq!("XFS".parse::<FsKind>().unwrap(), FsKind::Xfs);
        let err = "zfs".parse::<FsKind>().unwrap_err();
        assert!(err.contains("zfs") && err.contains("btrfs"), "{err}");
        assert_eq!(FsKind::Xfs.package(), "xfsprogs");
    }

    #[test]
    fn journal_specs() {
        let j: JournalSpec = "ram:64M".parse().unwrap();
        assert_eq!(
            j,
            JournalSpec {
                backing: Backing::Ram,
                size: 64 << 20
            }
        );
        assert_eq!(j.to_string(), "ram:64M");
        assert!("disk:64M".parse::<JournalSpec>().is_err());
        assert!("ram".parse::<JournalSpec>().is_err());
        assert!("ram:10QB".parse::<JournalSpec>().is_err());
    }

    #[test]
    fn validation_names_the_problem() {
        let mut s = TestbedSpec::new(FsKind::Xfs, 100 << 20);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("too small") && e.contains("300M"), "{e}");
        s.size = 1 << 30;
        s.validate().unwrap();
        let mut b = TestbedSpec::new(FsKind::Btrfs, 1 << 30);
        b.journal = Some("ram:64M".parse().unwrap());
        let e = b.validate().unwrap_err().to_string();
        assert!(e.contains("no external journal"), "{e}");
        let mut l = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        l.label = "a b".into();
        assert!(l.validate().is_err());
        // A testbed's ledger name starts with its label, and may not start with '.'.
        l.label = ".hidden".into();
        assert!(l.validate().is_err());
        // An emulated disk's loop device does direct I/O: off is refused, not overruled.
        let mut m = TestbedSpec::new(FsKind::Ext4, 1 << 30);
        m.device_model = Some(ModelSpec {
            profile: "ram".parse().expect("a profile"),
            offset: 0,
            during: ModelDuring::Phases,
        });
        m.validate().expect("direct I/O is the default");
        m.loop_direct_io = false;
        let e = m.validate().expect_err("off under a model");
        assert_eq!(crate::base::error::bad_field(&e), Some("loop_direct_io"));
        assert!(
            e.to_string().starts_with("--loop-direct-io off: the emulated disk of --device-model ram needs its loop device to do direct I/O"),
            "{e}"
        );
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words("-O ^extent  -J size=16").unwrap(),
            vec!["-O", "^extent", "-J", "size=16"]
        );
        assert_eq!(
            split_words("-L 'my label' x\\ y").unwrap(),
            vec!["-L", "my label", "x y"]
        );
        assert!(split_words("'open").is_err());
        assert!(split_words("").unwrap().is_empty());
    }
}
