//! The aged-image cache and snapshots (needs root, loop devices and mkfs.ext4; skips with a
//! reason otherwise, fails under CI): a plan with `[age] keep_image = true`, 3 repetitions
//! and 2 workloads ages once and every run starts from a state of the same digest; a second
//! run of the plan starts every run from the cache; another seed misses it; `testbed images`
//! lists the entries and `--prune KEY` removes that one only; a persistent testbed's snapshot
//! brings back a file changed after it; bad input exits 2 and leaves nothing behind.

use crate::support::{assert_refused, have_fs, Sandbox};
use serde_json::Value;

const PLAN: &str = r#"name = "kept"
reps = 3
seed = 7

[[testbed]]
label = "ext4"
fs = "ext4"
fs_size = "256M"

[[workload]]
kind = "tree"
dirs = 2
files = 4
file_size = "64K"

[[workload]]
kind = "create"
files = 20

[age]
mode = "fill"
usage = [40.0]
dist = "fixed:256K"
keep_image = true
"#;

/// Runs `plan` with its results in `out`; the results' `testbed.aged_image` records.
fn run_plan(sb: &Sandbox, plan: &str, out: &str) -> Vec<Value> {
    let p = sb.path().join(format!("{out}.toml"));
    std::fs::write(&p, plan).unwrap();
    let dir = sb.path().join(out);
    let o = sb
        .cmd()
        .args(["run", p.to_str().unwrap(), "--quiet", "--workdir"])
        .arg(sb.workdir())
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_slice::<Value>(&std::fs::read(&p).unwrap()).unwrap())
        .filter(|d| d["testbed"].is_object())
        .map(|d| {
            crate::support::assert_schema(&d);
            d["testbed"]["aged_image"].clone()
        })
        .collect()
}

fn count(starts: &[Value], from: &str) -> usize {
    starts.iter().filter(|s| s["from"] == from).count()
}

fn images_json(sb: &Sandbox) -> Value {
    let o = sb
        .cmd()
        .args(["testbed", "images", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    crate::support::json_of(&o)
}

#[test]
fn a_plan_ages_once_and_every_run_starts_from_the_same_state() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let first = run_plan(&sb, PLAN, "first");
    assert_eq!(first.len(), 6, "3 repetitions of 2 workloads: {first:#?}");
    assert_eq!(count(&first, "aged"), 1, "aged once: {first:#?}");
    assert_eq!(count(&first, "image"), 5, "{first:#?}");
    let key = first[0]["key"].as_str().unwrap().to_string();
    let digest = first[0]["digest"].as_str().unwrap().to_string();
    assert!(
        digest.starts_with("blake3:") && digest.len() == 71,
        "{digest}"
    );
    for s in &first {
        assert_eq!(s["key"], key.as_str());
        assert_eq!(
            s["digest"],
            digest.as_str(),
            "the starting states differ: {first:#?}"
        );
    }

    // Again: every run starts from the cache, in the same state.
    let second = run_plan(&sb, PLAN, "second");
    assert_eq!(count(&second, "image"), 6, "{second:#?}");
    assert!(second.iter().all(|s| s["digest"] == digest.as_str()));

    // Another seed is another aging.
    let other = run_plan(&sb, &PLAN.replace("seed = 7", "seed = 8"), "other");
    assert_eq!(count(&other, "aged"), 1, "{other:#?}");
    let other_key = other[0]["key"].as_str().unwrap().to_string();
    assert_ne!(other_key, key);

    let listed = images_json(&sb);
    let keys: Vec<&str> = listed["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{listed:#}");
    assert!(keys.contains(&key.as_str()) && keys.contains(&other_key.as_str()));
    assert_eq!(listed["images"][0]["name"], "kept");
    assert_eq!(listed["images"][0]["fs"], "ext4");

    let o = sb
        .cmd()
        .args(["testbed", "images", "--prune", &key])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("removed image {key}")));
    let left = images_json(&sb);
    let left: Vec<&Value> = left["images"].as_array().unwrap().iter().collect();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["key"], other_key.as_str());
    let cache = sb.state().join("images");
    assert!(!cache.join(format!("{key}.img")).exists());
    assert!(cache.join(format!("{other_key}.img")).exists());
    sb.assert_clean();
}

/// `fsgauge age --keep-image` says which happened: aged and kept, then from the image.
#[test]
fn age_keep_image_says_aged_then_from_image() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let age = |reps: &str| {
        let o = sb
            .bench(&[
                "age",
                "--fs",
                "ext4",
                "--fs-size",
                "256M",
                "--usage",
                "30",
                "--seed",
                "3",
                "--reps",
                reps,
                "--keep-image",
                "aged30",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let first = age("2");
    assert!(first.contains("rep 0: aged in "), "{first}");
    assert!(first.contains("rep 1: from image "), "{first}");
    let again = age("1");
    assert!(again.contains("rep 0: from image "), "{again}");
    sb.assert_clean();
}

/// The cache's limit is checked before anything is aged: refused, nothing made.
#[test]
fn a_cache_without_room_is_refused_before_aging() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let o = sb
        .bench(&[
            "age",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--usage",
            "30",
            "--seed",
            "3",
            "--keep-image",
            "x",
        ])
        .env("FSGAUGE_IMAGE_CACHE_MAX", "1M")
        .output()
        .unwrap();
    assert_refused(
        &o,
        "cache limit",
        &[
            "FSGAUGE_IMAGE_CACHE_MAX",
            "may hold 1.00 MiB",
            "up to 256.00 MiB",
        ],
    );
    assert!(!sb.out().exists());
    assert!(!sb.state().join("images").join("x.json").exists());
    sb.assert_clean();
}

#[test]
fn a_snapshot_brings_back_a_file_changed_after_it() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let tb = |args: &[&str]| {
        let o = sb.cmd().arg("testbed").args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let w = sb.workdir();
    let (code, text) = tb(&[
        "create",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--name",
        "snapped",
        "--workdir",
        w.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    let file = w.join("snapped/mnt/f");
    std::fs::write(&file, "before").unwrap();
    let (code, text) = tb(&["snapshot", "snapped", "--as", "s1"]);
    assert_eq!(code, Some(0), "{text}");
    std::fs::write(&file, "after, longer").unwrap();
    std::fs::write(w.join("snapped/mnt/new"), "new").unwrap();
    let (code, text) = tb(&["restore", "snapped", "s1"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "before");
    assert!(!w.join("snapped/mnt/new").exists());
    // Listed with the cache.
    let (_, text) = tb(&["images"]);
    assert!(text.contains("snapshot s1 of testbed snapped"), "{text}");

    // An unknown snapshot: exit 2, naming the ones there are; the testbed is untouched.
    let (code, text) = tb(&["restore", "snapped", "nope"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no snapshot \"nope\"") && text.contains("s1"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "before");

    let (code, text) = tb(&["destroy", "snapped"]);
    assert_eq!(code, Some(0), "{text}");
    sb.assert_clean();
}

#[test]
fn snapshots_of_what_is_not_a_persistent_testbed_are_refused() {
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let o = sb
        .cmd()
        .args(["testbed", "snapshot", "nosuch"])
        .output()
        .unwrap();
    assert_refused(&o, "unknown testbed", &["no testbed named \"nosuch\""]);
    let o = sb
        .cmd()
        .args(["testbed", "restore", "../x"])
        .output()
        .unwrap();
    assert_refused(&o, "bad name", &["not a testbed name"]);
    // A run's testbed (owned by a process, here one that is alive: init) is not persistent.
    let ledger = sb.state().join("ledger");
    std::fs::create_dir_all(&ledger).unwrap();
    let entry = ledger.join("running.json");
    std::fs::write(
        &entry,
        r#"{"name": "running", "owner_pid": 1, "owner_start": 0, "created_at": "", "resources": []}"#,
    )
    .unwrap();
    let o = sb
        .cmd()
        .args(["testbed", "snapshot", "running"])
        .output()
        .unwrap();
    assert_refused(&o, "a run's testbed", &["\"running\" is not persistent"]);
    let made: Vec<_> = std::fs::read_dir(&ledger).unwrap().collect();
    assert_eq!(made.len(), 1, "the refusal made a ledger entry: {made:?}");
    std::fs::remove_file(&entry).unwrap();
    sb.assert_clean();
}

/// Killed (SIGKILL) while the aged image is written: `testbed cleanup` removes the partial
/// image, the testbed and its ledger entries; no entry is in the cache.
#[test]
fn a_run_killed_while_keeping_its_image_leaves_nothing_cleanup_cannot_remove() {
    use std::io::BufRead;
    if !have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let mut cmd = sb.bench(&[
        "age",
        "--fs",
        "ext4",
        "--fs-size",
        "256M",
        "--usage",
        "20",
        "--seed",
        "5",
        "--keep-image",
        "killed",
    ]);
    let mut child = cmd
        .env("FSGAUGE_TEST_STOP_AT", "keep-image")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line == "fsgauge: test stop at keep-image" {
            break;
        }
    }
    assert!(
        seen.contains("test stop at keep-image"),
        "never stopped: {seen}"
    );
    let part = std::fs::read_dir(sb.state().join("images"))
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().contains(".img.part-"));
    assert!(part, "the partial image is being written");
    child.kill().unwrap();
    child.wait().unwrap();
    let o = sb.cmd().args(["testbed", "cleanup"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let left: Vec<_> = std::fs::read_dir(sb.state().join("images"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
    sb.assert_clean();
}

/// On an emulated disk the aged state is read through the disk's server (its bytes are in
/// the server's memory), and a run from the image serves it as an overlay: the same digest.
#[test]
fn an_emulated_disk_keeps_and_starts_from_the_same_state() {
    if !have_fs("ext4") || !crate::support::have_fuse() {
        return;
    }
    let sb = Sandbox::new();
    let o = sb
        .bench(&[
            "age",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--device-model",
            "ram",
            "--usage",
            "30",
            "--seed",
            "2",
            "--reps",
            "2",
            "--keep-image",
            "emu",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let starts: Vec<_> = sb
        .results()
        .into_iter()
        .map(|r| r.testbed.aged_image.expect("the cache was used"))
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(
        (starts[0].from.as_str(), starts[1].from.as_str()),
        ("aged", "image-overlay")
    );
    assert_eq!(starts[0].digest, starts[1].digest);
    sb.assert_clean();
}
