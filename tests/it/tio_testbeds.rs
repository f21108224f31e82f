//! `fsgauge bench tio` on real ext4, xfs and btrfs testbeds. Needs root, loop devices and the
//! filesystems' mkfs (skips with a printed reason otherwise; fails under CI): a small sweep
//! with a fresh filesystem per cell and the layout record, and verification catching a
//! corrupted block.

use crate::support::{have_fs, json_of, size_of, Sandbox};

fn sweep(fs: &str) {
    if !have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&["bench", "tio", "--fs", fs, "--fs-size", size_of(fs)])
        .args([
            "--threads",
            "1,2",
            "--mode",
            "seqwrite,randwrite,randread",
            "--block",
            "4K",
        ])
        .args([
            "--file-size",
            "2M",
            "--verify",
            "--cold",
            "drop",
            "--seed",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    let runs = v.as_array().expect("one result per cell");
    assert_eq!(runs.len(), 6, "a fresh filesystem (and result) per cell");
    for r in runs {
        assert_eq!(r["testbed"]["fs"], fs);
        let ph = r["phases"].as_array().unwrap();
        assert_eq!(ph.len(), 1, "one cell per run");
        let p = &ph[0];
        let name = p["name"].as_str().unwrap();
        let threads = p["extra"]["threads"].as_f64().unwrap() as u64;
        assert!(name.ends_with(&format!("-t{threads}")), "{name}");
        assert_eq!(p["bytes"].as_u64().unwrap(), threads * (2 << 20), "{name}");
        assert_eq!(p["ops"].as_u64().unwrap(), threads * 512, "{name}");
        for k in [
            "mb_per_s",
            "iops",
            "cpu_s",
            "mb_per_cpu_s",
            "over_2s_share",
            "over_10s_share",
        ] {
            assert!(p["extra"][k].is_number(), "{name}: {k}");
        }
        assert!(p["latency"]["p99_ns"].as_u64().unwrap() > 0);
        if name.contains("write") {
            let x = &p["extra"];
            assert_eq!(x["files"].as_f64().unwrap() as u64, threads, "{name}");
            let ext = x["extents_per_file_mean"].as_f64().unwrap();
            let score = x["layout_score"].as_f64().unwrap();
            assert!(ext >= 1.0, "{name}: {ext}");
            assert!((0.0..=1.0).contains(&score), "{name}: {score}");
            if name.starts_with("seqwrite") {
                // A 2M file written front to back on an empty filesystem is (nearly) contiguous.
                assert!(score > 0.9, "{fs} {name}: layout score {score}");
            }
            assert_eq!(
                p["device"]["write_bytes"].as_u64().map(|b| b > 0),
                Some(true)
            );
        } else {
            assert!(p["extra"].get("layout_score").is_none());
        }
    }
    sb.assert_clean();
    // The CSV of the sweep sits next to the results.
    let csv = std::fs::read_dir(sb.out())
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".csv"))
        .expect("a sweep CSV");
    let text = std::fs::read_to_string(csv.path()).unwrap();
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(text.starts_with("testbed,fs,rep,mode,block,threads,mb_per_s"));
}

fn corruption(fs: &str) {
    if !have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&["bench", "tio", "--fs", fs, "--fs-size", size_of(fs)])
        .args([
            "--threads",
            "1",
            "--mode",
            "randread",
            "--block",
            "4K",
            "--file-size",
            "1M",
        ])
        .args([
            "--verify",
            "--inject-corruption",
            "100",
            "--seed",
            "11",
            "--cold",
            "drop",
            "-q",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("at offset 409600: expected fsgauge block of file 0 at offset 409600 (seed 11), found the fsgauge block of file 0 at offset 413696"),
        "{err}"
    );
    sb.assert_clean();
}

fn table(fs: &str) {
    if !have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tio",
            "--fs",
            fs,
            "--fs-size",
            size_of(fs),
            "--label",
            "mine",
        ])
        .args([
            "--threads",
            "1,2",
            "--mode",
            "seqwrite",
            "--block",
            "4K,64K",
            "--file-size",
            "1M",
        ])
        .args(["--fresh-fs", "off", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("seqwrite 4K: MB/s"), "{text}");
    assert!(text.contains("seqwrite 64K: MB/s"), "{text}");
    assert!(text.contains("threads  mine"), "{text}");
    assert!(text.contains("seqwrite-64K-t2"), "{text}");
    // One run (fresh-fs off): one result file.
    let n = std::fs::read_dir(sb.out())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(n, 1);
    sb.assert_clean();
}

#[test]
fn ext4_sweep_layout_and_verify() {
    sweep("ext4");
}

#[test]
fn xfs_sweep_layout_and_verify() {
    sweep("xfs");
}

#[test]
fn btrfs_sweep_layout_and_verify() {
    sweep("btrfs");
}

#[test]
fn ext4_corrupted_block_is_reported() {
    corruption("ext4");
}

#[test]
fn xfs_corrupted_block_is_reported() {
    corruption("xfs");
}

#[test]
fn btrfs_corrupted_block_is_reported() {
    corruption("btrfs");
}

#[test]
fn ext4_one_filesystem_for_the_whole_sweep_prints_the_tables() {
    table("ext4");
}

#[test]
fn a_sweep_larger_than_the_testbed_is_refused_before_anything_is_made() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&["bench", "tio", "--fs", "ext4", "--fs-size", "256M"])
        .args([
            "--threads",
            "8",
            "--mode",
            "seqwrite",
            "--block",
            "4K",
            "--file-size",
            "64M",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--fs-size"), "{err}");
    sb.assert_clean();
}
