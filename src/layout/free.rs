//! Free-space fragmentation of a mounted filesystem: a log2 histogram of free extents (the one
//! e2freefrag prints), the largest free extent, largest free / total free, free extents per GiB.
//!
//! Where the numbers come from, in order of preference (the report says which was used):
//! * `getfsmap` — the GETFSMAP ioctl (ext4, xfs): the kernel's own space map, the records owned
//!   by "free space". On a mounted ext4 this is exactly what e2freefrag itself reads.
//! * `block-bitmaps` — for ext2/3/4 where GETFSMAP is refused (e.g. the ext2 driver): the
//!   block bitmaps of every group are read from the device (through its page cache, where the
//!   mounted filesystem keeps them current) by [`super::ext::ExtReader::free_extents`], which
//!   finds the runs e2freefrag finds when it reads the bitmaps (as it does without GETFSMAP).
//!   Needs read access to the device (root). Under the ext4 driver, blocks the allocator holds
//!   in preallocations but has not used are free in the bitmaps (and free again after a
//!   remount), where GETFSMAP counts them as used — one reason GETFSMAP comes first.
//! * `e2freefrag` — for ext2/3/4 where neither works (the device cannot be read by us, or a
//!   layout the bitmap reader does not model): e2freefrag is run on the device and its
//!   histogram parsed.
//! * `btrfs-tree-search` — btrfs: the block groups and allocated extents of the extent tree (tree
//!   search ioctl); free extents are the gaps inside data block groups, plus the device space not
//!   yet allocated to any chunk (reported on its own as well).
//!
//! Anything else is an [`Unsupported`] error naming the filesystem, never a made-up number.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::sys::{self, fs_name, magic};

use super::free_extents::log2_floor;
pub use super::free_extents::{freefrag_label, FreeBucket, FreeHistogram, FreeSpace, Unsupported};

use crate::base::sys::proc::mount_of;

/// Scans the free space of the filesystem mounted at (or holding) `path`.
pub fn free_space(path: &Path) -> Result<FreeSpace> {
    // Non-blocking: a FIFO named as the mount point is refused below, not waited on.
    let dir = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?
    };
    let fd = dir.as_fd();
    let (fs_magic, _, f_bsize) =
        sys::fstatfs(fd).with_context(|| format!("statfs {}", path.display()))?;
    let mount = mount_of(path);
    let fs_type = mount
        .as_ref()
        .map(|m| m.1.clone())
        .unwrap_or_else(|| fs_name(fs_magic).to_string());
    // Free-space records are only exact once everything pending is on disk.
    let _ = nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&fd));
    if fs_magic == magic::BTRFS {
        return super::btrfs::free_space(path, fd, &fs_type);
    }
    let block_size = match sys::figetbsz(fd) {
        Ok(b) if b > 0 => b as u64,
        _ => f_bsize.max(512),
    };
    match getfsmap_free(fd, block_size) {
        Ok((hist, total, free)) => {
            return Ok(hist.report(path, &fs_type, "getfsmap", total, free));
        }
        Err(e) => {
            let refused = matches!(
                e.raw_os_error(),
                Some(libc::ENOTTY) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
            );
            if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                return Err(crate::base::error::bad_input(format!(
                    "reading the free space of {} needs root (GETFSMAP requires CAP_SYS_ADMIN)",
                    path.display()
                )));
            }
            if !refused {
                return Err(anyhow::Error::new(e))
                    .with_context(|| format!("GETFSMAP on {}", path.display()));
            }
        }
    }
    if fs_magic == magic::EXT {
        if let Ok(fs) = bitmap_free(path, fd, &fs_type, block_size) {
            return Ok(fs);
        }
        let Some((_, _, dev)) = mount else {
            anyhow::bail!(
                "{}: no mount entry, so no device for e2freefrag",
                path.display()
            );
        };
        return e2freefrag(path, &fs_type, Path::new(&dev));
    }
    Err(anyhow::Error::new(Unsupported {
        fs: fs_type,
        path: path.display().to_string(),
        why: "it has no GETFSMAP ioctl, and fsgauge reads free space otherwise only on ext2/3/4 and btrfs".into(),
    }))
}

/// The free space of a mounted ext2/3/4 from its block bitmaps (`block-bitmaps`).
pub fn bitmap_free(
    path: &Path,
    fd: std::os::fd::BorrowedFd<'_>,
    fs_type: &str,
    block_size: u64,
) -> std::result::Result<FreeSpace, String> {
    let st = crate::base::sys::fstat(fd)
        .map_err(|e| format!("stat: {}", std::io::Error::from_raw_os_error(e as i32)))?;
    #[allow(clippy::unnecessary_cast)]
    let reader = super::ext::ExtReader::open(fd, st.st_dev as u64)?;
    if reader.sb.block_size != block_size {
        return Err(format!(
            "{}: block size {} where the mount says {block_size}",
            reader.device.display(),
            reader.sb.block_size
        ));
    }
    let mut hist = FreeHistogram::new(block_size);
    let (total, free) = reader.free_extents(|n| hist.add(n))?;
    Ok(hist.report(path, fs_type, "block-bitmaps", total, free))
}

fn getfsmap_free(
    fd: std::os::fd::BorrowedFd<'_>,
    block_size: u64,
) -> std::io::Result<(FreeHistogram, u64, u64)> {
    let mut hist = FreeHistogram::new(block_size);
    let mut free = 0u64;
    let mut end = 0u64;
    let mut first_dev: Option<u32> = None;
    sys::getfsmap(fd, |r| {
        // The data device only (the first one reported): xfs log/realtime devices hold no files'
        // ordinary data.
        let dev = *first_dev.get_or_insert(r.device);
        if r.device != dev {
            return;
        }
        end = end.max(r.physical + r.length);
        if r.flags & sys::FMR_OF_SPECIAL_OWNER != 0 && r.owner == sys::FMR_OWN_FREE {
            let blocks = r.length / block_size;
            hist.add(blocks);
            free += blocks;
        }
    })?;
    Ok((hist, end / block_size, free))
}

/// Runs e2freefrag on `device` and reads its report.
pub fn e2freefrag(path: &Path, fs_type: &str, device: &Path) -> Result<FreeSpace> {
    let prog = crate::base::sys::proc::find_program("e2freefrag").ok_or_else(|| {
        anyhow::Error::new(Unsupported {
            fs: fs_type.into(),
            path: path.display().to_string(),
            why: "GETFSMAP is refused and e2freefrag is not installed (apt-get install e2fsprogs)"
                .into(),
        })
    })?;
    let out = crate::base::signals::output(Command::new(&prog).arg(device))
        .with_context(|| format!("running {} {}", prog.display(), device.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} {} failed: {}",
            prog.display(),
            device.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = parse_e2freefrag(&text)
        .with_context(|| format!("reading the output of e2freefrag {}", device.display()))?;
    let mut fs = parsed.report(path, fs_type);
    fs.method = "e2freefrag".into();
    Ok(fs)
}

/// e2freefrag's report, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct E2freefragReport {
    pub block_size: u64,
    pub total_blocks: u64,
    pub free_blocks: u64,
    pub min_kb: u64,
    pub max_kb: u64,
    pub free_extents: u64,
    /// (range label, extents, blocks, percent)
    pub rows: Vec<(String, u64, u64, f64)>,
}

impl E2freefragReport {
    /// As a [`FreeSpace`].
    pub fn report(&self, path: &Path, fs: &str) -> FreeSpace {
        let bs = self.block_size.max(1);
        let free_bytes = self.free_blocks * bs;
        let gib = free_bytes as f64 / (1u64 << 30) as f64;
        let mut histogram = Vec::new();
        for (label, n, blocks, pct) in &self.rows {
            let from = label
                .split("...")
                .next()
                .and_then(|s| crate::base::units::parse_size(s).ok())
                .unwrap_or(0);
            let idx = log2_floor(from / bs) + 1;
            histogram.push(FreeBucket {
                from_bytes: from,
                to_bytes: (1u64 << idx.min(63)) * bs,
                range: label.clone(),
                extents: *n,
                blocks: *blocks,
                percent: *pct,
            });
        }
        let largest = self.max_kb * 1024;
        FreeSpace {
            path: path.display().to_string(),
            fs: fs.into(),
            method: "e2freefrag".into(),
            block_size: bs,
            total_blocks: self.total_blocks,
            free_blocks: self.free_blocks,
            free_bytes,
            free_extents: self.free_extents,
            min_free_extent: self.min_kb * 1024,
            largest_free_extent: largest,
            mean_free_extent: if self.free_extents > 0 {
                free_bytes as f64 / self.free_extents as f64
            } else {
                0.0
            },
            largest_free_share: (free_bytes > 0).then(|| largest as f64 / free_bytes as f64),
            free_extents_per_gib: (free_bytes > 0).then(|| self.free_extents as f64 / gib),
            histogram,
            unallocated_bytes: None,
        }
    }
}

/// Parses e2freefrag's output.
pub fn parse_e2freefrag(text: &str) -> Result<E2freefragReport> {
    let num = |line: &str, key: &str| -> Option<u64> {
        line.strip_prefix(key)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut r = E2freefragReport {
        block_size: 0,
        total_blocks: 0,
        free_blocks: 0,
        min_kb: 0,
        max_kb: 0,
        free_extents: 0,
        rows: Vec::new(),
    };
    let mut in_hist = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = num(t, "Blocksize:") {
            r.block_size = v;
        } else if let Some(v) = num(t, "Total blocks:") {
            r.total_blocks = v;
        } else if let Some(v) = num(t, "Free blocks:") {
            r.free_blocks = v;
        } else if let Some(v) = num(t, "Min. free extent:") {
            r.min_kb = v;
        } else if let Some(v) = num(t, "Max. free extent:") {
            r.max_kb = v;
        } else if let Some(v) = num(t, "Num. free extent:") {
            r.free_extents = v;
        } else if t.starts_with("HISTOGRAM OF FREE EXTENT SIZES") {
            in_hist = true;
        } else if in_hist && t.contains("...") {
            let (label, rest) = t
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("histogram line without ':': {t:?}"))?;
            let label: String = label.split_whitespace().collect();
            let nums: Vec<&str> = rest.split_whitespace().collect();
            if nums.len() < 3 {
                anyhow::bail!("histogram line with too few numbers: {t:?}");
            }
            let n: u64 = nums[0].parse().with_context(|| format!("in {t:?}"))?;
            let b: u64 = nums[1].parse().with_context(|| format!("in {t:?}"))?;
            let p: f64 = nums[2]
                .trim_end_matches('%')
                .parse()
                .with_context(|| format!("in {t:?}"))?;
            r.rows.push((label, n, b, p));
        }
    }
    if r.block_size == 0 {
        anyhow::bail!("no \"Blocksize:\" line");
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::free_extents::BUCKETS;

    #[test]
    fn buckets_follow_e2freefrag() {
        let mut h = FreeHistogram::new(4096);
        for b in [1, 2, 3, 4, 1000, 70000] {
            h.add(b);
        }
        let r = h.report(Path::new("/x"), "ext4", "getfsmap", 100_000, 71_010);
        let rows: Vec<_> = r
            .histogram
            .iter()
            .map(|b| (b.range.as_str(), b.extents, b.blocks))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("4K...8K-", 1, 1),
                ("8K...16K-", 2, 5),
                ("16K...32K-", 1, 4),
                ("2M...4M-", 1, 1000),
                ("256M...512M-", 1, 70000)
            ]
        );
        assert_eq!(r.largest_free_extent, 70000 * 4096);
        assert_eq!(r.min_free_extent, 4096);
        assert_eq!(r.free_extents, 6);
        assert_eq!(freefrag_label(1, 1024), "1K...2K-");
        assert_eq!(freefrag_label(BUCKETS - 1, 4096), "4T...max");
    }

    #[test]
    fn parses_e2freefrag_output() {
        let text = "Device: /dev/loop0\nBlocksize: 1024 bytes\nTotal blocks: 262144\nFree blocks: 228672 (87.2%)\n\nMin. free extent: 13 KB \nMax. free extent: 57343 KB\nAvg. free extent: 5317 KB\nNum. free extent: 43\n\nHISTOGRAM OF FREE EXTENT SIZES:\nExtent Size Range :  Free extents   Free Blocks  Percent\n    8K...   16K-  :             1            13    0.01%\n   32M...   64M-  :             3        138744   60.67%\n";
        let r = parse_e2freefrag(text).expect("parses");
        assert_eq!(r.block_size, 1024);
        assert_eq!(r.free_blocks, 228672);
        assert_eq!(r.free_extents, 43);
        assert_eq!(r.max_kb, 57343);
        assert_eq!(r.rows[0], ("8K...16K-".to_string(), 1, 13, 0.01));
        assert_eq!(r.rows[1].2, 138744);
        let f = r.report(Path::new("/m"), "ext2");
        assert_eq!(f.histogram[1].from_bytes, 32 << 20);
        assert_eq!(f.histogram[1].to_bytes, 64 << 20);
        assert!(parse_e2freefrag("nonsense").is_err());
    }
}
