//! Every path and every input the one way (issue 29, items 1, 4 and 14): an output never
//! replaces a device node, FIFO or socket; every file read as input is a regular file of
//! bounded size, and a FIFO never blocks a command; a bad output path is exit 2 before any
//! work. Items 2 and 3 (another user's link in an output path or in place of
//! `/var/tmp/fsgauge`) are attacks, in `attacks.rs`.
//!
//! The tests that act as another user, mount or unshare need root (they skip with a printed
//! reason otherwise, and fail under CI).

use std::os::unix::fs::{symlink, FileTypeExt};
use std::path::PathBuf;
use std::process::Output;

pub use crate::support::run_within as within;
use crate::support::Sandbox;

/// A few results to report on, made without root (`bench tree --dir`).
pub fn results(sb: &Sandbox) -> PathBuf {
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

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn refused_with(o: &Output, what: &str, needles: &[&str]) {
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
    let o = within(c, 60, "devices fit --out FIFO");
    refused_with(&o, "devices fit --out FIFO", &["a FIFO"]);
    assert!(
        o.stdout.is_empty(),
        "the fit ran first: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        !stderr(&o).contains("fitted"),
        "the fit ran first: {}",
        stderr(&o)
    );
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
