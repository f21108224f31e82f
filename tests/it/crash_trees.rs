//! `--crash-points` on `bench create` and `bench fdtree` (needs root, loop devices, /dev/fuse,
//! the filesystems' mkfs and checkers): each crash state is judged against what the workload
//! had fsynced or synced (files there whole, durable removals gone), and the crash record says
//! how many durable files each state checked; a corrupted or cut durable file is found and
//! named, a forgotten promise makes no failure, and `--fsync none` says it checks nothing.

use fsgauge::results::RunResult;

use crate::support::{have_fs, have_fuse, have_program, skip, Sandbox};

fn ready(fs: &str, checker: &str) -> bool {
    if !have_fuse() {
        return skip("crash points need root and /dev/fuse");
    }
    if !have_fs(fs) || !have_program(checker) {
        return skip(&format!("crash points on {fs} need its mkfs and {checker}"));
    }
    true
}

/// One `bench` run with crash points on the emulated disk: `fs`, the workload's `args`, under
/// the debug-build fault hook `inject` (if any). Returns the result and the exit status.
fn campaign(fs: &str, args: &[&str], inject: Option<&str>) -> (RunResult, i32) {
    let sb = Sandbox::new();
    let mut all = vec![
        "bench",
        args[0],
        "--fs",
        fs,
        "--fs-size",
        crate::support::size_of(fs),
        "--device-model",
        "deskstar-7k250",
        "--seed",
        "3",
        "--quiet",
    ];
    all.extend_from_slice(&args[1..]);
    let mut c = sb.bench(&all);
    if let Some(i) = inject {
        c.env("FSGAUGE_CRASH_INJECT", i);
    }
    let out = c.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{all:?}: exit {code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.results().pop().expect("a result");
    sb.assert_clean();
    (r, code)
}

fn failures(r: &RunResult) -> Vec<String> {
    let c = r.crash.as_ref().expect("a crash record");
    c.failures
        .iter()
        .map(|f| format!("cut {} {}: {}", f.cut, f.class, f.detail))
        .collect()
}

const CREATE: [&str; 11] = [
    "create",
    "--files",
    "60",
    "--file-size",
    "8K",
    "--block",
    "4K",
    "--fsync",
    "file",
    "--crash-points",
    "5",
];

#[test]
fn create_with_fsync_file_keeps_every_fsynced_file_and_counts_them() {
    if !ready("ext4", "e2fsck") {
        return;
    }
    let (r, code) = campaign("ext4", &CREATE, None);
    let c = r.crash.as_ref().expect("a crash record");
    assert_eq!(c.states, 5);
    assert_eq!(failures(&r), Vec::<String>::new());
    assert_eq!(code, 0);
    let d = c.durable.as_ref().expect("the tree judge's count");
    assert_eq!(d.states, 5);
    assert!(d.files_max > 0 && d.files_max <= 60, "{d:?}");
    assert!(d.files >= d.files_max && d.files <= 5 * 60, "{d:?}");
    assert!(d.judge.contains("create --fsync file"), "{}", d.judge);
    assert!(
        c.summary().contains(&format!(
            "durable files checked: {} to {} a state, {} in all",
            d.files_min, d.files_max, d.files
        )),
        "{}",
        c.summary()
    );
}

#[test]
fn fdtree_with_fsync_end_keeps_what_each_syncfs_covered_on_xfs() {
    if !ready("xfs", "xfs_repair") {
        return;
    }
    let args = [
        "fdtree",
        "--levels",
        "2",
        "--dirs-per-level",
        "2",
        "--files-per-dir",
        "3",
        "--file-size",
        "8K",
        "--fsync",
        "end",
        // The unmount and mount between file_create and file_remove write to the disk while
        // every file is durable and none is being removed: cuts there check them all.
        "--cold",
        "remount",
        "--crash-points",
        "10",
        "--crash-choose",
        "flushes",
    ];
    let (r, code) = campaign("xfs", &args, None);
    let c = r.crash.as_ref().expect("a crash record");
    assert_eq!(c.states, 10);
    assert_eq!(failures(&r), Vec::<String>::new());
    assert_eq!(code, 0);
    let d = c.durable.as_ref().expect("the tree judge's count");
    assert_eq!(d.states, 10);
    // 7 directories of 3 files: the file_create phase's syncfs makes all 21 durable, and the
    // file_remove phase's makes all 21 removals durable.
    assert_eq!(d.files_max, 21, "{d:?}");
    assert!(d.removals > 0 && d.removals % 21 == 0, "{d:?}");
}

#[test]
fn a_corrupted_or_cut_fsynced_file_is_named_and_a_forgotten_fsync_makes_no_failure() {
    if !ready("ext4", "e2fsck") || !cfg!(debug_assertions) {
        return;
    }
    let mut args = CREATE.to_vec();
    args.extend(["--crash-choose", "flushes"]);
    let (r, code) = campaign("ext4", &args, Some("corrupt:100"));
    let f = failures(&r);
    assert!(!f.is_empty(), "a corrupted durable byte went unseen");
    assert!(
        f.iter().all(|d| d.contains("lost-durable: w0/f")
            && d.contains("wrong bytes, the first wrong byte at offset 0x64 (100)")
            && d.contains("expected 8192 bytes")),
        "{f:#?}"
    );
    assert_eq!(code, 1);
    let (r, _) = campaign("ext4", &args, Some("truncate:1001"));
    let f = failures(&r);
    assert!(!f.is_empty(), "a cut durable file went unseen");
    assert!(
        f.iter()
            .all(|d| d.contains("lost-durable: w0/f") && d.contains("short: 1001 bytes")),
        "{f:#?}"
    );
    let (r, code) = campaign("ext4", &args, Some("forget"));
    assert_eq!(failures(&r), Vec::<String>::new());
    assert_eq!(code, 0);
    let d = r.crash.as_ref().and_then(|c| c.durable.clone()).unwrap();
    assert!(d.files_max > 0, "{d:?}");
}

#[test]
fn create_with_fsync_none_says_it_checks_nothing_durable() {
    if !ready("ext4", "e2fsck") {
        return;
    }
    let mut args = CREATE.to_vec();
    args[8] = "none";
    args[10] = "2";
    let (r, code) = campaign("ext4", &args, None);
    assert_eq!(code, 0, "{:?}", failures(&r));
    let d = r.crash.as_ref().and_then(|c| c.durable.clone()).unwrap();
    assert_eq!((d.states, d.files, d.removals), (2, 0, 0));
    assert!(
        d.judge.contains("makes nothing durable")
            && d.judge.contains("the mount and the checker alone"),
        "{}",
        d.judge
    );
}
