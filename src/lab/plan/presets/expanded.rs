//! Every preset as it expands — its settings, testbeds, workloads (with what `--dry-run` prints
//! of each), aging, crash points, questions, the notes made while fitting it (their line
//! numbers aside: they say where the preset is written, not what runs) and the spec hash of
//! every run of the first round, at the default scale and at the smoke tests' — against a
//! recorded file, so a change in how presets are written (or read) that changes what runs is
//! caught.
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
        "describe": w.describe(),
    });
    // Only where it is on, so the record of every other preset stays as it was.
    if w.keep_image {
        v["keep_image"] = json!(true);
    }
    v
}

/// A note without the line numbers it names (`the workload at line 23 of preset lowmem` →
/// `the workload at line _`): where a preset writes an entry is not what runs.
fn without_lines(note: &str) -> String {
    let mut out = String::new();
    let mut rest = note;
    while let Some(i) = rest.find("line ") {
        out.push_str(&rest[..i + 5]);
        rest = &rest[i + 5..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push('_');
            rest = &rest[digits..];
            if let Some(r) = rest.strip_prefix(" of preset ") {
                rest = r.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '-');
            }
        }
    }
    out + rest
}

/// The plan as it runs: everything but where its entries are written.
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
        "source": plan.source,
        "crash": format!("{:?}", plan.crash),
        "keep_image": plan.keep_image,
        "notes": plan.notes.iter().map(|n| without_lines(n)).collect::<Vec<_>>(),
        "testbeds": plan.testbeds.iter().zip(&written.testbeds).map(|(t, w)| json!({
            "spec": t.spec,
            "describe": t.spec.describe(),
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

#[test]
fn notes_lose_their_line_numbers_only() {
    assert_eq!(
        without_lines("added -N 9 (the workload at line 23 of preset lowmem-x) at line 4"),
        "added -N 9 (the workload at line _) at line _"
    );
    assert_eq!(without_lines("no line here"), "no line here");
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
        let (mut a, mut b) = (expanded(&a), expanded(&b));
        // Named for where they come from, the one difference.
        a["source"] = Value::Null;
        b["source"] = Value::Null;
        assert_eq!(a, b, "{}", p.name);
    }
}
