//! Plans that ask questions: `[[question]]`s listed by `--dry-run` and refused at their line
//! and column before anything is made; every result of the plan carries its study; the
//! findings over the result files answer the questions; and `reps = "auto"` repeats the cells
//! of undecided questions (both sides), up to the cap, leaving decided ones at three.
//! The runs need root, loop devices and mkfs.ext4 (the dry-run and refusal tests do not).

use std::collections::BTreeMap;

use fsgauge::analysis::findings;
use fsgauge::analysis::stats::Decision;

use crate::support::Sandbox;

/// Two testbeds and two workload entries. `size` (small vs big files, what the device writes
/// while creating them) is decided after three repetitions: four times the data. `stalls`
/// (share of operations over 2 s, zero on both sides) cannot be decided: its cells run to the
/// cap. Lines: `size` at 30, `stalls` at 39 (its phase at 44:9).
const PLAN: &str = r#"name = "questions"
reps = "auto"
max_reps = 4

[[testbed]]
label = "plain"
fs = "ext4"
size = "256M"

[[testbed]]
label = "journal"
fs = "ext4"
size = "256M"
mount = "data=journal"

[[workload]]
label = "small"
kind = "tree"
dirs = 2
files = 8
file_size = "64K"

[[workload]]
label = "big"
kind = "tree"
dirs = 2
files = 8
file_size = "256K"

[[question]]
id = "size"
baseline = "small"
variant = "big"
testbed = "plain"
phase = "create"
metric = "dev_write_mb"
published = 4

[[question]]
id = "stalls"
baseline = "plain"
variant = "journal"
workload = "small"
phase = "create"
metric = "over_2s"
"#;

fn write_plan(sb: &Sandbox, text: &str) -> std::path::PathBuf {
    let p = sb.path().join("t.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn plan_questions_are_listed_by_dry_run_as_resolved() {
    let sb = Sandbox::new();
    let plan = write_plan(&sb, PLAN);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("reps auto (3 to 4, until every question is decided)"),
        "{text}"
    );
    assert!(
        text.contains("line 30   size: small -> big (workloads), testbed plain, phase create, metric dev_write_mb, published 4"),
        "{text}"
    );
    assert!(
        text.contains("line 39   stalls: plain -> journal (testbeds), workload small, phase create, metric over_2s"),
        "{text}"
    );
    assert!(
        text.contains("disk at the peak 256.00 MiB (one testbed at a time)"),
        "{text}"
    );
    // One filesystem per testbed: with questions, all of them at once.
    let plan = write_plan(
        &sb,
        &PLAN.replace("max_reps = 4", "max_reps = 4\nfresh = \"per-testbed\""),
    );
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("disk at the peak 512.00 MiB (every testbed at once"),
        "{text}"
    );
    let runs: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("runs (in order)"))
        .skip(1)
        .take(3)
        .collect();
    assert!(
        runs[0].contains("plain") && runs[1].contains("plain") && runs[2].contains("journal"),
        "repetition 0 of every cell first: {runs:?}"
    );
    assert!(!sb.out().exists());
    sb.assert_clean();
}

#[test]
fn plan_questions_that_cannot_be_answered_are_refused_before_anything_is_made() {
    let sb = Sandbox::new();
    for (bad, at, says) in [
        (
            PLAN.replace("variant = \"journal\"", "variant = \"jounral\""),
            "t.toml:42:11:",
            "[[question]] stalls field `variant`: \"jounral\" is not a testbed label, but the baseline \"plain\" is; testbeds: \"plain\", \"journal\"",
        ),
        (
            PLAN.replace("metric = \"over_2s\"", "metric = \"files_per_s\""),
            "t.toml:45:10:",
            "\"files_per_s\" is neither a core metric nor a figure of workload \"small\"; allowed: elapsed",
        ),
    ] {
        let plan = write_plan(&sb, &bad);
        for dry in [true, false] {
            let mut args = vec!["run", plan.to_str().unwrap()];
            if dry {
                args.push("--dry-run");
            }
            crate::support::refused(&sb, &args, &[at, says]);
        }
    }
}

/// Runs the plan (with `extra` replacing the first line's settings) and returns the results
/// it wrote, read back from the results directory.
fn run(sb: &Sandbox, text: &str) -> Vec<fsgauge::results::RunResult> {
    let plan = write_plan(sb, text);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.assert_clean();
    fsgauge::results::load_dir(&sb.out())
        .unwrap()
        .results
        .into_iter()
        .map(|f| f.result)
        .collect()
}

/// Runs per (testbed label, workload label).
fn counts(results: &[fsgauge::results::RunResult]) -> BTreeMap<(String, String), usize> {
    let mut n = BTreeMap::new();
    for r in results {
        let s = r
            .study
            .as_ref()
            .expect("every result of a plan carries its study");
        assert_eq!(s.plan, "questions");
        assert_eq!(s.questions.len(), 2);
        *n.entry((r.testbed.label.clone(), s.workload.clone()))
            .or_default() += 1;
    }
    n
}

fn check_answers(results: &[fsgauge::results::RunResult]) {
    let n = counts(results);
    let want = |t: &str, w: &str| n.get(&(t.to_string(), w.to_string())).copied();
    // plain/small is in both questions; the undecided one gives it its 4th repetition.
    assert_eq!(want("plain", "small"), Some(4), "{n:?}");
    assert_eq!(
        want("journal", "small"),
        Some(4),
        "both sides of the undecided question: {n:?}"
    );
    assert_eq!(
        want("plain", "big"),
        Some(3),
        "only in the decided question: {n:?}"
    );
    assert_eq!(want("journal", "big"), Some(3), "in no question: {n:?}");

    let fs = findings::findings(results);
    let ids: Vec<&str> = fs.iter().map(|f| f.question.id.as_str()).collect();
    assert_eq!(ids, ["size", "stalls"]);
    let size = &fs[0];
    assert_eq!((size.base_values.len(), size.variant_values.len()), (4, 3));
    assert_eq!(size.decision, Some(Decision::Larger), "{size:?}");
    let ratio = size.ratio.expect("a ratio");
    assert!(
        ratio.low > 1.0 && ratio.ratio > 2.0,
        "four times the data: {ratio:?}"
    );
    assert_eq!(size.agrees, Some(true));
    assert!(!size.undecided());
    let stalls = &fs[1];
    assert_eq!(
        (stalls.base_values.len(), stalls.variant_values.len()),
        (4, 4)
    );
    assert!(stalls.undecided() && stalls.problem.is_some(), "{stalls:?}");
}

#[test]
fn plan_questions_decide_how_often_each_cell_runs() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let results = run(&sb, PLAN);
    check_answers(&results);
    // The result files, as written, match the published schema (study included).
    for f in std::fs::read_dir(sb.out()).unwrap() {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(f.unwrap().path()).unwrap()).unwrap();
        assert!(doc["study"]["questions"].is_array(), "{doc}");
        crate::support::assert_schema(&doc);
    }
}

#[test]
fn plan_questions_per_testbed_keep_one_filesystem_per_testbed() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let results = run(
        &sb,
        &PLAN.replace("max_reps = 4", "max_reps = 4\nfresh = \"per-testbed\""),
    );
    check_answers(&results);
    for label in ["plain", "journal"] {
        let paths: std::collections::BTreeSet<&str> = results
            .iter()
            .filter(|r| r.testbed.label == label)
            .map(|r| r.testbed.path.as_str())
            .collect();
        assert_eq!(
            paths.len(),
            1,
            "{label}: one filesystem for all its runs: {paths:?}"
        );
    }
}

#[test]
fn plan_questions_naming_a_phase_the_runs_lack_stop_at_the_first_result() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let plan = write_plan(
        &sb,
        &PLAN.replace(
            "phase = \"create\"\nmetric = \"over_2s\"",
            "phase = \"creat\"\nmetric = \"over_2s\"",
        ),
    );
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    crate::support::assert_refused(
        &out,
        "a phase the tree workload does not have",
        &[
            "t.toml:44:9: [[question]] stalls field `phase`: the run of testbed \"plain\" with workload \"small\" has no phase \"creat\"; its phases: \"create\", \"delete\"",
        ],
    );
    let written = std::fs::read_dir(sb.out())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(written, 0, "nothing of the run was written");
    sb.assert_clean();
}

#[test]
fn plan_questions_added_later_keep_the_runs_and_reach_their_files_with_resume() {
    if !crate::support::have_fs("ext4") {
        return;
    }
    let sb = Sandbox::new();
    let fixed = PLAN.replace("reps = \"auto\"\nmax_reps = 4", "reps = 2");
    let bare = &fixed[..fixed.find("[[question]]").unwrap()];
    let before = run(&sb, bare);
    assert_eq!(before.len(), 8);
    assert!(before
        .iter()
        .all(|r| r.study.as_ref().is_some_and(|s| s.questions.is_empty())));
    let plan = write_plan(&sb, &fixed);
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--resume"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches("done before").count(),
        8,
        "same spec hashes: {err}"
    );
    let after: Vec<fsgauge::results::RunResult> = fsgauge::results::load_dir(&sb.out())
        .unwrap()
        .results
        .into_iter()
        .map(|f| f.result)
        .collect();
    assert_eq!(after.len(), 8);
    let hashes = |rs: &[fsgauge::results::RunResult]| {
        rs.iter()
            .map(|r| (r.spec_hash.clone(), r.phases[0].wall_s.to_bits()))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(hashes(&before), hashes(&after), "the measurements stay");
    let ids: Vec<String> = findings::questions(&after)
        .into_iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(
        ids,
        ["size", "stalls"],
        "the result files carry the new questions"
    );
    sb.assert_clean();
}

#[test]
fn plan_questions_are_absent_from_bench_results() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let out = sb
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
            "--json",
        ])
        .arg("--dir")
        .arg(&dir)
        .arg("--out")
        .arg(sb.out())
        .output()
        .unwrap();
    let v = crate::support::json_of(&out);
    // One result is printed as itself, several as a list.
    let runs = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
    assert!(runs.iter().all(|r| r.get("phases").is_some()), "{v}");
    assert!(runs.iter().all(|r| r.get("study").is_none()), "{v}");
    let files = fsgauge::results::load_dir(&sb.out()).unwrap().results;
    assert!(!files.is_empty() && files.iter().all(|f| f.result.study.is_none()));
}
