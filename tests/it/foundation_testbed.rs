//! `fsgauge testbed create|list|destroy|cleanup` on real filesystems (needs root, loop devices
//! and each mkfs; skips with a reason otherwise, fails under CI).

use crate::support::{have_fs, json_of, Sandbox};
use serde_json::Value;

fn mount_line(mountpoint: &str) -> Option<String> {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(mountpoint))
        .map(String::from)
}

fn create(sb: &Sandbox, args: &[&str]) -> Value {
    let mut c = sb.cmd();
    c.args(["testbed", "create", "--json", "--workdir"])
        .arg(sb.workdir())
        .args(args);
    json_of(&c.output().unwrap())
}

fn destroy(sb: &Sandbox, name: &str) {
    let out = sb
        .cmd()
        .args(["testbed", "destroy", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ext4_with_options_and_ram_journal_is_built_listed_and_destroyed() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let doc = create(
        &sb,
        &[
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--mkfs-opts",
            "-O ^extent",
            "--mount-opts",
            "data=writeback,nodelalloc",
            "--journal",
            "ram:16M",
            "--name",
            "tb1",
        ],
    );
    let mp = doc["mountpoint"].as_str().unwrap();
    let line = mount_line(mp).expect("mounted");
    assert!(line.contains(" ext4 "), "{line}");
    assert!(
        line.contains("data=writeback") && line.contains("nodelalloc"),
        "{line}"
    );
    assert!(doc["device"].as_str().unwrap().starts_with("/dev/loop"));
    let jdev = doc["journal_device"].as_str().unwrap().to_string();
    // The journal device is an external journal on tmpfs, and the filesystem has no extents.
    let dumpe2fs = std::process::Command::new("dumpe2fs")
        .args(["-h", doc["device"].as_str().unwrap()])
        .output()
        .unwrap();
    let header = String::from_utf8_lossy(&dumpe2fs.stdout);
    assert!(
        !header.contains(" extent"),
        "extents were asked off: {header}"
    );
    assert!(
        header.contains("Journal device"),
        "external journal: {header}"
    );
    let backing = std::fs::read_to_string(format!(
        "/sys/block/{}/loop/backing_file",
        jdev.trim_start_matches("/dev/")
    ))
    .unwrap();
    assert!(backing.starts_with("/dev/shm/"), "{backing}");
    // Direct I/O on the data image.
    let dio = std::fs::read_to_string(format!(
        "/sys/block/{}/loop/dio",
        doc["device"].as_str().unwrap().trim_start_matches("/dev/")
    ))
    .unwrap();
    assert_eq!(dio.trim(), "1");

    let list = sb.cmd().args(["testbed", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("tb1") && text.contains("persistent"),
        "{text}"
    );
    // cleanup without --all keeps persistent testbeds.
    let out = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("kept tb1"));
    assert!(mount_line(mp).is_some());

    destroy(&sb, "tb1");
    assert!(mount_line(mp).is_none());
    sb.assert_clean();
}

#[test]
fn xfs_with_an_external_log_and_btrfs() {
    for (fs, extra) in [
        ("xfs", vec!["--fs-size", "320M", "--journal", "file:64M"]),
        ("btrfs", vec!["--fs-size", "256M"]),
    ] {
        if !have_fs(fs) {
            continue;
        }
        let sb = Sandbox::new();
        let mut args = vec!["--fs", fs, "--name", "x"];
        args.extend(extra);
        let doc = create(&sb, &args);
        let line = mount_line(doc["mountpoint"].as_str().unwrap()).expect("mounted");
        assert!(line.contains(&format!(" {fs} ")), "{line}");
        if fs == "xfs" {
            assert!(line.contains("logdev="), "{line}");
        }
        destroy(&sb, "x");
        sb.assert_clean();
    }
}

#[test]
fn ram_backed_testbed_lives_on_tmpfs() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--json",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--backing",
            "ram",
            "--name",
            "ramtb",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let dev = doc["device"]
        .as_str()
        .unwrap()
        .trim_start_matches("/dev/")
        .to_string();
    let backing = std::fs::read_to_string(format!("/sys/block/{dev}/loop/backing_file")).unwrap();
    assert!(backing.starts_with("/dev/shm/fsgauge/"), "{backing}");
    destroy(&sb, "ramtb");
    assert!(!std::path::Path::new(backing.trim()).exists());
}

#[test]
fn a_taken_name_is_refused_and_an_unknown_one_is_a_clear_error() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    create(&sb, &["--fs", "ext4", "--fs-size", "64M", "--name", "dup"]);
    let mut c = sb.cmd();
    c.args([
        "testbed",
        "create",
        "--fs",
        "ext4",
        "--fs-size",
        "64M",
        "--name",
        "dup",
        "--workdir",
    ])
    .arg(sb.workdir());
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists already"));
    destroy(&sb, "dup");
    let out = sb
        .cmd()
        .args(["testbed", "destroy", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no testbed named \"nope\""));
    sb.assert_clean();
}

/// `bench` admits a tree the way a plan does: a 64M ext4 gets about 16K inodes from mkfs, too
/// few for 2000 directories of 10 files, so the testbed gets `-N` with the plan's note (it
/// used to fail on the workload's own check of free inodes).
#[test]
fn bench_gets_the_inodes_a_plan_gets() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "interleave",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "2000",
            "--files",
            "10",
            "--remove-cold",
            "none",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("mkfs would make about") && stderr.contains("added -N"),
        "{stderr}"
    );
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let args: Vec<&str> = doc["testbed"]["mkfs_args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"-N"), "{args:?}");
    sb.assert_clean();
}
