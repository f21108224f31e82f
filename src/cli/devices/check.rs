//! `devices check`: runs the check on the target and prints measured against modelled.

use std::process::ExitCode;

use anyhow::Result;

use super::OutputArgs;
use crate::report::output::OutputFormat;
use crate::testbed::device::bench_target::{self, TargetSpec};
use crate::testbed::device::check::{CheckOptions, CheckReport};

pub fn run(spec: &TargetSpec<'_>, opts: &CheckOptions, out: &OutputArgs) -> Result<ExitCode> {
    let report = bench_target::check(spec, opts)?;
    if out.format() == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report_text(&report));
    }
    Ok(ExitCode::SUCCESS)
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
            "server: {} requests, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, {} over 0.5 ms{}\n",
            l.requests,
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            l.late,
            r.server_cpu_us_per_request
                .map_or(String::new(), |c| format!("; CPU {c:.1} µs per request"))
        ));
        if l.p99_ms > 0.5 {
            s.push_str(&format!("warning: lateness p99 {:.3} ms is over 0.5 ms: the emulator could not keep up with the model on this machine; timings are not the modelled drive's\n", l.p99_ms));
        }
    }
    s
}

fn pct(e: Option<f64>) -> String {
    e.map_or("-".into(), |e| format!("{:+.1}%", e * 100.0))
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
        let f = |v: f64| {
            if b.unit == "ms" {
                format!("{v:.3} ms")
            } else if b.unit == "MB/s" {
                format!("{v:.1} MB/s")
            } else {
                format!("{v:.0}")
            }
        };
        s.push_str(&format!(
            "{:<w$}  {:>10}  {:>10}  {:>7}  {:>8}  {:>7}  {:>22}\n",
            b.name,
            f(b.measured),
            b.modelled.map_or("-".into(), f),
            pct(b.error),
            b.demerit
                .map_or("-".into(), |d| format!("{:.1}%", d * 100.0)),
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
    let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3} ms"));
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
