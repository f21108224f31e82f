//! Failures under an emulated disk, told apart from the filesystem's (needs root, loop devices,
//! /dev/fuse and mkfs.ext4): a device server that dies during a set-up step (mkfs, the mount,
//! the journal's disk, the aging, the syncfs before the model is switched on) is named with
//! how it ended (exit 1, as during a phase), and a backing store that fills under the disk's
//! image is named with its filesystem and free space (exit 2, as under a plain loop device).
//!
//! Each fault is made at a named step: fsgauge stops itself there (`FSGAUGE_TEST_STOP_AT`, a
//! debug build's test hook), the test kills the server or fills the store, and lets it go on;
//! nothing depends on how fast the machine is.

use std::io::BufRead;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::device_testbed::servers_of;
use crate::support::{have_fs, have_fuse, Sandbox, Tmpfs, TEST_TRANSPORT};

/// A bound on waits for things that happen at once (a stop, a death): a hang fails the test
/// rather than blocking the suite, and a slow machine still finishes well inside it.
const PATIENCE: Duration = Duration::from_secs(300);

/// The state letter of /proc/PID/stat (R, S, T, Z, …); None once the process is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn wait_for_state(pid: u32, want: &[char], what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !state(pid).is_none_or(|s| want.contains(&s)) {
        assert!(
            Instant::now() < deadline,
            "{what}: pid {pid} never got there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// Runs `cmd`, which stops itself at `point`; does `act` (given fsgauge's pid) while it is
/// stopped, then lets it run to its end. Its exit status and stderr.
fn stopped_at(mut cmd: Command, point: &str, act: impl FnOnce(u32)) -> (ExitStatus, String) {
    let mut child = cmd
        .env("FSGAUGE_TEST_STOP_AT", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let stop = format!("fsgauge: test stop at {point}");
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) if line == stop => break,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "fsgauge never stopped at {point}: {}",
                    reader.join().unwrap()
                );
            }
        }
    }
    wait_for_state(pid, &['T', 't'], "fsgauge stopping itself");
    act(pid);
    signal(pid, nix::sys::signal::Signal::SIGCONT);
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run hung after the fault at {point}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, reader.join().unwrap())
}

/// The size (`--size`) a device server of `parent` serves, by its command line.
fn served_size(server: u32) -> u64 {
    let cmd = std::fs::read(format!("/proc/{server}/cmdline")).unwrap();
    let args: Vec<String> = cmd
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let i = args.iter().position(|a| a == "--size").unwrap();
    args[i + 1].parse().unwrap()
}

/// Kills the device server of fsgauge `pid` that serves `size` bytes (any, if None) and waits
/// until it is dead (a zombie: fsgauge is stopped and cannot reap it yet). Its pid.
fn kill_server(pid: u32, size: Option<u64>) -> u32 {
    let servers = servers_of(pid);
    let server = *servers
        .iter()
        .find(|&&s| size.is_none_or(|n| served_size(s) == n))
        .unwrap_or_else(|| panic!("no device server of {size:?} bytes among {servers:?}"));
    signal(server, nix::sys::signal::Signal::SIGKILL);
    wait_for_state(server, &['Z'], "the killed device server");
    server
}

/// A small bench run on an emulated `ram` disk, with `extra` flags.
fn small_run(sb: &Sandbox, extra: &[&str]) -> Command {
    let mut args = vec![
        "bench",
        "fdtree",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--device-model",
        "ram",
        "--levels",
        "1",
        "--dirs-per-level",
        "2",
        "--files-per-dir",
        "2",
        "--file-size",
        "4K",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    sb.bench(&args)
}

/// The server of the disk (or the journal's, with `size`) is killed just before `point`: the
/// run fails with exit 1, naming the server by its pid, the step, how it ended and what the
/// step itself saw; nothing is left behind.
fn killed_before(sb: &Sandbox, cmd: Command, point: &str, size: Option<u64>, step: &str) {
    let mut server = 0;
    let (status, err) = stopped_at(cmd, point, |pid| server = kill_server(pid, size));
    assert_eq!(status.code(), Some(1), "{err}");
    let role = if size.is_some() { "journal " } else { "" };
    for needle in [
        format!("the emulated {role}device server for ram (pid {server}, serving "),
        format!("died during {step}: it exited (signal: 9 (SIGKILL))"),
        format!("; {step} failed with: "),
    ] {
        assert!(err.contains(&needle), "no {needle:?} in: {err}");
    }
    assert!(!sb.out().exists(), "a failed run writes no results");
    sb.assert_clean();
}

#[test]
fn a_device_server_that_dies_before_mkfs_is_named() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    killed_before(&sb, small_run(&sb, &[]), "before-mkfs", None, "mkfs");
}

#[test]
fn a_device_server_that_dies_before_the_mount_is_named() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    killed_before(&sb, small_run(&sb, &[]), "before-mount", None, "the mount");
}

#[test]
fn a_device_server_that_dies_before_the_model_is_switched_on_is_named() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    killed_before(
        &sb,
        small_run(&sb, &[]),
        "before-syncfs",
        None,
        "the syncfs before the device model is switched on",
    );
}

#[test]
fn a_journal_device_server_that_dies_before_mkfs_is_named() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let cmd = small_run(
        &sb,
        &["--journal", "file:16M", "--journal-device-model", "ram"],
    );
    killed_before(&sb, cmd, "before-mkfs", Some(16 << 20), "mkfs");
}

#[test]
fn a_device_server_that_dies_before_a_plans_aging_is_named() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"name = "aged"
reps = 1

[[testbed]]
label = "emulated"
fs = "ext4"
fs_size = "256M"
device_model = "ram"

[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "64K"

[age]
mode = "fill"
usage = [20.0]
dist = "fixed:256K"
"#,
    )
    .unwrap();
    let cmd = sb.bench(&["run", plan.to_str().unwrap(), "--quiet"]);
    killed_before(
        &sb,
        cmd,
        "before-conditioning",
        None,
        "the conditioning (aging) before the workload",
    );
}

/// The tmpfs under the testbed's (sparse) image is filled once the filesystem is mounted:
/// the workload's writes then reach a disk whose image cannot grow. The run names the store
/// (its path, its filesystem, its free space) and the emulated disk whose writes it refused,
/// and exits 2, as a plain loop device's full store does; it is not blamed on ext4.
#[test]
fn a_full_backing_store_under_an_emulated_disk_is_named_as_the_cause() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let store = Tmpfs::mount(&sb.path().join("store"), "size=192M,mode=0755");
    let work = store.path().join("w");
    let mut cmd = sb.cmd();
    // The disk's bytes on the host disk (by default they are held in memory).
    cmd.env("FSGAUGE_DEVICE_STORE", "file");
    cmd.args([
        "bench",
        "fdtree",
        "--fs",
        "ext4",
        "--fs-size",
        "128M",
        "--image-alloc",
        "sparse",
        "--device-model",
        "ram",
        "--levels",
        "1",
        "--dirs-per-level",
        "4",
        "--files-per-dir",
        "10",
        "--file-size",
        "1M",
        "--fsync",
        "file",
        "--quiet",
        "--workdir",
    ])
    .arg(&work)
    .arg("--out")
    .arg(sb.out());
    let filler = store.path().join("filler");
    let (status, err) = stopped_at(cmd, "before-syncfs", |_| {
        // Leave 2 MiB: the workload writes 40.
        let f = std::fs::File::create(&filler).unwrap();
        let len = store.free().saturating_sub(2 << 20);
        nix::fcntl::fallocate(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            nix::fcntl::FallocateFlags::empty(),
            0,
            len as i64,
        )
        .unwrap();
    });
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    for needle in [
        format!("the backing store is full: {}", work.display()),
        "(tmpfs) has ".to_string(),
        " free of ".to_string(),
        "behind the emulated disk /dev/loop".to_string(),
        "to the image refused with ENOSPC".to_string(),
        "not the filesystem under test".to_string(),
        "--image-alloc full".to_string(),
    ] {
        assert!(err.contains(&needle), "no {needle:?} in: {err}");
    }
    assert!(!sb.out().exists(), "a failed run writes no results");
    drop(store);
    sb.assert_clean();
}

/// A set-up step that passed while the store under the emulated disk refused some of its
/// writes (nothing that ran noticed: a write-back's error can go unreported) still fails,
/// naming the store, exit 2: the disk lost writes. Made here with a write straight to the
/// disk, past what the filesystem uses, after the store filled up.
#[test]
fn a_step_that_passed_while_the_store_refused_writes_fails_naming_the_store() {
    use fsgauge::testbed::{FsKind, ImageAlloc, SetUp, Testbed, TestbedParams, TestbedSpec};
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let store = Tmpfs::mount(&sb.path().join("store"), "size=160M,mode=0755");
    fsgauge::host::ledger::set_state_dir(Some(sb.state()));
    let params = TestbedParams {
        fs_size: "128M".parse().unwrap(),
        image_alloc: ImageAlloc::Sparse,
        workdir: Some(store.path().join("w")),
        device_model: Some("ram".parse().unwrap()),
        device_transport: Some(TEST_TRANSPORT.parse().unwrap()),
        // The disk's bytes on the host disk (by default they are held in memory).
        device_store: Some(fsgauge::device::server::StoreChoice::File),
        ..TestbedParams::default()
    };
    let spec = TestbedSpec::build(params.input(FsKind::Ext4, None, None).unwrap()).unwrap();
    let mut tb = Testbed::create(&spec).unwrap();
    assert!(
        tb.after_set_up(SetUp::Mount, Ok(())).is_ok(),
        "a store with room refuses nothing"
    );
    let filler = store.path().join("filler");
    let f = std::fs::File::create(&filler).unwrap();
    nix::fcntl::fallocate(
        std::os::fd::AsRawFd::as_raw_fd(&f),
        nix::fcntl::FallocateFlags::empty(),
        0,
        store.free() as i64,
    )
    .unwrap();
    let disk = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(tb.device())
        .unwrap();
    // The disk's last MiB: no filesystem block there has been written, so the sparse image
    // has to grow for it.
    let block = vec![0x5au8; (1 << 20) + 4096];
    let at = block.as_ptr().align_offset(4096);
    let wrote = disk.write_at(&block[at..at + (1 << 20)], spec.size - (1 << 20));
    assert!(wrote.is_err(), "a write past a full store succeeded");
    let err = tb.after_set_up(SetUp::Mount, Ok(())).unwrap_err();
    let msg = format!("{err:#}");
    drop(disk);
    drop(f);
    std::fs::remove_file(&filler).unwrap();
    tb.destroy().unwrap();
    fsgauge::host::ledger::set_state_dir(None);
    assert_eq!(fsgauge::base::error::exit_code(&err), 2, "{msg}");
    for needle in [
        "the backing store is full: ",
        "(tmpfs) has ",
        "to the image refused with ENOSPC",
        "during the mount",
    ] {
        assert!(msg.contains(needle), "no {needle:?} in: {msg}");
    }
    drop(store);
    sb.assert_clean();
}

/// An emulated disk holds its bytes in memory, within a budget (half the machine's memory; 16M
/// here): a run that writes more is refused by the server, and the run names the disk, the
/// budget and what to do, exit 2; it is not blamed on ext4.
#[test]
fn an_emulated_disk_out_of_its_memory_budget_is_named_as_the_cause() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .env("FSGAUGE_DEVICE_STORE", "memory:16M")
        .args([
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "128M",
            "--device-model",
            "ram",
            "--levels",
            "1",
            "--dirs-per-level",
            "4",
            "--files-per-dir",
            "10",
            "--file-size",
            "1M",
            "--fsync",
            "file",
            "--quiet",
            "--out",
        ])
        .arg(sb.out())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for needle in [
        "holds its bytes in memory",
        "for want of it: the run wrote more than its memory budget of 16.00 MiB",
        "not the filesystem under test",
        "FSGAUGE_DEVICE_STORE=file",
    ] {
        assert!(err.contains(needle), "no {needle:?} in: {err}");
    }
    assert!(!sb.out().exists(), "a failed run writes no results");
    sb.assert_clean();
}
