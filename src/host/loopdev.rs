//! Loop devices through the kernel's own interface (linux/loop.h): LOOP_CTL_GET_FREE on
//! /dev/loop-control, then LOOP_CONFIGURE with direct I/O and autoclear in one call.
//!
//! Direct I/O keeps the backing file's page cache out of the measurement; autoclear makes the
//! kernel detach the device by itself once it is unmounted and no longer open, so even a
//! SIGKILLed run leaves at most a mount behind (which `testbed cleanup` removes).

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::base::sys::trust::FileId;

const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_FLAGS_DIRECT_IO: u32 = 16;
const LO_NAME_SIZE: usize = 64;

#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; LO_NAME_SIZE],
    lo_crypt_name: [u8; LO_NAME_SIZE],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// An attached loop device. Detached on drop.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    /// Held open so the device stays configured until we detach it.
    file: Option<File>,
    direct_io: bool,
}

impl LoopDevice {
    /// Attaches the open image `backing` (named `image` in messages and in the loop's file
    /// name) to a free loop device. The image is never opened again by its path, which
    /// someone could have swapped meanwhile.
    pub fn attach(backing: &File, image: &Path, direct_io: bool) -> Result<Self> {
        let ctl = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/loop-control")
            .context("opening /dev/loop-control (is the loop module loaded, and are you root?)")?;
        // Another process may take the free device between GET_FREE and CONFIGURE: retry.
        for _ in 0..20 {
            // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number.
            let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE as _) };
            if n < 0 {
                return Err(std::io::Error::last_os_error()).context("LOOP_CTL_GET_FREE");
            }
            let path = PathBuf::from(format!("/dev/loop{n}"));
            let dev = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // udev has not made the node yet.
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                }
                Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
            };
            let mut info = LoopInfo64 {
                lo_device: 0,
                lo_inode: 0,
                lo_rdevice: 0,
                lo_offset: 0,
                lo_sizelimit: 0,
                lo_number: 0,
                lo_encrypt_type: 0,
                lo_encrypt_key_size: 0,
                lo_flags: LO_FLAGS_AUTOCLEAR | if direct_io { LO_FLAGS_DIRECT_IO } else { 0 },
                lo_file_name: [0; LO_NAME_SIZE],
                lo_crypt_name: [0; LO_NAME_SIZE],
                lo_encrypt_key: [0; 32],
                lo_init: [0; 2],
            };
            let name = image.as_os_str().as_encoded_bytes();
            let len = name.len().min(LO_NAME_SIZE - 1);
            info.lo_file_name[..len].copy_from_slice(&name[..len]);
            let cfg = LoopConfig {
                fd: backing.as_raw_fd() as u32,
                block_size: 0,
                info,
                reserved: [0; 8],
            };
            // SAFETY: LOOP_CONFIGURE reads a struct loop_config that lives across the call.
            let rc = unsafe {
                libc::ioctl(
                    dev.as_raw_fd(),
                    LOOP_CONFIGURE as _,
                    &cfg as *const LoopConfig,
                )
            };
            if rc == 0 {
                let actual_dio = read_sys(&path, "loop/dio").is_some_and(|v| v == "1");
                return Ok(Self {
                    path,
                    file: Some(dev),
                    direct_io: actual_dio,
                });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EBUSY) {
                continue;
            }
            return Err(err).with_context(|| {
                format!("LOOP_CONFIGURE {} on {}", path.display(), image.display())
            });
        }
        bail!(
            "no free loop device could be claimed for {} after 20 tries",
            image.display()
        )
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device number of the loop device.
    pub fn rdev(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        self.file.as_ref()?.metadata().ok().map(|m| m.rdev())
    }

    /// Whether the kernel really does direct I/O on the backing file (it silently falls back
    /// to buffered I/O where the backing filesystem cannot).
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    /// Detaches now.
    pub fn detach(mut self) -> Result<()> {
        self.detach_inner()
    }

    fn detach_inner(&mut self) -> Result<()> {
        if let Some(f) = self.file.take() {
            // SAFETY: LOOP_CLR_FD takes no argument.
            let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_CLR_FD as _, 0) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                // ENXIO: already detached (autoclear did it).
                if e.raw_os_error() != Some(libc::ENXIO) {
                    return Err(e).with_context(|| format!("LOOP_CLR_FD {}", self.path.display()));
                }
            }
        }
        Ok(())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = self.detach_inner();
    }
}

/// Detaches a loop device by path (used by cleanup, where no handle is held).
pub fn detach_path(dev: &Path) -> Result<()> {
    let f = match OpenOptions::new().read(true).open(dev) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("opening {}", dev.display())),
    };
    clear_fd(&f, dev)
}

/// Detaches the loop device open as `f` (`dev` names it in errors); one already detached
/// (ENXIO) is no error.
fn clear_fd(f: &File, dev: &Path) -> Result<()> {
    // SAFETY: LOOP_CLR_FD takes no argument.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_CLR_FD as _, 0) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENXIO) {
            return Err(e).with_context(|| format!("LOOP_CLR_FD {}", dev.display()));
        }
    }
    Ok(())
}

/// The identity (device, inode) of the file backing the loop device open as `dev`, as the
/// kernel reports it (LOOP_GET_STATUS64); None when it is not attached.
fn backing_of(dev: &File) -> Option<FileId> {
    let mut info = std::mem::MaybeUninit::<LoopInfo64>::zeroed();
    // SAFETY: LOOP_GET_STATUS64 fills a struct loop_info64 that lives across the call.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_GET_STATUS64 as _, info.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: the ioctl succeeded and filled it (and all-zero is a valid LoopInfo64).
    let info = unsafe { info.assume_init() };
    Some(FileId {
        dev: info.lo_device,
        ino: info.lo_inode,
    })
}

/// The size of an open block device in bytes (BLKGETSIZE64).
pub fn block_device_size(dev: &File) -> std::io::Result<u64> {
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 to the pointer given, which lives across the call.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), BLKGETSIZE64 as _, &mut size as *mut u64) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}

/// Whether the loop device numbered `rdev` is backed by the file `id`.
pub fn device_backed_by(rdev: u64, id: FileId) -> bool {
    let Some(path) = dev_path(rdev) else {
        return false;
    };
    OpenOptions::new()
        .read(true)
        .open(path)
        .ok()
        .and_then(|f| backing_of(&f))
        == Some(id)
}

/// The /dev node of the block device numbered `rdev`, by its sysfs name.
pub fn dev_path(rdev: u64) -> Option<PathBuf> {
    let link = fs::read_link(format!(
        "/sys/dev/block/{}:{}",
        libc::major(rdev),
        libc::minor(rdev)
    ))
    .ok()?;
    let name = link.file_name()?.to_str()?.to_string();
    Some(PathBuf::from(format!("/dev/{name}")))
}

/// Detaches every loop device backed by the file `id`, checked and detached through one
/// descriptor of the device (used by cleanup, where no handle is held; the image may have
/// been renamed since).
pub fn detach_backed_by(id: FileId) -> Result<()> {
    let Ok(rd) = fs::read_dir("/sys/block") else {
        return Ok(());
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        let dev = PathBuf::from(format!("/dev/{name}"));
        let Ok(f) = OpenOptions::new().read(true).open(&dev) else {
            continue;
        };
        if backing_of(&f) != Some(id) {
            continue;
        }
        clear_fd(&f, &dev)?;
    }
    Ok(())
}

/// Where the kernel says the files `ids` are now, for every attached loop device backed by one
/// of them (checked by LOOP_GET_STATUS64 on the device): its `loop/backing_file`, which follows
/// the file through renames. A file deleted since has no path.
pub fn backing_paths(ids: &[FileId]) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(f) = OpenOptions::new().read(true).open(format!("/dev/{name}")) else {
            continue;
        };
        if !backing_of(&f).is_some_and(|id| ids.contains(&id)) {
            continue;
        }
        let Ok(b) = fs::read_to_string(e.path().join("loop/backing_file")) else {
            continue;
        };
        let b = b.trim_end_matches('\n');
        if !b.ends_with(" (deleted)") && b.starts_with('/') {
            out.push(PathBuf::from(b));
        }
    }
    out
}

fn read_sys(dev: &Path, attr: &str) -> Option<String> {
    let name = dev.file_name()?.to_str()?;
    fs::read_to_string(format!("/sys/block/{name}/{attr}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every attached loop device whose backing file is `image`.
pub fn devices_backed_by(image: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let want = image.to_string_lossy();
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.starts_with("loop") {
                return None;
            }
            let backing = fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            let backing = backing.trim();
            let backing = backing.strip_suffix(" (deleted)").unwrap_or(backing);
            (backing == want).then(|| PathBuf::from(format!("/dev/{name}")))
        })
        .collect()
}

// BLKFLSBUF: write back and drop a block device's buffer cache.
nix::ioctl_none!(blkflsbuf, 0x12, 97);

/// Drops the buffer cache of the block device at `dev` (BLKFLSBUF): what is read through it
/// next comes from its backing file.
pub fn flush_buffers(dev: &Path) -> Result<()> {
    let f = File::open(dev).with_context(|| format!("opening {}", dev.display()))?;
    // SAFETY: BLKFLSBUF takes no argument; the descriptor is open for the call's length.
    unsafe { blkflsbuf(std::os::fd::AsRawFd::as_raw_fd(&f)) }
        .map(|_| ())
        .map_err(|e| {
            anyhow::anyhow!(
                "dropping the buffer cache of {} (BLKFLSBUF): {e}",
                dev.display()
            )
        })
}
