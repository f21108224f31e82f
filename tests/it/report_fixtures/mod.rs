//! Synthetic result files with known figures, for report tests that need no root: the
//! figures below are chosen so that means, standard deviations, confidence intervals and
//! Welch p-values can be computed by hand.
#![allow(dead_code)]

use std::path::Path;

use fsgauge::measure::{new_histogram, summarize};
use fsgauge::results::*;

#[allow(clippy::too_many_arguments)]
/// A phase with the given wall and sys time, ops, bytes, latencies (ns), per-second ops and
/// worker count.
pub fn phase(
    name: &str,
    wall: f64,
    sys: f64,
    ops: u64,
    bytes: u64,
    lat: &[u64],
    series: &[u64],
    workers: usize,
) -> PhaseResult {
    let mut h = new_histogram();
    for &v in lat {
        h.record(v).unwrap();
    }
    PhaseResult {
        name: name.into(),
        wall_s: wall,
        user_s: wall / 10.0,
        sys_s: sys,
        ops,
        bytes,
        ops_per_s: ops as f64 / wall,
        bytes_per_s: bytes as f64 / wall,
        latency: summarize(&h, 0, 0),
        scheduled_latency: None,
        rate: None,
        op_stats: Default::default(),
        device: Some(DeviceDelta {
            read_bytes: 0,
            write_bytes: bytes + 4096,
            read_ios: 0,
            write_ios: 10,
            discard_bytes: 0,
            flush_ios: 1,
        }),
        journal_device: None,
        device_model: None,
        journal_device_model: None,
        series: series
            .iter()
            .enumerate()
            .map(|(t, &o)| SeriesPoint {
                t: t as f64,
                ops: o,
                bytes: o * 4096,
                ..Default::default()
            })
            .collect(),
        interval_s: None,
        ramp_s: None,
        ramp_totals: None,
        workers: (0..workers)
            .map(|w| WorkerSummary {
                worker: w as u32,
                ops: ops / workers as u64,
                bytes: 0,
                wall_s: wall,
                latency: Default::default(),
            })
            .collect(),
        extra: Default::default(),
        first_done_s: None,
        stonewall_s: None,
        ranks: Vec::new(),
        foreign_cache_drops: 0,
        writeback_changed: None,
        host_load: None,
        cpu_wait: None,
    }
}

/// A run result.
pub fn result(
    label: &str,
    kind: &str,
    params: serde_json::Value,
    rep: u32,
    phases: Vec<PhaseResult>,
) -> RunResult {
    let params_text = params.to_string();
    RunResult {
        schema: SCHEMA.into(),
        tool: ToolInfo {
            name: "fsgauge".into(),
            version: "0.1.0".into(),
        },
        host: HostInfo {
            hostname: "testhost".into(),
            kernel: "6.1.0-test".into(),
            cpus: 2,
            memory: 24 << 30,
        },
        testbed: TestbedInfo {
            label: label.into(),
            fs: "ext4".into(),
            size: 256 << 20,
            mkfs_args: vec!["mkfs.ext4".into(), "-F".into(), "/dev/loop9".into()],
            mount_options: "data=ordered".into(),
            journal: None,
            memory_limit: None,
            backing: "file".into(),
            device: Some("/dev/loop9".into()),
            loop_direct_io: Some(true),
            image_alloc: None,
            path: "/var/tmp/x".into(),
            device_model: None,
            journal_device_model: None,
            aged_image: None,
        },
        workload: WorkloadInfo {
            metrics: Vec::new(),
            sweep_axes: None,
            line_axis: None,
            size_params: None,
            kind: kind.into(),
            params,
        },
        rep,
        seed: 1,
        started_at: format!("2026-01-01T00:{:02}:{:02}Z", rep, label.len()),
        spec_hash: fnv(&format!("{label}-{kind}-{params_text}-{rep}")),
        conditions: Conditions {
            cold: "drop".into(),
            ..Default::default()
        },
        phases,
        layout: None,
        errors: vec![],
        tool_peak_rss: 10 << 20,
        mpi: None,
        environment: None,
        study: None,
        crash: None,
        set_aside: Vec::new(),
    }
}

/// Testbeds `a` and `b`, 3 repetitions of a tree workload each: create wall times 10/12/14 s on
/// `a` and 20/22/24 s on `b` (sys 1 s and 2 s), delete 1/2/3 s on both.
pub fn tree_study() -> Vec<RunResult> {
    let mut out = Vec::new();
    for (label, base, sys) in [("a", 10.0, 1.0), ("b", 20.0, 2.0)] {
        for rep in 0..3u32 {
            let wall = base + 2.0 * rep as f64;
            let lat: Vec<u64> = (1..=200u64)
                .map(|i| i * 1000 * if label == "a" { 1 } else { 3 })
                .collect();
            out.push(result(
                label,
                "tree",
                serde_json::json!({"dirs": 2, "files": 10, "file_size": 1048576, "block": 1048576, "fsync": "end"}),
                rep,
                vec![
                    phase("create", wall, sys, 22, 20 << 20, &lat, &[5, 7, 6, 4], 1),
                    phase("delete", 1.0 + rep as f64, 0.5, 22, 0, &lat[..50], &[22], 1),
                ],
            ));
        }
    }
    out
}

/// A threads sweep (1, 4, 8 threads) of a tio-like workload on testbeds `a` and `b`.
pub fn threads_study() -> Vec<RunResult> {
    let mut out = Vec::new();
    for (label, speed) in [("a", 100.0), ("b", 150.0)] {
        for threads in [1u64, 4, 8] {
            for rep in 0..3u32 {
                let mb = speed * (threads as f64).sqrt() * (1.0 + rep as f64 * 0.01);
                let bytes = (mb * 1e6 * 2.0) as u64;
                let lat: Vec<u64> = (1..=100u64).map(|i| i * 10_000 * threads).collect();
                out.push(result(
                    label,
                    "tio",
                    serde_json::json!({"threads": threads, "mode": "seq-write", "block": 4096}),
                    rep,
                    vec![phase(
                        "seq-write",
                        2.0,
                        0.3,
                        bytes / 4096,
                        bytes,
                        &lat,
                        &[100, 120],
                        threads as usize,
                    )],
                ));
            }
        }
    }
    out
}

/// Writes results into `dir`.
pub fn write_all(dir: &Path, results: &[RunResult]) {
    for r in results {
        write_result(dir, r).unwrap();
    }
}

/// FNV-1a, 64 bits, as 64 hex digits (a stand-in for the runner's SHA-256).
fn fnv(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}{:048x}", 0)
}

/// The question "create-time": the elapsed time of phase `create`, testbed `b` against `a`.
pub fn create_time_question() -> Question {
    Question {
        id: "create-time".into(),
        ask: String::new(),
        baseline: "a".into(),
        variant: "b".into(),
        compares: Compares::Testbeds,
        testbed: None,
        workload: None,
        phase: Some("create".into()),
        metric: "elapsed".into(),
        filter: Default::default(),
        published: None,
        source: String::new(),
        epsilon: DEFAULT_EPSILON,
        looks: None,
    }
}

/// The tree study with one question on it: does `b` take longer to create than `a`
/// (published 2.0×)?
pub fn tree_study_with_a_question() -> Vec<RunResult> {
    let q = Question {
        ask: "Does b take longer to create the tree than a?".into(),
        published: Some(2.0),
        source: "a made-up study".into(),
        ..create_time_question()
    };
    let mut all = tree_study();
    for r in &mut all {
        r.study = Some(StudyInfo {
            plan: "t".into(),
            workload: "tree".into(),
            questions: vec![q.clone()],
            scale: 1.0,
        });
    }
    all
}
