//! Plain-text tables for the terminal: one row per phase, and side by side across testbeds, in
//! the seed studies' "elapsed (sys)" form.

use std::fmt::Write;

use crate::results::clock::Clock;
use crate::results::RunResult;

pub use crate::base::text::{format_ns, format_rate, render};

/// [`side_by_side`] once per workload when the results hold several (each under its label,
/// e.g. `tree file_size=8M files=10`), as it is when they hold one.
pub fn side_by_side_per_workload(results: &[RunResult]) -> String {
    let labels = super::cells::workload_labels(results, &[]);
    let mut order: Vec<&String> = Vec::new();
    for l in &labels {
        if !order.contains(&l) {
            order.push(l);
        }
    }
    if order.len() <= 1 {
        return side_by_side(results);
    }
    let mut out = String::new();
    for l in order {
        let subset: Vec<RunResult> = results
            .iter()
            .zip(&labels)
            .filter(|(_, w)| *w == l)
            .map(|(r, _)| r.clone())
            .collect();
        let _ = writeln!(out, "{l}:");
        out.push_str(&side_by_side(&subset));
        out.push('\n');
    }
    out
}

/// A report table as terminal text: title, table, note.
pub fn text(t: &crate::base::text::Table) -> String {
    t.text()
}

/// One row per run and phase: elapsed (sys), ops, ops/s, MB/s, p99 latency, device MB written.
pub fn phase_table(results: &[RunResult]) -> String {
    let headers = [
        "testbed",
        "rep",
        "phase",
        "elapsed (sys) s",
        "ops",
        "ops/s",
        "MB/s",
        "p99",
        "dev MB written",
    ];
    let mut rows = Vec::new();
    for r in results {
        for p in &r.phases {
            // Elapsed and rates on the disk's clock on an emulated disk.
            let t = p.times();
            rows.push(vec![
                r.testbed.label.clone(),
                r.rep.to_string(),
                p.name.clone(),
                crate::base::text::elapsed_sys(t.disk_s, p.sys_s),
                p.ops.to_string(),
                format_rate(t.rate(p.ops_per_s, Clock::Disk)),
                format!("{:.1}", t.rate(p.bytes_per_s, Clock::Disk) / 1e6),
                format_ns(p.latency.p99_ns),
                p.device
                    .map_or("-".into(), |d| format!("{:.1}", d.write_bytes as f64 / 1e6)),
            ]);
        }
    }
    render(&headers, &rows)
}

/// Phases down, testbeds across; each cell the mean "elapsed (sys)" over repetitions, and the
/// mean ops/s beneath, as the low-memory study tabulated its configurations. The cells and
/// their means are the report's ([`super::cells::cells`]).
/// The findings of the questions the results carry, for the terminal: one sentence per
/// question (with the question asked), then the table of numbers; `None` without questions.
pub fn findings_text(results: &[RunResult]) -> Option<String> {
    let findings = crate::analysis::findings::sentence::stated(results);
    if findings.is_empty() {
        return None;
    }
    let mut out = String::from("Findings\n");
    for f in &findings {
        let ask = &f.finding.question.ask;
        if !ask.is_empty() {
            out.push_str(&format!("  {ask}\n"));
        }
        out.push_str(&format!("    {}\n", f.sentence));
    }
    out.push('\n');
    out.push_str(&text(&super::findings_table::findings_table(&findings)));
    Some(out)
}

pub fn side_by_side(results: &[RunResult]) -> String {
    let (labels, _, cells) = super::cells::cells(results);
    let mut phases: Vec<&str> = Vec::new();
    for c in &cells {
        if !phases.contains(&c.phase.as_str()) {
            phases.push(&c.phase);
        }
    }
    let mean = |c: &super::cells::Cell, key: &str| c.metric(key).map(|m| m.summary.mean);
    let mut headers = vec!["phase".to_string()];
    headers.extend(labels.iter().cloned());
    let mut rows = Vec::new();
    for ph in phases {
        let mut elapsed = vec![format!("{ph} elapsed (sys) s")];
        let mut rate = vec![format!("{ph} ops/s")];
        for l in &labels {
            match cells.iter().find(|c| &c.testbed == l && c.phase == ph) {
                Some(c) => {
                    elapsed.push(crate::base::text::elapsed_sys(
                        mean(c, "elapsed").unwrap_or(0.0),
                        mean(c, "sys").unwrap_or(0.0),
                    ));
                    // A phase without operations has no op rate: 0, as its phases record.
                    rate.push(format_rate(mean(c, "ops_per_s").unwrap_or(0.0)));
                }
                None => {
                    elapsed.push("-".into());
                    rate.push("-".into());
                }
            }
        }
        rows.push(elapsed);
        rows.push(rate);
    }
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    render(&h, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_pick_a_readable_unit() {
        assert_eq!(format_ns(850), "850ns");
        assert_eq!(format_ns(12_345), "12.3us");
        assert_eq!(format_ns(4_560_000), "4.56ms");
        assert_eq!(format_ns(1_200_000_000), "1.20s");
    }

    #[test]
    fn tables_align_columns() {
        let t = render(&["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "a    bb");
        assert_eq!(lines[2], "xyz   1");
    }
}
