//! Block-device counters from /sys/block/DEV/stat (Documentation/block/stat.rst), read before
//! and after a phase, so write amplification and read traffic are visible next to the
//! workload's own byte counts.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::results::device::ModelledIo;
use crate::results::DeviceDelta;

/// One reading of a device's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_sectors: u64,
    pub write_ios: u64,
    pub write_sectors: u64,
    pub discard_sectors: u64,
    pub flush_ios: u64,
}

impl DiskStat {
    /// Parses the contents of a `stat` file.
    pub fn parse(text: &str) -> Option<Self> {
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() < 11 {
            return None;
        }
        Some(Self {
            read_ios: f[0],
            read_sectors: f[2],
            write_ios: f[4],
            write_sectors: f[6],
            discard_sectors: f.get(13).copied().unwrap_or(0),
            flush_ios: f.get(15).copied().unwrap_or(0),
        })
    }

    pub fn read(stat_file: &Path) -> Option<Self> {
        Self::parse(&fs::read_to_string(stat_file).ok()?)
    }

    /// The change from `before` to `self`; sectors are always 512 bytes in this file.
    pub fn delta(self, before: DiskStat) -> DeviceDelta {
        DeviceDelta {
            read_bytes: self.read_sectors.saturating_sub(before.read_sectors) * 512,
            write_bytes: self.write_sectors.saturating_sub(before.write_sectors) * 512,
            read_ios: self.read_ios.saturating_sub(before.read_ios),
            write_ios: self.write_ios.saturating_sub(before.write_ios),
            discard_bytes: self.discard_sectors.saturating_sub(before.discard_sectors) * 512,
            flush_ios: self.flush_ios.saturating_sub(before.flush_ios),
        }
    }
}

/// What finishes an emulated disk's record of a phase, called at the phase's end.
pub type PhaseEnd = Box<dyn FnOnce() -> anyhow::Result<ModelledIo> + Send + Sync>;

/// An emulated disk's own account of a phase (what it served, how late): asked at the phase's
/// start, it returns what completes the record at its end. Implemented by the testbed's
/// device server handle; measurement knows nothing else of emulated disks.
pub trait ModelProbe: Send + Sync + std::fmt::Debug {
    fn begin(&self) -> anyhow::Result<PhaseEnd>;
}

/// A shared [`ModelProbe`].
pub type Probe = Arc<dyn ModelProbe>;

/// The stat files of the devices a run is measured on, and the probes of their emulated disks.
#[derive(Debug, Clone, Default)]
pub struct Devices {
    pub main: Option<PathBuf>,
    pub journal: Option<PathBuf>,
    /// The main device's emulated disk, when it is one.
    pub model: Option<Probe>,
    /// The journal device's emulated disk, when it is one.
    pub journal_model: Option<Probe>,
}

impl Devices {
    /// For a block device node such as /dev/loop3 or /dev/sda1.
    pub fn stat_file_of_device(dev: &Path) -> Option<PathBuf> {
        let md = fs::metadata(dev).ok()?;
        stat_file_of_devnum(md.rdev())
    }

    /// For the device a path lives on (`--dir`); none for filesystems on anonymous devices
    /// such as btrfs or tmpfs.
    pub fn stat_file_of_path(path: &Path) -> Option<PathBuf> {
        let md = fs::metadata(path).ok()?;
        stat_file_of_devnum(md.dev())
    }
}

fn stat_file_of_devnum(dev: u64) -> Option<PathBuf> {
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    if maj == 0 {
        return None;
    }
    let p = PathBuf::from(format!("/sys/dev/block/{maj}:{min}/stat"));
    p.exists().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_stat_line_and_takes_deltas() {
        let before = DiskStat::parse("  100 0 800 5 200 3 1600 9 0 10 20 0 0 0 0 4 1").unwrap();
        let after = DiskStat::parse("  110 0 1000 5 260 3 2600 9 0 10 20 1 0 8 0 6 1").unwrap();
        let d = after.delta(before);
        assert_eq!(d.read_ios, 10);
        assert_eq!(d.read_bytes, 200 * 512);
        assert_eq!(d.write_ios, 60);
        assert_eq!(d.write_bytes, 1000 * 512);
        assert_eq!(d.discard_bytes, 8 * 512);
        assert_eq!(d.flush_ios, 2);
        assert!(DiskStat::parse("1 2 3").is_none());
    }
}
