//! Testbeds trust only places they made (issue 22): a hostile local user who owns the work
//! directory cannot make a root run format a file of their choice, nor leak a mount or loop
//! device by renaming directories; and the smaller defects of the issue (destroy of a live
//! run, --device size, RAM journal message, parallel names, a killed `testbed create`).
//! Needs root, loop devices and mkfs.ext4; skips with a reason otherwise, fails under CI.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{have_fs, json_of, leaks_under, Sandbox};

const NOBODY: u32 = 65534;

/// Starts `cmd` with stderr piped and waits until it prints `line` (or fails the test).
fn spawn_until(mut cmd: Command, line: &str) -> (Child, Vec<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drained to the end, so the child never meets a closed pipe.
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let hit = l == line;
                seen.push(l);
                if hit {
                    return (child, seen);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(st)) = child.try_wait() {
                    let _ = child.wait();
                    panic!("ended ({st}) before {line:?}: {seen:#?}");
                }
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("never printed {line:?}: {seen:#?}");
}

/// A work directory owned by another user (nobody), as a user's `--workdir` is.
fn hostile_workdir(sb: &Sandbox) -> PathBuf {
    let w = sb.workdir();
    std::os::unix::fs::chown(&w, Some(NOBODY), Some(NOBODY)).unwrap();
    w
}

/// What the ledger holds.
fn ledger_names(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(sb.state().join("ledger"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".json"))
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes what a test moved aside in its sandbox (made by the test, below the sandbox).
fn remove_moved(sb: &Sandbox, p: &Path) {
    assert!(
        p.starts_with(sb.path()),
        "{} outside the sandbox",
        p.display()
    );
    if p.exists() {
        std::fs::remove_dir_all(p).unwrap();
    }
}

/// Issue 22 item 1: while a root run builds its testbed in a work directory another user
/// owns, that user moves the run's directory away and puts one of its own in its place,
/// holding `fs.img -> victim`. The victim must never be formatted: the image is used through
/// the descriptor it was made with.
#[test]
fn a_swapped_image_path_never_gets_a_file_formatted() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let work = hostile_workdir(&sb);
    let victim = sb.path().join("victim");
    let marker = b"precious data, not a filesystem";
    {
        let f = std::fs::File::create(&victim).unwrap();
        f.set_len(64 << 20).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, marker, 0).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, marker, 1024).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swapped = Arc::new(std::sync::Mutex::new(Vec::<PathBuf>::new()));
    // The attacker: wherever an fs.img appears below the work directory (at depth 1 or 2),
    // the top entry holding it is renamed away and replaced by a planted tree.
    let attacker = {
        let (stop, swapped, work, victim) =
            (stop.clone(), swapped.clone(), work.clone(), victim.clone());
        std::thread::spawn(move || {
            // Find the run's top entry (its own directory `t`, or a private one holding
            // `t`), then watch for the image in a tight loop, to win the race for sure.
            let mut img = None;
            while img.is_none() && !stop.load(Ordering::Relaxed) {
                let Ok(rd) = std::fs::read_dir(&work) else {
                    continue;
                };
                for e in rd.filter_map(|e| e.ok()) {
                    let n = e.file_name().to_string_lossy().to_string();
                    if n == "t" {
                        img = Some((e.path(), PathBuf::from("fs.img")));
                    } else if n.starts_with(".fsgauge-") {
                        img = Some((e.path(), PathBuf::from("t/fs.img")));
                    }
                }
            }
            let Some((top, rel)) = img else { return };
            while !stop.load(Ordering::Relaxed) {
                if std::fs::symlink_metadata(top.join(&rel)).is_err() {
                    std::hint::spin_loop();
                    continue;
                }
                let moved = top.with_extension("moved");
                if std::fs::rename(&top, &moved).is_ok() {
                    let planted = top.join(&rel);
                    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
                    std::os::unix::fs::symlink(&victim, &planted).unwrap();
                    swapped.lock().unwrap().push(moved);
                }
                return;
            }
        })
    };
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--name",
            "t",
            "--json",
            "--workdir",
        ])
        .arg(&work)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    let moved = swapped.lock().unwrap().clone();
    eprintln!(
        "create: {}\n{}\n{}\nmoved: {moved:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!moved.is_empty(), "the attacker never got to swap anything");
    // Destroying it afterwards, through the paths the attacker changed, touches no victim.
    let destroyed = sb.cmd().args(["testbed", "destroy", "t"]).output().unwrap();
    let mut head = vec![0u8; 2048];
    std::fs::File::open(&victim)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    assert_eq!(&head[..marker.len()], marker, "the victim was overwritten");
    // ext2/3/4's superblock magic 0xEF53 at byte 1080.
    assert_ne!(&head[1080..1082], &[0x53, 0xef], "the victim was formatted");
    assert!(
        !out.status.success() || destroyed.status.success(),
        "{}",
        String::from_utf8_lossy(&destroyed.stderr)
    );
    assert!(
        leaks_under(sb.path()).is_empty(),
        "{:?}",
        leaks_under(sb.path())
    );
    for m in moved {
        remove_moved(&sb, &m);
    }
    std::fs::remove_file(&victim).unwrap();
}

/// A small ext4 `bench tree` run of the sandbox, held `ms` milliseconds once mounted; returns
/// when it says so.
fn small_run_paused_at_mount(sb: &Sandbox, ms: u32) -> std::process::Child {
    let mut cmd = sb.bench(&[
        "bench",
        "tree",
        "--fs",
        "ext4",
        "--fs-size",
        "64M",
        "--dirs",
        "2",
        "--files",
        "2",
        "--file-size",
        "4K",
    ]);
    cmd.env("FSGAUGE_TEST_PAUSE_AT", "mount")
        .env("FSGAUGE_TEST_PAUSE_MS", ms.to_string());
    spawn_until(cmd, "fsgauge: test pause at mount").0
}

/// Issue 22 item 4: renaming a run's directory while it is mounted must not leak the mount
/// or the loop device: teardown goes through held descriptors.
#[test]
fn renaming_a_live_runs_directory_leaks_nothing() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let work = hostile_workdir(&sb);
    let mut child = small_run_paused_at_mount(&sb, 1500);
    let entries: Vec<PathBuf> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let moved = entries[0].with_extension("x");
    std::fs::rename(&entries[0], &moved).unwrap();
    let status = child.wait().unwrap();
    // The run itself may fail (its mount point's path is gone); it must leave nothing.
    eprintln!("the run ended {status}");
    assert!(
        leaks_under(sb.path()).is_empty(),
        "left behind: {:?}",
        leaks_under(sb.path())
    );
    assert!(ledger_names(&sb).is_empty(), "{:?}", ledger_names(&sb));
    remove_moved(&sb, &moved);
}

/// Issue 22 item 9: `testbed destroy NAME` of a live run's testbed is refused, as cleanup
/// refuses it, and the run ends well.
#[test]
fn destroy_refuses_a_live_runs_testbed() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut child = small_run_paused_at_mount(&sb, 3000);
    let names = ledger_names(&sb);
    assert_eq!(names.len(), 1, "{names:?}");
    let out = sb
        .cmd()
        .args(["testbed", "destroy", &names[0]])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("running fsgauge") && err.contains("pid"),
        "{err}"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "the run was disturbed: {status}");
    sb.assert_clean();
}

/// Issue 22 item 13: a RAM journal too big for /dev/shm names the journal, not --fs-size.
#[test]
fn a_ram_journal_too_big_for_shm_names_the_journal() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--journal",
            "ram:64T",
            "--workdir",
        ])
        .arg(sb.workdir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/dev/shm"), "{err}");
    assert!(err.contains("--journal ram:SIZE"), "{err}");
    assert!(!err.contains("--fs-size smaller"), "{err}");
    sb.assert_clean();
}

/// Issue 22 item 14: parallel `testbed create --label X` without --name all succeed, each
/// under its own name.
#[test]
fn parallel_creates_with_one_label_all_get_a_name() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let children: Vec<Child> = (0..3)
        .map(|_| {
            sb.cmd()
                .args([
                    "testbed",
                    "create",
                    "--fs",
                    "ext4",
                    "--fs-size",
                    "64M",
                    "--label",
                    "par",
                    "--json",
                    "--workdir",
                ])
                .arg(sb.workdir())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut names = Vec::new();
    let mut failures = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        if out.status.success() {
            names.push(json_of(&out)["name"].as_str().unwrap().to_string());
        } else {
            failures.push(String::from_utf8_lossy(&out.stderr).to_string());
        }
    }
    for n in &names {
        let d = sb.cmd().args(["testbed", "destroy", n]).output().unwrap();
        assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    }
    assert!(failures.is_empty(), "{failures:#?}");
    names.sort();
    assert_eq!(names, ["par-1", "par-2", "par-3"]);
    sb.assert_clean();
}

/// Issue 22 item 15: a `testbed create` killed once its testbed is persistent has already
/// told its user the name; `testbed destroy NAME` removes it.
#[test]
fn a_killed_create_has_printed_the_name_of_what_it_kept() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut cmd = sb.cmd();
    cmd.args([
        "testbed",
        "create",
        "--fs",
        "ext4",
        "--fs-size",
        "64M",
        "--name",
        "kept",
        "--workdir",
    ])
    .arg(sb.workdir())
    .env("FSGAUGE_TEST_PAUSE_AT", "kept")
    .env("FSGAUGE_TEST_PAUSE_MS", "20000");
    let (mut child, _) = spawn_until(cmd, "fsgauge: test pause at kept");
    child.kill().unwrap();
    let _ = child.wait();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(stdout.contains("name:        kept"), "{stdout:?}");
    assert!(
        stdout.contains("fsgauge testbed destroy kept"),
        "{stdout:?}"
    );
    let d = sb
        .cmd()
        .args(["testbed", "destroy", "kept"])
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    sb.assert_clean();
}

/// A loop device on a 64M image of the test's own, detached on drop.
struct SmallDevice {
    dev: String,
    image: PathBuf,
}

impl SmallDevice {
    fn new(sb: &Sandbox) -> Self {
        let image = sb.path().join("small-device.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Self { dev, image }
    }
}

impl Drop for SmallDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Issue 22 item 11: `--device` on a 64M device: the testbed's size is the device's, so a
/// workload too big for it is refused before mkfs (the device stays unformatted), and a
/// testbed on it records 64M, not the 2G default of --fs-size.
#[test]
fn a_device_testbed_has_the_devices_size_and_is_checked_before_mkfs() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let dev = SmallDevice::new(&sb);
    let out = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--device",
            &dev.dev,
            "--destroy-data",
            "--dirs",
            "1",
            "--files",
            "100",
            "--file-size",
            "1M",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("64M"), "{err}");
    let mut head = vec![0u8; 2048];
    std::fs::File::open(&dev.image)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    assert!(head.iter().all(|b| *b == 0), "the device was written");

    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--device",
            &dev.dev,
            "--destroy-data",
            "--name",
            "dev",
            "--json",
            "--workdir",
        ])
        .arg(sb.workdir())
        .output()
        .unwrap();
    let doc = json_of(&out);
    let d = sb
        .cmd()
        .args(["testbed", "destroy", "dev"])
        .output()
        .unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    assert_eq!(doc["testbed"]["size"].as_u64(), Some(64 << 20), "{doc}");
    drop(dev);
    sb.assert_clean();
}

/// fsgauge's own directories are refused when someone else owns them or others can write
/// them, with a message naming the directory, its owner and mode, and what to do.
#[test]
fn an_own_directory_someone_else_owns_is_refused() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let ledger = sb.state().join("ledger");
    std::fs::create_dir_all(&ledger).unwrap();
    std::os::unix::fs::chown(&ledger, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = sb
        .cmd()
        .args([
            "testbed",
            "create",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--name",
            "x",
            "--workdir",
        ])
        .arg(sb.workdir())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&ledger.display().to_string())
            && err.contains("65534")
            && err.contains("mode 0755")
            && err.contains("remove it"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&ledger).unwrap().count(), 0);
    std::fs::remove_dir(&ledger).unwrap();
    sb.assert_clean();
}

/// Everything of a run in a work directory another user owns is in a private 0700
/// directory of root's, and the mount point's directories are root's and closed to others.
#[test]
fn a_hostile_workdir_gets_a_private_directory() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let work = hostile_workdir(&sb);
    let doc = json_of(
        &sb.cmd()
            .args([
                "testbed",
                "create",
                "--fs",
                "ext4",
                "--fs-size",
                "64M",
                "--name",
                "p",
                "--json",
                "--workdir",
            ])
            .arg(&work)
            .output()
            .unwrap(),
    );
    let mnt = PathBuf::from(doc["mountpoint"].as_str().unwrap());
    let private = mnt.parent().unwrap().parent().unwrap().to_path_buf();
    let md = std::fs::metadata(&private).unwrap();
    let pname = private.file_name().unwrap().to_string_lossy().to_string();
    let d = sb.cmd().args(["testbed", "destroy", "p"]).output().unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    assert_eq!(private.parent(), Some(work.as_path()));
    assert!(
        pname.starts_with(".fsgauge-") && pname.len() > 20,
        "{pname}"
    );
    assert_eq!((md.uid(), md.mode() & 0o7777), (0, 0o700));
    sb.assert_clean();
}

/// Issue 29 item 8: once the testbed is mounted, the private directory in a --workdir another
/// user owns is renamed and a tree of the old names planted in its place, its `mnt` an empty
/// directory of that user's. The run reaches its mount point through the testbed's held
/// directory, never by that path: it succeeds on the testbed, makes nothing in the planted
/// tree (before: its run directory and workload went there; without a planted tree,
/// "statvfs …/mnt: ENOENT", exit 2), says the directory was renamed, and leaves nothing
/// behind.
#[test]
fn a_private_directory_renamed_after_the_mount_does_not_redirect_the_run() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let work = hostile_workdir(&sb);
    let resume = sb.path().join("resume");
    let mut child = sb
        .bench(&[
            "bench",
            "tree",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
            "--dirs",
            "2",
            "--files",
            "2",
            "--file-size",
            "4K",
        ])
        // Held at the mount until the test has made its move (a fsgauge without the resume
        // file goes on after a minute, and fails on the renamed path).
        .env("FSGAUGE_TEST_PAUSE_AT", "mount")
        .env("FSGAUGE_TEST_PAUSE_MS", "60000")
        .env("FSGAUGE_TEST_RESUME_FILE", &resume)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("fsgauge: test pause at mount") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            panic!("the run ended before its mount: {said}");
        }
        said.push_str(&l);
    }
    let entries: Vec<PathBuf> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let private = entries[0].clone();
    let renamed = private.with_extension("renamed");
    std::fs::rename(&private, &renamed).unwrap();
    let planted_mnt = private.join(format!("ext4-{}-0", child.id())).join("mnt");
    std::fs::create_dir_all(&planted_mnt).unwrap();
    for d in [&private, planted_mnt.parent().unwrap(), &planted_mnt] {
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let (status, made_there) = made_in_while(&planted_mnt, || {
        std::fs::write(&resume, b"").unwrap();
        err.read_to_string(&mut said).unwrap();
        child.wait().unwrap()
    });
    assert!(
        !made_there,
        "the run worked in the planted mount point: {said}"
    );
    assert!(status.success(), "{status}: {said}");
    assert!(!said.contains("ENOENT"), "{said}");
    let warning = format!(
        "{} was renamed to {} while the run used it",
        private.display(),
        renamed.display()
    );
    assert!(said.contains(&warning), "no {warning:?} in: {said}");
    let results = sb.results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].testbed.fs, "ext4");
    assert!(!renamed.exists(), "the renamed private directory was left");
    assert!(
        leaks_under(sb.path()).is_empty(),
        "{:?}",
        leaks_under(sb.path())
    );
    assert!(ledger_names(&sb).is_empty(), "{:?}", ledger_names(&sb));
    remove_moved(&sb, &private);
}

/// Runs `f`, and says whether anything was made in `dir` meanwhile (inotify: an entry created
/// or moved in, even one removed again before `f` returned).
fn made_in_while<T>(dir: &Path, f: impl FnOnce() -> T) -> (T, bool) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: inotify_init1 returns a new descriptor (checked) that nothing else owns.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    assert!(
        fd >= 0,
        "inotify_init1: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: as above.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid descriptor and a NUL-terminated path that outlives the call.
    let w = unsafe {
        libc::inotify_add_watch(
            fd.as_raw_fd(),
            c.as_ptr(),
            libc::IN_CREATE | libc::IN_MOVED_TO,
        )
    };
    assert!(
        w >= 0,
        "inotify_add_watch: {}",
        std::io::Error::last_os_error()
    );
    let out = f();
    let mut buf = [0u8; 4096];
    // SAFETY: a read into a buffer of the size given.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    (out, n > 0)
}
