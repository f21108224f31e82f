//! The check's page: its JSON, text and tables hold the same figures, and every format shows
//! them.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::analysis::report::export::{render, Format};
use crate::device::calibrate::pairs::{SameTrack, SeekPoint};
use crate::device::stats::Lateness;

fn lateness(p99_ms: f64) -> Lateness {
    Lateness {
        requests: 2345,
        p50_ms: 0.0123,
        p99_ms,
        max_ms: 1.75,
        late: 7,
        early: 0,
        pause_ms: 3.25,
        pauses: 9,
    }
}

fn bench(name: &str, unit: &'static str, measured: f64, modelled: f64) -> Bench {
    Bench {
        name: name.into(),
        unit,
        measured,
        modelled: Some(modelled),
        error: Some(measured / modelled - 1.0),
        requests: 417,
        demerit: (unit == "ms").then_some(0.0734),
        p50_ms: (unit == "ms").then_some(8.1234),
        p99_ms: (unit == "ms").then_some(17.5),
        lateness: Some(lateness(0.0456)),
        server_cpu_us_per_request: Some(12.34),
    }
}

/// A check of an emulated deskstar as `devices check` makes it, with figures of every
/// shape: ms and MB/s benchmarks, a seek curve, same-track reads and the server.
fn report(p99_ms: f64) -> CheckReport {
    CheckReport {
        target: "deskstar-7k250".into(),
        profile: Some("deskstar-7k250".into()),
        device: "/dev/loop7".into(),
        size_bytes: 250_000_000_000,
        benches: vec![
            bench("QD1 random 4K read, whole stroke", "ms", 13.0571, 12.9432),
            bench("sequential 1M read, outer zone", "MB/s", 61.234, 60.01),
        ],
        lateness: Some(lateness(p99_ms)),
        server_cpu_us_per_request: Some(9.87),
        server_requests: Some(2345),
        seek_curve: vec![SeekPoint {
            distance_mb: 1234.56,
            cylinders: Some(3210.0),
            pairs: 42,
            measured_ms: 9.8765,
            modelled_ms: Some(9.5),
            error: Some(0.0396),
        }],
        same_track: Some(SameTrack {
            pairs: 77,
            by_geometry: true,
            mean_ms: 4.321,
            modelled_mean_ms: Some(4.2),
            revolution_ms: Some(8.41),
            modelled_revolution_ms: Some(8.333),
            error: Some(0.0092),
            follow_on_ms: Some(0.123),
            modelled_follow_on_ms: Some(0.12),
        }),
        runs: Default::default(),
    }
}

fn rendered(r: &CheckReport, f: Format) -> String {
    String::from_utf8(render(&page(r).unwrap().into(), f).unwrap()).unwrap()
}

/// The cells of the text table's line of a benchmark: its name, then the columns.
fn text_row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let line = text
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no line for {name} in\n{text}"));
    line[name.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn the_json_holds_the_figures_the_text_table_shows() {
    let r = report(0.0456);
    let text = rendered(&r, Format::Table);
    let doc: serde_json::Value = serde_json::from_str(&rendered(&r, Format::Json)).unwrap();
    let benches = doc["benches"].as_array().unwrap();
    assert_eq!(benches.len(), 2);
    for b in benches {
        let name = b["name"].as_str().unwrap();
        let unit = b["unit"].as_str().unwrap();
        let row = text_row(&text, name);
        let n = |k: &str| b[k].as_f64().unwrap();
        assert_eq!(row[0], format!("{} {unit}", figure(unit, n("measured"))));
        assert_eq!(row[1], format!("{} {unit}", figure(unit, n("modelled"))));
        assert_eq!(row[2], format!("{:+.1}%", n("error") * 100.0));
        assert_eq!(row[4], b["requests"].as_u64().unwrap().to_string());
    }
    // The figures themselves, as the text shows them.
    assert_eq!(
        text_row(&text, "QD1 random 4K read, whole stroke")[..5],
        ["13.057 ms", "12.943 ms", "+0.9%", "7.3%", "417"]
    );
    assert_eq!(
        text_row(&text, "sequential 1M read, outer zone")[..5],
        ["61.2 MB/s", "60.0 MB/s", "+2.0%", "-", "417"]
    );
    assert_eq!(doc["lateness"]["p99_ms"].as_f64(), Some(0.0456));
    assert!(text.contains("lateness p50 0.012 ms, p99 0.046 ms, max 1.750 ms, 7 over 0.5 ms"));
}

#[test]
fn csv_markdown_and_html_show_the_checks_tables() {
    let r = report(0.0456);
    let csv = rendered(&r, Format::Csv);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("benchmark,unit,measured,modelled,error %,demerit %,requests,p50 ms,p99 ms,lateness p50 ms,lateness p99 ms,lateness max ms,pause ms,server CPU µs/request")
    );
    assert_eq!(
        lines.next(),
        Some("\"QD1 random 4K read, whole stroke\",ms,13.057,12.943,+0.9,7.3,417,8.123,17.500,0.012,0.046,1.750,3.250,12.3")
    );
    assert!(csv.contains("\n1234.6,3210,42,9.877,9.500,+4.0\n"), "{csv}");
    let md = rendered(&r, Format::Md);
    assert!(
        md.contains("| sequential 1M read, outer zone | MB/s | 61.2 | 60.0 | +2.0 |"),
        "{md}"
    );
    assert!(md.contains("| revolution | 8.410 | 8.333 | +0.9 |"), "{md}");
    let html = rendered(&r, Format::Html);
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("<title>fsgauge devices check deskstar-7k250</title>"));
    assert_eq!(html.matches("<table").count(), 4, "{html}");
    assert!(html.contains("13.057"), "{html}");
}

#[test]
fn the_lateness_warning_is_at_the_one_limit() {
    let at = rendered(&report(LATE_P99_MS), Format::Table);
    assert!(!at.contains("warning:"), "{at}");
    let over = rendered(&report(0.51), Format::Table);
    assert!(
        over.contains(
            "warning: lateness p99 0.510 ms is over 0.5 ms: the emulator could not keep up"
        ),
        "{over}"
    );
}

/// A fit of an emulated deskstar made from [`report`]'s check.
fn fit_report() -> crate::device::calibrate::fit::FitReport {
    use crate::device::calibrate::fit::{Compared, FitReport, Fitted, SeekSample};
    FitReport {
        check: report(0.0456),
        fitted: Fitted {
            rpm: 7212.3,
            track_to_track_ms: 0.8,
            average_seek_ms: 8.51,
            full_stroke_ms: 17.2,
            outer_mb_s: 61.2,
            inner_mb_s: 33.4,
            overhead_ms: 0.31,
            capacity_bytes: 250_000_000_000,
            cylinders: 98765,
            seek: vec![SeekSample {
                cylinders: 1234.4,
                seek_ms: 3.25,
                pairs: 55,
            }],
            requests: 4321,
            notes: vec!["the inner zone rate was read from 8 requests".into()],
        },
        template: "deskstar-7k250".into(),
        comparison: vec![Compared {
            parameter: "rpm",
            fitted: 7212.3,
            profile: 7200.0,
            error: 0.00171,
        }],
        profile_toml: "name = \"fitted-deskstar-7k250\"\n".into(),
        warnings: vec![],
    }
}

#[test]
fn a_fit_prints_its_profile_as_text_and_its_figures_as_tables() {
    let r = fit_report();
    let page = || fit_page(&r).unwrap().into();
    let text = String::from_utf8(render(&page(), Format::Table).unwrap()).unwrap();
    assert_eq!(text, "name = \"fitted-deskstar-7k250\"\n");
    let json: serde_json::Value =
        serde_json::from_slice(&render(&page(), Format::Json).unwrap()).unwrap();
    assert_eq!(json["fitted"]["rpm"].as_f64(), Some(7212.3));
    assert_eq!(json["check"]["benches"].as_array().map(Vec::len), Some(2));
    let md = String::from_utf8(render(&page(), Format::Md).unwrap()).unwrap();
    assert!(md.contains("| 1234 | 3.250 | 55 |"), "{md}");
    assert!(md.contains("| rpm | 7212.300 | 7200.000 | +0.2 |"), "{md}");
    assert!(
        md.contains("| note | the inner zone rate was read from 8 requests |"),
        "{md}"
    );
    assert!(
        md.contains("| QD1 random 4K read, whole stroke | ms | 13.057 |"),
        "{md}"
    );
    let html = String::from_utf8(render(&page(), Format::Html).unwrap()).unwrap();
    assert!(html.contains("<title>fsgauge devices fit deskstar-7k250</title>"));
    // The check's four tables, the fitted seek curve, the comparison and the notes.
    assert_eq!(html.matches("<table").count(), 7, "{html}");
}

#[test]
fn the_fit_text_shows_the_fitted_seek_curve_and_comparison() {
    let t = fit_text(&fit_report());
    assert!(t.contains("fitted seek curve (98765 cylinders"), "{t}");
    assert!(t.contains("      1234    3.250 ms      55\n"), "{t}");
    assert!(
        t.contains("note: the inner zone rate was read from 8 requests\n"),
        "{t}"
    );
    assert!(
        t.contains("rpm                       7212.300        7200.000    +0.2%\n"),
        "{t}"
    );
}
