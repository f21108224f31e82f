//! `fsgauge devices fit` (and the read pairs of `devices check`) on an emulated disk: needs
//! root, loop devices and /dev/fuse, skipped with a printed reason without them. The bad-input
//! tests need nothing.

use crate::support::{assert_refused, have_fuse, Sandbox};

fn figure(doc: &serde_json::Value, name: &str) -> (f64, f64) {
    let c = doc["comparison"]
        .as_array()
        .expect("a comparison")
        .iter()
        .find(|c| c["parameter"] == name)
        .unwrap_or_else(|| panic!("no {name} in the comparison"));
    (
        c["fitted"].as_f64().unwrap(),
        c["profile"].as_f64().unwrap(),
    )
}

#[test]
fn fit_recovers_the_emulated_deskstar_and_writes_a_loadable_profile() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let file = sb.path().join("fitted.toml");
    // Six seconds a benchmark: with two, the fitted average seek spread by about 4% from
    // run to run here (7.98 to 8.74 ms against the profile's 8.2, five runs), too near the
    // 10% the test allows. A fit is of the drive only when the emulator kept up with its model: with the other
    // tests loading both cores it may not (lateness p99 over 0.5 ms, which the check itself
    // flags), and then its timings are the machine's. Such a fit is made again, up to three
    // times in all.
    let mut doc = serde_json::Value::Null;
    for attempt in 1..=3 {
        let out = sb
            .cmd()
            .args([
                "devices",
                "fit",
                "deskstar-7k250",
                "--seconds",
                "6",
                "--json",
                "--out",
            ])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "devices fit failed: {stderr}");
        doc = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        let p99 = doc["check"]["lateness"]["p99_ms"]
            .as_f64()
            .expect("the check's lateness");
        if p99 <= 0.5 {
            break;
        }
        eprintln!("fit {attempt}: the emulator fell behind (lateness p99 {p99} ms)");
        assert!(attempt < 3, "the emulator fell behind in every fit");
    }
    let (rpm, want) = figure(&doc, "rpm");
    assert!((rpm / want - 1.0).abs() < 0.05, "rpm {rpm} vs {want}");
    let (seek, want) = figure(&doc, "average_seek_ms");
    assert!(
        (seek / want - 1.0).abs() < 0.10,
        "average seek {seek} vs {want}"
    );
    // The check behind it carries the new benchmarks.
    assert_eq!(
        doc["check"]["seek_curve"].as_array().map(Vec::len),
        Some(12)
    );
    assert!(doc["check"]["same_track"]["revolution_ms"]
        .as_f64()
        .is_some());
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
    let src = shown["profile"]["sourced"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "rpm")
        .map(|s| s["source"].as_str().unwrap().to_string())
        .unwrap();
    assert!(src.starts_with("fitted by fsgauge devices fit on"), "{src}");
    sb.assert_clean();
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
