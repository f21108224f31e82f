//! Summary statistics of repeated runs and the test that says whether two sets differ.
//!
//! A benchmark figure is a sample: repetitions of one configuration vary, and a report that
//! prints one number hides that. Every cell of a report (testbed × workload × phase × metric)
//! is summarised here: count, mean, sample standard deviation, coefficient of variation, the
//! 95% confidence interval of the mean from Student's t distribution, minimum, median and
//! maximum, and for rates the harmonic mean (the right mean for rates over equal amounts of work).
//! Two sets are compared with Welch's unequal-variance t-test (Welch 1947), as hyperfine and
//! mmtests do, because repeated benchmark runs of different configurations rarely share a
//! variance.

pub mod blocked;
mod ratio;
pub mod sequential;

pub use ratio::{
    paired_ratio, paired_with_level, ratio_of_means, ratio_of_ratios, ratio_with_level, Decision,
    Ratio, RatioError,
};

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Summary of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); 0 when n = 1.
    pub sd: f64,
    /// Coefficient of variation sd / |mean|; 0 when the mean is 0.
    pub cv: f64,
    /// 95% confidence interval of the mean (Student t with n − 1 degrees of freedom; on the
    /// log scale when every value is positive, so it never reaches below zero); the mean
    /// itself on both sides when n = 1.
    pub ci_low: f64,
    pub ci_high: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Groups items into cells by key, cells and their items in order of first appearance: the
/// one grouping behind the report's cells, the terminal tables and the sweep tables.
pub fn group<K: PartialEq, T>(items: impl IntoIterator<Item = (K, T)>) -> Vec<(K, Vec<T>)> {
    let mut out: Vec<(K, Vec<T>)> = Vec::new();
    for (k, t) in items {
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(t),
            None => out.push((k, vec![t])),
        }
    }
    out
}

/// [`group`], then [`summarize`] each cell's values (cells whose values do not summarise are
/// left out).
pub fn summarize_groups<K: PartialEq>(
    items: impl IntoIterator<Item = (K, f64)>,
) -> Vec<(K, Summary)> {
    group(items)
        .into_iter()
        .filter_map(|(k, xs)| summarize(&xs).map(|s| (k, s)))
        .collect()
}

/// Summarises a sample; `None` when it is empty or holds a non-finite value.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let cv = if mean != 0.0 { sd / mean.abs() } else { 0.0 };
    let t = if n > 1 {
        t_quantile(0.975, (n - 1) as f64)
    } else {
        0.0
    };
    // Benchmark figures are positive: their interval is made on the log scale (the delta
    // method, as for ratios in `ratio`), mean · exp(± t · cv / √n), so that it never reaches
    // below zero ("a 95% interval of −38 .. 2575 ops/s"). Samples with a zero or negative
    // value keep the symmetric interval mean ± t · sd / √n.
    let (ci_low, ci_high) = if xs.iter().all(|&x| x > 0.0) {
        let w = t * cv / (n as f64).sqrt();
        (mean * (-w).exp(), mean * w.exp())
    } else {
        let half = t * sd / (n as f64).sqrt();
        (mean - half, mean + half)
    };
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Summary {
        n,
        mean,
        sd,
        cv,
        ci_low,
        ci_high,
        min: sorted[0],
        median,
        max: sorted[n - 1],
    })
}

/// Harmonic mean of positive values (the mean rate over equal amounts of work); `None` when
/// empty or when a value is not positive.
pub fn harmonic_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
        return None;
    }
    Some(xs.len() as f64 / xs.iter().map(|x| 1.0 / x).sum::<f64>())
}

/// A standard normal draw (Box–Muller), for the simulations here and the aging engine's
/// log-normal file sizes (a deterministic stream for a given seed).
pub fn standard_normal<R: rand::Rng>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Result of Welch's t-test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// t statistic of mean(b) − mean(a).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's unequal-variance t-test of two samples; `None` when either has fewer than two
/// values. When both variances are zero, p is 1 for equal means and 0 otherwise.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let sa = summarize(a)?;
    let sb = summarize(b)?;
    if sa.n < 2 || sb.n < 2 {
        return None;
    }
    let va = sa.sd.powi(2) / sa.n as f64;
    let vb = sb.sd.powi(2) / sb.n as f64;
    let se2 = va + vb;
    let diff = sb.mean - sa.mean;
    if se2 == 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(diff)
        };
        return Some(Welch {
            t,
            df: (sa.n + sb.n - 2) as f64,
            p,
        });
    }
    let t = diff / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (sa.n - 1) as f64 + vb.powi(2) / (sb.n - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = (2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0);
    Some(Welch { t, df, p })
}

/// The usual significance marks: `***` p < 0.001, `**` p < 0.01, `*` p < 0.05, empty otherwise.
pub fn significance_mark(p: f64) -> &'static str {
    if p < 0.001 {
        "***"
    } else if p < 0.01 {
        "**"
    } else if p < 0.05 {
        "*"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_keep_first_appearance_order_and_summarise_each_cell() {
        let g = summarize_groups([
            ("b", 1.0),
            ("a", 10.0),
            ("b", 3.0),
            ("a", 14.0),
            ("c", f64::NAN),
        ]);
        let keys: Vec<&str> = g.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            ["b", "a"],
            "cells in order of first appearance; NaN left out"
        );
        assert_eq!((g[0].1.n, g[0].1.mean), (2, 2.0));
        assert_eq!(g[1].1.mean, 12.0);
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn textbook_sample() {
        // The standard example: 2 4 4 4 5 5 7 9 has mean 5, population sd 2, sample sd
        // sqrt(32/7) = 2.13809.
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0, 1e-12));
        assert!(close(s.sd, (32.0f64 / 7.0).sqrt(), 1e-12));
        assert!(close(s.cv, (32.0f64 / 7.0).sqrt() / 5.0, 1e-12));
        // t(0.975, 7) = 2.364624 (tables); positive values: the interval is on the log scale,
        // 5 · exp(± 2.364624 · 0.427618 / sqrt(8)) = 5 · exp(± 0.3574975).
        assert!(
            close(s.ci_low, 5.0 * (-0.3574975f64).exp(), 1e-5),
            "{}",
            s.ci_low
        );
        assert!(
            close(s.ci_high, 5.0 * 0.3574975f64.exp(), 1e-5),
            "{}",
            s.ci_high
        );
        // With a zero among them, the symmetric interval: half width 2.364624 · sd / sqrt(8).
        let s = summarize(&[0.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 11.0]).unwrap();
        let half = 2.364624 * s.sd / 8f64.sqrt();
        assert!(close(s.ci_low, s.mean - half, 1e-5), "{}", s.ci_low);
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (2.0, 4.5, 9.0));
    }

    #[test]
    fn the_interval_of_a_positive_rate_stays_positive() {
        // The main job's "-38 .. 2575 ops/s": three widely spread rates.
        let s = summarize(&[150.0, 1800.0, 700.0]).unwrap();
        assert!(
            s.ci_low > 0.0 && s.ci_low < s.mean && s.mean < s.ci_high,
            "{s:?}"
        );
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        assert!(close(t_quantile(0.975, 1.0), 12.7062, 1e-4));
        assert!(close(t_quantile(0.975, 2.0), 4.3027, 1e-4));
        assert!(close(t_quantile(0.975, 9.0), 2.2622, 1e-4));
        assert!(close(t_quantile(0.975, 30.0), 2.0423, 1e-4));
    }

    #[test]
    fn single_values_and_odd_medians() {
        let s = summarize(&[3.0]).unwrap();
        assert_eq!((s.sd, s.ci_low, s.ci_high, s.median), (0.0, 3.0, 3.0, 3.0));
        assert_eq!(summarize(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn harmonic_mean_of_rates() {
        // 60 km/h out and 40 km/h back average 48 km/h.
        assert!(close(harmonic_mean(&[60.0, 40.0]).unwrap(), 48.0, 1e-12));
        assert!(harmonic_mean(&[1.0, 0.0]).is_none());
    }

    #[test]
    fn welch_textbook_example() {
        // Wikipedia "Welch's t-test", example 1: t = -2.46 (A1 − A2), df = 24.99, p = 0.021.
        let a1 = [
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
            21.4,
        ];
        let a2 = [
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
            24.4,
        ];
        let w = welch(&a1, &a2).unwrap();
        assert!(close(w.t, 2.46, 0.005), "t = {}", w.t);
        assert!(close(w.df, 24.99, 0.02), "df = {}", w.df);
        assert!(close(w.p, 0.021, 0.0006), "p = {}", w.p);
        assert_eq!(significance_mark(w.p), "*");
    }

    #[test]
    fn welch_hand_computed_case() {
        // a: mean 2, var 1 (n 3); b: mean 5, var 1 (n 3): se = sqrt(2/3), t = 3.674235,
        // df = 4, two-sided p = 0.021312.
        let w = welch(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(close(w.t, 3.674235, 1e-6));
        assert!(close(w.df, 4.0, 1e-9));
        assert!(close(w.p, 0.021312, 1e-5), "p = {}", w.p);
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
        assert_eq!(welch(&[1.0, 1.0], &[1.0, 1.0]).unwrap().p, 1.0);
        assert_eq!(welch(&[1.0, 1.0], &[2.0, 2.0]).unwrap().p, 0.0);
    }
}
