//! The model on a virtual clock: seek curve, rotation, zones, cache, flush and FUA, queue
//! policies, ablations, and the QD1 expectation against simulation.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::expect::{demerit, expectations, random_read_service};
use super::*;
use crate::device::profile::{load, parse_ablations, HddParams, Profile};

const MS: f64 = 1e6;

fn hdd(name: &str) -> (Profile, HddParams) {
    let p = load(name).expect("built-in profile");
    let Params::Hdd(h) = p.params.clone() else {
        panic!("{name} is a disk")
    };
    (p, h)
}

fn model(name: &str, abl: &str) -> DeviceModel {
    let p = load(name).expect("built-in profile");
    DeviceModel::new(&p, &parse_ablations(abl).expect("ablations")).expect("model")
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs()
}

#[test]
fn seek_curve_matches_the_profile_and_is_sqrt_then_linear() {
    for name in ["st3500641as", "deskstar-7k250"] {
        let (_, h) = hdd(name);
        let m = model(name, "");
        let hd = m.hdd().expect("disk");
        let (curve, cyl) = (hd.seek_curve(), hd.geometry().cylinders());
        let d_max = cyl - 1;
        assert!(
            within(curve.time(1) / MS, h.track_to_track_ms, 0.02),
            "{name} t(1)"
        );
        assert!(
            within(curve.time(d_max) / MS, h.full_stroke_ms, 0.02),
            "{name} t(D)"
        );
        assert!(
            within(curve.mean_uniform() / MS, h.average_seek_ms, 0.02),
            "{name} avg"
        );
        // The datasheet definition, summed exactly over distances: Σ(D+1−d)·t(d)/Σ(D+1−d).
        let (mut num, mut den) = (0.0, 0.0);
        for d in (1..=d_max).step_by(7) {
            let w = (d_max + 1 - d) as f64;
            num += w * curve.time(d);
            den += w;
        }
        assert!(
            within(num / den / MS, h.average_seek_ms, 0.02),
            "{name} discrete avg"
        );
        let mut prev = 0.0;
        for d in (0..=d_max).step_by(97) {
            let t = curve.time(d);
            assert!(t >= prev, "{name}: seek not monotone at {d}");
            prev = t;
        }
        // √ below the boundary: for a + b·√d, t(16d) − t(4d) = 2b√d = 2·(t(4d) − t(d)).
        let bnd = curve.boundary();
        assert!(bnd > 16.0, "{name}: boundary {bnd}");
        let d = (bnd / 32.0).max(1.0) as u64;
        let (t1, t4, t16) = (curve.time(d), curve.time(4 * d), curve.time(16 * d));
        assert!(within(t16 - t4, 2.0 * (t4 - t1), 1e-6), "{name}: not √");
        if bnd < (d_max / 2) as f64 {
            let d = (bnd * 1.1) as u64;
            let (a, b, c) = (curve.time(d), curve.time(d + 1000), curve.time(d + 2000));
            assert!(
                within(c - b, b - a, 1e-6),
                "{name}: not linear beyond the boundary"
            );
        }
    }
}

#[test]
fn same_track_reads_wait_uniformly_over_one_revolution() {
    let mut m = model("st3500641as", "cache=off");
    let rev = 60e9 / 7200.0;
    let spt = m.hdd().expect("disk").geometry().locate(0).spt;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut t = m.service(Request::read(0, 0, 512), 0).done_ns;
    let n = 4000;
    let mut bins = [0usize; 10];
    let mut sum = 0.0;
    for id in 1..=n {
        t += rng.gen_range(0..20_000_000);
        let sector = rng.gen_range(0..spt - 1);
        let d = m.service(Request::read(id, sector * 512, 512), t);
        assert_eq!(d.breakdown.seek_ns, 0, "same track: no seek");
        assert_eq!(d.breakdown.seek_cylinders, 0);
        let r = d.breakdown.rotation_ns as f64;
        assert!(r < rev, "rotation {r} beyond a revolution");
        bins[((r / rev) * 10.0) as usize] += 1;
        sum += r;
        t = d.done_ns;
    }
    let mean = sum / n as f64 / MS;
    assert!(
        within(mean, rev / 2.0 / MS, 0.03),
        "mean rotation {mean} ms"
    );
    for b in bins {
        assert!(within(b as f64, n as f64 / 10.0, 0.2), "bins {bins:?}");
    }
}

/// Sequential 1 MiB reads at QD1 from `start`: MB/s from the first completion to the last.
fn seq_rate(m: &mut DeviceModel, start: u64, mib: u64) -> f64 {
    let mut t = 0;
    let mut first = 0;
    for i in 0..mib {
        let d = m.service(Request::read(i, start + (i << 20), 1 << 20), t);
        if i == 0 {
            first = d.done_ns;
        }
        t = d.done_ns;
    }
    ((mib - 1) << 20) as f64 / ((t - first) as f64 / 1e9) / 1e6
}

#[test]
fn outer_and_inner_zones_read_at_their_profiled_rates() {
    for name in ["st3500641as", "deskstar-7k250"] {
        let (p, h) = hdd(name);
        let e = expectations(&p, &Ablations::default()).expect("expectations");
        assert!(
            within(e.outer_mb_s.expect("rate"), h.outer_mb_s, 0.02),
            "{name} outer"
        );
        assert!(
            within(e.inner_mb_s.expect("rate"), h.inner_mb_s, 0.02),
            "{name} inner"
        );
        let outer = seq_rate(&mut model(name, ""), 0, 96);
        let inner = seq_rate(&mut model(name, ""), p.capacity_bytes - (100 << 20), 96);
        assert!(
            within(outer, h.outer_mb_s, 0.03),
            "{name}: outer {outer} MB/s"
        );
        assert!(
            within(inner, h.inner_mb_s, 0.03),
            "{name}: inner {inner} MB/s"
        );
    }
}

#[test]
fn read_ahead_serves_the_next_read_from_the_cache() {
    let mut m = model("st3500641as", "");
    let first = m.service(Request::read(0, 1 << 30, 4096), 0);
    assert!(!first.breakdown.cache_hit);
    let next = m.service(
        Request::read(1, (1 << 30) + 4096, 4096),
        first.done_ns + 20_000_000,
    );
    assert!(next.breakdown.cache_hit, "{next:?}");
    // Overhead + link transfer only.
    assert!(next.service_ns() < 300_000, "{next:?}");
    // Without the cache the same read waits for the disk to come round again.
    let mut m = model("st3500641as", "cache=off");
    let first = m.service(Request::read(0, 1 << 30, 4096), 0);
    let next = m.service(
        Request::read(1, (1 << 30) + 4096, 4096),
        first.done_ns + 20_000_000,
    );
    assert!(!next.breakdown.cache_hit);
    assert!(next.service_ns() > 1_000_000, "{next:?}");
}

#[test]
fn write_back_completes_fast_and_flush_waits_for_the_destage() {
    let mut m = model("st3500641as", "");
    let mut t = 0;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for id in 0..8 {
        let off = rng.gen_range(0..100_000_000u64) * 4096;
        let d = m.service(Request::write(id, off, 65536), t);
        assert!(d.breakdown.cache_hit);
        assert!(d.service_ns() < 500_000, "write-back write took {d:?}");
        t = d.done_ns;
    }
    let f = m.service(Request::flush(99), t);
    // Eight random writes destage at a seek and rotation each: far more than 10 ms.
    assert!(f.service_ns() > 10_000_000, "flush {f:?}");
    let again = m.service(Request::flush(100), f.done_ns);
    assert!(
        again.service_ns() < 500_000,
        "nothing left to destage: {again:?}"
    );

    // Write-through: each write pays the mechanism, a flush has nothing to wait for.
    let mut m = model("st3500641as", "cache=off");
    let mut t = 0;
    for id in 0..8 {
        let off = rng.gen_range(0..100_000_000u64) * 4096;
        let d = m.service(Request::write(id, off, 65536), t);
        assert!(!d.breakdown.cache_hit);
        assert!(d.service_ns() > 1_000_000, "write-through write {d:?}");
        t = d.done_ns;
    }
    let f = m.service(Request::flush(99), t);
    assert!(f.service_ns() < 500_000, "{f:?}");
}

#[test]
fn sequential_writes_through_the_write_back_cache_run_at_the_media_rate() {
    let (_, h) = hdd("st3500641as");
    let mut m = model("st3500641as", "");
    let mut t = 0;
    let mut half = 0;
    for i in 0..128u64 {
        let d = m.service(Request::write(i, i << 20, 1 << 20), t);
        t = d.done_ns;
        if i == 63 {
            half = t;
        }
    }
    // The first 16 MiB land in the empty cache at link speed; after that the destage sets
    // the pace.
    let rate = (64u64 << 20) as f64 / ((t - half) as f64 / 1e9) / 1e6;
    assert!(within(rate, h.outer_mb_s, 0.05), "{rate} MB/s");
    let f = m.service(Request::flush(999), t);
    // Up to 16 MiB left dirty: at most a quarter second at 65 MB/s.
    assert!(
        f.service_ns() > 100_000_000 && f.service_ns() < 300_000_000,
        "{f:?}"
    );
}

#[test]
fn fua_writes_through_the_write_back_cache() {
    let mut m = model("st3500641as", "");
    let mut w = Request::write(0, 123 << 30, 4096);
    w.fua = true;
    let d = m.service(w, 0);
    assert!(!d.breakdown.cache_hit);
    assert!(d.service_ns() > 1_000_000, "{d:?}");
    let f = m.service(Request::flush(1), d.done_ns);
    assert!(f.service_ns() < 500_000, "FUA left nothing dirty: {f:?}");
}

/// Submits reads at scattered places at time 0 behind a first read that keeps the drive busy,
/// and returns the order served and the time all were done.
fn order(policy: QueuePolicy) -> (Vec<u64>, u64) {
    let mut m = model("st3500641as", "cache=off").with_policy(policy, 16);
    let gib = 1u64 << 30;
    m.submit(Request::read(0, 0, 4096), 0);
    let first = m.next(0).expect("idle drive takes the first");
    for (id, at) in [(1, 300), (2, 10), (3, 200), (4, 50), (5, 400), (6, 20)] {
        m.submit(Request::read(id, at * gib, 4096), 10);
    }
    let mut t = first.done_ns;
    let mut ids = Vec::new();
    while let Some(d) = m.next(t) {
        ids.push(d.id);
        t = d.done_ns;
    }
    (ids, t)
}

#[test]
fn queue_policies_reorder_and_fifo_does_not() {
    let mut m = model("st3500641as", "cache=off");
    let far = m.service(Request::read(0, 400 << 30, 4096), 0);
    assert!(far.breakdown.seek_cylinders > 100_000, "{far:?}");
    let (fifo, t_fifo) = order(QueuePolicy::Fifo);
    assert_eq!(fifo, vec![1, 2, 3, 4, 5, 6]);
    let (clook, t_clook) = order(QueuePolicy::Clook);
    assert_eq!(
        clook,
        vec![2, 6, 4, 3, 1, 5],
        "ascending from the heads at block 0"
    );
    let (sptf, t_sptf) = order(QueuePolicy::Sptf);
    assert_ne!(sptf, fifo);
    assert!(
        t_clook < t_fifo && t_sptf < t_fifo,
        "{t_fifo} {t_clook} {t_sptf}"
    );
}

#[test]
fn a_flush_is_not_overtaken() {
    let mut m = model("st3500641as", "").with_policy(QueuePolicy::Clook, 16);
    m.submit(Request::read(0, 0, 4096), 0);
    let mut t = m.next(0).expect("first").done_ns;
    m.submit(Request::write(1, 300 << 30, 4096), 1);
    m.submit(Request::flush(2), 2);
    m.submit(Request::read(3, 1 << 30, 4096), 3);
    let mut ids = Vec::new();
    while let Some(d) = m.next(t) {
        ids.push(d.id);
        t = d.done_ns;
    }
    assert_eq!(ids, vec![1, 2, 3]);
}

#[test]
fn ablations_remove_their_part() {
    let (p, _) = hdd("st3500641as");
    for (abl, check) in [("seek=off", 0usize), ("rotation=off", 1)] {
        let mut m = model("st3500641as", abl);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut t = 0;
        for id in 0..200 {
            let off = rng.gen_range(0..p.capacity_bytes / 4096) * 4096;
            let d = m.service(Request::read(id, off, 4096), t);
            let part = [d.breakdown.seek_ns, d.breakdown.rotation_ns][check];
            assert_eq!(part, 0, "{abl}: {d:?}");
            t = d.done_ns;
        }
    }
    let mut m = model("st3500641as", "constant=12ms");
    let mut t = 0;
    for id in 0..20 {
        let r = if id % 3 == 0 {
            Request::write(id, id << 30, 4096)
        } else {
            Request::read(id, id << 30, 65536)
        };
        let d = m.service(r, t);
        assert_eq!(d.service_ns(), 12_000_000);
        t = d.done_ns + 5;
    }
    let e = expectations(&p, &parse_ablations("constant=12ms").expect("abl")).expect("e");
    assert_eq!(e.qd1_random_4k_read_ms, 12.0);
}

#[test]
fn simulated_qd1_random_reads_match_the_expectation() {
    for name in ["st3500641as", "deskstar-7k250"] {
        let (p, _) = hdd(name);
        let abl = Ablations::default();
        let e = expectations(&p, &abl).expect("expectations");
        for (span, want) in [
            (1.0, e.qd1_random_4k_read_ms),
            (0.01, e.qd1_random_4k_read_1pct_ms),
        ] {
            let s = random_read_service(&p, &abl, 20_000, span, 11).expect("samples");
            let mean = s.iter().sum::<u64>() as f64 / s.len() as f64 / MS;
            assert!(
                within(mean, want, 0.01),
                "{name} span {span}: simulated {mean} ms, expected {want} ms"
            );
        }
        // Over the whole stroke: seek + half a revolution + a little, as DEVICES.md says.
        let rough = e.random_block_seek_ms.expect("seek") + 60e3 / 7200.0 / 2.0;
        assert!(e.qd1_random_4k_read_ms > rough && e.qd1_random_4k_read_ms < rough + 0.5);
    }
}

#[test]
fn demerit_is_the_rms_quantile_distance_over_the_mean() {
    let a: Vec<f64> = (0..1000).map(|i| 5.0 + f64::from(i) * 0.01).collect();
    assert_eq!(demerit(&a, &a), Some(0.0));
    let shifted: Vec<f64> = a.iter().map(|x| x + 1.0).collect();
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    let d = demerit(&a, &shifted).expect("demerit");
    assert!(within(d, 1.0 / mean, 1e-9), "{d}");
    assert_eq!(demerit(&[], &a), None);
}

#[test]
fn ssd_and_ram() {
    let mut m = model("sata-ssd", "");
    let d = m.service(Request::read(0, 1 << 30, 4096), 1000);
    assert_eq!(d.service_ns(), 100_000);
    // Channels serve in parallel: ten reads at once all finish near one latency.
    let mut m = model("sata-ssd", "");
    for id in 0..10 {
        m.submit(Request::read(id, id << 30, 4096), 0);
    }
    let mut last = 0;
    while let Some(d) = m.next(0) {
        last = last.max(d.done_ns);
    }
    assert!(last < 200_000, "{last}");
    // Sequential 1 MiB reads at QD1 run at the rate the expectations give.
    let p = load("sata-ssd").expect("profile");
    let e = expectations(&p, &Ablations::default()).expect("e");
    let rate = seq_rate(&mut model("sata-ssd", ""), 0, 32);
    assert!(
        within(rate, e.outer_mb_s.expect("rate"), 0.01),
        "{rate} vs {e:?}"
    );
    let mut m = model("ram", "");
    let d = m.service(Request::write(0, 0, 1 << 20), 5);
    assert_eq!((d.start_ns, d.done_ns), (5, 5));
}

#[test]
fn an_offset_places_the_image_on_the_disk() {
    let (p, _) = hdd("st3500641as");
    let m = model("st3500641as", "").with_offset(p.capacity_bytes - (1 << 30));
    assert!(m.fits(1 << 30));
    assert!(!m.fits(2 << 30));
    // At the inner edge a sequential stream runs at the inner rate.
    let mut m = m;
    let rate = seq_rate(&mut m, 0, 64);
    assert!(rate < 40.0, "{rate}");
}

#[test]
fn demerit_tells_the_model_from_a_flat_delay() {
    // Two samples of the same model are close; a flat delay with the same mean (the
    // first-order model Ruemmler & Wilkes measured against) is far.
    let (p, _) = hdd("st3500641as");
    let abl = Ablations::default();
    let f = |s: Vec<u64>| s.into_iter().map(|x| x as f64).collect::<Vec<f64>>();
    let a = f(random_read_service(&p, &abl, 5000, 1.0, 1).expect("a"));
    let b = f(random_read_service(&p, &abl, 5000, 1.0, 2).expect("b"));
    let mean = a.iter().sum::<f64>() / a.len() as f64;
    let flat = vec![mean; a.len()];
    let same = demerit(&a, &b).expect("demerit");
    let first_order = demerit(&a, &flat).expect("demerit");
    assert!(same < 0.02, "two samples of the model: {same}");
    assert!(first_order > 0.15, "flat delay: {first_order}");
}

/// A closed loop of `clients` hosts on `name`, each sending its next request a while after
/// its last reply (its think time passing on the disk's clock, as a host that kept time would
/// have sent it; with one client the same as on the wall, its think time coming after the stop), served as the server serves them on the disk's own clock; the reply
/// to the k-th request leaves `stall(k)` ns after it is due (a host that cannot keep time).
/// Returns every dispatch, on disk time, and the clock.
fn closed_loop(
    name: &str,
    clients: usize,
    requests: usize,
    stall: impl Fn(usize) -> u64,
) -> (Vec<Dispatch>, clock::DiskClock) {
    let mut m = model(name, "");
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut c = clock::DiskClock::default();
    let span = m
        .hdd()
        .map_or(1 << 30, |h| h.geometry().sectors() * SECTOR / 2);
    // Each client's next arrival (disk time), or None while its request is out.
    let mut next: Vec<Option<u64>> = (0..clients).map(|i| Some(i as u64 * 300_000)).collect();
    let mut owner = std::collections::HashMap::new();
    let mut due: Vec<Dispatch> = Vec::new();
    let mut out = Vec::new();
    let mut id = 0u64;
    while out.len() < requests {
        // The earliest event on the wall: an arrival, the drive's next command, a reply.
        let arrival = (0..clients)
            .filter_map(|i| next[i].map(|t| (c.wall(t), i)))
            .min();
        let ready = m.ready_at().map(|d| c.wall(d));
        let reply = due.iter().map(|d| c.wall(d.done_ns)).min();
        let first = [arrival.map(|a| a.0), ready, reply]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = first else { break };
        if arrival.is_some_and(|a| a.0 == t) {
            let (at, who) = arrival.expect("an arrival");
            let offset = rng.gen_range(0..span) / SECTOR * SECTOR;
            let req = if rng.gen_bool(0.3) {
                Request::write(id, offset, 64 << 10)
            } else {
                Request::read(id, offset, 4096)
            };
            m.submit(req, c.disk(at));
            owner.insert(id, who);
            next[who] = None;
            id += 1;
        } else if ready == Some(t) {
            let d = m.next(m.ready_at().expect("ready")).expect("a command");
            due.push(d);
        } else {
            let i = (0..due.len()).min_by_key(|&i| due[i].done_ns).expect("due");
            let d = due.swap_remove(i);
            let replied = c.wall(d.done_ns) + stall(out.len());
            c.replied(d.done_ns, replied);
            let who = owner[&d.id];
            next[who] = Some(c.disk(replied) + 200_000 + (d.id % 7) * 50_000);
            out.push(d);
        }
    }
    (out, c)
}

#[test]
fn a_stop_of_any_length_leaves_the_drive_as_it_was() {
    for name in ["deskstar-7k250", "st3500641as"] {
        for clients in [1, 4] {
            let (kept, clock) = closed_loop(name, clients, 400, |_| 0);
            assert_eq!(clock.pause_ns(), 0);
            // Stops from 1 ns to 2 s before every third reply.
            let (stopped, clock) = closed_loop(name, clients, 400, |k| {
                if k % 3 == 0 {
                    [1, 20_000, 7_000_000, 2_000_000_000][k / 3 % 4]
                } else {
                    0
                }
            });
            assert!(clock.stops() > 100 && clock.pause_ns() > 60_000_000_000);
            // Every request arrived, started and completed at the same disk time, and was
            // served in the same way (seek, rotation, cache) as on a host that kept time.
            let first = kept.iter().zip(&stopped).position(|(a, b)| a != b);
            assert_eq!(
                first.map(|i| (i, kept[i], stopped[i])),
                None,
                "{name}, {clients} clients"
            );
            assert_eq!(kept.len(), stopped.len());
        }
    }
}
