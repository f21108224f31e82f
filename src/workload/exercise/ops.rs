//! The operations the exerciser performs, their text form (one line per operation in replay
//! logs and failure reports), and the seeded generator that picks them.
//!
//! The generator follows fsx (xfstests `ltp/fsx.c`): each step picks one of the enabled kinds
//! uniformly, an offset anywhere in the allowed range, and a length of up to `--max-op-len`,
//! trimmed to the file (reads, punches, copies) or to `--max-len` (writes, which may extend the
//! file). Ranges that a kind cannot take (a read of an empty file, a collapse of a file smaller
//! than two blocks) fall back to a write, so every step does something. Random numbers come
//! from ChaCha8 with `next_u64() % n` only, so a seed gives the same stream on every machine
//! and every build.

use std::fmt;
use std::str::FromStr;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The longest file the exerciser models (`--max-len`, a plan's `max_len`, a replay log's
/// header): the model keeps the whole file in memory, twice.
pub const MAX_FILE_LEN: u64 = 1 << 34;

crate::choice! {
    /// A kind of operation. Its name is the one used in `--no`, logs, reports and result files;
    /// `ALL` is the report order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum OpKind("operation") {
        /// pread(2) of a range inside the file, compared with the model.
        Read = "read",
        /// pwrite(2) anywhere below `--max-len` (past EOF extends the file, leaving a zero gap).
        Write = "write",
        /// preadv2(2) with RWF_DONTCACHE (pages dropped after the read; Linux 6.14+), compared.
        ReadDontcache = "read-dontcache" | "read_dontcache" | "readdc",
        /// pwritev2(2) with RWF_DONTCACHE (written back and dropped), like `write`.
        WriteDontcache = "write-dontcache" | "write_dontcache" | "writedc",
        /// mmap(2) of a range inside the file, compared in place; the tail of the last page past
        /// EOF must read as zeros.
        MapRead = "mapread" | "mmap-read",
        /// ftruncate up to the end if needed, mmap, memcpy, msync(MS_SYNC), munmap (as fsx).
        MapWrite = "mapwrite" | "mmap-write",
        /// ftruncate(2) to a new size (grow or shrink).
        Truncate = "truncate",
        /// fallocate(2) mode 0 or FALLOC_FL_KEEP_SIZE.
        Falloc = "falloc" | "fallocate",
        /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE.
        Punch = "punch" | "punch-hole" | "punch_hole",
        /// FALLOC_FL_ZERO_RANGE, with or without FALLOC_FL_KEEP_SIZE.
        Zero = "zero" | "zero-range" | "zero_range",
        /// FALLOC_FL_COLLAPSE_RANGE (block-aligned, ending before EOF).
        Collapse = "collapse" | "collapse-range" | "collapse_range",
        /// FALLOC_FL_INSERT_RANGE (block-aligned, starting before EOF).
        Insert = "insert" | "insert-range" | "insert_range",
        /// fsync(2).
        Fsync = "fsync",
        /// fdatasync(2).
        Fdatasync = "fdatasync",
        /// syncfs(2) of the file's filesystem (a durability point like fsync).
        Syncfs = "syncfs",
        /// copy_file_range(2) within the file, to a range that does not overlap the source.
        Copy = "copy" | "copy_file_range" | "copy-range",
        /// FICLONERANGE (reflink) within the file, block-aligned, not overlapping.
        Clone = "clone" | "reflink" | "ficlonerange",
    }
}

impl OpKind {
    /// Position in [`OpKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the kind compares file data with the model.
    pub fn reads(self) -> bool {
        matches!(self, OpKind::Read | OpKind::MapRead | OpKind::ReadDontcache)
    }

    /// Whether the kind has a destination offset.
    pub fn has_dst(self) -> bool {
        matches!(self, OpKind::Copy | OpKind::Clone)
    }

    /// Whether the kind takes the keep-size flag.
    pub fn has_keep(self) -> bool {
        matches!(self, OpKind::Falloc | OpKind::Zero)
    }
}

/// One operation with its arguments. `len` is the new size for `truncate`; `dst` is used by
/// `copy` and `clone`; `keep` is FALLOC_FL_KEEP_SIZE for `falloc` and `zero`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub off: u64,
    pub len: u64,
    pub dst: u64,
    pub keep: bool,
}

impl Op {
    /// An operation of `kind` on `off..off+len`.
    pub fn new(kind: OpKind, off: u64, len: u64) -> Self {
        Op {
            kind,
            off,
            len,
            dst: 0,
            keep: false,
        }
    }
}

impl fmt::Display for Op {
    /// `write 0x1000 0x200`, `copy 0x0 0x1000 0x8000`, `falloc 0x0 0x1000 keep`,
    /// `truncate 0x0 0x2345` (truncate's new size is its length).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:#x} {:#x}", self.kind, self.off, self.len)?;
        if self.kind.has_dst() {
            write!(f, " {:#x}", self.dst)?;
        }
        if self.keep {
            f.write_str(" keep")?;
        }
        Ok(())
    }
}

fn parse_num(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a number"))
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut w = s.split_whitespace();
        let kind: OpKind = w.next().ok_or("empty operation")?.parse()?;
        let off = parse_num(w.next().ok_or("missing offset")?)?;
        let len = parse_num(w.next().ok_or("missing length")?)?;
        let mut op = Op::new(kind, off, len);
        if kind.has_dst() {
            op.dst = parse_num(w.next().ok_or("missing destination offset")?)?;
        }
        match w.next() {
            None => {}
            Some("keep") if kind.has_keep() => op.keep = true,
            Some(x) => return Err(format!("unexpected {x:?} after the operation")),
        }
        Ok(op)
    }
}

/// The limits the generator works within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The file never grows past this.
    pub max_len: u64,
    /// Longest read, write, or range operation.
    pub max_op_len: u64,
    /// Every offset and length is a multiple of this (1 normally, the block size with
    /// `--direct`).
    pub align: u64,
    /// The filesystem block size: collapse, insert and clone ranges are multiples of it.
    pub block: u64,
}

/// The seeded operation stream.
pub struct OpGen {
    rng: ChaCha8Rng,
    enabled: Vec<OpKind>,
    lim: Limits,
}

fn down(v: u64, a: u64) -> u64 {
    v - v % a
}

impl OpGen {
    /// A generator over `enabled` kinds (must not be empty: `write` is always enabled).
    pub fn new(seed: u64, enabled: &[OpKind], lim: Limits) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            enabled: enabled.to_vec(),
            lim,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rng.next_u64() % n
        }
    }

    /// A length of 1..=max_op_len, aligned (at least one alignment unit).
    fn length(&mut self) -> u64 {
        let a = self.lim.align;
        let l = 1 + self.below(self.lim.max_op_len);
        down(l, a).max(a)
    }

    /// `off..off+len` placed below `limit`, aligned; `None` when nothing fits.
    fn range_below(&mut self, limit: u64) -> Option<(u64, u64)> {
        let a = self.lim.align;
        let limit = down(limit, a);
        if limit == 0 {
            return None;
        }
        let off = down(self.below(limit), a);
        let len = self.length().min(limit - off);
        Some((off, len))
    }

    /// The next operation for a file of `size` bytes.
    pub fn next(&mut self, size: u64) -> Op {
        let pick = self.below(self.enabled.len() as u64) as usize;
        let kind = self.enabled[pick];
        let lim = self.lim;
        let op = match kind {
            OpKind::Read | OpKind::ReadDontcache | OpKind::MapRead | OpKind::Punch => {
                self.range_below(size).map(|(o, l)| Op::new(kind, o, l))
            }
            OpKind::Write | OpKind::WriteDontcache | OpKind::MapWrite => self
                .range_below(lim.max_len)
                .map(|(o, l)| Op::new(kind, o, l)),
            OpKind::Falloc | OpKind::Zero => self.range_below(lim.max_len).map(|(o, l)| {
                let mut op = Op::new(kind, o, l);
                op.keep = self.below(2) == 1;
                op
            }),
            OpKind::Truncate => Some(Op::new(
                kind,
                0,
                down(self.below(lim.max_len + 1), lim.align),
            )),
            OpKind::Fsync | OpKind::Fdatasync | OpKind::Syncfs => Some(Op::new(kind, 0, 0)),
            OpKind::Collapse => {
                // Both ends block-aligned and the range must end before EOF.
                let b = lim.block.max(lim.align);
                let blocks = size / b;
                if blocks < 2 {
                    None
                } else {
                    let off = self.below(blocks - 1) * b;
                    let room = (blocks * b - off) / b - 1;
                    let len = (self.length() / b).clamp(1, room.max(1)) * b;
                    (off + len < size).then(|| Op::new(kind, off, len))
                }
            }
            OpKind::Insert => {
                let b = lim.block.max(lim.align);
                let blocks = size.div_ceil(b);
                let room = down(lim.max_len.saturating_sub(size), b);
                if size == 0 || room == 0 {
                    None
                } else {
                    // The offset must lie inside the file (insert at EOF is refused).
                    let off = self.below(blocks) * b;
                    let len = (self.length() / b).max(1) * b;
                    (off < size).then(|| Op::new(kind, off, len.min(room)))
                }
            }
            OpKind::Copy | OpKind::Clone => self.copy_range(kind, size),
        };
        op.unwrap_or_else(|| {
            let (o, l) = self
                .range_below(lim.max_len)
                .expect("max_len is at least one alignment unit");
            Op::new(OpKind::Write, o, l)
        })
    }

    /// A source range inside the file and a destination below `max_len` that does not overlap
    /// it (same-file copies of overlapping ranges are refused by the kernel). Clone ranges are
    /// block-aligned.
    fn copy_range(&mut self, kind: OpKind, size: u64) -> Option<Op> {
        let a = if kind == OpKind::Clone {
            self.lim.block.max(self.lim.align)
        } else {
            self.lim.align
        };
        let src_limit = down(size, a);
        if src_limit == 0 {
            return None;
        }
        let off = down(self.below(src_limit), a);
        let len = down(self.length().min(src_limit - off), a).max(a);
        if off + len > src_limit {
            return None;
        }
        let dst_limit = down(self.lim.max_len.saturating_sub(len), a);
        for _ in 0..8 {
            let dst = down(self.below(dst_limit + 1), a);
            if dst + len <= off || dst >= off + len {
                let mut op = Op::new(kind, off, len);
                op.dst = dst;
                return Some(op);
            }
        }
        None
    }
}

/// A step of a run as recorded in logs and histories: an operation with its number, or an
/// event between operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Operation number `n` (from 1).
    Op(u64, Op),
    /// Unmount, drop caches, mount, reopen and verify the whole file, after operation `n`.
    Remount(u64),
    /// Close, reopen and verify the whole file after operation `n` (a replay in a directory,
    /// where there is nothing to remount).
    Reopen(u64),
    /// A byte flipped behind the exerciser's back after operation `n` (fault injection for
    /// tests of the exerciser itself).
    Corrupt(u64, u64),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Op(n, op) => write!(f, "{n} {op}"),
            Step::Remount(n) => write!(f, "remount after {n}"),
            Step::Reopen(n) => write!(f, "reopen after {n}"),
            Step::Corrupt(n, off) => write!(f, "corrupt after {n} {off:#x}"),
        }
    }
}

impl std::str::FromStr for Step {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let num = |t: &str| -> Result<u64, String> {
            match t.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse(),
            }
            .map_err(|_| format!("{t:?} is not a number"))
        };
        let w: Vec<&str> = s.split_whitespace().collect();
        match w.as_slice() {
            ["remount", "after", n] => Ok(Step::Remount(num(n)?)),
            ["reopen", "after", n] => Ok(Step::Reopen(num(n)?)),
            ["corrupt", "after", n, off] => Ok(Step::Corrupt(num(n)?, num(off)?)),
            [n, rest @ ..] if !rest.is_empty() => {
                let op: Op = s[n.len()..].trim().parse()?;
                Ok(Step::Op(num(n)?, op))
            }
            _ => Err(format!("cannot read step {s:?}")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits {
            max_len: 256 << 10,
            max_op_len: 64 << 10,
            align: 1,
            block: 4096,
        }
    }

    #[test]
    fn ops_round_trip_through_text() {
        let mut g = OpGen::new(3, &OpKind::ALL, lim());
        let mut size = 0;
        for _ in 0..2000 {
            let op = g.next(size);
            let back: Op = op.to_string().parse().unwrap();
            assert_eq!(back, op, "{op}");
            size = (size + 7000).min(200_000);
        }
        assert!("frob 0x0 0x1"
            .parse::<Op>()
            .unwrap_err()
            .contains("unknown operation"));
        assert!("write 0x0".parse::<Op>().is_err());
        assert_eq!("fallocate".parse::<OpKind>().unwrap(), OpKind::Falloc);
    }

    #[test]
    fn same_seed_same_stream_and_ranges_hold_their_rules() {
        let (mut a, mut b) = (
            OpGen::new(9, &OpKind::ALL, lim()),
            OpGen::new(9, &OpKind::ALL, lim()),
        );
        let mut c = OpGen::new(10, &OpKind::ALL, lim());
        let mut differs = false;
        for i in 0..5000u64 {
            let size = (i * 977) % (256 << 10);
            let (x, y, z) = (a.next(size), b.next(size), c.next(size));
            assert_eq!(x, y);
            differs |= x != z;
            match x.kind {
                OpKind::Read | OpKind::ReadDontcache | OpKind::MapRead | OpKind::Punch => {
                    assert!(x.len > 0 && x.off + x.len <= size, "{x} size {size}")
                }
                OpKind::Write
                | OpKind::WriteDontcache
                | OpKind::MapWrite
                | OpKind::Falloc
                | OpKind::Zero => {
                    assert!(x.len > 0 && x.off + x.len <= 256 << 10, "{x}")
                }
                OpKind::Collapse => {
                    assert!(x.off % 4096 == 0 && x.len % 4096 == 0 && x.off + x.len < size)
                }
                OpKind::Insert => assert!(
                    x.off % 4096 == 0
                        && x.len % 4096 == 0
                        && x.off < size
                        && size + x.len <= 256 << 10
                ),
                OpKind::Copy | OpKind::Clone => {
                    assert!(x.off + x.len <= size && x.dst + x.len <= 256 << 10);
                    assert!(x.dst + x.len <= x.off || x.dst >= x.off + x.len, "{x}");
                    if x.kind == OpKind::Clone {
                        assert!(x.off % 4096 == 0 && x.len % 4096 == 0 && x.dst % 4096 == 0);
                    }
                }
                OpKind::Truncate => assert!(x.len <= 256 << 10),
                OpKind::Fsync | OpKind::Fdatasync | OpKind::Syncfs => {}
            }
        }
        assert!(differs, "another seed must give another stream");
    }

    #[test]
    fn direct_alignment_applies_to_every_offset_and_length() {
        let l = Limits {
            align: 4096,
            ..lim()
        };
        let mut g = OpGen::new(1, &OpKind::ALL, l);
        let mut size = 0u64;
        for _ in 0..3000 {
            let op = g.next(size);
            assert_eq!(op.off % 4096, 0, "{op}");
            assert_eq!(op.len % 4096, 0, "{op}");
            assert_eq!(op.dst % 4096, 0, "{op}");
            if matches!(
                op.kind,
                OpKind::Write | OpKind::WriteDontcache | OpKind::Truncate
            ) {
                size = if op.kind == OpKind::Truncate {
                    op.len
                } else {
                    size.max(op.off + op.len)
                };
            }
        }
    }
}
