//! Findings over results from several machines: the machine is a blocking factor.
//!
//! A result set from a Slurm array, or several directories given to `report`, holds runs made
//! on different hosts. Pooling them as one sample would turn a machine's offset (one host 20%
//! faster at everything) into noise, and pair repetition k of the baseline on one host with
//! repetition k of the variant on another. So where the question's results come from two
//! machines or more (by `host.hostname`, each with runs of both sides), a pair is repetition k
//! of both sides *on the same machine*, each machine's ratio is stated with its interval, and
//! the pooled ratio is the fixed-block model's ([`crate::analysis::stats::blocked`]), with
//! the machines named when they disagree beyond their noise. Results from one machine are
//! untouched: their finding is made as it always was.

use serde::{Deserialize, Serialize};

use super::sides;
use crate::analysis::stats::blocked::{blocked_pairs, Block, Blocked};
use crate::analysis::stats::Ratio;
use crate::results::clock::Clock;
use crate::results::{Question, RunResult};

/// One machine's ratio in a pooled finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineRatio {
    /// The host name the results recorded.
    pub host: String,
    /// Its ratio variant / baseline over its own pairs, with the interval from the variance
    /// within machines pooled over every pair.
    pub ratio: Ratio,
}

/// How a finding over several machines was pooled, and whether they agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    /// Each machine's ratio, in the order first seen.
    pub machines: Vec<MachineRatio>,
    /// The F statistic of the machine term on the pairs' log ratios; absent with one pair
    /// per machine (then the machines are the replicates and their agreement is not tested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f: Option<f64>,
    /// Its p-value: below 0.05, the machines disagree beyond their noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_heterogeneity: Option<f64>,
    /// The machines that disagree (empty when they agree).
    pub disagreeing: Vec<String>,
    /// Runs left out: without a partner of the same repetition on the same machine.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpaired: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Pooled {
    /// The pooled ratio of a fit, and how it was pooled (`unpaired` runs left out).
    pub fn of(b: Blocked, unpaired: usize) -> (Ratio, Self) {
        let pooled = Pooled {
            machines: b
                .machines
                .into_iter()
                .map(|(host, ratio)| MachineRatio { host, ratio })
                .collect(),
            f: b.f,
            p_heterogeneity: b.p_heterogeneity,
            disagreeing: b.disagreeing,
            unpaired,
        };
        (b.ratio, pooled)
    }

    /// Whether the machines disagree beyond their intervals.
    pub fn disagree(&self) -> bool {
        !self.disagreeing.is_empty()
    }

    /// The median of the machines' ratios (geometric mean of the two middle ones).
    pub fn median(&self) -> f64 {
        let mut r: Vec<f64> = self.machines.iter().map(|m| m.ratio.ratio).collect();
        r.sort_by(f64::total_cmp);
        let k = r.len();
        match k {
            0 => f64::NAN,
            _ if k % 2 == 1 => r[k / 2],
            _ => (r[k / 2 - 1] * r[k / 2]).sqrt(),
        }
    }
}

/// The machines whose results hold values of both sides of the question, in the order first
/// seen, with their results.
fn machines<'a>(
    q: &Question,
    results: &'a [RunResult],
    clock: Clock,
) -> Vec<(&'a str, Vec<&'a RunResult>)> {
    let mut out: Vec<(&str, Vec<&RunResult>)> = Vec::new();
    for r in results {
        let host = r.host.hostname.as_str();
        match out.iter_mut().find(|(h, _)| *h == host) {
            Some((_, rs)) => rs.push(r),
            None => out.push((host, vec![r])),
        }
    }
    out.retain(|(_, rs)| {
        let (b, v) = sides(q, rs.iter().copied(), clock);
        !b.is_empty() && !v.is_empty()
    });
    out
}

/// Repetition k of both sides, where each side has it once.
pub(crate) fn pair_up(base: &[(u32, f64)], variant: &[(u32, f64)]) -> Vec<(f64, f64)> {
    let once = |side: &[(u32, f64)], rep: u32| {
        let mut it = side.iter().filter(|(r, _)| *r == rep);
        match (it.next(), it.next()) {
            (Some(&(_, v)), None) => Some(v),
            _ => None,
        }
    };
    // A repetition twice on one side (two result sets merged) pairs with nothing.
    base.iter()
        .filter_map(|&(rep, _)| Some((once(base, rep)?, once(variant, rep)?)))
        .collect()
}

/// The question's ratio pooled over machines at `level` on `clock`, with how; `None` when
/// fewer than two machines have runs of both sides (the finding is made as for one machine),
/// or why there is no ratio.
pub(super) fn pooled(
    q: &Question,
    results: &[RunResult],
    clock: Clock,
    level: f64,
) -> Option<Result<(Ratio, Pooled), String>> {
    let hosts = machines(q, results, clock);
    if hosts.len() < 2 {
        return None;
    }
    let paired: Vec<(&str, Vec<(f64, f64)>)> = hosts
        .iter()
        .map(|(host, rs)| {
            let (b, v) = sides(q, rs.iter().copied(), clock);
            (*host, pair_up(&b, &v))
        })
        .collect();
    // Runs of a machine with one side only are left out too.
    let (all_b, all_v) = sides(q, results, clock);
    let unpaired = all_b.len() + all_v.len() - 2 * paired.iter().map(|p| p.1.len()).sum::<usize>();
    let blocks: Vec<Block> = paired.iter().map(|(h, p)| (*h, p.as_slice())).collect();
    Some(
        blocked_pairs(&blocks, level)
            .map(|b| Pooled::of(b, unpaired))
            .map_err(|e| {
                format!(
                    "{e}: runs on {} machines pair only within a machine (repetition k of both sides on one host)",
                    hosts.len()
                )
            }),
    )
}
