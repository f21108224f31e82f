//! The cleanup ledger under abuse: names that are paths, damaged entry files, a bad work
//! directory, a SIGKILLed `--dir` run, forged run-directory entries, and random corruption
//! beside real testbeds. Most tests need nothing special; those that build testbeds need root,
//! loop devices and mkfs.ext4 (they skip with a reason otherwise, and fail under CI).

use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{have_fs, json_of, leaks_under, Sandbox};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// No process has this pid (pid_max is at most 2^22): an entry of a run that died.
const DEAD_PID: u64 = 4_000_000_000;

fn ledger(sb: &Sandbox) -> PathBuf {
    let d = sb.state().join("ledger");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a ledger entry by hand, as a killed run (or a forger) would have left it.
fn write_entry(file: &Path, name: &str, resources: Value) {
    let e = json!({
        "name": name,
        "owner_pid": DEAD_PID,
        "owner_start": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "details": null,
        "resources": resources,
    });
    std::fs::write(file, serde_json::to_vec_pretty(&e).unwrap()).unwrap();
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ledger_files(sb: &Sandbox) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(ledger(sb))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Item 1: `testbed destroy NAME` with a path in NAME reads nothing outside the ledger and
/// removes nothing (before the fix, it removed the image the outside entry listed).
#[test]
fn destroy_refuses_a_path_in_its_name_and_touches_nothing() {
    let sb = Sandbox::new();
    let dir = ledger(&sb);
    let x = sb.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let victim = sb.path().join("victim.img");
    std::fs::write(&victim, b"not yours").unwrap();
    let evil = x.join("evil.json");
    write_entry(&evil, "evil", json!([{ "kind": "image", "path": victim }]));
    // As in the report: climb to / from the ledger, then down to the forged entry.
    let depth = dir.canonicalize().unwrap().components().count() - 1;
    let target = x.canonicalize().unwrap().join("evil");
    let name = format!(
        "{}{}",
        "../".repeat(depth),
        target.to_str().unwrap().trim_start_matches('/')
    );
    for n in [name.as_str(), "../../x/evil", "a/b"] {
        let out = run(sb.cmd().args(["testbed", "destroy", n]));
        assert_eq!(out.status.code(), Some(2), "{n}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("is not a testbed name"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"not yours");
    assert!(evil.exists());
}

/// Item 3: an empty or truncated ledger file is skipped with a warning that names it and says
/// how to remove it; `list` and `cleanup` go on with the rest (before the fix both exited 2).
#[test]
fn damaged_entries_do_not_block_list_or_cleanup() {
    let sb = Sandbox::new();
    let dir = ledger(&sb);
    let leftover = sb.path().join("leftover");
    std::fs::create_dir(&leftover).unwrap();
    write_entry(
        &dir.join("good.json"),
        "good",
        json!([{ "kind": "dir", "path": leftover }]),
    );
    std::fs::write(dir.join("empty.json"), b"").unwrap();
    let whole = std::fs::read(dir.join("good.json")).unwrap();
    std::fs::write(dir.join("torn.json"), &whole[..whole.len() / 2]).unwrap();

    let out = run(sb.cmd().args(["testbed", "list"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("good"), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    for f in ["empty.json", "torn.json"] {
        let rm = format!("rm {}", dir.join(f).display());
        assert!(err.contains(&rm), "no `{rm}` in: {err}");
    }
    let listed = json_of(&run(sb.cmd().args(["testbed", "list", "--json"])));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    let out = run(sb.cmd().args(["testbed", "cleanup"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("removed good"));
    assert!(text(&out.stderr).contains("skipped damaged ledger entry"));
    assert!(!leftover.exists());
    // The damaged files stay for a person to look at.
    assert_eq!(ledger_files(&sb), ["empty.json", "torn.json"]);
}

/// Item 2: a --workdir that is a regular file, or below one (flag or plan), is refused with
/// exit 2 before anything is recorded, and cleanup afterwards has nothing to do.
#[test]
fn a_bad_workdir_is_refused_and_records_nothing() {
    let sb = Sandbox::new();
    let file = sb.path().join("regular-file");
    std::fs::write(&file, b"x").unwrap();
    let tree = [
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
    ];
    for wd in [file.clone(), file.join("below")] {
        let out = run(sb.cmd().args(tree).arg("--workdir").arg(&wd));
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{} is not a directory", file.display())),
            "{err}"
        );
    }
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "[[testbed]]\nfs = \"ext4\"\nsize = \"64M\"\nworkdir = {:?}\n\n[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n",
            file.join("below")
        ),
    )
    .unwrap();
    let out = run(sb.cmd().arg("run").arg(&plan).arg("--out").arg(sb.out()));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not a directory"));
    assert_eq!(ledger_files(&sb), Vec::<String>::new());
    let out = run(sb.cmd().args(["testbed", "cleanup"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("nothing to clean up"));
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// Item 2: an entry such a run left (by an older fsgauge) no longer wedges cleanup: a
/// directory below a regular file, an image that is gone, a loop device of a gone image count
/// as released (before the fix: "removing directory …: Not a directory", exit 2, forever).
#[test]
fn an_entry_for_what_cannot_exist_is_released() {
    let sb = Sandbox::new();
    let file = sb.path().join("regular-file");
    std::fs::write(&file, b"x").unwrap();
    write_entry(
        &ledger(&sb).join("wedged.json"),
        "wedged",
        json!([
            { "kind": "dir", "path": file.join("ext4-1-0") },
            { "kind": "image", "path": file.join("ext4-1-0/fs.img") },
            { "kind": "loop", "image": sb.path().join("gone.img") },
        ]),
    );
    let out = run(sb.cmd().args(["testbed", "cleanup"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("removed wedged"));
    assert_eq!(ledger_files(&sb), Vec::<String>::new());
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// Item 8: a SIGKILLed `--dir` run leaves its `fsgauge-tree-PID-0` directory; it is in the
/// ledger, and `testbed cleanup` removes it (before the fix: "nothing to clean up").
#[test]
fn cleanup_removes_the_run_directory_of_a_killed_dir_run() {
    let sb = Sandbox::new();
    let user_dir = sb.path().join("mine");
    std::fs::create_dir(&user_dir).unwrap();
    std::fs::write(user_dir.join("my-file"), b"keep").unwrap();
    let mut child = sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "4",
            "--files",
            "2000",
            "--file-size",
            "4K",
            "--quiet",
            "--dir",
        ])
        .arg(&user_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_dir = format!("fsgauge-tree-{}-0", child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    // Killed once the workload has started filling its directory.
    let started =
        || std::fs::read_dir(user_dir.join(&run_dir)).is_ok_and(|mut rd| rd.next().is_some());
    while !started() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed"
        );
        assert!(Instant::now() < deadline, "{run_dir} never appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(user_dir.join(&run_dir).exists());
    let listed = json_of(&run(sb.cmd().args(["testbed", "list", "--json"])));
    let res = &listed[0]["resources"][0];
    assert_eq!(res["kind"], "rundir", "{listed}");
    assert_eq!(res["name"], run_dir.as_str());

    let out = run(sb.cmd().args(["testbed", "cleanup"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("removed dir-"),
        "{}",
        text(&out.stdout)
    );
    assert!(!user_dir.join(&run_dir).exists());
    assert_eq!(std::fs::read(user_dir.join("my-file")).unwrap(), b"keep");
    assert_eq!(ledger_files(&sb), Vec::<String>::new());
}

/// A completed `--dir` run leaves neither its directory nor a ledger entry.
#[test]
fn a_finished_dir_run_leaves_no_directory_and_no_entry() {
    let sb = Sandbox::new();
    let user_dir = sb.path().join("mine");
    std::fs::create_dir(&user_dir).unwrap();
    let out = run(sb
        .cmd()
        .args([
            "bench",
            "tree",
            "--dirs",
            "1",
            "--files",
            "3",
            "--file-size",
            "4K",
            "--quiet",
            "--dir",
        ])
        .arg(&user_dir));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_dir(&user_dir).unwrap().count(), 0);
    assert_eq!(ledger_files(&sb), Vec::<String>::new());
}

/// Item 8, safety: forged run-directory entries — a directory not named fsgauge-*, a symlink
/// named like one, one of the right name but another inode, a parent reached through a
/// symlink, a system directory — are refused by cleanup, and nothing is touched.
#[test]
fn forged_run_directory_entries_are_refused_and_touch_nothing() {
    let sb = Sandbox::new();
    let p = sb.path().canonicalize().unwrap().join("p");
    let data = p.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("precious"), b"keep").unwrap();
    let named = p.join("fsgauge-tree-1-0");
    std::fs::create_dir(&named).unwrap();
    std::fs::write(named.join("precious"), b"keep").unwrap();
    symlink(&data, p.join("fsgauge-link")).unwrap();
    symlink(&p, sb.path().join("via-link")).unwrap();
    let ino = |q: &Path| std::fs::symlink_metadata(q).unwrap().ino();
    let forged = [
        json!({ "kind": "rundir", "parent": p, "name": "data", "ino": ino(&data) }),
        json!({ "kind": "rundir", "parent": p, "name": "fsgauge-link", "ino": ino(&data) }),
        json!({ "kind": "rundir", "parent": p, "name": "fsgauge-tree-1-0", "ino": ino(&named) + 1 }),
        json!({ "kind": "rundir", "parent": sb.path().join("via-link"), "name": "fsgauge-tree-1-0", "ino": ino(&named) }),
        json!({ "kind": "rundir", "parent": p, "name": "fsgauge-x/../data", "ino": ino(&data) }),
        // Without an inode only an rmdir could follow, which a non-empty /etc survives.
        json!({ "kind": "rundir", "parent": "/", "name": "etc" }),
    ];
    for (i, r) in forged.iter().enumerate() {
        write_entry(
            &ledger(&sb).join(format!("forged{i}.json")),
            &format!("forged{i}"),
            json!([r]),
        );
    }
    let out = run(sb.cmd().args(["testbed", "cleanup"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("refusing to remove").count(),
        forged.len(),
        "{err}"
    );
    assert!(text(&out.stdout).lines().all(|l| !l.starts_with("removed")));
    assert_eq!(std::fs::read(data.join("precious")).unwrap(), b"keep");
    assert_eq!(std::fs::read(named.join("precious")).unwrap(), b"keep");
    assert!(p.join("fsgauge-link").exists());
    assert!(Path::new("/etc").is_dir());
    assert_eq!(ledger_files(&sb).len(), forged.len());
    // Leave the sandbox's own cleanup nothing to refuse.
    for i in 0..forged.len() {
        std::fs::remove_file(ledger(&sb).join(format!("forged{i}.json"))).unwrap();
    }
}

/// What must hold, with real loop devices: damaged ledger files (seeded random truncation and
/// corruption of real entries' bytes, under names of their own) never keep `testbed cleanup`
/// from removing the intact testbeds; `testbed create` without --name steps past a damaged
/// entry's name. `FSGAUGE_TEST_SEED=N` replays.
#[test]
fn corrupted_ledger_files_never_stop_cleanup_of_real_testbeds() {
    if !have_fs("ext4") {
        return;
    }
    let seed = std::env::var("FSGAUGE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("ledger corruption seed {seed} (replay: FSGAUGE_TEST_SEED={seed})");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sb = Sandbox::new();
    let dir = ledger(&sb);
    // The name `testbed create` would pick first is taken by a damaged file.
    std::fs::write(dir.join("ext4-1.json"), b"").unwrap();
    let mut names = Vec::new();
    let mut mounts = Vec::new();
    for i in 0..3 {
        let mut c = sb.cmd();
        c.args([
            "testbed",
            "create",
            "--json",
            "--fs",
            "ext4",
            "--fs-size",
            "64M",
        ])
        .arg("--workdir")
        .arg(sb.workdir());
        let out = run(&mut c);
        if i == 0 {
            assert!(
                text(&out.stderr).contains("ext4-1.json"),
                "no warning: {}",
                text(&out.stderr)
            );
        }
        let v = json_of(&out);
        names.push(v["name"].as_str().unwrap().to_string());
        mounts.push(v["mountpoint"].as_str().unwrap().to_string());
    }
    assert_eq!(names, ["ext4-2", "ext4-3", "ext4-4"]);
    // Damaged copies of the real entries: truncated, overwritten, emptied, or bytes inserted.
    let mut damaged = vec!["ext4-1.json".to_string()];
    for i in 0..rng.gen_range(2..=6) {
        let src = std::fs::read(dir.join(format!("{}.json", names[rng.gen_range(0..3)]))).unwrap();
        let mut b = src.clone();
        match rng.gen_range(0..4) {
            0 => b.truncate(rng.gen_range(0..src.len())),
            1 => {
                let at = rng.gen_range(0..b.len());
                let n = rng.gen_range(1..=32).min(b.len() - at);
                rng.fill(&mut b[at..at + n]);
            }
            2 => b.clear(),
            _ => b.insert(rng.gen_range(0..b.len()), b'{'),
        }
        let f = format!("junk{i}.json");
        std::fs::write(dir.join(&f), b).unwrap();
        damaged.push(f);
    }
    let out = run(sb.cmd().args(["testbed", "cleanup", "--all"]));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "seed {seed}: {stderr}");
    for n in &names {
        assert!(
            stdout.contains(&format!("removed {n}")),
            "seed {seed}: {stdout}"
        );
    }
    for f in &damaged {
        assert!(
            stderr.contains(&format!("rm {}", dir.join(f).display())),
            "seed {seed}: {f} not named: {stderr}"
        );
    }
    let leaks = leaks_under(sb.path());
    assert!(leaks.is_empty(), "seed {seed}: left behind: {leaks:#?}");
    for m in &mounts {
        assert!(!Path::new(m).exists(), "seed {seed}: {m} left");
    }
    damaged.sort();
    assert_eq!(ledger_files(&sb), damaged, "seed {seed}");
    for f in &damaged {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    sb.assert_clean();
}
