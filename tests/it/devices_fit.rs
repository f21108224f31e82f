//! `fsgauge devices fit` (and the read pairs of `devices check`) on an emulated disk: needs
//! root, loop devices and /dev/fuse, skipped with a printed reason without them. The bad-input
//! tests need nothing.

use crate::support::{assert_refused, have_fuse, have_program, Sandbox};

/// The real path on an emulated disk, whatever the machine's load: the fit runs, writes a
/// profile that loads with every fitted figure, and flags its own lateness when the emulator
/// fell behind its model (in the JSON and at the head of the file). How close the figures come
/// to the profile's is not asserted here, since that depends on the machine keeping real time:
/// the fit's arithmetic is checked on the model's virtual clock (src/device/fit/tests.rs)
/// and its accuracy on this machine is stated by `scripts/bench-device`.
#[test]
fn fit_on_an_emulated_disk_writes_a_loadable_profile_and_flags_its_lateness() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let file = sb.path().join("fitted.toml");
    let out = sb
        .cmd()
        .args([
            "devices",
            "fit",
            "deskstar-7k250",
            "--seconds",
            "2",
            "--json",
            "--out",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "devices fit failed: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let fitted: Vec<(&str, f64)> = doc["comparison"]
        .as_array()
        .expect("a comparison")
        .iter()
        .map(|c| {
            (
                c["parameter"].as_str().unwrap(),
                c["fitted"].as_f64().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = fitted.iter().map(|f| f.0).collect();
    assert_eq!(
        names,
        [
            "capacity_bytes",
            "rpm",
            "outer_mb_s",
            "inner_mb_s",
            "track_to_track_ms",
            "average_seek_ms",
            "full_stroke_ms",
            "overhead_ms"
        ]
    );
    assert!(
        fitted.iter().all(|f| f.1.is_finite() && f.1 >= 0.0),
        "{fitted:?}"
    );
    // The check behind it carries the pair benchmarks.
    assert_eq!(
        doc["check"]["seek_curve"].as_array().map(Vec::len),
        Some(12)
    );
    assert!(doc["check"]["same_track"]["revolution_ms"]
        .as_f64()
        .is_some());
    // Its lateness flagged exactly when the emulator fell behind (p99 over 0.5 ms).
    let p99 = doc["check"]["lateness"]["p99_ms"]
        .as_f64()
        .expect("the check's lateness");
    let warnings = doc["warnings"].as_array().expect("the fit's warnings");
    let text = std::fs::read_to_string(&file).unwrap();
    let flagged = warnings.iter().any(|w| {
        w.as_str()
            .unwrap()
            .contains("the emulator fell behind its model")
    });
    assert_eq!(flagged, p99 > 0.5, "p99 {p99} ms, warnings {warnings:?}");
    assert_eq!(
        text.starts_with("# warning: the emulator fell behind its model"),
        p99 > 0.5,
        "p99 {p99} ms:\n{text}"
    );
    let show = sb
        .cmd()
        .args(["devices", "show", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["profile"]["name"], "fitted-deskstar-7k250");
    let sourced = shown["profile"]["sourced"].as_array().unwrap();
    for (name, _) in &fitted {
        let src = sourced
            .iter()
            .find(|s| s["name"] == *name)
            .map(|s| s["source"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("the fitted profile has no {name}"));
        assert!(
            src.starts_with("fitted by fsgauge devices fit on"),
            "{name}: {src}"
        );
    }
    sb.assert_clean();
}

/// `devices check --json` gives the server's CPU time per request of every micro-benchmark on
/// an emulated disk (not only of the whole check), so a script can hold each kind of request
/// against its own CPU goal. Its size depends on the machine, so only its presence and range
/// are asserted; the arithmetic is the unit tests' of `check::cpu_us_per_request` (src/device/check.rs).
#[test]
fn check_gives_the_server_cpu_per_request_of_each_benchmark() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .quick_ram_check()
        .args(["--write", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "devices check failed: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let benches = doc["benches"].as_array().expect("benches");
    let names: Vec<&str> = benches
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "QD1 random 4K read, whole stroke",
            "QD1 random 4K read, first 1%",
            "sequential 1M read, outer zone",
            "sequential 1M read, inner zone",
            "QD1 random 4K write + flush"
        ]
    );
    for b in benches {
        let cpu = b["server_cpu_us_per_request"].as_f64();
        assert!(
            cpu.is_some_and(|c| c.is_finite() && c >= 0.0),
            "{}: server_cpu_us_per_request {cpu:?}",
            b["name"]
        );
    }
    assert!(doc["server_cpu_us_per_request"].as_f64().is_some());
    sb.assert_clean();
}

/// The arithmetic of `scripts/bench-device --loads` (records from fsgauge's and fio's JSON, the
/// mean and 95% interval, the after/before ratio's interval from log ratios) passes its own
/// checks against worked figures.
#[test]
fn bench_device_loads_arithmetic_passes_its_selftest() {
    if !have_program("python3") {
        return;
    }
    assert_selftest(
        "scripts/bench_device_loads.py",
        "selftest",
        "bench_device_loads.py selftest: ok",
    );
}

/// Runs a bench script's own checks (`python3 SCRIPT ARG`) and wants `said` as all it prints.
fn assert_selftest(script: &str, arg: &str, said: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(arg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), said);
}

#[test]
fn fit_refuses_bad_input_and_leaves_nothing() {
    let sb = Sandbox::new();
    let file = sb.path().join("not-a-device");
    std::fs::write(&file, b"").unwrap();
    for (args, needle) in [
        (vec!["floppy"], "no device profile \"floppy\""),
        (vec!["/dev/null"], "is not a block device"),
        (vec!["/dev/fsgauge-no-such"], "/dev/fsgauge-no-such"),
        (
            vec!["deskstar-7k250", "--seconds", "0"],
            "--seconds 0 is out of range",
        ),
        (vec!["deskstar-7k250", "--seconds", "9999"], "out of range"),
        (vec!["ram"], "not a rotating disk"),
        (vec!["deskstar-7k250:seek=off"], "without ablations"),
    ] {
        let out = sb
            .cmd()
            .args(["devices", "fit"])
            .args(&args)
            .arg("--out")
            .arg(sb.path().join("x.toml"))
            .output()
            .unwrap();
        assert_refused(&out, &format!("devices fit {args:?}"), &[needle]);
        assert!(!sb.path().join("x.toml").exists());
    }
    let out = sb
        .cmd()
        .args(["devices", "check", "/dev/null"])
        .output()
        .unwrap();
    assert_refused(&out, "devices check /dev/null", &["is not a block device"]);
    sb.assert_clean();
}

#[test]
fn fit_help_says_what_it_measures_how_long_and_what_to_do_with_it() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(["devices", "fit", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for n in [
        "same-track",
        "seek curve",
        "6 × seconds",
        "--out",
        "devices show",
        "--device-model",
    ] {
        assert!(help.contains(n), "help lacks {n:?}:\n{help}");
    }
}

/// The stall table's arithmetic (`scripts/bench_device_stalls.py`: the goals' verdicts, the
/// paired interval of stalled/plain on the log scale) passes its own checks.
#[test]
fn bench_device_stalls_arithmetic_passes_its_selftest() {
    if !have_program("python3") {
        return;
    }
    assert_selftest(
        "scripts/bench_device_stalls.py",
        "--selftest",
        "selftest ok",
    );
}
