//! mount(2) and umount(2), with `mount -o` option strings split into the kernel's flags and the
//! filesystem's own data string, and the kernel's log lines attached when a mount fails (the
//! kernel says *why* in dmesg, not in errno).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;

use anyhow::{Context, Result};

use crate::base::sys::proc::unescape_mount_field;
use crate::base::sys::trust::{self, FileId};
use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

/// Splits `noatime,data=writeback` into `MS_NOATIME` and the data string `data=writeback`.
pub fn split_options(opts: &str) -> (MsFlags, String) {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for o in opts.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let f = match o {
            "ro" => Some(MsFlags::MS_RDONLY),
            "rw" | "defaults" | "async" | "atime" | "suid" | "dev" | "exec" => {
                Some(MsFlags::empty())
            }
            "noatime" => Some(MsFlags::MS_NOATIME),
            "nodiratime" => Some(MsFlags::MS_NODIRATIME),
            "relatime" => Some(MsFlags::MS_RELATIME),
            "strictatime" => Some(MsFlags::MS_STRICTATIME),
            "lazytime" => Some(MsFlags::MS_LAZYTIME),
            "sync" => Some(MsFlags::MS_SYNCHRONOUS),
            "dirsync" => Some(MsFlags::MS_DIRSYNC),
            "nosuid" => Some(MsFlags::MS_NOSUID),
            "nodev" => Some(MsFlags::MS_NODEV),
            "noexec" => Some(MsFlags::MS_NOEXEC),
            _ => None,
        };
        match f {
            Some(f) => flags |= f,
            None => data.push(o),
        }
    }
    (flags, data.join(","))
}

/// Mounts `dev` on `target`. On failure the error carries the kernel's log lines. The
/// filesystem's journal threads take the caller's raised nice ([`super::priority`]).
pub fn mount(dev: &Path, target: &Path, fstype: &str, opts: &str) -> Result<()> {
    let (flags, data) = split_options(opts);
    let mut kmsg = KmsgTail::open();
    let res = nix::mount::mount(
        Some(dev),
        target,
        Some(fstype),
        flags,
        if data.is_empty() {
            None
        } else {
            Some(data.as_str())
        },
    );
    match res {
        Ok(()) => {
            super::priority::share_with_fs_threads(dev);
            Ok(())
        }
        Err(errno) => {
            let said = kmsg.as_mut().map(|k| k.read_new()).unwrap_or_default();
            let hint = if said.is_empty() {
                String::new()
            } else {
                format!("; the kernel said: {}", said.join(" | "))
            };
            Err(anyhow::anyhow!(
                "mount -t {fstype} -o {:?} {} {} failed: {errno}{hint}",
                opts,
                dev.display(),
                target.display()
            ))
        }
    }
}

/// Unmounts `target`, retrying while it is busy and detaching lazily as a last resort.
/// Not being mounted is not an error, nor is a target that cannot exist (below a file).
pub fn unmount(target: &Path) -> Result<()> {
    for attempt in 0..10 {
        match nix::mount::umount2(target, MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL) | Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => return Ok(()),
            Err(Errno::EBUSY) if attempt < 9 => std::thread::sleep(Duration::from_millis(100)),
            Err(Errno::EBUSY) => {
                nix::mount::umount2(target, MntFlags::MNT_DETACH)
                    .with_context(|| format!("lazy unmount of {}", target.display()))?;
                return Ok(());
            }
            Err(e) => return Err(e).with_context(|| format!("unmounting {}", target.display())),
        }
    }
    Ok(())
}

/// Unmounts the filesystem mounted at `mnt` inside the held directory `dir`, if the
/// filesystem there is still the one on device `fsdev` (else it is unmounted already).
/// `dir` is one of fsgauge's own directories, so the name cannot be swapped by others;
/// renaming `dir` or the directories above it changes nothing.
pub fn unmount_in(dir: BorrowedFd<'_>, mnt: &str, fsdev: u64) -> Result<()> {
    let target = trust::fd_path(dir, mnt);
    match fs::symlink_metadata(&target) {
        Ok(md) if md.dev() == fsdev => unmount(&target),
        Err(e) if e.raw_os_error() == Some(libc::EIO) => {
            let fd = trust::open_dir_path_in(dir, mnt)
                .with_context(|| format!("opening {} (O_PATH)", target.display()))?;
            let id = trust::fdinfo_mnt_id(fd.as_fd())
                .with_context(|| format!("the mount id of {}", target.display()))?;
            drop(fd);
            if !of_device(id, fsdev) {
                return Ok(());
            }
            unmount(&target)
        }
        _ => Ok(()),
    }
}

/// Whether the mount `id` is of device `fsdev`, by the mount table alone (see
/// [`mount_is_of`]): nothing asked of the filesystem, which a shut-down one (FS_IOC_SHUTDOWN)
/// answers with EIO, even a stat of its root.
fn of_device(id: u64, fsdev: u64) -> bool {
    let dev = super::loopdev::dev_path(fsdev).unwrap_or_default();
    mount_is_of(id, &dev, fsdev)
}

/// Unmounts every mount of the filesystem on device `fsdev` (found in /proc/self/mountinfo,
/// wherever its mount point was moved or renamed to), but only while that device is still
/// the loop device of the image `backing` when given. Each mount point is opened without
/// following symlinks, checked to be the root of that very mount (device and mount id), and
/// detached through that descriptor, so no path swapped meanwhile is acted on.
pub fn unmount_device(fsdev: u64, backing: Option<FileId>) -> Result<()> {
    if let Some(id) = backing {
        if !super::loopdev::device_backed_by(fsdev, id) {
            // The loop device is gone or reused: nothing of this testbed can be mounted.
            return Ok(());
        }
    }
    let want = format!("{}:{}", libc::major(fsdev), libc::minor(fsdev));
    // btrfs (and others) show an anonymous device number, not the block device's: match on
    // the source device too.
    let source = super::loopdev::dev_path(fsdev);
    let info =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    for line in info.lines() {
        let Some(m) = MountLine::parse(line) else {
            continue;
        };
        let by_source = source
            .as_ref()
            .is_some_and(|s| m.source == s.to_string_lossy());
        if m.majmin != want && !by_source {
            continue;
        }
        let target = PathBuf::from(&m.target);
        // O_PATH: a filesystem shut down (FS_IOC_SHUTDOWN) refuses every open and stat with
        // EIO, its root's too; an O_PATH descriptor and its fdinfo ask nothing of it.
        let fd = trust::open_dir_path_nofollow(&target).with_context(|| {
            format!(
                "opening the mount point {} (not following symlinks)",
                target.display()
            )
        })?;
        // The mount id names the mount (the device number files report need not be the
        // filesystem's: btrfs gives each subvolume its own).
        let id = trust::fdinfo_mnt_id(fd.as_fd())
            .with_context(|| format!("the mount id of {}", target.display()))?;
        if id != m.id {
            anyhow::bail!(
                "{} changed while it was being unmounted (not the mount of device {want}); run cleanup again",
                target.display()
            );
        }
        // The descriptor keeps the mount busy: detach it lazily, and let the last close end it.
        nix::mount::umount2(&trust::fd_path(fd.as_fd(), ""), MntFlags::MNT_DETACH)
            .with_context(|| format!("unmounting {} (device {want})", target.display()))?;
    }
    Ok(())
}

/// One line of /proc/self/mountinfo, the fields fsgauge uses.
struct MountLine {
    id: u64,
    majmin: String,
    target: String,
    source: String,
}

impl MountLine {
    fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split(' ').collect();
        let dash = f.iter().position(|x| *x == "-")?;
        Some(Self {
            id: f.first()?.parse().ok()?,
            majmin: f.get(2)?.to_string(),
            target: unescape_mount_field(f.get(4)?),
            source: unescape_mount_field(f.get(dash + 2)?),
        })
    }
}

/// Whether the mount with id `mnt_id` is of the block device `dev` (by its number, or as
/// its source, for filesystems such as btrfs that show an anonymous device number).
pub fn mount_is_of(mnt_id: u64, dev: &Path, rdev: u64) -> bool {
    let want = format!("{}:{}", libc::major(rdev), libc::minor(rdev));
    fs::read_to_string("/proc/self/mountinfo").is_ok_and(|info| {
        info.lines()
            .filter_map(MountLine::parse)
            .any(|m| m.id == mnt_id && (m.majmin == want || Path::new(&m.source) == dev))
    })
}

/// Whether `path` is a mount point (listed as a target in /proc/self/mountinfo).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(canon) = path.canonicalize() else {
        return false;
    };
    fs::read_to_string("/proc/self/mountinfo")
        .map(|s| {
            s.lines()
                .filter_map(|l| l.split(' ').nth(4))
                .any(|t| unescape_mount_field(t) == canon.to_string_lossy())
        })
        .unwrap_or(false)
}

/// Reads what the kernel logs after a point in time, from /dev/kmsg.
struct KmsgTail {
    file: fs::File,
}

impl KmsgTail {
    fn open() -> Option<Self> {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open("/dev/kmsg")
            .ok()?;
        file.seek(SeekFrom::End(0)).ok()?;
        Some(Self { file })
    }

    fn read_new(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut buf = vec![0u8; 8192];
        // Each read returns one record; EAGAIN when none is left.
        for _ in 0..64 {
            match self.file.read(&mut buf) {
                Ok(n) if n > 0 => {
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    if let Some((_, msg)) = rec.split_once(';') {
                        let msg = msg.lines().next().unwrap_or("").trim().to_string();
                        if !msg.is_empty() {
                            lines.push(msg);
                        }
                    }
                }
                _ => break,
            }
        }
        lines
    }
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_into_flags_and_data() {
        let (f, d) = split_options("noatime,data=writeback,nodelalloc");
        assert_eq!(f, MsFlags::MS_NOATIME);
        assert_eq!(d, "data=writeback,nodelalloc");
        let (f, d) = split_options("");
        assert!(f.is_empty() && d.is_empty());
        let (f, d) = split_options("ro,sync");
        assert_eq!(f, MsFlags::MS_RDONLY | MsFlags::MS_SYNCHRONOUS);
        assert_eq!(d, "");
    }
}
