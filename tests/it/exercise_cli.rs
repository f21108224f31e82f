//! `fsgauge exercise` from the command line, in a temporary directory on the host's filesystem
//! (no root needed, except the read-only mount test, which skips without it): same seed, same
//! stream; a corrupted byte is reported with its offset, the log directory holds the replay
//! log, report and expected image, and the replay reproduces the failure; bad input is refused
//! with exit code 2 and a message naming the problem.

use std::path::Path;
use std::process::Output;

use crate::support::Sandbox;

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn run_dir(sb: &Sandbox, dir: &Path, extra: &[&str]) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    sb.cmd()
        .arg("exercise")
        .arg("--dir")
        .arg(dir)
        .arg("--out")
        .arg(sb.out())
        .args(extra)
        .output()
        .unwrap()
}

/// The operation lines of a replay log (headers dropped).
fn op_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn same_seed_gives_the_same_operation_stream() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let mut logs = Vec::new();
    for (i, seed) in ["7", "7", "8"].iter().enumerate() {
        let log = sb.path().join(format!("log{i}"));
        let o = run_dir(
            &sb,
            &d,
            &[
                "--ops",
                "3000",
                "--seed",
                seed,
                "--log",
                log.to_str().unwrap(),
                "--json",
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["phases"][0]["ops"], 3000, "{}", text(&o));
        assert_eq!(v["seed"], seed.parse::<u64>().unwrap());
        logs.push(op_lines(&log.join("exercise-0.log")));
    }
    assert_eq!(logs[0].len(), 3000);
    assert_eq!(
        logs[0], logs[1],
        "the same seed must give the same operations"
    );
    assert_ne!(logs[0], logs[2], "another seed must give other operations");
    // Every kind the host filesystem supports shows up in 3000 operations.
    for kind in [
        "read", "write", "mapread", "mapwrite", "truncate", "fsync", "copy",
    ] {
        assert!(
            logs[0].iter().any(|l| l.split(' ').nth(1) == Some(kind)),
            "no {kind} in the stream"
        );
    }
    // Nothing is left in the directory (the workload directory is removed).
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}

#[test]
fn a_corrupted_byte_is_reported_and_the_replay_reproduces_it() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let log = sb.path().join("log");
    // After operation 400 a byte is flipped behind the exerciser's back.
    let o = run_dir(
        &sb,
        &d,
        &[
            "--ops",
            "5000",
            "--seed",
            "15",
            "--no",
            "collapse,insert,copy,clone,truncate,punch,zero",
            "--inject",
            "400:100000",
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let ops = op_lines(&log.join("exercise-0.log"));
    // Where the flip went (clamped into the file), from the log.
    let corrupt = ops
        .iter()
        .find(|l| l.starts_with("corrupt after 400 "))
        .unwrap_or_else(|| panic!("no corrupt step in the log: {err}"));
    let off = u64::from_str_radix(
        corrupt.rsplit(' ').next().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert!(
        err.contains(&format!("data mismatch at offset {off:#x} ({off})")),
        "the report must name the corrupted offset {off:#x}:\n{err}"
    );
    // The failing operation is the first read of that byte after the flip that no write
    // covered first.
    let mut expect = None;
    for l in ops.iter().skip_while(|l| !l.starts_with("corrupt")).skip(1) {
        let w: Vec<&str> = l.split(' ').collect();
        let (kind, o, n) = (
            w[1],
            u64::from_str_radix(&w[2][2..], 16).unwrap(),
            u64::from_str_radix(&w[3][2..], 16).unwrap(),
        );
        let covers = o <= off && off < o + n;
        if covers && matches!(kind, "read" | "mapread" | "read-dontcache") {
            expect = Some(w[0].to_string());
            break;
        }
        assert!(
            !(covers && matches!(kind, "write" | "mapwrite" | "write-dontcache")),
            "a write covered the flipped byte before any read: {l}"
        );
    }
    let n = expect.expect("a read of the flipped byte");
    assert!(err.contains(&format!("in operation {n} (")), "{err}");
    assert!(err.contains("expected:") && err.contains("found:"), "{err}");
    assert!(err.contains("last 100 steps"), "{err}");
    assert_eq!(
        ops.last().unwrap().split(' ').next().unwrap(),
        n,
        "log ends at the failure"
    );
    for f in ["exercise-0.report.txt", "exercise-0.expected.img"] {
        assert!(log.join(f).exists(), "{f} missing in {}", log.display());
    }
    // The expected image holds the model: its length is the model's size in the report.
    let img = std::fs::read(log.join("exercise-0.expected.img")).unwrap();
    let report = std::fs::read_to_string(log.join("exercise-0.report.txt")).unwrap();
    assert!(
        report.contains(&format!("model size:       {:#x}", img.len())),
        "{report}"
    );

    // The replay does the same steps and fails the same way.
    let log2 = sb.path().join("log2");
    let o2 = run_dir(
        &sb,
        &d,
        &[
            "--replay",
            log.join("exercise-0.log").to_str().unwrap(),
            "--log",
            log2.to_str().unwrap(),
        ],
    );
    assert_eq!(o2.status.code(), Some(1), "{}", text(&o2));
    let err2 = String::from_utf8_lossy(&o2.stderr);
    assert!(
        err2.contains(&format!("data mismatch at offset {off:#x} ({off})"))
            && err2.contains(&format!("in operation {n} (")),
        "{err2}"
    );
    assert_eq!(
        op_lines(&log2.join("exercise-0.log")),
        ops,
        "the replay did other steps"
    );
}

#[test]
fn replay_of_a_clean_log_is_clean_and_identical() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let log = sb.path().join("log");
    let o = run_dir(
        &sb,
        &d,
        &[
            "--ops",
            "2000",
            "--seed",
            "3",
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let log2 = sb.path().join("log2");
    let o = run_dir(
        &sb,
        &d,
        &[
            "--replay",
            log.join("exercise-0.log").to_str().unwrap(),
            "--log",
            log2.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["phases"][0]["ops"], 2000);
    assert_eq!(
        op_lines(&log.join("exercise-0.log")),
        op_lines(&log2.join("exercise-0.log"))
    );
}

#[test]
fn several_exercisers_run_on_their_own_files() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    let o = run_dir(&sb, &d, &["--ops", "1500", "--procs", "3", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["phases"][0];
    assert_eq!(p["ops"], 4500);
    assert_eq!(p["workers"].as_array().unwrap().len(), 3);
    assert_eq!(p["extra"]["procs"], 3.0);
    assert_eq!(v["workload"]["kind"], "exercise");
    assert_eq!(v["workload"]["params"]["max_len"], 256 * 1024);
}

fn expect_bad_input(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let sb = Sandbox::new();
    let d = sb.path().join("d");
    expect_bad_input(
        &run_dir(
            &sb,
            &d,
            &["--direct", "--max-len", "1000", "--max-op-len", "512"],
        ),
        "--max-len 1000 is not a multiple of the block size",
    );
    // A multiple of 512 but not of the filesystem's 4096-byte block.
    expect_bad_input(
        &run_dir(
            &sb,
            &d,
            &["--direct", "--max-len", "6144", "--max-op-len", "4096"],
        ),
        "--max-len 6144 is not a multiple of the block size",
    );
    let sub = d.join("adir");
    std::fs::create_dir_all(&sub).unwrap();
    expect_bad_input(
        &sb.cmd()
            .args(["exercise", "--file"])
            .arg(&sub)
            .arg("--out")
            .arg(sb.out())
            .output()
            .unwrap(),
        "is not a regular file",
    );
    expect_bad_input(
        &sb.cmd()
            .args(["exercise", "--file", "/dev/null", "--out"])
            .arg(sb.out())
            .output()
            .unwrap(),
        "/dev/null is not a regular file",
    );
    expect_bad_input(
        &run_dir(&sb, &d, &["--remount-every", "100"]),
        "--remount-every needs a testbed",
    );
    expect_bad_input(
        &run_dir(&sb, &d, &["--no", "write"]),
        "writes cannot be turned off",
    );
    expect_bad_input(&run_dir(&sb, &d, &["--no", "frob"]), "unknown operation");
    expect_bad_input(
        &run_dir(&sb, &d, &["--max-len", "4K", "--max-op-len", "64K"]),
        "--max-op-len 65536 is larger than --max-len 4096",
    );
    expect_bad_input(
        &sb.cmd()
            .args([
                "exercise",
                "--fs",
                "ext4",
                "--fs-size",
                "256M",
                "--mount-opts",
                "ro",
            ])
            .output()
            .unwrap(),
        "read-only",
    );
    let notlog = sb.path().join("notlog");
    std::fs::write(&notlog, "hello\n").unwrap();
    expect_bad_input(
        &run_dir(&sb, &d, &["--replay", notlog.to_str().unwrap()]),
        "is not an fsgauge exercise replay log",
    );
    // Nothing was made: no result files, nothing left in the directory.
    assert!(!sb.out().exists() || std::fs::read_dir(sb.out()).unwrap().count() == 0);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "only adir/");
}

#[test]
fn a_read_only_filesystem_is_refused() {
    if !crate::support::have_root() {
        return;
    }
    let sb = Sandbox::new();
    let mnt = sb.path().join("ro");
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1M", "fsgauge-test-ro"])
        .arg(&mnt)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mounting a read-only tmpfs");
    let o = run_dir(&sb, &mnt, &["--ops", "10"]);
    let o2 = sb
        .cmd()
        .args(["exercise", "--file"])
        .arg(mnt.join("f"))
        .output()
        .unwrap();
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    expect_bad_input(&o, "is on a read-only filesystem");
    expect_bad_input(&o2, "is on a read-only filesystem");
}
