//! btrfs free space through the tree-search ioctl (BTRFS_IOC_TREE_SEARCH): btrfs has no
//! GETFSMAP, and its free space lives in two places — gaps inside the data block groups (read
//! from the block-group items and the EXTENT_ITEMs of the extent tree), and device space not yet
//! given to any chunk (gaps between the DEV_EXTENTs of the device tree). Both can take file data,
//! so both are free extents here; the unallocated part is also reported on its own.

use std::os::fd::BorrowedFd;
use std::path::Path;

use anyhow::{Context, Result};

use super::free_extents::{FreeHistogram, FreeSpace};
use super::sys;

const EXTENT_TREE: u64 = 2;
const CHUNK_TREE: u64 = 3;
const DEV_TREE: u64 = 4;
const BLOCK_GROUP_TREE: u64 = 11;
const EXTENT_ITEM: u32 = 168;
const METADATA_ITEM: u32 = 169;
const BLOCK_GROUP_ITEM: u32 = 192;
const DEV_EXTENT: u32 = 204;
const DEV_ITEM: u32 = 216;
const DEV_ITEMS_OBJECTID: u64 = 1;
const BG_DATA: u64 = 1;
/// btrfs never allocates the first MiB of a device.
const DEVICE_RESERVED: u64 = 1 << 20;

fn le64(d: &[u8], at: usize) -> u64 {
    d.get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0)
}

/// A block group: logical start, length, type flags.
#[derive(Debug, Clone, Copy)]
struct BlockGroup {
    start: u64,
    length: u64,
    flags: u64,
}

fn block_groups(fd: BorrowedFd<'_>) -> std::io::Result<Vec<BlockGroup>> {
    let mut out = Vec::new();
    for tree in [EXTENT_TREE, BLOCK_GROUP_TREE] {
        let r = sys::btrfs_tree_search(
            fd,
            tree,
            (0, u64::MAX),
            (BLOCK_GROUP_ITEM, BLOCK_GROUP_ITEM),
            |it| {
                out.push(BlockGroup {
                    start: it.objectid,
                    length: it.offset,
                    flags: le64(&it.data, 16),
                })
            },
        );
        match r {
            Ok(()) if !out.is_empty() => return Ok(out),
            // The block-group tree does not exist without that feature.
            Err(e) if tree == BLOCK_GROUP_TREE && e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
            Ok(()) => {}
        }
    }
    Ok(out)
}

/// Scans free space of a mounted btrfs.
pub fn free_space(path: &Path, fd: BorrowedFd<'_>, fs_type: &str) -> Result<FreeSpace> {
    let ctx = || format!("btrfs tree search on {} (needs root)", path.display());
    let (nodesize, sectorsize) = sys::btrfs_fs_info(fd).with_context(ctx)?;
    let sector = sectorsize.max(512) as u64;
    let mut hist = FreeHistogram::new(sector);
    let mut free_bytes = 0u64;
    let mut add_gap = |hist: &mut FreeHistogram, len: u64| {
        if len >= sector {
            hist.add(len / sector);
            free_bytes += len / sector * sector;
        }
    };
    let groups = block_groups(fd).with_context(ctx)?;
    for bg in groups.iter().filter(|g| g.flags & BG_DATA != 0) {
        let end = bg.start + bg.length;
        let mut cursor = bg.start;
        let mut gaps = Vec::new();
        sys::btrfs_tree_search(
            fd,
            EXTENT_TREE,
            (bg.start, end - 1),
            (EXTENT_ITEM, METADATA_ITEM),
            |it| {
                let len = if it.item_type == METADATA_ITEM {
                    nodesize as u64
                } else {
                    it.offset
                };
                if it.objectid > cursor {
                    gaps.push(it.objectid - cursor);
                }
                cursor = cursor.max(it.objectid + len);
            },
        )
        .with_context(ctx)?;
        if end > cursor {
            gaps.push(end - cursor);
        }
        for g in gaps {
            add_gap(&mut hist, g);
        }
    }
    // Unallocated device space.
    let mut devices: Vec<(u64, u64)> = Vec::new();
    sys::btrfs_tree_search(
        fd,
        CHUNK_TREE,
        (DEV_ITEMS_OBJECTID, DEV_ITEMS_OBJECTID),
        (DEV_ITEM, DEV_ITEM),
        |it| {
            devices.push((le64(&it.data, 0), le64(&it.data, 8)));
        },
    )
    .with_context(ctx)?;
    let mut unallocated = 0u64;
    let mut total_bytes = 0u64;
    for (devid, size) in &devices {
        total_bytes += size;
        let mut cursor = DEVICE_RESERVED;
        let mut gaps = Vec::new();
        sys::btrfs_tree_search(
            fd,
            DEV_TREE,
            (*devid, *devid),
            (DEV_EXTENT, DEV_EXTENT),
            |it| {
                let len = le64(&it.data, 24);
                if it.offset > cursor {
                    gaps.push(it.offset - cursor);
                }
                cursor = cursor.max(it.offset + len);
            },
        )
        .with_context(ctx)?;
        if *size > cursor {
            gaps.push(size - cursor);
        }
        for g in gaps {
            unallocated += g / sector * sector;
            add_gap(&mut hist, g);
        }
    }
    let mut report = hist.report(
        path,
        fs_type,
        "btrfs-tree-search",
        total_bytes / sector,
        free_bytes / sector,
    );
    report.unallocated_bytes = Some(unallocated);
    Ok(report)
}
