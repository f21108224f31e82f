//! `--layout` in runs: `fsgauge bench tree --fs ext4 ... --layout --json` stores the layout of the
//! tree the workload wrote (one entry per file) and the free space of the testbed.
//!
//! Needs root, loop devices and mkfs.ext4; skips with a reason otherwise.

use crate::support::Sandbox;

#[test]
fn bench_tree_with_layout_records_every_file() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let (dirs, files) = (4u64, 25u64);
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--dirs",
            &dirs.to_string(),
            "--files",
            &files.to_string(),
            "--file-size",
            "24K",
            "--block",
            "8K",
            "--layout",
            "--json",
            "--quiet",
        ])
        .output()
        .expect("run fsgauge");
    let doc = crate::support::json_of(&out);
    let layout = &doc["layout"];
    assert!(layout.is_object(), "no layout in the result: {doc}");
    let tree = &layout["tree"];
    assert_eq!(tree["files"].as_u64(), Some(dirs * files));
    assert_eq!(tree["bytes"].as_u64(), Some(dirs * files * 24 * 1024));
    let extents = tree["extents"].as_u64().expect("extents");
    assert!(
        extents >= dirs * files,
        "every 24K file has at least one extent ({extents})"
    );
    assert_eq!(tree["skipped"]["errors"].as_u64(), Some(0));
    let free = &layout["free_space"];
    assert_eq!(free["method"], "getfsmap", "{free}");
    assert!(free["free_blocks"].as_u64().expect("free blocks") > 0);
    // Without --layout there is none.
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--json",
            "--quiet",
        ])
        .output()
        .expect("run fsgauge");
    let doc = crate::support::json_of(&out);
    assert!(doc.get("layout").is_none(), "layout only when asked for");
    sb.assert_clean();
}
