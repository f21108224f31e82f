//! Where a crashed file's wrong bytes came from: which operation of the run put them in the
//! file, and at what offset. A failure then reads as a cause: bytes an operation before the
//! durable point wrote at the same offset are stale (a zeroing or an overwrite lost); bytes
//! written at another offset were moved there (a shift, a copy or a misplaced block); bytes no
//! operation wrote are the disk's own (another file's, or metadata).
//!
//! The exerciser's data comes from one pool of random bytes (`Model::write`), so 8 or more
//! bytes that are not all alike identify where they were written. The search re-runs the
//! model from the start once and looks for them only in the range each operation changed
//! ([`Model::changed_range`]): a match there is what that operation wrote or moved. It runs
//! for a failure only.

use memchr::memmem;

use super::Event;
use crate::workload::exercise::model::Model;
use crate::workload::exercise::ops::{Op, OpKind};

/// The fewest and the most of the wrong bytes searched for.
const NEEDLE_MIN: usize = 8;
const NEEDLE_MAX: usize = 32;
/// How many of the places found before the cut a failure names (the latest).
const SHOWN: usize = 3;

/// One place the wrong bytes were found: operation `op` (of kind `kind`) left them at
/// `offset` of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub op: u64,
    pub kind: OpKind,
    pub offset: u64,
}

/// Where the wrong bytes were found in the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Whence {
    /// How many bytes were searched for (0: too few, or all alike, to tell).
    pub searched: usize,
    /// The latest places up to the cut's last operation (at most [`SHOWN`]), oldest first.
    pub before_cut: Vec<Seen>,
    /// The latest place up to the durable point, when `before_cut` has none (the pool repeats
    /// across writes: stale bytes may also be newer operations' bytes elsewhere).
    pub before_durable: Option<Seen>,
    /// The first place after it, if any (bytes from after the cut cannot be on the disk).
    pub after_cut: Option<Seen>,
}

/// How far the wrong bytes that start `allowed` reach: up to the first [`NEEDLE_MIN`] allowed
/// bytes in a row (a wrong run is often cut short by a byte that matches by chance, 1 in 256).
pub fn wrong_span(allowed: &[bool]) -> usize {
    let mut ok_in_a_row = 0;
    for (i, &a) in allowed.iter().enumerate() {
        ok_in_a_row = if a { ok_in_a_row + 1 } else { 0 };
        if ok_in_a_row == NEEDLE_MIN {
            return i + 1 - NEEDLE_MIN;
        }
    }
    allowed.len()
}

/// The wrong bytes worth searching for: the first of the run, at most [`NEEDLE_MAX`], when
/// there are at least [`NEEDLE_MIN`] and they are not all alike (zeros are everywhere).
pub fn needle(found: &[u8], at: usize, run: usize) -> Option<&[u8]> {
    let n = run.min(NEEDLE_MAX).min(found.len().saturating_sub(at));
    let s = found.get(at..at + n)?;
    (n >= NEEDLE_MIN && s.iter().any(|&b| b != s[0])).then_some(s)
}

/// Searches operations 1..=ops.len() (`ops[n - 1]` is operation n) of a model made by `fresh`
/// (of a file of at most `max_len` bytes) for `needle`; `vd` is the durable point's version
/// and `last` the cut's last operation.
pub fn search(
    fresh: Model,
    max_len: u64,
    ops: &[(Op, u64)],
    needle: &[u8],
    (vd, last): (u64, u64),
) -> Whence {
    let mut m = fresh;
    let mut w = Whence {
        searched: needle.len(),
        ..Whence::default()
    };
    let finder = memmem::Finder::new(needle);
    for (i, &(op, _)) in ops.iter().enumerate() {
        let n = i as u64 + 1;
        let before = m.size();
        if m.misfit(op).is_some() {
            break;
        }
        m.apply(n, op);
        let r = Model::changed_range(op, before, m.size());
        // Bytes that straddle the range's start are partly the operation's too.
        let lo = r.start.saturating_sub(needle.len() as u64 - 1);
        let hi = r.end.min(max_len);
        if lo >= hi {
            continue;
        }
        let Some(pos) = finder.find(m.range(lo, hi - lo)) else {
            continue;
        };
        let seen = Seen {
            op: n,
            kind: op.kind,
            offset: lo + pos as u64,
        };
        if n <= vd {
            w.before_durable = Some(seen);
        }
        if n <= last {
            if w.before_cut.len() == SHOWN {
                w.before_cut.remove(0);
            }
            w.before_cut.push(seen);
        } else {
            w.after_cut = Some(seen);
            break;
        }
    }
    if w.before_cut.first().is_some_and(|s| s.op <= vd) {
        w.before_durable = None;
    }
    w
}

impl Whence {
    /// The lines a failure's report adds: where the wrong bytes came from, each place told
    /// against the durable point `d` and the wrong bytes' own offset `at`.
    pub fn lines(&self, d: &Event, at: u64) -> Vec<String> {
        if self.searched == 0 {
            return vec![];
        }
        let vd = d.what.version();
        let place = |s: &Seen| {
            let when = if s.op <= vd {
                "before the durable point"
            } else {
                "since the durable point"
            };
            let moved = match s.offset.cmp(&at) {
                std::cmp::Ordering::Equal => "at this offset".to_string(),
                std::cmp::Ordering::Less => format!("at {:#x} ({} lower)", s.offset, at - s.offset),
                std::cmp::Ordering::Greater => {
                    format!("at {:#x} ({} higher)", s.offset, s.offset - at)
                }
            };
            format!("  by {} {} {moved}, {when}", s.op, s.kind)
        };
        let mut out = vec![format!(
            "where the first {} wrong bytes were written:",
            self.searched
        )];
        out.extend(self.before_durable.iter().map(place));
        out.extend(self.before_cut.iter().map(place));
        if let Some(s) = &self.after_cut {
            out.push(format!(
                "  by {} {} at {:#x}, after the cut (cannot be on the disk)",
                s.op, s.kind, s.offset
            ));
        }
        if self.before_cut.is_empty() && self.after_cut.is_none() {
            out.push(
                "  by no operation of the run (the disk's own bytes: another file's, or metadata)"
                    .into(),
            );
        }
        out
    }
}
