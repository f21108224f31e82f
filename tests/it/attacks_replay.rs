//! The attack suite's replay logs (issue 41, item 2): logs are meant to be shared
//! (docs/crash-findings/), so root replays logs nobody checked. Every field of the header
//! at its type's maximum, at 0, negative, and as huge strings, with the operations the
//! campaign used (a write at 64 GiB, a write of 4 GiB, a file of 2^62 bytes), replayed by root
//! on the testbed the log names and on one given with `--fs`. Each must be refused as bad
//! input (exit 2, naming the log and its line) before anything is built: no ledger entry, no
//! run directory, no mount, no loop device, no result. Before, such logs overflowed the heap
//! (SIGSEGV), panicked in the model, or aborted after building the testbed and left it
//! mounted.
//!
//! Needs root, loop devices and mkfs.ext4 (skips with a printed reason otherwise; fails under
//! CI).

use crate::support::{have_fs, have_root, Sandbox};

const U64: u64 = u64::MAX;
const U32: u32 = u32::MAX;

/// The header lines after the magic (seed, worker, file, params, testbed), one variant each,
/// with the operation line that goes with it.
fn variants() -> Vec<(&'static str, String, &'static str)> {
    let huge = "A".repeat(200_000);
    let testbed = r#"{"fs":"ext4","size":67108864}"#;
    let head = |seed: &str, params: &str, testbed: &str| {
        format!(
            "# seed {seed}\n# worker {U32}\n# file /x\n# params {params}\n# testbed {testbed}\n"
        )
    };
    vec![
        (
            "lengths at u64::MAX, a write at 64 GiB",
            head(
                "7",
                &format!(r#"{{"max_len":{U64},"max_op_len":{U64}}}"#),
                testbed,
            ),
            "1 write 0x1000000000 0x10",
        ),
        (
            "lengths at u64::MAX, a write of 4 GiB",
            head(
                "7",
                &format!(r#"{{"max_len":{U64},"max_op_len":{U64}}}"#),
                testbed,
            ),
            "1 write 0x0 0x100000000",
        ),
        (
            "a file of 2^62 bytes",
            head("7", r#"{"max_len":4611686018427387904}"#, testbed),
            "1 write 0x0 0x10",
        ),
        (
            "every field at its type's maximum",
            head(
                &U64.to_string(),
                &format!(
                    r#"{{"file":"f","ops":{U64},"time":"{U64}s","max_len":{U64},"max_op_len":{U64},"procs":{U32},"direct":true,"pollute_eof":true,"weights":{{"read":{U32}}},"remount_every":{U64},"inject":[[{U64},{U64}]],"time_based":true,"interval":"{U64}s","ramp":"{U64}s"}}"#
                ),
                &format!(r#"{{"fs":"ext4","size":{U64}}}"#),
            ),
            "1 write 0x0 0x10",
        ),
        (
            "every number at 0",
            head(
                "0",
                r#"{"ops":0,"time":"0s","max_len":0,"max_op_len":0,"procs":0,"remount_every":0,"interval":"0s","ramp":"0s"}"#,
                r#"{"fs":"ext4","size":0}"#,
            ),
            "1 write 0x0 0x10",
        ),
        (
            "negative numbers",
            head(
                "-1",
                r#"{"max_len":-1,"max_op_len":-4096,"procs":-1}"#,
                testbed,
            ),
            "1 write 0x0 0x10",
        ),
        (
            "huge strings",
            head(
                "7",
                &format!(r#"{{"file":"{huge}","replay":"{huge}","log":"{huge}"}}"#),
                &format!(r#"{{"fs":"{huge}","mount_options":"{huge}"}}"#),
            ),
            "1 write 0x0 0x10",
        ),
        (
            "a read-only mount recorded for the testbed",
            head(
                "7",
                r#"{"max_len":65536}"#,
                r#"{"label":"x","fs":"ext4","size":67108864,"mkfs_args":[],"mount_options":"ro","journal":null,"memory_limit":null,"backing":"file","device":null,"loop_direct_io":null,"path":"/x"}"#,
            ),
            "1 write 0x0 0x10",
        ),
    ]
}

#[test]
fn a_replay_log_with_every_header_field_at_its_limits_leaves_nothing_behind() {
    if !have_root() || !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut failures = Vec::new();
    for (i, (what, head, step)) in variants().into_iter().enumerate() {
        let log = sb.path().join(format!("hostile-{i}.log"));
        std::fs::write(
            &log,
            format!("# fsgauge exercise replay log v1\n{head}{step}\n"),
        )
        .unwrap();
        let l = log.to_str().unwrap();
        // On the testbed the log names, and on one the command line names (where the log's
        // testbed is at fault, the command line's is a fine place to replay).
        let given: &[&str] = &["--fs", "ext4", "--fs-size", "64M"];
        let places: &[&[&str]] = if what.contains("testbed") {
            &[&[]]
        } else {
            &[&[], given]
        };
        for &extra in places {
            let mut args = vec!["exercise", "--replay", l, "--quiet"];
            args.extend_from_slice(extra);
            let out = sb.bench(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let case = format!("{what} {extra:?}");
            if out.status.code() != Some(2) {
                failures.push(format!("{case}: {} (want exit 2): {err}", out.status));
            } else if !err.contains(&format!("--replay {l} line ")) {
                failures.push(format!(
                    "{case}: the refusal names no line of the log: {err}"
                ));
            }
            if sb.out().exists() {
                failures.push(format!("{case}: a result directory was made"));
                std::fs::remove_dir_all(sb.out()).unwrap();
            }
            let leaks = crate::support::leaks_under(sb.path());
            if !leaks.is_empty() {
                failures.push(format!("{case}: left behind {leaks:?}"));
                let _ = sb.cmd().args(["testbed", "cleanup", "--all"]).output();
            }
        }
    }
    sb.assert_clean();
    assert!(failures.is_empty(), "{failures:#?}");
}
