//! The per-rank spread of MPI runs, for reports and for the bench commands' output: how far the
//! slowest rank lagged behind the fastest in each phase, and how evenly the work was shared.
//! A straggler (a slow client, a hot metadata server shard) shows as a wide spread even when
//! the merged rate looks fine.

use crate::base::text::{fmt_num, Table};
use crate::results::RunResult;

const HEADERS: [&str; 10] = [
    "testbed",
    "rep",
    "phase",
    "ranks",
    "slowest s",
    "first done s",
    "spread %",
    "ops/rank min",
    "ops/rank max",
    "stonewalled",
];

fn rows(results: &[RunResult]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for r in results {
        for p in r.phases.iter().filter(|p| !p.ranks.is_empty()) {
            let first = p.first_done_s.unwrap_or(p.wall_s);
            let spread = if p.wall_s > 0.0 {
                (p.wall_s - first) / p.wall_s * 100.0
            } else {
                0.0
            };
            let min = p.ranks.iter().map(|x| x.ops).min().unwrap_or(0);
            let max = p.ranks.iter().map(|x| x.ops).max().unwrap_or(0);
            let walled = p.ranks.iter().filter(|x| x.stonewalled).count();
            rows.push(vec![
                r.testbed.label.clone(),
                r.rep.to_string(),
                p.name.clone(),
                p.ranks.len().to_string(),
                format!("{:.3}", p.wall_s),
                format!("{first:.3}"),
                fmt_num(spread),
                min.to_string(),
                max.to_string(),
                match p.stonewall_s {
                    Some(s) => format!("{walled} at {}s", fmt_num(s)),
                    None => "-".into(),
                },
            ]);
        }
    }
    rows
}

/// The spread table of a report, when some results come from MPI runs.
pub fn rank_table(results: &[RunResult]) -> Option<Table> {
    let rows = rows(results);
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "MPI ranks per phase".into(),
        label_columns: 3,
        note: "runs under mpirun: every phase started on all ranks behind a barrier; slowest s is the phase's wall time (the last rank to finish), first done s the fastest rank's; spread % = (slowest - first done) / slowest; operations per rank at least and at most; stonewalled: ranks stopped at the --stonewall limit before their work was done".into(),
        headers: HEADERS.iter().map(|h| h.to_string()).collect(),
        rows,
    })
}

/// The same as text under a bench command's table (empty without MPI results).
pub fn rank_text(results: &[RunResult]) -> String {
    let rows = rows(results);
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\nper rank (slowest = the phase's time; spread = how much sooner the fastest rank was done):\n{}",
        crate::analysis::report::table::render(&HEADERS, &rows)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::results::{PhaseResult, RankPhase};

    #[test]
    fn one_row_per_mpi_phase_with_its_spread() {
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": "fsgauge.run/1",
            "tool": {"name": "fsgauge", "version": "0"},
            "host": {"hostname": "h", "kernel": "k", "cpus": 2, "memory": 1},
            "testbed": {"label": "dir", "fs": "ext4", "size": 1, "mkfs_args": [], "mount_options": "",
                        "journal": null, "memory_limit": null, "backing": "dir", "device": null,
                        "loop_direct_io": null, "path": "/x"},
            "workload": {"kind": "create", "params": {}},
            "rep": 0, "seed": 1, "started_at": "2026-01-01T00:00:00Z", "spec_hash": "0",
            "conditions": {"cold": "none"}, "phases": [], "errors": []
        }))
        .unwrap();
        assert!(rank_table(&[r.clone()]).is_none());
        assert_eq!(rank_text(&[r.clone()]), "");
        let p: PhaseResult = serde_json::from_value(serde_json::json!({
            "name": "create", "wall_s": 2.0, "user_s": 0.0, "sys_s": 0.0, "ops": 30, "bytes": 0,
            "ops_per_s": 15.0, "bytes_per_s": 0.0, "latency": {"count": 30, "min_ns": 1, "mean_ns": 1.0,
            "p50_ns": 1, "p90_ns": 1, "p99_ns": 1, "p999_ns": 1, "max_ns": 1, "over_2s": 0, "over_10s": 0},
            "device": null, "series": [], "first_done_s": 1.5, "stonewall_s": 2.0
        }))
        .unwrap();
        let mut p = p;
        p.ranks = vec![
            RankPhase {
                rank: 0,
                ops: 10,
                stonewalled: true,
                ..Default::default()
            },
            RankPhase {
                rank: 1,
                ops: 20,
                ..Default::default()
            },
        ];
        r.phases.push(p);
        let t = rank_table(&[r.clone()]).unwrap();
        assert_eq!(t.rows.len(), 1);
        let row = &t.rows[0];
        assert_eq!(row[3], "2");
        assert_eq!(row[6], fmt_num(25.0));
        assert_eq!((row[7].as_str(), row[8].as_str()), ("10", "20"));
        assert!(row[9].starts_with("1 at 2"), "{}", row[9]);
        assert!(rank_text(&[r]).contains("create"));
    }
}
