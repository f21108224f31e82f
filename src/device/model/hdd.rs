//! A rotating disk: zoned geometry, the seek curve, rotational position against the clock,
//! transfers across track and cylinder switches, read-ahead segments and a write-back cache
//! destaged in elevator order.
//!
//! The mechanics follow Ruemmler & Wilkes, "An introduction to disk drive modeling" (IEEE
//! Computer, 1994): seek time √ of the distance for short seeks and linear for long ones (as the
//! Dartmouth HP 97560 model, 3.24 + 0.400·√d ms up to 383 cylinders, then 8.00 + 0.008·d ms),
//! the angle under the head a function of absolute time, track skew so that a sequential
//! transfer loses exactly a head or cylinder switch at a track's end.

use std::collections::BTreeMap;

use super::params::HddParams;
use super::request::{Breakdown, CacheEvent, CacheSink, Op, Request, SECTOR};
use crate::device::ablation::Ablations;

/// A recording zone: cylinders with the same number of sectors per track.
#[derive(Debug, Clone)]
struct Zone {
    first_lba: u64,
    first_cyl: u64,
    spt: u64,
}

/// Where a sector is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub zone: usize,
    pub cylinder: u64,
    pub head: u64,
    pub sector: u64,
    /// Sectors on this track.
    pub spt: u64,
}

/// Zoned geometry: logical block → zone, cylinder, head, sector, angle.
#[derive(Debug, Clone)]
pub struct Geometry {
    heads: u64,
    zones: Vec<Zone>,
    cylinders: u64,
    sectors: u64,
    /// One revolution, ns.
    pub rev_ns: f64,
    pub head_switch_ns: f64,
    pub cyl_switch_ns: f64,
}

/// Sectors per track giving a sustained rate (MB/s) with the switch times, as Hitachi's
/// specifications define sustained rate: 512·sectors per cylinder / ((H−1)·head switch +
/// cylinder switch + H·revolution).
fn spt_for(rate_mb_s: f64, heads: f64, rev_s: f64, hs_s: f64, cs_s: f64) -> f64 {
    rate_mb_s * 1e6 * ((heads - 1.0) * hs_s + cs_s + heads * rev_s) / (heads * SECTOR as f64)
}

impl Geometry {
    /// Builds the zones: equal numbers of cylinders per zone, sectors per track falling linearly
    /// from the outer to the inner zone's rate; as many cylinders as the capacity needs.
    pub fn new(p: &HddParams, capacity_bytes: u64) -> Result<Geometry, String> {
        let rev_s = 60.0 / p.rpm;
        let h = f64::from(p.heads.max(1));
        let hs = p.head_switch_ms / 1e3;
        let cs = p.cylinder_switch_ms / 1e3;
        let outer = spt_for(p.outer_mb_s, h, rev_s, hs, cs).round();
        let inner = spt_for(p.inner_mb_s, h, rev_s, hs, cs).round();
        if inner < 1.0 {
            return Err(format!(
                "inner_mb_s: {} MB/s gives less than one sector per track at {} rpm",
                p.inner_mb_s, p.rpm
            ));
        }
        let nz = u64::from(p.zones.max(1));
        let spts: Vec<u64> = (0..nz)
            .map(|z| {
                let f = if nz == 1 {
                    0.0
                } else {
                    z as f64 / (nz - 1) as f64
                };
                (outer + (inner - outer) * f).round().max(1.0) as u64
            })
            .collect();
        let sectors = capacity_bytes / SECTOR;
        let per_cyl_all: u64 = spts.iter().sum::<u64>() * p.heads.max(1) as u64;
        let cyls_per_zone = sectors.div_ceil(per_cyl_all).max(1);
        let mut zones = Vec::new();
        let mut lba = 0;
        for (z, &spt) in spts.iter().enumerate() {
            if lba >= sectors {
                break;
            }
            zones.push(Zone {
                first_lba: lba,
                first_cyl: z as u64 * cyls_per_zone,
                spt,
            });
            lba += cyls_per_zone * spt * p.heads.max(1) as u64;
        }
        let heads = u64::from(p.heads.max(1));
        let mut g = Geometry {
            heads,
            zones,
            cylinders: 0,
            sectors,
            rev_ns: rev_s * 1e9,
            head_switch_ns: hs * 1e9,
            cyl_switch_ns: cs * 1e9,
        };
        g.cylinders = g.locate(sectors.saturating_sub(1)).cylinder + 1;
        Ok(g)
    }

    /// Cylinders in use.
    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }

    /// Sectors modelled.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Heads.
    pub fn heads(&self) -> u64 {
        self.heads
    }

    /// Sectors per track of the outermost and the innermost zone in use.
    pub fn spt_range(&self) -> (u64, u64) {
        let first = self.zones.first().map_or(1, |z| z.spt);
        let last = self.zones.last().map_or(1, |z| z.spt);
        (first, last)
    }

    /// Where logical block `lba` is (clamped to the last sector).
    pub fn locate(&self, lba: u64) -> Location {
        let lba = lba.min(self.sectors.saturating_sub(1));
        let zi = self
            .zones
            .partition_point(|z| z.first_lba <= lba)
            .saturating_sub(1);
        let z = &self.zones[zi.min(self.zones.len() - 1)];
        let rel = lba - z.first_lba;
        let track = rel / z.spt;
        Location {
            zone: zi,
            cylinder: z.first_cyl + track / self.heads,
            head: track % self.heads,
            sector: rel % z.spt,
            spt: z.spt,
        }
    }

    /// Track skew of (cylinder, head) as a fraction of a revolution: each head switch and each
    /// cylinder switch shifts sector 0 by the switch time, so a sequential transfer finds the
    /// next track's first sector under the head as the switch ends.
    fn skew(&self, cyl: u64, head: u64) -> f64 {
        let per_cyl = (self.heads - 1) as f64 * self.head_switch_ns + self.cyl_switch_ns;
        let ns = cyl as f64 * per_cyl + head as f64 * self.head_switch_ns;
        (ns / self.rev_ns).fract()
    }

    /// The angle (fraction of a revolution) at which sector `loc` starts.
    pub fn angle(&self, loc: &Location) -> f64 {
        (loc.sector as f64 / loc.spt as f64 + self.skew(loc.cylinder, loc.head)).fract()
    }

    /// The angle under the heads at absolute time `t_ns`.
    pub fn angle_at(&self, t_ns: f64) -> f64 {
        (t_ns / self.rev_ns).fract()
    }

    /// Reads on from the start of sector `lba`: up to `max_sectors` sectors or until `max_ns`
    /// have passed, crossing track ends with a head or cylinder switch. Returns the sectors
    /// done and the time used.
    pub fn walk(&self, lba: u64, max_sectors: u64, max_ns: f64) -> (u64, f64) {
        let mut done = 0u64;
        let mut used = 0.0f64;
        let mut at = lba;
        while done < max_sectors && at < self.sectors {
            let loc = self.locate(at);
            let per = self.rev_ns / loc.spt as f64;
            let on_track = (loc.spt - loc.sector).min(max_sectors - done);
            let t = on_track as f64 * per;
            if used + t > max_ns {
                let part = ((max_ns - used) / per).floor().max(0.0) as u64;
                return (done + part.min(on_track), used + part as f64 * per);
            }
            used += t;
            done += on_track;
            at += on_track;
            if done >= max_sectors || at >= self.sectors {
                break;
            }
            let next = self.locate(at);
            let switch = if next.cylinder != loc.cylinder {
                self.cyl_switch_ns
            } else {
                self.head_switch_ns
            };
            if used + switch > max_ns {
                return (done, used);
            }
            used += switch;
        }
        (done, used)
    }

    /// The sustained media rate (bytes/s) of the zone holding `lba`: a cylinder's data over
    /// its revolutions and switches.
    pub fn zone_rate(&self, lba: u64) -> f64 {
        let loc = self.locate(lba);
        let h = self.heads as f64;
        let bytes = h * loc.spt as f64 * SECTOR as f64;
        let ns = h * self.rev_ns + (h - 1.0) * self.head_switch_ns + self.cyl_switch_ns;
        bytes / (ns / 1e9)
    }
}

/// Seek time from cylinder distance: t(d) = a + b·√d up to a boundary, then the tangent line
/// (c + e·d), fitted so that t(1) is the track-to-track time, t(D) the full stroke and the mean
/// over all cylinder pairs the average seek (the datasheets' weighted average, Hitachi's
/// specifications §4.5.2: Σ (max + 1 − n)·T(n) / Σ (max + 1 − n)).
#[derive(Debug, Clone, Copy)]
pub struct SeekCurve {
    a: f64,
    b: f64,
    boundary: f64,
    c: f64,
    e: f64,
    max_d: f64,
}

impl SeekCurve {
    fn with_boundary(tt: f64, full: f64, d_max: f64, x: f64) -> SeekCurve {
        let sx = x.sqrt();
        let b = (full - tt) / (sx - 1.0 + (d_max - x) / (2.0 * sx));
        let a = tt - b;
        let e = b / (2.0 * sx);
        let c = a + b * sx - e * x;
        SeekCurve {
            a,
            b,
            boundary: x,
            c,
            e,
            max_d: d_max,
        }
    }

    /// The averages a √-then-linear curve through track-to-track `tt_ns` and full stroke
    /// `full_ns` over `cylinders` can reach, ns (all √, all linear): the range an
    /// `average_seek_ms` must fall in.
    pub fn average_range(tt_ns: f64, full_ns: f64, cylinders: u64) -> (f64, f64) {
        let d_max = (cylinders.max(3) - 1) as f64;
        let mean_of = |x: f64| SeekCurve::with_boundary(tt_ns, full_ns, d_max, x).mean_uniform();
        (mean_of(1.0), mean_of(d_max))
    }

    /// Fits the curve to the profile's three read-seek figures over `cylinders`.
    pub fn fit(p: &HddParams, cylinders: u64) -> Result<SeekCurve, String> {
        let d_max = (cylinders.max(3) - 1) as f64;
        let (tt, avg, full) = (
            p.track_to_track_ms * 1e6,
            p.average_seek_ms * 1e6,
            p.full_stroke_ms * 1e6,
        );
        let mean_of = |x: f64| SeekCurve::with_boundary(tt, full, d_max, x).mean_uniform();
        let (lo, hi) = (mean_of(1.0), mean_of(d_max));
        // Within 1% of an end, take the end: datasheet figures are rounded.
        if avg > hi * 1.01 || avg < lo * 0.99 {
            return Err(format!(
                "average_seek_ms: {} ms cannot be reached with track_to_track_ms {} and full_stroke_ms {} over {cylinders} cylinders: a √-then-linear seek curve averages {:.2} to {:.2} ms; change full_stroke_ms or average_seek_ms",
                p.average_seek_ms, p.track_to_track_ms, p.full_stroke_ms, lo / 1e6, hi / 1e6
            ));
        }
        let (mut l, mut h) = (1.0f64, d_max);
        if avg >= hi {
            return Ok(SeekCurve::with_boundary(tt, full, d_max, d_max));
        }
        if avg <= lo {
            return Ok(SeekCurve::with_boundary(tt, full, d_max, 1.0));
        }
        for _ in 0..100 {
            let m = (l * h).sqrt();
            if mean_of(m) < avg {
                l = m;
            } else {
                h = m;
            }
        }
        Ok(SeekCurve::with_boundary(tt, full, d_max, (l * h).sqrt()))
    }

    /// A curve that costs nothing (`seek=off`).
    pub fn zero() -> SeekCurve {
        SeekCurve {
            a: 0.0,
            b: 0.0,
            boundary: 1.0,
            c: 0.0,
            e: 0.0,
            max_d: 1.0,
        }
    }

    /// Read seek time over `d` cylinders, ns.
    pub fn time(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let d = d as f64;
        if d < self.boundary {
            self.a + self.b * d.sqrt()
        } else {
            self.c + self.e * d
        }
    }

    /// The distance where the curve turns linear, in cylinders.
    pub fn boundary(&self) -> f64 {
        self.boundary
    }

    /// Mean seek time over uniformly random cylinder pairs (density 2(D−d)/D²), ns; integrated
    /// in u = √(d/D) so the √ part is smooth (Simpson's rule).
    pub fn mean_uniform(&self) -> f64 {
        let n = 4096;
        let d_max = self.max_d;
        let f = |u: f64| {
            let d = d_max * u * u;
            let t = if d < self.boundary {
                self.a + self.b * d.sqrt()
            } else {
                self.c + self.e * d
            };
            t * 2.0 * (1.0 - u * u) * 2.0 * u
        };
        let h = 1.0 / n as f64;
        let mut s = f(0.0) + f(1.0);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0
    }
}

/// A read-ahead segment: a run of blocks in the cache, growing while the drive prefetches.
#[derive(Debug, Clone)]
struct Segment {
    start: u64,
    /// End of the valid blocks when prefetch stopped (or of the read, while it runs).
    end: u64,
    /// Prefetch running since this time (ns) from `end`, up to `limit`.
    prefetch_from: Option<f64>,
    limit: u64,
    used_ns: u64,
}

/// The disk's state: heads, clock-bound mechanism, cache.
#[derive(Debug, Clone)]
pub struct Hdd {
    p: HddParams,
    abl: Ablations,
    geo: Geometry,
    seek: SeekCurve,
    /// Where the heads are.
    cyl: u64,
    head: u64,
    head_lba: u64,
    /// The mechanism is busy (a transfer or a destage) until then, ns.
    media_free: f64,
    /// The interface takes the next command from then, ns.
    iface_free: u64,
    segments: Vec<Segment>,
    /// Dirty runs in the write-back cache: start → (sectors, time written).
    dirty: BTreeMap<u64, (u64, f64)>,
    dirty_sectors: u64,
    /// Cylinders moved by the last media operation.
    last_seek: u64,
    /// What became of each write's data, when asked for (a write log).
    pub(super) events: CacheSink,
}

const DESTAGE_CHUNK: u64 = 2048; // sectors (1 MiB) per destage operation

impl Hdd {
    /// A disk of `capacity` bytes in its initial state: heads at cylinder 0, cache empty.
    pub fn new(p: &HddParams, capacity: u64, abl: Ablations) -> Result<Hdd, String> {
        let geo = Geometry::new(p, capacity)?;
        let seek = if abl.no_seek {
            SeekCurve::zero()
        } else {
            SeekCurve::fit(p, geo.cylinders())?
        };
        Ok(Hdd {
            p: p.clone(),
            abl,
            geo,
            seek,
            cyl: 0,
            head: 0,
            head_lba: 0,
            media_free: 0.0,
            iface_free: 0,
            segments: Vec::new(),
            dirty: BTreeMap::new(),
            dirty_sectors: 0,
            last_seek: 0,
            events: CacheSink::default(),
        })
    }

    /// The zoned geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The fitted seek curve (zero under `seek=off`).
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    fn cache_on(&self) -> bool {
        !self.abl.no_cache && self.p.cache_bytes > 0
    }

    fn overhead_ns(&self) -> f64 {
        self.p.overhead_ms * 1e6
    }

    /// Time to move `bytes` over the host link, ns.
    pub fn link_ns(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.p.link_mb_s * 1e6) * 1e9
    }

    /// Positioning from the current heads to `loc` when the seek starts at `t`: (seek,
    /// rotational latency), ns.
    fn position(&self, loc: &Location, t: f64, write: bool) -> (f64, f64) {
        let d = self.cyl.abs_diff(loc.cylinder);
        let mut seek = if d > 0 {
            self.seek.time(d)
        } else if loc.head != self.head && !self.abl.no_seek {
            self.geo.head_switch_ns
        } else {
            0.0
        };
        if write && seek > 0.0 {
            seek += self.p.write_settle_ms * 1e6;
        }
        let rot = if self.abl.no_rotation {
            0.0
        } else {
            let frac = (self.geo.angle(loc) - self.geo.angle_at(t + seek)).rem_euclid(1.0);
            // A sector exactly under the heads is not a revolution away (rounding in the
            // angles is far below a nanosecond's worth).
            if frac > 1.0 - 1e-6 {
                0.0
            } else {
                frac * self.geo.rev_ns
            }
        };
        (seek, rot)
    }

    /// Estimated positioning time for `req` if the drive started it at `t` (for SPTF).
    pub fn positioning_ns(&self, req: &Request, t: u64) -> u64 {
        let loc = self.geo.locate(req.offset / SECTOR);
        let t0 = t as f64 + self.overhead_ns();
        let (s, r) = self.position(&loc, t0.max(self.media_free), req.op == Op::Write);
        (s + r) as u64
    }

    /// The block under the heads (for C-LOOK).
    pub fn head_lba(&self) -> u64 {
        self.head_lba
    }

    /// When the interface takes the next command.
    pub fn free_at(&self) -> u64 {
        self.iface_free
    }

    /// One media operation (seek, rotation, transfer) starting no earlier than `t`; moves the
    /// heads. Returns (media start, seek, rotation, transfer, end).
    fn media_op(
        &mut self,
        lba: u64,
        sectors: u64,
        t: f64,
        write: bool,
    ) -> (f64, f64, f64, f64, f64) {
        let m = t.max(self.media_free);
        self.stop_prefetch(m);
        let loc = self.geo.locate(lba);
        self.last_seek = self.cyl.abs_diff(loc.cylinder);
        let (seek, rot) = self.position(&loc, m, write);
        let (_, xfer) = self.geo.walk(lba, sectors.max(1), f64::INFINITY);
        let end = m + seek + rot + xfer;
        let last = self.geo.locate(lba + sectors.max(1) - 1);
        self.cyl = last.cylinder;
        self.head = last.head;
        self.head_lba = lba + sectors;
        self.media_free = end;
        (m, seek, rot, xfer, end)
    }

    /// Ends a running prefetch at `t`: its segment keeps what was read, the heads stay where
    /// it got to.
    fn stop_prefetch(&mut self, t: f64) {
        let mut moved = None;
        for s in &mut self.segments {
            if let Some(from) = s.prefetch_from.take() {
                let (n, _) = self.geo.walk(s.end, s.limit - s.end, (t - from).max(0.0));
                s.end += n;
                moved = Some(s.end);
            }
        }
        if let Some(end) = moved {
            let loc = self.geo.locate(end.saturating_sub(1));
            self.cyl = loc.cylinder;
            self.head = loc.head;
            self.head_lba = end;
        }
    }

    /// Destages dirty data, in elevator order from the heads, while the mechanism is free
    /// before `t` (each operation, once begun, runs to its end).
    fn advance(&mut self, t: f64) {
        while self.dirty_sectors > 0 && self.media_free < t {
            self.destage_one();
        }
    }

    fn destage_one(&mut self) {
        let pick = self
            .dirty
            .range(self.head_lba..)
            .next()
            .or_else(|| self.dirty.iter().next())
            .map(|(&s, &v)| (s, v));
        let Some((start, (len, since))) = pick else {
            return;
        };
        let n = len.min(DESTAGE_CHUNK);
        self.dirty.remove(&start);
        if n < len {
            self.dirty.insert(start + n, (len - n, since));
        }
        self.dirty_sectors -= n;
        let (.., end) = self.media_op(start, n, since, true);
        self.events.push(CacheEvent::Destaged {
            lba: start,
            sectors: n,
            at_ns: end.ceil() as u64,
        });
    }

    fn add_dirty(&mut self, lba: u64, n: u64, t: f64) {
        let (mut start, mut end) = (lba, lba + n);
        // Merge every run that overlaps or touches [start, end).
        let touching: Vec<u64> = self
            .dirty
            .range(..=end)
            .rev()
            .take_while(|(&s, &(l, _))| s + l >= start)
            .map(|(&s, _)| s)
            .collect();
        let mut since = t;
        for s in touching {
            if let Some((l, when)) = self.dirty.remove(&s) {
                self.dirty_sectors -= l;
                start = start.min(s);
                end = end.max(s + l);
                since = since.min(when);
            }
        }
        self.dirty.insert(start, (end - start, since));
        self.dirty_sectors += end - start;
    }

    fn in_dirty(&self, lba: u64, n: u64) -> bool {
        self.dirty
            .range(..=lba)
            .next_back()
            .is_some_and(|(&s, &(l, _))| s + l >= lba + n)
    }

    fn drop_segments(&mut self, lba: u64, n: u64) {
        self.segments
            .retain(|s| s.start >= lba + n || s.end.max(s.limit) <= lba);
    }

    /// Serves one request starting at `start` (the interface is free): returns its
    /// completion time and where the time went.
    pub fn serve(&mut self, req: &Request, start: u64) -> (u64, Breakdown) {
        let s = start as f64;
        let t0 = s + self.overhead_ns();
        let mut bd = Breakdown {
            overhead_ns: self.overhead_ns() as u64,
            ..Breakdown::default()
        };
        self.advance(t0);
        let lba = (req.offset / SECTOR).min(self.geo.sectors().saturating_sub(1));
        let n = req.len.div_ceil(SECTOR).max(1);
        let link = self.link_ns(req.len);
        let done = match req.op {
            Op::Flush => {
                while self.dirty_sectors > 0 {
                    self.destage_one();
                }
                let d = t0.max(self.media_free);
                bd.wait_ns = (d - t0) as u64;
                d
            }
            Op::Read => self.read(lba, n, t0, link, &mut bd),
            Op::Write => {
                self.drop_segments(lba, n);
                if self.cache_on() && self.p.write_cache && !req.fua {
                    let cap = (self.p.cache_bytes / SECTOR).max(n);
                    let mut waited = false;
                    while self.dirty_sectors + n > cap {
                        self.destage_one();
                        waited = true;
                    }
                    // A full cache takes the data only when the destage has made room.
                    let ready = if waited { t0.max(self.media_free) } else { t0 };
                    bd.wait_ns = (ready - t0) as u64;
                    let d = ready + link;
                    bd.link_ns = link as u64;
                    bd.cache_hit = true;
                    self.add_dirty(lba, n, d);
                    let (id, sectors) = (req.id, n);
                    self.events.push(CacheEvent::Cached { id, lba, sectors });
                    d
                } else {
                    let (m, seek, rot, xfer, end) = self.media_op(lba, n, t0 + link, true);
                    bd.wait_ns = (m - t0 - link).max(0.0) as u64;
                    bd.link_ns = link as u64;
                    bd.seek_ns = seek as u64;
                    bd.rotation_ns = rot as u64;
                    bd.transfer_ns = xfer as u64;
                    bd.seek_cylinders = self.last_seek;
                    self.events.push(CacheEvent::Media {
                        id: req.id,
                        lba,
                        sectors: n,
                        at_ns: end.ceil() as u64,
                    });
                    end
                }
            }
        };
        let done = (done.ceil() as u64).max(start);
        self.iface_free = done;
        (done, bd)
    }

    fn read(&mut self, lba: u64, n: u64, t0: f64, link: f64, bd: &mut Breakdown) -> f64 {
        let end_lba = lba + n;
        if self.cache_on() {
            if self.in_dirty(lba, n) {
                bd.cache_hit = true;
                bd.link_ns = link as u64;
                return t0 + link;
            }
            let link_sector = self.link_ns(SECTOR);
            let geo = &self.geo;
            let hit = self.segments.iter_mut().find(|s| {
                lba >= s.start && end_lba <= s.end.max(s.limit) && {
                    // Valid now, or the running prefetch is heading for it.
                    end_lba <= s.end || s.prefetch_from.is_some()
                }
            });
            if let Some(seg) = hit {
                bd.cache_hit = true;
                bd.link_ns = link as u64;
                seg.used_ns = t0 as u64;
                let ready = match seg.prefetch_from {
                    Some(from) if end_lba > seg.end => {
                        let (_, dt) = geo.walk(seg.end, end_lba - seg.end, f64::INFINITY);
                        let reach = from + dt;
                        bd.transfer_ns = (reach - t0).max(0.0) as u64;
                        // Keep streaming: the segment slides on behind the reader.
                        let seg_sectors =
                            self.p.cache_bytes / SECTOR / u64::from(self.p.cache_segments.max(1));
                        seg.limit = (end_lba + seg_sectors).min(geo.sectors());
                        reach
                    }
                    _ => t0,
                };
                // The link transfer overlaps the stream; the last sector still has to cross.
                return (ready + link_sector).max(t0 + link);
            }
        }
        let (m, seek, rot, xfer, end) = self.media_op(lba, n, t0, false);
        bd.wait_ns = (m - t0).max(0.0) as u64;
        bd.seek_ns = seek as u64;
        bd.rotation_ns = rot as u64;
        bd.transfer_ns = xfer as u64;
        bd.seek_cylinders = self.last_seek;
        // The link transfer overlaps the media transfer; the last sector still has to cross.
        let done = end.max(t0 + link) + self.link_ns(SECTOR);
        bd.link_ns = (done - end) as u64;
        if self.cache_on() && self.p.read_ahead {
            // Prefetch a segment's worth beyond the read (the read itself may be larger).
            let seg_sectors = self.p.cache_bytes / SECTOR / u64::from(self.p.cache_segments.max(1));
            if self.segments.len() >= self.p.cache_segments.max(1) as usize {
                if let Some(i) = self
                    .segments
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.used_ns)
                    .map(|(i, _)| i)
                {
                    self.segments.remove(i);
                }
            }
            self.segments.push(Segment {
                start: lba,
                end: end_lba,
                prefetch_from: Some(end),
                limit: (end_lba + seg_sectors).min(self.geo.sectors()),
                used_ns: t0 as u64,
            });
        }
        done
    }
}
