//! The kernel interfaces the layout module reads: FIEMAP, FIBMAP, FIGETBSZ, the ext2/3/4 inode
//! flags, GETFSMAP, the XFS geometry and the btrfs tree search. Raw `ioctl(2)` with the request
//! numbers and structures of the kernel's uapi headers (`linux/fiemap.h`, `linux/fs.h`,
//! `linux/fsmap.h`, `xfs_fs.h`, `linux/btrfs.h`), kept here so the rest of the module is safe
//! code.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `FS_IOC_FIEMAP` = `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// `FIBMAP` = `_IO(0x00, 1)`.
const FIBMAP: libc::c_ulong = 1;
/// `FIGETBSZ` = `_IO(0x00, 2)`.
const FIGETBSZ: libc::c_ulong = 2;
/// `FS_IOC_GETFLAGS` = `_IOR('f', 1, long)`.
const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
/// `FS_IOC_GETFSMAP` = `_IOWR('X', 59, struct fsmap_head)` (192-byte head).
const FS_IOC_GETFSMAP: libc::c_ulong = 0xC0C0_583B;
/// `XFS_IOC_FSGEOMETRY_V1` = `_IOR('X', 100, struct xfs_fsop_geom_v1)` (112 bytes).
const XFS_IOC_FSGEOMETRY_V1: libc::c_ulong = 0x8070_5864;
/// `BTRFS_IOC_TREE_SEARCH` = `_IOWR(0x94, 17, struct btrfs_ioctl_search_args)` (4096 bytes).
const BTRFS_IOC_TREE_SEARCH: libc::c_ulong = 0xD000_9411;
/// `BTRFS_IOC_FS_INFO` = `_IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)` (1024 bytes).
const BTRFS_IOC_FS_INFO: libc::c_ulong = 0x8400_941F;

/// `FIEMAP_FLAG_SYNC`: write dirty data (and so place delayed allocations) before mapping.
pub const FIEMAP_FLAG_SYNC: u32 = 0x1;

/// `FIEMAP_EXTENT_*` flags.
pub mod fe {
    pub const LAST: u32 = 0x1;
    pub const UNKNOWN: u32 = 0x2;
    pub const DELALLOC: u32 = 0x4;
    pub const ENCODED: u32 = 0x8;
    pub const DATA_ENCRYPTED: u32 = 0x80;
    pub const NOT_ALIGNED: u32 = 0x100;
    pub const DATA_INLINE: u32 = 0x200;
    pub const DATA_TAIL: u32 = 0x400;
    pub const UNWRITTEN: u32 = 0x800;
    pub const MERGED: u32 = 0x1000;
    pub const SHARED: u32 = 0x2000;
}

/// `EXT4_EXTENTS_FL`: the inode maps its blocks with an extent tree (not block-mapped).
pub const EXT4_EXTENTS_FL: u32 = 0x0008_0000;

/// One extent as FIEMAP returns it (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawExtent {
    /// Offset in the file.
    pub logical: u64,
    /// Offset on the device (or in the filesystem's address space, btrfs).
    pub physical: u64,
    /// Length.
    pub length: u64,
    /// `FIEMAP_EXTENT_*` flags.
    pub flags: u32,
}

fn ioctl_ptr(fd: BorrowedFd<'_>, req: libc::c_ulong, arg: *mut libc::c_void) -> io::Result<()> {
    // SAFETY: every caller passes a buffer of the size the request number encodes.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Extents per FIEMAP call: the 16 KiB buffer filefrag uses.
const FIEMAP_BATCH: usize = 290;
const FIEMAP_HEAD_U64: usize = 4;
const FIEMAP_EXTENT_U64: usize = 7;

/// Reads a file's whole extent map with FIEMAP, calling `each` for every extent in logical
/// order. `flags` is 0 or [`FIEMAP_FLAG_SYNC`]. Repeats the call from the end of the last
/// extent until the kernel marks the last one, as filefrag does.
pub fn fiemap(fd: BorrowedFd<'_>, flags: u32, mut each: impl FnMut(RawExtent)) -> io::Result<()> {
    // struct fiemap: fm_start u64, fm_length u64, fm_flags u32, fm_mapped_extents u32,
    // fm_extent_count u32, fm_reserved u32; then struct fiemap_extent[] of 56 bytes each:
    // fe_logical, fe_physical, fe_length, fe_reserved64[2], fe_flags u32, fe_reserved[3] u32.
    thread_local! {
        // One buffer per thread, reused: zeroing 16 KiB per file showed in profiles.
        static BUF: std::cell::RefCell<Vec<u64>> =
            std::cell::RefCell::new(vec![0u64; FIEMAP_HEAD_U64 + FIEMAP_BATCH * FIEMAP_EXTENT_U64]);
    }
    BUF.with(|b| fiemap_into(fd, flags, &mut b.borrow_mut(), &mut each))
}

fn fiemap_into(
    fd: BorrowedFd<'_>,
    flags: u32,
    buf: &mut [u64],
    each: &mut impl FnMut(RawExtent),
) -> io::Result<()> {
    let mut start = 0u64;
    loop {
        buf[..FIEMAP_HEAD_U64].fill(0);
        buf[0] = start;
        buf[1] = u64::MAX;
        // fm_flags (low half of word 2) and fm_extent_count (low half of word 3), little or big
        // endian alike through u32 views.
        {
            let head = buf.as_mut_ptr() as *mut u32;
            // SAFETY: within the first 32 bytes of `buf`.
            unsafe {
                *head.add(4) = flags;
                *head.add(5) = 0;
                *head.add(6) = FIEMAP_BATCH as u32;
            }
        }
        ioctl_ptr(fd, FS_IOC_FIEMAP, buf.as_mut_ptr() as *mut libc::c_void)?;
        let head = buf.as_ptr() as *const u32;
        // SAFETY: within the head.
        let mapped = unsafe { *head.add(5) } as usize;
        if mapped == 0 {
            return Ok(());
        }
        let mut last = false;
        let mut end = start;
        for i in 0..mapped.min(FIEMAP_BATCH) {
            let b = FIEMAP_HEAD_U64 + i * FIEMAP_EXTENT_U64;
            let fl = {
                let p = buf[b + 5..].as_ptr() as *const u32;
                // SAFETY: fe_flags is the first u32 of word 5 of the extent.
                unsafe { *p }
            };
            let e = RawExtent {
                logical: buf[b],
                physical: buf[b + 1],
                length: buf[b + 2],
                flags: fl,
            };
            end = e.logical.saturating_add(e.length);
            last |= fl & fe::LAST != 0;
            each(e);
        }
        if last || end <= start {
            return Ok(());
        }
        start = end;
    }
}

/// The physical block of logical block `block` (FIBMAP; 0 = a hole). Needs CAP_SYS_RAWIO.
pub fn fibmap(fd: BorrowedFd<'_>, block: u64) -> io::Result<u64> {
    let mut b: libc::c_int =
        libc::c_int::try_from(block).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    ioctl_ptr(fd, FIBMAP, &mut b as *mut libc::c_int as *mut libc::c_void)?;
    Ok(b as u32 as u64)
}

/// The block size the filesystem maps files in (FIGETBSZ).
pub fn figetbsz(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut b: libc::c_int = 0;
    ioctl_ptr(
        fd,
        FIGETBSZ,
        &mut b as *mut libc::c_int as *mut libc::c_void,
    )?;
    Ok(b as u32)
}

/// The inode flags (`FS_IOC_GETFLAGS`).
pub fn getflags(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut f: libc::c_long = 0;
    ioctl_ptr(
        fd,
        FS_IOC_GETFLAGS,
        &mut f as *mut libc::c_long as *mut libc::c_void,
    )?;
    Ok(f as u32)
}

/// `statfs(2)` magic numbers of the filesystems the module knows.
pub mod magic {
    pub const EXT: i64 = 0xEF53;
    pub const XFS: i64 = 0x5846_5342;
    pub const BTRFS: i64 = 0x9123_683E;
}

/// A filesystem name for a `statfs` magic.
pub fn fs_name(m: i64) -> &'static str {
    match m {
        magic::EXT => "ext2/3/4",
        magic::XFS => "xfs",
        magic::BTRFS => "btrfs",
        0x0102_1994 => "tmpfs",
        0x6969 => "nfs",
        0x794C_7630 => "overlayfs",
        0x6573_5546 => "fuse",
        0x5346_544E => "ntfs",
        0x4d44 => "vfat",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        _ => "unknown",
    }
}

/// The filesystem magic and total blocks of the filesystem holding `fd`.
pub fn fstatfs(fd: BorrowedFd<'_>) -> io::Result<(i64, u64, u64)> {
    let st = crate::base::sys::statfs::fstatfs(fd)?;
    Ok((st.magic, st.blocks, st.block_size))
}

/// XFS allocation-group size in blocks (`XFS_IOC_FSGEOMETRY_V1`).
pub fn xfs_agblocks(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut geo = [0u32; 28];
    ioctl_ptr(
        fd,
        XFS_IOC_FSGEOMETRY_V1,
        geo.as_mut_ptr() as *mut libc::c_void,
    )?;
    Ok(geo[2])
}

/// One GETFSMAP record (bytes).
#[derive(Debug, Clone, Copy, Default)]
pub struct FsmapRecord {
    pub device: u32,
    pub flags: u32,
    pub physical: u64,
    pub owner: u64,
    pub offset: u64,
    pub length: u64,
}

/// `FMR_OF_SPECIAL_OWNER`.
pub const FMR_OF_SPECIAL_OWNER: u32 = 0x10;
/// `FMR_OF_LAST`.
pub const FMR_OF_LAST: u32 = 0x20;
/// `FMR_OWN_FREE` = `FMR_OWNER(0, 1)`.
pub const FMR_OWN_FREE: u64 = 1;

const FSMAP_BATCH: usize = 1024;

/// Walks the whole space map of the filesystem holding `fd` (GETFSMAP), calling `each` for every
/// record in device order.
pub fn getfsmap(fd: BorrowedFd<'_>, mut each: impl FnMut(&FsmapRecord)) -> io::Result<()> {
    // struct fsmap_head: iflags, oflags, count, entries (u32); reserved[6] u64; keys[2]; recs[].
    // struct fsmap: device u32, flags u32, physical, owner, offset, length, reserved[3] (u64):
    // 64 bytes = 8 u64.
    const HEAD: usize = 8; // u64 words before keys
    const REC: usize = 8;
    let mut buf = vec![0u64; HEAD + 2 * REC + FSMAP_BATCH * REC];
    let set_u32 = |buf: &mut [u64], word: usize, half: usize, v: u32| {
        let p = buf[word..].as_mut_ptr() as *mut u32;
        // SAFETY: within the word.
        unsafe { *p.add(half) = v };
    };
    let get_u32 = |buf: &[u64], word: usize, half: usize| -> u32 {
        let p = buf[word..].as_ptr() as *const u32;
        // SAFETY: within the word.
        unsafe { *p.add(half) }
    };
    set_u32(&mut buf, 1, 0, FSMAP_BATCH as u32); // fmh_count
    let hi = HEAD + REC; // keys[1]
    set_u32(&mut buf, hi, 0, u32::MAX);
    set_u32(&mut buf, hi, 1, u32::MAX);
    buf[hi + 1] = u64::MAX;
    buf[hi + 2] = u64::MAX;
    buf[hi + 3] = u64::MAX;
    // fmr_length of the high key stays 0: xfs refuses anything else.
    loop {
        ioctl_ptr(fd, FS_IOC_GETFSMAP, buf.as_mut_ptr() as *mut libc::c_void)?;
        let entries = get_u32(&buf, 1, 1) as usize;
        if entries == 0 {
            return Ok(());
        }
        let mut last = false;
        for i in 0..entries.min(FSMAP_BATCH) {
            let w = HEAD + 2 * REC + i * REC;
            let r = FsmapRecord {
                device: get_u32(&buf, w, 0),
                flags: get_u32(&buf, w, 1),
                physical: buf[w + 1],
                owner: buf[w + 2],
                offset: buf[w + 3],
                length: buf[w + 4],
            };
            last |= r.flags & FMR_OF_LAST != 0;
            each(&r);
        }
        if last {
            return Ok(());
        }
        // fsmap_advance: the low key becomes the last record returned.
        let lw = HEAD + 2 * REC + (entries.min(FSMAP_BATCH) - 1) * REC;
        let rec: Vec<u64> = buf[lw..lw + REC].to_vec();
        buf[HEAD..HEAD + REC].copy_from_slice(&rec);
    }
}

/// One item found by a btrfs tree search.
#[derive(Debug, Clone)]
pub struct BtrfsItem {
    pub objectid: u64,
    pub item_type: u32,
    pub offset: u64,
    pub data: Vec<u8>,
}

/// Searches btrfs tree `tree_id` for items with key between (min_objectid, min_type, 0) and
/// (max_objectid, max_type, u64::MAX) in key order, calling `each` for every item whose type is
/// within [min_type, max_type]. Needs CAP_SYS_ADMIN.
pub fn btrfs_tree_search(
    fd: BorrowedFd<'_>,
    tree_id: u64,
    (min_objectid, max_objectid): (u64, u64),
    (min_type, max_type): (u32, u32),
    mut each: impl FnMut(&BtrfsItem),
) -> io::Result<()> {
    // struct btrfs_ioctl_search_key (104 bytes): tree_id, min_objectid, max_objectid,
    // min_offset, max_offset, min_transid, max_transid (u64); min_type, max_type, nr_items,
    // unused (u32); unused1..4 (u64). Then buf[4096 - 104].
    const ARGS: usize = 4096;
    const KEY: usize = 104;
    let mut args = vec![0u8; ARGS];
    let (mut obj, mut typ, mut off) = (min_objectid, min_type, 0u64);
    loop {
        args.fill(0);
        let put64 =
            |a: &mut [u8], at: usize, v: u64| a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        let put32 =
            |a: &mut [u8], at: usize, v: u32| a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put64(&mut args, 0, tree_id);
        put64(&mut args, 8, obj);
        put64(&mut args, 16, max_objectid);
        put64(&mut args, 24, off);
        put64(&mut args, 32, u64::MAX);
        put64(&mut args, 40, 0);
        put64(&mut args, 48, u64::MAX);
        put32(&mut args, 56, typ);
        put32(&mut args, 60, max_type);
        put32(&mut args, 64, 4096);
        ioctl_ptr(
            fd,
            BTRFS_IOC_TREE_SEARCH,
            args.as_mut_ptr() as *mut libc::c_void,
        )?;
        let nr = u32::from_ne_bytes(args[64..68].try_into().expect("4 bytes"));
        if nr == 0 {
            return Ok(());
        }
        let mut at = KEY;
        let mut last = (obj, typ, off);
        for _ in 0..nr {
            if at + 32 > ARGS {
                break;
            }
            let get64 = |p: usize| u64::from_ne_bytes(args[p..p + 8].try_into().expect("8 bytes"));
            let get32 = |p: usize| u32::from_ne_bytes(args[p..p + 4].try_into().expect("4 bytes"));
            let objectid = get64(at + 8);
            let offset = get64(at + 16);
            let item_type = get32(at + 24);
            let len = get32(at + 28) as usize;
            let data_at = at + 32;
            if data_at + len > ARGS {
                break;
            }
            if item_type >= min_type && item_type <= max_type {
                each(&BtrfsItem {
                    objectid,
                    item_type,
                    offset,
                    data: args[data_at..data_at + len].to_vec(),
                });
            }
            last = (objectid, item_type, offset);
            at = data_at + len;
        }
        // Next key after the last one returned.
        let (o, t, f) = last;
        if f < u64::MAX {
            (obj, typ, off) = (o, t, f + 1);
        } else if t < 255 {
            (obj, typ, off) = (o, t + 1, 0);
        } else if o < max_objectid {
            (obj, typ, off) = (o + 1, min_type, 0);
        } else {
            return Ok(());
        }
        if obj > max_objectid {
            return Ok(());
        }
    }
}

/// btrfs node size and sector size (`BTRFS_IOC_FS_INFO`).
pub fn btrfs_fs_info(fd: BorrowedFd<'_>) -> io::Result<(u32, u32)> {
    // struct btrfs_ioctl_fs_info_args: max_id u64, num_devices u64, fsid[16], nodesize u32,
    // sectorsize u32, ... (1024 bytes).
    let mut buf = [0u8; 1024];
    ioctl_ptr(fd, BTRFS_IOC_FS_INFO, buf.as_mut_ptr() as *mut libc::c_void)?;
    let nodesize = u32::from_ne_bytes(buf[32..36].try_into().expect("4 bytes"));
    let sectorsize = u32::from_ne_bytes(buf[36..40].try_into().expect("4 bytes"));
    Ok((nodesize, sectorsize))
}
