//! Bad input gets a clear error naming what was wrong and exit code 2, and nothing is created:
//! no image, loop device, mount, ledger entry or result file.

use crate::support::{have_fs, have_root, refused, skip, Sandbox};

#[test]
fn bad_sizes_are_refused_by_name() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["bench", "tree", "--fs", "ext4", "--fs-size", "10QB"],
        &["10QB", "unknown unit"],
    );
    refused(
        &sb,
        &["bench", "tree", "--fs", "ext4", "--fs-size", "-1G"],
        &["-1G", "negative"],
    );
    refused(
        &sb,
        &["bench", "tree", "--fs", "ext4", "--file-size", "1.1K"],
        &["1.1K", "whole number"],
    );
}

#[test]
fn unknown_filesystem_and_missing_place() {
    let sb = Sandbox::new();
    refused(&sb, &["bench", "tree", "--fs", "zfs"], &["zfs", "ext4"]);
    refused(&sb, &["bench", "tree"], &["--fs KIND", "--dir PATH"]);
    refused(
        &sb,
        &["bench", "tree", "--fs", "btrfs", "--journal", "ram:64M"],
        &["no external journal"],
    );
    refused(
        &sb,
        &["bench", "tree", "--fs", "ext4", "--journal", "disk:64M"],
        &["ram:SIZE"],
    );
}

#[test]
fn dir_that_does_not_exist_or_is_not_writable() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["bench", "tree", "--dir", "/nonexistent/fsgauge"],
        &["/nonexistent/fsgauge", "No such file"],
    );
    let file = sb.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    refused(
        &sb,
        &["bench", "tree", "--dir", file.to_str().unwrap()],
        &["not a directory"],
    );
    if have_root() {
        refused(
            &sb,
            &["bench", "tree", "--dir", "/proc/sys"],
            &["not writable"],
        );
    }
}

#[test]
fn too_small_for_the_filesystem_or_the_workload() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["bench", "tree", "--fs", "xfs", "--fs-size", "100M"],
        &["too small", "300M"],
    );
    if have_root() {
        refused(
            &sb,
            &["bench", "tree", "--fs", "ext4", "--fs-size", "64M"],
            &["needs about", "make --fs-size larger"],
        );
        // fdtree's defaults (111,110 files of 40 KiB, about 4.3 GiB) with the suggested size.
        refused(
            &sb,
            &["bench", "fdtree", "--fs", "ext4"],
            &["needs about 4.3", "at least --fs-size 5G"],
        );
    }
    refused(
        &sb,
        &["bench", "tree", "--fs", "ext4", "--dirs", "0"],
        &["--dirs 0"],
    );
}

#[test]
fn mkfs_rejecting_an_option_shows_the_command_and_its_stderr() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--mkfs-opts",
            "-O bogus_feature",
            "--dirs",
            "1",
            "--files",
            "1",
            "--file-size",
            "4K",
        ],
        &["mkfs.ext4", "-O bogus_feature", "bogus_feature"],
    );
}

#[test]
fn mount_rejecting_an_option_quotes_the_kernel() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--mount-opts",
            "no_such_option",
            "--dirs",
            "1",
            "--files",
            "1",
            "--file-size",
            "4K",
        ],
        &["mount -t ext4", "no_such_option"],
    );
}

#[test]
fn a_mounted_device_is_never_formatted() {
    if !have_root() {
        return;
    }
    // The device holding / is mounted on every machine.
    let root_dev = std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .find(|l| l.split(' ').nth(1) == Some("/") && l.starts_with("/dev/"))
        .map(|l| l.split(' ').next().unwrap().to_string());
    let Some(dev) = root_dev else {
        skip("/ is not on a /dev block device here");
        return;
    };
    let sb = Sandbox::new();
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--device",
            &dev,
            "--destroy-data",
        ],
        &["is mounted"],
    );
    let out = sb
        .bench(&["bench", "tree", "--fs", "ext4", "--device", &dev])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--destroy-data"));
}

#[test]
fn a_memory_limit_below_the_workloads_own_needs_is_refused() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    refused(
        &sb,
        &[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--mem-limit",
            "4M",
            "--dirs",
            "1",
            "--files",
            "1",
            "--file-size",
            "1M",
        ],
        &["--mem-limit 4M is below what the workload itself needs"],
    );
}

#[test]
fn help_texts_name_the_flags_engineers_look_for() {
    let sb = Sandbox::new();
    let out = sb.cmd().args(["bench", "tree", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--fs ",
        "--fs-size",
        "--mkfs-opts",
        "--mount-opts",
        "--journal",
        "--backing",
        "--workdir",
        "--dir ",
        "--cold",
        "--mem-limit",
        "--mem-charge",
        "--reps",
        "--json",
        "--fsync",
        "--loop-direct-io",
    ] {
        assert!(text.contains(flag), "bench tree --help lacks {flag}");
    }
}
