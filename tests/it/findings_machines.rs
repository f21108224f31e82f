//! Findings over results from several machines (one directory per host, as a Slurm array's
//! tasks or several runs give them to `fsgauge report`): pairs within each machine, each
//! machine's ratio, the pooled one, and a warning naming the machines that disagree.

use std::path::{Path, PathBuf};

use fsgauge::analysis::stats::ratio_of_means;
use fsgauge::results::*;

use crate::report_fixtures::{create_time_question, phase, result, write_all};

/// Log-noise of the variant's run in repetition k (the pair's own noise), rotated per machine.
const NOISE: [f64; 5] = [0.010, -0.015, 0.020, -0.005, 0.0];

/// A machine: its host name, its offset (how much slower than the first at everything) and
/// the effect b / a it shows.
struct Machine {
    host: &'static str,
    offset: f64,
    effect: f64,
}

/// Five repetitions of testbeds `a` and `b` on one machine, asked "does b take longer to
/// create the tree than a?": a's create takes 10 s × the machine's offset × a drift of the
/// repetition shared by both runs of the pair, b's that × the effect × its own noise.
fn runs(m: &Machine, index: usize) -> Vec<RunResult> {
    let q = create_time_question();
    let mut out = Vec::new();
    for rep in 0..5u32 {
        let drift = 1.0 + 0.1 * ((rep as f64) * 1.7 + index as f64).sin();
        let a = 10.0 * m.offset * drift;
        let b = a * m.effect * NOISE[(rep as usize + index) % NOISE.len()].exp();
        for (label, wall) in [("a", a), ("b", b)] {
            let mut r = result(
                label,
                "tree",
                serde_json::json!({"dirs": 2, "files": 10}),
                rep,
                vec![phase("create", wall, 1.0, 22, 0, &[1000], &[1], 1)],
            );
            r.host.hostname = m.host.into();
            r.study = Some(StudyInfo {
                plan: "t".into(),
                workload: "tree".into(),
                questions: vec![q.clone()],
                scale: 1.0,
            });
            out.push(r);
        }
    }
    out
}

/// Each machine's runs in a directory of its own under `root`.
fn write(root: &Path, machines: &[Machine]) -> Vec<PathBuf> {
    machines
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let dir = root.join(m.host);
            write_all(&dir, &runs(m, i));
            dir
        })
        .collect()
}

/// `fsgauge report DIRS --format FORMAT`.
fn report(dirs: &[PathBuf], format: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("report")
        .args(dirs)
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(out.status.success(), "report {format}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one finding of `report --format json`.
fn finding(dirs: &[PathBuf]) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_str(&report(dirs, "json")).unwrap();
    json["findings"][0].clone()
}

fn f64_at(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

const fn machine(host: &'static str, offset: f64, effect: f64) -> Machine {
    Machine {
        host,
        offset,
        effect,
    }
}

/// (a) Three machines, each with b taking 1.5× a's time: the pooled ratio lies within every
/// machine's interval, nothing is said to disagree, and every format names each machine.
#[test]
fn machines_with_the_same_effect_pool_without_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = write(
        tmp.path(),
        &[
            machine("node1", 1.0, 1.5),
            machine("node2", 1.3, 1.5),
            machine("node3", 0.8, 1.5),
        ],
    );
    let f = finding(&dirs);
    let pooled = f64_at(&f["ratio"], "ratio");
    assert!((pooled - 1.5).abs() < 0.02, "{f}");
    let machines = f["pooled"]["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 3, "{f}");
    for m in machines {
        let r = &m["ratio"];
        assert!(
            f64_at(r, "low") < pooled && pooled < f64_at(r, "high"),
            "{} {f}",
            m["host"]
        );
        assert_eq!(r["n_base"], 5);
    }
    assert_eq!(f["pooled"]["disagreeing"], serde_json::json!([]), "{f}");
    assert_eq!(f["ratio"]["n_base"], 15);
    assert_eq!(f["decision"], "larger");
    let s = f["sentence"].as_str().unwrap();
    assert!(s.starts_with("b has 1.5"), "{s}");
    assert!(s.contains(", n = 15 pairs on 3 machines)"), "{s}");
    assert!(
        s.contains("; by machine (pairs within each): node1 1.5"),
        "{s}"
    );
    assert!(!s.contains("disagree"), "{s}");
    let text = report(&dirs, "table");
    assert!(text.contains("create-time · node3"), "{text}");
    assert!(text.contains("15 pairs on 3 machines"), "{text}");
    // The forest plot: the pooled row, then a lighter row per machine.
    let html = report(&dirs, "html");
    assert!(html.contains(">create-time · 3 machines<"), "{html}");
    assert_eq!(
        html.matches("<g class=\"row machine\">").count(),
        3,
        "{html}"
    );
}

/// (b) Two machines agree that b takes 1.5× as long, a third has the opposite (b at 0.67×):
/// the sentence says first that the machines disagree and names the third alone; the
/// findings table marks it.
#[test]
fn a_machine_with_the_opposite_effect_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = write(
        tmp.path(),
        &[
            machine("node1", 1.0, 1.5),
            machine("node2", 1.2, 1.5),
            machine("node3", 0.9, 1.0 / 1.5),
        ],
    );
    let f = finding(&dirs);
    assert_eq!(
        f["pooled"]["disagreeing"],
        serde_json::json!(["node3"]),
        "{f}"
    );
    assert!(f64_at(&f["pooled"], "p_heterogeneity") < 0.001, "{f}");
    let s = f["sentence"].as_str().unwrap();
    assert!(
        s.starts_with("the machines disagree beyond their intervals (node3, F test of the machine, p < 0.001): node3 has 0.66"),
        "{s}"
    );
    assert!(s.contains("against the machines' median 1.5"), "{s}");
    let md = report(&dirs, "md");
    assert!(md.contains("| larger, machines disagree: node3 |"), "{md}");
    assert!(md.contains("| smaller, disagrees |"), "{md}");
    // Two machines that disagree are both named.
    let two = write(
        &tmp.path().join("two"),
        &[machine("node1", 1.0, 1.5), machine("node3", 0.9, 1.0 / 1.5)],
    );
    let f = finding(&two);
    assert_eq!(
        f["pooled"]["disagreeing"],
        serde_json::json!(["node1", "node3"]),
        "{f}"
    );
}

/// (c) Pairs are formed within machines: with machine offsets of 0.6× to 1.6× (one machine
/// far faster at everything) the pooled interval is the one without offsets (the offset
/// cancels in each pair's ratio, to rounding), while pooling the same runs as one sample —
/// what a finding did before it knew machines — makes the offsets noise: an interval over
/// three times as wide on the log scale.
#[test]
fn pairs_are_formed_within_machines_so_offsets_cancel() {
    let tmp = tempfile::tempdir().unwrap();
    let even = write(
        &tmp.path().join("even"),
        &[
            machine("node1", 1.0, 1.5),
            machine("node2", 1.0, 1.5),
            machine("node3", 1.0, 1.5),
        ],
    );
    let offset = [
        machine("node1", 1.0, 1.5),
        machine("node2", 1.6, 1.5),
        machine("node3", 0.6, 1.5),
    ];
    let uneven = write(&tmp.path().join("uneven"), &offset);
    let (fe, fu) = (finding(&even), finding(&uneven));
    let width =
        |f: &serde_json::Value| (f64_at(&f["ratio"], "high") / f64_at(&f["ratio"], "low")).ln();
    assert!(
        (width(&fu) - width(&fe)).abs() < 1e-6 * width(&fe),
        "offsets widened the pooled interval: {} against {}",
        width(&fu),
        width(&fe)
    );
    let values = |f: &serde_json::Value, side: &str| -> Vec<f64> {
        f[side]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let naive = ratio_of_means(&values(&fu, "base_values"), &values(&fu, "variant_values"))
        .expect("a naive ratio");
    let naive_width = (naive.high / naive.low).ln();
    assert!(
        naive_width > 3.0 * width(&fu),
        "naive {naive_width} against pooled {}",
        width(&fu)
    );
}

/// A Slurm array that gave each of three machines one round (repetition k on node k): one
/// pair per machine, so the machines are the replicates — the pooled ratio is the paired one
/// over the three pairs, and the sentence says their agreement is not tested.
#[test]
fn one_round_per_machine_pools_the_machines_as_replicates() {
    let tmp = tempfile::tempdir().unwrap();
    let nodes = [
        machine("node0", 1.0, 1.5),
        machine("node1", 1.4, 1.5),
        machine("node2", 0.7, 1.5),
    ];
    let dirs: Vec<PathBuf> = nodes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let dir = tmp.path().join(m.host);
            let round: Vec<RunResult> = runs(m, 0)
                .into_iter()
                .filter(|r| r.rep == i as u32)
                .collect();
            write_all(&dir, &round);
            dir
        })
        .collect();
    let f = finding(&dirs);
    assert_eq!(f["ratio"]["n_base"], 3, "{f}");
    assert!((f64_at(&f["ratio"], "ratio") - 1.5).abs() < 0.03, "{f}");
    assert!(f["pooled"].get("p_heterogeneity").is_none(), "{f}");
    let s = f["sentence"].as_str().unwrap();
    assert!(s.contains("n = 3 pairs on 3 machines"), "{s}");
    assert!(
        s.contains("one pair per machine, so the machines are the replicates"),
        "{s}"
    );
}

/// Where a compared phase's disk clock stopped, the findings table has its wall-clock column:
/// each machine's row keeps its cells under the right headers (a `-` under `wall clock`, its
/// p under `p`).
#[test]
fn machine_rows_line_up_with_the_wall_clock_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = [machine("node1", 1.0, 1.5), machine("node2", 1.2, 1.5)]
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut rs = runs(m, i);
            for r in &mut rs {
                let b = r.testbed.label == "b";
                for p in &mut r.phases {
                    p.device_model = Some(fsgauge::results::device::ModelledIo {
                        pause_ns: if b { (p.wall_s * 0.1e9) as u64 } else { 0 },
                        ..Default::default()
                    });
                }
            }
            let dir = tmp.path().join(m.host);
            write_all(&dir, &rs);
            dir
        })
        .collect();
    let md = report(&dirs, "md");
    let header = "| question | baseline | variant | metric | ratio | 95% CI | wall clock | p | n | decision | published | agrees |";
    assert!(md.contains(header), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| create-time · node2 |"))
        .unwrap_or_else(|| panic!("node2's row: {md}"));
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
    assert_eq!(cells.len(), 12, "{row}");
    assert_eq!((cells[6], cells[8]), ("-", "5 pairs"), "{row}");
    assert!(cells[7].starts_with("p "), "{row}");
    let pooled = md
        .lines()
        .find(|l| l.starts_with("| create-time |"))
        .unwrap_or_else(|| panic!("the pooled row: {md}"));
    assert!(pooled.contains("| 10 pairs on 2 machines |"), "{pooled}");
}

/// The runs of one testbed label of every machine, written into `dir` (one side of a
/// `compare`).
fn write_side(dir: &Path, machines: &[Machine], label: &str) -> PathBuf {
    for (i, m) in machines.iter().enumerate() {
        let side: Vec<RunResult> = runs(m, i)
            .into_iter()
            .filter(|r| r.testbed.label == label)
            .collect();
        write_all(dir, &side);
    }
    dir.to_path_buf()
}

/// `fsgauge compare BASE NEW --format FORMAT`.
fn compare(base: &Path, new: &Path, format: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgauge"))
        .arg("compare")
        .args([base, new])
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(out.status.success(), "compare {format}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The create phase's wall-time row of `compare --format json`.
fn create_row(json: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "create" && r["unit"] == "s" && r["better"] == "lower")
        .unwrap_or_else(|| panic!("no create time row: {v}"))
        .clone()
}

/// `compare` over three machines with the same effect pools like a finding: pairs within each
/// machine, each machine's ratio with its interval (all holding the pooled one), the pooled
/// ratio of 15 pairs, no disagreement; the table has a row per machine.
#[test]
fn compare_over_machines_pools_pairs_within_each_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let ms = [
        machine("node1", 1.0, 1.5),
        machine("node2", 1.6, 1.5),
        machine("node3", 0.6, 1.5),
    ];
    let base = write_side(&tmp.path().join("base"), &ms, "a");
    let new = write_side(&tmp.path().join("new"), &ms, "b");
    let row = create_row(&compare(&base, &new, "json"));
    let pooled = f64_at(&row["ratio"], "ratio");
    assert!((pooled - 1.5).abs() < 0.02, "{row}");
    assert_eq!(row["ratio"]["n_base"], 15, "{row}");
    let machines = row["machines"]["pooled"]["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 3, "{row}");
    for m in machines {
        let r = &m["ratio"];
        assert!(
            f64_at(r, "low") < pooled && pooled < f64_at(r, "high"),
            "{row}"
        );
    }
    assert_eq!(
        row["machines"]["pooled"]["disagreeing"],
        serde_json::json!([])
    );
    // The test is the pooled ratio's, so the machines' offsets are not its noise.
    assert_eq!(row["p_value"], row["ratio"]["p"], "{row}");
    assert!(f64_at(&row, "p_value") < 1e-6, "{row}");
    assert_eq!(row["verdict"], "worse", "{row}");
    // Offsets of 0.6× to 1.6× cancel within the pairs: far narrower than one sample's.
    let naive = ratio_of_means(&[10.0, 16.0, 6.0], &[15.0, 24.0, 9.0]).unwrap();
    assert!(f64_at(&row["ratio"], "high") / pooled < naive.high / naive.ratio);
    let text = compare(&base, &new, "table");
    assert!(text.contains("15 pairs on 3 machines"), "{text}");
    assert!(text.contains("a → b · node3"), "{text}");
    assert!(!text.contains("disagree beyond"), "{text}");
    let csv = compare(&base, &new, "csv");
    assert!(csv.contains("\na → b · node2,tree,create,"), "{csv}");
}

/// `compare` says first which machine disagrees, and marks it in its row.
#[test]
fn compare_names_the_machine_that_disagrees() {
    let tmp = tempfile::tempdir().unwrap();
    let ms = [
        machine("node1", 1.0, 1.5),
        machine("node2", 1.2, 1.5),
        machine("node3", 0.9, 1.0 / 1.5),
    ];
    let base = write_side(&tmp.path().join("base"), &ms, "a");
    let new = write_side(&tmp.path().join("new"), &ms, "b");
    let row = create_row(&compare(&base, &new, "json"));
    assert_eq!(
        row["machines"]["pooled"]["disagreeing"],
        serde_json::json!(["node3"]),
        "{row}"
    );
    // One warning for the comparison, first, naming the machine and every figure it
    // disagrees in (it was one a figure, the same sentence repeated).
    let md = compare(&base, &new, "md");
    let warnings: Vec<&str> = md.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{md}");
    let all: serde_json::Value = serde_json::from_str(&compare(&base, &new, "json")).unwrap();
    let figures: Vec<&str> = all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["machines"]["pooled"]["disagreeing"] == serde_json::json!(["node3"]))
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert!(figures.len() > 1, "{all}");
    let w = warnings[0];
    assert!(
        w.starts_with(&format!(
            "warning: the machines disagree beyond their intervals (F test of the machine, p < 0.05) in {} figures: node3 (a → b / tree / create: ",
            figures.len()
        )),
        "{w}"
    );
    for f in &figures {
        assert!(w.contains(&format!(" {f}")), "{f} in {w}");
    }
    assert!(md.contains(", machines disagree: node3 |"), "{md}");
    assert!(md.contains("| disagrees |"), "{md}");
    // One machine: no pooling (the row is the one compare always made).
    let one = write_side(&tmp.path().join("one-a"), &ms[..1], "a");
    let one_new = write_side(&tmp.path().join("one-b"), &ms[..1], "b");
    let row = create_row(&compare(&one, &one_new, "json"));
    assert!(row.get("machines").is_none(), "{row}");
}
