//! Running plans on real testbeds: a study killed with SIGKILL halfway and run again with
//! `--resume` completes without re-running finished runs and loses no result; one filesystem
//! per testbed with `fresh = "per-testbed"`; the default `run` is the quick preset.
//! Needs root, loop devices and mkfs.ext4.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::Sandbox;

const PLAN: &str = r#"name = "resume"
reps = 3

[[testbed]]
label = "plain"
fs = "ext4"
size = "256M"

[[testbed]]
label = "nodelalloc"
fs = "ext4"
size = "256M"
mount = "nodelalloc"

[[workload]]
kind = "tree"
dirs = 4
files = 16
file_size = "256K"
"#;

fn results(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.starts_with('.') {
                out.insert(name, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

#[test]
fn a_study_killed_halfway_completes_with_resume_without_rerunning() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let mut child = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while results(&sb.out()).len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no results after 2 minutes"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: no chance to tear down or finish a result
    child.wait().unwrap();
    let before = results(&sb.out());
    assert!((2..6).contains(&before.len()), "{} results", before.len());
    // What the killed run left (a mounted testbed) is the ledger's to clean, as a user would.
    let c = sb
        .cmd()
        .args(["testbed", "cleanup", "--all"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));

    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--resume"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("done before").count(), before.len(), "{err}");
    let after = results(&sb.out());
    assert_eq!(after.len(), 6, "2 testbeds x 3 reps: {:?}", after.keys());
    for (name, bytes) in &before {
        assert_eq!(after.get(name), Some(bytes), "{name} changed or vanished");
    }
    let mut cells: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut hashes = std::collections::BTreeSet::new();
    for bytes in after.values() {
        let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        *cells
            .entry((
                v["testbed"]["label"].as_str().unwrap().into(),
                v["rep"].as_u64().unwrap(),
            ))
            .or_default() += 1;
        hashes.insert(v["spec_hash"].as_str().unwrap().to_string());
    }
    assert_eq!(hashes.len(), 6);
    assert!(cells.values().all(|&n| n == 1), "{cells:?}");
    // Run again: everything is found, nothing is made.
    let again = sb
        .bench(&["run", plan.to_str().unwrap(), "--resume", "--quiet"])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(results(&sb.out()).len(), 6);
    sb.assert_clean();
}

#[test]
fn per_testbed_plans_share_one_filesystem() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        PLAN.replace("reps = 3", "reps = 2\nfresh = \"per-testbed\"")
            .replace("[[testbed]]\nlabel = \"nodelalloc\"\nfs = \"ext4\"\nsize = \"256M\"\nmount = \"nodelalloc\"\n", ""),
    )
    .unwrap();
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = crate::support::json_of(&out);
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["testbed"]["device"], runs[1]["testbed"]["device"]);
    assert_eq!(
        runs[0]["testbed"]["path"], runs[1]["testbed"]["path"],
        "one filesystem for both runs"
    );
    assert_ne!(runs[0]["spec_hash"], runs[1]["spec_hash"]);
    sb.assert_clean();
}

#[test]
fn auto_reps_stop_when_the_run_time_is_steady_or_at_the_cap() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("plan.toml");
    std::fs::write(
        &plan,
        PLAN.replace("reps = 3", "reps = \"auto\"\ncv_target = 0.5\nmax_reps = 4"),
    )
    .unwrap();
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = crate::support::json_of(&out);
    let runs = v.as_array().unwrap();
    // At least 3 per testbed, at most the cap of 4.
    for label in ["plain", "nodelalloc"] {
        let n = runs
            .iter()
            .filter(|r| r["testbed"]["label"] == label)
            .count();
        assert!((3..=4).contains(&n), "{label}: {n} runs");
    }
    sb.assert_clean();
}
