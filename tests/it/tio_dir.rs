//! `fsgauge bench tio` in an existing directory (`--dir`): needs no root. Exact counts with
//! many threads, the io_uring engine, verification with a corrupted block, and bad input.

use crate::support::{json_of, Sandbox};
use serde_json::Value;

fn dir(sb: &Sandbox) -> std::path::PathBuf {
    let d = sb.path().join("target");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `bench tio --dir D ARGS --json --out OUT` in this sandbox: its result document(s).
fn tio(sb: &Sandbox, d: &std::path::Path, args: &[&str]) -> Value {
    let out = sb
        .cmd()
        .args(["bench", "tio", "--dir"])
        .arg(d)
        .args(args)
        .args(["--json", "--out"])
        .arg(sb.out())
        .output()
        .unwrap();
    json_of(&out)
}

fn phases(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a
            .iter()
            .flat_map(|r| r["phases"].as_array().unwrap().clone())
            .collect(),
        r => r["phases"].as_array().unwrap().clone(),
    }
}

#[test]
fn sixty_four_threads_write_exactly_their_share() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "64",
            "--mode",
            "seqwrite,randwrite",
            "--block",
            "4K",
            "--file-size",
            "256K",
            "--fsync",
            "none",
            "--seed",
            "9",
        ],
    );
    let ph = phases(&v);
    assert_eq!(ph.len(), 2);
    for p in &ph {
        assert_eq!(p["bytes"], 64 * 256 * 1024, "{}", p["name"]);
        assert_eq!(p["ops"], 64 * 64);
        assert_eq!(p["latency"]["count"], 64 * 64);
        let workers = p["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 64);
        assert!(workers
            .iter()
            .all(|w| w["bytes"] == 256 * 1024 && w["ops"] == 64));
        assert_eq!(p["extra"]["files"], 64.0);
        assert_eq!(p["extra"]["threads"], 64.0);
    }
    assert_eq!(ph[0]["name"], "seqwrite-4K-t64");
    assert_eq!(ph[1]["name"], "randwrite-4K-t64");
    // The run directory is gone afterwards.
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}

#[test]
fn io_uring_moves_the_same_bytes_and_verifies() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "2",
            "--mode",
            "seqwrite,randwrite,seqread,randread",
            "--block",
            "4K,64K",
            "--file-size",
            "1M",
            "--engine",
            "io_uring",
            "--iodepth",
            "8",
            "--verify",
            "--fsync",
            "every:16",
        ],
    );
    let ph = phases(&v);
    assert_eq!(ph.len(), 8);
    for p in &ph {
        assert_eq!(p["bytes"], 2 << 20, "{}", p["name"]);
        let name = p["name"].as_str().unwrap();
        if name.contains("write") {
            // every:16 plus the final one, per thread
            let blocks = if name.contains("-4K-") { 256 } else { 16 };
            let fsyncs = 2 * ((blocks - 1) / 16 + 1);
            assert_eq!(p["op_stats"]["fsync"]["count"], fsyncs, "{name}");
        }
    }
}

#[test]
fn a_corrupted_block_is_reported_with_file_offset_expected_and_found() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    for engine in ["psync", "io_uring"] {
        let out = sb
            .cmd()
            .args(["bench", "tio", "--dir"])
            .arg(&d)
            .args([
                "--threads",
                "2",
                "--mode",
                "seqread",
                "--block",
                "4K",
                "--file-size",
                "256K",
            ])
            .args([
                "--verify",
                "--inject-corruption",
                "7",
                "--seed",
                "5",
                "-q",
                "--out",
            ])
            .arg(sb.out())
            .args([
                "--engine",
                engine,
                "--iodepth",
                if engine == "psync" { "1" } else { "4" },
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {err}");
        assert!(err.contains("verify failed"), "{err}");
        assert!(err.contains("/t000 at offset 28672"), "{err}");
        assert!(
            err.contains("expected fsgauge block of file 0 at offset 28672 (seed 5)"),
            "{err}"
        );
        assert!(
            err.contains("found the fsgauge block of file 0 at offset 32768"),
            "{err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[test]
fn bad_input_is_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let cases: &[(&[&str], &str)] = &[
        (
            &["--block", "1M", "--file-size", "512K"],
            "larger than --file-size",
        ),
        (&["--block", "1000"], "multiple of 512"),
        (&["--iodepth", "8"], "needs --engine io_uring"),
        (&["--mode", "append"], "unknown mode"),
        (&["--fsync", "every:0"], "every:N"),
        (&["--file-size", "1P"], "needs about"),
    ];
    for (args, msg) in cases {
        let out = sb
            .cmd()
            .args(["bench", "tio", "--dir"])
            .arg(&d)
            .args(*args)
            .arg("--out")
            .arg(sb.out())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    assert!(!sb.out().exists(), "no results for refused runs");
}

#[test]
fn latency_recording_can_be_turned_off_without_losing_counts() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "1",
            "--mode",
            "seqwrite",
            "--block",
            "4K",
            "--file-size",
            "512K",
            "--no-latency",
        ],
    );
    let p = &phases(&v)[0];
    assert_eq!(p["ops"], 128);
    assert_eq!(p["bytes"], 512 * 1024);
    assert_eq!(p["latency"]["count"], 0, "no latency recorded");
}

#[test]
fn threads_share_one_file_each_on_its_region() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "4",
            "--mode",
            "seqwrite,randwrite,randread",
            "--block",
            "8K",
            "--file-size",
            "512K",
            "--shared-file",
            "--verify",
        ],
    );
    for p in phases(&v) {
        assert_eq!(p["bytes"], 4 * 512 * 1024, "{}", p["name"]);
        if p["name"].as_str().unwrap().contains("write") {
            assert_eq!(p["extra"]["files"], 1.0, "one shared file");
        }
    }
}

#[test]
fn a_time_cap_ends_a_cell_early_with_consistent_counts() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "1",
            "--mode",
            "seqwrite",
            "--block",
            "4K",
            "--file-size",
            "1G",
            "--time",
            "0.2s",
            "--fsync",
            "none",
        ],
    );
    let p = &phases(&v)[0];
    let ops = p["ops"].as_u64().unwrap();
    assert!(ops > 0 && ops < 262_144, "{ops}");
    assert_eq!(p["bytes"].as_u64().unwrap(), ops * 4096);
    assert_eq!(p["extra"]["complete"], 0.0);
    let wall = p["wall_s"].as_f64().unwrap();
    assert!(wall < 5.0);
    // The requests' latencies (timed with the TSC where there is one) add up to most of the
    // wall time of a one-thread phase, and never to more.
    let lat = &p["latency"];
    let busy = lat["mean_ns"].as_f64().unwrap() * lat["count"].as_f64().unwrap() / 1e9;
    assert!(
        busy <= wall * 1.01 && busy >= wall * 0.5,
        "latencies {busy} s in {wall} s"
    );
}

#[test]
fn the_latency_probe_alternates_recording_on_and_off_within_one_run() {
    let sb = Sandbox::new();
    let d = dir(&sb);
    // 8 MiB of 4 KiB blocks: 2048 requests, four stretches of 512 (on, off, off, on).
    let v = tio(
        &sb,
        &d,
        &[
            "--threads",
            "2",
            "--mode",
            "randread",
            "--block",
            "4K",
            "--file-size",
            "8M",
            "--seed",
            "3",
            "--latency-probe",
        ],
    );
    let p = &phases(&v)[0];
    assert_eq!(p["ops"], 2 * 2048, "every request counted");
    assert_eq!(p["latency"]["count"], 2 * 1024, "the recorded half timed");
    let x = &p["extra"];
    assert_eq!(x["latency_probe_pairs"], 4.0, "two pairs per thread");
    for k in ["latency_probe_on_ns", "latency_probe_off_ns"] {
        let ns = x[k].as_f64().unwrap();
        assert!(ns > 0.0 && ns < 1e9, "{k} = {ns}");
    }
    assert!(x["latency_cost"].as_f64().unwrap().is_finite());

    // Not with io_uring, nor with recording off: bad input, nothing run.
    for extra in [&["--engine", "io_uring"][..], &["--no-latency"][..]] {
        let out = sb
            .cmd()
            .args(["bench", "tio", "--dir"])
            .arg(&d)
            .args(["--mode", "randread", "--file-size", "1M", "--latency-probe"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--latency-probe"), "{err}");
    }
}
