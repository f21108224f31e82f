//! Crash-state construction: a pure function of the write log, a cut, a cache choice and a
//! seed (see the design note in [`super`]). It walks the model's cache events in the order
//! the model made them, keeping per sector written during the log the drive's cache content
//! and the newest version on the media by the cut's time, then picks each sector's version
//! under the cache choice. A version is a request's index in reply order, so a write replied
//! after the cut is never picked. Cost: the sectors written during the log; no byte of the
//! image is read or copied.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::data::Blob;
use super::{CacheEvent, CrashCache, EntryKind};
use crate::device::model::SECTOR;

/// Sectors per chunk that `random` keeps or loses as one (4 KiB).
pub const RANDOM_CHUNK_SECTORS: u64 = 8;

/// One logged request (what [`super::record`] keeps).
#[derive(Debug, Clone)]
pub struct Entry {
    /// The server's request id (the model's tag, named by its cache events).
    pub id: u64,
    pub kind: EntryKind,
    pub offset: u64,
    pub len: u64,
    /// Where a write's data (as the drive received it) is in the log's bytes.
    pub data: Option<Blob>,
    pub arrival_ns: u64,
    /// The store refused it (the request failed): no version of any sector.
    pub failed: bool,
}

/// A logged request's reply, in reply order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replied {
    pub id: u64,
    /// Its modelled completion (its reply time where no model applied).
    pub done_ns: u64,
    pub reply_ns: u64,
}

/// The log as the construction reads it.
#[derive(Debug, Clone, Copy)]
pub struct LogView<'a> {
    /// In the order they reached the store.
    pub entries: &'a [Entry],
    /// In reply order.
    pub replies: &'a [Replied],
    /// In the order the model made them.
    pub events: &'a [CacheEvent],
    /// Undo pre-images by first sector, not overlapping (where they are in the log's bytes).
    pub undo: &'a BTreeMap<u64, Blob>,
}

/// Where a range of a crash state's bytes are.
#[derive(Debug, Clone)]
pub enum Source {
    /// In the log's bytes from byte `at` on (a logged write's data or an undo pre-image).
    Data { at: u64 },
    /// Zeros (a discard).
    Zero,
}

/// A run of sectors of the overlay.
#[derive(Debug, Clone)]
pub struct Piece {
    pub sectors: u64,
    pub source: Source,
}

/// A crash state: first sector → piece; sectors not mapped read from the store.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    pub pieces: BTreeMap<u64, Piece>,
}

/// A crash state and its figures.
#[derive(Debug, Clone)]
pub struct Built {
    pub overlay: Overlay,
    /// The cut's modelled completion (the power-cut time) and its reply time.
    pub done_ns: u64,
    pub reply_ns: u64,
    pub dirty_bytes: u64,
    pub kept_bytes: u64,
    pub lost_bytes: u64,
    /// Bytes mapped to data (log or pre-images) and to zeros.
    pub bytes_mapped: u64,
    pub zero_bytes_mapped: u64,
    pub sectors_considered: u64,
}

/// Why a cut cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CutError {
    #[error("cut {cut} is past the last reply logged ({replied} replies: cuts 0 to {last})", last = replied.saturating_sub(1))]
    PastEnd { cut: u64, replied: u64 },
    #[error("the log holds {0} writes not aligned to 512-byte sectors: a crash state is built per sector")]
    Unaligned(u64),
}

/// A version after the cut (or of a request the log never saw replied).
const AFTER: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, Default)]
struct Sector {
    /// The newest version on the media by the cut's time: (when, version).
    media: Option<(u64, u64)>,
    /// The newest version written into the cache by the cut.
    cached: Option<u64>,
}

/// The per-sector walk.
struct Walk<'a> {
    log: LogView<'a>,
    /// Version (reply index) of each id replied by the cut.
    rank: HashMap<u64, u64>,
    cut_ns: u64,
    sectors: BTreeMap<u64, Sector>,
    /// The drive's cache content during the walk: sector → version.
    in_cache: BTreeMap<u64, u64>,
}

impl Walk<'_> {
    fn version(&self, id: u64) -> u64 {
        self.rank.get(&id).copied().unwrap_or(AFTER)
    }

    /// Version `v` of sector `s` reached the media at `at`.
    fn offer(&mut self, s: u64, at: u64, v: u64) {
        if v == AFTER || at > self.cut_ns {
            return;
        }
        // The media holds the newest version that reached it, whenever it did: a drive's cache
        // never holds a version older than one written past it (a FUA write, a zeroing the
        // model does not see), so a later destage of an older version is the model's quirk,
        // not a state the drive could be in.
        if let Some(sec) = self.sectors.get_mut(&s) {
            if sec.media.is_none_or(|(_, mv)| v > mv) {
                sec.media = Some((at, v));
            }
        }
    }

    fn event(&mut self, e: &CacheEvent) {
        match *e {
            CacheEvent::Cached { id, lba, sectors } => {
                let v = self.version(id);
                for s in lba..lba + sectors {
                    self.in_cache.insert(s, v);
                    if let Some(sec) = self.sectors.get_mut(&s).filter(|_| v != AFTER) {
                        sec.cached = Some(sec.cached.map_or(v, |c| c.max(v)));
                    }
                }
            }
            CacheEvent::Media {
                id,
                lba,
                sectors,
                at_ns,
            } => {
                let v = self.version(id);
                for s in lba..lba + sectors {
                    self.offer(s, at_ns, v);
                    // The drive's cache holds no older version than its media.
                    if self.in_cache.get(&s).is_some_and(|&c| c <= v) {
                        self.in_cache.remove(&s);
                    }
                }
            }
            CacheEvent::Destaged {
                lba,
                sectors,
                at_ns,
            } => {
                let held: Vec<(u64, u64)> = self
                    .in_cache
                    .range(lba..lba + sectors)
                    .map(|(&s, &v)| (s, v))
                    .collect();
                for (s, v) in held {
                    self.offer(s, at_ns, v);
                    self.in_cache.remove(&s);
                }
            }
            CacheEvent::AllDestaged { at_ns } => {
                for (s, v) in std::mem::take(&mut self.in_cache) {
                    self.offer(s, at_ns, v);
                }
            }
        }
    }
}

/// A keep-or-lose bit for `chunk` under `seed` (SplitMix64: every chunk's bit independent of
/// the order chunks are visited in).
fn keeps(seed: u64, chunk: u64) -> bool {
    let mut z = seed ^ chunk.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

fn sector_span(e: &Entry) -> std::ops::Range<u64> {
    e.offset / SECTOR..(e.offset + e.len).div_ceil(SECTOR)
}

/// Builds the crash state at `cut` under `cache` and `seed`.
pub fn build(log: LogView<'_>, cut: u64, cache: CrashCache, seed: u64) -> Result<Built, CutError> {
    let Some(at) = log.replies.get(cut as usize).copied() else {
        return Err(CutError::PastEnd {
            cut,
            replied: log.replies.len() as u64,
        });
    };
    let unaligned = log
        .entries
        .iter()
        .filter(|e| e.kind != EntryKind::Flush && (e.offset % SECTOR != 0 || e.len % SECTOR != 0))
        .count();
    if unaligned > 0 {
        return Err(CutError::Unaligned(unaligned as u64));
    }
    let rank = log.replies[..=cut as usize]
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id, i as u64))
        .collect();
    let mut w = Walk {
        log,
        rank,
        cut_ns: at.done_ns,
        sectors: BTreeMap::new(),
        in_cache: BTreeMap::new(),
    };
    for e in log.entries {
        if e.kind != EntryKind::Flush {
            for s in sector_span(e) {
                w.sectors.entry(s).or_default();
            }
        }
    }
    for e in log.events {
        w.event(e);
    }
    durable_without_events(&mut w);
    let mut built = choose(&w, cache, seed);
    built.done_ns = at.done_ns;
    built.reply_ns = at.reply_ns;
    Ok(built)
}

/// Writes the model said nothing of (no model applied, or `ram`), and discards (never
/// modelled): on the media at their completion.
fn durable_without_events(w: &mut Walk<'_>) {
    let told: HashSet<u64> = w
        .log
        .events
        .iter()
        .filter_map(|e| match e {
            CacheEvent::Cached { id, .. } | CacheEvent::Media { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    let done: HashMap<u64, u64> = w.log.replies.iter().map(|r| (r.id, r.done_ns)).collect();
    for e in w.log.entries {
        if e.kind == EntryKind::Flush || e.failed || told.contains(&e.id) {
            continue;
        }
        let (v, Some(&at)) = (w.version(e.id), done.get(&e.id)) else {
            continue;
        };
        for s in sector_span(e) {
            w.offer(s, at, v);
        }
    }
}

/// Each sector's version under the cache choice, as overlay pieces.
fn choose(w: &Walk<'_>, cache: CrashCache, seed: u64) -> Built {
    let by_version: HashMap<u64, usize> = {
        let idx: HashMap<u64, usize> = w
            .log
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id, i))
            .collect();
        w.rank
            .iter()
            .filter_map(|(id, &v)| idx.get(id).map(|&i| (v, i)))
            .collect()
    };
    let mut b = Built {
        overlay: Overlay::default(),
        done_ns: 0,
        reply_ns: 0,
        dirty_bytes: 0,
        kept_bytes: 0,
        lost_bytes: 0,
        bytes_mapped: 0,
        zero_bytes_mapped: 0,
        sectors_considered: w.sectors.len() as u64,
    };
    for (&s, sec) in &w.sectors {
        let media = sec.media.map(|(_, v)| v);
        let dirty = sec.cached.filter(|&c| media.is_none_or(|m| m < c));
        let chosen = match dirty {
            Some(c) => {
                b.dirty_bytes += SECTOR;
                let keep = match cache {
                    CrashCache::KeepAll => true,
                    CrashCache::LoseAll => false,
                    CrashCache::Random => keeps(seed, s / RANDOM_CHUNK_SECTORS),
                };
                if keep {
                    b.kept_bytes += SECTOR;
                    Some(c)
                } else {
                    b.lost_bytes += SECTOR;
                    media
                }
            }
            None => media,
        };
        // Mapped even where the store should hold the same bytes: a write's data may reach
        // the store after a zeroing that came later (data moves after the model has the
        // request), so the store is no witness of the log's order.
        let entry = chosen.and_then(|v| by_version.get(&v).copied());
        let source = match entry.map(|i| &w.log.entries[i]) {
            Some(e) => match &e.data {
                Some(d) => Source::Data {
                    at: d.at + (s - e.offset / SECTOR) * SECTOR,
                },
                None => Source::Zero,
            },
            None => undo_of(w.log.undo, s),
        };
        push(&mut b, s, source);
    }
    b
}

/// The pre-image of sector `s` (zeros where none was kept: a sector past the store's end).
fn undo_of(undo: &BTreeMap<u64, Blob>, s: u64) -> Source {
    match undo.range(..=s).next_back() {
        Some((&first, d)) if (s - first) * SECTOR < d.len => Source::Data {
            at: d.at + (s - first) * SECTOR,
        },
        _ => Source::Zero,
    }
}

/// Appends sector `s` from `source`, extending the last piece where it continues it.
fn push(b: &mut Built, s: u64, source: Source) {
    match &source {
        Source::Data { .. } => b.bytes_mapped += SECTOR,
        Source::Zero => b.zero_bytes_mapped += SECTOR,
    }
    if let Some((&first, last)) = b.overlay.pieces.iter_mut().next_back() {
        let continues = first + last.sectors == s
            && match (&last.source, &source) {
                (Source::Zero, Source::Zero) => true,
                (Source::Data { at: x }, Source::Data { at: y }) => x + last.sectors * SECTOR == *y,
                _ => false,
            };
        if continues {
            last.sectors += 1;
            return;
        }
    }
    b.overlay.pieces.insert(s, Piece { sectors: 1, source });
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
