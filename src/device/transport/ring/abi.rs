//! The few FUSE messages the device server's ring answers, as in `include/uapi/linux/fuse.h`
//! (ABI 7.42+): the request fields it reads and the out arguments it writes, by byte offset
//! in native byte order (the kernel's own).

/// `FUSE_OVER_IO_URING`, in INIT's `flags2` (bit 41 of the 64-bit flags).
pub const FUSE_OVER_IO_URING: u64 = 1 << 41;

pub const LOOKUP: u32 = 1;
pub const GETATTR: u32 = 3;
pub const OPEN: u32 = 14;
pub const READ: u32 = 15;
pub const WRITE: u32 = 16;
pub const STATFS: u32 = 17;
pub const RELEASE: u32 = 18;
pub const FSYNC: u32 = 20;
pub const FLUSH: u32 = 25;
pub const OPENDIR: u32 = 27;
pub const RELEASEDIR: u32 = 29;
pub const FALLOCATE: u32 = 43;

pub const ROOT_INO: u64 = 1;

/// `sizeof(struct fuse_entry_out)`.
pub const ENTRY_OUT: usize = 128;
/// `sizeof(struct fuse_attr_out)`.
pub const ATTR_OUT: usize = 104;
/// `sizeof(struct fuse_open_out)`.
pub const OPEN_OUT: usize = 16;
/// `sizeof(struct fuse_write_out)`.
pub const WRITE_OUT: usize = 8;
/// `sizeof(struct fuse_statfs_out)`.
pub const STATFS_OUT: usize = 80;

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(v)
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// `fuse_in_header`: the opcode and the node.
pub struct InHeader {
    pub opcode: u32,
    pub nodeid: u64,
}

impl InHeader {
    pub fn parse(h: &[u8]) -> InHeader {
        InHeader {
            opcode: u32_at(h, 4),
            nodeid: u64_at(h, 16),
        }
    }
}

/// `fuse_read_in` / `fuse_write_in`: offset and size.
pub fn rw_in(op_in: &[u8]) -> (u64, u32) {
    (u64_at(op_in, 8), u32_at(op_in, 16))
}

/// `fuse_fallocate_in`: offset, length, mode.
pub fn fallocate_in(op_in: &[u8]) -> (u64, u64, i32) {
    (
        u64_at(op_in, 8),
        u64_at(op_in, 16),
        u32_at(op_in, 24) as i32,
    )
}

/// A node's attributes, as the server states them.
#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub ino: u64,
    pub size: u64,
    /// `st_mode`, type bits included.
    pub mode: u32,
    pub nlink: u32,
    /// Seconds since the epoch, for every time.
    pub time: u64,
}

/// `struct fuse_attr` (88 bytes) at `b[0..]`.
fn put_attr(b: &mut [u8], a: &Attr) {
    b[..88].fill(0);
    put64(b, 0, a.ino);
    put64(b, 8, a.size);
    put64(b, 16, a.size / 512);
    put64(b, 24, a.time);
    put64(b, 32, a.time);
    put64(b, 40, a.time);
    put32(b, 60, a.mode);
    put32(b, 64, a.nlink);
    put32(b, 80, 4096);
}

/// `fuse_entry_out` into `b`; returns its size.
pub fn entry_out(b: &mut [u8], a: &Attr, ttl_s: u64) -> usize {
    b[..ENTRY_OUT].fill(0);
    put64(b, 0, a.ino);
    put64(b, 16, ttl_s);
    put64(b, 24, ttl_s);
    put_attr(&mut b[40..], a);
    ENTRY_OUT
}

/// `fuse_attr_out` into `b`; returns its size.
pub fn attr_out(b: &mut [u8], a: &Attr, ttl_s: u64) -> usize {
    b[..ATTR_OUT].fill(0);
    put64(b, 0, ttl_s);
    put_attr(&mut b[16..], a);
    ATTR_OUT
}

/// `fuse_open_out` (handle 0, no flags) into `b`; returns its size.
pub fn open_out(b: &mut [u8]) -> usize {
    b[..OPEN_OUT].fill(0);
    OPEN_OUT
}

/// `fuse_write_out` into `b`; returns its size.
pub fn write_out(b: &mut [u8], written: u32) -> usize {
    b[..WRITE_OUT].fill(0);
    put32(b, 0, written);
    WRITE_OUT
}

/// `fuse_statfs_out` of an empty filesystem into `b`; returns its size.
pub fn statfs_out(b: &mut [u8]) -> usize {
    b[..STATFS_OUT].fill(0);
    put32(b, 40, 4096);
    put32(b, 44, 255);
    put32(b, 48, 4096);
    STATFS_OUT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_out_puts_the_node_its_timeouts_and_its_attributes_where_fuse_h_has_them() {
        let mut b = [0xffu8; 256];
        let a = Attr {
            ino: 2,
            size: 1 << 30,
            mode: libc::S_IFREG | 0o600,
            nlink: 1,
            time: 7,
        };
        assert_eq!(entry_out(&mut b, &a, 3600), 128);
        assert_eq!(u64_at(&b, 0), 2, "nodeid");
        assert_eq!(u64_at(&b, 16), 3600, "entry_valid");
        assert_eq!(u64_at(&b, 24), 3600, "attr_valid");
        assert_eq!(u64_at(&b, 40), 2, "attr.ino");
        assert_eq!(u64_at(&b, 48), 1 << 30, "attr.size");
        assert_eq!(u64_at(&b, 56), (1 << 30) / 512, "attr.blocks");
        assert_eq!(u32_at(&b, 100), libc::S_IFREG | 0o600, "attr.mode");
        assert_eq!(u32_at(&b, 104), 1, "attr.nlink");
        assert_eq!(u32_at(&b, 120), 4096, "attr.blksize");
        assert_eq!(b[128], 0xff, "nothing past the struct");
    }

    #[test]
    fn read_and_fallocate_arguments_are_read_at_their_offsets() {
        let mut op = [0u8; 128];
        put64(&mut op, 8, 12345 * 4096);
        put32(&mut op, 16, 4096);
        assert_eq!(rw_in(&op), (12345 * 4096, 4096));
        put64(&mut op, 16, 1 << 20);
        put32(&mut op, 24, 0x10);
        assert_eq!(fallocate_in(&op), (12345 * 4096, 1 << 20, 0x10));
    }
}
