//! The tree workload on real testbeds (needs root, loop devices, and each mkfs; skips with a
//! reason otherwise, fails under CI): exact counts and bytes, the result document against the
//! schema, the result file equal to what --json printed, nothing left behind.

use crate::support::{assert_schema, have_fs, json_of, phase, Sandbox};
use serde_json::Value;

/// Runs the tree workload and checks every count it must get exactly right.
fn check_tree(fs: &str, size: &str, extra: &[&str]) {
    if !have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let (dirs, files, file_size, block) = (3u64, 5u64, 1u64 << 20, 256u64 << 10);
    let mut args = vec![
        "bench",
        "tree",
        "--fs",
        fs,
        "--fs-size",
        size,
        "--dirs",
        "3",
        "--files",
        "5",
        "--file-size",
        "1M",
        "--block",
        "256K",
        "--json",
        "--seed",
        "42",
    ];
    args.extend_from_slice(extra);
    let out = sb.bench(&args).output().unwrap();
    let doc = json_of(&out);
    assert_schema(&doc);
    assert_eq!(doc["testbed"]["fs"], fs);
    assert_eq!(doc["seed"], 42);
    assert_eq!(doc["workload"]["kind"], "tree");
    assert_eq!(doc["workload"]["params"]["file_size"], file_size);

    let create = phase(&doc, "create");
    assert_eq!(
        create["ops"],
        dirs + dirs * files,
        "create phase counts mkdir + create"
    );
    assert_eq!(create["bytes"], dirs * files * file_size);
    assert_eq!(create["op_stats"]["mkdir"]["count"], dirs);
    assert_eq!(create["op_stats"]["create"]["count"], dirs * files);
    assert_eq!(
        create["op_stats"]["write"]["count"],
        dirs * files * (file_size / block)
    );
    assert_eq!(
        create["op_stats"]["write"]["bytes"],
        dirs * files * file_size
    );
    assert_eq!(create["op_stats"]["syncfs"]["count"], 1);
    assert_eq!(create["latency"]["count"], dirs + dirs * files);
    // With a syncfs inside the phase, the data reached the device.
    let written = create["device"]["write_bytes"].as_u64().unwrap();
    assert!(
        written >= dirs * files * file_size,
        "device wrote {written} bytes, less than the data"
    );
    let series_ops: u64 = create["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ops"].as_u64().unwrap())
        .sum();
    assert_eq!(
        series_ops,
        dirs + dirs * files,
        "the per-second series adds up to the ops"
    );

    let delete = phase(&doc, "delete");
    assert_eq!(delete["op_stats"]["unlink"]["count"], dirs * files);
    assert_eq!(delete["op_stats"]["rmdir"]["count"], dirs);
    assert_eq!(delete["ops"], dirs + dirs * files);

    // The result file holds the same document.
    let files: Vec<_> = std::fs::read_dir(sb.out())
        .unwrap()
        .filter_map(|e| e.ok())
        .collect();
    assert_eq!(files.len(), 1, "one result file per run");
    let stored: Value = serde_json::from_slice(&std::fs::read(files[0].path()).unwrap()).unwrap();
    assert_eq!(stored, doc);
    sb.assert_clean();
}

#[test]
fn tree_on_ext4() {
    check_tree("ext4", "256M", &[]);
}

#[test]
fn tree_on_ext4_with_mkfs_and_mount_options() {
    check_tree(
        "ext4",
        "256M",
        &[
            "--mkfs-opts",
            "-O ^extent",
            "--mount-opts",
            "data=writeback,nodelalloc",
        ],
    );
}

#[test]
fn tree_on_ext4_with_a_ram_journal_counts_journal_io() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--journal",
            "ram:16M",
            "--dirs",
            "2",
            "--files",
            "3",
            "--file-size",
            "64K",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_schema(&doc);
    assert_eq!(doc["testbed"]["journal"], "ram:16M");
    assert!(doc["testbed"]["mount_options"]
        .as_str()
        .unwrap()
        .contains("journal_path=/dev/loop"));
    let j = &phase(&doc, "create")["journal_device"];
    assert!(
        j["write_bytes"].as_u64().unwrap() > 0,
        "the journal device saw the commits: {j}"
    );
    sb.assert_clean();
}

#[test]
fn tree_on_xfs_with_an_external_log() {
    check_tree("xfs", "320M", &["--journal", "file:64M"]);
}

#[test]
fn tree_on_btrfs() {
    check_tree("btrfs", "256M", &[]);
}

#[test]
fn tree_on_ext3_and_ext2() {
    check_tree("ext3", "256M", &["--mount-opts", "data=journal"]);
    check_tree("ext2", "256M", &[]);
}

#[test]
fn repetitions_get_a_fresh_filesystem_and_a_file_each() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--reps",
            "3",
            "--json",
            "--cold",
            "remount",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let runs = doc.as_array().expect("a list for several runs");
    assert_eq!(runs.len(), 3);
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["rep"], i as u64);
        assert_eq!(r["conditions"]["cold"], "remount");
        assert_schema(r);
    }
    assert_ne!(runs[0]["spec_hash"], runs[1]["spec_hash"]);
    assert_eq!(std::fs::read_dir(sb.out()).unwrap().count(), 3);
    sb.assert_clean();
}

#[test]
fn human_table_has_one_row_per_phase() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--dirs",
            "2",
            "--files",
            "2",
            "--file-size",
            "8K",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for col in ["elapsed (sys)", "ops/s", "MB/s", "p99", "dev MB written"] {
        assert!(text.contains(col), "missing column {col}:\n{text}");
    }
    assert!(text.lines().any(|l| l.contains(" create ")), "{text}");
    assert!(text.lines().any(|l| l.contains(" delete ")), "{text}");
    sb.assert_clean();
}

#[test]
fn dir_mode_runs_without_a_testbed_and_leaves_the_directory_as_it_was() {
    let sb = Sandbox::new();
    let target = sb.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep.txt"), b"user data").unwrap();
    let out = sb
        .cmd()
        .args(["bench", "tree", "--dir"])
        .arg(&target)
        .args([
            "--dirs",
            "2",
            "--files",
            "3",
            "--file-size",
            "10K",
            "--block",
            "4K",
            "--json",
            "--fsync",
            "none",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["testbed"]["backing"], "dir");
    let create = phase(&doc, "create");
    assert_eq!(create["bytes"], 2 * 3 * 10 * 1024);
    // 10K in 4K writes: 4K, 4K, 2K.
    assert_eq!(create["op_stats"]["write"]["count"], 2 * 3 * 3);
    let left: Vec<_> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("keep.txt")]);
}

/// `--dirty-expire` holds the host's expiry of dirty data for the run: the run's environment
/// records the held value, its conditions the setting, and the host's value is back after,
/// with no ledger entry left.
#[test]
fn a_run_holds_the_dirty_expiry_it_asks_for_and_gives_it_back() {
    if !have_fs("ext4") {
        return;
    }
    const EXPIRE: &str = "/proc/sys/vm/dirty_expire_centisecs";
    let before = std::fs::read_to_string(EXPIRE).expect("the host's expiry");
    // Unlike the host's, whatever it is.
    let asked: u64 = if before.trim() == "9100" { 9200 } else { 9100 };
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--dirty-expire",
            &format!("{}s", asked / 100),
            "--dirs",
            "2",
            "--files",
            "4",
            "--file-size",
            "64K",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(
        doc["conditions"]["dirty_expire_s"],
        (asked / 100) as f64,
        "{}",
        doc["conditions"]
    );
    assert_eq!(
        doc["environment"]["sysctl"]["vm.dirty_expire_centisecs"],
        asked.to_string(),
        "the run ran under the held expiry"
    );
    assert_eq!(
        std::fs::read_to_string(EXPIRE).expect("the host's expiry"),
        before,
        "the host's expiry back"
    );
    sb.assert_clean();
}

#[test]
fn memory_limit_runs_inside_a_cgroup_and_removes_it() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "512M",
            "--mem-limit",
            "48M",
            "--dirs",
            "2",
            "--files",
            "4",
            "--file-size",
            "16M",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let c = &doc["conditions"];
    assert_eq!(c["mem_limit"], 48u64 << 20);
    assert!(
        c["mem_limit_cgroup"] == "v1" || c["mem_limit_cgroup"] == "v2",
        "{c}"
    );
    let peak = c["mem_limit_peak"]
        .as_u64()
        .expect("the cgroup reports its peak");
    assert!(peak <= 48 << 20, "peak {peak} over the limit");
    // cgroup v1 does not throttle a cgroup's dirty pages; the run held the host's thresholds
    // at the kernel's default shares of its limit. v2 throttles per cgroup: nothing is held.
    let (dirty, background) = (
        &c["mem_limit_dirty_bytes"],
        &c["mem_limit_dirty_background_bytes"],
    );
    if c["mem_limit_cgroup"] == "v1" {
        assert_eq!(dirty, (48u64 << 20) / 100 * 20, "{c}");
        assert_eq!(background, (48u64 << 20) / 100 * 10, "{c}");
    } else {
        assert!(dirty.is_null() && background.is_null(), "{c}");
    }
    // 128 MiB of data went through a 48 MiB cgroup: the page cache was kept inside the limit.
    assert_eq!(phase(&doc, "create")["bytes"], 2 * 4 * (16u64 << 20));
    let pid_tag = "fsgauge-";
    let leftover = walk_cgroups(pid_tag);
    assert!(leftover.is_empty(), "cgroups left: {leftover:?}");
    sb.assert_clean();
}

fn walk_cgroups(tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![std::path::PathBuf::from("/sys/fs/cgroup")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                let name = e.file_name().to_string_lossy().to_string();
                // Only this test binary's own cgroups: named fsgauge-<pid of a child we ran>.
                if name.starts_with(tag) {
                    let pid: Option<u32> = name.split('-').nth(1).and_then(|p| p.parse().ok());
                    if pid.is_some_and(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()) {
                        out.push(e.path().display().to_string());
                    }
                }
                stack.push(e.path());
            }
        }
    }
    out
}

#[test]
fn memory_charger_locks_memory_and_gives_it_back() {
    if !have_fs("ext4") {
        return;
    }
    let avail = meminfo_available();
    // Ask for 512 MiB less than is available now: the charger locks about that much.
    let target = avail.saturating_sub(512 << 20);
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--mem-charge",
            &target.to_string(),
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "64K",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let locked = doc["conditions"]["mem_charge_locked"].as_u64().unwrap();
    assert!(
        locked > 128 << 20 && locked < 1 << 30,
        "locked {locked} bytes for a 512 MiB gap"
    );
    // Right after charging, about `target` was left available (other tests may move it a bit).
    let left = doc["conditions"]["mem_charge_available"].as_u64().unwrap();
    assert!(
        left <= target + (128 << 20),
        "{left} available after charging to {target}"
    );
    sb.assert_clean();
}

fn meminfo_available() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    let l = s.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}
