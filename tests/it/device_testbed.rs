//! Testbeds on emulated disks (`--device-model`; needs root, loop devices, /dev/fuse and
//! mkfs): the result records the model and, per measured phase, what the disk served and how
//! late; set-up (mkfs, aging, the fresh copy) runs at native speed unless
//! `device_model_during = "always"`; nothing is left behind.

use crate::support::{have_fs, have_fuse, have_root, skip, Sandbox};

/// The device servers' FUSE mounts of the fsgauge process `pid`.
fn server_mounts(pid: u32) -> Vec<String> {
    let tag = format!("fsgauge-device-{pid}-");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect()
}

fn run_ok(sb: &Sandbox, args: &[&str]) -> u32 {
    let child = sb
        .bench(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    pid
}

#[test]
fn a_bench_on_an_emulated_disk_records_the_model_and_each_phase() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let pressure = crate::support::Pressure::start();
    let pid = run_ok(
        &sb,
        &[
            "bench",
            "interleave",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--device-model",
            "deskstar-7k250:cache=off",
            "--device-offset",
            "100G",
            "--dirs",
            "10",
            "--files",
            "20",
            "--cold",
            "drop",
            "--quiet",
        ],
    );
    let runs = sb.results();
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    let m = r
        .testbed
        .device_model
        .as_ref()
        .expect("the model is recorded");
    assert_eq!(m.profile, "deskstar-7k250");
    assert_eq!(m.reference, "deskstar-7k250:cache=off");
    assert_eq!(m.ablations, "cache=off");
    assert_eq!(m.kind, "hdd");
    assert_eq!(m.offset, 100 << 30);
    assert_eq!(m.during, "phases");
    assert_eq!(m.hash.len(), 64);
    assert!(m.parameters.as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(r.testbed.loop_direct_io, Some(true));
    // The cold remove reads the tree from the disk: the model served it, each request after
    // a seek and a rotation (no cache), and on time.
    let remove = r
        .phases
        .iter()
        .find(|p| p.name == "remove")
        .expect("remove");
    let d = remove.device_model.as_ref().expect("a record of the phase");
    assert!(d.counts.reads > 0, "{d:?}");
    assert_eq!(d.counts.cache_hits, 0, "cache=off: {d:?}");
    assert_eq!(d.counts.unmodelled, 0, "the phase is modelled: {d:?}");
    assert!(d.service_ns.mean > 1e6, "a seek and a rotation each: {d:?}");
    // Lateness is the emulator's to flag; it is asserted only on a machine that was quiet
    // (a busy one delays the server's threads whatever their priority).
    let quiet = crate::support::quiet_enough(&pressure, "the remove phase's lateness");
    assert!(!quiet || d.lateness_p99_ms < 5.0, "{d:?}");
    assert_eq!(d.counts.early, 0);
    assert!(d.service_ns.hdr.len() > 10 && d.seek_cylinders.count > 0);
    // The phase took at least what the disk did for it.
    let busy_s = d.service_ns.mean * d.service_ns.count as f64 / 1e9;
    assert!(
        remove.wall_s >= busy_s * 0.9,
        "{} < {busy_s}",
        remove.wall_s
    );
    assert!(server_mounts(pid).is_empty(), "{:?}", server_mounts(pid));
    sb.assert_clean();
}

/// The append test on an emulated disk: the aging and the copy to the fresh twin are set-up
/// (no model, no record), the reads are measured under the model, on both testbeds; with
/// `always` the set-up is modelled too.
#[test]
fn set_up_runs_at_native_speed_unless_the_model_applies_always() {
    if !have_fs("ext2") || !have_fuse() {
        return;
    }
    for during in ["phases", "always"] {
        let sb = Sandbox::new();
        let plan = sb.path().join("append.toml");
        std::fs::write(
            &plan,
            format!(
                r#"name = "append-emulated"
reps = 1
cold = "drop"

[[testbed]]
label = "ext2"
fs = "ext2"
fs_size = "64M"
device_model = "ram"
device_model_during = "{during}"

[[workload]]
kind = "append"
usage = [30.0]
tree = "4x10"
append = "4K"
"#
            ),
        )
        .unwrap();
        let pid = run_ok(&sb, &["run", plan.to_str().unwrap(), "--quiet"]);
        let runs = sb.results();
        assert_eq!(runs.len(), 1);
        let r = &runs[0];
        assert_eq!(r.testbed.device_model.as_ref().unwrap().during, during);
        for p in &r.phases {
            let measured = p.name.starts_with("read-");
            let modelled = p
                .device_model
                .as_ref()
                .is_some_and(|d| d.counts.reads + d.counts.writes > 0);
            if measured || during == "always" {
                assert!(modelled, "{during}: phase {} has no record", p.name);
            } else {
                assert!(
                    !modelled,
                    "{during}: set-up phase {} was modelled: {:?}",
                    p.name, p.device_model
                );
            }
        }
        assert!(server_mounts(pid).is_empty());
        sb.assert_clean();
    }
}

#[test]
fn bad_device_models_are_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    for (args, want) in [
        (
            vec!["--device-model", "no-such-disk"],
            "no device profile \"no-such-disk\"",
        ),
        (
            vec!["--device-model", "deskstar-7k250:spin=off"],
            "unknown ablation",
        ),
        (
            vec![
                "--device-model",
                "deskstar-7k250",
                "--device-offset",
                "249G",
            ],
            "does not fit on deskstar-7k250",
        ),
        (vec!["--journal-device-model", "ram"], "there is none"),
    ] {
        let mut all = vec!["bench", "tree", "--fs", "ext4", "--fs-size", "2G"];
        all.extend(&args);
        let out = sb.bench(&all).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    sb.assert_clean();
}

#[test]
fn testbed_create_refuses_an_emulated_disk_before_building_anything() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--device-model",
            "ram",
            "--workdir",
        ])
        .arg(sb.workdir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot leave one behind"), "{err}");
    sb.assert_clean();
}

/// The `fsgauge devices serve` children of `parent`.
pub(crate) fn servers_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid, ...
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmd).contains("devices\0serve") {
            out.push(pid);
        }
    }
    out
}

/// A bench run on an emulated disk long enough to be interrupted, and its device server once
/// it is up and the measured run under way.
fn long_run_on_an_emulated_disk(sb: &Sandbox, extra: &[&str]) -> (std::process::Child, u32) {
    let mut child = sb
        .bench(&[
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            "512M",
            "--device-model",
            "deskstar-7k250:cache=off",
            "--levels",
            "3",
            "--dirs-per-level",
            "10",
            "--files-per-dir",
            "30",
            "--file-size",
            "4K",
            "--fsync",
            "file",
            "--quiet",
        ])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let server = loop {
        if let Some(&s) = servers_of(pid).first() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "no device server appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // mkfs and mount take well under this at native speed; then the phases run for minutes.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended too soon to inject the fault"
    );
    (child, server)
}

/// Waits (bounded: a hang fails the test) for `child` to end; its status and stderr.
fn finish(mut child: std::process::Child) -> (std::process::ExitStatus, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run hung after the fault");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status, err)
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// SIGINT and SIGTERM during a run on an emulated disk: the run ends as interrupted and
/// tears down the filesystem, the server, its FUSE mount and both loop devices' users.
#[test]
fn an_interrupted_run_on_an_emulated_disk_leaves_nothing() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    for (sig, code) in [
        (nix::sys::signal::Signal::SIGINT, 130),
        (nix::sys::signal::Signal::SIGTERM, 143),
    ] {
        let sb = Sandbox::new();
        let (child, server) = long_run_on_an_emulated_disk(&sb, &[]);
        let pid = child.id();
        signal(pid, sig);
        let (status, err) = finish(child);
        assert_eq!(status.code(), Some(code), "{sig}: {err}");
        assert!(server_mounts(pid).is_empty(), "{:?}", server_mounts(pid));
        assert!(
            !std::path::Path::new(&format!("/proc/{server}")).exists()
                || std::fs::read_to_string(format!("/proc/{server}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "the device server {server} outlived the run"
        );
        sb.assert_clean();
    }
}

/// Fault injection: the device server is killed while a run is in its measured phases. The
/// run fails with exit 1 naming the server, within a bound (no hang), and tears everything
/// down: the filesystem, both loop devices' users, the FUSE mount, the ledger entries.
#[test]
fn a_device_server_killed_mid_run_fails_the_run_naming_it_and_leaves_nothing() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (child, server) = long_run_on_an_emulated_disk(&sb, &[]);
    let pid = child.id();
    signal(server, nix::sys::signal::Signal::SIGKILL);
    let (status, err) = finish(child);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("emulated device server for deskstar-7k250")
            && err.contains(&format!("pid {server}")),
        "{err}"
    );
    assert!(server_mounts(pid).is_empty(), "{:?}", server_mounts(pid));
    sb.assert_clean();
}

/// Fault injection: fsgauge itself is killed (SIGKILL: nothing of it runs again) during a run
/// on an emulated disk. Its server keeps serving the loop device (the filesystem on it is
/// still mounted: ending would turn its unmount into I/O errors); `testbed cleanup` then
/// removes everything the run left, the server last: the filesystem's mount, both loop
/// devices, the FUSE mount, the server, the image and the ledger entries.
#[test]
fn a_killed_run_on_an_emulated_disk_is_removed_by_testbed_cleanup() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (mut child, server) = long_run_on_an_emulated_disk(&sb, &[]);
    let pid = child.id();
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    child.wait().unwrap();
    let out = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    assert!(
        out.status.success(),
        "testbed cleanup failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gone = |p: u32| {
        !std::path::Path::new(&format!("/proc/{p}")).exists()
            || std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| s.contains(") Z "))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !gone(server) {
        assert!(
            std::time::Instant::now() < deadline,
            "the device server {server} outlived testbed cleanup by 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(server_mounts(pid).is_empty(), "{:?}", server_mounts(pid));
    sb.assert_clean();
}

/// The cgroups (v1 memory hierarchy and cgroup2) a process is in, as /proc/PID/cgroup says.
fn cgroups_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// A run under a memory limit on an emulated disk: the workload is in the run's memory cgroup,
/// the device server is not (it must never be reclaimed or OOM-killed against the workload's
/// limit), and the run completes.
#[test]
fn the_device_server_stays_outside_the_runs_memory_cgroup() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let (child, server) = long_run_on_an_emulated_disk(&sb, &["--mem-limit", "256M"]);
    let pid = child.id();
    let run = cgroups_of(pid);
    let served = cgroups_of(server);
    signal(pid, nix::sys::signal::Signal::SIGTERM);
    let (status, err) = finish(child);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        run.lines().any(|l| l.contains("/fsgauge-")),
        "the run is not in a memory cgroup of its own: {run}"
    );
    assert!(
        !served.contains("/fsgauge-"),
        "the device server is in the run's cgroup:\n{served}"
    );
    sb.assert_clean();
}

/// A device server started inside a memory cgroup of fsgauge's (as a server started within a
/// limited run would be) moves itself out, to the cgroup the run came from.
#[test]
fn a_device_server_started_inside_a_runs_memory_cgroup_leaves_it() {
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
    if !have_fuse() || !v1.join("memory.limit_in_bytes").exists() {
        if have_root() {
            skip("needs cgroup v1's memory hierarchy at /sys/fs/cgroup/memory");
        }
        return;
    }
    let own = cgroups_of(std::process::id())
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            ctl.split(',')
                .any(|c| c == "memory")
                .then(|| path.to_string())
        })
        .expect("this process's memory cgroup");
    let parent = v1.join(own.trim_start_matches('/'));
    let cg = parent.join(format!("fsgauge-test-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    let sb = Sandbox::new();
    let seen = sb.path().join("server-cgroup");
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$CG" && exec "$EXE" devices check ram --size 64M --seconds 0.2 --run 'cat /proc/$FSGAUGE_SERVER_PID/cgroup > "$SEEN"'"#)
        .env("CG", cg.join("cgroup.procs"))
        .env("SEEN", &seen)
        .env("EXE", env!("CARGO_BIN_EXE_fsgauge"))
        .env("FSGAUGE_STATE_DIR", sb.state())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    let served = std::fs::read_to_string(&seen).unwrap_or_default();
    // Empty again (the shell became fsgauge, which has ended): only the directory is left.
    std::fs::remove_dir(&cg).unwrap();
    assert!(st.success(), "devices check failed: {st}");
    let memory = served
        .lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "memory"))
        })
        .unwrap_or_else(|| panic!("no memory line in the server's cgroups: {served}"));
    assert_eq!(
        memory.splitn(3, ':').nth(2),
        Some(own.as_str()),
        "the server did not leave the run's cgroup: {served}"
    );
    sb.assert_clean();
}

/// The device server is this very program, started through /proc/self/exe: a run goes on
/// when its binary file is replaced or deleted under it (a rebuild or an upgrade during a long
/// study), and every repetition's disk is still served.
#[test]
fn a_run_whose_binary_is_deleted_under_it_still_serves_its_disks() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let copy = sb.path().join("fsgauge-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_fsgauge"), &copy).unwrap();
    let child = sb
        .bench_of(
            &copy,
            &[
                "bench",
                "interleave",
                "--fs",
                "ext4",
                "--fs-size",
                "256M",
                "--device-model",
                "ram",
                "--dirs",
                "10",
                "--files",
                "5",
                "--reps",
                "2",
                "--quiet",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // spawn returns once the program runs: its file can go at once.
    std::fs::remove_file(&copy).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = sb.results();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.testbed.device_model.is_some()));
    sb.assert_clean();
}

/// A filesystem the size of a whole drive on a host with less free space: refused with a full
/// image (naming --image-alloc), made with a sparse one, whose zeroed inode tables the
/// emulated disk punches out, and recorded as sparse in the result.
#[test]
fn a_sparse_image_holds_a_filesystem_larger_than_the_hosts_free_space() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let free = fsgauge::testbed::room::free_space(&sb.workdir()).expect("statvfs of the sandbox");
    // Twice the free space, in whole GiB, at least 64G; ext4 on the host takes files to 16T.
    let size_g = (free / (1 << 30) * 2).max(64);
    if size_g > 15 * 1024 {
        skip("the sandbox's filesystem has over 7.5T free: no image larger than it fits a file");
        return;
    }
    let size = format!("{size_g}G");
    let args = |alloc: &str| -> Vec<String> {
        [
            "bench",
            "fdtree",
            "--fs",
            "ext4",
            "--fs-size",
            &size,
            "--image-alloc",
            alloc,
            "--device-model",
            "ram",
            "--levels",
            "2",
            "--dirs-per-level",
            "3",
            "--files-per-dir",
            "2",
            "--file-size",
            "4K",
            "--quiet",
        ]
        .map(str::to_string)
        .to_vec()
    };
    let out = sb.bench(&strs(&args("full"))).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a full image larger than the free space is bad input"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("free") && err.contains("--image-alloc sparse"),
        "{err}"
    );
    assert!(!sb.out().exists(), "a refused run writes no results");
    run_ok(&sb, &strs(&args("sparse")));
    let runs = sb.results();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].testbed.image_alloc.as_deref(), Some("sparse"));
    assert_eq!(runs[0].testbed.size, size_g << 30);
    sb.assert_clean();
}

/// The words of a command line, as `Sandbox::bench` takes them.
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
