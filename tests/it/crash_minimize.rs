//! `exercise --replay LOG --minimize OUT` with a crash: a failing log cut down to the steps
//! its failure needs. The failure is made certain with the debug-build fault hook (a durable
//! byte at offset 100 flipped in the crash state), so the search does not depend on the
//! kernel: what is left must write offset 100 and make it durable (needs root, loop devices,
//! mkfs.ext4, e2fsck).

use crate::support::{have_fs, have_program, refused, Sandbox};

/// A 40-operation log of writes, reads, truncates and durability points, seed 7.
fn record(sb: &Sandbox) -> std::path::PathBuf {
    let dir = sb.path().join("log");
    let out = sb
        .bench(&[
            "exercise",
            "--fs",
            "ext4",
            "--fs-size",
            crate::support::size_of("ext4"),
            "--ops",
            "40",
            "--max-len",
            "64K",
            "--max-op-len",
            "16K",
            "--no",
            "zero,punch,falloc,collapse,insert,mapwrite,mapread,copy,clone",
            "--seed",
            "7",
            "--log",
            dir.to_str().unwrap(),
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("exercise-0.log")
}

#[test]
fn a_crash_failure_is_cut_down_to_the_steps_it_needs() {
    if !have_fs("ext4") || !have_program("e2fsck") || !cfg!(debug_assertions) {
        return;
    }
    let sb = Sandbox::new();
    let log = record(&sb);
    let min = sb.path().join("min.log");
    let out = sb
        .bench(&[
            "exercise",
            "--replay",
            log.to_str().unwrap(),
            "--crash-shutdown",
            "--minimize",
            min.to_str().unwrap(),
            "--minimize-tries",
            "1",
        ])
        .env("FSGAUGE_CRASH_INJECT", "corrupt:100")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("minimize: 40 steps fail (lost-durable)"),
        "{err}"
    );
    let text = std::fs::read_to_string(&min).unwrap();
    let steps: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    // A write over offset 100 and a durability point after it: nothing else is needed.
    assert_eq!(steps.len(), 2, "{text}");
    assert!(steps[0].starts_with("1 write"), "{text}");
    assert!(
        ["fsync", "fdatasync", "syncfs"]
            .iter()
            .any(|k| steps[1] == format!("2 {k} 0x0 0x0")),
        "{text}"
    );
    assert!(
        err.contains("2 of 40 steps still fail (lost-durable)"),
        "{err}"
    );
    assert!(
        text.starts_with("# fsgauge exercise replay log v1\n# seed 7\n"),
        "{text}"
    );
    // The cut-down log fails as the whole one did, and nothing is left behind.
    let again = sb
        .bench(&[
            "exercise",
            "--replay",
            min.to_str().unwrap(),
            "--crash-shutdown",
        ])
        .env("FSGAUGE_CRASH_INJECT", "corrupt:100")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    // The sandbox's results also hold the recording run's (no crash record): take the
    // replay's, whichever order the directory lists them in.
    let r = sb
        .results()
        .into_iter()
        .find(|r| r.crash.is_some())
        .expect("the replay's result, with a crash record");
    let c = r.crash.as_ref().expect("a crash record");
    assert!(
        c.failures[0].detail.contains("at offset 0x64 (100)"),
        "{c:?}"
    );
    sb.assert_clean();
}

#[test]
fn minimizing_without_a_log_a_crash_or_a_failure_is_refused() {
    if !have_fs("ext4") || !have_program("e2fsck") {
        return;
    }
    let sb = Sandbox::new();
    let min = sb.path().join("min.log");
    let m = min.to_str().unwrap();
    refused(
        &sb,
        &[
            "exercise",
            "--fs",
            "ext4",
            "--crash-shutdown",
            "--minimize",
            m,
        ],
        &["--minimize", "--replay LOG"],
    );
    let log = record(&sb);
    let l = log.to_str().unwrap();
    let sb = Sandbox::new();
    refused(
        &sb,
        &["exercise", "--replay", l, "--minimize", m],
        &["--crash-shutdown, --crash-points N or --crash-at K"],
    );
    refused(
        &sb,
        &[
            "exercise",
            "--replay",
            l,
            "--crash-shutdown",
            "--minimize",
            l,
        ],
        &["is the log being cut down"],
    );
    // The read-and-write mix loses nothing on ext4: there is no failure to keep.
    refused(
        &sb,
        &[
            "exercise",
            "--replay",
            l,
            "--crash-shutdown",
            "--minimize",
            m,
            "--minimize-tries",
            "1",
        ],
        &["did not fail with these flags in 1 run(s)"],
    );
    assert!(!min.exists());
}
