//! The aged-image cache attacked (issue 41, items 1, 3, 4, 5, 10, 12): root must never mount,
//! copy, list, read or delete anything of the cache that root did not make, nor start from an
//! image that changed since it was kept.
//!
//! - In a private mount namespace with a /var/tmp of its own (tmpfs, mode 1777, the shared
//!   state directory), nobody plants `images/` with an ext4 image of its own under a real
//!   key and a copy of a real manifest: `age`, `testbed images` and `--prune` refuse it
//!   (exit 2, naming the directory and its owner); nobody swaps `images` for a link to root's
//!   cache: `--prune` refuses, root's entry stays.
//! - In root's own cache: a manifest linked to /dev/zero, a FIFO manifest and a FIFO image are
//!   reported as damaged at once (no hang, no unbounded read); an image damaged after it was
//!   kept (8 KiB overwritten, truncated, superblock zeroed) is named with its prune command
//!   and the run ages afresh.
//! - Three concurrent keepers of one key all succeed; a start from a kept image on a RAM
//!   testbed (another filesystem) works; flags that do not apply are refused; `testbed
//!   cleanup` says a run directory was already gone.
//!
//! Needs root, loop devices and mkfs.ext4 (skips with a reason otherwise; fails under CI).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{assert_refused, have_fs, have_root, run_within, Sandbox};

const NOBODY: u32 = 65534;
const AGE: &[&str] = &[
    "age",
    "--fs",
    "ext4",
    "--fs-size",
    "64M",
    "--usage",
    "50",
    "--mode",
    "fill",
    "--seed",
    "7",
    "--keep-image",
    "cacheA",
    "--quiet",
];

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs the keeping aging once more with results in `out`: the run's output and its
/// `testbed.aged_image` record (Null when it made no result).
fn age(sb: &Sandbox, out: &str, extra: &[&str]) -> (Output, Value) {
    let dir = sb.path().join(out);
    let mut c = sb.cmd();
    c.args(AGE).args(extra).arg("--out").arg(&dir);
    let o = run_within(c, 120, out);
    let rec = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_slice::<Value>(&std::fs::read(p).unwrap()).unwrap())
        .map(|d| d["testbed"]["aged_image"].clone())
        .next()
        .unwrap_or(Value::Null);
    (o, rec)
}

/// Ages and keeps once; the entry's key and the image's path.
fn kept(sb: &Sandbox) -> (String, PathBuf) {
    let (o, rec) = age(sb, "first", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(rec["from"], "aged", "{rec}");
    let key = rec["key"].as_str().unwrap().to_string();
    let img = sb.state().join("images").join(format!("{key}.img"));
    assert!(img.exists(), "{}", img.display());
    (key, img)
}

fn ready() -> bool {
    have_root() && have_fs("ext4")
}

#[test]
fn a_damaged_kept_image_is_never_started_from() {
    if !ready() {
        return;
    }
    let sb = Sandbox::new();
    let (key, img) = kept(&sb);
    let good = std::fs::read(&img).unwrap();
    let (o, rec) = age(&sb, "again", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        rec["from"], "image",
        "an intact entry is started from: {rec}"
    );
    let kept_digest = rec["digest"].clone();
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 3] = [
        ("8 KiB overwritten", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.write_all_at(&[0xa5; 8192], 300 * 4096).unwrap();
        }),
        ("truncated", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(32 << 20).unwrap();
        }),
        ("superblock zeroed", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.write_all_at(&[0; 1024], 1024).unwrap();
        }),
    ];
    for (i, (what, damage)) in damages.iter().enumerate() {
        std::fs::write(&img, &good).unwrap();
        damage(&img);
        let (o, rec) = age(&sb, &format!("damaged-{i}"), &[]);
        assert!(o.status.success(), "{what}: {}", err(&o));
        assert_eq!(
            rec["from"], "aged",
            "{what}: started from a damaged image: {rec}"
        );
        assert_ne!(rec["digest"], kept_digest, "{what}: {rec}");
        let e = err(&o);
        assert!(
            e.contains("damaged") && e.contains(&format!("testbed images --prune {key}")),
            "{what}: {e}"
        );
    }
    sb.assert_clean();
}

/// Files of the cache that are no files: each reported damaged at once, none read or waited
/// on; a run with a FIFO image ages afresh.
#[test]
fn fifo_and_device_entries_are_refused_without_hanging() {
    if !ready() {
        return;
    }
    let sb = Sandbox::new();
    let (key, img) = kept(&sb);
    let images = img.parent().unwrap().to_path_buf();
    let mode = nix::sys::stat::Mode::from_bits_truncate(0o600);
    std::os::unix::fs::symlink("/dev/zero", images.join("aaaaaaaaaaaaaaaa.json")).unwrap();
    std::fs::write(images.join("aaaaaaaaaaaaaaaa.img"), b"").unwrap();
    nix::unistd::mkfifo(&images.join("bbbbbbbbbbbbbbbb.json"), mode).unwrap();
    std::fs::write(images.join("bbbbbbbbbbbbbbbb.img"), b"").unwrap();
    let mut c = sb.cmd();
    c.args(["testbed", "images"]);
    let o = run_within(c, 60, "testbed images");
    assert!(o.status.success(), "{}", err(&o));
    let e = err(&o);
    for k in ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"] {
        assert!(e.contains(&format!("--prune {k}")), "{e}");
    }
    assert!(String::from_utf8_lossy(&o.stdout).contains(&key));
    // The image a FIFO: the run neither hangs nor starts from it.
    std::fs::remove_file(&img).unwrap();
    nix::unistd::mkfifo(&img, mode).unwrap();
    let (o, rec) = age(&sb, "fifo", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(rec["from"], "aged", "{rec}");
    assert!(err(&o).contains("a FIFO"), "{}", err(&o));
    for k in ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"] {
        let mut c = sb.cmd();
        c.args(["testbed", "images", "--prune", k]);
        let o = run_within(c, 60, "prune");
        assert!(o.status.success(), "{}", err(&o));
        assert!(!images.join(format!("{k}.json")).exists());
    }
    sb.assert_clean();
}

/// Runs `cmd` (a shell command line) as root in a private mount namespace whose /var/tmp is
/// a fresh tmpfs of mode 1777 where nobody first ran `plant`; FSGAUGE_STATE_DIR=/var/tmp.
fn in_shared_var_tmp(plant: &str, cmd: &str) -> Output {
    let script = format!(
        "set -e; mount -t tmpfs -o mode=1777 fsgauge-test /var/tmp; \
         setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups sh -c '{plant}'; \
         set +e; {cmd}"
    );
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("FSGAUGE_STATE_DIR", "/var/tmp");
    run_within(c, 120, cmd)
}

#[test]
fn a_cache_planted_in_a_shared_state_dir_is_refused() {
    if !ready() || !crate::support::have_program("unshare") {
        return;
    }
    // The sandbox must be outside /var/tmp, which the namespace covers, and passable by nobody.
    let t = tempfile::Builder::new()
        .prefix("fsgauge-test-cache-")
        .tempdir_in("/tmp")
        .unwrap();
    let sb = Sandbox::new();
    let (key, img) = kept(&sb);
    let manifest = t.path().join("manifest.json");
    std::fs::copy(img.with_extension("json"), &manifest).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [t.path(), manifest.as_path()] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let exe = crate::support::exe_outside_var_tmp(t.path());
    let plant = format!(
        "mkdir /var/tmp/images && truncate -s 64M /var/tmp/images/{key}.img && \
         mkfs.ext4 -q -L PWNED /var/tmp/images/{key}.img && \
         cp {m} /var/tmp/images/{key}.json && ln -s /dev/zero /var/tmp/images/aaaaaaaaaaaaaaaa.json && \
         mkfifo /var/tmp/images/bbbbbbbbbbbbbbbb.json",
        m = manifest.display()
    );
    let out = t.path().join("out");
    for cmd in [
        format!("{exe} {} --out {}", AGE.join(" "), out.display()),
        format!(
            "{exe} {} --image-start overlay --out {}",
            AGE.join(" "),
            out.display()
        ),
        format!("{exe} testbed images"),
        format!("{exe} testbed images --prune {key}"),
    ] {
        let o = in_shared_var_tmp(&plant, &cmd);
        assert_refused(&o, &cmd, &["/var/tmp/images", "uid 65534"]);
    }
    assert!(!out.exists(), "a result was written");
    // `images` swapped for nobody's link to root's cache: pruning through it is refused.
    let root_images = img.parent().unwrap();
    let plant = format!("ln -s {} /var/tmp/images", root_images.display());
    let cmd = format!("{exe} testbed images --prune {key}");
    let o = in_shared_var_tmp(&plant, &cmd);
    assert_refused(&o, &cmd, &["/var/tmp/images"]);
    assert!(
        img.exists(),
        "root's entry was deleted through nobody's link"
    );
    assert!(img.with_extension("json").exists());
}

#[test]
fn concurrent_keepers_and_a_ram_testbed_all_succeed() {
    if !ready() {
        return;
    }
    let sb = Sandbox::new();
    let kids: Vec<_> = (0..3)
        .map(|i| {
            let mut c = sb.cmd();
            c.args(AGE)
                .arg("--out")
                .arg(sb.path().join(format!("race-{i}")));
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        let e = err(&o);
        assert!(o.status.success(), "{e}");
        assert!(
            !e.contains("File exists") && !e.contains("no longer leads"),
            "{e}"
        );
    }
    let (o, rec) = age(&sb, "ram", &["--backing", "ram"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(rec["from"], "image", "{rec}");
    let left: Vec<_> = std::fs::read_dir(sb.state().join("images"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("part"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    sb.assert_clean();
}

#[test]
fn flags_that_do_not_apply_are_refused_and_cleanup_says_what_was_gone() {
    if !ready() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb.path().join("out");
    for (args, needle) in [
        (
            vec![
                "bench",
                "tree",
                "--fs",
                "ext4",
                "--fs-size",
                "64M",
                "--dirs",
                "1",
                "--files",
                "1",
                "--file-size",
                "4K",
                "--destroy-data",
            ],
            "--destroy-data",
        ),
        (
            vec![
                "age",
                "--fs",
                "ext4",
                "--fs-size",
                "64M",
                "--usage",
                "20",
                "--image-start",
                "overlay",
            ],
            "--keep-image",
        ),
    ] {
        let o = sb
            .cmd()
            .args(&args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_refused(&o, &args.join(" "), &[needle]);
        assert!(!out.exists());
    }
    // A run directory recorded by a run that died, already gone.
    let ledger = sb.state().join("ledger");
    std::fs::create_dir_all(&ledger).unwrap();
    let entry = serde_json::json!({
        "name": "bench-gone", "owner_pid": 4_000_000_000u64, "owner_start": 1,
        "created_at": "2026-01-01T00:00:00Z", "details": null,
        "resources": [{"kind": "rundir", "parent": sb.path(), "name": "fsgauge-gone", "ino": 12345}],
    });
    std::fs::write(ledger.join("bench-gone.json"), entry.to_string()).unwrap();
    let o = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", err(&o));
    assert!(text.contains("already gone"), "{text}");
    assert!(!text.contains("removed bench-gone"), "{text}");
}
