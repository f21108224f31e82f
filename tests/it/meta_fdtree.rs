//! `fsgauge bench fdtree` on real ext4, xfs and btrfs testbeds (needs root, loop devices and
//! the mkfs tools; skipped with a reason otherwise, failed under CI), plus bad input and a
//! failing worker.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::{json_of, phase, refused_in_dir, skip, Sandbox};
use fsgauge::measure::Progress;
use fsgauge::workload::fdtree::{Fdtree, FdtreeSpec};
use fsgauge::workload::{ColdMode, RunContext, Target, Workload};

/// fdtree's tree, written out independently of the workload: a base, in every non-leaf
/// directory D subdirectories `L<level>D<n>`, in every directory F files `L<level>F<n>`.
fn expected_tree(base: &str, levels: u32, d: u64, f: u64, size: u64) -> BTreeSet<String> {
    fn fill(dir: &str, level: u32, d: u64, f: u64, size: u64, out: &mut BTreeSet<String>) {
        for n in 1..=f {
            out.insert(format!("f\t{size}\t{dir}/L{level}F{n}"));
        }
        if level > 0 {
            for n in 1..=d {
                let sub = format!("{dir}/L{level}D{n}");
                out.insert(format!("d\t{sub}"));
                fill(&sub, level - 1, d, f, size, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    out.insert(format!("d\t{base}"));
    fill(base, levels, d, f, size, &mut out);
    out
}

fn tree_on(fs: &str, size: &str, fsync: &str) {
    if !crate::support::have_fs(fs) {
        return;
    }
    let sb = Sandbox::new();
    let list = sb.path().join("tree.txt");
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            fs,
            "--fs-size",
            size,
            "--levels",
            "2",
            "--dirs-per-level",
            "3",
            "--files-per-dir",
            "4",
            "--file-size",
            "5000",
            "--threads",
            "2",
            "--stat",
            "--read",
            "--cold",
            "drop",
            "--json",
            "--quiet",
            "--fsync",
            fsync,
        ])
        .arg("--tree-list")
        .arg(&list)
        .output()
        .unwrap();
    let run = json_of(&out);
    sb.assert_clean();

    // The tree as it was on disk before removal: names, counts and sizes.
    let found: BTreeSet<String> = std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut want = expected_tree("LEVEL0.0", 2, 3, 4, 5000);
    want.extend(expected_tree("LEVEL0.1", 2, 3, 4, 5000));
    assert_eq!(found.len(), 2 * (13 + 52));
    assert_eq!(found, want, "on-disk tree differs from fdtree's");

    let names: Vec<&str> = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "dir_create",
            "file_create",
            "stat",
            "read",
            "file_remove",
            "dir_remove"
        ]
    );
    // Two workers, each 13 directories and 52 files.
    for (name, ops, bytes) in [
        ("dir_create", 26, 0),
        ("file_create", 104, 104 * 5000),
        ("stat", 104, 0),
        ("read", 104, 104 * 5000),
        ("file_remove", 104, 0),
        ("dir_remove", 26, 0),
    ] {
        let p = phase(&run, name);
        assert_eq!(p["ops"], ops, "{name} ops");
        assert_eq!(p["bytes"], bytes, "{name} bytes");
        assert_eq!(p["latency"]["count"], ops, "{name} latency count");
        let workers = p["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2, "{name} workers");
        for w in workers {
            assert_eq!(w["ops"].as_u64().unwrap() * 2, ops, "{name} per worker");
        }
    }
    let fc = phase(&run, "file_create");
    assert_eq!(
        fc["op_stats"]["write"]["count"],
        104 * 2,
        "5000 bytes = 4096 + 904"
    );
    let kib = fc["extra"]["kib_per_s"].as_f64().unwrap();
    let expect = 104.0 * 5000.0 / 1024.0 / fc["wall_s"].as_f64().unwrap();
    assert!((kib - expect).abs() < expect * 1e-6, "{kib} vs {expect}");
    assert_eq!(fc["extra"]["files"], 104.0);
    assert_eq!(phase(&run, "dir_create")["extra"]["dirs"], 26.0);
    for name in ["dir_create", "file_create", "file_remove", "dir_remove"] {
        let syncfs = &phase(&run, name)["op_stats"]["syncfs"]["count"];
        assert_eq!(*syncfs, if fsync == "end" { 2 } else { 0 }, "{name} syncfs");
    }
    let fsyncs = &fc["op_stats"]["fsync"]["count"];
    assert_eq!(*fsyncs, if fsync == "file" { 104 } else { 0 });
    assert_eq!(run["workload"]["params"]["levels"], 2);
    assert_eq!(run["testbed"]["fs"], fs);
}

#[test]
fn fdtree_tree_and_phases_on_ext4() {
    tree_on("ext4", "256M", "none");
}

#[test]
fn fdtree_tree_and_phases_on_xfs() {
    tree_on("xfs", "300M", "end");
}

#[test]
fn fdtree_tree_and_phases_on_btrfs() {
    tree_on("btrfs", "256M", "file");
}

/// A small fdtree on ext4 with `--fsync MODE`: the run and its phases' names.
fn run_with_fsync(mode: &str) -> (serde_json::Value, Vec<String>) {
    let sb = Sandbox::new();
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--levels",
            "2",
            "--dirs-per-level",
            "3",
            "--files-per-dir",
            "4",
            "--file-size",
            "64K",
            "--json",
            "--quiet",
            "--fsync",
            mode,
        ])
        .output()
        .unwrap();
    let run = json_of(&out);
    sb.assert_clean();
    let names = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    (run, names)
}

/// `--fsync phase`: every create and remove phase is timed without a sync, as fdtree times
/// it, and followed by a phase of its own timing one syncfs, which holds the writeback the
/// loop left (on ext4 with delayed allocation, the file data).
#[test]
fn fsync_phase_times_the_writeback_as_a_phase_of_its_own_on_ext4() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let (run, names) = run_with_fsync("phase");
    assert_eq!(
        names,
        [
            "dir_create",
            "dir_create_sync",
            "file_create",
            "file_create_sync",
            "file_remove",
            "file_remove_sync",
            "dir_remove",
            "dir_remove_sync"
        ]
    );
    for name in ["dir_create", "file_create", "file_remove", "dir_remove"] {
        let p = phase(&run, name);
        assert_eq!(
            p["op_stats"]["syncfs"]["count"], 0,
            "{name} is timed unsynced"
        );
        let s = phase(&run, &format!("{name}_sync"));
        assert_eq!(s["ops"], 1, "{name}_sync: one syncfs");
        assert_eq!(s["op_stats"]["syncfs"]["count"], 1, "{name}_sync");
    }
    // 52 files of 64K: delayed allocation leaves their data for the sync phase to write, and
    // by its end all of it is written. (How much the sync phase itself writes is not
    // asserted: a sync(2) of another process on this machine, as every cache drop of the
    // tests running beside this one does, may write it back during file_create.)
    let data = 52 * 64 * 1024;
    let written = |name: &str| phase(&run, name)["device"]["write_bytes"].as_u64().unwrap();
    assert!(
        written("file_create") + written("file_create_sync") >= data,
        "file_create and file_create_sync wrote {} + {} bytes, the files hold {data}",
        written("file_create"),
        written("file_create_sync")
    );
    assert_eq!(run["workload"]["params"]["fsync"], "phase");
}

/// `--fsync last`: the phases run back to back unsynced, as in a run of fdtree (what one
/// leaves dirty is written during the next), and one phase after the last times the syncfs
/// of what is still dirty at the end.
#[test]
fn fsync_last_carries_the_writeback_and_syncs_once_at_the_end_on_ext4() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let (run, names) = run_with_fsync("last");
    assert_eq!(
        names,
        [
            "dir_create",
            "file_create",
            "file_remove",
            "dir_remove",
            "dir_remove_sync"
        ]
    );
    for name in ["dir_create", "file_create", "file_remove", "dir_remove"] {
        assert_eq!(
            phase(&run, name)["op_stats"]["syncfs"]["count"],
            0,
            "{name} is timed unsynced"
        );
    }
    let s = phase(&run, "dir_remove_sync");
    assert_eq!(s["ops"], 1, "one syncfs at the end");
    assert_eq!(s["op_stats"]["syncfs"]["count"], 1);
    assert_eq!(run["workload"]["params"]["fsync"], "last");
}

#[test]
fn default_counts_are_exact_on_tmpfs() {
    // fdtree's defaults with 0-byte files (the counts do not depend on the size).
    let sb = Sandbox::new();
    let dir = Path::new("/dev/shm");
    if !dir.is_dir() {
        skip("needs /dev/shm");
        return;
    }
    let out = sb
        .cmd()
        .args([
            "bench",
            "fdtree",
            "--file-size",
            "0",
            "--json",
            "--quiet",
            "--dir",
        ])
        .arg(dir)
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    let run = json_of(&out);
    for (name, ops) in [
        ("dir_create", 11111),
        ("file_create", 111110),
        ("file_remove", 111110),
        ("dir_remove", 11111),
    ] {
        assert_eq!(phase(&run, name)["ops"], ops, "{name}");
    }
    assert!(run["tool_peak_rss"].as_u64().unwrap() < 32 << 20);
}

#[test]
fn a_tree_of_directories_only_has_no_file_phases() {
    // -f 0: the journal-size preset's directories-only tree.
    let sb = Sandbox::new();
    let dir = Path::new("/dev/shm");
    if !dir.is_dir() {
        skip("needs /dev/shm");
        return;
    }
    let out = sb
        .cmd()
        .args([
            "bench",
            "fdtree",
            "--levels",
            "4",
            "--dirs-per-level",
            "3",
            "--files-per-dir",
            "0",
            "--json",
            "--quiet",
            "--dir",
        ])
        .arg(dir)
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    let run = json_of(&out);
    let names: Vec<&str> = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dir_create", "dir_remove"]);
    // 1 base + 3 + 9 + 27 + 81 directories, each made and removed.
    assert_eq!(phase(&run, "dir_create")["ops"], 121);
    assert_eq!(phase(&run, "dir_remove")["ops"], 121);
    // --stat and --read need files.
    let out = sb
        .cmd()
        .args(["bench", "fdtree", "--files-per-dir", "0", "--stat", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--stat and --read need files"));
}

#[test]
fn bad_input_is_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--levels", "0"], "1 or more"),
        (&["--files-per-dir", "0", "--read"], "need files"),
        (&["--threads", "0"], "--threads"),
        (&["--levels", "900", "--dirs-per-level", "1"], "PATH_MAX"),
        (
            &["--levels", "30", "--dirs-per-level", "1000"],
            "directories",
        ),
        (&["--scenario", "huge"], "small-shallow"),
    ];
    for (args, msg) in cases {
        refused_in_dir(&sb, &["bench", "fdtree"], &dir, args, msg);
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    if !crate::support::have_fs("ext4") {
        return;
    }
    // fdtree's defaults need 4.3 GiB: refused with the numbers, no testbed made.
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--quiet",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("4.34 GiB") && err.contains("256M"), "{err}");
    // Too few inodes (ext4 made with 128): refused before the tree is started, testbed gone.
    let out = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--mkfs-opts",
            "-N 128",
            "--levels",
            "2",
            "--file-size",
            "0",
            "--quiet",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    // Refused at admission, as a plan with the same tree is: before mkfs, naming the count.
    assert!(
        err.contains("-N 128") && err.contains("makes 1221"),
        "{err}"
    );
    sb.assert_clean();
}

/// Unmounts the tmpfs even when the test fails.
struct TmpfsMount(std::path::PathBuf);

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        // Lazy: even if something still holds the mount, it leaves the namespace now.
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_failing_worker_stops_the_phase_naming_worker_path_and_errno() {
    if !crate::support::have_root() {
        return;
    }
    // A 1 MiB tmpfs, two workers that each want 52 files of 64 KiB: ENOSPC mid-phase. The
    // workload is driven directly, past the runner's space check, to make the fault real.
    let sb = Sandbox::new();
    let mnt = sb.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &mnt,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    let _guard = TmpfsMount(mnt.clone());
    let root = mnt.join("run");
    std::fs::create_dir(&root).unwrap();
    let wl = Fdtree::from(FdtreeSpec {
        levels: Some(2),
        dirs_per_level: Some(3),
        files_per_dir: Some(4),
        file_size: Some("64K".parse().unwrap()),
        threads: Some(2),
        ..Default::default()
    });
    let mut target = Target::Dir(mnt.clone());
    let mut ctx = RunContext::new(
        &mut target,
        root.clone(),
        1,
        ColdMode::None,
        Progress::hidden(),
    );
    let err = wl.run(&mut ctx).expect_err("1 MiB cannot hold 6.5 MiB");
    let msg = format!("{err:#}");
    eprintln!("failure message: {msg}");
    assert!(msg.contains("phase file_create"), "{msg}");
    assert!(
        msg.contains("worker 0") || msg.contains("worker 1"),
        "{msg}"
    );
    assert!(msg.contains("ENOSPC"), "{msg}");
    assert!(
        msg.contains(&format!("{}/LEVEL0.", root.display())),
        "{msg}"
    );
    assert!(
        msg.contains("/L2F") || msg.contains("/L1F") || msg.contains("/L0F"),
        "{msg}"
    );
    assert_eq!(
        fsgauge::base::error::exit_code(&err),
        1,
        "a filesystem failure exits 1"
    );
    let (phases, _) = ctx.into_parts();
    assert_eq!(phases.len(), 1, "only dir_create finished");
}

#[test]
fn a_failing_worker_on_a_testbed_exits_1_and_tears_down() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    // Without dir_nlink ext4 allows 64998 subdirectories: two workers that each want 65000
    // under their base fail mid-phase with EMLINK. A RAM-backed image keeps it quick.
    let sb = Sandbox::new();
    let work = Path::new("/dev/shm").join(format!(
        "fsgauge-meta-test-{}",
        sb.path().file_name().unwrap().to_string_lossy()
    ));
    let out = sb
        .cmd()
        .args([
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "1G",
            "--backing",
            "ram",
            "--mkfs-opts",
            "-O ^dir_nlink -N 270000",
            "--levels",
            "1",
            "--dirs-per-level",
            "65000",
            "--files-per-dir",
            "1",
            "--file-size",
            "0",
            "--threads",
            "2",
            "--quiet",
            "--workdir",
        ])
        .arg(&work)
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("phase dir_create: worker "), "{err}");
    assert!(
        err.contains("/LEVEL0.") && err.contains("/L1D2 failed: EMLINK"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&work)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", work.display());
    let _ = std::fs::remove_dir(&work);
    assert!(
        crate::support::leaks_under(&work).is_empty(),
        "{:?}",
        crate::support::leaks_under(&work)
    );
    sb.assert_clean();
}

#[test]
fn help_prints_each_scenarios_exact_shape() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .args(["bench", "fdtree", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for line in [
        "small-shallow   L=3  D=20 F=40 S=4K      8421 dirs  336840 files",
        "small-deep      L=10 D=3  F=4  S=4K     88573 dirs  354292 files",
        "medium-shallow  L=2  D=17 F=10 S=4000K    307 dirs    3070 files",
        "medium-deep     L=9  D=2  F=4  S=4000K   1023 dirs    4092 files",
    ] {
        assert!(help.contains(line), "help lacks {line:?}:\n{help}");
    }
    // The counts printed are the ones the workload makes.
    for (name, dirs, files) in [
        ("small-shallow", 8421, 336840),
        ("small-deep", 88573, 354292),
        ("medium-shallow", 307, 3070),
        ("medium-deep", 1023, 4092),
    ] {
        let f = Fdtree::from(FdtreeSpec {
            scenario: Some(name.parse().unwrap()),
            ..Default::default()
        });
        assert_eq!((f.total_dirs(), f.total_files()), (dirs, files), "{name}");
    }
}
