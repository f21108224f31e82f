//! `fsgauge frag --free` against e2freefrag on ext4 (histogram equal bucket by bucket), the
//! block-bitmap reader against libext2fs's reading of the same bitmaps (dumpe2fs) on ext4
//! (BLOCK_UNINIT groups, flex_bg, backups) and ext2, a btrfs
//! sanity check against `btrfs filesystem usage`, and the "not supported" line elsewhere.
//!
//! Needs root, loop devices, mkfs.ext4 / mkfs.btrfs and e2freefrag; skips with a reason otherwise.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Sandbox;

fn create(sb: &Sandbox, fs: &str, size: &str) -> (String, PathBuf, PathBuf) {
    let out = sb
        .cmd()
        .args(["testbed", "create", "--fs", fs, "--fs-size", size])
        .arg("--workdir")
        .arg(sb.workdir())
        .output()
        .expect("run fsgauge");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "testbed create: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
    };
    (
        field("name:"),
        PathBuf::from(field("mountpoint:")),
        PathBuf::from(field("device:")),
    )
}

/// Fragments the free space: many files, every other one deleted.
fn punch_free_space(root: &Path) {
    std::fs::create_dir_all(root).expect("mkdir");
    for i in 0..400u64 {
        let mut f = std::fs::File::create(root.join(format!("f{i}"))).expect("create");
        f.write_all(&vec![b'f'; (4096 * (1 + i % 7)) as usize])
            .expect("write");
    }
    nix::unistd::sync();
    for i in (0..400u64).step_by(2) {
        std::fs::remove_file(root.join(format!("f{i}"))).expect("rm");
    }
    nix::unistd::sync();
}

#[test]
fn ext4_free_space_equals_e2freefrag() {
    if !crate::support::have_fs("ext4") || !crate::support::have_program("e2freefrag") {
        return;
    }
    let sb = Sandbox::new();
    let (name, mnt, dev) = create(&sb, "ext4", "256M");
    punch_free_space(&mnt.join("holes"));
    let ours = crate::support::json_of(
        &sb.cmd()
            .args(["frag", "--format", "json", "--free"])
            .arg(&mnt)
            .output()
            .expect("frag"),
    );
    let theirs = Command::new("e2freefrag")
        .arg(&dev)
        .output()
        .expect("e2freefrag");
    let text = String::from_utf8_lossy(&theirs.stdout).to_string();
    // The fallback used where GETFSMAP is refused (the ext2 driver) reads the same numbers.
    let fallback = fsgauge::layout::e2freefrag(&mnt, "ext4", &dev).expect("e2freefrag fallback");
    let _ = sb.cmd().args(["testbed", "destroy", &name]).output();
    assert_eq!(fallback.method, "e2freefrag");
    let fs = &ours["free_space"];
    assert_eq!(Some(fallback.free_blocks), fs["free_blocks"].as_u64());
    assert_eq!(Some(fallback.free_extents), fs["free_extents"].as_u64());
    assert_eq!(
        Some(fallback.largest_free_extent),
        fs["largest_free_extent"].as_u64()
    );
    for (a, b) in fallback
        .histogram
        .iter()
        .zip(fs["histogram"].as_array().expect("histogram"))
    {
        assert_eq!(Some(a.extents), b["extents"].as_u64(), "{}", a.range);
        assert_eq!(Some(a.blocks), b["blocks"].as_u64(), "{}", a.range);
        assert_eq!(Some(a.from_bytes), b["from_bytes"].as_u64(), "{}", a.range);
        // e2freefrag prints the percentage with two decimals.
        let p = b["percent"].as_f64().expect("percent");
        assert!(
            (a.percent - p).abs() <= 0.005 + 1e-9,
            "{}: {} vs {p}",
            a.range,
            a.percent
        );
    }
    assert_eq!(
        fallback.histogram.len(),
        fs["histogram"].as_array().expect("histogram").len()
    );
    assert!(theirs.status.success(), "e2freefrag failed");
    let want = fsgauge::layout::parse_e2freefrag(&text).expect("parse e2freefrag");
    let fs = &ours["free_space"];
    assert_eq!(fs["method"], "getfsmap");
    assert_eq!(fs["block_size"].as_u64(), Some(want.block_size));
    assert_eq!(
        fs["free_blocks"].as_u64(),
        Some(want.free_blocks),
        "free blocks"
    );
    assert_eq!(
        fs["total_blocks"].as_u64(),
        Some(want.total_blocks),
        "total blocks"
    );
    assert_eq!(
        fs["free_extents"].as_u64(),
        Some(want.free_extents),
        "free extents"
    );
    assert_eq!(
        fs["largest_free_extent"].as_u64(),
        Some(want.max_kb * 1024),
        "largest"
    );
    let got: Vec<(String, u64, u64)> = fs["histogram"]
        .as_array()
        .expect("histogram")
        .iter()
        .map(|b| {
            (
                b["range"].as_str().expect("range").to_string(),
                b["extents"].as_u64().expect("extents"),
                b["blocks"].as_u64().expect("blocks"),
            )
        })
        .collect();
    let want_rows: Vec<(String, u64, u64)> =
        want.rows.iter().map(|r| (r.0.clone(), r.1, r.2)).collect();
    assert_eq!(got, want_rows, "histogram differs from e2freefrag:\n{text}");
    assert!(
        want.free_extents > 10,
        "the free space should be fragmented:\n{text}"
    );
    sb.assert_clean();
}

/// The free runs of the block bitmaps as libext2fs reads them (through the same device page
/// cache): `dumpe2fs`'s per-group "Free blocks:" ranges, joined across group boundaries as
/// e2freefrag's `scan_block_bitmap` joins them. Returns (run lengths in block order, free).
fn dumpe2fs_free_runs(dev: &Path) -> (Vec<u64>, u64) {
    let out = Command::new("dumpe2fs")
        .arg(dev)
        .output()
        .expect("dumpe2fs");
    assert!(out.status.success(), "dumpe2fs failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for line in text.lines() {
        let Some(list) = line.trim_start().strip_prefix("Free blocks: ") else {
            continue;
        };
        // Group lines only ("  Free blocks: 10-20, 30"); the header's count has no leading blank.
        if !line.starts_with("  ") {
            continue;
        }
        for part in list.split(", ").filter(|p| !p.trim().is_empty()) {
            let (a, b) = match part.trim().split_once('-') {
                Some((a, b)) => (a.parse().expect("block"), b.parse().expect("block")),
                None => {
                    let a: u64 = part.trim().parse().expect("block");
                    (a, a)
                }
            };
            match ranges.last_mut() {
                Some(last) if last.1 + 1 == a => last.1 = b,
                _ => ranges.push((a, b)),
            }
        }
    }
    let runs: Vec<u64> = ranges.iter().map(|(a, b)| b - a + 1).collect();
    let free = runs.iter().sum();
    (runs, free)
}

/// The block-bitmap reader against libext2fs's reading of the same bitmaps. (e2freefrag reads
/// these bitmaps where GETFSMAP is missing; on a mounted ext4 it asks GETFSMAP, whose view also
/// counts the allocator's preallocations as used, so it is not the reference here.)
fn check_block_bitmaps(fs_kind: &str) {
    if !crate::support::have_fs(fs_kind) || !crate::support::have_program("dumpe2fs") {
        return;
    }
    let sb = Sandbox::new();
    let (name, mnt, dev) = create(&sb, fs_kind, "256M");
    punch_free_space(&mnt.join("holes"));
    let dir = std::fs::File::open(&mnt).expect("open mountpoint");
    let bs = std::fs::metadata(&mnt).expect("stat").blksize();
    let ours = fsgauge::layout::bitmap_free(&mnt, std::os::fd::AsFd::as_fd(&dir), fs_kind, bs);
    drop(dir);
    let (runs, free) = dumpe2fs_free_runs(&dev);
    let _ = sb.cmd().args(["testbed", "destroy", &name]).output();
    let ours = ours.expect("block bitmaps readable");
    assert_eq!(ours.method, "block-bitmaps");
    assert_eq!(ours.free_blocks, free, "{fs_kind}: free blocks");
    assert_eq!(
        ours.free_extents,
        runs.len() as u64,
        "{fs_kind}: free extents"
    );
    assert_eq!(
        ours.largest_free_extent,
        runs.iter().max().copied().unwrap_or(0) * bs,
        "{fs_kind}: largest free extent"
    );
    let mut want = fsgauge::layout::FreeHistogram::new(bs);
    for r in &runs {
        want.add(*r);
    }
    let want = want.report(&mnt, fs_kind, "block-bitmaps", ours.total_blocks, free);
    assert_eq!(ours.histogram, want.histogram, "{fs_kind}: histogram");
    assert!(
        runs.len() > 10,
        "{fs_kind}: the free space should be fragmented"
    );
    sb.assert_clean();
}

#[test]
fn ext4_block_bitmaps_equal_libext2fs() {
    // 256M ext4: 1 KiB blocks, flex_bg, metadata_csum, BLOCK_UNINIT groups with backups.
    check_block_bitmaps("ext4");
}

#[test]
fn ext2_block_bitmaps_equal_libext2fs() {
    check_block_bitmaps("ext2");
}

#[test]
fn btrfs_free_space_matches_its_usage() {
    if !crate::support::have_fs("btrfs") || !crate::support::have_program("btrfs") {
        return;
    }
    let sb = Sandbox::new();
    let (name, mnt, _dev) = create(&sb, "btrfs", "256M");
    punch_free_space(&mnt.join("holes"));
    let ours = crate::support::json_of(
        &sb.cmd()
            .args(["frag", "--format", "json", "--free"])
            .arg(&mnt)
            .output()
            .expect("frag"),
    );
    let usage = Command::new("btrfs")
        .args(["filesystem", "usage", "-b"])
        .arg(&mnt)
        .output()
        .expect("btrfs usage");
    let _ = sb.cmd().args(["testbed", "destroy", &name]).output();
    let text = String::from_utf8_lossy(&usage.stdout).to_string();
    let fs = &ours["free_space"];
    assert_eq!(fs["method"], "btrfs-tree-search");
    // "Data,single: Size:41943040, Used:5992448 (14.29%)" and "Device unallocated: N".
    let data = text
        .lines()
        .find(|l| l.starts_with("Data,"))
        .expect("data line");
    let num_after = |s: &str, key: &str| -> u64 {
        let rest = &s[s.find(key).expect(key) + key.len()..];
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .expect("digits")
            .parse()
            .expect("number")
    };
    let data_free = num_after(data, "Size:") - num_after(data, "Used:");
    let unalloc_line = text
        .lines()
        .find(|l| l.contains("Device unallocated:"))
        .expect("unallocated");
    let unalloc = num_after(unalloc_line, "Device unallocated:");
    // btrfs counts the first MiB of the device as unallocated; it is never allocatable.
    assert_eq!(
        fs["unallocated_bytes"].as_u64(),
        Some(unalloc - (1 << 20)),
        "{text}"
    );
    assert_eq!(
        fs["free_bytes"].as_u64(),
        Some(data_free + unalloc - (1 << 20)),
        "{text}"
    );
    sb.assert_clean();
}

#[test]
fn tmpfs_is_not_supported_and_says_so() {
    if !crate::support::have_root() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .args(["frag", "--free", "/dev/shm"])
        .output()
        .expect("frag");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2));
    assert!(text.contains("not supported on tmpfs"), "{text}");
    assert!(
        !text.contains("free extents"),
        "no numbers for an unsupported filesystem: {text}"
    );
}
