//! Rate-limited phases (`--rate-iops`, `--rate`) in reports: the rate asked and achieved, and
//! the two latencies side by side — from each request's submission and from its scheduled
//! (due) time. Where the second is much the larger, requests queued behind a slow one: the
//! stall a closed-loop benchmark would have hidden (coordinated omission).

use crate::base::text::format_ns;
use crate::base::text::{fmt_num, Table};
use crate::results::{LatencySummary, PhaseResult, RunResult};

const HEADERS: [&str; 12] = [
    "testbed",
    "rep",
    "phase",
    "asked",
    "achieved",
    "workers short",
    "submitted p50",
    "submitted p99",
    "submitted max",
    "scheduled p50",
    "scheduled p99",
    "scheduled max",
];

/// The line a report shows under the table.
pub const NOTE: &str = "latency from submission counts from when a request was issued, latency from the scheduled time from when it was due on the rate limit's fixed schedule: the difference is time spent queued behind slower requests, which a closed loop would hide (coordinated omission); rates are the workers' sums, \"workers short\" those more than 1 % below their asked rate";

fn rate_cells(p: &PhaseResult) -> [String; 3] {
    let Some(r) = &p.rate else {
        return ["-".into(), "-".into(), "-".into()];
    };
    let asked: f64 = r.workers.iter().map(|w| w.asked).sum();
    let achieved: f64 = r.workers.iter().map(|w| w.achieved).sum();
    let short = r
        .workers
        .iter()
        .filter(|w| w.achieved < w.asked * 0.99)
        .count();
    let unit = &r.unit;
    [
        format!("{} {unit}", fmt_num(asked)),
        format!("{} {unit}", fmt_num(achieved)),
        format!("{short} of {}", r.workers.len()),
    ]
}

fn latency_cells(l: &LatencySummary) -> [String; 3] {
    [l.p50_ns, l.p99_ns, l.max_ns].map(format_ns)
}

/// The table of rate-limited phases, when some results have them.
pub fn rate_table(results: &[RunResult]) -> Option<Table> {
    let mut rows = Vec::new();
    for r in results {
        for p in &r.phases {
            let Some(s) = &p.scheduled_latency else {
                continue;
            };
            let mut row = vec![r.testbed.label.clone(), r.rep.to_string(), p.name.clone()];
            row.extend(rate_cells(p));
            row.extend(latency_cells(&p.latency));
            row.extend(latency_cells(s));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(Table {
        title: "Latency under a rate limit".into(),
        label_columns: 3,
        note: NOTE.into(),
        headers: HEADERS.iter().map(|h| h.to_string()).collect(),
        rows,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn result(scheduled: Option<LatencySummary>) -> RunResult {
        let lat = LatencySummary {
            count: 10,
            p50_ns: 2_000,
            p99_ns: 9_000,
            max_ns: 300_000_000,
            ..Default::default()
        };
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "schema": crate::results::SCHEMA, "tool": {"name": "fsgauge", "version": "0.1.0"},
            "host": {"hostname": "h", "kernel": "6.1", "cpus": 2, "memory": 1},
            "testbed": crate::results::TestbedInfo::default(),
            "workload": {"kind": "any-rated-kind", "params": {}},
            "rep": 0, "seed": 1, "started_at": "", "spec_hash": "", "conditions": {"cold": "drop"},
            "phases": [{"name": "randwrite-4K-t1", "wall_s": 1.0, "user_s": 0.0, "sys_s": 0.0,
                "ops": 10, "bytes": 40960, "ops_per_s": 10.0, "bytes_per_s": 40960.0,
                "latency": lat, "scheduled_latency": scheduled, "device": null, "series": [],
                "rate": {"unit": "ops/s", "workers": [
                    {"worker": 0, "asked": 2000.0, "achieved": 2000.0},
                    {"worker": 1, "asked": 2000.0, "achieved": 1500.0}]}}],
            "errors": []
        }))
        .unwrap();
        r.testbed.label = "ext4".into();
        r
    }

    #[test]
    fn rate_limited_phases_show_both_latencies_and_the_shortfall() {
        let sched = LatencySummary {
            count: 10,
            p50_ns: 2_500,
            p99_ns: 150_000_000,
            max_ns: 300_000_000,
            ..Default::default()
        };
        let t = rate_table(&[result(Some(sched))]).unwrap();
        assert_eq!(t.rows.len(), 1);
        let row = &t.rows[0];
        assert_eq!(row[2], "randwrite-4K-t1");
        assert_eq!(row[5], "1 of 2");
        assert_eq!(
            &row[6..],
            ["2.0us", "9.0us", "300.00ms", "2.5us", "150.00ms", "300.00ms"]
        );
        assert!(
            row[3].contains("4000") && row[4].contains("3500"),
            "{row:?}"
        );
        assert!(t.note.contains("coordinated omission"));
        // Without a rate limit there is no table.
        assert!(rate_table(&[result(None)]).is_none());
    }
}
