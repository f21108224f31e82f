//! Exact aggregation of the ranks of an MPI run: each rank measured its phases on its own; here
//! they become one phase list. Each rank's phase is a part of the merged phase folded by
//! [`PhaseTotals`], the accumulator the workers of one process fold into as well: operations,
//! bytes and CPU time are summed; latency histograms (stored with every summary) are decoded
//! and added bucket by bucket, so the merged percentiles are those of every operation of every
//! rank; the wall time is the slowest rank's and `first_done_s` the fastest's; device counters
//! are summed once per host (ranks on one host share its devices); each phase keeps a per-rank
//! table; workload figures (`extra`) merge as their workload declares next to each figure
//! ([`crate::results::Combine`] in its [`MetricDef`]).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::measure::PhaseTotals;
use crate::results::{MetricDef, PhaseResult};

/// What one rank sends to rank 0 at the end of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankReport {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    pub phases: Vec<PhaseResult>,
    /// Names of the phases this rank stopped at the stonewall before its work was done.
    pub walled: Vec<String>,
    pub warnings: Vec<String>,
}

/// Merges the ranks' phases (reports in rank order) into one list, with per-rank tables;
/// `metrics` are the workload's declarations of its `extra` figures.
pub fn merge_phases(reports: &[RankReport], metrics: &[MetricDef]) -> Result<Vec<PhaseResult>> {
    let Some(first) = reports.first() else {
        return Ok(Vec::new());
    };
    for r in reports {
        let names = |x: &RankReport| x.phases.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        if names(r) != names(first) {
            bail!(
                "rank {} ran phases {:?} but rank {} ran {:?}; every rank must run the same workload",
                r.rank,
                names(r),
                first.rank,
                names(first)
            );
        }
    }
    (0..first.phases.len())
        .map(|i| merge_one(reports, i, metrics))
        .collect()
}

/// Warnings of every rank: rank 0's as they are, the others' once each, naming the ranks.
pub fn merge_warnings(reports: &[RankReport]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for r in reports {
        for w in &r.warnings {
            seen.entry(w.clone()).or_default().push(r.rank);
        }
    }
    for (w, ranks) in seen {
        if ranks.len() == reports.len() {
            out.push(w);
        } else {
            let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
            out.push(format!("rank {}: {w}", list.join(",")));
        }
    }
    out
}

/// Phase `i` of every rank, folded into one (see [`PhaseTotals`] for how each figure
/// combines).
fn merge_one(reports: &[RankReport], i: usize, metrics: &[MetricDef]) -> Result<PhaseResult> {
    let mut totals = PhaseTotals::new(&reports[0].phases[i].name);
    for r in reports {
        let p = &r.phases[i];
        let walled = r.walled.contains(&p.name);
        let part = PhaseTotals::of_rank(r.rank, &r.host, walled, p)
            .with_context(|| format!("merging phase {} of rank {}", p.name, r.rank))?;
        totals.merge(&part);
    }
    Ok(totals.into_result(metrics))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::measure::{new_histogram, summarize};
    use crate::results::{
        Combine, DeviceDelta, OpStats, RateOutcome, SeriesPoint, WorkerRate, WorkerSummary,
    };

    fn phase(name: &str, wall: f64, lat_ns: &[u64], bytes_per_op: u64) -> PhaseResult {
        let mut h = new_histogram();
        for &v in lat_ns {
            h.record(v).unwrap();
        }
        let lat = summarize(&h, 0, 0);
        let ops = lat_ns.len() as u64;
        let mut op_stats = BTreeMap::new();
        op_stats.insert(
            "create".to_string(),
            OpStats {
                count: ops,
                bytes: ops * bytes_per_op,
                primary: true,
                reads: false,
                latency: lat.clone(),
                scheduled_latency: None,
            },
        );
        let mut extra = BTreeMap::new();
        extra.insert("files".to_string(), ops as f64);
        extra.insert("files_per_s".to_string(), ops as f64 / wall);
        extra.insert("block".to_string(), 4096.0);
        PhaseResult {
            name: name.into(),
            wall_s: wall,
            user_s: 0.1,
            sys_s: 0.2,
            ops,
            bytes: ops * bytes_per_op,
            ops_per_s: ops as f64 / wall,
            bytes_per_s: 0.0,
            latency: lat,
            scheduled_latency: None,
            rate: None,
            op_stats,
            device: Some(DeviceDelta {
                write_bytes: 4096,
                ..Default::default()
            }),
            journal_device: None,
            device_model: None,
            journal_device_model: None,
            series: vec![SeriesPoint {
                t: 0.0,
                ops,
                bytes: ops * bytes_per_op,
                ..Default::default()
            }],
            interval_s: None,
            ramp_s: None,
            ramp_totals: None,
            workers: Vec::new(),
            extra,
            first_done_s: None,
            stonewall_s: None,
            ranks: Vec::new(),
            foreign_cache_drops: 0,
            writeback_changed: None,
            host_load: None,
            cpu_wait: None,
        }
    }

    /// The declarations of the figures these tests record, as a workload makes them.
    const DECLARED: &[MetricDef] = &[
        MetricDef::count("files", "files", ""),
        MetricDef::rate("files_per_s", "file rate", "files/s"),
        MetricDef::count("block", "block size", "B").combine(Combine::Same),
        MetricDef::higher("complete", "every request done", "").combine(Combine::Min),
        MetricDef::higher("layout_score", "layout score", "").combine(Combine::Mean),
        MetricDef::lower("extents_per_file_max", "most extents", "").combine(Combine::Max),
        MetricDef::count("threads", "threads", ""),
        MetricDef::rate("iops", "IOPS", "ops/s"),
        MetricDef::lower("over_2s_share", "share over 2 s", "").combine(Combine::ShareOver2s),
        MetricDef::higher("mb_per_cpu_s", "MB per CPU second", "").combine(Combine::MbPerCpuS),
    ];

    fn report(rank: u32, host: &str, phases: Vec<PhaseResult>) -> RankReport {
        RankReport {
            rank,
            host: host.into(),
            pid: 100 + rank,
            phases,
            walled: Vec::new(),
            warnings: vec!["same everywhere".into()],
        }
    }

    #[test]
    fn sums_counts_merges_histograms_and_keeps_the_slowest_wall() {
        let fast: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let slow: Vec<u64> = (1..=300).map(|i| i * 1_000_000).collect();
        let reports = vec![
            report(0, "a", vec![phase("create", 1.0, &fast, 4096)]),
            report(1, "a", vec![phase("create", 4.0, &slow, 4096)]),
            report(2, "b", vec![phase("create", 2.0, &fast, 4096)]),
        ];
        let m = merge_phases(&reports, DECLARED).unwrap();
        let p = &m[0];
        assert_eq!(p.ops, 500);
        assert_eq!(p.bytes, 500 * 4096);
        assert_eq!(p.latency.count, 500);
        assert_eq!(p.op_stats["create"].latency.count, 500);
        assert_eq!(p.wall_s, 4.0);
        assert_eq!(p.first_done_s, Some(1.0));
        assert!((p.user_s - 0.3).abs() < 1e-9);
        // The median of all 500 operations lies in the slow rank's range (300 of 500 are slow).
        assert!(p.latency.p50_ns > 1_000_000, "{}", p.latency.p50_ns);
        assert_eq!(p.latency.max_ns / 1_000_000, 300);
        // One device reading per host: hosts a and b.
        assert_eq!(p.device.unwrap().write_bytes, 2 * 4096);
        assert_eq!(p.series[0].ops, 500);
        assert_eq!(p.extra["files"], 500.0);
        assert_eq!(p.extra["block"], 4096.0);
        assert!((p.extra["files_per_s"] - 500.0 / 4.0).abs() < 1e-9);
        assert_eq!(p.ranks.len(), 3);
        assert_eq!(p.ranks[1].ops, 300);
        assert!(p.ranks[1].latency.hdr.is_empty());
        let sum: u64 = p.ranks.iter().map(|r| r.latency.count).sum();
        assert_eq!(sum, p.latency.count);
        assert_eq!(
            merge_warnings(&reports),
            vec!["same everywhere".to_string()]
        );
    }

    #[test]
    fn workload_figures_merge_by_what_they_are() {
        let mut a = phase("seqwrite-4K-t2", 2.0, &[10, 20], 4096);
        let mut b = phase("seqwrite-4K-t2", 1.0, &[30, 40], 4096);
        for (p, complete, score, ext_max) in [(&mut a, 1.0, 0.5, 3.0), (&mut b, 0.0, 1.0, 7.0)] {
            p.extra.insert("complete".into(), complete);
            p.extra.insert("layout_score".into(), score);
            p.extra.insert("extents_per_file_max".into(), ext_max);
            p.extra.insert("threads".into(), 2.0);
            p.extra.insert("iops".into(), p.ops as f64 / p.wall_s);
            p.extra.insert("over_2s_share".into(), 0.5);
            p.extra.insert("mb_per_cpu_s".into(), 123.0);
            p.workers = (0..2)
                .map(|w| WorkerSummary {
                    worker: w,
                    ops: 1,
                    ..Default::default()
                })
                .collect();
        }
        let m = merge_phases(
            &[report(0, "a", vec![a]), report(1, "b", vec![b])],
            DECLARED,
        )
        .unwrap();
        let x = &m[0].extra;
        assert_eq!(x["complete"], 0.0, "one rank incomplete: the phase is");
        assert_eq!(x["layout_score"], 0.75);
        assert_eq!(x["extents_per_file_max"], 7.0);
        assert_eq!(x["threads"], 4.0);
        assert_eq!(x["block"], 4096.0);
        // 4 requests over the slowest rank's 2 s.
        assert_eq!(x["iops"], 2.0);
        assert_eq!(
            x["over_2s_share"], 0.0,
            "recomputed from the merged histogram"
        );
        let cpu = m[0].user_s + m[0].sys_s;
        assert!((x["mb_per_cpu_s"] - m[0].bytes as f64 / 1e6 / cpu).abs() < 1e-9);
        let ids: Vec<u32> = m[0].workers.iter().map(|w| w.worker).collect();
        assert_eq!(ids, [0, 1, 2, 3], "workers numbered across ranks");
        // Ranks on two hosts: both hosts' device counters count.
        assert_eq!(m[0].device.unwrap().write_bytes, 2 * 4096);
    }

    #[test]
    fn figures_merge_as_declared_whatever_their_names() {
        let mut a = phase("create", 2.0, &[10, 20], 0);
        let mut b = phase("create", 1.0, &[30, 40], 0);
        for (p, v) in [(&mut a, 3.0), (&mut b, 5.0)] {
            p.extra.insert("foo_per_s".into(), v);
            p.extra.insert("speed".into(), v);
            p.extra.insert("depth_max".into(), v);
            p.extra.insert("lowest".into(), v);
        }
        let declared = [
            MetricDef::count("foo_per_s", "foo", ""),
            MetricDef::rate("speed", "speed", "MB/s"),
            MetricDef::count("depth_max", "depth", "").combine(Combine::Mean),
            MetricDef::count("lowest", "lowest", "").combine(Combine::Min),
        ];
        let m = merge_phases(
            &[report(0, "a", vec![a]), report(1, "a", vec![b])],
            &declared,
        )
        .unwrap();
        let x = &m[0].extra;
        assert_eq!(x["foo_per_s"], 8.0, "declared a sum: summed, not a rate");
        // 3/s for 2 s and 5/s for 1 s over the slowest rank's 2 s.
        assert_eq!(
            x["speed"], 5.5,
            "declared a rate: recomputed over the wall time"
        );
        assert_eq!(
            x["depth_max"], 4.0,
            "declared a mean: averaged, not a maximum"
        );
        assert_eq!(x["lowest"], 3.0);
        // A figure no declaration names is summed.
        assert_eq!(x["files"], 4.0);
    }

    #[test]
    fn series_seconds_merge_their_latency_bucket_by_bucket() {
        let fast: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let slow: Vec<u64> = (1..=300).map(|i| i * 1_000_000).collect();
        let mut a = phase("create", 1.0, &fast, 4096);
        let mut b = phase("create", 4.0, &slow, 4096);
        // Each rank's one second has its phase's histogram; rank b has a second second
        // without operations.
        for p in [&mut a, &mut b] {
            p.series[0].latency = Some(p.latency.clone());
        }
        b.series.push(SeriesPoint {
            t: 1.0,
            ..Default::default()
        });
        let m = merge_phases(&[report(0, "a", vec![a]), report(1, "a", vec![b])], &[]).unwrap();
        let p = &m[0];
        assert_eq!(p.series.len(), 2);
        assert_eq!(p.series[0].latency.as_ref(), Some(&p.latency));
        assert_eq!(p.series[0].latency.as_ref().unwrap().count, 400);
        assert_eq!(p.series[1].latency, None);
    }

    #[test]
    fn scheduled_latency_and_rates_merge_over_the_ranks_that_have_them() {
        let fast: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let slow: Vec<u64> = (1..=300).map(|i| i * 1_000_000).collect();
        let mut a = phase("randread-4K-t1", 1.0, &fast, 4096);
        let mut b = phase("randread-4K-t1", 1.0, &slow, 4096);
        for p in [&mut a, &mut b] {
            p.scheduled_latency = Some(p.latency.clone());
            p.series[0].scheduled_latency = Some(p.latency.clone());
            p.op_stats.get_mut("create").unwrap().scheduled_latency = Some(p.latency.clone());
            p.rate = Some(RateOutcome {
                unit: "ops/s".into(),
                workers: vec![WorkerRate {
                    worker: 0,
                    asked: 100.0,
                    achieved: p.ops as f64,
                }],
            });
        }
        // A third rank without a rate limit adds nothing to either.
        let c = phase("randread-4K-t1", 1.0, &fast, 4096);
        let m = merge_phases(
            &[
                report(0, "a", vec![a]),
                report(1, "a", vec![b]),
                report(2, "a", vec![c]),
            ],
            &[],
        )
        .unwrap();
        let p = &m[0];
        let s = p.scheduled_latency.as_ref().unwrap();
        assert_eq!(s.count, 400);
        assert_eq!(s.max_ns, p.op_stats["create"].latency.max_ns);
        assert_eq!(p.series[0].scheduled_latency.as_ref(), Some(s));
        assert_eq!(p.op_stats["create"].scheduled_latency.as_ref(), Some(s));
        let r = p.rate.as_ref().unwrap();
        let got: Vec<(u32, f64)> = r.workers.iter().map(|w| (w.worker, w.achieved)).collect();
        assert_eq!(got, [(0, 100.0), (1, 300.0)]);
    }

    /// Ranks with every part a phase can have: series with latency, a ramp, workers, rates,
    /// scheduled latency, journal devices, declared and undeclared figures.
    fn full_reports() -> Vec<RankReport> {
        let lat = |k: u64, n: u64| (1..=n).map(|i| i * 1000 * k + 3).collect::<Vec<u64>>();
        let mut reports = Vec::new();
        for (rank, host) in [(0u32, "a"), (1, "a"), (2, "b")] {
            let k = rank as u64 + 1;
            let mut p = phase("create", 1.0 + rank as f64, &lat(k, 100 * k), 4096);
            let mut q = phase("create", 1.0, &lat(k + 7, 30), 512);
            q.ramp_s = Some(1.0);
            p.ramp_s = Some(1.0);
            p.interval_s = Some(0.5);
            p.ramp_totals = Some(crate::results::RampTotals {
                seconds: 0.5 + rank as f64,
                ops: 30,
                bytes: 30 * 512,
                latency: q.latency.clone(),
            });
            p.series = (0..(3 + rank as usize))
                .map(|t| SeriesPoint {
                    t: t as f64 * 0.5,
                    ramp: t < 2,
                    ops: 10 * k + t as u64,
                    bytes: 4096 * (10 * k + t as u64),
                    latency: (t != 1).then(|| q.latency.clone()),
                    scheduled_latency: (rank == 1).then(|| p.latency.clone()),
                })
                .collect();
            p.series.swap(0, 2);
            p.journal_device = (rank != 1).then(|| DeviceDelta {
                flush_ios: 7 + rank as u64,
                read_ios: 3,
                ..Default::default()
            });
            p.op_stats
                .insert("write".into(), q.op_stats["create"].clone());
            if rank != 0 {
                p.scheduled_latency = Some(q.latency.clone());
                p.rate = Some(RateOutcome {
                    unit: "ops/s".into(),
                    workers: vec![WorkerRate {
                        worker: 0,
                        asked: 50.0,
                        achieved: 40.0 + k as f64,
                    }],
                });
            }
            p.workers = (0..rank)
                .map(|w| WorkerSummary {
                    worker: w,
                    ops: 5 + w as u64,
                    bytes: 7,
                    wall_s: 0.25,
                    latency: Default::default(),
                })
                .collect();
            if rank == 2 {
                p.stonewall_s = Some(2.0);
            }
            for (key, v) in [
                ("complete", 1.0 - rank as f64 / 2.0),
                ("layout_score", 0.3 * k as f64),
                ("extents_per_file_max", 2.0 * k as f64),
                ("iops", 100.0 * k as f64),
                ("over_2s_share", 0.1),
                ("mb_per_cpu_s", 9.0),
                ("undeclared", 1.5),
            ] {
                p.extra.insert(key.into(), v);
            }
            let mut r = report(rank, host, vec![p]);
            if rank == 1 {
                r.walled.push("create".into());
            }
            reports.push(r);
        }
        reports
    }

    #[test]
    fn merge_gives_what_it_gave_before() {
        const SNAPSHOT: &str = "src/dist/testdata/merge_snapshot.json";
        let m = merge_phases(&full_reports(), DECLARED).unwrap();
        let got = serde_json::to_string_pretty(&m).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
        if std::env::var_os("FSGAUGE_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap();
        assert!(got == want, "the merge differs from {SNAPSHOT}");
    }

    #[test]
    fn refuses_ranks_that_ran_different_phases() {
        let reports = vec![
            report(0, "a", vec![phase("create", 1.0, &[5], 0)]),
            report(1, "a", vec![phase("remove", 1.0, &[5], 0)]),
        ];
        let e = merge_phases(&reports, DECLARED).unwrap_err().to_string();
        assert!(e.contains("rank 1"), "{e}");
    }

    #[test]
    fn warnings_of_some_ranks_name_them() {
        let mut a = report(0, "a", Vec::new());
        let mut b = report(1, "a", Vec::new());
        a.warnings.push("only here".into());
        b.warnings.clear();
        let w = merge_warnings(&[a, b]);
        assert!(w.contains(&"rank 0: only here".to_string()), "{w:?}");
        assert!(w.contains(&"rank 0: same everywhere".to_string()), "{w:?}");
    }
}
