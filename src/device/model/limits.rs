//! The model's arithmetic at the edges of what the profiles' declared ranges and the ablations
//! allow: no clock wraps, no time runs backwards, and every service time fits the server's
//! histograms ([`LONGEST_NS`], which they are made to hold), for any profile the parser accepts.

use proptest::prelude::*;

use super::hdd::{Geometry, SeekCurve};
use super::*;
use crate::device::profile::{
    load, parse, HddParams, ParamDecl, ParamType, SsdParams, HDD_PARAMS, SSD_PARAMS,
};

/// The declared range of a numeric parameter.
fn range(decls: &[ParamDecl], name: &str) -> (f64, f64) {
    match decls.iter().find(|d| d.name == name).map(|d| d.ty) {
        Some(ParamType::Number { min, max }) => (min, max),
        _ => panic!("{name} is a declared number"),
    }
}

/// A value of `name`: its minimum, its maximum, or `f` of the way between (`pick` chooses).
fn value(decls: &[ParamDecl], name: &str, (pick, f): (u8, f64)) -> f64 {
    let (lo, hi) = range(decls, name);
    match pick % 3 {
        0 => lo,
        1 => hi,
        _ => lo + f * (hi - lo),
    }
}

/// A profile's text with these parameters (as `devices show --toml` writes one), parsed as a
/// user's file is: None when the parser refuses it.
fn parsed(kind: &str, capacity: f64, params: &impl serde::Serialize) -> Option<Profile> {
    let mut text = format!(
        "name = \"edge\"\nkind = \"{kind}\"\ndescription = \"d\"\n[parameters]\ncapacity_bytes = {{ value = {capacity:?}, source = \"t\" }}\n"
    );
    let json = serde_json::to_value(params).expect("parameters serialize");
    for (k, v) in json.as_object().expect("a table") {
        text.push_str(&format!("{k} = {{ value = {v}, source = \"t\" }}\n"));
    }
    parse(&text, "edge").ok()
}

/// A rotating disk from declared values (each its minimum, maximum or between), its seek
/// figures ordered and its average seek inside what the curve can reach.
fn hdd_profile(picks: &[(u8, f64)], read_ahead: bool, write_cache: bool) -> Option<Profile> {
    let mut picks = picks.iter().copied().chain(std::iter::repeat((2, 0.5)));
    let mut v = |name: &str| value(HDD_PARAMS, name, picks.next().unwrap_or((2, 0.5)));
    let capacity = v("capacity_bytes");
    let mut h = HddParams::from_figures(&mut v, read_ahead, write_cache, QueuePolicy::Fifo);
    // Ordered as the parser demands; the drawn average seek is a place (0 to 50) between the
    // least and the most the curve can reach.
    h.inner_mb_s = h.inner_mb_s.min(h.outer_mb_s);
    h.full_stroke_ms = h.full_stroke_ms.max(h.track_to_track_ms * 2.0);
    let (tt, full) = (h.track_to_track_ms, h.full_stroke_ms);
    let drawn = std::mem::take(&mut h.average_seek_ms);
    let cylinders = Geometry::new(&h, capacity as u64).ok()?.cylinders();
    let (lo, hi) = SeekCurve::average_range(tt * 1e6, full * 1e6, cylinders);
    h.average_seek_ms = (lo + drawn / 50.0 * (hi - lo)) / 1e6;
    parsed("hdd", capacity, &h)
}

fn ssd_profile(picks: &[(u8, f64)], write_cache: bool) -> Option<Profile> {
    let mut picks = picks.iter().copied().chain(std::iter::repeat((2, 0.5)));
    let mut v = |name: &str| value(SSD_PARAMS, name, picks.next().unwrap_or((2, 0.5)));
    let capacity = v("capacity_bytes");
    parsed("ssd", capacity, &SsdParams::from_figures(v, write_cache))
}

/// Serves `reqs` one at a time (each arriving its gap after the previous completes) and checks
/// every dispatch: arrival ≤ start ≤ completion, service within the histograms.
fn serve_all(m: &mut DeviceModel, capacity: u64, reqs: &[(u8, f64, u64, u64)]) {
    let mut t = 0u64;
    for (id, &(op, at, sectors, gap)) in reqs.iter().enumerate() {
        let len = sectors * SECTOR;
        let offset = (at * capacity.saturating_sub(len) as f64) as u64 / SECTOR * SECTOR;
        let id = id as u64;
        let req = match op % 4 {
            0 => Request::read(id, offset, len),
            1 => Request::write(id, offset, len),
            2 => Request {
                fua: true,
                ..Request::write(id, offset, len)
            },
            _ => Request::flush(id),
        };
        let d = m.service(req, t.saturating_add(gap));
        assert!(
            d.arrival_ns <= d.start_ns && d.start_ns <= d.done_ns,
            "time ran backwards: {d:?}"
        );
        assert!(
            d.service_ns() <= LONGEST_NS,
            "{req:?} took {} ns, beyond the histograms' {LONGEST_NS}",
            d.service_ns()
        );
        t = d.done_ns;
    }
}

fn requests() -> impl Strategy<Value = Vec<(u8, f64, u64, u64)>> {
    // Up to 1 MiB a request (the server's largest), gaps up to 2 s.
    prop::collection::vec(
        (0u8..4, 0.0f64..1.0, 1u64..=2048, 0u64..2_000_000_000),
        1..40,
    )
}

fn picks(n: usize) -> impl Strategy<Value = Vec<(u8, f64)>> {
    prop::collection::vec((0u8..3, 0.0f64..1.0), n)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_declared_disk_keeps_its_clock(
        picks in picks(HDD_PARAMS.len()),
        (read_ahead, write_cache) in (any::<bool>(), any::<bool>()),
        (no_seek, no_rotation, no_cache) in (any::<bool>(), any::<bool>(), any::<bool>()),
        reqs in requests(),
    ) {
        let p = hdd_profile(&picks, read_ahead, write_cache);
        prop_assume!(p.is_some());
        let p = p.expect("assumed");
        let abl = Ablations { no_seek, no_rotation, no_cache, constant_ns: None };
        let mut m = DeviceModel::new(&p, &abl).expect("a parsed profile builds its model");
        serve_all(&mut m, p.capacity_bytes, &reqs);
    }

    #[test]
    fn every_declared_ssd_keeps_its_clock(
        picks in picks(SSD_PARAMS.len()),
        write_cache in any::<bool>(),
        reqs in requests(),
    ) {
        let p = ssd_profile(&picks, write_cache).expect("an SSD has no figures that must agree");
        let mut m = DeviceModel::new(&p, &Ablations::default()).expect("model");
        serve_all(&mut m, p.capacity_bytes, &reqs);
    }
}

/// The longest a flush can take: the largest cache the declarations allow, full of dirty
/// data, destaged at the slowest media rate with the slowest mechanics. It must fit the
/// histograms (a larger cache did not: 10^12 bytes took 10^15 ns).
#[test]
fn a_flush_of_the_largest_cache_at_the_slowest_rate_fits_the_histograms() {
    let hi = |n: &str| range(HDD_PARAMS, n).1;
    let lo = |n: &str| range(HDD_PARAMS, n).0;
    // The slowest mechanics and media, the largest cache in one segment.
    let slowest = |n: &str| match n {
        "heads" | "write_settle_ms" | "head_switch_ms" | "cylinder_switch_ms" => hi(n),
        // The longest stroke whose average a √-then-linear curve keeps within its maximum.
        "full_stroke_ms" => hi(n).min(hi("average_seek_ms") * 1.8),
        // A fast link fills the cache faster than the media drains it.
        "link_mb_s" | "cache_bytes" => hi(n),
        "cache_segments" | "sptf_window" => 1.0,
        "average_seek_ms" => 0.0,
        _ => lo(n),
    };
    let mut h = HddParams::from_figures(slowest, false, true, QueuePolicy::Fifo);
    let capacity = hi("capacity_bytes");
    let cyl = Geometry::new(&h, capacity as u64)
        .expect("geometry")
        .cylinders();
    let (avg_lo, avg_hi) =
        SeekCurve::average_range(h.track_to_track_ms * 1e6, h.full_stroke_ms * 1e6, cyl);
    h.average_seek_ms = ((avg_lo + avg_hi) / 2e6)
        .min(hi("average_seek_ms"))
        .max(avg_lo / 1e6);
    let p = parsed("hdd", capacity, &h).expect("the slowest disk is a valid profile");
    let mut m = DeviceModel::new(&p, &Ablations::default()).expect("model");
    let chunk = 1u64 << 20;
    let mut t = 0;
    for id in 0..h.cache_bytes / chunk {
        t = m.service(Request::write(id, id * chunk, chunk), t).done_ns;
    }
    let d = m.service(Request::flush(u64::MAX), t);
    assert!(
        d.service_ns() > 1_000_000_000_000,
        "the cache was full: {}",
        d.service_ns()
    );
    assert!(
        d.service_ns() <= LONGEST_NS,
        "a flush took {} ns, beyond the histograms' {LONGEST_NS}",
        d.service_ns()
    );
}

/// `constant=` takes its time on a clock that never wraps, even at a time no ablation allows.
#[test]
fn a_constant_time_never_wraps_the_clock() {
    let p = load("ram").expect("built-in");
    let abl = Ablations {
        constant_ns: Some(10_000_000_000),
        ..Ablations::default()
    };
    let mut m = DeviceModel::new(&p, &abl).expect("model");
    let d = m.service(Request::read(1, 0, 4096), 7);
    assert_eq!((d.start_ns, d.done_ns), (7, 10_000_000_007));
    let abl = Ablations {
        constant_ns: Some(u64::MAX),
        ..Ablations::default()
    };
    let mut m = DeviceModel::new(&p, &abl).expect("model");
    let d = m.service(Request::read(1, 0, 4096), 1_000);
    assert_eq!(d.done_ns, u64::MAX, "{d:?}");
    assert_eq!(d.service_ns(), u64::MAX - 1_000);
    // The drive stays busy to the end of time rather than free in the past.
    m.submit(Request::read(2, 0, 4096), 2_000);
    assert_eq!(m.ready_at(), Some(u64::MAX));
}
