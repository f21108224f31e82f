//! `fsgauge age` on real ext4, xfs and btrfs testbeds, every mode (needs root, loop devices and
//! each mkfs; skips with a reason otherwise, fails under CI): each checkpoint lands within 1%
//! of the filesystem size of its target, the figures and layout summaries are in the result,
//! the same seed gives the same manifest digest, ENOSPC stops cleanly, nothing is left behind.

use crate::support::{have_fs, json_of, size_of, Sandbox};
use serde_json::Value;

fn age(sb: &Sandbox, fs: &str, args: &[&str]) -> Value {
    let mut a = vec![
        "age",
        "--fs",
        fs,
        "--fs-size",
        size_of(fs),
        "--json",
        "--quiet",
    ];
    a.extend_from_slice(args);
    let out = sb.bench(&a).output().unwrap();
    json_of(&out)
}

/// Every `age-P` phase reached P within 1%, and has its figures and layout record.
fn assert_checkpoints(doc: &Value, targets: &[f64]) {
    let phases = doc["phases"].as_array().unwrap();
    for t in targets {
        let name = format!("age-{t}");
        let p = phases
            .iter()
            .find(|p| p["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no phase {name} in {:#?}", doc["phases"]));
        let x = &p["extra"];
        let usage = x["usage_pct"].as_f64().unwrap();
        assert!(
            (usage - t).abs() <= 1.0,
            "{name}: usage {usage}% is not within 1% of {t}%"
        );
        assert_eq!(x["enospc"], 0.0);
        assert!(x["files"].as_f64().unwrap() > 0.0);
        assert!(x["write_kbps"].as_f64().unwrap() > 0.0);
        assert!(x["extents_per_file"].as_f64().unwrap() >= 1.0);
    }
    let cps = doc["layout"]["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), phases.len());
    for c in cps {
        assert!(c["tree"]["files"].as_u64().unwrap() > 0);
        assert!(c["free_space"].is_object());
    }
    let digest = doc["layout"]["manifest"]["sha256"].as_str().unwrap();
    assert_eq!(digest.len(), 64);
}

#[test]
fn fill_hits_each_checkpoint_on_ext4_xfs_btrfs() {
    for fs in ["ext4", "xfs", "btrfs"] {
        if !have_fs(fs) {
            continue;
        }
        let sb = Sandbox::new();
        let doc = age(
            &sb,
            fs,
            &["--usage", "30,60", "--seed", "5", "--tree", "4x100"],
        );
        assert_checkpoints(&doc, &[30.0, 60.0]);
        // Files and bytes grow from one checkpoint to the next.
        let p = doc["phases"].as_array().unwrap();
        assert!(p[1]["extra"]["bytes"].as_f64() > p[0]["extra"]["bytes"].as_f64());
        sb.assert_clean();
    }
}

#[test]
fn append_round_robin_on_ext4_xfs_btrfs() {
    for fs in ["ext4", "xfs", "btrfs"] {
        if !have_fs(fs) {
            continue;
        }
        let sb = Sandbox::new();
        let doc = age(
            &sb,
            fs,
            &[
                "--mode", "append", "--tree", "2x50", "--append", "16K", "--usage", "20,40",
                "--seed", "1",
            ],
        );
        assert_checkpoints(&doc, &[20.0, 40.0]);
        // Append mode keeps exactly the N×C files and only grows them.
        for p in doc["phases"].as_array().unwrap() {
            assert_eq!(p["extra"]["files"], 100.0, "{fs}");
            assert!(p["op_stats"]["append"]["count"].as_u64().unwrap() > 100);
        }
        sb.assert_clean();
    }
}

#[test]
fn append_with_preallocation_on_ext4() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let doc = age(
        &sb,
        "ext4",
        &[
            "--mode",
            "append",
            "--prealloc",
            "--tree",
            "1x40",
            "--usage",
            "30",
            "--seed",
            "2",
        ],
    );
    assert_checkpoints(&doc, &[30.0]);
    let p = &doc["phases"][0]["op_stats"];
    assert_eq!(p["fallocate"]["count"], 40);
    assert_eq!(p["truncate"]["count"], 40);
    sb.assert_clean();
}

#[test]
fn churn_keeps_fullness_steady_on_ext4_xfs_btrfs() {
    for fs in ["ext4", "xfs", "btrfs"] {
        if !have_fs(fs) {
            continue;
        }
        let sb = Sandbox::new();
        let doc = age(
            &sb,
            fs,
            &[
                "--mode",
                "churn",
                "--usage",
                "50",
                "--churn",
                "0.6x",
                "--dist",
                "uniform:4K..256K",
                "--seed",
                "3",
            ],
        );
        assert_checkpoints(&doc, &[50.0]);
        let churn = doc["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "churn-0.6x")
            .unwrap_or_else(|| panic!("{fs}: no churn phase"));
        let x = &churn["extra"];
        let usage = x["usage_pct"].as_f64().unwrap();
        assert!((usage - 50.0).abs() <= 1.0, "{fs}: churn ended at {usage}%");
        assert!(churn["op_stats"]["unlink"]["count"].as_u64().unwrap() > 0);
        // At least 0.6 × the filesystem size was written after filling.
        let size = doc["layout"]["fs_size"].as_f64().unwrap();
        let filled = doc["phases"][0]["extra"]["written_bytes"].as_f64().unwrap();
        assert!(x["written_bytes"].as_f64().unwrap() - filled >= 0.6 * size * 0.99);
        assert!(x["layout_score"].as_f64().is_some());
        sb.assert_clean();
    }
}

#[test]
fn same_seed_same_manifest_and_fallocate_only() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let run = |seed: &str, extra: &[&str]| {
        let mut a = vec!["--usage", "40", "--dist", "agrawal", "--seed", seed];
        a.extend_from_slice(extra);
        let d = age(&sb, "ext4", &a);
        (
            d["layout"]["manifest"]["sha256"]
                .as_str()
                .unwrap()
                .to_string(),
            d,
        )
    };
    let (a, da) = run("11", &[]);
    let (b, _) = run("11", &[]);
    let (c, _) = run("12", &[]);
    assert_eq!(
        a, b,
        "same seed, same filesystem: the operation streams differ"
    );
    assert_ne!(a, c, "a different seed gave the same operation stream");
    assert_checkpoints(&da, &[40.0]);
    let (f, df) = run("11", &["--fallocate-only"]);
    assert_checkpoints(&df, &[40.0]);
    assert_eq!(df["phases"][0]["op_stats"]["write"]["count"], 0);
    assert!(
        df["phases"][0]["op_stats"]["fallocate"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(f.len(), 64);
    sb.assert_clean();
}

#[test]
fn enospc_before_the_target_stops_cleanly() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    // Few inodes: creating 4K files runs out of inodes (ENOSPC) long before 60%.
    let out = sb
        .bench(&[
            "age",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--mkfs-opts",
            "-N 64",
            "--usage",
            "30,60",
            "--dist",
            "fixed:4K",
            "--seed",
            "1",
            "--json",
            "--quiet",
        ])
        .output()
        .unwrap();
    // A checkpoint not reached is a failure of the measured system (exit 1); the result is
    // still printed and written.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let phases = doc["phases"].as_array().unwrap();
    assert_eq!(
        phases.len(),
        1,
        "stops at the first checkpoint it cannot reach"
    );
    let x = &phases[0]["extra"];
    assert_eq!(x["enospc"], 1.0);
    assert!(x["usage_pct"].as_f64().unwrap() < 29.0);
    assert!(x["files"].as_f64().unwrap() > 0.0);
    let errors = doc["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().unwrap().contains("ENOSPC")),
        "{errors:?}"
    );
    sb.assert_clean();
}

#[test]
fn btrfs_keeps_truncated_preallocation_and_says_so() {
    if !have_fs("btrfs") {
        return;
    }
    let sb = Sandbox::new();
    // btrfs frees an extent only when no part of it is referenced: truncating a preallocated
    // file to its first block keeps the whole extent, so usage is at 40% before appending.
    let doc = age(
        &sb,
        "btrfs",
        &[
            "--mode",
            "append",
            "--prealloc",
            "--tree",
            "3x20",
            "--append",
            "8K",
            "--usage",
            "20,40",
            "--seed",
            "1",
        ],
    );
    let first = &doc["phases"][0]["extra"];
    assert!(first["usage_pct"].as_f64().unwrap() > 21.0, "{first}");
    let errors = doc["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.as_str().unwrap().contains("age-20: usage")),
        "{errors:?}"
    );
    sb.assert_clean();
}

#[test]
fn ext2_preallocates_by_writing_and_refuses_fallocate_only() {
    if !have_fs("ext2") {
        return;
    }
    let sb = Sandbox::new();
    // ext2 has no fallocate(2): preallocation writes the expected length, as in 2001.
    let doc = age(
        &sb,
        "ext2",
        &[
            "--mode",
            "append",
            "--prealloc",
            "--tree",
            "1x20",
            "--usage",
            "20",
            "--seed",
            "1",
        ],
    );
    assert_checkpoints(&doc, &[20.0]);
    assert_eq!(doc["phases"][0]["op_stats"]["truncate"]["count"], 20);
    let out = sb
        .bench(&[
            "age",
            "--fs",
            "ext2",
            "--fs-size",
            "256M",
            "--usage",
            "20",
            "--fallocate-only",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("does not support fallocate"), "{err}");
    sb.assert_clean();
}
