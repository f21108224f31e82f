//! `devices check` as a page for the one exporter: its terminal text (the benchmark table,
//! the seek curve, the same-track reads, the server's lateness), and the same figures as
//! tables for CSV, Markdown and HTML, with the report itself as the JSON. The text and the
//! tables format every figure with the same functions, so they agree to the digit.

use anyhow::Result;

use super::check::{Bench, CheckReport};
use crate::analysis::report::document::Page;
use crate::base::text::Table;
use crate::results::device::LATE_P99_MS;

mod fit;
pub use fit::{fit_page, fit_text};

/// The check as a page: JSON the report, text as the terminal shows it, and its tables.
pub fn page(r: &CheckReport) -> Result<Page> {
    Ok(Page::new(format!("fsgauge devices check {}", r.target), r)?
        .text(report_text(r))
        .tables(tables(r)))
}

/// The check's tables: the benchmarks, the seek curve and the same-track reads (where
/// measured), and the server over the whole check (emulated devices).
pub fn tables(r: &CheckReport) -> Vec<Table> {
    let mut out = vec![benches_table(r)];
    if !r.seek_curve.is_empty() {
        out.push(seek_table(r));
    }
    if let Some(t) = same_track_table(r) {
        out.push(t);
    }
    if let Some(t) = server_table(r) {
        out.push(t);
    }
    out
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or(String::new(), f)
}

fn ms(v: f64) -> String {
    figure("ms", v)
}

fn bench_row(b: &Bench) -> Vec<String> {
    let l = b.lateness;
    vec![
        b.name.clone(),
        b.unit.to_string(),
        figure(b.unit, b.measured),
        opt(b.modelled, |v| figure(b.unit, v)),
        opt(b.error, signed_pct),
        opt(b.demerit, demerit_pct),
        b.requests.to_string(),
        opt(b.p50_ms, ms),
        opt(b.p99_ms, ms),
        opt(l.map(|l| l.p50_ms), ms),
        opt(l.map(|l| l.p99_ms), ms),
        opt(l.map(|l| l.max_ms), ms),
        opt(l.map(|l| l.pause_ms), ms),
        opt(b.server_cpu_us_per_request, |c| format!("{c:.1}")),
    ]
}

fn benches_table(r: &CheckReport) -> Table {
    Table {
        title: format!(
            "{} on {} ({:.1} GB)",
            r.profile.as_deref().unwrap_or("no model"),
            r.device.display(),
            r.size_bytes as f64 / 1e9
        ),
        label_columns: 2,
        note: "measured against the model's figure for the same requests; error is measured / modelled - 1; lateness is the emulator's, past the modelled completion".into(),
        headers: [
            "benchmark",
            "unit",
            "measured",
            "modelled",
            "error %",
            "demerit %",
            "requests",
            "p50 ms",
            "p99 ms",
            "lateness p50 ms",
            "lateness p99 ms",
            "lateness max ms",
            "pause ms",
            "server CPU µs/request",
        ]
        .map(String::from)
        .to_vec(),
        rows: r.benches.iter().map(bench_row).collect(),
    }
}

fn seek_table(r: &CheckReport) -> Table {
    Table {
        title: "Seek curve".into(),
        label_columns: 1,
        note: "mean time of the second read of a pair: seek + rotation + transfer + overhead"
            .into(),
        headers: [
            "distance MB",
            "cylinders",
            "pairs",
            "measured ms",
            "modelled ms",
            "error %",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .seek_curve
            .iter()
            .map(|p| {
                vec![
                    format!("{:.1}", p.distance_mb),
                    opt(p.cylinders, |c| format!("{c:.0}")),
                    p.pairs.to_string(),
                    ms(p.measured_ms),
                    opt(p.modelled_ms, ms),
                    opt(p.error, signed_pct),
                ]
            })
            .collect(),
    }
}

fn same_track_table(r: &CheckReport) -> Option<Table> {
    let t = r.same_track.as_ref()?;
    Some(Table {
        title: "Same-track reads".into(),
        label_columns: 1,
        note: "the second read's wait for the platter, the revolution it gives, and the block after it from the read-ahead".into(),
        headers: ["figure", "measured ms", "modelled ms", "error %"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            vec![
                format!("second read mean ({} pairs)", t.pairs),
                ms(t.mean_ms),
                opt(t.modelled_mean_ms, ms),
                String::new(),
            ],
            vec![
                "revolution".into(),
                opt(t.revolution_ms, ms),
                opt(t.modelled_revolution_ms, ms),
                opt(t.error, signed_pct),
            ],
            vec![
                "block after, median".into(),
                opt(t.follow_on_ms, ms),
                opt(t.modelled_follow_on_ms, ms),
                String::new(),
            ],
        ],
    })
}

fn server_table(r: &CheckReport) -> Option<Table> {
    let l = r.lateness?;
    Some(Table {
        title: "Device server".into(),
        label_columns: 0,
        note: format!("over the whole check; lateness p99 over {LATE_P99_MS} ms means the emulator could not keep up"),
        headers: [
            "requests",
            "lateness p50 ms",
            "lateness p99 ms",
            "lateness max ms",
            "late",
            "pause ms",
            "pauses",
            "server CPU µs/request",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![vec![
            l.requests.to_string(),
            ms(l.p50_ms),
            ms(l.p99_ms),
            ms(l.max_ms),
            l.late.to_string(),
            ms(l.pause_ms),
            l.pauses.to_string(),
            opt(r.server_cpu_us_per_request, |c| format!("{c:.1}")),
        ]],
    })
}

/// The check as text: the benchmark table, the seek curve, the same-track reads, the server.
pub fn report_text(r: &CheckReport) -> String {
    let mut s = format!(
        "{} on {} ({:.1} GB){}\n",
        r.profile.as_deref().unwrap_or("no model"),
        r.device.display(),
        r.size_bytes as f64 / 1e9,
        if r.target.starts_with("/dev/") {
            ", read only"
        } else {
            ", emulated"
        }
    );
    s.push_str(&benches_text(r));
    s.push_str(&pairs_text(r));
    if let Some(l) = r.lateness {
        s.push_str(&format!(
            "server: {} requests, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, {} over {LATE_P99_MS} ms; the disk's clock paused {:.3} ms in {} stops{}\n",
            l.requests,
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            l.late,
            l.pause_ms,
            l.pauses,
            r.server_cpu_us_per_request
                .map_or(String::new(), |c| format!("; CPU {c:.1} µs per request"))
        ));
        if l.p99_ms > LATE_P99_MS {
            s.push_str(&format!("warning: lateness p99 {:.3} ms is over {LATE_P99_MS} ms: the emulator could not keep up with the model on this machine; timings are not the modelled drive's\n", l.p99_ms));
        }
    }
    s
}

fn pct(e: Option<f64>) -> String {
    e.map_or("-".into(), |e| format!("{}%", signed_pct(e)))
}

/// A figure of a benchmark in its unit as the text and the tables show it: ms to the µs,
/// MB/s to a tenth, counts whole.
fn figure(unit: &str, v: f64) -> String {
    match unit {
        "ms" => format!("{v:.3}"),
        "MB/s" => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// A ratio less one as a signed percentage to a tenth.
fn signed_pct(e: f64) -> String {
    format!("{:+.1}", e * 100.0)
}

/// A demerit as a percentage to a tenth.
fn demerit_pct(d: f64) -> String {
    format!("{:.1}", d * 100.0)
}

fn benches_text(r: &CheckReport) -> String {
    let w = r
        .benches
        .iter()
        .map(|b| b.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut s = format!(
        "{:<w$}  {:>10}  {:>10}  {:>7}  {:>8}  {:>7}  {:>22}\n",
        "benchmark", "measured", "modelled", "error", "demerit", "n", "lateness p50/p99/max ms"
    );
    for b in &r.benches {
        let f = |v: f64| match b.unit {
            "ms" | "MB/s" => format!("{} {}", figure(b.unit, v), b.unit),
            _ => figure(b.unit, v),
        };
        s.push_str(&format!(
            "{:<w$}  {:>10}  {:>10}  {:>7}  {:>8}  {:>7}  {:>22}\n",
            b.name,
            f(b.measured),
            b.modelled.map_or("-".into(), f),
            pct(b.error),
            b.demerit
                .map_or("-".into(), |d| format!("{}%", demerit_pct(d))),
            b.requests,
            b.lateness.map_or("-".into(), |l| format!(
                "{:.3}/{:.3}/{:.3}",
                l.p50_ms, l.p99_ms, l.max_ms
            )),
        ));
    }
    s
}

fn pairs_text(r: &CheckReport) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{} ms", ms(x)));
    let mut s = String::new();
    if !r.seek_curve.is_empty() {
        s.push_str("\nseek curve (mean time of the second read of a pair: seek + rotation + transfer + overhead)\n");
        s.push_str(&format!(
            "{:>12}  {:>10}  {:>6}  {:>10}  {:>10}  {:>7}\n",
            "distance", "cylinders", "pairs", "measured", "modelled", "error"
        ));
        for p in &r.seek_curve {
            s.push_str(&format!(
                "{:>9.1} MB  {:>10}  {:>6}  {:>10}  {:>10}  {:>7}\n",
                p.distance_mb,
                p.cylinders.map_or("-".into(), |c| format!("{c:.0}")),
                p.pairs,
                ms(Some(p.measured_ms)),
                ms(p.modelled_ms),
                pct(p.error)
            ));
        }
    }
    if let Some(t) = &r.same_track {
        s.push_str(&format!(
            "\nsame-track reads ({} pairs, placed {}): second read mean {} (modelled {}); revolution {} (modelled {}, error {}); the block after, from the read-ahead: median {} (modelled {})\n",
            t.pairs,
            if t.by_geometry { "on the model's tracks" } else { "within 256 KiB" },
            ms(Some(t.mean_ms)),
            ms(t.modelled_mean_ms),
            ms(t.revolution_ms),
            ms(t.modelled_revolution_ms),
            pct(t.error),
            ms(t.follow_on_ms),
            ms(t.modelled_follow_on_ms),
        ));
    }
    s
}

#[cfg(test)]
mod tests;
