//! Reading ext2/3/4 block maps from the filesystem's own on-disk structures, without opening the
//! files: the superblock, the group descriptors, the inode tables, and each file's extent tree
//! (ext4) or direct/indirect block pointers (ext2/3, and ext4 `^extent` files).
//!
//! Why: mapping a file with FIEMAP costs an `openat`, an `ioctl` and a `close` — the same three
//! system calls `filefrag` makes — so a scanner built on FIEMAP cannot be much faster than
//! `find -exec filefrag {} +`. The directory walk already has every file's inode number
//! (`getdents64` gives `d_ino`), so the inodes of a directory can be read a whole inode-table
//! block run at a time with `pread` on the block device. Buffered reads of the block device go
//! through its page cache, which is where the mounted filesystem keeps its current metadata
//! buffers; one `syncfs` before the scan places delayed allocations, as FIEMAP_FLAG_SYNC would.
//!
//! The extent lists produced are those ext4's FIEMAP reports (`ext4_iomap_begin_report`), in the
//! merged form the kernel's extent-status cache gives on a warm cache: extents that continue
//! each other in the file and on disk with the same state are one extent; unwritten extents
//! (`ee_len` > 32768) carry FIEMAP_EXTENT_UNWRITTEN; block-mapped extents carry
//! FIEMAP_EXTENT_MERGED; inline data is one FIEMAP_EXTENT_DATA_INLINE extent at the inode's
//! `i_block` address; the last extent carries FIEMAP_EXTENT_LAST.
//!
//! Safety: anything that does not look right — a mode that is not a regular file, a link count
//! of 0, a bad extent header, a block number past the end of the filesystem, an `i_blocks` that
//! does not equal the blocks found, an inode flag this reader does not model (encryption,
//! verity, DAX, xattr inodes) — makes [`ExtReader::map_inode`] return an [`Odd`], and the caller
//! maps that file with FIEMAP instead. Filesystems this reader does not model (`meta_bg`,
//! `bigalloc`) or a device that cannot be opened make [`ExtReader::open`] fail, and the whole
//! filesystem is mapped with FIEMAP.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::sys::{fe, RawExtent};

mod format;

pub use format::*;
use format::{le16, le32, odd};

/// One file's map as read from disk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OndiskMap {
    /// Extents as FIEMAP reports them (see module docs), bytes.
    pub extents: Vec<RawExtent>,
    /// `i_size`.
    pub size: u64,
    /// The inode has no extent tree (block pointers or inline data).
    pub block_mapped: bool,
}

/// Collects extents in the merged form, and counts blocks for the `i_blocks` check.
struct Collector<'a> {
    bs: u64,
    blocks_count: u64,
    out: &'a mut Vec<RawExtent>,
    data_blocks: u64,
    meta_blocks: u64,
}

impl Collector<'_> {
    fn push(&mut self, lblk: u64, pblk: u64, len: u64, flags: u32) -> Result<(), Odd> {
        if len == 0 {
            return odd(format!("an extent of 0 blocks at logical block {lblk}"));
        }
        if pblk == 0 || pblk.saturating_add(len) > self.blocks_count {
            return odd(format!(
                "blocks {pblk}+{len} lie outside the filesystem ({} blocks)",
                self.blocks_count
            ));
        }
        self.data_blocks += len;
        let (logical, physical, length) = (lblk * self.bs, pblk * self.bs, len * self.bs);
        if let Some(last) = self.out.last_mut() {
            if logical < last.logical + last.length {
                return odd(format!("extents out of order at logical block {lblk}"));
            }
            if last.flags == flags
                && last.logical + last.length == logical
                && last.physical + last.length == physical
            {
                last.length += length;
                return Ok(());
            }
        }
        self.out.push(RawExtent {
            logical,
            physical,
            length,
            flags,
        });
        Ok(())
    }

    fn check_meta(&mut self, pblk: u64) -> Result<(), Odd> {
        if pblk == 0 || pblk >= self.blocks_count {
            return odd(format!(
                "map block {pblk} lies outside the filesystem ({} blocks)",
                self.blocks_count
            ));
        }
        self.meta_blocks += 1;
        Ok(())
    }
}

/// Reads block `pblk` of the device into the buffer (one block long).
pub type ReadBlock<'a> = dyn FnMut(u64, &mut [u8]) -> io::Result<()> + 'a;

/// Walks an extent-tree node (`node`: the 60-byte `i_block` or a whole tree block).
fn walk_extent_node(
    node: &[u8],
    want_depth: Option<u16>,
    c: &mut Collector<'_>,
    read: &mut ReadBlock<'_>,
) -> Result<(), Odd> {
    if node.len() < 12 || le16(node, 0) != EXTENT_MAGIC {
        return odd("no extent header magic");
    }
    let entries = le16(node, 2) as usize;
    let max = le16(node, 4) as usize;
    let depth = le16(node, 6);
    let cap = (node.len() - 12) / 12;
    if entries > max || max > cap {
        return odd(format!(
            "extent header with {entries} entries of {max} (room for {cap})"
        ));
    }
    if depth > 5 || want_depth.is_some_and(|d| d != depth) {
        return odd(format!(
            "extent node of depth {depth} where {want_depth:?} was due"
        ));
    }
    let mut prev_first: Option<u32> = None;
    for i in 0..entries {
        let e = &node[12 + 12 * i..24 + 12 * i];
        let first = le32(e, 0);
        if prev_first.is_some_and(|p| first <= p) {
            return odd(format!(
                "extent entries out of order at logical block {first}"
            ));
        }
        prev_first = Some(first);
        if depth == 0 {
            let raw_len = le16(e, 4) as u64;
            let (len, flags) = if raw_len > 32768 {
                (raw_len - 32768, fe::UNWRITTEN)
            } else {
                (raw_len, 0)
            };
            let pblk = (le16(e, 6) as u64) << 32 | le32(e, 8) as u64;
            c.push(first as u64, pblk, len, flags)?;
        } else {
            let leaf = le32(e, 4) as u64 | (le16(e, 8) as u64) << 32;
            c.check_meta(leaf)?;
            let mut block = vec![0u8; c.bs as usize];
            read(leaf, &mut block)
                .map_err(|err| Odd(format!("reading extent block {leaf}: {err}")))?;
            walk_extent_node(&block, Some(depth - 1), c, read)?;
        }
    }
    Ok(())
}

/// Walks one indirect block of `level` (1 single, 2 double, 3 triple) covering logical blocks
/// from `first`.
fn walk_indirect(
    ptr: u64,
    level: u32,
    first: u64,
    c: &mut Collector<'_>,
    read: &mut ReadBlock<'_>,
) -> Result<(), Odd> {
    if ptr == 0 {
        return Ok(());
    }
    c.check_meta(ptr)?;
    let mut block = vec![0u8; c.bs as usize];
    read(ptr, &mut block).map_err(|err| Odd(format!("reading indirect block {ptr}: {err}")))?;
    let per = c.bs / 4;
    let span = per.pow(level - 1);
    for k in 0..per {
        let child = le32(&block, 4 * k as usize) as u64;
        if child == 0 {
            continue;
        }
        let lblk = first + k * span;
        if level == 1 {
            c.push(lblk, child, 1, fe::MERGED)?;
        } else {
            walk_indirect(child, level - 1, lblk, c, read)?;
        }
    }
    Ok(())
}

/// Maps one raw inode (`raw`, `inode_size` bytes, found at byte `addr` of the device): the
/// extents FIEMAP would report, or why the inode is not to be trusted. `read` reads tree and
/// indirect blocks.
pub fn map_inode(
    sb: &Superblock,
    raw: &[u8],
    addr: u64,
    read: &mut ReadBlock<'_>,
) -> Result<OndiskMap, Odd> {
    let ino = Inode::parse(raw)?;
    if ino.mode & 0xF000 != 0x8000 {
        return odd(format!("mode {:o} is not a regular file", ino.mode));
    }
    if ino.links == 0 {
        return odd("link count 0 (deleted)");
    }
    let unmodelled = fl::ENCRYPT | fl::VERITY | fl::EA_INODE | fl::DAX;
    if ino.flags & unmodelled != 0 {
        return odd(format!(
            "inode flags {:#x} (encrypted, verity, DAX or xattr inode) are not modelled",
            ino.flags
        ));
    }
    let bs = sb.block_size;
    let mut extents = Vec::new();
    let mut c = Collector {
        bs,
        blocks_count: sb.blocks_count,
        out: &mut extents,
        data_blocks: 0,
        meta_blocks: 0,
    };
    let block_mapped = ino.flags & fl::EXTENTS == 0;
    if ino.flags & fl::INLINE_DATA != 0 {
        if sb.incompat & INCOMPAT_INLINE_DATA == 0 || !block_mapped {
            return odd("inline-data flag on a filesystem or inode that cannot have it");
        }
        // ext4_inline_data_fiemap: one extent of min(inline size, i_size), none when empty.
        let len = inline_size(raw)?.min(ino.size);
        if len > 0 {
            c.out.push(RawExtent {
                logical: 0,
                physical: addr + 40,
                length: len,
                flags: fe::DATA_INLINE | fe::NOT_ALIGNED,
            });
        }
    } else if !block_mapped {
        if !sb.has_extents() {
            return odd("extent flag on a filesystem without extents");
        }
        walk_extent_node(&ino.i_block, None, &mut c, read)?;
    } else {
        for i in 0..12 {
            let p = le32(&ino.i_block, 4 * i) as u64;
            if p != 0 {
                c.push(i as u64, p, 1, fe::MERGED)?;
            }
        }
        let per = bs / 4;
        let firsts = [12, 12 + per, 12 + per + per * per];
        for (level, first) in (1..=3).zip(firsts) {
            let p = le32(&ino.i_block, 48 + 4 * (level as usize - 1)) as u64;
            walk_indirect(p, level, first, &mut c, read)?;
        }
    }
    let huge = sb.ro_compat & RO_COMPAT_HUGE_FILE != 0;
    let charged = ino.blocks(huge, bs)?;
    let found = c.data_blocks + c.meta_blocks + u64::from(ino.file_acl != 0);
    if charged != found {
        return odd(format!(
            "i_blocks says {charged} blocks, the map and xattr block {found}"
        ));
    }
    if let Some(last) = extents.last_mut() {
        last.flags |= fe::LAST;
    }
    Ok(OndiskMap {
        extents,
        size: ino.size,
        block_mapped,
    })
}

/// An ext2/3/4 filesystem opened for reading its structures from the block device.
#[derive(Debug)]
pub struct ExtReader {
    dev: File,
    /// The device node read.
    pub device: PathBuf,
    /// The superblock.
    pub sb: Superblock,
    groups: Vec<GroupDesc>,
}

/// Inode-table blocks read past a gap rather than starting a new read.
const READ_GAP_BLOCKS: u64 = 8;
/// Largest single inode-table read, bytes.
const READ_MAX: u64 = 1 << 20;

/// The device node of block device number `dev`, from sysfs.
pub fn device_node(dev: u64) -> Option<PathBuf> {
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    Some(PathBuf::from(format!("/dev/{name}")))
}

impl ExtReader {
    /// Opens the filesystem that `fd` (any open file or directory of it, on device `st_dev`)
    /// lives on: checks it is ext2/3/4, syncs it (`syncfs`, so delayed allocations are placed),
    /// opens its block device read-only, and reads the superblock and group descriptors. The
    /// error says why the on-disk reader cannot be used.
    pub fn open(fd: BorrowedFd<'_>, st_dev: u64) -> Result<Self, String> {
        let st = crate::base::sys::statfs::fstatfs(fd).map_err(|e| format!("statfs: {e}"))?;
        let magic = st.magic;
        if magic != super::sys::magic::EXT {
            return Err(format!(
                "{}: the on-disk reader knows ext2/3/4 only",
                super::sys::fs_name(magic)
            ));
        }
        let fsid = st.fsid;
        let device = device_node(st_dev).ok_or_else(|| {
            format!(
                "device {}:{} has no block device node",
                libc::major(st_dev),
                libc::minor(st_dev)
            )
        })?;
        let dev = std::fs::File::open(&device)
            .map_err(|e| format!("opening {}: {e}", device.display()))?;
        nix::unistd::syncfs(fd.as_raw_fd())
            .map_err(|e| format!("syncfs: {}", io::Error::from_raw_os_error(e as i32)))?;
        let mut raw = vec![0u8; 1024];
        dev.read_exact_at(&mut raw, 1024)
            .map_err(|e| format!("reading the superblock of {}: {e}", device.display()))?;
        let sb = Superblock::parse(&raw).map_err(|e| format!("{}: {e}", device.display()))?;
        if sb.fsid() != fsid {
            return Err(format!(
                "{} does not hold the mounted filesystem (its UUID does not give the statfs fsid)",
                device.display()
            ));
        }
        if sb.incompat & INCOMPAT_META_BG != 0 {
            return Err(format!(
                "{}: meta_bg group descriptors are not modelled",
                device.display()
            ));
        }
        if sb.ro_compat & RO_COMPAT_BIGALLOC != 0 {
            return Err(format!("{}: bigalloc is not modelled", device.display()));
        }
        let n = sb.groups();
        let mut gdt = vec![0u8; (n * sb.desc_size as u64) as usize];
        let at = (sb.first_data_block as u64 + 1) * sb.block_size;
        dev.read_exact_at(&mut gdt, at)
            .map_err(|e| format!("reading the group descriptors of {}: {e}", device.display()))?;
        let groups: Vec<GroupDesc> = gdt
            .chunks_exact(sb.desc_size as usize)
            .map(|d| GroupDesc::parse(d, sb.desc_size))
            .collect();
        let table_blocks =
            (sb.inodes_per_group as u64 * sb.inode_size as u64).div_ceil(sb.block_size);
        for (g, d) in groups.iter().enumerate() {
            if d.inode_table == 0 || d.inode_table + table_blocks > sb.blocks_count {
                return Err(format!(
                    "{}: group {g} has its inode table at block {}, outside the filesystem",
                    device.display(),
                    d.inode_table
                ));
            }
        }
        Ok(Self {
            dev,
            device,
            sb,
            groups,
        })
    }

    /// The group descriptors.
    pub fn groups(&self) -> &[GroupDesc] {
        &self.groups
    }

    /// Reads `buf.len()` bytes at byte `at` of the device.
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        self.dev.read_exact_at(buf, at)
    }

    /// Walks the block bitmaps of every group, in block order, and calls `each(blocks)` for
    /// every run of free blocks — the runs e2freefrag's `scan_block_bitmap` finds: maximal, so
    /// a run goes on across group boundaries, from `s_first_data_block` to the last block.
    /// A group whose bitmap was never written (BLOCK_UNINIT, trusted only with group-descriptor
    /// checksums, as libext2fs does) is free but for its superblock and descriptor backups and
    /// its own bitmaps and inode table, as libext2fs computes it. Returns (blocks in the
    /// filesystem, free blocks). Call after a `syncfs` so freed blocks are committed.
    pub fn free_extents(&self, mut each: impl FnMut(u64)) -> Result<(u64, u64), String> {
        let sb = &self.sb;
        if sb.compat & COMPAT_SPARSE_SUPER2 != 0 {
            return Err(format!(
                "{}: sparse_super2 backups are not modelled",
                self.device.display()
            ));
        }
        let bs = sb.block_size;
        let bpg = sb.blocks_per_group as u64;
        let csum = sb.ro_compat & (RO_COMPAT_GDT_CSUM | RO_COMPAT_METADATA_CSUM) != 0;
        let table_blocks = (sb.inodes_per_group as u64 * sb.inode_size as u64).div_ceil(bs);
        let mut bitmap = vec![0u8; bs as usize];
        let (mut run, mut free) = (0u64, 0u64);
        for (g, d) in self.groups.iter().enumerate() {
            let g = g as u64;
            let start = sb.first_data_block as u64 + g * bpg;
            let len = bpg.min(sb.blocks_count - start);
            if csum && d.flags & BG_BLOCK_UNINIT != 0 {
                bitmap.fill(0);
                let mut mark = |from: u64, n: u64| {
                    for b in from..from + n {
                        if b >= start && b < start + len {
                            let i = (b - start) as usize;
                            bitmap[i / 8] |= 1 << (i % 8);
                        }
                    }
                };
                if sb.group_has_super(g) {
                    mark(start, sb.super_and_gdt_blocks());
                }
                mark(d.block_bitmap, 1);
                mark(d.inode_bitmap, 1);
                mark(d.inode_table, table_blocks);
            } else {
                if d.block_bitmap == 0 || d.block_bitmap >= sb.blocks_count {
                    return Err(format!(
                        "{}: group {g} has its block bitmap at block {}, outside the filesystem",
                        self.device.display(),
                        d.block_bitmap
                    ));
                }
                self.dev
                    .read_exact_at(&mut bitmap, d.block_bitmap * bs)
                    .map_err(|e| {
                        format!(
                            "reading the block bitmap of group {g} on {}: {e}",
                            self.device.display()
                        )
                    })?;
            }
            for i in 0..len as usize {
                if bitmap[i / 8] & (1 << (i % 8)) == 0 {
                    run += 1;
                    free += 1;
                } else if run > 0 {
                    each(run);
                    run = 0;
                }
            }
        }
        if run > 0 {
            each(run);
        }
        Ok((sb.blocks_count, free))
    }

    /// The byte address of inode `ino` on the device.
    pub fn inode_addr(&self, ino: u64) -> Result<u64, Odd> {
        if ino == 0 || ino > self.sb.inodes_count as u64 {
            return odd(format!("inode number {ino} is out of range"));
        }
        let ipg = self.sb.inodes_per_group as u64;
        let (g, i) = ((ino - 1) / ipg, (ino - 1) % ipg);
        let d = self
            .groups
            .get(g as usize)
            .ok_or_else(|| Odd(format!("inode {ino} is in group {g}, not known at open")))?;
        Ok(d.inode_table * self.sb.block_size + i * self.sb.inode_size as u64)
    }

    /// Maps the inodes `inos` (any order): calls `each(index into inos, result)` once per
    /// inode. Inode-table blocks are read in runs, in device order, with a few unused blocks
    /// read through rather than split into two reads. `buf` is reused between calls.
    pub fn map_inodes(
        &self,
        inos: &[u64],
        buf: &mut Vec<u8>,
        mut each: impl FnMut(usize, Result<OndiskMap, Odd>),
    ) {
        let bs = self.sb.block_size;
        let isz = self.sb.inode_size as u64;
        let mut order: Vec<(u64, usize)> = Vec::with_capacity(inos.len());
        for (i, &ino) in inos.iter().enumerate() {
            match self.inode_addr(ino) {
                Ok(a) => order.push((a, i)),
                Err(e) => each(i, Err(e)),
            }
        }
        order.sort_unstable();
        let mut read = |blk: u64, out: &mut [u8]| self.dev.read_exact_at(out, blk * bs);
        let mut k = 0;
        while k < order.len() {
            let start = order[k].0 / bs * bs;
            let mut end = order[k].0 + isz;
            let mut j = k + 1;
            while j < order.len() {
                let a = order[j].0;
                let next_end = (a + isz).max(end);
                if a > end.div_ceil(bs) * bs + READ_GAP_BLOCKS * bs
                    || next_end.div_ceil(bs) * bs - start > READ_MAX
                {
                    break;
                }
                end = next_end;
                j += 1;
            }
            let len = (end.div_ceil(bs) * bs - start) as usize;
            buf.resize(len, 0);
            match self.dev.read_exact_at(&mut buf[..len], start) {
                Ok(()) => {
                    for &(a, i) in &order[k..j] {
                        let off = (a - start) as usize;
                        let raw = &buf[off..off + isz as usize];
                        each(i, map_inode(&self.sb, raw, a, &mut read));
                    }
                }
                Err(e) => {
                    for &(_, i) in &order[k..j] {
                        each(i, Err(Odd(format!("reading the inode table: {e}"))));
                    }
                }
            }
            k = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const BS: u64 = 4096;

    fn sb() -> Superblock {
        Superblock {
            inodes_count: 65536,
            blocks_count: 1 << 20,
            first_data_block: 0,
            block_size: BS,
            blocks_per_group: 32768,
            inodes_per_group: 2048,
            inode_size: 256,
            desc_size: 64,
            compat: 0,
            incompat: INCOMPAT_EXTENTS | INCOMPAT_64BIT | INCOMPAT_INLINE_DATA,
            ro_compat: RO_COMPAT_HUGE_FILE,
            uuid: [0; 16],
            reserved_gdt_blocks: 0,
        }
    }

    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// A regular-file inode of `size` bytes, `blocks` filesystem blocks, with `flags`.
    fn inode(size: u64, blocks: u64, flags: u32) -> Vec<u8> {
        let mut b = vec![0u8; 256];
        put16(&mut b, 0, 0o100644);
        put32(&mut b, 4, size as u32);
        put32(&mut b, 108, (size >> 32) as u32);
        put16(&mut b, 26, 1);
        put32(&mut b, 28, (blocks * BS / 512) as u32);
        put32(&mut b, 32, flags);
        put16(&mut b, 128, 32);
        b
    }

    fn header(b: &mut [u8], at: usize, entries: u16, max: u16, depth: u16) {
        put16(b, at, EXTENT_MAGIC);
        put16(b, at + 2, entries);
        put16(b, at + 4, max);
        put16(b, at + 6, depth);
    }

    /// Leaf entry `i` of a node starting at `at`.
    fn leaf(b: &mut [u8], at: usize, i: usize, lblk: u32, len: u16, pblk: u64) {
        let e = at + 12 + 12 * i;
        put32(b, e, lblk);
        put16(b, e + 4, len);
        put16(b, e + 6, (pblk >> 32) as u16);
        put32(b, e + 8, pblk as u32);
    }

    fn index(b: &mut [u8], at: usize, i: usize, lblk: u32, child: u64) {
        let e = at + 12 + 12 * i;
        put32(b, e, lblk);
        put32(b, e + 4, child as u32);
        put16(b, e + 8, (child >> 32) as u16);
    }

    fn no_reads() -> impl FnMut(u64, &mut [u8]) -> io::Result<()> {
        |b, _| panic!("unexpected read of block {b}")
    }

    fn blocks_from(map: HashMap<u64, Vec<u8>>) -> impl FnMut(u64, &mut [u8]) -> io::Result<()> {
        move |b, out| {
            out.copy_from_slice(map.get(&b).expect("a block the test made"));
            Ok(())
        }
    }

    fn ext(logical: u64, physical: u64, length: u64, flags: u32) -> RawExtent {
        RawExtent {
            logical: logical * BS,
            physical: physical * BS,
            length: length * BS,
            flags,
        }
    }

    #[test]
    fn superblock_fields_and_fsid() {
        let mut b = vec![0u8; 1024];
        put32(&mut b, 0, 1000);
        put32(&mut b, 4, 5000);
        put32(&mut b, 0x150, 1);
        put32(&mut b, 20, 0);
        put32(&mut b, 24, 2);
        put32(&mut b, 32, 32768);
        put32(&mut b, 40, 2048);
        put16(&mut b, 56, EXT_MAGIC);
        put32(&mut b, 76, 1);
        put16(&mut b, 88, 256);
        put32(&mut b, 96, INCOMPAT_EXTENTS | INCOMPAT_64BIT);
        put16(&mut b, 254, 64);
        for i in 0..16 {
            b[104 + i] = i as u8 + 1;
        }
        let s = Superblock::parse(&b).expect("valid");
        assert_eq!(s.block_size, 4096);
        assert_eq!(s.blocks_count, (1 << 32) + 5000);
        assert_eq!(s.inode_size, 256);
        assert_eq!(s.desc_size, 64);
        assert!(s.has_extents());
        let lo = u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]);
        let hi = u64::from_le_bytes([9, 10, 11, 12, 13, 14, 15, 16]);
        assert_eq!(s.fsid(), [(lo ^ hi) as u32, ((lo ^ hi) >> 32) as u32]);
        // Without 64bit: 32-byte descriptors and the high block count ignored.
        put32(&mut b, 96, INCOMPAT_EXTENTS);
        let s = Superblock::parse(&b).expect("valid");
        assert_eq!((s.desc_size, s.blocks_count), (32, 5000));
        put16(&mut b, 56, 0x1234);
        assert!(Superblock::parse(&b).is_err());
    }

    #[test]
    fn group_descriptors_32_and_64_bytes() {
        let mut d = vec![0u8; 64];
        put32(&mut d, 0, 100);
        put32(&mut d, 8, 300);
        put16(&mut d, 0x0C, 7);
        put16(&mut d, 0x12, BG_BLOCK_UNINIT);
        put32(&mut d, 0x20, 1);
        put32(&mut d, 0x28, 2);
        put16(&mut d, 0x2C, 1);
        let g = GroupDesc::parse(&d, 64);
        assert_eq!(g.block_bitmap, (1 << 32) + 100);
        assert_eq!(g.inode_table, (2 << 32) + 300);
        assert_eq!(g.free_blocks, (1 << 16) + 7);
        assert_eq!(g.flags, BG_BLOCK_UNINIT);
        let g = GroupDesc::parse(&d[..32], 32);
        assert_eq!(
            (g.block_bitmap, g.inode_table, g.free_blocks),
            (100, 300, 7)
        );
    }

    #[test]
    fn in_inode_extents_with_unwritten_and_merging() {
        let mut raw = inode(40 * BS, 36, fl::EXTENTS);
        header(&mut raw, 40, 4, 4, 0);
        leaf(&mut raw, 40, 0, 0, 8, 1000);
        // Continues the first in the file and on disk: merged, as the extent-status cache does.
        leaf(&mut raw, 40, 1, 8, 8, 1008);
        // Unwritten (preallocated) right after: a separate extent.
        leaf(&mut raw, 40, 2, 16, 32768 + 4, 1016);
        // After a hole, elsewhere.
        leaf(&mut raw, 40, 3, 30, 16, 5000);
        let m = map_inode(&sb(), &raw, 0, &mut no_reads()).expect("valid");
        assert_eq!(
            m.extents,
            vec![
                ext(0, 1000, 16, 0),
                ext(16, 1016, 4, fe::UNWRITTEN),
                ext(30, 5000, 16, fe::LAST),
            ]
        );
        assert_eq!(m.size, 40 * BS);
        assert!(!m.block_mapped);
    }

    #[test]
    fn extent_tree_of_depth_two_is_walked_and_charged() {
        let mut raw = inode(0, 0, fl::EXTENTS);
        header(&mut raw, 40, 1, 4, 2);
        index(&mut raw, 40, 0, 0, 700);
        let mut idx = vec![0u8; BS as usize];
        header(&mut idx, 0, 2, 340, 1);
        index(&mut idx, 0, 0, 0, 701);
        index(&mut idx, 0, 1, 100, 702);
        let mut l1 = vec![0u8; BS as usize];
        header(&mut l1, 0, 2, 340, 0);
        leaf(&mut l1, 0, 0, 0, 10, 2000);
        leaf(&mut l1, 0, 1, 50, 10, 3000);
        let mut l2 = vec![0u8; BS as usize];
        header(&mut l2, 0, 1, 340, 0);
        leaf(&mut l2, 0, 0, 100, 32768, 10_000);
        // 10 + 10 + 32768 data blocks, 3 tree blocks.
        let total = 10 + 10 + 32768 + 3;
        put32(&mut raw, 28, (total * BS / 512) as u32);
        put32(&mut raw, 4, ((100 + 32768) * BS) as u32);
        let blocks = HashMap::from([(700, idx), (701, l1), (702, l2)]);
        let m = map_inode(&sb(), &raw, 0, &mut blocks_from(blocks.clone())).expect("valid");
        assert_eq!(
            m.extents,
            vec![
                ext(0, 2000, 10, 0),
                ext(50, 3000, 10, 0),
                ext(100, 10_000, 32768, fe::LAST),
            ]
        );
        // One block fewer charged than found: not trusted.
        put32(&mut raw, 28, ((total - 1) * BS / 512) as u32);
        let e = map_inode(&sb(), &raw, 0, &mut blocks_from(blocks.clone())).expect_err("odd");
        assert!(e.0.contains("i_blocks"), "{e}");
        // A child of the wrong depth: not trusted.
        put32(&mut raw, 28, (total * BS / 512) as u32);
        let mut bad = blocks;
        header(bad.get_mut(&701).expect("leaf"), 0, 2, 340, 1);
        let e = map_inode(&sb(), &raw, 0, &mut blocks_from(bad)).expect_err("odd");
        assert!(e.0.contains("depth"), "{e}");
    }

    #[test]
    fn odd_inodes_are_refused() {
        let s = sb();
        let mut raw = inode(0, 0, fl::EXTENTS);
        header(&mut raw, 40, 0, 4, 0);
        assert!(map_inode(&s, &raw, 0, &mut no_reads()).is_ok());
        let mut dir = raw.clone();
        put16(&mut dir, 0, 0o40755);
        assert!(map_inode(&s, &dir, 0, &mut no_reads()).is_err());
        let mut gone = raw.clone();
        put16(&mut gone, 26, 0);
        assert!(map_inode(&s, &gone, 0, &mut no_reads()).is_err());
        let mut enc = raw.clone();
        put32(&mut enc, 32, fl::EXTENTS | fl::ENCRYPT);
        assert!(map_inode(&s, &enc, 0, &mut no_reads()).is_err());
        let mut magic = raw.clone();
        put16(&mut magic, 40, 0x1234);
        assert!(map_inode(&s, &magic, 0, &mut no_reads()).is_err());
        let mut over = raw.clone();
        header(&mut over, 40, 5, 4, 0);
        assert!(map_inode(&s, &over, 0, &mut no_reads()).is_err());
        let mut outside = inode(BS, 1, fl::EXTENTS);
        header(&mut outside, 40, 1, 4, 0);
        leaf(&mut outside, 40, 0, 0, 1, s.blocks_count);
        assert!(map_inode(&s, &outside, 0, &mut no_reads()).is_err());
        let mut unordered = inode(BS, 2, fl::EXTENTS);
        header(&mut unordered, 40, 2, 4, 0);
        leaf(&mut unordered, 40, 0, 5, 1, 100);
        leaf(&mut unordered, 40, 1, 2, 1, 200);
        assert!(map_inode(&s, &unordered, 0, &mut no_reads()).is_err());
    }

    #[test]
    fn block_mapped_direct_and_indirect_blocks() {
        // 1 KiB blocks: 256 pointers per indirect block.
        let mut s = sb();
        s.block_size = 1024;
        s.incompat = 0;
        s.ro_compat = 0;
        let bs = 1024u64;
        let mut raw = inode(0, 0, 0);
        // Direct blocks 0..12 at 500..512, except a hole at 5.
        for i in 0..12u32 {
            if i != 5 {
                put32(&mut raw, 40 + 4 * i as usize, 500 + i);
            }
        }
        // Single indirect block at 512, mapping logical 12..15 to 513..516 (right after it).
        put32(&mut raw, 40 + 48, 512);
        let mut ind = vec![0u8; 1024];
        for k in 0..4u32 {
            put32(&mut ind, 4 * k as usize, 513 + k);
        }
        // Double indirect: one single-indirect block 900 holding logical 12 + 256 + 3 → 950.
        put32(&mut raw, 40 + 52, 899);
        let mut dind = vec![0u8; 1024];
        put32(&mut dind, 0, 900);
        let mut ind2 = vec![0u8; 1024];
        put32(&mut ind2, 12, 950);
        // 11 + 4 + 1 data blocks, 3 map blocks, 1 xattr block.
        put32(&mut raw, 104, 77);
        put32(&mut raw, 28, ((16 + 3 + 1) * bs / 512) as u32);
        let size = (12 + 256 + 4) * bs;
        put32(&mut raw, 4, size as u32);
        let blocks = HashMap::from([(512, ind), (899, dind), (900, ind2)]);
        let m = map_inode(&s, &raw, 0, &mut blocks_from(blocks)).expect("valid");
        let e = |l: u64, p: u64, n: u64, f: u32| RawExtent {
            logical: l * bs,
            physical: p * bs,
            length: n * bs,
            flags: f | fe::MERGED,
        };
        assert_eq!(
            m.extents,
            vec![
                e(0, 500, 5, 0),
                e(6, 506, 6, 0),
                e(12, 513, 4, 0),
                e(12 + 256 + 3, 950, 1, fe::LAST),
            ]
        );
        assert!(m.block_mapped);
    }

    #[test]
    fn inline_data_is_one_extent_at_the_inode() {
        let s = sb();
        let mut raw = inode(100, 0, fl::INLINE_DATA);
        // In-inode xattr area after 128 + 32 bytes: magic, then system.data with 40 bytes.
        let at = 160;
        put32(&mut raw, at, 0xEA02_0000);
        let e = at + 4;
        raw[e] = 4;
        raw[e + 1] = 7;
        put32(&mut raw, e + 8, 40);
        raw[e + 16..e + 20].copy_from_slice(b"data");
        assert_eq!(inline_size(&raw), Ok(100));
        let m = map_inode(&s, &raw, 8192 + 512, &mut no_reads()).expect("valid");
        assert_eq!(
            m.extents,
            vec![RawExtent {
                logical: 0,
                physical: 8192 + 512 + 40,
                length: 100,
                flags: fe::DATA_INLINE | fe::NOT_ALIGNED | fe::LAST,
            }]
        );
        // An empty inline file has no extent.
        put32(&mut raw, 4, 0);
        let m = map_inode(&s, &raw, 0, &mut no_reads()).expect("valid");
        assert!(m.extents.is_empty());
        // Without the attribute: not trusted.
        raw[e + 16..e + 20].copy_from_slice(b"dat_");
        put32(&mut raw, 4, 10);
        assert!(map_inode(&s, &raw, 0, &mut no_reads()).is_err());
    }

    #[test]
    fn superblock_backup_groups() {
        let mut s = sb();
        s.ro_compat = RO_COMPAT_SPARSE_SUPER;
        let with: Vec<u64> = (0..100).filter(|&g| s.group_has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81]);
        s.ro_compat = 0;
        assert!((0..10).all(|g| s.group_has_super(g)));
        // 32 groups of 64-byte descriptors = 2048 bytes = 1 block, plus 15 reserved.
        s.blocks_count = 32 * 32768;
        s.compat = COMPAT_RESIZE_INODE;
        s.reserved_gdt_blocks = 15;
        assert_eq!(s.super_and_gdt_blocks(), 1 + 1 + 15);
    }

    #[test]
    fn huge_file_block_counts() {
        let mut i = Inode::parse(&inode(0, 0, 0)).expect("valid");
        i.blocks_raw = (1 << 32) + 8;
        assert_eq!(i.blocks(true, 4096), Ok(((1u64 << 32) + 8) / 8));
        assert_eq!(i.blocks(false, 4096), Ok(1));
        i.flags = fl::HUGE_FILE;
        assert_eq!(i.blocks(true, 4096), Ok((1 << 32) + 8));
    }
}
