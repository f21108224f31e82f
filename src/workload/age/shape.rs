//! Tree shapes for aging: how many directories, how many files in each, and how deep.
//!
//! `N×C` (written `NxC`) is the fragmentation project's directory structure option of
//! agesystem: N directories of C files each. In `append` mode the tree is exactly N×C files; in
//! `fill` and `churn` modes directories are filled one after the other with C files and, once
//! N×C files exist, further files are spread round-robin over the same N directories.
//!
//! A depth distribution places each of the N directories at a depth drawn from it (1 = directly
//! under the aging root): `fixed:D`, `uniform:A..B`, `poisson:L`, or `impressions` (files by
//! namespace depth: Poisson with λ = 6.49, Impressions FAST'09, Table 2). Depths are clamped to
//! 1..=32.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// N directories × C files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeShape {
    pub dirs: u64,
    pub files: u64,
}

impl TreeShape {
    pub fn total_files(&self) -> u64 {
        self.dirs * self.files
    }

    /// The directory index of the `k`-th file created.
    pub fn dir_of(&self, k: u64) -> u64 {
        (k / self.files) % self.dirs
    }
}

impl FromStr for TreeShape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase().replace('×', "x");
        let Some((a, b)) = t.split_once('x') else {
            return Err(format!(
                "tree {s:?} is not NxC (N directories x C files each), e.g. 10x100"
            ));
        };
        let dirs: u64 = a
            .trim()
            .parse()
            .map_err(|_| format!("tree {s:?}: {a:?} is not a number of directories"))?;
        let files: u64 = b
            .trim()
            .parse()
            .map_err(|_| format!("tree {s:?}: {b:?} is not a number of files"))?;
        if dirs == 0 || files == 0 {
            return Err(format!("tree {s:?}: N and C must both be 1 or more"));
        }
        if dirs > 10_000_000 || dirs.saturating_mul(files) > 1_000_000_000 {
            return Err(format!("tree {s:?} is larger than 10^9 files"));
        }
        Ok(Self { dirs, files })
    }
}

impl fmt::Display for TreeShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.dirs, self.files)
    }
}

impl Serialize for TreeShape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for TreeShape {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A distribution of directory depths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DepthDist {
    Fixed(u32),
    Uniform(u32, u32),
    Poisson(f64),
}

/// Deepest directory made.
pub const MAX_DEPTH: u32 = 32;

impl DepthDist {
    pub fn parse(spec: &str) -> Result<Self, String> {
        let s = spec.trim();
        if s == "impressions" {
            return Ok(Self::Poisson(6.49));
        }
        let bad = || {
            format!(
                "depth distribution {s:?}: use fixed:D, uniform:A..B, poisson:LAMBDA or impressions"
            )
        };
        if let Some(v) = s.strip_prefix("fixed:") {
            let d: u32 = v.parse().map_err(|_| bad())?;
            if d == 0 || d > MAX_DEPTH {
                return Err(format!("depth {d} must be between 1 and {MAX_DEPTH}"));
            }
            return Ok(Self::Fixed(d));
        }
        if let Some(v) = s.strip_prefix("uniform:") {
            let (a, b) = v.split_once("..").ok_or_else(bad)?;
            let a: u32 = a.parse().map_err(|_| bad())?;
            let b: u32 = b.parse().map_err(|_| bad())?;
            if a == 0 || b < a || b > MAX_DEPTH {
                return Err(format!(
                    "depth range {a}..{b} must satisfy 1 <= A <= B <= {MAX_DEPTH}"
                ));
            }
            return Ok(Self::Uniform(a, b));
        }
        if let Some(v) = s.strip_prefix("poisson:") {
            let l: f64 = v.parse().map_err(|_| bad())?;
            if !(l > 0.0 && l <= MAX_DEPTH as f64) {
                return Err(format!("poisson mean {l} must be in (0, {MAX_DEPTH}]"));
            }
            return Ok(Self::Poisson(l));
        }
        Err(bad())
    }

    /// Draws a depth in 1..=MAX_DEPTH.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u32 {
        let d = match *self {
            Self::Fixed(d) => d,
            Self::Uniform(a, b) => rng.gen_range(a..=b),
            Self::Poisson(l) => {
                // Knuth's method; fine for the small means used here.
                let limit = (-l).exp();
                let mut k = 0u32;
                let mut p = 1.0;
                loop {
                    p *= rng.gen::<f64>();
                    if p <= limit || k >= MAX_DEPTH {
                        break;
                    }
                    k += 1;
                }
                k
            }
        };
        d.clamp(1, MAX_DEPTH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn shapes_parse_and_place_files() {
        let t: TreeShape = "3x2".parse().unwrap();
        assert_eq!(t.total_files(), 6);
        let dirs: Vec<u64> = (0..8).map(|k| t.dir_of(k)).collect();
        assert_eq!(dirs, [0, 0, 1, 1, 2, 2, 0, 0]);
        for bad in ["3", "0x2", "ax2", "3x"] {
            assert!(bad.parse::<TreeShape>().is_err(), "{bad}");
        }
    }

    #[test]
    fn depths_stay_in_range_and_poisson_mean_holds() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let d = DepthDist::parse("impressions").unwrap();
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| d.sample(&mut rng) as u64).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 6.49).abs() < 0.15, "{mean}");
        let u = DepthDist::parse("uniform:2..3").unwrap();
        assert!((0..100).all(|_| (2..=3).contains(&u.sample(&mut rng))));
        assert!(DepthDist::parse("fixed:0").is_err());
        assert!(DepthDist::parse("zipf:2").is_err());
    }
}
