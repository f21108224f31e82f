//! `fsgauge bench create` on real ext4, xfs and btrfs testbeds (needs root, loop devices and
//! the mkfs tools; skipped with a reason otherwise, failed under CI), plus bad input.

use crate::support::{json_of, phase, refused_in_dir, Sandbox};

fn create_on(fs: &str, size: &str, fsync: &str) {
    if !crate::support::have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "create",
            "--fs",
            fs,
            "--fs-size",
            size,
            "--files",
            "300",
            "--threads",
            "2",
            "--files-per-dir",
            "64",
            "--file-size",
            "6K",
            "--block",
            "4K",
            "--fsync",
            fsync,
            "--json",
            "--quiet",
        ])
        .output()
        .unwrap();
    let run = json_of(&out);
    sb.assert_clean();
    let c = phase(&run, "create");
    let st = &c["op_stats"];
    assert_eq!(c["ops"], 600, "two workers × 300 files");
    assert_eq!(c["bytes"], 600 * 6144);
    assert_eq!(st["open"]["count"], 600);
    assert_eq!(st["close"]["count"], 600);
    assert_eq!(st["write"]["count"], 1200, "6K in 4K writes: two each");
    assert_eq!(st["write"]["bytes"], 600 * 6144);
    let (fsyncs, syncfs) = match fsync {
        "file" => (600, 0),
        "end" => (0, 2),
        _ => (0, 0),
    };
    assert_eq!(st["fsync"]["count"], fsyncs);
    assert_eq!(st["syncfs"]["count"], syncfs);
    // Every syscall kind has its own latency figures.
    for k in ["open", "write", "close"] {
        assert!(st[k]["latency"]["p50_ns"].as_u64().unwrap() > 0, "{k}");
    }
    let workers = c["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    assert!(workers.iter().all(|w| w["ops"] == 300));
    let files_per_s = c["extra"]["files_per_s"].as_f64().unwrap();
    let wall = c["wall_s"].as_f64().unwrap();
    assert!((files_per_s * wall - 600.0).abs() < 1e-6);
    let rm = phase(&run, "remove");
    assert_eq!(rm["ops"], 600);
    assert_eq!(
        rm["op_stats"]["rmdir"]["count"],
        2 * 5,
        "300 files in dirs of 64: 5 each"
    );
}

#[test]
fn create_on_ext4_with_fsync_per_file() {
    create_on("ext4", "256M", "file");
}

#[test]
fn create_on_xfs_with_syncfs_at_the_end() {
    create_on("xfs", "300M", "end");
}

#[test]
fn create_on_btrfs_without_sync() {
    create_on("btrfs", "256M", "none");
}

#[test]
fn empty_files_make_no_writes() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "bench",
            "create",
            "--files",
            "2000",
            "--file-size",
            "0",
            "--json",
            "--quiet",
            "--dir",
            "/dev/shm",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let run = json_of(&out);
    let c = phase(&run, "create");
    assert_eq!(c["ops"], 2000);
    assert_eq!(c["op_stats"]["write"]["count"], 0);
    assert_eq!(c["op_stats"]["open"]["count"], 2000);
    assert!(
        c["workers"].as_array().is_none(),
        "one worker: no per-worker list"
    );
}

#[test]
fn bad_input_is_refused() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--files", "0"], "--files must be 1 or more"),
        (&["--threads", "0"], "--threads 0"),
        (&["--block", "0"], "--block"),
        (&["--fsync", "always"], "none, file or end"),
        (&["--files", "1000000", "--file-size", "1T"], "needs about"),
    ];
    for (args, msg) in cases {
        refused_in_dir(&sb, &["bench", "create"], &dir, args, msg);
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}
