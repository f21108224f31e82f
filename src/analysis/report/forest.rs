//! The findings side by side by disk: per question, the published ratio, the ratio measured on
//! this machine's storage and on each emulated disk, as a table and as a forest plot (ratio on
//! a log axis with its interval, the published figure marked, a line at 1), which the HTML
//! report shows at its top. The disk of a finding is the one its results record
//! (`testbed.device_model`); runs on different disks are never pooled.

use std::fmt::Write as _;

use crate::analysis::findings::sentence::{sig, Stated};
use crate::analysis::findings::{device_name, Finding};
use crate::analysis::report::plots::Plot;
use crate::base::text::Table;

/// The disks the findings ran on, in the order first seen.
fn disks(findings: &[Stated]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for s in findings {
        if !out.contains(&s.finding.device) {
            out.push(s.finding.device.clone());
        }
    }
    out
}

/// The question ids, in the order first seen, with the first published figure given.
fn questions(findings: &[Stated]) -> Vec<(String, Option<f64>)> {
    let mut out: Vec<(String, Option<f64>)> = Vec::new();
    for s in findings {
        let q = &s.finding.question;
        match out.iter_mut().find(|(id, _)| *id == q.id) {
            Some((_, p)) => *p = p.or(q.published),
            None => out.push((q.id.clone(), q.published)),
        }
    }
    out
}

fn ratio_text(f: &Finding) -> String {
    match f.ratio {
        Some(r) => format!(
            "{}× ({}–{})",
            sig(r.ratio, 3),
            sig(r.low, 3),
            sig(r.high, 3)
        ),
        None => "not answered".into(),
    }
}

/// The findings by disk, when any ran on an emulated disk: one row per question id (the
/// as-published form of a preset asks the base preset's questions under the same ids).
pub fn by_disk_table(findings: &[Stated]) -> Option<Table> {
    let disks = disks(findings);
    if disks.iter().all(Option::is_none) {
        return None;
    }
    let rows = questions(findings)
        .into_iter()
        .map(|(id, published)| {
            let mut row = vec![
                id.clone(),
                published.map_or("-".into(), |p| format!("{}×", sig(p, 3))),
            ];
            for d in &disks {
                let f = findings
                    .iter()
                    .map(|s| &s.finding)
                    .find(|f| f.question.id == id && f.device == *d);
                row.push(f.map_or("-".into(), ratio_text));
            }
            row
        })
        .collect();
    let mut headers = vec!["question".to_string(), "published".to_string()];
    headers.extend(disks.iter().map(|d| device_name(d.as_deref()).to_string()));
    Some(Table {
        title: "Findings by disk".into(),
        label_columns: 1,
        note: "ratio = variant / baseline with its 95% interval, on each disk the runs recorded (this machine's own storage, or an emulated disk's profile); runs on different disks are never pooled".into(),
        headers,
        rows,
    })
}

const W: f64 = 720.0;
const ROW: f64 = 22.0;
const LEFT: f64 = 300.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One row of the forest plot: its label, ratio, the published figure, and whether it is one
/// machine's ratio under a pooled finding (drawn lighter, without the published figure).
struct Row {
    label: String,
    ratio: crate::analysis::stats::Ratio,
    published: Option<f64>,
    machine: bool,
}

/// The rows: one per question and disk, and under a finding pooled over machines one per
/// machine.
fn rows(findings: &[Stated]) -> Vec<Row> {
    let mut out = Vec::new();
    for f in findings.iter().map(|s| &s.finding) {
        let Some(ratio) = f.ratio else { continue };
        let place = match &f.pooled {
            Some(p) => format!("{} machines", p.machines.len()),
            None => device_name(f.device.as_deref()).to_string(),
        };
        out.push(Row {
            label: format!("{} · {place}", f.question.id),
            ratio,
            published: f.question.published,
            machine: false,
        });
        for m in f.pooled.iter().flat_map(|p| &p.machines) {
            out.push(Row {
                label: format!("{} · {}", f.question.id, m.host),
                ratio: m.ratio,
                published: None,
                machine: true,
            });
        }
    }
    out
}

/// The forest plot of the findings with a ratio: one row per question and disk (and machine,
/// where a finding pools several).
pub fn forest(findings: &[Stated]) -> Option<Plot> {
    let rows = rows(findings);
    if rows.is_empty() {
        return None;
    }
    // The axis spans every interval, every published figure and 1, with a margin.
    let mut lo = 1.0f64;
    let mut hi = 1.0f64;
    for f in &rows {
        let r = f.ratio;
        lo = lo.min(r.low);
        hi = hi.max(r.high);
        if let Some(p) = f.published {
            lo = lo.min(p);
            hi = hi.max(p);
        }
    }
    let (lo, hi) = ((lo / 1.25).log10(), (hi * 1.25).log10());
    let x = |v: f64| LEFT + (v.log10() - lo) / (hi - lo) * (W - LEFT - RIGHT);
    let h = TOP + BOTTOM + ROW * rows.len() as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    // Decades and the ratios in between as ticks of the log axis.
    let mut tick = 10f64.powf(lo.floor());
    while tick.log10() <= hi {
        for m in [1.0, 2.0, 5.0] {
            let v = tick * m;
            if v.log10() >= lo && v.log10() <= hi {
                let _ = writeln!(
                    svg,
                    "<line class=\"tick\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}×</text>",
                    x(v),
                    h - BOTTOM,
                    h - BOTTOM + 16.0,
                    sig(v, 2)
                );
            }
        }
        tick *= 10.0;
    }
    let _ = writeln!(
        svg,
        "<line class=\"one\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1:.1}\" stroke=\"#000\"/>",
        x(1.0),
        h - BOTTOM
    );
    for (i, f) in rows.iter().enumerate() {
        let r = f.ratio;
        let y = TOP + ROW * (i as f64 + 0.5);
        let label = &f.label;
        let (class, colour) = if f.machine {
            ("row machine", "#56B4E9")
        } else {
            ("row", "#0072B2")
        };
        let _ = writeln!(
            svg,
            "<g class=\"{class}\"><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><line class=\"interval\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/><circle class=\"ratio\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{colour}\"><title>{}× ({}–{})</title></circle>",
            LEFT - 8.0,
            y + 4.0,
            esc(label),
            x(r.low),
            x(r.high),
            x(r.ratio),
            sig(r.ratio, 3),
            sig(r.low, 3),
            sig(r.high, 3)
        );
        if let Some(p) = f.published {
            let (px, s) = (x(p), 5.0);
            let _ = write!(
                svg,
                "<path class=\"published\" d=\"M{px:.1} {:.1} L{:.1} {y:.1} L{px:.1} {:.1} L{:.1} {y:.1} Z\" fill=\"#D55E00\"><title>published {}×</title></path>",
                y - s,
                px + s,
                y + s,
                px - s,
                sig(p, 3)
            );
        }
        svg.push_str("</g>\n");
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">ratio variant / baseline (log scale); bar: 95% interval; diamond: published</text>\n</svg>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        h - 6.0
    );
    Some(Plot {
        title: "Findings: measured ratio and its 95% interval per question and disk, the published ratio marked".into(),
        id: "findings-forest".into(),
        svg,
    })
}
