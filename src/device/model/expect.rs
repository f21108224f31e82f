//! What the model predicts for the micro-benchmarks `devices check` runs, computed from the
//! geometry and seek curve rather than simulated, and the demerit figure that compares two
//! service-time distributions (Ruemmler & Wilkes 1994: the root-mean-square horizontal
//! distance between the two cumulative distributions, as a fraction of the mean measured
//! service time).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::{DeviceModel, Request, SECTOR};
use crate::device::profile::{Ablations, Params, Profile};

/// The model's expectations for a profile (with its ablations).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectations {
    /// Read seek averaged over all cylinder pairs, ms (the datasheets' definition).
    pub average_seek_ms: Option<f64>,
    /// Read seek averaged over pairs of random blocks, ms: lower than the above, as the outer
    /// zones hold more blocks per cylinder.
    pub random_block_seek_ms: Option<f64>,
    /// Average rotational latency, ms (half a revolution).
    pub rotational_latency_ms: Option<f64>,
    /// Mean service time of 4 KiB reads at random places over the whole disk, one at a time, ms.
    pub qd1_random_4k_read_ms: f64,
    /// The same over the first 1% of the disk, ms.
    pub qd1_random_4k_read_1pct_ms: f64,
    /// Sequential 1 MiB reads one at a time at the start (outer zone) of the disk, MB/s
    /// (10^6 B/s): the media rate for a disk (its read-ahead streams), latency plus bandwidth
    /// for an SSD; None for `ram` (unbounded).
    pub outer_mb_s: Option<f64>,
    /// Sequential read rate at the end (inner zone), MB/s.
    pub inner_mb_s: Option<f64>,
    /// Cylinders modelled.
    pub cylinders: Option<u64>,
    /// Seek distance where the curve turns from √ to linear, cylinders.
    pub seek_boundary_cylinders: Option<f64>,
    /// Sectors per track in the outermost and innermost zones.
    pub sectors_per_track: Option<(u64, u64)>,
}

/// Quantile points used for the expectations over random blocks.
const GRID: usize = 1024;

/// Computes the expectations of a profile under its ablations.
pub fn expectations(profile: &Profile, abl: &Ablations) -> Result<Expectations, String> {
    let model = DeviceModel::new(profile, abl)?;
    if let Some(ns) = abl.constant_ns {
        let ms = ns as f64 / 1e6;
        let rate = (1u64 << 20) as f64 / (ns as f64 / 1e9) / 1e6;
        return Ok(Expectations {
            average_seek_ms: None,
            random_block_seek_ms: None,
            rotational_latency_ms: None,
            qd1_random_4k_read_ms: ms,
            qd1_random_4k_read_1pct_ms: ms,
            outer_mb_s: Some(rate),
            inner_mb_s: Some(rate),
            cylinders: None,
            seek_boundary_cylinders: None,
            sectors_per_track: None,
        });
    }
    let none = Expectations {
        average_seek_ms: None,
        random_block_seek_ms: None,
        rotational_latency_ms: None,
        qd1_random_4k_read_ms: 0.0,
        qd1_random_4k_read_1pct_ms: 0.0,
        outer_mb_s: None,
        inner_mb_s: None,
        cylinders: None,
        seek_boundary_cylinders: None,
        sectors_per_track: None,
    };
    match (&profile.params, model.hdd()) {
        (Params::Ram, _) => Ok(none),
        (Params::Ssd(p), _) => {
            // A 1 MiB read: the 4K latency, then the rest at the read bandwidth.
            let mib = (1u64 << 20) as f64;
            let secs = p.read_latency_us / 1e6 + (mib - 4096.0) / (p.read_mb_s * 1e6);
            Ok(Expectations {
                qd1_random_4k_read_ms: p.read_latency_us / 1e3,
                qd1_random_4k_read_1pct_ms: p.read_latency_us / 1e3,
                outer_mb_s: Some(mib / secs / 1e6),
                inner_mb_s: Some(mib / secs / 1e6),
                ..none
            })
        }
        (Params::Hdd(p), Some(h)) => {
            let geo = h.geometry();
            let seek = h.seek_curve();
            let rot = if abl.no_rotation {
                0.0
            } else {
                geo.rev_ns / 2.0
            };
            let qd1 = |span: f64| {
                let sectors = (geo.sectors() as f64 * span).max(1.0);
                let lbas: Vec<u64> = (0..GRID)
                    .map(|i| ((i as f64 + 0.5) / GRID as f64 * sectors) as u64)
                    .collect();
                let cyls: Vec<u64> = lbas.iter().map(|&l| geo.locate(l).cylinder).collect();
                let mut sum = 0.0;
                for i in 0..GRID {
                    for j in (i + 1)..GRID {
                        sum += seek.time(cyls[i].abs_diff(cyls[j]));
                    }
                }
                let mean_seek = 2.0 * sum / (GRID * GRID) as f64;
                let n = 4096 / SECTOR;
                let xfer: f64 = lbas
                    .iter()
                    .map(|&l| {
                        let loc = geo.locate(l);
                        let per = geo.rev_ns / loc.spt as f64;
                        // A read crossing a track end pays a switch (probability (n−1)/spt).
                        let cross = (n - 1) as f64 / loc.spt as f64 * geo.head_switch_ns;
                        n as f64 * per + cross
                    })
                    .sum::<f64>()
                    / GRID as f64;
                let link_sector = h.link_ns(SECTOR);
                let ns = p.overhead_ms * 1e6 + mean_seek + rot + xfer + link_sector;
                (ns / 1e6, mean_seek / 1e6)
            };
            let (full, full_seek) = qd1(1.0);
            let (one, _) = qd1(0.01);
            let link = p.link_mb_s;
            Ok(Expectations {
                average_seek_ms: Some(seek.mean_uniform() / 1e6),
                random_block_seek_ms: Some(full_seek),
                rotational_latency_ms: Some(rot / 1e6),
                qd1_random_4k_read_ms: full,
                qd1_random_4k_read_1pct_ms: one,
                outer_mb_s: Some((geo.zone_rate(0) / 1e6).min(link)),
                inner_mb_s: Some((geo.zone_rate(geo.sectors() - 1) / 1e6).min(link)),
                cylinders: Some(geo.cylinders()),
                seek_boundary_cylinders: Some(seek.boundary()),
                sectors_per_track: Some(geo.spt_range()),
            })
        }
        (Params::Hdd(_), None) => Ok(none),
    }
}

/// Service times (ns) of `n` 4 KiB reads at random 4 KiB-aligned places in the first `span`
/// (a fraction) of the disk, one at a time, each issued as the previous completes, on the
/// virtual clock: the modelled distribution `devices check` compares a measured one with.
pub fn random_read_service(
    profile: &Profile,
    abl: &Ablations,
    n: usize,
    span: f64,
    seed: u64,
) -> Result<Vec<u64>, String> {
    let mut m = DeviceModel::new(profile, abl)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let blocks = ((profile.capacity_bytes as f64 * span) as u64 / 4096).max(1);
    let mut t = 0u64;
    let mut out = Vec::with_capacity(n);
    for id in 0..n as u64 {
        let off = rng.gen_range(0..blocks) * 4096;
        let d = m.service(Request::read(id, off, 4096), t);
        out.push(d.service_ns());
        t = d.done_ns;
    }
    Ok(out)
}

/// Ruemmler & Wilkes's demerit: the root-mean-square horizontal distance between the
/// cumulative distributions of `measured` and `modelled` service times, divided by the mean
/// measured service time. 0 for identical distributions; their validated model reached a few
/// percent. None when either sample is empty or the measured mean is 0.
pub fn demerit(measured: &[f64], modelled: &[f64]) -> Option<f64> {
    if measured.is_empty() || modelled.is_empty() {
        return None;
    }
    let mut a = measured.to_vec();
    let mut b = modelled.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let q = |v: &[f64], p: f64| v[((p * v.len() as f64) as usize).min(v.len() - 1)];
    let points = a.len().max(b.len()).clamp(100, 10_000);
    let mut sq = 0.0;
    for k in 0..points {
        let p = (k as f64 + 0.5) / points as f64;
        let d = q(&a, p) - q(&b, p);
        sq += d * d;
    }
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    (mean > 0.0).then(|| (sq / points as f64).sqrt() / mean)
}
