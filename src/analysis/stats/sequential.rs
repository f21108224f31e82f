//! Confidence intervals that stay valid when `reps = "auto"` stops as soon as they decide.
//!
//! `reps = "auto"` looks at a question after every round, from the first round's repetitions up
//! to its cap, and stops once the interval decides. Each look at the 95% level has a 5% chance
//! of a false "larger" or "smaller" when nothing changed, and taking the first of several such
//! chances adds them up: over the looks at 3..=10 repetitions a plain 95% interval decides
//! wrongly about 17% of the time (the "optional stopping" problem of sequential trials).
//!
//! The remedy is the repeated confidence interval of group-sequential trials (Pocock 1977;
//! Jennison & Turnbull 1989): every look uses one nominal level α′, chosen so that the chance of
//! *any* look deciding wrongly is 5%. Then the interval reported where the run stopped covers
//! the true ratio with at least 95% probability, whenever it stopped. α′ depends only on the
//! looks. It is found here by simulation of the t statistics of normal samples at each look
//! (so the small degrees of freedom of 3 or 4 repetitions are exact, where Pocock's tables
//! assume a known variance), with a fixed seed, so the same looks always give the same α′
//! and reports made again are identical.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::standard_normal;

/// The chance, over all looks together, of deciding a change that is not there.
pub const FAMILY_ALPHA: f64 = 0.05;

/// Simulated repetition sequences behind α′.
const PATHS: usize = 20_000;

/// Above this many repetitions per side the simulation is replaced by Bonferroni's α / looks,
/// which is valid too but wider.
const SIMULATED_UP_TO: usize = 30;

/// The per-look confidence level (1 − α′) of a repeated 95% interval over looks at `first`,
/// `first + 1`, …, `last` repetitions (pairs, or repetitions per side). One look gives 0.95.
pub fn repeated_level(first: usize, last: usize) -> f64 {
    let first = first.max(2);
    if last <= first {
        return 1.0 - FAMILY_ALPHA;
    }
    static MEMO: Mutex<BTreeMap<(usize, usize), f64>> = Mutex::new(BTreeMap::new());
    if let Some(&l) = MEMO
        .lock()
        .ok()
        .and_then(|m| m.get(&(first, last)).copied())
        .as_ref()
    {
        return l;
    }
    let looks = last - first + 1;
    let alpha = if last > SIMULATED_UP_TO {
        FAMILY_ALPHA / looks as f64
    } else {
        simulated_alpha(first, last)
    };
    let level = 1.0 - alpha;
    if let Ok(mut m) = MEMO.lock() {
        m.insert((first, last), level);
    }
    level
}

/// α′: the 5% quantile, over simulated sequences with no change, of the smallest two-sided
/// p-value of the one-sample t test at each look. A look rejects when its p is below α′, so
/// exactly 5% of the sequences reject at some look.
fn simulated_alpha(first: usize, last: usize) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5e9_2024);
    let dists: Vec<StudentsT> = (first..=last)
        .map(|n| StudentsT::new(0.0, 1.0, (n - 1) as f64).expect("df >= 1"))
        .collect();
    let mut min_p = Vec::with_capacity(PATHS);
    let mut xs = vec![0.0; last];
    for _ in 0..PATHS {
        for x in xs.iter_mut() {
            *x = standard_normal(&mut rng);
        }
        // Running sums give every look's mean and variance in one pass.
        let (mut sum, mut sq) = (0.0, 0.0);
        let mut best: f64 = 1.0;
        for (i, &x) in xs.iter().enumerate() {
            sum += x;
            sq += x * x;
            let n = i + 1;
            if n < first {
                continue;
            }
            let mean = sum / n as f64;
            let var = (sq - n as f64 * mean * mean) / (n - 1) as f64;
            let t = mean.abs() / (var.max(f64::MIN_POSITIVE) / n as f64).sqrt();
            let p = 2.0 * (1.0 - dists[n - first].cdf(t));
            best = best.min(p);
        }
        min_p.push(best);
    }
    min_p.sort_by(f64::total_cmp);
    min_p[(FAMILY_ALPHA * PATHS as f64) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_look_is_the_plain_95_percent_level() {
        assert_eq!(repeated_level(3, 3), 0.95);
        assert_eq!(repeated_level(5, 2), 0.95);
    }

    #[test]
    fn more_looks_need_a_stricter_level_near_pococks() {
        // Pocock's nominal levels for 2, 3, 4 and 8 equally spaced looks (known variance) are
        // 0.0294, 0.0221, 0.0182 and 0.0120; with 3..=10 repetitions the t statistics' small
        // degrees of freedom and unequal spacing move them a little.
        let a = |first, last| 1.0 - repeated_level(first, last);
        let two = a(3, 4);
        let eight = a(3, 10);
        assert!((0.022..0.036).contains(&two), "{two}");
        assert!((0.008..0.016).contains(&eight), "{eight}");
        assert!(a(3, 5) < two && eight < a(3, 5));
        // Beyond the simulated range: Bonferroni.
        assert!((a(3, 102) - 0.05 / 100.0).abs() < 1e-12);
        // The same looks give the same level, every time.
        assert_eq!(repeated_level(3, 10), repeated_level(3, 10));
    }

    /// The point of it all: stopping at the first look that decides keeps false decisions near
    /// 5% with the repeated level, where the plain 95% level makes about three times as many.
    #[test]
    fn stopping_at_the_first_decisive_look_keeps_false_decisions_near_5_percent() {
        let mut rng = ChaCha8Rng::seed_from_u64(77);
        let (first, last) = (3, 10);
        let level = repeated_level(first, last);
        let draws = 4000;
        let (mut plain, mut repeated) = (0, 0);
        for _ in 0..draws {
            let xs: Vec<f64> = (0..last).map(|_| standard_normal(&mut rng) * 0.1).collect();
            let rejects = |lvl: f64| {
                (first..=last).any(|n| {
                    let pairs: Vec<(f64, f64)> = xs[..n].iter().map(|&d| (1.0, d.exp())).collect();
                    let r = super::super::paired_with_level(&pairs, lvl).unwrap();
                    r.low > 1.0 || r.high < 1.0
                })
            };
            plain += rejects(0.95) as u32;
            repeated += rejects(level) as u32;
        }
        let (plain, repeated) = (plain as f64 / draws as f64, repeated as f64 / draws as f64);
        assert!(plain > 0.12, "plain 95% over 8 looks: {plain}");
        assert!((0.035..0.065).contains(&repeated), "repeated: {repeated}");
    }
}
