//! Shifts move blocks, not bytes. A collapse or insert range changes the file's extent map;
//! data written in place after it lands in the block, wherever the map puts the block. Until
//! the shift is durable a crash may find the map from before it with a later write's data in
//! the block: a later version's byte at the place the byte had before the shift. A journaled
//! filesystem orders only newly allocated blocks' data before the metadata that maps them
//! (ext4 data=ordered), never an overwrite in place against a shift committed later, so this
//! is a state a crash may leave, not a fault; measured with the kernel's own shutdown
//! (`--crash-shutdown`) on a plain loop device as well as on the emulated disk's cuts.
//!
//! The judge's rule for such bytes (an extension of the per-byte rule of [`super::judge`]):
//! for every shift S since the durable point and every version V_k from S on, byte `o` of the
//! layout before S may hold V_k's byte at `o` moved by the shifts from S to k. Nothing older
//! than the durable point is allowed by it, and nothing of another file.

use crate::workload::exercise::model::Model;
use crate::workload::exercise::ops::{Op, OpKind};

/// One shift: where a byte of the layout before it is after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    /// `len` bytes at `off` removed; what follows moves down.
    Collapse { off: u64, len: u64 },
    /// `len` zero bytes inserted at `off`; what follows moves up.
    Insert { off: u64, len: u64 },
}

impl Shift {
    /// The shift operation `op` makes, if it is one.
    pub fn of(op: Op) -> Option<Shift> {
        match op.kind {
            OpKind::Collapse => Some(Shift::Collapse {
                off: op.off,
                len: op.len,
            }),
            OpKind::Insert => Some(Shift::Insert {
                off: op.off,
                len: op.len,
            }),
            _ => None,
        }
    }

    /// Where byte `o` of the layout before the shift is after it (None: collapsed away).
    pub fn forward(self, o: u64) -> Option<u64> {
        match self {
            Shift::Collapse { off, len } if o >= off + len => Some(o - len),
            Shift::Collapse { off, .. } if o >= off => None,
            Shift::Insert { off, len } if o >= off => Some(o + len),
            _ => Some(o),
        }
    }
}

/// Marks `allowed[o]` for every byte `o` not yet allowed that, by the rule above, a version
/// from a shift since the durable point holds: `base` is the model at the durable point
/// (version `vd`), `ops[n - 1]` operation n, `last` the last operation started by the cut.
/// Runs the model forward once per shift, comparing only the bytes still wrong.
pub fn allow_unshifted(
    base: &Model,
    work: &mut Model,
    ops: &[(Op, u64)],
    (vd, last): (u64, u64),
    found: &[u8],
    allowed: &mut [bool],
) {
    let max_len = found.len().min(allowed.len());
    let starts: Vec<u64> = (vd + 1..=last)
        .filter(|&v| Shift::of(ops[(v - 1) as usize].0).is_some())
        .collect();
    for s in starts {
        let mut wrong: Vec<usize> = (0..max_len).filter(|&o| !allowed[o]).collect();
        if wrong.is_empty() {
            return;
        }
        work.copy_from(base);
        let mut chain: Vec<Shift> = Vec::new();
        for v in vd + 1..=last {
            let op = ops[(v - 1) as usize].0;
            if work.misfit(op).is_some() {
                break;
            }
            work.apply(v, op);
            if v < s {
                continue;
            }
            chain.extend(Shift::of(op));
            let held = work.range(0, work.max_len());
            wrong.retain(|&o| {
                let moved = chain.iter().try_fold(o as u64, |p, sh| sh.forward(p));
                let hit = moved.is_some_and(|p| held.get(p as usize) == Some(&found[o]));
                if hit {
                    allowed[o] = true;
                }
                !hit
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shift_moves_what_follows_it_and_a_collapse_drops_its_range() {
        let c = Shift::Collapse {
            off: 4096,
            len: 8192,
        };
        assert_eq!(c.forward(100), Some(100));
        assert_eq!(c.forward(4096), None);
        assert_eq!(c.forward(12287), None);
        assert_eq!(c.forward(12288), Some(4096));
        let i = Shift::Insert {
            off: 4096,
            len: 4096,
        };
        assert_eq!(i.forward(4095), Some(4095));
        assert_eq!(i.forward(4096), Some(8192));
    }
}
