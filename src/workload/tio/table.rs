//! Sweep tables, as the block-reservation study printed them: one table per mode and block
//! size, rows = thread (or client) counts, columns = testbeds, each cell the mean throughput
//! over repetitions with the % change against the first testbed; a detail table in tiobench's
//! columns; and a CSV of every figure for plotting. All are pure functions of result files, so
//! reports can re-make them from any set of results (several testbeds, several invocations).

use std::fmt::Write as _;

use super::Cell;
use crate::base::text::{format_ns, format_rate, Table};
use crate::base::units::format_size;
use crate::results::tables::KindTables;
use crate::results::RunResult;

/// One measured point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// The table it belongs to, e.g. `seqwrite 4K`.
    pub group: String,
    /// The row: threads or clients.
    pub x: u64,
    /// The column: the testbed label.
    pub label: String,
    pub value: f64,
}

/// [`sweep_tables_of`] as terminal text.
pub fn sweep_table(points: &[SweepPoint], x_name: &str, value_name: &str) -> String {
    sweep_tables_of(points, x_name, value_name)
        .iter()
        .map(|t| t.text() + "\n")
        .collect()
}

/// Tables of `points`, one per group: rows `x_name`, testbeds across, means over repetitions,
/// and for every testbed after the first the % change against the first.
pub fn sweep_tables_of(points: &[SweepPoint], x_name: &str, value_name: &str) -> Vec<Table> {
    let mut groups: Vec<String> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for p in points {
        if !groups.contains(&p.group) {
            groups.push(p.group.clone());
        }
        if !labels.contains(&p.label) {
            labels.push(p.label.clone());
        }
    }
    // The same grouping and summary as the report's cells.
    let cells = crate::analysis::stats::summarize_groups(
        points
            .iter()
            .map(|p| ((p.group.as_str(), p.x, p.label.as_str()), p.value)),
    );
    let mean = |g: &str, x: u64, l: &str| {
        cells
            .iter()
            .find(|(k, _)| *k == (g, x, l))
            .map(|(_, s)| s.mean)
    };
    let mut out = Vec::new();
    for g in &groups {
        let mut xs: Vec<u64> = points
            .iter()
            .filter(|p| &p.group == g)
            .map(|p| p.x)
            .collect();
        xs.sort_unstable();
        xs.dedup();
        let mut headers = vec![x_name.to_string()];
        for (i, l) in labels.iter().enumerate() {
            headers.push(l.clone());
            if i > 0 {
                headers.push(format!("{l} %"));
            }
        }
        let rows: Vec<Vec<String>> = xs
            .iter()
            .map(|&x| {
                let base = mean(g, x, &labels[0]);
                let mut row = vec![x.to_string()];
                for (i, l) in labels.iter().enumerate() {
                    let v = mean(g, x, l);
                    row.push(v.map_or("-".into(), format_rate));
                    if i > 0 {
                        row.push(match (base, v) {
                            (Some(b), Some(v)) if b > 0.0 => {
                                format!("{:+.0}%", (v - b) / b * 100.0)
                            }
                            _ => "-".into(),
                        });
                    }
                }
                row
            })
            .collect();
        out.push(Table {
            title: format!("{g}: {value_name}"),
            label_columns: 1,
            note: String::new(),
            headers,
            rows,
        });
    }
    out
}

fn x(p: &crate::results::PhaseResult, k: &str) -> f64 {
    p.extra.get(k).copied().unwrap_or(f64::NAN)
}

/// The tio phases of the results: (result, phase, cell).
fn tio_phases(
    results: &[RunResult],
) -> impl Iterator<Item = (&RunResult, &crate::results::PhaseResult, Cell)> {
    results.iter().flat_map(|r| {
        r.phases
            .iter()
            .filter_map(move |p| Cell::parse(&p.name).map(|c| (r, p, c)))
    })
}

/// Throughput points of every tio phase: group `mode block`, row = threads.
pub fn tio_points(results: &[RunResult]) -> Vec<SweepPoint> {
    tio_phases(results)
        .map(|(r, p, c)| SweepPoint {
            group: format!("{} {}", c.mode.name(), format_size(c.block)),
            x: c.threads as u64,
            label: r.testbed.label.clone(),
            // On the disk's clock on an emulated disk (PhaseResult::times).
            value: p
                .times()
                .rate(p.bytes_per_s, crate::results::clock::Clock::Disk)
                / 1e6,
        })
        .collect()
}

fn pct(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 0.0001 {
        format!("{:.2e}", v * 100.0)
    } else {
        format!("{:.4}", v * 100.0)
    }
}

/// tio's tables, registered with its kind: `bench tio` prints them and `report` shows them.
pub const TABLES: KindTables = KindTables {
    kind: "tio",
    tables: |results| {
        if tio_phases(results).next().is_none() {
            return Vec::new();
        }
        sweep_tables(results)
    },
    against: &[],
};

/// Everything a tio sweep prints: the per-mode-and-block tables, then the detail table.
pub fn sweep_tables(results: &[RunResult]) -> Vec<Table> {
    let mut out = sweep_tables_of(&tio_points(results), "threads", "MB/s (10^6 bytes/s)");
    let headers = [
        "testbed",
        "rep",
        "cell",
        "MB/s",
        "IOPS",
        "avg lat",
        "p99",
        "max lat",
        ">2s %",
        ">10s %",
        "CPU s",
        "MB/CPU-s",
        "extents/file",
        "layout",
    ];
    let rows: Vec<Vec<String>> = tio_phases(results)
        .map(|(r, p, _)| {
            let l = &p.latency;
            let n = l.count.max(1) as f64;
            let ext = x(p, "extents_per_file_mean");
            let ls = x(p, "layout_score");
            vec![
                r.testbed.label.clone(),
                r.rep.to_string(),
                p.name.clone(),
                format!(
                    "{:.2}",
                    p.times()
                        .rate(p.bytes_per_s, crate::results::clock::Clock::Disk)
                        / 1e6
                ),
                format_rate(
                    p.times()
                        .rate(p.ops_per_s, crate::results::clock::Clock::Disk),
                ),
                if l.count > 0 {
                    format_ns(l.mean_ns as u64)
                } else {
                    "-".into()
                },
                if l.count > 0 {
                    format_ns(l.p99_ns)
                } else {
                    "-".into()
                },
                if l.count > 0 {
                    format_ns(l.max_ns)
                } else {
                    "-".into()
                },
                pct(l.over_2s as f64 / n),
                pct(l.over_10s as f64 / n),
                format!("{:.2}", p.user_s + p.sys_s),
                format_rate(x(p, "mb_per_cpu_s")),
                if ext.is_nan() {
                    "-".into()
                } else {
                    format!("{ext:.1}")
                },
                if ls.is_nan() {
                    "-".into()
                } else {
                    format!("{ls:.3}")
                },
            ]
        })
        .collect();
    out.push(Table {
        title: String::new(),
        label_columns: 3,
        note: String::new(),
        headers: headers.map(String::from).to_vec(),
        rows,
    });
    out
}

/// Header of [`sweep_csv`].
pub const CSV_HEADER: &str = "testbed,fs,rep,mode,block,threads,mb_per_s,iops,lat_mean_ns,lat_p50_ns,lat_p90_ns,lat_p99_ns,lat_p999_ns,lat_max_ns,over_2s,over_10s,over_2s_share,over_10s_share,cpu_s,mb_per_cpu_s,extents_per_file_mean,layout_score,wall_s,bytes,ops";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v}")
    }
}

/// One CSV line per tio phase of every result, for plotting.
pub fn sweep_csv(results: &[RunResult]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for (r, p, c) in tio_phases(results) {
        let l = &p.latency;
        let n = l.count.max(1) as f64;
        let cpu = p.user_s + p.sys_s;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.testbed.label),
            csv_field(&r.testbed.fs),
            r.rep,
            c.mode.name(),
            c.block,
            c.threads,
            p.bytes_per_s / 1e6,
            p.ops_per_s,
            l.mean_ns,
            l.p50_ns,
            l.p90_ns,
            l.p99_ns,
            l.p999_ns,
            l.max_ns,
            l.over_2s,
            l.over_10s,
            l.over_2s as f64 / n,
            l.over_10s as f64 / n,
            cpu,
            num(x(p, "mb_per_cpu_s")),
            num(x(p, "extents_per_file_mean")),
            num(x(p, "layout_score")),
            p.wall_s,
            p.bytes,
            p.ops,
        );
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pt(g: &str, x: u64, l: &str, v: f64) -> SweepPoint {
        SweepPoint {
            group: g.into(),
            x,
            label: l.into(),
            value: v,
        }
    }

    #[test]
    fn tables_show_means_and_change_against_the_first_testbed() {
        let pts = vec![
            pt("seqwrite 4K", 1, "ext3", 4.0),
            pt("seqwrite 4K", 1, "ext3", 6.0),
            pt("seqwrite 4K", 1, "ext3+rsv", 25.0),
            pt("seqwrite 4K", 4, "ext3", 10.0),
            pt("randread 4K", 1, "ext3", 3.0),
        ];
        let t = sweep_table(&pts, "threads", "MB/s");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "seqwrite 4K: MB/s");
        assert!(
            lines[1].starts_with("threads") && lines[1].contains("ext3+rsv %"),
            "{t}"
        );
        // mean of 4 and 6 is 5; 25 is +400% of it
        assert!(
            lines[3].contains("5.00") && lines[3].contains("+400%"),
            "{t}"
        );
        assert!(
            lines[4].starts_with('4') && lines[4].trim_end().ends_with('-'),
            "{t}"
        );
        assert!(t.contains("randread 4K: MB/s"));
    }
}
