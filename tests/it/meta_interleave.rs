//! `fsgauge bench interleave` on real ext4, xfs and btrfs testbeds (needs root, loop devices
//! and the mkfs tools; skipped with a reason otherwise, failed under CI), plus bad input.

use std::collections::BTreeSet;

use crate::support::{json_of, phase, refused_in_dir, Sandbox};

fn interleave_on(fs: &str, size: &str, order: &str, cold: &str) {
    if !crate::support::have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let list = sb.path().join("tree.txt");
    let out = sb
        .bench(&[
            "bench",
            "interleave",
            "--fs",
            fs,
            "--fs-size",
            size,
            "--dirs",
            "120",
            "--files",
            "14",
            "--file-size",
            "1000",
            "--order",
            order,
            "--remove-cold",
            cold,
            "--json",
            "--quiet",
        ])
        .arg("--tree-list")
        .arg(&list)
        .output()
        .unwrap();
    let run = json_of(&out);
    sb.assert_clean();

    // The tree on disk before removal: 120 directories d000..d119 with f00..f13 of 1000 bytes.
    let found: BTreeSet<String> = std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut want = BTreeSet::new();
    for d in 0..120 {
        want.insert(format!("d\td{d:03}"));
        for f in 0..14 {
            want.insert(format!("f\t1000\td{d:03}/f{f:02}"));
        }
    }
    assert_eq!(found, want);

    assert_eq!(phase(&run, "dir_create")["ops"], 120);
    let fc = phase(&run, "file_create");
    assert_eq!(fc["ops"], 1680);
    assert_eq!(fc["bytes"], 1_680_000);
    let rm = phase(&run, "remove");
    assert_eq!(rm["ops"], 1800, "120 rmdir + 1680 unlink");
    assert_eq!(rm["op_stats"]["unlink"]["count"], 1680);
    assert_eq!(rm["op_stats"]["rmdir"]["count"], 120);
    assert_eq!(run["workload"]["params"]["order"], order);
    assert_eq!(run["workload"]["params"]["remove_cold"], cold);
}

#[test]
fn interleave_on_ext4_with_remount() {
    interleave_on("ext4", "256M", "interleaved", "remount");
}

#[test]
fn interleave_on_xfs_with_remount() {
    interleave_on("xfs", "300M", "interleaved", "remount");
}

#[test]
fn interleave_on_btrfs_with_drop() {
    interleave_on("btrfs", "256M", "interleaved", "drop");
}

#[test]
fn grouped_order_on_ext4() {
    interleave_on("ext4", "256M", "grouped", "none");
}

#[test]
fn study_counts_are_exact_on_tmpfs() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "bench",
            "interleave",
            "--remove-cold",
            "none",
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
    assert_eq!(phase(&run, "dir_create")["ops"], 9890);
    assert_eq!(phase(&run, "file_create")["ops"], 138460);
    assert_eq!(phase(&run, "remove")["op_stats"]["unlink"]["count"], 138460);
    assert_eq!(phase(&run, "remove")["op_stats"]["rmdir"]["count"], 9890);
}

#[test]
fn bad_input_is_refused() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--dirs", "0"], "1 or more"),
        (&["--files", "0"], "1 or more"),
        (&["--order", "random"], "interleaved or grouped"),
        (&["--remove-cold", "reboot"], "none, drop or remount"),
        (&[], "--remove-cold remount needs a testbed"),
    ];
    for (args, msg) in cases {
        refused_in_dir(&sb, &["bench", "interleave"], &dir, args, msg);
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    if !crate::support::have_fs("ext4") {
        return;
    }
    let out = sb
        .bench(&[
            "bench",
            "interleave",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--file-size",
            "1M",
            "--quiet",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("needs about"), "{err}");
    sb.assert_clean();
}
