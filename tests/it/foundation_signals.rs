//! Killing a run at any moment leaves nothing behind: SIGINT and SIGTERM tear down before exit
//! (exit code 128 + the signal: 130 for SIGINT, 143 for SIGTERM), and what a SIGKILL leaves is removed by `testbed cleanup`. Needs root, loop
//! devices and mkfs.ext4 (skips with a reason otherwise, fails under CI).

use std::time::{Duration, Instant};

use crate::support::{have_fs, leaks_under, Sandbox};

/// Starts a run long enough to be interrupted mid-phase, and waits until its testbed is mounted.
fn start_long_run(sb: &Sandbox) -> std::process::Child {
    let child = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "3G",
            "--journal",
            "ram:16M",
            "--mem-limit",
            "96M",
            "--dirs",
            "20",
            "--files",
            "50",
            "--file-size",
            "2M",
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while leaks_under(sb.path())
        .iter()
        .all(|l| !l.starts_with("mount"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the testbed never got mounted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the create phase.
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn interrupt_with(sig: nix::sys::signal::Signal) {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let child = start_long_run(&sb);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(128 + sig as i32),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains(&format!("interrupted by {sig}")),
        "{stderr}"
    );
    sb.assert_clean();
    assert!(
        !sb.out().exists() || std::fs::read_dir(sb.out()).unwrap().next().is_none(),
        "no half result written"
    );
}

#[test]
fn sigint_mid_phase_tears_everything_down() {
    interrupt_with(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn sigterm_mid_phase_tears_everything_down() {
    interrupt_with(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn sigint_during_testbed_creation_tears_down_what_was_made() {
    if !have_fs("xfs") {
        return;
    }
    // Interrupt at a spread of moments during mkfs and mount; each must leave nothing.
    for delay_ms in [5u64, 30, 80, 150] {
        let sb = Sandbox::new();
        let child = sb
            .bench(&[
                "bench",
                "tree",
                "--fs",
                "xfs",
                "--fs-size",
                "1G",
                "--dirs",
                "1",
                "--files",
                "1",
                "--file-size",
                "4K",
                "--quiet",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let out = child.wait_with_output().unwrap();
        // Before the handlers are installed (the first instructions of main), SIGINT's default
        // action ends the process; nothing exists yet then, which assert_clean checks. A
        // SIGINT that reaches mkfs is an interruption (130), never a set-up failure (2).
        use std::os::unix::process::ExitStatusExt;
        assert!(
            matches!(out.status.code(), Some(0) | Some(130))
                || out.status.signal() == Some(libc::SIGINT),
            "{:?}",
            out.status
        );
        sb.assert_clean();
    }
}

#[test]
fn sigkill_leftovers_are_removed_by_cleanup() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut child = start_long_run(&sb);
    // On cgroup v1 the run holds the host's dirty-page thresholds (host::dirty).
    let v1 = memory_cgroup_is_v1();
    if v1 {
        let t0 = Instant::now();
        while !dirty_holders().is_some_and(|h| h.contains(&child.id())) {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "a run limited on cgroup v1 never held the dirty thresholds: {:?}",
                dirty_holders()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    if v1 {
        assert!(
            dirty_holders().is_some_and(|h| h.contains(&child.id())),
            "a SIGKILL leaves the hold on the dirty thresholds behind"
        );
    }
    let left = leaks_under(sb.path());
    assert!(
        !left.is_empty(),
        "SIGKILL leaves the mount behind (or the test did not reach it)"
    );
    let list = sb.cmd().args(["testbed", "list"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("dead pid"),
        "{}",
        String::from_utf8_lossy(&list.stdout)
    );
    let out = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed"));
    sb.assert_clean();
    // The RAM journal image and the memory cgroup went too.
    let shm: Vec<_> = std::fs::read_dir("/dev/shm/fsgauge")
        .map(|r| r.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let pid = child.id().to_string();
    assert!(
        shm.iter().all(|n| !n.to_string_lossy().contains(&pid)),
        "{shm:?}"
    );
    // The killed run's hold on the dirty thresholds was given back.
    assert!(
        !dirty_holders().is_some_and(|h| h.contains(&child.id())),
        "{:?}",
        dirty_holders()
    );
}

/// Whether `--mem-limit` goes through cgroup v1 here: no cgroup2 hierarchy offers the memory
/// controller, and v1's is mounted (as `host::memlimit` chooses).
fn memory_cgroup_is_v1() -> bool {
    let v2 = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .any(|r| {
            std::fs::read_to_string(format!("{r}/cgroup.controllers"))
                .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"))
        });
    !v2 && std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
}

/// The processes that hold the host's dirty-page thresholds (`/run/fsgauge/dirty-limits.json`);
/// `None` when nobody does.
fn dirty_holders() -> Option<Vec<u32>> {
    let bytes = std::fs::read("/run/fsgauge/dirty-limits.json").ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes).expect("the holders file is JSON");
    Some(
        doc["holders"]
            .as_array()
            .expect("a holders list")
            .iter()
            .map(|h| h["pid"].as_u64().expect("a pid") as u32)
            .collect(),
    )
}
