//! Read pairs, the two micro-benchmarks of `devices check` that take a disk's mechanism apart
//! (DEVICES.md, "Validation, in order", step 3):
//!
//! - **Seek curve**: 4 KiB reads at growing distance from the one before (about 12 distances
//!   log-spaced from one cylinder to the whole stroke, taken in turn, from random places).
//!   The second read of a pair costs seek + rotation + transfer + overhead; the rotation is not
//!   separable on a real drive, so the mean per distance is compared with the model's for the
//!   same requests, and `devices fit` subtracts the mean rotation (half a revolution) and the
//!   fixed part found by the same-track reads.
//! - **Same-track reads**: a read, then one a little *before* it on the same track (so the
//!   drive's read-ahead, which runs forward, cannot hold it): the heads wait for the platter to
//!   come round, uniformly 0 to one revolution as the gap varies. Placed by the model's
//!   geometry where there is one (the gap's angle is then known, and the revolution is the
//!   slope of the time against it); on a device without a profile, within 256 KiB. A third
//!   read, of the block just after the second, comes from the read-ahead the second started:
//!   command overhead and link transfer alone.
//!
//! Both run on a [`Reader`]: the device through `pread` on `measure`'s operation clock, or the
//! model on a virtual clock ([`ModelReader`]), so the fit can be tested without a device.

use anyhow::Result;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::device::model::hdd::Geometry;
use crate::device::model::{DeviceModel, Request, SECTOR};

/// Bytes per read.
pub const BLOCK: u64 = 4096;
/// Distances the seek curve visits.
pub const DISTANCES: usize = 12;
/// Where same-track pairs stay on a device without geometry.
const WINDOW: u64 = 256 << 10;
/// The class of the same-track benchmark's third reads (the block after the second).
pub const FOLLOW_ON: usize = 1;
/// Consecutive placements that may fail before a benchmark gives up.
const MAX_MISSES: u32 = 10_000;

/// Something that reads 4 KiB blocks and tells the time.
pub trait Reader {
    /// The clock the time box runs on, ns.
    fn now_ns(&mut self) -> u64;
    /// Reads [`BLOCK`] bytes at `offset`; returns the time it took, ns.
    fn read(&mut self, offset: u64) -> Result<u64>;
}

/// The model as a [`Reader`] on a virtual clock: each read is issued as the previous completes.
pub struct ModelReader {
    model: DeviceModel,
    now: u64,
    id: u64,
}

impl ModelReader {
    pub fn new(model: DeviceModel) -> Self {
        ModelReader {
            model,
            now: 0,
            id: 0,
        }
    }
}

impl Reader for ModelReader {
    fn now_ns(&mut self) -> u64 {
        self.now
    }
    fn read(&mut self, offset: u64) -> Result<u64> {
        let d = self
            .model
            .service(Request::read(self.id, offset, BLOCK), self.now);
        self.id += 1;
        self.now = d.done_ns;
        Ok(d.response_ns())
    }
}

/// One read of a pair benchmark.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairRead {
    /// Where the read before it was (the heads' place), bytes.
    pub from: u64,
    pub offset: u64,
    /// The distance class (seek curve) or 0 (same track); None for a read that only positions.
    pub class: Option<usize>,
    /// Same-track pairs placed by geometry: the fraction of a revolution from the end of the
    /// first read round to the start of the second.
    pub phase: Option<f64>,
    pub ns: u64,
}

/// The reads of one pair benchmark.
#[derive(Debug, Clone, Default)]
pub struct PairRun {
    /// The distance of each class: cylinders when placed by geometry, else bytes.
    pub distances: Vec<u64>,
    pub by_cylinders: bool,
    pub reads: Vec<PairRead>,
}

impl PairRun {
    /// The timed reads (second reads of pairs).
    pub fn timed(&self) -> impl Iterator<Item = &PairRead> {
        self.reads.iter().filter(|r| r.class.is_some())
    }
}

/// Where pair benchmarks put their reads: on the cylinders and tracks of a model's geometry
/// (the image `offset` bytes into the modelled disk), or by bytes alone.
#[derive(Debug, Clone)]
pub struct Placement {
    size: u64,
    geo: Option<(Geometry, u64)>,
}

impl Placement {
    /// A device of `size` bytes, with the geometry (and the image's offset on it) if known.
    pub fn new(size: u64, geo: Option<(Geometry, u64)>) -> Self {
        let geo = geo.filter(|(g, off)| g.sectors() * SECTOR >= off + size.min(1));
        Placement { size, geo }
    }

    fn last_block(&self) -> u64 {
        self.size.saturating_sub(BLOCK) / BLOCK * BLOCK
    }

    /// The cylinder of an image offset.
    pub fn cylinder(geo: &Geometry, image_offset: u64, at: u64) -> u64 {
        geo.locate((at + image_offset) / SECTOR).cylinder
    }

    /// The cylinders the image covers.
    fn cylinders(&self) -> Option<(u64, u64)> {
        let (g, off) = self.geo.as_ref()?;
        Some((
            Placement::cylinder(g, *off, 0),
            Placement::cylinder(g, *off, self.last_block()),
        ))
    }

    /// About [`DISTANCES`] distances, log-spaced: cylinders from 1 to the stroke, or bytes
    /// from 1 MiB to the device's size.
    pub fn distances(&self) -> Vec<u64> {
        let (lo, hi) = match self.cylinders() {
            Some((a, b)) => (1.0, b.saturating_sub(a) as f64),
            None => ((1u64 << 20) as f64, self.last_block() as f64),
        };
        if hi < lo {
            return Vec::new();
        }
        let mut v: Vec<u64> = (0..DISTANCES)
            .map(|k| {
                let x = lo * (hi / lo).powf(k as f64 / (DISTANCES - 1) as f64);
                let x = x.round() as u64;
                if self.geo.is_some() {
                    x
                } else {
                    x / BLOCK * BLOCK
                }
            })
            .collect();
        v.dedup();
        v
    }

    /// A random block in cylinder `cyl` (within the image).
    fn in_cylinder(&self, cyl: u64, rng: &mut ChaCha8Rng) -> Option<u64> {
        let (g, off) = self.geo.as_ref()?;
        let first = first_lba(g, cyl) * SECTOR;
        let end = first_lba(g, cyl + 1) * SECTOR;
        let lo = first.max(*off).saturating_sub(*off).next_multiple_of(BLOCK);
        let hi = end.saturating_sub(*off).min(self.size);
        if hi < lo + BLOCK {
            return None;
        }
        Some(rng.gen_range(lo / BLOCK..hi / BLOCK) * BLOCK)
    }

    /// A random block.
    pub fn random(&self, rng: &mut ChaCha8Rng) -> u64 {
        rng.gen_range(0..=self.last_block() / BLOCK) * BLOCK
    }

    /// A block `d` away from `cur` (either way, as fits), if one fits.
    fn step(&self, cur: u64, d: u64, rng: &mut ChaCha8Rng) -> Option<u64> {
        match (self.cylinders(), &self.geo) {
            (Some((lo, hi)), Some((g, off))) => {
                let c = Placement::cylinder(g, *off, cur);
                let mut ways = Vec::new();
                if c + d <= hi {
                    ways.push(c + d);
                }
                if c >= lo + d {
                    ways.push(c - d);
                }
                let to = *ways.get(rng.gen_range(0..ways.len().max(1)))?;
                self.in_cylinder(to, rng)
            }
            _ => {
                let mut ways = Vec::new();
                if cur + d <= self.last_block() {
                    ways.push(cur + d);
                }
                if cur >= d {
                    ways.push(cur - d);
                }
                ways.get(rng.gen_range(0..ways.len().max(1))).copied()
            }
        }
    }

    /// A block from which a step of `d` fits.
    fn start_for(&self, d: u64, rng: &mut ChaCha8Rng) -> Option<u64> {
        match self.cylinders() {
            Some((lo, hi)) => {
                let c = rng.gen_range(lo..=hi.checked_sub(d)?.max(lo));
                self.in_cylinder(c, rng)
            }
            None => {
                let top = self.last_block().checked_sub(d)?;
                Some(rng.gen_range(0..=top / BLOCK) * BLOCK)
            }
        }
    }

    /// A same-track pair near `near`: (first, second, phase). By geometry: a block on one
    /// track, then one at least a block before it on the same track; the phase is the
    /// fraction of a revolution from the end of the first round to the second. Without: two
    /// blocks within [`WINDOW`], the second before the first.
    fn same_track(&self, near: u64, rng: &mut ChaCha8Rng) -> Option<(u64, u64, Option<f64>)> {
        let Some((g, off)) = &self.geo else {
            let first = rng.gen_range(WINDOW / BLOCK..self.last_block() / BLOCK) * BLOCK;
            let back = rng.gen_range(1..WINDOW / BLOCK) * BLOCK;
            return Some((first, first.checked_sub(back)?, None));
        };
        // Keep near the last pair: the first read's seek is short.
        let span = 32u64 << 20;
        let at = near.saturating_sub(span / 2) + rng.gen_range(0..span);
        let at = at.min(self.last_block()) / BLOCK * BLOCK;
        let loc = g.locate((at + off) / SECTOR);
        let track = (at + off) / SECTOR - loc.sector;
        let spt = loc.spt;
        if spt < 64 {
            return None;
        }
        // The first read ends an eighth of a track before the track's end: the read-ahead
        // running on after it must not reach the next track before the second read comes (a
        // head switch would add to the wait).
        let top = spt - 8 - spt / 8;
        let k = rng.gen_range(8..=top - 16);
        let s1 = rng.gen_range(k + 8..=top);
        let align = |s: u64| {
            ((track + s) * SECTOR)
                .checked_sub(*off)
                .map(|b| b / BLOCK * BLOCK)
        };
        let (a, b) = (align(s1)?, align(s1 - k)?);
        let same = |x: u64| {
            let l = g.locate((x + off) / SECTOR);
            l.cylinder == loc.cylinder && l.head == loc.head
        };
        if a > self.last_block() || !same(a) || !same(b) || a == b {
            return None;
        }
        let s_of = |x: u64| (x + off) / SECTOR - track;
        let gap = s_of(a) + BLOCK / SECTOR - s_of(b);
        Some((a, b, Some(1.0 - gap as f64 / spt as f64)))
    }
}

/// The first logical block of cylinder `cyl` (the disk's end past the last).
fn first_lba(g: &Geometry, cyl: u64) -> u64 {
    let (mut lo, mut hi) = (0, g.sectors());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if g.locate(mid).cylinder < cyl {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The seek-curve benchmark for `ns` on the reader's clock: the distances in turn, each from
/// where the heads are if it fits, else from a positioning read.
pub fn seek_curve(
    r: &mut dyn Reader,
    place: &Placement,
    ns: u64,
    rng: &mut ChaCha8Rng,
) -> Result<PairRun> {
    let distances = place.distances();
    let mut run = PairRun {
        distances: distances.clone(),
        by_cylinders: place.geo.is_some(),
        reads: Vec::new(),
    };
    if distances.is_empty() {
        return Ok(run);
    }
    let end = r.now_ns() + ns;
    let mut cur = place.random(rng);
    let mut push = |r: &mut dyn Reader, from, offset, class| -> Result<()> {
        let ns = r.read(offset)?;
        run.reads.push(PairRead {
            from,
            offset,
            class,
            phase: None,
            ns,
        });
        Ok(())
    };
    push(r, cur, cur, None)?;
    let (mut i, mut misses) = (0usize, 0u32);
    while r.now_ns() < end && misses < MAX_MISSES {
        let class = i % distances.len();
        let d = distances[class];
        let to = match place.step(cur, d, rng) {
            Some(to) => to,
            None => {
                let Some(from) = place.start_for(d, rng) else {
                    misses += 1;
                    i += 1;
                    continue;
                };
                push(r, cur, from, None)?;
                cur = from;
                match place.step(cur, d, rng) {
                    Some(to) => to,
                    None => {
                        misses += 1;
                        continue;
                    }
                }
            }
        };
        push(r, cur, to, Some(class))?;
        cur = to;
        i += 1;
        misses = 0;
    }
    Ok(run)
}

/// The same-track benchmark for `ns` on the reader's clock.
pub fn same_track(
    r: &mut dyn Reader,
    place: &Placement,
    ns: u64,
    rng: &mut ChaCha8Rng,
) -> Result<PairRun> {
    let mut run = PairRun {
        distances: vec![0, 0],
        by_cylinders: place.geo.is_some(),
        reads: Vec::new(),
    };
    let end = r.now_ns() + ns;
    let mut near = place.random(rng);
    let mut last = near;
    let mut misses = 0u32;
    while r.now_ns() < end && misses < MAX_MISSES {
        let Some((a, b, phase)) = place.same_track(near, rng) else {
            misses += 1;
            near = place.random(rng);
            continue;
        };
        misses = 0;
        let t1 = r.read(a)?;
        let t2 = r.read(b)?;
        let t3 = r.read(b + BLOCK)?;
        run.reads.push(PairRead {
            from: last,
            offset: a,
            class: None,
            phase: None,
            ns: t1,
        });
        run.reads.push(PairRead {
            from: a,
            offset: b,
            class: Some(0),
            phase,
            ns: t2,
        });
        run.reads.push(PairRead {
            from: b,
            offset: b + BLOCK,
            class: Some(FOLLOW_ON),
            phase: None,
            ns: t3,
        });
        last = b + BLOCK;
        near = b;
    }
    Ok(run)
}

/// The model's times for the same reads, in order (ns), on a virtual clock.
pub fn replay(model: DeviceModel, reads: &[PairRead]) -> Vec<u64> {
    let mut m = ModelReader::new(model);
    reads
        .iter()
        .map(|p| m.read(p.offset).unwrap_or(0))
        .collect()
}

/// One distance of the seek curve, measured and modelled.
#[derive(Debug, Clone, Serialize)]
pub struct SeekPoint {
    /// Mean distance of the pairs, MB (10^6 bytes).
    pub distance_mb: f64,
    /// Mean distance in the model's cylinders (with a model).
    pub cylinders: Option<f64>,
    pub pairs: u64,
    /// Mean time of the second read, ms.
    pub measured_ms: f64,
    /// The model's mean for the same requests, ms.
    pub modelled_ms: Option<f64>,
    /// measured / modelled − 1.
    pub error: Option<f64>,
}

/// The same-track reads, measured and modelled.
#[derive(Debug, Clone, Serialize)]
pub struct SameTrack {
    pub pairs: u64,
    /// Whether the pairs were placed on tracks by the model's geometry (else within 256 KiB).
    pub by_geometry: bool,
    /// Mean time of the second read, ms.
    pub mean_ms: f64,
    pub modelled_mean_ms: Option<f64>,
    /// The revolution estimated from the second reads' times, ms (see [`revolution_ns`]).
    pub revolution_ms: Option<f64>,
    /// The same estimate from the model's times for the same requests, ms.
    pub modelled_revolution_ms: Option<f64>,
    /// measured / modelled revolution − 1.
    pub error: Option<f64>,
    /// The third reads (the block after the second, from the read-ahead), median, ms:
    /// command overhead and link transfer.
    pub follow_on_ms: Option<f64>,
    pub modelled_follow_on_ms: Option<f64>,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
        _ => None,
    }
}

/// The seek-curve table: per distance, mean measured and (with `modelled`, the replayed times
/// of every read in order) modelled time of the second reads.
pub fn seek_points(run: &PairRun, modelled: Option<&[u64]>, place: &Placement) -> Vec<SeekPoint> {
    (0..run.distances.len())
        .filter_map(|k| {
            let idx: Vec<usize> = (0..run.reads.len())
                .filter(|&i| run.reads[i].class == Some(k))
                .collect();
            if idx.is_empty() {
                return None;
            }
            let rd = |i: &usize| run.reads[*i];
            let measured = mean(idx.iter().map(|i| rd(i).ns as f64 / 1e6))?;
            let modelled_ms = modelled.and_then(|m| mean(idx.iter().map(|&i| m[i] as f64 / 1e6)));
            Some(SeekPoint {
                distance_mb: mean(idx.iter().map(|i| rd(i).from.abs_diff(rd(i).offset) as f64))?
                    / 1e6,
                cylinders: place.geo.as_ref().and_then(|(g, off)| {
                    mean(idx.iter().map(|i| {
                        let a = Placement::cylinder(g, *off, rd(i).from);
                        let b = Placement::cylinder(g, *off, rd(i).offset);
                        a.abs_diff(b) as f64
                    }))
                }),
                pairs: idx.len() as u64,
                measured_ms: measured,
                modelled_ms,
                error: ratio(Some(measured), modelled_ms),
            })
        })
        .collect()
}

/// The revolution from same-track second reads `(phase, ns)`: with phases (placed by
/// geometry), the slope of time against phase over pairs well clear of the wrap-around (time
/// = fixed part + phase × revolution), refitted without the pairs far off the line (reads the
/// cache held, or the host delayed); without phases, the spread of the middle 95% of the times
/// over 0.95 (times uniform over one revolution). None with fewer than 20 pairs.
pub fn revolution_ns(pairs: &[(Option<f64>, f64)]) -> Option<f64> {
    let mut with: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|&(p, t)| p.filter(|p| (0.2..=0.95).contains(p)).map(|p| (p, t)))
        .collect();
    if with.len() >= 20 {
        for _ in 0..2 {
            let (a, b) = slope(&with)?;
            let mut res: Vec<f64> = with.iter().map(|(x, y)| (y - a - b * x).abs()).collect();
            res.sort_by(f64::total_cmp);
            let cut = (3.0 * res[res.len() / 2]).max(0.02 * b.abs());
            with.retain(|(x, y)| (y - a - b * x).abs() <= cut);
            if with.len() < 20 {
                return None;
            }
        }
        return slope(&with).map(|(_, b)| b).filter(|b| *b > 0.0);
    }
    if pairs.len() < 20 {
        return None;
    }
    let mut t: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    t.sort_by(f64::total_cmp);
    let q = |p: f64| t[((p * t.len() as f64) as usize).min(t.len() - 1)];
    Some((q(0.975) - q(0.025)) / 0.95)
}

/// Least squares y = a + b·x: (a, b).
fn slope(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let mx = mean(pts.iter().map(|v| v.0))?;
    let my = mean(pts.iter().map(|v| v.1))?;
    let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    (sxx > 0.0).then(|| (my - sxy / sxx * mx, sxy / sxx))
}

/// The same-track summary, from the run and (with a model) its replayed times.
pub fn same_track_summary(run: &PairRun, modelled: Option<&[u64]>) -> Option<SameTrack> {
    let idx: Vec<usize> = (0..run.reads.len())
        .filter(|&i| run.reads[i].class == Some(0))
        .collect();
    let pairs = |times: &dyn Fn(usize) -> u64| -> Vec<(Option<f64>, f64)> {
        idx.iter()
            .map(|&i| (run.reads[i].phase, times(i) as f64))
            .collect()
    };
    let measured = pairs(&|i| run.reads[i].ns);
    let mean_ms = mean(measured.iter().map(|p| p.1 / 1e6))?;
    let rev = revolution_ns(&measured).map(|r| r / 1e6);
    let model = modelled.map(|m| pairs(&|i| m[i]));
    let mrev = model
        .as_ref()
        .and_then(|m| revolution_ns(m))
        .map(|r| r / 1e6);
    Some(SameTrack {
        pairs: idx.len() as u64,
        by_geometry: run.by_cylinders,
        mean_ms,
        modelled_mean_ms: model
            .as_ref()
            .and_then(|m| mean(m.iter().map(|p| p.1 / 1e6))),
        revolution_ms: rev,
        modelled_revolution_ms: mrev,
        error: ratio(rev, mrev),
        follow_on_ms: follow_on(run, &|i| run.reads[i].ns).map(|t| t / 1e6),
        modelled_follow_on_ms: modelled
            .and_then(|m| follow_on(run, &|i| m[i]))
            .map(|t| t / 1e6),
    })
}

/// The same-track run's third reads at quantile `q` (of their times by `times`), ns.
pub fn follow_on_quantile(run: &PairRun, times: &dyn Fn(usize) -> u64, q: f64) -> Option<f64> {
    let mut t: Vec<u64> = (0..run.reads.len())
        .filter(|&i| run.reads[i].class == Some(FOLLOW_ON))
        .map(times)
        .collect();
    t.sort_unstable();
    let i = ((q * t.len() as f64) as usize).min(t.len().checked_sub(1)?);
    Some(t[i] as f64)
}

fn follow_on(run: &PairRun, times: &dyn Fn(usize) -> u64) -> Option<f64> {
    follow_on_quantile(run, times, 0.5)
}
