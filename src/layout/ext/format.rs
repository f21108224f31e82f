//! The ext2/3/4 on-disk format as the reader needs it: the feature flags, the superblock, the
//! group descriptors, the inode and inline data, each parsed from its bytes with the checks
//! that make an unmodelled or damaged structure an [`Odd`] rather than a wrong map.

/// ext2/3/4 superblock magic.
pub const EXT_MAGIC: u16 = 0xEF53;
/// Extent-tree node header magic.
pub const EXTENT_MAGIC: u16 = 0xF30A;

/// `INCOMPAT_META_BG`: group descriptors spread over the disk (not modelled).
pub const INCOMPAT_META_BG: u32 = 0x10;
/// `INCOMPAT_EXTENTS`.
pub const INCOMPAT_EXTENTS: u32 = 0x40;
/// `INCOMPAT_64BIT`: 64-bit block numbers, group descriptors of `s_desc_size` bytes.
pub const INCOMPAT_64BIT: u32 = 0x80;
/// `INCOMPAT_INLINE_DATA`.
pub const INCOMPAT_INLINE_DATA: u32 = 0x8000;
/// `COMPAT_RESIZE_INODE`: reserved GDT blocks follow each group descriptor table copy.
pub const COMPAT_RESIZE_INODE: u32 = 0x10;
/// `COMPAT_SPARSE_SUPER2`: backups in two named groups only (not modelled for free space).
pub const COMPAT_SPARSE_SUPER2: u32 = 0x200;
/// `RO_COMPAT_SPARSE_SUPER`: superblock backups in groups 0, 1 and powers of 3, 5, 7.
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x1;
/// `RO_COMPAT_GDT_CSUM`: group descriptors are checksummed, so `bg_flags` are trusted.
pub const RO_COMPAT_GDT_CSUM: u32 = 0x10;
/// `RO_COMPAT_METADATA_CSUM`: as GDT_CSUM, with crc32c.
pub const RO_COMPAT_METADATA_CSUM: u32 = 0x400;
/// `RO_COMPAT_HUGE_FILE`: `i_blocks` is 48 bits, in filesystem blocks for HUGE_FILE_FL inodes.
pub const RO_COMPAT_HUGE_FILE: u32 = 0x8;
/// `RO_COMPAT_BIGALLOC`: allocation in clusters (not modelled).
pub const RO_COMPAT_BIGALLOC: u32 = 0x200;

/// Inode flags (`i_flags`).
pub mod fl {
    /// Encrypted file (not modelled).
    pub const ENCRYPT: u32 = 0x800;
    /// `i_blocks` counts filesystem blocks (with RO_COMPAT_HUGE_FILE).
    pub const HUGE_FILE: u32 = 0x4_0000;
    /// Extent-mapped.
    pub const EXTENTS: u32 = 0x8_0000;
    /// fs-verity file (not modelled).
    pub const VERITY: u32 = 0x10_0000;
    /// Inode holding a large xattr value (not modelled).
    pub const EA_INODE: u32 = 0x20_0000;
    /// DAX (not modelled).
    pub const DAX: u32 = 0x200_0000;
    /// Data in the inode.
    pub const INLINE_DATA: u32 = 0x1000_0000;
}

/// Why a file's inode was not used (the file is mapped with FIEMAP instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Odd(pub String);

impl std::fmt::Display for Odd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn odd<T>(msg: impl Into<String>) -> Result<T, Odd> {
    Err(Odd(msg.into()))
}

pub(super) fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(super) fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The superblock fields the reader needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// `s_inodes_count`.
    pub inodes_count: u32,
    /// `s_blocks_count` (lo + hi with 64bit).
    pub blocks_count: u64,
    /// `s_first_data_block` (1 with 1 KiB blocks, else 0).
    pub first_data_block: u32,
    /// Block size, bytes.
    pub block_size: u64,
    /// `s_blocks_per_group`.
    pub blocks_per_group: u32,
    /// `s_inodes_per_group`.
    pub inodes_per_group: u32,
    /// On-disk inode size, bytes.
    pub inode_size: u32,
    /// Group descriptor size, bytes (32, or `s_desc_size` with 64bit).
    pub desc_size: u32,
    /// `s_feature_compat`.
    pub compat: u32,
    /// `s_feature_incompat`.
    pub incompat: u32,
    /// `s_feature_ro_compat`.
    pub ro_compat: u32,
    /// `s_uuid`.
    pub uuid: [u8; 16],
    /// `s_reserved_gdt_blocks`.
    pub reserved_gdt_blocks: u16,
}

impl Superblock {
    /// Parses the 1024-byte superblock (as read at byte 1024 of the device).
    pub fn parse(b: &[u8]) -> Result<Self, Odd> {
        if b.len() < 1024 {
            return odd("superblock shorter than 1024 bytes");
        }
        if le16(b, 56) != EXT_MAGIC {
            return odd("no ext2/3/4 superblock magic");
        }
        let log = le32(b, 24);
        if log > 6 {
            return odd(format!("block size 2^{} KiB is out of range", log));
        }
        let block_size = 1024u64 << log;
        let incompat = le32(b, 96);
        let ro_compat = le32(b, 100);
        let rev = le32(b, 76);
        let inode_size = if rev == 0 { 128 } else { le16(b, 88) as u32 };
        if inode_size < 128 || !inode_size.is_power_of_two() || inode_size as u64 > block_size {
            return odd(format!("inode size {inode_size} is out of range"));
        }
        let desc_size = if incompat & INCOMPAT_64BIT != 0 {
            let d = le16(b, 254) as u32;
            if d < 64 || !d.is_power_of_two() || d as u64 > block_size {
                return odd(format!("group descriptor size {d} is out of range"));
            }
            d
        } else {
            32
        };
        let mut blocks_count = le32(b, 4) as u64;
        if incompat & INCOMPAT_64BIT != 0 {
            blocks_count |= (le32(b, 0x150) as u64) << 32;
        }
        let sb = Self {
            inodes_count: le32(b, 0),
            blocks_count,
            first_data_block: le32(b, 20),
            block_size,
            blocks_per_group: le32(b, 32),
            inodes_per_group: le32(b, 40),
            inode_size,
            desc_size,
            compat: le32(b, 92),
            incompat,
            ro_compat,
            uuid: b[104..120].try_into().expect("16 bytes"),
            reserved_gdt_blocks: le16(b, 0xCE),
        };
        if sb.blocks_per_group == 0 || sb.inodes_per_group == 0 || sb.blocks_count == 0 {
            return odd("superblock with zero blocks or inodes per group");
        }
        Ok(sb)
    }

    /// Block groups.
    pub fn groups(&self) -> u64 {
        (self.blocks_count - self.first_data_block as u64).div_ceil(self.blocks_per_group as u64)
    }

    /// The `f_fsid` that `statfs` reports for this filesystem (ext4_statfs: the two halves of
    /// the UUID xor-ed), to check that a device holds the mounted filesystem.
    pub fn fsid(&self) -> [u32; 2] {
        let a = u64::from_le_bytes(self.uuid[..8].try_into().expect("8 bytes"));
        let b = u64::from_le_bytes(self.uuid[8..].try_into().expect("8 bytes"));
        let v = a ^ b;
        [v as u32, (v >> 32) as u32]
    }

    /// Whether files may have an extent tree.
    pub fn has_extents(&self) -> bool {
        self.incompat & INCOMPAT_EXTENTS != 0
    }

    /// Whether group `g` holds a superblock backup (`ext2fs_bg_has_super`, sparse_super).
    pub fn group_has_super(&self, g: u64) -> bool {
        if g <= 1 || self.ro_compat & RO_COMPAT_SPARSE_SUPER == 0 {
            return true;
        }
        if g % 2 == 0 {
            return false;
        }
        [3u64, 5, 7].iter().any(|&b| {
            let mut p = b;
            while p < g {
                p *= b;
            }
            p == g
        })
    }

    /// Blocks at the start of a group with a superblock backup: the superblock, the group
    /// descriptor table and its reserved growth blocks (no meta_bg).
    pub fn super_and_gdt_blocks(&self) -> u64 {
        let gdt = (self.groups() * self.desc_size as u64).div_ceil(self.block_size);
        let reserved = if self.compat & COMPAT_RESIZE_INODE != 0 {
            self.reserved_gdt_blocks as u64
        } else {
            0
        };
        1 + gdt + reserved
    }
}

/// The group descriptor fields the reader needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupDesc {
    /// `bg_block_bitmap`.
    pub block_bitmap: u64,
    /// `bg_inode_bitmap`.
    pub inode_bitmap: u64,
    /// `bg_inode_table`.
    pub inode_table: u64,
    /// `bg_flags` (INODE_UNINIT 1, BLOCK_UNINIT 2, ITABLE_ZEROED 4).
    pub flags: u16,
    /// `bg_free_blocks_count`.
    pub free_blocks: u32,
}

/// `BG_BLOCK_UNINIT`: the group's block bitmap was never written; it is computed.
pub const BG_BLOCK_UNINIT: u16 = 0x2;

impl GroupDesc {
    /// Parses one descriptor of `desc_size` bytes (32: the low halves only).
    pub fn parse(b: &[u8], desc_size: u32) -> Self {
        let wide = desc_size >= 64 && b.len() >= 64;
        let hi32 = |at: usize| if wide { le32(b, at) as u64 } else { 0 };
        let hi16 = |at: usize| if wide { le16(b, at) as u32 } else { 0 };
        Self {
            block_bitmap: le32(b, 0) as u64 | hi32(0x20) << 32,
            inode_bitmap: le32(b, 4) as u64 | hi32(0x24) << 32,
            inode_table: le32(b, 8) as u64 | hi32(0x28) << 32,
            flags: le16(b, 0x12),
            free_blocks: le16(b, 0x0C) as u32 | hi16(0x2C) << 16,
        }
    }
}

/// The inode fields the reader needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// `i_mode`.
    pub mode: u16,
    /// `i_links_count`.
    pub links: u16,
    /// `i_size` (lo + high).
    pub size: u64,
    /// `i_blocks` as stored (lo, plus hi with huge_file).
    pub blocks_raw: u64,
    /// `i_flags`.
    pub flags: u32,
    /// `i_file_acl` (xattr block; lo + high).
    pub file_acl: u64,
    /// `i_block`: the extent-tree root, the block pointers, or inline data.
    pub i_block: [u8; 60],
}

impl Inode {
    /// Parses a raw on-disk inode (at least 128 bytes).
    pub fn parse(b: &[u8]) -> Result<Self, Odd> {
        if b.len() < 128 {
            return odd("inode shorter than 128 bytes");
        }
        Ok(Self {
            mode: le16(b, 0),
            links: le16(b, 26),
            size: le32(b, 4) as u64 | (le32(b, 108) as u64) << 32,
            blocks_raw: le32(b, 28) as u64 | (le16(b, 116) as u64) << 32,
            flags: le32(b, 32),
            file_acl: le32(b, 104) as u64 | (le16(b, 118) as u64) << 32,
            i_block: b[40..100].try_into().expect("60 bytes"),
        })
    }

    /// `i_blocks` in filesystem blocks (`huge_file` is the superblock's RO_COMPAT_HUGE_FILE).
    pub fn blocks(&self, huge_file: bool, block_size: u64) -> Result<u64, Odd> {
        if !huge_file {
            let sectors = self.blocks_raw & 0xFFFF_FFFF;
            return Ok(sectors * 512 / block_size);
        }
        if self.flags & fl::HUGE_FILE != 0 {
            return Ok(self.blocks_raw);
        }
        if (self.blocks_raw * 512) % block_size != 0 {
            return odd(format!(
                "i_blocks {} is not a whole number of blocks",
                self.blocks_raw
            ));
        }
        Ok(self.blocks_raw * 512 / block_size)
    }
}

/// The bytes of inline data an inode holds: 60 in `i_block`, plus the value of its in-inode
/// `system.data` extended attribute (`ext4_get_inline_size`).
pub fn inline_size(raw: &[u8]) -> Result<u64, Odd> {
    if raw.len() <= 132 {
        return odd("inline data in an inode without in-inode xattr space");
    }
    let extra = le16(raw, 128) as usize;
    let start = 128 + extra;
    if extra % 4 != 0 || start + 4 > raw.len() {
        return odd(format!("i_extra_isize {extra} is out of range"));
    }
    if le32(raw, start) != 0xEA02_0000 {
        return odd("inline data without in-inode extended attributes");
    }
    let area = &raw[start + 4..];
    let mut at = 0usize;
    while at + 16 <= area.len() && le32(area, at) != 0 {
        let name_len = area[at] as usize;
        let index = area[at + 1];
        let value_size = le32(area, at + 8) as u64;
        if at + 16 + name_len > area.len() {
            return odd("an in-inode extended attribute runs past the inode");
        }
        // EXT4_XATTR_INDEX_SYSTEM (7), name "data".
        if index == 7 && &area[at + 16..at + 16 + name_len] == b"data" {
            return Ok(60 + value_size);
        }
        at += (16 + name_len + 3) & !3;
    }
    odd("inline data without its system.data attribute")
}
