//! The fit on the model itself, on a virtual clock: the benchmarks' own request sequences
//! served by the model of a profile must give back the profile's figures.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::testbed::device::model::{DeviceModel, Request};
use crate::testbed::device::pairs::{self, ModelReader, Placement};
use crate::testbed::device::{load_ref, Ablations};

const MIB: u64 = 1 << 20;

/// Sequential 1 MiB reads from `start` on the model, as `devices check` issues them, MB/s.
fn sequential(m: &DeviceModel, start: u64, n: u64) -> f64 {
    let mut m = m.clone();
    let mut now = 0;
    for i in 0..n {
        now = m
            .service(Request::read(i, start + i * MIB, MIB), now)
            .done_ns;
    }
    (n * MIB) as f64 / (now as f64 / 1e9) / 1e6
}

fn fit_profile(name: &str, seconds: f64, seed: u64) -> (Fitted, HddParams) {
    let (p, _) = load_ref(name).expect("a built-in profile");
    let model = DeviceModel::new(&p, &Ablations::default()).expect("a valid model");
    let geo = model.hdd().expect("an hdd").geometry().clone();
    let size = p.capacity_bytes / 4096 * 4096;
    let place = Placement::new(size, Some((geo, 0)));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ns = (seconds * 1e9) as u64;
    let mut r = ModelReader::new(model.clone());
    let seek = pairs::seek_curve(&mut r, &place, ns, &mut rng).expect("model reads");
    let same = pairs::same_track(&mut r, &place, ns, &mut rng).expect("model reads");
    let input = FitInput {
        size,
        outer_mb_s: sequential(&model, 0, 100),
        inner_mb_s: sequential(&model, size - 200 * MIB, 100),
        same_track: &same,
        seek: &seek,
        template: &p,
    };
    let f = fit(&input).expect("a fit");
    let Params::Hdd(h) = p.params else {
        panic!("not an hdd")
    };
    (f, h)
}

fn within(what: &str, got: f64, want: f64, tol: f64) {
    let e = got / want - 1.0;
    assert!(
        e.abs() <= tol,
        "{what}: fitted {got:.3}, profile {want:.3} ({:+.1}%, allowed ±{:.0}%)",
        e * 100.0,
        tol * 100.0
    );
}

#[test]
fn the_fit_recovers_deskstar_from_its_model() {
    let (f, h) = fit_profile("deskstar-7k250", 20.0, 1);
    within("rpm", f.rpm, h.rpm, 0.01);
    within("average seek", f.average_seek_ms, h.average_seek_ms, 0.05);
    within("full stroke", f.full_stroke_ms, h.full_stroke_ms, 0.10);
    within("outer rate", f.outer_mb_s, h.outer_mb_s, 0.05);
    within("inner rate", f.inner_mb_s, h.inner_mb_s, 0.05);
    assert!(
        (f.overhead_ms - h.overhead_ms).abs() < 0.05,
        "overhead {} vs {}",
        f.overhead_ms,
        h.overhead_ms
    );
    assert!(f.notes.is_empty(), "{:?}", f.notes);
}

#[test]
fn the_fit_recovers_st3500641as_from_its_model() {
    let (f, h) = fit_profile("st3500641as", 20.0, 2);
    within("rpm", f.rpm, h.rpm, 0.01);
    within("average seek", f.average_seek_ms, h.average_seek_ms, 0.05);
    within("full stroke", f.full_stroke_ms, h.full_stroke_ms, 0.10);
    within("outer rate", f.outer_mb_s, h.outer_mb_s, 0.05);
    within("inner rate", f.inner_mb_s, h.inner_mb_s, 0.05);
}

#[test]
fn the_fitted_profile_file_loads_with_the_fitted_figures() {
    let (p, _) = load_ref("deskstar-7k250").expect("built-in");
    let (f, _) = fit_profile("deskstar-7k250", 5.0, 3);
    let text = profile_toml(&f, &p, "fitted-test", "/dev/loop9", "2025-01-01");
    let q = profile::parse(&text, "fitted").expect("the fitted profile loads");
    let Params::Hdd(h) = &q.params else {
        panic!("not an hdd")
    };
    assert_eq!(h.rpm, f.rpm.round());
    assert_eq!(h.queue, crate::testbed::device::QueuePolicy::Fifo);
    let src = |n: &str| {
        q.sourced
            .iter()
            .find(|s| s.name == n)
            .map(|s| s.source.clone())
            .unwrap_or_default()
    };
    assert!(src("average_seek_ms")
        .starts_with("fitted by fsgauge devices fit on /dev/loop9, 2025-01-01"));
    assert!(src("heads").starts_with("not fitted, from profile deskstar-7k250"));
}

#[test]
fn the_revolution_is_the_slope_of_time_against_phase() {
    // 8.333 ms per revolution, a fixed 0.3 ms, no noise.
    let pairs: Vec<(Option<f64>, f64)> = (0..100)
        .map(|i| {
            let ph = i as f64 / 100.0;
            (Some(ph), 0.3e6 + ph * 8.333e6)
        })
        .collect();
    let r = pairs::revolution_ns(&pairs).expect("enough pairs");
    within("revolution", r, 8.333e6, 1e-9);
    // Without phases: the spread of uniform times.
    let blind: Vec<(Option<f64>, f64)> = pairs.iter().map(|p| (None, p.1)).collect();
    within(
        "revolution, blind",
        pairs::revolution_ns(&blind).expect("enough"),
        8.333e6,
        0.03,
    );
    assert!(pairs::revolution_ns(&blind[..10]).is_none());
}
