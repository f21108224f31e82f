//! `fsgauge compare BASE NEW --findings`: two runs of one study, question by question, with
//! the new ratio against the base's interval and the ratio of the two ratios.

use std::path::{Path, PathBuf};
use std::process::Output;

use fsgauge::results::*;

use crate::report_fixtures::{create_time_question, phase, result, write_all};

/// Each pair's own log-noise (rotated by `shift`, so two sets differ in their noise).
const NOISE: [f64; 6] = [0.03, -0.02, 0.01, -0.04, 0.02, 0.0];

/// Six repetitions of testbeds `a` and `b` asked "does b take longer to create the tree than
/// a?": a's create takes 10 s × a drift of the repetition, b's that × `effect` × its noise.
fn study(dir: &Path, effect: f64, shift: usize, with_question: bool) -> PathBuf {
    let q = create_time_question();
    let mut out = Vec::new();
    for rep in 0..6u32 {
        let drift = 1.0 + 0.1 * (rep as f64 * 1.3 + shift as f64).sin();
        let a = 10.0 * drift;
        let b = a * effect * NOISE[(rep as usize + shift) % NOISE.len()].exp();
        for (label, wall) in [("a", a), ("b", b)] {
            let mut r = result(
                label,
                "tree",
                serde_json::json!({"dirs": 2, "files": 10}),
                rep,
                vec![phase("create", wall, 1.0, 22, 0, &[1000], &[1], 1)],
            );
            r.study = Some(StudyInfo {
                plan: "t".into(),
                workload: "tree".into(),
                questions: if with_question {
                    vec![q.clone()]
                } else {
                    Vec::new()
                },
                scale: 1.0,
            });
            out.push(r);
        }
    }
    write_all(dir, &out);
    dir.to_path_buf()
}

fn compare(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(base: &Path, new: &Path) -> serde_json::Value {
    let o = compare(&[
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "--findings",
        "--format",
        "json",
    ]);
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn num(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// The same effect with other noise: both decide "larger", and the two agree; a doubled
/// effect is named as disagreeing, with new / base near 1.33 and an interval without 1.
#[test]
fn two_runs_of_a_study_agree_or_are_named_where_they_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let base = study(&tmp.path().join("base"), 1.5, 0, true);
    let same = study(&tmp.path().join("same"), 1.5, 3, true);
    let more = study(&tmp.path().join("more"), 2.0, 3, true);

    let v = json(&base, &same);
    let row = &v["rows"][0];
    assert_eq!(row["question"], "create-time");
    assert_eq!(row["base"]["decision"], "larger");
    assert_eq!(row["new"]["decision"], "larger");
    assert_eq!(row["same_decision"], true);
    assert_eq!(row["agree"], true, "{row}");
    let (lo, hi) = (
        num(row, "/new_over_base/low"),
        num(row, "/new_over_base/high"),
    );
    assert!(lo < 1.0 && 1.0 < hi, "{row}");
    // new / base is the quotient of the two ratios.
    let q = num(row, "/new/ratio/ratio") / num(row, "/base/ratio/ratio");
    assert!((num(row, "/new_over_base/ratio") - q).abs() < 1e-12);
    // Its interval is wider than either side's own (both sides' noise adds).
    let width = |p: &str| (num(row, &format!("{p}/high")) / num(row, &format!("{p}/low"))).ln();
    assert!(width("/new_over_base") > width("/base/ratio").max(width("/new/ratio")));

    let v = json(&base, &more);
    let row = &v["rows"][0];
    assert_eq!(row["agree"], false, "{row}");
    assert_eq!(row["inside"], false, "{row}");
    assert!(
        (num(row, "/new_over_base/ratio") - 2.0 / 1.5).abs() < 0.05,
        "{row}"
    );
    assert!(num(row, "/new_over_base/low") > 1.0, "{row}");

    let text = stdout(&compare(&[
        base.to_str().unwrap(),
        more.to_str().unwrap(),
        "--findings",
        "--format",
        "table",
    ]));
    assert!(
        text.starts_with("1 question answered by both: 1 decided alike, 0 new ratios inside the base's interval, 0 agree by the two-sample test\ndisagree: create-time: new / base 1.3"),
        "{text}"
    );
    assert!(text.contains("new / base (95% CI)"), "{text}");

    let csv = stdout(&compare(&[
        base.to_str().unwrap(),
        same.to_str().unwrap(),
        "--findings",
        "--format",
        "csv",
    ]));
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("question,disk,metric,published,base_ratio,base_low,base_high"));
    let row = lines.next().unwrap();
    assert!(
        row.starts_with("create-time,this machine,") && row.ends_with(",yes"),
        "{row}"
    );
}

/// Results without questions, and --findings with a testbed filter, are refused with what
/// to do, and nothing is printed on stdout.
#[test]
fn compare_findings_refuses_results_without_questions_and_testbed_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let base = study(&tmp.path().join("base"), 1.5, 0, true);
    let bare = study(&tmp.path().join("bare"), 1.5, 0, false);
    let o = compare(&[base.to_str().unwrap(), bare.to_str().unwrap(), "--findings"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the new set holds no study's questions")
            && err.contains("leave out --findings"),
        "{err}"
    );
    let o = compare(&[
        base.to_str().unwrap(),
        base.to_str().unwrap(),
        "--findings",
        "--base-testbed",
        "a",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot be used with"), "{err}");
}
