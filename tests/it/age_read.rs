//! `fsgauge read` on trees on real ext4, xfs and btrfs testbeds (needs root, loop devices and
//! each mkfs; skips with a reason otherwise, fails under CI): every phase reads every byte,
//! read-time KiB/s is at least whole-walk KiB/s, files without a first block are listed and
//! skipped in block order, stat counts every entry.

use std::path::Path;

use crate::support::{have_fs, json_of, phase, Sandbox};

/// Writes 4 directories × 10 files of 8K..200K (deterministic) and one empty file; returns
/// (files, bytes).
fn make_tree(root: &Path) -> (u64, u64) {
    std::fs::create_dir(root).unwrap();
    let mut bytes = 0;
    let mut files = 0;
    for d in 0..4 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..10u64 {
            let size = 8192 + (d * 10 + f) * 4999;
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + f) as u8).collect();
            std::fs::write(dir.join(format!("f{f}")), &data).unwrap();
            bytes += size;
            files += 1;
        }
    }
    std::fs::write(root.join("empty"), b"").unwrap();
    (files + 1, bytes)
}

#[test]
fn read_phases_on_ext4_xfs_btrfs() {
    for (fs, size) in [("ext4", "256M"), ("xfs", "300M"), ("btrfs", "256M")] {
        if !have_fs(fs) {
            continue;
        }
        let sb = Sandbox::new();
        let mut c = sb.cmd();
        c.args(["testbed", "create", "--json", "--workdir"])
            .arg(sb.workdir())
            .args(["--fs", fs, "--fs-size", size, "--name", "rt"]);
        let tb = json_of(&c.output().unwrap());
        let mp = tb["mountpoint"].as_str().unwrap().to_string();
        let root = Path::new(&mp).join("tree");
        let (files, bytes) = make_tree(&root);
        let out = sb
            .cmd()
            .arg("read")
            .arg(&root)
            .args(["--seed", "4", "--json", "--quiet", "--out"])
            .arg(sb.out())
            .output()
            .unwrap();
        let doc = json_of(&out);
        assert_eq!(doc["workload"]["kind"], "read");
        assert_eq!(doc["conditions"]["cold"], "drop");
        let walk = &phase(&doc, "walk")["extra"];
        assert_eq!(walk["files"], files as f64, "{fs}");
        assert_eq!(walk["bytes"], bytes as f64, "{fs}");
        assert_eq!(
            walk["entries"],
            (files + 4) as f64,
            "{fs}: files and directories"
        );
        let (rk, tk) = (
            walk["read_kbps"].as_f64().unwrap(),
            walk["total_kbps"].as_f64().unwrap(),
        );
        assert!(rk >= tk && tk > 0.0, "{fs}: read-time {rk} < walk {tk}");
        assert!(walk["meta_files_per_s"].as_f64().unwrap() > 0.0);
        let random = &phase(&doc, "random")["extra"];
        assert_eq!(random["files"], files as f64);
        assert_eq!(random["bytes"], bytes as f64);
        assert!(random["read_kbps"].as_f64().unwrap() >= random["total_kbps"].as_f64().unwrap());
        let bo = &phase(&doc, "blockorder")["extra"];
        // The empty file has no first block: listed and skipped.
        assert_eq!(bo["skipped_files"], 1.0, "{fs}");
        assert_eq!(bo["files"], (files - 1) as f64);
        assert_eq!(bo["bytes"], bytes as f64);
        assert!(doc["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e.as_str().unwrap().contains("empty")));
        let stat = &phase(&doc, "stat")["extra"];
        assert_eq!(stat["entries"], (files + 4) as f64);
        assert!(stat["files_per_s"].as_f64().unwrap() > 0.0);
        // The walk read from the device after the cold cache (where the device is known:
        // btrfs reports an anonymous device number).
        if let Some(rb) = phase(&doc, "walk")["device"]["read_bytes"].as_u64() {
            assert!(
                rb >= bytes / 2,
                "{fs}: only {rb} bytes read from the device"
            );
        }
        let out = sb
            .cmd()
            .args(["testbed", "destroy", "rt"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sb.assert_clean();
    }
}

#[test]
fn read_of_a_missing_tree_or_bad_phase_is_bad_input() {
    let sb = Sandbox::new();
    for args in [
        vec!["read", "/nonexistent/fsgauge-tree"],
        vec!["read", "/tmp", "--phases", "walk,sideways"],
    ] {
        let out = sb
            .cmd()
            .args(&args)
            .arg("--out")
            .arg(sb.out())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!sb.out().exists());
    }
}
