//! Every preset as it expands — testbeds, workloads, questions and the spec hash of every run of
//! the first round, at the default scale and at the smoke tests' — against a recorded file, so
//! a change in how presets are written (or read) that changes what runs is caught.
//! `FSGAUGE_BLESS=1 cargo test --lib presets_expand` records it anew.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::PRESETS;
use crate::lab::plan::{matrix, parse, ParseOptions, Plan, PlanWorkload};

/// Where the expansion is recorded.
const GOLDEN: &str = "tests/golden/presets-expanded.json";

/// The workdir every testbed is given, so that the record does not depend on the machine's
/// temporary directory (the run hashes include it).
const WORKDIR: &str = "/fsgauge-golden-workdir";

fn workload(w: &PlanWorkload) -> Value {
    let mut v = json!({
        "kind": w.kind,
        "label": w.label,
        "ranks": w.ranks,
        "given": w.given,
        "params": w.workload.params(),
    });
    // Only where it is on, so the record of every other preset stays as it was.
    if w.keep_image {
        v["keep_image"] = json!(true);
    }
    v
}

/// The plan as it runs: everything but where its entries are written (and the notes, which
/// name lines).
fn expanded(written: &Plan) -> Value {
    let mut plan = written.clone();
    for t in &mut plan.testbeds {
        t.spec.workdir = PathBuf::from(WORKDIR);
        // Every testbed in the matrix, whatever mkfs programs this machine has.
        t.optional = false;
    }
    let m = matrix(&plan);
    json!({
        "name": plan.name,
        "description": plan.description,
        "reps": format!("{:?}", plan.reps),
        "fresh": plan.fresh.name(),
        "cold": plan.cold.name(),
        "seed": plan.seed,
        "scale": plan.scale,
        "layout": plan.layout,
        "testbeds": plan.testbeds.iter().zip(&written.testbeds).map(|(t, w)| json!({
            "spec": t.spec,
            "mem_limit": t.mem_limit,
            "optional": w.optional,
        })).collect::<Vec<_>>(),
        "workloads": plan.workloads.iter().map(workload).collect::<Vec<_>>(),
        "age": plan.age.as_ref().map(workload),
        "questions": plan.questions.iter().map(|q| &q.question).collect::<Vec<_>>(),
        "runs": m.runs.iter().map(|r| json!([
            plan.testbeds[r.testbed].spec.label,
            plan.workloads[r.workload].label,
            r.rep,
            r.hash,
        ])).collect::<Vec<_>>(),
    })
}

#[test]
fn presets_expand_as_recorded() {
    let mut all = serde_json::Map::new();
    for scale in [None, Some(0.02)] {
        for p in PRESETS {
            let opts = ParseOptions {
                scale,
                workdir: Some(std::env::temp_dir()),
                ..Default::default()
            };
            let plan = parse(p.toml, &p.source(), &opts)
                .unwrap_or_else(|e| panic!("preset {}: {e:#}", p.name));
            let key = format!("{} --scale {}", p.name, scale.unwrap_or(1.0));
            all.insert(key, expanded(&plan));
        }
    }
    let got = serde_json::to_string_pretty(&Value::Object(all)).expect("JSON") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("FSGAUGE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir");
        std::fs::write(&path, &got).expect("write");
    }
    let want = std::fs::read_to_string(&path).expect(GOLDEN);
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or(got.lines().count().min(want.lines().count()), |i| i + 1);
        panic!("the presets expand differently from {GOLDEN}: first difference at line {line}");
    }
}

/// What `presets show` prints of a preset is a plan on its own that runs as the preset does:
/// the whole plan under the preset's own header, without `extends`.
#[test]
fn every_preset_s_whole_text_expands_as_the_preset() {
    let opts = ParseOptions {
        workdir: Some(std::env::temp_dir()),
        ..Default::default()
    };
    for p in PRESETS {
        let whole = p.plan_text().expect("resolves");
        let header: String = p
            .toml
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(
            !header.is_empty() && whole.starts_with(&header),
            "{}",
            p.name
        );
        let keys = |k: &str| whole.lines().filter(|l| l.starts_with(k)).count();
        assert_eq!(keys("extends") + keys("drop_"), 0, "{}", p.name);
        let (a, b) = (
            parse(p.toml, &p.source(), &opts).expect("the preset"),
            parse(&whole, "shown.toml", &opts).expect("what show prints"),
        );
        assert_eq!(expanded(&a), expanded(&b), "{}", p.name);
    }
}
