//! Reading one file's block map: FIEMAP with FIEMAP_FLAG_SYNC (so delayed allocations are placed
//! first), FIBMAP block by block where FIEMAP is not supported, and the per-filesystem rules
//! that the ideal-extent count needs.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::metrics::{file_layout, FileLayout, FormatRules, MapMethod};
use super::sys::{self, fs_name, magic, RawExtent};

/// What the scanner knows about one filesystem (one `st_dev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsRules {
    /// `statfs` magic.
    pub magic: i64,
    /// Block size files are mapped in (FIGETBSZ).
    pub block_size: u64,
    /// Longest contiguous extent of ordinary data, bytes.
    pub max_extent: u64,
    /// Longest extent of compressed data, bytes.
    pub max_encoded_extent: u64,
    /// ext2/3/4: whether the superblock has the `extent` feature (`None`: not ext, or the
    /// device could not be read). Without it every file is block-mapped.
    pub ext_extents: Option<bool>,
}

/// Reads the `extent` feature bit of the ext2/3/4 superblock of device `dev` (needs read access
/// to the device node).
fn ext_extent_feature(dev: u64) -> Option<bool> {
    use std::os::unix::fs::FileExt;
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    let f = std::fs::File::open(format!("/dev/{name}")).ok()?;
    let mut sb = [0u8; 1024];
    f.read_exact_at(&mut sb, 1024).ok()?;
    if u16::from_le_bytes([sb[56], sb[57]]) != 0xEF53 {
        return None;
    }
    let incompat = u32::from_le_bytes([sb[96], sb[97], sb[98], sb[99]]);
    Some(incompat & 0x40 != 0)
}

impl FsRules {
    /// Learns the rules from any open file of the filesystem.
    pub fn probe(fd: BorrowedFd<'_>) -> io::Result<Self> {
        let (magic, _, f_bsize) = sys::fstatfs(fd)?;
        let block_size = match sys::figetbsz(fd) {
            Ok(b) if b > 0 => b as u64,
            _ => f_bsize.max(512),
        };
        let (max_extent, max_encoded_extent) = match magic {
            // ext4 extents hold at most 32768 blocks; block-mapped files are bounded by the
            // block group (blocks per group = 8 × block size).
            magic::EXT => (32768 * block_size, 32768 * block_size),
            // xfs: an extent never leaves its allocation group, and holds at most 2^21 blocks.
            magic::XFS => {
                let ag = sys::xfs_agblocks(fd).map(|a| a as u64).unwrap_or(u64::MAX);
                let cap = (1u64 << 21).min(ag).max(1);
                (cap * block_size, cap * block_size)
            }
            // btrfs: BTRFS_MAX_EXTENT_SIZE 128 MiB; compressed extents hold 128 KiB.
            magic::BTRFS => (128 << 20, 128 << 10),
            _ => (u64::MAX, u64::MAX),
        };
        let ext_extents = if magic == magic::EXT {
            #[allow(clippy::unnecessary_cast)]
            crate::base::sys::fstat(std::os::fd::AsFd::as_fd(&fd))
                .ok()
                .and_then(|st| ext_extent_feature(st.st_dev as u64))
        } else {
            None
        };
        Ok(Self {
            magic,
            block_size,
            max_extent,
            max_encoded_extent,
            ext_extents,
        })
    }

    /// The format rules for one file.
    pub fn format(&self, block_mapped: bool) -> FormatRules {
        FormatRules {
            block_size: self.block_size,
            max_extent: if block_mapped {
                8 * self.block_size * self.block_size
            } else {
                self.max_extent
            },
            max_encoded_extent: self.max_encoded_extent,
            block_mapped,
        }
    }

    /// The filesystem's short name, for messages.
    pub fn name(&self) -> &'static str {
        fs_name(self.magic)
    }
}

/// The layout of a file mapped by the on-disk reader ([`super::ext`]), judged by the same rules
/// as [`map_file_with`] judges a FIEMAP map — including when it takes a file to be
/// block-mapped — so that both methods give the same figures.
pub fn layout_from_ondisk(m: &super::ext::OndiskMap, rules: &FsRules) -> FileLayout {
    let block_mapped = match rules.ext_extents {
        Some(false) => true,
        _ if m.extents.len() >= 2 || rules.ext_extents.is_none() => m.block_mapped,
        _ => false,
    };
    let mut fl = file_layout(&m.extents, m.size, &rules.format(block_mapped));
    fl.method = MapMethod::Ondisk;
    fl
}

/// Reads the extent map of an open regular file of `size` bytes and computes its layout.
pub fn map_file(fd: BorrowedFd<'_>, size: u64, rules: &FsRules) -> io::Result<FileLayout> {
    map_file_with(fd, size, rules, MapMethod::Fiemap)
}

/// As [`map_file`], but `MapMethod::Fibmap` forces the FIBMAP scan (as `filefrag -B`).
pub fn map_file_with(
    fd: BorrowedFd<'_>,
    size: u64,
    rules: &FsRules,
    method: MapMethod,
) -> io::Result<FileLayout> {
    // Whether an ext2/3/4 file is block-mapped matters only for files of 2+ extents (where
    // indirect blocks can sit between data blocks), so the inode flags are read only then —
    // unless the filesystem has no extent feature at all, where every file is block-mapped.
    let ext_block_mapped = |n: usize| -> bool {
        if rules.magic != magic::EXT {
            return false;
        }
        match rules.ext_extents {
            Some(false) => true,
            _ if n >= 2 || rules.ext_extents.is_none() => {
                sys::getflags(fd).is_ok_and(|f| f & sys::EXT4_EXTENTS_FL == 0)
            }
            _ => false,
        }
    };
    let mut extents: Vec<RawExtent> = Vec::new();
    let first = if method == MapMethod::Fibmap {
        Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
    } else {
        sys::fiemap(fd, sys::FIEMAP_FLAG_SYNC, |e| extents.push(e))
    };
    let got = match first {
        Err(e) if e.raw_os_error() == Some(libc::EBADR) => {
            // The filesystem does not take the sync flag: sync by hand, map without it.
            extents.clear();
            let _ = nix::unistd::fsync(std::os::fd::AsRawFd::as_raw_fd(&fd));
            sys::fiemap(fd, 0, |e| extents.push(e))
        }
        other => other,
    };
    match got {
        Ok(()) => {
            let format = rules.format(ext_block_mapped(extents.len()));
            let mut fl = file_layout(&extents, size, &format);
            fl.method = MapMethod::Fiemap;
            Ok(fl)
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL)
            ) =>
        {
            let format = rules.format(ext_block_mapped(2));
            let extents = fibmap_extents(fd, size, &format).map_err(|e| {
                if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTTY)) {
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("{} has neither FIEMAP nor FIBMAP", rules.name()),
                    )
                } else {
                    e
                }
            })?;
            let mut fl = file_layout(&extents, size, &format);
            // filefrag's FIBMAP count: every extent it builds is one (no merging across holes).
            fl.extents = extents.len() as u32;
            fl.ideal_extents = fl.ideal_extents.min(fl.extents);
            fl.method = MapMethod::Fibmap;
            Ok(fl)
        }
        Err(e) => Err(e),
    }
}

/// Builds extents from FIBMAP, block by block, as filefrag's `filefrag_fibmap` does: a new
/// extent starts where a block does not follow the previous one on disk (allowing for the
/// indirect blocks of block-mapped ext2/3 files) or in the file.
pub fn fibmap_extents(
    fd: BorrowedFd<'_>,
    size: u64,
    format: &FormatRules,
) -> io::Result<Vec<RawExtent>> {
    // Delayed allocations must be placed first.
    let _ = nix::unistd::fsync(std::os::fd::AsRawFd::as_raw_fd(&fd));
    let bs = format.block_size.max(1);
    let bpib = bs / 4;
    let nblocks = size.div_ceil(bs);
    let mut out: Vec<RawExtent> = Vec::new();
    let mut last_block = 0u64;
    for i in 0..nblocks {
        if format.block_mapped && last_block != 0 {
            last_block += super::metrics::indirect_blocks_before(i, bpib);
        }
        let block = sys::fibmap(fd, i)?;
        if block == 0 {
            continue;
        }
        let logical = i * bs;
        let extend = out
            .last()
            .is_some_and(|e| block == last_block + 1 && e.logical + e.length == logical);
        if extend {
            if let Some(e) = out.last_mut() {
                e.length += bs;
            }
        } else {
            out.push(RawExtent {
                logical,
                physical: block * bs,
                length: bs,
                flags: 0,
            });
        }
        last_block = block;
    }
    Ok(out)
}

/// Opens and maps one file by path (the public one-file entry point).
pub fn scan_path(path: &std::path::Path, method: MapMethod) -> anyhow::Result<FileLayout> {
    use anyhow::Context;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let md = f
        .metadata()
        .with_context(|| format!("stat {}", path.display()))?;
    if !md.is_file() {
        anyhow::bail!("{} is not a regular file", path.display());
    }
    let rules = FsRules::probe(f.as_fd())
        .with_context(|| format!("reading the filesystem of {}", path.display()))?;
    let mut fl = map_file_with(f.as_fd(), md.len(), &rules, method)
        .with_context(|| format!("reading the block map of {}", path.display()))?;
    fl.path = path.display().to_string();
    Ok(fl)
}
