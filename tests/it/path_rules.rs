//! Every path and every input the one way (issue 29, items 1–4 and 14): an output never
//! replaces a device node, FIFO or socket; another user's link in an output path or in place
//! of `/var/tmp/fsgauge` is refused, naming it and its owner; every file read as input is a
//! regular file of bounded size, and a FIFO never blocks a command; a bad output path is exit 2
//! before any work.
//!
//! The tests that act as another user, mount or unshare need root (they skip with a printed
//! reason otherwise, and fail under CI).

use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{have_fs, have_root, Sandbox};

const NOBODY: u32 = 65534;

/// A few results to report on, made without root (`bench tree --dir`).
fn results(sb: &Sandbox) -> PathBuf {
    let dir = sb.path().join("tree");
    std::fs::create_dir_all(&dir).unwrap();
    let out = sb.path().join("r");
    let o = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
        ])
        .args(["--seed", "3", "--quiet", "--dir"])
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `c` with a deadline; still running then is a hang: killed, and the test fails.
fn within(mut c: Command, secs: u64, what: &str) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!(
                "{what}: still running after {:?} (it blocked)",
                t0.elapsed()
            );
        }
    }
}

fn refused_with(o: &Output, what: &str, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {e}");
    for n in needles {
        assert!(e.contains(n), "{what}: {n:?} not in: {e}");
    }
}

// Item 1: -o onto a character device, a FIFO or a socket is refused before any work and the
// node stays what it was; `-` and /dev/stdout write to standard output.
#[test]
fn an_output_never_replaces_a_device_node_fifo_or_socket() {
    let sb = Sandbox::new();
    let res = results(&sb);
    let fifo = sb.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let sock_path = sb.path().join("sock");
    let _sock = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    let mut targets: Vec<(PathBuf, &str)> =
        vec![(fifo.clone(), "a FIFO"), (sock_path.clone(), "a socket")];
    // A character device of the sandbox's own, the same as /dev/full (root makes it; a test
    // run on code that replaced device nodes must not destroy the machine's /dev/full).
    let full = sb.path().join("full");
    let root = nix::unistd::geteuid().is_root();
    if root {
        nix::sys::stat::mknod(
            &full,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 7),
        )
        .unwrap();
        targets.push((full.clone(), "a character device"));
    }
    for (t, kind) in &targets {
        let mut c = sb.cmd();
        c.arg("report").arg(&res).arg("-o").arg(t);
        let o = within(c, 30, "report -o a node");
        refused_with(
            &o,
            &format!("report -o {}", t.display()),
            &[kind, "nothing was done"],
        );
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata(&sock_path)
        .unwrap()
        .file_type()
        .is_socket());
    if root {
        let md = std::fs::metadata(&full).unwrap();
        assert!(
            md.file_type().is_char_device(),
            "the device node was replaced"
        );
    }
    // devices fit --out onto a FIFO: refused before the fit's benchmarks start.
    let mut c = sb.cmd();
    c.args(["devices", "fit", "ram", "--seconds", "1", "--out"])
        .arg(&fifo);
    let t0 = Instant::now();
    let o = within(c, 30, "devices fit --out FIFO");
    refused_with(&o, "devices fit --out FIFO", &["a FIFO"]);
    assert!(t0.elapsed() < Duration::from_secs(20), "the fit ran first");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());

    for stream in ["-", "/dev/stdout"] {
        let o = sb
            .cmd()
            .arg("report")
            .arg(&res)
            .args(["--format", "csv", "-o", stream])
            .output()
            .unwrap();
        assert!(o.status.success(), "-o {stream}: {}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("testbed"),
            "-o {stream} wrote no report to stdout"
        );
    }
}

// Item 14: a missing directory and a kernel interface are bad output paths: exit 2.
#[test]
fn a_bad_output_path_is_exit_2() {
    let sb = Sandbox::new();
    let res = results(&sb);
    for (o, needle) in [
        ("/missing-fsgauge-dir/r.html", "does not exist"),
        ("/proc/self/status", "kernel interface"),
    ] {
        let r = sb
            .cmd()
            .arg("report")
            .arg(&res)
            .args(["-o", o])
            .output()
            .unwrap();
        refused_with(&r, &format!("report -o {o}"), &[needle]);
    }
}

/// A root-only directory with a file in it, and a directory of nobody's with a link to it.
struct Planted {
    secret: PathBuf,
    user: PathBuf,
}

fn plant(sb: &Sandbox) -> Planted {
    let secret = sb.path().join("root-only");
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(secret.join("keep.txt"), b"root's\n").unwrap();
    let user = sb.path().join("home-nobody");
    std::fs::create_dir(&user).unwrap();
    std::os::unix::fs::chown(&user, Some(NOBODY), Some(NOBODY)).unwrap();
    // The sandbox is root's 0700: nobody needs to pass through it to its own directory.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let link = user.join("sub");
    symlink(&secret, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    Planted { secret, user }
}

// Item 2: a directory link planted by another user in an output path is refused, naming the
// link and its owner; the root-only directory stays as it was.
#[test]
fn a_directory_link_in_an_output_path_is_refused() {
    if !crate::support::have_root() {
        return;
    }
    let sb = Sandbox::new();
    let res = results(&sb);
    let p = plant(&sb);
    let o = sb
        .cmd()
        .arg("report")
        .arg(&res)
        .arg("-o")
        .arg(p.user.join("sub/keep.txt"))
        .output()
        .unwrap();
    refused_with(&o, "report -o through the link", &["sub", "uid 65534"]);
    assert_eq!(
        std::fs::read(p.secret.join("keep.txt")).unwrap(),
        b"root's\n"
    );

    let dir = sb.path().join("tree2");
    std::fs::create_dir_all(&dir).unwrap();
    let o = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "1",
            "--files",
            "2",
            "--file-size",
            "4K",
            "--quiet",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--out")
        .arg(p.user.join("sub"))
        .output()
        .unwrap();
    refused_with(&o, "--out through the link", &["sub", "uid 65534"]);
    let names: Vec<_> = std::fs::read_dir(&p.secret)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("keep.txt")],
        "written into the root-only directory"
    );
    // Read as input through the same link (a plan): refused, and nothing of the file shown.
    let o = sb
        .cmd()
        .arg("run")
        .arg(p.user.join("sub/keep.txt"))
        .arg("--dry-run")
        .output()
        .unwrap();
    refused_with(&o, "a plan through the link", &["uid 65534"]);
    assert!(!stderr(&o).contains("root's"), "{}", stderr(&o));
}

// Item 3: a /var/tmp/fsgauge that another user made a link (in a private mount namespace with
// its own /var/tmp, whatever fs.protected_symlinks says) is refused by every command that
// uses fsgauge's work directory, before anything is made, and no ledger entry is left.
#[test]
fn a_planted_var_tmp_fsgauge_link_is_refused() {
    if !have_root() || !have_fs("ext4") {
        return;
    }
    // The sandbox must not be below /var/tmp, which the namespace covers.
    let sb = tempfile::Builder::new()
        .prefix("fsgauge-test-ns-")
        .tempdir_in("/tmp")
        .unwrap();
    let victim = sb.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let state = sb.path().join("state");
    let exe = env!("CARGO_BIN_EXE_fsgauge");
    let protected = std::fs::read_to_string("/proc/sys/fs/protected_symlinks").unwrap_or_default();
    eprintln!("fs.protected_symlinks = {}", protected.trim());
    for cmd in [
        format!("{exe} bench tree --fs ext4 --fs-size 64M --dirs 1 --files 1 --file-size 4K --quiet --out {0}/out", sb.path().display()),
        format!("{exe} bench tree --fs ext4 --fs-size 64M --device-model ram --dirs 1 --files 1 --file-size 4K --quiet --out {0}/out", sb.path().display()),
        format!("{exe} devices check ram --seconds 0.2"),
    ] {
        let script = format!(
            "set -e; mount -t tmpfs -o mode=1777 fsgauge-test /var/tmp; \
             setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups ln -s {victim} /var/tmp/fsgauge; \
             set +e; {cmd}; rc=$?; ls -la /var/tmp/fsgauge/ >&2; exit $rc",
            victim = victim.display()
        );
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("FSGAUGE_STATE_DIR", &state);
        let o = within(c, 60, &cmd);
        refused_with(&o, &cmd, &["/var/tmp/fsgauge", "uid 65534"]);
        let left: Vec<_> = std::fs::read_dir(&victim)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{cmd}: made {left:?} in the link's target");
        let entries: Vec<_> = std::fs::read_dir(&state)
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            entries.iter().all(|n| !n.to_string_lossy().ends_with(".json")),
            "{cmd}: ledger entries left: {entries:?}"
        );
    }
}

// Item 4: every file read as input is a regular file of bounded size: a FIFO (as a device
// profile, a loadfile, a replay log) is refused at once, a profile linked to /dev/zero too.
#[test]
fn every_input_is_bounded_and_a_fifo_never_blocks() {
    let sb = Sandbox::new();
    let fifo = sb.path().join("p.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let zero = sb.path().join("zero.toml");
    symlink("/dev/zero", &zero).unwrap();
    let dir = sb.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let f = fifo.to_str().unwrap();
    let z = zero.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["devices", "show", f], "a FIFO"),
        (vec!["devices", "show", z], "a character device"),
        (
            vec!["run", "quick", "--dry-run", "--device-model", f],
            "a FIFO",
        ),
        (
            vec![
                "bench",
                "clients",
                "--dir",
                d,
                "--loadfile",
                f,
                "--time",
                "1s",
            ],
            "a FIFO",
        ),
        (vec!["exercise", "--dir", d, "--replay", f], "a FIFO"),
    ];
    for (args, needle) in cases {
        let mut c = sb.cmd();
        c.args(&args);
        let what = args.join(" ");
        let o = within(c, 30, &what);
        refused_with(&o, &what, &[needle]);
    }
}
