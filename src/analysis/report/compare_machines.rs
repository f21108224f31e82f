//! `compare` over results from several machines: the machine a blocking factor, as in
//! `report`'s findings ([`crate::analysis::findings::machines`]).
//!
//! Where both sets hold a metric's values from two hosts or more (each with values of both
//! sides), pooling them as one sample would turn a machine's offset (one host 20% faster at
//! everything) into noise. So the ratio new / base is made from pairs *within* a machine
//! (repetition k of both sides on one host), each machine's ratio is stated with its
//! interval, the pooled ratio is the fixed-block model's
//! ([`crate::analysis::stats::blocked`]), and the machines that disagree beyond their
//! intervals are named. A comparison of one machine is made as it always was.

use serde::Serialize;

use super::cells::CellMetric;
use crate::analysis::findings::machines::{pair_up, MachineRatio, Pooled};
use crate::analysis::stats::blocked::{blocked_pairs, Block};
use crate::analysis::stats::{summarize, Ratio};

/// One machine's figures of both sides.
#[derive(Debug, Clone, Serialize)]
pub struct MachineFigures {
    pub host: String,
    pub base_n: usize,
    pub base_mean: f64,
    pub base_sd: f64,
    pub new_n: usize,
    pub new_mean: f64,
    pub new_sd: f64,
}

/// How a compared metric was pooled over machines.
#[derive(Debug, Clone, Serialize)]
pub struct Machines {
    /// Each machine's ratio, the test of their agreement, the ones that disagree.
    pub pooled: Pooled,
    /// Each machine's means, in the order of `pooled.machines`.
    pub figures: Vec<MachineFigures>,
}

impl Machines {
    /// The figures and ratio of one machine.
    pub fn each(&self) -> impl Iterator<Item = (&MachineFigures, &MachineRatio)> {
        self.figures.iter().zip(&self.pooled.machines)
    }
}

/// The (repetition, value) pairs of one host.
fn side(m: &CellMetric, host: &str) -> Vec<(u32, f64)> {
    m.origins
        .iter()
        .zip(&m.values)
        .filter(|((h, _), _)| h == host)
        .map(|((_, rep), &v)| (*rep, v))
        .collect()
}

/// The hosts with values on both sides, in the order the base first has them.
fn hosts<'a>(base: &'a CellMetric, new: &CellMetric) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for (h, _) in &base.origins {
        if !out.contains(&h.as_str()) && new.origins.iter().any(|(n, _)| n == h) {
            out.push(h);
        }
    }
    out
}

/// The pooled ratio new / base at 95% and how it was pooled; `None` when fewer than two
/// machines have values of both sides, or when their pairs give no ratio (then the
/// comparison is made as for one machine).
pub fn pooled(base: &CellMetric, new: &CellMetric) -> Option<(Ratio, Machines)> {
    let hosts = hosts(base, new);
    if hosts.len() < 2 {
        return None;
    }
    let paired: Vec<(&str, Vec<(f64, f64)>)> = hosts
        .iter()
        .map(|h| (*h, pair_up(&side(base, h), &side(new, h))))
        .collect();
    let pairs: usize = paired.iter().map(|p| p.1.len()).sum();
    let blocks: Vec<Block> = paired.iter().map(|(h, p)| (*h, p.as_slice())).collect();
    let (ratio, pooled) = Pooled::of(
        blocked_pairs(&blocks, 0.95).ok()?,
        base.values.len() + new.values.len() - 2 * pairs,
    );
    let figures = pooled
        .machines
        .iter()
        .map(|m| figures(base, new, &m.host))
        .collect::<Option<Vec<_>>>()?;
    Some((ratio, Machines { pooled, figures }))
}

/// One host's means and deviations of both sides.
fn figures(base: &CellMetric, new: &CellMetric, host: &str) -> Option<MachineFigures> {
    let values = |m: &CellMetric| {
        side(m, host)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
    };
    let (b, n) = (summarize(&values(base))?, summarize(&values(new))?);
    Some(MachineFigures {
        host: host.to_string(),
        base_n: b.n,
        base_mean: b.mean,
        base_sd: b.sd,
        new_n: n.n,
        new_mean: n.mean,
        new_sd: n.sd,
    })
}

/// What the comparison's note adds when a row was pooled over machines.
pub const NOTE: &str = "; a row over several machines: its ratio is made of pairs within each machine (repetition k of both sides on one host) pooled over the machines (the machine a blocking factor; n pairs on k machines), each machine's own ratio in the rows under it (\"disagrees\": beyond the intervals, by the F test of the machine); its p and verdict are the pooled ratio's, not Welch's over all the runs (which counts the machines' offsets as noise)";
