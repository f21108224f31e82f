//! The judge of a crashed file against the record of the run that wrote it.
//!
//! The rule (issue 32, "What a user can do" 1): let D be the last durability point whose end
//! is at or before the cut T, and V_D the file as of D (the model after D's operations).
//! Every operation that started by T may have reached the disk, wholly, partly or not at all
//! (one in flight at T counts): with L the last of them, each byte may hold its value in any
//! of V_D, V_{D+1}, ..., V_L (a version's zeros past its size count as its bytes), and the size
//! may be any of theirs, or a block boundary between the smallest and the largest of them: a
//! filesystem writes a growing file's size back as its blocks reach the disk (ext4's
//! `i_disksize`, xfs's on-disk size at I/O completion), so a cut during that writeback finds
//! the size at the end of the last block written, a size no version had. Nothing else: no
//! stale bytes that D had overwritten, no foreign data, no zeros never written. Before the
//! first durability point anything goes, even no file.
//!
//! How (memory and time): the model is re-run once from the start to D (kept between calls, so
//! cuts judged in increasing order re-run each operation once), copied, and run forward from D
//! to L; after each operation only the bytes it may have changed ([`Model::changed_range`])
//! are compared with what was found, setting a per-byte "allowed" flag, and a "changed since
//! D" flag that tells lost durable data from foreign data. Memory: two models (2 × max_len
//! plus their data pools) and two flags per byte, whatever the number of operations; time:
//! one pass over the file plus the bytes the operations since D touched (an operation touches
//! at most `--max-op-len`, a collapse, insert or truncate up to the file's size). A 1 MiB file
//! with 3000 operations of every non-durable kind since its durable point takes about 50 ms
//! (`cargo bench --bench durable_cost`).

use anyhow::{bail, Result};

use super::shift;
use super::verdict::{Class, Found, Mismatch, Problem, Verdict, SINCE_SHOWN};
use super::whence::{self, Whence};
use super::{Event, Record, What};
use crate::base::error::bad_input;
use crate::workload::exercise::model::Model;
use crate::workload::exercise::ops::Op;

/// The block a filesystem writes a growing file's size back in steps of (the page size).
const SIZE_STEP: u64 = 4096;

/// Whether a crashed file's `size` is allowed by the versions' `sizes`: one of them, or a block
/// boundary between the smallest and the largest (a size written back part-way).
fn size_allowed(sizes: &[u64], size: u64) -> bool {
    let (Some(&lo), Some(&hi)) = (sizes.iter().min(), sizes.iter().max()) else {
        return false;
    };
    sizes.contains(&size) || (size % SIZE_STEP == 0 && lo < size && size < hi)
}

#[cfg(test)]
pub(super) fn size_allowed_for_tests(sizes: &[u64], size: u64) -> bool {
    size_allowed(sizes, size)
}

/// A judge for one record, reusable across crash states (its buffers and the model as of the
/// last durable point judged are kept).
pub struct Judge<'r> {
    rec: &'r Record,
    /// Operation `n` at index `n - 1`, with its start time.
    ops: Vec<(Op, u64)>,
    /// The model as of version `base_v`.
    base: Model,
    base_v: u64,
    work: Model,
    allowed: Vec<bool>,
    changed: Vec<bool>,
}

/// Judges `found` against `rec` at cut `cut_ns` (see the module's rule). Errors only when the
/// record itself is malformed (operations out of order or not fitting the file).
pub fn judge(rec: &Record, cut_ns: u64, found: Found<'_>) -> Result<Verdict> {
    Judge::new(rec)?.judge(cut_ns, found)
}

impl<'r> Judge<'r> {
    /// A judge of `rec`; checks that its operations count up by one from 1.
    pub fn new(rec: &'r Record) -> Result<Self> {
        let mut ops = Vec::with_capacity(rec.events.len());
        for e in &rec.events {
            let What::Op(n, op) = e.what else { continue };
            if n != ops.len() as u64 + 1 {
                return Err(bad_input(format!(
                    "the durability record of {} has operation {n} where {} was due; operations must count up by one",
                    rec.file.display(),
                    ops.len() + 1
                )));
            }
            ops.push((op, e.start_ns));
        }
        let model = || Model::new(rec.max_len, rec.max_op_len, rec.seed);
        Ok(Self {
            rec,
            ops,
            base: model()?,
            base_v: 0,
            work: model()?,
            allowed: Vec::with_capacity(rec.max_len as usize),
            changed: Vec::with_capacity(rec.max_len as usize),
        })
    }

    /// Applies operation `n` to `m`, refusing one that does not fit.
    fn apply(&self, m: &mut Model, n: u64) -> Result<()> {
        let op = self.ops[(n - 1) as usize].0;
        if let Some(why) = m.misfit(op) {
            bail!(
                "the durability record of {}: operation {n}: {why}",
                self.rec.file.display()
            );
        }
        m.apply(n, op);
        Ok(())
    }

    /// Brings the base model to version `v`.
    fn advance_base(&mut self, v: u64) -> Result<()> {
        if self.base_v > v {
            self.base = Model::new(self.rec.max_len, self.rec.max_op_len, self.rec.seed)?;
            self.base_v = 0;
        }
        let mut base = std::mem::replace(&mut self.base, Model::new(0, 0, 0)?);
        let r = (self.base_v + 1..=v).try_for_each(|n| self.apply(&mut base, n));
        self.base = base;
        r?;
        self.base_v = v;
        Ok(())
    }

    /// Judges what was found at cut `cut_ns`.
    pub fn judge(&mut self, cut_ns: u64, found: Found<'_>) -> Result<Verdict> {
        let Some(d) = self
            .rec
            .events
            .iter()
            .rev()
            .find(|e| e.durable && e.end_ns <= cut_ns)
            .copied()
        else {
            return Ok(Verdict::Pass {
                durable_point: None,
                versions: 0,
            });
        };
        let vd = d.what.version().min(self.ops.len() as u64);
        let last = (self.ops.partition_point(|&(_, s)| s <= cut_ns) as u64).max(vd);
        let bytes = match found {
            Found::Absent => {
                let (class, problem) = (Class::LostDurableData, Problem::Missing);
                return Ok(self.mismatch(cut_ns, d, vd, last, class, problem));
            }
            Found::File(b) => b,
        };
        self.advance_base(vd)?;
        let sizes = self.sweep(vd, last, bytes)?;
        if self.allowed.contains(&false) {
            let span = (vd, last);
            let (base, work, ops) = (&self.base, &mut self.work, &self.ops);
            shift::allow_unshifted(base, work, ops, span, bytes, &mut self.allowed);
        }
        if let Some(at) = self.allowed.iter().position(|&a| !a) {
            let run = self.allowed[at..].iter().take_while(|&&a| !a).count() as u64;
            let class = if self.changed[at] {
                Class::ForeignData
            } else {
                Class::LostDurableData
            };
            let allowed = self.values_at(vd, last, at)?;
            let end = (at + 16).min(bytes.len());
            let span = whence::wrong_span(&self.allowed[at..]);
            let whence = match whence::needle(bytes, at, span) {
                Some(n) => {
                    let fresh = Model::new(self.rec.max_len, self.rec.max_op_len, self.rec.seed)?;
                    whence::search(fresh, self.rec.max_len, &self.ops, n, (vd, last))
                }
                None => Whence::default(),
            };
            let problem = Problem::Data {
                offset: at as u64,
                run,
                allowed,
                durable: self.base.range(at as u64, (end - at) as u64).to_vec(),
                found: bytes[at..end].to_vec(),
                whence,
            };
            return Ok(self.mismatch(cut_ns, d, vd, last, class, problem));
        }
        if !size_allowed(&sizes, bytes.len() as u64) {
            let mut allowed = sizes;
            allowed.truncate(16);
            let problem = Problem::Size {
                found: bytes.len() as u64,
                allowed,
            };
            return Ok(self.mismatch(cut_ns, d, vd, last, Class::LostDurableData, problem));
        }
        Ok(Verdict::Pass {
            durable_point: Some(d.what),
            versions: last - vd + 1,
        })
    }

    /// Runs the model from version `vd` (the base) to `last`, marking which found bytes some
    /// version held (`allowed`) and which bytes some version changed (`changed`); returns the
    /// distinct sizes of the versions in order.
    fn sweep(&mut self, vd: u64, last: u64, found: &[u8]) -> Result<Vec<u64>> {
        let n = found.len().min(self.rec.max_len as usize);
        let durable = self.base.range(0, n as u64);
        self.allowed.clear();
        self.allowed
            .extend(found[..n].iter().zip(durable).map(|(f, d)| f == d));
        // Past --max-len no version has a byte (the size check reports it).
        self.allowed.resize(found.len(), false);
        self.changed.clear();
        self.changed.resize(found.len(), false);
        let mut work = std::mem::replace(&mut self.work, Model::new(0, 0, 0)?);
        work.copy_from(&self.base);
        let mut sizes = vec![work.size()];
        let mut r = Ok(());
        for v in vd + 1..=last {
            let before = work.size();
            if let Err(e) = self.apply(&mut work, v) {
                r = Err(e);
                break;
            }
            let range = Model::changed_range(self.ops[(v - 1) as usize].0, before, work.size());
            let (lo, hi) = (range.start.min(n as u64), range.end.min(n as u64));
            let now = work.range(lo, hi - lo);
            let was = self.base.range(lo, hi - lo);
            let (lo, hi) = (lo as usize, hi as usize);
            // Slices zipped, no indexing: the loop has no bounds checks and vectorizes.
            let flags = self.changed[lo..hi]
                .iter_mut()
                .zip(&mut self.allowed[lo..hi]);
            for ((c, a), ((&x, &d), &f)) in flags.zip(now.iter().zip(was).zip(&found[lo..hi])) {
                *c |= x != d;
                *a |= x == f;
            }
            if !sizes.contains(&work.size()) {
                sizes.push(work.size());
            }
        }
        self.work = work;
        r.map(|()| sizes)
    }

    /// The distinct values versions `vd..=last` hold at byte `at` (at most 16): a second run
    /// forward, made only for a failure.
    fn values_at(&mut self, vd: u64, last: u64, at: usize) -> Result<Vec<u8>> {
        let mut work = std::mem::replace(&mut self.work, Model::new(0, 0, 0)?);
        work.copy_from(&self.base);
        let max_len = self.rec.max_len;
        let value = |m: &Model| ((at as u64) < max_len).then(|| m.range(at as u64, 1)[0]);
        let mut vals: Vec<u8> = value(&work).into_iter().collect();
        let mut r = Ok(());
        for v in vd + 1..=last {
            if let Err(e) = self.apply(&mut work, v) {
                r = Err(e);
                break;
            }
            if let Some(x) = value(&work) {
                if !vals.contains(&x) && vals.len() < 16 {
                    vals.push(x);
                }
            }
        }
        self.work = work;
        r.map(|()| vals)
    }

    fn mismatch(
        &self,
        cut_ns: u64,
        d: Event,
        vd: u64,
        last: u64,
        class: Class,
        problem: Problem,
    ) -> Verdict {
        let first_shown = last.saturating_sub(SINCE_SHOWN as u64).max(vd) + 1;
        let since = (first_shown..=last)
            .map(|n| (n, self.ops[(n - 1) as usize].0.kind))
            .collect();
        Verdict::Fail(Box::new(Mismatch {
            file: self.rec.file.clone(),
            class,
            problem,
            cut_ns,
            durable_point: d,
            versions: last - vd + 1,
            since,
            since_count: last - vd,
        }))
    }
}
