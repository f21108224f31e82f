//! The append test as a plan workload (`kind = "append"`, needs root, loop devices and
//! mkfs.ext2; skips with a reason otherwise, fails under CI): a plan with repetitions runs it,
//! each run's phases hold the aged and the fresh read with the layout of each tree, and a
//! question comparing the fresh read (baseline) with the aged read (variant) gets a ratio.

use crate::support::{have_fs, Sandbox};
use fsgauge::results::{Compares, Question};

const PLAN: &str = r#"name = "append-tiny"
reps = 2
cold = "drop"

[[testbed]]
label = "ext2"
fs = "ext2"
size = "64M"
backing = "ram"

[[workload]]
kind = "append"
usage = [30.0, 60.0]
tree = "4x10"
append = "4K"

[[question]]
id = "aged-read"
ask = "Do aged files read slower than a fresh copy?"
baseline = "read-fresh-60"
variant = "read-aged-60"
metric = "mb_per_s"
published = 0.1
source = "study 3: up to 90% read-performance loss"
"#;

#[test]
fn append_runs_from_a_plan_and_answers_aged_versus_fresh() {
    if !have_fs("ext2") {
        return;
    }
    let sb = Sandbox::new();
    let plan = sb.path().join("append.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let out = sb
        .bench(&["run", plan.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = sb.results();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(r.workload.kind, "append");
        let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "age-30",
                "copy-30",
                "read-aged-30",
                "read-fresh-30",
                "age-60",
                "copy-60",
                "read-aged-60",
                "read-fresh-60"
            ]
        );
        for k in ["extents_per_file", "layout_score", "read_kbps"] {
            assert!(r.workload.metric(k).is_some(), "{k} is not declared");
        }
        assert!(r.undeclared_metrics().is_empty());
        let ph = |n: &str| r.phases.iter().find(|p| p.name == n).unwrap();
        let (aged, fresh) = (ph("read-aged-60"), ph("read-fresh-60"));
        // Both reads read the same bytes, each with the layout of its own tree: round-robin
        // appends fragment ext2's files; the copy onto the twin is laid out whole.
        assert_eq!(aged.extra["bytes"], fresh.extra["bytes"]);
        assert!(aged.extra["bytes"] > 0.0);
        let (ea, ef) = (
            aged.extra["extents_per_file"],
            fresh.extra["extents_per_file"],
        );
        assert!(ea > ef, "aged {ea} extents/file, fresh {ef}");
        assert_eq!(ph("copy-60").extra["extents_per_file"], ef);
        assert_eq!(ph("age-60").extra["extents_per_file"], ea);
        assert_eq!(
            r.layout.as_ref().unwrap()["rows"].as_array().unwrap().len(),
            2
        );
    }
    // The question study 3 asks, from the plan: every result carries it.
    for r in &runs {
        let study = r.study.as_ref().expect("plan results carry their study");
        assert_eq!(study.questions.len(), 1);
        assert_eq!(study.questions[0].compares, Compares::Phases);
    }
    let q = runs[0].study.as_ref().unwrap().questions[0].clone();
    let found = fsgauge::analysis::findings::findings(&runs);
    assert_eq!(found.len(), 1);
    let f = &found[0];
    assert_eq!((f.base_values.len(), f.variant_values.len()), (2, 2));
    let ratio = f.ratio.as_ref().expect("a ratio");
    assert!(ratio.low > 0.0 && ratio.low <= ratio.ratio && ratio.ratio <= ratio.high);
    // The layout question on the same phase pair.
    let layout = Question {
        metric: "extents_per_file".into(),
        ..q
    };
    let f = fsgauge::analysis::findings::evaluate(&layout, &runs);
    assert!(f.ratio.expect("a ratio").ratio > 1.0);
    sb.assert_clean();
}
