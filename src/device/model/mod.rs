//! The device model: a pure function of (profile, request, state, time). No I/O and no clock of
//! its own — the caller passes the time, so it runs on a virtual clock in tests and on the
//! monotonic clock in the server.
//!
//! Use:
//! - [`DeviceModel::submit`] a request when it arrives; [`DeviceModel::next`] when the drive can
//!   take a command ([`DeviceModel::ready_at`] says when) returns the request the drive's queue
//!   policy picks, with its start, completion and where the time went ([`Dispatch`]).
//! - [`DeviceModel::service`] does both for one request at queue depth 1.
//!
//! A rotating disk takes one command at a time (a 2005 SATA drive under libata had no command
//! queueing); its write-back cache lets the interface take the next command while the mechanism
//! destages. An SSD serves as many requests at once as it has channels. `ram` completes every
//! request on arrival; `constant=DURATION` completes each after exactly that, one at a time.

pub mod clock;
pub mod expect;
pub mod hdd;
pub mod params;
mod request;

use super::profile::{Ablations, Params, Profile, QueuePolicy, SsdParams};
pub use request::{Breakdown, CacheEvent, CacheSink, Dispatch, Op, Request, LONGEST_NS, SECTOR};

/// A flash drive: latency per request, `channels` requests at once, data through one
/// bandwidth pipe, a write cache drained at the program rate.
#[derive(Debug, Clone)]
struct Ssd {
    p: SsdParams,
    events: CacheSink,
    cache: bool,
    channels: Vec<u64>,
    pipe_free: f64,
    /// Dirty bytes in the write cache at `dirty_at`.
    dirty: f64,
    dirty_at: f64,
}

impl Ssd {
    fn free_at(&self) -> u64 {
        self.channels.iter().copied().min().unwrap_or(0)
    }

    fn drain(&mut self, t: f64) {
        let rate = self.p.write_mb_s * 1e6 / 1e9;
        self.dirty = (self.dirty - (t - self.dirty_at).max(0.0) * rate).max(0.0);
        self.dirty_at = self.dirty_at.max(t);
    }

    fn serve(&mut self, req: &Request, start: u64) -> (u64, Breakdown) {
        let (ci, free) = self
            .channels
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, f)| f)
            .unwrap_or((0, 0));
        let s = start.max(free) as f64;
        let mut bd = Breakdown {
            wait_ns: (s - start as f64) as u64,
            ..Breakdown::default()
        };
        self.drain(s);
        let bytes = req.len as f64;
        let done = match req.op {
            Op::Flush => {
                let rate = self.p.write_mb_s * 1e6 / 1e9;
                let d = s + if self.cache {
                    self.dirty / rate + self.p.flush_ms * 1e6
                } else {
                    0.0
                };
                self.dirty = 0.0;
                self.dirty_at = d;
                if self.cache {
                    self.events.push(CacheEvent::AllDestaged {
                        at_ns: d.ceil() as u64,
                    });
                }
                bd.wait_ns += (d - s) as u64;
                d
            }
            Op::Read | Op::Write => {
                let (lat, bw) = if req.op == Op::Read {
                    (self.p.read_latency_us * 1e3, self.p.read_mb_s)
                } else {
                    (self.p.write_latency_us * 1e3, self.p.write_mb_s)
                };
                // The 4K latency already holds a 4K transfer.
                let xfer = (bytes - 4096.0).max(0.0) / (bw * 1e6) * 1e9;
                let d = (s + lat).max(self.pipe_free) + xfer;
                self.pipe_free = self.pipe_free.max(s) + xfer;
                bd.overhead_ns = lat as u64;
                bd.transfer_ns = xfer as u64;
                if req.op == Op::Write {
                    let (lba, sectors) = (req.offset / SECTOR, req.len.div_ceil(SECTOR));
                    if self.cache && !req.fua {
                        bd.cache_hit = true;
                        self.dirty += bytes;
                        let id = req.id;
                        self.events.push(CacheEvent::Cached { id, lba, sectors });
                    } else {
                        let rate = self.p.write_mb_s * 1e6 / 1e9;
                        let at_ns = (d + bytes / rate).ceil() as u64;
                        let (id, done) = (req.id, self.finish(ci, at_ns, start, bd));
                        self.events.push(CacheEvent::Media {
                            id,
                            lba,
                            sectors,
                            at_ns: done.0,
                        });
                        return done;
                    }
                }
                d
            }
        };
        self.finish(ci, done.ceil() as u64, start, bd)
    }

    fn finish(&mut self, ci: usize, done: u64, start: u64, bd: Breakdown) -> (u64, Breakdown) {
        let done = done.max(start);
        if let Some(c) = self.channels.get_mut(ci) {
            *c = done;
        }
        (done, bd)
    }
}

#[derive(Debug, Clone)]
enum Engine {
    Hdd(Box<hdd::Hdd>),
    Ssd(Ssd),
    Ram,
    Constant { ns: u64, busy: u64 },
}

/// The modelled device with its queue. See the module docs for the protocol.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    engine: Engine,
    policy: QueuePolicy,
    window: usize,
    offset: u64,
    capacity: u64,
    pending: Vec<(Request, u64)>,
    /// Cache events of the engines that keep no cache (`ram`, `constant`).
    events: CacheSink,
}

impl DeviceModel {
    /// A device in its initial state (heads at cylinder 0, cache empty, time 0).
    pub fn new(profile: &Profile, abl: &Ablations) -> Result<DeviceModel, String> {
        let (engine, policy, window) = if let Some(ns) = abl.constant_ns {
            (Engine::Constant { ns, busy: 0 }, QueuePolicy::Fifo, 1)
        } else {
            match &profile.params {
                Params::Ram => (Engine::Ram, QueuePolicy::Fifo, 1),
                Params::Ssd(p) => (
                    Engine::Ssd(Ssd {
                        p: p.clone(),
                        events: CacheSink::default(),
                        cache: p.write_cache && !abl.no_cache,
                        channels: vec![0; p.channels.max(1) as usize],
                        pipe_free: 0.0,
                        dirty: 0.0,
                        dirty_at: 0.0,
                    }),
                    QueuePolicy::Fifo,
                    1,
                ),
                Params::Hdd(p) => (
                    Engine::Hdd(Box::new(hdd::Hdd::new(p, profile.capacity_bytes, *abl)?)),
                    p.queue,
                    p.sptf_window.max(1) as usize,
                ),
            }
        };
        Ok(DeviceModel {
            engine,
            policy,
            window,
            offset: 0,
            capacity: profile.capacity_bytes,
            pending: Vec::new(),
            events: CacheSink::default(),
        })
    }

    /// Places the served image at `offset` bytes into the modelled disk (where the study's
    /// filesystem sat). Requests are then given in bytes of the image.
    pub fn with_offset(mut self, offset: u64) -> DeviceModel {
        self.offset = offset;
        self
    }

    /// Whether an image of `bytes` fits on the modelled disk at the offset (`ram` fits all).
    pub fn fits(&self, bytes: u64) -> bool {
        matches!(self.engine, Engine::Ram | Engine::Constant { .. })
            || self.capacity == 0
            || self.offset.saturating_add(bytes) <= self.capacity
    }

    /// Replaces the queue policy (to compare policies on one drive).
    pub fn with_policy(mut self, policy: QueuePolicy, window: usize) -> DeviceModel {
        self.policy = policy;
        self.window = window.max(1);
        self
    }

    /// The rotating disk's mechanics, when the device is one.
    pub fn hdd(&self) -> Option<&hdd::Hdd> {
        match &self.engine {
            Engine::Hdd(h) => Some(h),
            _ => None,
        }
    }

    /// Starts (or stops, dropping what was not taken) recording what becomes of each write's
    /// data in the drive ([`CacheEvent`]), for a write log.
    pub fn record_cache_events(&mut self, on: bool) {
        self.events.set(on);
        match &mut self.engine {
            Engine::Hdd(h) => h.events.set(on),
            Engine::Ssd(s) => s.events.set(on),
            Engine::Ram | Engine::Constant { .. } => {}
        }
    }

    /// Whether cache events are being recorded.
    pub fn records_cache_events(&self) -> bool {
        self.events.on
    }

    /// Moves the cache events recorded since the last call into `into`, in the order the
    /// model made them, in sectors of the served image (the offset taken off).
    pub fn take_cache_events(&mut self, into: &mut Vec<CacheEvent>) {
        let first = into.len();
        into.append(&mut self.events.events);
        match &mut self.engine {
            Engine::Hdd(h) => into.append(&mut h.events.events),
            Engine::Ssd(s) => into.append(&mut s.events.events),
            Engine::Ram | Engine::Constant { .. } => {}
        }
        let off = self.offset / SECTOR;
        for e in &mut into[first..] {
            match e {
                CacheEvent::Cached { lba, .. }
                | CacheEvent::Media { lba, .. }
                | CacheEvent::Destaged { lba, .. } => *lba = lba.saturating_sub(off),
                CacheEvent::AllDestaged { .. } => {}
            }
        }
    }

    /// A request arrives at `arrival_ns`.
    pub fn submit(&mut self, mut req: Request, arrival_ns: u64) {
        req.offset = req.offset.saturating_add(self.offset);
        self.pending.push((req, arrival_ns));
    }

    /// Requests waiting for the drive.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    fn free_at(&self) -> u64 {
        match &self.engine {
            Engine::Hdd(h) => h.free_at(),
            Engine::Ssd(s) => s.free_at(),
            Engine::Ram => 0,
            Engine::Constant { busy, .. } => *busy,
        }
    }

    /// When the drive will take its next command: the later of its being free and the first
    /// arrival. None when nothing waits.
    pub fn ready_at(&self) -> Option<u64> {
        let first = self.pending.iter().map(|&(_, a)| a).min()?;
        Some(first.max(self.free_at()))
    }

    /// The drive takes its next command at `now_ns`, if it is free then and a request has
    /// arrived: the one its queue policy picks among those arrived by `now_ns`.
    pub fn next(&mut self, now_ns: u64) -> Option<Dispatch> {
        if self.free_at() > now_ns {
            return None;
        }
        let i = self.pick(now_ns)?;
        let (req, arrival) = self.pending.remove(i);
        let (done, breakdown) = match &mut self.engine {
            Engine::Hdd(h) => h.serve(&req, now_ns),
            Engine::Ssd(s) => s.serve(&req, now_ns),
            Engine::Ram => (now_ns, Breakdown::default()),
            Engine::Constant { ns, busy } => {
                // `ns` is at most the ablation's bound (10 s); saturating all the same, so that
                // no clock the caller passes can wrap the drive's busy time into the past.
                *busy = now_ns.saturating_add(*ns);
                (*busy, Breakdown::default())
            }
        };
        if req.op == Op::Write && matches!(self.engine, Engine::Ram | Engine::Constant { .. }) {
            self.events.push(CacheEvent::Media {
                id: req.id,
                lba: req.offset / SECTOR,
                sectors: req.len.div_ceil(SECTOR),
                at_ns: done,
            });
        }
        Some(Dispatch {
            id: req.id,
            op: req.op,
            arrival_ns: arrival,
            start_ns: now_ns,
            done_ns: done,
            breakdown,
        })
    }

    fn pick(&self, now: u64) -> Option<usize> {
        let arrived: Vec<usize> = (0..self.pending.len())
            .filter(|&i| self.pending[i].1 <= now)
            .collect();
        let oldest = || {
            arrived
                .iter()
                .copied()
                .min_by_key(|&i| (self.pending[i].1, self.pending[i].0.id))
        };
        // A flush orders the queue: nothing after it goes before it (and it waits for its
        // predecessors), so the policy only chooses among requests older than the first flush.
        let first_flush = arrived
            .iter()
            .copied()
            .filter(|&i| self.pending[i].0.op == Op::Flush)
            .min_by_key(|&i| (self.pending[i].1, self.pending[i].0.id));
        let mut cands: Vec<usize> = match first_flush {
            Some(f) => {
                let key = (self.pending[f].1, self.pending[f].0.id);
                let before: Vec<usize> = arrived
                    .iter()
                    .copied()
                    .filter(|&i| (self.pending[i].1, self.pending[i].0.id) < key)
                    .collect();
                if before.is_empty() {
                    return Some(f);
                }
                before
            }
            None => arrived.clone(),
        };
        let hdd = match (&self.engine, self.policy) {
            (_, QueuePolicy::Fifo)
            | (Engine::Ssd(_) | Engine::Ram | Engine::Constant { .. }, _) => {
                return oldest_of(&cands, &self.pending).or_else(oldest)
            }
            (Engine::Hdd(h), _) => h,
        };
        match self.policy {
            QueuePolicy::Clook => {
                let head = hdd.head_lba();
                let key = |i: &usize| self.pending[*i].0.offset / SECTOR;
                cands
                    .iter()
                    .copied()
                    .filter(|i| key(i) >= head)
                    .min_by_key(key)
                    .or_else(|| cands.iter().copied().min_by_key(key))
            }
            _ => {
                cands.sort_by_key(|&i| (self.pending[i].1, self.pending[i].0.id));
                cands.truncate(self.window);
                cands
                    .iter()
                    .copied()
                    .min_by_key(|&i| hdd.positioning_ns(&self.pending[i].0, now))
            }
        }
    }

    /// Serves one request at queue depth 1: it arrives at `arrival_ns` and the drive takes it
    /// as soon as it is free.
    pub fn service(&mut self, req: Request, arrival_ns: u64) -> Dispatch {
        self.submit(req, arrival_ns);
        let at = self.ready_at().unwrap_or(arrival_ns);
        match self.next(at) {
            Some(d) => d,
            None => unreachable_dispatch(req, arrival_ns),
        }
    }
}

fn oldest_of(cands: &[usize], pending: &[(Request, u64)]) -> Option<usize> {
    cands
        .iter()
        .copied()
        .min_by_key(|&i| (pending[i].1, pending[i].0.id))
}

/// `service` always finds its request ready at `ready_at`; this keeps the signature total.
fn unreachable_dispatch(req: Request, arrival_ns: u64) -> Dispatch {
    Dispatch {
        id: req.id,
        op: req.op,
        arrival_ns,
        start_ns: arrival_ns,
        done_ns: arrival_ns,
        breakdown: Breakdown::default(),
    }
}

#[cfg(test)]
mod limits;
#[cfg(test)]
mod tests;
