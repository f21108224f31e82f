//! Bad input to `fsgauge age` and `fsgauge study append`: exit code 2, a message naming the
//! problem (and the line of a distribution file), and nothing left behind.

use crate::support::{have_fs, Sandbox};

fn fails(sb: &Sandbox, args: &[&str], expect: &str) {
    let out = sb.bench(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(expect),
        "{args:?}: expected {expect:?} in: {err}"
    );
    assert!(!sb.out().exists(), "a result was written for bad input");
    sb.assert_clean();
}

#[test]
fn bad_usage_and_distributions_fail_before_anything_is_made() {
    let sb = Sandbox::new();
    let base = ["age", "--fs", "ext4", "--fs-size", "256M"];
    let with =
        |more: &[&str]| -> Vec<String> { base.iter().chain(more).map(|s| s.to_string()).collect() };
    let run = |more: &[&str], expect: &str| {
        let a = with(more);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        fails(&sb, &a, expect);
    };
    run(&["--usage", "50,101"], "--usage 101");
    run(&["--usage", "0"], "above 0");
    run(&["--usage", "60,30"], "ascending");
    run(&["--dist", "zipf"], "unknown size distribution");
    run(&["--dist", "uniform:8K..4K"], "MIN <= MAX");
    let empty = sb.path().join("empty.csv");
    std::fs::write(&empty, "# sizes\n\n").unwrap();
    run(&["--dist", empty.to_str().unwrap()], "no size,weight rows");
    let bad = sb.path().join("bad.csv");
    std::fs::write(&bad, "size,weight\n4K,10\n8K;3\n").unwrap();
    run(&["--dist", bad.to_str().unwrap()], "bad.csv line 3");
    let bad2 = sb.path().join("bad2.csv");
    std::fs::write(&bad2, "4K,10\n16Q,1\n").unwrap();
    run(&["--dist", bad2.to_str().unwrap()], "line 2");
    run(
        &["--mode", "append", "--tree", "1000x1000", "--usage", "25"],
        "tree 1000x1000",
    );
    run(&["--prealloc"], "--prealloc applies to --mode append");
    run(&["--tree", "0x5"], "N and C must both be 1 or more");
}

#[test]
fn usage_below_what_is_used_is_refused_and_torn_down() {
    if !have_fs("ext4") || !have_fs("xfs") {
        return;
    }
    let sb = Sandbox::new();
    // A fresh 300M xfs already uses about 7% (its log and metadata).
    fails(
        &sb,
        &["age", "--fs", "xfs", "--fs-size", "300M", "--usage", "2,50"],
        "already uses",
    );
    // An inode-starved filesystem cannot hold the tree: refused after mkfs, torn down.
    fails(
        &sb,
        &[
            "age",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--mkfs-opts",
            "-N 64",
            "--mode",
            "append",
            "--tree",
            "2x5000",
            "--usage",
            "30",
        ],
        "inodes",
    );
}

#[test]
fn study_bad_input() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "study",
            "append",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--files",
            "7",
            "--dirs",
            "2",
        ])
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("multiple of --dirs") || err.contains("root"),
        "{err}"
    );
    assert!(!sb.out().exists());
    sb.assert_clean();
}

/// The study's lists are parsed as every comma-list flag is: a bad item is refused by the
/// command line, naming the flag and the whole value, before anything is made.
#[test]
fn study_lists_are_refused_as_every_list_flag_is() {
    let sb = Sandbox::new();
    let study = |more: &[&str], expect: &str| {
        let a: Vec<&str> = ["study", "append"].iter().chain(more).copied().collect();
        fails(&sb, &a, expect);
    };
    study(
        &["--usage", "25,x"],
        "invalid value '25,x' for '--usage <PCT,...>': invalid float literal",
    );
    study(
        &["--fs", "ext4,zfs"],
        "invalid value 'ext4,zfs' for '--fs <LIST>': unknown filesystem \"zfs\"",
    );
    study(
        &["--append", "4K,,8K"],
        "invalid value '4K,,8K' for '--append <SIZE,...>': an empty item in the list",
    );
    study(
        &["--read-phases", "walk", "--read-phases", "stat"],
        "the argument '--read-phases <LIST>' cannot be used multiple times",
    );
}
