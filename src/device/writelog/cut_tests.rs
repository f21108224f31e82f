//! Crash states on the model's virtual clock: the HDD model is driven with `service` at
//! chosen times, its cache events taken as the server takes them, and the state at a cut read
//! back sector by sector (each write's data is its id, repeated).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::base::sys::Errno;
use crate::device::model::{DeviceModel, Dispatch, Request};
use crate::device::profile::{load, parse_ablations};
use crate::device::writelog::data::{Blob, LogData};
use crate::device::writelog::overlay::CrashState;

const MS: u64 = 1_000_000;

/// A write log made on the virtual clock.
struct Sim {
    model: DeviceModel,
    entries: Vec<Entry>,
    replies: Vec<Replied>,
    events: Vec<CacheEvent>,
    undo: BTreeMap<u64, Blob>,
    /// The log's bytes (written out at each append).
    log: LogData,
    /// The store's final content: sector → its byte (0: never written).
    store: BTreeMap<u64, u8>,
}

impl Sim {
    fn new() -> Sim {
        Sim::of("deskstar-7k250")
    }

    fn of(profile: &str) -> Sim {
        let p = load(profile).unwrap();
        let mut model = DeviceModel::new(&p, &parse_ablations("").unwrap()).unwrap();
        model.record_cache_events(true);
        Sim {
            model,
            entries: Vec::new(),
            replies: Vec::new(),
            events: Vec::new(),
            undo: BTreeMap::new(),
            log: LogData::in_memory().unwrap(),
            store: BTreeMap::new(),
        }
    }

    fn serve(&mut self, req: Request, at: u64) -> Dispatch {
        let d = self.model.service(req, at);
        self.model.take_cache_events(&mut self.events);
        self.replies.push(Replied {
            id: req.id,
            done_ns: d.done_ns,
            reply_ns: d.done_ns,
        });
        d
    }

    /// Write `id` of `sectors` at `lba`, arriving at `at` (its bytes: `id`).
    fn write(&mut self, id: u8, lba: u64, sectors: u64, at: u64, fua: bool) -> Dispatch {
        let len = sectors * SECTOR;
        for s in lba..lba + sectors {
            if !self.undo.contains_key(&s) {
                let pre = self.append(&[0u8; SECTOR as usize]);
                self.undo.insert(s, pre);
            }
            self.store.insert(s, id);
        }
        let data = self.append(&vec![id; len as usize]);
        self.entries.push(Entry {
            id: u64::from(id),
            kind: if fua {
                EntryKind::Fua
            } else {
                EntryKind::Write
            },
            offset: lba * SECTOR,
            len,
            data: Some(data),
            arrival_ns: at,
            failed: false,
        });
        let mut req = Request::write(u64::from(id), lba * SECTOR, len);
        req.fua = fua;
        self.serve(req, at)
    }

    fn append(&mut self, bytes: &[u8]) -> Blob {
        let b = self.log.append(bytes).unwrap();
        self.log.flush().unwrap();
        b
    }

    fn flush(&mut self, id: u8, at: u64) -> Dispatch {
        self.entries.push(Entry {
            id: u64::from(id),
            kind: EntryKind::Flush,
            offset: 0,
            len: 0,
            data: None,
            arrival_ns: at,
            failed: false,
        });
        self.serve(Request::flush(u64::from(id)), at)
    }

    fn view(&self) -> LogView<'_> {
        LogView {
            entries: &self.entries,
            replies: &self.replies,
            events: &self.events,
            undo: &self.undo,
        }
    }

    /// The byte each of `sectors` holds after a power cut at `cut`.
    fn state(&self, cut: u64, cache: CrashCache, seed: u64, sectors: &[u64]) -> Vec<u8> {
        let b = build(self.view(), cut, cache, seed).unwrap();
        assert_eq!(b.kept_bytes + b.lost_bytes, b.dirty_bytes);
        assert!(b.bytes_mapped <= self.entries.iter().map(|e| e.len).sum::<u64>() * 2);
        let st = CrashState::new(b.overlay, Some(self.log.reader()), 0);
        let store = |buf: &mut [u8], off: u64| -> Result<usize, Errno> {
            for (i, c) in buf.chunks_mut(SECTOR as usize).enumerate() {
                c.fill(*self.store.get(&(off / SECTOR + i as u64)).unwrap_or(&0));
            }
            Ok(buf.len())
        };
        sectors
            .iter()
            .map(|&s| {
                let mut buf = [0u8; SECTOR as usize];
                st.read(&mut buf, s * SECTOR, &store).unwrap();
                assert!(buf.iter().all(|&b| b == buf[0]), "sector {s} is torn");
                buf[0]
            })
            .collect()
    }
}

const MODES: [CrashCache; 3] = [CrashCache::LoseAll, CrashCache::Random, CrashCache::KeepAll];

#[test]
fn a_write_still_in_the_cache_is_lost_under_lose_all_and_kept_under_keep_all() {
    let mut sim = Sim::new();
    let d = sim.write(7, 1000, 8, 0, false);
    assert!(d.breakdown.cache_hit, "the write went into the cache");
    let b = build(sim.view(), 0, CrashCache::LoseAll, 0).unwrap();
    assert_eq!((b.dirty_bytes, b.lost_bytes, b.kept_bytes), (4096, 4096, 0));
    assert_eq!(b.done_ns, d.done_ns);
    assert_eq!(sim.state(0, CrashCache::LoseAll, 0, &[1000, 1007]), [0, 0]);
    assert_eq!(sim.state(0, CrashCache::KeepAll, 0, &[1000, 1007]), [7, 7]);
}

#[test]
fn a_flush_makes_every_write_before_it_survive_under_every_choice() {
    let mut sim = Sim::new();
    sim.write(1, 1000, 8, 0, false);
    sim.write(2, 90_000_000, 8, 100_000, false);
    let f = sim.flush(3, 200_000);
    assert!(f.done_ns > MS, "the flush waited for the destages");
    sim.write(4, 5000, 8, f.done_ns + 1000, false);
    for mode in MODES {
        for seed in 0..4 {
            assert_eq!(
                sim.state(2, mode, seed, &[1000, 90_000_000, 5000]),
                [1, 2, 0],
                "{mode} seed {seed}: the flushed writes are there, the later one is not"
            );
        }
    }
    let b = build(sim.view(), 2, CrashCache::LoseAll, 0).unwrap();
    assert_eq!(b.dirty_bytes, 0, "nothing dirty just after a flush");
}

#[test]
fn a_fua_write_survives_and_a_cached_one_after_it_does_not() {
    let mut sim = Sim::new();
    let d = sim.write(2, 2000, 8, 0, true);
    assert!(!d.breakdown.cache_hit, "FUA goes to the media");
    sim.write(1, 4000, 8, d.done_ns + 1000, false);
    assert_eq!(sim.state(1, CrashCache::LoseAll, 0, &[2000, 4000]), [2, 0]);
    assert_eq!(sim.state(1, CrashCache::KeepAll, 0, &[2000, 4000]), [2, 1]);
    assert_eq!(sim.state(0, CrashCache::LoseAll, 0, &[2000, 4000]), [2, 0]);
}

#[test]
fn elevator_destaging_puts_a_later_write_on_the_media_before_an_earlier_one() {
    let mut sim = Sim::new();
    let (far, mid, near) = (300_000_000, 200_000_000, 2_000);
    // The far write is destaged when the next arrives (the mechanism is idle), which keeps
    // the mechanism busy while the next two wait in the cache; the heads then stand beyond
    // both, and the elevator wraps round to the lowest: the near, later one first.
    let a = sim.write(1, far, 8, 0, false);
    let x = sim.write(2, mid, 8, a.done_ns + 1000, false);
    sim.write(3, near, 8, x.done_ns + 1000, false);
    // When the destages end, whatever request starts them: found on a copy.
    let mut probe = sim.model.clone();
    probe.service(Request::flush(99), 10 * 1000 * MS);
    let mut ev = Vec::new();
    probe.take_cache_events(&mut ev);
    let ends: Vec<(u64, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            CacheEvent::Destaged { lba, at_ns, .. } => Some((*lba, *at_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2, "{ev:?}");
    assert_eq!(
        ends[0].0, near,
        "the elevator takes the near, later write first"
    );
    assert_eq!(ends[1].0, mid);
    let (near_on_media, mid_on_media) = (ends[0].1, ends[1].1);
    let c = sim.write(4, 50_000, 8, near_on_media + 1000, false);
    assert!(
        near_on_media <= c.done_ns && c.done_ns < mid_on_media,
        "the cut ({}) falls between the destages ({near_on_media}, {mid_on_media})",
        c.done_ns
    );
    let sectors = [far, mid, near, 50_000];
    assert_eq!(
        sim.state(3, CrashCache::LoseAll, 0, &sectors),
        [1, 0, 3, 0],
        "the later write is on the media, the earlier one still in the cache"
    );
    assert_eq!(sim.state(3, CrashCache::KeepAll, 0, &sectors), [1, 2, 3, 4]);
    let b = build(sim.view(), 3, CrashCache::LoseAll, 0).unwrap();
    assert_eq!(b.dirty_bytes, 2 * 4096, "the mid and the last write");
}

#[test]
fn random_keeps_a_seeded_subset_of_the_dirty_chunks() {
    let mut sim = Sim::new();
    let first = sim.write(1, 100, 8, 0, false);
    let f = sim.flush(2, first.done_ns + 1000);
    let mut t = f.done_ns + 1000;
    let mut lbas = vec![100];
    // Writes faster than the mechanism destages them: the cache fills.
    for i in 0..48u8 {
        let lba = 10_000 + u64::from(i) * 64;
        t = sim.write(10 + i, lba, 8, t, false).done_ns + 1000;
        lbas.push(lba);
    }
    let cut = sim.replies.len() as u64 - 1;
    let all = sim.state(cut, CrashCache::KeepAll, 0, &lbas);
    let none = sim.state(cut, CrashCache::LoseAll, 0, &lbas);
    let kept = |v: &[u8]| -> BTreeSet<u8> { v.iter().copied().filter(|&b| b != 0).collect() };
    let dirty = kept(&all).len() - kept(&none).len();
    assert_eq!(kept(&all).len(), 49);
    assert!(kept(&none).contains(&1), "the flushed write");
    assert!(dirty >= 16, "{dirty} writes still in the cache");
    let full = build(sim.view(), cut, CrashCache::KeepAll, 0).unwrap();
    assert_eq!(full.dirty_bytes, dirty as u64 * 4096);
    let (a, b) = (
        sim.state(cut, CrashCache::Random, 1, &lbas),
        sim.state(cut, CrashCache::Random, 2, &lbas),
    );
    assert_ne!(a, b, "two seeds keep different subsets");
    for r in [&a, &b] {
        assert!(kept(r).is_subset(&kept(&all)));
        assert!(kept(&none).is_subset(&kept(r)));
        assert!(
            kept(r) != kept(&all) && kept(r) != kept(&none),
            "a proper subset"
        );
    }
    assert_eq!(a, sim.state(cut, CrashCache::Random, 1, &lbas), "seeded");
    let r = build(sim.view(), cut, CrashCache::Random, 1).unwrap();
    assert_eq!(
        r.kept_bytes,
        (kept(&a).len() - kept(&none).len()) as u64 * 4096
    );
}

#[test]
fn a_cut_before_a_write_is_replied_never_shows_it() {
    let mut sim = Sim::new();
    let a = sim.write(1, 100, 8, 0, false);
    let b = sim.write(2, 200, 8, a.done_ns, true);
    sim.flush(3, b.done_ns);
    for mode in MODES {
        assert_eq!(sim.state(0, mode, 5, &[100, 200])[1], 0, "{mode}");
    }
    // The cached write went to the media (destaged when the FUA arrived) before the FUA's own.
    assert_eq!(sim.state(1, CrashCache::LoseAll, 5, &[100, 200]), [1, 2]);
}

#[test]
fn an_overwrite_of_a_dirty_sector_keeps_only_the_newest_in_the_cache() {
    let mut sim = Sim::new();
    let a = sim.write(1, 100, 8, 0, false);
    sim.write(2, 100, 8, a.done_ns + 1000, false);
    assert_eq!(sim.state(0, CrashCache::KeepAll, 0, &[100]), [1]);
    assert_eq!(sim.state(1, CrashCache::KeepAll, 0, &[100]), [2]);
    assert_eq!(sim.state(1, CrashCache::LoseAll, 0, &[100]), [0]);
    for seed in 0..16 {
        let got = sim.state(1, CrashCache::Random, seed, &[100])[0];
        assert!(
            got == 2 || got == 0,
            "seed {seed}: never the overwritten version"
        );
    }
    let b = build(sim.view(), 1, CrashCache::KeepAll, 0).unwrap();
    assert_eq!(
        b.dirty_bytes, 4096,
        "one version of the sectors in the cache"
    );
}

#[test]
fn a_cut_past_the_log_or_an_unaligned_write_is_refused() {
    let mut sim = Sim::new();
    sim.write(1, 100, 8, 0, false);
    let e = build(sim.view(), 1, CrashCache::LoseAll, 0).unwrap_err();
    assert_eq!(e, CutError::PastEnd { cut: 1, replied: 1 });
    assert!(e.to_string().contains("cuts 0 to 0"), "{e}");
    sim.entries[0].offset += 1;
    assert_eq!(
        build(sim.view(), 0, CrashCache::LoseAll, 0).unwrap_err(),
        CutError::Unaligned(1)
    );
}

#[test]
fn an_ssds_cached_writes_reach_the_media_at_its_flush_and_its_fua_writes_at_once() {
    let mut sim = Sim::of("sata-ssd");
    let a = sim.write(1, 100, 8, 0, false);
    let b = sim.write(2, 900, 8, a.done_ns, true);
    let f = sim.flush(3, b.done_ns);
    sim.write(4, 100, 8, f.done_ns, false);
    assert!(matches!(
        sim.events[0],
        CacheEvent::Cached {
            id: 1,
            lba: 100,
            sectors: 8
        }
    ));
    assert_eq!(sim.state(1, CrashCache::LoseAll, 0, &[100, 900]), [0, 2]);
    assert_eq!(sim.state(1, CrashCache::KeepAll, 0, &[100, 900]), [1, 2]);
    for mode in MODES {
        assert_eq!(sim.state(2, mode, 3, &[100, 900]), [1, 2], "{mode}");
    }
    assert_eq!(sim.state(3, CrashCache::LoseAll, 0, &[100]), [1]);
    assert_eq!(sim.state(3, CrashCache::KeepAll, 0, &[100]), [4]);
}
