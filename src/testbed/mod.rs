//! Testbeds: the filesystem under test, built by fsgauge itself (image → loop device → mkfs →
//! mount, with the options asked for) and torn down again, on success, on error and on signals.
//!
//! A testbed is owned: fsgauge only formats images it created, or a block device named with
//! `--device` together with `--destroy-data`, and never one that is in use. Every step that
//! changes the machine is written to the [`ledger`] first.
//!
//! # What a testbed trusts
//!
//! fsgauge runs as root on shared machines, so it trusts only places nobody else can change
//! (see [`crate::base::sys::trust`]):
//!
//! - Its own directories (`/var/tmp/fsgauge`, `/dev/shm/fsgauge`, the ledger) are made 0700 by
//!   root and never removed; an existing one owned by someone else or writable by others is
//!   refused with its owner, mode and what to do.
//! - A `--workdir` whose path is not root's all the way down (a directory owned by another
//!   user, or writable by others without the sticky bit) gets a private 0700 directory with
//!   an unpredictable name (`.fsgauge-…`), made with `mkdirat` on the opened work directory
//!   and checked on its descriptor; everything of the run lives in there.
//! - The testbed's directory, image and mount point are made exclusively (`mkdirat`,
//!   `O_CREAT|O_EXCL|O_NOFOLLOW`) in held directory descriptors. The loop device is attached
//!   from the image's own descriptor, mkfs gets the loop device, the filesystem is mounted on
//!   `/proc/self/fd/HOME/mnt` and checked (mount id, device) right after; teardown unmounts
//!   through the held home directory, detaches the loop through its own descriptor, and
//!   deletes with `unlinkat` on held directories, only while a name is still the inode made.
//!   Renaming any directory meanwhile can neither leak a mount or loop device nor redirect a
//!   delete.
//! - The ledger records identities (device and inode of each directory and image, the
//!   loop's backing file, the filesystem's device number), so `testbed cleanup` finds a
//!   killed run's mount in /proc/self/mountinfo and its loop device by LOOP_GET_STATUS64
//!   wherever they were renamed to, and acts only after checking them.
//!
//! The rule for the mount point handed to workloads by path: every directory on it from
//! fsgauge's trusted directory (its own, a trusted `--workdir`, or the private directory)
//! down is root's and not writable by others, so nobody can swap what the path names. Sticky
//! parents such as /var/tmp are fine: others cannot rename root's entries there. (The part of
//! the path above a user's own `--workdir` is theirs to change; only they are fooled by it.)

pub mod crashstate;
mod fault;
pub mod fsck;
pub mod images;
pub mod inodes;
mod kept;
mod mkfs;
pub mod params;
pub mod room;
pub mod shutdown;
mod spec;

use std::fs;

use crate::device;
use crate::host::{cache, ledger, locate, loopdev, memlimit, mount, rundir, unique_suffix};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

pub use crate::base::sys::proc::{meminfo, own_peak_rss, own_rss};
pub use cache::{drop_caches, syncfs};
pub use device::EmulatedDevice;
pub use fault::SetUp;
use fault::{format_size_human, BackingStore};
pub use ledger::{Ledger, LedgerEntry, Resource};
pub use loopdev::LoopDevice;
pub use memlimit::{leave_fsgauge_cgroups, CgroupVersion, MemCharger, MemLimit};
pub use mkfs::{mkfs_command, MkfsCommand};
pub use params::TestbedParams;
pub use rundir::{across_remount, RunDir};
pub use spec::{
    default_workdir, split_words, Backing, FsKind, ImageAlloc, ImageStart, JournalSpec,
    TestbedInput, TestbedSpec,
};

use crate::base::error::bad_input;
use crate::base::sys::trust::{self as sys_trust, FileId};
use crate::base::units::format_size;
use crate::results::TestbedInfo;

/// A built and mounted filesystem. Torn down on drop unless made persistent.
#[derive(Debug)]
pub struct Testbed {
    name: String,
    spec: TestbedSpec,
    mountpoint: PathBuf,
    device: PathBuf,
    journal_device: Option<PathBuf>,
    loopdev: Option<LoopDevice>,
    journal_loop: Option<LoopDevice>,
    mkfs_args: Vec<String>,
    mount_opts: String,
    ledger: Option<Ledger>,
    persistent: bool,
    mounted: bool,
    /// Images that could not be preallocated (they stay sparse), and why: warnings.
    sparse: Vec<String>,
    /// The directory holding the testbed's home, held open: the work directory when it is
    /// trusted, else a private directory made inside it.
    base: Option<Arc<OwnedFd>>,
    /// The testbed's own directory (`BASE/NAME`), held open: the image and the mount point
    /// live in it and are reached through it.
    home: Option<Arc<OwnedFd>>,
    /// The device number of the mounted filesystem's device.
    fsdev: u64,
    /// The device number files on the mounted filesystem report (btrfs: an anonymous one).
    mounted_dev: u64,
    /// What this process made, with the directory descriptor it is deleted through.
    held: Vec<Held>,
    /// The emulated disks serving the image and the journal (`--device-model`), with the
    /// images' descriptors their servers read through.
    emulated: Emulated,
    /// The kept image the filesystem was copied from instead of made by mkfs, and what the
    /// copy did (see [`images`]).
    kept_base: Option<kept::Base>,
}

/// A testbed's emulated disks (see [`device`]).
#[derive(Debug, Default)]
struct Emulated {
    main: Option<EmulatedDevice>,
    journal: Option<EmulatedDevice>,
    /// The images the servers open through `/proc/PID/fd/N`, held for as long as they run.
    images: Vec<fs::File>,
    /// The write log's file ([`crashstate::WRITE_LOG_NAME`]), held once made: the server
    /// opens it through `/proc/PID/fd/N`.
    write_log: Option<fs::File>,
    /// Where the disks' images are, for messages (a full backing store names them).
    main_image: Option<PathBuf>,
    journal_image: Option<PathBuf>,
}

/// Something made inside a held directory: deleted through that descriptor by name, and only
/// while the name still is the file made.
#[derive(Debug)]
struct Held {
    resource: Resource,
    dir: Arc<OwnedFd>,
    name: String,
    is_dir: bool,
    id: FileId,
}

/// Checks that everything the spec needs is installed and possible here, before anything is made.
pub fn preflight(spec: &TestbedSpec) -> Result<()> {
    spec.validate()?;
    check_workdir(&spec.workdir)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(bad_input(format!(
            "building a {} testbed needs root (loop devices, mkfs, mount); run as root, or use --dir PATH to measure an existing directory",
            spec.fs
        )));
    }
    if spec.fs.find_mkfs().is_none() {
        return Err(bad_input(format!(
            "{} is not installed; install the package {} (apt-get install {}) to build {} testbeds",
            spec.fs.mkfs_program(),
            spec.fs.package(),
            spec.fs.package(),
            spec.fs
        )));
    }
    if spec.journal.is_some()
        && spec.fs.is_ext()
        && crate::base::sys::proc::find_program("mke2fs").is_none()
    {
        return Err(bad_input("mke2fs is not installed; install e2fsprogs"));
    }
    if let Some(dev) = &spec.device {
        check_device_free(dev)?;
        // Its size is the testbed's (see TestbedSpec::build): the room checks used it.
        device_size(dev)?;
    } else {
        // A sparse image's share of what the workload writes was checked by the run's
        // admission; here what mkfs writes counts.
        room::check(spec, 0)?;
    }
    Ok(())
}

/// The work directory must be a directory, or be creatable as one: its nearest existing
/// ancestor must be a directory (not a regular file or something below one). A plan's
/// `workdir` is checked with this too, so that `--dry-run` refuses what the run would.
pub fn check_workdir(workdir: &Path) -> Result<()> {
    let base = room::nearest_existing(workdir);
    if !base.is_dir() {
        return Err(crate::base::error::bad_param("workdir", format!(
            "--workdir {}: {} is not a directory; give a directory for images and mount points (a missing one is created)",
            workdir.display(),
            base.display()
        )));
    }
    Ok(())
}

/// A block device given with `--device` must exist, be a block device, and be unused: the
/// kernel's exclusive open fails while it or one of its partitions is mounted or held.
fn check_device_free(dev: &Path) -> Result<()> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md =
        fs::metadata(dev).map_err(|e| bad_input(format!("--device {}: {e}", dev.display())))?;
    if !md.file_type().is_block_device() {
        return Err(bad_input(format!(
            "--device {} is not a block device",
            dev.display()
        )));
    }
    if let Some(mp) = mounted_at(md.rdev()) {
        return Err(bad_input(format!(
            "--device {} is mounted ({mp}); fsgauge never formats a mounted device or one whose partition is mounted",
            dev.display()
        )));
    }
    match fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(dev) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(bad_input(format!(
            "--device {} is in use (it or a partition of it is mounted, or held by another user such as LVM, RAID or swap); fsgauge never formats a device in use",
            dev.display()
        ))),
        Err(e) => Err(bad_input(format!("--device {}: {e}", dev.display()))),
    }
}

/// The size of the block device `dev` in bytes.
pub fn device_size(dev: &Path) -> Result<u64> {
    let f =
        fs::File::open(dev).map_err(|e| bad_input(format!("--device {}: {e}", dev.display())))?;
    loopdev::block_device_size(&f)
        .with_context(|| format!("reading the size of --device {}", dev.display()))
}

/// Where the device `devnum` or one of its partitions is mounted, if anywhere.
fn mounted_at(devnum: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (maj, min) = (libc::major(devnum), libc::minor(devnum));
    let mut nums = vec![format!("{maj}:{min}")];
    // Partitions are the subdirectories of the disk's sysfs directory that have a `partition` file.
    if let Ok(rd) = fs::read_dir(format!("/sys/dev/block/{maj}:{min}")) {
        for e in rd.filter_map(|e| e.ok()) {
            if e.path().join("partition").exists() {
                if let Ok(n) = fs::read_to_string(e.path().join("dev")) {
                    nums.push(n.trim().to_string());
                }
            }
        }
    }
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let hit = info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.len() > 4 && nums.iter().any(|n| n == f[2]))
            .then(|| format!("at {}", crate::base::sys::proc::unescape_mount_field(f[4])))
    });
    if hit.is_some() {
        return hit;
    }
    // Swap on the device counts as in use too.
    let swaps = fs::read_to_string("/proc/swaps").ok()?;
    swaps.lines().skip(1).find_map(|l| {
        let dev = l.split_whitespace().next()?;
        let md = fs::metadata(dev).ok()?;
        nums.contains(&format!(
            "{}:{}",
            libc::major(md.rdev()),
            libc::minor(md.rdev())
        ))
        .then(|| format!("as swap {dev}"))
    })
}

impl Testbed {
    /// Builds a testbed for one run; torn down on drop. The name is made unique.
    pub fn create(spec: &TestbedSpec) -> Result<Self> {
        let name = format!("{}-{}", spec.label, unique_suffix());
        Self::create_named(spec, &name, false)
    }

    /// Builds a testbed under a chosen name. A persistent one outlives the process (it is torn
    /// down by `testbed destroy NAME`).
    pub fn create_named(spec: &TestbedSpec, name: &str, persistent: bool) -> Result<Self> {
        Self::create_with(spec, name, persistent, None)
    }

    /// Builds a testbed for one run whose filesystem is a copy of the kept image `base` (of a
    /// testbed of the same spec) instead of a new one: no mkfs, the base is only read.
    pub fn create_from_image(spec: &TestbedSpec, base: &images::Entry) -> Result<Self> {
        let name = format!("{}-{}", spec.label, unique_suffix());
        Self::create_with(spec, &name, false, Some(base))
    }

    fn create_with(
        spec: &TestbedSpec,
        name: &str,
        persistent: bool,
        base: Option<&images::Entry>,
    ) -> Result<Self> {
        preflight(spec)?;
        crate::base::signals::check()?;
        let ledger = Ledger::begin(name, false)?;
        let mut tb = Testbed {
            name: name.to_string(),
            spec: spec.clone(),
            mountpoint: PathBuf::new(),
            device: PathBuf::new(),
            journal_device: None,
            loopdev: None,
            journal_loop: None,
            mkfs_args: Vec::new(),
            mount_opts: String::new(),
            ledger: Some(ledger),
            persistent: false,
            mounted: false,
            sparse: Vec::new(),
            base: None,
            home: None,
            fsdev: 0,
            mounted_dev: 0,
            held: Vec::new(),
            emulated: Emulated::default(),
            kept_base: base.map(kept::Base::of),
        };
        // On any error below, dropping `tb` releases what was made so far.
        tb.build()?;
        if persistent {
            tb.persistent = true;
            if let Some(l) = tb.ledger.as_mut() {
                l.set_persistent(true)?;
            }
        }
        Ok(tb)
    }

    fn ledger(&mut self) -> &mut Ledger {
        self.ledger
            .as_mut()
            .expect("the ledger lives as long as the testbed")
    }

    fn build(&mut self) -> Result<()> {
        let spec = self.spec.clone();
        let (base, base_path) = self.open_base()?;
        let home_path = base_path.join(&self.name);
        let home = self.make_dir_in(&base, &base_path, &self.name.clone(), 0o755)?;
        self.home = Some(home.clone());

        let backing_id = self.make_main(&home, &home_path)?;
        if let Some(j) = spec.journal {
            self.set_up(SetUp::Journal, |tb| tb.make_journal(j, &home, &home_path))?;
        }

        crate::base::signals::check()?;
        let cmd = mkfs_command(&spec, &self.device, self.journal_device.as_deref())?;
        // A copy of a kept image is the filesystem already: mkfs made it when it was aged.
        if self.kept_base.is_none() {
            self.set_up(SetUp::Mkfs, |_| cmd.run())?;
        }
        self.mkfs_args = cmd.main_args();

        self.make_dir_in(&home, &home_path, "mnt", 0o755)?;
        self.mountpoint = home_path.join("mnt");
        self.mount_opts = mkfs::mount_options(&spec, self.journal_device.as_deref());
        crate::base::signals::check()?;
        let (target, fsdev) = (self.mountpoint.clone(), self.fsdev);
        self.ledger().record(Resource::Mount {
            target,
            fsdev: Some(fsdev),
            backing: backing_id,
        })?;
        self.set_up(SetUp::Mount, Self::mount)?;
        crate::base::signals::test_pause("mount");
        let details = serde_json::json!({
            "fs": spec.fs.name(),
            "size": self.spec.size,
            "device": self.device,
            "journal_device": self.journal_device,
            "mountpoint": self.mountpoint,
            "mkfs_args": self.mkfs_args,
            "mount_options": self.mount_opts,
            "backing": spec.backing,
            "label": spec.label,
        });
        self.ledger().set_details(details)?;
        Ok(())
    }

    /// Makes the filesystem's device: the `--device`, an emulated disk's loop device, or a
    /// loop device on a new image (a copy of the kept image the testbed is built from, if
    /// any), or, for a start served as an overlay over a kept image, a device server on it.
    /// Returns the file behind the loop device, for the ledger's record of the mount.
    fn make_main(&mut self, home: &Arc<OwnedFd>, home_path: &Path) -> Result<Option<FileId>> {
        let spec = self.spec.clone();
        let prealloc = spec.backing == Backing::File && spec.image_alloc == ImageAlloc::Full;
        if let Some(dev) = &spec.device {
            self.device = dev.clone();
            // mkfs formats the whole device: that is the testbed's size.
            self.spec.size = device_size(dev)?;
            use std::os::unix::fs::MetadataExt;
            self.fsdev = fs::metadata(dev)
                .with_context(|| format!("--device {}", dev.display()))?
                .rdev();
            return Ok(None);
        }
        let disk = if let Some(base) = self.overlay_base() {
            self.serve_overlay(&base)?
        } else if let Some(disk) = spec.disk() {
            let (f, _) = self.make_image(home, home_path, "fs.img", spec.size, prealloc)?;
            self.copy_base(&f)?;
            self.emulated.main_image = Some(home_path.join("fs.img"));
            self.serve(f, disk, "")?
        } else {
            let made = self.make_image(home, home_path, "fs.img", spec.size, prealloc)?;
            self.copy_base(&made.0)?;
            let image = home_path.join("fs.img");
            let (lo, id) = self.make_loop(made, image, spec.loop_direct_io)?;
            self.device = lo.path().to_path_buf();
            self.fsdev = lo
                .rdev()
                .with_context(|| format!("reading the device number of {}", lo.path().display()))?;
            self.loopdev = Some(lo);
            return Ok(Some(id));
        };
        (self.device, self.fsdev) = disk_device(&disk)?;
        // The loop device's backing is the server's disk file, not the image under it.
        let backing = disk.backing();
        self.emulated.main = Some(disk);
        Ok(backing)
    }

    /// Makes the external journal's device: an image (on the RAM disk or beside the
    /// testbed's) under a loop device, or under its own emulated disk.
    fn make_journal(
        &mut self,
        j: JournalSpec,
        home: &Arc<OwnedFd>,
        home_path: &Path,
    ) -> Result<()> {
        let spec = self.spec.clone();
        let (dir, dir_path, name) = match j.backing {
            Backing::Ram => {
                let ram = default_workdir(Backing::Ram);
                let fd = sys_trust::own_dir(&ram)
                    .with_context(|| format!("the RAM journal's directory {}", ram.display()))?;
                (Arc::new(fd), ram, format!("{}-journal.img", self.name))
            }
            Backing::File => (
                home.clone(),
                home_path.to_path_buf(),
                "journal.img".to_string(),
            ),
        };
        if let Some(disk) = spec.journal_disk() {
            let (f, _) =
                self.make_image(&dir, &dir_path, &name, j.size, j.backing == Backing::File)?;
            let disk = self.serve(f, disk, "journal ")?;
            self.emulated.journal_image = Some(dir_path.join(&name));
            self.journal_device = Some(disk_device(&disk)?.0);
            self.emulated.journal = Some(disk);
        } else {
            // A RAM journal gains nothing from direct I/O on tmpfs.
            let dio = spec.loop_direct_io && j.backing == Backing::File;
            let made =
                self.make_image(&dir, &dir_path, &name, j.size, j.backing == Backing::File)?;
            let (lo, _) = self.make_loop(made, dir_path.join(&name), dio)?;
            self.journal_device = Some(lo.path().to_path_buf());
            self.journal_loop = Some(lo);
        }
        Ok(())
    }

    /// The directory the testbed's home is made in, held open, and its path. fsgauge's own
    /// work directories are made (0700) or refused as [`sys_trust::own_dir`] says. A user's
    /// `--workdir` (made when missing) is used as it is when trusted; otherwise a private
    /// directory with an unpredictable name is made in it, and everything goes in there.
    fn open_base(&mut self) -> Result<(Arc<OwnedFd>, PathBuf)> {
        let workdir = self.spec.workdir.clone();
        let own = [Backing::File, Backing::Ram].map(default_workdir);
        if own.contains(&workdir) {
            let fd = sys_trust::own_dir(&workdir).context("the work directory")?;
            let fd = Arc::new(fd);
            self.base = Some(fd.clone());
            return Ok((fd, workdir));
        }
        let walked = sys_trust::walk(&workdir, Some(0o755))
            .with_context(|| format!("opening --workdir {}", workdir.display()))?;
        let fd = Arc::new(walked.fd);
        if walked.untrusted.is_none() {
            self.base = Some(fd.clone());
            return Ok((fd, walked.path));
        }
        // Others can change the work directory: keep everything in a private directory.
        let name = sys_trust::private_name("");
        let private = self.make_dir_in(&fd, &walked.path, &name, 0o700)?;
        self.base = Some(private.clone());
        Ok((private, walked.path.join(name)))
    }

    /// Makes the directory `name` in the held directory `dir` (at `dir_path`) exclusively,
    /// recorded in the ledger first and struck off again when it could not be made; it is
    /// deleted through `dir` at teardown.
    fn make_dir_in(
        &mut self,
        dir: &Arc<OwnedFd>,
        dir_path: &Path,
        name: &str,
        mode: u32,
    ) -> Result<Arc<OwnedFd>> {
        let (fd, made, id) = self
            .ledger()
            .make_at(dir.as_fd(), dir_path, name, "", |d, n| {
                sys_trust::make_dir_at(d, n, mode)
            })?;
        self.hold(made, dir, name, id);
        Ok(Arc::new(fd))
    }

    /// Keeps `made` (the file `id` named `name` in the held directory `dir`, in the ledger) to
    /// be deleted through `dir` at teardown.
    fn hold(&mut self, made: Resource, dir: &Arc<OwnedFd>, name: &str, id: FileId) {
        self.held.push(Held {
            is_dir: matches!(made, Resource::Dir { .. }),
            resource: made,
            dir: dir.clone(),
            name: name.to_string(),
            id,
        });
    }

    /// Attaches a loop device to the image `f` (file `id`, at `image`), recorded in the
    /// ledger first; from the descriptor the image was created with, never reopened by path.
    fn make_loop(
        &mut self,
        (f, id): (fs::File, FileId),
        image: PathBuf,
        dio: bool,
    ) -> Result<(LoopDevice, FileId)> {
        self.ledger().record(Resource::Loop {
            image: image.clone(),
            backing: Some(id),
        })?;
        let lo = LoopDevice::attach(&f, &image, dio)?;
        Ok((lo, id))
    }

    /// Starts the emulated disk `disk` serving the image `f` (the server reads it through
    /// this process's descriptor) with a loop device on it. `role` names the disk in
    /// messages ("" or "journal ").
    fn serve(
        &mut self,
        f: fs::File,
        disk: device::server::DiskSettings,
        role: &str,
    ) -> Result<EmulatedDevice> {
        let image = device::disk::held_path(&f);
        self.emulated.images.push(f);
        let ledger_dir = self.ledger().dir().to_path_buf();
        let (disk, _) = device::disk::start(&device::emulated::Start {
            ledger_dir: Some(&ledger_dir),
            disk,
            image,
            role,
        })?;
        Ok(disk)
    }

    /// Makes the image file `name` of `size` bytes in the held directory `dir` exclusively,
    /// recorded in the ledger, its blocks allocated up front when `prealloc` (a file backing
    /// whose image is not asked to be sparse).
    fn make_image(
        &mut self,
        dir: &Arc<OwnedFd>,
        dir_path: &Path,
        name: &str,
        size: u64,
        prealloc: bool,
    ) -> Result<(fs::File, FileId)> {
        let image = dir_path.join(name);
        let (f, made, id) = self.ledger().make_at(
            dir.as_fd(),
            dir_path,
            name,
            "image ",
            sys_trust::create_file_at,
        )?;
        self.hold(made, dir, name, id);
        f.set_len(size).with_context(|| {
            format!("sizing image {} to {}", image.display(), format_size(size))
        })?;
        if prealloc {
            // Allocate the image's blocks up front so the host filesystem's allocator does not
            // run inside measured phases. Where fallocate is unsupported the image stays sparse,
            // and the run says so; where the store has no room for it, nothing is run.
            let done = nix::fcntl::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                nix::fcntl::FallocateFlags::empty(),
                0,
                i64::try_from(size).unwrap_or(i64::MAX),
            );
            let store = BackingStore::of(dir.as_fd(), dir_path);
            match done {
                Ok(()) => {}
                Err(nix::errno::Errno::ENOSPC) => {
                    return Err(anyhow::anyhow!(
                        "the backing store is full: {store} cannot hold the {} image {}; free space there, make --fs-size smaller, or put --workdir on a larger filesystem",
                        format_size(size),
                        image.display()
                    ));
                }
                Err(e) => {
                    let room = if store.free < size {
                        format!(
                            "; it has room for only {} of the image's {}, so the run fails if the testbed fills that far",
                            format_size_human(store.free),
                            format_size(size)
                        )
                    } else {
                        String::new()
                    };
                    self.sparse.push(format!(
                        "the image {} could not be preallocated ({store} refused fallocate: {}), so it is sparse and the host filesystem allocates its blocks during measured phases{room}; put --workdir on ext4, xfs or tmpfs",
                        image.display(),
                        e.desc()
                    ));
                }
            }
        }
        Ok((f, id))
    }

    /// The mount target, reached through the held home directory (not by a path others
    /// could redirect).
    fn target(&self) -> Result<PathBuf> {
        let home = self
            .home
            .as_ref()
            .context("the testbed's directory is not open")?;
        Ok(sys_trust::fd_path(home.as_fd(), "mnt"))
    }

    /// The mount point to work through: reached through the held testbed directory
    /// (`/proc/self/fd/N/mnt`), so renaming or replacing a directory above it (the private
    /// directory in a user's --workdir) cannot redirect a run; it follows remounts.
    pub fn reach(&self) -> PathBuf {
        self.target().unwrap_or_else(|_| self.mountpoint.clone())
    }

    /// statvfs of the mounted filesystem, through the held testbed directory.
    pub fn statvfs(&self) -> Result<nix::sys::statvfs::Statvfs> {
        let home = self
            .home
            .as_ref()
            .context("the testbed's directory is not open")?;
        let mnt = sys_trust::open_dir_in(home.as_fd(), "mnt")
            .with_context(|| format!("opening {}", self.mountpoint.display()))?;
        nix::sys::statvfs::fstatvfs(&mnt)
            .with_context(|| format!("statvfs {}", self.mountpoint.display()))
    }

    fn mount(&mut self) -> Result<()> {
        let target = self.target()?;
        mount::mount(&self.device, &target, self.spec.fs.name(), &self.mount_opts)
            .with_context(|| format!("mounting on {}", self.mountpoint.display()))?;
        self.mounted = true;
        // What is mounted there now must be the testbed's device.
        let home = self
            .home
            .as_ref()
            .context("the testbed's directory is not open")?;
        let opened = sys_trust::open_dir_in(home.as_fd(), "mnt")
            .with_context(|| format!("opening {}", self.mountpoint.display()))?;
        let (dev, mnt_id) = sys_trust::statx_dev_mnt(opened.as_fd())
            .with_context(|| format!("statx {}", self.mountpoint.display()))?;
        self.mounted_dev = dev;
        if !mount::mount_is_of(mnt_id, &self.device, self.fsdev) {
            anyhow::bail!(
                "{} is not on {} after mounting it there",
                self.mountpoint.display(),
                self.device.display()
            );
        }
        Ok(())
    }

    fn unmount(&mut self) -> Result<()> {
        if let Some(home) = &self.home {
            mount::unmount_in(home.as_fd(), "mnt", self.mounted_dev)
                .with_context(|| format!("unmounting {}", self.mountpoint.display()))?;
        }
        self.mounted = false;
        Ok(())
    }

    /// Unmounts and mounts again with the same options: the coldest cache short of a reboot.
    pub fn remount(&mut self) -> Result<()> {
        if self.mounted {
            self.unmount()?;
        }
        // Dropping caches too makes the block device's own cache cold.
        self.drop_caches_and_settle_disks()?;
        // The mount stays in the ledger while unmounted: recording it again is a no-op.
        self.mount()
    }

    /// `sync; echo 3 > drop_caches` ([`drop_caches`]), then the emulated disks finish their
    /// write caches ([`device::EmulatedDevice::settle`]). The sync and the drop are the whole
    /// machine's work: seconds with a build beside the run, a tenth of one on a quiet machine,
    /// and the drive destaged for as long as they took. So the next phase started on a drive
    /// the host's load had made: lowmem-as-published's large-file delete on extents read its
    /// metadata from the drive's write cache when the phase began 0.1 s after the sync (16 of
    /// 16 reads, 8 ms) and from the platters when it began seconds after (2 of 14, 98 ms). The
    /// study's drive had long finished destaging when its next timed command began; so does
    /// this one now, on either machine. On this machine's own storage, only the drop.
    pub fn drop_caches_and_settle_disks(&mut self) -> Result<()> {
        drop_caches()?;
        let e = &mut self.emulated;
        for d in [&mut e.main, &mut e.journal].into_iter().flatten() {
            d.settle()?;
        }
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn spec(&self) -> &TestbedSpec {
        &self.spec
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The block device the filesystem is on.
    pub fn device(&self) -> &Path {
        &self.device
    }

    pub fn journal_device(&self) -> Option<&Path> {
        self.journal_device.as_deref()
    }

    /// The per-phase probes of the emulated disks (main, journal), for the run's device
    /// counters: none on this machine's own storage.
    pub fn model_probes(&self) -> (Option<crate::measure::Probe>, Option<crate::measure::Probe>) {
        (
            self.emulated.main.as_ref().map(EmulatedDevice::probe),
            self.emulated.journal.as_ref().map(EmulatedDevice::probe),
        )
    }

    /// The measured run begins (`true`) or ends: with `device_model_during = "phases"` the
    /// emulated disks apply their model from here to the end, after a syncfs writes what
    /// set-up left dirty at native speed. Nothing on this machine's own storage.
    pub fn measuring(&mut self, on: bool) -> Result<()> {
        let during = self.spec.device_model.as_ref().map(|m| m.during);
        // Without a --device-model the main disk, if any, is the `ram` disk of an overlay
        // start, modelled always, as a plain testbed has no phases to switch.
        if during.is_none() && self.emulated.journal.is_none()
            || during == Some(device::ModelDuring::Always)
        {
            return Ok(());
        }
        if on && self.mounted {
            let home = self
                .home
                .as_ref()
                .context("the testbed's directory is not open")?;
            let mnt = sys_trust::fd_path(home.as_fd(), "mnt");
            self.set_up(SetUp::Syncfs, |_| syncfs(&mnt))?;
        }
        for d in [&mut self.emulated.main, &mut self.emulated.journal]
            .into_iter()
            .flatten()
        {
            d.set_modelled(on)?;
        }
        Ok(())
    }

    /// What goes into results.
    pub fn info(&self) -> TestbedInfo {
        TestbedInfo {
            label: self.spec.label.clone(),
            fs: self.spec.fs.name().to_string(),
            size: self.spec.size,
            mkfs_args: self.mkfs_args.clone(),
            mount_options: self.mount_opts.clone(),
            journal: self.spec.journal.map(|j| j.to_string()),
            memory_limit: None,
            backing: if self.spec.device.is_some() {
                "device".into()
            } else {
                self.spec.backing.to_string()
            },
            device: Some(self.device.display().to_string()),
            // An emulated disk's loop device always does direct I/O (it is refused otherwise).
            loop_direct_io: self.loopdev.as_ref().map(|l| l.direct_io()).or(self
                .emulated
                .main
                .as_ref()
                .map(|_| true)),
            image_alloc: self
                .spec
                .device
                .is_none()
                .then(|| self.spec.image_alloc.to_string()),
            path: self.mountpoint.display().to_string(),
            // A plain testbed started as an overlay is served by a `ram` disk: recorded too.
            device_model: self.emulated.main.as_ref().map(|d| {
                d.info(
                    self.spec
                        .device_model
                        .as_ref()
                        .map_or(device::ModelDuring::Always, |m| m.during),
                )
            }),
            journal_device_model: self.emulated.journal.as_ref().map(|d| {
                d.info(
                    self.spec
                        .device_model
                        .as_ref()
                        .map(|m| m.during)
                        .unwrap_or_default(),
                )
            }),
            // Set by the runner, which knows how the aged state was made.
            aged_image: None,
        }
    }

    /// Warnings about the setup that make results less trustworthy.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.sparse.clone();
        if let Some(lo) = &self.loopdev {
            if self.spec.loop_direct_io && !lo.direct_io() {
                w.push(format!(
                    "{} does not do direct I/O on its backing file (the filesystem of {} refused it), so the host's page cache may inflate results; put --workdir on ext4 or xfs",
                    lo.path().display(),
                    self.spec.workdir.display()
                ));
            }
        }
        w
    }

    /// Leaves the testbed in place after this process exits (`testbed create`).
    pub fn keep(mut self) -> Result<()> {
        check_persistable(&self.spec)?;
        self.persistent = true;
        if let Some(l) = self.ledger.as_mut() {
            l.set_persistent(true)?;
        }
        // Leave the loop devices attached: their autoclear flag detaches them at unmount.
        if let Some(lo) = self.loopdev.take() {
            std::mem::forget(lo);
        }
        if let Some(lo) = self.journal_loop.take() {
            std::mem::forget(lo);
        }
        Ok(())
    }

    /// Unmounts, detaches and deletes everything, reporting every failure.
    pub fn destroy(mut self) -> Result<()> {
        let errors = self.teardown();
        match errors.into_iter().next() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    fn teardown(&mut self) -> Vec<anyhow::Error> {
        crate::base::signals::test_pause("teardown");
        let mut errors = Vec::new();
        if self.mounted {
            if let Err(e) = self.unmount() {
                errors.push(e);
            }
        }
        if !self.mounted {
            for lo in [self.loopdev.take(), self.journal_loop.take()]
                .into_iter()
                .flatten()
            {
                if let Err(e) = lo.detach() {
                    errors.push(e);
                }
            }
            // Then the emulated disks: loop device, server, FUSE mount.
            for d in [self.emulated.main.take(), self.emulated.journal.take()]
                .into_iter()
                .flatten()
            {
                if let Err(e) = d.stop() {
                    errors.push(e);
                }
            }
            self.emulated.images.clear();
        }
        if let Some(mut ledger) = self.ledger.take() {
            // What this process made goes through the directory descriptors it holds, so a
            // directory renamed meanwhile cannot leak it or redirect the delete.
            let held = std::mem::take(&mut self.held);
            // One renamed meanwhile is found in its directory under its new name.
            errors.extend(ledger.release_all_with(|r| {
                let Some(h) = held.iter().find(|h| h.resource == *r) else {
                    return teardown(r);
                };
                let path = r_path(r);
                let dir_path = path.parent().unwrap_or(path);
                let removed = locate::remove_held(h.dir.as_fd(), dir_path, &h.name, h.is_dir, h.id);
                Some(removed.map(|moved| {
                    if let Some(now) = moved {
                        eprintln!(
                            "fsgauge: warning: {} was renamed to {} while the run used it (whoever can write {} did it); fsgauge worked through its descriptors and removed it under its new name. Give fsgauge a --workdir only root can write",
                            path.display(),
                            now.display(),
                            dir_path.display()
                        );
                    }
                }))
            }));
        }
        errors
    }
}

/// The loop device on an emulated disk and its device number.
fn disk_device(disk: &EmulatedDevice) -> Result<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    let path = disk
        .loop_device()
        .context("the emulated disk has no loop device")?
        .to_path_buf();
    let rdev = fs::metadata(&path)
        .with_context(|| format!("reading the device number of {}", path.display()))?
        .rdev();
    Ok((path, rdev))
}

fn r_path(r: &Resource) -> &Path {
    match r {
        Resource::Dir { path, .. } | Resource::Image { path, .. } => path,
        _ => Path::new("?"),
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.persistent {
            return;
        }
        for e in self.teardown() {
            eprintln!(
                "fsgauge: warning: tearing down testbed {}: {e:#}",
                self.name
            );
        }
    }
}

/// A testbed can outlive this process (`testbed create`) unless it is on an emulated disk,
/// whose server lives as long as the fsgauge process that serves it.
pub fn check_persistable(spec: &TestbedSpec) -> Result<()> {
    if spec.device_model.is_some() || spec.journal_device_model.is_some() {
        return Err(bad_input(
            "a testbed on an emulated disk (--device-model, --journal-device-model) lives only as long as the fsgauge process serving its disk, so `testbed create` cannot leave one behind; run the workload with `fsgauge bench KIND --device-model PROFILE ...` or a plan with device_model in its [[testbed]]",
        ));
    }
    Ok(())
}

/// Tears down a testbed recorded in the ledger by name (`testbed destroy NAME`). Returns what
/// it made that could not be found anywhere (each names the object and its identity).
pub fn destroy_by_name(name: &str) -> Result<Vec<anyhow::Error>> {
    // A name that could reach outside the ledger is refused before any file is read.
    ledger::check_name(name)?;
    let mut ledger = Ledger::open(name).map_err(|e| {
        bad_input(format!(
            "no testbed named {name:?} ({e:#}); `fsgauge testbed list` shows the existing ones"
        ))
    })?;
    let entry = ledger.entry();
    if !entry.persistent() && entry.owner_alive() {
        // As `testbed cleanup` does: a run's testbed is its own until the run ends.
        return Err(bad_input(format!(
            "testbed {name:?} belongs to a running fsgauge (pid {}); it goes when that run ends. Stop the run (kill {}) instead, or wait; `testbed destroy` only removes testbeds of `testbed create` and those of runs that are gone",
            entry.owner_pid, entry.owner_pid
        )));
    }
    let (missing, failed) = split_missing(ledger.release_all_with(teardown));
    match failed.into_iter().next() {
        None => Ok(missing),
        Some(e) => Err(e.context(format!("destroying testbed {name}"))),
    }
}

/// The teardowns of the modules that record into the ledger: with them, a ledger entry of any
/// kind of resource can be released (`testbed destroy`, `cleanup`, a testbed's own end).
pub(crate) const TEARDOWNS: [ledger::Teardown<'static>; 3] = [
    &memlimit::teardown,
    &rundir::teardown,
    &device::emulated::teardown,
];

/// Releases `r` if one of [`TEARDOWNS`] knows its kind.
fn teardown(r: &ledger::Resource) -> Option<Result<()>> {
    TEARDOWNS.iter().find_map(|t| t(r))
}

/// Splits release errors into what could not be found ([`locate::Missing`]: struck off the
/// ledger, to be told as warnings) and the failures.
fn split_missing(errors: Vec<anyhow::Error>) -> (Vec<anyhow::Error>, Vec<anyhow::Error>) {
    errors.into_iter().partition(|e| e.is::<locate::Missing>())
}

/// What `testbed cleanup` did.
#[derive(Debug, Default)]
pub struct CleanupReport {
    /// Entries whose resources are all released (or, as `missing` says, found nowhere).
    pub removed: Vec<String>,
    /// What an entry recorded and cleanup could find nowhere, by entry: struck off the ledger
    /// but not removed, each naming the object and its identity.
    pub missing: Vec<(String, anyhow::Error)>,
    pub skipped_live: Vec<String>,
    pub failed: Vec<(String, anyhow::Error)>,
    /// Run directories an entry recorded that were already gone (removed by someone else, or
    /// never made): nothing was removed for them, their record is dropped. By entry.
    pub gone: Vec<(String, PathBuf)>,
    /// Ledger files that could not be read: skipped, left for a person to look at.
    pub damaged: Vec<ledger::DamagedEntry>,
}

/// Releases everything left by runs whose process is gone; with `all`, also persistent
/// testbeds and those of live processes. A damaged ledger file is skipped (and reported), so
/// it never keeps the other entries from being cleaned up.
pub fn cleanup(all: bool) -> Result<CleanupReport> {
    cleanup_in(&ledger::state_dir(), all)
}

/// [`cleanup`] of the ledger directory `dir`.
pub fn cleanup_in(dir: &Path, all: bool) -> Result<CleanupReport> {
    let mut scan = ledger::scan_in(dir)?;
    let mut report = CleanupReport {
        damaged: scan.damaged,
        ..CleanupReport::default()
    };
    // Testbeds before the emulated disks under them: a filesystem is unmounted and its loop
    // device let go before the server of its disk is stopped.
    scan.entries.sort_by_key(|e| {
        e.resources
            .iter()
            .any(|r| matches!(r, Resource::DeviceServer { .. }))
    });
    for entry in scan.entries {
        if !all && (entry.persistent() || entry.owner_alive()) {
            report.skipped_live.push(entry.name.clone());
            continue;
        }
        let mut l = match Ledger::open_in(dir, &entry.name) {
            Ok(l) => l,
            // Gone since the scan: its owner finished in the meantime.
            Err(e) if e.is::<ledger::NoSuchEntry>() => continue,
            Err(e) => {
                report.failed.push((entry.name.clone(), e));
                continue;
            }
        };
        let mut gone = Vec::new();
        let (missing, failed) = split_missing(l.release_all_with(|r| {
            if let Resource::RunDir { parent, name, .. } = r {
                let p = parent.join(name);
                if matches!(fs::symlink_metadata(&p), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
                {
                    gone.push(p);
                }
            }
            teardown(r)
        }));
        report
            .gone
            .extend(gone.into_iter().map(|p| (entry.name.clone(), p)));
        report
            .missing
            .extend(missing.into_iter().map(|e| (entry.name.clone(), e)));
        match failed.into_iter().next() {
            None => report.removed.push(entry.name.clone()),
            Some(e) => report.failed.push((entry.name.clone(), e)),
        }
    }
    Ok(report)
}
