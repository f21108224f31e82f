//! The fit on the model itself, on a virtual clock: the benchmarks' own request sequences
//! served by the model of a profile must give back the profile's figures.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::device::calibrate::check;
use crate::device::calibrate::pairs::{self, ModelReader, Placement};
use crate::device::model::DeviceModel;
use crate::device::{load_ref, Ablations};

/// Sequential 1 MiB reads from `start` on the model, as `devices check` issues them, MB/s.
fn sequential(m: &DeviceModel, start: u64, n: u64) -> f64 {
    check::sequential_on_model(&mut m.clone(), start, n).expect("the model takes time")
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
        inner_mb_s: sequential(&model, check::inner_zone_start(size), 100),
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

/// Fits the model of the built-in profile `name` (on `seed`'s request sequence) and checks
/// each figure against the profile's, track-to-track too where `track_to_track`.
fn assert_fit_recovers(name: &str, seed: u64, track_to_track: bool) -> Fitted {
    let (f, h) = fit_profile(name, 20.0, seed);
    let mut figures = vec![
        ("rpm", f.rpm, h.rpm, 0.01),
        ("average seek", f.average_seek_ms, h.average_seek_ms, 0.05),
        ("full stroke", f.full_stroke_ms, h.full_stroke_ms, 0.10),
        ("outer rate", f.outer_mb_s, h.outer_mb_s, 0.05),
        ("inner rate", f.inner_mb_s, h.inner_mb_s, 0.05),
        ("overhead", f.overhead_ms, h.overhead_ms, 0.01),
    ];
    if track_to_track {
        let tt = (
            "track to track",
            f.track_to_track_ms,
            h.track_to_track_ms,
            0.05,
        );
        figures.push(tt);
    }
    for (what, got, want, tol) in figures {
        within(what, got, want, tol);
    }
    f
}

#[test]
fn the_fit_recovers_deskstar_from_its_model() {
    let f = assert_fit_recovers("deskstar-7k250", 1, true);
    assert!(f.notes.is_empty(), "{:?}", f.notes);
}

#[test]
fn the_fit_recovers_st3500641as_from_its_model() {
    // Its track-to-track (0.8 ms) comes out near 1.1 ms: the short distances' seeks are
    // within the uncertainty of the fixed part of a read that they are found under.
    assert_fit_recovers("st3500641as", 2, false);
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
    assert_eq!(h.queue, crate::device::QueuePolicy::Fifo);
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

/// A check whose server's lateness p99 was `p99_ms` (None: a real device, no server).
fn check_with_lateness(p99_ms: Option<f64>) -> CheckReport {
    CheckReport {
        target: "deskstar-7k250".into(),
        profile: Some("deskstar-7k250".into()),
        device: "/dev/loop9".into(),
        size_bytes: 1 << 30,
        benches: Vec::new(),
        lateness: p99_ms.map(|p99_ms| crate::device::stats::Lateness {
            requests: 1000,
            p50_ms: 0.05,
            p99_ms,
            max_ms: 2.5,
            late: 10,
            early: 0,
            pause_ms: 0.0,
            pauses: 0,
        }),
        server_cpu_us_per_request: None,
        server_requests: Some(1000),
        seek_curve: Vec::new(),
        same_track: None,
        runs: Default::default(),
    }
}

#[test]
fn a_fit_made_while_the_emulator_fell_behind_says_so() {
    let late = lateness_warnings(&check_with_lateness(Some(0.86)));
    assert_eq!(late.len(), 1, "{late:?}");
    assert!(
        late[0].contains("lateness p99 0.860 ms, max 2.500 ms, over 0.5 ms"),
        "{late:?}"
    );
    assert!(lateness_warnings(&check_with_lateness(Some(0.5))).is_empty());
    assert!(lateness_warnings(&check_with_lateness(None)).is_empty());
}
