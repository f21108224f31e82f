//! A block request and what the model says of it: its command, the dispatch (when the drive
//! took it and finished it, and why), and the drive cache's events. Below the models and
//! their profiles, so that a drive model (`hdd`) takes its vocabulary from here, not from the
//! model that holds it.

use serde::Serialize;

/// Bytes per logical block.
pub const SECTOR: u64 = 512;

/// The longest time the model may give a request, ns (10^13: about 2.8 hours). The profiles'
/// declared ranges keep every modelled service time below it (`limits` tests it: the slowest
/// flush takes 71 minutes); the server's histograms are made to hold it
/// (`stats::HISTOGRAM_MAX`).
pub const LONGEST_NS: u64 = 10_000_000_000_000;

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    /// Make every completed write durable (ATA FLUSH CACHE; `fsync`'s barrier).
    Flush,
}

/// One request to the device, in bytes of the modelled disk (the testbed's offset already
/// added, see [`super::DeviceModel::with_offset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Request {
    /// The caller's tag, returned in the [`Dispatch`].
    pub id: u64,
    pub op: Op,
    /// Byte offset (0 for a flush).
    pub offset: u64,
    /// Bytes (0 for a flush).
    pub len: u64,
    /// Force unit access: this write is on the media when it completes.
    pub fua: bool,
}

impl Request {
    /// A read of `len` bytes at `offset`.
    pub fn read(id: u64, offset: u64, len: u64) -> Request {
        Request {
            id,
            op: Op::Read,
            offset,
            len,
            fua: false,
        }
    }
    /// A write of `len` bytes at `offset` (not FUA).
    pub fn write(id: u64, offset: u64, len: u64) -> Request {
        Request {
            id,
            op: Op::Write,
            offset,
            len,
            fua: false,
        }
    }
    /// A cache flush.
    pub fn flush(id: u64) -> Request {
        Request {
            id,
            op: Op::Flush,
            offset: 0,
            len: 0,
            fua: false,
        }
    }
}

/// What became of a write's data inside the drive, for a write log ([`super::DeviceModel::record_cache_events`]):
/// which writes went into the volatile write cache, which to the media, and when the cache's
/// contents reached the media. Sectors are of the served image (the offset taken off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CacheEvent {
    /// Write `id` completed into the volatile write cache: lost at a power cut until destaged.
    Cached { id: u64, lba: u64, sectors: u64 },
    /// Write `id` went to the media itself (no write cache, cache off, FUA), finished at `at_ns`.
    Media {
        id: u64,
        lba: u64,
        sectors: u64,
        at_ns: u64,
    },
    /// The cache's contents of a range went to the media, the operation finishing at `at_ns`.
    Destaged { lba: u64, sectors: u64, at_ns: u64 },
    /// Everything in the cache was on the media by `at_ns` (a drive that keeps no ranges for
    /// its cache, the SSD model, at a flush).
    AllDestaged { at_ns: u64 },
}

/// Where a model puts its [`CacheEvent`]s while they are asked for: a Vec pushed to on the
/// model's path (no other work per request), drained by [`super::DeviceModel::take_cache_events`].
#[derive(Debug, Clone, Default)]
pub struct CacheSink {
    pub(super) on: bool,
    pub(super) events: Vec<CacheEvent>,
}

impl CacheSink {
    /// Events to preallocate room for when recording starts.
    const ROOM: usize = 4096;

    pub(super) fn set(&mut self, on: bool) {
        self.on = on;
        if on {
            self.events.reserve(Self::ROOM);
        } else {
            self.events = Vec::new();
        }
    }

    /// Records `e` if events are asked for.
    pub fn push(&mut self, e: CacheEvent) {
        if self.on {
            self.events.push(e);
        }
    }
}

/// Where a request's service time went, ns. Parts may overlap (the link transfer overlaps the
/// media transfer), so they need not add up to the service time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    pub overhead_ns: u64,
    /// Waiting for the mechanism (a destage under way, a full write cache, a busy channel).
    pub wait_ns: u64,
    pub seek_ns: u64,
    pub rotation_ns: u64,
    /// Media transfer (or waiting for a running prefetch to reach the blocks).
    pub transfer_ns: u64,
    /// Host link transfer not hidden behind the media.
    pub link_ns: u64,
    /// Served from the drive's cache (read-ahead segment, dirty data, or into the write cache).
    pub cache_hit: bool,
    /// Cylinders the heads moved for this request (0 for a cache hit), for seek-distance
    /// histograms.
    pub seek_cylinders: u64,
}

/// A request the drive has taken: when it started and when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dispatch {
    pub id: u64,
    pub op: Op,
    pub arrival_ns: u64,
    pub start_ns: u64,
    pub done_ns: u64,
    pub breakdown: Breakdown,
}

impl Dispatch {
    /// Completion minus arrival: what the host sees.
    pub fn response_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.arrival_ns)
    }
    /// Completion minus start: the drive's service time.
    pub fn service_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.start_ns)
    }
}
