//! The crash findings' replay logs (docs/crash-findings.md): each replays cleanly without a
//! crash (its operations are valid and the model agrees with the filesystem), and where the
//! kernel's shutdown shows the failure, fsgauge names it as the page does: the class, the
//! offset and the operation that wrote the wrong bytes (needs root, loop devices, mkfs.xfs,
//! the checkers).

use std::path::PathBuf;

use crate::support::{have_fs, have_program, Sandbox};

/// A finding: its log, filesystem, checker, and the words its failure must have.
struct Finding {
    log: &'static str,
    fs: &'static str,
    checker: &'static str,
    words: [&'static str; 2],
}

const FINDINGS: [Finding; 2] = [
    Finding {
        log: "xfs-reflink-overwrite.log",
        fs: "xfs",
        checker: "xfs_repair",
        words: [
            "foreign data in exercise.dat: 196 wrong byte(s) at offset 0x100000 (1048576), after durable point 3 fsync",
            "by 5 write-dontcache at 0x0 (1048576 lower), since the durable point",
        ],
    },
    Finding {
        log: "ext4-journal-freed-block.log",
        fs: "ext4",
        checker: "e2fsck",
        words: [
            "at offset 0x13000 (77824), after durable point set-up",
            "by 2 mapwrite at 0x20000 (53248 higher), since the durable point",
        ],
    },
];

fn log_path(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "docs", "crash-findings", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

/// Replays `f`'s log, with `more` arguments; returns the exit code and stderr.
fn replay(f: &Finding, more: &[&str]) -> (i32, String, Sandbox) {
    let sb = Sandbox::new();
    let log = log_path(f.log);
    let mut args = vec!["exercise", "--replay", log.as_str()];
    args.extend_from_slice(more);
    let out = sb.bench(&args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (code, err, sb)
}

#[test]
fn the_findings_logs_replay_cleanly_without_a_crash() {
    for f in &FINDINGS {
        if !have_fs(f.fs) {
            continue;
        }
        let (code, err, sb) = replay(f, &[]);
        assert_eq!(code, 0, "{}: {err}", f.log);
        let r = sb.results().pop().expect("a result");
        assert_eq!(
            r.testbed.fs, f.fs,
            "{}: the log names its filesystem",
            f.log
        );
        assert!(r.crash.is_none(), "{}", f.log);
        sb.assert_clean();
    }
}

#[test]
fn a_shutdown_after_a_findings_log_is_named_as_the_page_says() {
    for f in &FINDINGS {
        if !have_fs(f.fs) || !have_program(f.checker) {
            continue;
        }
        let (code, err, sb) = replay(f, &["--crash-shutdown"]);
        assert!(code == 0 || code == 1, "{}: exit {code}\n{err}", f.log);
        let r = sb.results().pop().expect("a result");
        let c = r.crash.as_ref().expect("a crash record");
        assert_eq!(c.states, 1, "{}", f.log);
        sb.assert_clean();
        if code == 0 {
            // A kernel without the failure: nothing to name, and nothing named.
            assert!(c.failures.is_empty(), "{}: {c:?}", f.log);
            eprintln!("{}: not shown by this kernel", f.log);
            continue;
        }
        assert_eq!(c.failures.len(), 1, "{}: {c:?}", f.log);
        let d = &c.failures[0];
        assert_eq!(
            d.class,
            fsgauge::results::crash::CrashClass::Foreign,
            "{}: {}",
            f.log,
            d.detail
        );
        for w in f.words {
            assert!(
                d.detail.contains(w),
                "{}: wants {w:?} in\n{}",
                f.log,
                d.detail
            );
        }
    }
}
