//! Starts from a kept aged image served as a copy-on-write overlay (needs root, loop devices,
//! /dev/fuse and mkfs.ext4; skips with a reason otherwise, fails under CI): on an emulated
//! disk, and on a plain testbed with `--image-start overlay`, the run stopped at its mount has
//! no image file of its own, its tree holds the files the aging left, a file written then
//! reaches the server, and afterwards the kept image's digest is still the manifest's. An
//! overlay where it cannot apply is refused (exit 2) with nothing left behind.

use std::io::BufRead;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::support::{assert_refused, have_fs, have_fuse, Sandbox};
use serde_json::Value;

/// `age` on a 256M ext4 at 30%, seed 4, kept as `name`, with `extra` flags.
fn age_args<'a>(name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "age",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--usage",
        "30",
        "--seed",
        "4",
        "--keep-image",
        name,
    ];
    a.extend_from_slice(extra);
    a
}

/// The results in the sandbox's result directory, as JSON.
fn results(sb: &Sandbox) -> Vec<Value> {
    std::fs::read_dir(sb.out())
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect()
}

/// The digest the image cache takes of an image: BLAKE3 of every non-zero 4 KiB block with
/// its offset (little-endian u64).
fn digest_of(image: &Path) -> String {
    let f = std::fs::File::open(image).unwrap();
    let len = f.metadata().unwrap().len();
    let mut hash = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], off).unwrap();
        for (i, block) in buf[..n].chunks(4096).enumerate() {
            if block.iter().any(|&b| b != 0) {
                hash.update(&(off + (i * 4096) as u64).to_le_bytes());
                hash.update(block);
            }
        }
        off += n as u64;
    }
    format!("blake3:{}", hash.finalize().to_hex())
}

/// The regular files under `dir` and the sum of their sizes.
fn files_and_bytes(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        if md.is_dir() {
            let (f, b) = files_and_bytes(&e.path());
            files += f;
            bytes += b;
        } else if md.is_file() {
            files += 1;
            bytes += md.len();
        }
    }
    (files, bytes)
}

/// The testbed directories under the work directory (at most one level of private
/// directory between): those holding a `mnt`.
fn testbed_homes(work: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(work).unwrap().filter_map(|e| e.ok()) {
        let p = e.path();
        if p.join("mnt").is_dir() {
            out.push(p);
        } else if p.is_dir() {
            out.extend(testbed_homes(&p));
        }
    }
    out
}

/// What the test saw of a run stopped at its mount.
struct Seen {
    /// The testbed's directory had an image file.
    had_image: bool,
    /// Files and bytes of the aged tree.
    tree: (u64, u64),
}

/// Runs `age` with `args` stopped (SIGSTOP) right after its testbed is mounted: looks at the
/// testbed, writes and fsyncs a file on it, and lets the run finish.
fn run_stopped_at_mount(sb: &Sandbox, args: &[&str]) -> Seen {
    let mut child = sb
        .bench(args)
        .env("FSGAUGE_TEST_STOP_AT", "mount")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line == "fsgauge: test stop at mount" {
            break;
        }
    }
    assert!(said.contains("test stop at mount"), "never stopped: {said}");
    let homes = testbed_homes(&sb.workdir());
    assert_eq!(homes.len(), 1, "one testbed: {homes:?}");
    let home = &homes[0];
    let seen = Seen {
        had_image: home.join("fs.img").exists(),
        tree: files_and_bytes(&home.join("mnt/fsgauge-age")),
    };
    // A write the server keeps: 3 MiB, made durable.
    let probe = home.join("mnt/overlay-probe");
    let f = std::fs::File::create(&probe).unwrap();
    f.write_all_at(&vec![0x5au8; 3 << 20], 0).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{said}{}", rest.join("\n"));
    seen
}

/// Ages and keeps (`first` flags), then starts again from the image as an overlay (`then`
/// flags), stopped at its mount; checks what the issue asks of an overlay start.
fn ages_then_starts_as_an_overlay(name: &str, first: &[&str], then: &[&str]) {
    let sb = Sandbox::new();
    let o = sb.bench(&age_args(name, first)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let aged = results(&sb).pop().unwrap();
    assert_eq!(aged["testbed"]["aged_image"]["from"], "aged");
    let key = aged["testbed"]["aged_image"]["key"].as_str().unwrap();
    let extra = &aged["phases"].as_array().unwrap().last().unwrap()["extra"];
    let aged_tree = (
        extra["files"].as_f64().unwrap() as u64,
        extra["bytes"].as_f64().unwrap() as u64,
    );
    let cache = sb.state().join("images");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(cache.join(format!("{key}.json"))).unwrap()).unwrap();
    let base = cache.join(format!("{key}.img"));
    assert_eq!(digest_of(&base), manifest["digest"].as_str().unwrap());

    let seen = run_stopped_at_mount(&sb, &age_args(name, then));
    assert!(
        !seen.had_image,
        "an overlay start has no image file of its own"
    );
    assert!(aged_tree.0 > 0, "{extra}");
    assert_eq!(seen.tree, aged_tree, "the tree is the aged one");
    let started: Vec<Value> = results(&sb)
        .into_iter()
        .filter(|r| r["testbed"]["aged_image"]["from"] != "aged")
        .collect();
    assert_eq!(started.len(), 1);
    let start = &started[0];
    crate::support::assert_schema(start);
    assert_eq!(start["testbed"]["aged_image"]["from"], "image-overlay");
    assert_eq!(start["testbed"]["aged_image"]["key"], key);
    assert_eq!(start["testbed"]["aged_image"]["digest"], manifest["digest"]);
    assert_eq!(start["testbed"]["device_model"]["profile"], "ram");
    // The run wrote to its testbed; the kept image is as it was kept.
    assert_eq!(
        digest_of(&base),
        manifest["digest"].as_str().unwrap(),
        "the kept image changed"
    );
    sb.assert_clean();
}

#[test]
fn an_emulated_disk_starts_from_its_kept_image_without_a_copy() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    let model = ["--device-model", "ram", "--quiet"];
    ages_then_starts_as_an_overlay("emu-overlay", &model, &model);
}

#[test]
fn a_plain_testbed_starts_as_an_overlay_when_asked() {
    if !have_fs("ext4") || !have_fuse() {
        return;
    }
    ages_then_starts_as_an_overlay(
        "plain-overlay",
        &["--quiet"],
        &["--image-start", "overlay", "--quiet"],
    );
}

/// A plain testbed starts from its own copy by default: it has an image file.
#[test]
fn a_plain_testbed_starts_from_a_copy_by_default() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let o = sb
        .bench(&age_args("plain-copy", &["--quiet"]))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = run_stopped_at_mount(&sb, &age_args("plain-copy", &["--quiet"]));
    assert!(seen.had_image, "a copy start has its image file");
    let froms: Vec<Value> = results(&sb)
        .iter()
        .map(|r| r["testbed"]["aged_image"]["from"].clone())
        .collect();
    assert!(froms.contains(&"image".into()), "{froms:?}");

    // An overlay whose server would keep its bytes in the kept image is refused, before
    // anything is made.
    let before = results(&sb).len();
    let o = sb
        .bench(&age_args("plain-copy", &["--image-start", "overlay"]))
        .env("FSGAUGE_DEVICE_STORE", "file")
        .output()
        .unwrap();
    assert_refused(
        &o,
        "a file store under an overlay",
        &["FSGAUGE_DEVICE_STORE=file", "--image-start copy"],
    );
    assert_eq!(results(&sb).len(), before, "a result was written");
    sb.assert_clean();
}

#[test]
fn an_overlay_start_is_refused_where_it_cannot_apply() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    crate::support::refused(
        &sb,
        &age_args("j", &["--image-start", "overlay", "--journal", "ram:8M"]),
        &[
            "--image-start overlay serves a kept aged image",
            "--journal ram:8M",
            "leave out --image-start overlay",
        ],
    );
    crate::support::refused(
        &sb,
        &age_args("j", &["--image-start", "sideways"]),
        &["sideways"],
    );
}
