//! The ratio of two configurations' means with a 95% confidence interval that stays positive.
//!
//! A finding is "the variant is R× the baseline". Benchmark figures (times, rates, bytes) are
//! positive, so their ratio is too, and an interval built on the difference of means can reach
//! below zero ("a 95% interval of −38 .. 2575 ops/s"). The interval here is built on the log
//! scale instead: ln R = ln m̄_b − ln m̄_a, whose standard error follows from the delta method,
//! se² = s_a² / (n_a m̄_a²) + s_b² / (n_b m̄_b²), with Welch–Satterthwaite degrees of freedom for
//! the two unequal variances (Welch 1947). R · exp(± t · se) is positive by construction and is
//! the usual interval for a ratio of means in the benchmarking literature (e.g. Kalibera &
//! Jones, "Rigorous benchmarking in reasonable time", 2013). The p-value is that of the same
//! t statistic, so "the interval excludes 1" and "p < 0.05" always agree.
//!
//! When the runs of the two sides were made in pairs — repetition k of the baseline next to
//! repetition k of the variant, as a plan with questions interleaves them — [`paired_ratio`]
//! uses the pairing: drift of the machine between repetitions (this class of VM runs in speed
//! spells of ±30%) hits both runs of a pair alike and cancels in their ratio. Its ratio is the
//! geometric mean of the per-pair ratios, with the one-sample t interval of the log ratios
//! (n − 1 degrees of freedom): again positive by construction, and again p and the interval
//! agree.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};
use thiserror::Error;

use super::{summarize, t_quantile};

/// Why no ratio interval can be given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RatioError {
    /// A side has fewer than two values, so its variation is unknown.
    #[error("{side} has {n} value(s); an interval needs at least 2 per side")]
    TooFew { side: &'static str, n: usize },
    /// A value is zero, negative or not finite: a ratio of means needs positive quantities.
    #[error("{side} holds {value}, but a ratio interval needs positive, finite values")]
    NotPositive { side: &'static str, value: f64 },
}

/// The ratio variant / baseline of two samples' means, with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// mean(variant) / mean(baseline).
    pub ratio: f64,
    /// Lower end of the 95% interval (always > 0).
    pub low: f64,
    /// Upper end of the 95% interval.
    pub high: f64,
    /// Two-sided p-value of "no change" (ratio 1).
    pub p: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Repetitions of the baseline.
    pub n_base: usize,
    /// Repetitions of the variant.
    pub n_variant: usize,
    /// Made from pairs of runs ([`paired_ratio`]): `ratio` is the geometric mean of the
    /// per-pair ratios, and `df` is pairs − 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paired: bool,
}

/// The ratio of means variant / baseline with a 95% interval on the log scale.
pub fn ratio_of_means(base: &[f64], variant: &[f64]) -> Result<Ratio, RatioError> {
    ratio_with_level(base, variant, 0.95)
}

/// As [`ratio_of_means`] with another confidence level (0 < level < 1).
pub fn ratio_with_level(base: &[f64], variant: &[f64], level: f64) -> Result<Ratio, RatioError> {
    for (side, xs) in [("the baseline", base), ("the variant", variant)] {
        if xs.len() < 2 {
            return Err(RatioError::TooFew { side, n: xs.len() });
        }
        if let Some(&value) = xs.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
            return Err(RatioError::NotPositive { side, value });
        }
    }
    let (a, b) = (
        summarize(base).expect("checked: finite and non-empty"),
        summarize(variant).expect("checked: finite and non-empty"),
    );
    // Relative variance of each mean: Var(m̄) / m̄² = s² / (n m̄²).
    let ua = (a.sd / a.mean).powi(2) / a.n as f64;
    let ub = (b.sd / b.mean).powi(2) / b.n as f64;
    let se2 = ua + ub;
    let ln_ratio = b.mean.ln() - a.mean.ln();
    let ratio = b.mean / a.mean;
    let (n_base, n_variant) = (a.n, b.n);
    if se2 == 0.0 {
        // Both sides constant: the ratio is exact.
        let p = if ln_ratio == 0.0 { 1.0 } else { 0.0 };
        let df = (a.n + b.n - 2) as f64;
        return Ok(Ratio {
            ratio,
            low: ratio,
            high: ratio,
            p,
            df,
            n_base,
            n_variant,
            paired: false,
        });
    }
    let df = se2.powi(2) / (ua.powi(2) / (a.n - 1) as f64 + ub.powi(2) / (b.n - 1) as f64);
    let (low, high, p) = log_interval(ln_ratio, se2.sqrt(), df, level);
    Ok(Ratio {
        ratio,
        low,
        high,
        p,
        df,
        n_base,
        n_variant,
        paired: false,
    })
}

/// The interval exp(ln R ± t·se) at `level` and the two-sided p of "ln R = 0", from the same t
/// statistic on `df` degrees of freedom (so the interval excludes 1 exactly when p < 1 − level).
pub(super) fn log_interval(ln_ratio: f64, se: f64, df: f64, level: f64) -> (f64, f64, f64) {
    let t = t_quantile(0.5 + level / 2.0, df);
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * (1.0 - dist.cdf((ln_ratio / se).abs()))).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    };
    ((ln_ratio - t * se).exp(), (ln_ratio + t * se).exp(), p)
}

/// The ratio variant / baseline from pairs (baseline, variant) of runs made side by side: the
/// geometric mean of the per-pair ratios with the 95% t interval of their logarithms.
pub fn paired_ratio(pairs: &[(f64, f64)]) -> Result<Ratio, RatioError> {
    paired_with_level(pairs, 0.95)
}

/// As [`paired_ratio`] with another confidence level (0 < level < 1).
pub fn paired_with_level(pairs: &[(f64, f64)], level: f64) -> Result<Ratio, RatioError> {
    if pairs.len() < 2 {
        return Err(RatioError::TooFew {
            side: "each side",
            n: pairs.len(),
        });
    }
    for (side, x) in pairs
        .iter()
        .flat_map(|&(b, v)| [("the baseline", b), ("the variant", v)])
    {
        if !(x.is_finite() && x > 0.0) {
            return Err(RatioError::NotPositive { side, value: x });
        }
    }
    let logs: Vec<f64> = pairs.iter().map(|&(b, v)| v.ln() - b.ln()).collect();
    let n = logs.len();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    let df = (n - 1) as f64;
    let ratio = mean.exp();
    let (low, high, p) = if se == 0.0 {
        (ratio, ratio, if mean == 0.0 { 1.0 } else { 0.0 })
    } else {
        log_interval(mean, se, df, level)
    };
    Ok(Ratio {
        ratio,
        low,
        high,
        p,
        df,
        n_base: n,
        n_variant: n,
        paired: true,
    })
}

/// The standard error of a ratio's logarithm, recovered from its interval at `level`:
/// (ln high − ln low) / 2t. Zero for an exact ratio.
fn log_se(r: &Ratio, level: f64) -> f64 {
    if r.high <= r.low {
        return 0.0;
    }
    (r.high.ln() - r.low.ln()) / (2.0 * t_quantile(0.5 + level / 2.0, r.df))
}

/// Whether two experiments found the same ratio: `new.ratio / base.ratio` with its 95%
/// interval, from each ratio's own interval (`base_level`, `new_level`: the levels they were
/// made at) and degrees of freedom. The two are independent samples (two runs of a study,
/// on two machines or under two conditions), so the standard errors of their logarithms add
/// and the degrees of freedom are Welch–Satterthwaite's; the interval holds 1 when the two
/// agree within their noise. This asks less than "the new ratio lies inside the base's
/// interval": that interval is for the base's own mean, and a second run of the same
/// experiment lands outside it about as often as not when both have few repetitions.
pub fn ratio_of_ratios(base: &Ratio, new: &Ratio, base_level: f64, new_level: f64) -> Ratio {
    let (sb, sn) = (log_se(base, base_level), log_se(new, new_level));
    let ln_ratio = new.ratio.ln() - base.ratio.ln();
    let ratio = new.ratio / base.ratio;
    let se2 = sb * sb + sn * sn;
    let df = match (sb > 0.0, sn > 0.0) {
        (true, true) => se2 * se2 / (sb.powi(4) / base.df + sn.powi(4) / new.df),
        (true, false) => base.df,
        (false, true) => new.df,
        (false, false) => base.df + new.df,
    };
    let (low, high, p) = if se2 == 0.0 {
        (ratio, ratio, if ln_ratio == 0.0 { 1.0 } else { 0.0 })
    } else {
        log_interval(ln_ratio, se2.sqrt(), df, 0.95)
    };
    Ratio {
        ratio,
        low,
        high,
        p,
        df,
        n_base: base.n_base.min(base.n_variant),
        n_variant: new.n_base.min(new.n_variant),
        paired: false,
    }
}

/// What an interval says about "is there a change?", for `reps = "auto"` and for the sentence
/// of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The interval lies above 1: the variant is larger.
    Larger,
    /// The interval lies below 1: the variant is smaller.
    Smaller,
    /// The interval lies within 1 ± ε: no change larger than ε.
    NoChange,
    /// The interval holds 1 and reaches beyond ±ε: more repetitions are needed.
    Undecided,
}

impl Ratio {
    /// The decision at tolerance `epsilon` (0.05 for ±5%).
    pub fn decide(&self, epsilon: f64) -> Decision {
        if self.low > 1.0 {
            Decision::Larger
        } else if self.high < 1.0 {
            Decision::Smaller
        } else if self.low >= 1.0 - epsilon && self.high <= 1.0 + epsilon {
            Decision::NoChange
        } else {
            Decision::Undecided
        }
    }

    /// The largest relative change the interval still allows, as a fraction (0.06 for "no
    /// effect larger than 6%").
    pub fn largest_change(&self) -> f64 {
        (self.high - 1.0).max(1.0 - self.low).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Synthetic experiments per case of the coverage tests.
    const DRAWS: u32 = 4000;

    /// Of [`DRAWS`] experiments with a known ratio: how many 95% intervals held it, and how
    /// many p-values rejected "no change" at 5%.
    struct Coverage {
        true_ratio: f64,
        covered: u32,
        rejected: u32,
    }

    impl Coverage {
        fn new(true_ratio: f64) -> Self {
            Coverage {
                true_ratio,
                covered: 0,
                rejected: 0,
            }
        }

        fn add(&mut self, r: &Ratio) {
            if r.low <= self.true_ratio && self.true_ratio <= r.high {
                self.covered += 1;
            }
            if r.p < 0.05 {
                self.rejected += 1;
            }
        }

        /// Asserts that about 95% of the intervals held the true ratio and, when there was no
        /// change, that about 5% of the p-values rejected it; returns the share rejected.
        fn check(&self, case: &str) -> f64 {
            let true_ratio = self.true_ratio;
            let coverage = self.covered as f64 / DRAWS as f64;
            assert!(
                (0.93..=0.97).contains(&coverage),
                "{case} ratio={true_ratio}: coverage {coverage}"
            );
            let rejected = self.rejected as f64 / DRAWS as f64;
            if true_ratio == 1.0 {
                assert!(
                    (0.03..=0.07).contains(&rejected),
                    "false positives {rejected}"
                );
            }
            rejected
        }
    }

    fn normal(rng: &mut ChaCha8Rng, mean: f64, sd: f64) -> f64 {
        // Box–Muller.
        let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
        let u2: f64 = rng.gen();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    #[test]
    fn hand_computed_case() {
        // a: mean 10, sd 1; b: mean 20, sd 2; n = 3 each.
        let r = ratio_of_means(&[9.0, 10.0, 11.0], &[18.0, 20.0, 22.0]).unwrap();
        assert!((r.ratio - 2.0).abs() < 1e-12);
        // ua = ub = (0.1)^2 / 3; se = sqrt(2 * 0.01 / 3); df = 4.
        let se = (2.0 * 0.01f64 / 3.0).sqrt();
        assert!((r.df - 4.0).abs() < 1e-9, "{}", r.df);
        let t = 2.776_445_105; // t(0.975, 4)
        assert!((r.low - 2.0 * (-t * se).exp()).abs() < 1e-6, "{r:?}");
        assert!((r.high - 2.0 * (t * se).exp()).abs() < 1e-6, "{r:?}");
        // t = ln 2 / se = 8.49 on 4 degrees of freedom: p = 0.00106.
        assert!((r.p - 0.00106).abs() < 0.00002, "{}", r.p);
        assert_eq!(r.decide(0.05), Decision::Larger);
    }

    #[test]
    fn interval_stays_positive_where_a_difference_interval_would_not() {
        // Very noisy, tiny rates: the mean ± t·sd interval goes negative, this one never does.
        let base = [5.0, 900.0, 40.0];
        let var = [1.0, 3.0, 1200.0];
        let r = ratio_of_means(&base, &var).unwrap();
        assert!(r.low > 0.0 && r.low < r.ratio && r.ratio < r.high, "{r:?}");
        assert_eq!(r.decide(0.05), Decision::Undecided);
    }

    #[test]
    fn constant_sides_give_an_exact_ratio() {
        let r = ratio_of_means(&[2.0, 2.0], &[3.0, 3.0]).unwrap();
        assert_eq!((r.low, r.ratio, r.high, r.p), (1.5, 1.5, 1.5, 0.0));
        let same = ratio_of_means(&[2.0, 2.0], &[2.0, 2.0]).unwrap();
        assert_eq!(same.p, 1.0);
        assert_eq!(same.decide(0.05), Decision::NoChange);
    }

    #[test]
    fn refuses_too_few_and_non_positive_values() {
        assert_eq!(
            ratio_of_means(&[1.0], &[1.0, 2.0]),
            Err(RatioError::TooFew {
                side: "the baseline",
                n: 1
            })
        );
        let e = ratio_of_means(&[1.0, 2.0], &[0.0, 2.0]).unwrap_err();
        assert!(e.to_string().contains("positive"), "{e}");
        assert!(ratio_of_means(&[1.0, f64::NAN], &[1.0, 2.0]).is_err());
    }

    /// Coverage: over many synthetic experiments with a known ratio, the 95% interval holds
    /// the true ratio about 95% of the time, and the p-value rejects a true "no change" about
    /// 5% of the time.
    #[test]
    fn coverage_is_close_to_95_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(20261123);
        for &(n, cv, true_ratio) in &[(5usize, 0.10, 1.5), (10, 0.05, 0.8), (4, 0.15, 1.0)] {
            let mut tally = Coverage::new(true_ratio);
            for _ in 0..DRAWS {
                let a: Vec<f64> = (0..n)
                    .map(|_| normal(&mut rng, 100.0, 100.0 * cv))
                    .collect();
                let m = 100.0 * true_ratio;
                let b: Vec<f64> = (0..n).map(|_| normal(&mut rng, m, m * cv)).collect();
                tally.add(&ratio_of_means(&a, &b).unwrap());
            }
            let rejected = tally.check(&format!("n={n} cv={cv}"));
            if true_ratio != 1.0 {
                // These effects are large against their noise: nearly every experiment finds them.
                assert!(
                    rejected > 0.99,
                    "n={n} cv={cv} ratio={true_ratio}: power {rejected}"
                );
            }
        }
    }

    /// Two independent paired experiments with the same true ratio (a study run twice, with
    /// different noise and repetitions): the interval of their ratio of ratios holds 1 about
    /// 95% of the time; with a true ratio of ratios of 1.3 it holds 1.3 as often and rejects 1
    /// nearly always. A second run's ratio inside the first's interval happens far less often
    /// than 95%, which is why the comparison of findings states both.
    #[test]
    fn the_ratio_of_two_experiments_ratios_covers_95_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(20261130);
        let mut inside = 0u32;
        for &(shift, n1, n2, cv1, cv2) in
            &[(1.0, 4usize, 10usize, 0.05, 0.15), (1.3, 5, 8, 0.08, 0.08)]
        {
            let mut tally = Coverage::new(shift);
            for _ in 0..DRAWS {
                let mut run = |n: usize, cv: f64, r: f64| {
                    let pairs: Vec<(f64, f64)> = (0..n)
                        .map(|_| {
                            let drift = normal(&mut rng, 1.0, 0.2).max(0.2);
                            let b = 100.0 * drift * normal(&mut rng, 1.0, cv);
                            let v = 100.0 * r * drift * normal(&mut rng, 1.0, cv);
                            (b, v)
                        })
                        .collect();
                    paired_ratio(&pairs).unwrap()
                };
                let (a, b) = (run(n1, cv1, 2.0), run(n2, cv2, 2.0 * shift));
                let rr = ratio_of_ratios(&a, &b, 0.95, 0.95);
                tally.add(&rr);
                if shift == 1.0 && a.low <= b.ratio && b.ratio <= a.high {
                    inside += 1;
                }
            }
            let rejected = tally.check(&format!("shift={shift} n={n1},{n2}"));
            if shift != 1.0 {
                assert!(rejected > 0.9, "power {rejected}");
            }
        }
        let inside = inside as f64 / DRAWS as f64;
        assert!(inside < 0.85, "inside the first's interval: {inside}");
    }

    #[test]
    fn the_ratio_of_exact_ratios_is_exact() {
        let exact = |r: f64| Ratio {
            ratio: r,
            low: r,
            high: r,
            p: 0.0,
            df: 2.0,
            n_base: 3,
            n_variant: 3,
            paired: true,
        };
        let same = ratio_of_ratios(&exact(2.0), &exact(2.0), 0.95, 0.95);
        assert_eq!(
            (same.low, same.ratio, same.high, same.p),
            (1.0, 1.0, 1.0, 1.0)
        );
        let other = ratio_of_ratios(&exact(2.0), &exact(3.0), 0.95, 0.95);
        assert_eq!((other.ratio, other.p), (1.5, 0.0));
        // One side exact: the interval is the other's, moved.
        let noisy = paired_ratio(&[(1.0, 2.0), (1.0, 2.2), (1.0, 1.9)]).unwrap();
        let r = ratio_of_ratios(&exact(2.0), &noisy, 0.95, 0.95);
        assert!((r.low - noisy.low / 2.0).abs() < 1e-9, "{r:?} {noisy:?}");
        assert!((r.high - noisy.high / 2.0).abs() < 1e-9, "{r:?} {noisy:?}");
    }

    #[test]
    fn p_and_interval_agree() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..500 {
            let a: Vec<f64> = (0..4).map(|_| normal(&mut rng, 100.0, 10.0)).collect();
            let b: Vec<f64> = (0..4).map(|_| normal(&mut rng, 108.0, 10.0)).collect();
            let r = ratio_of_means(&a, &b).unwrap();
            let excludes_one = r.low > 1.0 || r.high < 1.0;
            assert_eq!(excludes_one, r.p < 0.05, "{r:?}");
        }
    }

    #[test]
    fn decisions_and_the_change_ruled_out() {
        let r = Ratio {
            ratio: 1.01,
            low: 0.96,
            high: 1.06,
            p: 0.6,
            df: 8.0,
            n_base: 5,
            n_variant: 5,
            paired: false,
        };
        assert_eq!(r.decide(0.05), Decision::Undecided);
        assert_eq!(r.decide(0.10), Decision::NoChange);
        assert!((r.largest_change() - 0.06).abs() < 1e-12);
        let smaller = Ratio {
            low: 0.5,
            high: 0.7,
            ..r
        };
        assert_eq!(smaller.decide(0.05), Decision::Smaller);
    }

    #[test]
    fn paired_hand_computed_case() {
        // Per-pair ratios 2, 2·e^0.1, 2·e^-0.1: log ratios ln2 + (0, 0.1, -0.1), sd 0.1.
        let e = |x: f64| x.exp();
        let pairs = [(10.0, 20.0), (50.0, 100.0 * e(0.1)), (7.0, 14.0 * e(-0.1))];
        let r = paired_ratio(&pairs).unwrap();
        assert!(r.paired);
        assert!((r.ratio - 2.0).abs() < 1e-12, "{r:?}");
        assert_eq!((r.df, r.n_base, r.n_variant), (2.0, 3, 3));
        let se = 0.1 / 3f64.sqrt();
        let t = 4.302_652_730; // t(0.975, 2)
        assert!((r.low - 2.0 * (-t * se).exp()).abs() < 1e-6, "{r:?}");
        assert!((r.high - 2.0 * (t * se).exp()).abs() < 1e-6, "{r:?}");
        // t = ln 2 / se = 12.0 on 2 degrees of freedom: p = 0.00687.
        assert!((r.p - 0.00687).abs() < 0.00002, "{}", r.p);
        assert!(paired_ratio(&[(1.0, 2.0)]).is_err());
        assert!(paired_ratio(&[(1.0, 2.0), (0.0, 1.0)]).is_err());
        // Every pair 2× apart: the interval is the point (up to rounding of the logarithms).
        let same = paired_ratio(&[(2.0, 4.0), (3.0, 6.0), (5.0, 10.0)]).unwrap();
        assert!(
            (same.low - 2.0).abs() < 1e-9 && (same.high - 2.0).abs() < 1e-9,
            "{same:?}"
        );
        assert!(same.p < 1e-6, "{same:?}");
    }

    /// Pairs that share a drift factor (a speed spell hits both runs of a pair): the paired
    /// interval covers the true ratio about 95% of the time and is far narrower than the
    /// unpaired one (which the drift widens) when the drift is larger than the runs' own noise.
    #[test]
    fn paired_coverage_is_close_to_95_percent_and_drift_cancels() {
        let mut rng = ChaCha8Rng::seed_from_u64(20261124);
        for &(n, cv, true_ratio) in &[(5usize, 0.05, 1.3), (10, 0.03, 0.9), (4, 0.08, 1.0)] {
            let mut tally = Coverage::new(true_ratio);
            let mut narrower = 0;
            for _ in 0..DRAWS {
                let pairs: Vec<(f64, f64)> = (0..n)
                    .map(|_| {
                        // A spell: the machine is up to 30% slower for both runs of the pair.
                        let spell = 1.0 + 0.3 * rng.gen::<f64>();
                        let b = normal(&mut rng, 100.0, 100.0 * cv) * spell;
                        let m = 100.0 * true_ratio;
                        (b, normal(&mut rng, m, m * cv) * spell)
                    })
                    .collect();
                let r = paired_ratio(&pairs).unwrap();
                tally.add(&r);
                let (b, v): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
                let u = ratio_of_means(&b, &v).unwrap();
                if r.high / r.low < u.high / u.low {
                    narrower += 1;
                }
            }
            tally.check(&format!("n={n} cv={cv}"));
            // Where the spells are larger than the runs' own noise, pairing pays.
            assert!(
                cv > 0.05 || narrower as f64 / DRAWS as f64 > 0.8,
                "n={n}: paired narrower in only {narrower} of {DRAWS}"
            );
        }
    }
}
