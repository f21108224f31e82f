//! Cutting a failing replay log down to the steps the failure needs (`fsgauge exercise
//! --replay LOG --minimize OUT`): delta debugging (Zeller and Hildebrandt's ddmin) over the
//! log's steps. A candidate is a subset of the steps in their order, renumbered from 1 (the
//! data of a write follow its number, so the bytes change, not the operations); it "still
//! fails" when a run of it fails the same way as the whole log. The runs themselves are the
//! caller's ([`ddmin`] takes them as a closure), so the search is tested here on its own and
//! the command line runs each candidate as a fresh `fsgauge exercise` (see
//! `cli::exercise_minimize`).
//!
//! ddmin ends 1-minimal: no single step of the result can go without the failure going too
//! (for a failure every run shows; one that shows in some runs only is retried up to the
//! caller's number of tries a candidate).

use anyhow::Result;

use super::engine::Step;

/// Steps renumbered as a log needs them: operations 1, 2, ... in order; a remount, reopen or
/// corruption "after N" follows the last operation kept before it (0 before any).
pub fn renumber(steps: &[Step]) -> Vec<Step> {
    let mut n = 0;
    steps
        .iter()
        .map(|s| match *s {
            Step::Op(_, op) => {
                n += 1;
                Step::Op(n, op)
            }
            Step::Remount(_) => Step::Remount(n),
            Step::Reopen(_) => Step::Reopen(n),
            Step::Corrupt(_, off) => Step::Corrupt(n, off),
        })
        .collect()
}

/// The text of a replay log: `header` (the original's `#` lines, each ending in a newline)
/// and the steps, one a line.
pub fn log_text(header: &str, steps: &[Step]) -> String {
    let mut s = header.to_string();
    for st in steps {
        s.push_str(&st.to_string());
        s.push('\n');
    }
    s
}

/// What a search did: the steps kept (renumbered) and the candidates tried.
#[derive(Debug, Clone, PartialEq)]
pub struct Minimized {
    pub steps: Vec<Step>,
    pub tried: u32,
}

/// ddmin over `steps`: `fails(candidate)` runs a candidate (renumbered) and says whether it
/// still fails the same way; `progress(kept, tried)` hears of each smaller failing set. The
/// whole list is taken to fail (the caller checked it).
pub fn ddmin(
    steps: &[Step],
    mut fails: impl FnMut(&[Step]) -> Result<bool>,
    mut progress: impl FnMut(usize, u32),
) -> Result<Minimized> {
    let mut cur: Vec<Step> = steps.to_vec();
    let mut tried = 0u32;
    let mut n = 2usize;
    while cur.len() >= 2 {
        let chunks = split(cur.len(), n);
        let mut reduced = false;
        // Each complement (all chunks but one), then each chunk alone.
        for drop in 0..chunks.len() {
            let cand: Vec<Step> = chunks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != drop)
                .flat_map(|(_, r)| cur[r.clone()].iter().copied())
                .collect();
            tried += 1;
            if fails(&renumber(&cand))? {
                cur = cand;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for r in &chunks {
                let cand = cur[r.clone()].to_vec();
                tried += 1;
                if fails(&renumber(&cand))? {
                    cur = cand;
                    n = 2;
                    reduced = true;
                    break;
                }
            }
        }
        if reduced {
            progress(cur.len(), tried);
        } else if n >= cur.len() {
            break;
        } else {
            n = (n * 2).min(cur.len());
        }
    }
    Ok(Minimized {
        steps: renumber(&cur),
        tried,
    })
}

/// `len` items in `n` contiguous chunks as even as can be (the first ones one longer).
fn split(len: usize, n: usize) -> Vec<std::ops::Range<usize>> {
    let n = n.min(len).max(1);
    let (q, r) = (len / n, len % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let l = q + usize::from(i < r);
        out.push(at..at + l);
        at += l;
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::workload::exercise::ops::{Op, OpKind};

    fn write(off: u64) -> Op {
        Op::new(OpKind::Write, off, 1)
    }

    /// Steps 1..=k, operation i writing at offset i (the offset names the original step).
    fn steps(k: u64) -> Vec<Step> {
        (1..=k).map(|i| Step::Op(i, write(i))).collect()
    }

    fn offsets(s: &[Step]) -> Vec<u64> {
        s.iter()
            .filter_map(|s| match s {
                Step::Op(_, op) => Some(op.off),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ddmin_finds_the_two_steps_a_failure_needs_among_a_hundred() {
        let mut runs = 0;
        let m = ddmin(
            &steps(100),
            |c| {
                runs += 1;
                let o = offsets(c);
                Ok(o.contains(&17) && o.contains(&83))
            },
            |_, _| {},
        )
        .unwrap();
        assert_eq!(offsets(&m.steps), vec![17, 83]);
        assert_eq!(m.steps[0], Step::Op(1, write(17)));
        assert_eq!(m.steps[1], Step::Op(2, write(83)));
        assert_eq!(m.tried, runs);
        assert!(runs < 60, "{runs} runs for 100 steps");
    }

    #[test]
    fn ddmin_result_is_one_minimal_and_keeps_the_order() {
        let need = [3u64, 9, 10, 40];
        let m = ddmin(
            &steps(50),
            |c| {
                let o = offsets(c);
                Ok(need.iter().all(|n| o.contains(n)))
            },
            |_, _| {},
        )
        .unwrap();
        assert_eq!(offsets(&m.steps), need.to_vec());
    }

    #[test]
    fn ddmin_hears_of_each_smaller_failing_set() {
        let mut seen = Vec::new();
        ddmin(
            &steps(16),
            |c| Ok(offsets(c).contains(&5)),
            |kept, _| seen.push(kept),
        )
        .unwrap();
        assert_eq!(seen.last(), Some(&1));
        assert!(seen.windows(2).all(|w| w[1] < w[0]), "{seen:?}");
    }

    #[test]
    fn renumbering_follows_the_operations_kept() {
        let s = vec![
            Step::Op(4, write(4)),
            Step::Remount(4),
            Step::Op(9, write(9)),
            Step::Corrupt(9, 0x40),
            Step::Op(12, write(12)),
        ];
        assert_eq!(
            renumber(&s),
            vec![
                Step::Op(1, write(4)),
                Step::Remount(1),
                Step::Op(2, write(9)),
                Step::Corrupt(2, 0x40),
                Step::Op(3, write(12)),
            ]
        );
        assert_eq!(renumber(&[Step::Reopen(7)]), vec![Step::Reopen(0)]);
    }

    #[test]
    fn a_minimized_log_reads_back_as_its_steps() {
        let header = "# fsgauge exercise replay log v1\n# seed 3\n# params {}\n";
        let text = log_text(header, &renumber(&steps(3)));
        assert_eq!(
            text,
            format!("{header}1 write 0x1 0x1\n2 write 0x2 0x1\n3 write 0x3 0x1\n")
        );
    }

    #[test]
    fn chunks_cover_every_item_once() {
        assert_eq!(split(10, 3), vec![0..4, 4..7, 7..10]);
        assert_eq!(split(2, 5), vec![0..1, 1..2]);
    }
}
