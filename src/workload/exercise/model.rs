//! The in-memory image of the file: what every byte must read as, and the file's size.
//!
//! The model is one buffer of `--max-len` bytes, allocated once and aligned to a page so that
//! writes can go to the kernel straight from it (also with O_DIRECT): a write fills the model's
//! range with the operation's data and `pwrite`s that very range, so there is no copy and no
//! allocation per operation. Bytes past the size are kept at zero, which is what a grown file
//! (truncate, fallocate, a write past EOF, an insert) must read as.

use rand::{RngCore, SeedableRng};

use super::ops::{Op, OpKind};
use crate::base::sys::AlignedBuf;

/// The expected content and size of the file.
pub struct Model {
    buf: AlignedBuf,
    size: u64,
    /// Random bytes that writes take their data from (at least twice the longest write, so
    /// that the start can vary and different writes leave different bytes).
    pool: Vec<u8>,
}

impl Model {
    /// An empty file that may grow to `max_len`; write data is drawn from `seed`. The lengths
    /// are the exerciser's settings, checked against their limits
    /// ([`super::ops::MAX_FILE_LEN`]) before anything runs; sizes that do not fit the
    /// address space, or memory the allocator cannot give, are an error here, never a
    /// wrapped size.
    pub fn new(max_len: u64, max_op_len: u64, seed: u64) -> anyhow::Result<Self> {
        // Long enough for a write of the whole file (a replay log edited by hand may ask).
        let pool_len = max_op_len
            .checked_mul(2)
            .map(|p| p.max(max_len))
            .and_then(|p| p.checked_add(4096))
            .and_then(|p| usize::try_from(p).ok())
            .ok_or_else(|| too_long(max_len, max_op_len))?;
        let len = usize::try_from(max_len).map_err(|_| too_long(max_len, max_op_len))?;
        let buf = AlignedBuf::try_zeroed(len)?;
        let mut pool = Vec::new();
        pool.try_reserve_exact(pool_len).map_err(|e| {
            anyhow::anyhow!(
                "the exerciser's data pool of {pool_len} bytes (for --max-op-len {max_op_len}) cannot be allocated: {e}"
            )
        })?;
        pool.resize(pool_len, 0);
        rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xda7a_da7a_da7a_da7a).fill_bytes(&mut pool);
        Ok(Self { buf, size: 0, pool })
    }

    /// The file's expected size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The whole expected content (`size` bytes).
    pub fn content(&self) -> &[u8] {
        &self.buf[..self.size as usize]
    }

    /// Expected bytes of `off..off+len`.
    pub fn range(&self, off: u64, len: u64) -> &[u8] {
        &self.buf[off as usize..(off + len) as usize]
    }

    /// Fills `off..off+len` with write number `n`'s data and returns the range, ready to be
    /// written to the file; extends the size.
    pub fn write(&mut self, n: u64, off: u64, len: u64) -> &[u8] {
        let (o, l) = (off as usize, len as usize);
        let start =
            (n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) as usize % (self.pool.len() - l + 1);
        self.buf[o..o + l].copy_from_slice(&self.pool[start..start + l]);
        self.size = self.size.max(off + len);
        &self.buf[o..o + l]
    }

    /// Sets the size: shrinking forgets (zeroes) the bytes past it, growing exposes zeros.
    pub fn truncate(&mut self, size: u64) {
        if size < self.size {
            self.buf[size as usize..self.size as usize].fill(0);
        }
        self.size = size;
    }

    /// Grows the size to at least `end` (fallocate without keep-size).
    pub fn extend(&mut self, end: u64) {
        self.size = self.size.max(end);
    }

    /// Zeroes `off..off+len` (a punched hole or zeroed range); bytes past EOF are zero already.
    pub fn zero(&mut self, off: u64, len: u64) {
        let end = (off + len).min(self.size);
        if off < end {
            self.buf[off as usize..end as usize].fill(0);
        }
    }

    /// Removes `off..off+len`; what follows moves down.
    pub fn collapse(&mut self, off: u64, len: u64) {
        let (o, l, s) = (off as usize, len as usize, self.size as usize);
        self.buf.copy_within(o + l..s, o);
        self.buf[s - l..s].fill(0);
        self.size -= len;
    }

    /// Inserts `len` zero bytes at `off`; what follows moves up.
    pub fn insert(&mut self, off: u64, len: u64) {
        let (o, l, s) = (off as usize, len as usize, self.size as usize);
        self.buf.copy_within(o..s, o + l);
        self.buf[o..o + l].fill(0);
        self.size += len;
    }

    /// Copies `src..src+len` to `dst` (copy_file_range, clone); may extend the size.
    pub fn copy(&mut self, src: u64, len: u64, dst: u64) {
        let (s, l, d) = (src as usize, len as usize, dst as usize);
        self.buf.copy_within(s..s + l, d);
        self.size = self.size.max(dst + len);
    }

    /// Why `op` cannot be modelled on the file as it is now (only a hand-edited replay log has
    /// such steps; the generator never makes them): [`misfit_at`] of the model's size.
    pub fn misfit(&self, op: Op) -> Option<String> {
        misfit_at(op, self.size, self.buf.len() as u64)
    }

    /// What operation number `n` does to the file, as the engine models it when it performs
    /// the operation (the durability judge re-runs a log with this). `op` must fit
    /// ([`Model::misfit`]).
    pub fn apply(&mut self, n: u64, op: Op) {
        match op.kind {
            OpKind::Write | OpKind::WriteDontcache | OpKind::MapWrite => {
                self.write(n, op.off, op.len);
            }
            OpKind::Truncate => self.truncate(op.len),
            OpKind::Falloc if !op.keep => self.extend(op.off + op.len),
            OpKind::Punch => self.zero(op.off, op.len),
            OpKind::Zero => {
                if !op.keep {
                    self.extend(op.off + op.len);
                }
                self.zero(op.off, op.len);
            }
            OpKind::Collapse => self.collapse(op.off, op.len),
            OpKind::Insert => self.insert(op.off, op.len),
            OpKind::Copy | OpKind::Clone => self.copy(op.off, op.len, op.dst),
            OpKind::Falloc
            | OpKind::Read
            | OpKind::ReadDontcache
            | OpKind::MapRead
            | OpKind::Fsync
            | OpKind::Fdatasync
            | OpKind::Syncfs => {}
        }
    }

    /// The bytes `op` (applied to a file of `size_before` bytes, leaving `size_after`) may
    /// have changed: a superset, empty for operations that change no byte. Bytes past the size
    /// are zero in the model, so growing the size alone changes none.
    pub fn changed_range(op: Op, size_before: u64, size_after: u64) -> std::ops::Range<u64> {
        let (lo, hi) = (size_before.min(size_after), size_before.max(size_after));
        match op.kind {
            OpKind::Write | OpKind::WriteDontcache | OpKind::MapWrite => op.off..op.off + op.len,
            OpKind::Punch | OpKind::Zero => {
                let end = (op.off + op.len).min(hi);
                op.off.min(end)..end
            }
            OpKind::Truncate | OpKind::Falloc => lo..hi,
            OpKind::Collapse | OpKind::Insert => op.off..hi,
            OpKind::Copy | OpKind::Clone => op.dst..op.dst + op.len,
            OpKind::Read
            | OpKind::ReadDontcache
            | OpKind::MapRead
            | OpKind::Fsync
            | OpKind::Fdatasync
            | OpKind::Syncfs => 0..0,
        }
    }

    /// Makes this model the same file as `other` (a model of the same run: same seed and
    /// lengths), without allocating.
    /// The most bytes the file may hold (the model's buffer).
    pub fn max_len(&self) -> u64 {
        self.buf.len() as u64
    }

    pub fn copy_from(&mut self, other: &Model) {
        let n = self.size.max(other.size) as usize;
        self.buf[..n].copy_from_slice(&other.buf[..n]);
        self.size = other.size;
    }
}

/// The model's lengths do not fit this machine's address space.
fn too_long(max_len: u64, max_op_len: u64) -> anyhow::Error {
    crate::base::error::bad_input(format!(
        "--max-len {max_len} and --max-op-len {max_op_len} do not fit this machine's memory; give at most {}",
        crate::base::units::format_size(super::ops::MAX_FILE_LEN)
    ))
}

/// Why `op` cannot be modelled on a file of `size` bytes that may grow to `max` bytes, if it
/// cannot. As the generator makes them (`ops`): reads and copies inside the file (a mapped
/// read past EOF would be SIGBUS), a collapse ending before EOF, an insert inside the file,
/// a copy's two ranges apart, and nothing past `max`. A log cut by hand or by --minimize may
/// break these; [`super::ReplayLog::parse`] finds them before anything runs, with
/// [`size_after`].
pub fn misfit_at(op: Op, size: u64, max: u64) -> Option<String> {
    let end = |a: u64| a.checked_add(op.len).filter(|&e| e <= max);
    let inside = |a: u64| end(a).is_some_and(|e| e <= size);
    let why = match op.kind {
        OpKind::Truncate => (op.len > max).then_some("it truncates past --max-len"),
        OpKind::Fsync | OpKind::Fdatasync | OpKind::Syncfs => None,
        OpKind::Read | OpKind::ReadDontcache | OpKind::MapRead => {
            (!inside(op.off)).then_some("it reads past the end of the file")
        }
        OpKind::Collapse => end(op.off)
            .is_none_or(|e| e >= size)
            .then_some("a collapse must end before the end of the file"),
        OpKind::Insert => (op.off >= size || size.checked_add(op.len).is_none_or(|e| e > max))
            .then_some("an insert must start inside the file and leave it within --max-len"),
        OpKind::Copy | OpKind::Clone => {
            if !inside(op.off) {
                Some("its source reaches past the end of the file")
            } else if end(op.dst).is_none() {
                Some("its destination reaches past --max-len")
            } else if op.off < op.dst.saturating_add(op.len)
                && op.dst < op.off.saturating_add(op.len)
            {
                Some("its source and destination overlap (a copy within one file needs two ranges apart)")
            } else {
                None
            }
        }
        _ => end(op.off).is_none().then_some("it reaches past --max-len"),
    };
    why.map(|why| {
        format!(
            "{op} does not fit a file of {size:#x} bytes that may grow to --max-len {max:#x}: {why}"
        )
    })
}

/// The file's size after `op` on a file of `size` bytes, as [`Model::apply`] leaves it;
/// `op` must fit ([`misfit_at`]).
pub fn size_after(op: Op, size: u64) -> u64 {
    let grow = |a: u64| size.max(a.saturating_add(op.len));
    match op.kind {
        OpKind::Write | OpKind::WriteDontcache | OpKind::MapWrite => grow(op.off),
        OpKind::Truncate => op.len,
        OpKind::Falloc | OpKind::Zero if !op.keep => grow(op.off),
        OpKind::Collapse => size.saturating_sub(op.len),
        OpKind::Insert => size.saturating_add(op.len),
        OpKind::Copy | OpKind::Clone => grow(op.dst),
        _ => size,
    }
}

/// Where two byte ranges first differ: the offset (relative to the ranges) of the first byte
/// that differs and the length of the run of differing bytes that starts there.
pub fn first_difference(expected: &[u8], found: &[u8]) -> Option<(usize, usize)> {
    if expected == found {
        return None;
    }
    let n = expected.len().min(found.len());
    let start = (0..n).find(|&i| expected[i] != found[i]).unwrap_or(n);
    let run = (start..n)
        .take_while(|&i| expected[i] != found[i])
        .count()
        .max(1);
    Some((start, run))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn model_follows_the_semantics_of_each_operation() {
        let mut m = Model::new(64, 16, 1).expect("a small model");
        let w = m.write(1, 4, 8).to_vec();
        assert_eq!(m.size(), 12);
        assert_eq!(&m.content()[..4], &[0; 4]);
        assert_eq!(&m.content()[4..12], &w[..]);
        m.truncate(6);
        assert_eq!(m.size(), 6);
        m.truncate(20);
        assert_eq!(&m.content()[6..20], &[0; 14], "grown part reads as zeros");
        m.copy(4, 2, 30);
        assert_eq!(m.size(), 32);
        assert_eq!(&m.content()[30..32], &w[..2]);
        m.collapse(0, 4);
        assert_eq!(m.size(), 28);
        assert_eq!(&m.content()[..2], &w[..2]);
        m.insert(0, 8);
        assert_eq!(m.size(), 36);
        assert_eq!(&m.content()[8..10], &w[..2]);
        m.zero(8, 1);
        assert_eq!(m.content()[8], 0);
        m.truncate(0);
        assert!(m.buf.iter().all(|&b| b == 0), "nothing left past EOF");
    }

    #[test]
    fn operations_a_cut_log_makes_impossible_do_not_fit() {
        let mut m = Model::new(64, 16, 1).expect("a small model");
        m.write(1, 0, 20);
        let fits = |m: &Model, kind, off, len, dst| {
            let mut op = Op::new(kind, off, len);
            op.dst = dst;
            m.misfit(op).is_none()
        };
        // Reads inside the file fit; past EOF (a mapped one would be SIGBUS) they do not.
        assert!(fits(&m, OpKind::MapRead, 4, 16, 0));
        assert!(!fits(&m, OpKind::MapRead, 4, 17, 0));
        assert!(!fits(&m, OpKind::Read, 20, 1, 0));
        // A collapse must end before EOF, an insert start inside the file.
        assert!(fits(&m, OpKind::Collapse, 0, 19, 0));
        assert!(!fits(&m, OpKind::Collapse, 0, 20, 0));
        assert!(!fits(&m, OpKind::Insert, 20, 4, 0));
        // A copy's source inside the file, its two ranges apart.
        assert!(fits(&m, OpKind::Copy, 0, 8, 40));
        assert!(!fits(&m, OpKind::Copy, 16, 8, 40));
        assert!(!fits(&m, OpKind::Clone, 0, 8, 4));
        // Writes and truncates may reach --max-len.
        assert!(fits(&m, OpKind::Write, 60, 4, 0));
        assert!(!fits(&m, OpKind::Write, 60, 5, 0));
    }

    proptest::proptest! {
        /// The size walk a replay log is checked with before anything runs ([`size_after`],
        /// [`misfit_at`]) agrees with the model itself, operation after operation.
        #[test]
        fn the_size_walk_follows_the_model(
            ops in proptest::collection::vec(
                (0..OpKind::ALL.len(), 0u64..80, 0u64..40, 0u64..80, proptest::bool::ANY),
                1..40,
            )
        ) {
            let mut m = Model::new(64, 16, 1).expect("a small model");
            let mut size = 0;
            for (n, (k, off, len, dst, keep)) in ops.into_iter().enumerate() {
                let mut op = Op::new(OpKind::ALL[k], off, len);
                (op.dst, op.keep) = (dst, keep);
                let fits = misfit_at(op, size, 64).is_none();
                proptest::prop_assert_eq!(fits, m.misfit(op).is_none());
                if fits {
                    m.apply(n as u64 + 1, op);
                    size = size_after(op, size);
                    proptest::prop_assert_eq!(size, m.size(), "after {}", op);
                }
            }
        }
    }

    #[test]
    fn a_copy_onto_itself_says_so() {
        let mut m = Model::new(64, 16, 1).expect("a small model");
        m.write(1, 0, 32);
        let mut op = Op::new(OpKind::Copy, 0, 16);
        op.dst = 8;
        let why = m.misfit(op).expect("overlapping ranges do not fit");
        assert!(why.contains("source and destination overlap"), "{why}");
    }

    #[test]
    fn lengths_past_the_address_space_are_errors() {
        let e = Model::new(u64::MAX, u64::MAX, 1).err().expect("refused");
        assert!(format!("{e:#}").contains("do not fit"), "{e:#}");
    }

    #[test]
    fn different_writes_leave_different_bytes() {
        let mut m = Model::new(4096, 1024, 5).expect("a small model");
        let a = m.write(1, 0, 512).to_vec();
        let b = m.write(2, 0, 512).to_vec();
        assert_ne!(a, b);
    }

    #[test]
    fn first_difference_finds_the_run() {
        assert_eq!(first_difference(b"abcdef", b"abcdef"), None);
        assert_eq!(first_difference(b"abcdef", b"abXYef"), Some((2, 2)));
        assert_eq!(first_difference(b"abc", b"abd"), Some((2, 1)));
    }

    #[test]
    fn aligned_buffer_is_page_aligned() {
        let b = AlignedBuf::zeroed(10);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 10);
    }
}
