//! File-size distributions for aging: where the sizes of the files an aged filesystem holds
//! come from.
//!
//! * `agrawal` — the bucketed sizes of the five-year Windows file-system study (Agrawal,
//!   Bolosky, Douceur, Lorch, FAST'07) as Geriatrix ships them (`profiles/agrawal`): eleven
//!   sizes from 8 B to 8 MiB, each a power of four, with integer weights. Sizes are drawn
//!   exactly, as Geriatrix does.
//! * `impressions` — the hybrid model of the Impressions paper (Agrawal, Arpaci-Dusseau,
//!   Arpaci-Dusseau, FAST'09, Table 2): a lognormal body (μ = 9.48, σ = 2.46, natural log of
//!   bytes) holding 99.994% of files and a Pareto tail (k = 0.91, x_m = 512 MiB).
//! * `fixed:SIZE`, `uniform:MIN..MAX`.
//! * `loizides-1g` — a size table of our own making for a 1 GB partition, in the spirit of the
//!   fragmentation project's "standard file size distribution for a 1 GB partition" (whose
//!   numbers are not published in the seed text): mostly small files, few large ones, so that a
//!   1 GB partition at 99% holds some thousands of files. Ranges are drawn uniformly.
//! * A CSV file of `size,weight` rows (`#` comments and blank lines allowed, an optional
//!   `size,weight` header); a size may be a range `4K..8K`. Errors name the file and line.
//!
//! Every sampler is driven by the caller's seeded generator, so the same seed gives the same
//! sizes.

use std::path::Path;

use anyhow::Result;
use rand::Rng;

use crate::analysis::stats::standard_normal;
use crate::base::error::bad_input;
use crate::base::units::{format_size, parse_size};

/// One row of a size table: sizes drawn uniformly from `lo..=hi` with relative `weight`.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeRow {
    pub lo: u64,
    pub hi: u64,
    pub weight: f64,
}

/// A file-size distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// A weighted table of sizes or size ranges.
    Table {
        /// Name as given (`agrawal`, `loizides-1g`, or the CSV path).
        name: String,
        rows: Vec<SizeRow>,
        /// Cumulative weights, for sampling.
        cumulative: Vec<f64>,
    },
    /// Lognormal body with a Pareto tail.
    Hybrid {
        /// Share of files drawn from the body.
        body_share: f64,
        mu: f64,
        sigma: f64,
        /// Pareto shape.
        k: f64,
        /// Pareto scale, bytes.
        xm: f64,
    },
    /// Every file the same size.
    Fixed(u64),
    /// Uniform over `min..=max`.
    Uniform(u64, u64),
}

/// The Agrawal et al. table as Geriatrix ships it: (size in bytes, weight).
const AGRAWAL: [(u64, f64); 11] = [
    (8, 1.0),
    (32, 7.0),
    (128, 16.0),
    (512, 40.0),
    (2048, 50.0),
    (8192, 46.0),
    (32768, 35.0),
    (131072, 20.0),
    (524288, 10.0),
    (2097152, 4.0),
    (8388608, 1.0),
];

/// Our table for a 1 GB partition: (from, to, weight in percent of files).
const LOIZIDES_1G: [(u64, u64, f64); 8] = [
    (1, 1 << 10, 20.0),
    ((1 << 10) + 1, 4 << 10, 25.0),
    ((4 << 10) + 1, 16 << 10, 22.0),
    ((16 << 10) + 1, 64 << 10, 15.0),
    ((64 << 10) + 1, 256 << 10, 10.0),
    ((256 << 10) + 1, 1 << 20, 5.0),
    ((1 << 20) + 1, 4 << 20, 2.5),
    ((4 << 20) + 1, 16 << 20, 0.5),
];

/// The built-in distributions with a one-line description, for `--list-dists`.
pub fn builtin_list() -> Vec<(String, String)> {
    let agrawal: Vec<String> = AGRAWAL
        .iter()
        .map(|(s, w)| format!("{}:{w}", format_size(*s)))
        .collect();
    let loiz: Vec<String> = LOIZIDES_1G
        .iter()
        .map(|(a, b, w)| format!("{}..{}:{w}%", format_size(*a), format_size(*b)))
        .collect();
    vec![
        (
            "agrawal".into(),
            format!(
                "Agrawal et al. FAST'07 sizes as Geriatrix ships them (size:weight): {}",
                agrawal.join(" ")
            ),
        ),
        (
            "impressions".into(),
            "Impressions FAST'09: lognormal body (mu 9.48, sigma 2.46, ln bytes) for 99.994% of files, Pareto tail (k 0.91, xm 512M)".into(),
        ),
        (
            "loizides-1g".into(),
            format!(
                "fsgauge's table for a 1 GB partition (range:share, uniform in range): {}",
                loiz.join(" ")
            ),
        ),
        ("fixed:SIZE".into(), "every file SIZE bytes, e.g. fixed:1M".into()),
        (
            "uniform:MIN..MAX".into(),
            "sizes uniform between MIN and MAX, e.g. uniform:4K..64K".into(),
        ),
        (
            "FILE".into(),
            "a CSV of size,weight rows (size may be a range 4K..8K; # comments)".into(),
        ),
    ]
}

impl SizeDist {
    /// Parses a distribution name, `fixed:`/`uniform:` spec, or a CSV file path.
    /// Errors are bad input naming the spec (and the file line for CSV files).
    pub fn parse(spec: &str) -> Result<Self> {
        let s = spec.trim();
        match s {
            "agrawal" => {
                return Ok(Self::table(
                    "agrawal",
                    AGRAWAL
                        .iter()
                        .map(|&(sz, w)| SizeRow {
                            lo: sz,
                            hi: sz,
                            weight: w,
                        })
                        .collect(),
                ))
            }
            "impressions" => {
                return Ok(Self::Hybrid {
                    body_share: 0.99994,
                    mu: 9.48,
                    sigma: 2.46,
                    k: 0.91,
                    xm: (512u64 << 20) as f64,
                })
            }
            "loizides-1g" => {
                return Ok(Self::table(
                    "loizides-1g",
                    LOIZIDES_1G
                        .iter()
                        .map(|&(lo, hi, w)| SizeRow { lo, hi, weight: w })
                        .collect(),
                ))
            }
            _ => {}
        }
        if let Some(v) = s.strip_prefix("fixed:") {
            let n = parse_size(v).map_err(|e| bad_input(format!("distribution {s:?}: {e}")))?;
            if n == 0 {
                return Err(bad_input(format!(
                    "distribution {s:?}: the size must be at least 1 byte"
                )));
            }
            return Ok(Self::Fixed(n));
        }
        if let Some(v) = s.strip_prefix("uniform:") {
            let (lo, hi) =
                parse_range(v).map_err(|e| bad_input(format!("distribution {s:?}: {e}")))?;
            return Ok(Self::Uniform(lo, hi));
        }
        let path = Path::new(s);
        if path.exists() {
            return Self::from_csv_file(path);
        }
        Err(bad_input(format!(
            "unknown size distribution {s:?}: use agrawal, impressions, loizides-1g, fixed:SIZE, uniform:MIN..MAX or the path of a CSV file of size,weight rows (fsgauge age --list-dists)"
        )))
    }

    fn table(name: &str, rows: Vec<SizeRow>) -> Self {
        let mut acc = 0.0;
        let cumulative = rows
            .iter()
            .map(|r| {
                acc += r.weight;
                acc
            })
            .collect();
        Self::Table {
            name: name.into(),
            rows,
            cumulative,
        }
    }

    /// Reads a CSV distribution file.
    pub fn from_csv_file(path: &Path) -> Result<Self> {
        let text = crate::base::bounded::read_text(
            path,
            crate::base::bounded::DIST_LIMIT,
            "size distributions",
            "distribution file",
        )?;
        Self::from_csv(&text, &path.display().to_string())
    }

    /// Parses CSV text; `origin` names it in errors.
    pub fn from_csv(text: &str, origin: &str) -> Result<Self> {
        let mut rows = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if rows.is_empty()
                && fields.len() == 2
                && fields[0].eq_ignore_ascii_case("size")
                && fields[1].eq_ignore_ascii_case("weight")
            {
                continue;
            }
            let err = |why: String| {
                bad_input(format!(
                    "{origin} line {line_no}: {why} (in {raw:?}); rows are size,weight e.g. 4K,10"
                ))
            };
            if fields.len() != 2 {
                return Err(err(format!("expected 2 fields, found {}", fields.len())));
            }
            let (lo, hi) = if fields[0].contains("..") {
                parse_range(fields[0]).map_err(err)?
            } else {
                let n = parse_size(fields[0]).map_err(|e| err(e.to_string()))?;
                (n, n)
            };
            let weight: f64 = fields[1]
                .parse()
                .map_err(|_| err(format!("weight {:?} is not a number", fields[1])))?;
            if !weight.is_finite() || weight < 0.0 {
                return Err(err(format!("weight {weight} must be 0 or more")));
            }
            rows.push(SizeRow { lo, hi, weight });
        }
        if rows.is_empty() {
            return Err(bad_input(format!(
                "{origin}: the distribution file has no size,weight rows"
            )));
        }
        if rows.iter().all(|r| r.weight == 0.0) {
            return Err(bad_input(format!(
                "{origin}: every weight is 0; at least one row needs a positive weight"
            )));
        }
        // Sampling draws below the total weight: an infinite total would draw past every row
        // and fall on the last, whatever its weight (0 included).
        if !rows.iter().map(|r| r.weight).sum::<f64>().is_finite() {
            return Err(bad_input(format!(
                "{origin}: the weights add up to more than a float holds; only their ratios count, so scale them down"
            )));
        }
        Ok(Self::table(origin, rows))
    }

    /// Draws one size.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        match self {
            Self::Fixed(n) => *n,
            Self::Uniform(lo, hi) => rng.gen_range(*lo..=*hi),
            Self::Table {
                rows, cumulative, ..
            } => {
                let total = *cumulative.last().expect("tables have rows");
                let x = rng.gen::<f64>() * total;
                let i = cumulative
                    .iter()
                    .position(|c| x < *c)
                    .unwrap_or(rows.len() - 1);
                let r = &rows[i];
                if r.lo == r.hi {
                    r.lo
                } else {
                    rng.gen_range(r.lo..=r.hi)
                }
            }
            Self::Hybrid {
                body_share,
                mu,
                sigma,
                k,
                xm,
            } => {
                let v = if rng.gen::<f64>() < *body_share {
                    (mu + sigma * standard_normal(rng)).exp()
                } else {
                    // Pareto by inversion: xm / U^(1/k), U in (0, 1].
                    let u = 1.0 - rng.gen::<f64>();
                    xm / u.powf(1.0 / k)
                };
                if v.is_finite() {
                    (v.round() as u64).max(1)
                } else {
                    u64::MAX
                }
            }
        }
    }

    /// The mean size, estimated from 20,000 draws with a fixed seed (exact for fixed sizes).
    pub fn mean(&self, cap: u64) -> f64 {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let n = 20_000;
        (0..n)
            .map(|_| self.sample(&mut rng).min(cap) as f64)
            .sum::<f64>()
            / n as f64
    }

    /// The largest size the distribution can give (None when unbounded).
    pub fn max(&self) -> Option<u64> {
        match self {
            Self::Fixed(n) => Some(*n),
            Self::Uniform(_, hi) => Some(*hi),
            Self::Table { rows, .. } => rows.iter().map(|r| r.hi).max(),
            Self::Hybrid { .. } => None,
        }
    }

    /// The smallest size the distribution gives.
    pub fn min(&self) -> u64 {
        match self {
            Self::Fixed(n) => *n,
            Self::Uniform(lo, _) => *lo,
            Self::Table { rows, .. } => rows
                .iter()
                .filter(|r| r.weight > 0.0)
                .map(|r| r.lo)
                .min()
                .unwrap_or(1),
            Self::Hybrid { .. } => 1,
        }
    }
}

fn parse_range(v: &str) -> Result<(u64, u64), String> {
    let Some((a, b)) = v.split_once("..") else {
        return Err(format!(
            "{v:?} is not a range; write MIN..MAX, e.g. 4K..64K"
        ));
    };
    let lo = parse_size(a).map_err(|e| e.to_string())?;
    let hi = parse_size(b).map_err(|e| e.to_string())?;
    if lo == 0 || hi < lo {
        return Err(format!(
            "range {v:?} must have 1 <= MIN <= MAX (got {lo}..{hi})"
        ));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn agrawal_draws_only_its_sizes_in_proportion() {
        let d = SizeDist::parse("agrawal").unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut n2k = 0;
        let n = 230_000;
        for _ in 0..n {
            let s = d.sample(&mut rng);
            assert!(AGRAWAL.iter().any(|(a, _)| *a == s), "{s}");
            if s == 2048 {
                n2k += 1;
            }
        }
        // 2048 has weight 50 of 230.
        let share = n2k as f64 / n as f64;
        assert!((share - 50.0 / 230.0).abs() < 0.005, "{share}");
        assert_eq!(d.max(), Some(8 << 20));
        assert_eq!(d.min(), 8);
    }

    #[test]
    fn impressions_median_is_exp_mu() {
        let d = SizeDist::parse("impressions").unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut v: Vec<u64> = (0..50_001).map(|_| d.sample(&mut rng)).collect();
        v.sort_unstable();
        let median = v[25_000] as f64;
        // e^9.48 = 13,088 bytes.
        assert!((median / 9.48f64.exp() - 1.0).abs() < 0.05, "{median}");
    }

    #[test]
    fn fixed_uniform_and_errors() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        assert_eq!(SizeDist::parse("fixed:4K").unwrap().sample(&mut rng), 4096);
        let u = SizeDist::parse("uniform:1K..2K").unwrap();
        for _ in 0..1000 {
            let s = u.sample(&mut rng);
            assert!((1024..=2048).contains(&s));
        }
        for bad in ["fixed:0", "uniform:2K..1K", "uniform:4K", "nope", "fixed:x"] {
            let e = SizeDist::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn csv_rows_header_comments_and_line_numbers() {
        let d = SizeDist::from_csv("size,weight\n# c\n4K,1\n\n8K..16K, 3\n", "f.csv").unwrap();
        let SizeDist::Table { rows, .. } = &d else {
            panic!()
        };
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].lo, 8192);
        assert_eq!(rows[1].hi, 16384);
        let e = SizeDist::from_csv("4K,1\n8K\n", "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.csv line 2"), "{e}");
        let e = SizeDist::from_csv("4K,1\n8Q,2\n", "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = SizeDist::from_csv("4K,-1\n", "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = SizeDist::from_csv("# nothing\n\n", "f.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no size,weight rows"), "{e}");
    }

    #[test]
    fn weights_whose_total_is_infinite_are_refused() {
        // Each weight is finite, their sum is not: every draw fell past the last cumulative
        // weight, onto the last row, here one of weight 0 (the `dist` fuzz target checks that
        // draws come from rows of positive weight).
        let e = SizeDist::from_csv(
            "4K,1e308
8K,1e308
1M,0
",
            "f.csv",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "f.csv: the weights add up to more than a float holds; only their ratios count, so scale them down"
        );
    }

    #[test]
    fn loizides_mean_suits_a_1g_partition() {
        let d = SizeDist::parse("loizides-1g").unwrap();
        let mean = d.mean(u64::MAX);
        // Some thousands of files fill 1 GB: mean between 100 KiB and 400 KiB.
        assert!(mean > 100e3 && mean < 400e3, "{mean}");
    }
}
