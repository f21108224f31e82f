//! A plan's matrix over a real Slurm job array (`run --on slurm`), `status` and `--resume`:
//! the array gives the same results (spec hashes) and findings as a one-process run of the plan;
//! a cancelled task is resubmitted alone and the finished blocks' files stay untouched; bad
//! input is refused before anything is submitted or made. Needs root, mkfs.ext4 and a Slurm
//! (FSGAUGE_TEST_SLURM=1; scripts/slurm-localhost starts one, .ci/run does it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use crate::support::Sandbox;

/// Two ext4 configurations, three repetitions (three blocks), two questions on noisy figures.
fn plan(name: &str) -> String {
    format!(
        r#"name = "{name}"
reps = 3

[testbed_defaults]
fs = "ext4"
fs_size = "256M"

[[testbed]]
label = "ext4"

[[testbed]]
label = "ext4-journal"
mount_opts = "data=journal"

[[workload]]
kind = "tree"
dirs = 2
files = 40
file_size = "16K"
block = "16K"
fsync = "file"

[[question]]
id = "create-time"
baseline = "ext4"
variant = "ext4-journal"
phase = "create"
metric = "elapsed"

[[question]]
id = "delete-rate"
baseline = "ext4"
variant = "ext4-journal"
phase = "delete"
metric = "ops_per_s"
"#
    )
}

/// Root, mkfs.ext4 and a Slurm to submit to; otherwise skipped (failed under CI).
fn have_slurm() -> bool {
    if !crate::support::have_fs("ext4") {
        return false;
    }
    if std::env::var("FSGAUGE_TEST_SLURM").map_or(true, |v| v.is_empty() || v == "0") {
        return crate::support::skip(
            "needs FSGAUGE_TEST_SLURM=1 and a running Slurm (scripts/slurm-localhost starts one; .ci/run does)",
        );
    }
    true
}

/// The plan written into the sandbox, under a name of its own (the array's job name).
pub(crate) fn write_plan(sb: &Sandbox, name: &str) -> PathBuf {
    let path = sb.path().join(format!("{name}.toml"));
    std::fs::write(&path, plan(name)).unwrap();
    path
}

/// `fsgauge status DIR --json`: block -> (state, results present).
pub(crate) fn status(sb: &Sandbox, dir: &Path) -> BTreeMap<u64, (String, u64)> {
    let out = sb
        .cmd()
        .args(["status", dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["block"].as_u64().unwrap(),
                (
                    b["state"].as_str().unwrap().to_string(),
                    b["done"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Result files of a directory: name -> (modification time, bytes).
pub(crate) fn files(dir: &Path) -> BTreeMap<String, (SystemTime, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".json") && n != "fleet.json"
        })
        .map(|e| {
            let md = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (md.modified().unwrap(), std::fs::read(e.path()).unwrap()),
            )
        })
        .collect()
}

pub(crate) fn results(dir: &Path) -> Vec<fsgauge::results::RunResult> {
    fsgauge::results::load_dir(dir)
        .unwrap()
        .results
        .into_iter()
        .map(|f| f.result)
        .collect()
}

/// The jobs of a plan's array still in Slurm's queue (by its job name).
fn queued(name: &str) -> String {
    let out = Command::new("squeue")
        .args(["-h", "-n", &format!("fsgauge-{name}"), "-o", "%i %T"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The (ratio, low, high) of each question's finding.
fn findings(rs: &[fsgauge::results::RunResult]) -> BTreeMap<String, (f64, f64, f64)> {
    let questions = rs[0].study.as_ref().unwrap().questions.clone();
    questions
        .iter()
        .map(|q| {
            let f = fsgauge::analysis::findings::evaluate(q, rs);
            let r = f.ratio.unwrap_or_else(|| panic!("{}: no ratio", q.id));
            (q.id.clone(), (r.ratio, r.low, r.high))
        })
        .collect()
}

/// A run set as (testbed, rep, spec hash): what two ways of running one plan must share.
pub fn runs(rs: &[fsgauge::results::RunResult]) -> BTreeSet<(String, u32, String)> {
    rs.iter()
        .map(|r| (r.testbed.label.clone(), r.rep, r.spec_hash.clone()))
        .collect()
}

#[test]
fn an_array_of_three_blocks_makes_the_results_and_findings_of_a_one_process_run() {
    if !have_slurm() {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "fleet-same");
    let (local, array) = (sb.path().join("local"), sb.path().join("array"));
    let p = plan.to_str().unwrap();
    let out = sb
        .cmd()
        .args(["run", p, "--quiet", "--out", local.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out, "the one-process run");
    let out = sb
        .cmd()
        .args(["run", p, "--on", "slurm:debug", "--wait", "--quiet"])
        .args(["--out", array.to_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out, "the array");
    assert!(array.join("fleet.sbatch").is_file() && array.join("fleet.json").is_file());
    let (a, b) = (results(&local), results(&array));
    assert_eq!(a.len(), 6);
    assert_eq!(runs(&a), runs(&b), "the same runs, by spec hash");
    // Both answer every question from the same pairs. Whether the two ratios agree within
    // their intervals is a measurement of a busy machine, not a test (no test may fail
    // because the machine is busy): the closing note states it for the quick preset.
    let (fa, fb) = (findings(&a), findings(&b));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (id, &(rb, lb, hb)) in &fb {
        assert!(
            rb > 0.0 && lb > 0.0 && lb <= rb && rb <= hb && hb.is_finite(),
            "{id}: array {rb} [{lb}, {hb}]"
        );
        let (ra, la, ha) = fa[id];
        eprintln!("{id}: one process {ra:.3} [{la:.3}, {ha:.3}], array {rb:.3} [{lb:.3}, {hb:.3}]");
    }
    let st = status(&sb, &array);
    assert!(st.values().all(|(s, n)| s == "done" && *n == 2), "{st:?}");
    sb.assert_clean();
}

/// Waits until no block of the array is pending or running.
fn settle(sb: &Sandbox, dir: &Path) -> BTreeMap<u64, (String, u64)> {
    let t0 = Instant::now();
    loop {
        let st = status(sb, dir);
        if !st.values().any(|(s, _)| s == "pending" || s == "running") {
            return st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(900),
            "the array did not end: {st:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_cancelled_block_is_resubmitted_alone_and_finished_blocks_stay_untouched() {
    if !have_slurm() {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(&sb, "fleet-resume");
    let dir = sb.path().join("array");
    let submit = |more: &[&str]| {
        sb.cmd()
            .args(["run", plan.to_str().unwrap(), "--on", "slurm", "--quiet"])
            .args(["--out", dir.to_str().unwrap()])
            .args(more)
            .output()
            .unwrap()
    };
    // One machine at a time: block 2 waits behind blocks 0 and 1.
    assert_ok(&submit(&["--machines", "1"]), "the submission");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("fleet.json")).unwrap()).unwrap();
    let job = record["jobs"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(record["jobs"][0]["blocks"], serde_json::json!([0, 1, 2]));
    // Every block is queued, running or done: a --resume now would run one twice.
    let again = submit(&["--resume"]);
    assert_ok(&again, "a resume while the array is queued");
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to submit"));
    let out = Command::new("scancel")
        .arg(format!("{job}_2"))
        .output()
        .unwrap();
    assert_ok(&out, "scancel");
    let st = settle(&sb, &dir);
    assert_eq!(st[&2].0, "cancelled", "{st:?}");
    assert_eq!(
        (st[&0].0.as_str(), st[&1].0.as_str()),
        ("done", "done"),
        "{st:?}"
    );
    let before = files(&dir);
    assert_eq!(before.len(), 4, "blocks 0 and 1: two runs each");
    let text = sb
        .cmd()
        .args(["status", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2 done, 1 cancelled") && text.contains("--on slurm --resume --out"),
        "{text}"
    );

    assert_ok(&submit(&["--resume", "--wait"]), "the resubmission");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("fleet.json")).unwrap()).unwrap();
    assert_eq!(
        record["jobs"][1]["blocks"],
        serde_json::json!([2]),
        "only the cancelled block"
    );
    let st = status(&sb, &dir);
    assert!(st.values().all(|(s, n)| s == "done" && *n == 2), "{st:?}");
    let after = files(&dir);
    assert_eq!(after.len(), 6);
    for (name, was) in &before {
        assert_eq!(
            after.get(name),
            Some(was),
            "{name} was rewritten or removed"
        );
    }
    let reps: BTreeSet<u32> = results(&dir).iter().map(|r| r.rep).collect();
    assert_eq!(reps, BTreeSet::from([0, 1, 2]));
    // Nothing left to do: a further --resume submits nothing.
    let out = submit(&["--resume"]);
    assert_ok(&out, "a resume of a finished run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to submit"));
    sb.assert_clean();
}

/// The arguments after `run`, an environment variable, and what the refusal must say.
type Case<'a> = (Vec<&'a str>, Option<(&'a str, &'a str)>, &'a str);

#[test]
fn bad_input_is_refused_before_anything_is_submitted_or_made() {
    if !have_slurm() {
        return;
    }
    let sb = Sandbox::new();
    let name = "fleet-refused";
    let plan = write_plan(&sb, name);
    let p = plan.to_str().unwrap();
    let broken = sb.path().join("broken.toml");
    std::fs::write(&broken, plan_text_with_error(name)).unwrap();
    let dir = sb.path().join("never");
    let cases: Vec<Case> = vec![
        (
            vec![p, "--on", "slurm:no-such-partition"],
            None,
            "no partition",
        ),
        (
            vec![broken.to_str().unwrap(), "--on", "slurm"],
            None,
            "broken.toml",
        ),
        (vec![p, "--on", "nonsense"], None, "--on slurm"),
        (
            vec![p, "--on", "slurm", "--machines", "0"],
            None,
            "--machines",
        ),
        (
            vec![p, "--on", "slurm"],
            Some(("SBATCH_TIMELIMIT", "bogus")),
            "Slurm refuses",
        ),
    ];
    for (args, env, needle) in cases {
        let mut c = sb.cmd();
        c.arg("run")
            .args(&args)
            .args(["--out", dir.to_str().unwrap()]);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} made {}", dir.display());
        assert_eq!(queued(name), "", "{args:?} submitted a job");
    }
    sb.assert_clean();
}

/// The plan with a key no plan takes.
fn plan_text_with_error(name: &str) -> String {
    plan(name).replace("reps = 3", "reps = 3\nrepz = 4")
}
