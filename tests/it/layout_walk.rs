//! The tree walk survives real trees: special files and symlinks are counted, a bind mount that
//! loops back is visited once, another filesystem below the path is not entered unless
//! --cross-mounts, unreadable entries are counted as permission errors, and per-file output in
//! every format lists each file once.
//!
//! Needs root (mounts, changing user); skips with a reason otherwise.

use std::path::Path;
use std::process::Command;

use crate::support::Sandbox;

fn mount(args: &[&str]) {
    let st = Command::new("mount").args(args).status().expect("mount");
    assert!(st.success(), "mount {args:?}");
}

struct Unmount(Vec<std::path::PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(p).status();
        }
    }
}

fn frag_json(sb: &Sandbox, args: &[&str], root: &Path) -> serde_json::Value {
    let out = sb
        .cmd()
        .arg("frag")
        .args(args)
        .arg(root)
        .output()
        .expect("frag");
    crate::support::json_of(&out)
}

#[test]
fn loops_mounts_and_special_files_are_counted_not_followed() {
    if !crate::support::have_root() {
        return;
    }
    let sb = Sandbox::new();
    let root = sb.path().join("tree");
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    for i in 0..5 {
        std::fs::write(root.join(format!("a/f{i}")), vec![b'x'; 5000]).expect("write");
    }
    std::fs::write(root.join("a/b/g"), b"y").expect("write");
    nix::unistd::mkfifo(
        &root.join("a/fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    std::os::unix::fs::symlink("..", root.join("a/b/up")).expect("symlink");
    let _sock = std::os::unix::net::UnixListener::bind(root.join("a/sock")).expect("socket");
    std::fs::create_dir_all(root.join("loop")).expect("mkdir");
    std::fs::create_dir_all(root.join("other")).expect("mkdir");
    let mut mounts = Unmount(Vec::new());
    // A bind mount of the tree inside itself, and a tmpfs below it.
    mount(&[
        "--bind",
        root.to_str().expect("utf8"),
        root.join("loop").to_str().expect("utf8"),
    ]);
    mounts.0.push(root.join("loop"));
    mount(&[
        "-t",
        "tmpfs",
        "-o",
        "size=1m",
        "fsgauge-test",
        root.join("other").to_str().expect("utf8"),
    ]);
    mounts.0.push(root.join("other"));
    std::fs::write(root.join("other/t"), b"t").expect("write");

    let doc = frag_json(&sb, &["--format", "json", "--per-file"], &root);
    let s = &doc["summary"];
    assert_eq!(s["files"].as_u64(), Some(6), "{s}");
    assert_eq!(doc["files"].as_array().expect("files").len(), 6);
    let sk = &s["skipped"];
    assert_eq!(
        sk["special_files"].as_u64(),
        Some(2),
        "fifo and socket: {sk}"
    );
    assert_eq!(sk["symlinks"].as_u64(), Some(1), "{sk}");
    assert_eq!(
        sk["other_mounts"].as_u64(),
        Some(2),
        "the bind mount and the tmpfs: {sk}"
    );

    // Crossing mounts: the tmpfs file is read (or counted if tmpfs has no FIEMAP), and the bind
    // mount loop is visited once and then recognized.
    let doc = frag_json(&sb, &["--format", "json", "--cross-mounts"], &root);
    let s = &doc["summary"];
    let sk = &s["skipped"];
    assert_eq!(sk["loops"].as_u64(), Some(1), "{sk}");
    assert_eq!(sk["other_mounts"].as_u64(), Some(0), "{sk}");
    assert_eq!(
        s["files"].as_u64().expect("files") + sk["unsupported"].as_u64().expect("unsupported"),
        7,
        "the tmpfs file is scanned or counted as having no block map: {s}"
    );
    assert_eq!(sk["errors"].as_u64(), Some(0), "{sk}");

    // Permission errors, as an unprivileged user.
    std::fs::create_dir_all(root.join("a/closed")).expect("mkdir");
    std::fs::write(root.join("a/closed/secret"), b"s").expect("write");
    std::fs::write(root.join("a/private"), b"p").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("a/closed"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod");
    std::fs::set_permissions(
        root.join("a/private"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    // The sandbox itself must be reachable for the unprivileged user.
    std::fs::set_permissions(sb.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_fsgauge"),
            "frag",
            "--format",
            "json",
        ])
        .arg(&root)
        .output()
        .expect("setpriv");
    let doc = crate::support::json_of(&out);
    let sk = &doc["summary"]["skipped"];
    assert_eq!(
        sk["permission_denied"].as_u64(),
        Some(2),
        "closed dir and private file: {sk}"
    );
    drop(mounts);
}

#[test]
fn formats_and_sorting() {
    let sb = Sandbox::new();
    let root = sb.path().join("t");
    std::fs::create_dir_all(&root).expect("mkdir");
    for (name, size) in [("b", 3000usize), ("a", 100), ("c", 9000)] {
        std::fs::write(root.join(name), vec![b'z'; size]).expect("write");
    }
    let out = sb
        .cmd()
        .args([
            "frag",
            "--per-file",
            "--format",
            "csv",
            "--sort",
            "size",
            "--threads",
            "1",
        ])
        .arg(&root)
        .output()
        .expect("frag");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rows: Vec<&str> = text.lines().skip(1).take(3).collect();
    let sizes: Vec<&str> = rows
        .iter()
        .map(|r| r.split(',').nth(1).expect("size"))
        .collect();
    assert_eq!(sizes, vec!["9000", "3000", "100"], "{text}");
    assert!(text.contains("metric,value"), "{text}");
    // --top limits the sorted list.
    let doc = frag_json(
        &sb,
        &[
            "--per-file",
            "--format",
            "json",
            "--sort",
            "path",
            "--top",
            "2",
        ],
        &root,
    );
    let names: Vec<String> = doc["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            f["path"]
                .as_str()
                .expect("path")
                .rsplit('/')
                .next()
                .expect("name")
                .to_string()
        })
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    // Streamed per-file JSON together with a free-space report stays one valid document.
    if crate::support::have_root() {
        let doc = frag_json(
            &sb,
            &[
                "--per-file",
                "--format",
                "json",
                "--free",
                sb.path().to_str().expect("utf8"),
            ],
            &root,
        );
        assert_eq!(doc["files"].as_array().expect("files").len(), 3);
        assert_eq!(doc["summary"]["files"].as_u64(), Some(3));
        assert!(doc["free_space"].is_object(), "{doc}");
    }
    // Table output names the metrics.
    let out = sb.cmd().args(["frag"]).arg(&root).output().expect("frag");
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "fragmentation factor",
        "layout score",
        "internal fragmentation",
        "inter-file locality",
    ] {
        assert!(text.contains(want), "{want} missing: {text}");
    }
    // Bad input: exit code 2 and a message naming the path.
    let out = sb
        .cmd()
        .args(["frag", "/nonexistent/fsgauge"])
        .output()
        .expect("frag");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/fsgauge"));
    let out = sb
        .cmd()
        .args(["frag", "--threads", "0"])
        .arg(&root)
        .output()
        .expect("frag");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn files_vanishing_during_the_scan_are_counted_not_fatal() {
    let sb = Sandbox::new();
    let root = sb.path().join("churn");
    for d in 0..4 {
        std::fs::create_dir_all(root.join(format!("d{d}"))).expect("mkdir");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let root = root.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let d = root.join(format!("d{}", i % 4));
                let p = d.join(format!("f{}", i % 500));
                if i % 3 == 0 {
                    let _ = std::fs::remove_file(&p);
                } else {
                    let _ = std::fs::write(&p, b"churn");
                }
                if i % 97 == 0 {
                    let sub = d.join("sub");
                    let _ = std::fs::create_dir(&sub);
                    let _ = std::fs::write(sub.join("x"), b"x");
                    let _ = std::fs::remove_file(sub.join("x"));
                    let _ = std::fs::remove_dir(&sub);
                }
                i += 1;
            }
        })
    };
    for _ in 0..15 {
        let doc = frag_json(&sb, &["--format", "json", "--threads", "2"], &root);
        let sk = &doc["summary"]["skipped"];
        assert_eq!(
            sk["errors"].as_u64(),
            Some(0),
            "vanishing files are not errors: {sk}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().expect("churn thread");
}
