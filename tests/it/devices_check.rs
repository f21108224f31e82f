//! `fsgauge devices check` through the one exporter: every `--format` on stdout or to `-o
//! FILE`. The emulated-disk tests need root, loop devices and /dev/fuse, skipped with a printed
//! reason without them; the bad-input test needs nothing.

use crate::support::{assert_refused, have_fuse, Sandbox};

const BENCHES: [&str; 4] = [
    "QD1 random 4K read, whole stroke",
    "QD1 random 4K read, first 1%",
    "sequential 1M read, outer zone",
    "sequential 1M read, inner zone",
];

/// `--format json` is the check itself as JSON: every benchmark with its figures, the seek
/// curve and the server's lateness (the figures the text table shows are the same report's:
/// src/device/calibrate/page.rs checks the two agree to the digit).
#[test]
fn check_ram_with_format_json_prints_the_check_as_json() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .quick_ram_check()
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "devices check failed: {stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["target"], "ram");
    let benches = doc["benches"].as_array().expect("benches");
    let names: Vec<&str> = benches
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, BENCHES);
    for b in benches {
        let requests = b["requests"].as_u64().unwrap();
        assert!(requests > 0, "{b}");
        assert!(b["measured"].as_f64().is_some_and(|m| m > 0.0), "{b}");
        // Timed per request by measure's recorder: its percentiles are there.
        let (p50, p99) = (b["p50_ms"].as_f64().unwrap(), b["p99_ms"].as_f64().unwrap());
        assert!(p50 > 0.0 && p50 <= p99, "{b}");
    }
    assert_eq!(doc["seek_curve"].as_array().map(Vec::len), Some(12));
    assert!(doc["lateness"]["requests"].as_u64().is_some_and(|n| n > 0));
    sb.assert_clean();
}

/// `--format html -o F` writes one self-contained page of the check's tables, like every
/// other command's html, and says where it went; stdout stays empty.
#[test]
fn check_with_format_html_writes_a_report_page_to_the_file() {
    if !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let file = sb.path().join("check.html");
    let out = sb
        .quick_ram_check()
        .args(["--format", "html", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "devices check failed: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(&format!("devices check written to {}", file.display())),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("<title>fsgauge devices check ram</title>"),
        "{html}"
    );
    // The benchmarks, the seek curve, the same-track reads and the server: four tables.
    assert_eq!(html.matches("<table").count(), 4, "{html}");
    for b in BENCHES {
        assert!(
            html.contains(&format!("<td class=\"l\">{b}</td>")),
            "{b} missing from\n{html}"
        );
    }
    assert!(html.trim_end().ends_with("</html>"));
    std::fs::remove_file(&file).unwrap();
    sb.assert_clean();
}

/// A bad `-o` is refused before any device is made: exit 2, naming the flag and the path.
#[test]
fn check_refuses_a_bad_output_file_before_it_starts_a_disk() {
    let sb = Sandbox::new();
    let bad = sb.path().join("no-such-dir").join("check.html");
    let out = sb
        .quick_ram_check()
        .args(["-o"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_refused(
        &out,
        "devices check -o into a missing directory",
        &[&format!("-o {}", bad.display()), "nothing was done"],
    );
    sb.assert_clean();
}
