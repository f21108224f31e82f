//! What the judge says about a crashed file, and how a failure reads.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::whence::Whence;
use super::{Event, What};
use crate::workload::exercise::ops::OpKind;

/// The exerciser's file as read back from the crash state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<'a> {
    /// The file does not exist.
    Absent,
    /// Its whole content (its size is the length).
    File(&'a [u8]),
}

/// The two ways a crashed file can be wrong (issue 32's failure classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Something made durable is gone: a byte only the durable version may hold differs, the
    /// file is missing, or its size is none the versions since the durable point had.
    LostDurableData,
    /// A byte that no version since the durable point held (stale, foreign or never-written).
    ForeignData,
}

impl Class {
    /// The name used in reports: `lost durable data`, `foreign data`.
    pub fn name(self) -> &'static str {
        match self {
            Class::LostDurableData => "lost durable data",
            Class::ForeignData => "foreign data",
        }
    }
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file is absent although its set-up was made durable.
    Missing,
    /// The first wrong byte and the run of wrong bytes that starts there.
    Data {
        offset: u64,
        run: u64,
        /// The distinct values the versions allowed at `offset` held (at most 16).
        allowed: Vec<u8>,
        /// The durable version's bytes from `offset` (as many as `found` has).
        durable: Vec<u8>,
        /// The crashed file's bytes from `offset` (up to 16).
        found: Vec<u8>,
        /// Which operations of the run wrote the wrong bytes, and where.
        whence: Whence,
    },
    /// The size is none of the allowed versions' sizes.
    Size {
        found: u64,
        /// The distinct sizes allowed (at most 16, in the order of the versions).
        allowed: Vec<u64>,
    },
}

/// A failed judgement: everything a report needs to say what and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub file: PathBuf,
    pub class: Class,
    pub problem: Problem,
    /// The cut, CLOCK_MONOTONIC nanoseconds.
    pub cut_ns: u64,
    /// The last durability point that had ended by the cut.
    pub durable_point: Event,
    /// How many versions of the file were allowed (the durable one and one per operation
    /// started since, by the cut).
    pub versions: u64,
    /// The operations started since the durable point, by the cut: the last ones (at most
    /// [`SINCE_SHOWN`]), oldest first.
    pub since: Vec<(u64, OpKind)>,
    /// How many there were in all.
    pub since_count: u64,
}

/// How many of the operations since the durable point a failure lists.
pub const SINCE_SHOWN: usize = 20;

/// The judge's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// What was found is allowed. `durable_point` is the last one ended by the cut (none:
    /// anything was allowed), `versions` how many versions were allowed.
    Pass {
        durable_point: Option<What>,
        versions: u64,
    },
    /// It is not.
    Fail(Box<Mismatch>),
}

impl Verdict {
    /// The failure, if it is one.
    pub fn failure(&self) -> Option<&Mismatch> {
        match self {
            Verdict::Pass { .. } => None,
            Verdict::Fail(m) => Some(m),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Mismatch {
    /// One line: the class, the file, and where.
    pub fn headline(&self) -> String {
        let what = match &self.problem {
            Problem::Missing => "the file is missing".to_string(),
            Problem::Data { offset, run, .. } => {
                format!("{run} wrong byte(s) at offset {offset:#x} ({offset})")
            }
            Problem::Size { found, allowed } => format!(
                "size {found} is none of the {} allowed ({})",
                allowed.len(),
                allowed
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "{} in {}: {what}, after durable point {}",
            self.class.name(),
            self.file.display(),
            self.durable_point.what
        )
    }

    /// The full report: the headline, the bytes, the durable point and the operations since.
    pub fn render(&self) -> String {
        let mut s = format!("{}\n", self.headline());
        let _ = writeln!(s, "cut at {} ns (CLOCK_MONOTONIC)", self.cut_ns);
        if let Problem::Data {
            offset,
            allowed,
            durable,
            found,
            whence,
            ..
        } = &self.problem
        {
            let _ = writeln!(
                s,
                "allowed at that byte: {} version(s) holding {} distinct value(s): {}",
                self.versions,
                allowed.len(),
                hex(allowed)
            );
            let _ = writeln!(s, "durable version: {}", hex(durable));
            let _ = writeln!(s, "found:           {}", hex(found));
            for line in whence.lines(&self.durable_point, *offset) {
                let _ = writeln!(s, "{line}");
            }
        }
        let d = &self.durable_point;
        let _ = writeln!(s, "durable point: {} (ended at {} ns)", d.what, d.end_ns);
        let _ = write!(
            s,
            "operations started since, by the cut: {}",
            self.since_count
        );
        if self.since_count > self.since.len() as u64 {
            let _ = write!(s, " (the last {})", self.since.len());
        }
        s.push('\n');
        for (n, k) in &self.since {
            let _ = writeln!(s, "  {n} {k}");
        }
        s
    }
}
