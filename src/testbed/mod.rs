//! Testbeds: the filesystem under test, built by fsgauge itself (image → loop device → mkfs →
//! mount, with the options asked for) and torn down again, on success, on error and on signals.
//!
//! A testbed is owned: fsgauge only formats images it created, or a block device named with
//! `--device` together with `--destroy-data`, and never one that is in use. Every step that
//! changes the machine is written to the [`ledger`] first.

mod cache;
pub mod device;
pub mod inodes;
pub mod ledger;
mod loopdev;
mod memlimit;
mod mkfs;
pub mod mount;
pub mod params;
pub mod room;
mod rundir;
mod spec;

use std::fmt;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub use crate::sys::proc::{meminfo, own_peak_rss, own_rss};
pub use cache::{drop_caches, syncfs};
pub use ledger::{Ledger, LedgerEntry, Resource};
pub use loopdev::LoopDevice;
pub use memlimit::{CgroupVersion, MemCharger, MemLimit};
pub use mkfs::{mkfs_command, MkfsCommand};
pub use params::TestbedParams;
pub use rundir::{across_remount, RunDir};
pub use spec::{
    default_workdir, find_program, split_words, Backing, FsKind, JournalSpec, TestbedInput,
    TestbedSpec,
};

use crate::error::bad_input;
use crate::results::TestbedInfo;
use crate::units::format_size;

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
    if spec.journal.is_some() && spec.fs.is_ext() && find_program("mke2fs").is_none() {
        return Err(bad_input("mke2fs is not installed; install e2fsprogs"));
    }
    if let Some(dev) = &spec.device {
        check_device_free(dev)?;
    } else {
        // The image and a journal on the same backing share a filesystem; a RAM journal of a
        // file-backed testbed lives on tmpfs, whose room is memory.
        let mut need: Vec<(PathBuf, u64)> = vec![(nearest_existing(&spec.workdir), spec.size)];
        if let Some(j) = spec.journal {
            if j.backing == spec.backing {
                need[0].1 += j.size;
            } else {
                need.push((nearest_existing(&default_workdir(j.backing)), j.size));
            }
        }
        for (base, need) in need {
            let Some(avail) = room::free_space(&base) else {
                continue;
            };
            if avail < need {
                return Err(bad_input(format!(
                    "the testbed needs {} for its image(s) but {} has only {} free; make --fs-size smaller or pass --workdir on a bigger filesystem",
                    format_size(need),
                    room::describe(&base),
                    crate::units::format_bytes_human(avail as f64)
                )));
            }
        }
    }
    Ok(())
}

/// The work directory must be a directory, or be creatable as one: its nearest existing
/// ancestor must be a directory (not a regular file or something below one). A plan's
/// `workdir` is checked with this too, so that `--dry-run` refuses what the run would.
pub fn check_workdir(workdir: &Path) -> Result<()> {
    let base = nearest_existing(workdir);
    if !base.is_dir() {
        return Err(crate::error::bad_param("workdir", format!(
            "--workdir {}: {} is not a directory; give a directory for images and mount points (a missing one is created)",
            workdir.display(),
            base.display()
        )));
    }
    Ok(())
}

fn nearest_existing(p: &Path) -> PathBuf {
    let mut cur = p.to_path_buf();
    while !cur.exists() {
        match cur.parent() {
            Some(parent) => cur = parent.to_path_buf(),
            None => return PathBuf::from("/"),
        }
    }
    cur
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
            .then(|| format!("at {}", mount::unescape_mount_field(f[4])))
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

fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
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
        preflight(spec)?;
        crate::signals::check()?;
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
        let home = spec.workdir.join(&self.name);
        // The work directory goes again at teardown if it is empty then: when this run made
        // it, and always for fsgauge's own default ones (another run may have made one and
        // left it to this run while both were using it).
        let own = [Backing::File, Backing::Ram].map(default_workdir);
        if !spec.workdir.exists() || own.contains(&spec.workdir) {
            self.make_dir(&spec.workdir, true)
                .with_context(|| format!("creating work directory {}", spec.workdir.display()))?;
        }
        self.make_dir(&home, false)?;

        if let Some(dev) = &spec.device {
            self.device = dev.clone();
        } else {
            let image = home.join("fs.img");
            let lo = self.make_loop(&image, spec.size, spec.backing, spec.loop_direct_io)?;
            self.device = lo.path().to_path_buf();
            self.loopdev = Some(lo);
        }
        if let Some(j) = spec.journal {
            let jimage = match j.backing {
                Backing::Ram => {
                    let dir = default_workdir(Backing::Ram);
                    // fsgauge's own: removed at teardown if empty then (see the work directory).
                    self.make_dir(&dir, true)?;
                    dir.join(format!("{}-journal.img", self.name))
                }
                Backing::File => home.join("journal.img"),
            };
            // A RAM journal gains nothing from direct I/O on tmpfs.
            let dio = spec.loop_direct_io && j.backing == Backing::File;
            let lo = self.make_loop(&jimage, j.size, j.backing, dio)?;
            self.journal_device = Some(lo.path().to_path_buf());
            self.journal_loop = Some(lo);
        }

        crate::signals::check()?;
        let cmd = mkfs_command(&spec, &self.device, self.journal_device.as_deref())?;
        cmd.run()?;
        self.mkfs_args = cmd.main_args();

        let mnt = home.join("mnt");
        self.make_dir(&mnt, false)?;
        self.mountpoint = mnt.clone();
        self.mount_opts = mkfs::mount_options(&spec, self.journal_device.as_deref());
        crate::signals::check()?;
        self.mount()?;
        crate::signals::test_pause("mount");
        let details = serde_json::json!({
            "fs": spec.fs.name(),
            "size": spec.size,
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

    fn make_loop(
        &mut self,
        image: &Path,
        size: u64,
        backing: Backing,
        dio: bool,
    ) -> Result<LoopDevice> {
        let dir = image.parent().unwrap_or(Path::new("/"));
        if backing == Backing::Ram && !dir.exists() {
            self.make_dir(dir, true)?;
        }
        let img = Resource::Image {
            path: image.to_path_buf(),
        };
        self.ledger().record(img.clone())?;
        let f = match in_shared_dir(image, || {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(image)
        }) {
            Ok(f) => f,
            Err(e) => {
                // Not made (an image already there is not ours): nothing to remove later.
                let _ = self.ledger().forget(&img);
                return Err(e).with_context(|| format!("creating image {}", image.display()));
            }
        };
        f.set_len(size).with_context(|| {
            format!("sizing image {} to {}", image.display(), format_size(size))
        })?;
        if backing == Backing::File {
            // Allocate the image's blocks up front so the host filesystem's allocator does not
            // run inside measured phases. Where fallocate is unsupported the image stays sparse,
            // and the run says so; where the store has no room for it, nothing is run.
            let done = nix::fcntl::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                nix::fcntl::FallocateFlags::empty(),
                0,
                i64::try_from(size).unwrap_or(i64::MAX),
            );
            let store = BackingStore::of(dir);
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
        drop(f);
        self.ledger().record(Resource::Loop {
            image: image.to_path_buf(),
        })?;
        LoopDevice::attach(image, dio)
    }

    /// Makes a directory (with its parents when `all`), recorded in the ledger first and
    /// struck off again when it could not be made, so that nothing is left recorded that was
    /// never made.
    fn make_dir(&mut self, path: &Path, all: bool) -> Result<()> {
        let r = Resource::Dir {
            path: path.to_path_buf(),
        };
        let recorded_before = self.ledger().entry().resources.contains(&r);
        self.ledger().record(r.clone())?;
        let made = if all {
            fs::create_dir_all(path)
        } else {
            in_shared_dir(path, || fs::create_dir(path))
        };
        if let Err(e) = made {
            if !recorded_before {
                let _ = self.ledger().forget(&r);
            }
            return Err(e).with_context(|| format!("creating {}", path.display()));
        }
        Ok(())
    }

    fn mount(&mut self) -> Result<()> {
        let target = self.mountpoint.clone();
        self.ledger().record(Resource::Mount { target })?;
        mount::mount(
            &self.device,
            &self.mountpoint,
            self.spec.fs.name(),
            &self.mount_opts,
        )?;
        self.mounted = true;
        Ok(())
    }

    /// Unmounts and mounts again with the same options: the coldest cache short of a reboot.
    pub fn remount(&mut self) -> Result<()> {
        if self.mounted {
            mount::unmount(&self.mountpoint)?;
            self.mounted = false;
        }
        // Dropping caches too makes the block device's own cache cold.
        drop_caches()?;
        // The mount stays in the ledger while unmounted: recording it again is a no-op.
        self.mount()
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
            loop_direct_io: self.loopdev.as_ref().map(|l| l.direct_io()),
            path: self.mountpoint.display().to_string(),
        }
    }

    /// When a run fails, whether the cause is the host side: the filesystem holding the
    /// testbed's image (the backing store) has filled up, so the image could not grow. The
    /// message names the store, its filesystem and its free space.
    pub fn backing_full(&self) -> Option<String> {
        let lo = self.loopdev.as_ref()?;
        let image = self.mountpoint.parent()?.join("fs.img");
        let store = BackingStore::of(image.parent()?);
        // A store with under 1 MiB free (or under 0.1% of itself) can no longer back writes.
        let full = store.free < (1 << 20) || store.free < store.total / 1000;
        full.then(|| {
            format!(
                "the backing store is full: {store}, so the image {} behind {} could not grow and the testbed's writes failed (not the filesystem under test); free space there or put --workdir on a larger filesystem",
                image.display(),
                lo.path().display()
            )
        })
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
        crate::signals::test_pause("teardown");
        let mut errors = Vec::new();
        if self.mounted {
            match mount::unmount(&self.mountpoint) {
                Ok(()) => self.mounted = false,
                Err(e) => errors.push(e),
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
        }
        if let Some(mut ledger) = self.ledger.take() {
            errors.extend(ledger.release_all());
        }
        errors
    }
}

/// The filesystem an image file lives on, for messages: where, which filesystem, how full.
struct BackingStore {
    dir: PathBuf,
    fs: String,
    free: u64,
    total: u64,
}

impl BackingStore {
    #[allow(clippy::unnecessary_cast)] // statvfs field types differ between platforms
    fn of(dir: &Path) -> Self {
        let (free, total) = nix::sys::statvfs::statvfs(dir)
            .map(|st| {
                let f = st.fragment_size() as u64;
                (st.blocks_available() as u64 * f, st.blocks() as u64 * f)
            })
            .unwrap_or((0, 0));
        Self {
            dir: dir.to_path_buf(),
            fs: mount::mount_of(dir).map_or_else(|| "unknown".into(), |(_, t, _)| t),
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

fn format_size_human(b: u64) -> String {
    crate::units::format_bytes_human(b as f64)
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

/// Tears down a testbed recorded in the ledger by name (`testbed destroy NAME`).
pub fn destroy_by_name(name: &str) -> Result<()> {
    // A name that could reach outside the ledger is refused before any file is read.
    ledger::check_name(name)?;
    let mut ledger = Ledger::open(name).map_err(|e| {
        bad_input(format!(
            "no testbed named {name:?} ({e:#}); `fsgauge testbed list` shows the existing ones"
        ))
    })?;
    let errors = ledger.release_all();
    match errors.into_iter().next() {
        None => Ok(()),
        Some(e) => Err(e.context(format!("destroying testbed {name}"))),
    }
}

/// What `testbed cleanup` did.
#[derive(Debug, Default)]
pub struct CleanupReport {
    pub removed: Vec<String>,
    pub skipped_live: Vec<String>,
    pub failed: Vec<(String, anyhow::Error)>,
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
    let scan = ledger::scan_in(dir)?;
    let mut report = CleanupReport {
        damaged: scan.damaged,
        ..CleanupReport::default()
    };
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
        let errs = l.release_all();
        match errs.into_iter().next() {
            None => report.removed.push(entry.name.clone()),
            Some(e) => report.failed.push((entry.name.clone(), e)),
        }
    }
    Ok(report)
}

/// Makes `path` (a file or directory, by `make`) inside one of fsgauge's own shared work
/// directories (`/var/tmp/fsgauge`, `/dev/shm/fsgauge`). Another run removes such a directory
/// at its teardown when it finds it empty, which can happen between this run making it and
/// making something in it: then the directory is made again and `make` tried again.
fn in_shared_dir<T>(
    path: &Path,
    mut make: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let own = [Backing::File, Backing::Ram].map(default_workdir);
    let shared = path.parent().filter(|p| own.iter().any(|d| d == p));
    let mut tries = 0;
    loop {
        match (make(), shared) {
            (Err(e), Some(dir)) if tries < 20 && e.kind() == std::io::ErrorKind::NotFound => {
                tries += 1;
                fs::create_dir_all(dir)?;
            }
            (other, _) => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_work_directory_removed_by_another_run_is_made_again() {
        let dir = default_workdir(Backing::Ram);
        if !Path::new("/dev/shm").is_dir() || !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
                "CI must run every test, but this one needs root and /dev/shm"
            );
            eprintln!("skipped: needs root and /dev/shm");
            return;
        }
        fs::create_dir_all(&dir).unwrap();
        let target = dir.join(format!("in-shared-dir-test-{}", std::process::id()));
        let mut calls = 0;
        // The first try finds the directory gone (another run removed it when empty).
        let made = in_shared_dir(&target, || {
            calls += 1;
            if calls == 1 {
                let _ = fs::remove_dir(&dir);
                return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
            }
            fs::create_dir(&target)
        });
        assert!(made.is_ok(), "{made:?}");
        assert_eq!(calls, 2);
        fs::remove_dir(&target).unwrap();
        let _ = fs::remove_dir(&dir);

        // Anywhere else a missing directory is the caller's error, reported at once.
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("gone/x");
        let mut calls = 0;
        let made = in_shared_dir(&elsewhere, || {
            calls += 1;
            fs::create_dir(&elsewhere)
        });
        assert_eq!(made.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(calls, 1);
    }
}
