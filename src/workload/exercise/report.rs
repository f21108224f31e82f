//! What the exerciser tells a person: the failure report (which operation, which offset, the
//! expected and the found bytes of the first differing range in hex, the last operations) and
//! the summary table of a clean run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::ops::{Op, OpKind, Step};
use crate::base::text::{format_ns, format_rate, render};
use crate::results::RunResult;

/// What went wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureKind {
    /// Bytes read differ from the model. `offset` is the first differing byte (absolute file
    /// offset) and `run` the length of the differing run from there; `expected`/`found` hold
    /// the bytes from `offset` on: the run, at least 16 bytes, at most 64.
    Data {
        read_off: u64,
        read_len: u64,
        offset: u64,
        run: u64,
        expected: Vec<u8>,
        found: Vec<u8>,
    },
    /// fstat or lseek(SEEK_END) disagree with the model's size.
    Size { expected: u64, stat: u64, seek: u64 },
    /// A mapping showed a non-zero byte past EOF in the file's last page.
    EofPage { offset: u64, byte: u8 },
    /// A call moved fewer bytes than it had to (EOF earlier than the model says).
    Short {
        call: String,
        done: u64,
        wanted: u64,
    },
    /// A call failed.
    Io { call: String, detail: String },
}

/// A failure with everything needed to understand and replay it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub file: PathBuf,
    /// Number of the operation that found it (from 1); for a full verification after a
    /// remount, the number of the last operation before it.
    pub op_number: u64,
    /// The operation, or `None` for a full verification.
    pub op: Option<Op>,
    pub kind: FailureKind,
    /// The model's size at the time.
    pub size: u64,
    /// The last steps, oldest first, the failing one last.
    pub history: Vec<Step>,
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(if i % 16 == 0 { '\n' } else { ' ' });
            if i % 16 == 0 {
                s.push_str("            ");
            }
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

impl Failure {
    /// One line: what failed where.
    pub fn headline(&self) -> String {
        let what = match &self.op {
            Some(op) => format!("operation {} ({op})", self.op_number),
            None => format!(
                "the full verification after operation {} (after a remount or reopen)",
                self.op_number
            ),
        };
        let detail = match &self.kind {
            FailureKind::Data { offset, run, .. } => {
                format!("data mismatch at offset {offset:#x} ({offset}), {run} byte(s) differ")
            }
            FailureKind::Size {
                expected,
                stat,
                seek,
            } => format!(
                "size mismatch: expected {expected:#x}, fstat says {stat:#x}, lseek(SEEK_END) says {seek:#x}"
            ),
            FailureKind::EofPage { offset, byte } => format!(
                "non-zero byte {byte:#04x} past EOF at offset {offset:#x} in the mapped last page"
            ),
            FailureKind::Short { call, done, wanted } => {
                format!("{call} moved {done} of {wanted} bytes (EOF too early)")
            }
            FailureKind::Io { call, detail } => format!("{call} failed: {detail}"),
        };
        format!("{} in {what} on {}", detail, self.file.display())
    }

    /// The full report: headline, offsets, expected and found bytes, the last operations.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "MISMATCH: {}", self.headline());
        let _ = writeln!(s, "  operation number: {}", self.op_number);
        if let Some(op) = &self.op {
            let _ = writeln!(
                s,
                "  operation:        {} offset {:#x} length {:#x}{}",
                op.kind,
                op.off,
                op.len,
                if op.kind.has_dst() {
                    format!(" destination {:#x}", op.dst)
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(s, "  model size:       {:#x} ({})", self.size, self.size);
        if let FailureKind::Data {
            read_off,
            read_len,
            offset,
            run,
            expected,
            found,
        } = &self.kind
        {
            let _ = writeln!(
                s,
                "  range read:       {read_off:#x}..{:#x} ({read_len} bytes)",
                read_off + read_len
            );
            let _ = writeln!(
                s,
                "  first difference: offset {offset:#x} ({offset}), differing run {offset:#x}..{:#x} ({run} bytes{})",
                offset + run,
                if *run as usize > expected.len() {
                    format!(", first {} shown", expected.len())
                } else if expected.len() > *run as usize {
                    format!(", {} shown", expected.len())
                } else {
                    String::new()
                }
            );
            let _ = writeln!(s, "  expected:   {}", hex(expected));
            let _ = writeln!(s, "  found:      {}", hex(found));
        }
        let _ = writeln!(s, "last {} steps (oldest first):", self.history.len());
        for st in &self.history {
            let _ = writeln!(s, "  {st}");
        }
        s
    }

    /// Writes `report.txt` and the expected file image into `dir` (the replay log is written
    /// there as the run goes).
    pub fn save(&self, dir: &Path, stem: &str, expected_image: &[u8]) -> anyhow::Result<()> {
        let out = crate::base::atomic::OutDir::make(dir)?;
        out.replace(&format!("{stem}.report.txt"), self.render().as_bytes())?;
        out.replace(&format!("{stem}.expected.img"), expected_image)
    }
}

/// The summary of exercise results: one row per operation kind (count, share, mean and p99
/// latency), and the totals.
pub fn summary_table(results: &[RunResult]) -> String {
    let mut out = String::new();
    for r in results {
        let Some(p) = r.phases.iter().find(|p| p.name == "exercise") else {
            continue;
        };
        let _ = writeln!(
            out,
            "exercise on {} ({}), seed {}: {} verified operations in {:.2} s = {} ops/s, no mismatch",
            r.testbed.label,
            r.testbed.fs,
            r.seed,
            p.ops,
            p.wall_s,
            format_rate(p.ops_per_s)
        );
        let mut rows = Vec::new();
        for kind in OpKind::ALL {
            if let Some(st) = p.op_stats.get(kind.name()) {
                if st.count == 0 {
                    continue;
                }
                rows.push(vec![
                    kind.name().to_string(),
                    st.count.to_string(),
                    format!("{:.1}%", 100.0 * st.count as f64 / p.ops.max(1) as f64),
                    format_ns(st.latency.mean_ns as u64),
                    format_ns(st.latency.p99_ns),
                    format_ns(st.latency.max_ns),
                ]);
            }
        }
        for extra in ["remount", "verify"] {
            if let Some(st) = p.op_stats.get(extra).filter(|s| s.count > 0) {
                rows.push(vec![
                    format!("({extra})"),
                    st.count.to_string(),
                    String::new(),
                    format_ns(st.latency.mean_ns as u64),
                    format_ns(st.latency.p99_ns),
                    format_ns(st.latency.max_ns),
                ]);
            }
        }
        out.push_str(&render(
            &["operation", "count", "share", "mean", "p99", "max"],
            &rows,
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn report_names_offset_and_bytes() {
        let f = Failure {
            file: "/x/f".into(),
            op_number: 17,
            op: Some(Op::new(OpKind::Read, 0x100, 0x40)),
            kind: FailureKind::Data {
                read_off: 0x100,
                read_len: 0x40,
                offset: 0x123,
                run: 2,
                expected: vec![0xab, 0xcd],
                found: vec![0, 0],
            },
            size: 0x1000,
            history: vec![Step::Op(17, Op::new(OpKind::Read, 0x100, 0x40))],
        };
        let r = f.render();
        assert!(r.contains("operation 17 (read 0x100 0x40)"), "{r}");
        assert!(r.contains("offset 0x123 (291)"), "{r}");
        assert!(r.contains("expected:   ab cd"), "{r}");
        assert!(r.contains("found:      00 00"), "{r}");
        assert!(r.contains("  17 read 0x100 0x40"), "{r}");
    }
}
