//! `fsgauge devices fit`: a rotating disk's profile derived from the `devices check`
//! measurements, in the spirit of Worthington et al., "On-line extraction of SCSI disk drive
//! parameters" (SIGMETRICS 1995) and Talagala et al.'s Skippy (2000), with reads only:
//!
//! - the revolution from the same-track pairs (the slope of the second read's time against
//!   the angle it must wait, [`super::pairs::revolution_ns`]); rpm = 60 s / revolution;
//! - the command overhead from reads the drive's read-ahead holds (the block just after a
//!   read: overhead and link transfer alone), and from it the fixed part of a read that goes
//!   to the platter (overhead, 4 KiB off the media, the last sector over the link);
//! - the seek at each distance of the seek curve: the mean time of its second reads minus that
//!   fixed part and half a revolution (the mean rotational wait after a seek); track-to-track
//!   from a + b·√d over the short distances at d = 1, full stroke from a line through the
//!   longest, the average over all cylinder pairs from the curve through every distance;
//! - outer and inner zone rates from the sequential reads.
//!
//! Distances are counted in the cylinders of the fitted geometry; the parameters that reads
//! cannot reach (heads, zones, switch times, cache, link, queue) come from a template profile
//! and say so in their sources.

use anyhow::Result;
use serde::Serialize;

use super::check::{CheckOptions, CheckReport, SEQ_INNER, SEQ_OUTER};
use super::pairs::{follow_on_quantile, revolution_ns, PairRun, BLOCK};
use super::target::{self as bench_target, TargetSpec};
use crate::base::error::bad_input;
use crate::device::model::hdd::{Geometry, SeekCurve};
use crate::device::model::SECTOR;
use crate::device::profile::{self, HddParams, ParamType, Params, Profile, HDD_PARAMS};
use crate::results::device::LATE_P99_MS;

/// The template for a real device without `--profile`.
pub const DEFAULT_TEMPLATE: &str = "deskstar-7k250";

/// A fit: the check it was made from, the figures, the profile file, and (fitting an
/// emulated profile) the comparison with the profile's own figures.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    pub check: CheckReport,
    pub fitted: Fitted,
    /// The template's name (the fitted profile's own, for an emulated one).
    pub template: String,
    /// Per fitted parameter: (name, fitted, the profile's value, fitted / profile − 1);
    /// fitting an emulated profile only.
    pub comparison: Vec<Compared>,
    /// The fitted profile file's text.
    pub profile_toml: String,
    /// Why the fitted figures may not be the drive's (an emulator that fell behind its
    /// model); also at the head of the profile file.
    pub warnings: Vec<String>,
}

/// A fitted figure against the emulated profile's.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    pub parameter: &'static str,
    pub fitted: f64,
    pub profile: f64,
    pub error: f64,
}

/// Runs the check on the target and fits a profile named `name` (default `fitted-DEVICE`).
pub fn run(spec: &TargetSpec<'_>, opts: &CheckOptions, name: Option<&str>) -> Result<FitReport> {
    bench_target::validate(spec, opts)?;
    let template_ref = match (spec.is_device(), spec.profile) {
        (true, p) => p.unwrap_or(DEFAULT_TEMPLATE),
        (false, _) => spec.target,
    };
    let (template, abl) = profile::load_ref(template_ref)?;
    let hdd = template_params(&template).map_err(bad_input)?;
    if !abl.is_none() && !spec.is_device() {
        return Err(bad_input(format!(
            "{}: a fit measures the whole mechanism; fit the profile without ablations",
            spec.target
        )));
    }
    let base = spec.target.rsplit('/').next().unwrap_or(spec.target);
    let name = name.map_or_else(|| format!("fitted-{base}"), str::to_string);
    if name.trim().is_empty() || name.contains(':') || name.contains('/') {
        return Err(bad_input(format!(
            "--name {name:?}: give the profile a name without ':' or '/' (e.g. \"mydisk\")"
        )));
    }
    let check = bench_target::check(spec, opts)?;
    let measured = |n: &str| {
        check
            .measured(n)
            .ok_or_else(|| anyhow::anyhow!("the check made no {n} benchmark"))
    };
    let input = FitInput {
        size: check.size_bytes,
        outer_mb_s: measured(SEQ_OUTER)?,
        inner_mb_s: measured(SEQ_INNER)?,
        same_track: &check.runs.same_track,
        seek: &check.runs.seek,
        template: &template,
    };
    let fitted = fit(&input).map_err(|m| anyhow::anyhow!("fitting {}: {m}", spec.target))?;
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let on = if spec.is_device() {
        spec.target.to_string()
    } else {
        format!("the emulated {}", spec.target)
    };
    let warnings = lateness_warnings(&check);
    let toml = warnings
        .iter()
        .map(|w| format!("# warning: {w}\n"))
        .chain([profile_toml(&fitted, &template, &name, &on, &date[..10])])
        .collect::<String>();
    // What is written must load: the same parser `--device-model FILE` uses.
    profile::parse(&toml, "the fitted profile")
        .map_err(|e| e.context("the fitted profile does not load (a fit out of range)"))?;
    let comparison = if spec.is_device() {
        Vec::new()
    } else {
        compare(&fitted, hdd, template.capacity_bytes)
    };
    Ok(FitReport {
        check,
        fitted,
        template: template.name.clone(),
        comparison,
        profile_toml: toml,
        warnings,
    })
}

/// The fit's own doubt: an emulated disk whose server fell behind its model during the
/// check (lateness p99 over [`LATE_P99_MS`]) was timed partly by this machine, not by the
/// model alone; the figures fitted from it carry that. (A fit never fails for it: on a busy
/// machine it still makes its profile, and says so.)
pub fn lateness_warnings(check: &CheckReport) -> Vec<String> {
    check
        .lateness
        .filter(|l| l.p99_ms > LATE_P99_MS)
        .map(|l| {
            format!(
                "the emulator fell behind its model during the measurements (lateness p99 {:.3} ms, max {:.3} ms, over {LATE_P99_MS} ms; the disk's clock paused {:.3} ms in {} stops, which the request times, taken on the wall, include): the fitted figures carry this machine's delays as well as the profile's; fit again on a quieter machine",
                l.p99_ms, l.max_ms, l.pause_ms, l.pauses
            )
        })
        .into_iter()
        .collect()
}

/// The fitted figures against the profile's.
fn compare(f: &Fitted, p: &HddParams, capacity: u64) -> Vec<Compared> {
    let own = |n: &str| match n {
        "capacity_bytes" => capacity as f64,
        "rpm" => p.rpm,
        "outer_mb_s" => p.outer_mb_s,
        "inner_mb_s" => p.inner_mb_s,
        "track_to_track_ms" => p.track_to_track_ms,
        "average_seek_ms" => p.average_seek_ms,
        "full_stroke_ms" => p.full_stroke_ms,
        _ => p.overhead_ms,
    };
    f.figures()
        .into_iter()
        .map(|(n, v)| Compared {
            parameter: n,
            fitted: v,
            profile: own(n),
            error: if own(n) > 0.0 { v / own(n) - 1.0 } else { 0.0 },
        })
        .collect()
}

/// What the fit is made from.
#[derive(Debug, Clone, Copy)]
pub struct FitInput<'a> {
    /// The device's size, bytes (the fitted capacity).
    pub size: u64,
    /// Sequential 1 MiB reads at the start and the end, MB/s.
    pub outer_mb_s: f64,
    pub inner_mb_s: f64,
    pub same_track: &'a PairRun,
    pub seek: &'a PairRun,
    /// Where the parameters that are not fitted come from (a rotating disk's profile).
    pub template: &'a Profile,
}

/// One distance of the fitted seek curve.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SeekSample {
    /// Mean distance in the fitted geometry's cylinders.
    pub cylinders: f64,
    /// Mean seek: second-read time minus the fixed part and half a revolution, ms.
    pub seek_ms: f64,
    pub pairs: u64,
}

/// The fitted figures.
#[derive(Debug, Clone, Serialize)]
pub struct Fitted {
    pub rpm: f64,
    pub track_to_track_ms: f64,
    pub average_seek_ms: f64,
    pub full_stroke_ms: f64,
    pub outer_mb_s: f64,
    pub inner_mb_s: f64,
    pub overhead_ms: f64,
    pub capacity_bytes: u64,
    /// Cylinders of the fitted geometry.
    pub cylinders: u64,
    /// The seek curve the seek figures come from.
    pub seek: Vec<SeekSample>,
    /// Requests measured for the fit (timed reads of the pairs and sequential reads).
    pub requests: u64,
    /// Where a figure had to be adjusted, and why.
    pub notes: Vec<String>,
}

impl Fitted {
    /// The fitted parameters over the template's.
    pub fn params(&self, template: &HddParams) -> HddParams {
        HddParams {
            rpm: self.rpm,
            outer_mb_s: self.outer_mb_s,
            inner_mb_s: self.inner_mb_s,
            track_to_track_ms: self.track_to_track_ms,
            average_seek_ms: self.average_seek_ms,
            full_stroke_ms: self.full_stroke_ms,
            overhead_ms: self.overhead_ms,
            ..template.clone()
        }
    }

    /// (parameter, fitted value) for every fitted figure, in profile order.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("capacity_bytes", self.capacity_bytes as f64),
            ("rpm", self.rpm),
            ("outer_mb_s", self.outer_mb_s),
            ("inner_mb_s", self.inner_mb_s),
            ("track_to_track_ms", self.track_to_track_ms),
            ("average_seek_ms", self.average_seek_ms),
            ("full_stroke_ms", self.full_stroke_ms),
            ("overhead_ms", self.overhead_ms),
        ]
    }
}

fn template_params(p: &Profile) -> Result<&HddParams, String> {
    match &p.params {
        Params::Hdd(h) => Ok(h),
        _ => Err(format!(
            "profile {} is a {}, not a rotating disk (kind = \"hdd\"): devices fit derives a rotating disk's profile (for a real device, give an hdd profile with --profile)",
            p.name, p.kind
        )),
    }
}

/// Fits a rotating disk's figures to the measurements.
pub fn fit(input: &FitInput<'_>) -> Result<Fitted, String> {
    let template = template_params(input.template)?;
    let pairs: Vec<(Option<f64>, f64)> = input
        .same_track
        .reads
        .iter()
        .filter(|r| r.class == Some(0))
        .map(|r| (r.phase, r.ns as f64))
        .collect();
    let rev = revolution_ns(&pairs).ok_or_else(|| {
        format!(
            "{} same-track pairs are too few to find the revolution (20 needed): give more --seconds",
            pairs.len()
        )
    })?;
    let mut p = template.clone();
    p.rpm = 60e9 / rev;
    p.outer_mb_s = input.outer_mb_s;
    p.inner_mb_s = input.inner_mb_s;
    let geo = Geometry::new(&p, input.size).map_err(|m| format!("fitted geometry: {m}"))?;
    // Overhead: a read the read-ahead holds costs the command and the link transfer alone
    // (the fastest tenth of them: host noise only adds).
    let hit = follow_on_quantile(input.same_track, &|i| input.same_track.reads[i].ns, 0.1)
        .ok_or("no follow-on reads: give more --seconds")?;
    let link = |bytes: u64| bytes as f64 / (p.link_mb_s * 1e6) * 1e9;
    let mut notes = Vec::new();
    let overhead = if hit < rev / 4.0 {
        (hit - link(BLOCK)).max(0.0)
    } else {
        notes.push(format!(
            "the block after a read took {:.2} ms: no read-ahead to time the command overhead with; overhead_ms taken from the template",
            hit / 1e6
        ));
        template.overhead_ms * 1e6
    };
    // The fixed part of a read that waits for the platter: overhead, 4 KiB off the media at a
    // middle zone, the last sector over the link.
    let spt = geo.locate(geo.sectors() / 2).spt as f64;
    let fixed = overhead + (BLOCK / SECTOR) as f64 * rev / spt + link(SECTOR);
    let seek = seek_samples(input.seek, &geo, fixed + rev / 2.0);
    let d_max = (geo.cylinders().max(3) - 1) as f64;
    let (tt, full) = ends(&seek, d_max, &mut notes)?;
    let mut avg = average(&seek, tt, full, d_max);
    let (lo, hi) = SeekCurve::average_range(tt * 1e6, full * 1e6, geo.cylinders());
    let (lo, hi) = (lo / 1e6, hi / 1e6);
    if !(lo..=hi).contains(&avg) {
        let to = avg.clamp(lo, hi);
        notes.push(format!(
            "average seek {avg:.2} ms is outside what a √-then-linear curve from {tt:.2} to {full:.2} ms reaches ({lo:.2} to {hi:.2} ms): taken as {to:.2} ms"
        ));
        avg = to;
    }
    let requests = (pairs.len() + input.seek.timed().count()) as u64;
    Ok(Fitted {
        rpm: p.rpm,
        track_to_track_ms: tt,
        average_seek_ms: avg,
        full_stroke_ms: full,
        outer_mb_s: p.outer_mb_s,
        inner_mb_s: p.inner_mb_s,
        overhead_ms: overhead / 1e6,
        capacity_bytes: input.size,
        cylinders: geo.cylinders(),
        seek,
        requests,
        notes,
    })
}

/// Per distance class: mean cylinders and mean seek (time less `fixed_ns`), sorted by
/// distance; classes whose pairs moved no cylinder are left out.
fn seek_samples(run: &PairRun, geo: &Geometry, fixed_ns: f64) -> Vec<SeekSample> {
    let cyl = |off: u64| geo.locate(off / SECTOR).cylinder;
    let mut out: Vec<SeekSample> = (0..run.distances.len())
        .filter_map(|k| {
            let (mut n, mut d, mut s) = (0u64, 0.0, 0.0);
            for r in run.reads.iter().filter(|r| r.class == Some(k)) {
                n += 1;
                d += cyl(r.from).abs_diff(cyl(r.offset)) as f64;
                s += r.ns as f64 - fixed_ns;
            }
            (n > 0 && d > 0.0).then(|| SeekSample {
                cylinders: d / n as f64,
                seek_ms: s / n as f64 / 1e6,
                pairs: n,
            })
        })
        .collect();
    out.sort_by(|a, b| a.cylinders.total_cmp(&b.cylinders));
    out
}

/// Least squares y = a + b·x.
fn line(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (my - sxy / sxx * mx, sxy / sxx))
}

/// Track-to-track (a + b·√d over distances up to 64 cylinders, at d = 1) and full stroke (a
/// line through the three longest distances, at the last cylinder), ms.
fn ends(seek: &[SeekSample], d_max: f64, notes: &mut Vec<String>) -> Result<(f64, f64), String> {
    let (Some(first), Some(last)) = (seek.first(), seek.last()) else {
        return Err("no seek-curve pairs moved the heads: give more --seconds".into());
    };
    let short: Vec<(f64, f64)> = seek
        .iter()
        .filter(|s| s.cylinders <= 64.0)
        .map(|s| (s.cylinders.sqrt(), s.seek_ms))
        .collect();
    let mut tt = match line(&short) {
        Some((a, b)) if b >= 0.0 => a + b,
        _ => first.seek_ms,
    };
    let long: Vec<(f64, f64)> = seek
        .iter()
        .rev()
        .take(3)
        .map(|s| (s.cylinders, s.seek_ms))
        .collect();
    let full = match line(&long) {
        Some((a, b)) if b >= 0.0 => a + b * d_max,
        _ => last.seek_ms,
    };
    if tt < 0.05 {
        notes.push(format!(
            "track-to-track seek came out at {tt:.3} ms (the fixed part of a read is uncertain by about that): taken as 0.05 ms"
        ));
        tt = 0.05;
    }
    if full <= tt {
        return Err(format!(
            "the seek curve does not rise (track-to-track {tt:.2} ms, full stroke {full:.2} ms): is this a rotating disk?"
        ));
    }
    Ok((tt, full))
}

/// The mean seek over all cylinder pairs (density 2(D−d)/D²) of the curve through (1, tt),
/// the measured distances and (D, full), straight between them in √d; ms.
fn average(seek: &[SeekSample], tt: f64, full: f64, d_max: f64) -> f64 {
    let mut pts: Vec<(f64, f64)> = vec![(1.0, tt)];
    pts.extend(
        seek.iter()
            .filter(|s| s.cylinders > 1.0 && s.cylinders < d_max)
            .map(|s| (s.cylinders.sqrt(), s.seek_ms)),
    );
    pts.push((d_max.sqrt(), full));
    let t = |d: f64| {
        let x = d.sqrt();
        if x <= pts[0].0 {
            return pts[0].1;
        }
        for w in pts.windows(2) {
            if x <= w[1].0 {
                let f = (x - w[0].0) / (w[1].0 - w[0].0).max(1e-12);
                return w[0].1 + f * (w[1].1 - w[0].1);
            }
        }
        full
    };
    // In u = √(d/D), as SeekCurve::mean_uniform; Simpson's rule.
    let n = 4096;
    let f = |u: f64| t(d_max * u * u) * 2.0 * (1.0 - u * u) * 2.0 * u;
    let h = 1.0 / n as f64;
    let mut s = f(0.0) + f(1.0);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

/// Rounds a fitted figure for the profile file: 3 significant decimals for ms, 1 for MB/s,
/// whole rpm and bytes.
fn figure_text(name: &str, v: f64) -> String {
    match name {
        "capacity_bytes" => format!("{}", v.round() as u64),
        "rpm" => format!("{:.0}", v),
        n if n.ends_with("_ms") => format!("{v:.3}"),
        _ => format!("{v:.1}"),
    }
}

/// The fitted profile as a profile file: the fitted figures with `source` saying so, every
/// other parameter as the template has it (its source kept, prefixed with where it came from).
pub fn profile_toml(
    f: &Fitted,
    template: &Profile,
    name: &str,
    device: &str,
    date: &str,
) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let fitted = f.figures();
    let mut s = format!(
        "# Fitted by `fsgauge devices fit` on {device}, {date}: {} requests. Parameters reads cannot\n# measure are the template profile {}'s.\nname = {}\nkind = \"hdd\"\ndescription = {}\n\n[parameters]\n",
        f.requests,
        template.name,
        q(name),
        q(&format!(
            "fitted to {device}: {:.0} rpm, average seek {:.2} ms, {:.1}-{:.1} MB/s",
            f.rpm, f.average_seek_ms, f.inner_mb_s, f.outer_mb_s
        )),
    );
    for v in &template.sourced {
        let (value, source) = match fitted.iter().find(|(n, _)| *n == v.name) {
            Some((n, x)) => (
                figure_text(n, *x),
                format!(
                    "fitted by fsgauge devices fit on {device}, {date}, {} requests",
                    f.requests
                ),
            ),
            None => {
                let choice = HDD_PARAMS
                    .iter()
                    .any(|d| d.name == v.name && matches!(d.ty, ParamType::Choice(_)));
                let value = if choice { q(&v.value) } else { v.value.clone() };
                (
                    value,
                    format!("not fitted, from profile {}: {}", template.name, v.source),
                )
            }
        };
        s.push_str(&format!(
            "{} = {{ value = {value}, source = {} }}\n",
            v.name,
            q(&source)
        ));
    }
    s
}

#[cfg(test)]
mod tests;
