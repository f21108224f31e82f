//! A ratio pooled over several machines, the machine a blocking factor.
//!
//! When the results of a question come from more than one machine, a pair is repetition k of
//! the baseline and of the variant *on the same machine*, and the per-pair log ratios
//! d = ln(variant / baseline) are analysed in the one-way fixed-block model
//! d_ij = μ_i + e_ij (machine i, pair j, e_ij ~ N(0, σ²)): the linear model `d ~ C(machine)`.
//!
//! Why this model rather than a random-effects pooling (DerSimonian–Laird) or a t interval
//! over the machines' means: a study spreads over two to a handful of machines, and the
//! variance *between* machines cannot be estimated from two or three of them (a t interval
//! over two machine means has one degree of freedom, t = 12.7; DerSimonian–Laird's τ² from
//! two studies is noise and its normal interval is too narrow). The fixed-block model is the
//! paired analysis of one machine ([`super::paired_ratio`]) generalised: with one machine it
//! is exactly that; with several, each machine's drift and offset cancel inside its pairs,
//! and the within-machine variance is pooled over every pair, so the intervals have N − k
//! degrees of freedom (N pairs, k machines) even where a machine ran only one or two rounds
//! (a Slurm array hands each machine a few rounds). The pooled ratio is exp of the
//! unweighted mean of the machines' mean log ratios — each machine counts once, whatever its
//! number of rounds — with standard error s·√(Σ 1/n_i)/k (the intercept of the model in
//! sum-to-zero coding). Each machine's own ratio has the interval exp(μ_i ± t·s/√n_i). All
//! intervals are of log ratios, so the ratios' intervals stay positive.
//!
//! The model says nothing of machines it did not see: the pooled ratio is the average over
//! *these* machines. Whether they agree is the F test of the machine term (machine ×
//! variant interaction on the ratio scale; with a common σ² it is Cochran's Q over the
//! machine means): p < 0.05 says the machines disagree beyond their noise, and the
//! machines whose interval lies wholly off the median of the machines' ratios are named (with
//! two machines, both). The common σ² assumes the machines are about as noisy as each other.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

use super::ratio::{log_interval, Ratio, RatioError};

/// One machine's pairs (baseline, variant).
pub type Block<'a> = (&'a str, &'a [(f64, f64)]);

/// The pooled ratio, each machine's, and whether they agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocked {
    /// The pooled ratio (paired; `n_base` is the number of pairs, `df` is N − k).
    pub ratio: Ratio,
    /// Each machine's ratio with its interval from the pooled within-machine variance.
    pub machines: Vec<(String, Ratio)>,
    /// The F statistic of the machine term on the log ratios; `None` with one pair per
    /// machine (no variance within machines to test it against).
    pub f: Option<f64>,
    /// Its p-value (F on k − 1 and N − k degrees of freedom).
    pub p_heterogeneity: Option<f64>,
    /// The machines named as disagreeing when `p_heterogeneity` < 0.05: those whose interval
    /// lies wholly off the median of the machines' ratios (or, where none does, the one
    /// furthest from it); empty when they agree.
    pub disagreeing: Vec<String>,
}

/// The level of the heterogeneity test.
pub const HETEROGENEITY_ALPHA: f64 = 0.05;

/// The pooled ratio of pairs in blocks (machines) at `level`, each block's ratio, and the test
/// of their agreement. Needs two blocks or more. With one pair per machine (a Slurm array
/// that gave each machine one round) there is no variance within machines: the machines are
/// then the replicates, and the pooled ratio is the paired one over their pairs (a t interval
/// over the machines' log ratios, k − 1 degrees of freedom, which holds the machines'
/// disagreement as noise); each machine's interval is its log ratio ± t·s of that spread, and
/// their agreement is not tested.
pub fn blocked_pairs(blocks: &[Block], level: f64) -> Result<Blocked, RatioError> {
    let blocks: Vec<Block> = blocks.iter().copied().filter(|b| !b.1.is_empty()).collect();
    if blocks.len() < 2 {
        return Err(RatioError::TooFew {
            side: "the machines with pairs (two or more to pool)",
            n: blocks.len(),
        });
    }
    if blocks.iter().all(|b| b.1.len() == 1) {
        return one_pair_each(&blocks, level);
    }
    fit(&blocks, level)
}

/// [`blocked_pairs`] where every machine has one pair: the machines are the replicates.
fn one_pair_each(blocks: &[Block], level: f64) -> Result<Blocked, RatioError> {
    let all: Vec<(f64, f64)> = blocks.iter().map(|b| b.1[0]).collect();
    let ratio = super::paired_with_level(&all, level)?;
    let logs: Vec<f64> = all.iter().map(|&(b, v)| v.ln() - b.ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let s = (logs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / ratio.df).sqrt();
    let machines = blocks
        .iter()
        .zip(&logs)
        .map(|((name, _), &d)| (name.to_string(), interval(d, s, ratio.df, level, 1)))
        .collect();
    Ok(Blocked {
        ratio,
        machines,
        f: None,
        p_heterogeneity: None,
        disagreeing: Vec::new(),
    })
}

/// The fixed-block model over non-empty blocks (one block is the paired analysis).
fn fit(blocks: &[Block], level: f64) -> Result<Blocked, RatioError> {
    let k = blocks.len();
    let n: usize = blocks.iter().map(|b| b.1.len()).sum();
    if k == 0 || n <= k {
        return Err(RatioError::TooFew {
            side: "the machines together (more pairs than machines)",
            n,
        });
    }
    let mut logs: Vec<Vec<f64>> = Vec::with_capacity(k);
    for (_, pairs) in blocks {
        let mut d = Vec::with_capacity(pairs.len());
        for &(b, v) in pairs.iter() {
            for (side, x) in [("the baseline", b), ("the variant", v)] {
                if !(x.is_finite() && x > 0.0) {
                    return Err(RatioError::NotPositive { side, value: x });
                }
            }
            d.push(v.ln() - b.ln());
        }
        logs.push(d);
    }
    let means: Vec<f64> = logs
        .iter()
        .map(|d| d.iter().sum::<f64>() / d.len() as f64)
        .collect();
    let ssw: f64 = logs
        .iter()
        .zip(&means)
        .map(|(d, m)| d.iter().map(|x| (x - m).powi(2)).sum::<f64>())
        .sum();
    let df = (n - k) as f64;
    let s = (ssw / df).sqrt();
    let mu = means.iter().sum::<f64>() / k as f64;
    let inv_n: f64 = logs.iter().map(|d| 1.0 / d.len() as f64).sum();
    let ratio = interval(mu, s * inv_n.sqrt() / k as f64, df, level, n);
    let machines: Vec<(String, Ratio)> = blocks
        .iter()
        .zip(&means)
        .map(|((name, pairs), &m)| {
            let ni = pairs.len();
            (
                name.to_string(),
                interval(m, s / (ni as f64).sqrt(), df, level, ni),
            )
        })
        .collect();
    let grand = logs.iter().flatten().sum::<f64>() / n as f64;
    let ssb: f64 = logs
        .iter()
        .zip(&means)
        .map(|(d, m)| d.len() as f64 * (m - grand).powi(2))
        .sum();
    let df1 = (k - 1) as f64;
    let (f, p_heterogeneity) = if k == 1 {
        (0.0, 1.0)
    } else if ssw == 0.0 {
        let p = if ssb == 0.0 { 1.0 } else { 0.0 };
        (if ssb == 0.0 { 0.0 } else { f64::INFINITY }, p)
    } else {
        let f = (ssb / df1) / (ssw / df);
        let p = FisherSnedecor::new(df1, df).map_or(f64::NAN, |d| 1.0 - d.cdf(f));
        (f, p.clamp(0.0, 1.0))
    };
    let disagreeing = if p_heterogeneity < HETEROGENEITY_ALPHA {
        disagreeing(&machines)
    } else {
        Vec::new()
    };
    Ok(Blocked {
        ratio,
        machines,
        f: (k > 1).then_some(f),
        p_heterogeneity: (k > 1).then_some(p_heterogeneity),
        disagreeing,
    })
}

/// A paired ratio exp(m) with the interval exp(m ± t·se) on `df` degrees of freedom.
fn interval(m: f64, se: f64, df: f64, level: f64, pairs: usize) -> Ratio {
    let ratio = m.exp();
    let (low, high, p) = if se == 0.0 {
        (ratio, ratio, if m == 0.0 { 1.0 } else { 0.0 })
    } else {
        log_interval(m, se, df, level)
    };
    Ratio {
        ratio,
        low,
        high,
        p,
        df,
        n_base: pairs,
        n_variant: pairs,
        paired: true,
    }
}

/// The machines whose interval lies wholly off the median of the machines' ratios; where
/// none does, the one furthest from it on the log scale (relative to its interval's width).
fn disagreeing(machines: &[(String, Ratio)]) -> Vec<String> {
    let mut ratios: Vec<f64> = machines.iter().map(|(_, r)| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let k = ratios.len();
    let median = if k % 2 == 1 {
        ratios[k / 2]
    } else {
        (ratios[k / 2 - 1] * ratios[k / 2]).sqrt()
    };
    let off: Vec<String> = machines
        .iter()
        .filter(|(_, r)| r.low > median || r.high < median)
        .map(|(m, _)| m.clone())
        .collect();
    if !off.is_empty() {
        return off;
    }
    let distance = |r: &Ratio| {
        let half = (r.high.ln() - r.low.ln()) / 2.0;
        (r.ratio.ln() - median.ln()).abs() / half.max(f64::MIN_POSITIVE)
    };
    machines
        .iter()
        .max_by(|a, b| distance(&a.1).total_cmp(&distance(&b.1)))
        .map(|(m, _)| vec![m.clone()])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stats::paired_ratio;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    /// Pairs whose log ratios are `logs` (baseline 100).
    fn pairs(logs: &[f64]) -> Vec<(f64, f64)> {
        logs.iter().map(|d| (100.0, 100.0 * d.exp())).collect()
    }

    /// Reference numbers from statsmodels 0.15 / scipy 1.17 for the log ratios below:
    /// `ols("d ~ C(m, Sum)", df).fit()` for the intercept (the pooled log ratio) and its
    /// interval, `anova_lm(ols("d ~ C(m)", df).fit())` for F and its p, and
    /// mean ± t(0.975, df_resid)·√mse_resid/√n per machine.
    #[test]
    fn matches_statsmodels_on_an_unbalanced_three_machine_case() {
        let a = pairs(&[0.10, 0.12, 0.08, 0.11]);
        let b = pairs(&[0.15, 0.13, 0.17]);
        let c = pairs(&[0.05, 0.09]);
        let r = blocked_pairs(&[("a", &a), ("b", &b), ("c", &c)], 0.95).expect("pooled");
        assert_eq!((r.ratio.df, r.ratio.n_base), (6.0, 9));
        // Intercept 0.1075 (se 0.00704647), 95% CI 0.09025790 .. 0.12474210, p 5.00792e-06.
        assert!(close(r.ratio.ratio.ln(), 0.1075, 1e-9), "{r:?}");
        assert!(close(r.ratio.low.ln(), 0.09025790, 1e-6), "{r:?}");
        assert!(close(r.ratio.high.ln(), 0.12474210, 1e-6), "{r:?}");
        assert!(close(r.ratio.p, 5.007920e-06, 1e-3), "{}", r.ratio.p);
        // F = 9.956229 on 2 and 6 degrees of freedom, p = 0.012414.
        assert!(close(r.f.expect("F"), 9.956229, 1e-6), "{r:?}");
        assert!(
            close(r.p_heterogeneity.expect("p"), 0.012414, 1e-3),
            "{r:?}"
        );
        // Machine b: 0.15, 95% CI 0.12130742 .. 0.17869258; c: 0.07, 0.03485890 .. 0.10514110.
        let (name, mb) = &r.machines[1];
        assert_eq!(name, "b");
        assert!(close(mb.ratio.ln(), 0.15, 1e-9));
        assert!(close(mb.low.ln(), 0.12130742, 1e-6), "{mb:?}");
        assert!(close(mb.high.ln(), 0.17869258, 1e-6), "{mb:?}");
        let mc = &r.machines[2].1;
        assert!(close(mc.low.ln(), 0.03485890, 1e-6), "{mc:?}");
        assert!(close(mc.high.ln(), 0.10514110, 1e-6), "{mc:?}");
        // The median machine is a (0.1025): b's interval lies above it, c's holds it.
        assert_eq!(r.disagreeing, vec!["b".to_string()]);
    }

    #[test]
    fn machines_that_agree_are_not_named() {
        let a = pairs(&[0.10, 0.12, 0.08, 0.11]);
        let b = pairs(&[0.09, 0.13, 0.11]);
        let r = blocked_pairs(&[("a", &a), ("b", &b)], 0.95).expect("pooled");
        // statsmodels: intercept 0.10625, 95% CI 0.08828272 .. 0.12421728;
        // F = 0.287846 on 1 and 5 degrees of freedom, p = 0.614606.
        assert!(close(r.ratio.low.ln(), 0.08828272, 1e-6), "{r:?}");
        assert!(close(r.ratio.high.ln(), 0.12421728, 1e-6), "{r:?}");
        assert!(close(r.f.expect("F"), 0.287846, 1e-5), "{r:?}");
        assert!(
            close(r.p_heterogeneity.expect("p"), 0.614606, 1e-4),
            "{r:?}"
        );
        assert!(r.disagreeing.is_empty());
        for (_, m) in &r.machines {
            assert!(m.low < r.ratio.ratio && r.ratio.ratio < m.high, "{r:?}");
        }
    }

    /// One machine alone is the paired analysis: the fixed-block model generalises it.
    #[test]
    fn one_machine_is_the_paired_ratio_and_one_pair_per_machine_makes_machines_replicates() {
        let a = pairs(&[0.10, 0.12, 0.08, 0.11]);
        let p = paired_ratio(&a).expect("paired");
        let one = fit(&[("a", &a)], 0.95).expect("one block");
        assert!(close(one.ratio.low, p.low, 1e-12) && close(one.ratio.high, p.high, 1e-12));
        assert!(close(one.ratio.p, p.p, 1e-9), "{one:?} {p:?}");
        assert!(
            blocked_pairs(&[("a", &a), ("b", &[])], 0.95).is_err(),
            "one machine with pairs is not pooled"
        );
        // One pair on each of three machines: the paired interval over the machines (scipy:
        // mean 0.1, sd 0.05, t(0.975, 2) = 4.302653: 0.1 ± 0.124207), no test of agreement.
        let (x, y, z) = (pairs(&[0.05]), pairs(&[0.1]), pairs(&[0.15]));
        let r = blocked_pairs(&[("x", &x), ("y", &y), ("z", &z)], 0.95).expect("replicates");
        assert!(close(r.ratio.low.ln(), 0.1 - 0.124207, 1e-4), "{r:?}");
        assert!(close(r.ratio.high.ln(), 0.1 + 0.124207, 1e-5), "{r:?}");
        assert_eq!((r.f, r.p_heterogeneity), (None, None));
        assert!(r.disagreeing.is_empty());
        // x: its own log ratio ± t · s, s = 0.05 the spread of the three.
        let rx = &r.machines[0].1;
        assert!(close(rx.high.ln(), 0.05 + 4.302653 * 0.05, 1e-5), "{rx:?}");
        let bad = [(0.0, 1.0), (1.0, 1.0)];
        assert!(blocked_pairs(&[("a", &a), ("b", &bad)], 0.95).is_err());
    }

    /// Over many synthetic studies on three machines (offsets 0.6× to 1.6×, a speed spell
    /// shared by both runs of a pair, 5% noise per run, 4, 3 and 2 pairs), the pooled 95%
    /// interval holds the true ratio about 95% of the time, and machines with the same effect
    /// are called disagreeing about 5% of the time (the F test's level).
    #[test]
    fn coverage_and_false_disagreement_are_near_their_levels() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(20261129);
        let (draws, truth) = (4000, 1.3);
        let (mut covered, mut flagged) = (0, 0);
        for _ in 0..draws {
            let blocks: Vec<Vec<(f64, f64)>> = [(0.6, 4), (1.0, 3), (1.6, 2)]
                .iter()
                .map(|&(offset, n)| {
                    (0..n)
                        .map(|_| {
                            let spell = offset * (1.0 + 0.3 * rng.gen::<f64>());
                            let mut run = |m: f64| {
                                m * spell
                                    * (0.05 * crate::analysis::stats::standard_normal(&mut rng))
                                        .exp()
                            };
                            (run(100.0), run(100.0 * truth))
                        })
                        .collect()
                })
                .collect();
            let named: Vec<Block> = ["a", "b", "c"]
                .iter()
                .zip(&blocks)
                .map(|(m, b)| (*m, b.as_slice()))
                .collect();
            let r = blocked_pairs(&named, 0.95).expect("pooled");
            if r.ratio.low <= truth && truth <= r.ratio.high {
                covered += 1;
            }
            if r.p_heterogeneity.is_some_and(|p| p < HETEROGENEITY_ALPHA) {
                flagged += 1;
            }
        }
        let coverage = covered as f64 / draws as f64;
        let false_alarms = flagged as f64 / draws as f64;
        assert!((0.93..=0.97).contains(&coverage), "coverage {coverage}");
        assert!(
            (0.03..=0.07).contains(&false_alarms),
            "flagged {false_alarms}"
        );
    }
}
