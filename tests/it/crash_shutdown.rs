//! `--crash-shutdown`: the exerciser's run ended by the kernel's own shutdown (log not
//! flushed), the filesystem mounted again and judged, on a plain testbed (needs root, loop
//! devices, the filesystems' mkfs and checkers). The read-and-write mix loses nothing on ext4
//! and xfs; a corrupted durable byte is found at its offset; bad input makes nothing.

use fsgauge::results::RunResult;

use crate::support::{have_fs, have_program, have_root, refused, Sandbox};

/// The operations judged here, as in `crash_points`: the fallocate family, mmap writes and
/// copies left out (see the README's "Crash points").
const NO: &str = "zero,punch,falloc,collapse,insert,mapwrite,copy,clone";

fn ready(fs: &str, checker: &str) -> bool {
    have_fs(fs) && have_program(checker)
}

/// One run of `fs`, ended by the shutdown, under the debug-build fault hook `inject`.
fn shut(fs: &str, inject: Option<&str>) -> (RunResult, i32, String) {
    let sb = Sandbox::new();
    let args = [
        "exercise",
        "--fs",
        fs,
        "--fs-size",
        crate::support::size_of(fs),
        "--ops",
        "400",
        "--max-len",
        "64K",
        "--max-op-len",
        "16K",
        "--no",
        NO,
        "--weights",
        "fsync=4,fdatasync=4",
        "--seed",
        "7",
        "--crash-shutdown",
    ];
    let mut c = sb.bench(&args);
    if let Some(i) = inject {
        c.env("FSGAUGE_CRASH_INJECT", i);
    }
    let out = c.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(code == 0 || code == 1, "{args:?}: exit {code}\n{err}");
    let r = sb.results().pop().expect("a result");
    sb.assert_clean();
    (r, code, err)
}

#[test]
fn a_shutdown_after_the_read_and_write_mix_loses_nothing_on_ext4_and_xfs() {
    for (fs, checker) in [("ext4", "e2fsck"), ("xfs", "xfs_repair")] {
        if !ready(fs, checker) {
            continue;
        }
        let (r, code, err) = shut(fs, None);
        let c = r.crash.as_ref().expect("a crash record");
        assert!(c.is_shutdown() && c.states == 1, "{fs}: {c:?}");
        assert_eq!(c.log_requests, 0, "{fs}: no write log");
        let f: Vec<&str> = c.failures.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(f, Vec::<&str>::new(), "{fs}");
        assert_eq!(code, 0, "{fs}");
        assert!(
            err.contains("the crash state of the kernel's shutdown (log not flushed): no failures"),
            "{fs}: {err}"
        );
    }
}

#[test]
fn a_corrupted_durable_byte_after_a_shutdown_is_found_at_its_offset() {
    if !ready("ext4", "e2fsck") || !cfg!(debug_assertions) {
        return;
    }
    let (r, code, err) = shut("ext4", Some("corrupt:100"));
    let c = r.crash.as_ref().expect("a crash record");
    assert_eq!(code, 1, "{err}");
    assert_eq!(c.failures.len(), 1, "{c:?}");
    let f = &c.failures[0];
    assert!(
        f.detail.contains("exercise.dat") && f.detail.contains("at offset 0x64 (100)"),
        "{}",
        f.detail
    );
    assert!(
        f.replay.contains("--crash-shutdown")
            && f.replay.contains("--seed 7")
            && !f.replay.contains("--crash-at"),
        "{}",
        f.replay
    );
    assert!(err.contains("  shutdown (lost-durable):"), "{err}");
}

#[test]
fn a_shutdown_crash_where_it_cannot_be_made_is_refused() {
    if !have_root() {
        return;
    }
    let sb = Sandbox::new();
    let base = ["exercise", "--fs-size", "300M", "--crash-shutdown"];
    let with = |more: &[&'static str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(more);
        a
    };
    refused(
        &sb,
        &with(&["--fs", "btrfs"]),
        &["--crash-shutdown", "no shutdown ioctl", "ext4 or xfs"],
    );
    refused(
        &sb,
        &with(&["--fs", "ext4", "--crash-points", "3"]),
        &["--crash-points"],
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    refused(
        &sb,
        &["exercise", "--dir", d, "--crash-shutdown"],
        &["--crash-shutdown", "--dir"],
    );
}
